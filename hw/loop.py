"""Hardware loops: the sequencer's loop stack and the address offsets it applies (LOOP in
isa/instructions.py).

The loop stack lives in the fetch stage, so the fetch address already follows the loops and
going back from the last instruction of a body to its first costs no cycle:

* ``q`` is the default next fetch address (one past the last fetched instruction).  Level
  ``d`` is *at its end* when ``q`` equals its exclusive end.  The highest level at its end
  with iterations left loops back: the fetch address is its start, its iteration counter
  and offsets advance, and the levels above it (inner bodies ending at the same
  instruction, on their last iteration) end.  Otherwise every level at its end ends and the
  fetch goes on at ``q``.  All of this happens when the fetch address is used (``advance``).
* A legal LOOP leaving the fetch stage (``enter``) pushes a level (count > 0) whose body
  starts at the next fetch; with count == 0 the fetch skips the body instead (``skip``):
  ``q`` becomes one past its last instruction (``skip_end``), with the enclosing levels
  handled as above in the same cycle.  ``skip`` and ``skip_end`` are registers of the
  sequencer (a zero-count LOOP waits a cycle in the fetch stage for them), so the fetch
  address never depends on IMEM's read data in the cycle it is read.
* ``offsets`` (per space: the sum over the active levels of iteration * increment) are the
  current offsets of the innermost active level (0 with none): each level keeps the offsets
  of its own iteration, which include its enclosing levels', so a loop-back adds the level's
  increments to its own register and levels that end take their offsets with them.  An
  instruction is in the fetch stage the cycle after its fetch, before the next fetch
  changes the stack, so ``offsets`` are exactly its own there.

:func:`effective_fields` adds the offsets to an instruction's address fields, as the
``space`` tags of the ISA table say (nothing here names a field).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from isa.instructions import (
    BY_NAME, LOOP_DEPTH, Space, address_fields, increment_bits, loop_increments, offset_bits, offset_unit,
    space_choices,
)
from hw.signals import named


def offsets_layout(config: NpuConfig) -> data.StructLayout:
    """The offsets of every space, each as wide as a legal LOOP nest can make it
    (isa/instructions.py ``offset_bits``: LOOP's increments are bounded by the spaces' sizes)."""
    return data.StructLayout({s.name.lower(): signed(offset_bits(s, config)) for s in Space})


def field_offsets(defn, view, offsets, config: NpuConfig) -> dict:
    """Exact (signed) offset the active loops add to every address field of instruction
    ``defn`` seen through ``view``, given ``offsets`` (a view of :func:`offsets_layout`)."""
    out = {}
    for f in address_fields(defn):
        off = 0
        for value, space in space_choices(defn, f).items():
            unit = offset_unit(f, space, config)
            scaled = offsets[space.name.lower()] * unit if unit != 1 else offsets[space.name.lower()]
            off = scaled if value is None else Mux(view[f.space] == value, scaled, off)
        out[f.name] = off
    return out


def effective_fields(defn, view, offsets, config: NpuConfig) -> dict:
    """Exact (wide, signed) effective value of every address field of instruction ``defn``
    seen through ``view``, given ``offsets`` (a view of :func:`offsets_layout`)."""
    return {name: view[name] + off for name, off in field_offsets(defn, view, offsets, config).items()}


class LoopStack(wiring.Component):
    """The loop stack and fetch address of the sequencer (module docstring).

    ``advance``: the fetch uses ``addr`` this cycle (``addr`` is valid in every cycle, so the
    sequencer can ask whether that instruction is in its buffer before fetching).
    ``enter``: a legal LOOP (fields ``count``, ``body``, increments in ``loop``; index
    ``loop_pc``; ``body_end`` = ``loop_pc + 1 + body``, precomputed as the LOOP entered the
    instruction buffer, hw/precheck.py) is in the fetch stage and leaves it if the
    sequencer fetches this cycle; with count > 0 it pushes a level.  ``pending``: a LOOP
    with count > 0 is in the fetch stage, legal or not (its fields in ``loop``, ``loop_pc``
    and ``body_end`` as for ``enter``), from IMEM's read data without the checker's rules:
    the free level's registers take it (only ``valid`` waits for ``enter``).  ``skip``: a legal
    LOOP with count 0 is in the fetch stage and leaves it if the sequencer fetches, which
    then goes on at ``skip_end`` (its ``body_end``); both from registers.
    ``back``: a level loops back at this fetch (``addr`` is its first instruction, else
    ``straight``, the next instruction in program order or past a skipped body).
    ``restart``: forget every loop and fetch from ``restart_pc`` next (start, and a taken
    BRANCH, which never has a loop active).  ``full``: LOOP_DEPTH loops are active;
    ``active``: at least one; ``end``: one past the last instruction of the innermost active
    body; ``past_end``: ``body_end`` > ``end`` with a loop active; ``outer_start``: the first
    instruction of the outermost active body; ``next_pc``:
    one past the last fetched instruction (the sequencer's instruction buffer keeps
    ``outer_start`` onwards while a loop is active, else ``next_pc`` onwards).

    Per level, registers hold the level's state (active, end and first instruction of the
    body, iterations left and whether any are, increments) and the offsets of its current
    iteration (``cur``: the offsets in force when it was pushed, then ``+ inc`` at each
    loop-back).  The offsets are the innermost active level's ``cur``: an AND-OR of
    registers on the one-hot innermost level, settled long before IMEM's read data they are
    added to.  When levels end, the offsets are the enclosing level's again without being
    restored: its iteration cannot change while an inner level is active, since its
    loop-back ends the inner level.  A loop-back at level b writes ``cur[b] + inc[b]``, a
    sum of registers formed in parallel with the late decision (which level goes back or
    ends, from the LOOP in the fetch stage through ``skip``), which only selects: it feeds
    no adder and no memory read.  (Before: the offsets added the increment after a read of
    a frame memory addressed by that decision, the sequencer's worst path, 21.0 ns routed
    on the ECP5 small configuration; then, offset registers restored from a per-level copy
    of the offsets at push: 380 flip-flops per level and 190 more where 190 per level do.)
    Little logic outside the update branches keeps the model fast in Verilator.
    """

    def __init__(self, config: NpuConfig, pc_bits: int):
        self.config = config
        self.pc_bits = pc_bits
        loop = BY_NAME["LOOP"]
        self._loop_fields = data.StructLayout({f.name: signed(f.width) if f.signed else unsigned(f.width)
                                               for f in loop.fields})
        super().__init__({
            "restart": In(1),
            "advance": In(1),
            "enter": In(1),
            "loop": In(self._loop_fields),
            "loop_pc": In(pc_bits),
            "body_end": In(pc_bits),
            "pending": In(1),
            "skip": In(1),
            "skip_end": In(pc_bits),
            "restart_pc": In(pc_bits),
            "addr": Out(pc_bits),
            "straight": Out(pc_bits),
            "back": Out(1),
            "next_pc": Out(pc_bits),
            "outer_start": Out(pc_bits),
            "offsets": Out(offsets_layout(config)),
            "full": Out(1),
            "past_end": Out(1),
            "active": Out(1),
            "end": Out(pc_bits),
        })

    def elaborate(self, platform):
        m = Module()
        pcw = self.pc_bits
        depth = LOOP_DEPTH
        incs = {s: f.name for s, f in loop_increments().items()}
        count_shape = self._loop_fields["count"].shape
        cfg = self.config
        key = {s: s.name.lower() for s in Space}

        seq_pc = Signal(pcw)                  # one past the last fetched instruction
        valid = [Signal(name=f"lv{d}_valid") for d in range(depth)]
        end = [Signal(pcw, name=f"lv{d}_end") for d in range(depth)]
        left = [Signal(count_shape, name=f"lv{d}_left") for d in range(depth)]   # iterations after this one
        more = [Signal(name=f"lv{d}_more") for d in range(depth)]                # left != 0
        start = [Signal(pcw, name=f"lv{d}_start") for d in range(depth)]         # first of the body
        total = {s: Signal(signed(offset_bits(s, cfg)), name=f"offset_{key[s]}") for s in Space}
        # Per level and space: the increment and the offsets of the level's current iteration
        # (``cur``); ``nxt``, the offsets its next loop-back gives, is a sum of registers, so
        # that the update in a fetch cycle only selects.
        # An increment is stored at the width a LOOP that loops back can have (|inc| below
        # the space's size: LOOP's errors); with count 1 it is never added.
        inc = [{s: Signal(signed(increment_bits(s, cfg)), name=f"lv{d}_inc_{key[s]}") for s in Space}
               for d in range(depth)]
        cur = [{s: Signal(signed(offset_bits(s, cfg)), name=f"lv{d}_cur_{key[s]}") for s in Space}
               for d in range(depth)]
        nxt = [{s: named(m, cur[d][s] + inc[d][s], f"lv{d}_next_{key[s]}", signed(offset_bits(s, cfg)))
                for s in Space} for d in range(depth)]

        innermost_end = end[0]
        for d in range(1, depth):
            innermost_end = Mux(valid[d], end[d], innermost_end)
        m.d.comb += [self.end.eq(innermost_end), self.full.eq(valid[-1]), self.active.eq(valid[0])]
        # A LOOP in the fetch stage ending past the innermost active body (illegal): each
        # level's end is compared with ``body_end`` and the innermost valid level's result
        # taken, rather than the end selected first and compared after (this feeds ``enter``
        # and so the fetch address in the same cycle).
        innermost = [valid[d] & ~Cat(*valid[d + 1:]).any() if d + 1 < depth else valid[d] for d in range(depth)]
        # The offsets are the innermost active level's (0 with none): an AND-OR of registers,
        # settled long before IMEM's read data they are added to (hw/checker.py).
        for s in Space:
            sel = 0
            for d in range(depth):
                sel = sel | Mux(innermost[d], cur[d][s], 0)
            m.d.comb += [total[s].eq(sel), self.offsets[key[s]].eq(total[s])]
        m.d.comb += self.past_end.eq(Cat(innermost[d] & (self.body_end > end[d]) for d in range(depth)).any())

        outer_start = Signal(pcw)
        m.d.comb += [self.next_pc.eq(seq_pc), self.outer_start.eq(outer_start)]
        # The fetch address is needed in every cycle (the sequencer fetches only an
        # instruction already in its buffer); the updates below only in a cycle that fetches.
        # Timing: everything here is a register or comes from registers (``skip`` and
        # ``skip_end`` too); ``enter`` comes late, from IMEM's read port through the
        # checker's LOOP rules, and only enables the push.  The compares with both
        # candidates for ``q`` are made in parallel and ``skip`` only selects.
        skip = self.skip
        q = Mux(skip, self.skip_end, seq_pc)
        at_seq = Cat(valid[d] & (end[d] == seq_pc) for d in range(depth))
        at_skip = Cat(valid[d] & (end[d] == self.skip_end) for d in range(depth))
        at_end = named(m, Mux(skip, at_skip, at_seq), "at_end")
        back = named(m, Cat(at_end[d] & more[d] for d in range(depth)), "back")   # at its end, iterations left
        # The innermost level that can go back does; the levels inside it end, as does
        # every level at its end when none can go back.
        back_sel = named(m, Cat(back[d] & ((back >> (d + 1)) == 0) for d in range(depth)), "back_sel")  # one-hot
        pop = named(m, Cat(at_end[d] & ((back >> d) == 0) for d in range(depth)), "pop")
        # The first instruction of the level that goes back: registers and an AND-OR on
        # the one-hot choice (not the encoder and a memory read in series).
        back_start = 0
        for d in range(depth):
            back_start = back_start | Mux(back_sel[d], start[d], 0)
        m.d.comb += [
            self.addr.eq(Mux(back.any(), back_start, q)),
            self.straight.eq(q),
            self.back.eq(back.any()),
        ]
        slot = Signal(range(depth))                    # the level a LOOP entering now pushes
        for d in reversed(range(depth)):               # lowest free level
            with m.If(~valid[d]):
                m.d.comb += slot.eq(d)
        # A free level's registers are written whenever a LOOP with count > 0 is in the read
        # port (``pending``), legal or not and fetched or not: only its ``valid`` waits for
        # ``enter``, so the checker's LOOP rules over IMEM's read data (late) reach LOOP_DEPTH
        # flip-flops instead of the enables of every level register (the NPU's worst path on
        # the ULX3S: IMEM -> LOOP rules -> ``lv0_start``).  Harmless: nothing reads an
        # invalid level (every use is gated by ``valid``) nor ``outer_start`` with no loop
        # active, and the values written in the cycle that pushes are the ones the push
        # needs (``total`` and ``slot`` change only on a fetch or a restart).
        with m.If(self.pending & ~valid[-1]):
            for d in range(depth):
                with m.If(slot == d):
                    m.d.sync += [end[d].eq(self.body_end), start[d].eq(self.loop_pc + 1),
                                 left[d].eq(self.loop.count - 1), more[d].eq(self.loop.count != 1)]
                    for s in Space:
                        m.d.sync += [inc[d][s].eq(self.loop[incs[s]]), cur[d][s].eq(total[s])]
            with m.If(~valid[0]):
                m.d.sync += outer_start.eq(self.loop_pc + 1)
        with m.If(self.advance):
            m.d.sync += seq_pc.eq(self.addr + 1)
            with m.If(at_end.any()):
                for d in range(depth):
                    with m.If(back_sel[d]):
                        m.d.sync += [left[d].eq(left[d] - 1), more[d].eq(left[d] != 1)]
                        m.d.sync += [cur[d][s].eq(nxt[d][s]) for s in Space]
                    with m.Elif(pop[d]):
                        m.d.sync += valid[d].eq(0)
            with m.If(self.enter & (self.loop.count != 0)):
                # A legal LOOP is never the last instruction of an active body: nothing ends now.
                for d in range(depth):
                    with m.If(slot == d):
                        m.d.sync += valid[d].eq(1)
        with m.If(self.restart):
            m.d.sync += seq_pc.eq(self.restart_pc)
            m.d.sync += [v.eq(0) for v in valid]
        return m
