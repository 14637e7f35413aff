"""Tap packing: strided convolutions with few input channels use more array rows.

A convolution with ``cin`` input channels fills ``cin`` of the array's ``L`` rows per
MATMUL (AlexNet's and ResNet-50's first layers: 3 of 16).  With x stride ``s`` and
``s * cin <= L`` the layer becomes two convolutions, for a packing factor ``g`` with
``s <= g`` and ``g * cin <= L``:

1. a *repack* layer (a ConvLayer with 0/1 weights, kernel ``1 x g``, x stride ``s``, and an
   exact identity output stage) writes ``P[n, y, q, dx*cin + c] = X[n, y, s*q + dx - pad_left, c]``:
   ``g`` consecutive pixels per brick, bricks ``s`` pixels apart (pixels outside the image
   get the input zero point, exactly what the convolution's padding holds).  It costs ``g``
   MATMUL vectors per brick;
2. the convolution on ``P``: kernel ``kh x kq``, x stride 1, tap ``j`` covering kernel
   columns ``s*j .. s*j+g-1``, so ``kq = 1 + ceil((kw - g) / s)``.  When ``g > s`` the taps
   overlap; each column's weights sit in the first tap that covers it, the weight zero
   point (which contributes exactly 0) elsewhere.  Same output stage: ``kh*kq`` MATMULs per
   output tile instead of ``kh*kw``.

``g = s`` gives ``ceil(kw/s)`` taps; a larger ``g`` fewer (ResNet-50's 7x7/2 conv with 3
channels: ``g = 5`` gives 2 taps per row instead of 4, for a repack of 5 instead of 2
vectors per brick); :func:`_factor` takes the ``g`` with the fewest MATMUL vectors in all.
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
from compiler.kinds.conv import im2col, input_patches
from compiler.kinds.conv.taps import tap_of, taps_per_row
from compiler.kinds.conv.tiling import plan_candidates

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
    """Rewrite ``flow``'s eligible conv layers in place (and return it): each takes the
    fastest by estimate of its input written as patches by the host (input_patches.py), its
    im2col by the DMA (im2col.py), tap packing, and itself."""
    out = []
    for layer in flow.layers:
        g = _factor(layer, config)
        gather = im2col.gather_of(flow, layer, config)
        if gather is not None and not im2col.fits(layer, gather, config):
            gather = None
        patches = input_patches.patches_of(flow, layer, config)
        on_patches = input_patches.layer_on_patches(layer, patches) if patches is not None else None
        form = "taps" if g else "plain"
        if gather is not None or on_patches is not None:
            best = _planned_cycles(layer, g, config)
            if gather is not None:
                cycles = im2col.cycles(layer, gather, config)
                if cycles < best:
                    form, best = "im2col", cycles
            if on_patches is not None and _estimate(on_patches, config) < best:
                form = "patches"
        if form == "patches":
            out.append(input_patches.rewrite(flow, on_patches))
        elif form == "im2col":
            out.append(im2col.rewrite(flow, layer, gather, config))
        elif form == "taps":
            out += _split(flow, layer, g)
        else:
            out.append(layer)
    flow.layers = out
    return flow


def _estimate(layer: ConvLayer, config: NpuConfig) -> int:
    """Cycles of ``layer`` by the estimate of the tiling the driver would pick (tiling.py)."""
    return plan_candidates(layer, config)[0].estimate["cycles"]


def _planned_cycles(layer: ConvLayer, g: int, config: NpuConfig) -> int:
    """Cycles of ``layer`` tap-packed by ``g`` (the repack's included), or as it is with
    ``g == 0``, by the estimate of the tilings the driver would pick (tiling.py): what the
    im2col form's estimate is compared with."""
    layers = _layers(layer, g, f"{layer.name}.packed") if g else [layer]
    return sum(_estimate(part, config) for part in layers)


def _factor(layer, config: NpuConfig) -> int:
    """The packing factor (pixels per brick) of ``layer``, 0 if not worth it: of the ``g``
    from the x stride up to what the brick holds, the one with the fewest MATMUL vectors
    (the convolution's plus the repack's)."""
    if type(layer) is not ConvLayer or layer.depth_multiplier:     # depthwise: one channel per lane already
        return 0
    n, ih, iw, cin = layer.in_shape
    _, oh, ow, cout = layer.out_shape
    kh, kw = layer.kernel
    s = layer.stride[1]
    if s < 2 or layer.dilation[1] != 1 or s * cin > config.array_rows or kw < 2:
        return 0
    blocks = ceil_div(cout, config.array_cols)

    def work(g: int) -> int:
        kq = taps_per_row(kw, s, g)
        return n * oh * ow * blocks * kh * kq + n * ih * (ow + kq - 1) * g

    g = min(range(s, config.array_rows // cin + 1), key=lambda g: (work(g), g))
    kq = taps_per_row(kw, s, g)
    saved = n * oh * ow * blocks * kh * (kw - kq)
    cost = n * ih * (ow + kq - 1) * g
    return g if 4 * saved > 5 * cost else 0         # a margin for the repack's DMA and ACTs


def _split(flow: Dataflow, layer: ConvLayer, g: int) -> list[ConvLayer]:
    packed = f"{layer.name}.packed"
    while packed in flow.refs:           # never shadow a graph tensor
        packed += "_"
    repack, conv = _layers(layer, g, packed)
    flow.roots[packed] = Root(packed, repack.out_shape, "computed")
    flow.refs[packed] = Ref(packed, root=True)
    flow.shapes[packed] = repack.out_shape
    return [repack, conv]


def _layers(layer: ConvLayer, g: int, packed: str) -> list[ConvLayer]:
    """The repack layer writing tensor ``packed`` and the convolution reading it."""
    n, ih, iw, cin = layer.in_shape
    _, oh, ow, cout = layer.out_shape
    kh, kw = layer.kernel
    pt, pb, pl, _ = layer.pad
    s = layer.stride[1]
    kq = taps_per_row(kw, s, g)
    wq = ow + kq - 1
    lanes = g * cin
    shape = (n, ih, wq, lanes)

    select = np.zeros((lanes, 1, g, cin), dtype=np.int8)
    for dx in range(g):
        for c in range(cin):
            select[dx * cin + c, 0, dx, c] = 1
    zp = layer.input_zp
    repack = RepackLayer(
        name=f"{layer.name}.pack", input=layer.input, output=packed, in_shape=layer.in_shape,
        out_shape=shape, weights=select, bias=np.zeros(lanes, dtype=np.int32), input_zp=zp,
        weight_zp=0, stride=(1, s), dilation=(1, 1), pad=(0, 0, pl, max(s * (wq - 1) + g - iw - pl, 0)),
        multiplier=np.full(lanes, 1 << IDENTITY_SHIFT, dtype=np.int64),
        shift=np.full(lanes, IDENTITY_SHIFT, dtype=np.int64), scale32=True, double_round=False,
        output_zp=zp, clamp=(-128, 127), ops=[f"repack of {layer.name}'s input: {g} pixels per brick"],
        location=layer.location)

    # [o][ky][j][dx*cin + c] = W[o][ky][s*j + dx][c] for the tap that owns column s*j + dx.
    w = np.full((cout, kh, kq, g, cin), layer.weight_zp, dtype=np.int8)
    for kx in range(kw):
        j, dx = tap_of(kx, s, g)
        w[:, :, j, dx, :] = layer.weights[:, :, kx, :]
    w = np.ascontiguousarray(w.reshape(cout, kh, kq, g * cin))
    conv = PackedConvLayer(
        name=layer.name, input=packed, output=layer.output, in_shape=shape, out_shape=layer.out_shape,
        weights=w, bias=layer.bias, input_zp=zp, weight_zp=layer.weight_zp, stride=(layer.stride[0], 1),
        dilation=layer.dilation, pad=(pt, pb, 0, 0), multiplier=layer.multiplier, shift=layer.shift,
        scale32=layer.scale32, double_round=layer.double_round, output_zp=layer.output_zp,
        clamp=layer.clamp, ops=layer.ops, location=layer.location, original=layer)
    return [repack, conv]
