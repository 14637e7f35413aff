"""Constant tensor data: flatbuffer bytes <-> numpy arrays, as the TOSA serialisation lib packs them.

All values are little endian.  ``int4`` packs two values per byte, the first in the low
nibble; ``int48`` takes 6 bytes per value; ``bool`` one byte; ``bf16`` is the upper half
of an fp32; ``fp8e4m3`` and ``fp8e5m2`` are one byte each (the OCP 8-bit formats the spec's
EXT-FP8E4M3/EXT-FP8E5M2 name: E4M3 with bias 7, no infinities and NaN at S.1111.111; E5M2
with bias 15, IEEE infinities and NaNs); ``shape`` values are int64.  Arrays come back in
``tosa_ir.graph`` dtypes (``numpy_dtype``): int4 in int8, int48 in int64, bf16 and the fp8
types in float32 (every fp8 value is exactly a float32).

The fp8 types are read and written so that a graph using them can be checked (its
ERROR_IF conditions, e.g. a COND_IF condition that is not bool); no operator here computes
in them.
"""
from __future__ import annotations

import numpy as np

from tosa_ir.graph import INT_RANGES, numpy_dtype

# Element types whose values are stored in whole little-endian words of this numpy type.
_PLAIN = {
    "int8": "<i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "shape": "<i8",
    "fp16": "<f2", "fp32": "<f4",
}



def _fp8_values(exp_bits: int, man_bits: int, ieee_specials: bool) -> np.ndarray:
    """The float32 value of each of the 256 codes of an 8-bit float format."""
    bias = (1 << (exp_bits - 1)) - 1
    values = np.empty(256, dtype=np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp = (code >> man_bits) & ((1 << exp_bits) - 1)
        man = code & ((1 << man_bits) - 1)
        if exp == (1 << exp_bits) - 1 and (ieee_specials or man == (1 << man_bits) - 1):
            values[code] = sign * np.inf if ieee_specials and man == 0 else np.nan
        elif exp == 0:
            values[code] = sign * man * 2.0 ** (1 - bias - man_bits)
        else:
            values[code] = sign * (1 + man / (1 << man_bits)) * 2.0 ** (exp - bias)
    return values


_FP8 = {"fp8e4m3": _fp8_values(4, 3, ieee_specials=False), "fp8e5m2": _fp8_values(5, 2, ieee_specials=True)}


def nbytes(dtype: str, count: int) -> int:
    """Bytes taken by ``count`` values of element type ``dtype``."""
    if dtype == "int4":
        return (count + 1) // 2
    if dtype == "int48":
        return 6 * count
    if dtype == "bool" or dtype in _FP8:
        return count
    if dtype == "bf16":
        return 2 * count
    return np.dtype(_PLAIN[dtype]).itemsize * count


def decode(dtype: str, raw: bytes | memoryview, count: int) -> np.ndarray:
    """The ``count`` values of type ``dtype`` in ``raw`` (whose size the caller checked)."""
    u8 = np.frombuffer(raw, dtype=np.uint8)
    if dtype == "bool":
        return u8 != 0
    if dtype == "int4":
        nibbles = np.empty(2 * u8.size, dtype=np.int8)
        nibbles[0::2] = u8 & 0xF
        nibbles[1::2] = u8 >> 4
        return ((nibbles[:count] ^ 8) - 8).astype(np.int8)  # sign-extend 4 bits
    if dtype == "int48":
        words = np.zeros((count, 8), dtype=np.uint8)
        words[:, :6] = u8.reshape(count, 6)
        words[:, 6:] = np.where(words[:, 5:6] & 0x80, 0xFF, 0)[:, :1]  # sign-extend
        return words.view("<i8").reshape(count).astype(np.int64)
    if dtype == "bf16":
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
        return (halves << 16).view(np.float32)
    if dtype in _FP8:
        return _FP8[dtype][u8[:count]]
    return np.frombuffer(raw, dtype=_PLAIN[dtype]).astype(numpy_dtype(dtype))


def encode(dtype: str, values: np.ndarray) -> bytes:
    """The bytes that store ``values`` as element type ``dtype``.

    Raises ``ValueError`` (with the reason) if a value does not fit the type.
    """
    flat = np.asarray(values).reshape(-1)
    if dtype in INT_RANGES and flat.size:
        if flat.dtype.kind not in "biu":
            raise ValueError(f"{flat.dtype} data for a {dtype} tensor")
        lo, hi = INT_RANGES[dtype]
        if int(flat.min()) < lo or int(flat.max()) > hi:
            raise ValueError(f"values outside the {dtype} range [{lo}, {hi}]")
    if dtype == "bool":
        return flat.astype(np.uint8).tobytes()
    if dtype == "int4":
        nibbles = flat.astype(np.uint8) & 0xF
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).tobytes()
    if dtype == "int48":
        words = flat.astype("<i8").view(np.uint8).reshape(-1, 8)
        return words[:, :6].tobytes()
    if dtype == "bf16":
        bits = flat.astype(np.float32).view(np.uint32)
        if np.any(bits & 0xFFFF):
            raise ValueError("values not exactly representable in bf16")
        return (bits >> 16).astype("<u2").tobytes()
    if dtype in _FP8:
        return _fp8_encode(dtype, flat.astype(np.float32))
    return flat.astype(_PLAIN[dtype]).tobytes()


def _fp8_encode(dtype: str, values: np.ndarray) -> bytes:
    """Codes of ``values`` in 8-bit float ``dtype``; every value must be one exactly (a NaN
    is written as the format's all-ones NaN, 0x7F or 0xFF by its sign).  Values are matched
    by their float32 bit patterns, so -0.0 and 0.0 keep their own codes."""
    table = _FP8[dtype]
    finite = np.flatnonzero(~np.isnan(table))
    keys = table[finite].view(np.uint32)
    order = np.argsort(keys)
    keys, codes_of = keys[order], finite[order].astype(np.uint8)
    bits = values.view(np.uint32)
    index = np.minimum(np.searchsorted(keys, bits), keys.size - 1)
    nan = np.isnan(values)
    missing = (keys[index] != bits) & ~nan
    if missing.any():
        raise ValueError(f"{values[missing][0]} is not exactly representable in {dtype}")
    return np.where(nan, np.where(np.signbit(values), 0xFF, 0x7F), codes_of[index]).astype(np.uint8).tobytes()
