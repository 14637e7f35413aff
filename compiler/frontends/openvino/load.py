"""OpenVINO IR frontend: ``model.xml`` + ``model.bin`` (IR v10/v11) -> TOSA graph.

* The ``.xml`` is read with defusedxml, DTDs and entities forbidden
  (:mod:`.openvino_xml`); constants come from the ``.bin`` by offset and size, bounds
  checked (:mod:`.openvino_bin`).
* Layers map to float TOSA 1.0 operators (:mod:`.openvino_convert`, :mod:`.openvino_ops`);
  constant sub-graphs (shape computations, weight decompression) are folded
  (:mod:`.openvino_fold`).  OpenVINO's NCHW becomes NHWC inside the graph.  Graph inputs
  and outputs are in the layout the IR declares (``layout="ir"``, default; ``"nchw"`` is
  the same): models converted from TensorFlow/TFLite keep their NHWC inputs, the
  converter's Transposes stay in the graph (cancelling in the layout bookkeeping, or folded
  by the compiler into the host's layout of the input); nothing is guessed.  With
  ``layout="nhwc"`` the caller says every rank-4 input and output is NCHW and wants it NHWC.
  ``OpenVinoModel.boundary`` gives each input's and output's permutation
  (``tosa == openvino.transpose(perm)``).
* A float model gives a float (fp32) graph; quantize it with
  :func:`compiler.graph.quantize.quantize_graph` and a calibration set.
* A FakeQuantize model (OpenVINO's converters, NNCF: ``levels=256`` FakeQuantize on
  activations, FakeQuantize or compressed int8 weights) gives the int8 TOSA 1.0 graph
  directly: activation FakeQuantize parameters become the int8 scale and zero point of the
  tensor they quantize, weights keep their per-channel codes and scales
  (:mod:`.openvino_quant`), and :mod:`compiler.graph.quantize`'s lowering does the rest (int32
  accumulators, RESCALE).  Tensors no FakeQuantize covers (e.g. the logits of a final
  MatMul) get parameters from calibration on seeded random inputs inside the input
  FakeQuantize range, or on ``calibration`` when given; ``notes`` says which.
  Models OpenVINO converted from int8 TFLite keep integer inputs and outputs
  (``Parameter i8 -> Convert -> FakeQuantize`` dequantizing, ``FakeQuantize ->
  Convert i8`` quantizing): the int8 graph takes and gives the same int8 codes (the float
  graph the real values they stand for; uint8 codes become int8 codes ``q - 128``).
  RESCALEs round once (SINGLE_ROUND), as OpenVINO's FakeQuantize arithmetic does.
  A final SoftMax whose result the IR quantizes with TFLite's softmax parameters (scale
  1/256, zero point -128: a converted TFLite classifier) is TFLite's int8 softmax
  (compiler/frontends/common/softmax_tail.py); another final SoftMax is left out and the
  graph ends at the logits.

Every problem is :class:`InvalidInput` (malformed files) or :class:`Unsupported` (valid IR
without a mapping here), naming the file and the layer (id, name, type).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.frontends.common.quant_grid import fresh_name, requantizing_pools, same_grid
from compiler.frontends.common.softmax_tail import emit_integer_softmax
from compiler.frontends.openvino.bin import WeightsFile
from compiler.frontends.openvino.convert import Converter
from compiler.frontends.openvino.fold import FOLDERS
from compiler.frontends.openvino.ops import HANDLERS
from compiler.frontends.openvino.xml import read_ir
from compiler.graph.quantize.prepare import add_const_ops
from compiler.graph.quantize.qparams import QParams
from tosa_ir import Graph, Operator, Tensor, numpy_dtype
from tosa_ir.errors import InvalidInput, Unsupported

__all__ = ["load_openvino", "load_openvino_model", "OpenVinoModel"]

# Operators that keep quantization parameters from input to output (OpenVINO's
# precision-preserving operations): a FakeQuantize before them covers their output too.
_PRESERVING = ("CLAMP", "MAX_POOL2D", "RESHAPE", "TRANSPOSE", "SLICE", "IDENTITY", "PAD")
CALIBRATION_SAMPLES = 32


@dataclass
class OpenVinoModel:
    """What the frontend knows about a loaded IR.

    Attributes
    ----------
    float_graph
        The float TOSA graph (FakeQuantize layers on activations left out).
    graph
        What :func:`load_openvino` returns: ``float_graph``, or the int8 graph for
        FakeQuantize models.
    quantized
        The :class:`compiler.graph.quantize.QuantizedModel` of FakeQuantize models (its
        ``qparams`` give the int8 scale/zero point of the inputs and outputs).
    given
        Parameters taken from FakeQuantize layers, by float-graph tensor name (activations
        per tensor, weights per output channel).
    quantized_by
        Float-graph tensor name -> the FakeQuantize layer that gave its parameters.
    calibrated
        Tensors whose parameters came from calibration (no FakeQuantize covered them).
    layout
        "ir" (as the IR declares), "nchw" (the same) or "nhwc" (module docstring).
    boundary
        Graph input/output name -> permutation with ``tosa == openvino.transpose(perm)``.
    code_inputs
        Graph inputs that OpenVINO takes as integer codes ("i8"/"u8"/"i16"), by name.
    output_names
        Graph output name -> (OpenVINO Result layer name, OpenVINO tensor names).
    notes
        Conversion decisions worth knowing.
    """

    float_graph: Graph
    graph: Graph
    quantized: object | None = None
    given: dict[str, QParams] = field(default_factory=dict)
    quantized_by: dict[str, str] = field(default_factory=dict)
    calibrated: list[str] = field(default_factory=list)
    layout: str = "ir"
    boundary: dict[str, tuple[int, ...]] = field(default_factory=dict)
    code_inputs: dict[str, str] = field(default_factory=dict)
    output_names: dict[str, tuple[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def load_openvino(path: str | os.PathLike) -> Graph:
    """Load an OpenVINO IR (``.xml``, its ``.bin`` beside it) as a TOSA graph.

    Float models give a float graph, FakeQuantize models the int8 graph.  Inputs and
    outputs are in the layout the IR declares (module docstring).

    Raises
    ------
    InvalidInput
        Unreadable, malformed or inconsistent files (named, with the layer).
    Unsupported
        Layers, types or quantization forms without a TOSA mapping here.
    """
    return load_openvino_model(path).graph


def _ir_paths(path: Path) -> tuple[Path, Path]:
    if path.suffix.lower() == ".bin":
        path = path.with_suffix(".xml")
    return path, path.with_suffix(".bin")


def load_openvino_model(path: str | os.PathLike, *, layout: str = "ir",
                        quantize: bool = True, calibration=None,
                        rounding_mode: str = "SINGLE_ROUND",
                        stop_at_logits: bool = True) -> OpenVinoModel:
    """:func:`load_openvino` with the details and options.

    Parameters
    ----------
    layout
        "ir" (default: as the IR declares; "nchw" is the same) or "nhwc": order of graph
        inputs and outputs (module docstring).
    quantize
        For FakeQuantize models, build the int8 graph (else only the float graph).
    calibration
        Samples (dicts input name -> float array, in ``layout``) used for tensors that no
        FakeQuantize covers; by default seeded random inputs.
    rounding_mode, stop_at_logits
        Passed to :func:`compiler.graph.quantize.quantize_graph`.
    """
    xml_path, bin_path = _ir_paths(Path(path))
    ir = read_ir(xml_path)
    has_consts = any(layer.type == "Const" for layer in ir.layers)
    if has_consts and not bin_path.exists():
        raise InvalidInput(f"{xml_path}: the weights file {bin_path} does not exist")
    weights = WeightsFile(bin_path) if bin_path.exists() else None
    conv = Converter(ir, weights, layout)
    float_graph = conv.run(HANDLERS, FOLDERS)
    model = OpenVinoModel(float_graph, float_graph, layout=layout,
                          boundary=dict(conv.boundary), code_inputs=dict(conv.code_inputs),
                          output_names=dict(conv.output_info), notes=list(conv.notes))
    if not conv.fake_quantized or not quantize:
        return model
    given = dict(conv.given)
    _propagate(float_graph, given)
    model.notes += requantizing_pools(float_graph, given)
    add_const_ops(float_graph.main)
    weight_given = dict(conv.weight_given)
    model.notes += _scaled_weights(float_graph, weight_given)
    model.given = {**given, **weight_given}
    model.quantized_by = dict(conv.given_by)
    _quantize(model, float_graph, given, weight_given, calibration, rounding_mode,
              stop_at_logits)
    return model


def _propagate(graph: Graph, given: dict[str, QParams]) -> None:
    """Fill in parameters OpenVINO's FakeQuantize placement implies.

    The result of a precision-preserving operator (max pooling, layout, clamp) is on its
    input's grid; a CONCAT whose inputs all carry the same parameters (NNCF's unified
    scales) is on that grid too.
    """
    for op in graph.main.operators:
        out = op.outputs[0]
        if out in given:
            continue
        if op.op in _PRESERVING and op.inputs[0] in given:
            given[out] = given[op.inputs[0]]
        elif op.op == "CONCAT" and all(n in given for n in op.inputs):
            first = given[op.inputs[0]]
            if all(same_grid(given[n], first) for n in op.inputs[1:]):
                given[out] = first


def _scaled_weights(graph: Graph, weight_given: dict[str, QParams]) -> list[str]:
    """Drop weight parameters of convolutions the quantizer will rescale.

    The quantizer folds a per-channel constant MUL after a convolution into its weights;
    the FakeQuantize scales would then no longer fit the weights, so such weights are
    quantized from their values instead.
    """
    notes = []
    block = graph.main
    consumers = block.consumers()
    for op in block.operators:
        if op.op not in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D") or \
                op.inputs[1] not in weight_given:
            continue
        users = consumers.get(op.outputs[0], [])
        if len(users) == 1 and users[0].op == "MUL" and \
                any(block.tensors[n].is_const for n in users[0].inputs[:2]):
            del weight_given[op.inputs[1]]
            notes.append(f"{op.location}: a constant multiplication after the convolution "
                         f"is folded into its weights: they are requantized per channel")
    return notes


def _synthetic_calibration(graph: Graph, given: dict[str, QParams]) -> list[dict]:
    """Seeded random inputs: uniform over the input FakeQuantize range, else N(0, 1)."""
    rng = np.random.default_rng(0)
    samples = []
    block = graph.main
    for _ in range(CALIBRATION_SAMPLES):
        sample = {}
        for name in block.inputs:
            shape = block.tensors[name].shape
            qp = given.get(name)
            if qp is not None:
                lo = float(qp.dequantize(np.asarray(-128)))
                hi = float(qp.dequantize(np.asarray(127)))
                sample[name] = rng.uniform(lo, hi, shape).astype(np.float32)
            else:
                sample[name] = rng.standard_normal(shape).astype(np.float32)
        samples.append(sample)
    return samples


def _quantize(model: OpenVinoModel, float_graph: Graph, given, weight_given, calibration,
              rounding_mode: str, stop_at_logits: bool) -> None:
    from compiler.graph.quantize import quantize_graph

    params = {**given, **weight_given}
    options = dict(given=params, rounding_mode=rounding_mode, stop_at_logits=stop_at_logits,
                   softmax_layer=emit_integer_softmax)
    try:
        qm = quantize_graph(float_graph, None, **options)
        used_cal = []
    except (Unsupported, ValueError):
        # Some tensor has no parameters from a FakeQuantize (or the graph cannot be
        # lowered at all, which the second attempt reports again): calibrate the rest.
        cal = list(calibration) if calibration is not None else \
            _synthetic_calibration(float_graph, given)
        qm = quantize_graph(float_graph, cal, **options)
        used_cal = _uncovered(qm.float_graph, params)
    if used_cal:
        source = "the calibration set" if calibration is not None else \
            f"{CALIBRATION_SAMPLES} seeded random inputs"
        model.notes.append(f"{float_graph.source}: no FakeQuantize covers "
                           f"{', '.join(used_cal)}: parameters from {source}")
    model.calibrated = used_cal
    model.notes += _requantize_outputs(qm, given, rounding_mode)
    for name, by in model.quantized_by.items():
        qp = qm.qparams.get(name)
        if qp is None or qp.per_channel or not same_grid(qp, given[name]):
            how = "is not in the integer graph" if qp is None else \
                f"is on another grid ({qp.describe()})"
            model.notes.append(f"{float_graph.source}: {by}: the tensor it quantizes ({name}) "
                               f"{how}; OpenVINO rounds there, the integer graph does not")
    model.quantized = qm
    model.graph = qm.graph
    model.notes += qm.notes


def _requantize_outputs(qm, given: dict[str, QParams], rounding_mode: str) -> list[str]:
    """Put graph outputs on the grid of their FakeQuantize when the quantizer did not.

    The quantizer keeps some operators on their input's grid (a CLAMP alone, pooling);
    OpenVINO rounds onto the FakeQuantize grid after them.  Inside the graph that is a
    small difference in rounding; at an output it would also change the integer codes
    (OpenVINO's integer outputs), so a RESCALE int8 -> int8 onto the given grid ends it.
    """
    from compiler.graph.quantize.qparams import quantize_multiplier

    notes = []
    block = qm.graph.main
    for name in list(block.outputs):
        want, have = given.get(name), qm.qparams.get(name)
        if want is None or have is None or have.per_channel or same_grid(want, have):
            continue
        inner = fresh_name(block, name + "_grid")
        tensor = block.tensors.pop(name)
        block.tensors[inner] = Tensor(inner, tensor.shape, tensor.dtype)
        for op in block.operators:
            op.inputs = [inner if n == name else n for n in op.inputs]
            op.outputs = [inner if n == name else n for n in op.outputs]
        mult, shift = quantize_multiplier(have.scalar_scale / want.scalar_scale)
        consts = []
        if have.dtype != want.dtype or want.dtype != "int8":
            raise Unsupported(f"output {name}: {have.describe()} is not on the grid of its "
                              f"FakeQuantize ({want.describe()})")
        for base, data, dtype in (("multiplier", mult, "int32"), ("shift", shift, "int8"),
                                  ("input_zp", [have.zp], "int8"),
                                  ("output_zp", [want.zp], "int8")):
            cname = fresh_name(block, f"{name}_{base}")
            block.add_tensor(Tensor(cname, (1,), dtype, np.asarray(data).reshape(1)
                                    .astype(numpy_dtype(dtype))))
            consts.append(cname)
        block.add_tensor(Tensor(name, tensor.shape, "int8"))
        block.operators.append(Operator(
            "RESCALE", [inner] + consts, [name],
            {"scale32": True, "rounding_mode": rounding_mode, "per_channel": False,
             "input_unsigned": False, "output_unsigned": False}, ""))
        qm.qparams[inner] = have
        qm.qparams[name] = want
        notes.append(f"output {name}: RESCALE onto its FakeQuantize grid ({want.describe()})")
    add_const_ops(block)
    return notes


def _uncovered(graph: Graph, params: dict[str, QParams]) -> list[str]:
    """Tensors whose parameters the quantizer's lowering asks for and no FakeQuantize gives.

    The lowering asks for the parameters of graph inputs and of the results of the
    operators that requantize (convolutions, MATMUL, ADD/SUB, CONCAT; after a fused CLAMP
    the CLAMP's result); :class:`ParamSource` finds given ones along pass-through chains.
    """
    from compiler.graph.quantize.lower import ParamSource

    block = graph.main
    source = ParamSource(block, params, None)
    consumers = block.consumers()
    asked = list(block.inputs)
    for op in block.operators:
        if op.op in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL", "ADD", "SUB",
                     "CONCAT"):
            out = op.outputs[0]
            users = consumers.get(out, [])
            if len(users) == 1 and users[0].op == "CLAMP" and out not in block.outputs:
                out = users[0].outputs[0]
            asked.append(out)
    missing = []
    for name in asked:
        try:
            source(name)
        except Unsupported:
            missing.append(name)
    return missing
