"""Shared argument handling for the reference-interpreter operators.

Every operator module uses these so that both graph forms run through one implementation:

* TOSA 1.0 graphs pass operands such as MUL's ``shift``, NEGATE's zero points, PAD's
  ``padding``/``pad_const``, SLICE's ``start``/``size``, TILE's ``multiples`` and RESHAPE's
  shape as *input tensors* (shape tensors, usually from CONST_SHAPE);
* the draft spec form carries the same values as *attributes*.

:func:`operand` returns the value from whichever place the operator has it.  The type checks
turn a combination outside the spec's Supported Data Types table into ``TosaError``, and a
floating-point mode (legal TOSA, not implemented by this integer interpreter) into
``Unsupported``.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from tosa_ir import INT_RANGES, Unsupported, numpy_dtype

FLOAT_TYPES = frozenset({"fp16", "bf16", "fp32", "fp64", "fp8e4m3", "fp8e5m2"})

# MAX_RANK when no level is set (spec table "Level maximums", tosa_level_none).
MAX_RANK_NONE = 32
MAX_NESTING_NONE = 256


def max_rank(ctx) -> int:
    limits = ctx.limits
    return MAX_RANK_NONE if limits is None else limits["MAX_RANK"]


def level_rank(ctx, *shapes: Sequence[int]) -> None:
    """LEVEL_CHECK(rank(shape) <= MAX_RANK) for each shape: a failure rejects the graph
    (``OpContext.level_reject``)."""
    for shape in shapes:
        ctx.level_reject(len(shape) <= max_rank(ctx), "rank(shape) <= MAX_RANK")


def has_input(ctx, index: int) -> bool:
    """True when the operator lists an input tensor at ``index`` (TOSA 1.0 operand form)."""
    return len(ctx.op.inputs) > index and bool(ctx.op.inputs[index])


def operand(ctx, inputs: Sequence[np.ndarray], index: int, names: str | Iterable[str],
            default=None, required: bool = True):
    """The value of an operand given as input tensor ``index`` (1.0) or as an attribute (draft).

    ``names`` lists the attribute names that may hold it (the spec's name first).  Returns a
    numpy array (or a scalar/list from the attribute as stored).  A missing required operand
    is an illegal graph: ``TosaError`` naming the argument.
    """
    if isinstance(names, str):
        names = (names,)
    if index < len(inputs) and has_input(ctx, index):
        return inputs[index]
    for name in names:
        if name in ctx.attrs and ctx.attrs[name] is not None:
            return ctx.attrs[name]
    if default is not None or not required:
        return default
    ctx.error_if(True, names[0], f"operand {names[0]!r} is missing (neither input "
                                 f"{index} nor attribute)")
    return None


def int_list(value) -> list[int]:
    """A shape-like operand (array, list or scalar) as a flat list of Python ints."""
    return [int(v) for v in np.asarray(value).reshape(-1)]


def scalar_int(value) -> int:
    """A single-value operand (rank 0 or [1] tensor, or attribute) as a Python int."""
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise ValueError(f"expected a single value, got {flat.size}")
    return int(flat[0])


def check_types(ctx, arg: str, actual: tuple[str, ...], allowed: Iterable[tuple[str, ...]],
                fp_modes: bool = True) -> None:
    """ERROR_IF(operator data types do not meet requirement of Supported Data Types).

    ``actual`` is the tuple of element types (e.g. ``(in_t, out_t)``); ``allowed`` lists the
    integer/boolean/shape rows of the spec table.  If the op has floating-point modes in the
    spec (``fp_modes``) and the input type ``actual[0]`` is floating-point, that is legal
    TOSA that this interpreter does not implement: ``Unsupported``.
    """
    allowed = set(tuple(a) for a in allowed)
    if tuple(actual) in allowed:
        return
    if fp_modes and actual and actual[0] in FLOAT_TYPES:
        raise Unsupported(f"{ctx.name}{_where(ctx)}: floating-point mode "
                          f"{'/'.join(actual)} is not supported by the reference interpreter")
    ctx.error_if(True, arg, f"data types {'/'.join(actual)} not in the Supported Data Types "
                            f"of {ctx.name}")


def _where(ctx) -> str:
    return f" at {ctx.op.location}" if ctx.op.location else ""


def shapes_match(declared: Sequence[int], actual: Sequence[int]) -> bool:
    """True when a declared shape (which may hold -1 for 'unknown') matches ``actual``."""
    if len(declared) != len(actual):
        return False
    return all(d == -1 or d == a for d, a in zip(declared, actual))


def check_output_shape(ctx, shape: Sequence[int], arg: str = "output", text: str | None = None,
                       index: int = 0) -> None:
    """ERROR_IF(declared output shape != the shape the operator computes)."""
    declared = ctx.out_shape(index)
    ctx.error_if(not shapes_match(declared, shape), arg,
                 text or f"output shape {list(declared)} != {list(shape)}")


def broadcast_shape(ctx, *shapes: Sequence[int]) -> tuple[int, ...]:
    """The spec's broadcast_shape() over several inputs, with its ERROR_IFs."""
    result = list(shapes[0])
    for i, shape in enumerate(shapes[1:], start=2):
        ctx.error_if(len(shape) != len(result), f"input{i}",
                     "rank(shape1) != rank(shape2)")
        for d, size in enumerate(shape):
            if result[d] == 1:
                result[d] = size
            else:
                ctx.error_if(size != 1 and size != result[d], f"input{i}",
                             f"shape2[{d}] != 1 && shape2[{d}] != shape[{d}]")
    return tuple(result)


def elementwise_shape(ctx, arrays: Sequence[np.ndarray]) -> tuple[int, ...]:
    """Broadcast shape of the operands, checked against the output: ERROR_IF(shape != ...)."""
    shape = broadcast_shape(ctx, *[a.shape for a in arrays])
    check_output_shape(ctx, shape, text="shape != broadcast_shape(shape1, shape2)")
    return shape


def type_range(dtype: str) -> tuple[int, int]:
    return INT_RANGES[dtype]


def require_range(ctx, values: np.ndarray, dtype: str, text: str) -> None:
    """REQUIRE(minimum_s<dtype> <= values <= maximum_s<dtype>) for an int64 array."""
    lo, hi = INT_RANGES[dtype]
    if values.size:
        ctx.require(values.min() >= lo and values.max() <= hi, text)


def as_int64(array: np.ndarray) -> np.ndarray:
    return np.asarray(array).astype(np.int64)


def out_array(ctx, values: np.ndarray, index: int = 0) -> np.ndarray:
    """``values`` in the numpy dtype of output ``index`` (values already in range)."""
    return np.asarray(values).astype(numpy_dtype(ctx.out_type(index)), copy=False)


def check_axis(ctx, axis: int, rank: int, arg: str = "axis") -> None:
    ctx.error_if(axis < 0 or axis >= rank, arg, "axis < 0 || axis >= rank(shape1)")
