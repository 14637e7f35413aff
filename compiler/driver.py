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
from compiler.graph.validate import check_graph
from compiler.kinds.conv.plan import ConvPlan
from compiler.kinds.conv.tap_packing import pack_taps
from compiler.kinds.conv.tiling import choose_plans
from compiler.kinds.registry import kind_of
from compiler.kinds.variables.layer import check_block as check_variable_blocks
from compiler.link.control import compile_linked, needs_linking
from compiler.program.loops import compress_loops
from compiler.program.memplan import ExtPlan, plan_memory
from compiler.program.schedule import Scheduled, schedule
from compiler.program.builder import build_program


# Straight-line programs longer than this are not searched for loops (see run_pipeline).
LOOP_SEARCH_LIMIT = 16384


def _instructions(plan) -> int:
    """Straight-line instructions of a layer's plan (a conv's estimate, else its ops)."""
    if plan is None:
        return 0
    return plan.estimate["instructions"] if isinstance(plan, ConvPlan) else len(getattr(plan, "ops", ()))


class InstructionMemoryFull(Unsupported):
    """The program does not fit the instruction memory (``needed`` instructions)."""

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
    try:
        check_variable_blocks(graph)     # variables in control-flow blocks: Unsupported
        flow = build_dataflow(inline_control_flow(graph), config.bus_bytes)
    except InvalidInput:
        raise
    except Exception:
        # Unsupported, or a pass tripping over a malformed operator: an illegal graph is
        # reported as illegal; a legal one re-raises (a compiler bug stays visible).
        check_graph(graph)
        raise
    if any(kind_of(layer).vector_unit for layer in flow.layers) or \
            any(op.op in CONTROL_OPS for op in graph.main.operators):
        check_graph(graph)
    layers = pack_taps(flow, config).layers      # few-channel strided convs: taps into lanes
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
    copies = sum(len(plan.ops) for plan in plans if plan is not None)

    # With loops, try the fastest plans first: looped, they usually fit.  Else (or when they
    # do not fit) step layers down to plans with fewer instructions (straight-line counts).
    attempts = [[cands[0] for cands in candidates]] if loops else []
    fitted = choose_plans(candidates, config, reserved=copies)
    if not attempts or any(a is not b for a, b in zip(fitted, attempts[0])):
        attempts.append(fitted)
    for n, attempt in enumerate(attempts):
        for i, plan in zip(convs, attempt):
            plans[i] = plan
        last = n == len(attempts) - 1
        # Refuse hopeless straight-line programs before lowering them (the estimate counts
        # all but rare padding fills).
        estimated = 1 + copies + sum(plans[i].estimate["instructions"] for i in convs)
        if not loops and estimated > 2 * config.imem_rows:
            raise imem_error(estimated, False, layers, plans, candidates, convs, config)
        if loops and estimated > LOOP_SEARCH_LIMIT:
            # The loop search is superlinear in the program's length: beyond this, layers
            # must emit their loops directly (not done yet for such layers).
            if last:
                raise InstructionMemoryFull(
                    f"the program needs about {estimated} straight-line instructions, more than the "
                    f"compiler's loop compression takes ({LOOP_SEARCH_LIMIT}); the NPU's instruction memory "
                    f"holds {config.imem_rows} (largest layers: "
                    + ", ".join(f"{layers[i].where()} {_instructions(plans[i])}"
                                for i in sorted(range(len(plans)), key=lambda i: -_instructions(plans[i]))[:3])
                    + ")", estimated)
            continue
        ops: list[Op] = []
        for i, plan in enumerate(plans):
            ops += kinds[i].emit(plan, ext, config, i) if kinds[i].emit is not None else plan.ops
        if not loops and len(ops) + 1 > config.imem_rows:
            raise imem_error(len(ops) + 1, True, layers, plans, candidates, convs, config)
        scheduled = schedule(ops)
        program_ops = compress_loops(scheduled.ops, config) if loops else scheduled.ops
        if len(program_ops) <= config.imem_rows:
            break
        if last:
            raise imem_error(len(program_ops), True, layers, plans, candidates, convs, config)

    info = {
        "source": graph.source,
        "ops": [text for layer in layers for text in layer.ops],
        "layers": [{"name": layer.name, "ops": layer.ops, "plan": plan.describe(), "macs": layer.macs}
                   for layer, plan in zip(layers, plans)],
        "macs": sum(layer.macs for layer in layers),   # what the graph asks for, not padding
    }
    program = build_program(scheduled, ext, config, info, program_ops)
    return Compilation(graph, config, flow, layers, plans, ext, scheduled, program, program_ops)


def imem_error(count: int, exact: bool, layers: list, plans: list, candidates: list[list[ConvPlan]],
               convs: list[int], config: NpuConfig) -> InstructionMemoryFull:
    """The instruction memory overflow, naming the layers that need the most."""
    fewest = {layers[i].where(): cands[-1].estimate["instructions"] for i, cands in zip(convs, candidates)}
    fewest.update({plan.layer.where(): len(plan.ops) for plan in plans if not isinstance(plan, ConvPlan)})
    top = sorted(fewest.items(), key=lambda item: -item[1])[:3]
    big = [name for name, n in fewest.items() if n + 1 > config.imem_rows]
    why = (f"{', '.join(big)} alone need{'s' if len(big) == 1 else ''} more" if big
           else "the layers need more together")
    return InstructionMemoryFull(
        f"the program needs {'' if exact else 'about '}{count} instructions; the NPU's instruction memory "
        f"holds {config.imem_rows} (fewest per layer: {', '.join(f'{name} {n}' for name, n in top)}; {why}: "
        f"even with LOOPs)", count)
