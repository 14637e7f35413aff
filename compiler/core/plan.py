"""The plan base: a layer lowered to instructions, with what the reports say about it.

Every kind whose instructions depend on no choice returns a :class:`Plan` subclass from its
``lower`` (compiler/core/kind.py): the layer, its instructions (``Op`` s with footprints; the
scheduler, compiler/program/schedule.py, orders them and sets the wait masks) and a one-line
``describe()`` for reports.  Convolutions on the MAC array choose among tilings first
(compiler/kinds/conv/plan.py ``ConvPlan``) and emit their instructions after the choice.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from compiler.core.ops import Op

__all__ = ["Plan"]


@dataclass
class Plan:
    """``layer`` lowered to ``ops``; ``estimate``: figures a kind reports (may stay empty)."""

    layer: object
    ops: list[Op]
    estimate: dict = field(default_factory=dict, kw_only=True)

    def describe(self) -> str:
        return f"{type(self.layer).__name__} ({len(self.ops)} instructions)"
