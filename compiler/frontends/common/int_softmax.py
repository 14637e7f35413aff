"""SOFTMAX on 8-bit data, bit-exact with TFLite's reference kernel (reference_ops::Softmax).

That kernel works in gemmlowp fixed point, per row (last axis):

1. ``diff = q - max(row)`` (in [-255, 0]); ``E = exp_on_negative_values(diff * beta *
   scale)`` in Q0.31, or 0 below ``diff_min``: a function of ``diff`` alone, so a table.
2. ``sum = sum(RoundingDivideByPOT(E, 12))`` (Q12.19).
3. ``R = one_over_one_plus_x_for_x_in_0_1(x)`` with ``x = (sum << clz(sum)) - 2**31``:
   three Newton-Raphson steps in Q2.29 with saturating shifts.
4. ``out = RoundingDivideByPOT(SRDHM(R, E), 35 - clz(sum)) - 128``, saturated.

TOSA expresses each step exactly: the 31-bit E comes from two int16 TABLE lookups (high
and low 16 bits, indices spaced so the interpolation slope is 0); gemmlowp's
SaturatingRoundingDoublingHighMul is ``MUL`` with shift 31 (both compute
``floor((a*b + 2**30) / 2**31)``); RoundingDivideByPOT of non-negative values is
``ARITHMETIC_RIGHT_SHIFT`` with ``round``; clz is CLZ.  uint8 data (carried as int8 moved
by 128) gives the same codes moved by 128, as the kernel's formula shows.
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.tflite_fixed_point import softmax_exp_table

_F2_ONE = 1 << 29  # 1.0 in Q2.29
_C48_17 = 1515870810  # 48/17 in Q2.29
_CM32_17 = -1010580540  # -32/17 in Q2.29


def _exp_tables(beta: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """int16 tables giving E's high and low halves at index 2 * (diff + 255)."""
    diffs = np.arange(-255, 1)
    e = softmax_exp_table(beta, scale, diffs)
    hi = e >> 16
    lo = (e & 0xFFFF) - 32768
    tables = []
    for half in (hi, lo):
        table = np.zeros(513, np.int64)
        table[0:512:2] = half
        table[1:512:2] = half  # equal neighbours: interpolation slope 0
        table[512] = half[-1]
        tables.append(table)
    return tables[0], tables[1]


def softmax(lw, op):
    b = lw.b
    x = lw.activation(0)
    out, out_dtype = lw.out_type()
    if x.dtype != "int8" or out_dtype != "int8":
        raise lw.unsupported("SOFTMAX is supported for 8-bit input and output only")
    beta = float((op.options or {}).get("beta", 1.0))
    shape = b.shape(x.name)
    rank = len(shape)
    if rank < 1:
        raise lw.invalid("SOFTMAX input must have rank >= 1")
    axis = rank - 1

    def k(value):
        return b.i32(value, rank)

    xi = b.to_int32(x.name)
    row_max = b.emit("REDUCE_MAX", [x.name], shape[:-1] + (1,), "int8", "row_max", axis=axis,
                     nan_mode="PROPAGATE")
    diff = b.binary("SUB", xi, b.to_int32(row_max), "int32")
    # Table index: 2 * (diff + 255) entries from the start, i.e. int16 input
    # diff * 256 + 32512 (fraction bits 0).
    index = b.binary("ADD", b.binary("LOGICAL_LEFT_SHIFT", diff, k(8)), k(32512))
    index16 = b.rescale(index, "int16", 1 << 30, 30, 0, 0, double_round=False)
    hi_table, lo_table = _exp_tables(beta, x.scale)
    hi = b.emit("TABLE", [index16, b.const("exp_hi", hi_table, "int16")], shape, "int32",
                "exp_hi")
    lo = b.emit("TABLE", [index16, b.const("exp_lo", lo_table, "int16")], shape, "int32",
                "exp_lo")
    # E = hi * 2**16 + lo + 32768; the TABLE outputs are the entries times 2**7.
    exp = b.binary("ADD", b.binary("LOGICAL_LEFT_SHIFT", hi, k(9)),
                   b.binary("ARITHMETIC_RIGHT_SHIFT", lo, k(7), round=False))
    exp = b.binary("ADD", exp, k(32768), hint="exp")
    terms = b.binary("ARITHMETIC_RIGHT_SHIFT", exp, k(12), round=True)
    total = b.emit("REDUCE_SUM", [terms], shape[:-1] + (1,), "int32", "sum_of_exps",
                   axis=axis)
    clz = b.emit("CLZ", [total], b.shape(total), "int32", "headroom")
    shifted = b.binary("LOGICAL_LEFT_SHIFT", total, clz)
    frac = b.binary("BITWISE_AND", shifted, k(0x7FFFFFFF))  # (sum << clz) - 2**31
    # one_over_one_plus_x_for_x_in_0_1(frac), gemmlowp.
    half_den = b.binary("ADD", b.binary("ARITHMETIC_RIGHT_SHIFT", frac, k(1), round=False),
                        k(1 << 30))
    recip = b.binary("ADD", b.mul(half_den, k(_CM32_17), 31), k(_C48_17))
    for _ in range(3):
        prod = b.mul(half_den, recip, 31)
        err = b.binary("SUB", k(_F2_ONE), prod)
        step = b.sat_left_shift(b.mul(recip, err, 31), 2)
        recip = b.binary("ADD", recip, step)
    scale = b.sat_left_shift(recip, 1)
    exponent = b.binary("SUB", k(35), clz)
    unsat = b.binary("ARITHMETIC_RIGHT_SHIFT", b.mul(scale, exp, 31), exponent, round=True)
    y = b.rescale(unsat, "int8", 1 << 30, 30, 0, -128, double_round=False, hint=out.name)
    lw.define(0, y)
