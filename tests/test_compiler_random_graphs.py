"""Random graphs of chained operators (elementwise of every integer type with broadcasting,
reductions, TABLE, data movement) compiled for the NPU and run on the ISA simulator,
bit-exact with the reference interpreter.  Fixed seeds; every value stays inside the
spec's REQUIREs (the generator tracks a bound on every tensor's values)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402

RANGE = {"bool": (0, 1), "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(1 << 31), (1 << 31) - 1)}


class RandomGraph:
    """Grows a graph from a few inputs, one random operator at a time."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.g = VecBuilder(rng, name="rand")
        self.bound: dict[str, int] = {}      # tensor -> max |value|
        self.pool: list[str] = []
        rank = int(rng.integers(1, 5))
        self.shape = tuple(int(d) for d in rng.integers(2, 7, rank))
        for dtype in ("int8", "int16", "int32"):
            lo, hi = (-1000, 1000) if dtype == "int32" else (None, None)
            x = self.g.input(self._bshape(), dtype, lo, hi)
            self._add(x, 1000 if dtype == "int32" else -RANGE[dtype][0])

    def _bshape(self):
        return tuple(d if self.rng.random() < 0.7 else 1 for d in self.shape)

    def _add(self, t: str, bound: int) -> str:
        self.bound[t] = bound
        self.pool.append(t)
        return t

    def pick(self, dtype: str | None = None, like: str | None = None) -> str:
        """A tensor of ``dtype``; with ``like``, one that broadcasts with it."""
        cands = [t for t in self.pool if (dtype is None or self.g.dtype(t) == dtype) and (
            like is None or self._broadcasts(t, like))]
        return cands[int(self.rng.integers(len(cands)))] if cands else None

    def _broadcasts(self, a: str, b: str) -> bool:
        sa, sb = self.g.shape(a), self.g.shape(b)
        return len(sa) == len(sb) and all(x == y or 1 in (x, y) for x, y in zip(sa, sb))

    def full(self, a, b):
        return tuple(np.broadcast_shapes(self.g.shape(a), self.g.shape(b)))

    def step(self) -> None:
        g, rng = self.g, self.rng
        kind = str(rng.choice(["arith", "minmax", "bitwise", "compare", "select", "cast", "rescale", "shift",
                               "reduce", "move", "move", "table", "unary"]))
        if kind == "arith":
            a = self.pick("int32")
            b = a and self.pick("int32", like=a)
            if a is None or b is None:
                return
            op = str(rng.choice(["ADD", "SUB", "MUL"]))
            bound = self.bound[a] * self.bound[b] if op == "MUL" else self.bound[a] + self.bound[b]
            if bound >= 1 << 30:
                return
            if op == "MUL":
                self._add(g.mul(a, b), bound)
            else:
                self._add(g.op(op, [a, b], self.full(a, b), "int32"), bound)
        elif kind == "minmax":
            a = self.pick("int32")
            b = a and self.pick("int32", like=a)
            if a and b:
                op = str(rng.choice(["MINIMUM", "MAXIMUM"]))
                self._add(g.op(op, [a, b], self.full(a, b), "int32"), max(self.bound[a], self.bound[b]))
        elif kind == "bitwise":
            t = str(rng.choice(["int8", "int16", "int32"]))
            a = self.pick(t)
            b = a and self.pick(t, like=a)
            if a and b:
                op = str(rng.choice(["BITWISE_AND", "BITWISE_OR", "BITWISE_XOR"]))
                self._add(g.op(op, [a, b], self.full(a, b), t), -RANGE[t][0])
        elif kind == "compare":
            a = self.pick("int32")
            b = a and self.pick("int32", like=a)
            if a and b:
                op = str(rng.choice(["EQUAL", "GREATER", "GREATER_EQUAL"]))
                self._add(g.op(op, [a, b], self.full(a, b), "bool"), 1)
        elif kind == "select":
            c = self.pick("bool")
            t = str(rng.choice(["int8", "int16", "int32"]))
            a = c and self.pick(t, like=c)
            b = a and self.pick(t, like=a)
            if c and a and b and self._broadcasts(b, c):
                shape = tuple(np.broadcast_shapes(g.shape(c), g.shape(a), g.shape(b)))
                self._add(g.op("SELECT", [c, a, b], shape, t), max(self.bound[a], self.bound[b]))
        elif kind == "cast":
            a = self.pick()
            t = str(rng.choice(["bool", "int8", "int16", "int32"]))
            if a and g.dtype(a) != t:
                bound = min(self.bound[a], -RANGE[t][0]) if t != "bool" else 1
                if t != "bool" and self.bound[a] > -RANGE[t][0]:
                    bound = -RANGE[t][0]     # narrowing wraps
                self._add(g.op("CAST", [a], g.shape(a), t), bound)
        elif kind == "rescale":
            a = self.pick(str(rng.choice(["int8", "int16", "int32"])))
            if a:
                out = str(rng.choice(["int8", "int16", "int32"]))
                self._add(g.rescale(a, out, [int(rng.integers(1 << 29, 1 << 30))], [32]),
                          -RANGE[out][0])
        elif kind == "shift":
            a = self.pick("int32")
            if a and self.bound[a] < 1 << 20:
                s = g.const(np.full((1,) * len(g.shape(a)), int(rng.integers(0, 6)), np.int32), "int32")
                op = str(rng.choice(["ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT"]))
                bound = self.bound[a] * 32 if op == "LOGICAL_LEFT_SHIFT" else self.bound[a]
                self._add(g.op(op, [a, s], g.shape(a), "int32", **({"round": True} if "ARITH" in op else {})),
                          bound + 1)
        elif kind == "reduce":
            a = self.pick()
            if a and len(g.shape(a)) > 0:
                axis = int(rng.integers(len(g.shape(a))))
                shape = tuple(1 if i == axis else d for i, d in enumerate(g.shape(a)))
                t = g.dtype(a)
                if t == "bool":
                    self._add(g.op(str(rng.choice(["REDUCE_ANY", "REDUCE_ALL"])), [a], shape, t, axis=axis), 1)
                elif t == "int32" and self.bound[a] * g.shape(a)[axis] < 1 << 30 and rng.random() < 0.5:
                    self._add(g.op("REDUCE_SUM", [a], shape, t, axis=axis), self.bound[a] * g.shape(a)[axis])
                else:
                    op = str(rng.choice(["REDUCE_MAX", "REDUCE_MIN"]))
                    self._add(g.op(op, [a], shape, t, axis=axis), self.bound[a])
        elif kind == "move":
            a = self.pick()
            if not a:
                return
            s = g.shape(a)
            t = g.dtype(a)
            which = str(rng.choice(["TRANSPOSE", "REVERSE", "SLICE", "TILE", "PAD", "RESHAPE"]))
            if which == "TRANSPOSE":
                perm = [int(p) for p in rng.permutation(len(s))]
                self._add(g.op("TRANSPOSE", [a], tuple(s[p] for p in perm), t, perms=perm), self.bound[a])
            elif which == "REVERSE":
                self._add(g.op("REVERSE", [a], s, t, axis=int(rng.integers(len(s)))), self.bound[a])
            elif which == "SLICE":
                start = [int(rng.integers(0, d)) for d in s]
                size = [int(rng.integers(1, d - st + 1)) for d, st in zip(s, start)]
                self._add(g.op("SLICE", [a, g.const(np.array(start), "shape"), g.const(np.array(size), "shape")],
                               tuple(size), t), self.bound[a])
            elif which == "TILE":
                mult = [int(rng.integers(1, 3)) for _ in s]
                self._add(g.op("TILE", [a, g.const(np.array(mult), "shape")], tuple(d * m for d, m in zip(s, mult)),
                               t), self.bound[a])
            elif which == "PAD" and t != "bool":
                pads = [int(rng.integers(0, 3)) for _ in range(2 * len(s))]
                out = tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(s))
                self._add(g.op("PAD", [a, g.const(np.array(pads), "shape"), g.const(np.array([3]), t)], out, t),
                          max(self.bound[a], 3))
            elif which == "RESHAPE":
                size = int(np.prod(s))
                new = (size,) if rng.random() < 0.5 or size % 2 else (2, size // 2)
                self._add(g.op("RESHAPE", [a, g.const(np.array(new), "shape")], new, t), self.bound[a])
        elif kind == "table":
            a = self.pick("int8")
            if a:
                table = rng.integers(-128, 128, 256)
                self._add(g.op("TABLE", [a, g.const(table, "int8")], g.shape(a), "int8"), 128)
        elif kind == "unary":
            a = self.pick("int32")
            if a:
                op = str(rng.choice(["ABS", "CLZ", "BITWISE_NOT", "NEGATE"]))
                if op == "NEGATE":
                    self._add(g.negate(a), self.bound[a])
                else:
                    self._add(g.op(op, [a], g.shape(a), "int32"), max(self.bound[a] + 1, 32))


@pytest.mark.parametrize("seed", range(12))
def test_random_operator_chains(seed):
    rng = np.random.default_rng(1000 + seed)
    r = RandomGraph(rng)
    for _ in range(14):
        r.step()
    made = [t for t in r.pool if t not in r.g.block.inputs]
    outputs = made[-3:] if made else r.pool[:1]
    config = SMALL_CONFIG if seed % 2 else DEFAULT_CONFIG
    run_and_compare(r.g.graph(outputs), r.g.inputs(rng), config)
