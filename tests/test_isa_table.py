"""TABLE in the ISA simulator (sim/isa/table.py) against our reference interpreter's TABLE
(sim/reference, checked against the official TOSA reference model in tests/test_ref_table.py)
and, where the spec's slope REQUIRE fails, against sim/tosa_helpers.apply_lookup_s with the
REQUIRE waived (the instruction defines that case by the same formula).  Whole programs
(DMA, TABLE LOAD, lookups in a LOOP, DMA out: tests/table_programs.py) and single
instructions on a random machine state (loops, strides, memories, every error)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, ErrorCode, make
from isa.asm import assemble, disassemble_one
from isa.encoding import decode, encode, encode_program
from isa.instructions import TSRAM_BYTES, TableMode
from isa.program import Program
from sim.isa.sim import IsaSim
from sim.isa.executors import EXECUTORS
from sim.isa.units import NpuState, Trap
from sim.npu_timing import TimingModel

sys.path.insert(0, os.path.dirname(__file__))
from table_programs import (extreme_table, lookup_waived, random_walk_table, reference_table,  # noqa: E402
                            table_program)

CFG = SMALL_CONFIG
ASRAM, ACC, PSRAM = 0, 1, 2
LOAD, INT8, INT16 = int(TableMode.LOAD), int(TableMode.INT8), int(TableMode.INT16)


def run_whole(cfg, mode, table, x, chunk, **kw) -> tuple[np.ndarray, object]:
    instrs, memory, read = table_program(cfg, mode, table, x, chunk, **kw)
    image = encode_program(instrs)
    memory[:len(image)] = image
    result = IsaSim(cfg, check_hazards=True).run(Program(cfg, instrs), bytes(memory))
    assert result.ok, result.error_message
    assert not result.hazards, result.hazards[0]
    return read(result.memory), result


# -- whole programs, every input ------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_int8_every_input_programs(seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(-128, 128, size=256)
    table[[0, 255]] = [-128, 127]
    x = np.arange(-128, 128)
    rng.shuffle(x)
    got, _ = run_whole(CFG, INT8, table, x, chunk=16)
    np.testing.assert_array_equal(got, reference_table(x.astype(np.int8), table, "int8"))


def test_int8_from_acc_and_t_addr():
    """Inputs in ACC (low 8 bits of each int32 lane), a table installed at a non-zero row."""
    rng = np.random.default_rng(4)
    table = rng.integers(-128, 128, size=256)
    x = np.arange(-128, 128)
    got, _ = run_whole(CFG, INT8, table, x, chunk=32, a_mem=ACC, t_addr=5)
    np.testing.assert_array_equal(got, reference_table(x.astype(np.int8), table, "int8"))


@pytest.mark.parametrize("kind", ["walk", "tanh", "small_steps"])
def test_int16_every_input_programs(kind):
    """All 65536 int16 inputs through DMA, TABLE LOAD, TABLE and DMA on the 16x16 machine."""
    rng = np.random.default_rng({"walk": 5, "tanh": 6, "small_steps": 7}[kind])
    if kind == "walk":
        table = random_walk_table(rng)
    elif kind == "tanh":
        table = np.round(32767 * np.tanh(np.arange(-256, 257) / 48.0)).astype(np.int64)
    else:
        table = random_walk_table(rng, step=300)
    x = np.arange(-32768, 32768)
    got, result = run_whole(DEFAULT_CONFIG, INT16, table, x, chunk=1024)
    np.testing.assert_array_equal(got, reference_table(x.astype(np.int16), table, "int16"))
    assert result.cycles > 4096 * 4      # 4096 vectors of 4 write cycles at least


def test_int16_extreme_tables_every_input():
    """Slopes of +-65535 (outside the spec's REQUIRE): the instruction still computes
    (base << 7) + slope * frac exactly, reaching the int32 extremes of the formula."""
    rng = np.random.default_rng(8)
    table = extreme_table(rng)
    x = np.arange(-32768, 32768)
    got, _ = run_whole(DEFAULT_CONFIG, INT16, table, x, chunk=2048)
    want = lookup_waived(table, x)
    np.testing.assert_array_equal(got, want)
    assert (want.min(), want.max()) == (-32768 * 128, 32767 * 128)
    assert {-32768 * 128 + 65535 * 127, 32767 * 128 - 65535 * 127} <= set(want.tolist())
    # idx 511 and the 513th entry: x = 32767 interpolates from table[511] towards table[512]
    assert got[-1] == (table[511] << 7) + (table[512] - table[511]) * 127


def test_int16_from_acc_small():
    rng = np.random.default_rng(9)
    table = random_walk_table(rng)
    x = rng.integers(-32768, 32768, size=2000)
    x[:6] = [-32768, -32767, -1, 0, 32766, 32767]
    got, _ = run_whole(CFG, INT16, table, x, chunk=64, a_mem=ACC)
    np.testing.assert_array_equal(got, reference_table(x.astype(np.int16), table, "int16"))


# -- single instructions on a random state ---------------------------------------------------
def random_state(rng, cfg=CFG) -> NpuState:
    st = NpuState(cfg, b"")
    st.asram[:] = rng.integers(0, 256, st.asram.shape)
    st.acc[:] = rng.integers(-2**31, 2**31, st.acc.shape)
    st.tsram[:] = rng.integers(0, 256, st.tsram.shape)
    return st


def execute(st: NpuState, **fields):
    return EXECUTORS["TABLE"](st, make("TABLE", **fields).values)


def snapshot(st):
    return st.asram.copy(), st.acc.copy(), st.tsram.copy()


def test_load_strided_rows():
    rng = np.random.default_rng(10)
    st = random_state(rng)
    before = st.tsram.copy()
    execute(st, mode=LOAD, n0=3, n1=4, a_mem=ASRAM, a_addr=100, a_stride0=2, a_stride1=11, t_addr=7)
    bus = CFG.bus_bytes
    rows = [100 + i1 * 11 + i0 * 2 for i1 in range(4) for i0 in range(3)]
    want = before.copy()
    want[7 * bus:(7 + 12) * bus] = st.asram[rows].ravel()
    np.testing.assert_array_equal(st.tsram, want)


@pytest.mark.parametrize("mode,d_mem", [(INT8, ASRAM), (INT8, ACC), (INT16, ASRAM), (INT16, ACC)])
def test_lookup_loops_strides_and_memories(mode, d_mem):
    """n0/n1 loops with strides, inputs and outputs in ASRAM or ACC; rows not written keep
    their values; each lane looks up its own element (per-lane lookups are independent)."""
    rng = np.random.default_rng(11 + mode + 2 * d_mem)
    for a_mem in (ASRAM, ACC):
        st = random_state(rng)
        asram0, acc0, _ = snapshot(st)
        t8 = st.tsram[:256].view(np.int8).astype(np.int64)
        pairs = st.tsram.view("<i2").reshape(512, 2).astype(np.int64)
        R = 1 if (mode == INT8 or a_mem == ACC) else 2
        W = 1 if (mode == INT8 or d_mem == ACC) else 4
        n0, n1, as0, as1, ds0, ds1 = 3, 2, R + 1, 9, W, 3 * W + 2
        a_addr, d_addr = 10, 120
        execute(st, mode=mode, n0=n0, n1=n1, a_mem=a_mem, a_addr=a_addr, a_stride0=as0, a_stride1=as1,
                d_mem=d_mem, d_addr=d_addr, d_stride0=ds0, d_stride1=ds1, t_addr=0)
        written = set()
        for i1 in range(n1):
            for i0 in range(n0):
                ar = a_addr + i1 * as1 + i0 * as0
                if a_mem == ASRAM:
                    raw = asram0[ar:ar + R].ravel()
                    x = raw.view(np.int8) if mode == INT8 else raw.view("<i2")
                else:
                    x = acc0[ar].astype(np.int8 if mode == INT8 else np.int16)
                x = x.astype(np.int64)
                if mode == INT8:
                    y = t8[x + 128]
                else:
                    i, f = (x + 32768) >> 7, x & 127
                    y = (pairs[i, 0] << 7) + (pairs[i, 1] - pairs[i, 0]) * f
                dr = d_addr + i1 * ds1 + i0 * ds0
                if d_mem == ACC:
                    np.testing.assert_array_equal(st.acc[dr], y)
                    written.add(("acc", dr))
                else:
                    dt = np.int8 if mode == INT8 else "<i4"
                    np.testing.assert_array_equal(st.asram[dr:dr + W].ravel().view(dt), y)
                    written.update(("asram", r) for r in range(dr, dr + W))
        for r in range(CFG.asram_rows):
            if ("asram", r) not in written:
                np.testing.assert_array_equal(st.asram[r], asram0[r])
        for r in range(CFG.acc_rows):
            if ("acc", r) not in written:
                np.testing.assert_array_equal(st.acc[r], acc0[r])


# -- errors -----------------------------------------------------------------------------------
def expect_trap(st, code, **fields):
    before = snapshot(st)
    with pytest.raises(Trap) as info:
        execute(st, **fields)
    assert info.value.code == code, str(info.value)
    for a, b in zip(before, snapshot(st)):
        np.testing.assert_array_equal(a, b)


def test_errors():
    rng = np.random.default_rng(12)
    st = random_state(rng)
    E = ErrorCode
    bus, tsram_rows = CFG.bus_bytes, TSRAM_BYTES // CFG.bus_bytes
    base = dict(n0=2, n1=1, a_mem=ASRAM, a_addr=0, a_stride0=2, d_mem=ASRAM, d_addr=100, d_stride0=4)
    expect_trap(st, E.ILLEGAL_INSTRUCTION, **{**base, "mode": 3})
    expect_trap(st, E.ILLEGAL_INSTRUCTION, **{**base, "mode": INT8, "a_mem": PSRAM})
    expect_trap(st, E.ILLEGAL_INSTRUCTION, **{**base, "mode": INT16, "a_mem": 3})
    expect_trap(st, E.ILLEGAL_INSTRUCTION, **{**base, "mode": LOAD, "a_mem": ACC})
    # illegal values trap even when nothing would be touched
    expect_trap(st, E.ILLEGAL_INSTRUCTION, **{**base, "mode": 3, "n0": 0})
    # input rows: INT16 reads 2 rows per vector in ASRAM
    last = CFG.asram_rows - 1
    execute(st, **{**base, "mode": INT16, "a_addr": last - 3})       # rows last-3 .. last: fits
    expect_trap(st, E.SRAM_OVERFLOW, **{**base, "mode": INT16, "a_addr": last - 2})
    expect_trap(st, E.SRAM_OVERFLOW, **{**base, "mode": INT8, "a_mem": ACC, "a_addr": CFG.acc_rows - 1})
    # output rows: INT16 writes 4 ASRAM rows per vector, 1 ACC row
    execute(st, **{**base, "mode": INT16, "d_addr": CFG.asram_rows - 8})
    expect_trap(st, E.SRAM_OVERFLOW, **{**base, "mode": INT16, "d_addr": CFG.asram_rows - 7})
    execute(st, **{**base, "mode": INT16, "d_mem": ACC, "d_addr": CFG.acc_rows - 2, "d_stride0": 1})
    expect_trap(st, E.SRAM_OVERFLOW, **{**base, "mode": INT16, "d_mem": ACC, "d_addr": CFG.acc_rows - 1,
                                        "d_stride0": 1})
    # the table: INT16 needs all of TSRAM (t_addr 0), INT8 256 bytes from t_addr
    expect_trap(st, E.SRAM_OVERFLOW, **{**base, "mode": INT16, "t_addr": 1})
    execute(st, **{**base, "mode": INT8, "t_addr": tsram_rows - 256 // bus})
    expect_trap(st, E.SRAM_OVERFLOW, **{**base, "mode": INT8, "t_addr": tsram_rows - 256 // bus + 1})
    # LOAD: rows written
    execute(st, mode=LOAD, n0=4, n1=1, a_mem=ASRAM, a_stride0=1, t_addr=tsram_rows - 4)
    expect_trap(st, E.SRAM_OVERFLOW, mode=LOAD, n0=4, n1=1, a_mem=ASRAM, a_stride0=1, t_addr=tsram_rows - 3)
    expect_trap(st, E.SRAM_OVERFLOW, mode=LOAD, n0=2, n1=1, a_mem=ASRAM, a_addr=last, a_stride0=1)
    # LOAD ignores the d_* fields entirely
    execute(st, mode=LOAD, n0=1, n1=1, a_mem=ASRAM, d_mem=ACC, d_addr=65535, d_stride0=65535)
    # n0*n1 == 0: nothing touched, nothing checked but the enums
    before = snapshot(st)
    for mode in (LOAD, INT8, INT16):
        execute(st, mode=mode, n0=0, n1=5, a_mem=ASRAM, a_addr=65535, d_addr=65535, t_addr=4095)
    for a, b in zip(before, snapshot(st)):
        np.testing.assert_array_equal(a, b)


def test_errors_through_isa_sim():
    """An illegal TABLE stops the program at its index with nothing after it done."""
    instrs = [make("TABLE", mode=INT16, n0=1, n1=1, a_mem=ASRAM, t_addr=1), make("HALT")]
    result = IsaSim(CFG).run(Program(CFG, instrs), encode_program(instrs))
    assert (result.error_code, result.error_pc) == (ErrorCode.SRAM_OVERFLOW, 0)


# -- encoding and timing ------------------------------------------------------------------------
def test_asm_round_trip():
    instr = make("TABLE", wait=5, mode=INT16, n0=7, n1=3, a_mem=ACC, a_addr=12, a_stride0=1, a_stride1=9,
                 d_mem=ASRAM, d_addr=300, d_stride0=4, d_stride1=40, t_addr=0)
    assert decode(encode(instr)).values == instr.values
    text = disassemble_one(instr)
    assert text.startswith("TABLE")
    assert assemble(text)[0].values == instr.values


@pytest.mark.parametrize("mode,a_mem,d_mem,P", [(INT8, ASRAM, ASRAM, 1), (INT16, ASRAM, ASRAM, 4),
                                                (INT16, ACC, ACC, 1), (INT16, ASRAM, ACC, 2), (LOAD, ASRAM, ASRAM, 1)])
def test_busy_cycles(mode, a_mem, d_mem, P):
    """Busy = (N-1)*P + R + W + 4 (isa/vector.py): P = max(R, W) cycles per vector, the
    writes of a vector five cycles (TABLE_WRITE_LATENCY) after its last read."""
    instr = make("TABLE", mode=mode, n0=5, n1=3, a_mem=a_mem, a_stride0=2, d_mem=d_mem, d_stride0=4)
    R = 2 if (mode == INT16 and a_mem == ASRAM) else 1
    W = {INT8: 1, LOAD: 1}.get(mode, 4 if d_mem == ASRAM else 1)
    assert max(R, W) == P
    assert TimingModel(CFG).duration(instr) == 14 * P + R + W + 4
    assert TimingModel(CFG).duration(make("TABLE", mode=mode, n0=0, n1=3)) == 0


def test_error_codes_match_doc_rules_on_random_instructions():
    """Constrained-random TABLEs (fields near the memory limits, every enum value, negative
    effective addresses as inside LOOPs): the simulator traps exactly as the doc's rules,
    written out independently in tests/test_hw_checker.py (which holds the hardware
    checker to the same rules)."""
    from test_hw_checker import random_instruction, table_expected_code

    rng = np.random.default_rng(13)
    st = NpuState(CFG, b"")
    seen = set()
    for _ in range(4000):
        instr = random_instruction(rng, CFG)
        if instr.name != "TABLE":
            continue
        v = dict(instr.values)
        if rng.random() < 0.2:
            v["a_addr"] -= int(rng.integers(1, 8))
        want = table_expected_code(CFG, v)
        try:
            EXECUTORS["TABLE"](st, v)
            got = ErrorCode.NONE
        except Trap as t:
            got = t.code
        assert got == want, (v, got, want)
        seen.add(want)
    assert seen == {ErrorCode.NONE, ErrorCode.ILLEGAL_INSTRUCTION, ErrorCode.SRAM_OVERFLOW}
