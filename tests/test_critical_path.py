"""tools/critical_path.py: a nextpnr critical path step by step and unit by unit.

The expected times are sums of the steps' delays, worked out by hand."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from tool_modules import load_tool  # noqa: E402

tool = load_tool("critical_path")


def _step(kind, delay, cell=None, net=None):
    step = {"type": kind, "delay": delay, "from": {"cell": "x"}, "to": {"cell": cell or "x"}}
    if net is not None:
        step["net"] = net
    return step


# ACC's block RAM -> two LUTs in the sequencer (one zero-delay carry hop) -> the board memory
REPORT = {"critical_paths": [{"from": "clk", "to": "clk", "path": [
    _step("clk-to-q", 5.5, cell="core.npu.acc.3.0"),
    _step("routing", 2.0, net="core.npu.acc.3.0_DOB7[2]"),
    _step("logic", 0.25, cell="core.npu.seq.br_armed_LUT4_A"),
    _step("routing", 1.0, net="core.npu.seq.br_armed_LUT4_A_Z[1]"),
    _step("logic", 0.0, cell="core.npu.seq.request_CCU2C"),
    _step("routing", 0.0, net="core.npu.seq.request_CCU2C_COUT"),
    _step("logic", 0.5, cell="core.npu.seq.request_LUT4"),
    _step("routing", 8.0, net="core.extmem.mem.0.31_ADA3"),
    _step("setup", 0.25, cell="core.extmem.mem.0.31"),
]}]}


def test_steps_accumulate_and_name_units():
    steps = tool.path_steps(REPORT)
    assert [s["at_ns"] for s in steps] == [5.5, 7.5, 7.75, 8.75, 8.75, 8.75, 9.25, 17.25, 17.5]
    assert [s["unit"] for s in steps] == ["acc", "acc:read", "seq", "seq", "seq", "seq", "seq", "extmem",
                                          "extmem"]


def test_stretches_group_units_and_give_routing_to_the_cell_it_leaves():
    stretches = tool.path_stretches(tool.path_steps(REPORT))
    assert stretches == [
        {"unit": "acc", "levels": 0, "logic_ns": 5.5, "routing_ns": 2.0},
        {"unit": "seq", "levels": 3, "logic_ns": 0.75, "routing_ns": 9.0},
        {"unit": "extmem", "levels": 0, "logic_ns": 0.25, "routing_ns": 0.0},
    ]
    text = tool.format_path(tool.path_steps(REPORT))
    assert "request_CCU2C\n" not in text                  # zero-delay hops are folded
    assert text.splitlines()[-1].split()[:4] == ["total", "3", "6.50", "11.00"]
    assert "(17.50 ns, 57.14 MHz)" in text


def test_cli_writes_csv_and_json_and_rejects_bad_input(tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text(json.dumps(REPORT))
    out_json, out_csv = tmp_path / "p.json", tmp_path / "p.csv"
    assert tool.main([str(report), "--json", str(out_json), "--csv", str(out_csv)]) == 0
    data = json.loads(out_json.read_text())
    assert len(data["steps"]) == 9 and data["stretches"][1]["unit"] == "seq"
    assert out_csv.read_text().splitlines()[0] == "type,delay_ns,at_ns,name,unit"
    capsys.readouterr()
    assert tool.main([str(report), "--index", "1"]) == 2
    assert "1 critical path(s); there is no path 1" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert tool.main([str(bad)]) == 2
    assert "not a nextpnr report" in capsys.readouterr().err
    assert tool.main([str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
