"""The layer-kind interface: what the driver (compiler/driver.py) and the dataflow walk
(compiler/dataflow.py) call for each kind of layer.

A kind is one package under compiler/kinds/ (conv on the MAC array, wide conv, matmul,
elementwise, pooling, reduction, data movement, ...) holding its selection from the TOSA
graph, its planning and its lowering to instructions; its ``kind.py`` describes it with a
:class:`Kind`, and compiler/kinds/registry.py lists every kind once.  The driver loops over
layers and asks each layer's kind, in pipeline order:

1. ``candidates(layer, config, loops)`` -- only kinds that choose among plans (convolutions:
   tilings that trade cycles for instructions, cheapest first; the driver picks one per layer
   so the whole program fits the instruction memory);
2. ``constants(layer, config)`` -- the constant data the layer reads (weights, parameters,
   fills, tables) by name; memory planning gives each an external address;
3. ``lower(layer, ctx, index)`` -- kinds without choices: the layer's :class:`Plan`
   (instructions with footprints) once addresses are known (``ctx``: :class:`Lowering`);
4. ``emit(plan, ext, config, index)`` -- kinds with choices: the chosen plan's instructions.

``select`` maps TOSA operator names to functions ``fn(walk, op)`` the dataflow walk calls to
turn an operator into layers and views (``walk``: compiler/core/dataflow.py ``Walk``); they are
supported operators from then on.  ``rows_ops`` are those of them that read tensors in the rows
layout (isa/layout.py), so their producers need not write bricks.
``reads_bricks(walk, op)``: for an operator of ``rows_ops`` that reads bricks after all when
the kind decides so (a depthwise convolution chosen for the MAC array), True.
``vector_unit`` kinds get the graph's ERROR_IF checks (compiler/graph/validate.py) before
lowering, since their checks are not complete.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from isa.config import NpuConfig

from compiler.core.dataflow import Dataflow

__all__ = ["Kind", "Lowering"]


@dataclass(frozen=True)
class Lowering:
    """What a lowering needs beside its layer: the dataflow (views of every tensor), the
    external memory plan (compiler/program/memplan.py ``ExtPlan``), the configuration, and
    whether the program may use LOOPs."""

    flow: Dataflow
    ext: Any
    config: NpuConfig
    loops: bool


@dataclass(frozen=True)
class Kind:
    """One layer kind (see the module docstring); ``layer_type`` is the layer class it lowers
    (None for kinds that only select: they build other kinds' layers)."""

    name: str
    layer_type: type | None = None
    constants: Callable[[Any, NpuConfig], dict[str, bytes]] | None = None
    lower: Callable[[Any, Lowering, int], Any] | None = None
    candidates: Callable[[Any, NpuConfig, bool], list] | None = None
    emit: Callable[[Any, Any, NpuConfig, int], list] | None = None
    select: dict[str, Callable[[Any, Any], None]] = field(default_factory=dict)
    rows_ops: tuple[str, ...] = ()
    reads_bricks: Callable[[Any, Any], bool] | None = None
    vector_unit: bool = False

    def __post_init__(self):
        lowers = (self.lower is not None) + (self.candidates is not None and self.emit is not None)
        if (self.candidates is None) != (self.emit is None) or lowers != (self.layer_type is not None):
            raise ValueError(f"kind {self.name}: a layer type with lower, or with candidates and emit")
