"""DEPTHWISE_CONV2D, selection only: each layer goes to the unit where the compiler's own
estimate says it is faster (choice.py) -- the conv kind's fused grouped convolution on the
MAC array, the vector unit (vector.py), or the wide-output array kind (int16, channel
multipliers without a fusable RESCALE)."""
from __future__ import annotations

from tosa_ir import Operator

from compiler.core.kind import Kind
from compiler.kinds.depthwise.choice import choose
from compiler.kinds.depthwise.vector import vector_depthwise
from compiler.kinds.mxu_conv.layer import mxu_conv


def select_depthwise(walk, op: Operator) -> None:
    choice = choose(walk, op)
    if choice.unit == "array" and not walk.is_rows(op.inputs[0]):
        layer = choice.layer
        layer.name = walk.new_name("dw")
        walk.add_conv(op, choice.chain, layer)
    elif choice.unit == "mxu_conv":
        mxu_conv(walk, op)
    else:
        # (Also an array choice whose input a producer wrote as rows regardless: the
        # vector unit reads either layout.)
        vector_depthwise(walk, op)


def reads_bricks(walk, op: Operator) -> bool:
    """True if ``op`` will read its input as bricks (it runs on the MAC array)."""
    return choose(walk, op).unit == "array"


KIND = Kind("depthwise", select={"DEPTHWISE_CONV2D": select_depthwise}, rows_ops=("DEPTHWISE_CONV2D",),
            reads_bricks=reads_bricks)
