"""Compiler: int8 MAX_POOL2D and AVG_POOL2D (VPOOL, VRESCALE) compiled and run on the ISA
simulator, alone and after convolutions, bit-exact against the reference interpreter
(sim.reference.run_graph), wait masks checked by the simulator's hazard checker under the
RTL's cycle model and random instruction durations."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, GraphBuilder  # noqa: E402
from npu_check import compare_on_isa, int8_inputs  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig  # noqa: E402
from compiler.driver import run_pipeline  # noqa: E402
from compiler.kinds.pooling.layer import PoolLayer  # noqa: E402
from tosa_ir.errors import InvalidInput  # noqa: E402

# Scratchpads so small that pools need tiles of a few rows (a 4x4 array).
TINY_CONFIG = NpuConfig(array_rows=4, array_cols=4, bus_bytes=4, asram_rows=160, wsram_rows=64,
                        acc_rows=32, psram_rows=9, imem_rows=4096, ext_mem_bytes=1 << 20)
SMALL_BIG = NpuConfig(**{**SMALL_CONFIG.to_dict(), "imem_rows": 4096})
CONFIGS = {"small": SMALL_BIG, "default": DEFAULT_CONFIG, "tiny": TINY_CONFIG}


def pool(g: GraphBuilder, x: str, mode: str, kernel, stride, pad, izp: int = 0, ozp: int = 0) -> str:
    """Add a MAX_POOL2D or AVG_POOL2D (TOSA 1.0 or draft form) to ``g``."""
    n, ih, iw, c = g.shape(x)
    oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
    ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    out = g._new((n, oh, ow, c))
    attrs = {"kernel": list(kernel), "stride": list(stride), "pad": list(pad)}
    inputs = [x]
    if mode == "avg":
        if g.draft:
            attrs.update(input_zp=izp, output_zp=ozp, accum_dtype="INT32")
        else:
            attrs["acc_type"] = "INT32"
            inputs += [g._new((1,), "int8", np.array([izp], np.int8)),
                       g._new((1,), "int8", np.array([ozp], np.int8))]
    elif not g.draft:
        attrs["nan_mode"] = "PROPAGATE"
    g._op("AVG_POOL2D" if mode == "avg" else "MAX_POOL2D", inputs, [out], attrs)
    return out


def legal_pad(size: int, k: int, s: int, p0: int, p1: int) -> tuple[int, int]:
    """(p0, p1) with p1 grown so the windows tile exactly, both below k."""
    p1 += (-(size + p0 + p1 - k)) % s
    return p0, p1


def run_and_compare(graph, config, seed=0):
    """Compile, run on the ISA simulator with random int8 inputs, compare bit-exactly with
    the reference interpreter (wait masks also under random durations); the compilation."""
    comp = run_pipeline(graph, config)
    compare_on_isa(comp.program, graph, int8_inputs(graph, np.random.default_rng(seed)), config,
                   timing_seeds=(seed,))
    return comp


def random_pool(rng, shape, mode):
    kh, kw = (int(v) for v in rng.integers(1, 5, 2))
    sy, sx = (int(v) for v in rng.integers(1, 4, 2))
    pt, pb = legal_pad(shape[1], kh, sy, int(rng.integers(0, kh)), 0)
    pl, pr = legal_pad(shape[2], kw, sx, int(rng.integers(0, kw)), 0)
    if pb >= kh or pr >= kw or shape[1] + pt + pb < kh or shape[2] + pl + pr < kw:
        return (1, 1), (1, 1), (0, 0, 0, 0)
    return (kh, kw), (sy, sx), (pt, pb, pl, pr)


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("config_name", ["small", "default", "tiny"])
@pytest.mark.parametrize("draft", [False, True])
def test_alexnet_style_pool(mode, config_name, draft):
    """3x3 stride-2 windows (AlexNet), channels not a multiple of a brick, two images."""
    g = GraphBuilder(np.random.default_rng(30), draft=draft)
    x = g.input("x", (2, 13, 11, 7))
    y = pool(g, x, mode, (3, 3), (2, 2), (0, 0, 0, 0), izp=-5, ozp=9)
    comp = run_and_compare(g.graph([y]), CONFIGS[config_name])
    assert any(isinstance(layer, PoolLayer) for layer in comp.layers)


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("config_name", ["small", "tiny"])
def test_padded_pool_edges(mode, config_name):
    """Padding on every side: MAX pads with -128; AVG's edge windows count fewer elements."""
    g = GraphBuilder(np.random.default_rng(31))
    x = g.input("x", (1, 9, 10, 5))
    y = pool(g, x, mode, (3, 4), (2, 3), (2, 2, 3, 3), izp=100, ozp=-100)
    run_and_compare(g.graph([y]), CONFIGS[config_name])


@pytest.mark.parametrize("seed", range(6))
def test_random_pools_and_convs(seed):
    """Random chains: conv -> pool -> conv -> pool, through external memory."""
    rng = np.random.default_rng(100 + seed)
    g = GraphBuilder(rng, draft=bool(seed % 2))
    x = g.input("x", (1, int(rng.integers(6, 14)), int(rng.integers(6, 14)), int(rng.integers(1, 9))))
    cur = x
    for i in range(2):
        cur = g.conv(cur, ConvSpec(oc=int(rng.integers(1, 10))))
        mode = ["max", "avg"][int(rng.integers(0, 2))]
        kernel, stride, pad = random_pool(rng, g.shape(cur), mode)
        cur = pool(g, cur, mode, kernel, stride, pad, izp=int(rng.integers(-128, 128)),
                   ozp=int(rng.integers(-128, 128)))
    config = [SMALL_BIG, TINY_CONFIG, DEFAULT_CONFIG][seed % 3]
    run_and_compare(g.graph([cur]), config, seed)


def test_pool_of_graph_input_feeding_two_consumers():
    """A pool output used by a conv and as a graph output."""
    g = GraphBuilder(np.random.default_rng(32))
    x = g.input("x", (1, 8, 8, 6))
    p = pool(g, x, "max", (2, 2), (2, 2), (0, 0, 0, 0))
    y = g.conv(p, ConvSpec(oc=5))
    run_and_compare(g.graph([p, y]), SMALL_BIG)


def test_pool_errors_name_operator():
    g = GraphBuilder(np.random.default_rng(33))
    x = g.input("x", (1, 8, 8, 4))
    y = pool(g, x, "max", (2, 2), (2, 2), (0, 0, 0, 0))
    g.block.tensor(y).shape = (1, 3, 4, 4)
    with pytest.raises(InvalidInput, match="MAX_POOL2D.*output shape"):
        run_pipeline(g.graph([y]), SMALL_BIG)
    g = GraphBuilder(np.random.default_rng(34))
    x = g.input("x", (1, 8, 8, 4))
    y = pool(g, x, "avg", (2, 2), (2, 2), (0, 0, 0, 0))
    g.block.operators[-1].attrs["acc_type"] = "INT16"
    # int8 pooling with an int16 accumulator is illegal (an ERROR_IF), not merely unsupported.
    with pytest.raises(InvalidInput, match="AVG_POOL2D.*acc_type"):
        run_pipeline(g.graph([y]), SMALL_BIG)
