"""Clean-up passes over the float TOSA block the OpenVINO converter built.

* :func:`fold_bias`: OpenVINO keeps a convolution's bias as a separate ``Add`` of a
  per-channel constant (also after a fully connected ``MatMul``, behind its RESHAPE);
  it goes into the CONV2D/DEPTHWISE_CONV2D bias.  Exact in float; in the integer graph it
  is the int32 bias of the convolution, as OpenVINO's own int8 kernels do.
* :func:`merge_clamps`: CLAMP -> CLAMP becomes one CLAMP.
* :func:`dead_code`: operators whose results reach no graph output go, with unused tensors
  (e.g. the unused indices of MaxPool-8).
* :func:`add_const_ops`: every constant tensor gets its CONST / CONST_SHAPE operator, as
  the official serializer writes graphs (the official reference model needs them).

Tensors that carry FakeQuantize parameters are never folded away.
"""
from __future__ import annotations

import numpy as np

from tosa_ir import Block, Operator

_CONVS = ("CONV2D", "DEPTHWISE_CONV2D")


def finish(c) -> None:
    """Run every pass on the converter's block."""
    fold_bias(c.block, set(c.given))
    merge_clamps(c.block, set(c.given))
    dead_code(c.block)
    add_const_ops(c.block)
    for mapping in (c.given, c.given_by, c.weight_given):
        for name in list(mapping):
            if name not in c.block.tensors:
                del mapping[name]


def _sole_user(block: Block, consumers, name: str, keep: set[str]) -> Operator | None:
    users = consumers.get(name, [])
    if len(users) != 1 or name in block.outputs or name in keep:
        return None
    return users[0]


def _bias_vector(block: Block, name: str, out_shape, channels: int) -> np.ndarray | None:
    """Values of constant ``name`` if it only varies along the last (channel) axis."""
    t = block.tensors[name]
    if not t.is_const or t.dtype != "fp32" or len(t.shape) != len(out_shape):
        return None
    if any(d != 1 for d in t.shape[:-1]) or t.shape[-1] not in (1, channels):
        return None
    return np.broadcast_to(np.asarray(t.data, np.float32).reshape(-1), (channels,))


def fold_bias(block: Block, keep: set[str]) -> None:
    changed = True
    while changed:
        changed = False
        producers, consumers = block.producers(), block.consumers()
        for op in block.operators:
            if op.op != "ADD":
                continue
            for i in (0, 1):
                src, other = op.inputs[i], op.inputs[1 - i]
                prod = producers.get(src)
                reshape = prod if prod is not None and prod.op == "RESHAPE" else None
                conv_out = reshape.inputs[0] if reshape is not None else src
                conv = producers.get(conv_out)
                if conv is None or conv.op not in _CONVS:
                    continue
                if _sole_user(block, consumers, src, keep) is not op:
                    continue
                if reshape is not None and \
                        _sole_user(block, consumers, conv_out, keep) is not reshape:
                    continue
                channels = block.tensors[conv_out].shape[-1]
                out_shape = block.tensors[op.outputs[0]].shape
                if block.tensors[src].shape != out_shape or out_shape[-1] != channels:
                    continue
                vec = _bias_vector(block, other, out_shape, channels)
                bias = block.tensors[conv.inputs[2]]
                if vec is None or not bias.is_const:
                    continue
                users_of_bias = consumers.get(conv.inputs[2], [])
                if len(users_of_bias) != 1:
                    continue
                bias.data = (np.asarray(bias.data, np.float32) + vec).astype(np.float32)
                last = reshape if reshape is not None else conv
                block.tensors.pop(src)
                last.outputs = [op.outputs[0]]
                block.operators.remove(op)
                changed = True
                break
            if changed:
                break


def merge_clamps(block: Block, keep: set[str]) -> None:
    changed = True
    while changed:
        changed = False
        producers, consumers = block.producers(), block.consumers()
        for op in block.operators:
            if op.op != "CLAMP":
                continue
            first = producers.get(op.inputs[0])
            if first is None or first.op != "CLAMP" or \
                    _sole_user(block, consumers, first.outputs[0], keep) is not op:
                continue
            lo = max(first.attrs["min_val"], op.attrs["min_val"])
            hi = min(first.attrs["max_val"], op.attrs["max_val"])
            if lo > hi:
                lo = hi
            op.attrs["min_val"], op.attrs["max_val"] = lo, hi
            op.inputs[0] = first.inputs[0]
            block.operators.remove(first)
            changed = True
            break


def dead_code(block: Block) -> None:
    needed = set(block.outputs)
    kept = []
    for op in reversed(block.operators):
        if any(o in needed for o in op.outputs):
            kept.append(op)
            needed.update(op.inputs)
    block.operators = kept[::-1]
    used = set(block.inputs) | set(block.outputs)
    for op in block.operators:
        used.update(op.inputs)
        used.update(op.outputs)
    for name in list(block.tensors):
        if name not in used:
            del block.tensors[name]


def add_const_ops(block: Block) -> None:
    """Give every constant tensor without a producer a CONST (or CONST_SHAPE) operator.

    The new operators go first, in order of first use; existing ones are kept.
    """
    produced = {o for op in block.operators for o in op.outputs}
    new = []
    for op in block.operators:
        for name in op.inputs:
            t = block.tensors.get(name)
            if t is not None and t.is_const and name not in produced:
                produced.add(name)
                new.append(Operator("CONST_SHAPE" if t.dtype == "shape" else "CONST", [],
                                    [name]))
    block.operators = new + block.operators
