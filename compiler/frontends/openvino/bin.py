"""Constant data of an OpenVINO IR: ``Const`` layers -> numpy arrays from the ``.bin`` file.

A ``Const`` layer names its bytes by ``offset`` and ``size`` in the ``.bin`` that sits next
to the ``.xml``; ``element_type`` and ``shape`` say how to read them (little endian).
Every number is checked before it is used: offset and size are non-negative integers,
the range lies inside the file, the size matches the element count exactly, the shape
agrees with the layer's output port.  Sub-byte types (``u4``/``i4``: two values per byte,
low nibble first; ``u1``: eight per byte, most significant bit first) are unpacked.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from compiler.frontends.openvino.xml import Layer, attr_str
from tosa_ir.errors import InvalidInput, Unsupported

# OpenVINO element type -> (numpy storage dtype, bits per element).
ELEMENT_TYPES: dict[str, tuple[np.dtype, int]] = {
    "f64": (np.dtype("<f8"), 64), "f32": (np.dtype("<f4"), 32),
    "f16": (np.dtype("<f2"), 16), "bf16": (np.dtype("<u2"), 16),
    "i64": (np.dtype("<i8"), 64), "i32": (np.dtype("<i4"), 32),
    "i16": (np.dtype("<i2"), 16), "i8": (np.dtype("i1"), 8),
    "u64": (np.dtype("<u8"), 64), "u32": (np.dtype("<u4"), 32),
    "u16": (np.dtype("<u2"), 16), "u8": (np.dtype("u1"), 8),
    "boolean": (np.dtype("u1"), 8),
    "i4": (np.dtype("u1"), 4), "u4": (np.dtype("u1"), 4), "u1": (np.dtype("u1"), 1),
}
# Types OpenVINO has that carry no values this project can use.
UNSUPPORTED_TYPES = ("nf4", "f8e4m3", "f8e5m2", "f8e8m0", "f4e2m1", "string", "u2", "u3",
                     "u6", "dynamic", "undefined")
# The spelling of port precisions ("FP32") for the same types.
PRECISIONS = {"FP64": "f64", "FP32": "f32", "FP16": "f16", "BF16": "bf16", "I64": "i64",
              "I32": "i32", "I16": "i16", "I8": "i8", "U64": "u64", "U32": "u32",
              "U16": "u16", "U8": "u8", "BOOL": "boolean", "BOOLEAN": "boolean",
              "I4": "i4", "U4": "u4", "U1": "u1"}


def element_type(layer: Layer, key: str = "element_type") -> str:
    """The checked element type attribute of ``layer``."""
    et = attr_str(layer, key).strip().lower()
    if et in ELEMENT_TYPES:
        return et
    if et in UNSUPPORTED_TYPES:
        raise Unsupported(f"{layer.where}: element type '{et}' is not supported")
    raise InvalidInput(f"{layer.where}: unknown element type '{et}'")


def parse_shape(layer: Layer, key: str = "shape") -> tuple[int, ...]:
    """A static shape attribute ("1,3,8,8", "4, 3, 3, 3", "" for a scalar)."""
    text = attr_str(layer, key).strip()
    if text in ("", "[]"):
        return ()
    dims = []
    for part in text.strip("[]").split(","):
        part = part.strip()
        try:
            value = int(part)
        except ValueError:
            if part == "?" or ".." in part:
                raise Unsupported(f"{layer.where}: dynamic shape [{text}] is not supported "
                                  f"(only static shapes)") from None
            raise InvalidInput(f"{layer.where}: malformed shape attribute {text!r}") from None
        if value < 0:
            raise Unsupported(f"{layer.where}: dynamic shape [{text}] is not supported (only "
                              f"static shapes)")
        dims.append(value)
    return tuple(dims)


def _nonneg(layer: Layer, key: str) -> int:
    text = attr_str(layer, key)
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidInput(f"{layer.where}: attribute '{key}' must be an integer, got "
                           f"{text!r}") from None
    if value < 0:
        raise InvalidInput(f"{layer.where}: attribute '{key}' is negative ({value})")
    return value


class WeightsFile:
    """The ``.bin`` of an IR, read by byte ranges with bounds checks."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._size: int | None = None

    @property
    def size(self) -> int:
        if self._size is None:
            try:
                self._size = os.path.getsize(self.path)
            except OSError as e:
                raise InvalidInput(f"{self.path}: cannot read the weights file: "
                                   f"{e.strerror or e}") from None
        return self._size

    def read(self, offset: int, size: int, layer: Layer) -> bytes:
        end = offset + size
        if end > self.size:
            raise InvalidInput(f"{layer.where}: data at offset {offset} size {size} (end "
                               f"{end}) is outside the weights file {self.path} of "
                               f"{self.size} bytes (truncated file or bad offset)")
        try:
            with open(self.path, "rb") as f:
                f.seek(offset)
                data = f.read(size)
        except OSError as e:
            raise InvalidInput(f"{self.path}: cannot read: {e.strerror or e}") from None
        if len(data) != size:
            raise InvalidInput(f"{layer.where}: short read from {self.path}")
        return data


def _unpack(raw: bytes, et: str, count: int) -> np.ndarray:
    bytes_ = np.frombuffer(raw, np.uint8)
    if et in ("u4", "i4"):
        vals = np.stack([bytes_ & 0x0F, bytes_ >> 4], axis=-1).reshape(-1)[:count]
        if et == "i4":
            return np.where(vals >= 8, vals.astype(np.int8) - 16, vals).astype(np.int8)
        return vals.astype(np.uint8)
    # u1: most significant bit first.
    return np.unpackbits(bytes_)[:count].astype(np.uint8)


def read_const(layer: Layer, weights: WeightsFile | None) -> np.ndarray:
    """The value of ``Const`` layer ``layer`` as a numpy array of its own type.

    ``bf16`` is widened to float32 and ``boolean`` is numpy bool; ``u4``/``i4``/``u1``
    become uint8/int8 arrays.

    Raises
    ------
    InvalidInput
        Missing or malformed attributes, ranges outside the file, size mismatches.
    Unsupported
        Dynamic shapes, element types without numeric values here.
    """
    et = element_type(layer)
    shape = parse_shape(layer)
    offset, size = _nonneg(layer, "offset"), _nonneg(layer, "size")
    if layer.outputs and layer.outputs[0].dims != shape:
        raise InvalidInput(f"{layer.where}: shape [{','.join(map(str, shape))}] does not match "
                           f"the output port dims {list(layer.outputs[0].dims)}")
    dtype, bits = ELEMENT_TYPES[et]
    count = math.prod(shape)          # Python ints: no overflow on absurd shapes
    expected = (count * bits + 7) // 8
    if size != expected:
        raise InvalidInput(f"{layer.where}: size {size} bytes does not match {count} "
                           f"{et} elements of shape [{','.join(map(str, shape))}] "
                           f"({expected} bytes)")
    if weights is None:
        raise InvalidInput(f"{layer.where}: the IR has constants but no weights (.bin) file")
    raw = weights.read(offset, size, layer)
    if bits < 8:
        return _unpack(raw, et, count).reshape(shape)
    arr = np.frombuffer(raw, dtype).reshape(shape)
    if et == "bf16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    if et == "boolean":
        return arr != 0
    return arr.astype(arr.dtype.newbyteorder("="))
