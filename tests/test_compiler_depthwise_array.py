"""Compiler: int8 DEPTHWISE_CONV2D -> RESCALE [-> CLAMP] fused on the MAC array as a grouped
convolution (compiler/kinds/conv/: one diagonal weight tile per output-channel block and
tap), run on the ISA simulator and compared bit-exactly with the reference interpreter;
and the unit choice (compiler/kinds/depthwise/choice.py) checked against the cycle model."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from compiler.core.ir import ConvLayer  # noqa: E402


def _out_size(size, k, s, d, p0, p1):
    return (size + p0 + p1 - (k - 1) * d - 1) // s + 1


def _fits(size, k, s, d, p0, p1):
    return (size - 1 + p0 + p1 - (k - 1) * d) % s == 0


def depthwise_graph(rng, n, hw, c, m, kernel, stride, dil, pad, izp=0, wzp=0, clamp=None, per_channel=True):
    """x -> DEPTHWISE_CONV2D -> RESCALE int8 [-> CLAMP]; the input size is the first from
    ``hw`` upwards that the windows tile exactly (the spec's idiv_check)."""
    (kh, kw), (sy, sx), (dy, dx) = kernel, stride, dil
    h = next(v for v in range(hw[0], hw[0] + 20) if _fits(v, kh, sy, dy, pad[0], pad[1]))
    w = next(v for v in range(hw[1], hw[1] + 20) if _fits(v, kw, sx, dx, pad[2], pad[3]))
    oh, ow = _out_size(h, kh, sy, dy, pad[0], pad[1]), _out_size(w, kw, sx, dx, pad[2], pad[3])
    oc = c * m
    g = VecBuilder(rng, "dw")
    x = g.input((n, h, w, c), "int8")
    wt = g.const(rng.integers(-128, 128, (kh, kw, c, m)), "int8")
    b = g.const(rng.integers(-5000, 5000, (oc,)), "int32")
    acc = g.op("DEPTHWISE_CONV2D", [x, wt, b, g.const([izp], "int8"), g.const([wzp], "int8")], (n, oh, ow, oc),
               "int32", pad=list(pad), stride=list(stride), dilation=list(dil), acc_type="INT32")
    count = oc if per_channel else 1
    y = g.rescale(acc, "int8", rng.integers(1 << 29, 1 << 30, count), rng.integers(36, 42, count),
                  ozp=int(rng.integers(-20, 20)), per_channel=per_channel)
    if clamp is not None:
        y = g.op("CLAMP", [y], g.shape(y), "int8", min_val=clamp[0], max_val=clamp[1])
    return g.graph([y]), g.inputs(rng)


def _array_layers(comp):
    return [layer for layer in comp.layers if isinstance(layer, ConvLayer) and layer.depth_multiplier]


CASES = [
    # n, hw, c, m, kernel, stride, dilation, pad, input_zp, weight_zp, clamp
    (1, (12, 11), 32, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), -128, 0, (0, 127)),   # MobileNetV2's form
    (1, (13, 13), 40, 1, (3, 3), (2, 2), (1, 1), (0, 1, 0, 1), 7, 0, (-128, 90)),     # stride 2, partial block
    (2, (9, 10), 5, 1, (3, 2), (2, 1), (2, 1), (1, 0, 2, 1), -7, 3, None),           # dilation, weight zp
    (1, (9, 11), 5, 3, (5, 5), (2, 1), (2, 2), (1, 1, 0, 0), -5, 3, (-100, 100)),    # channel multiplier 3
    (1, (7, 8), 24, 2, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 0, -4, None),           # multiplier 2, 3 blocks
]


@pytest.mark.parametrize("case", CASES)
def test_depthwise_fused_on_the_array(case):
    n, hw, c, m, kernel, stride, dil, pad, izp, wzp, clamp = case
    rng = np.random.default_rng(sum(hw) + c + m)
    graph, inputs = depthwise_graph(rng, n, hw, c, m, kernel, stride, dil, pad, izp, wzp, clamp)
    comp = run_and_compare(graph, inputs, DEFAULT_CONFIG)
    layers = _array_layers(comp)
    assert len(layers) == 1 and layers[0].depth_multiplier == m
    assert len(comp.layers) == 1          # the RESCALE and CLAMP are fused, the padding folded


def test_depthwise_on_the_array_small_config():
    """4x4 array: several channel blocks of 4, tiles cut by the small ACC."""
    rng = np.random.default_rng(11)
    graph, inputs = depthwise_graph(rng, 1, (14, 13), 10, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 3, 0,
                                    (-128, 127), per_channel=False)
    comp = run_and_compare(graph, inputs, SMALL_CONFIG)
    assert len(_array_layers(comp)) == 1


# Layers with a clear winner (over 5% apart in the cycle model).  "array" is the array with
# the vector unit's VDWCONV share of its blocks (compiler/kinds/conv/vector_share.py): it now
# wins the layers of a few output pixels with many taps too (VDWCONV takes most of their
# blocks, where every MATMUL still costs array_rows cycles), which the vector unit's
# elementwise path (a VALU multiply and add per tap) used to win by 1.5x; with a weight zero
# point (no share: VDWCONV has none) the array alone still beats it (7x7 kernels, one
# output pixel: 1,229 against 2,620 cycles).  No layer is known where that path wins now.
CHOICE_CASES = [
    # n, hw, c, m, kernel, stride, dilation, pad, weight_zp, faster unit
    (1, (28, 28), 32, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 0, "array"),
    (1, (4, 4), 16, 1, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), 0, "array"),
    (1, (2, 2), 64, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 0, "array"),
    (1, (8, 8), 16, 1, (7, 7), (1, 1), (1, 1), (0, 0, 0, 0), 0, "array"),
    (1, (7, 7), 48, 1, (7, 7), (1, 1), (1, 1), (0, 0, 0, 0), 0, "array"),
    (2, (7, 7), 16, 1, (7, 7), (1, 1), (1, 1), (0, 0, 0, 0), 0, "array"),
    (1, (7, 7), 16, 1, (7, 7), (1, 1), (1, 1), (0, 0, 0, 0), 3, "array"),
]


def _cycles(graph, monkeypatch, force: str | None) -> tuple[int, str]:
    """(total cycles in the cycle model, the unit the depthwise layer ran on); ``force``
    overrides the vector path's estimate so that the choice goes one way."""
    from compiler.driver import run_pipeline
    from compiler.estimate.layers import estimate_compilation
    from compiler.kinds.depthwise import choice

    with monkeypatch.context() as patch:
        if force is not None:
            patch.setattr(choice, "vector_cycles", lambda *args: 0 if force == "vector" else 1 << 60)
        comp = run_pipeline(graph, DEFAULT_CONFIG)
    unit = "array" if _array_layers(comp) else "vector"
    assert force is None or unit == force
    return estimate_compilation(comp).total_cycles, unit


@pytest.mark.parametrize("case", CHOICE_CASES)
def test_depthwise_unit_choice_takes_the_faster(case, monkeypatch):
    """Both units timed by the cycle model (sim/npu_timing.py) on the whole compiled program:
    the layer must run on the faster one."""
    *shape, wzp, faster = case
    graph, _ = depthwise_graph(np.random.default_rng(1), *shape, wzp=wzp, clamp=(0, 127))
    array, _ = _cycles(graph, monkeypatch, "array")
    vector, _ = _cycles(graph, monkeypatch, "vector")
    assert (array < vector) == (faster == "array") and abs(array - vector) > 0.05 * min(array, vector), \
        f"fixture no longer has a clear winner: array {array}, vector {vector} cycles"
    chosen, unit = _cycles(graph, monkeypatch, None)
    assert unit == faster and chosen == min(array, vector)


@pytest.mark.rtl
def test_depthwise_on_the_array_rtl():
    """The fused depthwise layer on the RTL (Verilator): the reference interpreter's outputs
    and the ISA simulator's cycle count (MobileNetV2's form, plus a stride-2 block with a
    partial channel block and a channel multiplier of 2)."""
    from npu import backends
    from sim.isa.sim import IsaSim
    from sim.reference import run_graph

    for case in (CASES[0], CASES[1], CASES[4]):
        n, hw, c, m, kernel, stride, dil, pad, izp, wzp, clamp = case
        rng = np.random.default_rng(sum(hw) + c + m)
        graph, inputs = depthwise_graph(rng, n, hw, c, m, kernel, stride, dil, pad, izp, wzp, clamp)
        program = run_pipeline_program(graph)
        got, stats = backends.run(backends.Model("depthwise", program=program), inputs, "rtl", DEFAULT_CONFIG)
        for name, want in run_graph(graph, inputs).items():
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        assert stats["cycles"] == IsaSim(DEFAULT_CONFIG).run(program, program.memory_image(inputs)).cycles


@pytest.mark.rtl
def test_depthwise_on_the_array_rtl_small_config():
    """The 4x4 array: three channel blocks, the reference interpreter's outputs and the ISA
    simulator's cycle count."""
    from npu import backends
    from sim.isa.sim import IsaSim
    from sim.reference import run_graph

    rng = np.random.default_rng(11)
    graph, inputs = depthwise_graph(rng, 1, (14, 13), 10, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 3, 0,
                                    (-128, 127), per_channel=False)
    program = run_pipeline_program(graph, SMALL_CONFIG)
    got, stats = backends.run(backends.Model("depthwise", program=program), inputs, "rtl", SMALL_CONFIG)
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    assert stats["cycles"] == IsaSim(SMALL_CONFIG).run(program, program.memory_image(inputs)).cycles


def run_pipeline_program(graph, config=DEFAULT_CONFIG):
    from compiler.driver import run_pipeline

    comp = run_pipeline(graph, config)
    assert len(_array_layers(comp)) == 1
    return comp.program


def test_depthwise_on_the_array_after_vector_layer_and_pad():
    """A vector-unit producer (CLAMP) writes bricks for the array's depthwise layer, and a PAD
    with the input zero point folds into its padding (no copy)."""
    rng = np.random.default_rng(5)
    g = VecBuilder(rng, "dwpad")
    izp = -3
    x = g.input((1, 10, 12, 20), "int8")
    c = g.op("CLAMP", [x], (1, 10, 12, 20), "int8", min_val=-100, max_val=90)
    p = g.op("PAD", [c, g.const(np.array([0, 0, 1, 1, 2, 0, 0, 0]), "shape"), g.const([izp], "int8")],
             (1, 12, 14, 20), "int8")
    wt = g.const(rng.integers(-128, 128, (3, 3, 20, 1)), "int8")
    b = g.const(rng.integers(-5000, 5000, (20,)), "int32")
    acc = g.op("DEPTHWISE_CONV2D", [p, wt, b, g.const([izp], "int8"), g.const([0], "int8")], (1, 10, 12, 20),
               "int32", pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], acc_type="INT32")
    y = g.rescale(acc, "int8", rng.integers(1 << 29, 1 << 30, 20), rng.integers(36, 42, 20), ozp=4,
                  per_channel=True)
    comp = run_and_compare(g.graph([y]), g.inputs(rng), DEFAULT_CONFIG)
    kinds = [type(layer).__name__ for layer in comp.layers]
    assert kinds == ["EltLayer", "ConvLayer"] and _array_layers(comp)[0].pad == (1, 1, 2, 0)
