"""Sequencer: boot loader, instruction fetch, checking and in-order issue.

States (cycle 0 is the cycle after the CTRL.START write):

* IDLE -> (START) boot checks (hw/csr.py); on an error stop at once.
* BOOT: request the program's ``M = PROG_LEN * words_per_instr`` bus words one per cycle
  from cycle 0; responses arrive ``mem_latency`` later and are packed into IMEM rows.  RUN
  starts the cycle after the last response (cycle ``M + mem_latency``), or at cycle 1 if
  ``M == 0``.
* RUN: a two-stage front end.  The IMEM read port fetches instruction ``pc_f`` (data the
  next cycle); an instruction moves from the read port into the issue register (IR), being
  checked (hw/checker.py) on the way, whenever IR is empty or issuing.  So IR holds
  instruction 0 two cycles after RUN starts, and instruction k+1 the cycle after
  instruction k issues: one instruction per cycle at best.
* An instruction in IR issues when its unit is ``ready`` and every unit in its ``wait`` mask
  is idle (not ``busy``); SYNC and LOOP need only the wait mask.  HALT, and any instruction
  with a non-zero error code, stop the NPU in the first cycle in which every unit is idle
  (work already issued completes; nothing after it issues).
* Loops (hw/loop.py): the fetch address comes from the loop stack, which follows LOOPs as
  they leave the read port, so loop-back costs no cycle and a LOOP costs one issue slot
  like SYNC.  The checker sees each instruction with the offsets of its loop iteration,
  and IR holds its effective addresses: units never see a loop.
* BRANCH: in the cycle it could issue like SYNC it reads its condition row (own read ports
  on ASRAM and ACC, ``cond_asram``/``cond_acc``); the next cycle it decides and issues.  A
  taken branch drops the instruction in the read port and fetches the target (the loop
  stack's ``jump``), so the target reaches IR two cycles after the issue.  A taken backward
  branch that would pass its ``limit`` (``back_taken``, reset by CTRL.START) stops the NPU
  with BRANCH_LIMIT instead, once every unit is idle.
* ``abort`` (the watchdog, hw/csr.py): while high nothing issues, and the NPU stops with
  WATCHDOG in the first cycle in which IR holds an instruction and every unit is idle (an
  error code of the instruction in IR, or BRANCH_LIMIT, takes precedence).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import (BRANCH_LIMIT_BITS, BY_NAME, INSTR_BITS, INSTR_BYTES, OPCODE_BITS, BranchTest,
                              BranchType, ErrorCode, Unit, VecDst)
from hw.checker import CODE_BITS, PC_BITS, InstrChecker
from hw.decode import fields_layout, instr_layout, opcode
from hw.interfaces import ExtBusSignature, UnitCtlSignature
from hw.loop import LoopStack
from hw.mxu import ACC_BITS, mxu_cmd_layout

# Units with a bit in the wait mask, in bit order.
WAIT_UNITS = tuple(u for u in sorted(Unit) if u is not Unit.SEQ)


def dma_cmd_layout():
    """DMA command: DMA_LOAD's fields (a superset of DMA_STORE's) plus a store flag."""
    return fields_layout("DMA_LOAD", extra={"store": 1})


def vpu_cmd_layout():
    """The vector unit decodes its instructions itself (ACT, VRESCALE, VALU, VPOOL): its
    command is the whole instruction word (with effective addresses)."""
    return data.StructLayout({"word": unsigned(INSTR_BITS)})


class Sequencer(wiring.Component):
    def __init__(self, config: NpuConfig):
        self.config = config
        if INSTR_BITS % (8 * config.bus_bytes):
            raise ValueError("an instruction must be a whole number of bus words")
        self.words_per_instr = INSTR_BYTES // config.bus_bytes
        imem_aw = ceil_log2(config.imem_rows)
        super().__init__({
            "start": In(1),
            "prog_addr": In(32),
            "prog_len": In(32),
            "running": Out(1),
            "abort": In(1),
            "stop": Out(1),
            "stop_code": Out(CODE_BITS),
            "stop_pc": Out(PC_BITS),
            "booting": Out(1),
            "bus": Out(ExtBusSignature(config)),
            "imem_w": In(WritePort.Signature(addr_width=imem_aw, shape=INSTR_BITS)),
            "imem_r": In(ReadPort.Signature(addr_width=imem_aw, shape=INSTR_BITS)),
            "cond_asram": In(ReadPort.Signature(addr_width=ceil_log2(config.asram_rows),
                                                shape=8 * config.bus_bytes)),
            "cond_acc": In(ReadPort.Signature(addr_width=ceil_log2(config.acc_rows),
                                              shape=ACC_BITS * config.array_cols)),
            "dma": Out(UnitCtlSignature(dma_cmd_layout())),
            "mxu": Out(UnitCtlSignature(mxu_cmd_layout())),
            "vpu": Out(UnitCtlSignature(vpu_cmd_layout())),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus_bits = 8 * cfg.bus_bytes
        wpi = self.words_per_instr
        m.submodules.checker = checker = InstrChecker(cfg)

        prog_len = Signal(PC_BITS)
        # -- boot ------------------------------------------------------------------------
        boot_words = Signal(range(cfg.imem_rows * wpi + 1))
        req_count = Signal.like(boot_words)
        resp_count = Signal.like(boot_words)
        req_addr = Signal(cfg.ext_addr_bits)
        word_in_instr = Signal(range(max(wpi, 2)))
        imem_row = Signal(range(cfg.imem_rows + 1))
        pack = Signal(INSTR_BITS)
        # Instructions arrive lowest word first: shift each word in at the top.
        packed = Cat(pack[bus_bits:], self.bus.resp_rdata)

        boot_end = self.prog_addr + INSTR_BYTES * self.prog_len[:ceil_log2(cfg.imem_rows + 1) + 1]
        boot_code = Signal(CODE_BITS)
        with m.If(self.prog_len > cfg.imem_rows):
            m.d.comb += boot_code.eq(ErrorCode.PROGRAM_TOO_LARGE)
        with m.Elif(self.prog_addr[:cfg.bus_bytes.bit_length() - 1] != 0):
            m.d.comb += boot_code.eq(ErrorCode.DMA_MISALIGNED)
        with m.Elif(boot_end > cfg.ext_mem_bytes):
            m.d.comb += boot_code.eq(ErrorCode.DMA_OUT_OF_RANGE)

        # -- run -------------------------------------------------------------------------
        pc_bits = ceil_log2(cfg.imem_rows + 3) + 1
        m.submodules.loops = loops = LoopStack(cfg, pc_bits)
        pc_f = loops.addr             # next instruction to fetch
        f_valid = Signal()            # the read port holds instruction f_pc
        f_pc = Signal(pc_bits)
        ir_valid = Signal()
        ir_word = Signal(INSTR_BITS)
        ir_err = Signal(CODE_BITS)
        ir_pc = Signal(pc_bits)

        busy = Cat(getattr(self, u.name.lower()).busy for u in WAIT_UNITS)
        wait = instr_layout("HALT")(ir_word).wait     # the header is common to all
        wait_ok = (wait & busy) == 0
        all_idle = busy == 0
        ir_opcode = ir_word[:OPCODE_BITS]

        issue = Signal()
        load_ir = Signal()
        fetch = Signal()

        # BRANCH: the condition row is read while the BRANCH is in IR (data the next cycle).
        br = instr_layout("BRANCH")(ir_word)
        is_branch = ir_opcode == opcode("BRANCH")
        br_armed = Signal()           # the condition was read last cycle: decide now
        back_taken = Signal(BRANCH_LIMIT_BITS)
        m.d.comb += [
            self.cond_asram.addr.eq(br.row), self.cond_acc.addr.eq(br.row),
            self.cond_asram.en.eq(ir_valid & is_branch), self.cond_acc.en.eq(ir_valid & is_branch),
        ]
        from_acc = br.mem == VecDst.ACC
        value8 = Mux(from_acc, self.cond_acc.data[:8], self.cond_asram.data[:8])
        value32 = Mux(from_acc, self.cond_acc.data[:32], self.cond_asram.data[:32])
        nonzero = Mux(br.dtype == BranchType.INT32, value32 != 0, value8 != 0)
        br_taken = Mux(br.test == BranchTest.ALWAYS, 1, Mux(br.test == BranchTest.ZERO, ~nonzero, nonzero))
        backward = br.target <= ir_pc
        limit_hit = Signal()
        jump = Signal()
        m.d.comb += [
            limit_hit.eq(br_armed & br_taken & backward & (back_taken >= br.limit)),
            jump.eq(issue & is_branch & br_taken),
            loops.jump.eq(jump),
            loops.jump_pc.eq(br.target),
        ]
        f_view = instr_layout("LOOP")(self.imem_r.data)
        m.d.comb += [
            checker.word.eq(self.imem_r.data),
            checker.pc.eq(f_pc),
            checker.prog_len.eq(prog_len),
            checker.offsets.eq(loops.offsets),
            checker.loop_full.eq(loops.full),
            checker.loop_end.eq(Mux(loops.active, loops.end, prog_len)),
            checker.loop_active.eq(loops.active),
            self.imem_r.addr.eq(pc_f),
            self.imem_r.en.eq(fetch),
            loops.advance.eq(fetch),
            loops.enter.eq(load_ir & checker.loop_ok),
            loops.loop_pc.eq(f_pc),
        ]
        m.d.comb += [loops.loop[f.name].eq(f_view[f.name]) for f in BY_NAME["LOOP"].fields]

        # Unit commands are views of IR; a unit latches its command on `start`.
        load = instr_layout("DMA_LOAD")(ir_word)
        store = instr_layout("DMA_STORE")(ir_word)
        is_store = ir_opcode == opcode("DMA_STORE")
        m.d.comb += self.dma.cmd.store.eq(is_store)
        for f in dma_cmd_layout().members:
            if f == "store":
                continue
            if f in instr_layout("DMA_STORE").members:
                m.d.comb += self.dma.cmd[f].eq(Mux(is_store, store[f], load[f]))
            else:
                m.d.comb += self.dma.cmd[f].eq(load[f])
        view = instr_layout("MATMUL")(ir_word)
        for f in self.mxu.cmd.shape().members:
            m.d.comb += self.mxu.cmd[f].eq(view[f])
        m.d.comb += self.vpu.cmd.word.eq(ir_word)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    with m.If(boot_code != ErrorCode.NONE):
                        m.d.comb += [self.stop.eq(1), self.stop_code.eq(boot_code), self.stop_pc.eq(0)]
                    with m.Else():
                        m.d.sync += [
                            prog_len.eq(self.prog_len),
                            boot_words.eq(self.prog_len * wpi),
                            req_count.eq(0), resp_count.eq(0), req_addr.eq(self.prog_addr),
                            word_in_instr.eq(0), imem_row.eq(0), back_taken.eq(0), br_armed.eq(0),
                        ]
                        m.next = "BOOT"

            with m.State("BOOT"):
                m.d.comb += [
                    self.running.eq(1),
                    self.booting.eq(1),
                    self.bus.req_valid.eq(req_count != boot_words),
                    self.bus.req_addr.eq(req_addr),
                    self.bus.req_we.eq(0),
                ]
                with m.If(self.bus.req_valid & self.bus.req_ready):
                    m.d.sync += [req_count.eq(req_count + 1), req_addr.eq(req_addr + cfg.bus_bytes)]
                with m.If(self.bus.resp_valid):
                    m.d.sync += [pack.eq(packed), resp_count.eq(resp_count + 1)]
                    with m.If(word_in_instr == wpi - 1):
                        m.d.sync += [word_in_instr.eq(0), imem_row.eq(imem_row + 1)]
                        m.d.comb += [self.imem_w.en.eq(1), self.imem_w.addr.eq(imem_row),
                                     self.imem_w.data.eq(packed)]
                    with m.Else():
                        m.d.sync += word_in_instr.eq(word_in_instr + 1)
                last_resp = self.bus.resp_valid & (resp_count == boot_words - 1)
                with m.If((boot_words == 0) | last_resp):
                    m.d.sync += [f_valid.eq(0), ir_valid.eq(0)]
                    m.d.comb += loops.restart.eq(1)
                    m.next = "RUN"

            with m.State("RUN"):
                m.d.comb += self.running.eq(1)
                m.d.comb += [
                    load_ir.eq(f_valid & (~ir_valid | issue) & ~jump),
                    fetch.eq(~f_valid | load_ir | jump),
                ]
                with m.If(fetch):
                    m.d.sync += [f_valid.eq(1), f_pc.eq(pc_f)]
                with m.If(load_ir):
                    m.d.sync += [ir_valid.eq(1), ir_word.eq(checker.word_eff), ir_err.eq(checker.code),
                                 ir_pc.eq(f_pc)]
                with m.Elif(issue):
                    m.d.sync += ir_valid.eq(0)

                ok = ir_valid & (ir_err == ErrorCode.NONE) & ~self.abort
                with m.Switch(ir_opcode):
                    with m.Case(opcode("SYNC"), opcode("LOOP")):
                        m.d.comb += issue.eq(ok & wait_ok)
                    with m.Case(opcode("BRANCH")):
                        m.d.comb += issue.eq(br_armed & ~limit_hit & ~self.abort)
                        with m.If(ok & wait_ok & ~br_armed):
                            m.d.sync += br_armed.eq(1)
                        with m.If(issue):
                            m.d.sync += br_armed.eq(0)
                        with m.If(jump & backward):
                            m.d.sync += back_taken.eq(back_taken + 1)
                    vector = tuple((d.name, self.vpu) for d in BY_NAME.values() if d.unit is Unit.VPU)
                    for name, port in (("DMA_LOAD", self.dma), ("DMA_STORE", self.dma),
                                       ("MATMUL", self.mxu)) + vector:
                        with m.Case(opcode(name)):
                            m.d.comb += [issue.eq(ok & wait_ok & port.ready), port.start.eq(issue)]

                stopping = (ir_valid & ((ir_err != ErrorCode.NONE) | (ir_opcode == opcode("HALT")) | self.abort)) \
                    | limit_hit
                code = Mux(limit_hit, ErrorCode.BRANCH_LIMIT, Mux(self.abort, ErrorCode.WATCHDOG, ErrorCode.NONE))
                with m.If(stopping & all_idle):
                    m.d.comb += [self.stop.eq(1), self.stop_pc.eq(ir_pc),
                                 self.stop_code.eq(Mux(ir_err != ErrorCode.NONE, ir_err, code))]
                    m.d.sync += br_armed.eq(0)
                    m.next = "IDLE"
        return m
