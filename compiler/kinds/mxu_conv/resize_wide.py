"""int16 BILINEAR RESIZE (int48 output) on the MAC array.

The spec's sum ``v00 * wy0 * wx0 + v01 * wy0 * wx1 + v10 * wy1 * wx0 + v11 * wy1 * wx1``
(``wy0 = scale_y_n - dy``, ``wy1 = dy``, likewise in x) needs int48, which only the array
writes.  The four neighbours come from two gathers (element DMA, the index maps known when
compiling, border clamping included), one along y with the index map ``iy0 ++ iy1`` and one
along x with ``ix0 ++ ix1``: ``T[n, a*OH + oy, b*OW + ox, c] = x[n, iy_a(oy), ix_b(ox), c]``,
read as ``[N, D = 2 (a), H = 2*OH (2*oy + b), OW, C]`` (the same bytes).

The weights depend on the output position only through ``dy`` and ``dx``, which repeat every
``P = scale_n / gcd(scale_n, scale_d)`` outputs: per output *phase* ``(py, px)`` they are
constants.  So the layer is a :class:`compiler.kinds.mxu_conv.layer.MxuConvLayer` with 1x1 "taps"
(depth tap ``a``; y taps ``b`` per phase: row ``2*py + b + 2*P_y*j``; x: column
``px + P_x*j``) whose ``C x C`` weights are ``wy_a[py] * wx_b[px]`` on the diagonal, the
weight zero point elsewhere (tiles of zero point only are skipped by the lowering).  Products
up to 255 fit the array's int8 weights exactly (with weight zero point -128 past 127).

Larger products (``scale_y_n * scale_x_n`` up to ``256 * 256``) are split into byte planes
``w = 256 * hi + lo`` (``lo`` 0..255, ``hi`` 0..256, both with weight zero point -128): the
layer's ``hi_weights``, whose MATMULs accumulate apart and are combined as ``256 * H + Lo``
exactly in int48 (the lowering reuses MATMUL's int16 byte split).  ``hi = 256`` (only
``w = 65536``: ``wy0 = wx0 = 256``, i.e. ``dy = dx = 0``) does not fit a byte: it is
``255 + 1``, the 1 on a third depth tap reading plane ``a = 0`` again.
"""
from __future__ import annotations

from math import gcd

import numpy as np

from compiler.core.errors import unsupported
from compiler.kinds.mxu_conv.layer import AxisPhase, MxuConvLayer


def _phases(o_size: int, s_n: int, s_d: int) -> int:
    return min(s_n // gcd(s_n, s_d), o_size)


def bilinear_int16(b, op, gather, x: str, in_shape, out_hw, ymap, xmap) -> None:
    """Add the gathers and the array layer of int16 BILINEAR ``op`` (see the module docstring)
    to the builder ``b`` (compiler/kinds/decompose/layer.py ``_Builder``)."""
    n, ih, iw, c = in_shape
    oh, ow = out_hw
    iy0, iy1, dy, sy_n, sy_d = ymap
    ix0, ix1, dx, sx_n, sx_d = xmap
    py_n, px_n = _phases(oh, sy_n, sy_d), _phases(ow, sx_n, sx_d)
    top = int(sy_n) * int(sx_n)
    if top > 1 << 16:
        raise unsupported(op, f"BILINEAR int16 weights up to {top} (scale_y_n * scale_x_n): byte planes "
                              f"hold products up to 65536")
    wzp = 0 if top <= 127 else -128
    wy = np.stack([sy_n - dy[:py_n], dy[:py_n]]).astype(np.int64)      # [a, py]
    wx = np.stack([sx_n - dx[:px_n], dx[:px_n]]).astype(np.int64)      # [b, px]
    # weights[a, b*Py + py, px] = wy[a, py] * wx[b, px] on the diagonal
    prod = wy[:, None, :, None] * wx[None, :, None, :]                  # [a, b, py, px]
    diag = prod.reshape(2, 2 * py_n, px_n)
    ch = np.arange(c)
    depth = [(0, 0), (1, 1)]

    def plane(values):
        """Weights [a, b*Py + py, px, C, C] with ``values`` on the diagonal, wzp elsewhere."""
        w = np.full(values.shape + (c, c), wzp, np.int64)
        w[..., ch, ch] = values[..., None] + wzp
        return w

    hi_weights = None
    if top <= 255:
        weights = plane(diag)
    else:
        hi = diag >> 8
        extra = np.maximum(hi - 255, 0)[:1]         # w = 65536: hi = 255 + 1 (plane a = 0 again)
        weights, hi_weights = plane(diag & 255), plane(np.minimum(hi, 255))
        if extra.any():
            depth.append((2, 0))
            weights = np.concatenate([weights, plane(np.zeros_like(extra))])
            hi_weights = np.concatenate([hi_weights, plane(extra)])
    rows = gather(x, (n, ih, iw, c), 1, np.concatenate([iy0, iy1]))
    both = gather(rows, (n, 2 * oh, iw, c), 2, np.concatenate([ix0, ix1]))
    stacked = b.reshape(both, (n, 2, 2 * oh, ow, c), "int16")
    per_y = [AxisPhase(p, py_n, -(-(oh - p) // py_n), 2 * py_n, [(k * py_n + p, 2 * p + k) for k in range(2)])
             for p in range(py_n)]
    per_x = [AxisPhase(p, px_n, -(-(ow - p) // px_n), px_n, [(p, p)]) for p in range(px_n)]
    b.walk.new_root(op.outputs[0], (n, oh, ow, c), "computed", layout="rows", dtype="int48")
    b.layer(MxuConvLayer(f"{b.base}.l{b.count}", stacked, op.outputs[0], (n, 2, 2 * oh, ow, c), (n, 1, oh, ow, c),
                         weights, np.zeros(c, np.int64), True, False, 0, wzp, per_y, per_x, [depth],
                         hi_weights=hi_weights))
    b.count += 1
