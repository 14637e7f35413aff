"""Lowering of a fused convolution layer (CONV2D -> RESCALE [-> CLAMP]) to instructions.

For every (weight group, output tile) step of the plan's loop order:

1. DMA_LOAD the tile's input window into an ASRAM input slot (padding folded into the pad
   fields, pad value = input zero point), unless the slot still holds it, and the group's
   bias/multiplier/shift rows into a PSRAM slot, unless resident;
2. for every output-channel block, one MATMUL per (input-channel block, kernel tap) -- a
   depthwise layer's block per kernel tap of its own input block (diagonal weight tiles): the
   2-D loop of the MATMUL walks the tile's output pixels (``n0`` columns with input stride
   ``stride_x``, ``n1`` rows), accumulating into the block's ACC slot;
3. per output-channel block, one ACT (bias, RESCALE, zero point, clamp) into an ASRAM output
   slot and one DMA_STORE of the tile's bricks, emitted after the MATMULs of the step's next
   block (the last block's at once, as is every block's with one ACC slot).

The ACT after the next block's MATMULs waits for its own with ACT's ``mxu_lag`` (set by the
scheduler, compiler/program/schedule.py): the array streams the next block meanwhile.  An ACT
right after its block's MATMULs waited for the MXU to be idle, the array empty: every block
cost ``array_rows + 2`` cycles more than its MATMULs (ResNet-50's 1x1 128->512 layer at 28x28
on 64x64: 16,187 -> 15,007 cycles).  Not across steps: there the next MATMULs wait for the
next input window and the deferred store with them (its 7x7 stem: 47,338 -> 61,706).

Weights are loaded one output block at a time (one DMA_LOAD per block of a group not
resident in its WSRAM slot), one block ahead: after the first MATMUL of a block comes the
load of the next block's weights, whether of this group or of the next one in the other
slot, once every MATMUL reading that slot is emitted.  The machine issues in order and the
DMA takes a command only when idle, so a whole group's weights in one load (4,096 cycles
for eight blocks at 32x32) held back every store and so every ACT behind them, and the
next group's weights, loaded once this group's stores were out, waited in full: ResNet-50's
stage-5 layers ran at the sum of their weight DMA and their MATMULs.  A block's load takes
``rows per block`` cycles and its MATMULs ``max(pixels, array rows)`` for each of those
rows' tiles, so one block ahead keeps pace.  The piece ahead is emitted after the block's
first MATMUL because that MATMUL waits for the DMA to be idle (its own piece loaded), and a
piece issued before it would lengthen that wait by its whole load.

The next step's input window, when it goes to another ASRAM slot, is emitted ahead too:
after the ACT of the step's block before last (an ACT and an input load both write ASRAM,
one write port: the load fits between two ACTs), or after the first MATMUL of its last block
when no ACT follows (a reduction group that is not a block's last).  Emitted at the start of
its own step, it waited for the last block's ACT and store, and the array for it.

Instructions come out in this natural order with no wait masks; the scheduler reorders
them for overlap and sets the waits from their footprints.
"""
from __future__ import annotations

from dataclasses import dataclass

from isa.config import NpuConfig
from isa.instructions import Sram

from compiler.core.ops import Op, new_op
from compiler.core.dma import Window, fill_name, load_window
from compiler.kinds.conv.fully_connected import FcPlan, lower_fc
from compiler.kinds.conv.im2col import Im2colPlan, lower as lower_im2col
from compiler.program.memplan import ExtPlan
from compiler.kinds.conv.plan import ConvPlan, ReductionGroup
from compiler.kinds.conv.vector_share import interleave, share_ops
from compiler.kinds.conv.weights import PARAM_ROWS


class Ring:
    """Round-robin slots remembering what each holds (to skip reloading resident data)."""

    def __init__(self, slots: int):
        self.keys: list = [None] * slots
        self.next = 0

    def use(self, key) -> tuple[int, bool]:
        """(slot, already holds ``key``)."""
        if key in self.keys:
            return self.keys.index(key), True
        slot = self.next
        self.next = (self.next + 1) % len(self.keys)
        self.keys[slot] = key
        return slot, False


def constant_names(layer_name: str, input_zp: int) -> dict[str, str]:
    """Names of the constant segments a conv layer reads."""
    return {"weights": f"{layer_name}.weights", "params": f"{layer_name}.params",
            "fill": fill_name(input_zp)}


def lower_conv(plan: ConvPlan, ext: ExtPlan, config: NpuConfig, index: int) -> list[Op]:
    layer = plan.layer
    if isinstance(plan, FcPlan):      # streamed weights, LOOPs emitted directly
        return lower_fc(plan, ext, config, index, constant_names(layer.name, layer.input_zp))
    if isinstance(plan, Im2colPlan):  # windows gathered by the DMA (im2col.py)
        return lower_im2col(plan, ext, config, index, constant_names(layer.name, layer.input_zp))
    lanes, cols = config.array_rows, config.array_cols
    bus = config.bus_bytes
    _, ih, iw, _ = layer.in_shape
    kh, kw = layer.kernel
    (sy, sx), (dy, dx) = layer.stride, layer.dilation
    pad_top, _, pad_left, _ = layer.pad
    taps = plan.taps
    step = plan.row_step
    names = constant_names(layer.name, layer.input_zp)
    src, dst = ext.view(layer.input), ext.view(layer.output)   # windows of larger buffers, maybe
    w_base, p_base, fill_addr = (ext.constants[names[k]] for k in ("weights", "params", "fill"))
    wpr = config.words_per_wide_row
    tile_bytes = lanes * cols                  # one weight tile
    pixels = plan.th * plan.tw                 # ACC and output slot size

    def op(name, **fields) -> Op:
        return new_op(config, index, name, **fields)

    tiles = plan.tiles()
    if plan.order == "tiles_outer":
        steps = [(o, t) for t in range(len(tiles)) for o in range(plan.ogroups)]
    else:
        steps = [(o, t) for o in range(plan.ogroups) for t in range(len(tiles))]
    share = plan.share
    if share is not None:      # the vector unit computes block ``first`` from row ``array_rows`` on
        steps = [(o, t) for o, t in steps if o != share.first or tiles[t].oy < share.array_rows]
    uses = _uses(plan, steps)
    inputs_done: set[int] = set()               # steps whose input window is emitted
    pieces = _weight_pieces(plan, uses)
    emitted = 0                                  # weight pieces emitted so far

    def emit_needed(u: int, j: int) -> None:
        """The weight pieces up to use ``u``'s block ``j``: its MATMULs read them."""
        nonlocal emitted
        while emitted < len(pieces) and pieces[emitted] <= (u, j):
            ops.append(weight_load(*pieces[emitted]))
            emitted += 1

    def emit_ahead(u: int) -> None:
        """The next piece, if every reader of its slot is emitted: it loads while this
        block's MATMULs run.  Emitted after the block's first MATMUL, which waits for the
        DMA to finish this block's own piece, so that wait does not include the next one."""
        nonlocal emitted
        if emitted < len(pieces) and uses[pieces[emitted][0]].prev_reader < u:
            ops.append(weight_load(*pieces[emitted]))
            emitted += 1

    def emit_input(u: int, planes: range | None = None) -> None:
        """Step ``u``'s input window (its input blocks ``planes``, default all), unless its
        slot holds it or it is emitted already."""
        use = uses[u]
        if use.in_resident or u in inputs_done:
            return
        t, grp = tiles[use.ti], use.group
        planes = range(grp.ncb) if planes is None else planes
        if planes.stop >= grp.ncb:
            inputs_done.add(u)
        rows, cols = plan.in_rows(t.th), plan.in_cols(t.tw)
        win = Window(base=src.word(t.n, grp.cb0 + planes.start, 0, 0), height=ih, width=iw,
                     line_bytes=src.strides[2], plane_bytes=src.strides[1],
                     pad_top=pad_top, pad_left=pad_left, row0=t.oy * sy, row_step=step,
                     rows=rows, col0=t.ox * sx, cols=cols, planes=len(planes))
        ops.extend(load_window(config, index, win, use.in_slot * plan.in_slot_rows + planes.start * rows * cols,
                               fill_addr, layer.input_zp))

    def emit_input_ahead(u: int) -> None:
        """The next step's input window, if no step from this one on reads its slot."""
        if u + 1 < len(uses) and uses[u + 1].in_prev_reader < u:
            emit_input(u + 1)

    def weight_load(u: int, j: int) -> Op:
        """DMA_LOAD of output block ``j`` of use ``u``'s weight group into its WSRAM slot."""
        use = uses[u]
        grp = use.group
        per_block = grp.ncb * grp.ntap * lanes
        ob = use.o * plan.og + j
        w_cb = 0 if plan.depthwise else grp.cb0     # tile order (weights.py): [ob][cb][tap]
        return op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=use.slot * plan.w_slot_rows + j * per_block,
                  ext_addr=w_base + ((ob * plan.wcb + w_cb) * taps + grp.tap0) * tile_bytes,
                  len0=per_block, len1=1, len2=1)

    def weight_rows(u: int, c: int) -> Op:
        """DMA_LOAD of input block ``c``'s rows of use ``u``'s first output block (the tile
        order [ob][cb][tap] keeps them together)."""
        use = uses[u]
        grp = use.group
        rows_c = grp.ntap * lanes
        return op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=use.slot * plan.w_slot_rows + c * rows_c,
                  ext_addr=w_base + ((use.o * plan.og * plan.wcb + grp.cb0 + c) * taps + grp.tap0) * tile_bytes,
                  len0=rows_c, len1=1, len2=1)

    # A complete block's ACT and store go after the next block's MATMULs (another ACC slot):
    # the ACT waits for its own block's MATMULs with mxu_lag (compiler/program/schedule.py)
    # while the array streams the next block, instead of waiting for the array to empty.
    tail: list = []

    def flush_tail() -> None:
        for item in tail:
            if isinstance(item, int):
                emit_input_ahead(item)
            else:
                ops.append(item)
        tail.clear()

    param_load = None                          # the step's parameter load, not yet emitted

    def emit_params() -> None:
        """The step's parameter load, once (at its start, or after the first step's prologue)."""
        nonlocal param_load
        if param_load is not None:
            ops.append(param_load)
            param_load = None

    params = Ring(plan.w_slots)
    acc_next = out_next = 0
    ops: list[Op] = []
    u = -1
    for o, ti in steps:
        t = tiles[ti]
        blocks = range(o * plan.og, min(plan.cbo, (o + 1) * plan.og))
        rows, cols_in = plan.in_rows(t.th), plan.in_cols(t.tw)
        acc_of = {}
        for ob in blocks:
            acc_of[ob] = (acc_next % plan.acc_slots) * pixels
            acc_next += 1
        pslot, resident = params.use(o)
        p_row = pslot * plan.og * PARAM_ROWS
        param_load = None
        if not resident:
            flush_tail()                       # its ACT reads the parameters this load replaces
            param_load = op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=p_row * wpr,
                            ext_addr=p_base + blocks[0] * PARAM_ROWS * wpr * bus,
                            len0=len(blocks) * PARAM_ROWS * wpr, len1=1, len2=1)
        groups = plan.reduction_groups(blocks[0])    # depthwise: og == 1, the block's own input
        for g, grp in enumerate(groups):
            u += 1
            a_base = uses[u].in_slot * plan.in_slot_rows
            # The layer's first step: nothing was loaded ahead of it.  Its input window and
            # its first block's weights are loaded input block by input block, one ahead of
            # the MATMULs (the prologue below); the parameters once they are under way.
            split = (u == 0 and grp.ncb > 1 and not uses[0].in_resident and pieces[:1] == [(0, 0)]
                     and not plan.depthwise)
            if split:
                emit_input(u, range(0, 1))
                ops.append(weight_rows(u, 0))
                emitted = 1
            else:
                emit_params()
                emit_input(u)
            w_slot = uses[u].slot * plan.w_slot_rows
            per_block = grp.ncb * grp.ntap * lanes   # WSRAM rows of one output block in this slot
            for j, ob in enumerate(blocks):
                emit_needed(u, j)
                for c in range(grp.ncb):
                    prologue = split and j == 0
                    if prologue and c + 1 < grp.ncb:
                        emit_input(u, range(c + 1, c + 2))
                    for k, tap in enumerate(range(grp.tap0, grp.tap0 + grp.ntap)):
                        ky, kx = divmod(tap, kw)
                        first = g == 0 and c == 0 and k == 0
                        ops.append(op(
                            "MATMUL",
                            a_addr=a_base + c * rows * cols_in + (ky * dy // step) * cols_in + kx * dx,
                            a_stride0=sx, a_stride1=(sy // step) * cols_in, n0=t.tw, n1=t.th,
                            w_addr=w_slot + j * per_block + (c * grp.ntap + k) * lanes,
                            acc_addr=acc_of[ob], accumulate=0 if first else 1,
                            a_zp=layer.input_zp, w_zp=layer.weight_zp))
                        if k == 0 and prologue and c + 1 < grp.ncb:
                            ops.append(weight_rows(u, c + 1))     # the next input block's
                        elif k == 0 and (c == 0 or prologue):     # prologue: after its last
                            emit_params()
                            emit_ahead(u)
                            if j == len(blocks) - 1 and (len(blocks) == 1 or g < plan.groups - 1):
                                emit_input_ahead(u)
                flush_tail()
                if g == plan.groups - 1:       # block complete: its ACT and store follow the next
                    out_row = plan.asram_out_base + (out_next % plan.out_slots) * pixels
                    out_next += 1
                    tail.append(op("ACT", acc_addr=acc_of[ob], count=t.th * t.tw, dst_addr=out_row,
                                   param_addr=p_row + j * PARAM_ROWS, out_zp=layer.output_zp,
                                   clamp_min=layer.clamp[0], clamp_max=layer.clamp[1],
                                   scale32=int(layer.scale32), double_round=int(layer.double_round)))
                    if j == len(blocks) - 2:
                        tail.append(u)         # the next step's input window, after that ACT
                    tail.append(op("DMA_STORE", sram=Sram.ASRAM, sram_addr=out_row,
                                   ext_addr=dst.word(t.n, ob, t.oy, t.ox),
                                   len0=t.tw, len1=t.th, len2=1, stride1=dst.strides[2]))
                    if plan.acc_slots == 1 or j == len(blocks) - 1:
                        flush_tail()           # the next MATMULs overwrite its ACC slot, or
                                               # are the next step's (behind its input load)
    flush_tail()
    if plan.share is not None:                 # the vector unit's blocks, beside the array's
        ops = interleave(ops, share_ops(layer, plan.share, ext, config, index, max(pixels, lanes)))
    return ops


@dataclass(frozen=True)
class Use:
    """One (weight group, tile, reduction group) step: its WSRAM slot and input slot, whether
    each already holds what the step reads, and the last earlier step that reads the same
    slot (-1: none)."""

    o: int
    ti: int
    group: ReductionGroup
    slot: int
    resident: bool
    prev_reader: int
    in_slot: int
    in_resident: bool
    in_prev_reader: int


def _uses(plan: ConvPlan, steps: list[tuple[int, int]]) -> list[Use]:
    """The steps in emission order, their slots given by rings of ``w_slots`` and
    ``in_slots``."""
    weights, inputs = Ring(plan.w_slots), Ring(plan.in_slots)
    last_w: dict[int, int] = {}
    last_in: dict[int, int] = {}
    uses = []
    for o, ti in steps:
        for g, grp in enumerate(plan.reduction_groups(o * plan.og)):
            slot, resident = weights.use((o, g))
            in_slot, in_resident = inputs.use((ti, grp.cb0))
            uses.append(Use(o, ti, grp, slot, resident, last_w.get(slot, -1),
                            in_slot, in_resident, last_in.get(in_slot, -1)))
            last_w[slot] = last_in[in_slot] = len(uses) - 1
    return uses


def _weight_pieces(plan: ConvPlan, uses: list[Use]) -> list[tuple[int, int]]:
    """(use, output block within its group) of every weight DMA_LOAD, in emission order: one
    per output block, so that a group's weights stream in while the array works on the
    previous blocks and the DMA is never tied up long enough to hold back the stores."""
    return [(u, j) for u, use in enumerate(uses) if not use.resident
            for j in range(min(plan.og, plan.cbo - use.o * plan.og))]
