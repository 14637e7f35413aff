"""Instructions as the compiler's passes see them: an :class:`Op` is one instruction plus
what it touches, for the scheduler's dependence analysis.

Footprints are derived from the instruction's own fields with the ISA semantics
(isa/instructions.py), never declared by the code that emits the instruction, so a lowering
bug cannot hide a dependence.  Ranges are half-open and conservative (a strided access
counts as its bounding range).  Memories: ``ASRAM``, ``WSRAM``, ``ACC`` in rows, ``PSRAM`` in
bus words, ``EXT`` in bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from isa import dma, matmul
from isa.config import NpuConfig
from isa.encoding import Instruction, make
from isa.instructions import LEN_BITS, BranchTest, Sram, TableMode, Unit, VecDst, VecMem
from isa.vector import PARAM_ROWS, WINDOWED, operands, table_rows

from compiler.core.costmodel import instr_timing

MAX_LEN = (1 << LEN_BITS) - 1          # n0, n1, count, len* fields
ALL_UNITS = 0b111                      # wait mask: DMA, MXU, VPU

Access = tuple[str, int, int]     # (memory, lo, hi)


@dataclass
class Op:
    """One instruction with its footprint, timing (compiler/core/costmodel.py) and layer."""

    instr: Instruction
    layer: int
    reads: list[Access] = field(default_factory=list)
    writes: list[Access] = field(default_factory=list)
    occupancy: int = 1       # cycles until its unit takes the next instruction
    busy: int = 0            # cycles until its unit is idle

    @property
    def unit(self) -> Unit:
        return self.instr.unit


def new_op(config: NpuConfig, layer: int, name: str, **fields: int) -> Op:
    """Build the instruction ``name`` (fields checked against the ISA table) as an Op."""
    instr = make(name, **fields)
    reads, writes = footprint(instr, config)
    return Op(instr, layer, reads, writes, *instr_timing(instr, config))


def _ext_range(v: dict, bus: int) -> Access:
    """External bytes a DMA touches (word or element mode: isa/dma.py)."""
    span = dma.ext_span(v, bus)
    return ("EXT", 0, 0) if span is None else ("EXT", *span)


def footprint(instr: Instruction, config: NpuConfig) -> tuple[list[Access], list[Access]]:
    """(reads, writes) of ``instr``."""
    v = instr.values
    name = instr.name
    if name == "DMA_LOAD":
        sram = Sram(v["sram"]).name
        words = dma.sram_words(v, config.bus_bytes, store=False)
        return [_ext_range(v, config.bus_bytes)], [(sram, v["sram_addr"], v["sram_addr"] + words)]
    if name == "DMA_STORE":
        words = dma.sram_words(v, config.bus_bytes, store=True)
        return [("ASRAM", v["sram_addr"], v["sram_addr"] + words)], [_ext_range(v, config.bus_bytes)]
    if name == "MATMUL":
        n = v["n0"] * v["n1"]
        last = v["a_addr"] + max(v["n1"] - 1, 0) * v["a_stride1"] + max(v["n0"] - 1, 0) * v["a_stride0"]
        a_type, w_type = v.get("a_type", 0), v.get("w_type", 0)
        p = matmul.rows_per_vector(a_type)     # INT16: 2 ASRAM rows per input, 2 ACC rows per result
        reads = [("ASRAM", v["a_addr"], last + p),
                 ("WSRAM", v["w_addr"], v["w_addr"] + matmul.tile_rows(config.array_rows, w_type))]
        acc = ("ACC", v["acc_addr"], v["acc_addr"] + p * n)
        if v["accumulate"]:
            reads.append(acc)
        return reads, [acc]
    if name == "ACT":
        wpr = config.words_per_wide_row
        reads = [("ACC", v["acc_addr"], v["acc_addr"] + v["count"]),
                 ("PSRAM", v["param_addr"] * wpr, (v["param_addr"] + 3) * wpr)]
        return reads, [("ASRAM", v["dst_addr"], v["dst_addr"] + v["count"])]
    if name in VECTOR_OPS:
        return _vector_footprint(name, v, config)
    if name == "BRANCH" and v["test"] != BranchTest.ALWAYS:      # the condition row
        return [("ACC" if v["mem"] == VecDst.ACC else "ASRAM", v["row"], v["row"] + 1)], []
    return [], []


VECTOR_OPS = ("VRESCALE", "VALU", "VPOOL", "TABLE", "VDWCONV")
_VEC_MEMS = {int(VecMem.ASRAM): "ASRAM", int(VecMem.ACC): "ACC", int(VecMem.PSRAM): "PSRAM"}


def _vector_footprint(name: str, v: dict, config: NpuConfig) -> tuple[list[Access], list[Access]]:
    """Footprint of a VRESCALE, VALU, VPOOL or VDWCONV from isa/vector.py's operand rules
    (PSRAM rows in bus words, like ACT's parameters)."""
    wpr = config.words_per_wide_row
    if name == "TABLE":
        return _table_footprint(v, config)
    sources, dst = operands(name, v)
    reads: list[Access] = []
    if name in PARAM_ROWS:      # the parameter rows are always read
        reads.append(("PSRAM", v["param_addr"] * wpr, (v["param_addr"] + PARAM_ROWS[name]) * wpr))
    n0, n1 = v["n0"], v["n1"]
    if n0 * n1 == 0 or (name in WINDOWED and v["k0"] * v["k1"] == 0):
        return reads, []

    def access(operand) -> Access:
        mem = _VEC_MEMS[int(operand.mem)]
        lo = v[f"{operand.prefix}_addr"]
        hi = lo + operand.last_offset(n0, n1) + 1
        return (mem, lo * wpr, hi * wpr) if mem == "PSRAM" else (mem, lo, hi)

    reads += [access(o) for o in sources]
    return reads, [access(dst)]


def _table_footprint(v: dict, config: NpuConfig) -> tuple[list[Access], list[Access]]:
    """TABLE: a LOAD reads ASRAM rows and writes TSRAM rows; a lookup reads its input, the
    table's TSRAM rows, and writes its output (isa/instructions.py TABLE)."""
    n0, n1 = v["n0"], v["n1"]
    if n0 * n1 == 0:
        return [], []
    if v["mode"] == TableMode.LOAD:
        last = v["a_addr"] + (n1 - 1) * v["a_stride1"] + (n0 - 1) * v["a_stride0"]
        return [("ASRAM", v["a_addr"], last + 1)], [("TSRAM", v["t_addr"], v["t_addr"] + n0 * n1)]
    (src,), dst = operands("TABLE", v)

    def access(o) -> Access:
        lo = v[f"{o.prefix}_addr"]
        return (_VEC_MEMS[int(o.mem)], lo, lo + o.last_offset(n0, n1) + 1)

    table = ("TSRAM", v["t_addr"], v["t_addr"] + table_rows(v["mode"], config.bus_bytes))
    return [table, access(src)], [access(dst)]


class FixedOp(Op):
    """An op emitted with its final wait mask and place (LOOPs included): the scheduler and
    the loop search keep runs of them as they are (lowerings that emit their own LOOPs:
    compiler/kinds/conv/fully_connected.py, compiler/kinds/mxu_conv/lower_loops.py)."""
