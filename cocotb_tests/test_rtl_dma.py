"""DMA block tests on the 4x4 NPU: constrained-random 3-D strided loads (with padding) into
every scratchpad and strided stores, many per program, against the numpy model."""
from __future__ import annotations

import numpy as np
import pytest

from isa import SMALL_CONFIG, make
from isa.instructions import Sram

from cocotb_tests.rtl_harness import run_checked

CFG = SMALL_CONFIG
BUS = CFG.bus_bytes
PROGRAM_BYTES = 0x2000          # instructions live below this address
SOURCE = (0x2000, 0x6000)       # random input data
OUTPUT = (0x6000, 0xC000)       # DMA_STORE destinations
MEM_BYTES = 0xC000
DEPTH_WORDS = {Sram.ASRAM: CFG.asram_rows, Sram.WSRAM: CFG.wsram_rows,
               Sram.PSRAM: CFG.psram_rows * CFG.words_per_wide_row}


def _choice(rng, options):
    return options[int(rng.integers(len(options)))]


def random_load(rng, sram: Sram):
    while True:
        instr = _random_load(rng, sram)
        v = instr.values
        words = v["len2"] * (v["len1"] + v["pad_b1"] + v["pad_a1"]) * (v["len0"] + v["pad_b0"] + v["pad_a0"])
        if v["sram_addr"] + words <= DEPTH_WORDS[sram]:
            return instr


def _random_load(rng, sram: Sram):
    len0, len1, len2 = (int(rng.integers(0, 7)), int(rng.integers(0, 5)), int(rng.integers(0, 4)))
    if rng.random() < 0.8:       # mostly non-empty transfers
        len0, len1, len2 = max(len0, 1), max(len1, 1), max(len2, 1)
    pads = [int(rng.integers(0, 4)) if rng.random() < 0.5 else 0 for _ in range(4)]
    stride1 = BUS * _choice(rng, [0, len0, len0 + int(rng.integers(0, 5)), max(len0 - 1, 0)])
    stride2 = BUS * _choice(rng, [0, len1 * stride1 // BUS, int(rng.integers(0, 40))])
    span = (max(len2 - 1, 0) * stride2 + max(len1 - 1, 0) * stride1 + len0 * BUS)
    ext = SOURCE[0] + BUS * int(rng.integers(0, (SOURCE[1] - SOURCE[0] - span) // BUS))
    words = len2 * (len1 + pads[2] + pads[3]) * (len0 + pads[0] + pads[1])
    depth = DEPTH_WORDS[sram]
    dst = int(rng.integers(0, max(depth - words, 1)))
    return make("DMA_LOAD", sram=int(sram), sram_addr=dst, ext_addr=ext, len0=len0, len1=len1, len2=len2,
                stride1=stride1, stride2=stride2, pad_b0=pads[0], pad_a0=pads[1], pad_b1=pads[2],
                pad_a1=pads[3], pad_value=int(rng.integers(0, 256)))


def random_store(rng):
    len0, len1, len2 = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
    stride1 = BUS * _choice(rng, [len0, len0 + int(rng.integers(1, 4)), 0, 1])
    stride2 = BUS * _choice(rng, [len1 * stride1 // BUS, int(rng.integers(0, 30))])
    span = (len2 - 1) * stride2 + (len1 - 1) * stride1 + len0 * BUS
    ext = OUTPUT[0] + BUS * int(rng.integers(0, (OUTPUT[1] - OUTPUT[0] - span) // BUS))
    src = int(rng.integers(0, CFG.asram_rows - len0 * len1 * len2))
    return make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=src, ext_addr=ext, len0=len0, len1=len1,
                len2=len2, stride1=stride1, stride2=stride2)


def random_memory(rng) -> bytearray:
    mem = bytearray(MEM_BYTES)
    mem[SOURCE[0]:SOURCE[1]] = rng.integers(0, 256, SOURCE[1] - SOURCE[0], dtype=np.uint8).tobytes()
    return mem


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dma_random(small_rtl, seed):
    """40 random loads (all scratchpads, strides incl. 0 and overlapping, padding, empty
    transfers) interleaved with random strided stores (incl. stride 0: last write wins)."""
    rng = np.random.default_rng(seed)
    instrs = []
    for _ in range(40):
        instrs.append(random_load(rng, Sram(int(rng.integers(0, 3)))))
        if rng.random() < 0.4:
            instrs.append(random_store(rng))
    instrs.append(make("HALT"))
    run_checked(small_rtl, CFG, instrs, random_memory(rng))


def test_dma_load_store_roundtrip(small_rtl):
    """A padded 2-D image loaded into ASRAM and stored back, plane by plane."""
    rng = np.random.default_rng(7)
    mem = random_memory(rng)
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=10, ext_addr=SOURCE[0], len0=3, len1=4, len2=2,
             stride1=5 * BUS, stride2=32 * BUS, pad_b0=1, pad_a0=2, pad_b1=1, pad_a1=1, pad_value=0x80),
        make("DMA_STORE", sram=0, sram_addr=10, ext_addr=OUTPUT[0], len0=6, len1=6, len2=2,
             stride1=6 * BUS, stride2=64 * BUS),
        make("HALT"),
    ]
    run_checked(small_rtl, CFG, instrs, mem)


def test_dma_reads_past_the_image_are_zero(small_rtl):
    """External memory past the image given to run_program reads as zero."""
    mem = bytearray(b"\xff" * 0x3000)
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=CFG.ext_mem_bytes - 16 * BUS, len0=16, len1=1, len2=1),
        make("DMA_STORE", sram=0, sram_addr=0, ext_addr=0x2000, len0=16, len1=1, len2=1),
        make("HALT"),
    ]
    checked = run_checked(small_rtl, CFG, instrs, mem, model=False)
    assert checked.rtl.memory[0x2000:0x2000 + 16 * BUS] == bytes(16 * BUS)
    assert checked.rtl.memory[0x2000 + 16 * BUS:] == mem[0x2000 + 16 * BUS:]


def test_memory_grows_to_the_last_store(small_rtl):
    """Stores past the image extend the returned memory (as the ISA simulator's does)."""
    mem = bytearray(0x1000)
    instrs = [make("DMA_STORE", sram=0, sram_addr=0, ext_addr=0x1800, len0=2, len1=1, len2=1),
              make("HALT"),
              make("DMA_STORE", sram=0, sram_addr=0, ext_addr=0x3000, len0=2, len1=1, len2=1)]
    checked = run_checked(small_rtl, CFG, instrs, mem, model=False)
    assert len(checked.rtl.memory) == 0x1800 + 2 * BUS
