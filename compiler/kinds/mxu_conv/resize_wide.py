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
layer's ``upper_planes``, whose MATMULs accumulate apart and are combined as ``256 * H + Lo``
exactly in int48 (the lowering reuses MATMUL's int16 byte split).  ``hi = 256`` (only
``w = 65536``: ``wy0 = wx0 = 256``, i.e. ``dy = dx = 0``) does not fit a byte: it is
``255 + 1``, the 1 on a third depth tap reading plane ``a = 0`` again.  Past 65,536 (scale
numerators up to the spec's 2048, products up to 2**22) three planes ``w = 65536 * t +
256 * hi + lo`` (``t`` 0..64), combined as ``256 * (256 * T + H) + Lo``.

**Strips.**  The gathered tensor holds 16 bytes per output element (four int16 neighbours)
and every y phase needs its own weight tiles, so a large upscale would need more external
memory than the output itself, or more weight tiles than WSRAM holds.  The output is cut
into strips of rows (and, when one row's x phases are too many, of columns), each its own
gathers and array layer writing its part of the one output buffer: a strip's gathered tensor
is at most ``1 / STRIP_SHARE`` of the external memory (the memory planner reuses it for the
next strip) and its phases' weights fit WSRAM twice (the lowering's two weight slots).  A
RESIZE that fits in one strip is lowered exactly as before.
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


def _strip_shape(config, n: int, iw: int, c: int, out_hw, phases, planes: int, depth: int) -> tuple[int, int]:
    """(output rows, output columns) per strip: the gathered bytes within ``ext_mem_bytes /
    STRIP_SHARE`` and the weight tiles of a strip's phases (one per y phase, x phase,
    neighbour, depth tap and plane) twice within WSRAM; (0, 0) when one phase pair is too
    many.  Columns are cut only when one row's x phases do not fit."""
    (oh, ow), (py_n, px_n) = out_hw, phases
    tile = ceil_div(c, config.array_rows) * matmul.tile_rows(config.array_rows, 0)
    pairs = config.wsram_rows // (2 * planes * depth * 2 * tile)      # phase pairs a strip may hold
    if pairs < 1:
        return 0, 0
    cols = ow if pairs >= px_n else pairs
    fit_rows = pairs // min(px_n, cols)                                 # y phases beside them
    c_bytes = ceil_div(c, config.bus_bytes) * config.bus_bytes * 2     # one int16 pixel, rows layout
    per_row = n * 2 * (iw + 2 * cols) * c_bytes         # the y gather and the x gather, per output row
    rows = min(oh, max(1, config.ext_mem_bytes // STRIP_SHARE // per_row))
    return (rows if fit_rows >= py_n else min(rows, fit_rows)), cols


def bilinear_int16(b, op, gather, x: str, in_shape, out_hw, ymap, xmap) -> None:
    """Add the gathers and the array layers of int16 BILINEAR ``op`` (see the module docstring)
    to the builder ``b`` (compiler/kinds/decompose/layer.py ``_Builder``)."""
    n, ih, iw, c = in_shape
    oh, ow = out_hw
    iy0, iy1, dy, sy_n, sy_d = ymap
    ix0, ix1, dx, sx_n, sx_d = xmap
    py_n, px_n = _phases(oh, sy_n, sy_d), _phases(ow, sx_n, sx_d)
    top = int(sy_n) * int(sx_n)
    if top > 1 << 24:
        raise unsupported(op, f"BILINEAR int16 weights up to {top} (scale_y_n * scale_x_n): byte planes "
                              f"hold products below 2**24")
    wzp = 0 if top <= 127 else -128
    wy = np.stack([sy_n - dy[:py_n], dy[:py_n]]).astype(np.int64)      # [a, py]
    wx = np.stack([sx_n - dx[:px_n], dx[:px_n]]).astype(np.int64)      # [b, px]
    prod = wy[:, None, :, None] * wx[None, :, None, :]                  # [a, b, py, px]
    ch = np.arange(c)
    planes = 1 if top <= 255 else 2 if top <= 1 << 16 else 3
    depth_taps = 3 if planes == 2 and (prod >> 8).max() > 255 else 2
    strip_h, strip_w = _strip_shape(b.walk.config, n, iw, c, (oh, ow), (py_n, px_n), planes, depth_taps)
    if strip_h == 0:
        raise unsupported(op, f"BILINEAR int16 of {c} channels: one output phase's weight tiles do not fit "
                              f"twice in WSRAM ({b.walk.config.wsram_rows} rows)")

    def plane(values):
        """Weights [a, b*my + i, j, C, C] with ``values`` on the diagonal, wzp elsewhere."""
        w = np.full(values.shape + (c, c), wzp, np.int64)
        w[..., ch, ch] = values[..., None] + wzp
        return w

    b.walk.new_root(op.outputs[0], (n, oh, ow, c), "computed", layout="rows", dtype="int48")
    for r0 in range(0, oh, strip_h):
        r1 = min(oh, r0 + strip_h)
        sh = r1 - r0
        my = min(py_n, sh)                      # the strip's y phases: its first my rows
        rows = gather(x, (n, ih, iw, c), 1, np.concatenate([iy0[r0:r1], iy1[r0:r1]]))
        for c0 in range(0, ow, strip_w):
            c1 = min(ow, c0 + strip_w)
            sw = c1 - c0
            mx = min(px_n, sw)                  # its x phases: its first mx columns
            ps, qs = (r0 + np.arange(my)) % py_n, (c0 + np.arange(mx)) % px_n
            # weights[a, b*my + i, j] = wy[a, ps[i]] * wx[b, qs[j]] on the diagonal
            diag = prod[:, :, ps][:, :, :, qs].reshape(2, 2 * my, mx)
            depth = [(0, 0), (1, 1)]
            upper = []
            if planes == 1:
                weights = plane(diag)
            elif planes == 3:
                weights, upper = plane(diag & 255), [plane((diag >> 8) & 255), plane(diag >> 16)]
            else:
                hi = diag >> 8
                extra = np.maximum(hi - 255, 0)[:1]         # w = 65536: hi = 255 + 1 (plane a = 0 again)
                weights, upper = plane(diag & 255), [plane(np.minimum(hi, 255))]
                if extra.any():
                    depth.append((2, 0))
                    weights = np.concatenate([weights, plane(np.zeros_like(extra))])
                    upper = [np.concatenate([upper[0], plane(extra)])]
            both = gather(rows, (n, 2 * sh, iw, c), 2, np.concatenate([ix0[c0:c1], ix1[c0:c1]]))
            stacked = b.reshape(both, (n, 2, 2 * sh, sw, c), "int16")
            per_y = [AxisPhase(r0 + i, py_n, -(-(sh - i) // py_n), 2 * py_n, [(k * my + i, 2 * i + k) for k in range(2)])
                     for i in range(my)]
            per_x = [AxisPhase(c0 + j, px_n, -(-(sw - j) // px_n), px_n, [(j, j)]) for j in range(mx)]
            b.layer(MxuConvLayer(f"{b.base}.l{b.count}", stacked, op.outputs[0], (n, 2, 2 * sh, sw, c),
                                 (n, 1, sh, sw, c), weights, np.zeros(c, np.int64), True, False, 0, wzp, per_y,
                                 per_x, [depth], upper_planes=upper))
            b.count += 1
