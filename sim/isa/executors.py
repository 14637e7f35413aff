"""Every instruction's executor, by instruction name: the one dispatch table of the ISA simulator.

sim/isa/units.py executes DMA, MATMUL and ACT; the vector unit's instructions build on its state
and live in sim/isa/vpu.py (VRESCALE, VALU, VPOOL) and sim/isa/table.py (TABLE).  Gathering
them here keeps the imports one way (units <- vpu <- table <- executors <- sim).
"""
from __future__ import annotations

from sim.isa import table, units, vpu

__all__ = ["EXECUTORS"]

EXECUTORS = {**units.EXECUTORS, **vpu.EXECUTORS, **table.EXECUTORS}
