"""Test helper: build one TOSA graph twice, for the official reference model and for ours.

:class:`Dual` wraps ``oracle.GraphBuilder`` (TOSA 1.0 graph, serialized by the official
serializer and run by the official reference model) and builds the same graph in our IR
(``tosa_ir.Graph``) with the same tensor names.  Our copy can be in the 1.0 form (operands
as input tensors, exactly what the serializer wrote) or in the draft form (some operands as
attributes: ``draft_inputs``/``draft_attrs`` of :meth:`Dual.op`), so both forms of our
interpreter are checked against the one oracle.

:func:`check` runs both and asserts the same status (VALID / ERROR / UNPREDICTABLE) and,
when VALID, bit-identical outputs.  Expected values always come from the oracle.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from oracle import GraphBuilder, run_reference  # noqa: E402

from tosa_ir import Block, Graph, Operator, Region, Tensor, TosaError, TosaUnpredictable  # noqa: E402
from tosa_ir import numpy_dtype  # noqa: E402


# Also run every oracle-checked graph through tosa_ir.tosa_fb.read_tosa (our reader of the
# serialized bytes), unless REF_DUAL_NO_READBACK is set.
READ_BACK = not os.environ.get("REF_DUAL_NO_READBACK")


class Dual:
    """A graph built for the oracle (``self.b``) and for us (``self.graph``) at once."""

    def __init__(self, version=(1, 0, 0)):
        self.b = GraphBuilder(version)
        self.main = Block("main")
        self.graph = Graph(regions=[Region("main", [self.main])], version=(1, 0, 0, False))
        self.block = self.main
        self.draft = False

    # -- tensors -------------------------------------------------------------------------
    def input(self, shape, dtype) -> str:
        if self.block is self.main:
            name = self.b.input(shape, dtype)
            self.block.inputs.append(name)
        else:
            name = self.b.block_input(shape, dtype)
            self.block.inputs.append(name)
        self.block.add_tensor(Tensor(name, tuple(shape), dtype))
        return name

    def const(self, values, dtype, shape=None, *, op: bool = True) -> str:
        """A constant (CONST or CONST_SHAPE op, as the serializer writes it)."""
        name = self.b.const(values, dtype, shape)
        arr = self.b.tensors[name].data
        self.block.add_tensor(Tensor(name, arr.shape, dtype,
                                     np.asarray(arr).astype(numpy_dtype(dtype))))
        if op:
            self.block.operators.append(
                Operator("CONST_SHAPE" if dtype == "shape" else "CONST", [], [name]))
        return name

    def output(self, shape, dtype) -> str:
        name = self.b.output(shape, dtype)
        self.block.add_tensor(Tensor(name, tuple(shape), dtype))
        self.block.outputs.append(name)
        return name

    def intermediate(self, shape, dtype) -> str:
        name = self.b.intermediate(shape, dtype)
        self.block.add_tensor(Tensor(name, tuple(shape), dtype))
        return name

    # -- operators -------------------------------------------------------------------------
    def op(self, op: str, inputs: Sequence[str], outputs: Sequence[str], *,
           attrs: dict | None = None, oracle_attrs: dict | None = None,
           draft_inputs: Sequence[str] | None = None, draft_attrs: dict | None = None) -> None:
        """Add ``op`` to both graphs.

        ``attrs`` are attributes by their spec names, given to both sides (the serializer
        takes the same names; ``oracle_attrs`` adds serializer-only ones such as
        ``nan_mode``).  If ``self.draft`` is set, our copy uses ``draft_inputs`` and
        ``attrs`` + ``draft_attrs`` instead (draft-spec form).
        """
        attrs = dict(attrs or {})
        self.b.op(op, list(inputs), list(outputs), **{**attrs, **(oracle_attrs or {})})
        ours_in, ours_attrs = list(inputs), dict(attrs)
        if self.draft and (draft_inputs is not None or draft_attrs):
            ours_in = list(draft_inputs if draft_inputs is not None else inputs)
            ours_attrs.update(draft_attrs or {})
        self.block.operators.append(Operator(op, ours_in, list(outputs), ours_attrs))

    # -- control flow ------------------------------------------------------------------------
    def region(self, name: str) -> Block:
        """Start a region (one block) named ``name``; tensors/ops go there until :meth:`end`."""
        self.b.start_region(name)
        block = Block(name)
        self.graph.regions.append(Region(name, [block]))
        self.block = block
        return block


def run_ours(graph: Graph, inputs: Sequence[np.ndarray], level: str = "8K"):
    """Run our interpreter: ("VALID", outputs) or ("ERROR"/"UNPREDICTABLE", exception)."""
    from sim.reference import run_graph

    names = graph.main.inputs
    try:
        outs = run_graph(graph, dict(zip(names, inputs)), level=level)
    except TosaError as e:
        return "ERROR", e
    except TosaUnpredictable as e:
        return "UNPREDICTABLE", e
    if isinstance(outs, dict):
        outs = [outs[n] for n in graph.main.outputs]
    return "VALID", list(outs)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        return np.array_equal(a.astype(bool), b.astype(bool))
    return np.array_equal(a.astype(np.int64), b.astype(np.int64))


def check(d: Dual, inputs: Sequence[np.ndarray], expect: str | None = None, level: str = "8K",
          label: str = "", backend: str = "auto") -> tuple[str, Any]:
    """Run oracle and ours on ``inputs`` (in graph-input order); assert they agree.

    ``expect`` optionally pins the oracle's status too (so a test of an ERROR_IF case cannot
    pass because both sides accepted the graph).  Returns (status, our outputs/exception).
    """
    ref = run_reference(d.b, list(inputs), level=level, backend=backend)
    status, ours = run_ours(d.graph, inputs, level=level)
    where = f"[{label}] " if label else ""
    if expect is not None:
        assert ref.status == expect, f"{where}oracle said {ref.status}, test expects {expect}\n{ref.log}"
    assert status == ref.status, (
        f"{where}oracle {ref.status}, ours {status}: {ours if status != 'VALID' else ''}\n{ref.log}")
    if status == "VALID":
        _compare(d.graph.main.outputs, ours, ref, inputs, where)
    if READ_BACK and not d.draft:
        # The same serialized bytes through our .tosa reader: the operators must work on
        # the IR the reader produces too (attribute spellings, shape tensors).
        from oracle import load_graph

        status2, ours2 = run_ours(load_graph(ref.tosa), inputs, level=level)
        assert status2 == ref.status, (
            f"{where}(read back) oracle {ref.status}, ours {status2}: {ours2}")
        if status2 == "VALID":
            _compare(d.graph.main.outputs, ours2, ref, inputs, where + "(read back) ")
    return status, ours


def _compare(names, ours, ref, inputs, where):
    for name, arr in zip(names, ours):
        expected = ref.outputs[name]
        assert _same(arr, expected), (
            f"{where}output {name} differs\nours:\n{np.asarray(arr)}\noracle:\n{expected}\n"
            f"inputs: {[np.asarray(i).tolist() for i in inputs]}")


def random_values(rng: np.random.Generator, shape, dtype: str, lo=None, hi=None) -> np.ndarray:
    """Random data of ``dtype`` (full range unless ``lo``/``hi`` given, inclusive)."""
    from tosa_ir import INT_RANGES

    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    tlo, thi = INT_RANGES[dtype]
    lo = tlo if lo is None else lo
    hi = thi if hi is None else hi
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(numpy_dtype(dtype))


def broadcast_pair(rng: np.random.Generator, rank: int, max_dim: int = 5):
    """Two shapes of equal rank that broadcast (each dim 1 on one side at random), and the result."""
    out = [int(rng.integers(1, max_dim + 1)) for _ in range(rank)]
    s1, s2 = list(out), list(out)
    for d in range(rank):
        r = rng.random()
        if r < 0.2:
            s1[d] = 1
        elif r < 0.4:
            s2[d] = 1
    return tuple(s1), tuple(s2), tuple(out)
