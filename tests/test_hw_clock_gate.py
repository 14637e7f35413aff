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


@pytest.mark.parametrize("unit, domain", [("npu.vpu", "vector"), ("npu.table", "table")])
def test_vector_and_table_units_run_on_their_own_clocks(gated, unit, domain):
    edges = set(re.findall(r"always @\((\w+) (\w+)\)", _modules(gated)[unit]))
    assert edges == {("posedge", f"{domain}_clk")}, (unit, edges)
    assert _driver(_modules(gated)["npu"], f"{domain}_clk") == f"clk & {domain}_open"


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
