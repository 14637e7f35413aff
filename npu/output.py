"""Writing the files ``npu`` commands produce: one place that turns a failed write into the
one-line InvalidInput (exit 2) naming the file and what it was to hold."""
from __future__ import annotations

from pathlib import Path

from tosa_ir.errors import InvalidInput

__all__ = ["write_file", "write_text"]


def write_file(path: str, write, what: str) -> None:
    """Call ``write(path)``; an OSError becomes ``InvalidInput`` naming ``path`` and ``what``."""
    try:
        write(path)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot write {what}: {e.strerror or e}") from None


def write_text(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` (see :func:`write_file`)."""
    write_file(path, lambda p: Path(p).write_text(text), what)
