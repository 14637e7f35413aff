"""Input patches: a few-channel convolution reading a graph input gets that input from the
host as its patches (isa/patches.py), with no work on the NPU.

A convolution with ``cin`` input channels fills ``cin`` of the array's ``R`` rows per MATMUL
(an image's 3).  Tap packing (tap_packing.py) regroups pixels on the array itself through a
repack layer that uses 3 of the rows too: on a 64x64 array ResNet-50's 7x7/2 stem took
182,285 cycles of repack and 104,794 of convolution (7 taps of 21 lanes).  When the input is
a graph input that only this layer reads, the host, which writes that input anyway, can
write it as patches of ``ph x pw`` pixels instead (``ph*pw*cin`` channels, one or more
bricks):

* along an axis with stride ``s`` and patch size ``g``: packed (``g >= s``, patches ``s``
  pixels apart, the convolution's stride there 1) or not (``g < s``, patches 1 pixel apart,
  stride ``s``), taps as in taps.py; ``kqh x kqw`` taps per output pixel instead of
  ``kh x kw``, each ``ceil(ph*pw*cin / R)`` MATMULs;
* the patches hold the padding (the input zero point outside the image, what the
  convolution's padding holds), so the convolution on them has none;
* weights ``[o][a][b][(dy*pw + dx)*cin + c] = W[o][ky][kx][c]`` for the taps ``(a, b)`` that
  own kernel position ``(ky, kx)`` (taps.py), the weight zero point elsewhere.

The patch shape is the one with the fewest MATMULs per output pixel (then the fewest bytes)
among those whose bytes stay within the padded one-pixel bricks they replace, so the host
writes no more than before: ResNet-50's stem (7x7/2, 3 channels) takes 2x7 patches on 16x16
(4 taps of 3 bricks: 12 MATMULs a pixel against 14 for tap packing, and no repack), 3x7 on
32x32 (3 taps of 2 bricks) and 64x64 (3 taps of one brick, 63 lanes; 49 unpacked);
MobileNetV2's (3x3/2) 3x3 patches, one tap of 27 lanes.  tap_packing.py ``pack_taps`` takes
this form where the tiling estimate says it is faster than the others.  ResNet-50's input as
patches is 618,240 bytes on 16x16 and 817,152 on 64x64, against 802,816 and 3,211,264 as
one-pixel bricks.

Limits (the layer keeps another form otherwise): a CONV2D (not depthwise) with dilation 1
and fewer input channels than array rows, whose input is a whole graph input bound as int8
bricks that no other layer reads and no graph output aliases.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.config import NpuConfig
from isa.patches import Patches

from compiler.core.dataflow import Dataflow
from compiler.core.ir import ConvLayer
from compiler.core.views import ceil_div
from compiler.kinds.conv.im2col import only_reader
from compiler.kinds.conv.taps import tap_of, taps_per_row

__all__ = ["PatchConvLayer", "patches_of", "layer_on_patches", "rewrite"]


@dataclass
class PatchConvLayer(ConvLayer):
    """The convolution on the patches the host writes; ``original`` is the layer it
    replaces (for its MACs and reports), ``patches`` the input's transform."""

    original: ConvLayer | None = None
    patches: Patches | None = None

    @property
    def macs(self) -> int:
        return self.original.macs


def _axis(k: int, s: int, g: int) -> tuple[int, int, int]:
    """(patch step, stride on the patches, taps) along an axis of kernel ``k``, stride ``s``
    and patch size ``g``."""
    step = s if g >= s else 1
    return step, s // step, taps_per_row(k, step, g)


def patches_of(flow: Dataflow, layer, config: NpuConfig) -> Patches | None:
    """The patches ``layer``'s input would be written as, or None if the form does not apply."""
    if type(layer) is not ConvLayer or layer.depth_multiplier or layer.dilation != (1, 1):
        return None
    ref = flow.refs.get(layer.input)
    if ref is None or not ref.root:
        return None
    root = flow.roots[ref.parent]
    if root.kind != "input" or root.layout != "brick" or root.dtype != "int8" or \
            tuple(root.shape) != tuple(layer.in_shape) or not only_reader(flow, layer, root.name):
        return None
    if sum(flow.root_of(b.tensor).name == root.name for b in flow.inputs) != 1:
        return None
    n, ih, iw, cin = layer.in_shape
    _, oh, ow, _ = layer.out_shape
    kh, kw = layer.kernel
    sy, sx = layer.stride
    rows = config.array_rows
    if cin >= rows:
        return None
    # MATMUL vectors per output pixel and block: taps times the patch's bricks; at most the
    # bytes of the padded one-pixel bricks the patches replace.
    pt, pb, pl, pr = layer.pad
    budget = n * (ih + pt + pb) * (iw + pl + pr) * ceil_div(cin, rows) * rows
    best = None
    for ph in range(1, kh + 1):
        for pw in range(1, kw + 1):
            (ry, ty, kqh), (rx, tx, kqw) = _axis(kh, sy, ph), _axis(kw, sx, pw)
            p = Patches(height=ph, width=pw, step_y=ry, step_x=rx, top=layer.pad[0], left=layer.pad[2],
                        rows=(oh - 1) * ty + kqh, cols=(ow - 1) * tx + kqw, fill=int(layer.input_zp))
            bricks = ceil_div(ph * pw * cin, rows)
            size = n * p.rows * p.cols * bricks * rows
            if size > budget:
                continue
            key = (kqh * kqw * bricks, size)
            if best is None or key < best[0]:
                best = (key, p)
    if best is None or best[0][0] >= kh * kw * ceil_div(cin, rows):
        return None
    return best[1]


def layer_on_patches(layer: ConvLayer, p: Patches) -> PatchConvLayer:
    """``layer`` as a convolution over its input written as ``p``."""
    n, _, _, cin = layer.in_shape
    cout = layer.out_shape[3]
    kh, kw = layer.kernel
    (ry, ty, kqh), (rx, tx, kqw) = _axis(kh, layer.stride[0], p.height), _axis(kw, layer.stride[1], p.width)
    w = np.full((cout, kqh, kqw, p.height, p.width, cin), layer.weight_zp, dtype=np.int8)
    for ky in range(kh):
        a, dy = tap_of(ky, ry, p.height)
        for kx in range(kw):
            b, dx = tap_of(kx, rx, p.width)
            w[:, a, b, dy, dx, :] = layer.weights[:, ky, kx, :]
    w = np.ascontiguousarray(w.reshape(cout, kqh, kqw, p.height * p.width * cin))
    return PatchConvLayer(
        name=layer.name, input=layer.input, output=layer.output, in_shape=p.shape(layer.in_shape),
        out_shape=layer.out_shape, weights=w, bias=layer.bias, input_zp=layer.input_zp,
        weight_zp=layer.weight_zp, stride=(ty, tx), dilation=(1, 1), pad=(0, 0, 0, 0),
        multiplier=layer.multiplier, shift=layer.shift, scale32=layer.scale32,
        double_round=layer.double_round, output_zp=layer.output_zp, clamp=layer.clamp,
        ops=layer.ops + [f"input as host patches: {p.height}x{p.width} pixels, {p.height * p.width * cin} lanes"],
        location=layer.location, original=layer, patches=p)


def rewrite(flow: Dataflow, conv: PatchConvLayer) -> PatchConvLayer:
    """Bind the input of ``conv`` (from :func:`layer_on_patches`) as its patches and return it."""
    p = conv.patches
    root = flow.roots[flow.refs[conv.input].parent]
    root.shape = conv.in_shape
    for name, ref in flow.refs.items():
        if ref.root and ref.parent == root.name:
            flow.shapes[name] = conv.in_shape
    for b in flow.inputs:
        if flow.root_of(b.tensor).name == root.name:
            b.patches = p
    return conv
