"""Instruction checker: the error code an instruction word stops the NPU with.

Every error the ISA defines depends only on the instruction's fields (and the program
length), so the sequencer checks an instruction as it enters the issue register, before
any unit sees it; units never fail.  Rules (isa/instructions.py docs):

* PC past the program: PC_OVERFLOW (the word fetched there is not looked at);
* unknown opcode, non-zero reserved bits, an illegal ``sram``: ILLEGAL_INSTRUCTION;
* DMA: DMA_MISALIGNED, then DMA_OUT_OF_RANGE (only if a word is transferred), then
  SRAM_OVERFLOW (only if a scratchpad word is touched);
* MATMUL: SRAM_OVERFLOW for the weight tile (always) and, when ``n0*n1 > 0``, for the last
  ASRAM row read and the ACC rows written;
* ACT: SRAM_OVERFLOW for the three parameter rows (always) and, when ``count > 0``, for
  the ACC rows read and the ASRAM rows written.

Address arithmetic is exact (wide enough never to wrap).
"""
from __future__ import annotations

from amaranth import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from isa.instructions import INSTR_BITS, INSTRUCTIONS, OPCODE_BITS, ErrorCode, Sram
from hw.decode import RESERVED, instr_layout

CODE_BITS = 8
PC_BITS = 32


class InstrChecker(wiring.Component):
    """Combinational: ``code`` for instruction ``word`` at index ``pc`` of a ``prog_len``
    program."""

    def __init__(self, config: NpuConfig):
        self.config = config
        super().__init__({
            "word": In(INSTR_BITS),
            "pc": In(PC_BITS),
            "prog_len": In(PC_BITS),
            "code": Out(CODE_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus = cfg.bus_bytes
        align_bits = bus.bit_length() - 1
        code = self.code

        def dma_checks(v, count, legal_sram):
            """DMA priority chain; ``count``: scratchpad words touched."""
            misaligned = (v.ext_addr[:align_bits] | v.stride1[:align_bits] | v.stride2[:align_bits]) != 0
            moves = (v.len0 != 0) & (v.len1 != 0) & (v.len2 != 0)
            last = (v.ext_addr + (v.len2 - 1)[:16] * v.stride2 + (v.len1 - 1)[:16] * v.stride1
                    + v.len0 * bus)
            depth = Mux(v.sram == Sram.ASRAM, cfg.asram_rows,
                        Mux(v.sram == Sram.WSRAM, cfg.wsram_rows, cfg.psram_rows * cfg.words_per_wide_row))
            with m.If(~legal_sram):
                m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
            with m.Elif(misaligned):
                m.d.comb += code.eq(ErrorCode.DMA_MISALIGNED)
            with m.Elif(moves & (last > cfg.ext_mem_bytes)):
                m.d.comb += code.eq(ErrorCode.DMA_OUT_OF_RANGE)
            with m.Elif((count != 0) & (v.sram_addr + count > depth)):
                m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)

        def overflow(cond):
            with m.If(cond):
                m.d.comb += code.eq(ErrorCode.SRAM_OVERFLOW)

        opcode = self.word[:OPCODE_BITS]
        m.d.comb += code.eq(ErrorCode.NONE)
        with m.If(self.pc >= self.prog_len):
            m.d.comb += code.eq(ErrorCode.PC_OVERFLOW)
        with m.Else():
            with m.Switch(opcode):
                for defn in INSTRUCTIONS:
                    layout = instr_layout(defn.name)
                    v = layout(self.word)
                    with m.Case(defn.opcode):
                        reserved_ok = (v[RESERVED] == 0) if RESERVED in layout.members else True
                        with m.If(~reserved_ok):
                            m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
                        with m.Else():
                            if defn.name == "DMA_LOAD":
                                count = (v.len2 * (v.len1 + v.pad_b1 + v.pad_a1)
                                         * (v.len0 + v.pad_b0 + v.pad_a0))
                                dma_checks(v, count, v.sram <= max(Sram))
                            elif defn.name == "DMA_STORE":
                                dma_checks(v, v.len0 * v.len1 * v.len2, v.sram == Sram.ASRAM)
                            elif defn.name == "MATMUL":
                                n = v.n0 * v.n1
                                a_last = (v.a_addr + (v.n1 - 1)[:16] * v.a_stride1
                                          + (v.n0 - 1)[:16] * v.a_stride0)
                                overflow((v.w_addr + cfg.array_rows > cfg.wsram_rows)
                                         | ((n != 0) & ((a_last >= cfg.asram_rows)
                                                        | (v.acc_addr + n > cfg.acc_rows))))
                            elif defn.name == "ACT":
                                overflow((v.param_addr + 3 > cfg.psram_rows)
                                         | ((v.count != 0) & ((v.acc_addr + v.count > cfg.acc_rows)
                                                              | (v.dst_addr + v.count > cfg.asram_rows))))
                            else:
                                assert defn.name in ("HALT", "SYNC"), f"checker misses {defn.name}"
                with m.Default():
                    m.d.comb += code.eq(ErrorCode.ILLEGAL_INSTRUCTION)
        return m
