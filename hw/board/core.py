"""What the board's FPGA holds, without pins: NPU, board memory, host bridge and UART.

``BoardCore`` is the unit that simulates (cocotb_tests/test_board_top.py) and that the board
top levels (hw/board/top.py) wrap with a PLL and pins.  ``BridgeCore`` is the bring-up image:
the same bridge and memory with no NPU, for testing the link on a real board.
"""
from __future__ import annotations

import dataclasses

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig
from hw.board.bridge import Bridge
from hw.board.extmem import ExtMem, check_mem_bytes
from hw.board.uart import UartRx, UartTx
from hw.top import Npu

__all__ = ["BoardCore", "BridgeCore", "board_config"]


def board_config(config: NpuConfig, mem_bytes: int) -> NpuConfig:
    """``config`` with its external memory shrunk to the board's ``mem_bytes``.

    The NPU on a board is built for this configuration, so its DMA range checks match the
    memory that exists; compile programs for it (``Program.config`` must equal it).
    """
    check_mem_bytes(config, mem_bytes)
    return dataclasses.replace(config, ext_mem_bytes=mem_bytes)


class _SerialCore(wiring.Component):
    """What both board cores share: the board configuration, memory size, UART divisor and
    ports (``uart_rx``, ``uart_tx``, ``irq``, ``stopped``); see :class:`BoardCore`."""

    def __init__(self, config: NpuConfig, mem_bytes: int, divisor: int):
        self.config = board_config(config, mem_bytes)
        self.mem_bytes = mem_bytes
        self.divisor = divisor
        super().__init__({
            "uart_rx": In(1, init=1),
            "uart_tx": Out(1, init=1),
            "irq": Out(1),
            "stopped": Out(1),
        })


class BoardCore(_SerialCore):
    """NPU + board memory + bridge + UART, one clock domain (``sync``).

    Parameters
    ----------
    config : NpuConfig
        The NPU's configuration; the NPU is built for ``board_config(config, mem_bytes)``.
    mem_bytes : int
        Board memory (block RAM), a power of two.
    divisor : int
        UART clock cycles per bit (clock frequency / baud rate).

    Ports
    -----
    uart_rx : In(1)
        Serial line from the host (asynchronous, idle high).
    uart_tx : Out(1)
        Serial line to the host.
    irq, stopped : Out(1)
        The NPU's interrupt and "stopped" lines, for LEDs.
    """

    def elaborate(self, platform):
        m = Module()
        m.submodules.npu = npu = Npu(self.config)
        m.submodules.extmem = extmem = ExtMem(self.config, self.mem_bytes)
        wiring.connect(m, npu.bus, extmem.bus)
        _link(m, self, extmem, npu.csr)
        m.d.comb += [self.irq.eq(npu.irq), self.stopped.eq(npu.stopped)]
        return m


class BridgeCore(_SerialCore):
    """The bring-up image: bridge + board memory + UART, no NPU.

    CSR reads answer 0 (no register file is behind the bus) and CSR writes do nothing;
    PING and memory reads and writes behave as in ``BoardCore``.  Ports as ``BoardCore``
    (``irq`` and ``stopped`` stay low).
    """

    def elaborate(self, platform):
        m = Module()
        m.submodules.extmem = extmem = ExtMem(self.config, self.mem_bytes)
        m.d.comb += extmem.bus.req_valid.eq(0)
        _link(m, self, extmem, None)
        return m


def _link(m: Module, core, extmem: ExtMem, csr) -> None:
    """UART receiver and transmitter, and the bridge between them, the memory and ``csr``."""
    m.submodules.uart_rx = rx = UartRx(core.divisor)
    m.submodules.uart_tx = tx = UartTx(core.divisor)
    m.submodules.bridge = bridge = Bridge(core.mem_bytes, core.divisor)
    m.d.comb += [
        rx.rx.eq(core.uart_rx),
        core.uart_tx.eq(tx.tx),
        bridge.rx_data.eq(rx.data),
        bridge.rx_valid.eq(rx.valid),
        bridge.rx_error.eq(rx.error),
        tx.data.eq(bridge.tx_data),
        tx.valid.eq(bridge.tx_valid),
        bridge.tx_ready.eq(tx.ready),
    ]
    wiring.connect(m, bridge.mem, extmem.host)
    if csr is not None:
        wiring.connect(m, bridge.csr, csr)
    else:
        m.d.comb += bridge.csr.r_data.eq(0)
