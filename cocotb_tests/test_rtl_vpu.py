"""VPU block tests on the 4x4 NPU: constrained-random ACT (bias, scale32/scale16 RESCALE
with and without double rounding, out_zp, clamp) over wide-ranging accumulators, inside
and outside the TOSA REQUIRE ranges, against the numpy model (TOSA apply_scale where the
spec defines the result)."""
from __future__ import annotations

import numpy as np
import pytest

from isa import SMALL_CONFIG, make
from isa.instructions import Sram

from cocotb_tests.rtl_harness import run_checked

CFG = SMALL_CONFIG
BUS = CFG.bus_bytes
COLS = CFG.array_cols
A_DATA, W_DATA, P_DATA = 0x2000, 0x3000, 0x4000
A_ROWS, W_ROWS = 64, 32
PARAM_SETS = CFG.psram_rows // 3
MEM_BYTES = 0x5000


def param_set(rng, kind: str) -> np.ndarray:
    """(3, COLS) int32: bias, multiplier, shift rows."""
    bias = np.where(rng.random(COLS) < 0.75, rng.integers(-(1 << 15), 1 << 15, COLS),
                    rng.integers(-(1 << 31), 1 << 31, COLS, dtype=np.int64))
    if kind == "tosa32":       # inside apply_scale_32's REQUIREs for moderate values
        mul = rng.integers(1 << 30, (1 << 31) - 1, COLS, dtype=np.int64)
        shift = rng.integers(30, 50, COLS, dtype=np.int64)
    elif kind == "tosa16":
        mul = rng.integers(1 << 14, 1 << 15, COLS, dtype=np.int64) | (rng.integers(0, 1 << 16, COLS) << 16)
        shift = rng.integers(10, 40, COLS, dtype=np.int64)
    elif kind == "small":      # small values: bias near 0, mild scaling
        bias = rng.integers(-300, 300, COLS, dtype=np.int64)
        mul = rng.integers(0, 1 << 31, COLS, dtype=np.int64)
        shift = rng.integers(30, 40, COLS, dtype=np.int64)
    else:                      # anything: negative multipliers, shifts 0/1/63, junk high bits
        mul = rng.integers(-(1 << 31), 1 << 31, COLS, dtype=np.int64)
        shift = rng.choice([0, 1, 2, 31, 32, 62, 63, 64 + 35, -1], COLS).astype(np.int64)
    return np.stack([bias, mul, shift]).astype(np.int64).astype(np.int32)


def setup(rng):
    mem = bytearray(MEM_BYTES)
    mem[A_DATA:A_DATA + A_ROWS * BUS] = rng.integers(0, 256, A_ROWS * BUS, dtype=np.uint8).tobytes()
    mem[W_DATA:W_DATA + W_ROWS * BUS] = rng.integers(0, 256, W_ROWS * BUS, dtype=np.uint8).tobytes()
    kinds = ["tosa32", "tosa16", "small", "any"]
    params = np.concatenate([param_set(rng, kinds[i % len(kinds)]) for i in range(PARAM_SETS)])
    mem[P_DATA:P_DATA + params.nbytes] = params.astype("<i4").tobytes()
    words = params.nbytes // BUS
    instrs = [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=A_DATA, len0=A_ROWS, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.WSRAM), sram_addr=0, ext_addr=W_DATA, len0=W_ROWS, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=0, ext_addr=P_DATA, len0=words, len1=1, len2=1),
    ]
    # Accumulators from small to near-wrap magnitudes: 4 rows per zero-point setting.
    for i, (a_zp, w_zp, acc) in enumerate([(0, 0, 0), (-32768, 127, 0), (32767, -128, 0), (100, 3, 0),
                                           (-32768, -128, 1), (-32768, -128, 1), (-32768, -128, 1)]):
        instrs.append(make("MATMUL", a_addr=4 * i, a_stride0=1, n0=4, n1=1, w_addr=4 * i,
                           acc_addr=4 * (i if not acc else 4), accumulate=acc, a_zp=a_zp, w_zp=w_zp,
                           wait=1 if i == 0 else 0))
    return mem, instrs


def random_act(rng, wait=0):
    count = int(rng.integers(1, 12)) if rng.random() < 0.95 else 0
    clamp = sorted(rng.integers(-32768, 32768, 2).tolist())
    clamp_min, clamp_max = rng.choice([(-128, 127), tuple(clamp), (0, 127), (clamp[1], clamp[0])])
    return make("ACT", acc_addr=int(rng.integers(0, 24 - min(count, 23))), count=count,
                dst_addr=int(rng.integers(100, CFG.asram_rows - count)),
                param_addr=3 * int(rng.integers(0, PARAM_SETS)),
                out_zp=int(rng.choice([0, rng.integers(-128, 128), rng.integers(-32768, 32768)])),
                clamp_min=int(clamp_min), clamp_max=int(clamp_max), scale32=int(rng.random() < 0.6),
                double_round=int(rng.random() < 0.5), wait=wait)


@pytest.mark.parametrize("seed", [21, 22])
def test_act_random(small_rtl, seed):
    rng = np.random.default_rng(seed)
    mem, instrs = setup(rng)
    instrs.append(random_act(rng, wait=2))     # wait for the MXU
    for _ in range(60):
        instrs.append(random_act(rng))
    instrs.append(make("HALT"))
    run_checked(small_rtl, CFG, instrs, mem)


def test_act_store_out(small_rtl):
    """ACT output leaves through DMA_STORE after waiting for the VPU."""
    rng = np.random.default_rng(3)
    mem, instrs = setup(rng)
    instrs += [
        make("ACT", acc_addr=0, count=16, dst_addr=200, param_addr=0, out_zp=-3, clamp_min=-128,
             clamp_max=127, scale32=1, double_round=1, wait=2),
        make("DMA_STORE", sram=0, sram_addr=200, ext_addr=0x4800, len0=16, len1=1, len2=1, wait=4),
        make("HALT"),
    ]
    run_checked(small_rtl, CFG, instrs, mem)
