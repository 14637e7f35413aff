"""RTL simulation speed and ISA-simulator/RTL cycle agreement (the 16x16 default NPU).

Runs the long MATMUL-bound, VPU-bound and TABLE-bound programs of hw/harness/workloads.py, and
(unless quick) the bundled AlexNet and MobileNetV2 whole, on the Verilator model and on
the ISA simulator, and reports the simulated cycles per second of wall time of each (the RTL's
simulation only, process start-up excluded; the ISA simulator's whole ``run``) and whether
the cycle counts and memories agree.
"""
from __future__ import annotations

import time

from bench.report import BenchContext, Column, Table
from isa import DEFAULT_CONFIG
from isa.program import Program

DESCRIPTION = "RTL (Verilator) simulation speed and its cycle agreement with the ISA simulator"
# bundled networks run whole (built on first use, as `make sim MODEL=...` does)
NETWORKS = ("alexnet", "mobilenetv2")


def _network(name: str) -> tuple[Program, bytes]:
    """Bundled network ``name`` compiled for the default NPU, and its memory image with the
    bundled input."""
    from npu import backends
    from npu.demo import find_model

    model_path, input_path = find_model(name)
    model = backends.load_model(str(model_path))
    program = backends.compile_model(model, DEFAULT_CONFIG)
    return program, bytes(program.memory_image(backends.load_inputs(input_path, model)))


def _row(label: str, program: Program, memory: bytes, build_dir) -> tuple:
    """One row of the table: ``program`` on the RTL and on the ISA simulator, from ``memory``."""
    from hw.harness.simulation import run_program
    from sim.isa.sim import IsaSim

    rtl = run_program(program, memory, build_dir=build_dir)
    t = time.perf_counter()
    isa = IsaSim(program.config).run(program, memory)
    isa_seconds = time.perf_counter() - t
    same = rtl.cycles == isa.cycles and bytes(rtl.memory) == bytes(isa.memory)[:len(rtl.memory)]
    return (label, rtl.cycles / 1e3, rtl.wall_seconds, rtl.cycles_per_second / 1e3, isa.cycles / 1e3,
            isa_seconds, isa.cycles / isa_seconds / 1e3, "equal cycles and memory" if same else "DIFFERENT")


def run(ctx: BenchContext) -> list[Table]:
    from hw.harness.workloads import long_program, table_program, vector_program, workload_memory
    from hw.harness.simulation import build

    config = DEFAULT_CONFIG
    table = Table("rtl", f"RTL simulation speed ({config.array_rows}x{config.array_cols} NPU, Verilator)",
                  [Column("program"), Column("cycles", "k", ".0f"), Column("RTL", "s", ".2f"),
                   Column("RTL speed", "k cycles/s", ".0f"), Column("ISA sim cycles", "k", ".0f"),
                   Column("ISA sim", "s", ".2f"), Column("ISA sim speed", "k cycles/s", ".0f"),
                   Column("agreement")])
    t = time.perf_counter()
    build_dir = build(config)
    table.notes.append(f"model build (or cache lookup): {time.perf_counter() - t:.1f} s")
    reps = 100 if ctx.quick else 1000
    for label, make_program in (("MATMUL-bound (DMA streaming alongside)", long_program),
                                ("VPU-bound (VALU, VRESCALE, VPOOL)", vector_program),
                                ("TABLE-bound (int16 interpolated lookups)", table_program)):
        ctx.log(f"[rtl] {label}")
        program = Program(config, make_program(config, reps if make_program is long_program else reps // 10))
        table.add(*_row(label, program, workload_memory(program), build_dir))
    if not ctx.quick:
        for name in NETWORKS:
            ctx.log(f"[rtl] {name}")
            table.add(*_row(f"{name} (whole network)", *_network(name), build_dir))
    table.notes.append("target for the whole NPU (RTL): >= 1M cycles/s; see PERFORMANCE.md, RTL simulation speed")
    table.notes.append("RTL s: the simulation from the start to the NPU's stop (the memory image's load and dump, "
                       "tens of MB of hex for a network, are the harness's I/O and excluded)")
    return [table]
