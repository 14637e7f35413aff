"""Convolutions with wide outputs on the MAC array (int32/int48 results, int16 x int8, int4
weights, CONV3D, TRANSPOSE_CONV2D, DEPTHWISE_CONV2D with a channel multiplier, draft
FULLY_CONNECTED, int16 BILINEAR RESIZE): layer.py selects, lower.py (and lower_loops.py) lower."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.mxu_conv.layer import MxuConvLayer, mxu_conv
from compiler.kinds.mxu_conv.lower import lower_mxu_conv, mxu_conv_constants

KIND = Kind("mxu_conv", MxuConvLayer, constants=mxu_conv_constants,
            lower=lambda layer, ctx, i: lower_mxu_conv(layer, ctx.flow, ctx.ext, ctx.config, i, ctx.loops),
            select={op: mxu_conv for op in ("CONV3D", "TRANSPOSE_CONV2D", "FULLY_CONNECTED")},
            rows_ops=("CONV3D", "TRANSPOSE_CONV2D", "FULLY_CONNECTED"),
            vector_unit=True)
