"""The gated domains (hw/clock_gate.py): gated in the Verilator build, the sync clock in synthesis.

That the gated model computes what the ungated design does is the lockstep tests' claim
(cocotb_tests/: the gated build against the ISA simulator; the board top, ungated, under
Verilator); these check the structure those tests rely on.
"""
from __future__ import annotations

import re

import pytest
from amaranth.back import verilog

from isa import SMALL_CONFIG
from hw.mxu import WEIGHT_GATE_ROWS
from hw.top import Npu


def _driver(module: str, wire: str) -> str:
    """What drives ``wire`` in ``module``, through plain aliases (``assign a = b;``)."""
    while True:
        rhs = re.search(rf"assign {wire} = ([^;]+);", module).group(1).strip()
        if not re.fullmatch(r"\w+", rhs) or rhs in ("clk", "rst"):
            return rhs
        wire = rhs


def _modules(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r"module \\?(\S+) ?\(.*?endmodule", text, re.S)}


@pytest.fixture(scope="module")
def gated() -> str:
    return verilog.convert(Npu(SMALL_CONFIG, gate_idle_units=True), name="npu", emit_src=False)


@pytest.fixture(scope="module")
def ungated() -> str:
    return verilog.convert(Npu(SMALL_CONFIG), name="npu", emit_src=False)


def _gated_domain(top: str, clock: str) -> str:
    """The domain whose gate ``clock`` passes ("vector" for ``clk & vector_open``), or the clock."""
    if clock == "clk":
        return clock
    found = re.fullmatch(r"clk & (\w+)_open", _driver(top, clock))
    return found.group(1) if found else clock


def _unit_clocks(gated: str, unit: str) -> dict[str, str]:
    """Each clock that a register of submodule ``unit`` ("npu.vpu") is clocked by, named by
    what drives it: the top level's domain (``vector`` for ``clk & vector_open``), or
    ``domain/load`` for a load domain inside the unit (``<its clock> & load_open``)."""
    modules = _modules(gated)
    module, top = modules[unit], modules["npu"]
    instance = re.search(rf"\\{re.escape(unit)} +\\?\w+ +\((.*?)\);", top, re.S).group(1)
    found = {}
    for clock in set(re.findall(r"always @\(posedge (\w+)\)", module)):
        wire, load = clock, None
        while (m := re.search(rf"assign {wire} = ([^;]+);", module)):
            rhs = m.group(1).strip()
            if (gate := re.fullmatch(r"(\w+) & (\w+)_open", rhs)):
                wire, load = gate.group(1), gate.group(2)
            elif re.fullmatch(r"\w+", rhs):
                wire = rhs
            else:
                break
        outer = re.search(rf"\.{wire}\(([^)]+)\)", instance).group(1).strip()
        domain = _gated_domain(top, outer)
        found[clock] = domain if load is None else f"{domain}/{load}"
    return found


@pytest.mark.parametrize("unit, domain, loads", [
    ("npu.vpu", "vector", {"vpu_x0", "vpu_x1", "vpu_t", "vpu_y"}), ("npu.table", "table", set())])
def test_units_run_on_their_own_clocks(gated, unit, domain, loads):
    """Every register of a gated unit is clocked by its domain's gated clock or by a load
    domain's gate of that clock, never by ``clk``."""
    clocks = set(_unit_clocks(gated, unit).values())
    assert clocks == {domain} | {f"{domain}/{load}" for load in loads}, (unit, clocks)
    assert _driver(_modules(gated)["npu"], f"{domain}_clk") == f"clk & {domain}_open"


def test_vpu_data_stages_load_on_their_own_clocks(gated, ungated):
    """X1 (with S2a's settings) and Y load once per vector: in the simulation build each in a
    load domain, so that S2a's rounding shift, which reads only X1's domain, is evaluated only
    when X1 loads; in the synthesis build, ordinary registers with an enable."""
    vpu = _modules(gated)["npu.vpu"]
    clocks = _unit_clocks(gated, "npu.vpu")
    by_reg = {}
    for clock, body in re.findall(r"always @\(posedge (\w+)\)(.*?)(?=\n  always|\n  assign|endmodule)", vpu, re.S):
        for reg in re.findall(r"^\s*(\w+) <=", body, re.M):
            by_reg[reg] = clocks[clock]
    lanes = SMALL_CONFIG.array_cols
    for n in range(lanes):
        assert by_reg[f"x1_{n}"] == by_reg[f"x1_sh{n}"] == by_reg[f"x1_neg{n}"] == "vector/vpu_x1"
        assert by_reg[f"y_base{n}"] == "vector/vpu_y"
    assert by_reg["x1_shifted"] == by_reg["x1_round"] == by_reg["x1_dr"] == "vector/vpu_x1"
    assert "_open" not in _modules(ungated)["npu.vpu"]


@pytest.mark.parametrize("domain", ["vector", "table", "vector_in"])
def test_the_gates_open_on_the_falling_edge(gated, domain):
    top = _modules(gated)["npu"]
    # the gate register is loaded while the clock is low, so the AND never glitches
    assert re.search(rf"always @\(negedge clk\)\s*\n\s*{domain}_open <=", top)


def test_vector_read_ports_are_in_the_gated_domains(gated):
    """The vector units' operand ports are read on gated clocks: operand a's (shared by VPU,
    TABLE and BRANCH) on vector_in's, b and c and the PSRAM ports on the VPU's; a port left on
    ``clk`` would make its readers' logic evaluate every cycle."""
    top = _modules(gated)["npu"]
    by_memory = {}
    for clock, body in re.findall(r"always @\(posedge (\w+)\) begin\n(.*?)\n  end\n", top, re.S):
        for mem in re.findall(r"<= (asram|wsram|acc|psram)\[", body):
            by_memory.setdefault(mem, []).append(_gated_domain(top, clock))
    assert by_memory["psram"] == ["vector"] * 3
    # the DMA's and the MXU's ASRAM reads on clk (the MXU's transparent ACC read registers its
    # address instead)
    assert sorted(by_memory["asram"]) == ["clk", "clk", "vector", "vector", "vector_in"]
    assert sorted(by_memory["acc"]) == ["vector", "vector", "vector_in"]
    assert by_memory["wsram"] == ["clk"]


@pytest.mark.parametrize("domain", ["vector", "table", "vector_in"])
def test_the_domain_resets_are_registered_on_their_own_clocks(gated, domain):
    """With ``sync``'s reset in their next-state logic, Verilator would evaluate the gated
    units' registers at every ``clk`` edge after all."""
    top = _modules(gated)["npu"]
    clocks = re.findall(r"always @\(posedge (\w+)\)\s*\n\s*\w+ <= rst;", top)
    assert domain in {_gated_domain(top, c) for c in clocks}


def test_synthesis_builds_it_ungated(ungated):
    top = _modules(ungated)["npu"]
    for domain in ("vector", "table", "vector_in"):
        assert _driver(top, f"{domain}_clk") == "clk"
    assert "vector_open" not in ungated and "negedge" not in ungated



def test_mxu_weight_rows_load_on_their_own_clocks(gated, ungated):
    """The weight rows (and row 0's staging row) are clocked, WEIGHT_GATE_ROWS rows a domain,
    only when one of the domain's rows loads; a domain of one row takes its new value
    unconditionally on that clock, with no next-state logic of its own."""
    mxu = _modules(gated)["npu.mxu"]
    rows, cols = SMALL_CONFIG.array_rows, SMALL_CONFIG.array_cols
    clocks = {}
    for clock, reg, value in re.findall(
            r"always @\(posedge (\w+)\)\s*\n\s*(w_\d+_\d+|w0_next_\d+) <= ([^;]+);", mxu):
        clocks.setdefault(clock, {})[reg] = value.strip()
    sizes = [min(WEIGHT_GATE_ROWS, rows + 1 - g) for g in range(0, rows + 1, WEIGHT_GATE_ROWS)]
    assert sorted(len(regs) for regs in clocks.values()) == sorted(n * cols for n in sizes)
    assert sum(len(regs) for regs in clocks.values()) == (rows + 1) * cols
    for regs in clocks.values():
        if len(regs) == cols:
            assert all(re.fullmatch(r"w_in\d+_\d+", v) for v in regs.values()), regs
    # each the module's clock (an input named after the first such domain) AND a gate register
    # loaded on the falling edge
    assert all(re.search(rf"assign {c} = \w+ & (\w+_open);", mxu) for c in clocks)
    assert len(re.findall(r"always @\(negedge \w+\)\s*\n\s*wrow\d+_open <=", mxu)) == len(sizes)
    # ungated: the weights are ordinary registers of clk
    assert not re.search(r"posedge wrow\d+", _modules(ungated)["npu.mxu"])
