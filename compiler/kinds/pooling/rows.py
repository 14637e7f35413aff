"""MAX_POOL2D and AVG_POOL2D of ``rows`` tensors (int16, or int8 that no brick reader needs)
as elementwise layers (compiler/kinds/elementwise/layer.py ``EltLayer``) over kernel-tap windows.

The input is first padded (an element-DMA copy, made by the dataflow pass) with the type's
lowest value (MAX) or the input zero point (AVG: padding then adds 0).  Each kernel tap is a
strided window of the padded input (as for DEPTHWISE_CONV2D), and:

* MAX: ``out = tap0``, then ``out = MAXIMUM(out, tap)`` (VALU, the input type);
* AVG: ``acc = sum(VRESCALE(tap - input_zp))`` in int32; the spec's ``apply_scale_32(acc,
  reciprocal_scale(count))`` per output position is a VALU MUL with the rounding shift in
  ``imm0``, and since the shift differs between positions (edge windows count fewer
  elements) there is one MUL per distinct shift, by a constant [1, OH, OW, 1] multiplier
  tensor that is 0 where another shift applies; the products add up; a last VRESCALE by 1
  adds the output zero point and saturates to the output type.
"""
from __future__ import annotations

import numpy as np

from isa.instructions import ValuOp, VecType
from sim import tosa_helpers as th
from tosa_ir import Block, Operator

from compiler.kinds.elementwise.layer import VEC_TYPES, EltLayer, Step, _unit_params
from compiler.core.errors import unsupported
from compiler.core.operands import int_attrs, scalar_input


def _counts(size: int, out: int, k: int, s: int, p: int) -> np.ndarray:
    start = np.arange(out) * s - p
    return np.clip(np.minimum(start + k, size) - np.maximum(start, 0), 0, None)


def rows_pool_layer(op: Operator, block: Block, name: str) -> tuple[EltLayer, tuple[int, ...], int]:
    """(layer, pad, pad value): the layer's window inputs are placeholders for the padded input."""
    xt, yt = block.tensor(op.inputs[0]), block.tensor(op.outputs[0])
    if xt.dtype not in ("int8", "int16") or len(xt.shape) != 4 or any(d < 0 for d in xt.shape + yt.shape):
        raise unsupported(op, f"{xt.dtype} {list(xt.shape)} input; the vector unit pools int8/int16 NHWC")
    kernel, stride, pad = int_attrs(op, "kernel", 2), int_attrs(op, "stride", 2), int_attrs(op, "pad", 4)
    n, ih, iw, c = xt.shape
    _, oh, ow, _ = yt.shape
    t = VEC_TYPES[xt.dtype]
    inputs, windows, steps, types = [], {}, [], {"out": t}
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            windows[len(inputs)] = ((0, ky, kx, 0), (1, stride[0], stride[1], 1), tuple(yt.shape))
            inputs.append(op.inputs[0])
    if op.op == "MAX_POOL2D":
        for k in range(len(inputs)):
            types[f"in{k}"] = t
            steps.append(Step("VALU", {"op": ValuOp.COPY if k == 0 else ValuOp.MAXIMUM, "dtype": t},
                              ("in0",) if k == 0 else ("out", f"in{k}"), "out"))
        layer = EltLayer(name, inputs, op.outputs[0], tuple(yt.shape), types, {}, steps, windows=windows,
                         ops=[op.describe()], location=op.location)
        return layer, tuple(pad), -128 if xt.dtype == "int8" else -32768
    acc_type = op.attrs.get("acc_type")
    if acc_type not in (None, "INT32", "int32"):
        raise unsupported(op, f"acc_type {acc_type}; the vector unit accumulates pooling in int32")
    izp = scalar_input(op, block, 1, "input_zp")
    ozp = scalar_input(op, block, 2, "output_zp")
    i32 = VecType.INT32
    widen = dict(in_type=t, out_type=i32, per_channel=0, scale32=1, double_round=0, in_zp=izp, out_zp=0, clamp=0)
    types.update(x=i32, acc=i32, p=i32, avg=i32)
    for k in range(len(inputs)):
        types[f"in{k}"] = t
        steps.append(Step("VRESCALE", widen, (f"in{k}",), "x" if k else "acc"))
        if k:
            steps.append(Step("VALU", {"op": ValuOp.ADD, "dtype": i32}, ("acc", "x"), "acc"))
    count = _counts(ih, oh, kernel[0], stride[0], pad[0])[:, None] * _counts(iw, ow, kernel[1], stride[1],
                                                                             pad[2])[None, :]
    multiplier, shift = th.reciprocal_scale(count.astype(np.int64))
    shift = np.broadcast_to(shift, count.shape)
    consts = []
    for j, s in enumerate(sorted(set(shift.reshape(-1).tolist()))):
        m = np.where(shift == s, multiplier, 0).reshape(1, oh, ow, 1).astype(np.int32)
        cname = f"{name}.m{s}"
        consts.append((cname, m))
        k = len(inputs)
        inputs.append(cname)
        types[f"in{k}"] = i32
        steps.append(Step("VALU", {"op": ValuOp.MUL, "dtype": i32, "imm0": int(s)}, ("acc", f"in{k}"),
                          "avg" if j == 0 else "p"))
        if j:
            steps.append(Step("VALU", {"op": ValuOp.ADD, "dtype": i32}, ("avg", "p"), "avg"))
    narrow = dict(in_type=i32, out_type=t, per_channel=0, scale32=1, double_round=0, in_zp=0, out_zp=ozp, clamp=0)
    steps.append(Step("VRESCALE", narrow, ("avg",), "out"))
    layer = EltLayer(name, inputs, op.outputs[0], tuple(yt.shape), types,
                     {"x": "ASRAM", "acc": "ASRAM", "p": "ASRAM", "avg": "ASRAM"}, steps, params=_unit_params(),
                     windows=windows, consts=consts, ops=[op.describe()], location=op.location)
    return layer, tuple(pad), izp
