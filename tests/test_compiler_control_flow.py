"""Compiler: WHILE_LOOP and COND_IF lowered with BRANCH (compiler/link/control.py),
run on the ISA simulator (hazard checker on) and compared bit-exactly with the reference
interpreter (sim.reference), trip counts coming from the graph inputs."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import while_loop_graph  # noqa: E402
from npu_check import compare_on_isa  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from isa.instructions import ErrorCode  # noqa: E402
from sim.isa.sim import IsaSim  # noqa: E402
from sim.reference.interpreter import Interpreter  # noqa: E402
from tosa_ir import Block, Graph, Operator, Region, Tensor, Unsupported  # noqa: E402

from compiler.driver import compile_graph  # noqa: E402
from compiler.link import control as control_link  # noqa: E402


def run_and_compare(graph: Graph, inputs: dict, config=SMALL_CONFIG):
    program = compile_graph(graph, config)
    return program, compare_on_isa(program, graph, inputs, config, same_dtype=False)


def _t(block: Block, name: str, shape, dtype: str, data=None) -> str:
    block.add_tensor(Tensor(name, tuple(shape), dtype, None if data is None else np.asarray(data)))
    return name


@pytest.mark.parametrize("trips", [0, 1, 6])
def test_while_loop_trip_count_from_input(trips):
    rng = np.random.default_rng(trips)
    inputs = {"i": np.array([trips], np.int32), "x": rng.integers(-50, 50, 2).astype(np.int32)}
    program, result = run_and_compare(while_loop_graph(), inputs)
    assert any(i.name == "BRANCH" for i in program.instructions)
    # one more trip: more instructions executed (the loop really runs on the NPU)
    _, more = run_and_compare(while_loop_graph(), {**inputs, "i": np.array([trips + 1], np.int32)})
    assert more.instructions_executed > result.instructions_executed


def accumulate_graph(shape=(5, 7)):
    """Pre-ops, a WHILE_LOOP whose condition compares a running total with a limit (both
    data), post-ops: ``a = x + y; while (s < lim) { s += step; a = a - y }; out = a * 2 + s``
    (``s``, ``lim``, ``step`` scalars [1]).  Trip count ceil((lim - s) / step)."""
    main = Block("main")
    x, y = _t(main, "x", shape, "int32"), _t(main, "y", shape, "int32")
    s, lim, step = (_t(main, n, (1,), "int32") for n in ("s", "lim", "step"))
    a = _t(main, "a", shape, "int32")
    s2, lim2, step2 = (_t(main, n, (1,), "int32") for n in ("s2", "lim2", "step2"))
    a2, y2 = (_t(main, n, shape, "int32") for n in ("a2", "y2"))
    two = _t(main, "two", (1, 1), "int32", np.array([[2]], np.int32))
    shift = _t(main, "shift", (1,), "int8", np.zeros(1, np.int8))
    d = _t(main, "d", shape, "int32")
    out = _t(main, "out", shape, "int32")
    s_b = _t(main, "s_b", (1, 1), "int32")
    shp = _t(main, "shp", (2,), "shape", np.array([1, 1]))
    main.inputs, main.outputs = [x, y, s, lim, step], [out, s2]
    main.operators = [
        Operator("ADD", [x, y], [a], {}, "m:pre"),
        Operator("WHILE_LOOP", [s, lim, step, a, y], [s2, lim2, step2, a2, y2],
                 {"cond_graph": "C", "body_graph": "B"}, "m:while"),
        Operator("MUL", [a2, two, shift], [d], {}, "m:post0"),
        Operator("RESHAPE", [s2, shp], [s_b], {}, "m:post1"),
        Operator("ADD", [d, s_b], [out], {}, "m:post2"),
    ]
    cond = Block("C", inputs=["s", "lim", "step", "a", "y"], outputs=["go"])
    body = Block("B", inputs=["s", "lim", "step", "a", "y"], outputs=["s1", "lim", "step", "a1", "y"])
    for blk in (cond, body):
        for n in ("s", "lim", "step"):
            _t(blk, n, (1,), "int32")
        _t(blk, "a", shape, "int32")
        _t(blk, "y", shape, "int32")
    _t(cond, "go", (1,), "bool")
    cond.operators = [Operator("GREATER", ["lim", "s"], ["go"], {}, "m:C")]
    _t(body, "s1", (1,), "int32")
    _t(body, "a1", shape, "int32")
    body.operators = [Operator("ADD", ["s", "step"], ["s1"], {}, "m:B0"),
                      Operator("SUB", ["a", "y"], ["a1"], {}, "m:B1")]
    return Graph([Region("main", [main]), Region("C", [cond]), Region("B", [body])], source="m.tosa")


@pytest.mark.parametrize("s,lim,step", [(0, 10, 3), (5, 5, 1), (-7, 20, 9)])
def test_while_loop_with_ops_around_it(s, lim, step):
    rng = np.random.default_rng(s + 100)
    inputs = {"x": rng.integers(-1000, 1000, (5, 7)).astype(np.int32),
              "y": rng.integers(-1000, 1000, (5, 7)).astype(np.int32),
              "s": np.array([s], np.int32), "lim": np.array([lim], np.int32), "step": np.array([step], np.int32)}
    run_and_compare(accumulate_graph(), inputs)


def test_while_loop_budget_exceeded_stops_with_branch_limit(monkeypatch):
    """A loop that never ends: the reference stops past its budget (Unsupported), the NPU
    with BRANCH_LIMIT and the interrupt, never a hang (budget lowered to keep it short)."""
    monkeypatch.setattr(control_link, "LOOP_BUDGET", 5)
    graph = accumulate_graph()
    inputs = {"x": np.zeros((5, 7), np.int32), "y": np.ones((5, 7), np.int32),
              "s": np.array([0], np.int32), "lim": np.array([10], np.int32), "step": np.array([0], np.int32)}
    with pytest.raises(Unsupported, match="WHILE_LOOP"):
        Interpreter(graph, max_loop_iterations=5).run(inputs)
    program = compile_graph(graph, SMALL_CONFIG)
    result = IsaSim(SMALL_CONFIG).run(program, program.memory_image(inputs))
    assert result.error_code == ErrorCode.BRANCH_LIMIT
    assert program.instructions[result.stop_pc].name == "BRANCH"


def nested_graph():
    """``while i > 0 { i -= 1; j = k; while j > 0 { j -= 1; x += 1 } }``: x += i*k."""
    main = Block("main", inputs=["i", "k", "x"], outputs=["x2"])
    for n in ("i", "k", "i2", "k2"):
        _t(main, n, (1,), "int32")
    _t(main, "x", (3,), "int32")
    _t(main, "x2", (3,), "int32")
    main.operators = [Operator("WHILE_LOOP", ["i", "k", "x"], ["i2", "k2", "x2"],
                               {"cond_graph": "OC", "body_graph": "OB"}, "m:outer")]
    oc = Block("OC", inputs=["i", "k", "x"], outputs=["go"])
    ob = Block("OB", inputs=["i", "k", "x"], outputs=["i1", "k", "x1"])
    ic = Block("IC", inputs=["j", "x"], outputs=["go"])
    ib = Block("IB", inputs=["j", "x"], outputs=["j1", "x1"])
    for blk in (oc, ob):
        for n in ("i", "k"):
            _t(blk, n, (1,), "int32")
        _t(blk, "x", (3,), "int32")
    for blk in (ic, ib):
        _t(blk, "j", (1,), "int32")
        _t(blk, "x", (3,), "int32")
    for blk in (oc, ic):
        _t(blk, "zero", (1,), "int32", np.zeros(1, np.int32))
        _t(blk, "go", (1,), "bool")
    oc.operators = [Operator("GREATER", ["i", "zero"], ["go"], {}, "m:oc")]
    ic.operators = [Operator("GREATER", ["j", "zero"], ["go"], {}, "m:ic")]
    for blk in (ob, ib):
        _t(blk, "one", (1,), "int32", np.ones(1, np.int32))
    _t(ob, "i1", (1,), "int32")
    _t(ob, "j2", (1,), "int32")
    _t(ob, "x1", (3,), "int32")
    ob.operators = [Operator("SUB", ["i", "one"], ["i1"], {}, "m:ob0"),
                    Operator("WHILE_LOOP", ["k", "x"], ["j2", "x1"], {"cond_graph": "IC", "body_graph": "IB"},
                             "m:inner")]
    _t(ib, "j1", (1,), "int32")
    _t(ib, "x1", (3,), "int32")
    ib.operators = [Operator("SUB", ["j", "one"], ["j1"], {}, "m:ib0"),
                    Operator("ADD", ["x", "one"], ["x1"], {}, "m:ib1")]
    return Graph([Region("main", [main]), Region("OC", [oc]), Region("OB", [ob]), Region("IC", [ic]),
                  Region("IB", [ib])], source="m.tosa")


@pytest.mark.parametrize("i,k", [(3, 2), (0, 4), (2, 0)])
def test_nested_while_loops(i, k):
    inputs = {"i": np.array([i], np.int32), "k": np.array([k], np.int32),
              "x": np.array([5, -3, 100], np.int32)}
    program, _ = run_and_compare(nested_graph(), inputs)
    assert sum(ins.name == "BRANCH" for ins in program.instructions) == 4


def big_cond_if_graph(shape=(48, 100)):
    """COND_IF on a bool input whose branches are big enough to branch (not if-convert)."""
    main = Block("main", inputs=["c", "a", "b"], outputs=["y"])
    _t(main, "c", (1,), "bool")
    for n in ("a", "b", "y"):
        _t(main, n, shape, "int32")
    main.operators = [Operator("COND_IF", ["c", "a", "b"], ["y"], {"then_graph": "T", "else_graph": "E"}, "m:if")]
    blocks = []
    for name, ops in (("T", [("ADD", ["p", "q"], "r0"), ("SUB", ["r0", "q"], "r")]),
                      ("E", [("SUB", ["p", "q"], "r")])):
        blk = Block(name, inputs=["p", "q"], outputs=["r"])
        for t in ("p", "q", "r", "r0"):
            _t(blk, t, shape, "int32")
        blk.operators = [Operator(op, ins, [out], {}, f"m:{name}") for op, ins, out in ops]
        blocks.append(blk)
    return Graph([Region("main", [main]), Region("T", [blocks[0]]), Region("E", [blocks[1]])], source="m.tosa")


def test_big_cond_if_runs_only_the_taken_branch():
    rng = np.random.default_rng(3)
    graph = big_cond_if_graph()
    assert control_link.needs_linking(graph)
    executed = {}
    for cond in (True, False):
        inputs = {"a": rng.integers(-1000, 1000, (48, 100)).astype(np.int32),
                  "b": rng.integers(-1000, 1000, (48, 100)).astype(np.int32), "c": np.array([cond])}
        program, result = run_and_compare(graph, inputs)
        executed[cond] = result.instructions_executed
    assert sum(i.name == "BRANCH" for i in program.instructions) == 2
    # the then side (two ops) runs more instructions than the else side: only one side ran
    assert executed[True] > executed[False]


def test_small_cond_if_stays_if_converted():
    graph = big_cond_if_graph((3, 5))
    assert not control_link.needs_linking(graph)
    program = compile_graph(graph, SMALL_CONFIG)
    assert not any(i.name == "BRANCH" for i in program.instructions)


def test_while_loop_default_config():
    inputs = {"i": np.array([3], np.int32), "x": np.array([7, -9], np.int32)}
    run_and_compare(while_loop_graph(), inputs, DEFAULT_CONFIG)
