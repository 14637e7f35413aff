"""Run programs on the RTL: Verilator build cache and the ``run_program`` harness.

``build(config)`` generates the NPU's Verilog, and builds it with hw/harness/tb/tb_top.sv (NPU plus
external-memory model) into ``<build root>/rtl/<hash>/`` once: the hash covers the Verilog,
the testbench, the configuration and the build options, so an unchanged design is never
rebuilt (``NPU_BUILD_ROOT`` sets the build root, default ``./build``; ``NPU_RTL_PGO=0`` builds
without the profile-guided step, at half the build time).  ``run_program``
then runs one program per simulator process on that build: memory in through ``$readmemh``,
out through ``$writememh``, the testbench idle while the NPU runs.

Differences from cocotb's stock Verilator runner: ``--public-flat-rw`` is dropped (only
tb_top's ports are visible to cocotb, so Verilator optimises the NPU freely), and waveforms
are FST (``waves=True`` or ``WAVES=1``; they need their own build).

Speed (PERFORMANCE.md, "RTL simulation speed"): tb_top generates the clock itself
(``--timing``), so no VPI call happens per edge, and registers the reset, so no NPU logic
depends combinationally on a top-level input (Verilator re-evaluates such logic at every
time step).  Together 1.6x on the 16x16 NPU (69k -> 111k cycles/s, medians, loaded machine).  The C++ is
then compiled profile-guided (PGO_GENERATE below: an instrumented build runs the benchmark's
programs, the rebuild uses the profile), about 1.3x more.  The NPU is generated with its
idle units' clocks gated (``gate_idle_units``, hw/clock_gate.py): the vector and TABLE units
and the MXU's weight rows cost nothing while they have nothing to do (MATMUL-bound program
269k -> 761k cycles/s, TABLE-bound 249k -> 548k).  The model's main loop is ours
(hw/harness/tb/verilator_main.cpp, TB_MAIN): cocotb's, plus a fast path that steps time
without servicing VPI while the testbench only awaits the end of the program (1.09x on the
MATMUL-bound program, 1.07x TABLE-bound, 1.02x VPU-bound, without the profile).  The design
avoids what Verilator builds slowly: no expression over 64 bits in the VPU's lanes (1.46x on
the VPU-bound program), few gated clocks (the MXU's weight rows four to a clock), and
the VPU's once-per-vector stages (X1, Y) clocked only when they load, with S2a's logic
reading X1's domain only (AlexNet 847k -> 940k cycles/s).  What remains is the design's own
evaluation (the MXU's multiply-adds, a busy vector unit): about 1.1M cycles/s on AlexNet
(``python -m bench rtl``).  The reported time runs from the start to the NPU's stop; the
memory image's load and dump are outside it.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import isa
from isa import dma
from isa.config import NpuConfig
from isa.instructions import ErrorCode
from hw.csr import ADDR_WIDTH, UNITS, bit
from hw.harness.verilator_env import (BUILD_JOBS, MAKE_OVERRIDES, VERILATOR_LINT_FLAGS, setup_verilator_env,
                                      verilator_env)

TB_DIR = Path(__file__).resolve().parent / "tb"
TB_TOP = TB_DIR / "tb_top.sv"
# the simulator's main loop, cocotb's plus a VPI-free fast path while a program runs
TB_MAIN = TB_DIR / "verilator_main.cpp"
WORKLOADS = Path(__file__).resolve().parent / "workloads.py"
TOPLEVEL = "tb_top"
TEST_MODULE = "hw.harness.tb.cocotb_run"
# --x-initial 0: memories and registers start at zero (external memory past the loaded image
# must read as zero, like the ISA simulator's).
BUILD_FLAGS = (*VERILATOR_LINT_FLAGS, "-Wno-UNOPTFLAT", "--x-assign", "0", "--x-initial", "0")
# tb_top generates its own clock with `#` delays (--timing; one delay unit = one time step =
# cocotb's "step"): a clock driven by cocotb through VPI cost a callback and a value write per
# edge, about a quarter of the run time.
TB_FLAGS = ("--timing", "--timescale", "1ps/1ps")
# GCC profile-guided optimisation of the model's C++: build instrumented, run the benchmark's
# MATMUL-, VPU- and TABLE-bound programs (hw/harness/workloads.py, a few hundred thousand cycles
# each), rebuild with the profile.  On the 16x16 NPU, 1000-rep MATMUL program, against the same
# flags without the profile: 210k vs 164k cycles/s (load 3-5), 74k vs 60k and CPU 6.8 s vs 8.7 s
# (load 5-9); VPU- and TABLE-bound programs 1.7x-1.8x (medians of alternating runs; the table and
# the commands in PERFORMANCE.md, RTL simulation speed).  It doubles the build time, so
# NPU_RTL_PGO=0 skips it (quicker turnaround while editing the RTL); waveform builds never use it.
# -fprofile-partial-training: code the training did not reach stays optimised as at -O2.
PGO_GENERATE = "-fprofile-generate"
PGO_USE = "-fprofile-use -fprofile-partial-training -Wno-missing-profile"
PGO_TRAINING = (("matmul", 100), ("vector", 20), ("table", 20))


class RtlError(RuntimeError):
    """The simulation itself failed (build error, simulator crash, timeout)."""


@dataclass
class RtlResult:
    """Outcome of one RTL run.

    Attributes
    ----------
    memory : bytes
        Final external memory: the initial image, extended to the last byte a DMA_STORE
        wrote (like the ISA simulator's).
    cycles : int
        CYCLES register: cycles from START to the stop.
    status : str
        "DONE" (HALT) or "ERROR".
    error_code : ErrorCode
        ERROR_CODE register.
    stop_pc : int
        STOP_PC register: the HALT or failing instruction (0 for boot errors).
    unit_busy_cycles : dict
        Busy cycles per unit ("DMA", "MXU", "VPU").
    irq : bool
        The interrupt line when the run ended (IRQ_ENABLE is set by the harness).
    wall_seconds : float
        Wall-clock time of the simulated run (start to stop), without process start-up.
    waves : Path or None
        FST waveform file, when requested.
    srams : dict or None
        Final scratchpads when requested: "asram", "wsram", "acc", "psram" as uint8 arrays
        of shape (rows, row bytes), lanes little-endian (``.view("<i4")`` for ACC/PSRAM).
    """

    memory: bytes
    cycles: int
    status: str
    error_code: ErrorCode
    stop_pc: int
    unit_busy_cycles: dict = field(default_factory=dict)
    irq: bool = False
    wall_seconds: float = 0.0
    waves: Path | None = None
    srams: dict | None = None

    @property
    def ok(self) -> bool:
        return self.status == "DONE" and self.error_code == ErrorCode.NONE

    @property
    def cycles_per_second(self) -> float:
        return self.cycles / self.wall_seconds if self.wall_seconds > 0 else 0.0


def build_root() -> Path:
    return Path(os.environ.get("NPU_BUILD_ROOT", "build")).resolve()


def generate_verilog(config: NpuConfig) -> str:
    """Verilog of the NPU (module ``npu``) for ``config``."""
    from amaranth.back import verilog

    from hw.top import Npu

    # emit_src=False: otherwise every Python edit changes the text and forces a rebuild.
    # gate_idle_units: the vector and TABLE units' clocks stop while they are idle and the MXU's
    # weight rows are clocked only when they load, so the model skips that logic then
    # (hw/clock_gate.py); the same registers and cycles.
    return verilog.convert(Npu(config, gate_idle_units=True), name="npu", emit_src=False)


def _parameters(config: NpuConfig) -> dict[str, int]:
    return {
        "BUS_BYTES": config.bus_bytes,
        "ADDR_BITS": config.ext_addr_bits,
        "MEM_WORDS": config.ext_mem_bytes // config.bus_bytes,
        "LATENCY": config.mem_latency,
        "CSR_ADDR_BITS": ADDR_WIDTH,
    }


def _runner(main_cpp: Path | None = None):
    """cocotb's Verilator runner; ``main_cpp`` replaces cocotb's simulator main loop
    (share/lib/verilator/verilator.cpp) with ours, e.g. TB_MAIN."""
    from cocotb_tools.runner import Verilator

    class FastVerilator(Verilator):
        """cocotb's Verilator runner without --public-flat-rw, with FST instead of VCD."""

        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = ["--trace-fst" if a == "--trace" else a for a in cmds[0] if a != "--public-flat-rw"]
            if main_cpp is not None:
                stock = [i for i, a in enumerate(cmds[0]) if a.endswith("verilator.cpp")]
                if len(stock) != 1:
                    raise RtlError("cannot find cocotb's verilator.cpp in its Verilator build command")
                cmds[0][stock[0]] = str(main_cpp)
            return cmds

        def _waves_file(self):
            return "dump.fst"

    return FastVerilator()


def _source_key(config: NpuConfig, waves: bool) -> str:
    """Hash of everything the Verilog is generated from: a cheap first-level cache key
    (generating the Verilog of a 16x16 NPU takes seconds)."""
    import amaranth

    h = hashlib.sha256()
    here = Path(__file__).resolve().parents[1]       # hw/: the RTL generators
    isa_dir = Path(isa.__file__).resolve().parent
    generators = [p for p in here.glob("*.py") if p.name not in _NOT_GENERATORS]
    for path in sorted(generators + list(isa_dir.glob("*.py")) + [TB_TOP, TB_MAIN, WORKLOADS]):
        h.update(str(path.name).encode())
        h.update(path.read_bytes())
    h.update(json.dumps({"config": config.to_dict(), "waves": waves, "amaranth": amaranth.__version__,
                         "flags": list(BUILD_FLAGS) + list(TB_FLAGS) + list(MAKE_OVERRIDES),
                         "pgo": _pgo(waves)}, sort_keys=True).encode())
    return h.hexdigest()[:24]


_NOT_GENERATORS = {"__init__.py"}


def _pgo(waves: bool) -> bool:
    """Whether builds are profile-guided (PGO_GENERATE above)."""
    return not waves and os.environ.get("NPU_RTL_PGO", "1") != "0"
_BUILT: dict[tuple[NpuConfig, bool, bool], Path] = {}


def build(config: NpuConfig, waves: bool = False, verbose: bool = False) -> Path:
    """Build (or find in the cache) the Verilator model of ``config``; returns its directory.

    The cache key is a hash of the generated Verilog, the testbench, the configuration and
    the build options; a hash of the generator's sources finds an existing build without
    generating the Verilog again.
    """
    if config.mem_latency < 1:
        raise ValueError("the memory model needs mem_latency >= 1")
    if (config, waves, _pgo(waves)) in _BUILT:
        return _BUILT[(config, waves, _pgo(waves))]
    setup_verilator_env()
    root = build_root() / "rtl"
    index = root / "index" / _source_key(config, waves)
    if index.exists():
        out = root / index.read_text().strip()
        if (out / TOPLEVEL).exists():
            _BUILT[(config, waves, _pgo(waves))] = out
            return out
    verilog_text = generate_verilog(config)
    tb_text = TB_TOP.read_text()
    key_src = json.dumps({
        "verilog": hashlib.sha256(verilog_text.encode()).hexdigest(),
        "tb": hashlib.sha256(tb_text.encode()).hexdigest(),
        "main": hashlib.sha256(TB_MAIN.read_bytes()).hexdigest(),
        "config": config.to_dict(),
        "flags": list(BUILD_FLAGS) + list(TB_FLAGS) + list(MAKE_OVERRIDES),
        # the training programs shape the profile, so their source is part of the key too
        "pgo": [PGO_GENERATE, PGO_USE, PGO_TRAINING, hashlib.sha256(WORKLOADS.read_bytes()).hexdigest()]
        if _pgo(waves) else None,
        "waves": waves,
    }, sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    out = root / key
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)           # one builder per configuration
        if not (out / TOPLEVEL).exists():
            _verilate(config, verilog_text, tb_text, root, key, waves, verbose)
    index.parent.mkdir(exist_ok=True)
    index.write_text(key)
    _BUILT[(config, waves, _pgo(waves))] = out
    return out


def _verilate(config, verilog_text, tb_text, root: Path, key: str, waves: bool, verbose: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
    try:
        (tmp / "npu.v").write_text(verilog_text)
        (tmp / "tb_top.sv").write_text(tb_text)
        (tmp / "config.json").write_text(config.to_json())
        pgo = _pgo(waves)
        runner = _runner(TB_MAIN)
        setup_verilator_env(opt_extra=PGO_GENERATE if pgo else "")
        try:
            runner.build(
                sources=[tmp / "npu.v", tmp / "tb_top.sv"],
                hdl_toplevel=TOPLEVEL,
                build_dir=tmp,
                build_args=list(BUILD_FLAGS) + list(TB_FLAGS) + ["-j", str(BUILD_JOBS)]
                + (_fst_args(tmp) if waves else []) + (["-LDFLAGS", PGO_GENERATE] if pgo else []),
                parameters=_parameters(config),
                waves=waves,
                verbose=verbose,
                log_file=tmp / "build.log",
            )
        except (RuntimeError, SystemExit) as e:
            log = (tmp / "build.log").read_text()[-4000:] if (tmp / "build.log").exists() else ""
            raise RtlError(f"Verilator build failed: {e}\n{log}") from None
        finally:
            setup_verilator_env()
        if pgo:
            _train_and_rebuild(config, tmp)
        # Keep only what runs need: the compiler's intermediates are ~170 MB for 16x16.
        # NPU_RTL_KEEP=1 keeps them (to read the generated C++ beside a profile).
        keep = {TOPLEVEL, "npu.v", "tb_top.sv", "config.json", "build.log"}
        if os.environ.get("NPU_RTL_KEEP", "0") == "0":
            for item in tmp.iterdir():
                if item.name not in keep:
                    shutil.rmtree(item) if item.is_dir() else item.unlink()
        os.replace(tmp, root / key)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _train_and_rebuild(config: NpuConfig, build_dir: Path) -> None:
    """Run the training programs on the instrumented model in ``build_dir`` (each object file's
    profile lands beside it), then compile the C++ again with the profile."""
    from isa.program import Program

    from hw.harness.workloads import PROGRAMS, workload_memory

    for name, reps in PGO_TRAINING:
        program = Program(config, PROGRAMS[name](config, reps))
        run_program(program, workload_memory(program), build_dir=build_dir)
    for item in build_dir.iterdir():
        if item.suffix in (".o", ".a", ".gch") or item.name == TOPLEVEL:
            item.unlink()
    with open(build_dir / "build.log", "a") as log:
        done = subprocess.run(["make", "-C", str(build_dir), "-f", "Vtop.mk", f"-j{BUILD_JOBS}"],
                              env=verilator_env(opt_extra=PGO_USE), stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RtlError(f"profile-guided rebuild failed:\n{_tail(build_dir / 'build.log', 4000)}")


def _fst_args(build_dir: Path) -> list[str]:
    """Verilator's FST writer needs LZ4.  Without its development files (no apt step in this
    project), compile against a shim header and link the run-time library (liblz4.so.1)."""
    if Path("/usr/include/lz4.h").exists():
        return []
    dirs = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib"]
    found = [p for d in dirs for p in sorted(Path(d).glob("liblz4.so*")) if p.exists()]
    if not found:
        raise RtlError("FST waveforms need the LZ4 library (liblz4.so.1 or liblz4-dev)")
    libdir = build_dir / "lz4lib"
    libdir.mkdir(exist_ok=True)
    (libdir / "liblz4.so").symlink_to(found[0].resolve())
    return ["-CFLAGS", f"-I{TB_DIR / 'lz4_shim'}", "-LDFLAGS", f"-L{libdir}"]


def _write_hex(path: Path, memory: bytes, bus: int) -> int:
    """$readmemh image of ``memory`` (zero-padded to whole words); returns the word count."""
    data = np.frombuffer(bytes(memory) + bytes(-len(memory) % bus), dtype=np.uint8)
    words = data.reshape(-1, bus)[:, ::-1]          # one line per word, most significant byte first
    text = np.frombuffer(words.tobytes().hex().encode(), dtype=f"S{2 * bus}")
    path.write_bytes(b"\n".join(text.tolist()) + b"\n")
    return words.shape[0]


def _read_hex(path: Path, bus: int, nwords: int) -> bytes:
    lines = [ln for ln in path.read_text().split() if ln and not ln.startswith(("//", "@"))]
    if len(lines) != nwords:
        raise RtlError(f"memory dump has {len(lines)} words, expected {nwords}")
    raw = bytes.fromhex("".join(ln.rjust(2 * bus, "0") for ln in lines))
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, bus)[:, ::-1].tobytes()


def run_program(program, memory: bytes, config: NpuConfig | None = None, waves: bool = False,
                max_cycles: int = 0, progress: int = 0, build_dir: Path | None = None,
                dump_srams: bool = False, watchdog: int = 0) -> RtlResult:
    """Boot and run ``program`` on the RTL with external memory initialised to ``memory``.

    Parameters
    ----------
    program : isa.program.Program
        Supplies ``program_addr`` and the instruction count; the instructions themselves are
        read from ``memory`` (``program.memory_image`` puts them there).
    memory : bytes
        Initial external memory from address 0; the same number of bytes is returned.
    config : NpuConfig, optional
        Must equal ``program.config`` (the default).
    waves : bool
        Record an FST waveform (a separate, slower build); also ``WAVES=1``.
    max_cycles : int
        Fail if the NPU has not stopped after this many cycles (0: no limit).
    progress : int
        Log the cycle count every this many cycles (0: never); the simulator's output then
        goes to the terminal instead of a log file.
    build_dir : Path, optional
        A model from :func:`build`; built on demand otherwise.
    dump_srams : bool
        Return the final scratchpad contents too (``RtlResult.srams``; for tests).
    watchdog : int
        Value of the MAX_CYCLES register (hw/csr.py): the NPU stops itself with WATCHDOG
        (0: off).  ``max_cycles`` is the testbench's own give-up, a backstop.
    """
    config = program.config if config is None else config
    if program.config != config:
        raise ValueError("the program was compiled for another NPU configuration")
    bus = config.bus_bytes
    if len(memory) > config.ext_mem_bytes:
        raise ValueError(f"memory image of {len(memory)} bytes exceeds ext_mem_bytes={config.ext_mem_bytes}")
    waves = waves or os.environ.get("WAVES", "") not in ("", "0")
    if build_dir is None:
        build_dir = build(config, waves=waves)
    setup_verilator_env()
    runs = Path(build_dir) / "runs"
    runs.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=runs))
    try:
        # Dump enough words to cover every DMA_STORE too, then cut to the last byte written.
        span = max([len(memory)] + _store_ends(program, config))
        nwords = _write_hex(work / "mem_in.hex", bytes(memory) + bytes(span - len(memory)), bus)
        env = {
            "NPU_PROG_ADDR": str(program.program_addr),
            "NPU_PROG_LEN": str(len(program.instructions)),
            "NPU_RESULT": str(work / "result.json"),
            "NPU_MAX_CYCLES": str(max_cycles),
            "NPU_WATCHDOG": str(watchdog),
            "NPU_PROGRESS": str(progress),
            "COCOTB_RESOLVE_X": "ZEROS",
        }
        plusargs = [f"+MEM_WORDS={nwords}", f"+MEM_IN={work / 'mem_in.hex'}",
                    f"+MEM_OUT={work / 'mem_out.hex'}"]
        if dump_srams:
            plusargs.append(f"+SRAM_DUMP={work}/")
        runner = _runner()
        try:
            runner.test(
                test_module=TEST_MODULE, hdl_toplevel=TOPLEVEL, hdl_toplevel_lang="verilog",
                build_dir=build_dir, test_dir=work, waves=waves,
                plusargs=plusargs,
                extra_env=env, results_xml=str(work / "results.xml"),
                # progress lines go to the terminal; otherwise keep the simulator quiet
                log_file=None if progress else work / "sim.log",
            )
        except (RuntimeError, SystemExit) as e:
            raise RtlError(f"RTL simulation failed ({e}); log: {_tail(work / 'sim.log')}") from None
        if not (work / "result.json").exists():
            raise RtlError(f"RTL simulation ended without a result; log: {_tail(work / 'sim.log')}")
        result = json.loads((work / "result.json").read_text())
        regs = result["registers"]
        status = regs["STATUS"]
        written = result["written_words"] * bus       # one past the last word written
        data = _read_hex(work / "mem_out.hex", bus, nwords)[:max(len(memory), written)]
        waves_path = None
        if waves:
            waves_path = Path(build_dir) / "waves" / f"{work.name}.fst"
            waves_path.parent.mkdir(exist_ok=True)
            shutil.move(work / "dump.fst", waves_path)
        srams = None
        if dump_srams:
            srams = {}
            for name, rows, row_bytes in (("asram", config.asram_rows, config.asram_row_bytes),
                                          ("wsram", config.wsram_rows, config.wsram_row_bytes),
                                          ("acc", config.acc_rows, config.acc_row_bytes),
                                          ("psram", config.psram_rows, config.psram_row_bytes)):
                raw = _read_hex(work / f"{name}.hex", row_bytes, rows)
                srams[name] = np.frombuffer(raw, dtype=np.uint8).reshape(rows, row_bytes).copy()
        return RtlResult(
            memory=data,
            cycles=regs["CYCLES_LO"] | regs["CYCLES_HI"] << 32,
            status="DONE" if status & bit("STATUS", "DONE") else
                   "ERROR" if status & bit("STATUS", "ERROR") else f"STATUS={status:#x}",
            error_code=ErrorCode(regs["ERROR_CODE"]),
            stop_pc=regs["STOP_PC"],
            unit_busy_cycles={u: regs[f"{u}_BUSY_LO"] | regs[f"{u}_BUSY_HI"] << 32 for u in UNITS},
            irq=bool(result["irq"]),
            wall_seconds=result["wall_seconds"],
            waves=waves_path,
            srams=srams,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _store_ends(program, config: NpuConfig) -> list[int]:
    """For each instruction, an upper bound of one past the last external byte it can store
    (0 if none), over every iteration of the LOOPs around it: enough memory to dump."""
    ends = []
    loops: list[tuple[int, int]] = []       # (one past the body, largest EXT offset) of open LOOPs
    for pc, instr in enumerate(program.instructions):
        loops = [lp for lp in loops if lp[0] > pc]
        v = instr.values
        end = 0
        span = dma.ext_span(v, config.bus_bytes) if instr.name == "DMA_STORE" else None
        if span is not None:
            end = -(-(span[1] + sum(offset for _, offset in loops)) // config.bus_bytes) * config.bus_bytes
            end = min(end, config.ext_mem_bytes)      # nothing is written past memory
        elif instr.name == "LOOP":
            loops.append((pc + 1 + v["body"], max(0, (v["count"] - 1) * v["inc_ext"])))
        ends.append(end)
    return ends


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text()[-chars:] if path.exists() else "(no log)"
