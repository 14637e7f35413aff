"""TOSA graph IR, its .tosa flatbuffer serialisation, and the project's user-facing errors."""
from tosa_ir.errors import InvalidInput, NpuError, TosaError, TosaUnpredictable, Unsupported
from tosa_ir.graph import INT_RANGES, Block, Graph, Operator, Region, Tensor, numpy_dtype

__all__ = [
    "Block", "Graph", "Operator", "Region", "Tensor", "INT_RANGES", "numpy_dtype",
    "NpuError", "InvalidInput", "Unsupported", "TosaError", "TosaUnpredictable",
]
