"""Helpers for the RTL tests: run a program on a built model and check it against the
sequential numpy model (cocotb_tests/npu_model.py) and the cycle model (sim/npu_timing.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.config import NpuConfig
from isa.encoding import encode_program
from isa.instructions import INSTR_BYTES, ErrorCode
from isa.program import Program
from hw.harness.simulation import RtlResult, run_program
from sim.npu_timing import TimingModel

from cocotb_tests.loop_programs import unroll
from cocotb_tests.npu_model import Model


@dataclass
class Checked:
    rtl: RtlResult
    model: Model | None
    timing: object


def place_program(memory: bytearray, instrs, addr: int = 0) -> None:
    code = encode_program(instrs)
    memory[addr:addr + len(code)] = code


def run_checked(build_dir, config: NpuConfig, instrs, memory: bytes | bytearray, program_addr: int = 0,
                stop_at: int | None = None, expect: ErrorCode = ErrorCode.NONE, model: bool = True,
                srams: bool = True, patch=None) -> Checked:
    """Run ``instrs`` (placed at ``program_addr``) on the RTL and check everything checkable.

    * status, ERROR_CODE, STOP_PC and the interrupt line;
    * CYCLES and the per-unit busy counters equal the timing model's;
    * final external memory (and scratchpads, with ``srams``) equal the numpy model's,
      which executes the instructions before the stop (a program with LOOPs: its unrolled
      equivalent, cocotb_tests/loop_programs.py; then ``stop_at`` must be None, since it
      counts instructions in issue order while STOP_PC is an index).

    ``patch(memory)`` may overwrite bytes after the program is placed (illegal words).
    """
    mem = bytearray(memory)
    place_program(mem, instrs, program_addr)
    if patch is not None:
        patch(mem)
    program = Program(config, list(instrs), program_addr=program_addr)
    rtl = run_program(program, bytes(mem), build_dir=build_dir, dump_srams=srams)

    assert rtl.irq, "the interrupt line is not raised after the stop"
    assert rtl.error_code == expect, f"ERROR_CODE {rtl.error_code!r}, expected {expect!r}"
    assert rtl.status == ("DONE" if expect == ErrorCode.NONE else "ERROR")
    halt = next((i for i, x in enumerate(instrs) if x.name == "HALT"), len(instrs))
    stop_index = halt if stop_at is None else stop_at
    assert rtl.stop_pc == stop_index, f"STOP_PC {rtl.stop_pc}, expected {stop_index}"

    timing = TimingModel(config).run(instrs, stop_at=stop_at)
    assert rtl.cycles == timing.total_cycles, f"RTL {rtl.cycles} cycles, timing model {timing.total_cycles}"
    assert rtl.unit_busy_cycles == timing.busy, f"busy RTL {rtl.unit_busy_cycles}, model {timing.busy}"

    ref = None
    if model:
        looped = any(x.name == "LOOP" for x in instrs)
        assert not (looped and stop_at is not None), "use test_rtl_loops.lockstep for stops in loops"
        ref = Model(config, bytes(mem)).run(unroll(instrs, config) if looped else instrs[:stop_index])
        assert_memory_equal(rtl.memory, ref.memory)
        if srams:
            for name, value in ref.srams.items():
                assert_rows_equal(name, rtl.srams[name], value)
    return Checked(rtl, ref, timing)


def lockstep(build_dir, config: NpuConfig, instrs, memory: bytes | bytearray,
             expect: ErrorCode | None = ErrorCode.NONE, hazard_free: bool = True,
             max_cycles: int = 0, program_addr: int = 0):
    """Run ``instrs`` (placed at ``program_addr`` of ``memory``) on the RTL and on the ISA simulator;
    everything observable must agree: ERROR_CODE, STOP_PC, the interrupt line, CYCLES and the
    busy counters, every external-memory byte and every scratchpad row.

    ``expect``: the error code the run must stop with (None: whatever the ISA simulator
    says).  ``hazard_free``: the ISA simulator's hazard checker must find no conflict the wait
    masks leave unordered (off for programs that are deliberately unordered, e.g. error
    stops).  ``max_cycles``: the watchdog (MAX_CYCLES) on both.  Returns ``(rtl, ref)``.
    """
    from sim.isa.sim import IsaSim

    mem = bytearray(memory)
    place_program(mem, instrs, program_addr)
    image = bytes(mem)
    program = Program(config, list(instrs), program_addr=program_addr)
    ref = IsaSim(config, check_hazards=hazard_free).run(program, image, max_cycles=max_cycles)
    if hazard_free:
        assert not ref.hazards, ref.hazards[0]
    if expect is not None:
        assert ref.error_code == expect, ref.error_message
    rtl = run_program(program, image, build_dir=build_dir, dump_srams=True, watchdog=max_cycles)
    assert (rtl.error_code, rtl.stop_pc) == (ref.error_code, ref.stop_pc), \
        (rtl.error_code, rtl.stop_pc, ref.error_code, ref.stop_pc, ref.error_message)
    assert rtl.irq, "the interrupt line is not raised after the stop"
    assert (rtl.cycles, rtl.unit_busy_cycles) == (ref.cycles, ref.busy)
    assert_memory_equal(rtl.memory, bytes(ref.memory))
    for name in ("asram", "wsram", "acc", "psram"):
        want = getattr(ref.state, name)
        assert_rows_equal(name, rtl.srams[name], want.view(np.uint8).reshape(rtl.srams[name].shape))
    return rtl, ref


def assert_memory_equal(got: bytes, want: bytes) -> None:
    assert len(got) == len(want)
    if got != want:
        g, w = np.frombuffer(got, np.uint8), np.frombuffer(want, np.uint8)
        bad = np.flatnonzero(g != w)
        raise AssertionError(f"external memory differs at {bad.size} bytes, first at {bad[0]:#x}: "
                             f"got {g[bad[:8]].tolist()}, want {w[bad[:8]].tolist()}")


def assert_rows_equal(name: str, got: np.ndarray, want: np.ndarray) -> None:
    if not np.array_equal(got, want):
        bad = np.flatnonzero((got != want).any(axis=1))
        lanes = "<i4" if name in ("acc", "psram") else np.int8
        raise AssertionError(f"{name} differs in {bad.size} rows, first row {bad[0]}: "
                             f"got {got[bad[0]].view(lanes).tolist()}, want {want[bad[0]].view(lanes).tolist()}")


def instr_bytes(count: int) -> int:
    return count * INSTR_BYTES
