"""TABLE (spec 2.5.17): int8 256-entry lookup, int16 513-entry interpolated lookup.

The table is input tensor 1 in TOSA 1.0 (and the draft's MT profile) or the ``table``
attribute in the draft's BI/MI profiles.  A table of the wrong length is an ERROR_IF in
TOSA 1.0 graphs (as the official reference model checks) and a REQUIRE in draft graphs
(as the draft spec says).
"""
from __future__ import annotations

import numpy as np

from sim import tosa_helpers as th
from sim.reference.ops_support import check_output_shape, check_types, has_input, operand
from sim.reference.registry import register

TABLE_SIZE = {"int8": 256, "int16": 513}


@register("TABLE")
def table(ctx, inputs):
    x = np.asarray(inputs[0])
    in_t, out_t = ctx.in_type(0), ctx.out_type()
    table_t = ctx.in_type(1) if has_input(ctx, 1) else in_t
    check_types(ctx, "input", (in_t, table_t, out_t),
                [("int8", "int8", "int8"), ("int16", "int16", "int32")], fp_modes=False)
    values = np.asarray(operand(ctx, inputs, 1, "table")).astype(np.int64)
    ctx.error_if(values.ndim != 1, "table", "rank(table) != 1")
    # TOSA 1.0 made the table length an ERROR_IF; the draft spec has it as a REQUIRE.
    size_ok = values.shape[0] == TABLE_SIZE[in_t]
    if ctx.is_tosa_1:
        ctx.error_if(not size_ok, "table", "length(table) != TABLE_SIZE")
    else:
        ctx.require(size_ok, "length(table) == TABLE_SIZE")
    check_output_shape(ctx, x.shape, text="shape(output) != shape(input)")
    if in_t == "int8":
        return [th.lookup_int8(values, x)]
    return [th.apply_lookup_s(values, x, ctx.require)]
