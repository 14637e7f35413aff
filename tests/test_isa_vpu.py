"""The ISA simulator's vector instructions (sim/isa/vpu.py) against the VRESCALE, VALU and
VPOOL docs of isa/instructions.py.

Expected values never come from the simulator: vector storage is checked against numpy's own
little-endian packing; every operation against a per-lane Python-integer transcription of
the doc's pseudocode (``doc_*`` below), and, wherever the TOSA spec defines the result,
against the spec helpers of sim/tosa_helpers.py (``rescale_values``, ``reciprocal_scale``,
``apply_scale_32``) or our reference interpreter (sim/reference, itself checked against the
official TOSA reference model).  Error codes come from tests/vpu_doc_rules.py.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, ErrorCode, make
from isa.program import Program
from isa.vector import schedule
from sim import tosa_helpers as th
from sim.isa.sim import IsaSim
from sim.isa.executors import EXECUTORS
from sim.isa.units import NpuState, Trap
from sim.isa.vpu import read_vectors, write_vectors
from tosa_ir import Block, Graph, Operator, Region, Tensor, TosaUnpredictable

sys.path.insert(0, os.path.dirname(__file__))
import vpu_doc_rules as doc  # noqa: E402

CFG = SMALL_CONFIG
L = CFG.array_cols
ASRAM, ACC, PSRAM = 0, 1, 2
INT8, INT16, INT32, INT48, UINT8, UINT16 = range(6)
BITS = {INT8: 8, INT16: 16, INT32: 32, INT48: 48, UINT8: 8, UINT16: 16}
UNSIGNED = (UINT8, UINT16)


def wrap(x: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((x + half) % (1 << bits)) - half


def tval(x: int, t: int) -> int:
    """T(x): the low bits(T) bits of x as a value of T."""
    return x % (1 << BITS[t]) if t in UNSIGNED else wrap(x, BITS[t])


def type_range(t: int) -> tuple[int, int]:
    b = BITS[t]
    return (0, (1 << b) - 1) if t in UNSIGNED else (-(1 << (b - 1)), (1 << (b - 1)) - 1)


def random_state(rng, cfg=CFG) -> NpuState:
    st = NpuState(cfg, b"")
    st.asram[:] = rng.integers(0, 256, st.asram.shape)
    st.acc[:] = rng.integers(-2**31, 2**31, st.acc.shape)
    st.psram[:] = rng.integers(-2**31, 2**31, st.psram.shape)
    return st


def snapshot(st: NpuState) -> dict:
    return {"asram": st.asram.copy(), "acc": st.acc.copy(), "psram": st.psram.copy()}


def execute(st: NpuState, name: str, **fields):
    return EXECUTORS[name](st, make(name, **fields).values)


# -- the doc's read() and write(), on Python integers ----------------------------------------
def doc_read(mem: dict, m: int, t: int, row: int) -> list[int]:
    L = mem["acc"].shape[1]
    if m == ASRAM:
        size = BITS[t] // 8
        data = b"".join(mem["asram"][row + k].tobytes() for k in range(size))
        return [int.from_bytes(data[n * size:(n + 1) * size], "little", signed=t not in UNSIGNED)
                for n in range(L)]
    words = mem["acc"] if m == ACC else mem["psram"]
    out = []
    for n in range(L):
        if t == INT48:
            raw = (int(words[row + 1][n]) % (1 << 16)) << 32 | int(words[row][n]) % (1 << 32)
            out.append(wrap(raw, 48))
        else:
            out.append(tval(int(words[row][n]), t))
    return out


def doc_write(mem: dict, m: int, t: int, row: int, values: list[int]) -> None:
    L = mem["acc"].shape[1]
    if m == ASRAM:
        size = BITS[t] // 8
        data = b"".join((v % (1 << BITS[t])).to_bytes(size, "little") for v in values)
        for k in range(size):
            mem["asram"][row + k] = np.frombuffer(data[k * L:(k + 1) * L], np.uint8)
    else:
        mem["acc"][row] = [wrap(tval(v, t), 32) for v in values]


# -- storage ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [INT8, INT16, INT32, INT48, UINT8, UINT16])
def test_asram_vectors_are_little_endian_lanes(t):
    """An ASRAM vector of T is numpy's little-endian packing of its lanes over bits(T)/8 rows."""
    rng = np.random.default_rng(1)
    lo, hi = type_range(t)
    values = rng.integers(lo, hi + 1, (3, L), dtype=np.int64)
    st = NpuState(CFG, b"")
    size = BITS[t] // 8
    rows = np.array([5, 5 + size, 40])
    for v, r in zip(values, rows):
        packed = b"".join(int(x).to_bytes(size, "little", signed=t not in UNSIGNED) for x in v)
        if t != INT48:
            np_dtype = {INT8: "<i1", INT16: "<i2", INT32: "<i4", UINT8: "<u1", UINT16: "<u2"}[t]
            assert packed == v.astype(np_dtype).tobytes()
        st.asram[r:r + size] = np.frombuffer(packed, np.uint8).reshape(size, L)
    assert (read_vectors(st, ASRAM, t, rows) == values).all()
    st2 = NpuState(CFG, b"")
    write_vectors(st2, ASRAM, t, rows, values + (1 << 50))      # write keeps the low bits
    assert (st2.asram == st.asram).all()


@pytest.mark.parametrize("t", [INT8, INT16, INT32, INT48, UINT8, UINT16])
def test_acc_vectors(t):
    """ACC/PSRAM lanes are read as their low bits(T) bits; INT48 spans two rows; a write
    stores T(y) extended to 32 bits."""
    rng = np.random.default_rng(2)
    st = random_state(rng)
    mem = snapshot(st)
    rows = np.array([3, 7, 3])
    got = read_vectors(st, ACC, t, rows)
    want = [doc_read(mem, ACC, t, int(r)) for r in rows]
    assert got.tolist() == want
    assert read_vectors(st, PSRAM, t, rows).tolist() == [doc_read(mem, PSRAM, t, int(r)) for r in rows]
    if t != INT48:
        lo, hi = type_range(t)
        y = rng.integers(-2**40, 2**40, (2, L))
        write_vectors(st, ACC, t, np.array([10, 11]), y)
        assert st.acc[10:12].tolist() == [[wrap(tval(int(x), t), 32) for x in row] for row in y]
        assert (lo <= st.acc[10:12]).all() and (st.acc[10:12] <= hi).all()


def test_later_vectors_overwrite_earlier_ones():
    st = NpuState(CFG, b"")
    write_vectors(st, ASRAM, INT16, np.array([0, 1, 0]), np.array([[1] * L, [2] * L, [3] * L]))
    # vector 1 wrote rows 1..2, then vector 2 rewrote rows 0..1
    assert read_vectors(st, ASRAM, INT16, np.array([0])).tolist() == [[3] * L]
    assert st.asram[2].tolist() == [2, 0, 2, 0]            # lanes 2, 3 of vector 1, little-endian


# -- VALU -----------------------------------------------------------------------------------------
def doc_valu(op: str, t: int, a: int, b: int, c: int, imm0: int, imm1: int) -> int:
    """The VALU table, before U()."""
    bits = BITS[t]
    k = b & 31
    if op == "ADD":
        return a + b
    if op == "SUB":
        return a - b
    if op == "MUL":
        p, s = a * b, imm0 & 63
        return wrap(p + (1 << (s - 1)), 64) >> s if s else p
    if op == "ARITHMETIC_RIGHT_SHIFT":
        r = a >> k
        if imm0 & 1 and k > 0:
            r += (a >> (k - 1)) & 1
        return r
    if op == "LOGICAL_LEFT_SHIFT":
        return a << k
    if op == "LOGICAL_RIGHT_SHIFT":
        return (a % (1 << bits)) >> k
    if op == "BITWISE_AND":
        return a & b
    if op == "BITWISE_OR":
        return a | b
    if op == "BITWISE_XOR":
        return a ^ b
    if op == "BITWISE_NOT":
        return ~a
    if op == "MINIMUM":
        return min(a, b)
    if op == "MAXIMUM":
        return max(a, b)
    if op == "CLAMP":
        return min(max(a, imm0), imm1)
    if op == "EQUAL":
        return int(a == b)
    if op == "GREATER":
        return int(a > b)
    if op == "GREATER_EQUAL":
        return int(a >= b)
    if op == "LOGICAL_AND":
        return int(a != 0 and b != 0)
    if op == "LOGICAL_OR":
        return int(a != 0 or b != 0)
    if op == "LOGICAL_XOR":
        return int((a != 0) != (b != 0))
    if op == "LOGICAL_NOT":
        return int(a == 0)
    if op == "SELECT":
        return b if a != 0 else c
    if op == "ABS":
        return -a if a < 0 else a
    if op == "NEGATE":
        lo, hi = type_range(t)
        return min(max(imm0 - a + imm1, lo), hi)
    if op == "CLZ":
        return 32 - (a % (1 << 32)).bit_length()
    if op == "COPY":
        return a
    raise AssertionError(op)


def edge_values(rng, t: int, shape) -> np.ndarray:
    """Random values of T, a third of them at the range ends, 0, +-1 or small shifts."""
    lo, hi = type_range(t)
    x = rng.integers(lo, hi + 1, shape, dtype=np.int64)
    special = np.array([lo, hi, 0, -1 if lo < 0 else 1, 1, 7, 31, 32, lo + 1])
    pick = rng.random(shape) < 0.35
    x[pick] = special[rng.integers(0, len(special), int(pick.sum()))]
    return np.clip(x, lo, hi)


def place(st: NpuState, m: int, t: int, rows: np.ndarray, values: np.ndarray) -> None:
    """Store operand vectors (used to plant edge values; ACC/PSRAM lanes get T(value))."""
    if m == PSRAM:
        st.psram[rows] = values.astype(np.int64).astype(np.int32)
    else:
        write_vectors(st, m, t, rows, values)


def run_valu_case(rng, op: str, t: int, cfg=CFG, **over):
    """One random VALU of ``op`` on type ``t``; returns (state before, state after, fields)."""
    lanes = cfg.array_cols
    st = random_state(rng, cfg)
    n0, n1 = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    mems = [int(rng.integers(0, 3)) for _ in range(3)]
    f = dict(op=doc.OPS.index(op), dtype=t, n0=n0, n1=n1, d_mem=int(rng.integers(0, 2)),
             imm0=int(rng.integers(-40, 80)), imm1=int(rng.integers(-40, 80)))
    if op == "CLAMP" or op == "NEGATE":
        lo, hi = type_range(t)
        f["imm0"], f["imm1"] = sorted(int(x) for x in rng.integers(max(lo, -300), min(hi, 300) + 1, 2))
        if op == "CLAMP" and rng.random() < 0.2:
            f["imm0"], f["imm1"] = f["imm1"], f["imm0"]          # min > max: still defined
    a_type, out_type = doc.valu_types(op, t)
    # Regions: sources in rows 0..299 of each memory (ACC/PSRAM: their range), results above.
    top = {ASRAM: 300, ACC: cfg.acc_rows // 2, PSRAM: cfg.psram_rows - 2}
    f["c_fixed"] = int(rng.random() < 0.4)
    for p, m in zip("abc", mems):
        size = doc.rows(m, a_type if p == "a" else t)
        for _ in range(20):
            s0 = int(rng.choice([0, size, size + 1]))
            s1 = int(rng.choice([0, n0 * size, n0 * s0 + 3]))
            if p == "c":
                s0, s1 = (0, 0) if f["c_fixed"] else (f["b_stride0"], f["b_stride1"])
            last = (n1 - 1) * s1 + (n0 - 1) * s0 + size
            if last <= top[m]:
                break
        else:           # does not fit: repeat one vector
            s0 = s1 = last = 0
            f["c_fixed"] = 1 if p == "c" else f["c_fixed"]
        f.update({f"{p}_mem": m, f"{p}_addr": int(rng.integers(0, top[m] - last + 1)),
                  f"{p}_stride0": s0, f"{p}_stride1": s1, f"{p}_bcast": int(rng.random() < 0.15)})
    out_rows = doc.rows(f["d_mem"], out_type)
    f["d_stride0"] = out_rows * int(rng.choice([1, 2]))
    f["d_stride1"] = n0 * f["d_stride0"] + int(rng.integers(0, 3))
    base = 300 if f["d_mem"] == ASRAM else cfg.acc_rows // 2
    f["d_addr"] = base + int(rng.integers(0, 20))
    f.pop("c_stride0"), f.pop("c_stride1")
    f.update(over)
    # Plant edge values in the vectors the op reads (ACC/PSRAM rows hold T's values).
    for p, typ in (("a", a_type), ("b", t), ("c", t)):
        m = f[f"{p}_mem"]
        rows = np.unique(doc_rows(f, p))
        place(st, m, typ, rows, edge_values(rng, typ, (len(rows), lanes)))
    before = snapshot(st)
    execute(st, "VALU", **f)
    return before, st, f


def doc_rows(f: dict, p: str) -> np.ndarray:
    """First rows of operand ``p`` for every output vector, in loop order."""
    s0, s1 = (f[f"{p}_stride0"], f[f"{p}_stride1"]) if p != "c" else \
        ((0, 0) if f["c_fixed"] else (f["b_stride0"], f["b_stride1"]))
    return np.array([f[f"{p}_addr"] + i1 * s1 + i0 * s0 for i1 in range(f["n1"]) for i0 in range(f["n0"])])


def doc_valu_run(before: dict, f: dict) -> dict:
    """Expected memories after the VALU ``f``, vector by vector as the doc says."""
    mem = {k: v.copy() for k, v in before.items()}
    L = mem["acc"].shape[1]
    op, t = doc.OPS[f["op"]], f["dtype"]
    a_type, out_type = doc.valu_types(op, t)
    ra, rb, rc, rd = (doc_rows(f, p) for p in ("a", "b", "c", "d"))
    for k in range(len(rd)):
        a = doc_read(before, f["a_mem"], a_type, int(ra[k]))
        b = doc_read(before, f["b_mem"], t, int(rb[k])) if op not in doc.UNARY else [0] * L
        c = doc_read(before, f["c_mem"], t, int(rc[k])) if op == "SELECT" else [0] * L
        if f["a_bcast"]:
            a = [a[0]] * L
        if f["b_bcast"]:
            b = [b[0]] * L
        if f["c_bcast"]:
            c = [c[0]] * L
        result = [doc_valu(op, t, a[n], b[n], c[n], f["imm0"], f["imm1"]) for n in range(L)]
        doc_write(mem, f["d_mem"], out_type, int(rd[k]), result)
    return mem


def assert_memories(st: NpuState, want: dict) -> None:
    for name in ("asram", "acc", "psram"):
        got = getattr(st, name)
        if not np.array_equal(got, want[name]):
            bad = np.flatnonzero((got != want[name]).reshape(len(got), -1).any(axis=1))
            raise AssertionError(f"{name} differs in rows {bad[:10].tolist()}: got {got[bad[0]].tolist()}, "
                                 f"want {want[name][bad[0]].tolist()}")


@pytest.mark.parametrize("t", [INT8, INT16, INT32], ids=["int8", "int16", "int32"])
@pytest.mark.parametrize("op", doc.OPS)
def test_valu_op(op, t):
    """Every op on every type: random operand memories, strides (0 repeats a vector), lane
    broadcasts and results in ASRAM or ACC; values at the type's edges and shift amounts
    beyond the spec's REQUIREs (defined by the doc)."""
    rng = np.random.default_rng(hash((op, t)) % 2**32)
    for _ in range(6):
        before, st, f = run_valu_case(rng, op, t)
        assert_memories(st, doc_valu_run(before, f))


def test_valu_default_config():
    rng = np.random.default_rng(3)
    for op in ("MUL", "SELECT", "ARITHMETIC_RIGHT_SHIFT", "NEGATE"):
        before, st, f = run_valu_case(rng, op, INT16, DEFAULT_CONFIG)
        assert_memories(st, doc_valu_run(before, f))


# -- VALU against our reference interpreter, where the spec defines the result ----------------
def ref_run(op: str, inputs: list, attrs: dict, out_dtype: str, consts: list = (), out_shape=None):
    """Run one TOSA 1.0 operator in sim/reference: ``inputs`` are (array, dtype) graph
    inputs, ``consts`` (array, dtype) constant operands after them; the output has the
    first input's shape unless ``out_shape`` is given."""
    from sim.reference import run_graph

    block = Block("main")
    names = []
    for k, (arr, dtype) in enumerate(inputs):
        name = f"in{k}"
        block.add_tensor(Tensor(name, arr.shape, dtype))
        block.inputs.append(name)
        names.append(name)
    for k, (arr, dtype) in enumerate(consts):
        name = f"const{k}"
        block.add_tensor(Tensor(name, arr.shape, dtype, arr))
        block.operators.append(Operator("CONST", [], [name]))
        names.append(name)
    block.add_tensor(Tensor("out", tuple(out_shape or inputs[0][0].shape), out_dtype))
    block.outputs.append("out")
    block.operators.append(Operator(op, names, ["out"], attrs))
    graph = Graph(regions=[Region("main", [block])])
    return run_graph(graph, {f"in{k}": a for k, (a, _) in enumerate(inputs)})["out"]


def valu_sim(op: str, t: int, a, b=None, c=None, **f) -> np.ndarray:
    """Run VALU on rows of ASRAM holding a, b, c (N, L); returns the result values."""
    st = NpuState(CFG, b"")
    n = a.shape[0]
    a_type, out_type = doc.valu_types(op, t)
    write_vectors(st, ASRAM, a_type, np.arange(n) * 4, a)
    for arr, base in ((b, 200), (c, 400)):
        if arr is not None:
            write_vectors(st, ASRAM, t, base + np.arange(n) * 4, arr)
    execute(st, "VALU", op=doc.OPS.index(op), dtype=t, n0=n, n1=1, a_addr=0, a_stride0=4,
            b_addr=200, b_stride0=4, c_addr=400, d_addr=600, d_stride0=4, **f)
    return read_vectors(st, ASRAM, out_type, 600 + np.arange(n) * 4)


NAMES = {INT8: "int8", INT16: "int16", INT32: "int32"}


@pytest.mark.parametrize("case", [
    ("ADD", INT32, {}), ("SUB", INT32, {}), ("MINIMUM", INT32, {}), ("MAXIMUM", INT32, {}),
    ("BITWISE_AND", INT16, {}), ("BITWISE_OR", INT8, {}), ("BITWISE_XOR", INT32, {}),
    ("LOGICAL_LEFT_SHIFT", INT16, {}), ("LOGICAL_RIGHT_SHIFT", INT8, {}),
    ("LOGICAL_RIGHT_SHIFT", INT32, {}),
    ("ARITHMETIC_RIGHT_SHIFT", INT8, {"round": True}), ("ARITHMETIC_RIGHT_SHIFT", INT32, {"round": False}),
    ("ARITHMETIC_RIGHT_SHIFT", INT16, {"round": True}),
    ("EQUAL", INT32, {}), ("GREATER", INT32, {}), ("GREATER_EQUAL", INT32, {}),
    ("MUL", INT8, {"shift": 0}), ("MUL", INT16, {"shift": 0}), ("MUL", INT32, {"shift": 0}),
    ("MUL", INT32, {"shift": 13}), ("MUL", INT32, {"shift": 40}),
    ("BITWISE_NOT", INT16, {}), ("ABS", INT32, {}), ("CLZ", INT32, {}),
    ("NEGATE", INT8, {"zp": (-7, 12)}), ("NEGATE", INT16, {}), ("NEGATE", INT32, {}),
    ("CLAMP", INT8, {"min_val": -20, "max_val": 90}), ("CLAMP", INT16, {"min_val": -300, "max_val": 7}),
    ("SELECT", INT16, {}), ("LOGICAL_AND", INT8, {}), ("LOGICAL_OR", INT8, {}),
    ("LOGICAL_XOR", INT8, {}), ("LOGICAL_NOT", INT8, {}),
], ids=lambda c: f"{c[0]}-{NAMES[c[1]]}-{'-'.join(map(str, c[2].values()))}")
def test_valu_is_the_tosa_operator(case):
    """Inside the spec's REQUIREs, VALU computes exactly what our reference interpreter's
    TOSA operator does (ops with zero points, shift or round through their operands)."""
    op, t, extra = case
    rng = np.random.default_rng(7)
    name = NAMES[t]
    lo, hi = type_range(t)
    shape = (24, L)
    a = edge_values(rng, t, shape)
    b = edge_values(rng, t, shape)
    f, attrs, consts = {}, {}, []
    tosa_op, ins = op, [(a, name), (b, name)]
    if op in ("ADD", "SUB"):
        a, b = a // 2, b // 2                                  # no int32 overflow (REQUIRE)
        ins = [(a, name), (b, name)]
    if op.endswith("SHIFT"):
        limit = BITS[t] - 1                                    # TOSA 1.0's limit for every shift
        b = rng.integers(0, limit + 1, shape)
        ins = [(a, name), (b, name)]
        if op == "ARITHMETIC_RIGHT_SHIFT":
            attrs["round"] = extra["round"]
            f["imm0"] = int(extra["round"])
    if op == "MUL":
        shift = extra["shift"]
        if shift:                                              # keep the product in int32 (REQUIRE)
            a = rng.integers(-2**31, 2**31, shape)
            bound = (1 << min(shift, 31)) - 1
            b = rng.integers(-bound, bound + 1, shape)
            ins = [(a, name), (b, name)]
        consts = [(np.array([shift], np.int64), "int8")]
        f["imm0"] = shift
    if op in doc.UNARY:
        ins = [(a, name)]
    if op == "ABS":
        a[a == lo] = 0                                         # -minimum overflows (REQUIRE)
        ins = [(a, name)]
    if op == "NEGATE":
        zi, zo = extra.get("zp", (0, 0))
        if t == INT32:
            a[a == lo] = 0
            ins = [(a, name)]
        consts = [(np.array([zi], np.int64), name), (np.array([zo], np.int64), name)]
        f.update(imm0=zi, imm1=zo)
    if op == "CLAMP":
        attrs = dict(extra)
        f.update(imm0=extra["min_val"], imm1=extra["max_val"])
    if op == "SELECT":
        cond = rng.integers(0, 2, shape)
        c = edge_values(rng, t, shape)
        ins = [(cond.astype(bool), "bool"), (a, name), (c, name)]
        got = valu_sim(op, t, cond, a, c)
        want = ref_run("SELECT", ins, {}, name)
        assert (got == want).all()
        return
    if op.startswith("LOGICAL_") and "SHIFT" not in op:
        a, b = rng.integers(0, 2, shape), rng.integers(0, 2, shape)
        ins = [(a.astype(bool), "bool")] + ([(b.astype(bool), "bool")] if op != "LOGICAL_NOT" else [])
        out = "bool"
    else:
        out = "bool" if op in doc.BOOL_OUT else "int32" if op == "MUL" else name
    got = valu_sim(op, t, a, None if op in doc.UNARY else b, **f)
    want = ref_run(tosa_op, ins, attrs, out, consts)
    assert (got == np.asarray(want).astype(np.int64)).all()


# -- VRESCALE ----------------------------------------------------------------------------------
def doc_rescale_lane(x: int, f: dict, mul: int, sh: int) -> int:
    """One lane of the VRESCALE doc."""
    scale32 = bool(f["scale32"])
    value = wrap(x - f["in_zp"], 48)
    v = wrap(value, 32) if scale32 else value
    m = wrap(mul, 32) if scale32 else wrap(mul, 16)
    sh &= 63
    rnd = (1 << (sh - 1)) if sh > 0 else 0
    if f["double_round"] and scale32 and sh > 31:
        rnd += (1 << 30) if v >= 0 else -(1 << 30)
    s = wrap(wrap(v * m + rnd, 64) >> sh, 32)
    lo, hi = type_range(f["out_type"])
    y = min(max(s + f["out_zp"], lo), hi)
    if f["clamp"]:
        y = min(max(y, f["clamp_min"]), f["clamp_max"])
    return y


def random_rescale_params(rng, scale32: bool, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) rows: "spec" within apply_scale's REQUIREs for most values, "any"
    anything a PSRAM lane may hold."""
    if kind == "spec":
        if scale32:
            mul = rng.integers(1 << 30, 1 << 31, L)
            shift = rng.integers(20, 50, L)
        else:
            mul = rng.integers(1 << 14, 1 << 15, L) | (rng.integers(0, 1 << 16, L) << 16)   # junk high half
            shift = rng.integers(8, 40, L)
        return mul, shift
    mul = rng.integers(-2**31, 2**31, L)
    shift = rng.choice([0, 1, 2, 31, 32, 33, 62, 63, 64 + 34, -1, int(rng.integers(-2**31, 2**31))], L)
    return mul, shift


IN_TYPES = [INT8, INT16, INT32, INT48, UINT8, UINT16]
OUT_TYPES = [INT8, INT16, INT32, UINT8, UINT16]


def rescale_case(rng):
    """Fields, parameters and input memory of one random VRESCALE over its whole domain."""
    in_t, out_t = int(rng.choice(IN_TYPES)), int(rng.choice(OUT_TYPES))
    scale32 = bool(rng.random() < 0.6) and in_t != INT48 or rng.random() < 0.1
    kind = "spec" if rng.random() < 0.7 else "any"
    zp_choices = {INT8: (-128, 127), UINT8: (0, 255), INT16: (0, 0), UINT16: (0, 32768), INT32: (0, 0), INT48: (0, 0)}

    def zp(t):
        if kind == "any" and rng.random() < 0.5:
            return int(rng.integers(-65536, 65536))
        lo, hi = zp_choices[t]
        return int(rng.choice([lo, hi])) if t == UINT16 else int(rng.integers(lo, hi + 1))

    f = dict(in_type=in_t, out_type=out_t, scale32=int(scale32), double_round=int(rng.random() < 0.5),
             per_channel=int(rng.random() < 0.6), in_zp=zp(in_t), out_zp=zp(out_t),
             clamp=int(rng.random() < 0.3), n0=int(rng.integers(1, 5)), n1=int(rng.integers(1, 3)),
             a_mem=int(rng.integers(0, 3)), d_mem=int(rng.integers(0, 2)), param_addr=int(rng.integers(0, 6)))
    cmin, cmax = sorted(int(x) for x in rng.integers(-65536, 65536, 2))
    f["clamp_min"], f["clamp_max"] = (cmin, cmax) if rng.random() < 0.8 else (cmax, cmin)
    mul, shift = random_rescale_params(rng, scale32, kind)
    return f, mul, shift, kind


def run_rescale_case(rng, f, mul, shift):
    """Lay out and run the VRESCALE ``f`` on a random state; returns (before, after)."""
    st = random_state(rng)
    st.psram[f["param_addr"]:f["param_addr"] + 2] = np.stack([mul, shift]).astype(np.int64).astype(np.int32)
    in_rows = doc.rows(f["a_mem"], f["in_type"])
    out_rows = doc.rows(f["d_mem"], f["out_type"])
    f.update(a_addr=8, a_stride0=in_rows, a_stride1=f["n0"] * in_rows + int(rng.integers(0, 2)),
             d_addr=400 if f["d_mem"] == ASRAM else 100, d_stride0=out_rows, d_stride1=f["n0"] * out_rows)
    if f["a_mem"] == ASRAM or (f["a_mem"] == ACC and f["in_type"] != INT48):
        # values at the type's edges and near zero (PSRAM and ACC pairs keep random words)
        rows = doc_rows(f, "a")
        lo, hi = type_range(f["in_type"])
        x = rng.integers(lo, hi + 1, (len(rows), L), dtype=np.int64)
        small = rng.random(x.shape) < 0.3
        x[small] = np.clip(rng.integers(-300, 300, int(small.sum())), lo, hi)
        x[rng.random(x.shape) < 0.05] = lo
        x[rng.random(x.shape) < 0.05] = hi
        write_vectors(st, f["a_mem"], f["in_type"], rows, x)
    before = snapshot(st)
    execute(st, "VRESCALE", **f)
    return before, st


def doc_rescale_run(before: dict, f: dict, mul, shift) -> tuple[dict, list]:
    mem = {k: v.copy() for k, v in before.items()}
    inputs = []
    for k, (ra, rd) in enumerate(zip(doc_rows(f, "a"), doc_rows(f, "d"))):
        x = doc_read(before, f["a_mem"], f["in_type"], int(ra))
        inputs.append(x)
        c = [n if f["per_channel"] else 0 for n in range(L)]
        y = [doc_rescale_lane(x[n], f, int(mul[c[n]]), int(shift[c[n]])) for n in range(L)]
        doc_write(mem, f["d_mem"], f["out_type"], int(rd), y)
    return mem, inputs


def spec_mask_and_result(x: np.ndarray, f: dict, mul, shift) -> tuple[np.ndarray, np.ndarray]:
    """The spec's RESCALE (sim/tosa_helpers.rescale_values) on inputs ``x`` (N, L), and the
    mask of elements where its ERROR_IFs and REQUIREs all hold."""
    in_t, out_t = f["in_type"], f["out_type"]
    signless = {INT8: "int8", UINT8: "int8", INT16: "int16", UINT16: "int16", INT32: "int32", INT48: "int48"}
    iu, ou = in_t in UNSIGNED, out_t in UNSIGNED
    ok = True
    # ERROR_IF on zero points and type combinations
    ok &= f["in_zp"] == 0 or signless[in_t] == "int8" or (in_t == UINT16 and f["in_zp"] == 32768)
    ok &= f["out_zp"] == 0 or signless[out_t] == "int8" or (out_t == UINT16 and f["out_zp"] == 32768)
    ok &= not (in_t == INT48 and f["scale32"]) and not (f["double_round"] and not f["scale32"])
    ok &= not (in_t == UINT16 and out_t == INT32) and not (in_t == INT32 and out_t == UINT16)
    lo, hi = type_range(in_t)
    ok &= (lo <= f["in_zp"] <= hi) if signless[in_t] == "int8" else True
    lo, hi = type_range(out_t)
    ok &= (lo <= f["out_zp"] <= hi) if signless[out_t] == "int8" else True
    lanes = np.arange(L) if f["per_channel"] else np.zeros(L, int)
    m = np.broadcast_to(mul[lanes], x.shape)
    s = np.broadcast_to(shift[lanes], x.shape)
    m = th.wrap(m, "int32" if f["scale32"] else "int16")
    masks = []

    def record(cond, text):
        masks.append(np.broadcast_to(np.asarray(cond, dtype=bool), x.shape))

    mode = "DOUBLE_ROUND" if f["double_round"] else "SINGLE_ROUND"
    result = th.rescale_values(x, signless[in_t], signless[out_t], m, s, f["in_zp"], f["out_zp"],
                               bool(f["scale32"]), mode, iu, ou, require=record)
    mask = np.full(x.shape, bool(ok))
    for cond in masks:
        mask &= cond
    return mask, result


def test_vrescale_whole_domain():
    """Constrained-random VRESCALE over every in/out type, zero points (uint16's 32768 too),
    scale32/scale16, rounding, per-channel, clamp, and source/destination memories: equal to
    the doc everywhere and to the spec's RESCALE wherever the spec defines it."""
    rng = np.random.default_rng(11)
    spec_checked = 0
    seen = set()
    for _ in range(500):
        f, mul, shift, kind = rescale_case(rng)
        before, st = run_rescale_case(rng, f, mul, shift)
        want, inputs = doc_rescale_run(before, f, mul, shift)
        assert_memories(st, want)
        mask, spec = spec_mask_and_result(np.array(inputs, dtype=np.int64), f, mul, shift)
        got = np.array([doc_read(want, f["d_mem"], f["out_type"], int(r)) for r in doc_rows(f, "d")])
        if not f["clamp"]:
            assert (got[mask] == spec[mask]).all(), f
            spec_checked += int(mask.sum())
        seen.add((f["in_type"], f["out_type"], f["scale32"], bool(mask.any())))
    assert spec_checked > 2000
    assert len({(i, o) for i, o, _, _ in seen}) == len(IN_TYPES) * len(OUT_TYPES)
    # every type pair the spec allows was compared with it, in both scale modes where allowed
    allowed = {(i, o, s) for i in IN_TYPES for o in OUT_TYPES for s in (0, 1)
               if (i, o) not in ((UINT16, INT32), (INT32, UINT16)) and not (i == INT48 and s)}
    compared = {(i, o, s) for i, o, s, hit in seen if hit}
    assert len(compared) >= 0.9 * len(allowed), sorted(allowed - compared)


def test_vrescale_uint16_zero_point_and_rounding_modes():
    """uint16 input with zero point 32768 to int16 and back, per-tensor, and each TOSA 1.0
    rounding_mode through double_round_for, against rescale_values directly."""
    rng = np.random.default_rng(12)
    st = NpuState(CFG, b"")
    x = rng.integers(0, 65536, (6, L))
    write_vectors(st, ASRAM, UINT16, np.arange(6) * 2, x)
    st.psram[0] = [1 << 30] + [0] * (L - 1)           # per-tensor: lane 0 only
    st.psram[1] = [31] + [0] * (L - 1)
    for mode in ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND"):
        execute(st, "VRESCALE", n0=6, n1=1, a_addr=0, a_stride0=2, in_type=UINT16, out_type=INT16,
                d_addr=100, d_stride0=2, param_addr=0, per_channel=0, scale32=1,
                double_round=int(th.double_round_for(mode)), in_zp=32768, out_zp=0)
        got = read_vectors(st, ASRAM, INT16, 100 + np.arange(6) * 2)
        want = th.rescale_values(x, "int16", "int16", 1 << 30, 31, 32768, 0, True, mode, True, False)
        assert (got == want).all()
    execute(st, "VRESCALE", n0=6, n1=1, a_addr=100, a_stride0=2, in_type=INT16, out_type=UINT16,
            d_addr=200, d_stride0=2, param_addr=0, per_channel=0, scale32=1, in_zp=0, out_zp=32768)
    back = read_vectors(st, ASRAM, UINT16, 200 + np.arange(6) * 2)
    assert (back == th.rescale_values(got, "int16", "int16", 1 << 30, 31, 0, 32768, True,
                                      "SINGLE_ROUND", False, True)).all()


def test_vrescale_int48_from_acc_pairs_and_asram():
    """INT48 input (scale16 only in the spec) from ACC row pairs and 6-row ASRAM vectors."""
    rng = np.random.default_rng(13)
    st = NpuState(CFG, b"")
    x = rng.integers(-(1 << 47), 1 << 47, (4, L))
    x[0, :2] = [-(1 << 47), (1 << 47) - 1]
    st.acc[0:8:2] = th.wrap(x, "int32")
    st.acc[1:8:2] = (x >> 32)                           # high 16 bits (sign-extended)
    write_vectors(st, ASRAM, INT48, np.arange(4) * 6, x)
    mul, shift = rng.integers(1 << 14, 1 << 15, L), rng.integers(30, 46, L)
    st.psram[3], st.psram[4] = mul, shift
    for m, stride in ((ACC, 2), (ASRAM, 6)):
        execute(st, "VRESCALE", n0=4, n1=1, a_mem=m, a_addr=0, a_stride0=stride, in_type=INT48, out_type=INT32,
                d_mem=1, d_addr=20, d_stride0=1, param_addr=3, per_channel=1, scale32=0)
        want = th.rescale_values(x, "int48", "int32", mul, shift, 0, 0, False, "SINGLE_ROUND")
        assert (st.acc[20:24] == want).all()


# -- VPOOL ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["MAX", "SUM"])
@pytest.mark.parametrize("t", [INT8, INT16, INT32])
def test_vpool(mode, t):
    """k1 x k0 windows with window and output strides over an H x W image of vectors, against
    numpy sliding windows (SUM: of value - in_zp, wrapping int32)."""
    rng = np.random.default_rng(20 + t)
    st = random_state(rng)
    h, w, k1, k0, s = 6, 7, 3, 2, 2
    img = edge_values(rng, t, (h, w, L))
    m = int(rng.integers(0, 2))
    rows_per = doc.rows(m, t)
    base = 4
    for y in range(h):
        write_vectors(st, m, t, base + (y * w + np.arange(w)) * rows_per, img[y])
    oh, ow = (h - k1) // s + 1, (w - k0) // s + 1
    zp = int(rng.integers(-200, 200))
    d_mem = int(rng.integers(0, 2))
    out_t = t if mode == "MAX" else INT32
    out_rows = doc.rows(d_mem, out_t)
    execute(st, "VPOOL", mode=0 if mode == "MAX" else 1, dtype=t, n0=ow, n1=oh, k0=k0, k1=k1,
            w_stride0=rows_per, w_stride1=w * rows_per, a_mem=m, a_addr=base, a_stride0=s * rows_per,
            a_stride1=s * w * rows_per, d_mem=d_mem, d_addr=500 if d_mem == ASRAM else 120,
            d_stride0=out_rows, d_stride1=ow * out_rows, in_zp=zp)
    win = np.lib.stride_tricks.sliding_window_view(img, (k1, k0), axis=(0, 1))[::s, ::s]
    if mode == "MAX":
        want = win.max(axis=(-2, -1))
    else:
        want = th.wrap((win.astype(np.int64) - zp).sum(axis=(-2, -1)), "int32")
    got = read_vectors(st, d_mem, out_t, (500 if d_mem == ASRAM else 120) + np.arange(oh * ow) * out_rows)
    assert (got.reshape(oh, ow, L) == want).all()


def test_vpool_sum_wraps_int32():
    st = NpuState(CFG, b"")
    st.acc[0:4] = 2**31 - 1
    execute(st, "VPOOL", mode=1, dtype=INT32, n0=1, n1=1, k0=4, k1=1, w_stride0=1, a_mem=ACC,
            d_mem=1, d_addr=10, in_zp=-5)
    assert (st.acc[10] == wrap(4 * (2**31 - 1 + 5), 32)).all()


def test_avg_pool2d_is_vpool_sum_then_vrescale():
    """AVG_POOL2D (int8, zero points, padded edges) as the compiler lowers it: one VPOOL SUM
    per window shape (edge windows have fewer elements), then a per-tensor VRESCALE by
    reciprocal_scale(count) per shape; against our reference interpreter's AVG_POOL2D."""
    rng = np.random.default_rng(21)
    h, w, k, pad = 5, 5, 3, 1
    in_zp, out_zp = -9, 4
    x = rng.integers(-128, 128, (1, h, w, L))
    st = NpuState(CFG, b"")
    for y in range(h):
        write_vectors(st, ASRAM, INT8, y * w + np.arange(w), x[0, y])
    instrs = []
    params = {}
    for oy in range(h):
        for ox in range(w):
            y0, y1 = max(oy - pad, 0), min(oy - pad + k, h)
            x0, x1 = max(ox - pad, 0), min(ox - pad + k, w)
            count = (y1 - y0) * (x1 - x0)
            if count not in params:
                params[count] = len(params)
                m, s = th.reciprocal_scale(count)
                st.psram[2 * params[count]] = int(m)
                st.psram[2 * params[count] + 1] = int(s)
            r = oy * w + ox
            instrs.append(make("VPOOL", mode=1, dtype=INT8, n0=1, n1=1, k0=x1 - x0, k1=y1 - y0,
                               w_stride0=1, w_stride1=w, a_addr=y0 * w + x0, d_mem=1, d_addr=r, in_zp=in_zp))
            instrs.append(make("VRESCALE", n0=1, n1=1, a_mem=ACC, a_addr=r, in_type=INT32, out_type=INT8,
                               d_addr=100 + r, param_addr=2 * params[count], per_channel=0, scale32=1,
                               out_zp=out_zp))
    for i in instrs:
        EXECUTORS[i.name](st, i.values)
    got = read_vectors(st, ASRAM, INT8, 100 + np.arange(h * w)).reshape(1, h, w, L)
    want = ref_run("AVG_POOL2D", [(x, "int8")], {"kernel": [k, k], "stride": [1, 1], "pad": [pad] * 4,
                                                 "acc_type": "int32"}, "int8",
                   consts=[(np.array([in_zp]), "int8"), (np.array([out_zp]), "int8")], out_shape=(1, h, w, L))
    assert (got == want).all()


def test_max_pool2d_matches_reference():
    rng = np.random.default_rng(22)
    h, w = 6, 8
    x = rng.integers(-32768, 32768, (1, h, w, L))
    st = NpuState(CFG, b"")
    for y in range(h):
        write_vectors(st, ASRAM, INT16, (y * w + np.arange(w)) * 2, x[0, y])
    execute(st, "VPOOL", mode=0, dtype=INT16, n0=4, n1=3, k0=2, k1=2, w_stride0=2, w_stride1=2 * w,
            a_addr=0, a_stride0=4, a_stride1=4 * w, d_addr=300, d_stride0=2, d_stride1=8)
    got = read_vectors(st, ASRAM, INT16, 300 + np.arange(12) * 2).reshape(1, 3, 4, L)
    want = ref_run("MAX_POOL2D", [(x, "int16")], {"kernel": [2, 2], "stride": [2, 2], "pad": [0] * 4}, "int16",
                   out_shape=(1, 3, 4, L))
    assert (got == want).all()


# -- VDWCONV -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed, stride, k, w_mem", [(0, 1, 3, ASRAM), (1, 2, 3, PSRAM), (2, 1, 5, ACC),
                                                    (3, 2, 2, ASRAM)])
def test_vdwconv_is_depthwise_rescale_clamp(seed, stride, k, w_mem):
    """VDWCONV over an H x W image of channel vectors equals our reference interpreter's
    DEPTHWISE_CONV2D (int8, input zero point, bias), then RESCALE (per channel, double
    rounding or not, output zero point) and a CLAMP inside int8."""
    rng = np.random.default_rng(60 + seed)
    h, w = k + 4 * stride, k + 5 * stride        # (the spec's ERROR_IF: exact division by the stride)
    x = rng.integers(-128, 128, (1, h, w, L))
    wt = rng.integers(-128, 128, (k, k, L, 1))
    bias = rng.integers(-5000, 5000, L)
    in_zp, out_zp = int(rng.integers(-128, 128)), int(rng.integers(-20, 20))
    mul = rng.integers(1 << 29, 1 << 31, L)
    shift = rng.integers(30, 40, L)
    double_round = bool(seed % 2)
    lo, hi = -100, 110
    st = NpuState(CFG, b"")
    for y in range(h):
        write_vectors(st, ASRAM, INT8, 8 + y * w + np.arange(w), x[0, y])
    taps = wt[..., 0].reshape(k * k, L)
    b_addr = {ASRAM: 200, PSRAM: 7, ACC: 30}[w_mem]
    if w_mem == PSRAM:          # (the VPU never writes PSRAM: a DMA would)
        st.psram[b_addr:b_addr + k * k] = taps
    else:
        write_vectors(st, w_mem, INT8, b_addr + np.arange(k * k), taps)
    st.psram[4:7] = [bias, mul, shift]
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    execute(st, "VDWCONV", n0=ow, n1=oh, k0=k, k1=k, w_stride0=1, w_stride1=w, a_mem=ASRAM, a_addr=8,
            a_stride0=stride, a_stride1=stride * w, b_mem=w_mem, b_addr=b_addr, d_mem=ASRAM, d_addr=400,
            d_stride0=1, d_stride1=ow, param_addr=4, in_zp=in_zp, out_zp=out_zp, clamp_min=lo, clamp_max=hi,
            scale32=1, double_round=int(double_round))
    got = read_vectors(st, ASRAM, INT8, 400 + np.arange(oh * ow)).reshape(1, oh, ow, L)
    acc = ref_run("DEPTHWISE_CONV2D", [(x, "int8")],
                  {"pad": [0] * 4, "stride": [stride] * 2, "dilation": [1, 1], "acc_type": "int32"}, "int32",
                  consts=[(wt, "int8"), (bias, "int32"), (np.array([in_zp]), "int8"), (np.array([0]), "int8")],
                  out_shape=(1, oh, ow, L))
    y = ref_run("RESCALE", [(acc, "int32")],
                {"scale32": True, "rounding_mode": "DOUBLE_ROUND" if double_round else "SINGLE_ROUND",
                 "per_channel": True, "input_unsigned": False, "output_unsigned": False}, "int8",
                consts=[(mul, "int32"), (shift, "int8"), (np.array([0]), "int32"), (np.array([out_zp]), "int8")])
    want = ref_run("CLAMP", [(y, "int8")], {"min_val": lo, "max_val": hi}, "int8")
    assert (got == want).all()


def test_vdwconv_schedule_and_errors():
    """Three parameter rows, k1*k0 + 2 cycles per output vector (the last product's addition,
    then S1), two cycles more latency than VPOOL; the weights' rows are range-checked."""
    base = dict(n0=5, n1=2, k0=3, k1=3, w_stride0=1, w_stride1=8, a_mem=ASRAM, b_mem=ASRAM, b_addr=100,
                d_mem=ASRAM, d_addr=200, d_stride0=1, param_addr=0)
    s = schedule("VDWCONV", make("VDWCONV", **base).values)
    assert (s.K, s.N, s.E, s.R, s.W, s.P) == (3, 10, 9, 1, 1, 11)
    assert s.busy == 3 + 9 * 11 + 9 + 2 + 1 + 7 - 1
    st = NpuState(CFG, b"")
    with pytest.raises(Trap) as e:
        execute(st, "VDWCONV", **dict(base, b_addr=CFG.asram_rows - 8))
    assert e.value.code == ErrorCode.SRAM_OVERFLOW and "operand b" in str(e.value)
    with pytest.raises(Trap) as e:
        execute(st, "VDWCONV", **dict(base, param_addr=CFG.psram_rows - 2))
    assert e.value.code == ErrorCode.SRAM_OVERFLOW
    with pytest.raises(Trap) as e:
        execute(st, "VDWCONV", **dict(base, b_mem=3))
    assert e.value.code == ErrorCode.ILLEGAL_INSTRUCTION


# -- errors, footprints, schedules ------------------------------------------------------------
def random_vector_instruction(rng, cfg=CFG):
    """Fields near the limits of memories and enums (like tests/test_hw_checker.py)."""
    from isa.instructions import BY_NAME

    name = str(rng.choice(["VRESCALE", "VALU", "VPOOL", "VDWCONV"]))
    values = {}
    for f in BY_NAME[name].fields:
        if f.name.endswith("_mem"):
            values[f.name] = int(rng.choice([0, 1, 2, 3] if f.width == 2 else [0, 1], p=None))
        elif f.name.endswith("_addr"):
            limit = int(rng.choice([cfg.asram_rows, cfg.acc_rows, cfg.psram_rows]))
            values[f.name] = int(np.clip(limit - int(rng.integers(0, 12)), 0, f.max))
            if rng.random() < 0.5:
                values[f.name] = int(rng.integers(0, 20))
        elif f.name in ("n0", "n1", "k0", "k1"):
            values[f.name] = int(rng.choice([0, 1, 2, 3, 5]))
        elif "stride" in f.name:
            values[f.name] = int(rng.choice([0, 1, 2, 4, 7]))
        elif f.enum is not None or f.name in ("in_type", "out_type", "op", "dtype"):
            values[f.name] = int(rng.integers(0, 1 << f.width))
        else:
            values[f.name] = int(rng.integers(f.min, f.max + 1)) if f.width > 1 else int(rng.integers(0, 2))
    if rng.random() < 0.7:                                  # mostly legal enums
        for k, hi in (("a_mem", 2), ("b_mem", 2), ("c_mem", 2), ("dtype", 2), ("op", 24), ("in_type", 5)):
            if k in values:
                values[k] = min(values[k], hi)
        if "out_type" in values and values["out_type"] in (3, 6, 7):
            values["out_type"] = 2
    return make(name, **values)


def test_errors_follow_the_doc_and_change_nothing():
    rng = np.random.default_rng(30)
    codes = set()
    for _ in range(1500):
        instr = random_vector_instruction(rng)
        want = doc.expected_code(CFG, instr.name, instr.values)
        st = random_state(rng)
        before = snapshot(st)
        try:
            EXECUTORS[instr.name](st, instr.values)
            got = ErrorCode.NONE
        except Trap as t:
            got = t.code
            assert_memories(st, before)
        assert got == want, (instr, got, want)
        codes.add(want)
    assert codes == {ErrorCode.NONE, ErrorCode.ILLEGAL_INSTRUCTION, ErrorCode.SRAM_OVERFLOW}


def test_footprints_and_hazards():
    """VALU reading ACC rows a running MATMUL writes is a hazard unless it waits for the MXU."""
    text = [make("MATMUL", n0=3, n1=1, acc_addr=4),
            make("VALU", op=0, dtype=INT32, n0=2, n1=1, a_mem=ACC, a_addr=5, a_stride0=1, b_mem=PSRAM,
                 b_addr=1, d_mem=0, d_addr=100, d_stride0=4),
            make("HALT")]
    for wait, expect in ((0, [("RAW", "ACC", 5)]), (2, [])):
        text[1].values["wait"] = wait
        res = IsaSim(CFG, check_hazards=True).run(Program(CFG, text))
        assert res.ok
        assert [(h.kind, h.memory, h.row) for h in res.hazards] == expect
    st = NpuState(CFG, b"")
    fp = execute(st, "VALU", op=2, dtype=INT16, n0=2, n1=1, a_mem=ASRAM, a_addr=10, a_stride0=2, b_mem=PSRAM,
                 b_addr=3, d_mem=0, d_addr=50, d_stride0=4)
    wpr = CFG.words_per_wide_row
    assert [(m, list(r)) for m, r in fp.reads] == [("ASRAM", [10, 11, 12, 13]), ("PSRAM", list(range(3 * wpr, 4 * wpr)))]
    assert [(m, list(r)) for m, r in fp.writes] == [("ASRAM", list(range(50, 54)) + list(range(54, 58)))]


def test_schedules():
    """isa/vector.schedule on hand-counted cases (module docstring of isa/vector.py)."""
    act = make("ACT", count=10).values
    assert schedule("ACT", act).busy == 20                                      # count + 10
    # int8 ASRAM + int32 ACC -> int32 ASRAM: R = 1, W = 4, P = 4
    add = make("VALU", op=0, dtype=INT32, n0=3, n1=2, a_mem=ACC, b_mem=ACC, d_mem=ASRAM).values
    s = schedule("VALU", add)
    assert (s.N, s.R, s.W, s.P, s.busy) == (6, 1, 4, 4, 0 + 5 * 4 + 1 + 4 + 6)
    mul = make("VALU", op=2, dtype=INT8, n0=5, n1=1, a_mem=ASRAM, b_mem=ASRAM, d_mem=ACC).values
    assert schedule("VALU", mul).busy == 4 * 1 + 1 + 1 + 6
    sel = make("VALU", op=20, dtype=INT16, n0=2, n1=1, c_mem=ASRAM, d_mem=ACC).values
    assert (schedule("VALU", sel).R, schedule("VALU", sel).busy) == (2, 2 + 2 + 1 + 6)
    rs = make("VRESCALE", n0=4, n1=1, in_type=INT48, out_type=INT8, a_mem=ASRAM).values
    s = schedule("VRESCALE", rs)
    assert (s.K, s.R, s.W, s.P, s.busy) == (2, 6, 1, 6, 2 + 3 * 6 + 6 + 1 + 6)
    pool = make("VPOOL", mode=1, dtype=INT16, n0=2, n1=2, k0=3, k1=3, a_mem=ASRAM, d_mem=ASRAM).values
    s = schedule("VPOOL", pool)
    assert (s.E, s.R, s.W, s.P, s.busy) == (9, 2, 4, 18, 3 * 18 + 18 + 4 + 6)
    assert schedule("VPOOL", dict(pool, k1=0)).busy == 0
    assert schedule("VALU", dict(add, n1=0)).busy == 0

    # The timing model uses these: instruction i is fetched by 14 + 8i (8 words, latency 4,
    # FETCH_ARRIVAL 3), the VALU is in IR at 23 (once instruction 1 has arrived), the VRESCALE
    # at 31 (once the HALT has); the VPU takes it at 36, the cycle after the VALU's last busy
    # cycle (35).
    from sim.npu_timing import InstrTiming, TimingModel

    prog = [make("VALU", **mul), make("VRESCALE", **rs), make("HALT")]
    t = TimingModel(CFG).run(prog)
    assert t.per_instruction == [InstrTiming(23, 24, 35), InstrTiming(36, 37, 69), InstrTiming(70, 70, 70)]
    assert (t.total_cycles, t.busy["VPU"]) == (71, 45)


def test_doc_rescale_is_apply_scale_where_defined():
    """The VRESCALE doc's scaling formula equals apply_scale_32/16 inside their REQUIREs."""
    rng = np.random.default_rng(31)
    for _ in range(3000):
        sh = int(rng.integers(2, 63))
        m = int(rng.integers(0, 2**31))
        half = 1 << (sh - 1)
        v = int(rng.integers(max(-half, -2**31), min(half, 2**31)))
        f = dict(scale32=1, double_round=int(rng.integers(0, 2)), in_zp=0, out_zp=0, out_type=INT32, clamp=0)
        assert doc_rescale_lane(v, f, m, sh) == int(th.apply_scale_32(v, m, sh, bool(f["double_round"])))
        v48 = int(rng.integers(-(1 << 47), 1 << 47))
        m16 = m >> 16
        f16 = dict(f, scale32=0, double_round=0)
        try:
            want = int(th.apply_scale_16(v48, m16, sh))
        except TosaUnpredictable:
            continue
        assert doc_rescale_lane(v48, f16, m16, sh) == want


# -- long instructions run in pieces ---------------------------------------------------------
def test_pieces_give_the_whole_instruction_result(monkeypatch):
    """Random vector and TABLE instructions of a few hundred vectors: executed in pieces of 3
    or 64 vectors, every scratchpad row equals the run in one piece."""
    import sim.isa.vpu as vpu_module
    from isa import SMALL_CONFIG, make
    from isa.instructions import PoolMode, TableMode, ValuOp, VecType
    from isa.program import Program
    from sim.isa.sim import IsaSim

    rng = np.random.default_rng(3)
    cfg = SMALL_CONFIG
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=0x8000, len0=512, len1=1, len2=1),
        make("DMA_LOAD", sram=2, sram_addr=0, ext_addr=0x8000, len0=16, len1=1, len2=1, wait=1),
        make("TABLE", wait=1, mode=int(TableMode.LOAD), n0=256 // cfg.bus_bytes, n1=1, a_mem=0, a_stride0=1),
        make("VALU", op=int(ValuOp.ADD), dtype=int(VecType.INT8), n0=37, n1=9, a_mem=0, a_addr=3, a_stride0=1,
             a_stride1=11, b_mem=0, b_addr=100, b_stride0=0, b_stride1=2, d_mem=0, d_addr=600, d_stride0=1,
             d_stride1=37),
        make("VALU", op=int(ValuOp.COPY), dtype=int(VecType.INT8), n0=300, n1=2, a_mem=0, a_addr=0,
             a_stride0=1, d_mem=0, d_addr=990, d_stride0=0, d_stride1=1),      # stride 0: last wins
        make("VPOOL", mode=int(PoolMode.SUM), dtype=int(VecType.INT8), n0=20, n1=5, k0=3, k1=2,
             w_stride0=1, w_stride1=7, a_mem=0, a_addr=0, a_stride0=2, a_stride1=30, d_mem=1, d_addr=0,
             d_stride0=1, d_stride1=20, in_zp=3),
        make("VRESCALE", n0=50, n1=4, a_mem=1, a_addr=0, a_stride0=1, a_stride1=0, d_mem=0, d_addr=800,
             d_stride0=1, d_stride1=50, in_type=int(VecType.INT32), out_type=int(VecType.INT8),
             param_addr=0, per_channel=1, scale32=1),
        make("TABLE", mode=int(TableMode.INT8), n0=90, n1=3, a_mem=0, a_addr=5, a_stride0=1, a_stride1=90,
             d_mem=0, d_addr=300, d_stride0=1, d_stride1=90, t_addr=0),
        make("HALT"),
    ]
    program = Program(cfg, instrs)
    data = rng.integers(0, 256, 0x2000, dtype=np.uint8).tobytes()
    image = bytearray(program.memory_image({}))
    image += bytes(max(0, 0x8000 - len(image)))
    image[0x8000:0x8000] = data

    def state(chunk):
        monkeypatch.setattr(vpu_module, "CHUNK", chunk)
        r = IsaSim(cfg).run(program, bytes(image))
        assert r.error_code == 0, r.error_message
        return r.state

    whole = state(1 << 20)
    for chunk in (3, 64):
        part = state(chunk)
        for name in ("asram", "acc"):
            assert np.array_equal(getattr(part, name), getattr(whole, name)), (chunk, name)


def test_a_long_stride0_instruction_runs_in_bounded_memory():
    """2.6 million output vectors on one row (stride 0): numpy's peak stays small."""
    import tracemalloc
    from isa import SMALL_CONFIG, make
    from isa.instructions import ValuOp, VecType
    from isa.program import Program
    from sim.isa.sim import IsaSim

    cfg = SMALL_CONFIG
    instrs = [make("VALU", op=int(ValuOp.ADD), dtype=int(VecType.INT8), n0=65535, n1=40, a_mem=0, a_addr=1,
                   b_mem=0, b_addr=2, d_mem=0, d_addr=3), make("HALT")]
    program = Program(cfg, instrs)
    tracemalloc.start()
    try:
        r = IsaSim(cfg).run(program, bytes(program.memory_image({})))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.error_code == 0
    assert peak < 200 << 20, f"peak {peak >> 20} MiB"


def test_vector_steps_are_bounded():
    """MAX_VECTOR_STEPS: at the limit legal, one step past it ILLEGAL_INSTRUCTION (before any
    data moves), so no vector instruction outlives the watchdog's reach."""
    from isa import SMALL_CONFIG, make
    from isa.instructions import MAX_VECTOR_STEPS, ErrorCode
    from isa.program import Program
    from isa.vector import legal
    from sim.isa.sim import IsaSim

    base = dict(make("VPOOL", mode=0, dtype=0).values)
    assert legal("VPOOL", {**base, "n0": 4096, "n1": 16, "k0": 16, "k1": 16}) is None        # 2**24
    assert "MAX_VECTOR_STEPS" in legal("VPOOL", {**base, "n0": 4097, "n1": 16, "k0": 16, "k1": 16})
    valu = dict(make("VALU", op=24, dtype=0).values)
    assert legal("VALU", {**valu, "n0": 4096, "n1": 4096}) is None
    assert legal("VALU", {**valu, "n0": 4096, "n1": 4097}) is not None
    assert MAX_VECTOR_STEPS == 4096 * 4096
    for bad in (make("VALU", op=24, dtype=0, n0=65535, n1=65535), make("TABLE", mode=1, n0=65535, n1=257)):
        program = Program(SMALL_CONFIG, [bad, make("HALT")])
        r = IsaSim(SMALL_CONFIG).run(program, bytes(program.memory_image({})))
        assert (r.error_code, r.stop_pc) == (ErrorCode.ILLEGAL_INSTRUCTION, 0), r.error_message
