"""Clean-up passes over the float TOSA block the OpenVINO converter built.

* :func:`fold_bias`: OpenVINO keeps a convolution's bias as a separate ``Add`` of a
  per-channel constant (also after a fully connected ``MatMul``, behind its RESHAPE);
  it goes into the CONV2D/DEPTHWISE_CONV2D bias.  Exact in float; in the integer graph it
  is the int32 bias of the convolution, as OpenVINO's own int8 kernels do.
* Then the passes shared with the NNEF frontend (:mod:`compiler.frontends.common.graph_passes`):
  CLAMP -> CLAMP merged; tail-trimming SLICEs (added where OpenVINO's rounding-down
  output size is not an exact TOSA division) folded into the producing convolution where
  taking padding off it is enough; dead code removed (e.g. the unused indices of
  MaxPool-8).
* :func:`~compiler.graph.quantize.prepare.add_const_ops`: every constant tensor gets its CONST /
  CONST_SHAPE operator, as the official serializer writes graphs (the official reference
  model needs them).

Tensors that carry FakeQuantize parameters are never folded away.
"""
from __future__ import annotations

import numpy as np

from compiler.frontends.common.graph_passes import (
    dead_code, fold_slices, merge_clamps, note_trim_slices, sole_user,
)
from compiler.graph.quantize.prepare import add_const_ops
from tosa_ir import Block

_CONVS = ("CONV2D", "DEPTHWISE_CONV2D")


def finish(c) -> None:
    """Run every pass on the converter's block."""
    keep = set(c.given)
    fold_bias(c.block, keep)
    merge_clamps(c.block, keep)
    fold_slices(c.block, c.notes, keep)
    dead_code(c.block)
    note_trim_slices(c.block, c.trim_slices, c.notes)
    add_const_ops(c.block)
    for mapping in (c.given, c.given_by, c.weight_given):
        for name in list(mapping):
            if name not in c.block.tensors:
                del mapping[name]


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
                if sole_user(block, consumers, src, keep) is not op:
                    continue
                if reshape is not None and \
                        sole_user(block, consumers, conv_out, keep) is not reshape:
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
