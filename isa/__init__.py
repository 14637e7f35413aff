"""The hardware/software contract: instruction set and hardware configuration.

This package imports nothing else of the project; everything else imports it.
"""
from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig
from isa.encoding import (
    EncodingError, Instruction, decode, decode_program, encode, encode_program, make,
)
from isa.instructions import (
    BY_NAME, BY_OPCODE, INSTR_BITS, INSTR_BYTES, INSTRUCTIONS, ErrorCode, Sram, Unit,
)

__all__ = [
    "NpuConfig", "DEFAULT_CONFIG", "SMALL_CONFIG", "Instruction", "EncodingError", "make",
    "encode", "decode", "encode_program", "decode_program", "INSTRUCTIONS", "BY_NAME",
    "BY_OPCODE", "INSTR_BITS", "INSTR_BYTES", "ErrorCode", "Sram", "Unit",
]
