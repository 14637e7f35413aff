"""Convolution on the MAC array: CONV2D -> RESCALE [-> CLAMP] fused (fusion.py), few-channel
strided convolutions tap-packed (tap_packing.py) or gathered by the DMA (im2col.py), tilings
searched (tiling.py; fully-connected layers stream their weights, fully_connected.py), weights
in tile order (weights.py), lowering (lower.py).  The one kind that chooses among plans: the driver picks a tiling per layer."""
from __future__ import annotations

from isa.config import NpuConfig

from compiler.core.ir import ConvLayer
from compiler.core.kind import Kind
from compiler.kinds.conv.im2col import Im2colConvLayer, plan as im2col_plan
from compiler.kinds.conv.lower import constant_names, lower_conv
from compiler.kinds.conv.tiling import plan_candidates
from compiler.kinds.conv.vector_share import array_part, fit_rows, plan_share, reduced_config, share_constants
from compiler.kinds.conv.weights import pack_params, pack_weights


def _constants(layer: ConvLayer, config: NpuConfig) -> dict[str, bytes]:
    names = constant_names(layer.name, layer.input_zp)
    out = {names["weights"]: pack_weights(layer, config),
           names["params"]: pack_params(layer, config)}
    if not isinstance(layer, Im2colConvLayer):        # the gather has no padding to fill
        out[names["fill"]] = bytes([layer.input_zp & 0xFF]) * config.bus_bytes
    if layer.vector_blocks:
        out.update(share_constants(layer, config))
    return out


def _candidates(layer: ConvLayer, config: NpuConfig, loops: bool) -> list:
    if isinstance(layer, Im2colConvLayer):
        return [im2col_plan(layer, config)]
    if layer.vector_blocks:
        # The array's blocks planned in what the vector unit's share leaves of the scratchpads
        share = plan_share(layer, config)
        plans = plan_candidates(array_part(layer, share, config), reduced_config(config, share), streaming=loops)
        for plan in plans:
            plan.share = fit_rows(share, layer, plan.th)
        return plans
    return plan_candidates(layer, config, streaming=loops)


KIND = Kind("conv", ConvLayer, constants=_constants, candidates=_candidates, emit=lower_conv)
