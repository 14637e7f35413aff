#!/usr/bin/env python3
"""Build the network-family .tflite/.circle fixtures (tests/fixtures/tflite/families/).

Small multi-operator int8 (and one int16x8) models with seeded weights, written without
TensorFlow by tools/tflite_writer.py and quantized the way TensorFlow's converter quantizes:

* weights symmetric int8 per output channel (axis 0 for CONV_2D / FULLY_CONNECTED /
  TRANSPOSE_CONV filters, axis 3 for DEPTHWISE_CONV_2D), zero point 0;
* bias int32 with scale ``in_scale * w_scale[c]`` (int64 for 16x8 models), zero point 0;
* activations asymmetric int8 (int16x8: symmetric int16, zero point 0);
* RELU / RELU6 fused into the producing CONV_2D / DEPTHWISE_CONV_2D / ADD, as the converter
  fuses them.

Operator versions are the ones TFLite's op-version rules give for these options and types
(tensorflow/lite/tools/versioning/op_version.cc): CONV_2D 3, DEPTHWISE_CONV_2D 3,
FULLY_CONNECTED 4 (5 with keep_num_dims), ADD 2, MUL 2, SOFTMAX 2, MEAN 2, AVERAGE_POOL_2D 2,
BATCH_MATMUL 2, TRANSPOSE_CONV 3 (bias input), RESHAPE 1.  The 16x8 model carries the versions
TensorFlow 2.21's converter wrote for tests/fixtures/tflite/int16x8.tflite (the int8 ones, with
``quantized_bias_type`` INT64 on CONV_2D and FULLY_CONNECTED).

Output scales are set from each accumulator's expected spread (a standard deviation of about
40 int8 codes, 256 times that in int16), so the outputs neither saturate nor collapse to a few
codes; each family's inputs are seeded uniform codes over the whole type.

For each family the script writes ``<name>.tflite``, ``<name>.circle`` (the same flatbuffer,
file identifier ``CIR0``) and ``<name>.npz`` with ``input_i`` (seeded codes, leading axis =
sample) and ``ref_i`` (outputs of TFLite's reference kernels, ``OpResolverType.BUILTIN_REF``),
plus ``manifest.json`` (operators with versions, input/output names and shapes, activation
type, MACs).  ``python tools/make_tflite_family_fixtures.py NAME...`` rebuilds only those.

Usage (ai-edge-litert is a fixture-building extra: ``pip install ai-edge-litert``)::

    python tools/make_tflite_family_fixtures.py
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "tflite" / "families"
SAMPLES = 2
SEED = 2026

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tflite_writer import ModelBuilder, reference_outputs, write_tflite  # noqa: E402

# BuiltinOperator codes and BuiltinOptions union indices (TFLite schema).
ADD, AVERAGE_POOL_2D, CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED = 0, 1, 3, 4, 9
MUL, RESHAPE, SOFTMAX, MEAN, TRANSPOSE_CONV, BATCH_MATMUL = 18, 22, 25, 40, 67, 126
OPT_CONV, OPT_DW, OPT_POOL, OPT_FC, OPT_SOFTMAX, OPT_ADD = 1, 2, 5, 8, 9, 11
OPT_RESHAPE, OPT_MUL, OPT_REDUCER, OPT_TCONV, OPT_BMM = 17, 21, 27, 49, 101
NONE, RELU, RELU6 = 0, 1, 3
SAME, VALID = 0, 1
OP_NAMES = {ADD: "ADD", AVERAGE_POOL_2D: "AVERAGE_POOL_2D", CONV_2D: "CONV_2D",
            DEPTHWISE_CONV_2D: "DEPTHWISE_CONV_2D", FULLY_CONNECTED: "FULLY_CONNECTED", MUL: "MUL",
            RESHAPE: "RESHAPE", SOFTMAX: "SOFTMAX", MEAN: "MEAN", TRANSPOSE_CONV: "TRANSPOSE_CONV",
            BATCH_MATMUL: "BATCH_MATMUL"}
CODE_STD = 40.0     # target spread of output codes
IN_STD = 50.0       # assumed spread of input codes (seeded inputs are uniform: ~74)


class Net:
    """A :class:`ModelBuilder` with layer helpers that quantize like the converter.

    Activations are ``(tensor index, scale, zero point, shape)``.  ``macs`` counts the
    multiply-accumulates of the model (for the manifest and the benchmark).
    """

    def __init__(self, rng, dtype: str = "int8"):
        self.m, self.rng, self.dtype, self.macs = ModelBuilder(), rng, dtype, 0
        self.bias_dtype = "int64" if dtype == "int16" else "int32"
        # int16 codes spread 256 times wider than int8 ones for the same relative precision.
        self.code_std = CODE_STD * (256 if dtype == "int16" else 1)
        self.in_std = IN_STD * (256 if dtype == "int16" else 1)

    def input(self, name, shape, scale, zp=0):
        t = self.m.tensor(name, shape, self.dtype, scale, zp)
        self.m.inputs.append(t)
        return (t, scale, zp, tuple(shape))

    def act(self, name, shape, scale, zp=None):
        """An output activation; int8 zero points are drawn, int16 ones are 0."""
        if zp is None:
            zp = 0 if self.dtype == "int16" else int(self.rng.integers(-20, 21))
        return (self.m.tensor(name, shape, self.dtype, float(scale), zp), float(scale), zp, tuple(shape))

    def _weights(self, name, shape, axis):
        """Symmetric int8 codes with one scale per output channel (``axis``), zero point 0."""
        oc = shape[axis]
        ws = self.rng.uniform(0.004, 0.012, oc)
        codes = self.rng.integers(-127, 128, shape)
        w = self.m.tensor(name, shape, "int8", list(ws), 0, codes, axis=axis)
        return w, ws

    def _bias(self, name, s_in, ws, fan_in):
        """Bias codes with scale ``s_in * ws[c]`` (what the converter writes), about a third of
        the accumulator's spread."""
        spread = self.in_std * 73.0 * math.sqrt(fan_in) * 0.3
        b = self.rng.integers(-int(spread), int(spread) + 1, len(ws))
        return self.m.tensor(name, (len(ws),), self.bias_dtype, list(ws * s_in), 0, b)

    def _out_scale(self, s_in, ws, fan_in, relu):
        """An output scale for which the accumulator's expected spread is ``code_std`` codes
        (less after a RELU, which drops the negative half)."""
        acc_std = self.in_std * 73.0 * math.sqrt(fan_in)
        return acc_std * s_in * float(np.mean(ws)) / self.code_std * (0.6 if relu else 1.0)

    def conv(self, name, x, oc, k, stride=1, pad=SAME, act=NONE, dilation=1, version=3, extra=None):
        t, s, _, (n, h, w, ic) = x
        oh, ow = _out_size(h, k, stride, pad, dilation), _out_size(w, k, stride, pad, dilation)
        wt, ws = self._weights(f"{name}/weights", (oc, k, k, ic), 0)
        b = self._bias(f"{name}/bias", s, ws, k * k * ic)
        y = self.act(name, (n, oh, ow, oc), self._out_scale(s, ws, k * k * ic, act != NONE))
        opts = {"padding": pad, "stride_w": stride, "stride_h": stride, "fused_activation_function": act,
                "dilation_w_factor": dilation, "dilation_h_factor": dilation, **(extra or {})}
        self.m.op(CONV_2D, version, [t, wt, b], [y[0]], (OPT_CONV, opts))
        self.macs += n * oh * ow * oc * k * k * ic
        return y

    def depthwise(self, name, x, k, stride=1, multiplier=1, pad=SAME, act=NONE):
        t, s, _, (n, h, w, ic) = x
        oc = ic * multiplier
        oh, ow = _out_size(h, k, stride, pad, 1), _out_size(w, k, stride, pad, 1)
        wt, ws = self._weights(f"{name}/weights", (1, k, k, oc), 3)
        b = self._bias(f"{name}/bias", s, ws, k * k)
        y = self.act(name, (n, oh, ow, oc), self._out_scale(s, ws, k * k, act != NONE))
        opts = {"padding": pad, "stride_w": stride, "stride_h": stride, "depth_multiplier": multiplier,
                "fused_activation_function": act, "dilation_w_factor": 1, "dilation_h_factor": 1}
        self.m.op(DEPTHWISE_CONV_2D, 3, [t, wt, b], [y[0]], (OPT_DW, opts))
        self.macs += n * oh * ow * oc * k * k
        return y

    def fc(self, name, x, oc, act=NONE, keep_num_dims=False, version=4, extra=None):
        t, s, _, shape = x
        ic = shape[-1]
        wt, ws = self._weights(f"{name}/weights", (oc, ic), 0)
        b = self._bias(f"{name}/bias", s, ws, ic)
        out_shape = shape[:-1] + (oc,) if keep_num_dims else (math.prod(shape) // ic, oc)
        y = self.act(name, out_shape, self._out_scale(s, ws, ic, act != NONE))
        opts = {"fused_activation_function": act, "weights_format": 0, "keep_num_dims": keep_num_dims,
                "asymmetric_quantize_inputs": False, **(extra or {})}
        self.m.op(FULLY_CONNECTED, 5 if keep_num_dims else version, [t, wt, b], [y[0]], (OPT_FC, opts))
        self.macs += math.prod(shape) * oc
        return y

    def transpose_conv(self, name, x, oc, k, stride=2):
        """TRANSPOSE_CONV with a bias input (version 3), SAME padding: output ``stride`` times
        the input.  Each output sees about 1 / stride**2 of the taps (the scatter)."""
        t, s, _, (n, h, w, ic) = x
        wt, ws = self._weights(f"{name}/weights", (oc, k, k, ic), 0)
        taps = k * k * ic / stride ** 2
        b = self._bias(f"{name}/bias", s, ws, taps)
        shape = self.m.tensor(f"{name}/output_shape", (4,), "int32", None, 0, [n, stride * h, stride * w, oc])
        y = self.act(name, (n, stride * h, stride * w, oc), self._out_scale(s, ws, taps, False))
        self.m.op(TRANSPOSE_CONV, 3, [shape, wt, t, b], [y[0]],
                  (OPT_TCONV, {"padding": SAME, "stride_w": stride, "stride_h": stride,
                               "fused_activation_function": NONE}))
        self.macs += n * h * w * oc * k * k * ic
        return y

    def avg_pool(self, name, x, k, stride, pad):
        """AVERAGE_POOL_2D (version 2); the output keeps the input's scale and zero point,
        as the converter writes it (TFLite's int8 kernel expects them equal)."""
        t, s, zp, (n, h, w, c) = x
        y = self.act(name, (n, _out_size(h, k, stride, pad, 1), _out_size(w, k, stride, pad, 1), c), s, zp)
        self.m.op(AVERAGE_POOL_2D, 2, [t], [y[0]],
                  (OPT_POOL, {"padding": pad, "stride_w": stride, "stride_h": stride, "filter_width": k,
                              "filter_height": k, "fused_activation_function": NONE}))
        return y

    def add(self, name, a, b, act=NONE, version=2):
        s = 1.3 * max(a[1], b[1])
        y = self.act(name, a[3], s)
        self.m.op(ADD, version, [a[0], b[0]], [y[0]], (OPT_ADD, {"fused_activation_function": act}))
        return y

    def softmax(self, name, x):
        """int8 SOFTMAX output: scale 1/256, zero point -128 (what TFLite requires)."""
        y = self.act(name, x[3], 1.0 / 256, -128)
        self.m.op(SOFTMAX, 2, [x[0]], [y[0]], (OPT_SOFTMAX, {"beta": 1.0}))
        return y

    def output(self, *ys):
        self.m.outputs.extend(y[0] for y in ys)

    def bytes(self, name: str, identifier: bytes = b"TFL3") -> bytes:
        return write_tflite(self.m.model(f"tools/make_tflite_family_fixtures.py: {name}"), identifier)


def _out_size(size, k, stride, pad, dilation):
    eff = (k - 1) * dilation + 1
    return -(-size // stride) if pad == SAME else (size - eff) // stride + 1


# ---------------------------------------------------------------------------------------
# Families
def residual(rng) -> Net:
    """ResNet-style stage, two blocks on 16x16x8: block 1 downsamples (3x3 stride-2 CONV_2D
    + RELU, 3x3 CONV_2D, 1x1 stride-2 projection shortcut, ADD + RELU), block 2 keeps the
    shape (identity shortcut).  Output 8x8x16."""
    net = Net(rng)
    x = net.input("input", (1, 16, 16, 8), 0.02, -3)
    a = net.conv("block1/conv1", x, 16, 3, stride=2, act=RELU)
    a = net.conv("block1/conv2", a, 16, 3)
    sc = net.conv("block1/shortcut", x, 16, 1, stride=2)
    y = net.add("block1/add", a, sc, act=RELU)
    a = net.conv("block2/conv1", y, 16, 3, act=RELU)
    a = net.conv("block2/conv2", a, 16, 3)
    y = net.add("block2/add", a, y, act=RELU)
    net.output(y)
    return net


def mobilenetv2(rng) -> Net:
    """Two inverted-residual blocks on 16x16x8 (1x1 expansion x4 + RELU6, 3x3 depthwise +
    RELU6 at stride 1 then 2, 1x1 projection; the stride-1 block adds its input), then the
    head: global average pool (MEAN over H, W), FULLY_CONNECTED to 10 classes, SOFTMAX."""
    net = Net(rng)
    x = net.input("input", (1, 16, 16, 8), 0.025, 5)
    e = net.conv("block1/expand", x, 32, 1, act=RELU6)
    d = net.depthwise("block1/depthwise", e, 3, stride=1, act=RELU6)
    p = net.conv("block1/project", d, 8, 1)
    y = net.add("block1/add", p, x)
    e = net.conv("block2/expand", y, 32, 1, act=RELU6)
    d = net.depthwise("block2/depthwise", e, 3, stride=2, act=RELU6)
    p = net.conv("block2/project", d, 16, 1)
    axes = net.m.tensor("pool/axes", (2,), "int32", None, 0, [1, 2])
    pooled = net.act("pool", (1, 16), p[1] * 0.5)
    net.m.op(MEAN, 2, [p[0], axes], [pooled[0]], (OPT_REDUCER, {"keep_dims": False}))
    logits = net.fc("logits", pooled, 10)
    net.output(net.softmax("probabilities", logits))
    return net


def attention(rng) -> Net:
    """One self-attention head over 16 tokens of width 32 ([1, T, D]): Q, K, V by
    FULLY_CONNECTED with keep_num_dims, scores = BATCH_MATMUL(Q, K, adj_y), MUL by the
    constant 1/sqrt(D), SOFTMAX over keys, BATCH_MATMUL(P, V), output FULLY_CONNECTED."""
    net = Net(rng)
    t, d = 16, 32
    x = net.input("tokens", (1, t, d), 0.03, 2)
    q = net.fc("q", x, d, keep_num_dims=True)
    k = net.fc("k", x, d, keep_num_dims=True)
    v = net.fc("v", x, d, keep_num_dims=True)
    s_scores = math.sqrt(d) * CODE_STD * CODE_STD * q[1] * k[1] / CODE_STD
    scores = net.act("scores", (1, t, t), s_scores)
    net.m.op(BATCH_MATMUL, 2, [q[0], k[0]], [scores[0]],
             (OPT_BMM, {"adjoint_lhs": False, "adjoint_rhs": True, "asymmetric_quantize_inputs": False}))
    net.macs += t * t * d
    # A scalar constant quantized as the converter does: range [0, c], zero point -128.
    c = 1.0 / math.sqrt(d)
    scale = net.m.tensor("scale", (), "int8", c / 255, -128, [127])
    scaled = net.act("scaled_scores", (1, t, t), s_scores * c)
    net.m.op(MUL, 2, [scores[0], scale], [scaled[0]], (OPT_MUL, {"fused_activation_function": NONE}))
    p = net.softmax("attention", scaled)
    ctx = net.act("context", (1, t, d), v[1] * 0.8)
    net.m.op(BATCH_MATMUL, 2, [p[0], v[0]], [ctx[0]],
             (OPT_BMM, {"adjoint_lhs": False, "adjoint_rhs": False, "asymmetric_quantize_inputs": False}))
    net.macs += t * t * d
    net.output(net.fc("output", ctx, d, keep_num_dims=True))
    return net


def spatial(rng) -> Net:
    """Options off the common path on 16x16x8: DEPTHWISE_CONV_2D with depth multiplier 2
    (+ RELU), a 3x3 CONV_2D with dilation 2 (+ RELU6), TRANSPOSE_CONV stride 2 with a bias
    (to 32x32x8), AVERAGE_POOL_2D 3x3 stride 2 SAME (the last row and column of windows are
    partial: 2 of 3 rows/columns inside)."""
    net = Net(rng)
    x = net.input("input", (1, 16, 16, 8), 0.02, -7)
    a = net.depthwise("depthwise_x2", x, 3, multiplier=2, act=RELU)
    a = net.conv("dilated", a, 16, 3, act=RELU6, dilation=2)
    up = net.transpose_conv("upsample", a, 8, 3, stride=2)
    pooled = net.avg_pool("avgpool", up, 3, stride=2, pad=SAME)
    net.output(pooled)
    return net


def int16x8(rng) -> Net:
    """TFLite's 16x8 quantization (int16 activations, zero point 0; int8 weights; int64
    bias) on 12x12x4: 3x3 stride-2 CONV_2D + RELU to 6x6x8, RESHAPE, FULLY_CONNECTED to 10.
    Versions as TensorFlow 2.21's converter wrote them for its 16x8 fixture."""
    net = Net(rng, "int16")
    x = net.input("input", (1, 12, 12, 4), 0.0005)
    a = net.conv("conv", x, 8, 3, stride=2, act=RELU, extra={"quantized_bias_type": 4})
    shape = net.m.tensor("flatten/shape", (2,), "int32", None, 0, [1, 288])
    flat = net.act("flatten", (1, 288), a[1], 0)
    net.m.op(RESHAPE, 1, [a[0], shape], [flat[0]])
    y = net.fc("logits", flat, 10, extra={"quantized_bias_type": 4})
    net.output(y)
    return net


FAMILIES = {"residual": residual, "mobilenetv2": mobilenetv2, "attention": attention,
            "spatial": spatial, "int16x8": int16x8}


def build(name: str) -> Net:
    """The family ``name``, seeded (the same bytes on every run)."""
    return FAMILIES[name](np.random.default_rng([SEED, list(FAMILIES).index(name)]))


def _manifest_entry(net: Net) -> dict:
    m = net.m
    ops = [{"op": OP_NAMES[m.codes[o["opcode_index"]][0]], "version": m.codes[o["opcode_index"]][1]}
           for o in m.ops]
    io = [{"name": m.tensors[i]["name"], "shape": m.tensors[i]["shape"]} for i in m.inputs]
    out = [{"name": m.tensors[i]["name"], "shape": m.tensors[i]["shape"]} for i in m.outputs]
    return {"operators": ops, "inputs": io, "outputs": out, "activations": net.dtype, "macs": net.macs,
            "samples": SAMPLES}


def main(names: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in names or list(FAMILIES):
        net = build(name)
        data = net.bytes(name)
        (OUT / f"{name}.tflite").write_bytes(data)
        (OUT / f"{name}.circle").write_bytes(net.bytes(name, b"CIR0"))
        rng = np.random.default_rng([SEED, 100 + list(FAMILIES).index(name)])
        info = np.iinfo(net.dtype)
        arrays: dict[str, list] = {}
        for _ in range(SAMPLES):
            xs = [rng.integers(info.min, info.max + 1, tuple(net.m.tensors[i]["shape"])).astype(net.dtype)
                  for i in net.m.inputs]
            for i, x in enumerate(xs):
                arrays.setdefault(f"input_{i}", []).append(x)
            for i, y in enumerate(reference_outputs(data, xs)):
                arrays.setdefault(f"ref_{i}", []).append(y)
        np.savez_compressed(OUT / f"{name}.npz", **{k: np.stack(v) for k, v in arrays.items()})
        manifest[name] = _manifest_entry(net)
        print(f"wrote {OUT / name}.tflite/.circle/.npz ({net.macs} MACs)")
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
