"""The list of benchmarks ``python -m bench`` knows.

A benchmark is a module with

* ``DESCRIPTION``: one line, shown by ``python -m bench --list``;
* ``run(ctx)``: takes a :class:`bench.report.BenchContext`, returns a list of
  :class:`bench.report.Table` (it may also print progress with ``ctx.log``).

Modules are imported only when their benchmark runs, so a benchmark whose optional
dependencies are missing cannot break the others.  To add one, append a line here.
"""
from __future__ import annotations

import importlib
from types import ModuleType

# name -> module (run in this order when no names are given).
BENCHMARKS: dict[str, str] = {
    "interpreter": "bench.interpreter",   # reference interpreter vs the official model
    "isa_sim": "bench.isa_sim",           # ISA simulator speed
    "rtl": "bench.rtl",                   # RTL simulation speed, cycle agreement with the ISA simulator
    "roofline": "bench.roofline",         # per-layer cycles on the ISA simulator vs the roofline
    "sweep": "bench.sweep",               # array-size sweep of the full-size networks (estimate)
    "families": "bench.families",         # network-family .tflite fixtures: cycles, roofline, utilisation
    "fpga": "bench.fpga",                 # FPGA builds on record: utilisation, post-route Fmax
}


class UnknownBenchmark(KeyError):
    """A name that is not in :data:`BENCHMARKS`."""

    def __str__(self) -> str:
        return (f"unknown benchmark {self.args[0]!r}; known: "
                f"{', '.join(BENCHMARKS)}")


def load(name: str) -> ModuleType:
    """The module of benchmark ``name`` (imported on first use)."""
    if name not in BENCHMARKS:
        raise UnknownBenchmark(name)
    return importlib.import_module(BENCHMARKS[name])
