"""Instruction fetch on the RTL (hw/sequencer.py), in lockstep with the ISA simulator and its
cycle model: programs several times longer than the instruction buffer, with LOOP bodies
and branch loops that straddle its wrap-around, a LOOP body as long as allowed (one row less than the buffer),
a forward branch further than the buffer, and the fetch starved while the DMA owns the bus.
Compared: every external-memory byte, every scratchpad, CYCLES, the busy counters,
ERROR_CODE and STOP_PC."""
from __future__ import annotations

import numpy as np

from isa import SMALL_CONFIG, make
from isa.instructions import FETCH_ARRIVAL, INSTR_BYTES, BranchTest, ErrorCode, ValuOp, VecType
from isa.program import Program
from isa.encoding import encode_program
from sim.isa.sim import IsaSim

from cocotb_tests.loop_programs import SPACES, LoopProgramGenerator, Region, setup_program
from cocotb_tests.rtl_harness import lockstep

CFG = SMALL_CONFIG
COUNTER = Region.BYTES           # after the random programs' data and store areas
PROGRAM_AT = COUNTER + 0x100
COUNTER_ROW = CFG.asram_rows - 2


def _image(mem: bytes, instrs) -> bytes:
    return bytes(mem[:PROGRAM_AT]) + encode_program(instrs)


def _without_hazards(instrs, mem: bytes, rounds: int = 50):
    """Add wait bits until the ISA simulator's hazard checker finds no unordered conflict
    (cocotb_tests/loop_programs.without_hazards, for a program at PROGRAM_AT)."""
    instrs = list(instrs)
    for _ in range(rounds):
        program = Program(CFG, instrs, program_addr=PROGRAM_AT)
        result = IsaSim(CFG, check_hazards=True).run(program, _image(mem, instrs))
        if not result.hazards:
            return instrs
        for h in result.hazards:
            later = instrs[h.later_pc]
            unit = {"DMA_LOAD": 0, "DMA_STORE": 0, "MATMUL": 1, "ACT": 2, "VALU": 2}[instrs[h.earlier_pc].name]
            values = {k: v for k, v in later.values.items() if k != "opcode"}
            values["wait"] |= 1 << unit
            instrs[h.later_pc] = make(later.name, **values)
    raise AssertionError("could not remove the hazards")


def _straight(gen, n: int, kinds=None) -> list:
    """``n`` random instructions outside any loop (of ``kinds`` only, if given)."""
    out, zero = [], {s: (0, 0) for s in SPACES}
    while len(out) < n:
        instr = gen.instruction(zero)
        if instr is not None and (kinds is None or instr.name in kinds):
            out.append(instr)
    return out


def long_program(rng):
    """setup; random nested loops; a LOOP whose body is the buffer less one row; a forward branch
    over more than the buffer; a branch loop (do-while, 3 iterations) over a body that
    straddles the buffer's wrap-around; random nested loops; HALT."""
    mem, setup = setup_program(rng, CFG)
    mem = bytearray(mem) + bytearray(PROGRAM_AT - len(mem))
    assert len(mem) == PROGRAM_AT
    gen = LoopProgramGenerator(rng, CFG, max_depth=3)
    instrs = list(setup)
    first, _ = gen.block({s: (0, 0) for s in SPACES}, 0, 120)
    instrs += first
    instrs.append(make("LOOP", count=2, body=CFG.imem_rows - 1))
    instrs += _straight(gen, CFG.imem_rows - 1)
    skip = CFG.imem_rows + 40
    instrs.append(make("BRANCH", target=len(instrs) + 1 + skip, test=int(BranchTest.ALWAYS)))
    instrs += [make("DMA_STORE", sram=0, sram_addr=0, ext_addr=Region.OUT[0], len0=1, len1=1, len2=1)] * skip
    # do-while: counter -= 1 ... while counter != 0 (the body only writes ACC)
    mem[COUNTER:COUNTER + 2 * CFG.bus_bytes] = bytes([3] + [0] * (CFG.bus_bytes - 1) + [1] * CFG.bus_bytes)
    instrs.append(make("DMA_LOAD", sram=0, sram_addr=COUNTER_ROW, ext_addr=COUNTER, len0=2, len1=1, len2=1,
                       wait=7))
    top = len(instrs)
    instrs.append(make("VALU", wait=7, op=int(ValuOp.SUB), dtype=int(VecType.INT8), n0=1, n1=1, a_mem=0,
                       a_addr=COUNTER_ROW, b_mem=0, b_addr=COUNTER_ROW + 1, d_mem=0, d_addr=COUNTER_ROW))
    instrs += _straight(gen, CFG.imem_rows // 2 + 30, kinds=("MATMUL", "SYNC"))
    instrs.append(make("BRANCH", wait=7, target=top, test=int(BranchTest.NONZERO), mem=0,
                       row=COUNTER_ROW, limit=10))
    last, _ = gen.block({s: (0, 0) for s in SPACES}, 0, 120)
    instrs += last + [make("HALT")]
    return _without_hazards(instrs, bytes(mem)), bytes(mem)


def test_long_program_small(small_rtl):
    instrs, mem = long_program(np.random.default_rng(1234))
    assert len(instrs) > 3 * CFG.imem_rows
    rtl, ref = lockstep(small_rtl, CFG, instrs, mem, program_addr=PROGRAM_AT, hazard_free=False)
    # the LOOP ran its buffer-long body twice, the branch loop its body three times
    assert ref.instructions_executed > len(instrs) - (CFG.imem_rows + 40) + CFG.imem_rows + 2 * CFG.imem_rows // 2


def test_fetch_waits_while_the_dma_owns_the_bus(small_rtl):
    """A 600-word DMA_LOAD starves the fetch: the instructions after it arrive once it is
    idle, one every W cycles.  Hand-counted from sim/npu_timing.py: instruction i arrives
    at 8i + 14 while the DMA is idle (its last word's request, + L, + FETCH_ARRIVAL); the DMA
    issues at 22 (in IR once instruction 1 could be read), busy 23 .. 22 + S + L;
    instruction 2 got 7 of its words before, its last at dma_end + 1; each later one 8
    cycles after; the last SYNC issues when the HALT has arrived, the HALT one cycle later."""
    W, L, S, n = INSTR_BYTES // CFG.bus_bytes, CFG.mem_latency, 600, 20
    instrs = [make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=0x1000, len0=S, len1=1, len2=1)]
    instrs += [make("SYNC")] * (n - 2) + [make("HALT")]
    rtl, ref = lockstep(small_rtl, CFG, instrs, bytes(0x8000), program_addr=0x4000)
    dma_end = 22 + S + L
    arrives_2 = dma_end + 1 + L + FETCH_ARRIVAL
    last = arrives_2 + W * (n - 3)
    assert rtl.cycles == last + 3
    assert rtl.unit_busy_cycles["DMA"] == S + L


def test_loop_body_longer_than_the_buffer_is_illegal(small_rtl):
    body = [make("SYNC")] * CFG.imem_rows
    instrs = [make("LOOP", count=2, body=len(body))] + body + [make("HALT")]
    rtl, _ = lockstep(small_rtl, CFG, instrs, bytes(0x4000), program_addr=0x1000,
                      expect=ErrorCode.ILLEGAL_INSTRUCTION, hazard_free=False)
    assert rtl.stop_pc == 0
