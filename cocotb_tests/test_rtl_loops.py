"""Hardware loops on the RTL, in lockstep with the ISA simulator (sim/isa/sim.py): random
nested-loop programs (cocotb_tests/loop_programs.py: bodies ending together, count 0,
up to LOOP_DEPTH deep, increments of either sign in every address space), illegal LOOPs,
and errors in a later iteration.  Compared: final memory, every scratchpad, CYCLES, the
busy counters, ERROR_CODE and STOP_PC."""
from __future__ import annotations

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, encode
from isa.asm import assemble
from isa.instructions import INSTR_BYTES, ErrorCode
from isa.program import Program
from hw.harness.simulation import run_program

from cocotb_tests.loop_programs import LoopProgramGenerator, setup_program, with_program, without_hazards
from cocotb_tests.rtl_harness import lockstep

CFG = SMALL_CONFIG




@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_loops_small(small_rtl, seed):
    rng = np.random.default_rng(700 + seed)
    mem, setup = setup_program(rng, CFG)
    gen = LoopProgramGenerator(rng, CFG, max_depth=4 if seed % 2 else 3, max_dynamic=600)
    instrs = without_hazards(gen.program(setup, items=10), bytes(mem), CFG)
    _, ref = lockstep(small_rtl, CFG, instrs, bytes(mem), hazard_free=False)
    assert ref.instructions_executed > 3 * len(instrs)


def test_random_loops_default(default_rtl):
    rng = np.random.default_rng(710)
    mem, setup = setup_program(rng, DEFAULT_CONFIG)
    gen = LoopProgramGenerator(rng, DEFAULT_CONFIG, max_depth=4, max_dynamic=600)
    instrs = without_hazards(gen.program(setup, items=10), bytes(mem), DEFAULT_CONFIG)
    lockstep(default_rtl, DEFAULT_CONFIG, instrs, bytes(mem), hazard_free=False)


def _memory():
    mem = bytearray(0x4000)
    mem[0x2000:0x2100] = np.arange(256, dtype=np.uint8).tobytes()
    return bytes(mem)


PRELUDE = "DMA_LOAD sram=ASRAM ext_addr=0x2000 len0=64 len1=1 len2=1\nMATMUL n0=100 n1=1 wait=DMA\n"
CASES = {
    # illegal LOOPs: the MATMUL before still completes, nothing after runs
    "body_zero": ("LOOP count=2 body=0\nDMA_STORE ext_addr=0x3000 len0=4 len1=1 len2=1\nHALT",
                  ErrorCode.ILLEGAL_INSTRUCTION),
    "past_program": ("LOOP count=0 body=2\nSYNC\n", ErrorCode.ILLEGAL_INSTRUCTION),
    "inner_past_outer": ("LOOP count=2 body=2\nSYNC\nLOOP count=1 body=1\nSYNC\nHALT",
                         ErrorCode.ILLEGAL_INSTRUCTION),
    "too_deep": ("\n".join("LOOP count=2 body=%d" % (6 - i) for i in range(5)) + "\nSYNC\nHALT",
                 ErrorCode.ILLEGAL_INSTRUCTION),
    "reserved_bits": (None, ErrorCode.ILLEGAL_INSTRUCTION),
    # an error in iteration 2 of an inner loop, after stores of earlier iterations
    "later_iteration": ("LOOP count=3 body=2 inc_ext=0x20\n"
                        "LOOP count=3 body=1 inc_ext=0x4000 inc_asram=4\n"
                        "DMA_STORE sram_addr=0 ext_addr=0x38000 len0=4 len1=1 len2=1 wait=DMA\nHALT",
                        ErrorCode.DMA_OUT_OF_RANGE),
    "negative_row": ("LOOP count=4 body=1 inc_acc=-2\nACT count=1 acc_addr=3 dst_addr=100 wait=VPU\nHALT",
                     ErrorCode.SRAM_OVERFLOW),
    # PC_OVERFLOW after the last iteration, and HALT in the first
    "run_off_the_end": ("LOOP count=2 body=1 inc_ext=16\nDMA_STORE ext_addr=0x3000 len0=4 len1=1 len2=1",
                        ErrorCode.PC_OVERFLOW),
    "halt_inside": ("LOOP count=5 body=2 inc_ext=16\nDMA_STORE ext_addr=0x3000 len0=4 len1=1 len2=1\nHALT\nSYNC",
                    ErrorCode.NONE),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loop_stops(small_rtl, name):
    text, code = CASES[name]
    if text is None:      # a LOOP word with a bit set above its last field
        from sim.isa.sim import IsaSim

        instrs = assemble(PRELUDE + "LOOP count=1 body=1\nSYNC\nHALT")
        bad = int.from_bytes(encode(instrs[2]), "little") | 1 << 200
        mem = bytearray(with_program(_memory(), instrs))
        mem[2 * INSTR_BYTES:3 * INSTR_BYTES] = bad.to_bytes(INSTR_BYTES, "little")
        program = Program(CFG, instrs)
        rtl = run_program(program, bytes(mem), build_dir=small_rtl)
        ref = IsaSim(CFG).run(program, bytes(mem))
        assert (ref.error_code, ref.stop_pc) == (code, 2)
        assert (rtl.error_code, rtl.stop_pc, rtl.cycles, rtl.unit_busy_cycles) == (code, 2, ref.cycles, ref.busy)
        return
    instrs = assemble(PRELUDE + text)
    rtl, ref = lockstep(small_rtl, CFG, instrs, _memory(), expect=code, hazard_free=False)
    assert rtl.unit_busy_cycles["MXU"] > 100, "the stop waits for the MATMUL"


def test_loop_back_is_free_on_the_rtl(small_rtl):
    """Loops take exactly the cycles of their unrolled programs (each LOOP becoming a SYNC)
    once the instruction fetch has run ahead (a long MATMUL first): issue-bound bodies (one SYNC or empty
    MATMUL per cycle, where any loop-back bubble would show), back-to-back MATMULs, nested
    loops ending together."""
    rows = CFG.array_rows
    matmul = f"MATMUL n0={rows} n1=1 a_stride0=1"
    cases = [
        ("LOOP count=8 body=1\nSYNC\nHALT", "SYNC\n" + "SYNC\n" * 8 + "HALT"),
        ("LOOP count=5 body=2\nSYNC\nMATMUL n0=0\nHALT", "SYNC\n" + "SYNC\nMATMUL n0=0\n" * 5 + "HALT"),
        (f"LOOP count=8 body=1\n{matmul}\nHALT", "SYNC\n" + f"{matmul}\n" * 8 + "HALT"),
        ("LOOP count=2 body=3\nLOOP count=3 body=2\nLOOP count=2 body=1\nSYNC\nHALT",
         "SYNC\n" + ("SYNC\n" + ("SYNC\n" + "SYNC\n" * 2) * 3) * 2 + "HALT"),
    ]
    warm_up = "MATMUL n0=250 n1=1\nSYNC wait=MXU\n"      # the unrolled programs: < 30 instructions
    mem = bytes(0x4000)
    for text_a, text_b in cases:
        a, b = assemble(warm_up + text_a), assemble(warm_up + text_b)
        ra = run_program(Program(CFG, a), with_program(mem, a), build_dir=small_rtl)
        rb = run_program(Program(CFG, b), with_program(mem, b), build_dir=small_rtl)
        assert ra.ok and rb.ok
        assert rb.cycles == ra.cycles, text_a
        assert ra.unit_busy_cycles == rb.unit_busy_cycles
