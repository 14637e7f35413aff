"""``python -m hw.board build --board ulx3s|icebreaker [--config NAME] [--design npu|bridge]``.

Exit status: 0 built, 1 the build failed (one line says why: e.g. the design does not fit),
2 malformed arguments, 3 an unsupported combination (e.g. a clock the PLL cannot make).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from isa.config import NAMED_CONFIGS
from hw.board.build import BOARDS, BuildError, build_board
from hw.board.top import DESIGNS


def _seeds(text: str) -> tuple:
    """``default,7,13``: nextpnr's own seed (no ``--seed``), then seeds 7 and 13."""
    try:
        return tuple(None if x == "default" else int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seeds like default,7,13") from None


def _defaults(describe) -> str:
    """``ulx3s: X; icebreaker: Y``: a board default per board, from BOARDS (the one place they live)."""
    return "; ".join(f"{name}: {describe(spec)}" for name, spec in BOARDS.items())


def _seed_list(seeds: tuple) -> str:
    return ",".join("default" if s is None else str(s) for s in seeds) or "nextpnr's own"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hw.board", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a bitstream with the YoWASP tools")
    b.add_argument("--board", required=True, choices=sorted(BOARDS))
    b.add_argument("--config", choices=sorted(NAMED_CONFIGS),
                   help=f"NPU configuration (default: the board's, {_defaults(lambda b: b.config)})")
    b.add_argument("--design", choices=DESIGNS, default="npu",
                   help="npu: the whole NPU; bridge: bring-up image (bridge and memory, no NPU)")
    b.add_argument("--freq", type=float,
                   help=f"design clock in MHz (default: {_defaults(lambda b: f'{b.freq_mhz:g}')})")
    b.add_argument("--mem-kib", type=int, help="board memory in KiB, a power of two (default: " + _defaults(
                   lambda b: ", ".join(f"{d} {n // 1024}" for d, n in b.mem_bytes.items())) + ")")
    b.add_argument("--nextpnr-opts", default=None, metavar="OPTS",
                   help="nextpnr options in place of the board's (" + _defaults(
                       lambda b: f'"{b.nextpnr_opts}"' if b.nextpnr_opts else "none") + "), e.g. \"--router router1\"")
    b.add_argument("--seeds", type=_seeds, default=None, metavar="N,N,...",
                   help="nextpnr seeds to try in turn while router2 stalls (a run is stopped after "
                   "--patience iterations without a new low of overused wires; default: "
                   + _defaults(lambda b: _seed_list(b.seeds)) + ")")
    b.add_argument("--patience", type=int, default=12, metavar="ITERATIONS",
                   help="router2 iterations without progress before a run is stopped (default 12)")
    b.add_argument("--out", type=Path, default=Path("build/board"), help="build root (default build/board)")
    args = parser.parse_args(argv)
    if args.patience < 1:
        parser.error(f"--patience {args.patience}: must be 1 or more")
    try:
        report = build_board(args.board, args.config, args.design, args.freq,
                             args.mem_kib * 1024 if args.mem_kib else None, args.out,
                             nextpnr_opts=args.nextpnr_opts, seeds=args.seeds, patience=args.patience)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except BuildError as e:
        print(f"error: {args.board} {args.design} build failed: {e}", file=sys.stderr)
        return 1
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
