"""Circle/TFLite frontend vs TFLite's kernels, on the committed fixtures.

tests/fixtures/tflite/ holds small int8 / uint8 / int16 models and the outputs (and
intermediate tensors) of TFLite's reference kernels (``OpResolverType.BUILTIN_REF``) and
optimized kernels (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``), made by
tools/make_tflite_fixtures.py with TensorFlow; this test needs neither TensorFlow nor
TFLite.  The lowered graph, run by our reference interpreter, must reproduce the
reference kernels bit for bit, for the .tflite and the .circle file, on every output and
every intermediate tensor that keeps its TFLite name.  Against the optimized kernels the
stated bound is checked.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compiler.frontends.circle.load import load_circle
from sim.reference import run_graph

FIXTURES = Path(__file__).parent / "fixtures" / "tflite"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
# TFLite's optimized kernels differ from its reference kernels by at most this many
# units in the last place on these fixtures (see manifest.json for where).
OPTIMIZED_BOUND = 4
DIGITS_SAMPLES = 40  # digits_cnn outputs checked bit for bit here (all 360: accuracy test)


def _feeds(graph, data, sample: int) -> dict:
    feeds = {}
    for i, name in enumerate(graph.main.inputs):
        x = data[f"input_{i}"][sample]
        feeds[name] = x.view(np.int8) if x.dtype == np.uint8 else x  # uint8: bit patterns
    return feeds


def _as_ref(ours: np.ndarray, ref: np.ndarray, is_graph_output: bool) -> np.ndarray:
    """Our values in the reference's representation (uint8 tensors are int8 inside the
    graph, moved by 128; uint8 graph outputs are int8 bit patterns)."""
    ours = np.asarray(ours).reshape(ref.shape)
    if ref.dtype == np.uint8:
        return ours.view(np.uint8) if is_graph_output else (ours.astype(np.int64) + 128)
    return ours


@pytest.mark.parametrize("ext", ["tflite", "circle"])
@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_bit_exact_with_reference_kernels(name, ext):
    graph = load_circle(FIXTURES / f"{name}.{ext}")
    data = np.load(FIXTURES / f"{name}.npz")
    outputs = list(graph.main.outputs)
    # Intermediate tensors keep their TFLite names: check them too.
    mids = [k[4:] for k in data.files if k.startswith("mid:")]
    missing = [m for m in mids if m not in graph.main.tensors]
    assert not missing, f"TFLite tensors without a TOSA tensor of the same name: {missing}"
    mids = [m for m in mids if m not in outputs and m not in graph.main.inputs]
    graph.main.outputs = outputs + mids
    samples = data["input_0"].shape[0]
    if name == "digits_cnn":
        samples = DIGITS_SAMPLES
    mid_samples = data[f"mid:{mids[0]}"].shape[0] if mids else 0
    checked = 0
    for s in range(samples):
        result = run_graph(graph, _feeds(graph, data, s))
        for j, out in enumerate(outputs):
            ref = data[f"ref_{j}"][s]
            ours = _as_ref(result[out], ref, True)
            np.testing.assert_array_equal(ours, ref, err_msg=f"{name}: output {j} sample {s}")
            checked += ref.size
        if s < mid_samples:
            for m in mids:
                ref = data[f"mid:{m}"][s]
                ours = _as_ref(result[m], ref, False)
                np.testing.assert_array_equal(ours, ref, err_msg=f"{name}: tensor {m!r}")
                checked += ref.size
    assert checked > 0


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_optimized_kernels_within_bound(name):
    """The stated difference between the reference kernels (which we match) and TFLite's
    optimized kernels."""
    data = np.load(FIXTURES / f"{name}.npz")
    worst = 0
    j = 0
    while f"ref_{j}" in data.files:
        diff = np.abs(data[f"ref_{j}"].astype(np.int64) - data[f"opt_{j}"].astype(np.int64))
        worst = max(worst, int(diff.max()))
        j += 1
    assert worst == MANIFEST[name]["ref_vs_opt_max_abs_diff"]
    assert worst <= OPTIMIZED_BOUND


def test_digits_accuracy_matches_tflite():
    """The lowered digits CNN classifies the whole test set as TFLite's reference
    kernels do (same accuracy as recorded when the fixture was made)."""
    info = json.loads((FIXTURES / "digits_cnn.json").read_text())
    data = np.load(FIXTURES / "digits_cnn.npz")
    graph = load_circle(FIXTURES / "digits_cnn.tflite")
    x = data["input_0"]
    predictions = []
    for s in range(x.shape[0]):
        out = run_graph(graph, {graph.main.inputs[0]: x[s]})[graph.main.outputs[0]]
        predictions.append(int(np.argmax(out)))
    accuracy = float(np.mean(np.array(predictions) == data["labels"]))
    assert accuracy == pytest.approx(info["int8_tflite_reference_accuracy"], abs=1e-12)
    assert accuracy > 0.9 and info["float_accuracy"] > 0.9
