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
that the ISA simulator (sim/isa/sim.py) implements and the RTL must match bit for bit.

Execution: instructions issue in program order.  An instruction issues when its unit can
take it and every unit in ``wait`` is idle; a unit executes its own instructions in order
and each sees the complete effect of the previous one (consecutive MATMULs may overlap
inside the MXU pipeline, ACC updates included).  Result: the machine state is that of
executing the program sequentially, provided the wait masks order every pair of
instructions of different units that touch the same scratchpad row.  LOOP repeats the
instructions after it with their address fields (``Field.space``) offset per iteration;
"program order" is then the order of the unrolled loops, and an instruction's fields mean
its effective (offset) values.

Errors depend only on an instruction's (effective) fields, and for LOOP and BRANCH on the
active loops (except BRANCH_LIMIT, which depends on a BRANCH's condition).  A failing instruction does nothing and stops the NPU once the instructions before
it have completed; nothing after it issues.  Within one instruction the first applicable
error in the order ILLEGAL_INSTRUCTION, DMA_MISALIGNED, DMA_OUT_OF_RANGE, SRAM_OVERFLOW is
reported.  Address arithmetic is exact (never modulo a field width; a negative effective
address is outside its memory).  Only rows actually touched are checked: a DMA moving zero
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
MXU_LAG_BITS = 2            # ACT: unfinished MATMULs its MXU wait allows (at most 3)


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


class VecMem(enum.IntEnum):
    """Memory a vector-unit operand is read from (``a_mem``, ``b_mem``, ``c_mem``); the names
    are address spaces."""

    ASRAM = 0
    ACC = 1
    PSRAM = 2


class VecDst(enum.IntEnum):
    """Memory a vector-unit result is written to (``d_mem``)."""

    ASRAM = 0
    ACC = 1


class VecType(enum.IntEnum):
    """Element type of a vector (sizes and ranges: isa/vector.py)."""

    INT8 = 0
    INT16 = 1
    INT32 = 2
    INT48 = 3
    UINT8 = 4
    UINT16 = 5


class ValuOp(enum.IntEnum):
    """VALU operations (the VALU doc defines each)."""

    ADD = 0
    SUB = 1
    MUL = 2
    ARITHMETIC_RIGHT_SHIFT = 3
    LOGICAL_LEFT_SHIFT = 4
    LOGICAL_RIGHT_SHIFT = 5
    BITWISE_AND = 6
    BITWISE_OR = 7
    BITWISE_XOR = 8
    BITWISE_NOT = 9
    MINIMUM = 10
    MAXIMUM = 11
    CLAMP = 12
    EQUAL = 13
    GREATER = 14
    GREATER_EQUAL = 15
    LOGICAL_AND = 16
    LOGICAL_OR = 17
    LOGICAL_XOR = 18
    LOGICAL_NOT = 19
    SELECT = 20
    ABS = 21
    NEGATE = 22
    CLZ = 23
    COPY = 24


class PoolMode(enum.IntEnum):
    """VPOOL reductions."""

    MAX = 0
    SUM = 1


class MatmulAType(enum.IntEnum):
    """MATMUL input (activation) types (``a_type``); INT16 accumulates in int48."""

    INT8 = 0
    INT16 = 1


class MatmulWType(enum.IntEnum):
    """MATMUL weight types (``w_type``); INT4 weights are packed two per byte."""

    INT8 = 0
    INT4 = 1


class TableMode(enum.IntEnum):
    """What TABLE does: fill the table memory, or look up int8 / int16 vectors."""

    LOAD = 0
    INT8 = 1
    INT16 = 2


class Space(enum.IntEnum):
    """Address spaces.  An address field tagged with a space (``Field.space``) is offset inside
    LOOPs by that space's increment.  EXT counts bytes; the scratchpads count rows."""

    EXT = 0
    ASRAM = 1
    WSRAM = 2
    ACC = 3
    PSRAM = 4


LOOP_DEPTH = 4   # LOOPs that may be active (nested) at once
# Timing of the sequencer's own instructions (sim/npu_timing.py applies them; hw/sequencer.py
# is built so): a LOOP with count 0 waits this many cycles more in the front end's read port
# (its skip is decided from registers), and a BRANCH is decided this many cycles after its
# condition is read (the condition is registered between the block RAM and the decision).
ZERO_LOOP_WAIT = 1
BRANCH_DECIDE = 2
# An instruction can be read this many cycles after the response of its last bus word: in
# the response's cycle its precheck's multiplier operands are registered (the DSP blocks'
# input registers), the cycle after its products, the cycle after that its sums and compares,
# and then it is written into IMEM with them (the read port is transparent for the write).
FETCH_ARRIVAL = 3


class BranchTest(enum.IntEnum):
    """When a BRANCH is taken (value 3 is illegal)."""

    ALWAYS = 0
    ZERO = 1
    NONZERO = 2


class BranchType(enum.IntEnum):
    """Element type of a BRANCH condition (lane 0 of a vector, read as VECTOR_DOC's read())."""

    INT8 = 0
    INT32 = 1


class ErrorCode(enum.IntEnum):
    """Values of the ERROR_CODE status register when the NPU stops on an error."""

    NONE = 0
    ILLEGAL_INSTRUCTION = 1   # unknown opcode, non-zero reserved bits, or an illegal field value
    DMA_OUT_OF_RANGE = 2      # a DMA touched external memory outside [0, ext_mem_bytes)
    DMA_MISALIGNED = 3        # a DMA address or stride is not a multiple of its unit (bus word or element)
    SRAM_OVERFLOW = 4         # an access ran past the end of a scratchpad
    PROGRAM_TOO_LARGE = 5     # no longer raised: instructions are fetched, any length runs (kept: codes do not move)
    PC_OVERFLOW = 6           # execution ran off the end of the program without HALT
    BRANCH_LIMIT = 7          # a taken backward BRANCH would exceed its budget (`limit`)
    WATCHDOG = 8              # the run reached MAX_CYCLES (hw/csr.py): nothing more issued


@dataclass(frozen=True)
class Field:
    """One instruction field: name, width in bits, signedness, and what it means.

    ``space`` tags an address field: inside LOOPs its value is offset by the enclosing loops'
    increments for that :class:`Space`; a string instead names the instruction's enum field
    whose value names the space (DMA ``sram_addr`` follows ``sram``).  ``in_words``: the
    address counts bus words, so a row offset is scaled by the space's words per row.
    ``increment`` marks a LOOP field as the per-iteration increment of a space.
    """

    name: str
    width: int
    signed: bool = False
    doc: str = ""
    enum: type[enum.IntEnum] | None = None
    space: Space | str | None = None
    in_words: bool = False
    increment: Space | None = None

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
LOOP_BODY_BITS = 12
BRANCH_TARGET_BITS = 16
BRANCH_LIMIT_BITS = 24


def _dma_common() -> tuple[Field, ...]:
    return (
        Field("sram", 2, doc="scratchpad: 0 ASRAM, 1 WSRAM, 2 PSRAM", enum=Sram),
        Field("sram_addr", SRAM_ADDR_BITS, doc="first scratchpad word (bus-word units)",
              space="sram", in_words=True),
        Field("ext_addr", EXT_ADDR_BITS, doc="first external byte address (bus-word aligned)",
              space=Space.EXT),
        Field("len0", LEN_BITS, doc="bus words per line"),
        Field("len1", LEN_BITS, doc="lines per plane"),
        Field("len2", LEN_BITS, doc="planes"),
        Field("stride1", STRIDE_BITS, doc="external bytes from one line to the next (aligned)"),
        Field("stride2", STRIDE_BITS, doc="external bytes from one plane to the next (aligned)"),
    )


DMA_ELEM_SIZES = (1, 2, 4, 8)   # legal non-zero values of the DMA `elem` field (bytes)


def _dma_elem() -> tuple[Field, ...]:
    """Element mode, appended after the older fields so word-mode encodings are unchanged."""
    return (
        Field("elem", 4, doc="0: word mode; 1, 2, 4, 8: element mode with elements of that many bytes"),
        Field("stride0", STRIDE_BITS, signed=True,
              doc="element mode: external bytes from one element of a line to the next (word mode: 0)"),
    )


# -- vector-unit operands (VRESCALE, VALU, VPOOL) ---------------------------------------------
VEC_ADDR_BITS = 16     # vector operands address the first 2**16 rows of a memory
VEC_ZP_BITS = 17       # zero points and clamps of 8/16-bit signed and unsigned types


TSRAM_BYTES = 2048     # TABLE's table memory: 512 int16 pairs (isa/vector.py: table_rows)
# The most vector steps (output vectors n0*n1, times the window k0*k1 for VPOOL) one vector
# instruction may take: a stride-0 instruction could otherwise loop 2**32 (VPOOL 2**48) times
# in place, far beyond the watchdog's reach, which stops only issue.  2**24 steps end within
# about 0.2 s at 100 MHz; compiled code stays far below (a vector instruction covers one
# scratchpad-sized tile).
MAX_VECTOR_STEPS = 1 << 24
TABLE_ADDR_BITS = 12   # TSRAM rows (2048 / BUS, BUS >= 1)


def _vec_loops() -> tuple[Field, ...]:
    return (
        Field("n0", LEN_BITS, doc="inner loop count (output vectors per outer step)"),
        Field("n1", LEN_BITS, doc="outer loop count"),
    )


def _vec_src(p: str, what: str, bcast: bool = False) -> tuple[Field, ...]:
    return (
        Field(f"{p}_mem", 2, doc=f"memory of {what}", enum=VecMem),
        Field(f"{p}_addr", VEC_ADDR_BITS, doc=f"first row of {what}", space=f"{p}_mem"),
        Field(f"{p}_stride0", VEC_ADDR_BITS, doc="rows between vectors of the inner loop"),
        Field(f"{p}_stride1", VEC_ADDR_BITS, doc="rows between vectors of the outer loop"),
    ) + ((Field(f"{p}_bcast", 1, doc=f"1: lane 0 of {what} is used for every lane"),) if bcast else ())


def _vec_dst() -> tuple[Field, ...]:
    return (
        Field("d_mem", 1, doc="memory written", enum=VecDst),
        Field("d_addr", VEC_ADDR_BITS, doc="first row written", space="d_mem"),
        Field("d_stride0", VEC_ADDR_BITS, doc="rows between results of the inner loop"),
        Field("d_stride1", VEC_ADDR_BITS, doc="rows between results of the outer loop"),
    )


VECTOR_DOC = """\
Vectors (VRESCALE, VALU, VPOOL).  A vector is COLS lanes of one element type T (VecType:
INT8, INT16, INT32, INT48, UINT8, UINT16; bits(T) = 8, 16, 32, 48, 8, 16).  read(mem, T,
row) and write(mem, T, row, y) move one vector:

* ASRAM: the vector fills bits(T)/8 consecutive rows from `row`; in their bytes,
  concatenated, lane n is bytes n*bits(T)/8 .. (n+1)*bits(T)/8 - 1, little-endian.
  read: those bytes as T (UINT types zero-extended); write: the low bits(T) bits of y.
* ACC and PSRAM: one row of COLS int32 lanes per vector; read: the low bits(T) bits of
  lane n as T.  INT48 takes two rows: lane n of the first is the low 32 bits, the low 16
  bits of lane n of the second the high bits.  A write (ACC only: PSRAM is never written
  by the VPU) stores T(y) sign-extended (UINT types: zero-extended) to 32 bits.

Output vectors are produced for i1 in 0 .. n1-1 (outer), i0 in 0 .. n0-1 (inner); all the
rows of one output vector are read before any of its results is written, and results are
written in loop order (a later one overwrites an earlier one).  A row written for one
output vector must not be read for a later one of the same instruction (what that read
returns is unspecified).  Nothing happens when n0*n1 == 0 (no row is touched)."""


INSTRUCTIONS: tuple[InstrDef, ...] = (
    InstrDef("HALT", 1, Unit.SEQ, (), doc="""\
Wait until every unit is idle, then stop with status DONE and raise the interrupt."""),
    InstrDef("SYNC", 2, Unit.SEQ, (), doc="""\
Do nothing once the units in `wait` are idle (a barrier with no work attached)."""),
    InstrDef("LOOP", 3, Unit.SEQ, (
        Field("count", LEN_BITS, doc="iterations (0: skip the body)"),
        Field("body", LOOP_BODY_BITS, doc="instructions in the body: the next `body` after the LOOP"),
        Field("inc_ext", EXT_ADDR_BITS, signed=True, doc="EXT address increment per iteration (bytes)",
              increment=Space.EXT),
        Field("inc_asram", SRAM_ADDR_BITS, signed=True, doc="ASRAM increment per iteration (rows)",
              increment=Space.ASRAM),
        Field("inc_wsram", SRAM_ADDR_BITS, signed=True, doc="WSRAM increment per iteration (rows)",
              increment=Space.WSRAM),
        Field("inc_acc", ACC_ADDR_BITS, signed=True, doc="ACC increment per iteration (rows)",
              increment=Space.ACC),
        Field("inc_psram", PARAM_ADDR_BITS, signed=True,
              doc="PSRAM increment per iteration (rows; a DMA moves words_per_wide_row words per row)",
              increment=Space.PSRAM),
    ), doc=f"""\
Execute the next `body` instructions `count` times, offsetting their addresses:

    start = pc + 1; last = pc + body               (the body: instructions start .. last)
    for i in 0 .. count-1:                         (count == 0: the body is skipped)
      execute instructions start .. last, each address field F of space S read as
        F + sum over the active loops l (this one and those enclosing it) of i_l * inc_S(l)

Address fields carry their space in this table ("space" column of docs/isa.md): EXT
(`ext_addr`, bytes, `inc_ext`) and the scratchpads ASRAM, WSRAM, ACC, PSRAM (rows,
`inc_asram`, `inc_wsram`, `inc_acc`, `inc_psram`).  A DMA `sram_addr` is in the scratchpad
its `sram` field names and counts bus words: an ASRAM or WSRAM row is one word, a PSRAM
row is words_per_wide_row words, so `inc_psram = r` moves a DMA into PSRAM by
r * words_per_wide_row words per iteration and an ACT `param_addr` by r rows.  No other
field is offset (lengths, strides, counts, zero points, LOOP's own fields).

The effective address is computed when the instruction issues, exactly (never modulo a
field width); the units and every error check see it.  A negative effective address that
is touched is out of range: DMA_OUT_OF_RANGE for EXT, SRAM_OVERFLOW for a scratchpad.

Nesting: a LOOP in a body starts an inner loop, which runs all its iterations in every
iteration of the outer one (its LOOP instruction is executed, and waits, each time).  An
inner body may end at the same instruction as the outer one.  At most LOOP_DEPTH = {LOOP_DEPTH}
loops are active at once; a loop ends after the last iteration of its last instruction.

`wait` applies when the LOOP instruction issues, so once before the first iteration; the
body's instructions carry their own waits, checked in every iteration.  Like SYNC, LOOP
does no work: it takes one issue slot, and going back from the last instruction of the
body to the first costs nothing (timing rules: sim/npu_timing.py); a LOOP with count 0
reaches the issue register {ZERO_LOOP_WAIT} cycle later than another instruction would.  A HALT or an error
inside a body stops the NPU as anywhere else (STOP_PC is the instruction's index).

Errors: ILLEGAL_INSTRUCTION (even when count == 0) if body == 0; if pc + body >= the
number of instructions (the body runs past the program); if body >= imem_rows (a body stays
in the instruction buffer while its loop runs, with room for the instruction after it); if
LOOP_DEPTH loops are
already active; or if pc + body is past the last instruction of the innermost active loop's
body.  Also ILLEGAL_INSTRUCTION (checked only when count >= 2) if for some space S
(count - 1) * |inc_S| is at least the size of S (EXT: ext_mem_bytes bytes; a scratchpad: its
rows): the loop would move S's addresses further than the memory is long, so an instruction
of the body using S could not stay inside it in every iteration.  The bound makes every
offset smaller in magnitude than LOOP_DEPTH times the space's size, which is what the
sequencer's offset arithmetic is sized for (hw/loop.py)."""),
    InstrDef("BRANCH", 4, Unit.SEQ, (
        Field("target", BRANCH_TARGET_BITS, doc="index of the instruction executed next when taken"),
        Field("test", 2, doc="ALWAYS, or taken when the condition is ZERO / NONZERO", enum=BranchTest),
        Field("mem", 1, doc="memory of the condition: 0 ASRAM, 1 ACC", enum=VecDst),
        Field("row", VEC_ADDR_BITS, doc="row of the condition (lane 0 is read)"),
        Field("dtype", 1, doc="type of the condition: 0 INT8, 1 INT32", enum=BranchType),
        Field("limit", BRANCH_LIMIT_BITS, doc="taken backward branches the run may make (budget)"),
    ), doc="""\
Conditional jump, executed by the sequencer once the units in `wait` are idle (so the
unit that computed the condition has written it):

    if test == ALWAYS: taken = 1
    else:
      x = lane 0 of read(mem, dtype, row)            (VECTOR_DOC: ASRAM INT8: byte 0 of the
                                                      row; INT32: bytes 0..3; ACC: the low
                                                      8 or 32 bits of lane 0)
      taken = (x == 0) if test == ZERO else (x != 0)
    if taken and target <= pc:                       (backward; target == pc too)
      if back_taken == limit: stop with BRANCH_LIMIT
      back_taken += 1
    pc = taken ? target : pc + 1

`back_taken` counts the taken backward branches since CTRL.START (all BRANCHes share it);
a BRANCH that would take it past its own `limit` fails instead.  So a loop built from
branches whose exit condition never comes stops with an error and the interrupt, never
hangs.  The compiler sets `limit` to the budget of the TOSA reference interpreter
(sim/reference/interpreter.py, max_loop_iterations: WHILE_LOOP body executions counted over
the whole run), one backward branch per iteration.

LOOP: a BRANCH runs only with no LOOP active (never inside a LOOP body, as the loop
stack could not follow it).  A branch may jump into the middle of a LOOP's body from
outside: the instructions there then run once, as straight-line code (the LOOP was not
executed, so no loop is active).

Timing: the condition is read in the cycle the wait mask is met and decided BRANCH_DECIDE
= 2 cycles later (the BRANCH issues then); a taken branch refetches, so its target enters
the issue register two cycles after the BRANCH issues instead of one (sim/npu_timing.py).

Errors: ILLEGAL_INSTRUCTION if test == 3, target >= the number of instructions, or a LOOP
is active; SRAM_OVERFLOW if test != ALWAYS and row is past the end of `mem` (checked from
the fields, like any instruction's errors).  BRANCH_LIMIT is the one error that depends on
data (the condition): STOP_PC is the BRANCH's index, it happens when the BRANCH would
issue, and the NPU stops once every unit is idle."""),
    InstrDef("DMA_LOAD", 8, Unit.DMA, _dma_common() + (
        Field("pad_b0", PAD_BITS, doc="pad words (element mode: elements) before each line"),
        Field("pad_a0", PAD_BITS, doc="pad words (element mode: elements) after each line"),
        Field("pad_b1", PAD_BITS, doc="pad lines before each plane"),
        Field("pad_a1", PAD_BITS, doc="pad lines after each plane"),
        Field("pad_value", 8, doc="byte written to every pad byte"),
    ) + _dma_elem() + (
        Field("pack", 1, doc="1: the lines of a plane follow each other byte after byte "
                             "(a fresh word per plane, not per line)"),
    ), doc="""\
Copy a 3-D strided region of external memory into a scratchpad, surrounding each plane
with padding.  `elem` chooses the unit a line is made of:

* word mode (elem = 0): a line is len0 bus words; below, E = BUS and stride0 reads as
  BUS (the field itself must be 0).
* element mode (elem = 1, 2, 4, 8): a line is len0 elements of E = elem bytes, `stride0`
  bytes apart (signed: negative walks backwards, as for REVERSE; 0 repeats one element);
  `ext_addr` and every stride need only be multiples of E.

Each line, its pad_b0 + len0 + pad_a0 elements packed one after the other (little-endian
bytes as in memory), fills K = ceil((pad_b0+len0+pad_a0)*E / BUS) consecutive scratchpad
words from a fresh word; bytes of the last word past the line's end are pad_value (word
mode: K = pad_b0+len0+pad_a0, nothing is left over).  So a line is a run of K rows:

    dst = sram_addr
    for p in 0 .. len2-1:
      for l in -pad_b1 .. len1+pad_a1-1:
        line = pad_value repeated K*BUS times
        if 0 <= l < len1:
          for w in 0 .. len0-1:
            a = ext_addr + p*stride2 + l*stride1 + w*stride0
            line[(pad_b0+w)*E : +E] = EXT[a : a+E]
        for j in 0 .. K-1:
          SRAM[dst] = line[j*BUS : (j+1)*BUS]; dst += 1

pack = 1 (packed lines): a plane, not a line, starts at a fresh word.  Its lines, each
pad_b0 + len0 + pad_a0 elements as above, are concatenated byte after byte (a line may
begin in the middle of a word), and the plane fills KP = ceil(lines*(pad_b0+len0+pad_a0)*E
/ BUS) words, lines = pad_b1 + len1 + pad_a1; the bytes of its last word past the plane's
end are pad_value.  That is the pseudocode above with `line` standing for the whole plane
(pad_value repeated KP*BUS times, line l's element w at byte ((l+pad_b1)*(pad_b0+len0+
pad_a0) + pad_b0 + w)*E) and the plane's KP words written after its last line.  Why: an
im2col gather (kernel rows of a few-channel image, one plane per output pixel) then fills
every lane of a row instead of starting each kernel row at a fresh word.  Word mode moves
whole words, so packed and unpacked planes are the same words there.

ASRAM and WSRAM words are rows; ACC-wide memories (PSRAM) take several words per row,
lowest lanes first.  int8/uint8/bool elements take 1 byte, int16 2, int32 4, int48 8 (in
external memory an int48 value is stored sign-extended to 64 bits, as isa/layout.py packs
the int64 host arrays).  Errors: ILLEGAL_INSTRUCTION for sram = 3, elem not in 0, 1, 2,
4, 8, or elem = 0 with stride0 != 0; DMA_MISALIGNED if ext_addr, stride0, stride1 or
stride2 is not a multiple of E; DMA_OUT_OF_RANGE if len0*len1*len2 > 0 and a byte read
lies outside memory: the lowest is ext_addr + min(0, (len0-1)*stride0), the highest
ext_addr + (len2-1)*stride2 + (len1-1)*stride1 + max(0, (len0-1)*stride0) + E - 1;
SRAM_OVERFLOW if dst passes the end of the scratchpad.  Errors are detected before any
word is transferred.  Timing: one element (E > BUS: one bus word of it) per cycle, pad
elements included, packed lines or not (sim/npu_timing.py)."""),
    InstrDef("DMA_STORE", 9, Unit.DMA, _dma_common() + _dma_elem(), doc="""\
Copy scratchpad lines to a 3-D strided region of external memory (modes, E and K as in
DMA_LOAD, with no padding: K = ceil(len0*E / BUS) words per line):

    src = sram_addr
    for p in 0 .. len2-1:
      for l in 0 .. len1-1:
        line = SRAM[src] .. SRAM[src+K-1] (bytes, concatenated); src += K
        for w in 0 .. len0-1:
          a = ext_addr + p*stride2 + l*stride1 + w*stride0
          EXT[a : a+E] = line[w*E : +E]

Only the element bytes are written: every other external byte keeps its value (the bus
has byte enables).  Where elements overlap, the later one in this order wins.  Only
ASRAM can be stored (sram != ASRAM is ILLEGAL_INSTRUCTION).  Other errors as DMA_LOAD
(the bytes written are checked), detected before any byte is transferred."""),
    InstrDef("MATMUL", 16, Unit.MXU, (
        Field("a_addr", SRAM_ADDR_BITS, doc="ASRAM row of the first input vector", space=Space.ASRAM),
        Field("a_stride0", LEN_BITS, doc="ASRAM rows between inputs of the inner loop"),
        Field("a_stride1", SRAM_ADDR_BITS, doc="ASRAM rows between inputs of the outer loop"),
        Field("n0", LEN_BITS, doc="inner loop count (input vectors per outer step)"),
        Field("n1", LEN_BITS, doc="outer loop count"),
        Field("w_addr", SRAM_ADDR_BITS, doc="WSRAM row of the weight tile (ROWS rows; INT4: ROWS/2)",
              space=Space.WSRAM),
        Field("acc_addr", ACC_ADDR_BITS, doc="first ACC row written", space=Space.ACC),
        Field("accumulate", 1, doc="1: add onto ACC; 0: overwrite ACC"),
        Field("a_zp", 16, signed=True, doc="zero point subtracted from every input lane"),
        Field("w_zp", 8, signed=True, doc="zero point subtracted from every weight"),
        Field("a_type", 1, doc="input type (INT16: int48 accumulators)", enum=MatmulAType),
        Field("w_type", 1, doc="weight type (INT4: packed two per byte)", enum=MatmulWType),
    ), doc="""\
Multiply input vectors by one weight tile on the systolic array, into accumulators.
`a_type` and `w_type` select the mode (TOSA's integer CONV2D, DEPTHWISE_CONV2D,
TRANSPOSE_CONV2D, MATMUL and FULLY_CONNECTED modes; both 0 is int8 x int8 -> int32):

    a_type  w_type  mode                       P  tile rows  accumulators  MACs/cycle
    INT8    INT8    8x8, int32 accumulate      1  ROWS       INT32         ROWS*COLS
    INT8    INT4    8x4, int32 accumulate      1  ROWS/2     INT32         ROWS*COLS
    INT16   INT8    16x8, int48 accumulate     2  ROWS       INT48         ROWS*COLS/2
    INT16   INT4    16x4, int48 accumulate     2  ROWS/2     INT48         ROWS*COLS/2

P is the ASRAM rows of one input vector and the ACC rows of one result: the INT16 and
INT48 layouts of the vector instructions (read() below is VRESCALE's), so VRESCALE with
in_type INT48, a_mem ACC, a_stride0 2 rescales int48 accumulators directly.

    W[k][n] = w(k, n) - w_zp                                  for k < ROWS, n < COLS
      INT8 weights: w(k, n) = int8(WSRAM[w_addr + k] lane n)
      INT4 weights: w(k, n) = int4(nibble k*COLS + n of the tile), the tile being the
        bytes of WSRAM rows w_addr .. w_addr + ROWS/2 - 1 in order, nibble 2j the low
        and 2j+1 the high half of byte j (int4() sign-extends: -8 .. 7)
    for i1 in 0 .. n1-1:
      for i0 in 0 .. n0-1:
        a[k] = read(ASRAM, a_type, a_addr + i1*a_stride1 + i0*a_stride0)[k] - a_zp
        r = acc_addr + P*(i1*n0 + i0)
        INT8 input:  ACC[r][n] = (accumulate ? ACC[r][n] : 0) + sum_k a[k]*W[k][n]
                                                                       (int32, wrapping)
        INT16 input: y = (accumulate ? read(ACC, INT48, r)[n] : 0) + sum_k a[k]*W[k][n]
                     ACC[r][n] = low 32 bits of y; ACC[r+1][n] = int32(int48(y) >> 32)
                                        (int48 wrapping; the high row sign-extended)

Why this design.  A PE multiplies (int8 - a_zp), 17 bits, by (int8 - w_zp), 9 bits: an
int16 input minus a 16-bit zero point has the same 17 bits, so 16x8 runs on the same
multipliers in one pass (no low/high byte passes, no wider multipliers: one DSP block
per PE either way); its column sums are exact and only the accumulate adder grows to 48
bits across two ACC rows.  It runs at half rate because an int16 vector is two ASRAM
rows and its result two ACC rows through the same single ports.  INT4 weights keep the
int8 rate and halve the weight footprint and DMA traffic: a tile is ROWS/2 whole rows
(full bus words), the row-major ROWS x COLS tile packed like TOSA's int4 tensors (two
per byte, low nibble first).  TOSA requires input_zp = 0 for int16 and weight_zp = 0
for int4; the zero points here apply in every mode anyway.

Errors: SRAM_OVERFLOW if any ASRAM row read (the P rows of each input vector), WSRAM row
of the tile or ACC row touched (P per result) is past the end."""),
    InstrDef("ACT", 24, Unit.VPU, (
        Field("acc_addr", ACC_ADDR_BITS, doc="first ACC row read", space=Space.ACC),
        Field("count", LEN_BITS, doc="rows processed"),
        Field("dst_addr", SRAM_ADDR_BITS, doc="first ASRAM row written", space=Space.ASRAM),
        Field("param_addr", PARAM_ADDR_BITS, doc="PSRAM row of bias; +1 multiplier; +2 shift",
              space=Space.PSRAM),
        Field("out_zp", 16, signed=True, doc="output zero point added after scaling"),
        Field("clamp_min", 16, signed=True, doc="lower bound of the output"),
        Field("clamp_max", 16, signed=True, doc="upper bound of the output"),
        Field("scale32", 1, doc="1: 32-bit multiplier; 0: 16-bit multiplier (low half)"),
        Field("double_round", 1, doc="1: TOSA double rounding (scale32 only)"),
        Field("mxu_lag", MXU_LAG_BITS, doc="with MXU in wait: issue once at most this many MATMULs are "
                                           "unfinished (0: the MXU idle)"),
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
SRAM_OVERFLOW for rows past the end of ACC, ASRAM or PSRAM.

``mxu_lag`` (timing only) relaxes the MXU bit of ``wait``: the ACT issues once at most
``mxu_lag`` MATMULs issued before it are unfinished (a MATMUL is unfinished from its issue
until its last ACC write).  The MXU finishes MATMULs in issue order, so every MATMUL but the
last ``mxu_lag`` has written ACC; the compiler sets it when the ACT reads the results of a
MATMUL followed by up to ``mxu_lag`` others (the next output block's), so the array streams
on while the ACT waits for its own block and never drains between blocks (an MXU wait
otherwise waits for the whole array to empty: ``array_rows + 2`` cycles per block).  This is
AMD GCN's ``s_waitcnt`` counter wait applied to one unit; with MXU not in ``wait`` it has no
effect."""),
    InstrDef("VRESCALE", 25, Unit.VPU, _vec_loops() + _vec_src("a", "the input") + _vec_dst() + (
        Field("in_type", 3, doc="element type read", enum=VecType),
        Field("out_type", 3, doc="element type written (not INT48)", enum=VecType),
        Field("param_addr", PARAM_ADDR_BITS, doc="PSRAM row of the multipliers; +1 the shifts",
              space=Space.PSRAM),
        Field("per_channel", 1, doc="1: lane n uses parameter lane n; 0: every lane uses lane 0"),
        Field("scale32", 1, doc="1: 32-bit multiplier; 0: 16-bit multiplier (low half)"),
        Field("double_round", 1, doc="1: TOSA double rounding (scale32 only)"),
        Field("in_zp", VEC_ZP_BITS, signed=True, doc="input zero point (a number: UINT16's 32768 too)"),
        Field("out_zp", VEC_ZP_BITS, signed=True, doc="output zero point"),
        Field("clamp", 1, doc="1: clamp the result to [clamp_min, clamp_max] after the type range"),
        Field("clamp_min", VEC_ZP_BITS, signed=True, doc="lower bound when clamp = 1"),
        Field("clamp_max", VEC_ZP_BITS, signed=True, doc="upper bound when clamp = 1"),
    ), doc=VECTOR_DOC + """

TOSA RESCALE in every mode (in_t, out_t, zero points, scale32/scale16, rounding,
per-channel or per-tensor), vector by vector, with an optional clamp:

    mul = PSRAM[param_addr]; sh = PSRAM[param_addr+1] & 63
    for each output vector (i1, i0):
      x = read(a_mem, in_type, a_addr + i1*a_stride1 + i0*a_stride0)
      for lane n:  c = per_channel ? n : 0
        value = int48(x[n] - in_zp)                                     (wrapping)
        v = scale32 ? int32(value) : value                              (wrapping)
        m = scale32 ? mul[c] : int16(mul[c])
        rnd = sh[c] > 0 ? 1 << (sh[c]-1) : 0
        if double_round and scale32 and sh[c] > 31: rnd += v >= 0 ? 1<<30 : -(1<<30)
        s = int32((int64(v)*m + rnd) >> sh[c])                          (64-bit, wrapping)
        y = min(max(s + out_zp, lo(out_type)), hi(out_type))            (exact)
        if clamp: y = min(max(y, clamp_min), clamp_max)
        out[n] = y
      write(d_mem, out_type, d_addr + i1*d_stride1 + i0*d_stride0, out)

lo/hi are the range of out_type (UINT8 0..255, UINT16 0..65535).  With the spec's
ERROR_IFs on types and zero points satisfied and its REQUIREs (apply_scale_32/16,
apply_add_s) holding, this is RESCALE bit for bit (rounding_mode DOUBLE_ROUND:
double_round = 1; SINGLE_ROUND and INEXACT_ROUND: 0); elsewhere the result is still
defined as above.  Errors: ILLEGAL_INSTRUCTION for in_type 6..7, out_type INT48 or 6..7,
a_mem 3, or n0*n1 > MAX_VECTOR_STEPS (2**24); SRAM_OVERFLOW for the two parameter rows (always) and, when n0*n1 > 0, for rows
read or written past the end of their memory."""),
    InstrDef("VALU", 26, Unit.VPU, (
        Field("op", 5, doc="operation", enum=ValuOp),
        Field("dtype", 2, doc="element type T (not INT48)", enum=VecType),
    ) + _vec_loops() + _vec_src("a", "operand a", bcast=True) + _vec_src("b", "operand b", bcast=True) + (
        Field("c_mem", 2, doc="memory of operand c", enum=VecMem),
        Field("c_addr", VEC_ADDR_BITS, doc="first row of operand c", space="c_mem"),
        Field("c_fixed", 1, doc="1: c is read at c_addr for every vector; 0: with b's strides"),
        Field("c_bcast", 1, doc="1: lane 0 of c is used for every lane"),
    ) + _vec_dst() + (
        Field("imm0", 16, signed=True, doc="immediate: MUL shift, ARITHMETIC_RIGHT_SHIFT round, "
                                           "CLAMP min, NEGATE input zero point"),
        Field("imm1", 16, signed=True, doc="immediate: CLAMP max, NEGATE output zero point"),
    ), doc="""\
Elementwise operations on vectors of type T = dtype (read, write and the loops as in
VRESCALE); bool values are INT8 0/1.  Lane by lane, with a, b, c the operand values
(a_bcast, b_bcast, c_bcast: lane 0 of that operand for every lane):

    for each output vector (i1, i0):
      a = read(a_mem, op == SELECT ? INT8 : T, a_addr + i1*a_stride1 + i0*a_stride0)
      b = read(b_mem, T, b_addr + i1*b_stride1 + i0*b_stride0)               (binary, SELECT)
      c = read(c_mem, T, c_addr + (c_fixed ? 0 : i1*b_stride1 + i0*b_stride0))  (SELECT)
      write(d_mem, U, d_addr + i1*d_stride1 + i0*d_stride0, op(a, b, c))

    op                      result (exact integers, then U())                  U
    ADD, SUB                a + b, a - b                                       T
    MUL                     p = a*b; k = imm0 & 63                             INT32
                            if k > 0: p = (p + (1 << (k-1))) >> k  (64-bit, wrapping)
    ARITHMETIC_RIGHT_SHIFT  k = b & 31; r = a >> k                             T
                            if (imm0 & 1) and k > 0: r += (a >> (k-1)) & 1
    LOGICAL_LEFT_SHIFT      a << (b & 31)                                      T
    LOGICAL_RIGHT_SHIFT     ua >> (b & 31)  (ua: a's bits(T) bits unsigned)    T
    BITWISE_AND, _OR, _XOR  a & b, a | b, a ^ b                                T
    BITWISE_NOT             ~a                                                 T
    MINIMUM, MAXIMUM        min(a, b), max(a, b)                               T
    CLAMP                   min(max(a, imm0), imm1)                            T
    EQUAL, GREATER,         a == b, a > b, a >= b  (1 or 0)                    INT8
      GREATER_EQUAL
    LOGICAL_AND, _OR, _XOR  (a != 0) and / or / xor (b != 0)  (1 or 0)         INT8
    LOGICAL_NOT             a == 0  (1 or 0)                                   INT8
    SELECT                  a != 0 ? b : c                                     T
    ABS                     a < 0 ? -a : a                                     T
    NEGATE                  min(max(imm0 - a + imm1, lo(T)), hi(T))            T
    CLZ                     count_leading_zeros(int32(a))  (32 for 0)          T
    COPY                    a                                                  T

U() keeps the low bits (two's complement wrapping).  Each op is its TOSA operator's
pseudocode (MUL with shift; ARITHMETIC_RIGHT_SHIFT with round; NEGATE with input1_zp =
imm0, output_zp = imm1; CLAMP with min_val = imm0, max_val = imm1) wherever the spec's
REQUIREs hold, and still defined as above where they do not.  COPY with a in PSRAM and
d in ACC preloads accumulators (e.g. a bias).  Errors: ILLEGAL_INSTRUCTION for op 25..31,
dtype INT48, a_mem, b_mem or c_mem 3, or n0*n1 > MAX_VECTOR_STEPS; SRAM_OVERFLOW, when n0*n1 > 0, for rows past the
end of their memory read for an operand the op uses (a; b for binary ops and SELECT; c
for SELECT) or written."""),
    InstrDef("VPOOL", 27, Unit.VPU, (
        Field("mode", 1, doc="reduction", enum=PoolMode),
        Field("dtype", 2, doc="element type read (not INT48)", enum=VecType),
    ) + _vec_loops() + (
        Field("k0", 8, doc="window: inner count"),
        Field("k1", 8, doc="window: outer count"),
        Field("w_stride0", VEC_ADDR_BITS, doc="rows between window vectors of the inner count"),
        Field("w_stride1", VEC_ADDR_BITS, doc="rows between window vectors of the outer count"),
    ) + _vec_src("a", "the input") + _vec_dst() + (
        Field("in_zp", 16, signed=True, doc="zero point subtracted from every element (SUM)"),
    ), doc="""\
Pooling: every output vector reduces a window of k1 x k0 input vectors (read, write and
the loops as in VRESCALE):

    for each output vector (i1, i0):
      base = a_addr + i1*a_stride1 + i0*a_stride0
      for w1 in 0 .. k1-1, w0 in 0 .. k0-1:
        x = read(a_mem, dtype, base + w1*w_stride1 + w0*w_stride0)
        MAX: r = (w1, w0) == (0, 0) ? x : max(r, x)                    (lanewise)
        SUM: r = int32(r + x - in_zp)           (r starts at 0; exact, then wrapping)
      write(d_mem, MAX ? dtype : INT32, d_addr + i1*d_stride1 + i0*d_stride0, r)

MAX is MAX_POOL2D; SUM is the accumulation of AVG_POOL2D (apply_add_s<int32> of value -
input_zp, wrapping where its REQUIRE fails), completed by a VRESCALE with
reciprocal_scale(count).  Padded edge windows are separate instructions with smaller
k0/k1.  Nothing happens when n0*n1*k0*k1 == 0.  Errors: ILLEGAL_INSTRUCTION for dtype
INT48, a_mem 3, or n0*n1*k0*k1 > MAX_VECTOR_STEPS; SRAM_OVERFLOW, when n0*n1*k0*k1 > 0, for rows read or written past the
end of their memory."""),
    InstrDef("TABLE", 28, Unit.VPU, (
        Field("mode", 2, doc="LOAD the table memory, or look up INT8 / INT16 vectors", enum=TableMode),
    ) + _vec_loops() + _vec_src("a", "the input (LOAD: the table rows)") + _vec_dst() + (
        Field("t_addr", TABLE_ADDR_BITS, doc="first TSRAM row of the table (LOAD: first row written)"),
    ), doc=f"""\
TOSA TABLE.  The table lives in TSRAM, the table memory: TSRAM_BYTES = {TSRAM_BYTES} bytes in
rows of BUS bytes (one bus word, like an ASRAM row; rows 0 .. {TSRAM_BYTES}/BUS - 1), zero at
reset; TSRAM[b] is its byte b.  (The hardware keeps one copy per lane so all COLS lanes look
up at once; LOAD writes every copy.)  Input vectors are read, and results written, as in
VRESCALE (read(), write() and the loops):

    LOAD:   (fill TSRAM from ASRAM, where a DMA_LOAD put the table)
      for each vector (i1, i0):
        TSRAM row t_addr + i1*n0 + i0 = ASRAM[a_addr + i1*a_stride1 + i0*a_stride0]
    INT8:   (256 int8 entries: entry e at byte t_addr*BUS + e)
      for each output vector (i1, i0):
        x = read(a_mem, INT8, a_addr + i1*a_stride1 + i0*a_stride0)
        out[n] = int8(TSRAM[t_addr*BUS + x[n] + 128])
        write(d_mem, INT8, d_addr + i1*d_stride1 + i0*d_stride0, out)
    INT16:  (512 entry pairs, pair i at bytes t_addr*BUS + 4*i: int16 table[i], then
             int16 table[i+1], little-endian; so one read gives both neighbours)
      for each output vector (i1, i0):
        x = read(a_mem, INT16, a_addr + i1*a_stride1 + i0*a_stride0)
        for lane n:
          i = (x[n] + 32768) >> 7; f = x[n] & 127
          base = int16(TSRAM[t_addr*BUS + 4*i : +2]); next = int16(TSRAM[t_addr*BUS + 4*i + 2 : +2])
          out[n] = (base << 7) + (next - base) * f                  (exact: fits int32)
        write(d_mem, INT32, d_addr + i1*d_stride1 + i0*d_stride0, out)

INT8 is TABLE for int8 (a 256-entry table: TSRAM byte e holds table[e]); INT16 is TABLE for
int16 (apply_lookup_s of a 513-entry table, whose 512 pairs (table[i], table[i+1]) TSRAM
holds), bit for bit, and defined as above where the spec's REQUIRE on the slope fails.
A LOAD of 256/BUS rows (INT8) or {TSRAM_BYTES}/BUS rows (INT16, t_addr 0) installs a table.
In LOAD mode the d_* fields are ignored.  Nothing happens when n0*n1 == 0.  Errors:
ILLEGAL_INSTRUCTION for mode 3, a_mem other than ASRAM or ACC, a_mem ACC with mode
LOAD, or n0*n1 > MAX_VECTOR_STEPS; SRAM_OVERFLOW, when n0*n1 > 0, for input or output rows past the end of their
memory, or TSRAM rows past its end (LOAD: the rows written; INT8: the 256/BUS table rows
from t_addr; INT16: the {TSRAM_BYTES}/BUS rows from t_addr)."""),
    InstrDef("VDWCONV", 29, Unit.VPU, _vec_loops() + (
        Field("k0", 8, doc="window: inner count (kernel width)"),
        Field("k1", 8, doc="window: outer count (kernel height)"),
        Field("w_stride0", VEC_ADDR_BITS, doc="rows between window vectors of the inner count"),
        Field("w_stride1", VEC_ADDR_BITS, doc="rows between window vectors of the outer count"),
    ) + _vec_src("a", "the input") + (
        Field("b_mem", 2, doc="memory of the weights", enum=VecMem),
        Field("b_addr", VEC_ADDR_BITS, doc="first row of the weights (window element e at row b_addr + e)",
              space="b_mem"),
    ) + _vec_dst() + (
        Field("param_addr", PARAM_ADDR_BITS, doc="PSRAM row of bias; +1 multiplier; +2 shift",
              space=Space.PSRAM),
        Field("in_zp", 8, signed=True, doc="input zero point"),
        Field("out_zp", 8, signed=True, doc="output zero point added after scaling"),
        Field("clamp_min", 8, signed=True, doc="lower bound of the output"),
        Field("clamp_max", 8, signed=True, doc="upper bound of the output"),
        Field("scale32", 1, doc="1: 32-bit multiplier; 0: 16-bit multiplier (low half)"),
        Field("double_round", 1, doc="1: TOSA double rounding (scale32 only)"),
    ), doc="""\
A depthwise convolution step: every output vector is a window of k1 x k0 INT8 input
vectors weighted lane by lane by k1*k0 INT8 weight vectors (lane n is channel n), summed
onto the bias, and scaled to INT8 as ACT does (read, write and the loops as in VRESCALE):

    bias = PSRAM[param_addr]; mul = PSRAM[param_addr+1]; sh = PSRAM[param_addr+2] & 63
    for each output vector (i1, i0), lane n:
      base = a_addr + i1*a_stride1 + i0*a_stride0
      v = bias[n]
      for w1 in 0 .. k1-1, w0 in 0 .. k0-1:
        x = read(a_mem, INT8, base + w1*w_stride1 + w0*w_stride0)[n]
        w = read(b_mem, INT8, b_addr + w1*k0 + w0)[n]
        v = int32(v + (x - in_zp) * w)                                     (wrapping)
      s = ACT's scaling of v (m, rnd and the double rounding as in ACT)
      write(d_mem, INT8, d_addr + i1*d_stride1 + i0*d_stride0, clamp(s + out_zp, clamp_min, clamp_max))

This is TOSA DEPTHWISE_CONV2D (multiplier 1, weight_zp 0, int32 accumulator) for one
block of COLS channels, with the RESCALE (per channel, input_zp 0) and CLAMP after it
fused, as the MAC array's MATMULs and ACT compute it; the bias and every product are
exact and the sum wraps to int32 at each step (equal to the spec's wherever its REQUIRE
holds).  The weights are the same for every output vector: window element (w1, w0)
reads weight row b_addr + w1*k0 + w0 (an ACC or PSRAM row: the low 8 bits of each lane).
Schedule: after the three parameter rows, k1*k0 + 2 cycles per output vector (the last
product is added to the sum, then the sum is scaled with the lane's multiplier, the one
the window's products use), and the result is written two cycles later than VPOOL's
(isa/vector.py).  Nothing happens when
n0*n1*k0*k1 == 0.  Errors: ILLEGAL_INSTRUCTION for a_mem or b_mem 3, or n0*n1*k0*k1 >
MAX_VECTOR_STEPS; SRAM_OVERFLOW, when n0*n1*k0*k1 > 0, for PSRAM parameter rows, input,
weight or output rows past the end of their memory."""),
)

BY_NAME = {i.name: i for i in INSTRUCTIONS}
BY_OPCODE = {i.opcode: i for i in INSTRUCTIONS}


# -- LOOP address offsets, derived from the ``space`` tags above ------------------------------
def address_fields(defn: InstrDef) -> tuple[Field, ...]:
    """The fields of ``defn`` that LOOPs offset (those with a ``space``)."""
    return tuple(f for f in defn.fields if f.space is not None)


def loop_increments() -> dict[Space, Field]:
    """LOOP's increment field of every space."""
    return {f.increment: f for f in BY_NAME["LOOP"].fields if f.increment is not None}


def space_size(space: Space, config) -> int:
    """Size of ``space`` in its offset units (EXT: bytes; a scratchpad: rows); ``config`` is
    an isa.config.NpuConfig."""
    if space is Space.EXT:
        return config.ext_mem_bytes
    return getattr(config, f"{space.name.lower()}_rows")


def loop_sweep_error(values: dict, config) -> Space | None:
    """The first space whose increment a LOOP with field ``values`` may not have: its
    iterations would move it by ``(count - 1) * |inc|``, at least the space's size (LOOP's
    errors).  None when the LOOP passes that rule."""
    if values["count"] < 2:
        return None
    for space, f in loop_increments().items():
        if (values["count"] - 1) * abs(values[f.name]) >= space_size(space, config):
            return space
    return None


def increment_bits(space: Space, config) -> int:
    """Signed width of an increment of ``space`` that a legal LOOP that loops back can have:
    ``|inc| < size`` (LOOP's errors)."""
    return (space_size(space, config) - 1).bit_length() + 1


def offset_bits(space: Space, config) -> int:
    """Signed width of the offset of ``space`` (the sum over the active loops of iteration *
    increment): each level's ``|i * inc| <= (count - 1) * |inc| < size``, so the sum is smaller
    in magnitude than LOOP_DEPTH * size."""
    return (LOOP_DEPTH * (space_size(space, config) - 1)).bit_length() + 1


def space_choices(defn: InstrDef, f: Field) -> dict[int, Space]:
    """Value of the selecting field -> space, for a field whose space another field names
    (for a fixed space: ``{None: space}``).  Selector values naming no space are absent."""
    if isinstance(f.space, Space):
        return {None: f.space}
    selector = next(g for g in defn.fields if g.name == f.space)
    return {int(e): Space[e.name] for e in selector.enum}


def field_space(defn: InstrDef, f: Field, values: dict) -> Space | None:
    """Space of address field ``f`` given the instruction's field ``values`` (None when the
    selecting field names no space: that instruction is illegal anyway)."""
    choices = space_choices(defn, f)
    return choices[None] if None in choices else choices.get(values[f.space])


def offset_unit(f: Field, space: Space, config) -> int:
    """Units of field ``f`` per unit (row) of a ``space`` offset: 1, or the bus words per row
    of the space for an ``in_words`` field (``config`` is an isa.config.NpuConfig)."""
    if not f.in_words or space is Space.EXT:
        return 1
    return getattr(config, f"{space.name.lower()}_row_bytes") // config.bus_bytes


def effective_values(defn: InstrDef, values: dict, offsets: dict, config) -> dict:
    """``values`` with every address field moved by ``offsets`` (Space -> int, the sum over the
    active loops of iteration * increment), in exact integer arithmetic."""
    out = dict(values)
    for f in address_fields(defn):
        space = field_space(defn, f, values)
        if space is not None:
            out[f.name] = values[f.name] + offsets.get(space, 0) * offset_unit(f, space, config)
    return out


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
        for f in instr.fields:
            if isinstance(f.space, str):
                selector = next((g for g in instr.fields if g.name == f.space), None)
                if selector is None or selector.enum is None or \
                        any(e.name not in Space.__members__ for e in selector.enum):
                    raise AssertionError(f"{instr.name}.{f.name}: space must name an enum field of spaces")
            if (f.space is not None or f.in_words) and (f.signed or instr.unit is Unit.SEQ):
                raise AssertionError(f"{instr.name}.{f.name}: address fields are unsigned unit operands")
            if f.increment is not None and instr.name != "LOOP":
                raise AssertionError(f"{instr.name}.{f.name}: only LOOP has increments")
    if sorted(loop_increments()) != sorted(Space):
        raise AssertionError("LOOP needs exactly one increment field per address space")


_check_table()
