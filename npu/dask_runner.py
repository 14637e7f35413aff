"""Run independent tasks (sweep points, conformance tests) serially or on a Dask cluster.

``npu estimate --sweep`` and ``npu conformance`` take ``--scheduler ADDRESS`` (an existing
dask.distributed scheduler, e.g. one dask-jobqueue started on a SLURM/LSF/PBS farm) and
``--dask`` (a LocalCluster on this machine, ``--jobs`` worker processes).  Every task is a
plain module-level function of picklable arguments that returns a picklable result and
depends on nothing but its arguments, so the results are identical wherever it runs; they are
handed back in task order (:func:`map_tasks`) or as they finish with their index
(:func:`map_unordered`).

Dask is an optional extra (``pip install 'tosa-npu[dask]'``): this module imports it only
when a cluster is asked for and says so (exit 3) when it is missing.  Workers are processes
with one thread each: the tasks are pure Python and hold the GIL.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tosa_ir.errors import InvalidInput, Unsupported

__all__ = ["dask_client", "map_tasks", "map_unordered", "wants_dask"]

MISSING = ("Dask was asked for ({how}) but dask.distributed is not installed; "
           "install it with: pip install 'tosa-npu[dask]' (or: pip install dask distributed)")


def wants_dask(scheduler: str | None, dask: bool, jobs: int) -> bool:
    """Whether the options ask for a Dask cluster: an address, ``--dask``, or ``jobs > 1``."""
    return bool(scheduler) or dask or jobs > 1


@contextmanager
def dask_client(scheduler: str | None = None, jobs: int = 2):
    """A ``distributed.Client`` on ``scheduler`` or on a new LocalCluster of ``jobs`` worker
    processes (closed on exit)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        how = f"--scheduler {scheduler}" if scheduler else "--dask or --jobs > 1"
        raise Unsupported(MISSING.format(how=how)) from None
    if scheduler:
        try:
            client = Client(scheduler, timeout=30)
        except (OSError, TimeoutError, ValueError) as e:
            raise InvalidInput(f"--scheduler {scheduler}: cannot connect to a Dask scheduler: {e}") from None
        try:
            yield client
        finally:
            client.close()
        return
    cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def map_unordered(fn: Callable[[Any], Any], items: Iterable, *, scheduler: str | None = None,
                  dask: bool = False, jobs: int = 1) -> Iterator[tuple[int, Any]]:
    """``(index, fn(item))`` for every item, as they finish: here, one after the other, unless
    the options ask for Dask (:func:`wants_dask`).  A task's exception is raised here."""
    items = list(items)
    if not wants_dask(scheduler, dask, jobs):
        for i, item in enumerate(items):
            yield i, fn(item)
        return
    with dask_client(scheduler, jobs) as client:
        from distributed import as_completed  # importable: dask_client succeeded

        futures = client.map(fn, items, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for future in as_completed(futures):
            yield index[future.key], future.result()


def map_tasks(fn: Callable[[Any], Any], items: Iterable, *, scheduler: str | None = None,
              dask: bool = False, jobs: int = 1, progress: Callable[[int, int], None] | None = None) -> list:
    """``[fn(item) for item in items]``, here or on Dask (see :func:`map_unordered`);
    ``progress(done, total)`` after every finished task."""
    items = list(items)
    results: dict[int, Any] = {}
    for i, result in map_unordered(fn, items, scheduler=scheduler, dask=dask, jobs=jobs):
        results[i] = result
        if progress is not None:
            progress(len(results), len(items))
    return [results[i] for i in range(len(items))]
