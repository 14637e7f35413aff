"""Quantized NNEF (graph.quant): parameters, and the int8 TOSA graph built from them.

The model is written the way nnef-tools exports a quantized TFLite model: int8 weight
codes (quantized-int .dat files) with per-channel ``zero_point_linear_quantize`` entries,
int32 bias codes, per-tensor activation entries.  The int8 graph must use those codes
unchanged, run on our reference interpreter bit-exactly like the official TOSA reference
model, and its dequantized output must be close to the Khronos NNEF runtime's float result
for the same (dequantized) weights.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from nnef_helpers import khronos_run, official_run, snr_db, write_model  # noqa: E402

from compiler.frontends.nnef import dat  # noqa: E402
from compiler.frontends.nnef.load import load_nnef_model  # noqa: E402
from compiler.frontends.nnef.quant import (  # noqa: E402
    activation_qparams, affine_form, weight_qparams,
)
from compiler.graph.quantize.qparams import effective_scale  # noqa: E402
from sim.reference import run_graph  # noqa: E402
from tosa_ir.errors import Unsupported  # noqa: E402

TEXT = """version 1.0;
graph Q( input ) -> ( output )
{
    input = external(shape = [1, 3, 12, 12]);
    k1 = variable(shape = [6, 3, 3, 3], label = 'k1');
    b1 = variable(shape = [1, 6], label = 'b1');
    c1 = conv(input, k1, b1, padding = [(1,1), (1,1)]);
    r1 = relu(c1);
    p1 = max_pool(r1, size = [1, 1, 2, 2], stride = [1, 1, 2, 2], border = 'ignore',
                  padding = [(0,0), (0,0), (0,0), (0,0)]);
    k2 = variable(shape = [4, 6, 3, 3], label = 'k2');
    b2 = variable(shape = [1, 4], label = 'b2');
    output = conv(p1, k2, b2, padding = [(0,0), (0,0)]);
}
"""

S_IN, ZP_IN = 0.03, 3
S_R1, ZP_R1 = 0.02, -128
S_OUT, ZP_OUT = 0.05, 10


def _entry(zp, scale, bits=8, signed=True, symmetric=False) -> str:
    scale_text = ("[" + ", ".join(repr(float(s)) for s in scale) + "]"
                  if np.ndim(scale) else repr(float(scale)))
    return (f"zero_point_linear_quantize(zero_point = {zp}, scale = {scale_text}, "
            f"bits = {bits}, signed = {'true' if signed else 'false'}, "
            f"symmetric = {'true' if symmetric else 'false'})")


def _quantized_model(tmp_path, seed=0):
    """Codes and graph.quant as nnef-tools writes them; also the dequantized float model."""
    rng = np.random.default_rng(seed)
    k1 = rng.integers(-127, 127, size=(6, 3, 3, 3), endpoint=True)
    s1 = rng.uniform(0.0005, 0.002, size=6)
    b1 = rng.integers(-2000, 2000, size=(1, 6))
    k2 = rng.integers(-127, 127, size=(4, 6, 3, 3), endpoint=True)
    s2 = rng.uniform(0.0005, 0.002, size=4)
    b2 = rng.integers(-2000, 2000, size=(1, 4))
    raw = {"k1": dat.write_qint(k1, 8, True), "b1": dat.write_qint(b1, 32, True),
           "k2": dat.write_qint(k2, 8, True), "b2": dat.write_qint(b2, 32, True)}
    quant = "\n".join([
        f'"input": {_entry(ZP_IN, S_IN)};',
        f'"k1": {_entry(0, s1, symmetric=True)};',
        f'"b1": {_entry(0, S_IN * s1, bits=32)};',
        f'"c1": {_entry(ZP_R1, S_R1)};',
        f'"r1": {_entry(ZP_R1, S_R1)};',
        f'"p1": {_entry(ZP_R1, S_R1)};',
        f'"k2": {_entry(0, s2, symmetric=True)};',
        f'"b2": {_entry(0, S_R1 * s2, bits=32)};',
        f'"output": {_entry(ZP_OUT, S_OUT)};',
    ]) + "\n"
    folder = write_model(tmp_path / "q", TEXT, raw=raw, quant=quant)
    deq = {"k1": (k1 * s1[:, None, None, None]).astype(np.float32),
           "b1": (b1 * S_IN * s1).astype(np.float32),
           "k2": (k2 * s2[:, None, None, None]).astype(np.float32),
           "b2": (b2 * S_R1 * s2).astype(np.float32)}
    float_folder = write_model(tmp_path / "f", TEXT, deq)
    return folder, float_folder, dict(k1=k1, b1=b1, k2=k2, b2=b2, s1=s1, s2=s2)


def test_quantized_nnef_becomes_an_int8_graph(tmp_path):
    folder, float_folder, codes = _quantized_model(tmp_path)
    model = load_nnef_model(folder)
    qm, block = model.quantized, model.graph.main
    assert block.tensors["input"].dtype == "int8"
    assert (qm.qparams["input"].scalar_scale, qm.qparams["input"].zp) == (
        pytest.approx(S_IN), ZP_IN)
    ops = {op.op for op in block.operators}
    assert ops <= {"CONST", "CONST_SHAPE", "TRANSPOSE", "CONV2D", "RESCALE", "CLAMP",
                   "MAX_POOL2D"}
    convs = [op for op in block.operators if op.op == "CONV2D"]
    # The .dat codes are used unchanged (OHWI layout), biases too.
    np.testing.assert_array_equal(block.tensors[convs[0].inputs[1]].data,
                                  codes["k1"].transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(block.tensors[convs[1].inputs[1]].data,
                                  codes["k2"].transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(block.tensors[convs[0].inputs[2]].data, codes["b1"][0])
    np.testing.assert_array_equal(block.tensors[convs[1].inputs[2]].data, codes["b2"][0])
    rescales = [op for op in block.operators if op.op == "RESCALE"]
    for op, s_in, s_w, s_out in ((rescales[0], S_IN, codes["s1"], S_R1),
                                 (rescales[1], S_R1, codes["s2"], S_OUT)):
        got = effective_scale(block.tensors[op.inputs[1]].data, block.tensors[op.inputs[2]].data)
        # graph.quant numbers are float32 (as the parser reads them); multipliers are
        # exact to 2**-30 relative.
        f32 = lambda v: np.asarray(v, np.float32).astype(np.float64)  # noqa: E731
        np.testing.assert_allclose(got, f32(s_in) * f32(s_w) / f32(s_out), rtol=2e-9)
        assert op.attrs["per_channel"] and op.attrs["rounding_mode"] == "DOUBLE_ROUND"

    x = np.random.default_rng(7).standard_normal((1, 3, 12, 12)).astype(np.float32)
    xq = qm.quantize_inputs({"input": x})
    ours = run_graph(model.graph, xq)["output"]
    status, official = official_run(model.graph, xq)
    assert status == "VALID"
    np.testing.assert_array_equal(official["output"], ours)
    # Float reference: the Khronos runtime on the dequantized weights, with the input
    # as the int8 graph sees it (quantized).
    x_seen = ((xq["input"].astype(np.float64) - ZP_IN) * S_IN).astype(np.float32)
    (ref,) = khronos_run(float_folder, [x_seen])
    got = (ours.astype(np.float64) - ZP_OUT) * S_OUT
    assert snr_db(ref, got) > 27     # measured 31.3 dB


def test_32_bit_average_pool_result_is_left_to_the_quantizer(tmp_path):
    """nnef-tools writes a TFLite average pool's int32 intermediate as a 32-bit entry (it
    was refused: '32-bit activations'): the entry is noted and not used, the int8 pool
    keeps its input's parameters, and the graph runs as the official model runs it."""
    text = TEXT.replace("p1 = max_pool(", "p1 = avg_pool(")
    folder, _, _ = _quantized_model(tmp_path)
    (folder / "graph.nnef").write_text(text)
    quant = (folder / "graph.quant").read_text().replace(
        f'"p1": {_entry(ZP_R1, S_R1)};', f'"p1": {_entry(0, S_R1 / 4, bits=32)};')
    (folder / "graph.quant").write_text(quant)
    model = load_nnef_model(folder)
    assert any("32-bit quantization not used" in n for n in model.notes)
    qm = model.quantized
    assert "AVG_POOL2D" in {op.op for op in qm.graph.main.operators}
    x = qm.quantize_inputs({"input": np.random.default_rng(4).standard_normal((1, 3, 12, 12)).astype(np.float32)})
    ours = run_graph(qm.graph, x)
    status, official = official_run(qm.graph, x)
    assert status == "VALID"
    for name in qm.outputs:
        np.testing.assert_array_equal(official[name], ours[name])


def test_unsigned_linear_quantize_and_linear_coded_weights(tmp_path):
    """linear_quantize (unsigned) entries become int8 with the zero point moved by -128;
    weights stored with the .dat linear code (0x10) are decoded by its min/max."""
    rng = np.random.default_rng(3)
    weights = {"k1": rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.2,
               "b1": rng.standard_normal((1, 6)).astype(np.float32) * 0.1,
               "k2": rng.standard_normal((4, 6, 3, 3)).astype(np.float32) * 0.2,
               "b2": rng.standard_normal((1, 4)).astype(np.float32) * 0.1}
    raw = {"k1": dat.write_linear(weights["k1"], -0.8, 0.8, 8)}
    others = {k: v for k, v in weights.items() if k != "k1"}
    quant = ('"input": linear_quantize(min = -4.0, max = 4.0, bits = 8);\n'
             '"r1": linear_quantize(min = 0.0, max = 6.0, bits = 8);\n'
             '"output": linear_quantize(min = -10.0, max = 10.0, bits = 8);\n')
    folder = write_model(tmp_path / "q", TEXT, others, quant=quant, raw=raw)
    model = load_nnef_model(folder)
    qin = model.quantized.qparams["input"]
    assert qin.scalar_scale == pytest.approx(8.0 / 255) and qin.zp == 128 - 128
    assert model.quantized.qparams["r1"].zp == -128
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    xq = model.quantized.quantize_inputs({"input": x})
    ours = run_graph(model.graph, xq)["output"]
    decoded = dict(weights, k1=dat.read_dat(raw["k1"]).values)
    (ref,) = khronos_run(write_model(tmp_path / "f", TEXT, decoded),
                         [model.quantized.qparams["input"].dequantize(xq["input"])])
    got = model.quantized.dequantize("output", ours)
    assert snr_db(ref, got) > 30     # measured 35.1 dB


def test_graph_quant_forms():
    scale, zp, bits, signed = affine_form({"op-name": "zero_point_linear_quantize",
                                           "zero_point": 5, "scale": 0.5, "bits": 8,
                                           "signed": True, "symmetric": False}, "q")
    assert (scale[0], zp[0], bits, signed) == (0.5, 5, 8, True)
    # linear_quantize: x = q / 255 * (max - min) + min, unsigned codes.
    scale, zp, _, signed = affine_form({"op-name": "linear_quantize", "min": -1.0, "max": 3.0,
                                        "bits": 8}, "q")
    assert scale[0] == pytest.approx(4.0 / 255) and zp[0] == 64 and not signed
    # min_max_linear_quantize, signed symmetric: r = 254, p = 127, zero point -p - min/scale.
    scale, zp, _, signed = affine_form({"op-name": "min_max_linear_quantize", "min": -2.0,
                                        "max": 2.0, "bits": 8, "signed": True,
                                        "symmetric": True}, "q")
    assert scale[0] == pytest.approx(4.0 / 254) and zp[0] == 0 and signed
    q = activation_qparams({"op-name": "linear_quantize", "min": 0.0, "max": 2.55,
                            "bits": 8}, "q")
    assert q.zp == -128 and q.scalar_scale == pytest.approx(0.01)
    w = weight_qparams({"op-name": "zero_point_linear_quantize", "zero_point": 0,
                        "scale": np.array([0.1, 0.2, 0.3]), "bits": 8, "signed": True,
                        "symmetric": True}, "q", 3)
    assert w.per_channel and w.zp == 0
    with pytest.raises(Unsupported, match="per-channel quantization of activations"):
        activation_qparams({"op-name": "zero_point_linear_quantize", "zero_point": 0,
                            "scale": np.array([0.1, 0.2]), "bits": 8, "signed": True}, "q")
    with pytest.raises(Unsupported, match="16-bit"):
        activation_qparams({"op-name": "zero_point_linear_quantize", "zero_point": 0,
                            "scale": 0.1, "bits": 16, "signed": True}, "q")
