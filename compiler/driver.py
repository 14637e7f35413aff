"""The compiler driver: TOSA graph -> NPU program image.

Pipeline (one module per pass, like Arm's Vela):

    frontend (compiler/frontends)      file -> tosa_ir.Graph
    dataflow (passes/dataflow.py)      Graph -> layers (fused convs via passes/fusion.py, DMA
                                       copies), tensors as views of root buffers, I/O bindings
    tiling (passes/tiling.py)          ConvLayer -> ConvPlan (tiles, groups, ring slots)
    weights (passes/weights.py)        weights and per-channel parameters in NPU order
    memplan (passes/memplan.py)        external addresses of everything
    lowering (passes/lowering/)        plans and copies -> instructions with footprints
    schedule (passes/schedule.py)      order for overlap, wait masks
    loops (passes/loops.py)            repeated runs -> LOOPs
    program_builder.py                 -> isa.program.Program
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from isa.config import DEFAULT_CONFIG, NpuConfig
from isa.program import Program
from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, Unsupported

from compiler.graph.constant_fold import fold_constants
from compiler.ir import ConvLayer, CopyLayer
from compiler.ops import Op
from compiler.passes.dataflow import Dataflow, build_dataflow
from compiler.passes.lowering.conv2d import constant_names, lower_conv
from compiler.passes.lowering.copy import lower_copy
from compiler.passes.lowering.dma import fill_name
from compiler.passes.lowering.pool import lower_pool, pool_constants
from compiler.passes.elementwise import EltLayer
from compiler.passes.validate import check_graph, check_level_ranks
from compiler.passes.variables import check_block as check_variable_blocks
from compiler.passes.control import CONTROL_OPS, inline_control_flow
from compiler.passes.reduce import ReduceLayer
from compiler.passes.lowering.reduce import lower_reduce
from compiler.passes.moves import MoveLayer
from compiler.passes.lowering.moves import lower_moves, move_constants
from compiler.passes.lowering.elementwise import elt_constants, lower_elementwise
from compiler.passes.lowering.matmul import lower_matmul, matmul_constants
from compiler.passes.matmul import MatmulLayer
from compiler.passes.lowering.mxu_conv import lower_mxu_conv, mxu_conv_constants
from compiler.passes.mxu_conv import MxuConvLayer
from compiler.passes.loops import compress_loops
from compiler.passes.memplan import ExtPlan, plan_memory
from compiler.passes.pooling import PoolLayer
from compiler.passes.schedule import Scheduled, schedule
from compiler.passes.tap_packing import pack_taps
from compiler.passes.tiling import ConvPlan, choose_plans, plan_candidates
from compiler.passes.weights import pack_params, pack_weights
from compiler.program_builder import build_program


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
class CopyPlan:
    """A lowered copy layer (its instructions do not depend on any choice)."""

    layer: CopyLayer
    ops: list[Op]
    estimate: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"copy: {self.layer.reason} ({len(self.ops)} DMA instructions)"


@dataclass
class Compilation:
    """Everything the passes produced, for reports (compiler/estimate.py) and tests.
    ``plans[i]`` is the plan of ``layers[i]``: a ConvPlan or a CopyPlan."""

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
    from compiler.passes.control_link import compile_linked, needs_linking

    check_level_ranks(graph)
    graph = fold_constants(graph)   # weights behind constant-foldable operators become constants
    if needs_linking(graph):        # WHILE_LOOP, big COND_IF: pieces linked with BRANCHes
        check_variable_blocks(graph, linked=True)
        return compile_linked(graph, config, loops)
    return run_pipeline(graph, config, loops).program


def compile_file(path, config: NpuConfig = DEFAULT_CONFIG) -> Program:
    from compiler.frontends import load_graph

    return compile_graph(load_graph(Path(path)), config)


def run_pipeline(graph: Graph, config: NpuConfig = DEFAULT_CONFIG, loops: bool = True) -> Compilation:
    """Run every pass.  ``loops=False`` emits straight-line code (no LOOP instruction)."""
    # Graph legality (passes/validate.py): the conv, pool and movement passes check their own
    # operators; for the others, and before refusing a graph, the spec's ERROR_IFs are
    # evaluated so an illegal graph is reported as illegal, not as unsupported.
    check_level_ranks(graph)
    graph = fold_constants(graph)   # idempotent: a graph folded by compile_graph is returned as is
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
    if any(isinstance(layer, (EltLayer, ReduceLayer, MoveLayer, MatmulLayer, MxuConvLayer)) for layer in flow.layers) or \
            any(op.op in CONTROL_OPS for op in graph.main.operators):
        check_graph(graph)
    layers = pack_taps(flow, config).layers      # few-channel strided convs: taps into lanes
    convs = [i for i, layer in enumerate(layers) if isinstance(layer, ConvLayer)]
    candidates = [plan_candidates(layers[i], config, streaming=loops) for i in convs]

    constants: dict[str, bytes] = {}
    for i in convs:
        layer = layers[i]
        names = constant_names(layer.name, layer.input_zp)
        constants[names["weights"]] = pack_weights(layer, config)
        constants[names["params"]] = pack_params(layer, config)
        constants[names["fill"]] = bytes([layer.input_zp & 0xFF]) * config.bus_bytes
    for layer in layers:
        if isinstance(layer, CopyLayer) and any(layer.pad):
            constants[fill_name(layer.pad_value)] = bytes([layer.pad_value & 0xFF]) * config.bus_bytes
        if isinstance(layer, PoolLayer):
            constants.update(pool_constants(layer, config))
        if isinstance(layer, EltLayer):
            constants.update(elt_constants(layer, config))
        if isinstance(layer, MoveLayer):
            constants.update(move_constants(layer))
        if isinstance(layer, MatmulLayer):
            constants.update(matmul_constants(layer, config))
        if isinstance(layer, MxuConvLayer):
            constants.update(mxu_conv_constants(layer, config))
    ext = plan_memory(flow, constants, config)

    plans: list = [None] * len(layers)
    for i, layer in enumerate(layers):
        if isinstance(layer, CopyLayer):
            plans[i] = CopyPlan(layer, lower_copy(layer, ext, config, i))
        elif isinstance(layer, PoolLayer):
            plans[i] = lower_pool(layer, ext, config, i)
        elif isinstance(layer, EltLayer):
            plans[i] = lower_elementwise(layer, flow, ext, config, i)
        elif isinstance(layer, ReduceLayer):
            plans[i] = lower_reduce(layer, flow, ext, config, i)
        elif isinstance(layer, MoveLayer):
            plans[i] = lower_moves(layer, flow, ext, config, i)
        elif isinstance(layer, MatmulLayer):
            plans[i] = lower_matmul(layer, flow, ext, config, i)
        elif isinstance(layer, MxuConvLayer):
            plans[i] = lower_mxu_conv(layer, flow, ext, config, i, loops)
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
            ops += lower_conv(plan, ext, config, i) if isinstance(plan, ConvPlan) else plan.ops
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
