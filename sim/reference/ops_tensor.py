"""Tensor operators (spec 2.3), integer modes: ARGMAX, AVG_POOL2D, CONV2D, CONV3D,
DEPTHWISE_CONV2D, FULLY_CONNECTED (draft only), MATMUL, MAX_POOL2D, TRANSPOSE_CONV2D.

Both graph forms: TOSA 1.0 passes zero points as input tensors (``[1]``-shaped, of the
data's type) and has ``acc_type``; the draft passes them as attributes.

Speed: convolutions are im2col + one matrix product per chunk of output rows.  The
product runs in floating point (BLAS) whenever that is exact: every product and every
partial sum is an integer below 2**24 (float32) or 2**53 (float64), which a bound on the
operands proves beforehand; otherwise in int64.

The spec accumulates with ``apply_add_s<out_t>``, whose REQUIRE holds for *every* partial
sum in the loop order.  When the operand bound shows no partial sum can leave the
accumulator type, only the final bias addition is checked; otherwise the partial sums are
recomputed in the spec's order and checked (a slow path real networks do not reach).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from sim import tosa_helpers as th
from sim.reference.ops_support import (check_output_shape, check_types, has_input,
                                       int_list, operand, scalar_int)
from sim.reference.registry import register
from tosa_ir import INT_RANGES

_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53
# Elements per im2col chunk (float64: 8 bytes each -> 64 MB).
_CHUNK_ELEMS = 1 << 23

CONV_TYPES = [("int8", "int8", "int32"), ("int8", "int4", "int32"), ("int16", "int8", "int48")]


# ---------------------------------------------------------------------------------------
# Shared argument handling
def _zero_point(ctx, inputs, index: int, names, dtype: str, arg: str) -> int:
    """A zero point from input tensor ``index`` (1.0, shape [1] of ``dtype``) or attribute."""
    if has_input(ctx, index):
        zp = np.asarray(inputs[index])
        ctx.error_if(zp.shape != (1,), arg, f"{arg} shape != [1]")
        ctx.error_if(ctx.in_type(index) != dtype, arg, f"type of {arg} != type of its data")
        return int(zp.reshape(-1)[0])
    return scalar_int(operand(ctx, inputs, index, names, default=0))


def _acc_type(ctx, expected: str) -> None:
    """ERROR_IF(acc_type is not the accumulator of this mode) for the 1.0 attribute."""
    for key in ("acc_type", "acc_size"):
        value = ctx.attr(key)
        if value is not None and value != "":
            name = str(value).split(".")[-1].lower()
            ctx.error_if(name != expected, key, f"{key} {value} != {expected} for this mode")
            return


def _attr_ints(ctx, key: str, length: int) -> list[int]:
    value = ctx.attr(key)
    ctx.error_if(value is None, key, f"{key} is missing")
    values = int_list(value)
    ctx.error_if(len(values) != length, key, f"{key} must have {length} values")
    return values


def _out_range(dtype: str) -> tuple[int, int]:
    return INT_RANGES[dtype]


def _max_abs(a: np.ndarray, zp: int = 0) -> int:
    """max |a - zp|, computed on ``a``'s own (narrow) type: no wide temporary."""
    if a.size == 0:
        return 0
    return max(abs(int(a.max()) - zp), abs(int(a.min()) - zp))


def _centered(a: np.ndarray, zp: int, dtype) -> np.ndarray:
    """a - zp in ``dtype`` (exact: |a - zp| < 2**17 for the 8/16-bit types here)."""
    out = a.astype(dtype)
    if zp:
        out -= zp
    return out


# ---------------------------------------------------------------------------------------
# Exact integer matrix products
def _exact_matmul(a: np.ndarray, b: np.ndarray, bound: int) -> np.ndarray:
    """a @ b (int64 operands) exactly, in float when ``bound`` proves it exact."""
    if bound < _F32_EXACT:
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.int64)
    if bound < _F64_EXACT:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return np.matmul(a, b)


def _check_partial_sums(ctx, cols: np.ndarray, wmat: np.ndarray, acc: str) -> None:
    """REQUIRE every partial sum of ``cols @ wmat`` (over the K axis, in order) fits ``acc``.

    Slow path: only used when an operand bound cannot rule overflow out.
    """
    lo, hi = _out_range(acc)
    m, k = cols.shape
    oc = wmat.shape[1]
    rows = max(1, _CHUNK_ELEMS // max(1, k * oc))
    for r0 in range(0, m, rows):
        sums = np.cumsum(cols[r0:r0 + rows, :, None] * wmat[None, :, :], axis=1)
        ctx.require(sums.min() >= lo and sums.max() <= hi,
                    f"apply_add_s<{acc}>: accumulator partial sum out of {acc} range")


def _add_bias(ctx, acc: np.ndarray, bias: np.ndarray, out_t: str, bound: int) -> np.ndarray:
    """acc = apply_add_s<out_t>(acc, bias) with its REQUIRE."""
    lo, hi = _out_range(out_t)
    total = acc + bias
    if bound + _max_abs(bias) > hi:
        ctx.require(total.min() >= lo and total.max() <= hi,
                    f"apply_add_s<{out_t}>(acc, bias): result out of {out_t} range")
    return total


def _bias_vector(ctx, bias: np.ndarray, channels: int, out_t: str) -> np.ndarray:
    bias = np.asarray(bias)
    ctx.error_if(ctx.in_type(2) != out_t, "bias", "bias type != out_t")
    ctx.error_if(bias.ndim != 1, "bias", "rank(bias) != 1")
    bc = bias.shape[0]
    ctx.error_if(bc != channels and bc != 1, "bias", "BC != OC && BC != 1")
    return np.broadcast_to(bias.astype(np.int64), (channels,))


# ---------------------------------------------------------------------------------------
# Convolutions (CONV2D, CONV3D share this)
def _window_view(xp: np.ndarray, out_spatial, kernel, stride, dilation) -> np.ndarray:
    """View [N, *out_spatial, *kernel, C] of padded ``xp`` [N, *spatial, C]: the patches."""
    n_sp = len(kernel)
    st = xp.strides
    shape = (xp.shape[0],) + tuple(out_spatial) + tuple(kernel) + (xp.shape[-1],)
    strides = ((st[0],) + tuple(st[1 + i] * stride[i] for i in range(n_sp))
               + tuple(st[1 + i] * dilation[i] for i in range(n_sp)) + (st[-1],))
    return as_strided(xp, shape, strides, writeable=False)


def _conv_args(ctx, inputs, n_sp: int):
    """Inputs, zero points and attributes of CONV2D / CONV3D / DEPTHWISE / TRANSPOSE."""
    x, w, bias = (np.asarray(a) for a in inputs[:3])
    in_t, w_t, out_t = ctx.in_type(0), ctx.in_type(1), ctx.out_type()
    check_types(ctx, "input", (in_t, w_t, out_t), CONV_TYPES)
    _acc_type(ctx, out_t)
    izp = _zero_point(ctx, inputs, 3, ("input_zp",), in_t, "input_zp")
    wzp = _zero_point(ctx, inputs, 4, ("weight_zp",), w_t, "weight_zp")
    ctx.error_if(in_t != "int8" and izp != 0, "input_zp", "in_t != i8_t && input_zp != 0")
    ctx.error_if(w_t != "int8" and wzp != 0, "weight_zp", "weight_t != i8_t && weight_zp != 0")
    ctx.error_if(x.ndim != n_sp + 2, "input", f"rank(input) != {n_sp + 2}")
    ctx.error_if(w.ndim != n_sp + 2, "weight", f"rank(weight) != {n_sp + 2}")
    return x, w, bias, izp, wzp, in_t, out_t


def _conv_level(ctx, kernel, dilation, pad, stride):
    lim = ctx.limits
    if lim is None:
        return
    for k, d in zip(kernel, dilation):
        ctx.level_check(d * k <= lim["MAX_KERNEL"], "dilation * K <= MAX_KERNEL")
    for p in pad:
        ctx.level_check(p <= lim["MAX_KERNEL"], "pad <= MAX_KERNEL")
    for s in stride:
        ctx.level_check(s <= lim["MAX_STRIDE"], "stride <= MAX_STRIDE")


def _conv_out_size(ctx, size, pad_a, pad_b, k, dil, stride, axis: str) -> int:
    """idiv_check(I - 1 + pad_a + pad_b - (K - 1) * dilation, stride) + 1, with its ERROR_IF."""
    num = size - 1 + pad_a + pad_b - (k - 1) * dil
    ctx.error_if(not th.idiv_check_ok(num, stride), "stride",
                 f"idiv_check: (I{axis} - 1 + pads - (K{axis} - 1) * dilation) % stride != 0")
    return num // stride + 1


def _conv_nd(ctx, inputs, n_sp: int):
    x, w, bias, izp, wzp, in_t, out_t = _conv_args(ctx, inputs, n_sp)
    pad = _attr_ints(ctx, "pad", 2 * n_sp)
    stride = _attr_ints(ctx, "stride", n_sp)
    dilation = _attr_ints(ctx, "dilation", n_sp)
    kernel = w.shape[1:1 + n_sp]
    _conv_level(ctx, kernel, dilation, pad, stride)
    ctx.error_if(min(pad) < 0, "pad", "pad < 0")
    ctx.error_if(min(stride) < 1, "stride", "stride < 1")
    ctx.error_if(min(dilation) < 1, "dilation", "dilation < 1")
    n, ic = x.shape[0], x.shape[-1]
    oc = w.shape[0]
    ctx.error_if(w.shape[-1] != ic, "weight", "weight IC != input IC")
    axes = "DHW"[3 - n_sp:]
    out_sp = tuple(
        _conv_out_size(ctx, x.shape[1 + i], pad[2 * i], pad[2 * i + 1], kernel[i],
                       dilation[i], stride[i], axes[i])
        for i in range(n_sp))
    check_output_shape(ctx, (n,) + out_sp + (oc,),
                       text="output shape != [N, O(D,)H, OW, OC] from the convolution")
    bias_v = _bias_vector(ctx, bias, oc, out_t)
    ctx.error_if(min(out_sp) < 1, "output", "output size < 1")

    # Zero-point subtraction (apply_sub_s: values of 8/16-bit types minus a zp of the same
    # type always fit the int32/int48 accumulator), then padding with zeros, which is what
    # skipping out-of-bounds taps amounts to.
    k = int(np.prod(kernel)) * ic
    bound = k * _max_abs(x, izp) * _max_abs(w, wzp)
    use = np.float32 if bound < _F32_EXACT else np.float64 if bound < _F64_EXACT else np.int64
    xs = _centered(x, izp, use)
    xp = np.pad(xs, [(0, 0)] + [(pad[2 * i], pad[2 * i + 1]) for i in range(n_sp)] + [(0, 0)])
    patches = _window_view(xp, out_sp, kernel, stride, dilation)
    wmat = _centered(w, wzp, use).reshape(oc, k).T
    out = np.empty((n,) + out_sp + (oc,), dtype=np.int64)
    m_per_row = int(np.prod(out_sp[1:]))  # output positions per outermost spatial index
    rows = max(1, _CHUNK_ELEMS // max(1, m_per_row * k))
    for b in range(n):
        for r0 in range(0, out_sp[0], rows):
            cols = patches[b, r0:r0 + rows].reshape(-1, k)
            part = out[b, r0:r0 + rows]
            part[...] = np.matmul(cols, wmat).reshape(part.shape)
    lo, hi = _out_range(out_t)
    if bound > hi:
        # Partial sums may leave the accumulator type: check them in the spec's order
        # (ky, kx, ic), which is the im2col column order.
        wmat64 = wmat.astype(np.int64)
        for b in range(n):
            cols = patches[b].reshape(-1, k).astype(np.int64)
            _check_partial_sums(ctx, cols, wmat64, out_t)
    return [_add_bias(ctx, out, bias_v, out_t, bound)]


@register("CONV2D")
def conv2d(ctx, inputs):
    return _conv_nd(ctx, inputs, 2)


@register("CONV3D")
def conv3d(ctx, inputs):
    return _conv_nd(ctx, inputs, 3)


@register("DEPTHWISE_CONV2D")
def depthwise_conv2d(ctx, inputs):
    x, w, bias, izp, wzp, in_t, out_t = _conv_args(ctx, inputs, 2)
    pad = _attr_ints(ctx, "pad", 4)
    stride = _attr_ints(ctx, "stride", 2)
    dilation = _attr_ints(ctx, "dilation", 2)
    kh, kw, wc, m = w.shape
    _conv_level(ctx, (kh, kw), dilation, pad, stride)
    ctx.error_if(min(pad) < 0, "pad", "pad < 0")
    ctx.error_if(min(stride) < 1, "stride", "stride < 1")
    ctx.error_if(min(dilation) < 1, "dilation", "dilation < 1")
    n, ih, iw, c = x.shape
    ctx.error_if(wc != c, "weight", "weight C != input C")
    oh = _conv_out_size(ctx, ih, pad[0], pad[1], kh, dilation[0], stride[0], "H")
    ow = _conv_out_size(ctx, iw, pad[2], pad[3], kw, dilation[1], stride[1], "W")
    check_output_shape(ctx, (n, oh, ow, c * m), text="output shape != [N, OH, OW, C * M]")
    bias_v = _bias_vector(ctx, bias, c * m, out_t)
    ctx.error_if(oh < 1 or ow < 1, "output", "output size < 1")

    bound = kh * kw * _max_abs(x, izp) * _max_abs(w, wzp)
    xs = _centered(x, izp, np.int64)
    ws = _centered(w, wzp, np.int64)
    lo, hi = _out_range(out_t)
    check = bound > hi
    xp = np.pad(xs, [(0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)])
    patches = _window_view(xp, (oh, ow), (kh, kw), stride, dilation)
    acc = np.zeros((n, oh, ow, c, m), dtype=np.int64)
    # One vectorised multiply-add per kernel tap, in the spec's (ky, kx) order.
    for ky in range(kh):
        for kx in range(kw):
            acc += patches[:, :, :, ky, kx, :, None] * ws[ky, kx][None, None, None]
            if check:
                ctx.require(acc.min() >= lo and acc.max() <= hi,
                            f"apply_add_s<{out_t}>: accumulator partial sum out of range")
    return [_add_bias(ctx, acc.reshape(n, oh, ow, c * m), bias_v, out_t, bound)]


@register("TRANSPOSE_CONV2D")
def transpose_conv2d(ctx, inputs):
    x, w, bias, izp, wzp, in_t, out_t = _conv_args(ctx, inputs, 2)
    out_pad = _attr_ints(ctx, "out_pad", 4)
    stride = _attr_ints(ctx, "stride", 2)
    oc, kh, kw, wic = w.shape
    n, ih, iw, ic = x.shape
    lim = ctx.limits
    if lim is not None:
        ctx.level_check(kh <= lim["MAX_KERNEL"] and kw <= lim["MAX_KERNEL"], "K <= MAX_KERNEL")
        ctx.level_check(max(out_pad) <= lim["MAX_KERNEL"], "out_pad <= MAX_KERNEL")
        ctx.level_check(max(stride) <= lim["MAX_STRIDE"], "stride <= MAX_STRIDE")
    pt, pb, pl, pr = out_pad
    ctx.error_if(pt <= -kh or pb <= -kh, "out_pad", "out_pad_top/bottom <= -KH")
    ctx.error_if(pl <= -kw or pr <= -kw, "out_pad", "out_pad_left/right <= -KW")
    ctx.error_if(min(stride) < 1, "stride", "stride < 1")
    ctx.error_if(wic != ic, "weight", "weight IC != input IC")
    sy, sx = stride
    oh = (ih - 1) * sy + pt + pb + kh
    ow = (iw - 1) * sx + pl + pr + kw
    out_shape = ctx.attr("out_shape")
    if out_shape is not None and len(int_list(out_shape)) == 4:  # draft form attribute
        ctx.error_if(int_list(out_shape) != [n, oh, ow, oc], "out_shape",
                     "out_shape != [N, OH, OW, OC]")
    check_output_shape(ctx, (n, oh, ow, oc),
                       text="OH != (IH - 1) * stride_y + out_pad_top + out_pad_bottom + KH "
                            "or OW != ...")
    bias_v = _bias_vector(ctx, bias, oc, out_t)

    maxprod = _max_abs(x, izp) * _max_abs(w, wzp)
    xs = _centered(x, izp, np.int64)
    ws = _centered(w, wzp, np.int64)
    # Each output element sums at most ceil(KH/sy) * ceil(KW/sx) * IC products.
    per_out = -(-kh // sy) * -(-kw // sx) * ic
    bound = per_out * maxprod
    lo, hi = _out_range(out_t)
    out = np.broadcast_to(bias_v, (n, oh, ow, oc)).copy()

    def tap_ranges(ky, kx):
        # Input positions whose output oy = iy * sy + (pt + ky) falls inside [0, OH):
        # iy >= ceil(-(pt + ky) / sy) and iy <= floor((OH - 1 - pt - ky) / sy).
        iy0, iy1 = max(0, -((pt + ky) // sy)), min(ih - 1, (oh - 1 - pt - ky) // sy)
        ix0, ix1 = max(0, -((pl + kx) // sx)), min(iw - 1, (ow - 1 - pl - kx) // sx)
        return iy0, iy1, ix0, ix1

    if bound + _max_abs(bias_v) <= hi:
        # All contributions at once: [N*IH*IW, IC] x [IC, OC*KH*KW].
        contrib = _exact_matmul(xs.reshape(-1, ic), ws.transpose(3, 0, 1, 2).reshape(ic, -1),
                                ic * maxprod).reshape(n, ih, iw, oc, kh, kw)
        for ky in range(kh):
            for kx in range(kw):
                iy0, iy1, ix0, ix1 = tap_ranges(ky, kx)
                if iy0 > iy1 or ix0 > ix1:
                    continue
                oy0, ox0 = iy0 * sy + pt + ky, ix0 * sx + pl + kx
                out[:, oy0:oy0 + (iy1 - iy0) * sy + 1:sy, ox0:ox0 + (ix1 - ix0) * sx + 1:sx] \
                    += contrib[:, iy0:iy1 + 1, ix0:ix1 + 1, :, ky, kx]
        return [out]
    # Slow path: contributions to one output element arrive in the spec's loop order
    # (iy, ix, ic ascending), i.e. taps with ky, kx descending, then ic ascending.
    for ky in reversed(range(kh)):
        for kx in reversed(range(kw)):
            iy0, iy1, ix0, ix1 = tap_ranges(ky, kx)
            if iy0 > iy1 or ix0 > ix1:
                continue
            oy0, ox0 = iy0 * sy + pt + ky, ix0 * sx + pl + kx
            region = out[:, oy0:oy0 + (iy1 - iy0) * sy + 1:sy,
                         ox0:ox0 + (ix1 - ix0) * sx + 1:sx]
            xin = xs[:, iy0:iy1 + 1, ix0:ix1 + 1, :]
            for c in range(ic):
                region += xin[..., c, None] * ws[:, ky, kx, c]
                ctx.require(region.min() >= lo and region.max() <= hi,
                            f"apply_add_s<{out_t}>: accumulator partial sum out of range")
    return [out]


# ---------------------------------------------------------------------------------------
# Matrix products
def _matmul_checked(ctx, a: np.ndarray, b: np.ndarray, out_t: str) -> np.ndarray:
    """Batched a @ b (int64) with the accumulator REQUIRE on every partial sum."""
    k = a.shape[-1]
    bound = k * _max_abs(a) * _max_abs(b)
    out = _exact_matmul(a, b, bound)
    lo, hi = _out_range(out_t)
    if bound > hi:
        for i in range(a.shape[0]):
            _check_partial_sums(ctx, a[i], b[i], out_t)
    return out


@register("MATMUL")
def matmul(ctx, inputs):
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    in_t, in2_t, out_t = ctx.in_type(0), ctx.in_type(1), ctx.out_type()
    check_types(ctx, "A", (in_t, in2_t, out_t),
                [("int8", "int8", "int32"), ("int16", "int16", "int48")])
    azp = _zero_point(ctx, inputs, 2, ("A_zp", "a_zp"), in_t, "A_zp")
    bzp = _zero_point(ctx, inputs, 3, ("B_zp", "b_zp"), in_t, "B_zp")
    ctx.error_if(in_t != "int8" and (azp != 0 or bzp != 0), "A_zp",
                 "in_t != i8_t && (A_zp != 0 || B_zp != 0)")
    ctx.error_if(a.ndim != 3 or b.ndim != 3, "A", "rank(A) != 3 || rank(B) != 3")
    n, h, c = a.shape
    ctx.error_if(b.shape[0] != n or b.shape[1] != c, "B", "B shape != [N, C, W]")
    check_output_shape(ctx, (n, h, b.shape[2]), text="output shape != [N, H, W]")
    return [_matmul_checked(ctx, _centered(a, azp, np.int64), _centered(b, bzp, np.int64),
                            out_t)]


@register("FULLY_CONNECTED")
def fully_connected(ctx, inputs):
    """Draft-spec FULLY_CONNECTED (TOSA 1.0 expresses it as RESHAPE + CONV2D)."""
    x, w, bias = (np.asarray(v) for v in inputs[:3])
    in_t, w_t, out_t = ctx.in_type(0), ctx.in_type(1), ctx.out_type()
    check_types(ctx, "input", (in_t, w_t, out_t), CONV_TYPES)
    izp = _zero_point(ctx, inputs, 3, ("input_zp",), in_t, "input_zp")
    wzp = _zero_point(ctx, inputs, 4, ("weight_zp",), w_t, "weight_zp")
    ctx.error_if(in_t != "int8" and izp != 0, "input_zp", "in_t != i8_t && input_zp != 0")
    ctx.error_if(w_t != "int8" and wzp != 0, "weight_zp", "weight_t != i8_t && weight_zp != 0")
    ctx.error_if(x.ndim != 2 or w.ndim != 2, "input", "rank(input) != 2 || rank(weight) != 2")
    n, ic = x.shape
    oc = w.shape[0]
    ctx.error_if(w.shape[1] != ic, "weight", "weight IC != input IC")
    check_output_shape(ctx, (n, oc), text="output shape != [N, OC]")
    bias_v = _bias_vector(ctx, bias, oc, out_t)
    xs = _centered(x, izp, np.int64)
    ws = _centered(w, wzp, np.int64).T
    acc = _matmul_checked(ctx, xs[None], ws[None], out_t)[0]
    return [_add_bias(ctx, acc, bias_v, out_t, ic * _max_abs(x, izp) * _max_abs(w, wzp))]


# ---------------------------------------------------------------------------------------
# Pooling
def _pool_args(ctx):
    kernel = _attr_ints(ctx, "kernel", 2)
    stride = _attr_ints(ctx, "stride", 2)
    pad = _attr_ints(ctx, "pad", 4)
    lim = ctx.limits
    if lim is not None:
        for kv in kernel:
            ctx.level_check(kv <= lim["MAX_KERNEL"], "kernel <= MAX_KERNEL")
        for s in stride:
            ctx.level_check(s <= lim["MAX_STRIDE"], "stride <= MAX_STRIDE")
        for p in pad:
            ctx.level_check(p <= lim["MAX_KERNEL"], "pad <= MAX_KERNEL")
    ky, kx = kernel
    ctx.error_if(ky < 1 or kx < 1, "kernel", "kernel_y < 1 || kernel_x < 1")
    ctx.error_if(min(stride) < 1, "stride", "stride_y < 1 || stride_x < 1")
    ctx.error_if(min(pad) < 0, "pad", "pad < 0")
    pt, pb, pl, pr = pad
    ctx.error_if(pr >= kx or pl >= kx, "pad", "pad_right >= kernel_x || pad_left >= kernel_x")
    ctx.error_if(pt >= ky or pb >= ky, "pad", "pad_top >= kernel_y || pad_bottom >= kernel_y")
    return kernel, stride, pad


def _pool_out(ctx, x, kernel, stride, pad):
    n, ih, iw, c = x.shape
    num_h = ih + pad[0] + pad[1] - kernel[0]
    num_w = iw + pad[2] + pad[3] - kernel[1]
    ctx.error_if(not th.idiv_check_ok(num_h, stride[0]), "stride",
                 "idiv_check: (IH + pad_top + pad_bottom - kernel_y) % stride_y != 0")
    ctx.error_if(not th.idiv_check_ok(num_w, stride[1]), "stride",
                 "idiv_check: (IW + pad_left + pad_right - kernel_x) % stride_x != 0")
    oh, ow = num_h // stride[0] + 1, num_w // stride[1] + 1
    check_output_shape(ctx, (n, oh, ow, c), text="output shape != [N, OH, OW, C]")
    ctx.error_if(oh < 1 or ow < 1, "output", "output size < 1")
    return oh, ow


def _taps(xp, kernel, stride, oh, ow):
    """(ky, kx, view [N, OH, OW, C] of padded ``xp`` read by that kernel tap), spec order."""
    sy, sx = stride
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            yield ky, kx, xp[:, ky:ky + (oh - 1) * sy + 1:sy, kx:kx + (ow - 1) * sx + 1:sx, :]


@register("MAX_POOL2D")
def max_pool2d(ctx, inputs):
    x = np.asarray(inputs[0])
    dtype = ctx.in_type(0)
    check_types(ctx, "input", (dtype, ctx.out_type()), [("int8", "int8"), ("int16", "int16")])
    ctx.error_if(x.ndim != 4, "input", "rank(input) != 4")
    kernel, stride, pad = _pool_args(ctx)
    oh, ow = _pool_out(ctx, x, kernel, stride, pad)
    # Padding with the type's minimum is the same as skipping it: every window holds at
    # least one real value because pads are smaller than the kernel.
    lo = INT_RANGES[dtype][0]
    xp = np.pad(x, [(0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)], constant_values=lo)
    out = None
    for _, _, view in _taps(xp, kernel, stride, oh, ow):
        out = view.copy() if out is None else np.maximum(out, view, out=out)
    return [out]


@register("AVG_POOL2D")
def avg_pool2d(ctx, inputs):
    x = np.asarray(inputs[0])
    dtype = ctx.in_type(0)
    check_types(ctx, "input", (dtype, ctx.out_type()), [("int8", "int8"), ("int16", "int16")])
    _acc_type(ctx, "int32")
    izp = _zero_point(ctx, inputs, 1, ("input_zp",), dtype, "input_zp")
    ozp = _zero_point(ctx, inputs, 2, ("output_zp",), dtype, "output_zp")
    ctx.error_if(dtype != "int8" and izp != 0, "input_zp", "in_out_t != i8_t && input_zp != 0")
    ctx.error_if(dtype != "int8" and ozp != 0, "output_zp",
                 "in_out_t != i8_t && output_zp != 0")
    ctx.error_if(x.ndim != 4, "input", "rank(input) != 4")
    kernel, stride, pad = _pool_args(ctx)
    oh, ow = _pool_out(ctx, x, kernel, stride, pad)
    n, ih, iw, c = x.shape
    xp = np.pad(_centered(x, izp, np.int64), [(0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)])
    lo, hi = INT_RANGES["int32"]
    check = kernel[0] * kernel[1] * _max_abs(x, izp) > hi
    acc = np.zeros((n, oh, ow, c), dtype=np.int64)
    for _, _, view in _taps(xp, kernel, stride, oh, ow):
        acc += view
        if check:
            ctx.require(acc.min() >= lo and acc.max() <= hi,
                        "apply_add_s<int32>: accumulator partial sum out of range")
    # Valid (non-padding) taps per output position: count_y[oy] * count_x[ox].
    def counts(size, out, k, s, p):
        start = np.arange(out) * s - p
        return np.clip(np.minimum(start + k, size) - np.maximum(start, 0), 0, None)
    count = counts(ih, oh, kernel[0], stride[0], pad[0])[:, None] * \
        counts(iw, ow, kernel[1], stride[1], pad[2])[None, :]
    multiplier, shift = th.reciprocal_scale(count, ctx.require)
    acc = th.apply_scale_32(acc, multiplier[None, :, :, None], shift[None, :, :, None],
                            False, ctx.require)
    acc = th.apply_add_s(acc, ozp, "int32", ctx.require)
    return [th.saturate(acc, dtype)]


# ---------------------------------------------------------------------------------------
@register("ARGMAX")
def argmax(ctx, inputs):
    x = np.asarray(inputs[0])
    in_t, out_t = ctx.in_type(0), ctx.out_type()
    check_types(ctx, "input", (in_t, out_t), [("int8", "int32"), ("int16", "int32")])
    axis = int(ctx.attr("axis", 0))
    ctx.error_if(x.ndim < 1, "input", "rank(input) < 1")
    ctx.error_if(axis < 0 or axis >= x.ndim, "axis", "axis < 0 || axis >= rank(shape1)")
    check_output_shape(ctx, x.shape[:axis] + x.shape[axis + 1:],
                       text="flatten(left_shape, right_shape) != shape")
    # np.argmax returns the first maximum, as the spec's strict comparison does.
    return [np.argmax(x, axis=axis).astype(np.int64)]
