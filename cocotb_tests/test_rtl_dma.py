"""DMA block tests on the 4x4 NPU: constrained-random 3-D strided loads (with padding) into
every scratchpad and strided stores, many per program, in word and element mode, against
the numpy model (cocotb_tests/npu_model.py) and the ISA simulator (every external byte,
every scratchpad, cycles); one element-mode program on the 16x16 NPU."""
from __future__ import annotations

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, make
from isa.instructions import ErrorCode, Sram
from isa.program import Program

from cocotb_tests import dma_programs
from cocotb_tests.rtl_harness import assert_memory_equal, assert_rows_equal, place_program, run_checked

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


def check_against_isa_sim(checked, config, instrs, mem) -> None:
    """The RTL run of ``checked`` equals the ISA simulator's: every external byte, every
    scratchpad, cycles and busy counters."""
    from sim.isa.sim import IsaSim

    image = bytearray(mem)
    place_program(image, instrs)
    ref = IsaSim(config).run(Program(config, list(instrs)), bytes(image))
    assert ref.error_code == ErrorCode.NONE, ref.error_message
    rtl = checked.rtl
    assert (rtl.cycles, rtl.unit_busy_cycles) == (ref.cycles, ref.busy)
    assert_memory_equal(rtl.memory, bytes(ref.memory))
    for name in ("asram", "wsram", "acc", "psram"):
        want = getattr(ref.state, name)
        assert_rows_equal(name, rtl.srams[name], want.view(np.uint8).reshape(rtl.srams[name].shape))


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_dma_elements_random(small_rtl, seed):
    """Element-mode loads into every scratchpad (sizes 1..8, strides 0 / negative / large,
    padding, partial last words) and stores (gaps, overlaps), some word-mode ones mixed in,
    against the numpy model and the ISA simulator."""
    rng = np.random.default_rng(seed)
    mem = dma_programs.random_memory(rng)
    instrs = dma_programs.random_program(rng, CFG, count=25, word_rate=0.2, word_load=random_load,
                                         word_store=random_store)
    instrs.append(make("HALT"))
    checked = run_checked(small_rtl, CFG, instrs, mem)
    check_against_isa_sim(checked, CFG, instrs, mem)


def test_dma_elements_in_loops(small_rtl):
    """LOOP offsets apply to ext_addr in element mode (inc_ext need only be a multiple of E)."""
    rng = np.random.default_rng(5)
    mem = dma_programs.random_memory(rng)
    d, o = dma_programs.DATA, dma_programs.OUT
    instrs = [
        make("LOOP", count=5, body=2, inc_ext=6, inc_asram=3),
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=d + 40, elem=2, stride0=-2, len0=5, len1=2, len2=1,
             stride1=100, pad_b0=1, pad_value=0xA5),
        make("DMA_STORE", sram=0, sram_addr=0, ext_addr=o + 1, elem=1, stride0=3, len0=6, len1=2, len2=1,
             stride1=37),
        make("HALT"),
    ]
    checked = run_checked(small_rtl, CFG, instrs, mem)
    check_against_isa_sim(checked, CFG, instrs, mem)


def test_dma_elements_16x16(default_rtl):
    """One element-mode program on the 16x16 NPU (16-byte bus: up to 16 int8 lanes a word)."""
    cfg = DEFAULT_CONFIG
    rng = np.random.default_rng(21)
    mem = dma_programs.random_memory(rng)
    instrs = dma_programs.random_program(rng, cfg, count=20) + [make("HALT")]
    checked = run_checked(default_rtl, cfg, instrs, mem)
    check_against_isa_sim(checked, cfg, instrs, mem)


@pytest.mark.parametrize("name", ["4x4", "16x16"])
def test_dma_packed_lines(small_rtl, default_rtl, name):
    """Packed lines (DMA_LOAD pack = 1): an im2col-style gather (kernel rows of a 3-channel
    image as int32 elements, one plane per output pixel, lines starting mid-word), with pad
    lines and pad elements, int8 and int64 elements, inside a LOOP; every scratchpad, every
    cycle against the ISA simulator."""
    cfg, build = (CFG, small_rtl) if name == "4x4" else (DEFAULT_CONFIG, default_rtl)
    rng = np.random.default_rng(31)
    mem = dma_programs.random_memory(rng)
    d = dma_programs.DATA
    instrs = [
        # 5 kernel rows of 9 bytes (3 pixels x 3 channels, read as 3 int32: 12 bytes) per pixel
        make("DMA_LOAD", sram=0, sram_addr=3, ext_addr=d, elem=4, stride0=4, len0=3, len1=5, stride1=96,
             len2=4, stride2=12, pad_value=0x5A, pack=1),
        make("DMA_LOAD", sram=0, sram_addr=200, ext_addr=d + 17, elem=1, stride0=1, len0=5, len1=3,
             stride1=33, len2=3, stride2=5, pad_b0=2, pad_a0=1, pad_b1=1, pad_a1=2, pad_value=0xC3, pack=1),
        make("DMA_LOAD", sram=1, sram_addr=17, ext_addr=d + 64, elem=8, stride0=-8, len0=3, len1=2,
             stride1=40, len2=2, stride2=200, pad_a0=1, pad_value=0x11, pack=1),
        make("DMA_LOAD", sram=2, sram_addr=0, ext_addr=d + 2, elem=2, stride0=6, len0=3, len1=3,
             stride1=10, len2=1, pad_b1=1, pad_value=0x99, pack=1),
        make("LOOP", count=3, body=1, inc_ext=12, inc_asram=7),
        make("DMA_LOAD", sram=0, sram_addr=400, ext_addr=d + 300, elem=4, stride0=4, len0=9, len1=2,
             stride1=672, len2=1, pad_value=0, pack=1),
        make("DMA_STORE", sram=0, sram_addr=3, ext_addr=dma_programs.OUT, len0=12, len1=1, len2=1, wait=1),
        # ends exactly at the last ASRAM row: 2 planes of 3 x 5 bytes, ceil(15 / BUS) words each
        # (unpacked lines would need 3 x ceil(5 / BUS) words a plane and overflow)
        make("DMA_LOAD", sram=0, sram_addr=cfg.asram_rows - 2 * -(-15 // cfg.bus_bytes), ext_addr=d + 5,
             elem=1, stride0=1, len0=5, len1=3, stride1=16, len2=2, stride2=64, pad_value=0x3C, pack=1),
        make("HALT"),
    ]
    checked = run_checked(build, cfg, instrs, mem)
    check_against_isa_sim(checked, cfg, instrs, mem)
