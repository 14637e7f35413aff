"""The headline model's pipeline (tools/make_alexnet.py) at reduced width.

The graph text is the NNEF specification's Appendix B AlexNet verbatim; the reduced model
(channels / 16, same topology and spatial sizes) goes through the whole pipeline: NNEF
folder with seeded weights -> float TOSA -> int8 TOSA file, whose float graph matches the
Khronos NNEF runtime and whose integers match the official TOSA reference model.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from nnef_helpers import khronos_run, official_run, snr_db  # noqa: E402
from tool_modules import load_tool  # noqa: E402

from compiler.graph.quantize import evaluate  # noqa: E402
from sim.reference import run_graph  # noqa: E402
from tosa_ir.tosa_fb import read_tosa  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT.parent / "shared" / "seeds" / "nnef-1.0-spec.txt"
NPU_OPS = {"CONV2D", "DEPTHWISE_CONV2D", "MATMUL", "RESCALE", "CLAMP", "MAX_POOL2D",
           "AVG_POOL2D", "ADD", "RESHAPE", "TRANSPOSE", "CONCAT", "PAD", "SLICE", "CONST",
           "CONST_SHAPE",
           # The int8 softmax (compiler/graph/quantize/softmax.py).
           "REDUCE_MAX", "REDUCE_SUM", "SUB", "MUL", "TABLE", "CLZ", "BITWISE_AND",
           "LOGICAL_LEFT_SHIFT", "ARITHMETIC_RIGHT_SHIFT", "GREATER", "SELECT"}


def _tool():
    return load_tool("make_alexnet")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tool = _tool()
    out = tmp_path_factory.mktemp("alexnet16")
    return tool, out, tool.build(out, width_div=16, calib=4, test=2, log=lambda *a: None,
                                softmax=True)


def test_graph_is_appendix_b_verbatim():
    tool = _tool()
    text = (ROOT / "models" / "alexnet" / "graph.nnef").read_text()
    assert tool.alexnet_text(1) == text
    assert text.startswith("version 1.0;\n\ngraph AlexNet( input ) -> ( output )\n")
    if SPEC.is_file():
        body = text.split("\n", 2)[2]
        assert body in SPEC.read_text()


def test_reduced_alexnet_pipeline(built):
    tool, out, result = built
    graph = read_tosa((out / "alexnet_int8.tosa").read_bytes())
    block = graph.main
    assert {op.op for op in block.operators} <= NPU_OPS
    assert [op.op for op in block.operators].count("CONV2D") == 8
    assert block.inputs == ["input"] and block.tensors["input"].shape == (1, 3, 224, 224)
    # The int8 softmax after the logits conv8: class probabilities, scale 1/256, zp -128.
    assert block.outputs == ["softmax"] and block.tensors["softmax"].shape == (1, 1, 1, 62)
    assert block.tensors["conv8"].shape == (1, 1, 1, 62)
    inputs = dict(np.load(out / "input.npz"))
    expected = dict(np.load(out / "expected.npz"))
    ours = run_graph(graph, inputs)
    np.testing.assert_array_equal(ours["softmax"], expected["softmax"])
    status, official = official_run(graph, inputs)
    assert status == "VALID"
    np.testing.assert_array_equal(official["softmax"], ours["softmax"])
    probs = ours["softmax"].astype(np.int64) + 128
    assert abs(probs.sum() - 256) <= 8
    errors = {e.name: e.snr_db for e in result["errors"]}
    assert set(errors) >= {"relu1", "pool1", "relu5", "pool3", "relu7", "conv8"}
    assert min(errors.values()) > 25.0, errors        # measured: 30.5 dB (conv8) and up


def test_reduced_alexnet_layer_costs(built):
    """Kernels keep their Appendix B sizes (no zero taps): the multiplies are AlexNet's.

    Output sizes: NNEF's, except conv2 and conv5, which compute one row and column less
    (the pools after them never read it: the bottom/right padding goes).  At full width
    conv1 is 54*54*64*11*11*3 = 67.7 M MACs and the graph 700.5 M (AlexNet: 736.6 M).
    """
    tool, out, result = built
    chans = [3, 4, 12, 24, 24, 16, 256, 256, 62]           # Appendix B channels / 16
    kernels = [11, 5, 3, 3, 3, 5, 1, 1]
    sizes = [54, 25, 12, 12, 11, 1, 1, 1]
    rows = tool.layer_costs(read_tosa((out / "alexnet_int8.tosa").read_bytes()),
                            [layer[0] for layer in tool.LAYERS])
    assert [r[0] for r in rows] == ["conv1", "conv2", "conv3", "conv4", "conv5", "fc6",
                                    "fc7", "fc8"]
    for i, (name, shape, macs, params) in enumerate(rows):
        k, cin, cout = kernels[i], chans[i], chans[i + 1]
        assert shape == (1, sizes[i], sizes[i], cout), name
        assert macs == sizes[i] ** 2 * cout * k * k * cin, name
        assert params == cout * k * k * cin + cout, name
    assert result["costs"] == rows
    text = tool.format_costs(rows)
    assert "conv1" in text and f"{sum(r[2] for r in rows):,}" in text.splitlines()[-1]


def test_reduced_alexnet_float_graph_matches_khronos_runtime(built):
    tool, out, result = built
    model = result["model"]
    x = tool.smooth_images(1, 99)[0]
    ours = evaluate(model.float_graph, {"input": x}, keep=False)["output"]
    (ref,) = khronos_run(out / "nnef", [x])
    assert snr_db(ref, ours) > 100
