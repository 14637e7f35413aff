"""Reduction operators REDUCE_ALL/ANY/MAX/MIN/SUM (spec section 2.9), integer modes.

The output keeps the input's rank with ``shape[axis] == 1``.  REDUCE_SUM's apply_add_s REQUIRE
applies to every partial sum in the order the spec accumulates (along the axis), so the
running sums are checked, not only the total.
"""
from __future__ import annotations

import numpy as np

from sim.reference.ops_support import (
    as_int64, check_axis, check_types, level_rank, out_array, require_range, shapes_match,
)
from sim.reference.registry import register


def _reduce_args(ctx, inputs, types, fp_modes=True):
    x = np.asarray(inputs[0])
    check_types(ctx, "input", (ctx.in_type(0), ctx.out_type()), [(t, t) for t in types],
                fp_modes)
    axis = int(ctx.attr("axis", 0))
    level_rank(ctx, x.shape)
    check_axis(ctx, axis, x.ndim)
    shape = ctx.out_shape()
    ctx.error_if(len(shape) != x.ndim, "output", "rank(shape) != rank(shape1)")
    ctx.error_if(shape[axis] != 1, "output", "shape[axis] != 1")
    expected = tuple(1 if d == axis else n for d, n in enumerate(x.shape))
    ctx.error_if(not shapes_match(shape, expected), "output",
                 "shape[i] != shape1[i] for i != axis")
    return x, axis


@register("REDUCE_ALL")
def reduce_all(ctx, inputs):
    x, axis = _reduce_args(ctx, inputs, ["bool"], fp_modes=False)
    return [out_array(ctx, np.all(x, axis=axis, keepdims=True))]


@register("REDUCE_ANY")
def reduce_any(ctx, inputs):
    x, axis = _reduce_args(ctx, inputs, ["bool"], fp_modes=False)
    return [out_array(ctx, np.any(x, axis=axis, keepdims=True))]


@register("REDUCE_MAX")
def reduce_max(ctx, inputs):
    x, axis = _reduce_args(ctx, inputs, ["int8", "int16", "int32"])
    return [out_array(ctx, np.max(x, axis=axis, keepdims=True))]


@register("REDUCE_MIN")
def reduce_min(ctx, inputs):
    x, axis = _reduce_args(ctx, inputs, ["int8", "int16", "int32"])
    return [out_array(ctx, np.min(x, axis=axis, keepdims=True))]


@register("REDUCE_SUM")
def reduce_sum(ctx, inputs):
    x, axis = _reduce_args(ctx, inputs, ["int32"])
    partial = np.cumsum(as_int64(x), axis=axis)
    require_range(ctx, partial, "int32", "apply_add_s: partial sum in int32 range")
    total = np.take(partial, [x.shape[axis] - 1], axis=axis)
    return [out_array(ctx, total)]
