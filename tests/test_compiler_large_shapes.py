"""Compiler: shapes the TOSA level 8K allows that are far larger than the scratchpads (and odd
ones): elementwise with broadcasting (up to rank 6, 1x2x65536x1), long reductions (split
past one VPOOL window), TABLE, RESCALE, CAST, pools and convs with huge W or H and few
channels, data movement on big tensors, values moving between lanes of brick tensors
(through the rows layout), chained.  Most graphs run on the 4x4 NPU with its tiny
scratchpads (the same tiling paths as large tensors on the 16x16 one, quickly); one
1x2x65536x1 graph runs on the default NPU.  Compiled programs run on the ISA simulator and
are compared bit-exactly with the reference interpreter (sim.reference).  What does not
fit says so with exit code 3."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from vector_graphs import VecBuilder, run_and_compare  # noqa: E402

from compiler.driver import run_pipeline  # noqa: E402
from compiler.kinds.movement.layer import MoveLayer  # noqa: E402
from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig  # noqa: E402
from tosa_ir.errors import Unsupported  # noqa: E402

# The 4x4 NPU (4 KiB of ASRAM, 1 KiB... of ACC) with room for long programs and big tensors.
SMALL = NpuConfig(**{**SMALL_CONFIG.to_dict(), "imem_rows": 4096, "ext_mem_bytes": 4 << 20})


def shape_const(g: VecBuilder, values) -> str:
    return g.const(np.array(values), "shape")


def conv(g: VecBuilder, x: str, oc: int, k=(1, 1), pad=(0, 0, 0, 0), stride=(1, 1), shift=38) -> str:
    """int8 CONV2D -> RESCALE int8 (the fused array path)."""
    n, h, w, ic = g.shape(x)
    oh = (h + pad[0] + pad[1] - k[0]) // stride[0] + 1
    ow = (w + pad[2] + pad[3] - k[1]) // stride[1] + 1
    wt = g.const(g.rng.integers(-128, 128, (oc, k[0], k[1], ic)), "int8")
    b = g.const(g.rng.integers(-1000, 1000, (oc,)), "int32")
    acc = g.op("CONV2D", [x, wt, b, g.const([0], "int8"), g.const([0], "int8")], (n, oh, ow, oc), "int32",
               pad=list(pad), stride=list(stride), dilation=[1, 1], acc_type="INT32")
    return g.rescale(acc, "int8", 1 << 30, shift)


CASES: dict = {}


def case(config=SMALL):
    def register(build):
        CASES[build.__name__] = (build, config)
        return build
    return register


# -- elementwise and broadcasting ---------------------------------------------------------
@case(DEFAULT_CONFIG)
def huge_1x2x65536x1(g):
    """The level's widest tensors, int8/int16/int32, broadcast along H and W; a conv and a
    pool over the same width."""
    x = g.input((1, 2, 65536, 1), "int8")
    a = g.op("BITWISE_XOR", [x, g.input((1, 1, 65536, 1), "int8")], (1, 2, 65536, 1), "int8")
    x16 = g.input((1, 2, 65536, 1), "int16")
    sh = g.op("ARITHMETIC_RIGHT_SHIFT", [x16, g.const(np.full((1, 1, 1, 1), 3), "int16")], (1, 2, 65536, 1),
              "int16", round=True)
    b = g.op("BITWISE_AND", [sh, g.input((1, 2, 1, 1), "int16")], (1, 2, 65536, 1), "int16")
    x32 = g.input((1, 2, 65536, 1), "int32", -1 << 30, 1 << 30)
    c = g.op("ADD", [x32, g.input((1, 1, 65536, 1), "int32", -1 << 30, 1 << 30)], (1, 2, 65536, 1), "int32")
    y = conv(g, x, 1, k=(2, 3), pad=(0, 1, 1, 1))
    m = g.op("MAX_POOL2D", [y], (1, 1, 32768, 1), "int8", kernel=[2, 2], stride=[2, 2], pad=[0, 0, 0, 0])
    return [a, b, c, m]


@case()
def broadcast_wide(g):
    x = g.input((1, 2, 4099, 1), "int8")
    a = g.op("BITWISE_OR", [x, g.input((1, 1, 4099, 1), "int8")], (1, 2, 4099, 1), "int8")
    y = g.input((2, 3000, 1), "int32", -1 << 29, 1 << 29)
    s = g.op("SUB", [y, g.input((1, 1, 1), "int32", -1 << 29, 1 << 29)], (2, 3000, 1), "int32")
    return [a, s]


@case()
def rank6_and_rank5(g):
    x = g.input((2, 1, 3, 5, 1, 37), "int16")
    m = g.op("CLAMP", [x], (2, 1, 3, 5, 1, 37), "int16", min_val=-1000, max_val=2000)
    a = g.op("BITWISE_XOR", [m, g.input((1, 4, 3, 1, 6, 37), "int16")], (2, 4, 3, 5, 6, 37), "int16")
    p = g.mul(g.input((3, 1, 5, 70, 9), "int32", -30000, 30000), g.input((1, 4, 5, 1, 9), "int32", -30000, 30000))
    return [a, p]


@case()
def table_rescale_cast(g):
    t = g.op("TABLE", [g.input((1, 5000), "int8"), g.const(g.rng.integers(-128, 128, 256), "int8")], (1, 5000),
             "int8")
    r8 = g.rescale(g.input((1, 2, 3001, 1), "int16"), "int8", 1 << 30, 33, ozp=3)
    r16 = g.rescale(g.input((2, 1500, 7), "int32"), "int16", [1 << 30] * 7, list(range(40, 47)), per_channel=True)
    c = g.op("CAST", [r16], (2, 1500, 7), "int8")
    return [t, r8, r16, c]


# -- reductions ---------------------------------------------------------------------------
@case()
def long_reductions(g):
    """Axes longer than one VPOOL window (255): split in two, padded with the identity when
    no divisor pair fits (997 and 701 are prime)."""
    s = g.op("REDUCE_SUM", [g.input((2, 1000, 5), "int32", -1000, 1000)], (2, 1, 5), "int32", axis=1)
    x = g.input((3, 997), "int16")
    mn = g.op("REDUCE_MIN", [x], (3, 1), "int16", axis=1)
    mx = g.op("REDUCE_MAX", [g.input((701, 2, 3), "int8")], (1, 2, 3), "int8", axis=0)
    b = g.input((2, 300), "bool")
    an = g.op("REDUCE_ALL", [b], (2, 1), "bool", axis=1)
    am = g.op("ARGMAX", [x], (3,), "int32", axis=1)
    return [s, mn, mx, an, am]


@case()
def gather_long(g):
    v = g.input((2, 3000, 3), "int8")
    return [g.op("GATHER", [v, g.input((2, 5), "int32", 0, 2999)], (2, 5, 3), "int8")]


@case(DEFAULT_CONFIG)
def scatter_long(g):
    # W = 260 updates (the reductions over W are split) into K = 300 values: the one-hot
    # intermediates are W x K vectors (on the 4x4 NPU more instructions than it holds).
    src = g.input((1, 260, 2), "int8")
    sca = g.op("SCATTER", [g.input((1, 300, 2), "int8"), g.const(g.rng.permutation(300)[:260].reshape(1, 260),
                                                                   "int32"), src], (1, 300, 2), "int8")
    return [sca]


# -- pools and convs with huge W or H -----------------------------------------------------
@case()
def conv_huge_w_and_h(g):
    a = conv(g, g.input((1, 2, 3000, 1), "int8"), 3, k=(1, 3))
    b = conv(g, g.input((1, 3000, 2, 1), "int8"), 2, k=(3, 2), pad=(1, 1, 0, 0))
    return [a, b]


@case()
def pools_huge_w_and_h(g):
    """One output row wider than ASRAM: the brick pool tiles columns."""
    x = g.input((1, 2000, 2, 3), "int8")
    m = g.op("MAX_POOL2D", [x], (1, 1000, 1, 3), "int8", kernel=[2, 2], stride=[2, 2], pad=[0, 0, 0, 0])
    w = g.input((1, 3, 3001, 5), "int8")
    a = g.op("AVG_POOL2D", [w, g.const([-3], "int8"), g.const([4], "int8")], (1, 2, 1001, 5), "int8",
             kernel=[2, 3], stride=[2, 3], pad=[1, 0, 1, 1], acc_type="INT32")
    m2 = g.op("MAX_POOL2D", [g.input((1, 1, 5000, 2), "int8")], (1, 1, 2500, 2), "int8", kernel=[1, 3],
              stride=[1, 2], pad=[0, 0, 1, 0])
    return [m, a, m2]


# -- data movement ------------------------------------------------------------------------
@case()
def movement_chain_big(g):
    """CONCAT/PAD/SLICE along channels inside bricks, TRANSPOSE moving channels, REVERSE and
    TILE of int8 NHWC tensors."""
    x = g.input((1, 3, 2000, 3), "int8")
    c = g.op("CONCAT", [x, x], (1, 3, 2000, 6), "int8", axis=3)
    p = g.op("PAD", [c, shape_const(g, [0, 0, 1, 0, 0, 5, 1, 2]), g.const([7], "int8")], (1, 4, 2005, 9), "int8")
    s = g.op("SLICE", [p, shape_const(g, [0, 1, 3, 1]), shape_const(g, [1, 3, 2000, 7])], (1, 3, 2000, 7), "int8")
    t = g.op("TRANSPOSE", [s], (1, 7, 3, 2000), "int8", perms=[0, 3, 1, 2])
    r = g.op("REVERSE", [t], (1, 7, 3, 2000), "int8", axis=3)
    return [g.op("TILE", [r, shape_const(g, [1, 1, 2, 1])], (1, 7, 6, 2000), "int8")]


@case()
def movement_rank6(g):
    x = g.input((2, 3, 1, 4, 5, 6), "int16")
    t = g.op("TRANSPOSE", [x], (6, 4, 2, 1, 5, 3), "int16", perms=[5, 3, 0, 2, 4, 1])
    ti = g.op("TILE", [t, shape_const(g, [1, 1, 1, 3, 1, 2])], (6, 4, 2, 3, 5, 6), "int16")
    c = g.op("CONCAT", [ti, ti], (6, 4, 2, 3, 10, 6), "int16", axis=4)
    r = g.op("REVERSE", [c], (6, 4, 2, 3, 10, 6), "int16", axis=5)
    s = g.op("SLICE", [r, shape_const(g, [1, 0, 0, 1, 2, 1]), shape_const(g, [4, 4, 2, 2, 7, 5])],
             (4, 4, 2, 2, 7, 5), "int16")
    p = g.op("PAD", [s, shape_const(g, [0, 1, 0, 0, 1, 0, 0, 0, 2, 1, 0, 3]), g.const([-7], "int16")],
             (5, 4, 3, 2, 10, 8), "int16")
    return [p, g.op("RESHAPE", [p, shape_const(g, [9600])], (9600,), "int16")]


@case()
def conv_outputs_regrouped(g):
    """RESHAPE/TRANSPOSE of a conv output of 10 channels (several bricks, the last one
    partial): copies through the rows layout, back to bricks for the next conv."""
    y = conv(g, g.input((1, 6, 7, 3), "int8"), 10)
    r = g.op("RESHAPE", [y, shape_const(g, [1, 6, 10, 7])], (1, 6, 10, 7), "int8")
    t = g.op("TRANSPOSE", [y], (1, 10, 6, 7), "int8", perms=[0, 3, 1, 2])
    r2 = g.op("RESHAPE", [y, shape_const(g, [6, 70])], (6, 70), "int8")
    return [conv(g, r, 5), conv(g, t, 2, k=(3, 3)), r2,
            g.op("REDUCE_MAX", [y], (1, 6, 7, 1), "int8", axis=3),
            g.op("TABLE", [y, g.const(g.rng.integers(-128, 128, 256), "int8")], (1, 6, 7, 10), "int8")]


@case()
def chain_conv_reshape_reduce_table(g):
    y = conv(g, g.input((1, 4, 300, 2), "int8"), 6, k=(3, 3), pad=(1, 1, 1, 1))
    r = g.op("RESHAPE", [y, shape_const(g, [1, 4, 1800])], (1, 4, 1800), "int8")
    m = g.op("REDUCE_MAX", [r], (1, 4, 1), "int8", axis=2)
    t = g.op("TABLE", [r, g.const(g.rng.integers(-128, 128, 256), "int8")], (1, 4, 1800), "int8")
    return [m, g.op("TRANSPOSE", [t], (1800, 4, 1), "int8", perms=[2, 1, 0])]


@case(DEFAULT_CONFIG)
def regroup_lanes_default(g):
    """The 16-lane NPU: (1,1,8,8) -> (1,8,8,1), and a 20-channel conv output (a brick and a
    partial one) regrouped to 8 channels for the next conv."""
    a = g.op("RESHAPE", [g.input((1, 1, 8, 8), "int8"), shape_const(g, [1, 8, 8, 1])], (1, 8, 8, 1), "int8")
    y = conv(g, g.input((1, 5, 4, 3), "int8"), 20)
    r = g.op("RESHAPE", [y, shape_const(g, [1, 5, 10, 8])], (1, 5, 10, 8), "int8")
    return [conv(g, a, 3), conv(g, r, 4, k=(3, 3), pad=(1, 1, 1, 1))]


@case()
def lane_moves_of_windows_slots_and_constants(g):
    """Lane-moving movement of a SLICE window, a CONCAT slot and a constant; PAD of
    channels as a graph output; REVERSE along channels and TILE of channels."""
    x = g.input((1, 4, 5, 3), "int8")
    y = conv(g, x, 10)
    s = g.op("SLICE", [y, shape_const(g, [0, 1, 1, 4]), shape_const(g, [1, 3, 4, 6])], (1, 3, 4, 6), "int8")
    r = g.op("RESHAPE", [s, shape_const(g, [1, 3, 6, 4])], (1, 3, 6, 4), "int8")
    c = g.op("CONCAT", [conv(g, x, 4), conv(g, x, 5)], (1, 4, 5, 9), "int8", axis=3)
    t = g.op("TRANSPOSE", [c], (1, 9, 4, 5), "int8", perms=[0, 3, 1, 2])
    k = g.const(g.rng.integers(-128, 128, (1, 3, 4, 6)), "int8")
    kt = g.op("TRANSPOSE", [k], (1, 6, 3, 4), "int8", perms=[0, 3, 1, 2])
    kc = g.op("CONCAT", [kt, g.input((1, 6, 3, 4), "int8")], (1, 6, 3, 8), "int8", axis=3)
    p = g.op("PAD", [conv(g, x, 6), shape_const(g, [0, 0, 0, 1, 2, 0, 3, 1]), g.const([-5], "int8")],
             (1, 5, 7, 10), "int8")
    rv = g.op("REVERSE", [conv(g, x, 6)], (1, 4, 5, 6), "int8", axis=3)
    tl = g.op("TILE", [rv, shape_const(g, [1, 1, 1, 2])], (1, 4, 5, 12), "int8")
    return [conv(g, r, 3), s, conv(g, t, 2), c, conv(g, kc, 3), p, conv(g, tl, 3), conv(g, rv, 2)]


@case(DEFAULT_CONFIG)
def huge_brick_movement_and_argmax(g):
    """PAD/TRANSPOSE/CONCAT/RESHAPE of a 1x2x65536x1 conv output feeding convs, and an
    ARGMAX over 70000 elements (split twice)."""
    x = g.input((1, 2, 65536, 1), "int8")
    y = conv(g, x, 1)
    p = g.op("PAD", [y, shape_const(g, [0, 0, 0, 0, 3, 2, 0, 0]), g.const([5], "int8")], (1, 2, 65541, 1), "int8")
    t = g.op("TRANSPOSE", [y], (1, 65536, 2, 1), "int8", perms=[0, 2, 1, 3])
    c = g.op("CONCAT", [y, x], (1, 4, 65536, 1), "int8", axis=1)
    r = g.op("RESHAPE", [y, shape_const(g, [1, 2, 1024, 64])], (1, 2, 1024, 64), "int8")
    am = g.op("ARGMAX", [g.input((1, 70000), "int8")], (1,), "int32", axis=1)
    return [conv(g, p, 1), conv(g, t, 1), conv(g, c, 1), conv(g, r, 2), am]


@case()
def reductions_rank6(g):
    x = g.input((2, 3, 2, 300, 2, 5), "int32", -1000, 1000)
    return [g.op("REDUCE_SUM", [x], (2, 3, 2, 1, 2, 5), "int32", axis=3),
            g.op("REDUCE_MAX", [x], (2, 3, 2, 300, 2, 1), "int32", axis=5)]


@pytest.mark.parametrize("name", list(CASES))
def test_large_and_odd_shapes(name):
    build, config = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    g = VecBuilder(rng, name)
    g.rng = rng
    graph = g.graph(build(g))
    run_and_compare(graph, g.inputs(rng), config)


def test_brick_to_rows_copies_move_whole_words():
    """Copies between bricks and rows move whole bricks: word-mode DMA (elem 0)."""
    rng = np.random.default_rng(5)
    g = VecBuilder(rng, "m")
    g.rng = rng
    y = conv(g, g.input((1, 6, 7, 3), "int8"), 10)
    t = g.op("TRANSPOSE", [y], (1, 10, 6, 7), "int8", perms=[0, 3, 1, 2])
    comp = run_and_compare(g.graph([conv(g, t, 2)]), g.inputs(rng), SMALL)
    moves = [i for i, layer in enumerate(comp.layers) if isinstance(layer, MoveLayer)]
    assert len(moves) == 3        # bricks -> rows, the transpose, rows -> bricks
    elems = [[op.instr.values["elem"] for op in comp.plans[i].ops] for i in moves]
    assert set(elems[0]) == {0} and set(elems[2]) == {0}
    assert set(elems[1]) == {1}   # the transpose itself moves single bytes


def test_movement_chains_stay_in_rows():
    """A chain of lane-moving movement with no brick reader after it is copied into the rows
    layout once, not back and forth: bricks -> rows, then one copy per operator."""
    rng = np.random.default_rng(6)
    g = VecBuilder(rng, "m")
    g.rng = rng
    y = conv(g, g.input((1, 5, 9, 3), "int8"), 6)
    t = g.op("TRANSPOSE", [y], (1, 6, 5, 9), "int8", perms=[0, 3, 1, 2])
    r = g.op("REVERSE", [t], (1, 6, 5, 9), "int8", axis=2)
    s = g.op("SLICE", [r, shape_const(g, [0, 1, 0, 2]), shape_const(g, [1, 4, 5, 7])], (1, 4, 5, 7), "int8")
    comp = run_and_compare(g.graph([s]), g.inputs(rng), SMALL)
    assert sum(isinstance(layer, MoveLayer) for layer in comp.layers) == 4


def test_too_large_for_the_small_npu_says_why(tmp_path, capsys):
    """1x2x65536x1 does not fit the 4x4 NPU's 256 KiB external memory: exit code 3 with the
    reason on one line, no traceback, no program."""
    from tosa_ir.tosa_fb import write_tosa

    from npu.cli import main

    g = VecBuilder(np.random.default_rng(0), "u")
    x = g.input((1, 2, 65536, 1), "int8")
    graph = g.graph([g.op("BITWISE_XOR", [x, g.input((1, 1, 65536, 1), "int8")], (1, 2, 65536, 1), "int8")])
    with pytest.raises(Unsupported, match=r"needs \d+ bytes of external memory; the NPU configuration has 262144"):
        run_pipeline(graph, SMALL_CONFIG)
    path = tmp_path / "u.tosa"
    path.write_bytes(write_tosa(graph))
    assert main(["compile", str(path), "-o", str(tmp_path / "u.npuprog"), "--config", "small"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "external memory" in err
    assert not (tmp_path / "u.npuprog").exists()


def test_scatter_longer_than_the_small_instruction_memory_compiles():
    """The W x K one-hot intermediates of a SCATTER of 260 updates into 300 values need more
    instructions than the 4x4 NPU's instruction memory holds, even with LOOPs: that is fine,
    instructions are fetched from external memory."""
    g = VecBuilder(np.random.default_rng(1), "u")
    g.rng = np.random.default_rng(2)
    graph = g.graph(scatter_long(g))
    assert len(run_pipeline(graph, SMALL).program.instructions) > SMALL.imem_rows
