"""GATHER and SCATTER (spec section 2.11), integer modes, with numpy fancy indexing.

Shapes follow the spec: values ``[N,K,C]``, indices ``[N,W]`` (int32), gathered/scattered
rows ``[N,W,C]``.  Out-of-range indices and SCATTER's repeated output positions are REQUIRE
failures (unpredictable), checked on the whole index tensor before any data moves.
"""
from __future__ import annotations

import numpy as np

from sim.reference.ops_support import check_output_shape, check_types, out_array
from sim.reference.registry import register

# bool: TOSA 1.0's GATHER/SCATTER move bool_t as well (the official reference model runs
# them; the conformance suite's configuration lists them from 1.1).
DATA_TYPES = ("bool", "int8", "int16", "int32")


def _check_indices(ctx, indices: np.ndarray, n: int, k: int) -> None:
    ctx.error_if(ctx.in_type(1) != "int32", "indices", "index_t != int32_t")
    ctx.error_if(indices.ndim != 2 or indices.shape[0] != n, "indices",
                 "shape(indices) != [N,W]")
    ctx.require(np.all((indices >= 0) & (indices < k)), "0 <= k && k < K")


@register("GATHER")
def gather(ctx, inputs):
    values, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    check_types(ctx, "values", (ctx.in_type(0), ctx.out_type()), [(t, t) for t in DATA_TYPES])
    ctx.error_if(values.ndim != 3, "values", "rank(values) != 3")
    n, k, c = values.shape
    _check_indices(ctx, indices, n, k)
    check_output_shape(ctx, (n, indices.shape[1], c), text="shape(output) != [N,W,C]")
    result = values[np.arange(n)[:, None], indices]
    return [out_array(ctx, result)]


@register("SCATTER")
def scatter(ctx, inputs):
    values_in, indices, rows = (np.asarray(a) for a in inputs[:3])
    check_types(ctx, "values_in", (ctx.in_type(0), ctx.in_type(2), ctx.out_type()),
                [(t, t, t) for t in DATA_TYPES])
    ctx.error_if(values_in.ndim != 3, "values_in", "rank(values_in) != 3")
    n, k, c = values_in.shape
    _check_indices(ctx, indices, n, k)
    w = indices.shape[1]
    ctx.error_if(rows.shape != (n, w, c), "input", "shape(input) != [N,W,C]")
    check_output_shape(ctx, (n, k, c), text="shape(values_out) != [N,K,C]")
    # output_modified[n,k,c] == false: no index may repeat within one batch.
    ordered = np.sort(indices, axis=1)
    ctx.require(not np.any(ordered[:, 1:] == ordered[:, :-1]), "output_modified[n,k,c] == false")
    result = values_in.copy()
    result[np.arange(n)[:, None], indices] = rows
    return [out_array(ctx, result)]
