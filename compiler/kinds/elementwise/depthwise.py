"""DEPTHWISE_CONV2D as an elementwise layer (compiler/kinds/elementwise/layer.py ``EltLayer``).

A depthwise convolution multiplies each channel by its own small kernel: per kernel tap
``(ky, kx)`` the input seen at ``(oy*sy + ky*dy, ox*sx + kx*dx)`` is a strided *window*
of the input (a view: the lowering reads it with the tap's offset and the strides times
the stride), and the tap's weights are one int32 vector per channel, broadcast over the
pixels.  So the layer is, with the zero points applied exactly in int32:

    acc = bias
    for every tap:  x = VRESCALE(window - input_zp) (int8/int16 -> int32, by 1)
                    acc = acc + VALU MUL(x, weight_tap - weight_zp)

Padding comes from a DMA copy with the input zero point as pad value (padding then adds
``0 * w``), made by the dataflow pass; with a channel multiplier ``M > 1`` that copy (element
DMA) also repeats every input channel ``M`` times, so output channel ``c*M + m`` reads
channel ``c``.

int16 inputs (int48 accumulators, which the vector unit cannot write) and channel
multipliers ``M > 1`` do not come here; nor does a layer that runs faster on the MAC array
with its RESCALE [CLAMP] fused (compiler/kinds/depthwise/choice.py compares
:func:`serial_cycles` with the array plan's estimate).
"""
from __future__ import annotations

import numpy as np

from isa.instructions import ValuOp, VecMem, VecType
from isa.vector import PARAM_ROWS, Schedule, vector_rows
from tosa_ir import Block, Operator

from compiler.kinds.elementwise.layer import EltLayer, Step, _unit_params
from compiler.core.errors import invalid, unsupported
from compiler.core.operands import int_attrs, scalar_input


def depthwise_layer(op: Operator, block: Block, name: str):
    """(layer, constants, pad, input_zp): the :class:`EltLayer` whose input 0 is the (padded)
    input, read through ``layer.windows``; constants are (tensor name, int32 data) the
    dataflow pass makes rows constants of (bias, then one weight vector per tap)."""
    x, w = block.tensor(op.inputs[0]), block.tensor(op.inputs[1])
    y = block.tensor(op.outputs[0])
    if x.dtype != "int8" or y.dtype != "int32":
        raise unsupported(op, f"{x.dtype} input, {y.dtype} output: the vector unit lowers int8 -> int32 "
                              f"depthwise convolutions (int16 ones run on the array)")
    if not (w.is_const and block.tensor(op.inputs[2]).is_const):
        raise unsupported(op, "weights and bias must be constant tensors")
    izp = scalar_input(op, block, 3, "input_zp")
    wzp = scalar_input(op, block, 4, "weight_zp")
    pad, stride, dil = int_attrs(op, "pad", 4), int_attrs(op, "stride", 2), int_attrs(op, "dilation", 2)
    if any(d < 0 for d in x.shape + y.shape):
        raise unsupported(op, "unknown dimensions")
    n, ih, iw, c = x.shape
    kh, kw, wc, m = w.shape
    if wc != c:
        raise invalid(op, f"weight channels {wc} != input channels {c}")
    _, oh, ow, oc = y.shape
    weights = np.asarray(w.data, np.int64) - wzp                     # [KH, KW, C, M]
    bias = np.asarray(block.tensor(op.inputs[2]).data, np.int64).reshape(-1)
    bias = np.broadcast_to(bias, (oc,)) if bias.size == 1 else bias
    # sum((x - izp) * w) = sum(x * w) - izp * sum(w): with int8 weights (weight_zp 0) the
    # input zero point folds into the bias and each tap is one int8 x int8 -> int32 MUL.
    narrow = bool(weights.min() >= -128 and weights.max() <= 127)
    if narrow:
        bias = bias - izp * weights.sum(axis=(0, 1)).reshape(-1)
    constants = [(f"{name}.bias", bias.astype(np.int32))]
    inputs = [constants[0][0]]                # in0: the bias, broadcast over the pixels
    windows = {}
    types = {"in0": VecType.INT32, "x": VecType.INT32, "p": VecType.INT32, "out": VecType.INT32}
    rescale = dict(in_type=VecType.INT8, out_type=VecType.INT32, per_channel=0, scale32=1, double_round=0,
                   in_zp=izp, out_zp=0, clamp=0)
    steps = []
    for ky in range(kh):
        for kx in range(kw):
            k = len(inputs)
            # in<k>: the tap's window of the input; in<k+1>: the tap's weights.
            inputs += [op.inputs[0], f"{name}.w{ky}_{kx}"]
            # (With a channel multiplier the input is read with its channels repeated.)
            windows[k] = ((0, ky * dil[0], kx * dil[1], 0), (1, stride[0], stride[1], 1), (n, oh, ow, oc))
            tap = weights[ky, kx].reshape(-1)
            types[f"in{k}"] = VecType.INT8
            if narrow:
                types[f"in{k + 1}"] = VecType.INT8
                constants.append((inputs[-1], tap.astype(np.int8)))
                steps.append(Step("VALU", {"op": ValuOp.MUL, "dtype": VecType.INT8, "imm0": 0},
                                  (f"in{k}", f"in{k + 1}"), "p"))
            else:
                types[f"in{k + 1}"] = VecType.INT32
                constants.append((inputs[-1], tap.astype(np.int32)))
                steps.append(Step("VRESCALE", rescale, (f"in{k}",), "x"))
                steps.append(Step("VALU", {"op": ValuOp.MUL, "dtype": VecType.INT32, "imm0": 0},
                                  ("x", f"in{k + 1}"), "p"))
            steps.append(Step("VALU", {"op": ValuOp.ADD, "dtype": VecType.INT32},
                              ("out" if k > 1 else "in0", "p"), "out"))
    temps = {"p": "ASRAM"} if narrow else {"x": "ASRAM", "p": "ASRAM"}
    layer = EltLayer(name, inputs, op.outputs[0], tuple(y.shape), types, temps, steps,
                     params=None if narrow else _unit_params(), windows=windows, ops=[op.describe()],
                     location=op.location)
    return layer, constants, (pad[0], pad[1], pad[2], pad[3]), izp



def serial_cycles(layer: EltLayer, lanes: int, mem_latency: int, per_channel: tuple[int, ...] = ()) -> int:
    """An estimate of ``layer``'s cycles run alone with nothing overlapped: every input
    loaded (one DMA per input, ``mem_latency`` plus a cycle per bus word; inputs listed in
    ``per_channel`` hold one vector column, the others one vector per output vector), every
    step one vector instruction over all output vectors (busy cycles of isa/vector.py
    ``Schedule``: ``P = max(rows read, rows written)`` per vector, int8 one ASRAM row and
    int32 four, plus its fill and issue), the output stored.

    Serial is what small layers do (one tile: load, compute, store in turn); large ones
    overlap DMA with the vector unit and take less, but there the array's one vector per
    tap beats the vector unit's multiply and add by about 8x anyway
    (compiler/kinds/depthwise/choice.py)."""
    shape = tuple(layer.out_shape) or (1,)
    columns = -(-shape[-1] // lanes)
    vectors = int(np.prod(shape[:-1], dtype=np.int64)) * columns

    def rows(x: str) -> int:
        return vector_rows(VecMem[layer.temps.get(x, "ASRAM")], layer.types[x])

    total = 0
    for k in range(len(layer.inputs)):
        count = columns if k in per_channel else vectors
        total += mem_latency + count * rows(f"in{k}")
    for step in layer.steps:
        reads = [rows(x) for x in step.srcs]
        sched = Schedule(K=PARAM_ROWS.get(step.name, 0), N=vectors, E=1, R=max(reads), W=rows(step.dst),
                         P=max(reads + [rows(step.dst)]))
        total += sched.busy + 1
    if layer.params is not None:            # VRESCALE parameters: int32 lanes, 4 bus words a row
        total += mem_latency + 4 * len(layer.params)
    return total + vectors * rows("out") + 1
