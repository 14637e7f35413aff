"""The TOSA reference interpreter: runs a ``tosa_ir.Graph`` on numpy arrays.

It is the golden model of the project: the ISA simulator, the RTL and the compiler are
checked against it, and it is checked against the official TOSA reference model.

``run_graph(graph, inputs)`` runs the main block.  The :class:`Interpreter` executes
operators in their listed order (a topological order, as the serialised graph gives it)
through ``sim.reference.registry.OPS``; control-flow operators call back into
:meth:`Interpreter.run_block`.  Around every operator it checks, as the spec's
``tosa_execute_graph`` does:

* the operator is known (else :class:`Unsupported` naming it),
* its input tensors exist and ranks/sizes satisfy the level (LEVEL_CHECK),
* each result has the declared shape (ERROR_IF) and is stored in the declared type.

Errors: bad user inputs -> :class:`InvalidInput`; ERROR_IF -> :class:`TosaError`;
REQUIRE / LEVEL_CHECK -> :class:`TosaUnpredictable`.

Never a hang: the spec puts no limit on WHILE_LOOP iterations, so a graph whose loop
condition stays true would run forever.  Every run therefore has a budget of loop
iterations (``max_loop_iterations``, counted over all WHILE_LOOPs of the run, nested ones
included, so the budget bounds the total work); a loop that would exceed it stops the run
with :class:`Unsupported` naming the operator and the bound.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from sim.reference.signatures import check_signature
from sim.reference.registry import LEVELS, OPS, OpContext
from tosa_ir.limits import MAX_LOOP_ITERATIONS
from tosa_ir import (INT_RANGES, Block, Graph, InvalidInput, Operator, TosaError,
                     Unsupported, numpy_dtype)

# Element size in bytes for the level's tensor size limit (types under 8 bits count 1).
_ELEM_BYTES = {"bool": 1, "int4": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
               "int32": 4, "int48": 6, "int64": 8, "shape": 8, "fp16": 2, "bf16": 2,
               "fp32": 4, "fp8e4m3": 1, "fp8e5m2": 1}


# Types held in a wider numpy type: their range must be checked even when the numpy type
# already matches.
_NARROWER_THAN_STORAGE = {"int4", "int48"}

# Default budget of WHILE_LOOP iterations per run: far beyond any real graph (loops in
# TOSA graphs run a sequence length or a count of refinement steps), and reached in
# seconds by a graph that loops forever (tosa_ir/limits.py; 10^6 took minutes).
DEFAULT_MAX_LOOP_ITERATIONS = MAX_LOOP_ITERATIONS


def _shape_matches(actual: Sequence[int], declared: Sequence[int]) -> bool:
    """Declared shapes may hold -1 for dimensions known only at run time."""
    return len(actual) == len(declared) and all(
        d < 0 or a == d for a, d in zip(actual, declared))


def convert_input(value, dtype: str, what: str) -> np.ndarray:
    """An input array in the numpy type of TOSA ``dtype``; InvalidInput if it cannot be.

    Integer data must lie in the type's range (no silent wrapping); bool accepts bools or
    0/1 integers; float types accept any real numbers.
    """
    target = numpy_dtype(dtype)
    try:
        arr = np.asarray(value)
    except Exception as e:  # ragged lists etc.
        raise InvalidInput(f"{what}: not an array ({e})") from None
    kind = arr.dtype.kind
    if arr.dtype == target and dtype not in _NARROWER_THAN_STORAGE:
        return arr
    if dtype in INT_RANGES and dtype != "bool":
        if kind not in "iub":
            raise InvalidInput(f"{what}: expected {dtype} data, got numpy {arr.dtype}")
        lo, hi = INT_RANGES[dtype]
        if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
            raise InvalidInput(f"{what}: values outside the {dtype} range [{lo}, {hi}]")
        return arr.astype(target)
    if dtype == "bool":
        if kind == "b":
            return arr.astype(np.bool_)
        if kind in "iu" and (arr.size == 0 or (arr.min() >= 0 and arr.max() <= 1)):
            return arr.astype(np.bool_)
        raise InvalidInput(f"{what}: expected bool data, got numpy {arr.dtype}")
    if kind not in "iubf":
        raise InvalidInput(f"{what}: expected {dtype} data, got numpy {arr.dtype}")
    return arr.astype(target)


class Interpreter:
    """Executes a TOSA graph.

    Parameters
    ----------
    graph : tosa_ir.Graph
        The graph (either TOSA 1.0 or draft form).
    level : str
        "8K" or "none": the TOSA level whose LEVEL_CHECKs apply.
    variables : dict, optional
        Persistent variable storage shared between runs (and interpreters): the
        VARIABLE operators keep their variables here by uid, and tensors flagged
        ``variable`` (TOSA 1.0) keep their last value here under ``("tensor", name)``.
    max_loop_iterations : int or None
        Budget of WHILE_LOOP body executions per :meth:`run`, over all loops (nested
        ones included); exceeding it raises :class:`Unsupported`.  ``None`` removes the
        bound (a graph that loops forever then hangs).

    Attributes used by operator implementations: ``graph``, ``level``, ``limits``,
    ``variables``, ``run_count`` (number of :meth:`run` calls so far, for the variables'
    per-execution "seen" flag), ``nesting_depth`` (maintained by control flow) and
    :meth:`count_loop_iteration` (called by WHILE_LOOP).
    """

    def __init__(self, graph: Graph, level: str = "8K", variables: dict | None = None,
                 max_loop_iterations: int | None = DEFAULT_MAX_LOOP_ITERATIONS):
        if level not in LEVELS:
            raise InvalidInput(f"unknown TOSA level {level!r} (expected one of "
                               f"{', '.join(LEVELS)})")
        if max_loop_iterations is not None and (
                isinstance(max_loop_iterations, bool)
                or not isinstance(max_loop_iterations, (int, np.integer))
                or max_loop_iterations < 0):
            raise InvalidInput(f"max_loop_iterations must be a non-negative integer or None, "
                               f"not {max_loop_iterations!r}")
        self.max_loop_iterations = (None if max_loop_iterations is None
                                    else int(max_loop_iterations))
        self.loop_iterations = 0   # WHILE_LOOP body executions in the current run
        self.graph = graph
        self.level = level
        self.limits = LEVELS[level]
        self.variables: dict = variables if variables is not None else {}
        self.run_count = 0
        self.nesting_depth = 0
        self._envs: list[dict[str, np.ndarray]] = []  # enclosing blocks' tensors

    # -- entry point --------------------------------------------------------------------
    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the main block on ``inputs`` (name -> array); returns name -> array."""
        try:
            block = self.graph.main
        except ValueError as e:
            raise InvalidInput(f"{self.graph.source or 'graph'}: {e}") from None
        self.graph.check_structure()        # recursive control flow: illegal (ERROR, not a RecursionError)
        if not isinstance(inputs, Mapping):
            raise InvalidInput("graph inputs must be given as a mapping name -> array")
        expected = list(block.inputs)
        unknown = sorted(set(inputs) - set(expected))
        missing = [n for n in expected if n not in inputs]
        if unknown:
            raise InvalidInput(f"unknown graph input(s) {', '.join(map(repr, unknown))}; "
                               f"the graph's inputs are {', '.join(map(repr, expected))}")
        if missing:
            raise InvalidInput(f"missing graph input(s) {', '.join(map(repr, missing))}")
        values = []
        for name in expected:
            tensor = block.tensor(name)
            arr = convert_input(inputs[name], tensor.dtype, f"graph input {name!r}")
            if not _shape_matches(arr.shape, tensor.shape):
                raise InvalidInput(f"graph input {name!r}: shape {list(arr.shape)} does not "
                                   f"match the declared shape {list(tensor.shape)}")
            values.append(arr)
        self.run_count += 1
        self.nesting_depth = 0
        self.loop_iterations = 0
        outputs = self.run_block(block, values)
        return dict(zip(block.outputs, outputs))

    # -- blocks -------------------------------------------------------------------------
    def run_block(self, block: Block, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                  caller: Operator | None = None) -> list[np.ndarray]:
        """Execute ``block`` on ``inputs``; return its outputs in ``block.outputs`` order.

        ``inputs`` lists arrays in the order of ``block.inputs`` (or maps their names to
        arrays).  Tensors of enclosing blocks that are running stay readable (TOSA 1.0
        nested blocks may use their parent's tensors).  Control-flow operators may pass
        themselves as ``caller``: a mismatch between the values and the block's declared
        inputs is then reported as an ERROR_IF of that operator.
        """
        if not isinstance(inputs, Mapping):
            inputs = list(inputs)
            if len(inputs) != len(block.inputs):
                self._block_mismatch(block, caller,
                                     f"{len(inputs)} values for {len(block.inputs)} inputs")
            inputs = dict(zip(block.inputs, inputs))
        env: dict[str, np.ndarray] = {}
        for name, tensor in block.tensors.items():
            if tensor.data is not None:
                env[name] = tensor.data
            if tensor.variable and ("tensor", name) in self.variables:
                env[name] = self.variables[("tensor", name)]
        for name in block.inputs:
            if name not in inputs:
                self._block_mismatch(block, caller, f"no value for input {name!r}")
            tensor = block.tensor(name)
            arr = np.asarray(inputs[name])
            if not _shape_matches(arr.shape, tensor.shape) or \
                    arr.dtype != numpy_dtype(tensor.dtype):
                self._block_mismatch(
                    block, caller, f"input {name!r} is {arr.dtype}{list(arr.shape)}, "
                    f"declared {tensor.dtype}{list(tensor.shape)}")
            env[name] = arr
        self._envs.append(env)
        try:
            for op in block.operators:
                self.execute(op, block, env)
        finally:
            self._envs.pop()
        for name, tensor in block.tensors.items():
            if tensor.variable and name in env:
                self.variables[("tensor", name)] = env[name]
        outputs = []
        for name in block.outputs:
            value = self._lookup(name, env)
            if value is None:
                raise InvalidInput(f"block {block.name!r}: output {name!r} is never produced")
            outputs.append(value)
        return outputs

    def count_loop_iteration(self, op: Operator) -> None:
        """Count one WHILE_LOOP body execution of this run; stop if over the budget.

        Raises
        ------
        Unsupported
            The run's loop iterations would exceed ``max_loop_iterations``.
        """
        self.loop_iterations += 1
        bound = self.max_loop_iterations
        if bound is not None and self.loop_iterations > bound:
            where = f" at {op.location}" if op.location else ""
            raise Unsupported(
                f"{op.op}{where}: more than {bound} loop iterations in one run (the "
                f"interpreter's max_loop_iterations bound); the loop may never end. If it "
                f"is meant to run longer, pass a larger max_loop_iterations")

    def _lookup(self, name: str, env: dict) -> np.ndarray | None:
        if name in env:
            return env[name]
        for outer in reversed(self._envs):
            if name in outer:
                return outer[name]
        return None

    def _block_mismatch(self, block: Block, caller: Operator | None, detail: str):
        if caller is None:
            raise InvalidInput(f"block {block.name!r}: {detail}")
        raise TosaError(caller.op, "input_list",
                        f"tensor_list_shape(input_list) != tosa_input_shape(graph): {detail}",
                        caller.location)

    # -- operators ----------------------------------------------------------------------
    def execute(self, op: Operator, block: Block, env: dict[str, np.ndarray]) -> None:
        """Run one operator: read its inputs from ``env``, store its outputs there."""
        impl = OPS.get(op.op)
        if impl is None:
            if op.op in ("CONST", "CONST_SHAPE") and all(n in env for n in op.outputs):
                return  # constants were preloaded from their tensors' data
            raise Unsupported(f"operator {op.op} is not supported by the reference "
                              f"interpreter ({op.describe()})")
        check_signature(op, self.graph.is_tosa_1)
        args = []
        for name in op.inputs:
            if name == "":
                args.append(None)  # optional input left out
                continue
            value = self._lookup(name, env)
            if value is None:
                if name not in block.tensors and all(
                        name not in b.tensors for r in self.graph.regions for b in r.blocks):
                    raise InvalidInput(f"{op.describe()}: input tensor {name!r} is not "
                                       f"declared")
                raise InvalidInput(f"{op.describe()}: input tensor {name!r} is read before "
                                   f"any operator produces it")
            args.append(value)
        for name in op.outputs:
            if name not in block.tensors:
                raise InvalidInput(f"{op.describe()}: output tensor {name!r} is not "
                                   f"declared in block {block.name!r}")
        ctx = OpContext(op, block, self.graph, self, self.level)
        if self.limits is not None:
            self._level_check_tensors(ctx, op, block)
        results = impl(ctx, args)
        if len(results) != len(op.outputs):
            raise AssertionError(f"{op.op} implementation returned {len(results)} results "
                                 f"for {len(op.outputs)} outputs")
        for name, value in zip(op.outputs, results):
            env[name] = self._conform(op, block.tensor(name), value)

    def _level_check_tensors(self, ctx: OpContext, op: Operator, block: Block) -> None:
        """LEVEL_CHECK(rank(shape) <= MAX_RANK) and the tensor size limit (spec 1.9.2)."""
        max_rank = self.limits["MAX_RANK"]
        max_bytes = (1 << (self.limits["MAX_LOG2_SIZE"] + 1)) - 1
        max_dim = (1 << self.limits["MAX_LOG2_SIZE"]) - 1
        for name in list(op.inputs) + list(op.outputs):
            tensor = block.tensors.get(name) if name else None
            if tensor is None:
                continue
            ctx.level_reject(len(tensor.shape) <= max_rank,
                            f"rank({name}) = {len(tensor.shape)} <= MAX_RANK = {max_rank}")
            ctx.level_check(all(d <= max_dim for d in tensor.shape),
                            f"shape({name}) dimensions <= (1 << MAX_LOG2_SIZE) - 1")
            size = 1
            for d in tensor.shape:
                size *= max(d, 1)
            ctx.level_check(size * _ELEM_BYTES.get(tensor.dtype, 1) <= max_bytes,
                            f"size of {name} in bytes <= (1 << (MAX_LOG2_SIZE + 1)) - 1")

    @staticmethod
    def _conform(op: Operator, tensor, value) -> np.ndarray:
        """Check a result against its declared tensor; return it in the declared type."""
        arr = np.asarray(value)
        if not _shape_matches(arr.shape, tensor.shape):
            raise TosaError(op.op, tensor.name,
                            f"shape of output {list(arr.shape)} != declared shape "
                            f"{list(tensor.shape)}", op.location)
        target = numpy_dtype(tensor.dtype)
        if arr.dtype != target:
            if tensor.dtype in INT_RANGES and tensor.dtype != "bool" and arr.size:
                lo, hi = INT_RANGES[tensor.dtype]
                if arr.min() < lo or arr.max() > hi:
                    raise AssertionError(f"{op.op} produced values outside {tensor.dtype} "
                                         f"for {tensor.name!r}")
            arr = arr.astype(target)
        return arr


def run_graph(graph: Graph, inputs: Mapping[str, Any], level: str = "8K",
              variables: dict | None = None,
              max_loop_iterations: int | None = DEFAULT_MAX_LOOP_ITERATIONS
              ) -> dict[str, np.ndarray]:
    """Run ``graph``'s main block on ``inputs``; returns its outputs by name.

    Parameters
    ----------
    graph : tosa_ir.Graph
    inputs : mapping of input tensor name to array-like
    level : "8K" or "none"
    variables : dict, optional
        Variable storage persisting across calls (pass the same dict each call).
    max_loop_iterations : int or None
        Budget of WHILE_LOOP iterations for the run, over all loops (see
        :class:`Interpreter`); default :data:`DEFAULT_MAX_LOOP_ITERATIONS`.

    Raises
    ------
    InvalidInput, TosaError, TosaUnpredictable, Unsupported
        Unsupported also when the loop iteration budget is exceeded.
    """
    return Interpreter(graph, level, variables, max_loop_iterations).run(inputs)
