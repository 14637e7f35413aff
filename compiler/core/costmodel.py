"""Per-instruction timing used by the scheduler and the tile search.

Two numbers per instruction, from the RTL's cycle model (sim/npu_timing.py):

* ``occupancy``: cycles from issue until the unit accepts its next instruction.  The DMA
  and the VPU take a new command only when idle; the MXU streams consecutive MATMULs and
  accepts the next one in the last cycle it reads inputs or weights.
* ``busy``: cycles from issue until the unit is idle (what another instruction's ``wait``
  on this unit waits for).  The MXU drains its ``array_rows``-deep pipeline after the
  last input.
"""
from __future__ import annotations

from functools import lru_cache

from isa import matmul
from isa.config import NpuConfig
from isa.encoding import Instruction
from isa.instructions import Unit
from sim.npu_timing import TimingModel

ACT_OVERHEAD = 6     # issue to idle, besides one cycle per row (sim/npu_timing.py)
MXU_DRAIN = 3        # issue to idle, besides one cycle per input and the array depth


def dma_words(v: dict) -> int:
    """Scratchpad words a DMA instruction transfers (padding included)."""
    lines = v.get("pad_b1", 0) + v["len1"] + v.get("pad_a1", 0)
    per_line = v.get("pad_b0", 0) + v["len0"] + v.get("pad_a0", 0)
    return v["len2"] * lines * per_line


def matmul_timing(rows: int, vectors: int, a_type: int = 0) -> tuple[int, int]:
    """(occupancy, busy) of a MATMUL streaming ``vectors`` inputs through ``rows`` array rows
    (``a_type`` INT16: each input vector is two ASRAM rows, so half rate; isa/matmul.py)."""
    if vectors == 0:
        return 1, 0
    if a_type:
        return (matmul.front_end_cycles(rows, vectors, a_type),
                matmul.busy_cycles(rows, vectors, a_type) + 1)
    return max(vectors, rows), vectors + rows + MXU_DRAIN


@lru_cache(maxsize=8)
def _model(config: NpuConfig) -> TimingModel:
    return TimingModel(config)


def instr_timing(instr: Instruction, config: NpuConfig) -> tuple[int, int]:
    """(occupancy, busy) cycles of ``instr``."""
    if instr.name == "MATMUL":
        return matmul_timing(config.array_rows, instr.values["n0"] * instr.values["n1"],
                             instr.values.get("a_type", 0))
    if instr.name in ("DMA_LOAD", "DMA_STORE") or instr.defn.unit is Unit.VPU:
        cycles = _model(config).duration(instr)
        return (cycles + 1, cycles + 1) if cycles else (1, 0)
    if instr.name == "BRANCH":      # condition read, then issue (a taken one refetches: +1)
        return 2, 0
    return 1, 0
