"""Data nodes (spec section 2.14): CONST, CONST_SHAPE (TOSA 1.0 shape constants), IDENTITY."""
from __future__ import annotations

import numpy as np

from sim.reference.ops_support import check_output_shape, check_types, level_rank, out_array
from sim.reference.registry import register
from tosa_ir import numpy_dtype

# Floating-point constants are data only (no arithmetic): kept, so a graph that misuses one
# (e.g. an fp32 COND_IF condition) meets its own ERROR_IF; an operator computing on them is
# Unsupported where it runs.
CONST_TYPES = ("bool", "int4", "int8", "int16", "int32", "int48", "shape", "fp16", "bf16", "fp32",
               "fp8e4m3", "fp8e5m2")
IDENTITY_TYPES = ("bool", "int4", "int8", "int16", "int32", "int48")


@register("CONST", "CONST_SHAPE")
def const(ctx, inputs):
    """The constant's values: the output tensor's data, or a ``values`` attribute."""
    out = ctx.block.tensor(ctx.op.outputs[0])
    values = out.data if out.data is not None else ctx.attr("values")
    ctx.error_if(values is None, "values", "CONST has no values")
    dtype = ctx.out_type()
    check_types(ctx, "values", (dtype,), [(t,) for t in CONST_TYPES])
    values = np.asarray(values)
    check_output_shape(ctx, values.shape, arg="values", text="shape(values) != shape(output)")
    level_rank(ctx, values.shape)
    return [values.astype(numpy_dtype(dtype), copy=True)]


@register("IDENTITY")
def identity(ctx, inputs):
    x = np.asarray(inputs[0])
    check_types(ctx, "input1", (ctx.in_type(0), ctx.out_type()), [(t, t) for t in IDENTITY_TYPES])
    check_output_shape(ctx, x.shape, text="shape(output) != shape(input1)")
    level_rank(ctx, x.shape)
    return [out_array(ctx, x.copy())]
