"""Data layout operators (spec section 2.10): CONCAT, PAD, DIM, RESHAPE, REVERSE, SLICE, TILE,
TRANSPOSE.

Pure data movement, so every element type of the spec's integer/boolean/shape modes is just
copied.  PAD's padding/pad_const, SLICE's start/size, TILE's multiples and RESHAPE's new
shape are input tensors in TOSA 1.0 graphs and attributes in the draft form (see
:func:`sim.reference.ops_support.operand`).
"""
from __future__ import annotations

import numpy as np

from sim.reference.ops_support import (
    check_output_shape, check_types, int_list, level_rank, operand, out_array, shapes_match,
)
from sim.reference.registry import register
from tosa_ir import INT_RANGES

DATA_TYPES = ("bool", "int8", "int16", "int32")


def _same_type(ctx, types, n_inputs=1, arg="input1"):
    actual = tuple(ctx.in_type(i) for i in range(n_inputs)) + (ctx.out_type(),)
    check_types(ctx, arg, actual, [(t,) * (n_inputs + 1) for t in types])


@register("CONCAT")
def concat(ctx, inputs):
    arrays = [np.asarray(a) for a in inputs]
    ctx.error_if(not arrays, "input1", "input list is empty")
    _same_type(ctx, DATA_TYPES + ("shape",), n_inputs=len(arrays))
    limits = ctx.limits
    if limits is not None and "MAX_TENSOR_LIST_SIZE" in limits:
        ctx.level_check(len(arrays) <= limits["MAX_TENSOR_LIST_SIZE"],
                        "length(input1) <= MAX_TENSOR_LIST_SIZE")
    axis = int(ctx.attr("axis", 0))
    rank0 = arrays[0].ndim
    ctx.error_if(axis < 0 or axis >= max(1, rank0), "axis",
                 "axis < 0 || axis >= max(1, rank(shapes1[0]))")
    for k, a in enumerate(arrays):
        ctx.error_if(a.ndim != rank0, "input1", f"rank(shapes1[{k}]) != rank(shapes1[0])")
        ctx.error_if(any(a.shape[d] != arrays[0].shape[d] for d in range(rank0) if d != axis),
                     "input1", f"shapes1[{k}][index] != shapes1[0][index] for index != axis")
    if rank0 == 0:  # shape_dim() of a rank-0 tensor is 1 on every axis
        arrays = [a.reshape(1) for a in arrays]
    shape = ctx.out_shape()
    level_rank(ctx, shape)
    ctx.error_if(ctx.out_type() == "shape" and len(shape) > 1, "output",
                 "in_out_t == shape_t && rank(shape) > 1")
    total = sum(a.shape[axis] for a in arrays)
    ctx.error_if(len(shape) <= axis or shape[axis] not in (total, -1), "output",
                 "shape[axis] != sum(shape_dim(shapes1[k], axis))")
    result = np.concatenate(arrays, axis=axis)
    check_output_shape(ctx, result.shape)
    return [out_array(ctx, result)]


@register("PAD")
def pad(ctx, inputs):
    x = np.asarray(inputs[0])
    _same_type(ctx, DATA_TYPES)
    level_rank(ctx, ctx.out_shape())
    ctx.error_if(x.ndim < 1, "input1", "rank(shape1) < 1")
    padding = int_list(operand(ctx, inputs, 1, "padding"))
    ctx.error_if(len(padding) != 2 * x.ndim, "padding", "shape(padding) != [rank(shape1), 2]")
    pad_const = operand(ctx, inputs, 2, ("pad_const", "pad_const_int"), default=0)
    pad_value = np.asarray(pad_const).reshape(-1)[0] if np.asarray(pad_const).size else 0
    if x.dtype != np.bool_:
        lo, hi = INT_RANGES[ctx.in_type(0)]
        ctx.error_if(not lo <= int(pad_value) <= hi, "pad_const",
                     f"pad_const {int(pad_value)} is not an {ctx.in_type(0)} value")
    shape = ctx.out_shape()
    ctx.error_if(len(shape) != x.ndim, "output", "rank(shape) != rank(shape1)")
    out_shape = []
    for i in range(x.ndim):
        before, after = padding[2 * i], padding[2 * i + 1]
        ctx.error_if(before < 0 or after < 0, "padding", f"padding[{i},0] < 0 || padding[{i},1] < 0")
        out_shape.append(before + x.shape[i] + after)
    check_output_shape(ctx, out_shape, text="shape[i] != padding[i,0] + shape1[i] + padding[i,1]")
    result = np.full(out_shape, pad_value, dtype=x.dtype)
    inner = tuple(slice(padding[2 * i], padding[2 * i] + x.shape[i]) for i in range(x.ndim))
    result[inner] = x
    return [out_array(ctx, result)]


@register("DIM")
def dim(ctx, inputs):
    x = np.asarray(inputs[0])
    check_types(ctx, "input1", (ctx.in_type(0), ctx.out_type()), [(t, "shape") for t in DATA_TYPES])
    level_rank(ctx, x.shape)
    axis = int(ctx.attr("axis", 0))
    ctx.error_if(axis < 0 or axis >= x.ndim, "axis", "axis >= rank(shape)")
    # The spec's output is a rank-0 shape_t; TOSA 1.1 graphs also declare it as [1].
    shape = (1,) if tuple(ctx.out_shape()) == (1,) else ()
    return [np.full(shape, x.shape[axis], dtype=np.int64)]


@register("RESHAPE")
def reshape(ctx, inputs):
    x = np.asarray(inputs[0])
    _same_type(ctx, DATA_TYPES)
    new_shape = int_list(operand(ctx, inputs, 1, ("shape", "new_shape")))
    level_rank(ctx, x.shape, new_shape)
    ctx.require(all(d >= 1 for d in new_shape), "1 <= shape[i] (tensor_size)")
    ctx.error_if(int(np.prod(new_shape, dtype=np.int64)) != x.size, "shape",
                 "tensor_size(shape1) != tensor_size(shape)")
    check_output_shape(ctx, new_shape, text="output shape != shape operand")
    return [out_array(ctx, x.reshape(new_shape))]


@register("REVERSE")
def reverse(ctx, inputs):
    x = np.asarray(inputs[0])
    _same_type(ctx, DATA_TYPES + ("shape",))
    level_rank(ctx, x.shape)
    axis = int(ctx.attr("axis", 0))
    ctx.error_if(axis < 0 or axis >= x.ndim, "axis", "axis < 0 || axis >= rank(shape)")
    check_output_shape(ctx, x.shape, text="output shape != input shape")
    return [out_array(ctx, np.flip(x, axis=axis))]


@register("SLICE")
def slice_(ctx, inputs):
    x = np.asarray(inputs[0])
    _same_type(ctx, DATA_TYPES)
    shape = ctx.out_shape()
    level_rank(ctx, shape)
    start = int_list(operand(ctx, inputs, 1, "start"))
    size = int_list(operand(ctx, inputs, 2, "size"))
    ctx.error_if(x.ndim != len(start) or x.ndim != len(size), "start",
                 "rank(shape1) != length(start) || rank(shape1) != length(size)")
    ctx.error_if(x.ndim != len(shape), "output", "rank(shape1) != rank(shape)")
    for i in range(x.ndim):
        ctx.error_if(start[i] < 0, "start", f"start[{i}] < 0")
        ctx.error_if(size[i] <= 0, "size", f"size[{i}] <= 0")
        ctx.error_if(start[i] + size[i] > x.shape[i], "size",
                     f"start[{i}] + size[{i}] > shape1[{i}]")
        ctx.error_if(shape[i] not in (size[i], -1), "output", f"shape[{i}] != size[{i}]")
    window = tuple(slice(s, s + n) for s, n in zip(start, size))
    return [out_array(ctx, x[window])]


@register("TILE")
def tile(ctx, inputs):
    x = np.asarray(inputs[0])
    _same_type(ctx, DATA_TYPES)
    shape = ctx.out_shape()
    level_rank(ctx, shape)
    multiples = int_list(operand(ctx, inputs, 1, "multiples"))
    ctx.error_if(x.ndim != len(shape), "output", "rank(shape1) != rank(shape)")
    ctx.error_if(len(multiples) != x.ndim, "multiples", "length(multiples) != rank(shape1)")
    expected = [n * m for n, m in zip(x.shape, multiples)]
    for i in range(x.ndim):
        ctx.error_if(multiples[i] < 1 or not shapes_match([shape[i]], [expected[i]]),
                     "multiples", f"shape1[{i}] * multiples[{i}] != shape[{i}]")
    return [out_array(ctx, np.tile(x, multiples))]


@register("TRANSPOSE")
def transpose(ctx, inputs):
    x = np.asarray(inputs[0])
    _same_type(ctx, DATA_TYPES)
    shape = ctx.out_shape()
    level_rank(ctx, shape)
    perms = int_list(operand(ctx, inputs, 1, "perms"))
    ctx.error_if(x.ndim != len(shape), "output", "rank(shape1) != rank(shape)")
    ctx.error_if(len(perms) != x.ndim, "perms", "length(perms) != rank(shape1)")
    used = set()
    for p in perms:
        ctx.error_if(p >= x.ndim, "perms", "index >= rank(shape1)")
        ctx.error_if(p < 0, "perms", "index < 0")
        ctx.error_if(p in used, "perms", "indexes_used[index] == true")
        used.add(p)
    for i in range(x.ndim):
        ctx.error_if(shape[i] not in (x.shape[perms[i]], -1), "output",
                     f"shape1[perms[{i}]] != shape[{i}]")
    return [out_array(ctx, np.transpose(x, perms))]
