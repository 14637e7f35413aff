"""Float models in the CLI: calibration sets, post-training quantization, float <-> int8 I/O.

A float model (NNEF without graph.quant, float OpenVINO IR) becomes an int8 TOSA graph with
``--calibrate DIR|NPZ``:

* ``NPZ``: one array per graph input (any key for a single-input graph) whose first axis
  runs over samples, e.g. ``images`` of shape ``[S, 1, 224, 224, 3]`` or ``[S, 224, 224, 3]``
  for an input of shape ``[1, 224, 224, 3]``.
* ``DIR``: a folder of ``.npz`` (one sample each, keyed like the inputs) or ``.npy`` files
  (one sample each, single-input graphs), read in name order.

The quantizer's per-layer error against the float model (SNR) is printed as a table.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, Unsupported
from tosa_ir.safe_io import load_npy, load_npz

FLOAT_TYPES = ("fp32", "fp16", "bf16")


def is_float_graph(graph: Graph) -> bool:
    block = graph.main
    return any(block.tensor(n).dtype in FLOAT_TYPES for n in block.inputs + block.outputs)


def _fit(array: np.ndarray, shape: tuple[int, ...], what: str) -> list[np.ndarray]:
    """Split ``array`` into samples of ``shape`` (first axis = samples)."""
    array = np.asarray(array, dtype=np.float32)
    if array.shape == tuple(shape):
        return [array]
    if array.shape[1:] == tuple(shape):
        return list(array)
    if len(shape) and shape[0] == 1 and array.shape[1:] == tuple(shape[1:]):
        return [a[None] for a in array]
    raise InvalidInput(f"{what}: shape {array.shape} does not hold samples of the input shape {tuple(shape)}")


def load_calibration(path: str, graph: Graph) -> list[dict[str, np.ndarray]]:
    """Calibration samples for ``graph`` from an NPZ file or a folder (see module doc)."""
    block = graph.main
    shapes = {n: block.tensor(n).shape for n in block.inputs}
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"{path}: calibration set not found")
    files = sorted(p.iterdir()) if p.is_dir() else [p]
    files = [f for f in files if f.suffix in (".npz", ".npy")]
    if not files:
        raise InvalidInput(f"{path}: no .npz or .npy calibration files")
    samples: list[dict[str, np.ndarray]] = []
    for f in files:
        if f.suffix == ".npy":
            if len(shapes) != 1:
                raise InvalidInput(f"{f}: .npy samples need a single-input graph")
            (name, shape), = shapes.items()
            arrays = {name: load_npy(f, "calibration data")}
        else:
            arrays = load_npz(f, "calibration data")
            if len(shapes) == 1 and len(arrays) == 1:
                arrays = {next(iter(shapes)): next(iter(arrays.values()))}
        for k, v in arrays.items():
            if np.issubdtype(v.dtype, np.floating) and not np.isfinite(v).all():
                raise InvalidInput(f"{f}: calibration data {k!r} holds NaN or infinite values")
        missing = [n for n in shapes if n not in arrays]
        if missing:
            raise InvalidInput(f"{f}: no calibration data for input(s) {', '.join(missing)}")
        split = {n: _fit(arrays[n], shapes[n], str(f)) for n in shapes}
        counts = {len(v) for v in split.values()}
        if len(counts) != 1:
            raise InvalidInput(f"{f}: inputs have different sample counts")
        samples += [{n: split[n][i] for n in shapes} for i in range(counts.pop())]
    return samples


def quantize_model(graph: Graph, calibrate: str | None, source: str, report=print):
    """The int8 model of a float ``graph`` (a compiler.graph.quantize.QuantizedModel)."""
    if calibrate is None:
        raise Unsupported(f"{source}: a float model; quantize it with --calibrate DIR|NPZ "
                          "(a calibration set of typical inputs)")
    from compiler.graph.quantize import format_table, layer_errors, quantize_graph

    samples = load_calibration(calibrate, graph)
    try:
        qmodel = quantize_graph(graph, samples)
    except ValueError as e:
        raise InvalidInput(f"{source}: cannot quantize: {e}") from None
    report(f"quantized {source} with {len(samples)} calibration sample(s); per-layer error against float:")
    report(format_table(layer_errors(qmodel, samples[: min(len(samples), 4)])))
    return qmodel


def quantize_inputs(qmodel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Float inputs -> the int8 codes the quantized graph takes; integer inputs pass as given
    (they are taken to be codes already)."""
    if all(np.issubdtype(np.asarray(x).dtype, np.floating) for x in inputs.values()):
        for name, x in inputs.items():
            if not np.isfinite(np.asarray(x)).all():
                # Quantizing NaN gives an arbitrary code and a confident, meaningless answer.
                raise InvalidInput(f"input {name!r} holds NaN or infinite values")
        return qmodel.quantize_inputs(inputs)
    return inputs


def dequantize_outputs(qmodel, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``name.float`` entries: the float values the int8 outputs stand for."""
    return {f"{name}.float": np.asarray(qmodel.dequantize(name, v), np.float32)
            for name, v in outputs.items() if name in qmodel.qparams}
