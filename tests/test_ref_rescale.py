"""Reference interpreter vs the official TOSA reference model: RESCALE and CAST.

Expected values and statuses come from the official reference model run on the same
.tosa bytes our interpreter reads (see oracle.py).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from oracle import (GraphBuilder, check_against_reference, draft_form, load_graph,  # noqa: E402
                    run_ours, run_reference)

from sim import tosa_helpers as th  # noqa: E402
from tosa_ir import INT_RANGES  # noqa: E402

BOTH = ("1.0", "draft")
INS = ("int8", "int16", "int32", "int48")
OUTS = ("int8", "int16", "int32")


def legal(in_t, out_t, iu, ou) -> bool:
    """Type/signedness combinations RESCALE accepts (the spec's ERROR_IFs on them)."""
    if iu and ou:
        return False
    if iu and (in_t in ("int32", "int48") or out_t == "int32"):
        return False
    if ou and (in_t in ("int32", "int48") or out_t == "int32"):
        return False
    return True


def rescale_graph(shape, in_t, out_t, multiplier, shift, izp=0, ozp=0, scale32=True,
                  mode="SINGLE_ROUND", per_channel=False, iu=False, ou=False,
                  mul_t=None, shift_t="int8"):
    b = GraphBuilder()
    x = b.input(shape, in_t)
    m = b.const(np.atleast_1d(multiplier), mul_t or ("int32" if scale32 else "int16"))
    s = b.const(np.atleast_1d(shift), shift_t)
    # Zero points are values of the (signless) data type: unsigned ones go in as bits.
    zi = b.const([th.wrap(izp, in_t) if in_t != "int48" else izp], in_t)
    zo = b.const([th.wrap(ozp, out_t)], out_t)
    y = b.output(shape, out_t)
    b.op("RESCALE", [x, m, s, zi, zo], [y], scale32=scale32, rounding_mode=mode,
         per_channel=per_channel, input_unsigned=iu, output_unsigned=ou)
    return b


def random_rescale(rng, in_t, out_t, iu, ou, scale32, mode, per_channel):
    rank = int(rng.integers(1 if per_channel else 0, 4))
    shape = tuple(int(v) for v in rng.integers(1, 6, size=rank))
    nc = shape[-1] if per_channel else 1
    if iu:
        izp = int(rng.integers(0, 256)) if in_t == "int8" else int(rng.choice([0, 32768]))
    else:
        izp = int(rng.integers(-128, 128)) if in_t == "int8" else 0
    if ou:
        ozp = int(rng.integers(0, 256)) if out_t == "int8" else int(rng.choice([0, 32768]))
    else:
        ozp = int(rng.integers(-128, 128)) if out_t == "int8" else 0
    if scale32:
        multiplier = rng.integers(1 << 30, 1 << 31, size=nc)
        shift = rng.integers(2, 63, size=nc)
    else:
        multiplier = rng.integers(1 << 14, 1 << 15, size=nc)
        shift = rng.integers(2, 63, size=nc)
    # Input values: the data type's range, narrowed so the REQUIREs hold (apply_scale_32:
    # |value| < 2**(shift - 1); apply_scale_16: the result fits int32).
    lo, hi = INT_RANGES[("uint" + in_t[3:]) if iu else in_t]
    s_min = int(shift.min())
    if scale32:
        span = (1 << (s_min - 1)) - 1
    else:
        span = ((1 << 30) << s_min) // int(multiplier.max() + 1)
    lo, hi = max(lo, izp - span), min(hi, izp + span)
    x = rng.integers(lo, hi + 1, size=shape)
    x = th.wrap(x, in_t) if iu else x
    b = rescale_graph(shape, in_t, out_t, multiplier, shift, izp, ozp, scale32, mode,
                      per_channel, iu, ou)
    return b, [x]


def rescale_modes():
    for in_t in INS:
        for out_t in OUTS:
            for iu in (False, True):
                for ou in (False, True):
                    if legal(in_t, out_t, iu, ou):
                        yield in_t, out_t, iu, ou


@pytest.mark.parametrize("in_t,out_t,iu,ou", list(rescale_modes()),
                         ids=lambda v: str(v) if not isinstance(v, bool) else ("u" if v else "s"))
def test_rescale_random(in_t, out_t, iu, ou):
    rng = np.random.default_rng(sum(map(ord, f"{in_t}{out_t}{iu}{ou}")))
    for scale32 in ((False,) if in_t == "int48" else (True, False)):
        for mode in (("SINGLE_ROUND", "DOUBLE_ROUND") if scale32 else ("SINGLE_ROUND",)):
            for per_channel in (False, True):
                b, x = random_rescale(rng, in_t, out_t, iu, ou, scale32, mode, per_channel)
                check_against_reference(b, x, expect="VALID", forms=BOTH,
                                        label=f"scale32={scale32} {mode} pc={per_channel}")


def test_rescale_edges():
    """Shift and multiplier extremes, saturation, and DOUBLE_ROUND tie-breaking."""
    x32 = np.array([-(1 << 31), -(1 << 30) - 1, -3, -2, -1, 0, 1, 2, 3, (1 << 30) + 1,
                    (1 << 31) - 1])
    cases = [
        # scale 1.0 exactly (|value| < 2**29 for shift 30); full int32 range from shift 32
        (np.clip(x32, -(1 << 29), (1 << 29) - 1), "int32", "int32", 1 << 30, 30, True,
         "SINGLE_ROUND"),
        (x32, "int32", "int32", (1 << 31) - 1, 32, True, "DOUBLE_ROUND"),
        (x32, "int32", "int32", (1 << 31) - 1, 62, True, "SINGLE_ROUND"),
        (x32, "int32", "int8", (1 << 31) - 1, 62, True, "DOUBLE_ROUND"),
        (x32, "int32", "int16", 0, 40, True, "DOUBLE_ROUND"),
        # x / 2**k exactly half-way: single rounds up, double rounds away from zero
        (np.arange(-12, 13), "int32", "int32", 1 << 30, 32, True, "SINGLE_ROUND"),
        (np.arange(-12, 13), "int32", "int32", 1 << 30, 32, True, "DOUBLE_ROUND"),
        (np.arange(-12, 13), "int32", "int32", 1 << 30, 33, True, "DOUBLE_ROUND"),
        (np.arange(-12, 13), "int32", "int32", 1 << 30, 31, True, "DOUBLE_ROUND"),
        (np.arange(-2, 2), "int32", "int32", 1 << 30, 2, True, "SINGLE_ROUND"),
        # int16 multiplier extremes; int48 data at both ends of its range
        (np.array([-(1 << 47), -1, 0, 1, (1 << 47) - 1]), "int48", "int32", 32767, 62, False,
         "SINGLE_ROUND"),
        (np.array([-(1 << 47), (1 << 47) - 1, 12345678901]), "int48", "int16", 1 << 14, 40,
         False, "SINGLE_ROUND"),
        (np.array([-32768, -1, 0, 1, 32767]), "int16", "int8", 1, 2, False, "SINGLE_ROUND"),
    ]
    for x, in_t, out_t, mult, shift, scale32, mode in cases:
        b = rescale_graph(x.shape, in_t, out_t, mult, shift, scale32=scale32, mode=mode)
        check_against_reference(b, [x], expect="VALID", forms=BOTH,
                                label=f"{in_t}->{out_t} m={mult} s={shift} {mode}")


def test_rescale_unsigned_zero_points():
    """uint8 zero points anywhere in 0..255; uint16 zero point 32768 (int16 bits -32768)."""
    u8 = np.arange(0, 256, 15)
    u16 = np.array([0, 1, 32767, 32768, 32769, 65535])
    cases = [
        (th.wrap(u8, "int8"), "int8", "int8", 255, -128, True, False),    # uint8 -> int8
        (np.arange(-128, 128, 9), "int8", "int8", -128, 255, False, True),  # int8 -> uint8
        (th.wrap(u16, "int16"), "int16", "int16", 32768, 0, True, False),  # uint16 -> int16
        (np.array([-32768, -5, 0, 5, 32767]), "int16", "int16", 0, 32768, False, True),
        (th.wrap(u16, "int16"), "int16", "int8", 32768, 3, True, False),
    ]
    for x, in_t, out_t, izp, ozp, iu, ou in cases:
        b = rescale_graph(x.shape, in_t, out_t, 1 << 30, 30, izp, ozp, iu=iu, ou=ou)
        check_against_reference(b, [x], expect="VALID", forms=BOTH,
                                label=f"{in_t} u={iu} -> {out_t} u={ou}")


def test_rescale_draft_unsigned_types():
    """Draft graphs may type the data uint8/uint16 instead of setting the flags."""
    x = np.array([-128, -1, 0, 1, 127])            # bits of uint8 128, 255, 0, 1, 127
    b = rescale_graph(x.shape, "int8", "int16", 1 << 30, 31, izp=200, iu=True)
    ref = run_reference(b, [x])
    assert ref.status == "VALID"
    graph = draft_form(load_graph(ref.tosa))
    blk = graph.main
    op = next(o for o in blk.operators if o.op == "RESCALE")
    assert op.attrs["input_zp"] == -56  # the int8 bits of 200, read as unsigned below
    op.attrs["input_unsigned"] = False
    blk.tensors[op.inputs[0]].dtype = "uint8"
    status, ours = run_ours(graph, {b.inputs[0]: x.astype(np.int8).view(np.uint8)})
    assert status == "VALID", ours
    np.testing.assert_array_equal(ours[b.outputs[0]], ref.outputs[b.outputs[0]])


def test_rescale_inexact_round_is_single_round():
    """INEXACT_ROUND: ours is the exact single-rounded result (our implementation choice).

    The reference model computes INEXACT_ROUND in floating point; it may differ by one unit
    in the last place (and at ties, where it rounds to even), which conformance accepts.
    """
    rng = np.random.default_rng(7)
    x = rng.integers(-(1 << 20), 1 << 20, size=(4, 64))
    x[0, :25] = np.arange(-12, 13)  # ties
    for mult, shift in [((1 << 30) + 12345, 32), (1 << 30, 33), (1518500250, 40), (1 << 30, 30)]:
        single = rescale_graph(x.shape, "int32", "int32", mult, shift, mode="SINGLE_ROUND")
        expected = run_reference(single, [x])
        inexact = rescale_graph(x.shape, "int32", "int32", mult, shift, mode="INEXACT_ROUND")
        ref = run_reference(inexact, [x])
        assert expected.status == ref.status == "VALID"
        status, ours = run_ours(load_graph(ref.tosa), {inexact.inputs[0]: x.astype(np.int32)})
        assert status == "VALID", ours
        got = ours[inexact.outputs[0]].astype(np.int64)
        np.testing.assert_array_equal(got, expected.outputs[single.outputs[0]])
        assert np.abs(got - ref.outputs[inexact.outputs[0]]).max() <= 1


def _error_cases():
    x8 = ("int8", "int8")
    yield "ok", "VALID", dict(types=x8)
    yield "int16 input_zp", "ERROR", dict(types=("int16", "int8"), izp=1)
    yield "int32 output_zp", "ERROR", dict(types=("int8", "int32"), ozp=1)
    yield "uint16 input_zp", "ERROR", dict(types=("int16", "int8"), izp=1, iu=True)
    yield "uint16 output_zp", "ERROR", dict(types=("int8", "int16"), ozp=7, ou=True)
    yield "scale32 int48", "ERROR", dict(types=("int48", "int8"), scale32=True)
    yield "double_round !scale32", "ERROR", dict(types=x8, scale32=False, mode="DOUBLE_ROUND")
    yield "both unsigned", "ERROR", dict(types=x8, iu=True, ou=True)
    yield "int32 out, input_unsigned", "ERROR", dict(types=("int16", "int32"), iu=True)
    yield "int32 in, output_unsigned", "ERROR", dict(types=("int32", "int16"), ou=True)
    yield "int32 in unsigned", "ERROR", dict(types=("int32", "int8"), iu=True)
    yield "int32 out unsigned", "ERROR", dict(types=("int8", "int32"), ou=True)
    yield "int48 in unsigned", "ERROR", dict(types=("int48", "int8"), iu=True, scale32=False)
    yield "int48 out unsigned", "ERROR", dict(types=("int48", "int8"), ou=True, scale32=False)
    yield "per-channel size", "ERROR", dict(types=x8, per_channel=True, nc=3)
    yield "per-tensor size", "ERROR", dict(types=x8, nc=2)
    yield "bad types", "ERROR", dict(types=("int8", "int48"), scale32=False)
    # REQUIREs: unpredictable in both
    yield "shift 1", "UNPREDICTABLE", dict(types=("int32", "int32"), shift=1)
    yield "shift 63", "UNPREDICTABLE", dict(types=("int32", "int32"), shift=63)
    yield "negative multiplier", "UNPREDICTABLE", dict(types=("int32", "int32"), mult=-5)
    yield "value range", "UNPREDICTABLE", dict(types=("int32", "int32"), shift=10,
                                               x=[1 << 20])
    yield "scale16 overflow", "UNPREDICTABLE", dict(types=("int48", "int32"), scale32=False,
                                                    mult=32767, shift=2, x=[1 << 40])


@pytest.mark.parametrize("label,expect,case", list(_error_cases()),
                         ids=[c[0] for c in _error_cases()])
def test_rescale_error_if_and_require(label, expect, case):
    in_t, out_t = case["types"]
    scale32 = case.get("scale32", True)
    nc = case.get("nc", 4 if case.get("per_channel") else 1)
    x = np.array(case.get("x", [[1, -2, 3, 4]] * 2))
    mult = case.get("mult", (1 << 30) if scale32 else (1 << 14))
    shift = case.get("shift", 31 if scale32 else 15)
    b = rescale_graph(x.shape, in_t, out_t, [mult] * nc, [shift] * nc, case.get("izp", 0),
                      case.get("ozp", 0), scale32, case.get("mode", "SINGLE_ROUND"),
                      case.get("per_channel", False), case.get("iu", False),
                      case.get("ou", False), mul_t=case.get("mul_t"))
    check_against_reference(b, [x], expect=expect, forms=BOTH, label=label)


def test_rescale_multiplier_type_is_error():
    """An int16 multiplier tensor with scale32: ERROR_IF on the data types.

    (The official reference model aborts on this graph instead of reporting ERROR, so the
    expectation comes from the spec: multiplier is T<i32_t> when scale32 is set.)
    """
    b = rescale_graph((2, 4), "int8", "int8", [1 << 14], [31], mul_t="int16")
    status, err = run_ours(load_graph(b.serialize()), {b.inputs[0]: np.ones((2, 4), np.int8)})
    assert status == "ERROR" and "multiplier" in str(err)


# ---------------------------------------------------------------------------------------
CAST_TYPES = ("bool", "int8", "int16", "int32")


@pytest.mark.parametrize("in_t", CAST_TYPES)
@pytest.mark.parametrize("out_t", CAST_TYPES)
def test_cast(in_t, out_t):
    rng = np.random.default_rng(3)
    shape = (3, 17)
    if in_t == "bool":
        x = rng.integers(0, 2, size=shape).astype(bool)
    else:
        lo, hi = INT_RANGES[in_t]
        x = rng.integers(lo, hi + 1, size=shape)
        x[0, :6] = [lo, hi, 0, 1, -1, 256]  # extremes, zero, and a value that truncates to 0
        x = x.astype(np.int64)
        x = np.clip(x, lo, hi)
    b = GraphBuilder()
    xi = b.input(shape, in_t)
    b.op("CAST", [xi], [b.output(shape, out_t)])
    check_against_reference(b, [x], expect="ERROR" if in_t == out_t else "VALID")


def test_cast_shape_mismatch_is_error():
    b = GraphBuilder()
    xi = b.input((2, 3), "int8")
    b.op("CAST", [xi], [b.output((3, 2), "int16")])
    check_against_reference(b, [np.ones((2, 3))], expect="ERROR")
