"""Cycle model of the NPU RTL (hw/): when each instruction issues, runs and ends, and when
the NPU stops.  Timing depends only on the instruction fields, never on data, so the model
is exact (the cocotb tests compare it with the RTL cycle for cycle).

Rules (``L`` = mem_latency, ``R`` = array_rows, cycle 0 = the first cycle after the write of
CTRL.START; the CYCLES register counts cycles 0 .. stop):

Fetch (no boot: the program stays in external memory; ``W = 32 / bus_bytes`` bus words per
instruction, ``C = imem_rows``)
    The instruction buffer (IMEM) holds a window of the program: instruction ``i`` in row
    ``i mod C``.  The fetch engine requests the words of instructions ``0, 1, 2, ...`` in
    order, one word per cycle from cycle 0, in every cycle in which (a) the DMA is not busy
    (the DMA owns the bus whenever it is busy: its timing never changes), (b) the
    instruction is below PROG_LEN and (c) its row is free: ``i < keep + C``, where ``keep``
    is the first instruction the front end may still read (the first instruction of the
    outermost active LOOP body, else one past the last instruction read).  Instruction
    ``i`` can be read from cycle ``A(i) = t + L + FETCH_ARRIVAL`` (isa/instructions.py: 3),
    ``t`` the request of its last word
    (``A = -inf`` at or past PROG_LEN: those indices never wait).  A bus word wider than an
    instruction (``bus_bytes > 32``: the 64x64 sweep configuration, which has no RTL, since
    the sequencer needs whole bus words per instruction) carries an aligned group of
    ``bus_bytes / 32`` instructions: one request fetches the rest of the group (from the
    stream's first instruction to the group's end), all arriving together, once the row of
    the group's last instruction is free.
Front end and issue (sequencer, in order)
    The read port reads the instructions in issue order; an instruction read at cycle ``r``
    leaves the read port for the issue register (IR) at the first cycle ``l >= r + 1`` (a
    LOOP with count 0: ``l >= r + 1 + ZERO_LOOP_WAIT``, isa/instructions.py) at
    which IR is empty or issuing (``l >= issue`` of the instruction before) and the next
    instruction in issue order (``next``: for a BRANCH, its pc+1) is readable
    (``l >= A(next)``); the next one is read at ``l`` and this one is in IR from ``l+1``.
    The first instruction is read at ``A(0)``.  So straight-line code with the buffer ahead
    runs as without fetch: instruction k+1 enters IR the cycle after instruction k issues.
    An instruction issues at the first cycle ``c`` at or after it entered IR in which its
    unit is *ready*, every unit in its ``wait`` mask is *idle* (for an ACT with ``mxu_lag``
    = k > 0, the MXU bit: at most k MATMULs unfinished, i.e. ``c`` after the last ACC write
    of the MATMUL k+1 from the last issued, or any ``c`` if fewer were), and, if it writes ASRAM or
    ACC, the memory's other writer (ASRAM: DMA and VPU; ACC: MXU and VPU) is idle or its
    last instruction does not write that memory (isa/ports.py: one write port per memory).
    SYNC needs only the wait mask.  HALT, a failing instruction (``stop_at``), or running off the end of the list
    stops the NPU at the first cycle, at or after it entered IR, in which every unit is
    idle; total cycles = that cycle + 1.
Loops
    "Instruction k+1" is the next one in issue order: the program with its loops unrolled.
    A LOOP is an instruction of that stream like SYNC (it needs only its wait mask and
    takes one issue cycle), once per execution of the LOOP (an inner LOOP once per outer
    iteration), whether its count is 0 or not.  Going back from the last instruction of a
    body to the first costs nothing: the first instruction of the next iteration enters IR
    the cycle after the last one of the body issues, exactly as straight-line code.  A body
    stays in the buffer while its loop runs (``keep``), so it is fetched once.  An illegal
    LOOP (one whose body is not shorter than ``imem_rows`` included: the buffer must hold
    the body and the instruction after it, which is fetched while the body's last
    instruction waits to leave the read port) stops the NPU like a failing instruction.
Branches
    A BRANCH waits like SYNC until cycle ``c`` (in IR, wait mask met, and the VPU idle: it
    reads through the VPU's operand port, isa/ports.py), reads its condition in ``c`` and
    issues at ``d = c + BRANCH_DECIDE`` (isa/instructions.py).  Not taken: the next
    instruction enters IR at ``d+1`` (the cycle after the issue, as usual); taken: the
    buffer is flushed and fetching starts again at the target, first request at ``d+1``
    (a target is always refetched, so a loop
    built from branches refetches its body every iteration; the target is read at its
    ``A`` and enters IR as above).  Its interval is the read cycle (start = end = c).  A BRANCH
    stopped by BRANCH_LIMIT stops the NPU at the first cycle at or after ``d`` in which
    every unit is idle; an illegal BRANCH like any failing instruction.  :meth:`run` (no
    data: estimates) takes forward ALWAYS branches only; conditional and backward branches
    fall through, so a data-dependent loop's body counts once (a loop built from branches
    needs a conditional exit anyway; following its back edge would walk to BRANCH_LIMIT).
Units (command issued at cycle c; a unit is busy on cycles ``start .. end``)
    DMA_LOAD:  ``S = len2*(len1+pad_b1+pad_a1)*(len0+pad_b0+pad_a0)*X``; busy c+1 .. c+S+L
               (packed lines too: ``pack`` changes where bytes land, not the cycles).
    DMA_STORE: ``N = len0*len1*len2*X``; busy c+1 .. c+N+1.
               X = 1, except in element mode with elem > bus_bytes: elem / bus_bytes (one
               element, or one bus word of it, per cycle; isa/dma.py ``slots``).
    MATMUL:    ``N = n0*n1``, ``P`` = 2 for ``a_type`` INT16 else 1 (isa/matmul.py); front end
               from s = c+1, ready again at s + max(P*N, R) - 1 (so the next MATMUL can stream
               back to back); busy s .. s+P*N+R+1.
    ACT, VRESCALE, VALU, VPOOL, TABLE, VDWCONV: busy c+1 .. c+B with
               B = K + (N-1)*P + E*R + X + W + D - 1 (isa/vector.py: K parameter rows, N
               output vectors of P cycles each, E window elements of R rows read, W rows
               written from D + X cycles after the last read, D = WRITE_LATENCY = 7, the
               TABLE unit's TABLE_WRITE_LATENCY = 5; X = 2 for VDWCONV, else 0);
               ACT: B = count + 10; TABLE: K = 0, E = 1, N = n0*n1, P = max(R, W) (LOAD:
               R = W = 1, so B = N + 5); VDWCONV: K = 3, P = E*R + 2.
    DMA and VPU are ready only when idle.  An instruction that moves no data (S, N or
    count == 0) never makes its unit busy; its interval is empty (start = c+1, end = c).

Watchdog
    With MAX_CYCLES = ``M`` > 0 (hw/csr.py) the watchdog trips in cycle ``W = M`` (a run
    that stops within M cycles never sees it).  From then on nothing issues: an instruction
    whose issue cycle (a BRANCH's decision cycle ``d``) is ``W`` or later stays in IR and
    the NPU stops with WATCHDOG at the first cycle at or after both its entry into IR and
    ``W`` in which every unit is idle (issued work completes).  A HALT whose stop cycle is
    ``W`` or later reports WATCHDOG too; an error (the failing instruction's own code or
    BRANCH_LIMIT) keeps its code.

The model assumes the external memory is always ready (as the simulation model is).
Why fetch works this way: hw/sequencer.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from isa import dma
from isa import matmul
from isa.config import NpuConfig
from isa.instructions import BRANCH_DECIDE, FETCH_ARRIVAL, INSTR_BYTES, ZERO_LOOP_WAIT, BranchTest, Unit
from isa.ports import BRANCH_PORT_UNIT, MEMORIES, other_writer, written
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
        First cycle of RUN: 0 (there is no boot; instructions are fetched while running).
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

    def __init__(self, config: NpuConfig, write_rule: tuple = MEMORIES, branch_port: bool = True):
        """``write_rule``: the memories whose writers the rule of isa/ports.py serialises;
        ``branch_port``: a BRANCH waits for the unit whose read port it borrows.  Other
        values time a hypothetical NPU, only to measure what the rule costs
        (tools/write_port_cost.py); the RTL has the rule for every memory."""
        self.config = config
        self.write_rule = tuple(write_rule)
        self.branch_port = branch_port

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
            return schedule(instr.name, v).busy        # ACT: count + 10 (isa/vector.py)
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
            Instructions in the program (PROG_LEN); default ``len(instructions)``.
        boot_error : bool
            The start checks failed: the NPU stops before fetching anything.
        """
        prog_len = len(instructions) if prog_len is None else prog_len
        stream = _issue_order(instructions, prog_len, self.config)
        return self._run(_with_fetch(stream, prog_len, stop_at), stop_at, prog_len, boot_error)

    def walk(self, instructions, limit: int) -> Timing:
        """Time the static issue order of :meth:`run` for at most ``limit`` instructions (a
        bound on the work for programs whose LOOPs run very long): the run stops where the
        walk is cut, as at a word that does not decode.  For estimates (the watchdog's default)."""
        n = len(instructions)

        def bounded():
            for k, item in enumerate(_issue_order(instructions, n, self.config)):
                if k >= limit:
                    yield item[0], None, True, False
                    return
                yield item

        return self._run(_with_fetch(bounded(), n), None, n, False)

    def run_issued(self, issued, stop_at: int | None = None, prog_len: int | None = None,
                   boot_error: bool = False, taken=(), late_stop: bool = False,
                   pcs=None, end_pc: int | None = None, max_cycles: int = 0) -> Timing:
        """Time a run given the instructions reached in issue order (what the ISA simulator
        executed: every iteration's instructions, every LOOP executed), ``stop_at`` being a
        position in that list; the NPU stops there, at a HALT, or at the end of the list.
        ``taken``: positions of the BRANCHes that jumped; ``late_stop``: the instruction at
        ``stop_at`` is a BRANCH stopped by BRANCH_LIMIT.  ``pcs``: the index in the program
        of every entry (default: 0, 1, 2, ...; the instruction fetch needs them);
        ``end_pc``: the index the front end reaches when the list ends without a stop (a
        word that does not decode; default: one past the last entry).  ``max_cycles``: the
        watchdog's limit (0: off; the result's ``watchdog`` says whether it stopped the run)."""
        prog_len = len(issued) if prog_len is None else prog_len
        taken = set(taken)
        pcs = list(range(len(issued))) if pcs is None else list(pcs)
        if end_pc is None:
            end_pc = pcs[-1] + 1 if pcs else 0

        def stream():
            for k, instr in enumerate(issued):
                yield pcs[k], instr, "late" if late_stop and k == stop_at else False, k in taken
            yield end_pc, None, True, False

        return self._run(_with_fetch(stream(), prog_len, stop_at), stop_at, prog_len, boot_error,
                         max_cycles)

    def _run(self, stream, stop_at, prog_len: int, boot_error: bool, max_cycles: int = 0) -> Timing:
        """Time the (pc, instruction, stops, taken, keep, next) items of ``stream`` in issue
        order (``stops``: False, True, or "late" for BRANCH_LIMIT; ``keep`` and ``next``:
        see :func:`_with_fetch`)."""
        cfg = self.config
        if boot_error:
            return Timing(0, {u: 0 for u in UNITS})
        rows = cfg.array_rows

        idle_from = {u: 0 for u in UNITS}      # first cycle the unit is idle (for wait masks)
        ready_from = {u: 0 for u in UNITS}     # first cycle the unit takes a command
        busy = {u: _Intervals() for u in UNITS}
        writing = {u: () for u in UNITS}       # memories the unit's last instruction writes
        dma_busy: list[tuple[int, int]] = []
        mxu_done: list[int] = []               # cycle after each MATMUL's last ACC write
        fetcher = _Fetcher(cfg, prog_len, dma_busy)
        per_instr: list[InstrTiming] = []
        pcs: list = []
        prev_issue = None                      # issue cycle of the instruction before
        read = None                            # cycle the front end reads this instruction
        index = 0
        trip = max_cycles if max_cycles > 0 else None     # the watchdog's cycle W

        def finish(stop: int, watchdog: bool = False) -> Timing:
            per_instr.append(InstrTiming(stop, stop, stop))
            pcs.append(pc)
            return Timing(stop + 1, {u: busy[u].close() for u in UNITS}, per_instr,
                          0, index, pcs, watchdog)

        while True:
            pc, instr, fails, jumps, keep, nxt = next(stream)
            if read is None:                   # first instruction of a stream
                read = max(fetcher.arrival(pc), fetcher.stream_start)
            fetcher.keep(read + 1, keep)
            # It leaves the read port once IR is free and the next instruction is readable; a
            # LOOP with count 0 waits a cycle there first (its skip is decided from registers).
            held = ZERO_LOOP_WAIT if instr is not None and instr.name == "LOOP" and instr.values["count"] == 0 else 0
            leave = max(read + 1 + held, fetcher.arrival(nxt), -1 if prev_issue is None else prev_issue)
            in_ir = leave + 1
            read = leave
            stopping = fails or index == stop_at
            if fails == "late" and trip is not None:
                armed = max([in_ir] + [idle_from[u] for u in _waits(instr, self.branch_port)])
                if armed >= trip:                      # never armed: the watchdog stops it
                    return finish(max([in_ir, trip] + list(idle_from.values())), True)
            if stopping or instr.name == "HALT":
                # BRANCH_LIMIT is found at the decision, two cycles after the condition read.
                late = fails == "late" and BRANCH_DECIDE + max([in_ir] + [idle_from[u] for u in _waits(instr, self.branch_port)])
                stop = max([in_ir, late] + list(idle_from.values()))
                return finish(stop, not stopping and trip is not None and stop >= trip)
            unit = instr.defn.unit
            writes_now = tuple(mem for mem in written(instr.name, instr.values) if mem in self.write_rule)
            # One writer per memory (isa/ports.py): wait for the other writer to finish.
            sharers = [other_writer(unit.name, mem) for mem in writes_now]
            # ACT's mxu_lag k: all but the last k MATMULs finished (the MXU finishes in order).
            lag = instr.values.get("mxu_lag", 0)
            waited = [(mxu_done[-lag - 1] if len(mxu_done) > lag else 0) if u == "MXU" and lag else idle_from[u]
                      for u in _waits(instr, self.branch_port)]
            issue = max([in_ir] + waited
                        + [idle_from[u] for u, mem in zip(sharers, writes_now) if mem in writing[u]])
            if trip is not None:
                decide = issue + BRANCH_DECIDE if instr.name == "BRANCH" else max(
                    issue, ready_from[unit.name]) if unit is not Unit.SEQ else issue
                if decide >= trip:                     # it would issue after the trip: stop
                    return finish(max([in_ir, trip] + list(idle_from.values())), True)
            pcs.append(pc)
            if instr.name == "BRANCH":                 # read at `issue`, decided BRANCH_DECIDE later
                per_instr.append(InstrTiming(issue + BRANCH_DECIDE, issue, issue))
                prev_issue = issue + BRANCH_DECIDE
                if jumps:                              # refetch from the target
                    fetcher.restart(instr.values["target"], issue + BRANCH_DECIDE + 1)
                    read = None
                index += 1
                continue
            if unit is Unit.SEQ:                       # SYNC, LOOP
                per_instr.append(InstrTiming(issue, issue, issue))
            else:
                name = unit.name
                issue = max(issue, ready_from[name])
                writing[name] = writes_now
                start = issue + 1
                if unit is Unit.MXU:
                    n = instr.values["n0"] * instr.values["n1"]
                    if n:
                        a_type = instr.values["a_type"]
                        end = start + matmul.busy_cycles(rows, n, a_type) - 1
                        ready_from[name] = start + matmul.front_end_cycles(rows, n, a_type) - 1
                        idle_from[name] = max(idle_from[name], end + 1)
                        mxu_done.append(end + 1)
                    else:
                        end = issue
                        ready_from[name] = start
                else:
                    end = issue + self.duration(instr)
                    idle_from[name] = ready_from[name] = max(idle_from[name], end + 1)
                    if name == "DMA" and end >= start:
                        dma_busy.append((start, end))
                busy[name].add(start, end)
                per_instr.append(InstrTiming(issue, start, end))
            prev_issue = issue
            index += 1


class _Fetcher:
    """The instruction-fetch engine of the cycle model (module docstring, "Fetch").

    Computes lazily, in request order, the cycle at which every instruction of the current
    stream arrives in the instruction buffer; the constraints (DMA busy intervals, the
    front end's ``keep`` pointer) are known up to the cycle asked about, because an
    instruction is read only after it arrives and nothing issued later changes the past.
    """

    def __init__(self, config: NpuConfig, prog_len: int, dma_busy: list):
        self.rows = config.imem_rows
        self.words = INSTR_BYTES // config.bus_bytes            # 0: several instructions a word
        self.per_word = max(1, config.bus_bytes // INSTR_BYTES)
        self.latency = config.mem_latency
        self.prog_len = prog_len
        self.dma_busy = dma_busy          # (start, end) of the DMA's busy intervals, in order
        self.restart(0, 0)

    def restart(self, pc: int, cycle: int) -> None:
        """A new stream from instruction ``pc``; the first request may go out at ``cycle``."""
        self.stream_start = cycle
        self.fp = pc                      # next instruction to request
        self.next_t = cycle               # earliest cycle of the next request
        self.arrived: dict[int, int] = {}
        self.keeps = [(cycle, pc)]        # (cycle from which, keep): nondecreasing keep
        self.keep_at = 0
        self.dma_at = 0

    def keep(self, cycle: int, value: int) -> None:
        """From ``cycle`` on, the front end keeps instructions ``value`` onwards."""
        if value != self.keeps[-1][1]:
            self.keeps.append((cycle, value))

    def _slot_free(self, pc: int) -> int:
        """First cycle at which ``pc - imem_rows`` is no longer kept (the row of ``pc`` is free)."""
        need = pc - self.rows + 1
        while self.keeps[self.keep_at][1] < need:
            self.keep_at += 1
            if self.keep_at == len(self.keeps):
                raise RuntimeError(f"instruction {pc} can never be fetched (a LOOP body longer "
                                   f"than the instruction buffer?)")
        return self.keeps[self.keep_at][0]

    def _bus_free(self, t: int) -> int:
        """First cycle at or after ``t`` in which the DMA is not busy."""
        busy = self.dma_busy
        while self.dma_at < len(busy):
            start, end = busy[self.dma_at]
            if end < t:
                self.dma_at += 1
            elif start <= t:
                t = end + 1
                self.dma_at += 1
            else:
                break
        return t

    def arrival(self, pc) -> int:
        """First cycle in which instruction ``pc`` can be read (-1: past the program, never waits)."""
        if pc is None or pc >= self.prog_len:
            return -1
        while self.fp <= pc:
            if self.words:
                t = max(self.next_t, self._slot_free(self.fp))
                for _ in range(self.words):
                    t = self._bus_free(t)
                    last, t = t, t + 1
                self.next_t = t
                self.arrived[self.fp] = last + self.latency + FETCH_ARRIVAL
                self.fp += 1
                continue
            # A bus word holds an aligned group of instructions: one request for the rest of it.
            end = min((self.fp // self.per_word + 1) * self.per_word, self.prog_len)
            t = self._bus_free(max(self.next_t, self._slot_free(end - 1)))
            self.next_t = t + 1
            for i in range(self.fp, end):
                self.arrived[i] = t + self.latency + FETCH_ARRIVAL
            self.fp = end
        return self.arrived[pc]


def _with_fetch(stream, prog_len: int, stop_at: int | None = None):
    """Add to the (pc, instruction, stops, taken) items of ``stream`` what the instruction
    fetch needs: ``keep``, the first instruction the front end still needs once this one is
    read (the first of the outermost active LOOP body, else the next index), and ``next``,
    the index the front end reads after it (a taken BRANCH reads pc+1 before it decides).
    The last item (``stops`` true, or an instruction None) ends the stream."""
    loops = LoopStack(prog_len)
    for k, (pc, instr, stops, jumps) in enumerate(stream):
        keep = loops.levels[0].start if loops.levels else pc + 1
        last = bool(stops) or instr is None or k == stop_at or instr.name == "HALT"
        if instr is not None and instr.name == "LOOP" and not last:
            nxt = loops.enter(pc, instr.values)
        else:
            nxt = loops.advance(pc)
        yield pc, instr, stops, jumps, keep, nxt
        if last:
            return


def _waits(instr, port_rule: bool = True) -> list[str]:
    """Units ``instr`` waits for: its wait mask, and for a BRANCH the unit whose read port
    it borrows (isa/ports.py)."""
    units = [u.name for u in Unit if u is not Unit.SEQ and instr.values["wait"] >> u.value & 1]
    return units + [BRANCH_PORT_UNIT] if port_rule and instr.name == "BRANCH" else units


def _issue_order(instructions, prog_len: int, config: NpuConfig):
    """(pc, instruction, stops, taken) in issue order, following the LOOPs (sim/isa/loops.py)
    and the forward ALWAYS BRANCHes (the others fall through: there is no data here, see
    the module docstring) up to a HALT, an illegal LOOP or BRANCH (``stops``) or the end of
    ``instructions``."""
    loops = LoopStack(prog_len, config.imem_rows, config)
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
    yield pc, None, True, False           # ran off the end, or a word that does not decode
