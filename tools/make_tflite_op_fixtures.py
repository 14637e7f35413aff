#!/usr/bin/env python3
"""Build single-operator .tflite fixtures (tests/fixtures/tflite/ops/) without TensorFlow.

The flatbuffers are written directly from the Circle frontend's schema tables
(compiler/frontends/circle/schema.py) by :func:`write_tflite`, so operators and operator
versions that TensorFlow's converter would need a whole model for (MAXIMUM version 2 with
broadcasting and a constant operand, MINIMUM) are one small file each.  The expected outputs
come from TFLite's reference kernels (ai-edge-litert, ``OpResolverType.BUILTIN_REF``): per
model ``<name>.tflite`` and ``<name>.npz`` with ``input_i`` (seeded int8 codes, leading axis
= sample) and ``ref_i`` (the reference kernels' outputs).

Usage (ai-edge-litert is a fixture-building extra: ``pip install ai-edge-litert``)::

    python tools/make_tflite_op_fixtures.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "tflite" / "ops"
SAMPLES = 3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tflite_writer import ModelBuilder, reference_outputs, write_tflite  # noqa: E402


def maximum_minimum(rng) -> bytes:
    """MAXIMUM (version 2, int8) of two inputs with broadcasting, MINIMUM (version 2) of the
    result and a per-channel constant: one quantization everywhere, as the converter gives."""
    m = ModelBuilder()
    s, z = 0.04, -5
    a = m.tensor("a", (1, 4, 5, 24), "int8", s, z)
    b = m.tensor("b", (1, 1, 5, 24), "int8", s, z)
    k = m.tensor("k", (24,), "int8", s, z, rng.integers(-60, 60, 24))
    mx = m.tensor("max", (1, 4, 5, 24), "int8", s, z)
    mn = m.tensor("min", (1, 4, 5, 24), "int8", s, z)
    m.op(55, 2, [a, b], [mx])
    m.op(57, 2, [mx, k], [mn])
    m.inputs, m.outputs = [a, b], [mx, mn]
    return write_tflite(m.model())


def transpose_conv(rng) -> bytes:
    """TRANSPOSE_CONV version 3 (bias input), int8 with per-channel weights: SAME padding,
    stride 2 (output 10x8), and VALID, stride (2, 3) with a fused RELU (version 4)."""
    m = ModelBuilder()
    s_in, z_in = 0.05, 7
    x = m.tensor("x", (1, 5, 4, 3), "int8", s_in, z_in)
    m.inputs = [x]
    for i, (pad, st, act, version, oh, ow) in enumerate(((0, (2, 2), 0, 3, 10, 8), (1, (2, 3), 1, 4, 11, 12))):
        ws = rng.uniform(0.002, 0.01, 6)
        w = m.tensor(f"w{i}", (6, 3, 3, 3), "int8", list(ws), 0, rng.integers(-127, 128, (6, 3, 3, 3)))
        b = m.tensor(f"b{i}", (6,), "int32", list(ws * s_in), 0, rng.integers(-3000, 3000, 6))
        shape = m.tensor(f"shape{i}", (4,), "int32", None, 0, [1, oh, ow, 6])
        y = m.tensor(f"y{i}", (1, oh, ow, 6), "int8", 0.03, -4)
        m.op(67, version, [shape, w, x, b], [y],
             (49, {"padding": pad, "stride_w": st[1], "stride_h": st[0], "fused_activation_function": act}))
        m.outputs.append(y)
    return write_tflite(m.model())


def batch_matmul(rng) -> bytes:
    """BATCH_MATMUL (int8): activations [2, 3, 5, 12] x [2, 3, 12, 7] with zero points, and
    an adjoint_rhs product by a constant [7, 12] (attention's Q K^T and a projection)."""
    m = ModelBuilder()
    a = m.tensor("a", (2, 3, 5, 12), "int8", 0.04, 3)
    c = m.tensor("c", (2, 3, 12, 7), "int8", 0.05, -2)
    y = m.tensor("y", (2, 3, 5, 7), "int8", 0.3, 1)
    m.op(126, 1, [a, c], [y], (101, {"adjoint_lhs": False, "adjoint_rhs": False}))
    k = m.tensor("k", (7, 12), "int8", 0.02, 0, rng.integers(-127, 128, (7, 12)))
    z = m.tensor("z", (2, 3, 5, 7), "int8", 0.25, -3)
    m.op(126, 1, [a, k], [z], (101, {"adjoint_lhs": False, "adjoint_rhs": True}))
    m.inputs, m.outputs = [a, c], [y, z]
    return write_tflite(m.model())


def transpose_conv_16x8(rng) -> bytes:
    """TRANSPOSE_CONV version 3 in 16x8 quantization (int16 activations with zero point 0,
    int8 per-channel weights, int64 bias): SAME padding, stride 2, and VALID, stride (2, 3)
    with a fused RELU.  TFLite's reference kernel accumulates in int64 and requantizes with
    MultiplyByQuantizedMultiplier's 64-bit form (a 16-bit multiplier)."""
    m = ModelBuilder()
    s_in = 0.002
    x = m.tensor("x", (1, 5, 4, 3), "int16", s_in, 0)
    m.inputs = [x]
    for i, (pad, st, act, oh, ow) in enumerate(((0, (2, 2), 0, 10, 8), (1, (2, 3), 1, 11, 12))):
        ws = rng.uniform(0.002, 0.01, 6)
        w = m.tensor(f"w{i}", (6, 3, 3, 3), "int8", list(ws), 0, rng.integers(-127, 128, (6, 3, 3, 3)))
        b = m.tensor(f"b{i}", (6,), "int64", list(ws * s_in), 0, rng.integers(-300000, 300000, 6))
        shape = m.tensor(f"shape{i}", (4,), "int32", None, 0, [1, oh, ow, 6])
        y = m.tensor(f"y{i}", (1, oh, ow, 6), "int16", 0.004, 0)
        m.op(67, 3, [shape, w, x, b], [y],
             (49, {"padding": pad, "stride_w": st[1], "stride_h": st[0], "fused_activation_function": act}))
        m.outputs.append(y)
    return write_tflite(m.model())


def batch_matmul_int16(rng) -> bytes:
    """BATCH_MATMUL version 3 (int16 operands and output, zero points 0): [2, 3, 5, 12] x
    [2, 3, 12, 7], and an adjoint_rhs product by a constant int16 [7, 12] (with a multiplier
    near 1: see below).  TFLite's reference kernel accumulates in int64 and requantizes with
    the 64-bit MultiplyByQuantizedMultiplier."""
    m = ModelBuilder()
    a = m.tensor("a", (2, 3, 5, 12), "int16", 0.0004, 0)
    c = m.tensor("c", (2, 3, 12, 7), "int16", 0.0005, 0)
    y = m.tensor("y", (2, 3, 5, 7), "int16", 0.3, 0)
    m.op(126, 3, [a, c], [y], (101, {"adjoint_lhs": False, "adjoint_rhs": False}))
    k = m.tensor("k", (7, 12), "int16", 0.0002, 0, rng.integers(-32767, 32768, (7, 12)))
    # Scales whose multiplier is 0x7FFFABCF (>= 0x7FFF0000): TFLite's 64-bit
    # MultiplyByQuantizedMultiplier saturates its 16-bit multiplier at 0x7FFF there.
    z = m.tensor("z", (2, 3, 5, 7), "int16", 0.08388691395521164, 0)
    m.op(126, 3, [a, k], [z], (101, {"adjoint_lhs": False, "adjoint_rhs": True}))
    m.inputs, m.outputs = [a, c], [y, z]
    return write_tflite(m.model())


MODELS = {"maximum_minimum_v2": maximum_minimum, "transpose_conv_v3": transpose_conv,
          "batch_matmul": batch_matmul, "transpose_conv_16x8": transpose_conv_16x8,
          "batch_matmul_int16": batch_matmul_int16}


def main() -> int:
    sys.path.insert(0, str(ROOT))
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in MODELS.items():
        rng = np.random.default_rng(1234)
        data = make(rng)
        (OUT / f"{name}.tflite").write_bytes(data)
        from ai_edge_litert.interpreter import Interpreter

        shapes = [(d["shape"], d["dtype"]) for d in Interpreter(model_content=data).get_input_details()]
        arrays: dict[str, list] = {}
        for _ in range(SAMPLES):
            xs = [rng.integers(np.iinfo(t).min, np.iinfo(t).max + 1, tuple(s)).astype(t) for s, t in shapes]
            for i, x in enumerate(xs):
                arrays.setdefault(f"input_{i}", []).append(x)
            for i, y in enumerate(reference_outputs(data, xs)):
                arrays.setdefault(f"ref_{i}", []).append(y)
        np.savez(OUT / f"{name}.npz", **{k: np.stack(v) for k, v in arrays.items()})
        print(f"wrote {OUT / name}.tflite/.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
