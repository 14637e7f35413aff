"""Lowering of one checked TFLite/Circle subgraph to an integer TOSA 1.0 block.

Values.  Every TFLite tensor the graph computes becomes a TOSA tensor of type int8, int16
or int32 plus its quantization (:class:`Val`).  uint8 tensors are carried as int8 with
codes and zero point moved down by 128: every integer kernel works on ``q - zero_point``,
so the results are the same codes moved by 128, and TOSA's integer operators take int8.

Graph edges (the TOSA graph is integer-only):

* a float32 graph input may only feed QUANTIZE operators; they are removed and their
  quantized outputs become the TOSA graph inputs (callers quantize the data);
* a float32 graph output must come from a DEQUANTIZE, which is removed: the TOSA graph
  returns its quantized input;
* uint8 graph inputs/outputs stay uint8 data carried in int8 tensors as bit patterns
  (TOSA 1.0 has no uint8 tensors): a RESCALE with ``input_unsigned`` /
  ``output_unsigned`` converts them (pass ``uint8_array.view(np.int8)`` and read
  outputs back with ``.view(np.uint8)``).

Operator handlers live in :mod:`compiler.frontends.circle.ops_nn` and
:mod:`compiler.frontends.circle.ops_misc`; each takes ``(lowerer, operator)`` and
defines the operator's outputs with :meth:`Lowerer.define`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.frontends.common.tosa_builder import IDENTITY_SCALE, TosaBuilder
from compiler.frontends.circle.model import COperator, CSubgraph, CTensor, QuantParams
from compiler.frontends.circle.quant import QRANGE, tosa_shift
from tosa_ir import Block
from tosa_ir.errors import InvalidInput, Unsupported

# TFLite activation type -> TOSA tensor type.
ACT_TYPES = {"INT8": "int8", "UINT8": "int8", "INT16": "int16"}


@dataclass
class Val:
    """A lowered tensor: TOSA name and type, quantization, zero point in the TOSA domain."""

    name: str
    dtype: str  # int8 / int16 / int32
    quant: QuantParams | None
    ttype: str  # TFLite type: INT8 / UINT8 / INT16 / INT32

    @property
    def zp(self) -> int:
        """Zero point of the TOSA codes (uint8 ones moved down by 128)."""
        if self.quant is None:
            return 0
        return self.quant.zp - (128 if self.ttype == "UINT8" else 0)

    @property
    def scale(self) -> float:
        return self.quant.s

    @property
    def range(self) -> tuple[int, int]:
        return QRANGE[self.dtype]


class Lowerer:
    """State of one subgraph's lowering."""

    def __init__(self, sg: CSubgraph, source: str):
        self.sg = sg
        self.source = source
        self.b = TosaBuilder(sg.name or "main")
        self.vals: dict[int, Val] = {}
        self.op: COperator | None = None

    # -- messages -----------------------------------------------------------------------
    def where(self) -> str:
        return f"{self.source}: {self.op.where}" if self.op else self.source

    def unsupported(self, what: str) -> Unsupported:
        return Unsupported(f"{self.where()}: {what}")

    def invalid(self, what: str) -> InvalidInput:
        return InvalidInput(f"{self.where()}: {what}")

    # -- tensors ------------------------------------------------------------------------
    def t(self, index: int) -> CTensor:
        return self.sg.tensors[index]

    def input(self, position: int, optional: bool = False) -> int | None:
        """Tensor index of operator input ``position`` (None if absent and optional)."""
        ins = self.op.inputs
        if position >= len(ins) or ins[position] < 0:
            if optional:
                return None
            raise self.invalid(f"missing input {position}")
        return ins[position]

    def out(self, position: int = 0) -> CTensor:
        if position >= len(self.op.outputs):
            raise self.invalid(f"missing output {position}")
        return self.t(self.op.outputs[position])

    def const(self, index: int, what: str) -> np.ndarray:
        tensor = self.t(index)
        if tensor.data is None:
            raise self.unsupported(f"{what} ({tensor.name!r}) must be a constant tensor")
        return tensor.data

    def quant(self, tensor: CTensor) -> QuantParams:
        if tensor.quant is None:
            raise self.unsupported(f"tensor {tensor.name!r} ({tensor.type}) is not quantized: "
                                   f"only quantized integer models are supported")
        return tensor.quant

    def value(self, index: int) -> Val:
        """The lowered value of tensor ``index`` (constants become TOSA constants)."""
        if index in self.vals:
            return self.vals[index]
        tensor = self.t(index)
        if tensor.data is None:
            raise self.invalid(f"tensor {tensor.name!r} is used before it is computed")
        dtype = ACT_TYPES.get(tensor.type)
        if dtype is None:
            raise self.unsupported(f"constant {tensor.name!r} of type {tensor.type} cannot be "
                                   f"an operand here")
        data = tensor.data.astype(np.int64) - (128 if tensor.type == "UINT8" else 0)
        name = self.b.tensor(tensor.name, tensor.shape, dtype, data)
        val = Val(name, dtype, tensor.quant, tensor.type)
        self.vals[index] = val
        return val

    def activation(self, position: int) -> Val:
        """Operator input ``position`` as a quantized 8/16-bit value."""
        val = self.value(self.input(position))
        if val.ttype not in ACT_TYPES:
            raise self.unsupported(f"input {position} has type {val.ttype}; only int8, uint8 "
                                   f"and int16 quantized tensors are supported")
        self.quant(self.t(self.input(position)))
        return val

    def out_type(self, position: int = 0) -> tuple[CTensor, str]:
        tensor = self.out(position)
        dtype = ACT_TYPES.get(tensor.type)
        if dtype is None:
            raise self.unsupported(f"output type {tensor.type} is not supported")
        self.quant(tensor)
        return tensor, dtype

    def define(self, position: int, name: str) -> Val:
        """Record TOSA tensor ``name`` as operator output ``position`` (renamed after the
        TFLite tensor when that name is free)."""
        tensor = self.out(position)
        if tuple(self.b.shape(name)) != tuple(tensor.shape):
            name = self.b.reshape(name, tensor.shape)
        name = self.rename(name, tensor.name)
        dtype = self.b.dtype(name)
        val = Val(name, dtype, tensor.quant, tensor.type)
        self.vals[tensor.index] = val
        return val

    def rename(self, name: str, new: str) -> str:
        """Give the result ``name`` of the last operators the TFLite name ``new``."""
        block = self.b.block
        tensor = block.tensors[name]
        if tensor.is_const or new in block.tensors or any(name in op.inputs
                                                           for op in block.operators):
            return name
        producer = [op for op in block.operators if name in op.outputs]
        if len(producer) != 1:
            return name
        del block.tensors[name]
        tensor.name = new
        block.tensors[new] = tensor
        producer[0].outputs = [new if o == name else o for o in producer[0].outputs]
        return new

    # -- common steps -------------------------------------------------------------------
    def requantize(self, x: str, out_dtype: str, multiplier, shift, in_zp: int, out_zp: int,
                   per_channel: bool = False) -> str:
        """TFLite ``MultiplyByQuantizedMultiplier(x - in_zp, M, s) + out_zp``, saturated."""
        shifts = [tosa_shift(int(s), self.where()) for s in np.atleast_1d(shift)]
        return self.b.rescale(x, out_dtype, multiplier, shifts, in_zp, out_zp,
                              per_channel=per_channel)

    def clamp_activation(self, x: str, lo: int, hi: int) -> str:
        """CLAMP to [lo, hi] unless that is the whole range of the type."""
        tlo, thi = QRANGE[self.b.dtype(x)]
        if lo <= tlo and hi >= thi:
            return x
        return self.b.clamp(x, max(lo, tlo), min(hi, thi))

    def shifted(self, tensor: CTensor, lo: int, hi: int) -> tuple[int, int]:
        """A clamp range of ``tensor``'s codes in the TOSA domain (uint8 moved by 128)."""
        d = 128 if tensor.type == "UINT8" else 0
        return lo - d, hi - d


# ---------------------------------------------------------------------------------------
def lower_subgraph(sg: CSubgraph, source: str, handlers: dict) -> Block:
    """Lower ``sg`` with the operator ``handlers`` (name -> function(lowerer, op))."""
    lw = Lowerer(sg, source)
    b = lw.b
    consumers: dict[int, list[COperator]] = {}
    producers: dict[int, COperator] = {}
    for op in sg.operators:
        for i in op.inputs:
            if i >= 0:
                consumers.setdefault(i, []).append(op)
        for o in op.outputs:
            if o in producers:
                raise InvalidInput(f"{source}: {op.where}: tensor {o} is written twice")
            producers[o] = op
    skip: set[int] = set()

    # Graph inputs.
    for index in sg.inputs:
        tensor = sg.tensors[index]
        if tensor.data is not None:
            raise InvalidInput(f"{source}: subgraph {sg.index}: graph input {tensor.name!r} "
                               f"is a constant")
        if tensor.type == "FLOAT32":
            users = consumers.get(index, [])
            if not users or any(op.op != "QUANTIZE" for op in users):
                raise Unsupported(f"{source}: subgraph {sg.index}: float input {tensor.name!r} "
                                  f"must feed only QUANTIZE operators (float models are not "
                                  f"supported)")
            for op in users:  # the quantized tensor becomes the graph input
                skip.add(op.index)
                lw.op = op
                qt, dtype = lw.out_type(0)
                _graph_input(lw, qt, dtype)
            lw.op = None
        elif tensor.type in ACT_TYPES:
            lw.quant(tensor)
            _graph_input(lw, tensor, ACT_TYPES[tensor.type])
        else:
            raise Unsupported(f"{source}: subgraph {sg.index}: graph input {tensor.name!r} has "
                              f"unsupported type {tensor.type}")

    # Float outputs made by DEQUANTIZE: the DEQUANTIZE is dropped.
    outputs = []
    for index in sg.outputs:
        tensor = sg.tensors[index]
        if tensor.type == "FLOAT32":
            op = producers.get(index)
            if op is None or op.op != "DEQUANTIZE":
                raise Unsupported(f"{source}: subgraph {sg.index}: float output {tensor.name!r} "
                                  f"must come from a DEQUANTIZE (float models are not "
                                  f"supported)")
            skip.add(op.index)
            outputs.append(op.inputs[0])
        else:
            outputs.append(index)

    for op in sg.operators:
        if op.index in skip:
            continue
        lw.op = op
        b.location = f"{source}:{op.where}"
        handler = handlers.get(op.op)
        if handler is None:
            raise lw.unsupported(f"operator {op.op} (version {op.version}) is not supported")
        handler(lw, op)
        for o in op.outputs:
            if o not in lw.vals:
                raise lw.unsupported(f"output {sg.tensors[o].name!r} was not produced")
    lw.op = None
    b.location = f"{source}:subgraph {sg.index} outputs"

    for index in outputs:
        tensor = sg.tensors[index]
        if index not in lw.vals:
            raise InvalidInput(f"{source}: subgraph {sg.index}: graph output {tensor.name!r} "
                               f"is never computed")
        val = lw.vals[index]
        if val.ttype not in ACT_TYPES:
            raise Unsupported(f"{source}: subgraph {sg.index}: graph output {tensor.name!r} "
                              f"has unsupported type {val.ttype}")
        name = val.name
        if val.ttype == "UINT8":  # back to uint8 bit patterns, under the TFLite name
            if name == tensor.name and name not in b.block.inputs:
                internal = b.unique(f"{name}_s8")
                b.rename_everywhere(name, internal)
                for other in lw.vals.values():
                    if other.name == name:
                        other.name = internal
                name = internal
            name = b.rescale(name, "int8", *IDENTITY_SCALE, in_zp=val.zp, out_zp=val.quant.zp,
                             double_round=False, output_unsigned=True, hint=tensor.name)
        elif name in b.block.inputs or name in b.block.outputs or b.block.tensors[name].is_const:
            # A graph output must be its own tensor: copy.
            name = b.emit("IDENTITY", [name], b.shape(name), b.dtype(name), tensor.name)
        b.block.outputs.append(name)
    return b.block


def _graph_input(lw: Lowerer, tensor: CTensor, dtype: str) -> None:
    b = lw.b
    name = b.tensor(tensor.name, tensor.shape, dtype, exact_name=True)
    b.block.inputs.append(name)
    if tensor.type == "UINT8":
        zp = tensor.quant.zp
        b.location = f"{lw.source}:graph input {tensor.name}"
        name = b.rescale(name, "int8", *IDENTITY_SCALE, in_zp=zp, out_zp=zp - 128,
                         double_round=False, input_unsigned=True, hint=f"{tensor.name}_s8")
    lw.vals[tensor.index] = Val(name, dtype, tensor.quant, tensor.type)
