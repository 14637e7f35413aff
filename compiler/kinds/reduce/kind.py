"""REDUCE_SUM / MAX / MIN / ANY / ALL on VPOOL (layer.py, lower.py); axes longer than one
window are split by compiler/kinds/decompose/reduce_split.py."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.reduce.layer import ReduceLayer
from compiler.kinds.reduce.lower import lower_reduce

KIND = Kind("reduce", ReduceLayer,
            lower=lambda layer, ctx, i: lower_reduce(layer, ctx.flow, ctx.ext, ctx.config, i),
            vector_unit=True)
