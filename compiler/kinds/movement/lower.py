"""Lowering of data movement between rows tensors (compiler/kinds/movement/layer.py ``MoveLayer``):
element-mode DMA through ASRAM.

Each part's loops (outermost first) are merged where both sides run on contiguously.  The
innermost loop becomes the DMA *line* when it is contiguous in the destination (else every
element is a line of its own); a DMA_LOAD in element mode gathers lines (any source stride,
negative or zero) into ASRAM, each line from a fresh word, and a DMA_STORE in element mode
writes the same lines' elements (byte-masked: padding lanes of the destination rows are
left alone).  Lines that are whole bus words on both sides, at word addresses and strides
(whole rows, whole bricks), go in word mode instead: a word per cycle, not an element.
Lines longer than a slot or the ``len0`` field are cut.  Up to two further loops are the
DMAs' line and plane loops (strides there are unsigned: a loop with a negative source
stride is unrolled); the rest are unrolled, and chunks alternate between two ASRAM slots
so loads overlap stores.
"""
from __future__ import annotations

import itertools

from isa.config import NpuConfig
from isa.instructions import BY_NAME, Sram

from compiler.core.ops import Op, new_op
from compiler.kinds.elementwise.lower import EltPlan, VEC_ROWS
from compiler.program.memplan import ExtPlan
from compiler.kinds.movement.layer import MoveLayer
from compiler.core.ops import MAX_LEN


LEN0_MAX = min(next(f for f in BY_NAME[name].fields if f.name == "len0").max
               for name in ("DMA_LOAD", "DMA_STORE"))


def fill_name(layer: MoveLayer) -> str:
    return f"{layer.name}.fill"


def move_constants(layer: MoveLayer) -> dict[str, bytes]:
    return {fill_name(layer): layer.fill} if layer.fill is not None else {}


def _merge(loops):
    loops = [lp for lp in loops if lp[0] > 1]
    out = []
    for lp in loops:
        if out and out[-1][1] == lp[0] * lp[1] and out[-1][2] == lp[0] * lp[2]:
            out[-1] = (out[-1][0] * lp[0], lp[1], lp[2])
        else:
            out.append(lp)
    return out


def _whole_words(bus: int, *values: int) -> bool:
    """True if every byte count or address in ``values`` is a whole number of bus words."""
    return all(v % bus == 0 for v in values)


def lower_moves(layer: MoveLayer, flow, ext: ExtPlan, config: NpuConfig, index: int):
    bus = config.bus_bytes
    e = layer.itemsize
    budget = min(config.asram_rows, VEC_ROWS, MAX_LEN) // 2
    dst_root = ext.roots[flow.root_of(layer.output).name]
    ops: list[Op] = []
    step = 0
    for part in layer.parts:
        if part.source is None:
            src_root = ext.constants[fill_name(layer)]
        else:
            src_root = ext.roots[flow.root_of(layer.inputs[part.source]).name]
        loops = _merge(part.loops)
        if loops and loops[-1][2] == e:
            g, s0, _ = loops.pop()
        else:
            g, s0 = 1, e
        # A line longer than a slot is cut into pieces.
        piece = max(1, min(g, budget * bus // e, LEN0_MAX))
        segments = [(min(piece, g - j), j * s0, j * e) for j in range(0, g, piece)]
        words = lambda n: -(-n * e // bus)     # noqa: E731 - words per line of n elements
        dma_loops = []
        for lp in reversed(loops):
            if len(dma_loops) == 2 or lp[1] < 0 or lp[2] < 0:
                break
            dma_loops.insert(0, lp)
        python = loops[:len(loops) - len(dma_loops)]
        for idx in itertools.product(*(range(lp[0]) for lp in python)):
            src0 = src_root + part.src_offset + sum(i * lp[1] for i, lp in zip(idx, python))
            dst0 = dst_root + part.dst_offset + sum(i * lp[2] for i, lp in zip(idx, python))
            for n, so, do in segments:
                k = words(n)
                l1 = dma_loops[-1] if dma_loops else (1, 0, 0)
                l2 = dma_loops[-2] if len(dma_loops) == 2 else (1, 0, 0)
                per1 = max(1, min(l1[0], budget // k))
                per2 = max(1, min(l2[0], budget // (k * l1[0]))) if per1 == l1[0] else 1
                for a2 in range(0, l2[0], per2):
                    for a1 in range(0, l1[0], per1):
                        c1, c2 = min(per1, l1[0] - a1), min(per2, l2[0] - a2)
                        sram = (step % 2) * budget
                        step += 1
                        s_at = src0 + so + a1 * l1[1] + a2 * l2[1]
                        d_at = dst0 + do + a1 * l1[2] + a2 * l2[2]
                        st1 = (l1[1] if c1 > 1 else 0, l1[2] if c1 > 1 else 0)
                        st2 = (l2[1] if c2 > 1 else 0, l2[2] if c2 > 1 else 0)
                        if part.source is not None and s0 == e and _whole_words(bus, n * e, s_at, d_at, *st1, *st2):
                            # Lines of whole words on both sides: word mode, a word per cycle.
                            mode, n0 = dict(elem=0, stride0=0), n * e // bus
                            load_mode = store_mode = mode
                        else:
                            n0 = n
                            load_mode = dict(elem=e, stride0=s0 if part.source is not None else 0)
                            store_mode = dict(elem=e, stride0=e)
                        ops.append(new_op(config, index, "DMA_LOAD", sram=Sram.ASRAM, sram_addr=sram,
                                          ext_addr=s_at, **load_mode, len0=n0, len1=c1, stride1=st1[0],
                                          len2=c2, stride2=st2[0]))
                        ops.append(new_op(config, index, "DMA_STORE", sram=Sram.ASRAM, sram_addr=sram,
                                          ext_addr=d_at, **store_mode, len0=n0, len1=c1, stride1=st1[1],
                                          len2=c2, stride2=st2[1]))
    return EltPlan(layer, ops, budget)
