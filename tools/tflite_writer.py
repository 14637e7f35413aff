"""Writing .tflite / .circle flatbuffers without TensorFlow (shared by the fixture scripts).

Not a test module and not part of the package: the scripts under tools/ import it after
putting tools/ on ``sys.path``.  The flatbuffers are built from the Circle frontend's own
schema tables (compiler/frontends/circle/schema.py), so the writer and the reader agree on
every field's slot, type and default.  A .circle file is the same flatbuffer with file
identifier ``CIR0`` instead of ``TFL3`` (the Circle schema is a superset of TFLite's).

* :class:`ModelBuilder`: one subgraph of quantized tensors, constant buffers and operators.
* :func:`write_tflite`: the model dict (schema field names) as bytes, identifier TFL3 or CIR0.
* :func:`reference_outputs`: TFLite's reference kernels (ai-edge-litert,
  ``OpResolverType.BUILTIN_REF``) on one sample: the bit-exact oracle.
"""
from __future__ import annotations

import flatbuffers
import numpy as np

__all__ = ["ModelBuilder", "TYPE_CODES", "reference_outputs", "write_tflite"]

_PREPEND = {"bool": "PrependBoolSlot", "byte": "PrependInt8Slot", "ubyte": "PrependUint8Slot",
            "short": "PrependInt16Slot", "ushort": "PrependUint16Slot", "int": "PrependInt32Slot",
            "uint": "PrependUint32Slot", "long": "PrependInt64Slot", "ulong": "PrependUint64Slot",
            "float": "PrependFloat32Slot", "double": "PrependFloat64Slot"}
_NUMPY = {"int": "<i4", "long": "<i8", "float": "<f4", "ubyte": "u1", "bool": "u1", "byte": "i1",
          "uint": "<u4"}
TYPE_CODES = {"int8": 9, "int16": 7, "int32": 2, "uint8": 3, "int64": 4}


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


def write_tflite(model: dict, identifier: bytes = b"TFL3") -> bytes:
    """A .tflite file (identifier ``TFL3``; ``CIR0`` for .circle) from a dict in the schema
    tables' field names."""
    builder = flatbuffers.Builder(1024)
    root = _build(builder, "Model", model)
    builder.Finish(root, file_identifier=identifier)
    return bytes(builder.Output())


class ModelBuilder:
    """One subgraph: quantized tensors, constant buffers, operators (builtin code, version)."""

    def __init__(self):
        self.tensors, self.buffers, self.ops, self.codes = [], [{}], [], []
        self.inputs, self.outputs = [], []

    def tensor(self, name, shape, dtype, scale=None, zp=0, data=None, axis: int = 0) -> int:
        """``scale`` None: not quantized (shape operands); a list: per channel along ``axis``
        (0 for CONV_2D / FULLY_CONNECTED / TRANSPOSE_CONV filters, 3 for depthwise ones)."""
        buffer = 0
        if data is not None:
            self.buffers.append({"data": np.asarray(data, dtype).tobytes()})
            buffer = len(self.buffers) - 1
        t = {"shape": list(shape), "type": TYPE_CODES[dtype], "buffer": buffer, "name": name}
        if scale is not None:
            scales = list(np.atleast_1d(scale).astype(float))
            zps = list(np.broadcast_to(np.atleast_1d(zp), (len(scales),)).astype(int))
            t["quantization"] = {"scale": scales, "zero_point": zps, "quantized_dimension": axis}
        self.tensors.append(t)
        return len(self.tensors) - 1

    def op(self, code: int, version: int, inputs, outputs, options=(0, None)) -> None:
        key = (code, version)
        if key not in self.codes:
            self.codes.append(key)
        self.ops.append({"opcode_index": self.codes.index(key), "inputs": list(inputs),
                         "outputs": list(outputs), "builtin_options": options})

    def model(self, description: str = "tools/make_tflite_op_fixtures.py") -> dict:
        return {"version": 3,
                "operator_codes": [{"deprecated_builtin_code": min(c, 127), "builtin_code": c, "version": v}
                                   for c, v in self.codes],
                "subgraphs": [{"tensors": self.tensors, "inputs": self.inputs, "outputs": self.outputs,
                               "operators": self.ops, "name": "main"}],
                "description": description, "buffers": self.buffers}


def reference_outputs(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of TFLite's reference kernels for the model ``data`` on ``inputs`` (one
    array per graph input, in order): the bit-exact oracle of the fixtures."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for detail, x in zip(it.get_input_details(), inputs):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
