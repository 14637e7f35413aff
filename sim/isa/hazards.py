"""Hazard checker: scratchpad conflicts between instructions that the wait masks let overlap.

The ISA simulator executes in program order, which is only what the hardware computes if
every pair of instructions that touch the same scratchpad word in conflicting ways (one of
them writes) does not overlap in time.  The compiler guarantees that with the ``wait``
masks; this module checks it.  Given each executed instruction's :class:`Footprint` and its
``(start, end)`` cycles from the timing model (sim/npu_timing.py, which applies the wait
masks), it reports every pair on *different* units whose execution intervals overlap and
whose footprints conflict.  Instructions of one unit run in order inside that unit, so
their ordering is the unit's business, not the compiler's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.asm import disassemble_one
from isa.encoding import Instruction

from sim.isa.units import Footprint


@dataclass(frozen=True)
class Hazard:
    """Instruction ``later_pc`` touches ``memory`` row ``row`` that ``earlier_pc``, still
    running, also touches; ``kind`` is RAW (earlier writes, later reads), WAR or WAW."""

    kind: str
    memory: str
    row: int
    earlier_pc: int
    later_pc: int
    earlier: str
    later: str

    def __str__(self) -> str:
        return (f"{self.kind} hazard on {self.memory} row {self.row}: pc {self.later_pc} "
                f"({self.later}) overlaps pc {self.earlier_pc} ({self.earlier}) without a wait")


def _first_common(a, b) -> int | None:
    """Smallest row in both accesses (a range ``(lo, hi)`` or an index array), or None."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        lo, hi = max(a[0], b[0]), min(a[1], b[1])
        return lo if lo < hi else None
    if isinstance(a, tuple):
        a, b = b, a
    if isinstance(b, tuple):
        hits = a[(a >= b[0]) & (a < b[1])]
    else:
        hits = np.intersect1d(a, b)
    return int(hits.min()) if hits.size else None


def _conflict(kind, first_accesses, second_accesses):
    for mem, rows in first_accesses:
        for mem2, rows2 in second_accesses:
            if mem == mem2:
                row = _first_common(rows, rows2)
                if row is not None:
                    return kind, mem, row
    return None


def _label(instr: Instruction | str) -> str:
    return disassemble_one(instr) if isinstance(instr, Instruction) else str(instr)


def find_hazards(executed: list[tuple[int, Instruction | str, Footprint | None]],
                 intervals: list[tuple[int, int]]) -> list[Hazard]:
    """Conflicting pairs among ``executed`` (pc, instruction or label, footprint), in program
    (issue) order, whose k-th entry ran during ``intervals[k] = (start, end)`` (end exclusive).
    Inside loops one pc appears once per iteration.

    Instructions without a footprint (HALT, SYNC) are skipped.  At most one hazard is
    reported per pair (the first of RAW, WAR, WAW found).
    """
    order = sorted((k for k in range(len(executed)) if executed[k][2] is not None),
                   key=lambda k: intervals[k][0])
    active: list[int] = []
    hazards = []
    for k in order:
        start = intervals[k][0]
        active = [i for i in active if intervals[i][1] > start]
        fp = executed[k][2]
        for i in active:
            if executed[i][2].unit == fp.unit:
                continue
            first, second = (i, k) if i < k else (k, i)      # list order is program order
            a, b = executed[first][2], executed[second][2]
            found = (_conflict("RAW", a.writes, b.reads) or _conflict("WAR", a.reads, b.writes)
                     or _conflict("WAW", a.writes, b.writes))
            if found:
                kind, mem, row = found
                hazards.append(Hazard(kind, mem, row, executed[first][0], executed[second][0],
                                      _label(executed[first][1]), _label(executed[second][1])))
        if intervals[k][1] > start:
            active.append(k)
    hazards.sort(key=lambda h: (h.later_pc, h.earlier_pc))
    return hazards
