"""Lowering of fully-connected convolutions: one output pixel per image, many weights.

AlexNet's fc6..fc8 are CONV2Ds whose kernel covers the whole input (1x1 output).  Every
weight is used once per image, so the layer is bound by the external bus: one weight tile
(``array_rows`` x ``array_cols`` bytes) is ``array_rows`` bus words, and a MATMUL of up to
``array_rows`` input vectors (one per image) keeps the array busy for ``array_rows`` cycles
(sim/npu_timing.py: a MATMUL is accepted every ``max(N, R)`` cycles), exactly the time the
DMA needs to bring the next tile.  So the lowering streams the weights through two WSRAM
slots (double buffering): while the array works on one chunk of tiles, the DMA loads the
next chunk into the other slot.

Layout (``n`` images, ``T = cin blocks x kernel taps`` weight tiles per output block):

* ASRAM: image ``i``'s input window at rows ``i*T ..`` (``[cin block][ky][kx]``, the same
  order as the tiles of one output block in external memory, compiler/kinds/conv/weights.py),
  so tile ``t`` multiplies ASRAM row ``t`` of every image: one MATMUL with ``n0 = n``
  vectors ``T`` rows apart; then the outputs, row ``ob*n + i``.
* ACC: output block ``ob`` of image ``i`` at row ``ob*n + i``: every block has its own
  accumulators, so the activation stage runs once at the end.
* WSRAM: two slots of ``K`` tiles.  The weight stream (all ``cbo*T`` tiles, contiguous in
  external memory) is cut into *chunks*: ``j`` whole output blocks per chunk when two
  blocks' tiles fit (``K = j*T``), else ``m`` parts per output block (``K = ceil(T/m)``).

Per chunk: its first MATMUL waits for the DMA (its tiles are in), then the DMA_LOAD of the
next chunk into the other slot waits for the MXU (the previous chunk's MATMULs, which read
that slot, are done), then the chunk's other MATMULs.  The instructions are emitted with
their LOOPs and wait masks (:class:`FixedOp`: the scheduler and the loop search leave
them alone), between two full barriers (SYNC waiting for every unit): chunks repeat with
constant address steps, so a LOOP replays a period of them (two chunks, for the slot
parity); the increments are derived from two emitted periods and checked on the last.
Then per group of output blocks whose parameters fit PSRAM: DMA_LOAD the parameter rows,
a LOOP of ACTs; finally one DMA_STORE of every output row.
"""
from __future__ import annotations

from dataclasses import dataclass

from isa.config import NpuConfig
from isa.encoding import make
from isa.instructions import Space, Sram, address_fields, field_space, loop_increments, offset_unit

from compiler.core.costmodel import MXU_DRAIN
from compiler.core.ir import ConvLayer
from compiler.core.ops import ALL_UNITS, MAX_LEN, FixedOp, Op, new_op
from compiler.core.dma import Window, load_window
from compiler.program.memplan import ExtPlan
from compiler.core.views import ceil_div
from compiler.kinds.conv.plan import PARAM_ROWS, ConvPlan

DMA, MXU, VPU = 1, 2, 4
_INC = loop_increments()
MAX_PARTS = 64               # chunks per output block (LOOP bodies of 2*64 chunks fit its field)


@dataclass
class FcPlan(ConvPlan):
    """A ConvPlan for the streaming fully-connected lowering (one 1x1 tile per image)."""

    images: int = 1
    chunk_tiles: int = 0         # K: weight tiles per WSRAM slot
    blocks_per_chunk: int = 0    # j (whole blocks per chunk), 0 when blocks are split
    parts: int = 1               # m: chunks per output block when split
    param_group: int = 1         # output blocks per ACT group (their parameters fit PSRAM)

    @property
    def tiles_per_block(self) -> int:
        return self.cbi * self.taps

    def chunks(self) -> list[tuple[int, int, int]]:
        """(first global tile, tiles) of every chunk, in stream order."""
        T, K = self.tiles_per_block, self.chunk_tiles
        if self.blocks_per_chunk:
            total = self.cbo * T
            return [(g, min(K, total - g)) for g in range(0, total, K)]
        return [(ob * T + p, min(K, T - p)) for ob in range(self.cbo) for p in range(0, T, K)]

    def describe(self) -> str:
        how = (f"{self.blocks_per_chunk} output blocks" if self.blocks_per_chunk
               else f"1/{self.parts} output block")
        return (f"fully connected: {self.images} image(s), {self.tiles_per_block} weight tiles per output "
                f"block, {self.cbo} blocks; weights streamed in chunks of {self.chunk_tiles} tiles "
                f"({how}) through 2 WSRAM slots")


def fc_plan(layer: ConvLayer, config: NpuConfig) -> FcPlan | None:
    """The streaming plan of ``layer`` if it is fully connected (one output pixel per image,
    dense kernel window) and fits; None otherwise (the generic tiling applies)."""
    n, ih, iw, cin = layer.in_shape
    _, oh, ow, cout = layer.out_shape
    kh, kw = layer.kernel
    if (oh, ow) != (1, 1) or layer.dilation != (1, 1):
        return None
    rows, cols = config.array_rows, config.array_cols
    cbi, cbo = ceil_div(cin, rows), ceil_div(cout, cols)
    T = cbi * kh * kw
    tile_rows = rows
    if (n > MAX_LEN or n * T + n * cbo > config.asram_rows or n * cbo > config.acc_rows
            or config.psram_rows < PARAM_ROWS or 2 * tile_rows > config.wsram_rows):
        return None
    slot_tiles = config.wsram_rows // (2 * tile_rows)
    if slot_tiles >= T:
        j = min(cbo, slot_tiles // T)
        K, parts = j * T, 1
    else:
        j = 0
        parts = ceil_div(T, slot_tiles)
        K = ceil_div(T, parts)
        if parts > MAX_PARTS:              # a LOOP body of 2*parts chunks would not fit
            return None
    plan = FcPlan(layer, rows, cbi, cbo, row_step=1, th=1, tw=1, cg=cbi, tg=kh * kw, og=1,
                  in_slots=1, out_slots=1, acc_slots=1, w_slots=2, in_slot_rows=T,
                  w_slot_rows=K * tile_rows, asram_out_base=n * T, images=n, chunk_tiles=K,
                  blocks_per_chunk=j, parts=parts,
                  param_group=min(cbo, config.psram_rows // PARAM_ROWS))
    plan.estimate = _estimate(plan, config)
    return plan


def _estimate(plan: FcPlan, config: NpuConfig) -> dict:
    """Cycles (from the rules of sim/npu_timing.py) and instruction count."""
    rows, n = config.array_rows, plan.images
    lat = config.mem_latency
    cycles = n * plan.tiles_per_block + lat                     # input windows
    for _, k in plan.chunks():
        # DMA of the chunk vs the array's MATMULs (each max(n, R) cycles), plus the drain the
        # prefetch waits for.
        cycles += max(k * rows + lat, k * max(n, rows)) + rows + MXU_DRAIN + 2
    groups = ceil_div(plan.cbo, plan.param_group)
    wpr = config.words_per_wide_row
    cycles += plan.cbo * (PARAM_ROWS * wpr + n + 6) + groups * lat + n * plan.cbo + 2
    # Barriers, input loads, a LOOP over a period of chunks (each up to 6 instructions) and
    # the straight-line chunks after it, the output stage.
    period = 2 if plan.blocks_per_chunk else plan.parts + plan.parts % 2 * plan.parts
    instructions = 3 + n + (2 * period + 2) * 6 + 3 * groups + 2
    return {"cycles": cycles, "instructions": instructions, "mxu": plan.cbo * plan.tiles_per_block * max(n, rows),
            "vpu": plan.cbo * (n + 6), "dma": plan.cbo * plan.tiles_per_block * rows}


def lower_fc(plan: FcPlan, ext: ExtPlan, config: NpuConfig, index: int, names: dict) -> list[Op]:
    """The layer's instructions, LOOPs and waits included (all :class:`FixedOp`)."""
    layer = plan.layer
    rows = config.array_rows
    bus, wpr = config.bus_bytes, config.words_per_wide_row
    n, T, K = plan.images, plan.tiles_per_block, plan.chunk_tiles
    _, ih, iw, _ = layer.in_shape
    pad_top, _, pad_left, _ = layer.pad
    kh, kw = layer.kernel
    src, dst = ext.view(layer.input), ext.view(layer.output)
    w_base, p_base, fill_addr = (ext.constants[names[k]] for k in ("weights", "params", "fill"))
    tile_bytes = rows * config.array_cols
    slot_rows = K * rows
    out_base = plan.asram_out_base

    def op(name, wait=0, **fields) -> Op:
        return new_op(config, index, name, wait=wait, **fields)

    def matmul(tile: int, ob: int, w_row: int, accumulate: int, wait: int = 0) -> Op:
        return op("MATMUL", wait, a_addr=tile, a_stride0=T, n0=n, a_stride1=0, n1=1, w_addr=w_row,
                  acc_addr=ob * n, accumulate=accumulate, a_zp=layer.input_zp, w_zp=layer.weight_zp)

    def tile_loop(count: int, w_row: int, ob: int, tile: int) -> list[Op]:
        """MATMULs of tiles ``tile ..`` (``count`` of them, accumulating) of block ``ob``."""
        if count <= 0:
            return []
        body = [matmul(tile, ob, w_row, 1)]
        if count == 1:
            return body
        return [op("LOOP", count=count, body=1, inc_asram=1, inc_wsram=rows)] + body

    chunks = plan.chunks()

    def chunk_ops(c: int) -> list[Op]:
        g0, k = chunks[c]
        slot = (c % 2) * slot_rows
        ob, t0 = divmod(g0, T)
        out = [matmul(t0, ob, slot, int(t0 > 0), wait=DMA)]
        if c + 1 < len(chunks):
            g1, k1 = chunks[c + 1]
            out.append(op("DMA_LOAD", MXU, sram=Sram.WSRAM, sram_addr=((c + 1) % 2) * slot_rows,
                          ext_addr=w_base + g1 * tile_bytes, len0=k1 * rows, len1=1, len2=1))
        first = min(k, T - t0)                     # tiles of the first block in this chunk
        out += tile_loop(first - 1, slot + rows, ob, t0 + 1)
        blocks = (k - first) // T                  # whole blocks after it (j-block chunks)
        if blocks:
            w = slot + first * rows
            body = [matmul(0, ob + 1, w, 0)] + tile_loop(T - 1, w + rows, ob + 1, 1)
            if blocks > 1:
                body = [op("LOOP", count=blocks, body=len(body), inc_wsram=T * rows, inc_acc=n)] + body
            out += body
        return out

    ops: list[Op] = [op("SYNC", ALL_UNITS)]
    for i in range(n):
        win = Window(base=src.word(i, 0, 0, 0), height=ih, width=iw, line_bytes=src.strides[2],
                     plane_bytes=src.strides[1], pad_top=pad_top, pad_left=pad_left, row0=0, row_step=1,
                     rows=kh, col0=0, cols=kw, planes=plan.cbi)
        ops += load_window(config, index, win, i * T, fill_addr, layer.input_zp)
    g0, k0 = chunks[0]
    ops.append(op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=0, ext_addr=w_base + g0 * tile_bytes,
                  len0=k0 * rows, len1=1, len2=1))
    # A period of chunks repeats with constant steps: whole units (j blocks, or one block of
    # m parts), an even number of chunks (slot parity).
    unit = 1 if plan.blocks_per_chunk else plan.parts
    period = unit if unit % 2 == 0 else 2 * unit
    # Periods in the LOOP: every chunk in them, and the one each prefetches, of full size.
    full = len(chunks) - (1 if chunks[-1][1] != chunks[0][1] and plan.blocks_per_chunk else 0)
    count = (full - 1) // period
    done = 0
    if count >= 2:
        bodies = [sum((chunk_ops(p * period + r) for r in range(period)), []) for p in (0, 1, count - 1)]
        ops += _loop(bodies, count, config)
        done = count * period
    for c in range(done, len(chunks)):
        ops += chunk_ops(c)

    # The output stage: per group of blocks whose parameters fit PSRAM.
    G = plan.param_group
    for ob0 in range(0, plan.cbo, G):
        g = min(G, plan.cbo - ob0)
        ops.append(op("DMA_LOAD", VPU, sram=Sram.PSRAM, sram_addr=0,
                      ext_addr=p_base + ob0 * PARAM_ROWS * wpr * bus, len0=g * PARAM_ROWS * wpr, len1=1, len2=1))
        act = op("ACT", DMA | MXU, acc_addr=ob0 * n, count=n, dst_addr=out_base + ob0 * n, param_addr=0,
                 out_zp=layer.output_zp, clamp_min=layer.clamp[0], clamp_max=layer.clamp[1],
                 scale32=int(layer.scale32), double_round=int(layer.double_round))
        if g > 1:
            ops.append(op("LOOP", count=g, body=1, inc_acc=n, inc_asram=n, inc_psram=PARAM_ROWS))
        ops.append(act)
    if n == 1 and dst.strides[1] == bus:
        store = dict(len0=plan.cbo, len1=1, len2=1)
    else:
        store = dict(len0=1, len1=n, stride1=dst.strides[0], len2=plan.cbo, stride2=dst.strides[1])
    ops.append(op("DMA_STORE", VPU, sram=Sram.ASRAM, sram_addr=out_base, ext_addr=dst.word(0, 0, 0, 0), **store))
    ops.append(op("SYNC", ALL_UNITS))
    return [FixedOp(o.instr, o.layer, o.reads, o.writes, o.occupancy, o.busy) for o in ops]


def _addresses(ops: list[Op], config: NpuConfig) -> list[tuple]:
    """(name, non-address values, [(space, unit, value)]) per op."""
    out = []
    for o in ops:
        defn = o.instr.defn
        v = o.instr.values
        addrs, names = [], set()
        for f in address_fields(defn):
            space = field_space(defn, f, v)
            if space is not None:
                names.add(f.name)
                addrs.append((space, offset_unit(f, space, config), v[f.name]))
        out.append((o.instr.name, tuple((k, x) for k, x in v.items() if k not in names), addrs))
    return out


def _loop(bodies: list[list[Op]], count: int, config: NpuConfig) -> list[Op]:
    """``LOOP count`` replaying ``bodies[0]``; ``bodies`` are iterations 0, 1 and ``count-1``
    emitted in full: the increments come from the first two and are checked on the last."""
    first, second, last = (_addresses(b, config) for b in bodies)
    incs: dict[Space, int] = {}
    for a, b, z in zip(first, second, last, strict=True):
        if a[:2] != b[:2] or a[:2] != z[:2]:
            raise AssertionError(f"compiler bug: fully-connected loop body differs across iterations ({a[0]})")
        for (space, unit, x), (_, _, y), (_, _, w) in zip(a[2], b[2], z[2]):
            step, rem = divmod(y - x, unit)
            if rem or incs.setdefault(space, step) != step or w - x != (count - 1) * step * unit:
                raise AssertionError(f"compiler bug: fully-connected loop addresses are not linear ({a[0]})")
    fields = {_INC[s].name: d for s, d in incs.items()}
    loop = Op(make("LOOP", count=count, body=len(bodies[0]), **fields), bodies[0][0].layer)
    return [loop] + bodies[0]
