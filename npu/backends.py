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

# Watchdog (MAX_CYCLES, hw/csr.py) default for `npu run` on isa and rtl: the static cycle
# estimate times WATCHDOG_FACTOR plus WATCHDOG_MARGIN cycles.  A program that runs longer
# than that is taken to be running away (a data-dependent loop that never ends); the
# margin is a few seconds of RTL simulation, the factor leaves room for loops whose trip
# count the static estimate cannot know.  --max-cycles overrides it.
WATCHDOG_FACTOR = 4
WATCHDOG_MARGIN = 1_000_000
# Issued work completes after the watchdog trips; the testbench gives up (a bug, not a
# user error) only this many cycles after twice the limit.
RTL_BACKSTOP = 10_000_000
# The static estimate walks at most this many instructions in issue order (a hostile image
# can nest LOOPs to 2^64 iterations; the walk must end quickly too).
ESTIMATE_WALK = 200_000


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


def load_inputs(path, model: Model) -> dict[str, np.ndarray]:
    """The arrays of IN.npz ``path`` (read by tosa_ir.safe_io), bound to ``model``'s inputs."""
    from tosa_ir.safe_io import load_npz

    return bind_inputs(load_npz(path, "inputs"), model.input_names, str(path))


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
    if p.exists() and not p.is_dir():
        from tosa_ir.safe_io import check_regular_file

        check_regular_file(p, "the model")      # a FIFO or device would block or never end
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


def estimate_cycles(program: Program) -> int:
    """Static cycle estimate of ``program`` (forward branches followed, data-dependent ones
    not), its walk bounded by ESTIMATE_WALK instructions."""
    from sim.npu_timing import TimingModel

    return TimingModel(program.config).walk(program.instructions, ESTIMATE_WALK).total_cycles


def default_max_cycles(program: Program) -> int:
    """The watchdog's default for ``program`` (see WATCHDOG_FACTOR)."""
    return WATCHDOG_FACTOR * estimate_cycles(program) + WATCHDOG_MARGIN


def run(model: Model, inputs: dict[str, np.ndarray], backend: str, config: NpuConfig,
        waves: str | None = None, max_cycles: int | None = None) -> tuple[dict[str, np.ndarray], dict | None]:
    """Run ``model`` on ``backend``; returns (outputs by name, cycle statistics or None).

    On isa and rtl the watchdog stops the NPU after ``max_cycles`` (default
    :func:`default_max_cycles`) with WATCHDOG: a runaway program ends in an error, not a hang.
    """
    if backend == "ref":
        if model.graph is None:
            raise InvalidInput(f"{model.source}: the ref backend runs models, not compiled programs; "
                               "give it the model file")
        from sim.reference import run_graph

        return run_graph(model.graph, inputs), None
    program = check_program(compile_model(model, config), config, inputs, model.source)
    expected = estimate_cycles(program)
    limit = max_cycles if max_cycles is not None else WATCHDOG_FACTOR * expected + WATCHDOG_MARGIN
    if backend == "isa":
        from sim.isa.sim import IsaSim

        result = IsaSim(program.config).run(program, program.memory_image(inputs), max_cycles=limit)
        busy, stop_pc = dict(result.busy), result.error_pc
    elif backend == "rtl":
        from hw.harness.simulation import run_program

        # The simulator's own log (with progress lines) is shown only for long runs.
        progress = RTL_PROGRESS_CYCLES if min(expected, limit) > 5 * RTL_PROGRESS_CYCLES else 0
        result = run_program(program, bytes(program.memory_image(inputs)), waves=bool(waves),
                             progress=progress, watchdog=limit,
                             max_cycles=2 * limit + RTL_BACKSTOP)   # the testbench's own give-up
        busy, stop_pc = dict(result.unit_busy_cycles), result.stop_pc
        if waves:
            shutil.copyfile(result.waves, waves)
    else:
        raise ValueError(f"unknown backend {backend!r}")
    if result.error_code:
        raise InvalidInput(f"{model.source}: the NPU stopped with error {result.error_code.name} "
                           f"at instruction {stop_pc}")
    return program.read_outputs(result.memory), {"cycles": result.cycles, "busy": busy}


def check_program(program: Program, config: NpuConfig | None, inputs: dict[str, np.ndarray],
                  source: str) -> Program:
    """``program`` if it runs on ``config`` and ``inputs`` match its input bindings (shapes,
    dtypes); otherwise InvalidInput naming the mismatch."""
    try:
        program.check_runs_on(config or program.config, source)
    except ProgramFormatError as e:
        raise InvalidInput(str(e)) from None
    _check_inputs(program, inputs, source)
    return program


def _check_inputs(program: Program, inputs: dict[str, np.ndarray], source: str) -> None:
    for b in program.inputs:
        array = np.asarray(inputs[b.name])
        if tuple(array.shape) != tuple(b.shape):
            raise InvalidInput(f"{source}: input {b.name!r} has shape {tuple(array.shape)}, "
                               f"the model expects {tuple(b.shape)}")
        if array.dtype != np.dtype(b.dtype):
            raise InvalidInput(f"{source}: input {b.name!r} has type {array.dtype}, the model expects {b.dtype}")
