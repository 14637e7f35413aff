"""Comparison operators EQUAL, GREATER, GREATER_EQUAL (spec section 2.8), integer modes.

Integer inputs have no NaN, so the result is the plain comparison, broadcast per the spec.
"""
from __future__ import annotations

import numpy as np

from sim.reference.ops_support import check_types, elementwise_shape, level_rank, out_array
from sim.reference.registry import register


def _comparison(fn):
    def impl(ctx, inputs):
        a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
        check_types(ctx, "input1", (ctx.in_type(0), ctx.in_type(1), ctx.out_type()),
                    [("int32", "int32", "bool")])
        shape = elementwise_shape(ctx, [a, b])
        level_rank(ctx, shape)
        return [out_array(ctx, fn(a, b))]
    return impl


register("EQUAL")(_comparison(np.equal))
register("GREATER")(_comparison(np.greater))
register("GREATER_EQUAL")(_comparison(np.greater_equal))
