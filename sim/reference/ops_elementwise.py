"""Elementwise binary, unary and ternary operators (spec sections 2.5-2.7), integer modes.

ADD, SUB, MUL, INTDIV, MAXIMUM, MINIMUM, ARITHMETIC_RIGHT_SHIFT, LOGICAL_LEFT_SHIFT,
LOGICAL_RIGHT_SHIFT, BITWISE_AND/OR/XOR/NOT, LOGICAL_AND/OR/XOR/NOT, ABS, CLZ, NEGATE and
SELECT.  All arithmetic is done on int64 copies so that the spec's ``sign_extend<int64_t>``
intermediate values are exact; REQUIREs on overflow are checked on whole arrays before the
result is truncated to the output type.
"""
from __future__ import annotations

import numpy as np

from sim import tosa_helpers as th
from sim.reference.ops_support import (
    as_int64, check_output_shape, check_types, elementwise_shape, level_rank, operand, out_array,
    require_range, scalar_int,
)
from sim.reference.registry import register

INT_TYPES = ("int8", "int16", "int32")


def _same(types):
    return [(t, t, t) for t in types]


def _binary_args(ctx, inputs, table, fp_modes=True):
    """Type-check a two-input op and return (a, b, broadcast shape)."""
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    check_types(ctx, "input1", (ctx.in_type(0), ctx.in_type(1), ctx.out_type()), table,
                fp_modes)
    shape = elementwise_shape(ctx, [a, b])
    level_rank(ctx, shape)
    return a, b, shape


def _shape_scalar_args(ctx, inputs):
    """shape_t mode of ADD/SUB/MUL/INTDIV: ERROR_IF any rank is not 0."""
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    ctx.error_if(a.ndim != 0 or b.ndim != 0 or len(ctx.out_shape()) != 0, "input1",
                 "rank(shape) != 0 || rank(shape1) != 0 || rank(shape2) != 0")
    return int(a), int(b)


def _shape_result(ctx, value: int) -> list[np.ndarray]:
    lo, hi = th.minimum_s("shape"), th.maximum_s("shape")
    ctx.require(lo <= value <= hi, "result fits shape_t")
    return [np.array(value, dtype=np.int64)]


# --- arithmetic --------------------------------------------------------------------------

@register("ADD")
def add(ctx, inputs):
    if ctx.in_type(0) == "shape":
        a, b = _shape_scalar_args(ctx, inputs)
        return _shape_result(ctx, a + b)
    a, b, _ = _binary_args(ctx, inputs, _same(["int32"]))
    return [out_array(ctx, th.apply_add_s(a, b, "int32", ctx.require))]


@register("SUB")
def sub(ctx, inputs):
    if ctx.in_type(0) == "shape":
        a, b = _shape_scalar_args(ctx, inputs)
        return _shape_result(ctx, a - b)
    a, b, _ = _binary_args(ctx, inputs, _same(["int32"]))
    return [out_array(ctx, th.apply_sub_s(a, b, "int32", ctx.require))]


@register("MUL")
def mul(ctx, inputs):
    if ctx.in_type(0) == "shape":
        a, b = _shape_scalar_args(ctx, inputs)
        return _shape_result(ctx, a * b)
    a, b, _ = _binary_args(ctx, inputs, [("int8", "int8", "int32"), ("int16", "int16", "int32"),
                                         ("int32", "int32", "int32")])
    if len(inputs) > 2 and inputs[2] is not None:
        # TOSA 1.0: shift is a tensor of shape [1].
        ctx.error_if(np.ndim(inputs[2]) != 1, "shift", "rank(shift) != 1")
    shift = scalar_int(operand(ctx, inputs, 2, "shift", default=0))
    ctx.require(0 <= shift <= 63, "0 <= shift && shift <= 63")
    ctx.require(ctx.in_type(0) == "int32" or shift == 0, "in_t == int32_t || shift == 0")
    product = as_int64(a) * as_int64(b)  # |product| <= 2^62: exact in int64
    if shift > 0:
        # int64_t arithmetic as the pseudocode writes it.  Only shift == 63 with
        # product == 2^62 can overflow (product + round == 2^63); it wraps as a two's
        # complement int64 does, which is what the official reference model returns.
        with np.errstate(over="ignore"):
            product = (product + np.int64(1 << (shift - 1))) >> shift
        require_range(ctx, product, "int32", "product in int32 range")
        return [out_array(ctx, product)]
    # shift == 0: apply_mul_s keeps the low 32 bits of the product.
    return [out_array(ctx, th.apply_mul_s(a, b, "int32"))]


@register("INTDIV")
def intdiv(ctx, inputs):
    if ctx.in_type(0) == "shape":
        a, b = _shape_scalar_args(ctx, inputs)
        ctx.require(b != 0, "value2 != 0")
        q = abs(a) // abs(b)
        return _shape_result(ctx, q if (a < 0) == (b < 0) else -q)
    a, b, _ = _binary_args(ctx, inputs, _same(["int32"]))
    ctx.require(np.all(b != 0), "value2 != 0")
    # Truncates towards zero; REQUIRE catches minimum<int32_t> / -1.
    return [out_array(ctx, th.apply_intdiv_s(a, b, "int32", ctx.require))]


@register("MAXIMUM")
def maximum(ctx, inputs):
    a, b, _ = _binary_args(ctx, inputs, _same(["int32"]))
    return [out_array(ctx, np.maximum(a, b))]


@register("MINIMUM")
def minimum(ctx, inputs):
    a, b, _ = _binary_args(ctx, inputs, _same(["int32"]))
    return [out_array(ctx, np.minimum(a, b))]


# --- shifts -------------------------------------------------------------------------------

_SHIFT_MAX = {"int8": 7, "int16": 15, "int32": 31}


@register("ARITHMETIC_RIGHT_SHIFT")
def arithmetic_right_shift(ctx, inputs):
    a, b, _ = _binary_args(ctx, inputs, _same(INT_TYPES), fp_modes=False)
    dtype = ctx.in_type(0)
    value1, value2 = np.broadcast_arrays(as_int64(a), as_int64(b))
    ctx.require(np.all((value2 >= 0) & (value2 <= _SHIFT_MAX[dtype])),
                f"0 <= value2 && value2 <= {_SHIFT_MAX[dtype]}")
    result = th.apply_arith_rshift(value1, value2, dtype)
    if bool(ctx.attr("round", False)):
        # Round half up: add the last bit shifted out (only when shifting at all).
        last_out = th.apply_arith_rshift(value1, np.maximum(value2 - 1, 0), dtype) & 1
        result = result + np.where(value2 > 0, last_out, 0)
    return [out_array(ctx, th.saturate(result, dtype))]


def _require_logical_shift(ctx, value2) -> None:
    """The shift-amount REQUIRE of LOGICAL_LEFT_SHIFT / LOGICAL_RIGHT_SHIFT.

    The draft spec allows 0..31 for every type (an int8 shifted by 8..31 is well defined:
    the bits leave the type).  TOSA 1.0 limits the amount to the type's width, as for
    ARITHMETIC_RIGHT_SHIFT, and the official reference model reports larger amounts as
    unpredictable; 1.0 graphs get that rule.
    """
    limit = _SHIFT_MAX[ctx.in_type(0)] if ctx.is_tosa_1 else 31
    ctx.require(np.all((value2 >= 0) & (value2 <= limit)), f"0 <= value2 && value2 <= {limit}")


@register("LOGICAL_LEFT_SHIFT")
def logical_left_shift(ctx, inputs):
    a, b, _ = _binary_args(ctx, inputs, _same(INT_TYPES), fp_modes=False)
    value1, value2 = np.broadcast_arrays(as_int64(a), as_int64(b))
    _require_logical_shift(ctx, value2)
    # value1 << value2 in in_out_t: the bits shifted past the type width are lost.
    return [out_array(ctx, th.wrap(value1 << value2, ctx.out_type()))]


@register("LOGICAL_RIGHT_SHIFT")
def logical_right_shift(ctx, inputs):
    a, b, _ = _binary_args(ctx, inputs, _same(INT_TYPES), fp_modes=False)
    dtype = ctx.in_type(0)
    value1, value2 = np.broadcast_arrays(as_int64(a), as_int64(b))
    _require_logical_shift(ctx, value2)
    # zero_extend<uint32_t>(a) inserts zeros above the top bit of in_t (no sign extension).
    unsigned = th.zero_extend(value1, dtype)
    return [out_array(ctx, th.apply_logical_rshift(unsigned, value2, dtype))]


# --- bitwise and logical ------------------------------------------------------------------

def _bitwise(fn):
    def impl(ctx, inputs):
        a, b, _ = _binary_args(ctx, inputs, _same(INT_TYPES), fp_modes=False)
        return [out_array(ctx, fn(a, b))]
    return impl


register("BITWISE_AND")(_bitwise(np.bitwise_and))
register("BITWISE_OR")(_bitwise(np.bitwise_or))
register("BITWISE_XOR")(_bitwise(np.bitwise_xor))


def _logical(fn):
    def impl(ctx, inputs):
        a, b, _ = _binary_args(ctx, inputs, _same(["bool"]), fp_modes=False)
        return [out_array(ctx, fn(a, b))]
    return impl


register("LOGICAL_AND")(_logical(np.logical_and))
register("LOGICAL_OR")(_logical(np.logical_or))
register("LOGICAL_XOR")(_logical(np.not_equal))


# --- unary ---------------------------------------------------------------------------------

def _unary_args(ctx, inputs, types, fp_modes=True):
    x = np.asarray(inputs[0])
    check_types(ctx, "input1", (ctx.in_type(0), ctx.out_type()), [(t, t) for t in types],
                fp_modes)
    check_output_shape(ctx, x.shape, text="output shape != input1 shape")
    level_rank(ctx, x.shape)
    return x


@register("BITWISE_NOT")
def bitwise_not(ctx, inputs):
    x = _unary_args(ctx, inputs, INT_TYPES, fp_modes=False)
    return [out_array(ctx, np.invert(x))]


@register("LOGICAL_NOT")
def logical_not(ctx, inputs):
    x = _unary_args(ctx, inputs, ["bool"], fp_modes=False)
    return [out_array(ctx, np.logical_not(x))]


@register("ABS")
def abs_(ctx, inputs):
    x = as_int64(_unary_args(ctx, inputs, ["int32"]))
    # apply_sub_s<int32_t>(0, value1) for negative values: REQUIRE fails for minimum<int32_t>.
    negated = th.apply_sub_s(0, np.minimum(x, 0), "int32", ctx.require)
    return [out_array(ctx, np.where(x < 0, negated, x))]


@register("CLZ")
def clz(ctx, inputs):
    x = _unary_args(ctx, inputs, ["int32"], fp_modes=False)
    return [out_array(ctx, th.count_leading_zeros(x))]


@register("NEGATE")
def negate(ctx, inputs):
    x = _unary_args(ctx, inputs, INT_TYPES)
    dtype = ctx.in_type(0)
    input1_zp = scalar_int(operand(ctx, inputs, 1, ("input1_zp", "input_zp"), default=0))
    output_zp = scalar_int(operand(ctx, inputs, 2, "output_zp", default=0))
    ctx.error_if(dtype != "int8" and input1_zp != 0, "input1_zp",
                 "in_out_t != i8_t && input1_zp != 0")
    ctx.error_if(dtype != "int8" and output_zp != 0, "output_zp",
                 "in_out_t != i8_t && output_zp != 0")
    value = th.apply_sub_s(x, input1_zp, "int32", ctx.require)
    value = th.apply_sub_s(0, value, "int32", ctx.require)
    value = th.apply_add_s(value, output_zp, "int32", ctx.require)
    return [out_array(ctx, th.saturate(value, dtype))]


# --- ternary -------------------------------------------------------------------------------

@register("SELECT")
def select(ctx, inputs):
    cond, a, b = (np.asarray(v) for v in inputs[:3])
    ctx.error_if(ctx.in_type(0) != "bool", "input1", "input1 type != bool_t")
    check_types(ctx, "input2", (ctx.in_type(1), ctx.in_type(2), ctx.out_type()),
                _same(["bool", *INT_TYPES]))
    shape = elementwise_shape(ctx, [cond, a, b])
    level_rank(ctx, shape)
    return [out_array(ctx, np.where(cond, a, b))]
