"""Lowering of copy layers (compiler/core/ir.py ``CopyLayer``): data through ASRAM by DMA.

A copy walks the destination's bricks in order and moves them in *chunks* that fit ASRAM:
DMA_LOADs gather a chunk from the source into consecutive ASRAM rows, DMA_STOREs scatter
those rows to the destination.  Both sides enumerate the chunk's bricks in the same order,
each with its own strides, so one side may be contiguous (``len0`` words per line) while
the other steps one word per line (a transpose of H and W reads columns).  The DMA runs
its instructions in order, so a chunk reuses the same rows without waiting.

* strided copies (plain, N/H/W permutations): nested loops (count, source stride,
  destination stride), merged where both sides run on contiguously, cut into chunks;
* PAD: windows of the source with the padding in the DMA_LOAD pad fields
  (compiler/core/dma.py ``load_window``), whole padding planes (N or channel
  padding) stored from rows filled once with the pad value;
* RESHAPE re-lays: runs of pixels contiguous on both sides, every channel block each.
"""
from __future__ import annotations

from dataclasses import dataclass

import itertools

from isa.config import NpuConfig
from isa.instructions import Sram

from compiler.core.ir import CopyLayer
from compiler.core.ops import Op, new_op
from compiler.core.plan import Plan
from compiler.core.dma import Window, fill, fill_name, load_window
from compiler.program.memplan import ExtPlan
from compiler.core.ops import MAX_LEN
from compiler.core.views import BrickView

Axis = tuple[int, int, int]    # (count, source stride, destination stride) in bytes


@dataclass
class CopyPlan(Plan):
    """A lowered copy layer (its instructions do not depend on any choice)."""

    layer: CopyLayer

    def describe(self) -> str:
        return f"copy: {self.layer.reason} ({len(self.ops)} DMA instructions)"


def lower_copy(layer: CopyLayer, ext: ExtPlan, config: NpuConfig, index: int) -> list[Op]:
    src, dst = ext.view(layer.src), ext.view(layer.dst)
    budget = min(config.asram_rows, MAX_LEN)
    if layer.relayout:
        return _relayout(src, dst, config, index, budget)
    if any(layer.pad):
        return _pad(layer, src, dst, ext, config, index, budget)
    lanes = config.bus_bytes
    n, h, w, _ = dst.shape
    along = (src.strides[0], src.strides[2], lanes)       # source N, H, W strides
    p = layer.perm
    axes = [(n, along[p[0]], dst.strides[0]), (dst.blocks, src.strides[1], dst.strides[1]),
            (h, along[p[1]], dst.strides[2]), (w, along[p[2]], lanes)]
    return copy_axes(config, index, axes, src.addr, dst.addr, 0, budget)


def copy_axes(config: NpuConfig, index: int, axes: list[Axis], src_addr: int, dst_addr: int,
              sram_addr: int, budget: int) -> list[Op]:
    """Copy the bricks of nested loops ``axes`` (outermost first) in chunks of at most
    ``budget`` ASRAM rows from ``sram_addr``."""
    lanes = config.bus_bytes
    axes = _merge([a for a in axes if a[0] > 1], both=True) or [(1, lanes, lanes)]
    k, inner = len(axes), 1
    while k > 0 and inner * axes[k - 1][0] <= budget:
        k -= 1
        inner *= axes[k][0]
    ops: list[Op] = []
    if k == 0:
        chunks = [(src_addr, dst_addr, axes)]
    else:
        split, piece = axes[k - 1], budget // inner
        chunks = []
        outer = axes[:k - 1]
        for idx in itertools.product(*(range(a[0]) for a in outer)):
            s0 = src_addr + sum(i * a[1] for i, a in zip(idx, outer))
            d0 = dst_addr + sum(i * a[2] for i, a in zip(idx, outer))
            for start in range(0, split[0], piece):
                count = min(piece, split[0] - start)
                chunks.append((s0 + start * split[1], d0 + start * split[2],
                               [(count, split[1], split[2])] + axes[k:]))
    for s0, d0, chunk in chunks:
        ops += _side(config, index, "DMA_LOAD", [(a[0], a[1]) for a in chunk], s0, sram_addr)
        ops += _side(config, index, "DMA_STORE", [(a[0], a[2]) for a in chunk], d0, sram_addr)
    return ops


def _merge(axes: list, both: bool = False) -> list:
    """Merge each loop into the one outside it where the outer one's stride is the inner
    one's whole extent (on both sides when ``both``)."""
    out: list = []
    for a in axes:
        if out:
            o = out[-1]
            if all(o[s] == a[0] * a[s] for s in range(1, len(a))):
                out[-1] = (o[0] * a[0],) + tuple(a[1:])
                continue
        out.append(tuple(a))
    return out


def _side(config: NpuConfig, index: int, name: str, axes: list[tuple[int, int]], ext_addr: int,
          sram_addr: int) -> list[Op]:
    """DMA instructions moving ``axes`` (count, external stride) between external memory
    from ``ext_addr`` and consecutive ASRAM rows from ``sram_addr``."""
    lanes = config.bus_bytes
    axes = _merge([a for a in axes if a[0] > 1])
    if axes and axes[-1][1] == lanes:
        len0, rest = axes[-1][0], axes[:-1]
    else:
        len0, rest = 1, axes
    line = rest[-1] if rest else (1, 0)
    plane = rest[-2] if len(rest) >= 2 else (1, 0)
    outer = rest[:-2]
    words = len0 * line[0] * plane[0]
    ops = []
    for n, idx in enumerate(itertools.product(*(range(a[0]) for a in outer))):
        at = ext_addr + sum(i * a[1] for i, a in zip(idx, outer))
        ops.append(new_op(config, index, name, sram=Sram.ASRAM, sram_addr=sram_addr + n * words,
                          ext_addr=at, len0=len0, len1=line[0], stride1=line[1],
                          len2=plane[0], stride2=plane[1]))
    return ops


def _pad(layer: CopyLayer, src: BrickView, dst: BrickView, ext: ExtPlan, config: NpuConfig,
         index: int, budget: int) -> list[Op]:
    lanes = config.bus_bytes
    n0, _, h0, _, w0, _, c0, _ = layer.pad
    cb0 = c0 // lanes
    nd, hd, wd, _ = dst.shape
    ns, hs, ws, _ = src.shape
    fill_addr = ext.constants[fill_name(layer.pad_value)]

    def real(n: int, cb: int) -> bool:
        return 0 <= n - n0 < ns and 0 <= cb - cb0 < src.blocks

    planes = [(n, cb) for n in range(nd) for cb in range(dst.blocks)]
    padded = any(not real(n, cb) for n, cb in planes)
    half = budget // 2 if padded else budget      # the rest holds fill words
    cw = min(wd, half)
    nr = min(hd, half // cw)
    per_op = half // (nr * cw) if (nr, cw) == (hd, wd) else 1    # whole planes per DMA
    ops: list[Op] = []
    fill_base = half
    if padded:
        ops += fill(config, index, fill_base, per_op * nr * cw, fill_addr)

    def store(sram: int, n: int, cb: int, k: int, r: int, c: int, rows: int, cols: int) -> Op:
        return new_op(config, index, "DMA_STORE", sram=Sram.ASRAM, sram_addr=sram,
                      ext_addr=dst.word(n, cb, r, c), len0=cols, len1=rows, stride1=dst.strides[2],
                      len2=k, stride2=dst.strides[1])

    for n in range(nd):
        cb = 0
        while cb < dst.blocks:
            is_real = real(n, cb)
            run = 1
            while cb + run < dst.blocks and real(n, cb + run) == is_real and run < per_op:
                run += 1
            for r in range(0, hd, nr):
                rows = min(nr, hd - r)
                for c in range(0, wd, cw):
                    cols = min(cw, wd - c)
                    if not is_real:
                        ops.append(store(fill_base, n, cb, run, r, c, rows, cols))
                        continue
                    win = Window(base=src.word(n - n0, cb - cb0, 0, 0), height=hs, width=ws,
                                 line_bytes=src.strides[2], plane_bytes=src.strides[1], pad_top=h0,
                                 pad_left=w0, row0=r, row_step=1, rows=rows, col0=c, cols=cols, planes=run)
                    ops += load_window(config, index, win, 0, fill_addr, layer.pad_value)
                    ops.append(store(0, n, cb, run, r, c, rows, cols))
            cb += run
    return ops


def _relayout(src: BrickView, dst: BrickView, config: NpuConfig, index: int, budget: int) -> list[Op]:
    """Pixel ``p`` of ``dst`` (row-major over N, H, W) from pixel ``p`` of ``src``."""
    lanes = config.bus_bytes
    n, h, w, _ = src.shape
    pixels = n * h * w
    cuts = {0, pixels}
    for view in (src, dst):
        vn, vh, vw, _ = view.shape
        sn, _, sh = view.strides
        if sh != vw * lanes:                       # rows do not run on
            cuts.update(range(vw, pixels, vw))
        if sn != (vh - 1) * sh + vw * lanes:       # images do not run on (in one channel block)
            cuts.update(range(vh * vw, pixels, vh * vw))
    bounds = sorted(cuts)
    ops: list[Op] = []
    for p0, p1 in zip(bounds, bounds[1:]):
        axes = [(src.blocks, src.strides[1], dst.strides[1]), (p1 - p0, lanes, lanes)]
        ops += copy_axes(config, index, axes, _pixel(src, p0), _pixel(dst, p0), 0, budget)
    return ops


def _pixel(view: BrickView, p: int) -> int:
    _, h, w, _ = view.shape
    n, rest = divmod(p, h * w)
    return view.word(n, 0, *divmod(rest, w))
