"""Netlist helpers shared by the units.

Amaranth lowers every *use* of an expression separately (no sharing of identical
subexpressions), so a value used more than once, or a wide mux's select, is held in a
Signal: one copy of its logic in the netlist, in Yosys and in the Verilated model.
"""
from __future__ import annotations

from amaranth import Signal, Value

__all__ = ["named"]


def named(m, expr, name: str, shape=None) -> Signal:
    """``expr`` as a comb Signal (so that its logic exists once however often it is used)."""
    sig = Signal(shape if shape is not None else Value.cast(expr).shape(), name=name)
    m.d.comb += sig.eq(expr)
    return sig
