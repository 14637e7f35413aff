"""``python -m bench [NAME...]``: run benchmarks, print their tables, write CSV files.

With no names every benchmark of :data:`bench.registry.BENCHMARKS` runs, in order.
Exit status: 0 if every benchmark ran, 1 if one failed (the others still run), 2 for bad
command-line arguments.  Figures are never checked against targets here.
"""
from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from bench.registry import BENCHMARKS, UnknownBenchmark, load
from bench.report import BenchContext
from tosa_ir import NpuError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--repeat", type=int, default=3, metavar="N",
                   help="timed runs per measurement; the best is reported (default 3)")
    p.add_argument("--quick", action="store_true",
                   help="smaller workloads for a fast look (figures not comparable)")
    p.add_argument("--out", type=Path, default=Path("build/bench"), metavar="DIR",
                   help="cache and CSV folder (default build/bench)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        for name in BENCHMARKS:
            print(f"{name:14s} {load(name).DESCRIPTION}")
        return 0
    if args.repeat < 1:
        print("error: --repeat must be at least 1", file=sys.stderr)
        return 2
    names = args.names or list(BENCHMARKS)
    for name in names:
        if name not in BENCHMARKS:
            print(f"error: {UnknownBenchmark(name)}", file=sys.stderr)
            return 2
    ctx = BenchContext(repeat=args.repeat, build_dir=args.out, quick=args.quick)
    failed = []
    for name in names:
        ctx.log(f"[bench] {name}: running")
        try:
            tables = load(name).run(ctx)
        except NpuError as e:       # a user-facing problem: one line
            print(f"[bench] {name}: failed: {e}", file=sys.stderr)
            failed.append(name)
            continue
        except Exception:           # a bug: keep the traceback, run the other benchmarks
            traceback.print_exc()
            failed.append(name)
            continue
        for table in tables:
            print(table.render())
            print()
            path = table.write_csv(args.out)
            ctx.log(f"[bench] wrote {path}")
    if failed:
        print(f"[bench] failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
