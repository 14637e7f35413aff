"""DMA unit: DMA_LOAD (external memory -> ASRAM/WSRAM/PSRAM, with padding) and DMA_STORE
(ASRAM -> external memory), 3-D strided, one bus word per cycle.

A slot generator walks the destination order of the ISA pseudocode (plane, line, word,
padding included), one slot per cycle; a slot is either a pad word or a data word.

* LOAD: a data slot issues a bus read; every slot (pad or data) enters a delay line of
  ``mem_latency`` stages and is written to the scratchpad when it leaves it, together with
  the read data, which return in order exactly ``mem_latency`` cycles after the request.
  Writes thus happen in slot order, one per cycle.
* STORE: a slot reads ASRAM; the word is sent as a posted bus write the next cycle.

Timing with an always-ready bus (what the simulation memory model gives), command taken in
cycle c: LOAD slots at cycles c+1 .. c+S, scratchpad writes at c+1+L .. c+S+L, busy for
``S + L`` cycles (S = len2*(len1+pad_b1+pad_a1)*(len0+pad_b0+pad_a0), L = mem_latency).
STORE: ASRAM reads at c+1 .. c+N, bus writes at c+2 .. c+N+1, busy for ``N + 1`` cycles
(N = len0*len1*len2).  A command that moves nothing never makes the unit busy.  The unit
takes a new command only when idle.

Range and alignment are checked by the sequencer before issue (hw/checker.py).
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import LEN_BITS, PAD_BITS, Sram
from hw.interfaces import ExtBusSignature, UnitCtlSignature
from hw.sequencer import dma_cmd_layout


class Dma(wiring.Component):
    def __init__(self, config: NpuConfig):
        self.config = config
        bits = 8 * config.bus_bytes
        super().__init__({
            "ctl": In(UnitCtlSignature(dma_cmd_layout())),
            "bus": Out(ExtBusSignature(config)),
            "asram_w": In(WritePort.Signature(addr_width=ceil_log2(config.asram_rows), shape=bits)),
            "asram_r": In(ReadPort.Signature(addr_width=ceil_log2(config.asram_rows), shape=bits)),
            "wsram_w": In(WritePort.Signature(addr_width=ceil_log2(config.wsram_rows), shape=bits)),
            "psram_w": In(WritePort.Signature(addr_width=ceil_log2(config.psram_rows),
                                              shape=8 * config.psram_row_bytes, granularity=bits)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus = self.bus
        cmd = self.ctl.cmd
        bus_bits = 8 * cfg.bus_bytes
        wpr = cfg.words_per_wide_row
        latency = cfg.mem_latency
        max_words = max(cfg.asram_rows, cfg.wsram_rows, cfg.psram_rows * wpr)

        # Command registers.
        store = Signal()
        sram = Signal.like(cmd.sram)
        pad_value = Signal(8)
        len1 = Signal(LEN_BITS)
        len2 = Signal(LEN_BITS)
        stride1 = Signal.like(cmd.stride1)
        stride2 = Signal.like(cmd.stride2)
        pad_b0 = Signal(PAD_BITS)
        pad_b1 = Signal(PAD_BITS)
        w_end = Signal(LEN_BITS + PAD_BITS + 2)     # words per line, pads included
        l_end = Signal(LEN_BITS + PAD_BITS + 2)     # lines per plane, pads included
        w_hi = Signal(LEN_BITS + 1)                 # first pad word after the data
        l_hi = Signal(LEN_BITS + 1)

        # Slot generator state.
        active = Signal()
        w = Signal.like(w_end)
        l = Signal.like(l_end)
        p = Signal(LEN_BITS)
        dst = Signal(range(max_words + 1))
        word_addr = Signal(cfg.ext_addr_bits)
        line_base = Signal(cfg.ext_addr_bits)
        plane_base = Signal(cfg.ext_addr_bits)

        line_in = (l >= pad_b1) & (l < l_hi)
        is_data = line_in & (w >= pad_b0) & (w < w_hi)
        last_w = w == w_end - 1
        last_l = l == l_end - 1
        last_p = p == len2 - 1

        # STORE output stage: the ASRAM word read last cycle and its bus address.
        st_valid = Signal()
        st_addr = Signal(cfg.ext_addr_bits)
        st_advance = ~st_valid | bus.req_ready

        step = Signal()
        m.d.comb += step.eq(active & Mux(store, st_advance, ~is_data | bus.req_ready))
        with m.If(store):
            m.d.comb += [
                bus.req_valid.eq(st_valid),
                bus.req_we.eq(1),
                bus.req_addr.eq(st_addr),
                bus.req_wdata.eq(self.asram_r.data),
                self.asram_r.en.eq(st_advance),
                self.asram_r.addr.eq(dst),
            ]
            with m.If(st_advance):
                m.d.sync += [st_valid.eq(active), st_addr.eq(word_addr)]
        with m.Else():
            m.d.comb += [
                bus.req_valid.eq(active & is_data),
                bus.req_we.eq(0),
                bus.req_addr.eq(word_addr),
            ]

        with m.If(step):
            m.d.sync += dst.eq(dst + 1)
            with m.If(is_data):
                m.d.sync += word_addr.eq(word_addr + cfg.bus_bytes)
            with m.If(last_w):
                m.d.sync += w.eq(0)
                with m.If(last_l):
                    next_plane = plane_base + stride2
                    m.d.sync += [l.eq(0), p.eq(p + 1), plane_base.eq(next_plane),
                                 line_base.eq(next_plane), word_addr.eq(next_plane)]
                    with m.If(last_p):
                        m.d.sync += active.eq(0)
                with m.Else():
                    next_line = Mux(line_in, line_base + stride1, line_base)
                    m.d.sync += [l.eq(l + 1), line_base.eq(next_line), word_addr.eq(next_line)]
            with m.Else():
                m.d.sync += w.eq(w + 1)

        # LOAD delay line: slot -> scratchpad write, mem_latency cycles later.
        dl_valid = [Signal(name=f"dl_valid{i}") for i in range(latency)]
        dl_pad = [Signal(name=f"dl_pad{i}") for i in range(latency)]
        dl_dst = [Signal.like(dst, name=f"dl_dst{i}") for i in range(latency)]
        m.d.sync += [dl_valid[0].eq(step & ~store), dl_pad[0].eq(~is_data), dl_dst[0].eq(dst)]
        for i in range(1, latency):
            m.d.sync += [dl_valid[i].eq(dl_valid[i - 1]), dl_pad[i].eq(dl_pad[i - 1]),
                         dl_dst[i].eq(dl_dst[i - 1])]
        wr_en, wr_pad, wr_dst = dl_valid[-1], dl_pad[-1], dl_dst[-1]
        wr_data = Mux(wr_pad, Cat([pad_value] * cfg.bus_bytes), bus.resp_rdata)
        lane_bits = (wpr - 1).bit_length()
        m.d.comb += [
            self.asram_w.en.eq(wr_en & (sram == Sram.ASRAM)),
            self.asram_w.addr.eq(wr_dst),
            self.asram_w.data.eq(wr_data),
            self.wsram_w.en.eq(wr_en & (sram == Sram.WSRAM)),
            self.wsram_w.addr.eq(wr_dst),
            self.wsram_w.data.eq(wr_data),
            self.psram_w.en.eq(Mux(wr_en & (sram == Sram.PSRAM),
                                   Const(1, wpr) << wr_dst[:lane_bits] if wpr > 1 else 1, 0)),
            self.psram_w.addr.eq(wr_dst >> lane_bits),
            self.psram_w.data.eq(Cat([wr_data] * wpr)),
        ]

        busy = active | st_valid | Cat(dl_valid).any()
        m.d.comb += [self.ctl.busy.eq(busy), self.ctl.ready.eq(~busy)]

        with m.If(self.ctl.start):
            words = cmd.len0 + cmd.pad_b0 + cmd.pad_a0
            lines = cmd.len1 + cmd.pad_b1 + cmd.pad_a1
            m.d.sync += [
                store.eq(cmd.store), sram.eq(cmd.sram), pad_value.eq(cmd.pad_value),
                len1.eq(cmd.len1), len2.eq(cmd.len2), stride1.eq(cmd.stride1), stride2.eq(cmd.stride2),
                pad_b0.eq(cmd.pad_b0), pad_b1.eq(cmd.pad_b1),
                w_end.eq(words), l_end.eq(lines),
                w_hi.eq(cmd.pad_b0 + cmd.len0), l_hi.eq(cmd.pad_b1 + cmd.len1),
                active.eq((words != 0) & (lines != 0) & (cmd.len2 != 0)),
                w.eq(0), l.eq(0), p.eq(0), dst.eq(cmd.sram_addr),
                word_addr.eq(cmd.ext_addr), line_base.eq(cmd.ext_addr), plane_base.eq(cmd.ext_addr),
                st_valid.eq(0),
            ]
        return m
