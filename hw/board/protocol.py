"""The host bridge's wire protocol: frames over the board's UART (8N1), one definition for
the gateware (hw/board/bridge.py), the host (npu/board.py) and the C driver's UART transport
(firmware/, constants generated from this module).

Request (host -> board), all integers little-endian::

    SYNC_REQ (0xA5) | cmd (1) | addr (4) | length (2) | payload (length bytes, writes only) | crc (1)

Reply (board -> host)::

    SYNC_REP (0x5A) | status (1) | length (2) | payload (length bytes, reads only) | crc (1)

``crc`` is CRC-8 (polynomial 0x07, init 0, no reflection, no final XOR: CRC-8/SMBUS) over
every byte after the sync byte.  Commands:

============  =====  =========================================================
command       value  meaning
============  =====  =========================================================
CSR_READ      0x01   read the 32-bit NPU register at byte offset ``addr``
                     (``length`` = 4); the reply carries 4 bytes
CSR_WRITE     0x02   write the 4-byte payload to the register at ``addr``
MEM_READ      0x03   read ``length`` bytes of the NPU's external memory from ``addr``
MEM_WRITE     0x04   write the payload to external memory at ``addr``
PING          0x05   no operation: the reply carries the 4-byte BOARD_ID
============  =====  =========================================================

A memory access must lie inside the board's external memory, ``length`` between 1 and
MAX_PAYLOAD; a CSR access needs ``addr`` 4-aligned and ``length`` 4.  Every request gets
exactly one reply; on an error the reply has an error ``status`` and no payload, and the
bridge has done nothing.  A frame whose bytes stop arriving for more than FRAME_TIMEOUT
byte times is dropped with a TIMEOUT reply, so a host that dies mid-frame never wedges the
bridge; bytes before a SYNC_REQ are skipped.  The host retries a request (CSR writes to
CTRL excepted: they start the NPU) after BAD_CRC or TIMEOUT.
"""
from __future__ import annotations

import enum
import struct

__all__ = ["SYNC_REQ", "SYNC_REP", "MAX_PAYLOAD", "FRAME_TIMEOUT", "BOARD_ID", "Command", "Status",
           "crc8", "encode_request", "encode_reply", "decode_reply", "reply_size", "ProtocolError"]

SYNC_REQ = 0xA5
SYNC_REP = 0x5A
MAX_PAYLOAD = 1024          # bytes of one MEM_READ / MEM_WRITE
FRAME_TIMEOUT = 64          # byte times of silence that end a partial frame
BOARD_ID = 0x4E50_5542      # "BUPN": the bridge answers PING with it
REQ_HEADER = 1 + 1 + 4 + 2  # sync, cmd, addr, length
REP_HEADER = 1 + 1 + 2      # sync, status, length


class Command(enum.IntEnum):
    CSR_READ = 0x01
    CSR_WRITE = 0x02
    MEM_READ = 0x03
    MEM_WRITE = 0x04
    PING = 0x05


class Status(enum.IntEnum):
    OK = 0x00
    BAD_CRC = 0x01          # the frame's CRC does not match
    BAD_COMMAND = 0x02      # unknown command byte
    BAD_ADDRESS = 0x03      # outside memory, misaligned CSR, or a bad length
    TIMEOUT = 0x04          # the frame stopped arriving


class ProtocolError(Exception):
    """A reply that is not a well-formed frame (the message says what is wrong)."""


def crc8(data: bytes, crc: int = 0) -> int:
    """CRC-8/SMBUS (polynomial x^8 + x^2 + x + 1)."""
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def encode_request(cmd: Command, addr: int = 0, length: int = 0, payload: bytes = b"") -> bytes:
    body = struct.pack("<BIH", int(cmd), addr, length) + payload
    return bytes([SYNC_REQ]) + body + bytes([crc8(body)])


def encode_reply(status: Status, payload: bytes = b"") -> bytes:
    body = struct.pack("<BH", int(status), len(payload)) + payload
    return bytes([SYNC_REP]) + body + bytes([crc8(body)])


def reply_size(header: bytes) -> int:
    """Total bytes of the reply frame that starts with ``header`` (its first REP_HEADER bytes):
    how many bytes a host reads before it calls :func:`decode_reply`."""
    if len(header) < REP_HEADER or header[0] != SYNC_REP:
        raise ProtocolError(f"not a reply header: {bytes(header[:REP_HEADER]).hex() or 'empty'}")
    return REP_HEADER + struct.unpack_from("<H", header, 2)[0] + 1


def decode_reply(frame: bytes) -> tuple[Status, bytes]:
    """(status, payload) of one complete reply frame."""
    if len(frame) < REP_HEADER + 1 or frame[0] != SYNC_REP:
        raise ProtocolError(f"not a reply frame ({len(frame)} bytes, first 0x{frame[:1].hex() or '--'})")
    status, length = struct.unpack_from("<BH", frame, 1)
    if len(frame) != REP_HEADER + length + 1:
        raise ProtocolError(f"reply of {len(frame)} bytes declares a {length}-byte payload")
    if crc8(frame[1:-1]) != frame[-1]:
        raise ProtocolError("reply CRC mismatch")
    try:
        return Status(status), frame[REP_HEADER:-1]
    except ValueError:
        raise ProtocolError(f"unknown reply status 0x{status:02x}") from None
