"""Tap packing: strided convolutions with few input channels use more array rows.

A convolution with ``cin`` input channels fills ``cin`` of the array's ``L`` rows per
MATMUL (AlexNet's first layer: 3 of 16).  When its x stride ``g`` satisfies
``g * cin <= L``, the layer becomes two convolutions:

1. a *repack* layer (a ConvLayer with 0/1 weights and an exact identity output stage)
   writes ``P[n, y, q, dx*cin + c] = X[n, y, g*q + dx - pad_left, c]``: ``g`` consecutive
   pixels per brick (pixels outside the image get the input zero point, exactly what the
   convolution's padding holds).  It costs one MATMUL vector per input pixel;
2. the convolution on ``P``: kernel ``kh x ceil(kw/g)``, x stride 1, weights
   ``W'[o, ky, j, dx*cin + c] = W[o, ky, g*j + dx, c]`` (the weight zero point past the
   kernel's width, which contributes exactly 0), same output stage: ``kh*ceil(kw/g)``
   MATMULs per output tile instead of ``kh*kw``.

Kernel taps thus move into the reduction dimension (an im2col along x done by the array
itself: the DMA moves whole bus words, so lanes cannot be regrouped by strided loads of
brick tensors).  Both layers go through the ordinary tiling and lowering.  The pass
applies only where the saved MATMUL work exceeds the repack's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.config import NpuConfig

from compiler.core.ir import ConvLayer
from compiler.core.dataflow import Dataflow, Ref, Root
from compiler.core.views import ceil_div

IDENTITY_SHIFT = 30          # multiplier 2**30, shift 30: (v * 2**30 + 2**29) >> 30 == v


@dataclass
class RepackLayer(ConvLayer):
    """The repack convolution (data movement: no MACs of the graph)."""

    @property
    def macs(self) -> int:
        return 0


@dataclass
class PackedConvLayer(ConvLayer):
    """The convolution on packed taps; ``original`` is the layer it replaces (for its MACs
    and reports)."""

    original: ConvLayer | None = None

    @property
    def macs(self) -> int:
        return self.original.macs


def pack_taps(flow: Dataflow, config: NpuConfig) -> Dataflow:
    """Rewrite ``flow``'s eligible conv layers in place (and return it)."""
    out = []
    for layer in flow.layers:
        g = _factor(layer, config)
        if g:
            out += _split(flow, layer, g)
        else:
            out.append(layer)
    flow.layers = out
    return flow


def _factor(layer, config: NpuConfig) -> int:
    """The packing factor (pixels per brick) of ``layer``, 0 if not worth it."""
    if type(layer) is not ConvLayer or layer.depth_multiplier:     # depthwise: one channel per lane already
        return 0
    n, ih, iw, cin = layer.in_shape
    _, oh, ow, cout = layer.out_shape
    kh, kw = layer.kernel
    g = layer.stride[1]
    if g < 2 or layer.dilation[1] != 1 or g * cin > config.array_rows or kw < 2:
        return 0
    kq = ceil_div(kw, g)
    wq = ow + kq - 1
    saved = n * oh * ow * ceil_div(cout, config.array_cols) * kh * (kw - kq)
    cost = n * ih * wq * g
    return g if 4 * saved > 5 * cost else 0         # a margin for the repack's DMA and ACTs


def _split(flow: Dataflow, layer: ConvLayer, g: int) -> list[ConvLayer]:
    n, ih, iw, cin = layer.in_shape
    _, oh, ow, cout = layer.out_shape
    kh, kw = layer.kernel
    pt, pb, pl, _ = layer.pad
    kq = ceil_div(kw, g)
    wq = ow + kq - 1
    lanes = g * cin
    packed = f"{layer.name}.packed"
    while packed in flow.refs:           # never shadow a graph tensor
        packed += "_"
    shape = (n, ih, wq, lanes)
    flow.roots[packed] = Root(packed, shape, "computed")
    flow.refs[packed] = Ref(packed, root=True)
    flow.shapes[packed] = shape

    select = np.zeros((lanes, 1, g, cin), dtype=np.int8)
    for dx in range(g):
        for c in range(cin):
            select[dx * cin + c, 0, dx, c] = 1
    zp = layer.input_zp
    repack = RepackLayer(
        name=f"{layer.name}.pack", input=layer.input, output=packed, in_shape=layer.in_shape,
        out_shape=shape, weights=select, bias=np.zeros(lanes, dtype=np.int32), input_zp=zp,
        weight_zp=0, stride=(1, g), dilation=(1, 1), pad=(0, 0, pl, max(g * wq - iw - pl, 0)),
        multiplier=np.full(lanes, 1 << IDENTITY_SHIFT, dtype=np.int64),
        shift=np.full(lanes, IDENTITY_SHIFT, dtype=np.int64), scale32=True, double_round=False,
        output_zp=zp, clamp=(-128, 127), ops=[f"repack of {layer.name}'s input: {g} pixels per brick"],
        location=layer.location)

    w = np.full((cout, kh, kq * g, cin), layer.weight_zp, dtype=np.int8)
    w[:, :, :kw, :] = layer.weights
    # [o][ky][j*g + dx][c] -> [o][ky][j][dx*cin + c]
    w = np.ascontiguousarray(w.reshape(cout, kh, kq, g * cin))
    conv = PackedConvLayer(
        name=layer.name, input=packed, output=layer.output, in_shape=shape, out_shape=layer.out_shape,
        weights=w, bias=layer.bias, input_zp=zp, weight_zp=layer.weight_zp, stride=(layer.stride[0], 1),
        dilation=layer.dilation, pad=(pt, pb, 0, 0), multiplier=layer.multiplier, shift=layer.shift,
        scale32=layer.scale32, double_round=layer.double_round, output_zp=layer.output_zp,
        clamp=layer.clamp, ops=layer.ops, location=layer.location, original=layer)
    return [repack, conv]
