"""Lowering of reductions (compiler/kinds/reduce/layer.py ``ReduceLayer``) to VPOOL.

Tensors are vector arrays as in the elementwise lowering (``tensor_array``).  The output's
axes (the reduced one has size 1) form a merged loop nest; tiles are cut like elementwise
tiles.  Per tile:

* **outer axis** (not the innermost): the window of ``K`` input vectors of every output
  vector lies ``K`` strides apart; one DMA_LOAD brings the tile for every ``k`` into ASRAM
  as ``[k][n1][n0]`` vectors (one per ``k`` when the tile's vectors are not contiguous);
* **innermost axis**: an element-mode DMA_LOAD puts every element of a row in lane 0 of a
  vector of its own (a line of one element padded with ``L - 1`` zero elements is exactly
  one vector), ``[row][k]``;

then MIN (and ALL) take the bitwise NOT of the tile, one VPOOL (MAX, or SUM into int32)
reduces the window of every output vector, MIN takes the NOT back, and a DMA_STORE writes
the tile.  Lanes of the innermost-axis result other than lane 0 are padding.
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
                    # [n1][n0] output rows, each row's K elements one vector each.
                    for i in range(n1):
                        ops.append(op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=a_base + i * n0 * K * r_in,
                                      ext_addr=src_at + i * st1[1], elem=elem, stride0=elem, len0=1,
                                      pad_a0=lanes - 1, len1=K, stride1=elem, len2=n0,
                                      stride2=st0[1] if n0 > 1 else 0))
                    win = dict(a_stride0=K * r_in, a_stride1=n0 * K * r_in, w_stride0=r_in)
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
