"""MAX_POOL2D and AVG_POOL2D of int8 brick tensors on VPOOL (layer.py, lower.py); pools of
rows tensors are elementwise layers (rows.py); select.py picks."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.pooling.layer import POOL_OPS, PoolLayer
from compiler.kinds.pooling.lower import lower_pool, pool_constants
from compiler.kinds.pooling.select import select_pool

KIND = Kind("pooling", PoolLayer, constants=pool_constants,
            lower=lambda layer, ctx, i: lower_pool(layer, ctx.ext, ctx.config, i),
            select={op: select_pool for op in POOL_OPS})
