"""The NPU's external memory on the board: on-chip block RAM shared by the NPU and the host bridge.

One memory of ``mem_bytes // bus_bytes`` bus words with one write port (byte enables) and one
read port, both synchronous: the shape every FPGA block RAM has (ECP5 DP16KD, iCE40
SB_RAM40_4K), so Yosys maps it to block RAM, never to flip-flops.

Sharing.  The NPU owns the memory: its requests are always accepted (``req_ready`` is 1) and
return exactly as in the simulation memory model (hw/harness/tb/tb_top.sv), so the ISA
simulator's cycle counts hold on the board to the cycle.  The bridge gets the ports in the
cycles in which they carry no NPU request (a granted bridge access takes one cycle; the NPU
leaves most cycles free, and when it is stopped all of them).  The host may therefore read
memory while a program runs; it must not write memory the running program uses (the NPU
would see the write at an arbitrary point of its run).

Request register.  With ``mem_latency >= 2`` the NPU's request is registered before it
reaches the block RAM, and one response stage fewer follows the read, so reads still return
``mem_latency`` cycles after the request with the memory as it was then.  Why: the NPU's
request is combinational from deep logic (the sequencer's fetch, decided by a branch
condition read from ACC; the DMA's address and store data), and the board memory's block
RAMs sit far from it.  Unregistered, ACC's block RAM -> branch condition -> fetch request
-> this memory's address was the ULX3S NPU's critical path (43.9 ns post-route, 16 logic
levels, 13 ns of it routing to this memory; docs/fpga.md).  With ``mem_latency == 1`` there
is no cycle to spare and the request drives the ports directly.
"""
from __future__ import annotations

from amaranth import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from isa.config import NpuConfig
from hw.interfaces import ExtBusSignature

__all__ = ["ByteBusSignature", "ExtMem", "check_mem_bytes"]


def check_mem_bytes(config: NpuConfig, mem_bytes: int) -> int:
    """``mem_bytes`` if it is a usable board memory size for ``config``, else ValueError."""
    if not isinstance(mem_bytes, int) or mem_bytes <= 0 or mem_bytes & (mem_bytes - 1):
        raise ValueError(f"board memory size must be a power of two, not {mem_bytes!r}")
    if mem_bytes < config.bus_bytes or mem_bytes > 1 << config.ext_addr_bits:
        raise ValueError(f"board memory of {mem_bytes} bytes does not fit a {config.bus_bytes}-byte bus "
                         f"with {config.ext_addr_bits} address bits")
    return mem_bytes


class ByteBusSignature(wiring.Signature):
    """One-byte memory port, seen from the initiator (the bridge).

    A request (``valid``, ``addr``, ``we``, ``wdata``) is granted in a cycle with
    ``valid & ready``; the initiator holds it until then.  A granted read returns its byte on
    ``rdata`` in the next cycle, flagged by ``rvalid`` (one cycle).  ``ready`` may depend on
    ``valid`` combinationally.
    """

    def __init__(self, addr_width: int):
        super().__init__({
            "valid": Out(1),
            "ready": In(1),
            "addr": Out(addr_width),
            "we": Out(1),
            "wdata": Out(8),
            "rdata": In(8),
            "rvalid": In(1),
        })


class ExtMem(wiring.Component):
    """Block RAM with the NPU's external bus timing and a byte port for the bridge.

    Parameters
    ----------
    config : NpuConfig
        Supplies ``bus_bytes``, ``ext_addr_bits`` and ``mem_latency`` (>= 1).
    mem_bytes : int
        Size of the memory, a power of two.  Build the NPU with ``ext_mem_bytes = mem_bytes``
        so that its DMA range checks stop a program before it leaves the memory; address bits
        above the memory are ignored here.

    Ports
    -----
    bus : In(ExtBusSignature(config))
        The NPU's bus.  A read accepted in cycle c returns in cycle c + mem_latency: the
        request register (``mem_latency >= 2``) holds it in c + 1, the block RAM's read
        register gives the word one cycle after the read, and pipeline registers delay it
        for the rest.  The word is the memory's content at cycle c (a write in cycle c is
        seen by a read in c + 1), as in the simulation model: requests reach the block RAM
        in order, each one cycle late.
    host : In(ByteBusSignature(log2(mem_bytes)))
        The bridge's byte port, granted in a cycle in which the ports carry no NPU request.
    """

    def __init__(self, config: NpuConfig, mem_bytes: int):
        if config.mem_latency < 1:
            raise ValueError("the board memory needs mem_latency >= 1 (its block RAM reads take a cycle)")
        self.config = config
        self.mem_bytes = check_mem_bytes(config, mem_bytes)
        super().__init__({
            "bus": In(ExtBusSignature(config)),
            "host": In(ByteBusSignature(exact_log2(mem_bytes))),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        bus, host = self.bus, self.host
        lane_bits = exact_log2(cfg.bus_bytes)
        depth = self.mem_bytes // cfg.bus_bytes
        word_bits = ceil_log2(depth)

        m.submodules.mem = mem = Memory(shape=8 * cfg.bus_bytes, depth=depth, init=[])
        wr = mem.write_port(granularity=8)
        rd = mem.read_port()

        # the NPU's request as the ports see it: registered (mem_latency >= 2) or direct
        registered = cfg.mem_latency >= 2
        req = {name: getattr(bus, f"req_{name}") for name in ("valid", "we", "addr", "wdata", "be")}
        if registered:
            req_q = {name: Signal.like(v, name=f"req_{name}_q") for name, v in req.items()}
            m.d.sync += [req_q[name].eq(v) for name, v in req.items()]
            req = req_q
        npu_word = req["addr"][lane_bits:lane_bits + word_bits] if word_bits else 0
        host_word = host.addr[lane_bits:] if word_bits else 0
        host_lane = host.addr[:lane_bits] if lane_bits else 0
        grant = host.valid & ~req["valid"]
        m.d.comb += [
            bus.req_ready.eq(1),
            host.ready.eq(grant),
            rd.en.eq(1),
        ]
        with m.If(req["valid"]):
            m.d.comb += [
                rd.addr.eq(npu_word),
                wr.addr.eq(npu_word),
                wr.data.eq(req["wdata"]),
            ]
            with m.If(req["we"]):
                m.d.comb += wr.en.eq(req["be"])
        with m.Else():
            m.d.comb += [
                rd.addr.eq(host_word),
                wr.addr.eq(host_word),
                wr.data.eq(host.wdata.replicate(cfg.bus_bytes)),
            ]
            with m.If(grant & host.we):
                m.d.comb += wr.en.eq(Const(1, cfg.bus_bytes) << host_lane)

        # NPU read responses: valid after mem_latency cycles, data after the request register
        # (if any), the read register and the pipeline stages left.
        valid = Signal(name="resp_valid_0")
        m.d.sync += valid.eq(req["valid"] & ~req["we"])
        data = rd.data
        for i in range(1 + registered, cfg.mem_latency):
            nv, nd = Signal(name=f"resp_valid_{i}"), Signal.like(rd.data, name=f"resp_data_{i}")
            m.d.sync += [nv.eq(valid), nd.eq(data)]
            valid, data = nv, nd
        m.d.comb += [bus.resp_valid.eq(valid), bus.resp_rdata.eq(data)]

        # Bridge read responses: the byte of the word read in the previous cycle.
        lane = Signal(max(lane_bits, 1))
        m.d.sync += [host.rvalid.eq(grant & ~host.we), lane.eq(host_lane)]
        m.d.comb += host.rdata.eq(rd.data.word_select(lane, 8) if lane_bits else rd.data[:8])
        return m
