"""Clock domains for logic that is idle most of the time, gated in simulation builds.

Why.  Verilator evaluates a clock domain's logic at every edge of its clock, whether its
inputs changed or not: in a MATMUL-bound program the idle vector and TABLE units were about
half of the 16x16 model's evaluation time (PERFORMANCE.md, "RTL simulation speed"), and
register enables did not help, because the values feeding the registers are computed
unconditionally.  Logic clocked by a gated clock is evaluated only at that clock's edges, so
a unit in a domain of its own that the gate closes while the unit is idle costs nothing.

How.  ``add_unit_domain`` adds a domain whose clock is the ``sync`` clock AND a gate
register loaded on the falling edge (the latch of a clock-gating cell: the AND's other input
changes only while the clock is low, so the gated clock never glitches).  Its reset is
``sync``'s, one register later (on the domain's own clock: a reset from another domain
would put every register's next-state logic back under that domain's trigger).  The gate is
open in a cycle iff ``enable`` (formed, like any register's next state, from the cycle's
registers and inputs) is high in it, or the reset is.  ``add_load_domain`` is the same gate
for a bank of reset-less registers that load together (the MXU's weight rows, a few rows a
bank): clocked only when one of them loads, each takes its new value when it loads and keeps
its own otherwise.

Why the result is the same design.  A register of a gated domain misses an edge only while
the gate is closed; that is exact if every register of the domain would keep its value at
such an edge anyway.  The caller's ``enable`` is that the unit is busy or started, or one of
its read ports reads; after it falls the gate stays open ``DRAIN_CYCLES`` more cycles, so
that the registers that follow others unconditionally (pipeline valids, registered command
decodes: chains of at most four registers in hw/vpu.py and hw/table.py) settle on values
that no longer change (the VPU's X1 and Y are load domains of their own, nested in the
unit's: they load only with an element's result, and hold otherwise).  From then on every
register of the domain holds (its next state depends only on registers that hold and on inputs it ignores while idle:
the command word counts only with ``start``), so closing the gate changes nothing.  The
lockstep tests (cocotb_tests/) check that claim on the gated build against the ISA simulator,
and the board top (hw/board/), built ungated for synthesis, runs the same programs bit-exactly
under Verilator.

Synthesis builds it ungated (``gate=False``; for a load domain, the caller's registers with
an enable instead): the domain's clock is the ``sync`` clock itself; FPGA fabric logic should
not be clocked by a gated clock, and on an ASIC a synthesis tool inserts its own
clock-gating cells from register enables.
"""
from __future__ import annotations

from amaranth import ClockDomain, ClockSignal, Module, ResetSignal, Signal

__all__ = ["DRAIN_CYCLES", "add_load_domain", "add_unit_domain", "gated_clock", "load_registers"]

# cycles the gate stays open after ``enable`` falls: more than the longest chain of
# unconditionally updated registers in a gated unit (four), with margin
DRAIN_CYCLES = 8


def gated_clock(m: Module, name: str, is_open) -> Signal:
    """``sync``'s clock, passed in the cycles in which ``is_open`` is high: the AND of the clock
    with a register of ``is_open`` loaded on the falling edge (a clock-gating cell's latch)."""
    gate_cd = ClockDomain(f"{name}_gate", clk_edge="neg", local=True, reset_less=True)
    m.domains += gate_cd
    m.d.comb += gate_cd.clk.eq(ClockSignal("sync"))
    gate = Signal(init=1, name=f"{name}_open")
    m.d[gate_cd.name] += gate.eq(is_open)
    clk = Signal(name=f"{name}_gated_clk")
    m.d.comb += clk.eq(ClockSignal("sync") & gate)
    return clk


def add_load_domain(m: Module, name: str, load) -> None:
    """Add reset-less clock domain ``name`` to ``m``, clocked by ``sync``'s clock at the edges that
    end a cycle in which ``load`` is high: a register assigned unconditionally in it is one of
    ``sync`` that loads only when ``load`` (simulation builds: a bank of registers that rarely
    loads, such as the MXU's weights, then costs Verilator nothing in the other cycles)."""
    cd = ClockDomain(name, local=True, reset_less=True)
    m.domains += cd
    m.d.comb += cd.clk.eq(gated_clock(m, name, load))


class _Enabled:
    """``m.d.sync`` under an enable: ``target += statements`` assigns them when ``load`` is
    high (``load_registers``' synthesis form)."""

    def __init__(self, m: Module, load):
        self._m, self._load = m, load

    def __iadd__(self, statements):
        with self._m.If(self._load):
            self._m.d.sync += statements
        return self


def load_registers(m: Module, name: str, load, *, gate: bool):
    """Where to assign (``target += statements``, unconditionally) registers of ``sync`` that
    load only when ``load`` is high: with ``gate``, load domain ``name`` (``add_load_domain``:
    clocked only then); without, ``sync`` with ``load`` as their enable.  The registers must be
    reset-less (a load domain has no reset)."""
    if gate:
        add_load_domain(m, name, load)
        return m.d[name]
    return _Enabled(m, load)


def add_unit_domain(m: Module, name: str, enable, *, gate: bool) -> None:
    """Add clock domain ``name`` to ``m``: ``sync``'s clock (gated by ``enable`` when
    ``gate``) and ``sync``'s reset, registered on the domain's clock."""
    cd = ClockDomain(name, local=True)
    # The reset through a register of the domain's own clock: every register's next-state
    # logic contains the reset term, and with ``sync``'s reset there Verilator would evaluate
    # all of it at every ``sync`` edge.  The domain leaves reset one cycle after ``sync``,
    # before the sequencer can have started anything (a CSR write comes first).
    rst_cd = ClockDomain(f"{name}_rst", local=True, reset_less=True)
    m.domains += [cd, rst_cd]
    rst = Signal(init=1, name=f"{name}_rst_q")
    m.d[rst_cd.name] += rst.eq(ResetSignal("sync"))
    m.d.comb += [cd.rst.eq(rst), rst_cd.clk.eq(cd.clk)]
    if not gate:
        m.d.comb += cd.clk.eq(ClockSignal("sync"))
        return
    drain = Signal(range(DRAIN_CYCLES + 1), name=f"{name}_drain")
    with m.If(enable):
        m.d.sync += drain.eq(DRAIN_CYCLES)
    with m.Elif(drain != 0):
        m.d.sync += drain.eq(drain - 1)
    # open while either reset is high, so that the domain's reset register follows ``sync``'s
    m.d.comb += cd.clk.eq(gated_clock(m, name, enable | (drain != 0) | ResetSignal("sync") | rst))
