"""Decoded TFLite/Circle model -> checked Python objects (tensors, quantization, operators).

Everything that refers to something else (tensor -> buffer, operator -> opcode and
tensors, subgraph inputs/outputs -> tensors) is checked here, so the lowering can index
freely.  Problems in the file raise :class:`InvalidInput` naming the file and the place;
valid files using what this frontend cannot hold raise :class:`Unsupported`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from compiler.frontends.circle.schema import ACTIVATIONS, BUILTIN_OPERATORS, TENSOR_TYPES
from tosa_ir.errors import InvalidInput, Unsupported

# TFLite tensor types that can carry data here, and their numpy dtypes.
NUMPY_TYPES = {
    "FLOAT32": "<f4", "FLOAT16": "<f2", "INT32": "<i4", "UINT8": "u1", "INT64": "<i8",
    "BOOL": "u1", "INT16": "<i2", "INT8": "i1", "FLOAT64": "<f8", "UINT32": "<u4",
    "UINT16": "<u2",
}


@dataclass
class QuantParams:
    """Affine quantization ``real = scale * (q - zero_point)``, per tensor or per channel.

    ``scale`` holds float32 values (as the file stores them), ``zero_point`` int64;
    both have length 1 (per tensor) or the size of ``axis``.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    @property
    def s(self) -> float:
        """The per-tensor scale as a Python float (float32 value, widened exactly)."""
        return float(self.scale[0])

    @property
    def zp(self) -> int:
        return int(self.zero_point[0])


@dataclass
class CTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    type: str
    quant: QuantParams | None = None
    data: np.ndarray | None = None
    is_variable: bool = False


@dataclass
class COperator:
    index: int
    op: str  # builtin operator name, or "BUILTIN_<code>" / "CUSTOM:<name>"
    version: int
    inputs: list[int]  # -1 marks an absent optional input
    outputs: list[int]
    options: dict | None
    where: str  # "subgraph 0 operator 3 (CONV_2D)", for messages


@dataclass
class CSubgraph:
    index: int
    name: str
    tensors: list[CTensor]
    inputs: list[int]
    outputs: list[int]
    operators: list[COperator] = field(default_factory=list)


@dataclass
class CModel:
    kind: str  # "tflite" or "circle"
    source: str
    version: int
    description: str
    subgraphs: list[CSubgraph]


def activation_name(code: int, where: str) -> str:
    if code not in ACTIVATIONS:
        raise InvalidInput(f"{where}: unknown fused activation {code}")
    return ACTIVATIONS[code]


class _ModelChecker:
    def __init__(self, raw: dict, source: str, kind: str, buf: bytes):
        self.raw, self.source, self.kind, self.buf = raw, source, kind, buf

    def fail(self, where: str, problem: str) -> InvalidInput:
        return InvalidInput(f"{self.source}: {where}: {problem}")

    def model(self) -> CModel:
        raw = self.raw
        subgraphs = raw["subgraphs"] or []
        if not subgraphs:
            raise self.fail("model", "has no subgraphs")
        self.buffers = raw["buffers"] or []
        self.opcodes = [self.opcode(c, i) for i, c in enumerate(raw["operator_codes"] or [])]
        return CModel(self.kind, self.source, raw["version"], raw["description"] or "",
                      [self.subgraph(s, i) for i, s in enumerate(subgraphs)])

    def opcode(self, raw: dict, index: int) -> tuple[str, int]:
        # TFLite keeps codes < 127 in the deprecated byte field and all codes in the int
        # field; the operator is the larger of the two (tflite::GetBuiltinCode).
        code = max(int(raw["deprecated_builtin_code"]), int(raw["builtin_code"]))
        if code == 32:
            return f"CUSTOM:{raw['custom_code'] or '?'}", raw["version"]
        return BUILTIN_OPERATORS.get(code, f"BUILTIN_{code}"), raw["version"]

    def subgraph(self, raw: dict, index: int) -> CSubgraph:
        where = f"subgraph {index}"
        tensors = [self.tensor(t, i, where) for i, t in enumerate(raw["tensors"] or [])]
        sg = CSubgraph(index, raw["name"] or f"subgraph{index}", tensors,
                       self.indices(raw["inputs"], len(tensors), f"{where} inputs"),
                       self.indices(raw["outputs"], len(tensors), f"{where} outputs"))
        for i, op in enumerate(raw["operators"] or []):
            sg.operators.append(self.operator(op, i, len(tensors), where))
        return sg

    def indices(self, values, count: int, where: str, optional: bool = False) -> list[int]:
        out = [int(v) for v in (values if values is not None else [])]
        for v in out:
            if not (0 <= v < count or (optional and v == -1)):
                raise self.fail(where, f"tensor index {v} out of range (subgraph has "
                                       f"{count} tensors)")
        return out

    def operator(self, raw: dict, index: int, count: int, sg_where: str) -> COperator:
        code_index = raw["opcode_index"]
        if code_index >= len(self.opcodes):
            raise self.fail(f"{sg_where} operator {index}",
                            f"opcode index {code_index} out of range "
                            f"({len(self.opcodes)} operator codes)")
        name, version = self.opcodes[code_index]
        where = f"{sg_where} operator {index} ({name})"
        utype, options = raw["builtin_options"]
        if raw["builtin_options_2"][0]:
            raise Unsupported(f"{self.source}: {where}: builtin_options_2 is not supported")
        return COperator(index, name, version,
                         self.indices(raw["inputs"], count, f"{where} inputs", optional=True),
                         self.indices(raw["outputs"], count, f"{where} outputs"),
                         options, where)

    def tensor(self, raw: dict, index: int, sg_where: str) -> CTensor:
        name = raw["name"] or f"tensor{index}"
        where = f"{sg_where} tensor {index} ({name!r})"
        code = raw["type"]
        if code not in TENSOR_TYPES:
            raise self.fail(where, f"unknown tensor type {code}")
        ttype = TENSOR_TYPES[code]
        if raw["sparsity"] is not None:
            raise Unsupported(f"{self.source}: {where}: sparse tensors are not supported")
        shape = tuple(int(d) for d in (raw["shape"] if raw["shape"] is not None else []))
        if any(d < 0 for d in shape):
            raise self.fail(where, f"negative dimension in shape {list(shape)}")
        tensor = CTensor(index, name, shape, ttype, self.quant(raw["quantization"], shape, where),
                         is_variable=bool(raw["is_variable"]))
        tensor.data = self.data(raw["buffer"], shape, ttype, where)
        return tensor

    def quant(self, raw: dict | None, shape, where: str) -> QuantParams | None:
        if raw is None or raw["scale"] is None or raw["scale"].size == 0:
            return None
        if raw["details"][0]:
            raise Unsupported(f"{self.source}: {where}: custom quantization is not supported")
        scale = np.array(raw["scale"], dtype=np.float32)
        zp = raw["zero_point"]
        zp = np.zeros(scale.size, np.int64) if zp is None or zp.size == 0 \
            else np.array(zp, dtype=np.int64)
        if zp.size != scale.size:
            raise self.fail(where, f"{scale.size} scales but {zp.size} zero points")
        axis = int(raw["quantized_dimension"])
        if scale.size > 1:
            if not 0 <= axis < len(shape) or shape[axis] != scale.size:
                raise self.fail(where, f"{scale.size} per-channel scales do not match "
                                       f"dimension {axis} of shape {list(shape)}")
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise self.fail(where, f"quantization scale must be positive and finite, got "
                                   f"{scale.tolist()[:4]}")
        return QuantParams(scale, zp, axis)

    def data(self, buffer_index: int, shape, ttype: str, where: str) -> np.ndarray | None:
        if buffer_index == 0:
            return None
        if buffer_index >= len(self.buffers):
            raise self.fail(where, f"buffer index {buffer_index} out of range "
                                   f"({len(self.buffers)} buffers)")
        buf = self.buffers[buffer_index]
        raw = buf["data"]
        if (raw is None or raw.size == 0) and buf["offset"] > 1:
            # Models over 2 GB keep buffers after the flatbuffer, by file offset.
            end = buf["offset"] + buf["size"]
            if end > len(self.buf):
                raise self.fail(where, f"buffer {buffer_index} data [{buf['offset']}, {end}) "
                                       f"lies outside the {len(self.buf)}-byte file")
            raw = np.frombuffer(self.buf, np.uint8, buf["size"], buf["offset"])
        if raw is None or raw.size == 0:
            return None
        if ttype not in NUMPY_TYPES:
            raise Unsupported(f"{self.source}: {where}: constant data of type {ttype} is not "
                              f"supported")
        dtype = np.dtype(NUMPY_TYPES[ttype])
        count = math.prod(shape)
        if raw.size != count * dtype.itemsize:
            raise self.fail(where, f"buffer {buffer_index} holds {raw.size} bytes, but shape "
                                   f"{list(shape)} of {ttype} needs {count * dtype.itemsize}")
        return np.frombuffer(raw.tobytes(), dtype).reshape(shape).astype(dtype.newbyteorder("="))


def check_model(raw: dict, source: str, kind: str, buf: bytes) -> CModel:
    """Checked :class:`CModel` from :func:`compiler.frontends.circle.fb.decode_model` output."""
    return _ModelChecker(raw, source, kind, buf).model()
