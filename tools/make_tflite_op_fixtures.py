#!/usr/bin/env python3
"""Build single-operator .tflite fixtures (tests/fixtures/tflite/ops/) without TensorFlow.

The flatbuffers are written directly from the Circle frontend's schema tables
(compiler/frontends/circle/schema.py) by :func:`write_tflite`, so operators and operator
versions that TensorFlow's converter would need a whole model for (MAXIMUM version 2 with
broadcasting and a constant operand, MINIMUM) are one small file each.  The expected outputs
come from TFLite's reference kernels (ai-edge-litert, ``OpResolverType.BUILTIN_REF``): per
model ``<name>.tflite`` and ``<name>.npz`` with ``input_i`` (seeded int8 codes, leading axis
= sample) and ``ref_i`` (the reference kernels' outputs).

Usage (ai-edge-litert is a fixture-building extra: ``pip install ai-edge-litert``)::

    python tools/make_tflite_op_fixtures.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import flatbuffers
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "tflite" / "ops"
SAMPLES = 3

_PREPEND = {"bool": "PrependBoolSlot", "byte": "PrependInt8Slot", "ubyte": "PrependUint8Slot",
            "short": "PrependInt16Slot", "ushort": "PrependUint16Slot", "int": "PrependInt32Slot",
            "uint": "PrependUint32Slot", "long": "PrependInt64Slot", "ulong": "PrependUint64Slot",
            "float": "PrependFloat32Slot", "double": "PrependFloat64Slot"}
_NUMPY = {"int": "<i4", "long": "<i8", "float": "<f4", "ubyte": "u1", "bool": "u1", "byte": "i1",
          "uint": "<u4"}
TYPE_CODES = {"int8": 9, "int16": 7, "int32": 2, "uint8": 3}


def _build(builder: flatbuffers.Builder, table: str, values: dict) -> int:
    from compiler.frontends.circle.schema import BUILTIN_OPTIONS, SCALARS, TABLES

    fields = TABLES[table]
    offsets: dict[str, int] = {}
    for f in fields:                       # children first (flatbuffers cannot nest)
        value = values.get(f.name)
        if value is None or f.type in SCALARS:
            continue
        if f.type.startswith("union:"):
            utype, sub = value
            if utype:
                offsets[f.name] = _build(builder, BUILTIN_OPTIONS[utype], sub or {})
        elif f.type == "string":
            offsets[f.name] = builder.CreateString(value)
        elif f.type.startswith("["):
            elem = f.type[1:-1]
            if isinstance(value, bytes):
                builder.StartVector(1, len(value), 16)      # buffer data, 16-byte aligned
                builder.head -= len(value)
                builder.Bytes[builder.head:builder.head + len(value)] = value
                offsets[f.name] = builder.EndVector()
            elif elem in _NUMPY:
                offsets[f.name] = builder.CreateNumpyVector(np.asarray(value, _NUMPY[elem]).reshape(-1))
            else:
                items = [_build(builder, elem, v) for v in value]
                builder.StartVector(4, len(items), 4)
                for off in reversed(items):
                    builder.PrependUOffsetTRelative(off)
                offsets[f.name] = builder.EndVector()
        else:
            offsets[f.name] = _build(builder, f.type, value)
    last = fields[-1]
    builder.StartObject(last.slot + (2 if last.type.startswith("union:") else 1))
    for f in fields:
        value = values.get(f.name)
        if value is None:
            continue
        if f.type in SCALARS:
            getattr(builder, _PREPEND[f.type])(f.slot, value, f.default)
        elif f.type.startswith("union:"):
            if value[0]:
                builder.PrependUint8Slot(f.slot, value[0], 0)
                builder.PrependUOffsetTRelativeSlot(f.slot + 1, offsets[f.name], 0)
        else:
            builder.PrependUOffsetTRelativeSlot(f.slot, offsets[f.name], 0)
    return builder.EndObject()


def write_tflite(model: dict) -> bytes:
    """A .tflite file (identifier TFL3) from a dict in the schema tables' field names."""
    builder = flatbuffers.Builder(1024)
    root = _build(builder, "Model", model)
    builder.Finish(root, file_identifier=b"TFL3")
    return bytes(builder.Output())


class ModelBuilder:
    """One subgraph: quantized tensors, constant buffers, operators (builtin code, version)."""

    def __init__(self):
        self.tensors, self.buffers, self.ops, self.codes = [], [{}], [], []
        self.inputs, self.outputs = [], []

    def tensor(self, name, shape, dtype, scale=None, zp=0, data=None) -> int:
        """``scale`` None: not quantized (shape operands); a list: per channel (axis 0)."""
        buffer = 0
        if data is not None:
            self.buffers.append({"data": np.asarray(data, dtype).tobytes()})
            buffer = len(self.buffers) - 1
        t = {"shape": list(shape), "type": TYPE_CODES[dtype], "buffer": buffer, "name": name}
        if scale is not None:
            scales = list(np.atleast_1d(scale).astype(float))
            zps = list(np.broadcast_to(np.atleast_1d(zp), (len(scales),)).astype(int))
            t["quantization"] = {"scale": scales, "zero_point": zps, "quantized_dimension": 0}
        self.tensors.append(t)
        return len(self.tensors) - 1

    def op(self, code: int, version: int, inputs, outputs, options=(0, None)) -> None:
        key = (code, version)
        if key not in self.codes:
            self.codes.append(key)
        self.ops.append({"opcode_index": self.codes.index(key), "inputs": list(inputs),
                         "outputs": list(outputs), "builtin_options": options})

    def model(self) -> dict:
        return {"version": 3,
                "operator_codes": [{"deprecated_builtin_code": min(c, 127), "builtin_code": c, "version": v}
                                   for c, v in self.codes],
                "subgraphs": [{"tensors": self.tensors, "inputs": self.inputs, "outputs": self.outputs,
                               "operators": self.ops, "name": "main"}],
                "description": "tools/make_tflite_op_fixtures.py", "buffers": self.buffers}


def maximum_minimum(rng) -> bytes:
    """MAXIMUM (version 2, int8) of two inputs with broadcasting, MINIMUM (version 2) of the
    result and a per-channel constant: one quantization everywhere, as the converter gives."""
    m = ModelBuilder()
    s, z = 0.04, -5
    a = m.tensor("a", (1, 4, 5, 24), "int8", s, z)
    b = m.tensor("b", (1, 1, 5, 24), "int8", s, z)
    k = m.tensor("k", (24,), "int8", s, z, rng.integers(-60, 60, 24))
    mx = m.tensor("max", (1, 4, 5, 24), "int8", s, z)
    mn = m.tensor("min", (1, 4, 5, 24), "int8", s, z)
    m.op(55, 2, [a, b], [mx])
    m.op(57, 2, [mx, k], [mn])
    m.inputs, m.outputs = [a, b], [mx, mn]
    return write_tflite(m.model())


def transpose_conv(rng) -> bytes:
    """TRANSPOSE_CONV version 3 (bias input), int8 with per-channel weights: SAME padding,
    stride 2 (output 10x8), and VALID, stride (2, 3) with a fused RELU (version 4)."""
    m = ModelBuilder()
    s_in, z_in = 0.05, 7
    x = m.tensor("x", (1, 5, 4, 3), "int8", s_in, z_in)
    m.inputs = [x]
    for i, (pad, st, act, version, oh, ow) in enumerate(((0, (2, 2), 0, 3, 10, 8), (1, (2, 3), 1, 4, 11, 12))):
        ws = rng.uniform(0.002, 0.01, 6)
        w = m.tensor(f"w{i}", (6, 3, 3, 3), "int8", list(ws), 0, rng.integers(-127, 128, (6, 3, 3, 3)))
        b = m.tensor(f"b{i}", (6,), "int32", list(ws * s_in), 0, rng.integers(-3000, 3000, 6))
        shape = m.tensor(f"shape{i}", (4,), "int32", None, 0, [1, oh, ow, 6])
        y = m.tensor(f"y{i}", (1, oh, ow, 6), "int8", 0.03, -4)
        m.op(67, version, [shape, w, x, b], [y],
             (49, {"padding": pad, "stride_w": st[1], "stride_h": st[0], "fused_activation_function": act}))
        m.outputs.append(y)
    return write_tflite(m.model())


def batch_matmul(rng) -> bytes:
    """BATCH_MATMUL (int8): activations [2, 3, 5, 12] x [2, 3, 12, 7] with zero points, and
    an adjoint_rhs product by a constant [7, 12] (attention's Q K^T and a projection)."""
    m = ModelBuilder()
    a = m.tensor("a", (2, 3, 5, 12), "int8", 0.04, 3)
    c = m.tensor("c", (2, 3, 12, 7), "int8", 0.05, -2)
    y = m.tensor("y", (2, 3, 5, 7), "int8", 0.3, 1)
    m.op(126, 1, [a, c], [y], (101, {"adjoint_lhs": False, "adjoint_rhs": False}))
    k = m.tensor("k", (7, 12), "int8", 0.02, 0, rng.integers(-127, 128, (7, 12)))
    z = m.tensor("z", (2, 3, 5, 7), "int8", 0.25, -3)
    m.op(126, 1, [a, k], [z], (101, {"adjoint_lhs": False, "adjoint_rhs": True}))
    m.inputs, m.outputs = [a, c], [y, z]
    return write_tflite(m.model())


MODELS = {"maximum_minimum_v2": maximum_minimum, "transpose_conv_v3": transpose_conv,
          "batch_matmul": batch_matmul}


def reference_outputs(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for detail, x in zip(it.get_input_details(), inputs):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in MODELS.items():
        rng = np.random.default_rng(1234)
        data = make(rng)
        (OUT / f"{name}.tflite").write_bytes(data)
        from ai_edge_litert.interpreter import Interpreter

        shapes = [(d["shape"], d["dtype"]) for d in Interpreter(model_content=data).get_input_details()]
        arrays: dict[str, list] = {}
        for _ in range(SAMPLES):
            xs = [rng.integers(np.iinfo(t).min, np.iinfo(t).max + 1, tuple(s)).astype(t) for s, t in shapes]
            for i, x in enumerate(xs):
                arrays.setdefault(f"input_{i}", []).append(x)
            for i, y in enumerate(reference_outputs(data, xs)):
                arrays.setdefault(f"ref_{i}", []).append(y)
        np.savez(OUT / f"{name}.npz", **{k: np.stack(v) for k, v in arrays.items()})
        print(f"wrote {OUT / name}.tflite/.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
