"""tosa_ir.tosa_fb: reading and writing .tosa flatbuffers, checked against tosa-tools.

Oracles: graphs are built with the official serializer (``tosa_serializer``, and the
deprecated pure-Python ``serializer``), the official C++ loader (``loadTosaFlatbuffer``)
reads what we write, and the official reference model runs both the original and our
rewritten files (out of process, through tests/oracle.py: a file it cannot handle can
abort it).  Expected constants are the arrays the test handed to the serializer.

Graphs without CONST operators (constants are tensors with data in the IR) are written
with the CONST / CONST_SHAPE operators the reference model needs; reading back shows them.
Those tests compare with :func:`assert_same_but_added_const_ops`, which expects exactly
the operators the official serializer had written (taken from its own files).
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")  # no gdb on a rejected graph

pytest.importorskip("tosa_reference_model", reason="tosa-tools (official reference model) is not installed")
import ml_dtypes  # noqa: E402  (tosa-tools dependency)
import tosa_serializer as ts  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import oracle  # noqa: E402
from tool_modules import load_tool  # noqa: E402

from tosa_ir import Block, Graph, InvalidInput, Operator, Region, Tensor, Unsupported  # noqa: E402
from tosa_ir._fb import schema  # noqa: E402
from tosa_ir._fb.flatbuf import build_table  # noqa: E402
from tosa_ir.tosa_fb import read_tosa, write_tosa  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SLICE_DIR = ROOT / "models" / "slice"
SLICE_TOSA = SLICE_DIR / "conv_rescale_clamp.tosa"
FBS = Path(ts.__file__).resolve().parents[1] / "bin" / "tosa.fbs"

DT = {"bool": ts.DType.BOOL, "int4": ts.DType.INT4, "int8": ts.DType.INT8,
      "int16": ts.DType.INT16, "int32": ts.DType.INT32, "int48": ts.DType.INT48,
      "fp16": ts.DType.FP16, "bf16": ts.DType.BF16, "fp32": ts.DType.FP32}


def _load_tool():
    return load_tool("make_slice_model")


# ---------------------------------------------------------------------------------------
# Helpers: the official loader's view of a file, and graph equality
# ---------------------------------------------------------------------------------------
def _plain(value):
    """A tosa_serializer attribute value as plain Python (enums by name)."""
    if hasattr(value, "name") and hasattr(value, "value"):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# Bits per element, to drop the padding tosa-opt appends to constant data.
_BITS = {"BOOL": 8, "INT4": 4, "INT8": 8, "INT16": 16, "INT32": 32, "INT48": 48, "INT64": 64,
         "FP16": 16, "BF16": 16, "FP32": 32}


def official_view(data: bytes, tmp_path: Path) -> list:
    """Everything the official C++ loader sees in ``data``, as comparable plain data.

    Constant data is cut to its exact size (tosa-opt pads it to a multiple of 8 bytes).
    """
    path = tmp_path / "official_view.tosa"
    path.write_bytes(data)
    ser = ts.TosaSerializer("")
    assert ser.loadTosaFlatbuffer(str(path)), "official loader rejected the file"
    view = [ser.getGraphTosaVersion().to_string()]
    for region in ser.regions:
        for block in region.basicBlocks:
            tensors = {}
            for name in block.tensors.keys():
                t = block.tensors[name]
                exact = -(-int(np.prod(t.shape)) * _BITS[t.dtype.name] // 8)
                tensors[name] = (list(t.shape), t.dtype.name, list(t.data)[:exact], t.is_variable,
                                 t.variable_name)
            shapes = {}
            for name in block.shapes.keys():
                s = block.shapes[name]
                shapes[name] = (s.rank, list(s.data))
            ops = []
            for op in block.operators:
                attrs = {k: _plain(getattr(op.attributes, k))
                         for k in dir(op.attributes) if not k.startswith("_")}
                ops.append((op.op.name, list(op.inputs), list(op.outputs), attrs, op.location.text))
            view.append((region.name, block.name, list(block.inputs), list(block.outputs),
                         tensors, shapes, ops))
    return view


def _same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    return type(a) is type(b) and a == b


def assert_graphs_equal(a: Graph, b: Graph) -> None:
    assert (a.version, a.profiles, a.extensions) == (b.version, b.profiles, b.extensions)
    assert [r.name for r in a.regions] == [r.name for r in b.regions]
    for ra, rb in zip(a.regions, b.regions):
        assert [x.name for x in ra.blocks] == [x.name for x in rb.blocks]
        for ba, bb in zip(ra.blocks, rb.blocks):
            assert (ba.inputs, ba.outputs) == (bb.inputs, bb.outputs)
            assert list(ba.tensors) == list(bb.tensors)
            for ta, tb in zip(ba.tensors.values(), bb.tensors.values()):
                assert (ta.name, ta.shape, ta.dtype, ta.variable, ta.variable_name) == \
                       (tb.name, tb.shape, tb.dtype, tb.variable, tb.variable_name)
                assert (ta.data is None) == (tb.data is None), ta.name
                if ta.data is not None:
                    assert _same_value(ta.data, tb.data), ta.name
            assert len(ba.operators) == len(bb.operators)
            for oa, ob in zip(ba.operators, bb.operators):
                assert (oa.op, oa.inputs, oa.outputs, oa.location) == \
                       (ob.op, ob.inputs, ob.outputs, ob.location)
                assert list(oa.attrs) == list(ob.attrs), oa.op
                for key in oa.attrs:
                    assert _same_value(oa.attrs[key], ob.attrs[key]), (oa.op, key)


def assert_round_trip(data: bytes, tmp_path: Path) -> Graph:
    """Our reader and writer preserve everything the official loader sees."""
    graph = read_tosa(data, source="orig.tosa")
    rewritten = write_tosa(graph)
    assert official_view(rewritten, tmp_path) == official_view(data, tmp_path)
    assert_graphs_equal(read_tosa(rewritten, source="orig.tosa"), graph)
    assert write_tosa(read_tosa(rewritten, source="orig.tosa")) == rewritten
    return graph


def run_reference(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The official reference model's outputs, run in tests/oracle.py's worker process."""
    status, outputs, log = oracle._run_binding(data, inputs, "EIGHTK")
    assert status == "VALID", log
    return [np.asarray(o) for o in outputs]


_CONST_OPS = ("CONST", "CONST_SHAPE")


def _location_text(location: str, source: str, region: str, block: str, index: int) -> str:
    """The text of an operator location after its position prefix (see tosa_fb)."""
    prefix = f"{source}:{region}/{block}#{index}"
    assert location == prefix or location.startswith(prefix + " "), location
    return location[len(prefix) + 1:]


def strip_const_ops(graph: Graph, source: str) -> tuple[Graph, dict]:
    """A copy of ``graph`` (read from ``source``) without CONST / CONST_SHAPE operators, as
    a frontend would build it, and ``{(region, block): [(op, tensor), ...]}`` removed.

    Kept operators' locations lose their position prefix (positions change)."""
    regions, removed = [], {}
    for region in graph.regions:
        blocks = []
        for block in region.blocks:
            ops = []
            key = (region.name, block.name)
            removed[key] = []
            for i, op in enumerate(block.operators):
                if op.op in _CONST_OPS:
                    removed[key].append((op.op, op.outputs[0]))
                    continue
                text = _location_text(op.location, source, region.name, block.name, i)
                ops.append(dataclasses.replace(op, location=text))
            blocks.append(Block(block.name, dict(block.tensors), ops, list(block.inputs),
                                list(block.outputs)))
        regions.append(Region(region.name, blocks))
    return Graph(regions, graph.version, list(graph.profiles), list(graph.extensions)), removed


def assert_same_but_added_const_ops(original: Graph, back: Graph, added: dict, source: str) -> None:
    """``back`` (``original`` written and read back from ``source``) is ``original`` with the
    operators ``added`` ({(region, block): [(op, tensor)]}, in any order) placed first in
    their block, in order of first use, then unused constants in declaration order."""
    assert (back.version, [r.name for r in back.regions]) == \
           (original.version, [r.name for r in original.regions])
    for ro, rb in zip(original.regions, back.regions):
        assert [b.name for b in ro.blocks] == [b.name for b in rb.blocks]
        for bo, bb in zip(ro.blocks, rb.blocks):
            assert (bb.inputs, bb.outputs, list(bb.tensors)) == (bo.inputs, bo.outputs, list(bo.tensors))
            for name, tensor in bo.tensors.items():
                other = bb.tensors[name]
                assert (other.shape, other.dtype, other.variable) == \
                       (tensor.shape, tensor.dtype, tensor.variable), name
                assert (other.data is None) == (tensor.data is None), name
                if tensor.data is not None:
                    assert _same_value(other.data, tensor.data), name
            expected = added[(ro.name, bo.name)]
            n = len(expected)
            new, rest = bb.operators[:n], bb.operators[n:]
            assert sorted((op.op, op.outputs[0]) for op in new) == sorted(expected)
            assert all(op.inputs == [] and len(op.outputs) == 1 and op.attrs == {} for op in new)
            # Order: (operator, input position) of the first use; unused: declaration order.
            first_use = {}
            for i, op in enumerate(bo.operators):
                for j, name in enumerate(op.inputs):
                    first_use.setdefault(name, (i, j))
            declared = list(bo.tensors)
            keys = [first_use.get(op.outputs[0], (len(bo.operators), declared.index(op.outputs[0])))
                    for op in new]
            assert keys == sorted(keys), [op.outputs[0] for op in new]
            assert len(rest) == len(bo.operators)
            for i, (ob, oo) in enumerate(zip(rest, bo.operators)):
                assert (ob.op, ob.inputs, ob.outputs) == (oo.op, oo.inputs, oo.outputs)
                assert list(ob.attrs) == list(oo.attrs), oo.op
                for key in oo.attrs:
                    assert _same_value(ob.attrs[key], oo.attrs[key]), (oo.op, key)
                assert _location_text(ob.location, source, rb.name, bb.name, n + i) == oo.location


# ---------------------------------------------------------------------------------------
# Graphs written by the official serializer
# ---------------------------------------------------------------------------------------
class Builder:
    """Thin wrapper of tosa_serializer with our own tensor names."""

    def __init__(self, minor: int = 0):
        self.ser = ts.TosaSerializer("", targetMajor=1, targetMinor=minor, targetPatch=0,
                                     targetDraft=minor != 0)
        self.consts: dict[str, tuple[str, np.ndarray]] = {}

    @property
    def block(self):
        return self.ser.currRegion.currBasicBlock

    def input(self, name, shape, dtype):
        self.block.addTensor(name, list(shape), DT[dtype])
        self.block.addInput(name)
        return name

    def tensor(self, name, shape, dtype, **kwargs):
        self.block.addTensor(name, list(shape), DT[dtype], **kwargs)
        return name

    def output(self, name, shape, dtype):
        self.tensor(name, shape, dtype)
        self.block.addOutput(name)
        return name

    def const(self, name, dtype, values):
        values = np.asarray(values)
        self.ser.addConst(list(values.shape), DT[dtype], values, name=name)
        self.consts[name] = (dtype, values)
        return name

    def op(self, op, inputs, outputs, attr=None, **location):
        if attr is None:
            attr = ts.TosaSerializerAttribute()
            attr.setAttribute(getattr(ts.Op, op))
        args = [ts.TosaOpLocation(location["loc"])] if location else []
        self.ser.addOperator(getattr(ts.Op, op), inputs, outputs, attr, *args)

    def attr(self, method, *args):
        attr = ts.TosaSerializerAttribute()
        getattr(attr, method)(*args)
        return attr

    def region(self, name):
        self.ser.startRegion(name)
        self.ser.addBasicBlock(name)

    def serialize(self) -> bytes:
        return bytes(self.ser.serialize())


def graph_int4_conv():
    """CONV2D with int4 weights (odd element count: a half-filled last byte)."""
    rng = np.random.default_rng(1)
    b = Builder()
    x = b.input("x", [1, 4, 4, 3], "int8")
    w = b.const("w", "int4", rng.integers(-7, 8, (3, 1, 1, 3), dtype=np.int8))
    bias = b.const("bias", "int32", np.array([5, -6, 70000], np.int32))
    izp = b.const("izp", "int8", np.array([2], np.int8))
    wzp = b.const("wzp", "int4", np.array([0], np.int8))
    y = b.output("y", [1, 4, 4, 3], "int32")
    b.op("CONV2D", [x, w, bias, izp, wzp], [y],
         b.attr("Conv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], False, ts.DType.INT32))
    return b, [rng.integers(-128, 128, (1, 4, 4, 3), dtype=np.int8)]


def graph_int16_int48():
    """16x8 CONV2D with an int48 bias and accumulator, then RESCALE int48 -> int16."""
    rng = np.random.default_rng(2)
    b = Builder()
    x = b.input("x", [1, 3, 3, 2], "int16")
    w = b.const("w", "int8", rng.integers(-128, 128, (2, 2, 2, 2), dtype=np.int8))
    bias = b.const("bias", "int48", np.array([-(1 << 40) + 3, (1 << 39) - 7], np.int64))
    izp = b.const("izp", "int16", np.array([0], np.int16))
    wzp = b.const("wzp", "int8", np.array([0], np.int8))
    acc = b.tensor("acc", [1, 2, 2, 2], "int48")
    b.op("CONV2D", [x, w, bias, izp, wzp], [acc],
         b.attr("Conv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], True, ts.DType.INT48))
    mul = b.const("mul", "int16", np.array([16384], np.int16))
    shift = b.const("shift", "int8", np.array([40], np.int8))
    rizp = b.const("rizp", "int48", np.array([0], np.int64))
    rozp = b.const("rozp", "int16", np.array([0], np.int16))
    y = b.output("y", [1, 2, 2, 2], "int16")
    b.op("RESCALE", [acc, mul, shift, rizp, rozp], [y],
         b.attr("RescaleAttribute", False, ts.RoundingMode.SINGLE_ROUND, False, False, False))
    return b, [rng.integers(-32768, 32768, (1, 3, 3, 2), dtype=np.int16)]


def graph_bool_int16():
    """SELECT on a bool constant, ARITHMETIC_RIGHT_SHIFT(round), TRANSPOSE, REDUCE_MAX."""
    rng = np.random.default_rng(3)
    b = Builder()
    a = b.input("a", [2, 3], "int16")
    cond = b.const("cond", "bool", np.array([[True, False, True], [False, False, True]]))
    other = b.const("other", "int16", rng.integers(-32768, 32768, (2, 3), dtype=np.int16))
    sel = b.tensor("sel", [2, 3], "int16")
    b.op("SELECT", [cond, a, other], [sel])
    amount = b.const("amount", "int16", np.array([[0, 1, 2], [3, 4, 15]], np.int16))
    shifted = b.tensor("shifted", [2, 3], "int16")
    b.op("ARITHMETIC_RIGHT_SHIFT", [sel, amount], [shifted],
         b.attr("ArithmeticRightShiftAttribute", True), loc='loc("model.mlir":12:3)')
    transposed = b.tensor("transposed", [3, 2], "int16")
    b.op("TRANSPOSE", [shifted], [transposed], b.attr("TransposeAttribute", [1, 0]))
    y = b.output("y", [3, 1], "int16")
    b.op("REDUCE_MAX", [transposed], [y],
         b.attr("ReduceMaxAttribute", 1, ts.NanPropagationMode.PROPAGATE))
    return b, [rng.integers(-32768, 32768, (2, 3), dtype=np.int16)]


def graph_float_shapes():
    """fp32/fp16 constants, pools, and RESIZE whose scale/offset/border are shape values."""
    rng = np.random.default_rng(4)
    b = Builder()
    x = b.input("x", [1, 4, 4, 2], "fp32")
    h = b.input("h", [2, 2], "fp16")
    bias = b.const("bias", "fp32", rng.normal(size=(1, 4, 4, 2)).astype(np.float32))
    s = b.tensor("s", [1, 4, 4, 2], "fp32")
    b.op("ADD", [x, bias], [s])
    zp = b.const("zp", "fp32", np.array([0.0], np.float32))
    avg = b.output("avg", [1, 2, 2, 2], "fp32")
    b.op("AVG_POOL2D", [s, zp, zp], [avg],
         b.attr("AvgPool2dAttribute", [2, 2], [2, 2], [0, 0, 0, 0], ts.DType.FP32))
    mx = b.output("mx", [1, 4, 4, 2], "fp32")
    b.op("MAX_POOL2D", [s], [mx],
         b.attr("MaxPool2dAttribute", [3, 3], [1, 1], [1, 1, 1, 1], ts.NanPropagationMode.IGNORE))
    scale = b.ser.addConst([4], ts.DType.SHAPE, np.array([2, 1, 2, 1]), name="scale").name
    offset = b.ser.addConst([2], ts.DType.SHAPE, np.array([0, 0]), name="offset").name
    border = b.ser.addConst([2], ts.DType.SHAPE, np.array([1, 1]), name="border").name
    big = b.output("big", [1, 8, 8, 2], "fp32")
    b.op("RESIZE", [s, scale, offset, border], [big],
         b.attr("ResizeAttribute", ts.ResizeMode.BILINEAR))
    hc = b.const("hc", "fp16", np.array([[0.5, -1.25], [np.inf, 65504]], np.float16))
    hy = b.output("hy", [2, 2], "fp16")
    b.op("ADD", [h, hc], [hy])
    clamped = b.output("clamped", [2, 2], "fp16")
    b.op("CLAMP", [hy], [clamped],
         b.attr("ClampAttribute", list(np.float16(-0.5).tobytes()) + [0] * 6,
                list(np.float16(100.0).tobytes()) + [0] * 6, ts.NanPropagationMode.PROPAGATE))
    inputs = [rng.normal(size=(1, 4, 4, 2)).astype(np.float32),
              rng.normal(size=(2, 2)).astype(np.float16)]
    return b, inputs


def graph_control_flow():
    """COND_IF and WHILE_LOOP with their blocks in regions of their own (as tosa-tools builds them)."""
    b = Builder()
    c = b.input("c", [], "bool")
    a = b.input("a", [2], "int32")
    n = b.input("n", [], "int32")
    k = b.const("k", "int32", np.array([7, -3], np.int32))
    sel = b.output("sel", [2], "int32")
    b.op("COND_IF", [c, a, k], [sel], b.attr("CondIfAttribute", "then", "else"))
    n_out = b.tensor("n_out", [], "int32")
    acc = b.output("acc", [2], "int32")
    b.op("WHILE_LOOP", [n, a], [n_out, acc], b.attr("WhileLoopAttribute", "cond", "body"))
    for name, op in (("then", "ADD"), ("else", "SUB")):
        b.region(name)
        b.input("a", [2], "int32")
        b.input("k", [2], "int32")
        b.output(f"{name}_out", [2], "int32")
        b.op(op, ["a", "k"], [f"{name}_out"])
    b.region("cond")
    b.input("n", [], "int32")
    b.input("a", [2], "int32")
    zero = b.const("zero", "int32", np.array(0, np.int32))
    b.output("go", [], "bool")
    b.op("GREATER", ["n", zero], ["go"])
    b.region("body")
    b.input("n", [], "int32")
    b.input("a", [2], "int32")
    b.const("one_b", "int32", np.array(1, np.int32))
    b.output("n_next", [], "int32")
    b.output("a_next", [2], "int32")
    b.op("SUB", ["n", "one_b"], ["n_next"])
    b.op("ADD", ["a", "a"], ["a_next"])
    inputs = [np.array(True), np.array([1, 2], np.int32), np.array(3, np.int32)]
    return b, inputs


def graph_attribute_zoo():
    """Operators with every kind of attribute field, variables, bf16; TOSA 1.1 draft. Not run."""
    rng = np.random.default_rng(6)
    b = Builder(minor=1)
    x = b.input("x", [1, 4, 4, 2], "int8")
    w = b.const("dw", "int8", rng.integers(-128, 128, (2, 2, 2, 1), dtype=np.int8))
    bias = b.const("bias", "int32", np.zeros(2, np.int32))
    zp = b.const("zp", "int8", np.array([0], np.int8))
    d = b.tensor("d", [1, 2, 2, 2], "int32")
    b.op("DEPTHWISE_CONV2D", [x, w, bias, zp, zp], [d],
         b.attr("DepthwiseConv2dAttribute", [0, 1, 0, 1], [2, 2], [1, 1], True, ts.DType.INT32))
    tw = b.const("tw", "int8", rng.integers(-128, 128, (3, 2, 2, 2), dtype=np.int8))
    tc = b.tensor("tc", [1, 9, 9, 3], "int32")
    b.op("TRANSPOSE_CONV2D", [x, tw, b.const("tb", "int32", np.arange(3, dtype=np.int32)), zp, zp],
         [tc], b.attr("TransposeConv2dAttribute", [0, 1, 0, 1], [2, 2], False, ts.DType.INT32))
    am = b.tensor("am", [1, 4, 2], "int32")
    b.op("ARGMAX", [x], [am], b.attr("ArgMaxAttribute", 2, ts.NanPropagationMode.IGNORE))
    cat = b.tensor("cat", [1, 4, 8, 2], "int8")
    b.op("CONCAT", [x, x], [cat], b.attr("ConcatAttribute", 2))
    u = b.tensor("u", [1, 4, 4, 2], "int16")
    b.op("RESCALE", [x, b.const("m", "int32", np.array([1 << 30], np.int32)),
                     b.const("sh", "int8", np.array([31], np.int8)),
                     b.const("uzp", "int8", np.array([-128], np.int8)),
                     b.const("ozp", "int16", np.array([0], np.int16))], [u],
         b.attr("RescaleAttribute", True, ts.RoundingMode.DOUBLE_ROUND, False, True, False))
    cu = b.tensor("cu", [1, 4, 4, 2], "int8")
    b.op("CUSTOM", [x], [cu],
         b.attr("CustomAttribute", "my_op", "com.example", [1, 2, 255, 0]))
    v = b.tensor("state", [2], "int32", variable=True, variable_name="counter")
    b.op("VARIABLE", [], [v])
    b.op("VARIABLE_WRITE", [bias], [v])
    vr = b.tensor("vr", [2], "int32")
    b.op("VARIABLE_READ", [v], [vr])
    bf = b.const("bf", "bf16", np.array([1.5, -2.25, 3e38], dtype=ml_dtypes.bfloat16))
    bo = b.output("bo", [3], "bf16")
    b.op("ADD", [bf, bf], [bo])
    dim = b.ser.addIntermediateShape(1)
    b.op("DIM", [x], [dim.name], b.attr("DimAttribute", 3))
    b.output("out", [1, 4, 4, 2], "int8")
    b.op("IDENTITY", [cu], ["out"])
    return b, None


SERIALIZER_GRAPHS = [graph_int4_conv, graph_int16_int48, graph_bool_int16, graph_float_shapes,
                     graph_control_flow, graph_attribute_zoo]


# ---------------------------------------------------------------------------------------
# Schema description
# ---------------------------------------------------------------------------------------
def _parse_fbs(text: str):
    text = re.sub(r"//[^\n]*", "", text)
    enums = {}
    for name, body in re.findall(r"enum (\w+)\s*:\s*\w+\s*\{([^}]*)\}", text):
        values, nxt = {}, 0
        for item in filter(None, (s.strip() for s in body.split(","))):
            key, _, val = (p.strip() for p in item.partition("="))
            nxt = int(val) if val else nxt
            values[nxt] = key
            nxt += 1
        enums[name] = values
    unions = {name: [s.strip() for s in body.split(",") if s.strip()]
              for name, body in re.findall(r"union (\w+)\s*\{([^}]*)\}", text)}
    tables = {}
    for name, body in re.findall(r"table (\w+)\s*\{([^}]*)\}", text):
        fields = []
        for decl in filter(None, (s.strip() for s in body.split(";"))):
            fname, _, rest = (p.strip() for p in decl.partition(":"))
            ftype = re.match(r"(\[?\w+\]?)", rest).group(1)
            default = re.search(r"=\s*(-?\w+)", rest)
            align = re.search(r"force_align:\s*(\d+)", rest)
            fields.append((fname, ftype, default.group(1) if default else None,
                           int(align.group(1)) if align else 0))
        tables[name] = fields
    return enums, unions, tables


def test_schema_description_matches_tosa_fbs():
    enums, unions, tables = _parse_fbs(FBS.read_text())
    assert schema.OP_NAMES == enums["Op"]
    for name, values in schema.ENUMS.items():
        assert values == enums[name], name
    assert unions["Attribute"] == [schema.OP_ATTRIBUTES[op][0] for op in list(schema.OP_CODES)]
    assert set(schema.TABLES) <= set(tables)
    for name, fields in schema.TABLES.items():
        assert [(f.name, f.type, f.align) for f in fields] == \
               [(n, t, a) for n, t, _, a in tables[name]], name
        for field, (_, _, default, _) in zip(fields, tables[name]):
            if default is not None:
                assert field.default == {"true": True, "false": False}.get(default, default) or \
                       field.default == int(default), (name, field.name)
    # Every table the graph reaches is described.
    assert {t.strip("[]") for fields in tables.values() for _, t, _, _ in fields
            if t.strip("[]") in tables} <= set(schema.TABLES)


# ---------------------------------------------------------------------------------------
# The slice fixture
# ---------------------------------------------------------------------------------------
def test_slice_model_contents():
    tool = _load_tool()
    params = tool.parameters()
    graph = read_tosa(SLICE_TOSA)
    assert graph.version == (1, 0, 0, False)
    assert graph.source == str(SLICE_TOSA)
    assert [r.name for r in graph.regions] == ["main"]
    main = graph.main
    assert main.inputs == ["input"] and main.outputs == ["output"]
    compute = [op for op in main.operators if op.op != "CONST"]
    assert [op.op for op in compute] == ["CONV2D", "RESCALE", "CLAMP"]
    consts = {o for op in main.operators if op.op == "CONST" for o in op.outputs}
    assert consts == {name for name, t in main.tensors.items() if t.is_const}
    conv, rescale, clamp = compute
    assert conv.inputs == ["input", "conv_weights", "conv_bias", "conv_input_zp", "conv_weight_zp"]
    assert conv.attrs == {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1],
                          "local_bound": False, "acc_type": "INT32"}
    assert rescale.inputs == ["conv_acc", "rescale_multiplier", "rescale_shift",
                              "rescale_input_zp", "rescale_output_zp"]
    assert rescale.attrs == {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": True,
                             "input_unsigned": False, "output_unsigned": False}
    assert clamp.attrs == {"min_val": -100, "max_val": 110, "nan_mode": "PROPAGATE"}
    assert type(clamp.attrs["min_val"]) is int
    assert clamp.location == f"{SLICE_TOSA}:main/main#{main.operators.index(clamp)}"
    t = main.tensors
    assert (t["input"].shape, t["input"].dtype, t["input"].data) == ((1, 12, 11, 5), "int8", None)
    assert (t["conv_acc"].shape, t["conv_acc"].dtype) == ((1, 12, 11, 20), "int32")
    assert (t["output"].shape, t["output"].dtype) == ((1, 12, 11, 20), "int8")
    expected = {"conv_weights": params["weights"], "conv_bias": params["bias"],
                "conv_input_zp": np.array([-3], np.int8), "conv_weight_zp": np.array([0], np.int8),
                "rescale_multiplier": params["multiplier"], "rescale_shift": params["shift"],
                "rescale_input_zp": np.array([0], np.int32),
                "rescale_output_zp": np.array([5], np.int8)}
    for name, values in expected.items():
        assert _same_value(t[name].data, values), name
    assert np.all(params["multiplier"] >= 1 << 30)
    assert t["conv_weights"].data.shape == (20, 3, 3, 5)


def test_slice_fixture_is_reproducible_and_matches_reference():
    tool = _load_tool()
    params = tool.parameters()
    tosa = SLICE_TOSA.read_bytes()
    assert tool.build(params) == tosa
    x = np.load(SLICE_DIR / "input.npz")["input"]
    expected = np.load(SLICE_DIR / "expected.npz")["output"]
    assert _same_value(x, params["input"])
    assert expected.dtype == np.int8 and expected.shape == (1, 12, 11, 20)
    assert _same_value(run_reference(tosa, [x])[0], expected)
    # The clamp is narrower than int8 and matters: some outputs sit at each bound.
    assert expected.min() == -100 and expected.max() == 110


def test_slice_round_trip(tmp_path):
    graph = assert_round_trip(SLICE_TOSA.read_bytes(), tmp_path)
    rewritten = write_tosa(graph)
    x = np.load(SLICE_DIR / "input.npz")["input"]
    assert _same_value(run_reference(rewritten, [x])[0], np.load(SLICE_DIR / "expected.npz")["output"])


def _slice_graph_in_ir(const_ops: bool) -> Graph:
    """The slice fixture's graph made directly in the IR, with or without CONST operators."""
    params = _load_tool().parameters()
    block = Block("main", inputs=["input"], outputs=["output"])
    consts = {"w": params["weights"], "b": params["bias"], "izp": np.array([-3], np.int8),
              "wzp": np.array([0], np.int8), "m": params["multiplier"], "s": params["shift"],
              "rizp": np.array([0], np.int32), "rozp": np.array([5], np.int8)}
    dtypes = {np.dtype(np.int8): "int8", np.dtype(np.int32): "int32"}
    block.add_tensor(Tensor("input", (1, 12, 11, 5), "int8"))
    for name, values in consts.items():
        block.add_tensor(Tensor(name, values.shape, dtypes[values.dtype], values))
    block.add_tensor(Tensor("acc", (1, 12, 11, 20), "int32"))
    block.add_tensor(Tensor("r", (1, 12, 11, 20), "int8"))
    block.add_tensor(Tensor("output", (1, 12, 11, 20), "int8"))
    if const_ops:
        block.operators += [Operator("CONST", [], [name]) for name in consts]
    block.operators += [
        Operator("CONV2D", ["input", "w", "b", "izp", "wzp"], ["acc"],
                 {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"}),
        Operator("RESCALE", ["acc", "m", "s", "rizp", "rozp"], ["r"],
                 {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": True}),
        Operator("CLAMP", ["r"], ["output"], {"min_val": -100, "max_val": 110, "nan_mode": "PROPAGATE"}),
    ]
    return Graph.single_block(block)


@pytest.mark.parametrize("const_ops", [True, False])
def test_write_graph_built_in_ir_runs_on_reference_model(const_ops):
    """A graph made directly in the IR (no file read) gives the fixture's expected output;
    without CONST operators too (the writer adds them: the same bytes)."""
    graph = _slice_graph_in_ir(const_ops)
    operators = list(graph.main.operators)
    data = write_tosa(graph)
    assert graph.main.operators == operators  # the graph itself is not changed
    assert data == write_tosa(_slice_graph_in_ir(True))
    x = np.load(SLICE_DIR / "input.npz")["input"]
    assert _same_value(run_reference(data, [x])[0], np.load(SLICE_DIR / "expected.npz")["output"])
    again = read_tosa(data)
    assert again.main.operators[-3].attrs["local_bound"] is False  # defaults filled in
    assert again.version == (1, 0, 0, False)


# ---------------------------------------------------------------------------------------
# Other graphs from the official serializer
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", SERIALIZER_GRAPHS, ids=lambda f: f.__name__)
def test_serializer_graphs(make, tmp_path):
    builder, inputs = make()
    data = builder.serialize()
    graph = assert_round_trip(data, tmp_path)
    for name, (dtype, values) in builder.consts.items():
        tensor = next(b.tensors[name] for r in graph.regions for b in r.blocks
                      if name in b.tensors and b.tensors[name].is_const)
        assert (tensor.dtype, tensor.shape) == (dtype, values.shape), name
        if dtype == "bf16":
            values = values.astype(np.float32)
        assert _same_value(tensor.data, values.astype(tensor.data.dtype)), name
    if inputs is not None:
        rewritten = write_tosa(graph)
        for got, want in zip(run_reference(rewritten, inputs), run_reference(data, inputs)):
            assert _same_value(got, want)


def test_serializer_graph_details():
    graph = read_tosa(graph_float_shapes()[0].serialize())
    main = graph.main
    assert (main.tensors["scale"].dtype, main.tensors["scale"].shape) == ("shape", (4,))
    assert main.tensors["scale"].data.tolist() == [2, 1, 2, 1]
    ops = {op.outputs[0]: op for op in main.operators}
    assert ops["big"].attrs == {"mode": "BILINEAR"}
    assert ops["mx"].attrs == {"kernel": [3, 3], "stride": [1, 1], "pad": [1, 1, 1, 1],
                               "nan_mode": "IGNORE"}
    assert ops["clamped"].attrs["min_val"] == -0.5 and ops["clamped"].attrs["max_val"] == 100.0

    graph = read_tosa(graph_control_flow()[0].serialize())
    assert [r.name for r in graph.regions] == ["main", "then", "else", "cond", "body"]
    cond_if = next(op for op in graph.main.operators if op.op == "COND_IF")
    assert cond_if.attrs == {"then_graph": "then", "else_graph": "else"}
    assert graph.block(cond_if.attrs["else_graph"]).operators[0].op == "SUB"
    loop = next(op for op in graph.main.operators if op.op == "WHILE_LOOP")
    assert loop.attrs == {"cond_graph": "cond", "body_graph": "body"}
    assert graph.main.tensors["c"].shape == ()

    graph = read_tosa(graph_attribute_zoo()[0].serialize())
    assert graph.version == (1, 1, 0, True)
    main = graph.main
    ops = {op.op: op for op in main.operators}
    assert ops["CUSTOM"].attrs["operator_name"] == "my_op"
    assert ops["CUSTOM"].attrs["implementation_attrs"].tolist() == [1, 2, 255, 0]
    assert ops["RESCALE"].attrs["rounding_mode"] == "DOUBLE_ROUND"
    assert ops["RESCALE"].attrs["input_unsigned"] is True
    assert ops["TRANSPOSE_CONV2D"].attrs["out_pad"] == [0, 1, 0, 1]
    assert ops["ARGMAX"].attrs == {"axis": 2, "nan_mode": "IGNORE"}
    assert ops["DIM"].attrs == {"axis": 3}
    state = main.tensors["state"]
    assert state.variable and state.variable_name == "counter"
    assert main.tensors["bf"].data.tolist() == [1.5, -2.25, float(np.float32(ml_dtypes.bfloat16(3e38)))]

    graph = read_tosa(graph_bool_int16()[0].serialize(), source="b.tosa")
    shift = next(op for op in graph.main.operators if op.op == "ARITHMETIC_RIGHT_SHIFT")
    assert shift.attrs == {"round": True}
    assert shift.location == 'b.tosa:main/main#4 loc("model.mlir":12:3)'


def test_tosa_opt_written_file(tmp_path):
    """The MLIR serialiser (tosa-opt, as used after tosa-converter-for-tflite) writes the
    slice differently: its own tensor names, MLIR locations, data padded to 8 bytes."""
    tosa_opt = FBS.parent / "tosa-opt"
    mlir = tmp_path / "slice.mlir"
    (tmp_path / "empty.mlir").write_text("module {}\n")
    subprocess.run([str(tosa_opt), f"--tosa-deserialize=tosa-flatbuffer-filename={SLICE_TOSA}",
                    str(tmp_path / "empty.mlir"), "-o", str(mlir)], check=True, capture_output=True)
    out = tmp_path / "slice_mlir.tosa"
    subprocess.run([str(tosa_opt), f"--tosa-serialize=tosa-flatbuffer-filename={out}", str(mlir),
                    "-o", os.devnull], check=True, capture_output=True)
    data = out.read_bytes()
    graph = assert_round_trip(data, tmp_path)
    original = read_tosa(SLICE_TOSA).main
    main = graph.main
    assert [op.op for op in main.operators] == [op.op for op in original.operators]
    for ours, theirs in zip(main.operators, original.operators):
        assert ours.attrs == theirs.attrs
        assert "slice.mlir" in ours.location  # MLIR location text kept after the position
    consts = [t.data for t in main.tensors.values() if t.is_const]
    assert len(consts) == 8
    for got, want in zip(consts, [t.data for t in original.tensors.values() if t.is_const]):
        assert _same_value(got, want)
    x = np.load(SLICE_DIR / "input.npz")["input"]
    assert _same_value(run_reference(write_tosa(graph), [x])[0],
                       np.load(SLICE_DIR / "expected.npz")["output"])


def test_python_serializer_int4_full_range(tmp_path):
    """The deprecated pure-Python serializer (another official writer); int4 -8 packs too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from serializer import tosa_serializer as pts
    ser = pts.TosaSerializer(str(tmp_path))
    values = np.array([-8, 7, 0, -1, 5], np.int8)
    t4 = ser.addConst([5], pts.DType.INT4, values)
    t48 = ser.addConst([2], pts.DType.INT48, np.array([-(1 << 47), (1 << 47) - 1]))
    ser.addOutputTensor(t4)
    ser.addOutputTensor(t48)
    data = bytes(ser.serialize())
    graph = assert_round_trip(data, tmp_path)
    assert graph.version == (1, 1, 0, True)
    assert _same_value(graph.main.tensors[t4.name].data, values)
    assert graph.main.tensors[t48.name].data.tolist() == [-(1 << 47), (1 << 47) - 1]


# ---------------------------------------------------------------------------------------
# Constants without CONST operators; the software version
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", SERIALIZER_GRAPHS, ids=lambda f: f.__name__)
def test_const_ops_added_where_missing(make, tmp_path):
    """Official graphs with their CONST / CONST_SHAPE operators removed (as frontends build
    graphs): written, they get back exactly those operators (placed first, in order of
    use), load in the official loader and give the original file's outputs."""
    builder, inputs = make()
    data = builder.serialize()
    stripped, removed = strip_const_ops(read_tosa(data, source="orig.tosa"), "orig.tosa")
    assert sum(map(len, removed.values())) >= 2
    written = write_tosa(stripped)
    back = read_tosa(written, source="orig.tosa")
    assert_same_but_added_const_ops(stripped, back, removed, "orig.tosa")
    assert write_tosa(back) == written
    official_view(written, tmp_path)  # the official loader accepts it
    if inputs is not None:
        for got, want in zip(run_reference(written, inputs), run_reference(data, inputs)):
            assert _same_value(got, want)


def test_const_op_placement_and_exclusions():
    """Which constants get an operator, in which order; the file runs on the official
    model.  Constants already produced, block inputs and variables get none."""
    rng = np.random.default_rng(7)
    block = Block("main", inputs=["x"], outputs=["y", "k"])
    x = rng.integers(-1000, 1000, (2, 3), dtype=np.int32)
    values = {"k": np.array([7, 8, 9], np.int32), "a": rng.integers(-9, 9, (1, 3), dtype=np.int32),
              "b": rng.integers(-9, 9, (2, 3), dtype=np.int32), "pre": np.array([[100]], np.int32)}
    block.add_tensor(Tensor("x", (2, 3), "int32"))
    for name, v in values.items():  # declared k, a, b, pre; first used b, a, pre; k unused
        block.add_tensor(Tensor(name, v.shape, "int32", v))
    block.add_tensor(Tensor("shp", (2,), "shape", np.array([3, 2])))
    for name in ("t1", "t2", "t3"):
        block.add_tensor(Tensor(name, (2, 3), "int32"))
    block.add_tensor(Tensor("y", (3, 2), "int32"))
    block.operators = [
        Operator("CONST", [], ["pre"]),
        Operator("ADD", ["x", "b"], ["t1"]),
        Operator("ADD", ["t1", "a"], ["t2"]),
        Operator("ADD", ["t2", "pre"], ["t3"]),
        Operator("RESHAPE", ["t3", "shp"], ["y"]),
    ]
    data = write_tosa(Graph.single_block(block))
    ops = read_tosa(data).main.operators
    assert [(op.op, op.outputs) for op in ops[:4]] == [
        ("CONST", ["b"]), ("CONST", ["a"]), ("CONST_SHAPE", ["shp"]), ("CONST", ["k"])]
    assert [op.op for op in ops[4:]] == ["CONST", "ADD", "ADD", "ADD", "RESHAPE"]
    y, k = run_reference(data, [x])
    assert _same_value(y, (x + values["b"] + values["a"] + 100).reshape(3, 2))
    assert _same_value(k, values["k"])

    # A block input and a variable carrying data: the reference model fills them itself.
    block = Block("main", inputs=["x"], outputs=["y"])
    block.add_tensor(Tensor("x", (2,), "int32", np.array([1, 2], np.int32)))
    block.add_tensor(Tensor("v", (2,), "int32", np.array([3, 4], np.int32), variable=True,
                            variable_name="v"))
    block.add_tensor(Tensor("y", (2,), "int32"))
    block.operators = [Operator("ADD", ["x", "v"], ["y"])]
    assert [op.op for op in read_tosa(write_tosa(Graph.single_block(block))).main.operators] == ["ADD"]


def test_software_version_as_official_serializer(tmp_path):
    """The file records the serialisation-library version and compatibility as the
    official serializer does; the official loader reads it without the warning about
    files that lack it."""
    data = write_tosa(_slice_graph_in_ir(False))
    theirs = ts.TosaSerializer("")  # its own release: what it writes and can read
    official = tmp_path / "official.tosa"
    official.write_bytes(graph_int4_conv()[0].serialize())
    assert theirs.loadTosaFlatbuffer(str(official))
    want_compat = theirs.getSerializationCompatibility()
    ours = tmp_path / "ours.tosa"
    ours.write_bytes(data)
    loader = ts.TosaSerializer("")
    assert loader.loadTosaFlatbuffer(str(ours))
    assert loader.getSoftwareVersion().to_string() == ts.TosaSerializer("").getSoftwareVersion().to_string()
    got_compat = loader.getSerializationCompatibility()
    assert got_compat.min_reader_version.to_string() == want_compat.min_reader_version.to_string()
    assert list(got_compat.features) == list(want_compat.features)
    status, _, log = oracle._run_binding(data, [np.load(SLICE_DIR / "input.npz")["input"]], "EIGHTK")
    assert status == "VALID" and "SerLib" not in log, log


# ---------------------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------------------
def _raw_graph(**tensor_overrides) -> dict:
    """A minimal graph as raw table values, for crafting bad files."""
    tensor = {"name": "t", "shape": [2, 2], "type": 3, "data": bytes(4)}
    tensor.update(tensor_overrides)
    op = {"op": schema.OP_CODES["CONST"], "attribute": (schema.OP_CODES["CONST"], {}),
          "inputs": [], "outputs": ["t"]}
    block = {"name": "main", "operators": [op], "tensors": [tensor], "inputs": [], "outputs": ["t"]}
    return {"version": {"_major": 1, "_minor": 0, "_patch": 0, "_draft": False},
            "regions": [{"name": "main", "blocks": [block]}]}


def _raw_bytes(values: dict) -> bytes:
    import flatbuffers
    builder = flatbuffers.Builder(1024)
    builder.Finish(build_table(builder, "TosaGraph", values), file_identifier=b"TOSA")
    return bytes(builder.Output())


def _expect_invalid(data, match: str, source="bad.tosa"):
    with pytest.raises(InvalidInput, match=match) as info:
        read_tosa(data, source=source)
    message = str(info.value)
    assert "\n" not in message and message.startswith(source)
    return message


def test_raw_graph_helper_reads():
    graph = read_tosa(_raw_bytes(_raw_graph()))
    assert graph.main.tensors["t"].data.tolist() == [[0, 0], [0, 0]]


def test_malformed_files():
    good = SLICE_TOSA.read_bytes()
    _expect_invalid(b"", "too short")
    _expect_invalid(good[:6], "too short")
    _expect_invalid(b"\x08\x00\x00\x00TFL3" + good[8:], "wrong file identifier")
    _expect_invalid(bytes(range(256)) * 4, "wrong file identifier|outside|bad vtable")
    _expect_invalid(good[:len(good) // 2], "outside")
    _expect_invalid(b"\xff\xff\xff\x7fTOSA" + good[8:], "outside")  # root offset far out
    root = int.from_bytes(good[:4], "little")
    _expect_invalid(good[:root] + (-(1 << 30)).to_bytes(4, "little", signed=True) + good[root + 4:],
                    "outside")  # vtable offset far out
    _expect_invalid(_raw_bytes(_raw_graph(data=bytes(3))), r"3 bytes of data.*needs 4")
    _expect_invalid(_raw_bytes(_raw_graph(type=99)), "unknown element type code 99")
    _expect_invalid(_raw_bytes(_raw_graph(shape=[2, -5])), "negative dimension")
    _expect_invalid(_raw_bytes(_raw_graph(shape=[-1, 2])), "unknown shape")
    _expect_invalid(_raw_bytes(_raw_graph(name="")), "no name")
    raw = _raw_graph()
    raw["regions"][0]["blocks"][0]["operators"][0]["op"] = 250
    _expect_invalid(_raw_bytes(raw), "unknown operator code 250")
    raw = _raw_graph()
    raw["regions"][0]["blocks"][0]["operators"][0]["attribute"] = (schema.OP_CODES["CLAMP"], {})
    _expect_invalid(_raw_bytes(raw), "attribute type")
    raw = _raw_graph()
    raw["regions"][0]["blocks"][0]["operators"][0]["outputs"] = ["nope"]
    _expect_invalid(_raw_bytes(raw), "undeclared tensor 'nope'")
    raw = _raw_graph()
    raw["regions"][0]["blocks"][0]["tensors"] *= 2
    _expect_invalid(_raw_bytes(raw), "declared twice")
    raw = _raw_graph()
    raw["regions"][0]["blocks"][0]["operators"][0].update(
        op=schema.OP_CODES["COND_IF"], attribute=(schema.OP_CODES["COND_IF"],
                                                  {"then_graph": "x", "else_graph": "main"}))
    _expect_invalid(_raw_bytes(raw), "then_graph names no region")
    raw = _raw_graph()
    del raw["version"]
    _expect_invalid(_raw_bytes(raw), "version")
    with pytest.raises(InvalidInput, match="cannot read") as info:
        read_tosa(SLICE_DIR / "does_not_exist.tosa")
    assert str(SLICE_DIR / "does_not_exist.tosa") in str(info.value)


def test_unsupported_files():
    with pytest.raises(Unsupported, match="FP6E2M3"):        # fp8 is read (tests/test_tosa_fp8.py)
        read_tosa(_raw_bytes(_raw_graph(type=13, data=None)))
    with pytest.raises(Unsupported, match="unranked"):
        read_tosa(_raw_bytes(_raw_graph(is_unranked=True)))


def test_fuzzed_files_read_or_fail_cleanly():
    """Truncations and byte flips: each either reads (and writes) or raises one clean error."""
    good = SLICE_TOSA.read_bytes()
    rng = np.random.default_rng(1234)
    cases = [good[:n] for n in range(0, len(good), 3)]
    for _ in range(2000):
        buf = bytearray(good)
        for pos in rng.integers(0, len(buf), rng.integers(1, 5)):
            buf[pos] = int(rng.integers(0, 256))
        cases.append(bytes(buf))
    outcomes = {"read": 0, "invalid": 0, "unsupported": 0}
    for data in cases:
        try:
            graph = read_tosa(data, source="fuzz.tosa")
        except (InvalidInput, Unsupported) as err:
            # Unsupported: a flip turned an element type into a valid but unsupported one.
            assert "\n" not in str(err) and str(err).startswith("fuzz.tosa")
            outcomes["invalid" if isinstance(err, InvalidInput) else "unsupported"] += 1
            continue
        outcomes["read"] += 1
        try:
            write_tosa(graph)
        except (InvalidInput, Unsupported):
            pass
    assert outcomes["invalid"] > 1000 and outcomes["read"] > 100, outcomes


# ---------------------------------------------------------------------------------------
# Writing errors
# ---------------------------------------------------------------------------------------
def _one_op_graph(op: Operator, *tensors: Tensor) -> Graph:
    block = Block("main", outputs=[op.outputs[0]])
    for tensor in tensors:
        block.add_tensor(tensor)
    block.operators.append(op)
    return Graph.single_block(block)


def test_write_errors():
    x = Tensor("x", (2,), "int8")
    y = Tensor("y", (2,), "int8")
    with pytest.raises(Unsupported, match="FULLY_CONNECTED"):
        write_tosa(_one_op_graph(Operator("FULLY_CONNECTED", ["x"], ["y"]), x, y))
    with pytest.raises(Unsupported, match="uint8"):
        write_tosa(_one_op_graph(Operator("IDENTITY", ["x"], ["y"]), x, Tensor("y", (2,), "uint8")))
    with pytest.raises(InvalidInput, match="input_zp"):
        write_tosa(_one_op_graph(Operator("NEGATE", ["x"], ["y"], {"input_zp": 0}), x, y))
    with pytest.raises(InvalidInput, match="min_val: CLAMP needs a value"):
        write_tosa(_one_op_graph(Operator("CLAMP", ["x"], ["y"], {"max_val": 3}), x, y))
    with pytest.raises(InvalidInput, match="rounding_mode"):
        write_tosa(_one_op_graph(Operator("RESCALE", ["x"], ["y"], {"rounding_mode": "UP"}), x, y))
    with pytest.raises(InvalidInput, match="int4 range"):
        write_tosa(_one_op_graph(Operator("CONST", [], ["y"]),
                                 Tensor("y", (2,), "int4", np.array([3, 9], np.int8))))
    with pytest.raises(InvalidInput, match="3 values for shape"):
        write_tosa(_one_op_graph(Operator("CONST", [], ["y"]),
                                 Tensor("y", (2, 2), "int8", np.zeros(3, np.int8))))
    with pytest.raises(InvalidInput, match="bf16"):
        write_tosa(_one_op_graph(Operator("CONST", [], ["y"]),
                                 Tensor("y", (1,), "bf16", np.array([0.1], np.float32))))


def test_reshape_to_rank0_from_the_official_generator():
    """The official serialiser writes a rank-0 shape constant (RESHAPE to a scalar) with 8
    zero bytes of data: the reader takes it (it once refused the file), and the graph runs
    on the reference interpreter and the NPU as the official reference model recorded."""
    from compiler.driver import compile_graph
    from isa.config import NpuConfig
    from npu_check import compare_on_isa
    from sim.reference import run_graph

    folder = Path(__file__).parent / "fixtures" / "tosa" / "official"
    stem = "reshape_0_i8_perm4_rank0_out0"
    graph = read_tosa((folder / f"{stem}.tosa").read_bytes())
    shape_const = next(t for t in graph.main.tensors.values() if t.dtype == "shape")
    assert shape_const.shape == (0,) and shape_const.data.shape == (0,)
    x = np.load(folder / f"{stem}.input-0.npy")
    expected = np.load(folder / f"{stem}.result-0.npy")
    inputs = {graph.main.inputs[0]: x}
    got = run_graph(graph, inputs)[graph.main.outputs[0]]
    np.testing.assert_array_equal(got, expected)
    config = NpuConfig()
    compare_on_isa(compile_graph(graph, config), graph, inputs, config)
