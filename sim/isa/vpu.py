"""Semantics of the vector instructions VRESCALE, VALU, VPOOL and VDWCONV (isa/instructions.py docs)
for the ISA simulator: whole instructions at once with numpy.

Every instruction is executed as "read every operand vector, compute, write every result in
loop order".  That is the doc's vector-by-vector order whenever the program keeps the doc's
rule that no row written for one output vector is read for a later one (the result of a
program breaking it is unspecified).  The spec arithmetic is sim/tosa_helpers.py's, called
with a ``require`` that accepts everything (the instructions define their result beyond
the spec's REQUIREs, as the docs say); the RESCALE step is ACT's (sim/isa/rescale.py).
"""
from __future__ import annotations

import numpy as np

from isa.instructions import VecType, ErrorCode, PoolMode, Unit, ValuOp, VecMem
from isa.vector import (PARAM_ROWS, TOSA_NAME, UNSIGNED, VALU_SIGS, WINDOWED, Operand, dtype_range, legal,
                        operands, vector_rows)
from sim import tosa_helpers as th
from sim.isa.rescale import act_output, rescale
from sim.isa.units import ACC, ASRAM, PSRAM, Footprint, NpuState, Trap

MEM_NAMES = {VecMem.ASRAM: ASRAM, VecMem.ACC: ACC, VecMem.PSRAM: PSRAM}

#: Vector reads per execution step.  An instruction may loop over up to 2**32 output vectors
#: (stride 0 keeps them in range), so it runs as pieces of whole loop iterations in loop
#: order: the simulator's memory stays bounded and the result is the same (the docs' rule
#: that no row written for one output vector is read for a later one).
CHUNK = 1 << 16


def _unchecked(cond, text: str) -> None:
    """A ``require`` that accepts everything: the instruction defines the result anyway."""


# -- vector storage --------------------------------------------------------------------------
def _depth(state: NpuState, mem: int) -> int:
    cfg = state.config
    return {VecMem.ASRAM: cfg.asram_rows, VecMem.ACC: cfg.acc_rows, VecMem.PSRAM: cfg.psram_rows}[VecMem(mem)]


def read_vectors(state: NpuState, mem: int, dtype: VecType, rows: np.ndarray) -> np.ndarray:
    """Values (int64, shape ``rows.shape + (COLS,)``) of the vectors of ``dtype`` whose first
    row in ``mem`` is each element of ``rows`` (the doc's read())."""
    mem, dtype = VecMem(mem), VecType(dtype)
    name = TOSA_NAME[dtype]
    lanes = state.config.array_cols
    if mem is VecMem.ASRAM:
        size = vector_rows(mem, dtype)
        raw = state.asram[rows[..., None] + np.arange(size)]          # (..., size, row bytes)
        raw = raw.reshape(rows.shape + (lanes, size)).astype(np.int64)
        value = (raw << (8 * np.arange(size))).sum(axis=-1)             # little-endian lanes
    else:
        words = state.acc if mem is VecMem.ACC else state.psram
        value = words[rows].astype(np.int64)
        if dtype is VecType.INT48:
            high = words[rows + 1].astype(np.int64)
            value = (high << 32) | th.zero_extend(value, "int32")
    return th.zero_extend(value, name) if dtype in UNSIGNED else th.sign_extend(value, name)


def write_vectors(state: NpuState, mem: int, dtype: VecType, rows: np.ndarray, values: np.ndarray) -> None:
    """Store vectors (``values``: (N, COLS)) at first rows ``rows`` (N,), in order: where two
    vectors share a row the later one's bytes win (the doc's write())."""
    mem, dtype = VecMem(mem), VecType(dtype)
    y = th.wrap(values, TOSA_NAME[dtype])            # T(y): unsigned types keep the value
    if mem is VecMem.ASRAM:
        size = vector_rows(mem, dtype)
        data = ((y[..., None] >> (8 * np.arange(size))) & 0xFF).astype(np.uint8)   # (N, COLS, size)
        data = data.reshape(len(rows), size, -1)                      # row-major bytes per vector
        target = (rows[:, None] + np.arange(size)).ravel()
        data = data.reshape(-1, data.shape[-1])
        memory = state.asram
    else:
        target, data, memory = rows, y.astype(np.int64).astype(np.int32), state.acc
    _store_last_wins(memory, target, data)


def _store_last_wins(memory: np.ndarray, target: np.ndarray, data: np.ndarray) -> None:
    """memory[target[k]] = data[k] for every k in order (numpy leaves the order of repeated
    fancy-index assignments undefined, so keep each row's last writer only)."""
    if np.unique(target).size == target.size:
        memory[target] = data
        return
    uniq, first_rev = np.unique(target[::-1], return_index=True)
    memory[uniq] = data[target.size - 1 - first_rev]


# -- addressing and checks -------------------------------------------------------------------
def _vector_rows(op: Operand, addr: int, n0: int, n1: int) -> np.ndarray:
    """First row of the operand for every output vector, in loop order: shape (N,) or, for a
    window, (N, k1*k0)."""
    s0, s1 = op.strides
    base = (addr + np.arange(n1, dtype=np.int64)[:, None] * s1 + np.arange(n0, dtype=np.int64)[None, :] * s0).ravel()
    if op.window is None:
        return base
    ws0, k0, ws1, k1 = op.window
    win = (np.arange(k1, dtype=np.int64)[:, None] * ws1 + np.arange(k0, dtype=np.int64)[None, :] * ws0).ravel()
    return base[:, None] + win[None, :]


def _check(state: NpuState, name: str, v: dict) -> tuple[list[Operand], Operand, bool]:
    """Error checks in the doc's order; returns (sources, destination, touches data)."""
    why = legal(name, v)
    if why is not None:
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, f"{name}: {why}")
    reads, out = operands(name, v)
    if name in PARAM_ROWS:
        p, k = v["param_addr"], PARAM_ROWS[name]
        if p < 0 or p + k > state.config.psram_rows:
            raise Trap(ErrorCode.SRAM_OVERFLOW,
                       f"PSRAM parameter rows {p}..{p + k - 1} outside 0..{state.config.psram_rows - 1}")
    n0, n1 = v["n0"], v["n1"]
    touches = n0 * n1 * (v["k0"] * v["k1"] if name in WINDOWED else 1) > 0
    if touches:
        for op in reads + [out]:
            addr = v[f"{op.prefix}_addr"]
            last = addr + op.last_offset(n0, n1)
            depth = _depth(state, op.mem)
            if addr < 0 or last >= depth:
                raise Trap(ErrorCode.SRAM_OVERFLOW,
                           f"{name} operand {op.prefix}: {VecMem(op.mem).name} rows {addr}..{last} "
                           f"outside 0..{depth - 1}")
    return reads, out, touches


def _footprint(state: NpuState, name: str, v: dict, reads, out, touches: bool) -> Footprint:
    """Rows read and written (PSRAM in bus words, like its DMA)."""
    fp = Footprint(Unit.VPU)
    wpr = state.config.words_per_wide_row
    if name in PARAM_ROWS:
        fp.reads.append((PSRAM, (v["param_addr"] * wpr, (v["param_addr"] + PARAM_ROWS[name]) * wpr)))
    if not touches:
        return fp
    for op, target in [(op, fp.reads) for op in reads] + [(out, fp.writes)]:
        first = _vector_rows(op, v[f"{op.prefix}_addr"], v["n0"], v["n1"]).ravel()
        rows = np.unique(first[:, None] + np.arange(op.rows)).astype(np.int64)
        if op.mem == VecMem.PSRAM:
            rows = (rows[:, None] * wpr + np.arange(wpr)).ravel()
        target.append((MEM_NAMES[VecMem(op.mem)], rows))
    return fp


def pieces(v: dict, ops, window: int = 1):
    """``v`` split into sub-instructions of at most CHUNK / window output vectors, in loop
    order: whole inner loops while they fit, else parts of one inner loop; each operand's
    address field moved to the piece's first vector."""
    n0, n1 = v["n0"], v["n1"]
    per = max(1, CHUNK // window)
    if n0 * n1 <= per:
        yield v
        return

    def moved(i1: int, i0: int, m0: int, m1: int) -> dict:
        out = dict(v, n0=m0, n1=m1)
        for op in ops:
            s0, s1 = op.strides
            out[f"{op.prefix}_addr"] = v[f"{op.prefix}_addr"] + i1 * s1 + i0 * s0
        return out

    if n0 <= per:
        step = per // n0
        for i1 in range(0, n1, step):
            yield moved(i1, 0, n0, min(step, n1 - i1))
        return
    for i1 in range(n1):
        for i0 in range(0, n0, per):
            yield moved(i1, i0, min(per, n0 - i0), 1)


def merged_footprint(parts) -> Footprint:
    """One footprint from the footprints of an instruction's pieces (rows united per memory)."""
    parts = list(parts)
    fp = Footprint(parts[0].unit)
    for kind in ("reads", "writes"):
        by_mem: dict = {}
        for part in parts:
            for mem, rows in getattr(part, kind):
                if isinstance(rows, tuple):
                    rows = np.arange(rows[0], rows[1], dtype=np.int64)
                by_mem[mem] = np.union1d(by_mem[mem], rows) if mem in by_mem else np.unique(rows)
        getattr(fp, kind).extend(by_mem.items())
    return fp


def run_in_pieces(state: NpuState, v: dict, ops, body, window: int = 1) -> Footprint:
    """``body(state, piece)`` for every piece of ``v`` (:func:`pieces`), in loop order; one footprint."""
    parts = list(pieces(v, ops, window))
    if len(parts) == 1:
        return body(state, v)
    return merged_footprint(body(state, part) for part in parts)


def _read_operand(state: NpuState, op: Operand, v: dict, bcast: bool = False) -> np.ndarray:
    values = read_vectors(state, op.mem, op.dtype, _vector_rows(op, v[f"{op.prefix}_addr"], v["n0"], v["n1"]))
    return np.broadcast_to(values[..., :1], values.shape) if bcast else values


def _write_result(state: NpuState, out: Operand, v: dict, values: np.ndarray) -> None:
    write_vectors(state, out.mem, out.dtype, _vector_rows(out, v["d_addr"], v["n0"], v["n1"]), values)


# -- VRESCALE ----------------------------------------------------------------------------------
def _exec_vrescale(state: NpuState, v: dict) -> Footprint:
    reads, out, touches = _check(state, "VRESCALE", v)
    fp = _footprint(state, "VRESCALE", v, reads, out, touches)
    if not touches:
        return fp
    mul, shift = state.psram[v["param_addr"]:v["param_addr"] + 2].astype(np.int64)
    if not v["per_channel"]:
        mul, shift = np.full_like(mul, mul[0]), np.full_like(shift, shift[0])
    x = _read_operand(state, reads[0], v)
    value = th.wrap(x - v["in_zp"], "int48")
    scale32 = bool(v["scale32"])
    if scale32:
        s = rescale(th.wrap(value, "int32"), th.wrap(mul, "int32"), shift & 63, True, bool(v["double_round"]))
    else:
        s = rescale(value, th.wrap(mul, "int16"), shift & 63, False, False)
    lo, hi = dtype_range(out.dtype)
    y = th.apply_clip_s(s.astype(np.int64) + v["out_zp"], lo, hi, require=_unchecked)
    if v["clamp"]:
        y = th.apply_clip_s(y, v["clamp_min"], v["clamp_max"], require=_unchecked)
    _write_result(state, out, v, y)
    return fp


# -- VALU ----------------------------------------------------------------------------------------
def _valu(op: ValuOp, t: str, a, b, c, imm0: int, imm1: int) -> np.ndarray:
    """The VALU table of the doc, before U(): exact integers (int64)."""
    k = (b & 31) if b is not None else None
    if op is ValuOp.ADD:
        return th.apply_add_s(a, b, t, require=_unchecked)
    if op is ValuOp.SUB:
        return th.apply_sub_s(a, b, t, require=_unchecked)
    if op is ValuOp.MUL:
        shift = imm0 & 63
        if shift == 0:
            return th.apply_mul_s(a, b, "int32")
        with np.errstate(over="ignore"):       # only 2**62 + 2**62 (shift 63) wraps
            return (th.apply_mul_s(a, b, "int64") + np.int64(1 << (shift - 1))) >> shift
    if op is ValuOp.ARITHMETIC_RIGHT_SHIFT:
        r = th.apply_arith_rshift(a, k, t)
        if imm0 & 1:
            r = r + np.where(k > 0, th.apply_arith_rshift(a, np.maximum(k - 1, 0), t) & 1, 0)
        return r
    if op is ValuOp.LOGICAL_LEFT_SHIFT:
        return a << k
    if op is ValuOp.LOGICAL_RIGHT_SHIFT:
        return th.apply_logical_rshift(th.zero_extend(a, t), k, t)
    if op is ValuOp.BITWISE_AND:
        return a & b
    if op is ValuOp.BITWISE_OR:
        return a | b
    if op is ValuOp.BITWISE_XOR:
        return a ^ b
    if op is ValuOp.BITWISE_NOT:
        return ~a
    if op is ValuOp.MINIMUM:
        return th.apply_min_s(a, b)
    if op is ValuOp.MAXIMUM:
        return th.apply_max_s(a, b)
    if op is ValuOp.CLAMP:
        return th.apply_clip_s(a, imm0, imm1, require=_unchecked)
    if op is ValuOp.EQUAL:
        return (a == b).astype(np.int64)
    if op is ValuOp.GREATER:
        return (a > b).astype(np.int64)
    if op is ValuOp.GREATER_EQUAL:
        return (a >= b).astype(np.int64)
    if op is ValuOp.LOGICAL_AND:
        return ((a != 0) & (b != 0)).astype(np.int64)
    if op is ValuOp.LOGICAL_OR:
        return ((a != 0) | (b != 0)).astype(np.int64)
    if op is ValuOp.LOGICAL_XOR:
        return ((a != 0) != (b != 0)).astype(np.int64)
    if op is ValuOp.LOGICAL_NOT:
        return (a == 0).astype(np.int64)
    if op is ValuOp.SELECT:
        return np.where(a != 0, b, c)
    if op is ValuOp.ABS:
        return np.where(a < 0, th.apply_sub_s(0, a, t, require=_unchecked), a)
    if op is ValuOp.NEGATE:
        value = th.apply_sub_s(a, imm0, "int64", require=_unchecked)
        value = th.apply_add_s(th.apply_sub_s(0, value, "int64", require=_unchecked), imm1, "int64",
                               require=_unchecked)
        return th.apply_clip_s(value, th.minimum_s(t), th.maximum_s(t), require=_unchecked)
    if op is ValuOp.CLZ:
        return th.count_leading_zeros(a)
    if op is ValuOp.COPY:
        return np.asarray(a, dtype=np.int64)
    raise AssertionError(op)


def _exec_valu(state: NpuState, v: dict) -> Footprint:
    reads, out, touches = _check(state, "VALU", v)
    fp = _footprint(state, "VALU", v, reads, out, touches)
    if not touches:
        return fp
    op = ValuOp(v["op"])
    values = [_read_operand(state, r, v, bool(v[f"{r.prefix}_bcast"])) for r in reads]
    a, b, c = values + [None] * (3 - len(values))
    result = _valu(op, TOSA_NAME[VecType(v["dtype"])], a, b, c, v["imm0"], v["imm1"])
    _write_result(state, out, v, result)
    return fp


# -- VPOOL ---------------------------------------------------------------------------------------
def _exec_vpool(state: NpuState, v: dict) -> Footprint:
    reads, out, touches = _check(state, "VPOOL", v)
    fp = _footprint(state, "VPOOL", v, reads, out, touches)
    if not touches:
        return fp
    x = _read_operand(state, reads[0], v)             # (N, k1*k0, COLS)
    if PoolMode(v["mode"]) is PoolMode.MAX:
        result = x.max(axis=1)                        # apply_max_s over the window
    else:
        # apply_add_s<int32> of (value - input_zp), wrapping: exact sum, then int32.
        result = th.wrap(th.apply_sub_s(x, v["in_zp"], "int64", require=_unchecked).sum(axis=1), "int32")
    _write_result(state, out, v, result)
    return fp


def _in_pieces(name: str, body):
    def execute(state: NpuState, v: dict) -> Footprint:
        reads, out, touches = _check(state, name, v)        # the whole instruction's errors first
        if not touches:
            return body(state, v)
        window = v["k0"] * v["k1"] if name in WINDOWED else 1
        return run_in_pieces(state, v, reads + [out], body, window)
    execute.__name__ = execute.__qualname__ = f"exec_{name.lower()}"
    execute.__doc__ = f"{name}, in pieces of at most CHUNK vectors (see CHUNK)."
    return execute


exec_vrescale = _in_pieces("VRESCALE", _exec_vrescale)
exec_valu = _in_pieces("VALU", _exec_valu)
exec_vpool = _in_pieces("VPOOL", _exec_vpool)


# -- VDWCONV -------------------------------------------------------------------------------------
def _exec_vdwconv(state: NpuState, v: dict) -> Footprint:
    reads, out, touches = _check(state, "VDWCONV", v)
    fp = _footprint(state, "VDWCONV", v, reads, out, touches)
    if not touches:
        return fp
    x = _read_operand(state, reads[0], v)                      # (N, k1*k0, COLS)
    w = _read_operand(state, reads[1], v)                      # the same weights for every vector
    bias, mul, shift = state.psram[v["param_addr"]:v["param_addr"] + 3].astype(np.int64)
    # int32(v + (x - in_zp) * w) at every step is the exact sum wrapped once: exact in int64
    # (at most 255*255 products of |x - in_zp| * |w| <= 256 * 128 and the bias).
    value = (bias + ((x - v["in_zp"]) * w).sum(axis=1)).astype(np.int32)      # wrapping, as ACT's
    _write_result(state, out, v, act_output(value, mul, shift, v))
    return fp


exec_vdwconv = _in_pieces("VDWCONV", _exec_vdwconv)

EXECUTORS = {"VRESCALE": exec_vrescale, "VALU": exec_valu, "VPOOL": exec_vpool, "VDWCONV": exec_vdwconv}
assert set(VALU_SIGS) == set(ValuOp)
