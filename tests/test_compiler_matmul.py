"""Compiler: TOSA MATMUL on the MAC array (compiler/kinds/matmul/layer.py), int8 x int8 -> int32
and int16 x int16 -> int48 (B split into bytes), on the ISA simulator, compared bit-exactly
with the reference interpreter."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from compiler.kinds.matmul.layer import MatmulLayer  # noqa: E402

CONFIGS = {"small": SMALL_CONFIG, "default": DEFAULT_CONFIG}


def _matmul(rng, n, h, c, w, dtype, azp=0, bzp=0, extremes=False):
    g = VecBuilder(rng)
    a = g.input((n, h, c), dtype)
    b = g.input((n, c, w), dtype)
    out = "int32" if dtype == "int8" else "int48"
    y = g.op("MATMUL", [a, b, g.const([azp], dtype), g.const([bzp], dtype)], (n, h, w), out)
    inputs = g.inputs(rng)
    if extremes:        # the largest products: every partial sum at the type's edge
        lo = -(1 << (8 * np.dtype(inputs[a].dtype).itemsize - 1))
        inputs[a] = np.full_like(inputs[a], lo)
        inputs[b][..., 0] = lo
        inputs[b][..., -1] = -lo - 1
    return g.graph([y]), inputs


@pytest.mark.parametrize("config,n,h,c,w,azp,bzp", [
    ("small", 2, 5, 7, 6, 0, 0),
    ("small", 1, 9, 13, 3, -128, 127),        # zero points at the extremes
    ("default", 2, 19, 40, 33, 17, -5),       # several c and w blocks, partial last ones
    ("default", 1, 3, 300, 2, 0, 0),          # C beyond one VPOOL window (the old path's limit)
])
def test_matmul_int8(config, n, h, c, w, azp, bzp):
    rng = np.random.default_rng(n * 1000 + h * 100 + c + w)
    graph, inputs = _matmul(rng, n, h, c, w, "int8", azp, bzp)
    comp = run_and_compare(graph, inputs, CONFIGS[config])
    assert any(isinstance(layer, MatmulLayer) for layer in comp.layers)


@pytest.mark.parametrize("config,n,h,c,w,extremes", [
    ("small", 2, 5, 7, 6, False),
    ("small", 1, 4, 9, 5, True),              # int16 extremes: int48 sums past 2**32
    ("default", 2, 11, 37, 20, False),
    ("default", 1, 2, 600, 3, True),
])
def test_matmul_int16(config, n, h, c, w, extremes):
    rng = np.random.default_rng(n * 1000 + h * 100 + c + w + 1)
    graph, inputs = _matmul(rng, n, h, c, w, "int16", extremes=extremes)
    comp = run_and_compare(graph, inputs, CONFIGS[config])
    assert any(isinstance(layer, MatmulLayer) for layer in comp.layers)


def test_int8_matmul_of_reshaped_rank4_inputs():
    """MATMUL of int8 graph inputs reshaped from rank 4 (brick tensors: the vector-unit
    fallback) whose batch regroups pixels ([2,3,12,7] -> [6,12,7]): the brick view was
    aliased with its root's batch stride (wrong results from the second batch on)."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from vector_graphs import VecBuilder, run_and_compare
    from isa.config import DEFAULT_CONFIG

    rng = np.random.default_rng(0)
    g = VecBuilder(rng)
    a = g.op("RESHAPE", [g.input((2, 3, 5, 12), "int8"), g.const(np.array([6, 5, 12]), "shape")], (6, 5, 12), "int8")
    b = g.op("RESHAPE", [g.input((2, 3, 12, 7), "int8"), g.const(np.array([6, 12, 7]), "shape")], (6, 12, 7), "int8")
    y = g.op("MATMUL", [a, b, g.const(np.array([3]), "int8"), g.const(np.array([-2]), "int8")], (6, 5, 7), "int32")
    run_and_compare(g.graph([y]), g.inputs(rng), DEFAULT_CONFIG)
