"""CLAMP (spec 2.4.1), integer modes.

``min_val`` / ``max_val`` are values of the input type.  The TOSA 1.0 flatbuffer stores
them as raw little-endian bytes; ``tosa_ir.tosa_fb`` decodes them to numbers, but graphs
built by hand may still carry the bytes (a bytes object or a uint8 array), which are
decoded here the same way.
"""
from __future__ import annotations

import numpy as np

from sim import tosa_helpers as th
from sim.reference.ops_support import check_output_shape, check_types
from sim.reference.registry import register
from tosa_ir import INT_RANGES, numpy_dtype


def _clamp_value(ctx, key: str, dtype: str) -> int:
    value = ctx.attr(key)
    ctx.error_if(value is None, key, f"{key} is missing")
    if isinstance(value, (bytes, bytearray)) or (
            isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1):
        raw = bytes(np.asarray(bytearray(value) if isinstance(value, (bytes, bytearray))
                               else value, dtype=np.uint8))
        size = numpy_dtype(dtype).itemsize
        ctx.error_if(len(raw) < size, key, f"{key} holds {len(raw)} bytes, not a {dtype}")
        return int(np.frombuffer(raw[:size], dtype=numpy_dtype(dtype))[0])
    flat = np.asarray(value).reshape(-1)
    ctx.error_if(flat.size != 1, key, f"{key} must be a single value")
    number = int(flat[0])
    lo, hi = INT_RANGES[dtype]
    ctx.error_if(number < lo or number > hi, key, f"{key} is not a value of {dtype}")
    return number


@register("CLAMP")
def clamp(ctx, inputs):
    x = np.asarray(inputs[0])
    dtype = ctx.in_type(0)
    check_types(ctx, "input", (dtype, ctx.out_type()), [("int8", "int8"), ("int16", "int16")])
    lo = _clamp_value(ctx, "min_val", dtype)
    hi = _clamp_value(ctx, "max_val", dtype)
    ctx.error_if(hi < lo, "max_val", "max_val < min_val")
    check_output_shape(ctx, x.shape, text="shape(output) != shape(input)")
    return [th.apply_clip_s(x, lo, hi, ctx.require)]
