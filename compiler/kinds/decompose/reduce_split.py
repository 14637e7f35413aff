"""Reductions longer than one VPOOL window (255 elements): the axis split in two.

``REDUCE(x, axis)`` of ``K > 255`` elements is ``REDUCE(REDUCE(x', axis+1), axis)`` with
``x'`` the input seen as ``[.., K1, K2, ..]`` (``K1 * K2 = K``; a rows-layout view when the
axis is not the innermost, an element-DMA copy otherwise).  When no divisor pair fits both
windows, the axis is first padded to ``K1 * K2`` with the reduction's identity (0 for SUM,
the type's lowest value for MAX, its highest for MIN; ANY/ALL are MAX/MIN of 0/1), which
changes no result.  Each factor is at most 255, so one split covers ``K <= 65025`` and
longer axes split again (recursively, through ``_Builder.reduce``).  SUM is int32 with
wrap-around, so regrouping the additions gives the same bits.
"""
from __future__ import annotations

import math

import numpy as np

from isa.instructions import VecType
from tosa_ir.graph import numpy_dtype

from compiler.kinds.movement.layer import MoveLayer, Part, row_strides
from compiler.kinds.reduce.layer import WINDOW_MAX


def _identity(mode: str, dtype: str) -> int:
    if mode == "sum":
        return 0
    if dtype == "bool":
        return 0 if mode == "max" else 1
    info = np.iinfo(numpy_dtype(dtype))
    return int(info.min) if mode == "max" else int(info.max)


def _factors(k: int) -> tuple[int, int]:
    """(K1, K2), both <= WINDOW_MAX, K1 * K2 >= k, as little padding as possible (none when
    a divisor pair fits)."""
    for k2 in range(min(k, WINDOW_MAX), 0, -1):
        if k % k2 == 0 and k // k2 <= WINDOW_MAX:
            return k // k2, k2
    k1 = math.ceil(k / WINDOW_MAX)
    if k1 > WINDOW_MAX:                      # very long: the outer factor is reduced again
        return k1, WINDOW_MAX
    return k1, math.ceil(k / k1)


def split_reduce(b, x: str, axis: int, mode: str, dtype: VecType, out_dtype: str) -> str:
    """``reduce(x, axis)`` (``b`` a compiler/kinds/decompose/layer.py ``_Builder``) for an axis
    longer than one window; returns the result's name (shape of ``x`` with ``axis`` = 1)."""
    shape = b.shape(x)
    k = shape[axis]
    k1, k2 = _factors(k)
    if k1 * k2 != k:
        x = _pad_axis(b, x, shape, axis, k1 * k2, _identity(mode, out_dtype), out_dtype)
    split = shape[:axis] + (k1, k2) + shape[axis + 1:]
    xs = b.reshape(x, split, out_dtype)
    inner = b.reduce(xs, axis + 1, mode, dtype, out_dtype)
    outer = b.reduce(inner, axis, mode, dtype, out_dtype)
    return b.reshape(outer, shape[:axis] + (1,) + shape[axis + 1:], out_dtype)


def _pad_axis(b, x: str, shape, axis: int, length: int, value: int, dtype: str) -> str:
    """``x`` padded at the end of ``axis`` to ``length`` with ``value`` (an element-DMA fill
    of the whole output, then the input copied over it)."""
    lanes = b.walk.lanes
    out_shape = shape[:axis] + (length,) + shape[axis + 1:]
    out = b.tmp(out_shape, dtype)
    size = numpy_dtype(dtype).itemsize
    si, so = row_strides(shape, size, lanes), row_strides(out_shape, size, lanes)
    fill = np.array([value], dtype=numpy_dtype(dtype)).astype(f"<i{size}" if size > 1 else "i1").tobytes()
    parts = [Part(None, 0, 0, [(d, 0, s) for d, s in zip(out_shape, so)]),
             Part(0, 0, 0, [(d, a, c) for d, a, c in zip(shape, si, so)])]
    b.layer(MoveLayer(f"{b.base}.l{b.count}", [x], out, size, parts, fill))
    b.count += 1
    return out
