"""The microcode instruction set: the ONE definition of every instruction.

Everything else is derived from the tables here: the encoder/decoder (isa/encoding.py), the
assembler and disassembler (isa/asm.py), the hardware decoder (hw/), the firmware C header
and docs/isa.md (isa/generate.py).  Nothing re-declares an opcode or a field width.

Every instruction is ``INSTR_BITS`` wide.  Bit 0 is the least significant bit of the first
byte in memory (instructions are stored little-endian, like all data).  Every instruction
starts with the common header:

* ``opcode`` (bits 0..5): which instruction; 0 is never valid, so zeroed memory traps.
* ``wait`` (bits 6..8): a mask of units (bit 0 DMA, 1 MXU, 2 VPU) that must be idle before
  this instruction issues.  This is the only synchronisation: the compiler sets it so that a
  consumer waits for its producer, and leaves it clear where work may overlap.

Fields follow the header in the order listed, packed from bit 9 upward with no gaps.  Unused
high bits must be zero.  Semantics are written in ``doc`` as executable-looking pseudocode
that the ISA simulator (sim/isa_sim.py) implements and the RTL must match bit for bit.

Execution: instructions issue in program order.  An instruction issues when its unit can
take it and every unit in ``wait`` is idle; a unit executes its own instructions in order
and each sees the complete effect of the previous one (consecutive MATMULs may overlap
inside the MXU pipeline, ACC updates included).  Result: the machine state is that of
executing the program sequentially, provided the wait masks order every pair of
instructions of different units that touch the same scratchpad row.

Errors depend only on an instruction's fields.  A failing instruction does nothing and
stops the NPU once the instructions before it have completed; nothing after it issues.
Within one instruction the first applicable error in the order ILLEGAL_INSTRUCTION,
DMA_MISALIGNED, DMA_OUT_OF_RANGE, SRAM_OVERFLOW is reported.  Address arithmetic is exact
(never modulo a field width).  Only rows actually touched are checked: a DMA moving zero
words, a MATMUL with ``n0*n1 == 0`` or an ACT with ``count == 0`` touches no data rows
(nothing happens), but the MATMUL weight tile and the three ACT parameter rows are always
checked.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

INSTR_BITS = 256
INSTR_BYTES = INSTR_BITS // 8
OPCODE_BITS = 6
WAIT_BITS = 3
HEADER_BITS = OPCODE_BITS + WAIT_BITS


class Unit(enum.IntEnum):
    """Execution units.  The value is the unit's bit in the ``wait`` mask (SEQ has none)."""

    DMA = 0
    MXU = 1
    VPU = 2
    SEQ = 3  # executed by the sequencer itself


class Sram(enum.IntEnum):
    """Scratchpads a DMA transfer can address (the ``sram`` field)."""

    ASRAM = 0
    WSRAM = 1
    PSRAM = 2


class ErrorCode(enum.IntEnum):
    """Values of the ERROR_CODE status register when the NPU stops on an error."""

    NONE = 0
    ILLEGAL_INSTRUCTION = 1   # unknown opcode, non-zero reserved bits, or an illegal field value
    DMA_OUT_OF_RANGE = 2      # a DMA touched external memory outside [0, ext_mem_bytes)
    DMA_MISALIGNED = 3        # a DMA address or stride is not a whole number of bus words
    SRAM_OVERFLOW = 4         # an access ran past the end of a scratchpad
    PROGRAM_TOO_LARGE = 5     # the program does not fit in the instruction memory
    PC_OVERFLOW = 6           # execution ran off the end of the program without HALT


@dataclass(frozen=True)
class Field:
    """One instruction field: name, width in bits, signedness, and what it means."""

    name: str
    width: int
    signed: bool = False
    doc: str = ""
    enum: type[enum.IntEnum] | None = None

    @property
    def min(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1


@dataclass(frozen=True)
class InstrDef:
    """One instruction: mnemonic, opcode, executing unit, fields after the header."""

    name: str
    opcode: int
    unit: Unit
    fields: tuple[Field, ...]
    doc: str

    def layout(self) -> list[tuple[Field, int]]:
        """(field, lsb) for the header and every field, in bit order."""
        out, lsb = [], 0
        for f in HEADER_FIELDS + self.fields:
            out.append((f, lsb))
            lsb += f.width
        return out

    @property
    def used_bits(self) -> int:
        return HEADER_BITS + sum(f.width for f in self.fields)


HEADER_FIELDS = (
    Field("opcode", OPCODE_BITS, doc="instruction opcode"),
    Field("wait", WAIT_BITS, doc="units that must be idle before issue: bit0 DMA, bit1 MXU, bit2 VPU"),
)

# Widths shared by several instructions, named once.
SRAM_ADDR_BITS = 20
EXT_ADDR_BITS = 32
LEN_BITS = 16
STRIDE_BITS = 32
PAD_BITS = 8
ACC_ADDR_BITS = 16
PARAM_ADDR_BITS = 12


def _dma_common() -> tuple[Field, ...]:
    return (
        Field("sram", 2, doc="scratchpad: 0 ASRAM, 1 WSRAM, 2 PSRAM", enum=Sram),
        Field("sram_addr", SRAM_ADDR_BITS, doc="first scratchpad word (bus-word units)"),
        Field("ext_addr", EXT_ADDR_BITS, doc="first external byte address (bus-word aligned)"),
        Field("len0", LEN_BITS, doc="bus words per line"),
        Field("len1", LEN_BITS, doc="lines per plane"),
        Field("len2", LEN_BITS, doc="planes"),
        Field("stride1", STRIDE_BITS, doc="external bytes from one line to the next (aligned)"),
        Field("stride2", STRIDE_BITS, doc="external bytes from one plane to the next (aligned)"),
    )


INSTRUCTIONS: tuple[InstrDef, ...] = (
    InstrDef("HALT", 1, Unit.SEQ, (), doc="""\
Wait until every unit is idle, then stop with status DONE and raise the interrupt."""),
    InstrDef("SYNC", 2, Unit.SEQ, (), doc="""\
Do nothing once the units in `wait` are idle (a barrier with no work attached)."""),
    InstrDef("DMA_LOAD", 8, Unit.DMA, _dma_common() + (
        Field("pad_b0", PAD_BITS, doc="pad words before each line"),
        Field("pad_a0", PAD_BITS, doc="pad words after each line"),
        Field("pad_b1", PAD_BITS, doc="pad lines before each plane"),
        Field("pad_a1", PAD_BITS, doc="pad lines after each plane"),
        Field("pad_value", 8, doc="byte written to every byte of a pad word"),
    ), doc="""\
Copy a 3-D strided region of external memory into a scratchpad, surrounding each plane
with pad words.  Scratchpad words are written consecutively from `sram_addr`:

    dst = sram_addr
    for p in 0 .. len2-1:
      for l in -pad_b1 .. len1+pad_a1-1:
        for w in -pad_b0 .. len0+pad_a0-1:
          if 0 <= l < len1 and 0 <= w < len0:
            SRAM[dst] = EXT[ext_addr + p*stride2 + l*stride1 + w*BUS : +BUS]
          else:
            SRAM[dst] = pad_value repeated BUS times
          dst += 1

ASRAM and WSRAM words are rows; ACC-wide memories (PSRAM) take several words per row,
lowest lanes first.  Errors: DMA_MISALIGNED if ext_addr, stride1 or stride2 is not a
multiple of BUS; DMA_OUT_OF_RANGE if any external word read lies outside memory;
SRAM_OVERFLOW if dst passes the end of the scratchpad; ILLEGAL_INSTRUCTION for sram=3.
Errors are detected before any word is transferred."""),
    InstrDef("DMA_STORE", 9, Unit.DMA, _dma_common(), doc="""\
Copy consecutive scratchpad words to a 3-D strided region of external memory:

    src = sram_addr
    for p in 0 .. len2-1:
      for l in 0 .. len1-1:
        for w in 0 .. len0-1:
          EXT[ext_addr + p*stride2 + l*stride1 + w*BUS : +BUS] = SRAM[src]; src += 1

Only ASRAM can be stored (sram != ASRAM is ILLEGAL_INSTRUCTION).  Other errors as
DMA_LOAD, detected before any word is transferred."""),
    InstrDef("MATMUL", 16, Unit.MXU, (
        Field("a_addr", SRAM_ADDR_BITS, doc="ASRAM row of the first input vector"),
        Field("a_stride0", LEN_BITS, doc="ASRAM rows between inputs of the inner loop"),
        Field("a_stride1", SRAM_ADDR_BITS, doc="ASRAM rows between inputs of the outer loop"),
        Field("n0", LEN_BITS, doc="inner loop count (input vectors per outer step)"),
        Field("n1", LEN_BITS, doc="outer loop count"),
        Field("w_addr", SRAM_ADDR_BITS, doc="WSRAM row of the weight tile (ROWS rows)"),
        Field("acc_addr", ACC_ADDR_BITS, doc="first ACC row written"),
        Field("accumulate", 1, doc="1: add onto ACC; 0: overwrite ACC"),
        Field("a_zp", 16, signed=True, doc="zero point subtracted from every input lane"),
        Field("w_zp", 8, signed=True, doc="zero point subtracted from every weight"),
    ), doc="""\
Multiply input vectors by one weight tile on the systolic array, into accumulators:

    W[k][n] = int8(WSRAM[w_addr + k] lane n) - w_zp        for k < ROWS, n < COLS
    for i1 in 0 .. n1-1:
      for i0 in 0 .. n0-1:
        a[k] = int8(ASRAM[a_addr + i1*a_stride1 + i0*a_stride0] lane k) - a_zp
        r = acc_addr + i1*n0 + i0
        ACC[r][n] = (accumulate ? ACC[r][n] : 0) + sum_k a[k]*W[k][n]   (int32, wrapping)

Errors: SRAM_OVERFLOW if any ASRAM, WSRAM or ACC row touched is past the end."""),
    InstrDef("ACT", 24, Unit.VPU, (
        Field("acc_addr", ACC_ADDR_BITS, doc="first ACC row read"),
        Field("count", LEN_BITS, doc="rows processed"),
        Field("dst_addr", SRAM_ADDR_BITS, doc="first ASRAM row written"),
        Field("param_addr", PARAM_ADDR_BITS, doc="PSRAM row of bias; +1 multiplier; +2 shift"),
        Field("out_zp", 16, signed=True, doc="output zero point added after scaling"),
        Field("clamp_min", 16, signed=True, doc="lower bound of the output"),
        Field("clamp_max", 16, signed=True, doc="upper bound of the output"),
        Field("scale32", 1, doc="1: 32-bit multiplier; 0: 16-bit multiplier (low half)"),
        Field("double_round", 1, doc="1: TOSA double rounding (scale32 only)"),
    ), doc="""\
The output stage of a convolution: bias, RESCALE, output zero point, clamp, narrow to int8.
Lane n of every row uses lane n of the parameter rows (per-channel scaling; per-tensor
scaling repeats one value):

    bias = PSRAM[param_addr]; mul = PSRAM[param_addr+1]; sh = PSRAM[param_addr+2] & 63
    for r in 0 .. count-1, lane n:
      v = int32(ACC[acc_addr + r][n] + bias[n])                          (wrapping)
      m = scale32 ? mul[n] : int16(mul[n])
      rnd = sh > 0 ? 1 << (sh-1) : 0
      if double_round and scale32 and sh > 31: rnd += v >= 0 ? 1<<30 : -(1<<30)
      s = int32((int64(v)*m + rnd) >> sh)                                 (64-bit, wrapping)
      ASRAM[dst_addr + r] lane n = int8(clamp(s + out_zp, clamp_min, clamp_max))

``s + out_zp`` is exact (no wrapping), ``clamp(x, lo, hi) = min(max(x, lo), hi)`` (TOSA
apply_clip order), and int8() keeps the low 8 bits.
This is apply_scale_32/16 of the TOSA spec (sim/tosa_helpers.py) for every value the spec
allows; outside its REQUIRE range the result is still defined as above.  Errors:
SRAM_OVERFLOW for rows past the end of ACC, ASRAM or PSRAM."""),
)

BY_NAME = {i.name: i for i in INSTRUCTIONS}
BY_OPCODE = {i.opcode: i for i in INSTRUCTIONS}


def _check_table() -> None:
    seen: set[int] = set()
    for instr in INSTRUCTIONS:
        if not 0 < instr.opcode < (1 << OPCODE_BITS):
            raise AssertionError(f"{instr.name}: opcode out of range")
        if instr.opcode in seen:
            raise AssertionError(f"{instr.name}: duplicate opcode")
        seen.add(instr.opcode)
        if instr.used_bits > INSTR_BITS:
            raise AssertionError(f"{instr.name}: {instr.used_bits} bits exceed {INSTR_BITS}")
        names = [f.name for f in HEADER_FIELDS + instr.fields]
        if len(set(names)) != len(names):
            raise AssertionError(f"{instr.name}: duplicate field names")


_check_table()
