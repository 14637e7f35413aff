"""TFLite's integer quantization arithmetic, reproduced bit for bit.

The lowering must give the same integers as TFLite's reference kernels, so every
parameter TFLite derives at Prepare time (multipliers, shifts, activation ranges, lookup
tables, softmax constants) is derived here the way TFLite does it: doubles from float32
scales, ``std::frexp`` + round-half-away-from-zero for multipliers, float32 arithmetic
for the 8-bit activation tables, and gemmlowp's fixed-point ``exp_on_negative_values``
for softmax.

Correspondence with TOSA: TFLite's ``MultiplyByQuantizedMultiplier(x, M, s)`` (gemmlowp
``SaturatingRoundingDoublingHighMul`` then ``RoundingDivideByPOT``) equals TOSA
``apply_scale_32(x, M, 31 - s, double_round=true)`` for every int32 ``x`` when
``M >= 0`` (both round the high product half up, then the right shift half away from
zero; TOSA folds the two roundings into one offset).  So a RESCALE with
``rounding_mode=DOUBLE_ROUND``, multiplier ``M`` and shift ``31 - s`` is exact.
"""
from __future__ import annotations

import math

import numpy as np

from tosa_ir.errors import Unsupported

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
QRANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


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


def tosa_shift(tflite_shift: int, where: str) -> int:
    """TOSA RESCALE shift for a TFLite multiplier exponent (see the module docstring)."""
    shift = 31 - tflite_shift
    if not 2 <= shift <= 62:
        raise Unsupported(f"{where}: requantization exponent {tflite_shift} has no TOSA "
                          f"RESCALE shift in [2, 62]")
    return shift


def f32(x) -> np.float32:
    return np.float32(x)


def activation_range(act: str, scale: float, zp: int, dtype: str, where: str) -> tuple[int, int]:
    """tflite::CalculateActivationRangeQuantized: the clamp of a fused activation."""
    qmin, qmax = QRANGE[dtype]

    def quantize(value: float) -> int:
        # zero_point + static_cast<int32_t>(TfLiteRound(f / scale)), in float.
        return zp + int(round_half_away(float(f32(value) / f32(scale))))

    if act == "NONE":
        return qmin, qmax
    if act == "RELU":
        return max(qmin, quantize(0.0)), qmax
    if act == "RELU6":
        return max(qmin, quantize(0.0)), min(qmax, quantize(6.0))
    if act == "RELU_N1_TO_1":
        return max(qmin, quantize(-1.0)), min(qmax, quantize(1.0))
    raise Unsupported(f"{where}: fused activation {act} is not supported")


def relu_x_range(lo: float, hi: float | None, scale: float, zp: int, dtype: str) -> tuple[int, int]:
    """The clamp of TFLite's standalone quantized RELU / RELU6 / RELU_N1_TO_1 (QuantizedReluX):
    ``zero_point + (int32)roundf(act / scale)``, limited to the type range."""
    qmin, qmax = QRANGE[dtype]

    def q(value):
        return zp + int(round_half_away(float(f32(value) / f32(scale))))

    return max(qmin, q(lo)), (qmax if hi is None else min(qmax, q(hi)))


# ---------------------------------------------------------------------------------------
# 8-bit lookup tables (LOGISTIC, TANH): tflite::LUTPopulate, float32 arithmetic.
def _expf(x: np.ndarray) -> np.ndarray:
    # The correctly rounded float32 result (what glibc's expf returns).
    return np.exp(x.astype(np.float64)).astype(np.float32)


def _sigmoid_f32(x: np.ndarray) -> np.ndarray:
    one = np.float32(1.0)
    return one / (one + _expf(-x))


def _tanh_f32(x: np.ndarray) -> np.ndarray:
    return np.tanh(x.astype(np.float64)).astype(np.float32)


TRANSFORMS = {"LOGISTIC": _sigmoid_f32, "TANH": _tanh_f32}


def lut_8bit(func: str, in_scale: float, in_zp: int, out_scale: float, out_zp: int,
             dtype: str) -> np.ndarray:
    """Output code for every input code ``qmin..qmax`` of an 8-bit type (int64 array)."""
    qmin, qmax = QRANGE[dtype]
    vals = np.arange(qmin, qmax + 1, dtype=np.int64)
    dequantized = f32(in_scale) * (vals - in_zp).astype(np.float32)
    transformed = TRANSFORMS[func](dequantized)
    scaled = transformed * (np.float32(1.0) / f32(out_scale))
    rescaled = np.sign(scaled) * np.floor(np.abs(scaled.astype(np.float64)) + 0.5)
    return np.clip(rescaled.astype(np.int64) + out_zp, qmin, qmax)


# ---------------------------------------------------------------------------------------
# gemmlowp fixed point on int64 arrays holding int32 values.
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
