"""``npu estimate MODEL --sweep``: the cycle estimate over array sizes and memory sizes.

The grid and the per-point estimate are compiler/estimate/sweep.py's; this module adds the command
line (table, ``--csv``, ``--plot``) and runs the points here or on Dask (npu/dask_runner.py:
``--jobs N > 1`` or ``--dask`` start a LocalCluster, ``--scheduler ADDRESS`` uses an existing
one).  A point is the task :func:`sweep_task`: it loads the model itself from its path (so
only file names and numbers travel to workers, which must see the same files) and returns
plain data; the table is the same whichever way the points ran.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

from npu.output import write_text
from tosa_ir.errors import InvalidInput

__all__ = ["add_arguments", "run_sweep", "sweep_task"]


def add_arguments(p) -> None:
    """The sweep options of ``npu estimate``."""
    p.add_argument("--sweep", action="store_true",
                   help="estimate over array sizes x on-chip memory sizes: table of cycles, MAC "
                        "utilisation, bound and speed-up over 16x16 (--csv, --plot: of the sweep)")
    p.add_argument("--arrays", default="8,16,32,64", metavar="N,N,...",
                   help="--sweep: array sizes NxN; the bus is N bytes wide (default: %(default)s)")
    p.add_argument("--sram", default="1", metavar="S,S,...",
                   help="--sweep: on-chip memory depth factors (default: %(default)s)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="--sweep: N > 1 runs the points on a local Dask cluster of N workers")
    p.add_argument("--dask", action="store_true",
                   help="--sweep: run the points on a local Dask cluster (--jobs workers, at least 2)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="--sweep: run the points on the Dask scheduler at ADDRESS (tcp://host:port)")


def _numbers(text: str, kind, option: str) -> list:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InvalidInput(f"{option} {text!r}: expected comma-separated numbers") from None
    if not values:
        raise InvalidInput(f"{option} {text!r}: no values")
    return values


@lru_cache(maxsize=2)
def _graph(model: str, calibrate: str | None, stamp: float):
    from npu import backends

    loaded = backends.load_model(model, calibrate=calibrate)
    if loaded.graph is None:
        raise InvalidInput(f"{model}: a compiled program has no layers to estimate; give the model file")
    return loaded.graph


def sweep_task(item: tuple) -> dict:
    """One sweep point: ``(model path, calibrate, array, sram, per_layer)`` -> result as data."""
    from compiler.estimate.sweep import SweepPoint, estimate_point

    model, calibrate, array, sram, per_layer = item
    graph = _graph(model, calibrate, Path(model).stat().st_mtime)
    return estimate_point(graph, SweepPoint(array, sram), per_layer)


def run_sweep(args) -> int:
    from compiler.estimate.sweep import add_speedups, render_table, results_csv, sweep_points
    from compiler.estimate.sweep_plot import sweep_svg
    from npu import dask_runner

    if args.jobs < 1:
        raise InvalidInput(f"--jobs {args.jobs}: must be at least 1")
    if args.config not in (None, "default"):
        raise InvalidInput("--sweep makes its own configurations (--arrays, --sram); "
                           "--config does not apply")
    arrays = _numbers(args.arrays, int, "--arrays")
    srams = _numbers(args.sram, float, "--sram")
    try:
        points = sweep_points(arrays, srams)
    except ValueError as e:
        raise InvalidInput(f"--arrays/--sram: {e}") from None
    model = str(args.model)
    if not Path(model).exists():
        raise InvalidInput(f"{model}: no such file")
    _graph(model, args.calibrate, Path(model).stat().st_mtime)     # load errors: once, here
    items = [(model, args.calibrate, p.array, p.sram, args.per_layer) for p in points]
    use_dask = dask_runner.wants_dask(args.scheduler, args.dask, args.jobs)
    where = (f"Dask scheduler {args.scheduler}" if args.scheduler else
             f"a local Dask cluster of {max(args.jobs, 2)} workers" if use_dask else "this process")
    print(f"sweep: {len(points)} points on {where}", file=sys.stderr, flush=True)

    def progress(done, total):
        print(f"sweep: {done}/{total} points", file=sys.stderr, flush=True)

    results = dask_runner.map_tasks(sweep_task, items, scheduler=args.scheduler, dask=args.dask,
                                    jobs=max(args.jobs, 2) if use_dask else 1, progress=progress)
    add_speedups(results)
    name = Path(model.rstrip("/")).name
    title = (f"{name}: estimated cycles per configuration (static, RTL cycle model); speed-up "
             f"over 16x16 at the same memory scale")
    print(render_table(title, results))
    if args.csv:
        _write(args.csv, results_csv(results), "the CSV table")
    if args.plot:
        _write(args.plot, sweep_svg(f"{name}: array-size sweep", results,
                                    "cycles and roofline bound, MAC utilisation, speed-up over "
                                    "16x16"), "the plot")
    return 0


def _write(path: str, text: str, what: str) -> None:
    write_text(path, text, what)
    print(f"wrote {path}")
