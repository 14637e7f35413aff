"""Binary encoding of instructions, derived from the table in isa/instructions.py."""
from __future__ import annotations

from dataclasses import dataclass, field

from isa.instructions import (
    BY_NAME, BY_OPCODE, HEADER_FIELDS, INSTR_BITS, INSTR_BYTES, OPCODE_BITS, InstrDef, Unit,
)


class EncodingError(ValueError):
    """A field value does not fit, or a word is not a valid instruction."""


@dataclass
class Instruction:
    """One decoded instruction: its definition and the value of every field (header included).

    Fields not given default to 0.  Values are plain ints (signed fields may be negative).
    """

    name: str
    values: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        defn = self.defn
        known, bounds = _checks(defn)
        values = self.values
        if not known.issuperset(values):
            unknown = set(values) - known
            raise EncodingError(f"{self.name} has no field(s) {', '.join(sorted(unknown))}")
        values["opcode"] = defn.opcode
        for name, lo, hi, f in bounds:
            v = values.setdefault(name, 0)
            if not (isinstance(v, int) and lo <= v <= hi):
                raise EncodingError(
                    f"{self.name}.{f.name} = {v!r} does not fit in {f.width} "
                    f"{'signed' if f.signed else 'unsigned'} bits [{f.min}, {f.max}]")

    @property
    def defn(self) -> InstrDef:
        try:
            return BY_NAME[self.name]
        except KeyError:
            raise EncodingError(f"unknown instruction {self.name!r}") from None

    @property
    def unit(self) -> Unit:
        return self.defn.unit

    def __getattr__(self, name: str) -> int:
        values = self.__dict__.get("values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(name)


_CHECKS: dict[str, tuple] = {}


def _checks(defn: InstrDef) -> tuple[frozenset, tuple]:
    """(field names, (name, min, max, field) per field) of ``defn``, computed once: every
    instruction the compiler builds is checked against them (ResNet-50: ~375,000)."""
    found = _CHECKS.get(defn.name)
    if found is None:
        fields = HEADER_FIELDS + defn.fields
        found = _CHECKS[defn.name] = (frozenset(f.name for f in fields),
                                      tuple((f.name, f.min, f.max, f) for f in fields))
    return found


def make(name: str, **values: int) -> Instruction:
    """Build an instruction: ``make("HALT")``, ``make("MATMUL", a_addr=0, n0=4, ...)``."""
    return Instruction(name, dict(values))


def encode_int(instr: Instruction) -> int:
    word = 0
    for f, lsb in instr.defn.layout():
        word |= (instr.values[f.name] & ((1 << f.width) - 1)) << lsb
    return word


def encode(instr: Instruction) -> bytes:
    return encode_int(instr).to_bytes(INSTR_BYTES, "little")


def decode_int(word: int) -> Instruction:
    opcode = word & ((1 << OPCODE_BITS) - 1)
    defn = BY_OPCODE.get(opcode)
    if defn is None:
        raise EncodingError(f"illegal opcode {opcode}")
    if word >> defn.used_bits:
        raise EncodingError(f"{defn.name}: reserved bits above bit {defn.used_bits - 1} are not zero")
    values = {}
    for f, lsb in defn.layout():
        v = (word >> lsb) & ((1 << f.width) - 1)
        if f.signed and v >> (f.width - 1):
            v -= 1 << f.width
        values[f.name] = v
    return Instruction(defn.name, values)


def decode(data: bytes) -> Instruction:
    if len(data) != INSTR_BYTES:
        raise EncodingError(f"an instruction is {INSTR_BYTES} bytes, got {len(data)}")
    return decode_int(int.from_bytes(data, "little"))


def encode_program(instrs: list[Instruction]) -> bytes:
    return b"".join(encode(i) for i in instrs)


def decode_program(data: bytes) -> list[Instruction]:
    if len(data) % INSTR_BYTES:
        raise EncodingError(f"program length {len(data)} is not a multiple of {INSTR_BYTES}")
    out = []
    for i in range(0, len(data), INSTR_BYTES):
        try:
            out.append(decode(data[i:i + INSTR_BYTES]))
        except EncodingError as e:
            raise EncodingError(f"instruction {i // INSTR_BYTES}: {e}") from None
    return out


assert INSTR_BITS % 8 == 0
