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

__all__ = ["append_integer_softmax", "tflite_softmax_output"]


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


def tflite_softmax_output(graph: Graph, given: dict[str, QParams]):
    """The appender for ``quantize_graph(..., integer_softmax=...)`` when the graph's one
    output carries TFLite's softmax output parameters (int8, scale 1/256, zero point -128)
    in ``given``: a TFLite classifier converted to another format (nnef-tools' graph.quant,
    OpenVINO's FakeQuantize) whose file says its probabilities are TFLite's int8 codes.
    The int8 softmax then keeps the output's name.  Otherwise None: a float softmax tail
    is left out as before (its output grid is not TFLite's, so TFLite's kernel is not it).
    """
    outputs = graph.main.outputs
    if len(outputs) != 1 or outputs[0] not in given:
        return None
    qp = given[outputs[0]]
    if qp.per_channel or qp.dtype != "int8" or qp.zp != SOFTMAX_ZERO_POINT or \
            abs(qp.scalar_scale - SOFTMAX_SCALE) > 1e-6 * SOFTMAX_SCALE:
        return None
    name = outputs[0]

    def append(int_graph: Graph, qparams: dict[str, QParams], logits: str) -> str:
        return append_integer_softmax(int_graph, qparams, logits, out_name=name)

    return append
