"""The ISA simulator: runs a program image bit-exactly as the RTL does, every memory byte.

:class:`IsaSim` boots like the hardware: it copies the program's instruction stream from
external memory (``program_addr``, ``len(program.instructions)`` instructions) into the
instruction memory, then executes from PC 0 in program order until HALT or an error.  The
instruction semantics live in sim/isa_units.py, the hazard checker in sim/isa_hazards.py;
cycles come from the RTL's cycle model in sim/npu_timing.py.

Functional results do not depend on how instructions overlap in time, provided the wait
masks order every conflicting pair; ``check_hazards=True`` verifies that against the timing
model's per-instruction ``(start, end)`` cycles.

Boot and stop conventions (the ISA table does not describe the loader; these are the
RTL's, hw/csr.py and hw/checker.py):

* more instructions than ``imem_rows``: PROGRAM_TOO_LARGE; ``program_addr`` not bus-word
  aligned: DMA_MISALIGNED; the stream reaching past ``ext_mem_bytes``: DMA_OUT_OF_RANGE.
  Checked in that order before anything is read; nothing runs, error_pc and stop_pc are 0;
* a word that does not decode is ILLEGAL_INSTRUCTION when the PC reaches it (not before);
* running past the last instruction without HALT is PC_OVERFLOW with error_pc = the
  instruction count.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from isa.asm import disassemble_one
from isa.config import NpuConfig
from isa.encoding import EncodingError, Instruction, decode
from isa.instructions import INSTR_BYTES, ErrorCode
from isa.program import Program
from tosa_ir.errors import InvalidInput, NpuError

from sim.isa_hazards import Hazard, find_hazards
from sim.isa_units import EXECUTORS, Footprint, NpuState, Trap


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
        Instructions completed (HALT included; the failing one excluded).
    error_message : str
        What went wrong, for people ("" after HALT).
    stop_pc : int
        The hardware's STOP_PC register: index of the HALT or of the failing instruction
        (0 for boot errors, the instruction count for PC_OVERFLOW).
    trace : list of str
        One line per instruction reached, when tracing.
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
            trace: bool | Callable[[str], None] = False, timing: bool = True) -> IsaResult:
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
            Run the timing model for ``cycles``/``busy`` (forced on by ``check_hazards``).
        """
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
                self._add_timing(result, [], [], n, boot_error=True)
            return result

        state.ensure_ext(program.program_addr + n * INSTR_BYTES)
        imem = state.ext[program.program_addr:program.program_addr + n * INSTR_BYTES].tobytes()
        executed: list[tuple[int, Instruction, Footprint | None]] = []
        instrs: list[Instruction] = []
        code, error_pc, message = ErrorCode.PC_OVERFLOW, n, f"ran past the last of {n} instructions without HALT"
        for pc in range(n):
            try:
                instr = decode(imem[pc * INSTR_BYTES:(pc + 1) * INSTR_BYTES])
            except EncodingError as e:
                code, error_pc, message = ErrorCode.ILLEGAL_INSTRUCTION, pc, str(e)
                note(f"{pc:5d}: <undecodable> -> {code.name}: {message}")
                break
            text = disassemble_one(instr) if trace else instr.name
            executor = EXECUTORS.get(instr.name)
            if executor is None:            # HALT or SYNC: sequencer only, no data
                footprint = None
            else:
                try:
                    footprint = executor(state, instr.values)
                except Trap as t:
                    code, error_pc, message = t.code, pc, str(t)
                    note(f"{pc:5d}: {text} -> {code.name}: {message}")
                    instrs.append(instr)
                    break
            note(f"{pc:5d}: {text}")
            instrs.append(instr)
            executed.append((pc, instr, footprint))
            if instr.name == "HALT":
                code, error_pc, message = ErrorCode.NONE, None, ""
                break
        if code == ErrorCode.PC_OVERFLOW:
            note(f"{n:5d}: PC_OVERFLOW: {message}")

        stop_pc = len(executed) - 1 if code == ErrorCode.NONE else error_pc
        result = IsaResult(state.final_memory(), None, {}, code, error_pc, len(executed), message,
                           stop_pc, log, state=state)
        if timing or self.check_hazards:
            self._add_timing(result, instrs, executed, n)
        return result

    # -- helpers -------------------------------------------------------------------------
    def _boot_error(self, program: Program, n: int) -> tuple[ErrorCode, str] | None:
        cfg = self.config
        if n > cfg.imem_rows:
            return ErrorCode.PROGRAM_TOO_LARGE, f"{n} instructions, instruction memory holds {cfg.imem_rows}"
        if program.program_addr % cfg.bus_bytes:
            return ErrorCode.DMA_MISALIGNED, f"program_addr {program.program_addr:#x} not bus-word aligned"
        end = program.program_addr + n * INSTR_BYTES
        if end > cfg.ext_mem_bytes:
            return ErrorCode.DMA_OUT_OF_RANGE, f"program bytes up to {end - 1:#x} outside external memory"
        return None

    def _add_timing(self, result: IsaResult, instrs: list[Instruction],
                    executed: list[tuple[int, Instruction, Footprint | None]], prog_len: int,
                    boot_error: bool = False) -> None:
        """Fill cycles/busy (and hazards) from the timing model.

        ``instrs`` are the instructions reached, the failing one included; an undecodable
        word or PC_OVERFLOW stops the model at ``len(instrs)`` by itself.
        """
        model = self._timing_model()
        if model is None:
            if self.check_hazards:
                raise RuntimeError("check_hazards needs the timing model sim/npu_timing.py")
            return
        stop_at = result.error_pc if result.error_code != ErrorCode.NONE else None
        if stop_at is not None and stop_at >= len(instrs):
            stop_at = None
        t = model.run(instrs, stop_at=stop_at, prog_len=prog_len, boot_error=boot_error)
        result.timing = t
        result.cycles = int(t.total_cycles)
        result.busy = dict(t.busy)
        if self.check_hazards:
            # The model's busy intervals are inclusive [start, end]; the checker's half-open.
            intervals = [(t.per_instruction[pc].start, t.per_instruction[pc].end + 1)
                         for pc, _, _ in executed]
            result.hazards = find_hazards(executed, intervals)

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
