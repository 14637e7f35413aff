"""Vector unit: ACT (bias, RESCALE, output zero point, clamp, narrow to int8), COLS lanes.

Command taken in cycle c with ``count > 0``: PSRAM parameter rows (bias, multiplier, shift)
are read at c+1, c+2, c+3; ACC rows at c+4 .. c+3+count, one per cycle.  Each row goes
through two stages (bias add and 32x32 multiply; rounding, shift, zero point, clamp) and is
written to ASRAM two cycles after its read, so the unit is busy for ``count + 5`` cycles.
ACT with ``count == 0`` does nothing and never makes the unit busy.  The unit takes a new
command only when idle.

Per lane, exactly as the ACT doc::

    v = int32(acc + bias); m = scale32 ? mul : int16(mul); sh = shift & 63
    rnd = sh > 0 ? 1 << (sh-1) : 0   (+-2**30 if double_round and scale32 and sh > 31)
    s = int32((int64(v)*m + rnd) >> sh);  out = int8(min(max(s + out_zp, lo), hi))
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from hw.interfaces import UnitCtlSignature
from hw.sequencer import vpu_cmd_layout

LANE_BITS = 32
PARAM_ROWS = 3          # bias, multiplier, shift


class Vpu(wiring.Component):
    def __init__(self, config: NpuConfig):
        self.config = config
        wide = LANE_BITS * config.array_cols
        super().__init__({
            "ctl": In(UnitCtlSignature(vpu_cmd_layout())),
            "acc_r": In(ReadPort.Signature(addr_width=ceil_log2(config.acc_rows), shape=wide)),
            "psram_r": In(ReadPort.Signature(addr_width=ceil_log2(config.psram_rows), shape=wide)),
            "asram_w": In(WritePort.Signature(addr_width=ceil_log2(config.asram_rows),
                                              shape=8 * config.asram_row_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        cols = cfg.array_cols
        cmd = self.ctl.cmd

        # Command registers.
        param_ptr = Signal.like(cmd.param_addr)
        rd_ptr = Signal.like(cmd.acc_addr)
        wr_ptr = Signal.like(cmd.dst_addr)
        rows_left = Signal.like(cmd.count)
        out_zp = Signal.like(cmd.out_zp)
        clamp_min = Signal.like(cmd.clamp_min)
        clamp_max = Signal.like(cmd.clamp_max)
        scale32 = Signal()
        double_round = Signal()

        active = Signal()
        phase = Signal(range(PARAM_ROWS + 1))     # 0..2: parameter reads, 3: ACC rows
        param_sel = Signal(range(PARAM_ROWS + 1))  # parameter row arriving this cycle (3: none)
        r_valid = Signal()                         # acc_r.data holds a row this cycle
        s_valid = Signal()                         # stage-2 registers hold a row

        bias = [Signal(signed(LANE_BITS), name=f"bias{n}") for n in range(cols)]
        mul = [Signal(signed(LANE_BITS), name=f"mul{n}") for n in range(cols)]
        shift = [Signal(6, name=f"shift{n}") for n in range(cols)]

        reading_params = active & (phase < PARAM_ROWS)
        reading_rows = active & (phase == PARAM_ROWS)
        m.d.comb += [
            self.psram_r.addr.eq(param_ptr),
            self.acc_r.addr.eq(rd_ptr),
        ]
        m.d.sync += [param_sel.eq(Mux(reading_params, phase, PARAM_ROWS)), r_valid.eq(reading_rows)]
        with m.If(reading_params):
            m.d.sync += [phase.eq(phase + 1), param_ptr.eq(param_ptr + 1)]
        with m.If(reading_rows):
            m.d.sync += [rd_ptr.eq(rd_ptr + 1), rows_left.eq(rows_left - 1)]
            with m.If(rows_left == 1):
                m.d.sync += active.eq(0)

        def lane(value, n):
            return value.word_select(n, LANE_BITS)

        for sel, regs in enumerate((bias, mul, shift)):
            with m.If(param_sel == sel):
                m.d.sync += [regs[n].eq(lane(self.psram_r.data, n)) for n in range(cols)]

        # Stage 1: bias add (wrapping) and the 32 x 32 -> 64 multiply.
        prod = [Signal(signed(64), name=f"prod{n}") for n in range(cols)]
        v_neg = [Signal(name=f"vneg{n}") for n in range(cols)]
        for n in range(cols):
            v = (lane(self.acc_r.data, n).as_signed() + bias[n])[:LANE_BITS].as_signed()
            mult = Mux(scale32, mul[n], mul[n][:16].as_signed())
            m.d.sync += [prod[n].eq(v * mult), v_neg[n].eq(v[-1])]
        m.d.sync += s_valid.eq(r_valid)

        # Stage 2: rounding, arithmetic shift, zero point, clamp, int8.
        out = []
        for n in range(cols):
            sh = shift[n]
            rnd = (Const(1, 1) << sh) >> 1          # 1 << (sh-1), or 0 when sh == 0
            extra = Mux(double_round & scale32 & (sh > 31), Mux(v_neg[n], -(1 << 30), 1 << 30), 0)
            total = (prod[n] + rnd + extra)[:64].as_signed()
            s = (total >> sh)[:LANE_BITS].as_signed()
            y = s + out_zp
            y = Mux(y < clamp_min, clamp_min, y)
            y = Mux(y > clamp_max, clamp_max, y)
            out.append(y[:8])
        m.d.comb += [
            self.asram_w.en.eq(s_valid),
            self.asram_w.addr.eq(wr_ptr),
            self.asram_w.data.eq(Cat(out)),
        ]
        with m.If(s_valid):
            m.d.sync += wr_ptr.eq(wr_ptr + 1)

        m.d.comb += [
            self.ctl.busy.eq(active | r_valid | s_valid),
            self.ctl.ready.eq(~(active | r_valid | s_valid)),
        ]
        with m.If(self.ctl.start):
            m.d.sync += [
                active.eq(cmd.count != 0), phase.eq(0),
                param_ptr.eq(cmd.param_addr), rd_ptr.eq(cmd.acc_addr), wr_ptr.eq(cmd.dst_addr),
                rows_left.eq(cmd.count), out_zp.eq(cmd.out_zp),
                clamp_min.eq(cmd.clamp_min), clamp_max.eq(cmd.clamp_max),
                scale32.eq(cmd.scale32), double_round.eq(cmd.double_round),
            ]
        return m
