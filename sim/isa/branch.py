"""BRANCH (isa/instructions.py): legality, the condition read, and the budget of taken
backward branches.

Shared by the ISA simulator (sim/isa/sim.py), which evaluates conditions on the machine
state, and the cycle model (sim/npu_timing.py), which needs only legality and, for a static
walk of a program, the unconditional branches.
"""
from __future__ import annotations

import numpy as np

from isa.config import NpuConfig
from isa.instructions import BranchTest, BranchType, ErrorCode, VecDst
from sim.isa.units import ACC, ASRAM, Footprint, Trap
from isa.instructions import Unit


def rows_of(mem: int, config: NpuConfig) -> int:
    """Rows of the memory a condition is read from."""
    return config.asram_rows if mem == VecDst.ASRAM else config.acc_rows


def check(pc: int, v: dict, prog_len: int, loops_active: bool, config: NpuConfig) -> None:
    """Raise :class:`Trap` if the BRANCH with fields ``v`` at ``pc`` is illegal (errors that
    depend on the fields and the loop state only, in the ISA's priority order)."""
    if v["test"] not in tuple(BranchTest):
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, f"BRANCH test={v['test']} is not a BranchTest")
    if v["target"] >= prog_len:
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION,
                   f"BRANCH target {v['target']} is past the last of {prog_len} instructions")
    if loops_active:
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, "BRANCH inside an active LOOP")
    if v["test"] != BranchTest.ALWAYS and v["row"] >= rows_of(v["mem"], config):
        raise Trap(ErrorCode.SRAM_OVERFLOW,
                   f"BRANCH condition row {v['row']} past the end of {VecDst(v['mem']).name}")


def condition(state, v: dict) -> int:
    """Lane 0 of the condition vector (``read(mem, dtype, row)``), as a Python int."""
    row = v["row"]
    if v["mem"] == VecDst.ASRAM:
        raw = state.asram[row]
        if v["dtype"] == BranchType.INT8:
            return int(raw[:1].view(np.int8)[0])
        return int(raw[:4].view("<i4")[0])
    lane = int(state.acc[row, 0])
    return int(np.int32(lane).astype(np.int8)) if v["dtype"] == BranchType.INT8 else lane


def taken(state, v: dict) -> bool:
    """Whether the (legal) BRANCH with fields ``v`` jumps, on ``state``'s scratchpads."""
    if v["test"] == BranchTest.ALWAYS:
        return True
    x = condition(state, v)
    return x == 0 if v["test"] == BranchTest.ZERO else x != 0


def footprint(v: dict) -> Footprint | None:
    """The condition row read (for the hazard checker); nothing for ALWAYS."""
    if v["test"] == BranchTest.ALWAYS:
        return None
    mem = ASRAM if v["mem"] == VecDst.ASRAM else ACC
    return Footprint(Unit.SEQ, reads=[(mem, (v["row"], v["row"] + 1))])


class BackwardBudget:
    """``back_taken`` of the ISA: taken backward branches since the start of the run."""

    def __init__(self):
        self.count = 0

    def take(self, pc: int, v: dict) -> None:
        """Account for a taken branch at ``pc``; raise BRANCH_LIMIT past its ``limit``."""
        if v["target"] > pc:
            return
        if self.count >= v["limit"]:
            raise Trap(ErrorCode.BRANCH_LIMIT,
                       f"taken backward BRANCH number {self.count + 1} exceeds its limit of {v['limit']}")
        self.count += 1
