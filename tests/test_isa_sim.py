"""The ISA simulator (sim/isa/sim.py) against the instruction semantics of isa/instructions.py.

Every expected value here is computed independently of the simulator, straight from the
pseudocode in the instruction docs: Python-integer loops over the doc's loop nests for DMA,
a direct int64 dot product for MATMUL, the TOSA spec helper apply_scale_32/16 (plus the
doc's own formula where the spec leaves the result undefined) for ACT, and a direct numpy
convolution for the end-to-end check.  Programs are hand-assembled with isa.asm.
"""
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, ErrorCode, encode, make
from isa.asm import assemble, disassemble_one
from isa.instructions import INSTR_BYTES
from isa.program import Program, Segment, TensorBinding
from sim.isa.sim import IsaRunError, IsaSim, run_program
from isa.instructions import Unit
from sim.isa.hazards import find_hazards
from sim.isa.units import Footprint, NpuState, exec_act
from sim.tosa_helpers import apply_scale_16, apply_scale_32

sys.path.insert(0, os.path.dirname(__file__))
from conv_oracle import direct_conv, random_conv_case  # noqa: E402
from tosa_ir import TosaUnpredictable

CFG = SMALL_CONFIG            # 4x4 array, 4-byte bus
BUS = CFG.bus_bytes
WPR = CFG.words_per_wide_row  # bus words per PSRAM/ACC row
DATA = 0x1000                 # external data region (the program sits at 0)
OUT = 0x3000


def wrap(x: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((x + half) % (1 << bits)) - half


def program(text: str, segments=(), cfg=CFG, **kw) -> Program:
    segs = [Segment(f"seg{i}", addr, bytes(data)) for i, (addr, data) in enumerate(segments)]
    return Program(cfg, assemble(text), segments=segs, **kw)


def run(text: str, segments=(), cfg=CFG, **kw):
    prog = program(text, segments, cfg)
    return prog, IsaSim(cfg).run(prog, timing=False, **kw)


def random_bytes(rng, n: int) -> bytes:
    return rng.integers(0, 256, n, dtype=np.uint8).tobytes()


def dma(name="DMA_LOAD", **f) -> str:
    """One DMA line with defaults len0=len1=len2=1."""
    f = {"len0": 1, "len1": 1, "len2": 1, **f}
    return name + " " + " ".join(f"{k}={v}" for k, v in f.items())


# -- DMA_LOAD ------------------------------------------------------------------------------
def doc_dma_load(mem: bytes, ext_addr, len0, len1, len2, stride1, stride2,
                 pad_b0=0, pad_a0=0, pad_b1=0, pad_a1=0, pad_value=0) -> bytes:
    """The DMA_LOAD loop nest of the doc, word by word."""
    out = []
    for p in range(len2):
        for line in range(-pad_b1, len1 + pad_a1):
            for w in range(-pad_b0, len0 + pad_a0):
                if 0 <= line < len1 and 0 <= w < len0:
                    a = ext_addr + p * stride2 + line * stride1 + w * BUS
                    out.append(bytes(mem[a:a + BUS]))
                else:
                    out.append(bytes([pad_value]) * BUS)
    return b"".join(out)


LOAD_CASES = [
    dict(len0=5, len1=1, len2=1, stride1=0, stride2=0),
    dict(len0=3, len1=4, len2=1, stride1=5 * BUS, stride2=0, pad_b0=1, pad_a0=2, pad_b1=2, pad_a1=1,
         pad_value=0x80),
    dict(len0=2, len1=3, len2=3, stride1=4 * BUS, stride2=16 * BUS, pad_b0=1, pad_a1=1, pad_value=7),
    dict(len0=2, len1=2, len2=3, stride1=2 * BUS, stride2=0),            # planes repeat
    dict(len0=4, len1=3, len2=1, stride1=BUS, stride2=0),                # overlapping lines
    dict(len0=0, len1=2, len2=2, stride1=0, stride2=0, pad_b0=1, pad_a0=1, pad_b1=1, pad_value=9),
]


@pytest.mark.parametrize("case", LOAD_CASES)
@pytest.mark.parametrize("sram", ["ASRAM", "WSRAM"])
def test_dma_load_strides_padding(case, sram):
    rng = np.random.default_rng(1)
    src = random_bytes(rng, 1024)
    dst = 3
    prog, res = run(dma(sram=sram, sram_addr=dst, ext_addr=DATA, **case) + "\nHALT",
                    [(DATA, src)])
    assert res.error_code == ErrorCode.NONE and res.instructions_executed == 2
    mem = bytes(res.memory)
    expected = doc_dma_load(mem, DATA, **case)
    words = {"ASRAM": res.state.asram, "WSRAM": res.state.wsram}[sram]
    count = len(expected) // BUS
    assert words[dst:dst + count].tobytes() == expected
    assert not words[:dst].any() and not words[dst + count:].any()
    assert bytes(res.memory) == bytes(prog.memory_image({}))     # loads do not write memory


def test_dma_psram_word_order():
    """PSRAM rows are ACC-wide: bus words fill a row lowest lanes first, little endian."""
    cfg = DEFAULT_CONFIG                      # 16 int32 lanes per row = 4 bus words
    rng = np.random.default_rng(2)
    rows = rng.integers(-2**31, 2**31, (3, cfg.array_cols), dtype=np.int64).astype(np.int32)
    raw = rows.astype("<i4").tobytes()
    wpr = cfg.words_per_wide_row
    text = (dma(sram="PSRAM", sram_addr=2 * wpr, ext_addr=DATA, len0=3 * wpr) + "\n"
            # one word into the middle of row 7: lanes 4..7 (word 1 of the row)
            + dma(sram="PSRAM", sram_addr=7 * wpr + 1, ext_addr=DATA) + "\nHALT")
    _, res = run(text, [(DATA, raw)], cfg)
    assert res.ok
    assert (res.state.psram[2:5] == rows).all()
    lanes = cfg.bus_bytes // 4
    expected7 = np.zeros(cfg.array_cols, np.int32)
    expected7[lanes:2 * lanes] = rows[0, :lanes]
    assert (res.state.psram[7] == expected7).all()


# -- DMA_STORE -----------------------------------------------------------------------------
STORE_CASES = [
    dict(len0=6, len1=1, len2=1, stride1=0, stride2=0),
    dict(len0=2, len1=3, len2=2, stride1=3 * BUS, stride2=12 * BUS),
    dict(len0=1, len1=3, len2=2, stride1=2 * BUS, stride2=BUS),          # interleaved planes
    dict(len0=3, len1=3, len2=1, stride1=BUS, stride2=0),                # overlapping: last wins
    dict(len0=2, len1=2, len2=3, stride1=2 * BUS, stride2=0),            # planes rewrite
]


@pytest.mark.parametrize("case", STORE_CASES)
def test_dma_store_strides(case):
    rng = np.random.default_rng(3)
    asram_src = random_bytes(rng, 64 * BUS)
    background = random_bytes(rng, 256)
    text = (dma(sram="ASRAM", sram_addr=0, ext_addr=DATA, len0=64) + "\n"
            + dma("DMA_STORE", sram="ASRAM", sram_addr=5, ext_addr=OUT, wait="DMA", **case) + "\nHALT")
    prog, res = run(text, [(DATA, asram_src), (OUT, background)])
    assert res.ok
    expected = bytearray(prog.memory_image({}))
    src = 5
    for p in range(case["len2"]):
        for line in range(case["len1"]):
            for w in range(case["len0"]):
                a = OUT + p * case["stride2"] + line * case["stride1"] + w * BUS
                expected[a:a + BUS] = asram_src[src * BUS:(src + 1) * BUS]
                src += 1
    assert res.memory == expected


def test_dma_store_grows_memory_past_the_image():
    text = dma(sram="ASRAM", sram_addr=0, ext_addr=DATA, len0=2) + "\n" + \
        dma("DMA_STORE", sram="ASRAM", ext_addr=0x20000, len0=2) + "\nHALT"
    prog, res = run(text, [(DATA, bytes(range(8)))])
    assert len(prog.memory_image({})) < 0x20000
    assert len(res.memory) == 0x20000 + 2 * BUS
    assert bytes(res.memory[0x20000:]) == bytes(range(8))


# -- MATMUL --------------------------------------------------------------------------------
def doc_matmul(asram: np.ndarray, wsram: np.ndarray, acc: np.ndarray, f: dict, rows: int) -> np.ndarray:
    """The MATMUL doc on Python ints: returns the new ACC array."""
    acc = acc.astype(np.int64).copy()
    w = wsram.view(np.int8).astype(int)
    a8 = asram.view(np.int8).astype(int)
    W = [[int(w[f["w_addr"] + k][n]) - f["w_zp"] for n in range(w.shape[1])] for k in range(rows)]
    for i1 in range(f["n1"]):
        for i0 in range(f["n0"]):
            row = f["a_addr"] + i1 * f["a_stride1"] + i0 * f["a_stride0"]
            a = [int(a8[row][k]) - f["a_zp"] for k in range(rows)]
            r = f["acc_addr"] + i1 * f["n0"] + i0
            for n in range(len(W[0])):
                total = sum(a[k] * W[k][n] for k in range(rows))
                acc[r][n] = wrap((int(acc[r][n]) if f["accumulate"] else 0) + total, 32)
    return acc


def asm_fields(f: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in f.items())


def test_matmul_zero_points_strides_accumulate():
    rng = np.random.default_rng(4)
    acts, weights = random_bytes(rng, 40 * BUS), random_bytes(rng, 8 * BUS)
    m1 = dict(a_addr=1, a_stride0=2, a_stride1=9, n0=3, n1=4, w_addr=0, acc_addr=5,
              accumulate=0, a_zp=-7, w_zp=3)
    m2 = dict(m1, a_addr=2, a_stride0=1, a_stride1=5, w_addr=4, accumulate=1, a_zp=300, w_zp=-128)
    m3 = dict(m1, acc_addr=9, n0=2, n1=1, accumulate=0, a_zp=0, w_zp=0)  # overwrites rows 9..10
    text = "\n".join([
        dma(sram="ASRAM", ext_addr=DATA, len0=40),
        dma(sram="WSRAM", ext_addr=DATA + 0x400, len0=8),
        "MATMUL wait=DMA " + asm_fields(m1),
        "MATMUL " + asm_fields(m2),
        "MATMUL " + asm_fields(m3),
        "HALT"])
    _, res = run(text, [(DATA, acts), (DATA + 0x400, weights)])
    assert res.ok
    st = res.state
    acc = np.zeros_like(st.acc)
    for f in (m1, m2, m3):
        acc = doc_matmul(st.asram, st.wsram, acc, f, CFG.array_rows)
    assert (st.acc == acc).all()
    assert st.acc[5:17].any() and not st.acc[:5].any() and not st.acc[17:].any()


def test_matmul_wraps_int32():
    """16 lanes of 32895*255 per MATMUL: the 17th accumulation passes 2**31 and wraps."""
    cfg = DEFAULT_CONFIG
    ones = bytes([127]) * cfg.bus_bytes * cfg.array_rows
    f = dict(n0=1, n1=1, a_zp=-32768, w_zp=-128)
    lines = [dma(sram="ASRAM", ext_addr=DATA, len0=1), dma(sram="WSRAM", ext_addr=DATA, len0=cfg.array_rows)]
    lines += ["MATMUL wait=DMA accumulate=0 " + asm_fields(f)]
    lines += ["MATMUL accumulate=1 " + asm_fields(f)] * 16 + ["HALT"]
    _, res = run("\n".join(lines), [(DATA, ones)], cfg)
    assert res.ok
    total = 17 * cfg.array_rows * (127 + 32768) * (127 + 128)
    assert total > 2**31
    assert (res.state.acc[0] == wrap(total, 32)).all()


# -- ACT -----------------------------------------------------------------------------------
def doc_scale(v: int, m: int, sh: int, scale32: bool, double_round: bool) -> int:
    """s of the ACT doc: the spec helper where its REQUIREs hold, the doc formula elsewhere."""
    try:
        if scale32:
            return int(apply_scale_32(v, m, sh, double_round))
        return int(apply_scale_16(v, m, sh))
    except TosaUnpredictable:
        rnd = (1 << (sh - 1)) if sh > 0 else 0
        if double_round and scale32 and sh > 31:
            rnd += (1 << 30) if v >= 0 else -(1 << 30)
        return wrap((v * m + rnd) >> sh, 32)


def doc_act(acc, bias, mul, shift, f):
    out = np.zeros(acc.shape, np.int64)
    for r in range(acc.shape[0]):
        for n in range(acc.shape[1]):
            v = wrap(int(acc[r][n]) + int(bias[n]), 32)
            m = int(mul[n]) if f["scale32"] else wrap(int(mul[n]), 16)
            sh = int(shift[n]) & 63
            s = doc_scale(v, m, sh, bool(f["scale32"]), bool(f["double_round"]))
            out[r][n] = wrap(min(max(s + f["out_zp"], f["clamp_min"]), f["clamp_max"]), 8)
    return out


def random_params(rng, lanes: int, kind: str):
    """(bias, mul, shift) rows: realistic ("spec") or anything a PSRAM word may hold ("any")."""
    if kind == "spec":
        bias = rng.integers(-2**20, 2**20, lanes)
        mul = rng.integers(1 << 30, 2**31, lanes)
        shift = rng.integers(32, 44, lanes)
        return bias, mul, shift
    bias = rng.integers(-2**31, 2**31, lanes)
    mul = rng.integers(-2**31, 2**31, lanes)
    shift = rng.integers(-2**31, 2**31, lanes)
    shift[:4] = [0, 1, 63, 62]            # shifts the spec does not allow, and its maximum
    return bias, mul, shift


ACT_VARIANTS = [
    dict(scale32=1, double_round=0, out_zp=-3, clamp_min=-128, clamp_max=127),
    dict(scale32=1, double_round=1, out_zp=5, clamp_min=-100, clamp_max=90),
    dict(scale32=0, double_round=0, out_zp=0, clamp_min=-128, clamp_max=127),
    dict(scale32=0, double_round=1, out_zp=-20, clamp_min=0, clamp_max=127),   # dr ignored
    dict(scale32=1, double_round=0, out_zp=1000, clamp_min=-1000, clamp_max=1000),  # int8() wraps
    dict(scale32=1, double_round=1, out_zp=0, clamp_min=50, clamp_max=-50),      # min > max
]


@pytest.mark.parametrize("kind", ["spec", "any"])
@pytest.mark.parametrize("variant", ACT_VARIANTS)
def test_act_unit(variant, kind):
    """ACT over full-range accumulators and parameters, on a state prepared directly."""
    cfg = DEFAULT_CONFIG
    rng = np.random.default_rng(5)
    state = NpuState(cfg, b"")
    count, lanes = 24, cfg.array_cols
    acc = rng.integers(-2**31, 2**31, (count, lanes)).astype(np.int32)
    acc[0, :4] = [-2**31, 2**31 - 1, 0, -1]
    bias, mul, shift = random_params(rng, lanes, kind)
    if variant["scale32"] == 0 and kind == "spec":
        mul = rng.integers(1 << 14, 1 << 15, lanes)
        shift = rng.integers(14, 40, lanes)
    state.acc[10:10 + count] = acc
    state.psram[6:9] = np.array([bias, mul, shift]).astype(np.int64).astype(np.int32)
    f = dict(acc_addr=10, count=count, dst_addr=100, param_addr=6, **variant)
    exec_act(state, make("ACT", **f).values)
    expected = doc_act(acc, *state.psram[6:9], f)
    assert (state.asram[100:100 + count].view(np.int8) == expected).all()
    assert not state.asram[:100].any() and not state.asram[100 + count:].any()


@pytest.mark.parametrize("scale32,double_round", [(1, 0), (1, 1), (0, 0)])
def test_act_shifts_the_spec_forbids(scale32, double_round):
    """Shifts 0, 1 and 63 (and 64+, which keep the low 6 bits) follow the doc formula exactly."""
    cfg = SMALL_CONFIG
    state = NpuState(cfg, b"")
    acc = np.array([[5, -7, 1000, -3], [-2**31, 2**31 - 1, 11, -11]], np.int32)
    state.acc[:2] = acc
    state.psram[0:3] = [[0, 0, 0, 0], [1, 3, -1, 1 << 14], [0, 1, 63, 64 + 1]]
    f = dict(acc_addr=0, count=2, dst_addr=0, param_addr=0, out_zp=0, clamp_min=-32768,
             clamp_max=32767, scale32=scale32, double_round=double_round)
    exec_act(state, make("ACT", **f).values)
    expected = doc_act(acc, *state.psram[0:3], f)
    assert (state.asram[:2].view(np.int8) == expected).all()
    assert expected[0, 0] == 5 and expected[0, 1] == wrap((-21 + 1) >> 1, 8)


def test_doc_formula_is_the_spec_where_defined():
    """The ACT doc's claim: inside the REQUIRE range its formula is apply_scale_32/16."""
    rng = np.random.default_rng(6)
    for _ in range(2000):
        sh = int(rng.integers(2, 63))
        m = int(rng.integers(0, 2**31))
        half = 1 << (sh - 1)
        v = int(rng.integers(max(-half, -2**31), min(half, 2**31)))
        for dr in (False, True):
            rnd = half + ((1 << 30 if v >= 0 else -(1 << 30)) if dr and sh > 31 else 0)
            assert wrap((v * m + rnd) >> sh, 32) == int(apply_scale_32(v, m, sh, dr))
        m16 = m >> 16
        r16 = (v * m16 + half) >> sh
        if -2**31 <= r16 < 2**31:
            assert r16 == int(apply_scale_16(v, m16, sh))


def test_act_program_per_channel():
    """MATMUL -> ACT -> DMA_STORE with per-channel parameters loaded by DMA into PSRAM."""
    rng = np.random.default_rng(7)
    acts, weights = random_bytes(rng, 8 * BUS), random_bytes(rng, 4 * BUS)
    bias = rng.integers(-5000, 5000, CFG.array_cols)
    mul = rng.integers(1 << 30, 2**31, CFG.array_cols)
    shift = rng.integers(36, 40, CFG.array_cols)
    params = np.array([bias, mul, shift]).astype("<i4").tobytes()
    act = dict(acc_addr=0, count=8, dst_addr=20, param_addr=1, out_zp=-4, clamp_min=-128,
               clamp_max=127, scale32=1, double_round=1)
    text = "\n".join([
        dma(sram="ASRAM", ext_addr=DATA, len0=8),
        dma(sram="WSRAM", ext_addr=DATA + 0x100, len0=4),
        dma(sram="PSRAM", sram_addr=WPR, ext_addr=DATA + 0x200, len0=3 * WPR),
        "MATMUL wait=DMA n0=8 n1=1 a_stride0=1 a_zp=-1 w_zp=2",
        "ACT wait=MXU " + asm_fields(act),
        dma("DMA_STORE", sram="ASRAM", sram_addr=20, ext_addr=OUT, len0=8, wait="VPU"),
        "HALT"])
    _, res = run(text, [(DATA, acts), (DATA + 0x100, weights), (DATA + 0x200, params)])
    assert res.ok
    st = res.state
    acc = doc_matmul(st.asram, st.wsram, np.zeros_like(st.acc), dict(
        a_addr=0, a_stride0=1, a_stride1=0, n0=8, n1=1, w_addr=0, acc_addr=0, accumulate=0,
        a_zp=-1, w_zp=2), CFG.array_rows)[:8]
    expected = doc_act(acc, bias, mul, shift, act).astype(np.int8)
    got = np.frombuffer(bytes(res.memory[OUT:OUT + 8 * BUS]), np.int8).reshape(8, BUS)
    assert (got == expected).all()


# -- errors ----------------------------------------------------------------------------------
END = CFG.ext_mem_bytes
A, W, C, P = CFG.asram_rows, CFG.wsram_rows, CFG.acc_rows, CFG.psram_rows
ERROR_CASES = [
    # ILLEGAL_INSTRUCTION
    (dma(sram=3, ext_addr=DATA), ErrorCode.ILLEGAL_INSTRUCTION),
    (dma("DMA_STORE", sram="WSRAM", ext_addr=OUT), ErrorCode.ILLEGAL_INSTRUCTION),
    (dma("DMA_STORE", sram="PSRAM", ext_addr=OUT), ErrorCode.ILLEGAL_INSTRUCTION),
    (dma("DMA_STORE", sram=3, ext_addr=OUT + 1), ErrorCode.ILLEGAL_INSTRUCTION),
    (dma(sram=3, ext_addr=DATA + 2, sram_addr=A), ErrorCode.ILLEGAL_INSTRUCTION),
    # DMA_MISALIGNED (checked even for strides a transfer does not use)
    (dma(ext_addr=DATA + 2), ErrorCode.DMA_MISALIGNED),
    (dma(ext_addr=DATA, stride1=6), ErrorCode.DMA_MISALIGNED),
    (dma("DMA_STORE", ext_addr=OUT, stride2=BUS + 1), ErrorCode.DMA_MISALIGNED),
    (dma(ext_addr=END - 2, len0=2), ErrorCode.DMA_MISALIGNED),
    # DMA_OUT_OF_RANGE
    (dma(ext_addr=END - BUS, len0=2), ErrorCode.DMA_OUT_OF_RANGE),
    (dma(ext_addr=0, len1=2, stride1=END), ErrorCode.DMA_OUT_OF_RANGE),
    (dma(ext_addr=DATA, len2=3, stride2=END // 2), ErrorCode.DMA_OUT_OF_RANGE),
    (dma(ext_addr=0xFFFFFFFC, len0=2), ErrorCode.DMA_OUT_OF_RANGE),     # no wrap-around at 2**32
    (dma("DMA_STORE", ext_addr=END - 2 * BUS, len0=3), ErrorCode.DMA_OUT_OF_RANGE),
    (dma(ext_addr=END, sram_addr=A), ErrorCode.DMA_OUT_OF_RANGE),        # before SRAM_OVERFLOW
    # SRAM_OVERFLOW
    (dma(ext_addr=DATA, sram_addr=A - 2, len0=2, pad_a0=1), ErrorCode.SRAM_OVERFLOW),
    (dma(ext_addr=DATA, sram_addr=A - 4, len0=2, len1=2, pad_b1=1), ErrorCode.SRAM_OVERFLOW),
    (dma(sram="WSRAM", ext_addr=DATA, sram_addr=W - 1, len0=2), ErrorCode.SRAM_OVERFLOW),
    (dma(sram="PSRAM", ext_addr=DATA, sram_addr=P * WPR - 1, len0=2), ErrorCode.SRAM_OVERFLOW),
    (dma("DMA_STORE", ext_addr=OUT, sram_addr=A - 1, len0=2), ErrorCode.SRAM_OVERFLOW),
    ("MATMUL n0=1 n1=1 w_addr=%d" % (W - 3), ErrorCode.SRAM_OVERFLOW),
    ("MATMUL n0=1 n1=0 w_addr=%d" % (W - 3), ErrorCode.SRAM_OVERFLOW),  # tile read regardless
    ("MATMUL n0=2 n1=3 a_stride0=1 a_stride1=%d" % (A // 2), ErrorCode.SRAM_OVERFLOW),
    ("MATMUL n0=2 n1=1 a_addr=%d a_stride0=1" % (A - 1), ErrorCode.SRAM_OVERFLOW),
    ("MATMUL n0=2 n1=1 acc_addr=%d" % (C - 1), ErrorCode.SRAM_OVERFLOW),
    ("ACT count=2 acc_addr=%d" % (C - 1), ErrorCode.SRAM_OVERFLOW),
    ("ACT count=2 dst_addr=%d" % (A - 1), ErrorCode.SRAM_OVERFLOW),
    ("ACT count=1 param_addr=%d" % (P - 2), ErrorCode.SRAM_OVERFLOW),
    ("ACT count=0 param_addr=%d" % (P - 2), ErrorCode.SRAM_OVERFLOW),    # params read regardless
]


@pytest.mark.parametrize("line,code", ERROR_CASES)
def test_error_stops_before_any_effect(line, code):
    rng = np.random.default_rng(8)
    text = "\n".join([dma(sram="ASRAM", ext_addr=DATA, len0=4), line, "HALT"])
    prog, res = run(text, [(DATA, random_bytes(rng, 64)), (OUT, random_bytes(rng, 64))])
    assert (res.error_code, res.error_pc, res.instructions_executed, res.stop_pc) == (code, 1, 1, 1)
    assert res.error_message
    assert res.memory == prog.memory_image({})
    st = res.state
    assert st.asram[:4].tobytes() == bytes(prog.memory_image({})[DATA:DATA + 4 * BUS])
    assert not st.asram[4:].any() and not st.wsram.any() and not st.acc.any() and not st.psram.any()


@pytest.mark.parametrize("line", [
    dma(sram_addr=A + 5, len0=0),                        # zero-length transfers touch nothing
    dma("DMA_STORE", sram_addr=A + 5, len2=0, ext_addr=END),
    "MATMUL n0=0 n1=5 a_addr=%d acc_addr=%d" % (A, C),
    "ACT count=0 acc_addr=%d dst_addr=%d" % (C, A),
    dma(sram_addr=A - 1, ext_addr=END - BUS),             # exactly the last word of each
])
def test_boundaries_that_are_not_errors(line):
    _, res = run(line + "\nHALT")
    assert res.ok, res.error_message


def _patched(prog: Program, pc: int, word: int) -> bytearray:
    mem = prog.memory_image({})
    a = prog.program_addr + pc * INSTR_BYTES
    mem[a:a + INSTR_BYTES] = word.to_bytes(INSTR_BYTES, "little")
    return mem


@pytest.mark.parametrize("word", [
    0,                                                    # zeroed memory traps
    63,                                                   # unknown opcode
    int.from_bytes(encode(make("SYNC")), "little") | (1 << 200),   # reserved bit set
])
def test_undecodable_word_is_illegal_when_reached(word):
    prog = program("SYNC\nSYNC\nHALT\nSYNC")
    res = IsaSim(CFG).run(prog, _patched(prog, 1, word), timing=False)
    assert (res.error_code, res.error_pc, res.instructions_executed) == (ErrorCode.ILLEGAL_INSTRUCTION, 1, 1)
    res = IsaSim(CFG).run(prog, _patched(prog, 3, word), timing=False)    # after HALT: never reached
    assert res.ok and res.instructions_executed == 3 and res.stop_pc == 2 and res.error_pc is None


def test_runs_the_image_in_memory_not_the_list():
    prog = program("SYNC\nHALT")
    mem = _patched(prog, 0, int.from_bytes(encode(make(
        "DMA_STORE", ext_addr=OUT, len0=1, len1=1, len2=1)), "little"))
    res = IsaSim(CFG).run(prog, mem, timing=False)
    assert res.ok and bytes(res.memory[OUT:OUT + BUS]) == bytes(BUS)
    assert len(res.memory) == OUT + BUS


def test_programs_longer_than_imem_and_pc_overflow():
    # instructions are fetched from external memory: any length runs
    n = 3 * CFG.imem_rows
    res = IsaSim(CFG).run(Program(CFG, [make("SYNC")] * n + [make("HALT")]))
    assert res.ok and res.instructions_executed == n + 1 and res.cycles > n
    # a LOOP body and the instruction after it must fit in the instruction buffer
    body = [make("SYNC")] * CFG.imem_rows + [make("HALT")]
    fits = Program(CFG, [make("LOOP", count=2, body=CFG.imem_rows - 1)] + body)
    assert IsaSim(CFG).run(fits).ok
    big = Program(CFG, [make("LOOP", count=2, body=CFG.imem_rows)] + body)
    res = IsaSim(CFG).run(big, timing=False)
    assert (res.error_code, res.error_pc, res.instructions_executed) == (ErrorCode.ILLEGAL_INSTRUCTION, 0, 0)
    _, res = run("SYNC\nSYNC")
    assert (res.error_code, res.error_pc, res.instructions_executed, res.stop_pc) == (ErrorCode.PC_OVERFLOW, 2, 2, 2)
    _, res = run("")
    assert (res.error_code, res.error_pc) == (ErrorCode.PC_OVERFLOW, 0)


def test_wrong_configuration_is_refused():
    prog = program("HALT")
    with pytest.raises(Exception, match="compiled for"):
        IsaSim(DEFAULT_CONFIG).run(prog)


def test_trace_disassembles_each_instruction():
    seen = []
    _, res = run(dma(ext_addr=DATA, len0=2) + "\nDMA_STORE len0=1 len1=1 len2=1 ext_addr=1\nHALT",
                 trace=seen.append)
    assert res.trace == seen and len(seen) == 2
    assert seen[0].startswith("    0: DMA_LOAD ext_addr=0x1000 len0=2")
    assert "DMA_MISALIGNED" in seen[1]


# -- program images --------------------------------------------------------------------------
def copy_program(cfg=CFG) -> Program:
    """A program that copies a brick-layout input to the output, with inputs/outputs bound."""
    shape = (1, 3, 2, 7)
    words = 3 * 2 * 2                          # 7 channels = 2 bricks of 4 lanes
    text = "\n".join([dma(ext_addr=DATA, len0=words), dma("DMA_STORE", ext_addr=OUT, len0=words, wait="DMA"),
                      "HALT"])
    return Program(cfg, assemble(text), segments=[Segment("consts", 0x800, bytes(range(40)))],
                   inputs=[TensorBinding("x", shape, "int8", DATA, "brick")],
                   outputs=[TensorBinding("y", shape, "int8", OUT, "brick")], info={"test": 1})


def test_save_load_round_trip_and_run(tmp_path):
    prog = copy_program()
    x = np.random.default_rng(9).integers(-128, 128, (1, 3, 2, 7)).astype(np.int8)
    out1, res1 = run_program(prog, {"x": x}, timing=False)
    path = tmp_path / "copy.npuprog"
    prog.save(path)
    loaded = Program.load(path)
    assert loaded.instructions == prog.instructions and loaded.info == prog.info
    out2, res2 = run_program(loaded, {"x": x}, timing=False)
    assert (out1["y"] == x).all() and (out2["y"] == x).all()
    assert res1.memory == res2.memory
    assert bytes(res2.memory[0x800:0x800 + 40]) == bytes(range(40))


def test_run_program_raises_on_npu_error():
    prog = copy_program()
    prog.instructions[1] = make("DMA_STORE", ext_addr=OUT + 1, len0=1, len1=1, len2=1)
    with pytest.raises(IsaRunError, match="DMA_MISALIGNED at pc 1"):
        run_program(prog, {"x": np.zeros((1, 3, 2, 7), np.int8)}, timing=False)


# -- a convolution as MATMULs over kernel offsets ---------------------------------------------
def conv_program(cfg, h, w, k, stride, pad, in_zp, w_zp, weights, bias, mul, shift, out_zp):
    """CONV2D (Cin = Cout = lanes) as one MATMUL per kernel offset, then ACT."""
    lanes = cfg.bus_bytes
    hp, wp = h + 2 * pad, w + 2 * pad
    oh, ow = (hp - k) // stride + 1, (wp - k) // stride + 1
    wts = DATA + 0x1000
    params = wts + k * k * lanes * lanes
    out = params + 3 * cfg.psram_row_bytes
    lines = [dma(ext_addr=DATA, len0=w, len1=h, stride1=w * lanes, pad_b0=pad, pad_a0=pad,
                 pad_b1=pad, pad_a1=pad, pad_value=in_zp & 0xFF),
             dma(sram="WSRAM", ext_addr=wts, len0=k * k * lanes),
             dma(sram="PSRAM", ext_addr=params, len0=3 * cfg.words_per_wide_row)]
    for i, (ky, kx) in enumerate((ky, kx) for ky in range(k) for kx in range(k)):
        lines.append(f"MATMUL wait={'DMA' if i == 0 else 0} a_addr={ky * wp + kx} a_stride0={stride} "
                     f"a_stride1={stride * wp} n0={ow} n1={oh} w_addr={i * lanes} acc_addr=0 "
                     f"accumulate={int(i > 0)} a_zp={in_zp} w_zp={w_zp}")
    act_dst = hp * wp
    lines.append(f"ACT wait=MXU acc_addr=0 count={oh * ow} dst_addr={act_dst} param_addr=0 "
                 f"out_zp={out_zp} clamp_min=-128 clamp_max=127 scale32=1 double_round=1")
    lines.append(dma("DMA_STORE", sram_addr=act_dst, ext_addr=out, len0=oh * ow, wait="VPU"))
    lines.append("HALT")
    tiles = weights.transpose(0, 1, 3, 2)              # [ky][kx][cin][cout]: WSRAM row = cin
    segs = [Segment("weights", wts, tiles.astype(np.int8).tobytes()),
            Segment("params", params, np.array([bias, mul, shift]).astype("<i4").tobytes())]
    return Program(cfg, assemble("\n".join(lines)), segments=segs,
                   inputs=[TensorBinding("x", (1, h, w, lanes), "int8", DATA, "brick")],
                   outputs=[TensorBinding("y", (1, oh, ow, lanes), "int8", out, "brick")])


@pytest.mark.parametrize("cfg,h,w,k,stride,pad", [
    (SMALL_CONFIG, 6, 5, 3, 1, 1),
    (SMALL_CONFIG, 7, 8, 3, 2, 0),
    (DEFAULT_CONFIG, 5, 6, 2, 1, 0),
])
def test_conv_as_matmuls_equals_numpy(cfg, h, w, k, stride, pad):
    c = random_conv_case(np.random.default_rng(10), h, w, k, cfg.bus_bytes)
    prog = conv_program(cfg, h, w, k, stride, pad, c["in_zp"], c["w_zp"], c["weights"], c["bias"], c["mul"],
                        c["shift"], c["out_zp"])
    outputs, res = run_program(prog, {"x": c["x"]}, timing=False)
    expected = direct_conv(c, k, stride, pad)
    assert (outputs["y"][0] == expected).all()
    assert res.instructions_executed == len(prog.instructions)


# -- hazard checker ---------------------------------------------------------------------------
class FixedTiming:
    """A stand-in timing model returning given half-open (start, end) intervals (not a
    cycle model); sim.npu_timing reports inclusive last cycles, so end - 1 is passed on."""

    def __init__(self, intervals):
        self.intervals = intervals

    def __call__(self, config):
        return self

    def run(self, instructions, stop_at=None, prog_len=None, boot_error=False, **_):
        iv = self.intervals[:len(instructions)]
        per = [SimpleNamespace(issue=s - 1, start=s, end=e - 1) for s, e in iv]
        return SimpleNamespace(total_cycles=max(e for _, e in iv), busy={"DMA": 1}, per_instruction=per)

    run_issued = run         # the stand-in's programs have no LOOP: issue order is index order


HAZARD_PROGRAM = "\n".join([
    dma(ext_addr=DATA, len0=4),                                     # 0: writes ASRAM 0..3
    "MATMUL n0=2 n1=1 a_addr=0 a_stride0=2",                        # 1: reads ASRAM 0, 2
    dma(ext_addr=DATA, sram_addr=1, len0=1),                        # 2: writes ASRAM 1
    dma(ext_addr=DATA, sram_addr=2, len0=1),                        # 3: writes ASRAM 2
    "ACT count=2 dst_addr=1",                                       # 4: reads ACC 0..1, writes ASRAM 1..2
    "HALT"])


@pytest.mark.parametrize("intervals,expected", [
    ([(0, 10), (10, 20), (20, 21), (21, 22), (22, 30), (30, 31)], []),
    ([(0, 10), (5, 20), (20, 21), (21, 22), (22, 30), (30, 31)], [("RAW", "ASRAM", 0, 0, 1)]),
    # DMA writing row 1 during the MATMUL is fine (rows 0 and 2 are read); row 2 is not.
    ([(0, 10), (10, 20), (11, 12), (12, 13), (22, 30), (30, 31)], [("WAR", "ASRAM", 2, 1, 3)]),
    ([(0, 10), (10, 20), (20, 21), (21, 22), (15, 30), (30, 31)],
     [("RAW", "ACC", 0, 1, 4), ("WAW", "ASRAM", 1, 2, 4), ("WAW", "ASRAM", 2, 3, 4)]),
    ([(0, 10), (10, 20), (20, 25), (25, 26), (21, 30), (30, 31)],
     [("WAW", "ASRAM", 1, 2, 4), ("WAW", "ASRAM", 2, 3, 4)]),
    ([(0, 10), (10, 20), (5, 21), (21, 22), (22, 30), (30, 31)], []),   # same unit: not checked
])
def test_hazard_checker(intervals, expected):
    prog = program(HAZARD_PROGRAM)
    res = IsaSim(CFG, check_hazards=True, timing_model=FixedTiming(intervals)).run(prog)
    assert res.ok and res.cycles == 31
    got = [(h.kind, h.memory, h.row, h.earlier_pc, h.later_pc) for h in res.hazards]
    assert got == expected
    assert all(str(h).startswith(h.kind) for h in res.hazards)


def test_hazard_checker_index_sets():
    """Strided row sets on both sides conflict only where they really share a row."""
    even = Footprint(Unit.MXU, reads=[("ASRAM", np.arange(0, 20, 2))])
    odd = Footprint(Unit.DMA, writes=[("ASRAM", np.arange(1, 20, 2))])
    some = Footprint(Unit.VPU, writes=[("ASRAM", np.array([7, 12, 30]))])
    executed = [(0, "a", even), (1, "b", odd), (2, "c", some)]
    hazards = find_hazards(executed, [(0, 10), (0, 10), (5, 6)])
    assert [(h.kind, h.row, h.earlier_pc, h.later_pc) for h in hazards] == [("WAR", 12, 0, 2), ("WAW", 7, 1, 2)]


def test_with_the_timing_model():
    """Cycles and busy counts come from sim/npu_timing.py; the conv's wait masks are sound."""
    pytest.importorskip("sim.npu_timing")
    cfg = SMALL_CONFIG
    rng = np.random.default_rng(11)
    lanes = cfg.bus_bytes
    prog = conv_program(cfg, 6, 5, 3, 1, 1, 0, 0, rng.integers(-128, 128, (3, 3, lanes, lanes)),
                        np.zeros(lanes, int), np.full(lanes, 1 << 30), np.full(lanes, 36), 0)
    x = rng.integers(-128, 128, (1, 6, 5, lanes)).astype(np.int8)
    _, res = run_program(prog, {"x": x}, check_hazards=True)
    assert res.cycles > 0 and res.busy
    assert res.hazards == []
    # Without waits the ACT reads accumulators the last MATMULs are still writing, and the
    # store reads ASRAM rows the ACT is still writing.
    for instr in prog.instructions:
        instr.values["wait"] = 0
    _, res = run_program(prog, {"x": x}, check_hazards=True)
    found = {(h.kind, h.memory, h.later) for h in res.hazards}
    assert ("RAW", "ACC", disassemble_one(prog.instructions[-3])) in found
    assert ("RAW", "ASRAM", disassemble_one(prog.instructions[-2])) in found


def test_cycles_come_from_the_timing_model():
    """The simulator hands the model the instructions reached, the stop and PROG_LEN."""
    timing = pytest.importorskip("sim.npu_timing")
    model = timing.TimingModel(CFG)
    load = dma(ext_addr=DATA, len0=8)
    cases = [
        (load + "\nSYNC wait=DMA\nHALT\nSYNC", dict(), 3),
        (load + "\n" + dma(ext_addr=DATA + 1) + "\nHALT", dict(stop_at=1), 2),   # error at pc 1
        (load + "\nSYNC", dict(), 2),                                            # PC_OVERFLOW
    ]
    for text, stop, reached in cases:
        prog = program(text, [(DATA, bytes(32))])
        res = IsaSim(CFG).run(prog)
        expected = model.run(prog.instructions[:reached], prog_len=len(prog.instructions), **stop)
        assert (res.cycles, res.busy) == (expected.total_cycles, expected.busy) and res.busy["DMA"] > 0
    misaligned = Program(CFG, [make("HALT")], program_addr=CFG.bus_bytes // 2)
    assert IsaSim(CFG).run(misaligned).cycles == 0
