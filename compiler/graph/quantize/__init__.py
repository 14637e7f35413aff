"""Post-training static quantization: float TOSA graph -> int8 TOSA 1.0 graph.

Typical use::

    from compiler.graph.quantize import quantize_graph, layer_errors, format_table
    qm = quantize_graph(float_graph, calibration_samples)      # QuantizedModel
    qm.graph                                                   # the int8 graph
    print(format_table(layer_errors(qm, test_samples)))        # per-layer SNR vs float

Modules: :mod:`.qparams` (parameters, multiplier/shift), :mod:`.float_eval` (numpy float
evaluator), :mod:`.calibrate` (ranges), :mod:`.prepare` (folds, logits cut),
:mod:`.lower` (the integer lowering), :mod:`.report` (per-layer error).
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from compiler.graph.quantize.calibrate import calibrate
from compiler.graph.quantize.float_eval import evaluate
from compiler.graph.quantize.lower import ParamSource, QuantizedModel, lower
from compiler.graph.quantize.prepare import (
    add_const_ops, copy_graph, cut_float_tail, fold_affine, strip_const_ops,
)
from compiler.graph.quantize.qparams import QParams, activation_qparams, quantize_multiplier
from compiler.graph.quantize.report import LayerError, format_table, layer_errors
from compiler.graph.quantize.softmax import is_softmax_tail, softmax_groups
from tosa_ir import Graph


def quantize_graph(graph: Graph, calibration: Iterable[dict[str, np.ndarray]] | None = None,
                   *, given: dict[str, QParams] | None = None, method: str = "minmax",
                   percentile: float = 99.99, rounding_mode: str = "DOUBLE_ROUND",
                   stop_at_logits: bool = True, integer_softmax: Callable | None = None,
                   softmax_layer: Callable | None = None) -> QuantizedModel:
    """Quantize a float TOSA graph to int8.

    Parameters
    ----------
    graph
        Float graph (fp32 activations; TOSA 1.0 operand forms), e.g. from a frontend.
    calibration
        Calibration inputs, one dict (input name -> float array) per sample.
    given
        Fixed parameters by tensor name (activations and graph inputs; weights: one scale
        per output channel), e.g. from NNEF graph.quant.  They take precedence over
        calibration.
    method, percentile
        Calibration statistic: "minmax" or "percentile".
    rounding_mode
        RESCALE rounding: "DOUBLE_ROUND" (TFLite-compatible) or "SINGLE_ROUND".
    stop_at_logits
        Remove a float-only output tail (softmax) and end the graph at its input.
    integer_softmax
        None, or a function ``(graph, qparams, logits) -> name`` that appends an int8
        softmax: when the removed tail is a softmax over the logits' channels, the integer
        graph ends with it instead (compiler/frontends/common/softmax_tail.py's
        ``append_integer_softmax``: TFLite's reference kernel, output scale 1/256, zero point
        -128; see compiler/graph/quantize/softmax.py).
    softmax_layer
        None, or a function ``(block, logits, scale, out_name, reserved) -> name`` that
        emits TFLite's int8 softmax into the integer block
        (compiler/frontends/common/softmax_tail.py's ``emit_integer_softmax``): every
        softmax, inside the graph or at its end, whose result ``given`` quantizes with
        TFLite's softmax parameters is lowered with it (``softmax_groups``).

    Raises
    ------
    Unsupported
        An operator without integer lowering, missing parameters.
    ValueError
        Neither calibration nor given parameters.
    """
    if calibration is None and not given:
        raise ValueError("quantize_graph needs a calibration set or given parameters")
    prepared = copy_graph(graph)
    strip_const_ops(prepared.main)
    notes = fold_affine(prepared)
    groups = softmax_groups(prepared.main, given or {}) if softmax_layer else []
    lowered = frozenset(id(op) for g in groups for op in g.ops)
    removed = cut_float_tail(prepared, lowered) if stop_at_logits else []
    if removed:
        notes.append(f"integer graph stops at the logits {', '.join(prepared.main.outputs)}: "
                     f"left out the float tail {', '.join(op.op for op in removed)}")
    ranges = None
    if calibration is not None:
        ranges = calibrate(prepared, calibration, method, percentile)
    int_graph, qparams = lower(prepared, ParamSource(prepared.main, given, ranges),
                               rounding_mode, (groups, softmax_layer))
    notes += [f"the float softmax {g.logits} -> {g.output} is TFLite's int8 softmax "
              f"(its result is given scale 1/256, zero point -128)" for g in groups]
    if removed and integer_softmax and len(int_graph.main.outputs) == 1:
        logits = int_graph.main.outputs[0]
        if is_softmax_tail(removed, logits, len(int_graph.main.tensors[logits].shape)):
            out = integer_softmax(int_graph, qparams, logits)
            notes[-1] = (f"the float softmax after the logits {logits} is the int8 softmax "
                         f"{out} (TFLite's kernel; scale 1/256, zero point -128)")
    add_const_ops(int_graph.main)
    return QuantizedModel(int_graph, qparams, list(int_graph.main.inputs),
                          list(int_graph.main.outputs), notes,
                          [op.op for op in removed], prepared)


__all__ = [
    "quantize_graph", "QuantizedModel", "QParams", "activation_qparams",
    "quantize_multiplier", "calibrate", "evaluate", "layer_errors", "format_table",
    "LayerError",
]
