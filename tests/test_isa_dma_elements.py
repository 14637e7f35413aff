"""DMA element mode (``elem != 0``) in the ISA simulator against the DMA docs' pseudocode.

The expected memories come from a byte-by-byte transcription of the DMA_LOAD / DMA_STORE
pseudocode (Python loops below), never from the simulator; programs are constrained-random
with fixed seeds over element sizes, strides (0, negative, large), padding, lengths of 1,
lines that are not a whole number of words, packed lines (``pack``), and stores that must leave every byte around
their elements untouched.  Errors and their priority, and the cycle rule, are checked too.
"""
import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, ErrorCode, make
from isa.instructions import Sram
from isa.encoding import encode_program
from isa.program import Program
from sim.isa.sim import IsaSim

from cocotb_tests.dma_programs import DATA, MEM, OUT, random_memory, random_program

ELEMS = (1, 2, 4, 8)


def doc_load(mem: bytes, words: np.ndarray, v: dict, bus: int) -> None:
    """DMA_LOAD's pseudocode into ``words`` (the scratchpad as (n, bus) bytes)."""
    e, s0 = (v["elem"], v["stride0"]) if v["elem"] else (bus, bus)
    per_line = v["pad_b0"] + v["len0"] + v["pad_a0"]
    k = -(-per_line * e // bus)
    nl = v["pad_b1"] + v["len1"] + v["pad_a1"]
    kp = -(-nl * per_line * e // bus)                      # packed lines: words per plane
    dst = v["sram_addr"]
    for p in range(v["len2"]):
        plane = [v["pad_value"]] * (kp * bus)
        for l in range(-v["pad_b1"], v["len1"] + v["pad_a1"]):
            line = [v["pad_value"]] * (k * bus)
            if 0 <= l < v["len1"]:
                for w in range(v["len0"]):
                    a = v["ext_addr"] + p * v["stride2"] + l * v["stride1"] + w * s0
                    line[(v["pad_b0"] + w) * e:(v["pad_b0"] + w + 1) * e] = mem[a:a + e]
            if v.get("pack"):
                at = (l + v["pad_b1"]) * per_line * e
                plane[at:at + per_line * e] = line[:per_line * e]
                continue
            for j in range(k):
                words[dst] = line[j * bus:(j + 1) * bus]
                dst += 1
        if v.get("pack"):
            for j in range(kp):
                words[dst] = plane[j * bus:(j + 1) * bus]
                dst += 1


def doc_store(mem: bytearray, words: np.ndarray, v: dict, bus: int) -> None:
    """DMA_STORE's pseudocode from ``words`` (ASRAM) into ``mem``."""
    e, s0 = (v["elem"], v["stride0"]) if v["elem"] else (bus, bus)
    k = -(-v["len0"] * e // bus)
    src = v["sram_addr"]
    for p in range(v["len2"]):
        for l in range(v["len1"]):
            line = words[src:src + k].tobytes()
            src += k
            for w in range(v["len0"]):
                a = v["ext_addr"] + p * v["stride2"] + l * v["stride1"] + w * s0
                mem[a:a + e] = line[w * e:(w + 1) * e]


def word_views(cfg, srams: dict) -> dict:
    bus = cfg.bus_bytes
    return {Sram.ASRAM: srams["asram"], Sram.WSRAM: srams["wsram"],
            Sram.PSRAM: srams["psram"].reshape(-1, bus)}


def doc_run(cfg, instrs, mem: bytes):
    """Run loads and stores through the doc pseudocode: (memory, scratchpads as bytes)."""
    mem = bytearray(mem)
    srams = {"asram": np.zeros((cfg.asram_rows, cfg.asram_row_bytes), np.uint8),
             "wsram": np.zeros((cfg.wsram_rows, cfg.wsram_row_bytes), np.uint8),
             "psram": np.zeros((cfg.psram_rows, cfg.psram_row_bytes), np.uint8)}
    words = word_views(cfg, srams)
    for ins in instrs:
        if ins.name == "DMA_LOAD":
            doc_load(mem, words[Sram(ins.values["sram"])], ins.values, cfg.bus_bytes)
        elif ins.name == "DMA_STORE":
            doc_store(mem, words[Sram.ASRAM], ins.values, cfg.bus_bytes)
    return bytes(mem), srams


def with_code(instrs, mem: bytes) -> bytes:
    """``mem`` with ``instrs`` + HALT encoded at address 0 (below DATA)."""
    code = encode_program(list(instrs) + [make("HALT")])
    assert len(code) <= DATA
    return code + bytes(mem)[len(code):]


def sim_run(cfg, instrs, mem: bytes, timing=False):
    """Run ``instrs`` + HALT placed at address 0 of ``mem``."""
    prog = Program(cfg, list(instrs) + [make("HALT")], program_addr=0)
    return IsaSim(cfg).run(prog, with_code(instrs, mem), timing=timing)


@pytest.mark.parametrize("cfg", [SMALL_CONFIG, DEFAULT_CONFIG], ids=["4x4", "16x16"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_element_loads_and_stores(cfg, seed):
    rng = np.random.default_rng(seed)
    mem = random_memory(rng)
    instrs = random_program(rng, cfg)
    want_mem, want = doc_run(cfg, instrs, with_code(instrs, mem))
    res = sim_run(cfg, instrs, mem)
    assert res.error_code == ErrorCode.NONE, res.error_message
    assert bytes(res.memory) == want_mem
    st = res.state
    assert np.array_equal(st.asram, want["asram"])
    assert np.array_equal(st.wsram, want["wsram"])
    assert np.array_equal(st.psram.view(np.uint8).reshape(want["psram"].shape), want["psram"])


def test_reverse_broadcast_and_partial_words():
    """Hand-checked: REVERSE with stride0 = -E, broadcast with stride0 = 0, a 3-element
    int16 line padded to two 4-byte words, and a store touching only its element bytes."""
    cfg = SMALL_CONFIG
    mem = bytearray(range(256)) * (MEM // 256)
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=DATA + 6, elem=2, stride0=-2, len0=4, len1=1, len2=1),
        make("DMA_LOAD", sram=0, sram_addr=2, ext_addr=DATA + 5, elem=1, stride0=0, len0=6, len1=1, len2=1,
             pad_value=0xEE),
        make("DMA_LOAD", sram=0, sram_addr=4, ext_addr=DATA, elem=2, stride0=2, len0=3, len1=1, len2=1,
             pad_b0=0, pad_value=0x77),
        make("DMA_STORE", sram=0, sram_addr=0, ext_addr=OUT + 1, elem=1, stride0=2, len0=3, len1=1, len2=1,
             wait=1),
    ]
    res = sim_run(cfg, instrs, bytes(mem))
    a = res.state.asram
    assert a[0:2].tobytes() == bytes([6, 7, 4, 5, 2, 3, 0, 1])
    assert a[2:4].tobytes() == bytes([5] * 6 + [0xEE] * 2)
    assert a[4:6].tobytes() == bytes([0, 1, 2, 3, 4, 5, 0x77, 0x77])
    out = res.memory[OUT:OUT + 8]
    assert bytes(out) == bytes([0, 6, 2, 7, 4, 4, 6, 7])   # bytes 1, 3, 5 written; 0, 2, 4, 6, 7 kept


def test_packed_lines_hand_checked():
    """pack = 1: three int8 lines of 3 bytes follow each other in one plane (9 bytes: 3 words
    on a 4-byte bus, the last completed with pad_value); the next plane starts a fresh word.
    A pad line and pad elements are packed the same way; int16 elements cross words."""
    cfg = SMALL_CONFIG
    mem = bytearray(range(256)) * (MEM // 256)
    d = DATA % 256
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=DATA, elem=1, stride0=1, len0=3, len1=3, stride1=16,
             len2=2, stride2=100, pad_value=0xEE, pack=1),
        make("DMA_LOAD", sram=0, sram_addr=6, ext_addr=DATA, elem=1, stride0=1, len0=2, len1=1, len2=1,
             pad_b0=1, pad_b1=1, pad_value=0x55, pack=1),
        make("DMA_LOAD", sram=0, sram_addr=8, ext_addr=DATA, elem=2, stride0=2, len0=3, len1=2, stride1=8,
             len2=1, pad_value=0x77, pack=1),
    ]
    res = sim_run(cfg, instrs, bytes(mem))
    assert res.error_code == ErrorCode.NONE, res.error_message
    a = res.state.asram
    plane0 = [d, d + 1, d + 2, d + 16, d + 17, d + 18, d + 32, d + 33, d + 34]
    assert a[0:3].tobytes() == bytes(plane0 + [0xEE] * 3)
    assert a[3:6].tobytes() == bytes([x + 100 for x in plane0] + [0xEE] * 3)
    # pad line (pad_b0 + len0 = 3 elements) then the line: 6 bytes, 2 words
    assert a[6:8].tobytes() == bytes([0x55] * 4 + [d, d + 1, 0x55, 0x55])
    assert a[8:11].tobytes() == bytes([d, d + 1, d + 2, d + 3, d + 4, d + 5,
                                       d + 8, d + 9, d + 10, d + 11, d + 12, d + 13])
    assert not a[11].any()


def test_packed_lines_sram_overflow_counts_planes():
    """SRAM_OVERFLOW with pack = 1 counts ceil(lines * line bytes / BUS) words per plane."""
    cfg = SMALL_CONFIG
    rows = cfg.asram_rows
    # 3 lines of 5 bytes: 15 bytes, 4 words per plane packed; 3 x 2 words unpacked
    f = dict(elem=1, len0=5, len1=3, len2=2, stride1=16, stride2=64, pack=1)
    assert _err(cfg, sram_addr=rows - 8, **f) == ErrorCode.NONE
    assert _err(cfg, sram_addr=rows - 7, **f) == ErrorCode.SRAM_OVERFLOW
    assert _err(cfg, sram_addr=rows - 12, **{**f, "pack": 0}) == ErrorCode.NONE
    assert _err(cfg, sram_addr=rows - 11, **{**f, "pack": 0}) == ErrorCode.SRAM_OVERFLOW
    # pad lines and pad elements count: (1 + 3) lines x (1 + 5) bytes = 24 bytes, 6 words
    assert _err(cfg, sram_addr=rows - 12, **{**f, "pad_b1": 1, "pad_b0": 1}) == ErrorCode.NONE
    assert _err(cfg, sram_addr=rows - 11, **{**f, "pad_b1": 1, "pad_b0": 1}) == ErrorCode.SRAM_OVERFLOW


def test_store_past_image_extends_memory_to_a_whole_word():
    cfg = SMALL_CONFIG
    instrs = [make("DMA_STORE", sram=0, sram_addr=0, ext_addr=0x1001, elem=1, len0=2, len1=1, len2=1)]
    res = sim_run(cfg, instrs, bytes(0x800))
    assert len(res.memory) == 0x1004


def _err(cfg, **f):
    name = f.pop("name", "DMA_LOAD")
    base = dict(sram=0, sram_addr=0, ext_addr=DATA, len0=1, len1=1, len2=1)
    res = sim_run(cfg, [make(name, **{**base, **f})], bytes(MEM))
    return res.error_code


@pytest.mark.parametrize("name", ["DMA_LOAD", "DMA_STORE"])
def test_errors_and_priority(name):
    cfg = SMALL_CONFIG
    E = ErrorCode
    for elem in (3, 5, 6, 7, 9, 15):
        assert _err(cfg, name=name, elem=elem) == E.ILLEGAL_INSTRUCTION
    assert _err(cfg, name=name, elem=0, stride0=4) == E.ILLEGAL_INSTRUCTION
    assert _err(cfg, name=name, elem=0, stride0=4, ext_addr=1) == E.ILLEGAL_INSTRUCTION   # before misaligned
    assert _err(cfg, name=name, elem=2, ext_addr=DATA + 1) == E.DMA_MISALIGNED
    assert _err(cfg, name=name, elem=4, stride0=6, len0=2) == E.DMA_MISALIGNED
    assert _err(cfg, name=name, elem=8, stride1=4, len1=2) == E.DMA_MISALIGNED     # E > BUS
    assert _err(cfg, name=name, elem=2, stride2=3) == E.DMA_MISALIGNED             # even if len2 == 1
    assert _err(cfg, name=name, elem=2, ext_addr=cfg.ext_mem_bytes + 1, len0=0) == E.DMA_MISALIGNED
    # Alignment is to the element, not the bus word.
    assert _err(cfg, name=name, elem=1, ext_addr=DATA + 3, stride0=7, stride1=5, len0=3) == E.NONE
    # Range: exact lowest and highest byte, negative strides included.
    end = cfg.ext_mem_bytes
    assert _err(cfg, name=name, elem=2, ext_addr=4, stride0=-2, len0=3) == E.NONE
    assert _err(cfg, name=name, elem=2, ext_addr=4, stride0=-2, len0=4) == E.DMA_OUT_OF_RANGE
    assert _err(cfg, name=name, elem=4, ext_addr=end - 4) == E.NONE
    assert _err(cfg, name=name, elem=4, ext_addr=end - 4, stride0=4, len0=2) == E.DMA_OUT_OF_RANGE
    assert _err(cfg, name=name, elem=8, ext_addr=end - 8, stride1=8, len1=2) == E.DMA_OUT_OF_RANGE
    assert _err(cfg, name=name, elem=1, ext_addr=end, len0=0) == E.NONE           # nothing moved
    assert _err(cfg, name=name, elem=1, ext_addr=end, len2=0) == E.NONE
    assert _err(cfg, name=name, elem=1, ext_addr=end, sram_addr=2 ** 20 - 1) == E.DMA_OUT_OF_RANGE
    # SRAM_OVERFLOW counts K words per line: 5 int8 elements take 2 words on a 4-byte bus.
    rows = cfg.asram_rows
    assert _err(cfg, name=name, elem=1, len0=4, sram_addr=rows - 1) == E.NONE
    assert _err(cfg, name=name, elem=1, len0=5, sram_addr=rows - 1) == E.SRAM_OVERFLOW
    assert _err(cfg, name=name, elem=8, len0=1, sram_addr=rows - 1) == E.SRAM_OVERFLOW


def test_load_padding_counts_elements():
    cfg = SMALL_CONFIG
    rows = cfg.asram_rows
    # pad_b0 + len0 + pad_a0 = 9 int8 elements: 3 words per line; 2 pad lines
    f = dict(elem=1, len0=1, pad_b0=4, pad_a0=4, pad_b1=1, pad_a1=1)
    assert _err(cfg, sram_addr=rows - 9, **f) == ErrorCode.NONE
    assert _err(cfg, sram_addr=rows - 8, **f) == ErrorCode.SRAM_OVERFLOW
    # padding alone (len1 = 0) still writes its lines
    assert _err(cfg, sram_addr=rows - 5, **{**f, "len1": 0}) == ErrorCode.SRAM_OVERFLOW


@pytest.mark.parametrize("cfg", [SMALL_CONFIG, DEFAULT_CONFIG], ids=["4x4", "16x16"])
def test_cycles_one_element_per_cycle(cfg):
    """LOAD: S + L cycles, STORE: N + 1, with one slot per element (E > BUS: per word)."""
    from sim.npu_timing import TimingModel

    bus, lat = cfg.bus_bytes, cfg.mem_latency
    tm = TimingModel(cfg)
    for e in ELEMS:
        x = max(1, e // bus)
        load = make("DMA_LOAD", elem=e, stride0=e, len0=5, len1=3, len2=2, pad_b0=1, pad_a0=2, pad_b1=1)
        assert tm.duration(load) == 2 * 4 * 8 * x + lat
        store = make("DMA_STORE", elem=e, stride0=-e, len0=5, len1=3, len2=2)
        assert tm.duration(store) == 30 * x + 1
        # packed lines: where bytes land changes, not the cycles
        packed = make("DMA_LOAD", elem=e, stride0=e, len0=5, len1=3, len2=2, pad_b0=1, pad_a0=2, pad_b1=1,
                      pack=1)
        assert tm.duration(packed) == 2 * 4 * 8 * x + lat
    assert tm.duration(make("DMA_LOAD", elem=2, len0=0, len1=3, len2=2)) == 0
    # word mode unchanged
    assert tm.duration(make("DMA_LOAD", len0=5, len1=3, len2=2, pad_a1=1)) == 40 + lat


def test_loop_offsets_apply_to_ext_addr():
    """inc_ext moves ext_addr per iteration; the effective address is checked: an odd
    offset misaligns an int16 transfer in the second iteration, a negative one reaches
    below address 0 in the third (STOP_PC is the DMA's index either way)."""
    cfg = SMALL_CONFIG
    body = dict(sram=0, sram_addr=0, elem=2, stride0=-2, len0=2, len1=1, len2=1)
    mem = bytes(MEM)
    ok = [make("LOOP", count=3, body=1, inc_ext=4, inc_asram=1), make("DMA_LOAD", ext_addr=DATA + 2, **body)]
    res = sim_run(cfg, ok, mem)
    assert res.error_code == ErrorCode.NONE
    want = bytearray(with_code(ok, mem))
    words = np.zeros((cfg.asram_rows, cfg.bus_bytes), np.uint8)
    for i in range(3):
        doc_load(want, words, {**body, "ext_addr": DATA + 2 + 4 * i, "sram_addr": i, "stride1": 0, "stride2": 0,
                               "pad_b0": 0, "pad_a0": 0, "pad_b1": 0, "pad_a1": 0, "pad_value": 0}, cfg.bus_bytes)
    assert np.array_equal(res.state.asram[:3], words[:3])
    odd = [make("LOOP", count=3, body=1, inc_ext=1), make("DMA_LOAD", ext_addr=DATA, **body)]
    res = sim_run(cfg, odd, mem)
    assert (res.error_code, res.error_pc) == (ErrorCode.DMA_MISALIGNED, 1)
    low = [make("LOOP", count=3, body=1, inc_ext=-2), make("DMA_LOAD", ext_addr=4, **body)]
    res = sim_run(cfg, low, mem)
    assert (res.error_code, res.error_pc) == (ErrorCode.DMA_OUT_OF_RANGE, 1)
    assert res.instructions_executed == 3      # LOOP, two DMAs; the third fails
