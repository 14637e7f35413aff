"""Compiler: int16 operators with int48 results on the MAC array: DEPTHWISE_CONV2D (a
convolution with diagonal weight tiles, kinds/mxu_conv/layer.py) and BILINEAR RESIZE (per output
phase constant weights on gathered neighbours, kinds/mxu_conv/resize_wide.py), plus int8 depthwise
convolutions with a channel multiplier (also on the array), run on the ISA simulator and
compared bit-exactly with the reference interpreter (sim.reference)."""
from __future__ import annotations

import os
from dataclasses import replace
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402


def _out_size(size: int, k: int, stride: int, dil: int, pad: tuple[int, int]) -> int:
    return (size - 1 + pad[0] + pad[1] - (k - 1) * dil) // stride + 1


def _fitting(start: int, k: int, stride: int, dil: int, pad: tuple[int, int]) -> int:
    """The first input size from ``start`` that the windows tile exactly (the spec's idiv_check)."""
    start += (k - 1) * dil      # at least one output
    return next(v for v in range(start, start + 64) if (v - 1 + sum(pad) - (k - 1) * dil) % stride == 0)


def _depthwise(g, rng, dtype, n, hw, c, m, kernel, stride, dil, pad, wzp=0, izp=0, x_range=(None, None)):
    h = _fitting(hw[0], kernel[0], stride[0], dil[0], pad[:2])
    w = _fitting(hw[1], kernel[1], stride[1], dil[1], pad[2:])
    oh, ow = _out_size(h, kernel[0], stride[0], dil[0], pad[:2]), _out_size(w, kernel[1], stride[1], dil[1], pad[2:])
    acc = "int48" if dtype == "int16" else "int32"
    x = g.input((n, h, w, c), dtype, *x_range)
    wt = g.const(rng.integers(-128, 128, (*kernel, c, m)), "int8")
    bias = g.const(rng.integers(-(1 << 40) if acc == "int48" else -1000, 1 << 40 if acc == "int48" else 1000,
                                (c * m,)), acc)
    return g.op("DEPTHWISE_CONV2D", [x, wt, bias, g.const([izp], dtype), g.const([wzp], "int8")],
                (n, oh, ow, c * m), acc, pad=list(pad), stride=list(stride), dilation=list(dil),
                acc_type=acc.upper())


@pytest.mark.parametrize("seed", range(4))
def test_int16_depthwise_random_shapes(seed):
    rng = np.random.default_rng(100 + seed)
    kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
    stride = tuple(int(s) for s in rng.integers(1, 3, 2))
    dil = tuple(int(d) for d in rng.integers(1, 3, 2))
    pad = tuple(int(p) for p in rng.integers(0, 2, 4))
    c, m = int(rng.integers(1, 36)), int(rng.integers(1, 3))
    g = VecBuilder(rng)
    y = _depthwise(g, rng, "int16", int(rng.integers(1, 3)), (int(rng.integers(3, 9)), int(rng.integers(3, 9))),
                   c, m, kernel, stride, dil, pad, wzp=int(rng.integers(-20, 20)))
    run_and_compare(g.graph([y]), g.inputs(rng), DEFAULT_CONFIG)


def test_int16_depthwise_extremes_small_config():
    """Full-scale inputs and weights (products of 2^22 summed over 9 taps), 4x4 array."""
    rng = np.random.default_rng(7)
    g = VecBuilder(rng)
    y = _depthwise(g, rng, "int16", 1, (6, 5), 6, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), wzp=0)
    inputs = g.inputs(rng)
    x = next(iter(inputs))
    inputs[x][0, :3] = -32768
    inputs[x][0, 3:] = 32767
    wt = next(t for t in g.block.tensors.values() if t.is_const and t.dtype == "int8" and t.shape == (3, 3, 6, 1))
    wt.data[..., :3, :] = -128
    wt.data[..., 3:, :] = 127
    run_and_compare(g.graph([y]), inputs, SMALL_CONFIG)


def test_int8_depthwise_channel_multiplier_on_the_array():
    rng = np.random.default_rng(8)
    g = VecBuilder(rng)
    y = _depthwise(g, rng, "int8", 1, (9, 11), 5, 9, (5, 5), (2, 1), (2, 2), (1, 1, 0, 0), wzp=3, izp=-5)
    comp = run_and_compare(g.graph([y]), g.inputs(rng), DEFAULT_CONFIG)
    assert "MxuConvLayer" in {type(layer).__name__ for layer in comp.flow.layers}


def _resize_size(size: int, n: int, d: int, offset: int) -> tuple[int, int]:
    """(output size, border) with the legal border nearest 0 making the size an integer."""
    for border in sorted(range(-16 * n + 1, n), key=abs):
        if ((size - 1) * n - offset + border) % d == 0 and (size - 1) * n - offset + border >= 0:
            return ((size - 1) * n - offset + border) // d + 1, border
    raise AssertionError("no border fits")


@pytest.mark.parametrize("case", [
    # (h, w, c), (scale_y_n, scale_y_d, scale_x_n, scale_x_d), (offset_y, offset_x)
    ((5, 7, 3), (4, 1, 3, 1), (0, 0)),            # upscale: 4 x 3 phases
    ((9, 11, 20), (3, 7, 5, 2), (-2, 3)),          # fractional down/up scales, offsets, two channel blocks
    ((4, 6, 5), (16, 8, 15, 5), (5, -4)),          # weights up to 240: weight zero point -128
    ((6, 5, 2), (2, 2, 1, 3), (1, 0)),
])
def test_int16_bilinear_resize(case):
    (h, w, c), (syn, syd, sxn, sxd), (oy, ox) = case
    rng = np.random.default_rng(h * w + c)
    oh, by = _resize_size(h, syn, syd, oy)
    ow, bx = _resize_size(w, sxn, sxd, ox)
    g = VecBuilder(rng)
    x = g.input((2, h, w, c), "int16")
    shape_ops = [g.const(np.array(v), "shape") for v in ([syn, syd, sxn, sxd], [oy, ox], [by, bx])]
    y = g.op("RESIZE", [x] + shape_ops, (2, oh, ow, c), "int48", mode="BILINEAR")
    inputs = g.inputs(rng)
    inputs[x][0, 0, :2, 0] = [-32768, 32767]
    run_and_compare(g.graph([y]), inputs, DEFAULT_CONFIG)


def _bilinear(rng, n, hw, c, scale, offset, x_range=(None, None)):
    """A BILINEAR int16 RESIZE graph (builder, output name, input name)."""
    (h, w), (syn, syd, sxn, sxd), (oy, ox) = hw, scale, offset
    oh, by = _resize_size(h, syn, syd, oy)
    ow, bx = _resize_size(w, sxn, sxd, ox)
    g = VecBuilder(rng)
    x = g.input((n, h, w, c), "int16", *x_range)
    shape_ops = [g.const(np.array(v), "shape") for v in ([syn, syd, sxn, sxd], [oy, ox], [by, bx])]
    return g, g.op("RESIZE", [x] + shape_ops, (n, oh, ow, c), "int48", mode="BILINEAR"), x


@pytest.mark.parametrize("scale,offset", [
    ((256, 256, 256, 256), (0, 0)),         # weights up to 65536 (= 256 * 255 + 256)
    ((256, 128, 256, 64), (0, 0)),           # upscale: 2 x 4 phases, weights 0 .. 65536
    ((256, 111, 200, 97), (-100, 50)),
    ((32, 16, 32, 16), (0, 0)),
    ((16, 9, 17, 11), (7, -9)),              # 272: just past one byte
    ((2048, 2048, 2048, 2048), (0, 0)),     # 2**22: three byte planes, the top one 64
    ((1660, 1411, 1922, 788), (217, -1244)),  # three planes, weights up to 3,190,520
    ((257, 100, 256, 255), (3, 0)),          # 65,792: just past two planes
])
def test_int16_bilinear_resize_byte_planes_extremes(scale, offset):
    """``scale_y_n * scale_x_n > 255``: weight byte planes (two, or three past 65,536)
    combined in int48, full-scale inputs."""
    rng = np.random.default_rng(sum(scale))
    g, y, x = _bilinear(rng, 1, (3, 4), 3, scale, offset)
    inputs = g.inputs(rng)
    inputs[x][0, :, :2] = -32768
    inputs[x][0, :, 2:] = 32767
    inputs[x][0, 1, 1:3, 1] = [32767, -32768]
    run_and_compare(g.graph([y]), inputs, SMALL_CONFIG if scale[0] == scale[1] else DEFAULT_CONFIG)


@pytest.mark.parametrize("seed", range(3))
def test_int16_bilinear_resize_byte_planes_random(seed):
    rng = np.random.default_rng(300 + seed)
    # (output sizes, hence phases, kept small: every phase has its own weight tiles)
    sy_n, sx_n = (int(v) for v in rng.integers(16, 257, 2))
    scale = [sy_n, int(rng.integers(sy_n // 2 + 1, 2 * sy_n)), sx_n, int(rng.integers(sx_n // 2 + 1, 2 * sx_n))]
    offset = [int(rng.integers(-scale[0] + 1, scale[0])), int(rng.integers(-scale[2] + 1, scale[2]))]
    g, y, x = _bilinear(rng, 2, (int(rng.integers(2, 5)), int(rng.integers(2, 5))), int(rng.integers(1, 20)),
                        scale, offset)
    comp = run_and_compare(g.graph([y]), g.inputs(rng), DEFAULT_CONFIG)
    assert any(getattr(layer, "upper_planes", None) for layer in comp.flow.layers)


def _fixed_ops(comp) -> int:
    return sum(type(op).__name__ == "FixedOp" for op in comp.program_ops)


@pytest.mark.parametrize("dtype,cout,fused", [("int16", 10, False), ("int8", 9, False), ("int8", 7, True)])
def test_conv3d_longer_than_instruction_memory_emits_its_loops(dtype, cout, fused):
    """On the 4x4 NPU (256 instructions) a CONV3D whose straight line is thousands of
    instructions: its own LOOPs (MATMUL runs, output blocks) and wait masks (the simulator's
    hazard checker verifies them), optionally with its RESCALE fused."""
    rng = np.random.default_rng(cout)
    acc = "int48" if dtype == "int16" else "int32"
    g = VecBuilder(rng)
    x = g.input((1, 5, 6, 7, 6), dtype)
    wt = g.const(rng.integers(-128, 128, (cout, 2, 2, 3, 6)), "int8")
    bias = g.const(rng.integers(-(1 << 20), 1 << 20, (cout,)), acc)
    izp = 0 if dtype == "int16" else -7
    y = g.op("CONV3D", [x, wt, bias, g.const([izp], dtype), g.const([0], "int8")], (1, 5, 6, 5, cout), acc,
             pad=[1, 0, 1, 0, 0, 0], stride=[1, 1, 1], dilation=[1, 1, 1], acc_type=acc.upper())
    if fused:
        y = g.rescale(y, "int8", rng.integers(1 << 29, 1 << 30, cout), rng.integers(30, 36, cout), ozp=3,
                      per_channel=True)
    comp = run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)
    assert _fixed_ops(comp) > 0


def test_int16_depthwise_longer_than_instruction_memory():
    rng = np.random.default_rng(12)
    g = VecBuilder(rng)
    y = _depthwise(g, rng, "int16", 1, (9, 12), 7, 2, (3, 3), (1, 1), (1, 2), (1, 1, 1, 1))
    comp = run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)
    assert _fixed_ops(comp) > 0


def _strips(comp, kind: str) -> int:
    return sum(type(layer).__name__ == kind for layer in comp.flow.layers)


@pytest.mark.parametrize("scale,offset", [
    ((4, 1, 3, 1), (0, 0)),          # 4 x 3 phases: strips bounded by the external memory share
    ((9, 1, 3, 2), (-3, 2)),         # 9 y phases: one phase's weight tiles fit WSRAM twice, not two
    ((3, 2, 17, 5), (0, 1)),         # 17 x phases: one row's tiles do not fit, strips of columns too
])
def test_int16_bilinear_resize_in_strips(scale, offset):
    """A RESIZE whose gathered neighbours (16 bytes per output element) or per-phase weight
    tiles exceed the configuration is cut into strips of output rows (and columns), each its
    own gathers and array layer writing its part of the one output (a tiny WSRAM here; at
    the default configuration, e.g. the conformance tests 1x40x39x30 scale 9 x 16 and
    1x23x63x10 with 138 x phases)."""
    rng = np.random.default_rng(sum(scale))
    config = replace(SMALL_CONFIG, wsram_rows=256)
    g, y, x = _bilinear(rng, 2, (5, 7), 6, scale, offset)
    inputs = g.inputs(rng)
    inputs[x][0, 0, :2, 0] = [-32768, 32767]
    comp = run_and_compare(g.graph([y]), inputs, config)
    assert _strips(comp, "MxuConvLayer") > 2


def test_int8_bilinear_resize_in_strips():
    """int8 BILINEAR in strips of output rows, each summing its neighbours times per-row and
    per-column weights into a window of the output (a batch of 2: the windows are strided)."""
    rng = np.random.default_rng(5)
    config = SMALL_CONFIG       # 256 KiB: a strip's gathers within 16 KiB
    g = VecBuilder(rng)
    x = g.input((2, 6, 5, 9), "int8")
    oh, by = _resize_size(6, 7, 2, 1)
    ow, bx = _resize_size(5, 5, 1, -2)
    shape_ops = [g.const(np.array(v), "shape") for v in ([7, 2, 5, 1], [1, -2], [by, bx])]
    y = g.op("RESIZE", [x] + shape_ops, (2, oh, ow, 9), "int32", mode="BILINEAR")
    inputs = g.inputs(rng)
    inputs[x][1, :, :, 0] = -128
    inputs[x][1, :, :, 1] = 127
    comp = run_and_compare(g.graph([y]), inputs, config)
    assert _strips(comp, "EltLayer") > 2
    # the per-column weights, equal in every strip, are stored once
    datas = [s.data for s in comp.program.segments]
    assert len(datas) == len(set(datas))


@pytest.mark.parametrize("dtype,out", [("int16", "int48"), ("int8", "int32")])
def test_resize_with_wrong_declared_output_rejected_before_lowering(dtype, out):
    """The official generator's ResizeOutputShapeMismatch: 1x32x32x1 scaled 305/2257 x
    1137/5409 gives 5 x 6 outputs but declares 1x2259x5415x1.  Lowering sized by the
    declared shape built gigabytes of gathers and weights (a conformance worker died at 18 GB);
    the compiler rejects it first, as the spec's ERROR_IF says, within a small memory budget."""
    from compiler.driver import compile_graph
    from tosa_ir.address_space import address_space_cap
    from tosa_ir.errors import InvalidInput

    rng = np.random.default_rng(0)
    g = VecBuilder(rng)
    x = g.input((1, 32, 32, 1), dtype)
    shape_ops = [g.const(np.array(v), "shape") for v in ([305, 2257, 1137, 5409], [3473, 3578],
                                                         [-3725, -4624])]
    y = g.op("RESIZE", [x] + shape_ops, (1, 2259, 5415, 1), out, mode="BILINEAR")
    with address_space_cap(1 << 30), pytest.raises(InvalidInput, match="OH != idiv_check"):
        compile_graph(g.graph([y]), DEFAULT_CONFIG)
