"""TOSA MATMUL on the MAC array (layer.py; selected through compiler/kinds/decompose/, which
builds its helper layers), lowered by lower.py."""
from __future__ import annotations

from compiler.core.kind import Kind
from compiler.kinds.matmul.layer import MatmulLayer
from compiler.kinds.matmul.lower import lower_matmul, matmul_constants

KIND = Kind("matmul", MatmulLayer, constants=matmul_constants,
            lower=lambda layer, ctx, i: lower_matmul(layer, ctx.flow, ctx.ext, ctx.config, i),
            vector_unit=True)
