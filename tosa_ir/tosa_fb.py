"""Read and write TOSA flatbuffer (``.tosa``) files as :class:`tosa_ir.graph.Graph`.

The format is the one the official TOSA serialisation library writes (schema ``tosa.fbs``,
TOSA 1.0 and 1.1 draft): a graph of regions, each a list of basic blocks holding tensors,
shape values and operators.  Only the ``flatbuffers`` runtime is used; the schema layout
is described in :mod:`tosa_ir._fb.schema`.

Mapping to the IR:

* Tensors keep their names, shapes (-1 for unknown dimensions) and element types by
  spec name (``int8``, ``int48``, ``bf16``, ...); constant data becomes numpy arrays
  (:mod:`tosa_ir._fb.tensor_data`).  ``TosaShape`` entries (shape values) become tensors
  of type ``shape`` and shape ``(rank,)``; on writing, ``shape`` tensors go back there.
* Operators keep the schema's Op names (``CONV2D``, ``RESCALE``, ...) and get every
  field of their attribute table, by the schema's snake-case field name, with the schema
  default where the file leaves a field out.  Enum values are their schema names
  (``acc_type="INT32"``, ``rounding_mode="SINGLE_ROUND"``).  CLAMP's ``min_val`` and
  ``max_val`` (stored as raw bytes of the input type) become Python numbers.
* ``Operator.location`` is ``"<file>:<region>/<block>#<index>"``, followed by the
  file's own location text if it has one; writing strips that prefix again, so a
  read/write/read round trip gives back the same graph.

Writing normalises one thing.  The official reference model (tosa-tools 2026.8) loads a
tensor's constant data only when it allocates the tensor, which it does for block inputs,
variables and the outputs of an operator about to run.  A constant that no operator
produces is never allocated; since the model queues every main-block operator at load,
in file order, the first operator reading it still runs and aborts the model on the null
tensor (an assertion, not an ERROR status).  Official files therefore give every constant
a CONST operator (CONST_SHAPE for shape values) ahead of its readers; IR graphs need not:
constants are tensors with data.  ``write_tosa`` adds the missing operators at the start
of their block, in order of first use, then unused constants in declaration order (the
convention of ``compiler.graph.quantize.prepare.add_const_ops``).  Reading the file back shows
them (``read_tosa`` strips nothing: it returns what the file holds), and the original
operators move down by as many places, which shows in the positions in their
``location``.  A graph that already has them (any graph read from an official file) is
written unchanged, so ``read_tosa(write_tosa(g))`` equals ``g`` for it, and
``write_tosa(read_tosa(write_tosa(g))) == write_tosa(g)`` for every graph.

Files also record the serialisation-library release they follow
(``software_version``, ``compatibility.min_reader_version``): written as the official
serializer of :data:`tosa_ir._fb.schema.SOFTWARE_VERSION` writes them, ignored on reading.

Malformed files raise :class:`InvalidInput` with a one-line message naming the file and
the problem; valid files using what the IR cannot hold (unranked or block-scaled
tensors, fp6/fp4/fp8ue8m0/mxint8 data) raise :class:`Unsupported`.  fp8e4m3 and fp8e5m2
tensors are read (as float32 values, tosa_ir/_fb/tensor_data.py) so that a graph misusing
one meets its own ERROR_IF; no operator computes in them.
"""
from __future__ import annotations

import math
import struct
from pathlib import Path

import flatbuffers
import numpy as np

from tosa_ir._fb import tensor_data
from tosa_ir._fb.flatbuf import Malformed, TableReader, build_table
from tosa_ir._fb.schema import (
    DTYPE, ENUMS, FILE_IDENTIFIER, OP_ATTRIBUTES, OP_CODES, OP_NAMES, SOFTWARE_VERSION,
)
from tosa_ir.errors import InvalidInput, NpuError, Unsupported
from tosa_ir.graph import Block, Graph, Operator, Region, Tensor

__all__ = ["read_tosa", "write_tosa"]

# Schema DType name <-> IR element type name.
_IR_DTYPE = {
    "BOOL": "bool", "INT4": "int4", "INT8": "int8", "INT16": "int16", "INT32": "int32",
    "INT48": "int48", "INT64": "int64", "FP16": "fp16", "BF16": "bf16", "FP32": "fp32",
    "SHAPE": "shape", "FP8E4M3": "fp8e4m3", "FP8E5M2": "fp8e5m2",
}
_FB_DTYPE = {ir: next(code for code, name in DTYPE.items() if name == fb)
             for fb, ir in _IR_DTYPE.items()}

# Attribute fields whose bytes hold one value of the operator's first input's type.
_VALUE_BYTES = {("CLAMP", "min_val"), ("CLAMP", "max_val")}
_MEMORY = "<memory>"


def _position(source: str, region: str, block: str, index: int) -> str:
    return f"{source}:{region}/{block}#{index}"


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------
def read_tosa(data: bytes | bytearray | memoryview | str | Path, source: str | None = None) -> Graph:
    """Read a TOSA flatbuffer.

    Parameters
    ----------
    data
        The file's bytes, or a path to it.
    source
        Name of the file for messages and ``Graph.source``; defaults to the path, or
        ``"<memory>"`` for bytes.

    Returns
    -------
    Graph
        The graph, with ``version`` from the file.

    Raises
    ------
    InvalidInput
        The file cannot be read or is not a well-formed TOSA flatbuffer.
    Unsupported
        The file is well-formed but uses what the IR cannot represent.
    """
    if isinstance(data, (str, Path)):
        from tosa_ir.safe_io import read_file

        src = source or str(data)
        buf = read_file(data, "TOSA file")          # regular files only, size-bounded
    else:
        src = source or _MEMORY
        buf = bytes(data)
    try:
        return _GraphReader(buf, src).graph()
    except NpuError as err:
        if type(err) in (InvalidInput, Unsupported) and src not in str(err):
            raise type(err)(f"{src}: {err}") from None      # e.g. a tensor past the level
        raise
    except (Malformed, struct.error, IndexError, ValueError, KeyError, OverflowError,
            TypeError, UnicodeDecodeError, RecursionError, MemoryError) as err:
        # Everything decoding a hostile file can throw ends here as one line.
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InvalidInput(f"{src}: malformed TOSA flatbuffer: {message}") from None


class _GraphReader:
    def __init__(self, buf: bytes, source: str):
        self.buf = buf
        self.source = source

    def fail(self, where: str, problem: str) -> InvalidInput:
        return InvalidInput(f"{self.source}: {where}: {problem}")

    def graph(self) -> Graph:
        reader = TableReader(self.buf)
        raw = reader.table(reader.root(FILE_IDENTIFIER), "TosaGraph", "graph")
        version = raw["version"]
        if version is None:
            raise self.fail("graph", "missing the required version table")
        graph = Graph(
            version=(version["_major"], version["_minor"], version["_patch"], version["_draft"]),
            source=self.source,
        )
        for r, region in enumerate(raw["regions"] or []):
            name = region["name"] or ""
            graph.regions.append(Region(name, [
                self.block(block, f"regions[{r}].blocks[{b}]", name)
                for b, block in enumerate(region["blocks"] or [])]))
        if not graph.regions or not graph.regions[0].blocks:
            raise self.fail("graph", "has no main block")
        self.check_references(graph)
        return graph

    def block(self, raw: dict, where: str, region: str) -> Block:
        block = Block(raw["name"] or "")
        for t, tensor in enumerate(raw["tensors"] or []):
            self.add(block, self.tensor(tensor, f"{where}.tensors[{t}]"), where)
        for s, shape in enumerate(raw["shapes"] or []):
            self.add(block, self.shape_value(shape, f"{where}.shapes[{s}]"), where)
        block.inputs = list(raw["inputs"] or [])
        block.outputs = list(raw["outputs"] or [])
        for i, op in enumerate(raw["operators"] or []):
            block.operators.append(self.operator(op, block, f"{where}.operators[{i}]",
                                                 _position(self.source, region, block.name, i)))
        return block

    def add(self, block: Block, tensor: Tensor, where: str) -> None:
        if tensor.name in block.tensors:
            raise self.fail(where, f"tensor {tensor.name!r} is declared twice")
        block.add_tensor(tensor)

    def dtype(self, code: int, where: str) -> str:
        if code not in DTYPE:
            raise self.fail(where, f"unknown element type code {code}")
        name = DTYPE[code]
        if name == "UNKNOWN":
            raise self.fail(where, "element type UNKNOWN")
        if name not in _IR_DTYPE:
            raise Unsupported(f"{self.source}: {where}: element type {name} is not supported")
        return _IR_DTYPE[name]

    def tensor(self, raw: dict, where: str) -> Tensor:
        name = raw["name"]
        if not name:
            raise self.fail(where, "tensor has no name")
        where = f"{where} ({name!r})"
        dtype = self.dtype(raw["type"], where)
        if raw["is_unranked"]:
            raise Unsupported(f"{self.source}: {where}: unranked tensors are not supported")
        if raw["scale_type"] or raw["scale_data"] or raw["block_shape"] or raw["scale_size"]:
            raise Unsupported(f"{self.source}: {where}: block-scaled tensors are not supported")
        shape = tuple(raw["shape"] or ())
        if any(d < -1 for d in shape):
            raise self.fail(where, f"negative dimension in shape {list(shape)}")
        data = raw["data"]
        if not data and raw["offset"] > 1 and raw["size"]:
            # Models over 2 GB keep tensor data after the flatbuffer, by file offset.
            end = raw["offset"] + raw["size"]
            if end > len(self.buf):
                raise self.fail(where, f"external data [{raw['offset']}, {end}) lies outside "
                                       f"the {len(self.buf)}-byte file")
            data = self.buf[raw["offset"]:end]
        return Tensor(name, shape, dtype, self.values(data, shape, dtype, where),
                      variable=raw["variable"], variable_name=raw["variable_name"] or "")

    def shape_value(self, raw: dict, where: str) -> Tensor:
        name = raw["name"]
        if not name:
            raise self.fail(where, "shape has no name")
        return Tensor(name, (raw["rank"],), "shape",
                      self.values(raw["data"], (raw["rank"],), "shape", f"{where} ({name!r})"))

    def values(self, raw: bytes | None, shape: tuple[int, ...], dtype: str, where: str):
        if not raw:
            return None
        if -1 in shape:
            raise self.fail(where, f"constant data for a tensor of unknown shape {list(shape)}")
        count = math.prod(shape)
        expected = tensor_data.nbytes(dtype, count)
        # tosa-opt (the MLIR serialiser) pads constant data to a multiple of 8 bytes; the
        # official serialiser writes 8 zero bytes for an empty value (a rank-0 shape).
        if len(raw) not in (expected, max(8, -(-expected // 8) * 8)):
            raise self.fail(where, f"{len(raw)} bytes of data, but shape {list(shape)} of "
                                   f"{dtype} needs {expected}")
        return tensor_data.decode(dtype, raw[:expected], count).reshape(shape)

    def operator(self, raw: dict, block: Block, where: str, position: str) -> Operator:
        code = raw["op"]
        op = OP_NAMES.get(code)
        if op is None or op == "UNKNOWN":
            raise self.fail(where, f"unknown operator code {code}")
        where = f"{where} ({op})"
        table, fields = OP_ATTRIBUTES[op]
        utype, values = raw["attribute"]
        if utype not in (0, code):
            raise self.fail(where, f"carries attribute type {utype} instead of {table}")
        inputs = list(raw["inputs"] or [])
        attrs = {}
        for field in fields:
            value = field.default if values is None else values[field.name]
            if field.type in ENUMS:
                if value not in ENUMS[field.type]:
                    raise self.fail(where, f"{field.name} has unknown {field.type} value {value}")
                value = ENUMS[field.type][value]
            elif (op, field.name) in _VALUE_BYTES:
                value = self.value_attribute(value or b"", op, inputs, block, f"{where}.{field.name}")
            elif field.type == "[ubyte]":
                value = np.frombuffer(value or b"", dtype=np.uint8).copy()
            elif field.type == "[int32]":
                value = list(value or [])
            elif field.type == "string":
                value = value or ""
            attrs[field.name] = value
        text = (raw["location"] or {}).get("text") or ""
        return Operator(op, inputs, list(raw["outputs"] or []), attrs,
                        location=f"{position} {text}" if text else position)

    def value_attribute(self, raw: bytes, op: str, inputs: list[str], block: Block, where: str):
        """A value stored as raw bytes of the operator's input type (CLAMP min/max)."""
        if not inputs or inputs[0] not in block.tensors:
            raise self.fail(where, f"{op} has no declared input to give the value its type")
        dtype = block.tensors[inputs[0]].dtype
        size = tensor_data.nbytes(dtype, 1)
        if len(raw) < size:
            raise self.fail(where, f"{len(raw)} bytes cannot hold a {dtype} value")
        return tensor_data.decode(dtype, raw[:size], 1)[0].item()

    def check_references(self, graph: Graph) -> None:
        """Every name a block or operator uses is declared in that block (the reference
        model requires it, control-flow blocks included); control flow names a region."""
        for r, region in enumerate(graph.regions):
            for b, block in enumerate(region.blocks):
                where = f"regions[{r}].blocks[{b}] ({block.name!r})"
                for name in block.inputs + block.outputs:
                    if name not in block.tensors:
                        raise self.fail(where, f"input/output {name!r} is not a declared tensor")
                for i, op in enumerate(block.operators):
                    op_where = f"regions[{r}].blocks[{b}].operators[{i}] ({op.op})"
                    for name in op.inputs + op.outputs:
                        if name not in block.tensors:
                            raise self.fail(op_where, f"uses undeclared tensor {name!r}")
                    for key in ("then_graph", "else_graph", "cond_graph", "body_graph"):
                        if key in op.attrs:
                            try:
                                graph.block(op.attrs[key])
                            except KeyError:
                                raise self.fail(op_where, f"{key} names no region or block: "
                                                          f"{op.attrs[key]!r}") from None


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------
def write_tosa(graph: Graph) -> bytes:
    """Serialise ``graph`` as a TOSA flatbuffer the official tools read and run.

    Constant tensors that no operator produces get a CONST (CONST_SHAPE for shape values)
    operator at the start of their block, as the official reference model needs (see the
    module notes); ``graph`` itself is not changed.

    Raises
    ------
    InvalidInput
        Something in the graph cannot be encoded (an attribute the schema does not have,
        a value out of range, constant data not matching its tensor).
    Unsupported
        The graph uses what a .tosa file cannot hold (draft-spec operators, uint8/uint16
        tensors).
    """
    source = graph.source or _MEMORY
    regions = []
    for region in graph.regions:
        blocks = []
        for block in region.blocks:
            blocks.append(_block_values(block, region.name, source))
        regions.append({"name": region.name, "blocks": blocks})
    major, minor, patch, draft = graph.version
    software = dict(zip(("_major", "_minor", "_micro", "_modifier"), SOFTWARE_VERSION))
    values = {
        "version": {"_major": major, "_minor": minor, "_patch": patch, "_draft": bool(draft)},
        "regions": regions,
        "software_version": software,
        # The official writer of this release asks for a reader of at least its own
        # release; no forward-compatibility features (they are for MX types).
        "compatibility": {"min_reader_version": software, "features": 0},
    }
    size = sum(t.data.nbytes for r in graph.regions for b in r.blocks for t in b.tensors.values()
               if t.data is not None)
    builder = flatbuffers.Builder(size + 4096)
    try:
        root = build_table(builder, "TosaGraph", values)
    except (struct.error, OverflowError, TypeError, ValueError) as err:
        # flatbuffers rejects out-of-range scalars (e.g. a version number) with TypeError.
        raise InvalidInput(f"{source}: cannot write: {err}") from None
    builder.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def _block_values(block: Block, region: str, source: str) -> dict:
    where = f"{source}: block {region}/{block.name}"
    tensors, shapes = [], []
    for tensor in block.tensors.values():
        if tensor.dtype == "shape":
            shapes.append(_shape_values(tensor, where))
        else:
            tensors.append(_tensor_values(tensor, where))
    added = _missing_const_ops(block)
    operators = [_operator_values(op, block, "", f"{where} added {op.op} ({op.outputs[0]!r})")
                 for op in added]
    for index, op in enumerate(block.operators):
        # Positions are counted without the added operators: those of a graph read from a file.
        prefix = _position(source, region, block.name, index)
        text = op.location
        if text == prefix:
            text = ""
        elif text.startswith(prefix + " "):
            text = text[len(prefix) + 1:]
        operators.append(_operator_values(op, block, text, f"{where} operator {index} ({op.op})"))
    return {"name": block.name, "operators": operators, "tensors": tensors,
            "inputs": list(block.inputs), "outputs": list(block.outputs), "shapes": shapes}


def _missing_const_ops(block: Block) -> list[Operator]:
    """CONST / CONST_SHAPE operators for the constants of ``block`` that no operator
    produces: in order of first use, then unused ones in declaration order.

    Block inputs and variables are left alone: the reference model fills them itself.
    """
    filled = {name for op in block.operators for name in op.outputs} | set(block.inputs)
    order = dict.fromkeys([name for op in block.operators for name in op.inputs]
                          + list(block.tensors))
    added = []
    for name in order:
        tensor = block.tensors.get(name)
        if tensor is None or not tensor.is_const or tensor.variable or name in filled:
            continue
        added.append(Operator("CONST_SHAPE" if tensor.dtype == "shape" else "CONST", [], [name]))
    return added


def _encoded(tensor: Tensor, where: str) -> bytes | None:
    if tensor.data is None:
        return None
    data = np.asarray(tensor.data)
    if -1 in tensor.shape or data.size != tensor.size:
        raise InvalidInput(f"{where}: tensor {tensor.name!r} has {data.size} values for "
                           f"shape {list(tensor.shape)}")
    try:
        return tensor_data.encode(tensor.dtype, data)
    except ValueError as err:
        raise InvalidInput(f"{where}: tensor {tensor.name!r}: {err}") from None


def _tensor_values(tensor: Tensor, where: str) -> dict:
    if tensor.dtype not in _FB_DTYPE:
        raise Unsupported(f"{where}: tensor {tensor.name!r}: element type {tensor.dtype} "
                          f"does not exist in .tosa files")
    for d in tensor.shape:
        if not -1 <= d < 1 << 31:
            raise InvalidInput(f"{where}: tensor {tensor.name!r} has bad shape {list(tensor.shape)}")
    values = {"name": tensor.name, "shape": list(tensor.shape), "type": _FB_DTYPE[tensor.dtype],
              "data": _encoded(tensor, where), "variable": bool(tensor.variable)}
    if tensor.variable_name:
        values["variable_name"] = tensor.variable_name
    return values


def _shape_values(tensor: Tensor, where: str) -> dict:
    if len(tensor.shape) != 1 or not 0 <= tensor.shape[0] < 1 << 32:
        raise InvalidInput(f"{where}: shape value {tensor.name!r} must have shape (rank,), "
                           f"not {tensor.shape}")
    return {"name": tensor.name, "rank": tensor.shape[0], "data": _encoded(tensor, where)}


def _operator_values(op: Operator, block: Block, location: str, where: str) -> dict:
    if op.op not in OP_CODES:
        raise Unsupported(f"{where}: operator {op.op} does not exist in .tosa files")
    table, fields = OP_ATTRIBUTES[op.op]
    unknown = set(op.attrs) - {f.name for f in fields}
    if unknown:
        raise InvalidInput(f"{where}: {table} has no field {', '.join(sorted(unknown))}")
    attrs = {}
    for field in fields:
        value = op.attrs.get(field.name, field.default)
        fwhere = f"{where}: {field.name}"
        try:
            attrs[field.name] = _attribute_value(op, field, value, block)
        except (ValueError, TypeError, OverflowError) as err:
            raise InvalidInput(f"{fwhere}: {err}") from None
    return {"op": OP_CODES[op.op], "attribute": (OP_CODES[op.op], attrs),
            "inputs": list(op.inputs), "outputs": list(op.outputs),
            "location": {"text": location}}


def _int32(value) -> int:
    value = int(value)
    if not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f"{value} does not fit int32")
    return value


def _attribute_value(op: Operator, field, value, block: Block):
    if (op.op, field.name) in _VALUE_BYTES:
        if value is None:
            raise ValueError(f"{op.op} needs a value")
        if not op.inputs or op.inputs[0] not in block.tensors:
            raise ValueError(f"{op.op} has no declared input to give the value its type")
        raw = tensor_data.encode(block.tensors[op.inputs[0]].dtype, np.asarray([value]))
        return raw + bytes(-len(raw) % 8)  # the official tools pad to 8 bytes
    if value is None:
        return None
    if field.type in ENUMS:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if int(value) not in ENUMS[field.type]:
                raise ValueError(f"{value} is not a {field.type} value")
            return int(value)
        names = {name: code for code, name in ENUMS[field.type].items()}
        if str(value).upper() not in names:
            raise ValueError(f"{value!r} is not one of {', '.join(names)}")
        return names[str(value).upper()]
    if field.type == "[ubyte]":
        return bytes(np.asarray(value, dtype=np.uint8).reshape(-1))
    if field.type == "[int32]":
        return [_int32(v) for v in np.asarray(value).reshape(-1).tolist()]
    if field.type == "int32":
        return _int32(value)
    if field.type == "bool":
        return bool(value)
    if field.type == "string":
        return str(value)
    raise TypeError(f"unhandled field type {field.type}")
