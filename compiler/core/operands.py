"""Operator parameters as every kind reads them, TOSA 1.0 (zero points, multipliers, shifts as
constant input tensors) or draft (the same as attributes), checked: a missing or malformed
parameter is ``InvalidInput``, a form the NPU cannot run ``Unsupported`` (compiler/core/errors.py).
"""
from __future__ import annotations

import numpy as np

from tosa_ir import Block, Operator

from compiler.core.errors import invalid, unsupported

__all__ = ["CONST_OPS", "const_input", "expect_tensor", "input_tensor", "int_attrs", "scalar_input"]

# Operators that only name constant data; they produce no work.
CONST_OPS = ("CONST", "CONST_SHAPE")


def input_tensor(op: Operator, block: Block, index: int, what: str):
    if index >= len(op.inputs):
        raise invalid(op, f"missing input {what}")
    try:
        return block.tensor(op.inputs[index])
    except KeyError:
        raise invalid(op, f"input {what} {op.inputs[index]!r} is not declared") from None


def const_input(op: Operator, block: Block, index: int, what: str) -> np.ndarray:
    tensor = input_tensor(op, block, index, what)
    if not tensor.is_const:
        raise unsupported(op, f"{what} must be a constant tensor")
    return np.asarray(tensor.data)


def scalar_input(op: Operator, block: Block, index: int, attr: str) -> int:
    """A zero point: input tensor ``index`` (TOSA 1.0) or attribute ``attr`` (draft)."""
    if len(op.inputs) > index:
        data = const_input(op, block, index, attr)
        if data.size != 1:
            raise invalid(op, f"{attr} must hold one value, not shape {data.shape}")
        return int(data.reshape(-1)[0])
    if attr not in op.attrs:
        raise invalid(op, f"missing {attr}")
    return int(np.asarray(op.attrs[attr]).reshape(-1)[0])


def int_attrs(op: Operator, key: str, count: int) -> tuple[int, ...]:
    value = op.attrs.get(key)
    if value is None:
        raise invalid(op, f"missing attribute {key}")
    values = tuple(int(v) for v in np.asarray(value).reshape(-1))
    if len(values) != count:
        raise invalid(op, f"attribute {key} needs {count} values, has {len(values)}")
    return values


def expect_tensor(op: Operator, block: Block, name: str, dtype: str, what: str, rank: int | None = None):
    tensor = block.tensors.get(name)
    if tensor is None:
        raise invalid(op, f"{what} {name!r} is not declared")
    if tensor.dtype != dtype:
        raise unsupported(op, f"{what} {name!r} is {tensor.dtype}; the NPU supports {dtype} here")
    if rank is not None and len(tensor.shape) != rank:
        raise invalid(op, f"{what} {name!r} has rank {len(tensor.shape)}, expected {rank}")
    if any(d < 0 for d in tensor.shape):
        raise unsupported(op, f"{what} {name!r} has unknown dimensions {tensor.shape}")
    return tensor
