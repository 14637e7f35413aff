"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, MAX_POOL_2D and AVERAGE_POOL_2D.

TFLite's reference kernels accumulate ``sum((x - x_zp) * (w - w_zp)) + bias`` in int32
(int64 for int16 activations), requantize with ``MultiplyByQuantizedMultiplier`` per
output channel, add the output zero point and clamp to the fused activation's range.
TOSA: CONV2D / DEPTHWISE_CONV2D (zero points as inputs, int32 or int48 accumulator),
RESCALE (DOUBLE_ROUND, per channel; for int48 the 16-bit multiplier TFLite's 64-bit
path uses), CLAMP.  FULLY_CONNECTED is RESHAPE + 1x1 CONV2D + RESHAPE.

Not bit-exact by construction: TFLite's reference FULLY_CONNECTED (TF >= 2.16) rounds
``acc * scale`` in double precision instead of using its fixed-point multiplier; the
lowering uses one SINGLE_ROUND RESCALE with the 31-bit multiplier of that scale, which
can differ by 1 in the rare elements whose product lies within a relative 2**-31 of a
rounding midpoint (bounded in tests/test_circle_ops.py).  The same holds for 16x8
FULLY_CONNECTED (int16 activations, int64 bias): when the weights and bias bound every
accumulator to int32, the int48 accumulator moves to int32 exactly and gets that same RESCALE
(TOSA has no 32-bit multiplier from int48); otherwise the 16-bit multiplier of
``MultiplyByQuantizedMultiplier(int64)`` is used, which can be 1 off TFLite's result.

TOSA wants ``(I - 1 + pads - (K - 1) * dilation)`` divisible by the stride; TFLite's
VALID padding rounds down, so the input rows/columns no window reaches are sliced off.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.frontends.circle.lower import Lowerer
from compiler.frontends.circle.model import activation_name
from compiler.frontends.circle.quant import activation_range, quantize_multiplier
from compiler.frontends.circle.schema import PADDINGS


def _opts(lw: Lowerer, op) -> dict:
    if op.options is None:
        raise lw.invalid("builtin options are missing")
    return op.options


def _padding(lw: Lowerer, mode: int, size: int, k: int, stride: int, dilation: int,
             out_size: int) -> tuple[int, int, int]:
    """(pad_before, pad_after, input rows to drop at the end) for one spatial axis."""
    if mode not in PADDINGS:
        raise lw.invalid(f"unknown padding {mode}")
    eff = (k - 1) * dilation + 1
    if PADDINGS[mode] == "SAME":
        expected = -(-size // stride)
        total = max((expected - 1) * stride + eff - size, 0)
        before, after = total // 2, total - total // 2
    else:
        expected = (size - eff) // stride + 1 if size >= eff else 0
        before = after = 0
    if expected != out_size or expected < 1:
        raise lw.invalid(f"output size {out_size} does not match the {PADDINGS[mode]} "
                         f"padding of input size {size} (expected {expected})")
    drop = (size + before + after - eff) % stride
    if drop:  # unused trailing input: take it out of the padding first, then slice
        cut = min(drop, after)
        after -= cut
        drop -= cut
    return before, after, drop


def _slice_tail(lw: Lowerer, x: str, drop_h: int, drop_w: int) -> str:
    if not drop_h and not drop_w:
        return x
    b = lw.b
    n, h, w, c = b.shape(x)
    size = (n, h - drop_h, w - drop_w, c)
    return b.emit("SLICE", [x, b.shape_const([0, 0, 0, 0]), b.shape_const(size)], size,
                  b.dtype(x), "slice")


def _multipliers(lw: Lowerer, in_scale: float, w_scales: np.ndarray, out_scale: float,
                 channels: int, float_product: bool):
    """Per-channel TFLite multipliers (double arithmetic on the float32 scales, as
    PopulateConvolutionQuantizationParams; ``float_product`` multiplies input and filter
    scale in float32 first, as GetQuantizedConvolutionMultipler does)."""
    scales = np.broadcast_to(np.asarray(w_scales, np.float32), (channels,))
    mults, shifts = [], []
    for s in scales:
        if float_product:
            product = float(np.float32(in_scale) * np.float32(s))
        else:
            product = float(in_scale) * float(s)
        m, sh = quantize_multiplier(product / float(out_scale))
        mults.append(m)
        shifts.append(sh)
    return mults, shifts


def _bias(lw: Lowerer, position: int, channels: int, acc: str) -> np.ndarray:
    index = lw.input(position, optional=True)
    if index is None:
        return np.zeros(channels, np.int64)
    data = lw.const(index, "bias").astype(np.int64).reshape(-1)
    if data.size != channels:
        raise lw.invalid(f"bias has {data.size} values for {channels} output channels")
    lo, hi = (-(1 << 31), (1 << 31) - 1) if acc == "int32" else (-(1 << 47), (1 << 47) - 1)
    if data.size and (data.min() < lo or data.max() > hi):
        raise lw.unsupported(f"bias values do not fit the {acc} accumulator")
    return data


def _weights(lw: Lowerer, position: int):
    index = lw.input(position)
    tensor = lw.t(index)
    data = lw.const(index, "filter")
    quant = lw.quant(tensor)
    if tensor.type == "INT8":
        return data.astype(np.int64), quant, quant.zero_point.astype(np.int64)
    if tensor.type == "UINT8":
        return data.astype(np.int64) - 128, quant, quant.zero_point.astype(np.int64) - 128
    raise lw.unsupported(f"filter type {tensor.type} is not supported (int8 or uint8)")


def _conv_common(lw: Lowerer, op, kind: str) -> None:
    """CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED (as a 1x1 convolution)."""
    b = lw.b
    x = lw.activation(0)
    out, out_dtype = lw.out_type()
    w, wq, wzp = _weights(lw, 1)
    opts = _opts(lw, op)
    act = activation_name(opts["fused_activation_function"], op.where)
    acc = "int32" if x.dtype == "int8" else "int48"
    if x.dtype == "int16" and wzp.any():
        raise lw.unsupported("int16 activations need symmetric (zero point 0) weights")
    if wzp.size > 1 and wzp.any():
        raise lw.unsupported("per-channel weights must have zero point 0")
    xin = x.name

    if kind == "FULLY_CONNECTED":
        if opts["weights_format"] != 0:
            raise lw.unsupported("shuffled FULLY_CONNECTED weights are not supported")
        if w.ndim != 2:
            raise lw.invalid(f"weights must be 2-D, got shape {list(w.shape)}")
        oc, ic = w.shape
        total = math.prod(b.shape(xin))
        if total % ic:
            raise lw.invalid(f"input of {total} values is not a multiple of {ic} features")
        xin = b.reshape(xin, (total // ic, 1, 1, ic))
        weights = w.reshape(oc, 1, 1, ic)
        pad, stride, dilation, drop = [0, 0, 0, 0], [1, 1], [1, 1], (0, 0)
        channels = oc
        # TFLite's reference FULLY_CONNECTED requantizes in double:
        # round(acc * (double(in_scale) * double(w_scale) / double(out_scale))).
        float_product = False
    else:
        if len(b.shape(xin)) != 4 or w.ndim != 4:
            raise lw.invalid("convolution input and filter must be 4-D")
        n, ih, iw, ic = b.shape(xin)
        stride = [opts["stride_h"], opts["stride_w"]]
        dilation = [opts["dilation_h_factor"], opts["dilation_w_factor"]]
        if min(stride + dilation) < 1:
            raise lw.invalid(f"stride {stride} / dilation {dilation} must be >= 1")
        if kind == "CONV_2D":
            oc, kh, kw, wic = w.shape
            if wic != ic:
                raise lw.unsupported(f"grouped convolution (filter depth {wic}, input depth "
                                     f"{ic}) is not supported")
            weights, channels = w, oc
        else:
            _, kh, kw, cm = w.shape
            if w.shape[0] != 1 or cm % ic:
                raise lw.invalid(f"depthwise filter shape {list(w.shape)} does not fit "
                                 f"{ic} input channels")
            weights, channels = w.reshape(kh, kw, ic, cm // ic), cm
        if len(out.shape) != 4:
            raise lw.invalid("convolution output must be 4-D")
        pt, pb, dh = _padding(lw, opts["padding"], ih, kh, stride[0], dilation[0], out.shape[1])
        pl, pr, dw = _padding(lw, opts["padding"], iw, kw, stride[1], dilation[1], out.shape[2])
        pad, drop = [pt, pb, pl, pr], (dh, dw)
        float_product = False
    if channels != out.shape[-1]:
        raise lw.invalid(f"{channels} filter channels for {out.shape[-1]} output channels")

    xin = _slice_tail(lw, xin, *drop)
    bias = _bias(lw, 2, channels, acc)
    mults, shifts = _multipliers(lw, x.scale, wq.scale, out.quant.s, channels, float_product)
    out_zp = out.quant.zp - (128 if out.type == "UINT8" else 0)
    w_name = b.const(f"{out.name}_weights", weights, "int8")
    bias_name = b.const(f"{out.name}_bias", bias, acc)
    tosa_op = "DEPTHWISE_CONV2D" if kind == "DEPTHWISE_CONV_2D" else "CONV2D"
    n = b.shape(xin)[0]
    if kind == "FULLY_CONNECTED":
        acc_shape = (n, 1, 1, channels)
    else:
        acc_shape = (n, out.shape[1], out.shape[2], channels)
    accum = b.emit(tosa_op, [xin, w_name, bias_name, b.scalar(x.zp, x.dtype),
                             b.scalar(int(wzp[0]), "int8")],
                   acc_shape, acc, f"{out.name}_acc", pad=pad, stride=stride,
                   dilation=dilation, local_bound=False, acc_type=acc.upper())
    per_channel = len(set(zip(mults, shifts))) > 1
    if not per_channel:
        mults, shifts = mults[:1], shifts[:1]
    if acc == "int32" and kind == "FULLY_CONNECTED":
        # Not expressible exactly in integers: the closest TOSA form is one rounding of
        # acc * M / 2**(31 - s) (M the 31-bit multiplier of the same double scale).  It
        # differs from round(acc * scale) by 1 only when acc * scale lies within
        # |acc * scale| * 2**-31 of a rounding midpoint (or on a negative exact tie).
        from compiler.frontends.circle.quant import tosa_shift

        y = b.rescale(accum, out_dtype, mults, [tosa_shift(s, lw.where()) for s in shifts],
                      0, out_zp, double_round=False, per_channel=per_channel)
    elif acc == "int32":
        y = lw.requantize(accum, out_dtype, mults, shifts, 0, out_zp, per_channel=per_channel)
    elif kind == "FULLY_CONNECTED" and _fc_acc_bound(w, bias, x.dtype, x.zp) < 1 << 31:
        # 16x8 FULLY_CONNECTED: TFLite's reference kernel rounds acc * scale with the full
        # 31-bit precision (as for int8, above), not with MultiplyByQuantizedMultiplier's
        # 16-bit reduced multiplier, and TOSA's RESCALE takes no 32-bit multiplier from
        # int48.  Every accumulator this layer can produce fits int32 (bound from the
        # constant weights and bias), so it moves to int32 exactly and is requantized there.
        from compiler.frontends.circle.quant import tosa_shift

        wide = b.emit("RESCALE", [accum, b.const("multiplier", np.asarray([1 << 14]), "int16"),
                                  b.const("shift", np.asarray([14]), "int8"), b.scalar(0, "int48"),
                                  b.scalar(0, "int32")],
                      b.shape(accum), "int32", f"{out.name}_acc32", scale32=False,
                      rounding_mode="SINGLE_ROUND", per_channel=False, input_unsigned=False,
                      output_unsigned=False)
        y = b.rescale(wide, out_dtype, mults, [tosa_shift(s, lw.where()) for s in shifts],
                      0, out_zp, double_round=False, per_channel=per_channel)
    else:
        y = _rescale_int48(lw, accum, out_dtype, mults, shifts, out_zp, per_channel)
    lo, hi = activation_range(act, out.quant.s, out.quant.zp,
                              "uint8" if out.type == "UINT8" else out_dtype, op.where)
    y = lw.clamp_activation(y, *lw.shifted(out, lo, hi))
    lw.define(0, y)


def transpose_conv(lw: Lowerer, op) -> None:
    """TFLite TRANSPOSE_CONV, int8/uint8 and 16x8 (every version; the bias input is version
    3's): inputs output_shape, filter [OC, KH, KW, IC], input, bias.  The reference kernel
    scatters ``(x - x_zp) * w`` to ``out[i * stride - pad + k]`` with ``pad`` from
    ComputePaddingHeightWidth on the *output* size, adds the bias, requantizes per channel
    (MultiplyByQuantizedMultiplier) and clamps: TOSA TRANSPOSE_CONV2D with ``out_pad =
    [-pad_top, rest, -pad_left, rest]``, RESCALE (DOUBLE_ROUND), CLAMP.  16x8 (int16
    activations, zero point 0, int64 bias): the int64 accumulator is TOSA's int48 (int16 x
    int8 products over the layer's taps stay far inside it) and the 64-bit
    MultiplyByQuantizedMultiplier is the 16-bit RESCALE that CONV_2D's 16x8 form uses."""
    b = lw.b
    x = lw.activation(2)
    out, out_dtype = lw.out_type()
    w, wq, wzp = _weights(lw, 1)
    opts = _opts(lw, op)
    act = activation_name(opts["fused_activation_function"], op.where)
    acc = "int32" if x.dtype == "int8" else "int48"
    if x.dtype == "int16" and x.zp:
        raise lw.unsupported(f"int16 TRANSPOSE_CONV input zero point {x.zp} (16x8 quantization has 0)")
    if wzp.any():
        raise lw.unsupported("TRANSPOSE_CONV weights must have zero point 0")
    if len(b.shape(x.name)) != 4 or w.ndim != 4 or len(out.shape) != 4:
        raise lw.invalid("transpose convolution input, filter and output must be 4-D")
    n, ih, iw, ic = b.shape(x.name)
    oc, kh, kw, wic = w.shape
    _, oh, ow, ooc = out.shape
    if wic != ic or ooc != oc:
        raise lw.invalid(f"filter {list(w.shape)} does not fit input {ic} / output {ooc} channels")
    stride = [opts["stride_h"], opts["stride_w"]]
    if min(stride) < 1:
        raise lw.invalid(f"stride {stride} must be >= 1")
    if opts["padding"] not in PADDINGS:
        raise lw.invalid(f"unknown padding {opts['padding']}")
    pads = []
    for size, k, s in ((oh, kh, stride[0]), (ow, kw, stride[1])):
        # ComputePaddingWithOffset(stride, 1, in_size=size, k, out_size): total // 2.
        o = -(-size // s) if PADDINGS[opts["padding"]] == "SAME" else (size - k + s) // s
        pads.append(max((o - 1) * s + k - size, 0) // 2)
    out_pad = [-pads[0], oh - (ih - 1) * stride[0] - kh + pads[0],
               -pads[1], ow - (iw - 1) * stride[1] - kw + pads[1]]
    if min(out_pad[:2]) <= -kh or min(out_pad[2:]) <= -kw:
        raise lw.unsupported(f"output {oh}x{ow} needs padding beyond the {kh}x{kw} kernel")
    bias = _bias(lw, 3, oc, acc)
    mults, shifts = _multipliers(lw, x.scale, wq.scale, out.quant.s, oc, False)
    out_zp = out.quant.zp - (128 if out.type == "UINT8" else 0)
    accum = b.emit("TRANSPOSE_CONV2D", [x.name, b.const(f"{out.name}_weights", w, "int8"),
                                        b.const(f"{out.name}_bias", bias, acc),
                                        b.scalar(x.zp, x.dtype), b.scalar(0, "int8")],
                   (n, oh, ow, oc), acc, f"{out.name}_acc", out_pad=out_pad, stride=stride,
                   local_bound=False, acc_type=acc.upper())
    per_channel = len(set(zip(mults, shifts))) > 1
    if not per_channel:
        mults, shifts = mults[:1], shifts[:1]
    if acc == "int32":
        y = lw.requantize(accum, out_dtype, mults, shifts, 0, out_zp, per_channel=per_channel)
    else:
        y = _rescale_int48(lw, accum, out_dtype, mults, shifts, out_zp, per_channel)
    lo, hi = activation_range(act, out.quant.s, out.quant.zp,
                              "uint8" if out.type == "UINT8" else out_dtype, op.where)
    lw.define(0, lw.clamp_activation(y, *lw.shifted(out, lo, hi)))


def batch_matmul(lw: Lowerer, op) -> None:
    """TFLite BATCH_MATMUL, int8 and int16 (either operand may be a constant): ``sum((lhs -
    lhs_zp) * (rhs - rhs_zp))`` in int32 (int16: int64, zero points 0) over K,
    MultiplyByQuantizedMultiplier by the float32 product of the input scales over the output
    scale (GetQuantizedConvolutionMultipler), output zero point, the type's range.  TOSA: the
    adjoint operands transposed, leading axes flattened into MATMUL's N (equal batch shapes; a
    batch of 1 is broadcast by TILE), MATMUL with both zero points (int16: int48 accumulator,
    what TFLite's int64 one holds for K below 2**16), RESCALE (int8: DOUBLE_ROUND; int16: the
    16-bit multiplier of the 64-bit MultiplyByQuantizedMultiplier)."""
    b = lw.b
    lhs, rhs = lw.activation(0), lw.activation(1)
    out, out_dtype = lw.out_type()
    if not lhs.dtype == rhs.dtype == out_dtype or out_dtype not in ("int8", "int16"):
        raise lw.unsupported(f"BATCH_MATMUL of {lhs.dtype} x {rhs.dtype} -> {out_dtype} is not supported "
                             f"(int8 or int16 throughout)")
    wide = out_dtype == "int16"
    if wide and (lhs.zp or rhs.zp or out.quant.zp):
        raise lw.unsupported("int16 BATCH_MATMUL needs zero points 0 (TFLite's 16-bit quantization)")
    opts = op.options or {}
    names = []
    for v, adjoint in ((lhs, opts.get("adjoint_lhs", False)), (rhs, opts.get("adjoint_rhs", False))):
        shape = b.shape(v.name)
        if len(shape) < 2:
            raise lw.invalid(f"operand of rank {len(shape)} (at least 2)")
        name = v.name
        if adjoint:
            perms = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
            shape = tuple(shape[p] for p in perms)
            name = b.emit("TRANSPOSE", [name], shape, v.dtype, f"{out.name}_adj", perms=perms)
        names.append((name, tuple(shape)))
    (a, ashape), (c, cshape) = names
    m, k = ashape[-2:]
    k2, n = cshape[-2:]
    if k != k2:
        raise lw.invalid(f"inner dimensions {k} and {k2} differ")
    batch = tuple(int(d) for d in np.broadcast_shapes(ashape[:-2], cshape[:-2]))
    if tuple(out.shape) != batch + (m, n):
        raise lw.invalid(f"output shape {list(out.shape)} is not {list(batch + (m, n))}")
    count = math.prod(batch)
    flat = []
    for name, shape, rows, cols in ((a, ashape, m, k), (c, cshape, k, n)):
        own = math.prod(shape[:-2])
        name = b.reshape(name, (own, rows, cols))
        if own != count:
            if own != 1:
                raise lw.unsupported(f"batch shapes {list(ashape[:-2])} and {list(cshape[:-2])} broadcast "
                                     f"other than from 1")
            name = b.emit("TILE", [name, b.shape_const([count, 1, 1])], (count, rows, cols), out_dtype, "tile")
        flat.append(name)
    accum = b.emit("MATMUL", [flat[0], flat[1], b.scalar(lhs.zp, out_dtype), b.scalar(rhs.zp, out_dtype)],
                   (count, m, n), "int48" if wide else "int32", f"{out.name}_acc")
    mults, shifts = _multipliers(lw, lhs.scale, np.asarray([rhs.scale]), out.quant.s, 1, True)
    if wide:
        y = _rescale_int48(lw, accum, out_dtype, mults, shifts, 0, False)
    else:
        y = lw.requantize(accum, out_dtype, mults, shifts, 0, out.quant.zp)
    lw.define(0, y)


def _fc_acc_bound(w: np.ndarray, bias: np.ndarray, x_dtype: str, x_zp: int) -> int:
    """The largest ``|sum((x - x_zp) * w) + bias|`` any input can give, per the weights
    (``w`` [OC, ..., IC] with zero point removed) and the bias."""
    info = np.iinfo(x_dtype)
    reach = max(info.max - x_zp, x_zp - info.min)
    per_channel = np.abs(w.reshape(w.shape[0], -1).astype(np.int64)).sum(axis=1) * reach
    return int((per_channel + np.abs(np.asarray(bias, np.int64).reshape(-1))).max())


def _rescale_int48(lw: Lowerer, accum: str, out_dtype: str, mults, shifts, out_zp: int,
                   per_channel: bool) -> str:
    """TFLite's MultiplyByQuantizedMultiplier(int64 x, M, s): a 16-bit multiplier
    (M + 2**15) >> 16 and one rounding at shift 15 - s = TOSA's scale16 RESCALE."""
    m16, s16 = [], []
    for m, s in zip(mults, shifts):
        # TFLite saturates the reduced multiplier at 0x7FFF for multipliers from 0x7FFF0000
        # on (rounding them would give 32768, which int16 cannot hold): the same here.
        reduced, total = ((m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF), 15 - s
        if not 2 <= total <= 62:
            raise lw.unsupported(f"requantization exponent {s} has no 16-bit RESCALE shift")
        m16.append(reduced)
        s16.append(total)
    b = lw.b
    inputs = [accum, b.const("multiplier", np.asarray(m16), "int16"),
              b.const("shift", np.asarray(s16), "int8"), b.scalar(0, "int48"),
              b.scalar(out_zp, out_dtype)]
    return b.emit("RESCALE", inputs, b.shape(accum), out_dtype, "rescale", scale32=False,
                  rounding_mode="SINGLE_ROUND", per_channel=per_channel,
                  input_unsigned=False, output_unsigned=False)


def conv_2d(lw, op):
    _conv_common(lw, op, "CONV_2D")


def depthwise_conv_2d(lw, op):
    _conv_common(lw, op, "DEPTHWISE_CONV_2D")


def fully_connected(lw, op):
    _conv_common(lw, op, "FULLY_CONNECTED")


# ---------------------------------------------------------------------------------------
MAX_KERNEL = 8192


def _pool_geometry(lw: Lowerer, op, x: str):
    opts = _opts(lw, op)
    out = lw.out()
    n, ih, iw, c = lw.b.shape(x)
    kh, kw = opts["filter_height"], opts["filter_width"]
    sh, sw = opts["stride_h"], opts["stride_w"]
    if min(kh, kw, sh, sw) < 1:
        raise lw.invalid(f"pool filter {kh}x{kw} / stride {sh}x{sw} must be >= 1")
    if max(kh, kw, sh, sw) > MAX_KERNEL:
        # TOSA level 8K: MAX_KERNEL = MAX_STRIDE = 8192 (a 2^31 filter would allocate 2^31 ones).
        raise lw.invalid(f"pool filter {kh}x{kw} / stride {sh}x{sw} exceeds the TOSA level's {MAX_KERNEL}")
    if len(out.shape) != 4:
        raise lw.invalid("pool output must be 4-D")
    pt, pb, dh = _padding(lw, opts["padding"], ih, kh, sh, 1, out.shape[1])
    pl, pr, dw = _padding(lw, opts["padding"], iw, kw, sw, 1, out.shape[2])
    return opts, out, (kh, kw), (sh, sw), [pt, pb, pl, pr], (dh, dw)


def max_pool_2d(lw, op):
    b = lw.b
    x = lw.activation(0)
    opts, out, kernel, stride, pad, drop = _pool_geometry(lw, op, x.name)
    if max(pad[0], pad[1]) >= kernel[0] or max(pad[2], pad[3]) >= kernel[1]:
        raise lw.unsupported("pool padding as large as the filter is not supported")
    xin = _slice_tail(lw, x.name, *drop)
    shape = (b.shape(xin)[0], out.shape[1], out.shape[2], b.shape(xin)[3])
    y = b.emit("MAX_POOL2D", [xin], shape, x.dtype, out.name, kernel=list(kernel),
               stride=list(stride), pad=pad, nan_mode="PROPAGATE")
    y = _pool_activation(lw, op, opts, out, y)
    lw.define(0, y)


def _pool_activation(lw, op, opts, out, y):
    # TFLite pools keep the input's codes; the activation range uses the output's params.
    act = activation_name(opts["fused_activation_function"], op.where)
    dtype = "uint8" if out.type == "UINT8" else lw.b.dtype(y)
    lo, hi = activation_range(act, lw.quant(out).s, out.quant.zp, dtype, op.where)
    return lw.clamp_activation(y, *lw.shifted(out, lo, hi))


def average_pool_2d(lw, op):
    """TFLite: ``acc = sum of the window's codes`` (no zero point; padding excluded), then
    ``(acc +- count / 2) / count`` with C division (halves away from zero; uint8 codes are
    non-negative, so for uint8 models it is halves up).  TOSA's AVG_POOL2D rounds with an
    approximate reciprocal, so the division is built exactly from integer operators:
    sum by a depthwise convolution with a ones filter, then
    ``floor((acc + c + K*n) / n) - K`` (``c`` = n/2, minus 1 for negative sums when n is
    even; K makes the numerator positive) with an exact reciprocal MUL."""
    b = lw.b
    x = lw.activation(0)
    opts, out, kernel, stride, pad, drop = _pool_geometry(lw, op, x.name)
    xin = _slice_tail(lw, x.name, *drop)
    n, ih, iw, c = b.shape(xin)
    oh, ow = out.shape[1], out.shape[2]
    acc = "int32" if x.dtype == "int8" else "int48"
    ones = b.const(f"{out.name}_ones", np.ones((kernel[0], kernel[1], c, 1)), "int8")
    zeros = b.const(f"{out.name}_zero_bias", np.zeros(c), acc)
    total = b.emit("DEPTHWISE_CONV2D", [xin, ones, zeros, b.scalar(0, x.dtype),
                                        b.scalar(0, "int8")],
                   (n, oh, ow, c), acc, f"{out.name}_sum", pad=pad, stride=list(stride),
                   dilation=[1, 1], local_bound=False, acc_type=acc.upper())
    if acc == "int48":  # exact int48 -> int32: (v * 4 + 2) >> 2
        total = b.emit("RESCALE", [total, b.const("multiplier", np.asarray([4]), "int16"),
                                   b.const("shift", np.asarray([2]), "int8"),
                                   b.scalar(0, "int48"), b.scalar(0, "int32")],
                       b.shape(total), "int32", "rescale", scale32=False,
                       rounding_mode="SINGLE_ROUND", per_channel=False,
                       input_unsigned=False, output_unsigned=False)

    def counts(size, out_size, k, s, p):
        start = np.arange(out_size) * s - p
        return np.clip(np.minimum(start + k, size) - np.maximum(start, 0), 0, None)

    # Counts over the unsliced input (the slice only drops rows no window reaches).
    full_h, full_w = ih + drop[0], iw + drop[1]
    count = (counts(full_h, oh, kernel[0], stride[0], pad[0])[:, None]
             * counts(full_w, ow, kernel[1], stride[1], pad[2])[None, :]).astype(np.int64)
    if count.min() < 1:
        raise lw.unsupported("average pool window with no input element")
    half = count // 2
    qmax = 128 if x.dtype == "int8" else 32768
    k_off = qmax + 2  # makes every numerator at least 2n - 1
    # floor(v / n) with v = t + half + K*n, as MUL's round-half-up of (2v - n) / (2n):
    # exact when (2v - n) * 2n < 2**shift (the reciprocal's error then stays below the
    # 1 / (2n) gap to the next rounding boundary).
    v2_max = 2 * (qmax * count + half + k_off * count) - count
    shift = int((v2_max * 2 * count).max()).bit_length()
    recip = -(-(1 << shift) // (2 * count))  # ceil(2**shift / 2n)
    if recip.max() >= 1 << 31 or shift > 63:
        raise lw.unsupported(f"average pool of {count.max()} elements has no exact "
                             f"32-bit reciprocal")
    grid = (1, oh, ow, 1)
    numerator = total
    if x.ttype != "UINT8" and (count % 2 == 0).any():
        sign = b.binary("ARITHMETIC_RIGHT_SHIFT", total, b.i32(31, 4), round=False)
        even = b.const(f"{out.name}_even", (count % 2 == 0).astype(np.int64).reshape(grid),
                       "int32")
        numerator = b.binary("ADD", total, b.mul(sign, even))
    numerator = b.binary("ADD", b.binary("LOGICAL_LEFT_SHIFT", numerator, b.i32(1, 4)),
                         b.const(f"{out.name}_round",
                                 (2 * half + 2 * k_off * count - count).reshape(grid), "int32"))
    quotient = b.mul(numerator, b.const(f"{out.name}_recip", recip.reshape(grid), "int32"),
                     shift)
    mean = b.binary("SUB", quotient, b.i32(k_off, 4))
    y = b.rescale(mean, x.dtype, 1 << 30, 30, 0, 0, double_round=False, hint=out.name)
    y = _pool_activation(lw, op, opts, out, y)
    lw.define(0, y)


HANDLERS = {
    "CONV_2D": conv_2d,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "FULLY_CONNECTED": fully_connected,
    "MAX_POOL_2D": max_pool_2d,
    "AVERAGE_POOL_2D": average_pool_2d,
    "TRANSPOSE_CONV": transpose_conv,
    "BATCH_MATMUL": batch_matmul,
}
