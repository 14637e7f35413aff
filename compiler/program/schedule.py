"""Scheduling: order the instructions for overlap and set every ``wait`` mask.

The machine issues in program order, at most one instruction per cycle.  An instruction
issues once its own unit is *ready* for it and every unit in its ``wait`` mask is *idle*.
A unit runs its own instructions in order (the MXU streams MATMULs back to back and
orders their accumulator updates itself), so only dependences between different units
need a wait: an instruction must name every other unit that may still be running an
earlier instruction it conflicts with (reads what that one writes, or writes what it
reads or writes).

1. **Dependences.**  Walking the lowering's natural order, each op depends on every earlier
   op whose footprint conflicts with its own (compiler/core/ops.py).  An access fully covered by
   a later write is dropped from the search: anything conflicting with it conflicts with
   that write, which already depends on it.
2. **Order.**  Any topological order of the dependence graph computes the same values.  The
   lowering's natural order is already software-pipelined per tile, so the scheduler keeps
   it, except that it *hoists* a ready op (among the next ``WINDOW`` in natural order) in
   front of the natural next op when, by the timing model (compiler/core/costmodel.py), it can
   issue earlier and uses no unit the natural next op waits for or runs on: a load for the
   next tile starts while the array still works on this one, without delaying it.  The
   model knows the one-write-port rule (isa/ports.py): an op writing ASRAM or ACC waits for
   the memory's other writer, and is not hoisted in front of an op it would delay that way.
3. **Wait masks.**  The scheduler tracks what is *known complete*: when an instruction
   issues, every earlier instruction of each unit in its mask has completed, and so has
   everything those knew at their own issue.  (Issue on a unit does not prove the unit's
   earlier work complete: the MXU accepts a MATMUL while the previous one drains.)  A
   dependence on an op not known complete puts that op's unit in the mask; bits implied
   by the others are dropped.  An ACT waiting for the MXU takes ``mxu_lag`` = the busy
   MATMULs emitted after the last one it depends on (at most 3, isa/instructions.py): it
   then waits for those to finish, not for the array to empty, and only they are known
   complete after it (the lag is dropped where that knowledge would not cover every
   dependence the other wait bits were dropped for).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.encoding import Instruction, make
from isa.instructions import MXU_LAG_BITS, Unit
from isa.ports import other_writer, written

from compiler.core.ops import FixedOp, Op

UNITS = (Unit.DMA, Unit.MXU, Unit.VPU)
WINDOW = 32
MAX_LAG = (1 << MXU_LAG_BITS) - 1      # ACT's mxu_lag field
SERIAL = (Unit.DMA, Unit.VPU)          # units that take an op only when idle (sim/npu_timing.py)


@dataclass
class Scheduled:
    """The scheduled program: ops in issue order (waits set) and the modelled timeline."""

    ops: list[Op]
    issue: list[int]
    finish: list[int]

    @property
    def cycles(self) -> int:
        return max(self.finish, default=0)


class _Accesses:
    """The live accesses to one memory: ``[lo, hi)``, write flag, op index, in arrays that
    grow by doubling (appending one access copies nothing)."""

    def __init__(self):
        self.n = 0
        self.data = np.zeros((4, 64), dtype=np.int64)      # rows: lo, hi, is_write, op

    def live(self) -> np.ndarray:
        return self.data[:, :self.n]

    def conflicts(self, lo: int, hi: int, is_write: bool) -> list[int]:
        """Ops of the live accesses overlapping ``[lo, hi)`` that conflict with it."""
        d = self.live()
        hit = (d[0] < hi) & (lo < d[1])
        if not is_write:
            hit &= d[2] != 0
        return d[3][hit].tolist()

    def add(self, lo: int, hi: int, is_write: bool, op: int) -> None:
        if is_write:   # accesses inside this write are shadowed by it
            d = self.live()
            keep = ~((d[0] >= lo) & (d[1] <= hi))
            if not keep.all():
                kept = d[:, keep]
                self.n = kept.shape[1]
                self.data[:, :self.n] = kept
        if self.n == self.data.shape[1]:
            self.data = np.concatenate([self.data, np.zeros_like(self.data)], axis=1)
        self.data[:, self.n] = (lo, hi, is_write, op)
        self.n += 1


def dependences(ops: list[Op]) -> list[list[int]]:
    """For each op, the earlier ops it conflicts with."""
    tables: dict[str, _Accesses] = {}
    preds: list[list[int]] = []
    for i, op in enumerate(ops):
        found: set[int] = set()
        accesses = [(a, False) for a in op.reads] + [(a, True) for a in op.writes]
        for (mem, lo, hi), is_write in accesses:
            if hi > lo and mem in tables:
                found.update(tables[mem].conflicts(lo, hi, is_write))
        found.discard(i)
        preds.append(sorted(found))
        for (mem, lo, hi), is_write in accesses:
            if hi > lo:
                tables.setdefault(mem, _Accesses()).add(lo, hi, is_write, i)
    return preds


class _Machine:
    """Issue-time model and completion knowledge of the ops emitted so far."""

    def __init__(self, ops: list[Op], preds: list[list[int]]):
        self.ops, self.preds = ops, preds
        self.last_issue = -1
        self.ready = {u: 0 for u in UNITS}             # cycle each unit takes a new op
        self.idle = {u: 0 for u in UNITS}              # cycle each unit becomes idle
        self.count = {u: 0 for u in UNITS}             # ops emitted per unit
        self.last = {u: None for u in UNITS}           # last emitted op per unit
        self.known = {u: 0 for u in UNITS}             # per unit: ops known complete
        self.ordinal: dict[int, int] = {}              # op -> index among its unit's ops
        self.known_at: dict[int, dict] = {}            # op -> knowledge at its issue
        self.latest: dict[int, dict] = {}              # op -> {unit: last ordinal it depends on}
        self.writing = {u: () for u in UNITS}          # memories each unit's last op writes
        self.mxu_done: list[tuple[int, int]] = []      # (op, first idle cycle) of busy MXU ops
        self.units = [op.unit for op in ops]          # looked up once: hot in evaluate()
        self.written = [written(op.instr.name, op.instr.values) if u in UNITS else ()
                        for op, u in zip(ops, self.units)]

    def sharers(self, i: int) -> tuple:
        """Units op ``i`` must wait for by the one-write-port rule (isa/ports.py): the other
        writer of a memory it writes, while that unit's last op writes it too."""
        out = []
        for mem in self.written[i]:
            other = Unit[other_writer(self.units[i].name, mem)]
            if mem in self.writing[other]:
                out.append(other)
        return tuple(out)

    def _merge(self, base: dict, units) -> dict:
        """Knowledge after waiting for ``units`` to be idle."""
        k = dict(base)
        for u in units:
            k[u] = max(k[u], self.count[u])
            if self.last[u] is not None:
                for w, n in self.known_at[self.last[u]].items():
                    k[w] = max(k[w], n)
        return k

    def _merge_lag(self, base: dict, units, lag: int) -> dict:
        """Knowledge after waiting for ``units``, the MXU with ``lag`` (ACT's mxu_lag): every
        MXU op up to the one ``lag + 1`` from the last busy one is complete, not the rest."""
        if not lag:
            return self._merge(base, units)
        k = self._merge(base, [u for u in units if u != Unit.MXU])
        op = self.mxu_done[-lag - 1][0]
        k[Unit.MXU] = max(k[Unit.MXU], self.ordinal[op] + 1)
        for w, n in self.known_at[op].items():
            k[w] = max(k[w], n)
        return k

    def _lag(self, i: int, waits: tuple) -> int:
        """The mxu_lag an ACT waiting for the MXU can take: the busy MXU ops emitted after the
        last one it depends on (at most MAX_LAG), 0 where that knowledge would not cover
        every dependence."""
        if Unit.MXU not in waits or self.ops[i].instr.name != "ACT":
            return 0
        dep = self.latest[i].get(Unit.MXU, -1)
        after = 0
        for op, _ in reversed(self.mxu_done):
            if self.ordinal[op] <= dep:
                break
            after += 1
        if after == len(self.mxu_done):     # it depends on no busy MXU op: no lag to take
            return 0
        lag = min(after, MAX_LAG)
        if lag and self._unknown_units(i, self._merge_lag(self.known, waits, lag)):
            return 0
        return lag

    def _unknown_units(self, i: int, known: dict) -> set:
        latest = self.latest.get(i)
        if latest is None:
            # Per other unit, the last of its ops that ``i`` depends on (all emitted by the
            # time ``i`` is ready): the others complete before it.
            own, units = self.units[i], self.units
            latest = {}
            for p in self.preds[i]:
                u = units[p]
                if u != own:
                    latest[u] = max(latest.get(u, -1), self.ordinal[p])
            self.latest[i] = latest
        return {u for u, n in latest.items() if n >= known[u]}

    def evaluate(self, i: int) -> tuple[int, tuple]:
        """(issue cycle, wait units) if op ``i`` were emitted next."""
        unit = self.units[i]
        if unit not in UNITS:   # HALT: waits for every unit by definition
            return max([self.last_issue + 1] + list(self.idle.values())), (), 0
        need = self._unknown_units(i, self.known)
        for u in sorted(need):
            rest = need - {u}
            if not self._unknown_units(i, self._merge(self.known, rest)):
                need = rest
        waits = tuple(sorted(need))
        lag = self._lag(i, waits)
        idle = dict(self.idle)
        if lag:
            idle[Unit.MXU] = self.mxu_done[-lag - 1][1]
        issue = max([self.last_issue + 1, self.ready[unit]] + [idle[u] for u in waits]
                    + [self.idle[u] for u in self.sharers(i)])
        return issue, waits, lag

    def emit(self, i: int, issue: int, waits: tuple, lag: int = 0) -> int:
        op = self.ops[i]
        unit = op.unit
        self.known = self._merge_lag(self.known, waits, lag)
        self.last_issue = issue
        if unit not in UNITS:
            return issue + 1
        self.ordinal[i] = self.count[unit]
        if unit in SERIAL:     # it issues only once its unit is idle: earlier ops are complete
            self.known[unit] = max(self.known[unit], self.ordinal[i])
        self.known_at[i] = dict(self.known)
        self.count[unit] += 1
        self.last[unit] = i
        self.ready[unit] = issue + op.occupancy
        self.idle[unit] = max(self.idle[unit], issue + op.busy)
        self.writing[unit] = self.written[i]
        if unit == Unit.MXU and op.busy:
            self.mxu_done.append((i, issue + op.busy))
        return issue + max(op.busy, 1)


def schedule(ops: list[Op]) -> Scheduled:
    """Order ``ops`` (then HALT) and set their wait masks.

    A BRANCH is a barrier: it waits for every unit (``wait`` = all) and nothing moves across
    it; in a stream with branches a SYNC is one too (it marks where a branch may land).  The
    runs between barriers are scheduled independently and keep their lengths, so every
    index that starts a run (a branch target must) stays valid.

    Runs of *fixed* ops (emitted with their waits and LOOPs, e.g. the fully-connected
    lowering: compiler/kinds/conv/fully_connected.py) stay as they are; they start and
    end with a full barrier, so the runs around them are scheduled independently (the
    HALT closing a run before a fixed one is dropped).  Their modelled timeline is the
    lowering's estimate, the fixed run counting as one span.
    """

    if any(op.instr.name == "BRANCH" for op in ops):
        return _schedule_around_branches(ops)
    if not any(isinstance(op, FixedOp) for op in ops):
        return _schedule_run(ops)
    out, issues, finishes = [], [], []
    now = 0
    for fixed, run in _runs(ops, FixedOp):
        if fixed:
            cycles = len(run) + sum(op.busy for op in run if op.instr.name == "DMA_LOAD")
            out += run
            issues += [now] * len(run)
            finishes += [now + cycles] * len(run)
            now += cycles
            continue
        part = _schedule_run(run)
        out += part.ops[:-1]                     # without its HALT
        issues += [now + t for t in part.issue[:-1]]
        finishes += [now + t for t in part.finish[:-1]]
        now = max(finishes, default=now)
    out.append(Op(make("HALT"), layer=out[-1].layer))
    issues.append(now)
    finishes.append(now + 1)
    return Scheduled(out, issues, finishes)


BARRIERS = ("BRANCH", "SYNC")      # in a stream with branches


def run_starts(ops: list[Op]) -> set[int]:
    """Indices a BRANCH may target: 0, every barrier and the instruction after it, the end."""
    starts = {0, len(ops)}
    for i, op in enumerate(ops):
        if op.instr.name in BARRIERS:
            starts |= {i, i + 1}
    return starts


def _schedule_around_branches(ops: list[Op]) -> Scheduled:
    """Schedule the runs between BRANCHes apart; each BRANCH waits for every unit."""
    starts = run_starts(ops)
    for op in ops:
        if op.instr.name == "BRANCH" and op.instr.values["target"] not in starts:
            raise AssertionError(f"BRANCH target {op.instr.values['target']} is inside a run the "
                                 "scheduler may reorder")
    out, issues, finishes = [], [], []
    now = 0
    run: list[Op] = []
    all_units = sum(1 << int(u) for u in UNITS)
    for op in ops + [None]:
        if op is not None and op.instr.name not in BARRIERS:
            run.append(op)
            continue
        if run:
            part = schedule(run)
            out += part.ops[:-1]                 # without its HALT
            issues += [now + t for t in part.issue[:-1]]
            finishes += [now + t for t in part.finish[:-1]]
            now = max(finishes, default=now)
            run = []
        if op is not None:
            out.append(Op(Instruction(op.instr.name, {**op.instr.values, "wait": all_units}), op.layer,
                          op.reads, op.writes, op.occupancy, op.busy))
            issues.append(now)
            now += op.occupancy
            finishes.append(now)
    out.append(Op(make("HALT"), layer=out[-1].layer if out else 0))
    issues.append(now)
    finishes.append(now + 1)
    return Scheduled(out, issues, finishes)


def _runs(ops: list[Op], kind: type) -> list[tuple[bool, list[Op]]]:
    """Maximal runs of ops that are / are not instances of ``kind``."""
    runs: list[tuple[bool, list[Op]]] = []
    for op in ops:
        flag = isinstance(op, kind)
        if runs and runs[-1][0] == flag:
            runs[-1][1].append(op)
        else:
            runs.append((flag, [op]))
    return runs


def _schedule_run(ops: list[Op]) -> Scheduled:
    halt = Op(make("HALT"), layer=ops[-1].layer if ops else 0)
    ops = list(ops) + [halt]
    preds = dependences(ops)
    preds[-1] = list(range(len(ops) - 1))
    succs: list[list[int]] = [[] for _ in ops]
    missing = [len(p) for p in preds]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    ready = [i for i, m in enumerate(missing) if m == 0]
    machine = _Machine(ops, preds)
    out_ops, issues, finishes = [], [], []
    while ready:
        i, issue, waits, lag = _pick(machine, ready)
        ready.remove(i)
        finishes.append(machine.emit(i, issue, waits, lag))
        issues.append(issue)
        op = ops[i]
        values = {**op.instr.values, "wait": sum(1 << int(u) for u in waits)}
        if lag:
            values["mxu_lag"] = lag
        out_ops.append(Op(Instruction(op.instr.name, values), op.layer, op.reads, op.writes, op.occupancy,
                          op.busy))
        for s in succs[i]:
            missing[s] -= 1
            if missing[s] == 0:
                _insert_sorted(ready, s)
    if len(out_ops) != len(ops):
        raise AssertionError("dependence cycle in the instruction stream")
    return Scheduled(out_ops, issues, finishes)


def _pick(machine: _Machine, ready: list[int]) -> tuple[int, int, tuple, int]:
    """The natural next op, or an op that can go first without delaying it: (op, issue
    cycle, wait units, mxu_lag)."""
    first = ready[0]
    issue, waits, lag = machine.evaluate(first)
    blocked = set(waits) | set(machine.sharers(first)) | {machine.units[first]}
    best = (first, issue, waits, lag)
    for i in ready[1:WINDOW]:
        if machine.units[i] in blocked:
            continue
        when, w, k = machine.evaluate(i)
        if when < best[1]:
            best = (i, when, w, k)
    return best


def _insert_sorted(items: list[int], value: int) -> None:
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    items.insert(lo, value)
