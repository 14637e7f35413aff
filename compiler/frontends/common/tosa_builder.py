"""A small TOSA 1.0 graph builder (the Circle frontend's lowering, the shared int8 softmax): unique tensor names, constants,
and the composite integer steps the lowering uses over and over (exact RESCALEs, clamps,
saturating shifts).

Every operator it emits is TOSA 1.0 form: zero points, RESCALE multipliers/shifts, MUL
shifts, TABLE contents, PAD paddings and RESHAPE shapes are constant input tensors.
"""
from __future__ import annotations

import re

import numpy as np

from compiler.frontends.common.registry import rename_tensor
from tosa_ir import Block, Operator, Tensor, numpy_dtype

# RESCALE multiplier/shift that multiply by exactly 1: (v * 2**30 + 2**29) >> 30 == v for
# |v| < 2**29 (the REQUIRE on apply_scale_32's input).
IDENTITY_SCALE = (1 << 30, 30)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(max(x, y) for x, y in zip(a, b))


class TosaBuilder:
    """Builds one TOSA block.  ``location`` is stamped on every operator emitted."""

    def __init__(self, name: str = "main"):
        self.block = Block(name)
        self.location = ""
        self._consts: dict = {}
        # Names taken outside the block (a lowering that adds the block's tensors later).
        self.reserved: set[str] = set()

    # -- tensors ------------------------------------------------------------------------
    def unique(self, hint: str) -> str:
        """An unused tensor name made from ``hint``."""
        base = re.sub(r"[^A-Za-z0-9_.:/-]", "_", hint) or "t"
        name, n = base, 1
        while name in self.block.tensors or name in self.reserved:
            n += 1
            name = f"{base}_{n}"
        return name

    def tensor(self, hint: str, shape, dtype: str, data=None, exact_name: bool = False) -> str:
        name = hint if exact_name and hint not in self.block.tensors else self.unique(hint)
        if data is not None:
            data = np.asarray(data).astype(numpy_dtype(dtype)).reshape(shape)
        self.block.add_tensor(Tensor(name, tuple(shape), dtype, data))
        return name

    def rename_everywhere(self, old: str, new: str) -> None:
        """Rename tensor ``old`` to the unused name ``new`` in the whole block."""
        rename_tensor(self.block, old, new)
        self._consts = {k: (new if v == old else v) for k, v in self._consts.items()}

    def const(self, hint: str, values, dtype: str, shape=None) -> str:
        """A constant tensor (deduplicated when small)."""
        arr = np.asarray(values)
        shape = tuple(arr.shape if shape is None else shape)
        key = None
        if arr.size <= 16:
            key = (dtype, shape, tuple(np.asarray(values).reshape(-1).tolist()))
            if key in self._consts:
                return self._consts[key]
        name = self.tensor(hint, shape, dtype, arr)
        if key is not None:
            self._consts[key] = name
        return name

    def scalar(self, value: int, dtype: str) -> str:
        """A [1]-shaped constant (zero points, MUL shifts)."""
        return self.const(f"c_{dtype}_{value}".replace("-", "m"), [value], dtype)

    def shape_const(self, values) -> str:
        values = [int(v) for v in values]
        return self.const("shape", values, "shape", (len(values),))

    def shape(self, name: str) -> tuple[int, ...]:
        return self.block.tensors[name].shape

    def dtype(self, name: str) -> str:
        return self.block.tensors[name].dtype

    # -- operators ----------------------------------------------------------------------
    def emit(self, op: str, inputs: list[str], shape, dtype: str, hint: str = "", **attrs) -> str:
        out = self.tensor(hint or op.lower(), shape, dtype)
        self.block.operators.append(Operator(op, list(inputs), [out], attrs, self.location))
        return out

    def rescale(self, x: str, out_dtype: str, multiplier, shift, in_zp: int = 0,
                out_zp: int = 0, *, double_round: bool = True, per_channel: bool = False,
                input_unsigned: bool = False, output_unsigned: bool = False,
                hint: str = "") -> str:
        """RESCALE ``x`` (zero points are values of the signless data types; an unsigned
        zero point is given as its unsigned value)."""
        in_dtype = self.dtype(x)
        mult = np.atleast_1d(np.asarray(multiplier, dtype=np.int64))
        shifts = np.atleast_1d(np.asarray(shift, dtype=np.int64))

        def zp_bits(value, dtype, unsigned):
            if unsigned:  # stored as the bit pattern of the signless type
                bits = 8 if dtype == "int8" else 16
                value = int(value) - (1 << bits) if int(value) >= 1 << (bits - 1) else int(value)
            return self.scalar(int(value), dtype)

        inputs = [x, self.const("multiplier", mult, "int32"), self.const("shift", shifts, "int8"),
                  zp_bits(in_zp, in_dtype, input_unsigned),
                  zp_bits(out_zp, out_dtype, output_unsigned)]
        rounding = "DOUBLE_ROUND" if double_round else "SINGLE_ROUND"
        return self.emit("RESCALE", inputs, self.shape(x), out_dtype, hint or "rescale",
                         scale32=True, rounding_mode=rounding, per_channel=per_channel,
                         input_unsigned=input_unsigned, output_unsigned=output_unsigned)

    def to_int32(self, x: str, zp: int = 0) -> str:
        """``x - zp`` as int32 (exact)."""
        return self.rescale(x, "int32", *IDENTITY_SCALE, in_zp=zp, double_round=False,
                            hint=f"{x}_i32")

    def clamp(self, x: str, lo: int, hi: int) -> str:
        return self.emit("CLAMP", [x], self.shape(x), self.dtype(x), "clamp",
                         min_val=int(lo), max_val=int(hi), nan_mode="PROPAGATE")

    def reshape(self, x: str, shape, hint: str = "") -> str:
        shape = tuple(int(d) for d in shape)
        if shape == self.shape(x):
            return x
        return self.emit("RESHAPE", [x, self.shape_const(shape)], shape, self.dtype(x),
                         hint or "reshape")

    def binary(self, op: str, a: str, b: str, dtype: str | None = None, hint: str = "",
               **attrs) -> str:
        """Elementwise binary op; ranks must already agree."""
        shape = _broadcast(self.shape(a), self.shape(b))
        return self.emit(op, [a, b], shape, dtype or self.dtype(a), hint or op.lower(), **attrs)

    def mul(self, a: str, b: str, shift: int = 0) -> str:
        shape = _broadcast(self.shape(a), self.shape(b))
        return self.emit("MUL", [a, b, self.scalar(shift, "int8")], shape, "int32", "mul")

    def i32(self, value: int, rank: int) -> str:
        """An int32 constant broadcastable to rank ``rank``."""
        return self.const("k", np.full((1,) * rank, value), "int32")

    def sat_left_shift(self, x: str, exponent: int) -> str:
        """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for exponent > 0 (int32)."""
        rank = len(self.shape(x))
        threshold = (1 << (31 - exponent)) - 1
        shifted = self.binary("LOGICAL_LEFT_SHIFT", x, self.i32(exponent, rank))
        too_big = self.binary("GREATER", x, self.i32(threshold, rank), "bool")
        too_small = self.binary("GREATER", self.i32(-threshold, rank), x, "bool")
        out = self.emit("SELECT", [too_big, self.i32((1 << 31) - 1, rank), shifted],
                        self.shape(x), "int32", "select")
        return self.emit("SELECT", [too_small, self.i32(-(1 << 31), rank), out],
                         self.shape(x), "int32", "select")
