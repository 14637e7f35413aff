"""The digits CNN through every frontend, on the NPU: real-data accuracy within 1 point.

One network (a small CNN trained on scikit-learn's 8x8 digits: conv, max pool, conv,
average pool, two fully connected layers, softmax), stored in each model format the
toolchain reads (builders: tools/make_tflite_fixtures.py, tools/make_openvino_fixtures.py,
tools/make_digits_fixtures.py):

==================  ===========================================================================
tflite, circle      tests/fixtures/tflite/digits_cnn.{tflite,circle}: TFLite's int8 model (the
                    integer softmax included: RESCALE, REDUCE_MAX, TABLE, CLZ, SELECT chains)
openvino-fq         tests/fixtures/openvino/tflite_digits.xml: the TFLite model as OpenVINO's
                    TFLite frontend converts it (FakeQuantize; the graph ends at the logits)
openvino-float      tests/fixtures/openvino/digits_float.xml: the float network (exact Keras
                    weights), quantized by our post-training quantization with ``--calibrate
                    tests/fixtures/digits/calib_nchw.npz``
nnef-float          tests/fixtures/nnef/digits_cnn/ (graph.nnef + float32 .dat files, exact
                    Keras weights), quantized with ``--calibrate tests/fixtures/digits/calib_nchw.npz``
tosa                tests/fixtures/tosa/digits_cnn.tosa: the Circle frontend's int8 TOSA 1.0
                    graph written by tosa_ir.tosa_fb.write_tosa
==================  ===========================================================================

Both calibration sets are the first 200 images of the training split (the images TFLite's
converter calibrated with); none is in the test split.

For each frontend the model is loaded as the CLI loads it (npu.backends.load_model, which
quantizes float models with the calibration set), compiled once for the default 16x16 NPU,
and then, over **all 360 samples** of the test split:

* the program runs on the ISA simulator and its output must equal, bit for bit, the
  reference interpreter's (sim.reference) on the same graph;
* the NPU accuracy (argmax of its output against the labels) must be within 1 point
  (0.01) of the float Keras model's accuracy on the same samples (0.9722, from the logits
  stored in tests/fixtures/digits/test_nchw.npz).

Also checked: on tflite/circle/tosa the reference interpreter equals TFLite's reference
kernels (``ref_0`` of digits_cnn.npz) on all 360 samples; the .tosa file runs on the
official TOSA reference model (tosa-tools, when installed) with the same outputs as ours
on 8 samples.  Each test prints its row of the accuracy table (``pytest -s`` or without
xdist shows them together); the whole file takes about 40 s on one core.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from compiler.driver import run_pipeline
from isa.config import DEFAULT_CONFIG
from npu.backends import load_model
from sim.isa.sim import IsaSim
from sim.reference import run_graph

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DIGITS = FIXTURES / "digits"
TFLITE = FIXTURES / "tflite"

# frontend -> (model path, calibration set or None for int8 models)
FRONTENDS = {
    "tflite": (TFLITE / "digits_cnn.tflite", None),
    "circle": (TFLITE / "digits_cnn.circle", None),
    "openvino-fq": (FIXTURES / "openvino" / "tflite_digits.xml", None),
    "openvino-float": (FIXTURES / "openvino" / "digits_float.xml", DIGITS / "calib_nchw.npz"),
    "nnef-float": (FIXTURES / "nnef" / "digits_cnn", DIGITS / "calib_nchw.npz"),
    "tosa": (FIXTURES / "tosa" / "digits_cnn.tosa", None),
}
# Models whose graph is TFLite's own integer model (TFLite reference-kernel outputs apply).
TFLITE_GRAPHS = ("tflite", "circle", "tosa")
OFFICIAL_SAMPLES = 8
TOLERANCE = 0.01


def _int8_inputs(model, name: str) -> np.ndarray:
    """The test split as the int8 codes the graph takes, [360, *input shape]."""
    if model.quantized is None:
        # int8 models: TFLite's quantization of the images (round(x / scale) + zp).
        return np.load(TFLITE / "digits_cnn.npz")["input_0"]
    images = np.load(DIGITS / "test_nchw.npz")["input"]           # [360, 1, 1, 8, 8]
    shape = model.graph.main.tensor(name).shape
    if shape[-1] == 1:                                              # NHWC graph input
        images = images.transpose(0, 1, 3, 4, 2)
    assert images.shape[1:] == tuple(shape)
    return np.stack([model.quantized.quantize_inputs({name: x})[name] for x in images])


@pytest.mark.parametrize("frontend", list(FRONTENDS))
def test_digits_accuracy_on_the_npu(frontend, capsys):
    path, calibration = FRONTENDS[frontend]
    test = np.load(DIGITS / "test_nchw.npz")
    labels = test["labels"]
    float_acc = float(np.mean(np.argmax(test["logits"], axis=1) == labels))
    recorded = json.loads((TFLITE / "digits_cnn.json").read_text())["float_accuracy"]
    assert float_acc == pytest.approx(recorded)

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):     # the quantizer's SNR table
        model = load_model(str(path), None if calibration is None else str(calibration))
    graph = model.graph
    (name,), (out,) = graph.main.inputs, graph.main.outputs
    program = run_pipeline(graph, DEFAULT_CONFIG).program
    codes = _int8_inputs(model, name)
    assert len(codes) == len(labels) == 360

    sim = IsaSim(DEFAULT_CONFIG)
    npu_out, ref_out = [], []
    for i, x in enumerate(codes):
        result = sim.run(program, program.memory_image({name: x}))
        assert result.ok, f"{frontend} sample {i}: {result.error_message}"
        got = program.read_outputs(result.memory)[out]
        want = run_graph(graph, {name: x})[out]
        assert np.array_equal(got, want), \
            f"{frontend} sample {i}: NPU {got.tolist()} != reference {want.tolist()}"
        npu_out.append(got.reshape(-1))
        ref_out.append(want.reshape(-1))
    npu_out, ref_out = np.stack(npu_out), np.stack(ref_out)
    if frontend in TFLITE_GRAPHS:
        tflite_ref = np.load(TFLITE / "digits_cnn.npz")["ref_0"].reshape(len(labels), -1)
        assert np.array_equal(ref_out, tflite_ref), f"{frontend}: reference != TFLite kernels"
    if frontend == "tosa" and importlib.util.find_spec("tosa_reference_model") is not None:
        _check_official(path, graph, codes[:: len(codes) // OFFICIAL_SAMPLES][:OFFICIAL_SAMPLES])

    npu_acc = float(np.mean(np.argmax(npu_out, axis=1) == labels))
    ref_acc = float(np.mean(np.argmax(ref_out, axis=1) == labels))
    within = abs(npu_acc - float_acc) <= TOLERANCE
    with capsys.disabled():
        if frontend == next(iter(FRONTENDS)):
            print(f"\n{'frontend':<15} {'samples':>7} {'NPU acc':>8} {'ref acc':>8} "
                  f"{'float acc':>9}  within 1 pt  instrs  seconds")
        print(f"\n{frontend:<15} {len(labels):>7} {npu_acc:>8.4f} {ref_acc:>8.4f} "
              f"{float_acc:>9.4f}  {'yes' if within else 'NO':<11} {len(program.instructions):>6} "
              f"{time.perf_counter() - start:>8.1f}", end="")
    assert within, f"{frontend}: NPU accuracy {npu_acc:.4f} vs float {float_acc:.4f}"


def _check_official(path: Path, graph, samples: np.ndarray) -> None:
    """The .tosa bytes on the official reference model equal our interpreter's outputs."""
    sys.path.insert(0, os.path.dirname(__file__))
    import oracle

    (name,), (out,) = graph.main.inputs, graph.main.outputs
    data = path.read_bytes()
    for i, x in enumerate(samples):
        status, official, log = oracle._run_binding(data, [x], "EIGHTK")
        assert status == "VALID", f"{path}: official model said {status} (sample {i})\n{log}"
        want = run_graph(graph, {name: x})[out]
        np.testing.assert_array_equal(official[0].reshape(want.shape), want)


@pytest.mark.parametrize("frontend", [f for f, (_, cal) in FRONTENDS.items() if cal is not None])
def test_float_model_matches_keras(frontend):
    """The float graph a frontend reads from the float model (before quantization) gives
    the Keras model's softmax on all 360 test images (float32 rounding apart), so the
    "float acc" column is the accuracy of the very model the quantizer starts from."""
    from compiler.frontends import load_graph
    from compiler.graph.quantize import evaluate

    path, _ = FRONTENDS[frontend]
    graph = load_graph(path)
    (name,), (out,) = graph.main.inputs, graph.main.outputs
    test = np.load(DIGITS / "test_nchw.npz")
    images, logits = test["input"], test["logits"]
    if graph.main.tensor(name).shape[-1] == 1:
        images = images.transpose(0, 1, 3, 4, 2)
    want = np.exp(logits - logits.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    got = np.stack([evaluate(graph, {name: x}, keep=False)[out].reshape(-1) for x in images])
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.array_equal(np.argmax(got, axis=1), np.argmax(logits, axis=1))
