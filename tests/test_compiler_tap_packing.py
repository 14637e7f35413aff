"""Compiler: tap packing (compiler/kinds/conv/tap_packing.py) of strided convolutions with few
input channels, bit-exact against the reference interpreter (wait masks checked as in
tests/test_compiler_conv.py)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, build_chain  # noqa: E402
from test_compiler_conv import CONFIGS, run_and_compare  # noqa: E402

from compiler.driver import run_pipeline  # noqa: E402
from compiler.kinds.conv import input_patches  # noqa: E402
from compiler.kinds.conv.tap_packing import PackedConvLayer, RepackLayer  # noqa: E402


@pytest.fixture(autouse=True)
def no_input_patches(monkeypatch):
    """These graphs' convolutions read the graph input, which the host would otherwise write
    as patches (tests/test_compiler_input_patches.py): tap packing is what is tested here."""
    monkeypatch.setattr(input_patches, "patches_of", lambda *args: None)

# (config, input shape, spec): every one is packed.
CASES = [
    ("default", (1, 23, 23, 3), ConvSpec(oc=20, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0))),
    ("default", (2, 19, 21, 3), ConvSpec(oc=40, kernel=(5, 7), stride=(2, 4), pad=(2, 1, 3, 2))),
    ("small", (1, 16, 17, 1), ConvSpec(oc=9, kernel=(3, 8), stride=(1, 4), pad=(1, 1, 2, 0))),
    ("small", (1, 40, 30, 2), ConvSpec(oc=6, kernel=(3, 8), stride=(3, 2), pad=(0, 0, 1, 1),
                                       dilation=(2, 1))),
    ("default", (1, 20, 30, 5), ConvSpec(oc=17, kernel=(3, 9), stride=(2, 3), pad=(1, 1, 4, 4))),
    ("tiny", (1, 9, 14, 1), ConvSpec(oc=5, kernel=(3, 9), stride=(1, 4), pad=(0, 0, 1, 1))),
    # More pixels per brick than the stride (overlapping taps): ResNet-50's 7x7/2 stem
    # (g = 5: 2 taps per row), MobileNetV2's 3x3/2 stem (g = 3: 1 tap).
    ("default", (1, 21, 23, 3), ConvSpec(oc=18, kernel=(7, 7), stride=(2, 2), pad=(3, 2, 3, 2))),
    ("default", (1, 17, 18, 3), ConvSpec(oc=32, kernel=(3, 3), stride=(2, 2), pad=(0, 1, 0, 1))),
]
# Pixels per brick the pass chooses for each case (the fewest MATMUL vectors in all).
PIXELS = [4, 4, 4, 2, 3, 4, 5, 3]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_packed_conv(case):
    name, shape, spec = CASES[case]
    config = CONFIGS[name]
    rng = np.random.default_rng(900 + case)
    graph = build_chain(rng, shape, [spec])
    layers = run_pipeline(graph, config).layers
    assert [type(layer) for layer in layers] == [RepackLayer, PackedConvLayer]
    assert layers[0].out_shape[-1] == PIXELS[case] * shape[-1]
    run_and_compare(graph, config, rng, timing_seeds=(0,))


def test_not_packed_when_channels_fill_the_brick():
    rng = np.random.default_rng(3)
    graph = build_chain(rng, (1, 12, 12, 9), [ConvSpec(oc=8, kernel=(5, 5), stride=(2, 2), pad=(0, 0, 0, 0))])
    assert [type(layer).__name__ for layer in run_pipeline(graph, CONFIGS["small"]).layers] == ["ConvLayer"]


def test_packed_macs_are_the_graphs():
    rng = np.random.default_rng(4)
    name, shape, spec = CASES[0]
    graph = build_chain(rng, shape, [spec])
    comp = run_pipeline(graph, CONFIGS[name])
    repack, conv = comp.layers
    assert repack.macs == 0
    assert conv.macs == conv.original.macs == 4 * 4 * 20 * 11 * 11 * 3
