"""Lowering of a fused convolution layer (CONV2D -> RESCALE [-> CLAMP]) to instructions.

For every (weight group, output tile) step of the plan's loop order:

1. DMA_LOAD the tile's input window into an ASRAM input slot (padding folded into the pad
   fields, pad value = input zero point), unless the slot still holds it;
2. DMA_LOAD the group's weights into a WSRAM slot and its bias/multiplier/shift rows into a
   PSRAM slot, unless resident;
3. for every output-channel block, one MATMUL per (input-channel block, kernel tap) -- a
   depthwise layer's block per kernel tap of its own input block (diagonal weight tiles): the
   2-D loop of the MATMUL walks the tile's output pixels (``n0`` columns with input stride
   ``stride_x``, ``n1`` rows), accumulating into the block's ACC slot;
4. per output-channel block, once its last MATMUL is emitted, one ACT (bias, RESCALE, zero point, clamp) into an ASRAM output
   slot and one DMA_STORE of the tile's bricks.

Instructions come out in this natural order with no wait masks; the scheduler reorders
them for overlap and sets the waits from their footprints.
"""
from __future__ import annotations

from isa.config import NpuConfig
from isa.instructions import Sram

from compiler.core.ops import Op, new_op
from compiler.core.dma import Window, fill_name, load_window
from compiler.kinds.conv.fully_connected import FcPlan, lower_fc
from compiler.kinds.conv.im2col import Im2colPlan, lower as lower_im2col
from compiler.program.memplan import ExtPlan
from compiler.kinds.conv.plan import ConvPlan
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
    inputs, weights, params = Ring(plan.in_slots), Ring(plan.w_slots), Ring(plan.w_slots)
    acc_next = out_next = 0
    ops: list[Op] = []
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
        if not resident:
            ops.append(op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=p_row * wpr,
                          ext_addr=p_base + blocks[0] * PARAM_ROWS * wpr * bus,
                          len0=len(blocks) * PARAM_ROWS * wpr, len1=1, len2=1))
        groups = plan.reduction_groups(blocks[0])    # depthwise: og == 1, the block's own input
        for g, grp in enumerate(groups):
            islot, resident = inputs.use((ti, grp.cb0))
            a_base = islot * plan.in_slot_rows
            if not resident:
                win = Window(base=src.word(t.n, grp.cb0, 0, 0), height=ih, width=iw,
                             line_bytes=src.strides[2], plane_bytes=src.strides[1],
                             pad_top=pad_top, pad_left=pad_left, row0=t.oy * sy, row_step=step, rows=rows,
                             col0=t.ox * sx, cols=cols_in, planes=grp.ncb)
                ops += load_window(config, index, win, a_base, fill_addr, layer.input_zp)
            wslot, resident = weights.use((o, g))
            w_slot = wslot * plan.w_slot_rows
            per_block = grp.ncb * grp.ntap * lanes   # WSRAM rows of one output block in this slot
            if not resident:
                # Tile order (weights.py): [ob][input block of ob][tap]; a depthwise block has one.
                w_cb = 0 if plan.depthwise else grp.cb0
                ops.append(op("DMA_LOAD", sram=Sram.WSRAM, sram_addr=w_slot,
                              ext_addr=w_base + ((blocks[0] * plan.wcb + w_cb) * taps + grp.tap0) * tile_bytes,
                              len0=per_block, len1=len(blocks), len2=1,
                              stride1=plan.wcb * taps * tile_bytes))
            for j, ob in enumerate(blocks):
                for c in range(grp.ncb):
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
                if g == plan.groups - 1:       # block complete: free its ACC slot at once
                    out_row = plan.asram_out_base + (out_next % plan.out_slots) * pixels
                    out_next += 1
                    ops.append(op("ACT", acc_addr=acc_of[ob], count=t.th * t.tw, dst_addr=out_row,
                                  param_addr=p_row + j * PARAM_ROWS, out_zp=layer.output_zp,
                                  clamp_min=layer.clamp[0], clamp_max=layer.clamp[1],
                                  scale32=int(layer.scale32), double_round=int(layer.double_round)))
                    ops.append(op("DMA_STORE", sram=Sram.ASRAM, sram_addr=out_row,
                                  ext_addr=dst.word(t.n, ob, t.oy, t.ox),
                                  len0=t.tw, len1=t.th, len2=1, stride1=dst.strides[2]))
    return ops
