"""Per-layer quantization error: the integer graph against the float graph.

For every int8 tensor that stands for a float tensor, the integer graph's values
(dequantized) are compared with the float evaluator's on the same inputs:

    SNR (dB) = 10 log10( sum(float^2) / sum((float - dequantized)^2) )

summed over all samples.  The integer graph runs on the project's TOSA reference
interpreter (:func:`sim.reference.run_graph`) unless another runner is given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from compiler.graph.quantize.float_eval import evaluate
from compiler.graph.quantize.prepare import copy_graph
from tosa_ir import Graph

Runner = Callable[[Graph, dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass
class LayerError:
    """Error statistics of one quantized tensor."""

    name: str
    op: str
    shape: tuple[int, ...]
    params: str
    snr_db: float
    max_abs_err: float
    signal_rms: float


def _default_runner(graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from sim.reference import run_graph   # the golden model of the project
    return run_graph(graph, inputs)


def layer_errors(qmodel, samples: Iterable[dict[str, np.ndarray]],
                 run: Runner | None = None) -> list[LayerError]:
    """SNR of every quantized tensor over ``samples`` (float input dicts), in graph order."""
    run = run or _default_runner
    probe = copy_graph(qmodel.graph)
    block = probe.main
    producers = block.producers()
    # Tensors of the float graph only (not the integer softmax that replaces its tail).
    names = [n for op in block.operators for n in op.outputs
             if n in qmodel.qparams and n in qmodel.float_graph.main.tensors]
    block.outputs = list(dict.fromkeys(names + list(block.outputs)))
    fprod = qmodel.float_graph.main.producers()
    signal = {n: 0.0 for n in names}
    noise = {n: 0.0 for n in names}
    worst = {n: 0.0 for n in names}
    count = {n: 0 for n in names}
    for sample in samples:
        ref = evaluate(qmodel.float_graph, sample, keep=True)
        got = run(probe, qmodel.quantize_inputs(sample))
        for n in names:
            f = ref[n].astype(np.float64)
            d = qmodel.dequantize(n, got[n])
            signal[n] += float(np.sum(f * f))
            noise[n] += float(np.sum((f - d) ** 2))
            worst[n] = max(worst[n], float(np.max(np.abs(f - d))) if f.size else 0.0)
            count[n] += f.size
    out = []
    for n in names:
        snr = np.inf if noise[n] == 0 else 10.0 * np.log10(max(signal[n], 1e-300) / noise[n])
        fop = fprod.get(n)
        int_op = producers[n].op
        op = fop.op if fop is not None else int_op
        if fop is not None and fop.op == "CLAMP" and int_op == "CLAMP":
            src = qmodel.float_graph.main.producers().get(fop.inputs[0])
            if src is not None and src.op != "CLAMP":
                op = f"{src.op}+CLAMP"
        out.append(LayerError(n, op, tuple(block.tensors[n].shape), qmodel.qparams[n].describe(),
                              float(snr), worst[n], float(np.sqrt(signal[n] / max(count[n], 1)))))
    return out


def format_table(errors: list[LayerError]) -> str:
    """The per-layer errors as a plain-text table."""
    head = f"{'tensor':<16} {'float op':<24} {'shape':<18} {'int8 parameters':<30} " \
           f"{'SNR dB':>7} {'max |err|':>10} {'rms':>9}"
    lines = [head, "-" * len(head)]
    for e in errors:
        shape = "x".join(str(d) for d in e.shape)
        lines.append(f"{e.name:<16} {e.op:<24} {shape:<18} {e.params:<30} "
                     f"{e.snr_db:>7.1f} {e.max_abs_err:>10.4g} {e.signal_rms:>9.4g}")
    return "\n".join(lines)
