"""A numpy evaluator for float TOSA graphs (the quantizer's calibration and reference).

Runs the fp32 operators the frontends emit, vectorised with numpy (convolutions as one
matrix product over sliding windows), in TOSA semantics: NHWC activations, OHWI / HWCM
weights, TOSA 1.0 operand forms (zero points, MUL shift, RESHAPE/PAD/SLICE shapes as
input tensors).  It is a float reference, not a bit-exact model: sums run in float32 with
BLAS ordering.

:func:`evaluate` returns every tensor's value, which calibration and the per-layer error
report use.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tosa_ir import Block, Graph, Operator
from tosa_ir.errors import InvalidInput, Unsupported

F32 = np.float32
_IMPLS: dict[str, Callable] = {}


def _impl(*names):
    def wrap(fn):
        for n in names:
            _IMPLS[n] = fn
        return fn
    return wrap


def supported_ops() -> frozenset[str]:
    return frozenset(_IMPLS)


def evaluate(graph: Graph, inputs: dict[str, np.ndarray], keep: bool = True
             ) -> dict[str, np.ndarray]:
    """Run the main block of a float graph.

    Parameters
    ----------
    graph
        A graph of fp32 operators (constants may be any type).
    inputs
        Values of the block's inputs, by tensor name.
    keep
        Keep every intermediate tensor in the result (for calibration); otherwise only
        the block's outputs.

    Raises
    ------
    InvalidInput
        A missing input, or an input of the wrong shape.
    Unsupported
        An operator this evaluator does not implement.
    """
    block = graph.main
    env: dict[str, np.ndarray] = {}
    for name in block.inputs:
        if name not in inputs:
            raise InvalidInput(f"no value for graph input {name!r}")
        t = block.tensors[name]
        arr = np.asarray(inputs[name])
        if tuple(arr.shape) != tuple(t.shape):
            raise InvalidInput(f"input {name!r} has shape {list(arr.shape)}, the graph "
                               f"declares {list(t.shape)}")
        env[name] = arr.astype(F32 if t.dtype == "fp32" else arr.dtype)
    last_use = {}
    for i, op in enumerate(block.operators):
        for n in op.inputs:
            last_use[n] = i
    for i, op in enumerate(block.operators):
        fn = _IMPLS.get(op.op)
        if fn is None:
            raise Unsupported(f"float evaluator: operator {op.op} ({op.location}) is not "
                              f"implemented")
        args = [_value(block, env, n) for n in op.inputs]
        out = fn(op, args, block)
        env[op.outputs[0]] = out
        if not keep:
            for n in op.inputs:
                if last_use.get(n) == i and n not in block.outputs and n in env:
                    del env[n]
    if keep:
        return env
    return {n: env[n] for n in block.outputs}


def _value(block: Block, env: dict, name: str) -> np.ndarray:
    if name in env:
        return env[name]
    t = block.tensors[name]
    if t.data is None:
        raise InvalidInput(f"tensor {name!r} is used before it is computed")
    return t.data


def _out_shape(op: Operator, block: Block) -> tuple[int, ...]:
    return tuple(block.tensors[op.outputs[0]].shape)


# ---------------------------------------------------------------------------------------
# Convolutions and pooling
# ---------------------------------------------------------------------------------------
def _windows(x: np.ndarray, kh: int, kw: int, stride, dil, pad, fill=0.0) -> np.ndarray:
    """Sliding windows [N, OH, OW, C, KH, KW] of NHWC ``x`` padded with ``fill``."""
    pt, pb, pl, pr = pad
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    eh, ew = (kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1
    win = sliding_window_view(xp, (eh, ew), axis=(1, 2))
    return win[:, ::stride[0], ::stride[1], :, ::dil[0], ::dil[1]]


def _conv_windows(op, x, kh, kw):
    a = op.attrs
    pad, stride, dil = list(a["pad"]), list(a["stride"]), list(a["dilation"])
    # Extended kernels may reach past the padded input; those taps are zero.
    ih, iw = x.shape[1], x.shape[2]
    extra_h = max(0, (kh - 1) * dil[0] + 1 - (ih + pad[0] + pad[1]))
    extra_w = max(0, (kw - 1) * dil[1] + 1 - (iw + pad[2] + pad[3]))
    pad = [pad[0], pad[1] + extra_h, pad[2], pad[3] + extra_w]
    return _windows(x, kh, kw, stride, dil, pad)


@_impl("CONV2D")
def _conv2d(op, args, block):
    x, w, b = args[0].astype(F32), args[1].astype(F32), args[2].astype(F32)
    oc, kh, kw, ic = w.shape
    win = _conv_windows(op, x, kh, kw)               # N OH OW C KH KW
    n, oh, ow = win.shape[:3]
    oh_t, ow_t = _out_shape(op, block)[1:3]
    win = win[:, :oh_t, :ow_t]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kh * kw * ic)
    out = cols @ w.reshape(oc, -1).T
    return (out.reshape(n, oh_t, ow_t, oc) + b.reshape(-1)).astype(F32)


@_impl("DEPTHWISE_CONV2D")
def _depthwise(op, args, block):
    x, w, b = args[0].astype(F32), args[1].astype(F32), args[2].astype(F32)
    kh, kw, c, m = w.shape
    win = _conv_windows(op, x, kh, kw)
    oh_t, ow_t = _out_shape(op, block)[1:3]
    win = win[:, :oh_t, :ow_t]
    out = np.einsum("nhwcij,ijcm->nhwcm", win, w, optimize=True)
    n = out.shape[0]
    return (out.reshape(n, oh_t, ow_t, c * m) + b.reshape(-1)).astype(F32)


@_impl("TRANSPOSE_CONV2D")
def _transpose_conv(op, args, block):
    x, w, b = args[0].astype(F32), args[1].astype(F32), args[2].astype(F32)
    oc, kh, kw, ic = w.shape
    n, ih, iw, _ = x.shape
    sy, sx = op.attrs["stride"]
    pt, pb, pl, pr = op.attrs["out_pad"]
    _, oh, ow, _ = _out_shape(op, block)
    # Full (unpadded) output, then crop/extend by the out_pad values.
    fh, fw = (ih - 1) * sy + kh, (iw - 1) * sx + kw
    full = np.zeros((n, fh, fw, oc), F32)
    for ky in range(kh):
        for kx in range(kw):
            contrib = x @ w[:, ky, kx, :].T          # N IH IW OC
            full[:, ky:ky + (ih - 1) * sy + 1:sy, kx:kx + (iw - 1) * sx + 1:sx] += contrib
    out = np.zeros((n, oh, ow, oc), F32)
    # Output row oy corresponds to full row oy - pt.
    y0, x0 = max(0, pt), max(0, pl)
    fy0, fx0 = max(0, -pt), max(0, -pl)
    hh = min(oh - y0, fh - fy0)
    ww = min(ow - x0, fw - fx0)
    if hh > 0 and ww > 0:
        out[:, y0:y0 + hh, x0:x0 + ww] = full[:, fy0:fy0 + hh, fx0:fx0 + ww]
    return out + b.reshape(-1)


@_impl("MAX_POOL2D")
def _max_pool(op, args, block):
    kh, kw = op.attrs["kernel"]
    win = _windows(args[0].astype(F32), kh, kw, op.attrs["stride"], (1, 1), op.attrs["pad"],
                   fill=-np.inf)
    oh, ow = _out_shape(op, block)[1:3]
    return win[:, :oh, :ow].max(axis=(4, 5)).astype(F32)


@_impl("AVG_POOL2D")
def _avg_pool(op, args, block):
    kh, kw = op.attrs["kernel"]
    x = args[0].astype(F32)
    stride, pad = op.attrs["stride"], op.attrs["pad"]
    oh, ow = _out_shape(op, block)[1:3]
    total = _windows(x, kh, kw, stride, (1, 1), pad)[:, :oh, :ow].sum(axis=(4, 5))
    ones = np.ones((1,) + x.shape[1:3] + (1,), F32)
    count = _windows(ones, kh, kw, stride, (1, 1), pad)[:, :oh, :ow].sum(axis=(4, 5))
    return (total / count).astype(F32)


@_impl("MATMUL")
def _matmul(op, args, block):
    return np.matmul(args[0].astype(F32), args[1].astype(F32))


# ---------------------------------------------------------------------------------------
# Element-wise and the rest
# ---------------------------------------------------------------------------------------
@_impl("CLAMP")
def _clamp(op, args, block):
    return np.clip(args[0], F32(op.attrs["min_val"]), F32(op.attrs["max_val"])).astype(F32)


def _binary(fn):
    return lambda op, args, block: fn(args[0], args[1]).astype(
        np.bool_ if block.tensors[op.outputs[0]].dtype == "bool" else F32)


for _name, _fn in {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply,
                   "MAXIMUM": np.maximum, "MINIMUM": np.minimum, "POW": np.power,
                   "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
                   "EQUAL": np.equal, "LOGICAL_AND": np.logical_and,
                   "LOGICAL_OR": np.logical_or}.items():
    _impl(_name)(_binary(_fn))

for _name, _fn in {"EXP": np.exp, "LOG": np.log, "ABS": np.abs, "RECIPROCAL": np.reciprocal,
                   "FLOOR": np.floor, "CEIL": np.ceil, "SIN": np.sin, "COS": np.cos,
                   "TANH": np.tanh, "SIGMOID": lambda v: 1.0 / (1.0 + np.exp(-v)),
                   "NEGATE": np.negative, "RSQRT": lambda v: 1.0 / np.sqrt(v),
                   "LOGICAL_NOT": np.logical_not, "IDENTITY": lambda v: v}.items():
    _impl(_name)(lambda op, args, block, _f=_fn: np.asarray(
        _f(args[0]) if args[0].dtype == np.bool_ else _f(args[0].astype(F32))))


@_impl("CONST", "CONST_SHAPE")
def _const(op, args, block):
    return block.tensors[op.outputs[0]].data


@_impl("SELECT")
def _select(op, args, block):
    return np.where(args[0], args[1], args[2])


@_impl("REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN")
def _reduce(op, args, block):
    fn = {"REDUCE_SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}[op.op]
    return fn(args[0], axis=int(op.attrs["axis"]), keepdims=True).astype(args[0].dtype)


@_impl("RESHAPE")
def _reshape(op, args, block):
    return args[0].reshape(_out_shape(op, block))


@_impl("TRANSPOSE")
def _transpose(op, args, block):
    return np.ascontiguousarray(args[0].transpose([int(p) for p in op.attrs["perms"]]))


@_impl("CONCAT")
def _concat(op, args, block):
    return np.concatenate(args, axis=int(op.attrs["axis"]))


@_impl("PAD")
def _pad(op, args, block):
    pads = np.asarray(args[1]).reshape(-1, 2)
    value = np.asarray(args[2]).reshape(-1)[0]
    return np.pad(args[0], [tuple(int(v) for v in p) for p in pads], constant_values=value)


@_impl("SLICE")
def _slice(op, args, block):
    start = [int(v) for v in np.asarray(args[1]).reshape(-1)]
    size = [int(v) for v in np.asarray(args[2]).reshape(-1)]
    return args[0][tuple(slice(s, s + n) for s, n in zip(start, size))]
