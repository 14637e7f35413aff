"""Constant folding of OpenVINO layers, and the shape rules the handlers share.

A layer whose inputs are all constant is evaluated here with numpy (``FOLDERS``) instead of
becoming TOSA operators: shape sub-graphs (``ShapeOf -> Gather -> Concat -> Reshape``),
decompression of stored weights (``Convert``, ``Subtract``, ``Multiply``), FakeQuantize of
weights.  Folds that only rearrange or rescale a constant keep its integer form
(:class:`~compiler.frontends.openvino.quant.WeightQuant`).

Each folder is ``fn(c, layer, ins) -> list[Val]`` like a handler.
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.registry import handler_registry
from compiler.frontends.openvino.convert import Converter, Val
from compiler.frontends.openvino.quant import WeightQuant, fq_weights
from compiler.frontends.openvino.xml import (
    Layer, attr_bool, attr_float, attr_int, attr_ints, attr_str,
)
from tosa_ir.errors import Unsupported

FOLDERS, folds = handler_registry()

# Destination types of Convert -> numpy.
NUMPY_TYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.float32,
               "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
               "u64": np.uint64, "u32": np.uint32, "u16": np.uint16, "u8": np.uint8,
               "boolean": np.bool_}


def norm_axis(c: Converter, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise c.invalid(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def int_list(c: Converter, v: Val, what: str) -> list[int]:
    """A constant integer input as a list (scalars become one item)."""
    data = c.const_data(v, what)
    if data.dtype.kind not in "iu":
        raise c.invalid(f"{what} must be integers, got {data.dtype}")
    return [int(x) for x in data.reshape(-1)]


# ---------------------------------------------------------------------------------------
# Shape rules (shared with the handlers)
# ---------------------------------------------------------------------------------------
def reshape_target(c: Converter, in_shape, pattern: list[int], special_zero: bool):
    """Reshape-1's output shape: ``0`` copies the input dim (``special_zero``), -1 infers."""
    out = []
    infer = None
    for i, p in enumerate(pattern):
        if p == 0 and special_zero:
            if i >= len(in_shape):
                raise c.invalid(f"shape pattern {pattern}: 0 at {i} has no input dimension")
            out.append(int(in_shape[i]))
        elif p == -1:
            if infer is not None:
                raise c.invalid(f"shape pattern {pattern} has more than one -1")
            infer = i
            out.append(1)
        elif p < 0:
            raise c.invalid(f"shape pattern {pattern} has a negative dimension")
        else:
            out.append(int(p))
    total = int(np.prod(in_shape, dtype=np.int64))
    known = int(np.prod(out, dtype=np.int64))
    if infer is not None:
        if known == 0 or total % known:
            raise c.invalid(f"cannot reshape {list(in_shape)} with pattern {pattern}")
        out[infer] = total // known
    elif known != total:
        raise c.invalid(f"cannot reshape {list(in_shape)} ({total} elements) to {out}")
    return tuple(out)


def squeeze_shape(c: Converter, in_shape, axes: list[int] | None):
    rank = len(in_shape)
    if axes is None:
        return tuple(d for d in in_shape if d != 1)
    axes = {norm_axis(c, a, rank) for a in axes}
    for a in axes:
        if in_shape[a] != 1:
            raise c.invalid(f"cannot squeeze axis {a} of size {in_shape[a]}")
    return tuple(d for i, d in enumerate(in_shape) if i not in axes)


def unsqueeze_shape(c: Converter, in_shape, axes: list[int]):
    rank = len(in_shape) + len(axes)
    axes = sorted({norm_axis(c, a, rank) for a in axes})
    if len(axes) != len(set(axes)):
        raise c.invalid("repeated unsqueeze axes")
    out = list(in_shape)
    for a in axes:
        out.insert(a, 1)
    return tuple(out)


def transpose_order(c: Converter, v: Val, order_val: Val) -> list[int]:
    order = int_list(c, order_val, "the transpose order")
    if not order:
        order = list(range(v.rank))[::-1]
    order = [norm_axis(c, a, v.rank) for a in order]
    if sorted(order) != list(range(v.rank)):
        raise c.invalid(f"transpose order {order} is not a permutation of rank {v.rank}")
    return order


def strided_slice_index(c: Converter, layer: Layer, shape, begin, end, stride):
    """StridedSlice-1 as a numpy index tuple (masks: 1 = ignore begin/end in OpenVINO)."""
    n = len(begin)
    stride = stride if stride is not None else [1] * n
    if len(end) != n or len(stride) != n:
        raise c.invalid(f"begin/end/stride lengths differ ({n}, {len(end)}, {len(stride)})")

    def mask(key):
        m = attr_ints(layer, key, [])
        return m + [0] * (n - len(m))
    bm, em = mask("begin_mask"), mask("end_mask")
    nm, sm, elm = mask("new_axis_mask"), mask("shrink_axis_mask"), mask("ellipsis_mask")
    index = []
    for i in range(n):
        if elm[i]:
            index.append(Ellipsis)
        elif nm[i]:
            index.append(None)
        elif sm[i]:
            index.append(int(begin[i]))
        else:
            if stride[i] == 0:
                raise c.invalid("StridedSlice stride 0")
            index.append(slice(None if bm[i] else int(begin[i]),
                               None if em[i] else int(end[i]), int(stride[i])))
    return tuple(index)


def slice8_index(c: Converter, shape, start, stop, step, axes):
    rank = len(shape)
    axes = list(range(len(start))) if axes is None else [norm_axis(c, a, rank) for a in axes]
    if not len(start) == len(stop) == len(step) == len(axes):
        raise c.invalid("Slice start/stop/step/axes lengths differ")
    index = [slice(None)] * rank
    for a, b, e, s in zip(axes, start, stop, step):
        if s == 0:
            raise c.invalid("Slice step 0")
        index[a] = slice(int(b), int(e), int(s))
    return tuple(index)


def split_ranges(c: Converter, layer: Layer, ins: list[Val]) -> tuple[int, list[tuple[int, int]]]:
    """Axis and [begin, end) of every output of Split-1 / VariadicSplit-1."""
    x = ins[0]
    axis = norm_axis(c, int_list(c, ins[1], "the split axis")[0], x.rank)
    size = x.shape[axis]
    if layer.type == "Split":
        n = attr_int(layer, "num_splits")
        if n <= 0 or size % n:
            raise c.invalid(f"cannot split {size} into {n} equal parts")
        lengths = [size // n] * n
    else:
        lengths = int_list(c, ins[2], "the split lengths")
        if lengths.count(-1) > 1:
            raise c.invalid("more than one -1 in split lengths")
        if -1 in lengths:
            lengths[lengths.index(-1)] = size - (sum(lengths) + 1)
        if sum(lengths) != size or any(v < 0 for v in lengths):
            raise c.invalid(f"split lengths {lengths} do not add up to {size}")
    ranges, begin = [], 0
    for n in lengths:
        ranges.append((begin, begin + n))
        begin += n
    return axis, ranges


# ---------------------------------------------------------------------------------------
# Folders
# ---------------------------------------------------------------------------------------
def _arr(v: Val) -> np.ndarray:
    return np.asarray(v.data)


@folds("Convert")
def _convert(c, layer, ins):
    dst = attr_str(layer, "destination_type").lower()
    if dst not in NUMPY_TYPES:
        raise Unsupported(f"{layer.where}: Convert to '{dst}' is not supported")
    x = ins[0]
    data = _arr(x)
    out = data.astype(NUMPY_TYPES[dst])
    quant = x.quant
    if np.issubdtype(out.dtype, np.floating):
        if data.dtype.kind in "iu":
            quant = WeightQuant.of(data, 0.0, 1.0)
    else:
        quant = None
    return [Val.const(out, quant)]


@folds("ConvertLike")
def _convert_like(c, layer, ins):
    x, like = ins
    return [Val.const(_arr(x).astype(_arr(like).dtype))]


_BINARY = {
    "Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply,
    "Maximum": np.maximum, "Minimum": np.minimum, "Power": np.power,
    "SquaredDifference": lambda a, b: (a - b) ** 2, "FloorMod": np.mod,
    "Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
    "Greater": np.greater, "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and, "LogicalOr": np.logical_or, "LogicalXor": np.logical_xor,
}


def _bin_fold(c: Converter, layer: Layer, ins):
    a, b = _arr(ins[0]), _arr(ins[1])
    if attr_str(layer, "auto_broadcast", "numpy").lower() == "none" and a.shape != b.shape:
        raise c.invalid(f"shapes {list(a.shape)} and {list(b.shape)} differ and "
                        f"auto_broadcast is none")
    if layer.type == "Divide":
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":
            if np.any(b == 0):
                raise c.invalid("integer division by zero")
            out = np.floor_divide(a, b) if attr_bool(layer, "m_pythondiv", True) \
                else np.trunc(a / b).astype(np.result_type(a, b))
        else:
            with np.errstate(all="ignore"):
                out = np.divide(a, b)
    else:
        with np.errstate(all="ignore"):
            out = _BINARY[layer.type](a, b)
    if out.dtype == np.float64 and a.dtype != np.float64:
        out = out.astype(np.result_type(a.dtype, b.dtype))
    return out


@folds(*_BINARY, "Divide")
def _binary(c, layer, ins):
    out = _bin_fold(c, layer, ins)
    quant = None
    a, b = ins
    shape = out.shape
    # Keep the integer form through the decompression steps of stored weights.
    if a.quant is not None and b.quant is None and out.dtype.kind == "f":
        q = a.quant
        bv = np.broadcast_to(_arr(b).astype(np.float64), shape)
        if q.codes.shape == shape:
            if layer.type == "Subtract":
                quant = WeightQuant(q.codes, q.zero + bv / q.scale, q.scale)
            elif layer.type == "Add":
                quant = WeightQuant(q.codes, q.zero - bv / q.scale, q.scale)
            elif layer.type == "Multiply" and np.all(bv > 0):
                quant = WeightQuant(q.codes, q.zero, q.scale * bv)
            elif layer.type == "Divide" and np.all(bv > 0):
                quant = WeightQuant(q.codes, q.zero, q.scale / bv)
    elif b.quant is not None and a.quant is None and layer.type == "Multiply" and \
            out.dtype.kind == "f":
        q = b.quant
        av = np.broadcast_to(_arr(a).astype(np.float64), shape)
        if q.codes.shape == shape and np.all(av > 0):
            quant = WeightQuant(q.codes, q.zero, q.scale * av)
    return [Val.const(out, quant)]


_UNARY = {
    "ReLU": lambda v: np.maximum(v, 0), "Relu": lambda v: np.maximum(v, 0),
    "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "Tanh": np.tanh, "Exp": np.exp, "Log": np.log, "Abs": np.abs, "Negative": np.negative,
    "Floor": np.floor, "Ceiling": np.ceil, "Sqrt": np.sqrt, "Sign": np.sign,
    "LogicalNot": np.logical_not,
}


@folds(*_UNARY)
def _unary(c, layer, ins):
    with np.errstate(all="ignore"):
        out = _UNARY[layer.type](_arr(ins[0]))
    return [Val.const(np.asarray(out).astype(_arr(ins[0]).dtype))]


@folds("Clamp")
def _clamp(c, layer, ins):
    lo, hi = attr_float(layer, "min"), attr_float(layer, "max")
    data = _arr(ins[0])
    return [Val.const(np.clip(data, lo, hi).astype(data.dtype))]


@folds("ShapeOf")
def _shape_of(c, layer, ins):
    return [shape_of(c, layer, ins[0])]


def shape_of(c: Converter, layer: Layer, x: Val) -> Val:
    et = attr_str(layer, "output_type", "i64").lower()
    if et not in ("i64", "i32"):
        raise c.invalid(f"ShapeOf output_type '{et}'")
    return Val.const(np.asarray(x.shape, NUMPY_TYPES[et]).reshape(len(x.shape)))


@folds("Reshape")
def _reshape(c, layer, ins):
    x = ins[0]
    out = reshape_target(c, x.shape, int_list(c, ins[1], "the Reshape shape"),
                         attr_bool(layer, "special_zero", False))
    return [c.reshaped(x, out)]


@folds("Squeeze")
def _squeeze(c, layer, ins):
    axes = int_list(c, ins[1], "the Squeeze axes") if len(ins) > 1 else None
    return [c.reshaped(ins[0], squeeze_shape(c, ins[0].shape, axes))]


@folds("Unsqueeze")
def _unsqueeze(c, layer, ins):
    axes = int_list(c, ins[1], "the Unsqueeze axes")
    return [c.reshaped(ins[0], unsqueeze_shape(c, ins[0].shape, axes))]


@folds("Transpose")
def _transpose(c, layer, ins):
    x = ins[0]
    order = transpose_order(c, x, ins[1])
    q = x.quant.apply(lambda a: a.transpose(order)) if x.quant is not None else None
    return [Val.const(np.ascontiguousarray(_arr(x).transpose(order)), q)]


@folds("Concat")
def _concat(c, layer, ins):
    rank = ins[0].rank
    axis = norm_axis(c, attr_int(layer, "axis"), rank)
    return [Val.const(np.concatenate([_arr(v) for v in ins], axis))]


@folds("Gather")
def _gather(c, layer, ins):
    data, idx = _arr(ins[0]), _arr(ins[1])
    axis = norm_axis(c, int_list(c, ins[2], "the Gather axis")[0], data.ndim)
    if attr_int(layer, "batch_dims", 0) != 0:
        raise Unsupported(f"{layer.where}: Gather with batch_dims != 0")
    if idx.dtype.kind not in "iu":
        raise c.invalid("Gather indices must be integers")
    size = data.shape[axis]
    idx = np.where(idx < 0, idx + size, idx)
    if np.any(idx < 0) or np.any(idx >= size):
        raise c.invalid(f"Gather index out of range for size {size}")
    return [Val.const(np.take(data, idx, axis=axis))]


@folds("StridedSlice")
def _strided_slice(c, layer, ins):
    data = _arr(ins[0])
    stride = int_list(c, ins[3], "stride") if len(ins) > 3 else None
    index = strided_slice_index(c, layer, data.shape, int_list(c, ins[1], "begin"),
                                int_list(c, ins[2], "end"), stride)
    return [Val.const(np.ascontiguousarray(data[index]))]


@folds("Slice")
def _slice8(c, layer, ins):
    data = _arr(ins[0])
    axes = int_list(c, ins[4], "axes") if len(ins) > 4 else None
    index = slice8_index(c, data.shape, int_list(c, ins[1], "start"),
                         int_list(c, ins[2], "stop"), int_list(c, ins[3], "step"), axes)
    return [Val.const(np.ascontiguousarray(data[index]))]


@folds("Split", "VariadicSplit")
def _split(c, layer, ins):
    axis, ranges = split_ranges(c, layer, ins)
    data = _arr(ins[0])
    return [Val.const(np.take(data, np.arange(b, e), axis=axis)) for b, e in ranges]


@folds("Range")
def _range(c, layer, ins):
    start, stop, step = (float(_arr(v).reshape(-1)[0]) for v in ins)
    if step == 0:
        raise c.invalid("Range step 0")
    et = attr_str(layer, "output_type", "").lower()
    dtype = NUMPY_TYPES.get(et, _arr(ins[0]).dtype)
    return [Val.const(np.arange(start, stop, step).astype(dtype))]


_REDUCE = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
           "ReduceMin": np.min, "ReduceProd": np.prod}


@folds(*_REDUCE)
def _reduce(c, layer, ins):
    data = _arr(ins[0])
    axes = tuple(sorted({norm_axis(c, a, data.ndim) for a in int_list(c, ins[1], "axes")}))
    out = _REDUCE[layer.type](data, axis=axes, keepdims=attr_bool(layer, "keep_dims"))
    return [Val.const(np.asarray(out).astype(data.dtype))]


@folds("Broadcast")
def _broadcast(c, layer, ins):
    mode = attr_str(layer, "mode", "numpy").lower()
    if mode not in ("numpy", "bidirectional"):
        raise Unsupported(f"{layer.where}: Broadcast mode '{mode}'")
    data = _arr(ins[0])
    target = tuple(int_list(c, ins[1], "the target shape"))
    if mode == "bidirectional":
        target = np.broadcast_shapes(data.shape, target)
    return [Val.const(np.broadcast_to(data, target).copy())]


@folds("Select")
def _select(c, layer, ins):
    cond, a, b = (_arr(v) for v in ins)
    return [Val.const(np.where(cond, a, b))]


@folds("FakeQuantize")
def _fake_quantize(c, layer, ins):
    levels = attr_int(layer, "levels")
    if levels < 2:
        raise c.invalid(f"FakeQuantize levels={levels}")
    x, *ranges = (_arr(v).astype(np.float64) for v in ins)
    values, quant = fq_weights(x, *ranges, levels)
    c.fake_quantized = True
    return [Val.const(values, quant)]

