"""Split a graph into one subgraph per compute layer, for per-layer reports.

A *unit* is one compute step: a fused CONV2D -> RESCALE [-> CLAMP] chain, or any other
operator the NPU has no data-movement lowering for (MAX_POOL2D, ...), together with the
data-movement operators feeding it (TRANSPOSE, SLICE, PAD, ...) back to the previous
compute step or a graph input.  Its subgraph reads what crosses that boundary as graph
inputs and writes the unit's result as its output, so each unit compiles (or fails) on its
own: ``python -m compiler.estimate.layers MODEL --per-layer`` reports every layer of a graph that
does not compile as a whole.
"""
from __future__ import annotations

from dataclasses import dataclass

from tosa_ir import Block, Graph, Operator
from tosa_ir.errors import NpuError

from compiler.core.operands import CONST_OPS
from compiler.kinds.conv.fusion import conv_chain
from compiler.kinds.movement.params import MOVEMENT_OPS


@dataclass
class Unit:
    """One compute step: ``name`` (its result tensor), the operators (graph order), and
    its subgraph, or the error that stopped building it."""

    name: str
    ops: list[Operator]
    graph: Graph | None = None
    error: NpuError | None = None

    def describe(self) -> str:
        kinds = [op.op for op in self.ops]
        return "+".join(dict.fromkeys(kinds))


def split_layers(graph: Graph) -> list[Unit]:
    """The units of ``graph``'s main block in execution order."""
    block = graph.main
    producers, consumers = block.producers(), block.consumers()
    taken: set[int] = set()
    units: list[Unit] = []
    for op in block.operators:
        if id(op) in taken or op.op in CONST_OPS or op.op in MOVEMENT_OPS:
            continue
        chain = [op]
        error = None
        if op.op == "CONV2D":
            try:
                chain = conv_chain(op, block, consumers)
            except NpuError as e:
                error = e
        taken.update(id(o) for o in chain)
        feed = _feeding(chain, producers, taken)
        ops = [o for o in block.operators if id(o) in {id(x) for x in feed + chain}]
        units.append(Unit(chain[-1].outputs[0], ops, error=error))
    # Data movement nobody computes from (e.g. a graph output's TRANSPOSE): one unit each.
    for op in block.operators:
        if op.op in MOVEMENT_OPS and id(op) not in taken:
            feed = _feeding([op], producers, taken)
            taken.add(id(op))
            ids = {id(o) for o in feed} | {id(op)}
            units.append(Unit(op.outputs[0], [o for o in block.operators if id(o) in ids]))
    for unit in units:
        if unit.error is None:
            unit.graph = _subgraph(graph, unit)
    return units


def _feeding(chain: list[Operator], producers: dict, taken: set[int]) -> list[Operator]:
    """Data-movement operators feeding ``chain`` (transitively), not yet in another unit."""
    found: list[Operator] = []
    todo = [name for op in chain for name in op.inputs]
    while todo:
        producer = producers.get(todo.pop())
        if producer is None or id(producer) in taken or producer.op not in MOVEMENT_OPS:
            continue
        taken.add(id(producer))
        found.append(producer)
        todo += producer.inputs
    return found


def _subgraph(graph: Graph, unit: Unit) -> Graph:
    block = graph.main
    made = {name for op in unit.ops for name in op.outputs}
    sub = Block(block.name)
    for op in unit.ops:
        for name in op.inputs + op.outputs:
            if name and name in block.tensors:
                sub.tensors[name] = block.tensors[name]
                tensor = block.tensors[name]
                if name not in made and not tensor.is_const and name not in sub.inputs:
                    sub.inputs.append(name)
    sub.operators = list(unit.ops)
    sub.outputs = [unit.name]
    return Graph.single_block(sub, version=graph.version, profiles=graph.profiles,
                              extensions=graph.extensions, source=graph.source)
