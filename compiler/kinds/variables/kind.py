"""DIM and the variable operators (VARIABLE, VARIABLE_WRITE, VARIABLE_READ): buffers, views and
write-back copies of other kinds (layer.py); selection only."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.variables.layer import VARIABLE_LOWERING

KIND = Kind("variables", select=dict(VARIABLE_LOWERING), rows_ops=("VARIABLE_WRITE",))
