"""The dataflow's data: root buffers, views of them, I/O bindings, and the walk's interface.

compiler/dataflow.py walks a TOSA graph and fills a :class:`Dataflow`: every tensor a
:class:`Ref` (a view) of a :class:`Root` buffer in external memory, the layers in execution
order, and the :class:`Binding` of every graph input and output.  Memory planning
(compiler/program/memplan.py) gives the roots addresses; every kind reads its tensors through
``Dataflow.view``.

The kinds' selection functions (``mxu_conv(walk, op)``, ``decompose(walk, op)``, the
variables' handlers, ...) add their layers and buffers through the :class:`Walk` interface,
never through the walker's internals: this module sits below every kind, the walker above.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from isa.patches import Patches
from tosa_ir import Block, Graph, Operator

from compiler.core.views import BrickView, dense_strides

__all__ = ["Binding", "Dataflow", "Ref", "Root", "Walk"]


@dataclass
class Root:
    """A buffer in external memory: one brick tensor (``layout`` "brick", NHWC ``shape``),
    or, for a graph input no layer reads, the graph's tensor as ``flat`` bytes."""

    name: str
    shape: tuple[int, ...]
    kind: str                        # "input", "const" or "computed"
    layout: str = "brick"
    dtype: str = "int8"
    data: np.ndarray | None = None   # constants: the values (NHWC)


@dataclass(frozen=True)
class Ref:
    """Where a tensor's bytes are: the root ``parent`` itself (``root``), or a window of the
    tensor ``parent`` starting at NHWC element ``offset``, or (``reshape``) the bytes of the
    whole tensor ``parent`` read as a brick tensor of this tensor's shape.  Of a ``rows``
    tensor, a Ref is the parent's bytes read in this tensor's shape, or (``window``) the
    window of ``parent`` at element ``offset`` in the parent's strides (the strips of output
    rows that RESIZE writes; only the writing layer addresses it,
    compiler/kinds/elementwise/lower.py ``tensor_array``)."""

    parent: str
    root: bool = False
    offset: tuple[int, int, int, int] = (0, 0, 0, 0)
    reshape: bool = False
    window: bool = False


@dataclass
class Binding:
    """A graph input or output: graph ``name`` and ``shape``, held by the view of
    ``tensor`` (a key of :attr:`Dataflow.refs`) in ``layout``, transposed by ``perm`` and
    written as ``patches`` (isa.program.TensorBinding)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    tensor: str
    layout: str
    perm: tuple[int, ...] | None = None
    patches: Patches | None = None


@dataclass
class Dataflow:
    """What the walk found: layers in execution order, roots, views, bindings."""

    lanes: int
    layers: list = field(default_factory=list)
    roots: dict[str, Root] = field(default_factory=dict)
    refs: dict[str, Ref] = field(default_factory=dict)
    shapes: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    inputs: list[Binding] = field(default_factory=list)
    outputs: list[Binding] = field(default_factory=list)

    def root_of(self, name: str) -> Root:
        ref = self.refs[name]
        return self.roots[ref.parent] if ref.root else self.root_of(ref.parent)

    def view(self, name: str) -> BrickView:
        """The tensor ``name`` in its root (addresses relative to the root's start)."""
        ref, shape, lanes = self.refs[name], self.shapes[name], self.lanes
        if ref.root:
            root = self.roots[ref.parent]
            return BrickView(root.name, 0, shape, dense_strides(root.shape, lanes), lanes)
        parent = self.view(ref.parent)
        if ref.reshape:
            return BrickView(parent.root, parent.addr, shape, dense_strides(shape, lanes), lanes)
        return parent.window(ref.offset, shape)


class Walk(Protocol):
    """What a kind's selection function may use of the dataflow walk (compiler/dataflow.py).

    Attributes: ``graph`` and its main ``block``; ``lanes`` (bus bytes = channels per brick);
    ``flow``, the :class:`Dataflow` being built (append layers to ``flow.layers``);
    ``consumers`` (tensor name -> operators reading it); ``done`` (ids of operators already
    lowered: a kind that fuses a consumer adds it); ``variables`` (the graph's variable
    buffers); ``rows_ops`` (operators that read tensors in the rows layout).
    """

    graph: Graph
    block: Block
    lanes: int
    flow: Dataflow
    consumers: dict[str, list[Operator]]
    done: set[int]
    rows_ops: tuple[str, ...]
    variables: dict
    config: object          # isa.config.NpuConfig: for kinds that choose by cost
    choices: dict           # decisions kinds cache per operator (key -> value)

    def new_name(self, kind: str) -> str:
        """A fresh layer or buffer name: ``kind`` and a counter."""

    def new_root(self, name: str, shape, kind: str, **extra) -> str:
        """A new root buffer ``name`` (``kind`` "input", "const" or "computed"; ``extra``:
        :class:`Root` fields) that is its own view; returns ``name``."""

    def alias(self, name: str, ref: Ref, shape) -> None:
        """Tensor ``name`` (of ``shape``) is the view ``ref``: no data moves."""

    def require(self, op: Operator, name: str) -> str:
        """``name`` as an int8 brick tensor with a view (computed, graph input or constant)."""

    def require_vec(self, op: Operator, name: str) -> str:
        """``name`` for a vector-unit layer: any tensor with a view; constants as rows."""

    def is_rows(self, name: str) -> bool:
        """True if ``name`` lives (or, a constant, would live) in the rows layout."""

    def needs_brick(self, name: str) -> bool:
        """True if a reader of ``name`` needs it as bricks."""

    def wants_rows(self, name: str) -> bool:
        """True if the result ``name`` is best kept in the rows layout."""

    def data_inputs(self, op: Operator) -> list[str]:
        """The tensors a data-movement operator moves (not its shape or value operands)."""

    def vector_output(self, name: str) -> None:
        """The root of a vector-unit layer's result: rows, or bricks when a reader needs them."""

    def add_conv(self, op: Operator, chain: list[Operator], layer) -> None:
        """Add the fused convolution ``layer`` (compiler/core/ir.py ConvLayer) of the operators
        ``chain`` (``op`` first), folding a PAD before it into its padding where it can."""
