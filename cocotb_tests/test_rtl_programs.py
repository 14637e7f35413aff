"""Whole programs, hand-assembled with isa.asm: a tiled, requantized fully connected layer
(DMA in, K-tiled accumulate on the MXU, ACT, DMA out, with MXU/VPU overlap) on the 4x4 and
the 16x16 NPU, compared with a direct numpy computation of the layer."""
from __future__ import annotations

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG
from isa.asm import assemble
from sim import tosa_helpers

from cocotb_tests.rtl_harness import run_checked


def fc_case(config, m_rows: int, k_tiles: int, n_tiles: int, seed: int):
    """Program, memory and expected int8 output of ``out = requant((X - xzp) @ (W - wzp) + b)``.

    X is M x K int8 row-major, W is K x N int8 row-major, the output M x N int8 row-major;
    K = k_tiles * ROWS, N = n_tiles * COLS.
    """
    rng = np.random.default_rng(seed)
    L = config.bus_bytes
    rows, cols = config.array_rows, config.array_cols
    M, K, N = m_rows, k_tiles * rows, n_tiles * cols
    x = rng.integers(-128, 128, (M, K), dtype=np.int8)
    w = rng.integers(-128, 128, (K, N), dtype=np.int8)
    x_zp, w_zp, out_zp = int(rng.integers(-128, 128)), int(rng.integers(-20, 20)), int(rng.integers(-20, 20))
    bias = rng.integers(-5000, 5000, N).astype(np.int32)
    mul = rng.integers(1 << 30, (1 << 31) - 1, N).astype(np.int32)
    shift = rng.integers(36, 42, N).astype(np.int32)

    # Expected: the layer in numpy, scaling by TOSA's apply_scale_32 (double rounding).
    acc = (x.astype(np.int64) - x_zp) @ (w.astype(np.int64) - w_zp) + bias
    scaled = tosa_helpers.apply_scale_32(acc, mul, shift, True)
    expected = np.clip(scaled + out_zp, -128, 127).astype(np.int8)

    # External memory: program, X, W, parameters (PSRAM rows: bias, mul, shift per n-tile), output.
    X, W, P, OUT = 0x4000, 0x8000, 0xC000, 0x10000
    mem = bytearray(OUT + M * N)
    mem[X:X + x.nbytes] = x.tobytes()
    mem[W:W + w.nbytes] = w.tobytes()
    params = np.stack([np.stack([bias[t * cols:(t + 1) * cols], mul[t * cols:(t + 1) * cols],
                                 shift[t * cols:(t + 1) * cols]]) for t in range(n_tiles)])
    mem[P:P + params.nbytes] = params.astype("<i4").tobytes()

    wpr = config.words_per_wide_row
    lines = [
        # ASRAM[j*M + m] = X[m, j-th K tile]; WSRAM[(t*k_tiles + j)*ROWS + k] = W[j*ROWS + k, t-th N tile]
        f"DMA_LOAD sram=ASRAM sram_addr=0 ext_addr={X} len0=1 len1={M} len2={k_tiles} stride1={K} stride2={L}",
        f"DMA_LOAD sram=WSRAM sram_addr=0 ext_addr={W} len0=1 len1={K} len2={n_tiles} stride1={N} stride2={L}",
        f"DMA_LOAD sram=PSRAM sram_addr=0 ext_addr={P} len0={3 * wpr * n_tiles} len1=1 len2=1",
    ]
    for t in range(n_tiles):
        for j in range(k_tiles):
            wait = "DMA" if (t, j) == (0, 0) else "0"
            lines.append(f"MATMUL a_addr={j * M} a_stride0=1 n0={M} n1=1 w_addr={(t * k_tiles + j) * rows} "
                         f"acc_addr={t * M} accumulate={int(j > 0)} a_zp={x_zp} w_zp={w_zp} wait={wait}")
        # The ACT of tile t overlaps the MATMULs of tile t+1 (different ACC rows).
        lines.append(f"ACT acc_addr={t * M} count={M} dst_addr={k_tiles * M + t * M} param_addr={3 * t} "
                     f"out_zp={out_zp} clamp_min=-128 clamp_max=127 scale32=1 double_round=1 wait=MXU")
    lines.append(f"DMA_STORE sram=ASRAM sram_addr={k_tiles * M} ext_addr={OUT} len0=1 len1={M} "
                 f"len2={n_tiles} stride1={N} stride2={L} wait=VPU")
    lines.append("HALT")
    return assemble("\n".join(lines)), mem, expected, OUT


def test_fc_layer_small(small_rtl):
    instrs, mem, expected, out = fc_case(SMALL_CONFIG, m_rows=13, k_tiles=3, n_tiles=2, seed=1)
    checked = run_checked(small_rtl, SMALL_CONFIG, instrs, mem)
    got = np.frombuffer(checked.rtl.memory[out:out + expected.size], np.int8).reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)


def test_fc_layer_default(default_rtl):
    instrs, mem, expected, out = fc_case(DEFAULT_CONFIG, m_rows=40, k_tiles=3, n_tiles=2, seed=2)
    checked = run_checked(default_rtl, DEFAULT_CONFIG, instrs, mem)
    got = np.frombuffer(checked.rtl.memory[out:out + expected.size], np.int8).reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)
    assert len(np.unique(got)) > 50, "the test data should not saturate"


@pytest.mark.parametrize("m_rows", [1, 3])
def test_fc_short_streams_small(small_rtl, m_rows):
    """Fewer vectors than array rows: back-to-back MATMULs wait for the weight wavefront."""
    instrs, mem, expected, out = fc_case(SMALL_CONFIG, m_rows=m_rows, k_tiles=4, n_tiles=3, seed=3 + m_rows)
    checked = run_checked(small_rtl, SMALL_CONFIG, instrs, mem)
    got = np.frombuffer(checked.rtl.memory[out:out + expected.size], np.int8).reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)
