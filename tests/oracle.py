"""Test oracle: build TOSA 1.0 graphs with the official serializer and run the official
reference model on them.

Test-only (tosa-tools is never imported by product code).  Typical use::

    b = GraphBuilder()
    x = b.input([1, 8, 8, 3], "int8")
    w = b.const(weights, "int8")
    ...
    y = b.output([1, 8, 8, 4], "int32")
    b.op("CONV2D", [x, w, bias, izp, wzp], [y], pad=[0, 0, 0, 0], stride=[1, 1],
         dilation=[1, 1], acc_type="int32")
    ref = run_reference(b, {x: x_data})          # OracleResult
    ref.status                                     # "VALID" | "ERROR" | "UNPREDICTABLE"
    ref.outputs[y]                                 # numpy array (when VALID)
    graph = load_graph(ref.tosa)                   # our IR of the *same* bytes

    check_against_reference(b, {x: x_data}, expect="VALID", forms=("1.0", "draft"))

:func:`check_against_reference` runs the oracle and then our interpreter on the graph read
back from the very same bytes (and, for "draft", on :func:`draft_form` of it: operands
moved to attributes as the draft spec has them), and asserts equal statuses and outputs.

The reference model runs out of process so that a crash in it cannot take pytest down:

* ``"binding"`` backend: a persistent worker process calling the Python binding
  ``tosa_reference_model.run`` (about 0.1 ms per graph).  The binding cannot take or
  return int48/int4 tensors and rejects illegal graphs with ``ValueError``, which is
  reported here as status ``"ERROR"`` (the CLI prints ``Graph result: ERROR`` for the same
  graphs).
* ``"cli"`` backend: ``tosa_reference_model --test_desc`` in a temporary folder (about
  50 ms per graph), used automatically whenever an input or output is int48 or int4.

Both run with ``TOSA_MODEL_NO_BACKTRACE=1`` (otherwise every rejected graph attaches gdb).
Known oracle limitations (tosa-tools 2026.8):

* it does not check the accumulator REQUIREs of the convolutions and matrix products (it
  wraps silently), so tests of those compare with the spec text, not with this oracle;
* it evaluates RESCALE INEXACT_ROUND in floating point (see sim/tosa_helpers.py);
* it aborts (``OracleCrash`` here) instead of reporting ERROR on some ill-typed graphs,
  e.g. an int16 RESCALE multiplier with scale32.
"""
from __future__ import annotations

import atexit
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import tosa_serializer as ts

# Our element-type names (tosa_ir.graph.DTYPES) -> serializer DType.
TS_DTYPES = {
    "bool": ts.DType.BOOL,
    "int4": ts.DType.INT4,
    "int8": ts.DType.INT8,
    "int16": ts.DType.INT16,
    "int32": ts.DType.INT32,
    "int48": ts.DType.INT48,
    "int64": ts.DType.INT64,
    "shape": ts.DType.SHAPE,
    "fp16": ts.DType.FP16,
    "bf16": ts.DType.BF16,
    "fp32": ts.DType.FP32,
}
# numpy type the serializer and the .npy files use for each element type.
NP_DTYPES = {
    "bool": np.bool_, "int4": np.int8, "int8": np.int8, "int16": np.int16,
    "int32": np.int32, "int48": np.int64, "int64": np.int64, "shape": np.int64,
    "fp16": np.float16, "fp32": np.float32,
}
# Types the Python binding cannot pass in or out.
_CLI_ONLY = {"int48", "int4"}

STATUSES = ("VALID", "ERROR", "UNPREDICTABLE")

_TOOLS_BIN = Path(sys.executable).parent


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


# Op name -> attribute builder method of TosaSerializerAttribute, matched by normalised
# name ("DEPTHWISE_CONV2D" -> "DepthwiseConv2dAttribute").
_ATTR_METHODS = {
    _norm(m[: -len("Attribute")]): m
    for m in dir(ts.TosaSerializerAttribute)
    if m.endswith("Attribute") and not m.startswith("_")
}


def _attr_signature(method: str) -> list[tuple[str, str]]:
    """(parameter name, annotation text) of an attribute builder, read from its docstring."""
    doc = getattr(ts.TosaSerializerAttribute, method).__doc__.split("\n")[0]
    params = doc[doc.index("(") + 1: doc.rindex(")")]
    out = []
    # Split on commas that are not inside brackets.
    depth, cur = 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch in "[("
        depth -= ch in "])"
        cur += ch
    out.append(cur)
    sig = []
    for p in out[1:]:  # skip self
        name, _, ann = p.strip().partition(":")
        sig.append((name.strip(), ann.strip()))
    return sig


_ATTR_DEFAULTS = {"local_bound": False, "nan_mode": "PROPAGATE"}


def _convert_attr_value(value: Any, annotation: str) -> Any:
    """Our spelling of an attribute value -> what the serializer binding wants."""
    if annotation.endswith("DType"):
        return TS_DTYPES[value] if isinstance(value, str) else value
    for enum_name in ("RoundingMode", "NanPropagationMode", "ResizeMode", "BlockSize"):
        if annotation.endswith(enum_name) and isinstance(value, str):
            return getattr(getattr(ts, enum_name), value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def make_attribute(op: str, **kwargs) -> ts.TosaSerializerAttribute:
    """Build the serializer attribute of ``op`` from keyword arguments named as the
    serializer names them (``pad=``, ``rounding_mode="DOUBLE_ROUND"``, ``acc_type="int32"``)."""
    attr = ts.TosaSerializerAttribute()
    method = _ATTR_METHODS.get(_norm(op))
    if method is None:
        if kwargs:
            raise TypeError(f"{op} takes no attributes, got {sorted(kwargs)}")
        return attr
    args = []
    for name, ann in _attr_signature(method):
        if name in kwargs:
            value = kwargs.pop(name)
        elif name in _ATTR_DEFAULTS:
            value = _ATTR_DEFAULTS[name]
        else:
            raise TypeError(f"{op}: missing attribute {name!r}")
        args.append(_convert_attr_value(value, ann))
    if kwargs:
        raise TypeError(f"{op}: unknown attributes {sorted(kwargs)}")
    getattr(attr, method)(*args)
    return attr


def clamp_bytes(value: int, dtype: str) -> list[int]:
    """CLAMP min_val/max_val as the 1.0 flatbuffer stores them: little-endian bytes."""
    np_t = NP_DTYPES[dtype]
    return list(np.array([value], dtype=np_t).tobytes())


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "input" | "const" | "output" | "intermediate"
    data: np.ndarray | None = None


class GraphBuilder:
    """A TOSA 1.0 graph built with the official serializer (``tosa_serializer``).

    Tensor names are the serializer's own (``input-0``, ``const-0``, ``result-0``,
    ``layer-0``): they are also the names in the serialized file.  ``ser`` is the
    underlying ``TosaSerializer`` for anything not wrapped here (regions for control flow:
    see :meth:`start_region`).
    """

    def __init__(self, version: tuple[int, int, int] = (1, 0, 0)):
        self.ser = ts.TosaSerializer(
            "", targetMajor=version[0], targetMinor=version[1], targetPatch=version[2],
            targetDraft=False)
        self.tensors: dict[str, TensorInfo] = {}
        self._objs: dict[str, Any] = {}
        self.inputs: list[str] = []    # placeholders of the main block, in order
        self.outputs: list[str] = []   # outputs of the main block, in order
        self._in_main = True

    # -- tensors -------------------------------------------------------------------
    def _record(self, obj, shape, dtype, kind, data=None) -> str:
        name = obj.name
        self.tensors[name] = TensorInfo(name, tuple(int(d) for d in shape), dtype, kind, data)
        self._objs[name] = obj
        return name

    def input(self, shape: Sequence[int], dtype: str) -> str:
        """A placeholder (graph input); returns its name."""
        obj = self.ser.addPlaceholder(list(shape), TS_DTYPES[dtype], None)
        if self._in_main:
            self.inputs.append(obj.name)
        return self._record(obj, shape, dtype, "input")

    def const(self, values, dtype: str, shape: Sequence[int] | None = None) -> str:
        """A constant tensor; ``values`` array-like (shape taken from it unless given)."""
        arr = np.asarray(values)
        if shape is None:
            shape = arr.shape
        arr = arr.astype(NP_DTYPES[dtype]).reshape(shape)
        obj = self.ser.addConst(list(shape), TS_DTYPES[dtype], arr)
        return self._record(obj, shape, dtype, "const", arr)

    def output(self, shape: Sequence[int], dtype: str) -> str:
        obj = self.ser.addOutput(list(shape), TS_DTYPES[dtype])
        if self._in_main:
            self.outputs.append(obj.name)
        return self._record(obj, shape, dtype, "output")

    def intermediate(self, shape: Sequence[int], dtype: str) -> str:
        obj = self.ser.addIntermediate(list(shape), TS_DTYPES[dtype])
        return self._record(obj, shape, dtype, "intermediate")

    def tensor_object(self, name: str):
        """The serializer's tensor object (for ``ser.addInputTensor`` in sub-blocks)."""
        return self._objs[name]

    # -- operators -----------------------------------------------------------------
    def op(self, op: str, inputs: Sequence[str], outputs: Sequence[str],
           attr: ts.TosaSerializerAttribute | None = None, **kwargs) -> None:
        """Add operator ``op`` (spec name); attributes by keyword or a prebuilt ``attr``.

        CLAMP's ``min_val``/``max_val`` may be given as numbers: they are encoded as the
        bytes of the input's type, as the flatbuffer stores them.
        """
        if op == "CLAMP":
            dtype = self.tensors[inputs[0]].dtype
            for key in ("min_val", "max_val"):
                if isinstance(kwargs.get(key), (int, np.integer)):
                    kwargs[key] = clamp_bytes(int(kwargs[key]), dtype)
        if attr is None:
            attr = make_attribute(op, **kwargs)
        elif kwargs:
            raise TypeError("give either attr or keyword attributes")
        self.ser.addOperator(getattr(ts.Op, op), list(inputs), list(outputs), attr)

    # -- control flow ----------------------------------------------------------------
    def start_region(self, name: str) -> None:
        """Start a new region holding one basic block, both called ``name``.

        Tensors and operators added afterwards go to it.  Declare its inputs with
        ``b.ser.addInputTensor(b.ser.addIntermediate(shape, dtype))`` or
        :meth:`block_input`, and its outputs with :meth:`output`.
        """
        prefix = self.ser.regions[0].pathPrefix if self.ser.regions else ""
        self.ser.startRegion(name, prefix)
        self.ser.addBasicBlock(name)
        self._in_main = False

    def block_input(self, shape: Sequence[int], dtype: str) -> str:
        """An input of the current (non-main) block."""
        obj = self.ser.addIntermediate(list(shape), TS_DTYPES[dtype])
        self.ser.addInputTensor(obj)
        return self._record(obj, shape, dtype, "input")

    # -- serialisation ---------------------------------------------------------------
    def serialize(self) -> bytes:
        return bytes(self.ser.serialize())

    def desc(self, tosa_file: str = "graph.tosa") -> dict:
        return json.loads(self.ser.writeJson(tosa_file))


@dataclass
class OracleResult:
    """What the reference model said about one graph.

    ``status`` is "VALID", "ERROR" or "UNPREDICTABLE"; ``outputs`` maps output names to
    arrays (of ``NP_DTYPES`` of their type) when VALID; ``tosa`` is the serialized graph
    that was run; ``log`` the model's messages (for assertion messages).
    """

    status: str
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    tosa: bytes = b""
    log: str = ""
    backend: str = ""

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]


class OracleCrash(RuntimeError):
    """The reference model process died (segfault, abort) on a graph."""


# ---------------------------------------------------------------------------------------
# Binding backend: a persistent worker process.
_WORKER_CODE = r"""
import os, pickle, struct, sys
proto_in = os.fdopen(os.dup(0), "rb")
proto_out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)   # C++ prints to stdout: keep it off the protocol pipe
import numpy as np
import tosa_reference_model as trm
def read():
    head = proto_in.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(proto_in.read(n))
def write(obj):
    data = pickle.dumps(obj)
    proto_out.write(struct.pack("<Q", len(data)) + data)
    proto_out.flush()
while True:
    req = read()
    if req is None:
        break
    tosa, inputs, level = req
    try:
        outs, status = trm.run(tosa, inputs, tosa_level=level)
        write(("ok", status.name, [np.array(o) for o in outs]))
    except ValueError as e:
        write(("valueerror", str(e), []))
    except Exception as e:
        write(("exception", repr(e), []))
"""


class _Worker:
    def __init__(self):
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_CODE], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, env=env)

    def log_tail(self, start: int) -> str:
        self.log.seek(start)
        return self.log.read().decode(errors="replace")[-4000:]

    def call(self, tosa: bytes, inputs: list[np.ndarray], level: str):
        start = self.log.seek(0, os.SEEK_END)
        data = pickle.dumps((tosa, inputs, level))
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
            head = self.proc.stdout.read(8)
            if len(head) < 8:
                raise BrokenPipeError
            (n,) = struct.unpack("<Q", head)
            reply = pickle.loads(self.proc.stdout.read(n))
        except (BrokenPipeError, OSError, EOFError) as e:
            self.proc.wait()
            raise OracleCrash(f"reference model worker died (exit {self.proc.returncode}):\n"
                              f"{self.log_tail(start)}") from e
        return reply, self.log_tail(start)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


_worker: _Worker | None = None
_worker_lock = threading.Lock()


@atexit.register
def _close_worker() -> None:
    if _worker is not None:
        _worker.close()


def _run_binding(tosa: bytes, inputs: list[np.ndarray], level: str) -> tuple[str, list, str]:
    global _worker
    with _worker_lock:
        if _worker is None or _worker.proc.poll() is not None:
            _worker = _Worker()
        try:
            reply, log = _worker.call(tosa, inputs, level)
        except OracleCrash:
            _worker = None
            raise
    kind, payload, outs = reply
    if kind == "ok":
        status = {"TOSA_VALID": "VALID", "TOSA_ERROR": "ERROR",
                  "TOSA_UNPREDICTABLE": "UNPREDICTABLE"}.get(payload, payload)
        return status, outs, log
    if kind == "valueerror" and "Invalid TOSA graph" in payload:
        return "ERROR", [], log + payload
    raise RuntimeError(f"reference model binding failed: {payload}\n{log}")


# ---------------------------------------------------------------------------------------
# CLI backend.
def _run_cli(tosa: bytes, desc: dict, inputs: list[np.ndarray], level: str,
             timeout: float = 120) -> tuple[str, list, str]:
    with tempfile.TemporaryDirectory(prefix="tosa_oracle_") as tmp:
        d = Path(tmp)
        (d / desc["tosa_file"]).write_bytes(tosa)
        for fname, arr in zip(desc["ifm_file"], inputs):
            np.save(d / fname, arr)
        (d / "desc.json").write_text(json.dumps(desc))
        env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")
        cmd = [str(_TOOLS_BIN / "tosa_reference_model"), "--test_desc", str(d / "desc.json"),
               "--tosa_level", level]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        log = (p.stdout + p.stderr)[-4000:]
        m = re.search(r"Graph result: (\w+)", p.stdout + p.stderr)
        if m:
            status = m.group(1)
        elif p.returncode == 0:
            status = "VALID"
        else:
            raise OracleCrash(f"tosa_reference_model exit {p.returncode}:\n{log}")
        outs = []
        if status == "VALID":
            outs = [np.load(d / f) for f in desc["ofm_file"]]
        return status, outs, log


_LEVELS = {"8K": "EIGHTK", "8k": "EIGHTK", "EIGHTK": "EIGHTK", "none": "NONE", "NONE": "NONE"}


def run_reference(builder: GraphBuilder, inputs: dict[str, np.ndarray] | Sequence[np.ndarray],
                  level: str = "8K", backend: str = "auto") -> OracleResult:
    """Run the official reference model on the graph of ``builder``.

    ``inputs`` maps input names to arrays (or lists them in ``builder.inputs`` order);
    arrays are converted to the numpy type of the declared element type.
    ``level`` is "8K" or "none"; ``backend`` "auto", "binding" or "cli".
    """
    names = builder.inputs
    if not isinstance(inputs, dict):
        inputs = dict(zip(names, inputs))
    missing = set(names) - set(inputs)
    if missing:
        raise KeyError(f"no data for graph inputs {sorted(missing)}")
    arrays = [np.ascontiguousarray(
        np.asarray(inputs[n]).astype(NP_DTYPES[builder.tensors[n].dtype])) for n in names]
    tosa = builder.serialize()
    tosa_level = _LEVELS[level]
    types = {builder.tensors[n].dtype for n in names + builder.outputs}
    if backend == "auto":
        backend = "cli" if types & _CLI_ONLY else "binding"
    if backend == "binding":
        status, outs, log = _run_binding(tosa, arrays, tosa_level)
    elif backend == "cli":
        status, outs, log = _run_cli(tosa, builder.desc(), arrays, tosa_level)
    else:
        raise ValueError(f"unknown backend {backend!r}")
    if status not in STATUSES:
        raise RuntimeError(f"unexpected reference model status {status!r}\n{log}")
    outputs = {}
    if status == "VALID":
        for name, arr in zip(builder.outputs, outs):
            info = builder.tensors[name]
            outputs[name] = np.asarray(arr).astype(NP_DTYPES[info.dtype]).reshape(info.shape)
    return OracleResult(status, outputs, tosa, log, backend)


# ---------------------------------------------------------------------------------------
# Our side: read the same bytes into our IR.
def load_graph(tosa: bytes):
    """Our ``tosa_ir.Graph`` for serialized bytes, through ``tosa_ir.tosa_fb.read_tosa``."""
    from tosa_ir import tosa_fb  # written in parallel; tests skip until it exists

    read = tosa_fb.read_tosa
    # read_tosa may take bytes or a path: give it what it asks for.
    try:
        return read(tosa)
    except (TypeError, AttributeError, OSError):
        with tempfile.NamedTemporaryFile(suffix=".tosa", delete=False) as f:
            f.write(tosa)
            path = f.name
        try:
            return read(path)
        finally:
            os.unlink(path)


def have_read_tosa() -> bool:
    try:
        from tosa_ir import tosa_fb  # noqa: F401
        return hasattr(tosa_fb, "read_tosa")
    except ImportError:
        return False


# ---------------------------------------------------------------------------------------
# Comparing our interpreter with the oracle on the same file.
def run_ours(graph, inputs: dict[str, np.ndarray], level: str = "8K"):
    """Our interpreter on ``graph``: ("VALID", {name: array}) or (status, exception)."""
    from sim.reference import run_graph
    from tosa_ir import TosaError, TosaUnpredictable

    try:
        return "VALID", run_graph(graph, inputs, level=level)
    except TosaError as e:
        return "ERROR", e
    except TosaUnpredictable as e:
        return "UNPREDICTABLE", e


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape and the same values (compared as numbers, not dtypes)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        return np.array_equal(a.astype(bool), b.astype(bool))
    return np.array_equal(a.astype(np.int64), b.astype(np.int64))


def check_against_reference(builder: GraphBuilder, inputs: dict[str, np.ndarray] | Sequence,
                            expect: str | None = None, level: str = "8K",
                            forms: Sequence = ("1.0",), label: str = "") -> OracleResult:
    """Run the oracle, then our interpreter on the very same bytes; assert they agree.

    ``expect`` pins the oracle's status as well (so an ERROR_IF test cannot pass because
    both sides accepted the graph).  ``forms`` lists the graph forms to run ours on:
    "1.0" is the file as read by ``tosa_ir.tosa_fb.read_tosa``; "draft" is that graph
    rewritten by :func:`draft_form` (operands moved to attributes).
    """
    if not isinstance(inputs, dict):
        inputs = dict(zip(builder.inputs, inputs))
    ref = run_reference(builder, inputs, level=level)
    where = f"[{label}] " if label else ""
    if expect is not None:
        assert ref.status == expect, (
            f"{where}oracle said {ref.status}, the test expects {expect}\n{ref.log}")
    ours_inputs = {n: np.asarray(v).astype(NP_DTYPES[builder.tensors[n].dtype])
                   for n, v in inputs.items()}
    for form in forms:
        graph = load_graph(ref.tosa)
        if form == "draft":
            graph = draft_form(graph)
        status, ours = run_ours(graph, ours_inputs, level=level)
        assert status == ref.status, (
            f"{where}{form} form: oracle {ref.status}, ours {status}: "
            f"{ours if status != 'VALID' else ''}\n{ref.log}")
        if status == "VALID":
            for name in builder.outputs:
                assert same_values(ours[name], ref.outputs[name]), (
                    f"{where}{form} form: output {name} differs\nours:\n{ours[name]}\n"
                    f"oracle:\n{ref.outputs[name]}")
    return ref


# TOSA 1.0 operand inputs that the draft spec carries as attributes: op -> [(input index,
# attribute name)].  Used to run the draft form of our interpreter against the 1.0 oracle.
_DRAFT_OPERANDS = {
    "CONV2D": [(3, "input_zp"), (4, "weight_zp")],
    "CONV3D": [(3, "input_zp"), (4, "weight_zp")],
    "DEPTHWISE_CONV2D": [(3, "input_zp"), (4, "weight_zp")],
    "TRANSPOSE_CONV2D": [(3, "input_zp"), (4, "weight_zp")],
    "AVG_POOL2D": [(1, "input_zp"), (2, "output_zp")],
    "MATMUL": [(2, "A_zp"), (3, "B_zp")],
    "RESCALE": [(1, "multiplier"), (2, "shift"), (3, "input_zp"), (4, "output_zp")],
    "TABLE": [(1, "table")],
    "NEGATE": [(1, "input1_zp"), (2, "output_zp")],
}
_SCALAR_OPERANDS = {"input_zp", "weight_zp", "output_zp", "A_zp", "B_zp", "input1_zp"}


def draft_form(graph):
    """A copy of a TOSA 1.0 ``graph`` in the draft spec's form.

    Constant operands listed in ``_DRAFT_OPERANDS`` become attributes (zero points as
    ints, multiplier/shift as lists, table as an array); RESCALE's rounding_mode becomes
    ``double_round`` (INEXACT_ROUND has no draft spelling and stays); TRANSPOSE_CONV2D gets
    its ``out_shape``; the graph's version says draft.
    """
    import copy

    g = copy.deepcopy(graph)
    g.version = (0, 80, 0, True)
    for region in g.regions:
        for block in region.blocks:
            for op in block.operators:
                moves = _DRAFT_OPERANDS.get(op.op, [])
                if moves and all(idx < len(op.inputs) and block.tensors[op.inputs[idx]].is_const
                                 for idx, _ in moves):
                    for idx, name in moves:
                        data = block.tensors[op.inputs[idx]].data
                        if name in _SCALAR_OPERANDS:
                            op.attrs[name] = int(np.asarray(data).reshape(-1)[0])
                        elif name == "table":
                            op.attrs[name] = np.asarray(data).copy()
                        else:
                            op.attrs[name] = [int(v) for v in np.asarray(data).reshape(-1)]
                    op.inputs = op.inputs[:min(idx for idx, _ in moves)]
                if op.op == "RESCALE" and op.attrs.get("rounding_mode") in (
                        "SINGLE_ROUND", "DOUBLE_ROUND"):
                    op.attrs["double_round"] = op.attrs.pop("rounding_mode") == "DOUBLE_ROUND"
                if op.op == "TRANSPOSE_CONV2D":
                    op.attrs["out_shape"] = list(block.tensors[op.outputs[0]].shape)
                    op.attrs.pop("acc_type", None)
                if op.op in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "AVG_POOL2D"):
                    op.attrs.pop("acc_type", None)
    return g
