"""Netlist helpers shared by the units.

Amaranth lowers every *use* of an expression separately (no sharing of identical
subexpressions), so a value used more than once, or a wide mux's select, is held in a
Signal: one copy of its logic in the netlist, in Yosys and in the Verilated model.
"""
from __future__ import annotations

from amaranth import Signal, Value

__all__ = ["delayed", "named"]


def named(m, expr, name: str, shape=None) -> Signal:
    """``expr`` as a comb Signal (so that its logic exists once however often it is used)."""
    sig = Signal(shape if shape is not None else Value.cast(expr).shape(), name=name)
    m.d.comb += sig.eq(expr)
    return sig


def delayed(m, values: dict, prefix: str) -> dict:
    """``values`` (name -> expression) registered: the same names, each a Signal named
    ``{prefix}_{name}`` that holds the value of the cycle before (a pipeline stage's
    control signals)."""
    regs = {k: Signal(Value.cast(v).shape(), name=f"{prefix}_{k}") for k, v in values.items()}
    m.d.sync += [regs[k].eq(v) for k, v in values.items()]
    return regs
