"""Bounds-checked decoding of ``.tflite`` / ``.circle`` flatbuffers into plain Python data.

Built on :class:`tosa_ir._fb.flatbuf.TableReader` (the project's checked flatbuffer reader:
every offset, length and string is checked against the buffer, and a vector budget stops
crafted files whose vectors overlap from making decoding quadratic), with the field
layout of :mod:`compiler.frontends.circle.schema`.

:func:`decode_model` returns the ``Model`` table as nested dicts: scalars as Python
numbers (schema default when absent), strings as ``str``, ``[int]``/``[float]``/``[long]``
/``[ubyte]`` vectors as read-only numpy arrays viewing the buffer, tables as dicts,
vectors of tables as lists of dicts, absent offset fields as ``None``, unions as
``(type, dict | None)`` (the dict only for the option tables this frontend reads).
Anything malformed raises :class:`Malformed` with the path of the bad field.
"""
from __future__ import annotations

import struct

import numpy as np

from compiler.frontends.circle.schema import (
    BUILTIN_OPTIONS, FILE_IDENTIFIERS, NUMPY_VECTORS, SCALARS, TABLES, Field,
)
from tosa_ir._fb.flatbuf import Malformed, TableReader

__all__ = ["Malformed", "decode_model", "file_kind"]

_UNION_TABLES = {"BuiltinOptions": BUILTIN_OPTIONS}


def file_kind(buf: bytes) -> str | None:
    """``"tflite"`` or ``"circle"`` from the file identifier, or None."""
    return FILE_IDENTIFIERS.get(bytes(buf[4:8])) if len(buf) >= 8 else None


class _Reader(TableReader):
    """A :class:`TableReader` driven by the Circle/TFLite field tables."""

    min_voffset = 4     # no field may overlap the table's offset to its vtable

    def root_any(self) -> int:
        if self.size < 8:
            raise Malformed(f"file is {self.size} bytes, too short for a flatbuffer")
        ident = bytes(self.buf[4:8])
        if ident not in FILE_IDENTIFIERS:
            raise Malformed(f"file identifier {ident!r} is neither b'TFL3' (.tflite) "
                            f"nor b'CIR0' (.circle)")
        return self._deref(0, "root table offset")

    def read(self, pos: int, name: str, where: str) -> dict:
        """Decode table ``name`` at ``pos``."""
        slot = self._fields(pos, where)
        out = {}
        for field in TABLES[name]:
            fwhere = f"{where}.{field.name}"
            if field.is_union:
                out[field.name] = self._union(field, slot, fwhere)
            elif field.type in SCALARS:
                fmt, size = SCALARS[field.type]
                fpos = slot(field.slot, size)
                if fpos is None:
                    out[field.name] = field.default
                else:
                    value = struct.unpack_from(fmt, self.buf, fpos)[0]
                    out[field.name] = bool(value) if field.type == "bool" else value
            else:
                fpos = slot(field.slot, 4)
                out[field.name] = None if fpos is None else self._offset(field, fpos, fwhere)
        return out

    def _union(self, field: Field, slot, where: str):
        type_pos = slot(field.slot, 1)
        utype = 0 if type_pos is None else self.buf[type_pos]
        value_pos = slot(field.slot + 1, 4)
        tables = _UNION_TABLES.get(field.type.split(":", 1)[1], {})
        if utype == 0 or value_pos is None or utype not in tables:
            return (utype, None)
        return (utype, self.read(self._deref(value_pos, where), tables[utype], where))

    def _offset(self, field: Field, fpos: int, where: str):
        if field.type == "string":
            return self._string_at(self._deref(fpos, where), where)
        if field.type in NUMPY_VECTORS:
            dtype = np.dtype(NUMPY_VECTORS[field.type])
            start, count = self._vector(fpos, dtype.itemsize, where)
            return np.frombuffer(self.buf, dtype, count, start)
        if not field.is_vector:
            return self.read(self._deref(fpos, where), field.type, where)
        element = field.type[1:-1]
        start, count = self._vector(fpos, 4, where)
        return [self.read(self._deref(start + 4 * i, f"{where}[{i}]"), element, f"{where}[{i}]")
                for i in range(count)]


def decode_model(buf: bytes) -> dict:
    """The ``Model`` root table of a .tflite/.circle file (see the module docstring).

    Raises
    ------
    Malformed
        The bytes are not a well-formed TFLite/Circle flatbuffer.
    """
    reader = _Reader(buf)
    return reader.read(reader.root_any(), "Model", "model")
