"""The per-unit resource table of hw/synth/report.py, on a hand-made Yosys ``stat -json``."""
from __future__ import annotations

from hw.synth.report import format_table, per_unit, unit_of


def test_units_by_hierarchy():
    assert unit_of("\\top.seq.loops") == "sequencer"
    assert unit_of("\\top.seq") == "sequencer"
    assert unit_of("\\top.mxu") == "MXU"
    assert unit_of("\\top") == "memories"
    assert unit_of("\\top.sequel") == "memories"       # a prefix must end at a dot


def test_counts_per_unit_and_total():
    stat = {"modules": {
        "\\top": {"num_cells_by_type": {"DP16KD": 3, "LUT4": 10, "TRELLIS_FF": 4, "npu_fallback_mem": 1}},
        "\\top.mxu": {"num_cells_by_type": {"MULT18X18D": 16, "CCU2C": 5, "LUT4": 7, "TRELLIS_FF": 20}},
        "\\top.seq": {"num_cells_by_type": {"LUT4": 1}},
        "\\top.seq.loops": {"num_cells_by_type": {"TRELLIS_DPR16X4": 2, "LUT4": 2}},
    }}
    units = per_unit(stat, ("MULT18X18D",), ("DP16KD",))
    assert units["MXU"] == {"luts": 17, "ffs": 20, "dsps": 16, "brams": 0, "lutram": 0, "opaque": 0}
    assert units["sequencer"]["luts"] == 3 and units["sequencer"]["lutram"] == 2
    assert units["memories"]["brams"] == 3 and units["memories"]["opaque"] == 1
    assert units["total"]["luts"] == 30 and units["total"]["dsps"] == 16
    assert list(units)[-1] == "total"
    assert "not mapped" in format_table(units)
