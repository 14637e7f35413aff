"""Data movement that moves int8 values between lanes of brick tensors, through the ``rows``
layout (isa/layout.py).

The brick path (compiler/dataflow.py) moves whole bricks: a SLICE starting inside a
brick, a CONCAT or PAD along channels that are not whole bricks, a TRANSPOSE moving the
channel axis or a RESHAPE regrouping channels would put values in other lanes.  Those
operators become copies instead:

1. each brick input is copied into a ``rows`` tensor of its own shape (:func:`brick_rows_layer`:
   whole bricks, so every line is whole bus words and the DMA runs in word mode);
2. the operator itself is the rows :class:`MoveLayer` (compiler/kinds/movement/layer.py; element-mode
   DMA where elements change lanes; a RESHAPE keeping the rows' bytes is a view);
3. if a reader needs bricks (a convolution, a pool, a CONCAT), the result is copied back
   into bricks (:func:`brick_rows_layer` the other way); a chain of further movement with
   no brick reader after it stays in the rows layout (the dataflow pass then lowers it as
   rows movement).

The same module serves REVERSE and TILE of brick tensors, and reductions along channels of
several bricks (:func:`rows_copy`).

A brick tensor of one channel block already has the bytes of the rows layout, but its root
may be a window of a larger buffer (a CONCAT slot), so step 1 is always a copy: cheap (one
word per brick) and simple.
"""
from __future__ import annotations

from tosa_ir import Operator

from compiler.kinds.movement.layer import MoveLayer, Part, move_layer, row_strides
from compiler.core.views import BrickView, ceil_div, dense_strides, shape4
from compiler.core.dataflow import Ref


def brick_rows_layer(name: str, brick: str, rows: str, view: BrickView, to_rows: bool, ops: list[str],
                     location: str) -> MoveLayer:
    """Copy between the int8 brick view ``view`` (of tensor ``brick``) and the rows tensor
    ``rows`` of the same NHWC shape, whole bricks (lanes past the channel count are
    don't-care on both sides).  ``to_rows``: bricks -> rows, else rows -> bricks."""
    n, h, w, c = view.shape
    lanes = view.lanes
    sn, scb, sh = view.strides
    rn, rh, rw, _ = row_strides((n, h, w, c), 1, lanes)
    brick_side = [sn, scb, sh, lanes, 1]
    rows_side = [rn, lanes, rh, rw, 1]
    counts = [n, ceil_div(c, lanes), h, w, lanes]
    if to_rows:
        loops = list(zip(counts, brick_side, rows_side))
        part = Part(0, view.addr, 0, loops)
        return MoveLayer(name, [brick], rows, 1, [part], ops=list(ops), location=location)
    loops = list(zip(counts, rows_side, brick_side))
    part = Part(0, 0, view.addr, loops)
    return MoveLayer(name, [rows], brick, 1, [part], ops=list(ops), location=location)


def rows_copy(walk, op: Operator, x: str, desc: list[str] | None = None) -> str:
    """The name of a rows copy of the int8 brick tensor ``x`` (made once per tensor)."""
    flow = walk.flow
    src = walk.require(op, x)
    name = f"{x}@rows"
    if name not in flow.refs:
        walk.new_root(name, tuple(walk.block.tensor(x).shape), "computed", layout="rows", dtype="int8")
        flow.layers.append(brick_rows_layer(walk.new_name("move"), src, name, flow.view(src), True,
                                            desc or [op.describe()], op.location))
    return name


# One-input movement whose rows form the dataflow pass lowers when its input is rows.
_ROWS_MOVES = ("IDENTITY", "RESHAPE", "TRANSPOSE", "SLICE", "REVERSE", "TILE", "PAD")


def _brick_reader(walk, name: str) -> bool:
    """True if a reader of ``name`` needs bricks.  Unlike the dataflow pass's rule, a chain of
    one-input movement stays in the rows layout when nothing after it needs bricks (no
    copies back and forth); CONCAT readers keep bricks (their inputs share one layout)."""
    for user in walk.consumers.get(name, []):
        if user.op in walk.rows_ops:
            continue
        if user.op in _ROWS_MOVES and user.inputs[0] == name and not any(_brick_reader(walk, y)
                                                                         for y in user.outputs):
            continue
        return True
    return False


def move_via_rows(walk, op: Operator, why: str) -> None:
    """Lower the data-movement operator ``op`` of brick tensors through the rows layout (see
    the module docstring).  ``walk`` is the dataflow pass's walker; ``why`` says in the
    layers' descriptions why the values move between lanes."""
    block, flow, lanes = walk.block, walk.flow, walk.lanes
    desc = [f"{op.describe()} ({why}: through the rows layout)"]
    rows_of: dict[str, str] = {}
    for x in dict.fromkeys(walk.data_inputs(op)):
        rows_of[x] = walk.require_vec(op, x) if walk.is_rows(x) else rows_copy(walk, op, x, desc)
    out = op.outputs[0]
    out_t = block.tensor(out)
    out_shape = tuple(out_t.shape)
    s4 = shape4(out_shape)
    bricks = s4 is not None and out_t.dtype == "int8" and _brick_reader(walk, out)
    target = f"{out}@rows" if bricks else out
    x0 = rows_of[op.inputs[0]]
    before, after = tuple(block.tensor(op.inputs[0]).shape) or (1,), out_shape or (1,)
    if op.op == "RESHAPE" and (before[-1] == after[-1] or (before[-1] % lanes == 0 and after[-1] % lanes == 0)):
        # The rows' bytes coincide: a view of the rows copy.
        walk.alias(target, Ref(x0), out_shape)
    else:
        layer = move_layer(op, block, walk.new_name("move"), lanes)
        layer.inputs = [rows_of[t] for t in layer.inputs]
        layer.output = target
        layer.ops = desc
        walk.new_root(target, out_shape, "computed", layout="rows", dtype=out_t.dtype)
        flow.layers.append(layer)
    if bricks:
        walk.new_root(out, s4, "computed")
        flow.layers.append(brick_rows_layer(walk.new_name("move"), out, target,
                                            BrickView(out, 0, s4, dense_strides(s4, lanes), lanes), False,
                                            desc, op.location))
