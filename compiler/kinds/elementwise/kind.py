"""Elementwise operators, TABLE, RESCALE/CAST and DEPTHWISE_CONV2D (depthwise.py) as
vector-unit programs over tiles (layer.py ``EltLayer``), lowered by lower.py."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.elementwise.layer import EltLayer
from compiler.kinds.elementwise.lower import elt_constants, lower_elementwise

KIND = Kind("elementwise", EltLayer, constants=elt_constants,
            lower=lambda layer, ctx, i: lower_elementwise(layer, ctx.flow, ctx.ext, ctx.config, i),
            vector_unit=True)
