"""OpenVINO IR frontend, float models: our float TOSA graphs against OpenVINO's CPU plugin.

Fixtures (tests/fixtures/openvino/, built by tools/make_openvino_fixtures.py with openvino,
which these tests do not need): ``ops_float`` (one input, 38 outputs, one per layer form)
and ``cnn_float`` (a small CNN with f16-compressed weights, a ShapeOf-computed Reshape,
SoftMax and a second output).  Expected values are OpenVINO CPU outputs (fp32 inference).

The graphs run on the project's float evaluator (every sample) and on the official TOSA
reference model (first sample), in both boundary layouts.
"""
from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from compiler.frontends.openvino.load import load_openvino_model  # noqa: E402
from compiler.graph.quantize import quantize_graph  # noqa: E402
from compiler.graph.quantize.float_eval import evaluate  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "openvino"
# fp32 results differ from OpenVINO's by summation order only.
RTOL = 2e-5


def fixture(name: str):
    data = np.load(FIXTURES / f"{name}.npz")
    inputs = {k[3:]: data[k] for k in data.files if k.startswith("in:")}
    outputs = {k[4:]: data[k] for k in data.files if k.startswith("out:")}
    return FIXTURES / f"{name}.xml", inputs, outputs


def to_nhwc(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 2, 3, 1) if a.ndim == 4 else a


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(float(np.abs(want).max()), 1e-3)
    err = float(np.abs(got.astype(np.float64) - want).max()) / scale
    assert err <= RTOL, f"{what}: relative error {err:.2e}"


@pytest.mark.parametrize("name", ["ops_float", "cnn_float"])
def test_float_graph_matches_openvino_cpu(name):
    path, inputs, outputs = fixture(name)
    model = load_openvino_model(path, layout="nchw")
    graph = model.graph
    assert model.quantized is None and graph is model.float_graph
    assert sorted(graph.main.outputs) == sorted(outputs)
    assert all(graph.main.tensors[n].dtype == "fp32" for n in graph.main.outputs)
    samples = len(next(iter(inputs.values())))
    for s in range(samples):
        got = evaluate(graph, {k: v[s] for k, v in inputs.items()}, keep=False)
        for out, want in outputs.items():
            assert_close(got[out], want[s], f"{name}:{out}[{s}]")


def test_every_ops_fixture_output_is_a_distinct_layer_form():
    """The ops fixture really exercises what its names say (guards against a rebuild
    that silently drops cases)."""
    path, _, outputs = fixture("ops_float")
    model = load_openvino_model(path, layout="nchw")
    assert len(outputs) >= 38
    notes = "\n".join(model.notes)
    assert "'conv_dil_slice'" in notes and "SLICE drops" in notes
    assert "'gconv_g2'" in notes and "block-diagonal" in notes
    # conv_k2s2 needs an exact TOSA size: its never-read last input row/column is sliced
    # off (the SLICE shared with conv_dil_slice), and its kernel keeps its 2x2 size.
    assert "zero taps" not in notes
    block = model.graph.main
    conv = next(op for op in block.operators
                if op.op == "CONV2D" and "'conv_k2s2'" in op.location)
    assert block.producers()[conv.inputs[0]].op == "SLICE"
    assert block.tensors[conv.inputs[1]].shape[1:3] == (2, 2)
    ops = Counter(op.op for op in model.graph.main.operators)
    for op in ("CONV2D", "DEPTHWISE_CONV2D", "MAX_POOL2D", "AVG_POOL2D", "PAD", "SLICE",
               "MATMUL", "CONCAT", "TRANSPOSE", "REDUCE_SUM", "REDUCE_MAX", "EXP",
               "RECIPROCAL", "SIGMOID", "TANH", "CLAMP", "NEGATE", "ABS", "CONST",
               "CONST_SHAPE"):
        assert ops[op] > 0, op


def test_nhwc_layout_has_no_transpose_and_same_values():
    path, inputs, outputs = fixture("cnn_float")
    graph = load_openvino_model(path, layout="nhwc").graph                       # default layout: NHWC boundaries
    block = graph.main
    assert [block.tensors[n].shape for n in block.inputs] == [(1, 16, 16, 3)]
    assert not any(op.op == "TRANSPOSE" for op in block.operators)
    got = evaluate(graph, {"image": to_nhwc(inputs["image"][0])}, keep=False)
    for out, want in outputs.items():
        assert_close(got[out], want[0], out)


def test_f16_weights_and_shape_subgraph_are_folded():
    path, _, _ = fixture("cnn_float")
    text = path.read_text()
    assert 'element_type="f16"' in text and 'type="ShapeOf"' in text
    graph = load_openvino_model(path, layout="nhwc").graph
    ops = {op.op for op in graph.main.operators}
    # ShapeOf/Gather/Concat/Convert leave no operator behind; biases are folded into the
    # convolutions (no ADD of a constant remains).
    assert not ops & {"CAST", "GATHER"}
    block = graph.main
    for op in block.operators:
        if op.op == "ADD":
            assert not any(block.tensors[n].is_const for n in op.inputs)


@pytest.mark.parametrize("name,layout", [("ops_float", "nchw"), ("cnn_float", "nhwc")])
def test_official_reference_model_agrees(name, layout):
    pytest.importorskip("tosa_reference_model")
    import oracle
    from tosa_ir.tosa_fb import write_tosa

    path, inputs, outputs = fixture(name)
    graph = load_openvino_model(path, layout="nhwc").graph if layout == "nhwc" else \
        load_openvino_model(path, layout="nchw").graph
    arrays = [to_nhwc(inputs[n][0]) if layout == "nhwc" else inputs[n][0]
              for n in graph.main.inputs]
    status, outs, log = oracle._run_binding(write_tosa(graph), arrays, "EIGHTK")
    assert status == "VALID", log
    for name_out, got in zip(graph.main.outputs, outs):
        want = outputs[name_out][0]
        if layout == "nhwc":
            want = to_nhwc(want)
        assert_close(np.asarray(got), want, name_out)


def test_float_graph_goes_through_the_quantizer():
    """The float graph is what compiler.graph.quantize takes: an int8 graph comes out."""
    path, inputs, _ = fixture("cnn_float")
    graph = load_openvino_model(path, layout="nhwc").graph
    rng = np.random.default_rng(7)
    cal = [{"image": rng.uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)} for _ in range(4)]
    qm = quantize_graph(graph, cal)
    block = qm.graph.main
    assert all(block.tensors[n].dtype == "int8" for n in block.inputs + block.outputs)
    assert "logits" in qm.outputs
