"""The TOSA reference interpreter (numpy): the project's golden model.

Importing this package registers every operator implementation in
``sim.reference.registry.OPS``.  Operator modules are imported if they exist (several are
written in parallel); an existing module that fails to import is a real error and is not
hidden.
"""
from __future__ import annotations

import importlib
import importlib.util

_OP_MODULES = [
    "ops_tensor",
    "ops_activation",
    "ops_conversion",
    "ops_table",
    "ops_elementwise",
    "ops_compare",
    "ops_reduce",
    "ops_layout",
    "ops_gather",
    "ops_image",
    "ops_control",
    "ops_data",
]

for _name in _OP_MODULES:
    if importlib.util.find_spec(f"{__name__}.{_name}") is not None:
        importlib.import_module(f"{__name__}.{_name}")

from sim.reference.interpreter import Interpreter, run_graph  # noqa: E402
from sim.reference.registry import OPS  # noqa: E402

__all__ = ["Interpreter", "run_graph", "OPS"]
