"""A post-route critical path, stage by stage and unit by unit, from nextpnr's ``--report`` JSON.

Usage::

    python tools/critical_path.py build/board/ulx3s/npu-small/report.json [--index N] [--csv F] [--json F]

The board build prints a critical path's two ends (``core.npu.acc.3.0 ->
core.extmem.mem.0.31``), and those can mislead: the ULX3S NPU's worst path with those ends
ran through the sequencer's branch condition, its fetch request and the bus multiplexer,
not through the DMA (docs/fpga.md, "Registers for the clock").  This prints every step of
path ``N`` (0: the worst; nextpnr lists one per clock pair) with its cumulative time and the
unit its cell or net belongs to (tools/congestion_map.py ``unit_of``: the first hierarchy
level below the NPU, ``imem:read`` for the logic behind a block RAM's read data), then the
path as a sequence of units: the time each stretch spends in logic and in routing.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from congestion_map import unit_of  # noqa: E402

__all__ = ["path_steps", "path_stretches", "format_path"]


def path_steps(report: dict, index: int = 0) -> list[dict]:
    """The steps of critical path ``index`` of a nextpnr report: type (clk-to-q, logic,
    routing, setup, ...), delay and cumulative time in ns, the cell (logic and clock-to-out:
    the cell driven; routing: the net) and its unit."""
    paths = report.get("critical_paths", [])
    if not 0 <= index < len(paths):
        raise ValueError(f"the report has {len(paths)} critical path(s); there is no path {index}")
    out, t = [], 0.0
    for step in paths[index].get("path", []):
        delay = float(step.get("delay", 0.0))
        t += delay
        kind = step.get("type", "?")
        name = step.get("net", "") if kind == "routing" else step.get("to", {}).get("cell", "")
        out.append({"type": kind, "delay_ns": round(delay, 3), "at_ns": round(t, 3), "name": name,
                    "unit": unit_of(name) if name else ""})
    return out


def path_stretches(steps: list[dict]) -> list[dict]:
    """Consecutive steps in one unit as one stretch: unit, logic levels, ns in logic (cells,
    clock-to-out and setup included) and in routing.  A routing step joins the stretch of the
    cell it leaves (its net is named after either end, so its own name is not used)."""
    out: list[dict] = []
    for step in steps:
        if step["type"] == "routing" and out:
            out[-1]["routing_ns"] += step["delay_ns"]
            continue
        unit = step["unit"] or "(unnamed)"
        if not out or out[-1]["unit"] != unit:
            out.append({"unit": unit, "levels": 0, "logic_ns": 0.0, "routing_ns": 0.0})
        out[-1]["levels"] += step["type"] == "logic"      # as the board summary counts them
        out[-1]["logic_ns"] += step["delay_ns"]
    for s in out:
        s["logic_ns"], s["routing_ns"] = round(s["logic_ns"], 3), round(s["routing_ns"], 3)
    return out


def format_path(steps: list[dict], width: int = 100) -> str:
    """Text: the steps (zero-delay carry-chain hops folded into the next step), then the stretches."""
    lines = [f"{'at ns':>7} {'type':<9} {'ns':>6}  {'unit':<14} cell or net"]
    for step in steps:
        if step["delay_ns"] == 0 and step["type"] in ("logic", "routing"):
            continue
        lines.append(f"{step['at_ns']:7.2f} {step['type']:<9} {step['delay_ns']:6.2f}  {step['unit']:<14} "
                     f"{step['name'][:width]}")
    stretches = path_stretches(steps)
    total = steps[-1]["at_ns"] if steps else 0.0
    lines += ["", f"{'unit':<14} {'levels':>6} {'logic ns':>9} {'routing ns':>11}"]
    lines += [f"{s['unit']:<14} {s['levels']:>6} {s['logic_ns']:9.2f} {s['routing_ns']:11.2f}" for s in stretches]
    routing = sum(s["routing_ns"] for s in stretches)
    lines.append(f"{'total':<14} {sum(s['levels'] for s in stretches):>6} {total - routing:9.2f} {routing:11.2f}"
                 f"   ({total:.2f} ns, {1000 / total:.2f} MHz)" if total else "total 0 ns")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="nextpnr --report JSON (report.json of a board build)")
    parser.add_argument("--index", type=int, default=0, help="which critical path (0: the first listed)")
    parser.add_argument("--csv", type=Path, help="write the steps as CSV")
    parser.add_argument("--json", type=Path, help="write steps and stretches as JSON")
    args = parser.parse_args(argv)
    try:
        report = json.loads(args.report.read_text())
        steps = path_steps(report, args.index)
    except FileNotFoundError:
        print(f"error: {args.report}: no such file", file=sys.stderr)
        return 2
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        print(f"error: {args.report}: not a nextpnr report (JSON: {e})", file=sys.stderr)
        return 2
    except (ValueError, TypeError, AttributeError, KeyError) as e:
        print(f"error: {args.report}: {e}", file=sys.stderr)
        return 2
    print(format_path(steps))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(steps[0]) if steps else ["type"])
            w.writeheader()
            w.writerows(steps)
    if args.json:
        args.json.write_text(json.dumps({"steps": steps, "stretches": path_stretches(steps)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
