"""Convolutions with wide outputs on the MAC array: CONV2D, CONV3D, TRANSPOSE_CONV2D,
DEPTHWISE_CONV2D (int16; int8 with a channel multiplier when no RESCALE to int8 follows, the
others going fused to the conv kind, compiler/kinds/depthwise/choice.py: weight tiles diagonal per
tap, ``w[c][c*M + m] = w_dw[tap][c][m]``, the weight zero point elsewhere; the lowering
skips tiles holding only the zero point) and the
draft's FULLY_CONNECTED (a 1x1 convolution along N) producing their int32 (int8 x int8) or int48 (int16 x int8) accumulators as tensors, the
layers the fused int8 path (kinds/conv/fusion.py: CONV2D -> RESCALE -> int8) does not cover.
Lowered by compiler/kinds/mxu_conv/lower.py.

Every such convolution is a *gather* over kernel taps: output ``(od, oy, ox)`` adds, per tap,
one input pixel times the tap's ``IC x OC`` weights; inputs outside the tensor add nothing.
Along each spatial axis the output is cut into *phases* (output coordinates ``o0 + step*j``)
whose taps read input ``j * s + off``:

* CONV2D / CONV3D: one phase, ``step = 1``, ``s = stride``, ``off = k * dilation - pad``;
* TRANSPOSE_CONV2D (``o = i * stride + out_pad + k``): phase ``p < stride`` holds the outputs
  ``p + stride * j``; tap ``k`` belongs to it when ``p - out_pad - k`` is a multiple of the
  stride, reading input ``j + (p - out_pad - k) / stride`` (so no zeros are inserted and
  the kernel is not flipped: the weights are constants, gathered per tap at compile time).

Depth (CONV3D) is handled per output plane: taps whose input plane lies outside are dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.instructions import VecType
from tosa_ir import Block, Operator

from compiler.core.ir import SingleTensorLayer
from compiler.core.errors import invalid, unsupported
from compiler.core.operands import int_attrs, scalar_input
from compiler.kinds.elementwise.layer import elementwise_layer

MXU_CONV_OPS = ("CONV2D", "CONV3D", "TRANSPOSE_CONV2D", "FULLY_CONNECTED", "DEPTHWISE_CONV2D")


@dataclass
class AxisPhase:
    """Outputs ``o0 + step * j`` (``j < count``); tap ``k`` reads input ``j * s + off``."""

    o0: int
    step: int
    count: int
    s: int
    taps: list[tuple[int, int]]       # (kernel index, off)


@dataclass
class MxuConvLayer(SingleTensorLayer):
    """A convolution on the array with int32/int48 output (see the module docstring).

    ``weights``: ``[KD, KH, KW, IC, OC]`` (int64, weight zero point not yet subtracted);
    ``bias``: ``[OC]`` int64; ``depth``: per output plane, the (kd, input plane) taps.
    """

    name: str
    input: str
    output: str
    in_shape: tuple[int, ...]          # N, D, H, W, C (D = 1 for 2-D)
    out_shape: tuple[int, ...]         # N, D, H, W, OC
    weights: np.ndarray
    bias: np.ndarray
    wide: bool                         # int16 input, int48 output
    int4: bool                         # int4 weights (packed tiles, MATMUL w_type INT4)
    input_zp: int
    weight_zp: int
    ys: list[AxisPhase]
    xs: list[AxisPhase]
    depth: list[list[tuple[int, int]]]
    ops: list[str] = field(default_factory=list)
    location: str = ""
    # A fused RESCALE of the accumulators (VRESCALE straight from ACC): its VRESCALE fields
    # (types, zero points, rounding) and [multiplier, shift] per output channel.
    rescale: dict | None = None
    rescale_params: np.ndarray | None = None
    # int48 only: weight byte planes above ``weights`` (one or two; same shape and zero
    # point; bias must be 0): the output is ``sum_k 256**k * (input . plane_k)`` (mod 2**48),
    # plane 0 being ``weights``, combined in ACC like MATMUL's int16 byte split
    # (compiler/kinds/matmul/lower.py).
    upper_planes: list = field(default_factory=list)

    @property
    def macs(self) -> int:
        return int(np.prod(self.out_shape)) * int(np.prod(self.weights.shape[:4]))


def _conv_axis(size_out: int, stride: int, dil: int, pad: int, k: int) -> list[AxisPhase]:
    return [AxisPhase(0, 1, size_out, stride, [(i, i * dil - pad) for i in range(k)])]


def _transpose_axis(size_out: int, stride: int, out_pad: int, k: int) -> list[AxisPhase]:
    phases = []
    for p in range(min(stride, size_out)):
        taps = [(i, (p - out_pad - i) // stride) for i in range(k) if (p - out_pad - i) % stride == 0]
        phases.append(AxisPhase(p, stride, -(-(size_out - p) // stride), 1, taps))
    return phases


def mxu_conv_layer(op: Operator, block: Block, name: str) -> MxuConvLayer:
    x, w, y = block.tensor(op.inputs[0]), block.tensor(op.inputs[1]), block.tensor(op.outputs[0])
    modes = {("int8", "int8"): "int32", ("int8", "int4"): "int32", ("int16", "int8"): "int48"}
    if (x.dtype, w.dtype) not in modes or y.dtype != modes[(x.dtype, w.dtype)]:
        raise unsupported(op, f"{x.dtype} x {w.dtype} -> {y.dtype}: the array runs int8 x int8 -> int32, "
                              f"int8 x int4 -> int32 and int16 x int8 -> int48 convolutions")
    if any(d < 0 for d in x.shape + w.shape + y.shape):
        raise unsupported(op, "unknown dimensions")
    if not (w.is_const and block.tensor(op.inputs[2]).is_const):
        raise unsupported(op, "weights and bias must be constant tensors")
    izp = scalar_input(op, block, 3, "input_zp")
    wzp = scalar_input(op, block, 4, "weight_zp")
    wt = np.asarray(w.data, np.int64).reshape(w.shape)
    bias = np.asarray(block.tensor(op.inputs[2]).data, np.int64).reshape(-1)
    oc = y.shape[-1]
    if bias.size not in (1, oc):
        raise invalid(op, f"bias of {bias.size} values for {oc} output channels")
    bias = np.broadcast_to(bias, (oc,)).copy()
    if op.op == "FULLY_CONNECTED":       # [N, IC] x [OC, IC]: a 1x1 convolution along N
        if len(x.shape) != 2 or len(wt.shape) != 2:
            raise invalid(op, f"input {list(x.shape)} and weight {list(w.shape)} must have rank 2")
        rows, ic = x.shape
        n, id_, ih, iw, od, oh, ow = 1, 1, 1, rows, 1, 1, rows
        weights = wt.T[None, None, None]
        ys, xs, depth = _conv_axis(1, 1, 1, 0, 1), _conv_axis(rows, 1, 1, 0, 1), [[(0, 0)]]
    elif op.op == "CONV3D":
        pad, stride, dil = int_attrs(op, "pad", 6), int_attrs(op, "stride", 3), int_attrs(op, "dilation", 3)
        n, id_, ih, iw, ic = x.shape
        _, od, oh, ow, _ = y.shape
        kd, kh, kw = wt.shape[1:4]
        weights = wt.transpose(1, 2, 3, 4, 0)                      # [OC,KD,KH,KW,IC] -> [KD,KH,KW,IC,OC]
        ys, xs = _conv_axis(oh, stride[1], dil[1], pad[2], kh), _conv_axis(ow, stride[2], dil[2], pad[4], kw)
        depth = [[(k, o * stride[0] + k * dil[0] - pad[0]) for k in range(kd)
                  if 0 <= o * stride[0] + k * dil[0] - pad[0] < id_] for o in range(od)]
    else:
        n, ih, iw, ic = x.shape
        _, oh, ow, _ = y.shape
        id_, od = 1, 1
        depth = [[(0, 0)]]
        if op.op == "DEPTHWISE_CONV2D":
            weights = _diagonal(op, wt, ic, oc, wzp)
            kh, kw = wt.shape[:2]
        else:
            kh, kw = wt.shape[1:3]
            weights = wt.transpose(1, 2, 3, 0)[None]               # [OC,KH,KW,IC] -> [1,KH,KW,IC,OC]
        if op.op in ("CONV2D", "DEPTHWISE_CONV2D"):
            pad, stride, dil = int_attrs(op, "pad", 4), int_attrs(op, "stride", 2), int_attrs(op, "dilation", 2)
            ys, xs = _conv_axis(oh, stride[0], dil[0], pad[0], kh), _conv_axis(ow, stride[1], dil[1], pad[2], kw)
        else:
            out_pad, stride = int_attrs(op, "out_pad", 4), int_attrs(op, "stride", 2)
            ys, xs = _transpose_axis(oh, stride[0], out_pad[0], kh), _transpose_axis(ow, stride[1], out_pad[2], kw)
    if weights.shape[3] != ic or weights.shape[4] != oc:
        raise invalid(op, f"weights {list(w.shape)} do not match input channels {ic} and output channels {oc}")
    return MxuConvLayer(name, op.inputs[0], op.outputs[0], (n, id_, ih, iw, ic), (n, od, oh, ow, oc), weights,
                        bias, x.dtype == "int16", w.dtype == "int4", izp, wzp, ys, xs, depth, ops=[op.describe()],
                        location=op.location)


def _diagonal(op: Operator, wt: np.ndarray, ic: int, oc: int, wzp: int) -> np.ndarray:
    """DEPTHWISE_CONV2D weights ``[KH, KW, C, M]`` as a convolution's ``[1, KH, KW, C, C*M]``:
    output channel ``c*M + m`` takes input channel ``c`` times ``w[.., c, m]``; every other
    entry is the weight zero point, so it adds nothing (and the lowering skips tiles holding
    only such entries)."""
    if wt.ndim != 4 or wt.shape[2] != ic or wt.shape[2] * wt.shape[3] != oc:
        raise invalid(op, f"weights {list(wt.shape)} do not match input channels {ic} and output channels {oc}")
    kh, kw, _, m = wt.shape
    weights = np.full((1, kh, kw, ic, ic * m), wzp, np.int64)
    c = np.arange(ic)
    for k in range(m):
        weights[0][:, :, c, c * m + k] = wt[:, :, :, k]
    return weights


def mxu_conv(walk, op: Operator) -> None:
    """Add the layer of ``op`` to the dataflow walk (compiler/dataflow.py): any input
    with a view (bricks or rows), the output a rows tensor."""
    layer = mxu_conv_layer(op, walk.block, walk.new_name("mxconv"))
    layer.input = walk.require_vec(op, layer.input)
    rescale = _fusable_rescale(walk, op)
    if rescale is not None:
        elt = elementwise_layer(rescale, walk.block, layer.name)
        oc = layer.out_shape[-1]
        layer.rescale = dict(elt.steps[0].fields)
        layer.rescale_params = np.stack([np.broadcast_to(np.asarray(r, np.int64).reshape(-1), (oc,))
                                         for r in elt.params])
        layer.output = rescale.outputs[0]
        layer.ops.append(rescale.describe())
        walk.done.add(id(rescale))
        walk.vector_output(layer.output)       # rows, or bricks for an int8 conv reading it
    else:
        out = walk.block.tensor(op.outputs[0])
        walk.new_root(op.outputs[0], tuple(out.shape), "computed", layout="rows", dtype=out.dtype)
    walk.flow.layers.append(layer)


def _fusable_rescale(walk, op: Operator) -> Operator | None:
    """The RESCALE that is the only reader of ``op``'s accumulators (not a graph output), if
    it reads them with input zero point 0 (the spec's rule for int32/int48 inputs)."""
    name = op.outputs[0]
    users = walk.consumers.get(name, [])
    if len(users) != 1 or users[0].op != "RESCALE" or users[0].inputs[0] != name or \
            name in walk.block.outputs:
        return None

    try:
        elt = elementwise_layer(users[0], walk.block, "probe")
    except Exception:       # an unusual or illegal RESCALE: left to its own layer (and its checks)
        return None
    fields = elt.steps[0].fields
    if len(elt.steps) != 1 or elt.steps[0].name != "VRESCALE" or fields.get("in_zp", 0) != 0 or \
            fields["in_type"] not in (VecType.INT32, VecType.INT48):
        return None
    return users[0]
