"""Elementwise, activation, requantization and layout operators.

ADD / SUB follow TFLite's reference kernels exactly: each input ``(q - zp) << 20`` (15 for
int16) is requantized with ``MultiplyByQuantizedMultiplier`` to twice the larger input
scale, the int32 values are added, and the sum is requantized to the output.  The left
shift is a separate exact step: folding it into the first RESCALE (as TOSA legalizations
usually do) rounds once instead of twice and differs from TFLite in the last bit for
some inputs.  MUL multiplies the zero-point-corrected int32 values and requantizes.
LOGISTIC / TANH on 8-bit data are 256-entry TABLEs computed as TFLite's LUTPopulate does.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.frontends.circle.lower import Lowerer
from compiler.frontends.circle.model import activation_name
from compiler.frontends.common.int_softmax import softmax
from compiler.frontends.circle.quant import (activation_range, lut_8bit, quantize_multiplier,
                                             relu_x_range)


def _act_dtype(tensor, dtype: str) -> str:
    return "uint8" if tensor.type == "UINT8" else dtype


def _to_rank(lw: Lowerer, name: str, rank: int) -> str:
    shape = lw.b.shape(name)
    if len(shape) > rank:
        raise lw.invalid(f"operand of rank {len(shape)} for an output of rank {rank}")
    return lw.b.reshape(name, (1,) * (rank - len(shape)) + tuple(shape))


def _is_pot(scale: float) -> bool:
    log2 = math.log(scale) / math.log(2.0)
    return abs(log2 - round(log2)) < 1e-3


def _add_sub(lw: Lowerer, op, tosa_op: str) -> None:
    b = lw.b
    x1, x2 = lw.activation(0), lw.activation(1)
    out, out_dtype = lw.out_type()
    if not x1.dtype == x2.dtype == out_dtype:
        raise lw.unsupported("inputs and output must have the same integer type")
    opts = op.options or {"fused_activation_function": 0, "pot_scale_int16": True}
    act = activation_name(opts["fused_activation_function"], op.where)
    if out_dtype == "int16":
        if opts.get("pot_scale_int16", True) and all(
                _is_pot(v) for v in (x1.scale, x2.scale, out.quant.s)):
            raise lw.unsupported("int16 ADD/SUB with power-of-two scales (pot_scale_int16) "
                                 "is not supported")
        if x1.zp or x2.zp or out.quant.zp:
            raise lw.unsupported("int16 ADD/SUB needs zero points 0")
    left_shift = 15 if out_dtype == "int16" else 20
    twice_max = 2.0 * float(max(np.float32(x1.scale), np.float32(x2.scale)))
    rank = len(out.shape)
    scaled = []
    for x in (x1, x2):
        m, s = quantize_multiplier(x.scale / twice_max)
        if x.dtype == "int8":  # (q - zp) << 20 in one exact RESCALE: |q - zp| < 2**9
            shifted = b.rescale(x.name, "int32", 1 << 30, 30 - left_shift, x.zp, 0,
                                double_round=False)
        else:
            shifted = b.binary("LOGICAL_LEFT_SHIFT", b.to_int32(x.name, x.zp),
                               b.i32(left_shift, len(b.shape(x.name))))
        scaled.append(_to_rank(lw, lw.requantize(shifted, "int32", m, s, 0, 0), rank))
    total = b.binary(tosa_op, scaled[0], scaled[1], "int32")
    m, s = quantize_multiplier(twice_max / ((1 << left_shift) * out.quant.s))
    out_zp = out.quant.zp - (128 if out.type == "UINT8" else 0)
    y = lw.requantize(total, out_dtype, m, s, 0, out_zp)
    lo, hi = activation_range(act, out.quant.s, out.quant.zp, _act_dtype(out, out_dtype),
                              op.where)
    lw.define(0, lw.clamp_activation(y, *lw.shifted(out, lo, hi)))


def add(lw, op):
    _add_sub(lw, op, "ADD")


def sub(lw, op):
    _add_sub(lw, op, "SUB")


def mul(lw, op):
    b = lw.b
    x1, x2 = lw.activation(0), lw.activation(1)
    out, out_dtype = lw.out_type()
    if not x1.dtype == x2.dtype == out_dtype:
        raise lw.unsupported("inputs and output must have the same integer type")
    act = activation_name((op.options or {}).get("fused_activation_function", 0), op.where)
    rank = len(out.shape)
    a = _to_rank(lw, b.to_int32(x1.name, x1.zp), rank)
    c = _to_rank(lw, b.to_int32(x2.name, x2.zp), rank)
    product = b.mul(a, c)
    m, s = quantize_multiplier(float(x1.scale) * float(x2.scale) / float(out.quant.s))
    out_zp = out.quant.zp - (128 if out.type == "UINT8" else 0)
    y = lw.requantize(product, out_dtype, m, s, 0, out_zp)
    lo, hi = activation_range(act, out.quant.s, out.quant.zp, _act_dtype(out, out_dtype),
                              op.where)
    lw.define(0, lw.clamp_activation(y, *lw.shifted(out, lo, hi)))


def _maximum_minimum(lw, op, tosa_op: str) -> None:
    """TFLite MAXIMUM / MINIMUM, every version (int8 from version 2, int16 later): the
    reference kernel (MaximumMinimumBroadcast) compares the raw codes, the converter giving
    inputs and output one quantization, so the TOSA operator runs on the codes, broadcast
    to the output's rank (uint8 codes, moved by -128 alike, keep their order)."""
    b = lw.b
    x1, x2 = lw.activation(0), lw.activation(1)
    out, out_dtype = lw.out_type()
    if not x1.dtype == x2.dtype == out_dtype:
        raise lw.unsupported("inputs and output must have the same integer type")
    rank = len(out.shape)
    # TOSA MAXIMUM/MINIMUM are int32: the codes widen exactly, and the result (one of them)
    # narrows back exactly.
    a, c = (_to_rank(lw, b.to_int32(x.name, 0), rank) for x in (x1, x2))
    y = b.binary(tosa_op, a, c, "int32")
    lw.define(0, b.emit("CAST", [y], b.shape(y), out_dtype, "cast"))


def maximum(lw, op):
    _maximum_minimum(lw, op, "MAXIMUM")


def minimum(lw, op):
    _maximum_minimum(lw, op, "MINIMUM")


# ---------------------------------------------------------------------------------------
def _table(lw, op, func: str) -> None:
    x = lw.activation(0)
    out, out_dtype = lw.out_type()
    if x.dtype != "int8" or out_dtype != "int8":
        raise lw.unsupported(f"{op.op} is supported for 8-bit data only")
    in_t = _act_dtype(lw.t(lw.input(0)), "int8")
    # LUT over the input's codes (uint8: 0..255) -> output codes, moved to int8 indices.
    lut = lut_8bit(func, x.scale, x.quant.zp, out.quant.s, out.quant.zp, in_t)
    if out.type == "UINT8":
        lut = lut - 128
    table = lw.b.const(f"{out.name}_table", lut, "int8")
    lw.define(0, lw.b.emit("TABLE", [x.name, table], lw.b.shape(x.name), "int8", out.name))


def logistic(lw, op):
    _table(lw, op, "LOGISTIC")


def tanh(lw, op):
    _table(lw, op, "TANH")


def _relu(lw, op, lo: float, hi: float | None):
    """TFLite QuantizedReluX: requantize by input/output scale, clamp to the range."""
    x = lw.activation(0)
    out, out_dtype = lw.out_type()
    m, s = quantize_multiplier(float(x.scale) / float(out.quant.s))
    out_zp = out.quant.zp - (128 if out.type == "UINT8" else 0)
    y = lw.requantize(x.name, out_dtype, m, s, x.zp, out_zp)
    qlo, qhi = relu_x_range(lo, hi, out.quant.s, out.quant.zp, _act_dtype(out, out_dtype))
    lw.define(0, lw.clamp_activation(y, *lw.shifted(out, qlo, qhi)))


def quantize(lw, op):
    """QUANTIZE between integer types: TFLite Requantize, MultiplyByQuantizedMultiplier by
    input_scale / output_scale (float QUANTIZE only exists at graph inputs)."""
    x = lw.activation(0)
    out, out_dtype = lw.out_type()
    m, s = quantize_multiplier(float(x.scale) / float(out.quant.s))
    out_zp = out.quant.zp - (128 if out.type == "UINT8" else 0)
    lw.define(0, lw.requantize(x.name, out_dtype, m, s, x.zp, out_zp))


# ---------------------------------------------------------------------------------------
def _same_codes(lw: Lowerer, x, out) -> None:
    """Data-movement operators copy codes: input and output quantization must agree."""
    q = out.quant
    if q is None or x.quant is None:
        return
    if q.s != x.scale or q.zp != x.quant.zp:
        raise lw.unsupported(f"output quantization (scale {q.s}, zero point {q.zp}) differs "
                             f"from the input's (scale {x.scale}, zero point {x.quant.zp})")


def reshape(lw, op):
    x = lw.activation(0)
    out = lw.out()
    if math.prod(out.shape) != math.prod(lw.b.shape(x.name)):
        raise lw.invalid(f"cannot reshape {list(lw.b.shape(x.name))} to {list(out.shape)}")
    lw.define(0, lw.b.reshape(x.name, out.shape, out.name))


def transpose(lw, op):
    b = lw.b
    x = lw.activation(0)
    out = lw.out()
    rank = len(b.shape(x.name))
    perms = [int(p) % rank if rank else 0
             for p in lw.const(lw.input(1), "permutation").reshape(-1)]
    if sorted(perms) != list(range(rank)):
        raise lw.invalid(f"{perms} is not a permutation of {rank} axes")
    shape = tuple(b.shape(x.name)[p] for p in perms)
    lw.define(0, b.emit("TRANSPOSE", [x.name], shape, x.dtype, out.name, perms=perms))


def pad(lw, op):
    b = lw.b
    x = lw.activation(0)
    out = lw.out()
    _same_codes(lw, x, out)
    shape = b.shape(x.name)
    pads = lw.const(lw.input(1), "paddings").astype(np.int64)
    if pads.shape != (len(shape), 2) or pads.min(initial=0) < 0:
        raise lw.invalid(f"paddings of shape {list(pads.shape)} for a rank-{len(shape)} input")
    value = x.zp
    cv = lw.input(2, optional=True) if op.op == "PADV2" else None
    if cv is not None:
        value = int(lw.const(cv, "constant value").reshape(-1)[0]) - \
            (128 if lw.t(cv).type == "UINT8" else 0)
    out_shape = tuple(int(d + p[0] + p[1]) for d, p in zip(shape, pads))
    y = b.emit("PAD", [x.name, b.shape_const(pads.reshape(-1)), b.scalar(value, x.dtype)],
               out_shape, x.dtype, out.name)
    lw.define(0, y)


def concatenation(lw, op):
    b = lw.b
    out = lw.out()
    opts = op.options or {"axis": 0, "fused_activation_function": 0}
    if activation_name(opts["fused_activation_function"], op.where) != "NONE":
        raise lw.unsupported("fused activation on CONCATENATION is not supported")
    values = [lw.activation(i) for i in range(len(op.inputs))]
    for v in values:
        _same_codes(lw, v, out)
    rank = len(out.shape)
    axis = opts["axis"] + rank if opts["axis"] < 0 else opts["axis"]
    if not 0 <= axis < rank:
        raise lw.invalid(f"axis {opts['axis']} out of range for rank {rank}")
    names = [_to_rank(lw, v.name, rank) for v in values]
    shape = list(b.shape(names[0]))
    shape[axis] = sum(b.shape(n)[axis] for n in names)
    lw.define(0, b.emit("CONCAT", names, tuple(shape), values[0].dtype, out.name, axis=axis))


def mean(lw, op):
    """TFLite QuantizedMeanOrSum (mean): sum of ``q - zp`` in int32, then
    MultiplyByQuantizedMultiplier with the input/output multiplier divided by the element
    count (the kernel's integer adjustment of the multiplier, reproduced exactly)."""
    b = lw.b
    x = lw.activation(0)
    out, out_dtype = lw.out_type()
    shape = b.shape(x.name)
    rank = len(shape)
    axes = sorted({int(a) % rank for a in lw.const(lw.input(1), "axes").reshape(-1)})
    total = b.to_int32(x.name, x.zp)
    for axis in axes:
        reduced = tuple(1 if i == axis else d for i, d in enumerate(b.shape(total)))
        total = b.emit("REDUCE_SUM", [total], reduced, "int32", "sum", axis=axis)
    count = math.prod(shape[a] for a in axes)
    m, s = quantize_multiplier(float(x.scale) / float(out.quant.s))
    shift = min(count.bit_length() - 1, 32, 31 + s)
    m = (m << shift) // count if shift >= 0 else m
    s -= max(shift, 0)
    out_zp = out.quant.zp - (128 if out.type == "UINT8" else 0)
    lw.define(0, lw.requantize(total, out_dtype, m, s, 0, out_zp))


HANDLERS = {
    "ADD": add,
    "SUB": sub,
    "MUL": mul,
    "MAXIMUM": maximum,
    "MINIMUM": minimum,
    "LOGISTIC": logistic,
    "TANH": tanh,
    "SOFTMAX": softmax,
    "RELU": lambda lw, op: _relu(lw, op, 0.0, None),
    "RELU6": lambda lw, op: _relu(lw, op, 0.0, 6.0),
    "RELU_N1_TO_1": lambda lw, op: _relu(lw, op, -1.0, 1.0),
    "QUANTIZE": quantize,
    "RESHAPE": reshape,
    "SQUEEZE": reshape,
    "EXPAND_DIMS": reshape,
    "TRANSPOSE": transpose,
    "PAD": pad,
    "PADV2": pad,
    "CONCATENATION": concatenation,
    "MEAN": mean,
}

__all__ = ["HANDLERS"]
