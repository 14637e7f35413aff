"""hw/board/router_watch.py and the seed retries of hw/board/build.py.

A stalled router2 run is stopped and the build goes on with the next seed; the tools here are
fakes (shell scripts standing in for Yosys, nextpnr and ecppack) that write what the real ones
write: router2's iteration lines into nextpnr's ``--log``, the ``--report`` JSON, a bitstream."""
from __future__ import annotations

import os
import stat
import sys
import time

import pytest

from hw.board.build import BuildError, build_board
from hw.board.router_watch import Plateau, run_watched


def test_plateau_by_hand():
    p = Plateau(patience=3)
    seq = [(1, 100), (2, 50), (3, 60), (4, 55), (5, 51)]          # low 50 at 2; 3 more: 5
    assert [p.update(i, n) for i, n in seq] == [False] * 4 + [True]
    assert p.why() == "router2 stalled at 50 overused wires (iteration 2; no lower count in the 3 iterations after)"
    p = Plateau(patience=3)
    assert not any(p.update(i, n) for i, n in [(1, 9), (2, 8), (3, 8), (4, 7), (5, 7), (6, 7)])
    p = Plateau(patience=1)                                         # routed: zero is never a stall
    assert not any(p.update(i, 0) for i in range(1, 5))


def _script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _iterations(counts, start=1):
    return "".join(f"Info:     iter={i} wires=500000 overused={n} overuse={n} archfail=NA\n"
                   for i, n in enumerate(counts, start))


def test_run_watched_stops_a_stall_and_lets_a_run_finish(tmp_path):
    log = tmp_path / "top.tim"
    stall = _script(tmp_path / "stall.sh", f"#!/bin/sh\nprintf '{_iterations([90, 40, 41, 42, 43, 44])}' > top.tim\n"
                                          "sleep 60\necho finished\n")
    start = time.monotonic()
    with open(tmp_path / "out.log", "w") as out:
        rc, why = run_watched(["sh", str(stall)], tmp_path, dict(os.environ), out, log, patience=3, poll_s=0.1)
    assert time.monotonic() - start < 30 and rc != 0
    assert why == "router2 stalled at 40 overused wires (iteration 2; no lower count in the 3 iterations after)"
    assert "finished" not in (tmp_path / "out.log").read_text()
    done = _script(tmp_path / "done.sh", f"#!/bin/sh\nprintf '{_iterations([90, 40, 41, 42, 0])}' > top.tim\n")
    with open(tmp_path / "out.log", "w") as out:
        assert run_watched(["sh", str(done)], tmp_path, dict(os.environ), out, log, patience=3,
                           poll_s=0.1) == (0, None)


FAKE_NEXTPNR = """#!{python}
import json, sys, time
args = sys.argv[1:]
log, seed = args[args.index("--log") + 1], args[args.index("--seed") + 1] if "--seed" in args else "none"
open("nextpnr_runs.txt", "a").write(seed + "\\n")
counts = [50, 20, 0] if seed == "7" else [50, 20, 21, 22, 23, 24]
with open(log, "w") as f:
    for i, n in enumerate(counts, 1):
        f.write(f"Info:     iter={{i}} wires=9 overused={{n}} overuse={{n}} archfail=NA\\n")
if seed != "7":
    time.sleep(60)
    sys.exit(1)
json.dump({{"fmax": {{"clk": {{"achieved": 30.0, "constraint": 20}}}},
           "utilization": {{"TRELLIS_COMB": {{"used": 10, "available": 100}}}}}}, open("report.json", "w"))
open("top.config", "w").write("config")
"""


def test_build_tries_the_next_seed_after_a_stall(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    yosys = _script(bindir / "yosys", "#!/bin/sh\necho yosys >> yosys_runs.txt\necho '{}' > top.json\n: > top.rpt\n")
    nextpnr = _script(bindir / "nextpnr", FAKE_NEXTPNR.format(python=sys.executable))
    ecppack = _script(bindir / "ecppack", "#!/bin/sh\necho bitstream > top.bit\n")
    for var, tool in (("YOSYS", yosys), ("NEXTPNR_ECP5", nextpnr), ("ECPPACK", ecppack)):
        monkeypatch.setenv(var, str(tool))
    import hw.board.router_watch as watch
    real = watch.run_watched
    monkeypatch.setattr("hw.board.build.run_watched",
                        lambda *a, **k: real(*a, **{**k, "poll_s": 0.1}))
    report = build_board("ulx3s", "small", "bridge", 20, 4 * 1024, tmp_path / "out", log=lambda s: None,
                         seeds=(1, 7), patience=3)
    folder = tmp_path / "out" / "ulx3s" / "bridge-small"
    assert (folder / "nextpnr_runs.txt").read_text().split() == ["1", "7"]
    assert (folder / "yosys_runs.txt").read_text().split() == ["yosys"]       # the netlist is made once
    assert report.seed == 7 and report.bitstream == folder / "top.bit" and report.fmax_mhz == 30.0
    assert report.stalled == ["seed 1: router2 stalled at 20 overused wires (iteration 2; "
                              "no lower count in the 3 iterations after)"]
    assert any(line.startswith("  nextpnr seed 7 (stopped before: seed 1: router2 stalled") for line in report.lines())
    with pytest.raises(BuildError, match=r"routing did not converge with any seed tried \(seed 1: .*; seed 3: "):
        build_board("ulx3s", "small", "bridge", 20, 4 * 1024, tmp_path / "out", log=lambda s: None,
                    seeds=(1, 3), patience=3)
    assert "--seed 3" in (folder / "build_top.sh").read_text()      # the plan's script, seed by seed
