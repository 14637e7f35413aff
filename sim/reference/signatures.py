"""How many operands and results each operator takes, in each graph form.

The spec's operator tables fix the argument lists; a graph whose operator has one input or
output too few or too many is illegal (the official conformance suite's ERRORIF_WrongInputList
and ERRORIF_WrongOutputList tests).  Checking the counts once, before dispatch, keeps every
operator implementation free to index its operands.

Each entry is ``(inputs in TOSA 1.0, inputs in the draft form, outputs)``; ``None`` means
variadic (checked by the operator itself).
"""
from __future__ import annotations

from tosa_ir import Operator, TosaError

_UNARY = (1, 1, 1)
_BINARY = (2, 2, 1)

SIGNATURES: dict[str, tuple[int | None, int | None, int | None]] = {
    # tensor operators: TOSA 1.0 adds the zero points as inputs
    "ARGMAX": _UNARY,
    "AVG_POOL2D": (3, 1, 1),
    "CONV2D": (5, 3, 1),
    "CONV3D": (5, 3, 1),
    "DEPTHWISE_CONV2D": (5, 3, 1),
    "TRANSPOSE_CONV2D": (5, 3, 1),
    "FULLY_CONNECTED": (None, 3, 1),
    "MATMUL": (4, 2, 1),
    "MAX_POOL2D": _UNARY,
    # activation
    "CLAMP": _UNARY,
    # elementwise binary
    **{name: _BINARY for name in (
        "ADD", "SUB", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV",
        "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT",
        "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL")},
    "MUL": (3, 2, 1),           # 1.0: shift is an input tensor
    "TABLE": (2, 1, 1),         # 1.0: the table is an input tensor
    # elementwise unary
    **{name: _UNARY for name in ("ABS", "BITWISE_NOT", "CLZ", "LOGICAL_NOT")},
    "NEGATE": (3, 1, 1),        # 1.0: input and output zero points are inputs
    "SELECT": (3, 3, 1),
    # reductions
    **{name: _UNARY for name in ("REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_SUM")},
    # data layout
    "CONCAT": (None, None, 1),
    "PAD": (3, None, 1),        # 1.0: padding and pad_const are inputs
    "DIM": _UNARY,
    "RESHAPE": (2, None, 1),
    "REVERSE": _UNARY,
    "SLICE": (3, None, 1),
    "TILE": (2, None, 1),
    "TRANSPOSE": _UNARY,
    "GATHER": _BINARY,
    "SCATTER": (3, 3, 1),
    "RESIZE": (4, None, 1),
    "CAST": _UNARY,
    "RESCALE": (5, 1, 1),       # 1.0: multiplier, shift and both zero points are inputs
    "CONST": (0, 0, 1),
    "IDENTITY": _UNARY,
    "COND_IF": (None, None, None),
    "WHILE_LOOP": (None, None, None),
    "VARIABLE": (0, 0, 0),
    "VARIABLE_WRITE": (1, 1, 0),
    "VARIABLE_READ": (0, 0, 1),
}


# Attributes that only the draft form has: an operator carrying one of them is in draft form
# even inside a graph whose version says 1.0 (graphs built in memory mix the forms).
DRAFT_ATTRS: dict[str, tuple[str, ...]] = {
    "AVG_POOL2D": ("input_zp", "output_zp"),
    "CONV2D": ("input_zp", "weight_zp"),
    "CONV3D": ("input_zp", "weight_zp"),
    "DEPTHWISE_CONV2D": ("input_zp", "weight_zp"),
    "TRANSPOSE_CONV2D": ("input_zp", "weight_zp", "out_shape"),
    "MATMUL": ("a_zp", "b_zp"),
    "MUL": ("shift",),
    "TABLE": ("table",),
    "NEGATE": ("input1_zp", "output_zp"),
    "PAD": ("padding", "pad_const", "pad_const_int"),
    "RESHAPE": ("new_shape",),
    "SLICE": ("start", "size"),
    "TILE": ("multiples",),
    "RESIZE": ("scale", "offset", "border"),
    "RESCALE": ("multiplier", "shift", "input_zp", "output_zp"),
}


def is_draft_form(op: Operator, is_tosa_1: bool) -> bool:
    return not is_tosa_1 or any(a in op.attrs for a in DRAFT_ATTRS.get(op.op, ()))


def check_signature(op: Operator, is_tosa_1: bool) -> None:
    """Raise TosaError when ``op`` has the wrong number of inputs or outputs for its form."""
    sig = SIGNATURES.get(op.op)
    if sig is None:
        return
    inputs = sig[1] if is_draft_form(op, is_tosa_1) else sig[0]
    outputs = sig[2]
    if inputs is not None and len(op.inputs) != inputs:
        raise TosaError(op.op, "input", f"number of inputs {len(op.inputs)} != {inputs}", op.location)
    if outputs is not None and len(op.outputs) != outputs:
        raise TosaError(op.op, "output", f"number of outputs {len(op.outputs)} != {outputs}", op.location)
