"""cocotb side of cocotb_tests/test_board_top.py: a bit-level host UART on the board core's pins.

The host speaks hw/board/protocol.py exactly as a PC behind a USB-serial adapter would (frames
built and checked by protocol.py's own encoder and decoder), so these tests exercise the
UART, the bridge, the board memory and the NPU's CSRs together.  Settings come from the
environment (set by the pytest side):

BOARD_DIV      UART clock cycles per bit
BOARD_PLAN     JSON: the program to run (memory image file, PROG_ADDR, PROG_LEN, output
               ranges, cycle limit); absent: only the link tests run
BOARD_RESULT   JSON file the model test writes (output bytes and registers)
"""
from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from hw.board import protocol
from hw.board.protocol import BOARD_ID, FRAME_TIMEOUT, MAX_PAYLOAD, Command, Status, encode_reply, encode_request
from hw.csr import HW_ID, REGISTERS, BY_NAME, bit

PERIOD = 2
DIV = int(os.environ.get("BOARD_DIV", "8"))


class NoReply(Exception):
    pass


async def reset(dut):
    Clock(dut.clk, PERIOD, unit="step").start()
    dut.uart_rx.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 4)


async def send(dut, data: bytes):
    """Drive ``data`` onto the board's RX line, DIV cycles per bit (changes on falling edges)."""
    await FallingEdge(dut.clk)
    for byte in data:
        for level in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
            dut.uart_rx.value = level
            await ClockCycles(dut.clk, DIV, rising=False)


async def recv_byte(dut, limit: int) -> int:
    for _ in range(limit):
        await ReadOnly()
        if not int(dut.uart_tx.value):
            break
        await RisingEdge(dut.clk)
    else:
        raise NoReply(f"no byte within {limit} cycles")
    await ClockCycles(dut.clk, DIV // 2)
    await ReadOnly()
    assert int(dut.uart_tx.value) == 0, "start bit too short"
    value = 0
    for i in range(9):
        await ClockCycles(dut.clk, DIV)
        await ReadOnly()
        if i < 8:
            value |= int(dut.uart_tx.value) << i
    assert int(dut.uart_tx.value) == 1, "framing error: stop bit low"
    await RisingEdge(dut.clk)
    return value


async def recv_reply(dut, limit: int = 2000) -> bytes:
    frame = b""
    size = protocol.REP_HEADER
    while len(frame) < size:
        frame += bytes([await recv_byte(dut, limit)])
        if len(frame) == protocol.REP_HEADER:
            size = protocol.reply_size(frame)
    return frame


async def transact(dut, frame: bytes, limit: int = 2000) -> bytes:
    """Send a frame and return the reply, whose first bit must come within ``limit`` cycles of
    the frame's last byte.  The receiver listens from that byte's start bit on: the bridge
    may answer before the host has finished driving the stop bit."""
    await send(dut, frame[:-1])
    rx = cocotb.start_soon(recv_reply(dut, limit + 10 * DIV))
    await send(dut, frame[-1:])
    return await rx


async def csr_read(dut, name: str) -> int:
    status, payload = protocol.decode_reply(await transact(dut, encode_request(Command.CSR_READ, BY_NAME[name].offset, 4)))
    assert status == Status.OK, f"CSR_READ {name}: {status!r}"
    return int.from_bytes(payload, "little")


async def csr_write(dut, name: str, value: int) -> None:
    frame = encode_request(Command.CSR_WRITE, BY_NAME[name].offset, 4, value.to_bytes(4, "little"))
    assert await transact(dut, frame) == encode_reply(Status.OK), f"CSR_WRITE {name}"


async def mem_write(dut, addr: int, data: bytes) -> None:
    for at in range(0, len(data), MAX_PAYLOAD):
        chunk = data[at:at + MAX_PAYLOAD]
        reply = await transact(dut, encode_request(Command.MEM_WRITE, addr + at, len(chunk), chunk),
                               limit=4 * len(chunk) + 2000)
        assert reply == encode_reply(Status.OK), f"MEM_WRITE at {addr + at:#x}: {reply.hex()}"


async def mem_read(dut, addr: int, length: int) -> bytes:
    out = b""
    for at in range(0, length, MAX_PAYLOAD):
        n = min(MAX_PAYLOAD, length - at)
        status, payload = protocol.decode_reply(await transact(dut, encode_request(Command.MEM_READ, addr + at, n)))
        assert status == Status.OK and len(payload) == n, f"MEM_READ at {addr + at:#x}: {status!r}"
        out += payload
    return out


@cocotb.test()
async def link(dut):
    """PING, HW_ID, memory round trip, and every error the protocol defines."""
    await reset(dut)
    ping = encode_reply(Status.OK, BOARD_ID.to_bytes(4, "little"))
    assert await transact(dut, encode_request(Command.PING)) == ping
    assert await csr_read(dut, "HW_ID") == HW_ID

    data = bytes((7 * i + 3) & 0xFF for i in range(45))
    await mem_write(dut, 0x203, data)
    assert await mem_read(dut, 0x203, len(data)) == data

    bad = bytearray(encode_request(Command.CSR_WRITE, BY_NAME["PROG_ADDR"].offset, 4, b"\x40\0\0\0"))
    bad[-1] ^= 0x80
    assert await transact(dut, bytes(bad)) == encode_reply(Status.BAD_CRC)
    assert await csr_read(dut, "PROG_ADDR") == 0, "a write with a bad CRC changed the register"

    assert await transact(dut, encode_request(0x42, 0, 0)) == encode_reply(Status.BAD_COMMAND)
    mem_bytes = int(os.environ["BOARD_MEM_BYTES"])
    for frame in (encode_request(Command.MEM_READ, mem_bytes - 4, 8),
                  encode_request(Command.MEM_READ, 0, MAX_PAYLOAD + 1),
                  encode_request(Command.MEM_WRITE, mem_bytes, 1, b"\x01"),
                  encode_request(Command.CSR_READ, 0x41, 4),
                  encode_request(Command.CSR_READ, 0x400, 4)):
        assert await transact(dut, frame) == encode_reply(Status.BAD_ADDRESS), frame.hex()

    # A truncated frame: nothing for FRAME_TIMEOUT byte times, then TIMEOUT.
    silence = FRAME_TIMEOUT * 10 * DIV
    await send(dut, encode_request(Command.MEM_READ, 0, 4)[:6])
    try:
        await recv_byte(dut, silence - 50)
        raise AssertionError("the bridge answered a truncated frame before its timeout")
    except NoReply:
        pass
    assert await recv_reply(dut, 200) == encode_reply(Status.TIMEOUT)

    # Junk (with a reply sync byte in it) before a frame is skipped.
    await send(dut, b"\x00\xff\x5a\x13")
    assert await transact(dut, encode_request(Command.PING)) == ping


@cocotb.test()
async def run_model(dut):
    """Load a compiled program over the link, start it by CSR writes, poll STATUS, read back."""
    plan_path = os.environ.get("BOARD_PLAN")
    if not plan_path:
        return
    with open(plan_path) as f:
        plan = json.load(f)
    await reset(dut)
    with open(plan["image"], "rb") as f:
        image = f.read()
    await mem_write(dut, 0, image)
    assert await mem_read(dut, 0, min(len(image), 256)) == image[:256]
    await csr_write(dut, "PROG_ADDR", plan["prog_addr"])
    await csr_write(dut, "PROG_LEN", plan["prog_len"])
    await csr_write(dut, "IRQ_ENABLE", bit("IRQ_ENABLE", "STOP"))
    await csr_write(dut, "MAX_CYCLES", plan["watchdog"])
    await csr_write(dut, "CTRL", bit("CTRL", "START"))
    polls = 0
    while True:
        status = await csr_read(dut, "STATUS")
        polls += 1
        if not status & bit("STATUS", "BUSY"):
            break
        assert polls < plan["max_polls"], "the NPU did not stop"
    await ReadOnly()
    result = {"irq": int(dut.irq.value), "stopped": int(dut.stopped.value), "polls": polls,
              "registers": {}, "outputs": []}
    await RisingEdge(dut.clk)
    for reg in REGISTERS:
        if "r" in reg.access:
            result["registers"][reg.name] = await csr_read(dut, reg.name)
    for addr, length in plan["outputs"]:
        result["outputs"].append((await mem_read(dut, addr, length)).hex())
    with open(os.environ["BOARD_RESULT"], "w") as f:
        json.dump(result, f)
