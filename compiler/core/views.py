"""Brick views: where the elements of an activation tensor sit in external memory.

Every int8 activation the NPU touches is (part of) a *root* buffer in the ``brick`` layout
(isa/layout.py): ``[N][CB][H][W][L]``, one bus word per (image, channel block, row,
column).  A tensor that is a window of a root (a SLICE, a CONCAT input written in place, a
layout-compatible RESHAPE) is a :class:`BrickView` of it: a start address, its own shape
and the root's strides.  A column is always one bus word, so a row of a view is one DMA
line and a view is always readable and writable by the 3-D DMA.

Tensors of rank below 4 are handled as rank 4 with leading ones (``[C]`` as
``[1, 1, 1, C]``, ``[A, C]`` as ``[1, 1, A, C]``): the last axis is always the channel axis.
"""
from __future__ import annotations

from dataclasses import dataclass


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def shape4(shape) -> tuple[int, int, int, int] | None:
    """``shape`` as NHWC (leading ones added; extra leading ones dropped), or None."""
    shape = tuple(int(d) for d in shape)
    while len(shape) > 4 and shape[0] == 1:
        shape = shape[1:]
    if not 1 <= len(shape) <= 4:
        return None
    return (1,) * (4 - len(shape)) + shape


def axis4(rank: int, axis: int) -> int:
    """The NHWC axis of axis ``axis`` of a rank-``rank`` tensor (see :func:`shape4`)."""
    return axis + 4 - rank


def dense_strides(shape, lanes: int) -> tuple[int, int, int]:
    """(image, channel block, row) strides in bytes of a whole brick tensor of ``shape``."""
    _, h, w, c = shape
    plane = h * w * lanes
    return ceil_div(c, lanes) * plane, plane, w * lanes


@dataclass(frozen=True)
class BrickView:
    """A rank-4 NHWC int8 tensor inside a brick root buffer.

    Attributes
    ----------
    root : str
        The root buffer (compiler/dataflow.py names them).
    addr : int
        Byte address of brick (0, 0, 0, 0): relative to the root's start in the dataflow
        pass, absolute in the memory plan (compiler/program/memplan.py).
    shape : tuple of int
        ``(N, H, W, C)``.
    strides : tuple of int
        Bytes from one image, channel block and row to the next (a column is one word).
    lanes : int
        Bus bytes (= channels per brick).
    """

    root: str
    addr: int
    shape: tuple[int, int, int, int]
    strides: tuple[int, int, int]
    lanes: int

    @property
    def blocks(self) -> int:
        return ceil_div(self.shape[3], self.lanes)

    @property
    def dense(self) -> bool:
        """True if the view's bytes are those of a whole brick tensor of its shape (what a
        binding needs): every stride along an axis of more than one step is the dense one."""
        n, h, _, _ = self.shape
        counts = (n, self.blocks, h)
        return all(c == 1 or s == d for c, s, d in zip(counts, self.strides,
                                                       dense_strides(self.shape, self.lanes)))

    def word(self, n: int, cb: int, h: int, w: int) -> int:
        """Address of brick (n, cb, h, w)."""
        sn, scb, sh = self.strides
        return self.addr + n * sn + cb * scb + h * sh + w * self.lanes

    def window(self, offset, shape) -> "BrickView":
        """The sub-view of ``shape`` starting at element ``offset`` = (n, h, w, c), ``c`` a
        multiple of lanes."""
        n, h, w, c = offset
        assert c % self.lanes == 0, "channel offsets are whole bricks"
        return BrickView(self.root, self.word(n, c // self.lanes, h, w), tuple(shape), self.strides, self.lanes)


def byte_map(shape, lanes: int) -> tuple:
    """Canonical form of where a whole brick tensor of ``shape`` keeps each element.

    The elements in row-major (NHWC) order are described as nested ``(count, byte
    stride)`` loops, with unit loops dropped and loops merged where they run on
    contiguously; a channel axis that is not a whole number of bricks (and more than one)
    cannot be written that way and appears as a marker.  Two shapes with equal byte maps
    keep every element at the same byte: a RESHAPE between them moves nothing.
    """
    n, h, w, c = shape
    sn, scb, sh = dense_strides(shape, lanes)
    dims = [(n, sn), (h, sh), (w, lanes)]
    if c <= lanes or scb == lanes:       # one brick per pixel, or one pixel: channels in order
        dims.append((c, 1))
    elif c % lanes == 0:
        dims += [(c // lanes, scb), (lanes, 1)]
    else:
        dims.append(("split", c, scb))     # lanes then blocks: not one strided loop
    merged: list = []
    for dim in dims:
        if dim[0] == 1:
            continue
        if merged and len(dim) == 2 and len(merged[-1]) == 2 and merged[-1][1] == dim[0] * dim[1]:
            merged[-1] = (merged[-1][0] * dim[0], dim[1])
        else:
            merged.append(dim)
    return tuple(merged)


def same_bytes(a, b, lanes: int) -> bool:
    """True if brick tensors of NHWC shapes ``a`` and ``b`` hold their elements (in
    row-major order) at the same bytes."""
    return byte_map(a, lanes) == byte_map(b, lanes)


def flat_compatible(shape, lanes: int) -> bool:
    """True if a brick tensor of ``shape`` holds its elements in row-major order, one byte
    each, from its start: the same bytes as the ``flat`` layout."""
    size = shape[0] * shape[1] * shape[2] * shape[3]
    return byte_map(shape, lanes) in ((), ((size, 1),))
