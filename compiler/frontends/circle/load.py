"""Circle / TFLite frontend: ``.circle`` (file identifier ``CIR0``) and ``.tflite``
(``TFL3``) quantized models -> integer TOSA 1.0 graphs, bit-exact with TFLite's reference
kernels (``OpResolverType.BUILTIN_REF``) under :func:`sim.reference.run_graph`.

No TensorFlow at run time: the flatbuffer is decoded by a bounds-checked reader
(:mod:`compiler.frontends.circle.fb`), checked (:mod:`compiler.frontends.circle.model`)
and lowered operator by operator (:mod:`compiler.frontends.circle.lower` and the
``circle_ops_*`` modules).

Supported: int8, uint8 and int16 (16x8) quantized tensors, per-tensor and per-channel
weights, fused NONE / RELU / RELU6 / RELU_N1_TO_1; CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, MAX_POOL_2D, AVERAGE_POOL_2D, ADD, SUB, MUL, CONCATENATION, PAD, PADV2,
RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, MEAN, SOFTMAX, LOGISTIC, TANH (8-bit),
RELU, RELU6, RELU_N1_TO_1, QUANTIZE, and QUANTIZE / DEQUANTIZE at float graph edges
(removed: the TOSA graph takes and returns the quantized tensors; see
:mod:`compiler.frontends.circle.lower` for uint8 inputs and outputs).  Only the main
subgraph (index 0) is lowered.

Errors: a malformed or truncated file raises :class:`InvalidInput` naming the file and
the problem; an unsupported operator or type raises :class:`Unsupported` naming the
operator and its subgraph/operator index.
"""
from __future__ import annotations

import struct
from pathlib import Path

from compiler.frontends.circle import ops_misc as circle_ops_misc

from compiler.frontends.circle import ops_nn as circle_ops_nn
from compiler.frontends.circle.fb import Malformed, decode_model, file_kind
from compiler.frontends.circle.lower import ACT_TYPES, lower_subgraph
from compiler.frontends.circle.model import CModel, check_model
from tosa_ir import Graph, Region
from tosa_ir.errors import InvalidInput, NpuError, Unsupported

__all__ = ["load_circle", "read_circle_model", "circle_io_info", "HANDLERS"]

HANDLERS = {**circle_ops_nn.HANDLERS, **circle_ops_misc.HANDLERS}


def _read(data, source: str | None) -> tuple[bytes, str]:
    if isinstance(data, (str, Path)):
        src = source or str(data)
        try:
            return Path(data).read_bytes(), src
        except OSError as err:
            raise InvalidInput(f"{src}: cannot read: {err.strerror or err}") from None
    return bytes(data), source or "<memory>"


def read_circle_model(data, source: str | None = None) -> CModel:
    """Decode and check a .tflite/.circle file (path or bytes) without lowering it."""
    buf, src = _read(data, source)
    try:
        raw = decode_model(buf)
        return check_model(raw, src, file_kind(buf), buf)
    except NpuError:
        raise
    except (Malformed, struct.error, IndexError, ValueError, KeyError, OverflowError,
            TypeError, UnicodeDecodeError, RecursionError, MemoryError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InvalidInput(f"{src}: malformed {file_kind(buf) or 'TFLite/Circle'} "
                           f"flatbuffer: {message}") from None


def load_circle(path, source: str | None = None) -> Graph:
    """Read a quantized .circle or .tflite model as an integer TOSA 1.0 graph.

    Parameters
    ----------
    path
        File path (or the file's bytes).
    source
        Name for messages and ``Graph.source`` (defaults to the path).

    Raises
    ------
    InvalidInput
        Unreadable, malformed or truncated file, or an inconsistent model.
    Unsupported
        Operators, types or quantization this frontend does not lower.
    """
    model = read_circle_model(path, source)
    try:
        block = lower_subgraph(model.subgraphs[0], model.source, HANDLERS)
    except NpuError as err:
        if type(err) in (InvalidInput, Unsupported) and model.source not in str(err):
            raise type(err)(f"{model.source}: {err}") from None     # e.g. a tensor past the level
        raise
    except (ValueError, IndexError, KeyError, OverflowError, TypeError) as err:
        # Inconsistent shapes or parameters that slipped past the checks above.
        raise InvalidInput(f"{model.source}: inconsistent model: {err}") from None
    extensions = ["EXT-DOUBLEROUND"]
    if any(t.dtype in ("int16", "int48") for t in block.tensors.values()):
        extensions.append("EXT-INT16")
    return Graph(regions=[Region("main", [block])], version=(1, 0, 0, False),
                 profiles=["PRO-INT"], extensions=extensions, source=model.source)


def circle_io_info(path) -> dict:
    """Quantization of the lowered graph's inputs and outputs, by TOSA tensor name:
    ``{"inputs": {name: {"scale", "zero_point", "type"}}, "outputs": {...}}`` where
    ``type`` is the TFLite type (``INT8``, ``UINT8``: passed as int8 bit patterns, ...).
    """
    model = read_circle_model(path)
    sg = model.subgraphs[0]
    graph = load_circle(path)
    info = {"inputs": {}, "outputs": {}}
    tensors = {t.name: t for t in sg.tensors if t.type in ACT_TYPES and t.quant is not None}
    for key, names in (("inputs", graph.main.inputs), ("outputs", graph.main.outputs)):
        for name in names:
            t = tensors.get(name)
            if t is not None:
                info[key][name] = {"scale": t.quant.s, "zero_point": t.quant.zp,
                                   "type": t.type}
    return info
