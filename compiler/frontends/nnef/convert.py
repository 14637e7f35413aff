"""NNEF graph (parsed, lowered, shape-inferred) -> float TOSA 1.0 graph.

Layouts.  NNEF is channel-first (NCHW); TOSA's spatial operators are channel-last (NHWC).
Every NNEF tensor is held as a :class:`Val`: a TOSA tensor plus the permutation ``perm``
with ``tosa_tensor == nnef_tensor.transpose(perm)``.  Spatial operators produce NHWC
values (``perm = (0, 2, 3, 1)``); NNEF ``transpose`` only changes the bookkeeping; a
physical TRANSPOSE (or a RESHAPE, when the permutation only moves size-1 axes; see
graph_builder.py) is emitted only where an operator needs another order (reshape, matmul,
graph outputs).  Constants
stay numpy arrays in NNEF order until an operator takes them, in the form it needs.

The float graph uses TOSA 1.0 conventions: zero points are input tensors (zero for fp32),
MUL takes a shift tensor, RESHAPE/PAD/SLICE take shape tensors, fully connected layers are
RESHAPE + 1x1 CONV2D.  TOSA requires convolution and pooling sizes to divide exactly where
NNEF rounds down; the trailing rows no window reaches are dropped by shrinking the
bottom/right padding when they are padding, else by a SLICE of the input (start 0), which
:func:`compiler.frontends.common.graph_passes.fold_slices` folds into the producing convolution
when taking padding off it is enough (:mod:`compiler.frontends.common.windows`).  Kernels are
never grown with zero taps: the multiply count stays that of the NNEF graph.

The value bookkeeping is :class:`compiler.frontends.common.graph_builder.LayoutBuilder` (shared
with the OpenVINO frontend); the operator handlers live in
:mod:`compiler.frontends.nnef.ops`.
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.graph_builder import LayoutBuilder, Val, identity
from compiler.frontends.nnef import post as nnef_post
from compiler.frontends.nnef.parse import ParsedModel, Ref
from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, Unsupported

NNEF_DTYPES = {"scalar": "fp32", "integer": "int32", "logical": "bool"}


class Converter(LayoutBuilder):
    """Builds the float TOSA block from a :class:`ParsedModel`.

    ``vals`` maps NNEF tensor names to their :class:`Val`.
    """

    def __init__(self, model: ParsedModel):
        self.model = model
        self.graph = model.graph
        super().__init__(str(n) for n in self.graph.tensors)
        self.where = model.container.graph_name
        self.location = ""
        # NNEF tensor name -> TOSA tensor holding its value directly (for graph.quant).
        self.result_of: dict[str, str] = {}
        self._results_named: dict[str, set[str]] = {}    # TOSA name -> NNEF names (result_of inverted)
        # TOSA weight/bias tensor -> (NNEF variable name, role) for graph.quant lookups.
        self.param_of: dict[str, tuple[str, str]] = {}

    def renamed(self, old: str, new: str) -> None:
        # Through the inverse map: scanning result_of per rename made large graphs quadratic.
        keys = self._results_named.pop(old, set())
        for key in keys:
            self.result_of[key] = new
        if keys:
            self._results_named.setdefault(new, set()).update(keys)
        if old in self.param_of:
            self.param_of[new] = self.param_of.pop(old)

    # -- values --------------------------------------------------------------------
    def nnef_shape(self, name: str) -> tuple[int, ...]:
        shape = self.graph.tensors[name].shape
        if shape is None:
            raise InvalidInput(f"{self.where}: no shape for tensor '{name}'")
        return tuple(int(d) for d in shape)

    def nnef_dtype(self, name: str) -> str:
        return NNEF_DTYPES.get(self.graph.tensors[name].dtype or "scalar", "fp32")

    def val(self, ref) -> Val:
        """The converted value of an argument: a tensor identifier or a literal."""
        if isinstance(ref, Ref):
            try:
                return self.vals[str(ref)]
            except KeyError:
                raise InvalidInput(f"{self.where}: tensor '{ref}' used before it is "
                                   f"defined") from None
        if isinstance(ref, bool):
            return Val((), "bool", data=np.asarray(ref))
        if isinstance(ref, int):
            return Val((), "int32", data=np.asarray(ref, np.int64))
        if isinstance(ref, float):
            return Val((), "fp32", data=np.asarray(ref, np.float32))
        raise Unsupported(f"{self.where}: argument {ref!r} of type {type(ref).__name__} "
                          f"where a tensor is expected")

    def set_result(self, nnef_name: str, val: Val) -> None:
        nnef_name = str(nnef_name)
        self.vals[nnef_name] = val
        if val.name is not None and nnef_name not in self.result_of:
            self.result_of[nnef_name] = val.name
            self._results_named.setdefault(val.name, set()).add(nnef_name)

    def has_result_named(self, tosa_name: str) -> bool:
        """Whether some NNEF tensor's result is the TOSA tensor ``tosa_name``."""
        return bool(self._results_named.get(tosa_name))

    def result(self, nnef_name: str, op: str, inputs, perm, attrs=None) -> Val:
        """Emit ``op`` producing NNEF tensor ``nnef_name`` held in layout ``perm``."""
        shape = self.nnef_shape(nnef_name)
        dtype = self.nnef_dtype(nnef_name)
        tshape = [shape[p] for p in perm]
        name = self.emit(op, inputs, tshape, dtype, attrs, name=self.own_name(nnef_name))
        val = Val(shape, dtype, name, tuple(perm))
        self.set_result(nnef_name, val)
        return val

    def own_name(self, nnef_name: str) -> str:
        """The TOSA name for an NNEF tensor's value: its own name (reserved) if still free."""
        nnef_name = str(nnef_name)
        if nnef_name in self.block.tensors:
            return self.fresh(nnef_name)
        self.names.add(nnef_name)
        return nnef_name

    def reshaped(self, v: Val, shape, base: str) -> Val:
        """``v`` reshaped (row-major, NNEF order) to ``shape``; returns a new Val."""
        shape = tuple(int(d) for d in shape)
        if v.is_const:
            return Val(shape, v.dtype, data=np.asarray(v.data).reshape(shape))
        src = self.physical(v)
        if tuple(shape) == tuple(v.shape):
            return Val(shape, v.dtype, src, identity(len(shape)))
        out = self.emit("RESHAPE", [src, self.shape_const(shape, base + "_shape")], shape,
                        v.dtype, base=base)
        return Val(shape, v.dtype, out, identity(len(shape)))

    def broadcast_rank(self, v: Val, rank: int, base: str) -> Val:
        """NNEF broadcasting: missing dimensions are *trailing* singletons."""
        if v.rank >= rank:
            return v
        return self.reshaped(v, tuple(v.shape) + (1,) * (rank - v.rank), base)

    def const_data(self, v: Val, what: str, dtype=np.float32) -> np.ndarray:
        if not v.is_const:
            raise Unsupported(f"{self.location}: {what} must be a constant or variable "
                              f"tensor")
        return np.asarray(v.data, dtype=dtype).reshape(v.shape)

    # -- driver -------------------------------------------------------------------
    def run(self, handlers: dict) -> Graph:
        """Convert every operation with ``handlers`` (compiler/frontends/nnef/ops.py ``HANDLERS``,
        passed in by the loader: the handlers import this module)."""
        for op in self.graph.operations:
            outs = ", ".join(str(o) for o in _flat(op.outputs.values()))
            self.location = f"{self.where}: {op.name} -> {outs}"
            handler = handlers.get(op.name)
            if handler is None:
                raise Unsupported(f"{self.location}: NNEF operation '{op.name}' has no TOSA "
                                  f"mapping in this frontend")
            handler(self, op)
        self.location = self.where
        self._outputs()
        nnef_post.finish(self)
        graph = Graph.single_block(self.block, version=(1, 0, 0, False),
                                   profiles=["PRO-FP"], source=self.where)
        return graph

    def _outputs(self) -> None:
        block = self.block
        for name in self.graph.inputs:
            v = self.vals[str(name)]
            block.inputs.append(v.name)
        taken: set[str] = set()
        for name in self.graph.outputs:
            name = str(name)
            v = self.vals[name]
            src = self.physical(v)
            if src in block.inputs or src in taken or block.tensors[src].is_const:
                # Outputs are distinct tensors produced by operators.
                src = self.emit("IDENTITY", [src], v.shape, v.dtype, base=name)
            if src != name:
                self.rename(src, name)
                src = name
            taken.add(src)
            block.outputs.append(src)


def _flat(values):
    for v in values:
        if isinstance(v, list):
            yield from _flat(v)
        else:
            yield v
