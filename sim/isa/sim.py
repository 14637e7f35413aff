"""The ISA simulator: runs a program image bit-exactly as the RTL does, every memory byte.

:class:`IsaSim` reads the program's instruction stream from external memory
(``program_addr``, ``len(program.instructions)`` instructions; the hardware fetches it while
it runs, any length) and executes from PC 0 in program order until HALT or an error.  The
instruction semantics live in sim/isa/units.py, the hazard checker in sim/isa/hazards.py;
cycles come from the RTL's cycle model in sim/npu_timing.py.

Functional results do not depend on how instructions overlap in time, provided the wait
masks order every conflicting pair; ``check_hazards=True`` verifies that against the timing
model's per-instruction ``(start, end)`` cycles.

Start and stop conventions (the ISA table does not describe the loader; these are the
RTL's, hw/csr.py and hw/checker.py):

* ``program_addr`` not bus-word aligned: DMA_MISALIGNED; the stream reaching past ``ext_mem_bytes``: DMA_OUT_OF_RANGE.
  Checked in that order before anything is read; nothing runs, error_pc and stop_pc are 0;
* a word that does not decode is ILLEGAL_INSTRUCTION when the PC reaches it (not before);
* running past the last instruction without HALT is PC_OVERFLOW with error_pc = the
  instruction count.

BRANCH (sim/isa/branch.py) reads its condition from the scratchpads when it executes (its
wait mask makes that the producer's final value) and counts taken backward branches
against its ``limit`` (BRANCH_LIMIT); the timing model is told which branches jumped.

Watchdog (``max_cycles``, the MAX_CYCLES register of hw/csr.py): an instruction that would
issue at or after cycle ``max_cycles`` does not, and the NPU stops with WATCHDOG once
issued work completes (rules in sim/npu_timing.py).  Cycles come from the timing model,
which runs after execution, so the simulator executes at most ``max_cycles + 1`` instructions
(each takes at least a cycle to issue), asks the model where the watchdog stopped, and when
that is earlier runs again up to there: memory then holds exactly the work issued before
the trip, as on the RTL.

LOOPs (sim/isa/loops.py) are executed as the sequencer does: instructions run in issue
order, each with its address fields at their effective values (isa.instructions
.effective_values with the offsets of the current iterations); an error inside a loop stops
at that instruction's index, in the iteration that fails.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from isa.asm import disassemble_one
from isa.config import NpuConfig
from isa.encoding import EncodingError, Instruction, decode
from isa.instructions import INSTR_BYTES, ErrorCode, effective_values
from isa.program import Program
from tosa_ir.errors import InvalidInput, NpuError

from sim.isa import branch as isa_branch
from sim.isa.hazards import Hazard, find_hazards
from sim.isa.loops import LoopStack
from sim.isa.executors import EXECUTORS
from sim.isa.units import Footprint, NpuState, Trap


@dataclass
class IsaResult:
    """Outcome of one run.

    Attributes
    ----------
    memory : bytearray
        Final external memory: the initial image, extended to the highest byte written.
    cycles : int or None
        Total cycles from the timing model (None when it was not run).
    busy : dict
        Busy cycles per unit, from the timing model.
    error_code : ErrorCode
        ``ErrorCode.NONE`` after HALT, else the error the NPU stopped with.
    error_pc : int or None
        Index of the failing instruction (None after HALT).
    instructions_executed : int
        Instructions completed in issue order, every loop iteration and LOOP counted (HALT
        included; the failing one excluded).
    error_message : str
        What went wrong, for people ("" after HALT).
    stop_pc : int
        The hardware's STOP_PC register: index of the HALT or of the failing instruction
        (0 for boot errors, the instruction count for PC_OVERFLOW).
    trace : list of str
        One line per instruction reached (in issue order, effective addresses), when tracing.
    hazards : list of Hazard or None
        Conflicts the wait masks fail to order, when checking.
    timing : object
        The timing model's full result (per-instruction cycles), or None.
    state : NpuState
        Final machine state (scratchpads included), for tests and debugging.
    """

    memory: bytearray
    cycles: int | None
    busy: dict
    error_code: ErrorCode
    error_pc: int | None
    instructions_executed: int
    error_message: str = ""
    stop_pc: int = 0
    trace: list[str] = field(default_factory=list)
    hazards: list[Hazard] | None = None
    timing: object = None
    state: NpuState | None = field(default=None, repr=False)
    halted: bool = False        # HALT executed (a late HALT may still report WATCHDOG)

    @property
    def ok(self) -> bool:
        return self.error_code == ErrorCode.NONE


class IsaRunError(NpuError):
    """A program stopped with an NPU error code; ``result`` holds the full outcome."""

    def __init__(self, result: IsaResult):
        self.result = result
        super().__init__(f"NPU stopped with {result.error_code.name} at pc {result.error_pc}: "
                         f"{result.error_message}")


class IsaSim:
    """Instruction-set simulator of one NPU configuration.

    Parameters
    ----------
    config : NpuConfig
        The machine; programs compiled for another configuration are refused.
    check_hazards : bool
        Run the hazard checker after every run (needs the timing model).
    timing_model : callable, optional
        ``factory(config)`` returning an object with the interface of
        sim.npu_timing.TimingModel (the default).  Meant for tests.
    """

    def __init__(self, config: NpuConfig, check_hazards: bool = False,
                 timing_model: Callable | None = None):
        self.config = config
        self.check_hazards = check_hazards
        self.timing_model = timing_model

    def run(self, program: Program, memory: bytes | bytearray | np.ndarray | None = None,
            trace: bool | Callable[[str], None] = False, timing: bool = True,
            max_cycles: int = 0, _cap: int | None = None) -> IsaResult:
        """Boot ``program`` from ``memory`` and run it to HALT or the first error.

        Parameters
        ----------
        program : Program
            Supplies the configuration, ``program_addr`` and instruction count; the
            instructions themselves are fetched from ``memory`` like the hardware does.
        memory : bytes-like, optional
            Initial external memory; default ``program.memory_image`` with zero inputs.
        trace : bool or callable
            Record one disassembled line per instruction in ``result.trace``; a callable
            also receives each line as it executes.
        timing : bool
            Run the timing model for ``cycles``/``busy`` (forced on by ``check_hazards``
            and by ``max_cycles``).
        max_cycles : int
            The watchdog's limit (0: none): stop with WATCHDOG as the RTL does.
        """
        if not max_cycles:
            return self._run(program, memory, trace, timing, None, 0)
        first = self._run(program, memory, False, True, max_cycles + 1, max_cycles)
        t = first.timing
        stop = t.stop_index if t is not None and t.watchdog else None
        # Executed exactly what issued before the trip (a HALT that stopped late changes nothing)?
        exact = stop is None or stop >= first.instructions_executed - first.halted
        if exact and not trace:
            return first
        return self._run(program, memory, trace, True, stop, max_cycles)

    def _run(self, program, memory, trace, timing, cap: int | None, max_cycles: int) -> IsaResult:
        """One run, executing at most ``cap`` instructions (then the next is reached, not
        executed, and the watchdog is taken to stop it); timed with ``max_cycles``."""
        if program.config != self.config:
            raise InvalidInput(f"program was compiled for {program.config.to_json()}, "
                               f"this simulator is {self.config.to_json()}")
        if memory is None:
            memory = program.memory_image({b.name: np.zeros(b.shape, b.dtype) for b in program.inputs})
        state = NpuState(self.config, memory)
        log: list[str] = []
        emit = trace if callable(trace) else None

        def note(line: str) -> None:
            if trace:
                log.append(line)
                if emit is not None:
                    emit(line)

        n = len(program.instructions)
        boot_error = self._boot_error(program, n)
        if boot_error is not None:
            code, message = boot_error
            note(f"boot: {code.name}: {message}")
            result = IsaResult(state.final_memory(), None, {}, code, 0, 0, message, 0, log, state=state)
            if timing or self.check_hazards:
                self._add_timing(result, [], [], [], n, boot_error=True)
            return result

        state.ensure_ext(program.program_addr + n * INSTR_BYTES)
        imem = state.ext[program.program_addr:program.program_addr + n * INSTR_BYTES].tobytes()
        executed: list[tuple[int, Instruction | _Effective, Footprint | None]] = []
        positions: list[int] = []           # index of each executed entry in ``instrs``
        instrs: list[Instruction] = []      # every instruction reached, in issue order
        decoded: dict[int, Instruction] = {}
        loops = LoopStack(n, self.config.imem_rows, self.config)
        pcs: list[int] = []                 # index in the program of every entry of ``instrs``
        budget = isa_branch.BackwardBudget()
        taken: set[int] = set()             # positions in ``instrs`` of taken BRANCHes
        late_stop = False                   # stopped by BRANCH_LIMIT (after the condition read)
        code, error_pc, message = ErrorCode.PC_OVERFLOW, n, f"ran past the last of {n} instructions without HALT"
        pc, trapped, capped = 0, False, False
        while pc < n:
            if cap is not None and len(executed) >= cap:
                capped = True
                code, error_pc, message = ErrorCode.WATCHDOG, pc, f"stopped by the watchdog ({max_cycles} cycles)"
                try:
                    instrs.append(decoded.get(pc) or decode(imem[pc * INSTR_BYTES:(pc + 1) * INSTR_BYTES]))
                    pcs.append(pc)
                except EncodingError:
                    pass                    # the model stops at the end of the stream instead
                break
            instr = decoded.get(pc)
            if instr is None:
                try:
                    instr = decoded[pc] = decode(imem[pc * INSTR_BYTES:(pc + 1) * INSTR_BYTES])
                except EncodingError as e:
                    code, error_pc, message = ErrorCode.ILLEGAL_INSTRUCTION, pc, str(e)
                    note(f"{pc:5d}: <undecodable> -> {code.name}: {message}")
                    break
            values = instr.values
            if loops.active and instr.name != "LOOP":
                values = effective_values(instr.defn, values, loops.offsets, self.config)
            shown = instr if values is instr.values else _Effective(instr, values, loops.iterations())
            text = (disassemble_one(shown) if shown is instr else str(shown)) if trace else instr.name
            executor = EXECUTORS.get(instr.name)
            footprint = None                # HALT, SYNC and LOOP: sequencer only, no data
            jump = None
            try:
                if instr.name == "LOOP":
                    why = loops.illegal(pc, values)
                    if why is not None:
                        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, why)
                elif instr.name == "BRANCH":
                    isa_branch.check(pc, values, n, loops.active, self.config)
                    footprint = isa_branch.footprint(values)
                    if isa_branch.taken(state, values):
                        late_stop = True
                        budget.take(pc, values)
                        late_stop = False
                        jump = values["target"]
                elif executor is not None:
                    footprint = executor(state, values)
            except Trap as t:
                code, error_pc, message, trapped = t.code, pc, str(t), True
                note(f"{pc:5d}: {text} -> {code.name}: {message}")
                instrs.append(instr)
                pcs.append(pc)
                break
            note(f"{pc:5d}: {text}")
            positions.append(len(instrs))
            instrs.append(instr)
            pcs.append(pc)
            executed.append((pc, shown, footprint))
            if instr.name == "HALT":
                code, error_pc, message = ErrorCode.NONE, None, ""
                break
            if jump is not None:
                taken.add(len(instrs) - 1)
                pc = jump
                continue
            pc = loops.enter(pc, values) if instr.name == "LOOP" else loops.advance(pc)
        if code == ErrorCode.PC_OVERFLOW:
            note(f"{n:5d}: PC_OVERFLOW: {message}")

        stop_pc = pc if code == ErrorCode.NONE else error_pc
        result = IsaResult(state.final_memory(), None, {}, code, error_pc, len(executed), message,
                           stop_pc, log, state=state)
        if timing or self.check_hazards:
            # A trapping instruction is the last one reached; an undecodable word or
            # PC_OVERFLOW ends the stream by itself.
            stop_at = len(instrs) - 1 if trapped else None
            self._add_timing(result, instrs, executed, positions, n, stop_at, taken=taken,
                             late_stop=late_stop, max_cycles=max_cycles, pcs=pcs,
                             end_pc=pc + 1 if capped else pc)
        result.halted = code == ErrorCode.NONE
        if getattr(result.timing, "watchdog", False):
            k = result.timing.stop_index
            result.error_code = ErrorCode.WATCHDOG
            result.error_pc = result.stop_pc = pcs[k] if k < len(pcs) else n
            result.error_message = f"stopped by the watchdog after {max_cycles} cycles"
            note(f"{result.stop_pc:5d}: WATCHDOG: {result.error_message}")
        elif capped:
            raise AssertionError("the watchdog cap was reached but the timing model did not trip")
        return result

    # -- helpers -------------------------------------------------------------------------
    def _boot_error(self, program: Program, n: int) -> tuple[ErrorCode, str] | None:
        cfg = self.config
        if program.program_addr % cfg.bus_bytes:
            return ErrorCode.DMA_MISALIGNED, f"program_addr {program.program_addr:#x} not bus-word aligned"
        end = program.program_addr + n * INSTR_BYTES
        if end > cfg.ext_mem_bytes:
            return ErrorCode.DMA_OUT_OF_RANGE, f"program bytes up to {end - 1:#x} outside external memory"
        return None

    def _add_timing(self, result: IsaResult, instrs: list[Instruction],
                    executed: list[tuple[int, object, Footprint | None]], positions: list[int],
                    prog_len: int, stop_at: int | None = None, boot_error: bool = False,
                    taken: set | None = None, late_stop: bool = False, max_cycles: int = 0,
                    pcs=None, end_pc: int | None = None) -> None:
        """Fill cycles/busy (and hazards) from the timing model.

        ``instrs`` are the instructions reached in issue order, a failing one included (at
        ``stop_at``); an undecodable word or PC_OVERFLOW stops the model at ``len(instrs)``
        by itself.  ``positions[k]``: index in ``instrs`` of ``executed[k]``.
        ``taken``: positions of the taken BRANCHes; ``late_stop``: the failing instruction is
        a BRANCH stopped by BRANCH_LIMIT (it stops after reading its condition).
        """
        model = self._timing_model()
        if model is None:
            if self.check_hazards:
                raise RuntimeError("check_hazards needs the timing model sim/npu_timing.py")
            return
        extra = {"taken": taken, "late_stop": late_stop} if taken or late_stop else {}
        if max_cycles:
            extra["max_cycles"] = max_cycles
        if pcs is not None:
            extra.update(pcs=pcs, end_pc=end_pc)
        t = model.run_issued(instrs, stop_at=stop_at, prog_len=prog_len, boot_error=boot_error, **extra)
        result.timing = t
        result.cycles = int(t.total_cycles)
        result.busy = dict(t.busy)
        if self.check_hazards:
            # The model's busy intervals are inclusive [start, end]; the checker's half-open.
            # (After a watchdog stop only what issued before it: the first of two runs executes
            # past it, see run.)
            issued = len(t.per_instruction) - 1 if getattr(t, "watchdog", False) else len(t.per_instruction)
            keep = [j for j, k in enumerate(positions) if k < issued]
            intervals = [(t.per_instruction[positions[j]].start, t.per_instruction[positions[j]].end + 1)
                         for j in keep]
            result.hazards = find_hazards([executed[j] for j in keep], intervals)

    def _timing_model(self):
        if self.timing_model is not None:
            return self.timing_model(self.config)
        try:
            from sim.npu_timing import TimingModel
        except ModuleNotFoundError as e:
            if e.name != "sim.npu_timing":
                raise
            return None
        return TimingModel(self.config)


class _Effective:
    """An instruction with its effective (loop-offset) field values, for traces and hazard
    reports; unlike :class:`Instruction` its values may lie outside the field ranges."""

    def __init__(self, instr: Instruction, values: dict, iterations: tuple[int, ...]):
        self.instr, self.values, self.iterations = instr, values, iterations

    def __str__(self) -> str:
        shown = Instruction.__new__(Instruction)       # no range check: values are effective
        shown.name, shown.values = self.instr.name, self.values
        loops = ",".join(str(i) for i in self.iterations)
        return f"{disassemble_one(shown)}  # iteration {loops}"


def run_program(program: Program, inputs: dict[str, np.ndarray], **run_options) -> tuple[dict, IsaResult]:
    """Place ``inputs``, run ``program`` on its own configuration, read the outputs back.

    Raises
    ------
    IsaRunError
        If the NPU stopped with an error (the exception carries the result).
    """
    sim = IsaSim(program.config, check_hazards=run_options.pop("check_hazards", False))
    result = sim.run(program, program.memory_image(inputs), **run_options)
    if not result.ok:
        raise IsaRunError(result)
    return program.read_outputs(result.memory), result
