"""Sliding-window lowering shared by the NNEF and OpenVINO frontends.

Exact sizes.  Both formats round a window operator's output size down; TOSA requires
``(size - 1 + pad_before + pad_after - (kernel - 1) * dilation)`` to divide exactly by the
stride (ERROR_IF).  The rows that make the remainder come after the last window, so no
output reads them: :func:`fit_window` takes them off the end padding first, and the rest
are input rows, which :func:`slice_tail` drops with a SLICE (start 0) of the input.
:func:`compiler.frontends.common.graph_passes.fold_slices` later folds such a SLICE into the
convolution producing its input when taking padding off that convolution is enough.
Kernels are never grown with zero taps: they would cost multiplies (AlexNet's conv1 would
do 138 M instead of 68 M).

The other helpers build the operands the two frontends' CONV2D / DEPTHWISE_CONV2D,
MAX_POOL2D / AVG_POOL2D and zero PAD have in common, on NHWC tensors.
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.graph_builder import NHWC, LayoutBuilder, Val
from tosa_ir.errors import Unsupported


def fit_window(size: int, k: int, s: int, d: int, p: int, q: int) -> tuple[int, int]:
    """Make a window operator's size division exact (TOSA ERROR_IF) without changing results.

    The source format drops the remainder ``r`` of ``(size - 1 + p + q - (k-1)*d) / s``;
    TOSA requires none.  The ``r`` rows that make the remainder come after the last
    window, so no output reads them.  Those that are end padding are taken off ``q``; the
    rest are input rows, which the caller slices off the input (:func:`slice_tail`).
    Returns ``(q, input_rows_to_drop)``.
    """
    r = (size - 1 + p + q - (k - 1) * d) % s
    cut = min(q, r)
    return q - cut, r - cut


def slice_tail(c: LayoutBuilder, name: str, drop: dict[int, int]) -> str:
    """SLICE dropping ``drop[axis]`` trailing entries (TOSA layout axes) of tensor ``name``.

    Made once per (tensor, size), however many windows read it, and recorded in
    ``c.trim_slices``.

    Raises
    ------
    Unsupported
        Every window lies in the top/left padding: no input entry is left to keep.
    """
    shape = c.block.tensors[name].shape
    size = list(shape)
    for axis, n in drop.items():
        if n >= size[axis]:
            raise Unsupported(f"{c.location}: no window reaches the input (axis {axis} has "
                              f"{size[axis]} entries, {n} of them past the last window)")
        size[axis] -= n

    def make() -> str:
        out = c.emit("SLICE", [name, c.shape_const([0] * len(shape), name + "_start"),
                               c.shape_const(size, name + "_size")], size,
                     c.block.tensors[name].dtype, base=name + "_trim")
        c.trim_slices.add(out)
        return out
    return c.shared(("trim", name, tuple(size)), make)


def conv_weight(w: np.ndarray, groups: int) -> tuple[str, np.ndarray, bool]:
    """TOSA operator and weight layout for a convolution filter ``w`` [O, I/groups, KH, KW].

    Returns ``(kind, weight, block_diagonal)``: CONV2D with [O, KH, KW, I], or
    DEPTHWISE_CONV2D with [KH, KW, C, M] when every group is one input channel; other
    grouped convolutions become one CONV2D with a block-diagonal filter (exact, and
    within the operator set the NPU runs, at groups times the multiplies), flagged by
    ``block_diagonal``.
    """
    oc, cg, kh, kw = w.shape
    ch = cg * groups
    if groups == 1:
        return "CONV2D", w.transpose(0, 2, 3, 1), False
    if cg == 1:
        return "DEPTHWISE_CONV2D", w.reshape(ch, oc // ch, kh, kw).transpose(2, 3, 0, 1), False
    og = oc // groups
    full = np.zeros((oc, ch, kh, kw), np.float32)
    for g in range(groups):
        full[g * og:(g + 1) * og, g * cg:(g + 1) * cg] = w[g * og:(g + 1) * og]
    return "CONV2D", full.transpose(0, 2, 3, 1), True


def conv_input(c: LayoutBuilder, x: Val, kernel, stride, dil, pads) -> tuple[str, list[int]]:
    """The NHWC input of a convolution of the rank-4 NCHW value ``x`` and its TOSA
    ``pad`` [top, bottom, left, right], made exact (:func:`fit_window`, :func:`slice_tail`).

    ``pads`` is ((top, bottom), (left, right)).
    """
    h, w = x.shape[2], x.shape[3]
    (pt, pb), (pl, pr) = pads
    pb, drop_h = fit_window(h, kernel[0], stride[0], dil[0], pt, pb)
    pr, drop_w = fit_window(w, kernel[1], stride[1], dil[1], pl, pr)
    xin = c.physical(x, NHWC)
    if drop_h or drop_w:
        xin = slice_tail(c, xin, {1: drop_h, 2: drop_w})
    return xin, [pt, pb, pl, pr]


def conv_attrs(pad, stride, dil) -> dict:
    """Attributes of a float CONV2D / DEPTHWISE_CONV2D."""
    return {"pad": list(pad), "stride": list(stride), "dilation": list(dil),
            "local_bound": False, "acc_type": "FP32"}


def pool_operands(c: LayoutBuilder, kind: str, xin: str, kernel, stride,
                  pad) -> tuple[list[str], dict]:
    """Inputs and attributes of a float MAX_POOL2D / AVG_POOL2D of NHWC tensor ``xin``."""
    attrs = {"kernel": list(kernel), "stride": list(stride), "pad": list(pad)}
    inputs = [xin]
    if kind == "AVG_POOL2D":
        zp = c.zero_point("fp32")
        inputs += [zp, zp]
        attrs["acc_type"] = "FP32"
    else:
        attrs["nan_mode"] = "PROPAGATE"
    return inputs, attrs


def zero_pad_hw(c: LayoutBuilder, xin: str, pad, base: str) -> str:
    """PAD of NHWC tensor ``xin`` with zeros: ``pad`` is [top, bottom, left, right]."""
    n, h, w, ch = c.block.tensors[xin].shape
    pt, pb, pl, pr = pad
    padded = [n, h + pt + pb, w + pl + pr, ch]
    return c.emit("PAD", [xin, c.shape_const([0, 0, pt, pb, pl, pr, 0, 0], base + "_pads"),
                          c.const(np.zeros(1), "fp32", base + "_padval", (1,))],
                  padded, "fp32", base=base + "_padded")
