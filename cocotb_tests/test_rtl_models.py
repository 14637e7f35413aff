"""Whole models on the RTL: compiled by the compiler, run under Verilator, compared with the
official TOSA reference model's output and with the ISA simulator (outputs and cycles)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.driver import compile_graph
from compiler.frontends import load_graph
from isa import DEFAULT_CONFIG, SMALL_CONFIG
from sim.isa.sim import IsaSim

SLICE = Path(__file__).resolve().parent.parent / "models" / "slice"


def _run_both(program, inputs, build_dir):
    from hw.harness.simulation import run_program

    memory = bytes(program.memory_image(inputs))
    rtl = run_program(program, memory, build_dir=build_dir)
    isa = IsaSim(program.config).run(program, memory)
    assert rtl.status == "DONE" and not rtl.error_code and not isa.error_code
    assert rtl.cycles == isa.cycles
    assert dict(rtl.unit_busy_cycles) == dict(isa.busy)
    # Every byte of external memory, not just the outputs.
    n = max(len(rtl.memory), len(isa.memory))
    assert bytes(rtl.memory).ljust(n, b"\0") == bytes(isa.memory).ljust(n, b"\0")
    return program.read_outputs(rtl.memory)


@pytest.mark.parametrize("config_name", ["default", "small"])
def test_slice_on_rtl_matches_official_reference(config_name, request):
    config = DEFAULT_CONFIG if config_name == "default" else SMALL_CONFIG
    build_dir = request.getfixturevalue(f"{config_name}_rtl")
    graph = load_graph(SLICE / "conv_rescale_clamp.tosa")
    inputs = dict(np.load(SLICE / "input.npz"))
    expected = np.load(SLICE / "expected.npz")      # official tosa_reference_model output
    outputs = _run_both(compile_graph(graph, config), inputs, build_dir)
    for name in expected.files:
        np.testing.assert_array_equal(outputs[name], expected[name])
