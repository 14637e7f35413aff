"""Per-lane logic of the vector unit: operand lane decoding and VALU's operations.

:func:`decode_lanes` turns an operand's rows (the buffered ones and the one on the read
port) into COLS lane values: an ASRAM vector of T is bits(T)/8 rows whose concatenated bytes
hold the lanes little-endian; an ACC/PSRAM row holds int32 lanes read as their low bits(T)
bits (INT48: two rows).  :func:`valu_result` is the VALU table of isa/instructions.py, one
lane at a time, before the output type's truncation (MUL's product is formed by
:func:`lane_product`, the multiplier VALU's MUL shares with the scaling of ACT/VRESCALE).
"""
from __future__ import annotations

from amaranth import Cat, Const, Mux, Signal, signed

from isa.instructions import VecType, ValuOp, VecMem
from hw.signals import named

A_BITS = 49          # INT48 or UINT16 values, sign included
BC_BITS = 33


def _asram_bytes(buf: list, port_n, size: int, first: int, count: int) -> object:
    """Bytes ``first .. first+count-1`` of an ASRAM vector of ``size`` rows: row ``size-1``
    is on the port, the earlier ones are in the buffer (static wiring, no muxes)."""
    row_bytes = len(port_n) // 8
    parts = []
    for byte in range(first, first + count):
        row, offset = divmod(byte, row_bytes)
        source = port_n if row == size - 1 else buf[row]
        parts.append(source[8 * offset:8 * offset + 8])
    return Cat(*parts)


def decode_lanes(m, c, k: str, buf: list, port_n, word, lanes: int) -> list:
    """Lane values (signals) of operand ``k`` for the element whose last row is on the
    ports now, lane 0 repeated when the operand's broadcast flag is set.

    ``buf``: the buffered ASRAM rows (row s in ``buf[s]``; operand a's INT48 first wide row
    spans ``buf[0..3]``); ``port_n``: the ASRAM row, ``word``: the ACC or PSRAM row (the
    operand's memory's; hw/vpu.py muxes the two ports before its data registers).
    """
    asram = named(m, c[f"{k}_mem"] == VecMem.ASRAM, f"{k}_is_asram")
    dtype = c[f"{k}_dtype"]
    is_t = {t: named(m, dtype == t, f"{k}_is_{t.name.lower()}") for t in VecType}
    sizes = (1, 2, 4, 6) if k == "a" else (1, 2, 4)
    width = A_BITS if k == "a" else BC_BITS
    decoded = []
    for n in range(lanes):
        w = word.word_select(n, 32)
        raw = {size: _asram_bytes(buf, port_n, size, n * size, size) for size in sizes}
        v8 = named(m, Mux(asram, raw[1], w[:8]), f"{k}_v8_{n}")
        v16 = named(m, Mux(asram, raw[2], w[:16]), f"{k}_v16_{n}")
        value = Mux(is_t[VecType.UINT8], v8, v8.as_signed())
        value = Mux(is_t[VecType.INT16], v16.as_signed(), value)
        value = Mux(is_t[VecType.UINT16], v16, value)
        value = Mux(is_t[VecType.INT32], Mux(asram, raw[4], w).as_signed(), value)
        if 6 in raw:
            w48 = Cat(Cat(*buf[:4]).word_select(n, 32), w[:16])
            value = Mux(is_t[VecType.INT48], Mux(asram, raw[6], w48).as_signed(), value)
        decoded.append(named(m, value, f"{k}_dec{n}", signed(width)))
    return [named(m, Mux(c[f"{k}_bcast"], decoded[0], value), f"{k}_lane{n}", signed(width))
            for n, value in enumerate(decoded)]


def lane_product(m, wide, x, y, name: str, small=None, stage=None) -> tuple:
    """The lane's one multiplier (signed, 64 bits): ``x[:48] * y[:16]`` when ``wide`` (VRESCALE
    with a 16-bit multiplier: an INT48 input times a 16-bit scale), else ``x[:32] * y[:32]``
    (ACT, VRESCALE with scale32, VALU's MUL); ``x`` and ``y`` are signed.

    Why this shape.  The two products used to be two multipliers, 48 x 16 and 32 x 32, and a
    64-bit mux: three and four 18 x 18 DSP blocks (ECP5 MULT18X18D) with two adder trees in the
    fabric per lane.  Cut into 16-bit chunks (``X = x2 * 2**32 + x1 * 2**16 + x0``, ``Y = y1 *
    2**16 + y0``; the top chunk signed, the others unsigned), the two products need
    ``x0*y0, x1*y0, x2*y0`` and ``x0*y0, x1*y0, x0*y1, x1*y1``: the first two are common, and
    ``x2*y0`` (wide) and ``x1*y1`` (not wide) have the same weight 2**32, so one multiplier
    serves both.  Four 17 x 17-bit signed multiplies (one DSP block each; a chunk's sign is
    its 17th bit: 0 for an unsigned chunk, the chunk's top bit for a signed one) and one
    adder tree: three DSP blocks and a 64-bit mux fewer per lane, for two 17-bit operand muxes
    in front of the multipliers.  For ``wide``, ``y`` is the 16-bit scale: ``y0`` is then the
    signed chunk and ``y1`` is not used.

    ``stage``: applied to each partial product (``stage(value, name)``) before the adder
    tree, e.g. to register it (the vector unit: the DSP blocks' output registers, so that a
    cycle ends between the multiplies and the tree); ``p0`` is returned as multiplied.

    Returns ``(product, p0)``.  With ``small`` (VDWCONV's elements: an input minus its zero
    point times a weight, both within 17 signed bits) the first partial product ``p0`` takes
    the chunks' 17th bits as signs and is that product exactly: the window sum adds ``p0``,
    so the adder tree keeps one reader (X1), where the router of the whole 4x4 NPU on the
    ECP5 stalls (docs/fpga.md: 295 overused wires with the sum reading the adder tree, 1
    with it reading ``p0``, same seed).
    """
    x48 = Mux(wide, x[:48].as_signed(), x[:32].as_signed())     # x sign-extended either way
    y32 = Mux(wide, y[:16].as_signed(), y[:32].as_signed())
    small = Const(0, 1) if small is None else small
    x0 = named(m, Cat(x48[:16], Mux(small, x48[16], 0)).as_signed(), f"{name}_x0", signed(17))
    x1 = named(m, Cat(x48[16:32], Mux(wide, 0, x48[31])).as_signed(), f"{name}_x1", signed(17))
    y0 = named(m, Cat(y32[:16], Mux(wide, y32[15], Mux(small, y32[16], 0))).as_signed(), f"{name}_y0",
               signed(17))
    y1 = y32[16:32].as_signed()
    p0 = named(m, x0 * y0, f"{name}_p0", signed(34))
    p1 = named(m, x1 * y0, f"{name}_p1", signed(34))
    p2 = named(m, Mux(wide, x48[32:48].as_signed(), x1) * Mux(wide, y0, y1), f"{name}_p2", signed(34))
    p3 = named(m, x0 * Mux(wide, 0, y1), f"{name}_p3", signed(34))
    parts = (p0, p1, p2, p3)
    if stage is not None:
        parts = tuple(stage(p, f"{name}_q{i}") for i, p in enumerate(parts))
    q0, q1, q2, q3 = parts
    # The sum as a 52-bit low part and p2 added to its high word: the same 64-bit result
    # (mod 2**64), with no expression wider than 64 bits (Verilator evaluates those as arrays
    # of words, PERFORMANCE.md "RTL simulation speed").
    low = named(m, q0 + (q1 + q3).shift_left(16), f"{name}_low", signed(52))
    high = (low[32:].as_signed() + q2)[:32]
    return named(m, Cat(low[:32], high).as_signed(), name, signed(64)), p0


def clz32(m, value, name: str) -> object:
    """count_leading_zeros of a 32-bit pattern (32 for 0), by halving steps."""
    count, x = Const(0, 6), value
    for step in (16, 8, 4, 2, 1):
        zero = named(m, x[32 - step:] == 0, f"{name}_z{step}")
        count = count | Mux(zero, step, 0)
        x = named(m, Mux(zero, x << step, x)[:32], f"{name}_x{step}")
    return count + ~x[31]                               # all zero: 31 + 1


def valu_result(m, c, values: dict, lanes: int) -> list:
    """VALU's result per lane (signed, 36 bits; only its low bits(U) bits matter), for every
    op but MUL and the shifts, *before its last step*.  Per lane one subtractor serves SUB,
    the comparisons and MIN/MAX, one negation ABS (0 - a) and NEGATE (imm0 + imm1 - a); the
    op selects among the shared units' outputs.

    The last steps are the vector unit's later stages: NEGATE's clip to T and CLAMP's
    ``[imm0, imm1]`` are the output stage's clip and clamp (hw/vpu.py S2b, set by
    hw/vpu_config.py), so that no compare follows a subtractor in one cycle.  The shifts
    have no shifter of their own: ARITHMETIC_RIGHT_SHIFT and LOGICAL_RIGHT_SHIFT give their
    operand here (``a``; ``a``'s bits(T) bits unsigned) and S2a's rounding shift shifts it by
    ``b & 31``, adding ``1 << (k-1)`` before the shift when the round flag is set (``(a +
    2**(k-1)) >> k == (a >> k) + ((a >> (k-1)) & 1)``); LOGICAL_LEFT_SHIFT is the lane's
    multiplier's ``a * (1 << k)`` (hw/vpu.py): three 32-bit barrel shifters fewer per lane."""
    results = [Signal(signed(36), name=f"alu{n}") for n in range(lanes)]
    neg_base = named(m, Mux(c.op == ValuOp.NEGATE, c.imm0 + c.imm1, 0), "neg_base", signed(17))
    units = []
    for n in range(lanes):
        a = values["a"][n][:32].as_signed()
        b = values["b"][n][:32].as_signed()
        diff = named(m, a - b, f"diff{n}", signed(33))
        lt, eq = diff[32], named(m, diff == 0, f"eq{n}")
        nv = named(m, neg_base - a, f"neg{n}", signed(34))
        az, bz = named(m, a != 0, f"az{n}"), named(m, b != 0, f"bz{n}")
        units.append(dict(
            a=a, b=b, c=values["c"][n][:32].as_signed(), diff=diff, lt=lt, eq=eq, az=az, bz=bz, nv=nv,
            add=a + b,
        ))
    # Ops that differ only in a small function of shared values are one case each, their
    # differences decoded once from the op for all lanes: the bitwise ops are a truth table
    # of (a, b) bit pairs, MINIMUM and MAXIMUM one compare-and-pick, the 0/1 results one flag
    # (fewer inputs on every result bit's multiplexer: 11 cases instead of 21).
    op = c.op
    truth = named(m, Mux(op == ValuOp.BITWISE_AND, 0b1000, Mux(op == ValuOp.BITWISE_OR, 0b1110,
                  Mux(op == ValuOp.BITWISE_XOR, 0b0110, 0b0101))), "valu_truth", 4)     # else NOT
    pick_b = named(m, op == ValuOp.MAXIMUM, "valu_max")
    flag_op = {o: named(m, op == o, f"valu_{o.name.lower()}") for o in (
        ValuOp.EQUAL, ValuOp.GREATER, ValuOp.GREATER_EQUAL, ValuOp.LOGICAL_AND, ValuOp.LOGICAL_OR,
        ValuOp.LOGICAL_XOR, ValuOp.LOGICAL_NOT)}
    for u in units:
        a, b = u["a"], u["b"]
        # each bit truth[a_i + 2 b_i], as word-wide ANDs and ORs (the same function per bit;
        # 32 one-bit selects per lane were 3.5% of a VPU-bound program's RTL simulation)
        au, bu = a.as_unsigned(), b.as_unsigned()
        u["logic"] = ((truth[0].replicate(32) & ~au & ~bu) | (truth[1].replicate(32) & au & ~bu)
                      | (truth[2].replicate(32) & ~au & bu) | (truth[3].replicate(32) & au & bu))
        u["minmax"] = Mux(u["lt"] ^ pick_b, a, b)
        flags = {ValuOp.EQUAL: u["eq"], ValuOp.GREATER: ~u["lt"] & ~u["eq"], ValuOp.GREATER_EQUAL: ~u["lt"],
                 ValuOp.LOGICAL_AND: u["az"] & u["bz"], ValuOp.LOGICAL_OR: u["az"] | u["bz"],
                 ValuOp.LOGICAL_XOR: u["az"] ^ u["bz"], ValuOp.LOGICAL_NOT: ~u["az"]}
        u["flag"] = Cat(flag_op[o] & v for o, v in flags.items()).any()
    with m.Switch(op):
        def case(ops, fn):
            with m.Case(*ops):
                for r, u in zip(results, units):
                    m.d.comb += r.eq(fn(u))

        case([ValuOp.ADD], lambda u: u["add"])
        case([ValuOp.SUB], lambda u: u["diff"])
        case([ValuOp.LOGICAL_RIGHT_SHIFT], lambda u: (u["a"] & c.a_mask)[:32])     # shifted in S2a
        case([ValuOp.BITWISE_AND, ValuOp.BITWISE_OR, ValuOp.BITWISE_XOR, ValuOp.BITWISE_NOT],
             lambda u: u["logic"].as_signed())
        case([ValuOp.MINIMUM, ValuOp.MAXIMUM], lambda u: u["minmax"])
        case(list(flag_op), lambda u: u["flag"])
        case([ValuOp.SELECT], lambda u: Mux(u["az"], u["b"], u["c"]))
        case([ValuOp.ABS], lambda u: Mux(u["a"][31], u["nv"], u["a"]))      # -a, unclipped
        case([ValuOp.NEGATE], lambda u: u["nv"])                                 # clipped in S2b
        with m.Case(ValuOp.CLZ):
            for n, (r, u) in enumerate(zip(results, units)):
                m.d.comb += r.eq(clz32(m, u["a"], f"clz{n}"))
        with m.Default():       # COPY; CLAMP (clamped in S2b); ARITHMETIC_RIGHT_SHIFT (shifted in
            for r, u in zip(results, units):        # S2a); MUL and LOGICAL_LEFT_SHIFT: the product
                m.d.comb += r.eq(u["a"])
    return results
