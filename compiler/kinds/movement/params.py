"""Parameters of the TOSA data-movement operators, canonical and checked.

RESHAPE, TRANSPOSE, SLICE, PAD, CONCAT and IDENTITY keep their parameters as input tensors
in TOSA 1.0 (shape constants from CONST_SHAPE, PAD's ``pad_const`` a one-value tensor) and
as attributes in the draft form; these functions read either and return them in NHWC terms
(compiler/core/views.py: rank below 4 gets leading ones).  The spec's ERROR_IF conditions the
compiler relies on raise :class:`tosa_ir.errors.TosaError`; forms the NPU cannot move
(other element types, unknown sizes) raise :class:`tosa_ir.errors.Unsupported`.
"""
from __future__ import annotations

import numpy as np

from tosa_ir import Block, Operator
from tosa_ir.errors import TosaError
from tosa_ir.graph import INT_RANGES

from compiler.core.errors import invalid, unsupported
from compiler.core.operands import const_input
from compiler.core.views import axis4, shape4

MOVEMENT_OPS = ("RESHAPE", "TRANSPOSE", "SLICE", "PAD", "CONCAT", "IDENTITY")


def activation(op: Operator, block: Block, name: str, what: str) -> tuple[int, int, int, int]:
    """NHWC shape of the int8 activation ``name`` that ``op`` reads or writes."""
    tensor = block.tensors.get(name)
    if tensor is None:
        raise invalid(op, f"{what} {name!r} is not declared")
    if tensor.dtype != "int8":
        raise unsupported(op, f"{what} {name!r} is {tensor.dtype}; the NPU moves int8 activations only")
    if any(d < 0 for d in tensor.shape):
        raise unsupported(op, f"{what} {name!r} has unknown dimensions {tensor.shape}")
    s4 = shape4(tensor.shape)
    if s4 is None or min(s4) < 1:
        raise unsupported(op, f"{what} {name!r} has shape {tensor.shape}; the NPU moves tensors of rank "
                              f"1 to 4 (more only with leading ones), none empty")
    return s4


def _error_if(op: Operator, cond: bool, arg: str, text: str) -> None:
    if cond:
        raise TosaError(op.op, arg, text, op.location)


def operand(op: Operator, block: Block, index: int, names: tuple[str, ...], default=None) -> np.ndarray:
    """Constant operand ``index`` (TOSA 1.0) or the first attribute of ``names`` (draft)."""
    if len(op.inputs) > index and op.inputs[index]:
        return const_input(op, block, index, names[0])
    for name in names:
        if op.attrs.get(name) is not None:
            return np.asarray(op.attrs[name])
    if default is not None:
        return np.asarray(default)
    raise invalid(op, f"missing {names[0]} (neither input {index} nor attribute)")


def ints(value) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _rank(op: Operator, block: Block, name: str) -> int:
    return len(block.tensors[name].shape)


def slice_params(op: Operator, block: Block) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(start, size) of a SLICE, NHWC."""
    x, out = op.inputs[0], op.outputs[0]
    activation(op, block, x, "input")
    out4 = activation(op, block, out, "output")
    rank = _rank(op, block, x)
    start = ints(operand(op, block, 1, ("start",)))
    size = ints(operand(op, block, 2, ("size",)))
    shape = block.tensors[x].shape
    _error_if(op, len(start) != rank or len(size) != rank, "start",
              "rank(shape1) != length(start) || rank(shape1) != length(size)")
    _error_if(op, _rank(op, block, out) != rank, "output", "rank(shape1) != rank(shape)")
    for i in range(rank):
        _error_if(op, start[i] < 0, "start", f"start[{i}] < 0")
        _error_if(op, size[i] <= 0, "size", f"size[{i}] <= 0")
        _error_if(op, start[i] + size[i] > shape[i], "size", f"start[{i}] + size[{i}] > shape1[{i}]")
        _error_if(op, block.tensors[out].shape[i] != size[i], "output", f"shape[{i}] != size[{i}]")
    pad = [0] * (4 - rank)
    return tuple(pad + start), out4


def pad_params(op: Operator, block: Block) -> tuple[tuple[int, ...], int]:
    """((n0, n1, h0, h1, w0, w1, c0, c1), pad value) of a PAD."""
    x, out = op.inputs[0], op.outputs[0]
    activation(op, block, x, "input")
    activation(op, block, out, "output")
    rank = _rank(op, block, x)
    padding = ints(operand(op, block, 1, ("padding",)))
    value = operand(op, block, 2, ("pad_const", "pad_const_int"), default=0)
    value = int(np.asarray(value).reshape(-1)[0]) if np.asarray(value).size else 0
    _error_if(op, len(padding) != 2 * rank, "padding", "shape(padding) != [rank(shape1), 2]")
    _error_if(op, _rank(op, block, out) != rank, "output", "rank(shape) != rank(shape1)")
    lo, hi = INT_RANGES["int8"]
    _error_if(op, not lo <= value <= hi, "pad_const", f"pad_const {value} is not an int8 value")
    pad4 = [0] * 8
    for i in range(rank):
        before, after = padding[2 * i], padding[2 * i + 1]
        _error_if(op, before < 0 or after < 0, "padding", f"padding[{i},0] < 0 || padding[{i},1] < 0")
        _error_if(op, block.tensors[out].shape[i] != before + block.tensors[x].shape[i] + after, "output",
                  "shape[i] != padding[i,0] + shape1[i] + padding[i,1]")
        a = axis4(rank, i)
        pad4[2 * a], pad4[2 * a + 1] = before, after
    return tuple(pad4), value


def reshape_check(op: Operator, block: Block) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(input, output) NHWC shapes of a RESHAPE, its sizes checked."""
    x, out = op.inputs[0], op.outputs[0]
    in4, out4 = activation(op, block, x, "input"), activation(op, block, out, "output")
    new_shape = ints(operand(op, block, 1, ("shape", "new_shape")))
    out_shape = list(block.tensors[out].shape)
    _error_if(op, int(np.prod(out_shape)) != int(np.prod(block.tensors[x].shape)), "shape",
              "tensor_size(shape1) != tensor_size(shape)")
    if new_shape != out_shape and -1 not in new_shape:
        raise invalid(op, f"shape operand {new_shape} differs from the output shape {out_shape}")
    return in4, out4


def transpose_perm(op: Operator, block: Block) -> tuple[int, int, int, int]:
    """The TRANSPOSE's perms over NHWC (``out4 = in4.transpose(perm)``)."""
    x, out = op.inputs[0], op.outputs[0]
    activation(op, block, x, "input")
    activation(op, block, out, "output")
    rank = _rank(op, block, x)
    perms = ints(operand(op, block, 1, ("perms", "perm")))
    _error_if(op, _rank(op, block, out) != rank, "output", "rank(shape1) != rank(shape)")
    _error_if(op, len(perms) != rank, "perms", "length(perms) != rank(shape1)")
    _error_if(op, sorted(perms) != list(range(rank)), "perms", "perms is not a permutation of the axes")
    in_shape, out_shape = block.tensors[x].shape, block.tensors[out].shape
    for i in range(rank):
        _error_if(op, out_shape[i] != in_shape[perms[i]], "output", f"shape1[perms[{i}]] != shape[{i}]")
    lead = 4 - rank
    return tuple(list(range(lead)) + [lead + p for p in perms])


def concat_axis(op: Operator, block: Block) -> tuple[int, list[tuple[int, int, int, int]]]:
    """(NHWC axis, input NHWC shapes) of a CONCAT."""
    _error_if(op, not op.inputs, "input1", "input list is empty")
    out = op.outputs[0]
    out4 = activation(op, block, out, "output")
    rank = _rank(op, block, out)
    axis = int(np.asarray(op.attrs.get("axis", 0)).reshape(-1)[0])
    _error_if(op, axis < 0 or axis >= rank, "axis", "axis < 0 || axis >= max(1, rank(shapes1[0]))")
    a4 = axis4(rank, axis)
    shapes = []
    for k, name in enumerate(op.inputs):
        s4 = activation(op, block, name, f"input {k}")
        _error_if(op, _rank(op, block, name) != rank, "input1", f"rank(shapes1[{k}]) != rank(shapes1[0])")
        _error_if(op, any(s4[d] != out4[d] for d in range(4) if d != a4), "input1",
                  f"shapes1[{k}][index] != shapes1[0][index] for index != axis")
        shapes.append(s4)
    _error_if(op, sum(s[a4] for s in shapes) != out4[a4], "output",
              "shape[axis] != sum(shape_dim(shapes1[k], axis))")
    return a4, shapes


def identity_check(op: Operator, block: Block) -> tuple[int, int, int, int]:
    in4 = activation(op, block, op.inputs[0], "input")
    out4 = activation(op, block, op.outputs[0], "output")
    if in4 != out4:
        raise invalid(op, f"output shape {block.tensors[op.outputs[0]].shape} differs from the input's")
    return in4
