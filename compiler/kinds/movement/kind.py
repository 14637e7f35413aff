"""Data movement: brick copies through ASRAM (``COPY``: copy.py, for the walk's views that need
bytes moved) and rows-layout moves by element-mode DMA (``MOVES``: layer.py, lower.py);
params.py checks the operators' parameters, brick_rows.py moves values between lanes."""
from __future__ import annotations

from isa.config import NpuConfig

from compiler.core.dma import fill_name
from compiler.core.ir import CopyLayer
from compiler.core.kind import Kind
from compiler.kinds.movement.copy import CopyPlan, lower_copy
from compiler.kinds.movement.layer import MoveLayer
from compiler.kinds.movement.lower import lower_moves, move_constants


def _copy_constants(layer: CopyLayer, config: NpuConfig) -> dict[str, bytes]:
    if not any(layer.pad):
        return {}
    return {fill_name(layer.pad_value): bytes([layer.pad_value & 0xFF]) * config.bus_bytes}


COPY = Kind("copy", CopyLayer, constants=_copy_constants,
            lower=lambda layer, ctx, i: CopyPlan(layer, lower_copy(layer, ctx.ext, ctx.config, i)))
MOVES = Kind("moves", MoveLayer, constants=lambda layer, config: move_constants(layer),
             lower=lambda layer, ctx, i: lower_moves(layer, ctx.flow, ctx.ext, ctx.config, i),
             vector_unit=True)
