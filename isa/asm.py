"""Text assembler and disassembler.  They round-trip: ``assemble(disassemble(p)) == p``.

Syntax, one instruction per line::

    # comment (also ';')
    DMA_LOAD sram=ASRAM sram_addr=0 ext_addr=0x1000 len0=4 len1=4 len2=1 wait=MXU|VPU
    HALT

Indentation is free (handy for LOOP bodies).  Fields are ``name=value``; omitted fields are 0.  Values are integers in any Python base
(``0x10``, ``-3``), enum names for enum fields (``sram=WSRAM``), and ``|``-joined unit names
or an integer for ``wait``.
"""
from __future__ import annotations

from isa.encoding import EncodingError, Instruction
from isa.instructions import BY_NAME, HEADER_FIELDS, Unit


class AsmError(ValueError):
    """A line of assembly that cannot be assembled; the message names the line."""


def _parse_value(defn, fname: str, text: str) -> int:
    fdef = next((f for f in HEADER_FIELDS + defn.fields if f.name == fname), None)
    if fdef is None:
        raise EncodingError(f"{defn.name} has no field {fname!r}")
    if fname == "wait" and not text.lstrip("-").isdigit() and not text.startswith("0"):
        mask = 0
        for part in text.split("|"):
            try:
                unit = Unit[part.strip().upper()]
            except KeyError:
                raise EncodingError(f"unknown unit {part!r} in wait") from None
            if unit is Unit.SEQ:
                raise EncodingError("SEQ cannot be waited on")
            mask |= 1 << unit.value
        return mask
    if fdef.enum is not None and text.isidentifier():
        try:
            return int(fdef.enum[text.upper()])
        except KeyError:
            raise EncodingError(f"{fname}: unknown value {text!r}") from None
    try:
        return int(text, 0)
    except ValueError:
        raise EncodingError(f"{fname}: {text!r} is not an integer") from None


def assemble_line(line: str) -> Instruction | None:
    code = line.split("#", 1)[0].split(";", 1)[0].strip()
    if not code:
        return None
    mnemonic, *args = code.split()
    defn = BY_NAME.get(mnemonic.upper())
    if defn is None:
        raise EncodingError(f"unknown instruction {mnemonic!r}")
    values = {}
    for arg in args:
        if "=" not in arg:
            raise EncodingError(f"expected name=value, got {arg!r}")
        name, text = arg.split("=", 1)
        if name in values:
            raise EncodingError(f"field {name!r} given twice")
        values[name] = _parse_value(defn, name, text)
    if "opcode" in values:
        raise EncodingError("opcode is implied by the mnemonic")
    return Instruction(defn.name, values)


def assemble(text: str, source: str = "<asm>") -> list[Instruction]:
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        try:
            instr = assemble_line(line)
        except EncodingError as e:
            raise AsmError(f"{source}:{lineno}: {e}") from None
        if instr is not None:
            out.append(instr)
    return out


def _format_value(fdef, value: int) -> str:
    if fdef.name == "wait":
        units = [u.name for u in Unit if u is not Unit.SEQ and value >> u.value & 1]
        return "|".join(units) if units else "0"
    if fdef.enum is not None:
        try:
            return fdef.enum(value).name
        except ValueError:
            return str(value)
    return hex(value) if fdef.name.startswith("ext_") or fdef.name.startswith("stride") else str(value)


def disassemble_one(instr: Instruction, all_fields: bool = False) -> str:
    parts = [instr.name]
    for fdef in HEADER_FIELDS[1:] + instr.defn.fields:
        value = instr.values[fdef.name]
        if value or all_fields:
            parts.append(f"{fdef.name}={_format_value(fdef, value)}")
    return " ".join(parts)


def disassemble(instrs: list[Instruction], numbered: bool = False) -> str:
    lines = []
    for i, instr in enumerate(instrs):
        text = disassemble_one(instr)
        lines.append(f"{i:5d}: {text}" if numbered else text)
    return "\n".join(lines) + "\n"
