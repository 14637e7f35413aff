"""NNEF output sizes round down, TOSA's must divide exactly: the frontend's rewrite.

Input rows that no window reaches are sliced off (a SLICE before the convolution or
pooling), end padding that no window reaches is taken off; kernels keep their NNEF size,
so the graph does the multiplies the NNEF graph specifies.  The previous lowering appended
zero taps to the kernel instead; :func:`exact_size_helpers.zero_tap_form` rebuilds that
form from the new graph, and on seeded random cases the official TOSA reference model
gives bit-identical results for both forms, in fp32 and after int8 quantization.  The
Khronos NNEF runtime checks the float semantics.
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
from nnef_helpers import khronos_run, random_weights, snr_db, write_model  # noqa: E402

from compiler.frontends.nnef.load import load_nnef_model  # noqa: E402
from compiler.graph.quantize import evaluate
from compiler.graph.quantize import calibrate  # noqa: E402
from tosa_ir import Block, Graph, Operator, Tensor  # noqa: E402
from tosa_ir.errors import Unsupported  # noqa: E402

KINDS = ("conv", "depthwise", "conv_relu_pool", "max_pool", "avg_pool", "box")


def random_case(seed: int) -> tuple[str, str]:
    """A seeded one-operator (or conv -> relu -> 3x3/2 max pool) NNEF graph whose window
    division leaves a remainder along at least one axis; returns ``(kind, text)``."""
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    window = kind in ("max_pool", "avg_pool", "box")
    while True:
        # kind "conv": no end padding, the remainder is input rows
        h, w, k, s, d, p, num, out = draw_window(rng, window, end_padding=kind != "conv")
        if min(num) < 0 or all(n % s[i] == 0 for i, n in enumerate(num)):
            continue
        if kind == "conv_relu_pool" and min(out) < 3:
            continue
        break
    pad2 = f"[({p[0][0]},{p[0][1]}), ({p[1][0]},{p[1][1]})]"
    pad4 = "[(0,0), (0,0), " + pad2[1:]
    lines = [f"input = external(shape = [1, 3, {h}, {w}]);"]
    if kind in ("conv", "conv_relu_pool"):
        lines += [f"k = variable(shape = [4, 3, {k[0]}, {k[1]}], label = 'k');",
                  "b = variable(shape = [1, 4], label = 'b');",
                  f"c = conv(input, k, b, stride = {s}, dilation = {d}, padding = {pad2});"]
        if kind == "conv":
            lines.append("output = copy(c);")
        else:
            lines.append("output = max_pool(relu(c), size = [1, 1, 3, 3], stride = [1, 1, 2, 2],"
                         " border = 'ignore', padding = [(0,0), (0,0), (0,0), (0,0)]);")
    elif kind == "depthwise":
        lines += [f"k = variable(shape = [3, 1, {k[0]}, {k[1]}], label = 'k');",
                  f"output = conv(input, k, groups = 0, stride = {s}, dilation = {d}, "
                  f"padding = {pad2});"]
    else:
        op = kind
        border = ("ignore", "constant")[seed % 2] if kind != "box" else "constant"
        extra = ", normalize = true" if kind == "box" else f", border = '{border}'"
        lines.append(f"output = {op}(input, size = [1, 1, {k[0]}, {k[1]}], "
                     f"stride = [1, 1, {s[0]}, {s[1]}], padding = {pad4}{extra});")
    body = "".join(f"    {line}\n" for line in lines)
    return kind, f"version 1.0;\ngraph G( input ) -> ( output )\n{{\n{body}}}\n"


# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------
def _nnef_kernels(text: str) -> list[tuple[int, int]]:
    import re
    return [(int(a), int(b)) for a, b in
            re.findall(r"variable\(shape = \[\d+, \d+, (\d+), (\d+)\]", text)]


@pytest.mark.parametrize("seed", range(30))
def test_sliced_lowering_is_bit_identical_to_zero_taps(tmp_path, seed):
    kind, text = random_case(seed)
    folder = write_model(tmp_path / "m", text, random_weights(text, seed))
    graph = load_nnef_model(folder).float_graph
    block = graph.main
    rng = np.random.default_rng(1000 + seed)
    shape = block.tensors["input"].shape
    x = {"input": rng.standard_normal(shape).astype(np.float32)}

    # The kernels keep their NNEF size: no multiplies beyond what the NNEF graph asks for.
    for got, want in zip(conv_kernels(block), _nnef_kernels(text)):
        assert got == want

    # Float semantics: the Khronos runtime on the NNEF text.
    (expect,) = khronos_run(folder, [x["input"]])
    assert snr_db(expect, evaluate(graph, x, keep=False)["output"]) > 100

    # The official reference model accepts the graph, and the zero-tap form agrees bitwise,
    # in fp32 and after int8 quantization.
    calib = [{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(2)]
    new_out = assert_zero_tap_form_agrees(graph, x, calib)
    assert snr_db(expect, new_out["output"]) > 100


def test_cases_cover_both_rewrites(tmp_path):
    """The random cases above slice inputs of convolutions and of pools, take padding off
    a convolution feeding a pool, and the zero-tap form differs from the sliced one."""
    seen = {"slice->conv": 0, "slice->pool": 0, "less padding": 0, "rewritten": 0}
    for seed in range(30):
        kind, text = random_case(seed)
        folder = write_model(tmp_path / str(seed), text, random_weights(text, seed))
        graph = load_nnef_model(folder).float_graph
        block = graph.main
        consumers = block.consumers()
        for op in block.operators:
            if op.op == "SLICE":
                user = consumers[op.outputs[0]][0].op
                seen["slice->conv" if user in CONVS else "slice->pool"] += 1
        nnef_pads = [int(v) for v in text.split("padding = [(")[1].split(")]")[0]
                     .replace("(", "").replace(")", "").split(",")]
        for op in block.operators:
            if kind == "conv_relu_pool" and op.op == "CONV2D":
                seen["less padding"] += op.attrs["pad"] != nnef_pads
        old = [op.op for op in zero_tap_form(graph).main.operators]
        seen["rewritten"] += old.count("SLICE") < [op.op for op in block.operators].count("SLICE")
    assert min(seen.values()) >= 2, seen


def test_alexnet_conv1_keeps_its_kernel(tmp_path):
    """AlexNet's conv1 (224x224, 11x11/4) and pool1: 67.7 M MACs at full width, not 138 M."""
    text = """version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [1, 3, 224, 224]);
    k = variable(shape = [2, 3, 11, 11], label = 'k');
    c = conv(input, k, stride = [4, 4], padding = [(0,0), (0,0)]);
    output = max_pool(relu(c), size = [1, 1, 3, 3], stride = [1, 1, 2, 2],
                      border = 'ignore', padding = [(0,0), (0,0), (0,0), (0,0)]);
}
"""
    folder = write_model(tmp_path / "m", text, random_weights(text))
    block = load_nnef_model(folder).float_graph.main
    conv = next(op for op in block.operators if op.op == "CONV2D")
    assert block.tensors[conv.inputs[0]].shape == (1, 223, 223, 3)
    assert block.tensors[conv.inputs[1]].shape == (2, 11, 11, 3)
    assert block.tensors[conv.outputs[0]].shape == (1, 54, 54, 2)
    assert 54 * 54 * 64 * 11 * 11 * 3 == 67_744_512     # at AlexNet's 64 channels
    pool = next(op for op in block.operators if op.op == "MAX_POOL2D")
    assert block.tensors[pool.inputs[0]].shape == (1, 53, 53, 2)


def test_window_entirely_in_padding_is_unsupported(tmp_path):
    text = """version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [1, 1, 2, 2]);
    k = variable(shape = [1, 1, 1, 1], label = 'k');
    output = conv(input, k, stride = [8, 8], padding = [(6,0), (0,0)]);
}
"""
    folder = write_model(tmp_path / "m", text, random_weights(text))
    with pytest.raises(Unsupported, match="no window reaches the input"):
        load_nnef_model(folder)


def test_calibration_of_a_sliced_tensor_ignores_the_dropped_rows():
    """A tensor read only by SLICEs is calibrated on what they keep (the quantizer)."""
    block = Block("main")
    block.add_tensor(Tensor("x", (1, 3, 3, 1), "fp32"))
    block.add_tensor(Tensor("y", (1, 2, 2, 1), "fp32"))
    block.add_tensor(Tensor("z", (1, 2, 2, 1), "fp32"))
    block.add_tensor(Tensor("start", (4,), "shape", np.zeros(4, np.int64)))
    block.add_tensor(Tensor("size", (4,), "shape", np.array([1, 2, 2, 1], np.int64)))
    block.operators = [Operator("SLICE", ["x", "start", "size"], ["y"]),
                       Operator("CLAMP", ["y"], ["z"], {"min_val": -9.0, "max_val": 9.0,
                                                        "nan_mode": "PROPAGATE"})]
    block.inputs, block.outputs = ["x"], ["z"]
    graph = Graph.single_block(block, version=(1, 0, 0, False), profiles=["PRO-FP"])
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1) - 2.0   # -2 .. 6
    ranges = calibrate(graph, [{"x": x}])
    assert ranges["y"] == (-2.0, 2.0)          # rows/columns 0..1 of x
    assert ranges["x"] == ranges["y"]          # the last row/column (up to 6) never read


def test_calibration_through_a_chain_of_slices():
    block = Block("main")
    for name, shape in (("x", (1, 4, 4, 1)), ("y", (1, 3, 3, 1)), ("z", (1, 2, 2, 1))):
        block.add_tensor(Tensor(name, shape, "fp32"))
    block.add_tensor(Tensor("start", (4,), "shape", np.zeros(4, np.int64)))
    block.add_tensor(Tensor("s3", (4,), "shape", np.array([1, 3, 3, 1], np.int64)))
    block.add_tensor(Tensor("s2", (4,), "shape", np.array([1, 2, 2, 1], np.int64)))
    block.operators = [Operator("SLICE", ["x", "start", "s3"], ["y"]),
                       Operator("SLICE", ["y", "start", "s2"], ["z"])]
    block.inputs, block.outputs = ["x"], ["z"]
    graph = Graph.single_block(block, version=(1, 0, 0, False), profiles=["PRO-FP"])
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)     # z keeps 0, 1, 4, 5
    ranges = calibrate(graph, [{"x": x}])
    assert ranges["x"] == ranges["y"] == ranges["z"] == (0.0, 5.0)
