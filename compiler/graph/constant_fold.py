"""TOSA-level constant folding: every operator whose inputs are all compile-time constants
becomes a constant (CONST, or CONST_SHAPE for shape values), computed by the reference
interpreter's own operator code.

Why: converters (tosa-converter-for-tflite + ``tosa-opt``, PyTorch/ExecuTorch and MLIR
pipelines) often leave the weights of a convolution behind constant-foldable operators
(CONST -> TRANSPOSE / RESHAPE / SLICE / PAD / CAST / RESCALE / arithmetic -> CONV2D).  The
compiler's passes need the weights and biases *as constants*; folding first makes any graph
whose weights are constants after folding compile, whatever chain of operators made them.

One definition: the values come from ``sim.reference`` (``Interpreter.execute``, the same
code, checks included, that runs the graph), so a folded graph computes exactly what the
unfolded one does.  An operator is folded only when that evaluation succeeds: one that
breaks an ERROR_IF, a REQUIRE or a LEVEL_CHECK on its constants, or that the interpreter does
not support, is left in place so the validation and lowering passes report it as they would
have.  Folding runs in topological (listed) order, so chains fold in one sweep.

Not folded: control flow and variables (COND_IF, WHILE_LOOP, VARIABLE*), operators without
inputs (CONST, CONST_SHAPE themselves), and results larger than :data:`MAX_FOLD_ELEMENTS`
(a constant that big costs more memory than the operator it replaces: TILE of a constant).
Constants that only fed folded operators are dropped (with their CONST operators).

Timing: one reference evaluation per folded operator, on constants only (weights): a few
milliseconds for the bundled models; nothing when no operator has only constant inputs.
The caller's graph is never modified (blocks that change are copied; tensors are shared).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tosa_ir import Block, Graph, Operator, Region
from tosa_ir.errors import NpuError

__all__ = ["fold_constants", "NOT_FOLDED", "MAX_FOLD_ELEMENTS"]

NOT_FOLDED = frozenset({"CONST", "CONST_SHAPE", "COND_IF", "WHILE_LOOP", "VARIABLE",
                        "VARIABLE_READ", "VARIABLE_WRITE", "CUSTOM"})
# Largest folded result (elements): larger constants stay computed on the NPU.
MAX_FOLD_ELEMENTS = 1 << 22


def fold_constants(graph: Graph) -> Graph:
    """``graph`` with every foldable operator replaced by a constant (see the module doc).
    Returns ``graph`` itself when nothing folds."""
    try:
        graph.main
    except ValueError:
        return graph
    regions, changed = [], False
    for region in graph.regions:
        blocks = []
        for block in region.blocks:
            new = _fold_block(graph, block)
            changed |= new is not block
            blocks.append(new)
        regions.append(Region(region.name, blocks))
    if not changed:
        return graph
    return dataclasses.replace(graph, regions=regions)


def _constant_names(block: Block) -> set[str]:
    """Tensors of ``block`` whose value is known when compiling."""
    return {name for name, t in block.tensors.items()
            if t.data is not None and not t.variable and name not in block.inputs}


def _fold_block(graph: Graph, block: Block) -> Block:
    from sim.reference.interpreter import Interpreter

    known = _constant_names(block)
    if not any(_foldable(op, block, known) for op in block.operators):
        return block
    interp = Interpreter(graph, level="8K", max_loop_iterations=0)
    tensors = dict(block.tensors)
    env = {name: tensors[name].data for name in known}
    operators: list[Operator] = []
    folded_inputs: set[str] = set()
    for op in block.operators:
        if not _foldable(op, block, known):
            operators.append(op)
            continue
        try:
            with np.errstate(all="ignore"):
                interp.execute(op, block, env)
        except (NpuError, ValueError, KeyError, IndexError, TypeError, OverflowError):
            operators.append(op)           # left for validation / lowering to judge
            for name in op.outputs:
                env.pop(name, None)
            continue
        for name in op.outputs:
            tensor = tensors[name]
            value = np.asarray(env[name]).reshape(tensor.shape)
            tensors[name] = dataclasses.replace(tensor, data=value)
            known.add(name)
            operators.append(Operator("CONST_SHAPE" if tensor.dtype == "shape" else "CONST", [], [name],
                                      {}, op.location))
        folded_inputs.update(n for n in op.inputs if n)
    return _drop_dead(Block(block.name, tensors, operators, list(block.inputs), list(block.outputs)),
                      folded_inputs, graph)


def _foldable(op: Operator, block: Block, known: set[str]) -> bool:
    if op.op in NOT_FOLDED or not any(op.inputs) or not op.outputs:
        return False
    if not all(n in known for n in op.inputs if n):
        return False
    for name in op.outputs:
        tensor = block.tensors.get(name)
        if tensor is None or tensor.variable or any(d < 0 for d in tensor.shape) or \
                int(np.prod(tensor.shape, dtype=np.int64)) > MAX_FOLD_ELEMENTS:
            return False
    return True


def _drop_dead(block: Block, candidates: set[str], graph: Graph) -> Block:
    """Remove the constants in ``candidates`` (inputs of folded operators) that nothing reads
    any more: not an operator input in any block (nested blocks may read their parent's
    tensors), not a block output."""
    read = set(block.outputs)
    for region in graph.regions:
        for other in region.blocks:
            if other.name != block.name:
                read.update(n for op in other.operators for n in op.inputs)
                read.update(other.outputs)
    read.update(n for op in block.operators for n in op.inputs)
    dead = {n for n in candidates if n not in read and block.tensors.get(n) is not None
            and block.tensors[n].data is not None}
    if not dead:
        return block
    block.operators = [op for op in block.operators
                       if not (op.op in ("CONST", "CONST_SHAPE") and op.outputs and set(op.outputs) <= dead)]
    produced = {n for op in block.operators for n in op.outputs}
    for name in dead:
        if name not in produced:
            del block.tensors[name]
    return block
