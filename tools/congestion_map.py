"""Where a placed design's routing demand sits, by NPU unit: a RUDY estimate from nextpnr's JSON.

When nextpnr's routers stall (docs/fpga.md: the 4x4 NPU on the ECP5-85F, half the device's LUTs,
yet neither router converges), its log says how many wires are overused but not where, nor
whose.  This reads a *placed* design, written by nextpnr's ``--write`` (``--no-route --write
placed.json`` stops after placement, about ten minutes for the 4x4 NPU), and estimates the
routing demand per tile with RUDY (rectangular uniform wire density: each net spreads
``(w + h) / (w * h)`` over its pins' bounding box of ``w x h`` tiles; Spindler and Johannes,
DATE 2007), then says which units' nets make up the demand in the hottest tiles.

Units are named from the cells' hierarchical names as Yosys flattens them (``core.npu.vpu...``
-> ``vpu``; a cell is named after the net it drives, so the unit is the driver's).  Nets with
more than ``--max-pins`` pins (the constant drivers, clocks) are left out: the router routes
them on dedicated resources or they would swamp the map.

    python tools/congestion_map.py placed.json [--top 10] [--nets 10] [--json report.json]

``--nets N`` also lists the N net groups with the largest share of the hottest tiles' demand,
a group being the nets whose names differ only in numbers (``vpu.product0_p2[17]`` and
``vpu.product3_p1[4]`` are ``vpu.product#_p#[#]``): which signals of a unit are hot.

RUDY is an estimate.  The router's own account is ``--heat``: nextpnr's router2, run with
``--router2-heatmap PREFIX``, writes per iteration ``PREFIX_congestion_by_net_<i>.csv`` (each
net and the number of overused wires it uses: a wire two nets fight over counts for both)::

    python tools/congestion_map.py --heat heat_congestion_by_net_12.csv [--nets 10]

attributes those counts to units and net groups (no placement needed); with a placed JSON as
well, both reports print.

Exit status 2 for a file that is not a placed nextpnr JSON (one line says why).
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

__all__ = ["congestion", "net_group", "router_overuse", "unit_of"]

BEL = re.compile(r"X(\d+)/Y(\d+)/")
PREFIXES = ("core.npu.", "core.")      # the board top's hierarchy (hw/board/core.py)
RAM_PORT = re.compile(r"(\w+)\.(?:\d+\.)*\d+_(DI|DO)[AB]\d+(?=_|\[|$)")  # a DP16KD data port


def _below_npu(name: str) -> str:
    """A flattened name without Yosys's escape and the board top's hierarchy prefix."""
    name = name.lstrip("\\")
    for prefix in PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def unit_of(name: str) -> str:
    """The unit a flattened cell or net name belongs to: its first hierarchy level below the
    NPU (``core.npu.seq.f_valid`` -> ``seq``), or below the board core.

    Nets that lost their names are named after a port they reach, and for the logic around a
    block RAM that port is the RAM's: ``imem.0.10_DIA9_LUT4_Z_A...`` is a net of the logic
    that forms IMEM's write data (port DIA9 of one of its DP16KDs: the writer's logic, e.g. the
    precheck), ``imem.0.2_DOA0_LUT4_C_Z...`` one of the logic behind its read data (the
    reader's, e.g. the checker).  Those are told apart as ``imem:write`` and ``imem:read``."""
    name = _below_npu(name)
    ram = RAM_PORT.match(name)
    if ram:
        return f"{ram[1]}:{'write' if ram[2] == 'DI' else 'read'}"
    return re.split(r"[.$]|__", name)[0] or "(top)"


def net_group(name: str) -> str:
    """A net's name below the NPU with every number replaced by ``#`` (bit indices, lanes,
    array positions, Yosys's ``$123`` suffixes dropped), cut to its first two hierarchy
    levels and 60 characters: nets of one signal across lanes and bits fall in one group.
    A block RAM's own data nets (``acc.0.1_DOA3[2]``) are ``acc:read data``; the logic
    named after such a port is its unit's (``imem:write``, :func:`unit_of`)."""
    below = _below_npu(name)
    ram = RAM_PORT.match(below)
    if ram:
        return unit_of(name) + (" data" if not below[ram.end():].strip("[]0123456789") else "")
    name = re.sub(r"\$\d+", "", below)
    name = re.sub(r"\d+", "#", name)
    return ".".join(name.split(".")[:2])[:60]


def congestion(design: dict, hot_share: float = 0.01, max_pins: int = 5000, nets: int = 0) -> dict:
    """RUDY map of a placed Yosys/nextpnr JSON ``design``: summary figures, each unit's share
    of the demand in the hottest ``hot_share`` of the used tiles and of the whole chip, the
    cells per unit there, and each unit's placement spread."""
    try:
        top = next(m for m in design["modules"].values() if m.get("cells"))
    except (KeyError, StopIteration, AttributeError):
        raise ValueError("no module with cells: not a Yosys/nextpnr JSON netlist") from None
    pos: dict[str, tuple[int, int]] = {}
    pins: dict[int, list[str]] = defaultdict(list)
    for name, cell in top["cells"].items():
        m = BEL.match(str(cell.get("attributes", {}).get("NEXTPNR_BEL", "")))
        if not m:
            continue
        pos[name] = (int(m[1]), int(m[2]))
        for bits in cell.get("connections", {}).values():
            for bit in bits:
                if isinstance(bit, int):
                    pins[bit].append(name)
    if not pos:
        raise ValueError("no cell has a NEXTPNR_BEL attribute: the design is not placed "
                         "(write it with nextpnr's --write after placement)")
    net_name: dict[int, str] = {}
    for name, net in top.get("netnames", {}).items():
        for bit in net.get("bits", []):
            if isinstance(bit, int) and (bit not in net_name or len(name) < len(net_name[bit])):
                net_name[bit] = name
    width = max(p[0] for p in pos.values()) + 1
    height = max(p[1] for p in pos.values()) + 1
    total = np.zeros((width, height))
    by_unit: dict[str, np.ndarray] = defaultdict(lambda: np.zeros((width, height)))
    by_group: dict[str, np.ndarray] = defaultdict(lambda: np.zeros((width, height)))
    fanout = []
    for bit, cells in pins.items():
        points = [pos[c] for c in cells if c in pos]
        if len(points) < 2 or len(points) > max_pins:
            continue
        xs, ys = zip(*points)
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        w, h = x1 - x0 + 1, y1 - y0 + 1
        density = (w + h) / (w * h)
        total[x0:x1 + 1, y0:y1 + 1] += density
        name = net_name.get(bit, cells[0])
        by_unit[unit_of(name)][x0:x1 + 1, y0:y1 + 1] += density
        if nets:
            by_group[net_group(name)][x0:x1 + 1, y0:y1 + 1] += density
        fanout.append((len(points), name))
    used = total[total > 0]
    threshold = float(np.quantile(used, 1.0 - hot_share))
    hot = total >= threshold
    hot_demand = sum(float(d[hot].sum()) for d in by_unit.values()) or 1.0
    chip_demand = float(total.sum()) or 1.0
    hot_tiles = {(int(x), int(y)) for x, y in np.argwhere(hot)}
    cells_hot = Counter(unit_of(n) for n, p in pos.items() if p in hot_tiles)
    spread = defaultdict(list)
    for name, p in pos.items():
        spread[unit_of(name)].append(p)
    units = {}
    for unit, demand in by_unit.items():
        at = np.array(spread.get(unit, [(0, 0)]))
        units[unit] = {"hot_share": float(demand[hot].sum()) / hot_demand,
                       "chip_share": float(demand.sum()) / chip_demand,
                       "cells": len(spread.get(unit, [])), "cells_in_hot_tiles": cells_hot.get(unit, 0),
                       "median_xy": [int(np.median(at[:, 0])), int(np.median(at[:, 1]))]}
    fanout.sort(reverse=True)
    groups = sorted(((float(d[hot].sum()) / hot_demand, float(d.sum()) / chip_demand, g)
                     for g, d in by_group.items()), reverse=True)[:nets]
    return {"grid": [width, height], "rudy_max": float(total.max()), "rudy_mean": float(used.mean()),
            "hot_threshold": threshold, "hot_tiles": len(hot_tiles), "units": units,
            "largest_fanout": [{"pins": n, "net": name} for n, name in fanout[:5]],
            "net_groups": [{"group": g, "hot_share": h, "chip_share": c} for h, c, g in groups]}


def router_overuse(rows, nets: int = 0) -> dict:
    """Router2's overused wires per unit and net group, from the rows of a
    ``*_congestion_by_net_<i>.csv`` heatmap (``name,count``; anything else is an error)."""
    units: Counter = Counter()
    groups: Counter = Counter()
    for line, row in enumerate(rows, 1):
        if not row or not "".join(row).strip():
            continue
        name, count = row[0], (row[1].strip() if len(row) > 1 else "")
        if not count.isdigit():
            raise ValueError(f"line {line}: expected 'net,count', got {','.join(row)[:60]!r}")
        units[unit_of(name)] += int(count)
        groups[net_group(name)] += int(count)
    total = sum(units.values())
    if not total:
        raise ValueError("no overused wires: not a router2 congestion-by-net heatmap, or routing converged")
    return {"total": total, "units": {u: n / total for u, n in units.most_common()},
            "net_groups": [{"group": g, "share": n / total} for g, n in groups.most_common(nets)]}


def format_overuse(report: dict, top: int = 10) -> str:
    lines = [f"router2: {report['total']:,} overused wire uses (a wire counts once per net on it)",
             f"{'unit':<16} {'share':>6}"]
    lines += [f"{u:<16} {100 * s:5.1f}%" for u, s in list(report["units"].items())[:top]]
    if report["net_groups"]:
        lines.append(f"{'net group':<60} {'share':>6}")
        lines += [f"{g['group']:<60} {100 * g['share']:5.1f}%" for g in report["net_groups"]]
    return "\n".join(lines)


def format_report(report: dict, top: int = 10) -> str:
    w, h = report["grid"]
    lines = [f"grid {w} x {h} tiles; RUDY max {report['rudy_max']:.1f}, mean over used tiles "
             f"{report['rudy_mean']:.1f}; hottest tiles (>= {report['hot_threshold']:.1f}): {report['hot_tiles']}",
             f"{'unit':<12} {'hot share':>9} {'chip share':>10} {'cells':>7} {'in hot':>7} {'median x,y':>11}"]
    ranked = sorted(report["units"].items(), key=lambda kv: -kv[1]["hot_share"])[:top]
    for unit, u in ranked:
        lines.append(f"{unit:<12} {100 * u['hot_share']:8.1f}% {100 * u['chip_share']:9.1f}% {u['cells']:7,} "
                     f"{u['cells_in_hot_tiles']:7,} {u['median_xy'][0]:>5},{u['median_xy'][1]:<5}")
    lines.append("largest fanout: " + "; ".join(f"{f['net']} ({f['pins']} pins)" for f in report["largest_fanout"]))
    if report.get("net_groups"):
        lines.append(f"{'net group':<60} {'hot share':>9} {'chip share':>10}")
        for g in report["net_groups"]:
            lines.append(f"{g['group']:<60} {100 * g['hot_share']:8.1f}% {100 * g['chip_share']:9.1f}%")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="congestion_map", description=__doc__.split("\n")[0])
    p.add_argument("placed", type=Path, nargs="?", help="placed nextpnr JSON (--write)")
    p.add_argument("--heat", type=Path, help="router2's congestion-by-net heatmap CSV (--router2-heatmap)")
    p.add_argument("--top", type=int, default=10, help="units to list (default 10)")
    p.add_argument("--hot", type=float, default=0.01, help="share of used tiles called hottest (default 0.01)")
    p.add_argument("--max-pins", type=int, default=5000, help="leave out nets with more pins (default 5000)")
    p.add_argument("--nets", type=int, default=0, help="also list this many net groups by hot share (default 0)")
    p.add_argument("--json", type=Path, help="also write the report as JSON")
    a = p.parse_args(argv)
    if not 0 < a.hot < 1:
        print(f"error: --hot {a.hot}: must be between 0 and 1", file=sys.stderr)
        return 2
    if a.nets < 0:
        print(f"error: --nets {a.nets}: must be 0 or more", file=sys.stderr)
        return 2
    if a.placed is None and a.heat is None:
        print("error: give a placed JSON, a --heat CSV, or both", file=sys.stderr)
        return 2
    def heat(path):
        with path.open(newline="") as f:
            return router_overuse(csv.reader(f), a.nets)

    def rudy(path):
        return congestion(json.loads(path.read_text()), a.hot, a.max_pins, a.nets)

    report, text = {}, []
    for key, path, read, fmt in (("router_overuse", a.heat, heat, format_overuse),
                                 ("rudy", a.placed, rudy, format_report)):
        if path is None:
            continue
        try:
            report[key] = read(path)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error, ValueError) as e:
            print(f"error: {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
            return 2
        text.append(fmt(report[key], a.top))
    print("\n\n".join(text))
    if a.json:      # the RUDY report alone keeps its old shape (its keys at the top level)
        a.json.write_text(json.dumps(report if a.heat else report["rudy"], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
