"""Clean-up passes over the float TOSA block the NNEF converter built.

The passes are :mod:`compiler.frontends.common.graph_passes` (shared with the OpenVINO
frontend): CLAMP -> CLAMP and RESHAPE -> RESHAPE merged, tail-trimming SLICEs (added where
NNEF's rounding-down output size is not an exact TOSA division) folded into the producing
convolution where taking padding off it is enough, dead code removed; then every constant
gets its CONST / CONST_SHAPE operator.
"""
from __future__ import annotations

from compiler.frontends.common.graph_passes import (
    dead_code, fold_slices, merge_clamps, merge_reshapes, note_trim_slices,
)
from compiler.graph.quantize.prepare import add_const_ops


def finish(conv) -> None:
    """Run every pass on the converter's block."""
    block = conv.block
    merge_clamps(block)
    merge_reshapes(block)
    fold_slices(block, conv.notes)
    dead_code(block)
    note_trim_slices(block, conv.trim_slices, conv.notes)
    add_const_ops(block)
