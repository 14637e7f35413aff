"""LOOP sequencing (isa/instructions.py, LOOP): which instruction runs next, and the address
offsets of the current loop iterations.

Shared by the ISA simulator (sim/isa/sim.py) and the cycle model (sim/npu_timing.py), which
both walk programs in issue order.  The rules, as the RTL's loop stack (hw/loop.py)
implements them:

* a legal LOOP at ``pc`` with ``count > 0`` pushes a level whose body is ``pc+1 .. pc+body``
  and execution goes on at ``pc+1``; with ``count == 0`` execution goes on as if the body's
  last instruction had just run (so an enclosing loop whose body ends there loops back);
* after the instruction at ``pc`` runs, while the innermost level's body ends at ``pc``: if
  it has iterations left, go back to its first instruction (iteration + 1); otherwise the
  level ends and the next level out is considered.  Else execution goes on at ``pc+1``.

With a ``config``, :meth:`LoopStack.illegal` also applies LOOP's sweep rule (an increment
moving its space by at least the memory's size over the iterations), which bounds the
offsets (isa/instructions.py ``offset_bits``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from isa.instructions import LOOP_DEPTH, Space, loop_increments, loop_sweep_error, space_size

_INCREMENTS = {s: f.name for s, f in loop_increments().items()}


@dataclass
class _Level:
    start: int                # first instruction of the body
    end: int                  # one past its last instruction
    count: int
    increments: dict
    iteration: int = 0


@dataclass
class LoopStack:
    """Active loops of a program of ``prog_len`` instructions; ``offsets[space]`` is the sum
    over the active loops of iteration * increment (rows, or bytes for EXT)."""

    prog_len: int
    buffer_rows: int | None = None        # imem_rows: a body must leave a row of the buffer free
    config: object = None                 # NpuConfig: increments bounded by the spaces' sizes
    levels: list = field(default_factory=list)
    offsets: dict = field(default_factory=lambda: {s: 0 for s in Space})

    def illegal(self, pc: int, v: dict) -> str | None:
        """Why the LOOP with fields ``v`` at ``pc`` is ILLEGAL_INSTRUCTION, or None."""
        body, last = v["body"], pc + v["body"]
        if body == 0:
            return "LOOP with body=0"
        if last >= self.prog_len:
            return f"LOOP body ends at instruction {last}, past the last of {self.prog_len}"
        if self.buffer_rows is not None and body >= self.buffer_rows:
            return (f"LOOP body of {body} instructions: the instruction buffer ({self.buffer_rows}) must hold "
                    f"the body and the instruction after it")
        if len(self.levels) >= LOOP_DEPTH:
            return f"LOOP nested deeper than LOOP_DEPTH={LOOP_DEPTH}"
        if self.levels and last >= self.levels[-1].end:
            return (f"LOOP body ends at instruction {last}, past the enclosing body's last "
                    f"instruction {self.levels[-1].end - 1}")
        space = loop_sweep_error(v, self.config) if self.config is not None else None
        if space is not None:
            inc = v[loop_increments()[space].name]
            return (f"LOOP of {v['count']} iterations moves {space.name} by {inc} each: "
                    f"{(v['count'] - 1) * abs(inc)}, at least the space's size {space_size(space, self.config)}")
        return None

    def enter(self, pc: int, v: dict) -> int:
        """Start the (legal) LOOP at ``pc``; returns the next instruction's index."""
        if v["count"] == 0:
            return self.advance(pc + v["body"])
        incs = {s: v[name] for s, name in _INCREMENTS.items()}
        self.levels.append(_Level(pc + 1, pc + 1 + v["body"], v["count"], incs))
        return pc + 1

    def advance(self, pc: int) -> int:
        """The instruction at ``pc`` has run: returns the next index, looping back or ending
        loops whose body ends at ``pc``."""
        nxt = pc + 1
        while self.levels and self.levels[-1].end == nxt:
            level = self.levels[-1]
            if level.iteration + 1 < level.count:
                level.iteration += 1
                for s, inc in level.increments.items():
                    self.offsets[s] += inc
                return level.start
            self.levels.pop()
            for s, inc in level.increments.items():
                self.offsets[s] -= level.iteration * inc
        return nxt

    @property
    def active(self) -> bool:
        return bool(self.levels)

    def iterations(self) -> tuple[int, ...]:
        """Iteration index of every active loop, outermost first (for traces)."""
        return tuple(level.iteration for level in self.levels)
