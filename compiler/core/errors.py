"""The compiler's user errors about one operator: ``Unsupported`` (exit code 3) or ``InvalidInput``
(exit code 2), naming the operator, its location in the model and the reason on one line.

Every kind, graph pass and the linker raise them through these two helpers, so the message
format is the same everywhere (tosa_ir/errors.py holds the classes).
"""
from __future__ import annotations

from tosa_ir import Operator
from tosa_ir.errors import InvalidInput, Unsupported

__all__ = ["invalid", "unsupported"]


def unsupported(op: Operator, reason: str) -> Unsupported:
    where = f" at {op.location}" if op.location else ""
    return Unsupported(f"{op.op}{where}: {reason}")


def invalid(op: Operator, reason: str) -> InvalidInput:
    where = f" at {op.location}" if op.location else ""
    return InvalidInput(f"{op.op}{where}: {reason}")
