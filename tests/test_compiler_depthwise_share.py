"""Compiler: a depthwise layer's channel blocks shared between the MAC array and the vector
unit (compiler/kinds/conv/vector_share.py: VDWCONV on the last blocks while the array runs
the first), run on the ISA simulator with its hazard check and compared bit-exactly with
the reference interpreter; the split timed by the cycle model against the array alone."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_compiler_depthwise_array import depthwise_graph  # noqa: E402
from vector_graphs import run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from compiler.core.ir import ConvLayer  # noqa: E402
from compiler.core.views import ceil_div  # noqa: E402

SHARE_CASES = [
    # n, hw, c, kernel, stride, dilation, pad, input_zp, clamp, vector blocks (None: the compiler's)
    (1, (28, 28), 64, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), -128, (0, 127), None),    # MobileNetV2's form
    (1, (29, 29), 72, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 5, (-128, 100), 2),      # stride 2, partial block
    (2, (12, 11), 48, (3, 2), (1, 2), (1, 1), (1, 0, 1, 1), -9, (-128, 127), 1),     # two images, 3x2 kernel
    (1, (16, 15), 40, (5, 5), (1, 1), (2, 1), (4, 4, 2, 2), 17, (-50, 60), 2),       # dilation, wide padding
    (1, (9, 40), 96, (3, 3), (1, 1), (1, 1), (0, 0, 1, 1), 0, (-128, 127), 5),       # five of six blocks
    # a part of one block: the array its first rows (whole tiles), the vector unit the rest
    (1, (56, 56), 40, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), -128, (0, 127), 1.6),
    (2, (60, 47), 24, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 12, (-128, 127), 0.45),
    (1, (64, 20), 16, (5, 3), (1, 1), (1, 1), (2, 2, 1, 1), -3, (-128, 127), 0.5),   # one block
    # one tile per block: the part rounds to the whole block, the share starts at the next
    (1, (21, 17), 48, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 12, (-128, 127), 1.3),
]


def _layer(comp) -> ConvLayer:
    (layer,) = [layer for layer in comp.layers if isinstance(layer, ConvLayer)]
    return layer


def _compile_share(monkeypatch, case, config=DEFAULT_CONFIG):
    n, hw, c, kernel, stride, dil, pad, izp, clamp, blocks = case
    rng = np.random.default_rng(sum(hw) + c)
    graph, inputs = depthwise_graph(rng, n, hw, c, 1, kernel, stride, dil, pad, izp, 0, clamp)
    if blocks is not None:
        from compiler.kinds.depthwise import choice

        monkeypatch.setattr(choice, "vector_blocks", lambda *args: blocks)
    return graph, inputs, run_and_compare(graph, inputs, config)


@pytest.mark.parametrize("case", SHARE_CASES)
def test_depthwise_shared_with_the_vector_unit(case, monkeypatch):
    """Every output bit-exact, no hazard between the two units' instructions (the ISA
    simulator checks every read and write against the waits), the share's blocks computed
    by VDWCONV and the rest by the array."""
    graph, inputs, comp = _compile_share(monkeypatch, case)
    layer = _layer(comp)
    blocks = ceil_div(layer.out_shape[3], DEFAULT_CONFIG.array_cols)
    assert 0 < layer.vector_blocks < blocks
    names = [i.name for i in comp.program.instructions]
    assert "VDWCONV" in names and "MATMUL" in names
    share = comp.plans[0].share
    assert "vector unit" in comp.plans[0].describe()
    if share.fraction:                          # the block between: both units compute rows of it
        assert 0 < share.array_rows < layer.out_shape[1], share


def test_depthwise_share_on_the_small_config(monkeypatch):
    """The 4x4 array (ASRAM of 1,024 rows): the share's region and bands cut small."""
    case = (1, (14, 13), 10, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 3, (-128, 127), 1)
    _, _, comp = _compile_share(monkeypatch, case, SMALL_CONFIG)
    assert _layer(comp).vector_blocks == 1


def test_the_share_is_faster_than_the_array_alone(monkeypatch):
    """MobileNetV2's 28x28x192 depthwise layer in the cycle model: the split the compiler
    picks against all blocks on the array."""
    from compiler.driver import run_pipeline
    from compiler.estimate.layers import estimate_compilation
    from compiler.kinds.depthwise import choice

    rng = np.random.default_rng(3)
    graph, _ = depthwise_graph(rng, 1, (28, 28), 192, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), -128, 0, (0, 127))
    shared = run_pipeline(graph, DEFAULT_CONFIG)
    assert _layer(shared).vector_blocks > 0
    with monkeypatch.context() as patch:
        patch.setattr(choice, "vector_blocks", lambda *args: 0)
        alone = run_pipeline(graph, DEFAULT_CONFIG)
    fast, slow = (estimate_compilation(c).total_cycles for c in (shared, alone))
    assert fast < 0.8 * slow, (fast, slow)


@pytest.mark.parametrize("seed", range(12))
def test_random_depthwise_shares(seed, monkeypatch):
    """Random shapes, strides, dilations, paddings, zero points and clamps, with a random
    share (whole blocks or a part of one): bit-exact and hazard-free on the ISA simulator."""
    rng = np.random.default_rng(900 + seed)
    kh, kw = (int(k) for k in rng.integers(1, 6, 2))
    sy, sx = (int(s) for s in rng.integers(1, 3, 2))
    dy, dx = (int(d) for d in rng.choice([1, 1, 2], 2))
    pad = tuple(int(p) for p in rng.integers(0, 3, 4))
    c = int(rng.integers(8, 70))
    hw = (int(rng.integers(max(kh * dy, 6), 40)), int(rng.integers(max(kw * dx, 6), 40)))
    blocks = ceil_div(c, DEFAULT_CONFIG.array_cols)
    share = float(np.round(rng.uniform(0.2, blocks - 0.2), 2))
    lo = int(rng.integers(-128, 0))
    case = (int(rng.integers(1, 3)), hw, c, (kh, kw), (sy, sx), (dy, dx), pad, int(rng.integers(-128, 128)),
            (lo, int(rng.integers(lo, 128))), share)
    _, _, comp = _compile_share(monkeypatch, case)
    assert "VDWCONV" in [i.name for i in comp.program.instructions] or comp.plans[0].share is None, case


@pytest.mark.rtl
@pytest.mark.parametrize("config", [DEFAULT_CONFIG, SMALL_CONFIG], ids=["default", "small"])
def test_depthwise_share_on_the_rtl(config, monkeypatch):
    """The share on the RTL (Verilator): a part of one block on each unit, the reference
    interpreter's outputs and the ISA simulator's cycle count."""
    from npu import backends
    from sim.isa.sim import IsaSim

    case = (1, (30, 23), 3 * config.array_cols - 3, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), -7, (-100, 127), 1.5)
    graph, inputs, comp = _compile_share(monkeypatch, case, config)
    assert comp.plans[0].share is not None and comp.plans[0].share.fraction
    from sim.reference import run_graph

    got, stats = backends.run(backends.Model("depthwise", program=comp.program), inputs, "rtl", config)
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    assert stats["cycles"] == IsaSim(config).run(comp.program, comp.program.memory_image(inputs)).cycles
