"""Best-of-N wall-clock timing.

The minimum of several runs is the figure least disturbed by other work on the machine
(the noise only ever adds time); the list of all runs is kept for the CSV.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Timing:
    """Wall-clock and CPU seconds (all threads of this process) of each run, and the last
    run's return value.  CPU time above wall time means the run used several cores."""

    seconds: list[float]
    cpu_seconds: list[float]
    result: Any = None

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def best_cpu(self) -> float:
        """CPU seconds of the run with the best wall-clock time."""
        return self.cpu_seconds[self.seconds.index(self.best)]

    @property
    def median(self) -> float:
        s = sorted(self.seconds)
        mid = len(s) // 2
        return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def best_of(n: int, fn: Callable[[], Any], warmup: int = 0) -> Timing:
    """Call ``fn()`` ``warmup`` times untimed, then ``n`` times timed (``n >= 1``)."""
    if n < 1:
        raise ValueError("best_of needs at least one run")
    for _ in range(warmup):
        fn()
    seconds, cpu, result = [], [], None
    for _ in range(n):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return Timing(seconds, cpu, result)
