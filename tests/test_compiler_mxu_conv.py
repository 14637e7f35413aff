"""Compiler: convolutions with wide outputs on the MAC array (compiler/kinds/mxu_conv/layer.py):
CONV2D, CONV3D and TRANSPOSE_CONV2D, int8 x int8 -> int32 and int16 x int8 -> int48 (and
int8 x int4), run on the ISA simulator and compared bit-exactly with the reference
interpreter."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from compiler.kinds.mxu_conv.layer import MxuConvLayer  # noqa: E402

CONFIGS = {"small": SMALL_CONFIG, "default": DEFAULT_CONFIG}
ACC = {"int8": "int32", "int16": "int48"}
WRANGE = {"int8": (-128, 127), "int4": (-8, 7)}


def _out(size, pad0, pad1, k, stride, dil):
    return (size - 1 + pad0 + pad1 - (k - 1) * dil) // stride + 1


def _fits(size, pad0, pad1, k, stride, dil):
    return (size - 1 + pad0 + pad1 - (k - 1) * dil) % stride == 0


def _size(lo, pad0, pad1, k, stride, dil):
    return next(v for v in range(lo, lo + 40) if _fits(v, pad0, pad1, k, stride, dil) and
                _out(v, pad0, pad1, k, stride, dil) > 0)


def _run(g, rng, outputs, config):
    comp = run_and_compare(g.graph(outputs), g.inputs(rng), CONFIGS[config])
    assert any(isinstance(layer, MxuConvLayer) for layer in comp.layers)
    return comp


@pytest.mark.parametrize("config,dtype,wtype,kernel,stride,dil,pad,cin,cout,izp,wzp", [
    ("small", "int8", "int8", (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 5, 6, -7, 3),
    ("small", "int8", "int8", (2, 3), (2, 1), (1, 2), (0, 1, 2, 0), 9, 3, 127, -128),
    ("default", "int8", "int8", (3, 3), (1, 2), (2, 1), (1, 0, 0, 1), 20, 37, 0, 0),
    ("small", "int16", "int8", (3, 2), (1, 1), (1, 1), (1, 1, 0, 1), 6, 5, 0, 0),
    ("default", "int16", "int8", (5, 5), (2, 2), (1, 1), (2, 2, 1, 1), 17, 18, 0, 0),
    ("small", "int8", "int4", (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 7, 5, 3, 0),
    ("default", "int8", "int4", (1, 3), (1, 2), (1, 1), (0, 0, 1, 1), 20, 19, -128, 0),
])
def test_conv2d_wide(config, dtype, wtype, kernel, stride, dil, pad, cin, cout, izp, wzp):
    rng = np.random.default_rng(sum(kernel) * 100 + cin + cout)
    h = _size(6, pad[0], pad[1], kernel[0], stride[0], dil[0])
    w = _size(7, pad[2], pad[3], kernel[1], stride[1], dil[1])
    oh, ow = _out(h, pad[0], pad[1], kernel[0], stride[0], dil[0]), _out(w, pad[2], pad[3], kernel[1], stride[1], dil[1])
    g = VecBuilder(rng)
    x = g.input((2, h, w, cin), dtype)
    wt = g.const(rng.integers(*WRANGE[wtype], (cout, *kernel, cin), endpoint=True), wtype)
    b = g.const(rng.integers(-(1 << 20), 1 << 20, (cout,)), ACC[dtype])
    y = g.op("CONV2D", [x, wt, b, g.const([izp], dtype), g.const([wzp], wtype)], (2, oh, ow, cout), ACC[dtype],
             pad=list(pad), stride=list(stride), dilation=list(dil), acc_type=ACC[dtype].upper())
    comp = _run(g, rng, [y], config)
    w_types = {op.instr.values["w_type"] for op in comp.scheduled.ops if op.instr.name == "MATMUL"}
    assert w_types == {int(wtype == "int4")}          # int4 weights stay packed in WSRAM


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_conv2d_extremes(dtype):
    """Every input and weight at its most negative value: the largest sums."""
    rng = np.random.default_rng(3)
    g = VecBuilder(rng)
    lo = -128 if dtype == "int8" else -32768
    x = g.input((1, 4, 5, 40), dtype, lo, lo)
    wt = g.const(np.full((3, 3, 3, 40), -128), "int8")
    b = g.const(np.array([-(1 << 31) if dtype == "int8" else -(1 << 40), 0, 5]), ACC[dtype])
    y = g.op("CONV2D", [x, wt, b, g.const([0], dtype), g.const([0], "int8")], (1, 2, 3, 3), ACC[dtype],
             pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], acc_type=ACC[dtype].upper())
    _run(g, rng, [y], "small")


@pytest.mark.parametrize("config,dtype,kernel,stride,dil,pad,cin,cout,izp", [
    ("small", "int8", (2, 3, 2), (1, 2, 1), (1, 1, 2), (1, 0, 1, 1, 0, 1), 5, 6, -3),
    ("default", "int16", (3, 1, 2), (2, 1, 1), (1, 1, 1), (1, 1, 0, 0, 1, 0), 18, 7, 0),
])
def test_conv3d(config, dtype, kernel, stride, dil, pad, cin, cout, izp):
    rng = np.random.default_rng(sum(kernel) + cin)
    sizes = [_size(4 + i, pad[2 * i], pad[2 * i + 1], kernel[i], stride[i], dil[i]) for i in range(3)]
    outs = [_out(sizes[i], pad[2 * i], pad[2 * i + 1], kernel[i], stride[i], dil[i]) for i in range(3)]
    g = VecBuilder(rng)
    x = g.input((1, *sizes, cin), dtype)
    wt = g.const(rng.integers(-128, 128, (cout, *kernel, cin)), "int8")
    b = g.const(rng.integers(-1000, 1000, (cout,)), ACC[dtype])
    y = g.op("CONV3D", [x, wt, b, g.const([izp], dtype), g.const([0], "int8")], (1, *outs, cout), ACC[dtype],
             pad=list(pad), stride=list(stride), dilation=list(dil), acc_type=ACC[dtype].upper())
    _run(g, rng, [y], config)


@pytest.mark.parametrize("config,dtype,kernel,stride,out_pad,cin,cout,izp,wzp", [
    ("small", "int8", (3, 3), (2, 2), (0, 0, 0, 0), 5, 6, 4, -2),
    ("small", "int8", (1, 3), (3, 2), (-0, 1, -2, 0), 3, 5, -128, 0),      # phases without taps
    ("small", "int16", (2, 2), (1, 1), (-1, -1, -1, -1), 6, 3, 0, 0),      # negative out_pad crops
    ("default", "int16", (3, 2), (2, 3), (1, 0, 0, 2), 20, 17, 0, 0),
])
def test_transpose_conv2d(config, dtype, kernel, stride, out_pad, cin, cout, izp, wzp):
    rng = np.random.default_rng(sum(kernel) * 10 + cin + cout)
    ih, iw = 5, 4
    oh = (ih - 1) * stride[0] + out_pad[0] + out_pad[1] + kernel[0]
    ow = (iw - 1) * stride[1] + out_pad[2] + out_pad[3] + kernel[1]
    g = VecBuilder(rng)
    x = g.input((2, ih, iw, cin), dtype)
    wt = g.const(rng.integers(-128, 128, (cout, *kernel, cin)), "int8")
    b = g.const(rng.integers(-1000, 1000, (1,)), ACC[dtype])
    y = g.op("TRANSPOSE_CONV2D", [x, wt, b, g.const([izp], dtype), g.const([wzp], "int8")], (2, oh, ow, cout),
             ACC[dtype], out_pad=list(out_pad), stride=list(stride), acc_type=ACC[dtype].upper())
    _run(g, rng, [y], config)


@pytest.mark.parametrize("config,dtype,n,cin,cout,izp,wzp", [
    ("small", "int8", 3, 9, 7, -5, 6),
    ("default", "int16", 5, 40, 20, 0, 0),
])
def test_fully_connected_draft(config, dtype, n, cin, cout, izp, wzp):
    rng = np.random.default_rng(n + cin + cout)
    g = VecBuilder(rng)
    x = g.input((n, cin), dtype)
    wt = g.const(rng.integers(-128, 128, (cout, cin)), "int8")
    b = g.const(rng.integers(-1000, 1000, (cout,)), ACC[dtype])
    y = g.op("FULLY_CONNECTED", [x, wt, b], (n, cout), ACC[dtype], input_zp=izp, weight_zp=wzp)
    graph = g.graph([y])
    graph.version = (0, 80, 0, True)            # the draft spec (zero points as attributes)
    comp = run_and_compare(graph, g.inputs(rng), CONFIGS[config])
    assert any(isinstance(layer, MxuConvLayer) for layer in comp.layers)


@pytest.mark.parametrize("config,dtype,out,per_channel,scale32,double", [
    ("small", "int16", "int16", True, False, False),      # the 16x8 path: int48 rescaled by VRESCALE
    ("default", "int16", "int8", False, False, False),   # (int48 input: scale16 only)
    ("small", "int8", "int16", True, True, True),         # int8 conv, int16 result: not the ACT path
])
def test_conv2d_fused_rescale(config, dtype, out, per_channel, scale32, double):
    rng = np.random.default_rng(len(config) + len(out) + per_channel)
    g = VecBuilder(rng)
    cout = 19
    x = g.input((1, 6, 7, 11), dtype)
    wt = g.const(rng.integers(-128, 128, (cout, 3, 3, 11)), "int8")
    b = g.const(rng.integers(-5000, 5000, (cout,)), ACC[dtype])
    y = g.op("CONV2D", [x, wt, b, g.const([0], dtype), g.const([0], "int8")], (1, 4, 5, cout), ACC[dtype],
             pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], acc_type=ACC[dtype].upper())
    k = cout if per_channel else 1
    mul = rng.integers(1 << 13, 1 << 15, (k,)) if not scale32 else rng.integers(1 << 29, 1 << 31, (k,))
    shift = rng.integers(12, 22, (k,)) if not scale32 else rng.integers(30, 40, (k,))
    z = g.op("RESCALE", [y, g.const(mul, "int16" if not scale32 else "int32"), g.const(shift, "int8"),
                         g.const([0], ACC[dtype]), g.const([-3 if out == "int8" else 0], out)], (1, 4, 5, cout), out,
             scale32=scale32, rounding_mode="DOUBLE_ROUND" if double else "SINGLE_ROUND", per_channel=per_channel,
             input_unsigned=False, output_unsigned=False)
    comp = _run(g, rng, [z], config)
    assert len(comp.layers) == 1 and comp.layers[0].rescale is not None     # one layer: VRESCALE from ACC


def test_int16_conv_feeds_int8_conv():
    """16x8 conv -> RESCALE to int8 (fused, written as bricks) -> the int8 fused conv path."""
    rng = np.random.default_rng(11)
    g = VecBuilder(rng)
    x = g.input((1, 7, 6, 9), "int16")
    w1 = g.const(rng.integers(-128, 128, (20, 3, 3, 9)), "int8")
    y = g.op("CONV2D", [x, w1, g.const(rng.integers(-1000, 1000, (20,)), "int48"), g.const([0], "int16"),
                        g.const([0], "int8")], (1, 5, 4, 20), "int48", pad=[0, 0, 0, 0], stride=[1, 1],
             dilation=[1, 1], acc_type="INT48")
    z = g.op("RESCALE", [y, g.const([1 << 14], "int16"), g.const([22], "int8"), g.const([0], "int48"),
                         g.const([-5], "int8")], (1, 5, 4, 20), "int8", scale32=False, rounding_mode="SINGLE_ROUND",
             per_channel=False, input_unsigned=False, output_unsigned=False)
    w2 = g.const(rng.integers(-128, 128, (6, 3, 3, 20)), "int8")
    y2 = g.op("CONV2D", [z, w2, g.const(rng.integers(-1000, 1000, (6,)), "int32"), g.const([-5], "int8"),
                         g.const([0], "int8")], (1, 5, 4, 6), "int32", pad=[1, 1, 1, 1], stride=[1, 1],
              dilation=[1, 1], acc_type="INT32")
    z2 = g.op("RESCALE", [y2, g.const([1 << 30], "int32"), g.const([38], "int8"), g.const([0], "int32"),
                          g.const([3], "int8")], (1, 5, 4, 6), "int8", scale32=True, rounding_mode="DOUBLE_ROUND",
              per_channel=False, input_unsigned=False, output_unsigned=False)
    comp = _run(g, rng, [z2], "small")
    assert [type(layer).__name__ for layer in comp.layers] == ["MxuConvLayer", "ConvLayer"]
    assert comp.flow.root_of(z).layout == "brick"


def _random_case(rng):
    """A random CONV2D / TRANSPOSE_CONV2D / CONV3D (int8 or int16, zero points, padding,
    strides, dilations, partial channel blocks) as (builder, output)."""
    kind = rng.choice(["CONV2D", "TRANSPOSE_CONV2D", "CONV3D"])
    dt = str(rng.choice(["int8", "int16"]))
    izp, wzp = (int(rng.integers(-128, 128)), int(rng.integers(-128, 128))) if dt == "int8" else (0, 0)
    g = VecBuilder(rng)
    ci, co = (int(v) for v in rng.integers(1, 25, 2))
    rank = 3 if kind == "CONV3D" else 2
    if kind == "TRANSPOSE_CONV2D":
        k, s = [int(v) for v in rng.integers(1, 5, 2)], [int(v) for v in rng.integers(1, 4, 2)]
        out_pad = [int(rng.integers(-k[i // 2] + 1, 3)) for i in range(4)]
        size = [int(v) for v in rng.integers(2, 8, 2)]
        out = [(size[i] - 1) * s[i] + out_pad[2 * i] + out_pad[2 * i + 1] + k[i] for i in range(2)]
        attrs = dict(out_pad=out_pad, stride=s)
    else:
        k, s, d = ([int(v) for v in rng.integers(1, 4 - (rank == 3), rank)] for _ in range(3))
        pad = [int(rng.integers(0, k[i // 2])) for i in range(2 * rank)]
        size = [next(v for v in range(3, 40) if (v - 1 + pad[2 * i] + pad[2 * i + 1] - (k[i] - 1) * d[i]) % s[i] == 0
                     and v - 1 + pad[2 * i] + pad[2 * i + 1] >= (k[i] - 1) * d[i]) for i in range(rank)]
        out = [(size[i] - 1 + pad[2 * i] + pad[2 * i + 1] - (k[i] - 1) * d[i]) // s[i] + 1 for i in range(rank)]
        attrs = dict(pad=pad, stride=s, dilation=d)
    x = g.input((1, *size, ci), dt)
    wt = g.const(rng.integers(-128, 128, (co, *k, ci)), "int8")
    b = g.const(rng.integers(-9999, 9999, (co,)), ACC[dt])
    return g, g.op(kind, [x, wt, b, g.const([izp], dt), g.const([wzp], "int8")], (1, *out, co), ACC[dt],
                   acc_type=ACC[dt].upper(), **attrs)


def test_random_shapes():
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        g, y = _random_case(rng)
        _run(g, rng, [y], "default")
