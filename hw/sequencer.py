"""Sequencer: instruction fetch from external memory, checking and in-order issue.

States (cycle 0 is the cycle after the CTRL.START write):

* IDLE -> (START) start checks (hw/csr.py); on an error stop at once, else RUN at cycle 0.
  There is no boot: the program stays in external memory and is fetched while it runs.
* Instruction fetch.  IMEM is a circular buffer: instruction ``i`` of the program lives in
  row ``i mod imem_rows`` (imem_rows a power of two).  The fetch engine requests the
  program's bus words in order, one per cycle, in every cycle in which the DMA is not busy
  and the instruction's row is free: ``i < keep + imem_rows``, ``keep`` being the first
  instruction the front end may still read (the first of the outermost active LOOP body,
  else one past the last instruction read).  Responses come back in order ``mem_latency``
  cycles later (a shift register of "mine" bits tells them from the DMA's, hw/top.py) and
  are packed into the instruction's row; ``arrived`` counts the instructions written.
* RUN: a two-stage front end.  The IMEM read port reads instruction ``pc_f`` (data the next
  cycle) once it has arrived (or lies past PROG_LEN: the checker then stops with
  PC_OVERFLOW); an instruction moves from the read port into the issue register (IR),
  checked (hw/checker.py) on the way, when IR is empty or issuing *and* the next
  instruction can be read in the same cycle (the loop stack advances on reads, and a LOOP
  must leave the read port together with the read of its first body instruction).  With
  the buffer ahead of the front end, IR holds instruction k+1 the cycle after instruction k
  issues: one instruction per cycle at best.  A LOOP with count 0 waits one cycle more in
  the read port: its legality and end are registered there, and the cycle after, the loop
  stack skips the body from those registers (so the fetch address and the fetch decision
  never depend on IMEM's read data through the checker's LOOP rules in one cycle).

* An instruction in IR issues when its unit is ``ready``, every unit in its ``wait`` mask
  is idle (not ``busy``; for an ACT with ``mxu_lag`` k > 0 the MXU counts as idle once at
  most k MATMULs are unfinished, the MXU's ``pending``), and, if it writes ASRAM or ACC, the other writer of that memory
  is not busy writing it (isa/ports.py: each memory has one write port; ``writing`` holds
  what each unit's last instruction writes); SYNC and LOOP need only the wait mask.  HALT, and any instruction
  with a non-zero error code, stop the NPU in the first cycle in which every unit is idle
  (work already issued completes; nothing after it issues).
* Loops (hw/loop.py): the fetch address comes from the loop stack, which follows LOOPs as
  they leave the read port, so loop-back costs no cycle and a LOOP costs one issue slot
  like SYNC.  The checker sees each instruction with the offsets of its loop iteration,
  and IR holds its effective addresses: units never see a loop.
* BRANCH: in the cycle it could issue like SYNC, with the vector unit idle too, it reads its
  condition row (``cond_asram``/``cond_acc``: hw/top.py lends it the vector unit's operand-a
  ports, which is why it waits for that unit); the next cycle registers the condition, and
  the cycle after that it decides and issues (the condition comes from a block RAM's
  output, the decision drives the fetch address and IR's enable: not both in a cycle).  A
  taken branch drops the instruction in the read port, restarts the fetch engine and the
  loop stack at the target (in-flight responses are dropped: ``live``), and the target is
  read once it has arrived.  A taken backward branch that would pass its ``limit``
  (``back_taken``, reset by CTRL.START) stops the NPU with BRANCH_LIMIT instead, once every
  unit is idle.
* ``abort`` (the watchdog, hw/csr.py): while high nothing issues, and the NPU stops with
  WATCHDOG in the first cycle in which IR holds an instruction and every unit is idle (an
  error code of the instruction in IR, or BRANCH_LIMIT, takes precedence).

Why this design (rules: sim/npu_timing.py, "Fetch").  Ethos-U reads its command stream
from memory through its own AXI port; VTA's fetch module DMAs instructions into
per-module queues ahead of execution.  Both pay for a second master or a queue per unit;
here the fetch engine takes only the bus cycles the DMA leaves idle, so the DMA's timing
(and with it every unit's) is exactly what it was, and a compute-bound layer, where the
DMA is idle most of the time, fetches for free; the whole program needs no boot, so
programs of any length run, and the first instruction is in IR 2W + L + 3 cycles after
START (W bus words per instruction, L the memory latency) instead of after the whole image.  Priority to the DMA cannot starve the program: the DMA is idle at
least one cycle between two commands and whenever the front end waits on an instruction
(its next command is not issued yet).  LOOP bodies stay resident while they run (``keep``
pins their first instruction), so loop-back costs nothing and a body is fetched once; a
body must leave one row for the instruction after it (``body < imem_rows``, else the last
iteration could not fetch its successor: ILLEGAL_INSTRUCTION).  A taken BRANCH flushes
the buffer and refetches from its target (branches are rare: WHILE_LOOP iterations;
keeping targets resident would need the buffer to track arbitrary windows).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.ports import BRANCH_PORT_UNIT, WRITERS, other_writer, writes
from isa.instructions import (BRANCH_DECIDE, BRANCH_LIMIT_BITS, BY_NAME, FETCH_ARRIVAL, INSTR_BITS, INSTR_BYTES,
                              OPCODE_BITS, ZERO_LOOP_WAIT, BranchTest, BranchType, ErrorCode, Unit, VecDst)
from hw.checker import CODE_BITS, PC_BITS, InstrChecker
from hw.clock_gate import load_registers
from hw.decode import fields_layout, instr_layout, opcode
from hw.interfaces import ExtBusSignature, UnitCtlSignature
from hw.loop import LoopStack
from hw.precheck import PreCheck, index_bits, pre_bits, pre_layout
from hw.mxu import ACC_BITS, PENDING_BITS, mxu_cmd_layout

# The front end below is built for these timing rules (isa/instructions.py): a zero-count
# LOOP's one cycle in the read port while its skip is registered, and a BRANCH's condition
# read, registered, decided; and a fetched instruction's three cycles from its last bus word
# to the IMEM write (precheck operands, products, then sums, each registered).
assert ZERO_LOOP_WAIT == 1 and BRANCH_DECIDE == 2 and FETCH_ARRIVAL == 3, "hw/sequencer.py implements other timing"

# Units with a bit in the wait mask, in bit order.
WAIT_UNITS = tuple(u for u in sorted(Unit) if u is not Unit.SEQ)
# the instructions of the vector issue port (VPU and TABLE, hw/top.py)
VECTOR_INSTRS = tuple(d.name for d in BY_NAME.values() if d.unit is Unit.VPU)


def dma_cmd_layout():
    """DMA command: DMA_LOAD's fields (a superset of DMA_STORE's) plus a store flag."""
    return fields_layout("DMA_LOAD", extra={"store": 1})


def vpu_cmd_layout():
    """The vector unit decodes its instructions itself (ACT, VRESCALE, VALU, VPOOL): its
    command is the whole instruction word (with effective addresses)."""
    return data.StructLayout({"word": unsigned(INSTR_BITS)})


class Sequencer(wiring.Component):
    """The sequencer for ``config``; ``gate_fetch``: the registers that take a fetched
    instruction (its word, index and precheck operands and products) are load domains, clocked only
    when an instruction's last bus word arrives (simulation builds, hw/clock_gate.py; else
    registers with an enable)."""

    def __init__(self, config: NpuConfig, *, gate_fetch: bool = False):
        self.config = config
        self.gate_fetch = gate_fetch
        if INSTR_BITS % (8 * config.bus_bytes):
            raise ValueError("an instruction must be a whole number of bus words")
        if config.imem_rows & (config.imem_rows - 1):
            raise ValueError("imem_rows must be a power of two (instruction i is in row i mod imem_rows)")
        self.words_per_instr = INSTR_BYTES // config.bus_bytes
        imem_aw = ceil_log2(config.imem_rows)
        row_bits = INSTR_BITS + pre_bits(config)      # an IMEM row: the word and its precheck
        super().__init__({
            "start": In(1),
            "prog_addr": In(32),
            "prog_len": In(32),
            "running": Out(1),
            "abort": In(1),
            "stop": Out(1),
            "stop_code": Out(CODE_BITS),
            "stop_pc": Out(PC_BITS),
            "bus": Out(ExtBusSignature(config)),
            "imem_w": In(WritePort.Signature(addr_width=imem_aw, shape=row_bits)),
            "imem_r": In(ReadPort.Signature(addr_width=imem_aw, shape=row_bits)),
            "cond_asram": In(ReadPort.Signature(addr_width=ceil_log2(config.asram_rows),
                                                shape=8 * config.bus_bytes)),
            "cond_acc": In(ReadPort.Signature(addr_width=ceil_log2(config.acc_rows),
                                              shape=ACC_BITS * config.array_cols)),
            "dma": Out(UnitCtlSignature(dma_cmd_layout())),
            "mxu": Out(UnitCtlSignature(mxu_cmd_layout())),
            "mxu_pending": In(PENDING_BITS),      # unfinished MATMULs (ACT's mxu_lag)
            "vpu": Out(UnitCtlSignature(vpu_cmd_layout())),
            # a vector instruction (VPU or TABLE) enters IR this cycle, with this word: the
            # vector units keep their own copy of IR in their clock domain (hw/top.py)
            "vpu_ir_load": Out(1),
            "vpu_ir_next": Out(INSTR_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus_bits = 8 * cfg.bus_bytes
        wpi = self.words_per_instr
        m.submodules.checker = checker = InstrChecker(cfg, precomputed=True)
        m.submodules.precheck = precheck = PreCheck(cfg, staged=True, gate=self.gate_fetch)

        imem_aw = ceil_log2(cfg.imem_rows)
        prog_len = Signal(PC_BITS)
        # -- start checks ----------------------------------------------------------------
        start_code = Signal(CODE_BITS)
        with m.If(self.prog_addr[:cfg.bus_bytes.bit_length() - 1] != 0):
            m.d.comb += start_code.eq(ErrorCode.DMA_MISALIGNED)
        with m.Elif(self.prog_addr + INSTR_BYTES * self.prog_len > cfg.ext_mem_bytes):
            m.d.comb += start_code.eq(ErrorCode.DMA_OUT_OF_RANGE)

        # -- run -------------------------------------------------------------------------
        # Instruction indices: the program is at most ext_mem_bytes long.
        pc_bits = index_bits(cfg)
        m.submodules.loops = loops = LoopStack(cfg, pc_bits)
        pc_f = loops.addr             # next instruction to read
        f_valid = Signal()            # the read port holds instruction f_pc
        f_pc = Signal(pc_bits)
        ir_valid = Signal()
        ir_word = Signal(INSTR_BITS)
        ir_err = Signal(CODE_BITS)
        ir_pc = Signal(pc_bits)
        running = Signal()

        # -- instruction fetch engine --------------------------------------------------------
        prog_base = Signal(cfg.ext_addr_bits)
        fp = Signal(pc_bits)          # next instruction to request
        req_word = Signal(range(max(wpi, 2)))
        req_addr = Signal(cfg.ext_addr_bits)
        arrived = Signal(pc_bits)     # instructions fp0 .. arrived-1 are in the buffer
        resp_word = Signal(range(max(wpi, 2)))
        pack = Signal(INSTR_BITS)
        live = Signal(cfg.mem_latency)     # a response of this stream arrives in k+1 cycles
        # Instructions arrive lowest word first: shift each word in at the top.
        packed = Cat(pack[bus_bits:], self.bus.resp_rdata)
        keep = Mux(loops.active, loops.outer_start, loops.next_pc)
        jump = Signal()
        request = Signal()
        # A request in the cycle of a taken BRANCH is wasted, not prevented: the restart (below,
        # later in the same cycle, so its assignments win) resets the stream and clears ``live``,
        # so the word is dropped when it arrives, and the DMA is idle then (it cannot start in
        # the BRANCH's issue cycle).  Gating it by ``jump`` made the bus request, and with it the
        # bus mux in hw/top.py, depend on the branch condition read from ACC or ASRAM: the
        # longest path of the NPU on the ULX3S (docs/fpga.md).
        m.d.comb += [
            request.eq(running & ~self.dma.busy & (fp < prog_len) & (fp < keep + cfg.imem_rows)),
            self.bus.req_valid.eq(request),
            self.bus.req_addr.eq(req_addr),
            self.bus.req_we.eq(0),
        ]
        fire = request & self.bus.req_ready
        m.d.sync += live.eq(Cat(fire, live[:-1]))
        with m.If(fire):
            m.d.sync += req_addr.eq(req_addr + cfg.bus_bytes)
            with m.If(req_word == wpi - 1):
                m.d.sync += [req_word.eq(0), fp.eq(fp + 1)]
            with m.Else():
                m.d.sync += req_word.eq(req_word + 1)
        # A complete instruction is counted as arrived at once and registered (``wr_*``) with
        # its precheck's multiplier operands (hw/precheck.py: chosen from the assembled word,
        # ``packed``, in the arrival cycle); the next cycle the products are registered and
        # the word with them (``wr3_*``); the cycle after, the precheck's sums and compares are
        # formed from those registers and registered with the word (``wr2_*``), and the cycle
        # after that both are written into the instruction's row.  The read port is
        # transparent for that write (hw/top.py), so reading the instruction in that cycle
        # sees it: ``readable`` compares with ``arrived`` two cycles late (``arrived_q``).  No
        # path thus runs from the bus word through sums into a multiplier, from a multiplier
        # into the sums, or from the product registers through a multiplier and the sums into
        # IMEM's write data (each in its turn the 4x4 NPU's critical path on the ECP5,
        # docs/fpga.md).  Each register is read only in the cycle after it loads, so each
        # loads only then.
        wr_valid = Signal()
        wr_word = Signal(INSTR_BITS, reset_less=True)
        wr_pc = Signal(pc_bits, reset_less=True)      # its index; its row is the index mod imem_rows
        word_in = Signal()
        last_word_in = Signal()
        m.d.comb += [word_in.eq(self.bus.resp_valid & live[-1]), last_word_in.eq(word_in & (resp_word == wpi - 1))]
        m.d.sync += wr_valid.eq(last_word_in)
        written = load_registers(m, "fetch", last_word_in, gate=self.gate_fetch)
        written += [wr_pc.eq(arrived), wr_word.eq(packed)]
        wr3_valid = Signal()
        wr3_word = Signal(INSTR_BITS, reset_less=True)
        wr3_pc = Signal(pc_bits, reset_less=True)
        m.d.sync += wr3_valid.eq(wr_valid)
        products = load_registers(m, "fetch_products", wr_valid, gate=self.gate_fetch)
        products += [wr3_pc.eq(wr_pc), wr3_word.eq(wr_word)]
        wr2_valid = Signal()
        wr2_row = Signal(imem_aw, reset_less=True)
        wr2_data = Signal(len(self.imem_w.data), reset_less=True)
        m.d.sync += wr2_valid.eq(wr3_valid)
        write2 = load_registers(m, "fetch_write", wr3_valid, gate=self.gate_fetch)
        write2 += [wr2_row.eq(wr3_pc[:imem_aw]), wr2_data.eq(Cat(wr3_word, precheck.pre))]
        arrived_q1 = Signal(pc_bits)
        arrived_q = Signal(pc_bits)
        m.d.sync += [arrived_q1.eq(arrived), arrived_q.eq(arrived_q1)]
        m.d.comb += [precheck.word_early.eq(packed), precheck.load.eq(last_word_in),
                     precheck.word_mid.eq(wr_word), precheck.load_mid.eq(wr_valid),
                     precheck.word.eq(wr3_word), precheck.pc.eq(wr3_pc),
                     self.imem_w.en.eq(wr2_valid), self.imem_w.addr.eq(wr2_row),
                     self.imem_w.data.eq(wr2_data)]
        with m.If(word_in):
            m.d.sync += pack.eq(packed)
            with m.If(resp_word == wpi - 1):
                m.d.sync += [resp_word.eq(0), arrived.eq(arrived + 1)]
            with m.Else():
                m.d.sync += resp_word.eq(resp_word + 1)

        def restart(pc, base):
            """Start a new stream at instruction ``pc``: drop what is in flight."""
            m.d.sync += [fp.eq(pc), arrived.eq(pc), arrived_q1.eq(pc), arrived_q.eq(pc), req_word.eq(0), resp_word.eq(0), live.eq(0),
                         req_addr.eq(base + INSTR_BYTES * pc)]
            m.d.comb += [loops.restart.eq(1), loops.restart_pc.eq(pc)]

        busy = Cat(getattr(self, u.name.lower()).busy for u in WAIT_UNITS)
        wait = instr_layout("HALT")(ir_word).wait     # the header is common to all
        ir_opcode = ir_word[:OPCODE_BITS]
        # ACT's mxu_lag k > 0: its MXU wait is met once at most k MATMULs are unfinished.
        lag = Mux(ir_opcode == opcode("ACT"), instr_layout("ACT")(ir_word).mxu_lag, 0)
        waited_busy = Cat(getattr(self, u.name.lower()).busy if u is not Unit.MXU else
                          Mux(lag != 0, self.mxu_pending > lag, self.mxu.busy) for u in WAIT_UNITS)
        wait_ok = (wait & waited_busy) == 0
        all_idle = busy == 0

        # One writer per memory (isa/ports.py): what the instruction in IR writes, what each
        # unit's last instruction writes, and whether the other writer is still at it.
        writers = [(u, mem) for mem, pair in WRITERS.items() for u in pair]
        ir_writes = {mem: Signal(name=f"ir_writes_{mem.lower()}") for mem in WRITERS}
        writing = {(u, mem): Signal(name=f"{u.lower()}_writing_{mem.lower()}") for u, mem in writers}
        for mem in WRITERS:
            terms = []
            for name, defn in BY_NAME.items():
                view = instr_layout(name)(ir_word)
                w = writes(name, lambda f, view=view: view[f], mem)
                if w is True:
                    terms.append(ir_opcode == opcode(name))
                elif w is not False:
                    terms.append((ir_opcode == opcode(name)) & w)
            m.d.comb += ir_writes[mem].eq(Cat(*terms).any() if terms else 0)
        write_blocked = {}              # per issuing unit
        for unit in WAIT_UNITS:
            blocked = []
            for mem, pair in WRITERS.items():
                if unit.name in pair:
                    other = other_writer(unit.name, mem)
                    blocked.append(ir_writes[mem] & writing[(other, mem)]
                                   & getattr(self, other.lower()).busy)
            write_blocked[unit] = Cat(*blocked).any() if blocked else 0
        branch_port_busy = getattr(self, BRANCH_PORT_UNIT.lower()).busy

        issue = Signal()
        load_ir = Signal()
        fetch = Signal()
        # The instruction at the fetch address is in the buffer (or past the program: read
        # it anyway, the checker stops there with PC_OVERFLOW).  A loop-back's target, the
        # first instruction of a body whose last one is being passed, was read before, so it
        # has arrived (a restart, which resets ``arrived``, also forgets every loop): only the
        # straight-line address is compared, in parallel with the loop stack's choice.
        straight = loops.straight
        readable = loops.back | (straight >= prog_len) | (straight < arrived_q)

        # BRANCH: the condition row is read while the BRANCH is in IR (data the next cycle).
        br = instr_layout("BRANCH")(ir_word)
        is_branch = ir_opcode == opcode("BRANCH")
        br_read = Signal()            # the condition was read last cycle: register it
        br_armed = Signal()           # the condition is registered (``br_taken``): decide now
        br_taken = Signal()
        back_taken = Signal(BRANCH_LIMIT_BITS)
        m.d.comb += [
            self.cond_asram.addr.eq(br.row), self.cond_acc.addr.eq(br.row),
            self.cond_asram.en.eq(0), self.cond_acc.en.eq(0),     # set in the arming cycle
        ]
        from_acc = br.mem == VecDst.ACC
        value8 = Mux(from_acc, self.cond_acc.data[:8], self.cond_asram.data[:8])
        value32 = Mux(from_acc, self.cond_acc.data[:32], self.cond_asram.data[:32])
        nonzero = Mux(br.dtype == BranchType.INT32, value32 != 0, value8 != 0)
        # Registered before the decision: the condition row comes from a block RAM's output,
        # far from the front end, and the decision drives the fetch address and IR's enable.
        taken_now = Mux(br.test == BranchTest.ALWAYS, 1, Mux(br.test == BranchTest.ZERO, ~nonzero, nonzero))
        m.d.sync += br_read.eq(0)
        with m.If(br_read):
            m.d.sync += [br_armed.eq(1), br_taken.eq(taken_now)]
        backward = br.target <= ir_pc
        limit_hit = Signal()
        m.d.comb += [
            limit_hit.eq(br_armed & br_taken & backward & (back_taken >= br.limit)),
            jump.eq(issue & is_branch & br_taken),
        ]
        f_word = self.imem_r.data[:INSTR_BITS]
        f_view = instr_layout("LOOP")(f_word)
        f_pre = pre_layout(cfg)(self.imem_r.data[INSTR_BITS:])
        # A LOOP with count 0 in the read port waits there one cycle (``hold``) while its
        # legality and end are registered; the cycle after, the loop stack skips its body
        # from those registers.  So neither the fetch address nor the fetch decision
        # depends on the checker's LOOP rules over IMEM's read data in the cycle it is read.
        f_loop = f_valid & (f_word[:OPCODE_BITS] == opcode("LOOP"))     # a LOOP in the read port
        zero_loop = Signal()
        skip_wait = Signal()          # the zero-count LOOP in the read port has waited
        skip_legal = Signal()
        skip_end = Signal(pc_bits)
        hold = Signal()
        m.d.comb += [
            zero_loop.eq(f_loop & f_pre.LOOP.skip & (f_pc < prog_len)),
            hold.eq(zero_loop & ~skip_wait),
        ]
        m.d.comb += [
            checker.word.eq(f_word),
            checker.pre.eq(self.imem_r.data[INSTR_BITS:]),
            checker.pc.eq(f_pc),
            checker.prog_len.eq(prog_len),
            checker.offsets.eq(loops.offsets),
            checker.loop_full.eq(loops.full),
            checker.past_end.eq(loops.past_end),
            checker.loop_active.eq(loops.active),
            self.imem_r.addr.eq(pc_f),
            self.imem_r.en.eq(fetch),
            loops.advance.eq(fetch),
            # A LOOP in the read port leaves it exactly when the sequencer fetches (the loop
            # stack needs the LOOP to know the fetch address).
            loops.enter.eq(f_valid & checker.loop_ok),
            loops.pending.eq(f_loop & (f_view.count != 0)),
            loops.loop_pc.eq(f_pc),
            loops.body_end.eq(checker.body_end),
            loops.skip.eq(skip_wait & skip_legal),
            loops.skip_end.eq(skip_end),
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
        next_op = checker.word_eff[:OPCODE_BITS]
        vector_next = Cat(next_op == opcode(name) for name in VECTOR_INSTRS).any()
        m.d.comb += [self.vpu_ir_load.eq(load_ir & vector_next), self.vpu_ir_next.eq(checker.word_eff)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    with m.If(start_code != ErrorCode.NONE):
                        m.d.comb += [self.stop.eq(1), self.stop_code.eq(start_code), self.stop_pc.eq(0)]
                    with m.Else():
                        m.d.sync += [
                            prog_len.eq(self.prog_len), prog_base.eq(self.prog_addr),
                            back_taken.eq(0), br_read.eq(0), br_armed.eq(0), f_valid.eq(0), ir_valid.eq(0),
                            skip_wait.eq(0),
                        ]
                        restart(0, self.prog_addr)
                        m.next = "RUN"

            with m.State("RUN"):
                m.d.comb += [self.running.eq(1), running.eq(1)]
                # An instruction leaves the read port (into IR) only together with the read
                # of the next one: the loop stack advances on reads.
                ir_free = ~ir_valid | issue
                m.d.comb += [
                    load_ir.eq(f_valid & ir_free & readable & ~jump & ~hold),
                    fetch.eq((~f_valid | ir_free) & readable & ~jump & ~hold),
                ]
                with m.If(hold & ~jump):
                    m.d.sync += [skip_wait.eq(1), skip_legal.eq(checker.loop_ok), skip_end.eq(checker.body_end)]
                with m.If(fetch | jump):     # the LOOP leaves the read port, or is dropped
                    m.d.sync += skip_wait.eq(0)
                with m.If(fetch):
                    m.d.sync += [f_valid.eq(1), f_pc.eq(pc_f)]
                with m.Elif(jump):           # refetch from the target
                    m.d.sync += f_valid.eq(0)
                    restart(br.target, prog_base)
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
                        arm = ok & wait_ok & ~branch_port_busy & ~br_read & ~br_armed
                        # The condition row is read only in the arming cycle: the ports are
                        # the vector unit's (hw/top.py), idle then.
                        m.d.comb += [self.cond_asram.en.eq(arm), self.cond_acc.en.eq(arm)]
                        with m.If(arm):
                            m.d.sync += br_read.eq(1)
                        with m.If(issue):
                            m.d.sync += br_armed.eq(0)
                        with m.If(jump & backward):
                            m.d.sync += back_taken.eq(back_taken + 1)
                    vector = tuple((name, self.vpu) for name in VECTOR_INSTRS)
                    for name, port in (("DMA_LOAD", self.dma), ("DMA_STORE", self.dma),
                                       ("MATMUL", self.mxu)) + vector:
                        with m.Case(opcode(name)):
                            free = ~write_blocked[BY_NAME[name].unit]
                            m.d.comb += [issue.eq(ok & wait_ok & free & port.ready), port.start.eq(issue)]
                            with m.If(issue):
                                m.d.sync += [writing[(u, mem)].eq(ir_writes[mem])
                                             for u, mem in writers if u == BY_NAME[name].unit.name]

                stopping = (ir_valid & ((ir_err != ErrorCode.NONE) | (ir_opcode == opcode("HALT")) | self.abort)) \
                    | limit_hit
                code = Mux(limit_hit, ErrorCode.BRANCH_LIMIT, Mux(self.abort, ErrorCode.WATCHDOG, ErrorCode.NONE))
                with m.If(stopping & all_idle):
                    m.d.comb += [self.stop.eq(1), self.stop_pc.eq(ir_pc),
                                 self.stop_code.eq(Mux(ir_err != ErrorCode.NONE, ir_err, code))]
                    m.d.sync += [br_read.eq(0), br_armed.eq(0)]
                    m.next = "IDLE"
        return m
