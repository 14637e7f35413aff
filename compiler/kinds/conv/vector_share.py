"""A depthwise layer's channel blocks shared between the MAC array and the vector unit.

Why.  On the weight-stationary array a depthwise layer (multiplier 1) gets 16 useful MACs of
the 256 a cycle: an input lane feeds only its own channel's column, so a 3x3 layer costs 9
MATMUL rows per output vector and channel block (compiler/kinds/conv/plan.py), and the
vector unit meanwhile runs one ACT row per output vector.  VDWCONV (isa/instructions.py)
computes the same output vector on the vector unit in ``k*k + 1`` cycles, so the two units
can work on different channel blocks at once: the array takes the first blocks (the conv
lowering as it is, compiler/kinds/conv/lower.py), the vector unit the last ones, and of
the block between them the array takes the first output rows (whole tiles of its plan)
and the vector unit the rest.

The balance.  The vector unit, the ACTs and the DMA's loads into ASRAM take turns on
ASRAM's one write port (isa/ports.py), so while the array spends ``A`` cycles on an
output vector of one of its blocks (``k*k`` MATMUL rows, more where its MATMULs are
shorter than the array's depth: its plan's estimate), that port has ``BALANCE * A``
cycles for the ACT of that vector (1), its input rows (``I``: the input window's rows per
output vector, halo included) and the vector unit's share.  A vector-unit output vector
takes ``k*k + 1`` cycles of VDWCONV and its own ``I`` rows of input, so the output vectors
split as ``V / a = (BALANCE*A - 1 - I) / (k*k + 1 + I)``: about 0.6 for MobileNetV2's 3x3
layers at stride 1, whose depthwise time falls from 9 to about 5.7 cycles per output
vector; at stride 2 (``I`` about 4) about 0.25.

The interleaving.  The machine issues in program order and the array takes its next
MATMUL only near the end of the current one, so work behind a MATMUL waits for it: the
vector unit's instructions are spread over the array's stream, after each MATMUL as much
of the share's next work as fits in that MATMUL's duration beside what the array's own
instructions in that gap take of each unit (the ACT and ASRAM loads of the port, the DMA's
loads and stores).  The share's work is cut into pieces that fit: VDWCONVs of a few rows of
output vectors, input loads and output stores of a few image rows.  The scheduler
(compiler/program/schedule.py) then sets the waits from the footprints, which are disjoint:
the share has its own ASRAM region (weights, two input bands, two output bands) at the top
of ASRAM and its parameter rows at the top of PSRAM, and the array part is planned in what
is left (:func:`reduced_config`).

The share works in bands of output rows of one channel block: the band's input rows (the
input zero point as padding, compiler/core/dma.py ``load_window``), VDWCONVs writing the
band's int8 outputs, a store of the band into the block's plane of the output bricks; the
next band's input loads while the current one computes.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from isa.config import NpuConfig
from isa.instructions import BY_NAME, Sram, Unit, VecMem
from isa.ports import written
from isa.vector import EXTRA_LATENCY, WRITE_LATENCY
from isa.vector import PARAM_ROWS as VECTOR_PARAM_ROWS
from tosa_ir.errors import Unsupported

from compiler.core.dma import Window, fill_name, load_window
from compiler.core.ir import ConvLayer
from compiler.core.ops import MAX_LEN, Op, new_op
from compiler.core.views import ceil_div
from compiler.kinds.conv.plan import PARAM_ROWS
from compiler.kinds.conv.tiling import plan_candidates

__all__ = ["Share", "array_part", "fit_rows", "interleave", "plan_share", "reduced_config", "share_constants",
           "share_ops", "vector_blocks"]

# Both tuned on MobileNetV2's 17 depthwise layers with the cycle model (0.7 to 1.15 moved the
# network by about 1%; a per-layer search would find about 0.6% more).
FILL = 0.85             # share of a MATMUL's duration the other units' work may take
BALANCE = 0.85          # the same share as the block split assumes it (vector_blocks)
REGION = 3              # the share's ASRAM region is at most 1/REGION of ASRAM
_KMAX = next(f for f in BY_NAME["VDWCONV"].fields if f.name == "k0").max


@dataclass(frozen=True)
class Share:
    """The vector unit's share of a depthwise layer: blocks ``first ..`` (``count`` of
    them), the first from output row ``array_rows`` on (the array computes its rows above
    that, in whole tiles), worked in bands of ``band`` output rows; its ASRAM region from
    ``asram_base`` (weights, then input slots of ``in_rows x in_cols``, then output slots of
    ``band x ow``) and its parameter rows from PSRAM row ``psram_base``.  ``fraction``: the
    part of block ``first`` the balance asked for (``array_rows`` rounds it to the array's
    tiles)."""

    first: int
    count: int
    band: int
    in_rows: int
    in_cols: int
    asram_base: int
    psram_base: int
    fraction: float = 0.0
    array_rows: int = 0

    def describe(self) -> str:
        part = f" (block {self.first} from row {self.array_rows})" if self.array_rows else ""
        return f"vector unit: {self.count} blocks from {self.first}{part}, bands of {self.band} rows"


def _geometry(layer: ConvLayer, band: int) -> tuple[int, int]:
    """(input rows, input columns) of a band of ``band`` output rows, padding included."""
    (sy, sx), (dy, dx) = layer.stride, layer.dilation
    kh, kw = layer.kernel
    ow = layer.out_shape[2]
    return (band - 1) * sy + (kh - 1) * dy + 1, (ow - 1) * sx + (kw - 1) * dx + 1


def _region_rows(layer: ConvLayer, count: int, band: int) -> int:
    kh, kw = layer.kernel
    rows, cols = _geometry(layer, band)
    return count * kh * kw + 2 * rows * cols + 2 * band * layer.out_shape[2]


def _eligible(layer: ConvLayer) -> bool:
    kh, kw = layer.kernel
    return (layer.depth_multiplier == 1 and layer.weight_zp == 0 and max(kh, kw) <= _KMAX
            and layer.in_shape[3] == layer.out_shape[3])


def vector_blocks(layer: ConvLayer, config: NpuConfig, array_cycles: int) -> float:
    """How many of the layer's output-channel blocks to give the vector unit (module
    docstring: the balance), 0 where the layer cannot share or gains nothing; ``array_cycles``:
    the estimate of the layer's best array plan alone.  A fraction is a part of one more
    block: its last output rows (:func:`fit_rows`)."""
    cbo = ceil_div(layer.out_shape[3], config.array_cols)
    if not _eligible(layer):
        return 0
    band = _band(layer, config, 1)
    if band == 0:
        return 0
    kh, kw = layer.kernel
    taps = kh * kw
    rows, cols = _geometry(layer, band)
    n, oh, ow, _ = layer.out_shape
    per_vector = rows * cols / (band * ow)          # I: input rows per output vector
    # The array's cycles per output vector, from its plan's estimate (at least its k*k
    # MATMUL rows: more where every MATMUL streams fewer vectors than the array's depth)
    array = array_cycles / (n * oh * ow * cbo)
    ratio = (BALANCE * array - 1 - per_vector) / (taps + 1 + per_vector)
    if ratio <= 0:
        return 0
    share = min(cbo * ratio / (1 + ratio), cbo - 0.5)
    while share > 0 and not _fits(layer, config, share):
        share = math.ceil(share) - 1
    return round(share, 3)


def _fits(layer: ConvLayer, config: NpuConfig, blocks: float) -> bool:
    """Whether a share of ``blocks`` fits: its ASRAM region (a band of at least one row)
    and PSRAM rows, and the array's part in what they leave."""
    count = math.ceil(blocks)
    if _band(layer, config, count) == 0 or count * PARAM_ROWS > config.psram_rows - 2 * PARAM_ROWS:
        return False
    share = plan_share(dataclasses.replace(layer, vector_blocks=blocks), config)
    try:
        plan_candidates(array_part(layer, share, config), reduced_config(config, share))
    except Unsupported:
        return False
    return True


def _band(layer: ConvLayer, config: NpuConfig, count: int) -> int:
    """The most output rows per band whose region fits 1/REGION of ASRAM (0: none)."""
    oh = layer.out_shape[1]
    band = 0
    for b in range(1, min(oh, MAX_LEN) + 1):
        if _region_rows(layer, count, b) * REGION > config.asram_rows:
            break
        band = b
    return band


def plan_share(layer: ConvLayer, config: NpuConfig) -> Share:
    """The share of ``layer`` (``layer.vector_blocks`` > 0) for ``config``."""
    count = math.ceil(layer.vector_blocks)
    cbo = ceil_div(layer.out_shape[3], config.array_cols)
    band = _band(layer, config, count)
    rows, cols = _geometry(layer, band)
    base = config.asram_rows - _region_rows(layer, count, band)
    return Share(cbo - count, count, band, rows, cols, base, config.psram_rows - count * PARAM_ROWS,
                 fraction=layer.vector_blocks - math.floor(layer.vector_blocks))


def fit_rows(share: Share, layer: ConvLayer, tile_rows: int) -> Share | None:
    """``share`` with the array's rows of block ``first`` in whole tiles of ``tile_rows``
    rows: the nearest to the fraction of the block the vector unit was to take (where that
    is the whole block, the share starts at the next one; None: nothing left to share)."""
    if not share.fraction:
        return share
    oh = layer.out_shape[1]
    tiles = ceil_div(oh, tile_rows)
    keep = round((1 - share.fraction) * tiles)
    if keep < tiles:
        return dataclasses.replace(share, array_rows=keep * tile_rows)
    if share.count == 1:
        return None
    return dataclasses.replace(share, first=share.first + 1, count=share.count - 1, fraction=0.0)


def reduced_config(config: NpuConfig, share: Share) -> NpuConfig:
    """``config`` without the share's ASRAM region and PSRAM rows: where the array part is
    planned."""
    return dataclasses.replace(config, asram_rows=share.asram_base, psram_rows=share.psram_base)


def array_part(layer: ConvLayer, share: Share, config: NpuConfig) -> ConvLayer:
    """``layer`` restricted to the array's blocks: ``0 .. share.first - 1``, and block
    ``first`` when the vector unit takes only a part of it (the lowering leaves out the
    tiles below ``array_rows``); same name: it reads the whole layer's constants, whose
    first blocks are these."""
    c = min(layer.out_shape[3], (share.first + (1 if share.fraction else 0)) * config.array_cols)
    n, ih, iw, _ = layer.in_shape
    return dataclasses.replace(layer, in_shape=(n, ih, iw, c), out_shape=layer.out_shape[:3] + (c,),
                               weights=layer.weights[:c], bias=layer.bias[:c], multiplier=layer.multiplier[:c],
                               shift=layer.shift[:c], vector_blocks=0)


def weights_name(layer: ConvLayer) -> str:
    return f"{layer.name}.vector_weights"


def share_constants(layer: ConvLayer, config: NpuConfig) -> dict[str, bytes]:
    """The share's weight rows: per block (every block of the layer, so that a share moved
    by :func:`fit_rows` finds its own), per tap ``ky*kw + kx``, one ASRAM row of the
    block's channels (zero beyond the layer's)."""
    lanes = config.array_cols
    kh, kw = layer.kernel
    oc = layer.out_shape[3]
    rows = np.zeros((ceil_div(oc, lanes) * lanes, kh * kw), dtype=np.int8)
    rows[:oc] = layer.weights[:, :, :, 0].reshape(oc, kh * kw)
    # [block][lane][tap] -> [block][tap][lane]
    return {weights_name(layer): np.ascontiguousarray(rows.reshape(-1, lanes, kh * kw).transpose(0, 2, 1)).tobytes()}


@dataclass
class Item:
    """Instructions of the share that go together, with the cycles each resource is busy:
    ASRAM's write port, the DMA, the vector unit."""

    ops: list[Op]
    port: int = 0
    dma: int = 0
    vpu: int = 0


def _costs(op: Op) -> tuple[int, int, int]:
    """(ASRAM write port, DMA, vector unit) cycles of one instruction."""
    port = op.busy if "ASRAM" in written(op.instr.name, op.instr.values) else 0
    dma = op.busy if op.unit is Unit.DMA else 0
    vpu = op.busy if op.unit is Unit.VPU else 0
    return port, dma, vpu


def _item(ops: list[Op]) -> Item:
    item = Item(ops)
    for op in ops:
        p, d, v = _costs(op)
        item.port, item.dma, item.vpu = item.port + p, item.dma + d, item.vpu + v
    return item


def share_ops(layer: ConvLayer, share: Share, ext, config: NpuConfig, index: int, matmul_cycles: int) -> list[Item]:
    """The share's instructions in order, as items sized for MATMULs of about
    ``matmul_cycles`` cycles: weights and parameters, then per block and band its input
    rows (the next band's loaded while this one computes), its VDWCONVs, its store."""
    bus, wpr = config.bus_bytes, config.words_per_wide_row
    n_img, ih, iw, _ = layer.in_shape
    _, oh, ow, _ = layer.out_shape
    kh, kw = layer.kernel
    (sy, sx), (dy, dx) = layer.stride, layer.dilation
    pad_top, _, pad_left, _ = layer.pad
    taps = kh * kw
    src, dst = ext.view(layer.input), ext.view(layer.output)
    fill_addr = ext.constants[fill_name(layer.input_zp)]
    budget = max(int(FILL * matmul_cycles), 1)
    # VDWCONV of n vectors (R = W = 1): n*P + K + D cycles, P = taps + X (isa/vector.py), so
    # 11n + 10 for 3x3
    slot = taps + EXTRA_LATENCY["VDWCONV"]
    chunk = max(1, (budget - VECTOR_PARAM_ROWS["VDWCONV"] - WRITE_LATENCY) // slot)
    load_rows = max(1, budget // (2 * share.in_cols))      # input rows per load
    store_rows = max(1, budget // (2 * ow))                # output rows per store
    w_base = share.asram_base
    in_base = w_base + share.count * taps
    out_base = in_base + 2 * share.in_rows * share.in_cols

    def op(name, **fields) -> Op:
        return new_op(config, index, name, **fields)

    items = [_item([op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=w_base,
                       ext_addr=ext.constants[weights_name(layer)] + share.first * taps * bus,
                       len0=share.count * taps, len1=1, len2=1),
                    op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=share.psram_base * wpr,
                       ext_addr=ext.constants[f"{layer.name}.params"] + share.first * PARAM_ROWS * wpr * bus,
                       len0=share.count * PARAM_ROWS * wpr, len1=1, len2=1)])]
    bands = [(n, b, oy0, min(share.band, oh - oy0)) for b in range(share.count) for n in range(n_img)
             for oy0 in range(share.array_rows if b == 0 else 0, oh, share.band)]

    def loads(k: int) -> list[Item]:
        n, b, oy0, rows_out = bands[k]
        ob = share.first + b
        rows, _ = _geometry(layer, rows_out)
        slot = in_base + (k % 2) * share.in_rows * share.in_cols
        out = []
        for r0 in range(0, rows, load_rows):
            r = min(load_rows, rows - r0)
            win = Window(base=src.word(n, ob, 0, 0), height=ih, width=iw, line_bytes=src.strides[2],
                         plane_bytes=src.strides[1], pad_top=pad_top, pad_left=pad_left, row0=oy0 * sy + r0,
                         row_step=1, rows=r, col0=0, cols=share.in_cols, planes=1)
            out.append(_item(load_window(config, index, win, slot + r0 * share.in_cols, fill_addr,
                                         layer.input_zp)))
        return out

    def compute(k: int) -> list[Item]:
        n, b, oy0, rows_out = bands[k]
        ob = share.first + b
        a_slot = in_base + (k % 2) * share.in_rows * share.in_cols
        d_slot = out_base + (k % 2) * share.band * ow
        out = []
        pieces = ([(y, 0, ow, min(chunk // ow, rows_out - y)) for y in range(0, rows_out, chunk // ow)]
                  if ow <= chunk else
                  [(y, x, min(chunk, ow - x), 1) for y in range(rows_out) for x in range(0, ow, chunk)])
        for y, x, n0, n1 in pieces:
            out.append(_item([op(
                "VDWCONV", n0=n0, n1=n1, k0=kw, k1=kh, w_stride0=dx, w_stride1=dy * share.in_cols,
                a_mem=VecMem.ASRAM, a_addr=a_slot + y * sy * share.in_cols + x * sx, a_stride0=sx,
                a_stride1=sy * share.in_cols, b_mem=VecMem.ASRAM, b_addr=w_base + b * taps,
                d_mem=VecMem.ASRAM, d_addr=d_slot + y * ow + x, d_stride0=1, d_stride1=ow,
                param_addr=share.psram_base + b * PARAM_ROWS, in_zp=layer.input_zp, out_zp=layer.output_zp,
                clamp_min=layer.clamp[0], clamp_max=layer.clamp[1], scale32=int(layer.scale32),
                double_round=int(layer.double_round))]))
        for y in range(0, rows_out, store_rows):
            r = min(store_rows, rows_out - y)
            out.append(_item([op("DMA_STORE", sram=Sram.ASRAM, sram_addr=d_slot + y * ow,
                                 ext_addr=dst.word(n, ob, oy0 + y, 0), len0=ow, len1=r, len2=1,
                                 stride1=dst.strides[2])]))
        return out

    for k in range(min(2, len(bands))):
        items += loads(k)
    for k in range(len(bands)):
        items += compute(k)
        if k + 2 < len(bands):
            items += loads(k + 2)
    return items


def interleave(array_ops: list[Op], items: list[Item]) -> list[Op]:
    """The array's instructions with the share's items spread over them (module docstring):
    after each MATMUL, before the next, as many items as fit in that MATMUL's duration beside
    the array's own instructions in that gap; the rest after the array's last."""
    out: list[Op] = []
    k = 0
    i = 0
    n = len(array_ops)
    port = dma = vpu = 0.0          # each resource's work carried into the next gap
    while i < n:
        op = array_ops[i]
        out.append(op)
        i += 1
        if op.instr.name != "MATMUL":
            continue
        gap = []
        while i < n and array_ops[i].instr.name != "MATMUL":
            gap.append(array_ops[i])
            i += 1
        out += gap
        limit = FILL * max(op.busy - 2, 1)        # (a MATMUL's busy includes the array's drain)
        for g in gap:
            p, d, v = _costs(g)
            port, dma, vpu = port + p, dma + d, vpu + v
        # An item may start while every resource it uses has time left in this gap: it then
        # runs on into the next one (its work is carried), where it delays nothing that
        # issues behind it as long as it issues before the next MATMUL would.
        while k < len(items):
            it = items[k]
            if (it.port and port >= limit) or (it.dma and dma >= limit) or (it.vpu and vpu >= limit):
                break
            out += it.ops
            port, dma, vpu = port + it.port, dma + it.dma, vpu + it.vpu
            k += 1
        port, dma, vpu = (max(0.0, x - limit) for x in (port, dma, vpu))
    for it in items[k:]:
        out += it.ops
    return out
