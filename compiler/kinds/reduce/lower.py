"""Lowering of reductions (compiler/kinds/reduce/layer.py ``ReduceLayer``) to VPOOL.

Tensors are vector arrays as in the elementwise lowering (``tensor_array``).  The output's
axes (the reduced one has size 1) form a merged loop nest; tiles are cut like elementwise
tiles.  Per tile:

* **outer axis** (not the innermost): the window of ``K`` input vectors of every output
  vector lies ``K`` strides apart; one DMA_LOAD brings the tile for every ``k`` into ASRAM
  as ``[k][n1][n0]`` vectors (one per ``k`` when the tile's vectors are not contiguous);
* **innermost axis**: rows are taken ``L`` at a time, one per lane: an element-mode
  DMA_LOAD transposes a group of ``G <= L`` rows so that vector ``k`` holds element ``k`` of
  every row of the group (a line of ``G`` elements, one per row, padded to ``L``),
  ``[group][k]``.  Element-mode DMA moves one element per cycle, padding included, so a
  full group costs one cycle per element read; putting each element in a vector of its own
  instead (a line of one element padded with ``L - 1``) costs ``L`` cycles per element
  (AlexNet's softmax reductions: 17,014 cycles for 1,000 elements that way);

then MIN (and ALL) take the bitwise NOT of the tile, one VPOOL (MAX, or SUM into int32)
reduces the window of every output vector, MIN takes the NOT back, and a DMA_STORE writes
the tile (innermost axis: an element-mode store puts lane ``j`` of a group's result into
lane 0 of row ``j``'s output vector).  Lanes of the innermost-axis result other than lane 0
are padding, and the element store leaves them as they were.
"""
from __future__ import annotations

import itertools

import numpy as np

from isa.config import NpuConfig
from isa.instructions import PoolMode, Sram, ValuOp, VecDst, VecMem, VecType
from isa.vector import DTYPE_BITS
from tosa_ir.errors import Unsupported

from compiler.core.ops import Op, new_op
from compiler.kinds.elementwise.lower import VEC_ROWS, EltPlan, loop_nest, move_buffer, tensor_array
from compiler.program.memplan import ExtPlan
from compiler.kinds.reduce.layer import ReduceLayer
from compiler.core.ops import MAX_LEN


def lower_reduce(layer: ReduceLayer, flow, ext: ExtPlan, config: NpuConfig, index: int) -> EltPlan:
    lanes = config.array_cols
    src = tensor_array(flow, ext, layer.input, lanes)
    out = tensor_array(flow, ext, layer.output, lanes)
    rank = len(layer.in_shape)
    # Right-align the brick views' NHWC shapes with the graph's rank.
    axis = layer.axis + len(src.shape) - rank
    K = src.shape[axis]
    t_in = layer.dtype
    t_out = VecType.INT32 if layer.mode == "sum" else t_in
    r_in, r_out = DTYPE_BITS[t_in] // 8, DTYPE_BITS[t_out] // 8
    inner = axis == len(src.shape) - 1 and K > 1
    if inner and not (src.shape[-1] <= lanes or src.strides[-1] == src.vbytes):
        raise Unsupported(f"{layer.where()}: the innermost axis of a brick tensor of {src.shape[-1]} channels "
                          f"spans channel blocks; reducing it is not implemented")
    axes, _ = loop_nest(out, [src], lanes, keep_vector=False)
    per = K * r_in + r_out
    asram = min(config.asram_rows, VEC_ROWS)
    cap = asram // per
    if cap < 1:
        raise Unsupported(f"{layer.where()}: one window of {K} vectors does not fit ASRAM")
    total = int(np.prod([ax.count for ax in axes]))
    slots = 2 if cap >= 2 and total > 1 else 1
    tile = min(cap // slots, MAX_LEN)
    ops: list[Op] = []

    def op(name, **fields) -> Op:
        return new_op(config, index, name, **fields)

    last = axes[-1]
    if last.count >= tile or len(axes) == 1:
        outer, mid, piece0, piece1 = axes[:-1], None, min(tile, last.count), 1
    else:
        outer, mid, piece0, piece1 = axes[:-2], axes[-2], last.count, min(axes[-2].count, tile // last.count)
    step = 0
    elem = DTYPE_BITS[t_in] // 8
    for idx in itertools.product(*(range(ax.count) for ax in outer)):
        base = [sum(i * ax.strides[o] for i, ax in zip(idx, outer)) for o in range(2)]
        ranges1 = [(0, 1)] if mid is None else [(s, min(piece1, mid.count - s)) for s in range(0, mid.count, piece1)]
        for s1, n1 in ranges1:
            for s0 in range(0, last.count, piece0):
                n0 = min(piece0, last.count - s0)
                slot = step % slots
                step += 1
                a_base = slot * tile * per
                d_base = a_base + tile * K * r_in
                st0 = [last.strides[0], last.strides[1]]
                st1 = [mid.strides[o] if mid is not None else 0 for o in range(2)]
                src_at = src.addr + base[1] + s0 * st0[1] + s1 * st1[1]
                out_at = out.addr + base[0] + s0 * st0[0] + s1 * st1[0]
                count = n0 * n1
                if inner:
                    ops += _inner_tile(op, lanes, K, elem, t_in, t_out, n0, n1, a_base, d_base, src_at, out_at,
                                       st0, st1, layer.mode)
                    continue
                else:
                    sa = src.strides[axis]
                    b = dict(addr=a_base, ext=src_at, st0=st0[1], st1=st1[1], c0=n0, c1=n1, w=src.vbytes // lanes,
                             vb=src.vbytes)
                    if n0 > 1 and st0[1] == src.vbytes and n1 == 1:
                        ops.append(op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=a_base, ext_addr=src_at,
                                      len0=n0 * b["w"], len1=K, stride1=sa, len2=1))
                    elif n1 == 1 and st0[1] >= 0 and sa >= 0:
                        # Strided vectors: the window as the DMA's plane loop, [k][n0] in one load
                        # (not K loads: long windows of split reductions would flood IMEM).
                        ops.append(op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=a_base, ext_addr=src_at,
                                      len0=b["w"], len1=n0, stride1=st0[1] if n0 > 1 else 0, len2=K,
                                      stride2=sa))
                    else:
                        for k in range(K):
                            ops.append(move_buffer(config, index, "DMA_LOAD",
                                                   dict(b, addr=a_base + k * count * r_in, ext=src_at + k * sa)))
                    win = dict(a_stride0=r_in, a_stride1=n0 * r_in, w_stride0=count * r_in)
                if layer.mode == "min":
                    ops.append(op("VALU", op=ValuOp.BITWISE_NOT, dtype=t_in, n0=count * K, n1=1,
                                  a_mem=VecMem.ASRAM, a_addr=a_base, a_stride0=r_in, d_mem=VecDst.ASRAM,
                                  d_addr=a_base, d_stride0=r_in))
                ops.append(op("VPOOL", mode=PoolMode.SUM if layer.mode == "sum" else PoolMode.MAX, dtype=t_in,
                              n0=n0, n1=n1, k0=K, k1=1, w_stride1=0, a_mem=VecMem.ASRAM, a_addr=a_base,
                              d_mem=VecDst.ASRAM, d_addr=d_base, d_stride0=r_out, d_stride1=n0 * r_out,
                              in_zp=0, **win))
                if layer.mode == "min":
                    ops.append(op("VALU", op=ValuOp.BITWISE_NOT, dtype=t_out, n0=n0, n1=n1, a_mem=VecMem.ASRAM,
                                  a_addr=d_base, a_stride0=r_out, a_stride1=n0 * r_out, d_mem=VecDst.ASRAM,
                                  d_addr=d_base, d_stride0=r_out, d_stride1=n0 * r_out))
                ops.append(move_buffer(config, index, "DMA_STORE",
                                       dict(addr=d_base, ext=out_at, st0=st0[0], st1=st1[0], c0=n0, c1=n1,
                                            w=out.vbytes // lanes, vb=out.vbytes)))
    return EltPlan(layer, ops, tile)


def _groups(n0: int, lanes: int) -> list[tuple[int, int, int]]:
    """(first row, rows per group, groups) runs covering ``n0`` rows in groups of ``lanes``:
    the full groups, then the partial one."""
    full, rest = divmod(n0, lanes)
    return [g for g in ((0, lanes, full), (full * lanes, rest, 1)) if g[1] and g[2]]


def _inner_tile(op, lanes: int, K: int, elem: int, t_in: VecType, t_out: VecType, n0: int, n1: int,
                a_base: int, d_base: int, src_at: int, out_at: int, st0, st1, mode: str) -> list[Op]:
    """One tile of an innermost-axis reduction: ``[n1][n0]`` rows of ``K`` elements, their
    rows transposed into lanes ``L`` at a time (module docstring); ASRAM holds ``[group][k]``
    input vectors from ``a_base`` and one result vector per group from ``d_base``."""
    r_in, r_out = DTYPE_BITS[t_in] // 8, DTYPE_BITS[t_out] // 8
    per_row = -(-n0 // lanes)                  # groups per n1 row
    vecs = n1 * per_row
    ops: list[Op] = []
    for i in range(n1):
        for first, g, count in _groups(n0, lanes):
            at = a_base + (i * per_row + first // lanes) * K * r_in
            ops.append(op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=at, ext_addr=src_at + i * st1[1] + first * st0[1],
                          elem=elem, len0=g, stride0=st0[1] if g > 1 else 0, pad_a0=lanes - g, len1=K,
                          stride1=elem, len2=count, stride2=lanes * st0[1] if count > 1 else 0))
    if mode == "min":
        ops.append(op("VALU", op=ValuOp.BITWISE_NOT, dtype=t_in, n0=vecs * K, n1=1, a_mem=VecMem.ASRAM,
                      a_addr=a_base, a_stride0=r_in, d_mem=VecDst.ASRAM, d_addr=a_base, d_stride0=r_in))
    ops.append(op("VPOOL", mode=PoolMode.SUM if mode == "sum" else PoolMode.MAX, dtype=t_in, n0=vecs, n1=1,
                  k0=K, k1=1, w_stride1=0, a_mem=VecMem.ASRAM, a_addr=a_base, a_stride0=K * r_in, a_stride1=0,
                  w_stride0=r_in, d_mem=VecDst.ASRAM, d_addr=d_base, d_stride0=r_out, d_stride1=0, in_zp=0))
    if mode == "min":
        ops.append(op("VALU", op=ValuOp.BITWISE_NOT, dtype=t_out, n0=vecs, n1=1, a_mem=VecMem.ASRAM,
                      a_addr=d_base, a_stride0=r_out, d_mem=VecDst.ASRAM, d_addr=d_base, d_stride0=r_out))
    # Lane j of a group's result -> lane 0 of its row's output vector (r_out bytes each).
    for i in range(n1):
        for first, g, count in _groups(n0, lanes):
            at = d_base + (i * per_row + first // lanes) * r_out
            ops.append(op("DMA_STORE", sram=Sram.ASRAM, sram_addr=at, ext_addr=out_at + i * st1[0] + first * st0[0],
                          elem=r_out, len0=g, stride0=st0[0] if g > 1 else 0, len1=count,
                          stride1=lanes * st0[0] if count > 1 else 0, len2=1, stride2=0))
    return ops
