"""Constrained-random DMA element-mode instructions (``elem != 0``) for the ISA-simulator
tests (tests/test_isa_dma_elements.py) and the RTL tests (cocotb_tests/test_rtl_dma.py):
element sizes 1, 2, 4, 8, strides 0, negative, small and large, padding, lengths of 1,
lines that are not a whole number of words, packed lines (DMA_LOAD ``pack``), and stores that overlap (last write wins)
or leave gaps between their elements (the untouched bytes must keep their values).

Every instruction stays inside a given external region, so programs never fail."""
from __future__ import annotations

import numpy as np

from isa import make
from isa.instructions import DMA_ELEM_SIZES, Sram

DATA, OUT, MEM = 0x2000, 0x8000, 0xC000      # source data, store area, image size (program below DATA)


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def depth_words(cfg, sram: Sram) -> int:
    return {Sram.ASRAM: cfg.asram_rows, Sram.WSRAM: cfg.wsram_rows,
            Sram.PSRAM: cfg.psram_rows * cfg.words_per_wide_row}[Sram(sram)]


def random_elem_load(rng, cfg, sram=Sram.ASRAM, region=(DATA, OUT), max_words=None):
    """A random legal element-mode DMA_LOAD reading inside ``region`` and writing at most
    ``max_words`` scratchpad words."""
    bus = cfg.bus_bytes
    depth = depth_words(cfg, sram)
    max_words = min(depth, max_words or depth)
    while True:
        e = _pick(rng, DMA_ELEM_SIZES)
        len0 = _pick(rng, [1, int(rng.integers(1, 3 * bus)), max(bus // e, 1) + 1])
        len1, len2 = int(rng.integers(1, 5)), int(rng.integers(1, 3))
        if rng.random() < 0.1:
            len0, len1, len2 = _pick(rng, [(0, len1, len2), (len0, 0, len2), (len0, len1, 0)])
        s0 = e * _pick(rng, [1, 1, 0, -1, int(rng.integers(-9, 10)), int(rng.integers(100, 300))])
        s1 = e * _pick(rng, [0, max(len0, 1), int(rng.integers(0, 60))])
        s2 = e * _pick(rng, [0, int(rng.integers(0, 400))])
        pads = [int(rng.integers(0, 2 * bus)) if rng.random() < 0.4 else 0 for _ in range(4)]
        inner = max(len0 - 1, 0) * s0
        lo_off = min(0, inner)
        hi_off = max(len2 - 1, 0) * s2 + max(len1 - 1, 0) * s1 + max(0, inner) + e
        room = region[1] - region[0] - (hi_off - lo_off)
        per_line = pads[0] + len0 + pads[1]
        pack = int(rng.random() < 0.4)          # packed lines: a fresh word per plane only
        lines = len1 + pads[2] + pads[3]
        count = len2 * (-(-lines * per_line * e // bus) if pack else lines * -(-per_line * e // bus))
        if room <= 0 or count > max_words:
            continue
        ext = region[0] - lo_off + e * int(rng.integers(0, room // e + 1))
        return make("DMA_LOAD", sram=int(sram), sram_addr=int(rng.integers(0, depth - count + 1)),
                    ext_addr=ext, pad_value=int(rng.integers(0, 256)), elem=e, stride0=s0, stride1=s1,
                    stride2=s2, len0=len0, len1=len1, len2=len2, pad_b0=pads[0], pad_a0=pads[1],
                    pad_b1=pads[2], pad_a1=pads[3], pack=pack)


def random_elem_store(rng, cfg, region=(OUT, MEM)):
    """A random legal element-mode DMA_STORE from ASRAM writing inside ``region``."""
    bus = cfg.bus_bytes
    while True:
        e = _pick(rng, DMA_ELEM_SIZES)
        len0 = _pick(rng, [1, int(rng.integers(1, 3 * bus)), max(bus // e, 1) + 1])
        len1, len2 = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        s0 = e * _pick(rng, [1, 1, 2, 0, -1, int(rng.integers(-5, 6)), int(rng.integers(50, 200))])
        s1 = e * _pick(rng, [max(len0, 1), 0, int(rng.integers(0, 40))])
        s2 = e * _pick(rng, [0, int(rng.integers(0, 300))])
        inner = (len0 - 1) * s0
        span = (len2 - 1) * s2 + (len1 - 1) * s1 + abs(inner) + e
        count = len2 * len1 * -(-len0 * e // bus)
        room = region[1] - region[0] - span
        if room <= 0 or count > cfg.asram_rows:
            continue
        ext = region[0] - min(0, inner) + e * int(rng.integers(0, room // e + 1))
        return make("DMA_STORE", sram=0, sram_addr=int(rng.integers(0, cfg.asram_rows - count + 1)),
                    ext_addr=ext, elem=e, stride0=s0, stride1=s1, stride2=s2, len0=len0, len1=len1, len2=len2)


def random_program(rng, cfg, count: int = 30, store_rate: float = 0.6, word_rate: float = 0.0,
                   word_load=None, word_store=None):
    """``count`` random loads (every scratchpad), each followed by a store with probability
    ``store_rate``; with probability ``word_rate`` an instruction is a word-mode one from
    ``word_load(rng, sram)`` / ``word_store(rng)`` instead (mixing modes)."""
    instrs = []
    for _ in range(count):
        sram = Sram(int(rng.integers(0, 3)))
        if word_load is not None and rng.random() < word_rate:
            instrs.append(word_load(rng, sram))
        else:
            instrs.append(random_elem_load(rng, cfg, sram))
        if rng.random() < store_rate:
            if word_store is not None and rng.random() < word_rate:
                instrs.append(word_store(rng))
            else:
                instrs.append(random_elem_store(rng, cfg))
    return instrs


def random_memory(rng) -> bytearray:
    """Random bytes everywhere from DATA (the store area too: untouched bytes keep them)."""
    mem = bytearray(MEM)
    mem[DATA:] = rng.integers(0, 256, MEM - DATA, dtype=np.uint8).tobytes()
    return mem
