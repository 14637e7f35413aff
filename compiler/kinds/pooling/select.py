"""Selection of MAX_POOL2D and AVG_POOL2D in the dataflow walk (compiler/core/dataflow.py
``Walk``): a pool of an int8 brick tensor is a :class:`PoolLayer` on VPOOL (layer.py); a pool of
a rows tensor (int16, or int8 no brick reader needs) an elementwise layer over the kernel taps'
windows of the padded input (rows.py), the padding an element-DMA copy.
"""
from __future__ import annotations

from tosa_ir import Operator

from compiler.kinds.movement.layer import pad_repeat_layer
from compiler.kinds.pooling.layer import pool_layer
from compiler.kinds.pooling.rows import rows_pool_layer

__all__ = ["select_pool"]


def select_pool(walk, op: Operator) -> None:
    """Add the layers of pooling ``op`` to the walk."""
    if walk.is_rows(op.inputs[0]):
        _rows_pool(walk, op)
    else:
        _brick_pool(walk, op)


def _rows_pool(walk, op: Operator) -> None:
    x = walk.require_vec(op, op.inputs[0])
    name = walk.new_name("pool")
    layer, pad, value = rows_pool_layer(op, walk.block, name)
    xt = walk.block.tensor(op.inputs[0])
    n, h, w, c = xt.shape
    if any(pad):
        padded = walk.new_root(f"{name}.padded", (n, h + pad[0] + pad[1], w + pad[2] + pad[3], c), "computed",
                               layout="rows", dtype=xt.dtype)
        walk.flow.layers.append(pad_repeat_layer(walk.new_name("move"), x, padded, (n, h, w, c), tuple(pad), 1,
                                                 value, xt.dtype, walk.lanes, [op.describe()], op.location))
        x = padded
    for cname, data in layer.consts:
        walk.new_root(cname, data.shape, "const", layout="rows", dtype=str(data.dtype), data=data)
    layer.inputs = [x if k in layer.windows else t for k, t in enumerate(layer.inputs)]
    walk.vector_output(op.outputs[0])
    walk.flow.layers.append(layer)


def _brick_pool(walk, op: Operator) -> None:
    layer = pool_layer(op, walk.block, walk.new_name("pool"))
    layer.input = walk.require(op, layer.input)
    walk.new_root(layer.output, layer.out_shape, "computed")
    walk.flow.layers.append(layer)
