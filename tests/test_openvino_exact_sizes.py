"""OpenVINO output sizes round down, TOSA's must divide exactly: the frontend's rewrite.

The OpenVINO frontend uses the NNEF frontend's mechanism (compiler/frontends/common/windows.py,
graph_passes.fold_slices): input rows that no window reaches are sliced off, end padding
that no window reaches is taken off, a SLICE feeding a pooling is folded into the
convolution before it when taking padding off that convolution is enough; kernels keep
their IR size (the previous OpenVINO lowering appended zero taps instead).

Oracles: the Khronos NNEF runtime on the same layers written as NNEF (float semantics,
independent of our frontends), and the official TOSA reference model, which must give
bit-identical results for our graph and for its zero-tap form
(:func:`exact_size_helpers.zero_tap_form`, the previous lowering), in fp32 and after int8
quantization.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from exact_size_helpers import (  # noqa: E402
    CONVS, assert_zero_tap_form_agrees, conv_kernels, draw_window, zero_tap_form,
)
from nnef_helpers import khronos_run, snr_db, write_model  # noqa: E402
from ov_ir_helpers import IrBuilder  # noqa: E402

from compiler.frontends.openvino.load import load_openvino_model  # noqa: E402
from compiler.graph.quantize.float_eval import evaluate  # noqa: E402

KINDS = ("conv", "depthwise", "conv_relu_pool", "max_pool", "avg_pool")


def _pairs(values) -> str:
    return ",".join(str(int(v)) for v in values)


def random_case(seed: int, folder):
    """A seeded one-layer (or Convolution -> ReLU -> 3x3/2 MaxPool) OpenVINO IR whose
    window division leaves a remainder along at least one axis, and the same graph as
    NNEF.  Returns ``(kind, xml_path, nnef_folder, kernel_hw)``."""
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    window = kind in ("max_pool", "avg_pool")
    while True:
        # kind "conv": no end padding, the remainder is input rows; half the
        # "conv_relu_pool" cases have stride 1, so that the pool's SLICE can go into the
        # conv's padding.
        stride = [1, 1] if kind == "conv_relu_pool" and seed // len(KINDS) % 2 == 0 else None
        h, w, k, s, d, p, num, out = draw_window(rng, window, end_padding=kind != "conv",
                                                 stride=stride)
        if min(num) < 0:
            continue
        remainder = any(n % s[i] for i, n in enumerate(num))
        if kind == "conv_relu_pool":
            if min(out) < 3:
                continue
            remainder = remainder or any((n - 3) % 2 for n in out)
        if remainder:
            break
    window_attrs = {"strides": _pairs(s), "pads_begin": _pairs([p[0][0], p[1][0]]),
                    "pads_end": _pairs([p[0][1], p[1][1]]), "auto_pad": "explicit"}
    pad2 = f"[({p[0][0]},{p[0][1]}), ({p[1][0]},{p[1][1]})]"
    b = IrBuilder()
    x = b.parameter("input", [1, 3, h, w])
    lines = ["input = external(shape = [1, 3, %d, %d]);" % (h, w)]
    weights = {}
    if kind in ("conv", "conv_relu_pool", "depthwise"):
        oc = 3 if kind == "depthwise" else 4
        filt = (rng.standard_normal((oc, 1 if kind == "depthwise" else 3, k[0], k[1]))
                * 0.3).astype(np.float32)
        weights["k"] = filt
        lines.append(f"k = variable(shape = {list(filt.shape)}, label = 'k');")
        attrs = dict(window_attrs, dilations=_pairs(d))
        if kind == "depthwise":
            y = b.one("GroupConvolution", [x, b.const(filt.reshape(3, 1, 1, k[0], k[1]))],
                      [1, 3] + out, name="conv", **attrs)
            lines.append(f"output = conv(input, k, groups = 0, stride = {s}, dilation = {d}, "
                         f"padding = {pad2});")
        else:
            y = b.one("Convolution", [x, b.const(filt)], [1, oc] + out, name="conv", **attrs)
            lines.append(f"c = conv(input, k, stride = {s}, dilation = {d}, padding = {pad2});")
            if kind == "conv":
                lines.append("output = copy(c);")
            else:
                y = b.one("ReLU", [y], [1, oc] + out, name="relu")
                pooled = [(n - 3) // 2 + 1 for n in out]
                y = b.one("MaxPool", [y], [1, oc] + pooled, name="pool", strides="2,2",
                          pads_begin="0,0", pads_end="0,0", kernel="3,3",
                          rounding_type="floor", auto_pad="explicit")
                lines.append("output = max_pool(relu(c), size = [1, 1, 3, 3], "
                             "stride = [1, 1, 2, 2], border = 'ignore', "
                             "padding = [(0,0), (0,0), (0,0), (0,0)]);")
    else:
        exclude = bool(seed % 2) if kind == "avg_pool" else True
        extra = {"exclude__pad": "true" if exclude else "false"} if kind == "avg_pool" else {}
        y = b.one("MaxPool" if kind == "max_pool" else "AvgPool", [x], [1, 3] + out,
                  name="pool", kernel=_pairs(k), rounding_type="floor", **window_attrs,
                  **extra)
        border = "ignore" if exclude else "constant"
        lines.append(f"output = {kind}(input, size = [1, 1, {k[0]}, {k[1]}], "
                     f"stride = [1, 1, {s[0]}, {s[1]}], padding = [(0,0), (0,0), "
                     f"{pad2[1:]}, border = '{border}');")
    b.result(y, name="output")
    body = "".join(f"    {line}\n" for line in lines)
    text = f"version 1.0;\ngraph G( input ) -> ( output )\n{{\n{body}}}\n"
    nnef_folder = write_model(folder / "nnef", text, weights)
    (folder / "ir").mkdir(parents=True)
    return kind, b.write(folder / "ir"), nnef_folder, tuple(k)


def _nchw(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 3, 1, 2)


@pytest.mark.parametrize("seed", range(20))
def test_sliced_lowering_matches_khronos_and_zero_taps(tmp_path, seed):
    kind, xml, nnef_folder, kernel = random_case(seed, tmp_path)
    model = load_openvino_model(xml, layout="nhwc")                      # NHWC graph boundaries
    graph = model.graph
    block = graph.main
    assert not any("zero taps" in n for n in model.notes)

    # The kernels keep their IR size: no multiplies beyond what the IR asks for.
    assert all(k == kernel for k in conv_kernels(block))

    rng = np.random.default_rng(1000 + seed)
    shape = block.tensors["input"].shape
    x = {"input": rng.standard_normal(shape).astype(np.float32)}
    (out_name,) = block.outputs

    # Float semantics: the Khronos NNEF runtime on the same layers.
    (expect,) = khronos_run(nnef_folder, [_nchw(x["input"])])
    got = evaluate(graph, x, keep=False)[out_name]
    assert snr_db(expect, _nchw(got)) > 100

    # The official reference model accepts the graph, and the zero-tap form agrees bitwise,
    # in fp32 and after int8 quantization.
    calib = [{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(2)]
    new_out = assert_zero_tap_form_agrees(graph, x, calib)
    assert snr_db(expect, _nchw(new_out[out_name])) > 100


def test_cases_cover_both_rewrites(tmp_path):
    """The random cases above slice inputs of convolutions and of pools, take padding off
    a convolution feeding a pool, and the zero-tap form differs from the sliced one."""
    seen = {"slice->conv": 0, "slice->pool": 0, "less padding": 0, "rewritten": 0}
    for seed in range(20):
        kind, xml, _, _ = random_case(seed, tmp_path / str(seed))
        model = load_openvino_model(xml, layout="nhwc")
        block = model.graph.main
        consumers = block.consumers()
        for op in block.operators:
            if op.op == "SLICE":
                user = consumers[op.outputs[0]][0].op
                seen["slice->conv" if user in CONVS else "slice->pool"] += 1
        seen["less padding"] += any("less bottom/right padding" in n for n in model.notes)
        old = [op.op for op in zero_tap_form(model.graph).main.operators]
        seen["rewritten"] += old.count("SLICE") < [op.op for op in block.operators].count("SLICE")
    assert min(seen.values()) >= 2, seen


def test_a_slice_layer_at_a_graph_output_keeps_its_name(tmp_path):
    """A model's own Slice dropping trailing rows of a convolution is not folded into the
    convolution when its result is a graph output: the output keeps its name."""
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 6, 6])
    filt = np.arange(3 * 2 * 3 * 3, dtype=np.float32).reshape(3, 2, 3, 3) / 50.0
    conv = b.one("Convolution", [x, b.const(filt)], [1, 3, 6, 6], name="conv",
                 strides="1,1", dilations="1,1", pads_begin="1,1", pads_end="1,1",
                 auto_pad="explicit")
    ins = [conv, b.const(np.asarray([0, 0, 0, 0], np.int64)),
           b.const(np.asarray([1, 3, 5, 5], np.int64)), b.const(np.ones(4, np.int64))]
    b.result(b.one("StridedSlice", ins, [1, 3, 5, 5], name="ss", out_names=["y"],
                   begin_mask="0,0,0,0", end_mask="0,0,0,0"))
    graph = load_openvino_model(b.write(tmp_path), layout="nhwc").graph
    block = graph.main
    assert block.outputs == ["y"]
    assert [op.op for op in block.operators if op.op not in ("CONST", "CONST_SHAPE")] == \
        ["CONV2D", "SLICE"]
    xv = np.random.default_rng(5).standard_normal((1, 6, 6, 2)).astype(np.float32)
    full = np.zeros((1, 8, 8, 2), np.float32)
    full[:, 1:7, 1:7] = xv
    want = np.zeros((1, 5, 5, 3), np.float64)     # the test's own direct convolution
    for i in range(5):
        for j in range(5):
            patch = full[0, i:i + 3, j:j + 3, :].astype(np.float64)
            want[0, i, j] = np.einsum("hwc,ochw->o", patch, filt.astype(np.float64))
    got = evaluate(graph, {"x": xv}, keep=False)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
