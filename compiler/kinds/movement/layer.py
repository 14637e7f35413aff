"""Data movement of ``rows`` tensors (isa/layout.py) as :class:`MoveLayer` s: element-mode DMA
copies (lowered by compiler/kinds/movement/lower.py).

Every operator here maps output elements to input elements (or to a fill value) by an
*affine* rule along each output axis, so a copy is a list of :class:`Part` s: nested loops
``(count, source stride, destination stride)`` in bytes, the innermost one becoming DMA
lines (element mode: any source stride, negative for REVERSE, zero for broadcasts).

==========  ================================================================================
TRANSPOSE   output axis k walks input axis perms[k]
SLICE       the window's start in the source address
REVERSE     a negative stride from the last element
TILE        every output axis split in (multiple, dim): the multiple with source stride 0
PAD         a fill of the whole output (one element repeated: stride 0), then the input
            copied into its window
CONCAT      each input copied into its window of the output
RESHAPE     rows keep their row-major order, but rows are padded to whole vectors: the flat
            index is cut in runs of ``g = gcd(D_in, D_out)`` elements that never cross a row
            on either side, grouped so both addresses are affine (a view when the innermost
            dimension stays)
==========  ================================================================================

Strides are those of the rows layout (:func:`row_strides`); addresses are relative to the
tensors' roots, resolved by the lowering.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tosa_ir import Block, Operator
from tosa_ir.graph import numpy_dtype

from compiler.core.errors import invalid, unsupported
from compiler.kinds.movement.params import ints, operand

MOVE_OPS = ("TRANSPOSE", "SLICE", "REVERSE", "TILE", "PAD", "CONCAT", "RESHAPE")

Loop = tuple[int, int, int]      # (count, source stride, destination stride), bytes


def row_strides(shape, itemsize: int, lanes: int) -> list[int]:
    """Bytes per step along each axis of a rows tensor of ``shape`` (rank 0: ``[1]``)."""
    shape = tuple(shape) or (1,)
    width = -(-shape[-1] // lanes) * lanes
    strides = [itemsize]
    step = width * itemsize
    for d in reversed(shape[:-1]):
        strides.append(step)
        step *= d
    return list(reversed(strides))


@dataclass
class Part:
    """One affine copy: ``source`` is an input index, or None for the fill value."""

    source: int | None
    src_offset: int
    dst_offset: int
    loops: list[Loop]


@dataclass
class MoveLayer:
    name: str
    inputs: list[str]
    output: str
    itemsize: int
    parts: list[Part]
    fill: bytes | None = None          # the fill element (PAD's value), little-endian
    ops: list[str] = field(default_factory=list)
    location: str = ""

    macs = 0

    @property
    def reads(self) -> list[str]:
        return list(self.inputs)

    @property
    def writes(self) -> list[str]:
        return [self.output]

    def where(self) -> str:
        return f"{self.name} ({self.location})" if self.location else self.name


def _shape(block: Block, name: str) -> tuple[int, ...]:
    return tuple(block.tensor(name).shape)


def move_layer(op: Operator, block: Block, name: str, lanes: int) -> MoveLayer:
    """The :class:`MoveLayer` of ``op`` (its inputs and output are rows tensors)."""
    x, y = op.inputs[0], op.outputs[0]
    xt, yt = block.tensor(x), block.tensor(y)
    if any(d < 0 for d in xt.shape + yt.shape):
        raise unsupported(op, "unknown dimensions")
    size = numpy_dtype(yt.dtype).itemsize
    ins, outs = _shape(block, x), _shape(block, y)
    si, so = row_strides(ins, size, lanes), row_strides(outs, size, lanes)
    rank = len(outs)
    kind = op.op
    parts: list[Part] = []
    fill = None
    inputs = [x]
    if kind == "TRANSPOSE":
        perms = ints(operand(op, block, 1, ("perms", "perm")))
        if sorted(perms) != list(range(len(ins))) or len(perms) != rank:
            raise invalid(op, f"perms {perms} is not a permutation of {len(ins)} axes")
        parts.append(Part(0, 0, 0, [(outs[k], si[perms[k]], so[k]) for k in range(rank)]))
    elif kind == "SLICE":
        start = ints(operand(op, block, 1, ("start",)))
        parts.append(Part(0, sum(s * t for s, t in zip(start, si)), 0,
                          [(outs[k], si[k], so[k]) for k in range(rank)]))
    elif kind == "REVERSE":
        axis = int(op.attrs.get("axis", 0))
        loops = [(outs[k], si[k], so[k]) for k in range(rank)]
        loops[axis] = (outs[axis], -si[axis], so[axis])
        parts.append(Part(0, (ins[axis] - 1) * si[axis], 0, loops))
    elif kind == "TILE":
        multiples = ints(operand(op, block, 1, ("multiples",)))
        loops = []
        for k in range(rank):
            loops += [(multiples[k], 0, ins[k] * so[k]), (ins[k], si[k], so[k])]
        parts.append(Part(0, 0, 0, loops))
    elif kind == "PAD":
        padding = ints(operand(op, block, 1, ("padding",)))
        value = operand(op, block, 2, ("pad_const", "pad_const_int"), default=0)
        value = int(np.asarray(value).reshape(-1)[0]) if np.asarray(value).size else 0
        fill = np.array([value], dtype=numpy_dtype(yt.dtype)).astype(f"<i{size}" if size > 1 else "i1").tobytes()
        parts.append(Part(None, 0, 0, [(outs[k], 0, so[k]) for k in range(rank)]))
        parts.append(Part(0, 0, sum(padding[2 * k] * so[k] for k in range(rank)),
                          [(ins[k], si[k], so[k]) for k in range(rank)]))
    elif kind == "CONCAT":
        axis = int(op.attrs.get("axis", 0))
        inputs = list(op.inputs)
        at = 0
        for k, t in enumerate(inputs):
            s = _shape(block, t)
            if len(s) != rank:
                # ERROR_IF(rank(input) != rank(output)): reported as illegal even when the
                # graph is too large for the validation pass's dry run.
                raise invalid(op, f"input {k} has rank {len(s)}, the output rank {rank}")
            st = row_strides(s, size, lanes)
            parts.append(Part(k, 0, at * so[axis], [(s[j], st[j], so[j]) for j in range(rank)]))
            at += s[axis]
    elif kind == "RESHAPE":
        parts = _reshape_parts(ins, outs, si, so, size)
    else:
        raise unsupported(op, "not a data-movement operator")
    return MoveLayer(name, inputs, y, size, parts, fill, ops=[op.describe()], location=op.location)


def _reshape_parts(ins, outs, si, so, size) -> list[Part]:
    """RESHAPE between rows tensors: runs of g elements contiguous on both sides."""
    total = int(np.prod(outs, dtype=np.int64))
    d_in, d_out = (ins or (1,))[-1], (outs or (1,))[-1]
    if total == 0:
        return []
    g = math.gcd(d_in, d_out)
    a, b = d_in // g, d_out // g            # runs per input / output row
    row_in = si[-2] if len(ins) > 1 else 0
    row_out = so[-2] if len(outs) > 1 else 0
    q = total // g                          # runs
    c = a * b // math.gcd(a, b)             # runs after which both sides restart a row
    line = (g, size, size)

    def run_addr(j: int, per_row: int, row: int) -> int:
        return (j // per_row) * row + (j % per_row) * g * size

    # Within a period of c runs, run j sits at an affine address on a side when that side's
    # rows hold 1 or c runs; then one part walks the periods' runs as lines.
    if a in (1, c) and b in (1, c):
        step_in = row_in if a == 1 else g * size
        step_out = row_out if b == 1 else g * size
        return [Part(0, 0, 0, [(q // c, (c // a) * row_in, (c // b) * row_out), (c, step_in, step_out), line])]
    # Else: one part per run of the period, walking the periods.
    return [Part(0, run_addr(j, a, row_in), run_addr(j, b, row_out),
                 [(q // c, (c // a) * row_in, (c // b) * row_out), line]) for j in range(c)]


def pad_repeat_layer(name: str, src: str, dst: str, in_shape, pad: tuple[int, int, int, int], repeat: int,
                     value: int, dtype: str, lanes: int, ops: list[str], location: str) -> MoveLayer:
    """``dst`` = the NHWC rows tensor ``src`` padded in H and W by ``pad`` (top, bottom, left,
    right) with ``value``, each channel repeated ``repeat`` times (channel ``c*repeat + m`` is
    channel ``c``): DEPTHWISE_CONV2D's padding and channel multiplier."""
    n, h, w, c = in_shape
    out = (n, h + pad[0] + pad[1], w + pad[2] + pad[3], c * repeat)
    size = numpy_dtype(dtype).itemsize
    si, so = row_strides(in_shape, size, lanes), row_strides(out, size, lanes)
    parts = []
    fill = None
    if any(pad):
        fill = np.array([value], dtype=numpy_dtype(dtype)).tobytes()
        parts.append(Part(None, 0, 0, [(d, 0, st) for d, st in zip(out, so)]))
    loops = [(n, si[0], so[0]), (h, si[1], so[1]), (w, si[2], so[2]), (c, si[3], repeat * size), (repeat, 0, size)]
    parts.append(Part(0, 0, pad[0] * so[1] + pad[2] * so[2], loops))
    return MoveLayer(name, [src], dst, size, parts, fill, ops=list(ops), location=location)


def _runs(index: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``index`` (input coordinate per output coordinate) as arithmetic runs
    (output start, count, input start, input step)."""
    runs = []
    o = 0
    while o < len(index):
        step = int(index[o + 1] - index[o]) if o + 1 < len(index) else 0
        n = 1
        while o + n < len(index) and index[o + n] - index[o + n - 1] == step:
            n += 1
        if n == 1:
            step = 0
        runs.append((o, n, int(index[o]), step))
        o += n
    return runs


def gather_axis_layer(name: str, src: str, dst: str, in_shape, axis: int, index: np.ndarray, dtype: str,
                      lanes: int, ops: list[str], location: str) -> MoveLayer:
    """``dst[..., o, ...] = src[..., index[o], ...]`` along ``axis`` (not the innermost) of
    rows tensors: one copy per arithmetic run of ``index`` (RESIZE's row and column maps)."""
    out = tuple(len(index) if k == axis else d for k, d in enumerate(in_shape))
    size = numpy_dtype(dtype).itemsize
    si, so = row_strides(in_shape, size, lanes), row_strides(out, size, lanes)
    parts = []
    for o, n, i, step in _runs(np.asarray(index)):
        loops = [(out[k], si[k], so[k]) if k != axis else (n, step * si[k], so[k]) for k in range(len(out))]
        parts.append(Part(0, i * si[axis], o * so[axis], loops))
    return MoveLayer(name, [src], dst, size, parts, ops=list(ops), location=location)
