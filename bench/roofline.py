"""Benchmark: per-layer cycles of compiled models on the ISA simulator against the roofline.

Models: AlexNet (``make sim MODEL=alexnet``'s int8 graph, built once by
tools/make_alexnet.py into build/alexnet) and every bundled model of models/ that has an
int8 model file and input.npz.  For each: compile (timed), run on the ISA simulator
(bit-exact check against the reference interpreter, total cycles), then one table row per
layer and a total row.

Per-layer cycles.  The ISA simulator's timing model (sim/npu_timing.py, the RTL's cycle
model) gives every executed instruction its issue and end cycle; each instruction belongs
to the layer that emitted it (``Compilation.program_ops[pc].layer``).  Layers overlap (the
scheduler starts loads of a layer while the previous one computes), so a layer is charged
the cycles from the previous layers' completion to its own: ``cycles[i] = end[i] -
end[i-1]`` with ``end[i]`` the last cycle any instruction of layers ``0..i`` ends (the
first layer also pays the program boot).  The rows add up to the total.

Roofline.  ``bound = max(MACs / MACs-per-cycle, bytes / bus bytes per cycle)`` per layer,
``bytes`` being the least external traffic: every weight (int8) and bias (int32) read
once, the input read once and the output written once, at their graph sizes.  Layers the
compiler adds (``conv0.pack``: tap packing) have no bound of their own.  The attribution
and the bound are compiler/estimate/layers.py's (``estimate_compilation``), so `npu estimate` and
this benchmark agree row for row.

Plot.  Next to each model's CSV, ``roofline_<model>.svg``: one bar per layer, cycles
against the bound, utilisation and cycles/bound written beside (compiler/estimate/plot.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.report import BenchContext, Column, Table
from isa.config import DEFAULT_CONFIG, NpuConfig

DESCRIPTION = "per-layer cycles on the ISA simulator vs the roofline (AlexNet, bundled models)"

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class LayerRow:
    name: str
    output: str        # the graph tensor the layer writes (AlexNet: relu1 .. conv8)
    kind: str
    cycles: int
    macs: int
    read: int          # external bytes the program moved
    written: int
    bound: int
    instructions: int


def layer_rows(comp, config: NpuConfig) -> tuple[list[LayerRow], int]:
    """Per-layer rows of a compilation and the total cycles: compiler/estimate/layers.py's
    per-layer attribution and roofline bound (one definition of both), with the graph
    tensor each layer writes."""
    from compiler.estimate.layers import estimate_compilation

    est = estimate_compilation(comp)
    rows = [LayerRow(e.name, layer.writes[0] if getattr(layer, "writes", None) else "", type(layer).__name__,
                     e.cycles, e.macs, e.bytes_read, e.bytes_written, e.bound, sum(e.instructions.values()))
            for e, layer in zip(est.layers, comp.layers)]
    return rows, est.total_cycles


def models(with_alexnet: bool = True) -> list[tuple[str, Path, Path]]:
    """(name, model file, input.npz) of AlexNet (built on first use) and the bundled models."""
    from npu.demo import find_model

    found = [("alexnet", *find_model("alexnet"))] if with_alexnet else []
    for folder in sorted((ROOT / "models").iterdir()):
        if folder.is_dir() and folder.name != "alexnet" and (folder / "input.npz").is_file():
            try:
                found.append((folder.name, *find_model(folder.name)))
            except Exception:       # a folder without a model file: nothing to run
                continue
    return found


def run_model(name: str, model_path: Path, input_path: Path, config: NpuConfig, ctx: BenchContext) -> Table:
    from compiler.driver import run_pipeline
    from npu import backends
    from sim.isa.sim import IsaSim

    model = backends.load_model(str(model_path))
    inputs = backends.load_inputs(input_path, model)
    ctx.log(f"[bench] roofline {name}: reference interpreter")
    golden, _ = backends.run(model, inputs, "ref", config)
    ctx.log(f"[bench] roofline {name}: compiling")
    t = time.perf_counter()
    comp = run_pipeline(model.graph, config)
    compile_s = time.perf_counter() - t
    program = comp.program
    ctx.log(f"[bench] roofline {name}: compiled in {compile_s:.2f} s ({len(program.instructions)} "
            f"instructions); running the ISA simulator")
    t = time.perf_counter()
    result = IsaSim(config).run(program, program.memory_image(inputs))
    sim_s = time.perf_counter() - t
    if not result.ok:
        raise RuntimeError(f"{name}: the ISA simulator stopped: {result.error_message}")
    got = program.read_outputs(result.memory)
    exact = all(np.array_equal(got[k], v) for k, v in golden.items())
    rows, total = layer_rows(comp, config)
    if total != result.cycles:
        raise RuntimeError(f"{name}: timing model {total} cycles, ISA simulator {result.cycles}")

    table = Table(f"roofline_{name}", f"{name}: per-layer cycles on the ISA simulator vs the roofline "
                  f"({config.array_rows}x{config.array_cols}, {config.bus_bytes} B/cycle)", [
        Column("layer"), Column("output"), Column("kind"), Column("cycles", fmt=","), Column("MACs", fmt=","),
        Column("util", "%", ".1f"), Column("read", "B", ","), Column("written", "B", ","),
        Column("bound", "cycles", ","), Column("x bound", fmt=".3f"), Column("instr")])
    for r in rows:
        util = 100.0 * r.macs / (r.cycles * config.macs_per_cycle) if r.cycles else 0.0
        table.add(r.name, r.output, r.kind, r.cycles, r.macs, util, r.read, r.written, r.bound or None,
                  r.cycles / r.bound if r.bound else None, r.instructions)
    macs = sum(r.macs for r in rows)
    bound = sum(r.bound for r in rows)
    table.add("total", "", "", total, macs, 100.0 * macs / (total * config.macs_per_cycle),
              sum(r.read for r in rows), sum(r.written for r in rows), bound, total / bound,
              len(program.instructions))
    conv = [r for r in rows if r.kind in ("ConvLayer", "PackedConvLayer", "RepackLayer")]
    table.notes += [
        f"bit-exact vs the reference interpreter: {'yes' if exact else 'NO'}; compile {compile_s:.2f} s; "
        f"ISA simulator {sim_s:.2f} s ({result.instructions_executed} instructions executed)",
        "cycles: a layer is charged from the previous layers' completion to its own (rows add up "
        "to the total); bound: max(MACs/MACs-per-cycle, least bytes/bus bytes per cycle)",
    ]
    spatial = [r for r in conv if r.bound and r.macs // config.macs_per_cycle >= r.bound]
    if spatial:
        # The MAC-bound convolutions (the ones before the fully connected layers), with the
        # repack layers they need.
        names = {r.name for r in spatial}
        group = [r for r in conv if r.name in names or r.name.split(".")[0] in names]
        cyc = sum(r.cycles for r in group)
        table.notes.append(f"MAC-bound convolutions ({', '.join(r.name for r in spatial)}): utilisation "
                           f"{100.0 * sum(r.macs for r in group) / (cyc * config.macs_per_cycle):.1f}% "
                           f"over {cyc:,} cycles")
    if not exact:
        raise RuntimeError(f"{name}: the ISA simulator's outputs differ from the reference interpreter")
    plot = write_plot(name, rows, config, ctx.build_dir)
    ctx.log(f"[bench] wrote {plot}")
    return table


def write_plot(name: str, rows: list[LayerRow], config: NpuConfig, folder: Path) -> Path:
    """The per-layer bar chart of ``rows`` as ``folder/roofline_<name>.svg``."""
    from compiler.estimate.plot import PlotRow, roofline_svg

    plot_rows = [PlotRow(r.name, r.cycles, r.bound, r.macs / (r.cycles * config.macs_per_cycle) if r.cycles else 0.0,
                         f"{r.kind} -> {r.output}",
                         "" if not r.bound else "MACs" if -(-r.macs // config.macs_per_cycle) >= r.bound else "bus")
                 for r in rows]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"roofline_{name}.svg"
    path.write_text(roofline_svg(f"{name}: per-layer cycles on the ISA simulator vs the roofline", plot_rows,
                                 f"{config.array_rows}x{config.array_cols} array, {config.macs_per_cycle} MACs/cycle, "
                                 f"{config.bus_bytes} B/cycle external bus"))
    return path


def run(ctx: BenchContext, config: NpuConfig = DEFAULT_CONFIG) -> list[Table]:
    """One table per model (``ctx.quick``: the bundled models only, not AlexNet)."""
    tables = []
    for name, model_path, input_path in models(with_alexnet=not ctx.quick):
        tables.append(run_model(name, model_path, input_path, config, ctx))
    return tables
