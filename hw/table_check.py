"""Error rules of TABLE as hardware expressions for the instruction checker (hw/checker.py).

Rules (isa/instructions.py TABLE doc): ILLEGAL_INSTRUCTION for mode 3, ``a_mem`` other
than ASRAM or ACC, a LOAD from ACC, or more than MAX_VECTOR_STEPS vectors; else, when ``n0*n1 > 0``, SRAM_OVERFLOW for input
rows (and, for a lookup, output rows) outside their memory, or TSRAM rows past its end (a
LOAD's rows written; a lookup's table rows, isa.vector.table_rows).  Rows per vector come
from isa/vector.py through hw/vpu_check.py's operand terms (split as described there).
"""
from __future__ import annotations

from amaranth import Mux

from isa.config import NpuConfig
from isa.instructions import TSRAM_BYTES, TableMode, VecMem, VecType
from isa.vector import table_rows
from hw.vpu_check import Term, _operand, mul, too_long


def table_errors(config: NpuConfig, v, mul=mul) -> tuple[object, object, list[Term]]:
    """(illegal, overflow on field values alone, range terms) of a TABLE whose fields are ``v``."""
    load = v.mode == TableMode.LOAD
    int16 = v.mode == TableMode.INT16
    illegal = ((v.mode > max(TableMode)) | ((v.a_mem != VecMem.ASRAM) & (v.a_mem != VecMem.ACC))
               | (load & (v.a_mem != VecMem.ASRAM)) | too_long("TABLE", v, mul=mul))
    touches = (v.n0 != 0) & (v.n1 != 0)
    tsram_rows = TSRAM_BYTES // config.bus_bytes
    t_count = Mux(load, mul(v.n0, v.n1), Mux(int16, table_rows(TableMode.INT16, config.bus_bytes),
                                           table_rows(TableMode.INT8, config.bus_bytes)))
    a_term = _operand(config, v, "a", touches, v.a_mem, Mux(int16, VecType.INT16, VecType.INT8), mul=mul)
    d_term = _operand(config, v, "d", touches & ~load, v.d_mem, Mux(int16, VecType.INT32, VecType.INT8), mul=mul)
    t_over = touches & (v.t_addr + t_count > tsram_rows)     # t_addr is no loop address
    return illegal, t_over, [a_term, d_term]
