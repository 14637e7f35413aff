"""MXU block tests on the 4x4 NPU: constrained-random MATMUL streams (back to back, short
and long, accumulate chains on one ACC row, extreme zero points, zero and repeating
strides) checked row for row against the numpy model's int32 accumulators."""
from __future__ import annotations

import numpy as np
import pytest

from isa import SMALL_CONFIG, make
from isa.instructions import Sram

from cocotb_tests.rtl_harness import run_checked

CFG = SMALL_CONFIG
BUS = CFG.bus_bytes
ROWS = CFG.array_rows
A_DATA, W_DATA = 0x2000, 0x4000      # 256 ASRAM rows, 128 WSRAM rows of random int8
A_ROWS, W_ROWS = 256, 128
MEM_BYTES = 0x5000


def setup(rng):
    mem = bytearray(MEM_BYTES)
    mem[A_DATA:A_DATA + A_ROWS * BUS] = rng.integers(0, 256, A_ROWS * BUS, dtype=np.uint8).tobytes()
    mem[W_DATA:W_DATA + W_ROWS * BUS] = rng.integers(0, 256, W_ROWS * BUS, dtype=np.uint8).tobytes()
    instrs = [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=A_DATA, len0=A_ROWS, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.WSRAM), sram_addr=0, ext_addr=W_DATA, len0=W_ROWS, len1=1, len2=1),
    ]
    return mem, instrs


def zero_point(rng, bits):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return int(rng.choice([lo, hi, 0, rng.integers(-128, 128), rng.integers(lo, hi + 1)]))


def random_matmul(rng, wait=0):
    n0, n1 = int(rng.integers(0, 7)), int(rng.integers(1, 4))
    if rng.random() < 0.9:
        n0 = max(n0, 1)
    s0 = int(rng.choice([0, 1, 2, rng.integers(0, 9)]))
    s1 = int(rng.choice([0, n0 * s0, rng.integers(0, 20)]))
    a_last = max(n1 - 1, 0) * s1 + max(n0 - 1, 0) * s0
    return make("MATMUL", a_addr=int(rng.integers(0, A_ROWS - a_last)), a_stride0=s0, a_stride1=s1,
                n0=n0, n1=n1, w_addr=int(rng.integers(0, W_ROWS - ROWS + 1)),
                acc_addr=int(rng.integers(0, CFG.acc_rows - n0 * n1 + 1)),
                accumulate=int(rng.random() < 0.6), a_zp=zero_point(rng, 16), w_zp=zero_point(rng, 8),
                wait=wait)


@pytest.mark.parametrize("seed", [11, 12])
def test_matmul_random(small_rtl, seed):
    rng = np.random.default_rng(seed)
    mem, instrs = setup(rng)
    instrs.append(random_matmul(rng, wait=1))      # the first MATMUL waits for the loads
    for _ in range(80):
        instr = random_matmul(rng)
        prev = instrs[-1].values
        n_prev = prev["n0"] * prev["n1"]
        if n_prev and rng.random() < 0.3 and prev["acc_addr"] + n_prev + 16 < CFG.acc_rows:
            # continue on the previous MATMUL's last ACC row (consecutive-cycle updates)
            instr.values["acc_addr"] = prev["acc_addr"] + n_prev - 1
            instr.values["n1"] = 1
            instr.values["accumulate"] = 1
        instrs.append(instr)
    instrs.append(make("HALT"))
    run_checked(small_rtl, CFG, instrs, mem)


def test_matmul_accumulate_chain(small_rtl):
    """Single-vector MATMULs updating one ACC row back to back (the ACC read must see the
    previous write) with varying weight tiles, then longer streams onto the same rows; the
    large zero points drive the int32 sums past the wrap."""
    rng = np.random.default_rng(5)
    mem, instrs = setup(rng)
    for i in range(40):
        instrs.append(make("MATMUL", a_addr=i, a_stride0=1, n0=1, n1=1, w_addr=(3 * i) % (W_ROWS - ROWS),
                           acc_addr=7, accumulate=int(i > 0), a_zp=-32768, w_zp=127 if i % 2 else -128,
                           wait=1 if i == 0 else 0))
    for i in range(30):
        instrs.append(make("MATMUL", a_addr=2 * i, a_stride0=1, a_stride1=0, n0=2, n1=1, w_addr=i,
                           acc_addr=6, accumulate=1, a_zp=32767, w_zp=-128))
    # Streams of >= ROWS vectors whose first ACC row is the previous stream's last: the two
    # updates of that row are on consecutive cycles.
    for i in range(12):
        n0 = ROWS + i % 3
        instrs.append(make("MATMUL", a_addr=5 * i, a_stride0=1, n0=n0, n1=1, w_addr=(7 * i) % (W_ROWS - ROWS),
                           acc_addr=20 + (ROWS - 1) * i, accumulate=1, a_zp=-32768 + i, w_zp=-128 + i))
    instrs.append(make("MATMUL", a_addr=0, a_stride0=1, n0=9, n1=1, w_addr=0, acc_addr=3, accumulate=1,
                       a_zp=0, w_zp=0))
    instrs.append(make("HALT"))
    checked = run_checked(small_rtl, CFG, instrs, mem)
    acc = checked.rtl.srams["acc"].view("<i4")
    assert np.abs(acc[7].astype(np.int64)).max() > 1 << 28, "the chain should reach large sums"


def test_matmul_overlaps_dma_and_waits(small_rtl):
    """A MATMUL that waits for MXU sees the previous results; DMA loads into rows the MXU
    is not reading run in parallel with it."""
    rng = np.random.default_rng(9)
    mem, instrs = setup(rng)
    instrs += [
        make("MATMUL", a_addr=0, a_stride0=1, n0=50, n1=1, w_addr=0, acc_addr=0, wait=1),
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=300, ext_addr=A_DATA, len0=100, len1=1, len2=1),
        make("MATMUL", a_addr=50, a_stride0=1, n0=20, n1=1, w_addr=4, acc_addr=0, accumulate=1),
        make("MATMUL", a_addr=300, a_stride0=1, n0=30, n1=2, a_stride1=30, w_addr=8, acc_addr=100, wait=3),
        make("HALT"),
    ]
    run_checked(small_rtl, CFG, instrs, mem)


# -- type modes: int16 x int8 -> int48, int8 x int4 -> int32 (and int16 x int4) -------------
def random_matmul_mode(rng, wait=0):
    """A MATMUL of a random mode (a_type, w_type) with the same edge cases as
    :func:`random_matmul`: n0/n1 of 0 and 1, strides 0 and overlapping, extreme zero points,
    partial tiles (fewer vectors than array rows)."""
    a_type, w_type = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    p = 2 if a_type else 1
    tile = ROWS // 2 if w_type else ROWS
    n0, n1 = int(rng.choice([0, 1, 1, 2, 3, 5, 7])), int(rng.choice([1, 1, 2, 3]))
    if rng.random() < 0.9:
        n0 = max(n0, 1)
    s0 = int(rng.choice([0, 1, p, rng.integers(0, 9)]))
    s1 = int(rng.choice([0, n0 * s0, rng.integers(0, 20)]))
    a_last = max(n1 - 1, 0) * s1 + max(n0 - 1, 0) * s0 + p - 1
    return make("MATMUL", a_addr=int(rng.integers(0, A_ROWS - a_last)), a_stride0=s0, a_stride1=s1,
                n0=n0, n1=n1, w_addr=int(rng.integers(0, W_ROWS - tile + 1)),
                acc_addr=int(rng.integers(0, CFG.acc_rows - p * n0 * n1 + 1)),
                accumulate=int(rng.random() < 0.6), a_zp=zero_point(rng, 16), w_zp=zero_point(rng, 8),
                a_type=a_type, w_type=w_type, wait=wait)


def mode_stream(rng, count: int) -> list:
    """``count`` random-mode MATMULs streaming back to back; some continue an accumulate
    chain on the previous one's last result (same mode: its rows hold that accumulator type)."""
    instrs = [random_matmul_mode(rng, wait=1)]
    for _ in range(count - 1):
        instr = random_matmul_mode(rng)
        prev = instrs[-1].values
        n_prev = prev["n0"] * prev["n1"]
        p = 2 if prev["a_type"] else 1
        if n_prev and rng.random() < 0.3 and prev["acc_addr"] + p * n_prev + 32 < CFG.acc_rows:
            instr.values.update(acc_addr=prev["acc_addr"] + p * (n_prev - 1), n1=1, accumulate=1,
                                a_type=prev["a_type"])
            instr.values["a_addr"] = min(instr.values["a_addr"], A_ROWS - 1 - 8 * (instr.values["a_stride0"] + 1))
        instrs.append(instr)
    return instrs


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_matmul_modes_random(small_rtl, seed):
    rng = np.random.default_rng(seed)
    mem, instrs = setup(rng)
    instrs += mode_stream(rng, 80) + [make("HALT")]
    modes = {(i.values["a_type"], i.values["w_type"]) for i in instrs if i.name == "MATMUL"}
    assert len(modes) == 4
    run_checked(small_rtl, CFG, instrs, mem)


def test_matmul_modes_edges(small_rtl):
    """Hand-picked edges: every mode with n0 = n1 = 1, a single vector with stride 0 and
    n1 > 1 (the same rows re-read), fewer vectors than rows, exactly ROWS vectors, and the
    mode switching on every instruction of a back-to-back stream, including int16 updates
    of one int48 accumulator on consecutive instructions."""
    rng = np.random.default_rng(31)
    mem, instrs = setup(rng)
    modes = [(a, w) for a in (0, 1) for w in (0, 1)]
    instrs.append(make("SYNC", wait=1))
    for i, (a, w) in enumerate(modes * 3):
        instrs.append(make("MATMUL", a_addr=3 * i, n0=1, n1=1, w_addr=i, acc_addr=10 * i, a_type=a, w_type=w,
                           a_zp=-32768 if i % 2 else 32767, w_zp=-128 if i % 3 else 127))
    for a, w in modes:
        instrs.append(make("MATMUL", a_addr=9, a_stride0=0, a_stride1=0, n0=1, n1=3, w_addr=5, acc_addr=130,
                           a_type=a, w_type=w, accumulate=1))
        instrs.append(make("MATMUL", a_addr=20, a_stride0=2, n0=ROWS, n1=1, w_addr=7, acc_addr=140,
                           a_type=a, w_type=w))
        instrs.append(make("MATMUL", a_addr=40, a_stride0=1, a_stride1=5, n0=1, n1=ROWS - 1, w_addr=2,
                           acc_addr=160, a_type=a, w_type=w, accumulate=1))
    # one int48 accumulator updated by consecutive single-vector MATMULs, weight types alternating
    for i in range(24):
        instrs.append(make("MATMUL", a_addr=i, n0=1, n1=1, w_addr=(5 * i) % (W_ROWS - ROWS), acc_addr=200,
                           accumulate=int(i > 0), a_type=1, w_type=i % 2, a_zp=-32768 + i, w_zp=127 - i))
    # ... and in a LOOP, until the sum leaves int32 (a - a_zp >= 0 and w - w_zp <= 0 throughout)
    instrs += [make("LOOP", count=150, body=2, inc_asram=1),
               make("MATMUL", n0=1, n1=1, acc_addr=200, accumulate=1, a_type=1, a_zp=-32768, w_zp=127),
               make("MATMUL", n0=1, n1=1, w_addr=4, acc_addr=200, accumulate=1, a_type=1, w_type=1,
                    a_zp=-32768, w_zp=127)]
    instrs.append(make("HALT"))
    checked = run_checked(small_rtl, CFG, instrs, mem)
    acc = checked.rtl.srams["acc"].view("<i4")
    assert (acc[201] < -1).all(), "the int48 chain should go far below -2**32"
