"""The TOSA specification's integer helper functions, vectorised over numpy arrays.

One implementation for the whole project: the reference interpreter, the ISA simulator and
the compiler call these, so a rounding detail is decided here and nowhere else.  Every
function follows the pseudocode of the TOSA specification (seeds/tosa-spec.txt sections
1.10 "Integer Behavior" and 4.3 "General Pseudocode Helpers") bit for bit.

Conventions
-----------
* Arguments are numpy arrays or Python/numpy scalars; they broadcast against each other.
  Results are ``np.int64`` arrays (int48 and int32 values fit), or ``bool`` for masks.
* Element types are named as in the spec / ``tosa_ir.graph.DTYPES``: "int4", "int8",
  "int16", "int32", "int48", "int64", "uint8", "uint16", "bool".
* REQUIRE checks go through ``require(cond, text)``: ``cond`` is a bool or a boolean array
  that must hold everywhere.  Pass the operator's ``OpContext.require`` so the error names
  the operator; the default raises :class:`tosa_ir.TosaUnpredictable` naming the helper.
  A ``require`` that does not raise makes the helper return its unchecked result (for
  callers that only want the masks, e.g. to count violations).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tosa_ir import INT_RANGES, TosaUnpredictable

Require = Callable[[object, str], None]

# Bit width of each integer type, for truncation (static_cast / truncate).
BITS = {"bool": 1, "int4": 4, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16,
        "int32": 32, "int48": 48, "int64": 64, "shape": 64}
UNSIGNED_OF = {"int8": "uint8", "int16": "uint16", "uint8": "uint8", "uint16": "uint16"}

INT32_MIN, INT32_MAX = INT_RANGES["int32"]
INT64_MIN, INT64_MAX = INT_RANGES["int64"]


def _default_require(name: str) -> Require:
    def require(cond, text: str) -> None:
        if not bool(np.all(cond)):
            raise TosaUnpredictable(name, "REQUIRE", text)
    return require


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


# -- type ranges ---------------------------------------------------------------------
def minimum_s(dtype: str) -> int:
    """minimum_s<T>: smallest value of ``dtype`` read as signed (uint types: 0)."""
    return INT_RANGES["int64" if dtype == "shape" else dtype][0]


def maximum_s(dtype: str) -> int:
    return INT_RANGES["int64" if dtype == "shape" else dtype][1]


def minimum_u(dtype: str) -> int:
    """minimum_u<T>: 0 (make_unsigned is only defined for 8 and 16-bit types)."""
    return INT_RANGES[UNSIGNED_OF[dtype]][0]


def maximum_u(dtype: str) -> int:
    return INT_RANGES[UNSIGNED_OF[dtype]][1]


def in_range(x, dtype: str) -> np.ndarray:
    """Boolean mask: ``x`` lies in the value range of ``dtype``."""
    lo, hi = INT_RANGES["int64" if dtype == "shape" else dtype]
    x = np.asarray(x)
    return (x >= lo) & (x <= hi)


def saturate(x, dtype: str) -> np.ndarray:
    """Clip to the range of ``dtype`` (the spec's apply_clip to minimum/maximum<T>)."""
    lo, hi = INT_RANGES["int64" if dtype == "shape" else dtype]
    return np.clip(_i64(x), lo, hi)


def wrap(x, dtype: str) -> np.ndarray:
    """Two's complement truncation to ``dtype`` (static_cast / truncate to fewer bits).

    Unsigned types keep the low bits as a non-negative value.
    """
    bits = BITS[dtype]
    x = _i64(x)
    if bits >= 64:
        return x
    mask = (1 << bits) - 1
    if dtype.startswith("uint") or dtype == "bool":
        return x & mask
    half = 1 << (bits - 1)
    return ((x + half) & mask) - half


def sign_extend(x, from_dtype: str) -> np.ndarray:
    """Read the low bits of ``x`` as a signed ``from_dtype`` value."""
    base = from_dtype.replace("uint", "int")
    return wrap(x, base)


def zero_extend(x, from_dtype: str) -> np.ndarray:
    """Read the low bits of ``x`` as an unsigned value of the width of ``from_dtype``."""
    bits = BITS[from_dtype]
    x = _i64(x)
    return x if bits >= 64 else x & ((1 << bits) - 1)


# -- arithmetic helpers (4.3.1) --------------------------------------------------------
def _add_overflows_int64(a, b, c) -> np.ndarray:
    # Signed overflow of a wrapped int64 add: operands agree in sign, result does not.
    return ((a >= 0) == (b >= 0)) & ((c >= 0) != (a >= 0))


def apply_add_s(a, b, dtype: str, require: Require | None = None) -> np.ndarray:
    """apply_add_s<dtype>: a + b, REQUIRE the sum fits ``dtype``."""
    require = require or _default_require("apply_add_s")
    a, b = _i64(a), _i64(b)
    with np.errstate(over="ignore"):
        c = a + b
    if BITS[dtype] >= 64:
        require(~_add_overflows_int64(a, b, c), f"apply_add_s<{dtype}> overflow")
    else:
        require(in_range(c, dtype), f"apply_add_s<{dtype}>: result out of {dtype} range")
    return c


def apply_sub_s(a, b, dtype: str, require: Require | None = None) -> np.ndarray:
    """apply_sub_s<dtype>: a - b, REQUIRE the difference fits ``dtype``."""
    require = require or _default_require("apply_sub_s")
    a, b = _i64(a), _i64(b)
    with np.errstate(over="ignore"):
        c = a - b
    if BITS[dtype] >= 64:
        # a - b overflows iff a and -b agree in sign and the result does not.
        require(~(((a >= 0) != (b >= 0)) & ((c >= 0) != (a >= 0))),
                f"apply_sub_s<{dtype}> overflow")
    else:
        require(in_range(c, dtype), f"apply_sub_s<{dtype}>: result out of {dtype} range")
    return c


def apply_add_u(a, b, dtype: str, require: Require | None = None) -> np.ndarray:
    """apply_add_u<dtype>: zero-extended a + b, REQUIRE the sum fits unsigned ``dtype``."""
    require = require or _default_require("apply_add_u")
    c = zero_extend(a, dtype) + zero_extend(b, dtype)
    require(c <= (1 << BITS[dtype]) - 1, f"apply_add_u<{dtype}>: result out of range")
    return wrap(c, dtype)


def apply_sub_u(a, b, dtype: str, require: Require | None = None) -> np.ndarray:
    """apply_sub_u<dtype>: zero-extended a - b, REQUIRE no borrow."""
    require = require or _default_require("apply_sub_u")
    c = zero_extend(a, dtype) - zero_extend(b, dtype)
    require(c >= 0, f"apply_sub_u<{dtype}>: result out of range")
    return wrap(c, dtype)


def apply_mul_s(a, b, dtype: str) -> np.ndarray:
    """apply_mul_s<dtype>: the product truncated to ``dtype`` (no REQUIRE in the spec)."""
    with np.errstate(over="ignore"):
        return wrap(_i64(a) * _i64(b), dtype)


def apply_intdiv_s(a, b, dtype: str, require: Require | None = None) -> np.ndarray:
    """apply_intdiv_s<dtype>: a / b truncated toward zero, REQUIRE the quotient fits.

    The caller checks ``b != 0`` (a REQUIRE of INTDIV itself); zero divisors give 0 here.
    """
    require = require or _default_require("apply_intdiv_s")
    a, b = _i64(a), _i64(b)
    safe_b = np.where(b == 0, 1, b)
    with np.errstate(over="ignore"):
        q = np.abs(a) // np.abs(safe_b)
        c = np.where((a < 0) != (safe_b < 0), -q, q)
    require(in_range(c, dtype), f"apply_intdiv_s<{dtype}>: result out of {dtype} range")
    return c


def apply_arith_rshift(a, b, dtype: str) -> np.ndarray:
    """apply_arith_rshift: sign_extend<int32>(a) >> b, cast back to ``dtype``."""
    return wrap(_i64(a) >> _i64(b), dtype)


def apply_logical_rshift(a, b, dtype: str) -> np.ndarray:
    """apply_logical_rshift: zero_extend<uint32>(a) >> b, cast back to ``dtype``."""
    return wrap(zero_extend(a, "int32") >> _i64(b), dtype)


def apply_max_s(a, b) -> np.ndarray:
    """apply_max_s (integer version)."""
    return np.maximum(_i64(a), _i64(b))


def apply_min_s(a, b) -> np.ndarray:
    return np.minimum(_i64(a), _i64(b))


def apply_clip_s(value, min_val, max_val, require: Require | None = None) -> np.ndarray:
    """apply_clip_s: REQUIRE(min_val <= max_val), then max then min."""
    require = require or _default_require("apply_clip_s")
    min_val, max_val = _i64(min_val), _i64(max_val)
    require(min_val <= max_val, "apply_clip_s: min_val <= max_val")
    return np.minimum(np.maximum(_i64(value), min_val), max_val)


def apply_clip_u(value, min_val, max_val, require: Require | None = None) -> np.ndarray:
    """apply_clip_u: as apply_clip_s on values already zero-extended by the caller."""
    require = require or _default_require("apply_clip_u")
    min_val, max_val = _i64(min_val), _i64(max_val)
    require(min_val <= max_val, "apply_clip_u: min_val <= max_val")
    return np.minimum(np.maximum(_i64(value), min_val), max_val)


def count_leading_zeros(a) -> np.ndarray:
    """count_leading_zeros of int32 values (32 for 0, 0 for negative values)."""
    u = zero_extend(a, "int32")
    # frexp gives x = m * 2**e with 0.5 <= m < 1, so e is the bit length; float64 is
    # exact for every uint32.
    _, e = np.frexp(u.astype(np.float64))
    return np.where(u == 0, 32, 32 - e).astype(np.int64)


# -- scaling (1.10.2) ------------------------------------------------------------------
def apply_scale_32(value, multiplier, shift, double_round=False,
                   require: Require | None = None) -> np.ndarray:
    """apply_scale_32: round(value * multiplier / 2**shift), result in int32.

    REQUIREs: multiplier >= 0, 2 <= shift <= 62, and
    -(1 << (shift - 1)) <= value < (1 << (shift - 1)).  With ``double_round`` and
    shift > 31 the rounding constant moves by 1 << 30 away from zero (the spec's two-stage
    rounding, TOSA 1.0 rounding_mode DOUBLE_ROUND).
    """
    require = require or _default_require("apply_scale_32")
    value, multiplier, shift = _i64(value), _i64(multiplier), _i64(shift)
    require(multiplier >= 0, "apply_scale_32: multiplier >= 0")
    require((shift >= 2) & (shift <= 62), "apply_scale_32: 2 <= shift <= 62")
    s = np.clip(shift, 2, 62)
    half = np.left_shift(np.int64(1), s - 1)
    require((value >= -half) & (value < half),
            "apply_scale_32: value >= (-1 << (shift - 1)) && value < (1 << (shift - 1))")
    round_ = half
    if np.any(double_round):
        big = (s > 31) & np.asarray(double_round, dtype=bool)
        round_ = round_ + np.where(big, np.where(value >= 0, 1 << 30, -(1 << 30)), 0)
    with np.errstate(over="ignore"):
        result = (value * multiplier + round_) >> s
    return result


def apply_scale_16(value, multiplier, shift, require: Require | None = None) -> np.ndarray:
    """apply_scale_16: round(int48 value * int16 multiplier / 2**shift).

    REQUIREs: multiplier >= 0, 2 <= shift <= 62, result within int32.
    """
    require = require or _default_require("apply_scale_16")
    value, multiplier, shift = _i64(value), _i64(multiplier), _i64(shift)
    require(multiplier >= 0, "apply_scale_16: multiplier >= 0")
    require((shift >= 2) & (shift <= 62), "apply_scale_16: 2 <= shift <= 62")
    s = np.clip(shift, 2, 62)
    round_ = np.left_shift(np.int64(1), s - 1)
    with np.errstate(over="ignore"):
        result = (value * multiplier + round_) >> s
    require(in_range(result, "int32"),
            "apply_scale_16: result >= minimum<int32_t> && result <= maximum<int32_t>")
    return result


ROUNDING_MODES = ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND")


def double_round_for(rounding_mode: str) -> bool:
    """apply_scale_32's ``double_round`` flag for a TOSA 1.0 RESCALE ``rounding_mode``.

    SINGLE_ROUND -> False, DOUBLE_ROUND -> True.  INEXACT_ROUND lets an implementation
    pick its rounding (conformance checks it with a tolerance); this project computes it
    exactly as SINGLE_ROUND, everywhere (interpreter, simulator, hardware).  (The official
    reference model evaluates INEXACT_ROUND in floating point instead: ties to even, an
    fp32-precision multiplier and no REQUIRE on the value range.)
    """
    mode = str(rounding_mode).split(".")[-1].upper()
    if mode not in ROUNDING_MODES:
        raise ValueError(f"unknown rounding_mode {rounding_mode!r}")
    return mode == "DOUBLE_ROUND"


def rescale_values(value, in_t: str, out_t: str, multiplier, shift, input_zp: int = 0,
                   output_zp: int = 0, scale32: bool = True, rounding_mode="SINGLE_ROUND",
                   input_unsigned: bool = False, output_unsigned: bool = False,
                   require: Require | None = None) -> np.ndarray:
    """The element computation of RESCALE (spec 2.13.2), without its ERROR_IF checks.

    ``value`` holds data of ``in_t`` as stored (unsigned data as the bit patterns of the
    signless type); ``multiplier``/``shift`` broadcast against it (per-channel arrays
    along the last axis).  Zero points are numbers (an unsigned zero point as its
    unsigned value, e.g. 32768).  Returns the output values: in the signed range of
    ``out_t``, or with ``output_unsigned`` in its unsigned range (0..255 / 0..65535; the
    caller stores them as bit patterns with :func:`wrap` if its tensor type is signless).
    """
    require = require or _default_require("rescale")
    v = zero_extend(value, in_t) if input_unsigned else _i64(value)
    v = v - int(input_zp)
    if scale32:
        result = apply_scale_32(v, multiplier, shift, double_round_for(rounding_mode), require)
    else:
        result = apply_scale_16(v, multiplier, shift, require)
    result = apply_add_s(result, int(output_zp), "int32", require)
    if output_unsigned:
        return np.clip(result, minimum_u(out_t), maximum_u(out_t))
    return np.clip(result, minimum_s(out_t), maximum_s(out_t))


def reciprocal_scale(value, require: Require | None = None) -> tuple[np.ndarray, np.ndarray]:
    """reciprocal_scale: (multiplier, shift) with multiplier * 2**-shift ~= 1 / value.

    ``value`` is read as uint32; REQUIRE(value > 0).
    """
    require = require or _default_require("reciprocal_scale")
    v = zero_extend(value, "int32")
    require(v > 0, "reciprocal_scale: value > 0")
    v = np.where(v == 0, 1, v)
    k = 32 - count_leading_zeros(v - 1)        # (1 << k) / 2 < value <= (1 << k)
    numerator = np.left_shift(np.int64((1 << 30) + 1), k)
    multiplier = numerator // v                  # (1 << 30) <= multiplier < (1 << 31)
    return multiplier, 30 + k


# -- table lookup (1.10.5) ---------------------------------------------------------------
def apply_lookup_s(table, value, require: Require | None = None) -> np.ndarray:
    """apply_lookup_s: 513-entry int16 table, interpolated; returns 16.7 fixed point.

    REQUIRE: the slope between neighbouring entries used fits int16.
    """
    require = require or _default_require("apply_lookup_s")
    table = _i64(table)
    clipped = np.clip(_i64(value), -32768, 32767)
    index = (clipped + 32768) >> 7
    fraction = clipped & 0x7F
    base = table[index]
    nxt = table[index + 1]
    slope = nxt - base
    require(in_range(slope, "int16"),
            "apply_lookup_s: slope >= minimum<int16_t> && slope <= maximum<int16_t>")
    return (base << 7) + slope * fraction


def lookup_int8(table, value) -> np.ndarray:
    """The int8 TABLE lookup: ``table[value + 128]`` for a 256-entry table."""
    return _i64(table)[_i64(value) + 128]


# -- helpers of the operator pseudocode ---------------------------------------------------
def idiv(a: int, b: int) -> int:
    """idiv: integer division truncating toward zero (C semantics)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def idiv_check_ok(a: int, b: int) -> bool:
    """True when idiv_check(a, b) passes: ``a`` is an exact multiple of ``b``."""
    return b != 0 and a % b == 0
