"""Top level of the NPU: sequencer, DMA, MXU, VPU, scratchpads and CSRs.

Scratchpads (Amaranth memories sized by the configuration) and who uses them:

========  ===================  ======================================================
memory    row                  ports
========  ===================  ======================================================
IMEM      one instruction      sequencer write (instruction fetch), sequencer read (front end):
                               a circular buffer of the program (hw/sequencer.py)
ASRAM     array_rows int8      DMA write, vector write (VPU or TABLE), DMA read (store), MXU read,
                               VPU reads (3), TABLE read, sequencer read (BRANCH condition)
WSRAM     array_cols int8      DMA write, MXU read
ACC       array_cols int32     MXU write, vector write (VPU or TABLE), MXU read (transparent),
                               VPU reads (3), TABLE read, sequencer read (BRANCH condition)
PSRAM     array_cols int32     DMA write (bus-word granularity), VPU reads (3)
TSRAM     bus word             in hw/table.py: one 2 KiB copy per lane, TABLE write (all
                               copies), TABLE reads (one per copy)
========  ===================  ======================================================

Every unit has its own ports, so units never stall each other; two units touching the same
row in the same cycle is a program hazard the wait masks must prevent.  (The multi-ported
memories are a model-level simplification: an FPGA or ASIC build would bank them by unit or
time-multiplex their ports, without changing the ISA.  The VPU reads one row per cycle on
each of its operand ports a, b, c.)

External interfaces: ``csr`` (hw/interfaces.CsrBusSignature, register map in hw/csr.py),
``bus`` (hw/interfaces.ExtBusSignature: the DMA, and the sequencer's instruction fetch in
the cycles in which the DMA is idle), ``irq`` and ``stopped`` (STATUS.DONE | STATUS.ERROR).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from isa.instructions import BY_NAME, INSTR_BITS, OPCODE_BITS
from hw.csr import ADDR_WIDTH, CsrBlock
from hw.dma import Dma
from hw.interfaces import CsrBusSignature, ExtBusSignature
from hw.mxu import ACC_BITS, Mxu
from hw.sequencer import Sequencer
from hw.table import Table
from hw.vpu import Vpu


class Npu(wiring.Component):
    def __init__(self, config: NpuConfig):
        self.config = config
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

        m.submodules.imem = imem = memory.Memory(shape=INSTR_BITS, depth=cfg.imem_rows, init=[])
        m.submodules.asram = asram = memory.Memory(shape=bus_bits, depth=cfg.asram_rows, init=[])
        m.submodules.wsram = wsram = memory.Memory(shape=bus_bits, depth=cfg.wsram_rows, init=[])
        m.submodules.acc = acc = memory.Memory(shape=wide, depth=cfg.acc_rows, init=[])
        m.submodules.psram = psram = memory.Memory(shape=wide, depth=cfg.psram_rows, init=[])

        m.submodules.csrs = csrs = CsrBlock(cfg)
        m.submodules.seq = seq = Sequencer(cfg)
        m.submodules.dma = dma = Dma(cfg)
        m.submodules.mxu = mxu = Mxu(cfg)
        m.submodules.vpu = vpu = Vpu(cfg)
        m.submodules.table = table = Table(cfg)

        wiring.connect(m, seq.imem_w, imem.write_port())
        wiring.connect(m, seq.imem_r, imem.read_port())
        wiring.connect(m, seq.cond_asram, asram.read_port())       # BRANCH conditions
        wiring.connect(m, seq.cond_acc, acc.read_port())
        wiring.connect(m, dma.asram_w, asram.write_port())
        wiring.connect(m, dma.asram_r, asram.read_port())
        wiring.connect(m, mxu.asram_r, asram.read_port())
        wiring.connect(m, dma.wsram_w, wsram.write_port())
        wiring.connect(m, mxu.wsram_r, wsram.read_port())
        acc_w = acc.write_port()
        wiring.connect(m, mxu.acc_w, acc_w)
        wiring.connect(m, mxu.acc_r, acc.read_port(transparent_for=(acc_w,)))
        for memory_, name in ((asram, "asram"), (acc, "acc"), (psram, "psram")):
            for port in vpu.read_ports(name):        # the VPU's operand ports a, b, c
                wiring.connect(m, port, memory_.read_port())
        wiring.connect(m, dma.psram_w, psram.write_port(granularity=bus_bits))
        wiring.connect(m, table.asram_r, asram.read_port())
        wiring.connect(m, table.acc_r, acc.read_port())
        # One vector write port per memory: VPU and TABLE share the sequencer's vector port and
        # never run at once (each is ready only when idle), so they never write in the same
        # cycle and one port serves both (docs/hardware.md: fewer write ports, real SRAMs).
        for memory_, name in ((asram, "asram"), (acc, "acc")):
            port = memory_.write_port()
            vw, tw = getattr(vpu, f"{name}_w"), getattr(table, f"{name}_w")
            m.d.comb += [port.en.eq(vw.en | tw.en), port.addr.eq(Mux(tw.en, tw.addr, vw.addr)),
                         port.data.eq(Mux(tw.en, tw.data, vw.data))]

        wiring.connect(m, seq.dma, dma.ctl)
        wiring.connect(m, seq.mxu, mxu.ctl)
        # TABLE shares the vector unit's sequencer port: one VPU in the wait mask and the
        # busy counters, ready when both are (each is ready only when idle).
        is_table = seq.vpu.cmd.word[:OPCODE_BITS] == BY_NAME["TABLE"].opcode
        m.d.comb += [
            vpu.ctl.cmd.eq(seq.vpu.cmd), table.ctl.cmd.eq(seq.vpu.cmd),
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
