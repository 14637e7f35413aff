"""The watchdog (MAX_CYCLES, hw/csr.py) on the RTL, in lockstep with the ISA simulator: a
program that would run for billions of cycles (a BRANCH loop with the largest budget, two
nested LOOPs of 65,535 iterations) stops with WATCHDOG and the interrupt, and every
observable agrees with the ISA simulator (rtl_harness.lockstep: ERROR_CODE, STOP_PC,
CYCLES, busy counters, memory, scratchpads), for limits that fall while the sequencer waits
on a unit, on a BRANCH's condition read, during boot, and just before and after a HALT."""
from __future__ import annotations

import pytest

from isa import SMALL_CONFIG, ErrorCode
from isa.asm import assemble

from cocotb_tests import branch_programs as bp
from cocotb_tests import rtl_harness

CFG = SMALL_CONFIG


def runaway_branch():
    """The countdown loop of branch_programs with a condition that never becomes zero
    (x = -1 counts down through 255 values forever: mod 256) and the largest budget."""
    instrs, mem, _ = bp.countdown_int8(0, limit=(1 << 24) - 1)
    mem = bytearray(mem)
    mem[bp.DATA:bp.DATA + 8] = bytes([255, 0, 0, 0, 0, 0, 0, 0])   # subtract 0: x stays 255
    return instrs, bytes(mem)


def nested_loops():
    """Two nested LOOPs of 65,535 iterations around a VALU: 4.3e9 iterations unstopped."""
    instrs = assemble("""
        LOOP count=65535 body=3
        LOOP count=65535 body=1
        VALU wait=VPU op=ADD dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=0 b_mem=ASRAM b_addr=1 d_mem=ASRAM d_addr=0
        SYNC wait=VPU
        HALT
    """)
    return instrs, bytes(bp.MEM_BYTES)


@pytest.mark.parametrize("limit", [3, 60, 75, 76, 77, 200, 1001, 20_000])
def test_runaway_branch_stops(small_rtl, limit):
    instrs, mem = runaway_branch()
    rtl, ref = rtl_harness.lockstep(small_rtl, CFG, instrs, mem, expect=ErrorCode.WATCHDOG, max_cycles=limit)
    # A limit inside boot (64 words + latency) takes effect when instruction 0 reaches IR.
    # The latest stop: a limit just after the backward branch's decision (cycle 74 of the
    # first iteration) stops once that branch's target is fetched again and in IR, 23 cycles
    # later (the exact cycle is the lockstep's: CYCLES agrees with the ISA simulator).
    assert limit < rtl.cycles <= max(limit, 71) + 24


@pytest.mark.parametrize("limit", [500, 5_000])
def test_nested_loops_stop(small_rtl, limit):
    instrs, mem = nested_loops()
    rtl, _ = rtl_harness.lockstep(small_rtl, CFG, instrs, mem, expect=ErrorCode.WATCHDOG, max_cycles=limit)
    assert rtl.cycles <= limit + 20


@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_limit_at_the_halt(small_rtl, delta):
    """A program that needs C cycles: MAX_CYCLES = C runs it to HALT, C - 1 stops it."""
    instrs, mem, _ = bp.countdown_int8(3)
    _, full = rtl_harness.lockstep(small_rtl, CFG, instrs, mem)
    expect = ErrorCode.NONE if delta >= 0 else ErrorCode.WATCHDOG
    rtl_harness.lockstep(small_rtl, CFG, instrs, mem, expect=expect, max_cycles=full.cycles + delta)
