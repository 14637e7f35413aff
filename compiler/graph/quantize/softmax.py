"""The integer softmax at the end of a quantized graph, in place of the float tail.

:func:`compiler.graph.quantize.prepare.cut_float_tail` removes a float softmax after the logits
(its EXP / REDUCE_SUM / RECIPROCAL have no int8 lowering of their own).  With
``quantize_graph(..., integer_softmax=append_integer_softmax)`` (the appender from
compiler/frontends/common/softmax_tail.py, passed in because the graph level sits below the
frontends) the integer graph then ends with the int8 softmax that the Circle frontend uses for
TFLite's SOFTMAX (compiler/frontends/common/int_softmax.py: bit-exact with TFLite's reference
kernel, built from TOSA integer operators the NPU runs): the logits' int8 codes in, probabilities out with
TFLite's fixed output parameters, scale 1/256 and zero point -128.  So a classifier ends at
class probabilities, not logits.

Only a softmax over the logits' last axis (channels, NHWC) is replaced; any other float tail
is left out as before.
"""
from __future__ import annotations

from tosa_ir import Operator

__all__ = ["SOFTMAX_SCALE", "SOFTMAX_ZERO_POINT", "is_softmax_tail"]

SOFTMAX_SCALE = 1.0 / 256.0
SOFTMAX_ZERO_POINT = -128
_SOFTMAX_OPS = {"REDUCE_MAX", "SUB", "EXP", "REDUCE_SUM", "RECIPROCAL", "MUL", "RESHAPE",
                "TRANSPOSE", "IDENTITY"}


def is_softmax_tail(removed: list[Operator], logits: str, rank: int) -> bool:
    """Whether the removed float operators are one softmax over the last axis of ``logits``."""
    ops = [op.op for op in removed]
    if not {"EXP", "REDUCE_SUM"} <= set(ops) or not set(ops) <= _SOFTMAX_OPS:
        return False
    if ops.count("EXP") != 1:
        return False
    first = next(op for op in removed if op.op in ("REDUCE_MAX", "EXP", "SUB"))
    if logits not in first.inputs:
        return False
    reduces = [op for op in removed if op.op in ("REDUCE_MAX", "REDUCE_SUM")]
    return all(int(op.attrs.get("axis", -1)) == rank - 1 for op in reduces)
