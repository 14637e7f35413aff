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
    seq = [(1, 900), (2, 500), (3, 600), (4, 550), (5, 510)]      # low 500 at 2; 3 more: 5
    assert [p.update(i, n) for i, n in seq] == [False] * 4 + [True]
    assert p.why() == "router2 stalled at 500 overused wires (iteration 2; no lower count in the 3 iterations after)"
    p = Plateau(patience=3)                                         # new lows keep coming
    assert not any(p.update(i, n) for i, n in [(1, 900), (2, 800), (3, 800), (4, 700), (5, 700), (6, 700)])
    p = Plateau(patience=3)                                         # under NEAR: twice the patience
    seq = [(1, 900), (2, 20)] + [(i, 25) for i in range(3, 9)]
    assert [p.update(i, n) for i, n in seq] == [False] * 7 + [True]
    p = Plateau(patience=3)                                         # under FEW: six times
    seq = [(1, 900), (2, 2)] + [(i, 5) for i in range(3, 21)]
    assert [p.update(i, n) for i, n in seq] == [False] * 19 + [True]
    p = Plateau(patience=1)                                         # routed: zero is never a stall
    assert not any(p.update(i, 0) for i in range(1, 5))


def test_plateau_on_recorded_runs():
    """Router2's counts from the 4x4 NPU on the ULX3S (docs/fpga.md): the run that routed is
    never stopped; the plateau of another seed is stopped 12 iterations after its low."""
    routed = [42117, 24656, 13759, 7814, 4855, 3067, 2168, 1559, 1197, 829, 595, 497, 407, 330, 238, 185,
              171, 142, 120, 88, 73, 62, 48, 35, 33, 23, 18, 14, 10, 14, 14, 8, 7, 5, 4, 2, 5, 2, 2, 2, 2,
              5, 2, 2, 3, 2, 1, 1, 0]
    p = Plateau(patience=12)
    assert not any(p.update(i, n) for i, n in enumerate(routed, 1))
    stalled = [43012, 26274, 15540, 9586, 6798, 5057, 4111, 3283, 2749, 2398, 2091, 1762, 1547, 1435, 1316,
               1163, 1075, 1042, 973, 889, 836, 874, 812, 823, 730, 720, 709, 689, 691, 681, 672, 752, 698,
               657, 674, 691, 727, 745, 785, 846, 921, 927, 1037, 1079, 1089]
    p = Plateau(patience=12)
    assert not any(p.update(i, n) for i, n in enumerate(routed, 1))
    # the NPU with VDWCONV (ea7fd19), seed 4: at 1 or 2 overused wires from iteration 47 to 105
    slow = [43162, 25697, 14492, 8432, 5615, 3684, 2716, 1927, 1425, 1074, 866, 741, 588, 477, 406, 353, 281,
            243, 197, 167, 142, 134, 109, 119, 87, 63, 52, 42, 41, 43, 30, 25, 21, 13, 12, 12, 6, 4, 4, 5, 6,
            6, 8, 8, 5, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 3, 2, 2, 2, 2, 2, 2,
            2, 2, 3, 2, 3, 2, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 2, 1,
            0]
    assert len(slow) == 106
    p = Plateau(patience=12)
    assert not any(p.update(i, n) for i, n in enumerate(slow, 1))
    p = Plateau(patience=12)                # low 657 at iteration 34; stopped by hand after the 45th
    assert not any(p.update(i, n) for i, n in enumerate(stalled, 1))
    assert p.update(46, 1100) and p.why().startswith("router2 stalled at 657 overused wires (iteration 34;")


def _script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _iterations(counts, start=1):
    return "".join(f"Info:     iter={i} wires=500000 overused={n} overuse={n} archfail=NA\n"
                   for i, n in enumerate(counts, start))


def test_run_watched_stops_a_stall_and_lets_a_run_finish(tmp_path):
    log = tmp_path / "top.tim"
    stall = _script(tmp_path / "stall.sh", f"#!/bin/sh\nprintf '{_iterations([900, 400, 410, 420, 430, 440])}' > top.tim\n"
                                          "sleep 60\necho finished\n")
    start = time.monotonic()
    with open(tmp_path / "out.log", "w") as out:
        rc, why = run_watched(["sh", str(stall)], tmp_path, dict(os.environ), out, log, patience=3, poll_s=0.1)
    assert time.monotonic() - start < 30 and rc != 0
    assert why == "router2 stalled at 400 overused wires (iteration 2; no lower count in the 3 iterations after)"
    assert "finished" not in (tmp_path / "out.log").read_text()
    done = _script(tmp_path / "done.sh", f"#!/bin/sh\nprintf '{_iterations([900, 400, 410, 420, 0])}' > top.tim\n")
    with open(tmp_path / "out.log", "w") as out:
        assert run_watched(["sh", str(done)], tmp_path, dict(os.environ), out, log, patience=3,
                           poll_s=0.1) == (0, None)


FAKE_NEXTPNR = """#!{python}
import json, sys, time
args = sys.argv[1:]
log, seed = args[args.index("--log") + 1], args[args.index("--seed") + 1] if "--seed" in args else "none"
open("nextpnr_runs.txt", "a").write(seed + "\\n")
counts = [500, 200, 0] if seed == "7" else [500, 200, 210, 220, 230, 240]
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


ROUTER2 = "--placer static --no-tmdriv --router router2"      # the stall watch is router2's


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
                         seeds=(1, 7), patience=3, nextpnr_opts=ROUTER2)
    folder = tmp_path / "out" / "ulx3s" / "bridge-small"
    assert (folder / "nextpnr_runs.txt").read_text().split() == ["1", "7"]
    assert (folder / "yosys_runs.txt").read_text().split() == ["yosys"]       # the netlist is made once
    assert report.seed == 7 and report.bitstream == folder / "top.bit" and report.fmax_mhz == 30.0
    assert report.stalled == ["seed 1: router2 stalled at 200 overused wires (iteration 2; "
                              "no lower count in the 3 iterations after)"]
    assert any(line.startswith("  nextpnr seed 7 (stopped before: seed 1: router2 stalled") for line in report.lines())
    with pytest.raises(BuildError, match=r"routing did not converge with any seed tried \(default seed: .*; seed 3: "):
        build_board("ulx3s", "small", "bridge", 20, 4 * 1024, tmp_path / "out", log=lambda s: None,
                    seeds=(None, 3), patience=3, nextpnr_opts=ROUTER2)
    assert (folder / "nextpnr_runs.txt").read_text().split() == ["1", "7", "none", "3"]
    assert "--seed 3" in (folder / "build_top.sh").read_text()      # the plan's script, seed by seed
