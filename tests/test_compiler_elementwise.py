"""Compiler: elementwise operators on the vector unit (compiler/kinds/elementwise/layer.py,
compiler/kinds/elementwise/lower.py), every integer type, broadcasting up to rank 6,
tiling, the rows layout, and mixed graphs with convolutions (brick tensors).

Expected values come from the reference interpreter (sim.reference); programs run on the
ISA simulator with its hazard checker."""
from __future__ import annotations

import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, GraphBuilder  # noqa: E402
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from compiler.kinds.elementwise.layer import EltLayer  # noqa: E402
from tosa_ir.errors import InvalidInput, Unsupported  # noqa: E402

BITS = {"int8": 8, "int16": 16, "int32": 32}


def random_shapes(rng, count: int, max_rank: int = 6, max_dim: int = 6):
    """An output shape of random rank and ``count`` input shapes broadcasting to it."""
    rank = int(rng.integers(1, max_rank + 1))
    full = tuple(int(d) for d in rng.integers(1, max_dim + 1, rank))
    ins = [tuple(d if rng.random() < 0.6 else 1 for d in full) for _ in range(count)]
    out = tuple(max(dims) for dims in zip(*ins)) if ins else full
    return out, ins


def seed(*key) -> int:
    return zlib.crc32(repr(key).encode())


BINARY_CASES = [
    ("ADD", "int32"), ("SUB", "int32"), ("MUL", "int8"), ("MUL", "int16"), ("MUL", "int32"),
    ("ARITHMETIC_RIGHT_SHIFT", "int8"), ("ARITHMETIC_RIGHT_SHIFT", "int16"), ("ARITHMETIC_RIGHT_SHIFT", "int32"),
    ("LOGICAL_LEFT_SHIFT", "int16"), ("LOGICAL_RIGHT_SHIFT", "int8"), ("LOGICAL_RIGHT_SHIFT", "int32"),
    ("BITWISE_AND", "int8"), ("BITWISE_OR", "int16"), ("BITWISE_XOR", "int32"),
    ("MINIMUM", "int32"), ("MAXIMUM", "int32"), ("EQUAL", "int32"), ("GREATER", "int32"),
    ("GREATER_EQUAL", "int32"), ("LOGICAL_AND", "bool"), ("LOGICAL_OR", "bool"), ("LOGICAL_XOR", "bool"),
]


@pytest.mark.parametrize("kind,dtype", BINARY_CASES)
def test_binary_operators_with_broadcasting(kind, dtype):
    rng = np.random.default_rng(seed(kind, dtype))
    for trial in range(3):
        out_shape, (sa, sb) = random_shapes(rng, 2)
        g = VecBuilder(rng)
        lo, hi = {"ADD": (-(1 << 30), 1 << 30), "SUB": (-(1 << 30), 1 << 30), "MUL": (-3000, 3000)}.get(kind, (None, None))
        if dtype == "int8" and kind == "MUL":
            lo, hi = None, None
        a = g.input(sa, dtype, lo, hi)
        if "SHIFT" in kind:
            b = g.input(sb, dtype, 0, BITS[dtype] - 1)
        else:
            b = g.input(sb, dtype, lo, hi)
        if kind == "MUL":
            y = g.mul(a, b, shift=int(rng.integers(0, 12)) if dtype == "int32" else 0)
        else:
            out_t = "bool" if kind in ("EQUAL", "GREATER", "GREATER_EQUAL") or kind.startswith("LOGICAL_") and \
                dtype == "bool" else dtype
            attrs = {"round": bool(trial % 2)} if kind == "ARITHMETIC_RIGHT_SHIFT" else {}
            y = g.op(kind, [a, b], out_shape, out_t, **attrs)
        run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)


UNARY_CASES = [("ABS", "int32"), ("BITWISE_NOT", "int8"), ("BITWISE_NOT", "int16"), ("BITWISE_NOT", "int32"),
               ("LOGICAL_NOT", "bool"), ("CLZ", "int32"), ("NEGATE", "int8"), ("NEGATE", "int16"),
               ("NEGATE", "int32"), ("CLAMP", "int8"), ("CLAMP", "int16")]


@pytest.mark.parametrize("kind,dtype", UNARY_CASES)
def test_unary_operators(kind, dtype):
    rng = np.random.default_rng(seed(kind, dtype))
    out_shape, _ = random_shapes(rng, 0)
    g = VecBuilder(rng)
    lo = -(1 << 31) + 1 if dtype == "int32" else None
    x = g.input(out_shape, dtype, lo)
    if kind == "NEGATE":
        zps = (int(rng.integers(-128, 128)), int(rng.integers(-128, 128))) if dtype == "int8" else (0, 0)
        y = g.negate(x, *zps)
    elif kind == "CLAMP":
        lo_v, hi_v = sorted(int(v) for v in rng.integers(-100, 100, 2))
        nbytes = BITS[dtype] // 8
        y = g.op("CLAMP", [x], out_shape, dtype, min_val=np.frombuffer(np.array(lo_v, f"<i{nbytes}").tobytes(), np.uint8),
                 max_val=np.frombuffer(np.array(hi_v, f"<i{nbytes}").tobytes(), np.uint8))
    else:
        y = g.op(kind, [x], out_shape, dtype)
    run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32"])
def test_select_broadcasts_each_operand(dtype):
    rng = np.random.default_rng(3)
    for _ in range(3):
        out_shape, shapes = random_shapes(rng, 3, max_rank=4)
        g = VecBuilder(rng)
        c = g.input(shapes[0], "bool")
        a, b = g.input(shapes[1], dtype), g.input(shapes[2], dtype)
        y = g.op("SELECT", [c, a, b], out_shape, dtype)
        run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)


CASTS = [(i, o) for i in ("bool", "int8", "int16", "int32") for o in ("bool", "int8", "int16", "int32") if i != o]


@pytest.mark.parametrize("src,dst", CASTS)
def test_cast(src, dst):
    rng = np.random.default_rng(len(src) * 7 + len(dst))
    g = VecBuilder(rng)
    x = g.input((3, 5, 7), src)
    run_and_compare(g.graph([g.op("CAST", [x], (3, 5, 7), dst)]), g.inputs(rng), SMALL_CONFIG)


RESCALES = [
    # in, out, scale32, double_round, per_channel, input_unsigned, output_unsigned, izp, ozp
    ("int8", "int32", True, False, False, False, False, -7, 0),
    ("int32", "int8", True, True, True, False, False, 0, 5),
    ("int32", "int16", False, False, True, False, False, 0, 0),
    ("int16", "int8", True, False, False, False, False, 0, -3),
    ("int8", "int16", False, False, True, True, False, 130, 0),      # uint8 input
    ("int16", "int8", True, True, False, True, False, 32768, 0),     # uint16 input
    ("int8", "int16", True, False, False, False, True, 0, 32768),    # uint16 output
    ("int16", "int8", True, False, True, False, True, 0, 200),       # uint8 output
    ("int48", "int32", False, False, True, False, False, 0, 0),      # int48 (int64 in memory)
    ("int48", "int16", False, False, False, False, False, 0, 0),
]


@pytest.mark.parametrize("case", RESCALES)
def test_rescale_modes(case):
    in_t, out_t, scale32, double, per_channel, iu, ou, izp, ozp = case
    rng = np.random.default_rng(11)
    shape = (2, 3, 21)
    g = VecBuilder(rng)
    lo, hi = {"int32": (-(1 << 16), 1 << 16), "int48": (-(1 << 40), 1 << 40)}.get(in_t, (None, None))
    x = g.input(shape, in_t, lo, hi)
    n = shape[-1] if per_channel else 1
    # Parameters keeping apply_scale's REQUIREs (|value| < 2**(shift-1), int32 results).
    mul = rng.integers(1 << 12, (1 << 30) if scale32 else (1 << 14), n)
    shift = rng.integers(23, 40, n) if scale32 else rng.integers(30, 40, n) if in_t == "int48" else \
        rng.integers(13, 16, n)
    # Unsigned zero points travel as the bit patterns of the signless types.
    izp_v = (np.int16(np.uint16(izp)) if in_t == "int16" else np.int8(np.uint8(izp))) if iu else izp
    ozp_v = (np.int16(np.uint16(ozp)) if out_t == "int16" else np.int8(np.uint8(ozp))) if ou else ozp
    y = g.rescale(x, out_t, mul, shift, int(izp_v), int(ozp_v), scale32, double, per_channel, iu, ou)
    run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)


@pytest.mark.parametrize("shape", [(16,), (57,), (3, 43)])
@pytest.mark.parametrize("config", ["small", "default"])
def test_rescale_int48_input_small_enough_to_stay_resident(shape, config):
    """An int48 input that fits the resident area (loaded once before the tiles) still goes
    through the int64 -> ACC row pair split: loaded as it lies, its 8-byte elements were
    read as VRESCALE's 6-byte ASRAM lanes (only lane 0 right; a conformance test at another
    seed found it: got -347776723, expected -5307)."""
    rng = np.random.default_rng(3)
    g = VecBuilder(rng)
    x = g.input(shape, "int48", -(1 << 46), 1 << 46)
    y = g.rescale(x, "int32", [21152], [31], 0, 0, False, False, False, False, False)
    run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG if config == "small" else DEFAULT_CONFIG)


def test_tiles_larger_than_the_scratchpads():
    """Tensors several times ASRAM (SMALL_CONFIG: 1024 rows of 4 bytes) with broadcasting
    along a middle axis and the innermost one, in both configurations' tile shapes."""
    rng = np.random.default_rng(5)
    g = VecBuilder(rng)
    a = g.input((2, 19, 45), "int32", -(1 << 29), 1 << 29)
    b = g.input((2, 1, 45), "int32", -(1 << 29), 1 << 29)
    c = g.input((2, 19, 1), "int32", -(1 << 29), 1 << 29)
    s = g.op("ADD", [g.op("SUB", [a, b], (2, 19, 45), "int32"), c], (2, 19, 45), "int32")
    m = g.mul(g.input((1, 19, 45), "int16"), g.input((2, 19, 1), "int16"))
    comp = run_and_compare(g.graph([s, m]), g.inputs(rng), SMALL_CONFIG)
    assert max(p.tile for p in comp.plans if hasattr(p, "tile")) < 2 * 19 * 12
    run_and_compare(g.graph([s, m]), g.inputs(rng), DEFAULT_CONFIG)


def test_chains_of_types_rank_6():
    rng = np.random.default_rng(8)
    g = VecBuilder(rng)
    x = g.input((2, 1, 3, 2, 2, 17), "int8")
    w = g.rescale(x, "int32", [1 << 30], [31], izp=3)        # (x - 3) / 2, rounded
    k = g.const(rng.integers(-50, 50, (1, 2, 3, 1, 2, 17)), "int32")
    p = g.op("MAXIMUM", [w, k], (2, 2, 3, 2, 2, 17), "int32")
    n = g.op("CAST", [p], (2, 2, 3, 2, 2, 17), "int16")
    e = g.op("GREATER", [p, g.const(np.zeros((1,) * 6, np.int32), "int32")], (2, 2, 3, 2, 2, 17), "bool")
    y = g.op("SELECT", [e, n, g.negate(n)], (2, 2, 3, 2, 2, 17), "int16")
    comp = run_and_compare(g.graph([y, e]), g.inputs(rng), SMALL_CONFIG)
    # Six operators, four layers: CAST, NEGATE and SELECT merge (compiler/kinds/elementwise/
    # fusion.py); the RESCALE is broadcast by the MAXIMUM, whose result two layers read.
    assert sum(isinstance(layer, EltLayer) for layer in comp.layers) == 4


def test_rank_0_and_constant_outputs():
    rng = np.random.default_rng(9)
    g = VecBuilder(rng)
    a, b = g.input((), "int32", -1000, 1000), g.input((), "int32", -1000, 1000)
    k = g.const(np.arange(6, dtype=np.int16).reshape(2, 3), "int16")
    run_and_compare(g.graph([g.op("SUB", [a, b], (), "int32"), k]), g.inputs(rng), SMALL_CONFIG)


def test_conv_outputs_feed_elementwise_and_back():
    """Brick tensors read by the vector unit (per-channel broadcast), and an elementwise
    result read by a convolution (written as bricks)."""
    rng = np.random.default_rng(10)
    gb = GraphBuilder(rng, name="mix")
    x = gb.input("x", (1, 5, 6, 7))
    y = gb.conv(x, ConvSpec(oc=6, clamp=None))
    b = gb.block
    from tosa_ir import Operator, Tensor

    k = "bias_c"
    b.add_tensor(Tensor(k, (1, 1, 1, 6), "int8", rng.integers(-20, 20, (1, 1, 1, 6)).astype(np.int8)))
    gb.block.add_tensor(Tensor("s", (1, 5, 6, 6), "int8"))
    # int8 BITWISE_XOR keeps the type, so a conv can read the result.
    b.operators.append(Operator("BITWISE_XOR", [y, k], ["s"], {}, "mix:xor"))
    z = gb.conv("s", ConvSpec(oc=5, clamp=None))
    b.add_tensor(Tensor("w", (1, 5, 6, 5), "int32"))
    b.add_tensor(Tensor("sh", (1,), "int8", np.zeros(1, np.int8)))
    b.operators.append(Operator("MUL", [z, z, "sh"], ["w"], {}, "mix:mul"))
    comp = run_and_compare(gb.graph(["w", "s"]), {"x": rng.integers(-128, 128, (1, 5, 6, 7)).astype(np.int8)},
                           SMALL_CONFIG)
    layouts = {b.name: b.layout for b in comp.program.outputs}
    assert layouts == {"w": "rows", "s": "brick"}


def test_errors():
    rng = np.random.default_rng(0)
    g = VecBuilder(rng)
    a, b = g.input((2, 3), "int32"), g.input((3, 3), "int32")
    with pytest.raises(InvalidInput, match="ADD"):
        run_and_compare(g.graph([g.op("ADD", [a, b], (3, 3), "int32")]), g.inputs(rng), SMALL_CONFIG)
    g = VecBuilder(rng)
    a, s = g.input((2, 3), "int32"), g.input((1,), "int8")
    y = g.op("MUL", [a, a, s], (2, 3), "int32")
    with pytest.raises(Unsupported, match=r"MUL at vec:mul0: shift \('t1'\) must be a constant tensor"):
        run_and_compare(g.graph([y]), g.inputs(rng), SMALL_CONFIG)
