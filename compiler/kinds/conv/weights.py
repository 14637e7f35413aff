"""Weight and parameter encoding: the constant data of a layer, in the order the NPU reads it.

Weights go to external memory in *tile order*: for every output-channel block ``ob``, input-
channel block ``cb`` and kernel tap ``(ky, kx)`` one weight tile of ``array_rows`` WSRAM rows
(row ``k`` = input channel ``cb*R + k``, lane ``n`` = output channel ``ob*C + n``).  One output-
channel block's weights for a run of input-channel blocks are therefore contiguous, which
is what the tiler's weight groups load with one DMA.  Channels past the tensor's are filled
with the weight zero point, so they contribute exactly zero to every accumulator whatever
the padding lanes of the input hold.

A depthwise layer has one tile per output block and tap (its input block's, diagonal).

Per-channel parameters are three PSRAM rows per output-channel block: bias, multiplier,
shift (int32 lanes), the layout ACT reads at ``param_addr``.
"""
from __future__ import annotations

import numpy as np

from isa.config import NpuConfig

from compiler.core.ir import ConvLayer
from compiler.core.views import ceil_div
from compiler.kinds.conv.plan import PARAM_ROWS


def pack_weights(layer: ConvLayer, config: NpuConfig) -> bytes:
    if layer.depth_multiplier:
        return _pack_depthwise(layer, config)
    rows, cols = config.array_rows, config.array_cols
    oc, kh, kw, ic = layer.weights.shape
    cbo, cbi = ceil_div(oc, cols), ceil_div(ic, rows)
    padded = np.full((cbo * cols, kh, kw, cbi * rows), layer.weight_zp, dtype=np.int8)
    padded[:oc, :, :, :ic] = layer.weights
    # [ob][n][ky][kx][cb][k] -> [ob][cb][ky][kx][k][n]
    tiles = padded.reshape(cbo, cols, kh, kw, cbi, rows).transpose(0, 4, 2, 3, 5, 1)
    return np.ascontiguousarray(tiles).tobytes()


def _pack_depthwise(layer: ConvLayer, config: NpuConfig) -> bytes:
    """Depthwise weights: per output block ``ob`` and tap one tile reading input block
    ``ob // M`` (ConvPlan.reduction_groups): lane ``n`` (output channel ``o = ob*C + n``)
    holds its kernel value in row ``o // M - (ob // M) * R`` (its input channel), every
    other entry the weight zero point, which adds exactly zero."""
    rows, cols = config.array_rows, config.array_cols
    m = layer.depth_multiplier
    oc, kh, kw, _ = layer.weights.shape
    cbo = ceil_div(oc, cols)
    tiles = np.full((cbo, kh, kw, rows, cols), layer.weight_zp, dtype=np.int8)
    o = np.arange(oc)
    ob, n = o // cols, o % cols
    k = o // m - (ob // m) * rows
    tiles[ob, :, :, k, n] = layer.weights[o, :, :, 0]
    return np.ascontiguousarray(tiles).tobytes()


def pack_params(layer: ConvLayer, config: NpuConfig) -> bytes:
    cols = config.array_cols
    oc = layer.out_shape[3]
    cbo = ceil_div(oc, cols)
    params = np.zeros((PARAM_ROWS, cbo * cols), dtype="<i4")
    params[0, :oc] = layer.bias
    params[1, :oc] = layer.multiplier
    params[2, :oc] = layer.shift
    # [row][ob][n] -> [ob][row][n]
    return np.ascontiguousarray(params.reshape(PARAM_ROWS, cbo, cols).transpose(1, 0, 2)).tobytes()
