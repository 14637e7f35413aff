"""RTL simulation speed: ``python -m bench.rtl_programs [--config small|default] [--reps N]
[--program matmul|vector|table]``.

Builds the Verilator model (reporting the build time when it was not cached) and runs a long
MATMUL-bound program (weights, activations and results streaming through DMA while the MXU
works, then ACT and a store) or, with ``--program vector``, a VPU-bound one (VALU, VRESCALE,
VPOOL), or with ``--program table`` a TABLE-bound one (int16 interpolated lookups),
reporting simulated cycles per second of wall time (simulation only, process start-up
excluded) and checking the cycle count against sim/npu_timing.py.  The programs live in
hw/harness/workloads.py: the model's profile-guided build trains on them too.
"""
from __future__ import annotations

import argparse
import time

from hw.harness.workloads import PROGRAMS, workload_memory
from isa import DEFAULT_CONFIG, SMALL_CONFIG
from isa.program import Program




def main(argv=None) -> None:
    from hw.harness.simulation import build, run_program
    from sim.npu_timing import TimingModel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=["small", "default"], default="default")
    parser.add_argument("--reps", type=int, default=100, help="MATMULs of 1024 vectors")
    parser.add_argument("--progress", type=int, default=0, help="log the cycle count every N cycles")
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="matmul",
                        help="MATMUL-bound (default), VPU-bound or TABLE-bound program")
    args = parser.parse_args(argv)
    cfg = DEFAULT_CONFIG if args.config == "default" else SMALL_CONFIG

    t = time.perf_counter()
    build_dir = build(cfg)
    print(f"model: {build_dir} ({time.perf_counter() - t:.1f} s to build or find)")

    instrs = PROGRAMS[args.program](cfg, args.reps)
    program = Program(cfg, instrs)
    mem = workload_memory(program)
    t = time.perf_counter()
    result = run_program(program, mem, build_dir=build_dir, progress=args.progress)
    total = time.perf_counter() - t
    expected = TimingModel(cfg).run(instrs).total_cycles
    print(f"{result.cycles} cycles ({'matches' if result.cycles == expected else 'DIFFERS from'} the timing "
          f"model: {expected}), status {result.status}, busy {result.unit_busy_cycles}")
    print(f"simulation {result.wall_seconds:.2f} s: {result.cycles_per_second / 1e3:.0f}k cycles/s; "
          f"whole run_program {total:.2f} s")


if __name__ == "__main__":
    main()
