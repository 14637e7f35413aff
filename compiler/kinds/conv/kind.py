"""Convolution on the MAC array: CONV2D -> RESCALE [-> CLAMP] fused (fusion.py), few-channel
strided convolutions tap-packed (tap_packing.py), tilings searched (tiling.py; fully-connected
layers stream their weights, fully_connected.py), weights in tile order (weights.py), lowering
(lower.py).  The one kind that chooses among plans: the driver picks a tiling per layer."""
from __future__ import annotations

from isa.config import NpuConfig

from compiler.core.ir import ConvLayer
from compiler.core.kind import Kind
from compiler.kinds.conv.lower import constant_names, lower_conv
from compiler.kinds.conv.tiling import plan_candidates
from compiler.kinds.conv.weights import pack_params, pack_weights


def _constants(layer: ConvLayer, config: NpuConfig) -> dict[str, bytes]:
    names = constant_names(layer.name, layer.input_zp)
    return {names["weights"]: pack_weights(layer, config),
            names["params"]: pack_params(layer, config),
            names["fill"]: bytes([layer.input_zp & 0xFF]) * config.bus_bytes}


KIND = Kind("conv", ConvLayer, constants=_constants,
            candidates=lambda layer, config, loops: plan_candidates(layer, config, streaming=loops),
            emit=lower_conv)
