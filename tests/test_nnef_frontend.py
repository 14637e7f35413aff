"""NNEF frontend: syntax coverage and float semantics.

Each graph is converted to a float TOSA graph and evaluated with the quantizer's float
evaluator; the expected values come from the Khronos NNEF runtime (``nnef.Session``), which
executes the NNEF text itself.  A few converted graphs also run on the official TOSA
reference model in fp32 (the oracle for TOSA semantics of what we emit).
"""
from __future__ import annotations

import os
import sys
import tarfile

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from nnef_helpers import (  # noqa: E402
    TINY_CNN, khronos_run, official_run, random_weights, snr_db, write_model,
)

from compiler.frontends.nnef.load import load_nnef, load_nnef_model  # noqa: E402
from compiler.graph.quantize import evaluate  # noqa: E402

HEADER = ("version 1.0;\n"
          "extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n")


def _inputs(graph, seed=0):
    rng = np.random.default_rng(seed)
    block = graph.main
    return {n: rng.standard_normal(block.tensors[n].shape).astype(np.float32)
            for n in block.inputs}


def check_against_khronos(tmp_path, text, min_snr=100.0, seed=0, weights=None):
    folder = write_model(tmp_path / "m", text, weights or random_weights(text, seed))
    model = load_nnef_model(folder)
    graph = model.float_graph
    inputs = _inputs(graph, seed + 1)
    ours = evaluate(graph, inputs, keep=False)
    ref = khronos_run(folder, [inputs[n] for n in graph.main.inputs])
    assert len(ref) == len(graph.main.outputs)
    for name, expect in zip(graph.main.outputs, ref):
        got = ours[name]
        assert got.shape == expect.shape, name
        assert snr_db(expect, got) > min_snr, (name, snr_db(expect, got))
    return model, inputs, ours


def test_flat_cnn(tmp_path):
    model, _, _ = check_against_khronos(tmp_path, TINY_CNN)
    ops = [op.op for op in model.float_graph.main.operators]
    assert ops.count("CONV2D") == 2 and "MAX_POOL2D" in ops and "TRANSPOSE" in ops
    # NNEF layout kept at the boundary: NCHW in, NCHW out.
    block = model.float_graph.main
    assert block.tensors["input"].shape == (1, 3, 16, 16)
    assert block.tensors["output"].shape == (1, 10, 1, 1)


COMPOSITIONAL = HEADER + """
fragment conv_relu( x: tensor<scalar>, w: tensor<scalar>, b: tensor<scalar>, pad: integer = 1 )
-> ( y: tensor<scalar> )
{
    y = relu(conv(x, w, b, padding = [(pad, pad), (pad, pad)]));
}

fragment branches( x: tensor<scalar>, ws: tensor<scalar>[] ) -> ( y: tensor<scalar> )
{
    ys = [for i in range_of(ws) yield conv(x, ws[i], padding = [(0,0), (0,0)])];
    y = concat(ys, axis = 1);
}

fragment scaled_sum( xs: tensor<scalar>[], scale: scalar ) -> ( y: tensor<scalar> )
{
    y = scale * add_n(xs) if length_of(xs) > 1 else xs[0];
}

fragment gen<? = scalar>( x: tensor<?>, n: integer ) -> ( y: tensor<?> )
{
    y = [for i in range_of([0] * n) if i == n - 1 yield copy<?>(x)][0];
}

graph G( input ) -> ( output )
{
    input = external(shape = [1, 4, 12, 12]);
    w1 = variable(shape = [6, 4, 3, 3], label = 'w1');
    b1 = variable(shape = [1, 6], label = 'b1');
    wa = variable(shape = [3, 6, 1, 1], label = 'wa');
    wb = variable(shape = [5, 6, 1, 1], label = 'wb');
    fc = variable(shape = [7, 1152], label = 'fc');
    fb = variable(shape = [1, 7], label = 'fb');
    h = conv_relu(input, w1, b1);
    c = branches(gen(h, n = 3), [wa, wb]);
    s = scaled_sum([c, c, c], scale = 0.5);
    t = transpose(s, axes = [0, 2, 3, 1]);
    r = reshape(t, shape = [1, -1]);
    output = linear(r, fc, fb);
}
"""


def test_fragments_comprehensions_recursion_generics(tmp_path):
    """Fragments with defaults, tensor arrays, comprehensions with a filter, compile-time
    if/else, recursion (stdlib add_n), generic fragments and operator expressions."""
    model, _, _ = check_against_khronos(tmp_path, COMPOSITIONAL)
    ops = [op.op for op in model.float_graph.main.operators]
    assert ops.count("CONV2D") == 4 and "CONCAT" in ops
    assert "TRANSPOSE" in ops      # NCHW input; the NNEF transpose itself is bookkeeping


POOLS = """version 1.0;
graph G( input ) -> ( a, b, c, d, e, f, g, h )
{
    input = external(shape = [1, 3, 11, 10]);
    a = avg_pool(input, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'constant',
                 padding = [(0,0), (0,0), (1,1), (1,1)]);
    b = avg_pool(input, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'ignore',
                 padding = [(0,0), (0,0), (1,1), (1,1)]);
    c = max_pool(input, size = [1, 1, 2, 3], stride = [1, 1, 2, 2], border = 'constant',
                 padding = [(0,0), (0,0), (0,1), (1,1)]);
    d = box(input, size = [1, 1, 2, 2], stride = [1, 1, 1, 1],
            padding = [(0,0), (0,0), (0,1), (0,1)]);
    e = mean_reduce(input, axes = [2, 3]);
    f = max_reduce(input, axes = [2, 3]);
    g = sum_reduce(sigmoid(input), axes = [1], normalize = true);
    h = max_pool(tanh(input), size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'ignore',
                 padding = []);
}
"""


def test_pooling_and_reductions(tmp_path):
    check_against_khronos(tmp_path, POOLS)


CONVS = """version 1.0;
graph G( input ) -> ( dw, grouped, sep, strided, dilated, up, up_shaped )
{
    input = external(shape = [1, 4, 9, 9]);
    k_dw = variable(shape = [8, 1, 3, 3], label = 'k_dw');
    b_dw = variable(shape = [1, 8], label = 'b_dw');
    dw = conv(input, k_dw, b_dw, groups = 0, padding = [(1,1), (1,1)]);
    k_g = variable(shape = [6, 2, 3, 3], label = 'k_g');
    grouped = conv(input, k_g, groups = 2, padding = [(1,0), (0,1)]);
    k_p = variable(shape = [4, 1, 3, 3], label = 'k_p');
    k_q = variable(shape = [5, 4, 1, 1], label = 'k_q');
    sep = separable_conv(input, k_p, k_q, padding = [(1,1), (1,1)]);
    k_s = variable(shape = [3, 4, 3, 3], label = 'k_s');
    strided = conv(input, k_s, stride = [2, 2], padding = []);
    dilated = conv(input, k_s, dilation = [2, 2], padding = [(2,2), (2,2)]);
    k_t = variable(shape = [4, 3, 4, 4], label = 'k_t');
    b_t = variable(shape = [1, 3], label = 'b_t');
    up = deconv(input, k_t, b_t, stride = [2, 2], padding = [(1,1), (1,1)]);
    up_shaped = deconv(input, k_t, stride = [2, 2], padding = [(1,1), (1,1)],
                       output_shape = [1, 3, 19, 19]);
}
"""


def test_convolution_variants(tmp_path):
    model, inputs, ours = check_against_khronos(tmp_path, CONVS)
    ops = [op.op for op in model.float_graph.main.operators]
    assert "DEPTHWISE_CONV2D" in ops and "TRANSPOSE_CONV2D" in ops
    # The same float graph on the official TOSA reference model (fp32).
    status, ref = official_run(model.float_graph, inputs)
    assert status == "VALID"
    for name, value in ref.items():
        assert snr_db(value, ours[name]) > 100, name


SHAPES = HEADER + """
graph G( x, y ) -> ( mm, padded, parts, joined, squeezed, normed, clamped, leaky )
{
    x = external(shape = [1, 4, 6, 5]);
    y = external(shape = [2, 3, 5]);
    z = variable(shape = [2, 5, 4], label = 'z');
    mm = matmul(y, z, transposeA = false, transposeB = false);
    mm2 = matmul(y, y, transposeB = true);
    padded = pad(x, padding = [(0,0), (1,0), (2,1), (0,3)], value = 0.5);
    [a, b] = split(x, axis = 1, ratios = [1, 3]);
    parts = slice(b, axes = [2, 3], begin = [1, 0], end = [-1, 4]);
    c = constant(shape = [1, 2, 6, 5], value = [0.25]);
    joined = concat([a, c, b], axis = 1);
    s = unsqueeze(mm2, axes = [0]);
    squeezed = squeeze(s, axes = [0]);
    mean = variable(shape = [1, 4], label = 'mean');
    var = variable(shape = [1, 4], label = 'var');
    off = variable(shape = [1, 4], label = 'off');
    sc = variable(shape = [1, 4], label = 'sc');
    normed = batch_normalization(x, mean, var, off, sc, epsilon = 0.001);
    clamped = clamp(x, 0.0, 6.0) + min(max(x, -1.0), 1.0) * 2.0 - x / 4.0;
    leaky = leaky_relu(x, alpha = 0.1);
}
"""


def test_shape_ops_matmul_and_arithmetic(tmp_path):
    weights = random_weights(SHAPES, 2)
    weights["var"] = np.abs(weights["var"]) + 0.5
    check_against_khronos(tmp_path, SHAPES, weights=weights)


def test_batch_norm_after_conv_folds_into_the_convolution(tmp_path):
    text = """version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [1, 3, 8, 8]);
    k = variable(shape = [5, 3, 3, 3], label = 'k');
    mean = variable(shape = [1, 5], label = 'mean');
    var = variable(shape = [1, 5], label = 'var');
    off = variable(shape = [1, 5], label = 'off');
    sc = variable(shape = [1, 5], label = 'sc');
    c = conv(input, k, padding = [(1,1), (1,1)]);
    output = relu(batch_normalization(c, mean, var, off, sc, epsilon = 0.001));
}
"""
    weights = random_weights(text, 5)
    weights["var"] = np.abs(weights["var"]) + 0.5
    model, inputs, _ = check_against_khronos(tmp_path, text, weights=weights)
    from compiler.graph.quantize.prepare import copy_graph, fold_affine, strip_const_ops
    g = copy_graph(model.float_graph)
    strip_const_ops(g.main)
    notes = fold_affine(g)
    assert len(notes) == 4     # subtract mean, scale, divide by sqrt(var + eps), add offset
    assert [op.op for op in g.main.operators] == ["TRANSPOSE", "CONV2D", "CLAMP", "TRANSPOSE"]
    before = evaluate(model.float_graph, inputs, keep=False)["output"]
    after = evaluate(g, inputs, keep=False)["output"]
    assert snr_db(before, after) > 100


def test_alexnet_exactness_rewrites(tmp_path):
    """Rounding-down output sizes become exact TOSA sizes without extra multiplies: input
    rows no window reaches are sliced off (AlexNet conv1 and pool1), end padding no window
    reaches is taken off (AlexNet conv2/conv5 before their pools)."""
    text = """version 1.0;
graph G( input ) -> ( output, padded )
{
    input = external(shape = [1, 3, 48, 48]);
    k = variable(shape = [4, 3, 11, 11], label = 'k');
    c = conv(input, k, stride = [4, 4], padding = [(0,0), (0,0)]);
    r = relu(c);
    output = max_pool(r, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'ignore',
                      padding = [(0,0), (0,0), (0,0), (0,0)]);
    k2 = variable(shape = [5, 4, 3, 3], label = 'k2');
    c2 = conv(output, k2, padding = [(1,1), (1,1)]);
    padded = max_pool(relu(c2), size = [1, 1, 3, 3], stride = [1, 1, 2, 2],
                      border = 'ignore', padding = [(0,0), (0,0), (0,0), (0,0)]);
}
"""
    model, inputs, ours = check_against_khronos(tmp_path, text)
    block = model.float_graph.main
    ops = [op for op in block.operators if op.op not in ("CONST", "CONST_SHAPE")]
    assert [op.op for op in ops][:6] == ["TRANSPOSE", "SLICE", "CONV2D", "CLAMP", "SLICE",
                                         "MAX_POOL2D"]
    first, conv, _, second, _, conv2 = ops[1:7]
    # (48 - 11) / 4 leaves 1: the last input row/column goes, the kernel stays 11x11.
    assert block.tensors[first.outputs[0]].shape == (1, 47, 47, 3)
    assert block.tensors[conv.inputs[1]].shape == (4, 11, 11, 3)
    assert block.tensors[conv.outputs[0]].shape == (1, 10, 10, 4)
    # (10 - 3) / 2 leaves 1 and conv c has no padding to give: pool's input is sliced.
    assert block.tensors[second.outputs[0]].shape == (1, 9, 9, 4)
    # c2 (4x4 out, 3x3 pad 1) before a 3x3/2 pool: one row/column less bottom/right pad.
    assert conv2.op == "CONV2D" and conv2.attrs["pad"] == [1, 0, 1, 0]
    assert block.tensors[conv2.outputs[0]].shape == (1, 3, 3, 5)
    status, ref = official_run(model.float_graph, inputs)
    assert status == "VALID"
    for name, value in ref.items():
        assert snr_db(value, ours[name]) > 100, name


@pytest.mark.parametrize("kind", ["file", "tgz", "tar_with_folder"])
def test_containers(tmp_path, kind):
    folder = write_model(tmp_path / "model", TINY_CNN, random_weights(TINY_CNN))
    if kind == "file":
        path = folder / "graph.nnef"
    else:
        path = tmp_path / ("m.tgz" if kind == "tgz" else "m.tar")
        with tarfile.open(path, "w:gz" if kind == "tgz" else "w") as tar:
            for f in sorted(folder.rglob("*")):
                arc = f.relative_to(folder)
                tar.add(f, arcname=str(arc if kind == "tgz" else "top" / arc),
                        recursive=False)
    graph = load_nnef(path)
    ref = load_nnef(folder)
    x = _inputs(ref)
    np.testing.assert_array_equal(evaluate(graph, x, keep=False)["output"],
                                  evaluate(ref, x, keep=False)["output"])


def test_looks_like_nnef(tmp_path):
    from compiler.frontends.nnef.load import looks_like_nnef
    folder = write_model(tmp_path / "model", TINY_CNN, random_weights(TINY_CNN))
    path = tmp_path / "m.tgz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder / "graph.nnef", arcname="graph.nnef")
    other = tmp_path / "x.tgz"
    with tarfile.open(other, "w:gz") as tar:
        tar.add(folder / "c1" / "k.dat", arcname="k.dat")
    assert looks_like_nnef(folder) and looks_like_nnef(folder / "graph.nnef")
    assert looks_like_nnef(path) and not looks_like_nnef(other)
    assert not looks_like_nnef(tmp_path) and not looks_like_nnef(folder / "c1" / "k.dat")


ONE_CHANNEL = """version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [1, 1, 6, 6]);
    k = variable(shape = [4, 1, 3, 3], label = 'k');
    c = conv(input, k, 0.0, padding = [(1,1),(1,1)]);
    p = avg_pool(c, size = [1, 1, 6, 6], stride = [1, 1, 1, 1], border = 'constant',
                 padding = [(0,0),(0,0),(0,0),(0,0)]);
    output = reshape(p, shape = [1, 4]);
}
"""


def test_one_channel_nchw_input_is_transposed_not_regrouped(tmp_path):
    # NCHW -> NHWC of a one-channel input only moves a size-1 axis, but as a RESHAPE it
    # would regroup the innermost axis (6 -> 1), which the NPU compiler cannot move: it
    # stays a TRANSPOSE.  The flatten of the [1, 4, 1, 1] pool result stays a RESHAPE.
    folder = write_model(tmp_path / "m", ONE_CHANNEL, random_weights(ONE_CHANNEL, seed=3))
    graph = load_nnef(folder)
    block = graph.main
    first = block.consumers()[block.inputs[0]]
    assert [op.op for op in first] == ["TRANSPOSE"]
    assert first[0].attrs["perms"] == [0, 2, 3, 1]
    kinds = [op.op for op in block.operators]
    assert kinds.count("TRANSPOSE") == 1 and "RESHAPE" in kinds
    x = np.random.default_rng(4).standard_normal((1, 1, 6, 6)).astype(np.float32)
    (want,) = khronos_run(folder, [x])
    got = evaluate(graph, {block.inputs[0]: x}, keep=False)[block.outputs[0]]
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-5, atol=1e-5)
