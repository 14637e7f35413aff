"""Per-layer estimate of a graph compiled as linked pieces (WHILE_LOOP, big COND_IF:
compiler/link/control.py).

The linked program is timed like any other, without data (sim/npu_timing.py
``TimingModel.run``): conditional BRANCHes fall through and only forward ALWAYS BRANCHes
jump.  So the timed path runs every WHILE_LOOP's condition and body exactly once (the exit
test falls through, the backward branch is not taken) and every branched COND_IF's
*then* side (its end-of-then branch skips the else side).  The rows are the pieces'
layers, in program order, each named after its place:

* ``pK:LAYER``: a straight-line piece between control operators;
* ``loopN.cond:LAYER`` / ``loopN.body:LAYER``: WHILE_LOOP N (labelled per iteration);
* ``ifN.then:LAYER`` / ``ifN.else:LAYER``: COND_IF N (else rows are not on the timed path:
  0 cycles);
* ``TAG:linkN``: the linker's own instructions (copies between pieces, the condition
  load, the BRANCHes), per place.

A loop's trip count usually depends on data, so the total counts one iteration of each
loop body; the notes under the table say so, with each loop's per-iteration cycles.  When
every loop's trip count is a compile-time constant (compiler/graph/trip_count.py), the program is
instead timed along its real path (``TimingModel.run_issued``: every iteration, the final
condition test, the taken branches), so the rows and the total count all iterations and
equal what the ISA simulator counts.  A row's MACs and roofline bound count each execution
of its code; rows never executed on the timed path have none.  Pieces with control flow of
their own (nested loops) are one row each, timed once through.

Every execution of a row's code (one per loop iteration) is charged as
compiler/estimate/layers.py charges a layer: from the completion of the executions before it to
its own, so the rows add up to the total.
"""
from __future__ import annotations

from isa.config import NpuConfig
from isa.instructions import BranchTest
from sim.isa.branch import check
from sim.isa.loops import LoopStack
from sim.isa.units import Trap
from sim.npu_timing import TimingModel
from tosa_ir import Graph

from compiler.driver import check_variable_blocks, compile_graph, run_pipeline
from compiler.estimate.layers import Estimate, LayerEstimate, dma_bytes, roofline_bound
from compiler.graph.trip_count import constant_trip_count
from compiler.link.control import link_traced, needs_linking

# Longest issue stream timed for loops of constant trip count (else: one iteration shown).
MAX_PATH = 2_000_000


class _Unit:
    """A row in the making: its estimate and how many times its code ran on the timed path."""

    def __init__(self, est: LayerEstimate):
        self.est, self.runs = est, 0


def _places(trace, n: int, trips: list) -> list[tuple[str, str]]:
    """Per linked instruction, (tag, label) of the innermost loop/branch part holding it
    ("" outside any)."""
    places = [("", "")] * n
    regions = []
    for k, loop in enumerate(trace.loops):
        times = "per iteration" if trips[k] is None else \
            f"{trips[k]} iteration{'' if trips[k] == 1 else 's'} (constant trip count)"
        regions.append((loop.end - loop.top, loop.top, loop.end, f"loop{k}", f"WHILE_LOOP, {times}"))
    for k, (where, then_start, else_start, end) in enumerate(trace.branches):
        regions.append((else_start - then_start, then_start, else_start, f"if{k}.then", "COND_IF then side"))
        regions.append((end - else_start, else_start, end, f"if{k}.else",
                        "COND_IF else side, not on the timed path"))
    for _, lo, hi, tag, label in sorted(regions, reverse=True):      # outer first, inner overwrite
        for pc in range(lo, hi):
            places[pc] = (tag, label)
    return places


def _path(instrs, config: NpuConfig, decide) -> tuple[list[int], list[int]] | None:
    """The program indices in issue order (LOOPs unrolled as sim/npu_timing.py does) and
    the positions of the taken BRANCHes, ``decide(pc)`` choosing a BRANCH's outcome (None:
    the data-free rule, forward ALWAYS only); None if longer than MAX_PATH or illegal."""
    loops, pc, pcs, taken = LoopStack(len(instrs), config=config), 0, [], []
    while pc < len(instrs):
        if len(pcs) > MAX_PATH:
            return None
        instr = instrs[pc]
        v = instr.values
        pcs.append(pc)
        if instr.name == "HALT":
            break
        if instr.name == "LOOP":
            if loops.illegal(pc, v) is not None:
                return None
            pc = loops.enter(pc, v)
        elif instr.name == "BRANCH":
            try:
                check(pc, v, len(instrs), loops.active, config)
            except Trap:
                return None
            jump = decide(pc)
            if jump is None:
                jump = v["test"] == BranchTest.ALWAYS and v["target"] > pc
            if jump:
                taken.append(len(pcs) - 1)
            pc = v["target"] if jump else pc + 1
        else:
            pc = loops.advance(pc)
    return pcs, taken


def _constant_path(instrs, trace, trips: list, config: NpuConfig):
    """:func:`_path` with every loop of known trip count run that many times (its exit
    BRANCH taken at the test after the last iteration, its backward BRANCH taken)."""
    exits = {loop.exit: k for k, loop in enumerate(trace.loops) if trips[k] is not None}
    backs = {loop.end - 1 for k, loop in enumerate(trace.loops) if trips[k] is not None}
    tests = dict.fromkeys(exits, 0)

    def decide(pc: int):
        if pc in exits:
            tests[pc] += 1
            return tests[pc] > trips[exits[pc]]
        return True if pc in backs else None
    return _path(instrs, config, decide)


def _layer(comp, local: int) -> int:
    """The layer of a piece's instruction ``local`` (its final barrier: the last layer)."""
    local = min(local, len(comp.program_ops) - 1)
    if comp.program_ops[local].instr.name == "HALT" and comp.layers:
        return len(comp.layers) - 1
    return comp.program_ops[local].layer


def _layer_estimate(comp, local: int, prefix: str, note: str, config: NpuConfig) -> LayerEstimate:
    index = _layer(comp, local)
    layer, plan = comp.layers[index], comp.plans[index]
    mac_bound, bus_bound = roofline_bound(layer, comp.graph, config)
    return LayerEstimate(f"{prefix}:{layer.name}", getattr(layer, "ops", []), f"{note}; {plan.describe()}",
                         layer.macs, 0, mac_bound=mac_bound, bus_bound=bus_bound)


def estimate_linked(graph: Graph, config: NpuConfig) -> Estimate:
    """The estimate of a graph that compiler.driver.compile_graph links (see the module
    docstring).  The program is the one ``npu compile`` writes."""
    compilations = {}

    def compile_piece(sub: Graph, cfg: NpuConfig, loops: bool):
        if needs_linking(sub):                 # nested control flow: one row
            return compile_graph(sub, cfg, loops)
        comp = run_pipeline(sub, cfg, loops)   # what compile_graph does, keeping the layers
        compilations[id(comp.program)] = comp
        return comp.program

    check_variable_blocks(graph, linked=True)
    program, trace = link_traced(graph, config, True, compile_piece)
    instrs = program.instructions
    trips = [constant_trip_count(graph, loop.op) for loop in trace.loops]
    places = _places(trace, len(instrs), trips)

    # Which row each linked instruction belongs to, in program order.
    units: dict[tuple, _Unit] = {}
    owner: list = [None] * len(instrs)
    order: list[_Unit] = []

    def unit(key, make) -> _Unit:
        if key not in units:
            units[key] = _Unit(make())
            order.append(units[key])
        return units[key]

    links: dict[str, int] = {}          # link rows so far, per place
    piece_at = {}
    for k, (where, prog, first, end) in enumerate(trace.pieces):
        for pc in range(first, end):
            piece_at[pc] = (k, where, prog, first, end)
    for pc in range(len(instrs)):
        tag, label = places[pc]
        if pc in piece_at:
            k, where, prog, first, end = piece_at[pc]
            part = where.rsplit(", ", 1)[-1] if tag.startswith("loop") else ""
            part = {"condition": "cond"}.get(part, part)
            prefix = f"{tag}.{part}" if part else (tag or f"p{k}")
            note = label.replace("WHILE_LOOP", f"WHILE_LOOP {where.rsplit(', ', 1)[-1]}") if part else \
                label or "straight-line piece"
            comp = compilations.get(id(prog))
            if comp is None:               # nested control flow
                owner[pc] = unit(("piece", k), lambda: LayerEstimate(
                    f"{prefix}:nested", ["nested control flow"], f"{note}; {where}: nested loops timed once", 0, 0))
            else:
                owner[pc] = unit(("layer", k, _layer(comp, pc - first)),
                                 lambda: _layer_estimate(comp, pc - first, prefix, note, config))
        else:
            # Linker instructions: one row per run of them in the same place.
            prev = owner[pc - 1] if pc else None
            if prev is not None and ":link" in prev.est.name and places[pc - 1] == places[pc]:
                owner[pc] = prev
            else:
                links[tag] = links.get(tag, 0) + 1
                name = f"{tag or 'main'}:link{links[tag]}"
                owner[pc] = unit(("link", pc), lambda: LayerEstimate(
                    name, [], f"{label + '; ' if label else ''}linker: copies between pieces, condition, branches",
                    0, 0))
        if instrs[pc].name != "HALT":
            owner[pc].est.instructions[instrs[pc].name] += 1
    for u in order:
        if not u.est.ops:                       # link rows: the instructions they are made of
            u.est.ops = list(u.est.instructions) or ["HALT"]

    # Time the run: along the real path when every loop's trip count is known, else the
    # data-free path (each loop once, COND_IFs' then side).
    timing, path = TimingModel(config), None
    if trips and all(t is not None for t in trips):
        path = _constant_path(instrs, trace, trips, config)
    if path is not None:
        pcs, taken = path
        result = timing.run_issued([instrs[pc] for pc in pcs], prog_len=len(instrs), taken=taken,
                                   pcs=pcs)
    else:
        result = timing.run(instrs)
        pcs = result.pcs
    total = int(result.total_cycles)

    # Each execution of a row's code (one per iteration of the loop it is in) is charged,
    # as estimate_compilation charges a layer, from the completion of the executions
    # before it to its own, so the rows add up to the total.
    loop_of = [None] * len(instrs)
    for k, loop in enumerate(trace.loops):
        loop_of[loop.top:loop.end] = [k] * (loop.end - loop.top)
    iteration = [0] * len(trace.loops)
    spans: dict[tuple, list] = {}           # (row, iteration) -> [start, end], first-run order
    for pc, t in zip(pcs, result.per_instruction):
        u, instr = owner[pc], instrs[pc]
        k = loop_of[pc]
        if k is not None and pc == trace.loops[k].top:
            iteration[k] += 1
        start, end = int(t.issue), int(t.end) + 1
        if instr.name == "DMA_LOAD":
            u.est.bytes_read += dma_bytes(instr.values, config)
        elif instr.name == "DMA_STORE":
            u.est.bytes_written += dma_bytes(instr.values, config)
        key = (id(u), iteration[k] if k is not None else 0)
        if key not in spans:
            spans[key] = [u, start, end]
            u.runs += 1
        span = spans[key]
        span[1], span[2] = min(span[1], start), max(span[2], end)
    charged: dict[int, int] = {}
    done = 0
    for u, _, end in spans.values():
        end = max(end, done)
        charged[id(u)] = charged.get(id(u), 0) + end - done
        done = end
    if spans:
        last = list(spans.values())[-1][0]
        charged[id(last)] += max(total - done, 0)     # the HALT's cycles: rows add up to the total
    at = 0
    for u in order:
        est = u.est
        est.start, est.end = at, at + charged.get(id(u), 0)
        at = est.end
        # MACs and the roofline bound: once per execution (none off the timed path).
        est.macs *= u.runs
        est.mac_bound *= u.runs
        est.bus_bound *= u.runs
    layers = [u.est for u in order]

    notes = []
    for k, loop in enumerate(trace.loops):
        rows = [u.est for u in order if u.est.name.startswith((f"loop{k}.", f"loop{k}:"))]
        cycles, macs = sum(r.cycles for r in rows), sum(r.macs for r in rows)
        if trips[k] is not None and path is not None:
            notes.append(f"{loop.where}: loop{k} runs {trips[k]} times (a compile-time constant): its rows count "
                         f"all {trips[k]} iterations and {trips[k] + 1} condition tests ({cycles:,} cycles, "
                         f"{macs:,} MACs)")
            continue
        known = "" if trips[k] is None else f"its trip count {trips[k]} is constant but not timed here; "
        notes.append(f"{loop.where}: loop{k} rows are ONE iteration ({cycles:,} cycles, {macs:,} MACs); "
                     f"{known or 'the trip count depends on the data, so '}the total counts one iteration "
                     f"(and not the final, failing condition test)")
    for k, (where, *_rest) in enumerate(trace.branches):
        notes.append(f"{where}: the total follows the then side; if{k}.else rows are not timed")
    return Estimate(layers, total, "npu_timing", config, len(instrs), notes)
