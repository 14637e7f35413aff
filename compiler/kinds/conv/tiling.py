"""Tiling: choose how a convolution layer is cut to fit the scratchpads.

Work is split along these axes (Vela's "block config"):

* output tiles of ``th`` rows x ``tw`` columns of one image: the accumulators of one tile
  and one output-channel block fill one ACC slot (``th*tw`` rows), the input window the
  tile needs (all kernel taps, padding included) one ASRAM input slot;
* output-channel blocks of ``array_cols`` channels (one MATMUL column block each), grouped
  ``og`` at a time so a group's weights sit together in one WSRAM slot;
* the reduction (input-channel blocks x kernel taps), cut into *reduction groups* when a
  block's weights do not fit WSRAM: ``cg`` input-channel blocks with all taps, or, when
  even one block's taps do not fit, one block and ``tg`` taps.  Partial sums stay in ACC
  across groups;
* input rows are loaded every ``row_step = gcd(stride_y, dilation_y)`` rows, since rows in
  between are never read; tiles of one output row may step by ``dilation_y`` instead,
  which makes huge dilations fit.

A depthwise layer (``ConvLayer.depth_multiplier`` M >= 1) is a grouped convolution: output
block ``ob`` reduces over input block ``ob // M`` only, one diagonal weight tile per tap
(ConvPlan.reduction_groups).  So its reduction groups hold one input block, every weight
group one output block (``og = 1``: each block reads its own input window), and the MATMUL
count per output pixel and block is the tap count, not taps x input blocks.  With M > 1 the
tiles are the outer loop, so the M blocks reading one input window find it resident.

Scratchpads are divided into ring slots (two of each where they fit) so that the DMA can
fill one slot while the array works on another; the scheduler then overlaps them.  The
search tries reduction groupings, buffering modes and tile shapes and ranks them by a small
analytic estimate of cycles (the instruction fetch's words included: they share the bus with
the DMA); the driver takes the fastest per layer (instructions are fetched from external
memory, so a program of any length runs).  A layer that fits in no way raises
:class:`tosa_ir.errors.Unsupported`.
"""
from __future__ import annotations

import math

from isa.config import NpuConfig
from isa.instructions import INSTR_BYTES
from tosa_ir.errors import Unsupported

from compiler.core.costmodel import ACT_OVERHEAD, MXU_DRAIN
from compiler.core.ir import ConvLayer
from compiler.core.ops import MAX_LEN
from compiler.core.views import ceil_div
from compiler.kinds.conv.fully_connected import fc_plan
from compiler.kinds.conv.plan import PARAM_ROWS, ConvPlan

MAX_RING = 4                            # ACC and output slots beyond this buy nothing
# (input slots, output slots, ACC slots) tried, most overlap first.
BUFFER_MODES = ((2, 2, 2), (1, 2, 2), (1, 1, 1))


def plan_conv(layer: ConvLayer, config: NpuConfig) -> ConvPlan:
    """The cheapest feasible tiling of ``layer`` for ``config``."""
    return plan_candidates(layer, config)[0]


def plan_candidates(layer: ConvLayer, config: NpuConfig, streaming: bool = True) -> list[ConvPlan]:
    """Feasible tilings of ``layer`` that trade cycles for instructions, cheapest first.

    Each plan has fewer instructions than every cheaper one (a Pareto front), so a driver
    short of instruction memory can step down the list.  With ``streaming`` a fully-connected
    layer gets its one streaming plan (compiler/kinds/conv/fully_connected.py: LOOPs
    emitted by the lowering; ``streaming=False`` for straight-line programs).
    """
    if streaming and not layer.depth_multiplier:
        plan = fc_plan(layer, config)
        if plan is not None:
            return [plan]
    lanes = config.array_rows
    if config.psram_rows < PARAM_ROWS:
        raise Unsupported(f"PSRAM of {config.psram_rows} rows cannot hold one block's "
                          f"{PARAM_ROWS} parameter rows")
    cbi = ceil_div(layer.in_shape[3], lanes)
    cbo = ceil_div(layer.out_shape[3], config.array_cols)
    taps = layer.kernel[0] * layer.kernel[1]
    steps = [(math.gcd(layer.stride[0], layer.dilation[0]), None)]
    if layer.dilation[0] != steps[0][0]:
        steps.append((layer.dilation[0], 1))     # one output row per tile: step over dilation
    for row_step, th_max in steps:
        plans = []
        wcb = 1 if layer.depth_multiplier else cbi      # input blocks per output block
        for cg, tg in _reduction_options(wcb, taps):
            w_rows = cg * tg * lanes
            if w_rows > config.wsram_rows:
                continue
            if layer.depth_multiplier:
                og, w_slots = _weight_grouping(wcb, cg, False, cbo, w_rows, config)
            else:
                og, w_slots = _weight_grouping(cbi, cg, tg == taps, cbo, w_rows, config)
            for in_slots, out_slots, acc_slots in BUFFER_MODES:
                plan = ConvPlan(layer, lanes, cbi, cbo, row_step, 0, 0, cg, tg, og, in_slots,
                                out_slots, acc_slots, w_slots, w_slot_rows=og * w_rows)
                if _best_tile(plan, config, th_max):
                    _finish(plan, config)
                    plans.append(plan)
        if plans:
            plans.sort(key=lambda p: (p.estimate["cycles"], p.estimate["instructions"]))
            front = [plans[0]]
            for plan in plans[1:]:
                if plan.estimate["instructions"] < front[-1].estimate["instructions"]:
                    front.append(plan)
            return front
    raise Unsupported(
        f"CONV2D at {layer.location or layer.name}: does not fit the NPU even as 1x1 output tiles "
        f"with one input-channel block and one kernel tap per step (kernel {layer.kernel}, "
        f"dilation {layer.dilation}, stride {layer.stride}; ASRAM {config.asram_rows} rows, "
        f"WSRAM {config.wsram_rows} rows, ACC {config.acc_rows} rows)")


def _reduction_options(cbi: int, taps: int) -> list[tuple[int, int]]:
    """(cin blocks, taps) per reduction group: whole blocks first, then splits of the taps."""
    options = {(ceil_div(cbi, ceil_div(cbi, k)), taps) for k in range(1, cbi + 1)}
    options |= {(1, ceil_div(taps, ceil_div(taps, k))) for k in range(1, taps + 1)}
    return sorted(options, key=lambda o: -o[0] * o[1])


def _weight_grouping(cbi, cg, all_taps, cbo, w_rows, config) -> tuple[int, int]:
    """(output-channel blocks per weight slot, weight slots)."""
    whole = cg == cbi and all_taps
    if whole and cbo * w_rows <= config.wsram_rows and cbo * PARAM_ROWS <= config.psram_rows:
        return cbo, 1                         # every weight stays resident: load once
    w_slots = 2 if 2 * w_rows <= config.wsram_rows and 2 * PARAM_ROWS <= config.psram_rows else 1
    if not whole:
        return 1, w_slots                     # partial sums of one block at a time
    og = min(cbo, config.wsram_rows // w_slots // w_rows, config.psram_rows // w_slots // PARAM_ROWS)
    return max(og, 1), w_slots


def _fits(plan: ConvPlan, th: int, tw: int, config: NpuConfig) -> bool:
    pixels = th * tw
    if pixels > MAX_LEN or plan.acc_slots * pixels > config.acc_rows:
        return False
    in_rows = plan.cg * plan.in_rows(th) * plan.in_cols(tw)
    return plan.in_slots * in_rows + plan.out_slots * pixels <= config.asram_rows


def _best_tile(plan: ConvPlan, config: NpuConfig, th_max: int | None) -> bool:
    """Set the feasible (th, tw) with the fewest tiles (then the widest), balanced over the
    output; False if none fits."""
    _, oh, ow, _ = plan.layer.out_shape
    oh_cap = min(oh, th_max or oh, MAX_LEN)
    best = None                               # (tiles, -tw, th, tw)
    for split in range(1, ow + 1):
        tw = ceil_div(ow, split)
        if ceil_div(ow, tw) != split:
            continue                          # same tw as a smaller split
        if best is not None and split * ceil_div(oh, oh_cap) > best[0]:
            break                             # narrower tiles cannot need fewer
        th_cap = min(oh_cap, config.acc_rows // (plan.acc_slots * tw))
        if th_cap == 0:
            continue
        lo, hi = 0, th_cap                    # largest th that fits (monotone)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _fits(plan, mid, tw, config):
                lo = mid
            else:
                hi = mid - 1
        if lo:
            key = (split * ceil_div(oh, lo), -tw, lo, tw)
            best = key if best is None else min(best, key)
    if best is None:
        return False
    _, _, th, tw = best
    plan.th = ceil_div(oh, ceil_div(oh, th))  # same tile count, balanced sizes
    plan.tw = ceil_div(ow, ceil_div(ow, tw))
    return True


def _finish(plan: ConvPlan, config: NpuConfig) -> None:
    """Slot sizes, spare ring slots, loop order and the analytic estimate."""
    pixels = plan.th * plan.tw
    plan.in_slot_rows = plan.cg * plan.in_rows(plan.th) * plan.in_cols(plan.tw)
    free = config.asram_rows - plan.in_slots * plan.in_slot_rows
    plan.out_slots = max(plan.out_slots, min(MAX_RING, free // pixels))
    plan.asram_out_base = plan.in_slots * plan.in_slot_rows
    if plan.acc_slots > 1:
        plan.acc_slots = max(plan.acc_slots, min(MAX_RING, config.acc_rows // pixels))
    tiles = sum(plan.tile_shapes().values())
    if plan.depthwise:
        # Weights and inputs are each read once either way with M = 1; with M > 1 the M
        # blocks of one input window run one after the other (the input ring keeps it).
        plan.order = "tiles_outer" if plan.layer.depth_multiplier > 1 else "weights_outer"
    elif plan.og < plan.cbo and plan.groups == 1 and tiles > 1:
        # Re-read inputs once per weight group, or weights once per tile: whichever is less.
        n, ih, iw, _ = plan.layer.in_shape
        in_bytes = n * plan.cbi * ih * iw
        w_bytes = plan.cbo * plan.w_slot_rows // plan.og
        plan.order = "tiles_outer" if w_bytes * tiles < in_bytes * plan.ogroups else "weights_outer"
    plan.estimate = _estimate(plan, config)


def _estimate(plan: ConvPlan, config: NpuConfig) -> dict:
    """Analytic cycles and instruction count of a plan (for ranking plans only)."""
    shapes = plan.tile_shapes()
    tiles = sum(shapes.values())
    rows = plan.lanes
    mm_per = plan.wcb * plan.taps
    # Input windows stay resident when every (tile, input-block group) has its own slot.
    windows = 1 if plan.depthwise else ceil_div(plan.cbi, plan.cg)
    resident_in = tiles * windows <= plan.in_slots and (plan.groups == 1 or not plan.depthwise)
    # (A depthwise layer loads each input block's window once per tile: ConvPlan.depthwise.)
    in_loads = 1 if resident_in or plan.order == "tiles_outer" or plan.depthwise else plan.ogroups
    resident_w = plan.og == plan.cbo and plan.groups == 1
    w_loads = 1 if resident_w else (tiles if plan.order == "tiles_outer" or plan.groups > 1 else 1)
    mxu = vpu = dma_in = dma_out = 0
    instructions = 0
    for (th, tw), count in shapes.items():
        px = th * tw
        # MATMULs stream back to back; the array drains once per output block (for its ACT).
        mxu += count * plan.cbo * (mm_per * max(px, rows) + rows + MXU_DRAIN)
        vpu += count * plan.cbo * (px + ACT_OVERHEAD)
        words = plan.cbi * plan.in_rows(th) * plan.in_cols(tw)
        dma_in += count * in_loads * (words + config.mem_latency)
        dma_out += count * plan.cbo * (px + 1)
        instructions += count * (plan.cbo * (mm_per + 2) + in_loads * ceil_div(plan.cbi, plan.cg))
    w_words = plan.cbo * plan.wcb * plan.taps * rows + plan.cbo * PARAM_ROWS * config.words_per_wide_row
    w_dma = w_loads * w_words
    dma_in += w_dma
    instructions += w_loads * plan.ogroups * plan.groups * (plan.og + 1)   # a load per block, params
    # Weights stream one output block per DMA_LOAD, one block ahead of the array
    # (compiler/kinds/conv/lower.py): only a group's first block load is exposed, and only
    # with one weight slot (the next group's load waits for every MATMUL of this one).
    uses = w_loads * plan.ogroups * plan.groups
    if not resident_w:
        # A group's first block load overwrites a slot the MATMULs of an earlier group read;
        # unless an ACT (a block's last group) waited for the array since, the load waits for
        # the array to drain, and the MATMULs behind it for the load.
        mxu += w_loads * plan.ogroups * (plan.groups - 1) * (min(plan.th * plan.tw, rows) + MXU_DRAIN + 1)
    first_piece = w_dma // max(uses * plan.og, 1)
    # Work that cannot overlap the array for lack of a second slot is added to it.
    serial = mxu
    # An input window reloaded for each reduction group overwrites the slot of the group
    # before last: the load waits for the array to drain and no ACT drains it in between, so
    # the scheduler cannot start it early (compiler/program/schedule.py): it is serial too.
    serial += dma_in - w_dma if plan.in_slots == 1 or (plan.groups > 1 and not resident_in) else 0
    serial += uses * first_piece if plan.w_slots == 1 and not resident_w else 0
    serial += vpu if plan.acc_slots == 1 else 0
    serial += dma_out if plan.out_slots == 1 else 0
    # The instruction fetch shares the external bus with the DMA (it uses the cycles in which
    # the DMA is idle, hw/sequencer.py): its words count against the bus.
    fetch = instructions * INSTR_BYTES // config.bus_bytes
    # Fill and drain: the first tile's input and first weight block before the array starts,
    # the last block's ACT after it stops.
    tail = (dma_in - w_dma) // max(tiles * in_loads, 1) + first_piece + vpu // max(tiles * plan.cbo, 1)
    cycles = max(serial, dma_in + dma_out + fetch, vpu) + tail
    return {"cycles": cycles, "instructions": instructions, "mxu": mxu, "vpu": vpu,
            "dma": dma_in + dma_out}


