"""Reference interpreter vs the official TOSA reference model: TABLE and CLAMP."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from oracle import (GraphBuilder, check_against_reference, clamp_bytes, draft_form,  # noqa: E402
                    load_graph, run_ours)

from tosa_ir import INT_RANGES  # noqa: E402

BOTH = ("1.0", "draft")


def table_graph(shape, in_t, table, table_t=None, out_t=None):
    b = GraphBuilder()
    x = b.input(shape, in_t)
    t = b.const(table, table_t or in_t)
    y = b.output(shape, out_t or ("int8" if in_t == "int8" else "int32"))
    b.op("TABLE", [x, t], [y])
    return b


def test_table_int8_all_inputs():
    rng = np.random.default_rng(1)
    table = rng.integers(-128, 128, size=256)
    x = np.arange(-128, 128).reshape(4, 64)
    check_against_reference(table_graph(x.shape, "int8", table), [x], expect="VALID",
                            forms=BOTH)


def test_table_int16_all_inputs():
    """Every int16 input (all 512 segments and all 128 fractions) on a smooth table."""
    i = np.arange(-256, 257)
    table = np.round(20000 * np.tanh(i / 64.0)).astype(np.int64)
    x = np.arange(-32768, 32768).reshape(256, 256)
    check_against_reference(table_graph(x.shape, "int16", table), [x], expect="VALID",
                            forms=BOTH)


def test_table_int16_random_tables():
    rng = np.random.default_rng(2)
    for case in range(4):
        # Random walk: neighbouring entries differ by less than 2**15 (slope REQUIRE).
        steps = rng.integers(-16000, 16001, size=512)
        table = np.clip(np.concatenate([[rng.integers(-32768, 32768)], steps]).cumsum(),
                        -32768, 32767)
        x = rng.integers(-32768, 32768, size=(3, 5, 7))
        x.flat[:4] = [-32768, 32767, 0, -1]
        check_against_reference(table_graph(x.shape, "int16", table), [x], expect="VALID",
                                forms=BOTH, label=f"case {case}")


def test_table_rank0():
    check_against_reference(table_graph((), "int8", np.arange(256) - 128), [np.array(-5)],
                            expect="VALID", forms=BOTH)


def test_table_slope_require():
    """table[i+1] - table[i] outside int16 (32767 - (-32768)): unpredictable when used."""
    table = np.zeros(513, dtype=np.int64)
    table[100], table[101] = -32768, 32767
    x_hit = np.array([(100 << 7) - 32768 + 5])   # index 100, fraction 5
    check_against_reference(table_graph(x_hit.shape, "int16", table), [x_hit],
                            expect="UNPREDICTABLE", forms=BOTH)
    x_miss = np.array([0, 1000, -20000])
    check_against_reference(table_graph(x_miss.shape, "int16", table), [x_miss],
                            expect="VALID", forms=BOTH)


@pytest.mark.parametrize("label,in_t,size,table_t,out_t,forms", [
    # The table length is an ERROR_IF in TOSA 1.0 but a REQUIRE in the draft spec.
    ("int8 size", "int8", 513, "int8", "int8", ("1.0",)),
    ("int16 size", "int16", 256, "int16", "int32", ("1.0",)),
    # A draft table attribute has no type of its own: 1.0 form only.
    ("table type", "int8", 256, "int16", "int8", ("1.0",)),
    ("int16 output type", "int16", 513, "int16", "int16", BOTH),
    ("int32 input", "int32", 513, "int16", "int32", BOTH),
])
def test_table_error_if(label, in_t, size, table_t, out_t, forms):
    b = table_graph((2, 3), in_t, np.zeros(size), table_t, out_t)
    check_against_reference(b, [np.zeros((2, 3))], expect="ERROR", forms=forms, label=label)


def test_table_must_be_rank_1():
    """table is [TABLE_SIZE] in the spec; the official reference model only counts
    elements and accepts a [2, 128] table, so this expectation is the spec's."""
    b = table_graph((2, 2), "int8", np.zeros((2, 128)))
    status, err = run_ours(load_graph(b.serialize()), {b.inputs[0]: np.zeros((2, 2), np.int8)})
    assert status == "ERROR" and "rank(table)" in str(err)


def test_table_size_is_require_in_draft_graphs():
    b = table_graph((2, 3), "int8", np.zeros(513))
    graph = draft_form(load_graph(b.serialize()))
    status, err = run_ours(graph, {b.inputs[0]: np.zeros((2, 3), np.int8)})
    assert status == "UNPREDICTABLE" and "TABLE_SIZE" in str(err)


# ---------------------------------------------------------------------------------------
def clamp_graph(shape, dtype, lo, hi):
    b = GraphBuilder()
    x = b.input(shape, dtype)
    b.op("CLAMP", [x], [b.output(shape, dtype)], min_val=clamp_bytes(lo, dtype),
         max_val=clamp_bytes(hi, dtype))
    return b


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_clamp(dtype):
    rng = np.random.default_rng(3)
    tlo, thi = INT_RANGES[dtype]
    for lo, hi in [(tlo, thi), (0, thi), (tlo, 0), (-7, -7), (-3, 100), (thi, thi)]:
        x = rng.integers(tlo, thi + 1, size=(2, 3, 11))
        x.flat[:2] = [tlo, thi]
        check_against_reference(clamp_graph(x.shape, dtype, lo, hi), [x], expect="VALID",
                                forms=BOTH, label=f"[{lo}, {hi}]")


def test_clamp_error_if():
    check_against_reference(clamp_graph((4,), "int8", 5, 4), [np.arange(4)], expect="ERROR",
                            forms=BOTH)
    b = GraphBuilder()
    x = b.input((4,), "int8")
    b.op("CLAMP", [x], [b.output((4,), "int16")], min_val=clamp_bytes(0, "int8"),
         max_val=clamp_bytes(5, "int8"))
    check_against_reference(b, [np.arange(4)], expect="ERROR", forms=BOTH, label="out type")
