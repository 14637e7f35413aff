"""Control and status registers: the register map (as data) and the block that implements it.

The map below is the one definition of the host interface; the firmware header and the
cocotb harness read it from here.  Registers are 32 bits at word-aligned byte offsets; the
CSR bus addresses words (``offset // 4``).

Run protocol: write PROG_ADDR and PROG_LEN, optionally IRQ_ENABLE, then CTRL.START.  The
NPU runs the PROG_LEN 256-bit instructions at external byte address PROG_ADDR (fetching
them while it runs, hw/sequencer.py: any length) and stops on HALT or on an error, setting
STATUS.DONE or STATUS.ERROR, ERROR_CODE and STOP_PC, and raising IRQ_STATUS.PENDING.

Start checks, in this order, stop the NPU before it reads anything (STOP_PC 0):
PROG_ADDR not a multiple of bus_bytes is DMA_MISALIGNED; PROG_ADDR + 32 * PROG_LEN >
ext_mem_bytes is DMA_OUT_OF_RANGE.

Watchdog: with MAX_CYCLES = M > 0, from the cycle in which CYCLES reaches M (cycle M after
START) the block holds ``abort`` high; the sequencer then issues nothing more and stops with
WATCHDOG once every unit is idle (sim/npu_timing.py states the exact rule).  The driver sets
it from the program's cycle estimate plus a margin, so a program that loops forever ends
with an error and the interrupt instead of hanging.  A counter and a comparator beside the
cycle counter: the check costs no cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from isa.instructions import ErrorCode
from hw.interfaces import CSR_DATA_BITS, CsrBusSignature

COUNTER_BITS = 64
HW_ID = 0x4E505531  # "NPU1": register map version 1


@dataclass(frozen=True)
class Bits:
    name: str
    lsb: int
    width: int
    doc: str


@dataclass(frozen=True)
class Reg:
    name: str
    offset: int
    access: str          # "r", "w", "rw", "rw1c" (read, write 1 to clear)
    doc: str
    bits: tuple[Bits, ...] = ()


REGISTERS: tuple[Reg, ...] = (
    Reg("CTRL", 0x00, "w", "control", (
        Bits("START", 0, 1, "write 1: boot and run the program (ignored while busy)"),)),
    Reg("STATUS", 0x04, "r", "state of the NPU", (
        Bits("BUSY", 0, 1, "booting or running"),
        Bits("DONE", 1, 1, "stopped on HALT"),
        Bits("ERROR", 2, 1, "stopped on an error (see ERROR_CODE)"))),
    Reg("ERROR_CODE", 0x08, "r", "isa.ErrorCode of the last stop (0 after HALT)"),
    Reg("STOP_PC", 0x0C, "r", "index of the instruction the NPU stopped at (HALT or the failing one)"),
    Reg("PROG_ADDR", 0x10, "rw", "external byte address of the first instruction"),
    Reg("PROG_LEN", 0x14, "rw", "number of 256-bit instructions to boot"),
    Reg("IRQ_ENABLE", 0x18, "rw", "interrupt enable", (Bits("STOP", 0, 1, "interrupt when the NPU stops"),)),
    Reg("IRQ_STATUS", 0x1C, "rw1c", "interrupt status", (
        Bits("PENDING", 0, 1, "the NPU stopped; write 1 to clear (START clears it too)"),)),
    Reg("CYCLES_LO", 0x20, "r", "cycles from START to the stop, low word"),
    Reg("CYCLES_HI", 0x24, "r", "cycles, high word"),
    Reg("DMA_BUSY_LO", 0x28, "r", "cycles the DMA unit was busy, low word"),
    Reg("DMA_BUSY_HI", 0x2C, "r", "DMA busy cycles, high word"),
    Reg("MXU_BUSY_LO", 0x30, "r", "cycles the matrix unit was busy, low word"),
    Reg("MXU_BUSY_HI", 0x34, "r", "MXU busy cycles, high word"),
    Reg("VPU_BUSY_LO", 0x38, "r", "cycles the vector unit was busy, low word"),
    Reg("VPU_BUSY_HI", 0x3C, "r", "VPU busy cycles, high word"),
    Reg("HW_ID", 0x40, "r", f"constant {HW_ID:#x} (register map version)"),
    Reg("HW_CONFIG", 0x44, "r", "the configuration the NPU was built with", (
        Bits("ARRAY_ROWS", 0, 8, "NpuConfig.array_rows"),
        Bits("ARRAY_COLS", 8, 8, "NpuConfig.array_cols"),
        Bits("BUS_BYTES", 16, 8, "NpuConfig.bus_bytes"),
        Bits("MEM_LATENCY", 24, 8, "NpuConfig.mem_latency, saturated at 255"))),
    Reg("MAX_CYCLES", 0x48, "rw", "watchdog: stop with WATCHDOG when CYCLES reaches this value "
        "(nothing more issues; issued work completes); 0 disables"),
)

BY_NAME = {r.name: r for r in REGISTERS}
ADDR_WIDTH = 6   # room for 64 registers
assert max(r.offset for r in REGISTERS) // 4 < 1 << ADDR_WIDTH
UNITS = ("DMA", "MXU", "VPU")


def word_index(name: str) -> int:
    """CSR bus address (word index) of a register."""
    return BY_NAME[name].offset // 4


def bit(reg: str, field: str) -> int:
    """Mask of a one-bit field, e.g. ``bit("STATUS", "DONE")``."""
    b = next(b for b in BY_NAME[reg].bits if b.name == field)
    return ((1 << b.width) - 1) << b.lsb


def hw_config_value(config: NpuConfig) -> int:
    """Value of the HW_CONFIG register for ``config`` (fields saturate at their width)."""
    value = 0
    for b in BY_NAME["HW_CONFIG"].bits:
        value |= min(getattr(config, b.name.lower()), (1 << b.width) - 1) << b.lsb
    return value


def _field(reg: str, field: str) -> Bits:
    return next(b for b in BY_NAME[reg].bits if b.name == field)


class CsrBlock(wiring.Component):
    """Register file, run status, performance counters and the interrupt line.

    Ports (besides ``bus``): ``start`` (to the sequencer, one cycle), ``prog_addr`` and
    ``prog_len``; ``abort`` (to the sequencer: the watchdog tripped); from the sequencer ``running`` (booting or running), ``stop`` (one cycle,
    with ``stop_code``/``stop_pc``); ``unit_busy`` (bit i: unit i of isa.Unit); ``irq``.
    """

    def __init__(self, config: NpuConfig):
        self.config = config
        super().__init__({
            "bus": In(CsrBusSignature(ADDR_WIDTH)),
            "start": Out(1),
            "prog_addr": Out(CSR_DATA_BITS),
            "prog_len": Out(CSR_DATA_BITS),
            "running": In(1),
            "stop": In(1),
            "stop_code": In(8),
            "stop_pc": In(CSR_DATA_BITS),
            "unit_busy": In(len(UNITS)),
            "irq": Out(1),
            "stopped": Out(1),
            "abort": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus = self.bus

        done = Signal()
        error = Signal()
        error_code = Signal(8)
        stop_pc = Signal(CSR_DATA_BITS)
        irq_enable = Signal()
        irq_pending = Signal()
        cycles = Signal(COUNTER_BITS)
        busy_counters = [Signal(COUNTER_BITS, name=f"{u.lower()}_busy") for u in UNITS]

        def writes(name):
            return bus.w_stb & (bus.addr == word_index(name))

        start = writes("CTRL") & bus.w_data[_field("CTRL", "START").lsb] & ~self.running
        m.d.comb += self.start.eq(start)

        with m.If(writes("PROG_ADDR")):
            m.d.sync += self.prog_addr.eq(bus.w_data)
        with m.If(writes("PROG_LEN")):
            m.d.sync += self.prog_len.eq(bus.w_data)
        max_cycles = Signal(CSR_DATA_BITS)
        with m.If(writes("MAX_CYCLES")):
            m.d.sync += max_cycles.eq(bus.w_data)
        m.d.comb += self.abort.eq(self.running & (max_cycles != 0) & (cycles >= max_cycles))
        with m.If(writes("IRQ_ENABLE")):
            m.d.sync += irq_enable.eq(bus.w_data[_field("IRQ_ENABLE", "STOP").lsb])
        with m.If(writes("IRQ_STATUS") & bus.w_data[_field("IRQ_STATUS", "PENDING").lsb]):
            m.d.sync += irq_pending.eq(0)

        with m.If(self.running):
            m.d.sync += cycles.eq(cycles + 1)
            for i, counter in enumerate(busy_counters):
                with m.If(self.unit_busy[i]):
                    m.d.sync += counter.eq(counter + 1)
        with m.If(start):
            m.d.sync += [done.eq(0), error.eq(0), error_code.eq(0), stop_pc.eq(0),
                         irq_pending.eq(0), cycles.eq(0)]
            m.d.sync += [c.eq(0) for c in busy_counters]
        with m.If(self.stop):
            m.d.sync += [
                done.eq(self.stop_code == ErrorCode.NONE),
                error.eq(self.stop_code != ErrorCode.NONE),
                error_code.eq(self.stop_code),
                stop_pc.eq(self.stop_pc),
                irq_pending.eq(1),
            ]
        m.d.comb += [
            self.irq.eq(irq_pending & irq_enable),
            self.stopped.eq(done | error),
        ]

        hw_config = hw_config_value(cfg)
        values = {
            "STATUS": Cat(self.running, done, error),
            "ERROR_CODE": error_code,
            "STOP_PC": stop_pc,
            "PROG_ADDR": self.prog_addr,
            "PROG_LEN": self.prog_len,
            "IRQ_ENABLE": irq_enable,
            "IRQ_STATUS": irq_pending,
            "CYCLES_LO": cycles[:32],
            "CYCLES_HI": cycles[32:],
            "HW_ID": Const(HW_ID, 32),
            "HW_CONFIG": Const(hw_config, 32),
            "MAX_CYCLES": max_cycles,
        }
        for unit, counter in zip(UNITS, busy_counters):
            values[f"{unit}_BUSY_LO"] = counter[:32]
            values[f"{unit}_BUSY_HI"] = counter[32:]
        with m.Switch(bus.addr):
            for reg in REGISTERS:
                if "r" in reg.access:
                    with m.Case(word_index(reg.name)):
                        m.d.sync += bus.r_data.eq(values[reg.name])
            with m.Default():
                m.d.sync += bus.r_data.eq(0)
        return m
