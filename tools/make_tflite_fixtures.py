#!/usr/bin/env python3
"""Build the TFLite/Circle test fixtures in tests/fixtures/tflite/ (needs TensorFlow).

Run with a Python that has tensorflow-cpu and scikit-learn (fixture-building dependencies
only; the tests that use the fixtures need neither), e.g.::

    python -m venv build/tf-venv && build/tf-venv/bin/pip install tensorflow-cpu scikit-learn
    build/tf-venv/bin/python tools/make_tflite_fixtures.py

For each small model it writes ``<name>.tflite``, ``<name>.circle`` (the same flatbuffer
with file identifier ``CIR0``) and ``<name>.npz`` holding, per graph input/output
position ``i``: ``input_i`` (seeded inputs, leading axis = sample), ``ref_i`` (outputs of
TFLite's reference kernels, ``OpResolverType.BUILTIN_REF``) and ``opt_i`` (its optimized
kernels, ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``).  Float inputs are fed as exact
dequantized codes and float outputs are stored back as codes, so every array holds the
quantized integers the lowered TOSA graph takes and returns.  ``manifest.json`` lists the
models, their operators and the largest reference-vs-optimized difference.

``digits_cnn`` is a small CNN trained on scikit-learn's 8x8 digits, int8-quantized, with
its quantized test set, labels and accuracies (``digits_cnn.json``), and
``digits_cnn_float.npz``: the trained float weights, calibration and test images and float
logits, from which tools/make_digits_fixtures.py builds the NNEF, float OpenVINO and TOSA
digits fixtures (run it after this script).  Training is deterministic (seeded; the same
bytes on rebuild with tensorflow-cpu 2.21): ``build/tf-venv/bin/python
tools/make_tflite_fixtures.py digits_cnn`` rebuilds only the digits model.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.lite.python.interpreter import Interpreter, OpResolverType  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tflite"
SEED = 1234
keras = tf.keras
L = keras.layers


# ---------------------------------------------------------------------------------------
# Models
def m_cnn_basic():
    """Conv(SAME, RELU6) -> depthwise(VALID, stride 2, RELU) -> max pool (VALID, leftover
    row) -> 1x1 conv -> average pool (SAME: border windows of 4 and 6) -> FC -> softmax."""
    x = inp = keras.Input((16, 16, 3), batch_size=2)
    x = L.Conv2D(8, 3, padding="same", activation="relu6")(x)
    x = L.DepthwiseConv2D(3, strides=2, padding="valid", activation="relu")(x)
    x = L.MaxPooling2D(2, strides=2, padding="valid")(x)
    x = L.Conv2D(12, 1)(x)
    x = L.AveragePooling2D(3, strides=1, padding="same")(x)
    x = L.Flatten()(x)
    x = L.Dense(16, activation="relu")(x)
    x = L.Dense(10)(x)
    x = L.Softmax()(x)
    return keras.Model(inp, x), [(2, 16, 16, 3)]


def m_residual():
    """ADD, SUB, MUL of two branches, CONCATENATION, depthwise with multiplier 2, RELU6."""
    x = inp = keras.Input((10, 10, 4), batch_size=1)
    a = L.Conv2D(8, 3, padding="same")(x)
    b = L.Conv2D(8, 1, activation="relu")(x)
    s = L.Add()([a, b])
    d = L.Subtract()([a, b])
    m = L.Multiply()([s, d])
    c = L.Concatenate()([s, m])
    c = L.DepthwiseConv2D(3, depth_multiplier=2, padding="same")(c)
    c = L.ReLU(6.0)(c)
    c = L.Conv2D(6, 3, strides=2, padding="same", dilation_rate=1)(c)
    return keras.Model(inp, c), [(1, 10, 10, 4)]


def m_layout():
    """PAD, TRANSPOSE, RESHAPE, MEAN, TANH, LOGISTIC, strided max pool with SAME padding."""
    x = inp = keras.Input((6, 8, 5), batch_size=1)
    x = L.ZeroPadding2D(((1, 2), (0, 1)))(x)
    x = L.Conv2D(6, 2, strides=2, padding="valid")(x)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    t = L.Permute((2, 1, 3))(x)
    t = L.Reshape((-1, 6))(t)
    t = L.Activation("tanh")(t)
    g = L.GlobalAveragePooling2D(keepdims=True)(x)
    g = L.Activation("sigmoid")(g)
    g = L.Reshape((1, 6))(g)
    out = L.Concatenate(axis=1)([t, g])
    out = L.Dense(4, activation="tanh")(out)
    return keras.Model(inp, out), [(1, 6, 8, 5)]


def m_tables():
    """Every int8 code through TANH, LOGISTIC and SOFTMAX (rows of 16 and 64)."""
    x = inp = keras.Input((256,), batch_size=1)
    t = L.Activation("tanh")(x)
    s = L.Activation("sigmoid")(x)
    r = L.Reshape((16, 16))(x)
    sm = L.Softmax()(r)
    r2 = L.Reshape((4, 64))(x)
    sm2 = L.Softmax()(r2)
    return keras.Model(inp, [t, s, sm, sm2]), [(1, 256)]


def m_avgpool_rounding():
    """Average pools whose sums are often exact halves: 2x2 and 4x1 windows, SAME and
    VALID, with a leftover column."""
    x = inp = keras.Input((9, 11, 4), batch_size=1)
    a = L.AveragePooling2D(2, strides=2, padding="valid")(x)
    b = L.AveragePooling2D((4, 1), strides=(2, 3), padding="same")(x)
    return keras.Model(inp, [a, b]), [(1, 9, 11, 4)]


def m_fc_stack():
    """FULLY_CONNECTED on a 3-D input (keep_num_dims), FC without bias, RELU_N1_TO_1-like."""
    x = inp = keras.Input((3, 20), batch_size=2)
    x = L.Dense(12, activation="relu")(x)
    x = L.Dense(7, use_bias=False)(x)
    x = L.Activation("tanh")(x)
    return keras.Model(inp, x), [(2, 3, 20)]


def m_int16():
    """16x8 quantization: conv, depthwise, pools, ADD, FC (no softmax: int16 softmax is
    not supported)."""
    x = inp = keras.Input((12, 12, 3), batch_size=1)
    a = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    b = L.DepthwiseConv2D(3, padding="same")(a)
    x = L.Add()([a, b])
    x = L.MaxPooling2D(2)(x)
    x = L.AveragePooling2D(3, strides=1, padding="same")(x)
    x = L.Flatten()(x)
    x = L.Dense(10)(x)
    return keras.Model(inp, x), [(1, 12, 12, 3)]


MODELS = {
    "cnn_basic": (m_cnn_basic, {}),
    "residual": (m_residual, {}),
    "layout": (m_layout, {}),
    "tables": (m_tables, {}),
    "avgpool_rounding": (m_avgpool_rounding, {}),
    "fc_stack": (m_fc_stack, {}),
    "float_io": (m_cnn_basic, {"io": "float"}),
    "uint8_io": (m_residual, {"io": "uint8"}),
    "int16x8": (m_int16, {"int16": True}),
    "per_tensor": (m_residual, {"per_tensor": True}),
}


# ---------------------------------------------------------------------------------------
def convert(model, shapes, rng, io="int8", int16=False, per_tensor=False, calib=None):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if calib is None:
        def calib():
            for _ in range(64):
                yield [rng.normal(0.0, 1.5, size=s).astype(np.float32) for s in shapes]
    conv.representative_dataset = calib
    if int16:
        conv.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        conv.inference_input_type = conv.inference_output_type = tf.int16
    else:
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if io != "float":
            dtype = tf.uint8 if io == "uint8" else tf.int8
            conv.inference_input_type = conv.inference_output_type = dtype
    if per_tensor:
        conv._experimental_disable_per_channel = True
    return conv.convert()


def interpreter(model: bytes, resolver) -> Interpreter:
    it = Interpreter(model_content=model, experimental_op_resolver_type=resolver,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    return it


def edges(model: bytes):
    """Graph inputs and outputs in subgraph order, as (tensor index, edge tensor): for a
    float input the QUANTIZE output it feeds, for a float output the DEQUANTIZE input it
    comes from (else None)."""
    from tensorflow.lite.python import schema_py_generated as schema

    m = schema.Model.GetRootAsModel(model, 0)
    sg = m.Subgraphs(0)
    ops = [sg.Operators(i) for i in range(sg.OperatorsLength())]
    ins, outs = [], []
    for k in range(sg.InputsLength()):
        t = sg.Inputs(k)
        q = [op.Outputs(0) for op in ops if op.InputsLength() and op.Inputs(0) == t]
        ins.append((t, q[0] if sg.Tensors(t).Type() == 0 else None))
    for k in range(sg.OutputsLength()):
        t = sg.Outputs(k)
        d = [op.Inputs(0) for op in ops if op.OutputsLength() and op.Outputs(0) == t]
        outs.append((t, d[0] if sg.Tensors(t).Type() == 0 else None))
    return ins, outs


def _quant(it: Interpreter, index: int):
    d = [t for t in it.get_tensor_details() if t["index"] == index][0]
    return d["quantization"], d["dtype"]


def quantized_inputs(it: Interpreter, model: bytes, rng, samples: int, all_codes: bool):
    """Per graph input (subgraph order): [samples, *shape] codes of its quantized type."""
    out = []
    ins, _ = edges(model)
    for t, q in ins:
        (_, _), dtype = _quant(it, t if q is None else q)
        shape = tuple(_shape(it, t))
        info = np.iinfo(dtype)
        if all_codes:
            codes = np.arange(info.min, info.max + 1).astype(dtype)
            codes = np.stack([rng.permutation(codes).reshape(shape) for _ in range(samples)])
        else:
            lo, hi = max(info.min, -3000), min(info.max, 3000)
            codes = rng.integers(lo, hi + 1, size=(samples,) + shape).astype(dtype)
        out.append(codes)
    return out


def _shape(it: Interpreter, index: int):
    return [t for t in it.get_tensor_details() if t["index"] == index][0]["shape"]


def run(it: Interpreter, model: bytes, codes: list[np.ndarray], sample: int) -> list[np.ndarray]:
    """Outputs (subgraph order) for sample ``sample`` of the input codes."""
    ins, outs = edges(model)
    for (t, q), c in zip(ins, codes):
        x = c[sample]
        if q is not None:  # exact dequantized codes: the model's QUANTIZE gives them back
            (scale, zp), _ = _quant(it, q)
            x = (np.float32(scale) * (x.astype(np.float32) - np.float32(zp))).astype(np.float32)
        it.set_tensor(t, x)
    it.invoke()
    for (t, q), c in zip(ins, codes):
        if q is not None:
            assert np.array_equal(it.get_tensor(q), c[sample]), "input codes not reproduced"
    return [it.get_tensor(t if q is None else q).copy() for t, q in outs]


def intermediates(it: Interpreter, model: bytes) -> dict[str, np.ndarray]:
    """Every computed 8/16-bit tensor of the last invocation, by name."""
    from tensorflow.lite.python import schema_py_generated as schema

    sg = schema.Model.GetRootAsModel(model, 0).Subgraphs(0)
    out = {}
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        for k in range(op.OutputsLength()):
            t = op.Outputs(k)
            value = it.get_tensor(t)
            if value.dtype in (np.int8, np.uint8, np.int16):
                out[sg.Tensors(t).Name().decode()] = value.copy()
    return out


def op_names(model: bytes) -> list[str]:
    from tensorflow.lite.python import schema_py_generated as schema

    m = schema.Model.GetRootAsModel(model, 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    codes = [max(m.OperatorCodes(i).DeprecatedBuiltinCode(), m.OperatorCodes(i).BuiltinCode())
             for i in range(m.OperatorCodesLength())]
    sg = m.Subgraphs(0)
    return [names.get(codes[sg.Operators(i).OpcodeIndex()], "?")
            for i in range(sg.OperatorsLength())]


def write_fixture(name: str, model: bytes, codes, samples: int, manifest: dict) -> None:
    ref = interpreter(model, OpResolverType.BUILTIN_REF)
    opt = interpreter(model, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref_out, ref_mid = [], []
    for s in range(samples):
        ref_out.append(run(ref, model, codes, s))
        ref_mid.append(intermediates(ref, model))
    opt_out = [run(opt, model, codes, s) for s in range(samples)]
    arrays = {}
    for i, c in enumerate(codes):
        arrays[f"input_{i}"] = c
    max_diff, differing = 0, 0
    for j in range(len(ref_out[0])):
        r = np.stack([o[j] for o in ref_out])
        p = np.stack([o[j] for o in opt_out])
        arrays[f"ref_{j}"] = r
        arrays[f"opt_{j}"] = p
        diff = np.abs(r.astype(np.int64) - p.astype(np.int64))
        max_diff = max(max_diff, int(diff.max()))
        differing += int((diff > 0).sum())
    for key in ref_mid[0]:  # intermediate tensors of the reference kernels, by name
        arrays[f"mid:{key}"] = np.stack([m[key] for m in ref_mid])
    (OUT / f"{name}.tflite").write_bytes(model)
    circle = bytearray(model)
    circle[4:8] = b"CIR0"
    (OUT / f"{name}.circle").write_bytes(bytes(circle))
    np.savez_compressed(OUT / f"{name}.npz", **arrays)
    manifest[name] = {
        "operators": op_names(model),
        "samples": samples,
        "inputs": [str(a.dtype) for a in codes],
        "ref_vs_opt_max_abs_diff": max_diff,
        "ref_vs_opt_elements_differing": differing,
        "elements": int(sum(arrays[f"ref_{j}"].size for j in range(len(ref_out[0])))),
    }
    print(f"{name}: {manifest[name]}")


# ---------------------------------------------------------------------------------------
def write_digits_float(model, x_train, x_test, y_test) -> None:
    """``digits_cnn_float.npz``: the trained float network, for the float-model frontends.

    Keras layouts: ``conv{1,2}_w`` [KH, KW, IC, OC], ``dense{1,2}_w`` [IN, OUT] (the flatten
    runs over NHWC), biases ``*_b``.  ``x_calib`` holds the training-split images the TFLite
    converter calibrated with (the first 200), ``x_test``/``labels`` the test split and
    ``logits`` the float model's logits on it.  tools/make_digits_fixtures.py builds the
    NNEF, OpenVINO and TOSA digits fixtures from this file.
    """
    convs = [layer for layer in model.layers if isinstance(layer, L.Conv2D)]
    denses = [layer for layer in model.layers if isinstance(layer, L.Dense)]
    weights = {}
    for prefix, layers in (("conv", convs), ("dense", denses)):
        for i, layer in enumerate(layers, 1):
            kernel, bias = layer.get_weights()
            weights[f"{prefix}{i}_w"] = kernel.astype(np.float32)
            weights[f"{prefix}{i}_b"] = bias.astype(np.float32)
    logits_model = keras.Model(model.inputs, model.layers[-2].output)
    logits = logits_model.predict(x_test, verbose=0).astype(np.float32)
    np.savez_compressed(OUT / "digits_cnn_float.npz", x_calib=x_train[:200], x_test=x_test,
                        labels=y_test, logits=logits, **weights)


def digits_cnn(manifest: dict) -> None:
    """Small CNN on scikit-learn's digits (8x8, 16 grey levels), int8 I/O."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[..., None]
    y = data.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2,
                                                        random_state=SEED, stratify=y)
    keras.utils.set_random_seed(SEED)
    inp = keras.Input((8, 8, 1), batch_size=1)
    h = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    h = L.MaxPooling2D(2)(h)
    h = L.Conv2D(16, 3, padding="same", activation="relu")(h)
    h = L.AveragePooling2D(2)(h)
    h = L.Flatten()(h)
    h = L.Dense(32, activation="relu")(h)
    logits = L.Dense(10)(h)
    probs = L.Softmax()(logits)
    model = keras.Model(inp, probs)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, epochs=30, batch_size=32, verbose=0, shuffle=True)
    float_acc = float(np.mean(np.argmax(model.predict(x_test, verbose=0), axis=1) == y_test))
    write_digits_float(model, x_train, x_test, y_test)

    def calib():
        for i in range(0, 200):
            yield [x_train[i:i + 1]]

    tfl = convert(model, [(1, 8, 8, 1)], None, calib=calib)
    ref = interpreter(tfl, OpResolverType.BUILTIN_REF)
    opt = interpreter(tfl, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    d = ref.get_input_details()[0]
    scale, zp = d["quantization"]
    # TFLite's own float -> int8 rule: round(x / scale) + zp, clamped.
    q = np.clip(np.round(x_test / np.float32(scale)) + zp, -128, 127).astype(np.int8)
    codes = [q[:, None]]  # [samples, 1, 8, 8, 1]
    samples = len(q)
    ref_out, mids = [], []
    for s in range(samples):
        ref_out.append(run(ref, tfl, codes, s)[0])
        if s < 20:  # intermediate tensors of the first samples
            mids.append(intermediates(ref, tfl))
    ref_out = np.stack(ref_out)
    opt_out = np.stack([run(opt, tfl, codes, s)[0] for s in range(samples)])
    int8_acc = float(np.mean(np.argmax(ref_out.reshape(samples, -1), axis=1) == y_test))
    (OUT / "digits_cnn.tflite").write_bytes(tfl)
    circle = bytearray(tfl)
    circle[4:8] = b"CIR0"
    (OUT / "digits_cnn.circle").write_bytes(bytes(circle))
    mid = {f"mid:{k}": np.stack([m[k] for m in mids]) for k in mids[0]}
    np.savez_compressed(OUT / "digits_cnn.npz", input_0=codes[0], ref_0=ref_out, opt_0=opt_out,
                        labels=y_test, **mid)
    info = {
        "dataset": "sklearn.datasets.load_digits, 20% stratified test split "
                   f"(random_state={SEED}), pixels / 16 quantized with the input scale",
        "test_samples": samples,
        "float_accuracy": float_acc,
        "int8_tflite_reference_accuracy": int8_acc,
        "input_scale": float(scale), "input_zero_point": int(zp),
        "operators": op_names(tfl),
    }
    (OUT / "digits_cnn.json").write_text(json.dumps(info, indent=1) + "\n")
    diff = np.abs(ref_out.astype(np.int64) - opt_out.astype(np.int64))
    manifest["digits_cnn"] = {"operators": info["operators"], "samples": samples,
                              "inputs": ["int8"], "ref_vs_opt_max_abs_diff": int(diff.max()),
                              "ref_vs_opt_elements_differing": int((diff > 0).sum()),
                              "elements": int(ref_out.size)}
    print("digits_cnn:", info)


def main(argv: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    only = set(argv[1:])
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name, (builder, opts) in MODELS.items():
        if only and name not in only:
            continue
        rng = np.random.default_rng(SEED)
        keras.utils.set_random_seed(SEED)
        model, shapes = builder()
        tfl = convert(model, shapes, rng, io=opts.get("io", "int8"),
                      int16=opts.get("int16", False), per_tensor=opts.get("per_tensor", False))
        it = interpreter(tfl, OpResolverType.BUILTIN_REF)
        samples = 3
        codes = quantized_inputs(it, tfl, np.random.default_rng(SEED + 1), samples,
                                 all_codes=(name == "tables"))
        write_fixture(name, tfl, codes, samples, manifest)
    if not only or "digits_cnn" in only:
        digits_cnn(manifest)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv)
