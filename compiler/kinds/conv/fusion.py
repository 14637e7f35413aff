"""Conv fusion: the TOSA operator chains the NPU executes as one convolution layer.

The NPU computes a convolution's int32 accumulators on the systolic array and turns them
into int8 on the way out of the accumulators (ACT: bias, RESCALE, output zero point,
clamp).  So the unit of work is the chain

    CONV2D (int8 x int8 -> int32) -> RESCALE (int32 -> int8) [-> CLAMP (int8)]

(or DEPTHWISE_CONV2D in place of CONV2D: a grouped convolution, each output channel reading
one input channel; its layer carries the channel multiplier, ``ConvLayer.depth_multiplier``)
which this pass turns into one :class:`compiler.core.ir.ConvLayer`, reading each parameter from
wherever the graph's TOSA form keeps it (TOSA 1.0: zero points, multiplier and shift are
constant input tensors; draft: attributes).  The graph walk that calls it (and handles
data movement) is compiler/dataflow.py.  Forms the NPU cannot run raise
:class:`tosa_ir.errors.Unsupported` naming the operator, its location and the reason;
illegal graphs (the spec's ERROR_IF) raise :class:`tosa_ir.errors.TosaError`.
"""
from __future__ import annotations

import numpy as np

from tosa_ir import Block, Operator
from tosa_ir.errors import TosaError
from tosa_ir.graph import INT_RANGES

from compiler.core.errors import invalid, unsupported
from compiler.core.ir import ConvLayer
from compiler.core.operands import CONST_OPS, const_input, expect_tensor, input_tensor, int_attrs, scalar_input

__all__ = ["CONST_OPS", "conv_chain", "conv_layer"]

INT8_MIN, INT8_MAX = INT_RANGES["int8"]

# -- pattern matching -----------------------------------------------------------------------
def _only_consumer(op: Operator, block: Block, consumers: dict, what: str) -> Operator | None:
    """The single operator reading ``op``'s output, or None if the output is unused."""
    out = op.outputs[0]
    users = consumers.get(out, [])
    if out in block.outputs or len(users) > 1:
        return None
    return users[0] if users else None


def conv_chain(conv: Operator, block: Block, consumers: dict) -> list[Operator]:
    """CONV2D (or DEPTHWISE_CONV2D) -> RESCALE [-> CLAMP]: the operators one conv layer implements."""
    rescale = _only_consumer(conv, block, consumers, "CONV2D")
    if rescale is None or rescale.op != "RESCALE":
        raise unsupported(conv, f"a {conv.op} must be followed by exactly one RESCALE to int8 "
                                "(its int32 output cannot leave the NPU)")
    chain = [conv, rescale]
    clamp = _only_consumer(rescale, block, consumers, "RESCALE")
    if clamp is not None and clamp.op == "CLAMP":
        chain.append(clamp)
    return chain


# -- the fused layer ---------------------------------------------------------------------------
def conv_layer(chain: list[Operator], block: Block, name: str) -> ConvLayer:
    """The fused layer of ``chain`` (from :func:`conv_chain`), parameters checked."""
    conv, rescale = chain[0], chain[1]
    clamp = chain[2] if len(chain) > 2 else None
    depthwise = conv.op == "DEPTHWISE_CONV2D"

    x = expect_tensor(conv, block, conv.inputs[0], "int8", "input", 4)
    w_tensor = input_tensor(conv, block, 1, "weight")
    expect_tensor(conv, block, w_tensor.name, "int8", "weight", 4)
    weights = const_input(conv, block, 1, "weight").astype(np.int8)
    multiplier_dw = 0
    if depthwise:
        # [KH, KW, C, M] -> [C*M, KH, KW, 1]: output channel c*M + m has kernel w[:, :, c, m].
        kh, kw, wc, multiplier_dw = weights.shape
        if wc != x.shape[3]:
            raise TosaError(conv.op, "weight", "weight C != input C", conv.location)
        weights = np.ascontiguousarray(weights.transpose(2, 3, 0, 1).reshape(wc * multiplier_dw, kh, kw, 1))
    bias = const_input(conv, block, 2, "bias")
    expect_tensor(conv, block, conv.inputs[2], "int32", "bias", 1)
    acc = expect_tensor(conv, block, conv.outputs[0], "int32", "output", 4)
    acc_type = conv.attrs.get("acc_type")
    if acc_type not in (None, "INT32", "int32"):
        raise unsupported(conv, f"acc_type {acc_type}; the NPU accumulates in int32")
    input_zp = scalar_input(conv, block, 3, "input_zp")
    weight_zp = scalar_input(conv, block, 4, "weight_zp")
    pad = int_attrs(conv, "pad", 4)
    stride = int_attrs(conv, "stride", 2)
    dilation = int_attrs(conv, "dilation", 2)
    # A depthwise layer's weights are checked as a convolution's with one input channel.
    w_shape = weights.shape[:3] + (x.shape[3],) if depthwise else weights.shape
    _check_conv(conv, x.shape, w_shape, bias.shape, acc.shape, pad, stride, dilation, input_zp, weight_zp)
    oc = weights.shape[0]
    bias = np.broadcast_to(bias.astype(np.int64), (oc,)).astype(np.int32)

    multiplier, shift, scale32, double_round, output_zp = _rescale_params(rescale, block, acc.shape)
    out = expect_tensor(rescale, block, rescale.outputs[0], "int8", "output")
    if tuple(out.shape) != tuple(acc.shape):
        raise invalid(rescale, f"output shape {out.shape} differs from input shape {acc.shape}")
    lo, hi = INT8_MIN, INT8_MAX
    if clamp is not None:
        cmin, cmax = _clamp_range(clamp, block, out.shape)
        lo, hi = max(lo, cmin), min(hi, cmax)
        out = block.tensor(clamp.outputs[0])
        if lo > hi:
            raise invalid(clamp, f"bounds [{cmin}, {cmax}] lie outside the int8 range")
    return ConvLayer(
        name=name, input=x.name, output=out.name, in_shape=tuple(x.shape), out_shape=tuple(acc.shape),
        weights=weights, bias=bias, input_zp=input_zp, weight_zp=weight_zp,
        stride=stride, dilation=dilation, pad=pad, multiplier=np.broadcast_to(multiplier, (oc,)).copy(),
        shift=np.broadcast_to(shift, (oc,)).copy(), scale32=scale32, double_round=double_round,
        output_zp=output_zp, clamp=(lo, hi), ops=[op.describe() for op in chain], location=conv.location,
        depth_multiplier=multiplier_dw)


def _check_conv(op, x_shape, w_shape, b_shape, o_shape, pad, stride, dilation, input_zp, weight_zp):
    """The spec's ERROR_IF conditions of CONV2D that the compiler relies on."""
    def error_if(cond, arg, text):
        if cond:
            raise TosaError(op.op, arg, text, op.location)

    n, ih, iw, ic = x_shape
    oc, kh, kw, wic = w_shape
    on, oh, ow, ooc = o_shape
    error_if(min(pad) < 0, "pad", "pad_top < 0 || pad_bottom < 0 || pad_left < 0 || pad_right < 0")
    error_if(min(stride) < 1, "stride", "stride_y < 1 || stride_x < 1")
    error_if(min(dilation) < 1, "dilation", "dilation_y < 1 || dilation_x < 1")
    error_if(not INT8_MIN <= input_zp <= INT8_MAX, "input_zp", "input_zp outside int8")
    error_if(not INT8_MIN <= weight_zp <= INT8_MAX, "weight_zp", "weight_zp outside int8")
    error_if(wic != ic, "weight", "weight IC != input IC")
    error_if(on != n or ooc != oc, "output", "output shape is not [N,OH,OW,OC]")
    b_len = b_shape[0] if b_shape else 1
    error_if(b_len not in (oc, 1), "bias", "BC != OC && BC != 1")
    for axis, size, in_size, p0, p1, k, d, s in (("y", oh, ih, pad[0], pad[1], kh, dilation[0], stride[0]),
                                                 ("x", ow, iw, pad[2], pad[3], kw, dilation[1], stride[1])):
        span = in_size - 1 + p0 + p1 - (k - 1) * d
        error_if(span < 0 or span % s != 0 or size != span // s + 1, "output",
                 f"O{axis.upper()} != idiv_check(I{axis.upper()} - 1 + pads - (K{axis.upper()} - 1) * "
                 f"dilation_{axis}, stride_{axis}) + 1")
    if min(n, ih, iw, ic, oc, kh, kw) < 1:
        raise invalid(op, f"empty tensor: input {x_shape}, weight {w_shape}")


def _rescale_params(op: Operator, block: Block, shape):
    """(multiplier, shift, scale32, double_round, output_zp) of a RESCALE int32 -> int8."""
    expect_tensor(op, block, op.inputs[0], "int32", "input")
    if op.attrs.get("input_unsigned") or op.attrs.get("output_unsigned"):
        raise unsupported(op, "unsigned RESCALE is not supported after a CONV2D")
    scale32 = bool(op.attrs.get("scale32", False))
    per_channel = bool(op.attrs.get("per_channel", False))
    if len(op.inputs) > 1:   # TOSA 1.0: multiplier, shift, input_zp, output_zp are inputs
        multiplier = const_input(op, block, 1, "multiplier").astype(np.int64).reshape(-1)
        shift = const_input(op, block, 2, "shift").astype(np.int64).reshape(-1)
        input_zp = scalar_input(op, block, 3, "input_zp")
        output_zp = scalar_input(op, block, 4, "output_zp")
        mode = op.attrs.get("rounding_mode", "SINGLE_ROUND")
        if mode not in ("SINGLE_ROUND", "DOUBLE_ROUND"):
            raise unsupported(op, f"rounding_mode {mode}; the NPU does SINGLE_ROUND and DOUBLE_ROUND")
        double_round = mode == "DOUBLE_ROUND"
    else:                    # draft: everything is an attribute
        multiplier = np.asarray(op.attrs.get("multiplier", []), dtype=np.int64).reshape(-1)
        shift = np.asarray(op.attrs.get("shift", []), dtype=np.int64).reshape(-1)
        input_zp = int(op.attrs.get("input_zp", 0))
        output_zp = int(op.attrs.get("output_zp", 0))
        double_round = bool(op.attrs.get("double_round", False))
    if input_zp != 0:
        raise TosaError(op.op, "input_zp", "in_t != i8_t && input_zp != 0", op.location)
    if not INT8_MIN <= output_zp <= INT8_MAX:
        raise TosaError(op.op, "output_zp", "output_zp outside the int8 range", op.location)
    if double_round and not scale32:
        raise TosaError(op.op, "double_round", "!scale32 && double_round", op.location)
    nc = shape[-1] if per_channel else 1
    if multiplier.size != nc or shift.size != nc:
        raise invalid(op, f"multiplier and shift need {nc} values (per_channel={per_channel}), "
                          f"have {multiplier.size} and {shift.size}")
    if not scale32:
        multiplier = multiplier.astype(np.int16).astype(np.int64)   # mul_t is int16
    return multiplier, shift, scale32, double_round, output_zp


def _clamp_range(op: Operator, block: Block, shape) -> tuple[int, int]:
    expect_tensor(op, block, op.inputs[0], "int8", "input")
    out = expect_tensor(op, block, op.outputs[0], "int8", "output")
    if tuple(out.shape) != tuple(shape):
        raise invalid(op, f"output shape {out.shape} differs from input shape {shape}")
    keys = ("min_val", "max_val") if "min_val" in op.attrs else ("min_int", "max_int")
    if keys[0] not in op.attrs or keys[1] not in op.attrs:
        raise invalid(op, "missing min/max attributes")
    lo, hi = (int(np.asarray(op.attrs[k]).reshape(-1)[0]) for k in keys)
    if lo > hi:
        raise TosaError(op.op, keys[0], "max_val < min_val", op.location)
    return lo, hi
