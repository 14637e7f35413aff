"""DMA unit: DMA_LOAD (external memory -> ASRAM/WSRAM/PSRAM, with padding) and DMA_STORE
(ASRAM -> external memory), 3-D strided, in word mode or element mode (isa/dma.py).

Both modes are one datapath: word mode is element mode with elements of BUS bytes and
``stride0 = BUS``.  A slot generator walks the ISA pseudocode's order (plane, line,
element, padding included) one *chunk* per cycle: a chunk is an element, or for elements
wider than the bus (8 bytes on a 4-byte bus) one bus word of it.  Each chunk has a lane
(its byte offset in its scratchpad word: chunks are packed one after the other, each line
starting at a fresh word) and an external address; a chunk that fills its word, or ends
its line, *flushes* the word.  With packed lines (DMA_LOAD ``pack``) only the end of a
plane ends a word early: the next line's chunks continue in the same assembly word.

* LOAD: a data chunk issues a bus read of the word holding it; every chunk (pad or data)
  enters a delay line of ``mem_latency`` stages, and when it leaves it the read data
  (returning in order exactly ``mem_latency`` cycles after the request) are rotated so the
  chunk lands on its lane and merged into an assembly word (whose other lanes hold
  ``pad_value``); a flushing chunk writes the assembled word to the scratchpad, one write
  per cycle at most, in order.  Word mode: every chunk is a whole word and flushes.
* STORE: a chunk reads its ASRAM word; the next cycle the word, rotated so the chunk lands
  on its external byte offset, is sent as a posted bus write with byte enables on the
  chunk's bytes only.

Timing with an always-ready bus (what the simulation memory model gives), command taken in
cycle c: LOAD chunks at cycles c+1 .. c+S, scratchpad writes by c+S+L, busy for ``S + L``
cycles (S = len2*(len1+pad_b1+pad_a1)*(len0+pad_b0+pad_a0)*X, L = mem_latency, X = chunks
per element).  STORE: ASRAM reads at c+1 .. c+N, bus writes at c+2 .. c+N+1, busy for
``N + 1`` cycles (N = len0*len1*len2*X).  A command that moves nothing never makes the unit
busy.  The unit takes a new command only when idle.

Legality, range and alignment are checked by the sequencer before issue (hw/checker.py).
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import DMA_ELEM_SIZES, LEN_BITS, PAD_BITS, Sram
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
        nbus = cfg.bus_bytes
        bus_bits = 8 * nbus
        lane_bits = ceil_log2(nbus)
        wpr = cfg.words_per_wide_row
        latency = cfg.mem_latency
        max_words = max(cfg.asram_rows, cfg.wsram_rows, cfg.psram_rows * wpr)
        max_chunks = max(1, max(DMA_ELEM_SIZES) // nbus)    # bus words per element, at most

        def rotate_bytes(word, amount):
            """``word`` rotated down by ``amount`` bytes: byte j of the result is byte
            (j + amount) mod BUS of ``word``."""
            if nbus == 1:
                return word
            return (Cat(word, word) >> (amount * 8))[:bus_bits]

        def byte_mask(bits):
            """Expand one bit per byte to eight."""
            return Cat(*[b.replicate(8) for b in bits])

        # Command registers.
        store = Signal()
        sram = Signal.like(cmd.sram)
        pad_value = Signal(8)
        pack = Signal()                             # DMA_LOAD packed lines
        len1 = Signal(LEN_BITS)
        len2 = Signal(LEN_BITS)
        stride0 = Signal(cmd.stride0.shape())
        stride1 = Signal.like(cmd.stride1)
        stride2 = Signal.like(cmd.stride2)
        pad_b0 = Signal(PAD_BITS)
        pad_b1 = Signal(PAD_BITS)
        w_end = Signal(LEN_BITS + PAD_BITS + 2)     # elements per line, pads included
        l_end = Signal(LEN_BITS + PAD_BITS + 2)     # lines per plane, pads included
        w_hi = Signal(LEN_BITS + 1)                 # first pad element after the data
        l_hi = Signal(LEN_BITS + 1)
        chunk = Signal(range(nbus + 1))             # bytes per chunk: min(E, BUS)
        chunk_mask = Signal(nbus)                   # its byte lanes at lane 0

        # Slot generator state.
        active = Signal()
        w = Signal.like(w_end)
        l = Signal.like(l_end)
        p = Signal(LEN_BITS)
        lane = Signal(lane_bits)                    # byte offset of the chunk in its word
        dst = Signal(range(max_words + 1))
        word_addr = Signal(cfg.ext_addr_bits)       # external address of the chunk
        line_base = Signal(cfg.ext_addr_bits)
        plane_base = Signal(cfg.ext_addr_bits)

        line_in = (l >= pad_b1) & (l < l_hi)
        is_data = line_in & (w >= pad_b0) & (w < w_hi)
        if max_chunks > 1:                          # elements wider than the bus
            sub = Signal(range(max_chunks))         # chunk of the element
            sub_end = Signal(range(max_chunks))     # chunks per element - 1
            elem_addr = Signal(cfg.ext_addr_bits)   # external address of the element
            last_sub = sub == sub_end
            addr_regs = (word_addr, elem_addr)
        else:
            last_sub = Const(1)
            addr_regs = (word_addr,)
        last_w = (w == w_end - 1) & last_sub        # last chunk of the line
        last_l = l == l_end - 1
        last_p = p == len2 - 1
        next_lane = Signal(lane_bits + 1)
        m.d.comb += next_lane.eq(lane + chunk)
        word_end = last_w & (~pack | last_l)        # the line (packed: the plane) ends
        flush = (next_lane == nbus) | word_end      # the chunk completes its word
        offset = word_addr[:lane_bits] if lane_bits else Const(0, 0)
        aligned_addr = Cat(Const(0, lane_bits), word_addr[lane_bits:])

        # STORE output stage: the ASRAM word read last cycle, where its chunk goes.
        st_valid = Signal()
        st_addr = Signal(cfg.ext_addr_bits)
        st_rot = Signal(lane_bits)
        st_be = Signal(nbus)
        st_advance = ~st_valid | bus.req_ready

        step = Signal()
        m.d.comb += step.eq(active & Mux(store, st_advance, ~is_data | bus.req_ready))
        with m.If(store):
            m.d.comb += [
                bus.req_valid.eq(st_valid),
                bus.req_we.eq(1),
                bus.req_addr.eq(st_addr),
                bus.req_wdata.eq(rotate_bytes(self.asram_r.data, st_rot)),
                bus.req_be.eq(st_be),
                self.asram_r.en.eq(st_advance),
                self.asram_r.addr.eq(dst),
            ]
            with m.If(st_advance):
                m.d.sync += [st_valid.eq(active), st_addr.eq(aligned_addr),
                             st_rot.eq(lane - offset),                  # modulo BUS
                             st_be.eq(chunk_mask << offset)]
        with m.Else():
            m.d.comb += [
                bus.req_valid.eq(active & is_data),
                bus.req_we.eq(0),
                bus.req_addr.eq(aligned_addr),
            ]

        with m.If(step):
            with m.If(flush):
                m.d.sync += dst.eq(dst + 1)
            m.d.sync += lane.eq(Mux(word_end, 0, next_lane))
            with m.If(is_data):
                if max_chunks > 1:
                    with m.If(last_sub):
                        m.d.sync += [elem_addr.eq(elem_addr + stride0), word_addr.eq(elem_addr + stride0)]
                    with m.Else():
                        m.d.sync += word_addr.eq(word_addr + nbus)
                else:
                    m.d.sync += word_addr.eq(word_addr + stride0)
            if max_chunks > 1:
                m.d.sync += sub.eq(Mux(last_sub, 0, sub + 1))
            with m.If(last_w):
                m.d.sync += w.eq(0)
                with m.If(last_l):
                    next_plane = plane_base + stride2
                    m.d.sync += [l.eq(0), p.eq(p + 1), plane_base.eq(next_plane), line_base.eq(next_plane)]
                    m.d.sync += [r.eq(next_plane) for r in addr_regs]
                    with m.If(last_p):
                        m.d.sync += active.eq(0)
                with m.Else():
                    next_line = Mux(line_in, line_base + stride1, line_base)
                    m.d.sync += [l.eq(l + 1), line_base.eq(next_line)]
                    m.d.sync += [r.eq(next_line) for r in addr_regs]
            with m.Elif(last_sub):
                m.d.sync += w.eq(w + 1)

        # LOAD delay line: chunk -> assembly word (-> scratchpad), mem_latency cycles later.
        stage = [dict(valid=Signal(name=f"dl_valid{i}"), pad=Signal(name=f"dl_pad{i}"),
                      flush=Signal(name=f"dl_flush{i}"), dst=Signal.like(dst, name=f"dl_dst{i}"),
                      lane=Signal(lane_bits, name=f"dl_lane{i}"), rot=Signal(lane_bits, name=f"dl_rot{i}"))
                 for i in range(latency)]
        first = dict(valid=step & ~store, pad=~is_data, flush=flush, dst=dst, lane=lane, rot=offset - lane)
        for i, s in enumerate(stage):
            src = first if i == 0 else stage[i - 1]
            m.d.sync += [s[k].eq(src[k]) for k in s]
        out = stage[-1]
        pad_word = Cat([pad_value] * nbus)
        assembly = Signal(bus_bits)                 # the word being filled (other lanes: pad)
        take = Mux(out["pad"], 0, chunk_mask << out["lane"])[:nbus]
        take_bits = byte_mask([take[j] for j in range(nbus)])
        wr_data = Signal(bus_bits)
        m.d.comb += wr_data.eq((rotate_bytes(bus.resp_rdata, out["rot"]) & take_bits) | (assembly & ~take_bits))
        with m.If(out["valid"]):
            m.d.sync += assembly.eq(Mux(out["flush"], pad_word, wr_data))
        wr_en, wr_dst = out["valid"] & out["flush"], out["dst"]
        wpr_bits = (wpr - 1).bit_length()
        m.d.comb += [
            self.asram_w.en.eq(wr_en & (sram == Sram.ASRAM)),
            self.asram_w.addr.eq(wr_dst),
            self.asram_w.data.eq(wr_data),
            self.wsram_w.en.eq(wr_en & (sram == Sram.WSRAM)),
            self.wsram_w.addr.eq(wr_dst),
            self.wsram_w.data.eq(wr_data),
            self.psram_w.en.eq(Mux(wr_en & (sram == Sram.PSRAM),
                                   Const(1, wpr) << wr_dst[:wpr_bits] if wpr > 1 else 1, 0)),
            self.psram_w.addr.eq(wr_dst >> wpr_bits),
            self.psram_w.data.eq(Cat([wr_data] * wpr)),
        ]

        busy = active | st_valid | Cat(*[s["valid"] for s in stage]).any()
        m.d.comb += [self.ctl.busy.eq(busy), self.ctl.ready.eq(~busy)]

        with m.If(self.ctl.start):
            # A DMA_STORE has no pad fields: the command's pad bits are other STORE fields.
            cmd_b0, cmd_a0, cmd_b1, cmd_a1 = (Mux(cmd.store, 0, f) for f in
                                              (cmd.pad_b0, cmd.pad_a0, cmd.pad_b1, cmd.pad_a1))
            words = cmd.len0 + cmd_b0 + cmd_a0
            lines = cmd.len1 + cmd_b1 + cmd_a1
            m.d.sync += [
                store.eq(cmd.store), sram.eq(cmd.sram), pad_value.eq(cmd.pad_value),
                pack.eq(~cmd.store & cmd.pack),
                len1.eq(cmd.len1), len2.eq(cmd.len2), stride1.eq(cmd.stride1), stride2.eq(cmd.stride2),
                pad_b0.eq(cmd_b0), pad_b1.eq(cmd_b1),
                w_end.eq(words), l_end.eq(lines),
                w_hi.eq(cmd_b0 + cmd.len0), l_hi.eq(cmd_b1 + cmd.len1),
                active.eq((words != 0) & (lines != 0) & (cmd.len2 != 0)),
                w.eq(0), l.eq(0), p.eq(0), lane.eq(0), dst.eq(cmd.sram_addr),
                line_base.eq(cmd.ext_addr), plane_base.eq(cmd.ext_addr),
                st_valid.eq(0), assembly.eq(Cat([cmd.pad_value] * nbus)),
                # word mode (elem == 0): one BUS-byte element, stride0 = BUS
                stride0.eq(nbus), chunk.eq(nbus), chunk_mask.eq((1 << nbus) - 1),
            ]
            m.d.sync += [r.eq(cmd.ext_addr) for r in addr_regs]
            if max_chunks > 1:
                m.d.sync += [sub.eq(0), sub_end.eq(0)]
            for e in DMA_ELEM_SIZES:
                c = min(e, nbus)
                with m.If(cmd.elem == e):
                    m.d.sync += [stride0.eq(cmd.stride0), chunk.eq(c), chunk_mask.eq((1 << c) - 1)]
                    if max_chunks > 1:
                        m.d.sync += sub_end.eq(max(1, e // nbus) - 1)
        return m
