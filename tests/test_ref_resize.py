"""Reference interpreter: RESIZE (integer NEAREST_NEIGHBOR and BILINEAR) vs the official
reference model, with random legal scale/offset/border parameters and the ERROR_IF cases."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ref_dual import Dual, check, random_values  # noqa: E402

OUT_TYPE = {("int8", "BILINEAR"): "int32", ("int8", "NEAREST"): "int8",
            ("int16", "BILINEAR"): "int48", ("int16", "NEAREST"): "int16"}


def resize_graph(in_shape, out_hw, scale, offset, border, dtype, mode, draft=False):
    d = Dual()
    d.draft = draft
    n, _, _, c = in_shape
    x = d.input(in_shape, dtype)
    s = d.const(scale, "shape")
    o = d.const(offset, "shape")
    b = d.const(border, "shape")
    y = d.output((n, out_hw[0], out_hw[1], c), OUT_TYPE[(dtype, mode)])
    d.op("RESIZE", [x, s, o, b], [y], attrs={"mode": mode}, draft_inputs=[x],
         draft_attrs={"scale": scale, "offset": offset, "border": border})
    return d


def axis_params(rng, size):
    """Random legal (scale_n, scale_d, offset, border, out_size) for one axis."""
    while True:
        scale_n = int(rng.choice([1, 2, 3, 4, 5, 8, 16, 64, 2048]))
        scale_d = int(rng.integers(1, min(16 * scale_n, 40)))
        if scale_n // scale_d > 256:  # level 8K: LEVEL_CHECK(scale_n / scale_d <= MAX_SCALE)
            continue
        offset = int(rng.integers(-scale_n, min(16 * scale_n, 4 * scale_n + 1)))
        borders = [b for b in range(-16 * scale_n, scale_n)
                   if ((size - 1) * scale_n - offset + b) % scale_d == 0
                   and (size - 1) * scale_n - offset + b >= 0
                   and ((size - 1) * scale_n - offset + b) // scale_d + 1 <= 24]
        if borders:
            border = int(rng.choice(borders))
            out = ((size - 1) * scale_n - offset + border) // scale_d + 1
            return scale_n, scale_d, offset, border, out


@pytest.mark.parametrize("dtype,mode,cases", [("int8", "NEAREST", 60), ("int8", "BILINEAR", 60),
                                              ("int16", "NEAREST", 60), ("int16", "BILINEAR", 4)])
@pytest.mark.parametrize("draft", [False, True], ids=["tosa1", "draft"])
def test_resize_random(dtype, mode, cases, draft):
    rng = np.random.default_rng(sum(map(ord, dtype + mode)) + draft)
    for case in range(cases):
        ih, iw = (int(v) for v in rng.integers(1, 7, size=2))
        yn, yd, yo, yb, oh = axis_params(rng, ih)
        xn, xd, xo, xb, ow = axis_params(rng, iw)
        shape = (int(rng.integers(1, 3)), ih, iw, int(rng.integers(1, 4)))
        d = resize_graph(shape, (oh, ow), [yn, yd, xn, xd], [yo, xo], [yb, xb], dtype, mode, draft)
        check(d, [random_values(rng, shape, dtype)], expect="VALID",
              label=f"{shape} scale {[yn, yd, xn, xd]} offset {[yo, xo]} border {[yb, xb]}")


@pytest.mark.parametrize("mode", ["NEAREST", "BILINEAR"])
def test_resize_common_cases(mode):
    rng = np.random.default_rng(3)
    x = random_values(rng, (1, 4, 5, 2), "int8")
    # 2x upscale, half-pixel centres; align-corners style; 1/2 downscale.
    for scale, offset, border, hw in [([4, 2, 4, 2], [-1, -1], [1, 1], (8, 10)),
                                      ([6, 3, 8, 4], [0, 0], [0, 0], (7, 9)),
                                      ([1, 2, 1, 2], [0, 0], [-1, 0], (2, 3))]:
        d = resize_graph(x.shape, hw, scale, offset, border, "int8", mode)
        check(d, [x], expect="VALID", label=f"{scale} {offset} {border}")


@pytest.mark.parametrize("scale,offset,border,hw", [
    ([0, 1, 1, 1], [0, 0], [0, 0], (4, 4)),          # scale_y_n <= 0
    ([4096, 1, 1, 1], [0, 0], [0, 0], (12286, 4)),   # scale_y_n > 1 << 11
    ([1, 16, 1, 1], [0, 0], [0, 0], (1, 4)),         # scale_y_d >= 16 * scale_y_n
    ([2, 1, 1, 1], [-3, 0], [0, 0], (9, 4)),         # offset_y < -scale_y_n
    ([2, 1, 1, 1], [0, 0], [2, 0], (9, 4)),          # border_y >= scale_y_n
    ([2, 4, 1, 1], [0, 0], [0, 0], (2, 4)),          # (IH-1)*n - offset + border not /d
    ([2, 1, 1, 1], [0, 0], [0, 0], (6, 4)),          # OH wrong
])
def test_resize_errors(scale, offset, border, hw):
    x = np.zeros((1, 4, 4, 1), np.int8)
    d = resize_graph(x.shape, hw, scale, offset, border, "int8", "NEAREST")
    check(d, [x], expect="ERROR", label=f"{scale} {offset} {border} {hw}")


@pytest.mark.parametrize("level,expect", [("8K", "UNPREDICTABLE"), ("none", "VALID")])
def test_resize_level_max_scale(level, expect):
    # scale_x_n / scale_x_d = 512 > MAX_SCALE (256) of level 8K.
    x = np.arange(6, dtype=np.int8).reshape(1, 2, 3, 1)
    d = resize_graph(x.shape, (2, 1025), [1, 1, 512, 1], [0, 0], [0, 0], "int8", "NEAREST")
    check(d, [x], expect=expect, level=level)


def test_resize_bad_types():
    x = np.zeros((1, 2, 2, 1), np.int8)
    d = Dual()
    xi = d.input(x.shape, "int8")
    s = d.const([2, 1, 2, 1], "shape")
    o = d.const([0, 0], "shape")
    b = d.const([0, 0], "shape")
    y = d.output((1, 3, 3, 1), "int16")   # int8 NEAREST must give int8
    d.op("RESIZE", [xi, s, o, b], [y], attrs={"mode": "NEAREST"})
    check(d, [x], expect="ERROR")
