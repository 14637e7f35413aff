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
    program_builder.py                 -> isa.program.Program
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from isa.config import DEFAULT_CONFIG, NpuConfig
from isa.program import Program
from tosa_ir import Graph
from tosa_ir.errors import Unsupported

from compiler.ir import ConvLayer, CopyLayer
from compiler.ops import Op
from compiler.passes.dataflow import Dataflow, build_dataflow
from compiler.passes.lowering.conv2d import constant_names, lower_conv
from compiler.passes.lowering.copy import lower_copy
from compiler.passes.lowering.dma import fill_name
from compiler.passes.memplan import ExtPlan, plan_memory
from compiler.passes.schedule import Scheduled, schedule
from compiler.passes.tiling import ConvPlan, choose_plans, plan_candidates
from compiler.passes.weights import pack_params, pack_weights
from compiler.program_builder import build_program


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
    scheduled: Scheduled
    program: Program


def compile_graph(graph: Graph, config: NpuConfig = DEFAULT_CONFIG) -> Program:
    """Compile ``graph`` for ``config``.

    Raises
    ------
    tosa_ir.errors.Unsupported
        An operator, type or shape the compiler does not handle, or a program that does not
        fit the NPU (instruction memory, external memory).
    tosa_ir.errors.InvalidInput
        An illegal graph.
    """
    return run_pipeline(graph, config).program


def compile_file(path, config: NpuConfig = DEFAULT_CONFIG) -> Program:
    from compiler.frontends import load_graph

    return compile_graph(load_graph(Path(path)), config)


def run_pipeline(graph: Graph, config: NpuConfig = DEFAULT_CONFIG) -> Compilation:
    flow = build_dataflow(graph, config.bus_bytes)
    layers = flow.layers
    convs = [i for i, layer in enumerate(layers) if isinstance(layer, ConvLayer)]
    candidates = [plan_candidates(layers[i], config) for i in convs]

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
    ext = plan_memory(flow, constants, config)

    plans: list = [None] * len(layers)
    for i, layer in enumerate(layers):
        if isinstance(layer, CopyLayer):
            plans[i] = CopyPlan(layer, lower_copy(layer, ext, config, i))
    copies = sum(len(plan.ops) for plan in plans if plan is not None)
    for i, plan in zip(convs, choose_plans(candidates, config, reserved=copies)):
        plans[i] = plan

    # Refuse hopeless programs before lowering them (the estimate counts all but rare
    # padding fills), and exact counts before scheduling.
    estimated = 1 + copies + sum(plans[i].estimate["instructions"] for i in convs)
    if estimated > 2 * config.imem_rows:
        raise imem_error(estimated, False, layers, plans, candidates, convs, config)
    ops: list[Op] = []
    for i, plan in enumerate(plans):
        ops += plan.ops if isinstance(plan, CopyPlan) else lower_conv(plan, ext, config, i)
    if len(ops) + 1 > config.imem_rows:
        raise imem_error(len(ops) + 1, True, layers, plans, candidates, convs, config)
    scheduled = schedule(ops)

    info = {
        "source": graph.source,
        "ops": [text for layer in layers for text in layer.ops],
        "layers": [{"name": layer.name, "ops": layer.ops, "plan": plan.describe(), "macs": layer.macs}
                   for layer, plan in zip(layers, plans)],
        "macs": sum(layer.macs for layer in layers),   # what the graph asks for, not padding
    }
    program = build_program(scheduled, ext, config, info)
    return Compilation(graph, config, flow, layers, plans, ext, scheduled, program)


def imem_error(count: int, exact: bool, layers: list, plans: list, candidates: list[list[ConvPlan]],
               convs: list[int], config: NpuConfig) -> InstructionMemoryFull:
    """The instruction memory overflow, naming the layers that need the most."""
    fewest = {layers[i].where(): cands[-1].estimate["instructions"] for i, cands in zip(convs, candidates)}
    fewest.update({plan.layer.where(): len(plan.ops) for plan in plans if isinstance(plan, CopyPlan)})
    top = sorted(fewest.items(), key=lambda item: -item[1])[:3]
    big = [name for name, n in fewest.items() if n + 1 > config.imem_rows]
    why = (f"{', '.join(big)} alone need{'s' if len(big) == 1 else ''} more" if big
           else "the layers need more together")
    return InstructionMemoryFull(
        f"the program needs {'' if exact else 'about '}{count} instructions; the NPU's instruction memory "
        f"holds {config.imem_rows} (fewest per layer: {', '.join(f'{name} {n}' for name, n in top)}; {why}: "
        f"convolutions this large need the LOOP instruction, which the ISA does not have yet)", count)
