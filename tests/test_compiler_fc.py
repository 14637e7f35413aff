"""Compiler: fully-connected convolutions (one output pixel per image), the streaming
lowering of compiler/kinds/conv/fully_connected.py.

Expected values from the reference interpreter; every run checks the wait masks with the
hazard checker (RTL cycle model and random durations, as tests/test_compiler_conv.py).
Shapes cover every chunking: several whole output blocks per WSRAM slot, one block per
slot, blocks split into an even or odd number of parts, a short last chunk, LOOPs and
straight-line chunk runs, several images, padding, and chains with ordinary layers.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, build_chain  # noqa: E402
from test_compiler_conv import CONFIGS, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig  # noqa: E402
from compiler.driver import run_pipeline  # noqa: E402
from compiler.kinds.conv.fully_connected import FcPlan, fc_plan  # noqa: E402

# WSRAM of 8 tiles per slot on a 4x4 array: blocks of many tiles must be split.
NARROW = NpuConfig(array_rows=4, array_cols=4, bus_bytes=4, asram_rows=512, wsram_rows=64,
                   acc_rows=64, psram_rows=12, imem_rows=512, ext_mem_bytes=1 << 22)


def fc_spec(rng, oc, kernel, pad=(0, 0, 0, 0)):
    return ConvSpec(oc=oc, kernel=kernel, pad=pad, input_zp=int(rng.integers(-128, 128)),
                    weight_zp=int(rng.integers(-20, 20)), output_zp=int(rng.integers(-128, 128)))


# (config, input shape, output channels, kernel, pad): the kernel covers the padded input.
CASES = [
    ("narrow", (1, 1, 1, 8), 12, (1, 1), (0, 0, 0, 0)),        # 2 tiles/block: 4 blocks per chunk
    ("narrow", (1, 1, 1, 32), 40, (1, 1), (0, 0, 0, 0)),       # 8 tiles: one block per chunk, LOOP
    ("narrow", (1, 3, 3, 8), 20, (3, 3), (0, 0, 0, 0)),        # 18 tiles: 3 parts (odd)
    ("narrow", (1, 2, 2, 16), 36, (2, 2), (0, 0, 0, 0)),       # 16 tiles: 2 parts (even)
    ("narrow", (3, 2, 3, 5), 9, (3, 3), (1, 0, 0, 0)),         # 3 images, padding, 6 parts of 9 tiles
    ("narrow", (1, 1, 1, 12), 44, (1, 1), (0, 0, 0, 0)),       # 3 tiles: 2 blocks/chunk, short last chunk
    ("small", (2, 4, 4, 20), 70, (4, 4), (0, 0, 0, 0)),
    ("default", (1, 5, 5, 40), 100, (5, 5), (0, 0, 0, 0)),
    ("default", (1, 1, 1, 600), 530, (1, 1), (0, 0, 0, 0)),
]
CONFIGS = {**CONFIGS, "narrow": NARROW}


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fc_shapes(case):
    name, shape, oc, kernel, pad = CASES[case]
    config = CONFIGS[name]
    rng = np.random.default_rng(500 + case)
    graph = build_chain(rng, shape, [fc_spec(rng, oc, kernel, pad)])
    comp = run_pipeline(graph, config)
    assert isinstance(comp.plans[0], FcPlan), comp.plans[0].describe()
    run_and_compare(graph, config, rng, timing_seeds=(0, 1))


@pytest.mark.parametrize("seed", range(6))
def test_random_fc_chains(seed):
    """conv -> fc -> fc chains of random sizes, on a random one of the configurations."""
    rng = np.random.default_rng(700 + seed)
    name = ["narrow", "small", "tiny"][seed % 3]
    config = CONFIGS[name]
    lanes = config.array_rows
    hw = int(rng.integers(2, 5))
    shape = (int(rng.integers(1, 3)), hw + 1, hw + 1, int(rng.integers(1, 3 * lanes)))
    specs = [ConvSpec(oc=int(rng.integers(1, 3 * lanes)), kernel=(2, 2), pad=(0, 0, 0, 0)),
             ConvSpec(oc=int(rng.integers(1, 6 * lanes)), kernel=(hw, hw), pad=(0, 0, 0, 0)),
             ConvSpec(oc=int(rng.integers(1, 6 * lanes)), kernel=(1, 1), pad=(0, 0, 0, 0))]
    graph = build_chain(rng, shape, specs)
    comp = run_pipeline(graph, config)
    assert sum(isinstance(p, FcPlan) for p in comp.plans) == 2
    run_and_compare(graph, config, rng, timing_seeds=(0,))


def test_fc_plan_applies_only_to_one_output_pixel():
    rng = np.random.default_rng(1)
    graph = build_chain(rng, (1, 3, 3, 8), [fc_spec(rng, 8, (2, 2))])
    layer = run_pipeline(graph, DEFAULT_CONFIG).layers[0]
    assert fc_plan(layer, DEFAULT_CONFIG) is None                 # 2x2 output: generic tiling


def test_fc_plan_chunks_cover_the_weights_once():
    rng = np.random.default_rng(2)
    for config, shape, oc, kernel in ((NARROW, (1, 3, 3, 8), 20, (3, 3)), (SMALL_CONFIG, (1, 1, 1, 64), 90, (1, 1))):
        graph = build_chain(rng, shape, [fc_spec(rng, oc, kernel)])
        plan = run_pipeline(graph, config).plans[0]
        starts = [g for g, k in plan.chunks() for g in range(g, g + k)]
        assert starts == list(range(plan.cbo * plan.tiles_per_block))
        assert max(k for _, k in plan.chunks()) * config.array_rows * 2 <= config.wsram_rows


def test_full_size_fc7():
    """AlexNet's fc7 at full size (4096 -> 4096, 16 MB of weights) compiles to a few dozen
    instructions and runs bit-exactly on the ISA simulator."""
    from sim.isa.sim import IsaSim
    from sim.reference import run_graph

    rng = np.random.default_rng(7)
    graph = build_chain(rng, (1, 1, 1, 4096), [fc_spec(rng, 4096, (1, 1))])
    comp = run_pipeline(graph, DEFAULT_CONFIG)
    program = comp.program
    assert len(program.instructions) < 64
    x = rng.integers(-128, 128, (1, 1, 1, 4096), dtype=np.int8)
    result = IsaSim(DEFAULT_CONFIG).run(program, program.memory_image({"x": x}))
    assert result.ok, result.error_message
    np.testing.assert_array_equal(program.read_outputs(result.memory)["y"], run_graph(graph, {"x": x})["y"])
