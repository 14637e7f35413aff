"""Per-layer performance estimate of a compiled graph: cycles, MACs, utilisation, traffic.

Cycles come from the RTL's cycle model (sim/npu_timing.py) when it is available, else from
the compiler's own scheduling model (compiler/core/costmodel.py); the table says which.  Both
are static: the program is timed, never executed.  A layer is charged the cycles from the
completion of the layers before it (the last cycle any of their instructions ends) to its
own completion, so overlapping work counts once and the rows add up to the total (the
first layer includes the fetch of the first instructions, the last one the final HALT).

Roofline.  Each layer also gets a lower bound on its cycles, ``bound = max(MACs /
MACs-per-cycle, least bytes / bus bytes per cycle)``: the array doing one useful MAC per
lane every cycle, or the external bus moving the least traffic the layer needs (every
weight and bias once, the input read once, the output written once, at their graph sizes)
at full width; ``limit`` says which of the two it is (``MACs`` or ``bus``).  ``ratio =
cycles / bound`` (1.0 is the best the hardware allows; below 1.0 the layer overlapped the
one before it).  Layers that only move data the compiler added (tap packing's repack) have
no bound.

The command line is ``npu estimate MODEL [--per-layer] [--config ...] [--csv] [--plot]``
(npu/cli.py): any model format, calibration of float models, CSV and SVG
(compiler/estimate/plot.py).  ``estimate_graph`` (compiler/estimate/__init__.py) picks this
module's estimate or the linked one.

Graphs with WHILE_LOOP or big COND_IF are compiled as linked pieces
(compiler/link/control.py); compiler/estimate/linked.py estimates them: one row per
layer of each piece, loop rows labelled per iteration (or counting every iteration when
the trip count is a compile-time constant).

``--per-layer`` compiles every compute layer on its own (compiler/estimate/layer_split.py), for
graphs that do not compile as a whole: each row says whether the layer compiles, why not,
and its estimate; a layer that only lacks instruction memory is estimated as if the
memory were large enough (the row says how many instructions it needs).
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from isa.config import DEFAULT_CONFIG, NpuConfig
from tosa_ir import Graph
from tosa_ir.errors import NpuError
from tosa_ir.graph import numpy_dtype

from compiler.driver import Compilation, InstructionMemoryFull, run_pipeline
from compiler.core.ir import ConvLayer
from compiler.estimate.plot import PlotRow, roofline_svg
from compiler.kinds.conv.tap_packing import RepackLayer
from compiler.estimate.layer_split import split_layers

# The report's columns, in order: the text table, the CSV header and the plot all use them.
CSV_COLUMNS = ("layer", "operators", "MACs", "cycles", "utilisation_pct", "read_bytes", "written_bytes",
               "bound_cycles", "limit", "ratio", "instructions")


@dataclass
class LayerEstimate:
    name: str
    ops: list[str]
    plan: str
    macs: int                 # what the graph asks for
    array_macs: int           # what the array performs (channels padded to blocks)
    instructions: Counter = field(default_factory=Counter)
    bytes_read: int = 0       # external memory, by DMA (padding excluded)
    bytes_written: int = 0
    start: int = 0
    end: int = 0
    mac_bound: int = 0        # roofline: cycles of the MACs alone at full array rate
    bus_bound: int = 0        # roofline: cycles of the least external traffic at full bus width

    @property
    def cycles(self) -> int:
        return self.end - self.start

    @property
    def bound(self) -> int:
        """Roofline lower bound on the cycles (0: none, see the module docstring)."""
        return max(self.mac_bound, self.bus_bound)

    @property
    def limit(self) -> str:
        """What bounds the layer: ``"MACs"``, ``"bus"`` or ``""`` (no bound)."""
        return "" if not self.bound else "MACs" if self.mac_bound >= self.bus_bound else "bus"

    @property
    def operators(self) -> str:
        """The TOSA operators the layer implements, ``CONV2D+RESCALE``."""
        return describe_ops(self.ops)


@dataclass
class Row:
    """One row of the report (a layer, a layer compiled alone, or the total); the fields
    are :data:`CSV_COLUMNS`, ``ratio`` None without a bound."""

    layer: str
    operators: str
    macs: int
    cycles: int
    utilisation: float        # fraction of the array's peak MACs
    read: int
    written: int
    bound: int
    instructions: int
    note: str = ""            # plan or compile status, text table only
    limit: str = ""           # "MACs", "bus" or "" (no bound)

    @property
    def ratio(self) -> float | None:
        return self.cycles / self.bound if self.bound else None

    def csv_values(self) -> list:
        ratio = "" if self.ratio is None else f"{self.ratio:.4f}"
        return [self.layer, self.operators, self.macs, self.cycles, f"{100 * self.utilisation:.2f}", self.read,
                self.written, self.bound, self.limit, ratio, self.instructions]


def _limit(parts) -> str:
    """The limit of a row adding up layers: the one bounding most of their cycles."""
    mac = sum(p.bound for p in parts if p.limit == "MACs")
    bus = sum(p.bound for p in parts if p.limit == "bus")
    return "" if not mac + bus else "MACs" if mac >= bus else "bus"


def describe_ops(ops: list[str]) -> str:
    """``CONV2D+RESCALE`` from the layer's ``Operator.describe()`` strings (other text,
    such as a repack's reason, is kept up to its first colon)."""
    names = []
    for text in ops:
        m = re.match(r"[A-Z][A-Z0-9_]*(?=\()", text)
        names.append(m.group(0) if m else text.split(":")[0])
    return "+".join(dict.fromkeys(names)) or "-"


def _util(macs: int, cycles: int, config: NpuConfig) -> float:
    return macs / max(cycles * config.macs_per_cycle, 1)


@dataclass
class Estimate:
    layers: list[LayerEstimate]
    total_cycles: int
    source: str               # "npu_timing" or "compiler model"
    config: NpuConfig
    instruction_count: int = 0   # the program's, HALT included
    notes: list[str] = field(default_factory=list)    # printed under the table

    def utilisation(self, layer: LayerEstimate) -> float:
        return _util(layer.macs, layer.cycles, self.config)

    def rows(self) -> list[Row]:
        """One row per layer, then the total (instructions: the whole program's)."""
        rows = [Row(l.name, l.operators, l.macs, l.cycles, self.utilisation(l), l.bytes_read, l.bytes_written,
                    l.bound, sum(l.instructions.values()), l.plan, l.limit) for l in self.layers]
        macs = sum(l.macs for l in self.layers)
        rows.append(Row("total", "", macs, self.total_cycles, _util(macs, self.total_cycles, self.config),
                        sum(l.bytes_read for l in self.layers), sum(l.bytes_written for l in self.layers),
                        sum(l.bound for l in self.layers), self.instruction_count, "HALT included",
                        _limit(self.layers)))
        return rows

    def table(self) -> str:
        title = (f"cycles from {self.source}; {self.config.array_rows}x{self.config.array_cols} array, "
                 f"{self.config.macs_per_cycle} MACs/cycle, {self.config.bus_bytes} B/cycle external bus")
        return "\n".join([render_rows(title, self.rows(), "plan")] + [f"note: {n}" for n in self.notes])


def render_rows(title: str, rows: list[Row], note: str) -> str:
    """The rows as an aligned text table; ``note`` heads the last (free text) column."""
    ops_w = min(max([len(r.operators) for r in rows] + [9]), 32)
    name_w = min(max([len(r.layer) for r in rows] + [5]), 24)
    head = (f"{'layer':<{name_w}} {'operators':<{ops_w}} {'MACs':>13} {'cycles':>11} {'util%':>6} "
            f"{'read B':>12} {'write B':>11} {'bound':>11} {'limit':<5} {'ratio':>7} {'instr':>6}  {note}")
    lines = [title, head, "-" * len(head)]
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        bound = f"{r.bound:,}" if r.bound else "-"
        lines.append(f"{r.layer:<{name_w}} {r.operators[:ops_w]:<{ops_w}} {r.macs:>13,} {r.cycles:>11,} "
                     f"{100 * r.utilisation:>6.1f} {r.read:>12,} {r.written:>11,} {bound:>11} {r.limit:<5} "
                     f"{ratio:>7} {r.instructions:>6}  {r.note}")
    return "\n".join(lines)


def rows_csv(rows: list[Row]) -> str:
    """The rows as CSV text with header :data:`CSV_COLUMNS`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(r.csv_values() for r in rows)
    return buf.getvalue()


def rows_svg(title: str, rows: list[Row], subtitle: str = "") -> str:
    """The layer rows (the total row left out) as the roofline bar chart."""
    return roofline_svg(title, [PlotRow(r.layer, r.cycles, r.bound, r.utilisation, r.operators, r.limit,
                                        r.note[4:] if r.note.startswith("no: ") and not r.cycles else "")
                                for r in rows if r.layer != "total"], subtitle)


def minimal_bytes(layer, graph: Graph) -> int:
    """Least external traffic of ``layer`` in bytes (see the module docstring): 0 for the
    compiler's repack layers, which move data the graph never asked to move."""
    if isinstance(layer, RepackLayer):
        return 0
    layer = getattr(layer, "original", None) or layer      # tap packing: the graph's layer
    if hasattr(layer, "in_shape") and hasattr(layer, "out_shape"):     # conv, pool: int8 in and out
        total = int(np.prod(layer.in_shape)) + int(np.prod(layer.out_shape))
    else:                                   # other layers: the graph tensors they name
        tensors = graph.main.tensors
        names = dict.fromkeys(list(getattr(layer, "reads", [])) + list(getattr(layer, "writes", [])))
        total = sum(tensors[n].size * np.dtype(numpy_dtype(tensors[n].dtype)).itemsize
                    for n in names if n in tensors and min(tensors[n].shape, default=1) >= 0)
    if isinstance(layer, ConvLayer):
        total += int(layer.weights.size) + 4 * int(layer.bias.size)
    return total


def roofline_bound(layer, graph: Graph, config: NpuConfig) -> tuple[int, int]:
    """The two roofline bounds of ``layer``, rounded up: (MACs / MACs-per-cycle, least bytes
    / bus bytes per cycle); the bound is their maximum."""
    return -(-int(layer.macs) // config.macs_per_cycle), -(-minimal_bytes(layer, graph) // config.bus_bytes)


def dma_bytes(values: dict, config: NpuConfig) -> int:
    """External bytes a DMA instruction moves (padding excluded): word mode moves bus
    words, element mode elements of ``elem`` bytes."""
    count = values.get("len0", 0) * values.get("len1", 0) * values.get("len2", 0)
    return count * (values.get("elem", 0) or config.bus_bytes)


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
            array_macs = n * oh * ow * kh * kw * plan.wcb * plan.cbo * config.macs_per_cycle
        mac_bound, bus_bound = roofline_bound(layer, compilation.graph, config)
        layers.append(LayerEstimate(layer.name, getattr(layer, "ops", []), plan.describe(), layer.macs, array_macs,
                                    mac_bound=mac_bound, bus_bound=bus_bound))
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
        if op.instr.name == "DMA_LOAD":
            est.bytes_read += dma_bytes(op.instr.values, config)
        elif op.instr.name == "DMA_STORE":
            est.bytes_written += dma_bytes(op.instr.values, config)
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
    if layers:
        layers[-1].end = max(layers[-1].end, total)     # the HALT's cycles: rows add up to the total
    return Estimate(layers, total, source, config, len(compilation.program.instructions))


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
                comp = run_pipeline(unit.graph, replace(config, imem_rows=1 << max(16, (4 * e.needed).bit_length())))
            report.instructions = len(comp.program.instructions)
            report.estimate = estimate_compilation(comp)
        except NpuError as e:
            report.status, report.reason = "unsupported", str(e)
        reports.append(report)
    return reports


def report_rows(reports: list[LayerReport], config: NpuConfig) -> list[Row]:
    """One row per layer compiled alone (zeros where it does not compile); ``note`` says
    whether it compiles."""
    rows = []
    for r in reports:
        if r.estimate is None:
            rows.append(Row(r.name, r.ops, 0, 0, 0.0, 0, 0, 0, 0, f"no: {r.reason}"))
            continue
        est = r.estimate
        macs = sum(layer.macs for layer in est.layers)
        status = "yes" if r.status == "ok" else f"no: needs {r.needed} instr"
        rows.append(Row(r.name, r.ops, macs, est.total_cycles, _util(macs, est.total_cycles, config),
                        sum(layer.bytes_read for layer in est.layers), sum(layer.bytes_written for layer in est.layers),
                        sum(layer.bound for layer in est.layers), r.instructions, status, _limit(est.layers)))
    return rows


def report_total(rows: list[Row], config: NpuConfig) -> Row:
    """The sum of the rows of layers compiled alone (each pays its own boot and HALT)."""
    macs, cycles = sum(r.macs for r in rows), sum(r.cycles for r in rows)
    return Row("total", "", macs, cycles, _util(macs, cycles, config), sum(r.read for r in rows),
               sum(r.written for r in rows), sum(r.bound for r in rows), sum(r.instructions for r in rows),
               "sum of the layers that compile", _limit(rows))
