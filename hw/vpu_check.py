"""Error rules of the vector instructions VRESCALE, VALU, VPOOL and VDWCONV, as hardware expressions
for the instruction checker (hw/checker.py).

Rules (isa/instructions.py docs): ILLEGAL_INSTRUCTION for an enum field value that names
nothing or more than MAX_VECTOR_STEPS vector steps (isa.vector.legal); else SRAM_OVERFLOW for
VRESCALE's two and VDWCONV's three parameter rows (always) and, when the instruction touches
data (``n0*n1 > 0``, times ``k0*k1`` for VPOOL and VDWCONV), for any
operand it reads or the destination reaching past the end of its memory (or starting
below row 0, for an effective address offset by a LOOP).  Which operands are read and how
many rows a vector occupies come from isa/vector.py.

The rules are split for the sequencer's two checking points (hw/precheck.py): everything
that depends on field values only (``illegal``, and per operand the *excess*
``last - depth``: the last row it touches minus its memory's depth, which needs the
multiplies) is computed when the instruction arrives in the instruction buffer; what
depends on the loop offsets (the effective first row below 0, the excess plus the offset
reaching 0) is left for the read port.  A :class:`Term` is one operand's range rule.
"""
from __future__ import annotations

from typing import NamedTuple

from amaranth import Cat, Const, Mux, Value

from isa.config import NpuConfig
from isa.instructions import BY_NAME, MAX_VECTOR_STEPS, VecType, VecMem
from isa.vector import (
    PARAM_ROWS, VALU_SIGS, VALU_TYPES, VPOOL_TYPES, VRESCALE_IN_TYPES, VRESCALE_OUT_TYPES, WINDOWED, vector_rows,
)

CHECKED = ("VRESCALE", "VALU", "VPOOL", "VDWCONV")


def _is_any(value, options) -> object:
    return Cat(value == int(o) for o in options).any()


def _rows(mem, dtype) -> object:
    """Rows per vector for a (memory, type) pair, as a small lookup."""
    out = 0
    for m in VecMem:
        for t in VecType:
            out = Mux((mem == int(m)) & (dtype == int(t)), vector_rows(m, t), out)
    return out


def _depth(config: NpuConfig, mem) -> object:
    return Mux(mem == VecMem.ASRAM, config.asram_rows,
               Mux(mem == VecMem.ACC, config.acc_rows, config.psram_rows))


class Term(NamedTuple):
    """One range rule of an instruction: when ``gate`` (field values only) holds, address
    field ``field`` at its effective value ``e = field + off`` must satisfy ``lo + off >= 0``
    and ``hi + off < 0``; ``lo`` is the field itself unless given (a DMA's external range
    starts below its address for a negative stride).  ``hi`` is the excess of the access's
    last row (or byte) over the last one that exists, at offset 0."""
    field: str
    gate: object
    hi: object
    lo: object = None


def as_signed(value) -> object:
    """``value`` as a signed value of the same numbers (one bit wider if it was unsigned)."""
    value = Value.cast(value)
    return value if value.shape().signed else Cat(value, Const(0, 1)).as_signed()


def excess(last, limit) -> object:
    """``last - limit`` exactly (signed): >= 0 when ``last`` is past a memory of ``limit`` rows."""
    return as_signed(last) - as_signed(limit)


def mul(a, b) -> object:
    """A product of field values.  Rule functions take the multiplication as a parameter
    (``mul``) so that hw/precheck.py can compute every product a cycle ahead of the rest."""
    return a * b


def capped_product(a, b, limit: int) -> object:
    """``a * b`` (both unsigned) wherever that is at most ``limit``, and some value above
    ``limit`` wherever it is not.

    Why: a product of products (a DMA's word count, VPOOL's steps) cannot be formed a cycle
    ahead like the products of fields (hw/precheck.py); after the register it is one more
    multiplier level in series with the sums.  The rules only compare it with a memory depth
    or a step limit, so each factor is capped at ``2**s - 1`` (``2**s > limit + 1``): a
    factor at or above ``2**s`` times a non-zero one is above ``limit`` either way, and a
    zero factor keeps the product zero.  The multiplier shrinks to ``s`` x ``s`` bits (one
    MULT18X18D for ``s <= 18``)."""
    return capped(a, limit) * capped(b, limit)


def product_exceeds(a, b, limit: int) -> object:
    """``a * b > limit`` (both unsigned), exactly, with ``s``-bit factors (``2**s > limit +
    1``, as :func:`capped`) multiplied straight from ``a`` and ``b``: a factor with bits at
    or above ``s`` makes the product exceed the limit exactly when the other is non-zero.
    Where only the compare is needed this is :func:`capped_product` without the cap's mux in
    front of the multiplier (on the NPU's worst path on the ULX3S, docs/fpga.md)."""
    s = (limit + 1).bit_length()
    a, b = Value.cast(a), Value.cast(b)
    assert not (a.shape().signed or b.shape().signed), "product_exceeds takes unsigned factors"
    high_a = a[s:].any() if len(a) > s else 0
    high_b = b[s:].any() if len(b) > s else 0
    return ((a[:s] * b[:s]) > limit) | (high_a & (b != 0)) | (high_b & (a != 0))


def capped(x, limit: int) -> object:
    """Unsigned ``x`` capped at ``2**s - 1`` (``2**s > limit + 1``), a factor of
    :func:`capped_product` (capping it twice changes nothing)."""
    s = (limit + 1).bit_length()
    x = Value.cast(x)
    assert not x.shape().signed, "capped_product takes unsigned factors"
    return x if x.shape().width <= s else Mux(x[s:].any(), (1 << s) - 1, x[:s])


def _excess(config, v, prefix, mem, dtype, window=False, strides=None, mul=mul, weights=False):
    """An operand's last row minus its memory's depth (>= 0: past the end), at offset 0.
    ``weights``: VDWCONV's weight rows, ``k1*k0`` rows from the address for every vector."""
    if weights:
        return excess(v[f"{prefix}_addr"] + mul(v.k1, v.k0) - 1, _depth(config, mem))
    s0, s1 = strides if strides is not None else (v[f"{prefix}_stride0"], v[f"{prefix}_stride1"])
    last = (v[f"{prefix}_addr"] + mul((v.n1 - 1)[:16], s1) + mul((v.n0 - 1)[:16], s0) + _rows(mem, dtype) - 1)
    if window:
        last = last + mul((v.k1 - 1)[:8], v.w_stride1) + mul((v.k0 - 1)[:8], v.w_stride0)
    return excess(last, _depth(config, mem))


def _operand(config, v, prefix, gate, mem, dtype, **kw) -> Term:
    return Term(f"{prefix}_addr", gate, _excess(config, v, prefix, mem, dtype, **kw))


def vector_errors(config: NpuConfig, name: str, fields, mul=mul) -> tuple[object, list[Term]]:
    """(illegal, range terms) of instruction ``name`` whose field values are ``fields`` (a
    view of the instruction word); SRAM_OVERFLOW when any term fails."""
    v = _Fields(name, fields)
    kw = {"mul": mul}
    mems = [p for p in ("a", "b", "c") if f"{p}_mem" in v]
    illegal = Cat(v[f"{p}_mem"] > max(VecMem) for p in mems).any() | too_long(name, v, mul=mul)
    if name == "VRESCALE":
        illegal = illegal | ~_is_any(v.in_type, VRESCALE_IN_TYPES) | ~_is_any(v.out_type, VRESCALE_OUT_TYPES)
        touches = (v.n0 != 0) & (v.n1 != 0)
        params = Term("param_addr", 1, excess(v.param_addr + PARAM_ROWS["VRESCALE"] - 1, config.psram_rows))
        return illegal, [params, _operand(config, v, "a", touches, v.a_mem, v.in_type, **kw),
                         _operand(config, v, "d", touches, v.d_mem, v.out_type, **kw)]
    if name == "VPOOL":
        illegal = illegal | ~_is_any(v.dtype, VPOOL_TYPES)
        touches = (v.n0 != 0) & (v.n1 != 0) & (v.k0 != 0) & (v.k1 != 0)
        out_type = Mux(v.mode == 0, v.dtype, VecType.INT32)
        return illegal, [_operand(config, v, "a", touches, v.a_mem, v.dtype, window=True, **kw),
                         _operand(config, v, "d", touches, v.d_mem, out_type, **kw)]
    if name == "VDWCONV":
        touches = (v.n0 != 0) & (v.n1 != 0) & (v.k0 != 0) & (v.k1 != 0)
        params = Term("param_addr", 1, excess(v.param_addr + PARAM_ROWS["VDWCONV"] - 1, config.psram_rows))
        return illegal, [params, _operand(config, v, "a", touches, v.a_mem, VecType.INT8, window=True, **kw),
                         _operand(config, v, "b", touches, v.b_mem, VecType.INT8, weights=True, **kw),
                         _operand(config, v, "d", touches, v.d_mem, VecType.INT8, **kw)]
    if name == "VALU":
        illegal = illegal | ~_is_any(v.op, list(VALU_SIGS)) | ~_is_any(v.dtype, VALU_TYPES)
        touches = (v.n0 != 0) & (v.n1 != 0)
        a_bool = [op for op, s in VALU_SIGS.items() if s.a_type is not None]
        a_type = Mux(_is_any(v.op, a_bool), VecType.INT8, v.dtype)
        out_type = v.dtype
        for fixed in {s.out for s in VALU_SIGS.values() if s.out is not None}:
            ops = [op for op, s in VALU_SIGS.items() if s.out == fixed]
            out_type = Mux(_is_any(v.op, ops), fixed, out_type)
        uses_b = _is_any(v.op, [op for op, s in VALU_SIGS.items() if s.arity >= 2])
        uses_c = _is_any(v.op, [op for op, s in VALU_SIGS.items() if s.arity == 3])
        c_strides = (Mux(v.c_fixed, 0, v.b_stride0), Mux(v.c_fixed, 0, v.b_stride1))
        return illegal, [_operand(config, v, "a", touches, v.a_mem, a_type, **kw),
                         _operand(config, v, "b", touches & uses_b, v.b_mem, v.dtype, **kw),
                         _operand(config, v, "c", touches & uses_c, v.c_mem, v.dtype, strides=c_strides, **kw),
                         _operand(config, v, "d", touches, v.d_mem, out_type, **kw)]
    raise ValueError(f"{name} is not a vector instruction")


def too_long(name: str, v, mul=mul) -> object:
    """More than MAX_VECTOR_STEPS vector steps (isa/vector.py ``steps``, on field values):
    ``n0*n1``, times ``k0*k1`` for VPOOL and VDWCONV.  The field products go through ``mul`` (formed a
    cycle ahead in hw/precheck.py); the product of the two is compared by
    :func:`product_exceeds`, exact, with no cap in front of its multiplier."""
    n = mul(v.n0, v.n1)
    if name in WINDOWED:
        # (Capping the factors before the precheck's register instead put two more
        # multipliers in its arrival stage: 39.51 -> 36.07 MHz on the ULX3S, measured.)
        return product_exceeds(n, mul(v.k0, v.k1), MAX_VECTOR_STEPS)
    return n > MAX_VECTOR_STEPS


class _Fields:
    """Attribute and item access to the field values of instruction ``name`` held in
    ``fields`` (a view, a dict, or anything indexable by field name)."""

    def __init__(self, name: str, fields):
        self._fields = fields
        self._names = {f.name for f in BY_NAME[name].fields}

    def __contains__(self, name: str) -> bool:
        return name in self._names

    def __getitem__(self, name: str):
        return self._fields[name]

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._fields[name]
