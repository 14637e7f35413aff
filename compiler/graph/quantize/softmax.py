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

A softmax anywhere in the graph (attention's, between two MATMULs) whose result the model
quantizes as TFLite does (given parameters: int8, scale 1/256, zero point -128, as a TFLite
model converted to NNEF or OpenVINO IR keeps them) is :func:`softmax_groups`' business: with
``quantize_graph(..., softmax_layer=emit_integer_softmax)`` (compiler/frontends/common/
softmax_tail.py) the quantizer lowers each such group of float operators (REDUCE_MAX, SUB,
EXP, REDUCE_SUM, RECIPROCAL, MUL over the last axis) to TFLite's int8 softmax in place.
"""
from __future__ import annotations

from dataclasses import dataclass

from tosa_ir import Block, Operator

__all__ = ["SOFTMAX_SCALE", "SOFTMAX_ZERO_POINT", "SoftmaxGroup", "is_softmax_tail",
           "softmax_groups"]

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


@dataclass
class SoftmaxGroup:
    """The float operators of one softmax over the last axis of ``logits``."""

    ops: list[Operator]
    logits: str
    output: str


def _only_user(consumers, name: str, kind: str) -> Operator | None:
    users = consumers.get(name, [])
    return users[0] if len(users) == 1 and users[0].op == kind else None


def softmax_groups(block: Block, given: dict) -> list[SoftmaxGroup]:
    """Each softmax of the frontends' decomposition, ``y = exp(x - max(x)) * 1 /
    sum(exp(x - max(x)))`` over the last axis, whose result ``given`` quantizes with
    TFLite's softmax parameters (int8, scale 1/256, zero point -128); its intermediates
    are used nowhere else and are not graph outputs."""
    consumers = block.consumers()
    groups = []
    for op in block.operators:
        if op.op != "REDUCE_MAX":
            continue
        x, m = op.inputs[0], op.outputs[0]
        rank = len(block.tensors[x].shape)
        if int(op.attrs.get("axis", -1)) != rank - 1:
            continue
        sub = _only_user(consumers, m, "SUB")
        if sub is None or sub.inputs[:2] != [x, m]:
            continue
        exp = _only_user(consumers, sub.outputs[0], "EXP")
        if exp is None:
            continue
        users = consumers.get(exp.outputs[0], [])
        rsum = next((u for u in users if u.op == "REDUCE_SUM"), None)
        mul = next((u for u in users if u.op == "MUL"), None)
        if len(users) != 2 or rsum is None or mul is None or \
                int(rsum.attrs.get("axis", -1)) != rank - 1:
            continue
        rcp = _only_user(consumers, rsum.outputs[0], "RECIPROCAL")
        if rcp is None or mul.inputs[:2] != [exp.outputs[0], rcp.outputs[0]]:
            continue
        ops = [op, sub, exp, rsum, rcp, mul]
        inner = [o.outputs[0] for o in ops[:-1]]
        if any(n in block.outputs for n in inner):
            continue
        y = mul.outputs[0]
        qp = given.get(y)
        if qp is None or qp.per_channel or qp.dtype != "int8" or qp.zp != SOFTMAX_ZERO_POINT or \
                abs(qp.scalar_scale - SOFTMAX_SCALE) > 1e-6 * SOFTMAX_SCALE:
            continue
        groups.append(SoftmaxGroup(ops, x, y))
    return groups
