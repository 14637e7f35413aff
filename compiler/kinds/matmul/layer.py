"""TOSA MATMUL on the MAC array (``MatmulLayer``, lowered by compiler/kinds/matmul/lower.py).

``out[n, h, w] = sum_c (A[n, h, c] - A_zp) * (B[n, c, w] - B_zp)`` with A ``[N,H,C]`` and B
``[N,C,W]`` in the ``rows`` layout (isa/layout.py): a row of A (one ``h``) is ``ceil(C/L)``
input vectors of the array, and ``L`` consecutive channels ``c`` of B, each one row of B's
``w`` block, are exactly one weight tile (WSRAM row ``k`` = B[n, c0 + k, w0 .. w0 + L - 1]).
So neither operand is transposed: a word-mode DMA of ``R`` lines of B is a tile, and rows of
the tile past ``C`` are padded with ``B_zp`` (they then add ``(A - A_zp) * 0``).

Modes (the spec's two):

* int8 x int8 -> int32: MATMUL ``a_type`` INT8, zero points in ``a_zp``/``w_zp``.
* int16 x int16 -> int48: the array multiplies int16 inputs by int8 weights (int48
  accumulators), so B is split into bytes exactly: ``B = 256 * hi + lo`` with ``hi = B >> 8``
  (int8) and ``lo = B & 255`` (0..255).  ``lo`` is loaded as the int8 byte ``lo ^ 128`` (= lo -
  128) with ``w_zp = -128``, which the array takes back off exactly; the byte comes from
  ``B ^ 128`` (one int16 VALU layer before the matmul, so an element-mode DMA can pick the low
  bytes).  Two int48 products ``H = A.hi`` and ``Lo = A.lo`` are then combined as
  ``256 * H + Lo`` (mod 2**48) by int32 VALU arithmetic on the (low, high) ACC row pairs
  (carry by the majority rule), and stored as int64 (low word, sign-extended high word).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.instructions import ValuOp, VecType
from tosa_ir import Operator

from compiler.core.ir import Layer
from compiler.kinds.elementwise.layer import EltLayer, Step, _scalar
from compiler.core.errors import invalid, unsupported


@dataclass
class MatmulLayer(Layer):
    """``output = MATMUL(a, b)``; int16 mode: ``b_lo``, ``b_hi`` the int8 tensors of B's low
    bytes (``^ 128``) and high bytes; ``a_zp``/``b_zp`` the zero points."""

    name: str
    a: str
    b: str
    output: str
    shape: tuple[int, int, int, int]     # N, H, C, W
    wide: bool                           # int16 x int16 -> int48
    a_zp: int = 0
    b_zp: int = 0
    b_lo: str | None = None
    b_hi: str | None = None
    ops: list[str] = field(default_factory=list)
    location: str = ""

    @property
    def macs(self) -> int:
        n, h, c, w = self.shape
        return n * h * c * w

    @property
    def reads(self) -> list[str]:
        return [self.a, self.b] + ([self.b_lo, self.b_hi] if self.b_lo else [])


def matmul(b, op: Operator) -> bool:
    """Add the layers of MATMUL ``op`` to the dataflow walk (``b``: decompose's _Builder);
    False (nothing added) when an operand is an int8 brick tensor."""
    walk = b.walk
    block = walk.block
    at, bt = block.tensor(op.inputs[0]), block.tensor(op.inputs[1])
    out = block.tensor(op.outputs[0])
    if any(d < 0 for d in at.shape + bt.shape):
        raise unsupported(op, "unknown dimensions")
    if len(at.shape) != 3 or len(bt.shape) != 3:
        raise invalid(op, f"A {at.shape} and B {bt.shape} must have rank 3")
    modes = {("int8", "int8"): "int32", ("int16", "int16"): "int48"}
    if (at.dtype, bt.dtype) not in modes or out.dtype != modes[(at.dtype, bt.dtype)]:
        raise unsupported(op, f"{at.dtype} x {bt.dtype} -> {out.dtype}: MATMUL is int8 x int8 -> int32 or "
                              f"int16 x int16 -> int48")
    n, h, c = at.shape
    w = bt.shape[2]
    azp = _scalar(op, block, 2, ("A_zp", "a_zp"), 0)
    bzp = _scalar(op, block, 3, ("B_zp", "b_zp"), 0)
    wide = at.dtype == "int16"
    if wide and (azp or bzp):
        raise invalid(op, f"zero points {azp}, {bzp} of int16 MATMUL must be 0")
    x, y = (walk.require_vec(op, t) for t in op.inputs[:2])
    if any(walk.flow.root_of(name).layout != "rows" for name in (x, y)):
        return False        # int8 brick operands: the vector-unit decomposition (decompose.py)
    layer = MatmulLayer(walk.new_name("matmul"), x, y, op.outputs[0], (n, h, c, w), wide, azp, bzp,
                        ops=[op.describe()], location=op.location)
    if wide:
        # The weight bytes as int8 tensors (word-mode DMA loads their tiles at full rate):
        # lo = int8((B ^ 128) & 255), hi = int8(B >> 8); each an int16 VALU into ACC, then a
        # COPY reading the low byte (the narrowing of CAST).
        for attr, vop, value in (("b_lo", ValuOp.BITWISE_XOR, 128), ("b_hi", ValuOp.ARITHMETIC_RIGHT_SHIFT, 8)):
            k = b.const(np.full((1, 1, 1), value), "int16")
            out8 = b.tmp((n, c, w), "int8")
            steps = [Step("VALU", {"op": vop, "dtype": VecType.INT16, "imm0": 0}, ("in0", "in1"), "x"),
                     Step("VALU", {"op": ValuOp.COPY, "dtype": VecType.INT8}, ("x",), "out")]
            b.layer(EltLayer(f"{b.base}.l{b.count}", [y, k], out8, (n, c, w),
                             {"in0": VecType.INT16, "in1": VecType.INT16, "x": VecType.INT8, "out": VecType.INT8},
                             {"x": "ACC"}, steps))
            setattr(layer, attr, out8)
    walk.new_root(op.outputs[0], (n, h, w), "computed", layout="rows", dtype=out.dtype)
    walk.flow.layers.append(layer)
    return True
