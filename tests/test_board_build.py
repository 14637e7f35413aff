"""The bitstream flow's own logic, without running the FPGA tools: PLL settings against the
device limits, UART divisors, the command line's errors, and how a failed place-and-route is
reported.  (The tools themselves run in `python -m hw.board build`; docs/fpga.md has results.)"""
from __future__ import annotations

import gc

import pytest

from hw.board.__main__ import main
from hw.board.build import (BOARDS, BuildReport, _failure, _last_block_sum, _log_utilisation, _summary,
                            nextpnr_command_options)
from hw.board.top import ecp5_pll, ice40_pll, uart_divisor


@pytest.mark.parametrize("fout", [25e6, 37.5e6, 50e6, 62.5e6, 75e6, 100e6])
def test_ecp5_pll_within_limits(fout):
    p = ecp5_pll(25e6, fout)
    assert p.fout == pytest.approx(25e6 * p.clkfb_div / p.clki_div)
    assert abs(p.fout - fout) <= 0.01 * fout
    assert 400e6 <= p.fout * p.clkop_div <= 800e6 and 25e6 / p.clki_div >= 3.125e6


@pytest.mark.parametrize("fout", [16e6, 24e6, 30e6, 36e6, 48e6])
def test_ice40_pll_within_limits(fout):
    p = ice40_pll(12e6, fout)
    pfd = 12e6 / (p.divr + 1)
    assert p.fout == pytest.approx(pfd * (p.divf + 1) / 2 ** p.divq)
    assert abs(p.fout - fout) <= 0.01 * fout
    assert 10e6 <= pfd <= 133e6 and 533e6 <= pfd * (p.divf + 1) <= 1066e6
    # icepll's answer for 12 -> 24 MHz
    if fout == 24e6:
        assert (p.divr, p.divf, p.divq, p.filter_range) == (0, 63, 5, 1)


def test_pll_and_divisor_errors():
    with pytest.raises(ValueError, match="cannot make"):
        ice40_pll(12e6, 1e6)
    with pytest.raises(ValueError, match="cannot make"):
        ecp5_pll(25e6, 1e9)
    assert uart_divisor(50e6) == 434 and uart_divisor(24e6) == 208
    with pytest.raises(ValueError, match="115200 baud"):
        uart_divisor(0.3e6)


def test_cli_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["build", "--board", "nexys"])
    assert e.value.code == 2
    assert main(["build", "--board", "icebreaker", "--freq", "900"]) == 3
    assert "cannot make" in capsys.readouterr().err
    assert main(["build", "--board", "icebreaker", "--mem-kib", "3"]) == 3
    assert "power of two" in capsys.readouterr().err
    for bad in (["--seeds", "1,x"], ["--patience", "0"]):
        with pytest.raises(SystemExit) as e:
            main(["build", "--board", "ulx3s", *bad])
        assert e.value.code == 2
        assert bad[1] in capsys.readouterr().err


def test_seeds_option():
    from hw.board.__main__ import _seeds
    assert _seeds("default,7,13") == (None, 7, 13) and _seeds("5") == (5,)


LOG = """\
Info: Device utilisation:
Info: 	         ICESTORM_LC: 41234/ 5280   780%
Info: 	        ICESTORM_RAM:    40/   30   133%
Info: 	              SB_IO:     5/   39    12%
ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'ICESTORM_LC'
"""
YOSYS_LOG = """\
     180 SB_DFFESR
=== top ===
       58   SB_DFF
=== design hierarchy ===
        +----------Count including submodules.
      975 submodules
      120   SB_CARRY
       58   SB_DFF
      180   SB_DFFESR
      574   SB_LUT4

2.51. Executing CHECK pass (checking for obvious problems).
       99   SB_LUT4
"""


def test_failure_names_what_does_not_fit(tmp_path):
    util = _log_utilisation(LOG)
    assert util["ICESTORM_LC"] == (41234, 5280) and util["SB_IO"] == (5, 39)
    report = BuildReport("icebreaker", "npu", "up5k", tmp_path, 24.0, utilisation=util)
    message = _failure("icebreaker", LOG, report, tmp_path)
    assert message.startswith("design does not fit the icebreaker FPGA: ICESTORM_LC 41234/5280, ICESTORM_RAM 40/30")
    assert "\n" not in message
    assert _last_block_sum(YOSYS_LOG, r"SB_DFF\w*") == 238
    summary = _summary(BOARDS["icebreaker"], util, YOSYS_LOG)
    assert summary["LUT"] == (574, 5280) and summary["FF"] == (238, 5280) and summary["BRAM"] == (40, 30)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("board, pll", [("icebreaker", "SB_PLL40_PAD"), ("ulx3s", "EHXPLLL")])
def test_board_top_constrains_the_pll_clock(board, pll):
    """Elaborated for its board (no tools run), the top instantiates the PLL and constrains
    the PLL's output net at the PLL's frequency: the oscillator's constraint alone would leave
    the design clock unchecked."""
    from isa.config import NAMED_CONFIGS

    spec = BOARDS[board]
    top = spec.top(NAMED_CONFIGS[spec.config], 4096, spec.freq_mhz, "bridge")
    platform = spec.platform()
    m = top.elaborate(platform)                     # the top level only: no tools, no buffers
    constraints = {signal.name: freq for signal, freq in platform._clocks.items()}   # before prepare()
    assert constraints == {"pll_clk": top.pll.fout}
    instance = m.submodules.pll
    assert instance.type == pll
    assert instance.ports["CLKOP" if board == "ulx3s" else "PLLOUTGLOBAL"][0].name == "pll_clk"
    del m, top, instance, platform
    gc.collect()            # the half-elaborated design is dropped here, where its warnings are ignored


def test_report_lines_name_the_critical_path(tmp_path):
    """The summary prints the post-route Fmax against the target and the worst path, as
    hw/synth/report.py reads them from nextpnr's report JSON."""
    from hw.synth.report import summarize_pnr

    pnr = {"fmax": {"$glbnet$clk": {"achieved": 21.5, "constraint": 20.0}},
           "critical_paths": [{"path": [
               {"type": "clk-to-q", "from": {"cell": "npu.vpu.x1"}, "to": {"cell": "a"}, "delay": 0.5},
               {"type": "logic", "from": {"cell": "a"}, "to": {"cell": "b"}, "delay": 20.0},
               {"type": "routing", "from": {"cell": "b"}, "to": {"cell": "npu.asram.w"}, "delay": 25.0}]}]}
    report = BuildReport("ulx3s", "npu", "small", tmp_path, 25.0, fmax_mhz=21.5,
                         critical_paths=summarize_pnr(pnr, 25.0)["critical_paths"])
    lines = report.lines()
    assert "  Fmax  21.50 MHz post-route, target 25.00 MHz: MISSES timing" in lines
    assert "  critical path 45.50 ns, 1 logic levels: npu.vpu.x1 -> npu.asram.w" in lines


def test_nextpnr_options_board_default_or_replaced():
    """The ULX3S builds place with the static placer, without timing weights, and route with
    router1 unless told otherwise; given options replace the board's (nextpnr rejects an
    option given twice)."""
    ulx3s, ice = BOARDS["ulx3s"], BOARDS["icebreaker"]
    assert nextpnr_command_options(ulx3s) == ("--report report.json --timing-allow-fail "
                                              "--placer static --no-tmdriv --router router1")
    assert nextpnr_command_options(ulx3s, "--router router1") == "--report report.json --timing-allow-fail --router router1"
    assert nextpnr_command_options(ulx3s, "") == "--report report.json --timing-allow-fail"
    assert nextpnr_command_options(ice) == "--report report.json --timing-allow-fail"
