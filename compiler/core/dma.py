"""DMA helpers shared by the lowerings: windows of brick tensors with padding, fills.

A *window* is the part of one image of a brick tensor (``[N][CB][H][W][L]``, or a view
of one: compiler/core/views.py) that one output tile reads: ``rows`` rows every ``row_step``
rows starting at padded row ``row0``, ``cols`` consecutive columns starting at padded
column ``col0``, for ``planes`` consecutive channel blocks.  Coordinates are in the padded image (``pad_top`` rows and ``pad_left``
columns before the real data); whatever falls outside the real image is padding and gets
``pad_value``.  In ASRAM the window is ``[plane][row][col]``, one brick per row.

Normally one DMA_LOAD moves the whole window, padding folded into its pad fields (edge
tiles simply get different pad counts).  Pad runs longer than the 8-bit pad fields, and
windows entirely inside the padding, fall back to several transfers where the padding
comes from *fill* loads: one external word holding ``pad_value`` in every byte, read again
and again with a zero stride.
"""
from __future__ import annotations

from dataclasses import dataclass

from isa.config import NpuConfig
from isa.instructions import BY_NAME, Sram

from compiler.core.ops import Op, new_op
from compiler.core.ops import MAX_LEN

PAD_MAX = next(f for f in BY_NAME["DMA_LOAD"].fields if f.name == "pad_b0").max


@dataclass(frozen=True)
class Window:
    base: int          # external address of the image (n) and first plane (channel block)
    height: int        # real rows of the image
    width: int         # real columns
    line_bytes: int    # external bytes from one row to the next
    plane_bytes: int   # external bytes from one channel block to the next
    pad_top: int
    pad_left: int
    row0: int          # first padded row loaded
    row_step: int
    rows: int
    col0: int          # first padded column loaded
    cols: int
    planes: int


def _split(first: int, count: int, step: int, lo: int, hi: int) -> tuple[int, int]:
    """Of the positions first + j*step (0 <= j < count), the index range [a, b) in [lo, hi)."""
    a = min(max(-(-(lo - first) // step), 0), count)
    b = min(max(-(-(hi - first) // step), 0), count)
    return a, max(a, b)


def load_window(config: NpuConfig, layer: int, win: Window, sram_addr: int, fill_addr: int,
                pad_value: int) -> list[Op]:
    """DMA_LOADs writing ``win`` to ASRAM rows ``sram_addr ..`` (``[plane][row][col]``)."""
    bus = config.bus_bytes
    line = win.line_bytes
    ra, rb = _split(win.row0, win.rows, win.row_step, win.pad_top, win.pad_top + win.height)
    ca, cb = _split(win.col0, win.cols, 1, win.pad_left, win.pad_left + win.width)
    top, bottom, left, right = ra, win.rows - rb, ca, win.cols - cb
    pad = pad_value & 0xFF
    first_row = win.row0 + ra * win.row_step - win.pad_top
    first_col = win.col0 + ca - win.pad_left

    def data(sram: int, row: int, nrows: int, planes: int, pads: tuple[int, int, int, int],
             plane: int = 0) -> Op:
        return new_op(config, layer, "DMA_LOAD", sram=Sram.ASRAM, sram_addr=sram,
                      ext_addr=win.base + plane * win.plane_bytes + row * line + first_col * bus,
                      len0=cb - ca, len1=nrows, len2=planes,
                      stride1=win.row_step * line, stride2=win.plane_bytes,
                      pad_b1=pads[0], pad_a1=pads[1], pad_b0=pads[2], pad_a0=pads[3], pad_value=pad)

    real = rb > ra and cb > ca
    if real and max(top, bottom, left, right) <= PAD_MAX and rb - ra <= MAX_LEN:
        return [data(sram_addr, first_row, rb - ra, win.planes, (top, bottom, left, right))]

    plane_rows = win.rows * win.cols
    if not real:
        return fill(config, layer, sram_addr, win.planes * plane_rows, fill_addr)
    ops: list[Op] = []
    for p in range(win.planes):
        at = sram_addr + p * plane_rows
        ops += fill(config, layer, at, top * win.cols, fill_addr)
        at += top * win.cols
        if max(left, right) <= PAD_MAX:
            for r in range(0, rb - ra, MAX_LEN):
                n = min(MAX_LEN, rb - ra - r)
                ops.append(data(at, first_row + r * win.row_step, n, 1, (0, 0, left, right), p))
                at += n * win.cols
        else:
            for r in range(rb - ra):
                ops += fill(config, layer, at, left, fill_addr)
                ops.append(data(at + left, first_row + r * win.row_step, 1, 1, (0, 0, 0, 0), p))
                ops += fill(config, layer, at + left + cb - ca, right, fill_addr)
                at += win.cols
        ops += fill(config, layer, at, bottom * win.cols, fill_addr)
    return ops


def fill_name(value: int) -> str:
    """Name of the constant segment holding one bus word of the byte ``value``."""
    return f"fill.{value & 0xFF:02x}"


def fill(config: NpuConfig, layer: int, sram_addr: int, count: int, fill_addr: int,
         sram: Sram = Sram.ASRAM) -> list[Op]:
    """Write ``count`` words of the fill word at external ``fill_addr`` from ``sram_addr``."""
    ops = []
    for start in range(0, count, MAX_LEN):
        n = min(MAX_LEN, count - start)
        ops.append(new_op(config, layer, "DMA_LOAD", sram=sram, sram_addr=sram_addr + start,
                          ext_addr=fill_addr, len0=1, len1=n, len2=1, stride1=0, stride2=0))
    return ops
