"""Constant tensor data: flatbuffer bytes <-> numpy arrays, as the TOSA serialisation lib packs them.

All values are little endian.  ``int4`` packs two values per byte, the first in the low
nibble; ``int48`` takes 6 bytes per value; ``bool`` one byte; ``bf16`` is the upper half
of an fp32; ``shape`` values are int64.  Arrays come back in ``tosa_ir.graph`` dtypes
(``numpy_dtype``): int4 in int8, int48 in int64, bf16 in float32.
"""
from __future__ import annotations

import numpy as np

from tosa_ir.graph import INT_RANGES, numpy_dtype

# Element types whose values are stored in whole little-endian words of this numpy type.
_PLAIN = {
    "int8": "<i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "shape": "<i8",
    "fp16": "<f2", "fp32": "<f4",
}


def nbytes(dtype: str, count: int) -> int:
    """Bytes taken by ``count`` values of element type ``dtype``."""
    if dtype == "int4":
        return (count + 1) // 2
    if dtype == "int48":
        return 6 * count
    if dtype == "bool":
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
    return flat.astype(_PLAIN[dtype]).tobytes()
