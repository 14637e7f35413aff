"""A simulated FPGA board on a pseudo-terminal: the UART bridge of hw/board/protocol.py in
front of the NPU's registers (hw/csr.py) and its external memory, with the ISA simulator as
the NPU.

The host side (the C driver's UART transport, ``npu board``) talks to it exactly as to a
board: it opens :attr:`BoardEmulator.port` (the pty's slave side, e.g. ``/dev/pts/7``),
sends request frames and reads reply frames.  The emulator reads the master side byte by
byte, with the bridge's behaviour:

* bytes before a SYNC_REQ are skipped; a frame whose bytes stop arriving for
  ``frame_timeout`` seconds is dropped with a TIMEOUT reply;
* a bad CRC gets BAD_CRC, an unknown command BAD_COMMAND, a memory access outside
  ``[0, mem_size)`` or a length of 0 or more than MAX_PAYLOAD, a misaligned CSR address, a
  CSR length other than 4 or an offset past the register block get BAD_ADDRESS; an error
  reply has no payload and the request has done nothing;
* CSR semantics are those of hw/csr.py: CTRL.START (ignored while busy) runs the program
  PROG_LEN instructions at PROG_ADDR from memory on the ISA simulator, with MAX_CYCLES as its
  watchdog; STATUS then reads BUSY for ``busy_polls`` reads before the results appear (so
  the host's polling is exercised), and the final memory, STOP_PC, ERROR_CODE, the counters
  and IRQ_STATUS.PENDING are set as CsrBlock does.

Faults for tests: ``corrupt_replies`` (indices of replies whose CRC byte is flipped),
``mute_after`` (answer that many requests, then nothing), ``hw_id`` and ``hw_config``
(identify as another NPU).  ``log`` records every request as (command, addr, length,
reply status).

Run one by hand (it prints the port and serves until interrupted)::

    python -m npu.board_emulator --config small
"""
from __future__ import annotations

import argparse
import os
import select
import struct
import sys
import threading
import time
import tty

from hw.board.protocol import (MAX_PAYLOAD, REQ_HEADER, SYNC_REQ, BOARD_ID, Command, Status, crc8,
                               encode_reply)
from hw.csr import HW_ID, REGISTERS, UNITS, bit, hw_config_value
from isa.config import NpuConfig
from isa.program import Program

__all__ = ["BoardEmulator", "main"]

REG_SPAN = 4 * 64           # bytes of the register block (hw/csr.py: ADDR_WIDTH word bits)


def _frame_bytes(pending: bytearray) -> int:
    """Length of the request frame that starts ``pending`` as far as its header tells: a
    write carries the payload its length declares (a length past MAX_PAYLOAD is not a
    payload the bridge accepts: the frame ends after the header and fails its CRC)."""
    if len(pending) >= REQ_HEADER and pending[1] in (Command.CSR_WRITE, Command.MEM_WRITE):
        length = struct.unpack_from("<H", pending, 6)[0]
        if length <= MAX_PAYLOAD:
            return REQ_HEADER + length + 1
    return REQ_HEADER + 1


class BoardEmulator:
    """A board with an NPU of ``config`` behind a UART bridge on a new pty.

    Parameters
    ----------
    config : NpuConfig
        The NPU the board carries: HW_CONFIG reads ``hw_config_value(config)``.
    mem_size : int, optional
        Bytes of external memory (default ``config.ext_mem_bytes``).
    busy_polls : int
        STATUS reads that see BUSY after START before the run's results appear.
    frame_timeout : float
        Seconds of silence that end a partial request frame (the bridge counts
        FRAME_TIMEOUT byte times; a pty has no baud rate).
    corrupt_replies : iterable of int
        Reply numbers (0 = the first reply) sent with their CRC byte inverted.
    mute_after : int, optional
        Requests answered before the board falls silent (it still reads them).
    hw_id, hw_config : int, optional
        Values of HW_ID and HW_CONFIG, to pose as another NPU.

    Use as a context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(self, config: NpuConfig, mem_size: int | None = None, busy_polls: int = 2,
                 frame_timeout: float = 0.05, corrupt_replies=(), mute_after: int | None = None,
                 hw_id: int = HW_ID, hw_config: int | None = None):
        self.config = config
        self.memory = bytearray(config.ext_mem_bytes if mem_size is None else mem_size)
        self.busy_polls, self.frame_timeout = busy_polls, frame_timeout
        self.corrupt_replies, self.mute_after = set(corrupt_replies), mute_after
        self.fixed = {"HW_ID": hw_id, "HW_CONFIG": hw_config_value(config) if hw_config is None else hw_config}
        self.regs = {"PROG_ADDR": 0, "PROG_LEN": 0, "IRQ_ENABLE": 0, "IRQ_STATUS": 0, "ERROR_CODE": 0,
                     "STOP_PC": 0, "MAX_CYCLES": 0}
        self.status = 0
        self.counters = {"CYCLES": 0, **{f"{u}_BUSY": 0 for u in UNITS}}
        self.by_offset = {r.offset: r for r in REGISTERS}
        self.log: list[tuple[str, int, int, str]] = []
        self.replies = 0
        self.requests = 0
        self.starts = 0
        self.last_run = None            # the ISA simulator's IsaResult of the last START
        self.error: BaseException | None = None   # an exception in the serving thread
        self._pending = None
        self._polls_left = 0
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)          # no echo or line editing before the host configures it
        self.port = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="board-emulator", daemon=True)

    # -- lifetime -------------------------------------------------------------------------------
    def start(self) -> "BoardEmulator":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "BoardEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the UART side -------------------------------------------------------------------------
    def _read(self, timeout: float | None) -> bytes:
        """Bytes from the host, b"" after ``timeout`` seconds (None: until stopped)."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self._stop.is_set():
            wait = 0.05 if end is None else max(0.0, min(0.05, end - time.monotonic()))
            ready, _, _ = select.select([self._master], [], [], wait)
            if ready:
                try:
                    return os.read(self._master, 4096)
                except OSError:         # no slave open at the moment: nothing to read
                    time.sleep(0.01)
            elif end is not None and time.monotonic() >= end:
                return b""
        return b""

    def _serve(self) -> None:
        try:
            self._serve_frames()
        except BaseException as e:          # noqa: BLE001 - kept for the test to report
            self.error = e

    def _serve_frames(self) -> None:
        pending = bytearray()
        while not self._stop.is_set():
            if not pending:
                pending += self._read(None)
                continue
            start = pending.find(SYNC_REQ)
            if start < 0:
                pending.clear()
                continue
            del pending[:start]
            # Header, then the payload it declares; a silence ends the frame with TIMEOUT.
            timed_out = False
            while len(pending) < _frame_bytes(pending):
                chunk = self._read(self.frame_timeout)
                if not chunk:
                    timed_out = True
                    break
                pending += chunk
            if self._stop.is_set():
                return
            if timed_out:
                pending.clear()
                self._reply(("?", 0, 0), Status.TIMEOUT)
                continue
            need = _frame_bytes(pending)
            frame, pending = bytes(pending[:need]), pending[need:]
            self._handle(frame)

    def _reply(self, what: tuple, status: Status, payload: bytes = b"") -> None:
        self.requests += 1
        self.log.append((*what, status.name))
        if self.mute_after is not None and self.requests > self.mute_after:
            return
        frame = bytearray(encode_reply(status, payload))
        if self.replies in self.corrupt_replies:
            frame[-1] ^= 0xFF
        self.replies += 1
        os.write(self._master, bytes(frame))

    def _handle(self, frame: bytes) -> None:
        cmd, addr, length = struct.unpack_from("<BIH", frame, 1)
        try:
            name = Command(cmd).name
        except ValueError:
            name = f"0x{cmd:02x}"
        what = (name, addr, length)
        if crc8(frame[1:-1]) != frame[-1]:
            return self._reply(what, Status.BAD_CRC)
        if name.startswith("0x"):
            return self._reply(what, Status.BAD_COMMAND)
        payload = frame[REQ_HEADER:-1]
        if cmd == Command.PING:
            return self._reply(what, Status.OK, struct.pack("<I", BOARD_ID))
        if cmd in (Command.CSR_READ, Command.CSR_WRITE):
            if addr % 4 or length != 4 or addr >= REG_SPAN:
                return self._reply(what, Status.BAD_ADDRESS)
            if cmd == Command.CSR_READ:
                return self._reply(what, Status.OK, struct.pack("<I", self._csr_read(addr)))
            self._csr_write(addr, struct.unpack("<I", payload)[0])
            return self._reply(what, Status.OK)
        if not 1 <= length <= MAX_PAYLOAD or addr + length > len(self.memory):
            return self._reply(what, Status.BAD_ADDRESS)
        if cmd == Command.MEM_READ:
            return self._reply(what, Status.OK, bytes(self.memory[addr:addr + length]))
        self.memory[addr:addr + length] = payload
        return self._reply(what, Status.OK)

    # -- the NPU's registers ---------------------------------------------------------------------
    def _csr_read(self, offset: int) -> int:
        reg = self.by_offset.get(offset)
        if reg is None or "r" not in reg.access:
            return 0
        if reg.name == "STATUS":
            if self._pending is not None:
                self._polls_left -= 1
                if self._polls_left < 0:
                    self._finish()
            return self.status
        if reg.name in self.fixed:
            return self.fixed[reg.name]
        if reg.name[:-3] in self.counters:
            return self.counters[reg.name[:-3]] >> (32 if reg.name.endswith("_HI") else 0) & 0xFFFFFFFF
        return self.regs[reg.name]

    def _csr_write(self, offset: int, value: int) -> None:
        reg = self.by_offset.get(offset)
        if reg is None or "w" not in reg.access:
            return
        busy = self.status & bit("STATUS", "BUSY")
        if reg.name == "CTRL":
            if value & bit("CTRL", "START") and not busy:
                self._start()
        elif reg.name == "IRQ_STATUS":
            if value & bit("IRQ_STATUS", "PENDING"):
                self.regs["IRQ_STATUS"] = 0
        elif reg.name == "IRQ_ENABLE":
            self.regs[reg.name] = value & bit("IRQ_ENABLE", "STOP")
        else:
            self.regs[reg.name] = value

    def _start(self) -> None:
        from sim.isa.sim import IsaSim

        self.starts += 1
        self.status = bit("STATUS", "BUSY")
        self.regs.update(ERROR_CODE=0, STOP_PC=0, IRQ_STATUS=0)
        self.counters = dict.fromkeys(self.counters, 0)
        # The NPU knows the program only through PROG_ADDR, PROG_LEN and memory.
        boot = Program(self.config, [None] * self.regs["PROG_LEN"], program_addr=self.regs["PROG_ADDR"])
        # The NPU reaches only the first ext_mem_bytes of the board's memory.
        image = bytes(self.memory[:self.config.ext_mem_bytes])
        self._pending = IsaSim(self.config).run(boot, image, max_cycles=self.regs["MAX_CYCLES"])
        self._polls_left = self.busy_polls

    def _finish(self) -> None:
        r, self._pending = self._pending, None
        self.last_run = r
        n = min(len(r.memory), len(self.memory))
        self.memory[:n] = r.memory[:n]
        self.status = bit("STATUS", "DONE") if r.ok else bit("STATUS", "ERROR")
        self.regs.update(ERROR_CODE=int(r.error_code), STOP_PC=r.stop_pc,
                         IRQ_STATUS=bit("IRQ_STATUS", "PENDING"))
        self.counters = {"CYCLES": r.cycles, **{f"{u}_BUSY": r.busy.get(u, 0) for u in UNITS}}


def main(argv: list[str] | None = None) -> int:
    from npu.config import load_config

    parser = argparse.ArgumentParser(prog="python -m npu.board_emulator",
                                     description="Serve a simulated NPU board on a pseudo-terminal.")
    parser.add_argument("--config", default=None, metavar="NAME|FILE.json",
                        help="the NPU's configuration (as `npu compile --config`; default: 'default')")
    parser.add_argument("--mem-size", type=int, default=None, metavar="BYTES",
                        help="external memory (default: the configuration's ext_mem_bytes)")
    args = parser.parse_args(argv)
    board = BoardEmulator(load_config(args.config), mem_size=args.mem_size)
    print(f"board emulator on {board.port} (Ctrl-C stops it)", flush=True)
    with board:
        try:
            while not board.error:
                time.sleep(0.2)
        except KeyboardInterrupt:
            return 0
    print(f"board emulator failed: {board.error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
