"""Loading models and running them on the three backends (ref, isa, rtl).

A *model* is either a graph (any supported model file, lowered to the TOSA IR) or a compiled
program image.  The reference backend needs the graph; the ISA simulator and the RTL need a
program and compile the graph first when given one.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isa.config import NpuConfig
from isa.program import Program, ProgramFormatError, is_program_file
from tosa_ir import Graph
from tosa_ir.errors import InvalidInput


# The RTL backend logs its progress every this many simulated cycles (long runs only).
RTL_PROGRESS_CYCLES = 2_000_000


@dataclass
class Model:
    source: str
    graph: Graph | None = None
    program: Program | None = None
    quantized: object | None = None   # compiler.graph.quantize.QuantizedModel for float models

    @property
    def input_names(self) -> list[str]:
        if self.graph is not None:
            return list(self.graph.main.inputs)
        return [b.name for b in self.program.inputs]


def bind_inputs(given: dict[str, np.ndarray], expected: list[str], source: str) -> dict[str, np.ndarray]:
    """Match IN.npz keys to input names; a single array binds to a single input whatever its key."""
    if len(expected) == 1 and len(given) == 1:
        return {expected[0]: next(iter(given.values()))}
    missing = [n for n in expected if n not in given]
    if missing:
        raise InvalidInput(f"{source}: missing input(s) {', '.join(missing)}; the model's inputs are "
                           f"{', '.join(expected)}")
    return {n: given[n] for n in expected}


def load_model(path: str, calibrate: str | None = None) -> Model:
    """Read a model file or program image, detecting the format from the file.

    A float model is quantized to int8 with the calibration set ``calibrate`` (see
    npu/calibration.py); without one it is refused as unsupported.
    """
    p = Path(path)
    head = b""
    if p.is_file():
        try:
            with p.open("rb") as f:
                head = f.read(16)
        except OSError as e:
            raise InvalidInput(f"{path}: cannot read: {e.strerror}") from None
    if is_program_file(head):
        try:
            return Model(path, program=Program.load(p))
        except ProgramFormatError as e:
            raise InvalidInput(str(e)) from None
    from compiler.frontends import load_graph
    from npu.calibration import is_float_graph, quantize_model

    graph = load_graph(p)
    if is_float_graph(graph):
        qmodel = quantize_model(graph, calibrate, path)
        return Model(path, graph=qmodel.graph, quantized=qmodel)
    return Model(path, graph=graph)


def compile_model(model: Model, config: NpuConfig) -> Program:
    if model.program is not None:
        return model.program
    from compiler.driver import compile_graph

    return compile_graph(model.graph, config)


def run(model: Model, inputs: dict[str, np.ndarray], backend: str, config: NpuConfig,
        waves: str | None = None) -> tuple[dict[str, np.ndarray], dict | None]:
    """Run ``model`` on ``backend``; returns (outputs by name, cycle statistics or None)."""
    if backend == "ref":
        if model.graph is None:
            raise InvalidInput(f"{model.source}: the ref backend runs models, not compiled programs; "
                               "give it the model file")
        from sim.reference import run_graph

        return run_graph(model.graph, inputs), None
    program = compile_model(model, config)
    _check_inputs(program, inputs, model.source)
    if backend == "isa":
        from sim.isa.sim import IsaSim

        result = IsaSim(program.config).run(program, program.memory_image(inputs))
        busy, stop_pc = dict(result.busy), result.error_pc
    elif backend == "rtl":
        from hw.harness.simulation import run_program

        from sim.npu_timing import TimingModel

        # The simulator's own log (with progress lines) is shown only for long runs.
        expected = TimingModel(program.config).run(program.instructions).total_cycles
        progress = RTL_PROGRESS_CYCLES if expected > 5 * RTL_PROGRESS_CYCLES else 0
        result = run_program(program, bytes(program.memory_image(inputs)), waves=bool(waves),
                             progress=progress)
        busy, stop_pc = dict(result.unit_busy_cycles), result.stop_pc
        if waves:
            shutil.copyfile(result.waves, waves)
    else:
        raise ValueError(f"unknown backend {backend!r}")
    if result.error_code:
        raise InvalidInput(f"{model.source}: the NPU stopped with error {result.error_code.name} "
                           f"at instruction {stop_pc}")
    return program.read_outputs(result.memory), {"cycles": result.cycles, "busy": busy}


def _check_inputs(program: Program, inputs: dict[str, np.ndarray], source: str) -> None:
    for b in program.inputs:
        array = inputs[b.name]
        if tuple(array.shape) != tuple(b.shape):
            raise InvalidInput(f"{source}: input {b.name!r} has shape {tuple(array.shape)}, "
                               f"the model expects {tuple(b.shape)}")
        if array.dtype != np.dtype(b.dtype):
            raise InvalidInput(f"{source}: input {b.name!r} has type {array.dtype}, the model expects {b.dtype}")
