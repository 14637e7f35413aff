"""Small pieces every frontend uses: operator-handler registries and tensor renaming."""
from __future__ import annotations

from typing import Callable

from tosa_ir import Block


def handler_registry() -> tuple[dict[str, Callable], Callable]:
    """A handler table and the decorator that fills it.

    Returns
    -------
    (table, decorator)
        ``@decorator("A", "B")`` on ``fn`` sets ``table["A"] = table["B"] = fn`` and
        returns ``fn`` unchanged.
    """
    table: dict[str, Callable] = {}

    def register(*names: str):
        def wrap(fn):
            for name in names:
                table[name] = fn
            return fn
        return wrap

    return table, register


def rename_tensor(block: Block, old: str, new: str) -> None:
    """Rename tensor ``old`` to the unused name ``new`` in the whole block: the tensor
    table, every operator's inputs and outputs, and the block's inputs and outputs."""
    tensor = block.tensors.pop(old)
    tensor.name = new
    block.tensors[new] = tensor
    # Operators are in execution order, so only the producer and what follows it can name
    # ``old``; frontends rename what they just emitted, so this is a short walk from the end
    # (a scan of the whole block per rename made 10,000-layer models quadratic).
    ops = block.operators
    start = 0
    for k in range(len(ops) - 1, -1, -1):
        if old in ops[k].outputs:
            start = k
            break
    for op in ops[start:]:
        if old in op.inputs:
            op.inputs = [new if n == old else n for n in op.inputs]
        if old in op.outputs:
            op.outputs = [new if n == old else n for n in op.outputs]
    block.inputs = [new if n == old else n for n in block.inputs]
    block.outputs = [new if n == old else n for n in block.outputs]
