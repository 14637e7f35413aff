"""Build the OpenVINO IR fixtures of tests/test_openvino*.py (needs ``pip install openvino``).

Writes, into ``tests/fixtures/openvino/`` (or the folder given), for each model NAME:

* ``NAME.xml`` / ``NAME.bin``: the IR, saved by ``openvino.save_model``;
* ``NAME.npz``: seeded inputs (``in:<parameter name>``, a leading sample axis) and the
  outputs of OpenVINO's CPU plugin for them (``out:<output tensor name>``), in the
  model's own (OpenVINO) layout; for
  ``cnn_fq`` also the FakeQuantize ranges written for the input and the logits
  (``fq:input``, ``fq:logits``: [low, high]).

Models (built with OpenVINO's Python opset API):

* ``ops_float``: one input, 38 outputs, each exercising a layer form (odd sizes, ceil
  rounding, auto_pad, dilation, groups, exclude-pad, slicing, reductions, softmax,
  HSwish/Swish/PReLU/BatchNormInference, ...).
* ``cnn_float``: a small float CNN (conv + bias + ReLU, depthwise, residual Add, Concat,
  pooling, global average pool, a ShapeOf-computed Reshape, MatMul + bias, SoftMax, and a
  second Sigmoid output); saved with weights compressed to f16 (``Const f16 -> Convert``).
* ``cnn_fq``: the same kind of network as NNCF quantizes it: ``levels=256`` FakeQuantize
  on the input and activations (ranges from a calibration run of the float network,
  unsigned after ReLU, asymmetric or symmetric elsewhere, zero on the grid; placed as
  NNCF places them: after ReLU, not between an Add and its ReLU, one shared range on
  the inputs of a Concat), weights through per-channel symmetric ``levels=255``
  FakeQuantize, FakeQuantize on the logits.
* ``cnn_fq_compressed``: ``cnn_fq`` after OpenVINO's compress_quantize_weights
  transformation (weights stored as ``i8 Const -> Convert -> Multiply``), as OpenVINO's
  model conversion saves quantized models.
* ``cnn_fq_float_out``: ``cnn_fq`` without the FakeQuantize on the logits (float output,
  as NNCF leaves the last MatMul).
* ``tflite_digits``, ``tflite_cnn_basic``: int8 TFLite models of tests/fixtures/tflite/
  converted by OpenVINO's TFLite frontend (int8 input and output, FakeQuantize
  activations, ``i8 Const -> Convert -> Multiply`` weights), saved unchanged.  Their
  npz holds the TFLite fixture's int8 inputs, OpenVINO CPU's output, OpenVINO CPU's
  logits (the SoftMax input, ``out:logits``) and TFLite's reference-kernel int8 logits
  (``tflite:logits``).

The float digits IR (``digits_float``) is written by tools/make_digits_fixtures.py.

OpenVINO CPU runs with ``INFERENCE_PRECISION_HINT=f32`` (no bf16/f16 on CPUs that have
them).  Everything is seeded; npz files have fixed timestamps.

Usage: ``python tools/make_openvino_fixtures.py [OUT_DIR]``
"""
from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops
from openvino._offline_transformations import compress_quantize_weights_transformation

SEED = 20250611
F32 = np.float32
ROOT = Path(__file__).resolve().parents[1]
FLOAT_SAMPLES = 4
FQ_SAMPLES = 24
CALIBRATION_SAMPLES = 16


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` with fixed zip timestamps, so the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)),
                        buf.getvalue(), compress_type=zipfile.ZIP_DEFLATED)


def const(values, dtype=F32):
    return ops.constant(np.asarray(values, dtype))


def named(node, name: str):
    """Give a node (or one output of a node) a friendly name and an output tensor name."""
    port = node if isinstance(node, ov.Output) else node.output(0)
    port.get_node().set_friendly_name(name)
    port.get_tensor().set_names({name})
    return port


def compile_cpu(model: ov.Model):
    return ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def run_cpu(model: ov.Model, inputs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    compiled = compile_cpu(model)
    outs: dict[str, list[np.ndarray]] = {}
    for sample in inputs:
        res = compiled(sample)
        for port in compiled.outputs:
            outs.setdefault(port.get_any_name(), []).append(np.asarray(res[port]))
    return {k: np.stack(v) for k, v in outs.items()}


def write(out_dir: Path, name: str, model: ov.Model, inputs: list[dict[str, np.ndarray]],
          compress_to_fp16: bool = False, extra: dict[str, np.ndarray] | None = None) -> None:
    xml = out_dir / f"{name}.xml"
    ov.save_model(model, xml, compress_to_fp16=compress_to_fp16)
    # Expected outputs come from the saved IR as OpenVINO reads it back.
    reread = ov.Core().read_model(xml)
    outs = run_cpu(reread, inputs)
    arrays = {f"in:{k}": np.stack([s[k] for s in inputs]) for k in inputs[0]}
    arrays.update({f"out:{k}": v for k, v in outs.items()})
    arrays.update(extra or {})
    save_npz(out_dir / f"{name}.npz", arrays)
    print(f"{name}: {xml.stat().st_size + xml.with_suffix('.bin').stat().st_size} bytes, "
          f"outputs {sorted(outs)}")


# ---------------------------------------------------------------------------------------
# ops_float: many layer forms in one model
# ---------------------------------------------------------------------------------------
def ops_float(rng) -> ov.Model:
    x = ops.parameter([1, 4, 9, 9], F32, name="x")
    w = lambda *shape: const(rng.standard_normal(shape) * 0.5)   # noqa: E731
    outs = []

    def out(node, name):
        outs.append(named(node, name))

    # Convolutions: inexact division (kernel extended, or input sliced when the dilation
    # does not allow), dilation, same_lower, groups.
    out(ops.convolution(x, w(5, 4, 2, 2), [2, 2], [0, 0], [0, 0], [1, 1]), "conv_k2s2")
    out(ops.convolution(x, w(3, 4, 3, 3), [1, 1], [2, 2], [2, 2], [2, 2]), "conv_dil2")
    out(ops.convolution(x, w(3, 4, 3, 3), [2, 2], [0, 0], [0, 0], [1, 1],
                        auto_pad="same_lower"), "conv_same_lower")
    out(ops.convolution(x, w(2, 4, 3, 3), [3, 3], [1, 1], [0, 0], [1, 1]), "conv_s3")
    out(ops.convolution(x, w(2, 4, 2, 2), [3, 3], [1, 1], [0, 0], [2, 2]), "conv_dil_slice")
    out(ops.group_convolution(x, w(2, 3, 2, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1]),
        "gconv_g2")
    out(ops.group_convolution(x, w(4, 2, 1, 3, 3), [2, 2], [1, 1], [1, 1], [1, 1]),
        "dwconv_m2")
    # Pooling: ceil rounding, exclude-pad both ways, padding.
    out(ops.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], "ceil").output(0),
        "maxpool_ceil")
    out(ops.max_pool(x, [2, 2], [1, 1], [1, 1], [1, 1], [3, 3]).output(0), "maxpool_pad")
    out(ops.avg_pool(x, [2, 2], [1, 1], [1, 1], [3, 3], False), "avgpool_incl_pad")
    out(ops.avg_pool(x, [1, 1], [1, 1], [1, 1], [3, 3], True), "avgpool_excl_pad")
    out(ops.avg_pool(x, [2, 2], [0, 0], [0, 0], [2, 2], True, "ceil"), "avgpool_ceil")
    # Element-wise.
    out(ops.tanh(x), "tanh")
    out(ops.sigmoid(x), "sigmoid")
    out(ops.clamp(x, -0.5, 0.75), "clamp")
    out(ops.multiply(x, w(1, 4, 1, 1)), "mul_channel")
    out(ops.subtract(x, w(9)), "sub_row")
    out(ops.divide(x, ops.add(ops.sigmoid(x), const(1.0))), "div_act")
    out(ops.maximum(x, const(0.1)), "max_scalar")
    out(ops.minimum(const(0.2), x), "min_scalar")
    out(ops.subtract(const(1.0), x), "rsub")
    out(ops.abs(ops.negative(x)), "abs_neg")
    out(ops.hswish(x), "hswish")
    out(ops.hsigmoid(x), "hsigmoid")
    out(ops.swish(x, const(1.5)), "swish")
    out(ops.prelu(x, const([0.1, -0.2, 0.3, 0.5])), "prelu")
    out(ops.batch_norm_inference(x, const([1.0, 2.0, 0.5, -1.0]), const([0.0, 0.1, -0.2, 0.3]),
                                 const([0.5, -0.5, 0.0, 1.0]), const([1.0, 0.25, 4.0, 2.0]),
                                 1e-3), "batch_norm")
    # Layout and data movement.
    t = ops.transpose(x, const([0, 2, 3, 1], np.int64))
    r = ops.reshape(t, const([1, 81, 4], np.int64), False)
    xr = ops.reshape(x, const([0, 4, -1], np.int64), True)
    out(ops.matmul(xr, r, False, False), "matmul_act")
    out(ops.strided_slice(x, const([0, 1, 2, 0], np.int64), const([0, 3, 9, 5], np.int64),
                          const([1, 1, 1, 1], np.int64), [1, 0, 0, 0], [1, 0, 1, 0]),
        "strided_slice")
    sp = ops.split(x, const(1, np.int64), 2)
    out(ops.add(sp.output(0), sp.output(1)), "split_add")
    vs = ops.variadic_split(x, const(2, np.int64), const([3, -1], np.int64))
    out(ops.multiply(vs.output(1), const(2.0)), "vsplit_mul")
    out(ops.gather(x, const([1, 2], np.int64), const(1, np.int64)), "gather_range")
    out(ops.unsqueeze(ops.squeeze(ops.reduce_sum(x, const([1], np.int64), True),
                                  const([1], np.int64)), const([3], np.int64)),
        "reduce_sum_squeeze")
    out(ops.reduce_max(x, const([2, 3], np.int64), False), "reduce_max_hw")
    out(ops.reduce_mean(x, const([-1], np.int64), True), "reduce_mean_w")
    out(ops.pad(x, const([0, 0, 1, 2], np.int64), const([0, 1, 0, 1], np.int64), "constant",
                const(0.5)), "pad_value")
    out(ops.concat([x, w(1, 2, 9, 9)], 1), "concat_const")
    out(ops.softmax(x, -3), "softmax_c")
    return ov.Model([ops.result(o) for o in outs], [x], "ops_float")


# ---------------------------------------------------------------------------------------
# The CNN, float or FakeQuantize
# ---------------------------------------------------------------------------------------
class CnnBuilder:
    """Builds the CNN; with ``ranges`` it inserts NNCF-style FakeQuantize layers."""

    def __init__(self, seed: int, ranges: dict[str, tuple[float, float]] | None = None,
                 fq_logits: bool = True):
        self.rng = np.random.default_rng(seed)
        self.ranges = ranges
        self.fq_logits = fq_logits
        self.probes: dict[str, ov.Node] = {}
        self.fq_ranges: dict[str, np.ndarray] = {}     # tag -> [low, high] as written

    @property
    def quantized(self) -> bool:
        return self.ranges is not None

    def act(self, node, tag: str, mode: str = "asym"):
        """FakeQuantize (levels 256) an activation, or record it for calibration."""
        if not self.quantized:
            self.probes[tag] = node
            return node
        lo, hi = self.ranges[tag]
        if tag.startswith("concat_"):
            lo = min(self.ranges["concat_m"][0], self.ranges["concat_p"][0])
            hi = max(self.ranges["concat_m"][1], self.ranges["concat_p"][1])
        if mode == "unsigned" or lo >= 0:
            il, ih = 0.0, hi
        elif mode == "sym":
            s = max(-lo, hi) / 127.5
            il, ih = -128 * s, 127 * s
        else:
            s = (hi - lo) / 255
            zp = np.round(-lo / s)
            il = -zp * s
            ih = il + 255 * s
        il, ih = F32(il), F32(ih)
        self.fq_ranges[tag] = np.asarray([il, ih], F32)
        return ops.fake_quantize(node, const(il), const(ih), const(il), const(ih), 256,
                                 name=f"fq_{tag}")

    def weights(self, shape, oc_axis: int = 0):
        fan_in = int(np.prod(shape)) // shape[oc_axis]
        w = (self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(F32)
        if not self.quantized:
            return const(w)
        axes = tuple(a for a in range(w.ndim) if a != oc_axis)
        s = (np.abs(w).max(axis=axes, keepdims=True) / 127).astype(F32)
        lo, hi = (-127 * s).astype(F32), (127 * s).astype(F32)
        return ops.fake_quantize(const(w), const(lo), const(hi), const(lo), const(hi), 255)

    def bias(self, node, channels: int, rank: int = 4):
        b = (self.rng.standard_normal((1, channels) + (1,) * (rank - 2)) * 0.1).astype(F32)
        return ops.add(node, const(b))

    def conv(self, x, cin, cout, k, stride=1, pad=None, name="conv"):
        pad = k // 2 if pad is None else pad
        y = ops.convolution(x, self.weights((cout, cin, k, k)), [stride] * 2, [pad] * 2,
                            [pad] * 2, [1, 1], name=name)
        return self.bias(y, cout)

    def build(self) -> ov.Model:
        x = ops.parameter([1, 3, 16, 16], F32, name="image")
        h = self.act(x, "input", "sym")
        h = ops.relu(self.conv(h, 3, 8, 3, name="conv1"))
        h = self.act(h, "relu1", "unsigned")
        # Depthwise 3x3 stride 2 with ReLU6.
        dw = ops.group_convolution(h, self.weights((8, 1, 1, 3, 3)), [2, 2], [0, 0], [0, 0],
                                   [1, 1], auto_pad="same_upper", name="dw")
        h = ops.clamp(self.bias(dw, 8), 0.0, 6.0)
        h = self.act(h, "dw", "unsigned")                                    # 8x8x8
        # Residual: FakeQuantize on both Add inputs, none between the Add and its ReLU
        # (NNCF's Add + ReLU pattern).
        a = self.act(self.conv(h, 8, 16, 1, name="pw"), "pw")               # signed
        b = ops.relu(self.conv(h, 8, 16, 3, name="branch"))
        b = self.act(b, "branch", "unsigned")
        s = ops.relu(ops.add(a, b))
        s = self.act(s, "add_relu", "unsigned")
        m = ops.max_pool(s, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2]).output(0)   # 16x4x4
        p = ops.avg_pool(s, [2, 2], [1, 1], [1, 1], [3, 3], True)               # 16x4x4
        # Concat inputs share one FakeQuantize range (NNCF's unified scales).
        c = ops.concat([self.act(m, "concat_m", "unsigned"),
                        self.act(p, "concat_p", "unsigned")], 1)                 # 32x4x4
        c = ops.relu(self.conv(c, 32, 24, 3, stride=1, name="conv2"))
        c = self.act(c, "conv2", "unsigned")
        g = ops.reduce_mean(c, const([2, 3], np.int64), True)                    # 24x1x1
        g = self.act(g, "gap", "unsigned")
        # Flatten through a shape sub-graph: [N, -1] with N from ShapeOf.
        n = ops.gather(ops.shape_of(g), const([0], np.int64), const(0, np.int64))
        f = ops.reshape(g, ops.concat([n, const([-1], np.int64)], 0), False)
        logits = ops.matmul(f, self.weights((10, 24)), False, True, name="fc")
        logits = self.bias(logits, 10, rank=2)
        if self.quantized and self.fq_logits:
            logits = self.act(logits, "logits", "asym")
        elif not self.quantized:
            self.probes["logits"] = logits
        outputs = [named(logits, "logits")]
        if not self.quantized:
            prob = named(ops.softmax(logits, 1), "prob")
            side = named(ops.sigmoid(ops.reduce_mean(a, const([1], np.int64), False)), "side")
            outputs = [prob, side]
        return ov.Model([ops.result(o) for o in outputs], [x], "cnn")


def calibrate(seed: int, samples: list[dict[str, np.ndarray]]):
    builder = CnnBuilder(seed)
    model = builder.build()
    probe_model = ov.Model([ops.result(n) for n in builder.probes.values()],
                           model.get_parameters(), "probe")
    compiled = compile_cpu(probe_model)
    ranges = {tag: (np.inf, -np.inf) for tag in builder.probes}
    for sample in samples:
        res = compiled(sample)
        for tag, port in zip(builder.probes, compiled.outputs):
            v = np.asarray(res[port])
            lo, hi = ranges[tag]
            ranges[tag] = (min(lo, float(v.min())), max(hi, float(v.max())))
    return ranges


def image_samples(rng, count: int) -> list[dict[str, np.ndarray]]:
    return [{"image": rng.uniform(-1.0, 1.0, (1, 3, 16, 16)).astype(F32)}
            for _ in range(count)]


# (TFLite fixture, its logits entry, samples used)
TFLITE_MODELS = {
    "tflite_digits": ("digits_cnn", "mid:functional_1/dense_1_2/MatMul;"
                      "functional_1/dense_1_2/BiasAdd", 20),
    "tflite_cnn_basic": ("cnn_basic", "mid:functional_1/dense_1_2/MatMul1", 3),
}


def tflite_model(out_dir: Path, name: str) -> None:
    src, logits_key, count = TFLITE_MODELS[name]
    folder = ROOT / "tests" / "fixtures" / "tflite"
    core = ov.Core()
    model = core.read_model(folder / f"{src}.tflite")
    xml = out_dir / f"{name}.xml"
    ov.save_model(model, xml, compress_to_fp16=False)
    reread = core.read_model(xml)
    softmax = next(op for op in reread.get_ordered_ops() if op.get_type_name() == "Softmax")
    reread.add_outputs([softmax.input(0).get_source_output()])
    compiled = compile_cpu(reread)
    data = np.load(folder / f"{src}.npz")
    inputs = data["input_0"][:count]
    outs, logits = [], []
    for x in inputs:
        res = compiled({0: x})
        outs.append(np.asarray(res[compiled.outputs[0]]))
        logits.append(np.asarray(res[compiled.outputs[-1]]))
    arrays = {f"in:{model.inputs[0].get_any_name()}": inputs,
              f"out:{model.outputs[0].get_any_name()}": np.stack(outs),
              "out:logits": np.stack(logits), "tflite:logits": data[logits_key][:count]}
    save_npz(out_dir / f"{name}.npz", arrays)
    print(f"{name}: {xml.stat().st_size + xml.with_suffix('.bin').stat().st_size} bytes")


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else ROOT / "tests" / "fixtures" / "openvino"
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    xs = [{"x": rng.standard_normal((1, 4, 9, 9)).astype(F32)} for _ in range(FLOAT_SAMPLES)]
    write(out_dir, "ops_float", ops_float(np.random.default_rng(SEED + 1)), xs)

    cnn_seed = SEED + 2
    write(out_dir, "cnn_float", CnnBuilder(cnn_seed).build(),
          image_samples(rng, FLOAT_SAMPLES), compress_to_fp16=True)

    ranges = calibrate(cnn_seed, image_samples(rng, CALIBRATION_SAMPLES))
    tests = image_samples(rng, FQ_SAMPLES)
    builder = CnnBuilder(cnn_seed, ranges)
    fq = builder.build()
    # The FakeQuantize ranges of the input and the logits, for the parameter tests.
    extra = {f"fq:{tag}": builder.fq_ranges[tag] for tag in ("input", "logits")}
    write(out_dir, "cnn_fq", fq, tests, extra=extra)
    compressed = CnnBuilder(cnn_seed, ranges).build()
    compress_quantize_weights_transformation(compressed)
    write(out_dir, "cnn_fq_compressed", compressed, tests)
    write(out_dir, "cnn_fq_float_out", CnnBuilder(cnn_seed, ranges, fq_logits=False).build(),
          tests)
    for name in TFLITE_MODELS:
        tflite_model(out_dir, name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
