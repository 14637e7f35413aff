"""The zero-tap form of a window graph: how the frontends once met TOSA's exact sizes.

NNEF and OpenVINO round window output sizes down; TOSA's must divide exactly.  The
frontends now slice off input rows no window reaches (compiler/frontends/common/windows.py); the
previous lowerings appended zero taps to the kernel instead.  :func:`zero_tap_form`
rebuilds that form from a new graph, and :func:`assert_zero_tap_form_agrees` checks on the
official TOSA reference model that both forms give bit-identical results.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from nnef_helpers import official_run  # noqa: E402

from compiler.graph.quantize import quantize_graph  # noqa: E402
from compiler.graph.quantize.prepare import add_const_ops, copy_graph, strip_const_ops  # noqa: E402
from tosa_ir import Block, Graph, Operator, Tensor  # noqa: E402

CONVS = ("CONV2D", "DEPTHWISE_CONV2D")


def _grow_kernel(block: Block, conv: Operator, rows: tuple[int, int]) -> bool:
    """Append zero taps (the weight zero point) so that ``conv`` spans ``rows`` more input
    rows/columns; False when the dilation does not divide them."""
    dil = conv.attrs["dilation"]
    if rows[0] % dil[0] or rows[1] % dil[1]:
        return False
    w = block.tensors[conv.inputs[1]]
    wzp = block.tensors[conv.inputs[4]].data.reshape(-1)[0]
    axes = (1, 2) if conv.op == "CONV2D" else (0, 1)
    widths = [(0, 0)] * 4
    widths[axes[0]], widths[axes[1]] = (0, rows[0] // dil[0]), (0, rows[1] // dil[1])
    data = np.pad(w.data, widths, constant_values=wzp)
    name = w.name + "_grown"
    block.add_tensor(Tensor(name, data.shape, w.dtype, data))
    conv.inputs[1] = name
    return True


def zero_tap_form(graph: Graph) -> Graph:
    """``graph`` with every trailing-row SLICE (start 0) replaced by zero taps, as the
    previous lowering had it: a SLICE before a convolution goes and the convolution's
    kernel grows over the dropped rows; a SLICE before a pooling goes and the convolution
    producing the pool's input (through RESCALE/CLAMP) computes fewer rows with a grown
    kernel.  SLICEs that cannot be replaced so stay (as they did before)."""
    g = copy_graph(graph)
    block = g.main
    strip_const_ops(block)
    for op in [o for o in block.operators if o.op == "SLICE"]:
        src, out = op.inputs[0], op.outputs[0]
        full, kept = block.tensors[src].shape, block.tensors[out].shape
        drop = (full[1] - kept[1], full[2] - kept[2])
        users = block.consumers().get(out, [])
        if np.any(block.tensors[op.inputs[1]].data != 0) or len(users) != 1:
            continue
        user = users[0]
        if user.op in CONVS:
            if not _grow_kernel(block, user, drop):
                continue
        else:
            producers, chain = block.producers(), []
            prod = producers.get(src)
            while prod is not None and prod.op in ("CLAMP", "RESCALE") and \
                    len(block.consumers()[prod.outputs[0]]) == 1:
                chain.append(prod)
                prod = producers.get(prod.inputs[0])
            if prod is None or prod.op not in CONVS or len(block.consumers()[prod.outputs[0]]) != 1:
                continue
            stride = prod.attrs["stride"]
            if not _grow_kernel(block, prod, (drop[0] * stride[0], drop[1] * stride[1])):
                continue
            for t in [prod] + chain:
                block.tensors[t.outputs[0]].shape = kept[:3] + block.tensors[t.outputs[0]].shape[3:]
        user.inputs[0] = src
        block.operators.remove(op)
    used = set(block.inputs) | set(block.outputs)
    for op in block.operators:
        used.update(op.inputs + op.outputs)
    for name in set(block.tensors) - used:      # the reference model rejects loose tensors
        del block.tensors[name]
    add_const_ops(block)
    return g


def conv_kernels(block: Block) -> list[tuple[int, int]]:
    """(KH, KW) of every CONV2D / DEPTHWISE_CONV2D weight, in operator order."""
    kernels = []
    for op in block.operators:
        if op.op in CONVS:
            w = block.tensors[op.inputs[1]].shape
            kernels.append(tuple(w[1:3] if op.op == "CONV2D" else w[:2]))
    return kernels


def assert_zero_tap_form_agrees(graph: Graph, x: dict, calib: list[dict]) -> dict:
    """The official reference model accepts ``graph`` and its :func:`zero_tap_form` and
    gives bit-identical results for both, in fp32 on ``x`` and after int8 quantization
    (calibrated on ``calib``).  Returns the fp32 outputs of ``graph``."""
    status, new_out = official_run(graph, x)
    assert status == "VALID"
    status, old_out = official_run(zero_tap_form(graph), x)
    assert status == "VALID"
    for name in graph.main.outputs:
        assert new_out[name].tobytes() == old_out[name].tobytes()

    qm = quantize_graph(graph, calib)
    xq = qm.quantize_inputs(x)
    status, new_q = official_run(qm.graph, xq)
    assert status == "VALID"
    status, old_q = official_run(zero_tap_form(qm.graph), xq)
    assert status == "VALID"
    np.testing.assert_array_equal(new_q[qm.outputs[0]], old_q[qm.outputs[0]])
    return new_out


def draw_window(rng: np.random.Generator, window: bool, end_padding: bool = True,
                stride=None):
    """One random 2-D window case: input ``(h, w)`` of 5..19, kernel ``k`` of 1..5,
    stride ``s`` of 1..4 (or ``stride``), dilation ``d`` of 1..2 (1 for a pooling
    ``window``), padding ``p`` [[top, bottom], [left, right]] of 0..2 (smaller than the
    kernel for a pooling ``window``; no bottom/right padding without ``end_padding``).

    Returns ``(h, w, k, s, d, p, num, out)``: ``num`` the numerators of the output size
    divisions (negative when the kernel does not fit) and ``out`` the rounded-down output
    sizes.
    """
    h, w = (int(v) for v in rng.integers(5, 20, 2))
    k = [int(v) for v in rng.integers(1, 6, 2)]
    s = [int(v) for v in rng.integers(1, 5, 2)]
    d = [1, 1] if window else [int(v) for v in rng.integers(1, 3, 2)]
    p = [[int(v) for v in rng.integers(0, 3, 2)] for _ in range(2)]
    if window:      # TOSA pools need padding smaller than the kernel
        p = [[min(v, k[i] - 1) for v in p[i]] for i in range(2)]
    if not end_padding:
        p = [[p[0][0], 0], [p[1][0], 0]]
    if stride is not None:
        s = list(stride)
    num = [size - 1 + sum(p[i]) - (k[i] - 1) * d[i] for i, size in enumerate((h, w))]
    out = [n // s[i] + 1 for i, n in enumerate(num)]
    return h, w, k, s, d, p, num, out
