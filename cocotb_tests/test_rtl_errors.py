"""Error stops on the 4x4 NPU: ERROR_CODE, STOP_PC, the interrupt, the cycle count, and
that work issued before the failing instruction completes while nothing after it runs."""
from __future__ import annotations

import numpy as np
import pytest

from isa import SMALL_CONFIG, make
from isa.instructions import INSTR_BYTES, ErrorCode, Sram
from isa.program import Program
from hw.harness.simulation import run_program

from cocotb_tests.rtl_harness import run_checked

CFG = SMALL_CONFIG
BUS = CFG.bus_bytes
DATA, OUT1, OUT2 = 0x2000, 0x3000, 0x3100
MEM_BYTES = 0x3200


def memory():
    mem = bytearray(MEM_BYTES)
    mem[DATA:DATA + 64] = np.arange(64, dtype=np.uint8).tobytes()
    return mem


def around(bad, before_wait=1):
    """Load data, start a long MATMUL, store to OUT1, then ``bad``, then a store to OUT2."""
    return [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=DATA, len0=16, len1=1, len2=1),
        make("MATMUL", a_addr=0, a_stride0=0, n0=200, n1=1, w_addr=0, acc_addr=0, wait=1),
        make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=OUT1, len0=16, len1=1, len2=1,
             wait=before_wait),
        bad,
        make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=OUT2, len0=16, len1=1, len2=1),
        make("HALT"),
    ]


CASES = {
    "dma_out_of_range": (make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=CFG.ext_mem_bytes - 2 * BUS,
                              len0=3, len1=1, len2=1), ErrorCode.DMA_OUT_OF_RANGE),
    "dma_out_of_range_3d": (make("DMA_STORE", sram=0, sram_addr=0, ext_addr=0, len0=1, len1=2, len2=2,
                                 stride1=BUS, stride2=CFG.ext_mem_bytes - BUS), ErrorCode.DMA_OUT_OF_RANGE),
    "dma_misaligned_stride": (make("DMA_STORE", sram=0, sram_addr=0, ext_addr=OUT2, len0=1, len1=2, len2=1,
                                   stride1=BUS + 1), ErrorCode.DMA_MISALIGNED),
    "dma_misaligned_addr": (make("DMA_LOAD", sram=1, sram_addr=0, ext_addr=DATA + 2, len0=0, len1=0, len2=0),
                            ErrorCode.DMA_MISALIGNED),
    "dma_sram_overflow": (make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=CFG.psram_rows * 4 - 2,
                               ext_addr=DATA, len0=1, len1=1, len2=1, pad_a0=2), ErrorCode.SRAM_OVERFLOW),
    "dma_store_from_wsram": (make("DMA_STORE", sram=int(Sram.WSRAM), sram_addr=0, ext_addr=OUT2, len0=1,
                                  len1=1, len2=1), ErrorCode.ILLEGAL_INSTRUCTION),
    "dma_load_sram3": (make("DMA_LOAD", sram=3, sram_addr=0, ext_addr=DATA, len0=1, len1=1, len2=1),
                       ErrorCode.ILLEGAL_INSTRUCTION),
    # element mode (elem != 0): checked like word mode, in element units
    "dma_elem_illegal": (make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=DATA, len0=1, len1=1, len2=1, elem=3),
                         ErrorCode.ILLEGAL_INSTRUCTION),
    "dma_word_stride0": (make("DMA_STORE", sram=0, sram_addr=0, ext_addr=OUT2, len0=1, len1=1, len2=1,
                              stride0=BUS), ErrorCode.ILLEGAL_INSTRUCTION),
    "dma_elem_misaligned_addr": (make("DMA_STORE", sram=0, sram_addr=0, ext_addr=OUT2 + 1, len0=1, len1=1,
                                      len2=1, elem=2), ErrorCode.DMA_MISALIGNED),
    "dma_elem_misaligned_stride0": (make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=DATA, len0=2, len1=1, len2=1,
                                         elem=4, stride0=-6), ErrorCode.DMA_MISALIGNED),
    "dma_elem_below_zero": (make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=2, len0=3, len1=1, len2=1,
                                 elem=2, stride0=-2), ErrorCode.DMA_OUT_OF_RANGE),
    "dma_elem_past_end": (make("DMA_STORE", sram=0, sram_addr=0, ext_addr=CFG.ext_mem_bytes - 8, len0=1,
                               len1=2, len2=1, elem=8, stride1=8), ErrorCode.DMA_OUT_OF_RANGE),
    "dma_elem_sram_overflow": (make("DMA_LOAD", sram=0, sram_addr=CFG.asram_rows - 1, ext_addr=DATA, len0=3,
                                    len1=1, len2=1, elem=1, pad_a0=2), ErrorCode.SRAM_OVERFLOW),
    # packed lines: 2 planes of 3 lines x 5 bytes = 4 words each (8 words) from 7 rows before the end
    "dma_packed_sram_overflow": (make("DMA_LOAD", sram=0, sram_addr=CFG.asram_rows - 7, ext_addr=DATA, len0=5,
                                      len1=3, len2=2, stride1=16, stride2=64, elem=1, pack=1),
                                 ErrorCode.SRAM_OVERFLOW),
    "matmul_weight_tile": (make("MATMUL", w_addr=CFG.wsram_rows - 2, n0=0, n1=0), ErrorCode.SRAM_OVERFLOW),
    "matmul_acc": (make("MATMUL", n0=100, n1=2, acc_addr=CFG.acc_rows - 199), ErrorCode.SRAM_OVERFLOW),
    "matmul_asram": (make("MATMUL", a_addr=5, a_stride0=0, a_stride1=102, n0=2, n1=11),
                     ErrorCode.SRAM_OVERFLOW),
    "act_params": (make("ACT", param_addr=CFG.psram_rows - 2, count=0), ErrorCode.SRAM_OVERFLOW),
    "act_dst": (make("ACT", dst_addr=CFG.asram_rows - 1, count=2), ErrorCode.SRAM_OVERFLOW),
    # more than MAX_VECTOR_STEPS steps in place (stride 0): refused, never run for hours
    "valu_too_long": (make("VALU", op=24, dtype=0, n0=65535, n1=65535, a_mem=0, d_mem=0),
                      ErrorCode.ILLEGAL_INSTRUCTION),
    "vpool_too_long": (make("VPOOL", mode=0, dtype=0, n0=4097, n1=16, k0=16, k1=16, a_mem=0, d_mem=0),
                       ErrorCode.ILLEGAL_INSTRUCTION),
    "table_too_long": (make("TABLE", mode=1, n0=65535, n1=257, a_mem=0, d_mem=0),
                       ErrorCode.ILLEGAL_INSTRUCTION),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_stops(small_rtl, name):
    bad, code = CASES[name]
    instrs = around(bad)
    checked = run_checked(small_rtl, CFG, instrs, memory(), stop_at=3, expect=code)
    mem = checked.rtl.memory
    assert mem[OUT1:OUT1 + 64] == bytes(range(64)), "work before the error must complete"
    assert mem[OUT2:OUT2 + 64] == bytes(64), "nothing after the error may run"


@pytest.mark.parametrize("word", ["opcode", "reserved"])
def test_illegal_instruction(small_rtl, word):
    """An undecodable word (unknown opcode; HALT with a reserved bit set) stops the NPU with
    ILLEGAL_INSTRUCTION after the running MATMUL drains, raising the interrupt."""
    instrs = around(make("SYNC"), before_wait=0)

    def patch(mem):
        at = 3 * INSTR_BYTES
        if word == "opcode":
            mem[at:at + INSTR_BYTES] = bytes([0x3F]) + bytes(INSTR_BYTES - 1)
        else:
            mem[at:at + INSTR_BYTES] = bytes([1]) + bytes(INSTR_BYTES - 2) + bytes([0x80])

    checked = run_checked(small_rtl, CFG, instrs, memory(), stop_at=3,
                          expect=ErrorCode.ILLEGAL_INSTRUCTION, patch=patch)
    assert checked.rtl.memory[OUT1:OUT1 + 64] == bytes(range(64))
    assert checked.rtl.memory[OUT2:OUT2 + 64] == bytes(64)
    assert checked.rtl.unit_busy_cycles["MXU"] > 200, "the stop waits for the MATMUL"


def test_pc_overflow(small_rtl):
    instrs = [make("DMA_STORE", sram=0, sram_addr=0, ext_addr=OUT1, len0=4, len1=1, len2=1), make("SYNC")]
    run_checked(small_rtl, CFG, instrs, memory(), stop_at=2, expect=ErrorCode.PC_OVERFLOW)
    # an empty program runs off its end at once
    run_checked(small_rtl, CFG, [], memory(), stop_at=0, expect=ErrorCode.PC_OVERFLOW)


@pytest.mark.parametrize("case", ["misaligned", "out_of_range"])
def test_boot_errors(small_rtl, case):
    """Start checks stop the NPU before anything is read: STOP_PC 0, zero cycles.  (A
    program longer than the instruction memory is fine: cocotb_tests/test_rtl_fetch.py.)"""
    if case == "misaligned":
        program = Program(CFG, [make("HALT")], program_addr=INSTR_BYTES + 2)
        expect = ErrorCode.DMA_MISALIGNED
    else:
        program = Program(CFG, [make("HALT")] * 2, program_addr=CFG.ext_mem_bytes - INSTR_BYTES)
        expect = ErrorCode.DMA_OUT_OF_RANGE
    mem = bytes(range(256)) * 4
    result = run_program(program, mem, build_dir=small_rtl)
    assert (result.status, result.error_code, result.stop_pc, result.cycles) == ("ERROR", expect, 0, 0)
    assert result.irq
    assert result.memory == mem
