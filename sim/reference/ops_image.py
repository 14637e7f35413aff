"""RESIZE (spec section 2.12.1), integer modes NEAREST_NEIGHBOR and BILINEAR.

Sample positions are separable, so the row and column coordinates (``iy0, iy1, dy`` and
``ix0, ix1, dx``) are computed once per output row/column and combined by broadcasting.
Integer BILINEAR returns the unscaled weighted sum (weights sum to ``scale_y_n * scale_x_n``);
a following RESCALE normalises it.
"""
from __future__ import annotations

import numpy as np

from sim.reference.ops_support import (
    as_int64, check_output_shape, check_types, int_list, operand, out_array, shapes_match,
)
from sim.reference.registry import register

MAX_SCALE_NONE = 2048

# Allowed (in_t, out_t) per mode: spec table "Supported Data Types" of RESIZE.
MODE_TYPES = {
    "BILINEAR": [("int8", "int32"), ("int16", "int48")],
    "NEAREST_NEIGHBOR": [("int8", "int8"), ("int16", "int16")],
}


def resize_mode(ctx) -> str:
    """The mode attribute as ``"NEAREST_NEIGHBOR"`` or ``"BILINEAR"``.

    Strings are taken by name; integers by the enum of the graph's form (draft spec:
    0 = NEAREST_NEIGHBOR, 1 = BILINEAR; TOSA 1.0 flatbuffer: 1 = NEAREST, 2 = BILINEAR).
    """
    mode = ctx.attr("mode")
    if isinstance(mode, str):
        name = mode.upper()
        if name.startswith("RESIZEMODE."):
            name = name.split(".", 1)[1]
        name = {"NEAREST": "NEAREST_NEIGHBOR"}.get(name, name)
    elif mode is not None:
        table = ({1: "NEAREST_NEIGHBOR", 2: "BILINEAR"} if ctx.is_tosa_1
                 else {0: "NEAREST_NEIGHBOR", 1: "BILINEAR"})
        name = table.get(int(mode), str(mode))
    else:
        name = ""
    ctx.error_if(name not in MODE_TYPES, "mode", f"mode {mode!r} is not a resize_mode_t")
    return name


def _idiv_check(ctx, numerator: int, denominator: int, arg: str) -> int:
    ctx.error_if(numerator % denominator != 0, arg, "idiv_check: input1 % input2 != 0")
    return -((-numerator) // denominator) if numerator < 0 else numerator // denominator


def _axis(o_size: int, scale_n: int, scale_d: int, offset: int, i_size: int):
    """Per output coordinate: lower/upper input index and the remainder (dy or dx)."""
    pos = np.arange(o_size, dtype=np.int64) * scale_d + offset
    idx = np.floor_divide(pos, scale_n)
    rem = pos - idx * scale_n
    lower = np.maximum(idx, 0)
    upper = np.minimum(idx + 1, i_size - 1)
    return lower, upper, rem


@register("RESIZE")
def resize(ctx, inputs):
    x = np.asarray(inputs[0])
    mode = resize_mode(ctx)
    check_types(ctx, "input", (ctx.in_type(0), ctx.out_type()), MODE_TYPES[mode])
    ctx.error_if(x.ndim != 4, "input", "rank(input) != 4")
    scale = int_list(operand(ctx, inputs, 1, "scale"))
    offset = int_list(operand(ctx, inputs, 2, "offset"))
    border = int_list(operand(ctx, inputs, 3, "border"))
    ctx.error_if(len(scale) != 4, "scale", "shape(scale) != [4]")
    ctx.error_if(len(offset) != 2, "offset", "shape(offset) != [2]")
    ctx.error_if(len(border) != 2, "border", "shape(border) != [2]")
    scale_y_n, scale_y_d, scale_x_n, scale_x_d = scale
    offset_y, offset_x = offset
    border_y, border_x = border
    n, ih, iw, c = x.shape
    declared = ctx.out_shape()
    ctx.error_if(len(declared) != 4, "output", "rank(output) != 4")

    ctx.error_if(scale_y_n <= 0 or scale_y_d <= 0 or scale_x_n <= 0 or scale_x_d <= 0, "scale",
                 "scale_y_n <= 0 || scale_y_d <= 0 || scale_x_n <= 0 || scale_x_d <= 0")
    ctx.error_if(scale_y_n > (1 << 11) or scale_x_n > (1 << 11), "scale",
                 "scale_y_n > (1 << 11) || scale_x_n > (1 << 11)")
    ctx.error_if(scale_y_d >= 16 * scale_y_n or scale_x_d >= 16 * scale_x_n, "scale",
                 "scale_y_d >= 16 * scale_y_n || scale_x_d >= 16 * scale_x_n")
    ctx.error_if(offset_y < -scale_y_n or offset_y >= 16 * scale_y_n, "offset",
                 "offset_y < -scale_y_n || offset_y >= 16 * scale_y_n")
    ctx.error_if(offset_x < -scale_x_n or offset_x >= 16 * scale_x_n, "offset",
                 "offset_x < -scale_x_n || offset_x >= 16 * scale_x_n")
    ctx.error_if(border_y < -16 * scale_y_n or border_y >= scale_y_n, "border",
                 "border_y < -16 * scale_y_n || border_y >= scale_y_n")
    ctx.error_if(border_x < -16 * scale_x_n or border_x >= scale_x_n, "border",
                 "border_x < -16 * scale_x_n || border_x >= scale_x_n")
    oh = _idiv_check(ctx, (ih - 1) * scale_y_n - offset_y + border_y, scale_y_d, "scale") + 1
    ow = _idiv_check(ctx, (iw - 1) * scale_x_n - offset_x + border_x, scale_x_d, "scale") + 1
    ctx.error_if(not shapes_match(declared[1:3], (oh, ow)), "output",
                 "OH != idiv_check((IH - 1) * scale_y_n - offset_y + border_y, scale_y_d) + 1"
                 if not shapes_match(declared[1:2], (oh,)) else
                 "OW != idiv_check((IW - 1) * scale_x_n - offset_x + border_x, scale_x_d) + 1")
    ctx.error_if(max(oh, ow, ih, iw) >= 16384, "input", "max(OH,OW,IH,IW) >= 16384")
    check_output_shape(ctx, (n, oh, ow, c), text="shape(output) != [N,OH,OW,C]")
    # The spec lists the LEVEL_CHECKs first; a graph failing both is unpredictable or an
    # error (either is compliant).  Checking ERROR_IFs first reports what the official
    # reference model reports.
    limits = ctx.limits
    max_scale = MAX_SCALE_NONE if limits is None else limits["MAX_SCALE"]
    ctx.level_check(scale_y_n // scale_y_d <= max_scale, "scale_y_n/scale_y_d <= MAX_SCALE")
    ctx.level_check(scale_x_n // scale_x_d <= max_scale, "scale_x_n/scale_x_d <= MAX_SCALE")

    iy0, iy1, dy = _axis(oh, scale_y_n, scale_y_d, offset_y, ih)
    ix0, ix1, dx = _axis(ow, scale_x_n, scale_x_d, offset_x, iw)
    if mode == "NEAREST_NEIGHBOR":
        iy = np.where(2 * dy >= scale_y_n, iy1, iy0)
        ix = np.where(2 * dx >= scale_x_n, ix1, ix0)
        return [out_array(ctx, x[:, iy[:, None], ix[None, :], :])]

    v = as_int64(x)
    rows0, rows1 = iy0[:, None], iy1[:, None]
    cols0, cols1 = ix0[None, :], ix1[None, :]
    wy0, wy1 = (scale_y_n - dy)[:, None], dy[:, None]
    wx0, wx1 = (scale_x_n - dx)[None, :], dx[None, :]

    def term(rows, cols, weight):
        return v[:, rows, cols, :] * weight[None, :, :, None]

    acc = (term(rows0, cols0, wy0 * wx0) + term(rows0, cols1, wy0 * wx1)
           + term(rows1, cols0, wy1 * wx0) + term(rows1, cols1, wy1 * wx1))
    return [out_array(ctx, acc)]
