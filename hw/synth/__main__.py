"""``python -m hw.synth --config small --target ecp5`` (or ``make synth CONFIG=small TARGET=ecp5``).

Elaborates the NPU for a named configuration (isa/config.NAMED_CONFIGS) or a JSON file,
checks with YoWASP Yosys which memories and multipliers map to block RAM and DSPs (naming
every memory over 1 Kbit that fell back to flip-flops and every multiplier left in LUTs),
then, unless ``--check-only``, synthesizes the whole design and prints LUTs, FFs, DSPs and
block RAMs per unit, and (ECP5, unless ``--no-pnr``) places and routes it with nextpnr out of
context and prints the achieved clock against ``--freq`` with the critical paths.  Everything goes to ``build/synth/<config>-<target>/``; the report is
``report.json`` there.  Exit status: 0 mapped (and timing met), 1 something fell back to
fabric or the clock target was missed (the report still prints), 2 bad arguments, 4 Yosys failed or timed out.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hw.synth.flow import PNR, TARGETS, SynthError, check, elaborate, full, place_and_route
from hw.synth.report import format_pnr, format_table, per_unit, summarize_pnr
from isa.config import NAMED_CONFIGS, NpuConfig


def _config(spec: str) -> NpuConfig:
    if spec in NAMED_CONFIGS:
        return NAMED_CONFIGS[spec]
    try:
        return NpuConfig.from_dict(json.loads(Path(spec).read_text()))
    except (OSError, ValueError, TypeError) as e:
        print(f"error: {spec}: not a configuration name ({', '.join(NAMED_CONFIGS)}) or a readable "
              f"NpuConfig JSON file: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hw.synth", description=__doc__.split("\n\n")[1])
    p.add_argument("--config", default="small", help=f"{', '.join(NAMED_CONFIGS)} or a JSON file")
    p.add_argument("--target", default="ecp5", choices=sorted(TARGETS))
    p.add_argument("--check-only", action="store_true", help="stop after the memory/multiplier mapping check")
    p.add_argument("--freq", type=float, default=100.0, help="target clock in MHz for place and route (default 100)")
    p.add_argument("--no-pnr", action="store_true", help="stop after synthesis (no nextpnr run)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per Yosys run (default 3600)")
    p.add_argument("--out", default="build/synth", help="output folder (default build/synth)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    cfg = _config(args.config)
    name = Path(args.config).stem if args.config not in NAMED_CONFIGS else args.config
    out_dir = Path(args.out) / f"{name}-{args.target}"
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))

    t0 = time.monotonic()
    il = elaborate(cfg, out_dir)
    report: dict = {"config": name, "target": args.target, "npu_config": cfg.to_dict(),
                    "elaborate_s": round(time.monotonic() - t0, 1)}
    try:
        t1 = time.monotonic()
        res = check(il, args.target, timeout=args.timeout, progress=progress)
        report["check_s"] = round(time.monotonic() - t1, 1)
        report["memories"] = [vars(m) for m in res.memories]
        report["memories_in_ffs"] = [m.name for m in res.ff_memories]
        report["fabric_multipliers"] = res.fabric_multipliers
        report["dsp_cells"] = res.dsp_cells
        if not args.check_only:
            t2 = time.monotonic()
            stat = full(il, args.target, res, timeout=args.timeout, progress=progress)
            report["full_s"] = round(time.monotonic() - t2, 1)
            report["units"] = per_unit(stat, TARGETS[args.target]["dsp"], TARGETS[args.target]["bram"])
            if not args.no_pnr and args.target in PNR and not res.ff_memories:
                t3 = time.monotonic()
                pnr = place_and_route(out_dir, args.target, args.freq, timeout=args.timeout, progress=progress)
                report["pnr_s"] = round(time.monotonic() - t3, 1)
                report["pnr"] = summarize_pnr(pnr, args.freq)
    except SynthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 4
    (out_dir / "report.json").write_text(json.dumps(report, indent=1) + "\n")

    print(f"configuration {name}, target {args.target} ({out_dir}/report.json)")
    for m in res.memories:
        where = m.via or f"FLIP-FLOPS ({m.write_ports}W/{m.read_ports}R ports fit no block RAM)"
        print(f"  memory {m.name:<28} {m.bits / 1024:8.1f} Kbit  {where}")
    mxu_fabric = [c for c in res.fabric_multipliers if c["module"].lstrip("\\").startswith("top.mxu")]
    for c in res.fabric_multipliers:
        print(f"  multiplier in LUTs: {c['module'].lstrip(chr(92))} {c['cell']} {c['src']}")
    if "units" in report:
        print(format_table(report["units"]))
    if "pnr" in report:
        print(format_pnr(report["pnr"]))
    missed = "pnr" in report and not report["pnr"]["met"]
    if missed:
        print(f"TIMING MISSED: {report['pnr']['fmax_mhz']:.1f} MHz achieved, {args.freq:g} MHz wanted",
              file=sys.stderr)
    bad = bool(res.ff_memories or mxu_fabric or missed)
    if bad:
        print(f"NOT MAPPED: {len(res.ff_memories)} memories over 1 Kbit in flip-flops, "
              f"{len(mxu_fabric)} MAC array multipliers in LUTs", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
