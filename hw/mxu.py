"""Matrix unit: a weight-stationary systolic array executing MATMUL into the accumulators.

Array of ``ROWS x COLS`` processing elements; PE (k, n) holds weight ``W[k][n]`` (int8 minus
``w_zp``: 9-bit signed).  Input lane k (int8 minus ``a_zp``: 17-bit signed) is broadcast
along row k; partial sums move down the columns, one PE row per cycle (one register per
PE), so column n's sum leaves the bottom row ROWS cycles after the vector entered row 0.
Inputs are skewed (lane k delayed k cycles) so that every row sees its lane when the
partial sum arrives; the sums of all columns leave together and need no de-skew.

Weights are loaded as a wavefront: the front end reads weight row k from WSRAM in the same
cycle it reads input vector k, and row k of the array switches to the new tile exactly when
the new tile's first vector reaches it.  Consecutive MATMULs therefore stream back to back
with no bubble and no second weight buffer.

Front end, command taken in cycle c, ``N = n0*n1``, ``R = ROWS``: starts at s = c+1; reads
weight rows at s .. s+R-1 and input vectors at s .. s+N-1; it accepts the next command in
its last cycle s + max(N, R) - 1 (``ready``).  Pipeline per vector read at t: skewed inputs
reach row k at t+2+k; the sum leaves row R-1 at t+R+2, when the ACC row (read at t+R+1 through
a port transparent to the write port, so back-to-back updates of one row see each other) is
added (if ``accumulate``) and written.  The unit is busy from s through the last write at
s + N + R + 1.  MATMUL with ``N == 0`` does nothing and never makes the unit busy.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import LEN_BITS
from hw.interfaces import UnitCtlSignature
from hw.sequencer import mxu_cmd_layout

ACC_BITS = 32
PRODUCT_BITS = 17 + 9        # (int8 - int16 zero point) x (int8 - int8 zero point)


class Mxu(wiring.Component):
    def __init__(self, config: NpuConfig):
        self.config = config
        bits = 8 * config.bus_bytes
        acc_aw = ceil_log2(config.acc_rows)
        super().__init__({
            "ctl": In(UnitCtlSignature(mxu_cmd_layout())),
            "asram_r": In(ReadPort.Signature(addr_width=ceil_log2(config.asram_rows), shape=bits)),
            "wsram_r": In(ReadPort.Signature(addr_width=ceil_log2(config.wsram_rows), shape=bits)),
            "acc_r": In(ReadPort.Signature(addr_width=acc_aw, shape=ACC_BITS * config.array_cols)),
            "acc_w": In(WritePort.Signature(addr_width=acc_aw, shape=ACC_BITS * config.array_cols)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        rows, cols = cfg.array_rows, cfg.array_cols
        cmd = self.ctl.cmd

        # -- front end -------------------------------------------------------------------
        fe_active = Signal()
        fe_count = Signal(2 * LEN_BITS)
        fe_last = Signal(2 * LEN_BITS)        # max(N, R) - 1
        n_total = Signal(2 * LEN_BITS)
        n0 = Signal(LEN_BITS)
        i0 = Signal(LEN_BITS)
        a_stride0 = Signal.like(cmd.a_stride0)
        a_stride1 = Signal.like(cmd.a_stride1)
        a_ptr = Signal(len(cmd.a_addr) + 1)
        a_line = Signal(len(cmd.a_addr) + 1)
        w_ptr = Signal(len(cmd.w_addr))
        acc_ptr = Signal(len(cmd.acc_addr))
        accumulate = Signal()
        a_zp = Signal.like(cmd.a_zp)
        w_zp = Signal.like(cmd.w_zp)

        vec = fe_active & (fe_count < n_total)
        wrow = fe_active & (fe_count < rows)
        m.d.comb += [
            self.asram_r.addr.eq(a_ptr),
            self.wsram_r.addr.eq(w_ptr),
            self.ctl.ready.eq(~fe_active | (fe_count == fe_last)),
        ]
        with m.If(fe_active):
            m.d.sync += [fe_count.eq(fe_count + 1), w_ptr.eq(w_ptr + 1)]
            with m.If(fe_count == fe_last):
                m.d.sync += fe_active.eq(0)
        with m.If(vec):
            m.d.sync += acc_ptr.eq(acc_ptr + 1)
            with m.If(i0 == n0 - 1):
                m.d.sync += [i0.eq(0), a_line.eq(a_line + a_stride1), a_ptr.eq(a_line + a_stride1)]
            with m.Else():
                m.d.sync += [i0.eq(i0 + 1), a_ptr.eq(a_ptr + a_stride0)]
        with m.If(self.ctl.start):
            n = cmd.n0 * cmd.n1
            m.d.sync += [
                fe_active.eq(n != 0), fe_count.eq(0), n_total.eq(n),
                fe_last.eq(Mux(n > rows, n, rows) - 1),
                n0.eq(cmd.n0), i0.eq(0), a_stride0.eq(cmd.a_stride0), a_stride1.eq(cmd.a_stride1),
                a_ptr.eq(cmd.a_addr), a_line.eq(cmd.a_addr), w_ptr.eq(cmd.w_addr),
                acc_ptr.eq(cmd.acc_addr), accumulate.eq(cmd.accumulate),
                a_zp.eq(cmd.a_zp), w_zp.eq(cmd.w_zp),
            ]

        # -- weights: row k of the tile is written one cycle after its WSRAM read ---------
        a_zp_d = Signal.like(a_zp)
        w_zp_d = Signal.like(w_zp)
        wload = Signal()
        wload_row = Signal(range(rows))
        m.d.sync += [a_zp_d.eq(a_zp), w_zp_d.eq(w_zp), wload.eq(wrow), wload_row.eq(fe_count)]
        weights = [[Signal(signed(9), name=f"w_{k}_{n}") for n in range(cols)] for k in range(rows)]
        new_row = [self.wsram_r.data.word_select(n, 8).as_signed() - w_zp_d for n in range(cols)]
        for k in range(rows):
            with m.If(wload & (wload_row == k)):
                m.d.sync += [weights[k][n].eq(new_row[n]) for n in range(cols)]

        # -- inputs: zero point, then lane k delayed k+1 cycles --------------------------
        lanes = [self.asram_r.data.word_select(k, 8).as_signed() - a_zp_d for k in range(rows)]
        a_row = []
        for k in range(rows):
            stages = [Signal(signed(17), name=f"a_{k}_{j}") for j in range(k + 1)]
            m.d.sync += stages[0].eq(lanes[k])
            m.d.sync += [stages[j].eq(stages[j - 1]) for j in range(1, k + 1)]
            a_row.append(stages[-1])

        # -- the array: partial sums move down one row per cycle -------------------------
        psum_prev = [None] * cols
        for k in range(rows):
            width = min(ACC_BITS, PRODUCT_BITS + ceil_log2(k + 1))
            row = [Signal(signed(width), name=f"psum_{k}_{n}") for n in range(cols)]
            for n in range(cols):
                product = a_row[k] * weights[k][n]
                m.d.sync += row[n].eq(product if psum_prev[n] is None else psum_prev[n] + product)
            psum_prev = row
        result = psum_prev

        # -- accumulate: metadata follows each vector; ACC read at R+1, write at R+2 ------
        depth = rows + 2
        meta_valid = [Signal(name=f"mv{i}") for i in range(depth)]
        meta_row = [Signal.like(acc_ptr, name=f"mr{i}") for i in range(depth)]
        meta_acc = [Signal(name=f"ma{i}") for i in range(depth)]
        m.d.sync += [meta_valid[0].eq(vec), meta_row[0].eq(acc_ptr), meta_acc[0].eq(accumulate)]
        for i in range(1, depth):
            m.d.sync += [meta_valid[i].eq(meta_valid[i - 1]), meta_row[i].eq(meta_row[i - 1]),
                         meta_acc[i].eq(meta_acc[i - 1])]
        old = self.acc_r.data
        m.d.comb += [
            self.acc_r.addr.eq(meta_row[rows]),
            self.acc_w.en.eq(meta_valid[rows + 1]),
            self.acc_w.addr.eq(meta_row[rows + 1]),
            self.acc_w.data.eq(Cat(
                (Mux(meta_acc[rows + 1], old.word_select(n, ACC_BITS).as_signed(), 0) + result[n])[:ACC_BITS]
                for n in range(cols))),
            self.ctl.busy.eq(fe_active | Cat(meta_valid).any()),
        ]
        return m
