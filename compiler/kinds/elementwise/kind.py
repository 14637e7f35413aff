"""Elementwise operators, TABLE, RESCALE/CAST and DEPTHWISE_CONV2D (depthwise.py) as
vector-unit programs over tiles (layer.py ``EltLayer``), lowered by lower.py."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.elementwise.layer import ELEMENTWISE_OPS, EltLayer, select_elementwise
from compiler.kinds.elementwise.lower import elt_constants, lower_elementwise

KIND = Kind("elementwise", EltLayer, constants=elt_constants,
            lower=lambda layer, ctx, i: lower_elementwise(layer, ctx.flow, ctx.ext, ctx.config, i),
            select={op: select_elementwise for op in ELEMENTWISE_OPS}, rows_ops=ELEMENTWISE_OPS,
            vector_unit=True)
