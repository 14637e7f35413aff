"""Run independent tasks so that one task that dies or blows up cannot take the run with it.

``npu conformance`` runs other people's tests; a test that makes a backend allocate without
bound must become *that test's* failure, in one line, never the kernel's out-of-memory killer
picking a process, and never a ``BrokenProcessPool`` traceback for the whole run.  Two guards:

* **A memory budget per task.**  Each task runs under tosa_ir/address_space.py's cap: the
  process's size when the task starts plus ``budget`` bytes, so an allocation past it raises
  ``MemoryError`` inside the task, which the task's own error handling reports.  The cap is
  on address space, not resident memory, so the budget is generous; where the platform has
  no ``RLIMIT_AS`` it is not enforced (the second guard still holds).
* **A dead worker is one task's verdict.**  With ``jobs > 1`` at most ``jobs`` tasks are in
  flight, so when a worker process dies (a signal, a C-level abort) the suspects are known:
  each is re-run alone in a fresh process, and the one that dies alone is reported as
  :class:`WorkerDied` with its exit status; the others keep their real results.  The pool is
  then restarted for the remaining tasks.

``jobs == 1`` runs the tasks in this process (the memory budget still applies), so that a
serial run keeps the modules and caches warm and tracebacks stay debuggable.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from tosa_ir.address_space import address_space_cap

__all__ = ["WorkerDied", "default_budget", "map_guarded"]

GIB = 1 << 30


@dataclass(frozen=True)
class WorkerDied:
    """The process running a task ended without a result (``exitcode`` as multiprocessing
    reports it: negative for a signal)."""

    exitcode: int | None

    def describe(self) -> str:
        code = self.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if -code == signal.SIGKILL:
                return (f"the process running it was killed ({name}; on Linux typically the "
                        f"kernel's out-of-memory killer)")
            return f"the process running it died ({name})"
        return f"the process running it exited with status {code} without a result"


def default_budget(jobs: int) -> int:
    """Bytes of address space per task: 80% of physical memory shared by ``jobs`` tasks
    (at least 1 GiB); 0 (no limit) when the memory size is unknown."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0
    return max(GIB, int(total * 0.8) // max(1, jobs))


def _call(fn: Callable, item: Any, budget: int) -> Any:
    with address_space_cap(budget):
        return fn(item)


def _child(fn: Callable, item: Any, budget: int, conn) -> None:
    try:
        conn.send(_call(fn, item, budget))
    finally:
        conn.close()


def _run_alone(fn: Callable, item: Any, budget: int) -> Any:
    """``fn(item)`` in a fresh process: its result, or :class:`WorkerDied`."""
    ctx = multiprocessing.get_context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(fn, item, budget, send), daemon=True)
    proc.start()
    send.close()
    try:
        result = receive.recv()         # before join: a large result would fill the pipe
    except EOFError:
        result = None
    finally:
        receive.close()
    proc.join()
    return WorkerDied(proc.exitcode) if result is None else result


def map_guarded(fn: Callable[[Any], Any], work: Sequence[Any], jobs: int = 1,
                budget: int = 0) -> Iterator[tuple[int, Any]]:
    """Yield ``(index, fn(work[index]))`` for every item, in completion order, each call under
    a memory ``budget`` (bytes, 0: none) and, with ``jobs > 1``, in worker processes where a
    call whose process dies yields :class:`WorkerDied` instead of a result.  ``fn`` must be a
    module-level function (it is pickled)."""
    if jobs <= 1:
        for i, item in enumerate(work):
            yield i, _call(fn, item, budget)
        return
    pending = list(range(len(work)))
    pending.reverse()                   # pop() takes the next in order
    while pending:
        in_flight: dict = {}
        try:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                while pending or in_flight:
                    while pending and len(in_flight) < jobs:
                        i = pending.pop()
                        in_flight[pool.submit(_call, fn, work[i], budget)] = i
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in done:
                        result = future.result()        # raises BrokenProcessPool
                        yield in_flight.pop(future), result
        except BrokenProcessPool:
            # Every task in flight may be the one that killed its worker: run each alone.
            for future, i in sorted(in_flight.items(), key=lambda kv: kv[1]):
                if future.done() and future.exception() is None:
                    yield i, future.result()
                else:
                    yield i, _run_alone(fn, work[i], budget)
