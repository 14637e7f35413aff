"""Benchmark: the FPGA builds on record: utilisation and post-route Fmax against the target.

A bitstream build takes from minutes (the bridge image) to hours (the whole NPU on the
ECP5-85F), so this benchmark runs none: it reads what ``make bitstream`` (``python -m
hw.board build``) left under ``build/board/<board>/<design>-<config>/``, nextpnr's
``--report`` JSON (``report.json``: resources used / available, the clock's achieved
Fmax and its constraint) and whether the bitstream was written.  A build that stopped in
placement (the design does not fit) or before routing has no report and is listed as such.
"""
from __future__ import annotations

import json
from pathlib import Path

from bench.report import BenchContext, Column, Table
from hw.board.build import BOARDS, NAME

DESCRIPTION = "FPGA builds on record (make bitstream): LUT/FF/DSP/BRAM used of available, post-route Fmax"

ROOT = Path(__file__).resolve().parent.parent


def _used(util: dict, resource: str) -> str | None:
    entry = util.get(resource)
    if not entry:
        return None
    used, avail = entry["used"], entry["available"]
    return f"{used} / {avail} ({100 * used / avail:.0f}%)" if avail else str(used)


def builds(root: Path) -> list[dict]:
    """One dict per build directory under ``root`` (``build/board``)."""
    out = []
    for board_dir in sorted(p for p in root.glob("*") if p.is_dir() and p.name in BOARDS):
        spec = BOARDS[board_dir.name]
        for d in sorted(p for p in board_dir.glob("*") if p.is_dir()):
            design, _, config = d.name.partition("-")
            row = {"board": board_dir.name, "design": design, "config": config, "report": None,
                   "bitstream": any((d / f"{NAME}.{ext}").exists() for ext in ("bit", "bin"))}
            report = d / "report.json"
            if report.exists():
                try:
                    data = json.loads(report.read_text())
                except (OSError, ValueError):
                    data = None
                if isinstance(data, dict):
                    util = data.get("utilization", {})
                    row["report"] = {kind: _used(util, res) for kind, res in spec.resources.items()}
                    clocks = [c for c in data.get("fmax", {}).values() if isinstance(c, dict)]
                    if clocks:
                        worst = min(clocks, key=lambda c: c.get("achieved", 0))
                        row["fmax"], row["target"] = worst.get("achieved"), worst.get("constraint")
            out.append(row)
    return out


def run(ctx: BenchContext) -> list[Table]:
    root = ROOT / "build" / "board"
    table = Table("fpga", "FPGA builds on record (make bitstream; nextpnr report.json)", [
        Column("board"), Column("design"), Column("config"), Column("LUT"), Column("FF"), Column("DSP"),
        Column("BRAM"), Column("Fmax", "MHz", ".2f"), Column("target", "MHz", ".2f"), Column("meets"),
        Column("bitstream")])
    for b in builds(root):
        rep = b["report"] or {}
        fmax, target = b.get("fmax"), b.get("target")
        meets = None if fmax is None or target is None else ("yes" if fmax >= target else "NO")
        table.add(b["board"], b["design"], b["config"], rep.get("LUT"), rep.get("FF"), rep.get("DSP"),
                  rep.get("BRAM"), fmax, target, meets, "yes" if b["bitstream"] else "no")
    if not table.rows:
        table.notes.append(f"no build under {root}: make bitstream BOARD=ulx3s|icebreaker DESIGN=npu|bridge")
    table.notes.append("a row without figures stopped before nextpnr's report (placement or earlier); "
                       "docs/fpga.md has the measured account of each build")
    return [table]
