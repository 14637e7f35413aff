"""Compiler scheduler: wait masks and ordering on hand-made instruction sequences, and
the per-layer estimate against the RTL's cycle model."""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, build_chain  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from isa.instructions import Sram  # noqa: E402
from compiler.driver import run_pipeline  # noqa: E402
from compiler.estimate.layers import estimate_compilation  # noqa: E402
from compiler.core.ops import new_op  # noqa: E402
from compiler.program.schedule import schedule  # noqa: E402
from sim.isa.sim import run_program  # noqa: E402

CFG = SMALL_CONFIG
DMA, MXU, VPU = 1, 2, 4


def load(asram, rows, ext=0):
    return new_op(CFG, 0, "DMA_LOAD", sram=Sram.ASRAM, sram_addr=asram, ext_addr=ext, len0=rows, len1=1, len2=1)


def matmul(a_addr, n, acc=0, accumulate=0):
    return new_op(CFG, 0, "MATMUL", a_addr=a_addr, a_stride0=1, n0=n, n1=1, acc_addr=acc,
                  accumulate=accumulate)


def act(acc, n, dst):
    return new_op(CFG, 0, "ACT", acc_addr=acc, count=n, dst_addr=dst)


def store(asram, rows, ext=4096):
    return new_op(CFG, 0, "DMA_STORE", sram=Sram.ASRAM, sram_addr=asram, ext_addr=ext, len0=rows, len1=1, len2=1)


def waits(ops):
    return [(op.instr.name, op.instr.values["wait"]) for op in schedule(ops).ops]


def test_consumers_wait_for_producers():
    # load -> matmul (RAW on ASRAM) -> act (RAW on ACC) -> store (RAW on ASRAM)
    got = waits([load(0, 8), matmul(0, 8), act(0, 8, 100), store(100, 8)])
    assert got == [("DMA_LOAD", 0), ("MATMUL", DMA), ("ACT", MXU), ("DMA_STORE", VPU), ("HALT", 0)]


def test_same_unit_and_independent_work_need_no_wait():
    # The second matmul reads what the first load wrote, but the first matmul already
    # waited for the DMA, and nothing else was loaded since: no wait.
    got = waits([load(0, 8), matmul(0, 4), matmul(4, 4, acc=4), act(0, 8, 100)])
    assert got == [("DMA_LOAD", 0), ("MATMUL", DMA), ("MATMUL", 0), ("ACT", MXU), ("HALT", 0)]


def test_overwriting_what_another_unit_reads_waits_for_it():
    # WAR: the second load overwrites the rows the matmul reads.
    got = waits([load(0, 8), matmul(0, 8), load(0, 8, ext=64)])
    assert got[2] == ("DMA_LOAD", MXU)
    # WAR on ACC: a matmul overwriting accumulators an ACT still reads.
    got = waits([load(0, 8), matmul(0, 8), act(0, 8, 100), matmul(0, 8)])
    assert got[3] == ("MATMUL", VPU)


def test_knowledge_is_transitive():
    # The store waited for the VPU, whose ACT had waited for the MXU: the later load over
    # the matmul's input needs no wait of its own.
    got = waits([load(0, 8), matmul(0, 8), act(0, 8, 100), store(100, 8), load(0, 8, ext=64)])
    assert got[4] == ("DMA_LOAD", 0)


def test_loads_are_hoisted_over_compute_they_do_not_delay():
    ops = [load(0, 8), matmul(0, 8), matmul(0, 8, acc=8), load(200, 8, ext=64)]
    order = [(op.instr.name, op.instr.values["sram_addr"] if op.instr.name == "DMA_LOAD" else None)
             for op in schedule(ops).ops]
    assert order == [("DMA_LOAD", 0), ("MATMUL", None), ("DMA_LOAD", 200), ("MATMUL", None), ("HALT", None)]


def test_medium_conv_estimate_matches_the_rtl_cycle_model():
    rng = np.random.default_rng(2)
    graph = build_chain(rng, (1, 28, 28, 32), [ConvSpec(oc=48, kernel=(3, 3))])
    comp = run_pipeline(graph, DEFAULT_CONFIG)
    est = estimate_compilation(comp)
    x = rng.integers(-128, 128, (1, 28, 28, 32), dtype=np.int8)
    _, result = run_program(comp.program, {"x": x})
    assert est.source == "npu_timing"
    assert est.total_cycles == result.cycles
    (layer,) = est.layers
    assert layer.macs == 28 * 28 * 48 * 9 * 32
    names = [i.name for i in comp.program.instructions]
    assert layer.instructions["MATMUL"] == names.count("MATMUL")
    # The MXU does one MAC per lane per cycle at best.
    assert 0 < est.utilisation(layer) <= 1
    assert layer.cycles * DEFAULT_CONFIG.macs_per_cycle >= layer.array_macs
    assert "conv0" in est.table() and "total" in est.table()
