"""The compiler driver: TOSA graph -> NPU program image.

Pipeline (one module per pass, like Arm's Vela):

    frontend (compiler/frontends)      file -> tosa_ir.Graph
    fusion (passes/fusion.py)          Graph -> ConvLayers (CONV2D -> RESCALE [-> CLAMP])
    tiling (passes/tiling.py)          ConvLayer -> ConvPlan (tiles, groups, ring slots)
    weights (passes/weights.py)        weights and per-channel parameters in NPU order
    memplan (passes/memplan.py)        external addresses of everything
    lowering (passes/lowering/)        ConvPlan -> instructions with footprints
    schedule (passes/schedule.py)      order for overlap, wait masks
    program_builder.py                 -> isa.program.Program
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from isa.config import DEFAULT_CONFIG, NpuConfig
from isa.program import Program
from tosa_ir import Graph
from tosa_ir.errors import Unsupported

from compiler.ir import ConvLayer
from compiler.passes.fusion import fuse_graph
from compiler.passes.lowering.conv2d import constant_names, lower_conv
from compiler.passes.memplan import ExtPlan, plan_memory
from compiler.passes.schedule import Scheduled, schedule
from compiler.passes.tiling import ConvPlan, choose_plans, plan_candidates
from compiler.passes.weights import pack_params, pack_weights
from compiler.program_builder import build_program


@dataclass
class Compilation:
    """Everything the passes produced, for reports (compiler/estimate.py) and tests."""

    graph: Graph
    config: NpuConfig
    layers: list[ConvLayer]
    plans: list[ConvPlan]
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
    block = graph.main
    layers = fuse_graph(graph)
    plans = choose_plans([plan_candidates(layer, config) for layer in layers], config)

    constants: dict[str, bytes] = {}
    for layer in layers:
        names = constant_names(layer.name, layer.input_zp)
        constants[names["weights"]] = pack_weights(layer, config)
        constants[names["params"]] = pack_params(layer, config)
        constants[names["fill"]] = bytes([layer.input_zp & 0xFF]) * config.bus_bytes
    ext = plan_memory(block, layers, constants, config)

    # Refuse hopeless programs before lowering them (the estimate counts all but rare
    # padding fills), and exact counts before scheduling.
    estimated = 1 + sum(plan.estimate["instructions"] for plan in plans)
    if estimated > 2 * config.imem_rows:
        raise Unsupported(f"the program needs about {estimated} instructions; the NPU's instruction "
                          f"memory holds {config.imem_rows}")
    ops = []
    for index, plan in enumerate(plans):
        ops += lower_conv(plan, ext, config, index)
    if len(ops) + 1 > config.imem_rows:
        raise Unsupported(f"the program needs {len(ops) + 1} instructions; the NPU's instruction "
                          f"memory holds {config.imem_rows}")
    scheduled = schedule(ops)

    info = {
        "source": graph.source,
        "ops": [text for layer in layers for text in layer.ops],
        "layers": [{"name": layer.name, "ops": layer.ops, "plan": plan.describe(), "macs": layer.macs}
                   for layer, plan in zip(layers, plans)],
        "macs": sum(layer.macs for layer in layers),   # what the graph asks for, not padding
    }
    program = build_program(scheduled, ext, block, config, info)
    return Compilation(graph, config, layers, plans, ext, scheduled, program)
