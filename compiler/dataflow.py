"""Dataflow: every tensor of the graph as a brick view of a root buffer, and the layers
that compute them.

The graph walk of the compiler.  Operators become:

* **layers** (compiler/core/ir.py): fused convolutions (compiler/kinds/conv/fusion.py), and
  :class:`compiler.core.ir.CopyLayer` DMA copies where data has to move;
* **views** (nothing to execute): a tensor that is a window of another one's bytes is a
  :class:`Ref` to it, resolved to a :class:`compiler.core.views.BrickView` of a *root* buffer;
* **bindings**: how the host lays out graph inputs and reads outputs (isa/program.py).

What each data-movement operator becomes (``L`` = bus bytes = channels per brick):

==========  =====================================================================================
RESHAPE     a view when the brick bytes of both shapes coincide (compiler/core/views.py
            ``same_bytes``: e.g. ``[1,1,1,C] <-> [1,C]``, or any change of N/H/W with C <= L);
            a DMA copy re-laying the pixels when the channel count stays; else (values change
            lanes) copies through the rows layout (compiler/kinds/movement/brick_rows.py)
TRANSPOSE   of a graph input, when the input feeds only such TRANSPOSEs: folded into the
            input binding (the host packs the transposed array); of a graph output: folded
            into the output binding; interior, permuting only N/H/W: a strided DMA copy;
            moving the channel axis: through the rows layout
SLICE       a view (the consumer's DMA reads the window: start offsets in the address, sizes
            in the lengths); a channel start inside a brick: through the rows layout
PAD         folded into each consumer CONV2D (or DEPTHWISE_CONV2D on the array) whose input
            zero point equals the pad value (H/W padding only); else a DMA copy with pad
            fill (channel padding inside a brick: through the rows layout)
CONCAT      in place: a producer (conv or copy) whose only use is the CONCAT writes straight
            into its slot of the concatenated root; other inputs are copied there.  Along
            channels with an input ending inside a brick: through the rows layout
REVERSE     through the rows layout (TILE too)
IDENTITY    a view
==========  =====================================================================================

Graph outputs bound to a graph input, or to a view that is not a whole brick tensor, are
copied into a buffer of their own.  Lanes past a tensor's channel count inside its last
brick are don't-care everywhere: convolutions multiply them by zero weights (the weight
zero point), the host drops them, and channel concatenation never puts them inside.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from isa.config import NpuConfig, array_config
from sim.reference.signatures import check_signature
from tosa_ir import Graph, Operator
from tosa_ir.errors import Unsupported

from compiler.core.dataflow import Binding, Dataflow, Ref, Root
from compiler.core.ir import ConvLayer, CopyLayer
from compiler.kinds.movement import params as movement
from compiler.kinds.movement.brick_rows import brick_rows_layer, move_via_rows, rows_copy
from compiler.core.errors import invalid, unsupported
from compiler.core.operands import CONST_OPS, scalar_input
from compiler.kinds.conv.fusion import conv_chain, conv_layer
from compiler.kinds.movement.layer import MOVE_OPS, move_layer
from compiler.kinds.mxu_conv.layer import mxu_conv
from compiler.kinds.reduce.layer import REDUCE_OPS, reduce_layer
from compiler.kinds.decompose.layer import reduce_long
from compiler.kinds.variables.layer import FOLDED_OPS, rewrite_graph, write_back
from compiler.kinds.registry import BRICK_READERS, ROWS_READERS, SELECTORS
from compiler.core.views import flat_compatible, same_bytes, shape4

# The walk's own operators, then those the kinds select themselves (compiler/kinds/registry.py).
SUPPORTED_OPS = (CONST_OPS + ("CONV2D",) + movement.MOVEMENT_OPS
                 + tuple(REDUCE_OPS) + MOVE_OPS + ("COND_IF",) + FOLDED_OPS
                 + tuple(SELECTORS))
# Operators that read "rows" tensors (isa/layout.py) as well as bricks; RESHAPE and IDENTITY of
# a rows tensor are views of its bytes.
ROWS_OPS = tuple(REDUCE_OPS) + ROWS_READERS


def build_dataflow(graph: Graph, lanes: int, config: NpuConfig | None = None) -> Dataflow:
    """Walk ``graph``'s main block (see the module docstring) for ``config`` (default: the
    reference design with ``lanes``-wide array and bus; kinds that choose a unit by its cycles
    need it).

    Raises
    ------
    Unsupported
        An operator or form the NPU cannot run, naming the operator, where, and why.
    TosaError, InvalidInput
        An illegal graph.
    """
    return GraphWalk(rewrite_graph(graph), lanes, config).run()     # DIM, 1.0 variable tensors: kinds/variables/layer.py



def fuse_graph(graph: Graph, lanes: int = 16) -> list[ConvLayer]:
    """The convolution layers of ``graph``'s main block, in execution order."""
    return [layer for layer in build_dataflow(graph, lanes).layers if isinstance(layer, ConvLayer)]


def check_operators(graph: Graph) -> None:
    """Unsupported for the first operator the compiler has no lowering for, counting the rest."""
    block = graph.main
    if not block.operators:
        raise Unsupported(f"{graph.source or 'graph'}: the main block has no operators to compile")
    bad = [op for op in block.operators if op.op not in SUPPORTED_OPS]
    if not bad:
        return
    others = Counter(op.op for op in bad[1:])
    also = f" (also not supported yet: {', '.join(f'{k} x{v}' for k, v in others.items())})" if others else ""
    raise unsupported(bad[0], _reason(bad[0].op) + also)


def _reason(op: str) -> str:
    return "operator not supported by the NPU compiler yet"


class GraphWalk:
    """The walk over the main block; kinds see it as compiler/core/dataflow.py ``Walk``."""

    rows_ops = ROWS_OPS

    def __init__(self, graph: Graph, lanes: int, config: NpuConfig | None = None):
        self.graph, self.block, self.lanes = graph, graph.main, lanes
        self.config = config if config is not None else array_config(lanes)
        if self.config.bus_bytes != lanes:
            raise ValueError(f"config of {self.config.bus_bytes}-byte bus for {lanes} lanes")
        self.choices: dict = {}                              # kinds' cached decisions
        self.consumers = self.block.consumers()
        self.producers = self.block.producers()
        self.flow = Dataflow(lanes)
        self.done: set[int] = set()                          # operators already handled
        self.folded_pads: set[str] = set()                   # PAD outputs nobody needs whole
        self.output_perms: dict[str, tuple[str, tuple]] = {}  # graph output -> (tensor, perm)
        self.counts = Counter()
        self.variables: dict = {}                            # kinds/variables/layer.py's buffers

    # -- driver -------------------------------------------------------------------------
    def run(self) -> Dataflow:
        check_operators(self.graph)
        self._bind_inputs()
        for op in self.block.operators:
            check_signature(op, self.graph.is_tosa_1)    # operand counts, before any pass indexes them
        for op in self.block.operators:
            if id(op) in self.done or op.op in CONST_OPS:
                if op.op in CONST_OPS and not all(
                        name in self.block.tensors and self.block.tensor(name).is_const for name in op.outputs):
                    raise unsupported(op, "constant operator without constant data")
                continue
            if op.op == "CONV2D":
                self._conv(op)
            elif op.op in SELECTORS:
                SELECTORS[op.op](self, op)   # a kind's own selection (compiler/kinds/registry.py)
            elif op.op in REDUCE_OPS:
                self._reduce(op)
            elif op.op in ("IDENTITY", "RESHAPE") and self.is_rows(op.inputs[0]):
                self._rows_view(op)
            elif op.op in MOVE_OPS and all(self.is_rows(t) for t in self.data_inputs(op)):
                self._move(op)
            else:
                getattr(self, "_" + op.op.lower())(op)
        write_back(self)
        self._bind_outputs()
        return self.flow

    # -- tensors ------------------------------------------------------------------------
    def new_name(self, kind: str) -> str:
        self.counts[kind] += 1
        return f"{kind}{self.counts[kind] - 1}"

    def new_root(self, name: str, shape, kind: str, **extra) -> str:
        self.flow.roots[name] = Root(name, tuple(shape), kind, **extra)
        self.flow.refs[name] = Ref(name, root=True)
        self.flow.shapes[name] = tuple(shape)
        return name

    def alias(self, name: str, ref: Ref, shape) -> None:
        self.flow.refs[name] = ref
        self.flow.shapes[name] = tuple(shape)

    def require(self, op: Operator, name: str) -> str:
        """``name`` as something with a view: computed earlier, a graph input or a constant."""
        if name in self.flow.refs:
            root = self.flow.root_of(name)
            if root.layout == "rows":
                raise unsupported(op, f"input {name!r} is {root.dtype} {list(self.flow.shapes[name])} in the "
                                      f"rows layout; {op.op} reads int8 brick tensors only")
            return name
        tensor = self.block.tensors.get(name)
        if tensor is not None and tensor.is_const:
            s4 = shape4(tensor.shape)
            if tensor.dtype != "int8" or s4 is None:
                raise unsupported(op, f"constant {name!r} is {tensor.dtype} {tensor.shape}; the NPU reads "
                                      f"int8 activations of rank 1 to 4")
            return self.new_root(name, s4, "const", data=np.asarray(tensor.data, np.int8).reshape(s4))
        if name in self.block.inputs:
            raise unsupported(op, f"graph input {name!r} is {tensor.dtype} {tensor.shape}; the NPU reads "
                                  f"int8 activations of rank 1 to 4")
        raise unsupported(op, f"input {name!r} is not a graph input or the output of a supported operator")

    def needs_brick(self, name: str) -> bool:
        """True if a reader of ``name`` needs it as bricks (not an elementwise operator, nor a
        RESHAPE/IDENTITY whose result may stay in the rows layout)."""
        for user in self.consumers.get(name, []):
            if user.op in ROWS_OPS and not (user.op in BRICK_READERS and BRICK_READERS[user.op](self, user)):
                continue
            # Data movement follows its readers, except that rank-4 int8 tensors keep the
            # brick path (host-side transposes, in-place CONCAT, the brick copies).
            if user.op in ("IDENTITY",) + MOVE_OPS and name in self.data_inputs(user) and \
                    not any(self.needs_brick(y) for y in user.outputs) and \
                    (self.block.tensor(name).dtype != "int8" or len(self.block.tensor(name).shape) != 4):
                continue
            return True
        return False

    @staticmethod
    def data_inputs(op: Operator) -> list[str]:
        """The tensors a data-movement operator moves (not its shape or value operands)."""
        return list(op.inputs) if op.op == "CONCAT" else list(op.inputs[:1])

    def _move(self, op: Operator) -> None:
        layer = move_layer(op, self.block, self.new_name("move"), self.lanes)
        layer.inputs = [self.require_vec(op, t) for t in layer.inputs]
        out = self.block.tensor(op.outputs[0])
        self.new_root(op.outputs[0], tuple(out.shape), "computed", layout="rows", dtype=out.dtype)
        self.flow.layers.append(layer)

    def wants_rows(self, name: str) -> bool:
        tensor = self.block.tensor(name)
        return tensor.dtype != "int8" or shape4(tensor.shape) is None or not self.needs_brick(name)

    def is_rows(self, name: str) -> bool:
        if name in self.flow.refs:
            return self.flow.root_of(name).layout == "rows"
        tensor = self.block.tensors.get(name)
        return tensor is not None and tensor.is_const and self.wants_rows(name)

    def require_vec(self, op: Operator, name: str) -> str:
        """``name`` for a vector-unit layer: any tensor with a view; constants as rows."""
        if name in self.flow.refs:
            return name
        tensor = self.block.tensors.get(name)
        if tensor is not None and tensor.is_const:
            if any(d < 0 for d in tensor.shape):
                raise unsupported(op, f"constant {name!r} has unknown dimensions {tensor.shape}")
            return self.new_root(name, tuple(tensor.shape), "const", layout="rows", dtype=tensor.dtype,
                              data=np.asarray(tensor.data).reshape(tensor.shape))
        raise unsupported(op, f"input {name!r} is not a graph input or the output of a supported operator")

    def vector_output(self, name: str) -> None:
        """The root of a vector-unit layer's result: rows, or bricks when a reader needs them."""
        out = self.block.tensor(name)
        if self.wants_rows(name):
            self.new_root(name, tuple(out.shape), "computed", layout="rows", dtype=out.dtype)
        else:
            self.new_root(name, shape4(out.shape), "computed")

    def _reduce(self, op: Operator) -> None:
        if reduce_long(self, op):     # longer than one VPOOL window: split (kinds/decompose/reduce_split.py)
            return
        layer = reduce_layer(op, self.block, self.new_name("reduce"))
        x = self.block.tensor(layer.input)
        if not self.is_rows(layer.input) and layer.axis == len(x.shape) - 1 and x.shape[-1] > self.lanes:
            layer.input = rows_copy(self, op, layer.input)     # channels of several bricks: as rows
        layer.input = self.require_vec(op, layer.input)
        self.vector_output(layer.output)
        self.flow.layers.append(layer)

    def _rows_view(self, op: Operator) -> None:
        """IDENTITY or RESHAPE of a rows tensor: a view when the bytes coincide."""
        x = self.require_vec(op, op.inputs[0])
        shape = tuple(self.block.tensor(op.outputs[0]).shape)
        if any(d < 0 for d in shape):
            raise unsupported(op, f"output shape {list(shape)} has unknown dimensions")
        before = tuple(self.flow.shapes[x]) or (1,)
        after = shape or (1,)
        if before[-1] != after[-1] and (before[-1] % self.lanes or after[-1] % self.lanes):
            # Rows are padded to whole vectors: the elements move (element-mode DMA).
            if op.op != "RESHAPE" or int(np.prod(before)) != int(np.prod(after)):
                raise invalid(op, f"{list(before)} -> {list(after)} changes the element count")
            self._move(op)
            return
        self.alias(op.outputs[0], Ref(x), shape)

    def _needed(self, name: str) -> bool:
        return bool(self.consumers.get(name)) or name in self.block.outputs

    def _copy(self, op: Operator | None, src: str, dst: str, reason: str, **kind) -> None:
        self.flow.layers.append(CopyLayer(self.new_name("copy"), src, dst, reason,
                                          ops=[op.describe()] if op else [],
                                          location=op.location if op else "", **kind))

    # -- graph inputs and outputs ----------------------------------------------------------
    def _bind_inputs(self) -> None:
        for x in self.block.inputs:
            tensor = self.block.tensor(x)
            users = self.consumers.get(x, [])
            if users and self.wants_rows(x):
                if any(d < 0 for d in tensor.shape):
                    raise Unsupported(f"graph input {x!r} has unknown dimensions {tensor.shape}")
                self.new_root(x, tuple(tensor.shape), "input", layout="rows", dtype=tensor.dtype)
                self.flow.inputs.append(Binding(x, tensor.shape, tensor.dtype, x, "rows"))
                continue
            s4 = shape4(tensor.shape) if tensor.dtype == "int8" and min(tensor.shape, default=1) > 0 else None
            brick = s4 is not None and (len(tensor.shape) == 4 or flat_compatible(s4, self.lanes))
            if not brick:
                if s4 is not None and users:
                    # A rank < 4 int8 input read as bricks whose bytes are not row-major (e.g.
                    # tokens [1, 16, 32]): the host lays it out as rows, one whole-brick copy
                    # makes the bricks (brick_rows.py).
                    rows = f"{x}@rows_in"
                    self.new_root(rows, tuple(tensor.shape), "input", layout="rows", dtype="int8")
                    self.flow.inputs.append(Binding(x, tensor.shape, "int8", rows, "rows"))
                    self.new_root(x, s4, "computed")
                    self.flow.layers.append(brick_rows_layer(self.new_name("move"), x, rows, self.flow.view(x), False,
                                                             [f"graph input {x!r} rows -> bricks"], ""))
                    continue
                # Raw bytes no layer reads (for other types, _require refuses readers).
                if min(tensor.shape, default=1) < 0 and not users:
                    raise Unsupported(f"graph input {x!r} has unknown dimensions {tensor.shape}")
                self.new_root(x, tensor.shape, "input", layout="flat", dtype=tensor.dtype)
                self.flow.inputs.append(Binding(x, tensor.shape, tensor.dtype, x, "flat"))
                continue
            perm = self._input_transpose(x, users)
            if perm is not None:
                # The host packs the transposed array: each TRANSPOSE output is the root.
                root = self.new_root(f"{x}@{''.join(map(str, perm))}", tuple(s4[p] for p in perm), "input")
                for user in users:
                    self.alias(user.outputs[0], Ref(root, root=True), self.flow.shapes[root])
                    self.done.add(id(user))
                self.flow.inputs.append(Binding(x, tensor.shape, "int8", root, "brick", perm))
                continue
            self.new_root(x, s4, "input")
            layout = "brick" if len(tensor.shape) == 4 else "flat"     # flat: the same bytes
            self.flow.inputs.append(Binding(x, tensor.shape, "int8", x, layout))

    def _input_transpose(self, x: str, users: list[Operator]) -> tuple[int, ...] | None:
        """The perm if ``x`` (rank 4) feeds only TRANSPOSEs with one same perm."""
        if not users or x in self.block.outputs or len(self.block.tensor(x).shape) != 4:
            return None
        perms = set()
        for user in users:
            if user.op != "TRANSPOSE" or user.inputs[0] != x:
                return None
            perms.add(movement.transpose_perm(user, self.block))
        if len(perms) != 1:
            return None
        perm = perms.pop()
        return None if perm == (0, 1, 2, 3) else perm

    def _bind_outputs(self) -> None:
        for y in self.block.outputs:
            tensor = self.block.tensor(y)
            perm = None
            if y in self.output_perms:
                src, p4 = self.output_perms[y]
                perm = tuple(int(i) for i in np.argsort(p4))
                layout = "brick"
            else:
                const = self.block.tensors.get(y)
                if y not in self.flow.refs and const is not None and const.is_const and min(const.shape, default=1) >= 0:
                    # A constant output: its segment is the output buffer.
                    self.new_root(y, tuple(const.shape), "const", layout="rows", dtype=const.dtype,
                               data=np.asarray(const.data).reshape(const.shape))
                if y not in self.flow.refs:
                    raise Unsupported(f"graph output {y!r} is not computed by any layer")
                if self.flow.root_of(y).layout == "rows":
                    self.flow.outputs.append(Binding(y, tensor.shape, tensor.dtype, y, "rows"))
                    continue
                src = y
                if self.flow.root_of(y).layout == "flat":
                    raise Unsupported(f"graph output {y!r} is a graph input of {tensor.dtype} {tensor.shape} "
                                      f"that the NPU does not read (int8 of rank 1 to 4 only)")
                layout = "brick" if len(tensor.shape) == 4 else "flat"
                if layout == "flat" and not flat_compatible(self.flow.shapes[y], self.lanes):
                    # Rank < 4 bricks whose bytes are not row-major: one whole-brick copy into
                    # the rows layout, which the host reads for any shape.
                    rows = f"{y}@rows_out"
                    self.new_root(rows, tuple(tensor.shape), "computed", layout="rows", dtype="int8")
                    self.flow.layers.append(brick_rows_layer(self.new_name("move"), y, rows, self.flow.view(y), True,
                                                             [f"graph output {y!r} bricks -> rows"], ""))
                    self.flow.outputs.append(Binding(y, tensor.shape, "int8", rows, "rows"))
                    continue
            view = self.flow.view(src)
            kind = self.flow.root_of(src).kind
            if kind == "input" or not view.dense:
                why = "is a graph input" if kind == "input" else "is a window of a larger buffer"
                copy = self.new_root(f"{y}@out", view.shape, "computed")
                self._copy(None, src, copy, f"graph output {y!r} {why}")
                src = copy
            self.flow.outputs.append(Binding(y, tensor.shape, "int8", src, layout, perm))

    # -- compute ------------------------------------------------------------------------
    def _conv(self, op: Operator) -> None:
        try:
            if self.block.tensor(op.inputs[0]).dtype != "int8":
                raise unsupported(op, "int16 input")
            chain = conv_chain(op, self.block, self.consumers)
            layer: ConvLayer = conv_layer(chain, self.block, self.new_name("conv"))
        except Unsupported:
            # not int8 CONV2D -> RESCALE int8: accumulators out, or the RESCALE from ACC (kinds/mxu_conv/layer.py)
            mxu_conv(self, op)
            return
        self.add_conv(op, chain, layer)

    def add_conv(self, op: Operator, chain: list[Operator], layer: ConvLayer) -> None:
        """The fused convolution ``layer`` of ``chain`` (``op`` first), a PAD before it folded
        into its padding where it can be."""
        self.done.update(id(o) for o in chain)
        src, pad = layer.input, list(layer.pad)
        while src in self.producers and self.producers[src].op == "PAD":
            pad_op = self.producers[src]
            fold = self._pad_fold(pad_op, op)
            if fold is None:
                break
            for i, p in enumerate(fold):
                pad[i] += p
            if src in self.folded_pads:
                layer.ops.insert(0, pad_op.describe())
            src = pad_op.inputs[0]
        layer.input = self.require(op, src)
        layer.in_shape = self.flow.shapes[src]
        layer.pad = tuple(pad)
        self.new_root(layer.output, layer.out_shape, "computed")
        self.flow.layers.append(layer)

    def _pad_fold(self, pad_op: Operator, conv: Operator) -> tuple[int, int, int, int] | None:
        """(top, bottom, left, right) if ``pad_op`` folds into ``conv``'s padding: H/W
        padding only, with the conv's input zero point as value (what the conv pads with)."""
        if conv.op not in ("CONV2D", "DEPTHWISE_CONV2D") or conv.inputs[0] != pad_op.outputs[0]:
            return None
        if conv.op == "DEPTHWISE_CONV2D" and not BRICK_READERS[conv.op](self, conv):
            return None                    # on the vector unit: it reads the padded tensor
        (n0, n1, h0, h1, w0, w1, c0, c1), value = movement.pad_params(pad_op, self.block)
        if n0 or n1 or c0 or c1 or value != scalar_input(conv, self.block, 3, "input_zp"):
            return None
        return h0, h1, w0, w1

    # -- data movement ------------------------------------------------------------------
    def _identity(self, op: Operator) -> None:
        s4 = movement.identity_check(op, self.block)
        self.alias(op.outputs[0], Ref(self.require(op, op.inputs[0])), s4)

    def _slice(self, op: Operator) -> None:
        start, size = movement.slice_params(op, self.block)
        if start[3] % self.lanes:
            move_via_rows(self, op, f"the slice starts at channel {start[3]}, inside a brick")
            return
        self.alias(op.outputs[0], Ref(self.require(op, op.inputs[0]), offset=start), size)

    def _reshape(self, op: Operator) -> None:
        in4, out4 = movement.reshape_check(op, self.block)
        x, out = self.require(op, op.inputs[0]), op.outputs[0]
        if in4 == out4:
            self.alias(out, Ref(x), out4)
            return
        if same_bytes(in4, out4, self.lanes):
            if self.flow.view(x).dense:
                self.alias(out, Ref(x, reshape=True), out4)
            elif self._needed(out):
                # Gather the window into a whole buffer whose bytes the output then is.
                root = self.new_root(out, out4, "computed")
                as_in = self._root_alias(f"{out}@{'x'.join(map(str, in4))}", root, in4)
                self._copy(op, x, as_in, "RESHAPE of a window of a larger buffer")
            return
        if in4[3] != out4[3]:
            if self._needed(out):
                move_via_rows(self, op, f"regroups channels ({in4[3]} -> {out4[3]})")
            return
        if self._needed(out):
            self.new_root(out, out4, "computed")
            self._copy(op, x, out, "RESHAPE re-lays the pixels", relayout=True)

    def _root_alias(self, name: str, root: str, shape) -> str:
        """A tensor holding the bytes of the whole root ``root`` as a brick tensor of ``shape``."""
        self.alias(name, Ref(root, reshape=True), shape)
        return name

    def _transpose(self, op: Operator) -> None:
        perm = movement.transpose_perm(op, self.block)
        x, out = op.inputs[0], op.outputs[0]
        x = self.require(op, x)
        if perm == (0, 1, 2, 3):
            self.alias(out, Ref(x), self.flow.shapes[x])
            return
        if out in self.block.outputs and not self.consumers.get(out) and len(self.block.tensor(out).shape) == 4:
            self.output_perms[out] = (x, perm)     # the host reads the transposed array
            return
        if perm[3] != 3:
            if self._needed(out):
                move_via_rows(self, op, "moves the channel axis")
            return
        if self._needed(out):
            self.new_root(out, movement.activation(op, self.block, out, "output"), "computed")
            axes = "".join("NHW"[p] for p in perm[:3])
            self._copy(op, x, out, f"TRANSPOSE NHW -> {axes}", perm=tuple(perm[:3]))

    def _reverse(self, op: Operator) -> None:
        # (brick to brick with negative strides would save two copies; rare enough for now)
        if self._needed(op.outputs[0]):
            move_via_rows(self, op, "REVERSE of a brick tensor")

    def _tile(self, op: Operator) -> None:
        if self._needed(op.outputs[0]):
            move_via_rows(self, op, "TILE of a brick tensor")

    def _pad(self, op: Operator) -> None:
        pad, value = movement.pad_params(op, self.block)
        out = op.outputs[0]
        users = self.consumers.get(out, [])
        if out not in self.block.outputs and all(self._pad_fold(op, u) is not None for u in users):
            self.folded_pads.add(out)     # every consumer pads by itself (or none uses it)
            return
        n, h, w, c = movement.activation(op, self.block, op.inputs[0], "input")
        lanes = self.lanes
        if pad[6] % lanes or (pad[7] and c % lanes):
            move_via_rows(self, op, "pads channels inside a brick")
            return
        x = self.require(op, op.inputs[0])
        self.new_root(out, movement.activation(op, self.block, out, "output"), "computed")
        self._copy(op, x, out, f"PAD with {value}", pad=pad, pad_value=value)

    def _concat(self, op: Operator) -> None:
        axis, shapes = movement.concat_axis(op, self.block)
        out = op.outputs[0]
        lanes = self.lanes
        if axis == 3:
            if any(s[3] % lanes for s in shapes[:-1]):
                move_via_rows(self, op, "an input starts inside a brick")
                return
        root = self.new_root(out, movement.activation(op, self.block, out, "output"), "computed")
        at = 0
        for k, (name, s) in enumerate(zip(op.inputs, shapes)):
            offset = [0, 0, 0, 0]
            offset[axis] = at
            at += s[axis]
            if self._placeable(name, op):
                # The producer writes straight into its slot: its root becomes a window.
                del self.flow.roots[name]
                self.alias(name, Ref(root, offset=tuple(offset)), s)
                continue
            src = self.require(op, name)
            slot = f"{out}[{k}]"
            self.alias(slot, Ref(root, offset=tuple(offset)), s)
            self._copy(op, src, slot, f"CONCAT input {k} cannot be written in place")

    def _placeable(self, name: str, concat: Operator) -> bool:
        """True if ``name`` can live in its CONCAT slot: a root that a layer computes, used
        only by this CONCAT (once), not a graph output."""
        ref, root = self.flow.refs.get(name), self.flow.roots.get(name)
        return (ref is not None and ref.root and ref.parent == name and root is not None
                and root.kind == "computed" and len(self.consumers.get(name, [])) == 1
                and concat.inputs.count(name) == 1 and name not in self.block.outputs)
