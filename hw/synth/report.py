"""Turn Yosys's per-module statistics into a per-unit resource table (text and JSON).

Units are the Amaranth submodules of hw/top.py: a module's cells count towards the unit
whose hierarchical name it starts with (``top.seq.loops`` is the sequencer's); the top
module's own cells are the scratchpad memories and their port glue ("memories").

What the columns count, per target:

* LUTs: 4-input LUTs, plus two per ECP5 carry cell (CCU2C packs two LUT4s); ECP5 wide-mux
  cells (PFUMX, L6MUX21) and iCE40 carry cells (SB_CARRY) use no extra LUTs.
* LUTRAM: ECP5 TRELLIS_DPR16X4 distributed RAM (one slice each), small memories.
* FFs, DSPs (MULT18X18D / SB_MAC16), BRAMs (DP16KD / SB_RAM40_4K + SB_SPRAM256KA).
"""
from __future__ import annotations

__all__ = ["UNITS", "format_table", "per_unit", "unit_of"]

UNITS = {"top.seq": "sequencer", "top.dma": "DMA", "top.mxu": "MXU", "top.vpu": "VPU",
         "top.table": "TABLE", "top.csrs": "CSRs", "top": "memories"}

_LUT = {"LUT4": 1, "CCU2C": 2, "SB_LUT4": 1}
_FF_PREFIX = ("TRELLIS_FF", "SB_DFF")
_LUTRAM = ("TRELLIS_DPR16X4",)


def unit_of(module: str) -> str:
    """The unit a Yosys module (``\\top.seq.loops``) belongs to."""
    name = module.lstrip("\\")
    best = max((p for p in UNITS if name == p or name.startswith(p + ".")), key=len, default=None)
    return UNITS[best] if best else name


def per_unit(stat: dict, dsp: tuple[str, ...], bram: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Resource counts per unit (and ``total``) from ``stat -json`` output."""
    rows: dict[str, dict[str, int]] = {}
    for module, data in stat.get("modules", {}).items():
        unit = unit_of(module)
        row = rows.setdefault(unit, {"luts": 0, "ffs": 0, "dsps": 0, "brams": 0, "lutram": 0, "opaque": 0})
        for cell, n in data.get("num_cells_by_type", {}).items():
            if cell in _LUT:
                row["luts"] += _LUT[cell] * n
            elif cell.startswith(_FF_PREFIX):
                row["ffs"] += n
            elif cell in dsp:
                row["dsps"] += n
            elif cell in bram:
                row["brams"] += n
            elif cell in _LUTRAM:
                row["lutram"] += n
            elif cell == "npu_fallback_mem":
                row["opaque"] += n
    order = [u for u in UNITS.values() if u in rows] + sorted(set(rows) - set(UNITS.values()))
    out = {u: rows[u] for u in order}
    out["total"] = {k: sum(r[k] for r in rows.values()) for k in ("luts", "ffs", "dsps", "brams", "lutram", "opaque")}
    return out


def format_table(units: dict[str, dict[str, int]]) -> str:
    head = f"{'unit':<10} {'LUTs':>8} {'FFs':>8} {'DSPs':>6} {'BRAMs':>6} {'LUTRAM':>7}"
    lines = [head, "-" * len(head)]
    for unit, r in units.items():
        extra = f"  (+{r['opaque']} memories not mapped)" if r["opaque"] else ""
        lines.append(f"{unit:<10} {r['luts']:>8} {r['ffs']:>8} {r['dsps']:>6} {r['brams']:>6} {r['lutram']:>7}{extra}")
    return "\n".join(lines)


def summarize_pnr(pnr: dict, freq_mhz: float, paths: int = 3) -> dict:
    """The figures of a nextpnr ``--report`` JSON: the slowest clock's achieved frequency,
    whether it meets ``freq_mhz``, utilisation of the resources the design uses, and the
    ``paths`` worst critical paths (start cell, end cell, delay in ns)."""
    clocks = {name: v for name, v in pnr.get("fmax", {}).items()}
    fmax = min((v["achieved"] for v in clocks.values()), default=float("inf"))
    used = {k: (v["used"], v["available"]) for k, v in pnr.get("utilization", {}).items() if v.get("used")}
    crit = []
    for cp in pnr.get("critical_paths", [])[:paths]:
        steps = cp.get("path", [])
        if not steps:
            continue
        delay = sum(step.get("delay", 0.0) for step in steps)
        crit.append({"from": steps[0]["from"]["cell"], "to": steps[-1]["to"]["cell"], "delay_ns": round(delay, 2),
                     "logic_levels": sum(step.get("type") == "logic" for step in steps)})
    return {"fmax_mhz": fmax, "target_mhz": freq_mhz, "met": fmax >= freq_mhz,
            "clocks": {k: v["achieved"] for k, v in clocks.items()}, "utilization": used,
            "critical_paths": crit}


def format_pnr(summary: dict) -> str:
    """Text table of :func:`summarize_pnr`."""
    verdict = "met" if summary["met"] else "MISSED"
    lines = [f"place and route: {summary['fmax_mhz']:.1f} MHz achieved, target {summary['target_mhz']:g} MHz ({verdict})",
             f"  {'resource':<16} {'used':>8} {'available':>10}"]
    lines += [f"  {k:<16} {u:>8,} {a:>10,}" for k, (u, a) in sorted(summary["utilization"].items())]
    for cp in summary["critical_paths"]:
        lines.append(f"  critical path {cp['delay_ns']:.2f} ns, {cp['logic_levels']} logic levels: "
                     f"{cp['from']} -> {cp['to']}")
    return "\n".join(lines)
