"""Semantics of TABLE (isa/instructions.py doc) for the ISA simulator: whole instructions at
once with numpy.

The table memory TSRAM is ``state.tsram`` (TSRAM_BYTES bytes; the hardware's per-lane
copies are one memory here).  Input vectors are read and results written with the vector
unit's read/write (sim/isa/vpu.py), so TABLE addresses ASRAM and ACC exactly as VRESCALE
does.  INT8 is sim/tosa_helpers.py's lookup_int8; INT16 interpolates between the two halves
of one TSRAM pair as the doc says (tests/test_isa_table.py checks both against the reference
interpreter's TABLE, i.e. apply_lookup_s, for tables laid out as the doc prescribes).
"""
from __future__ import annotations

import numpy as np

from isa.instructions import TSRAM_BYTES, ErrorCode, TableMode, Unit, VecMem
from isa.vector import legal, operands, table_rows
from sim import tosa_helpers as th
from sim.isa.units import ASRAM, Footprint, NpuState, Trap
from sim.isa.vpu import MEM_NAMES, _depth, _vector_rows, read_vectors, run_in_pieces, write_vectors

TSRAM = "TSRAM"


def _check(state: NpuState, v: dict) -> bool:
    """Error checks in the doc's order; returns whether the instruction touches data."""
    why = legal("TABLE", v)
    if why is not None:
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, f"TABLE: {why}")
    n0, n1 = v["n0"], v["n1"]
    if n0 * n1 == 0:
        return False
    cfg = state.config
    tsram_rows = state.tsram.size // cfg.bus_bytes
    mode = TableMode(v["mode"])
    if mode is TableMode.LOAD:
        last = v["a_addr"] + (n1 - 1) * v["a_stride1"] + (n0 - 1) * v["a_stride0"]
        spans = [(VecMem.ASRAM.name, v["a_addr"], last, cfg.asram_rows),
                 (TSRAM, v["t_addr"], v["t_addr"] + n0 * n1 - 1, tsram_rows)]
    else:
        reads, out = operands("TABLE", v)
        spans = [(VecMem(op.mem).name, v[f"{op.prefix}_addr"], v[f"{op.prefix}_addr"] + op.last_offset(n0, n1),
                  _depth(state, op.mem)) for op in reads + [out]]
        spans.append((TSRAM, v["t_addr"], v["t_addr"] + table_rows(mode, cfg.bus_bytes) - 1, tsram_rows))
    for mem, first, last, depth in spans:
        if first < 0 or last >= depth:
            raise Trap(ErrorCode.SRAM_OVERFLOW, f"TABLE: {mem} rows {first}..{last} outside 0..{depth - 1}")
    return True


def _exec_table(state: NpuState, v: dict, touches: bool) -> Footprint:
    fp = Footprint(Unit.VPU)
    if not touches:
        return fp
    n0, n1, bus = v["n0"], v["n1"], state.config.bus_bytes
    mode = TableMode(v["mode"])
    t_byte = v["t_addr"] * bus
    if mode is TableMode.LOAD:
        rows = (v["a_addr"] + np.arange(n1, dtype=np.int64)[:, None] * v["a_stride1"]
                + np.arange(n0, dtype=np.int64)[None, :] * v["a_stride0"]).ravel()
        fp.reads.append((ASRAM, np.unique(rows)))
        fp.writes.append((TSRAM, (v["t_addr"], v["t_addr"] + rows.size)))
        state.tsram[t_byte:t_byte + rows.size * bus] = state.asram[rows].ravel()
        return fp
    (src,), out = operands("TABLE", v)
    a_rows = _vector_rows(src, v["a_addr"], n0, n1)
    d_rows = _vector_rows(out, v["d_addr"], n0, n1)
    fp.reads.append((TSRAM, (v["t_addr"], v["t_addr"] + table_rows(mode, bus))))
    for op, first, target in ((src, a_rows, fp.reads), (out, d_rows, fp.writes)):
        target.append((MEM_NAMES[VecMem(op.mem)], np.unique(first[:, None] + np.arange(op.rows))))
    x = read_vectors(state, src.mem, src.dtype, a_rows)
    if mode is TableMode.INT8:
        table = state.tsram[t_byte:t_byte + 256].view(np.int8)
        y = th.lookup_int8(table, x)
    else:
        pairs = state.tsram[t_byte:t_byte + TSRAM_BYTES].view("<i2").reshape(-1, 2).astype(np.int64)
        i, f = (x + 32768) >> 7, x & 0x7F
        base, nxt = pairs[i, 0], pairs[i, 1]
        y = (base << 7) + (nxt - base) * f                      # exact, |y| < 2**24
    write_vectors(state, out.mem, out.dtype, d_rows, y)
    return fp


def exec_table(state: NpuState, v: dict) -> Footprint:
    """TABLE; lookups run in pieces of at most CHUNK vectors (sim/isa/vpu.py, CHUNK)."""
    touches = _check(state, v)
    if not touches or TableMode(v["mode"]) is TableMode.LOAD:     # LOAD: bounded by TSRAM
        return _exec_table(state, v, touches)
    reads, out = operands("TABLE", v)
    return run_in_pieces(state, v, reads + [out], lambda s, piece: _exec_table(s, piece, True))


EXECUTORS = {"TABLE": exec_table}
