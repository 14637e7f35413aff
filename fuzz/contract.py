"""The contract every input must satisfy, checked in a forked child with resource limits.

For each input the toolchain must either succeed (exit 0) or print exactly one line on
stderr and exit 2 (malformed) or 3 (unsupported): never a traceback, another exit code, a
hang or unbounded memory.  When both the reference interpreter and the ISA simulator accept a
graph, their outputs must agree bit for bit.

Why fork: importing numpy and the toolchain takes about a second, an input a few
milliseconds.  The parent imports everything once; each input runs in a child (``os.fork``)
with ``RLIMIT_AS`` (memory), ``RLIMIT_CPU`` and a wall-clock deadline, so a hostile input that blows up
kills only its child, and the verdict is read from the child's exit status and stderr.
"""
from __future__ import annotations

import io
import os
import resource
import select
import signal
import sys
import time
from dataclasses import dataclass

# Defaults of one input's budget: generous for the fixtures (a few MB, well under a second)
# and far below what a runaway would take.  Time is CPU time (RLIMIT_CPU: a busy loop is
# stopped by SIGXCPU), with a wall-clock deadline WALL_FACTOR times longer for inputs that
# block without computing (a FIFO): on a shared machine a wall-clock limit alone reports
# inputs that merely waited for a core as hangs.
MEMORY_LIMIT = 3 << 30
TIME_LIMIT = 30.0
WALL_FACTOR = 4
DISAGREE = 97          # child exit code: ref and isa both accepted and disagree


@dataclass
class Verdict:
    ok: bool            # the contract holds
    code: int | None    # exit code (None: killed by a signal or the timeout)
    stderr: str
    seconds: float
    why: str = ""       # what broke the contract


def _child(fn, args, err_fd: int, cpu_seconds: float) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    used = resource.getrusage(resource.RUSAGE_SELF)       # the limit counts the process's total
    cpu = int(used.ru_utime + used.ru_stime + cpu_seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    os.dup2(err_fd, 2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
    sys.stdout = open(os.devnull, "w")
    try:
        code = fn(*args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:       # a traceback: the contract is broken
        import traceback

        traceback.print_exc()
        code = 1
    sys.stderr.flush()
    os._exit(int(code or 0))


def check(fn, *args, timeout: float = TIME_LIMIT) -> Verdict:
    """Run ``fn(*args)`` (returning an exit code) in a limited child; judge the outcome."""
    r, w = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(fn, args, w, timeout)
    os.close(w)
    chunks, deadline, killed = [], start + WALL_FACTOR * timeout, False
    while True:                 # stderr until the child closes it (exits), or the deadline
        left = deadline - time.perf_counter()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            killed = True
            break
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            data = os.read(r, 65536)
            if not data:
                break
            if sum(map(len, chunks)) < 1 << 20:
                chunks.append(data)
    _, status = os.waitpid(pid, 0)
    os.close(r)
    seconds = time.perf_counter() - start
    err = b"".join(chunks).decode("utf-8", "replace")
    if killed:
        return Verdict(False, None, err, seconds, f"no answer within {WALL_FACTOR * timeout:.0f} s (hang)")
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return Verdict(False, None, err, seconds, f"more than {timeout:.0f} s of CPU time (hang)")
    if os.WIFSIGNALED(status):
        return Verdict(False, None, err, seconds, f"killed by signal {os.WTERMSIG(status)}")
    return _verdict(os.WEXITSTATUS(status), err, seconds)


def _verdict(code: int, err: str, seconds: float) -> Verdict:
    lines = [line for line in err.splitlines() if line.strip()]
    if "Traceback" in err or "MemoryError" in err:
        return Verdict(False, code, err, seconds, "traceback")
    if code == DISAGREE:
        return Verdict(False, code, err, seconds, "ref and isa disagree")
    if code == 0:
        return Verdict(True, code, err, seconds)
    if code not in (2, 3):
        return Verdict(False, code, err, seconds, f"exit code {code}")
    if len(lines) != 1:
        return Verdict(False, code, err, seconds, f"{len(lines)} lines on stderr")
    return Verdict(True, code, err, seconds)
