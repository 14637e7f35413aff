"""Board top levels: ``BoardCore`` (hw/board/core.py) behind an FPGA PLL and the board's pins.

``Ulx3sTop`` (Radiona ULX3S, Lattice ECP5-85F, 25 MHz oscillator, FTDI UART) and
``IcebreakerTop`` (1BitSquared iCEBreaker, iCE40 UP5K, 12 MHz oscillator, FTDI UART) clock the
design from the FPGA's PLL (ECP5 EHXPLLL, iCE40 SB_PLL40_PAD) at ``freq_mhz`` and give the
PLL output its own clock constraint: the board oscillator's constraint only covers the input
pin, and nextpnr's ``--freq`` is ignored once any constraint exists.  The design is held in
reset until the PLL locks.  LEDs: 0 = the NPU stopped (STATUS.DONE or ERROR), 1 = interrupt.

``design="bridge"`` builds the bring-up image (``BridgeCore``: bridge and memory, no NPU).
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from isa.config import NpuConfig
from hw.board.core import BoardCore, BridgeCore, board_config

__all__ = ["BoardCore", "BridgeCore", "board_config", "Ulx3sTop", "IcebreakerTop", "Ecp5Pll", "Ice40Pll",
           "ecp5_pll", "ice40_pll", "uart_divisor", "DESIGNS"]

DESIGNS = ("npu", "bridge")
BAUD = 115200


def uart_divisor(freq_hz: float, baud: int = BAUD) -> int:
    """Cycles per UART bit at ``freq_hz``; ValueError if the baud rate would be off by > 2 %."""
    divisor = round(freq_hz / baud)
    if divisor < 4 or abs(freq_hz / divisor - baud) > 0.02 * baud:
        raise ValueError(f"{freq_hz / 1e6:g} MHz cannot make {baud} baud (divisor {divisor})")
    return divisor


@dataclass(frozen=True)
class Ecp5Pll:
    """EHXPLLL dividers: fout = fin * clkfb_div / clki_div, VCO = fout * clkop_div."""
    clki_div: int
    clkfb_div: int
    clkop_div: int
    fout: float


def ecp5_pll(fin: float, fout: float) -> Ecp5Pll:
    """The EHXPLLL setting closest to ``fout`` (Hz) within the ECP5 data sheet's limits
    (PFD 3.125-400 MHz, VCO 400-800 MHz, dividers 1-128; feedback from CLKOP)."""
    best = None
    for clki in range(1, 129):
        pfd = fin / clki
        if not 3.125e6 <= pfd <= 400e6:
            continue
        for fb in range(1, 81):
            out = pfd * fb
            for op in range(1, 129):
                if 400e6 <= out * op <= 800e6:
                    err = abs(out - fout)
                    if best is None or err < best[0]:
                        best = (err, Ecp5Pll(clki, fb, op, out))
    if best is None or best[0] > 0.01 * fout:
        raise ValueError(f"the ECP5 PLL cannot make {fout / 1e6:g} MHz from {fin / 1e6:g} MHz")
    return best[1]


@dataclass(frozen=True)
class Ice40Pll:
    """SB_PLL40 dividers (SIMPLE feedback): fout = fin * (divf + 1) / ((divr + 1) * 2**divq)."""
    divr: int
    divf: int
    divq: int
    filter_range: int
    fout: float


def ice40_pll(fin: float, fout: float) -> Ice40Pll:
    """The SB_PLL40 setting closest to ``fout`` (Hz) within the iCE40 limits (PFD 10-133 MHz,
    VCO 533-1066 MHz, the loop filter range for the PFD as in icepll)."""
    best = None
    for divr in range(16):
        pfd = fin / (divr + 1)
        if not 10e6 <= pfd <= 133e6:
            continue
        for divf in range(128):
            vco = pfd * (divf + 1)
            if not 533e6 <= vco <= 1066e6:
                continue
            for divq in range(1, 7):
                out = vco / 2 ** divq
                err = abs(out - fout)
                if best is None or err < best[0]:
                    rng = next(i for i, hi in enumerate((17e6, 26e6, 44e6, 66e6, 101e6, 134e6), 1) if pfd < hi)
                    best = (err, Ice40Pll(divr, divf, divq, rng, out))
    if best is None or best[0] > 0.01 * fout:
        raise ValueError(f"the iCE40 PLL cannot make {fout / 1e6:g} MHz from {fin / 1e6:g} MHz")
    return best[1]


class _BoardTop(Elaboratable):
    """Shared part of the board tops: the core, the UART pins, the LEDs and the reset."""

    clock_resource: str
    input_hz: float

    def __init__(self, config: NpuConfig, mem_bytes: int, freq_mhz: float, design: str = "npu",
                 baud: int = BAUD):
        if design not in DESIGNS:
            raise ValueError(f"unknown design {design!r} (choose from {', '.join(DESIGNS)})")
        self.freq_hz = freq_mhz * 1e6
        self.pll = self._solve_pll(self.input_hz, self.freq_hz)
        self.divisor = uart_divisor(self.pll.fout, baud)
        core_class = BoardCore if design == "npu" else BridgeCore
        self.core = core_class(config, mem_bytes, self.divisor)
        self.design = design

    def elaborate(self, platform):
        m = Module()
        # The constraint goes on the PLL's output net; ``keep`` stops Yosys from merging it
        # into the domain's clock net under another name (nextpnr would then not find it).
        pll_clk = Signal(attrs={"keep": 1})
        locked = Signal()
        self._pll(platform, m, pll_clk, locked)
        platform.add_clock_constraint(pll_clk, self.pll.fout)
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(pll_clk)
        m.submodules.reset_sync = ResetSynchronizer(~locked, domain="sync")

        m.submodules.core = core = self.core
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.submodules.led_stopped = led_stopped = io.Buffer("o", platform.request("led", 0, dir="-"))
        m.submodules.led_irq = led_irq = io.Buffer("o", platform.request("led", 1, dir="-"))
        m.d.comb += [
            core.uart_rx.eq(rx.i),
            tx.o.eq(core.uart_tx),
            led_stopped.o.eq(core.stopped),
            led_irq.o.eq(core.irq),
        ]
        return m


class Ulx3sTop(_BoardTop):
    """ULX3S (ECP5-85F) top: EHXPLLL from the 25 MHz oscillator.

    Parameters
    ----------
    config : NpuConfig
    mem_bytes : int
        Board memory in block RAM.
    freq_mhz : float
        Design clock (the PLL's closest setting is used; ``pll.fout`` has it).
    design : str
        "npu" (BoardCore) or "bridge" (BridgeCore).
    baud : int
        UART baud rate (115200).
    """

    clock_resource = "clk25"
    input_hz = 25e6

    @staticmethod
    def _solve_pll(fin, fout):
        return ecp5_pll(fin, fout)

    def _pll(self, platform, m, clk_out, locked):
        p = self.pll
        m.submodules.clk_buf = clk_buf = io.Buffer("i", platform.request(self.clock_resource, 0, dir="-"))
        clk_in = clk_buf.i
        m.submodules.pll = Instance(
            "EHXPLLL",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p.clki_div, p_CLKFB_DIV=p.clkfb_div, p_FEEDBK_PATH="CLKOP",
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p.clkop_div, p_CLKOP_CPHASE=p.clkop_div - 1,
            p_CLKOP_FPHASE=0,
            a_FREQUENCY_PIN_CLKI=f"{self.input_hz / 1e6:g}", a_FREQUENCY_PIN_CLKOP=f"{p.fout / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            i_CLKI=clk_in, i_CLKFB=clk_out, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=0, i_PHASESTEP=0, i_PHASELOADREG=0, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=clk_out, o_LOCK=locked,
        )


class IcebreakerTop(_BoardTop):
    """iCEBreaker (iCE40 UP5K) top: SB_PLL40_PAD on the 12 MHz oscillator's pin.

    Parameters as :class:`Ulx3sTop`.  The UP5K's PLL reaches 16-275 MHz; its fabric runs a
    small design at a few tens of MHz.
    """

    clock_resource = "clk12"
    input_hz = 12e6

    @staticmethod
    def _solve_pll(fin, fout):
        return ice40_pll(fin, fout)

    def _pll(self, platform, m, clk_out, locked):
        p = self.pll
        # The 12 MHz oscillator is on pin 35, the PLL's own input pad: an input buffer there
        # would block the PLL, so SB_PLL40_PAD takes the raw pin.
        clk_pin = platform.request(self.clock_resource, 0, dir="-")
        m.submodules.pll = Instance(
            "SB_PLL40_PAD",
            p_FEEDBACK_PATH="SIMPLE", p_DIVR=p.divr, p_DIVF=p.divf, p_DIVQ=p.divq,
            p_FILTER_RANGE=p.filter_range,
            i_PACKAGEPIN=clk_pin.io, i_RESETB=1, i_BYPASS=0,
            o_PLLOUTGLOBAL=clk_out, o_LOCK=locked,
        )
