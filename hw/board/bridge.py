"""The host bridge: requests from the UART, CSR and memory accesses, one reply per request.

Implements hw/board/protocol.py exactly (its docstring is the specification); the frame
constants come from there, so the gateware and the host cannot disagree.

How a frame is taken apart.  Bytes before a SYNC_REQ are skipped.  The seven header bytes
follow (command, address, length); a write command (CSR_WRITE, MEM_WRITE) is followed by
``length`` payload bytes, any other command by none; then the CRC byte.  The frame length
depends only on the header, so a frame with an unknown command or a bad address is read to
its end and answered in step.  The payload goes into a MAX_PAYLOAD-byte buffer (block RAM),
not into memory: a write whose CRC fails has done nothing.  Checks after the CRC byte, in
this order: CRC (BAD_CRC), command (BAD_COMMAND), address and length (BAD_ADDRESS); only then
does the bridge act.  A frame whose next byte does not come within FRAME_TIMEOUT byte times
(``FRAME_TIMEOUT * 10 * divisor`` cycles) is dropped with a TIMEOUT reply.

Requests are served one at a time: bytes that arrive while the bridge executes a request or
sends its reply are dropped (the host waits for each reply).  Every state that waits for the
outside world waits for the UART (which always finishes a byte) or the memory (which grants
the bridge whenever the NPU makes no request), so the bridge cannot hang.

Cost of one request: the reply starts a few cycles after the CRC byte, except MEM_WRITE, which
first copies the buffer to memory (two cycles per byte when the NPU leaves the memory free).
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hw.board import protocol
from hw.board.extmem import ByteBusSignature
from hw.board.protocol import BOARD_ID, FRAME_TIMEOUT, MAX_PAYLOAD, SYNC_REP, SYNC_REQ, Command, Status
from hw.board.uart import check_divisor
from hw.csr import ADDR_WIDTH
from hw.interfaces import CsrBusSignature

__all__ = ["Bridge", "crc8_step"]

HEADER_BYTES = protocol.REQ_HEADER - 1     # after the sync byte: cmd, addr (4), length (2)


def crc8_step(crc, byte):
    """Next CRC-8/SMBUS value after ``byte`` (Amaranth values; one cycle of XOR logic)."""
    x = crc ^ byte
    for _ in range(8):
        shifted = Cat(Const(0, 1), x[:7])
        x = Mux(x[7], shifted ^ 0x07, shifted)
    return x


class Bridge(wiring.Component):
    """Protocol engine between the UART and the NPU's CSRs and memory.

    Parameters
    ----------
    mem_bytes : int
        Size of the board memory behind ``mem`` (a power of two); memory requests must lie
        inside it.
    divisor : int
        UART clock cycles per bit, for the frame timeout.
    board_id : int
        The PING reply (protocol.BOARD_ID).

    Ports
    -----
    rx_data, rx_valid : In(8), In(1)
        Received bytes (hw/board/uart.UartRx: one cycle per byte, no back-pressure).
    rx_error : In(1)
        A framing error; it counts as line activity for the timeout, the byte is lost.
    tx_data, tx_valid, tx_ready : Out(8), Out(1), In(1)
        Bytes to send (hw/board/uart.UartTx), taken with ``tx_valid & tx_ready``.
    csr : Out(CsrBusSignature(hw.csr.ADDR_WIDTH))
        Master of the NPU's register bus: ``addr`` follows the request's address from the
        header on, so a read samples ``r_data`` at least one cycle later, as the bus requires;
        a write is one ``w_stb`` cycle.
    mem : Out(ByteBusSignature(log2(mem_bytes)))
        The board memory's bridge port (hw/board/extmem.ExtMem).
    """

    def __init__(self, mem_bytes: int, divisor: int, board_id: int = BOARD_ID):
        self.mem_bytes = mem_bytes
        self.divisor = check_divisor(divisor)
        self.board_id = board_id
        self.timeout_cycles = FRAME_TIMEOUT * 10 * self.divisor
        super().__init__({
            "rx_data": In(8),
            "rx_valid": In(1),
            "rx_error": In(1),
            "tx_data": Out(8),
            "tx_valid": Out(1),
            "tx_ready": In(1),
            "csr": Out(CsrBusSignature(ADDR_WIDTH)),
            "mem": Out(ByteBusSignature(exact_log2(mem_bytes))),
        })

    def elaborate(self, platform):
        m = Module()
        rx_byte = self.rx_data

        cmd = Signal(8)
        addr = Signal(32)
        length = Signal(16)
        crc = Signal(8)
        idx = Signal(16)            # byte index in the header, the payload or the reply
        word = Signal(32)           # CSR payload, CSR read data, BOARD_ID
        status = Signal(8)
        rep_len = Signal(16)
        tx_byte = Signal(8)         # a memory byte on its way to the UART
        timer = Signal(range(self.timeout_cycles + 1))

        m.submodules.buffer = buffer = Memory(shape=8, depth=MAX_PAYLOAD, init=[])
        buf_wr = buffer.write_port()
        buf_rd = buffer.read_port()
        m.d.comb += [
            buf_wr.addr.eq(idx),
            buf_wr.data.eq(rx_byte),
            buf_rd.addr.eq(idx),
            buf_rd.en.eq(1),
            self.csr.addr.eq(addr[2:2 + ADDR_WIDTH]),
            self.csr.w_data.eq(word),
            self.mem.addr.eq(addr + idx),
            self.mem.wdata.eq(buf_rd.data),
        ]

        is_write = (cmd == Command.CSR_WRITE) | (cmd == Command.MEM_WRITE)
        csr_ok = (addr[:2] == 0) & (addr[2 + ADDR_WIDTH:] == 0) & (length == 4)
        end = Signal(33)
        m.d.comb += end.eq(addr + length)
        mem_ok = (length != 0) & (length <= MAX_PAYLOAD) & (end <= self.mem_bytes)

        def reply(code, nbytes=0):
            """Go to the reply with status ``code`` and a payload of ``nbytes`` bytes."""
            m.d.sync += [status.eq(code), rep_len.eq(nbytes), idx.eq(0)]
            m.next = "SEND_HEADER"

        def send(byte):
            """Offer ``byte`` to the UART; the caller acts on ``tx_ready``."""
            m.d.comb += [self.tx_valid.eq(1), self.tx_data.eq(byte)]

        in_frame = Signal()
        with m.If(in_frame & ~(self.rx_valid | self.rx_error)):
            m.d.sync += timer.eq(timer + 1)
        with m.Else():
            m.d.sync += timer.eq(0)
        timed_out = in_frame & (timer == self.timeout_cycles)

        with m.FSM(name="bridge"):
            with m.State("HUNT"):
                with m.If(self.rx_valid & (rx_byte == SYNC_REQ)):
                    m.d.sync += [idx.eq(0), crc.eq(0)]
                    m.next = "HEADER"

            with m.State("HEADER"):
                m.d.comb += in_frame.eq(1)
                with m.If(timed_out):
                    reply(Status.TIMEOUT)
                with m.Elif(self.rx_valid):
                    m.d.sync += [crc.eq(crc8_step(crc, rx_byte)), idx.eq(idx + 1)]
                    with m.Switch(idx):
                        with m.Case(0):
                            m.d.sync += cmd.eq(rx_byte)
                        with m.Case(1, 2, 3, 4):
                            m.d.sync += addr.eq(Cat(addr[8:], rx_byte))
                        with m.Case(5):
                            m.d.sync += length.eq(Cat(length[8:], rx_byte))
                        with m.Case(6):
                            new_length = Cat(length[8:], rx_byte)
                            m.d.sync += [length.eq(new_length), idx.eq(0)]
                            with m.If(is_write & (new_length != 0)):
                                m.next = "PAYLOAD"
                            with m.Else():
                                m.next = "CHECK"

            with m.State("PAYLOAD"):
                m.d.comb += in_frame.eq(1)
                with m.If(timed_out):
                    reply(Status.TIMEOUT)
                with m.Elif(self.rx_valid):
                    m.d.comb += buf_wr.en.eq(idx < MAX_PAYLOAD)
                    m.d.sync += [
                        crc.eq(crc8_step(crc, rx_byte)),
                        word.eq(Cat(word[8:], rx_byte)),
                        idx.eq(idx + 1),
                    ]
                    with m.If(idx + 1 == length):
                        m.next = "CHECK"

            with m.State("CHECK"):
                m.d.comb += in_frame.eq(1)
                with m.If(timed_out):
                    reply(Status.TIMEOUT)
                with m.Elif(self.rx_valid):
                    with m.If(rx_byte != crc):
                        reply(Status.BAD_CRC)
                    with m.Else():
                        m.next = "EXECUTE"

            with m.State("EXECUTE"):
                with m.Switch(cmd):
                    with m.Case(Command.PING):
                        m.d.sync += word.eq(self.board_id)
                        reply(Status.OK, 4)
                    with m.Case(Command.CSR_READ):
                        with m.If(csr_ok):
                            m.next = "CSR_READ"
                        with m.Else():
                            reply(Status.BAD_ADDRESS)
                    with m.Case(Command.CSR_WRITE):
                        with m.If(csr_ok):
                            m.d.comb += self.csr.w_stb.eq(1)
                            reply(Status.OK)
                        with m.Else():
                            reply(Status.BAD_ADDRESS)
                    with m.Case(Command.MEM_READ):
                        with m.If(mem_ok):
                            reply(Status.OK, length)
                        with m.Else():
                            reply(Status.BAD_ADDRESS)
                    with m.Case(Command.MEM_WRITE):
                        with m.If(mem_ok):
                            m.d.sync += idx.eq(0)
                            m.next = "COPY_READ"
                        with m.Else():
                            reply(Status.BAD_ADDRESS)
                    with m.Default():
                        reply(Status.BAD_COMMAND)

            with m.State("CSR_READ"):
                m.d.sync += word.eq(self.csr.r_data)
                reply(Status.OK, 4)

            with m.State("COPY_READ"):          # the buffer's read port gives byte idx next cycle
                m.next = "COPY_WRITE"

            with m.State("COPY_WRITE"):
                m.d.comb += [self.mem.valid.eq(1), self.mem.we.eq(1)]
                with m.If(self.mem.ready):
                    with m.If(idx + 1 == length):
                        reply(Status.OK)
                    with m.Else():
                        m.d.sync += idx.eq(idx + 1)
                        m.next = "COPY_READ"

            with m.State("SEND_HEADER"):
                send(Mux(idx == 0, SYNC_REP,
                         Mux(idx == 1, status, Mux(idx == 2, rep_len[:8], rep_len[8:]))))
                with m.If(self.tx_ready):
                    m.d.sync += [crc.eq(Mux(idx == 0, 0, crc8_step(crc, self.tx_data))), idx.eq(idx + 1)]
                    with m.If(idx == 3):
                        m.d.sync += idx.eq(0)
                        with m.If(rep_len == 0):
                            m.next = "SEND_CRC"
                        with m.Elif(cmd == Command.MEM_READ):
                            m.next = "MEM_REQUEST"
                        with m.Else():
                            m.next = "SEND_WORD"

            with m.State("SEND_WORD"):
                send(word.word_select(idx[:2], 8))
                with m.If(self.tx_ready):
                    m.d.sync += [crc.eq(crc8_step(crc, self.tx_data)), idx.eq(idx + 1)]
                    with m.If(idx == 3):
                        m.next = "SEND_CRC"

            with m.State("MEM_REQUEST"):
                m.d.comb += self.mem.valid.eq(1)
                with m.If(self.mem.ready):
                    m.next = "MEM_WAIT"

            with m.State("MEM_WAIT"):
                with m.If(self.mem.rvalid):
                    m.d.sync += tx_byte.eq(self.mem.rdata)
                    m.next = "SEND_MEM"

            with m.State("SEND_MEM"):
                send(tx_byte)
                with m.If(self.tx_ready):
                    m.d.sync += [crc.eq(crc8_step(crc, self.tx_data)), idx.eq(idx + 1)]
                    with m.If(idx + 1 == rep_len):
                        m.next = "SEND_CRC"
                    with m.Else():
                        m.next = "MEM_REQUEST"

            with m.State("SEND_CRC"):
                send(crc)
                with m.If(self.tx_ready):
                    m.next = "HUNT"
        return m
