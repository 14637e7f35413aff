"""Benchmark: speed of the ISA simulator (sim/isa/sim.py) on long programs.

Workloads, each as long as the instruction memory allows (DEFAULT_CONFIG, 16x16):

* hand-built: a stream of MATMUL -> ACT -> DMA_STORE tiles after three bulk loads, made
  with ``isa.make`` (always available);
* compiled: alexnet_v2 layers (bench/alexnet.py's quantisation, random weights) through
  ``compiler.driver.compile_graph``, when the compiler exists and accepts them (a row
  says why not otherwise).

Figures: best-of-N wall time of a functional run (``timing=False``) as instructions/s and
simulated MACs/s, and of a run with the cycle model (``timing=True``) as simulated
cycles/s.  One extra run with the hazard checker confirms the wait masks of each program
(the figures would mean little for a program the hardware could not run).
"""
from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np

from bench.alexnet import ALEXNET_V2, conv_chain
from bench.report import BenchContext, Column, Table
from bench.timing import best_of
from isa.config import DEFAULT_CONFIG, NpuConfig
from isa.encoding import Instruction, make
from isa.instructions import Sram, Unit
from isa.program import Program, Segment
from sim.isa.sim import IsaSim
from tosa_ir import NpuError

DESCRIPTION = "ISA simulator speed on long programs (instructions/s, simulated cycles/s)"

DMA, MXU, VPU = (1 << Unit.DMA), (1 << Unit.MXU), (1 << Unit.VPU)

# External memory map of the hand-built program.
_ACTS, _WEIGHTS, _PARAMS, _OUT = 0x10_0000, 0x20_0000, 0x30_0000, 0x40_0000
_IN_ROWS = 1024        # input vectors loaded into ASRAM once
_W_TILES = 8           # weight tiles loaded into WSRAM once
_VECTORS = 64          # input vectors per MATMUL (ACC rows per tile)


def hand_built_program(config: NpuConfig = DEFAULT_CONFIG, tiles: int | None = None,
                       seed: int = 7) -> Program:
    """Bulk loads, then ``tiles`` x (MATMUL, ACT, DMA_STORE), then HALT.

    ``tiles`` defaults to what fills the instruction memory.  Tiles alternate between two
    ACC and two output slots; the wait masks order every conflicting pair.
    """
    rows, bus, wpr = config.array_rows, config.bus_bytes, config.words_per_wide_row
    if tiles is None:
        tiles = (config.imem_rows - 4) // 3
    rng = np.random.default_rng(seed)
    acts = rng.integers(-128, 128, (_IN_ROWS, rows), dtype=np.int8)
    weights = rng.integers(-127, 128, (_W_TILES * rows, config.array_cols), dtype=np.int8)
    # Per-lane bias, multiplier, shift rows, scaled so outputs spread over int8.
    params = np.stack([rng.integers(-2000, 2000, config.array_cols),
                       rng.integers(1 << 30, 1 << 31, config.array_cols),
                       np.full(config.array_cols, 40)]).astype("<i4")
    out_slot = _IN_ROWS                       # ASRAM rows of the two output slots
    prog: list[Instruction] = [
        make("DMA_LOAD", sram=Sram.ASRAM, sram_addr=0, ext_addr=_ACTS, len0=_IN_ROWS, len1=1, len2=1),
        make("DMA_LOAD", sram=Sram.WSRAM, sram_addr=0, ext_addr=_WEIGHTS, len0=_W_TILES * rows,
             len1=1, len2=1),
        make("DMA_LOAD", sram=Sram.PSRAM, sram_addr=0, ext_addr=_PARAMS, len0=3 * wpr, len1=1, len2=1),
    ]
    for i in range(tiles):
        slot = i % 2
        # MATMUL overwrites an ACC slot the ACT two tiles back read (wait VPU); the first
        # one also needs the loads (wait DMA).  ACT overwrites an output slot the store two
        # tiles back read (wait DMA) and reads this MATMUL's ACC rows (wait MXU).
        prog.append(make("MATMUL", wait=VPU | (DMA if i == 0 else 0),
                         a_addr=(i * _VECTORS) % _IN_ROWS, a_stride0=1, n0=_VECTORS, n1=1,
                         w_addr=(i % _W_TILES) * rows, acc_addr=slot * _VECTORS, a_zp=-3))
        prog.append(make("ACT", wait=MXU | DMA, acc_addr=slot * _VECTORS, count=_VECTORS,
                         dst_addr=out_slot + slot * _VECTORS, param_addr=0, out_zp=0,
                         clamp_min=0, clamp_max=127, scale32=1, double_round=1))
        prog.append(make("DMA_STORE", wait=VPU, sram=Sram.ASRAM,
                         sram_addr=out_slot + slot * _VECTORS,
                         ext_addr=_OUT + (i % 16) * _VECTORS * bus, len0=_VECTORS, len1=1, len2=1))
    prog.append(make("HALT", wait=DMA | MXU | VPU))
    segments = [Segment("acts", _ACTS, acts.tobytes()), Segment("weights", _WEIGHTS, weights.tobytes()),
                Segment("params", _PARAMS, params.tobytes())]
    return Program(config, prog, segments=segments, info={"source": "bench.isa_sim hand-built"})


def _compiled_workloads(quick: bool) -> list[tuple[str, object]]:
    """(label, Program or the reason there is none) for the compiler's workloads."""
    if importlib.util.find_spec("compiler.driver") is None:
        return [("compiled: alexnet_v2 layers", "compiler.driver does not exist")]
    from compiler.driver import compile_graph

    layers = {layer.name: dataclasses.replace(layer, pool_after=False) for layer in ALEXNET_V2}
    width = 4 if quick else 1
    # Single layers: the compiler refuses programs beyond the instruction memory, so
    # larger layers appear (as notes) until it splits them.
    cases = [
        ("compiled: alexnet conv1 (223x223x3 -> 64, 11x11/4)", (1, 223, 223, 3), [layers["conv1"]]),
        ("compiled: alexnet conv2 (26x26x64 -> 192, 5x5)", (1, 26, 26, 64 // width),
         [layers["conv2"]]),
        ("compiled: alexnet conv3 (12x12x192 -> 384, 3x3)", (1, 12, 12, 192 // width),
         [layers["conv3"]]),
    ]
    out = []
    for label, shape, chain in cases:
        if width > 1:
            chain = [dataclasses.replace(l, out_channels=l.out_channels // width) for l in chain]
        try:
            out.append((label, compile_graph(conv_chain(shape, chain))))
        except NpuError as e:
            out.append((label, f"compiler: {e}"))
    return out


def _macs(program: Program) -> int:
    cfg = program.config
    return sum(i.values["n0"] * i.values["n1"] * cfg.array_rows * cfg.array_cols
               for i in program.instructions if i.name == "MATMUL")


def run(ctx: BenchContext) -> list[Table]:
    config = DEFAULT_CONFIG
    table = Table(
        "isa_sim", f"ISA simulator speed ({config.array_rows}x{config.array_cols} NPU, "
                   f"best of {ctx.repeat})",
        [Column("workload"), Column("instructions"), Column("MACs", "M", ".1f"),
         Column("cycles", "k", ".1f"), Column("functional", "s", ".3f"),
         Column("instr/s", "k", ".1f"), Column("MAC/s", "M", ".0f"),
         Column("with timing", "s", ".3f"), Column("cycles/s", "M", ".2f"),
         Column("hazards")])
    workloads = [("hand-built: MATMUL/ACT/DMA_STORE tiles (isa.make)",
                  hand_built_program(config, tiles=200 if ctx.quick else None))]
    ctx.log("[isa_sim] compiling workloads")
    workloads += _compiled_workloads(ctx.quick)
    for label, program in workloads:
        if not isinstance(program, Program):
            table.notes.append(f"not run: {label}: {program}")
            continue
        ctx.log(f"[isa_sim] {label}")
        sim = IsaSim(program.config)
        memory = program.memory_image({b.name: np.zeros(b.shape, b.dtype) for b in program.inputs})
        functional = best_of(ctx.repeat, lambda: sim.run(program, memory, timing=False))
        timed = best_of(ctx.repeat, lambda: sim.run(program, memory, timing=True))
        result = timed.result
        if not result.ok:
            table.notes.append(f"not measured: {label}: stopped with {result.error_code.name} "
                               f"at pc {result.error_pc}: {result.error_message}")
            continue
        checked = IsaSim(program.config, check_hazards=True).run(program, memory)
        executed, macs = result.instructions_executed, _macs(program)
        table.add(label, executed, macs / 1e6, result.cycles / 1e3, functional.best,
                  executed / functional.best / 1e3, macs / functional.best / 1e6, timed.best,
                  result.cycles / timed.best / 1e6, len(checked.hazards))
    table.notes.insert(0, "functional: timing=False; with timing: the cycle model too "
                       "(sim/npu_timing.py); cycles/s = simulated cycles per second of that run")
    table.notes.insert(1, f"instruction memory: {config.imem_rows} instructions per program")
    if ctx.quick:
        table.notes.insert(2, "--quick: 200 hand-built tiles; compiled layers with 1/4 of the "
                              "channels named")
    return [table]
