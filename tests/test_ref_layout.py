"""Reference interpreter: reductions, data layout, GATHER/SCATTER vs the official reference model.

Shape operands (PAD padding, SLICE start/size, TILE multiples, RESHAPE shape) are CONST_SHAPE
inputs in the TOSA 1.0 graphs the oracle runs; the ``draft`` variants give our interpreter
the same values as attributes.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ref_dual import Dual, check, random_values, run_ours  # noqa: E402

from tosa_ir import INT_RANGES  # noqa: E402

DATA_TYPES = ["bool", "int8", "int16", "int32"]
FORMS = pytest.mark.parametrize("draft", [False, True], ids=["tosa1", "draft"])


def _seed(*parts) -> int:
    return sum((i + 1) * sum(map(ord, str(p))) for i, p in enumerate(parts))


def unary(op, in_shape, out_shape, dtype, out_dtype=None, **attrs):
    d = Dual()
    x = d.input(in_shape, dtype)
    y = d.output(out_shape, out_dtype or dtype)
    d.op(op, [x], [y], attrs=attrs)
    return d


# --- reductions -------------------------------------------------------------------------

REDUCE = [("REDUCE_ALL", "bool"), ("REDUCE_ANY", "bool"), ("REDUCE_MAX", "int8"),
          ("REDUCE_MAX", "int16"), ("REDUCE_MAX", "int32"), ("REDUCE_MIN", "int8"),
          ("REDUCE_MIN", "int16"), ("REDUCE_MIN", "int32"), ("REDUCE_SUM", "int32")]


@pytest.mark.parametrize("op,dtype", REDUCE)
def test_reduce(op, dtype):
    rng = np.random.default_rng(_seed(op, dtype))
    for rank in range(1, 5):
        shape = tuple(int(v) for v in rng.integers(1, 6, size=rank))
        for axis in range(rank):
            out = tuple(1 if i == axis else n for i, n in enumerate(shape))
            kwargs = {"nan_mode": "PROPAGATE"} if op in ("REDUCE_MAX", "REDUCE_MIN") else {}
            d = Dual()
            x = d.input(shape, dtype)
            y = d.output(out, dtype)
            d.op(op, [x], [y], attrs={"axis": axis}, oracle_attrs=kwargs)
            lo, hi = (-(1 << 27), 1 << 27) if op == "REDUCE_SUM" else (None, None)
            check(d, [random_values(rng, shape, dtype, lo, hi)], expect="VALID",
                  label=f"{shape} axis {axis}")


def test_reduce_sum_overflow_and_errors():
    big = np.full((2, 3), INT_RANGES["int32"][1] // 2, np.int32)
    d = Dual()
    x = d.input((2, 3), "int32")
    y = d.output((1, 3), "int32")
    d.op("REDUCE_SUM", [x], [y], attrs={"axis": 0})
    check(d, [big], expect="VALID")
    d = Dual()
    x = d.input((3, 2), "int32")
    y = d.output((1, 2), "int32")
    d.op("REDUCE_SUM", [x], [y], attrs={"axis": 0})
    check(d, [np.full((3, 2), INT_RANGES["int32"][1] // 2, np.int32)], expect="UNPREDICTABLE")
    # Axis out of range; output dim on the axis not 1.
    for axis, out in [(2, (2, 1)), (-1, (2, 1)), (1, (2, 3))]:
        d = Dual()
        x = d.input((2, 3), "int32")
        y = d.output(out, "int32")
        d.op("REDUCE_MAX", [x], [y], attrs={"axis": axis}, oracle_attrs={"nan_mode": "PROPAGATE"})
        check(d, [np.zeros((2, 3), np.int32)], expect="ERROR", label=f"axis {axis} out {out}")


# --- CONCAT, REVERSE, TRANSPOSE, DIM ------------------------------------------------------

@pytest.mark.parametrize("dtype", DATA_TYPES)
def test_concat_reverse_transpose(dtype):
    rng = np.random.default_rng(_seed("crt", dtype))
    for rank in range(1, 5):
        shape = [int(v) for v in rng.integers(1, 5, size=rank)]
        for axis in range(rank):
            n = int(rng.integers(1, 4))
            shapes = []
            for _ in range(n):
                s = list(shape)
                s[axis] = int(rng.integers(1, 4))
                shapes.append(tuple(s))
            out = list(shape)
            out[axis] = sum(s[axis] for s in shapes)
            d = Dual()
            xs = [d.input(s, dtype) for s in shapes]
            y = d.output(out, dtype)
            d.op("CONCAT", xs, [y], attrs={"axis": axis})
            check(d, [random_values(rng, s, dtype) for s in shapes], expect="VALID",
                  label=f"concat {shapes} axis {axis}")
            check(unary("REVERSE", shape, shape, dtype, axis=axis),
                  [random_values(rng, shape, dtype)], expect="VALID", label=f"reverse {axis}")
        perms = [int(p) for p in rng.permutation(rank)]
        check(unary("TRANSPOSE", shape, [shape[p] for p in perms], dtype, perms=perms),
              [random_values(rng, shape, dtype)], expect="VALID", label=f"transpose {perms}")


@pytest.mark.parametrize("dtype,axis,out_shape", [("int8", 1, ()), ("bool", 2, ()),
                                                   ("int32", 0, (1,))])
def test_dim(dtype, axis, out_shape):
    shape = (2, 5, 3)
    # The binding cannot return a rank-0 shape tensor: use the CLI oracle.
    check(unary("DIM", shape, out_shape, dtype, "shape", axis=axis),
          [random_values(np.random.default_rng(axis), shape, dtype)], expect="VALID",
          backend="cli")


def test_layout_errors():
    z = np.zeros((2, 3), np.int8)
    # CONCAT: non-axis dims differ; bad axis; wrong output size.
    d = Dual()
    a, b = d.input((2, 3), "int8"), d.input((3, 3), "int8")
    y = d.output((5, 3), "int8")
    d.op("CONCAT", [a, b], [y], attrs={"axis": 1})
    check(d, [z, np.zeros((3, 3), np.int8)], expect="ERROR")
    d = Dual()
    a, b = d.input((2, 3), "int8"), d.input((2, 3), "int8")
    y = d.output((4, 3), "int8")
    d.op("CONCAT", [a, b], [y], attrs={"axis": 2})
    check(d, [z, z], expect="ERROR")
    d = Dual()
    a, b = d.input((2, 3), "int8"), d.input((2, 3), "int8")
    y = d.output((5, 3), "int8")
    d.op("CONCAT", [a, b], [y], attrs={"axis": 0})
    check(d, [z, z], expect="ERROR")
    # REVERSE axis out of range.
    check(unary("REVERSE", (2, 3), (2, 3), "int8", axis=2), [z], expect="ERROR")
    # TRANSPOSE: repeated perm, out-of-range perm, wrong output shape.
    check(unary("TRANSPOSE", (2, 3), (2, 2), "int8", perms=[0, 0]), [z], expect="ERROR")
    check(unary("TRANSPOSE", (2, 3), (3, 2), "int8", perms=[1, 2]), [z], expect="ERROR")
    check(unary("TRANSPOSE", (2, 3), (2, 3), "int8", perms=[1, 0]), [z], expect="ERROR")


# --- operators with shape operands: PAD, SLICE, TILE, RESHAPE ------------------------------

def pad_graph(shape, padding, pad_value, dtype, draft):
    d = Dual()
    d.draft = draft
    out = [shape[i] + padding[2 * i] + padding[2 * i + 1] for i in range(len(shape))]
    x = d.input(shape, dtype)
    p = d.const(padding, "shape")
    c = d.const([pad_value], dtype)
    y = d.output(out, dtype)
    d.op("PAD", [x, p, c], [y], draft_inputs=[x],
         draft_attrs={"padding": np.array(padding).reshape(-1, 2), "pad_const": pad_value})
    return d


@pytest.mark.parametrize("dtype", DATA_TYPES)
@FORMS
def test_pad(dtype, draft):
    rng = np.random.default_rng(_seed("pad", dtype, draft))
    for rank in range(1, 5):
        shape = [int(v) for v in rng.integers(1, 4, size=rank)]
        padding = [int(v) for v in rng.integers(0, 3, size=2 * rank)]
        value = bool(rng.integers(0, 2)) if dtype == "bool" else int(
            random_values(rng, (), dtype))
        check(pad_graph(shape, padding, value, dtype, draft),
              [random_values(rng, shape, dtype)], expect="VALID", label=f"{shape} {padding}")


def test_pad_negative_is_error():
    d = pad_graph([2, 3], [0, 0, 1, 1], 0, "int8", False)
    d.b.tensors  # graph built with valid padding; now one with a negative pad
    bad = Dual()
    x = bad.input((2, 3), "int8")
    p = bad.const([0, 0, -1, 1], "shape")
    c = bad.const([0], "int8")
    y = bad.output((2, 3), "int8")
    bad.op("PAD", [x, p, c], [y])
    check(bad, [np.zeros((2, 3), np.int8)], expect="ERROR")


def slice_graph(shape, start, size, dtype, draft):
    d = Dual()
    d.draft = draft
    x = d.input(shape, dtype)
    st = d.const(start, "shape")
    sz = d.const(size, "shape")
    y = d.output(size, dtype)
    d.op("SLICE", [x, st, sz], [y], draft_inputs=[x],
         draft_attrs={"start": list(start), "size": list(size)})
    return d


@pytest.mark.parametrize("dtype", DATA_TYPES)
@FORMS
def test_slice(dtype, draft):
    rng = np.random.default_rng(_seed("slice", dtype, draft))
    for rank in range(1, 5):
        shape = [int(v) for v in rng.integers(1, 6, size=rank)]
        start = [int(rng.integers(0, n)) for n in shape]
        size = [int(rng.integers(1, n - s + 1)) for n, s in zip(shape, start)]
        check(slice_graph(shape, start, size, dtype, draft), [random_values(rng, shape, dtype)],
              expect="VALID", label=f"{shape} {start} {size}")


@pytest.mark.parametrize("start,size", [([0, -1], [2, 1]), ([0, 1], [2, 3]), ([0, 0], [0, 3])])
def test_slice_errors(start, size):
    d = Dual()
    x = d.input((2, 3), "int8")
    st = d.const(start, "shape")
    sz = d.const(size, "shape")
    y = d.output([max(s, 1) for s in size], "int8")
    d.op("SLICE", [x, st, sz], [y])
    check(d, [np.zeros((2, 3), np.int8)], expect="ERROR")


@pytest.mark.parametrize("dtype", DATA_TYPES)
@FORMS
def test_tile_reshape(dtype, draft):
    rng = np.random.default_rng(_seed("tile", dtype, draft))
    for rank in range(1, 5):
        shape = [int(v) for v in rng.integers(1, 4, size=rank)]
        mult = [int(v) for v in rng.integers(1, 4, size=rank)]
        d = Dual()
        d.draft = draft
        x = d.input(shape, dtype)
        m = d.const(mult, "shape")
        y = d.output([a * b for a, b in zip(shape, mult)], dtype)
        d.op("TILE", [x, m], [y], draft_inputs=[x], draft_attrs={"multiples": mult})
        check(d, [random_values(rng, shape, dtype)], expect="VALID", label=f"tile {shape} {mult}")

        size = int(np.prod(shape))
        new_shape = [size] if rank == 1 else [1, size, 1][: int(rng.integers(1, 4))]
        if int(np.prod(new_shape)) != size:
            new_shape = [size]
        d = Dual()
        d.draft = draft
        x = d.input(shape, dtype)
        s = d.const(new_shape, "shape")
        y = d.output(new_shape, dtype)
        d.op("RESHAPE", [x, s], [y], draft_inputs=[x], draft_attrs={"new_shape": new_shape})
        check(d, [random_values(rng, shape, dtype)], expect="VALID",
              label=f"reshape {shape}->{new_shape}")


def test_tile_reshape_errors():
    z = np.zeros((2, 3), np.int16)
    d = Dual()
    x = d.input((2, 3), "int16")
    m = d.const([2, 2], "shape")
    y = d.output((4, 5), "int16")
    d.op("TILE", [x, m], [y])
    check(d, [z], expect="ERROR")
    d = Dual()
    x = d.input((2, 3), "int16")
    s = d.const([7], "shape")
    y = d.output((7,), "int16")
    d.op("RESHAPE", [x, s], [y])
    check(d, [z], expect="ERROR")


# --- GATHER / SCATTER ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32"])
def test_gather_scatter(dtype):
    rng = np.random.default_rng(_seed("gs", dtype))
    for _ in range(15):
        n, k, c, w = (int(v) for v in rng.integers(1, 6, size=4))
        indices = rng.integers(0, k, size=(n, w)).astype(np.int32)
        d = Dual()
        vals = d.input((n, k, c), dtype)
        idx = d.input((n, w), "int32")
        y = d.output((n, w, c), dtype)
        d.op("GATHER", [vals, idx], [y])
        check(d, [random_values(rng, (n, k, c), dtype), indices], expect="VALID")

        w = int(rng.integers(1, k + 1))
        perm = np.stack([rng.permutation(k)[:w] for _ in range(n)]).astype(np.int32)
        d = Dual()
        vin = d.input((n, k, c), dtype)
        idx = d.input((n, w), "int32")
        rows = d.input((n, w, c), dtype)
        y = d.output((n, k, c), dtype)
        d.op("SCATTER", [vin, idx, rows], [y])
        check(d, [random_values(rng, (n, k, c), dtype), perm, random_values(rng, (n, w, c), dtype)],
              expect="VALID")


def test_gather_scatter_unpredictable():
    # GATHER's REQUIRE(0 <= k < K) is checked against the spec text only: the reference
    # model reports it and then reads out of bounds (it aborts).
    d = Dual()
    vals = d.input((1, 3, 2), "int8")
    idx = d.input((1, 2), "int32")
    y = d.output((1, 2, 2), "int8")
    d.op("GATHER", [vals, idx], [y])
    for bad in ([[0, 3]], [[-1, 0]]):
        status, exc = run_ours(d.graph, [np.zeros((1, 3, 2), np.int8), np.array(bad, np.int32)])
        assert status == "UNPREDICTABLE" and "k < K" in str(exc)
    d = Dual()
    vin = d.input((1, 3, 2), "int8")
    idx = d.input((1, 2), "int32")
    rows = d.input((1, 2, 2), "int8")
    y = d.output((1, 3, 2), "int8")
    d.op("SCATTER", [vin, idx, rows], [y])
    # SCATTER writing one output position twice: REQUIRE(output_modified == false).
    check(d, [np.zeros((1, 3, 2), np.int8), np.array([[1, 1]], np.int32),
              np.ones((1, 2, 2), np.int8)], expect="UNPREDICTABLE")


@pytest.mark.parametrize("draft", [False, True], ids=["tosa1", "draft"])
def test_operator_chain(draft):
    # Several operators feeding each other through intermediate tensors.
    rng = np.random.default_rng(77 + draft)
    d = Dual()
    d.draft = draft
    a = d.input((2, 3, 4), "int32")
    b = d.input((1, 3, 1), "int32")
    s = d.intermediate((2, 3, 4), "int32")
    d.op("ADD", [a, b], [s])
    shp = d.const([6, 4], "shape")
    r = d.intermediate((6, 4), "int32")
    d.op("RESHAPE", [s, shp], [r], draft_inputs=[s], draft_attrs={"new_shape": [6, 4]})
    t = d.intermediate((4, 6), "int32")
    d.op("TRANSPOSE", [r], [t], attrs={"perms": [1, 0]})
    m = d.intermediate((4, 1), "int32")
    d.op("REDUCE_MAX", [t], [m], attrs={"axis": 1}, oracle_attrs={"nan_mode": "PROPAGATE"})
    y = d.output((4, 2), "int32")
    d.op("CONCAT", [m, m], [y], attrs={"axis": 1})
    check(d, [random_values(rng, (2, 3, 4), "int32", -1000, 1000),
              random_values(rng, (1, 3, 1), "int32", -1000, 1000)], expect="VALID")
