"""Shared check of compiled graphs (tests/ is not a package: import as ``from npu_check import
...`` after putting tests/ on sys.path): run a program on the ISA simulator and compare every
output bit-exactly with the reference interpreter (sim.reference, the oracle for the NPU),
with the wait masks checked by the ISA simulator's hazard checker, under the RTL's cycle
model and under random instruction durations (:class:`RandomTiming`).
"""
from __future__ import annotations

import numpy as np

from sim.isa.sim import IsaSim
from sim.npu_timing import InstrTiming, Timing
from sim.reference import run_graph


class RandomTiming:
    """The issue rules with random durations: in order, one per cycle, an instruction issues
    when its unit is ready and every unit in its wait mask idle; the MXU may become ready
    before it is idle.  Test-only, independent of the compiler's own timing model."""

    def __init__(self, config, seed: int):
        self.rng = np.random.default_rng(seed)

    def run(self, instructions, stop_at=None, **_):
        idle, ready = [0, 0, 0], [0, 0, 0]
        last, per = -1, []
        for instr in instructions:
            if instr.name == "HALT":
                stop = max([last + 1] + idle)
                per.append(InstrTiming(stop, stop, stop))
                break
            unit = int(instr.unit)
            waits = [u for u in range(3) if instr.values["wait"] >> u & 1]
            if unit == 3:                       # LOOP, SYNC: only the wait mask
                last = max([last + 1] + [idle[u] for u in waits])
                per.append(InstrTiming(last, last, last))
                continue
            issue = max([last + 1, ready[unit]] + [idle[u] for u in waits])
            busy = int(self.rng.integers(1, 80))
            idle[unit] = max(idle[unit], issue + busy + 1)
            ready[unit] = issue + (int(self.rng.integers(1, busy + 1)) if unit == 1 else busy + 1)
            per.append(InstrTiming(issue, issue + 1, issue + busy))
            last = issue
        return Timing(max(p.end for p in per) + 1, {}, per)

    # The simulator hands over the instructions in issue order (loops unrolled, every LOOP
    # executed included).
    run_issued = run


def compare_on_isa(program, graph, inputs: dict, config, *, check_hazards: bool = True,
                   same_dtype: bool = True, timing_seeds=()):
    """Run ``program`` (compiled from ``graph``) on ``inputs``; every output must equal the
    reference interpreter's: its shape, its values and (``same_dtype``) its numpy dtype.
    ``timing_seeds``: rerun with :class:`RandomTiming` of each seed, hazards must stay none.
    Returns the ISA simulator's result."""
    expected = run_graph(graph, inputs)
    image = program.memory_image(inputs)
    result = IsaSim(config, check_hazards=check_hazards).run(program, image)
    assert result.ok, result.error_message
    if check_hazards:
        assert result.hazards == [], result.hazards[:3]
    got = program.read_outputs(result.memory)
    assert set(got) == set(expected)
    for name, want in expected.items():
        assert got[name].shape == want.shape, (name, got[name].shape, want.shape)
        if same_dtype:
            assert got[name].dtype == want.dtype, (name, got[name].dtype, want.dtype)
        bad = np.argwhere(got[name].astype(np.int64) != want.astype(np.int64))
        assert bad.size == 0, (f"{name}: {len(bad)} of {want.size} wrong, first at {bad[0].tolist()}: "
                               f"got {got[name][tuple(bad[0])]}, want {want[tuple(bad[0])]}")
    for seed in timing_seeds:
        sim = IsaSim(config, check_hazards=True, timing_model=lambda c, s=seed: RandomTiming(c, s))
        assert sim.run(program, image).hazards == []
    return result


def int8_inputs(graph, rng) -> dict:
    """Random int8 values for every graph input."""
    return {name: rng.integers(-128, 128, graph.main.tensor(name).shape, dtype=np.int8)
            for name in graph.main.inputs}
