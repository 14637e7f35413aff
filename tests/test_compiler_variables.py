"""DIM and the variable operators (VARIABLE, VARIABLE_WRITE, VARIABLE_READ) compiled to NPU
programs (compiler/kinds/variables/layer.py), run on the ISA simulator with hazard checking,
compared bit-exactly with the reference interpreter (sim.reference)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import INT_RANGE, NP, VecBuilder, run_and_compare  # noqa: E402

from compiler.driver import run_pipeline  # noqa: E402
from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from sim.isa.sim import IsaSim  # noqa: E402
from sim.reference import Interpreter  # noqa: E402
from tosa_ir import Graph, Operator  # noqa: E402
from tosa_ir.errors import TosaUnpredictable, Unsupported  # noqa: E402

DRAFT = (0, 80, 0, True)


def _values(rng, shape, dtype):
    lo, hi = INT_RANGE[dtype]
    return rng.integers(lo, hi, shape, endpoint=True).astype(NP[dtype])


def _graph(g: VecBuilder, outputs, draft: bool) -> Graph:
    graph = g.graph(outputs)
    if draft:
        graph.version = DRAFT
    return graph


def _declare(g: VecBuilder, uid: int, shape, dtype: str, initial=None) -> None:
    attrs = {"uid": uid, "var_shape": list(shape), "type": dtype.upper()}
    if initial is not None:
        attrs["initial_value"] = initial
    g.block.operators.append(Operator("VARIABLE", [], [], attrs, f"var:declare{uid}"))


def _write(g: VecBuilder, uid: int, x: str) -> None:
    g.block.operators.append(Operator("VARIABLE_WRITE", [x], [], {"uid": uid}, f"var:write{uid}"))


def _read(g: VecBuilder, uid: int, shape, dtype: str) -> str:
    y = g.tensor(shape, dtype)
    g.block.operators.append(Operator("VARIABLE_READ", [], [y], {"uid": uid}, f"var:read{uid}"))
    return y


@pytest.mark.parametrize("draft", [True, False])
@pytest.mark.parametrize("dtype,shape", [("int8", (2, 3)), ("int16", (5,)), ("int32", (2, 1, 3, 20)),
                                         ("bool", (3, 4, 2))])
def test_write_then_read(draft, dtype, shape):
    """A computed value written, read back and computed on: the read sees the write."""
    rng = np.random.default_rng(11)
    g = VecBuilder(rng, "wr")
    a, b = g.input(shape, dtype), g.input(shape, dtype)
    _declare(g, 4, shape, dtype, _values(rng, shape, dtype))
    op = "LOGICAL_XOR" if dtype == "bool" else "BITWISE_XOR"
    s = g.op(op, [a, b], shape, dtype)
    _write(g, 4, s)
    y = _read(g, 4, shape, dtype)
    z = g.op(op, [y, a], shape, dtype)
    run_and_compare(_graph(g, [y, z], draft), g.inputs(rng), SMALL_CONFIG)


@pytest.mark.parametrize("dtype,shape", [("int8", (3, 5)), ("int32", (4, 17)), ("int16", (2, 2, 2))])
def test_read_then_write(dtype, shape):
    """A read of the initial value, a write, a read again: the first read keeps the initial
    value (copied before the buffer is overwritten), the second sees the write."""
    rng = np.random.default_rng(12)
    g = VecBuilder(rng, "rw")
    a = g.input(shape, dtype)
    init = _values(rng, shape, dtype)
    _declare(g, 1, shape, dtype, init)
    old = _read(g, 1, shape, dtype)
    s = g.op("BITWISE_XOR", [old, a], shape, dtype)
    _write(g, 1, s)
    new = _read(g, 1, shape, dtype)
    t = g.op("BITWISE_AND", [new, old], shape, dtype)
    run_and_compare(_graph(g, [old, new, t], True), g.inputs(rng), SMALL_CONFIG)


def test_read_only_and_write_only():
    """A variable only read (its initial value is the output) and one only written (the
    write lands in its buffer, no output reads it)."""
    rng = np.random.default_rng(13)
    g = VecBuilder(rng, "ro")
    a = g.input((4,), "int16")
    _declare(g, 1, (2, 3), "int8", _values(rng, (2, 3), "int8"))
    _declare(g, 2, (4,), "int16")
    y = _read(g, 1, (2, 3), "int8")
    z = g.op("BITWISE_NOT", [a], (4,), "int16")
    _write(g, 2, z)
    run_and_compare(_graph(g, [y, z], True), g.inputs(rng), SMALL_CONFIG)


def test_several_variables_and_writes():
    """Three variables of different types and ranks, two writes of one of them, reads in
    between, a graph input written directly."""
    rng = np.random.default_rng(14)
    g = VecBuilder(rng, "many")
    a = g.input((2, 8), "int32", -(1 << 20), 1 << 20)
    b = g.input((3,), "int8")
    c = g.input((1, 2, 2, 5), "int16")
    _declare(g, 10, (2, 8), "int32", _values(rng, (2, 8), "int32") >> 8)
    _declare(g, 20, (3,), "int8", _values(rng, (3,), "int8"))
    _declare(g, 30, (1, 2, 2, 5), "int16")
    r0 = _read(g, 10, (2, 8), "int32")
    _write(g, 20, b)                      # a graph input written as it is
    _write(g, 30, c)
    s = g.op("ADD", [r0, a], (2, 8), "int32")
    _write(g, 10, s)
    r1 = _read(g, 10, (2, 8), "int32")
    r2 = _read(g, 20, (3,), "int8")
    _write(g, 10, a)                      # written again: later reads see this one
    r3 = _read(g, 10, (2, 8), "int32")
    r4 = _read(g, 30, (1, 2, 2, 5), "int16")
    t = g.op("SUB", [r1, r3], (2, 8), "int32")
    run_and_compare(_graph(g, [r0, r1, r2, r3, r4, t], True), g.inputs(rng), SMALL_CONFIG)


def test_read_feeding_a_pool():
    """An int8 rank-4 variable read by MAX_POOL2D (a brick reader): the rows buffer is
    copied into bricks, before and after a write."""
    rng = np.random.default_rng(15)
    g = VecBuilder(rng, "pool")
    shape = (1, 4, 4, 20)
    a = g.input(shape, "int8")
    _declare(g, 5, shape, "int8", _values(rng, shape, "int8"))
    pool = {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0]}
    r0 = _read(g, 5, shape, "int8")
    p0 = g.op("MAX_POOL2D", [r0], (1, 2, 2, 20), "int8", **pool)
    _write(g, 5, a)
    r1 = _read(g, 5, shape, "int8")
    p1 = g.op("MAX_POOL2D", [r1], (1, 2, 2, 20), "int8", **pool)
    run_and_compare(_graph(g, [p0, p1], False), g.inputs(rng), DEFAULT_CONFIG)


def test_state_persists_between_runs():
    """Running the program again on the memory the first run left matches a second run of
    the same interpreter (the variable keeps the last value written)."""
    rng = np.random.default_rng(16)
    g = VecBuilder(rng, "persist")
    shape = (3, 5)
    a = g.input(shape, "int32", -1000, 1000)
    _declare(g, 9, shape, "int32", _values(rng, shape, "int16").astype(np.int32))
    old = _read(g, 9, shape, "int32")
    s = g.op("ADD", [old, a], shape, "int32")
    _write(g, 9, s)
    graph = _graph(g, [old, s], True)
    program = run_pipeline(graph, SMALL_CONFIG).program
    interp = Interpreter(graph)
    sim = IsaSim(SMALL_CONFIG, check_hazards=True)
    memory = None
    for run in range(3):
        inputs = g.inputs(rng)
        want = interp.run(inputs)
        if memory is None:
            memory = program.memory_image(inputs)
        else:
            for b in program.inputs:
                data = b.pack(inputs[b.name], SMALL_CONFIG.bus_bytes)
                memory[b.addr:b.addr + len(data)] = data
        result = sim.run(program, memory)
        assert result.ok, result.error_message
        assert result.hazards == [], result.hazards[:3]
        got = program.read_outputs(result.memory)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"run {run}, {name}")
        memory = bytearray(result.memory)


def test_unwritten_read_is_unpredictable():
    g = VecBuilder(np.random.default_rng(0), "unwritten")
    _declare(g, 3, (2,), "int8")
    y = _read(g, 3, (2,), "int8")
    with pytest.raises(TosaUnpredictable, match="is_written"):
        run_pipeline(_graph(g, [y], True), SMALL_CONFIG)


def test_variable_in_branch_unsupported():
    """Variables inside a COND_IF branch would be if-converted (both sides run): refused."""
    from tosa_ir import Block, Region, Tensor

    then_b = Block("then", {"x": Tensor("x", (2,), "int8"), "v": Tensor("v", (2,), "int8")},
                   [Operator("VARIABLE_WRITE", ["x"], [], {"uid": 1}), Operator("IDENTITY", ["x"], ["v"])],
                   ["x"], ["v"])
    else_b = Block("else", {"x": Tensor("x", (2,), "int8"), "v": Tensor("v", (2,), "int8")},
                   [Operator("IDENTITY", ["x"], ["v"])], ["x"], ["v"])
    main = Block("main", {"c": Tensor("c", (1,), "bool"), "a": Tensor("a", (2,), "int8"),
                          "y": Tensor("y", (2,), "int8")},
                 [Operator("VARIABLE", [], [], {"uid": 1, "var_shape": [2], "type": "INT8"}),
                  Operator("COND_IF", ["c", "a"], ["y"], {"then_graph": "then", "else_graph": "else"})],
                 ["c", "a"], ["y"])
    graph = Graph(regions=[Region("main", [main, then_b, else_b])], version=DRAFT)
    with pytest.raises(Unsupported, match="control-flow block"):
        run_pipeline(graph, SMALL_CONFIG)


def test_variable_with_while_loop_unsupported():
    """A graph with a WHILE_LOOP is compiled as linked pieces: variables are refused."""
    from compiler.driver import compile_graph
    from vector_graphs import while_loop_graph

    graph = while_loop_graph()
    graph.main.operators.insert(0, Operator("VARIABLE", [], [], {"uid": 1, "var_shape": [2], "type": "INT8"}))
    with pytest.raises(Unsupported, match="WHILE_LOOP"):
        compile_graph(graph, SMALL_CONFIG)


# -- DIM --------------------------------------------------------------------------------------
def test_dim_draft_output():
    """Draft-form DIM (a rank-0 shape value) as a graph output, beside a computed one."""
    rng = np.random.default_rng(21)
    g = VecBuilder(rng, "dim")
    x = g.input((2, 3, 40), "int16")
    d = g.op("DIM", [x], (), "shape", axis=2)
    y = g.op("RESHAPE", [x], (40, 6), "int16", new_shape=[40, 6])   # draft: shape attribute
    run_and_compare(_graph(g, [y, d], True), g.inputs(rng), SMALL_CONFIG)


@pytest.mark.parametrize("dtype", ["int8", "int32"])
def test_dim_as_constant_operands(dtype):
    """TOSA 1.x DIM (a [1] shape tensor) as RESHAPE's shape and TILE's multiples: operands
    the compiler must know when compiling; and as a graph output."""
    rng = np.random.default_rng(22)
    g = VecBuilder(rng, "dim1")
    x = g.input((1, 7), dtype)
    n = g.op("DIM", [x], (1,), "shape", axis=1)
    flat = g.op("RESHAPE", [x, n], (7,), dtype)
    m = g.op("DIM", [flat], (1,), "shape", axis=0)
    tiled = g.op("TILE", [flat, m], (49,), dtype)
    run_and_compare(_graph(g, [tiled, n], False), g.inputs(rng), SMALL_CONFIG)


# -- TOSA 1.0 variable tensors, against the official reference model --------------------------
@pytest.mark.parametrize("order", ["read_first", "write_first", "both"])
def test_official_variable_tensor(order):
    """A TOSA 1.0 variable tensor (initial value, written and read by IDENTITY) serialized
    by tosa_serializer, run by the official tosa_reference_model; the same .tosa bytes read
    by our frontend, compiled and run on the ISA simulator give the same outputs."""
    from oracle import TS_DTYPES, load_graph, run_reference
    from ref_dual import Dual

    rng = np.random.default_rng(31)
    shape, dtype = (2, 3, 5), "int16"
    init = _values(rng, shape, dtype)
    d = Dual()
    x = d.input(shape, dtype)
    outs = [d.output(shape, dtype) for _ in range(2 if order == "both" else 1)]
    d.b.ser.currRegion.currBasicBlock.addTensor("var7", list(shape), TS_DTYPES[dtype], init, variable=True,
                                                variable_name="v7")
    write = ("IDENTITY", [x], ["var7"])
    reads = [("IDENTITY", ["var7"], [y]) for y in outs]
    ops = (reads + [write] if order == "read_first" else [write] + reads if order == "write_first"
           else [reads[0], write, reads[1]])
    for kind, ins, res in ops:
        d.b.op(kind, ins, res)
    value = _values(rng, shape, dtype)
    ref = run_reference(d.b, [value])
    assert ref.status == "VALID", ref.log
    graph = load_graph(ref.tosa)
    assert any(t.variable for t in graph.main.tensors.values())
    program = run_pipeline(graph, SMALL_CONFIG).program
    result = IsaSim(SMALL_CONFIG, check_hazards=True).run(program, program.memory_image({x: value}))
    assert result.ok, result.error_message
    assert result.hazards == [], result.hazards[:3]
    got = program.read_outputs(result.memory)
    for y in outs:
        np.testing.assert_array_equal(got[y], ref.outputs[y], err_msg=y)


def test_brick_value_persists():
    """An int8 rank-4 value held as bricks (a pool's output) written to a variable: the
    write-back re-lays it into the variable's rows buffer, which the next run reads."""
    rng = np.random.default_rng(17)
    g = VecBuilder(rng, "brickvar")
    a = g.input((1, 4, 4, 20), "int8")
    _declare(g, 2, (1, 2, 2, 20), "int8", _values(rng, (1, 2, 2, 20), "int8"))
    old = _read(g, 2, (1, 2, 2, 20), "int8")
    p = g.op("MAX_POOL2D", [a], (1, 2, 2, 20), "int8", kernel=[2, 2], stride=[2, 2], pad=[0, 0, 0, 0])
    _write(g, 2, p)
    graph = _graph(g, [old], False)
    program = run_pipeline(graph, DEFAULT_CONFIG).program
    interp = Interpreter(graph)
    sim = IsaSim(DEFAULT_CONFIG, check_hazards=True)
    memory = None
    for run in range(2):
        inputs = g.inputs(rng)
        want = interp.run(inputs)
        if memory is None:
            memory = program.memory_image(inputs)
        else:
            b = program.inputs[0]
            data = b.pack(inputs[b.name], DEFAULT_CONFIG.bus_bytes)
            memory[b.addr:b.addr + len(data)] = data
        result = sim.run(program, memory)
        assert result.ok and result.hazards == [], (result.error_message, result.hazards[:3])
        np.testing.assert_array_equal(program.read_outputs(result.memory)[old], want[old], err_msg=f"run {run}")
        memory = bytearray(result.memory)


def test_variables_with_equal_initial_values_keep_their_own_buffers():
    """Equal constants share one segment (compiler/program/memplan.py); a variable's buffer
    is state, not a constant: two variables with the same initial value, one written, and a
    constant equal to both, each keep their own bytes."""
    rng = np.random.default_rng(14)
    g = VecBuilder(rng, "eq")
    shape = (2, 8)
    a = g.input(shape, "int8")
    init = _values(rng, shape, "int8")
    _declare(g, 1, shape, "int8", init)
    _declare(g, 2, shape, "int8", init)
    k = g.const(init, "int8")
    _write(g, 1, g.op("BITWISE_XOR", [a, k], shape, "int8"))
    comp = run_and_compare(g.graph([_read(g, 1, shape, "int8"), _read(g, 2, shape, "int8"),
                                    g.op("BITWISE_OR", [a, k], shape, "int8")]), g.inputs(rng), SMALL_CONFIG)
    variables = [s for s in comp.program.segments if "@variable" in s.name]
    assert len(variables) == 2 and variables[0].addr != variables[1].addr
