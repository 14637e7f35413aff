"""Reference interpreter: CONST, IDENTITY, COND_IF, WHILE_LOOP and variables vs the official
reference model.

Variables: the reference model takes TOSA 1.0 variables (tensors flagged ``variable``,
written and read by IDENTITY); our draft-form VARIABLE / VARIABLE_WRITE / VARIABLE_READ
graphs are compared with the oracle's run of the equivalent 1.0 graph.  Persistence across
executions and the REQUIREs of the variable operators cannot be observed through the oracle
(one execution per call); those tests check the spec text with values taken from the test's
own inputs.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ref_dual import Dual, check, random_values, run_ours  # noqa: E402
from oracle import TS_DTYPES, run_reference  # noqa: E402

from sim.reference import Interpreter, run_graph  # noqa: E402
from sim.reference.interpreter import DEFAULT_MAX_LOOP_ITERATIONS  # noqa: E402
from tosa_ir import Block, Graph, InvalidInput, Operator, Region, Tensor, Unsupported  # noqa: E402

# --- CONST / IDENTITY ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int48"])
def test_const_identity(dtype):
    rng = np.random.default_rng(len(dtype))
    shape = (2, 3, 4)
    d = Dual()
    x = d.input(shape, dtype)
    c = d.const(random_values(rng, shape, dtype), dtype)
    y1 = d.output(shape, dtype)
    y2 = d.output(shape, dtype)
    d.op("IDENTITY", [x], [y1])
    d.op("IDENTITY", [c], [y2])
    check(d, [random_values(rng, shape, dtype)], expect="VALID")


# --- COND_IF ------------------------------------------------------------------------------

def cond_if_graph(dtype, cond_shape=(1,), then_in_shape=None):
    """y = cond ? a OP1 b : a OP2 b, with the branch ops inside THEN/ELSE regions."""
    shape = (2, 3)
    ops = ("ADD", "SUB") if dtype == "int32" else ("BITWISE_AND", "BITWISE_XOR")
    d = Dual()
    cond = d.input(cond_shape, "bool")
    a = d.input(shape, dtype)
    b = d.input(shape, dtype)
    y = d.output(shape, dtype)
    d.op("COND_IF", [cond, a, b], [y], attrs={"then_graph": "THEN", "else_graph": "ELSE"})
    for region, op in zip(("THEN", "ELSE"), ops):
        d.region(region)
        in_shape = then_in_shape if (then_in_shape and region == "THEN") else shape
        ra = d.input(in_shape, dtype)
        rb = d.input(shape, dtype)
        ry = d.output(shape, dtype)
        d.op(op, [ra, rb], [ry])
    return d


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_cond_if(dtype):
    rng = np.random.default_rng(5)
    for cond in (True, False):
        d = cond_if_graph(dtype)
        a = random_values(rng, (2, 3), dtype, -1000 if dtype != "int8" else None,
                          1000 if dtype != "int8" else None)
        b = random_values(rng, (2, 3), dtype, -1000 if dtype != "int8" else None,
                          1000 if dtype != "int8" else None)
        check(d, [np.array([cond]), a, b], expect="VALID", label=f"cond {cond}")


def test_cond_if_errors():
    a = np.zeros((2, 3), np.int32)
    # Condition of two elements: ERROR_IF(tensor_size(shape) != 1).
    check(cond_if_graph("int32", cond_shape=(2,)), [np.array([True, False]), a, a],
          expect="ERROR")
    # then_graph's inputs do not match the input list.
    check(cond_if_graph("int32", then_in_shape=(3, 2)), [np.array([True]), a, a],
          expect="ERROR")


def test_cond_if_overflow_inside_branch_is_unpredictable():
    big = np.full((2, 3), 2**31 - 1, np.int32)
    check(cond_if_graph("int32"), [np.array([True]), big, big], expect="UNPREDICTABLE")
    # The same values through the other branch (SUB) are fine.
    check(cond_if_graph("int32"), [np.array([False]), big, big], expect="VALID")


# --- WHILE_LOOP ---------------------------------------------------------------------------

def while_graph(acc_shape=(3,), body_out_shape=None):
    """while (iter > 0) { iter -= 1; acc += step }: both iteration tensors are loop values."""
    d = Dual()
    it = d.input((), "int32")
    acc = d.input(acc_shape, "int32")
    step = d.input(acc_shape, "int32")
    out_it = d.intermediate((), "int32")
    out_acc = d.output(acc_shape, "int32")
    out_step = d.intermediate(acc_shape, "int32")
    d.op("WHILE_LOOP", [it, acc, step], [out_it, out_acc, out_step],
         attrs={"cond_graph": "COND", "body_graph": "BODY"})
    d.region("COND")
    c_it = d.input((), "int32")
    d.input(acc_shape, "int32")
    d.input(acc_shape, "int32")
    zero = d.const(np.array(0, np.int32), "int32")
    c_out = d.output((), "bool")
    d.op("GREATER", [c_it, zero], [c_out])
    d.region("BODY")
    b_it = d.input((), "int32")
    b_acc = d.input(acc_shape, "int32")
    b_step = d.input(acc_shape, "int32")
    one = d.const(np.array(1, np.int32), "int32")
    n_it = d.output((), "int32")
    n_acc = d.output(body_out_shape or acc_shape, "int32")
    n_step = d.output(acc_shape, "int32")
    d.op("SUB", [b_it, one], [n_it])
    d.op("ADD", [b_acc, b_step], [n_acc])
    d.op("IDENTITY", [b_step], [n_step])
    return d


@pytest.mark.parametrize("iterations", [0, 1, 7])
def test_while_loop(iterations):
    rng = np.random.default_rng(iterations)
    acc = random_values(rng, (3,), "int32", -1000, 1000)
    step = random_values(rng, (3,), "int32", -1000, 1000)
    check(while_graph(), [np.array(iterations, np.int32), acc, step], expect="VALID")


def test_while_loop_overflow_is_unpredictable():
    acc = np.array([2**31 - 100, 0, 0], np.int32)
    step = np.array([30, 1, 1], np.int32)
    check(while_graph(), [np.array(3, np.int32), acc, step], expect="VALID")
    check(while_graph(), [np.array(4, np.int32), acc, step], expect="UNPREDICTABLE")


def test_while_loop_body_shape_mismatch_is_error():
    acc = np.zeros((3,), np.int32)
    check(while_graph(body_out_shape=(1,)), [np.array(2, np.int32), acc, acc], expect="ERROR")


# --- variables ---------------------------------------------------------------------------

def variable_dual(order: str, dtype: str = "int32", shape=(2, 3), form: str = "draft"):
    """Oracle: a 1.0 variable tensor (initial value) written/read by IDENTITY.  Ours: the
    draft form with VARIABLE / VARIABLE_WRITE / VARIABLE_READ on uid 7, or (``form="tosa1"``)
    the same 1.0 graph."""
    rng = np.random.default_rng(1)
    init = random_values(rng, shape, dtype)
    d = Dual()
    x = d.input(shape, dtype)
    y = d.output(shape, dtype)
    blk = d.b.ser.currRegion.currBasicBlock
    blk.addTensor("var7", list(shape), TS_DTYPES[dtype], init, variable=True, variable_name="v7")
    ours = d.main
    if form == "tosa1":
        ours.add_tensor(Tensor("var7", shape, dtype, init, variable=True))
        write = (["IDENTITY", [x], ["var7"]], Operator("IDENTITY", [x], ["var7"]))
        read = (["IDENTITY", ["var7"], [y]], Operator("IDENTITY", ["var7"], [y]))
    else:
        ours.operators.append(Operator("VARIABLE", [], [], {
            "uid": 7, "var_shape": list(shape), "type": dtype.upper(), "initial_value": init}))
        write = (["IDENTITY", [x], ["var7"]], Operator("VARIABLE_WRITE", [x], [], {"uid": 7}))
        read = (["IDENTITY", ["var7"], [y]], Operator("VARIABLE_READ", [], [y], {"uid": 7}))
    for (op, ins, outs), our_op in ([read, write] if order == "read_first" else [write, read]):
        d.b.op(op, ins, outs)
        ours.operators.append(our_op)
    return d, init


@pytest.mark.parametrize("order", ["read_first", "write_first"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "bool"])
@pytest.mark.parametrize("form", ["draft", "tosa1"])
def test_variable_read_write(order, dtype, form):
    d, init = variable_dual(order, dtype, form=form)
    x = random_values(np.random.default_rng(2), (2, 3), dtype)
    check(d, [x], expect="VALID")


def _draft_graph(ops, inputs=(), outputs=()):
    block = Block("main")
    for name, shape, dtype in list(inputs) + list(outputs):
        block.add_tensor(Tensor(name, shape, dtype))
    block.inputs = [n for n, _, _ in inputs]
    block.outputs = [n for n, _, _ in outputs]
    block.operators = ops
    return Graph(regions=[Region("main", [block])], version=(0, 80, 0, True))


def test_variable_persists_across_runs():
    declare = Operator("VARIABLE", [], [], {"uid": 1, "var_shape": [3], "type": "INT16"})
    store: dict = {}
    writer = _draft_graph([declare, Operator("VARIABLE_WRITE", ["x"], [], {"uid": 1})],
                          inputs=[("x", (3,), "int16")])
    reader = _draft_graph([declare, Operator("VARIABLE_READ", [], ["y"], {"uid": 1})],
                          outputs=[("y", (3,), "int16")])
    value = np.array([5, -7, 300], np.int16)
    run_graph(writer, {"x": value}, variables=store)
    out = run_graph(reader, {}, variables=store)
    assert out["y"].tolist() == value.tolist()


@pytest.mark.parametrize("case", ["read_unwritten", "declared_twice", "write_bad_shape",
                                  "write_undeclared", "read_bad_type"])
def test_variable_requires(case):
    declare = Operator("VARIABLE", [], [], {"uid": 3, "var_shape": [2], "type": "INT8"})
    ins, outs, ops = [], [], [declare]
    if case == "read_unwritten":
        ops.append(Operator("VARIABLE_READ", [], ["y"], {"uid": 3}))
        outs = [("y", (2,), "int8")]
    elif case == "declared_twice":
        ops.append(declare)
    elif case == "write_bad_shape":
        ops.append(Operator("VARIABLE_WRITE", ["x"], [], {"uid": 3}))
        ins = [("x", (3,), "int8")]
    elif case == "write_undeclared":
        ops = [Operator("VARIABLE_WRITE", ["x"], [], {"uid": 3})]
        ins = [("x", (2,), "int8")]
    else:
        ops.append(Operator("VARIABLE_WRITE", ["x"], [], {"uid": 3}))
        ops.append(Operator("VARIABLE_READ", [], ["y"], {"uid": 3}))
        ins, outs = [("x", (2,), "int8")], [("y", (2,), "int16")]
    graph = _draft_graph(ops, ins, outs)
    status, exc = run_ours(graph, [np.zeros(shape, np.int8) for _, shape, _ in ins])
    assert status == "UNPREDICTABLE", (case, status, exc)


def _nested_cond_if(levels: int) -> Graph:
    """``levels`` COND_IFs, each then-branch holding the next; the innermost is IDENTITY."""
    regions = []
    for i in range(levels + 1):
        block = Block(f"b{i}")
        block.add_tensor(Tensor(f"c{i}", (1,), "bool"))
        block.add_tensor(Tensor(f"x{i}", (2,), "int8"))
        block.add_tensor(Tensor(f"y{i}", (2,), "int8"))
        block.inputs, block.outputs = [f"c{i}", f"x{i}"], [f"y{i}"]
        if i < levels:
            block.operators = [Operator("COND_IF", [f"c{i}", f"c{i}", f"x{i}"], [f"y{i}"],
                                        {"then_graph": f"b{i + 1}", "else_graph": "leaf"})]
        else:
            block.inputs = [f"c{i}", f"x{i}"]
            block.operators = [Operator("IDENTITY", [f"x{i}"], [f"y{i}"])]
        regions.append(Region(f"b{i}", [block]))
    leaf = Block("leaf")
    leaf.add_tensor(Tensor("lc", (1,), "bool"))
    leaf.add_tensor(Tensor("lx", (2,), "int8"))
    leaf.inputs, leaf.outputs = ["lc", "lx"], ["lx"]
    regions.append(Region("leaf", [leaf]))
    main = regions[0].blocks[0]
    main.inputs = ["c0", "x0"]
    return Graph(regions=regions, version=(0, 80, 0, True))


@pytest.mark.parametrize("levels,level,expect", [(6, "8K", "VALID"), (7, "8K", "ERROR"),
                                                 (7, "none", "VALID")])
def test_cond_if_max_nesting(levels, level, expect):
    # ERROR_IF(tosa_nesting_depth >= MAX_NESTING), MAX_NESTING = 6 at level 8K.  Checked
    # against the spec text (the oracle's graphs here would need regions nested 7 deep).
    x = np.array([3, -4], np.int8)
    status, out = run_ours(_nested_cond_if(levels), [np.array([True]), x], level=level)
    assert status == expect, out
    if expect == "VALID":
        assert out[0].tolist() == x.tolist()


# --- WHILE_LOOP iteration budget (never a hang) -------------------------------------------
# The spec sets no iteration limit; our interpreter bounds the WHILE_LOOP body executions of
# a run (all loops, nested ones included) and stops with Unsupported beyond the bound.

def _loop_regions(prefix: str, body_extra=None) -> list[Region]:
    """cond: ``c > 0``; body: ``c - 1`` (plus ``body_extra(block)`` operators)."""
    cond = Block(f"{prefix}_cond")
    cond.add_tensor(Tensor(f"{prefix}_cc", (), "int32"))
    cond.add_tensor(Tensor(f"{prefix}_zero", (), "int32", np.array(0, np.int32)))
    cond.add_tensor(Tensor(f"{prefix}_go", (), "bool"))
    cond.inputs, cond.outputs = [f"{prefix}_cc"], [f"{prefix}_go"]
    cond.operators = [Operator("GREATER", [f"{prefix}_cc", f"{prefix}_zero"], [f"{prefix}_go"])]
    body = Block(f"{prefix}_body")
    body.add_tensor(Tensor(f"{prefix}_bc", (), "int32"))
    body.add_tensor(Tensor(f"{prefix}_one", (), "int32", np.array(1, np.int32)))
    body.add_tensor(Tensor(f"{prefix}_next", (), "int32"))
    body.inputs, body.outputs = [f"{prefix}_bc"], [f"{prefix}_next"]
    body.operators = [Operator("SUB", [f"{prefix}_bc", f"{prefix}_one"], [f"{prefix}_next"])]
    if body_extra is not None:
        body_extra(body)
    return [Region(cond.name, [cond]), Region(body.name, [body])]


def _loop(prefix: str) -> Operator:
    return Operator("WHILE_LOOP", [], [], {"cond_graph": f"{prefix}_cond",
                                           "body_graph": f"{prefix}_body"},
                    location=f"test.tosa:{prefix}")


def counting_loops(inner: int | None = None) -> Graph:
    """``while (n > 0) n -= 1`` on input ``n``; with ``inner``, each outer iteration also
    runs an inner loop counting ``inner`` down to 0 (so n * (1 + inner) body executions)."""
    main = Block("main")
    main.add_tensor(Tensor("n", (), "int32"))
    main.add_tensor(Tensor("left", (), "int32"))
    main.inputs, main.outputs = ["n"], ["left"]
    outer = _loop("outer")
    outer.inputs, outer.outputs = ["n"], ["left"]
    main.operators = [outer]

    def add_inner(body: Block) -> None:
        body.add_tensor(Tensor("inner_start", (), "int32", np.array(inner, np.int32)))
        body.add_tensor(Tensor("inner_left", (), "int32"))
        op = _loop("inner")
        op.inputs, op.outputs = ["inner_start"], ["inner_left"]
        body.operators.insert(0, op)

    regions = [Region("main", [main])] + _loop_regions("outer", add_inner if inner else None)
    if inner:
        regions += _loop_regions("inner")
    return Graph(regions=regions, version=(1, 0, 0, False))


def test_while_loop_bound_reached_exactly_matches_oracle():
    # A loop of exactly `bound` iterations runs, with the oracle's result.
    rng = np.random.default_rng(11)
    acc = random_values(rng, (3,), "int32", -1000, 1000)
    step = random_values(rng, (3,), "int32", -1000, 1000)
    d = while_graph()
    inputs = [np.array(7, np.int32), acc, step]
    ref = run_reference(d.b, inputs)
    assert ref.status == "VALID"
    ours = run_graph(d.graph, dict(zip(d.graph.main.inputs, inputs)), max_loop_iterations=7)
    for name in d.graph.main.outputs:
        assert ours[name].tolist() == ref.outputs[name].tolist()


def test_while_loop_over_bound_is_a_clear_error():
    d = while_graph()
    inputs = dict(zip(d.graph.main.inputs, [np.array(7, np.int32), np.zeros(3, np.int32),
                                            np.ones(3, np.int32)]))
    with pytest.raises(Unsupported) as info:
        run_graph(d.graph, inputs, max_loop_iterations=6)
    message = str(info.value)
    assert "WHILE_LOOP" in message and "6" in message and "max_loop_iterations" in message
    assert "\n" not in message
    assert info.value.exit_code == 3


def test_endless_loop_stops_at_the_bound():
    # cond n > 0 with a body that never changes n: the spec's semantics loop forever.
    g = counting_loops()
    g.block("outer_body").operators = [Operator("IDENTITY", ["outer_bc"], ["outer_next"])]
    interp = Interpreter(g, max_loop_iterations=500)
    with pytest.raises(Unsupported, match=r"WHILE_LOOP at test\.tosa:outer: more than 500 "):
        interp.run({"n": np.array(1, np.int32)})
    assert interp.loop_iterations == 501
    # The default bound is finite, so the default never hangs either.
    assert Interpreter(g).max_loop_iterations == DEFAULT_MAX_LOOP_ITERATIONS > 0


def test_nested_loops_share_the_budget():
    # 3 outer iterations, each running 4 inner ones: 3 + 3 * 4 = 15 body executions.
    g = counting_loops(inner=4)
    interp = Interpreter(g, max_loop_iterations=15)
    assert interp.run({"n": np.array(3, np.int32)})["left"].tolist() == 0
    assert interp.loop_iterations == 15
    # The budget is per run: a second run of the same interpreter gets it afresh.
    assert interp.run({"n": np.array(3, np.int32)})["left"].tolist() == 0
    with pytest.raises(Unsupported, match=r"WHILE_LOOP at test\.tosa:(inner|outer): more than 14 "):
        run_graph(g, {"n": np.array(3, np.int32)}, max_loop_iterations=14)
    # None removes the bound.
    assert run_graph(g, {"n": np.array(3, np.int32)}, max_loop_iterations=None)["left"] == 0


@pytest.mark.parametrize("bad", [-1, 2.5, True, "10"])
def test_loop_bound_must_be_a_count(bad):
    with pytest.raises(InvalidInput, match="max_loop_iterations"):
        Interpreter(counting_loops(), max_loop_iterations=bad)
