"""Quantization grids in a float graph a frontend built, before the quantizer lowers it.

* :func:`same_grid`: two per-tensor parameters are the same grid (float32 scales compared
  to a relative 1e-6, as converters store them).
* :func:`requantizing_pools`: an unpadded average pool whose given output grid (on its
  result, or after the reshapes that follow it) is not its input's becomes a depthwise
  convolution, so the quantizer rounds once onto that grid.
* :func:`fresh_name`: an unused tensor name.

Used by the OpenVINO (FakeQuantize) and NNEF (graph.quant) frontends.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.quantize.qparams import QParams
from tosa_ir import Graph, Operator, Tensor

__all__ = ["fresh_name", "requantizing_pools", "same_grid"]


def same_grid(a: QParams, b: QParams) -> bool:
    return a.zp == b.zp and bool(np.isclose(a.scalar_scale, b.scalar_scale, rtol=1e-6))


def fresh_name(block, base: str) -> str:
    """``base``, or ``base_<n>`` with the first ``n`` not yet a tensor of ``block``."""
    name, i = base, 1
    while name in block.tensors:
        name = f"{base}_{i}"
        i += 1
    return name


def requantizing_pools(graph: Graph, given: dict[str, QParams]) -> list[str]:
    """Unpadded AVG_POOL2D whose FakeQuantize grid differs from its input's -> depthwise.

    The quantizer keeps an int8 AVG_POOL2D on its input's grid (TOSA's integer average
    pooling cannot change the scale), where the source rounds the average once onto the
    grid of its result (OpenVINO's FakeQuantize after the pool; TFLite's MEAN or
    AVERAGE_POOL_2D with output parameters of their own, as nnef-tools' graph.quant keeps
    them) (e.g. a global average pool before the classifier,
    whose output range is narrower).  Without padding the average is a depthwise
    convolution with the constant kernel ``1 / (kh * kw)`` (exact in int8: code 127,
    scale ``1 / (127 kh kw)``), which the quantizer requantizes once, onto the given grid.
    """
    notes = []
    block = graph.main
    consumers = block.consumers()
    for index, op in enumerate(block.operators):
        if op.op != "AVG_POOL2D" or any(op.attrs.get("pad", [0])):
            continue
        src, out = op.inputs[0], op.outputs[0]
        want = _grid_after(block, out, given, consumers)
        if want is None or (src in given and same_grid(given[src], want)):
            continue
        given[out] = want
        kh, kw = op.attrs["kernel"]
        channels = block.tensors[src].shape[-1]
        weight = np.full((kh, kw, channels, 1), 1.0 / (kh * kw), np.float32)
        wname, bname = fresh_name(block, out + "_avg_weight"), fresh_name(block, out + "_avg_bias")
        block.add_tensor(Tensor(wname, weight.shape, "fp32", weight))
        block.add_tensor(Tensor(bname, (channels,), "fp32", np.zeros(channels, np.float32)))
        block.operators[index] = Operator(
            "DEPTHWISE_CONV2D", [src, wname, bname, op.inputs[1], op.inputs[2]], [out],
            {"pad": [0, 0, 0, 0], "stride": list(op.attrs["stride"]), "dilation": [1, 1],
             "local_bound": False, "acc_type": "FP32"}, op.location)
        notes.append(f"{op.location}: average pooling as a depthwise convolution so that it "
                     f"rounds once onto the given grid of its result")
    return notes


def _grid_after(block, name: str, given: dict[str, QParams], consumers) -> QParams | None:
    """The grid given for ``name``, or for the end of the layout-only chain (RESHAPE,
    TRANSPOSE, IDENTITY, each the only reader) that follows it: OpenVINO's TFLite frontend
    puts the MEAN's FakeQuantize after the reshapes that drop its kept dimensions."""
    while name not in given:
        users = consumers.get(name, [])
        if name in block.outputs or len(users) != 1 or \
                users[0].op not in ("RESHAPE", "TRANSPOSE", "IDENTITY"):
            return None
        name = users[0].outputs[0]
    return given[name]
