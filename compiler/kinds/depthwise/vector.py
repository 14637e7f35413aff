"""A DEPTHWISE_CONV2D on the vector unit (compiler/kinds/elementwise/depthwise.py): its input
padded by a DMA copy (the input zero point as pad value), with a channel multiplier the
channels repeated by an element-DMA copy of a rows input, then the elementwise layer writing
the int32 result."""
from __future__ import annotations

from tosa_ir import Operator

from compiler.core.errors import unsupported
from compiler.core.ir import CopyLayer
from compiler.kinds.elementwise.depthwise import depthwise_layer
from compiler.kinds.movement.layer import pad_repeat_layer


def vector_depthwise(walk, op: Operator) -> None:
    layer, constants, pad, izp = depthwise_layer(op, walk.block, walk.new_name("dw"))
    for name, data in constants:
        walk.new_root(name, data.shape, "const", layout="rows", dtype=str(data.dtype), data=data)
    repeat = walk.block.tensor(op.inputs[1]).shape[3]
    if walk.is_rows(op.inputs[0]):
        x = walk.require_vec(op, op.inputs[0])
        if any(pad) or repeat > 1:
            # Padding and channel repetition in one element-DMA copy.
            n, h, w, c = walk.flow.shapes[x]
            padded = walk.new_root(f"{layer.name}.padded", (n, h + pad[0] + pad[1], w + pad[2] + pad[3],
                                                         c * repeat), "computed", layout="rows", dtype="int8")
            walk.flow.layers.append(pad_repeat_layer(walk.new_name("move"), x, padded, (n, h, w, c), pad, repeat,
                                                     izp, "int8", walk.lanes, layer.ops, op.location))
            x = padded
    else:
        x = walk.require(op, op.inputs[0])
        n, h, w, c = walk.flow.shapes[x]
        if repeat > 1 and c > 1:
            raise unsupported(op, f"channel multiplier {repeat} on a brick input of {c} channels: the "
                                  f"channels would have to be repeated (done for rows inputs only)")
        if any(pad):
            padded = walk.new_root(f"{layer.name}.padded", (n, h + pad[0] + pad[1], w + pad[2] + pad[3], c),
                                   "computed")
            walk.flow.layers.append(CopyLayer(walk.new_name("copy"), x, padded,
                                              "DEPTHWISE_CONV2D padding (input zero point)",
                                              pad=(0, 0, pad[0], pad[1], pad[2], pad[3], 0, 0), pad_value=izp,
                                              ops=[op.describe()], location=op.location))
            x = padded
    layer.inputs = [x if k in layer.windows else t for k, t in enumerate(layer.inputs)]
    walk.vector_output(op.outputs[0])
    walk.flow.layers.append(layer)
