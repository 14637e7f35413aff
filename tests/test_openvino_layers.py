"""OpenVINO IR frontend on hand-built IRs: element types, weight forms, FakeQuantize
parameters, layer mappings and graph boundaries.

Expected values are the test's own literals (bytes written into the .bin and the values
they stand for) or numpy applied to the test's input (slicing), never the frontend's.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from compiler.frontends.openvino.load import load_openvino, load_openvino_model  # noqa: E402
from compiler.frontends.openvino.quant import (  # noqa: E402
    WeightQuant, activation_params, fake_quantize, weight_params,
)
from compiler.graph.quantize.float_eval import evaluate  # noqa: E402
from ov_ir_helpers import IrBuilder, conv_attrs  # noqa: E402
from sim.reference.interpreter import run_graph  # noqa: E402
from tosa_ir.errors import Unsupported  # noqa: E402


def plain_ops(graph) -> list[str]:
    return [op.op for op in graph.main.operators if op.op not in ("CONST", "CONST_SHAPE")]


# ---------------------------------------------------------------------------------------
# Element types of Const data
# ---------------------------------------------------------------------------------------
ELEMENTS = [
    ("f32", np.asarray([1.5, -2.25, 0.0, 3e-5], np.float32).tobytes(), [1.5, -2.25, 0.0, 3e-5]),
    ("f16", np.asarray([0.5, -2.0, 65504.0, 0.25], np.float16).tobytes(),
     [0.5, -2.0, 65504.0, 0.25]),
    ("bf16", bytes([0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3F, 0x40, 0x40]), [1.0, -2.0, 0.5, 3.0]),
    ("f64", np.asarray([1.0, -1.0, 2.0, 0.125], np.float64).tobytes(), [1.0, -1.0, 2.0, 0.125]),
    ("i8", bytes([0x80, 0xFF, 0x00, 0x7F]), [-128, -1, 0, 127]),
    ("u8", bytes([0, 1, 200, 255]), [0, 1, 200, 255]),
    ("i16", np.asarray([-300, 2, 0, 7], "<i2").tobytes(), [-300, 2, 0, 7]),
    ("i32", np.asarray([-70000, 5, 0, 9], "<i4").tobytes(), [-70000, 5, 0, 9]),
    ("i64", np.asarray([-3, 4, 1 << 20, 0], "<i8").tobytes(), [-3, 4, 1 << 20, 0]),
    ("u4", bytes([0x21, 0x43]), [1, 2, 3, 4]),
    ("i4", bytes([0xF1, 0x87]), [1, -1, 7, -8]),
    ("u1", bytes([0b10110000]), [1, 0, 1, 1]),
    ("boolean", bytes([1, 0, 1, 1]), [1, 0, 1, 1]),
]


@pytest.mark.parametrize("et,raw,values", ELEMENTS, ids=[e[0] for e in ELEMENTS])
def test_const_element_types(tmp_path, et, raw, values):
    """x + Convert(Const<et>) == x + values."""
    b = IrBuilder()
    x = b.parameter("x", [4])
    c = b.raw_const(raw, et, (4,), name="c")
    c.et = et
    f = b.one("Convert", [c], [4], name="cvt", destination_type="f32")
    b.result(b.one("Add", [x, f], [4], name="add", out_names=["y"]))
    graph = load_openvino_model(b.write(tmp_path), layout="nhwc").graph
    assert plain_ops(graph) == ["ADD"]
    x_val = np.asarray([10.0, 20.0, 30.0, 40.0], np.float32)
    got = evaluate(graph, {"x": x_val}, keep=False)["y"]
    np.testing.assert_allclose(got, x_val + np.asarray(values, np.float32), rtol=1e-6)


# ---------------------------------------------------------------------------------------
# Weight forms -> int8 weights
# ---------------------------------------------------------------------------------------
def decompressed_conv(tmp_path, codes: np.ndarray, et: str, zero, scale: np.ndarray,
                      name: str = "m"):
    """x -> FQ -> Convolution(Const<et> -> Convert -> [Subtract zero] -> Multiply scale)
    -> FQ -> Result; x is [1, 2, 3, 3], 1x1 kernel, 3 output channels."""
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 3, 3])
    r = [b.const(np.float32(v)) for v in (-1.28, 1.27, -1.28, 1.27)]
    xq = b.one("FakeQuantize", [x] + r, [1, 2, 3, 3], name="fq_in", levels=256)
    c = b.const(codes, et=et, name="codes")
    c.et = et
    w = b.one("Convert", [c], list(codes.shape), name="cvt", destination_type="f32")
    if zero is not None:
        w = b.one("Subtract", [w, b.const(np.asarray(zero, np.float32))], list(codes.shape),
                  name="sub")
    w = b.one("Multiply", [w, b.const(scale.astype(np.float32))], list(codes.shape),
              name="mul")
    y = b.one("Convolution", [xq, w], [1, 3, 3, 3], name="conv", **conv_attrs())
    r2 = [b.const(np.float32(v)) for v in (-2.56, 2.54, -2.56, 2.54)]
    b.result(b.one("FakeQuantize", [y] + r2, [1, 3, 3, 3], name="fq_out", levels=256,
                   out_names=["y"]))
    return load_openvino_model(b.write(tmp_path, name), layout="nhwc")


def conv_weights(model):
    block = model.graph.main
    op = next(o for o in block.operators if o.op == "CONV2D")
    return block.tensors[op.inputs[1]].data, int(block.tensors[op.inputs[4]].data[0])


def test_i8_codes_times_scale(tmp_path):
    codes = np.asarray([[[[5]], [[-127]]], [[[127]], [[0]]], [[[-3]], [[64]]]], np.int8)
    scale = np.asarray([0.01, 0.02, 0.03]).reshape(3, 1, 1, 1)
    model = decompressed_conv(tmp_path, codes, "i8", None, scale)
    w, wzp = conv_weights(model)
    assert wzp == 0
    np.testing.assert_array_equal(w.reshape(3, 2), codes.reshape(3, 2))
    weight_scales = [qp.scale for qp in model.given.values() if qp.per_channel]
    assert len(weight_scales) == 1
    np.testing.assert_allclose(weight_scales[0], scale.reshape(-1), rtol=1e-6)


def test_u8_codes_with_zero_point_128(tmp_path):
    codes = np.asarray([0, 255, 128, 1, 200, 17], np.uint8).reshape(3, 2, 1, 1)
    scale = np.asarray([0.01, 0.02, 0.03]).reshape(3, 1, 1, 1)
    model = decompressed_conv(tmp_path, codes, "u8", 128.0, scale)
    w, wzp = conv_weights(model)
    expected = codes.astype(np.int64) - 128          # -128 .. 127, zero point 0
    assert wzp == 0
    # The quantizer keeps symmetric weights in [-127, 127]: the one -128 becomes -127 and
    # the frontend says so.
    np.testing.assert_array_equal(w.reshape(-1), np.maximum(expected.reshape(-1), -127))
    assert any("weight code -128" in n for n in model.notes)


def test_u8_codes_with_asymmetric_zero_point(tmp_path):
    codes = np.asarray([0, 255, 100, 1, 200, 17], np.uint8).reshape(3, 2, 1, 1)
    scale = np.asarray([0.01, 0.02, 0.03]).reshape(3, 1, 1, 1)
    model = decompressed_conv(tmp_path, codes, "u8", 100.0, scale)
    w, wzp = conv_weights(model)
    assert wzp == 100 - 128
    np.testing.assert_array_equal(w.reshape(-1), codes.reshape(-1).astype(np.int64) - 128)


def test_per_channel_zero_points_that_do_not_fit_are_requantized(tmp_path):
    codes = np.asarray([0, 255, 100, 1, 200, 17], np.uint8).reshape(3, 2, 1, 1)
    zero = np.asarray([10.0, 100.0, 30.0], np.float32).reshape(3, 1, 1, 1)
    scale = np.asarray([0.01, 0.02, 0.03]).reshape(3, 1, 1, 1)
    model = decompressed_conv(tmp_path, codes, "u8", zero, scale)
    assert any("requantized" in n for n in model.notes)
    w, wzp = conv_weights(model)
    assert wzp == 0 and np.abs(w).max() == 127


def test_int8_graph_of_decompressed_weights_runs(tmp_path):
    """The integer graph of a one-layer model equals exact integer arithmetic: with
    x = (q - zp) * 0.01 and w = codes * s, y = sum(x * w) rounded onto the output grid."""
    codes = np.asarray([[[[5]], [[-127]]], [[[127]], [[0]]], [[[-3]], [[64]]]], np.int8)
    scale = np.asarray([0.01, 0.02, 0.03]).reshape(3, 1, 1, 1)
    model = decompressed_conv(tmp_path, codes, "i8", None, scale)
    qm = model.quantized
    rng = np.random.default_rng(3)
    xq = rng.integers(-128, 128, (1, 3, 3, 2)).astype(np.int8)
    got = run_graph(qm.graph, {"x": xq})["y"].astype(np.int64)
    # Exact: x real = q * 0.01 (zero point 0); output grid 0.02 with zero point 0.
    acc = np.einsum("nhwc,oc->nhwo", xq.astype(np.float64) * 0.01,
                    codes.reshape(3, 2) * scale.reshape(3, 1))
    want = np.clip(np.floor(acc / 0.02 + 0.5), -128, 127)
    assert np.abs(got - want).max() <= 1
    assert np.mean(got == want) > 0.9


# ---------------------------------------------------------------------------------------
# FakeQuantize arithmetic
# ---------------------------------------------------------------------------------------
def test_fake_quantize_semantics():
    x = np.asarray([-5.0, -1.0, -0.004, 0.006, 0.0151, 1.27, 2.0])
    values, codes = fake_quantize(x, -1.28, 1.27, -1.28, 1.27, 256)
    np.testing.assert_array_equal(codes, [0, 28, 128, 129, 130, 255, 255])
    np.testing.assert_allclose(values, [-1.28, -1.0, 0.0, 0.01, 0.02, 1.27, 1.27], atol=1e-6)


@pytest.mark.parametrize("lo,hi,scale,zp", [
    (0.0, 2.55, 0.01, -128), (-1.28, 1.27, 0.01, 0), (-0.5, 2.05, 0.01, -78),
])
def test_activation_parameters(lo, hi, scale, zp):
    qp, notes = activation_params([lo, hi, lo, hi], 256, "here")
    assert qp.scalar_scale == pytest.approx(scale) and qp.zp == zp and not notes


def test_activation_zero_off_grid_is_noted():
    qp, notes = activation_params([-0.333, 1.0, -0.333, 1.0], 256, "here")
    assert notes and "zero is not on the FakeQuantize grid" in notes[0]


def test_weight_parameters_need_one_scale_per_channel():
    codes = np.zeros((2, 3), np.int64)
    scale = np.asarray([[0.1, 0.1, 0.2], [0.3, 0.3, 0.3]])
    qp, notes = weight_params(WeightQuant.of(codes, 0.0, scale), 0, "here")
    assert qp is None and "varies inside an output channel" in notes[0]
    qp, notes = weight_params(WeightQuant.of(codes, 0.0, scale[::-1]), 0, "here")
    assert qp is None
    good = np.asarray([[0.1] * 3, [0.3] * 3])
    qp, notes = weight_params(WeightQuant.of(codes, 0.0, good), 0, "here")
    np.testing.assert_allclose(qp.scale, [0.1, 0.3])


def test_fakequantize_weights_levels_256(tmp_path):
    """Symmetric levels=256 weights use code -128 (the frontend notes the clip)."""
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 1, 1])
    r = [b.const(np.float32(v)) for v in (-1.28, 1.27, -1.28, 1.27)]
    xq = b.one("FakeQuantize", [x] + r, [1, 2, 1, 1], name="fq_in", levels=256)
    w = b.const(np.asarray([-1.0, 0.5, 0.25, 1.0], np.float32).reshape(2, 2, 1, 1))
    s = np.asarray([1 / 128, 1 / 128], np.float32).reshape(2, 1, 1, 1)
    wr = [b.const(v) for v in (-128 * s, 127 * s, -128 * s, 127 * s)]
    wq = b.one("FakeQuantize", [w] + wr, [2, 2, 1, 1], name="fq_w", levels=256)
    y = b.one("Convolution", [xq, wq], [1, 2, 1, 1], name="conv", **conv_attrs())
    r2 = [b.const(np.float32(v)) for v in (-2.56, 2.54, -2.56, 2.54)]
    b.result(b.one("FakeQuantize", [y] + r2, [1, 2, 1, 1], name="fq_out", levels=256))
    model = load_openvino_model(b.write(tmp_path), layout="nhwc")
    assert any("weight code -128" in n and "'conv'" in n for n in model.notes)
    w_codes, _ = conv_weights(model)
    np.testing.assert_array_equal(w_codes.reshape(-1), [-127, 64, 32, 127])


# ---------------------------------------------------------------------------------------
# Layer mappings
# ---------------------------------------------------------------------------------------
def test_conv_bias_add_is_folded(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 3, 3])
    w = b.const(np.ones((4, 2, 1, 1), np.float32))
    y = b.one("Convolution", [x, w], [1, 4, 3, 3], name="conv", **conv_attrs())
    bias = b.const(np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1))
    b.result(b.one("Add", [y, bias], [1, 4, 3, 3], name="bias", out_names=["y"]))
    graph = load_openvino_model(b.write(tmp_path), layout="nhwc").graph
    assert plain_ops(graph) == ["CONV2D"]
    conv = next(o for o in graph.main.operators if o.op == "CONV2D")
    np.testing.assert_array_equal(graph.main.tensors[conv.inputs[2]].data, [0, 1, 2, 3])
    x_val = np.ones((1, 3, 3, 2), np.float32)
    got = evaluate(graph, {"x": x_val}, keep=False)["y"]
    np.testing.assert_array_equal(got[0, 0, 0], [2, 3, 4, 5])


@pytest.mark.parametrize("begin,end,masks,index", [
    ([0, 1, 0], [0, 3, 0], {"begin_mask": "1,0,1", "end_mask": "1,0,1"},
     (slice(None), slice(1, 3), slice(None))),
    ([0, 2, 1], [0, 3, 4], {"begin_mask": "1,0,0", "end_mask": "1,0,0",
                            "shrink_axis_mask": "0,1,0"}, (slice(None), 2, slice(1, 4))),
    ([0, 0, -2], [0, 0, 0], {"begin_mask": "1,0,0", "end_mask": "1,0,1",
                             "new_axis_mask": "0,1,0"}, (slice(None), None, slice(-2, None))),
])
def test_strided_slice_of_activation(tmp_path, begin, end, masks, index):
    x_val = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5)
    want = x_val[index]
    b = IrBuilder()
    x = b.parameter("x", [2, 4, 5])
    ins = [x, b.const(np.asarray(begin, np.int64)), b.const(np.asarray(end, np.int64)),
           b.const(np.ones(3, np.int64))]
    b.result(b.one("StridedSlice", ins, list(want.shape), name="ss", out_names=["y"],
                   **masks))
    graph = load_openvino_model(b.write(tmp_path), layout="nchw").graph
    np.testing.assert_array_equal(evaluate(graph, {"x": x_val}, keep=False)["y"], want)


def test_strided_slice_with_step_is_unsupported(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 6])
    ins = [x, b.const(np.asarray([0, 0], np.int64)), b.const(np.asarray([1, 6], np.int64)),
           b.const(np.asarray([1, 2], np.int64))]
    b.result(b.one("StridedSlice", ins, [1, 3], name="ss", begin_mask="0,0",
                   end_mask="0,0"))
    with pytest.raises(Unsupported, match="layer 4 'ss'.*step 2"):
        load_openvino_model(b.write(tmp_path), layout="nhwc").graph


def test_gather_of_scattered_indices_is_unsupported(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 6])
    ins = [x, b.const(np.asarray([0, 2], np.int64)), b.const(np.int64(1))]
    b.result(b.one("Gather", ins, [1, 2], name="g", version="opset8", batch_dims=0))
    with pytest.raises(Unsupported, match="'g' \\(Gather\\).*contiguous"):
        load_openvino_model(b.write(tmp_path), layout="nhwc").graph


def test_graph_boundaries(tmp_path):
    """A Result of a Parameter, a Result of a Const, the same tensor twice, NCHW/NHWC."""
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 3, 3])
    b.result(x)
    b.result(b.const(np.full((2,), 7.0, np.float32), name="seven"))
    r = b.one("ReLU", [x], [1, 2, 3, 3], name="relu", out_names=["r"])
    b.result(r)
    b.result(r)
    path = b.write(tmp_path)
    graph = load_openvino_model(path, layout="nhwc").graph
    block = graph.main
    assert block.inputs == ["x"] and len(block.outputs) == 4
    assert len(set(block.outputs)) == 4 and "r" in block.outputs and "x" not in block.outputs
    x_val = np.arange(18, dtype=np.float32).reshape(1, 3, 3, 2) - 9
    got = evaluate(graph, {"x": x_val}, keep=False)
    outs = [got[n] for n in block.outputs]
    np.testing.assert_array_equal(outs[0], x_val)
    np.testing.assert_array_equal(outs[1], [7.0, 7.0])
    np.testing.assert_array_equal(outs[2], np.maximum(x_val, 0))
    np.testing.assert_array_equal(outs[3], np.maximum(x_val, 0))
    nchw = load_openvino_model(path, layout="nchw").graph
    assert nchw.main.tensors["x"].shape == (1, 2, 3, 3)


def test_transpose_is_bookkeeping(tmp_path):
    """Transpose NCHW -> NHWC of a convolution result costs no operator."""
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 3, 3])
    w = b.const(np.ones((4, 2, 1, 1), np.float32))
    y = b.one("Convolution", [x, w], [1, 4, 3, 3], name="conv", **conv_attrs())
    t = b.one("Transpose", [y, b.const(np.asarray([0, 2, 3, 1], np.int64))], [1, 3, 3, 4],
              name="t", out_names=["t"])
    b.result(t)
    graph = load_openvino_model(b.write(tmp_path), layout="nchw").graph
    assert plain_ops(graph) == ["TRANSPOSE", "CONV2D"]    # only the input's transpose


def test_precision_notes_for_f16(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 4], et="f16")
    c = b.one("Convert", [x], [1, 4], name="to16", destination_type="f16")
    b.result(c)
    model = load_openvino_model(b.write(tmp_path), layout="nhwc")
    assert any("f16 input held as fp32" in n for n in model.notes)
    assert any("Convert to f16 ignored" in n for n in model.notes)


# ---------------------------------------------------------------------------------------
# Integer graph inputs and outputs (OpenVINO's converters keep them)
# ---------------------------------------------------------------------------------------
def integer_io_model(et: str = "i8", in_range=(-128.0, 127.0), out_fq=True):
    """x<et> -> Convert -> FQ(codes -> [-1.28, 1.27]) -> ReLU -> FQ([0, 2.55])
    -> FQ([0, 2.55] -> codes) -> Convert<et> -> Result."""
    b = IrBuilder()
    x = b.parameter("x", [1, 8], et=et)
    f = b.one("Convert", [x], [1, 8], name="to_f32", destination_type="f32")
    lo, hi = in_range
    r = [b.const(np.float32(v)) for v in (lo, hi, -1.28, 1.27)]
    d = b.one("FakeQuantize", [f] + r, [1, 8], name="dequant", levels=256)
    y = b.one("ReLU", [d], [1, 8], name="relu")
    if not out_fq:
        b.result(b.one("Convert", [y], [1, 8], name="to_int", destination_type=et))
        return b
    r2 = [b.const(np.float32(v)) for v in (0.0, 2.55, 0.0, 2.55)]
    y = b.one("FakeQuantize", [y] + r2, [1, 8], name="fq_relu", levels=256)
    code_range = (-128.0, 127.0) if et == "i8" else (0.0, 255.0)
    r3 = [b.const(np.float32(v)) for v in (0.0, 2.55) + code_range]
    q = b.one("FakeQuantize", [y] + r3, [1, 8], name="quant", levels=256)
    q.et = "f32"
    out = b.one("Convert", [q], [1, 8], name="to_int", destination_type=et, et=et,
                out_names=["y"])
    b.result(out)
    return b


def test_integer_input_and_output_codes(tmp_path):
    model = load_openvino_model(integer_io_model().write(tmp_path), layout="nhwc")
    assert model.code_inputs == {"x": "i8"}
    q = np.arange(-128, 128, 32, dtype=np.int8).reshape(1, 8)
    got = run_graph(model.graph, {"x": q})["y"]
    # real = q * 0.01; ReLU; output codes -128 + round(real / 0.01).
    np.testing.assert_array_equal(got, -128 + np.maximum(q.astype(np.int64), 0))


def test_uint8_input_codes_shift_by_128(tmp_path):
    model = load_openvino_model(integer_io_model("u8", (0.0, 255.0)).write(tmp_path))
    assert any("uint8 codes" in n for n in model.notes)
    qp = model.quantized.qparams["x"]
    assert qp.zp == 0 and qp.scalar_scale == pytest.approx(0.01)


def test_integer_codes_need_their_fakequantize(tmp_path):
    with pytest.raises(Unsupported, match="'dequant' \\(FakeQuantize\\).*whole code range"):
        load_openvino(integer_io_model(in_range=(-100.0, 100.0)).write(tmp_path, "a"))
    b = IrBuilder()
    x = b.parameter("x", [1, 8], et="i8")
    f = b.one("Convert", [x], [1, 8], name="to_f32", destination_type="f32")
    b.result(b.one("ReLU", [f], [1, 8], name="relu"))
    with pytest.raises(Unsupported, match="layer 2 'relu'.*integer codes"):
        load_openvino_model(b.write(tmp_path, "b"), layout="nhwc").graph
    with pytest.raises(Unsupported, match="'to_int' \\(Convert\\).*'i8'"):
        load_openvino_model(integer_io_model(out_fq=False).write(tmp_path, "c"), layout="nhwc").graph


def test_ir_version_10_and_bin_path(tmp_path):
    b = IrBuilder(version=10)
    x = b.parameter("x", [1, 2, 3, 3])
    w = b.const(np.full((4, 2, 1, 1), 0.5, np.float32))
    b.result(b.one("Convolution", [x, w], [1, 4, 3, 3], name="conv", out_names=["y"],
                   **conv_attrs()))
    path = b.write(tmp_path)
    for p in (path, path.with_suffix(".bin")):
        graph = load_openvino_model(p, layout="nhwc").graph
        got = evaluate(graph, {"x": np.ones((1, 3, 3, 2), np.float32)}, keep=False)["y"]
        np.testing.assert_array_equal(got, np.ones((1, 3, 3, 4)))


def test_nhwc_input_of_a_converted_tensorflow_model_is_read_as_declared(tmp_path):
    """An IR converted from TensorFlow keeps its NHWC input [1,6,5,3] and inserts
    Transpose(0,3,1,2) before the convolution, here after an elementwise layer (it once was
    taken as NCHW: 'does not match the declared shape [1,6,3,5]').  The graph takes the
    input as declared; the converter's Transposes cancel in the layout bookkeeping (no
    TRANSPOSE operator), and the output is NHWC as declared too."""
    b = IrBuilder()
    x = b.parameter("x", [1, 6, 5, 3])
    r = b.one("ReLU", [x], [1, 6, 5, 3], name="relu")
    t = b.one("Transpose", [r, b.const(np.asarray([0, 3, 1, 2], np.int64))], [1, 3, 6, 5], name="to_nchw")
    w = b.const(np.arange(24, dtype=np.float32).reshape(4, 3, 2, 1) / 10 - 1)
    y = b.one("Convolution", [t, w], [1, 4, 5, 5], name="conv", **conv_attrs())
    o = b.one("Transpose", [y, b.const(np.asarray([0, 2, 3, 1], np.int64))], [1, 5, 5, 4], name="to_nhwc",
              out_names=["y"])
    b.result(o)
    model = load_openvino_model(b.write(tmp_path))
    block = model.graph.main
    assert block.tensors["x"].shape == (1, 6, 5, 3) and model.boundary["x"] == (0, 1, 2, 3)
    assert block.tensors[block.outputs[0]].shape == (1, 5, 5, 4)
    assert "TRANSPOSE" not in plain_ops(model.graph)
    xv = np.random.default_rng(0).normal(size=(1, 6, 5, 3)).astype(np.float32)
    got = evaluate(model.graph, {"x": xv}, keep=False)[block.outputs[0]]
    want = np.zeros((1, 5, 5, 4), np.float32)
    wv = np.arange(24, dtype=np.float32).reshape(4, 3, 2, 1) / 10 - 1
    xr = np.maximum(xv, 0)
    for oy in range(5):
        for ox in range(5):
            want[0, oy, ox] = np.einsum("khwc,hwc->k", wv.transpose(0, 2, 3, 1), xr[0, oy:oy + 2, ox:ox + 1])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_nchw_model_input_is_nchw_as_declared(tmp_path):
    """An NCHW IR keeps its NCHW input by default: the TRANSPOSE to NHWC is in the graph
    (the compiler makes it the host's layout of the input); layout="nhwc" asks for NHWC."""
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 3, 3])
    w = b.const(np.ones((4, 2, 1, 1), np.float32))
    b.result(b.one("Convolution", [x, w], [1, 4, 3, 3], name="conv", **conv_attrs()))
    path = b.write(tmp_path)
    graph = load_openvino_model(path).graph
    assert graph.main.tensors["x"].shape == (1, 2, 3, 3)
    assert plain_ops(graph) == ["TRANSPOSE", "CONV2D", "TRANSPOSE"]
    assert load_openvino_model(path, layout="nhwc").graph.main.tensors["x"].shape == (1, 3, 3, 2)


@pytest.mark.parametrize("stride,pb,pe,extra", [((2, 2), (1, 0), (0, 1), (1, 0)), ((1, 3), (0, 0), (0, 0), (0, 0)),
                                                ((3, 2), (2, 1), (1, 2), (0, 1))])
def test_convolution_backprop_data(tmp_path, stride, pb, pe, extra):
    """ConvolutionBackpropData (it was refused) as TRANSPOSE_CONV2D, against the direct sum
    of OpenVINO's definition: out[o*s - pb + k] += x[o] * w[ci, co, k]."""
    rng = np.random.default_rng(sum(stride) + sum(pb))
    n, ci, h, w_, co, kh, kw = 1, 3, 4, 5, 2, 3, 2
    oh = (h - 1) * stride[0] + kh - pb[0] - pe[0] + extra[0]
    ow = (w_ - 1) * stride[1] + kw - pb[1] - pe[1] + extra[1]
    b = IrBuilder()
    x = b.parameter("x", [n, ci, h, w_])
    wv = rng.normal(size=(ci, co, kh, kw)).astype(np.float32)
    y = b.one("ConvolutionBackpropData", [x, b.const(wv)], [n, co, oh, ow], name="deconv",
              strides=",".join(map(str, stride)), pads_begin=",".join(map(str, pb)),
              pads_end=",".join(map(str, pe)), output_padding=",".join(map(str, extra)), dilations="1,1",
              auto_pad="explicit")
    b.result(y)
    graph = load_openvino_model(b.write(tmp_path)).graph
    assert "TRANSPOSE_CONV2D" in plain_ops(graph)
    xv = rng.normal(size=(n, ci, h, w_)).astype(np.float32)
    full = np.zeros((n, co, (h - 1) * stride[0] + kh + extra[0] + 8, (w_ - 1) * stride[1] + kw + extra[1] + 8))
    for iy in range(h):
        for ix in range(w_):
            full[:, :, iy * stride[0]:iy * stride[0] + kh, ix * stride[1]:ix * stride[1] + kw] += \
                np.einsum("nc,cokl->nokl", xv[:, :, iy, ix], wv)
    want = full[:, :, pb[0]:pb[0] + oh, pb[1]:pb[1] + ow]
    got = evaluate(graph, {"x": xv}, keep=False)[graph.main.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("auto_pad,out_hw", [("same_lower", (8, 10)), ("same_upper", (8, 10)),
                                             ("explicit", (9, 9))])
def test_convolution_backprop_data_with_output_shape(tmp_path, auto_pad, out_hw):
    """The output_shape input (OpenVINO's TFLite frontend writes TRANSPOSE_CONV so):
    pads_begin/pads_end are ignored, ``total = s * (H - 1) + K - output_shape`` is split
    with the larger half at the end (at the beginning for same_upper); against the direct
    sum of the definition, cropped so."""
    rng = np.random.default_rng(len(auto_pad))
    n, ci, h, w_, co, kh, kw, stride = 1, 3, 4, 5, 2, 3, 3, (2, 2)
    b = IrBuilder()
    x = b.parameter("x", [n, ci, h, w_])
    wv = rng.normal(size=(ci, co, kh, kw)).astype(np.float32)
    shape = b.const(np.asarray(out_hw, np.int64))
    y = b.one("ConvolutionBackpropData", [x, b.const(wv), shape], [n, co, *out_hw],
              name="deconv", strides="2,2", pads_begin="5,5", pads_end="5,5",
              output_padding="0,0", dilations="1,1", auto_pad=auto_pad)
    b.result(y)
    graph = load_openvino_model(b.write(tmp_path)).graph
    xv = rng.normal(size=(n, ci, h, w_)).astype(np.float32)
    full = np.zeros((n, co, (h - 1) * stride[0] + kh, (w_ - 1) * stride[1] + kw))
    for iy in range(h):
        for ix in range(w_):
            full[:, :, iy * stride[0]:iy * stride[0] + kh, ix * stride[1]:ix * stride[1] + kw] += \
                np.einsum("nc,cokl->nokl", xv[:, :, iy, ix], wv)
    begin = []
    for axis, size in enumerate(out_hw):
        total = full.shape[2 + axis] - size
        begin.append(total - total // 2 if auto_pad == "same_upper" else total // 2)
    want = full[:, :, begin[0]:begin[0] + out_hw[0], begin[1]:begin[1] + out_hw[1]]
    got = evaluate(graph, {"x": xv}, keep=False)[graph.main.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
