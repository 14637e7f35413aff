"""Reference interpreter vs the official TOSA reference model: tensor operators.

Each case builds a TOSA 1.0 graph with the official serializer, runs the official
reference model on it, reads the same bytes with tosa_ir.tosa_fb.read_tosa and runs our
interpreter on it (and on its draft-form rewrite).  Status and outputs must agree.
"""
from __future__ import annotations

import zlib
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from oracle import GraphBuilder, check_against_reference, load_graph, run_ours  # noqa: E402

from tosa_ir import Block, Graph, Operator, Tensor, numpy_dtype  # noqa: E402

BOTH = ("1.0", "draft")
# Spec number formats: int4_t is -7..+7 (symmetric), the others their full range.
VALUE_RANGE = {"int4": (-7, 7), "int8": (-128, 127), "int16": (-32768, 32767),
               "int32": (-(1 << 31), (1 << 31) - 1), "int48": (-(1 << 47), (1 << 47) - 1)}


def rand(rng, shape, dtype, lo=None, hi=None):
    tlo, thi = VALUE_RANGE[dtype]
    return rng.integers(tlo if lo is None else lo, (thi if hi is None else hi) + 1,
                        size=shape).astype(np.int64)


def fit_pad(size, k, dil, stride, pad_a, pad_b):
    """Grow pad_b until (size - 1 + pads - (k - 1) * dil) is a non-negative multiple of stride."""
    while True:
        num = size - 1 + pad_a + pad_b - (k - 1) * dil
        if num >= 0 and num % stride == 0:
            return pad_b, num // stride + 1
        pad_b += 1


# ---------------------------------------------------------------------------------------
# CONV2D / CONV3D / DEPTHWISE_CONV2D / TRANSPOSE_CONV2D
def conv_graph(op, x_shape, in_t, w, w_t, bias, out_t, out_shape, izp=0, wzp=0, **attrs):
    b = GraphBuilder()
    x = b.input(x_shape, in_t)
    ins = [x, b.const(w, w_t), b.const(bias, out_t), b.const([izp], in_t), b.const([wzp], w_t)]
    y = b.output(out_shape, out_t)
    b.op(op, ins, [y], acc_type=out_t, **attrs)
    return b


MODES = [("int8", "int8", "int32"), ("int8", "int4", "int32"), ("int16", "int8", "int48")]


def random_conv2d(rng, mode, small=False):
    in_t, w_t, out_t = mode
    n = int(rng.integers(1, 3))
    ih, iw = (int(v) for v in rng.integers(1, 9 if small else 14, size=2))
    ic, oc = int(rng.integers(1, 6)), int(rng.integers(1, 7))
    kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
    dy, dx = (int(v) for v in rng.integers(1, 3, size=2))
    pt, pl = (int(v) for v in rng.integers(0, 3, size=2))
    pb, oh = fit_pad(ih, kh, dy, sy, pt, int(rng.integers(0, 3)))
    pr, ow = fit_pad(iw, kw, dx, sx, pl, int(rng.integers(0, 3)))
    izp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
    wzp = int(rng.integers(-128, 128)) if w_t == "int8" else 0
    w = rand(rng, (oc, kh, kw, ic), w_t)
    bias = rand(rng, (oc if rng.random() < 0.8 else 1,), out_t, -(1 << 20), 1 << 20)
    b = conv_graph("CONV2D", (n, ih, iw, ic), in_t, w, w_t, bias, out_t, (n, oh, ow, oc),
                   izp, wzp, pad=[pt, pb, pl, pr], stride=[sy, sx], dilation=[dy, dx])
    return b, {b.inputs[0]: rand(rng, (n, ih, iw, ic), in_t)}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "x".join(m))
def test_conv2d_random(mode):
    rng = np.random.default_rng(zlib.crc32("x".join(mode).encode()))
    for i in range(25 if mode[0] == "int8" else 5):
        b, inputs = random_conv2d(rng, mode, small=mode[0] == "int16")
        check_against_reference(b, inputs, expect="VALID", forms=BOTH, label=f"case {i}")


def test_conv2d_extreme_values():
    """Largest products: input -128 with zp 127, weights 127 with zp -128, no wrap."""
    w = np.full((3, 3, 3, 8), 127)
    b = conv_graph("CONV2D", (1, 5, 5, 8), "int8", w, "int8", [7, -7, 0], "int32",
                   (1, 5, 5, 3), izp=127, wzp=-128, pad=[1, 1, 1, 1], stride=[1, 1],
                   dilation=[1, 1])
    x = np.full((1, 5, 5, 8), -128)
    check_against_reference(b, {b.inputs[0]: x}, expect="VALID", forms=BOTH)


def test_conv2d_int16_extremes():
    w = np.array([[[[-128, 127]]]] * 2)
    b = conv_graph("CONV2D", (1, 2, 2, 2), "int16", w, "int8", [1 << 40], "int48",
                   (1, 2, 2, 2), pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])
    x = np.array([[[[-32768, 32767], [-32768, -32768]], [[32767, 32767], [0, 1]]]])
    check_against_reference(b, {b.inputs[0]: x}, expect="VALID", forms=BOTH)


def random_conv3d(rng, mode):
    in_t, w_t, out_t = mode
    n, ic, oc = 1, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    idd, ih, iw = (int(v) for v in rng.integers(1, 6, size=3))
    k = [int(v) for v in rng.integers(1, 3, size=3)]
    s = [int(v) for v in rng.integers(1, 3, size=3)]
    d = [int(v) for v in rng.integers(1, 3, size=3)]
    pad, out = [], []
    for size, kk, ss, dd in zip((idd, ih, iw), k, s, d):
        pa = int(rng.integers(0, 2))
        pb, o = fit_pad(size, kk, dd, ss, pa, int(rng.integers(0, 2)))
        pad += [pa, pb]
        out.append(o)
    izp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
    wzp = int(rng.integers(-128, 128)) if w_t == "int8" else 0
    w = rand(rng, (oc, *k, ic), w_t)
    bias = rand(rng, (oc,), out_t, -999, 999)
    b = conv_graph("CONV3D", (n, idd, ih, iw, ic), in_t, w, w_t, bias, out_t, (n, *out, oc),
                   izp, wzp, pad=pad, stride=s, dilation=d)
    return b, {b.inputs[0]: rand(rng, (n, idd, ih, iw, ic), in_t)}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "x".join(m))
def test_conv3d_random(mode):
    rng = np.random.default_rng(11 + len(mode[1]))
    for i in range(5 if mode[0] == "int8" else 2):
        b, inputs = random_conv3d(rng, mode)
        check_against_reference(b, inputs, expect="VALID", forms=BOTH, label=f"case {i}")


def random_depthwise(rng, mode):
    in_t, w_t, out_t = mode
    n, c, m = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    ih, iw = (int(v) for v in rng.integers(1, 10, size=2))
    kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 3, size=2))
    dy, dx = (int(v) for v in rng.integers(1, 3, size=2))
    pt, pl = (int(v) for v in rng.integers(0, 3, size=2))
    pb, oh = fit_pad(ih, kh, dy, sy, pt, int(rng.integers(0, 3)))
    pr, ow = fit_pad(iw, kw, dx, sx, pl, int(rng.integers(0, 3)))
    izp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
    wzp = int(rng.integers(-128, 128)) if w_t == "int8" else 0
    w = rand(rng, (kh, kw, c, m), w_t)
    bias = rand(rng, (c * m if rng.random() < 0.8 else 1,), out_t, -(1 << 16), 1 << 16)
    b = conv_graph("DEPTHWISE_CONV2D", (n, ih, iw, c), in_t, w, w_t, bias, out_t,
                   (n, oh, ow, c * m), izp, wzp, pad=[pt, pb, pl, pr], stride=[sy, sx],
                   dilation=[dy, dx])
    return b, {b.inputs[0]: rand(rng, (n, ih, iw, c), in_t)}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "x".join(m))
def test_depthwise_conv2d_random(mode):
    rng = np.random.default_rng(21 + len(mode[1]))
    for i in range(15 if mode[0] == "int8" else 3):
        b, inputs = random_depthwise(rng, mode)
        check_against_reference(b, inputs, expect="VALID", forms=BOTH, label=f"case {i}")


def random_transpose(rng, mode):
    in_t, w_t, out_t = mode
    n, ic, oc = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
    ih, iw = (int(v) for v in rng.integers(1, 7, size=2))
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
    # out_pad may be negative (cropping) down to -(K - 1).
    out_pad = [int(rng.integers(-(kh - 1), 3)), int(rng.integers(-(kh - 1), 3)),
               int(rng.integers(-(kw - 1), 3)), int(rng.integers(-(kw - 1), 3))]
    oh = (ih - 1) * sy + out_pad[0] + out_pad[1] + kh
    ow = (iw - 1) * sx + out_pad[2] + out_pad[3] + kw
    if oh < 1 or ow < 1:
        out_pad = [0, 0, 0, 0]
        oh, ow = (ih - 1) * sy + kh, (iw - 1) * sx + kw
    izp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
    wzp = int(rng.integers(-128, 128)) if w_t == "int8" else 0
    w = rand(rng, (oc, kh, kw, ic), w_t)
    bias = rand(rng, (oc if rng.random() < 0.8 else 1,), out_t, -(1 << 16), 1 << 16)
    b = conv_graph("TRANSPOSE_CONV2D", (n, ih, iw, ic), in_t, w, w_t, bias, out_t,
                   (n, oh, ow, oc), izp, wzp, out_pad=out_pad, stride=[sy, sx])
    return b, {b.inputs[0]: rand(rng, (n, ih, iw, ic), in_t)}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "x".join(m))
def test_transpose_conv2d_random(mode):
    rng = np.random.default_rng(31 + len(mode[1]))
    for i in range(20 if mode[0] == "int8" else 3):
        b, inputs = random_transpose(rng, mode)
        check_against_reference(b, inputs, expect="VALID", forms=BOTH, label=f"case {i}")


# ---------------------------------------------------------------------------------------
# MATMUL / FULLY_CONNECTED
def matmul_graph(a_shape, b_shape, in_t, out_t, azp=0, bzp=0, b_const=None):
    b = GraphBuilder()
    a = b.input(a_shape, in_t)
    bb = b.input(b_shape, in_t) if b_const is None else b.const(b_const, in_t)
    y = b.output((a_shape[0], a_shape[1], b_shape[2]), out_t)
    b.op("MATMUL", [a, bb, b.const([azp], in_t), b.const([bzp], in_t)], [y])
    return b


@pytest.mark.parametrize("in_t,out_t", [("int8", "int32"), ("int16", "int48")])
def test_matmul_random(in_t, out_t):
    rng = np.random.default_rng(41 if in_t == "int8" else 42)
    for i in range(10 if in_t == "int8" else 3):
        n, h, c, w = (int(v) for v in rng.integers(1, 9, size=4))
        azp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
        bzp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
        b = matmul_graph((n, h, c), (n, c, w), in_t, out_t, azp, bzp)
        inputs = [rand(rng, (n, h, c), in_t), rand(rng, (n, c, w), in_t)]
        check_against_reference(b, inputs, expect="VALID", forms=BOTH, label=f"case {i}")


def test_matmul_large_exact():
    """Sums beyond 2**24 (float32-exact range) still come out exact."""
    rng = np.random.default_rng(43)
    b = matmul_graph((1, 16, 3000), (1, 3000, 8), "int8", "int32", -128, 127)
    inputs = [rand(rng, (1, 16, 3000), "int8", 100, 127),
              rand(rng, (1, 3000, 8), "int8", -128, -100)]
    check_against_reference(b, inputs, expect="VALID")


def test_fully_connected_draft_matches_conv2d():
    """Draft FULLY_CONNECTED == TOSA 1.0 CONV2D on [N, 1, 1, IC] (the 1.0 lowering)."""
    rng = np.random.default_rng(44)
    for in_t, w_t, out_t in MODES:
        n, ic, oc = 3, 7, 5
        izp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
        wzp = int(rng.integers(-128, 128)) if w_t == "int8" else 0
        w = rand(rng, (oc, ic), w_t)
        bias = rand(rng, (oc,), out_t, -5000, 5000)
        x = rand(rng, (n, ic), in_t)
        b = conv_graph("CONV2D", (n, 1, 1, ic), in_t, w.reshape(oc, 1, 1, ic), w_t, bias,
                       out_t, (n, 1, 1, oc), izp, wzp, pad=[0, 0, 0, 0], stride=[1, 1],
                       dilation=[1, 1])
        ref = check_against_reference(b, {b.inputs[0]: x.reshape(n, 1, 1, ic)}, expect="VALID")
        blk = Block("main", inputs=["x"], outputs=["y"])
        blk.add_tensor(Tensor("x", (n, ic), in_t))
        blk.add_tensor(Tensor("w", (oc, ic), w_t, w.astype(np.int8)))
        blk.add_tensor(Tensor("b", (oc,), out_t, bias.astype(numpy_dtype(out_t))))
        blk.add_tensor(Tensor("y", (n, oc), out_t))
        blk.operators.append(Operator("FULLY_CONNECTED", ["x", "w", "b"], ["y"],
                                      {"input_zp": izp, "weight_zp": wzp}))
        graph = Graph.single_block(blk, version=(0, 80, 0, True))
        status, ours = run_ours(graph, {"x": x.astype(np.int8 if in_t == "int8" else np.int16)})
        assert status == "VALID", ours
        np.testing.assert_array_equal(ours["y"], ref.outputs[b.outputs[0]].reshape(n, oc))


# ---------------------------------------------------------------------------------------
# Pooling and ARGMAX
def pool_graph(op, x_shape, dtype, kernel, stride, pad, out_shape, izp=0, ozp=0):
    b = GraphBuilder()
    x = b.input(x_shape, dtype)
    y = b.output(out_shape, dtype)
    if op == "AVG_POOL2D":
        b.op(op, [x, b.const([izp], dtype), b.const([ozp], dtype)], [y], kernel=kernel,
             stride=stride, pad=pad, acc_type="int32")
    else:
        b.op(op, [x], [y], kernel=kernel, stride=stride, pad=pad)
    return b


def random_pool(rng, op, dtype):
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    ih, iw = (int(v) for v in rng.integers(1, 12, size=2))
    ky, kx = (int(v) for v in rng.integers(1, 5, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
    pad, out = [], []
    for size, k, s in ((ih, ky, sy), (iw, kx, sx)):
        pa = int(rng.integers(0, k))
        pb = int(rng.integers(0, k))
        # Padding must stay below the kernel size: shrink pb to make the size divisible.
        for pb_try in list(range(pb, k)) + list(range(0, pb)):
            num = size + pa + pb_try - k
            if num >= 0 and num % s == 0:
                pad += [pa, pb_try]
                out.append(num // s + 1)
                break
        else:
            return None
    izp = int(rng.integers(-128, 128)) if dtype == "int8" and op == "AVG_POOL2D" else 0
    ozp = int(rng.integers(-128, 128)) if dtype == "int8" and op == "AVG_POOL2D" else 0
    b = pool_graph(op, (n, ih, iw, c), dtype, [ky, kx], [sy, sx], pad, (n, *out, c), izp, ozp)
    return b, {b.inputs[0]: rand(rng, (n, ih, iw, c), dtype)}


@pytest.mark.parametrize("op", ["AVG_POOL2D", "MAX_POOL2D"])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_pool_random(op, dtype):
    rng = np.random.default_rng(51 + (op == "AVG_POOL2D") + 2 * (dtype == "int16"))
    done = 0
    while done < 12:
        case = random_pool(rng, op, dtype)
        if case is None:
            continue
        check_against_reference(*case, expect="VALID", forms=BOTH, label=f"case {done}")
        done += 1


def test_avg_pool_global_and_rounding():
    """Global average over 13x13 (divisor 169) and padded corners (divisors 1..9)."""
    rng = np.random.default_rng(55)
    b = pool_graph("AVG_POOL2D", (1, 13, 13, 4), "int8", [13, 13], [1, 1], [0, 0, 0, 0],
                   (1, 1, 1, 4), izp=-128, ozp=127)
    check_against_reference(b, [rand(rng, (1, 13, 13, 4), "int8")], expect="VALID", forms=BOTH)
    b = pool_graph("AVG_POOL2D", (1, 4, 4, 2), "int16", [3, 3], [1, 1], [2, 2, 2, 2],
                   (1, 6, 6, 2))
    check_against_reference(b, [rand(rng, (1, 4, 4, 2), "int16")], expect="VALID", forms=BOTH)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_argmax_random(dtype):
    rng = np.random.default_rng(61)
    for i in range(8):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 6, size=rank))
        axis = int(rng.integers(0, rank))
        b = GraphBuilder()
        x = b.input(shape, dtype)
        y = b.output(shape[:axis] + shape[axis + 1:], "int32")
        b.op("ARGMAX", [x], [y], axis=axis)
        # A narrow value range gives ties: the first maximum wins.
        lo, hi = (-3, 2) if i % 2 else VALUE_RANGE[dtype]
        check_against_reference(b, [rand(rng, shape, dtype, lo, hi)], expect="VALID",
                                label=f"case {i}")


# ---------------------------------------------------------------------------------------
# ERROR_IF: the oracle and we must both reject the graph.
def _conv_error_cases():
    w8 = np.ones((2, 2, 2, 3), dtype=np.int64)
    base = dict(op="CONV2D", x_shape=(1, 4, 4, 3), in_t="int8", w=w8, w_t="int8", bias=[0, 0],
                out_t="int32", out_shape=(1, 3, 3, 2), pad=[0, 0, 0, 0], stride=[1, 1],
                dilation=[1, 1])
    yield "ok", "VALID", base
    yield "stride<1", "ERROR", {**base, "stride": [0, 1]}
    yield "dilation<1", "ERROR", {**base, "dilation": [1, 0]}
    yield "pad<0", "ERROR", {**base, "pad": [-1, 1, 0, 0]}
    yield "OH mismatch", "ERROR", {**base, "out_shape": (1, 4, 3, 2)}
    yield "OC mismatch", "ERROR", {**base, "out_shape": (1, 3, 3, 3), "bias": [0, 0, 0]}
    yield "idiv_check", "ERROR", {**base, "stride": [3, 1], "out_shape": (1, 1, 3, 2)}
    yield "BC", "ERROR", {**base, "bias": [0, 0, 0]}
    yield "IC mismatch", "ERROR", {**base, "w": np.ones((2, 2, 2, 2), dtype=np.int64)}
    yield "int16 input_zp", "ERROR", {**base, "in_t": "int16", "out_t": "int48", "izp": 1}
    yield "int4 weight_zp", "ERROR", {**base, "w_t": "int4", "wzp": 1}
    yield "wrong out type", "ERROR", {**base, "out_t": "int48"}
    yield "depthwise C*M", "ERROR", {**base, "op": "DEPTHWISE_CONV2D",
                                      "w": np.ones((2, 2, 3, 2), dtype=np.int64),
                                      "out_shape": (1, 3, 3, 5), "bias": [0]}
    yield "transpose out_pad", "ERROR", {**base, "op": "TRANSPOSE_CONV2D", "pad": None,
                                          "dilation": None, "out_pad": [-2, 0, 0, 0],
                                          "out_shape": (1, 3, 5, 2)}
    yield "transpose OH", "ERROR", {**base, "op": "TRANSPOSE_CONV2D", "pad": None,
                                     "dilation": None, "out_pad": [0, 0, 0, 0],
                                     "out_shape": (1, 4, 5, 2)}


@pytest.mark.parametrize("label,expect,case", list(_conv_error_cases()),
                         ids=[c[0] for c in _conv_error_cases()])
def test_conv_error_if(label, expect, case):
    case = dict(case)
    attrs = {k: case.pop(k) for k in ("pad", "stride", "dilation", "out_pad") if k in case}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    b = conv_graph(case["op"], case["x_shape"], case["in_t"], case["w"], case["w_t"],
                   case["bias"], case["out_t"], case["out_shape"], case.get("izp", 0),
                   case.get("wzp", 0), **attrs)
    x = np.ones(case["x_shape"], dtype=np.int64)
    check_against_reference(b, [x], expect=expect, forms=BOTH, label=label)


def test_pool_matmul_argmax_error_if():
    cases = [
        ("pad>=kernel", pool_graph("MAX_POOL2D", (1, 4, 4, 1), "int8", [2, 2], [1, 1],
                                   [2, 0, 0, 0], (1, 5, 3, 1))),
        ("avg pad>=kernel", pool_graph("AVG_POOL2D", (1, 4, 4, 1), "int8", [2, 2], [1, 1],
                                       [0, 0, 2, 0], (1, 3, 5, 1))),
        ("kernel<1", pool_graph("MAX_POOL2D", (1, 4, 4, 1), "int8", [0, 2], [1, 1],
                                [0, 0, 0, 0], (1, 5, 3, 1))),
        ("pool idiv", pool_graph("MAX_POOL2D", (1, 4, 4, 1), "int8", [2, 2], [3, 1],
                                 [0, 0, 0, 0], (1, 1, 3, 1))),
        ("pool OW", pool_graph("AVG_POOL2D", (1, 4, 4, 1), "int8", [2, 2], [1, 1],
                               [0, 0, 0, 0], (1, 3, 4, 1))),
        ("avg int16 output_zp", pool_graph("AVG_POOL2D", (1, 4, 4, 1), "int16", [2, 2],
                                           [1, 1], [0, 0, 0, 0], (1, 3, 3, 1), ozp=3)),
        ("matmul int16 zp", matmul_graph((1, 2, 3), (1, 3, 2), "int16", "int48", azp=1)),
        ("matmul C", matmul_graph((1, 2, 3), (1, 4, 2), "int8", "int32")),
    ]
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    b.op("ARGMAX", [x], [b.output((2,), "int32")], axis=2)
    cases.append(("argmax axis", b))
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    b.op("ARGMAX", [x], [b.output((3,), "int32")], axis=1)
    cases.append(("argmax shape", b))
    for label, b in cases:
        inputs = [np.ones(b.tensors[n].shape, dtype=np.int64) for n in b.inputs]
        check_against_reference(b, inputs, expect="ERROR", forms=BOTH, label=label)


def test_zero_point_tensor_must_be_one_value_of_the_data_type():
    """The spec types input_zp as T<in_t> of shape [1]; a [2] or int16 zero point is illegal.

    (The official reference model accepts the [2] tensor for CONV2D and crashes on the
    int16 one, so the expectation is the spec's, checked on our side only.)
    """
    for zp_values, zp_t in (([0, 0], "int8"), ([0], "int16")):
        b = GraphBuilder()
        x = b.input((1, 2, 2, 1), "int8")
        b.op("CONV2D", [x, b.const(np.ones((1, 1, 1, 1)), "int8"), b.const([0], "int32"),
                        b.const(zp_values, zp_t), b.const([0], "int8")],
             [b.output((1, 2, 2, 1), "int32")], pad=[0, 0, 0, 0], stride=[1, 1],
             dilation=[1, 1], acc_type="int32")
        status, err = run_ours(load_graph(b.serialize()),
                               {b.inputs[0]: np.zeros((1, 2, 2, 1), np.int8)})
        assert status == "ERROR" and "input_zp" in str(err), (zp_values, zp_t, err)


# ---------------------------------------------------------------------------------------
# REQUIRE and LEVEL_CHECK
def test_accumulator_overflow_is_unpredictable():
    """apply_add_s<int32>(acc, bias) overflows: the spec says unpredictable.

    The official reference model does not check this REQUIRE (it wraps), so the expected
    status comes from the spec text; the oracle run only shows the graph is well formed.
    """
    w = np.full((1, 1, 1, 4), 127)
    b = conv_graph("CONV2D", (1, 1, 1, 4), "int8", w, "int8", [(1 << 31) - 1], "int32",
                   (1, 1, 1, 1), pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])
    x = np.full((1, 1, 1, 4), 100)
    status, err = run_ours(load_graph(b.serialize()), {b.inputs[0]: x.astype(np.int8)})
    assert status == "UNPREDICTABLE" and "apply_add_s<int32>" in str(err)
    # One less in the bias than overflow: valid, and equal to the oracle.
    b = conv_graph("CONV2D", (1, 1, 1, 4), "int8", w, "int8", [(1 << 31) - 1 - 4 * 127 * 100],
                   "int32", (1, 1, 1, 1), pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])
    check_against_reference(b, [x], expect="VALID", forms=BOTH)


def test_partial_sum_overflow_is_unpredictable():
    """A partial sum leaves int32 although the final sum fits: REQUIRE fails (spec order)."""
    k = 140_000
    a = np.concatenate([np.full(k, 127), np.full(k, -127)]).reshape(1, 1, 2 * k)
    bm = np.full((1, 2 * k, 1), 127)
    b = matmul_graph((1, 1, 2 * k), (1, 2 * k, 1), "int8", "int32")
    graph = load_graph(b.serialize())
    status, err = run_ours(graph, {b.inputs[0]: a.astype(np.int8), b.inputs[1]: bm.astype(np.int8)})
    assert status == "UNPREDICTABLE", err
    # Interleaved signs keep every partial sum small: valid, equal to the oracle (0).
    a2 = np.tile([127, -127], k).reshape(1, 1, 2 * k)
    check_against_reference(b, [a2, bm], expect="VALID")


def test_level_8k_stride():
    """stride 8193 > MAX_STRIDE: unpredictable at level 8K, fine without a level."""
    b = conv_graph("CONV2D", (1, 1, 1, 1), "int8", [[[[1]]]], "int8", [0], "int32",
                   (1, 1, 1, 1), pad=[0, 0, 0, 0], stride=[8193, 1], dilation=[1, 1])
    check_against_reference(b, [np.ones((1, 1, 1, 1))], expect="UNPREDICTABLE", level="8K")
    check_against_reference(b, [np.ones((1, 1, 1, 1))], expect="VALID", level="none")


def test_level_8k_pool_kernel():
    b = pool_graph("MAX_POOL2D", (1, 1, 8193, 1), "int8", [1, 8193], [1, 1], [0, 0, 0, 0],
                   (1, 1, 1, 1))
    x = np.arange(8193).reshape(1, 1, 8193, 1) % 200 - 100
    check_against_reference(b, [x], expect="UNPREDICTABLE", level="8K")
    check_against_reference(b, [x], expect="VALID", level="none")


# ---------------------------------------------------------------------------------------
# The interpreter's entry point: clear one-line errors for bad inputs.
def _clamp_graph():
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    b.op("CLAMP", [x], [b.output((2, 3), "int8")], min_val=[0], max_val=[5])
    return b, load_graph(b.serialize())


def test_interpreter_rejects_bad_inputs():
    from sim.reference import run_graph
    from tosa_ir import InvalidInput

    b, graph = _clamp_graph()
    name = b.inputs[0]
    good = np.zeros((2, 3), dtype=np.int8)
    assert run_graph(graph, {name: good})[b.outputs[0]].dtype == np.int8
    # Integer data of another numpy type is accepted when its values fit.
    np.testing.assert_array_equal(run_graph(graph, {name: [[1, 9, -3], [0, 5, 6]]})[b.outputs[0]],
                                  [[1, 5, 0], [0, 5, 5]])
    bad = [
        ({}, "missing graph input"),
        ({name: good, "nope": good}, "unknown graph input"),
        ({name: np.zeros((3, 2), np.int8)}, "does not match the declared shape"),
        ({name: np.zeros((2, 3), np.float32)}, "expected int8 data"),
        ({name: np.full((2, 3), 300)}, "outside the int8 range"),
    ]
    for inputs, text in bad:
        with pytest.raises(InvalidInput, match=text) as info:
            run_graph(graph, inputs)
        assert "\n" not in str(info.value)
    with pytest.raises(InvalidInput, match="unknown TOSA level"):
        run_graph(graph, {name: good}, level="16K")


def test_interpreter_unknown_operator_is_unsupported():
    from sim.reference import run_graph
    from tosa_ir import Unsupported

    b, graph = _clamp_graph()
    graph.main.operators[-1].op = "FFT_OF_DOOM"
    with pytest.raises(Unsupported, match="FFT_OF_DOOM"):
        run_graph(graph, {b.inputs[0]: np.zeros((2, 3), np.int8)})


def test_interpreter_output_shape_mismatch_is_error():
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    b.op("CLAMP", [x], [b.output((3, 2), "int8")], min_val=[0], max_val=[5])
    check_against_reference(b, [np.zeros((2, 3))], expect="ERROR")


def test_interpreter_int48_input_range():
    from sim.reference import run_graph
    from tosa_ir import InvalidInput

    b = GraphBuilder()
    x = b.input((2,), "int48")
    b.op("RESCALE", [x, b.const([1 << 14], "int16"), b.const([14], "int8"),
                     b.const([0], "int48"), b.const([0], "int32")],
         [b.output((2,), "int32")], scale32=False, rounding_mode="SINGLE_ROUND",
         per_channel=False, input_unsigned=False, output_unsigned=False)
    graph = load_graph(b.serialize())
    with pytest.raises(InvalidInput, match="int48 range"):
        run_graph(graph, {b.inputs[0]: np.array([1 << 47, 0], dtype=np.int64)})
