"""Single-operator .tflite fixtures (tools/make_tflite_op_fixtures.py: flatbuffers written
from the frontend's schema tables, expected outputs from TFLite's reference kernels):
lowered by the Circle frontend, they equal TFLite bit for bit on the reference interpreter
and on the NPU (ISA simulator).  MAXIMUM/MINIMUM version 2 were refused ("operator
MAXIMUM (version 2) is not supported"), and so were 16x8 TRANSPOSE_CONV and int16
BATCH_MATMUL; batch_matmul_int16's second product has a multiplier >= 0x7FFF0000, where
TFLite's 64-bit MultiplyByQuantizedMultiplier saturates its 16-bit multiplier at 0x7FFF
(the lowering rounded it to 32768 before: 8 of 210 values 1 off)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from npu_check import compare_on_isa  # noqa: E402

from compiler.driver import compile_graph  # noqa: E402
from compiler.frontends.circle.load import load_circle  # noqa: E402
from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from sim.reference import run_graph  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "tflite" / "ops"
MODELS = sorted(p.stem for p in FIXTURES.glob("*.tflite"))
# Too many MATMUL tiles for the small configuration's instruction memory.
DEFAULT_ONLY = ("batch_matmul",)


@pytest.mark.parametrize("name", MODELS)
def test_matches_tflite_reference_kernels(name):
    graph = load_circle(FIXTURES / f"{name}.tflite")
    data = np.load(FIXTURES / f"{name}.npz")
    main = graph.main
    samples = data["input_0"].shape[0]
    feeds = [{n: data[f"input_{i}"][s] for i, n in enumerate(main.inputs)} for s in range(samples)]
    for s, inputs in enumerate(feeds):
        ours = run_graph(graph, inputs)
        for i, out in enumerate(main.outputs):
            np.testing.assert_array_equal(ours[out].reshape(data[f"ref_{i}"][s].shape), data[f"ref_{i}"][s],
                                          err_msg=f"{name} output {i} sample {s}")
    for config in (DEFAULT_CONFIG,) if name in DEFAULT_ONLY else (SMALL_CONFIG, DEFAULT_CONFIG):
        program = compile_graph(graph, config)
        for inputs in feeds:
            compare_on_isa(program, graph, inputs, config)


def test_fixture_writer_is_reproducible():
    """The committed .tflite is what the writer makes today (the oracle's outputs were
    recorded for exactly these bytes)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from tool_modules import load_tool

    tool = load_tool("make_tflite_op_fixtures")
    for name, make in tool.MODELS.items():
        assert (FIXTURES / f"{name}.tflite").read_bytes() == make(np.random.default_rng(1234)), name
