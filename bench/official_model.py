"""The official TOSA reference model (``tosa_reference_model`` of tosa-tools), for benchmarks.

A bench-only dependency, imported lazily: :func:`load` returns ``None`` when it is not
installed and callers report "not installed".  Product code never imports it.

The model's C++ prints warnings (e.g. about the file's serializer version) straight to
file descriptors 1 and 2; :func:`run` captures them so they do not break up the tables,
and keeps them for messages.
"""
from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator, Sequence

import numpy as np

NOT_INSTALLED = "not installed (pip install tosa-tools)"


def load() -> ModuleType | None:
    """The ``tosa_reference_model`` module, or ``None`` if it is not installed."""
    try:
        import tosa_reference_model
    except ImportError:
        return None
    return tosa_reference_model


@contextmanager
def _captured_fds(log: list[str]) -> Iterator[None]:
    """Send what C/C++ code writes to fds 1 and 2 into ``log`` instead of the terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            log.append(sink.read().decode(errors="replace"))


def run(model: ModuleType, tosa: bytes, inputs: Sequence[np.ndarray],
        level: str = "EIGHTK") -> tuple[str, list[np.ndarray], str]:
    """Run the model on serialized graph ``tosa``: (status, outputs, what it printed).

    ``status`` is "VALID", "ERROR" or "UNPREDICTABLE" (the model's GraphStatus without
    the ``TOSA_`` prefix); outputs come in the graph's output order.
    """
    log: list[str] = []
    error = None
    with _captured_fds(log):
        try:
            outputs, status = model.run(tosa, list(inputs), tosa_level=level)
        except ValueError as e:  # the binding's way of rejecting an illegal graph
            error = e
    text = "".join(log)
    if error is not None:
        return "ERROR", [], f"{text}{error}"
    return status.name.removeprefix("TOSA_"), [np.asarray(o) for o in outputs], text
