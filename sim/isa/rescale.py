"""The scaling step of ACT and VRESCALE: TOSA apply_scale_32/16, extended to every input.

The ACT and VRESCALE docs (isa/instructions.py) define, for every lane value ``v`` (int32;
VRESCALE in 16-bit mode: int48), multiplier ``m`` (int32, or int16 in 16-bit mode) and
shift ``sh`` (0..63)::

    rnd = sh > 0 ? 1 << (sh-1) : 0
    if double_round and scale32 and sh > 31: rnd += v >= 0 ? 1<<30 : -(1<<30)
    s = int32((int64(v)*m + rnd) >> sh)                    (64-bit, wrapping)

This is the spec's apply_scale_32/16 with the REQUIREs dropped, so the arithmetic is not
written here: it is the project's one implementation of those functions,
sim/tosa_helpers.py, called with a ``require`` that accepts everything (the helpers'
documented unchecked mode).  For ``2 <= sh <= 62`` the helpers' formula is the doc's
whether or not the spec's REQUIREs on the multiplier's sign and the value range hold
(outside them the spec says "unpredictable"; the hardware still computes the formula, and
``int32()`` keeps the low 32 bits).

What remains here is the ISA's own extension: shifts 0, 1 and 63, which the spec never
allows (the helpers clamp the shift to 2..62), evaluated from the doc's formula.  Only
there can the 64-bit sum wrap (``sh = 63``, ``v = m = -2**31``, single rounding:
``2**62 + 2**62``), which the doc defines as wrapping and numpy's int64 does.
"""
from __future__ import annotations

import numpy as np

from sim.tosa_helpers import apply_scale_16, apply_scale_32


def _unchecked(cond, text: str) -> None:
    """A ``require`` that accepts everything: the ACT result is defined beyond the spec's."""


def _outside_spec_shifts(value: np.ndarray, mul: np.ndarray, shift: np.ndarray,
                         double_round: bool) -> np.ndarray:
    """The doc's formula, for lanes whose shift the spec does not allow (0, 1, 63)."""
    v = value.astype(np.int64)
    sh = np.broadcast_to(shift.astype(np.int64), v.shape)
    rnd = np.where(sh > 0, np.left_shift(np.int64(1), np.maximum(sh, 1) - 1), 0)
    if double_round:
        rnd = rnd + np.where(sh > 31, np.where(v >= 0, 1 << 30, -(1 << 30)), 0)
    with np.errstate(over="ignore"):
        return np.right_shift(v * mul.astype(np.int64) + rnd, sh)


def rescale(value: np.ndarray, mul: np.ndarray, shift: np.ndarray, scale32: bool,
            double_round: bool) -> np.ndarray:
    """``s`` of the ACT/VRESCALE docs for ``value`` of shape (rows, lanes): int32 values,
    or int48 ones with ``scale32=False`` (the 64-bit products cannot overflow either way).

    ``mul`` (int32 for ``scale32``, else int16) and ``shift`` (0..63) are per lane, shape
    (lanes,).  ``double_round`` only matters with ``scale32``.  Returns int32.
    """
    double_round = bool(double_round) and scale32
    if scale32:
        wide = apply_scale_32(value, mul, shift, double_round, require=_unchecked)
    else:
        wide = apply_scale_16(value, mul, shift, require=_unchecked)
    outside = (shift < 2) | (shift > 62)
    if outside.any():
        wide = np.where(outside, _outside_spec_shifts(value, mul, shift, double_round), wide)
    return wide.astype(np.int32)      # int32(): two's complement truncation


def act_output(value: np.ndarray, mul: np.ndarray, shift: np.ndarray, v: dict) -> np.ndarray:
    """ACT's output stage (its doc, from ``v = int32(acc + bias)`` on), which VDWCONV ends
    with too: the scaling of ``value`` (rows, lanes) by the parameter rows ``mul`` and
    ``shift`` (16-bit multipliers: their low half), plus ``out_zp``, clamped to
    ``[clamp_min, clamp_max]`` (int64; the caller narrows to int8).  ``v``: the instruction's
    fields (scale32, double_round, out_zp, clamp_min, clamp_max)."""
    scale32 = bool(v["scale32"])
    mul = mul.astype(np.int32) if scale32 else mul.astype(np.int16)
    s = rescale(value, mul, shift & 63, scale32, bool(v["double_round"]))
    return np.minimum(np.maximum(s.astype(np.int64) + v["out_zp"], v["clamp_min"]), v["clamp_max"])
