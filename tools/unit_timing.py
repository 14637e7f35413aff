"""Per-unit critical path on ECP5: one NPU unit, its ports registered, through Yosys and nextpnr.

    python tools/unit_timing.py --config small --unit checker [--unit vpu ...] [--freq 100]

Placing and routing the whole NPU takes well over an hour on a two-core machine; one unit
takes minutes.  Each unit (an Amaranth Component of hw/) is wrapped so that every input
port is driven by a flip-flop and every output port feeds one: its internal logic then
shows up as register-to-register paths, which is what nextpnr times out of context.  Paths
that in the full design start at a block RAM's output (IMEM into the checker, the
scratchpads into the VPU) start here at a flip-flop, which is about 1-2 ns faster than a
DP16KD without its output register: figures are a lower bound on the real path.

Writes ``build/unit_timing/<config>-<unit>/`` (Verilog-free: RTLIL, Yosys and nextpnr logs,
nextpnr's JSON report) and prints, per unit, Fmax, LUTs, DSPs, and the worst path with its
logic levels and its start and end cells.  ``--no-pnr`` stops after Yosys (resources only); ``--no-route`` stops after placement and
reports nextpnr's estimate there (no path report: nextpnr names paths only after routing).
The worst path's ``through`` lists the hw/ source lines its nets were defined at, in order.

``--target ice40`` counts resources for the iCE40 UP5K instead (``synth_ice40 -dsp``: LUT4s,
flip-flops, carries, SB_MAC16, block RAMs; no place and route), and ``--bare`` synthesizes
the unit without the port registers, so that its flip-flops are its own: together they give
the per-unit logic-cell account of a configuration against the UP5K's 5,280 cells::

    python tools/unit_timing.py --config up5k --target ice40 --bare --unit sequencer --unit vpu
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from amaranth import Elaboratable, Module, Signal, Value
from amaranth.back import rtlil
from amaranth.lib import wiring

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hw.synth.flow import PNR, _run_bounded, run_yosys  # noqa: E402
from isa.config import NAMED_CONFIGS  # noqa: E402


def _units(cfg):
    """Unit name -> constructor of the Component (imports late: each pulls in hw/)."""
    def checker():          # the read port's half, as the sequencer uses it
        from hw.checker import InstrChecker
        return InstrChecker(cfg, precomputed=True)

    def checker_whole():    # both halves in one combinational piece
        from hw.checker import InstrChecker
        return InstrChecker(cfg)

    def precheck():         # the fetch side's half (hw/precheck.py)
        from hw.precheck import PreCheck
        return PreCheck(cfg, staged=True)

    def loop():
        from hw.loop import LoopStack
        from hw.precheck import index_bits
        return LoopStack(cfg, index_bits(cfg))

    def named(module, cls):
        def make():
            mod = __import__(f"hw.{module}", fromlist=[cls])
            return getattr(mod, cls)(cfg)
        return make

    return {"checker": checker, "checker_whole": checker_whole, "precheck": precheck, "loop": loop, "sequencer": named("sequencer", "Sequencer"),
            "dma": named("dma", "Dma"), "mxu": named("mxu", "Mxu"), "vpu": named("vpu", "Vpu"),
            "table": named("table", "Table"), "csrs": named("csr", "CsrBlock")}


class Registered(Elaboratable):
    """``unit`` with a flip-flop on every port (inputs driven by one, outputs into one)."""

    def __init__(self, unit):
        self.unit = unit
        self.links = []                       # (outer port, unit's port, flows in)
        for path, member, value in unit.signature.flatten(unit):
            width = Value.cast(value).shape().width       # structured ports as plain bits
            outer = Signal(width, name="p_" + "_".join(str(p) for p in path))
            self.links.append((outer, value, member.flow == wiring.In))
        self.ports = [outer for outer, _, _ in self.links]

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = self.unit
        for outer, value, flows_in in self.links:
            value = Value.cast(value)
            m.d.sync += value.eq(outer) if flows_in else outer.eq(value)
        return m


def elaborate(unit_name: str, cfg, out_dir: Path, bare: bool = False) -> Path:
    unit = _units(cfg)[unit_name]()
    top = unit if bare else Registered(unit)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "unit.il"
    path.write_text(rtlil.convert(top, name="top", ports=None if bare else top.ports))
    return path


def synth(out_dir: Path, timeout: float, target: str = "ecp5") -> dict:
    """Yosys's vendor script on ``unit.il``; the unit's cells by kind (LUTs count carry cells)."""
    script = "\n".join([
        "read_rtlil unit.il",
        "synth_ecp5 -top top" if target == "ecp5" else "synth_ice40 -dsp -top top",
        "tee -q -o stat.json stat -json",
        "write_json netlist.json",
    ]) + "\n"
    run_yosys(script, out_dir, "synth", timeout)
    stat = json.loads((out_dir / "stat.json").read_text())
    cells = stat["modules"]["\\top"]["num_cells_by_type"] if "\\top" in stat["modules"] else \
        next(iter(stat["modules"].values()))["num_cells_by_type"]
    if target == "ice40":
        # An iCE40 logic cell holds one LUT4, one flip-flop and one carry: a design needs at
        # least max(LUTs, FFs, carries) cells (more where the packer cannot pair them).
        luts = cells.get("SB_LUT4", 0)
        ffs = sum(n for c, n in cells.items() if c.startswith("SB_DFF"))
        return {"luts": luts, "ffs": ffs, "carries": cells.get("SB_CARRY", 0),
                "lcs_at_least": max(luts, ffs, cells.get("SB_CARRY", 0)), "dsps": cells.get("SB_MAC16", 0),
                "brams": cells.get("SB_RAM40_4K", 0) + cells.get("SB_SPRAM256KA", 0)}
    return {"luts": cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0),
            "ffs": sum(n for c, n in cells.items() if c.startswith("TRELLIS_FF")),
            "dsps": cells.get("MULT18X18D", 0)}


def pnr(out_dir: Path, freq: float, timeout: float, route: bool = True) -> dict:
    exe, device = PNR["ecp5"]
    local = Path(sys.executable).parent / exe
    cmd = [str(local) if local.exists() else exe] + device + [
        "--json", "netlist.json", "--out-of-context", "--freq", f"{freq:g}", "--timing-allow-fail",
        "--seed", "1", "--report", "pnr.json", "--log", "pnr.log"] + ([] if route else ["--no-route"])
    rc = _run_bounded(cmd, out_dir, timeout, "nextpnr", out_dir / "pnr.log")
    if rc != 0:
        raise RuntimeError(f"nextpnr failed ({out_dir / 'pnr.log'})")
    rep = json.loads((out_dir / "pnr.json").read_text())
    log = (out_dir / "pnr.log").read_text()
    if rep.get("fmax"):
        fmax = min(v["achieved"] for v in rep["fmax"].values())
    else:                       # --no-route: the report has no clocks; the log has the estimate
        fmax = float(_FMAX.findall(log)[-1])
    worst = rep["critical_paths"][0]["path"] if rep.get("critical_paths") else []
    return {"fmax_mhz": round(fmax, 2),
            "delay_ns": round(sum(s.get("delay", 0.0) for s in worst), 2),
            "levels": sum(s.get("type") == "logic" for s in worst),
            "from": worst[0]["from"]["cell"] if worst else "", "to": worst[-1]["to"]["cell"] if worst else "",
            "through": path_sources(log), "routed": route}


_FMAX = re.compile(r"Max frequency for clock '[^']*': ([0-9.]+) MHz")
_SOURCE = re.compile(r"^Info:\s+(/\S*/(hw/\S+\.py):(\d+))")


def path_sources(log: str) -> list[str]:
    """The hw/ source lines the worst path goes through, in order (from nextpnr's critical
    path report: "Defined in:" under each net)."""
    start = log.rfind("Critical path report for clock")
    if start < 0:
        return []
    section = log[start:log.find("\n\n", start) if log.find("\n\n", start) > 0 else len(log)]
    out = []
    for line in section.splitlines():
        m = _SOURCE.match(line)
        if m and (not out or out[-1] != f"{m.group(2)}:{m.group(3)}"):
            out.append(f"{m.group(2)}:{m.group(3)}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--config", default="small", choices=sorted(NAMED_CONFIGS))
    p.add_argument("--unit", action="append", required=True, help="checker, checker_whole, precheck, loop, sequencer, dma, mxu, vpu, table, csrs")
    p.add_argument("--freq", type=float, default=100.0)
    p.add_argument("--target", choices=("ecp5", "ice40"), default="ecp5",
                   help="ice40: synth_ice40 -dsp, resources only (implies --no-pnr)")
    p.add_argument("--bare", action="store_true",
                   help="the unit without port registers (for resource counts: its FFs are its own)")
    p.add_argument("--no-pnr", action="store_true")
    p.add_argument("--no-route", action="store_true",
                   help="place only: nextpnr's estimate after placement (minutes faster on large units)")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--out", default="build/unit_timing")
    args = p.parse_args(argv)
    cfg = NAMED_CONFIGS[args.config]
    for name in args.unit:
        suffix = ("-ice40" if args.target == "ice40" else "") + ("-bare" if args.bare else "")
        out_dir = Path(args.out) / f"{args.config}-{name}{suffix}"
        elaborate(name, cfg, out_dir, bare=args.bare)
        row = {"unit": name, "target": args.target, **synth(out_dir, args.timeout, args.target)}
        if not args.no_pnr and args.target == "ecp5":
            row.update(pnr(out_dir, args.freq, args.timeout, route=not args.no_route))
        (out_dir / "result.json").write_text(json.dumps(row, indent=1) + "\n")
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
