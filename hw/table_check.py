"""Error rules of TABLE as hardware expressions for the instruction checker (hw/checker.py).

Rules (isa/instructions.py TABLE doc): ILLEGAL_INSTRUCTION for mode 3, ``a_mem`` other
than ASRAM or ACC, a LOAD from ACC, or more than MAX_VECTOR_STEPS vectors; else, when ``n0*n1 > 0``, SRAM_OVERFLOW for input
rows (and, for a lookup, output rows) outside their memory, or TSRAM rows past its end (a
LOAD's rows written; a lookup's table rows, isa.vector.table_rows).  Rows per vector come
from isa/vector.py through hw/vpu_check.py's operand check.
"""
from __future__ import annotations

from amaranth import Mux

from isa.config import NpuConfig
from isa.instructions import TSRAM_BYTES, TableMode, VecMem, VecType
from isa.vector import table_rows
from hw.vpu_check import _overflow, too_long


def table_errors(config: NpuConfig, v) -> tuple[object, object]:
    """(illegal, overflow) conditions of a TABLE whose (effective) fields are ``v``."""
    load = v.mode == TableMode.LOAD
    int16 = v.mode == TableMode.INT16
    illegal = ((v.mode > max(TableMode)) | ((v.a_mem != VecMem.ASRAM) & (v.a_mem != VecMem.ACC))
               | (load & (v.a_mem != VecMem.ASRAM)) | too_long("TABLE", v))
    touches = (v.n0 != 0) & (v.n1 != 0)
    tsram_rows = TSRAM_BYTES // config.bus_bytes
    t_count = Mux(load, v.n0 * v.n1, Mux(int16, table_rows(TableMode.INT16, config.bus_bytes),
                                           table_rows(TableMode.INT8, config.bus_bytes)))
    a_over = _overflow(config, v, "a", v.a_mem, Mux(int16, VecType.INT16, VecType.INT8))
    d_over = _overflow(config, v, "d", v.d_mem, Mux(int16, VecType.INT32, VecType.INT8))
    t_over = v.t_addr + t_count > tsram_rows
    return illegal, touches & (a_over | (~load & d_over) | t_over)
