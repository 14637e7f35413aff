"""Frontends: model files -> tosa_ir.Graph.  ``load_graph`` picks one by file content."""
from __future__ import annotations

from pathlib import Path

from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, Unsupported


def load_graph(path) -> Graph:
    """Read the model at ``path`` (TOSA flatbuffer for now) as a graph."""
    path = Path(path)
    try:
        head = path.open("rb").read(8)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read: {e.strerror}") from None
    if path.suffix == ".tosa" or head[4:8] == b"TOSA":
        from compiler.frontends.tosa import load_tosa

        return load_tosa(path)
    raise Unsupported(f"{path}: unknown model format (supported: .tosa)")
