#!/usr/bin/env python3
"""Build the digits CNN fixtures in the formats TensorFlow does not write.

Input: ``tests/fixtures/tflite/digits_cnn_float.npz`` (the trained Keras network's float
weights, the calibration and test images; written with digits_cnn.tflite by
tools/make_tflite_fixtures.py, whose training is deterministic) and
``tests/fixtures/tflite/digits_cnn.tflite``.  Run with the project venv (it needs the
``nnef`` and ``openvino`` packages, fixture-building dependencies only)::

    .venv/bin/python tools/make_digits_fixtures.py

Writes:

* ``tests/fixtures/nnef/digits_cnn/``: ``graph.nnef`` and float32 ``.dat`` files (written
  by the Khronos ``nnef`` package's tensor writer) of the same float network, NCHW as NNEF
  declares it: conv, relu, max_pool, conv, relu, avg_pool, transpose to NHWC (Keras
  flattens NHWC), reshape, linear, relu, linear, softmax.  Checked here against the Keras
  logits with the Khronos NNEF runtime (``nnef.Session``).
* ``tests/fixtures/openvino/digits_float.{xml,bin}``: the same float network as OpenVINO IR
  (NCHW input, opset13, fp32 weights), saved by ``openvino.save_model``; checked against
  the Keras logits on OpenVINO's CPU plugin.
* ``tests/fixtures/digits/calib_nchw.npz``: ``input`` [200, 1, 1, 8, 8], the first 200
  images of the training split (the images the TFLite converter calibrated with), the
  ``--calibrate`` set of the NNEF model; ``calib_nhwc.npz``: the same images NHWC
  ([200, 8, 8, 1]) for the OpenVINO model, whose graph input the frontend makes NHWC.  ``tests/fixtures/digits/test_nchw.npz``: the
  360 float test images (``input`` [360, 1, 1, 8, 8]), ``labels`` and the Keras ``logits``.
* ``tests/fixtures/tosa/digits_cnn.tosa``: the int8 TOSA 1.0 graph of digits_cnn.tflite as
  the Circle frontend lowers it, written by tosa_ir.tosa_fb.write_tosa (loadable by the
  official TOSA reference model; tests/test_digits_npu.py runs it there).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "fixtures"
SRC = FIX / "tflite" / "digits_cnn_float.npz"
F32 = np.float32

NNEF_GRAPH = """version 1.0;

graph digits_cnn( input ) -> ( output )
{
    input = external<scalar>(shape = [1, 1, 8, 8]);
    conv1_w = variable<scalar>(shape = [8, 1, 3, 3], label = 'conv1_w');
    conv1_b = variable<scalar>(shape = [1, 8], label = 'conv1_b');
    conv2_w = variable<scalar>(shape = [16, 8, 3, 3], label = 'conv2_w');
    conv2_b = variable<scalar>(shape = [1, 16], label = 'conv2_b');
    dense1_w = variable<scalar>(shape = [32, 64], label = 'dense1_w');
    dense1_b = variable<scalar>(shape = [1, 32], label = 'dense1_b');
    dense2_w = variable<scalar>(shape = [10, 32], label = 'dense2_w');
    dense2_b = variable<scalar>(shape = [1, 10], label = 'dense2_b');
    conv1 = conv(input, conv1_w, conv1_b, padding = [(1, 1), (1, 1)]);
    relu1 = relu(conv1);
    pool1 = max_pool(relu1, size = [1, 1, 2, 2], stride = [1, 1, 2, 2], border = 'ignore',
                     padding = [(0, 0), (0, 0), (0, 0), (0, 0)]);
    conv2 = conv(pool1, conv2_w, conv2_b, padding = [(1, 1), (1, 1)]);
    relu2 = relu(conv2);
    pool2 = avg_pool(relu2, size = [1, 1, 2, 2], stride = [1, 1, 2, 2], border = 'constant',
                     padding = [(0, 0), (0, 0), (0, 0), (0, 0)]);
    nhwc = transpose(pool2, axes = [0, 2, 3, 1]);
    flat = reshape(nhwc, shape = [1, 64]);
    dense1 = linear(flat, dense1_w, dense1_b);
    relu3 = relu(dense1);
    logits = linear(relu3, dense2_w, dense2_b);
    output = softmax(logits, axes = [1]);
}
"""


def nnef_weights(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Keras layouts -> NNEF: conv filters [O, I, KH, KW], linear filters [O, I], biases [1, C]."""
    out = {}
    for name in ("conv1", "conv2"):
        out[f"{name}_w"] = np.ascontiguousarray(w[f"{name}_w"].transpose(3, 2, 0, 1), F32)
    for name in ("dense1", "dense2"):
        out[f"{name}_w"] = np.ascontiguousarray(w[f"{name}_w"].T, F32)
    for name in ("conv1", "conv2", "dense1", "dense2"):
        out[f"{name}_b"] = np.ascontiguousarray(w[f"{name}_b"][None], F32)
    return out


def write_nnef(folder: Path, w: dict[str, np.ndarray]) -> None:
    import nnef

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(NNEF_GRAPH)
    for label, array in nnef_weights(w).items():
        with open(folder / f"{label}.dat", "wb") as f:
            nnef.write_tensor(f, array)


def check_nnef(folder: Path, x_nchw: np.ndarray, logits: np.ndarray) -> float:
    """Largest |softmax difference| between the Khronos runtime and Keras (float check)."""
    import nnef

    want = np.exp(logits - logits.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    worst = 0.0
    with nnef.Session(str(folder), lowered=[]) as session:
        for x, p in zip(x_nchw, want):
            (got,) = session(np.ascontiguousarray(x, F32))
            worst = max(worst, float(np.abs(np.asarray(got).reshape(-1) - p).max()))
    return worst


def openvino_model(w: dict[str, np.ndarray]):
    import openvino as ov
    import openvino.opset13 as ops

    nw = nnef_weights(w)
    x = ops.parameter([1, 1, 8, 8], np.float32, name="input")

    def conv(h, name):
        c = ops.convolution(h, ops.constant(nw[f"{name}_w"]), [1, 1], [1, 1], [1, 1], [1, 1])
        b = ops.constant(nw[f"{name}_b"].reshape(1, -1, 1, 1))
        return ops.relu(ops.add(c, b))

    h = conv(x, "conv1")
    h = ops.max_pool(h, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2]).output(0)
    h = conv(h, "conv2")
    h = ops.avg_pool(h, [2, 2], [0, 0], [0, 0], [2, 2], exclude_pad=True)
    h = ops.transpose(h, ops.constant(np.array([0, 2, 3, 1], np.int64)))
    h = ops.reshape(h, ops.constant(np.array([1, 64], np.int64)), special_zero=False)
    h = ops.relu(ops.add(ops.matmul(h, ops.constant(nw["dense1_w"]), False, True),
                         ops.constant(nw["dense1_b"])))
    logits = ops.add(ops.matmul(h, ops.constant(nw["dense2_w"]), False, True),
                     ops.constant(nw["dense2_b"]))
    probs = ops.softmax(logits, 1)
    probs.output(0).set_names({"output"})
    return ov.Model([probs], [x], "digits_cnn")


def write_openvino(xml: Path, w, x_nchw: np.ndarray, logits: np.ndarray) -> float:
    import openvino as ov

    ov.save_model(openvino_model(w), xml, compress_to_fp16=False)
    compiled = ov.Core().compile_model(ov.Core().read_model(xml), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    want = np.exp(logits - logits.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got = np.stack([np.asarray(compiled({0: x})[compiled.outputs[0]]).reshape(-1)
                    for x in x_nchw])
    return float(np.abs(got - want).max())


def write_tosa_fixture(path: Path) -> None:
    from compiler.frontends.circle.load import load_circle
    from tosa_ir.tosa_fb import write_tosa

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(write_tosa(load_circle(FIX / "tflite" / "digits_cnn.tflite")))


def save_npz(path: Path, **arrays) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def main() -> int:
    src = np.load(SRC)
    w = {k: src[k] for k in src.files if k.endswith(("_w", "_b"))}
    nchw = lambda x: np.ascontiguousarray(x.transpose(0, 3, 1, 2)[:, None], F32)  # noqa: E731
    calib, test = nchw(src["x_calib"]), nchw(src["x_test"])
    logits = src["logits"].reshape(len(test), -1)
    save_npz(FIX / "digits" / "calib_nchw.npz", input=calib)
    # The OpenVINO frontend gives graphs NHWC inputs (compiler/frontends/openvino/load.py), and
    # --calibrate data is in the graph's layout.
    save_npz(FIX / "digits" / "calib_nhwc.npz", input=np.ascontiguousarray(src["x_calib"], F32))
    save_npz(FIX / "digits" / "test_nchw.npz", input=test, labels=src["labels"], logits=logits)
    folder = FIX / "nnef" / "digits_cnn"
    write_nnef(folder, w)
    print(f"{folder}: Khronos runtime vs Keras, max |softmax diff| = "
          f"{check_nnef(folder, test, logits):.2e}")
    xml = FIX / "openvino" / "digits_float.xml"
    print(f"{xml}: OpenVINO CPU vs Keras, max |softmax diff| = "
          f"{write_openvino(xml, w, test, logits):.2e}")
    write_tosa_fixture(FIX / "tosa" / "digits_cnn.tosa")
    print(f"{FIX / 'tosa' / 'digits_cnn.tosa'} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
