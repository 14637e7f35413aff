"""Stop a place-and-route run whose router has stopped making progress.

nextpnr's router2 negotiates congestion iteration by iteration and prints, per iteration, how
many wires are still used by more than one net (``iter=12 wires=577186 overused=3215``).  On a
routable placement that count falls to zero; on a placement with a spot the router cannot
untangle it falls to a plateau and stays there for as long as nextpnr is let run: it has no
iteration limit of its own.  The 4x4 NPU on the ULX3S showed both on one netlist: the same
options with two placement seeds plateaued at ~2,300 overused wires for one and routed in 49
iterations for the other (docs/fpga.md, "Seeds").  So a build watches nextpnr's log while it
runs, stops it once ``patience`` iterations have passed without a new lowest count, and tries
the next seed (hw/board/build.py); one run that routes is enough.

The watch is on the log file nextpnr writes (``--log``), read as it grows: nextpnr itself is
run by the board's build script, unchanged.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FEW", "ITERATION", "NEAR", "Plateau", "run_watched"]

ITERATION = re.compile(r"iter=(\d+)\s+wires=\d+\s+overused=(\d+)")


NEAR = 100      # below this many overused wires the router is in its end game: twice the patience
FEW = 10        # below this many, six times the patience (the last wire can take 60 iterations)


@dataclass
class Plateau:
    """Router2's progress: the lowest overused-wire count so far and the iteration it came at.
    ``update`` says whether ``patience`` iterations have passed since that low (a stall), or
    twice that once the low is under :data:`NEAR` and six times under :data:`FEW`: the last
    few wires come slowly (one run that routed went from 2 to 1 overused wires in 10
    iterations, then to 0 in 3; the NPU with VDWCONV sat at 1 or 2 from iteration 47 to 105
    and routed at 106), while a plateau sits in the hundreds or thousands."""
    patience: int
    best: int | None = None
    best_iteration: int = 0
    iteration: int = 0

    def update(self, iteration: int, overused: int) -> bool:
        self.iteration = iteration
        if self.best is None or overused < self.best:
            self.best, self.best_iteration = overused, iteration
        limit = self.patience * (6 if self.best < FEW else 2 if self.best < NEAR else 1)
        return self.best > 0 and iteration - self.best_iteration >= limit

    def why(self) -> str:
        return (f"router2 stalled at {self.best:,} overused wires (iteration {self.best_iteration}; "
                f"no lower count in the {self.iteration - self.best_iteration} iterations after)")


def run_watched(cmd: list[str], cwd: Path, env: dict, out, log_path: Path, patience: int,
                poll_s: float = 2.0) -> tuple[int, str | None]:
    """Run ``cmd`` in ``cwd`` (output to the open file ``out``) while reading router2's
    iterations from ``log_path`` as it grows; stop the whole process group once the router
    stalls (:class:`Plateau`).  Returns the exit status and, if it was stopped, why.  A log
    left by an earlier run is removed first: its iterations are not this run's."""
    plateau = Plateau(patience)
    log_path.unlink(missing_ok=True)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    offset, pending = 0, ""
    while True:
        done = proc.poll() is not None
        if log_path.exists():
            with open(log_path, errors="replace") as f:
                f.seek(offset)
                pending += f.read()
                offset = f.tell()
            *lines, pending = pending.split("\n")
            for line in lines:
                m = ITERATION.search(line)
                if m and plateau.update(int(m[1]), int(m[2])) and not done:
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                    return proc.returncode, plateau.why()
        if done:
            return proc.returncode, None
        time.sleep(poll_s)
