"""Top level of the NPU: sequencer, DMA, MXU, VPU, scratchpads and CSRs.

Scratchpads (Amaranth memories sized by the configuration) and who uses them:

========  ===================  ======================================================
memory    row                  ports
========  ===================  ======================================================
IMEM      one instruction      sequencer write (instruction fetch), sequencer read (front end):
          and its precheck     a circular buffer of the program (hw/sequencer.py); the read
                               port is transparent for the write (hw/precheck.py)
ASRAM     array_rows int8      one write port (DMA, or VPU, or TABLE: isa/ports.py), DMA read
                               (store), MXU read, VPU reads a (shared with TABLE and the
                               BRANCH condition), b, c
WSRAM     array_cols int8      DMA write, MXU read
ACC       array_cols int32     one write port (MXU, or VPU, or TABLE), MXU read (transparent),
                               VPU reads a (shared with TABLE and BRANCH), b, c
PSRAM     array_cols int32     DMA write (bus-word granularity), VPU reads (3)
TSRAM     bus word             in hw/table.py: one 2 KiB copy per lane, TABLE write (all
                               copies), TABLE reads (one per copy)
========  ===================  ======================================================

Every memory has one write port, as block RAM and SRAM macros have: the sequencer issues
an instruction that writes ASRAM or ACC only when the memory's other writer is not busy
writing it (isa/ports.py), and VPU and TABLE never run at once.  Read ports are one per
reader that runs alongside the others; synthesis replicates a one-write memory per read
port (docs/hardware.md).  Two units touching the same row in the same cycle is a program
hazard the wait masks must prevent.  The VPU reads one row per cycle on each of its operand
ports a, b, c.

The vector and TABLE units, with their read ports, run in clock domains of their own
(``vector``, ``table`` and ``vector_in`` for what they share; hw/clock_gate.py): in simulation
builds (``gate_idle_units=True``, what the Verilator harness builds) a domain's clock stops
while its unit is idle (``vector_in``'s: while both are and no BRANCH reads a condition), so
Verilator does not evaluate their logic in the cycles in which they have nothing to do; the
MXU's weight rows are clocked only when they load.  Synthesis builds it ungated, with the
``sync`` clock.

External interfaces: ``csr`` (hw/interfaces.CsrBusSignature, register map in hw/csr.py),
``bus`` (hw/interfaces.ExtBusSignature: the DMA, and the sequencer's instruction fetch in
the cycles in which the DMA is idle), ``irq`` and ``stopped`` (STATUS.DONE | STATUS.ERROR).
"""
from __future__ import annotations

from amaranth import Cat, DomainRenamer, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from isa.instructions import BY_NAME, INSTR_BITS, OPCODE_BITS
from hw.clock_gate import add_unit_domain
from hw.csr import ADDR_WIDTH, CsrBlock
from hw.dma import Dma
from hw.interfaces import CsrBusSignature, ExtBusSignature
from hw.mxu import ACC_BITS, Mxu
from hw.precheck import pre_bits
from hw.sequencer import Sequencer
from hw.table import Table
from hw.vpu import Vpu


class Npu(wiring.Component):
    """The NPU for ``config``; ``gate_idle_units``: stop idle units' clocks (simulation
    builds; hw/clock_gate.py)."""

    def __init__(self, config: NpuConfig, *, gate_idle_units: bool = False):
        self.config = config
        self.gate_idle_units = gate_idle_units
        super().__init__({
            "csr": In(CsrBusSignature(ADDR_WIDTH)),
            "bus": Out(ExtBusSignature(config)),
            "irq": Out(1),
            "stopped": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus_bits = 8 * cfg.bus_bytes
        wide = ACC_BITS * cfg.array_cols

        # IMEM rows hold an instruction and its precheck (hw/precheck.py)
        m.submodules.imem = imem = memory.Memory(shape=INSTR_BITS + pre_bits(cfg), depth=cfg.imem_rows, init=[])
        m.submodules.asram = asram = memory.Memory(shape=bus_bits, depth=cfg.asram_rows, init=[])
        m.submodules.wsram = wsram = memory.Memory(shape=bus_bits, depth=cfg.wsram_rows, init=[])
        m.submodules.acc = acc = memory.Memory(shape=wide, depth=cfg.acc_rows, init=[])
        m.submodules.psram = psram = memory.Memory(shape=wide, depth=cfg.psram_rows, init=[])

        m.submodules.csrs = csrs = CsrBlock(cfg)
        m.submodules.seq = seq = Sequencer(cfg, gate_fetch=self.gate_idle_units)
        m.submodules.dma = dma = Dma(cfg)
        m.submodules.mxu = mxu = Mxu(cfg, gate_weights=self.gate_idle_units)
        # Gated domains (hw/clock_gate.py): "vector" (the VPU and its operand b and c ports),
        # "table" (the TABLE unit) and "vector_in" (what both read: operand a's ports, which
        # BRANCH shares too, and the vector units' copy of IR), so that each vector unit costs
        # nothing in a simulation while the other one runs
        vpu, table = Vpu(cfg, gate_stages=self.gate_idle_units), Table(cfg)
        m.submodules.vpu = DomainRenamer("vector")(vpu)
        m.submodules.table = DomainRenamer("table")(table)
        gate = self.gate_idle_units
        add_unit_domain(m, "vector", vpu.ctl.busy | vpu.ctl.start, gate=gate)
        add_unit_domain(m, "table", table.ctl.busy | table.ctl.start, gate=gate)
        vector_reads = seq.cond_asram.en | seq.cond_acc.en
        add_unit_domain(m, "vector_in", vpu.ctl.busy | table.ctl.busy | seq.vpu.start | vector_reads
                        | seq.vpu_ir_load, gate=gate)
        # Simulation builds: the vector units' copy of IR, loaded with every vector instruction
        # that enters IR: it equals IR whenever IR holds one (the only time the units look at
        # it), and their command decode, comb from it, is then logic of their domains (IR
        # changes every cycle).  Synthesis builds read IR itself: the copy would be 256
        # flip-flops more behind the front end's longest path (IMEM's read data through the
        # checker, docs/fpga.md), with an enable decoded from that data.
        if gate:
            vector_ir = Signal(INSTR_BITS)
            with m.If(seq.vpu_ir_load):
                m.d.vector_in += vector_ir.eq(seq.vpu_ir_next)
        else:
            vector_ir = seq.vpu.cmd.word

        imem_w = imem.write_port()
        wiring.connect(m, seq.imem_w, imem_w)
        # transparent: an instruction is written the cycle after it arrives (hw/precheck.py)
        wiring.connect(m, seq.imem_r, imem.read_port(transparent_for=(imem_w,)))
        wiring.connect(m, dma.wsram_w, wsram.write_port())
        wiring.connect(m, mxu.wsram_r, wsram.read_port())
        wiring.connect(m, dma.psram_w, psram.write_port(granularity=bus_bits))

        # One write port per memory (isa/ports.py): the sequencer never lets two writers of
        # ASRAM (DMA, vector) or of ACC (MXU, vector) run at once, and VPU and TABLE share
        # the vector unit's issue slot (each is ready only when idle), so at most one of the
        # writers muxed onto a port is enabled in any cycle.
        def one_write_port(memory_, writers, **kwargs):
            port = memory_.write_port(**kwargs)
            m.d.comb += port.en.eq(Cat(w.en for w in writers).any())
            addr, data_ = writers[-1].addr, writers[-1].data
            for w in reversed(writers[:-1]):
                addr, data_ = Mux(w.en, w.addr, addr), Mux(w.en, w.data, data_)
            m.d.comb += [port.addr.eq(addr), port.data.eq(data_)]
            return port

        one_write_port(asram, [vpu.asram_w, table.asram_w, dma.asram_w])
        acc_w = one_write_port(acc, [vpu.acc_w, table.acc_w, mxu.acc_w])

        # Read ports: one per reader that can run alongside the others (a memory with one
        # write port is replicated per read port in block RAM).  Operand a's port is shared
        # by the VPU, the TABLE unit (never running with it) and the sequencer's BRANCH
        # condition read (only while both are idle, isa/ports.py).
        wiring.connect(m, dma.asram_r, asram.read_port())
        wiring.connect(m, mxu.asram_r, asram.read_port())
        wiring.connect(m, mxu.acc_r, acc.read_port(transparent_for=(acc_w,)))

        def shared_read_port(memory_, readers):
            port = memory_.read_port(domain="vector_in")
            m.d.comb += port.en.eq(Cat(r.en for r in readers).any())
            addr = readers[-1].addr
            for r in reversed(readers[:-1]):
                addr = Mux(r.en, r.addr, addr)
            m.d.comb += port.addr.eq(addr)
            m.d.comb += [r.data.eq(port.data) for r in readers]

        for memory_, name in ((asram, "asram"), (acc, "acc")):
            first, *rest = vpu.read_ports(name)
            shared_read_port(memory_, [getattr(seq, f"cond_{name}"), getattr(table, f"{name}_r"), first])
            for port in rest:
                wiring.connect(m, port, memory_.read_port(domain="vector"))
        for port in vpu.read_ports("psram"):
            wiring.connect(m, port, psram.read_port(domain="vector"))

        wiring.connect(m, seq.dma, dma.ctl)
        wiring.connect(m, seq.mxu, mxu.ctl)
        m.d.comb += seq.mxu_pending.eq(mxu.pending)
        # TABLE shares the vector unit's sequencer port: one VPU in the wait mask and the
        # busy counters, ready when both are (each is ready only when idle).
        is_table = vector_ir[:OPCODE_BITS] == BY_NAME["TABLE"].opcode
        m.d.comb += [
            vpu.ctl.cmd.word.eq(vector_ir), table.ctl.cmd.word.eq(vector_ir),
            vpu.ctl.start.eq(seq.vpu.start & ~is_table), table.ctl.start.eq(seq.vpu.start & is_table),
            seq.vpu.ready.eq(vpu.ctl.ready & table.ctl.ready), seq.vpu.busy.eq(vpu.ctl.busy | table.ctl.busy),
        ]

        wiring.connect(m, wiring.flipped(self.csr), csrs.bus)
        m.d.comb += [
            seq.start.eq(csrs.start),
            seq.prog_addr.eq(csrs.prog_addr),
            seq.prog_len.eq(csrs.prog_len),
            seq.abort.eq(csrs.abort),
            csrs.running.eq(seq.running),
            csrs.stop.eq(seq.stop),
            csrs.stop_code.eq(seq.stop_code),
            csrs.stop_pc.eq(seq.stop_pc),
            csrs.unit_busy.eq(Cat(dma.ctl.busy, mxu.ctl.busy, seq.vpu.busy)),
            self.irq.eq(csrs.irq),
            self.stopped.eq(csrs.stopped),
        ]

        # External bus: the instruction fetch requests only while the DMA is idle, so the two
        # never request in the same cycle; read data return in order exactly mem_latency
        # cycles after the request, so a shift register of "fetch request" bits routes them.
        out = self.bus
        with m.If(seq.bus.req_valid):
            m.d.comb += [out.req_valid.eq(1), out.req_addr.eq(seq.bus.req_addr), out.req_we.eq(0)]
        with m.Else():
            m.d.comb += [out.req_valid.eq(dma.bus.req_valid), out.req_addr.eq(dma.bus.req_addr),
                         out.req_we.eq(dma.bus.req_we), out.req_wdata.eq(dma.bus.req_wdata),
                         out.req_be.eq(dma.bus.req_be)]
        fetch_resp = Signal(cfg.mem_latency)
        m.d.sync += fetch_resp.eq(Cat(seq.bus.req_valid & out.req_ready, fetch_resp[:-1]))
        m.d.comb += [seq.bus.resp_valid.eq(out.resp_valid & fetch_resp[-1]),
                     dma.bus.resp_valid.eq(out.resp_valid & ~fetch_resp[-1])]
        for unit_bus in (seq.bus, dma.bus):
            m.d.comb += [unit_bus.req_ready.eq(out.req_ready), unit_bus.resp_rdata.eq(out.resp_rdata)]
        return m
