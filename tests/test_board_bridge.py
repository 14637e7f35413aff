"""The host bridge, the UART and the board memory in Amaranth's simulator (no NPU).

A bit-level host UART model speaks hw/board/protocol.py to ``BridgeCore``; expected replies
come from protocol.py's own encoder (``encode_reply``) and a Python model of the memory.
The NPU side of the memory timing is checked in ``test_extmem_npu_timing``; the whole board
with the NPU runs under Verilator in cocotb_tests/test_board_top.py.
"""
from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from isa.config import SMALL_CONFIG
from hw.board import protocol
from hw.board.core import BridgeCore
from hw.board.extmem import ExtMem
from hw.board.protocol import BOARD_ID, FRAME_TIMEOUT, Command, Status, encode_reply, encode_request
from hw.board.uart import UartRx, UartTx

DIV = 4
MEM = 4096


class HostUart:
    """Bit-level host side of the serial line inside an Amaranth testbench."""

    def __init__(self, ctx, rx, tx, divisor):
        self.ctx, self.rx, self.tx, self.div = ctx, rx, tx, divisor

    async def send(self, data: bytes, stop: int = 1):
        for byte in data:
            for b in [0] + [(byte >> i) & 1 for i in range(8)] + [stop]:
                self.ctx.set(self.rx, b)
                await self.ctx.tick().repeat(self.div)
        self.ctx.set(self.rx, 1)

    async def recv_byte(self, limit: int) -> int | None:
        """The next byte on the board's TX line, None if none starts within ``limit`` cycles."""
        for _ in range(limit):
            if self.ctx.get(self.tx) == 0:
                break
            await self.ctx.tick()
        else:
            return None
        await self.ctx.tick().repeat(self.div // 2)
        assert self.ctx.get(self.tx) == 0, "start bit too short"
        value = 0
        for i in range(8):
            await self.ctx.tick().repeat(self.div)
            value |= self.ctx.get(self.tx) << i
        await self.ctx.tick().repeat(self.div)
        assert self.ctx.get(self.tx) == 1, "stop bit low"
        return value

    async def recv_reply(self, limit: int = 4000) -> bytes:
        frame = b""
        size = protocol.REP_HEADER
        while len(frame) < size:
            byte = await self.recv_byte(limit)
            assert byte is not None, f"no reply byte after {frame.hex() or 'nothing'}"
            frame += bytes([byte])
            if len(frame) == protocol.REP_HEADER:
                size = protocol.reply_size(frame)
        return frame

    async def request(self, frame: bytes) -> bytes:
        await self.send(frame)
        return await self.recv_reply()


def run_bridge(script):
    dut = BridgeCore(SMALL_CONFIG, MEM, DIV)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def bench(ctx):
        ctx.set(dut.uart_rx, 1)
        await ctx.tick().repeat(5)
        await script(HostUart(ctx, dut.uart_rx, dut.uart_tx, DIV))

    sim.add_testbench(bench)
    sim.run()


def test_uart_loopback_and_framing_error():
    """TX into RX: every byte value arrives; a low stop bit is a framing error, not a byte."""
    tx, rx = UartTx(5), UartRx(5)
    got, errors = [], []

    async def bench(ctx):
        for value in (0x00, 0xFF, 0xA5, 0x5A, 0x01, 0x80):
            while not ctx.get(tx.ready):
                await ctx.tick()
            ctx.set(tx.data, value)
            ctx.set(tx.valid, 1)
            await ctx.tick()
            ctx.set(tx.valid, 0)
        for _ in range(12 * 5):
            await ctx.tick()

    async def wire(ctx):
        async for line, in ctx.changed(tx.tx):
            ctx.set(rx.rx, line)

    async def monitor(ctx):
        async for _, _, valid, error, data in ctx.tick().sample(rx.valid, rx.error, rx.data):
            if valid:
                got.append(data)
            if error:
                errors.append(data)

    from amaranth import Module
    m = Module()
    m.submodules.tx, m.submodules.rx = tx, rx
    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_process(wire)
    sim.add_process(monitor)
    sim.run()
    assert got == [0x00, 0xFF, 0xA5, 0x5A, 0x01, 0x80] and not errors

    # framing error
    rx2 = UartRx(4)
    flags = []

    async def bench2(ctx):
        ctx.set(rx2.rx, 1)
        await ctx.tick().repeat(4)
        for b in [0] + [1, 0, 1, 0, 1, 0, 1, 0] + [0] * 3 + [1] * 3:
            ctx.set(rx2.rx, b)
            for _ in range(4):
                await ctx.tick()
                flags.append((ctx.get(rx2.valid), ctx.get(rx2.error)))

    sim = Simulator(rx2)
    sim.add_clock(1e-6)
    sim.add_testbench(bench2)
    sim.run()
    assert sum(e for _, e in flags) == 1 and sum(v for v, _ in flags) == 0


def test_bridge_requests():
    rng = random.Random(3)
    data = bytes(rng.randrange(256) for _ in range(37))

    async def script(host):
        assert await host.request(encode_request(Command.PING)) == encode_reply(Status.OK, BOARD_ID.to_bytes(4, "little"))
        # junk (including a lone reply sync byte) before a frame is skipped
        await host.send(b"\x00\x5a\xff\x13")
        assert await host.request(encode_request(Command.PING)) == encode_reply(Status.OK, BOARD_ID.to_bytes(4, "little"))
        # write, read back (unaligned address, odd length)
        assert await host.request(encode_request(Command.MEM_WRITE, 101, len(data), data)) == encode_reply(Status.OK)
        assert await host.request(encode_request(Command.MEM_READ, 101, len(data))) == encode_reply(Status.OK, data)
        assert await host.request(encode_request(Command.MEM_READ, 100, 1)) == encode_reply(Status.OK, b"\x00")
        # bad CRC on a write: the reply says so and memory is unchanged
        bad = bytearray(encode_request(Command.MEM_WRITE, 101, 2, b"\x11\x22"))
        bad[-1] ^= 1
        assert await host.request(bytes(bad)) == encode_reply(Status.BAD_CRC)
        assert await host.request(encode_request(Command.MEM_READ, 101, 2)) == encode_reply(Status.OK, data[:2])
        # unknown command, bad addresses and lengths
        assert await host.request(encode_request(0x77, 0, 0)) == encode_reply(Status.BAD_COMMAND)
        assert await host.request(encode_request(Command.MEM_READ, MEM - 2, 3)) == encode_reply(Status.BAD_ADDRESS)
        assert await host.request(encode_request(Command.MEM_READ, 0, 0)) == encode_reply(Status.BAD_ADDRESS)
        assert await host.request(encode_request(Command.MEM_READ, 0xFFFF_FFFF, 1)) == encode_reply(Status.BAD_ADDRESS)
        assert await host.request(encode_request(Command.MEM_WRITE, MEM, 1, b"\x01")) == encode_reply(Status.BAD_ADDRESS)
        assert await host.request(encode_request(Command.CSR_READ, 2, 4)) == encode_reply(Status.BAD_ADDRESS)
        assert await host.request(encode_request(Command.CSR_READ, 0x100, 4)) == encode_reply(Status.BAD_ADDRESS)
        assert await host.request(encode_request(Command.CSR_WRITE, 0x10, 2, b"\x01\x02")) == encode_reply(Status.BAD_ADDRESS)
        # no register file behind the bring-up image: reads are zero
        assert await host.request(encode_request(Command.CSR_READ, 0x40, 4)) == encode_reply(Status.OK, bytes(4))
        # last byte of memory
        assert await host.request(encode_request(Command.MEM_WRITE, MEM - 1, 1, b"\xee")) == encode_reply(Status.OK)
        assert await host.request(encode_request(Command.MEM_READ, MEM - 1, 1)) == encode_reply(Status.OK, b"\xee")
        # a truncated frame times out, then the bridge serves the next one
        await host.send(encode_request(Command.MEM_READ, 0, 4)[:5])
        assert await host.recv_byte(FRAME_TIMEOUT * 10 * DIV - 100) is None
        assert await host.recv_reply(400) == encode_reply(Status.TIMEOUT)
        assert await host.request(encode_request(Command.PING)) == encode_reply(Status.OK, BOARD_ID.to_bytes(4, "little"))

    run_bridge(script)


@pytest.mark.parametrize("latency", [1, 2, 3])
def test_extmem_npu_timing(latency):
    """NPU reads return exactly mem_latency cycles after acceptance with the memory as it was
    then; the bridge port is granted only in cycles in which the ports carry no NPU request:
    the cycle without a request (latency 1) or the one after it (the request register)."""
    import dataclasses

    cfg = dataclasses.replace(SMALL_CONFIG, mem_latency=latency)
    dut = ExtMem(cfg, 256)
    log = []

    async def bench(ctx):
        bus, host = dut.bus, dut.host
        ctx.set(host.valid, 0)              # the bridge asks from cycle 1 until granted
        ctx.set(host.we, 1)
        ctx.set(host.addr, 9)
        ctx.set(host.wdata, 0xAB)
        script = [("w", 8, 0x11223344, 0b1111), ("r", 8, 0, 0), ("w", 8, 0x55667788, 0b0101),
                  ("r", 8, 0, 0), (None, 0, 0, 0), ("r", 8, 0, 0)]
        for cycle in range(len(script) + latency + 2):
            op = script[cycle] if cycle < len(script) else (None, 0, 0, 0)
            if cycle == 1:
                ctx.set(host.valid, 1)
            ctx.set(bus.req_valid, op[0] is not None)
            ctx.set(bus.req_we, op[0] == "w")
            ctx.set(bus.req_addr, op[1])
            ctx.set(bus.req_wdata, op[2])
            ctx.set(bus.req_be, op[3])
            log.append((cycle, ctx.get(bus.req_ready), ctx.get(host.ready),
                        ctx.get(bus.resp_valid), ctx.get(bus.resp_rdata)))
            granted = ctx.get(host.ready)
            await ctx.tick()
            if granted:                     # the bridge holds its request until granted
                ctx.set(host.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert all(ready for _, ready, *_ in log)
    assert [c for c, _, granted, *_ in log if granted] == [4 if latency == 1 else 5]   # the one free cycle
    responses = [(c, data) for c, _, _, valid, data in log if valid]
    # the host wrote 0xAB into byte 1 of word 2 (address 9) when granted, after every NPU write
    assert responses == [(1 + latency, 0x11223344), (3 + latency, 0x11663388), (5 + latency, 0x1166AB88)]
