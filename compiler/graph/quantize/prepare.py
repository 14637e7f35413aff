"""Float-graph preparation before quantization.

* :func:`copy_graph`: a structural copy (constant arrays are shared, never mutated).
* :func:`fold_affine`: per-channel ``ADD``/``MUL`` by constants right after a convolution
  (a separate bias add, an unfolded batch normalization) go into its weights and bias.
* :func:`cut_float_tail`: the float-only operators at the end of the graph (softmax: its
  EXP/REDUCE_SUM/RECIPROCAL have no place in an integer graph of the NPU's operator set)
  are removed and the graph stops at the logits, the tensor that fed them.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tosa_ir import Block, Graph, Operator, Region, Tensor
from tosa_ir.errors import Unsupported

CONVS = ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D")
# Operators with an integer lowering in compiler.graph.quantize.lower.
LOWERABLE = frozenset(CONVS + ("MATMUL", "MAX_POOL2D", "AVG_POOL2D", "CLAMP", "ADD", "SUB",
                               "RESHAPE", "TRANSPOSE", "CONCAT", "PAD", "SLICE", "IDENTITY"))
# Lowered too (compiler/graph/quantize/lower.py: int8 TABLE, int32 MUL + RESCALE), but a tail of
# them after the logits is still cut when it can be (stop_at_logits).
LOWERABLE_EXTRA = frozenset({"MUL", "TANH", "SIGMOID"})
# What may follow the logits and be cut: softmax and sigmoid/tanh outputs, with layout ops.
TAIL_OPS = frozenset({"REDUCE_MAX", "REDUCE_SUM", "SUB", "ADD", "EXP", "RECIPROCAL", "MUL",
                      "SIGMOID", "TANH", "RESHAPE", "TRANSPOSE", "IDENTITY"})


CONST_OPS = ("CONST", "CONST_SHAPE")


def add_const_ops(block: Block) -> None:
    """Give every constant tensor an operator producing it: CONST, or CONST_SHAPE for shape
    values, as the official serializer writes them (its reference model requires them).

    Existing CONST/CONST_SHAPE operators are kept; the new ones go first, in order of use.
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


def strip_const_ops(block: Block) -> None:
    """Remove CONST/CONST_SHAPE operators (their tensors keep their data)."""
    block.operators = [op for op in block.operators if op.op not in CONST_OPS]


def copy_graph(graph: Graph) -> Graph:
    """Copy of ``graph``'s structure; tensor data arrays are shared (treat as read-only)."""
    regions = []
    for region in graph.regions:
        blocks = []
        for b in region.blocks:
            nb = Block(b.name, {n: dataclasses.replace(t) for n, t in b.tensors.items()},
                       [Operator(o.op, list(o.inputs), list(o.outputs), dict(o.attrs),
                                 o.location) for o in b.operators],
                       list(b.inputs), list(b.outputs))
            blocks.append(nb)
        regions.append(Region(region.name, blocks))
    return Graph(regions, graph.version, list(graph.profiles), list(graph.extensions),
                 graph.source)


def _channel_vector(t: Tensor, channels: int) -> np.ndarray | None:
    """The per-channel values of a constant broadcast only along the last axis, or None."""
    if not t.is_const or t.dtype != "fp32":
        return None
    shape = t.shape
    if any(d != 1 for d in shape[:-1]) or (shape and shape[-1] not in (1, channels)):
        return None
    return np.broadcast_to(np.asarray(t.data, np.float64).reshape(-1), (channels,))


def fold_affine(graph: Graph) -> list[str]:
    """Fold constant per-channel ADD/MUL following a convolution into it; returns notes."""
    block = graph.main
    notes = []
    changed = True
    while changed:
        changed = False
        producers, consumers = block.producers(), block.consumers()
        for op in block.operators:
            if op.op not in ("ADD", "MUL") or len(op.inputs) < 2:
                continue
            for i in (0, 1):
                src, other = op.inputs[i], op.inputs[1 - i]
                conv = producers.get(src)
                if conv is None or conv.op not in CONVS:
                    continue
                if len(consumers.get(src, [])) != 1 or src in block.outputs:
                    continue
                out_t = block.tensors[src]
                vec = _channel_vector(block.tensors[other], out_t.shape[-1])
                if vec is None or block.tensors[op.outputs[0]].shape != out_t.shape:
                    continue
                _fold_into(block, conv, op.op, vec)
                block.tensors.pop(src)
                conv.outputs = [op.outputs[0]]
                block.operators.remove(op)
                notes.append(f"{op.op} by a per-channel constant folded into "
                             f"{conv.op} -> {op.outputs[0]}")
                changed = True
                break
            if changed:
                break
    return notes


def _fold_into(block: Block, conv: Operator, kind: str, vec: np.ndarray) -> None:
    wt, bt = block.tensors[conv.inputs[1]], block.tensors[conv.inputs[2]]
    bias = np.broadcast_to(np.asarray(bt.data, np.float64).reshape(-1), vec.shape).copy()
    if kind == "ADD":
        bias = bias + vec
    else:
        w = np.asarray(wt.data, np.float64)
        if conv.op == "DEPTHWISE_CONV2D":
            kh, kw, c, m = w.shape
            w = w * vec.reshape(1, 1, c, m)
        else:
            w = w * vec.reshape((-1,) + (1,) * (w.ndim - 1))
        block.tensors[conv.inputs[1]] = Tensor(wt.name, wt.shape, wt.dtype,
                                               w.astype(np.float32))
        bias = bias * vec
    block.tensors[conv.inputs[2]] = Tensor(bt.name, (bias.size,), bt.dtype,
                                           bias.astype(np.float32))


def cut_float_tail(graph: Graph, lowered: frozenset[int] = frozenset()) -> list[Operator]:
    """Remove the float-only tail (softmax, ...) so that the graph ends at its logits.

    Returns the removed operators (empty when the graph is integer-lowerable as is).
    Operators in ``lowered`` (by ``id``: softmax groups the lowering takes whole) stay.

    Raises
    ------
    Unsupported
        A float-only operator that is not part of an output tail (it would cut off real
        layers), or a tail that does not reduce to graph tensors.
    """
    block = graph.main

    def float_only(lowerable) -> tuple[set[str], list[Operator]]:
        tainted: set[str] = set()
        removed: list[Operator] = []
        for op in block.operators:
            if (op.op not in lowerable and id(op) not in lowered) or \
                    any(n in tainted for n in op.inputs):
                removed.append(op)
                tainted.update(op.outputs)
        return tainted, removed

    tainted, removed = float_only(LOWERABLE)
    if any(op.op not in TAIL_OPS for op in removed):
        # MUL, TANH, SIGMOID inside the network (not only a tail): lowered, not cut.
        tainted, removed = float_only(LOWERABLE | LOWERABLE_EXTRA)
    if not removed:
        return []
    bad = [op for op in removed if op.op not in TAIL_OPS]
    if bad:
        first = next((op for op in removed if op.op not in LOWERABLE | LOWERABLE_EXTRA), bad[0])
        raise Unsupported(f"quantizer: {first.op} ({first.location or first.outputs[0]}) has "
                          f"no integer lowering in the NPU's operator set, and it is not "
                          f"only an output activation that could be left out")
    producers = block.producers()
    boundary: list[str] = []

    def collect(name: str, seen: set) -> None:
        if name in seen:
            return
        seen.add(name)
        if name in tainted:
            for n in producers[name].inputs:
                collect(n, seen)
        elif not block.tensors[name].is_const and name not in boundary:
            boundary.append(name)

    seen: set[str] = set()
    for out in block.outputs:
        collect(out, seen)
    removed_ids = {id(op) for op in removed}
    block.operators = [op for op in block.operators if id(op) not in removed_ids]
    block.outputs = boundary
    return removed
