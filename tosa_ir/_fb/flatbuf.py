"""Schema-driven flatbuffer tables <-> plain dicts, for the tables in :mod:`tosa_ir._fb.schema`.

:class:`TableReader` decodes a whole buffer with every offset and length checked against
the buffer (flatbuffers' Python ``Table`` checks nothing, and Python's negative indexing
would silently read from the wrong end), so a malformed file raises :class:`Malformed`
and never reads out of bounds.  :func:`build_table` writes a dict back with the
flatbuffers ``Builder``.

Decoded values: scalars and enums as ``int``/``bool`` (schema defaults where a field is
absent), strings as ``str``, ``[int32]`` as a list of ints, ``[ubyte]`` as ``bytes``,
``[string]`` as a list of ``str``, tables as dicts, vectors of tables as lists of dicts,
absent offset fields as ``None``; the ``Attribute`` union as ``(type, dict | None)``.
"""
from __future__ import annotations

import struct

import flatbuffers
import numpy as np

from tosa_ir._fb.schema import ATTRIBUTE_TABLE_BY_UNION, ENUMS, SCALARS, TABLES, Field


class Malformed(ValueError):
    """The buffer is not a well-formed flatbuffer of the schema; the message says where."""


_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class TableReader:
    """Bounds-checked decoder of one flatbuffer.

    ``budget`` caps the number of vector elements decoded, so that a crafted file whose
    vectors all point at the same large vector cannot make decoding quadratic.
    ``min_voffset``: the smallest offset a present field may have inside its table (a
    subclass may set 4, the size of the table's own vtable offset).
    """

    min_voffset = 0

    def __init__(self, buf: bytes):
        self.buf = buf
        self.size = len(buf)
        self.budget = 4 * self.size + 1024

    # -- primitive reads -------------------------------------------------------------
    def _check(self, pos: int, size: int, where: str) -> None:
        if pos < 0 or pos + size > self.size:
            raise Malformed(f"{where}: offset {pos} (+{size}) outside the {self.size}-byte file")

    def _unpack(self, fmt: struct.Struct, pos: int, where: str) -> int:
        self._check(pos, fmt.size, where)
        return fmt.unpack_from(self.buf, pos)[0]

    def _deref(self, pos: int, where: str) -> int:
        target = pos + self._unpack(_U32, pos, where)
        self._check(target, 4, where)
        return target

    def _vector(self, pos: int, elem_size: int, where: str) -> tuple[int, int]:
        """(start of the elements, count) of the vector referenced at ``pos``."""
        start = self._deref(pos, where)
        count = self._unpack(_U32, start, where)
        self._check(start + 4, count * elem_size, where)
        self.budget -= count
        if self.budget < 0:
            raise Malformed(f"{where}: vectors reference more data than the file holds")
        return start + 4, count

    def _string_at(self, start: int, where: str) -> str:
        """The string whose length field is at ``start``."""
        length = self._unpack(_U32, start, where)
        self._check(start + 4, length + 1, where)
        if self.buf[start + 4 + length] != 0:
            raise Malformed(f"{where}: string is not zero-terminated")
        try:
            return self.buf[start + 4:start + 4 + length].decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed(f"{where}: string is not valid UTF-8") from None

    # -- tables ---------------------------------------------------------------------
    def root(self, identifier: bytes) -> int:
        """Position of the root table, after checking the file identifier."""
        if self.size < 8:
            raise Malformed(f"file is {self.size} bytes, too short for a flatbuffer")
        if self.buf[4:8] != identifier:
            raise Malformed(f"wrong file identifier {bytes(self.buf[4:8])!r}, "
                            f"expected {identifier!r}")
        return self._deref(0, "root table offset")

    def _fields(self, pos: int, where: str):
        """The field locator of the table at ``pos``, after checking its vtable.

        Returns ``slot(index, size)``: the position of field ``index`` (``size`` bytes), or
        None when the vtable leaves it out; a field that does not lie inside its table
        (or starts before ``min_voffset``) raises :class:`Malformed`.
        """
        self._check(pos, 4, where)
        vtable = pos - self._unpack(_I32, pos, where)
        vsize = self._unpack(_U16, vtable, where)
        tsize = self._unpack(_U16, vtable + 2, where)
        if vsize < 4 or vsize % 2 or tsize < 4:
            raise Malformed(f"{where}: bad vtable (size {vsize}, table size {tsize})")
        self._check(vtable, vsize, where)
        self._check(pos, tsize, where)

        def slot(index: int, size: int) -> int | None:
            if 4 + 2 * index >= vsize:
                return None
            voffset = self._unpack(_U16, vtable + 4 + 2 * index, where)
            if voffset == 0:
                return None
            if voffset < self.min_voffset or voffset + size > tsize:
                raise Malformed(f"{where}: field {index} lies outside its table")
            return pos + voffset

        return slot

    def table(self, pos: int, name: str, where: str) -> dict:
        """Decode table ``name`` at ``pos``."""
        slot = self._fields(pos, where)
        out = {}
        for field in TABLES[name]:
            fwhere = f"{where}.{field.name}"
            if field.type == "Attribute":
                type_pos = slot(field.slot, 1)
                utype = 0 if type_pos is None else self.buf[type_pos]
                value_pos = slot(field.slot + 1, 4)
                if utype == 0 or value_pos is None:
                    out[field.name] = (utype, None)
                    continue
                if utype not in ATTRIBUTE_TABLE_BY_UNION:
                    raise Malformed(f"{fwhere}: unknown attribute type {utype}")
                sub = self._deref(value_pos, fwhere)
                out[field.name] = (utype, self.table(sub, ATTRIBUTE_TABLE_BY_UNION[utype], fwhere))
                continue
            scalar = SCALARS.get(field.type) or (("<I", 4) if field.type in ENUMS else None)
            fpos = slot(field.slot, scalar[1] if scalar else 4)
            if fpos is None:
                out[field.name] = field.default
            elif scalar:
                value = struct.unpack_from(scalar[0], self.buf, fpos)[0]
                out[field.name] = bool(value) if field.type == "bool" else value
            else:
                out[field.name] = self._offset_field(field, fpos, fwhere)
        return out

    def _offset_field(self, field: Field, fpos: int, where: str):
        if field.type == "string":
            return self._string_at(self._deref(fpos, where), where)
        if not field.is_vector:
            return self.table(self._deref(fpos, where), field.type, where)
        element = field.element
        if element == "ubyte":
            start, count = self._vector(fpos, 1, where)
            return bytes(self.buf[start:start + count])
        if element == "int32":
            start, count = self._vector(fpos, 4, where)
            return np.frombuffer(self.buf, "<i4", count, start).tolist()
        start, count = self._vector(fpos, 4, where)
        items = []
        for i in range(count):
            epos = start + 4 * i
            ewhere = f"{where}[{i}]"
            if element == "string":
                items.append(self._string_at(self._deref(epos, ewhere), ewhere))
            else:
                items.append(self.table(self._deref(epos, ewhere), element, ewhere))
        return items


# -- writing ---------------------------------------------------------------------------
_PREPEND = {
    "bool": "PrependBoolSlot", "ubyte": "PrependUint8Slot", "uint8": "PrependUint8Slot",
    "int32": "PrependInt32Slot", "uint32": "PrependUint32Slot", "ulong": "PrependUint64Slot",
    "uint64": "PrependUint64Slot",
}


def _byte_vector(builder: flatbuffers.Builder, data: bytes, align: int) -> int:
    """A [ubyte] vector holding ``data``, its elements aligned to ``align`` bytes."""
    builder.StartVector(1, len(data), max(align, 1))
    builder.head = builder.head - len(data)
    builder.Bytes[builder.head:builder.head + len(data)] = data
    return builder.EndVector()


def _offset_vector(builder: flatbuffers.Builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return builder.EndVector()


def build_table(builder: flatbuffers.Builder, name: str, values: dict) -> int:
    """Write table ``name`` from ``values`` (as :class:`TableReader` returns them).

    Missing or ``None`` entries are left out (readers then see the schema default).
    Returns the table's offset.
    """
    fields = TABLES[name]
    offsets: dict[str, int] = {}
    for field in fields:  # children first: flatbuffers cannot nest object construction
        value = values.get(field.name)
        if value is None or field.type in SCALARS or field.type in ENUMS:
            continue
        if field.type == "Attribute":
            utype, attr = value
            if utype:
                offsets[field.name] = build_table(builder, ATTRIBUTE_TABLE_BY_UNION[utype], attr or {})
        elif field.type == "string":
            offsets[field.name] = builder.CreateString(value)
        elif not field.is_vector:
            offsets[field.name] = build_table(builder, field.type, value)
        elif field.element == "ubyte":
            offsets[field.name] = _byte_vector(builder, bytes(value), field.align)
        elif field.element == "int32":
            offsets[field.name] = builder.CreateNumpyVector(np.asarray(value, dtype="<i4").reshape(-1))
        elif field.element == "string":
            offsets[field.name] = _offset_vector(builder, [builder.CreateString(s) for s in value])
        else:
            offsets[field.name] = _offset_vector(
                builder, [build_table(builder, field.element, v) for v in value])

    last = fields[-1] if fields else None
    builder.StartObject(0 if last is None else last.slot + (2 if last.type == "Attribute" else 1))
    for field in fields:
        value = values.get(field.name)
        if value is None:
            continue
        if field.type == "Attribute":
            utype = value[0]
            if utype:
                builder.PrependUint8Slot(field.slot, utype, 0)
                builder.PrependUOffsetTRelativeSlot(field.slot + 1, offsets[field.name], 0)
        elif field.type in SCALARS or field.type in ENUMS:
            prepend = getattr(builder, _PREPEND.get(field.type, "PrependUint32Slot"))
            prepend(field.slot, type(field.default)(value), field.default)
        else:
            builder.PrependUOffsetTRelativeSlot(field.slot, offsets[field.name], 0)
    return builder.EndObject()
