"""Lowering of TOSA MATMUL (compiler/kinds/matmul/layer.py ``MatmulLayer``) to the MAC array.

Per batch ``n`` and tile of ``ht`` rows of A (``h0 ..``):

1. one DMA_LOAD of the tile's rows of A into ASRAM (``[h][c block][P]`` rows; P = 2 for int16);
2. per ``w`` block of ``L`` output columns: per ``c`` block one weight tile (a DMA_LOAD of
   ``R`` rows of B into WSRAM, rows past ``C`` padded with ``B_zp``; int16: two tiles, the low
   and high bytes of B, int8 tensors of their own) and one MATMUL per tile streaming the ``ht``
   input vectors, accumulating over the ``c`` blocks in ACC;
3. int32: VALU COPY of the accumulators into ASRAM and a DMA_STORE of the ``ht x L`` int32
   results; int48: ``256 * H + Lo`` on the row pairs (compiler/kinds/matmul/layer.py) by int32
   VALUs in ACC, then the low and high words stored by element-mode DMA (stride 8) as int64.

Buffers come in two slots (ASRAM tiles, ACC regions, output staging) and four weight
slots, so the scheduler (program/schedule.py) can overlap loads with the array's work.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.config import NpuConfig
from isa.instructions import Sram, ValuOp, VecDst, VecMem, VecType
from tosa_ir.errors import Unsupported

from compiler.core.ops import Op, new_op
from compiler.core.plan import Plan
from compiler.kinds.elementwise.lower import VEC_ROWS, tensor_array
from compiler.kinds.matmul.layer import MatmulLayer
from compiler.program.memplan import ExtPlan
from compiler.core.ops import MAX_LEN
from compiler.core.views import ceil_div

# PSRAM rows of the int48 combination's shift amounts (lane 0 broadcast).
SHIFTS = (8, 24, 16, 31)
W_SLOTS = 4


@dataclass
class MatmulPlan(Plan):
    layer: MatmulLayer
    tile: int

    def describe(self) -> str:
        return f"matmul on the array: tiles of {self.tile} rows of A ({len(self.ops)} instructions)"


def shifts_name(layer: MatmulLayer) -> str:
    return f"{layer.name}.shifts"


def matmul_constants(layer: MatmulLayer, config: NpuConfig) -> dict[str, bytes]:
    """The PSRAM rows of the int48 combination (int32 lanes, one shift amount per row)."""
    if not layer.wide:
        return {}
    rows = np.repeat(np.array(SHIFTS, np.int64)[:, None], config.array_cols, 1)
    return {shifts_name(layer): rows.astype("<i4").tobytes()}


def lower_matmul(layer: MatmulLayer, flow, ext: ExtPlan, config: NpuConfig, index: int) -> MatmulPlan:
    R, L = config.array_rows, config.bus_bytes
    if not R == config.array_cols == L:
        raise Unsupported(f"{layer.where()}: MATMUL lowering needs array_rows == array_cols == bus_bytes")
    n_, h_, c_, w_ = layer.shape
    P = 2 if layer.wide else 1
    a = tensor_array(flow, ext, layer.a, L)
    b = tensor_array(flow, ext, layer.b, L)
    lo = tensor_array(flow, ext, layer.b_lo, L) if layer.b_lo else None
    hi = tensor_array(flow, ext, layer.b_hi, L) if layer.b_hi else None
    out = tensor_array(flow, ext, layer.output, L)
    cblocks, wblocks = ceil_div(c_, R), ceil_div(w_, L)
    o_rows = 4 * (2 if layer.wide else 1)           # ASRAM rows of one output row's staging
    acc_per = 9 if layer.wide else 1                # ACC rows per row of A per slot
    asram = min(config.asram_rows, VEC_ROWS)
    ht = min(h_, MAX_LEN, asram // (2 * (cblocks * P + o_rows)), config.acc_rows // (2 * acc_per))
    if ht < 1:
        raise Unsupported(f"{layer.where()}: one row of A ({c_} channels) and its results do not fit ASRAM/ACC")
    a_slot, o_base = ht * cblocks * P, 2 * ht * cblocks * P
    ops: list[Op] = []

    def op(name, **fields) -> Op:
        o = new_op(config, index, name, **fields)
        ops.append(o)
        return o

    if layer.wide:
        op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=0, ext_addr=ext.constants[shifts_name(layer)],
           len0=len(SHIFTS) * config.words_per_wide_row, len1=1, len2=1)
    srcs = [(b, layer.b_zp, layer.b_zp)] if not layer.wide else [(lo, 0x80, -128), (hi, 0, 0)]
    cpad = cblocks * R
    # B resident: all tiles of a batch in WSRAM ([tensor][w block][c]), one DMA per tensor
    # (two batch slots); else one tile at a time through a ring of W_SLOTS.
    per_batch = len(srcs) * wblocks * cpad
    resident = 2 * per_batch <= config.wsram_rows
    step = wstep = 0
    for n in range(n_):
        if resident:
            for ti, (t, pad, _) in enumerate(srcs):
                op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=(n % 2) * per_batch + ti * wblocks * cpad,
                   ext_addr=t.addr + n * t.strides[0], len0=1, len1=c_, stride1=t.strides[1], len2=wblocks,
                   stride2=t.vbytes, pad_a1=cpad - c_, pad_value=pad & 0xFF)
        for h0 in range(0, h_, ht):
            rows = min(ht, h_ - h0)
            aslot = (step % 2) * a_slot
            op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=aslot, ext_addr=a.addr + n * a.strides[0] + h0 * a.strides[1],
               len0=cblocks * P, len1=rows, stride1=a.strides[1], len2=1)
            for wb in range(wblocks):
                slot = step % 2
                step += 1
                acc = slot * ht * acc_per
                for cb in range(cblocks):
                    rc = min(R, c_ - cb * R)
                    for ti, (t, pad, wzp) in enumerate(srcs):
                        acc_addr = acc + 2 * ht * ti       # int16: Lo, then H
                        if resident:
                            wslot = (n % 2) * per_batch + (ti * wblocks + wb) * cpad + cb * R
                        else:
                            wslot = (wstep % W_SLOTS) * R
                            wstep += 1
                            op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=wslot,
                               ext_addr=t.addr + n * t.strides[0] + cb * R * t.strides[1] + wb * t.vbytes, len0=1,
                               len1=rc, stride1=t.strides[1], len2=1, pad_a1=R - rc, pad_value=pad & 0xFF)
                        op("MATMUL", a_addr=aslot + cb * P, a_stride0=cblocks * P, n0=rows, a_stride1=0, n1=1,
                           w_addr=wslot, acc_addr=acc_addr, accumulate=int(cb > 0), a_zp=layer.a_zp, w_zp=wzp,
                           a_type=int(layer.wide), w_type=0)
                obase = o_base + slot * ht * o_rows
                dst = out.addr + n * out.strides[0] + h0 * out.strides[1] + wb * out.vbytes
                if not layer.wide:
                    op("VALU", op=ValuOp.COPY, dtype=VecType.INT32, n0=rows, n1=1, a_mem=VecMem.ACC, a_addr=acc,
                       a_stride0=1, d_mem=VecDst.ASRAM, d_addr=obase, d_stride0=4)
                    op("DMA_STORE", sram=Sram.ASRAM, sram_addr=obase, ext_addr=dst, len0=4, len1=rows,
                       stride1=out.strides[1], len2=1)
                    continue
                _combine(op, acc, ht, rows, obase)
                for k in range(2):      # low words, then the sign-extended high words
                    op("DMA_STORE", sram=Sram.ASRAM, sram_addr=obase + 4 * ht * k, ext_addr=dst + 4 * k, elem=4,
                       stride0=8, len0=L, len1=rows, stride1=out.strides[1], len2=1)
    return MatmulPlan(layer, ops, ht)


def _combine(op, acc: int, ht: int, rows: int, obase: int, k0: int = 0) -> None:
    """``256 * H + Lo`` (mod 2**48) of the int48 row pairs Lo at ``acc`` and H at ``acc + 2*ht``,
    as int32 words in ASRAM: low words at ``obase``, sign-extended high words at ``obase + 4*ht``.
    ACC rows ``acc .. acc + 9*ht`` are used; ``k0``: the PSRAM row of ``SHIFTS``' first row.
    (Also the wide convolutions' byte planes: compiler/kinds/mxu_conv/lower.py.)"""
    low, high = combine_in_acc(op, acc, acc + 2 * ht, acc + 4 * ht, ht, rows, k0)
    for src, dst in ((low, obase), (high, obase + 4 * ht)):
        op("VALU", op=ValuOp.COPY, dtype=VecType.INT32, n0=rows, n1=1, a_mem=VecMem.ACC, a_addr=src, a_stride0=1,
           d_mem=VecDst.ASRAM, d_addr=dst, d_stride0=4)


def combine_in_acc(op, lo: int, hi: int, tmp: int, ht: int, rows: int, k0: int = 0) -> tuple[int, int]:
    """``256 * H + Lo`` (mod 2**48) of the int48 row pairs Lo at ``lo`` and H at ``hi`` (ACC),
    into ACC: returns the addresses of its low words and of its sign-extended high words
    (``rows`` each, stride 1), within the five temporaries of ``ht`` rows at ``tmp``."""
    lo_l, lo_h, hi_l, hi_h = lo, lo + 1, hi, hi + 1
    t1, t2, t3, t4, s = (tmp + k * ht for k in range(5))
    k8, k24, k16, k31 = range(k0, k0 + 4)          # PSRAM rows (SHIFTS)

    def valu(o, d, a_addr, a_stride, b=None, imm0=0):
        fields = dict(op=o, dtype=VecType.INT32, n0=rows, n1=1, a_mem=VecMem.ACC, a_addr=a_addr, a_stride0=a_stride,
                      d_mem=VecDst.ACC, d_addr=d, d_stride0=1, imm0=imm0)
        if b is not None:
            mem, addr, stride = b
            fields.update(b_mem=mem, b_addr=addr, b_stride0=stride, b_bcast=int(mem == VecMem.PSRAM))
        op("VALU", **fields)

    def k(row):
        return VecMem.PSRAM, row, 0

    def accv(row, stride=1):
        return VecMem.ACC, row, stride

    valu(ValuOp.LOGICAL_LEFT_SHIFT, t1, hi_l, 2, k(k8))           # low word of 256*H
    valu(ValuOp.LOGICAL_RIGHT_SHIFT, t2, hi_l, 2, k(k24))
    valu(ValuOp.LOGICAL_LEFT_SHIFT, t3, hi_h, 2, k(k8))
    valu(ValuOp.BITWISE_OR, t3, t3, 1, accv(t2))                   # high bits of 256*H
    valu(ValuOp.ADD, s, t1, 1, accv(lo_l, 2))                      # low word of the sum
    # carry out of the low words: the top bit of (x & y) | ((x | y) & ~sum)
    valu(ValuOp.BITWISE_AND, t2, t1, 1, accv(lo_l, 2))
    valu(ValuOp.BITWISE_OR, t4, t1, 1, accv(lo_l, 2))
    valu(ValuOp.BITWISE_NOT, t1, s, 1)
    valu(ValuOp.BITWISE_AND, t4, t4, 1, accv(t1))
    valu(ValuOp.BITWISE_OR, t2, t2, 1, accv(t4))
    valu(ValuOp.LOGICAL_RIGHT_SHIFT, t2, t2, 1, k(k31))
    valu(ValuOp.ADD, t3, t3, 1, accv(lo_h, 2))
    valu(ValuOp.ADD, t3, t3, 1, accv(t2))
    valu(ValuOp.LOGICAL_LEFT_SHIFT, t3, t3, 1, k(k16))             # sign-extend bit 47 (bit 15 here)
    valu(ValuOp.ARITHMETIC_RIGHT_SHIFT, t3, t3, 1, k(k16))
    return s, t3
