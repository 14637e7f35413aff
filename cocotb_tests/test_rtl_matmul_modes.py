"""MATMUL's type modes (int16 x int8 -> int48, int8 x int4 -> int32, int16 x int4, and
int8 x int8 alongside) on the RTL in lockstep with the ISA simulator (itself checked
against the MATMUL doc and the reference interpreter in tests/test_isa_matmul_modes.py):
every external-memory byte, every scratchpad row, CYCLES and the busy counters agree.
Whole layer-like programs (DMA, MATMUL chains over input-channel tiles with a LOOP,
VRESCALE of the int48 accumulators, ACT, DMA_STORE) on the 4x4 and the 16x16 NPU, the
random mode streams of cocotb_tests/test_rtl_mxu.py, and int48 wrapping."""
from __future__ import annotations

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, make
from isa.instructions import ErrorCode, Sram, ValuOp, VecMem, VecType

from cocotb_tests import test_rtl_mxu
from cocotb_tests.rtl_harness import lockstep

CFG = SMALL_CONFIG
ASRAM, ACC, PSRAM = int(VecMem.ASRAM), int(VecMem.ACC), int(VecMem.PSRAM)




def layer_program(rng, cfg, n: int = 10, k_tiles: int = 3):
    """A 1x1 convolution of ``n`` pixels over ``k_tiles`` input-channel tiles in each mode:
    the first tile overwrites the accumulators, a LOOP accumulates the others; int48
    results are rescaled by VRESCALE (to int16 and to int8), int32 ones by ACT; all stored."""
    rows, bus, wpr = cfg.array_rows, cfg.bus_bytes, cfg.words_per_wide_row
    a16, a8 = 0, 2 * n * k_tiles                   # ASRAM: int16 inputs, int8 inputs
    out = a8 + n * k_tiles                          # ASRAM results: 16x8 (int16), 8x4, 8x8, 16x4
    w8, w4 = 0, rows * k_tiles                      # WSRAM: int8 tiles, int4 tiles
    DATA = 0x2000
    sizes = {"a16": 2 * n * k_tiles * bus, "a8": n * k_tiles * bus, "w8": rows * k_tiles * bus,
             "w4": rows // 2 * k_tiles * bus}
    addr, at = {}, DATA
    for key, size in sizes.items():
        addr[key] = at
        at += size
    addr["params"], out_ext = at, at + 5 * wpr * bus
    mem = bytearray(out_ext + 5 * n * bus)
    for key in sizes:
        mem[addr[key]:addr[key] + sizes[key]] = rng.integers(0, 256, sizes[key], dtype=np.uint8).tobytes()
    params = np.zeros((5, cfg.array_cols), "<i4")
    params[0] = rng.integers(1 << 13, 1 << 15, cfg.array_cols)   # VRESCALE multipliers (16-bit)
    lg = rows.bit_length() - 1                                    # scales keep most results unsaturated
    params[1] = 24 + lg                                           # VRESCALE shift
    params[2] = rng.integers(-1000, 1000, cfg.array_cols)        # ACT bias, multiplier, shift
    params[3] = rng.integers(1 << 29, 1 << 30, cfg.array_cols)
    params[4] = 41 + lg
    mem[addr["params"]:addr["params"] + params.nbytes] = params.tobytes()

    def load(sram, sram_addr, key):
        return make("DMA_LOAD", sram=int(sram), sram_addr=sram_addr, ext_addr=addr[key],
                    len0=sizes[key] // bus, len1=1, len2=1)

    instrs = [load(Sram.ASRAM, a16, "a16"), load(Sram.ASRAM, a8, "a8"), load(Sram.WSRAM, w8, "w8"),
              load(Sram.WSRAM, w4, "w4"),
              make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=0, ext_addr=addr["params"], len0=5 * wpr,
                   len1=1, len2=1)]
    # (a_type, w_type, first input row, rows per vector, weight tile base, tile rows, ACC base, zero points)
    modes = [(1, 0, a16, 2, w8, rows, 0, 0, 0), (0, 1, a8, 1, w4, rows // 2, 2 * n, -3, 0),
             (0, 0, a8, 1, w8, rows, 3 * n, 5, -2), (1, 1, a16, 2, w4, rows // 2, 4 * n, 0, 0)]
    for i, (at_, wt, a0, p, wb, tile, acc, azp, wzp) in enumerate(modes):
        common = dict(a_stride0=p, n0=n, n1=1, acc_addr=acc, a_type=at_, w_type=wt, a_zp=azp, w_zp=wzp)
        instrs.append(make("MATMUL", a_addr=a0, w_addr=wb, accumulate=0, wait=1 if i == 0 else 0, **common))
        instrs.append(make("LOOP", count=k_tiles - 1, body=1, inc_asram=p * n, inc_wsram=tile))
        instrs.append(make("MATMUL", a_addr=a0 + p * n, w_addr=wb + tile, accumulate=1, **common))
    rescale = dict(n0=n, n1=1, a_mem=ACC, a_stride0=2, d_mem=ASRAM, in_type=int(VecType.INT48),
                   param_addr=0, per_channel=1, scale32=0)
    act = dict(count=n, param_addr=2, clamp_min=-128, clamp_max=127, scale32=1, double_round=1)
    instrs += [
        make("VRESCALE", a_addr=0, d_addr=out, d_stride0=2, out_type=int(VecType.INT16), wait=2, **rescale),
        make("ACT", acc_addr=2 * n, dst_addr=out + 2 * n, out_zp=3, **act),
        make("ACT", acc_addr=3 * n, dst_addr=out + 3 * n, out_zp=-7, **act),
        make("VRESCALE", a_addr=4 * n, d_addr=out + 4 * n, d_stride0=1, out_type=int(VecType.INT8), **rescale),
        make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=out, ext_addr=out_ext, len0=5 * n, len1=1, len2=1,
             wait=4),
        make("HALT"),
    ]
    return instrs, mem


def test_layer_program_small(small_rtl):
    instrs, mem = layer_program(np.random.default_rng(41), CFG)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    assert len(set(rtl.memory[-5 * 10 * CFG.bus_bytes:])) > 50       # real results were stored


def test_layer_program_default(default_rtl):
    instrs, mem = layer_program(np.random.default_rng(42), DEFAULT_CONFIG, n=20)
    rtl, _ = lockstep(default_rtl, DEFAULT_CONFIG, instrs, mem)
    assert len(set(rtl.memory[-5 * 20 * DEFAULT_CONFIG.bus_bytes:])) > 200


@pytest.mark.parametrize("seed", [51, 52])
def test_mode_streams_vs_isa_sim(small_rtl, seed):
    rng = np.random.default_rng(seed)
    mem, instrs = test_rtl_mxu.setup(rng)
    instrs += test_rtl_mxu.mode_stream(rng, 60) + [make("HALT")]
    lockstep(small_rtl, CFG, instrs, mem)


def test_matmul_int48_wraps(small_rtl):
    """An int48 accumulator preloaded by VALU COPY just below 2**47 and one just above
    -2**47, then the extreme products accumulated in a LOOP until both wrap at 48 bits
    (int8 and int4 weights onto the first, the most negative product onto the second)."""
    rows, bus, wpr = CFG.array_rows, CFG.bus_bytes, CFG.words_per_wide_row
    step = rows * 32768 * 128 + rows * 32768 * 8          # -32768 x -128, then x -8 (int4)
    count = 40
    pre = [(1 << 47) - 1 - (count // 2) * step, -(1 << 47) + 5]
    acts = np.concatenate([np.full(rows, -32768), np.full(rows, 32767)]).astype("<i2").tobytes()
    psram = np.array([[v & 0xFFFFFFFF] * CFG.array_cols for v in (pre[0], pre[0] >> 32, pre[1], pre[1] >> 32)],
                     np.int64).astype(np.uint64).astype(np.uint32).tobytes()
    A, W, P = 0x2000, 0x3000, 0x4000
    mem = bytearray(0x5000)
    mem[A:A + len(acts)] = acts
    mem[W:W + rows * bus] = bytes([0x80]) * (rows * bus)                              # int8 -128
    mem[W + rows * bus:W + rows * bus + rows // 2 * bus] = bytes([0x88]) * (rows // 2 * bus)  # int4 -8
    mem[P:P + len(psram)] = psram
    instrs = [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=A, len0=4, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.WSRAM), sram_addr=0, ext_addr=W, len0=rows + rows // 2, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=0, ext_addr=P, len0=4 * wpr, len1=1, len2=1),
        make("VALU", op=int(ValuOp.COPY), dtype=int(VecType.INT32), n0=4, n1=1, a_mem=PSRAM, a_stride0=1,
             d_mem=ACC, d_stride0=1, wait=1),
        make("LOOP", count=count, body=3, wait=4),
        make("MATMUL", n0=1, n1=1, accumulate=1, a_type=1),
        make("MATMUL", n0=1, n1=1, accumulate=1, a_type=1, w_addr=rows, w_type=1),
        make("MATMUL", a_addr=2, n0=1, n1=1, accumulate=1, a_type=1, acc_addr=2, a_zp=-32768, w_zp=127),
        make("HALT"),
    ]
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    acc = rtl.srams["acc"].view("<i4").astype(np.int64)
    got = [(acc[r + 1] << 32) + (acc[r] & 0xFFFFFFFF) for r in (0, 2)]
    up, down = count * step, count * rows * 65535 * -255
    assert pre[0] + up >= 1 << 47 and pre[1] + down < -(1 << 47)
    assert (got[0] == pre[0] + up - (1 << 48)).all() and (got[1] == pre[1] + down + (1 << 48)).all()


@pytest.mark.parametrize("bad", [
    dict(a_addr=CFG.asram_rows - 1, a_type=1),                  # an int16 vector's second row
    dict(acc_addr=CFG.acc_rows - 3, n0=2, a_type=1),            # two ACC rows per result
    dict(w_addr=CFG.wsram_rows - CFG.array_rows // 2 + 1, w_type=1, n0=0),   # the int4 tile
])
def test_mode_errors(small_rtl, bad):
    """The rows the modes add are checked: the NPU stops with SRAM_OVERFLOW at the same
    instruction and cycle as the ISA simulator, after the work before it."""
    rng = np.random.default_rng(61)
    mem, instrs = test_rtl_mxu.setup(rng)
    ok = dict(a_addr=CFG.asram_rows - 2, acc_addr=CFG.acc_rows - 4, w_addr=CFG.wsram_rows - CFG.array_rows // 2,
              n0=2, n1=1, a_stride0=0, a_type=1, w_type=1)
    instrs += [make("MATMUL", wait=1, **ok), make("MATMUL", **{**ok, "n0": 1, **bad}), make("HALT")]
    _, ref = lockstep(small_rtl, CFG, instrs, mem, expect=ErrorCode.SRAM_OVERFLOW)
    assert ref.error_pc == len(instrs) - 2          # the first MATMUL, at every limit, passes
