"""Compiler: strided few-channel convolutions on graph inputs gathered by the DMA
(compiler/kinds/conv/im2col.py: DMA_LOAD with packed lines), bit-exact against the
reference interpreter on the ISA simulator (wait masks checked under random timings as in
tests/test_compiler_conv.py), and where the pass keeps the other forms."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, GraphBuilder, build_chain  # noqa: E402
from npu_check import compare_on_isa, int8_inputs  # noqa: E402
from test_compiler_conv import CONFIGS, run_and_compare  # noqa: E402

from compiler.driver import compile_graph, run_pipeline  # noqa: E402
from compiler.kinds.conv import im2col, input_patches, tap_packing  # noqa: E402
from compiler.kinds.conv.im2col import Im2colConvLayer  # noqa: E402
from sim.npu_timing import TimingModel  # noqa: E402


@pytest.fixture(autouse=True)
def no_input_patches(monkeypatch):
    """These convolutions read graph inputs, which the host would otherwise write as patches
    when the estimate says so (tests/test_compiler_input_patches.py): the DMA's gather and
    tap packing are what is tested here."""
    monkeypatch.setattr(input_patches, "patches_of", lambda *args: None)


def alexnet_like(rng, shape_nchw, start, size, spec: ConvSpec):
    """The NNEF AlexNet's head: NCHW input -> TRANSPOSE to NHWC -> size-trimming SLICE ->
    conv.  The windows of the last column read past the slice (inside the input)."""
    g = GraphBuilder(rng)
    x = g.input("x", shape_nchw)
    t = g.slice(g.transpose(x, (0, 2, 3, 1)), start, size)
    return g.graph([g.conv(t, spec, "y")])


# (config, input shape, spec, rows per pixel): every one is gathered by the DMA (the
# estimate picks it: smaller layers keep tap packing, whose repack costs less there).
CASES = [
    # 8x8/4 on 3 channels: 8 kernel rows of 24 bytes = 6 int32, 12 rows per pixel
    ("default", (1, 40, 40, 3), ConvSpec(oc=64, kernel=(8, 8), stride=(4, 4), pad=(0, 0, 0, 0)), 12),
    # two images, y stride 3, a partial output block (50 of 64 channels)
    ("default", (2, 35, 44, 3), ConvSpec(oc=50, kernel=(5, 8), stride=(3, 4), pad=(0, 0, 0, 0)), 8),
    # 4x4 array, 2 channels, rows of 62 bytes: int16 elements, 3 kernel rows of 6 bytes
    # packed across 4-byte words, 5 rows per pixel
    ("small", (1, 31, 31, 2), ConvSpec(oc=12, kernel=(3, 3), stride=(2, 2), pad=(0, 0, 0, 0)), 5),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_gathered_conv(case):
    name, shape, spec, rows = CASES[case]
    config = CONFIGS[name]
    rng = np.random.default_rng(700 + case)
    graph = build_chain(rng, shape, [spec])
    comp = run_pipeline(graph, config)
    assert [type(layer) for layer in comp.layers] == [Im2colConvLayer]
    assert comp.layers[0].gather.blocks == rows
    loads = [op.instr.values for op in comp.scheduled.ops if op.instr.name == "DMA_LOAD"]
    assert any(v["pack"] for v in loads)
    assert [b.layout for b in comp.program.inputs] == ["flat"]
    run_and_compare(graph, config, rng, timing_seeds=(0, 1))


def test_alexnet_head_reads_past_the_slice():
    """AlexNet's first layer shape class: 11x11/4 on 3 channels, 9 int32 per kernel row (36
    bytes: 12 pixels, the 12th with zero-point weights), 25 rows per pixel; the NCHW input
    bound flat through its perm; a SLICE trimming a row and a column."""
    rng = np.random.default_rng(11)
    spec = ConvSpec(oc=64, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0))
    graph = alexnet_like(rng, (1, 3, 64, 64), (0, 1, 0, 0), (1, 63, 63, 3), spec)
    config = CONFIGS["default"]
    comp = run_pipeline(graph, config)
    (layer,) = comp.layers
    assert isinstance(layer, Im2colConvLayer)
    assert (layer.gather.elem, layer.gather.len0, layer.gather.blocks) == (4, 9, 25)
    (binding,) = comp.program.inputs
    assert (binding.layout, tuple(binding.perm)) == ("flat", (0, 2, 3, 1))
    program = compile_graph(graph, config)
    compare_on_isa(program, graph, int8_inputs(graph, rng), config, timing_seeds=(0, 1))


def _cycles(comp, config) -> int:
    return TimingModel(config).run([op.instr for op in comp.program_ops]).total_cycles


def test_choice_follows_the_cycles(monkeypatch):
    """The pass's estimate tracks the cycle model: where it picks the gather, the gather is
    faster than the tap-packed form (both timed), and its estimate is within 5%."""
    rng = np.random.default_rng(15)
    config = CONFIGS["default"]
    graph = alexnet_like(rng, (1, 3, 100, 100), (0, 0, 0, 0), (1, 99, 99, 3),
                         ConvSpec(oc=64, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0)))
    gathered = run_pipeline(graph, config)
    (layer,) = gathered.layers
    assert isinstance(layer, Im2colConvLayer)
    estimate = im2col.cycles(layer.original, layer.gather, config)
    assert abs(_cycles(gathered, config) - estimate) < 0.05 * estimate
    monkeypatch.setattr(tap_packing.im2col, "gather_of", lambda *args: None)
    packed = run_pipeline(graph, config)
    assert [type(layer).__name__ for layer in packed.layers] == ["RepackLayer", "PackedConvLayer"]
    assert _cycles(gathered, config) < 0.8 * _cycles(packed, config)


def test_padded_and_unaligned_convs_keep_tap_packing():
    """Padding (pad values would have to cover whole elements) and rows whose bytes are not
    a multiple of 4 (int8 elements: 3x the DMA cycles) keep the repack layer."""
    rng = np.random.default_rng(12)
    padded = build_chain(rng, (1, 24, 24, 3), [ConvSpec(oc=64, kernel=(7, 7), stride=(2, 2), pad=(3, 2, 3, 2))])
    odd = build_chain(rng, (1, 23, 23, 3), [ConvSpec(oc=64, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0))])
    for graph in (padded, odd):
        kinds = [type(layer).__name__ for layer in run_pipeline(graph, CONFIGS["default"]).layers]
        assert kinds == ["RepackLayer", "PackedConvLayer"]


def test_input_read_twice_is_not_gathered():
    """A second reader of the input needs its bricks: the input stays in the brick layout."""
    rng = np.random.default_rng(13)
    g = GraphBuilder(rng)
    x = g.input("x", (1, 24, 24, 3))
    spec = ConvSpec(oc=64, kernel=(8, 8), stride=(4, 4), pad=(0, 0, 0, 0))
    graph = g.graph([g.conv(x, spec, "y"), g.conv(x, spec, "z")])
    comp = run_pipeline(graph, CONFIGS["default"])
    assert not any(isinstance(layer, Im2colConvLayer) for layer in comp.layers)
    assert [b.layout for b in comp.program.inputs] == ["brick"]


def test_few_output_channels_keep_tap_packing():
    """With one output block the array needs 25 vectors a pixel but the DMA 99 cycles: the
    estimate keeps tap packing (the reduced-width AlexNet's first layer)."""
    rng = np.random.default_rng(14)
    graph = alexnet_like(rng, (1, 3, 28, 28), (0, 0, 0, 0), (1, 27, 27, 3),
                         ConvSpec(oc=16, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0)))
    kinds = [type(layer).__name__ for layer in run_pipeline(graph, CONFIGS["default"]).layers]
    assert kinds == ["RepackLayer", "PackedConvLayer"]
