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

import numpy as np

from compiler.frontends.common.tflite_fixed_point import (  # noqa: F401 (re-exported)
    INT32_MAX, INT32_MIN, quantize_multiplier, round_half_away,
)
from tosa_ir.errors import Unsupported

QRANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


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
