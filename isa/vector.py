"""Facts about the vector-unit instructions (VRESCALE, VALU, VPOOL, TABLE, VDWCONV, and ACT's schedule) that
every implementation derives from the table in isa/instructions.py: element types, how
many rows a vector occupies, which operands an operation reads, and the cycle schedule.

The ISA simulator (sim/isa/vpu.py), the timing model (sim/npu_timing.py), the hardware
(hw/vpu*.py) and the compiler use these functions; none of them restates a rule here.

Schedule (hw/vpu.py implements it; sim/npu_timing.py counts it).  A command taken in cycle
``c`` reads ``K`` parameter rows from ``c+1``; then output vector ``v`` (0 .. N-1) owns
``P`` cycles from ``c+1+K+v*P``: its window elements (``E`` of them, 1 outside VPOOL and
VDWCONV) are read in its first ``E*R`` cycles (``R`` rows each: the most any operand it
reads occupies; an operand with fewer rows reads them first), and its ``W`` result rows are
written one per cycle from ``D + X`` cycles after its last read (``D`` = ``WRITE_LATENCY``,
7, for the vector unit, ``TABLE_WRITE_LATENCY``, 5, for the TABLE unit; ``X`` = 0,
VDWCONV's 2).  ``P = max(E*R + X, W)``.  The unit is busy from ``c+1`` through the last
write, ``K + (N-1)*P + E*R + X + W + D - 1`` cycles, and takes its next
command only when idle; a command with ``N*E == 0`` does nothing.

VDWCONV's two extra cycles: its window's products and the scaling of the sum share the
lane's one multiplier, and each element's product is registered before it is added to the
sum (so that no cycle holds a multiply and a 32-bit addition), so after the last element's
product (S0) comes its addition, then the sum goes through the multiplier again in a stage
of its own (S1): two cycles per output vector in which no element is multiplied.

Why 7: a row read in cycle ``t`` is on the read port at ``t+1`` and registered there as it
comes (the read ports' data registers: the memories sit far from the unit on an FPGA, and
the route from a block RAM's output was most of a cycle by itself); the lanes are decoded
from those registers and registered at ``t+2``, the element is computed from those
registers at ``t+3`` (the scaling multiply's partial products, VALU, the pooling step) into
X0, the partial products are summed at ``t+4`` into X1, the rounding addition runs from X1
at ``t+5`` into T, the shift from T at ``t+6`` into Y, and zero point, clamps and the output
format run from Y as the row is written at ``t+7``.  Each of those steps is about one multiplier, one 64-bit carry
chain or one shifter deep, so the clock is not limited by a read port feeding a multiplier
feeding a shifter (hw/vpu.py; docs/hardware.md "Timing").  The TABLE unit (hw/table.py)
has no rounding shift and no data registers after its read ports: it registers its table
entries between the table read and the interpolation, and writes at ``t+5``.
"""
from __future__ import annotations

from dataclasses import dataclass

from isa.instructions import MAX_VECTOR_STEPS, TSRAM_BYTES, VecType, PoolMode, TableMode, ValuOp, VecMem

DTYPE_BITS = {VecType.INT8: 8, VecType.INT16: 16, VecType.INT32: 32, VecType.INT48: 48,
              VecType.UINT8: 8, VecType.UINT16: 16}
UNSIGNED = frozenset({VecType.UINT8, VecType.UINT16})
# The spec's names of the types (sim/tosa_helpers.py uses them).
TOSA_NAME = {VecType.INT8: "int8", VecType.INT16: "int16", VecType.INT32: "int32", VecType.INT48: "int48",
             VecType.UINT8: "uint8", VecType.UINT16: "uint16"}

# Legal values of the type fields of each instruction.
VRESCALE_IN_TYPES = frozenset(VecType)
VRESCALE_OUT_TYPES = frozenset(VecType) - {VecType.INT48}
VALU_TYPES = frozenset({VecType.INT8, VecType.INT16, VecType.INT32})
VPOOL_TYPES = VALU_TYPES
# TABLE: (input type, output type) of each lookup mode, and the memories it reads.
TABLE_TYPES = {TableMode.INT8: (VecType.INT8, VecType.INT8), TableMode.INT16: (VecType.INT16, VecType.INT32)}
TABLE_SRC_MEMS = frozenset({VecMem.ASRAM, VecMem.ACC})

MAX_ROWS = 6                 # an INT48 vector in ASRAM
WRITE_LATENCY = 7            # cycles from a vector's last read to its first write (docstring)
TABLE_WRITE_LATENCY = 5      # the TABLE unit's (hw/table.py: no rounding shift)
PARAM_ROWS = {"ACT": 3, "VRESCALE": 2, "VDWCONV": 3}
# Instructions whose output vectors reduce a window of k1 x k0 input vectors.
WINDOWED = ("VPOOL", "VDWCONV")
# Cycles a vector's result comes later than WRITE_LATENCY after its last read (docstring).
EXTRA_LATENCY = {"VDWCONV": 2}


def dtype_range(dtype: VecType) -> tuple[int, int]:
    """(lowest, highest) value of ``dtype``."""
    bits = DTYPE_BITS[VecType(dtype)]
    if dtype in UNSIGNED:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def vector_rows(mem: int, dtype: int) -> int:
    """Rows one vector of ``dtype`` occupies in memory ``mem`` (a VecMem value)."""
    if VecMem(mem) is VecMem.ASRAM:
        return DTYPE_BITS[VecType(dtype)] // 8
    return 2 if VecType(dtype) is VecType.INT48 else 1


# -- VALU operations --------------------------------------------------------------------------
@dataclass(frozen=True)
class ValuSig:
    """Operands an operation reads and its result type.

    ``arity``: 1 reads a; 2 reads a and b; 3 reads a, b and c.  ``a_type``/``out``: None
    means the instruction's ``dtype``, else a fixed type.
    """

    arity: int
    a_type: VecType | None = None
    out: VecType | None = None


_BOOL = VecType.INT8
VALU_SIGS: dict[ValuOp, ValuSig] = {
    ValuOp.ADD: ValuSig(2), ValuOp.SUB: ValuSig(2), ValuOp.MUL: ValuSig(2, out=VecType.INT32),
    ValuOp.ARITHMETIC_RIGHT_SHIFT: ValuSig(2), ValuOp.LOGICAL_LEFT_SHIFT: ValuSig(2),
    ValuOp.LOGICAL_RIGHT_SHIFT: ValuSig(2),
    ValuOp.BITWISE_AND: ValuSig(2), ValuOp.BITWISE_OR: ValuSig(2), ValuOp.BITWISE_XOR: ValuSig(2),
    ValuOp.BITWISE_NOT: ValuSig(1),
    ValuOp.MINIMUM: ValuSig(2), ValuOp.MAXIMUM: ValuSig(2), ValuOp.CLAMP: ValuSig(1),
    ValuOp.EQUAL: ValuSig(2, out=_BOOL), ValuOp.GREATER: ValuSig(2, out=_BOOL),
    ValuOp.GREATER_EQUAL: ValuSig(2, out=_BOOL),
    ValuOp.LOGICAL_AND: ValuSig(2, out=_BOOL), ValuOp.LOGICAL_OR: ValuSig(2, out=_BOOL),
    ValuOp.LOGICAL_XOR: ValuSig(2, out=_BOOL), ValuOp.LOGICAL_NOT: ValuSig(1, out=_BOOL),
    ValuOp.SELECT: ValuSig(3, a_type=_BOOL),
    ValuOp.ABS: ValuSig(1), ValuOp.NEGATE: ValuSig(1), ValuOp.CLZ: ValuSig(1), ValuOp.COPY: ValuSig(1),
}
assert set(VALU_SIGS) == set(ValuOp)


# -- operands of an instruction ---------------------------------------------------------------
@dataclass(frozen=True)
class Operand:
    """One vector operand as an instruction uses it.

    ``prefix``: the fields' prefix ("a", "b", "c", "d"); ``mem``: VecMem value (VecDst
    values coincide); ``dtype``; ``rows``: rows per vector; ``strides``: (stride0, stride1)
    field values; ``window``: VPOOL's (w_stride0, k0, w_stride1, k1), else None.
    """

    prefix: str
    mem: int
    dtype: VecType
    rows: int
    strides: tuple[int, int]
    window: tuple[int, int, int, int] | None = None

    def last_offset(self, n0: int, n1: int) -> int:
        """Offset from the operand's address of the last row it touches (all counts > 0)."""
        off = (n1 - 1) * self.strides[1] + (n0 - 1) * self.strides[0] + self.rows - 1
        if self.window is not None:
            ws0, k0, ws1, k1 = self.window
            off += (k1 - 1) * ws1 + (k0 - 1) * ws0
        return off


def steps(name: str, v: dict) -> int:
    """Vector steps of a vector instruction: n0*n1, times k0*k1 for VPOOL and VDWCONV
    (MAX_VECTOR_STEPS)."""
    n = v["n0"] * v["n1"]
    # (n0*n1) * (k0*k1), not ((n0*n1)*k0)*k1: the hardware checker evaluates this on field
    # values (hw/vpu_check.py), where it is two levels of multipliers instead of three.
    return n * (v["k0"] * v["k1"]) if name in WINDOWED else n


def legal(name: str, v: dict) -> str | None:
    """Why vector instruction ``name`` is illegal (an enum field naming nothing, or more
    than MAX_VECTOR_STEPS steps), or None."""
    why = _legal_fields(name, v)
    if why is None and steps(name, v) > MAX_VECTOR_STEPS:
        what = "n0*n1*k0*k1" if name in WINDOWED else "n0*n1"
        why = f"{what} = {steps(name, v)} exceeds MAX_VECTOR_STEPS ({MAX_VECTOR_STEPS})"
    return why


def _legal_fields(name: str, v: dict) -> str | None:
    mems = [p for p in ("a", "b", "c") if f"{p}_mem" in v and v[f"{p}_mem"] not in set(VecMem)]
    if mems:
        return f"{mems[0]}_mem={v[mems[0] + '_mem']} names no memory"
    if name == "VRESCALE":
        if v["in_type"] not in set(VRESCALE_IN_TYPES):
            return f"in_type={v['in_type']} is not a type"
        if v["out_type"] not in set(VRESCALE_OUT_TYPES):
            return f"out_type={v['out_type']} is not an output type"
    elif name == "VALU":
        if v["op"] not in set(ValuOp):
            return f"op={v['op']} is not an operation"
        if v["dtype"] not in set(VALU_TYPES):
            return f"dtype={v['dtype']} is not a VALU type"
    elif name == "VPOOL":
        if v["dtype"] not in set(VPOOL_TYPES):
            return f"dtype={v['dtype']} is not a VPOOL type"
    elif name == "TABLE":
        if v["mode"] not in set(TableMode):
            return f"mode={v['mode']} is not a TABLE mode"
        if v["a_mem"] not in set(TABLE_SRC_MEMS):
            return f"a_mem={v['a_mem']}: TABLE reads ASRAM or ACC"
        if v["mode"] == TableMode.LOAD and v["a_mem"] != VecMem.ASRAM:
            return "a TABLE LOAD reads ASRAM (a_mem=0)"
    return None


def table_image(mode: int, table) -> bytes:
    """The TSRAM bytes that hold a TOSA TABLE ``table`` for lookup ``mode`` (TABLE doc): for
    INT8 the 256 int8 entries; for INT16 the 512 little-endian int16 pairs (table[i],
    table[i+1]) of the 513-entry table.  This is also the layout in external memory for the
    DMA_LOAD (to ASRAM) and TABLE LOAD that install it."""
    import numpy as np

    t = np.asarray(table, dtype=np.int64).ravel()
    if TableMode(mode) is TableMode.INT8:
        if t.size != 256 or t.min() < -128 or t.max() > 127:
            raise ValueError("an INT8 table has 256 entries in -128..127")
        return t.astype(np.int8).tobytes()
    if t.size != 513 or t.min() < -32768 or t.max() > 32767:
        raise ValueError("an INT16 table has 513 entries in -32768..32767")
    return np.stack([t[:-1], t[1:]], axis=1).astype("<i2").tobytes()


def table_rows(mode: int, bus_bytes: int) -> int:
    """TSRAM rows of a legal TABLE lookup's table (``mode`` INT8 or INT16)."""
    size = 256 if TableMode(mode) is TableMode.INT8 else TSRAM_BYTES
    return -(-size // bus_bytes)


def operands(name: str, v: dict) -> tuple[list[Operand], Operand]:
    """(sources read, destination) of a legal VRESCALE, VALU, VPOOL, TABLE lookup or VDWCONV."""
    def src(p, dtype, strides=None, window=None):
        mem = v[f"{p}_mem"]
        return Operand(p, mem, VecType(dtype), vector_rows(mem, dtype),
                       strides or (v[f"{p}_stride0"], v[f"{p}_stride1"]), window)

    def dst(dtype):
        return Operand("d", v["d_mem"], VecType(dtype), vector_rows(v["d_mem"], dtype),
                       (v["d_stride0"], v["d_stride1"]))

    if name == "VRESCALE":
        return [src("a", v["in_type"])], dst(v["out_type"])
    if name == "VPOOL":
        window = (v["w_stride0"], v["k0"], v["w_stride1"], v["k1"])
        out = v["dtype"] if v["mode"] == PoolMode.MAX else VecType.INT32
        return [src("a", v["dtype"], window=window)], dst(out)
    if name == "VDWCONV":       # weights: window element e at row b_addr + e
        window = (v["w_stride0"], v["k0"], v["w_stride1"], v["k1"])
        weights = Operand("b", v["b_mem"], VecType.INT8, 1, (0, 0), (1, v["k0"], v["k0"], v["k1"]))
        return [src("a", VecType.INT8, window=window), weights], dst(VecType.INT8)
    if name == "TABLE":         # lookups only (a LOAD writes TSRAM rows, not a vector)
        in_t, out_t = TABLE_TYPES[TableMode(v["mode"])]
        return [src("a", in_t)], dst(out_t)
    if name == "VALU":
        sig = VALU_SIGS[ValuOp(v["op"])]
        t = VecType(v["dtype"])
        reads = [src("a", sig.a_type if sig.a_type is not None else t)]
        if sig.arity >= 2:
            reads.append(src("b", t))
        if sig.arity == 3:
            fixed = (0, 0) if v["c_fixed"] else (v["b_stride0"], v["b_stride1"])
            reads.append(src("c", t, strides=fixed))
        return reads, dst(sig.out if sig.out is not None else t)
    raise ValueError(f"{name} is not a vector instruction")


# -- schedule -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """Cycle schedule of one vector-unit command (module docstring)."""

    K: int      # parameter rows read first
    N: int      # output vectors
    E: int      # window elements per output vector
    R: int      # rows per element (the most any operand read occupies)
    W: int      # rows written per output vector
    P: int      # cycles per output vector
    X: int = 0  # cycles of latency beyond the write latency (EXTRA_LATENCY)
    latency: int = WRITE_LATENCY    # the unit's write latency (TABLE: TABLE_WRITE_LATENCY)

    @property
    def busy(self) -> int:
        """Busy cycles (from the cycle after the command is taken); 0 if nothing happens."""
        if self.N * self.E == 0:
            return 0
        return self.K + (self.N - 1) * self.P + self.E * self.R + self.X + self.W + self.latency - 1


def schedule(name: str, v: dict) -> Schedule:
    """Schedule of a legal ACT, VRESCALE, VALU, VPOOL, TABLE or VDWCONV with field values ``v``."""
    if name == "ACT":
        return Schedule(K=PARAM_ROWS["ACT"], N=v["count"], E=1, R=1, W=1, P=1)
    if name == "TABLE" and v["mode"] == TableMode.LOAD:     # one ASRAM row -> one TSRAM row
        return Schedule(K=0, N=v["n0"] * v["n1"], E=1, R=1, W=1, P=1, latency=TABLE_WRITE_LATENCY)
    reads, out = operands(name, v)
    E = v["k0"] * v["k1"] if name in WINDOWED else 1
    R = max(op.rows for op in reads)
    X = EXTRA_LATENCY.get(name, 0)
    return Schedule(K=PARAM_ROWS.get(name, 0), N=v["n0"] * v["n1"], E=E, R=R, W=out.rows,
                    P=max(E * R + X, out.rows), X=X,
                    latency=TABLE_WRITE_LATENCY if name == "TABLE" else WRITE_LATENCY)
