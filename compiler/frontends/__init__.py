"""Frontends: model files -> tosa_ir.Graph.  ``load_graph`` picks one by file content.

| format | detected by | frontend |
|---|---|---|
| TOSA flatbuffer | file identifier ``TOSA`` (or ``.tosa``) | compiler/frontends/tosa/load.py |
| NNEF | a folder with graph.nnef, a ``.nnef`` file, or a tar/tgz holding graph.nnef | compiler/frontends/nnef/load.py |
| Circle / TFLite | file identifier ``CIR0`` / ``TFL3`` (or ``.circle`` / ``.tflite``) | compiler/frontends/circle/load.py |
| OpenVINO IR | ``.xml`` (with its ``.bin`` beside it) | compiler/frontends/openvino/load.py |
"""
from __future__ import annotations

from pathlib import Path

from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, Unsupported

FORMATS = "TOSA (.tosa), NNEF (graph.nnef, folder, .tgz/.tar), Circle (.circle), TFLite (.tflite), OpenVINO IR (.xml)"


def detect_format(path) -> str:
    """The format of the model at ``path``: "tosa", "nnef", "circle" or "openvino"."""
    path = Path(path)
    if not path.exists():
        raise InvalidInput(f"{path}: no such file or folder")
    from compiler.frontends.nnef.load import looks_like_nnef

    if looks_like_nnef(path):
        return "nnef"
    if path.is_dir():
        raise InvalidInput(f"{path}: a folder, but not an NNEF model (no graph.nnef in it)")
    from tosa_ir.safe_io import check_regular_file

    check_regular_file(path, "the model")       # a FIFO would block, a device never end
    try:
        with path.open("rb") as f:
            head = f.read(64)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read: {e.strerror}") from None
    ident = head[4:8]
    suffix = path.suffix.lower()
    if ident == b"TOSA" or suffix == ".tosa":
        return "tosa"
    if ident in (b"CIR0", b"TFL3") or suffix in (".circle", ".tflite"):
        return "circle"
    if suffix == ".xml" or head.lstrip().startswith(b"<?xml") or head.lstrip().startswith(b"<net"):
        return "openvino"
    raise Unsupported(f"{path}: unknown model format (supported: {FORMATS})")


def load_graph(path) -> Graph:
    """Read the model at ``path`` as a TOSA graph, whatever its format; recursive control
    flow is refused here, for every consumer (tosa_ir.Graph.check_calls)."""
    graph = _load_graph(path)
    graph.check_structure()
    return graph


def _load_graph(path) -> Graph:
    fmt = detect_format(path)
    if fmt == "tosa":
        from compiler.frontends.tosa.load import load_tosa

        return load_tosa(path)
    if fmt == "nnef":
        from compiler.frontends.nnef.load import load_nnef

        return load_nnef(path)
    if fmt == "circle":
        from compiler.frontends.circle.load import load_circle

        return load_circle(path)
    from compiler.frontends.openvino.load import load_openvino

    return load_openvino(path)
