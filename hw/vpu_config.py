"""The vector unit's command registers and how each instruction sets them.

:class:`VpuConfig` holds one Signal per setting.  :func:`command_fields` gives, for an
instruction word seen through its layout, the instruction-specific settings (operand
memories, types, addresses and strides, window, arithmetic settings); :func:`derive`
computes the rest from those, the same way for every instruction (rows per vector, the
schedule numbers ``R``, ``W``, ``E*R``, ``P``, the output format, clip ranges), from
isa/vector.py's tables.  The datapath (hw/vpu.py, hw/vpu_lanes.py) thus sees one uniform
command: operands a, b, c read with (memory, type, rows, address, strides, broadcast), a
destination d, window counts, and the arithmetic settings.

Amaranth lowers every *use* of an expression separately, so values used more than once
are held in Signals (:func:`hw.signals.named`).
"""
from __future__ import annotations

from amaranth import Cat, Mux, Signal, signed
from amaranth.utils import ceil_log2

from isa.config import NpuConfig
from isa.instructions import VecType, PoolMode, ValuOp, VecMem
from isa.vector import DTYPE_BITS, MAX_ROWS, UNSIGNED, VALU_SIGS, dtype_range, vector_rows
from hw.signals import named

KIND = {"ACT": 0, "VRESCALE": 1, "VALU": 2, "VPOOL": 3}
MAX_P = 255 * 255 * MAX_ROWS        # a window of k1*k0 elements of R rows


def _any(value, options) -> object:
    return Cat(value == int(o) for o in options).any()


def _lut(key, table: dict, default=0) -> object:
    out = default
    for k, v in table.items():
        out = Mux(key == int(k), v, out)
    return out


def rows_of(mem, dtype) -> object:
    """Rows per vector of (memory, type), as hardware (isa/vector.vector_rows)."""
    asram = _lut(dtype, {t: vector_rows(VecMem.ASRAM, t) for t in VecType})
    wide = _lut(dtype, {t: vector_rows(VecMem.ACC, t) for t in VecType})
    return Mux(mem == VecMem.ASRAM, asram, wide)


class VpuConfig:
    """Command settings as Signals (registers, or comb signals of the decoded command)."""

    def __init__(self, config: NpuConfig, prefix: str = "cfg"):
        depth = max(config.asram_rows, config.acc_rows, config.psram_rows, 1 << 16)
        self.ptr_bits = ceil_log2(depth) + 2
        self.p_bits = ceil_log2(MAX_P + 1)
        shapes = {
            # per instruction (command_fields)
            "kind": 2, "per_channel": 1, "scale32": 1, "double_round": 1, "op": 5, "pool_mode": 1, "dw": 1,
            "n0": 16, "n1": 16, "k0": 8, "k1": 8, "param_addr": 12, "ws0": 16, "ws1": 16,
            "d_mem": 1, "d_dtype": 3, "d_addr": self.ptr_bits, "d_s0": 16, "d_s1": 16,
            "in_zp": signed(17), "out_zp": signed(17), "type_clip": 1, "clip_dtype": 3,
            "clamp": 1, "cmin": signed(17), "cmax": signed(17), "imm0": signed(16), "imm1": signed(16),
            # derived (derive)
            "is_act": 1, "is_rescale": 1, "is_valu": 1, "is_pool": 1, "is_mul": 1, "rounding": 1,
            "dr": 1, "touches": 1, "R": 3, "W": 3, "p_is_1": 1,
            "d_size1": 1, "d_size2": 1, "d_unsigned": 1, "tlo": signed(33), "thi": signed(33), "a_mask": 32,
        }
        for k in "abc":
            shapes.update({f"{k}_used": 1, f"{k}_mem": 2, f"{k}_rows": 3, f"{k}_addr": self.ptr_bits,
                           f"{k}_s0": 16, f"{k}_s1": 16, f"{k}_bcast": 1, f"{k}_dtype": 3})
        self.names = tuple(shapes)
        for name, shape in shapes.items():
            setattr(self, name, Signal(shape, name=f"{prefix}_{name}"))

    def __getitem__(self, name: str) -> Signal:
        return getattr(self, name)


def command_fields(name: str, v) -> dict:
    """Instruction-specific settings of instruction ``name`` whose fields are ``v``; settings
    not given are 0."""
    out = {"kind": KIND["VPOOL" if name == "VDWCONV" else name], "k0": 1, "k1": 1, "per_channel": 1, "a_used": 1}
    if name == "ACT":
        out.update(n0=v.count, n1=1, param_addr=v.param_addr, scale32=v.scale32,
                   double_round=v.double_round, out_zp=v.out_zp, clamp=1, cmin=v.clamp_min,
                   cmax=v.clamp_max, a_mem=VecMem.ACC, a_dtype=VecType.INT32, a_addr=v.acc_addr, a_s0=1,
                   d_mem=VecMem.ASRAM, d_dtype=VecType.INT8, d_addr=v.dst_addr, d_s0=1)
        return out
    out.update(n0=v.n0, n1=v.n1, a_mem=v.a_mem, a_addr=v.a_addr, a_s0=v.a_stride0, a_s1=v.a_stride1,
               d_mem=v.d_mem, d_addr=v.d_addr, d_s0=v.d_stride0, d_s1=v.d_stride1)
    if name == "VRESCALE":
        out.update(a_dtype=v.in_type, d_dtype=v.out_type, param_addr=v.param_addr,
                   per_channel=v.per_channel, scale32=v.scale32, double_round=v.double_round,
                   in_zp=v.in_zp, out_zp=v.out_zp, type_clip=1, clip_dtype=v.out_type,
                   clamp=v.clamp, cmin=v.clamp_min, cmax=v.clamp_max)
    elif name == "VPOOL":
        out.update(a_dtype=v.dtype, d_dtype=Mux(v.mode == PoolMode.MAX, v.dtype, VecType.INT32),
                   pool_mode=v.mode, in_zp=v.in_zp, k0=v.k0, k1=v.k1, ws0=v.w_stride0, ws1=v.w_stride1)
    elif name == "VDWCONV":
        # A VPOOL SUM whose elements are weighted by operand b's lanes (the weight rows:
        # row b_addr + element, the same for every vector), starting at ACT's bias and
        # ending with ACT's scaling (hw/vpu.py S1): ``dw`` marks it.
        out.update(dw=1, pool_mode=PoolMode.SUM, a_dtype=VecType.INT8, d_dtype=VecType.INT8,
                   in_zp=v.in_zp, k0=v.k0, k1=v.k1, ws0=v.w_stride0, ws1=v.w_stride1,
                   b_used=1, b_mem=v.b_mem, b_dtype=VecType.INT8, b_addr=v.b_addr,
                   param_addr=v.param_addr, scale32=v.scale32, double_round=v.double_round,
                   out_zp=v.out_zp, clamp=1, cmin=v.clamp_min, cmax=v.clamp_max)
    elif name == "VALU":
        sigs = VALU_SIGS
        a_dtype = Mux(_any(v.op, [op for op, s in sigs.items() if s.a_type is not None]), VecType.INT8, v.dtype)
        d_dtype = v.dtype
        for fixed in {s.out for s in sigs.values() if s.out is not None}:
            d_dtype = Mux(_any(v.op, [op for op, s in sigs.items() if s.out == fixed]), fixed, d_dtype)
        out.update(op=v.op, imm0=v.imm0, imm1=v.imm1, a_dtype=a_dtype, d_dtype=d_dtype, a_bcast=v.a_bcast,
                   # NEGATE's clip to T and CLAMP's [imm0, imm1] are the output stage's clip
                   # and clamp (hw/vpu.py S2b), which are off for every other VALU op
                   type_clip=v.op == ValuOp.NEGATE, clip_dtype=v.dtype,
                   clamp=v.op == ValuOp.CLAMP, cmin=v.imm0, cmax=v.imm1,
                   b_used=_any(v.op, [op for op, s in sigs.items() if s.arity >= 2]),
                   b_mem=v.b_mem, b_dtype=v.dtype, b_addr=v.b_addr, b_s0=v.b_stride0, b_s1=v.b_stride1,
                   b_bcast=v.b_bcast,
                   c_used=_any(v.op, [op for op, s in sigs.items() if s.arity == 3]),
                   c_mem=v.c_mem, c_dtype=v.dtype, c_addr=v.c_addr,
                   c_s0=Mux(v.c_fixed, 0, v.b_stride0), c_s1=Mux(v.c_fixed, 0, v.b_stride1), c_bcast=v.c_bcast)
    else:
        raise ValueError(name)
    return out


def derive(m, c: VpuConfig) -> None:
    """Assign ``c``'s derived settings from its instruction-specific ones (comb)."""
    m.d.comb += [
        c.is_act.eq(c.kind == KIND["ACT"]), c.is_rescale.eq(c.kind == KIND["VRESCALE"]),
        c.is_valu.eq(c.kind == KIND["VALU"]), c.is_pool.eq(c.kind == KIND["VPOOL"]),
        c.is_mul.eq((c.kind == KIND["VALU"]) & (c.op == ValuOp.MUL)),
        c.touches.eq((c.n0 != 0) & (c.n1 != 0) & (c.k0 != 0) & (c.k1 != 0)),
    ]
    m.d.comb += [
        c.rounding.eq(c.is_act | c.is_rescale | c.is_mul | c.dw),
        c.dr.eq(c.double_round & c.scale32 & (c.is_act | c.is_rescale | c.dw)),
    ]
    for k in "abc":
        m.d.comb += c[f"{k}_rows"].eq(Mux(c[f"{k}_used"], rows_of(c[f"{k}_mem"], c[f"{k}_dtype"]), 0))
    r_ab = named(m, Mux(c.b_rows > c.a_rows, c.b_rows, c.a_rows), "cfg_r_ab")
    m.d.comb += c.R.eq(Mux(c.c_rows > r_ab, c.c_rows, r_ab))
    m.d.comb += c.W.eq(rows_of(c.d_mem, c.d_dtype))
    # The slot length P = max(E*R, W) (E = k0*k1; VDWCONV: E*R + 2, isa/vector.py EXTRA_LATENCY) is formed by the unit a
    # cycle after the command (hw/vpu.py): only whether it is 1 is decoded with the command.
    m.d.comb += c.p_is_1.eq((c.k0 == 1) & (c.k1 == 1) & (c.R == 1) & (c.W <= 1) & ~c.dw)
    size = named(m, _lut(c.d_dtype, {t: DTYPE_BITS[t] // 8 for t in VecType}), "cfg_d_size", 3)
    m.d.comb += [
        c.d_size1.eq(size == 1), c.d_size2.eq(size == 2), c.d_unsigned.eq(_any(c.d_dtype, UNSIGNED)),
        c.tlo.eq(_lut(c.clip_dtype, {t: dtype_range(t)[0] for t in VecType})),
        c.thi.eq(_lut(c.clip_dtype, {t: dtype_range(t)[1] for t in VecType})),
        c.a_mask.eq(_lut(c.a_dtype, {t: (1 << DTYPE_BITS[t]) - 1 for t in (VecType.INT8, VecType.INT16)}, 0xFFFFFFFF)),
    ]
