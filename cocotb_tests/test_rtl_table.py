"""The TABLE unit's RTL (hw/table.py) against the ISA simulator (sim/isa/table.py, itself
checked against the reference interpreter's TABLE in tests/test_isa_table.py): whole
programs (DMA the table in, TABLE LOAD, DMA the inputs, TABLE, DMA out, in a LOOP) where
every external-memory byte, every scratchpad row, CYCLES and the busy counters must agree,
and the outputs must be the reference's; loops and strides; error stops."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, make
from isa.instructions import ErrorCode, TableMode, VecMem

from cocotb_tests.rtl_harness import lockstep

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from table_programs import (extreme_table, lookup_waived, random_walk_table, reference_table,  # noqa: E402
                            table_program)

CFG = SMALL_CONFIG
ASRAM, ACC = int(VecMem.ASRAM), int(VecMem.ACC)
LOAD, INT8, INT16 = int(TableMode.LOAD), int(TableMode.INT8), int(TableMode.INT16)




def test_int8_every_input_tables(small_rtl):
    """All 256 int8 inputs, three random tables (each installed by its own program), from
    ASRAM and from ACC, the third at a non-zero t_addr."""
    for seed, a_mem, t_addr in ((1, ASRAM, 0), (2, ACC, 0), (3, ASRAM, 9)):
        rng = np.random.default_rng(seed)
        table = rng.integers(-128, 128, size=256)
        table[[0, 255]] = [-128, 127]
        x = np.arange(-128, 128)
        rng.shuffle(x)
        instrs, mem, read = table_program(CFG, INT8, table, x, chunk=16, a_mem=a_mem, t_addr=t_addr)
        rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
        np.testing.assert_array_equal(read(rtl.memory), reference_table(x.astype(np.int8), table, "int8"))


@pytest.mark.parametrize("kind", ["walk", "extreme"])
def test_int16_tables_small(small_rtl, kind):
    """Random int16 inputs (with -32768, 32767: idx 0 and idx 511 with the 513th entry)
    on a random-walk table and on one of -32768/32767 entries (slopes +-65535)."""
    rng = np.random.default_rng({"walk": 4, "extreme": 5}[kind])
    table = random_walk_table(rng) if kind == "walk" else extreme_table(rng)
    x = rng.integers(-32768, 32768, size=3000)
    x[:8] = [-32768, -32767, -32641, -1, 0, 32639, 32640, 32767]
    instrs, mem, read = table_program(CFG, INT16, table, x, chunk=100)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    got = read(rtl.memory)
    if kind == "walk":
        np.testing.assert_array_equal(got, reference_table(x.astype(np.int16), table, "int16"))
    else:
        np.testing.assert_array_equal(got, lookup_waived(table, x))


def test_int16_from_acc_small(small_rtl):
    rng = np.random.default_rng(6)
    table = random_walk_table(rng)
    x = rng.integers(-32768, 32768, size=1000)
    instrs, mem, read = table_program(CFG, INT16, table, x, chunk=50, a_mem=ACC)
    rtl, _ = lockstep(small_rtl, CFG, instrs, mem)
    np.testing.assert_array_equal(read(rtl.memory), reference_table(x.astype(np.int16), table, "int16"))


def random_lookup(rng, cfg):
    """A legal TABLE lookup with random loops, strides and memories (rows in ranges that
    keep it inside its memories and away from the int8 table at TSRAM row 0)."""
    mode = int(rng.choice([INT8, INT16]))
    a_mem, d_mem = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    R = 2 if (mode == INT16 and a_mem == ASRAM) else 1
    W = 4 if (mode == INT16 and d_mem == ASRAM) else 1
    n0, n1 = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    s0 = lambda rows: int(rng.choice([rows, rows + 1, 0, 2 * rows]))  # noqa: E731
    as0, ds0 = s0(R), W * int(rng.integers(1, 3))
    as1, ds1 = n0 * max(as0, R) + int(rng.integers(0, 3)), n0 * ds0 + int(rng.integers(0, 3))
    a_span = (n1 - 1) * as1 + (n0 - 1) * as0 + R
    d_span = (n1 - 1) * ds1 + (n0 - 1) * ds0 + W
    a_lim = (cfg.asram_rows // 2 if a_mem == ASRAM else cfg.acc_rows // 2) - a_span
    d_lo = cfg.asram_rows // 2 if d_mem == ASRAM else cfg.acc_rows // 2
    d_lim = (cfg.asram_rows if d_mem == ASRAM else cfg.acc_rows) - d_span
    return make("TABLE", mode=mode, n0=n0, n1=n1, a_mem=a_mem, a_addr=int(rng.integers(0, a_lim)),
                a_stride0=as0, a_stride1=as1, d_mem=d_mem, d_addr=int(rng.integers(d_lo, d_lim)),
                d_stride0=ds0, d_stride1=ds1, t_addr=0)


def test_random_loops_and_strides(small_rtl):
    """Random lookups (both modes, ASRAM/ACC in and out, strides including 0 and overlapping
    rows) on random scratchpads and a random TSRAM, with zero-count lookups mixed in; the
    ISA simulator and the RTL must agree on every scratchpad row."""
    rng = np.random.default_rng(7)
    cfg = CFG
    bus = cfg.bus_bytes
    mem = bytearray(rng.integers(0, 256, size=64 * 1024, dtype=np.uint8).tobytes())
    tsram_rows = 2048 // bus
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=16384, len0=cfg.asram_rows, len1=1, len2=1),
        make("TABLE", wait=1, mode=LOAD, n0=tsram_rows // 2, n1=2, a_mem=ASRAM, a_addr=3, a_stride0=1,
             a_stride1=tsram_rows // 2 + 1),
        # random ACC contents: VALU COPY of random ASRAM rows (as INT32)
        make("VALU", wait=1, op=24, dtype=2, n0=cfg.acc_rows, n1=1, a_mem=ASRAM, a_addr=0, a_stride0=4,
             d_mem=ACC, d_addr=0, d_stride0=1),
    ]
    for k in range(60):
        instrs.append(random_lookup(rng, cfg) if k % 10 else make("TABLE", mode=INT16, n0=0, n1=3))
    instrs += [
        make("DMA_STORE", wait=4, sram=0, sram_addr=0, ext_addr=32768, len0=cfg.asram_rows, len1=1, len2=1),
        make("HALT", wait=7),
    ]
    lockstep(small_rtl, cfg, instrs, mem)


ERRORS = {
    "mode3": dict(mode=3, n0=1, n1=1),
    "load_from_acc": dict(mode=LOAD, n0=1, n1=1, a_mem=ACC),
    "a_mem_psram": dict(mode=INT8, n0=1, n1=1, a_mem=2),
    "int16_t_addr": dict(mode=INT16, n0=1, n1=1, t_addr=1),
    "int8_table_end": dict(mode=INT8, n0=1, n1=1, t_addr=2048 // 4 - 256 // 4 + 1),
    "load_past_tsram": dict(mode=LOAD, n0=2, n1=1, a_stride0=1, t_addr=2048 // 4 - 1),
    "input_rows": dict(mode=INT16, n0=1, n1=1, a_addr=SMALL_CONFIG.asram_rows - 1),
    "output_rows": dict(mode=INT16, n0=2, n1=1, d_addr=SMALL_CONFIG.asram_rows - 7, d_stride0=4),
    "acc_output": dict(mode=INT8, n0=2, n1=2, d_mem=ACC, d_addr=SMALL_CONFIG.acc_rows - 3, d_stride0=1,
                       d_stride1=2),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_stop_like_isa_sim(small_rtl, case):
    """An erroneous TABLE after some work stops the NPU with the ISA simulator's code, at
    its index, after the earlier work completed."""
    cfg = CFG
    mem = bytearray(np.random.default_rng(8).integers(0, 256, size=16384, dtype=np.uint8).tobytes())
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=4096, len0=64, len1=1, len2=1),
        make("TABLE", wait=1, mode=LOAD, n0=64, n1=1, a_mem=ASRAM, a_stride0=1),
        make("TABLE", mode=INT8, n0=8, n1=1, a_mem=ASRAM, a_stride0=1, d_addr=100, d_stride0=1),
        make("TABLE", **ERRORS[case]),
        make("DMA_STORE", sram=0, sram_addr=0, ext_addr=8192, len0=8, len1=1, len2=1),
        make("HALT"),
    ]
    rtl, ref = lockstep(small_rtl, cfg, instrs, mem, expect=None)
    assert ref.error_pc == 3 and ref.error_code != ErrorCode.NONE


def test_int16_every_input_default(default_rtl):
    """All 65536 int16 inputs on the 16x16 machine (4 chunks of 1024 vectors)."""
    rng = np.random.default_rng(9)
    table = random_walk_table(rng)
    x = np.arange(-32768, 32768)
    instrs, mem, read = table_program(DEFAULT_CONFIG, INT16, table, x, chunk=1024)
    rtl, _ = lockstep(default_rtl, DEFAULT_CONFIG, instrs, mem)
    np.testing.assert_array_equal(read(rtl.memory), reference_table(x.astype(np.int16), table, "int16"))
