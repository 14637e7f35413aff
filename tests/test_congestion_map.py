"""tools/congestion_map.py: RUDY routing demand of a placed netlist, attributed to units.

The expected figures are worked out by hand from RUDY's definition on a small netlist."""
from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from tool_modules import load_tool  # noqa: E402

tool = load_tool("congestion_map")


def _cell(x, y, bits):
    return {"type": "LUT4", "attributes": {"NEXTPNR_BEL": f"X{x}/Y{y}/SLICEA"},
            "connections": {"A": bits}}


def _design():
    # net 2 (seq): 4 pins in one tile -> w = h = 1, density 2 on tile (0,0)
    # net 3 (vpu): pins at (0,0) and (3,1) -> 4 x 2 box, density 6/8 = 0.75 on 8 tiles
    return {"modules": {"top": {
        "cells": {"core.npu.seq.a": _cell(0, 0, [2, 3]), "core.npu.seq.b": _cell(0, 0, [2]),
                  "core.npu.seq.c": _cell(0, 0, [2]), "core.npu.seq.d": _cell(0, 0, [2]),
                  "core.npu.vpu.e": _cell(3, 1, [3]), "core.npu.vpu.f$1": _cell(3, 1, ["0"])},
        "netnames": {"core.npu.seq.f_valid": {"bits": [2]}, "core.npu.vpu.x": {"bits": [3]}}}}}


def test_unit_names():
    assert tool.unit_of("\\core.npu.seq.f_valid_LUT4_B_Z") == "seq"
    assert tool.unit_of("core.npu.ctl__cmd$156.word") == "ctl"
    assert tool.unit_of("core.bridge.state") == "bridge"
    assert tool.unit_of("clk_buf.buf") == "clk_buf"
    # logic named after a block RAM's port: the RAM's writer or reader, not the RAM
    assert tool.unit_of("core.npu.imem.0.10_DIA9_LUT4_Z_A_CCU2C_S0[2]") == "imem:write"
    assert tool.unit_of("core.npu.imem.0.2_DOA0_LUT4_C_Z") == "imem:read"
    assert tool.unit_of("core.npu.acc.3_DOB12_TRELLIS_FF_Q") == "acc:read"
    assert tool.unit_of("core.npu.imem.0[5]") == "imem"


def test_rudy_by_hand():
    report = tool.congestion(_design(), hot_share=0.125)
    assert report["grid"] == [4, 2]
    assert report["rudy_max"] == pytest.approx(2.75)            # tile (0,0): 2 + 0.75
    assert report["rudy_mean"] == pytest.approx((2 + 8 * 0.75) / 8)
    assert report["hot_tiles"] == 1
    seq, vpu = report["units"]["seq"], report["units"]["vpu"]
    assert seq["hot_share"] == pytest.approx(2 / 2.75) and vpu["hot_share"] == pytest.approx(0.75 / 2.75)
    assert seq["chip_share"] == pytest.approx(2 / 8) and vpu["chip_share"] == pytest.approx(6 / 8)
    assert seq["cells_in_hot_tiles"] == 4 and vpu["cells_in_hot_tiles"] == 0
    assert report["largest_fanout"][0] == {"pins": 4, "net": "core.npu.seq.f_valid"}


def test_net_groups():
    assert tool.net_group("core.npu.vpu.product3_p1[17]") == "vpu.product#_p#[#]"
    assert tool.net_group("\\core.npu.mxu.prod_2_3$145[4]") == "mxu.prod_#_#[#]"
    report = tool.congestion(_design(), hot_share=0.125, nets=5)
    groups = {g["group"]: g for g in report["net_groups"]}
    assert set(groups) == {"seq.f_valid", "vpu.x"}
    assert groups["seq.f_valid"]["hot_share"] == pytest.approx(2 / 2.75)
    assert groups["vpu.x"]["chip_share"] == pytest.approx(6 / 8)
    assert tool.congestion(_design(), hot_share=0.125)["net_groups"] == []


def test_cli(tmp_path, capsys):
    placed = tmp_path / "placed.json"
    placed.write_text(json.dumps(_design()))
    assert tool.main([str(placed), "--hot", "0.125", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].split()[:3] == ["seq", "72.7%", "25.0%"]
    assert json.loads((tmp_path / "r.json").read_text())["hot_tiles"] == 1


@pytest.mark.parametrize("text, why", [("{", "Expecting"), ('{"modules": {}}', "no module with cells"),
                                       (json.dumps({"modules": {"top": {"cells": {"a": {"type": "LUT4"}}}}}),
                                        "not placed")])
def test_bad_input_exit_2(tmp_path, capsys, text, why):
    placed = tmp_path / "placed.json"
    placed.write_text(text)
    assert tool.main([str(placed)]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, why", [(["--hot", "1.5"], "--hot 1.5"), (["--nets", "-1"], "--nets -1")])
def test_bad_options_exit_2(tmp_path, capsys, args, why):
    placed = tmp_path / "placed.json"
    placed.write_text(json.dumps(_design()))
    assert tool.main([str(placed), *args]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1


def test_ram_port_nets():
    # a RAM's own data net (nothing after the port's bit index) and logic named after a port
    assert tool.unit_of("core.npu.acc.0.0_DOA0[1]") == "acc:read"
    assert tool.net_group("core.npu.acc.0.0_DOA0[1]") == "acc:read data"
    assert tool.net_group("core.npu.imem.0.10_DIA9_LUT4_Z_A_CCU2C_S0[2]") == "imem:write"


HEAT = ("core.npu.vpu.product0_p2[3],6\n"       # vpu 6 + 2 = 8 of 16
        "core.npu.vpu.product3_p1[7],2\n"
        "core.npu.seq.precheck.pre_p1,4\n"      # seq 4
        "core.npu.acc.1.0_DOB7[2],3\n"          # acc:read 3 (the RAM's data net)
        "locked_LUT4_D_Z,1\n"                   # (top-level: the board's reset) 1
        "\n")


def test_router_overuse_by_hand():
    import csv
    import io
    report = tool.router_overuse(csv.reader(io.StringIO(HEAT)), nets=2)
    assert report["total"] == 16
    assert report["units"] == {"vpu": 0.5, "seq": 0.25, "acc:read": 3 / 16, "locked_LUT4_D_Z": 1 / 16}
    assert report["net_groups"] == [{"group": "vpu.product#_p#[#]", "share": 0.5},
                                    {"group": "seq.precheck", "share": 0.25}]


def test_cli_heat(tmp_path, capsys):
    heat = tmp_path / "heat_congestion_by_net_3.csv"
    heat.write_text(HEAT)
    assert tool.main(["--heat", str(heat), "--nets", "1", "--json", str(tmp_path / "r.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("router2: 16 overused")
    assert lines[2].split() == ["vpu", "50.0%"]
    assert lines[-1].split() == ["vpu.product#_p#[#]", "50.0%"]
    assert json.loads((tmp_path / "r.json").read_text())["router_overuse"]["total"] == 16
    placed = tmp_path / "placed.json"             # both: two reports
    placed.write_text(json.dumps(_design()))
    assert tool.main([str(placed), "--heat", str(heat), "--hot", "0.125"]) == 0
    out = capsys.readouterr().out
    rudy = out.split("\n\n")[1].splitlines()
    assert out.startswith("router2: 16") and rudy[2].split()[:2] == ["seq", "72.7%"]


@pytest.mark.parametrize("text, why", [("a,b\n", "line 1: expected 'net,count'"), ("", "no overused wires"),
                                       ("x\n", "line 1")])
def test_bad_heat_exit_2(tmp_path, capsys, text, why):
    heat = tmp_path / "heat.csv"
    heat.write_text(text)
    assert tool.main(["--heat", str(heat)]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1


def test_nothing_to_read_exit_2(capsys):
    assert tool.main([]) == 2
    assert "give a placed JSON, a --heat CSV, or both" in capsys.readouterr().err
