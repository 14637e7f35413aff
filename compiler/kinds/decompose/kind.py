"""Operators the vector unit runs as a few simpler layers of other kinds (ARGMAX, GATHER,
SCATTER, MATMUL, RESIZE; long reductions): selection only (layer.py, reduce_split.py)."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.decompose.layer import DECOMPOSED_OPS, decompose

KIND = Kind("decompose", select={op: decompose for op in DECOMPOSED_OPS}, rows_ops=DECOMPOSED_OPS)
