"""TFLite's fixed-point arithmetic shared by the frontends, reproduced bit for bit.

``quantize_multiplier`` is tflite::QuantizeMultiplier (``std::frexp`` + round half away
from zero); the rest is gemmlowp's fixed point as TFLite's reference softmax uses it
(SaturatingRoundingDoublingHighMul, RoundingDivideByPOT, ``exp_on_negative_values``), on
int64 numpy arrays holding int32 values.  Every frontend whose integer softmax must equal
TFLite's reference kernel (compiler/frontends/common/int_softmax.py) builds its tables here.
"""
from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def round_half_away(x: float) -> float:
    """``std::round`` (TfLiteRound): halves away from zero."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """tflite::QuantizeMultiplier: ``real ~= M * 2**(shift - 31)``, M in [2**30, 2**31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(round_half_away(q * (1 << 31)))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return (1 << 31) - 1, 30
    return q_fixed, shift


def srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul (int32 semantics)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    total = ab + nudge
    result = np.where(total >= 0, total >> 31, -((-total) >> 31))  # C++ truncation
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, result)


def rounding_divide_by_pot(x, exponent: int):
    x = np.asarray(x, dtype=np.int64)
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def _exp_on_interval(a):
    """exp(a) for a in [-1/4, 0): gemmlowp exp_on_interval_between_negative_one_quarter_and_0_excl."""
    constant_term = 1895147668
    constant_1_over_3 = 715827883
    x = a + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(srdhm(x4_over_4 + x3, constant_1_over_3) + x2, 1)
    return constant_term + srdhm(constant_term, x + poly)


_EXP_BARREL = [(-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242)]


def exp_on_negative_values_q5(a):
    """gemmlowp exp_on_negative_values for FixedPoint<int32, 5> raw inputs a <= 0 -> Q0.31."""
    a = np.asarray(a, dtype=np.int64)
    frac_bits = 26
    quarter = 1 << (frac_bits - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(a_mod << 5)  # Rescale<0>: exact, |a_mod << 5| < 2**29
    remainder = a_mod - a
    for exponent, multiplier in _EXP_BARREL:
        bit = (remainder & (1 << (frac_bits + exponent))) != 0
        result = np.where(bit, srdhm(result, multiplier), result)
    return np.where(a == 0, INT32_MAX, result)


def softmax_params(beta: float, in_scale: float) -> tuple[int, int, int]:
    """(input_beta_multiplier, input_beta_left_shift, diff_min) of TFLite's reference
    int8 softmax (PreprocessSoftmaxScaling + CalculateInputRadius, 5 integer bits)."""
    real = min(float(beta) * float(in_scale) * (1 << 26), (1 << 31) - 1.0)
    multiplier, left_shift = quantize_multiplier(real)
    radius = math.floor(31.0 * (1 << 26) / (1 << left_shift))
    return multiplier, left_shift, -radius


def softmax_exp_table(beta: float, in_scale: float, diffs: np.ndarray) -> np.ndarray:
    """exp(beta * scale * diff) in Q0.31 as TFLite's reference softmax computes it; 0 for
    differences below diff_min (which TFLite skips)."""
    multiplier, left_shift, diff_min = softmax_params(beta, in_scale)
    diffs = np.asarray(diffs, dtype=np.int64)
    ok = diffs >= diff_min
    rescaled = srdhm(np.where(ok, diffs, 0) << left_shift, multiplier)
    return np.where(ok, exp_on_negative_values_q5(rescaled), 0)
