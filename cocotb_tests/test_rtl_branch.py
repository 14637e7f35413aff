"""BRANCH on the RTL, in lockstep with the ISA simulator (sim/isa/sim.py): loops built from
branches (test at the top or the bottom, conditions in ASRAM and ACC, int8 and int32),
taken and not-taken forward branches, branches next to LOOPs and into a LOOP body, and the
errors (BRANCH_LIMIT, illegal targets, a branch inside a LOOP, a condition row out of
range).  Compared: every external-memory byte, every scratchpad, CYCLES, the busy
counters, ERROR_CODE, STOP_PC and the interrupt.  The programs' results are also checked
against their hand-worked values (cocotb_tests/branch_programs.py)."""
from __future__ import annotations

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, ErrorCode

from cocotb_tests import branch_programs as bp
from cocotb_tests import rtl_harness

CFG = SMALL_CONFIG



def lockstep(build_dir, config, instrs, mem: bytes, expect: ErrorCode = ErrorCode.NONE):
    """rtl_harness.lockstep on a program branch_programs already placed at address 0
    (hazard checker on: the ISA simulator also proves the wait masks order every conflict)."""
    return rtl_harness.lockstep(build_dir, config, instrs, mem, expect=expect)


@pytest.mark.parametrize("n", [0, 3])
def test_while_loop_int8(small_rtl, n):
    instrs, mem, want = bp.countdown_int8(n)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    assert bytes(rtl.memory[bp.OUT:bp.OUT + 12]) == want["out"]


@pytest.mark.parametrize("n,dtype", [(40, "INT32"), (300, "INT8")])
def test_do_while_acc(small_rtl, n, dtype):
    instrs, mem, want = bp.countdown_acc(n, dtype)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    assert bytes(rtl.memory[bp.OUT:bp.OUT + len(want["out"])]) == want["out"]


@pytest.mark.parametrize("flag", [0, 5])
def test_branches_next_to_loops(small_rtl, flag):
    instrs, mem, want = bp.with_loops(flag)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    assert bytes(rtl.memory[bp.OUT:bp.OUT + 4]) == want["out"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_forward_branches(small_rtl, seed):
    instrs, mem, want = bp.forward_chain(np.random.default_rng(40 + seed), length=8)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    assert bytes(rtl.memory[bp.OUT:bp.OUT + CFG.bus_bytes]) == want["out"]


@pytest.mark.parametrize("name", sorted(bp.ERROR_CASES))
def test_errors(small_rtl, name):
    instrs, mem, code, stop_pc = bp.error_case(name, CFG)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem, expect=ErrorCode[code])
    assert rtl.stop_pc == stop_pc


def test_do_while_default(default_rtl):
    """One 16x16 case: the ACC do-while loop (wide ACC rows, 16-byte bus)."""
    instrs, mem, want = bp.countdown_acc(25, "INT32", cfg=DEFAULT_CONFIG)
    rtl, _ = lockstep(default_rtl, DEFAULT_CONFIG, instrs, mem)
    assert bytes(rtl.memory[bp.OUT:bp.OUT + len(want["out"])]) == want["out"]
