"""Test helper: random int8 CONV2D -> RESCALE [-> CLAMP] chains, and graphs mixing them with
data-movement operators (:class:`GraphBuilder`), as tosa_ir graphs.

Builds the graphs in either TOSA form (1.0: zero points, multiplier and shift as constant
input tensors; draft: as attributes) with parameters that keep every REQUIRE of the spec
satisfied, so the reference interpreter (sim.reference) accepts them.  Not a test module.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tosa_ir import Block, Graph, Operator, Tensor


@dataclass
class ConvSpec:
    """One fused layer.  ``None`` fields are drawn at random by :func:`build_chain`."""

    oc: int
    kernel: tuple[int, int] = (3, 3)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (1, 1, 1, 1)
    input_zp: int | None = None
    weight_zp: int | None = None
    output_zp: int | None = None
    per_channel: bool = True
    scale32: bool = True
    double_round: bool = False
    clamp: tuple[int, int] | None | str = "random"
    bias_per_channel: bool = True
    extra: dict = field(default_factory=dict)


def out_size(size: int, k: int, s: int, d: int, p0: int, p1: int) -> int:
    return (size - 1 + p0 + p1 - (k - 1) * d) // s + 1


def build_chain(rng: np.random.Generator, in_shape: tuple[int, int, int, int], specs: list[ConvSpec],
                draft: bool = False, name: str = "test", prefix: str = "", output: str = "y") -> Graph:
    """A graph with input ``x`` and output ``output`` applying ``specs`` in sequence.

    Other tensor names start with ``prefix`` (to merge chains into one graph).
    Bottom/right pads are increased where needed to make the output size exact (the
    spec's idiv_check), so specs need not be computed by hand.
    """
    g = GraphBuilder(rng, draft=draft, name=name, prefix=prefix)
    cur = g.input("x", in_shape)
    for i, spec in enumerate(specs):
        cur = g.conv(cur, spec, output if i == len(specs) - 1 else None)
    return g.graph([cur])


class GraphBuilder:
    """Builds a main block operator by operator: conv layers (CONV2D -> RESCALE [-> CLAMP])
    and the data-movement operators, in the TOSA 1.0 form (shape operands as ``shape``
    constant inputs, pad_const an input) or the draft form (``draft``: attributes)."""

    def __init__(self, rng: np.random.Generator, draft: bool = False, name: str = "test", prefix: str = ""):
        self.rng, self.draft, self.name, self.prefix = rng, draft, name, prefix
        self.block = Block("main")
        self.layers = 0
        self.count = 0

    def shape(self, tensor: str) -> tuple[int, ...]:
        return self.block.tensor(tensor).shape

    def _new(self, shape, dtype="int8", data=None, name: str | None = None) -> str:
        if name is None:
            name = f"{self.prefix}t{self.count}"
            self.count += 1
        self.block.add_tensor(Tensor(name, tuple(shape), dtype, data))
        return name

    def _op(self, op: str, inputs: list[str], outputs: list[str], attrs: dict) -> None:
        where = f"{self.name}:{op.lower()}{len(self.block.operators)}"
        self.block.operators.append(Operator(op, inputs, outputs, attrs, where))

    def _shape_operand(self, values, attr: str, inputs: list[str], attrs: dict) -> None:
        if self.draft:
            attrs[attr] = [int(v) for v in values]
        else:
            inputs.append(self._new((len(values),), "shape", np.asarray(values, np.int64)))

    def input(self, name: str, shape) -> str:
        self.block.inputs.append(self._new(shape, name=name))
        return name

    def const(self, data: np.ndarray) -> str:
        return self._new(data.shape, "int8", np.asarray(data, np.int8))

    def graph(self, outputs: list[str]) -> Graph:
        self.block.outputs = list(outputs)
        version = (0, 80, 0, True) if self.draft else (1, 0, 0, False)
        return Graph.single_block(self.block, version=version, source=f"{self.name}.tosa")

    # -- data movement -----------------------------------------------------------------
    def reshape(self, x: str, shape) -> str:
        out = self._new(shape)
        inputs, attrs = [x], {}
        self._shape_operand(shape, "new_shape", inputs, attrs)
        self._op("RESHAPE", inputs, [out], attrs)
        return out

    def transpose(self, x: str, perms) -> str:
        out = self._new([self.shape(x)[p] for p in perms])
        self._op("TRANSPOSE", [x], [out], {"perms": [int(p) for p in perms]})
        return out

    def slice(self, x: str, start, size) -> str:
        out = self._new(size)
        inputs, attrs = [x], {}
        self._shape_operand(start, "start", inputs, attrs)
        self._shape_operand(size, "size", inputs, attrs)
        self._op("SLICE", inputs, [out], attrs)
        return out

    def pad(self, x: str, padding, value: int) -> str:
        """``padding``: (before, after) per axis."""
        flat = [int(v) for pair in padding for v in pair]
        out = self._new([b + d + a for d, (b, a) in zip(self.shape(x), padding)])
        inputs, attrs = [x], {}
        self._shape_operand(flat, "padding", inputs, attrs)
        if self.draft:
            attrs["pad_const"] = int(value)
        else:
            inputs.append(self._new((1,), "int8", np.array([value], np.int8)))
        self._op("PAD", inputs, [out], attrs)
        return out

    def concat(self, xs: list[str], axis: int) -> str:
        shape = list(self.shape(xs[0]))
        shape[axis] = sum(self.shape(x)[axis] for x in xs)
        out = self._new(shape)
        self._op("CONCAT", list(xs), [out], {"axis": axis})
        return out

    def identity(self, x: str) -> str:
        out = self._new(self.shape(x))
        self._op("IDENTITY", [x], [out], {})
        return out

    # -- conv layers -------------------------------------------------------------------
    def conv(self, cur: str, spec: ConvSpec, output: str | None = None) -> str:
        """CONV2D -> RESCALE [-> CLAMP] on ``cur``; returns the layer's output tensor."""
        rng, draft, name, b = self.rng, self.draft, self.name, self.block
        i = self.layers
        self.layers += 1
        n, ih, iw, ic = self.shape(cur)
        kh, kw = spec.kernel
        pad = list(spec.pad)
        for axis, size, k in ((0, ih, kh), (1, iw, kw)):
            s, d = spec.stride[axis], spec.dilation[axis]
            span = size - 1 + pad[2 * axis] + pad[2 * axis + 1] - (k - 1) * d
            pad[2 * axis + 1] += (-span) % s if span >= 0 else -span
        spec.pad = tuple(pad)
        oh = out_size(ih, kh, spec.stride[0], spec.dilation[0], spec.pad[0], spec.pad[1])
        ow = out_size(iw, kw, spec.stride[1], spec.dilation[1], spec.pad[2], spec.pad[3])
        oc = spec.oc
        izp = int(rng.integers(-128, 128)) if spec.input_zp is None else spec.input_zp
        wzp = int(rng.integers(-128, 128)) if spec.weight_zp is None else spec.weight_zp
        ozp = int(rng.integers(-128, 128)) if spec.output_zp is None else spec.output_zp
        p = f"{self.prefix}l{i}_"
        w = rng.integers(-128, 128, (oc, kh, kw, ic), dtype=np.int8)
        bias = rng.integers(-20000, 20000, (oc if spec.bias_per_channel else 1,)).astype(np.int32)
        nc = oc if spec.per_channel else 1
        # Scale so outputs spread over int8: acc ~ 5500 * sqrt(K) for uniform int8 data.
        bits = round(math.log2(5500 * math.sqrt(kh * kw * ic) / 60))
        if spec.scale32:
            mul = rng.integers(1 << 30, (1 << 31) - 1, nc).astype(np.int32)
            shift = (30 + bits + rng.integers(-1, 2, nc)).clip(2, 62).astype(np.int8)
        else:
            mul = rng.integers(1 << 14, (1 << 15) - 1, nc).astype(np.int16)
            shift = (14 + bits + rng.integers(-1, 2, nc)).clip(2, 62).astype(np.int8)
        acc = p + "acc"
        b.add_tensor(Tensor(p + "w", w.shape, "int8", w))
        b.add_tensor(Tensor(p + "b", bias.shape, "int32", bias))
        b.add_tensor(Tensor(acc, (n, oh, ow, oc), "int32"))
        conv_attrs = {"pad": list(spec.pad), "stride": list(spec.stride), "dilation": list(spec.dilation)}
        if draft:
            conv_attrs.update(input_zp=izp, weight_zp=wzp)
            conv_in = [cur, p + "w", p + "b"]
        else:
            conv_attrs.update(acc_type="INT32", local_bound=False)
            b.add_tensor(Tensor(p + "izp", (1,), "int8", np.array([izp], np.int8)))
            b.add_tensor(Tensor(p + "wzp", (1,), "int8", np.array([wzp], np.int8)))
            conv_in = [cur, p + "w", p + "b", p + "izp", p + "wzp"]
        b.operators.append(Operator("CONV2D", conv_in, [acc], conv_attrs, f"{name}:conv{i}"))
        clamp = spec.clamp
        if clamp == "random":
            clamp = None if rng.integers(0, 2) else tuple(sorted(int(v) for v in rng.integers(-128, 128, 2)))
        res = (output or p + "out") if clamp is None else p + "res"
        b.add_tensor(Tensor(res, (n, oh, ow, oc), "int8"))
        r_attrs = {"scale32": spec.scale32, "per_channel": spec.per_channel,
                   "input_unsigned": False, "output_unsigned": False}
        if draft:
            r_attrs.update(input_zp=0, output_zp=ozp, multiplier=[int(v) for v in mul],
                           shift=[int(v) for v in shift], double_round=spec.double_round)
            r_in = [acc]
        else:
            r_attrs["rounding_mode"] = "DOUBLE_ROUND" if spec.double_round else "SINGLE_ROUND"
            b.add_tensor(Tensor(p + "m", (nc,), "int32" if spec.scale32 else "int16", mul))
            b.add_tensor(Tensor(p + "s", (nc,), "int8", shift))
            b.add_tensor(Tensor(p + "rizp", (1,), "int32", np.array([0], np.int32)))
            b.add_tensor(Tensor(p + "rozp", (1,), "int8", np.array([ozp], np.int8)))
            r_in = [acc, p + "m", p + "s", p + "rizp", p + "rozp"]
        r_attrs.update(spec.extra.get("rescale", {}))
        b.operators.append(Operator("RESCALE", r_in, [res], r_attrs, f"{name}:rescale{i}"))
        cur = res
        if clamp is not None:
            out = output or p + "out"
            b.add_tensor(Tensor(out, (n, oh, ow, oc), "int8"))
            c_attrs = {"min_val": clamp[0], "max_val": clamp[1]}
            if not draft:
                c_attrs["nan_mode"] = "PROPAGATE"
            b.operators.append(Operator("CLAMP", [res], [out], c_attrs, f"{name}:clamp{i}"))
            cur = out
        return cur


def random_spec(rng: np.random.Generator, in_hw: tuple[int, int], max_channels: int) -> ConvSpec:
    """A random layer whose output is non-empty for an input of ``in_hw``."""
    while True:
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        sy, sx = (int(v) for v in rng.integers(1, 4, 2))
        dy, dx = (int(v) for v in rng.integers(1, 4, 2))
        pad = [int(v) for v in rng.integers(0, 4, 4)]
        ok = True
        for axis, (size, k, s, d) in enumerate(((in_hw[0], kh, sy, dy), (in_hw[1], kw, sx, dx))):
            span = size - 1 + pad[2 * axis] + pad[2 * axis + 1] - (k - 1) * d
            if span < 0:
                ok = False
            else:
                pad[2 * axis + 1] += (-span) % s     # make the division exact (ERROR_IF)
        if ok:
            break
    scale32 = bool(rng.integers(0, 2))
    return ConvSpec(oc=int(rng.integers(1, max_channels + 1)), kernel=(kh, kw), stride=(sy, sx),
                    dilation=(dy, dx), pad=tuple(pad), per_channel=bool(rng.integers(0, 2)),
                    scale32=scale32, double_round=scale32 and bool(rng.integers(0, 2)),
                    bias_per_channel=bool(rng.integers(0, 4)))
