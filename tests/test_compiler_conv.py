"""Compiler: int8 CONV2D -> RESCALE [-> CLAMP] graphs compiled and run on the ISA simulator.

Expected values come from the reference interpreter (sim.reference.run_graph), never from
the compiler.  Every run also checks the wait masks: the ISA simulator's hazard checker
with the RTL's cycle model, and with a model of random instruction durations (any timing
the issue rules allow must give the same result).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, build_chain, random_spec  # noqa: E402
from npu_check import compare_on_isa  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig  # noqa: E402
from isa.program import Program  # noqa: E402
from compiler.driver import compile_graph, run_pipeline  # noqa: E402
from compiler.kinds.conv import input_patches  # noqa: E402
from sim.isa.sim import IsaSim  # noqa: E402

# Scratchpads small enough that modest layers need every kind of tiling (a 4x4 array).
TINY_CONFIG = NpuConfig(array_rows=4, array_cols=4, bus_bytes=4, asram_rows=160, wsram_rows=64,
                        acc_rows=32, psram_rows=9, imem_rows=4096, ext_mem_bytes=1 << 20)
CONFIGS = {"small": SMALL_CONFIG, "default": DEFAULT_CONFIG, "tiny": TINY_CONFIG}




def run_and_compare(graph, config, rng, timing_seeds=(0,)):
    """Compile, run on the ISA simulator, compare bit-exactly with the reference interpreter."""
    program = compile_graph(graph, config)
    x = rng.integers(-128, 128, graph.main.tensor("x").shape, dtype=np.int8)
    compare_on_isa(program, graph, {"x": x}, config, timing_seeds=timing_seeds)
    return program


@pytest.mark.parametrize("config_name,seed", [(c, s) for c in CONFIGS for s in range(8)])
def test_random_single_layer(config_name, seed):
    config = CONFIGS[config_name]
    rng = np.random.default_rng(1000 * len(config_name) + seed)
    lanes = config.array_rows
    max_c = 3 * lanes if config_name != "small" else 2 * lanes
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 24)), int(rng.integers(1, 24)),
             int(rng.integers(1, max_c)))
    spec = random_spec(rng, shape[1:3], max_c)
    run_and_compare(build_chain(rng, shape, [spec]), config, rng)


@pytest.mark.parametrize("config_name,seed", [(c, s) for c in CONFIGS for s in range(3)])
def test_random_chains(config_name, seed):
    config = CONFIGS[config_name]
    rng = np.random.default_rng(50 + 7 * len(config_name) + seed)
    lanes = config.array_rows
    shape = (1, int(rng.integers(6, 20)), int(rng.integers(6, 20)), int(rng.integers(1, 2 * lanes)))
    specs, hw = [], shape[1:3]
    for _ in range(int(rng.integers(2, 4))):
        spec = random_spec(rng, hw, 2 * lanes)
        specs.append(spec)
        graph = build_chain(rng, shape, specs)          # fixes pads, gives the next size
        hw = graph.main.tensor(graph.main.outputs[0]).shape[1:3]
    run_and_compare(graph, config, rng)


def _fills(comp) -> int:
    """DMA_LOADs that repeat one external word (stride 0): the padding fallback."""
    return sum(1 for i in comp.program.instructions
               if i.name == "DMA_LOAD" and i.values["stride1"] == 0 and i.values["len1"] > 1)


# Each case forces one tiling path; the assertion on the compilation keeps it forced.
TILING_CASES = {
    "spatial tiles, double buffered": (
        DEFAULT_CONFIG, (1, 48, 40, 20), ConvSpec(oc=24),
        lambda c: len(c.plans[0].tiles()) > 2 and c.plans[0].in_slots == 2),
    "column tiles of a wide image": (
        DEFAULT_CONFIG, (1, 2, 3000, 3), ConvSpec(oc=5, kernel=(1, 3), pad=(0, 0, 1, 1)),
        lambda c: c.plans[0].tw < 3000),
    "input-channel groups": (
        TINY_CONFIG, (1, 5, 5, 20), ConvSpec(oc=6, kernel=(2, 2)),
        lambda c: c.plans[0].cg < c.plans[0].cbi and c.plans[0].tg == c.plans[0].taps),
    "kernel taps split": (
        TINY_CONFIG, (1, 9, 9, 3), ConvSpec(oc=3, kernel=(5, 5), pad=(2, 2, 2, 2)),
        lambda c: c.plans[0].tg < c.plans[0].taps),
    "weights streamed per cout group": (
        TINY_CONFIG, (1, 6, 6, 3), ConvSpec(oc=17, kernel=(2, 2), pad=(0, 0, 0, 0)),
        lambda c: c.plans[0].og < c.plans[0].cbo),
    "weights re-read per tile (tiles outer)": (
        TINY_CONFIG, (1, 12, 12, 3), ConvSpec(oc=40, kernel=(1, 1), pad=(0, 0, 0, 0)),
        lambda c: c.plans[0].order == "tiles_outer" and c.plans[0].og < c.plans[0].cbo),
    "row step over stride and dilation": (
        DEFAULT_CONFIG, (1, 30, 9, 4), ConvSpec(oc=4, kernel=(3, 2), stride=(2, 1), dilation=(4, 2), pad=(0, 0, 0, 1)),
        lambda c: c.plans[0].row_step == 2),
    "one-row tiles stepping over a huge dilation": (
        NpuConfig(**{**SMALL_CONFIG.to_dict(), "asram_rows": 64}), (1, 200, 3, 3),
        ConvSpec(oc=3, kernel=(3, 1), dilation=(90, 1), pad=(1, 0, 0, 0)), lambda c: c.plans[0].row_step == 90),
    "top padding beyond the 8-bit pad fields": (
        DEFAULT_CONFIG, (1, 2, 2, 2), ConvSpec(oc=3, kernel=(2, 2), pad=(300, 0, 0, 0)), lambda c: _fills(c) > 0),
    "left padding beyond the 8-bit pad fields": (
        DEFAULT_CONFIG, (1, 2, 2, 2), ConvSpec(oc=3, kernel=(2, 2), pad=(0, 0, 300, 1)), lambda c: _fills(c) > 0),
    "windows entirely in padding": (
        SMALL_CONFIG, (1, 2, 3, 2), ConvSpec(oc=3, kernel=(2, 2), stride=(50, 60), pad=(100, 0, 600, 59)),
        lambda c: _fills(c) > 0),
    "strided 1x1 with per-tensor scale16": (
        SMALL_CONFIG, (2, 11, 10, 6), ConvSpec(oc=7, kernel=(1, 1), stride=(2, 3), pad=(0, 0, 0, 2), scale32=False,
                                               per_channel=False, bias_per_channel=False), lambda c: True),
}


@pytest.mark.parametrize("case", list(TILING_CASES))
def test_tiling_paths(case, monkeypatch):
    # The lowering's own paths (padding fills among them): the host does not write these
    # graph inputs as patches (compiler/kinds/conv/input_patches.py).
    monkeypatch.setattr(input_patches, "patches_of", lambda *args: None)
    config, shape, spec, check = TILING_CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    spec.double_round = spec.scale32
    graph = build_chain(rng, shape, [spec])
    comp = run_pipeline(graph, config)
    assert check(comp), comp.plans[0].describe()
    run_and_compare(graph, config, rng, timing_seeds=(1, 2))


@pytest.mark.parametrize("config_name", ["small", "default"])
def test_chain_of_layers(config_name):
    config = CONFIGS[config_name]
    rng = np.random.default_rng(7)
    c = config.array_rows
    specs = [ConvSpec(oc=c + 1), ConvSpec(oc=c - 1, kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0)),
             ConvSpec(oc=3, kernel=(1, 3), pad=(0, 0, 1, 1), clamp=(-20, 100)),
             ConvSpec(oc=2, kernel=(3, 3), dilation=(2, 1), pad=(2, 2, 1, 1), clamp=None)]
    graph = build_chain(rng, (1, 10, 9, 3), specs)
    comp = run_pipeline(graph, config)
    assert len(comp.layers) == 4
    # Intermediates live only while read: layer 0's output region is reused by layer 2's.
    view = comp.ext.view
    assert view(comp.layers[2].output).addr == view(comp.layers[0].output).addr
    run_and_compare(graph, config, rng, timing_seeds=(3,))


def test_branching_graph():
    """One input read by two chains; two outputs; an intermediate read by a later layer."""
    rng = np.random.default_rng(13)
    a = build_chain(rng, (1, 9, 9, 5), [ConvSpec(oc=6)], prefix="a_", output="ya")
    b = build_chain(rng, (1, 9, 9, 5), [ConvSpec(oc=3, stride=(2, 2)), ConvSpec(oc=4, kernel=(1, 1), pad=(0,) * 4)],
                    prefix="b_", output="yb")
    block = a.main
    block.tensors.update(b.main.tensors)
    block.operators += b.main.operators
    block.outputs = ["ya", "yb"]
    program = run_and_compare(a, SMALL_CONFIG, rng)
    assert [o.name for o in program.outputs] == ["ya", "yb"]


def test_programs_longer_than_the_instruction_memory():
    """Instructions are fetched from external memory: every layer takes its fastest plan
    and a program longer than the instruction memory runs bit-exactly."""
    from compiler.dataflow import fuse_graph
    from compiler.kinds.conv.tiling import plan_candidates

    rng = np.random.default_rng(17)
    config = SMALL_CONFIG
    graph = build_chain(rng, (1, 20, 20, 8), [ConvSpec(oc=8), ConvSpec(oc=8)])
    fastest = [plan_candidates(layer, config)[0] for layer in fuse_graph(graph)]
    assert sum(plan.estimate["instructions"] for plan in fastest) > config.imem_rows
    program = run_and_compare(graph, config, rng)
    assert [layer["plan"] for layer in program.info["layers"]] == [plan.describe() for plan in fastest]
    straight = compile_graph(graph, config, loops=False)
    assert len(straight.instructions) > config.imem_rows


def test_draft_form_graph():
    rng = np.random.default_rng(11)
    specs = [ConvSpec(oc=5, stride=(1, 2), clamp=(-50, 60)), ConvSpec(oc=6, kernel=(1, 1), pad=(0, 0, 0, 0),
                                                                       scale32=False, clamp=None)]
    graph = build_chain(rng, (1, 7, 8, 3), specs, draft=True)
    run_and_compare(graph, SMALL_CONFIG, rng)


def test_program_image_contents():
    rng = np.random.default_rng(5)
    graph = build_chain(rng, (2, 6, 5, 3), [ConvSpec(oc=4, clamp=(0, 127))], name="model")
    program = run_and_compare(graph, SMALL_CONFIG, rng)
    (inp,), (out,) = program.inputs, program.outputs
    assert (inp.name, inp.shape, inp.dtype, inp.layout) == ("x", (2, 6, 5, 3), "int8", "brick")
    assert (out.name, out.shape, out.dtype, out.layout) == ("y", (2, 6, 5, 4), "int8", "brick")
    assert program.info["source"] == "model.tosa"
    assert [text.split("(")[0] for text in program.info["ops"]] == ["CONV2D", "RESCALE", "CLAMP"]
    assert all("model:" in text for text in program.info["ops"])
    # The image survives serialisation and still runs.
    again = Program.from_bytes(program.to_bytes())
    x = rng.integers(-128, 128, (2, 6, 5, 3), dtype=np.int8)
    first = IsaSim(SMALL_CONFIG).run(program, program.memory_image({"x": x}))
    second = IsaSim(SMALL_CONFIG).run(again, again.memory_image({"x": x}))
    np.testing.assert_array_equal(program.read_outputs(first.memory)["y"], again.read_outputs(second.memory)["y"])


def test_waits_order_producers_and_consumers():
    """Structural check of the masks, beside the hazard checker: the first MATMUL, reading a
    freshly loaded input, waits for the DMA or comes after a later DMA command (the DMA takes
    a command only when idle, so that command's issue proves the load complete); every
    store follows a wait for the VPU."""
    rng = np.random.default_rng(3)
    graph = build_chain(rng, (1, 20, 20, 8), [ConvSpec(oc=8)])
    program = compile_graph(graph, SMALL_CONFIG, loops=False)    # straight line: order is index order
    names = [i.name for i in program.instructions]
    assert names[-1] == "HALT" and names.count("HALT") == 1
    first_mm = names.index("MATMUL")
    input_load = min(j for j in range(first_mm) if names[j] == "DMA_LOAD"     # its first input rows
                     and program.instructions[j].values["sram"] == 0)
    later_dma = any(n.startswith("DMA") for n in names[input_load + 1:first_mm])
    assert program.instructions[first_mm].values["wait"] & 1 or later_dma     # its input comes by DMA
    for i, instr in enumerate(program.instructions):
        if instr.name == "DMA_STORE":
            prev_act = max(j for j in range(i) if names[j] == "ACT")
            between = program.instructions[prev_act + 1:i + 1]
            assert any(k.values["wait"] & 4 for k in between)          # someone waited for the VPU


@pytest.mark.parametrize("seed", range(4))
def test_random_convs_with_loops(seed):
    """Looped emission: the program has LOOPs, is shorter than the straight-line one, and still
    matches the reference interpreter with clean wait masks (loops unrolled by the simulator)."""
    rng = np.random.default_rng(500 + seed)
    shape = (1, int(rng.integers(8, 16)), int(rng.integers(8, 16)), int(rng.integers(17, 40)))
    spec = ConvSpec(oc=int(rng.integers(17, 40)), kernel=(3, 3), stride=(1, 1 + seed % 2))
    graph = build_chain(rng, shape, [spec])
    config = NpuConfig(**{**SMALL_CONFIG.__dict__, "imem_rows": 4096})
    straight = compile_graph(graph, config, loops=False).instructions
    assert not any(i.name == "LOOP" for i in straight)
    program = run_and_compare(graph, config, rng, timing_seeds=(0, 1))
    assert any(i.name == "LOOP" for i in program.instructions)
    assert len(program.instructions) < len(straight)
