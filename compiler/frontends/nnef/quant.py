"""graph.quant entries -> quantization parameters (:class:`compiler.graph.quantize.QParams`).

NNEF describes quantization as pseudo-quantization operations (spec chapter 7); the Khronos
parser attaches each graph.quant line to its tensor as a dict (``op-name`` plus the named
arguments).  The forms understood here:

* ``zero_point_linear_quantize(zero_point, scale, bits, signed, symmetric)``: what
  nnef-tools writes for TFLite models; ``x = (q - zero_point) * scale``; ``scale`` (and
  ``zero_point``) may be per channel.
* ``linear_quantize(min, max, bits)``: unsigned codes ``q`` in ``[0, 2**bits - 1]`` with
  ``x = q / r * (max - min) + min``, ``r = 2**bits - 1``.
* ``min_max_linear_quantize(min, max, bits, signed, symmetric)``: the Khronos stdlib's
  general form (``linear_quantize`` is its unsigned asymmetric case).
* ``logarithmic_quantize(max, bits)``: not an affine mapping, so it has no TOSA integer
  form; data files stored that way are decoded to real values instead.

Unsigned 8-bit parameters are moved to int8 (codes and zero point minus 128): TOSA's
integer operators take int8.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.quantize.qparams import QParams, round_half_away
from tosa_ir.errors import InvalidInput, Unsupported


def _arr(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64).reshape(-1)


def _flag(entry: dict, key: str, default: bool = False) -> bool:
    return bool(entry.get(key, default))


def affine_form(entry: dict, where: str) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """``(scale, zero_point, bits, signed)`` of a linear graph.quant entry, as written.

    ``scale`` is a float64 vector, ``zero_point`` an int64 vector (length 1 or C); the
    zero point is in the entry's own code domain (unsigned codes for unsigned forms).

    Raises
    ------
    Unsupported
        Logarithmic or unknown quantization operations.
    InvalidInput
        Degenerate parameters (max <= min, non-positive scale).
    """
    op = entry.get("op-name", "?")
    bits = int(entry.get("bits", 8))
    if not 1 <= bits <= 32:
        raise InvalidInput(f"{where}: {op} with {bits} bits")
    if op == "zero_point_linear_quantize":
        scale = _arr(entry["scale"])
        zp = np.asarray(entry.get("zero_point", 0), dtype=np.int64).reshape(-1)
        signed = _flag(entry, "signed", True)
    elif op in ("linear_quantize", "min_max_linear_quantize"):
        signed = _flag(entry, "signed") if op == "min_max_linear_quantize" else False
        symmetric = _flag(entry, "symmetric") if op == "min_max_linear_quantize" else False
        lo, hi = _arr(entry["min"]), _arr(entry["max"])
        if np.any(hi <= lo):
            raise InvalidInput(f"{where}: {op} needs max > min, got min={lo}, max={hi}")
        r = float((1 << bits) - 1 - int(signed and symmetric))
        p = ((1 << (bits - 1)) - int(symmetric)) if signed else 0
        scale = (hi - lo) / r
        # x = (q + p) * scale + min  =>  zero point = -p - min / scale (rounded: TOSA needs
        # an integer; the spec calls quantization info a hint).
        zp = round_half_away(-p - lo / scale).astype(np.int64)
    elif op == "logarithmic_quantize":
        raise Unsupported(f"{where}: logarithmic quantization has no TOSA integer form")
    else:
        raise Unsupported(f"{where}: unknown quantization operation '{op}'")
    if np.any(~np.isfinite(scale)) or np.any(scale <= 0):
        raise InvalidInput(f"{where}: {op} scale must be positive, got {scale}")
    return scale, zp, bits, signed


def dequantize_codes(codes: np.ndarray, entry: dict, where: str, axis: int) -> np.ndarray:
    """Real values of integer codes read from a .dat file through their graph.quant entry."""
    scale, zp, _bits, _signed = affine_form(entry, where)
    shape = [1] * codes.ndim
    if scale.size > 1 or zp.size > 1:
        n = max(scale.size, zp.size)
        if codes.ndim <= axis or codes.shape[axis] != n:
            raise InvalidInput(f"{where}: {n} per-channel parameters do not match shape "
                               f"{list(codes.shape)} along axis {axis}")
        shape[axis] = -1
    s = scale.reshape(shape) if scale.size > 1 else scale[0]
    z = zp.reshape(shape) if zp.size > 1 else zp[0]
    return ((codes.astype(np.float64) - z) * s).astype(np.float32)


def activation_qparams(entry: dict, where: str) -> QParams:
    """Per-tensor int8 parameters of an activation (or graph input) entry.

    Raises
    ------
    Unsupported
        Per-channel activation quantization, more than 8 bits, logarithmic.
    """
    scale, zp, bits, signed = affine_form(entry, where)
    if scale.size != 1 or zp.size != 1:
        raise Unsupported(f"{where}: per-channel quantization of activations is not "
                          f"supported")
    if bits > 8:
        raise Unsupported(f"{where}: {bits}-bit activations (only int8 is supported)")
    z = int(zp[0]) - (0 if signed else 128)
    if not -128 <= z <= 127:
        raise InvalidInput(f"{where}: zero point {int(zp[0])} is outside the "
                           f"{'signed' if signed else 'unsigned'} {bits}-bit range")
    return QParams(np.float64(scale[0]), np.int64(z))


def weight_qparams(entry: dict, where: str, out_channels: int) -> QParams:
    """Int8 weight parameters, one scale per output channel (or one for all).

    Raises
    ------
    Unsupported
        More than 8 bits, per-channel zero points that are not all equal.
    """
    scale, zp, bits, signed = affine_form(entry, where)
    if bits > 8:
        raise Unsupported(f"{where}: {bits}-bit weights (only int8 is supported)")
    if scale.size not in (1, out_channels):
        raise InvalidInput(f"{where}: {scale.size} scales for {out_channels} output channels")
    z = zp - (0 if signed else 128)
    if np.any(z != z[0]):
        raise Unsupported(f"{where}: per-channel weight zero points (TOSA has one weight "
                          f"zero point per operator)")
    if not -128 <= int(z[0]) <= 127:
        raise InvalidInput(f"{where}: weight zero point {int(zp[0])} out of range")
    s = scale if scale.size > 1 else np.float64(scale[0])
    return QParams(s, np.int64(z[0]))
