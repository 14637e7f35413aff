"""The RTL against the ISA simulator (sim/isa/sim.py, written independently from the same
ISA docs): final memory, every scratchpad, cycles, busy counters, error code and PC agree
on the random block-test programs and on an error stop."""
from __future__ import annotations

import numpy as np
import pytest

from isa import SMALL_CONFIG, make
from isa.instructions import ErrorCode
from isa.program import Program
from hw.harness.simulation import run_program

from cocotb_tests import dma_programs, test_rtl_dma, test_rtl_mxu, test_rtl_errors, test_rtl_vpu
from cocotb_tests.rtl_harness import assert_memory_equal, assert_rows_equal, place_program

CFG = SMALL_CONFIG


def dma_program(rng):
    instrs = [test_rtl_dma.random_load(rng, int(rng.integers(0, 3))) for _ in range(20)]
    instrs += [test_rtl_dma.random_store(rng) for _ in range(5)]
    return instrs + [make("HALT")], test_rtl_dma.random_memory(rng)


def dma_elem_program(rng):
    """Element-mode loads and stores (cocotb_tests/dma_programs.py), word-mode ones mixed in."""
    instrs = dma_programs.random_program(rng, CFG, count=20, word_rate=0.25,
                                         word_load=test_rtl_dma.random_load, word_store=test_rtl_dma.random_store)
    return instrs + [make("HALT")], dma_programs.random_memory(rng)


def mxu_program(rng):
    mem, instrs = test_rtl_mxu.setup(rng)
    instrs += [test_rtl_mxu.random_matmul(rng, wait=1)] + [test_rtl_mxu.random_matmul(rng) for _ in range(30)]
    return instrs + [make("HALT")], mem


def vpu_program(rng):
    mem, instrs = test_rtl_vpu.setup(rng)
    instrs += [test_rtl_vpu.random_act(rng, wait=2)] + [test_rtl_vpu.random_act(rng) for _ in range(30)]
    return instrs + [make("HALT")], mem


def error_program(rng):
    bad, _ = test_rtl_errors.CASES["dma_out_of_range"]
    return test_rtl_errors.around(bad), test_rtl_errors.memory()


@pytest.mark.parametrize("kind", ["dma", "dma_elem", "mxu", "vpu", "error"])
def test_rtl_matches_isa_sim(small_rtl, kind):
    from sim.isa.sim import IsaSim

    rng = np.random.default_rng(100 + len(kind))
    instrs, mem = globals()[f"{kind}_program"](rng)
    mem = bytearray(mem)
    place_program(mem, instrs)
    program = Program(CFG, instrs)
    rtl = run_program(program, bytes(mem), build_dir=small_rtl, dump_srams=True)
    ref = IsaSim(CFG).run(program, bytes(mem))

    assert rtl.error_code == ref.error_code
    assert rtl.stop_pc == (ref.error_pc if ref.error_code != ErrorCode.NONE else len(instrs) - 1)
    assert (rtl.cycles, rtl.unit_busy_cycles) == (ref.cycles, ref.busy)
    assert_memory_equal(rtl.memory, bytes(ref.memory))
    state = ref.state
    for name in ("asram", "wsram", "acc", "psram"):
        want = getattr(state, name)
        assert_rows_equal(name, rtl.srams[name], want.view(np.uint8).reshape(rtl.srams[name].shape))
