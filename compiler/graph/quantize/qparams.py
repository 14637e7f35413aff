"""Quantization parameters and the integer scale arithmetic of TOSA.

A real value ``x`` is represented by the integer ``q`` with ``x = (q - zero_point) * scale``.
Activations are asymmetric int8 (any zero point), weights symmetric int8 per output channel
(zero point 0, codes in [-127, 127]), biases int32 with ``scale = input_scale * weight_scale``
and zero point 0.

:func:`quantize_multiplier` turns a real scale factor into the ``multiplier``/``shift`` pair
of RESCALE's ``apply_scale_32`` following the TOSA specification's guidance (section 1.10.2
"Precision scaling"): for ``scale = m * 2**-n`` with ``1 <= m < 2``, ``multiplier =
round((1 << 30) * m)`` and ``shift = 30 + n``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tosa_ir import INT_RANGES

INT8_MIN, INT8_MAX = INT_RANGES["int8"]
INT32_MIN, INT32_MAX = INT_RANGES["int32"]


@dataclass
class QParams:
    """How one tensor is quantized.

    Attributes
    ----------
    scale
        float64 array: shape ``()`` for per-tensor, ``(C,)`` for per-channel.
    zero_point
        int64 array broadcastable against ``scale`` (per-tensor in practice).
    dtype
        Integer element type of the quantized tensor ("int8" or "int32").
    axis
        For per-channel activations, the axis of the tensor ``scale`` runs along.  Weight
        parameters are always per *output channel*, whatever the weight layout.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: str = "int8"
    axis: int | None = None

    def __post_init__(self):
        self.scale = np.asarray(self.scale, dtype=np.float64)
        self.zero_point = np.asarray(self.zero_point, dtype=np.int64)

    @property
    def per_channel(self) -> bool:
        return self.scale.ndim > 0 and self.scale.size > 1

    @property
    def zp(self) -> int:
        """The zero point as a Python int (per-channel zero points must all be equal)."""
        flat = self.zero_point.reshape(-1)
        if flat.size != 1 and np.any(flat != flat[0]):
            raise ValueError("per-channel zero points differ: no single value")
        return int(flat[0])

    @property
    def scalar_scale(self) -> float:
        if self.scale.size != 1:
            raise ValueError("per-channel scales have no single value")
        return float(self.scale.reshape(-1)[0])

    def _bcast(self, values: np.ndarray, axis: int | None):
        if not self.per_channel:
            return self.scale.reshape(-1)[0], self.zero_point.reshape(-1)[0]
        axis = self.axis if axis is None else axis
        shape = [1] * values.ndim
        shape[axis] = -1
        return self.scale.reshape(shape), np.broadcast_to(self.zero_point,
                                                         self.scale.shape).reshape(shape)

    def quantize(self, values: np.ndarray, axis: int | None = None) -> np.ndarray:
        """Round to nearest (ties away from zero) and saturate to ``dtype``; int64 result."""
        scale, zp = self._bcast(np.asarray(values), axis)
        q = round_half_away(np.asarray(values, dtype=np.float64) / scale) + zp
        lo, hi = INT_RANGES[self.dtype]
        return np.clip(q, lo, hi).astype(np.int64)

    def dequantize(self, codes: np.ndarray, axis: int | None = None) -> np.ndarray:
        scale, zp = self._bcast(np.asarray(codes), axis)
        return ((np.asarray(codes, dtype=np.int64) - zp) * scale).astype(np.float64)

    def describe(self) -> str:
        if self.per_channel:
            return (f"{self.dtype} per-channel scale [{self.scale.min():.3g}.."
                    f"{self.scale.max():.3g}] zp {self.zero_point.reshape(-1)[0]}")
        return f"{self.dtype} scale {self.scalar_scale:.6g} zp {self.zp}"


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (what C's ``round`` and TFLite do)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def activation_qparams(lo: float, hi: float) -> QParams:
    """Asymmetric int8 parameters covering ``[lo, hi]`` (widened to contain 0).

    Zero must be exactly representable (padding and ReLU rely on it), so the zero point
    is the rounded ``-128 - lo / scale``, then the scale is kept.
    """
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"range [{lo}, {hi}] is not finite")
    if hi - lo > 1e30:
        raise ValueError(f"range [{lo:g}, {hi:g}] is too wide for int8")
    if hi - lo <= 0.0:
        return QParams(np.float64(1.0), np.int64(0))
    scale = (hi - lo) / float(INT8_MAX - INT8_MIN)
    zp = int(np.clip(round_half_away(INT8_MIN - lo / scale), INT8_MIN, INT8_MAX))
    return QParams(np.float64(scale), np.int64(zp))


def symmetric_weight_qparams(absmax: np.ndarray) -> QParams:
    """Per-channel symmetric int8 weights: ``scale = absmax / 127``, zero point 0.

    Channels that are all zero get scale 1 (their codes are 0 whatever the scale).
    """
    absmax = np.asarray(absmax, dtype=np.float64)
    scale = np.where(absmax > 0, absmax / INT8_MAX, 1.0)
    return QParams(scale, np.zeros_like(scale, dtype=np.int64))


def quantize_multiplier(scale) -> tuple[np.ndarray, np.ndarray]:
    """``(multiplier, shift)`` arrays for ``apply_scale_32`` approximating ``scale``.

    ``multiplier * 2**-shift ~= scale`` with ``2**30 <= multiplier < 2**31`` and
    ``2 <= shift <= 62`` (the REQUIREs of apply_scale_32).  Scales too small for a
    normalised multiplier at shift 62 get a smaller multiplier (down to 0: the result is
    then the zero point); scales of ``2**31`` or more cannot be represented.

    Raises
    ------
    ValueError
        A scale is negative, not finite, or too large.
    """
    s = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    if np.any(~np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"rescale factors must be finite and >= 0, got {s}")
    mult = np.zeros(s.shape, dtype=np.int64)
    shift = np.full(s.shape, 62, dtype=np.int64)
    nz = s > 0
    m, e = np.frexp(s[nz])               # s = m * 2**e, 0.5 <= m < 1
    mm = np.round(m * (1 << 31)).astype(np.int64)   # in [2**30, 2**31]
    e = e.copy()
    carry = mm == (1 << 31)               # m rounded up to 1.0
    mm[carry] = 1 << 30
    e[carry] += 1
    sh = 31 - e                           # s ~= mm * 2**-(31 - e)
    if np.any(sh < 2):
        raise ValueError(f"rescale factor {s[nz][sh < 2].max():g} is too large for RESCALE")
    small = sh > 62
    # Denormalised: keep shift at 62 and let the multiplier shrink.
    mm[small] = np.round(s[nz][small] * float(1 << 62)).astype(np.int64)
    sh[small] = 62
    mult[nz], shift[nz] = mm, sh
    return mult.astype(np.int32), shift.astype(np.int8)


def effective_scale(multiplier, shift) -> np.ndarray:
    """The real factor a (multiplier, shift) pair stands for."""
    return np.asarray(multiplier, np.float64) * np.exp2(-np.asarray(shift, np.float64))
