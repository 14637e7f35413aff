"""Append TFLite's int8 softmax to a quantized graph, in place of its float tail.

Shared by the frontends that quantize a float graph (NNEF, OpenVINO, tools): the same lowering
the Circle frontend uses for TFLite's SOFTMAX.

Passed to ``compiler.graph.quantize.quantize_graph(..., integer_softmax=append_integer_softmax)``
(the graph level cannot import a frontend): the quantizer recognises the float softmax after
the logits (``compiler.graph.quantize.softmax.is_softmax_tail``) and calls this to build TFLite's
integer softmax (``int_softmax.softmax``, bit-exact with its reference kernel) over the logits.
"""
from __future__ import annotations

from types import SimpleNamespace

from compiler.frontends.common.tosa_builder import TosaBuilder
from compiler.frontends.common.int_softmax import softmax
from compiler.graph.quantize.qparams import QParams
from compiler.graph.quantize.softmax import SOFTMAX_SCALE, SOFTMAX_ZERO_POINT
from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, Unsupported

__all__ = ["append_integer_softmax", "emit_integer_softmax"]


class _Lowering:
    """What int_softmax.softmax needs of a lowerer, over our block."""

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


def emit_integer_softmax(block, logits: str, scale: float, out_name: str,
                         reserved: set[str]) -> str:
    """Emit the int8 softmax (last axis) of the int8 ``logits`` (scale ``scale``) into
    ``block``, its result named ``out_name``; ``reserved`` are names the caller will still
    use.  Passed to ``quantize_graph(..., softmax_layer=...)`` for a softmax inside the graph
    or at its end whose result the model quantizes as TFLite does (compiler/graph/quantize/
    softmax.py).  Returns the result's name."""
    builder = TosaBuilder(block.name)
    builder.block = block
    builder.reserved = set(reserved) - {out_name}
    builder.location = "integer softmax"
    lowering = _Lowering(builder, logits, float(scale), out_name)
    softmax(lowering, SimpleNamespace(options={"beta": 1.0}))
    return lowering.result
