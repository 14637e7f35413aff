"""Elementwise chains merged into one layer (compiler/kinds/elementwise/fusion.py): the merged
program is bit-exact with the reference interpreter (ISA simulator, hazard checker on), the
intermediates are no longer stored, and a chain is left apart where a merge would be wrong."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from compiler.kinds.elementwise.layer import EltLayer  # noqa: E402


def _residual(g: VecBuilder, a: str, b: str, rng, per_channel: bool = False) -> tuple[list[str], str]:
    """TFLite's int8 residual ADD as its converter writes it: RESCALE both operands to
    int32, ADD, RESCALE to int8, CLAMP (ReLU).  Returns (intermediates, result)."""
    c = g.shape(a)[-1]
    ra = g.rescale(a, "int32", [1 << 30], [20], izp=-3)
    mb = rng.integers(1 << 29, 1 << 30, c) if per_channel else [1_518_500_250]
    rb = g.rescale(b, "int32", mb, [21] * (c if per_channel else 1), izp=5, per_channel=per_channel)
    s = g.op("ADD", [ra, rb], g.shape(a), "int32")
    r = g.rescale(s, "int8", [1_200_000_000], [38], ozp=-7)
    y = g.op("CLAMP", [r], g.shape(a), "int8", min_val=-7, max_val=127)
    return [ra, rb, s, r], y


def _elt_layers(comp) -> list[EltLayer]:
    return [layer for layer in comp.layers if isinstance(layer, EltLayer)]


@pytest.mark.parametrize("shape,per_channel", [((1, 9, 7, 40), False), ((1, 5, 6, 24), True), ((37,), False),
                                               ((3, 1000), False)])
def test_a_residual_chain_is_one_bit_exact_layer(shape, per_channel):
    rng = np.random.default_rng(sum(shape))
    g = VecBuilder(rng)
    a, b = g.input(shape, "int8"), g.input(shape, "int8")
    inner, y = _residual(g, a, b, rng, per_channel)
    comp = run_and_compare(g.graph([y]), g.inputs(rng), DEFAULT_CONFIG)
    layers = _elt_layers(comp)
    assert len(layers) == 1, [layer.ops for layer in layers]
    assert len(layers[0].ops) == 5 and sorted(layers[0].inputs) == sorted([a, b])
    # Four vector steps: the CLAMP (ReLU) is the last RESCALE's own clamp.
    assert [s.name for s in layers[0].steps] == ["VRESCALE", "VRESCALE", "VALU", "VRESCALE"]
    assert layers[0].steps[-1].fields["clamp"] == 1
    # The intermediates never reach external memory.
    assert not any(t in comp.flow.roots for t in inner)


def test_an_intermediate_the_graph_returns_is_stored():
    rng = np.random.default_rng(7)
    g = VecBuilder(rng)
    a, b = g.input((1, 4, 4, 16), "int8"), g.input((1, 4, 4, 16), "int8")
    (_, _, s, _), y = _residual(g, a, b, rng)
    comp = run_and_compare(g.graph([y, s]), g.inputs(rng), SMALL_CONFIG)
    assert s in comp.flow.roots
    assert any(layer.output == s for layer in _elt_layers(comp))


def test_an_intermediate_read_twice_is_stored():
    rng = np.random.default_rng(8)
    g = VecBuilder(rng)
    a, b = g.input((2, 50), "int8"), g.input((2, 50), "int8")
    (_, _, s, _), y = _residual(g, a, b, rng)
    z = g.op("MAXIMUM", [s, g.const(np.array([[-100]]), "int32")], (2, 50), "int32")
    comp = run_and_compare(g.graph([y, z]), g.inputs(rng), SMALL_CONFIG)
    assert s in comp.flow.roots


def test_a_broadcast_operand_and_a_chain_of_different_shapes():
    """Operators computing a smaller shape that a later one broadcasts ([1, C] and [1, 1]
    against [N, C]) stay apart (a merge would recompute them for every row); the chain
    computing [N, C] merges around them."""
    rng = np.random.default_rng(9)
    g = VecBuilder(rng)
    x = g.input((5, 33), "int16")
    bias = g.input((1, 33), "int16")
    w = g.rescale(x, "int32", [1 << 30], [30])
    v = g.op("ADD", [w, g.rescale(bias, "int32", [1 << 30], [30])], (5, 33), "int32")
    small = g.input((1, 1), "int32")
    m = g.op("MAXIMUM", [small, g.const(np.array([[3]]), "int32")], (1, 1), "int32")
    out = g.op("SUB", [v, m], (5, 33), "int32")
    comp = run_and_compare(g.graph([out]), g.inputs(rng), SMALL_CONFIG)
    assert m in comp.flow.roots
    assert sorted(len(layer.ops) for layer in _elt_layers(comp)) == [1, 1, 3]


def test_a_mixed_chain_merges_and_stays_bit_exact():
    """Two rescales of one input, SUB, a rounding shift by a broadcast constant, a MUL with
    a shift of the result by itself, a narrowing rescale: one layer."""
    rng = np.random.default_rng(10)
    g = VecBuilder(rng)
    x = g.input((4, 40), "int8")
    d = g.op("SUB", [g.rescale(x, "int32", [1 << 30], [30]), g.rescale(x, "int32", [1 << 30], [31])],
             (4, 40), "int32")
    e = g.op("ARITHMETIC_RIGHT_SHIFT", [d, g.const(np.array([[2]]), "int32")], (4, 40), "int32", round=True)
    f = g.mul(e, e, 3)
    y = g.rescale(f, "int8", [1 << 30], [40], ozp=4)
    comp = run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)
    assert len(_elt_layers(comp)) == 1


def test_a_select_of_a_merged_int32_value_is_bit_exact():
    """SELECT reads its value operands b and c with one set of strides, so an int32
    intermediate it selects from stays in ASRAM like the other operand (found by the
    Circle fuzzer: an ACC temporary there tripped the lowering's layout check)."""
    rng = np.random.default_rng(11)
    g = VecBuilder(rng)
    x, y = g.input((3, 20), "int8"), g.input((3, 20), "int32", -5000, 5000)
    cond = g.op("GREATER", [y, g.const(np.array([[0]]), "int32")], (3, 20), "bool")
    w = g.rescale(x, "int32", [1 << 30], [25], izp=1)
    out = g.op("SELECT", [cond, w, y], (3, 20), "int32")
    comp = run_and_compare(g.graph([out]), g.inputs(rng), SMALL_CONFIG)
    assert len(_elt_layers(comp)) == 1


def test_a_long_chain_is_cut_into_bounded_layers():
    """Every merged intermediate is a tile temporary: a chain of 150 CLAMPs becomes layers of
    at most MAX_STEPS steps (unbounded, tiles shrink to nothing), bit-exact."""
    from compiler.kinds.elementwise.fusion import MAX_STEPS

    rng = np.random.default_rng(13)
    g = VecBuilder(rng)
    x = g.input((2, 40), "int8")
    for i in range(150):
        x = g.op("CLAMP", [x], (2, 40), "int8", min_val=-120 + i % 7, max_val=120 - i % 5)
    comp = run_and_compare(g.graph([x]), g.inputs(rng), SMALL_CONFIG)
    layers = _elt_layers(comp)
    assert 1 < len(layers) < 10 and all(len(layer.steps) <= MAX_STEPS for layer in layers)
