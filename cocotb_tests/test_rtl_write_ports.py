"""One write port per scratchpad (isa/ports.py) on the RTL: programs whose units would write
ASRAM (DMA_LOAD against ACT/VALU/TABLE) or ACC (MATMUL against VALU/TABLE) in the same
cycles, and BRANCHes that borrow the vector unit's read port, compared with the cycle model
(CYCLES, busy counters) and, for the data program, with the ISA simulator in every byte.

Each program is checked to exercise the rule: the cycle model without it (the writes
allowed to overlap, the BRANCH not waiting) gives a different cycle count, so a sequencer
that ignored the rule could not pass."""
from __future__ import annotations

import numpy as np
import pytest

from sim.npu_timing import TimingModel
from isa import SMALL_CONFIG, make
from isa.instructions import BranchTest, TableMode, ValuOp, VecType

from cocotb_tests.rtl_harness import lockstep, run_checked

CFG = SMALL_CONFIG
ASRAM, ACC, PSRAM = 0, 1, 2
DMA, MXU, VPU = 1, 2, 4


def _without_rule(instrs, config=CFG) -> int:
    """Cycles the model gives with writes allowed to overlap and BRANCHes not waiting."""
    return TimingModel(config, write_rule=(), branch_port=False).run(instrs).total_cycles


def contention_soup(seed: int, n: int = 120) -> list:
    """Random writers of ASRAM and ACC with random (often empty) wait masks, plus forward
    BRANCHes.  Timing only: the data are hazardous on purpose."""
    rng = np.random.default_rng(seed)
    small = lambda hi: int(rng.integers(0, hi + 1))
    L = CFG.bus_bytes
    out = []
    for _ in range(n):
        wait = small(7) if rng.random() < 0.3 else 0
        kind = rng.choice(["LOAD", "MATMUL", "ACT", "VALU", "TABLE", "BRANCH", "STORE"],
                          p=[0.25, 0.2, 0.1, 0.25, 0.08, 0.07, 0.05])
        if kind == "LOAD":
            out.append(make("DMA_LOAD", sram=int(rng.choice([ASRAM, ASRAM, 1, 2])), sram_addr=small(8),
                            ext_addr=0x4000, len0=small(8), len1=small(3), len2=1, stride1=L * 8, wait=wait))
        elif kind == "STORE":
            out.append(make("DMA_STORE", sram=0, sram_addr=small(64), ext_addr=0x8000, len0=small(6),
                            len1=1, len2=1, wait=wait))
        elif kind == "MATMUL":
            out.append(make("MATMUL", a_addr=small(50), a_stride0=1, n0=small(20), n1=1 + small(1),
                            w_addr=small(20), acc_addr=small(50), accumulate=small(1), wait=wait))
        elif kind == "ACT":
            out.append(make("ACT", acc_addr=small(20), count=small(12), dst_addr=200 + small(50),
                            param_addr=small(9), clamp_min=-128, clamp_max=127, wait=wait))
        elif kind == "VALU":
            d_mem = int(rng.choice([ASRAM, ACC]))
            out.append(make("VALU", op=int(ValuOp.ADD), dtype=int(VecType.INT32 if d_mem == ACC else VecType.INT8),
                            n0=small(10), n1=1, a_mem=ASRAM, a_addr=small(40), a_stride0=1,
                            b_mem=ASRAM, b_addr=small(40), b_stride0=1, d_mem=d_mem,
                            d_addr=(60 if d_mem == ACC else 300) + small(40), d_stride0=1, wait=wait))
        elif kind == "TABLE":
            d_mem = int(rng.choice([ASRAM, ACC]))
            mode = TableMode.INT8 if d_mem == ASRAM else TableMode.INT16
            out.append(make("TABLE", mode=int(mode), n0=small(6), n1=1, a_mem=ASRAM, a_addr=small(40),
                            a_stride0=1 + (mode == TableMode.INT16), d_mem=d_mem,
                            d_addr=(60 if d_mem == ACC else 300) + small(30), d_stride0=1, t_addr=0, wait=wait))
        else:
            target = len(out) + 1 + small(2)
            # ALWAYS: the cycle model has no data to follow a conditional branch with, but
            # the condition row is read all the same (through the vector unit's port).
            out.append(make("BRANCH", target=target, test=int(BranchTest.ALWAYS), mem=small(1),
                            row=small(60), wait=wait))
    # Every forward target must exist: pad with SYNCs before the HALT.
    return out + [make("SYNC")] * 3 + [make("HALT")]


@pytest.mark.parametrize("seed", [71, 72, 73])
def test_write_port_timing_random(small_rtl, seed):
    instrs = contention_soup(seed)
    checked = run_checked(small_rtl, CFG, instrs, bytearray(0xC000), model=False, srams=False)
    assert _without_rule(instrs) != checked.timing.total_cycles     # the rule was exercised


def _data_memory() -> bytearray:
    rng = np.random.default_rng(5)
    mem = bytearray(0xC000)
    mem[0x4000:0x5000] = rng.integers(0, 256, 0x1000, dtype=np.uint8).tobytes()
    return mem


def test_write_port_data(small_rtl):
    """Writers of ASRAM and ACC issued with no wait between them (disjoint rows, so the
    program has no hazard): the sequencer serialises them where they share a memory, and
    every scratchpad byte and every cycle matches the models."""
    rows = 32
    instrs = [
        # data to work on: ASRAM rows 0..63, weights, parameters
        make("DMA_LOAD", sram=ASRAM, sram_addr=0, ext_addr=0x4000, len0=64, len1=1, len2=1),
        make("DMA_LOAD", sram=1, sram_addr=0, ext_addr=0x4400, len0=CFG.array_rows, len1=1, len2=1),
        make("DMA_LOAD", sram=PSRAM, sram_addr=0, ext_addr=0x4800, len0=3 * 4, len1=1, len2=1),
        make("TABLE", wait=DMA, mode=int(TableMode.LOAD), n0=256 // CFG.bus_bytes, n1=1, a_mem=ASRAM,
             a_addr=0, a_stride0=1),
        # ASRAM: a load of the next rows against a vector result (VALU) and a lookup (TABLE)
        make("VALU", wait=VPU, op=int(ValuOp.ADD), dtype=int(VecType.INT8), n0=rows, n1=1, a_mem=ASRAM,
             a_addr=0, a_stride0=1, b_mem=ASRAM, b_addr=1, b_stride0=1, d_mem=ASRAM, d_addr=100, d_stride0=1),
        make("DMA_LOAD", sram=ASRAM, sram_addr=200, ext_addr=0x4C00, len0=rows, len1=1, len2=1),
        make("TABLE", mode=int(TableMode.INT8), n0=rows, n1=1, a_mem=ASRAM, a_addr=0, a_stride0=1,
             d_mem=ASRAM, d_addr=140, d_stride0=1, t_addr=0),
        # ACC: the array accumulates while the vector unit writes other ACC rows
        make("MATMUL", wait=DMA, a_addr=0, a_stride0=1, n0=rows, n1=1, w_addr=0, acc_addr=0, accumulate=0),
        make("VALU", op=int(ValuOp.ADD), dtype=int(VecType.INT32), n0=16, n1=1, a_mem=PSRAM, a_addr=0,
             a_stride0=0, b_mem=ASRAM, b_addr=0, b_stride0=4, d_mem=ACC, d_addr=64, d_stride0=1),
        make("MATMUL", a_addr=32, a_stride0=1, n0=rows, n1=1, w_addr=0, acc_addr=32, accumulate=0),
        # a BRANCH right behind a vector instruction: it waits for the vector unit's port
        make("VALU", op=int(ValuOp.COPY), dtype=int(VecType.INT8), n0=8, n1=1, a_mem=ASRAM, a_addr=0,
             a_stride0=1, d_mem=ASRAM, d_addr=180, d_stride0=1),
        make("BRANCH", target=13, test=int(BranchTest.ALWAYS), mem=ASRAM, row=150),
        make("SYNC"),
        make("SYNC", wait=DMA | MXU | VPU),
        make("HALT"),
    ]
    rtl, ref = lockstep(small_rtl, CFG, instrs, _data_memory())       # and no hazard
    assert _without_rule(instrs) != ref.cycles
