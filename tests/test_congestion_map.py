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
