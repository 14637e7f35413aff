"""Compiler on the headline model: AlexNet from tools/make_alexnet.py at reduced width
(channels / 16; same operators, shapes and spatial sizes as the full model).

The whole graph (convolutions and MAX_POOL2D, the NNEF frontend's input TRANSPOSE and
size-trimming SLICE) compiles and runs bit-exactly on the ISA simulator against the
reference interpreter, and so does every layer on its own, moving no data.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from isa.config import DEFAULT_CONFIG
from compiler.driver import run_pipeline
from compiler.ir import CopyLayer
from compiler.layer_split import split_layers
from sim.isa_sim import IsaSim
from sim.reference import run_graph
from tosa_ir.tosa_fb import read_tosa

sys.path.insert(0, str(Path(__file__).parent))
from tool_modules import small_alexnet  # noqa: E402


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory):
    out = tmp_path_factory.mktemp("alexnet16")
    model, inputs = small_alexnet(out)
    graph = read_tosa(model.read_bytes(), source=model.name)
    with np.load(inputs) as data:
        x = data[data.files[0]]
    return out, graph, x


def test_whole_graph_runs(alexnet):
    _, graph, x = alexnet
    comp = run_pipeline(graph, DEFAULT_CONFIG)
    kinds = [type(layer).__name__ for layer in comp.layers]
    assert kinds.count("PoolLayer") == 3
    # conv1's taps packed into the array rows (a repack layer first); fc6..fc8 streamed.
    assert kinds[:2] == ["RepackLayer", "PackedConvLayer"]
    assert [type(plan).__name__ for plan in comp.plans[-3:]] == ["FcPlan"] * 3
    inputs = {graph.main.inputs[0]: x}
    result = IsaSim(DEFAULT_CONFIG, check_hazards=True).run(comp.program, comp.program.memory_image(inputs))
    assert result.ok, result.error_message
    assert result.hazards == []
    got = comp.program.read_outputs(result.memory)
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)


def test_every_other_layer_runs_alone(alexnet):
    _, graph, x = alexnet
    units = split_layers(graph)
    assert [u.describe() for u in units] == (
        ["TRANSPOSE+SLICE+CONV2D+RESCALE+CLAMP", "SLICE+MAX_POOL2D"] + ["CONV2D+RESCALE+CLAMP", "MAX_POOL2D"]
        + ["CONV2D+RESCALE+CLAMP"] * 3 + ["MAX_POOL2D"] + ["CONV2D+RESCALE+CLAMP"] * 2 + ["CONV2D+RESCALE"])
    rng = np.random.default_rng(0)
    for unit in units:
        comp = run_pipeline(unit.graph, DEFAULT_CONFIG)
        assert not any(isinstance(layer, CopyLayer) for layer in comp.layers), unit.name
        block = unit.graph.main
        inputs = {name: x if name == graph.main.inputs[0] else
                  rng.integers(-128, 128, block.tensor(name).shape, dtype=np.int8) for name in block.inputs}
        expected = run_graph(unit.graph, inputs)
        program = comp.program
        result = IsaSim(DEFAULT_CONFIG).run(program, program.memory_image(inputs))
        assert result.ok, result.error_message
        got = program.read_outputs(result.memory)
        np.testing.assert_array_equal(got[unit.name], expected[unit.name], err_msg=unit.name)
    first = run_pipeline(units[0].graph, DEFAULT_CONFIG).program.inputs[0]
    assert (first.shape, first.perm) == ((1, 3, 224, 224), (0, 2, 3, 1))


def test_per_layer_estimate(alexnet, capsys):
    from compiler.estimate import main

    out, _, _ = alexnet
    assert main([str(out / "alexnet_int8.tosa"), "--per-layer"]) == 0
    table = capsys.readouterr().out
    rows = {line.split()[0]: line for line in table.splitlines()[3:]}
    assert list(rows) == ["relu1", "pool1", "relu2", "pool2", "relu3", "relu4", "relu5", "pool3", "relu6",
                          "relu7", "conv8"]
    assert all(" yes " in rows[name] for name in rows)
