"""How tensors are laid out in the NPU's external memory, and host-side packing.

* ``"brick"``: a rank-4 NHWC int8 tensor as [N][ceil(C/L)][H][W][L] with L = lanes (bus
  bytes); channel lanes past C are zero.  One (n, c-block, h, w) brick is one bus word, so the
  DMA moves activations at full bandwidth and a brick is one ASRAM row.
* ``"flat"``: row-major bytes of any tensor, padded with zeros to a whole number of words.
* ``"rows"``: any tensor (rank 0 reads as ``[1]``) row-major with its innermost axis padded
  with zeros to a whole number of ``L``-element vectors: ``[..outer..][ceil(D/L)*L]``.  Every
  row is then whole vectors of the vector unit (an int8 vector is one word, int16 two,
  int32 four), so elementwise work and broadcasting along outer axes are strided vector
  loops, and a tensor with ``D == 1`` holds each row's value in lane 0 of its own vector
  (what VALU's lane-0 broadcast reads).

The host (``npu run``, the firmware driver) converts model inputs and outputs between numpy
NHWC and these layouts; the compiler chooses the layout of every tensor.
"""
from __future__ import annotations

import numpy as np

LAYOUTS = ("brick", "flat", "rows")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def layout_bytes(shape: tuple[int, ...], dtype: np.dtype, layout: str, lanes: int) -> int:
    """Bytes a tensor occupies in external memory (a whole number of bus words)."""
    itemsize = np.dtype(dtype).itemsize
    if layout == "brick":
        n, h, w, c = _brick_shape(shape)
        return n * _ceil_div(c, lanes) * h * w * lanes * itemsize
    if layout == "flat":
        size = int(np.prod(shape, dtype=np.int64)) * itemsize
        return _ceil_div(max(size, 1), lanes) * lanes
    if layout == "rows":
        outer, d = _rows_shape(shape)
        return max(outer * _ceil_div(d, lanes) * lanes * itemsize, lanes)
    raise ValueError(f"unknown layout {layout!r}")


def _brick_shape(shape):
    if len(shape) != 4:
        raise ValueError(f"brick layout needs a rank-4 NHWC tensor, not shape {tuple(shape)}")
    return shape


def _rows_shape(shape) -> tuple[int, int]:
    """(rows, innermost dimension) of a tensor in the ``rows`` layout."""
    shape = tuple(int(d) for d in shape) or (1,)
    return int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]


def pack(array: np.ndarray, layout: str, lanes: int) -> bytes:
    """The bytes of ``array`` in ``layout`` (little-endian elements)."""
    array = np.ascontiguousarray(array)
    if layout == "brick":
        n, h, w, c = _brick_shape(array.shape)
        cb = _ceil_div(c, lanes)
        padded = np.zeros((n, h, w, cb * lanes), dtype=array.dtype)
        padded[..., :c] = array
        bricks = padded.reshape(n, h, w, cb, lanes).transpose(0, 3, 1, 2, 4)
        return np.ascontiguousarray(bricks).astype(array.dtype.newbyteorder("<")).tobytes()
    if layout == "flat":
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        return data + bytes(layout_bytes(array.shape, array.dtype, "flat", lanes) - len(data))
    if layout == "rows":
        outer, d = _rows_shape(array.shape)
        padded = np.zeros((outer, _ceil_div(d, lanes) * lanes), dtype=array.dtype.newbyteorder("<"))
        padded[:, :d] = array.reshape(outer, d)
        data = padded.tobytes()
        return data + bytes(layout_bytes(array.shape, array.dtype, "rows", lanes) - len(data))
    raise ValueError(f"unknown layout {layout!r}")


def unpack(data: bytes, shape: tuple[int, ...], dtype: np.dtype, layout: str, lanes: int) -> np.ndarray:
    """Inverse of :func:`pack`."""
    dtype = np.dtype(dtype)
    le = dtype.newbyteorder("<")
    if layout == "brick":
        n, h, w, c = _brick_shape(shape)
        cb = _ceil_div(c, lanes)
        bricks = np.frombuffer(data, dtype=le, count=n * cb * h * w * lanes)
        array = bricks.reshape(n, cb, h, w, lanes).transpose(0, 2, 3, 1, 4).reshape(n, h, w, cb * lanes)
        return np.ascontiguousarray(array[..., :c]).astype(dtype)
    if layout == "flat":
        count = int(np.prod(shape, dtype=np.int64))
        return np.frombuffer(data, dtype=le, count=count).reshape(shape).astype(dtype)
    if layout == "rows":
        outer, d = _rows_shape(shape)
        width = _ceil_div(d, lanes) * lanes
        rows = np.frombuffer(data, dtype=le, count=outer * width).reshape(outer, width)
        return np.ascontiguousarray(rows[:, :d]).reshape(shape).astype(dtype)
    raise ValueError(f"unknown layout {layout!r}")
