"""Compiler: a few-channel convolution reading a graph input gets it from the host as
patches (compiler/kinds/conv/input_patches.py, isa/patches.py), bit-exact against the
reference interpreter on the ISA simulator (wait masks checked under random timing)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, build_chain  # noqa: E402
from test_compiler_conv import CONFIGS, run_and_compare  # noqa: E402

from isa.config import NAMED_CONFIGS  # noqa: E402
from isa.patches import Patches  # noqa: E402
from sim.isa.sim import IsaSim  # noqa: E402

from compiler.driver import compile_graph, run_pipeline  # noqa: E402
from compiler.kinds.conv import input_patches  # noqa: E402
from compiler.kinds.conv.input_patches import PatchConvLayer  # noqa: E402

CONFIGS = dict(CONFIGS, array32=NAMED_CONFIGS["array32"])

# (config, input shape, spec, (patch height, width, step y, step x)): the patch shape worked
# out by hand as the one with the fewest MATMULs per output pixel (taps x bricks), then the
# fewest bytes, of those within the bytes of the padded one-pixel bricks.  (Pads as the
# graph builder makes them: bottom and right grow until the output size is exact.)
CASES = [
    # ResNet-50's stem, 7x7/2 with 3 channels on 16 rows, 21x23 -> 11x12 (pads 3,3,3,3): 7x2
    # and 2x7 patches both take 1x4 or 4x1 taps of 3 bricks (12; 7x7 would take 10 but is
    # over the budget of 27x29 bricks); 7x2 has fewer bytes (11x15 against 14x12 patches).
    ("default", (1, 21, 23, 3), ConvSpec(oc=18, kernel=(7, 7), stride=(2, 2), pad=(3, 2, 3, 2)), (7, 2, 2, 2)),
    # The same on 32 rows, two 15x15 images -> 8x8: the whole 7x7 window, 147 lanes in 5
    # bricks, one tap (8x8 patches of 160 bytes, within 21x21 bricks of 32).
    ("array32", (2, 15, 15, 3), ConvSpec(oc=40, kernel=(7, 7), stride=(2, 2), pad=(3, 3, 3, 3)), (7, 7, 2, 2)),
    # MobileNetV2's stem, 3x3/2: the 3x3 window, 27 lanes in 2 bricks, one tap.
    ("default", (1, 17, 18, 3), ConvSpec(oc=32, kernel=(3, 3), stride=(2, 2), pad=(0, 1, 0, 1)), (3, 3, 2, 2)),
    # Stride 1, one channel, 4 rows, 9x11 with pads of 1: 3x1 and 1x3 patches take 3 taps of
    # one brick (3x3 would take one tap of 3 bricks but 9x11 patches of 12 bytes are over
    # the 11x13 bricks of 4); 3x1 has fewer bytes (9x13 against 11x11).
    ("small", (1, 9, 11, 1), ConvSpec(oc=5, kernel=(3, 3), stride=(1, 1), pad=(1, 1, 1, 1)), (3, 1, 1, 1)),
    # Stride 3 in y: 1x7 (rows not packed: step 1, stride 3 kept; 5 taps of one brick) ties
    # with 5x7 (one tap of 5 bricks) and has fewer bytes.
    ("default", (2, 19, 21, 2), ConvSpec(oc=20, kernel=(5, 7), stride=(3, 2), pad=(2, 1, 3, 2)), (1, 7, 1, 2)),
    # AlexNet-like 11x11/4 on the tiny configuration (4 rows, 1 channel): the whole window,
    # 121 lanes in 31 bricks, one tap: 31 MATMULs against 33 for 1x4 patches (4x5 patches
    # of 124 bytes, just within the 23x27 bricks of 4).
    ("tiny", (1, 23, 27, 1), ConvSpec(oc=9, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0)), (11, 11, 4, 4)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_on_patches(case):
    name, shape, spec, geometry = CASES[case]
    config = CONFIGS[name]
    rng = np.random.default_rng(700 + case)
    graph = build_chain(rng, shape, [spec])
    comp = run_pipeline(graph, config)
    (conv,) = comp.layers
    assert isinstance(conv, PatchConvLayer)
    p = conv.patches
    assert (p.height, p.width, p.step_y, p.step_x) == geometry
    assert (p.top, p.left) == (spec.pad[0], spec.pad[2])
    assert p.fill == conv.input_zp
    assert conv.macs == conv.original.macs
    program = run_and_compare(graph, config, rng, timing_seeds=(0,))
    (binding,) = program.inputs
    assert binding.patches == p and binding.shape == shape


def test_other_readers_keep_the_bricks():
    """An input that a second layer reads stays one-pixel bricks (and is tap-packed)."""
    rng = np.random.default_rng(5)
    from compiler_graphs import GraphBuilder
    g = GraphBuilder(rng)
    x = g.input("x", (1, 15, 15, 3))
    a = g.conv(x, ConvSpec(oc=8, kernel=(3, 3), stride=(2, 2), pad=(1, 1, 1, 1)), "y")
    b = g.conv(x, ConvSpec(oc=4, kernel=(1, 1), stride=(1, 1), pad=(0, 0, 0, 0)), "z")
    graph = g.graph([a, b])
    comp = run_pipeline(graph, CONFIGS["default"])
    assert not any(isinstance(layer, PatchConvLayer) for layer in comp.layers)
    assert all(b.patches is None for b in comp.flow.inputs)
    run_and_compare(graph, CONFIGS["default"], rng)


def test_patches_beat_tap_packing_on_the_cycle_model(monkeypatch):
    """The choice is the estimate's; the cycle model (the ISA simulator) agrees: ResNet-50's
    stem at reduced size on 32x32, with and without the patches form."""
    rng = np.random.default_rng(11)
    graph = build_chain(rng, (1, 40, 40, 3), [ConvSpec(oc=64, kernel=(7, 7), stride=(2, 2), pad=(3, 3, 3, 3))])
    config = CONFIGS["array32"]
    x = rng.integers(-128, 128, (1, 40, 40, 3), dtype=np.int8)

    def cycles():
        program = compile_graph(graph, config)
        result = IsaSim(config).run(program, program.memory_image({"x": x}))
        assert result.ok
        return result.cycles, program

    with_patches, program = cycles()
    assert program.inputs[0].patches is not None
    monkeypatch.setattr(input_patches, "patches_of", lambda *a: None)
    without, program = cycles()
    assert program.inputs[0].patches is None
    assert with_patches < without


def test_patches_extract_by_brute_force():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n, h, w, c = (int(v) for v in rng.integers(1, 6, 4))
        p = Patches(height=int(rng.integers(1, 5)), width=int(rng.integers(1, 5)), step_y=int(rng.integers(1, 4)),
                    step_x=int(rng.integers(1, 4)), top=int(rng.integers(0, 3)), left=int(rng.integers(0, 3)),
                    rows=int(rng.integers(1, 6)), cols=int(rng.integers(1, 6)), fill=int(rng.integers(-128, 128)))
        x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
        got = p.extract(x)
        want = np.empty((n, p.rows, p.cols, p.height * p.width * c), dtype=np.int8)
        for b in range(n):
            for i in range(p.rows):
                for j in range(p.cols):
                    for dy in range(p.height):
                        for dx in range(p.width):
                            y, xx = p.step_y * i + dy - p.top, p.step_x * j + dx - p.left
                            inside = 0 <= y < h and 0 <= xx < w
                            for ch in range(c):
                                want[b, i, j, (dy * p.width + dx) * c + ch] = x[b, y, xx, ch] if inside else p.fill
        assert np.array_equal(got, want)
