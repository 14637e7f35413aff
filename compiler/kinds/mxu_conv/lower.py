"""Lowering of :class:`compiler.kinds.mxu_conv.layer.MxuConvLayer` (int32/int48-output convolutions)
to the MAC array.

Once per layer: DMA_LOAD every weight tile into WSRAM (per tap, input-channel block ``cb``
and output-channel block ``ob``: ``R`` rows of ``COLS`` weights, rows and columns past the
channels set to the weight zero point so they add nothing) and the bias rows into PSRAM
(int48: a low-word and a high-word row per ``ob``).

Per batch, output plane, phase pair (``ys`` x ``xs``) and output tile of ``tr x tc`` pixels:

1. the input region the tile's taps read, per depth tap and ``cb``, into ASRAM as
   ``[plane][cb][row][col][P]`` (P = 2 rows per int16 vector): one DMA_LOAD of the rows
   inside the tensor with the columns outside padded (pad lines), and fill DMAs for rows
   outside, all with the input zero point (so padding adds ``0 * w``);
2. per ``ob``: VALU COPY of the bias into the tile's accumulators (int48: low and high rows,
   ``d_stride0 = 2``), then one MATMUL per (tap, cb) accumulating: its 2-D loop walks the
   tile (``n0 = tc`` columns with input stride ``s_x * P``, ``n1 = tr`` rows);
3. VALU COPY of the accumulators into ASRAM as int32 (int48: the low and the high words
   apart) and DMA_STORE into the output pixels ``o0 + step * j`` (int48: element mode, the
   two words of each int64 interleaved by ``stride0 = 8``).

With ``upper_planes`` (int16 BILINEAR RESIZE's weight byte planes) every tile has a
second (and third) byte's tile whose MATMULs accumulate ``H`` (and ``T``) next to ``Lo``
(9 or 11 ACC rows per pixel), and step 3 is MATMUL's ``256 * H + Lo``
(compiler/kinds/matmul/lower.py ``_combine``), with three planes after ``H = 256 * T + H``
in ACC.

Weight tiles holding only the weight zero point (a depthwise convolution's off-diagonal
blocks) get no MATMUL.  Layers whose straight line exceeds the instruction memory are
emitted with their own LOOPs and waits (compiler/kinds/mxu_conv/lower_loops.py).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from isa import matmul
from isa.config import NpuConfig
from isa.instructions import Sram, ValuOp, VecDst, VecMem, VecType
from isa.vector import DTYPE_BITS
from tosa_ir.errors import Unsupported

from compiler.core.ops import Op, new_op
from compiler.core.plan import Plan
from compiler.kinds.elementwise.lower import VEC_ROWS, tensor_array
from compiler.kinds.matmul.lower import SHIFTS, _combine, combine_in_acc
from compiler.program.memplan import ExtPlan
from compiler.kinds.mxu_conv.layer import MxuConvLayer
from compiler.core.ops import MAX_LEN
from compiler.core.views import ceil_div
from compiler.kinds.mxu_conv.lower_loops import looped

PAD_MAX = 255          # DMA pad_b1 / pad_a1


@dataclass
class MxuConvPlan(Plan):
    layer: MxuConvLayer

    def describe(self) -> str:
        return f"convolution on the array, wide output ({len(self.ops)} instructions)"


def _names(layer: MxuConvLayer) -> tuple[str, str]:
    return f"{layer.name}.weights", f"{layer.name}.bias"


def _blocks(layer: MxuConvLayer, config: NpuConfig) -> tuple[int, int]:
    return ceil_div(layer.in_shape[-1], config.array_rows), ceil_div(layer.out_shape[-1], config.array_cols)


def _planes(layer: MxuConvLayer) -> list[np.ndarray]:
    """The weight planes: ``weights``, then the upper byte planes."""
    return [layer.weights] + list(layer.upper_planes)


def _full(layer: MxuConvLayer, config: NpuConfig, weights: np.ndarray) -> np.ndarray:
    """``weights`` as ``[tap, cblocks * R, oblocks * COLS]``, padded with the weight zero point."""
    R, C = config.array_rows, config.array_cols
    cblocks, oblocks = _blocks(layer, config)
    kd, kh, kw, ic, oc = weights.shape
    full = np.full((kd * kh * kw, cblocks * R, oblocks * C), layer.weight_zp, np.int64)
    full[:, :ic, :oc] = weights.reshape(kd * kh * kw, ic, oc)
    return full


def live_tiles(layer: MxuConvLayer, config: NpuConfig, weights: np.ndarray | None = None) -> np.ndarray:
    """``[tap, cb, ob]``: whether the weight tile (of ``weights``, default the layer's) holds an
    entry other than the weight zero point (the others add nothing: their MATMULs are left out,
    e.g. a depthwise convolution's off-diagonal blocks)."""
    R, C = config.array_rows, config.array_cols
    cblocks, oblocks = _blocks(layer, config)
    full = _full(layer, config, layer.weights if weights is None else weights)
    return (full != layer.weight_zp).reshape(full.shape[0], cblocks, R, oblocks, C).any(axis=(2, 4))


def mxu_conv_constants(layer: MxuConvLayer, config: NpuConfig) -> dict[str, bytes]:
    """Weight tiles ``[ob][plane][tap][cb]`` (R x COLS int8 each) and bias rows (int32 lanes;
    with byte planes then the byte combination's shift rows)."""
    R, C = config.array_rows, config.array_cols
    cblocks, oblocks = _blocks(layer, config)
    kd, kh, kw, ic, oc = layer.weights.shape
    tiles = np.stack([_full(layer, config, w).reshape(kd * kh * kw, cblocks, R, oblocks, C).transpose(3, 0, 1, 2, 4)
                      for w in _planes(layer)], 1)        # [ob][plane][tap][cb][R][C]
    bias = np.zeros(oblocks * C, np.int64)
    bias[:oc] = layer.bias
    bias = bias.reshape(oblocks, C)
    if layer.wide:      # int48: low words, then the high words sign-extended
        rows = np.stack([(bias & 0xFFFFFFFF).astype(np.uint32).view(np.int32), (bias >> 32).astype(np.int32)], 1)
        rows = rows.reshape(2 * oblocks, C)
    else:
        rows = bias.astype(np.int32)
    if layer.rescale_params is not None:    # then a (multiplier, shift) row pair per ob
        params = np.zeros((2, oblocks * C), np.int64)
        params[:, :oc] = layer.rescale_params
        params = params.reshape(2, oblocks, C).transpose(1, 0, 2).reshape(2 * oblocks, C)
        rows = np.concatenate([rows.astype(np.int64), params])
    if layer.upper_planes:
        rows = np.concatenate([rows.astype(np.int64), np.repeat(np.array(SHIFTS, np.int64)[:, None], C, 1)])
    w_name, b_name = _names(layer)
    if layer.int4:      # row-major R x COLS nibbles per tile, two per byte, low nibble first
        nib = (tiles.reshape(-1, 2) & 0xF).astype(np.uint8)
        data = (nib[:, 0] | (nib[:, 1] << 4)).tobytes()
    else:
        data = tiles.astype(np.int8).tobytes()
    return {w_name: data, b_name: rows.astype("<i4").tobytes()}


def lower_mxu_conv(layer: MxuConvLayer, flow, ext: ExtPlan, config: NpuConfig, index: int,
                   loops: bool = True) -> MxuConvPlan:
    """The layer's instructions: straight line for the scheduler and the loop search, or, when
    that is longer than the instruction memory (and ``loops``), emitted with their own LOOPs
    and waits (compiler/kinds/mxu_conv/lower_loops.py)."""
    ops = _emit(layer, flow, ext, config, index, 2, None)
    if not loops or len(ops) <= config.imem_rows:
        return MxuConvPlan(layer, ops)

    return MxuConvPlan(layer, looped(layer, config, ops, lambda regions, stages, marks: _emit(
        layer, flow, ext, config, index, regions, marks, stages)))


def _emit(layer: MxuConvLayer, flow, ext: ExtPlan, config: NpuConfig, index: int, regions: int,
          marks: list | None, stages: int = 2) -> list[Op]:
    """Straight-line instructions; ``regions`` ACC regions and ``stages`` output staging
    areas in ASRAM taken by output blocks in turn.  ``marks`` (when given) receives, per output tile, the
    ``[start, MATMUL start, MATMUL end, end)`` op indices of each output block's work."""
    R, C, L = config.array_rows, config.array_cols, config.bus_bytes
    if not R == C == L:
        raise Unsupported(f"{layer.where()}: needs array_rows == array_cols == bus_bytes")
    cblocks, oblocks = _blocks(layer, config)
    kd, kh, kw = layer.weights.shape[:3]
    ntaps = kd * kh * kw
    n_planes = 1 + len(layer.upper_planes)
    hi = n_planes > 1
    if n_planes > 3 or hi and (not layer.wide or layer.rescale or np.any(layer.bias) or layer.int4):
        raise Unsupported(f"{layer.where()}: weight byte planes need int48 output, int8 weights, no bias or RESCALE")
    lives = [live_tiles(layer, config, w) for w in _planes(layer)]
    P = 2 if layer.wide else 1
    # ACC rows per output pixel: one int48 pair per plane and _combine's five temporaries
    acc_per = 2 * n_planes + 5 if hi else P
    t_rows = matmul.tile_rows(R, int(layer.int4))
    plane_rows = ntaps * cblocks * t_rows           # WSRAM rows of one output block's tiles of one plane
    group = len(lives) * plane_rows                 # WSRAM rows of one output block's tiles
    w_rows = oblocks * group
    # All weights resident when they fit; else each output block's tiles are loaded for every
    # output tile, alternating between two WSRAM slots.
    resident = w_rows <= config.wsram_rows
    if not resident and 2 * group > config.wsram_rows:
        raise Unsupported(f"{layer.where()}: the weights of one output-channel block ({group} WSRAM rows) do "
                          f"not fit twice in WSRAM ({config.wsram_rows} rows)")
    k0 = P * oblocks + (2 * oblocks if layer.rescale else 0)       # PSRAM row of SHIFTS (hi)
    p_rows = k0 + (len(SHIFTS) if hi else 0)
    if p_rows > config.psram_rows:
        raise Unsupported(f"{layer.where()}: {p_rows} bias rows do not fit PSRAM")
    src = tensor_array(flow, ext, layer.input, L)
    out = tensor_array(flow, ext, layer.output, L)
    # Strides [n, d, y, x, channel block] (rank-4 tensors: no depth).
    # (FULLY_CONNECTED's [N, C]: N is the x axis.)
    si, so = ([0] * (5 - len(a.strides)) + list(a.strides) if len(a.strides) != 4 else
              [a.strides[0], 0, *a.strides[1:]] for a in (src, out))
    n_, _, ih, iw, _ = layer.in_shape
    _, od_, _, _, _ = layer.out_shape
    if layer.rescale:       # ASRAM rows of one staged output vector
        o_vec = DTYPE_BITS[layer.rescale["out_type"]] // 8
        o_words = o_vec
    else:
        o_words = 4 * (2 if layer.wide else 1)
    asram = min(config.asram_rows, VEC_ROWS)
    pad_byte = layer.input_zp & 0xFF
    w_name, b_name = _names(layer)
    ops: list[Op] = []

    def op(name, **fields) -> Op:
        o = new_op(config, index, name, **fields)
        ops.append(o)
        return o

    if resident:
        op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=0, ext_addr=ext.constants[w_name], len0=w_rows, len1=1, len2=1)
    op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=0, ext_addr=ext.constants[b_name],
       len0=p_rows * config.words_per_wide_row, len1=1, len2=1)
    max_planes = max(len(d) for d in layer.depth)
    # ASRAM input layout: channel blocks contiguous per pixel (rows tensors) load as one line
    # per pixel, [plane][row][col][cb][P]; else (bricks) [plane][cb][row][col][P].
    inter = cblocks == 1 or si[4] == P * L
    pw = cblocks * P if inter else P                 # ASRAM rows between pixels of a row

    def span(ph, j0, cnt):
        offs = [off for _, off in ph.taps] or [0]
        lo = j0 * ph.s + min(offs)
        return lo, (cnt - 1) * ph.s + max(offs) - min(offs) + 1

    def fits(ph_y, ph_x, tr, tc):
        hh, ww = span(ph_y, 0, tr)[1], span(ph_x, 0, tc)[1]
        a = max_planes * cblocks * hh * ww * P
        return (ww <= 2 * PAD_MAX and 2 * a + stages * tr * tc * o_words <= asram
                and regions * tr * tc * acc_per <= config.acc_rows)

    for ph_y, ph_x in itertools.product(layer.ys, layer.xs):
        tc = min(ph_x.count, MAX_LEN)
        while tc > 1 and not fits(ph_y, ph_x, 1, tc):
            tc = (tc + 1) // 2
        if not fits(ph_y, ph_x, 1, tc):
            raise Unsupported(f"{layer.where()}: one output pixel's input window does not fit ASRAM/ACC")
        tr = 1
        while tr < min(ph_y.count, MAX_LEN) and fits(ph_y, ph_x, tr + 1, tc):
            tr += 1
        a_size = max_planes * cblocks * span(ph_y, 0, tr)[1] * span(ph_x, 0, tc)[1] * P
        for n, od in itertools.product(range(n_), range(od_)):
            planes = layer.depth[od]
            tile = 0
            for j0, i0 in itertools.product(range(0, ph_y.count, tr), range(0, ph_x.count, tc)):
                rr, cc = min(tr, ph_y.count - j0), min(tc, ph_x.count - i0)
                y_lo, hh = span(ph_y, j0, rr)
                x_lo, ww = span(ph_x, i0, cc)
                # Slots alternate per tile and per output block, restarting every plane, so the
                # instructions of consecutive planes differ by address steps only (LOOPs).
                a_base = (tile % 2) * a_size
                tile += 1
                plane = cblocks * hh * ww * P

                def cb_base(pi, cb):
                    return a_base + pi * plane + (cb * P if inter else cb * hh * ww * P)

                # 1. the input region, padded with the input zero point
                for (pi, (_, d)), cb in itertools.product(enumerate(planes), range(1 if inter else cblocks)):
                    _load_region(op, cb_base(pi, cb), src.addr + n * si[0] + d * si[1] + cb * si[4], si[2], si[3],
                                 ih, iw, y_lo, hh, x_lo, ww, pw, pad_byte)
                tile_marks = []
                for ob in range(oblocks):
                    # ACC regions (two, or one per block), one output block each: the next
                    # block's MATMULs run while the VPU empties the previous one
                    start = len(ops)
                    acc = (ob % regions) * tr * tc * acc_per
                    w_base = ob * group if resident else (ob % 2) * group
                    if not resident:
                        op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=w_base, ext_addr=ext.constants[w_name] + ob * group * L,
                           len0=group, len1=1, len2=1)
                    # 2. bias, then the taps
                    # (int48: the low then the high word rows, PSRAM rows P*ob + k)
                    op("VALU", op=ValuOp.COPY, dtype=VecType.INT32, n0=rr * cc, n1=P, a_mem=VecMem.PSRAM,
                       a_addr=P * ob, a_stride0=0, a_stride1=1, d_mem=VecDst.ACC, d_addr=acc, d_stride0=P,
                       d_stride1=1)
                    for k in range(1, n_planes):      # H (and T) start at 0 too (the bias is 0)
                        op("VALU", op=ValuOp.COPY, dtype=VecType.INT32, n0=rr * cc, n1=P, a_mem=VecMem.PSRAM,
                           a_addr=P * ob, a_stride0=0, a_stride1=1, d_mem=VecDst.ACC, d_addr=acc + 2 * k * tr * tc,
                           d_stride0=P, d_stride1=1)
                    mm_start = len(ops)
                    for (pi, (kz, _)), (ky, yoff), (kx, xoff), cb in itertools.product(
                            enumerate(planes), ph_y.taps, ph_x.taps, range(cblocks)):
                        tap = (kz * kh + ky) * kw + kx
                        base = cb_base(pi, cb)
                        row0 = j0 * ph_y.s + yoff - y_lo
                        col0 = i0 * ph_x.s + xoff - x_lo
                        for k, live in enumerate(lives):    # the planes: Lo at acc, H at acc + 2*tr*tc
                            if not live[tap, cb, ob]:
                                continue
                            op("MATMUL", a_addr=base + (row0 * ww + col0) * pw, a_stride0=ph_x.s * pw, n0=cc,
                               a_stride1=ph_y.s * ww * pw, n1=rr,
                               w_addr=w_base + k * plane_rows + (tap * cblocks + cb) * t_rows,
                               acc_addr=acc + 2 * k * tr * tc, accumulate=1, a_zp=layer.input_zp,
                               w_zp=layer.weight_zp, a_type=int(layer.wide), w_type=int(layer.int4))
                    mm_end = len(ops)
                    # 3. out through ASRAM
                    o_base = 2 * a_size + (ob % stages) * tr * tc * o_words
                    dst = (out.addr + n * so[0] + od * so[1] + (ph_y.o0 + j0 * ph_y.step) * so[2]
                           + (ph_x.o0 + i0 * ph_x.step) * so[3] + ob * so[4])
                    lines = dict(len1=cc, stride1=ph_x.step * so[3], len2=rr, stride2=ph_y.step * so[2])
                    if layer.rescale:       # the fused RESCALE, straight from the accumulators
                        op("VRESCALE", **layer.rescale, n0=rr * cc, n1=1, a_mem=VecMem.ACC, a_addr=acc,
                           a_stride0=P, d_mem=VecDst.ASRAM, d_addr=o_base, d_stride0=o_vec,
                           param_addr=P * oblocks + 2 * ob)
                        op("DMA_STORE", sram=Sram.ASRAM, sram_addr=o_base, ext_addr=dst, len0=o_vec, **lines)
                        tile_marks.append((start, mm_start, mm_end, len(ops)))
                        continue
                    if n_planes == 3:       # H = 256 * T + H, back into H's int48 pairs
                        t = tr * tc
                        words = combine_in_acc(op, acc + 2 * t, acc + 4 * t, acc + 6 * t, t, rr * cc, k0)
                        for w, word_rows in enumerate(words):
                            op("VALU", op=ValuOp.COPY, dtype=VecType.INT32, n0=rr * cc, n1=1, a_mem=VecMem.ACC,
                               a_addr=word_rows, a_stride0=1, d_mem=VecDst.ACC, d_addr=acc + 2 * t + w, d_stride0=2)
                    if hi:      # 256 * H + Lo: low words at o_base, high words at o_base + 4*tr*tc
                        _combine(op, acc, tr * tc, rr * cc, o_base, k0)
                    else:
                        op("VALU", op=ValuOp.COPY, dtype=VecType.INT32, n0=rr * cc, n1=P, a_mem=VecMem.ACC,
                           a_addr=acc, a_stride0=P, a_stride1=1, d_mem=VecDst.ASRAM, d_addr=o_base, d_stride0=4,
                           d_stride1=4 * tr * tc)
                    if not layer.wide:
                        op("DMA_STORE", sram=Sram.ASRAM, sram_addr=o_base, ext_addr=dst, len0=4, **lines)
                    else:
                        for k in range(2):
                            op("DMA_STORE", sram=Sram.ASRAM, sram_addr=o_base + 4 * k * tr * tc, ext_addr=dst + 4 * k,
                               elem=4, stride0=8, len0=L, **lines)
                    tile_marks.append((start, mm_start, mm_end, len(ops)))
                if marks is not None:
                    marks.append(tile_marks)
    return ops


def _load_region(op, base: int, ext0: int, s_row: int, s_col: int, ih: int, iw: int, y_lo: int, hh: int,
                 x_lo: int, ww: int, P: int, pad: int) -> None:
    """Input rows ``y_lo ..`` (hh) and columns ``x_lo ..`` (ww) of one plane (``P`` words per
    pixel) into ASRAM at ``base`` (``[row][col][P]``), everything outside the tensor ``pad``."""
    y0, y1 = max(y_lo, 0), min(y_lo + hh, ih)
    x0, x1 = max(x_lo, 0), min(x_lo + ww, iw)

    def fill(row: int, count: int) -> None:
        if count > 0:       # pad lines only (len1 = 0): `count` rows of `ww` vectors
            b1 = min(ww, PAD_MAX)
            op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=base + row * ww * P, ext_addr=0, len0=P, len1=0, len2=count,
               pad_b1=b1, pad_a1=ww - b1, pad_value=pad)

    if y1 <= y0 or x1 <= x0:
        fill(0, hh)
        return
    fill(0, y0 - y_lo)
    before, after = x0 - x_lo, x_lo + ww - x1
    if before > PAD_MAX or after > PAD_MAX:
        raise Unsupported(f"input window padding of {max(before, after)} columns exceeds the DMA's {PAD_MAX}")
    op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=base + (y0 - y_lo) * ww * P, ext_addr=ext0 + y0 * s_row + x0 * s_col,
       len0=P, len1=x1 - x0, stride1=s_col, len2=y1 - y0, stride2=s_row, pad_b1=before, pad_a1=after,
       pad_value=pad)
    fill(y1 - y_lo, y_lo + hh - y1)
