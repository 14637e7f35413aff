"""The integer identities the Circle lowering relies on, checked on many values.

* TFLite's MultiplyByQuantizedMultiplier (gemmlowp fixed point, written out here from
  TFLite's source) equals TOSA RESCALE with DOUBLE_ROUND and shift 31 - s, run by our
  reference interpreter.
* TFLite's reference FULLY_CONNECTED rounds ``acc * scale`` in double precision, which
  integer TOSA cannot express; the lowering's single-rounding RESCALE is within 1 of it,
  and differs on a tiny fraction of values (the stated bound).
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.tosa_builder import TosaBuilder
from compiler.frontends.circle.quant import quantize_multiplier
from sim.reference import run_graph
from tosa_ir import Graph

RNG_SEED = 7


def _c_div(a: np.ndarray, d: int) -> np.ndarray:
    """C integer division (truncation toward zero)."""
    q = np.abs(a) // d
    return np.where(a < 0, -q, q)


def tflite_mbqm(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """tflite::MultiplyByQuantizedMultiplier, as in TFLite's common.h / gemmlowp."""
    left, right = max(shift, 0), max(-shift, 0)
    ab = (x.astype(np.int64) << left) * multiplier
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = _c_div(ab + nudge, 1 << 31)
    mask = (1 << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + (remainder > threshold)


def _rescale_graph(shape, multiplier: int, tosa_shift: int, double_round: bool) -> Graph:
    b = TosaBuilder()
    x = b.tensor("x", shape, "int32")
    b.block.inputs.append(x)
    y = b.rescale(x, "int32", multiplier, tosa_shift, double_round=double_round)
    b.block.outputs.append(y)
    return Graph.single_block(b.block)


def test_quantize_multiplier_matches_tflite_examples():
    assert quantize_multiplier(0.5) == (1 << 30, 0)
    assert quantize_multiplier(1.0) == (1 << 30, 1)
    assert quantize_multiplier(0.75) == (1610612736, 0)
    assert quantize_multiplier(0.0) == (0, 0)
    assert quantize_multiplier(2.0 ** -40) == (0, 0)  # flushed like TFLite


def test_double_round_rescale_is_multiply_by_quantized_multiplier():
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(40):
        real = float(np.exp(rng.uniform(np.log(1e-6), np.log(0.99))))
        multiplier, shift = quantize_multiplier(real)
        # Inputs TFLite feeds it: accumulators, plus exact halves of the result.
        x = rng.integers(-(1 << 24), 1 << 24, size=2000)
        halves = (np.arange(-300, 300) * 2 + 1) << max(-shift - 1, 0)
        x = np.concatenate([x, halves, [0, 1, -1]]).astype(np.int32)
        graph = _rescale_graph(x.shape, multiplier, 31 - shift, True)
        ours = run_graph(graph, {"x": x})[graph.main.outputs[0]]
        np.testing.assert_array_equal(ours, tflite_mbqm(x, multiplier, shift),
                                      err_msg=f"real {real}")


def test_fully_connected_requantization_bound():
    """round(acc * scale) in double (TFLite reference FC) vs the lowering's RESCALE."""
    rng = np.random.default_rng(RNG_SEED + 1)
    total, differing = 0, 0
    for _ in range(30):
        scale = float(np.float32(rng.uniform(1e-4, 0.05))) * float(np.float32(
            rng.uniform(1e-3, 0.02))) / float(np.float32(rng.uniform(0.01, 0.2)))
        multiplier, shift = quantize_multiplier(scale)
        acc = rng.integers(-(1 << 20), 1 << 20, size=20000).astype(np.int32)
        graph = _rescale_graph(acc.shape, multiplier, 31 - shift, False)
        ours = run_graph(graph, {"x": acc})[graph.main.outputs[0]].astype(np.int64)
        exact = acc.astype(np.float64) * scale
        tflite = (np.sign(exact) * np.floor(np.abs(exact) + 0.5)).astype(np.int64)
        diff = np.abs(ours - tflite)
        assert diff.max() <= 1
        total += diff.size
        differing += int((diff > 0).sum())
    assert differing <= total * 1e-4, f"{differing} of {total} differ"
