"""Lowering of pooling layers (compiler/kinds/pooling/layer.py ``PoolLayer``) to VPOOL.

Per image and channel block, the output is cut into tiles of whole output rows (of output
columns when one row does not fit: very wide images).  For each tile:

1. DMA_LOAD the input rows the tile reads, all padded columns, into an ASRAM input slot
   (``[row][col]``, one brick per row), the padding in the DMA pad fields (value
   ``layer.pad_value``: -128 for MAX, the input zero point for AVG);
2. MAX: one VPOOL MAX over the tile (``n0`` output columns stepping ``stride_x``, ``n1``
   output rows stepping ``stride_y`` input rows, a ``k1 x k0`` window) into an ASRAM output
   slot.  AVG: one VPOOL SUM into an ACC slot (padding adds ``pad - input_zp = 0``), then a
   VRESCALE by ``reciprocal_scale(count)`` for every rectangle of outputs whose windows
   have the same number of real elements (the interior, and the edges where the window
   hangs over the padding), adding the output zero point and saturating to int8;
3. DMA_STORE the tile's bricks.

Input and output slots alternate (two of each when they fit) so the DMA can load the next
tile while the VPU works; the scheduler orders everything by footprints.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.config import NpuConfig
from isa.instructions import PoolMode, Sram, VecDst, VecMem, VecType
from tosa_ir.errors import Unsupported

from compiler.core.ops import Op, new_op
from compiler.core.plan import Plan
from compiler.core.dma import Window, fill_name, load_window
from compiler.program.memplan import ExtPlan
from compiler.kinds.pooling.layer import PoolLayer
from compiler.core.ops import MAX_LEN

VEC_ROWS = 1 << 16      # vector operands address the first 2**16 rows (VEC_ADDR_BITS)


@dataclass
class PoolPlan(Plan):
    """A lowered pooling layer (no choices to make: tiles as tall as ASRAM allows)."""

    layer: PoolLayer
    tile_rows: int

    def describe(self) -> str:
        return (f"{self.layer.mode} pool {self.layer.kernel[0]}x{self.layer.kernel[1]}/{self.layer.stride[0]}: "
                f"tiles of {self.tile_rows} output rows ({len(self.ops)} instructions)")


def params_name(layer: PoolLayer) -> str:
    return f"{layer.name}.params"


def window_counts(size: int, out: int, k: int, s: int, p: int) -> np.ndarray:
    """Real (non-padding) elements along one axis of each output's window."""
    start = np.arange(out) * s - p
    return np.minimum(start + k, size) - np.maximum(start, 0)


def _counts(layer: PoolLayer) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(count_y per output row, count_x per output column, distinct window counts)."""
    _, ih, iw, _ = layer.in_shape
    _, oh, ow, _ = layer.out_shape
    cy = window_counts(ih, oh, layer.kernel[0], layer.stride[0], layer.pad[0])
    cx = window_counts(iw, ow, layer.kernel[1], layer.stride[1], layer.pad[2])
    return cy, cx, sorted({int(a) * int(b) for a in set(cy.tolist()) for b in set(cx.tolist())})


def pool_constants(layer: PoolLayer, config: NpuConfig) -> dict[str, bytes]:
    """Constant segments the layer reads: the pad fill word; for AVG, two PSRAM rows
    (multiplier, shift of ``reciprocal_scale(count)``) per distinct window count."""
    out = {fill_name(layer.pad_value): bytes([layer.pad_value & 0xFF]) * config.bus_bytes}
    if layer.mode == "avg":
        rows = []
        for count in _counts(layer)[2]:
            k = (count - 1).bit_length()           # (1 << k) / 2 < count <= (1 << k)
            rows += [((1 << 30) + 1 << k) // count, 30 + k]
        out[params_name(layer)] = np.repeat(np.array(rows, "<i4")[:, None], config.array_cols, 1).tobytes()
    return out


def _runs(values: np.ndarray, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """Maximal runs (start, end, value) of equal ``values[lo:hi]``."""
    runs, start = [], lo
    for i in range(lo + 1, hi + 1):
        if i == hi or values[i] != values[start]:
            runs.append((start, i, int(values[start])))
            start = i
    return runs


def _tile_rows(layer: PoolLayer, config: NpuConfig) -> tuple[int, int, int, int]:
    """(output rows per tile, output columns per tile, slots, padded input columns per tile):
    whole output rows when one fits, else the widest column tile (very wide images); the
    tallest tile whose slots fit ASRAM (and ACC for AVG), double-buffered when possible."""
    _, oh, ow, _ = layer.out_shape
    (kh, kw), (sy, sx) = layer.kernel, layer.stride
    asram, acc = min(config.asram_rows, VEC_ROWS), min(config.acc_rows, VEC_ROWS)

    def fits(t: int, tw: int, slots: int) -> bool:
        rows, cols = (t - 1) * sy + kh, (tw - 1) * sx + kw
        return not (slots * (rows * cols + t * tw) > asram or (layer.mode == "avg" and slots * t * tw > acc)
                    or sy * cols >= VEC_ROWS or rows > MAX_LEN or tw > MAX_LEN)

    for slots in (2, 1):
        best = 0
        for t in range(1, min(oh, MAX_LEN) + 1):
            if not fits(t, ow, slots):
                break
            best = t
        if best:
            return best, ow, slots, (ow - 1) * sx + kw
    for slots in (2, 1):
        tw = max((w for w in range(1, min(ow, MAX_LEN) + 1) if fits(1, w, slots)), default=0)
        if tw:
            return 1, tw, slots, (tw - 1) * sx + kw
    raise Unsupported(f"{layer.where()}: one output of the pooling (a {kh}x{kw} window) does not fit the "
                      f"scratchpads")


def lower_pool(layer: PoolLayer, ext: ExtPlan, config: NpuConfig, index: int) -> PoolPlan:
    """The instructions of ``layer`` (natural order, no waits)."""
    n_img, ih, iw, _ = layer.in_shape
    _, oh, ow, _ = layer.out_shape
    (kh, kw), (sy, sx) = layer.kernel, layer.stride
    src, dst = ext.view(layer.input), ext.view(layer.output)
    th, tw, slots, cols = _tile_rows(layer, config)
    in_slot = ((th - 1) * sy + kh) * cols
    out_base = slots * in_slot
    fill_addr = ext.constants[fill_name(layer.pad_value)]
    avg = layer.mode == "avg"
    ops: list[Op] = []

    def op(name, **fields) -> Op:
        return new_op(config, index, name, **fields)

    if avg:
        cy, cx, counts = _counts(layer)
        p_addr = ext.constants[params_name(layer)]
        ops.append(op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=0, ext_addr=p_addr,
                      len0=2 * len(counts) * config.words_per_wide_row, len1=1, len2=1))
        if 2 * len(counts) > config.psram_rows:
            raise Unsupported(f"{layer.where()}: {len(counts)} window sizes need more PSRAM rows than "
                              f"the {config.psram_rows} the NPU has")
    step = 0
    for n in range(n_img):
        for cb in range(src.blocks):
            for oy, ox in ((y, x) for y in range(0, oh, th) for x in range(0, ow, tw)):
                t, w = min(th, oh - oy), min(tw, ow - ox)
                c = (w - 1) * sx + kw                  # padded input columns of this tile
                slot = step % slots
                step += 1
                a_base, d_base = slot * in_slot, out_base + slot * th * tw
                rows = (t - 1) * sy + kh
                win = Window(base=src.word(n, cb, 0, 0), height=ih, width=iw, line_bytes=src.strides[2],
                             plane_bytes=src.strides[1], pad_top=layer.pad[0], pad_left=layer.pad[2],
                             row0=oy * sy, row_step=1, rows=rows, col0=ox * sx, cols=c, planes=1)
                ops += load_window(config, index, win, a_base, fill_addr, layer.pad_value)
                pool_dst = (VecDst.ACC, slot * th * tw) if avg else (VecDst.ASRAM, d_base)
                ops.append(op("VPOOL", mode=PoolMode.SUM if avg else PoolMode.MAX, dtype=VecType.INT8,
                              n0=w, n1=t, k0=kw, k1=kh, w_stride0=1, w_stride1=c,
                              a_mem=VecMem.ASRAM, a_addr=a_base, a_stride0=sx, a_stride1=sy * c,
                              d_mem=pool_dst[0], d_addr=pool_dst[1], d_stride0=1, d_stride1=w,
                              in_zp=layer.input_zp))
                if avg:
                    for y0, y1, ky in _runs(cy, oy, oy + t):
                        for x0, x1, kx in _runs(cx, ox, ox + w):
                            at = (y0 - oy) * w + x0 - ox
                            ops.append(op("VRESCALE", n0=x1 - x0, n1=y1 - y0,
                                          a_mem=VecMem.ACC, a_addr=pool_dst[1] + at, a_stride0=1, a_stride1=w,
                                          d_mem=VecDst.ASRAM, d_addr=d_base + at, d_stride0=1, d_stride1=w,
                                          in_type=VecType.INT32, out_type=VecType.INT8,
                                          param_addr=2 * counts.index(ky * kx), per_channel=0, scale32=1,
                                          double_round=0, in_zp=0, out_zp=layer.output_zp, clamp=0))
                ops.append(op("DMA_STORE", sram=Sram.ASRAM, sram_addr=d_base, ext_addr=dst.word(n, cb, oy, ox),
                              len0=w, len1=t, len2=1, stride1=dst.strides[2]))
    return PoolPlan(layer, ops, th)
