"""Operator registry and the context an operator implementation runs in.

An implementation is a function ``impl(ctx, inputs) -> list[np.ndarray]`` registered with
``@register("CONV2D")``.  ``inputs`` are numpy arrays in the graph's element types (see
tosa_ir.graph.DTYPES); the function returns one array per output, of the output tensor's
declared type.  Validation goes through the context so every message has the same form:

* ``ctx.error_if(cond, arg, text)``: the spec's ERROR_IF -> TosaError (graph is illegal).
* ``ctx.require(cond, text)``: the spec's REQUIRE -> TosaUnpredictable.
* ``ctx.level_check(cond, text)``: LEVEL_CHECK -> TosaUnpredictable, only when a level is set.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tosa_ir import Block, Graph, Operator, TosaError, TosaUnpredictable
from tosa_ir.errors import LevelRejected

OPS: dict[str, Callable] = {}

# TOSA levels: the limits LEVEL_CHECK tests against (spec section 1.6).
LEVELS = {
    "none": None,
    "8K": {"MAX_RANK": 6, "MAX_KERNEL": 8192, "MAX_STRIDE": 8192, "MAX_SCALE": 256,
           "MAX_LOG2_SIZE": 31, "MAX_NESTING": 6, "MAX_TENSOR_LIST_SIZE": 64},
}


def register(*names: str):
    def wrap(fn):
        for name in names:
            if name in OPS:
                raise AssertionError(f"operator {name} registered twice")
            OPS[name] = fn
        return fn
    return wrap


@dataclass
class OpContext:
    op: Operator
    block: Block
    graph: Graph
    interpreter: "object"   # sim.reference.interpreter.Interpreter (for control flow, variables)
    level: str = "8K"

    @property
    def name(self) -> str:
        return self.op.op

    @property
    def attrs(self) -> dict:
        return self.op.attrs

    def attr(self, key, default=None):
        return self.op.attrs.get(key, default)

    @property
    def is_tosa_1(self) -> bool:
        return self.graph.is_tosa_1

    def in_type(self, i: int) -> str:
        return self.block.tensor(self.op.inputs[i]).dtype

    def out_type(self, i: int = 0) -> str:
        return self.block.tensor(self.op.outputs[i]).dtype

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        return self.block.tensor(self.op.outputs[i]).shape

    @property
    def limits(self) -> dict | None:
        return LEVELS[self.level]

    def error_if(self, cond, arg: str, text: str) -> None:
        if bool(np.any(cond)):
            raise TosaError(self.name, arg, text, self.op.location)

    def require(self, cond, text: str) -> None:
        if not bool(np.all(cond)):
            raise TosaUnpredictable(self.name, "REQUIRE", text, self.op.location)

    def level_check(self, cond, text: str) -> None:
        if self.limits is not None and not bool(np.all(cond)):
            raise TosaUnpredictable(self.name, "LEVEL_CHECK", text, self.op.location)

    def level_reject(self, cond, text: str) -> None:
        """A LEVEL_CHECK whose failure rejects the graph (tosa_ir.errors.LevelRejected:
        compliant, as the result is unpredictable, and what the official suite expects)."""
        if self.limits is not None and not bool(np.all(cond)):
            raise LevelRejected(self.name, text, self.op.location)
