"""The field-only half of the instruction checker, computed as an instruction enters the
instruction buffer (IMEM) and stored next to it.

Why.  Every ISA error of an instruction is a function of its fields, the program length and
the loop offsets of its iteration (hw/checker.py).  Evaluated in one piece between IMEM's
read port and the issue register, the range rules chained up to six unregistered
multipliers and a dozen wide adders: 151 ns on ECP5 (docs/hardware.md, "Timing").  But
only the *addresses* depend on the loop offsets, and only additively: a rule
``0 <= addr + off`` and ``addr + off + extent <= depth`` (the extent being a sum of
products of counts and strides) is ``lo + off >= 0`` and ``hi + off < 0`` with ``lo =
addr`` and ``hi = addr + extent - depth - 1`` independent of the offsets.  So every product
and every illegal-field test is done here, once per instruction as it is fetched, and the
read port only adds the offsets to ``lo``/``hi`` and looks at signs.

Timing: the sequencer registers the assembled instruction word in the cycle its last bus
word arrives, and four stages follow (:class:`PreCheck` ``staged``, hw/sequencer.py): in the
arrival cycle the operands of every product of fields are chosen by opcode (with the small
sums some take, such as ``len - 1``) and registered, the DSP blocks' input registers; in the
next cycle the products are formed from those registers and registered, with the values
(``early``) that need a product and a cap but no offset; in the cycle after, the sums,
compares and illegal-field tests use those registers (with at most one small multiplier
each) and their results are registered with the word; in the fourth cycle word and results
are written into IMEM, whose read port is transparent for the write, so an instruction can
be read three cycles after its last word's response (isa/instructions.py
``FETCH_ARRIVAL``).  The cost is IMEM width (:func:`pre_layout`, per opcode, the widest is
stored), the operand and product registers and two more registers of the word and its
row.  Each cut was the NPU's worst path on the ULX3S in its turn (docs/fpga.md): the
product registers cut the multipliers from the sums behind them, the results' register the
second multiplier and the sums from IMEM's write data, and the operand registers the bus
word's fields, their sums and the opcode mux from the multipliers' inputs.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from isa import matmul
from isa.config import NpuConfig
from isa.instructions import (DMA_ELEM_SIZES, INSTR_BITS, INSTR_BYTES, INSTRUCTIONS, OPCODE_BITS, BranchTest,
                              MatmulAType, MatmulWType, Sram, VecDst, loop_increments, space_size)
from hw.clock_gate import load_registers
from hw.decode import RESERVED, instr_layout
from hw.table_check import table_errors
from hw.vpu_check import CHECKED as VECTOR_CHECKED, Term, as_signed, capped, capped_product, excess, mul, vector_errors


class Rules(NamedTuple):
    """What the read port still needs of one instruction: ``illegal`` (ILLEGAL_INSTRUCTION on
    field values alone), ``over`` (SRAM_OVERFLOW on field values alone), the range
    ``terms`` (SRAM_OVERFLOW, or for a DMA's first term DMA_OUT_OF_RANGE), for a DMA
    the alignment: ``amask`` (element size - 1, low bits) and ``smis`` (a stride
    misaligned), and for a LOOP ``end``, one past the last instruction of its body, and
    ``skip``: the word decodes (reserved bits zero) and its count is 0, so it waits a cycle
    in the read port (hw/sequencer.py)."""
    illegal: object
    over: object = 0
    terms: tuple = ()
    amask: object = None
    smis: object = None
    end: object = None
    skip: object = None


def index_bits(cfg: NpuConfig) -> int:
    """Width of an instruction index (the sequencer's program counters): a program is at
    most ext_mem_bytes long."""
    return ceil_log2(cfg.ext_mem_bytes // INSTR_BYTES + 3) + 1


def dma_mask_bits(bus_bytes: int) -> int:
    return max(bus_bytes.bit_length() - 1, max(DMA_ELEM_SIZES).bit_length() - 1)


def now(value):
    """The default ``early``: a value of the fields, used where it is formed."""
    return value


def _dma(cfg: NpuConfig, v, store: bool, mul=mul, early=now) -> Rules:
    """DMA rules, both modes (isa/dma.py: word mode is E = BUS, stride0 = BUS).  ``early``
    marks values of the fields alone that :class:`PreCheck` ``staged`` forms a cycle ahead
    and registers, like the products: what is left after the register is at most one
    small multiplier and one sum per rule."""
    bus = cfg.bus_bytes
    align_bits = bus.bit_length() - 1
    word_mode = v.elem == 0
    legal = ((v.sram == Sram.ASRAM) if store else (v.sram <= max(Sram)))
    legal &= ((v.elem == 0) & (v.stride0 == 0)) | Cat(*[v.elem == e for e in DMA_ELEM_SIZES]).any()
    esize = Mux(word_mode, bus, v.elem)                         # E
    eshift = Mux(word_mode, align_bits, 0)                      # log2(E)
    for e in DMA_ELEM_SIZES:
        eshift = Mux(v.elem == e, e.bit_length() - 1, eshift)
    mb = dma_mask_bits(bus)
    amask = (esize - 1)[:mb]
    smis = ((v.stride0[:mb] | v.stride1[:mb] | v.stride2[:mb]) & amask) != 0
    moves = (v.len0 != 0) & (v.len1 != 0) & (v.len2 != 0)
    inner = mul((v.len0 - 1)[:16], Mux(word_mode, bus, v.stride0))
    lowest = v.ext_addr + Mux(inner < 0, inner, 0)
    last = (v.ext_addr + mul((v.len2 - 1)[:16], v.stride2) + mul((v.len1 - 1)[:16], v.stride1)
            + Mux(inner > 0, inner, 0) + esize)                 # one past the last byte
    elements = v.len0 if store else v.len0 + v.pad_b0 + v.pad_a0
    line_words = ((elements << eshift) + (bus - 1)) >> align_bits       # K
    nlines = v.len1 if store else v.len1 + v.pad_b1 + v.pad_a1
    planes_lines = mul(v.len2, nlines)
    depths = (cfg.asram_rows, cfg.wsram_rows, cfg.psram_rows * cfg.words_per_wide_row)
    depth = Mux(v.sram == Sram.ASRAM, depths[0], Mux(v.sram == Sram.WSRAM, depths[1], depths[2]))
    limit = max(depths)
    line_words = early(capped(line_words, limit))
    # The word count is only compared with a depth (and is non-zero exactly when the exact
    # count is): capped above the deepest memory, it needs one small multiplier after the
    # register instead of a 33 x 19-bit one (hw/vpu_check.py capped_product).  Past the
    # cap the stored excess is smaller than the exact one but still >= 0 for every loop
    # offset that keeps the first row >= 0, so the checker's code is unchanged.
    # Both factors of the count are capped before the register (``early``): after it, the
    # count's multiplier starts at registers and ends in one sum (the cap of the product
    # register in front of it was the NPU's worst path, docs/fpga.md).
    if store:
        count = capped_product(early(capped(planes_lines, limit)), line_words, limit)
    else:
        # Packed lines (isa/dma.py plane_words): KP words per plane, the plane's bytes rounded
        # up once.  One multiplier after the register serves both cases.  The plane's bytes
        # are capped before they are rounded (no carry chain before the cap): at or above
        # 2**(s + align) bytes, KP is at least 2**s, above the limit either way.
        s = (limit + 1).bit_length()
        plane_bytes = mul(nlines, elements) << eshift
        plane_bytes = Mux(plane_bytes[s + align_bits:].any(), 1 << (s + align_bits), plane_bytes[:s + align_bits])
        # KP (capped), formed a cycle ahead with its product: after the register only the
        # capped multiply and one sum are left (the sequencer's worst path before:
        # docs/hardware.md "Timing")
        plane_words = early((plane_bytes + (bus - 1)) >> align_bits)
        planes = early(capped(Mux(v.pack, v.len2, planes_lines), limit))
        count = capped_product(planes, Mux(v.pack, plane_words, line_words), limit)
    # excess(sram_addr + count, depth + 1), the constant part formed early: one sum after the
    # multiplier.
    sram_hi = early(as_signed(v.sram_addr) - as_signed(depth + 1)) + count
    terms = (Term("ext_addr", moves, excess(last, cfg.ext_mem_bytes + 1), lo=lowest),
             Term("sram_addr", count != 0, sram_hi))
    return Rules(~legal, terms=terms, amask=amask, smis=smis)


def rules(cfg: NpuConfig, name: str, v, mul=mul, pc=None, early=now) -> Rules:
    """The field-only rules of instruction ``name`` whose raw fields are ``v`` (a view) and
    whose index in the program is ``pc`` (only a LOOP's depend on it; None: the rules'
    shapes only); products of fields are formed by ``mul`` (hw/vpu_check.py), and values
    that :class:`PreCheck` ``staged`` may form a cycle ahead are passed through ``early``."""
    if pc is None:
        pc = Const(0, index_bits(cfg))
    reserved = (v[RESERVED] != 0) if RESERVED in instr_layout(name).members else 0
    if name in ("DMA_LOAD", "DMA_STORE"):
        r = _dma(cfg, v, store=name == "DMA_STORE", mul=mul, early=early)
        return r._replace(illegal=r.illegal | reserved)
    if name == "MATMUL":
        n = mul(v.n0, v.n1)
        wide = v.a_type == MatmulAType.INT16       # P = 2 rows (isa/matmul.py)
        tile = Mux(v.w_type == MatmulWType.INT4, matmul.tile_rows(cfg.array_rows, MatmulWType.INT4),
                   matmul.tile_rows(cfg.array_rows, MatmulWType.INT8))
        a_last = v.a_addr + mul((v.n1 - 1)[:16], v.a_stride1) + mul((v.n0 - 1)[:16], v.a_stride0) + wide
        touches = n != 0
        return Rules(reserved, terms=(
            Term("w_addr", 1, excess(v.w_addr + tile - 1, cfg.wsram_rows)),
            Term("a_addr", touches, excess(a_last, cfg.asram_rows)),
            Term("acc_addr", touches, excess(v.acc_addr + Mux(wide, n << 1, n) - 1, cfg.acc_rows))))
    if name == "ACT":
        touches = v.count != 0
        return Rules(reserved, terms=(
            Term("param_addr", 1, excess(v.param_addr + 3 - 1, cfg.psram_rows)),
            Term("acc_addr", touches, excess(v.acc_addr + v.count - 1, cfg.acc_rows)),
            Term("dst_addr", touches, excess(v.dst_addr + v.count - 1, cfg.asram_rows))))
    if name == "BRANCH":            # target and loop_active are the read port's
        rows = Mux(v.mem == VecDst.ACC, cfg.acc_rows, cfg.asram_rows)
        return Rules(reserved | (v.test == 3), over=(v.test != BranchTest.ALWAYS) & (v.row >= rows))
    if name == "TABLE":
        illegal, over, terms = table_errors(cfg, v, mul=mul)
        return Rules(reserved | illegal, over=over, terms=tuple(terms))
    if name in VECTOR_CHECKED:
        illegal, terms = vector_errors(cfg, name, v, mul=mul)
        return Rules(reserved | illegal, terms=tuple(terms))
    if name == "LOOP":
        # The body's end as an index, and its length's own limits, are known at fetch: the
        # read port compares the end with PROG_LEN and the enclosing body's end, and the
        # loop stack (hw/loop.py) takes it as is, instead of adding pc + 1 + body behind
        # IMEM's read port (its slowest path, docs/hardware.md "Timing").
        too_long = (v.body == 0) | (v.body >= cfg.imem_rows)
        # (count - 1) * |inc| against each space's size (LOOP's errors): exact wherever it
        # matters, with factors capped at the size (hw/vpu_check.py capped_product).
        count_m1 = (v.count - 1)[:len(v.count)]
        swept = []
        for space, f in loop_increments().items():
            size = space_size(space, cfg)
            inc = v[f.name]
            magnitude = Mux(inc < 0, -inc, inc)[:f.width]
            swept.append(mul(capped(count_m1, size - 1), capped(magnitude, size - 1)) > size - 1)
        sweep = (v.count > 1) & Cat(*swept).any()
        return Rules(reserved | too_long | sweep, end=pc + 1 + v.body,
                     skip=(v.count == 0) & ~Value.cast(reserved)[0])
    assert name in ("HALT", "SYNC"), f"checker misses {name}"
    return Rules(reserved)


def _members(rule: Rules) -> dict:
    """Name -> value of what is stored for one instruction."""
    out = {"illegal": rule.illegal, "over": rule.over}
    if rule.amask is not None:
        out.update(amask=rule.amask, smis=rule.smis)
    if rule.end is not None:
        out["end"] = rule.end
    if rule.skip is not None:
        out["skip"] = rule.skip
    for t in rule.terms:
        out[f"{t.field}_gate"] = t.gate
        out[f"{t.field}_hi"] = t.hi
        if t.lo is not None:
            out[f"{t.field}_lo"] = t.lo
    return out


def _shape(value):
    return Value.cast(value).shape()


@lru_cache(maxsize=16)
def pre_layout(cfg: NpuConfig) -> data.UnionLayout:
    """What is stored per instruction: one struct per instruction name (exact widths, from
    the rules' own expressions), overlaid."""
    word = Signal(INSTR_BITS)
    return data.UnionLayout({
        d.name: data.StructLayout({k: _shape(x) for k, x in _members(rules(cfg, d.name, instr_layout(d.name)(word))).items()})
        for d in INSTRUCTIONS})


def pre_bits(cfg: NpuConfig) -> int:
    return pre_layout(cfg).size


class PreCheck(wiring.Component):
    """The precomputed rules ``pre`` of instruction ``word`` at index ``pc`` of the program
    (zero for an unknown opcode: the read port finds it illegal by its opcode).

    ``staged=False``: one combinational function of ``word``.  ``staged=True`` (the
    sequencer): three cycles, ``word_early``, ``word_mid`` and ``word`` being one
    instruction in three consecutive cycles (the sequencer's assembled instruction and its
    two registered copies): the multipliers' operands are registered from ``word_early``,
    the products (and the ``early`` values) from the operand registers and ``word_mid``,
    and the rest is formed from ``word``, ``pc`` and those registers: no path runs through
    sums into a multiplier or through a multiplier into a sum.  Instructions share the
    multipliers (product i of each instruction on multiplier i), as Yosys shares them
    between the cases of the one-piece form.  The operand registers load only in cycles
    in which ``load`` is high, the product registers only when ``load_mid`` is (the
    sequencer: the cycle an instruction's last bus word arrives, and the cycle after;
    undriven, they are high in every cycle): with ``gate`` (simulation builds) they are
    load domains (hw/clock_gate.py), so that Verilator evaluates the products once per
    fetched instruction instead of every cycle; without, they are registers with an enable."""

    def __init__(self, config: NpuConfig, staged: bool = False, *, gate: bool = False):
        self.config = config
        self.staged = staged
        self.gate = gate
        ports = {"word": In(INSTR_BITS), "pc": In(index_bits(config)), "pre": Out(pre_layout(config))}
        if staged:
            ports.update(word_early=In(INSTR_BITS), load=In(1, init=1), word_mid=In(INSTR_BITS), load_mid=In(1, init=1))
        super().__init__(ports)

    def _stages(self, m):
        """The registers of ``staged``: operands, products and ``early`` values.

        The rules call ``mul`` in the same order on any view.  A pass on ``word_early``
        collects each instruction's operand pairs; product i of every instruction shares
        operand registers, multiplier and product register i (operands chosen by opcode, so
        the DSP count is the most any one instruction needs).  The operands are registered
        as the word arrives (``load``), the product the cycle after (``load_mid``): the
        multiplier runs from registers to a register, so its path no longer adds the
        operands' sums and the opcode's mux in front.  The ``early`` values are formed in
        that second cycle from ``word_mid``, taking their products from the multipliers'
        outputs, and registered beside the products (value i of every instruction in
        register i).  Returns, per instruction, product i and early value i taken back from
        their registers at their own widths (exact: they fit), for the pass on ``word``."""
        cfg = self.config
        pairs, earlies = {}, {}
        for defn in INSTRUCTIONS:
            found = pairs[defn.name] = []
            rules(cfg, defn.name, instr_layout(defn.name)(self.word_early),
                  mul=lambda a, b, found=found: found.append((Value.cast(a), Value.cast(b))) or a * b)
        slots = max(len(p) for p in pairs.values())
        operands = load_registers(m, "precheck_operands", self.load, gate=self.gate)
        stage = load_registers(m, "precheck", self.load_mid, gate=self.gate)

        def width(v):
            return v.shape().width + (0 if v.shape().signed else 1)

        def taken(value, shape):
            value = value[:shape.width]
            return value.as_signed() if shape.signed else value

        def shared(values: dict, name: str, word, target):
            """One register for value i of every instruction (``values``: name -> value,
            views of ``word``), as wide as the widest, loaded through ``target`` with the
            value of ``word``'s opcode."""
            reg = Signal(signed(max(width(x) for x in values.values())), name=name, reset_less=True)
            nxt = Signal.like(reg, name=f"{name}_next")
            with m.Switch(word[:OPCODE_BITS]):
                for defn in INSTRUCTIONS:
                    if defn.name in values:
                        with m.Case(defn.opcode):
                            m.d.comb += nxt.eq(values[defn.name])
            target += reg.eq(nxt)
            return reg

        products, replays = [], {}
        for i in range(slots):
            used = {n: ab[i] for n, ab in pairs.items() if len(ab) > i}
            a = shared({n: ab[0] for n, ab in used.items()}, f"pre_a{i}", self.word_early, operands)
            b = shared({n: ab[1] for n, ab in used.items()}, f"pre_b{i}", self.word_early, operands)
            product = Signal(signed(len(a) + len(b)), name=f"pre_m{i}")
            m.d.comb += product.eq(a * b)
            products.append(product)
            held = Signal.like(product, name=f"pre_p{i}", reset_less=True)
            stage += held.eq(product)
            for n, (x, y) in used.items():
                replays.setdefault(n, []).append(taken(held, (x * y).shape()))
        for defn in INSTRUCTIONS:
            formed = iter(taken(p, (a * b).shape()) for p, (a, b) in zip(products, pairs[defn.name]))
            seen = earlies[defn.name] = []
            rules(cfg, defn.name, instr_layout(defn.name)(self.word_mid),
                  mul=lambda a, b, formed=formed: next(formed),
                  early=lambda x, seen=seen: seen.append(Value.cast(x)) or x)
        early_replays = {}
        for i in range(max(len(e) for e in earlies.values())):
            used = {n: e[i] for n, e in earlies.items() if len(e) > i}
            reg = shared(used, f"pre_e{i}", self.word_mid, stage)
            for n, x in used.items():
                early_replays.setdefault(n, []).append(taken(reg, x.shape()))
        return replays, early_replays

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        replays, early_replays = self._stages(m) if self.staged else ({}, {})
        with m.Switch(self.word[:OPCODE_BITS]):
            for defn in INSTRUCTIONS:
                product, formed = mul, now
                if self.staged:
                    replay = iter(replays.get(defn.name, []))
                    early_replay = iter(early_replays.get(defn.name, []))

                    def product(a, b, replay=replay):
                        return next(replay)

                    def formed(x, early_replay=early_replay):
                        return next(early_replay)
                with m.Case(defn.opcode):
                    out = self.pre[defn.name]
                    members = _members(rules(cfg, defn.name, instr_layout(defn.name)(self.word), mul=product,
                                             pc=self.pc, early=formed))
                    m.d.comb += [out[k].eq(x) for k, x in members.items()]
                if self.staged:
                    assert next(replay, None) is None, f"{defn.name}: rules used fewer products than recorded"
                    assert next(early_replay, None) is None, f"{defn.name}: rules used fewer early values than recorded"
        return m
