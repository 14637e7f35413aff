"""OpenVINO ``FakeQuantize`` -> int8 quantization parameters.

FakeQuantize-1 (OpenVINO operation specification)::

    if x <= min(input_low, input_high):  y = output_low
    elif x > max(input_low, input_high): y = output_high
    else: y = round((x - input_low) / (input_high - input_low) * (levels - 1))
              / (levels - 1) * (output_high - output_low) + output_low

so ``y = q * s + output_low`` with the integer ``q`` in ``[0, levels - 1]`` and
``s = (output_high - output_low) / (levels - 1)``.

* On an activation (OpenVINO's converter and NNCF use ``levels=256`` and equal input and
  output ranges), that is int8 with ``scale = s`` and ``zero_point = round(-output_low / s)
  - 128``: the 256 codes are exactly the int8 range, so the FakeQuantize's clamp is the
  int8 saturation.
* On a constant (weights), the values are folded and their integer form is kept as a
  :class:`WeightQuant` (``value == (codes - zero) * scale``, arrays of the constant's
  shape) through the layout operations that follow, so that the convolution that takes
  them gets the per-output-channel scales the model was quantized with.  The same form
  comes from OpenVINO's compressed weights (``Const(i8/u8) -> Convert -> [Subtract zero
  point] -> Multiply scale``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.graph.quantize.qparams import QParams
from tosa_ir.errors import InvalidInput, Unsupported


@dataclass
class WeightQuant:
    """Integer form of a constant: ``value == (codes - zero) * scale`` element-wise."""

    codes: np.ndarray      # int64, the constant's shape
    zero: np.ndarray       # float64, broadcast to the constant's shape
    scale: np.ndarray      # float64, broadcast to the constant's shape

    @classmethod
    def of(cls, codes, zero, scale) -> "WeightQuant":
        codes = np.asarray(codes, np.int64)
        return cls(codes, np.broadcast_to(np.asarray(zero, np.float64), codes.shape).copy(),
                   np.broadcast_to(np.asarray(scale, np.float64), codes.shape).copy())

    def apply(self, fn) -> "WeightQuant":
        """The same layout function (reshape, transpose, ...) applied to all three."""
        return WeightQuant(np.asarray(fn(self.codes)), np.asarray(fn(self.zero)),
                           np.asarray(fn(self.scale)))


def fake_quantize(x, il, ih, ol, oh, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """FakeQuantize of a constant: ``(values as float32, codes q)`` (numpy broadcasting).

    Rounding is to nearest, ties to even (``std::nearbyint``, as OpenVINO's reference).
    """
    x, il, ih, ol, oh = (np.asarray(v, np.float64) for v in (x, il, ih, ol, oh))
    lo, hi = np.minimum(il, ih), np.maximum(il, ih)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((x - il) / (ih - il) * (levels - 1))
    q = np.where(x <= lo, 0, np.where(x > hi, levels - 1, q))
    q = np.nan_to_num(q).astype(np.int64)
    step = (oh - ol) / (levels - 1)
    y = q * step + ol
    return y.astype(np.float32), q


def fq_weights(x, il, ih, ol, oh, levels: int) -> tuple[np.ndarray, WeightQuant | None]:
    """Folded FakeQuantize of weights and its integer form (None if the scale is 0)."""
    values, q = fake_quantize(x, il, ih, ol, oh, levels)
    step = np.broadcast_to((np.asarray(oh, np.float64) - np.asarray(ol, np.float64))
                           / (levels - 1), values.shape)
    if np.any(step <= 0):
        return values, None
    zero = -np.broadcast_to(np.asarray(ol, np.float64), values.shape) / step
    return values, WeightQuant.of(q, zero, step)


def activation_params(ranges, levels: int, where: str) -> tuple[QParams, list[str]]:
    """Per-tensor int8 parameters of an activation FakeQuantize.

    ``ranges`` are the four constant range arrays (input low/high, output low/high).

    Raises
    ------
    Unsupported
        ``levels`` other than 256, per-channel ranges, different input and output ranges,
        a range that does not contain zero.
    InvalidInput
        An empty range (high <= low), non-finite values.
    """
    notes = []
    if levels not in LEVELS:
        raise Unsupported(f"{where}: FakeQuantize with levels={levels} on an activation (only "
                          f"256, 8-bit, and 65536, 16-bit, are supported)")
    dtype = LEVELS[levels]
    vals = _scalars(ranges, where)
    il, ih, ol, oh = vals
    if ih <= il or oh <= ol:
        raise InvalidInput(f"{where}: FakeQuantize range is empty (low {il}, high {ih})")
    tol = 1e-6 * max(abs(il), abs(ih), 1e-30)
    if abs(il - ol) > tol or abs(ih - oh) > tol:
        raise Unsupported(f"{where}: FakeQuantize with different input [{il}, {ih}] and output "
                          f"[{ol}, {oh}] ranges (a requantization) is not supported")
    scale = (oh - ol) / (levels - 1)
    zp_real = -ol / scale
    zp = int(np.floor(zp_real + 0.5))
    if not 0 <= zp <= levels - 1:
        raise Unsupported(f"{where}: FakeQuantize range [{ol}, {oh}] does not contain zero "
                          f"({dtype} needs zero on the grid)")
    if abs(zp_real - zp) > 1e-3:
        notes.append(f"{where}: zero is not on the FakeQuantize grid (zero point {zp_real:.4f} "
                     f"rounded to {zp}): the {dtype} grid is shifted by up to half a step")
    return _typed(scale, zp - levels // 2, dtype, where), notes


def _typed(scale: float, zp: int, dtype: str, where: str) -> QParams:
    """Parameters on ``dtype``; int16 activations need zero point 0 (TOSA's 16x8 operators
    and RESCALE to int16 take no other; TFLite's int16 quantization is symmetric)."""
    if dtype == "int16" and zp != 0:
        raise Unsupported(f"{where}: 16-bit FakeQuantize with zero point {zp} (int16 "
                          f"activations need a symmetric range, zero point 0)")
    return QParams(np.float64(scale), np.int64(zp), dtype)


CODE_RANGES = {"i8": (-128.0, 127.0), "u8": (0.0, 255.0), "i16": (-32768.0, 32767.0)}
# FakeQuantize levels of an activation -> the integer type of the tensor.
LEVELS = {256: "int8", 65536: "int16"}
CODE_LEVELS = {"i8": 256, "u8": 256, "i16": 65536}


def _scalars(ranges, where: str) -> list[float]:
    vals = []
    for arr, what in zip(ranges, ("input_low", "input_high", "output_low", "output_high")):
        a = np.asarray(arr, np.float64).reshape(-1)
        if a.size == 0 or np.any(a != a[0]):
            raise Unsupported(f"{where}: per-channel FakeQuantize on an activation ({what} has "
                              f"{a.size} different values); only per-tensor is supported")
        if not np.isfinite(a[0]):
            raise InvalidInput(f"{where}: FakeQuantize {what} is not finite")
        vals.append(float(a[0]))
    return vals


def _to_int8(scale: float, zp_codes: float, codes: str, where: str, notes: list[str]
             ) -> QParams:
    """Parameters with the zero point ``zp_codes`` given in the ``codes`` domain."""
    zp = int(np.floor(zp_codes + 0.5))
    if abs(zp_codes - zp) > 1e-3:
        notes.append(f"{where}: zero point {zp_codes:.4f} is not an integer; rounded")
    if codes == "u8":
        zp -= 128
        notes.append(f"{where}: uint8 codes: the integer graph uses int8 codes q - 128")
    dtype = "int16" if codes == "i16" else "int8"
    lo, hi = (-32768, 32767) if codes == "i16" else (-128, 127)
    if not lo <= zp <= hi:
        raise Unsupported(f"{where}: FakeQuantize zero point {zp} outside {dtype} (the range "
                          f"does not contain zero)")
    return _typed(scale, zp, dtype, where)


def quantizing_codes(ranges, levels: int) -> str | None:
    """"i8"/"u8" when a FakeQuantize maps a real range onto integer codes (its output
    range is a whole code range and differs from its input range), else None."""
    try:
        il, ih, ol, oh = (float(np.asarray(r, np.float64).reshape(-1)[0]) for r in ranges)
    except IndexError:
        return None
    if (il, ih) == (ol, oh):
        return None
    for codes, (lo, hi) in CODE_RANGES.items():
        if (ol, oh) == (lo, hi) and levels == CODE_LEVELS[codes]:
            return codes
    return None


def dequantizing_params(ranges, levels: int, codes: str, where: str
                        ) -> tuple[QParams, list[str]]:
    """Parameters of an integer input from the FakeQuantize that dequantizes it
    (input range = the whole code range, output range = the real range)."""
    il, ih, ol, oh = _scalars(ranges, where)
    if levels != CODE_LEVELS[codes] or (il, ih) != CODE_RANGES[codes]:
        raise Unsupported(f"{where}: FakeQuantize of {codes} codes with input range "
                          f"[{il}, {ih}] and levels={levels} (expected the whole code range "
                          f"{list(CODE_RANGES[codes])}, levels={CODE_LEVELS[codes]})")
    if oh <= ol:
        raise InvalidInput(f"{where}: FakeQuantize output range is empty ({ol}, {oh})")
    scale = (oh - ol) / (levels - 1)
    notes: list[str] = []
    # real = ol + (q - il) * scale = (q - (il - ol / scale)) * scale
    return _to_int8(scale, il - ol / scale, codes, where, notes), notes


def quantizing_params(ranges, levels: int, codes: str, where: str
                      ) -> tuple[QParams, list[str]]:
    """Parameters of a real tensor from the FakeQuantize that turns it into codes."""
    il, ih, ol, oh = _scalars(ranges, where)
    if ih <= il:
        raise InvalidInput(f"{where}: FakeQuantize range is empty (low {il}, high {ih})")
    scale = (ih - il) / (levels - 1)
    notes: list[str] = []
    # q = ol + round((x - il) / scale)  =>  x = (q - (ol - il / scale)) * scale
    return _to_int8(scale, ol - il / scale, codes, where, notes), notes


def weight_params(q: WeightQuant, oc_axis: int, where: str
                  ) -> tuple[QParams | None, list[str]]:
    """Per-output-channel int8 parameters of weights in integer form, or None.

    ``oc_axis`` is the axis of ``q``'s arrays that runs over output channels.  None (with
    a note) means the integer form has no exact TOSA int8 equivalent (scales varying
    inside a channel, fractional or per-channel zero points that do not fit) and the
    quantizer will requantize the weights itself.
    """
    notes: list[str] = []
    codes = q.codes
    oc = codes.shape[oc_axis]
    pick = [0] * codes.ndim
    pick[oc_axis] = slice(None)
    scale = q.scale[tuple(pick)].reshape(-1) if codes.ndim else q.scale.reshape(-1)
    zero = q.zero[tuple(pick)].reshape(-1) if codes.ndim else q.zero.reshape(-1)
    shape = [1] * codes.ndim
    if codes.ndim:
        shape[oc_axis] = oc
    if not (np.allclose(q.scale, scale.reshape(shape), rtol=1e-6, atol=0)
            and np.allclose(q.zero, zero.reshape(shape), rtol=0, atol=1e-6)):
        notes.append(f"{where}: weight quantization varies inside an output channel; "
                     f"requantized per channel")
        return None, notes
    zint = np.floor(zero + 0.5)
    if np.any(np.abs(zero - zint) > 1e-3):
        notes.append(f"{where}: weight zero point is not an integer; requantized")
        return None, notes
    signed = codes - zint.reshape(shape)
    lo, hi = int(signed.min(initial=0)), int(signed.max(initial=0))
    if -128 <= lo and hi <= 127:
        if lo == -128:
            notes.append(f"{where}: weight code -128 present (symmetric int8 weights are "
                         f"[-127, 127] in the quantizer)")
        return QParams(scale, np.int64(0)), notes
    if np.all(zint == zint[0]) and 0 <= codes.min() and codes.max() <= 255:
        # Unsigned codes with one zero point: int8 codes q - 128, zero point z - 128.
        return QParams(scale, np.int64(int(zint[0]) - 128)), notes
    notes.append(f"{where}: weight codes [{lo}, {hi}] with per-channel zero points do not "
                 f"fit int8 with one zero point; requantized")
    return None, notes
