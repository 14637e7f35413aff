"""The one registry of layer kinds (compiler/core/kind.py ``Kind``).

The driver (compiler/driver.py) plans, lowers and emits every layer through its kind; the
dataflow walk (compiler/dataflow.py) hands the operators in a kind's ``select`` to it.
Adding a kind: a package under compiler/kinds/ with its ``kind.py``, and one line here
(compiler/README.md, "Adding a layer kind").
"""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.conv.kind import KIND as CONV
from compiler.kinds.decompose.kind import KIND as DECOMPOSE
from compiler.kinds.depthwise.kind import KIND as DEPTHWISE
from compiler.kinds.elementwise.kind import KIND as ELEMENTWISE
from compiler.kinds.matmul.kind import KIND as MATMUL
from compiler.kinds.movement.kind import COPY, MOVES
from compiler.kinds.mxu_conv.kind import KIND as MXU_CONV
from compiler.kinds.pooling.kind import KIND as POOLING
from compiler.kinds.reduce.kind import KIND as REDUCE
from compiler.kinds.variables.kind import KIND as VARIABLES

__all__ = ["BRICK_READERS", "KINDS", "ROWS_READERS", "SELECTORS", "kind_of"]

KINDS: tuple[Kind, ...] = (
    CONV,
    COPY,
    POOLING,
    ELEMENTWISE,
    REDUCE,
    MOVES,
    MATMUL,
    MXU_CONV,
    DECOMPOSE,
    DEPTHWISE,
    VARIABLES,
)

_BY_TYPE = {kind.layer_type: kind for kind in KINDS if kind.layer_type is not None}
SELECTORS = {op: fn for kind in KINDS for op, fn in kind.select.items()}
if len(SELECTORS) != sum(len(kind.select) for kind in KINDS):
    raise RuntimeError("an operator is selected by two kinds")
ROWS_READERS = tuple(op for kind in KINDS for op in kind.rows_ops)
# Rows readers that may read bricks after all, by the kind's decision per operator.
BRICK_READERS = {op: kind.reads_bricks for kind in KINDS if kind.reads_bricks is not None for op in kind.rows_ops}


def kind_of(layer) -> Kind:
    """The kind that lowers ``layer`` (by its class or the nearest registered base class)."""
    for cls in type(layer).__mro__:
        if cls in _BY_TYPE:
            return _BY_TYPE[cls]
    raise TypeError(f"no layer kind lowers {type(layer).__name__}")
