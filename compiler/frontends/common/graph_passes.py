"""Clean-up passes over the float TOSA block a frontend built (NNEF, OpenVINO).

* :func:`merge_clamps`: CLAMP -> CLAMP becomes one CLAMP (``min(max(x, 0), 6)`` style).
* :func:`merge_reshapes`: RESHAPE -> RESHAPE becomes one RESHAPE.
* :func:`fold_slices`: a SLICE that only drops trailing rows/columns (added where the
  source's rounding-down output size is not an exact TOSA division, see
  :mod:`compiler.frontends.common.windows`) is folded into the convolution that produces the
  data, through element-wise CLAMP/ADD/MUL in between, when taking bottom/right padding
  off that convolution is enough for it to compute fewer rows.  Otherwise the SLICE stays
  (never zero taps appended to a kernel: they cost multiplies); :func:`note_trim_slices`
  says where.
* :func:`dead_code`: operators whose results reach no graph output go, with unused tensors.

Tensors named in ``keep`` (e.g. those carrying FakeQuantize parameters) are never merged
or folded away.
"""
from __future__ import annotations

import numpy as np

from tosa_ir import Block, Operator

_CONVS = ("CONV2D", "DEPTHWISE_CONV2D")
_ELEMENTWISE = ("CLAMP", "ADD", "MUL", "SUB")


def sole_user(block: Block, consumers, name: str, keep=frozenset()) -> Operator | None:
    """The one operator reading ``name``, or None (several or no readers, or ``name`` is a
    graph output or in ``keep``)."""
    users = consumers.get(name, [])
    if len(users) != 1 or name in block.outputs or name in keep:
        return None
    return users[0]


def _merge_pairs(block: Block, kind: str, keep, combine=None) -> None:
    """Merge each ``kind`` operator into the ``kind`` operator it solely feeds;
    ``combine(first, second)`` sets the merged attributes on ``second``.

    One pass in block order with the producer/consumer maps updated as it merges (a chain
    a -> b -> c becomes c reading a's input, combined in that order): linear, where
    re-deriving the maps after every merge was quadratic in the chain's length."""
    producers, consumers = block.producers(), block.consumers()
    removed: set[int] = set()
    for op in block.operators:
        if op.op != kind:
            continue
        first = producers.get(op.inputs[0])
        if first is None or first.op != kind or id(first) in removed or \
                sole_user(block, consumers, first.outputs[0], keep) is not op:
            continue
        if combine is not None:
            combine(first, op)
        source = first.inputs[0]
        op.inputs[0] = source
        readers = consumers.get(source, [])
        consumers[source] = [op if r is first else r for r in readers]
        removed.add(id(first))
    if removed:
        block.operators = [op for op in block.operators if id(op) not in removed]


def _clamp_range(first: Operator, op: Operator) -> None:
    """``clamp(clamp(x, a, b), c, d) == clamp(x, clamp(a, c, d), clamp(b, c, d))``: the
    first range's ends clamped into the second (which also covers disjoint ranges)."""
    lo2, hi2 = op.attrs["min_val"], op.attrs["max_val"]
    lo = min(max(first.attrs["min_val"], lo2), hi2)
    hi = min(max(first.attrs["max_val"], lo2), hi2)
    op.attrs["min_val"], op.attrs["max_val"] = lo, hi


def merge_clamps(block: Block, keep=frozenset()) -> None:
    _merge_pairs(block, "CLAMP", keep, _clamp_range)


def merge_reshapes(block: Block, keep=frozenset()) -> None:
    _merge_pairs(block, "RESHAPE", keep)


def _broadcast_operand(block: Block, op: Operator) -> bool:
    """True when the element-wise ``op`` only broadcasts constants over H and W."""
    for name in op.inputs[1:]:
        t = block.tensors[name]
        if t.dtype in ("int8",) and op.op == "MUL":   # MUL's shift operand
            continue
        if not t.is_const or len(t.shape) != 4 or t.shape[1] != 1 or t.shape[2] != 1:
            return False
    return True


def fold_slices(block: Block, notes: list[str], keep=frozenset()) -> None:
    """Fold tail-trimming SLICEs into the producing convolution where possible."""
    for op in list(block.operators):
        if op.op != "SLICE" or op not in block.operators:
            continue
        out = op.outputs[0]
        if out in block.outputs or out in keep:
            continue
        start = block.tensors[op.inputs[1]].data
        if start is None or np.any(start != 0):
            continue
        src = block.tensors[op.inputs[0]]
        size = [int(v) for v in block.tensors[op.inputs[2]].data]
        if len(src.shape) != 4 or size[0] != src.shape[0] or size[3] != src.shape[3]:
            continue
        drop = (src.shape[1] - size[1], src.shape[2] - size[2])
        producers, consumers = block.producers(), block.consumers()
        chain, name = [], src.name
        while True:
            if sole_user(block, consumers, name) is None:
                chain = None
                break
            prod = producers.get(name)
            if prod is None:
                chain = None
                break
            if prod.op in _CONVS:
                break
            if prod.op not in _ELEMENTWISE or not _broadcast_operand(block, prod):
                chain = None
                break
            chain.append(prod)
            name = prod.inputs[0]
        if chain is None:
            continue
        conv_op = producers[name]
        if not _shrink_conv(conv_op, drop):
            continue
        for t in [conv_op.outputs[0]] + [c.outputs[0] for c in chain]:
            tensor = block.tensors[t]
            tensor.shape = (tensor.shape[0], tensor.shape[1] - drop[0],
                            tensor.shape[2] - drop[1], tensor.shape[3])
        for user in block.operators:
            user.inputs = [src.name if n == out else n for n in user.inputs]
        block.operators.remove(op)
        notes.append(f"{conv_op.location}: computes {drop[0]} row(s)/{drop[1]} column(s) less "
                     f"(less bottom/right padding) so that the following window divides "
                     f"exactly")


def _shrink_conv(op: Operator, drop: tuple[int, int]) -> bool:
    """Make convolution ``op`` produce ``drop`` fewer output rows/columns by taking
    ``drop * stride`` rows/columns off its bottom/right padding; False (nothing changed)
    when the padding is too small.

    The division stays exact: the dividend shrinks by a multiple of the stride.
    """
    pad = list(op.attrs["pad"])
    stride = list(op.attrs["stride"])
    for i in range(2):
        delta = drop[i] * stride[i]
        if delta > pad[2 * i + 1]:
            return False
        pad[2 * i + 1] -= delta
    op.attrs["pad"] = pad
    return True


def note_trim_slices(block: Block, trim_slices: set[str], notes: list[str]) -> None:
    """A note for each SLICE in ``trim_slices`` still in the graph (not folded)."""
    for op in block.operators:
        if op.op == "SLICE" and op.outputs[0] in trim_slices:
            src = block.tensors[op.inputs[0]].shape
            dst = block.tensors[op.outputs[0]].shape
            notes.append(f"{op.location}: a SLICE drops the last {src[1] - dst[1]} "
                         f"row(s)/{src[2] - dst[2]} column(s) of {op.inputs[0]}, "
                         f"which no window reaches, so that the size divides exactly")


def dead_code(block: Block) -> None:
    needed = set(block.outputs)
    keep = []
    for op in reversed(block.operators):
        if any(o in needed for o in op.outputs):
            keep.append(op)
            needed.update(op.inputs)
    block.operators = keep[::-1]
    used = set(block.inputs) | set(block.outputs)
    for op in block.operators:
        used.update(op.inputs)
        used.update(op.outputs)
    for name in list(block.tensors):
        if name not in used:
            del block.tensors[name]
