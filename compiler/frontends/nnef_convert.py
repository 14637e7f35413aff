"""NNEF graph (parsed, lowered, shape-inferred) -> float TOSA 1.0 graph.

Layouts.  NNEF is channel-first (NCHW); TOSA's spatial operators are channel-last (NHWC).
Every NNEF tensor is held as a :class:`Val`: a TOSA tensor plus the permutation ``perm``
with ``tosa_tensor == nnef_tensor.transpose(perm)``.  Spatial operators produce NHWC
values (``perm = (0, 2, 3, 1)``); NNEF ``transpose`` only changes the bookkeeping; a
physical TRANSPOSE (or a RESHAPE, when the permutation only moves size-1 axes) is emitted
only where an operator needs another order (reshape, matmul, graph outputs).  Constants
stay numpy arrays in NNEF order until an operator takes them, in the form it needs.

The float graph uses TOSA 1.0 conventions: zero points are input tensors (zero for fp32),
MUL takes a shift tensor, RESHAPE/PAD/SLICE take shape tensors, fully connected layers are
RESHAPE + 1x1 CONV2D.  TOSA requires convolution and pooling sizes to divide exactly where
NNEF rounds down; the trailing rows no window reaches are dropped by shrinking the
bottom/right padding when they are padding, else by a SLICE of the input (start 0), which
:func:`compiler.frontends.nnef_post.fold_slices` folds into the producing convolution
when taking padding off it is enough.  Kernels are never grown with zero taps: the
multiply count stays that of the NNEF graph.

The operator handlers live in :mod:`compiler.frontends.nnef_ops`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.frontends.nnef_parse import ParsedModel, Ref
from tosa_ir import Block, Graph, Operator, Tensor, numpy_dtype
from tosa_ir.errors import InvalidInput, Unsupported

NHWC = (0, 2, 3, 1)
NNEF_DTYPES = {"scalar": "fp32", "integer": "int32", "logical": "bool"}
FLOAT_MAX = float(np.finfo(np.float32).max)


def identity(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


def trivial_permutation(rel, shape) -> bool:
    """True when transposing ``shape`` by ``rel`` keeps the row-major data order.

    That is the case when the axes longer than 1 keep their relative order: the
    transpose is then a RESHAPE.
    """
    big = [a for a in rel if shape[a] != 1]
    return big == sorted(big)


@dataclass
class Val:
    """An NNEF tensor as converted so far.

    ``shape`` is the NNEF shape.  Either ``data`` (constant, NNEF order) or ``name``
    (a TOSA tensor holding ``nnef.transpose(perm)``) is set.
    """

    shape: tuple[int, ...]
    dtype: str
    name: str | None = None
    perm: tuple[int, ...] | None = None
    data: np.ndarray | None = None

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def rank(self) -> int:
        return len(self.shape)


class Converter:
    """Builds the float TOSA block from a :class:`ParsedModel`."""

    def __init__(self, model: ParsedModel):
        self.model = model
        self.graph = model.graph
        self.where = model.container.graph_name
        self.block = Block("main")
        self.vals: dict[str, Val] = {}
        self.names: set[str] = set(str(n) for n in self.graph.tensors)
        self._phys: dict[tuple, str] = {}
        self._shared: dict[tuple, str] = {}
        self._alive: list[Val] = []
        self.location = ""
        # NNEF tensor name -> TOSA tensor holding its value directly (for graph.quant).
        self.result_of: dict[str, str] = {}
        # TOSA weight/bias tensor -> (NNEF variable name, role) for graph.quant lookups.
        self.param_of: dict[str, tuple[str, str]] = {}
        self.notes: list[str] = []
        self.trim_slices: set[str] = set()   # SLICEs added for exact TOSA output sizes

    # -- naming and tensors -----------------------------------------------------------
    def fresh(self, base: str) -> str:
        base = str(base)
        name, i = base, 1
        while name in self.names:
            name = f"{base}_{i}"
            i += 1
        self.names.add(name)
        return name

    def tensor(self, name: str, shape, dtype: str, data: np.ndarray | None = None) -> str:
        shape = tuple(int(d) for d in shape)
        if data is not None:
            data = np.ascontiguousarray(np.asarray(data).astype(numpy_dtype(dtype))
                                        .reshape(shape))
        self.block.add_tensor(Tensor(name, shape, dtype, data))
        return name

    def const(self, data, dtype: str, base: str = "const", shape=None) -> str:
        arr = np.asarray(data)
        shape = arr.shape if shape is None else tuple(shape)
        return self.tensor(self.fresh(base), shape, dtype, arr.reshape(shape))

    def shared(self, key: tuple, make) -> str:
        """A constant made once per key (zero points, MUL shift, ...)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def zero_point(self, dtype: str) -> str:
        return self.shared(("zp", dtype),
                           lambda: self.const(np.zeros(1), dtype, f"zp_{dtype}", (1,)))

    def shape_const(self, values, base: str) -> str:
        values = [int(v) for v in values]
        return self.const(np.asarray(values, np.int64), "shape", base, (len(values),))

    def emit(self, op: str, inputs: list[str], out_shape, dtype: str, attrs=None,
             base: str = "t", name: str | None = None) -> str:
        """Append operator ``op`` with one new output tensor; returns its name."""
        out = name if name is not None else self.fresh(base)
        self.tensor(out, out_shape, dtype)
        self.block.operators.append(Operator(op, list(inputs), [out], dict(attrs or {}),
                                             self.location))
        return out

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
        if val.name is not None:
            self.result_of.setdefault(nnef_name, val.name)

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

    def physical(self, v: Val, perm=None) -> str:
        """A TOSA tensor holding ``v`` in layout ``perm`` (NNEF order by default)."""
        perm = identity(v.rank) if perm is None else tuple(perm)
        if v.is_const:
            key = ("const", id(v), perm)
            if key not in self._phys:
                data = np.asarray(v.data).reshape(v.shape).transpose(perm)
                self._phys[key] = self.const(data, v.dtype, "const")
                self._alive.append(v)   # keeps id(v) unique while the key is cached
            return self._phys[key]
        if v.perm == perm:
            return v.name
        key = (v.name, perm)
        if key in self._phys:
            return self._phys[key]
        rel = [v.perm.index(p) for p in perm]
        old_shape = [v.shape[p] for p in v.perm]
        new_shape = [v.shape[p] for p in perm]
        base = v.name + ("_nchw" if perm == identity(v.rank) else "_t")
        if trivial_permutation(rel, old_shape):
            out = self.emit("RESHAPE", [v.name, self.shape_const(new_shape, base + "_shape")],
                            new_shape, v.dtype, base=base)
        else:
            out = self.emit("TRANSPOSE", [v.name], new_shape, v.dtype, {"perms": rel},
                            base=base)
        self._phys[key] = out
        return out

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

    def physical_names(self) -> set[str]:
        return set(self._phys.values()) | set(self._shared.values())

    # -- driver -------------------------------------------------------------------
    def run(self) -> Graph:
        from compiler.frontends import nnef_ops, nnef_post   # handlers register on import

        for op in self.graph.operations:
            outs = ", ".join(str(o) for o in _flat(op.outputs.values()))
            self.location = f"{self.where}: {op.name} -> {outs}"
            handler = nnef_ops.HANDLERS.get(op.name)
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
                rename(block, src, name, self)
                src = name
            taken.add(src)
            block.outputs.append(src)


def _flat(values):
    for v in values:
        if isinstance(v, list):
            yield from _flat(v)
        else:
            yield v


def rename(block: Block, old: str, new: str, conv: Converter) -> None:
    """Rename tensor ``old`` to ``new``, moving a tensor already called ``new`` aside."""
    if new in block.tensors:
        _rename_plain(block, new, conv.fresh(new + "_v"), conv)
    _rename_plain(block, old, new, conv)


def _rename_plain(block: Block, old: str, new: str, conv: Converter) -> None:
    tensor = block.tensors.pop(old)
    tensor.name = new
    block.tensors[new] = tensor
    for op in block.operators:
        op.inputs = [new if n == old else n for n in op.inputs]
        op.outputs = [new if n == old else n for n in op.outputs]
    block.inputs = [new if n == old else n for n in block.inputs]
    block.outputs = [new if n == old else n for n in block.outputs]
    for mapping in (conv.result_of,):
        for key, value in list(mapping.items()):
            if value == old:
                mapping[key] = new
    if old in conv.param_of:
        conv.param_of[new] = conv.param_of.pop(old)
    conv.names.add(new)
