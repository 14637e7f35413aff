"""Benchmark: the array-size sweep of ``npu estimate --sweep`` for AlexNet, ResNet-50 and
MobileNetV2.

For each network (built on first use by tools/make_<name>.py into build/<name>, as ``make sim
MODEL=<name>`` does) and each array size 8x8, 16x16, 32x32, 64x64 (bus and memories scaled
with the array: isa/config.py ``array_config``): estimated cycles (the RTL's cycle model,
nothing simulated), MAC utilisation of the whole network and of its convolutions, the
roofline bound and cycles/bound, and the speed-up over 16x16 (compiler/estimate/sweep.py).  Points
that do not fit the 2,048-entry instruction memory whole are the sum of their layers
compiled alone (``mode``).  Writes ``sweep_<name>.csv`` and ``sweep_<name>.svg``.

``--quick``: the networks at 1/16 width and 64x64 input (figures not comparable).  Figures
are printed, never checked against targets.
"""
from __future__ import annotations

import time
from pathlib import Path

from bench.report import BenchContext, Column, Table

DESCRIPTION = "array-size sweep (8x8..64x64) of AlexNet, ResNet-50, MobileNetV2 (static estimate)"

ROOT = Path(__file__).resolve().parent.parent
NETWORKS = ("alexnet", "resnet50", "mobilenetv2")


def _model(name: str, ctx: BenchContext) -> Path:
    if not ctx.quick:
        from npu.demo import find_model

        return find_model(name)[0]
    import importlib.util

    out = ctx.build_dir / f"{name}_quick"
    path = out / f"{name}_int8.tosa"
    if not path.is_file():
        spec = importlib.util.spec_from_file_location(f"make_{name}", ROOT / "tools" / f"make_{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if name == "alexnet":
            module.build(out, width_div=16, calib=2, test=1, report=False, log=lambda *a: None)
        else:
            module.build(out, width_div=16, size=64, calib=2, test=1, report=False, log=lambda *a: None)
    return path


def run(ctx: BenchContext) -> list[Table]:
    from compiler.frontends import load_graph
    from compiler.estimate.sweep import add_speedups, estimate_point, results_csv, sweep_points
    from compiler.estimate.sweep_plot import sweep_svg

    tables = []
    for name in NETWORKS:
        path = _model(name, ctx)
        graph = load_graph(path)
        results = []
        for point in sweep_points():
            t = time.perf_counter()
            results.append(estimate_point(graph, point))
            ctx.log(f"[bench] sweep {name} {point.label}: {results[-1].cycles:,} cycles "
                    f"({time.perf_counter() - t:.1f} s)")
        add_speedups(results)
        table = Table(f"sweep_{name}", f"{name}: estimated cycles per array size (bus and memories "
                      f"scaled with the array)", [
            Column("array"), Column("cycles", fmt=","), Column("util", "%", ".1f"),
            Column("conv util", "%", ".1f"), Column("bound", "cycles", ","),
            Column("x bound", fmt=".3f"), Column("speed-up", "x 16x16", ".2f"), Column("mode")])
        for r in results:
            table.add(r.point.label, r.cycles, 100 * r.utilisation, 100 * r.conv_utilisation,
                      r.bound, r.ratio, r.speedup, r.mode)
        ctx.build_dir.mkdir(parents=True, exist_ok=True)
        (ctx.build_dir / f"sweep_{name}_points.csv").write_text(results_csv(results))
        svg = ctx.build_dir / f"sweep_{name}.svg"
        svg.write_text(sweep_svg(f"{name}: array-size sweep", results,
                                 "cycles and roofline bound, MAC utilisation, speed-up over 16x16"))
        ctx.log(f"[bench] wrote {svg}")
        tables.append(table)
    return tables
