"""Design-space sweep of the cycle estimate: array size x on-chip memory size, any model.

``npu estimate MODEL --sweep`` estimates the model on every point of the grid

* array size ``N`` in ``--arrays`` (default 8, 16, 32, 64): an ``N x N`` MAC array with an
  ``N``-byte external bus (this NPU generation moves one scratchpad row per bus word, so the
  bus width is the array width: isa/config.py), memories of the default depth in rows, i.e.
  ``N / 16`` times the default's bytes (:func:`isa.config.array_config`);
* memory scale ``s`` in ``--sram`` (default 1): the depth of ASRAM, WSRAM, ACC and PSRAM
  multiplied by ``s`` (0.5 halves every on-chip data memory, 2 doubles it);

and reports per point the total cycles, MAC utilisation, the roofline bound and the ratio,
the utilisation of the (non-depthwise) convolutions alone, and the speed-up over the 16x16
point of the same memory scale.  Each point is the static estimate of compiler/estimate/layers.py
(the RTL's cycle model, nothing simulated): the whole graph compiled when it fits the
instruction memory, otherwise every layer compiled alone with enough instruction memory
(``mode`` says which; ``--per-layer`` asks for the latter at every point, so that all points
are comparable).

Points are independent and deterministic: npu/dask_runner.py runs them on a Dask cluster with
results identical to the serial run.
"""
from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, replace

from compiler.driver import InstructionMemoryFull
from compiler.estimate import estimate_graph
from compiler.estimate.layers import estimate_layers, report_rows
from isa.config import DEFAULT_CONFIG, NpuConfig, array_config

__all__ = [
    "CSV_COLUMNS",
    "SweepPoint",
    "SweepResult",
    "add_speedups",
    "estimate_point",
    "render_table",
    "results_csv",
    "sweep_points",
]

ARRAYS = (8, 16, 32, 64)
CSV_COLUMNS = ["point", "array", "bus_bytes", "sram_scale", "asram_kib", "wsram_kib", "acc_kib",
               "macs", "cycles", "utilisation_pct", "conv_utilisation_pct", "bound", "ratio",
               "speedup_vs_16x16", "mode"]


@dataclass(frozen=True)
class SweepPoint:
    """One configuration of the sweep: ``array`` x ``array`` MACs, memories scaled by ``sram``."""

    array: int
    sram: float = 1.0

    @property
    def label(self) -> str:
        return f"{self.array}x{self.array}" + ("" if self.sram == 1 else f" sram x{self.sram:g}")

    def config(self, base: NpuConfig = DEFAULT_CONFIG) -> NpuConfig:
        cfg = replace(array_config(self.array), imem_rows=base.imem_rows,
                      ext_mem_bytes=base.ext_mem_bytes, mem_latency=base.mem_latency)
        if self.sram == 1:
            return cfg

        def rows(n: int) -> int:
            return max(1, int(n * self.sram))
        return replace(cfg, asram_rows=rows(cfg.asram_rows), wsram_rows=rows(cfg.wsram_rows),
                       acc_rows=rows(cfg.acc_rows), psram_rows=rows(cfg.psram_rows))


@dataclass
class SweepResult:
    """The estimate of one point; ``speedup`` is filled in by :func:`add_speedups`."""

    point: SweepPoint
    bus_bytes: int
    sram_kib: dict
    macs: int
    cycles: int
    utilisation: float          # fraction of the array's peak over the whole model
    conv_utilisation: float     # CONV2D layers only (the layers the array is built for)
    bound: int
    mode: str                   # "whole graph" or "per layer"
    speedup: float = 0.0

    @property
    def ratio(self) -> float:
        return self.cycles / self.bound if self.bound else 0.0


def sweep_points(arrays=ARRAYS, srams=(1.0,)) -> list[SweepPoint]:
    """The grid, array size varying fastest within each memory scale."""
    for a in arrays:
        if a < 4 or a & (a - 1):
            raise ValueError(f"array size must be a power of two >= 4, not {a}")
    for s in srams:
        if not s > 0:
            raise ValueError(f"memory scale must be positive, not {s}")
    return [SweepPoint(a, float(s)) for s in srams for a in arrays]


def estimate_point(graph, point: SweepPoint, per_layer: bool = False,
                   base: NpuConfig = DEFAULT_CONFIG) -> SweepResult:
    """Estimate ``graph`` on ``point`` (see the module docstring for the two modes)."""
    config = point.config(base)
    rows, mode = None, "whole graph"
    if not per_layer:
        try:
            rows = estimate_graph(graph, config).rows()[:-1]
        except InstructionMemoryFull:
            rows = None
    if rows is None:
        mode = "per layer"
        rows = report_rows(estimate_layers(graph, config), config)
        missing = [r.layer for r in rows if r.note.startswith("no: ") and not r.cycles]
        if missing:
            # Layers that do not compile at this point count no cycles: say so, the total
            # is then a lower bound of an incomplete model.
            mode += f", {len(missing)} not compiled: {', '.join(missing[:4])}"
    macs = sum(r.macs for r in rows)
    cycles = sum(r.cycles for r in rows)
    conv = [r for r in rows if r.operators.split("+")[0] == "CONV2D" or "+CONV2D" in r.operators]
    conv_macs, conv_cycles = sum(r.macs for r in conv), sum(r.cycles for r in conv)
    mpc = config.macs_per_cycle
    sizes = config.sram_bytes
    return SweepResult(point, config.bus_bytes,
                       {k: sizes[k] // 1024 for k in ("asram", "wsram", "acc")}, macs, cycles,
                       macs / max(cycles * mpc, 1), conv_macs / max(conv_cycles * mpc, 1),
                       sum(r.bound for r in rows), mode)


def add_speedups(results: list[SweepResult]) -> list[SweepResult]:
    """Speed-up of every point over the 16x16 point of the same memory scale (0 if none, or
    if either point lacks layers that do not compile)."""
    base = {r.point.sram: r.cycles for r in results
            if r.point.array == 16 and "not compiled" not in r.mode}
    for r in results:
        ref = base.get(r.point.sram)
        complete = "not compiled" not in r.mode
        r.speedup = ref / r.cycles if ref and r.cycles and complete else 0.0
    return results


def render_table(title: str, results: list[SweepResult]) -> str:
    head = (f"{'point':<16} {'bus B':>5} {'ASRAM KiB':>9} {'WSRAM KiB':>9} {'MACs':>15} "
            f"{'cycles':>13} {'util%':>6} {'conv util%':>10} {'bound':>13} {'ratio':>6} "
            f"{'speed-up':>8}  mode")
    lines = [title, head, "-" * len(head)]
    for r in results:
        speed = f"{r.speedup:.2f}x" if r.speedup else "-"
        lines.append(f"{r.point.label:<16} {r.bus_bytes:>5} {r.sram_kib['asram']:>9,} "
                     f"{r.sram_kib['wsram']:>9,} {r.macs:>15,} {r.cycles:>13,} "
                     f"{100 * r.utilisation:>6.1f} {100 * r.conv_utilisation:>10.1f} "
                     f"{r.bound:>13,} {r.ratio:>6.3f} {speed:>8}  {r.mode}")
    if any("not compiled" in r.mode for r in results):
        lines.append("note: layers that do not compile on a point count no cycles there: its "
                     "totals, utilisation and speed-up leave them out (see the mode column)")
    if len({r.mode.split(",")[0] for r in results}) > 1:
        lines.append("note: some points do not fit the instruction memory whole and are the sum "
                     "of their layers compiled alone (each paying its boot, its HALT and its "
                     "external traffic); --per-layer estimates every point that way")
    return "\n".join(lines)


def results_csv(results: list[SweepResult]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in results:
        w.writerow([r.point.label, r.point.array, r.bus_bytes, f"{r.point.sram:g}",
                    r.sram_kib["asram"], r.sram_kib["wsram"], r.sram_kib["acc"], r.macs, r.cycles,
                    f"{100 * r.utilisation:.2f}", f"{100 * r.conv_utilisation:.2f}", r.bound,
                    f"{r.ratio:.4f}", f"{r.speedup:.4f}", r.mode])
    return buf.getvalue()


def result_dict(r: SweepResult) -> dict:
    """Plain data of a result (what tests compare between runs)."""
    d = asdict(r)
    d["point"] = (r.point.array, r.point.sram)
    return d
