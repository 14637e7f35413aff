"""The cycle model (sim/npu_timing.py) against the RTL: random instruction mixes with random
wait masks (every overlap the sequencer allows), also inside nested LOOPs, compared on
CYCLES and the per-unit busy counters.  Timing is data-independent, so the data (and
hazards) do not matter here."""
from __future__ import annotations

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, make

from cocotb_tests.rtl_harness import run_checked


def random_instruction(rng, cfg):
    L = cfg.bus_bytes
    kind = rng.choice(["DMA_LOAD", "DMA_STORE", "MATMUL", "ACT", "SYNC"], p=[0.25, 0.15, 0.35, 0.15, 0.1])
    wait = int(rng.integers(0, 8)) if rng.random() < 0.5 else 0
    small = lambda hi: int(rng.integers(0, hi + 1))
    if kind == "DMA_LOAD":
        return make("DMA_LOAD", sram=small(2), sram_addr=small(8), ext_addr=0x4000, len0=small(6), len1=small(4),
                    len2=small(2), stride1=L * small(8), stride2=L * small(40), pad_b0=small(2), pad_a0=small(2),
                    pad_b1=small(1), pad_a1=small(1), wait=wait)
    if kind == "DMA_STORE":
        return make("DMA_STORE", sram=0, sram_addr=small(64), ext_addr=0x8000, len0=small(6), len1=small(3),
                    len2=small(2), stride1=L * 8, stride2=L * 32, wait=wait)
    if kind == "MATMUL":
        n0 = int(rng.choice([0, 1, 2, cfg.array_rows - 1, cfg.array_rows, cfg.array_rows + 3, small(60)]))
        return make("MATMUL", a_addr=small(50), a_stride0=1, n0=n0, n1=small(2) + (n0 > 0), w_addr=small(20),
                    acc_addr=small(50), accumulate=small(1), wait=wait)
    if kind == "ACT":
        return make("ACT", acc_addr=small(20), count=small(12), dst_addr=200 + small(50),
                    param_addr=small(9), clamp_min=-128, clamp_max=127, wait=wait)
    return make("SYNC", wait=wait)


def soup(seed, cfg, n=150):
    rng = np.random.default_rng(seed)
    return [random_instruction(rng, cfg) for _ in range(n)] + [make("HALT")]


def loop_soup(seed, cfg, n=60, depth=4):
    """Random instructions, runs of them wrapped in nested LOOPs (counts 0..3, bodies that
    end together, waits on the LOOPs too).  Increments are small and non-negative, and
    PSRAM stays put on the small NPU, so every address stays in range."""
    rng = np.random.default_rng(seed)
    L = cfg.bus_bytes

    def block(level: int, items: int) -> list:
        out = []
        for _ in range(items):
            if level < depth and rng.random() < 0.3:
                body = block(level + 1, int(rng.integers(1, 4)))
                out.append(make("LOOP", count=int(rng.choice([0, 1, 2, 3], p=[0.1, 0.2, 0.4, 0.3])),
                                body=len(body), wait=int(rng.integers(0, 8)) if rng.random() < 0.3 else 0,
                                inc_ext=L * int(rng.integers(0, 3)), inc_asram=int(rng.integers(0, 3)),
                                inc_wsram=int(rng.integers(0, 3)), inc_acc=int(rng.integers(0, 3)),
                                inc_psram=int(rng.integers(0, 2)) if cfg.psram_rows > 64 else 0))
                out += body
            else:
                out.append(random_instruction(rng, cfg))
        return out

    return block(0, n) + [make("HALT")]


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_timing_random_small(small_rtl, seed):
    run_checked(small_rtl, SMALL_CONFIG, soup(seed, SMALL_CONFIG), bytearray(0xC000), model=False, srams=False)


def test_timing_random_default(default_rtl):
    run_checked(default_rtl, DEFAULT_CONFIG, soup(41, DEFAULT_CONFIG, n=250), bytearray(0x10000),
                model=False, srams=False)


@pytest.mark.parametrize("seed", [51, 52])
def test_timing_loops_small(small_rtl, seed):
    instrs = loop_soup(seed, SMALL_CONFIG)
    checked = run_checked(small_rtl, SMALL_CONFIG, instrs, bytearray(0xC000), model=False, srams=False)
    assert len(checked.timing.per_instruction) > 3 * len(instrs) // 2     # the loops repeat


def test_timing_loops_default(default_rtl):
    instrs = loop_soup(61, DEFAULT_CONFIG, n=80)
    checked = run_checked(default_rtl, DEFAULT_CONFIG, instrs, bytearray(0x10000), model=False, srams=False)
    assert len(checked.timing.per_instruction) > 3 * len(instrs) // 2


def test_timing_empty_program(small_rtl):
    """HALT alone, and a program of only SYNCs with every wait bit."""
    run_checked(small_rtl, SMALL_CONFIG, [make("HALT")], bytearray(64), model=False)
    run_checked(small_rtl, SMALL_CONFIG, [make("SYNC", wait=7)] * 5 + [make("HALT")], bytearray(256), model=False)
