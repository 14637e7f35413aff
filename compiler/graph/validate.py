"""Graph legality: the spec's ERROR_IF conditions, checked before (or instead of) lowering.

The compiler must reject an illegal graph as illegal (``InvalidInput``/``TosaError``, exit
code 2), even one using operators or forms it cannot lower (which would otherwise be
``Unsupported``).  ERROR_IF conditions depend on shapes, types, attributes and constant
tensors, never on the values of graph inputs, so :func:`check_graph` evaluates them with the
reference interpreter (sim.reference, the project's statement of the spec) on all-zero inputs
of the declared shapes and discards the values: nothing computed here reaches the program.

A failed LEVEL_CHECK (shapes beyond the 8K level, e.g. rank 7) is raised too
(TosaUnpredictable).  What the dry run cannot judge is left alone: a REQUIRE failing on the
zero inputs (e.g. a division by zero), a graph the interpreter does not support, or a loop that
exceeds the dry run's iteration budget.
"""
from __future__ import annotations

import numpy as np

from tosa_ir import Graph
from tosa_ir.errors import LevelRejected, NpuError, TosaError, TosaUnpredictable
from tosa_ir.graph import numpy_dtype

# WHILE_LOOP bodies the dry run may execute in all (a data-dependent loop on zeros may not end).
DRY_RUN_ITERATIONS = 1000
# Graphs whose inputs hold more elements than this are not dry-run (their ERROR_IFs are left
# to the lowering passes' own checks): the dry run costs a reference execution and zero
# inputs of the declared shapes (at most 64M elements: 512 MiB as int64, 64 MiB as int8).
# The official generator's ERROR_IF tests reach 40M input elements (a CONCAT of int8
# 47x57x46x41 and 47x57x46x41x7 whose rank mismatch the lowering reports as unsupported
# rather than illegal), so the bound sits above them.
DRY_RUN_ELEMENTS = 1 << 26


def check_level_ranks(graph: Graph) -> None:
    """Reject (LevelRejected) a graph with a tensor of rank above level 8K's MAX_RANK, in any
    block: unpredictable in the spec, rejected as the reference interpreter and the official
    suite do, before any pass (whose lowering would take rank 7 as loops) sees it."""
    from sim.reference.registry import LEVELS

    max_rank = LEVELS["8K"]["MAX_RANK"]
    for region in graph.regions:
        for block in region.blocks:
            for op in block.operators:
                for name in list(op.inputs) + list(op.outputs):
                    tensor = block.tensors.get(name) if name else None
                    if tensor is not None and len(tensor.shape) > max_rank:
                        raise LevelRejected(op.op, f"rank({name}) = {len(tensor.shape)} <= "
                                                   f"MAX_RANK = {max_rank}", op.location)


def check_reshapes(graph: Graph) -> None:
    """Reject (InvalidInput) a RESHAPE whose declared output shape is not its shape operand
    or whose sizes differ, in any block.

    Shapes only, so it runs on every graph: the dry run of :func:`check_graph` runs only for
    graphs with vector-unit or control operators, and a RESHAPE otherwise lowers to a view
    or a copy that takes the declared output shape on trust (the official generator's
    TensorSizeInputOutputMismatch tests, e.g. int8 (32,) -> shape [4, 1, 8] declared
    (6, 9, 16), were accepted).  Same conditions as sim/reference's RESHAPE.
    """
    from compiler.core.errors import invalid
    from sim.reference.ops_support import int_list

    for region in graph.regions:
        for block in region.blocks:
            for op in block.operators:
                if op.op != "RESHAPE" or not op.inputs or not op.outputs:
                    continue
                x, y = block.tensors.get(op.inputs[0]), block.tensors.get(op.outputs[0])
                if x is None or y is None or any(d < 0 for d in (*x.shape, *y.shape)):
                    continue
                shape = None
                if len(op.inputs) > 1 and op.inputs[1] in block.tensors:
                    shape = block.tensors[op.inputs[1]].data
                elif op.attrs.get("new_shape") is not None:
                    shape = op.attrs["new_shape"]
                if shape is not None:
                    shape = int_list(shape)
                    if -1 not in shape and shape != list(y.shape):
                        raise invalid(op, f"ERROR_IF(output shape {list(y.shape)} != shape "
                                          f"operand {shape})")
                if int(np.prod(x.shape, dtype=np.int64)) != int(np.prod(y.shape, dtype=np.int64)):
                    raise invalid(op, f"ERROR_IF(tensor_size(input1) != tensor_size(output)): "
                                      f"{list(x.shape)} to {list(y.shape)}")


# Operators whose lowering takes the declared output shape as its size: an illegal one
# (the official generator's ResizeOutputShapeMismatch declares e.g. 1x2259x5415x1 for a
# RESIZE whose parameters give another shape) would have the compiler build gathers and
# weights for the declared size, gigabytes of them, before anything rejected it.  A graph
# with one is dry-run before lowering.
TRUSTS_DECLARED_SHAPE = ("RESIZE",)


def trusts_declared_shapes(graph: Graph) -> bool:
    """Whether any block holds an operator of :data:`TRUSTS_DECLARED_SHAPE`."""
    return any(op.op in TRUSTS_DECLARED_SHAPE for region in graph.regions
               for block in region.blocks for op in block.operators)


def check_graph(graph: Graph) -> None:
    """Raise the first ERROR_IF the graph breaks (TosaError / InvalidInput), else return."""
    from sim.reference.interpreter import Interpreter

    try:
        block = graph.main
    except ValueError:
        return
    inputs = {}
    total = 0
    for name in block.inputs:
        tensor = block.tensors.get(name)
        if tensor is None or any(d < 0 for d in tensor.shape):
            return
        try:
            dtype = numpy_dtype(tensor.dtype)
        except ValueError:
            return
        total += int(np.prod(tensor.shape, dtype=np.int64))
        inputs[name] = np.zeros(tensor.shape, dtype)
    if total > DRY_RUN_ELEMENTS:
        return
    try:
        with np.errstate(all="ignore"):
            Interpreter(graph, max_loop_iterations=DRY_RUN_ITERATIONS).run(inputs)
    except TosaError:
        raise
    except TosaUnpredictable as e:
        # A LEVEL_CHECK (e.g. rank above MAX_RANK) depends on shapes only: the graph is
        # outside the level the NPU implements.  A REQUIRE may just be the zero inputs'.
        if e.kind == "LEVEL_CHECK":
            raise
    except NpuError as e:
        # InvalidInput from the interpreter is an illegal graph too; Unsupported and
        # TosaUnpredictable say nothing about legality.
        if type(e).__name__ == "InvalidInput" or isinstance(e, LevelRejected):
            raise
    except Exception:   # noqa: BLE001 - a dry run that cannot finish judges nothing
        return
