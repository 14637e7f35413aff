"""Verilator build of the board core (hw/board/core.BoardCore) for the cocotb board tests.

``build_board_core(config, mem_bytes, divisor)`` generates the Verilog of ``BoardCore``
(module ``board_core``), wraps it in hw/harness/tb/tb_board.sv (clock, reset and the UART
pins) and builds it once into ``<build root>/rtl_board/<hash>/``: the hash covers the Verilog, the
wrapper and the build options, as hw/harness/simulation.build does for the NPU.  Tests then
run cocotb modules on it with :func:`run_board_test`.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from isa.config import NpuConfig
from hw.harness.simulation import BUILD_FLAGS, RtlError, _runner, build_root
from hw.harness.verilator_env import BUILD_JOBS, MAKE_OVERRIDES, setup_verilator_env

__all__ = ["TOPLEVEL", "build_board_core", "generate_board_verilog", "run_board_test"]

TB_BOARD = Path(__file__).resolve().parent / "tb" / "tb_board.sv"
TOPLEVEL = "tb_board"


def generate_board_verilog(config: NpuConfig, mem_bytes: int, divisor: int) -> str:
    """Verilog of ``BoardCore(config, mem_bytes, divisor)`` as module ``board_core``."""
    from amaranth.back import verilog

    from hw.board.core import BoardCore

    core = BoardCore(config, mem_bytes, divisor)
    return verilog.convert(core, name="board_core", emit_src=False)


def _source_key(config: NpuConfig, mem_bytes: int, divisor: int) -> str:
    """Hash of everything the Verilog is generated from (hw/, hw/board/, isa/, the wrapper):
    finds an existing build without generating the Verilog again (that takes most of a minute)."""
    import amaranth

    import isa

    hw_dir = Path(__file__).resolve().parents[1]
    isa_dir = Path(isa.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted([*hw_dir.glob("*.py"), *(hw_dir / "board").glob("*.py"), *isa_dir.glob("*.py"), TB_BOARD]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(json.dumps({"config": config.to_dict(), "mem_bytes": mem_bytes, "divisor": divisor,
                         "amaranth": amaranth.__version__, "flags": list(BUILD_FLAGS) + list(MAKE_OVERRIDES)},
                        sort_keys=True).encode())
    return h.hexdigest()[:24]


def build_board_core(config: NpuConfig, mem_bytes: int, divisor: int, verbose: bool = False) -> Path:
    """Build (or find in the cache) the Verilator model of the board core; returns its directory."""
    setup_verilator_env()
    root = build_root() / "rtl_board"
    index = root / "index" / _source_key(config, mem_bytes, divisor)
    if index.exists() and (root / index.read_text().strip() / TOPLEVEL).exists():
        return root / index.read_text().strip()
    verilog_text = generate_board_verilog(config, mem_bytes, divisor)
    tb_text = TB_BOARD.read_text()
    key = hashlib.sha256(json.dumps({
        "verilog": hashlib.sha256(verilog_text.encode()).hexdigest(),
        "tb": hashlib.sha256(tb_text.encode()).hexdigest(),
        "flags": list(BUILD_FLAGS) + list(MAKE_OVERRIDES),
    }, sort_keys=True).encode()).hexdigest()[:16]
    out = root / key
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / TOPLEVEL).exists():
            tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
            try:
                (tmp / "board_core.v").write_text(verilog_text)
                (tmp / "tb_board.sv").write_text(tb_text)
                try:
                    _runner().build(
                        sources=[tmp / "board_core.v", tmp / "tb_board.sv"], hdl_toplevel=TOPLEVEL,
                        build_dir=tmp, build_args=list(BUILD_FLAGS) + ["-j", str(BUILD_JOBS)],
                        verbose=verbose, log_file=tmp / "build.log")
                except (RuntimeError, SystemExit) as e:
                    log = (tmp / "build.log").read_text()[-4000:] if (tmp / "build.log").exists() else ""
                    raise RtlError(f"Verilator build of the board core failed: {e}\n{log}") from None
                keep = {TOPLEVEL, "board_core.v", "tb_board.sv", "build.log"}
                for item in tmp.iterdir():
                    if item.name not in keep:
                        shutil.rmtree(item) if item.is_dir() else item.unlink()
                tmp.replace(out)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
    index.parent.mkdir(exist_ok=True)
    index.write_text(key)
    return out


def run_board_test(build_dir: Path, test_module: str, env: dict[str, str], work: Path,
                   testcase: str | None = None) -> None:
    """Run the cocotb tests of ``test_module`` (only ``testcase`` if given) on a board-core
    build; RtlError if any fails."""
    from cocotb_tools.check_results import get_results

    setup_verilator_env()
    results = work / "results.xml"
    try:
        _runner().test(test_module=test_module, hdl_toplevel=TOPLEVEL, hdl_toplevel_lang="verilog",
                       build_dir=build_dir, test_dir=work, extra_env=env, testcase=testcase, results_xml=str(results),
                       log_file=work / "sim.log")
    except (RuntimeError, SystemExit) as e:
        raise RtlError(f"board simulation failed ({e}); log: {work / 'sim.log'}") from None
    total, failed = get_results(results)
    if failed or not total:
        log = (work / "sim.log").read_text()[-4000:] if (work / "sim.log").exists() else "(no log)"
        raise RtlError(f"{failed} of {total} board tests failed; log tail:\n{log}")
