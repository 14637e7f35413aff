"""Facts about MATMUL's modes (``a_type``, ``w_type``; the MATMUL doc in isa/instructions.py)
that every implementation derives from: rows per input vector and per result, weight-tile
rows, the accumulator width, and the front end's cycle counts.

The ISA simulator (sim/isa/units.py), the timing model (sim/npu_timing.py), the hardware
(hw/mxu.py, hw/checker.py) and the compiler use these functions; none restates a rule.

Schedule (hw/mxu.py implements it; sim/npu_timing.py counts it): a MATMUL of ``N`` vectors
taken in cycle ``c`` reads ``P*N`` input rows from ``s = c+1`` (one per cycle, ``P`` per
vector) and the ``ROWS`` weight rows of the wavefront from ``c`` (one cycle ahead, so the
array can register its products; an INT4 tile reads each of its ROWS/2 rows twice, so the
wavefront is the same in every mode); it takes the next
command at ``s + max(P*N, ROWS) - 1`` and is busy ``s .. s + P*N + ROWS + 1``.
"""
from __future__ import annotations

from isa.instructions import MatmulAType, MatmulWType

ACC_BITS = {MatmulAType.INT8: 32, MatmulAType.INT16: 48}
A_BITS = {MatmulAType.INT8: 8, MatmulAType.INT16: 16}
W_BITS = {MatmulWType.INT8: 8, MatmulWType.INT4: 4}


def rows_per_vector(a_type: int) -> int:
    """P: ASRAM rows of one input vector, and ACC rows of one result (2 for INT16/INT48)."""
    return 2 if MatmulAType(a_type) is MatmulAType.INT16 else 1


def tile_rows(array_rows: int, w_type: int) -> int:
    """WSRAM rows of one weight tile (INT4: two weights per byte)."""
    return array_rows // 2 if MatmulWType(w_type) is MatmulWType.INT4 else array_rows


def front_end_cycles(array_rows: int, n: int, a_type: int) -> int:
    """Cycles from the front end's start to the next command it can take (``n > 0``)."""
    return max(rows_per_vector(a_type) * n, array_rows)


def busy_cycles(array_rows: int, n: int, a_type: int) -> int:
    """Busy cycles from the front end's start to the last ACC write (0 when ``n == 0``)."""
    return rows_per_vector(a_type) * n + array_rows + 2 if n else 0


def macs_per_cycle(array_rows: int, array_cols: int, a_type: int) -> int:
    """Peak multiply-accumulates per cycle of the mode (int16 inputs: half rate)."""
    return array_rows * array_cols // rows_per_vector(a_type)
