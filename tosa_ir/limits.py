"""The limits every reader and runner of untrusted input applies, in one place.

Model files, program images, inputs and conformance folders come from people we do not know
(SECURITY.md).  A file of a few bytes can declare a tensor of 10^13 elements, a loop that
never ends or a configuration with 2^40 rows; each such declaration is checked against a
limit below *before* anything is allocated or run, and a violation is a one-line
``InvalidInput`` (exit 2).

The limits are deliberately generous for real networks (AlexNet's largest tensor is 38 M
elements, its weights 61 MB) and small enough that a hostile file cannot exhaust a
workstation.  ``NPU_MEMORY_BUDGET`` (bytes, in the environment) raises or lowers the memory
budget for one run; everything else is fixed.

This module imports nothing of ours and nothing heavy, so every package may use it.
"""
from __future__ import annotations

import os

__all__ = [
    "MAX_LOG2_SIZE", "MAX_RANK", "MAX_TENSOR_ELEMENTS", "MAX_JSON_BYTES", "MAX_JSON_DEPTH",
    "MAX_LOOP_ITERATIONS", "MAX_TEXT_BYTES", "memory_budget", "check_elements",
]

# TOSA level 8K (tosa-spec "Levels"): tensors of at most 2^31 - 1 elements per dimension and
# (1 << 32) - 1 bytes overall, rank at most 6.  The reference interpreter and the compiler
# target this level; a larger declaration is refused before anything is allocated.
MAX_LOG2_SIZE = 31
MAX_RANK = 6
MAX_TENSOR_ELEMENTS = (1 << MAX_LOG2_SIZE) - 1

# Default memory budget: the most bytes one declared tensor, archive member or file may make
# us hold.  2 GiB: a machine that runs this toolchain has at least that to spare, and no
# model we know needs a single buffer that large.
DEFAULT_MEMORY_BUDGET = 2 << 30

# JSON headers (program images, desc.json, configurations) are small; a larger one is hostile.
MAX_JSON_BYTES = 64 << 20
# Nesting depth of JSON we accept (json.loads recurses; Python's limit is ~1000 frames).
MAX_JSON_DEPTH = 64
# Text model files (graph.nnef, OpenVINO .xml).
MAX_TEXT_BYTES = 256 << 20

# WHILE_LOOP body executions per run of the reference interpreter, over all loops.  A loop
# in a TOSA graph runs a sequence length or a few refinement steps; 10,000 iterations is far
# beyond those and stops a loop that never ends within seconds (the old 10^6 took minutes).
MAX_LOOP_ITERATIONS = 10_000


def memory_budget() -> int:
    """Bytes one declared buffer may take: ``NPU_MEMORY_BUDGET`` or the 2 GiB default."""
    value = os.environ.get("NPU_MEMORY_BUDGET", "")
    try:
        budget = int(value)
    except ValueError:
        return DEFAULT_MEMORY_BUDGET
    return budget if budget > 0 else DEFAULT_MEMORY_BUDGET


def check_elements(shape, itemsize: int, what: str) -> int:
    """Number of elements of ``shape``; ValueError naming ``what`` if a dimension is negative
    or the tensor exceeds the TOSA level or the memory budget.

    Computed with Python integers (``np.prod`` wraps around at 2^63 and can return 0).
    """
    count = 1
    for d in shape:
        d = int(d)
        if d < 0:
            raise ValueError(f"{what}: negative dimension in shape {list(shape)}")
        count *= d
    if count > MAX_TENSOR_ELEMENTS:
        raise ValueError(f"{what}: shape {list(shape)} has {count} elements, more than the "
                         f"{MAX_TENSOR_ELEMENTS} a tensor may have (TOSA level 8K)")
    if count * max(itemsize, 1) > memory_budget():
        raise ValueError(f"{what}: shape {list(shape)} needs {count * max(itemsize, 1)} bytes, more "
                         f"than the memory budget of {memory_budget()} bytes (NPU_MEMORY_BUDGET)")
    return count
