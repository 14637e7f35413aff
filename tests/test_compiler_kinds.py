"""The layer-kind registry (compiler/kinds/registry.py): every kind well formed, every layer
class the compiler makes lowered by exactly one kind, every selected operator supported."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from compiler.core.ir import ConvLayer, CopyLayer
from compiler.core.kind import Kind
from compiler.dataflow import ROWS_OPS, SUPPORTED_OPS
from compiler.kinds.conv.tap_packing import RepackLayer
from compiler.kinds.elementwise.layer import EltLayer
from compiler.kinds.matmul.layer import MatmulLayer
from compiler.kinds.movement.layer import MoveLayer
from compiler.kinds.mxu_conv.layer import MxuConvLayer
from compiler.kinds.pooling.layer import PoolLayer
from compiler.kinds.reduce.layer import ReduceLayer
from compiler.kinds.registry import KINDS, SELECTORS, kind_of


def test_names_unique():
    names = [kind.name for kind in KINDS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("layer_type, name", [
    (ConvLayer, "conv"), (RepackLayer, "conv"), (CopyLayer, "copy"), (PoolLayer, "pooling"),
    (EltLayer, "elementwise"), (ReduceLayer, "reduce"), (MoveLayer, "moves"), (MatmulLayer, "matmul"),
    (MxuConvLayer, "mxu_conv"),
])
def test_every_layer_class_has_its_kind(layer_type, name):
    layer = layer_type.__new__(layer_type)          # kind_of looks at the class only
    assert kind_of(layer).name == name


def test_unknown_layer_is_a_compiler_bug():
    @dataclass
    class Stray:
        name: str = "stray"

    with pytest.raises(TypeError, match="Stray"):
        kind_of(Stray())


def test_selected_operators_are_supported():
    assert set(SELECTORS) <= set(SUPPORTED_OPS)
    assert {op for kind in KINDS for op in kind.rows_ops} <= set(ROWS_OPS)


def test_a_kind_lowers_one_way():
    with pytest.raises(ValueError):
        Kind("half", ConvLayer, candidates=lambda layer, config, loops: [])      # no emit
    with pytest.raises(ValueError):
        Kind("none", ConvLayer)                                                  # no lowering
    with pytest.raises(ValueError):
        Kind("both", ConvLayer, lower=lambda layer, ctx, i: None,
             candidates=lambda layer, config, loops: [], emit=lambda plan, ext, config, i: [])
    assert Kind("select-only", select={"X": lambda walk, op: None}).layer_type is None
