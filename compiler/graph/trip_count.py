"""The trip count of a WHILE_LOOP when it is a compile-time constant.

A loop's trip count is known without data when every loop variable its condition depends on
(through the condition, and through the body's updates of those variables, to a fixed
point) starts from a constant of the main block: ``i = 0; while i < 10: i += 1; x = f(x)``
runs 10 times whatever ``x``.  The count is then found by running the condition and the
part of the body that updates those variables in the reference interpreter
(sim/reference/interpreter.py), the golden model: no second copy of operator semantics.
"""
from __future__ import annotations

import numpy as np

from tosa_ir import Block, Graph, Operator
from tosa_ir.errors import NpuError
from tosa_ir.graph import numpy_dtype

# Iterations run to find a count; a longer loop is reported as not constant.
MAX_TRIPS = 10_000


def _slice(block: Block, outputs: list[str]) -> tuple[list[Operator], set[str]]:
    """The operators of ``block`` that ``outputs`` depend on (in block order) and the
    block inputs they read."""
    need, ops = set(outputs), []
    for op in reversed(block.operators):
        if need & set(op.outputs):
            ops.append(op)
            need.update(n for n in op.inputs if n)
    return ops[::-1], need & set(block.inputs)


def constant_trip_count(graph: Graph, op: Operator, limit: int = MAX_TRIPS) -> int | None:
    """Body executions of the main block's WHILE_LOOP ``op`` if they do not depend on the
    graph's inputs (see the module docstring) and are at most ``limit``; else None."""
    from sim.reference.interpreter import Interpreter

    main = graph.main
    try:
        cond_b, body_b = graph.block(op.attrs["cond_graph"]), graph.block(op.attrs["body_graph"])
    except (KeyError, TypeError, ValueError):
        return None
    n = len(op.inputs)
    if len(cond_b.inputs) != n or len(body_b.inputs) != n or len(body_b.outputs) != n:
        return None
    # Loop variables (by position) the condition depends on, closed over the body.
    _, reads = _slice(cond_b, cond_b.outputs)
    need = {cond_b.inputs.index(name) for name in reads}
    while True:
        _, reads = _slice(body_b, [body_b.outputs[i] for i in need])
        more = need | {body_b.inputs.index(name) for name in reads}
        if more == need:
            break
        need = more
    values = []
    for i, name in enumerate(op.inputs):
        t = main.tensors.get(name)
        if i in need and (t is None or not t.is_const):
            return None
        local = body_b.tensor(body_b.inputs[i])
        if i in need:
            values.append(np.asarray(t.data).astype(numpy_dtype(local.dtype)))
        elif min(local.shape, default=1) < 0:
            return None
        else:                        # never read by what decides the count: any value will do
            values.append(np.zeros(local.shape, numpy_dtype(local.dtype)))
    ops, _ = _slice(body_b, [body_b.outputs[i] for i in need])
    body = Block(body_b.name, body_b.tensors, ops, list(body_b.inputs), [body_b.outputs[i] for i in sorted(need)])
    interp = Interpreter(graph, level="none", max_loop_iterations=None)
    try:
        for trips in range(limit + 1):
            (go,) = interp.run_block(cond_b, values)
            if not bool(np.asarray(go).reshape(-1)[0]):
                return trips
            if trips == limit:
                return None
            for i, value in zip(sorted(need), interp.run_block(body, values)):
                values[i] = value
    except (NpuError, ValueError, TypeError, KeyError):
        return None                  # let the compiled program's checks report it
    return None
