"""The integer softmax at the end of a quantized graph, in place of the float tail.

:func:`compiler.quantize.prepare.cut_float_tail` removes a float softmax after the logits
(its EXP / REDUCE_SUM / RECIPROCAL have no int8 lowering of their own).  With
``quantize_graph(..., integer_softmax=True)`` the integer graph then ends with the int8
softmax that the Circle frontend uses for TFLite's SOFTMAX
(compiler/frontends/circle_ops_softmax.py: bit-exact with TFLite's reference kernel, built
from TOSA integer operators the NPU runs): the logits' int8 codes in, probabilities out with
TFLite's fixed output parameters, scale 1/256 and zero point -128.  So a classifier ends at
class probabilities, not logits.

Only a softmax over the logits' last axis (channels, NHWC) is replaced; any other float tail
is left out as before.
"""
from __future__ import annotations

from types import SimpleNamespace

from compiler.quantize.qparams import QParams
from tosa_ir import Graph, Operator
from tosa_ir.errors import InvalidInput, Unsupported

__all__ = ["SOFTMAX_SCALE", "SOFTMAX_ZERO_POINT", "append_integer_softmax", "is_softmax_tail"]

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


class _Lowering:
    """What circle_ops_softmax.softmax needs of the Circle lowerer, over our block."""

    def __init__(self, builder, logits: str, scale: float, out_name: str):
        self.b = builder
        self._x = SimpleNamespace(name=logits, dtype="int8", scale=scale)
        self._out = SimpleNamespace(name=out_name)
        self.result = None

    def activation(self, position: int):
        return self._x

    def out_type(self, position: int = 0):
        return self._out, "int8"

    def define(self, position: int, name: str) -> None:
        self.result = name

    def unsupported(self, what: str) -> Unsupported:
        return Unsupported(f"integer softmax: {what}")

    def invalid(self, what: str) -> InvalidInput:
        return InvalidInput(f"integer softmax: {what}")


def append_integer_softmax(graph: Graph, qparams: dict[str, QParams], logits: str,
                           out_name: str = "softmax") -> str:
    """Append the int8 softmax of ``logits`` (the graph's single output) to ``graph``; it
    becomes the output.  Records its parameters in ``qparams``; returns its name."""
    from compiler.frontends.circle_build import TosaBuilder
    from compiler.frontends.circle_ops_softmax import softmax

    block = graph.main
    builder = TosaBuilder(block.name)
    builder.block = block
    builder.location = "integer softmax"
    lowering = _Lowering(builder, logits, float(qparams[logits].scalar_scale), out_name)
    softmax(lowering, SimpleNamespace(options={"beta": 1.0}))
    out = lowering.result
    block.outputs = [out if name == logits else name for name in block.outputs]
    qparams[out] = QParams(SOFTMAX_SCALE, SOFTMAX_ZERO_POINT)
    return out
