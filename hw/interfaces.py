"""Signatures shared between NPU blocks: external memory bus, CSR bus, unit control.

All are written from the point of view of the *initiator* (the block that drives the
request); the target uses ``In(...)`` (the flipped signature).
"""
from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa.config import NpuConfig

CSR_DATA_BITS = 32


class ExtBusSignature(wiring.Signature):
    """External memory bus, one ``bus_bytes`` word per transfer, seen from the NPU.

    A request is accepted in a cycle with ``req_valid & req_ready``; ``req_addr`` is a byte
    address (a multiple of ``bus_bytes``).  Writes are posted and write only the bytes whose
    bit is set in ``req_be`` (byte n of the word: bit n; reads ignore it).  Read data return in order on
    ``resp_valid``/``resp_rdata`` exactly ``config.mem_latency`` cycles after acceptance; the
    NPU always accepts responses.
    """

    def __init__(self, config: NpuConfig):
        bits = 8 * config.bus_bytes
        super().__init__({
            "req_valid": Out(1),
            "req_ready": In(1),
            "req_addr": Out(config.ext_addr_bits),
            "req_we": Out(1),
            "req_wdata": Out(bits),
            "req_be": Out(config.bus_bytes),
            "resp_valid": In(1),
            "resp_rdata": In(bits),
        })


class CsrBusSignature(wiring.Signature):
    """Register bus, seen from the host: ``addr`` is a 32-bit word index (byte offset / 4).

    A write happens in a cycle with ``w_stb``.  ``r_data`` is registered: it shows the
    register addressed in the previous cycle.
    """

    def __init__(self, addr_width: int):
        super().__init__({
            "addr": Out(addr_width),
            "w_stb": Out(1),
            "w_data": Out(CSR_DATA_BITS),
            "r_data": In(CSR_DATA_BITS),
        })


class UnitCtlSignature(wiring.Signature):
    """Sequencer -> execution unit, seen from the sequencer.

    ``start`` for one cycle hands ``cmd`` over (only when ``ready``).  ``ready``: the unit can
    take a command now.  ``busy``: the unit still has work in flight; a unit with no work
    and no command is idle.  Both are functions of the unit's registers only, so a command
    given in cycle c shows in ``busy``/``ready`` from cycle c+1.
    """

    def __init__(self, cmd_layout):
        super().__init__({
            "start": Out(1),
            "cmd": Out(cmd_layout),
            "ready": In(1),
            "busy": In(1),
        })
