"""What the one-write-port rule (isa/ports.py) costs a compiled model, in cycles.

    python tools/write_port_cost.py build/alexnet/alexnet_int8.tosa [--config NAME]

Compiles the model and times it with the cycle model as the RTL runs it, and again for a
hypothetical NPU without the rule (writers of ASRAM and of ACC overlapping, BRANCHes on
their own read ports), then with the rule for one memory only: a table of total cycles.
"""
from __future__ import annotations

import argparse
import sys

from compiler.driver import run_pipeline
from isa.ports import MEMORIES
from npu.config import load_config
from sim.npu_timing import TimingModel
from tosa_ir.tosa_fb import read_tosa


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a .tosa file")
    parser.add_argument("--config", default=None, help="named configuration or JSON (default: default)")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    program = run_pipeline(read_tosa(args.model), config).program.instructions
    with_rule = TimingModel(config).run(program).total_cycles
    without = TimingModel(config, write_rule=(), branch_port=False).run(program).total_cycles
    rows = [("with the rule (the RTL)", with_rule), ("without it", without)]
    for mem in MEMORIES:
        rows.append((f"{mem} writers only", TimingModel(config, write_rule=(mem,)).run(program).total_cycles))
    rows.append(("BRANCH port only", TimingModel(config, write_rule=()).run(program).total_cycles))
    width = max(len(name) for name, _ in rows)
    for name, cycles in rows:
        print(f"{name:<{width}}  {cycles:>14,}  {100 * (cycles / without - 1):+.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
