"""Per-layer performance estimate of a compiled graph: cycles, MACs, utilisation, traffic.

Cycles come from the RTL's cycle model (sim/npu_timing.py) when it is available, else from
the compiler's own scheduling model (compiler/costmodel.py); the table says which.  A
layer is charged the cycles from the completion of the layers before it (the last cycle
any of their instructions ends) to its own completion, so overlapping work counts once and
the rows add up to the total less the final HALT (the first layer includes the program boot).

    python -m compiler.estimate MODEL.tosa [--config small|default|FILE.json] [--per-layer]

``--per-layer`` compiles every compute layer on its own (compiler/layer_split.py), for
graphs that do not compile as a whole: each row says whether the layer compiles, why not,
and its estimate; a layer that only lacks instruction memory is estimated as if the
memory were large enough (the row says how many instructions it needs).
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig
from tosa_ir import Graph

from compiler.driver import Compilation, InstructionMemoryFull, run_pipeline
from compiler.ir import ConvLayer


@dataclass
class LayerEstimate:
    name: str
    ops: list[str]
    plan: str
    macs: int                 # what the graph asks for
    array_macs: int           # what the array performs (channels padded to blocks)
    instructions: Counter = field(default_factory=Counter)
    bytes_read: int = 0       # external memory, by DMA (padding words excluded)
    bytes_written: int = 0
    start: int = 0
    end: int = 0

    @property
    def cycles(self) -> int:
        return self.end - self.start


@dataclass
class Estimate:
    layers: list[LayerEstimate]
    total_cycles: int
    source: str               # "npu_timing" or "compiler model"
    config: NpuConfig

    def utilisation(self, layer: LayerEstimate) -> float:
        return layer.macs / max(layer.cycles * self.config.macs_per_cycle, 1)

    def table(self) -> str:
        head = (f"{'layer':<8} {'cycles':>10} {'MACs':>12} {'util%':>6} {'MATMUL':>7} {'ACT':>5} "
                f"{'DMA':>5} {'LOOP':>5} {'read B':>10} {'write B':>10}  plan")
        lines = [f"cycles from {self.source}; {self.config.array_rows}x{self.config.array_cols} array, "
                 f"{self.config.macs_per_cycle} MACs/cycle", head, "-" * len(head)]
        for l in self.layers:
            dma = l.instructions["DMA_LOAD"] + l.instructions["DMA_STORE"]
            lines.append(f"{l.name:<8} {l.cycles:>10} {l.macs:>12} {100 * self.utilisation(l):>6.1f} "
                         f"{l.instructions['MATMUL']:>7} {l.instructions['ACT']:>5} {dma:>5} {l.instructions['LOOP']:>5} "
                         f"{l.bytes_read:>10} {l.bytes_written:>10}  {l.plan}")
        macs = sum(l.macs for l in self.layers)
        util = macs / max(self.total_cycles * self.config.macs_per_cycle, 1)
        count = sum(sum(l.instructions.values()) for l in self.layers) + 1
        lines.append(f"{'total':<8} {self.total_cycles:>10} {macs:>12} {100 * util:>6.1f}  "
                     f"({count} instructions with HALT)")
        return "\n".join(lines)


def _timing(compilation: Compilation) -> tuple[list[tuple[int, int, int]], int, str]:
    """(program index, issue, end) per instruction executed, in issue order (loops unrolled),
    total cycles, and where they come from."""
    try:
        from sim.npu_timing import TimingModel
    except ModuleNotFoundError as e:
        if e.name != "sim.npu_timing":
            raise
        s = compilation.scheduled     # the straight-line program the looped one replays
        return [(None, i, f) for i, f in zip(s.issue, s.finish)], s.cycles, "compiler model"
    result = TimingModel(compilation.config).run([op.instr for op in compilation.program_ops])
    spans = [(pc, int(t.issue), int(t.end) + 1) for pc, t in zip(result.pcs, result.per_instruction)]
    return spans, int(result.total_cycles), "npu_timing"


def estimate_compilation(compilation: Compilation) -> Estimate:
    config = compilation.config
    layers = []
    for layer, plan in zip(compilation.layers, compilation.plans):
        array_macs = 0
        if isinstance(layer, ConvLayer):
            n, oh, ow, _ = layer.out_shape
            kh, kw = layer.kernel
            array_macs = n * oh * ow * kh * kw * plan.cbi * plan.cbo * config.macs_per_cycle
        layers.append(LayerEstimate(layer.name, layer.ops, plan.describe(), layer.macs, array_macs))
    for op in compilation.program_ops:          # instructions in the program (static)
        if op.instr.name != "HALT":
            layers[op.layer].instructions[op.instr.name] += 1
    spans, total, source = _timing(compilation)
    program, straight = compilation.program_ops, compilation.scheduled.ops
    first = [None] * len(layers)
    for n, (pc, start, end) in enumerate(spans):
        # Timing.pcs pairs each executed instruction with its program index (LOOPs repeat
        # them); the compiler model times the straight-line program.
        op = straight[n] if pc is None else program[pc]
        if op.instr.name == "HALT":
            continue
        est = layers[op.layer]
        v = op.instr.values
        data = v.get("len0", 0) * v.get("len1", 0) * v.get("len2", 0) * config.bus_bytes
        if op.instr.name == "DMA_LOAD":
            est.bytes_read += data
        elif op.instr.name == "DMA_STORE":
            est.bytes_written += data
        if first[op.layer] is None:
            first[op.layer] = True
            est.start, est.end = start, end
        est.start, est.end = min(est.start, start), max(est.end, end)
    # Layers overlap (loads of one start while the previous one computes): charge each the
    # cycles from the completion of the layers before it to its own, so rows add up.
    done = 0
    for est in layers:
        est.end = max(est.end, done)
        est.start, done = done, est.end
    return Estimate(layers, total, source, config)


def estimate_graph(graph: Graph, config: NpuConfig = DEFAULT_CONFIG) -> Estimate:
    return estimate_compilation(run_pipeline(graph, config))


@dataclass
class LayerReport:
    """One compute layer compiled alone: ``status`` is "ok", "imem" (estimated with enough
    instruction memory) or "unsupported" (``reason`` says why; no estimate)."""

    name: str
    ops: str
    status: str
    reason: str = ""
    needed: int = 0           # "imem": instructions of the smallest program tried
    instructions: int = 0
    estimate: Estimate | None = None


def estimate_layers(graph: Graph, config: NpuConfig = DEFAULT_CONFIG) -> list[LayerReport]:
    """Compile and estimate every compute layer of ``graph`` on its own."""
    from dataclasses import replace

    from tosa_ir.errors import NpuError

    from compiler.layer_split import split_layers

    reports = []
    for unit in split_layers(graph):
        report = LayerReport(unit.name, unit.describe(), "ok")
        try:
            if unit.error is not None:
                raise unit.error
            try:
                comp = run_pipeline(unit.graph, config)
            except InstructionMemoryFull as e:
                report.status, report.reason, report.needed = "imem", str(e), e.needed
                comp = run_pipeline(unit.graph, replace(config, imem_rows=max(4 * e.needed, 1 << 16)))
            report.instructions = len(comp.program.instructions)
            report.estimate = estimate_compilation(comp)
        except NpuError as e:
            report.status, report.reason = "unsupported", str(e)
        reports.append(report)
    return reports


def layers_table(reports: list[LayerReport], config: NpuConfig) -> str:
    head = (f"{'layer':<14} {'operators':<38} {'compiles':<24} {'instr':>7} {'cycles':>10} {'MACs':>12} "
            f"{'util%':>6}")
    lines = [f"each layer compiled alone; {config.array_rows}x{config.array_cols} array, instruction "
             f"memory {config.imem_rows}", head, "-" * len(head)]
    for r in reports:
        if r.estimate is None:
            lines.append(f"{r.name:<14} {r.ops:<38} no: {r.reason}")
            continue
        est = r.estimate
        macs = sum(layer.macs for layer in est.layers)
        util = macs / max(est.total_cycles * config.macs_per_cycle, 1)
        status = "yes" if r.status == "ok" else f"no: needs {r.needed} instr"
        lines.append(f"{r.name:<14} {r.ops:<38} {status:<24} {r.instructions:>7} {est.total_cycles:>10} "
                     f"{macs:>12} {100 * util:>6.1f}")
    return "\n".join(lines)


def _config(spec: str) -> NpuConfig:
    import json
    from pathlib import Path

    from tosa_ir.errors import InvalidInput

    if spec in ("default", "small"):
        return DEFAULT_CONFIG if spec == "default" else SMALL_CONFIG
    try:
        return NpuConfig.from_dict(json.loads(Path(spec).read_text()))
    except (OSError, ValueError, TypeError) as e:
        raise InvalidInput(f"{spec}: bad configuration: {e}") from None


def main(argv: list[str] | None = None) -> int:
    from tosa_ir.errors import NpuError

    parser = argparse.ArgumentParser(prog="python -m compiler.estimate", description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--config", default="default")
    parser.add_argument("--per-layer", action="store_true",
                        help="compile and estimate every compute layer on its own")
    args = parser.parse_args(argv)
    try:
        from compiler.frontends import load_graph

        config = _config(args.config)
        graph = load_graph(args.model)
        if args.per_layer:
            print(layers_table(estimate_layers(graph, config), config))
        else:
            print(estimate_graph(graph, config).table())
    except NpuError as e:
        print(f"estimate: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
