"""DIM and the variable operators (spec 2.17: VARIABLE, VARIABLE_WRITE, VARIABLE_READ).

DIM
    The size of an axis is known when compiling: :func:`fold_dims` rewrites every DIM of
    the main block as a ``CONST_SHAPE`` whose output tensor holds the value (in the output's
    declared type: ``shape`` or int32), so consumers that need a constant operand (RESHAPE's
    shape, TILE's multiples, ...) read it like any other constant.

Variables (within one run, as sim/reference/ops_control.py models them)
    * ``VARIABLE`` declares a buffer in external memory: a constant segment of the program
      image holding the initial value (zeros without one) in the rows layout
      (isa/layout.py), so a host that runs the program again on the same memory sees the
      last value written (the interpreter's persistence across runs of one interpreter).
    * ``VARIABLE_WRITE`` makes the written tensor the variable's *current value*.
    * ``VARIABLE_READ`` is a view of the current value: the last tensor written (nothing
      moves), or, before any write of this run, the buffer itself; a read of the buffer
      whose variable is written later in the run is a copy, so the read keeps the old value
      however its readers are ordered.
    * After the walk, :func:`write_back` copies each written variable's last value into its
      buffer.  The scheduler orders that copy after every earlier access to the buffer by
      footprints (a read of the old value first, then the write).

TOSA 1.0 variable tensors
    A main-block tensor flagged ``variable`` (its data the initial value, written and read
    by IDENTITY, as the official reference model takes them) is rewritten into the operators
    above by :func:`variable_tensors` before the walk.

Not supported (Unsupported): variables inside control-flow blocks, and in graphs compiled
as linked pieces (WHILE_LOOP, large COND_IF: compiler/link/control.py), whose pieces
are compiled alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tosa_ir import Block, Graph, Operator, Region
from tosa_ir.errors import TosaUnpredictable, Unsupported
from tosa_ir.graph import Tensor, numpy_dtype

from compiler.kinds.movement.brick_rows import brick_rows_layer
from compiler.core.errors import invalid, unsupported
from compiler.kinds.movement.layer import MoveLayer, Part, row_strides
from compiler.core.dataflow import Ref

VARIABLE_OPS = ("VARIABLE", "VARIABLE_WRITE", "VARIABLE_READ")
FOLDED_OPS = ("DIM",)

# var_t of the spec (the reference interpreter's VAR_TYPES / VAR_TYPE_CODES).
_TYPE_NAMES = {"BOOLEAN": "bool", "BOOL": "bool", "INT8": "int8", "INT16": "int16", "INT32": "int32",
               "FP16": "fp16", "BF16": "bf16", "FP32": "fp32"}
_TYPE_CODES = ["bool", "int8", "int16", "int32", "fp16", "bf16", "fp32"]


def rewrite_graph(graph: Graph) -> Graph:
    """``graph`` with DIMs folded (:func:`fold_dims`) and TOSA 1.0 variable tensors as
    variable operators (:func:`variable_tensors`); the caller's graph is left alone."""
    return variable_tensors(fold_dims(graph))


# -- DIM -------------------------------------------------------------------------------------
def fold_dims(graph: Graph) -> Graph:
    """``graph`` with every DIM of its main block replaced by a CONST_SHAPE of the axis size
    (a new main block; the caller's graph is left alone).  Unchanged if it has no DIM."""
    main = graph.main
    if not any(op.op == "DIM" for op in main.operators):
        return graph
    tensors = dict(main.tensors)
    operators = []
    for op in main.operators:
        if op.op != "DIM":
            operators.append(op)
            continue
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            raise invalid(op, f"DIM takes one input and one output, not {len(op.inputs)} and {len(op.outputs)}")
        x, y = tensors.get(op.inputs[0]), tensors.get(op.outputs[0])
        if x is None or y is None:
            raise invalid(op, "input or output tensor is not declared")
        axis = int(op.attrs.get("axis", 0))
        if not 0 <= axis < len(x.shape):
            raise invalid(op, f"axis {axis} is not an axis of the rank-{len(x.shape)} input")
        if x.shape[axis] < 0:
            raise unsupported(op, f"input {x.name!r} has an unknown size along axis {axis}")
        shape = tuple(y.shape) if tuple(y.shape) in ((), (1,)) else ()
        data = np.full(shape, x.shape[axis], dtype=numpy_dtype(y.dtype))
        tensors[y.name] = Tensor(y.name, shape, y.dtype, data)
        operators.append(Operator("CONST_SHAPE", [], [y.name], {}, op.location))
    return _with_main(graph, Block(main.name, tensors, operators, list(main.inputs), list(main.outputs)))


def _with_main(graph: Graph, block: Block) -> Graph:
    first = graph.regions[0]
    regions = [Region(first.name, [block] + list(first.blocks[1:]))] + list(graph.regions[1:])
    return Graph(regions=regions, version=graph.version, profiles=list(graph.profiles),
                 extensions=list(graph.extensions), source=graph.source)


# -- TOSA 1.0 variable tensors ----------------------------------------------------------------
def variable_tensors(graph: Graph) -> Graph:
    """The main block's tensors flagged ``variable`` (TOSA 1.0: their data is the initial
    value; an operator writing one, in practice IDENTITY, stores a new value, readers see the
    latest) as VARIABLE / VARIABLE_WRITE / VARIABLE_READ, the way the reference interpreter
    runs them: a VARIABLE per tensor, each write to a fresh tensor then VARIABLE_WRITE, each
    read a VARIABLE_READ just before its reader, a graph output read at the end."""
    main = graph.main
    names = [n for n, t in main.tensors.items() if t.variable]
    if not names:
        return graph
    for n in names:
        if n in main.inputs:
            raise Unsupported(f"variable tensor {n!r} is a graph input")
    tensors = dict(main.tensors)
    operators = []
    for n in names:
        t = tensors[n]
        attrs = {"uid": f"tensor {n}", "var_shape": list(t.shape), "type": t.dtype.upper()}
        if t.data is not None:
            attrs["initial_value"] = t.data
        operators.append(Operator("VARIABLE", [], [], attrs, f"variable tensor {n}"))
        tensors[n] = Tensor(n, t.shape, t.dtype)
    count = 0

    def fresh(n: str, what: str) -> str:
        nonlocal count
        count += 1
        name = f"{n}@{what}{count}"
        tensors[name] = Tensor(name, tensors[n].shape, tensors[n].dtype)
        return name

    for op in main.operators:
        inputs, outputs, writes = [], [], []
        for x in op.inputs:
            if x in names:
                r = fresh(x, "read")
                operators.append(Operator("VARIABLE_READ", [], [r], {"uid": f"tensor {x}"}, op.location))
                x = r
            inputs.append(x)
        for y in op.outputs:
            if y in names:
                w = fresh(y, "write")
                writes.append(Operator("VARIABLE_WRITE", [w], [], {"uid": f"tensor {y}"}, op.location))
                y = w
            outputs.append(y)
        operators.append(Operator(op.op, inputs, outputs, op.attrs, op.location))
        operators += writes
    for y in main.outputs:
        if y in names:
            operators.append(Operator("VARIABLE_READ", [], [y], {"uid": f"tensor {y}"}, "graph output"))
    return _with_main(graph, Block(main.name, tensors, operators, list(main.inputs), list(main.outputs)))


# -- variables -------------------------------------------------------------------------------
@dataclass
class _Var:
    uid: int | str
    shape: tuple[int, ...]
    dtype: str
    root: str                  # the buffer (a Root of the dataflow)
    written: bool              # has a value (initial value or a write of this run)
    current: str | None = None  # the tensor last written in this run
    op: Operator | None = None  # that write


def _state(walk) -> dict[int, _Var]:
    return walk.variables


def _uid(op: Operator) -> int | str:
    """The variable's key: the uid attribute (a string for TOSA 1.0 variable tensors)."""
    uid = op.attrs.get("uid")
    if uid is None:
        raise invalid(op, "uid is missing")
    return uid if isinstance(uid, str) else int(uid)


def _var_type(op: Operator) -> str:
    value = op.attrs.get("type")
    if isinstance(value, str):
        name = value.split(".")[-1]
        dtype = _TYPE_NAMES.get(name.upper(), name.lower())
    elif value is not None and 0 <= int(value) < len(_TYPE_CODES):
        dtype = _TYPE_CODES[int(value)]
    else:
        dtype = ""
    if dtype not in _TYPE_CODES:
        raise invalid(op, f"type {value!r} is not a var_t")
    if dtype not in ("bool", "int8", "int16", "int32"):
        raise unsupported(op, f"{dtype} variables (the NPU computes on integers)")
    return dtype


def _require(op: Operator, condition: bool, text: str) -> None:
    if not condition:
        raise TosaUnpredictable(op.op, "REQUIRE", text, op.location)


def declare(walk, op: Operator) -> None:
    """VARIABLE: a buffer holding the initial value (zeros without one)."""
    state, uid = _state(walk), _uid(op)
    _require(op, uid not in state, "!var_tensor.seen (declared twice in one run)")
    shape = tuple(int(d) for d in op.attrs.get("var_shape", []))
    dtype = _var_type(op)
    _require(op, all(d >= 1 for d in shape), "1 <= var_shape[i] (tensor_size)")
    initial = op.attrs.get("initial_value")
    data = np.zeros(shape, numpy_dtype(dtype))
    if initial is not None:
        initial = np.asarray(initial)
        _require(op, tuple(initial.shape) == shape, "var_shape == shape")
        data = initial.astype(numpy_dtype(dtype))
    root = walk.new_root(f"@variable{uid}", shape, "const", layout="rows", dtype=dtype, data=data)
    state[uid] = _Var(uid, shape, dtype, root, initial is not None)


def _lookup(walk, op: Operator) -> _Var:
    var = _state(walk).get(_uid(op))
    _require(op, var is not None, "variable_tensor != NULL (declared earlier in the block)")
    return var


def write(walk, op: Operator) -> None:
    """VARIABLE_WRITE: the written tensor becomes the variable's current value."""
    var = _lookup(walk, op)
    x = walk.block.tensor(op.inputs[0])
    _require(op, tuple(x.shape) == var.shape, "variable_tensor.shape == shape")
    _require(op, x.dtype == var.dtype, "variable_tensor.type == in_t")
    if op.inputs[0] not in walk.flow.refs:
        walk.require_vec(op, op.inputs[0])      # a constant: its own segment
    var.current, var.op, var.written = op.inputs[0], op, True


def read(walk, op: Operator) -> None:
    """VARIABLE_READ: a view of the current value (see the module docstring)."""
    var = _lookup(walk, op)
    out = walk.block.tensor(op.outputs[0])
    _require(op, var.written, "variable_tensor.is_written")
    _require(op, tuple(out.shape) == var.shape, "variable_tensor.shape == shape")
    _require(op, out.dtype == var.dtype, "variable_tensor.type == out_t")

    y, flow = op.outputs[0], walk.flow
    bricks = not walk.wants_rows(y)              # an int8 tensor a convolution or pool reads
    src = var.current if var.current is not None else var.root
    if flow.root_of(src).layout == "rows" and bricks:
        s4 = tuple([1] * (4 - len(var.shape)) + list(var.shape))
        walk.new_root(y, s4, "computed")
        flow.layers.append(brick_rows_layer(walk.new_name("move"), y, src, flow.view(y), False,
                                            [op.describe()], op.location))
        return
    if var.current is None and _written_later(walk, op, var.uid):
        # The buffer changes later in the run: the read keeps its own copy.
        walk.new_root(y, var.shape, "computed", layout="rows", dtype=var.dtype)
        flow.layers.append(_rows_copy_layer(walk.new_name("move"), src, y, var.shape, var.dtype, walk.lanes,
                                            op))
        return
    walk.alias(y, Ref(src), flow.shapes[src])


def _written_later(walk, op: Operator, uid: int | str) -> bool:
    ops = walk.block.operators
    after = ops[next(i for i, o in enumerate(ops) if o is op) + 1:]
    return any(o.op == "VARIABLE_WRITE" and _uid(o) == uid for o in after)


def _rows_copy_layer(name: str, src: str, dst: str, shape, dtype: str, lanes: int, op: Operator) -> MoveLayer:
    """A whole rows tensor copied to another of the same shape (word-mode DMA lines)."""
    shape = tuple(shape) or (1,)
    itemsize = numpy_dtype(dtype).itemsize
    strides = row_strides(shape, itemsize, lanes)
    width = -(-shape[-1] // lanes) * lanes
    loops = [(d, s, s) for d, s in zip(shape[:-1], strides[:-1])] + [(width, itemsize, itemsize)]
    return MoveLayer(name, [src], dst, itemsize, [Part(0, 0, 0, loops)], ops=[op.describe()],
                     location=op.location)


def write_back(walk) -> None:
    """Copy each variable's last written value into its buffer (after every layer of the
    walk: the scheduler orders the copy after the buffer's earlier readers)."""
    flow = walk.flow
    for var in _state(walk).values():
        if var.current is None:
            continue
        op, src = var.op, var.current
        if flow.root_of(src).layout == "rows":
            flow.layers.append(_rows_copy_layer(walk.new_name("move"), src, var.root, var.shape, var.dtype,
                                                walk.lanes, op))
        else:
            flow.layers.append(brick_rows_layer(walk.new_name("move"), src, var.root, flow.view(src), True,
                                                [op.describe()], op.location))


VARIABLE_LOWERING = {"VARIABLE": declare, "VARIABLE_WRITE": write, "VARIABLE_READ": read}


def check_block(graph: Graph, linked: bool = False) -> None:
    """Unsupported for variable operators outside the main block (control-flow bodies), and
    (``linked``: a graph compiled as pieces linked by BRANCH, compiler/link/control.py)
    for any variable: each piece is compiled alone, so a variable would not span them."""
    for region in graph.regions:
        for block in region.blocks:
            for op in block.operators:
                if op.op in VARIABLE_OPS and (linked or block is not graph.main):
                    where = "a graph with WHILE_LOOP or large COND_IF" if linked else "a control-flow block"
                    raise unsupported(op, f"variable operators in {where}")
            for tensor in block.tensors.values():
                if tensor.variable and (linked or block is not graph.main):
                    raise Unsupported(f"variable tensor {tensor.name!r} in block {block.name!r}: variables are "
                                      f"lowered in the main block of a graph without WHILE_LOOP only")
