"""TABLE unit: TOSA TABLE on COLS lanes at once (isa/instructions.py TABLE doc).

Storage.  TSRAM is held as COLS identical copies, one Amaranth memory per lane (rows of one
bus word, TSRAM_BYTES/BUS rows), so every lane looks up its own element in the same cycle
with its own read port.  TABLE LOAD writes each ASRAM row it reads into the same row of
every copy.  An INT16 table is stored as pairs (table[i], table[i+1]), so one read gives
both interpolation points; a row holds BUS bytes (BUS int8 entries, or BUS/4 pairs).

Why a TABLE LOAD from ASRAM rather than a DMA straight into TSRAM: the lookups need the
per-lane copies anyway, and a copy from ASRAM (one row per cycle, 2048/BUS cycles for an
int16 table: 128 on the 16x16 machine, what a DMA would take) fills all of them at once;
making TSRAM a DMA target (``sram`` = 3) would also make it a LOOP address space (every
DMA scratchpad is one, with a LOOP increment field), changing LOOP and the DMA for no
gain; PSRAM is too small on small builds (512 bytes on the 4x4) and busy with the vector
unit's parameters.  Staging in ASRAM also lets a program compute a table on chip.

Schedule (isa/vector.py: K = 0, E = 1, ``TABLE_WRITE_LATENCY`` = 5, two cycles less than the vector unit).  A
command taken in cycle c gives output vector v the P = max(R, W) cycles from c+1+v*P; its
R input rows are read in the first R.  For a read in cycle t:

* t+1: the row arrives (a first INT16 ASRAM row is buffered).  At an element's last row
  each lane's table offset and fraction are registered; LOAD registers the row instead.
* t+2: the lanes' table rows are read (lane n: row t_addr + offset_n // BUS) and the entry
  selects registered; LOAD's row moves down its delay line.
* t+3: the table ports hold the rows; each lane's entry (INT8) or pair and fraction
  (INT16) are selected and registered.
* t+4: the lanes interpolate from those registers and the results are registered.
* t+5 .. t+4+W: the writer writes result row wj from those registers; LOAD writes its
  delayed row to every copy.

The registers at t+1, t+3 and t+4 keep a read port's data off the table's address, the
table read off the INT16 interpolation multiply and that multiply off the write port
(before the first and last: 44 MHz placed on the ECP5; docs/hardware.md "Timing").  Busy
from c+1 through the last write ((N-1)*P + R + W + 4 cycles); the unit takes a command only when idle.  It shares the vector unit's sequencer port (hw/top.py): the
sequencer sees one VPU.  Errors are the checker's (hw/table_check.py).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import OPCODE_BITS, TSRAM_BYTES, TableMode, VecMem
from isa.vector import TABLE_WRITE_LATENCY
from hw.decode import instr_layout, opcode
from hw.interfaces import UnitCtlSignature
from hw.sequencer import vpu_cmd_layout
from hw.signals import named

# The pipeline below writes a vector five cycles after its last read (isa/vector.py).
assert TABLE_WRITE_LATENCY == 5, "hw/table.py implements other timing"

PTR_BITS = 18       # row pointers: 16-bit addresses plus stride steps past the last vector


class Table(wiring.Component):
    """Ports: ``ctl`` (command: the instruction word, only TABLE starts it), read ports on
    ASRAM and ACC, write ports on ASRAM and ACC."""

    def __init__(self, config: NpuConfig):
        if config.bus_bytes < 4 or TSRAM_BYTES % config.bus_bytes:
            raise ValueError("TABLE needs bus words of at least one int16 pair")
        self.config = config
        wide = 32 * config.array_cols
        narrow = 8 * config.asram_row_bytes
        super().__init__({
            "ctl": In(UnitCtlSignature(vpu_cmd_layout())),
            "asram_r": In(ReadPort.Signature(addr_width=ceil_log2(config.asram_rows), shape=narrow)),
            "acc_r": In(ReadPort.Signature(addr_width=ceil_log2(config.acc_rows), shape=wide)),
            "asram_w": In(WritePort.Signature(addr_width=ceil_log2(config.asram_rows), shape=narrow)),
            "acc_w": In(WritePort.Signature(addr_width=ceil_log2(config.acc_rows), shape=wide)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        L = cfg.array_cols
        bus = cfg.bus_bytes
        narrow = 8 * bus
        rows = TSRAM_BYTES // bus
        row_shift = ceil_log2(bus)

        # -- command registers ----------------------------------------------------------------
        v = instr_layout("TABLE")(self.ctl.cmd.word)
        start = named(m, self.ctl.start & (self.ctl.cmd.word[:OPCODE_BITS] == opcode("TABLE")), "start")
        mode = Signal(2)
        a_acc = Signal()
        d_acc = Signal()
        n0 = Signal(16)
        n1 = Signal(16)
        a_s0, a_s1, d_s0, d_s1 = (Signal(16, name=n) for n in ("a_s0", "a_s1", "d_s0", "d_s1"))
        t_addr = Signal(len(v.t_addr))
        R = Signal(2)            # input rows per vector
        W = Signal(3)            # result rows per vector
        P = Signal(3)            # cycles per vector: max(R, W)
        cmd_int16 = v.mode == TableMode.INT16
        cmd_R = Mux(cmd_int16 & (v.a_mem == VecMem.ASRAM), 2, 1)
        cmd_W = Mux(cmd_int16 & (v.d_mem == VecMem.ASRAM), 4, 1)
        with m.If(start):
            m.d.sync += [
                mode.eq(v.mode), a_acc.eq(v.a_mem == VecMem.ACC), d_acc.eq(v.d_mem == VecMem.ACC),
                n0.eq(v.n0), n1.eq(v.n1), a_s0.eq(v.a_stride0), a_s1.eq(v.a_stride1),
                d_s0.eq(v.d_stride0), d_s1.eq(v.d_stride1), t_addr.eq(v.t_addr),
                R.eq(cmd_R), W.eq(cmd_W), P.eq(Mux(cmd_W > cmd_R, cmd_W, cmd_R)),
            ]
        is_load = named(m, mode == TableMode.LOAD, "is_load")
        is_int16 = named(m, mode == TableMode.INT16, "is_int16")

        # -- read side: P cycles per vector, the first R read a row --------------------------
        active = Signal()
        j = Signal(3)
        i0 = Signal(16)
        i1 = Signal(16)
        a_vec = Signal(PTR_BITS)
        a_line = Signal(PTR_BITS)
        t_row = Signal(PTR_BITS)        # LOAD: the TSRAM row of the current vector
        reading = named(m, active & (j < R), "reading")
        slot_end = named(m, active & (j == P - 1), "slot_end")
        last_i0 = named(m, i0 == n0 - 1, "last_i0")
        m.d.comb += [
            self.asram_r.addr.eq(a_vec + j), self.asram_r.en.eq(reading & ~a_acc),
            self.acc_r.addr.eq(a_vec), self.acc_r.en.eq(reading & a_acc),
        ]
        with m.If(active):
            m.d.sync += j.eq(j + 1)
        with m.If(slot_end):
            m.d.sync += [j.eq(0), t_row.eq(t_row + 1)]
            with m.If(last_i0 & (i1 == n1 - 1)):
                m.d.sync += active.eq(0)
            with m.Elif(last_i0):
                m.d.sync += [i0.eq(0), i1.eq(i1 + 1), a_line.eq(a_line + a_s1), a_vec.eq(a_line + a_s1)]
            with m.Else():
                m.d.sync += [i0.eq(i0 + 1), a_vec.eq(a_vec + a_s0)]

        # -- t+1: the row arrives; a vector's last row starts its lookups --------------------
        d_valid = Signal()
        d_last = Signal()
        d_t_row = Signal.like(t_row)
        m.d.sync += [d_valid.eq(reading), d_last.eq(j == R - 1), d_t_row.eq(t_row)]
        first = Signal(narrow)
        with m.If(d_valid & ~d_last):
            m.d.sync += first.eq(self.asram_r.data)
        final = named(m, d_valid & d_last, "final")
        row_in = self.asram_r.data
        acc_in = self.acc_r.data

        copies = []
        for n in range(L):
            mem = memory.Memory(shape=narrow, depth=rows, init=[])
            m.submodules[f"tsram{n}"] = mem
            copies.append((mem.write_port(), mem.read_port()))

        # t+1: offsets and fractions registered; t+2: table rows read, entry selects registered
        e_final = Signal()
        m.d.sync += e_final.eq(final)
        sel_bits = row_shift
        e_off = [Signal(11, name=f"e_off{n}") for n in range(L)]
        e_frac = [Signal(7, name=f"e_frac{n}") for n in range(L)]
        frac = [Signal(7, name=f"frac{n}") for n in range(L)]
        sel = [Signal(sel_bits, name=f"sel{n}") for n in range(L)]
        for n, (_, rport) in enumerate(copies):
            x8 = Mux(a_acc, acc_in.word_select(n, 32)[:8], row_in.word_select(n, 8))
            x16 = Mux(a_acc, acc_in.word_select(n, 32)[:16], Cat(first, row_in).word_select(n, 16))
            # byte offset in the table: x + 128 (INT8), 4 * ((x + 32768) >> 7) (INT16)
            off8 = x8 ^ 0x80
            off16 = Cat(0, 0, (x16 ^ 0x8000)[7:])
            off = named(m, Mux(is_int16, off16, off8), f"off{n}", 11)
            with m.If(final):
                m.d.sync += [e_off[n].eq(off), e_frac[n].eq(x16[:7])]
            m.d.comb += [rport.addr.eq(t_addr + (e_off[n] >> row_shift)), rport.en.eq(e_final & ~is_load)]
            with m.If(e_final):
                m.d.sync += [sel[n].eq(e_off[n][:sel_bits]), frac[n].eq(e_frac[n])]

        # LOAD: the row and its TSRAM row through a delay line as long as a lookup's
        # (P = 1, so a new row can arrive every cycle)
        delay = 4                       # a lookup's registers: t+1 .. t+4
        load_data = [Signal(narrow, name=f"load_data{s}") for s in range(delay)]
        load_row = [Signal.like(t_row, name=f"load_row{s}") for s in range(delay)]
        with m.If(final & is_load):
            m.d.sync += [load_data[0].eq(row_in), load_row[0].eq(d_t_row)]
        m.d.sync += [load_data[s + 1].eq(load_data[s]) for s in range(delay - 1)]
        m.d.sync += [load_row[s + 1].eq(load_row[s]) for s in range(delay - 1)]

        # -- t+3: the entries registered; t+4: results registered; the writer: t+5 .. t+4+W -----
        x_valid = Signal()
        q_valid = Signal()
        m.d.sync += [x_valid.eq(e_final), q_valid.eq(x_valid)]
        w_active = Signal()
        wj = Signal(2)
        d_vec = Signal(PTR_BITS)
        d_line = Signal(PTR_BITS)
        di0 = Signal(16)
        with m.If(w_active):
            with m.If(wj == W - 1):
                m.d.sync += [w_active.eq(0), wj.eq(0)]
                with m.If(di0 == n0 - 1):
                    m.d.sync += [di0.eq(0), d_line.eq(d_line + d_s1), d_vec.eq(d_line + d_s1)]
                with m.Else():
                    m.d.sync += [di0.eq(di0 + 1), d_vec.eq(d_vec + d_s0)]
            with m.Else():
                m.d.sync += wj.eq(wj + 1)
        with m.If(q_valid):
            m.d.sync += [w_active.eq(1), wj.eq(0)]

        out = []
        for n, (wport, rport) in enumerate(copies):
            m.d.comb += [wport.addr.eq(load_row[-1]), wport.data.eq(load_data[-1]),
                         wport.en.eq(w_active & is_load)]
            # The selected entries registered (a block RAM's output register), so that the
            # interpolation's multiply starts at a register, not at the table read.
            pair = rport.data.word_select(sel[n][2:], 32) if bus > 4 else rport.data
            entry8 = Signal(signed(8), name=f"q_entry{n}")
            base = Signal(signed(16), name=f"q_base{n}")
            nxt = Signal(signed(16), name=f"q_next{n}")
            q_frac = Signal(7, name=f"q_frac{n}")
            with m.If(x_valid):
                m.d.sync += [entry8.eq(rport.data.word_select(sel[n], 8)), base.eq(pair[:16]),
                             nxt.eq(pair[16:]), q_frac.eq(frac[n])]
            interp = (base << 7) + (nxt - base) * q_frac      # exact: 25 bits signed
            y = Signal(signed(32), name=f"y{n}")
            with m.If(q_valid):
                m.d.sync += y.eq(Mux(is_int16, interp, entry8))
            out.append(y)
        flat = Cat(out)
        row8 = Cat(y[:8] for y in out)
        waddr = named(m, d_vec + wj, "waddr")
        writes = named(m, w_active & ~is_load, "writes")
        m.d.comb += [
            self.asram_w.en.eq(writes & ~d_acc),
            self.asram_w.addr.eq(waddr),
            self.asram_w.data.eq(Mux(is_int16, flat.word_select(wj, narrow), row8)),
            self.acc_w.en.eq(writes & d_acc),
            self.acc_w.addr.eq(waddr),
            self.acc_w.data.eq(flat),
        ]

        busy = named(m, active | d_valid | e_final | x_valid | q_valid | w_active, "busy")
        m.d.comb += [self.ctl.busy.eq(busy), self.ctl.ready.eq(~busy)]

        with m.If(start):
            m.d.sync += [
                active.eq((v.n0 != 0) & (v.n1 != 0)), j.eq(0), i0.eq(0), i1.eq(0),
                a_vec.eq(v.a_addr), a_line.eq(v.a_addr), t_row.eq(v.t_addr),
                di0.eq(0), d_vec.eq(v.d_addr), d_line.eq(v.d_addr),
            ]
        return m
