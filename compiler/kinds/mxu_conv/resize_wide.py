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

**Strips.**  The gathered tensor holds 16 bytes per output element (four int16 neighbours)
and every y phase needs its own weight tiles, so a large upscale would need more external
memory than the output itself, or more weight tiles than WSRAM holds.  The output rows are
cut into strips, each its own gathers and array layer writing its rows of the one output
buffer: a strip's gathered tensor is at most ``STRIP_BYTES`` (a share of the external memory;
the memory planner reuses it for the next strip) and its phases' weights fit WSRAM twice (the
lowering's two weight slots).  A RESIZE that fits in one strip is lowered exactly as before.
"""
from __future__ import annotations

from math import gcd

import numpy as np

from isa import matmul
from compiler.core.errors import unsupported
from compiler.core.views import ceil_div
from compiler.kinds.mxu_conv.layer import AxisPhase, MxuConvLayer

# A strip's gathered tensors take at most 1 / STRIP_SHARE of the external memory (int16 here,
# int8 in compiler/kinds/decompose/layer.py: one share for both).
STRIP_SHARE = 16


def _phases(o_size: int, s_n: int, s_d: int) -> int:
    return min(s_n // gcd(s_n, s_d), o_size)


def _strip_rows(config, n: int, iw: int, ow: int, c: int, oh: int, py_n: int, px_n: int, planes: int,
                depth: int) -> int:
    """Output rows per strip: the gathered bytes within ``ext_mem_bytes / STRIP_SHARE`` and
    the weight tiles of the strip's phases twice within WSRAM; 0 when one row is too many."""
    lanes = config.bus_bytes
    c_bytes = ceil_div(c, lanes) * lanes * 2                 # one int16 pixel in the rows layout
    per_row = n * 2 * (iw + 2 * ow) * c_bytes               # the y gather and the x gather, per output row
    rows = max(1, config.ext_mem_bytes // STRIP_SHARE // per_row)
    tile = ceil_div(c, config.array_rows) * matmul.tile_rows(config.array_rows, 0)
    per_phase = planes * depth * 2 * px_n * tile             # WSRAM rows of one y phase's tiles (one block)
    fit = config.wsram_rows // (2 * per_phase)
    if fit < 1:
        return 0
    return min(oh, rows) if fit >= py_n else min(oh, rows, fit)


def bilinear_int16(b, op, gather, x: str, in_shape, out_hw, ymap, xmap) -> None:
    """Add the gathers and the array layers of int16 BILINEAR ``op`` (see the module docstring)
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
    prod = wy[:, None, :, None] * wx[None, :, None, :]                  # [a, b, py, px]
    ch = np.arange(c)
    planes = 1 if top <= 255 else 2
    depth_taps = 3 if planes == 2 and (prod >> 8).max() > 255 else 2
    strip = _strip_rows(b.walk.config, n, iw, ow, c, oh, py_n, px_n, planes, depth_taps)
    if strip == 0:
        raise unsupported(op, f"BILINEAR int16 with {px_n} x phases: one output row's weight tiles do not "
                              f"fit twice in WSRAM ({b.walk.config.wsram_rows} rows)")

    def plane(values):
        """Weights [a, b*m + i, px, C, C] with ``values`` on the diagonal, wzp elsewhere."""
        w = np.full(values.shape + (c, c), wzp, np.int64)
        w[..., ch, ch] = values[..., None] + wzp
        return w

    b.walk.new_root(op.outputs[0], (n, oh, ow, c), "computed", layout="rows", dtype="int48")
    for r0 in range(0, oh, strip):
        r1 = min(oh, r0 + strip)
        sh = r1 - r0
        m = min(py_n, sh)                       # the strip's y phases: its first m rows
        ps = (r0 + np.arange(m)) % py_n
        # weights[a, b*m + i, px] = wy[a, ps[i]] * wx[b, px] on the diagonal
        diag = prod[:, :, ps, :].reshape(2, 2 * m, px_n)
        depth = [(0, 0), (1, 1)]
        hi_weights = None
        if planes == 1:
            weights = plane(diag)
        else:
            hi = diag >> 8
            extra = np.maximum(hi - 255, 0)[:1]         # w = 65536: hi = 255 + 1 (plane a = 0 again)
            weights, hi_weights = plane(diag & 255), plane(np.minimum(hi, 255))
            if extra.any():
                depth.append((2, 0))
                weights = np.concatenate([weights, plane(np.zeros_like(extra))])
                hi_weights = np.concatenate([hi_weights, plane(extra)])
        rows = gather(x, (n, ih, iw, c), 1, np.concatenate([iy0[r0:r1], iy1[r0:r1]]))
        both = gather(rows, (n, 2 * sh, iw, c), 2, np.concatenate([ix0, ix1]))
        stacked = b.reshape(both, (n, 2, 2 * sh, ow, c), "int16")
        per_y = [AxisPhase(r0 + i, py_n, -(-(sh - i) // py_n), 2 * py_n, [(k * m + i, 2 * i + k) for k in range(2)])
                 for i in range(m)]
        per_x = [AxisPhase(p, px_n, -(-(ow - p) // px_n), px_n, [(p, p)]) for p in range(px_n)]
        b.layer(MxuConvLayer(f"{b.base}.l{b.count}", stacked, op.outputs[0], (n, 2, 2 * sh, ow, c),
                             (n, 1, sh, ow, c), weights, np.zeros(c, np.int64), True, False, 0, wzp, per_y, per_x,
                             [depth], hi_weights=hi_weights))
        b.count += 1
