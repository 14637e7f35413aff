"""Instruction layouts for the hardware, derived from the ISA table (isa/instructions.py).

Nothing here writes a bit position or an opcode by hand: every field's position, width and
signedness comes from :meth:`isa.instructions.InstrDef.layout`, so a change to the table
changes the decoder.  :func:`instr_layout` gives an Amaranth ``StructLayout`` per
instruction; a 256-bit instruction word viewed through it has one attribute per field.
"""
from __future__ import annotations

from amaranth import Shape, signed, unsigned
from amaranth.lib import data

from isa.instructions import BY_NAME, INSTR_BITS, OPCODE_BITS, Field

RESERVED = "reserved"


def field_shape(f: Field) -> Shape:
    """Amaranth shape of one ISA field."""
    return signed(f.width) if f.signed else unsigned(f.width)


def instr_layout(name: str) -> data.StructLayout:
    """Layout of a whole instruction word: header, fields, then the reserved high bits."""
    defn = BY_NAME[name]
    members = {}
    for f, lsb in defn.layout():
        assert f.name != RESERVED, f"{name}: a field may not be called {RESERVED!r}"
        members[f.name] = field_shape(f)
    if defn.used_bits < INSTR_BITS:
        members[RESERVED] = unsigned(INSTR_BITS - defn.used_bits)
    layout = data.StructLayout(members)
    # StructLayout packs members in order from bit 0, exactly like InstrDef.layout().
    for f, lsb in defn.layout():
        assert layout[f.name].offset == lsb, (name, f.name)
    assert layout.size == INSTR_BITS
    return layout


def fields_layout(name: str, extra: dict | None = None) -> data.StructLayout:
    """Layout of an instruction's own fields (no header), as a unit command: ``extra``
    members first."""
    members = dict(extra or {})
    for f in BY_NAME[name].fields:
        members[f.name] = field_shape(f)
    return data.StructLayout(members)


def opcode(name: str) -> int:
    return BY_NAME[name].opcode


def field_def(name: str, field: str) -> Field:
    for f in BY_NAME[name].fields:
        if f.name == field:
            return f
    raise KeyError(f"{name} has no field {field!r}")


OPCODE_SHAPE = unsigned(OPCODE_BITS)
