"""TOSA flatbuffer frontend: the serialised graph is already our IR."""
from __future__ import annotations

from pathlib import Path

from tosa_ir import Graph
from tosa_ir.tosa_fb import read_tosa


def load_tosa(path) -> Graph:
    """Read a ``.tosa`` file; malformed files raise InvalidInput naming the problem."""
    return read_tosa(Path(path))
