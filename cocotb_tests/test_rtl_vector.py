"""The vector unit's RTL (VRESCALE, VALU, VPOOL, ACT) in lockstep with the ISA simulator
(sim/isa/vpu.py, itself checked against the ISA docs and the TOSA spec helpers in
tests/test_isa_vpu.py): on random programs every scratchpad row, the external memory,
CYCLES and the per-unit busy counters must agree; error stops too.  Programs come from
cocotb_tests/vector_programs.py (legal, hazard-free: the ISA simulator's hazard checker
confirms it)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, make
from isa.instructions import VecType, ErrorCode, ValuOp

from cocotb_tests import test_rtl_errors, test_rtl_timing
from cocotb_tests.rtl_harness import run_checked, lockstep
from cocotb_tests.vector_programs import random_vector_instruction, vector_program

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import vpu_doc_rules  # noqa: E402

CFG = SMALL_CONFIG




@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vector_programs_small(small_rtl, seed):
    """Random mixes of VALU (every op and type), VRESCALE, VPOOL and ACT with stores."""
    rng = np.random.default_rng(seed)
    instrs, mem = vector_program(rng, CFG, 90)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    assert rtl.unit_busy_cycles["VPU"] > 1000


def test_vrescale_whole_domain_rtl(small_rtl):
    """250 VRESCALEs in one run: every in/out type, zero point, scale32/16, rounding,
    per-channel/per-tensor, clamp, source and destination memory, plausible and junk
    parameters."""
    rng = np.random.default_rng(11)
    instrs, mem = vector_program(rng, CFG, 250, kinds=("VRESCALE",), stores=False)
    seen = {(i.values["in_type"], i.values["out_type"], i.values["scale32"], i.values["a_mem"])
            for i in instrs if i.name == "VRESCALE"}
    assert len(seen) > 100
    lockstep(small_rtl, CFG, instrs, mem)


def test_valu_and_vpool_rtl(small_rtl):
    """VALU and VPOOL only, weighted to the less frequent shapes (ternary SELECT, windows)."""
    rng = np.random.default_rng(12)
    instrs, mem = vector_program(rng, CFG, 160, kinds=("VALU", "VPOOL"), p=(0.6, 0.4))
    ops = {i.values["op"] for i in instrs if i.name == "VALU"}
    assert len(ops) == 25
    lockstep(small_rtl, CFG, instrs, mem)


def test_vdwconv_rtl(small_rtl):
    """VDWCONV among VPOOL and ACT (the instructions whose stages it shares): every input,
    weight and destination memory, window shapes, scale32/16, double rounding, zero points
    and clamps (empty ranges too), junk parameter rows."""
    rng = np.random.default_rng(13)
    instrs, mem = vector_program(rng, CFG, 120, kinds=("VDWCONV", "VPOOL", "ACT"), p=(0.6, 0.2, 0.2))
    dw = [i.values for i in instrs if i.name == "VDWCONV"]
    assert {(v["a_mem"], v["b_mem"]) for v in dw} == {(a, b) for a in range(3) for b in range(3)}
    assert {v["k0"] * v["k1"] for v in dw} >= {1, 2, 4, 9}
    lockstep(small_rtl, CFG, instrs, mem)


def test_vector_instructions_in_loops(small_rtl):
    """LOOPs offset every vector address field by its space's increment (a_addr, b_addr,
    c_addr, d_addr by the space their *_mem names; param_addr in PSRAM)."""
    from cocotb_tests.vector_programs import memory_image, setup

    rng = np.random.default_rng(5)
    mem = memory_image(rng, CFG)
    body = [
        make("VALU", op=int(ValuOp.SELECT), dtype=int(VecType.INT16), n0=2, n1=2, a_mem=0, a_addr=3, a_stride0=1,
             a_stride1=5, b_mem=1, b_addr=10, b_stride0=1, b_stride1=2, c_mem=0, c_addr=40, d_mem=0, d_addr=600,
             d_stride0=2, d_stride1=4),
        make("VRESCALE", in_type=int(VecType.INT32), out_type=int(VecType.UINT8), n0=3, n1=1, a_mem=1, a_addr=20,
             a_stride0=1, d_mem=1, d_addr=150, d_stride0=1, param_addr=0, per_channel=1, scale32=1,
             double_round=1, out_zp=128),
        make("VPOOL", mode=1, dtype=int(VecType.INT8), n0=2, n1=1, k0=2, k1=2, w_stride0=1, w_stride1=8,
             a_mem=0, a_addr=100, a_stride0=2, d_mem=0, d_addr=800, d_stride0=4, in_zp=-3),
        make("VDWCONV", n0=3, n1=2, k0=3, k1=2, w_stride0=1, w_stride1=6, a_mem=0, a_addr=200, a_stride0=1,
             a_stride1=6, b_mem=1, b_addr=30, d_mem=0, d_addr=700, d_stride0=1, d_stride1=3, param_addr=1,
             in_zp=5, out_zp=-7, clamp_min=-120, clamp_max=100, scale32=1, double_round=1),
    ]
    instrs = setup(CFG) + [
        make("LOOP", count=3, body=len(body) + 2, inc_asram=9, inc_acc=5, inc_psram=2, wait=4),
        *body,
        make("LOOP", count=2, body=1, inc_asram=1, inc_acc=1),
        make("VALU", op=int(ValuOp.ADD), dtype=int(VecType.INT32), n0=2, n1=1, a_mem=1, a_addr=60, a_stride0=1,
             b_mem=2, b_addr=4, b_bcast=1, d_mem=0, d_addr=900, d_stride0=4),
        make("HALT"),
    ]
    _, ref = lockstep(small_rtl, CFG, instrs, mem)
    assert ref.instructions_executed > 3 * len(body)


def test_vector_program_default(default_rtl):
    rng = np.random.default_rng(4)
    instrs, mem = vector_program(rng, DEFAULT_CONFIG, 70)
    lockstep(default_rtl, DEFAULT_CONFIG, instrs, mem)


BAD = {
    "valu_op": make("VALU", op=25, n0=1, n1=1),
    "valu_dtype": make("VALU", op=0, dtype=3, n0=0, n1=0),
    "valu_c_mem": make("VALU", op=0, c_mem=3),
    "vrescale_out_type": make("VRESCALE", in_type=0, out_type=3),
    "vrescale_params": make("VRESCALE", param_addr=CFG.psram_rows - 1, n0=0),
    "vrescale_int48_acc": make("VRESCALE", in_type=3, a_mem=1, a_addr=CFG.acc_rows - 1, n0=1, n1=1),
    "valu_select_c": make("VALU", op=20, dtype=1, n0=2, n1=1, c_mem=2, c_addr=CFG.psram_rows - 1,
                          c_fixed=0, b_stride0=1, d_addr=600),
    "valu_dest": make("VALU", op=2, dtype=0, n0=3, n1=1, d_mem=0, d_addr=CFG.asram_rows - 10, d_stride0=4),
    "vdwconv_weights": make("VDWCONV", n0=1, n1=1, k0=3, k1=3, w_stride0=1, w_stride1=4, b_mem=2,
                            b_addr=CFG.psram_rows - 8, d_addr=700),
    "vdwconv_params": make("VDWCONV", n0=0, n1=1, param_addr=CFG.psram_rows - 2),
    "vdwconv_b_mem": make("VDWCONV", n0=1, n1=1, k0=1, k1=1, b_mem=3),
    "vpool_window": make("VPOOL", mode=0, dtype=2, n0=1, n1=1, k0=2, k1=2, w_stride0=1, w_stride1=CFG.acc_rows,
                         a_mem=1, d_mem=0, d_addr=700),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_vector_errors(small_rtl, name):
    """A failing vector instruction stops the NPU with the doc's error after the work
    before it, like every other instruction."""
    bad = BAD[name]
    expect = vpu_doc_rules.expected_code(CFG, bad.name, bad.values)
    assert expect != ErrorCode.NONE
    rtl, ref = lockstep(small_rtl, CFG, test_rtl_errors.around(bad), test_rtl_errors.memory(), expect=None,
                        hazard_free=False)
    assert (rtl.error_code, rtl.stop_pc) == (expect, 3)


def vector_soup(seed, cfg, n=150):
    """Timing only: the random DMA/MXU/ACT/SYNC mix of test_rtl_timing.py with vector
    instructions among them, all with random wait masks."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.4:
            instr = random_vector_instruction(rng, cfg, int(rng.integers(0, 2)))
            instr.values["wait"] = int(rng.integers(0, 8)) if rng.random() < 0.5 else 0
            out.append(instr)
        else:
            out.append(test_rtl_timing.random_instruction(rng, cfg))
    return out + [make("HALT")]


@pytest.mark.parametrize("seed", [71, 72])
def test_timing_vector_soup_small(small_rtl, seed):
    run_checked(small_rtl, CFG, vector_soup(seed, CFG), bytearray(0xC000), model=False, srams=False)


def test_timing_vector_soup_default(default_rtl):
    run_checked(default_rtl, DEFAULT_CONFIG, vector_soup(73, DEFAULT_CONFIG, n=200), bytearray(0x10000),
                model=False, srams=False)
