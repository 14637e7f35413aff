"""ACT's ``mxu_lag`` on the RTL (isa/instructions.py ACT; hw/mxu.py ``pending``, the
sequencer's wait): an ACT that waits for the MXU issues once at most ``mxu_lag`` MATMULs are
unfinished, so the array streams the next block while the ACT waits for its own.  Checked
against the cycle model (CYCLES, busy counters) and, for the data program, the ISA
simulator in every byte, with its hazard checker confirming that each ACT still follows
the MATMULs it reads.  Each program is checked to exercise the lag: the same program with
every lag 0 takes a different number of cycles."""
from __future__ import annotations

import numpy as np
import pytest

from isa import SMALL_CONFIG, make
from isa.encoding import Instruction
from sim.npu_timing import TimingModel

from cocotb_tests.rtl_harness import lockstep, run_checked

CFG = SMALL_CONFIG
ASRAM, WSRAM, PSRAM = 0, 1, 2
DMA, MXU, VPU = 1, 2, 4


def _no_lag(instrs) -> int:
    """Cycles of the program with every mxu_lag 0 (the MXU waits for the array to empty)."""
    plain = [Instruction(i.name, {**i.values, "mxu_lag": 0}) if i.name == "ACT" else i for i in instrs]
    return TimingModel(CFG).run(plain).total_cycles


def _memory() -> bytearray:
    rng = np.random.default_rng(9)
    mem = bytearray(0xC000)
    mem[0x4000:0x5000] = rng.integers(0, 256, 0x1000, dtype=np.uint8).tobytes()
    # parameters: bias, multiplier 2**30 (scale32), shift 33, per lane
    params = np.zeros((3, CFG.array_cols), dtype="<i4")
    params[0] = rng.integers(-1000, 1000, CFG.array_cols)
    params[1] = 1 << 30
    params[2] = 33
    mem[0x6000:0x6000 + params.nbytes] = params.tobytes()
    return mem


def _act(acc_addr: int, count: int, dst: int, lag: int, wait: int = MXU) -> Instruction:
    return make("ACT", wait=wait, mxu_lag=lag, acc_addr=acc_addr, count=count, dst_addr=dst, param_addr=0,
                out_zp=3, clamp_min=-128, clamp_max=127, scale32=1)


def _matmul(a: int, n: int, acc: int, wait: int = 0, a_type: int = 0) -> Instruction:
    return make("MATMUL", wait=wait, a_addr=a, a_stride0=1 + a_type, n0=n, n1=1, w_addr=0, acc_addr=acc,
                accumulate=0, a_type=a_type)


def test_mxu_lag_data(small_rtl):
    """Blocks of MATMULs into alternating ACC slots, each ACT reading the block before last
    with a lag covering the MATMULs since: long and short MATMULs (shorter than the array),
    an INT16 one and an empty one (never unfinished, not counted)."""
    words = CFG.words_per_wide_row
    instrs = [
        make("DMA_LOAD", sram=ASRAM, sram_addr=0, ext_addr=0x4000, len0=96, len1=1, len2=1),
        make("DMA_LOAD", sram=WSRAM, sram_addr=0, ext_addr=0x4800, len0=CFG.array_rows, len1=1, len2=1),
        make("DMA_LOAD", sram=PSRAM, sram_addr=0, ext_addr=0x6000, len0=3 * words, len1=1, len2=1),
        _matmul(0, 24, 0, wait=DMA),
        _act(0, 24, 100, lag=0),
        _matmul(24, 2, 32, wait=VPU),             # shorter than the array
        _matmul(40, 3, 40),
        _act(32, 2, 130, lag=1),                  # the first of the two, not the second
        _act(40, 3, 140, lag=0, wait=MXU | VPU),
        _matmul(0, 20, 64, wait=VPU),
        _matmul(30, 0, 0),                        # empty: never unfinished, not counted
        _matmul(50, 12, 96, a_type=1),            # INT16: two rows a vector
        _act(64, 20, 150, lag=1),                 # waits for the first only
        _matmul(10, 16, 0, wait=VPU),
        _matmul(26, 16, 16),
        _matmul(42, 5, 120),
        _act(96, 24, 180, lag=3),                 # the INT16 one: three issued after it
        _act(0, 32, 210, lag=1, wait=MXU | VPU),  # the two writing 0..31, not the third
        _act(120, 5, 250, lag=0, wait=MXU | VPU),
        make("DMA_STORE", wait=VPU, sram=ASRAM, sram_addr=100, ext_addr=0x8000, len0=160, len1=1, len2=1),
        make("HALT", wait=DMA | MXU | VPU),
    ]
    rtl, ref = lockstep(small_rtl, CFG, instrs, _memory())       # and no hazard
    assert _no_lag(instrs) > ref.cycles


def lag_soup(seed: int, n: int = 100) -> list:
    """Random MATMULs (empty, short, long, INT16) and ACTs with random waits and lags.
    Timing only: the data are hazardous on purpose."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        wait = int(rng.integers(0, 8)) if rng.random() < 0.4 else 0
        if rng.random() < 0.55:
            a_type = int(rng.random() < 0.2)
            out.append(_matmul(int(rng.integers(0, 40)), int(rng.choice([0, 1, 3, 4, 7, 20])),
                               int(rng.integers(0, 100)), wait=wait, a_type=a_type))
        else:
            out.append(_act(int(rng.integers(0, 100)), int(rng.integers(0, 12)), 200 + int(rng.integers(0, 40)),
                            lag=int(rng.integers(0, 4)), wait=wait | MXU if rng.random() < 0.8 else wait))
    return out + [make("HALT")]


@pytest.mark.parametrize("seed", [81, 82, 83])
def test_mxu_lag_timing_random(small_rtl, seed):
    instrs = lag_soup(seed)
    checked = run_checked(small_rtl, CFG, instrs, bytearray(0xC000), model=False, srams=False)
    assert _no_lag(instrs) != checked.timing.total_cycles      # the lag was exercised
