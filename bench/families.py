"""Benchmark: the network-family fixtures on the NPU (cycles, roofline ratio, MAC utilisation).

Models: every ``<name>.tflite`` of tests/fixtures/tflite/families/ (made by
tools/make_tflite_family_fixtures.py: residual, mobilenetv2, attention, spatial, int16x8).
Each is lowered by the Circle frontend, compiled for the default configuration and run on the
ISA simulator with the fixture's first sample; the outputs must equal TFLite's reference
kernels (``ref_0`` in the fixture) bit for bit, else the benchmark fails.

Per family, one row: NPU cycles (ISA simulator, the RTL's cycle model), the static estimate
(``npu estimate``: the same timing model without data), the MACs the compiler counts per layer,
MAC utilisation ``MACs / (cycles * MACs per cycle)``, the roofline bound (the sum over layers of
``max(MACs / MACs per cycle, least bytes / bus bytes per cycle)``, compiler/estimate/layers.py)
and cycles / bound, plus the layer that takes the most cycles and what bounds it (the
``roofline`` benchmark's per-layer attribution, :func:`bench.roofline.layer_rows`).  MACs are
the MAC array's: layers the compiler runs on the vector unit (depthwise convolutions,
activation x activation BATCH_MATMUL, softmax, pooling) count cycles but no MACs.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.report import BenchContext, Column, Table
from isa.config import DEFAULT_CONFIG, NpuConfig

DESCRIPTION = "network-family .tflite fixtures: NPU cycles, roofline ratio, MAC utilisation"

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tflite" / "families"


def family_row(path: Path, config: NpuConfig) -> tuple:
    """(name, cycles, estimate, MACs, utilisation %, bound, cycles/bound, busiest layer,
    its share %, what bounds it) for the family at ``path``; raises RuntimeError if the NPU's
    outputs differ from TFLite's reference kernels."""
    from bench.roofline import layer_rows
    from compiler.driver import run_pipeline
    from compiler.frontends.circle.load import load_circle
    from npu.backends import estimate_cycles
    from sim.isa.sim import IsaSim

    graph = load_circle(path)
    with np.load(path.with_suffix(".npz")) as data:
        inputs = {n: data[f"input_{i}"][0] for i, n in enumerate(graph.main.inputs)}
        refs = [data[f"ref_{i}"][0] for i in range(len(graph.main.outputs))]
    comp = run_pipeline(graph, config)
    program = comp.program
    result = IsaSim(config).run(program, program.memory_image(inputs))
    if not result.ok:
        raise RuntimeError(f"{path.stem}: the ISA simulator stopped: {result.error_message}")
    got = program.read_outputs(result.memory)
    for out, ref in zip(graph.main.outputs, refs):
        if not np.array_equal(np.asarray(got[out]).reshape(ref.shape), ref):
            raise RuntimeError(f"{path.stem}: output {out!r} differs from TFLite's reference kernels")
    rows, total = layer_rows(comp, config)
    if total != result.cycles:
        raise RuntimeError(f"{path.stem}: timing model {total} cycles, ISA simulator {result.cycles}")
    macs = sum(r.macs for r in rows)
    bound = sum(r.bound for r in rows)
    top = max(rows, key=lambda r: r.cycles)
    limit = ("-" if not top.bound else
             "MACs" if -(-top.macs // config.macs_per_cycle) >= top.bound else "bus")
    return (path.stem, result.cycles, estimate_cycles(program), macs,
            100.0 * macs / (result.cycles * config.macs_per_cycle), bound, result.cycles / bound,
            f"{top.name} ({top.kind})", 100.0 * top.cycles / result.cycles, limit)


def run(ctx: BenchContext, config: NpuConfig = DEFAULT_CONFIG) -> list[Table]:
    table = Table("families", f"network families (.tflite fixtures) on the NPU "
                  f"({config.array_rows}x{config.array_cols}, {config.bus_bytes} B/cycle), ISA simulator", [
        Column("family"), Column("cycles", fmt=","), Column("estimate", "cycles", ","), Column("MACs", fmt=","),
        Column("util", "%", ".1f"), Column("bound", "cycles", ","), Column("x bound", fmt=".2f"),
        Column("busiest layer"), Column("share", "%", ".0f"), Column("its bound")])
    for path in sorted(FIXTURES.glob("*.tflite")):
        ctx.log(f"[bench] families: {path.stem}")
        table.add(*family_row(path, config))
    table.notes += [
        "outputs bit-exact with TFLite's reference kernels (first sample of each fixture); "
        "estimate: `npu estimate` (static, same timing model)",
        "bound: sum over layers of max(MACs / MACs-per-cycle, least bytes / bus bytes per cycle); "
        "util: MACs / (cycles * MACs-per-cycle)",
    ]
    return [table]
