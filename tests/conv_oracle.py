"""A random int8 convolution case and its direct numpy convolution, the oracle of the
hand-written conv programs of tests/test_isa_sim.py and tests/test_isa_loops.py (tests/ is
not a package: import as ``from conv_oracle import ...`` with tests/ on sys.path)."""
from __future__ import annotations

import numpy as np

from sim.tosa_helpers import apply_scale_32

IN_ZP, W_ZP, OUT_ZP = -5, 3, 7


def random_conv_case(rng, h: int, w: int, k: int, lanes: int) -> dict:
    """Input ``x`` (1, h, w, lanes), weights [ky][kx][cout][cin], per-channel bias, multiplier
    and shift (scale32), and the zero points."""
    return {
        "x": rng.integers(-128, 128, (1, h, w, lanes)).astype(np.int8),
        "weights": rng.integers(-128, 128, (k, k, lanes, lanes)).astype(np.int8),
        "bias": rng.integers(-2000, 2000, lanes),
        "mul": rng.integers(1 << 30, 2**31, lanes),
        "shift": rng.integers(40, 44, lanes),
        "in_zp": IN_ZP, "w_zp": W_ZP, "out_zp": OUT_ZP,
    }


def direct_conv(case: dict, k: int, stride: int, pad: int) -> np.ndarray:
    """The int8 output (oh, ow, lanes): pad with the input zero point, subtract zero points,
    slide, add the bias, apply_scale_32 with double rounding, add the output zero point, clip."""
    x = case["x"][0].astype(np.int64) - case["in_zp"]
    xp = np.pad(x, ((pad, pad), (pad, pad), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(0, 1))[::stride, ::stride]
    acc = np.einsum("yxcij,ijoc->yxo", win, case["weights"].astype(np.int64) - case["w_zp"]) + case["bias"]
    scaled = apply_scale_32(acc, case["mul"], case["shift"], True)
    return np.clip(scaled + case["out_zp"], -128, 127).astype(np.int8)
