"""The vector unit's per-lane multiplier (hw/vpu_lanes.py ``lane_product``) against Python's
integers: four 17 x 17-bit partial products must give exactly the 48 x 16-bit product of
VRESCALE (``wide``) and the 32 x 32-bit one of ACT, VRESCALE with scale32 and VALU's MUL,
for every sign combination and the extremes of each operand."""
from __future__ import annotations

import numpy as np
from amaranth import Module, Signal, signed
from amaranth.sim import Simulator

from hw.vpu_lanes import lane_product


def _extremes(bits: int) -> list[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    chunk = [(1 << k) for k in (15, 16, 17, 31, 32, 33) if k < bits - 1]
    return [lo, lo + 1, -1, 0, 1, hi - 1, hi] + chunk + [-c for c in chunk] + [c - 1 for c in chunk]


def _cases(rng) -> list[tuple[bool, int, int]]:
    cases = []
    for wide, xb, yb in ((True, 48, 16), (False, 32, 32)):
        ex, ey = _extremes(xb), _extremes(yb)
        cases += [(wide, x, y) for x in ex for y in ey]
        for _ in range(600):
            cases.append((wide, int(rng.integers(-(1 << (xb - 1)), 1 << (xb - 1))),
                          int(rng.integers(-(1 << (yb - 1)), 1 << (yb - 1)))))
    return cases


def test_lane_product_is_exact():
    m = Module()
    x, y, wide = Signal(signed(48)), Signal(signed(32)), Signal()
    out, _ = lane_product(m, wide, x, y, "p")
    cases = _cases(np.random.default_rng(1))
    got = []

    async def bench(ctx):
        for w, a, b in cases:
            ctx.set(wide, w)
            ctx.set(x, a)
            ctx.set(y, b)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    bad = [(w, a, b, g, a * b) for (w, a, b), g in zip(cases, got) if g != a * b]
    assert not bad, f"{len(bad)} of {len(cases)} wrong, first (wide, x, y, got, want): {bad[0]}"


def test_lane_product_ignores_unused_bits():
    """Not wide: x's bits 32-47 and, wide, y's bits 16-31 must not matter (the VPU drives them
    with other values: the INT48 input's high bits, the 32-bit scale's)."""
    m = Module()
    x, y, wide = Signal(signed(48)), Signal(signed(32)), Signal()
    out, _ = lane_product(m, wide, x, y, "p")
    rng = np.random.default_rng(2)
    cases = []
    for _ in range(300):
        a32, b32 = int(rng.integers(-(1 << 31), 1 << 31)), int(rng.integers(-(1 << 31), 1 << 31))
        junk_x = int(rng.integers(0, 1 << 16)) << 32
        cases.append((False, ((a32 & 0xFFFFFFFF) | junk_x), b32, a32 * b32))
        a48, b16 = int(rng.integers(-(1 << 47), 1 << 47)), int(rng.integers(-(1 << 15), 1 << 15))
        junk_y = int(rng.integers(0, 1 << 16)) << 16
        cases.append((True, a48, (b16 & 0xFFFF) | junk_y, a48 * b16))
    got = []

    async def bench(ctx):
        for w, a, b, _ in cases:
            ctx.set(wide, w)
            ctx.set(x, a - (1 << 48) if a >= 1 << 47 else a)
            ctx.set(y, b - (1 << 32) if b >= 1 << 31 else b)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    bad = [(c, g) for c, g in zip(cases, got) if g != c[3]]
    assert not bad, f"{len(bad)} of {len(cases)} wrong, first: {bad[0]}"


def test_lane_product_small_partial_product():
    """``small`` (VDWCONV's elements): the first partial product is the exact product of
    x's and y's low 17 bits as signed numbers (an input minus its zero point times a weight),
    whatever the other bits hold."""
    m = Module()
    x, y, wide = Signal(signed(48)), Signal(signed(32)), Signal()
    _, p0 = lane_product(m, wide, x, y, "p", small=Signal(init=1))
    rng = np.random.default_rng(3)
    cases = [(int(a), int(b)) for a, b in zip(rng.integers(-(1 << 16), 1 << 16, 400),
                                              rng.integers(-(1 << 16), 1 << 16, 400))]
    cases += [(-(1 << 16), -(1 << 16)), ((1 << 16) - 1, -(1 << 16)), (-255, 127), (255, -128)]
    got = []

    async def bench(ctx):
        for a, b in cases:
            ctx.set(x, a)
            ctx.set(y, b)
            got.append(ctx.get(p0))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert got == [a * b for a, b in cases]
