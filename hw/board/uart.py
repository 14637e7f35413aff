"""UART receiver and transmitter, 8N1 (one start bit, eight data bits LSB first, one stop bit).

The bit time is ``divisor`` clock cycles, fixed when the hardware is built: 115200 baud at a
50 MHz clock is ``divisor=434`` (0.01 % off); the simulated board top uses a divisor of 8 so
that a byte takes 80 cycles.  Both blocks are plain counters and shift registers: a few dozen
LUTs each, and no clock-domain crossing beyond the receiver's input synchronizer.
"""
from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx", "check_divisor"]

MIN_DIVISOR = 4


def check_divisor(divisor: int) -> int:
    """``divisor`` if it is a usable bit time in cycles, else ValueError naming the problem."""
    if not isinstance(divisor, int) or divisor < MIN_DIVISOR:
        raise ValueError(f"UART divisor must be an integer >= {MIN_DIVISOR} cycles per bit, not {divisor!r}")
    return divisor


class UartTx(wiring.Component):
    """8N1 transmitter with a stream-like byte input.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (>= 4).

    Ports
    -----
    data : In(8)
        Byte to send, taken in a cycle with ``valid & ready``.
    valid : In(1)
        ``data`` holds a byte to send.
    ready : Out(1)
        The transmitter is idle and takes ``data`` this cycle.  It is a function of the
        transmitter's registers only (no combinational path from ``valid``).
    tx : Out(1)
        The serial line, idle high.

    Timing: the start bit begins in the cycle after the byte is taken; the line then carries
    10 bits of ``divisor`` cycles each, and ``ready`` rises again in the last cycle of the stop
    bit, so back-to-back bytes leave no idle time between stop and start bits.
    """

    def __init__(self, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({
            "data": In(8),
            "valid": In(1),
            "ready": Out(1),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        shift = Signal(9)                               # data bits then the stop bit, LSB first
        bits_left = Signal(range(11))                   # bits still to put on the line
        timer = Signal(range(self.divisor))

        last_cycle = (bits_left == 0) | ((bits_left == 1) & (timer == 0))
        m.d.comb += self.ready.eq(last_cycle)
        with m.If(self.valid & self.ready):
            m.d.sync += [
                self.tx.eq(0),                          # start bit
                shift.eq(self.data | (1 << 8)),
                bits_left.eq(10),
                timer.eq(self.divisor - 1),
            ]
        with m.Elif(bits_left != 0):
            with m.If(timer == 0):
                m.d.sync += [
                    timer.eq(self.divisor - 1),
                    bits_left.eq(bits_left - 1),
                ]
                with m.If(bits_left != 1):
                    m.d.sync += [self.tx.eq(shift[0]), shift.eq(shift >> 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m


class UartRx(wiring.Component):
    """8N1 receiver with a valid-only byte output.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (>= 4).

    Ports
    -----
    rx : In(1)
        The serial line (asynchronous; idle high).  Two flip-flops synchronise it, so it is
        seen two cycles late.
    data : Out(8)
        The last byte received; valid in the cycle of ``valid``.
    valid : Out(1)
        One cycle: a byte with a good stop bit has arrived.  There is no back-pressure: the
        consumer takes the byte in that cycle (the next one is at least ``9.5 * divisor``
        cycles away).
    error : Out(1)
        One cycle: framing error, the stop bit was low.  The byte is dropped and the receiver
        waits for the line to go high again (a break is one error, not a stream of bytes).

    Timing: a falling edge starts the start bit; the line is sampled in the middle of each bit
    (``divisor // 2`` cycles after the edge, then every ``divisor`` cycles).  A start bit that
    is high again at its middle is a glitch and is ignored.  ``valid`` or ``error`` comes in
    the cycle after the middle of the stop bit, so the receiver is ready for the next start
    bit half a bit time before it can begin.
    """

    def __init__(self, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "data": Out(8),
            "valid": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        sync0 = Signal(init=1)
        line = Signal(init=1)
        m.d.sync += [sync0.eq(self.rx), line.eq(sync0)]   # two-flop synchronizer

        timer = Signal(range(self.divisor))
        bit_index = Signal(range(9))
        shift = Signal(8)
        m.d.comb += self.data.eq(shift)
        m.d.sync += [self.valid.eq(0), self.error.eq(0)]
        tick = timer == 0
        with m.If(~tick):
            m.d.sync += timer.eq(timer - 1)

        with m.FSM(name="uart_rx"):
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(tick):
                    with m.If(line):
                        m.next = "IDLE"                 # glitch: not a start bit
                    with m.Else():
                        m.d.sync += [timer.eq(self.divisor - 1), bit_index.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(tick):
                    m.d.sync += [
                        shift.eq((shift >> 1) | (line << 7)),
                        timer.eq(self.divisor - 1),
                        bit_index.eq(bit_index + 1),
                    ]
                    with m.If(bit_index == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(tick):
                    with m.If(line):
                        m.d.sync += self.valid.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += self.error.eq(1)
                        m.next = "BREAK"
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        return m
