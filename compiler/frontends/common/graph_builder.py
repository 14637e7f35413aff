"""The float TOSA graph builder shared by the channel-first frontends (NNEF, OpenVINO).

Both hold every source tensor as a :class:`Val`: a TOSA tensor plus the permutation
``perm`` with ``tosa_tensor == source_tensor.transpose(perm)``, or a constant (numpy, in
the source order).  Spatial operators produce NHWC values; a source ``transpose`` only
changes the bookkeeping; :meth:`LayoutBuilder.physical` emits a TRANSPOSE (or a RESHAPE,
when the permutation only moves size-1 axes, except on graph inputs when it changes the
innermost size) only where an operator needs another order.

The graph uses TOSA 1.0 conventions: zero points and the MUL shift are input tensors
(made once per graph), RESHAPE/PAD/SLICE take shape tensors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.frontends.common.registry import rename_tensor
from tosa_ir import Block, Operator, Tensor, numpy_dtype

NHWC = (0, 2, 3, 1)
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
    """A source tensor as converted so far.

    ``shape`` is the source shape.  Either ``data`` (constant, source order) or ``name``
    (a TOSA tensor holding ``source.transpose(perm)``) is set.
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


class LayoutBuilder:
    """Builds one float TOSA block from layout-tracked values.

    Subclasses provide ``location`` (stamped on every operator emitted; an attribute or a
    property) and may override the naming hooks :meth:`default_base`,
    :meth:`const_base`, the constant cache key :meth:`const_owner` and :meth:`renamed`
    (to follow a rename in their own tables).  ``vals`` maps source tensors to
    :class:`Val` s; ``trim_slices`` holds the SLICEs added for exact TOSA window sizes
    (:func:`compiler.frontends.common.windows.slice_tail`).
    """

    location: str

    def __init__(self, names=()):
        self.block = Block("main")
        self.names: set[str] = set(names)
        self.vals: dict = {}
        self.notes: list[str] = []
        self.trim_slices: set[str] = set()
        self._phys: dict[tuple, str] = {}
        self._shared: dict[tuple, str] = {}
        self._alive: list = []       # owners of cached constants (keeps their ids unique)

    # -- hooks ------------------------------------------------------------------------
    def default_base(self) -> str:
        """Name base of an emitted tensor when the caller gives none."""
        return "t"

    def const_base(self) -> str:
        """Name base of a constant :meth:`physical` makes from a :class:`Val`."""
        return "const"

    def const_owner(self, v: Val):
        """The object whose identity keys the layouts cached for constant ``v``."""
        return v

    def renamed(self, old: str, new: str) -> None:
        """Called after tensor ``old`` became ``new`` (subclass tables follow)."""

    # -- naming and tensors -----------------------------------------------------------
    def fresh(self, base: str) -> str:
        base = str(base) or "t"
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
        """A tensor made once per key (zero points, the MUL shift, trimming SLICEs)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def zero_point(self, dtype: str = "fp32") -> str:
        return self.shared(("zp", dtype),
                           lambda: self.const(np.zeros(1), dtype, f"zp_{dtype}", (1,)))

    def mul_shift(self) -> str:
        return self.shared(("mul_shift",),
                           lambda: self.const(np.zeros(1), "int8", "mul_shift", (1,)))

    def shape_const(self, values, base: str) -> str:
        values = [int(v) for v in values]
        return self.const(np.asarray(values, np.int64), "shape", base, (len(values),))

    def emit(self, op: str, inputs, out_shape, dtype: str = "fp32", attrs=None,
             base: str | None = None, name: str | None = None) -> str:
        """Append operator ``op`` with one new output tensor; returns its name."""
        if name is None:
            name = self.fresh(base if base is not None else self.default_base())
        self.tensor(name, out_shape, dtype)
        self.block.operators.append(Operator(op, list(inputs), [name], dict(attrs or {}),
                                             self.location))
        return name

    # -- values -----------------------------------------------------------------------
    def physical(self, v: Val, perm=None) -> str:
        """A TOSA tensor holding ``v`` in layout ``perm`` (source order by default)."""
        perm = identity(v.rank) if perm is None else tuple(perm)
        if v.is_const:
            owner = self.const_owner(v)
            key = ("const", id(owner), perm)
            if key not in self._phys:
                data = np.asarray(v.data).reshape(v.shape).transpose(perm)
                self._phys[key] = self.const(data, v.dtype, self.const_base())
                self._alive.append(owner)
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
        # A graph input's layout change stays a TRANSPOSE when it changes the innermost
        # size (NCHW -> NHWC of a one-channel image): the NPU compiler moves such an
        # input as a TRANSPOSE, not as a RESHAPE regrouping its channels.  Elsewhere the
        # RESHAPE is kept: it merges with the RESHAPE that usually follows (flatten).
        regroups_input = (old_shape[-1] != new_shape[-1]
                          and not any(v.name in op.outputs for op in self.block.operators))
        if trivial_permutation(rel, old_shape) and not regroups_input:
            out = self.emit("RESHAPE", [v.name, self.shape_const(new_shape, base + "_shape")],
                            new_shape, v.dtype, base=base)
        else:
            out = self.emit("TRANSPOSE", [v.name], new_shape, v.dtype, {"perms": rel},
                            base=base)
        self._phys[key] = out
        return out

    def physical_names(self) -> set[str]:
        """The tensors :meth:`physical` and :meth:`shared` made (reused, never renamed
        to a source name)."""
        return set(self._phys.values()) | set(self._shared.values())

    def reduce_axes(self, x: Val, tosa_op: str, axes, base: str) -> tuple[str, int]:
        """Chain ``tosa_op`` (REDUCE_SUM/MAX/MIN) over source ``axes`` of ``x``, in its
        layout; returns the last output and the number of elements reduced together."""
        cur, shape = x.name, [x.shape[p] for p in x.perm]
        count = 1
        for a in axes:
            t = x.perm.index(a)
            count *= shape[t]
            shape[t] = 1
            attrs = {"axis": t}
            if tosa_op != "REDUCE_SUM":
                attrs["nan_mode"] = "PROPAGATE"
            cur = self.emit(tosa_op, [cur], shape, x.dtype, attrs, base=base)
        return cur, count

    # -- renaming ---------------------------------------------------------------------
    def rename(self, old: str, new: str) -> None:
        """Rename tensor ``old`` to ``new``, moving a tensor already called ``new`` aside."""
        if old == new:
            return
        if new in self.block.tensors:
            self._rename_plain(new, self.fresh(new + "_v"))
        self._rename_plain(old, new)

    def _rename_plain(self, old: str, new: str) -> None:
        rename_tensor(self.block, old, new)
        for cache in (self._phys, self._shared):
            for key, value in list(cache.items()):
                if value == old:
                    cache[key] = new
        if old in self.trim_slices:
            self.trim_slices.discard(old)
            self.trim_slices.add(new)
        for v in self.vals.values():
            if v.name == old:
                v.name = new
        self.renamed(old, new)
        self.names.add(new)
