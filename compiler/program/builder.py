"""Serialisation: scheduled instructions + memory plan -> :class:`isa.program.Program`."""
from __future__ import annotations

from isa.config import NpuConfig
from isa.instructions import INSTR_BYTES
from isa.program import Program
from tosa_ir.errors import Unsupported

from compiler.program.memplan import ExtPlan, align
from compiler.program.schedule import Scheduled

COMPILER_VERSION = "tosa-npu compiler 0.1"


def scratchpad_words(config: NpuConfig) -> dict[str, int]:
    return {"ASRAM": config.asram_rows, "WSRAM": config.wsram_rows, "ACC": config.acc_rows,
            "PSRAM": config.psram_rows * config.words_per_wide_row}


def build_program(scheduled: Scheduled, ext: ExtPlan, config: NpuConfig, info: dict,
                  program_ops: list | None = None) -> Program:
    """The program image of ``program_ops`` (default ``scheduled.ops``; LOOPs allowed: the
    footprint check runs on the straight-line ``scheduled.ops`` they replay).  Raises
    Unsupported if it exceeds the external memory (the instructions are fetched from there:
    any number runs) or a LOOP body does not fit in the instruction buffer."""
    instructions = [op.instr for op in (scheduled.ops if program_ops is None else program_ops)]
    for instr in instructions:
        if instr.name == "LOOP" and instr.values["body"] >= config.imem_rows:
            raise Unsupported(f"a LOOP body of {instr.values['body']} instructions; the NPU's instruction "
                              f"buffer holds {config.imem_rows}, which must hold the body and one more")
    program_addr = align(ext.end)
    end = program_addr + len(instructions) * INSTR_BYTES
    if end > config.ext_mem_bytes:
        raise Unsupported(f"the program needs {end} bytes of external memory; the NPU "
                          f"configuration has {config.ext_mem_bytes}")
    limits = scratchpad_words(config)
    for pc, op in enumerate(scheduled.ops):
        for mem, lo, hi in op.reads + op.writes:
            if mem in limits and hi > limits[mem] and hi > lo:
                raise AssertionError(f"compiler bug: pc {pc} {op.instr.name} touches {mem} up to "
                                     f"{hi} of {limits[mem]}")

    info = {"compiler": COMPILER_VERSION, "ext_bytes": ext.end, **info}
    return Program(config=config, instructions=instructions, program_addr=program_addr,
                   segments=list(ext.segments), inputs=list(ext.inputs), outputs=list(ext.outputs), info=info)
