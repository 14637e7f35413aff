"""Control flow compiled with BRANCH (compiler/link/control.py) on the RTL: WHILE_LOOP
conformance tests (trip counts from graph inputs; ``npu conformance --backend rtl``) must
pass bit-exactly against the official reference model's recorded results; a linked COND_IF
and nested WHILE_LOOPs on the 4x4 NPU must match the ISA simulator byte for byte and cycle
for cycle, and the reference interpreter's outputs."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG
from npu import conformance

if importlib.util.find_spec("tosa_reference_model") is None:  # pragma: no cover
    pytest.skip("tosa-tools (a test extra) is not installed", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from tool_modules import conformance_corpus  # noqa: E402

CHOSEN = ("while_loop/while_loop_0_i8_iter4", "while_loop/while_loop_60_i16_iter4",
          "while_loop/while_loop_7x26_i32_iter1")


def test_while_loops_on_the_rtl(default_rtl):
    corpus = conformance_corpus()
    tests = [(name, corpus / name) for name in CHOSEN if (corpus / name).is_dir()]
    assert len(tests) == len(CHOSEN)
    results = conformance.run_tests(tests, "rtl", config=DEFAULT_CONFIG, progress=False)
    bad = [f"{r.name}: {r.verdict}: {r.reason}" for r in results if r.verdict != conformance.PASSED]
    assert not bad, "\n".join(bad)


def _lockstep_graph(build_dir, config, graph, inputs):
    """Compile ``graph``; RTL and ISA simulator must agree on every byte and cycle, and the
    outputs must be the reference interpreter's."""
    from compiler.driver import compile_graph
    from hw.harness.simulation import run_program
    from sim.isa.sim import IsaSim
    from sim.reference import run_graph

    from cocotb_tests.rtl_harness import assert_memory_equal

    program = compile_graph(graph, config)
    image = bytes(program.memory_image(inputs))
    rtl = run_program(program, image, build_dir=build_dir)
    ref = IsaSim(config).run(program, image)
    assert ref.ok and rtl.error_code == ref.error_code and rtl.irq
    assert (rtl.cycles, rtl.unit_busy_cycles) == (ref.cycles, ref.busy)
    assert_memory_equal(rtl.memory, bytes(ref.memory))
    got = program.read_outputs(rtl.memory)
    for name, want in run_graph(graph, inputs).items():
        assert np.array_equal(got[name].astype(np.int64), want.astype(np.int64)), name
    return program


@pytest.mark.parametrize("cond", [True, False])
def test_linked_cond_if_on_the_rtl(small_rtl, cond):
    from test_compiler_control_flow import big_cond_if_graph

    rng = np.random.default_rng(5)
    shape = (40, 60)
    inputs = {"a": rng.integers(-1000, 1000, shape).astype(np.int32),
              "b": rng.integers(-1000, 1000, shape).astype(np.int32), "c": np.array([cond])}
    program = _lockstep_graph(small_rtl, SMALL_CONFIG, big_cond_if_graph(shape), inputs)
    assert sum(i.name == "BRANCH" for i in program.instructions) == 2


def test_nested_while_loops_on_the_rtl(small_rtl):
    from test_compiler_control_flow import nested_graph

    inputs = {"i": np.array([2], np.int32), "k": np.array([3], np.int32), "x": np.array([5, -3, 100], np.int32)}
    _lockstep_graph(small_rtl, SMALL_CONFIG, nested_graph(), inputs)
