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
  (LOOP_DEPTH loops active), or the body ends past ``loop_end`` (one past the innermost
  active body; PROG_LEN when no loop is active).
* BRANCH: ILLEGAL_INSTRUCTION for test 3, a target past the program or ``loop_active``; then
  SRAM_OVERFLOW for a condition row past its memory (not for ALWAYS).  BRANCH_LIMIT depends
  on data: the sequencer finds it.
* VRESCALE, VALU, VPOOL: hw/vpu_check.py (illegal enum values, then SRAM_OVERFLOW);
  TABLE: hw/table_check.py (the same order).

Address fields are checked at their effective values (field + ``offsets`` of the active
loops, hw/loop.py), which ``word_eff`` carries to the units (truncated to the field widths:
exact whenever the instruction passes).  Address arithmetic is exact (wide enough never to
wrap); a negative effective address is outside its memory.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from isa.instructions import DMA_ELEM_SIZES
from isa import matmul
from isa.instructions import (BY_NAME, INSTR_BITS, INSTRUCTIONS, OPCODE_BITS, BranchTest, ErrorCode,
                              MatmulAType, MatmulWType, Sram, VecDst)
from hw.decode import RESERVED, instr_layout
from hw.loop import effective_fields, offsets_layout
from hw.table_check import table_errors
from hw.vpu_check import CHECKED as VECTOR_CHECKED, vector_errors

CODE_BITS = 8
PC_BITS = 32


class _Effective:
    """An instruction view whose address fields read as their effective values."""

    def __init__(self, view, effective: dict):
        self._view, self._effective = view, effective

    def __getattr__(self, name):
        return self._effective[name] if name in self._effective else self._view[name]

    def __getitem__(self, name):
        return self.__getattr__(name)


class InstrChecker(wiring.Component):
    """Combinational: ``code`` for instruction ``word`` at index ``pc`` of a ``prog_len``
    program, inside loops that add ``offsets`` to its addresses; ``word_eff`` is ``word``
    with its address fields replaced by their effective values; ``loop_ok``: ``word`` is a
    LOOP that passes (``code`` is NONE)."""

    def __init__(self, config: NpuConfig):
        self.config = config
        super().__init__({
            "word": In(INSTR_BITS),
            "pc": In(PC_BITS),
            "prog_len": In(PC_BITS),
            "offsets": In(offsets_layout()),
            "loop_full": In(1),
            "loop_end": In(PC_BITS),
            "loop_active": In(1),
            "code": Out(CODE_BITS),
            "word_eff": Out(INSTR_BITS),
            "loop_ok": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus = cfg.bus_bytes
        align_bits = bus.bit_length() - 1
        code = self.code

        def dma_checks(v, store):
            """DMA priority chain, both modes (isa/dma.py: word mode is E = BUS, stride0 = BUS)."""
            word_mode = v.elem == 0
            legal = ((v.sram == Sram.ASRAM) if store else (v.sram <= max(Sram)))
            legal &= ((v.elem == 0) & (v.stride0 == 0)) | Cat(*[v.elem == e for e in DMA_ELEM_SIZES]).any()
            esize = Mux(word_mode, bus, v.elem)                         # E
            eshift = Mux(word_mode, align_bits, 0)                      # log2(E)
            for k, e in enumerate(DMA_ELEM_SIZES):
                eshift = Mux(v.elem == e, e.bit_length() - 1, eshift)
            mask_bits = max(align_bits, max(DMA_ELEM_SIZES).bit_length() - 1)
            misaligned = ((v.ext_addr[:mask_bits] | v.stride0[:mask_bits] | v.stride1[:mask_bits]
                           | v.stride2[:mask_bits]) & (esize - 1)[:mask_bits]) != 0
            moves = (v.len0 != 0) & (v.len1 != 0) & (v.len2 != 0)
            inner = (v.len0 - 1)[:16] * Mux(word_mode, bus, v.stride0)
            lowest = v.ext_addr + Mux(inner < 0, inner, 0)
            last = (v.ext_addr + (v.len2 - 1)[:16] * v.stride2 + (v.len1 - 1)[:16] * v.stride1
                    + Mux(inner > 0, inner, 0) + esize)
            outside = (lowest < 0) | (last > cfg.ext_mem_bytes)
            elements = v.len0 if store else v.len0 + v.pad_b0 + v.pad_a0
            line_words = ((elements << eshift) + (bus - 1)) >> align_bits       # K
            count = v.len2 * (v.len1 if store else v.len1 + v.pad_b1 + v.pad_a1) * line_words
            depth = Mux(v.sram == Sram.ASRAM, cfg.asram_rows,
                        Mux(v.sram == Sram.WSRAM, cfg.wsram_rows, cfg.psram_rows * cfg.words_per_wide_row))
            with m.If(~legal):
                m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
            with m.Elif(misaligned):
                m.d.comb += code.eq(ErrorCode.DMA_MISALIGNED)
            with m.Elif(moves & outside):
                m.d.comb += code.eq(ErrorCode.DMA_OUT_OF_RANGE)
            with m.Elif((count != 0) & ((v.sram_addr < 0) | (v.sram_addr + count > depth))):
                m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)

        def overflow(cond):
            with m.If(cond):
                m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)

        opcode = self.word[:OPCODE_BITS]
        m.d.comb += code.eq(ErrorCode.NONE)
        # LOOP legality on its own (the sequencer's loop stack needs only this, and far
        # more often than the full code).
        loop = instr_layout("LOOP")(self.word)
        loop_last = self.pc + loop.body
        loop_illegal = ((loop.body == 0) | (loop_last >= self.prog_len) | self.loop_full
                        | (loop_last >= self.loop_end) | (loop.body >= cfg.imem_rows))
        m.d.comb += self.loop_ok.eq((opcode == BY_NAME["LOOP"].opcode) & (self.pc < self.prog_len)
                                    & (loop[RESERVED] == 0) & ~loop_illegal)
        effective = {}                # opcode -> (defn, {field: effective value})
        with m.If(self.pc >= self.prog_len):
            m.d.comb += code.eq(ErrorCode.PC_OVERFLOW)
        with m.Else():
            with m.Switch(opcode):
                for defn in INSTRUCTIONS:
                    layout = instr_layout(defn.name)
                    raw = layout(self.word)
                    eff = effective_fields(defn, raw, self.offsets, cfg)
                    effective[defn.opcode] = (defn, eff)
                    v = _Effective(raw, eff)
                    with m.Case(defn.opcode):
                        reserved_ok = (v[RESERVED] == 0) if RESERVED in layout.members else True
                        with m.If(~reserved_ok):
                            m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                        with m.Else():
                            if defn.name in ("DMA_LOAD", "DMA_STORE"):
                                dma_checks(v, store=defn.name == "DMA_STORE")
                            elif defn.name == "MATMUL":
                                n = v.n0 * v.n1
                                wide = v.a_type == MatmulAType.INT16       # P = 2 rows (isa/matmul.py)
                                tile = Mux(v.w_type == MatmulWType.INT4,
                                           matmul.tile_rows(cfg.array_rows, MatmulWType.INT4),
                                           matmul.tile_rows(cfg.array_rows, MatmulWType.INT8))
                                a_last = (v.a_addr + (v.n1 - 1)[:16] * v.a_stride1
                                          + (v.n0 - 1)[:16] * v.a_stride0 + wide)
                                overflow((v.w_addr < 0) | (v.w_addr + tile > cfg.wsram_rows)
                                         | ((n != 0) & ((v.a_addr < 0) | (a_last >= cfg.asram_rows)
                                                        | (v.acc_addr < 0)
                                                        | (v.acc_addr + Mux(wide, n << 1, n) > cfg.acc_rows))))
                            elif defn.name == "ACT":
                                overflow((v.param_addr < 0) | (v.param_addr + 3 > cfg.psram_rows)
                                         | ((v.count != 0) & ((v.acc_addr < 0) | (v.acc_addr + v.count > cfg.acc_rows)
                                                              | (v.dst_addr < 0)
                                                              | (v.dst_addr + v.count > cfg.asram_rows))))
                            elif defn.name == "LOOP":
                                with m.If(loop_illegal):
                                    m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                            elif defn.name == "BRANCH":
                                rows = Mux(v.mem == VecDst.ACC, cfg.acc_rows, cfg.asram_rows)
                                with m.If((v.test == 3) | (v.target >= self.prog_len) | self.loop_active):
                                    m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                                with m.Elif((v.test != BranchTest.ALWAYS) & (v.row >= rows)):
                                    m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)
                            elif defn.name == "TABLE":
                                illegal, over = table_errors(cfg, v)
                                with m.If(illegal):
                                    m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                                with m.Elif(over):
                                    m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)
                            elif defn.name in VECTOR_CHECKED:
                                illegal, over = vector_errors(cfg, defn.name, v)
                                with m.If(illegal):
                                    m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                                with m.Elif(over):
                                    m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)
                            else:
                                assert defn.name in ("HALT", "SYNC"), f"checker misses {defn.name}"
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
