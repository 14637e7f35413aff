"""Activation ranges from a calibration set.

Runs the float graph (:mod:`compiler.graph.quantize.float_eval`) on every sample and records,
per float tensor, either the overall minimum and maximum (``"minmax"``) or the
``percentile``-th percentile of the values at each end (``"percentile"``, from a fixed-seed
subsample of up to 65536 values per tensor and sample), which ignores rare outliers.

A tensor that only SLICEs read is measured on what the SLICEs keep: the entries they drop
(e.g. the trailing rows no window reaches, which frontends slice off so that TOSA's
window sizes divide exactly) are never used, so they must not widen its range.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from compiler.graph.quantize.float_eval import evaluate
from tosa_ir import Block, Graph

_SUBSAMPLE = 65536


def _slice_sources(block: Block) -> dict[str, str]:
    """``{SLICE output: SLICE input}`` for the inputs that nothing but SLICEs reads."""
    consumers = block.consumers()
    out = {}
    for op in block.operators:
        if op.op != "SLICE":
            continue
        src = op.inputs[0]
        if src not in block.outputs and all(u.op == "SLICE" for u in consumers[src]):
            out[op.outputs[0]] = src
    return out


def calibrate(graph: Graph, samples: Iterable[dict[str, np.ndarray]], method: str = "minmax",
              percentile: float = 99.99) -> dict[str, tuple[float, float]]:
    """``{tensor name: (lo, hi)}`` for every non-constant float tensor of the main block.

    Parameters
    ----------
    graph
        Float graph.
    samples
        Calibration inputs: one dict (input name -> array) per sample.
    method
        "minmax" or "percentile".
    percentile
        For "percentile": the upper percentile (the lower one is ``100 - percentile``).

    Raises
    ------
    ValueError
        Unknown method, or no samples.
    """
    if method not in ("minmax", "percentile"):
        raise ValueError(f"unknown calibration method {method!r}")
    block = graph.main
    floats = {n for n, t in block.tensors.items() if t.dtype == "fp32" and not t.is_const}
    sliced = _slice_sources(block)
    measured_by_slices = set(sliced.values())
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    pools: dict[str, list[np.ndarray]] = {}
    rng = np.random.default_rng(0)
    count = 0
    for sample in samples:
        count += 1
        env = evaluate(graph, sample, keep=True)
        for name, value in env.items():
            if name not in floats or value.size == 0 or name in measured_by_slices:
                continue
            keys = [name]
            while keys[-1] in sliced:           # SLICE of a SLICE: every source up the chain
                keys.append(sliced[keys[-1]])
            v = value.reshape(-1)
            if method == "percentile" and v.size > _SUBSAMPLE:
                sub = v[rng.choice(v.size, _SUBSAMPLE, replace=False)]
            else:
                sub = v
            for key in keys:
                lo[key] = min(lo.get(key, np.inf), float(v.min()))
                hi[key] = max(hi.get(key, -np.inf), float(v.max()))
                if method == "percentile":
                    pools.setdefault(key, []).append(sub.astype(np.float32))
    if count == 0:
        raise ValueError("calibration needs at least one sample")
    if method == "minmax":
        return {n: (lo[n], hi[n]) for n in lo}
    out = {}
    for name, parts in pools.items():
        v = np.concatenate(parts)
        a, b = np.percentile(v, [100.0 - percentile, percentile])
        out[name] = (float(max(a, lo[name])), float(min(b, hi[name])))
    return out
