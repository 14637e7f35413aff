"""OpenVINO layer handlers: each maps one layer (with a computed input) to float TOSA.

A handler ``fn(c, layer, ins) -> list[Val]`` takes the
:class:`~compiler.frontends.openvino.convert.Converter`, the layer and the converted values
of its inputs, and returns one :class:`Val` per output port.  Layers whose inputs are all
constant never get here: they are folded (:mod:`compiler.frontends.openvino.fold`).
Layer types without a handler raise :class:`Unsupported` naming the layer.
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.registry import handler_registry
from compiler.frontends.common.graph_builder import FLOAT_MAX, NHWC, identity
from compiler.frontends.openvino.bin import element_type, parse_shape, read_const
from compiler.frontends.openvino.convert import Converter, Val
from compiler.frontends.openvino.fold import (
    int_list, norm_axis, reshape_target, shape_of, slice8_index, split_ranges,
    squeeze_shape, strided_slice_index, transpose_order, unsqueeze_shape,
)
from compiler.frontends.openvino.quant import (
    activation_params, dequantizing_params, quantizing_codes, quantizing_params, weight_params,
)
from compiler.frontends.openvino.xml import (
    Layer, attr_bool, attr_float, attr_int, attr_ints, attr_str,
)
from compiler.frontends.common.windows import (
    conv_attrs, conv_input, conv_weight, pool_operands, slice_tail, zero_pad_hw,
)

HANDLERS, handles = handler_registry()


# ---------------------------------------------------------------------------------------
# Graph inputs, constants, outputs
# ---------------------------------------------------------------------------------------
@handles("Parameter")
def _parameter(c: Converter, layer: Layer, ins):
    """A graph input.  f32/f16 inputs are fp32 tensors; i8/u8/i16 inputs (OpenVINO's
    converters keep a quantized model's integer input, i16 for TFLite's 16x8 models) are
    fp32 tensors of the *real* values their dequantizing FakeQuantize gives, marked as
    codes until then."""
    et = element_type(layer)
    shape = parse_shape(layer)
    if et not in ("f32", "f16", "i8", "u8", "i16"):
        raise c.unsupported(f"graph input of element type '{et}' (only f32, f16, i8, u8, i16)")
    if et == "f16":
        c.notes.append(f"{layer.where}: f16 input held as fp32")
    c.check_shape(shape)
    if any(d == 0 for d in shape):
        raise c.invalid(f"empty input shape {list(shape)}")
    perm = c.input_perm(layer, len(shape))
    name = c.fresh(layer.name or "input")
    c.tensor(name, [shape[p] for p in perm], "fp32")
    c.block.inputs.append(name)
    c.boundary[name] = tuple(perm)
    codes = et if et in ("i8", "u8", "i16") else None
    if codes:
        c.code_inputs[name] = et
    return [Val(shape, "fp32", name, perm, codes=codes)]


@handles("Const")
def _const(c: Converter, layer: Layer, ins):
    return [Val.const(read_const(layer, c.weights))]


@handles("Result")
def _result(c: Converter, layer: Layer, ins):
    if len(ins) != 1:
        raise c.invalid(f"Result needs 1 input, has {len(ins)}")
    return [ins[0]]


def _need(c: Converter, ins, n: int, what: str = "inputs") -> None:
    if len(ins) < n:
        raise c.invalid(f"needs {n} {what}, has {len(ins)}")


def _activation(c: Converter, v: Val, what: str = "input") -> Val:
    if v.is_const:
        raise c.unsupported(f"{what} must be computed, not constant")
    if v.dtype != "fp32":
        raise c.unsupported(f"{what} of type {v.dtype} (only floating-point activations)")
    return v


# ---------------------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------------------
def _spatial(c: Converter, layer: Layer, key: str, default, n: int = 2) -> list[int]:
    values = attr_ints(layer, key, default)
    if len(values) != n:
        raise c.unsupported(f"'{key}' has {len(values)} items: only 2-D (NCHW) windows are "
                            f"supported")
    return values


def window_geometry(c: Converter, layer: Layer, in_hw, k_hw, dilated: bool = True):
    """Strides, dilations and (begin, end) pads of a 2-D window layer (auto_pad applied)."""
    strides = _spatial(c, layer, "strides", None)
    dil = _spatial(c, layer, "dilations", [1, 1]) if dilated else [1, 1]
    pb = _spatial(c, layer, "pads_begin", [0, 0])
    pe = _spatial(c, layer, "pads_end", [0, 0])
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
        raise c.invalid(f"strides {strides} and dilations {dil} must be positive")
    auto = attr_str(layer, "auto_pad", "explicit").lower()
    if auto in ("same_upper", "same_lower"):
        pb, pe = [], []
        for x, k, s, d in zip(in_hw, k_hw, strides, dil):
            out = -(-x // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - x, 0)
            lo = total // 2 if auto == "same_upper" else total - total // 2
            pb.append(lo)
            pe.append(total - lo)
    elif auto == "valid":
        pb, pe = [0, 0], [0, 0]
    elif auto not in ("explicit", "notset", ""):
        raise c.invalid(f"unknown auto_pad '{auto}'")
    if any(p < 0 for p in pb + pe):
        raise c.unsupported(f"negative padding {pb}/{pe}")
    return strides, dil, pb, pe


def _weights(c: Converter, v: Val, what: str = "weights") -> np.ndarray:
    data = c.const_data(v, what)
    if data.dtype.kind != "f":
        raise c.unsupported(f"{what} of type {data.dtype} (floating-point or dequantized "
                            f"weights expected)")
    return data.astype(np.float32)


def _weight_given(c: Converter, wname: str, v: Val, oc: int) -> None:
    """Record the per-output-channel parameters of quantized weights ``v``.

    ``v``'s first axis (after grouping is flattened) runs over the output channels.
    """
    if v.quant is None:
        return
    q = v.quant.apply(lambda a: a.reshape(oc, -1))
    qp, notes = weight_params(q, 0, c.where)
    c.notes.extend(notes)
    if qp is not None:
        c.weight_given[wname] = qp


def _conv_common(c: Converter, layer: Layer, x: Val, w_oihw: np.ndarray, groups: int,
                 wval: Val) -> Val:
    """CONV2D / DEPTHWISE_CONV2D for weights [O, I/groups, KH, KW] and zero bias."""
    n, ch, h, wd = x.shape
    oc, cg, kh, kw = w_oihw.shape
    if cg * groups != ch or oc % groups:
        raise c.invalid(f"weights {list(w_oihw.shape)} with {groups} group(s) do not fit "
                        f"{ch} input channels")
    strides, dil, pb, pe = window_geometry(c, layer, (h, wd), (kh, kw))
    out_h = (h + pb[0] + pe[0] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
    out_w = (wd + pb[1] + pe[1] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
    if out_h <= 0 or out_w <= 0:
        raise c.invalid(f"kernel {kh}x{kw} is larger than the padded input {h}x{wd}")
    out_shape = c.check_shape((n, oc, out_h, out_w))
    # Exact TOSA sizes: rows no window reaches come off the end padding, else a SLICE
    # drops them from the input (compiler.frontends.common.windows); the kernel keeps its size.
    xin, pad = conv_input(c, x, (kh, kw), strides, dil, ((pb[0], pe[0]), (pb[1], pe[1])))
    kind, weight, block_diagonal = conv_weight(w_oihw, groups)
    if block_diagonal:
        c.notes.append(f"{c.where}: {groups}-group convolution as a block-diagonal CONV2D")
    wname = c.const(weight, "fp32", c.base("_weight"))
    _weight_given(c, wname, wval, oc)
    bname = c.const(np.zeros(oc, np.float32), "fp32", c.base("_bias"))
    zp = c.zero_point()
    return c.result(kind, [xin, wname, bname, zp, zp], out_shape, NHWC,
                    conv_attrs(pad, strides, dil))


def _rank4(c: Converter, x: Val, what: str) -> None:
    if x.rank != 4:
        raise c.unsupported(f"{what} on rank-{x.rank} data (only 2-D, rank-4 NCHW)")


def _conv_operands(c: Converter, layer: Layer, ins, rank: int, form: str = ""):
    """The activation, the weights value and its float data (of rank ``rank``)."""
    _need(c, ins, 2)
    x, w = _activation(c, ins[0]), ins[1]
    _rank4(c, x, layer.type)
    weights = _weights(c, w)
    if weights.ndim != rank:
        raise c.invalid(f"weights have rank {weights.ndim}, expected {rank}{form}")
    return x, w, weights


@handles("Convolution")
def _convolution(c: Converter, layer: Layer, ins):
    x, w, weights = _conv_operands(c, layer, ins, 4)
    return [_conv_common(c, layer, x, weights, 1, w)]


@handles("GroupConvolution")
def _group_convolution(c: Converter, layer: Layer, ins):
    x, w, weights = _conv_operands(c, layer, ins, 5, " [G, O, I, KH, KW]")
    g, og, ig, kh, kw = weights.shape
    flat = weights.reshape(g * og, ig, kh, kw)
    wflat = c.reshaped(w, (g * og, ig, kh, kw)) if w.quant is not None else w
    return [_conv_common(c, layer, x, flat, g, wflat)]


@handles("ConvolutionBackpropData")
def _convolution_backprop_data(c: Converter, layer: Layer, ins):
    """TRANSPOSE_CONV2D.  OpenVINO: ``out[o*s - pb + k] += x[o] * w[ci, co, k]`` (weights
    [C_in, C_out, KH, KW], not flipped), output size ``(H - 1) * s + KH - pb - pe +
    output_padding``; TOSA: ``out[i*s + out_pad_top + k] += x[i] * w[co, k, ci]``, so the
    weights become [C_out, KH, KW, C_in] and the pads ``out_pad = -pads`` (the end one plus
    output_padding).  With the optional output_shape input (OpenVINO's TFLite and
    TensorFlow frontends write TRANSPOSE_CONV that way) pads_begin/pads_end are ignored:
    ``total = s * (H - 1) + KH - output_shape + output_padding`` is split with the larger
    half at the end, at the beginning for auto_pad same_upper (the operator's spec)."""
    output_shape = None
    if len(ins) > 2:
        output_shape = _output_shape(c, ins[2])
    x, w, weights = _conv_operands(c, layer, ins[:2], 4)
    n, ch, h, wd = x.shape
    cin, oc, kh, kw = weights.shape
    if cin != ch:
        raise c.invalid(f"weights {list(weights.shape)} do not fit {ch} input channels")
    strides = _spatial(c, layer, "strides", [1, 1])
    dil = _spatial(c, layer, "dilations", [1, 1])
    if dil != [1, 1]:
        raise c.unsupported(f"dilations {dil} (TOSA TRANSPOSE_CONV2D has none)")
    if any(s <= 0 for s in strides):
        raise c.invalid(f"strides {strides} must be positive")
    auto = attr_str(layer, "auto_pad", "explicit").lower()
    extra = _spatial(c, layer, "output_padding", [0, 0])
    if output_shape is not None:
        total = [strides[i] * ((h, wd)[i] - 1) + (kh, kw)[i] - output_shape[i] + extra[i]
                 for i in range(2)]
        small = [t // 2 for t in total]
        big = [t - b for t, b in zip(total, small)]
        pb, pe = (big, small) if auto == "same_upper" else (small, big)
    elif auto not in ("explicit", "notset", "", "valid"):
        raise c.unsupported(f"auto_pad '{auto}' on {layer.type} without output_shape")
    else:
        pb = [0, 0] if auto == "valid" else _spatial(c, layer, "pads_begin", [0, 0])
        pe = [0, 0] if auto == "valid" else _spatial(c, layer, "pads_end", [0, 0])
    out_pad = [-pb[0], -pe[0] + extra[0], -pb[1], -pe[1] + extra[1]]
    if min(out_pad[:2]) <= -kh or min(out_pad[2:]) <= -kw:
        raise c.unsupported(f"padding {pb}/{pe} exceeds the {kh}x{kw} kernel")
    out_h = (h - 1) * strides[0] + kh + out_pad[0] + out_pad[1]
    out_w = (wd - 1) * strides[1] + kw + out_pad[2] + out_pad[3]
    if out_h <= 0 or out_w <= 0:
        raise c.invalid(f"output size {out_h}x{out_w} is empty")
    out_shape = c.check_shape((n, oc, out_h, out_w))
    wname = c.const(np.ascontiguousarray(weights.transpose(1, 2, 3, 0)), "fp32", c.base("_weight"))
    if w.quant is not None:
        _weight_given(c, wname, _transposed(w, (1, 0, 2, 3)), oc)
    bname = c.const(np.zeros(oc, np.float32), "fp32", c.base("_bias"))
    zp = c.zero_point()
    attrs = {"out_pad": out_pad, "stride": list(strides), "local_bound": False, "acc_type": "FP32"}
    return [c.result("TRANSPOSE_CONV2D", [c.physical(x, NHWC), wname, bname, zp, zp], out_shape, NHWC, attrs)]


def _output_shape(c: Converter, v: Val) -> list[int]:
    """The spatial output size [H, W] a ConvolutionBackpropData's third input gives."""
    if not v.is_const:
        raise c.unsupported("a computed output_shape input (only a constant)")
    size = [int(d) for d in np.asarray(v.data).reshape(-1)]
    if len(size) != 2 or min(size) <= 0:
        raise c.invalid(f"output_shape {size} (expected 2 positive spatial sizes)")
    return size


# ---------------------------------------------------------------------------------------
# Matrix products
# ---------------------------------------------------------------------------------------
def _swap_last(v: Val) -> Val:
    order = list(range(v.rank - 2)) + [v.rank - 1, v.rank - 2]
    return _transposed(v, order)


def _transposed(v: Val, order) -> Val:
    """OpenVINO ``Transpose(v, order)`` by bookkeeping only (no operator)."""
    shape = tuple(v.shape[a] for a in order)
    if v.is_const:
        q = v.quant.apply(lambda a: a.transpose(order)) if v.quant is not None else None
        return Val(shape, v.dtype, data=np.ascontiguousarray(np.asarray(v.data)
                                                             .transpose(order)), quant=q)
    inv = np.argsort(order)
    perm = tuple(int(inv[p]) for p in v.perm)
    return Val(shape, v.dtype, v.name, perm, codes=v.codes)


def fully_connected(c: Converter, a: Val, wval: Val, out_shape) -> Val:
    """``a [..., K] @ W.T`` for constant ``wval`` [N, K] as RESHAPE -> 1x1 CONV2D -> RESHAPE."""
    weight = _weights(c, wval)
    n, k = weight.shape
    rows = int(np.prod(a.shape[:-1], dtype=np.int64))
    x4 = c.reshaped(a, (rows, 1, 1, k), c.base("_in"))
    wname = c.const(weight.reshape(n, 1, 1, k), "fp32", c.base("_weight"))
    _weight_given(c, wname, wval, n)
    bname = c.const(np.zeros(n, np.float32), "fp32", c.base("_bias"))
    zp = c.zero_point()
    conv = c.emit("CONV2D", [c.physical(x4), wname, bname, zp, zp], [rows, 1, 1, n], "fp32",
                  conv_attrs([0, 0, 0, 0], [1, 1], [1, 1]), base=c.base("_fc"))
    return c.reshaped(Val((rows, 1, 1, n), "fp32", conv, identity(4)), out_shape)


@handles("MatMul")
def _matmul(c: Converter, layer: Layer, ins):
    _need(c, ins, 2)
    a, b = ins
    if a.rank < 2 or b.rank < 2:
        raise c.unsupported("MatMul of 1-D operands")
    if attr_bool(layer, "transpose_a"):
        a = _swap_last(a)
    if attr_bool(layer, "transpose_b"):
        b = _swap_last(b)
    if a.shape[-1] != b.shape[-2]:
        raise c.invalid(f"MatMul inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out_shape = c.check_shape(tuple(batch) + (a.shape[-2], b.shape[-1]))
    if b.is_const and all(d == 1 for d in b.shape[:-2]) and not a.is_const:
        _activation(c, a)
        w = c.reshaped(_swap_last(b), b.shape[-1:] + b.shape[-2:-1])   # [N, K]
        return [fully_connected(c, a, w, out_shape)]
    if a.shape[:-2] != b.shape[:-2]:
        raise c.unsupported("MatMul with broadcast batch dimensions")
    nb = int(np.prod(a.shape[:-2], dtype=np.int64))
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    names = []
    for v, shape in ((a, (nb, m, k)), (b, (nb, k, n))):
        v3 = c.reshaped(v, shape, c.base("_mm_in"))
        names.append(c.physical(v3) if not v3.is_const else
                     c.const(np.asarray(v3.data, np.float32), "fp32", c.base("_mm_const")))
    if b.is_const or a.is_const:
        c.notes.append(f"{c.where}: MatMul with a constant operand of batch {nb} or on the "
                       f"left: per-tensor weight quantization")
    zp = c.zero_point()
    mm = c.emit("MATMUL", names + [zp, zp], (nb, m, n), "fp32", base=c.base("_mm"))
    return [c.reshaped(Val((nb, m, n), "fp32", mm, identity(3)), out_shape)]


# ---------------------------------------------------------------------------------------
# Element-wise
# ---------------------------------------------------------------------------------------
def _as_layout(c: Converter, v: Val, rank: int, perm, base: str) -> str:
    """``v`` as a TOSA tensor of rank ``rank`` in layout ``perm`` (numpy broadcasting:
    missing dimensions are leading ones)."""
    if v.is_const:
        data = np.asarray(v.data).reshape((1,) * (rank - v.rank) + tuple(v.shape))
        dtype = "fp32" if data.dtype.kind == "f" else v.dtype
        return c.const(data.transpose(perm), dtype, base)
    if v.rank < rank:
        v = c.reshaped(v, (1,) * (rank - v.rank) + tuple(v.shape), base + "_bc")
    return c.physical(v, perm)


def _scalar(v: Val) -> float | None:
    if not v.is_const:
        return None
    data = np.asarray(v.data).reshape(-1)
    if data.size and np.all(data == data[0]):
        return float(data[0])
    return None


def clamp(c: Converter, x: Val, lo: float, hi: float) -> Val:
    lo, hi = max(lo, -FLOAT_MAX), min(hi, FLOAT_MAX)
    return c.result("CLAMP", [x.name], x.shape, x.perm,
                    {"min_val": float(lo), "max_val": float(hi), "nan_mode": "PROPAGATE"})


def binary(c: Converter, kind: str, a: Val, b: Val, out_shape) -> Val:
    """Element-wise TOSA ``kind`` with numpy broadcasting in the layout of the data."""
    rank = len(out_shape)
    lead = next((v for v in (a, b) if not v.is_const and v.rank == rank), None)
    perm = lead.perm if lead is not None else identity(rank)
    x = _as_layout(c, a, rank, perm, c.base("_a"))
    y = _as_layout(c, b, rank, perm, c.base("_b"))
    inputs = [x, y] + ([c.mul_shift()] if kind == "MUL" else [])
    return c.result(kind, inputs, out_shape, perm)


_BINARY = {"Add": "ADD", "Subtract": "SUB", "Multiply": "MUL", "Maximum": "MAXIMUM",
           "Minimum": "MINIMUM", "Divide": "DIV"}


@handles(*_BINARY)
def _binary(c: Converter, layer: Layer, ins):
    _need(c, ins, 2)
    a, b = ins
    mode = attr_str(layer, "auto_broadcast", "numpy").lower()
    if mode == "none" and a.shape != b.shape:
        raise c.invalid(f"shapes {list(a.shape)} and {list(b.shape)} differ and "
                        f"auto_broadcast is none")
    if mode not in ("none", "numpy"):
        raise c.unsupported(f"auto_broadcast '{mode}'")
    for v in (a, b):
        if not v.is_const:
            _activation(c, v)
    try:
        out_shape = c.check_shape(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise c.invalid(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") \
            from None
    kind = _BINARY[layer.type]
    if kind == "SUB" and b.is_const:
        kind, b = "ADD", Val.const(-np.asarray(b.data, np.float32))
    elif kind == "DIV" and b.is_const:
        with np.errstate(divide="ignore"):
            kind, b = "MUL", Val.const((1.0 / np.asarray(b.data, np.float64))
                                       .astype(np.float32))
    elif kind in ("MAXIMUM", "MINIMUM") and (_scalar(a) is not None or _scalar(b) is not None):
        t, s = (a, _scalar(b)) if _scalar(b) is not None else (b, _scalar(a))
        if tuple(t.shape) == tuple(out_shape):
            lo, hi = (s, FLOAT_MAX) if kind == "MAXIMUM" else (-FLOAT_MAX, s)
            return [clamp(c, t, lo, hi)]
    elif kind == "DIV":
        rcp = c.result("RECIPROCAL", [b.name], b.shape, b.perm)
        kind, b = "MUL", rcp
    return [binary(c, kind, a, b, out_shape)]


@handles("ReLU", "Relu")
def _relu(c: Converter, layer: Layer, ins):
    return [clamp(c, _activation(c, ins[0]), 0.0, FLOAT_MAX)]


@handles("Clamp")
def _clamp(c: Converter, layer: Layer, ins):
    lo, hi = attr_float(layer, "min"), attr_float(layer, "max")
    if lo > hi:
        raise c.invalid(f"Clamp min {lo} > max {hi}")
    return [clamp(c, _activation(c, ins[0]), lo, hi)]


_UNARY = {"Sigmoid": "SIGMOID", "Tanh": "TANH", "Exp": "EXP", "Log": "LOG", "Abs": "ABS",
          "Floor": "FLOOR", "Ceiling": "CEIL"}


@handles(*_UNARY)
def _unary(c: Converter, layer: Layer, ins):
    x = _activation(c, ins[0])
    return [c.result(_UNARY[layer.type], [x.name], x.shape, x.perm)]


@handles("Negative")
def _negative(c: Converter, layer: Layer, ins):
    x = _activation(c, ins[0])
    zp = c.zero_point()
    return [c.result("NEGATE", [x.name, zp, zp], x.shape, x.perm)]


def _const_val(value) -> Val:
    return Val.const(np.asarray(value, np.float32))


def _channel_const(values: np.ndarray, rank: int) -> Val:
    """Per-channel values along OpenVINO axis 1 of a rank-``rank`` tensor."""
    return _const_val(np.asarray(values, np.float32).reshape((1, -1) + (1,) * (rank - 2)))


@handles("HSigmoid", "HSwish")
def _hard_sigmoid(c: Converter, layer: Layer, ins):
    """HSigmoid = clamp(x + 3, 0, 6) / 6; HSwish = x * HSigmoid(x)."""
    x = _activation(c, ins[0])
    t = binary(c, "ADD", x, _const_val(3.0), x.shape)
    t = clamp(c, t, 0.0, 6.0)
    if layer.type == "HSwish":
        t = binary(c, "MUL", x, t, x.shape)
    return [binary(c, "MUL", t, _const_val(1.0 / 6.0), x.shape)]


@handles("Swish")
def _swish(c: Converter, layer: Layer, ins):
    """Swish = x * sigmoid(beta * x)."""
    x = _activation(c, ins[0])
    t = x
    if len(ins) > 1:
        beta = _scalar(ins[1])
        if beta is None:
            raise c.unsupported("Swish with a non-scalar or computed beta")
        if beta != 1.0:
            t = binary(c, "MUL", x, _const_val(beta), x.shape)
    s = c.result("SIGMOID", [t.name], t.shape, t.perm)
    return [binary(c, "MUL", x, s, x.shape)]


@handles("PReLU", "PRelu")
def _prelu(c: Converter, layer: Layer, ins):
    """PRelu = max(x, 0) + slope * min(x, 0); a 1-D slope of C values is per channel."""
    _need(c, ins, 2)
    x = _activation(c, ins[0])
    slope = c.const_data(ins[1], "the PRelu slope").astype(np.float32)
    if slope.ndim == 1 and x.rank >= 2 and slope.size == x.shape[1] and slope.size > 1:
        sv = _channel_const(slope, x.rank)
    else:
        sv = _const_val(slope)
    try:
        np.broadcast_shapes(x.shape, sv.shape)
    except ValueError:
        raise c.invalid(f"slope {list(slope.shape)} does not broadcast to {list(x.shape)}") \
            from None
    pos = clamp(c, x, 0.0, FLOAT_MAX)
    neg = clamp(c, x, -FLOAT_MAX, 0.0)
    return [binary(c, "ADD", pos, binary(c, "MUL", neg, sv, x.shape), x.shape)]


@handles("BatchNormInference")
def _batch_norm(c: Converter, layer: Layer, ins):
    """x * gamma / sqrt(var + eps) + (beta - mean * gamma / sqrt(var + eps)), channel axis
    1 (BatchNormInference-1 takes the data as its third input, -5 as its first)."""
    _need(c, ins, 5)
    order = (2, 0, 1, 3, 4) if layer.version == "opset1" else (0, 1, 2, 3, 4)
    x, gamma, beta, mean, var = (ins[i] for i in order)
    x = _activation(c, x)
    eps = attr_float(layer, "epsilon")
    g, b_, m, v = (c.const_data(t, "batch norm parameters").astype(np.float64).reshape(-1)
                   for t in (gamma, beta, mean, var))
    if x.rank < 2 or any(a.size != x.shape[1] for a in (g, b_, m, v)):
        raise c.invalid(f"batch norm parameters do not have {x.shape[1]} channels")
    a = g / np.sqrt(v + eps)
    y = binary(c, "MUL", x, _channel_const(a, x.rank), x.shape)
    return [binary(c, "ADD", y, _channel_const(b_ - m * a, x.rank), x.shape)]


@handles("FakeQuantize")
def _fake_quantize(c: Converter, layer: Layer, ins):
    """FakeQuantize of an activation: no operator; its parameters go to the quantizer.

    Three forms: equal input and output ranges (NNCF, OpenVINO's converters: the int8
    grid of the tensor); integer codes in, real range out (dequantizing an integer graph
    input); real range in, integer code range out (quantizing a graph output, followed
    by a Convert to i8/u8).
    """
    _need(c, ins, 5)
    x = ins[0]
    if x.is_const:
        raise c.unsupported("FakeQuantize of a constant that is not folded")
    ranges = [c.const_data(v, "FakeQuantize ranges") for v in ins[1:5]]
    levels = attr_int(layer, "levels")
    c.fake_quantized = True
    if x.codes:
        qp, notes = dequantizing_params(ranges, levels, x.codes, c.where)
        c.notes.extend(notes)
        c.set_given(x.name, qp)
        return [Val(x.shape, x.dtype, x.name, x.perm)]
    codes = quantizing_codes(ranges, levels)
    if codes:
        qp, notes = quantizing_params(ranges, levels, codes, c.where)
        c.notes.extend(notes)
        c.set_given(_activation(c, x).name, qp)
        return [Val(x.shape, x.dtype, x.name, x.perm, codes=codes)]
    qp, notes = activation_params(ranges, levels, c.where)
    c.notes.extend(notes)
    c.set_given(_activation(c, x).name, qp)
    return [x]


@handles("Convert")
def _convert(c: Converter, layer: Layer, ins):
    x = ins[0]
    dst = attr_str(layer, "destination_type").lower()
    if x.codes and dst in ("f32", "f16", "i8", "u8", "i16", "i32"):
        # Integer codes changing type only: the value (held as the real it stands for)
        # does not change.
        return [x]
    if dst not in ("f32", "f16"):
        raise c.unsupported(f"Convert of an activation to '{dst}' (only floating point, "
                            f"or integer codes after a quantizing FakeQuantize)")
    if dst == "f16":
        c.notes.append(f"{c.where}: Convert to f16 ignored (activations stay fp32)")
    return [_activation(c, x)]


# ---------------------------------------------------------------------------------------
# Pooling and reductions
# ---------------------------------------------------------------------------------------
def _fit_pool(size: int, k: int, s: int, p: int, out: int) -> tuple[int, int]:
    """TOSA end padding (>= 0) and input rows to drop so that exactly ``out`` windows fit."""
    q = (out - 1) * s + k - size - p
    if q >= 0:
        return q, 0
    return 0, -q


def _pool(c: Converter, layer: Layer, x: Val, kind: str, exclude_pad: bool) -> Val:
    _rank4(c, x, layer.type)
    n, ch, h, wd = x.shape
    kernel = _spatial(c, layer, "kernel", None)
    strides, dil, pb, pe = window_geometry(c, layer, (h, wd), kernel,
                                           dilated="dilations" in layer.data)
    if dil != [1, 1]:
        raise c.unsupported(f"dilated pooling {dil}")
    if any(k <= 0 for k in kernel):
        raise c.invalid(f"kernel {kernel} must be positive")
    rounding = attr_str(layer, "rounding_type", "floor").lower()
    if rounding not in ("floor", "ceil", "ceil_torch"):
        raise c.invalid(f"unknown rounding_type '{rounding}'")
    out_shape = c.out_dims(0)
    if len(out_shape) != 4 or out_shape[:2] != (n, ch):
        raise c.invalid(f"output dims {list(out_shape)} do not fit input {list(x.shape)}")
    for i, size in enumerate((h, wd)):
        num = size + pb[i] + pe[i] - kernel[i]
        floor_out = num // strides[i] + 1
        ceil_out = -(-num // strides[i]) + 1
        if out_shape[2 + i] not in (floor_out, ceil_out, ceil_out - 1) or \
                out_shape[2 + i] <= 0:
            raise c.invalid(f"output size {out_shape[2 + i]} does not match kernel "
                            f"{kernel[i]}, stride {strides[i]}, pads {pb[i]}/{pe[i]} on "
                            f"size {size}")
    xin = c.physical(x, NHWC)
    sizes = [h, wd]
    if kind == "AVG_POOL2D" and not exclude_pad and any(pb + pe):
        # Padding that counts in the average: zeros padded in, then no TOSA padding.
        xin = zero_pad_hw(c, xin, (pb[0], pe[0], pb[1], pe[1]), c.base())
        sizes = list(c.block.tensors[xin].shape[1:3])
        pb = [0, 0]
    tosa_pad, drop = [], {}
    for i in range(2):
        q, d = _fit_pool(sizes[i], kernel[i], strides[i], pb[i], out_shape[2 + i])
        tosa_pad += [pb[i], q]
        if d:
            drop[1 + i] = d
    if drop:
        xin = slice_tail(c, xin, drop)
    if tosa_pad[0] >= kernel[0] or tosa_pad[1] >= kernel[0] or \
            tosa_pad[2] >= kernel[1] or tosa_pad[3] >= kernel[1]:
        raise c.unsupported(f"padding {tosa_pad} is not smaller than the kernel {kernel}")
    inputs, attrs = pool_operands(c, kind, xin, kernel, strides, tosa_pad)
    return c.result(kind, inputs, out_shape, NHWC, attrs)


@handles("MaxPool")
def _max_pool(c: Converter, layer: Layer, ins):
    x = _activation(c, ins[0])
    out = _pool(c, layer, x, "MAX_POOL2D", True)
    outs = [out]
    if len(layer.outputs) > 1:
        # MaxPool-8 also returns indices: only the values are supported.
        if c.ir.fanout.get((layer.id, layer.outputs[1].id), 0):
            raise c.unsupported("the indices output of MaxPool is used (not supported)")
        # The indices have the values' shape (MaxPool-8): checked, so a declared shape cannot
        # ask for more than the values hold, and never allocated (a read-only zero view).
        dims = c.check_shape(c.out_dims(0), 1)
        outs.append(Val(dims, "int32", None, None, data=np.broadcast_to(np.int64(0), dims)))
    return outs


@handles("AvgPool")
def _avg_pool(c: Converter, layer: Layer, ins):
    x = _activation(c, ins[0])
    return [_pool(c, layer, x, "AVG_POOL2D", attr_bool(layer, "exclude-pad"))]


def _global_pool(c: Converter, x: Val, kind: str, keep: bool, out_shape) -> Val:
    n, ch, h, wd = x.shape
    inputs, attrs = pool_operands(c, kind, c.physical(x, NHWC), [h, wd], [1, 1],
                                  [0, 0, 0, 0])
    v = c.result(kind, inputs, (n, ch, 1, 1), NHWC, attrs)
    return v if keep else c.reshaped(v, out_shape)


_REDUCE = {"ReduceMean": "REDUCE_SUM", "ReduceSum": "REDUCE_SUM", "ReduceMax": "REDUCE_MAX",
           "ReduceMin": "REDUCE_MIN"}


@handles(*_REDUCE)
def _reduce(c: Converter, layer: Layer, ins):
    _need(c, ins, 2)
    x = _activation(c, ins[0])
    axes = sorted({norm_axis(c, a, x.rank) for a in int_list(c, ins[1], "the axes")})
    keep = attr_bool(layer, "keep_dims")
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    out_shape = c.check_shape(kept if keep else tuple(d for i, d in enumerate(x.shape)
                                                      if i not in axes))
    if not axes:
        return [x]
    if x.rank == 4 and axes == [2, 3] and layer.type in ("ReduceMean", "ReduceMax"):
        # Global pooling over H and W: the spatial operators the NPU runs.
        kind = "AVG_POOL2D" if layer.type == "ReduceMean" else "MAX_POOL2D"
        return [_global_pool(c, x, kind, keep, out_shape)]
    tosa_op = _REDUCE[layer.type]
    cur, count = c.reduce_axes(x, tosa_op, axes, c.base("_red"))
    v = Val(kept, "fp32", cur, x.perm)
    if layer.type == "ReduceMean":
        v = binary(c, "MUL", v, Val.const(np.asarray(1.0 / count, np.float32)), kept)
    return [v if keep else c.reshaped(v, out_shape)]


@handles("SoftMax", "Softmax")
def _softmax(c: Converter, layer: Layer, ins):
    x = _activation(c, ins[0])
    axis = norm_axis(c, attr_int(layer, "axis", 1), x.rank)
    t = x.perm.index(axis)
    shape = [x.shape[p] for p in x.perm]
    red = list(shape)
    red[t] = 1
    m = c.emit("REDUCE_MAX", [x.name], red, "fp32", {"axis": t, "nan_mode": "PROPAGATE"},
               base=c.base("_max"))
    d = c.emit("SUB", [x.name, m], shape, "fp32", base=c.base("_sub"))
    e = c.emit("EXP", [d], shape, "fp32", base=c.base("_exp"))
    s = c.emit("REDUCE_SUM", [e], red, "fp32", {"axis": t}, base=c.base("_sum"))
    r = c.emit("RECIPROCAL", [s], red, "fp32", base=c.base("_rcp"))
    return [c.result("MUL", [e, r, c.mul_shift()], x.shape, x.perm)]


# ---------------------------------------------------------------------------------------
# Shape and data movement
# ---------------------------------------------------------------------------------------
def _reshape_to(c: Converter, x: Val, shape) -> Val:
    shape = c.check_shape(shape)
    return c.reshaped(_activation(c, x), shape)


@handles("Reshape")
def _reshape(c: Converter, layer: Layer, ins):
    _need(c, ins, 2)
    x = ins[0]
    pattern = int_list(c, ins[1], "the Reshape shape")
    return [_reshape_to(c, x, reshape_target(c, x.shape, pattern,
                                             attr_bool(layer, "special_zero")))]


@handles("Squeeze")
def _squeeze(c: Converter, layer: Layer, ins):
    axes = int_list(c, ins[1], "the Squeeze axes") if len(ins) > 1 else None
    return [_reshape_to(c, ins[0], squeeze_shape(c, ins[0].shape, axes))]


@handles("Unsqueeze")
def _unsqueeze(c: Converter, layer: Layer, ins):
    _need(c, ins, 2)
    axes = int_list(c, ins[1], "the Unsqueeze axes")
    return [_reshape_to(c, ins[0], unsqueeze_shape(c, ins[0].shape, axes))]


@handles("Transpose")
def _transpose(c: Converter, layer: Layer, ins):
    _need(c, ins, 2)
    x = _activation(c, ins[0])
    return [_transposed(x, transpose_order(c, x, ins[1]))]


@handles("ShapeOf")
def _shape_of(c: Converter, layer: Layer, ins):
    return [shape_of(c, layer, ins[0])]


@handles("Concat")
def _concat(c: Converter, layer: Layer, ins):
    if not ins:
        raise c.invalid("Concat without inputs")
    rank = ins[0].rank
    axis = norm_axis(c, attr_int(layer, "axis"), rank)
    for v in ins:
        if v.rank != rank or any(v.shape[i] != ins[0].shape[i] for i in range(rank)
                                 if i != axis):
            raise c.invalid(f"Concat inputs {[list(v.shape) for v in ins]} do not fit on "
                            f"axis {axis}")
    shape = list(ins[0].shape)
    shape[axis] = sum(v.shape[axis] for v in ins)
    out_shape = c.check_shape(shape)
    perms = {v.perm for v in ins if not v.is_const}
    perm = perms.pop() if len(perms) == 1 else identity(rank)
    names = [c.physical(v, perm) if not v.is_const else
             _as_layout(c, v, rank, perm, c.base("_const")) for v in ins]
    return [c.result("CONCAT", names, out_shape, perm, {"axis": perm.index(axis)})]


@handles("Pad")
def _pad(c: Converter, layer: Layer, ins):
    _need(c, ins, 3)
    x = _activation(c, ins[0])
    mode = attr_str(layer, "pad_mode", "constant").lower()
    if mode != "constant":
        raise c.unsupported(f"pad_mode '{mode}' (only constant)")
    begin, end = int_list(c, ins[1], "pads_begin"), int_list(c, ins[2], "pads_end")
    if len(begin) != x.rank or len(end) != x.rank:
        raise c.invalid(f"pads {begin}/{end} do not match rank {x.rank}")
    if any(p < 0 for p in begin + end):
        raise c.unsupported(f"negative padding {begin}/{end}")
    value = 0.0
    if len(ins) > 3:
        value = float(c.const_data(ins[3], "pad_value").reshape(-1)[0])
    out_shape = c.check_shape([d + b + e for d, b, e in zip(x.shape, begin, end)])
    flat = [v for p in x.perm for v in (begin[p], end[p])]
    padval = c.const(np.asarray([value]), "fp32", c.base("_padval"), (1,))
    return [c.result("PAD", [x.name, c.shape_const(flat, c.base("_pads")), padval],
                     out_shape, x.perm)]


def _slice_val(c: Converter, x: Val, ranges: dict[int, tuple[int, int]], out_shape,
               index: int = 0) -> Val:
    start = [ranges.get(p, (0, x.shape[p]))[0] for p in x.perm]
    size = [ranges.get(p, (0, x.shape[p]))[1] - ranges.get(p, (0, x.shape[p]))[0]
            for p in x.perm]
    base = c.base(f"_{index}") if index else c.base()
    name = c.emit("SLICE", [x.name, c.shape_const(start, base + "_start"),
                            c.shape_const(size, base + "_size")], size, x.dtype, base=base)
    v = Val(tuple(x.shape[p] if p not in ranges else ranges[p][1] - ranges[p][0]
                  for p in range(x.rank)), x.dtype, name, x.perm)
    return c.reshaped(v, out_shape)


def _index_slices(c: Converter, x: Val, index, out_shape) -> Val:
    """A numpy basic index (slices with step 1, ints, None, Ellipsis) as SLICE + RESHAPE."""
    items = list(index)
    if Ellipsis in items:
        i = items.index(Ellipsis)
        present = sum(1 for t in items if t is not None and t is not Ellipsis)
        items[i:i + 1] = [slice(None)] * (x.rank - present)
    ranges, axis = {}, 0
    for t in items:
        if t is None:
            continue
        if axis >= x.rank:
            raise c.invalid("too many slice dimensions")
        size = x.shape[axis]
        if isinstance(t, int):
            i = t + size if t < 0 else t
            if not 0 <= i < size:
                raise c.invalid(f"index {t} out of range for size {size}")
            ranges[axis] = (i, i + 1)
        else:
            b, e, s = t.indices(size)
            if s != 1:
                raise c.unsupported(f"strided slicing (step {s}) of an activation")
            ranges[axis] = (b, max(b, e))
            if e <= b:
                raise c.unsupported("empty slice")
        axis += 1
    ranges = {a: r for a, r in ranges.items() if r != (0, x.shape[a])}
    if not ranges:
        return c.reshaped(x, out_shape)
    return _slice_val(c, x, ranges, out_shape)


@handles("StridedSlice")
def _strided_slice(c: Converter, layer: Layer, ins):
    _need(c, ins, 3)
    x = _activation(c, ins[0])
    stride = int_list(c, ins[3], "stride") if len(ins) > 3 else None
    index = strided_slice_index(c, layer, x.shape, int_list(c, ins[1], "begin"),
                                int_list(c, ins[2], "end"), stride)
    return [_index_slices(c, x, index, c.out_dims(0))]


@handles("Slice")
def _slice8(c: Converter, layer: Layer, ins):
    _need(c, ins, 4)
    x = _activation(c, ins[0])
    axes = int_list(c, ins[4], "axes") if len(ins) > 4 else None
    index = slice8_index(c, x.shape, int_list(c, ins[1], "start"), int_list(c, ins[2], "stop"),
                         int_list(c, ins[3], "step"), axes)
    return [_index_slices(c, x, index, c.out_dims(0))]


@handles("Split", "VariadicSplit")
def _split(c: Converter, layer: Layer, ins):
    _need(c, ins, 2)
    x = _activation(c, ins[0])
    axis, ranges = split_ranges(c, layer, ins)
    if len(ranges) != len(layer.outputs):
        raise c.invalid(f"{len(ranges)} parts but {len(layer.outputs)} output ports")
    return [_slice_val(c, x, {axis: r}, c.out_dims(i), i + 1) for i, r in enumerate(ranges)]


@handles("Gather")
def _gather(c: Converter, layer: Layer, ins):
    _need(c, ins, 3)
    x = _activation(c, ins[0])
    axis = norm_axis(c, int_list(c, ins[2], "the Gather axis")[0], x.rank)
    idx = c.const_data(ins[1], "Gather indices")
    if attr_int(layer, "batch_dims", 0) != 0:
        raise c.unsupported("Gather with batch_dims != 0")
    flat = idx.reshape(-1).astype(np.int64)
    size = x.shape[axis]
    flat = np.where(flat < 0, flat + size, flat)
    if flat.size == 0 or np.any(flat < 0) or np.any(flat >= size) or \
            np.any(np.diff(flat) != 1):
        raise c.unsupported("Gather of an activation with indices that are not one "
                            "contiguous ascending range")
    return [_slice_val(c, x, {axis: (int(flat[0]), int(flat[-1]) + 1)}, c.out_dims(0))]
