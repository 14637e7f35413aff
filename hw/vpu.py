"""Vector unit: ACT, VRESCALE, VALU, VPOOL and VDWCONV on COLS lanes, one row per cycle per port.

The unit takes the whole instruction word (IR holds effective addresses) and runs the
schedule of isa/vector.py: ``K`` parameter rows (ACT and VDWCONV: bias, multiplier, shift;
VRESCALE: multiplier, shift) through operand a's PSRAM port, then ``P`` cycles per output vector,
the first ``E*R`` of which read its window elements (``R`` rows each; operand k reads its
``rows_k`` rows in the first ``rows_k`` cycles of each element).

Datapath, for a read in cycle t (``WRITE_LATENCY`` = 7 in isa/vector.py):

* t+1: the read ports hold the row; it is registered as it comes (Q: per operand the ASRAM
  row and the wide ACC or PSRAM word, the wide ports' mux in front), so that the route
  from a block RAM's output, far from the unit on an FPGA, ends in a register (it was
  14.4 ns of the 4x4 NPU's 23.7 ns worst path on the ECP5, ACC -> lane decode -> the bias
  addition -> E: docs/fpga.md).
* t+2: Q holds the row.  Rows before an operand's last are kept in its buffer; when an
  element's last row arrives its lanes are decoded (hw/vpu_lanes.py: type, memory, lane
  broadcast) from the buffer plus Q and registered (E), with operand a plus ACT's bias or
  minus VRESCALE's input zero point.
* t+3: stage S0 computes the element from E: the scaling multiply of ACT/VRESCALE,
  VALU's operation (or its product, for MUL and LOGICAL_LEFT_SHIFT: one multiplier per
  lane, hw/vpu_lanes.py ``lane_product``), or VPOOL's running reduction.  At the last
  element of a vector S0's result is loaded into X0: the multiplier's four partial
  products (the DSP blocks' output registers) and the other operations' result (a
  vector's window reduction goes into its accumulator each element).  VDWCONV is VPOOL's
  SUM with each element's ``value - in_zp`` multiplied by operand b's lane (its weight
  row, read beside the input row) on the lane's multiplier, starting at the bias: the
  product goes into a register (D) and is added to the sum a cycle later; its stage S1,
  the cycle after the last addition, multiplies the sum by the scale into X0 (two cycles
  per vector in which no element is read: ``P = E*R + 2``), so its writes come two
  cycles later.
* t+4: the adder tree sums X0's partial products into X1 (or X1 takes X0's other result).
* t+5, t+6: stage S2a, the rounding shift of X1 into register Y in two steps: the
  rounding addition (``x + 2**(sh-1)``, double rounding's ``+-2**30``) into register T,
  then T's shift into Y.  It also does VALU's shifts (ARITHMETIC_RIGHT_SHIFT with its
  round flag, LOGICAL_RIGHT_SHIFT: by the lane's b & 31); the other VALU ops' results
  pass.
* t+7 .. t+6+W: stage S2b (comb from Y: zero point, type clip, clamp, output type) feeds
  the writer, one row per cycle.  VALU's NEGATE clips to T and CLAMP clamps to [imm0,
  imm1] here (S0 leaves them out, hw/vpu_lanes.py ``valu_result``): the command sets the
  type clip and the clamp for them (hw/vpu_config.py), so one clamp serves every
  instruction (S2a had a second one; without it the 4x4 unit has 487 of its 13,943 ECP5
  LUTs fewer).  X1 changes once per vector, at least P >= W cycles apart, T one cycle
  after it and Y one after T, so the rows of one vector see one Y.

Why the registers sit there: before them a read port's data went through the lane
decode, a 50-bit add, a 48x16 or 32x32 multiply, a 64-bit rounding add and shift, the
zero point and four clamps in one cycle (17 MHz placed on the ECP5, the slowest unit);
E cuts the memory read and decode off the multiply, Y cuts the multiply and rounding
shift off the clamps, X0 the multiplies off the adder tree, T the rounding addition off
the shift (docs/hardware.md "Timing").

X0, X1 (with S2a's settings), T and Y load once per output vector and are reset-less
registers with an enable; in simulation builds (``gate_stages``) each is a load domain
(hw/clock_gate.py) clocked only when it loads, and each step of S2a reads only the domain
before it, so Verilator evaluates the rounding shift once per vector rather than every cycle
(PERFORMANCE.md, "RTL simulation speed").

The unit is busy from the cycle after the command through the last write and takes the
next command only when idle (so it never overlaps its own instructions).  Per lane, the
arithmetic is exactly the docs' (isa/instructions.py): wrapping where they wrap, exact
where they say exact.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import OPCODE_BITS, PoolMode, ValuOp, VecMem
from isa.vector import EXTRA_LATENCY, MAX_ROWS, PARAM_ROWS, WRITE_LATENCY
from hw.clock_gate import load_registers
from hw.decode import instr_layout, opcode
from hw.interfaces import UnitCtlSignature
from hw.sequencer import vpu_cmd_layout
from hw.signals import delayed, named
from hw.vpu_config import VpuConfig, command_fields, derive
from hw.vpu_lanes import decode_lanes, lane_product, valu_result

# The pipeline below is built for these schedule rules (isa/vector.py): a read's first write
# seven cycles later (Q, E, S0, X0, X1, T, Y), and VDWCONV's two cycles more per vector (the
# last product's addition, then S1).
assert WRITE_LATENCY == 7 and EXTRA_LATENCY["VDWCONV"] == 2, "hw/vpu.py implements other timing"

LANE_BITS = 32
OPERANDS = ("a", "b", "c")


class Vpu(wiring.Component):
    """Ports: ``ctl`` (command: the instruction word), per operand k in a, b, c one read
    port on each of ASRAM (``asram_rk``), ACC (``acc_rk``) and PSRAM (``psram_rk``;
    ``psram_ra`` also reads the parameter rows), and write ports on ASRAM and ACC."""

    def __init__(self, config: NpuConfig, *, gate_stages: bool = False):
        self.config = config
        self.gate_stages = gate_stages
        wide = LANE_BITS * config.array_cols
        narrow = 8 * config.asram_row_bytes
        members = {"ctl": In(UnitCtlSignature(vpu_cmd_layout()))}
        for k in OPERANDS:
            members[f"asram_r{k}"] = In(ReadPort.Signature(addr_width=ceil_log2(config.asram_rows), shape=narrow))
            members[f"acc_r{k}"] = In(ReadPort.Signature(addr_width=ceil_log2(config.acc_rows), shape=wide))
            members[f"psram_r{k}"] = In(ReadPort.Signature(addr_width=ceil_log2(config.psram_rows), shape=wide))
        members["asram_w"] = In(WritePort.Signature(addr_width=ceil_log2(config.asram_rows), shape=narrow))
        members["acc_w"] = In(WritePort.Signature(addr_width=ceil_log2(config.acc_rows), shape=wide))
        super().__init__(members)

    def read_ports(self, memory: str) -> list:
        """The read ports on ``memory`` ("asram", "acc", "psram"), for hw/top.py."""
        return [getattr(self, f"{memory}_r{k}") for k in OPERANDS]

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        L = cfg.array_cols
        narrow = 8 * cfg.asram_row_bytes

        # -- command registers --------------------------------------------------------------
        c = VpuConfig(cfg)                      # registers of the running command
        cmd = VpuConfig(cfg, prefix="cmd")      # the same, decoded from the command word
        start = self.ctl.start
        word = self.ctl.cmd.word
        with m.Switch(word[:OPCODE_BITS]):
            for name in ("ACT", "VRESCALE", "VALU", "VPOOL", "VDWCONV"):
                with m.Case(opcode(name)):
                    fields = command_fields(name, instr_layout(name)(word))
                    m.d.comb += [cmd[k].eq(v) for k, v in fields.items()]
        derive(m, cmd)
        with m.If(start):
            m.d.sync += [c[k].eq(cmd[k]) for k in c.names]

        # -- read side: parameter rows, then slots of P cycles ------------------------------
        active = Signal()
        ph = Signal(2)                  # parameter row being read (3: data phase)
        param_ptr = Signal.like(c.param_addr)
        j = Signal(c.p_bits)            # cycle within the slot
        # The slot's reading cycles E*R and length P = max(E*R, W): a multiply after the
        # command's decode, so formed from the command registers and registered, valid from
        # the second cycle after the start.  Only the first data cycle comes before that
        # (VALU, VPOOL: no parameter rows): there j = 0 < E*R, and the slot ends iff P == 1,
        # a flag decoded with the command (hw/vpu_config.py).
        er = Signal(c.p_bits)
        slot_len = Signal(c.p_bits)
        fresh = Signal()                # the cycle after the start
        er_next = named(m, (c.k0 * c.k1) * c.R, "er_next", c.p_bits)
        # (VDWCONV: E*R + X, X = 2: the last product's addition into the sum, then S1, the
        # cycle in which the lane's multiplier scales the sum)
        dw_x = EXTRA_LATENCY["VDWCONV"]
        m.d.sync += [er.eq(er_next), slot_len.eq(Mux(c.dw, er_next + dw_x, Mux(er_next > c.W, er_next, c.W))),
                     fresh.eq(start)]
        r = Signal(range(MAX_ROWS))     # row within the element
        w0 = Signal(8)
        w1 = Signal(8)
        i0 = Signal(16)
        i1 = Signal(16)
        aw = c.ptr_bits
        vec = {k: Signal(aw, name=f"{k}_vec") for k in OPERANDS}      # operand's vector (i1, i0)
        line = {k: Signal(aw, name=f"{k}_line") for k in OPERANDS}    # operand's line (i1)
        wline = Signal(aw)              # a: window line (w1)
        elem = Signal(aw)               # a: window element (w1, w0)
        b_elem = Signal(aw)             # b of VDWCONV: the element's weight row (b_addr + element)

        params = named(m, active & (ph != 3), "params")
        data = named(m, active & (ph == 3), "data")
        reading = named(m, data & (fresh | (j < er)), "reading")
        last_row = named(m, r == c.R - 1, "last_row")
        last_w0 = named(m, w0 == c.k0 - 1, "last_w0")
        last_w1 = named(m, w1 == c.k1 - 1, "last_w1")
        slot_end = named(m, data & Mux(fresh, c.p_is_1, j == slot_len - 1), "slot_end")
        last_i0 = named(m, i0 == c.n0 - 1, "last_i0")
        last_vec = named(m, last_i0 & (i1 == c.n1 - 1), "last_vec")

        ptr = {"a": elem, "b": Mux(c.dw, b_elem, vec["b"]), "c": vec["c"]}
        rd = {}
        for k in OPERANDS:
            rd[k] = named(m, reading & (r < c[f"{k}_rows"]), f"rd_{k}")
            addr = named(m, ptr[k] + r, f"addr_{k}")
            mem = c[f"{k}_mem"]
            asram_p, acc_p, psram_p = (getattr(self, f"{n}_r{k}") for n in ("asram", "acc", "psram"))
            m.d.comb += [
                asram_p.addr.eq(addr), asram_p.en.eq(rd[k] & (mem == VecMem.ASRAM)),
                acc_p.addr.eq(addr), acc_p.en.eq(rd[k] & (mem == VecMem.ACC)),
            ]
            if k == "a":                # parameter rows come through operand a's PSRAM port
                m.d.comb += [psram_p.addr.eq(Mux(params, param_ptr, addr)),
                             psram_p.en.eq(params | (rd[k] & (mem == VecMem.PSRAM)))]
            else:
                m.d.comb += [psram_p.addr.eq(addr), psram_p.en.eq(rd[k] & (mem == VecMem.PSRAM))]
        with m.If(params):
            m.d.sync += [ph.eq(ph + 1), param_ptr.eq(param_ptr + 1)]

        with m.If(reading):
            with m.If(last_row):
                m.d.sync += r.eq(0)
                with m.If(last_w0):
                    m.d.sync += w0.eq(0)
                    with m.If(~last_w1):
                        nxt = named(m, wline + c.ws1, "next_wline")
                        m.d.sync += [w1.eq(w1 + 1), wline.eq(nxt), elem.eq(nxt)]
                with m.Else():
                    m.d.sync += [w0.eq(w0 + 1), elem.eq(elem + c.ws0)]
            with m.Else():
                m.d.sync += r.eq(r + 1)
        with m.If(reading & last_row):
            m.d.sync += b_elem.eq(b_elem + 1)
        with m.If(data):
            m.d.sync += j.eq(j + 1)
        with m.If(slot_end):
            # (VDWCONV's b strides are 0: every vector's weights start at b_addr)
            m.d.sync += [j.eq(0), r.eq(0), w0.eq(0), w1.eq(0), b_elem.eq(c.b_addr)]
            with m.If(last_vec):
                m.d.sync += active.eq(0)
            with m.Elif(last_i0):
                m.d.sync += [i0.eq(0), i1.eq(i1 + 1)]
                for k in OPERANDS:
                    nxt = named(m, line[k] + c[f"{k}_s1"], f"next_line_{k}")
                    m.d.sync += [line[k].eq(nxt), vec[k].eq(nxt)]
                    if k == "a":
                        m.d.sync += [wline.eq(nxt), elem.eq(nxt)]
            with m.Else():
                m.d.sync += i0.eq(i0 + 1)
                for k in OPERANDS:
                    nxt = named(m, vec[k] + c[f"{k}_s0"], f"next_vec_{k}")
                    m.d.sync += vec[k].eq(nxt)
                    if k == "a":
                        m.d.sync += [wline.eq(nxt), elem.eq(nxt)]

        # -- t+1: rows arrive on the read ports and are registered (Q) -----------------------
        # (the read cycle's controls follow the row: registered into Q's, then into D's)
        read_ctl = dict(valid=reading, row=r, last_row=last_row, first=(w0 == 0) & (w1 == 0),
                        last_elem=last_w0 & last_w1, **{f"rd_{k}": rd[k] for k in OPERANDS})
        q = delayed(m, read_ctl, "q")
        q_narrow, q_wide = {}, {}
        for k in OPERANDS:
            q_narrow[k] = Signal(narrow, name=f"q_{k}_row", reset_less=True)
            q_wide[k] = Signal(LANE_BITS * L, name=f"q_{k}_word", reset_less=True)
            acc_data, psram_data = getattr(self, f"acc_r{k}").data, getattr(self, f"psram_r{k}").data
            with m.If(q[f"rd_{k}"]):
                m.d.sync += [q_narrow[k].eq(getattr(self, f"asram_r{k}").data),
                             q_wide[k].eq(Mux(c[f"{k}_mem"] == VecMem.ACC, acc_data, psram_data))]

        # -- t+2: Q holds the rows ---------------------------------------------------------
        d = delayed(m, q, "d")
        d_valid, d_row, d_last_row, d_first, d_last_elem = (
            d[k] for k in ("valid", "row", "last_row", "first", "last_elem"))
        d_rd = {k: d[f"rd_{k}"] for k in OPERANDS}
        d_param = Signal(2)
        d_param_valid = Signal()
        m.d.sync += [d_param.eq(ph), d_param_valid.eq(params)]

        # parameter registers (per lane; per-tensor scaling copies lane 0)
        bias = [Signal(signed(32), name=f"bias{n}") for n in range(L)]
        mul = [Signal(signed(32), name=f"mul{n}") for n in range(L)]
        shift = [Signal(6, name=f"shift{n}") for n in range(L)]
        pdata = self.psram_ra.data
        with m.If(d_param_valid):
            for sel, regs in enumerate((bias, mul, shift)):
                with m.If(d_param == sel):
                    for n in range(L):
                        lane = Mux(c.per_channel, pdata.word_select(n, 32), pdata.word_select(0, 32))
                        m.d.sync += regs[n].eq(lane[:len(regs[n])])

        # operand buffers: rows before an operand's last one; at its last row (``arrives``)
        # the element's lanes are decoded and registered (E)
        arrives = named(m, d_valid & d_last_row, "elem_arrives")
        values = {}
        for k in OPERANDS:
            segs = MAX_ROWS - 1 if k == "a" else 3
            buf = [Signal(narrow, name=f"{k}_buf{s}") for s in range(segs)]
            port_n, word = q_narrow[k], q_wide[k]
            with m.If(d_rd[k] & (d_row < c[f"{k}_rows"] - 1)):
                with m.Switch(c[f"{k}_mem"]):
                    with m.Case(VecMem.ASRAM):
                        for s in range(segs):
                            with m.If(d_row == s):
                                m.d.sync += buf[s].eq(port_n)
                    if k == "a":        # INT48 from ACC/PSRAM: the first row (32 bits a lane)
                        with m.Default():
                            m.d.sync += Cat(*buf[:4]).eq(word)
            decoded = decode_lanes(m, c, k, buf, port_n, word, L)
            values[k] = [Signal.like(v, name=f"e_{k}{n}") for n, v in enumerate(decoded)]
            with m.If(arrives):
                m.d.sync += [e.eq(v) for e, v in zip(values[k], decoded)]
            if k == "a":
                # ACT's bias and VRESCALE's input zero point are added here, before E, so that
                # S0 starts at the multiply (S0 was E -> 50-bit add -> multiply -> X1).
                e_pre = [Signal(signed(50), name=f"e_pre{n}") for n in range(L)]
                with m.If(arrives):
                    m.d.sync += [e_pre[n].eq(Mux(c.is_act, v + bias[n], v - c.in_zp))
                                 for n, v in enumerate(decoded)]

        # -- t+3, S0: an element completes, from the registered lanes (E) ----------------------
        e_valid = Signal()
        elem_done = Signal()            # E holds a complete element
        e_first = Signal()
        e_last_elem = Signal()
        m.d.sync += [e_valid.eq(d_valid), elem_done.eq(arrives),
                     e_first.eq(d_first), e_last_elem.eq(d_last_elem)]
        final = named(m, elem_done & e_last_elem, "final")
        # VDWCONV's elements: S0 multiplies (value - in_zp) by the weight into the product
        # register D (the DSP block's output register), and the cycle after, D is added to
        # the window's sum (the pool register), so that no cycle holds both the multiply and
        # the 32-bit addition (the 4x4 NPU's critical path on the ECP5 was E -> operand
        # muxes -> multiplier -> sum, docs/hardware.md "Timing").  S1, the cycle after the
        # last addition, multiplies the sum by the scale on the same multiplier into X0, as
        # ACT's S0 scales its input.
        dw_add = Signal(name="dw_add")          # D holds an element's product
        dw_first = Signal(name="dw_first")
        dw_last = Signal(name="dw_last")
        m.d.sync += [dw_add.eq(elem_done & c.dw), dw_first.eq(e_first), dw_last.eq(final & c.dw)]
        s1 = Signal(name="dw_s1")
        m.d.sync += s1.eq(dw_last)
        # X0, X1, T and Y (below) are data registers that load once per vector: reset-less, loaded
        # with an enable, in simulation builds in a domain clocked only when they load
        # (hw/clock_gate.py ``load_registers``), so their next-state logic (the multiply, the rounding shift) costs
        # Verilator nothing in the other cycles of a vector
        x1 = [Signal(signed(64), name=f"x1_{n}", reset_less=True) for n in range(L)]
        x1_neg = [Signal(name=f"x1_neg{n}", reset_less=True) for n in range(L)]
        pool = [Signal(signed(32), name=f"pool{n}") for n in range(L)]
        alu = valu_result(m, c, values, L)
        # -- t+3 into X0, t+4 into X1 --------------------------------------------------------
        # X0, between S0 and X1: the multiplier's partial products (the DSP blocks' output
        # registers) and S0's other results, loaded when S0 finishes a vector; X1 takes the
        # adder tree's sum of the partial products, or the other result, a cycle later.
        x0_loads = named(m, (final & ~c.dw) | s1, "x0_loads")    # an element's result, or S1's
        x0_load = load_registers(m, "vpu_x0", x0_loads, gate=self.gate_stages)
        x0_valid = Signal()
        m.d.sync += x0_valid.eq(x0_loads)
        x1_loads = named(m, x0_valid, "x1_loads")
        x1_load = load_registers(m, "vpu_x1", x1_loads, gate=self.gate_stages)
        x0_prod = Signal(name="x0_prod", reset_less=True)        # X1 takes the product
        x0_other = [Signal(signed(36), name=f"x0_other{n}", reset_less=True) for n in range(L)]
        x0_neg = [Signal(name=f"x0_neg{n}", reset_less=True) for n in range(L)]
        x0_sh = [Signal(6, name=f"x0_sh{n}", reset_less=True) for n in range(L)]
        staged = []                                                # X0's partial products

        def stage(value, name):
            reg = Signal(signed(len(value)), name=name, reset_less=True)
            staged.append(reg.eq(value))
            return reg
        pool_max = named(m, c.pool_mode == PoolMode.MAX, "pool_max")
        # The multiplier's mode, decoded with the command and registered beside its settings,
        # so that the multiply's operand muxes start at a flag register, not at the op's decode.
        wide = Signal(name="wide_product")                              # 48 x 16 bits
        lsl = Signal(name="valu_lsl")
        use_product = Signal(name="use_product")
        cmd_lsl = cmd.is_valu & (cmd.op == ValuOp.LOGICAL_LEFT_SHIFT)
        with m.If(start):
            m.d.sync += [wide.eq(cmd.is_rescale & ~cmd.scale32), lsl.eq(cmd_lsl),
                         use_product.eq(cmd.rounding | cmd_lsl)]
        # The multiplier's y is operand b's lane for VALU and VDWCONV's elements (its weights),
        # else the scale; VDWCONV's S1 multiplies the pool register by the scale.
        y_is_b = named(m, c.is_valu | (c.dw & ~s1), "y_is_b")
        # S2a's settings, loaded with X1, so that S2a's logic reads registers of X1's domain
        # only (Verilator then evaluates it only when X1 loads).  VALU's right shifts are
        # S2a's rounding shift by the lane's b & 31 (rounding only with ARITHMETIC_RIGHT_SHIFT's
        # round flag), LOGICAL_LEFT_SHIFT's product a shift by 0; NEGATE's clip and CLAMP's
        # clamp are S2b's (hw/vpu_config.py sets them), the other ops' results pass.
        asr = c.is_valu & (c.op == ValuOp.ARITHMETIC_RIGHT_SHIFT)
        right_shift = asr | (c.is_valu & (c.op == ValuOp.LOGICAL_RIGHT_SHIFT))
        sh_cmd = Mux(lsl, 0, c.imm0[:6])        # VALU: MUL's shift imm0 & 63, LOGICAL_LEFT_SHIFT's 0
        x1_sh = [Signal(6, name=f"x1_sh{n}", reset_less=True) for n in range(L)]   # S2a's shift
        x1_shifted, x1_round, x1_dr = (Signal(name=f"x1_{f}", reset_less=True) for f in ("shifted", "round", "dr"))
        x1_load += [x1_shifted.eq(use_product | right_shift), x1_round.eq(c.rounding | (asr & c.imm0[0])),
                    x1_dr.eq(c.dr)]
        for n in range(L):
            a, b = values["a"][n], values["b"][n]
            a32 = a[:32].as_signed()
            pre = e_pre[n]
            v32 = pre[:32].as_signed()
            m16 = mul[n][:16].as_signed()
            x = Mux(s1, pool[n], Mux(c.is_valu, a32, v32))
            # LOGICAL_LEFT_SHIFT is a * (1 << k): the low 32 bits of the product, shifted by 0 in S2a
            power = named(m, Cat(b[:5] == k for k in range(32)), f"lsl_power{n}")   # one-hot decode
            y = Mux(y_is_b, Mux(lsl, power.as_signed(), b[:32].as_signed()), Mux(c.scale32, mul[n], m16))
            product, p0 = lane_product(m, wide, Mux(wide, pre[:48].as_signed(), x), Mux(wide, m16, y),
                                       f"product{n}", small=y_is_b & c.dw, stage=stage)
            # SUM adds value - in_zp (v32); VDWCONV adds D, (value - in_zp) * weight, onto its
            # bias a cycle later
            acc0 = named(m, Mux(e_first, Mux(pool_max, a32, 0), pool[n]), f"pool_in{n}", signed(32))
            reduced = named(m, Mux(pool_max, Mux(a32 > acc0, a32, acc0), (acc0 + v32)[:32]),
                            f"reduced{n}", signed(32))
            dprod = Signal(signed(32), name=f"dw_prod{n}", reset_less=True)
            m.d.sync += dprod.eq(p0[:32].as_signed())        # (17 x 17 signed: the element's product)
            dw_sum = named(m, (Mux(dw_first, bias[n], pool[n]) + dprod)[:32], f"dw_sum{n}", signed(32))
            with m.If(elem_done & c.is_pool & ~c.dw):
                m.d.sync += pool[n].eq(reduced)
            with m.If(dw_add):
                m.d.sync += pool[n].eq(dw_sum)
            # at the last element (not VDWCONV's): the element's result; at VDWCONV's S1, the
            # scaled sum
            x0_load += [
                x0_other[n].eq(Mux(c.is_pool, reduced, alu[n])),
                x0_neg[n].eq(Mux(s1, pool[n] < 0, v32 < 0)),
                # (VDWCONV, at S1: the scale's shift, as for ACT)
                x0_sh[n].eq(Mux(right_shift, b[:5], Mux(c.is_valu, sh_cmd, shift[n]))),
            ]
            x1_load += [x1[n].eq(Mux(x0_prod, product, x0_other[n])), x1_neg[n].eq(x0_neg[n]),
                        x1_sh[n].eq(x0_sh[n])]
        x0_load += staged
        x0_load += x0_prod.eq(s1 | use_product)

        # -- t+5 and t+6, S2a: the rounding addition of X1 into T, then T's shift into Y -------
        # (VALU: the op's last step).  Two stages, so that neither the 64-bit carry chain nor
        # the 64-to-32 window shifter follows the other in one cycle (the vector unit's worst
        # path alone was X1's shift amount -> rounding decode -> 64-bit add -> shift -> Y).
        x_valid = Signal()
        m.d.sync += x_valid.eq(x1_loads)
        t_valid = Signal()
        m.d.sync += t_valid.eq(x_valid)
        t_total = [Signal(64, name=f"t_total{n}", reset_less=True) for n in range(L)]
        t_sh = [Signal(6, name=f"t_sh{n}", reset_less=True) for n in range(L)]
        t_shifted = Signal(name="t_shifted", reset_less=True)
        t_load = load_registers(m, "vpu_t", x_valid, gate=self.gate_stages)
        t_load += t_shifted.eq(x1_shifted)
        y_base = [Signal(signed(36), name=f"y_base{n}", reset_less=True) for n in range(L)]
        y_load = load_registers(m, "vpu_y", t_valid, gate=self.gate_stages)
        for n in range(L):
            sh = x1_sh[n]
            # 1 << (sh-1), or 0 when sh == 0, as a one-hot decode of sh rather than a shift of
            # the constant 1 (31 LUTs fewer per lane after Yosys's mapping, and shallower)
            rnd = named(m, Cat(x1_round & (sh == k + 1) for k in range(64)), f"rnd{n}", 64)
            # x1 + rnd + adj (adj: +-2**30 for double rounding), as two 32-bit word sums, the
            # low word's carry into the high one: the same 64-bit sum with no expression wider
            # than 64 bits (Verilator evaluates those as arrays of words)
            apply = x1_dr & (sh > 31)
            adj_lo = Mux(apply, Mux(x1_neg[n], 0xC000_0000, 0x4000_0000), 0)
            adj_hi = Mux(apply & x1_neg[n], 0xFFFF_FFFF, 0)
            x1u = x1[n].as_unsigned()
            lo = named(m, x1u[:32] + rnd[:32] + adj_lo, f"total_lo{n}", 34)
            hi = (x1u[32:] + rnd[32:] + adj_hi + lo[32:])[:32]
            # T holds the sum to shift, or X1 itself when the op does not shift
            t_load += [t_total[n].eq(Mux(x1_shifted, Cat(lo[:32], hi), x1u)), t_sh[n].eq(sh)]
            total = t_total[n].as_signed()
            tsh = t_sh[n]
            # (total >> sh)[:32] as a 32-bit window of the sign-extended total: a shifter with 32
            # outputs, not a 64-bit one cut afterwards (93 ECP5 LUTs fewer on the 4x4 unit); its
            # first stage (by 32) apart, so that the window is taken from 64 bits, not 95
            half = named(m, Mux(tsh[5], Cat(total[32:], total[63].replicate(32)), total.as_unsigned()),
                         f"total_sh32_{n}", 64)
            scaled = half.bit_select(tsh[:5], 32).as_signed()
            y_load += y_base[n].eq(Mux(t_shifted, scaled, total[:36].as_signed()))

        # -- t+7 .. t+6+W, S2b and the writer ------------------------------------------------
        w_active = Signal()
        wj = Signal(range(4))
        di0 = Signal(16)
        di1 = Signal(16)
        d_vec = Signal(aw)
        d_line = Signal(aw)
        with m.If(w_active):
            with m.If(wj == c.W - 1):
                m.d.sync += [w_active.eq(0), wj.eq(0)]
                with m.If(di0 == c.n0 - 1):
                    nxt = named(m, d_line + c.d_s1, "next_d_line")
                    m.d.sync += [di0.eq(0), di1.eq(di1 + 1), d_line.eq(nxt), d_vec.eq(nxt)]
                with m.Else():
                    m.d.sync += [di0.eq(di0 + 1), d_vec.eq(d_vec + c.d_s0)]
            with m.Else():
                m.d.sync += wj.eq(wj + 1)
        with m.If(t_valid):
            m.d.sync += [w_active.eq(1), wj.eq(0)]

        # S2b: y = clamp(clip(Y + out_zp)), the type clip [tlo, thi] and the clamp [cmin,
        # cmax] each when enabled, in that order.  Each step is y -> min(max(y, lo), hi), and
        # such steps compose into one: y -> min(max(y, A), B) with A and B the chain's values
        # at -inf and +inf.  A and B depend only on the command, so they are registers
        # (settled three cycles after the command; the first write is seven cycles after the
        # first read), and every lane compares Y with A - out_zp and B - out_zp while it adds
        # out_zp: two compares and a mux in parallel instead of four compare-and-mux steps
        # in series.
        big = 1 << 40                       # beyond every bound and every Y + out_zp

        def chain(y):
            y = Mux(c.type_clip & (y < c.tlo), c.tlo, y)
            y = Mux(c.type_clip & (y > c.thi), c.thi, y)
            y = Mux(c.clamp & (y < c.cmin), c.cmin, y)
            return Mux(c.clamp & (y > c.cmax), c.cmax, y)

        bound_lo, bound_hi = Signal(signed(42)), Signal(signed(42))         # A, B
        below, above = Signal(signed(43)), Signal(signed(43))               # A - out_zp, B - out_zp
        lo_chain = named(m, chain(Const(-big, signed(42))), "bound_lo_next", signed(42))
        hi_chain = named(m, chain(Const(big, signed(42))), "bound_hi_next", signed(42))
        # The bounds are registered before ``out_zp`` is subtracted (the chain of four
        # compare-and-mux steps and the subtraction in one cycle were the unit's worst path
        # alone, 19.2 ns: docs/hardware.md "Timing"); a command's first write is far later.
        m.d.sync += [bound_lo.eq(lo_chain), bound_hi.eq(hi_chain),
                     below.eq(bound_lo - c.out_zp), above.eq(bound_hi - c.out_zp)]
        out = []
        for n in range(L):
            y0 = named(m, y_base[n] + c.out_zp, f"y0_{n}", signed(37))
            clipped = Mux(y_base[n] < below, bound_lo, Mux(y_base[n] > above, bound_hi, y0))
            out.append(named(m, clipped, f"y_{n}", signed(37)))

        # output formats: ASRAM rows of the out type's bytes; ACC lanes extended to 32 bits
        flat2 = Cat(v[:16] for v in out)
        flat4 = Cat(v[:32] for v in out)
        row = Mux(c.d_size1, Cat(v[:8] for v in out),
                  Mux(c.d_size2, flat2.word_select(wj[:1], narrow), flat4.word_select(wj, narrow)))
        lanes32 = []
        for v in out:
            ext8 = Mux(c.d_unsigned, v[:8], v[:8].as_signed())
            ext16 = Mux(c.d_unsigned, v[:16], v[:16].as_signed())
            lanes32.append(Mux(c.d_size1, ext8, Mux(c.d_size2, ext16, v[:32]))[:32])
        waddr = named(m, d_vec + wj, "waddr")
        m.d.comb += [
            self.asram_w.en.eq(w_active & (c.d_mem == VecMem.ASRAM)),
            self.asram_w.addr.eq(waddr),
            self.asram_w.data.eq(row),
            self.acc_w.en.eq(w_active & (c.d_mem == VecMem.ACC)),
            self.acc_w.addr.eq(waddr),
            self.acc_w.data.eq(Cat(lanes32)),
        ]

        busy = named(m, active | q["valid"] | d_valid | e_valid | dw_add | s1 | x0_valid | x_valid | t_valid | w_active, "busy")
        m.d.comb += [self.ctl.busy.eq(busy), self.ctl.ready.eq(~busy)]

        with m.If(start):
            first_ph = Mux(cmd.is_act, 3 - PARAM_ROWS["ACT"], Mux(cmd.dw, 3 - PARAM_ROWS["VDWCONV"],
                           Mux(cmd.is_rescale, 3 - PARAM_ROWS["VRESCALE"], 3)))
            m.d.sync += [
                active.eq(cmd.touches), ph.eq(first_ph), param_ptr.eq(cmd.param_addr),
                j.eq(0), r.eq(0), w0.eq(0), w1.eq(0), i0.eq(0), i1.eq(0),
                wline.eq(cmd.a_addr), elem.eq(cmd.a_addr), b_elem.eq(cmd.b_addr),
                di0.eq(0), di1.eq(0), d_vec.eq(cmd.d_addr), d_line.eq(cmd.d_addr),
            ]
            m.d.sync += [vec[k].eq(cmd[f"{k}_addr"]) for k in OPERANDS]
            m.d.sync += [line[k].eq(cmd[f"{k}_addr"]) for k in OPERANDS]
        return m
