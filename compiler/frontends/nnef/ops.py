"""NNEF operation handlers: each maps one (lowered) NNEF operation to float TOSA operators.

A handler ``fn(c, op)`` takes the :class:`~compiler.frontends.nnef.convert.Converter` and
the parsed operation (:class:`~compiler.frontends.nnef.parse.PlainOp`) and records the converted value of every result with
``c.set_result`` / ``c.result``.  Operations without a TOSA counterpart in this frontend
raise :class:`Unsupported` naming the operation and where it is.
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.registry import handler_registry
from compiler.frontends.common.graph_builder import FLOAT_MAX, NHWC, Val, identity
from compiler.frontends.nnef.convert import Converter
from compiler.frontends.nnef.quant import dequantize_codes
from compiler.frontends.common.windows import (
    conv_attrs, conv_input, conv_weight, fit_window, pool_operands, slice_tail, zero_pad_hw,
)
from tosa_ir.errors import InvalidInput, Unsupported

HANDLERS, handles = handler_registry()


def _out(op, key: str | None = None) -> str:
    values = list(op.outputs.values())
    return str(op.outputs[key] if key else values[0])


def _ints(values) -> list[int]:
    return [int(v) for v in values]


# ---------------------------------------------------------------------------------------
# Tensor introducing operations
# ---------------------------------------------------------------------------------------
@handles("external")
def _external(c: Converter, op) -> None:
    name = _out(op)
    shape, dtype = c.nnef_shape(name), c.nnef_dtype(name)
    if any(d <= 0 for d in shape):
        raise InvalidInput(f"{c.location}: external shape {list(shape)} must be positive")
    tname = c.own_name(name)
    c.tensor(tname, shape, dtype)
    c.set_result(name, Val(shape, dtype, tname, identity(len(shape))))


_NP_OF = {"fp32": np.float32, "int32": np.int64, "bool": np.bool_}


@handles("variable")
def _variable(c: Converter, op) -> None:
    name = _out(op)
    dat = c.model.data[name]
    dtype = c.nnef_dtype(name)
    values = dat.values
    if dat.kind == "qint":
        entry = c.graph.tensors[name].quantization
        values = dequantize_codes(dat.codes, entry, f"{c.model.files[name]}", _param_axis(
            c, name, dat.codes.shape, entry))
    if dtype == "int32" and dat.kind not in ("int", "qint"):
        raise InvalidInput(f"{c.model.files[name]}: integer variable '{name}' holds "
                           f"{dat.kind} data")
    data = np.asarray(values).astype(_NP_OF[dtype])
    c.set_result(name, Val(tuple(data.shape), dtype, data=data))


def _param_axis(c: Converter, name: str, shape, entry) -> int:
    """Axis a per-channel graph.quant entry of a variable runs along.

    Filters in NNEF's layout: 0 (then 1, a bias [1, C]).  Otherwise the one axis of that
    size: nnef-tools writes TFLite's variables in TFLite's layout with TFLite's quantized
    dimension, e.g. a depthwise filter [1, kh, kw, C] per channel along axis 3, and
    transposes it to [C, 1, kh, kw] in the graph (the transpose's own entry is axis 0).
    """
    n = max(np.size(entry.get("scale", 1)), np.size(entry.get("zero_point", 0)),
            np.size(entry.get("min", 0)), np.size(entry.get("max", 0)))
    if n <= 1:
        return 0
    for axis in (0, 1):
        if len(shape) > axis and shape[axis] == n:
            return axis
    others = [axis for axis in range(2, len(shape)) if shape[axis] == n]
    if len(others) == 1:
        return others[0]
    raise InvalidInput(f"{c.model.files[name]}: {n} per-channel quantization parameters do "
                       f"not match shape {list(shape)}")


@handles("constant")
def _constant(c: Converter, op) -> None:
    name = _out(op)
    shape = _ints(op.attribs["shape"])
    values = np.asarray(op.attribs["value"])
    count = int(np.prod(shape, dtype=np.int64))
    if values.size not in (1, count):
        raise InvalidInput(f"{c.location}: {values.size} values for shape {shape}")
    dtype = c.nnef_dtype(name)
    data = np.broadcast_to(values.reshape(-1), (count,)).reshape(shape).astype(_NP_OF[dtype])
    c.set_result(name, Val(tuple(shape), dtype, data=data))


@handles("copy")
def _copy(c: Converter, op) -> None:
    c.set_result(_out(op), c.val(op.inputs["x"]))


# ---------------------------------------------------------------------------------------
# Sliding-window helpers
# ---------------------------------------------------------------------------------------
def _auto_padding(sizes, kernel, stride, dilation) -> list[tuple[int, int]]:
    """NNEF automatic padding (spec 4.3): output = ceil(X / s), split floor/ceil."""
    pads = []
    for x, f, s, d in zip(sizes, kernel, stride, dilation):
        out = -(-x // s)
        fd = (f - 1) * d + 1
        t = max((out - 1) * s + fd - x, 0)
        pads.append((t // 2, t - t // 2))
    return pads


def _check_rank4(c: Converter, v: Val, what: str) -> None:
    if v.rank != 4:
        raise Unsupported(f"{c.location}: {what} is supported for 2-D data (rank 4 NCHW "
                          f"tensors), not rank {v.rank}")
    if v.is_const:
        raise Unsupported(f"{c.location}: {what} of a constant tensor")


def _border(c: Converter, op, allowed) -> str:
    border = op.attribs.get("border", "constant")
    if border not in allowed:
        raise Unsupported(f"{c.location}: border '{border}' is not supported (only "
                          f"{', '.join(repr(b) for b in allowed)})")
    return border


def _spatial(values, n: int, default: int, what: str, c: Converter) -> list[int]:
    values = _ints(values) if values else [default] * n
    if len(values) != n:
        raise InvalidInput(f"{c.location}: {what} has {len(values)} items, expected {n}")
    return values


def _check_pads(c: Converter, pads) -> None:
    if any(p < 0 or q < 0 for p, q in pads):
        raise Unsupported(f"{c.location}: negative padding {pads} is not supported")


def _bias_vector(c: Converter, b: Val, channels: int) -> np.ndarray:
    data = c.const_data(b, "bias").reshape(-1)
    if data.size == 1:
        return np.full(channels, data[0], np.float32)
    if data.size != channels:
        raise InvalidInput(f"{c.location}: bias has {data.size} values for {channels} "
                           f"channels")
    return data.astype(np.float32)


# ---------------------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------------------
def _filtered(c: Converter, op) -> tuple[Val, Val, np.ndarray, str | None]:
    """Input, bias, filter data and bias variable name (None for a literal) of conv/deconv
    ``op`` (rank-4 input, zero border)."""
    x, f, b = c.val(op.inputs["input"]), c.val(op.inputs["filter"]), c.val(op.inputs["bias"])
    _check_rank4(c, x, op.name)
    w = c.const_data(f, f"the {op.name} filter")
    _border(c, op, ("constant",))
    bias_name = None if isinstance(op.inputs["bias"], float) else str(op.inputs["bias"])
    return x, b, w, bias_name


def _params(c: Converter, out: str, weight: np.ndarray, bias: np.ndarray,
            filter_name: str | None, bias_name: str | None, role: str) -> tuple[str, str]:
    """Weight and bias constants of ``out``, recorded (as ``role`` and "bias") for the
    graph.quant lookups of their NNEF variables."""
    wname = c.const(weight, "fp32", out + "_weight")
    bname = c.const(bias, "fp32", out + "_bias")
    if filter_name:
        c.param_of[wname] = (filter_name, role)
    if bias_name:
        c.param_of[bname] = (bias_name, "bias")
    return wname, bname


@handles("conv")
def _conv(c: Converter, op) -> None:
    x, b, w, bias_name = _filtered(c, op)
    n, ch, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    groups = int(op.attribs.get("groups", 1)) or ch
    stride = _spatial(op.attribs.get("stride"), 2, 1, "stride", c)
    dil = _spatial(op.attribs.get("dilation"), 2, 1, "dilation", c)
    pads = ([tuple(p) for p in op.attribs["padding"]] if op.attribs.get("padding")
            else _auto_padding((h, wd), (kh, kw), stride, dil))
    if len(pads) != 2:
        raise InvalidInput(f"{c.location}: padding has {len(pads)} items, expected 2")
    _conv_impl(c, _out(op), x, w, _bias_vector(c, b, oc), groups, stride, dil, pads,
               str(op.inputs["filter"]), bias_name)


def _conv_impl(c: Converter, out: str, x: Val, w: np.ndarray, bias: np.ndarray, groups: int,
               stride, dil, pads, filter_name: str | None, bias_name: str | None) -> None:
    """CONV2D / DEPTHWISE_CONV2D for NNEF conv semantics (zero border), filter [O,I/g,h,w]."""
    n, ch, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    if ch % groups or oc % groups or cg * groups != ch:
        raise InvalidInput(f"{c.location}: filter {list(w.shape)} and groups={groups} do "
                           f"not fit {ch} input channels")
    _check_pads(c, pads)
    xin, pad = conv_input(c, x, (kh, kw), stride, dil, pads)
    kind, weight, block_diagonal = conv_weight(w, groups)
    if block_diagonal:
        c.notes.append(f"{c.location}: groups={groups} convolution as a block-diagonal "
                       f"CONV2D")
    wname, bname = _params(c, out, weight, bias, filter_name, bias_name, "weight")
    zp = c.zero_point("fp32")
    c.result(out, kind, [xin, wname, bname, zp, zp], NHWC, conv_attrs(pad, stride, dil))


@handles("deconv")
def _deconv(c: Converter, op) -> None:
    x, b, w, bias_name = _filtered(c, op)
    if int(op.attribs.get("groups", 1)) != 1:
        raise Unsupported(f"{c.location}: grouped deconv has no TOSA TRANSPOSE_CONV2D form")
    stride = _spatial(op.attribs.get("stride"), 2, 1, "stride", c)
    dil = _spatial(op.attribs.get("dilation"), 2, 1, "dilation", c)
    if dil != [1, 1]:
        raise Unsupported(f"{c.location}: dilated deconv is not supported")
    n, ic, h, wd = x.shape
    cin, oc, kh, kw = w.shape
    out = _out(op)
    _, _, oh, ow = c.nnef_shape(out)
    pads = ([tuple(p) for p in op.attribs["padding"]] if op.attribs.get("padding")
            else _auto_padding((oh, ow), (kh, kw), stride, dil))
    # TOSA: oy = iy * stride + out_pad_top + ky; NNEF: i = t * s - p + j.
    opt, opl = -pads[0][0], -pads[1][0]
    opb = oh - (h - 1) * stride[0] - kh - opt
    opr = ow - (wd - 1) * stride[1] - kw - opl
    if min(opt, opb) <= -kh or min(opl, opr) <= -kw:
        raise Unsupported(f"{c.location}: deconv padding {pads} exceeds the kernel")
    weight = w.transpose(1, 2, 3, 0)          # [OC, KH, KW, IC]
    wname, bname = _params(c, out, weight, _bias_vector(c, b, oc), str(op.inputs["filter"]),
                           bias_name, "deconv_weight")
    zp = c.zero_point("fp32")
    attrs = {"out_pad": [opt, opb, opl, opr], "stride": stride, "local_bound": False,
             "acc_type": "FP32"}
    c.result(out, "TRANSPOSE_CONV2D", [c.physical(x, NHWC), wname, bname, zp, zp], NHWC, attrs)


# ---------------------------------------------------------------------------------------
# Pooling and box filters
# ---------------------------------------------------------------------------------------
def _window(c: Converter, op, x: Val):
    """Kernel, stride, dilation, padding of a 4-D window op, checked for N and C."""
    size = _ints(op.attribs["size"])
    if len(size) != 4:
        raise InvalidInput(f"{c.location}: size {size} must have 4 items")
    stride = _spatial(op.attribs.get("stride"), 4, 1, "stride", c)
    dil = _spatial(op.attribs.get("dilation"), 4, 1, "dilation", c)
    pads = ([tuple(p) for p in op.attribs["padding"]] if op.attribs.get("padding")
            else _auto_padding(x.shape, size, stride, dil))
    if len(pads) != 4:
        raise InvalidInput(f"{c.location}: padding has {len(pads)} items, expected 4")
    if size[:2] != [1, 1] or stride[:2] != [1, 1] or dil[:2] != [1, 1] or \
            any(p != (0, 0) for p in pads[:2]):
        raise Unsupported(f"{c.location}: windows over the batch or channel dimension")
    _check_pads(c, pads)
    return size[2:], stride[2:], dil[2:], [list(p) for p in pads[2:]]


def _pool(c: Converter, op, kind: str, x: Val, kernel, stride, pads, border: str,
          explicit_pad: bool) -> None:
    """MAX_POOL2D/AVG_POOL2D; ``explicit_pad``: padding is zeros taking part (PAD op)."""
    xin = c.physical(x, NHWC)
    shape = list(c.block.tensors[xin].shape)
    (pt, pb), (pl, pr) = pads
    pb, drop_h = fit_window(shape[1], kernel[0], stride[0], 1, pt, pb)
    pr, drop_w = fit_window(shape[2], kernel[1], stride[1], 1, pl, pr)
    if drop_h or drop_w:
        xin = slice_tail(c, xin, {1: drop_h, 2: drop_w})
    if explicit_pad and any((pt, pb, pl, pr)):
        xin = zero_pad_hw(c, xin, (pt, pb, pl, pr), xin)
        pt = pb = pl = pr = 0
    if pt >= kernel[0] or pb >= kernel[0] or pl >= kernel[1] or pr >= kernel[1]:
        raise Unsupported(f"{c.location}: {border!r} padding {pads} is not smaller than the "
                          f"kernel {kernel}")
    inputs, attrs = pool_operands(c, kind, xin, kernel, stride, [pt, pb, pl, pr])
    c.result(_out(op), kind, inputs, NHWC, attrs)


_POOLS = {"max_pool": "MAX_POOL2D", "avg_pool": "AVG_POOL2D"}


@handles(*_POOLS)
def _max_avg_pool(c: Converter, op) -> None:
    x = c.val(op.inputs["input"])
    _check_rank4(c, x, op.name)
    kernel, stride, dil, pads = _window(c, op, x)
    if dil != [1, 1]:
        raise Unsupported(f"{c.location}: dilated {op.name}")
    border = _border(c, op, ("ignore", "constant"))
    _pool(c, op, _POOLS[op.name], x, kernel, stride, pads, border, border == "constant")


@handles("box")
def _box(c: Converter, op) -> None:
    x = c.val(op.inputs["input"])
    _check_rank4(c, x, "box")
    kernel, stride, dil, pads = _window(c, op, x)
    normalize = bool(op.attribs.get("normalize", False))
    border = _border(c, op, ("ignore", "constant"))
    if border == "ignore":
        if not normalize or dil != [1, 1]:
            raise Unsupported(f"{c.location}: box with border 'ignore' is supported only "
                              f"normalized and undilated (average pooling)")
        _pool(c, op, "AVG_POOL2D", x, kernel, stride, pads, border, False)
        return
    # Zero border: a depthwise convolution with a constant kernel.
    ch = x.shape[1]
    value = 1.0 / (kernel[0] * kernel[1]) if normalize else 1.0
    _conv_impl(c, _out(op), x, _ones_filter(ch, kernel[0], kernel[1], value),
               np.zeros(ch, np.float32), ch, stride, dil, pads, None, None)


def _ones_filter(channels: int, kh: int, kw: int, value: float) -> np.ndarray:
    return np.full((channels, 1, kh, kw), value, np.float32)


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------
def _reduce(c: Converter, op, kind: str) -> None:
    x = c.val(op.inputs["input"])
    axes = sorted(set(_ints(op.attribs["axes"])))
    normalize = kind == "mean" or bool(op.attribs.get("normalize", False))
    out = _out(op)
    if any(a < 0 or a >= x.rank for a in axes):
        raise InvalidInput(f"{c.location}: axes {axes} out of range for rank {x.rank}")
    if x.is_const:
        data = x.data.reshape(x.shape).astype(np.float64)
        fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[
            "mean" if normalize else kind]
        c.set_result(out, Val(c.nnef_shape(out), x.dtype,
                              data=fn(data, axis=tuple(axes), keepdims=True).astype(np.float32)))
        return
    if x.rank == 4 and axes == [2, 3] and kind in ("sum", "mean", "max"):
        # Global pooling over H and W: the spatial operators the NPU runs.
        h, w = x.shape[2], x.shape[3]
        if kind == "max":
            _pool(c, op, "MAX_POOL2D", x, [h, w], [1, 1], [[0, 0], [0, 0]], "ignore", False)
        elif normalize:
            _pool(c, op, "AVG_POOL2D", x, [h, w], [1, 1], [[0, 0], [0, 0]], "ignore", False)
        else:
            ch = x.shape[1]
            _conv_impl(c, out, x, _ones_filter(ch, h, w, 1.0), np.zeros(ch, np.float32), ch,
                       [1, 1], [1, 1], [[0, 0], [0, 0]], None, None)
        return
    tosa_op = {"sum": "REDUCE_SUM", "mean": "REDUCE_SUM", "max": "REDUCE_MAX",
               "min": "REDUCE_MIN"}[kind]
    cur, count = c.reduce_axes(x, tosa_op, axes, out + "_red")
    val = Val(c.nnef_shape(out), x.dtype, cur, x.perm)
    if normalize and kind in ("sum", "mean"):
        scale = Val((), "fp32", data=np.asarray(1.0 / count, np.float32))
        val = _binary_vals(c, "MUL", val, scale, out)
    c.set_result(out, val)


for _name in ("sum", "mean", "max", "min"):
    handles(f"{_name}_reduce")(lambda c, op, _n=_name: _reduce(c, op, _n))


# ---------------------------------------------------------------------------------------
# Element-wise operations
# ---------------------------------------------------------------------------------------
_FOLD_BINARY = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
    "POW": np.power, "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
    "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal, "EQUAL": np.equal,
    "LESS": np.less, "LESS_EQUAL": np.less_equal, "NOT_EQUAL": np.not_equal,
    "LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or,
}


def _nnef_broadcast(shapes) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    padded = [tuple(s) + (1,) * (rank - len(s)) for s in shapes]
    out = []
    for dims in zip(*padded):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(big.pop() if big else 1)
    return tuple(out)


def _as_layout(c: Converter, v: Val, rank: int, perm, base: str) -> str:
    """``v`` as a TOSA tensor of rank ``rank`` in layout ``perm`` (broadcastable)."""
    if v.is_const:
        data = np.asarray(v.data).reshape(tuple(v.shape) + (1,) * (rank - v.rank))
        return c.const(data.transpose(perm), v.dtype, base + "_c")
    v = c.broadcast_rank(v, rank, base + "_bc")
    return c.physical(v, perm)


def _binary_vals(c: Converter, tosa_op: str, x: Val, y: Val, out: str,
                 out_dtype: str | None = None) -> Val:
    """Element-wise ``tosa_op`` on two values with NNEF broadcasting; folds constants."""
    try:
        shape = _nnef_broadcast([x.shape, y.shape])
    except ValueError as err:
        raise InvalidInput(f"{c.location}: {err}") from None
    rank = len(shape)
    dtype = out_dtype or (x.dtype if not x.is_const else y.dtype)
    if x.is_const and y.is_const:
        a = np.asarray(x.data).reshape(tuple(x.shape) + (1,) * (rank - x.rank))
        b = np.asarray(y.data).reshape(tuple(y.shape) + (1,) * (rank - y.rank))
        with np.errstate(all="ignore"):
            data = _FOLD_BINARY[tosa_op](a, b)
        return Val(shape, dtype, data=np.asarray(data).astype(_NP_OF[dtype]))
    lead = next(v for v in (x, y) if not v.is_const and v.rank == rank) \
        if any(not v.is_const and v.rank == rank for v in (x, y)) else None
    perm = lead.perm if lead is not None else identity(rank)
    a = _as_layout(c, x, rank, perm, out + "_a")
    b = _as_layout(c, y, rank, perm, out + "_b")
    inputs = [a, b]
    if tosa_op == "MUL":
        inputs.append(c.mul_shift())
    tshape = [shape[p] for p in perm]
    if tosa_op in ("LESS", "LESS_EQUAL"):      # TOSA has GREATER[_EQUAL] only
        tosa_op, inputs = {"LESS": "GREATER", "LESS_EQUAL": "GREATER_EQUAL"}[tosa_op], [b, a]
    if tosa_op == "NOT_EQUAL":
        eq = c.emit("EQUAL", inputs, tshape, "bool", base=out + "_eq")
        name = c.emit("LOGICAL_NOT", [eq], tshape, "bool", base=out)
        return Val(shape, "bool", name, perm)
    name = c.emit(tosa_op, inputs, tshape, dtype, base=out)
    return Val(shape, dtype, name, perm)


def _set_named(c: Converter, out: str, val: Val) -> None:
    """Record ``val`` as NNEF tensor ``out``, giving the TOSA tensor the NNEF name."""
    fresh_op = (val.name is not None and c.block.operators
                and c.block.operators[-1].outputs == [val.name]
                and not c.has_result_named(val.name)
                and val.name not in c.physical_names())
    if fresh_op and out not in c.block.tensors and val.name != out:
        c.rename(val.name, out)
        val = Val(val.shape, val.dtype, out, val.perm)
    c.set_result(out, val)


def _clamp_val(c: Converter, x: Val, lo: float, hi: float, out: str) -> Val:
    if x.is_const:
        data = np.clip(np.asarray(x.data, np.float32), lo, hi)
        return Val(x.shape, x.dtype, data=data)
    name = c.emit("CLAMP", [x.name], [x.shape[p] for p in x.perm], x.dtype,
                  {"min_val": float(lo), "max_val": float(hi), "nan_mode": "PROPAGATE"},
                  base=out)
    return Val(x.shape, x.dtype, name, x.perm)


def _scalar_const(v: Val) -> float | None:
    if v.is_const and np.asarray(v.data).size == 1:
        return float(np.asarray(v.data).reshape(-1)[0])
    return None


def _binary(c: Converter, op, nnef_name: str) -> None:
    x, y = c.val(op.inputs["x"]), c.val(op.inputs["y"])
    out = _out(op)
    kind = {"add": "ADD", "sub": "SUB", "mul": "MUL", "div": "DIV", "pow": "POW",
            "min": "MINIMUM", "max": "MAXIMUM", "lt": "LESS", "gt": "GREATER",
            "le": "LESS_EQUAL", "ge": "GREATER_EQUAL", "eq": "EQUAL", "ne": "NOT_EQUAL",
            "and": "LOGICAL_AND", "or": "LOGICAL_OR"}[nnef_name]
    out_dtype = "bool" if nnef_name in ("lt", "gt", "le", "ge", "eq", "ne", "and", "or") \
        else None
    if not (x.is_const and y.is_const):
        # Forms the quantizer (and TOSA) handle better: x - c -> x + (-c), x / c -> x * 1/c,
        # max(x, c) / min(x, c) -> CLAMP, x ^ 2 -> x * x.
        if kind == "SUB" and y.is_const:
            kind, y = "ADD", Val(y.shape, y.dtype, data=-np.asarray(y.data))
        elif kind == "DIV" and y.is_const:
            with np.errstate(divide="ignore"):
                kind, y = "MUL", Val(y.shape, y.dtype,
                                     data=(1.0 / np.asarray(y.data, np.float64))
                                     .astype(np.float32))
        elif kind in ("MAXIMUM", "MINIMUM") and (_scalar_const(y) is not None or
                                                 _scalar_const(x) is not None):
            t, s = (x, _scalar_const(y)) if _scalar_const(y) is not None else \
                (y, _scalar_const(x))
            if t.shape == c.nnef_shape(out):
                lo, hi = (s, FLOAT_MAX) if kind == "MAXIMUM" else (-FLOAT_MAX, s)
                _set_named(c, out, _clamp_val(c, t, lo, hi, out))
                return
        elif kind == "POW" and _scalar_const(y) == 2.0:
            kind, y = "MUL", x
        elif kind == "DIV":
            if x.dtype != "fp32":
                raise Unsupported(f"{c.location}: integer division")
            rcp = c.emit("RECIPROCAL", [y.name], [y.shape[p] for p in y.perm], y.dtype,
                         base=out + "_rcp")
            kind, y = "MUL", Val(y.shape, y.dtype, rcp, y.perm)
    _set_named(c, out, _binary_vals(c, kind, x, y, out, out_dtype))


for _name in ("add", "sub", "mul", "div", "pow", "min", "max", "lt", "gt", "le", "ge", "eq",
              "ne", "and", "or"):
    handles(_name)(lambda c, op, _n=_name: _binary(c, op, _n))


_UNARY = {"neg": "NEGATE", "exp": "EXP", "log": "LOG", "abs": "ABS", "rcp": "RECIPROCAL",
          "floor": "FLOOR", "ceil": "CEIL", "sin": "SIN", "cos": "COS", "tanh": "TANH",
          "sigmoid": "SIGMOID", "not": "LOGICAL_NOT"}
_FOLD_UNARY = {"neg": np.negative, "exp": np.exp, "log": np.log, "abs": np.abs,
               "rcp": np.reciprocal, "floor": np.floor, "ceil": np.ceil, "sin": np.sin,
               "cos": np.cos, "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
               "not": np.logical_not, "sign": np.sign, "round": lambda v: np.floor(v + 0.5)}


def _unary(c: Converter, op, nnef_name: str) -> None:
    x = c.val(op.inputs["x"])
    out = _out(op)
    if x.is_const:
        with np.errstate(all="ignore"):
            data = _FOLD_UNARY[nnef_name](np.asarray(x.data))
        c.set_result(out, Val(x.shape, x.dtype, data=np.asarray(data).astype(_NP_OF[x.dtype])))
        return
    if nnef_name not in _UNARY:
        raise Unsupported(f"{c.location}: '{nnef_name}' of a computed tensor has no TOSA "
                          f"mapping")
    inputs = [x.name]
    if nnef_name == "neg":
        zp = c.zero_point(x.dtype)
        inputs += [zp, zp]
    c.result(out, _UNARY[nnef_name], inputs, x.perm)


for _name in _FOLD_UNARY:
    handles(_name)(lambda c, op, _n=_name: _unary(c, op, _n))


@handles("relu")
def _relu(c: Converter, op) -> None:
    x = c.val(op.inputs["x"])
    _set_named(c, _out(op), _clamp_val(c, x, 0.0, FLOAT_MAX, _out(op)))


@handles("clamp")
def _clamp(c: Converter, op) -> None:
    x, a, b = c.val(op.inputs["x"]), c.val(op.inputs["a"]), c.val(op.inputs["b"])
    lo, hi = _scalar_const(a), _scalar_const(b)
    out = _out(op)
    if lo is not None and hi is not None:
        _set_named(c, out, _clamp_val(c, x, lo, hi, out))
        return
    low = _binary_vals(c, "MAXIMUM", x, a, out + "_lo")
    _set_named(c, out, _binary_vals(c, "MINIMUM", low, b, out))


@handles("select")
def _select(c: Converter, op) -> None:
    cond, t, f = (c.val(op.inputs[k]) for k in ("condition", "true_value", "false_value"))
    out = _out(op)
    shape = c.nnef_shape(out)
    if cond.is_const and np.asarray(cond.data).size == 1:
        c.set_result(out, t if bool(np.asarray(cond.data).reshape(-1)[0]) else f)
        return
    rank = len(shape)
    lead = next((v for v in (t, f, cond) if not v.is_const and v.rank == rank), None)
    perm = lead.perm if lead is not None else identity(rank)
    ins = [_as_layout(c, v, rank, perm, out + s) for v, s in ((cond, "_c"), (t, "_t"),
                                                               (f, "_f"))]
    c.result(out, "SELECT", ins, perm)


# ---------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------
@handles("softmax")
def _softmax(c: Converter, op) -> None:
    x = c.val(op.inputs["x"])
    axes = sorted(set(_ints(op.attribs.get("axes", [1]))))
    out = _out(op)
    if x.is_const:
        d = x.data.reshape(x.shape).astype(np.float64)
        e = np.exp(d - d.max(axis=tuple(axes), keepdims=True))
        c.set_result(out, Val(x.shape, "fp32",
                              data=(e / e.sum(axis=tuple(axes), keepdims=True)).astype(np.float32)))
        return
    shape = [x.shape[p] for p in x.perm]
    red = list(shape)
    m = x.name
    for a in axes:
        t = x.perm.index(a)
        red[t] = 1
        m = c.emit("REDUCE_MAX", [m], red, "fp32", {"axis": t, "nan_mode": "PROPAGATE"},
                   base=out + "_max")
    d = c.emit("SUB", [x.name, m], shape, "fp32", base=out + "_sub")
    e = c.emit("EXP", [d], shape, "fp32", base=out + "_exp")
    s, red = e, list(shape)
    for a in axes:
        t = x.perm.index(a)
        red[t] = 1
        s = c.emit("REDUCE_SUM", [s], red, "fp32", {"axis": t}, base=out + "_sum")
    r = c.emit("RECIPROCAL", [s], red, "fp32", base=out + "_rcp")
    shift = c.mul_shift()
    c.result(out, "MUL", [e, r, shift], x.perm)


# ---------------------------------------------------------------------------------------
# Matrix multiplication
# ---------------------------------------------------------------------------------------
def _transposed_view(v: Val, axes) -> Val:
    """NNEF ``transpose(v, axes)`` by bookkeeping only (no operator)."""
    axes = list(axes) + list(range(len(axes), v.rank))
    shape = tuple(v.shape[a] for a in axes)
    if v.is_const:
        return Val(shape, v.dtype, data=np.asarray(v.data).reshape(v.shape).transpose(axes))
    inv = np.argsort(axes)
    perm = tuple(int(inv[p]) for p in v.perm)
    return Val(shape, v.dtype, v.name, perm)


def _fully_connected(c: Converter, a: Val, weight: np.ndarray, bias: np.ndarray,
                     out: str, filter_name: str | None, bias_name: str | None) -> None:
    """``a [m, k] @ weight.T + bias`` as RESHAPE -> 1x1 CONV2D -> RESHAPE."""
    m, k = a.shape
    n = weight.shape[0]
    x4 = c.reshaped(a, (m, 1, 1, k), out + "_in")
    wname, bname = _params(c, out, weight.reshape(n, 1, 1, k), bias, filter_name, bias_name,
                           "fc_weight")
    zp = c.zero_point("fp32")
    conv = c.emit("CONV2D", [x4.name, wname, bname, zp, zp], [m, 1, 1, n], "fp32",
                  conv_attrs([0, 0, 0, 0], [1, 1], [1, 1]), base=out + "_fc")
    c.result(out, "RESHAPE", [conv, c.shape_const([m, n], out + "_shape")], identity(2))


def _matmul_vals(c: Converter, a: Val, b: Val, out: str) -> Val:
    """General MATMUL of NNEF values (already transposed as needed), rank >= 2."""
    if a.shape[:-2] != b.shape[:-2]:
        raise Unsupported(f"{c.location}: matmul with broadcast batch dimensions")
    batch = int(np.prod(a.shape[:-2], dtype=np.int64))
    m, k = a.shape[-2:]
    n = b.shape[-1]
    a3 = c.reshaped(a, (batch, m, k), out + "_a") if not a.is_const else a
    b3 = c.reshaped(b, (batch, k, n), out + "_b") if not b.is_const else b
    an = c.physical(a3) if not a3.is_const else c.const(a3.data.reshape(batch, m, k), "fp32",
                                                        out + "_a")
    bn = c.physical(b3) if not b3.is_const else c.const(b3.data.reshape(batch, k, n), "fp32",
                                                        out + "_b")
    zp = c.zero_point("fp32")
    mm = c.emit("MATMUL", [an, bn, zp, zp], [batch, m, n], "fp32", base=out + "_mm")
    shape = tuple(a.shape[:-2]) + (m, n)
    return c.reshaped(Val((batch, m, n), "fp32", mm, identity(3)), shape, out)


@handles("matmul")
def _matmul(c: Converter, op) -> None:
    a, b = c.val(op.inputs["A"]), c.val(op.inputs["B"])
    out = _out(op)
    if a.rank != b.rank or a.rank < 2:
        raise InvalidInput(f"{c.location}: matmul needs equal ranks >= 2, got {a.rank} and "
                           f"{b.rank}")
    swap = lambda v: _transposed_view(v, list(range(v.rank - 2)) + [v.rank - 1, v.rank - 2])  # noqa: E731
    if op.attribs.get("transposeA"):
        a = swap(a)
    if op.attribs.get("transposeB"):
        b = swap(b)
    if a.is_const and b.is_const:
        c.set_result(out, Val(c.nnef_shape(out), "fp32",
                              data=np.matmul(a.data, b.data).astype(np.float32)))
        return
    if b.is_const and a.rank == 2:
        weight = np.asarray(b.data, np.float32).T          # [n, k]
        _fully_connected(c, a, weight, np.zeros(weight.shape[0], np.float32), out,
                         str(op.inputs["B"]), None)
        return
    _set_named(c, out, _matmul_vals(c, a, b, out))


@handles("linear")
def _linear(c: Converter, op) -> None:
    x, f, b = c.val(op.inputs["input"]), c.val(op.inputs["filter"]), c.val(op.inputs["bias"])
    out = _out(op)
    if x.rank != 2 or f.rank != 2:
        raise Unsupported(f"{c.location}: linear on rank {x.rank} input / rank {f.rank} "
                          f"filter (rank 2 expected)")
    if f.is_const and b.is_const and not x.is_const:
        bias_name = None if isinstance(op.inputs["bias"], float) else str(op.inputs["bias"])
        _fully_connected(c, x, np.asarray(f.data, np.float32), _bias_vector(c, b, f.shape[0]),
                         out, str(op.inputs["filter"]), bias_name)
        return
    prod = _matmul_vals(c, x, _transposed_view(f, [1, 0]), out + "_mm")
    _set_named(c, out, _binary_vals(c, "ADD", prod, b, out))


# ---------------------------------------------------------------------------------------
# Shape operations
# ---------------------------------------------------------------------------------------
@handles("reshape", "squeeze", "unsqueeze")
def _reshape(c: Converter, op) -> None:
    x = c.val(op.inputs["input"])
    out = _out(op)
    shape = c.nnef_shape(out)
    if x.is_const or tuple(shape) == tuple(x.shape):
        c.set_result(out, c.reshaped(x, shape, out))
        return
    src = c.physical(x)
    c.result(out, "RESHAPE", [src, c.shape_const(shape, out + "_shape")], identity(len(shape)))


@handles("transpose")
def _transpose(c: Converter, op) -> None:
    x = c.val(op.inputs["input"])
    axes = _ints(op.attribs["axes"])
    if sorted(axes) != list(range(len(axes))) or len(axes) > x.rank:
        raise InvalidInput(f"{c.location}: axes {axes} is not a permutation")
    c.set_result(_out(op), _transposed_view(x, axes))


@handles("concat")
def _concat(c: Converter, op) -> None:
    values = [c.val(v) for v in op.inputs["values"]]
    axis = int(op.attribs["axis"])
    out = _out(op)
    if all(v.is_const for v in values):
        data = np.concatenate([np.asarray(v.data).reshape(v.shape) for v in values], axis)
        c.set_result(out, Val(tuple(data.shape), values[0].dtype, data=data))
        return
    perms = {v.perm for v in values if not v.is_const}
    perm = perms.pop() if len(perms) == 1 else identity(values[0].rank)
    inputs = [c.physical(v, perm) for v in values]
    c.result(out, "CONCAT", inputs, perm, {"axis": perm.index(axis)})


@handles("split")
def _split(c: Converter, op) -> None:
    x = c.val(op.inputs["value"])
    axis = int(op.attribs["axis"])
    outs = [str(o) for o in op.outputs["values"]]
    ratios = _ints(op.attribs["ratios"])
    unit = x.shape[axis] // sum(ratios)
    begin = 0
    for name, ratio in zip(outs, ratios):
        _slice_val(c, x, name, {axis: (begin, begin + ratio * unit)})
        begin += ratio * unit


def _slice_val(c: Converter, x: Val, out: str, ranges: dict[int, tuple[int, int]]) -> None:
    if x.is_const:
        index = tuple(slice(*ranges[d]) if d in ranges else slice(None) for d in range(x.rank))
        c.set_result(out, Val(c.nnef_shape(out), x.dtype,
                              data=np.asarray(x.data).reshape(x.shape)[index]))
        return
    start = [ranges.get(p, (0, x.shape[p]))[0] for p in x.perm]
    size = [ranges.get(p, (0, x.shape[p]))[1] - ranges.get(p, (0, x.shape[p]))[0]
            for p in x.perm]
    c.result(out, "SLICE", [x.name, c.shape_const(start, out + "_start"),
                            c.shape_const(size, out + "_size")], x.perm)


@handles("slice")
def _slice(c: Converter, op) -> None:
    x = c.val(op.inputs["input"])
    axes, begin, end = (_ints(op.attribs[k]) for k in ("axes", "begin", "end"))
    if any(s != 1 for s in _ints(op.attribs.get("stride", []) or [])):
        raise Unsupported(f"{c.location}: strided slice")
    ranges = {}
    for a, b, e in zip(axes, begin, end):
        extent = x.shape[a]
        b = b + extent if b < 0 else b
        e = extent if e == 0 else (e + extent if e < 0 else e)
        b, e = max(0, min(b, extent)), max(0, min(e, extent))
        ranges[a] = (b, e)
    _slice_val(c, x, _out(op), ranges)


@handles("pad")
def _pad(c: Converter, op) -> None:
    x = c.val(op.inputs["input"])
    _border(c, op, ("constant",))
    padding = [tuple(_ints(p)) for p in op.attribs["padding"]]
    padding += [(0, 0)] * (x.rank - len(padding))
    _check_pads(c, padding)
    value = float(op.attribs.get("value", 0.0))
    out = _out(op)
    if x.is_const:
        data = np.pad(np.asarray(x.data).reshape(x.shape), padding, constant_values=value)
        c.set_result(out, Val(tuple(data.shape), x.dtype, data=data))
        return
    flat = [v for p in x.perm for v in padding[p]]
    pad_const = c.const(np.asarray([value]), x.dtype, out + "_padval", (1,))
    c.result(out, "PAD", [x.name, c.shape_const(flat, out + "_pads"), pad_const], x.perm)


def _unsupported_factory(name):
    def fn(c: Converter, op):
        raise Unsupported(f"{c.location}: NNEF operation '{name}' has no TOSA mapping in "
                          f"this frontend")
    return fn


for _name in ("update", "argmax_pool", "sample", "desample", "debox", "argmax_reduce",
              "argmin_reduce", "any_reduce", "all_reduce", "tile", "gather", "cast",
              "multilinear_upsample", "avg_roi_pool", "max_roi_pool", "roi_resample",
              "stack", "unstack", "local_response_normalization"):
    HANDLERS.setdefault(_name, _unsupported_factory(_name))
