"""Instruction checker: the error code an instruction word stops the NPU with.

Every error the ISA defines depends only on the instruction's fields (and the program
length), so the sequencer checks an instruction as it enters the issue register, before
any unit sees it; units never fail.  Rules (isa/instructions.py docs):

* PC past the program: PC_OVERFLOW (the word fetched there is not looked at);
* unknown opcode, non-zero reserved bits, an illegal ``sram``: ILLEGAL_INSTRUCTION;
* DMA: ILLEGAL_INSTRUCTION for a bad ``elem`` (or word mode with ``stride0 != 0``), then
  DMA_MISALIGNED, DMA_OUT_OF_RANGE (only if an element is transferred), SRAM_OVERFLOW
  (only if a scratchpad word is touched), in word or element mode (isa/dma.py);
* MATMUL: SRAM_OVERFLOW for the weight tile (always; ROWS/2 rows for INT4 weights) and,
  when ``n0*n1 > 0``, for the last ASRAM row read (an INT16 vector's second row) and the
  ACC rows written (two per INT16 result);
* ACT: SRAM_OVERFLOW for the three parameter rows (always) and, when ``count > 0``, for
  the ACC rows read and the ASRAM rows written;
* LOOP: ILLEGAL_INSTRUCTION if ``body == 0``, ``body >= imem_rows`` (the body and the instruction
  after it must fit in the instruction buffer, hw/sequencer.py), the body runs past the program, ``loop_full``
  (LOOP_DEPTH loops active), the body ends past ``loop_end`` (one past the innermost
  active body; PROG_LEN when no loop is active), or (count >= 2) an increment sweeps a
  whole memory, ``(count - 1) * |inc| >= size`` (precomputed, hw/precheck.py).
* BRANCH: ILLEGAL_INSTRUCTION for test 3, a target past the program or ``loop_active``; then
  SRAM_OVERFLOW for a condition row past its memory (not for ALWAYS).  BRANCH_LIMIT depends
  on data: the sequencer finds it.
* VRESCALE, VALU, VPOOL: hw/vpu_check.py (illegal enum values, then SRAM_OVERFLOW);
  TABLE: hw/table_check.py (the same order).

Address fields are checked at their effective values (field + ``offsets`` of the active
loops, hw/loop.py), which ``word_eff`` carries to the units (truncated to the field widths:
exact whenever the instruction passes).  Address arithmetic is exact (wide enough never to
wrap); a negative effective address is outside its memory.

Two halves (timing, hw/precheck.py): the rules on field values alone (illegal fields, and
each range rule's extent, which needs the multiplies) are computed as the instruction is
written into IMEM and stored with it; this module, between IMEM's read port and the issue
register, adds the loop offsets and compares.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from isa.instructions import BY_NAME, INSTR_BITS, INSTRUCTIONS, OPCODE_BITS, ErrorCode
from hw.decode import instr_layout
from hw.loop import field_offsets, offsets_layout
from hw.precheck import PreCheck, dma_mask_bits, index_bits, pre_layout, rules
from hw.vpu_check import Term

CODE_BITS = 8
PC_BITS = 32


class InstrChecker(wiring.Component):
    """Combinational: ``code`` for instruction ``word`` at index ``pc`` of a ``prog_len``
    program, inside loops that add ``offsets`` to its addresses; ``word_eff`` is ``word``
    with its address fields replaced by their effective values; ``loop_ok``: ``word`` is a
    LOOP that passes (``code`` is NONE); ``body_end``: one past the last instruction of that
    LOOP's body (precomputed, hw/precheck.py).

    With ``precomputed=True`` (the sequencer) an input ``pre`` carries ``word``'s
    field-only rules (hw/precheck.py), computed when it was fetched and read from IMEM with
    it, and only the offsets are added here; ``loop_end`` is then replaced by ``past_end``,
    ``body_end`` past the innermost active body's end (0 with no loop active), which the
    loop stack compares level by level (hw/loop.py) instead of selecting the end first.  By default the checker computes ``pre``
    itself from ``word``: the same function in one combinational piece (the tests)."""

    def __init__(self, config: NpuConfig, precomputed: bool = False):
        self.config = config
        self.precomputed = precomputed
        ports = {
            "word": In(INSTR_BITS),
            "pc": In(PC_BITS),
            "prog_len": In(PC_BITS),
            "offsets": In(offsets_layout(config)),
            "loop_full": In(1),
            "loop_active": In(1),
            "code": Out(CODE_BITS),
            "word_eff": Out(INSTR_BITS),
            "loop_ok": Out(1),
            "body_end": Out(index_bits(config) + 1),
        }
        if precomputed:
            ports["pre"] = In(pre_layout(config))
            ports["past_end"] = In(1)
        else:
            ports["loop_end"] = In(PC_BITS)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        code = self.code
        if self.precomputed:
            pre = self.pre
        else:
            m.submodules.precheck = precheck = PreCheck(cfg)
            m.d.comb += [precheck.word.eq(self.word), precheck.pc.eq(self.pc)]
            pre = precheck.pre

        def fails(p, t: Term, offs, raw):
            """A range term fails at the effective address (module docstring of hw/precheck.py)."""
            off = offs[t.field]
            lo = p[f"{t.field}_lo"] if t.lo is not None else raw[t.field]
            return p[f"{t.field}_gate"] & (((lo + off) < 0) | ((p[f"{t.field}_hi"] + off) >= 0))

        opcode = self.word[:OPCODE_BITS]
        m.d.comb += code.eq(ErrorCode.NONE)
        # LOOP legality on its own (the sequencer's loop stack needs only this, and far
        # more often than the full code).  The body's length limits and reserved bits are in
        # ``illegal`` and its end is precomputed: only compares with registers are left.
        body_end = pre["LOOP"].end
        past_end = self.past_end if self.precomputed else body_end > self.loop_end
        loop_illegal = self.loop_full | (body_end > self.prog_len) | past_end
        m.d.comb += [
            self.body_end.eq(body_end),
            self.loop_ok.eq((opcode == BY_NAME["LOOP"].opcode) & (self.pc < self.prog_len)
                            & ~pre["LOOP"].illegal & ~loop_illegal),
        ]
        effective = {}                # opcode -> (defn, {field: effective value})
        dummy = Signal(INSTR_BITS)    # the rules' structure (which terms), not their values
        with m.If(self.pc >= self.prog_len):
            m.d.comb += code.eq(ErrorCode.PC_OVERFLOW)
        with m.Else():
            with m.Switch(opcode):
                for defn in INSTRUCTIONS:
                    raw = instr_layout(defn.name)(self.word)
                    offs = field_offsets(defn, raw, self.offsets, cfg)
                    effective[defn.opcode] = (defn, {f: raw[f] + off for f, off in offs.items()})
                    shape = rules(cfg, defn.name, instr_layout(defn.name)(dummy))
                    p = pre[defn.name]
                    with m.Case(defn.opcode):
                        failed = [fails(p, t, offs, raw) for t in shape.terms]
                        with m.If(p.illegal):
                            m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                        if defn.name in ("DMA_LOAD", "DMA_STORE"):
                            ext_low = (raw.ext_addr + offs["ext_addr"])[:dma_mask_bits(cfg.bus_bytes)]
                            with m.Elif(p.smis | ((ext_low & p.amask) != 0)):
                                m.d.comb += code.eq(ErrorCode.DMA_MISALIGNED)
                            with m.Elif(failed[0]):
                                m.d.comb += code.eq(ErrorCode.DMA_OUT_OF_RANGE)
                            with m.Elif(failed[1]):
                                m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)
                        elif defn.name == "LOOP":
                            with m.Elif(loop_illegal):
                                m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                        elif defn.name == "BRANCH":
                            with m.Elif((raw.target >= self.prog_len) | self.loop_active):
                                m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                            with m.Elif(p.over):
                                m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)
                        elif failed or defn.name == "TABLE":
                            with m.Elif(Cat(p.over, *failed).any()):
                                m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)
                with m.Default():
                    m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
        m.d.comb += self.word_eff.eq(self._merge(opcode, effective))
        return m

    def _merge(self, opcode, effective: dict):
        """``word`` with the effective addresses of its opcode spliced in.  Built as a
        concatenation of segments, each choosing among the few opcodes with an address
        there, rather than one wide multiplexer per opcode (far cheaper in Verilator)."""
        spans = [(op, lsb, f.width, eff[f.name]) for op, (defn, eff) in effective.items()
                 for f, lsb in defn.layout() if f.name in eff]
        cuts = sorted({0, INSTR_BITS} | {lsb for _, lsb, _, _ in spans} | {lsb + w for _, lsb, w, _ in spans})
        segments = []
        for lo, hi in zip(cuts, cuts[1:]):
            value = self.word[lo:hi]
            for op, lsb, width, eff in spans:
                if lsb <= lo and hi <= lsb + width:
                    value = Mux(opcode == op, eff[lo - lsb:hi - lsb], value)
            segments.append(value)
        return Cat(*segments)
