"""Type conversion operators (spec 2.13), integer modes: RESCALE and CAST.

RESCALE forms:

* TOSA 1.0: inputs ``[input, multiplier, shift, input_zp, output_zp]``; attributes
  ``scale32``, ``rounding_mode`` (SINGLE_ROUND / INEXACT_ROUND / DOUBLE_ROUND),
  ``per_channel``, ``input_unsigned``, ``output_unsigned``.  Unsigned data travels in int8
  / int16 tensors (bit patterns); a uint16 zero point of 32768 is the int16 value -32768.
* Draft: input ``[input]`` with ``input_zp``, ``output_zp``, ``multiplier``, ``shift``,
  ``scale32``, ``double_round``, ``per_channel``, ``input_unsigned``, ``output_unsigned``
  attributes; uint8 / uint16 tensor types are read as unsigned data too.

INEXACT_ROUND is implementation-defined in TOSA 1.0 (conformance accepts a tolerance).
This interpreter computes it exactly as SINGLE_ROUND, which is one of the results the
specification allows; the official reference model instead evaluates it in floating
point (ties to even, fp32-precision multiplier), so the two can differ by a few units in
the last place, and the reference model skips apply_scale_32's REQUIRE on the value range
for it.
"""
from __future__ import annotations

import numpy as np

from sim import tosa_helpers as th
from sim.reference.ops_support import (FLOAT_TYPES, check_output_shape, check_types,
                                       has_input, int_list, operand, scalar_int)
from sim.reference.registry import register
from tosa_ir import Unsupported

RESCALE_IN = ("int8", "int16", "int32", "int48")
RESCALE_OUT = ("int8", "int16", "int32")
ROUNDING_MODES = th.ROUNDING_MODES


def _enum_name(value) -> str:
    """An enum attribute as its upper-case name ("RoundingMode.SINGLE_ROUND" -> ...)."""
    return str(value).split(".")[-1].upper()


def _signed_base(dtype: str) -> str:
    return dtype.replace("uint", "int")


def _rescale_zero_point(ctx, inputs, index, name, base, unsigned) -> int:
    if has_input(ctx, index):
        zp = np.asarray(inputs[index])
        ctx.error_if(zp.shape != (1,), name, f"{name} shape != [1]")
        ctx.error_if(_signed_base(ctx.in_type(index)) != base, name,
                     f"type of {name} != type of the data it applies to")
        raw = int(zp.reshape(-1)[0])
    else:
        raw = scalar_int(operand(ctx, inputs, index, name, default=0))
    if base == "int48" or base == "int32":
        return raw
    # The zero point is a value of the (signless) data type: read it as the data is read.
    return int(th.zero_extend(raw, base)) if unsigned else int(th.sign_extend(raw, base))


@register("RESCALE")
def rescale(ctx, inputs):
    x = np.asarray(inputs[0])
    in_decl, out_decl = ctx.in_type(0), ctx.out_type()
    in_t, out_t = _signed_base(in_decl), _signed_base(out_decl)
    input_unsigned = bool(ctx.attr("input_unsigned", False)) or in_decl.startswith("uint")
    output_unsigned = bool(ctx.attr("output_unsigned", False)) or out_decl.startswith("uint")
    check_types(ctx, "input", (in_t, out_t),
                [(i, o) for i in RESCALE_IN for o in RESCALE_OUT], fp_modes=False)
    scale32 = bool(ctx.attr("scale32", True))
    if ctx.attr("rounding_mode") is not None:
        mode = _enum_name(ctx.attr("rounding_mode"))
    else:
        mode = "DOUBLE_ROUND" if ctx.attr("double_round", False) else "SINGLE_ROUND"
    ctx.error_if(mode not in ROUNDING_MODES, "rounding_mode", f"unknown rounding_mode {mode}")
    per_channel = bool(ctx.attr("per_channel", False))

    # Multiplier and shift: input tensors (1.0) or attributes (draft).
    mul_t = "int32" if scale32 else "int16"
    if has_input(ctx, 1):
        ctx.error_if(ctx.in_type(1) != mul_t, "multiplier",
                     "multiplier type != (scale32 ? i32_t : i16_t)")
    if has_input(ctx, 2):
        ctx.error_if(ctx.in_type(2) != "int8", "shift", "shift type != i8_t")
    multiplier = np.asarray(int_list(operand(ctx, inputs, 1, "multiplier")), dtype=np.int64)
    shift = np.asarray(int_list(operand(ctx, inputs, 2, "shift")), dtype=np.int64)

    izp = _rescale_zero_point(ctx, inputs, 3, "input_zp", in_t, input_unsigned)
    ozp = _rescale_zero_point(ctx, inputs, 4, "output_zp", out_t, output_unsigned)

    ctx.error_if(in_t != "int8" and not (in_t == "int16" and input_unsigned) and izp != 0,
                 "input_zp", "in_t != i8_t && (in_t != i16_t || !input_unsigned) && "
                             "input_zp != 0")
    ctx.error_if(out_t != "int8" and not (out_t == "int16" and output_unsigned) and ozp != 0,
                 "output_zp", "out_t != i8_t && (out_t != i16_t || !output_unsigned) && "
                              "output_zp != 0")
    ctx.error_if(in_t == "int16" and input_unsigned and izp not in (0, 32768), "input_zp",
                 "in_t == i16_t && input_unsigned && input_zp != 0 && input_zp != 32768")
    ctx.error_if(out_t == "int16" and output_unsigned and ozp not in (0, 32768), "output_zp",
                 "out_t == i16_t && output_unsigned && output_zp != 0 && output_zp != 32768")
    ctx.error_if(scale32 and in_t == "int48", "scale32", "scale32 && in_t == i48_t")
    ctx.error_if(not scale32 and mode == "DOUBLE_ROUND", "rounding_mode",
                 "!scale32 && rounding_mode == DOUBLE_ROUND")
    ctx.error_if(input_unsigned and output_unsigned, "input_unsigned",
                 "input_unsigned && output_unsigned")
    ctx.error_if(out_t == "int32" and input_unsigned, "input_unsigned",
                 "out_t == i32_t && input_unsigned")
    ctx.error_if(in_t == "int32" and output_unsigned, "output_unsigned",
                 "in_t == i32_t && output_unsigned")
    ctx.error_if(in_t == "int48" and output_unsigned, "output_unsigned",
                 "in_t == i48_t && output_unsigned")
    ctx.error_if(in_t in ("int32", "int48") and input_unsigned, "input_unsigned",
                 "(in_t == i32_t || in_t == i48_t) && input_unsigned")
    ctx.error_if(out_t == "int32" and output_unsigned, "output_unsigned",
                 "out_t == i32_t && output_unsigned")
    ctx.error_if(per_channel and x.ndim < 1, "per_channel", "per_channel && rank(input) < 1")
    nc = x.shape[-1] if per_channel and x.ndim >= 1 else 1
    ctx.error_if(multiplier.shape != (nc,), "multiplier", f"shape(multiplier) != [NC = {nc}]")
    ctx.error_if(shift.shape != (nc,), "shift", f"shape(shift) != [NC = {nc}]")
    check_output_shape(ctx, x.shape, text="shape(output) != shape(input)")

    if not per_channel:  # scalars keep rank-0 inputs rank 0
        multiplier, shift = multiplier[0], shift[0]
    result = th.rescale_values(x, in_t, out_t, multiplier, shift, izp, ozp, scale32, mode,
                               input_unsigned, output_unsigned, ctx.require)
    if output_unsigned and not out_decl.startswith("uint"):
        # Unsigned results travel as the bit patterns of the signless output type (1.0);
        # draft graphs may declare a uint8/uint16 tensor instead.
        result = th.wrap(result, out_t)
    return [result]


CAST_INT = ("bool", "int8", "int16", "int32")


@register("CAST")
def cast(ctx, inputs):
    x = np.asarray(inputs[0])
    in_t, out_t = ctx.in_type(0), ctx.out_type()
    if in_t in FLOAT_TYPES or out_t in FLOAT_TYPES:
        raise Unsupported(f"CAST{' at ' + ctx.op.location if ctx.op.location else ''}: "
                          f"floating-point mode {in_t}->{out_t} is not supported by the "
                          f"reference interpreter")
    check_types(ctx, "input", (in_t, out_t),
                [(i, o) for i in CAST_INT for o in CAST_INT if i != o])
    check_output_shape(ctx, x.shape, text="shape(output) != shape(input)")
    if out_t == "bool":
        return [x != 0]
    if in_t == "bool":
        return [x.astype(np.int64)]
    # Widening sign-extends; narrowing keeps the low bits (truncate).
    return [th.wrap(x, out_t)]
