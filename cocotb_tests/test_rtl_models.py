"""Whole models on the RTL: compiled by the compiler, run under Verilator, compared with the
official TOSA reference model's output and with the ISA simulator (outputs and cycles)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.driver import compile_graph
from compiler.frontends import load_graph
from isa import DEFAULT_CONFIG, SMALL_CONFIG
from sim.isa.sim import IsaSim

SLICE = Path(__file__).resolve().parent.parent / "models" / "slice"


def _run_both(program, inputs, build_dir):
    from hw.harness.simulation import run_program

    memory = bytes(program.memory_image(inputs))
    rtl = run_program(program, memory, build_dir=build_dir)
    isa = IsaSim(program.config).run(program, memory)
    assert rtl.status == "DONE" and not rtl.error_code and not isa.error_code
    assert rtl.cycles == isa.cycles
    assert dict(rtl.unit_busy_cycles) == dict(isa.busy)
    # Every byte of external memory, not just the outputs.
    n = max(len(rtl.memory), len(isa.memory))
    assert bytes(rtl.memory).ljust(n, b"\0") == bytes(isa.memory).ljust(n, b"\0")
    return program.read_outputs(rtl.memory)


@pytest.mark.parametrize("config_name", ["default", "small"])
def test_slice_on_rtl_matches_official_reference(config_name, request):
    config = DEFAULT_CONFIG if config_name == "default" else SMALL_CONFIG
    build_dir = request.getfixturevalue(f"{config_name}_rtl")
    graph = load_graph(SLICE / "conv_rescale_clamp.tosa")
    inputs = dict(np.load(SLICE / "input.npz"))
    expected = np.load(SLICE / "expected.npz")      # official tosa_reference_model output
    outputs = _run_both(compile_graph(graph, config), inputs, build_dir)
    for name in expected.files:
        np.testing.assert_array_equal(outputs[name], expected[name])


def test_program_longer_than_the_instruction_memory_on_rtl(small_rtl):
    """A compiled chain of four 3x3 convolutions (straight-line code: 5,600+ instructions,
    over 20 times the 256-row instruction buffer of the small configuration) runs on the RTL
    bit-exactly: outputs equal the reference interpreter's; every external-memory byte,
    CYCLES and the busy counters equal the ISA simulator's."""
    from tests.compiler_graphs import ConvSpec, build_chain
    from sim.reference import run_graph

    rng = np.random.default_rng(5)
    graph = build_chain(rng, (1, 24, 24, 16), [ConvSpec(oc=16)] * 4)
    program = compile_graph(graph, SMALL_CONFIG, loops=False)
    assert len(program.instructions) > 5600
    inputs = {"x": rng.integers(-128, 128, (1, 24, 24, 16), dtype=np.int8)}
    outputs = _run_both(program, inputs, small_rtl)
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(outputs[name], want)


def test_merged_elementwise_chains_on_rtl(small_rtl):
    """The compiler's merged elementwise layers (compiler/kinds/elementwise/fusion.py) on the
    RTL: a residual ADD as TFLite writes it (RESCALEs into int32 ACC temporaries, the CLAMP
    folded into the last RESCALE's clamp) and a lane reduction (REDUCE_MAX along the
    innermost axis, rows transposed into lanes by element-mode DMA), bit-exact against the
    reference interpreter and in lockstep with the ISA simulator."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from vector_graphs import VecBuilder
    from sim.reference import run_graph

    rng = np.random.default_rng(12)
    g = VecBuilder(rng)
    a, b = g.input((1, 6, 5, 24), "int8"), g.input((1, 6, 5, 24), "int8")
    ra = g.rescale(a, "int32", [1 << 30], [20], izp=-3)
    rb = g.rescale(b, "int32", [1_518_500_250], [21], izp=5)
    s = g.op("ADD", [ra, rb], (1, 6, 5, 24), "int32")
    y = g.op("CLAMP", [g.rescale(s, "int8", [1_200_000_000], [38], ozp=-7)], (1, 6, 5, 24), "int8",
             min_val=-7, max_val=127)
    m = g.op("REDUCE_MAX", [y], (1, 6, 5, 1), "int8", axis=3)
    graph = g.graph([y, m])
    program = compile_graph(graph, SMALL_CONFIG)
    assert any(len(layer["ops"]) == 5 for layer in program.info["layers"])     # the chain is one layer
    inputs = g.inputs(rng)
    outputs = _run_both(program, inputs, small_rtl)
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(outputs[name], want)


@pytest.mark.parametrize("config_name", ["small", "default"])
def test_im2col_conv_on_rtl(config_name, request, monkeypatch):
    """A strided few-channel convolution gathered by the DMA (packed-line DMA_LOADs of a
    flat graph input: compiler/kinds/conv/im2col.py) on the RTL: outputs equal the
    reference interpreter's; every external byte, CYCLES and the busy counters equal the ISA
    simulator's.  Default: AlexNet's head shape class (NCHW input, TRANSPOSE, trimming
    SLICE, 11x11/4, 25 rows per pixel); small: int16 elements on a 4-byte bus."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from compiler_graphs import ConvSpec, GraphBuilder, build_chain
    from compiler.kinds.conv import input_patches
    from compiler.kinds.conv.im2col import Im2colConvLayer
    from compiler.driver import run_pipeline
    from sim.reference import run_graph

    # The small case's input is the graph's own, which the host would write as patches
    # (test_patches_conv_on_rtl): the gather is what is tested here.
    monkeypatch.setattr(input_patches, "patches_of", lambda *args: None)
    rng = np.random.default_rng(21)
    if config_name == "small":
        config = SMALL_CONFIG
        graph = build_chain(rng, (1, 31, 31, 2), [ConvSpec(oc=12, kernel=(3, 3), stride=(2, 2), pad=(0, 0, 0, 0))])
    else:
        config = DEFAULT_CONFIG
        g = GraphBuilder(rng)
        t = g.slice(g.transpose(g.input("x", (1, 3, 64, 64)), (0, 2, 3, 1)), (0, 1, 0, 0), (1, 63, 63, 3))
        graph = g.graph([g.conv(t, ConvSpec(oc=64, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0)), "y")])
    comp = run_pipeline(graph, config)
    assert [type(layer) for layer in comp.layers] == [Im2colConvLayer]
    x = graph.main.inputs[0]
    inputs = {x: rng.integers(-128, 128, graph.main.tensor(x).shape, dtype=np.int8)}
    outputs = _run_both(comp.program, inputs, request.getfixturevalue(f"{config_name}_rtl"))
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(outputs[name], want)


def test_patches_conv_on_rtl(small_rtl):
    """A few-channel convolution whose graph input the host writes as patches
    (isa/patches.py, compiler/kinds/conv/input_patches.py) on the RTL, with padding filled
    by the host: outputs equal the reference interpreter's; every external byte, CYCLES and
    the busy counters equal the ISA simulator's."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from compiler_graphs import ConvSpec, build_chain
    from compiler.kinds.conv.input_patches import PatchConvLayer
    from compiler.driver import run_pipeline
    from sim.reference import run_graph

    rng = np.random.default_rng(23)
    graph = build_chain(rng, (1, 29, 30, 1), [ConvSpec(oc=10, kernel=(5, 5), stride=(2, 2), pad=(2, 2, 2, 2))])
    comp = run_pipeline(graph, SMALL_CONFIG)
    (layer,) = comp.layers
    assert isinstance(layer, PatchConvLayer) and comp.program.inputs[0].patches == layer.patches
    x = graph.main.inputs[0]
    inputs = {x: rng.integers(-128, 128, graph.main.tensor(x).shape, dtype=np.int8)}
    outputs = _run_both(comp.program, inputs, small_rtl)
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(outputs[name], want)
