"""NNEF frontend: an NNEF model -> TOSA graph.

Input: a ``graph.nnef`` file, a folder (``graph.nnef``, ``.dat`` files, optional
``graph.quant``) or a tar container (``.tar``, ``.tgz``, ...).  The Khronos ``nnef`` parser
handles the whole syntax (:mod:`.nnef_parse`); data files are decoded in every encoding of
the spec (:mod:`.nnef_dat`); operations map to TOSA (:mod:`.nnef_convert`,
:mod:`.nnef_ops`).

* Without graph.quant the result is a float TOSA 1.0 graph (fp32 tensors) with the NNEF
  graph's inputs and outputs (NCHW, as NNEF declares them); quantize it with
  :func:`compiler.graph.quantize.quantize_graph` and a calibration set.
* With graph.quant the result is the int8 TOSA 1.0 graph directly: the parameters of
  graph.quant are used as given (activations per tensor, weights per output channel),
  the rest is :mod:`compiler.graph.quantize`'s lowering.  A float-only output tail (softmax) is
  left out and the graph ends at the logits, unless graph.quant gives the output TFLite's
  softmax parameters (int8, scale 1/256, zero point -128, as nnef-tools writes a converted
  TFLite classifier): then the graph ends with TFLite's int8 softmax
  (compiler/frontends/common/softmax_tail.py).

Every problem is :class:`InvalidInput` (malformed files, with file and line where the
parser gives them) or :class:`Unsupported` (valid NNEF without a TOSA mapping here).
"""
from __future__ import annotations

import os
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from compiler.frontends.common.quant_grid import requantizing_pools
from compiler.frontends.common.softmax_tail import emit_integer_softmax
from compiler.frontends.nnef.container import GRAPH_FILE, TAR_SUFFIXES, open_container
from compiler.frontends.nnef.convert import Converter
from compiler.frontends.nnef.ops import HANDLERS
from compiler.frontends.nnef.parse import parse_model
from compiler.frontends.nnef.quant import activation_qparams, affine_form, weight_qparams
from compiler.graph.quantize.qparams import QParams
from tosa_ir import Graph
from tosa_ir.errors import Unsupported

__all__ = ["load_nnef", "load_nnef_model", "looks_like_nnef", "NnefModel"]


@dataclass
class NnefModel:
    """What the frontend knows about a loaded model.

    Attributes
    ----------
    float_graph
        The float TOSA graph.
    graph
        The graph :func:`load_nnef` returns: ``float_graph``, or the int8 graph when the
        model has graph.quant.
    quantized
        The :class:`compiler.graph.quantize.QuantizedModel` for models with graph.quant.
    tensor_of
        NNEF tensor name -> TOSA tensor name holding its value.
    notes
        Conversion decisions worth knowing (kernels extended, slices, groups).
    """

    float_graph: Graph
    graph: Graph
    quantized: object | None = None
    tensor_of: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def looks_like_nnef(path: str | os.PathLike) -> bool:
    """True for what :func:`load_nnef` takes: a folder holding graph.nnef, a ``.nnef``
    file, or a tar container (by name) holding graph.nnef (for format dispatch)."""
    p = Path(path)
    if p.is_dir():
        return (p / GRAPH_FILE).is_file()
    if p.suffix.lower() == ".nnef":
        return True
    if p.is_file() and p.name.lower().endswith(TAR_SUFFIXES):
        from tosa_ir.limits import memory_budget

        try:
            with tarfile.open(p, "r:*") as tar:
                for member in tar:
                    if PurePosixPath(member.name).name == GRAPH_FILE or member.size > memory_budget():
                        return True     # (an oversized member: load_nnef refuses it in one line)
                return False
        except (tarfile.TarError, OSError, EOFError, ValueError, zlib.error):
            return True      # a broken NNEF container: let load_nnef say what is wrong
    return False


def load_nnef(path: str | os.PathLike) -> Graph:
    """Load an NNEF model as a TOSA graph (float, or int8 when graph.quant is present).

    Raises
    ------
    InvalidInput
        Unreadable, truncated or malformed files (named, with line:column for syntax).
    Unsupported
        Operations or quantization forms without a TOSA mapping here.
    """
    return load_nnef_model(path).graph


def load_nnef_model(path: str | os.PathLike, quantize: bool = True,
                    rounding_mode: str = "DOUBLE_ROUND") -> NnefModel:
    """:func:`load_nnef` with the details (float graph, quantization, notes)."""
    container = open_container(path)
    parsed = parse_model(container)
    conv = Converter(parsed)
    float_graph = conv.run(HANDLERS)
    model = NnefModel(float_graph, float_graph, None, dict(conv.result_of), list(conv.notes))
    quantized = any(t.quantization for t in parsed.graph.tensors.values())
    if quantize and quantized:
        from compiler.graph.quantize import quantize_graph

        given, notes = _given_params(parsed, conv, float_graph)
        model.notes += notes
        model.notes += requantizing_pools(float_graph, given)
        qm = quantize_graph(float_graph, given=given, rounding_mode=rounding_mode,
                            softmax_layer=emit_integer_softmax)
        model.quantized = qm
        model.graph = qm.graph
        model.notes += qm.notes
    return model


def _given_params(parsed, conv: Converter, graph: Graph) -> tuple[dict, list[str]]:
    """graph.quant entries as quantizer parameters keyed by TOSA tensor name, and notes.

    An activation entry wider than 8 bits (nnef-tools writes the int32 intermediate of a
    TFLite average pool or sum as a 32-bit quantization) is not an int8 activation of the
    NPU: it is left to the quantizer, whose lowering of that operator gives its int8 result
    the parameters it needs (an average pool keeps its input's), and noted.  Where the
    quantizer has no such parameters (a convolution's result: nnef-tools takes the third
    input of TFLite's TRANSPOSE_CONV, its data, for a bias and writes its int8 activation
    as 32 bits), the entry's scale and zero point are the int8 grid (:func:`_wide_fallback`)."""
    tensors = parsed.graph.tensors
    quant_file = parsed.container.quant_name or "graph.quant"
    given, notes, wide = {}, [], {}
    block = graph.main
    consumers = block.consumers()
    for tosa_name, (var, role) in conv.param_of.items():
        entry = tensors[var].quantization if var in tensors else None
        if not entry or role == "bias" or tosa_name not in block.tensors:
            continue    # biases are requantized to input_scale * weight_scale
        where = f"{quant_file}: '{var}'"
        shape = block.tensors[tosa_name].shape
        if block.tensors[tosa_name].dtype != "fp32":
            continue
        depthwise = any(op.op == "DEPTHWISE_CONV2D" for op in consumers.get(tosa_name, []))
        out_channels = shape[2] * shape[3] if depthwise else shape[0]
        given[tosa_name] = weight_qparams(entry, where, out_channels)
    for nnef_name, tensor in tensors.items():
        entry = tensor.quantization
        if not entry or nnef_name not in conv.result_of:
            continue
        tosa_name = conv.result_of[nnef_name]
        if tosa_name not in block.tensors or block.tensors[tosa_name].is_const:
            continue
        where = f"{quant_file}: '{nnef_name}'"
        if affine_form(entry, where)[2] > 8:
            wide[tosa_name] = (entry, where)
            continue
        given[tosa_name] = activation_qparams(entry, where)
    notes += _wide_fallback(block, given, wide)
    return given, notes


# Operators whose int8 result the quantizer requantizes, so it needs given parameters.
_REQUANTIZING = ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL", "ADD", "SUB",
                 "CONCAT")


def _wide_fallback(block, given: dict, wide: dict) -> list[str]:
    """Wider-than-8-bit entries: unused, except on the result of a requantizing operator
    (or the CLAMP after it) that no other entry covers, where the entry's scale and zero
    point become the int8 parameters (an int8 activation mislabelled 32-bit)."""
    from compiler.graph.quantize.lower import ParamSource

    source = ParamSource(block, given, None)
    consumers = block.consumers()
    notes = []
    for op in block.operators:
        if op.op not in _REQUANTIZING:
            continue
        out = op.outputs[0]
        users = consumers.get(out, [])
        names = [out] + ([users[0].outputs[0]] if len(users) == 1 and users[0].op == "CLAMP"
                         else [])
        try:
            source(out)
            continue
        except Unsupported:
            pass
        name = next((n for n in reversed(names) if n in wide), None)
        if name is None:
            continue
        entry, where = wide.pop(name)
        scale, zp, bits, signed = affine_form(entry, where)
        if scale.size != 1 or zp.size != 1 or not signed or not -128 <= int(zp[0]) <= 127:
            continue
        given[name] = QParams(np.float64(scale[0]), np.int64(zp[0]))
        notes.append(f"{where}: a {bits}-bit entry on the int8 result of {op.op}: its scale "
                     f"and zero point used as the int8 grid")
    notes += [f"{where}: {affine_form(entry, where)[2]}-bit quantization not used (int8 "
              f"parameters from the quantizer's lowering)" for entry, where in wide.values()]
    return notes
