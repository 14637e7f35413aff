"""Im2col by the DMA: a strided convolution with few input channels reading a graph input
becomes a 1x1 convolution over rows the DMA gathers (DMA_LOAD with packed lines).

A convolution with ``cin`` input channels fills ``cin`` of the array's ``R`` rows per MATMUL
(AlexNet's first layer: 3 of 16); tap packing (tap_packing.py) regroups pixels through a
repack layer and reaches ``g*cin/R`` of the rows at best (68.75% for AlexNet).  Here the
graph input is bound in the ``flat`` layout (isa/layout.py: row-major NHWC bytes, the
binding's perm transposing an NCHW input on the host), where a kernel row of ``kw`` pixels
is ``kw*cin`` consecutive bytes.  For every output pixel one DMA plane gathers its window:

    plane (pixel): kh lines, stride1 = dy*W*cin bytes (one kernel row each)
    line:          len0 elements of E bytes, stride0 = E: ceil(kw*cin/E)*E bytes from the
                   window's left edge (the bytes past kw*cin belong to the next pixels or
                   row: their weights are the weight zero point, so they add exactly 0)

With ``pack = 1`` the lines follow each other byte after byte and the plane fills
``nb = ceil(kh*len0*E / BUS)`` ASRAM rows (its last row completed with the pad value):
AlexNet's 11x11x3 window is 11 lines of 9 int32 = 396 bytes = 25 rows (99% of their bytes
are window bytes, 90.75% meet weights other than the zero point).  Pixels are planes
``sx*cin`` bytes apart (``len2`` = pixels of one output row), so one DMA per output row of
a tile; the convolution is then a 1x1 convolution over ``nb`` input blocks: per output
block and input block ``b`` one MATMUL, ``a_addr = slot + b``, ``a_stride0 = nb`` (pixel
after pixel), its weight tile holding the window bytes ``b*R .. b*R+R-1`` in im2col order.

Cost per pixel: DMA ``kh*len0`` cycles (one element per cycle) plus ``cbo`` for the output
store, MXU ``nb*cbo`` vectors; the two overlap (double-buffered input slots, a ring of ACC
slots).  Per tile the ACTs wait for the gather, since both write ASRAM (isa/ports.py), and
the array's work on the last tile has no gather beside it.  AlexNet's conv0: 99 + 4 DMA
cycles and 100 vectors per pixel, 322,742 cycles (DMA busy 302,292) against its bound of
264,627 (tap packing: 469,640 with its repack).  The
pass (tap_packing.py ``pack_taps``) takes this form where that estimate beats tap packing
and the plain convolution.  E is the widest element size dividing the row stride, the
pixel stride and every window address (a multiple of 4 for AlexNet: ``(y*224 + 4*x)*3``).

Limits (the layer keeps another form otherwise): fewer input channels than array rows (a
brick already fills the rows otherwise), no padding (pad values would have to cover whole
elements), no x dilation, the input is a graph input (or a window of one with
all its channels) that no other layer reads, the window's over-read stays inside the
input's buffer, and the weights of all output blocks fit WSRAM at once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.config import NpuConfig
from isa.instructions import Sram
from isa.layout import layout_bytes

from compiler.core.dataflow import Dataflow
from compiler.core.ir import ConvLayer
from compiler.core.ops import Op, new_op
from compiler.core.views import ceil_div
from compiler.kinds.conv.plan import PARAM_ROWS
from compiler.program.memplan import ExtPlan

ELEMS = (4, 2, 1)          # element sizes tried, widest first (fewest DMA cycles)


@dataclass(frozen=True)
class Gather:
    """Where the flat input is and how a window is read: ``root`` (the flat input root),
    ``offset`` (byte offset of the window's element (0, 0, 0, 0) in the root), ``image``,
    ``row`` (bytes per image and per image row), ``elem`` (E), ``len0`` (elements per kernel
    row), ``blocks`` (ASRAM rows per pixel, nb)."""

    root: str
    offset: int
    image: int
    row: int
    elem: int
    len0: int
    blocks: int


@dataclass
class Im2colConvLayer(ConvLayer):
    """The convolution as a 1x1 convolution over ``gather.blocks`` input blocks of gathered
    windows (weights ``(cout, 1, 1, blocks*R)`` in window-byte order); ``input`` stays the
    graph tensor (its root holds it flat); ``original`` is the layer it replaces."""

    original: ConvLayer | None = None
    gather: Gather | None = None

    @property
    def macs(self) -> int:
        return self.original.macs


def _flat_window(flow: Dataflow, name: str):
    """(input root, NHWC element offset of the window) when ``name`` is a graph input root
    bound as bricks, or a window of one with all its channels; else None."""
    offset = np.zeros(4, dtype=np.int64)
    ref = flow.refs.get(name)
    while ref is not None and not ref.root:
        if ref.reshape:
            return None
        offset += ref.offset
        ref = flow.refs.get(ref.parent)
    if ref is None:
        return None
    root = flow.roots[ref.parent]
    if root.kind != "input" or root.layout != "brick" or root.dtype != "int8" or len(root.shape) != 4:
        return None
    if offset[3] != 0 or flow.shapes[name][3] != root.shape[3]:
        return None
    return root, tuple(int(v) for v in offset)


def only_reader(flow: Dataflow, layer, root: str) -> bool:
    """``layer`` is the one layer reading ``root`` and no graph output lives there."""
    if any(flow.root_of(b.tensor).name == root for b in flow.outputs):
        return False
    return all(other is layer or all(flow.root_of(t).name != root for t in other.reads)
               for other in flow.layers if hasattr(other, "reads"))


def gather_of(flow: Dataflow, layer, config: NpuConfig) -> Gather | None:
    """How ``layer``'s windows would be gathered, or None if this form does not apply."""
    if type(layer) is not ConvLayer or layer.depth_multiplier or any(layer.pad) or layer.dilation[1] != 1:
        return None
    found = _flat_window(flow, layer.input)
    if found is None or not only_reader(flow, layer, found[0].name):
        return None
    root, (n0, y0, x0, _) = found
    _, rh, rw, cin = root.shape
    n, _, _, _ = layer.in_shape
    _, oh, ow, cout = layer.out_shape
    kh, kw = layer.kernel
    (sy, sx), (dy, _) = layer.stride, layer.dilation
    row, image = rw * cin, rh * rw * cin
    offset = ((n0 * rh + y0) * rw + x0) * cin
    lanes, bus = config.array_rows, config.bus_bytes
    if lanes != bus or cin >= lanes:        # a brick already fills the array's rows
        return None
    for e in ELEMS:
        if (offset % e or row % e or (sx * cin) % e or (dy * row) % e or (sy * row) % e or image % e):
            continue
        len0 = ceil_div(kw * cin, e)
        # The last window's last element must stay inside the input's buffer.
        last = (offset + (n - 1) * image + ((oh - 1) * sy + (kh - 1) * dy) * row + (ow - 1) * sx * cin
                + len0 * e)
        if last > layout_bytes(root.shape, np.int8, "flat", bus):
            continue
        blocks = ceil_div(kh * len0 * e, bus)
        if blocks * ceil_div(cout, config.array_cols) * lanes > config.wsram_rows:
            return None
        return Gather(root.name, offset, image, row, e, len0, blocks)
    return None


def cycles(layer: ConvLayer, g: Gather, config: NpuConfig) -> int:
    """Estimated cycles, tile by tile as the lowering pipelines them: the weights' load, the
    first gather alone, then per tile the slower of its MATMULs (``max(pixels, R)`` cycles
    each, R = array rows) and the next tile's gather plus this tile's stores, the last
    tile's MATMULs and stores alone, and a fixed cost per tile (its first ACT waits for the
    gather, as both write ASRAM)."""
    n, oh, ow, cout = layer.out_shape
    cbo = ceil_div(cout, config.array_cols)
    kh, _ = layer.kernel
    lat, rows = config.mem_latency, config.array_rows
    tiles = tile_list(layer.out_shape, *tiling(layer.out_shape, g, config))

    def gather(t):
        return t[2] * (kh * g.len0 * t[4] + lat)

    def mxu(t):
        return cbo * g.blocks * max(t[2] * t[4], rows)

    def stores(t):
        return cbo * (t[2] * t[4] + 1)

    total = cbo * g.blocks * rows + lat + gather(tiles[0]) + len(tiles) * TILE_CYCLES
    for t, nxt in zip(tiles, tiles[1:]):
        total += max(mxu(t), gather(nxt) + stores(t))
    return total + mxu(tiles[-1]) + stores(tiles[-1])


def tile_list(out_shape, th: int, tw: int) -> list[tuple[int, int, int, int, int]]:
    """(image, first row, rows, first column, columns) of every tile, in order."""
    n, oh, ow, _ = out_shape
    return [(b, oy, min(th, oh - oy), ox, min(tw, ow - ox))
            for b in range(n) for oy in range(0, oh, th) for ox in range(0, ow, tw)]


TILE_CYCLES = 200           # per tile: the first ACT waiting for the gather, issue gaps
MIN_TILES = 6               # a small layer still pipelines its gathers with the array


def tiling(out_shape, g: Gather, config: NpuConfig) -> tuple[int, int]:
    """(rows, columns) of output pixels per tile: as many as ACC and ASRAM hold (fewer tiles,
    fewer instructions: the whole program stays short enough for the loop search), but at
    least MIN_TILES tiles, so the gather of one overlaps the MATMULs of another."""
    n, oh, ow, cout = out_shape
    cbo = ceil_div(cout, config.array_cols)
    pixels = min(config.acc_rows // _acc_slots(cbo), config.asram_rows // (IN_SLOTS * g.blocks + cbo),
                 (1 << 16) - 1, max(1, ceil_div(n * oh * ow, MIN_TILES)))
    tw = min(ow, pixels)
    return max(1, min(oh, pixels // tw)), tw


def rewrite(flow: Dataflow, layer: ConvLayer, g: Gather, config: NpuConfig) -> Im2colConvLayer:
    """Bind the input flat and return the layer's im2col form."""
    root = flow.roots[g.root]
    root.layout = "flat"
    for b in flow.inputs:
        if flow.root_of(b.tensor).name == g.root:
            b.layout = "flat"
    lanes = config.array_rows
    n, _, _, cin = layer.in_shape
    _, oh, ow, cout = layer.out_shape
    kh, kw = layer.kernel
    line = g.len0 * g.elem
    # Window byte i: kernel row i // line, byte i % line of it = pixel, channel.
    w = np.full((cout, g.blocks * lanes), layer.weight_zp, dtype=np.int8)
    i = np.arange(kh * line)
    ky, kx, c = i // line, (i % line) // cin, (i % line) % cin
    real = kx < kw
    w[:, i[real]] = layer.weights[:, ky[real], kx[real], c[real]]
    return Im2colConvLayer(
        name=layer.name, input=layer.input, output=layer.output, in_shape=(n, oh, ow, g.blocks * lanes),
        out_shape=layer.out_shape, weights=w.reshape(cout, 1, 1, g.blocks * lanes), bias=layer.bias,
        input_zp=layer.input_zp, weight_zp=layer.weight_zp, stride=(1, 1), dilation=(1, 1), pad=(0, 0, 0, 0),
        multiplier=layer.multiplier, shift=layer.shift, scale32=layer.scale32, double_round=layer.double_round,
        output_zp=layer.output_zp, clamp=layer.clamp,
        ops=layer.ops + [f"im2col of {layer.name}'s input by the DMA: {g.blocks} rows per pixel"],
        location=layer.location, original=layer, gather=g)


@dataclass
class Im2colPlan:
    """Tiles of ``th`` x ``tw`` output pixels; double-buffered input (``blocks`` rows per
    pixel), a ring of ``cbo + 2`` ACC slots of one output block each (the next tile's first
    blocks accumulate while the last ACTs of this one drain); weights and parameters
    resident.  Tiles are as large as ACC allows: the fewer instructions, the less the
    instruction fetch competes with the gathering DMA for the bus."""

    layer: Im2colConvLayer
    cbo: int
    th: int
    tw: int
    out_slots: int
    estimate: dict = field(default_factory=dict)

    @property
    def wcb(self) -> int:
        return self.layer.gather.blocks

    def tiles(self) -> list[tuple[int, int, int, int, int]]:
        return tile_list(self.layer.out_shape, self.th, self.tw)

    def describe(self) -> str:
        g = self.layer.gather
        return (f"im2col by the DMA: {g.blocks} rows per pixel ({g.len0} x int{8 * g.elem} per kernel row, "
                f"packed lines), tile {self.th}x{self.tw} ({len(self.tiles())} tiles), weights resident")


IN_SLOTS = 2


def _acc_slots(cbo: int) -> int:
    return cbo + 2


def plan(layer: Im2colConvLayer, config: NpuConfig) -> Im2colPlan:
    g = layer.gather
    cbo = ceil_div(layer.out_shape[3], config.array_cols)
    if not fits(layer, g, config):
        raise AssertionError("compiler bug: im2col chosen for a layer whose buffers do not fit")
    th, tw = tiling(layer.out_shape, g, config)
    p = Im2colPlan(layer, cbo, th, tw, cbo)
    p.estimate = {"cycles": cycles(layer.original, g, config),
                  "instructions": len(p.tiles()) * (th + cbo * (g.blocks + 2))}
    return p


def fits(layer: ConvLayer, g: Gather, config: NpuConfig) -> bool:
    cbo = ceil_div(layer.out_shape[3], config.array_cols)
    return (config.acc_rows // _acc_slots(cbo) >= 1 and config.asram_rows // (IN_SLOTS * g.blocks + cbo) >= 1
            and cbo * PARAM_ROWS <= config.psram_rows)


def lower(p: Im2colPlan, ext: ExtPlan, config: NpuConfig, index: int, names: dict) -> list[Op]:
    """Weights and parameters once, then per tile: one packed-line DMA_LOAD per output row
    (the windows of its pixels), per output block ``blocks`` MATMULs, an ACT and a
    DMA_STORE."""
    layer, g = p.layer, p.layer.gather
    lanes, wpr = config.array_rows, config.words_per_wide_row
    kh, _ = layer.original.kernel
    (sy, sx), (dy, _) = layer.original.stride, layer.original.dilation
    cin = layer.original.in_shape[3]
    src = ext.roots[g.root] + g.offset
    dst = ext.view(layer.output)
    pixels = p.th * p.tw
    slot_rows = pixels * g.blocks
    out_base = IN_SLOTS * slot_rows

    def op(name, **fields) -> Op:
        return new_op(config, index, name, **fields)

    ops = [op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=0, ext_addr=ext.constants[names["weights"]],
              len0=p.cbo * g.blocks * lanes, len1=1, len2=1),
           op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=0, ext_addr=ext.constants[names["params"]],
              len0=p.cbo * PARAM_ROWS * wpr, len1=1, len2=1)]
    tiles = p.tiles()

    def gather(t: int) -> list[Op]:
        """One packed-line DMA_LOAD per output row of tile ``t``: the windows of its pixels."""
        n, oy, th, ox, tw = tiles[t]
        a_base = (t % IN_SLOTS) * slot_rows
        return [op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=a_base + r * tw * g.blocks,
                   ext_addr=src + n * g.image + (oy + r) * sy * g.row + ox * sx * cin,
                   elem=g.elem, stride0=g.elem, len0=g.len0, len1=kh, stride1=dy * g.row,
                   len2=tw, stride2=sx * cin, pack=1, pad_value=layer.input_zp & 0xFF)
                for r in range(th)]

    # Natural order, software-pipelined by hand (the scheduler hoists only across a few
    # ops; a tile has ~100 MATMULs per output block, and wait masks name whole units):
    #   MATMUL(t, first)  gather(t+1)  MATMUL(t, rest)  ACT + DMA_STORE per block of t
    # The first MATMUL waits for gather(t) alone, so gather(t+1) runs on the DMA while the
    # array works on tile t; the ACTs (which write ASRAM, so wait for the gathering DMA:
    # isa/ports.py) and the stores come once per tile, after its last MATMUL.
    ops += gather(0)
    out_next = acc_next = 0
    for t, (n, oy, th, ox, tw) in enumerate(tiles):
        a_base = (t % IN_SLOTS) * slot_rows
        accs = []
        for ob in range(p.cbo):
            acc = (acc_next % _acc_slots(p.cbo)) * pixels
            acc_next += 1
            accs.append(acc)
            for b in range(g.blocks):
                ops.append(op("MATMUL", a_addr=a_base + b, a_stride0=g.blocks, a_stride1=0, n0=th * tw, n1=1,
                              w_addr=(ob * g.blocks + b) * lanes, acc_addr=acc, accumulate=int(b > 0),
                              a_zp=layer.input_zp, w_zp=layer.weight_zp))
                if ob == b == 0 and t + 1 < len(tiles):
                    ops += gather(t + 1)
        for ob, acc in enumerate(accs):
            out_row = out_base + (out_next % p.out_slots) * pixels
            out_next += 1
            ops.append(op("ACT", acc_addr=acc, count=th * tw, dst_addr=out_row, param_addr=ob * PARAM_ROWS,
                          out_zp=layer.output_zp, clamp_min=layer.clamp[0], clamp_max=layer.clamp[1],
                          scale32=int(layer.scale32), double_round=int(layer.double_round)))
            ops.append(op("DMA_STORE", sram=Sram.ASRAM, sram_addr=out_row, ext_addr=dst.word(n, ob, oy, ox),
                          len0=tw, len1=th, len2=1, stride1=dst.strides[2]))
    return ops
