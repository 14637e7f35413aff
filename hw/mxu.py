"""Matrix unit: a weight-stationary systolic array executing MATMUL into the accumulators.

Array of ``ROWS x COLS`` processing elements; PE (k, n) holds weight ``W[k][n]`` (int8 or
int4 minus ``w_zp``: 9-bit signed).  Input lane k (int8 or int16 minus ``a_zp``: 17-bit
signed either way, so one multiplier serves every mode) is broadcast along row k; partial
sums move down the columns, one PE row per cycle (one register per PE), so column n's sum
leaves the bottom row ROWS cycles after the vector entered row 0.  Inputs are skewed
(lane k delayed k cycles) so that every row sees its lane when the partial sum arrives;
the sums of all columns leave together and need no de-skew.

Modes (isa/matmul.py; the MATMUL doc says why): an INT16 input vector is two ASRAM rows
read on consecutive cycles (``P = 2``).  Lanes 0 .. ROWS/2-1 come from the first row and
enter the skew chain as usual; lanes ROWS/2 .. ROWS-1 come from the second row one cycle
later and skip the chain's first stage, so the vector still reaches row k at t+2+k (t: its
first read) and the array computes it in one pass; the second cycle is a bubble.  Its
result is two ACC rows: the low word (the same 32-bit add as int32 mode, keeping the
carry) in the vector's own slot, the high 16 bits (sign-extended to 32) in the bubble's
slot one cycle later.  INT4 weights: the front end reads each packed WSRAM row twice
(tile rows k and k+1) and the load picks the nibble half, so the weight wavefront is the
same in every mode.  Every mode bit travels with its data through the pipeline, so
back-to-back MATMULs of different modes stream without a bubble.

Weights are loaded as a wavefront: the front end reads weight row k from WSRAM one cycle
before it reads input row k, and row k of the array switches to the new tile exactly when
the new tile's first vector reaches its multiplier (row k >= 1 multiplies a cycle before its
adder; row 0's weights wait a cycle in a staging row).  Consecutive MATMULs therefore stream back to back
with no bubble and no second weight buffer.

Front end, command taken in cycle c, ``N = n0*n1``, ``R = ROWS``: starts at s = c+1; reads
weight rows at c .. c+R-1 (one cycle ahead of the inputs: rows k >= 1 of the array register
their products, see "the array" below) and input rows at s .. s+P*N-1; it accepts the next command in
its last cycle s + max(P*N, R) - 1 (``ready``).  Pipeline per row read at t: skewed inputs
reach row k at t+2+k; the sum leaves row R-1 at t+R+2, when the ACC row (read at t+R+1
through a port transparent to the write port, so back-to-back updates of one row see each
other) is added (if ``accumulate``) and written.  The unit is busy from s through the last
write at s + P*N + R + 1.  MATMUL with ``N == 0`` does nothing and never makes the unit busy.

``pending`` counts the unfinished MATMULs (ACT's ``mxu_lag``, isa/instructions.py): one more
from s, one fewer from the cycle after a MATMUL's last ACC write (its last row carries a
"last" bit down the metadata pipeline), so ``pending == 0`` exactly when the unit is idle.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, ResetSignal, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import LEN_BITS
from hw.clock_gate import add_load_domain
from hw.decode import fields_layout
from hw.interfaces import UnitCtlSignature
from hw.signals import named

ACC_BITS = 32                # one ACC lane
WIDE_BITS = 48               # an int48 accumulator (two ACC rows)
PRODUCT_BITS = 17 + 9        # (int8/int16 - int16 zero point) x (int8/int4 - int8 zero point)
# Unfinished MATMULs (ACT's mxu_lag, isa/instructions.py): accepted at least max(P*N, R) cycles
# apart, each finishing P*N + R + 2 cycles after it starts, so at most 3 are ever unfinished.
PENDING_BITS = 3
# Gated weight rows per clock domain (simulation builds): each gated domain costs Verilator a
# trigger test every cycle, each ungated row a next-state evaluation; 4 rows a domain measured
# fastest on the 16x16 array (MATMUL-bound program, 1 row: ~820k cycles/s, 4: ~850k, all: ~840k).
WEIGHT_GATE_ROWS = 4


def mxu_cmd_layout():
    """MXU command (issued by the sequencer): MATMUL's fields.  Defined here, beside the unit
    that decodes it, so the sequencer imports the MXU and not the other way round."""
    return fields_layout("MATMUL")


class Mxu(wiring.Component):
    """The unit (module docstring); ``gate_weights``: the weight rows on clocks of their own
    (``WEIGHT_GATE_ROWS`` rows each) that tick only when one of their rows loads (simulation
    builds, hw/clock_gate.py ``add_load_domain``)."""

    def __init__(self, config: NpuConfig, *, gate_weights: bool = False):
        assert config.array_rows >= 2, "the int16 and int4 modes need at least two array rows"
        self.config = config
        self.gate_weights = gate_weights
        bits = 8 * config.bus_bytes
        acc_aw = ceil_log2(config.acc_rows)
        super().__init__({
            "ctl": In(UnitCtlSignature(mxu_cmd_layout())),
            "asram_r": In(ReadPort.Signature(addr_width=ceil_log2(config.asram_rows), shape=bits)),
            "wsram_r": In(ReadPort.Signature(addr_width=ceil_log2(config.wsram_rows), shape=bits)),
            "acc_r": In(ReadPort.Signature(addr_width=acc_aw, shape=ACC_BITS * config.array_cols)),
            "acc_w": In(WritePort.Signature(addr_width=acc_aw, shape=ACC_BITS * config.array_cols)),
            "pending": Out(PENDING_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        rows, cols = cfg.array_rows, cfg.array_cols
        half = rows // 2
        cmd = self.ctl.cmd

        # -- front end -------------------------------------------------------------------
        fe_active = Signal()
        fe_count = Signal(2 * LEN_BITS + 1)
        fe_last = Signal(2 * LEN_BITS + 1)    # max(P*N, R) - 1
        n_rows = Signal(2 * LEN_BITS + 1)     # P*N input rows
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
        wide = Signal()                       # a_type INT16: two rows per vector, int48 results
        w4 = Signal()                         # w_type INT4: packed tile
        second = Signal()                     # reading the second row of an INT16 vector

        in_row = fe_active & (fe_count < n_rows)
        vec_end = in_row & (~wide | second)   # last input row of a vector
        # Weight tile row 0 is read in the command's cycle c, row j+1 in cycle s+j: one cycle
        # ahead of the inputs, so that rows 1.. can register their products (see "the array").
        start_w = self.ctl.start & (cmd.n0 * cmd.n1 != 0)
        wrow = start_w | (fe_active & (fe_count < rows - 1))
        m.d.comb += [
            self.asram_r.addr.eq(a_ptr + second),
            self.wsram_r.addr.eq(Mux(self.ctl.start, cmd.w_addr, w_ptr)),
            self.ctl.ready.eq(~fe_active | (fe_count == fe_last)),
        ]
        with m.If(fe_active):
            m.d.sync += fe_count.eq(fe_count + 1)
            with m.If(~w4 | ~fe_count[0]):    # INT4: each packed row serves two tile rows
                m.d.sync += w_ptr.eq(w_ptr + 1)
            with m.If(fe_count == fe_last):
                m.d.sync += fe_active.eq(0)
        with m.If(in_row):
            m.d.sync += [acc_ptr.eq(acc_ptr + 1), second.eq(wide & ~second)]
        with m.If(vec_end):
            with m.If(i0 == n0 - 1):
                m.d.sync += [i0.eq(0), a_line.eq(a_line + a_stride1), a_ptr.eq(a_line + a_stride1)]
            with m.Else():
                m.d.sync += [i0.eq(i0 + 1), a_ptr.eq(a_ptr + a_stride0)]
        with m.If(self.ctl.start):
            n = cmd.n0 * cmd.n1
            pn = Mux(cmd.a_type, n << 1, n)
            m.d.sync += [
                fe_active.eq(n != 0), fe_count.eq(0), n_rows.eq(pn),
                fe_last.eq(Mux(pn > rows, pn, rows) - 1),
                n0.eq(cmd.n0), i0.eq(0), a_stride0.eq(cmd.a_stride0), a_stride1.eq(cmd.a_stride1),
                a_ptr.eq(cmd.a_addr), a_line.eq(cmd.a_addr), w_ptr.eq(cmd.w_addr + Mux(cmd.w_type, 0, 1)),
                acc_ptr.eq(cmd.acc_addr), accumulate.eq(cmd.accumulate),
                a_zp.eq(cmd.a_zp), w_zp.eq(cmd.w_zp), wide.eq(cmd.a_type), w4.eq(cmd.w_type),
                second.eq(0),
            ]

        # -- weights: row k >= 1 of the tile is written one cycle after its WSRAM read, row 0
        # two cycles after (it was read a cycle earlier than row 1 but is used as before) ----
        a_zp_d = Signal.like(a_zp)
        w_zp_d = Signal.like(w_zp)
        wide_d = Signal()
        second_d = Signal()                   # the ASRAM data is the second row of a vector
        w4_d = Signal()
        wload = Signal()
        wload_row = Signal(range(rows))
        m.d.sync += [a_zp_d.eq(a_zp), wide_d.eq(wide), second_d.eq(in_row & second), wload.eq(wrow),
                     # the row-0 read happens in the command's cycle: take its fields directly
                     w_zp_d.eq(Mux(self.ctl.start, cmd.w_zp, w_zp)), w4_d.eq(Mux(self.ctl.start, cmd.w_type, w4)),
                     wload_row.eq(Mux(self.ctl.start, 0, fe_count + 1))]
        weights = [[Signal(signed(9), name=f"w_{k}_{n}") for n in range(cols)] for k in range(rows)]
        w0_next = [Signal(signed(9), name=f"w0_next_{n}") for n in range(cols)]
        w0_load = Signal()
        wdata = self.wsram_r.data
        # INT4: tile row k is nibbles k*COLS .. of the tile, i.e. half (k & 1) of its packed row.
        nibble = [Mux(wload_row[0], wdata.word_select(cols + n, 4), wdata.word_select(n, 4)).as_signed()
                  for n in range(cols)]
        new_row = [Mux(w4_d, nibble[n], wdata.word_select(n, 8).as_signed()) - w_zp_d for n in range(cols)]
        m.d.sync += w0_load.eq(wload & (wload_row == 0))
        # (registers, source of their new values, load): row 0's staging row, row 0, rows 1 .. R-1
        sources = {"new_row": new_row, "w0_next": w0_next}
        loads = [(w0_next, "new_row", wload & (wload_row == 0)), (weights[0], "w0_next", w0_load)]
        loads += [(weights[k], "new_row", wload & (wload_row == k)) for k in range(1, rows)]
        if not self.gate_weights:
            for regs, source, load in loads:
                with m.If(load):
                    m.d.sync += [r.eq(v) for r, v in zip(regs, sources[source])]
        else:
            # The same registers, in domains of WEIGHT_GATE_ROWS rows clocked only when one of
            # their rows loads or on reset: 256 weights that change once per tile otherwise cost
            # Verilator a next-state evaluation each every cycle (about an eighth of the 16x16
            # model's time).  A row keeps its value on its domain's other rows' loads; the reset,
            # which the domains lack, is in the new values instead (one copy per source).
            rst = ResetSignal("sync")
            cleared = {name: [named(m, Mux(rst, 0, v), f"w_in{i}_{n}", signed(9)) for n, v in enumerate(values)]
                       for i, (name, values) in enumerate(sources.items())}
            for g in range(0, len(loads), WEIGHT_GATE_ROWS):
                members = loads[g:g + WEIGHT_GATE_ROWS]
                add_load_domain(m, f"wrow{g}", Cat(load for _, _, load in members).any() | rst)
                for regs, source, load in members:
                    new = cleared[source]
                    if len(members) > 1:
                        new = [Mux(load | rst, v, r) for r, v in zip(regs, new)]
                    m.d[f"wrow{g}"] += [r.eq(v) for r, v in zip(regs, new)]

        # -- inputs: zero point, then lane k delayed k+1 cycles --------------------------
        # INT16 lane k is halfword k mod R/2 of the vector's first (k < R/2) or second row.
        adata = self.asram_r.data
        lanes = [Mux(wide_d, adata.word_select(k % half, 16).as_signed(), adata.word_select(k, 8).as_signed())
                 - a_zp_d for k in range(rows)]
        # Row 0 multiplies stage 0 (lane 0 delayed one cycle); row k >= 1 multiplies the value
        # its lane's last stage would take next cycle (stage k-1), and registers the product.
        a_row = []
        for k in range(rows):
            stages = [Signal(signed(17), name=f"a_{k}_{j}") for j in range(k)] if k else [Signal(signed(17), name="a_0_0")]
            m.d.sync += stages[0].eq(lanes[k])
            nxt = stages[0]
            for j in range(1, k + 1):
                if j == 1 and k >= half:
                    # the second row arrives a cycle late: it skips stage 0
                    nxt = Mux(second_d, lanes[k], stages[0])
                else:
                    nxt = stages[j - 1]
                if j < k:
                    m.d.sync += stages[j].eq(nxt)
            a_row.append(nxt)

        # -- the array: partial sums move down one row per cycle -------------------------
        # Each PE is one DSP multiply with registered inputs (the lane stage and the weight)
        # and a registered output: row 0's product register is its partial sum; row k >= 1
        # registers its product a cycle early (inputs and weights a cycle early) and adds it
        # to the partial sum arriving from row k-1, so the column sums leave when they did.
        psum_prev = [None] * cols
        for k in range(rows):
            width = min(WIDE_BITS, PRODUCT_BITS + ceil_log2(k + 1))
            row = [Signal(signed(width), name=f"psum_{k}_{n}") for n in range(cols)]
            for n in range(cols):
                product = a_row[k] * weights[k][n]
                if psum_prev[n] is None:
                    m.d.sync += row[n].eq(product)
                else:
                    prod = Signal(signed(PRODUCT_BITS), name=f"prod_{k}_{n}")
                    m.d.sync += [prod.eq(product), row[n].eq(psum_prev[n] + prod)]
            psum_prev = row
        result = psum_prev

        # -- accumulate: metadata follows each row; ACC read at R+1, write at R+2 ---------
        depth = rows + 2
        meta_valid = [Signal(name=f"mv{i}") for i in range(depth)]
        meta_row = [Signal.like(acc_ptr, name=f"mr{i}") for i in range(depth)]
        meta_acc = [Signal(name=f"ma{i}") for i in range(depth)]
        meta_hi = [Signal(name=f"mh{i}") for i in range(depth)]     # the high row of an int48
        meta_last = [Signal(name=f"ml{i}") for i in range(depth)]   # a MATMUL's last row
        m.d.sync += [meta_valid[0].eq(in_row), meta_row[0].eq(acc_ptr), meta_acc[0].eq(accumulate),
                     meta_hi[0].eq(second), meta_last[0].eq(in_row & (fe_count == n_rows - 1))]
        for i in range(1, depth):
            m.d.sync += [meta_valid[i].eq(meta_valid[i - 1]), meta_row[i].eq(meta_row[i - 1]),
                         meta_acc[i].eq(meta_acc[i - 1]), meta_hi[i].eq(meta_hi[i - 1]),
                         meta_last[i].eq(meta_last[i - 1])]
        # Unfinished MATMULs: counted from the cycle after the command (its start s, when the
        # unit turns busy) to the cycle after its last ACC write (when a wait on it ends).
        finished = meta_valid[rows + 1] & meta_last[rows + 1]
        m.d.sync += self.pending.eq(self.pending + start_w - finished)
        old = self.acc_r.data
        use_old = meta_acc[rows + 1]
        words = []
        for n in range(cols):
            old_n = old.word_select(n, ACC_BITS)
            res = Signal(signed(WIDE_BITS), name=f"res_{n}")      # the column sum, sign-extended
            m.d.comb += res.eq(result[n])
            # low word: the int32 sum of int32 mode, and the carry into an int48's high part
            low = Mux(use_old, old_n, 0) + res[:ACC_BITS]
            carry = Signal(name=f"carry_{n}")
            res_high = Signal(WIDE_BITS - ACC_BITS, name=f"res_high_{n}")
            m.d.sync += [carry.eq(low[ACC_BITS]), res_high.eq(res[ACC_BITS:])]
            high = (Mux(use_old, old_n[:WIDE_BITS - ACC_BITS], 0) + res_high + carry)[:WIDE_BITS - ACC_BITS]
            words.append(Mux(meta_hi[rows + 1], high.as_signed(), low[:ACC_BITS]).as_unsigned()[:ACC_BITS])
        m.d.comb += [
            self.acc_r.addr.eq(meta_row[rows]),
            self.acc_w.en.eq(meta_valid[rows + 1]),
            self.acc_w.addr.eq(meta_row[rows + 1]),
            self.acc_w.data.eq(Cat(*words)),
            self.ctl.busy.eq(fe_active | Cat(meta_valid).any()),
        ]
        return m
