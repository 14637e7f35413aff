"""REDUCE_SUM / MAX / MIN / ANY / ALL as :class:`ReduceLayer` s (lowered by
compiler/kinds/reduce/lower.py on the vector unit's VPOOL).

VPOOL reduces a window of vectors lane by lane with MAX or SUM; MIN is ``~MAX(~x)`` (the
bitwise NOT reverses the order without overflow), ANY is MAX and ALL is MIN of bool 0/1.
The reduced axis becomes the window: along an outer axis the vectors are already apart in
memory; along the innermost axis the element-mode DMA puts each element in lane 0 of a
vector of its own first.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from isa.instructions import BY_NAME, VecType
from tosa_ir import Block, Operator

from compiler.core.ir import SingleTensorLayer
from compiler.kinds.elementwise.layer import VEC_TYPES
from compiler.core.errors import invalid, unsupported

REDUCE_OPS = {"REDUCE_SUM": "sum", "REDUCE_MAX": "max", "REDUCE_MIN": "min", "REDUCE_ANY": "max",
              "REDUCE_ALL": "min"}
WINDOW_MAX = next(f for f in BY_NAME["VPOOL"].fields if f.name == "k0").max


@dataclass
class ReduceLayer(SingleTensorLayer):
    """``output = reduce(input, axis)``; ``mode`` "sum", "max" or "min"; ``dtype`` the
    element type read (SUM: int32)."""

    name: str
    input: str
    output: str
    in_shape: tuple[int, ...]
    axis: int
    mode: str
    dtype: VecType
    ops: list[str] = field(default_factory=list)
    location: str = ""

    macs = 0


def reduce_layer(op: Operator, block: Block, name: str) -> ReduceLayer:
    x = block.tensor(op.inputs[0])
    if x.dtype not in VEC_TYPES:
        raise unsupported(op, f"input is {x.dtype}; the vector unit reduces bool, int8, int16 and int32")
    if any(d < 0 for d in x.shape):
        raise unsupported(op, f"input has unknown dimensions {x.shape}")
    axis = op.attrs.get("axis")
    if axis is None:
        raise invalid(op, "missing axis")
    axis = int(axis)
    if not 0 <= axis < len(x.shape):
        raise invalid(op, f"axis {axis} is outside the input's rank {len(x.shape)}")
    if x.shape[axis] > WINDOW_MAX:
        raise unsupported(op, f"reduces {x.shape[axis]} elements along axis {axis}; one VPOOL window holds "
                              f"{WINDOW_MAX} (splitting longer reductions is not implemented)")
    return ReduceLayer(name, op.inputs[0], op.outputs[0], tuple(x.shape), axis, REDUCE_OPS[op.op],
                       VEC_TYPES[x.dtype], ops=[op.describe()], location=op.location)
