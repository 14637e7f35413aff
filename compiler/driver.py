"""The compiler driver: TOSA graph -> NPU program image.

A short list of stages; every layer goes through its kind (compiler/core/kind.py ``Kind``,
listed in compiler/kinds/registry.py), so no stage here knows a layer type:

    prepare    compiler/graph/             variables and COND_IF prepared, ERROR_IFs checked
    select     compiler/dataflow.py        Graph -> layers (the kinds' selection), tensors as
                                           views of root buffers, I/O bindings
    plan       kind.candidates             kinds that choose (convolutions: tilings); the driver
                                           picks one per layer so the program fits IMEM
    constants  kind.constants              weights, parameters, tables, fills by name
    memory     program/memplan.py          external addresses of everything
    lower      kind.lower / kind.emit      instructions with footprints
    schedule   program/schedule.py         order for overlap, wait masks
    loops      program/loops.py            repeated runs -> LOOPs
    image      program/builder.py          -> isa.program.Program

Graphs with data-dependent control flow are compiled in pieces and linked
(compiler/link/control.py), which calls back :func:`compile_graph` for each piece.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from isa.config import DEFAULT_CONFIG, NpuConfig
from isa.program import Program
from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, Unsupported

from compiler.core.kind import Lowering
from compiler.core.ops import Op
from compiler.dataflow import Dataflow, build_dataflow
from compiler.frontends import load_graph
from compiler.graph.control import CONTROL_OPS, inline_control_flow
from compiler.graph.constant_fold import fold_constants
from compiler.graph.validate import check_graph, check_level_ranks, check_reshapes, trusts_declared_shapes
from compiler.kinds.conv.tap_packing import pack_taps
from compiler.kinds.elementwise.fusion import fuse_elementwise
from compiler.kinds.registry import kind_of
from compiler.kinds.variables.layer import check_block as check_variable_blocks
from compiler.link.control import compile_linked, needs_linking
from compiler.program.loops import compress_loops
from compiler.program.memplan import ExtPlan, plan_memory
from compiler.program.schedule import Scheduled, schedule
from compiler.program.builder import build_program


# Straight-line programs longer than this are not searched for loops (see run_pipeline).
LOOP_SEARCH_LIMIT = 16384


class InstructionMemoryFull(Unsupported):
    """The program does not fit the instruction memory (``needed`` instructions).  No longer
    raised: instructions are fetched from external memory, programs of any length run."""

    def __init__(self, message: str, needed: int):
        super().__init__(message)
        self.needed = needed


@dataclass
class Compilation:
    """Everything the passes produced, for reports (compiler/estimate/layers.py) and tests.
    ``plans[i]`` is the plan of ``layers[i]``: a ConvPlan or its kind's Plan (compiler/core/plan.py)."""

    graph: Graph
    config: NpuConfig
    flow: Dataflow
    layers: list
    plans: list
    ext: ExtPlan
    scheduled: Scheduled          # straight-line, in issue order
    program: Program
    program_ops: list = field(default_factory=list)   # the program's instructions (LOOPs included)


def compile_graph(graph: Graph, config: NpuConfig = DEFAULT_CONFIG, loops: bool = True) -> Program:
    """Compile ``graph`` for ``config``.

    Raises
    ------
    tosa_ir.errors.Unsupported
        An operator, type or shape the compiler does not handle, or a program that does not
        fit the NPU (instruction memory, external memory).
    tosa_ir.errors.InvalidInput
        An illegal graph.
    """
    graph.check_structure()             # recursion into a running block: illegal, never inlined
    check_level_ranks(graph)
    check_reshapes(graph)               # views and copies take the declared shape on trust
    graph = fold_constants(graph)   # weights behind constant-foldable operators become constants
    if needs_linking(graph):        # WHILE_LOOP, big COND_IF: pieces linked with BRANCHes
        check_variable_blocks(graph, linked=True)
        return compile_linked(graph, config, loops, compile_graph)
    return run_pipeline(graph, config, loops).program


def compile_file(path, config: NpuConfig = DEFAULT_CONFIG) -> Program:
    return compile_graph(load_graph(Path(path)), config)


def run_pipeline(graph: Graph, config: NpuConfig = DEFAULT_CONFIG, loops: bool = True) -> Compilation:
    """Run every pass.  ``loops=False`` emits straight-line code (no LOOP instruction)."""
    # Graph legality (graph/validate.py): the conv, pool and movement passes check their own
    # operators; for the others, and before refusing a graph, the spec's ERROR_IFs are
    # evaluated so an illegal graph is reported as illegal, not as unsupported.
    check_level_ranks(graph)
    check_reshapes(graph)
    graph = fold_constants(graph)   # idempotent: a graph folded by compile_graph is returned as is
    checked = trusts_declared_shapes(graph)
    if checked:     # RESIZE's lowering sizes its gathers and weights by the declared output
        check_graph(graph)
    try:
        check_variable_blocks(graph)     # variables in control-flow blocks: Unsupported
        flow = build_dataflow(inline_control_flow(graph), config.bus_bytes, config)
    except InvalidInput:
        raise
    except Exception:
        # Unsupported, or a pass tripping over a malformed operator: an illegal graph is
        # reported as illegal; a legal one re-raises (a compiler bug stays visible).
        check_graph(graph)
        raise
    if not checked and (any(kind_of(layer).vector_unit for layer in flow.layers) or
                        any(op.op in CONTROL_OPS for op in graph.main.operators)):
        check_graph(graph)
    layers = pack_taps(flow, config).layers      # few-channel strided convs: taps into lanes
    layers = fuse_elementwise(flow).layers       # elementwise chains: one layer, no round trips
    kinds = [kind_of(layer) for layer in layers]  # compiler/kinds/registry.py
    # Kinds that choose among plans (convolutions: tilings); the rest lower in one way.
    convs = [i for i, kind in enumerate(kinds) if kind.candidates is not None]
    candidates = [kinds[i].candidates(layers[i], config, loops) for i in convs]

    constants: dict[str, bytes] = {}
    for i in convs:
        constants.update(kinds[i].constants(layers[i], config))
    for layer, kind in zip(layers, kinds):
        if kind.candidates is None and kind.constants is not None:
            constants.update(kind.constants(layer, config))
    ext = plan_memory(flow, constants, config)

    plans: list = [None] * len(layers)
    ctx = Lowering(flow, ext, config, loops)
    for i, (layer, kind) in enumerate(zip(layers, kinds)):
        if kind.lower is not None:
            plans[i] = kind.lower(layer, ctx, i)

    # Instructions are fetched from external memory while the program runs (hw/sequencer.py):
    # a program of any length runs, so every layer takes its fastest plan.  LOOPs still
    # shrink the program (less instruction fetch on the bus).  A straight-line program too
    # long for the loop search, or whose loops would not fit in the instruction buffer (a
    # LOOP body must: isa/instructions.py), runs straight.
    for i, cands in zip(convs, candidates):
        plans[i] = cands[0]
    ops: list[Op] = []
    for i, plan in enumerate(plans):
        ops += kinds[i].emit(plan, ext, config, i) if kinds[i].emit is not None else plan.ops
    scheduled = schedule(ops)
    program_ops = scheduled.ops
    if loops and len(scheduled.ops) <= LOOP_SEARCH_LIMIT:
        looped = compress_loops(scheduled.ops, config)
        if all(op.instr.name != "LOOP" or op.instr.values["body"] < config.imem_rows for op in looped):
            program_ops = looped

    info = {
        "source": graph.source,
        "ops": [text for layer in layers for text in layer.ops],
        "layers": [{"name": layer.name, "ops": layer.ops, "plan": plan.describe(), "macs": layer.macs}
                   for layer, plan in zip(layers, plans)],
        "macs": sum(layer.macs for layer in layers),   # what the graph asks for, not padding
    }
    program = build_program(scheduled, ext, config, info, program_ops)
    return Compilation(graph, config, flow, layers, plans, ext, scheduled, program, program_ops)

