"""Scratchpad write ports: one writer per memory at a time.

Real SRAM has one or two ports per bank (ECP5 DP16KD: two; iCE40 SB_RAM40_4K: one read and
one write; ASIC macros: 1RW or 1R1W).  A memory with one write port can be replicated for
as many read ports as its readers need (every copy takes the same write), so **write ports
are what a buildable design must ration**.  ASRAM and ACC each have two writers:

========  ============================  ===============================================
memory    writers                       when they would overlap
========  ============================  ===============================================
ASRAM     DMA (DMA_LOAD to ASRAM),      a load of the next tile while the vector unit
          vector unit (ACT, VRESCALE,   writes results
          VALU, VPOOL, TABLE lookups,
          VDWCONV)
ACC       MXU (MATMUL),                 an elementwise int32 result written to ACC while
          vector unit (d_mem ACC)       the array accumulates
========  ============================  ===============================================

The rule (what the sequencer enforces at issue, and the cycle model reproduces): **an
instruction that writes a memory issues only when the other writer of that memory is not
busy with an instruction that writes it.**  It works like an extra bit in the wait mask,
decided from the instruction fields and what the other unit is running, so each memory has
one writer in any cycle and the NPU builds it with a single write port (hw/top.py muxes the
two writers onto it).  Units that write different memories still overlap fully: the MAC
array streams (it reads ASRAM and writes ACC, which only a vector instruction writing ACC
contends for), weights load into WSRAM, and parameters into PSRAM, alongside everything.

Why not banks with conflict stalls (Gemmini's arbitration per bank)?  A stall that depends on
which bank two streams hit in the same cycle makes every unit's timing depend on every other
unit's address stream; this rule keeps the timing a function of the instruction fields and
of the busy intervals the cycle model already has, so the ISA simulator stays exact at no
cost, and the compiler orders instructions so the rule rarely waits (it costs AlexNet nothing
measurable; see docs/hardware.md for figures).

:func:`writes` is the one definition of who writes what.  It is evaluated on plain integers
(the cycle model) and on Amaranth values (the sequencer's issue logic), so the two cannot
drift apart.
"""
from __future__ import annotations

from isa.instructions import Sram, TableMode, Unit, VecDst

__all__ = ["MEMORIES", "WRITERS", "READERS", "BRANCH_PORT_UNIT", "writes", "written", "other_writer"]

#: Memories with two writers, and the units that write them.
WRITERS = {"ASRAM": ("DMA", "VPU"), "ACC": ("MXU", "VPU")}
MEMORIES = tuple(WRITERS)

#: Read ports of the two-writer memories: one per reader that runs alongside the others
#: (block RAM: one copy of the memory per read port, all taking the one write).
READERS = {
    "ASRAM": ("DMA (store)", "MXU", "vector a (VPU, TABLE, BRANCH)", "vector b", "vector c"),
    "ACC": ("MXU (accumulate)", "vector a (VPU, TABLE, BRANCH)", "vector b", "vector c"),
}

#: A BRANCH reads its condition row through this unit's first operand port (one copy of
#: ASRAM and of ACC less to build), so it also waits until that unit is idle, as if the unit
#: were in its wait mask.  The TABLE unit shares the same port (it never runs with the VPU).
BRANCH_PORT_UNIT = "VPU"

_VECTOR_DST = ("VRESCALE", "VALU", "VPOOL", "VDWCONV")


def writes(name: str, field, memory: str):
    """Whether the instruction ``name`` writes ``memory`` ("ASRAM" or "ACC").

    ``field(f)`` returns field ``f`` of the instruction: an int (the result is a bool) or an
    Amaranth value (the result is a 1-bit expression; only ``==``, ``!=`` and ``&`` are used).
    The result does not depend on sizes: an instruction that moves no data still counts
    (it never makes its unit busy, so it never makes anything wait).
    """
    if memory not in WRITERS:
        raise ValueError(f"no write rule for {memory!r}")
    if name == "DMA_LOAD":
        return field("sram") == Sram.ASRAM if memory == "ASRAM" else False
    if name == "MATMUL":
        return memory == "ACC"
    if name == "ACT":
        return memory == "ASRAM"
    dst = VecDst[memory]
    if name in _VECTOR_DST:
        return field("d_mem") == dst
    if name == "TABLE":                     # LOAD writes the table memory only
        return (field("mode") != TableMode.LOAD) & (field("d_mem") == dst)
    return False


def written(name: str, values: dict) -> tuple[str, ...]:
    """The two-writer memories the instruction ``name`` with field ``values`` writes."""
    return tuple(mem for mem in MEMORIES if writes(name, values.__getitem__, mem))


def other_writer(unit: str, memory: str) -> str:
    """The unit that shares ``memory``'s write port with ``unit``."""
    first, second = WRITERS[memory]
    if unit not in (first, second):
        raise ValueError(f"{unit} does not write {memory}")
    return second if unit == first else first


assert all(u in Unit.__members__ for pair in WRITERS.values() for u in pair)
