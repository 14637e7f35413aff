"""NNEF as nnef-tools' TFLite converter writes it: the forms the frontend must read.

Each test is a small graph in the converter's own form (variables in TFLite's layout,
transposed in the graph, per-channel graph.quant entries along TFLite's quantized
dimension), checked against what the same weights give in NNEF's own layout.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from nnef_helpers import write_model  # noqa: E402

from compiler.frontends.nnef import dat  # noqa: E402
from compiler.frontends.nnef.load import load_nnef_model  # noqa: E402
from sim.reference import run_graph  # noqa: E402


def _quant_entry(name: str, scale, zp, bits: int = 8, symmetric: bool = False) -> str:
    def fmt(v):
        return "[" + ", ".join(repr(float(x)) if isinstance(x, float) else str(int(x))
                               for x in v) + "]" if isinstance(v, list) else repr(v)
    return (f'"{name}": zero_point_linear_quantize(zero_point = {fmt(zp)}, scale = '
            f'{fmt(scale)}, bits = {bits}, signed = true, symmetric = '
            f'{"true" if symmetric else "false"});\n')


def _depthwise_model(folder, tflite_layout: bool):
    """A 3x3 depthwise convolution over 4 channels with int8 per-channel weights, stored
    as nnef-tools stores it ([1, 3, 3, 4], quantized along axis 3, then transposed) or in
    NNEF's layout ([4, 1, 3, 3], quantized along axis 0)."""
    rng = np.random.default_rng(7)
    codes = rng.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8)
    scales = [0.01, 0.02, 0.015, 0.03]
    bias = rng.integers(-500, 500, (1, 4)).astype(np.int32)
    bscales = [0.02 * s for s in scales]
    if tflite_layout:
        wtext = ("w = variable<scalar>(shape = [1, 3, 3, 4], label = 'w');\n"
                 "    wt = transpose(w, axes = [3, 0, 1, 2]);\n"
                 "    y = conv(input, wt, b, padding = [], groups = 0);")
        wcodes = codes
    else:
        wtext = ("w = variable<scalar>(shape = [4, 1, 3, 3], label = 'w');\n"
                 "    y = conv(input, w, b, padding = [], groups = 0);")
        wcodes = codes.transpose(3, 0, 1, 2)
    text = f"""version 1.0;
graph G( input ) -> ( y )
{{
    input = external<scalar>(shape = [1, 4, 6, 6]);
    b = variable<scalar>(shape = [1, 4], label = 'b');
    {wtext}
}}
"""
    quant = (_quant_entry("input", 0.02, 3) +
             _quant_entry("w", scales, [0] * 4, symmetric=True) +
             _quant_entry("b", bscales, [0] * 4, bits=32) +
             _quant_entry("y", 0.05, -2))
    if tflite_layout:
        quant += _quant_entry("wt", scales, [0] * 4, symmetric=True)
    raw = {"w": dat.write_qint(wcodes, 8, True), "b": dat.write_qint(bias, 32, True)}
    return write_model(folder, text, quant=quant, raw=raw)


def test_depthwise_weights_quantized_along_tflites_channel_axis(tmp_path):
    """nnef-tools keeps a depthwise filter as TFLite's [1, kh, kw, C] with C per-channel
    scales (axis 3) and transposes it in the graph: the same integer graph results as
    from the filter in NNEF's [C, 1, kh, kw] layout."""
    ours = load_nnef_model(_depthwise_model(tmp_path / "tfl", True))
    plain = load_nnef_model(_depthwise_model(tmp_path / "nnef", False))
    x = np.random.default_rng(1).integers(-128, 128, (1, 4, 6, 6)).astype(np.int8)
    (inp,) = ours.graph.main.inputs
    got = run_graph(ours.graph, {inp: x})
    want = run_graph(plain.graph, {plain.graph.main.inputs[0]: x})
    np.testing.assert_array_equal(got[ours.graph.main.outputs[0]],
                                  want[plain.graph.main.outputs[0]])


_CLASSIFIER = """version 1.0;
graph G( input ) -> ( probabilities )
{
    input = external<scalar>(shape = [1, 4, 4, 4]);
    m = mean_reduce(input, axes = [2, 3]);
    s = squeeze(m, axes = [2, 3]);
    w = variable<scalar>(shape = [6, 4], label = 'w');
    b = variable<scalar>(shape = [1, 6], label = 'b');
    logits = linear(s, w, b);
    probabilities = softmax(logits, axes = [1]);
}
"""


def _classifier(folder, out_scale: float, out_zp: int):
    """mean_reduce -> linear -> softmax as nnef-tools writes a TFLite classifier: the
    mean's result on a grid of its own, the probabilities on ``out_scale``/``out_zp``."""
    rng = np.random.default_rng(11)
    w = rng.integers(-127, 128, (6, 4)).astype(np.int8)
    wscale = [0.01 * (1 + i) for i in range(6)]
    b = rng.integers(-300, 300, (1, 6)).astype(np.int32)
    quant = (_quant_entry("input", 0.05, -10) + _quant_entry("m", 0.03, 4) +
             _quant_entry("s", 0.03, 4) +
             _quant_entry("w", wscale, [0] * 6, symmetric=True) +
             _quant_entry("b", [0.03 * s for s in wscale], [0] * 6, bits=32) +
             _quant_entry("logits", 0.05, 2) +
             _quant_entry("probabilities", out_scale, out_zp))
    raw = {"w": dat.write_qint(w, 8, True), "b": dat.write_qint(b, 32, True)}
    return write_model(folder, _CLASSIFIER, quant=quant, raw=raw)


def test_softmax_with_tflites_output_parameters_is_the_int8_softmax(tmp_path):
    """graph.quant giving the probabilities TFLite's softmax parameters (scale 1/256, zero
    point -128): the graph ends with the int8 softmax under the output's name, within 1 LSB
    of the float softmax of its int8 logits; any other output grid leaves the float tail
    out as before (the graph ends at the logits)."""
    model = load_nnef_model(_classifier(tmp_path / "tfl", 1 / 256, -128))
    block = model.graph.main
    assert block.outputs == ["probabilities"]
    assert "TABLE" in {op.op for op in block.operators}
    qm = model.quantized
    x = np.random.default_rng(2).integers(-128, 128, (1, 4, 4, 4)).astype(np.int8)
    keep = list(block.outputs)
    block.outputs = keep + ["logits"]
    out = run_graph(model.graph, {block.inputs[0]: x})
    block.outputs = keep
    logits = qm.qparams["logits"].dequantize(np.asarray(out["logits"]).astype(np.int64))
    e = np.exp(logits - logits.max())
    want = e / e.sum() * 256 - 128
    got = np.asarray(out["probabilities"]).astype(np.int64)
    assert np.abs(got - want).max() <= 1.0
    other = load_nnef_model(_classifier(tmp_path / "other", 1 / 255, -128))
    assert other.graph.main.outputs == ["logits"]


def test_mean_onto_a_grid_of_its_own_rounds_once(tmp_path):
    """A mean whose graph.quant grid differs from its input's (TFLite's MEAN has output
    parameters of its own) is one rounding of the exact mean onto that grid, not a pool
    on the input's grid requantized after."""
    model = load_nnef_model(_classifier(tmp_path / "m", 1 / 256, -128))
    block = model.graph.main
    assert "AVG_POOL2D" not in {op.op for op in block.operators}
    mean = next(op.outputs[0] for op in block.operators if op.op == "DEPTHWISE_CONV2D")
    mean = next(op.outputs[0] for op in block.operators if mean in op.inputs and op.op == "RESCALE")
    rng = np.random.default_rng(4)
    keep = list(block.outputs)
    block.outputs = keep + [mean]
    for _ in range(20):
        x = rng.integers(-128, 128, (1, 4, 4, 4)).astype(np.int8)
        got = np.asarray(run_graph(model.graph, {block.inputs[0]: x})[mean]).reshape(-1)
        exact = (x.astype(np.float64) + 10).mean(axis=(2, 3)).reshape(-1) * 0.05 / 0.03 + 4
        assert np.abs(got - exact).max() <= 0.5 + 1e-6
    block.outputs = keep


def test_int8_activation_written_as_32_bits_keeps_its_grid(tmp_path):
    """nnef-tools takes the data input of TFLite's TRANSPOSE_CONV for a bias and writes
    its (int8) quantization with bits = 32.  Where nothing else gives the quantizer that
    convolution result's parameters, the entry's scale and zero point are its int8 grid."""
    rng = np.random.default_rng(5)
    text = """version 1.0;
graph G( input ) -> ( y )
{
    input = external<scalar>(shape = [1, 2, 5, 5]);
    w = variable<scalar>(shape = [3, 2, 3, 3], label = 'w');
    b = variable<scalar>(shape = [1, 3], label = 'b');
    c = conv(input, w, b, padding = []);
    r = clamp(c, 0.0, 6.0);
    w2 = variable<scalar>(shape = [2, 3, 1, 1], label = 'w2');
    b2 = variable<scalar>(shape = [1, 2], label = 'b2');
    y = conv(r, w2, b2, padding = []);
}
"""
    quant = (_quant_entry("input", 0.03, 1) +
             _quant_entry("w", [0.01, 0.02, 0.015], [0] * 3, symmetric=True) +
             _quant_entry("b", [0.0003, 0.0006, 0.00045], [0] * 3, bits=32) +
             _quant_entry("c", 0.04, -128, bits=32) + _quant_entry("r", 0.04, -128, bits=32) +
             _quant_entry("w2", [0.02, 0.01], [0] * 2, symmetric=True) +
             _quant_entry("b2", [0.0008, 0.0004], [0] * 2, bits=32) +
             _quant_entry("y", 0.05, 3))
    raw = {"w": dat.write_qint(rng.integers(-127, 128, (3, 2, 3, 3)).astype(np.int8), 8, True),
           "b": dat.write_qint(rng.integers(-99, 99, (1, 3)).astype(np.int32), 32, True),
           "w2": dat.write_qint(rng.integers(-127, 128, (2, 3, 1, 1)).astype(np.int8), 8, True),
           "b2": dat.write_qint(rng.integers(-99, 99, (1, 2)).astype(np.int32), 32, True)}
    model = load_nnef_model(write_model(tmp_path / "m", text, quant=quant, raw=raw))
    qp = model.quantized.qparams[model.tensor_of["r"]]
    assert qp.scalar_scale == np.float32(0.04) and qp.zp == -128
    assert any("32-bit entry on the int8 result of CONV2D" in n for n in model.notes)
