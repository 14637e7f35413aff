"""Compiler: the vector unit's other operator families (reductions, data movement of rows
tensors by element-mode DMA, DEPTHWISE_CONV2D, TABLE, INTDIV, ARGMAX/GATHER/SCATTER,
COND_IF), run on the ISA simulator and compared bit-exactly with the reference interpreter."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare, while_loop_graph  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from tosa_ir import Block, Operator, Tensor  # noqa: E402
from tosa_ir.errors import Unsupported  # noqa: E402


@pytest.mark.parametrize("kind,dtype", [("REDUCE_SUM", "int32"), ("REDUCE_MAX", "int8"), ("REDUCE_MIN", "int16"),
                                        ("REDUCE_ANY", "bool"), ("REDUCE_ALL", "bool"), ("REDUCE_MAX", "int32")])
def test_reductions_along_every_axis(kind, dtype):
    rng = np.random.default_rng(len(kind) + len(dtype))
    shape = (3, 5, 21)
    for axis in range(3):
        g = VecBuilder(rng)
        x = g.input(shape, dtype, *((-1000, 1000) if dtype == "int32" else (None, None)))
        out = tuple(1 if i == axis else d for i, d in enumerate(shape))
        run_and_compare(g.graph([g.op(kind, [x], out, dtype, axis=axis)]), g.inputs(rng), SMALL_CONFIG)


def test_data_movement_of_rows_tensors():
    rng = np.random.default_rng(4)
    g = VecBuilder(rng)
    x = g.input((3, 4, 7), "int16")
    t = g.op("TRANSPOSE", [x], (7, 3, 4), "int16", perms=[2, 0, 1])
    r = g.op("REVERSE", [t], (7, 3, 4), "int16", axis=2)
    s = g.op("SLICE", [r, g.const(np.array([1, 0, 1]), "shape"), g.const(np.array([5, 3, 2]), "shape")],
             (5, 3, 2), "int16")
    ti = g.op("TILE", [s, g.const(np.array([1, 2, 3]), "shape")], (5, 6, 6), "int16")
    p = g.op("PAD", [ti, g.const(np.array([0, 1, 2, 0, 1, 1]), "shape"), g.const(np.array([-9]), "int16")],
             (6, 8, 8), "int16")
    c = g.op("CONCAT", [p, p], (6, 8, 16), "int16", axis=2)
    y = g.op("RESHAPE", [c, g.const(np.array([16, 48]), "shape")], (16, 48), "int16")
    z = g.op("RESHAPE", [y, g.const(np.array([768]), "shape")], (768,), "int16")
    run_and_compare(g.graph([y, z, t]), g.inputs(rng), SMALL_CONFIG)


@pytest.mark.parametrize("case", [
    # kernel, stride, dilation, pad, multiplier, input_zp, weight_zp
    ((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 1, -128, 0),       # the digits CNN's average pool
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, 5, 0),
    ((3, 2), (2, 1), (2, 1), (1, 0, 2, 1), 3, -7, 0),         # channel multiplier, padding
    ((2, 3), (1, 2), (1, 2), (0, 1, 1, 0), 2, 3, 100),        # weights beyond int8 after the zero point
])
def test_depthwise_conv2d(case):
    (kh, kw), stride, dil, pad, m, izp, wzp = case
    rng = np.random.default_rng(kh * 10 + kw)
    n, c = 1, 5
    # Sizes the windows tile exactly (the spec's idiv_check).
    h = next(v for v in range(8, 20) if (v - 1 + pad[0] + pad[1] - (kh - 1) * dil[0]) % stride[0] == 0)
    w = next(v for v in range(7, 20) if (v - 1 + pad[2] + pad[3] - (kw - 1) * dil[1]) % stride[1] == 0)
    oh = (h + pad[0] + pad[1] - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (w + pad[2] + pad[3] - (kw - 1) * dil[1] - 1) // stride[1] + 1
    g = VecBuilder(rng)
    x = g.input((n, h, w, c), "int8")
    wt = g.const(rng.integers(-128, 128, (kh, kw, c, m)), "int8")
    b = g.const(rng.integers(-1000, 1000, (c * m,)), "int32")
    y = g.op("DEPTHWISE_CONV2D", [x, wt, b, g.const([izp], "int8"), g.const([wzp], "int8")], (n, oh, ow, c * m),
             "int32", pad=list(pad), stride=list(stride), dilation=list(dil), acc_type="INT32")
    run_and_compare(g.graph([y]), g.inputs(rng), DEFAULT_CONFIG)


def test_intdiv_edges():
    rng = np.random.default_rng(6)
    g = VecBuilder(rng)
    a = g.input((4, 9), "int32")
    b = g.input((1, 9), "int32", 1, 1000)
    c = g.input((4, 1), "int32", -300, -1)
    y = g.op("INTDIV", [a, b], (4, 9), "int32")
    z = g.op("INTDIV", [a, c], (4, 9), "int32")
    inputs = g.inputs(rng)
    inputs[a][0, :3] = [-(1 << 31), (1 << 31) - 1, 0]
    run_and_compare(g.graph([y, z]), inputs, DEFAULT_CONFIG)


def test_table_int16_and_argmax_gather_scatter():
    rng = np.random.default_rng(7)
    g = VecBuilder(rng)
    x = g.input((3, 20), "int16")
    tab = g.op("TABLE", [x, g.const(rng.integers(-2000, 2000, 513), "int16")], (3, 20), "int32")
    am = g.op("ARGMAX", [x], (3,), "int32", axis=1)
    am0 = g.op("ARGMAX", [x], (20,), "int32", axis=0)
    vals = g.input((2, 6, 5), "int8")
    idx = g.input((2, 4), "int32", 0, 5)
    gat = g.op("GATHER", [vals, idx], (2, 4, 5), "int8")
    src = g.input((2, 3, 5), "int8")
    sidx = g.const(np.array([[5, 0, 2], [1, 4, 3]]), "int32")
    sca = g.op("SCATTER", [vals, sidx, src], (2, 6, 5), "int8")
    run_and_compare(g.graph([tab, am, am0, gat, sca]), g.inputs(rng), SMALL_CONFIG)


def test_gather_scatter_bool():
    """bool GATHER/SCATTER (int8 0/1 in the rows layout; the official suite has them)."""
    rng = np.random.default_rng(9)
    g = VecBuilder(rng)
    vals = g.input((2, 6, 19), "bool")
    idx = g.input((2, 4), "int32", 0, 5)
    gat = g.op("GATHER", [vals, idx], (2, 4, 19), "bool")
    src = g.input((2, 3, 19), "bool")
    sidx = g.const(np.array([[5, 0, 2], [1, 4, 3]]), "int32")
    sca = g.op("SCATTER", [vals, sidx, src], (2, 6, 19), "bool")
    run_and_compare(g.graph([gat, sca]), g.inputs(rng), SMALL_CONFIG)
    run_and_compare(g.graph([gat, sca]), g.inputs(rng), DEFAULT_CONFIG)


def test_cond_if_constant_and_computed_conditions():
    rng = np.random.default_rng(8)
    b = Block("main")
    for name, shape, dtype in (("a", (3, 5), "int32"), ("b", (3, 5), "int32"), ("c", (1,), "bool"),
                               ("y", (3, 5), "int32"), ("z", (3, 5), "int32")):
        b.add_tensor(Tensor(name, shape, dtype))
    b.add_tensor(Tensor("k", (1,), "bool", np.array([False])))
    b.inputs, b.outputs = ["a", "b", "c"], ["y", "z"]
    b.operators = [Operator("COND_IF", ["c", "a", "b"], ["y"], {"then_graph": "T", "else_graph": "E"}, "m:if0"),
                   Operator("COND_IF", ["k", "a", "b"], ["z"], {"then_graph": "T", "else_graph": "E"}, "m:if1")]
    blocks = []
    for name, op in (("T", "ADD"), ("E", "SUB")):
        blk = Block(name, inputs=["p", "q"], outputs=["r"])
        for t in "pqr":
            blk.add_tensor(Tensor(t, (3, 5), "int32"))
        blk.operators = [Operator(op, ["p", "q"], ["r"], {}, f"m:{name}")]
        blocks.append(blk)
    from tosa_ir import Graph, Region

    graph = Graph([Region("main", [b]), Region("T", [blocks[0]]), Region("E", [blocks[1]])], source="m.tosa")
    for cond in (True, False):
        inputs = {"a": rng.integers(-1000, 1000, (3, 5)).astype(np.int32),
                  "b": rng.integers(-1000, 1000, (3, 5)).astype(np.int32), "c": np.array([cond])}
        run_and_compare(graph, inputs, SMALL_CONFIG)


def test_while_loop_single_program_says_why():
    """compile_graph links WHILE_LOOPs with BRANCH (tests/test_compiler_control_flow.py); the
    single-program pipeline (estimates) refuses them, saying why."""
    from compiler.driver import run_pipeline

    with pytest.raises(Unsupported, match="WHILE_LOOP at m:while0: a WHILE_LOOP is linked from separately"):
        run_pipeline(while_loop_graph(), SMALL_CONFIG)


def test_matmul_int8_and_max_pool_int16():
    rng = np.random.default_rng(10)
    g = VecBuilder(rng)
    a, b = g.input((2, 5, 19), "int8"), g.input((2, 19, 7), "int8")
    mm = g.op("MATMUL", [a, b, g.const([-3], "int8"), g.const([12], "int8")], (2, 5, 7), "int32")
    x = g.input((1, 7, 11, 20), "int16")
    mp = g.op("MAX_POOL2D", [x], (1, 7, 4, 20), "int16", kernel=[3, 3], stride=[1, 3], pad=[1, 1, 1, 0])
    run_and_compare(g.graph([mm, mp]), g.inputs(rng), SMALL_CONFIG)


def test_avg_pool_int16_with_padding_and_resize():
    rng = np.random.default_rng(11)
    g = VecBuilder(rng)
    x = g.input((1, 9, 8, 5), "int16")
    ap = g.op("AVG_POOL2D", [x, g.const([0], "int16"), g.const([0], "int16")], (1, 5, 4, 5), "int16",
              kernel=[3, 2], stride=[2, 2], pad=[1, 1, 0, 0], acc_type="INT32")
    y = g.input((1, 3, 4, 6), "int8")
    shape_ops = [g.const(np.array(v), "shape") for v in ([5, 2, 3, 1], [0, 0], [0, 0])]
    near = g.op("RESIZE", [y] + shape_ops, (1, 6, 10, 6), "int8", mode="NEAREST")
    bil = g.op("RESIZE", [y] + shape_ops, (1, 6, 10, 6), "int32", mode="BILINEAR")
    run_and_compare(g.graph([ap, near, bil]), g.inputs(rng), DEFAULT_CONFIG)
