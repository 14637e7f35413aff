"""Cycle model of the NPU RTL (hw/): when each instruction issues, runs and ends, and when
the NPU stops.  Timing depends only on the instruction fields, never on data, so the model
is exact (the cocotb tests compare it with the RTL cycle for cycle).

Rules (``L`` = mem_latency, ``R`` = array_rows, cycle 0 = the first cycle after the write of
CTRL.START; the CYCLES register counts cycles 0 .. stop):

Boot
    ``M = prog_len * 32 / bus_bytes`` words are read one per cycle from cycle 0; RUN starts at
    ``r0 = M + L`` (``r0 = 1`` when ``M == 0``).  Boot errors stop at once (0 cycles).
Fetch and issue (sequencer, in order)
    Instruction 0 is in the issue register (IR) at ``r0 + 2``; instruction k+1 enters IR the
    cycle after instruction k issues.  An instruction issues at the first cycle ``c`` at or
    after it entered IR in which its unit is *ready* and every unit in its ``wait`` mask is
    *idle*.  SYNC needs only the wait mask.  HALT, a failing instruction (``stop_at``), or
    running off the end of the list stops the NPU at the first cycle, at or after it entered
    IR, in which every unit is idle; total cycles = that cycle + 1.
Loops
    "Instruction k+1" is the next one in issue order: the program with its loops unrolled.
    A LOOP is an instruction of that stream like SYNC (it needs only its wait mask and
    takes one issue cycle), once per execution of the LOOP (an inner LOOP once per outer
    iteration), whether its count is 0 or not.  Going back from the last instruction of a
    body to the first costs nothing: the first instruction of the next iteration enters IR
    the cycle after the last one of the body issues, exactly as straight-line code.  An
    illegal LOOP stops the NPU like a failing instruction.
Branches
    A BRANCH waits like SYNC until cycle ``c`` (in IR, wait mask met), reads its condition
    in ``c`` and issues at ``c+1``.  Not taken: the next instruction enters IR at ``c+2``
    (the cycle after the issue, as usual); taken: the target is fetched at ``c+1`` and
    enters IR at ``c+3``.  Its interval is the read cycle (start = end = c).  A BRANCH
    stopped by BRANCH_LIMIT stops the NPU at the first cycle at or after ``c+1`` in which
    every unit is idle; an illegal BRANCH like any failing instruction.  :meth:`run` (no
    data: estimates) takes forward ALWAYS branches only; conditional and backward branches
    fall through, so a data-dependent loop's body counts once (a loop built from branches
    needs a conditional exit anyway; following its back edge would walk to BRANCH_LIMIT).
Units (command issued at cycle c; a unit is busy on cycles ``start .. end``)
    DMA_LOAD:  ``S = len2*(len1+pad_b1+pad_a1)*(len0+pad_b0+pad_a0)*X``; busy c+1 .. c+S+L.
    DMA_STORE: ``N = len0*len1*len2*X``; busy c+1 .. c+N+1.
               X = 1, except in element mode with elem > bus_bytes: elem / bus_bytes (one
               element, or one bus word of it, per cycle; isa/dma.py ``slots``).
    MATMUL:    ``N = n0*n1``, ``P`` = 2 for ``a_type`` INT16 else 1 (isa/matmul.py); front end
               from s = c+1, ready again at s + max(P*N, R) - 1 (so the next MATMUL can stream
               back to back); busy s .. s+P*N+R+1.
    ACT, VRESCALE, VALU, VPOOL, TABLE: busy c+1 .. c+B with B = 1 + K + (N-1)*P + E*R + W
               (isa/vector.py: K parameter rows, N output vectors of P cycles each, E window
               elements of R rows read, W rows written); ACT: B = count + 5; TABLE: K = 0,
               E = 1, N = n0*n1, P = max(R, W) (LOAD: R = W = 1, so B = N + 2).
    DMA and VPU are ready only when idle.  An instruction that moves no data (S, N or
    count == 0) never makes its unit busy; its interval is empty (start = c+1, end = c).

Watchdog
    With MAX_CYCLES = ``M`` > 0 (hw/csr.py) the watchdog trips in cycle ``W = M`` (a run
    that stops within M cycles never sees it).  From then on nothing issues: an instruction
    whose issue cycle (a BRANCH's decision cycle ``c+1``) is ``W`` or later stays in IR and
    the NPU stops with WATCHDOG at the first cycle at or after both its entry into IR and
    ``W`` in which every unit is idle (issued work completes).  A HALT whose stop cycle is
    ``W`` or later reports WATCHDOG too; an error (the failing instruction's own code or
    BRANCH_LIMIT) keeps its code.

The model assumes the external memory is always ready (as the simulation model is).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from isa import dma
from isa import matmul
from isa.config import NpuConfig
from isa.instructions import INSTR_BYTES, BranchTest, Unit
from isa.vector import schedule

from sim.isa.branch import check
from sim.isa.loops import LoopStack
from sim.isa.units import Trap

UNITS = ("DMA", "MXU", "VPU")


class InstrTiming(NamedTuple):
    """Cycles of one instruction: issue (or stop, for HALT), first and last busy cycle."""

    issue: int
    start: int
    end: int


@dataclass
class Timing:
    """Result of :meth:`TimingModel.run`.

    Attributes
    ----------
    total_cycles : int
        The CYCLES register at the stop.
    busy : dict
        Busy cycles per unit ("DMA", "MXU", "VPU"), as the per-unit busy counters count them.
    per_instruction : list of InstrTiming
        One entry per instruction reached, the stopping one (HALT or failing) included.
    run_start : int
        First cycle of RUN (after boot).
    stop_index : int
        Position in issue order of the instruction the NPU stopped at (its index in a
        program without LOOP).
    pcs : list
        Index in the program of every ``per_instruction`` entry (from :meth:`TimingModel.run`;
        None entries from :meth:`TimingModel.run_issued`).
    """

    total_cycles: int
    busy: dict = field(default_factory=dict)
    per_instruction: list = field(default_factory=list)
    run_start: int = 0
    stop_index: int = 0
    pcs: list = field(default_factory=list)
    watchdog: bool = False


class _Intervals:
    """Union length of busy intervals that arrive in order of start."""

    def __init__(self):
        self.total = 0
        self.open_start = None
        self.open_end = None

    def add(self, start: int, end: int) -> None:
        if end < start:
            return
        if self.open_end is not None and start <= self.open_end + 1:
            self.open_end = max(self.open_end, end)
            return
        self.close()
        self.open_start, self.open_end = start, end

    def close(self) -> int:
        if self.open_end is not None:
            self.total += self.open_end - self.open_start + 1
            self.open_start = self.open_end = None
        return self.total


class TimingModel:
    """Cycle-exact timing of the RTL for one configuration."""

    def __init__(self, config: NpuConfig):
        self.config = config

    def boot_cycles(self, prog_len: int) -> int:
        """First RUN cycle for a program of ``prog_len`` instructions."""
        words = prog_len * INSTR_BYTES // self.config.bus_bytes
        return words + self.config.mem_latency if words else 1

    def duration(self, instr) -> int:
        """Busy cycles of a DMA or VPU instruction issued alone (0: no work)."""
        v = instr.values
        if instr.name == "DMA_LOAD":
            slots = dma.slots(v, self.config.bus_bytes, store=False)
            return slots + self.config.mem_latency if slots else 0
        if instr.name == "DMA_STORE":
            slots = dma.slots(v, self.config.bus_bytes, store=True)
            return slots + 1 if slots else 0
        if instr.defn.unit is Unit.VPU:
            return schedule(instr.name, v).busy        # ACT: count + 5 (isa/vector.py)
        raise ValueError(f"{instr.name} has no fixed duration")

    def run(self, instructions, stop_at: int | None = None, prog_len: int | None = None,
            boot_error: bool = False) -> Timing:
        """Time a run of a program, following its LOOPs.

        Parameters
        ----------
        instructions : list of isa.Instruction
            The program in index order, at least up to where the NPU stops.
        stop_at : int, optional
            Position in issue order (the program with its loops unrolled, LOOPs included;
            for a program without LOOP, the index) of an instruction that stops the NPU
            with an error.  Without it the NPU stops at the first HALT, at an illegal LOOP,
            or on reaching index ``len(instructions)`` (running off the end, or a word that
            does not decode).
        prog_len : int, optional
            Instructions booted (PROG_LEN); default ``len(instructions)``.
        boot_error : bool
            The boot checks failed: the NPU stops before booting.
        """
        prog_len = len(instructions) if prog_len is None else prog_len
        return self._run(_issue_order(instructions, prog_len, self.config), stop_at, prog_len, boot_error)

    def run_issued(self, issued, stop_at: int | None = None, prog_len: int | None = None,
                   boot_error: bool = False, taken=(), late_stop: bool = False,
                   max_cycles: int = 0) -> Timing:
        """Time a run given the instructions reached in issue order (what the ISA simulator
        executed: every iteration's instructions, every LOOP executed), ``stop_at`` being a
        position in that list; the NPU stops there, at a HALT, or at the end of the list.
        ``taken``: positions of the BRANCHes that jumped; ``late_stop``: the instruction at
        ``stop_at`` is a BRANCH stopped by BRANCH_LIMIT; ``max_cycles``: the watchdog's limit
        (0: off; the result's ``watchdog`` says whether it stopped the run)."""
        prog_len = len(issued) if prog_len is None else prog_len
        taken = set(taken)
        stream = ((None, instr, "late" if late_stop and k == stop_at else False, k in taken)
                  for k, instr in enumerate(issued))
        return self._run(stream, stop_at, prog_len, boot_error, max_cycles)

    def _run(self, stream, stop_at, prog_len: int, boot_error: bool, max_cycles: int = 0) -> Timing:
        """Time the (pc, instruction, stops, taken) items of ``stream`` in issue order
        (``stops``: False, True, or "late" for BRANCH_LIMIT)."""
        cfg = self.config
        if boot_error:
            return Timing(0, {u: 0 for u in UNITS})
        rows = cfg.array_rows
        run_start = self.boot_cycles(prog_len)

        idle_from = {u: 0 for u in UNITS}      # first cycle the unit is idle (for wait masks)
        ready_from = {u: 0 for u in UNITS}     # first cycle the unit takes a command
        busy = {u: _Intervals() for u in UNITS}
        per_instr: list[InstrTiming] = []
        pcs: list = []
        in_ir = run_start + 2
        index = 0
        trip = max_cycles if max_cycles > 0 else None     # the watchdog's cycle W

        def finish(stop: int, watchdog: bool = False) -> Timing:
            per_instr.append(InstrTiming(stop, stop, stop))
            pcs.append(pc)
            return Timing(stop + 1, {u: busy[u].close() for u in UNITS}, per_instr,
                          run_start, index, pcs, watchdog)

        while True:
            pc, instr, fails, jumps = next(stream, (None, None, True, False))
            stopping = fails or index == stop_at
            if fails == "late" and trip is not None:
                armed = max([in_ir] + [idle_from[u] for u in _waits(instr)])
                if armed >= trip:                      # never armed: the watchdog stops it
                    return finish(max([in_ir, trip] + list(idle_from.values())), True)
            if stopping or instr.name == "HALT":
                # BRANCH_LIMIT is found after the condition read, one cycle after the wait.
                late = fails == "late" and 1 + max([in_ir] + [idle_from[u] for u in _waits(instr)])
                stop = max([in_ir, late] + list(idle_from.values()))
                return finish(stop, not stopping and trip is not None and stop >= trip)
            issue = max([in_ir] + [idle_from[u] for u in _waits(instr)])
            unit = instr.defn.unit
            if trip is not None:
                decide = issue + 1 if instr.name == "BRANCH" else max(
                    issue, ready_from[unit.name]) if unit is not Unit.SEQ else issue
                if decide >= trip:                     # it would issue after the trip: stop
                    return finish(max([in_ir, trip] + list(idle_from.values())), True)
            pcs.append(pc)
            if instr.name == "BRANCH":                 # read at `issue`, decide one cycle later
                per_instr.append(InstrTiming(issue + 1, issue, issue))
                in_ir = issue + (3 if jumps else 2)
                index += 1
                continue
            if unit is Unit.SEQ:                       # SYNC, LOOP
                per_instr.append(InstrTiming(issue, issue, issue))
            else:
                name = unit.name
                issue = max(issue, ready_from[name])
                start = issue + 1
                if unit is Unit.MXU:
                    n = instr.values["n0"] * instr.values["n1"]
                    if n:
                        a_type = instr.values["a_type"]
                        end = start + matmul.busy_cycles(rows, n, a_type) - 1
                        ready_from[name] = start + matmul.front_end_cycles(rows, n, a_type) - 1
                        idle_from[name] = max(idle_from[name], end + 1)
                    else:
                        end = issue
                        ready_from[name] = start
                else:
                    end = issue + self.duration(instr)
                    idle_from[name] = ready_from[name] = max(idle_from[name], end + 1)
                busy[name].add(start, end)
                per_instr.append(InstrTiming(issue, start, end))
            in_ir = issue + 1
            index += 1


def _waits(instr) -> list[str]:
    """Units in the wait mask of ``instr``."""
    return [u.name for u in Unit if u is not Unit.SEQ and instr.values["wait"] >> u.value & 1]


def _issue_order(instructions, prog_len: int, config: NpuConfig):
    """(pc, instruction, stops, taken) in issue order, following the LOOPs (sim/isa/loops.py)
    and the forward ALWAYS BRANCHes (the others fall through: there is no data here, see
    the module docstring) up to a HALT, an illegal LOOP or BRANCH (``stops``) or the end of
    ``instructions``."""
    loops = LoopStack(prog_len)
    pc = 0
    while pc < len(instructions):
        instr = instructions[pc]
        is_loop = instr.name == "LOOP"
        if is_loop and loops.illegal(pc, instr.values) is not None:
            yield pc, instr, True, False
            return
        if instr.name == "BRANCH":
            v = instr.values
            try:
                check(pc, v, prog_len, loops.active, config)
            except Trap:
                yield pc, instr, True, False
                return
            jumps = v["test"] == BranchTest.ALWAYS and v["target"] > pc
            yield pc, instr, False, jumps
            pc = v["target"] if jumps else pc + 1
            continue
        yield pc, instr, False, False
        if instr.name == "HALT":
            return
        pc = loops.enter(pc, instr.values) if is_loop else loops.advance(pc)
