"""Compiler: data-movement operators (RESHAPE, TRANSPOSE, SLICE, PAD, CONCAT, IDENTITY) with
conv layers, compiled and run on the ISA simulator.

Expected values come from the reference interpreter (sim.reference.run_graph), never from
the compiler; every run also goes through the simulator's hazard checker.  Besides the
values, each case asserts *how* the data moved (folded into a view or binding, or copied),
so a regression to a needless copy fails too.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, GraphBuilder  # noqa: E402
from npu_check import compare_on_isa, int8_inputs  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig  # noqa: E402
from isa.program import Program  # noqa: E402
from compiler.driver import run_pipeline  # noqa: E402
from compiler.core.ir import CopyLayer  # noqa: E402
from tosa_ir.errors import Unsupported  # noqa: E402

TINY_CONFIG = NpuConfig(array_rows=4, array_cols=4, bus_bytes=4, asram_rows=160, wsram_rows=64,
                        acc_rows=32, psram_rows=9, imem_rows=4096, ext_mem_bytes=1 << 20)
# The small configuration with room for graphs of many layers.
SMALL_BIG = NpuConfig(**{**SMALL_CONFIG.to_dict(), "imem_rows": 4096})
CONFIGS = {"small": SMALL_BIG, "default": DEFAULT_CONFIG, "tiny": TINY_CONFIG}


def run_and_compare(graph, config, seed=0):
    """Compile, run on the ISA simulator with random int8 inputs, compare bit-exactly with
    the reference interpreter (wait masks also under random durations); the compilation."""
    comp = run_pipeline(graph, config)
    compare_on_isa(comp.program, graph, int8_inputs(graph, np.random.default_rng(seed)), config,
                   timing_seeds=(seed,))
    return comp


def copies(comp) -> list[CopyLayer]:
    return [layer for layer in comp.layers if isinstance(layer, CopyLayer)]


def spec(oc, **kw):
    return ConvSpec(oc=oc, **{"clamp": None, **kw})


# -- folding: no data moves ----------------------------------------------------------------
@pytest.mark.parametrize("draft", [False, True])
def test_alexnet_front_folds_transpose_and_slice(draft):
    """NCHW input -> TRANSPOSE -> SLICE dropping the last row and column -> 11x11/4 conv, as
    the NNEF frontend writes AlexNet: the host packs NHWC bricks, the conv's DMA reads the
    window, nothing is copied."""
    g = GraphBuilder(np.random.default_rng(1), draft=draft)
    x = g.input("x", (1, 3, 28, 28))
    t = g.transpose(x, (0, 2, 3, 1))
    s = g.slice(t, (0, 0, 0, 0), (1, 27, 27, 3))
    y = g.conv(s, spec(8, kernel=(11, 11), stride=(4, 4), pad=(0, 0, 0, 0)))
    comp = run_and_compare(g.graph([y]), SMALL_CONFIG)
    assert copies(comp) == []
    (binding,) = comp.program.inputs
    assert (binding.shape, binding.layout, binding.perm) == ((1, 3, 28, 28), "brick", (0, 2, 3, 1))


def test_output_transpose_folds_into_binding():
    g = GraphBuilder(np.random.default_rng(2))
    y = g.conv(g.input("x", (2, 5, 6, 7)), spec(9))
    out = g.transpose(y, (0, 3, 1, 2))                # NHWC -> NCHW for the host
    comp = run_and_compare(g.graph([out, y]), SMALL_CONFIG)
    assert copies(comp) == []
    nchw, nhwc = comp.program.outputs
    assert nchw.perm == (0, 2, 3, 1) and nchw.shape == (2, 9, 5, 6) and nhwc.perm is None
    assert nchw.addr == nhwc.addr                       # one buffer, two bindings
    again = Program.from_bytes(comp.program.to_bytes())
    assert again.outputs[0].perm == (0, 2, 3, 1)


@pytest.mark.parametrize("config_name", ["small", "default"])
def test_slices_fold_into_conv_windows(config_name):
    """Slices along N, H, W and whole channel bricks (the last one partial) are windows
    the consumers' DMA reads; convs see them with their own padding."""
    config = CONFIGS[config_name]
    lanes = config.bus_bytes
    g = GraphBuilder(np.random.default_rng(3))
    x = g.input("x", (3, 9, 10, 3 * lanes))
    a = g.slice(x, (1, 2, 1, lanes), (2, 6, 8, lanes + 3))    # channels lanes .. 2*lanes+2
    b = g.slice(a, (1, 1, 0, 0), (1, 5, 7, lanes + 1))
    ya = g.conv(a, spec(5))
    yb = g.conv(b, spec(3, kernel=(2, 2), pad=(1, 0, 0, 1)))
    comp = run_and_compare(g.graph([ya, yb]), config)
    assert copies(comp) == []


@pytest.mark.parametrize("config_name", ["small", "default"])
def test_pad_folds_into_conv_padding(config_name):
    """PAD with the conv's input zero point is the conv's own padding (even beyond the
    8-bit DMA pad fields); a PAD feeding two such convs folds into both."""
    g = GraphBuilder(np.random.default_rng(4))
    x = g.input("x", (1, 6, 5, 3))
    p = g.pad(x, ((0, 0), (2, 1), (0, 300), (0, 0)), 7)
    y1 = g.conv(p, spec(4, input_zp=7, pad=(1, 1, 1, 1)))
    y2 = g.conv(p, spec(2, input_zp=7, kernel=(1, 1), pad=(0, 0, 0, 0), stride=(1, 7)))
    comp = run_and_compare(g.graph([y1, y2]), CONFIGS[config_name])
    assert copies(comp) == []
    # conv1's own right padding is 4 (the builder makes the stride-7 division exact).
    assert [layer.pad for layer in comp.layers] == [(3, 2, 1, 301), (2, 1, 0, 304)]


def test_reshapes_that_keep_the_bytes_are_views():
    """[1,1,1,C] -> [1,C] (a flat output), and N/H/W regroupings when a pixel is one brick."""
    g = GraphBuilder(np.random.default_rng(5))
    y = g.conv(g.input("x", (1, 4, 4, 6)), spec(10, kernel=(4, 4), pad=(0, 0, 0, 0)))   # [1,1,1,10]
    flat = g.reshape(y, (1, 10))
    lanes = SMALL_CONFIG.bus_bytes
    z = g.conv(g.input("x2", (2, 3, 4, lanes)), spec(lanes))        # C == lanes
    z2 = g.reshape(z, (3, 2, 4, lanes))
    w = g.conv(z2, spec(3, kernel=(1, 1), pad=(0, 0, 0, 0)))
    comp = run_and_compare(g.graph([flat, w]), SMALL_CONFIG)
    assert copies(comp) == []
    assert comp.program.outputs[0].layout == "flat"


def test_identity_is_a_view_and_passthrough_outputs_are_copies():
    g = GraphBuilder(np.random.default_rng(6))
    x = g.input("x", (1, 5, 5, 6))
    y = g.conv(g.identity(x), spec(4))
    ident = g.identity(y)
    same = g.identity(x)
    comp = run_and_compare(g.graph([ident, x, same]), SMALL_CONFIG)
    reasons = sorted(layer.reason for layer in copies(comp))
    assert reasons == sorted([f"graph output {x!r} is a graph input", f"graph output {same!r} is a graph input"])
    assert comp.program.outputs[0].addr == comp.ext.view(y).addr


# -- copies -----------------------------------------------------------------------------
@pytest.mark.parametrize("config_name", ["small", "default", "tiny"])
def test_pad_copies(config_name):
    """PADs that cannot fold: another pad value, N and whole-brick channel padding,
    padding beyond the 8-bit pad fields, and a PAD that is a graph output."""
    config = CONFIGS[config_name]
    lanes = config.bus_bytes
    g = GraphBuilder(np.random.default_rng(7))
    x = g.input("x", (1, 7, 6, 2 * lanes))
    a = g.pad(x, ((1, 1), (2, 0), (0, 3), (lanes, 0)), -5)
    ya = g.conv(a, spec(3, input_zp=0))
    b = g.pad(g.slice(x, (0, 1, 1, 0), (1, 5, 4, 3)), ((0, 0), (0, 260), (1, 1), (0, 0)), 9)
    comp = run_and_compare(g.graph([ya, b]), config)
    assert len(copies(comp)) == 2


@pytest.mark.parametrize("config_name", ["small", "default", "tiny"])
def test_interior_transposes_of_n_h_w_are_copies(config_name):
    config = CONFIGS[config_name]
    g = GraphBuilder(np.random.default_rng(8))
    x = g.input("x", (2, 5, 7, 6))
    y = g.conv(x, spec(5))
    outs = []
    for perm in ((0, 2, 1, 3), (1, 0, 2, 3), (2, 1, 0, 3), (1, 2, 0, 3)):
        outs.append(g.conv(g.transpose(y, perm), spec(3, kernel=(1, 2), pad=(0, 0, 0, 1))))
    comp = run_and_compare(g.graph(outs), config)
    assert len(copies(comp)) == 4


@pytest.mark.parametrize("config_name", ["small", "default", "tiny"])
def test_reshapes_that_move_pixels_are_copies(config_name):
    config = CONFIGS[config_name]
    lanes = config.bus_bytes
    g = GraphBuilder(np.random.default_rng(9))
    x = g.input("x", (2, 4, 6, lanes + 2))
    y = g.conv(x, spec(lanes + 2))
    r = g.reshape(y, (3, 8, 2, lanes + 2))                  # channel blocks > 1: pixels re-laid
    # Same bytes as a whole tensor, but the slice is a window: gathered by a plain copy.
    s = g.reshape(g.slice(y, (1, 1, 0, 0), (1, 2, 6, lanes + 2)), (1, 12, 1, lanes + 2))
    out = [g.conv(r, spec(4, kernel=(1, 1), pad=(0, 0, 0, 0))), s]
    comp = run_and_compare(g.graph(out), config)
    assert sum(layer.relayout for layer in copies(comp)) == 1
    assert len(copies(comp)) == 2


@pytest.mark.parametrize("config_name", ["small", "default"])
def test_concat_producers_write_in_place(config_name):
    """Convs write straight into their slots of channel, H, W and N concatenations (nested
    too); a graph input and a tensor also used elsewhere are copied into theirs."""
    config = CONFIGS[config_name]
    lanes = config.bus_bytes
    g = GraphBuilder(np.random.default_rng(10))
    x = g.input("x", (1, 6, 7, 5))
    c1 = g.concat([g.conv(x, spec(lanes)), g.conv(x, spec(2 * lanes)), g.conv(x, spec(3))], 3)
    c2 = g.concat([g.conv(x, spec(4, kernel=(2, 1), pad=(0, 0, 0, 0))), g.conv(x, spec(4))], 1)
    c3 = g.concat([g.conv(x, spec(4)), g.conv(x, spec(4, kernel=(1, 3), pad=(0, 0, 0, 0)))], 2)
    shared = g.conv(x, spec(4))
    c4 = g.concat([c3, shared, g.conv(x, spec(4, kernel=(3, 1), pad=(1, 1, 0, 0)))], 2)
    c5 = g.concat([g.conv(x, spec(4)), g.conv(x, spec(4))], 0)
    c6 = g.concat([g.conv(x, spec(lanes)), x], 3)
    tail = g.conv(shared, spec(2))
    comp = run_and_compare(g.graph([c1, c2, c4, c5, c6, tail]), config)
    # Copied: c3 into c4 is in place (nested), `shared` is read by another conv, x is an input.
    assert sorted(layer.reason for layer in copies(comp)) == ["CONCAT input 1 cannot be written in place"] * 2


def test_copies_larger_than_asram_go_in_chunks():
    """TINY has 160 ASRAM rows: every copy here needs many chunks (PAD also by columns)."""
    g = GraphBuilder(np.random.default_rng(14))
    x = g.input("x", (2, 9, 170, 6))
    wide = g.pad(x, ((0, 1), (1, 0), (2, 3), (4, 0)), 3)
    swapped = g.transpose(g.slice(x, (0, 0, 0, 0), (2, 9, 30, 6)), (0, 2, 1, 3))
    relaid = g.reshape(g.slice(x, (0, 0, 0, 0), (2, 8, 20, 6)), (1, 40, 8, 6))
    comp = run_and_compare(g.graph([wide, g.identity(swapped), relaid]), TINY_CONFIG)
    assert len(copies(comp)) == 3
    assert all(len(plan.ops) > 4 for plan in comp.plans)


def test_transposed_output_of_a_window_is_gathered_first():
    g = GraphBuilder(np.random.default_rng(15))
    y = g.conv(g.input("x", (1, 6, 6, 5)), spec(6))
    out = g.transpose(g.slice(y, (0, 1, 1, 0), (1, 4, 3, 6)), (0, 3, 2, 1))
    comp = run_and_compare(g.graph([out]), SMALL_CONFIG)
    assert [layer.reason for layer in copies(comp)] == [f"graph output {out!r} is a window of a larger buffer"]
    assert comp.program.outputs[0].perm == (0, 3, 2, 1)


def test_constant_activations_are_constant_segments():
    rng = np.random.default_rng(16)
    g = GraphBuilder(rng)
    lanes = SMALL_CONFIG.bus_bytes
    y = g.conv(g.input("x", (1, 4, 5, 3)), spec(lanes))
    k = g.const(rng.integers(-128, 128, (1, 4, 5, 3)))
    both = g.concat([y, k], 3)
    z = g.conv(g.pad(g.const(rng.integers(-128, 128, (1, 3, 3, 2))), ((0, 0), (1, 1), (1, 1), (0, 0)), 5),
               spec(2, input_zp=5, kernel=(1, 1), pad=(0, 0, 0, 0)))
    comp = run_and_compare(g.graph([both, z, k]), SMALL_CONFIG)
    assert [layer.reason for layer in copies(comp)] == ["CONCAT input 1 cannot be written in place"]


def test_io_whose_bricks_are_not_row_major():
    """Rank < 4 inputs and outputs held as bricks whose bytes are not row-major (more than
    one brick per pixel) travel in the rows layout, with one whole-brick copy on the NPU
    (they were refused: 'the host can lay out [it] only for one pixel or exactly L
    channels').  Tokens [1, 16, 32] through a 1x1 convolution, and a rank-2 output."""
    g = GraphBuilder(np.random.default_rng(17))
    y = g.conv(g.input("x", (2, 1, 1, 3)), spec(6, kernel=(1, 1), pad=(0, 0, 0, 0)))
    out = g.reshape(y, (2, 6))     # [1,1,2,6] as bricks: 6 channels over 2 bricks per pixel
    comp = run_and_compare(g.graph([out]), SMALL_CONFIG)
    assert [b.layout for b in comp.program.outputs] == ["rows"]
    for config in (SMALL_CONFIG, DEFAULT_CONFIG):
        g = GraphBuilder(np.random.default_rng(18))
        x = g.input("tokens", (1, 16, 32))
        y = g.conv(g.reshape(x, (1, 16, 1, 32)), spec(24, kernel=(1, 1), pad=(0, 0, 0, 0)))
        comp = run_and_compare(g.graph([g.reshape(y, (1, 16, 24))]), config)
        assert [b.layout for b in comp.program.inputs + comp.program.outputs] == ["rows", "rows"]
    # A rank-2 input that no brick reader needs stays in the rows layout (isa/layout.py).
    g = GraphBuilder(np.random.default_rng(17))
    x = g.input("x", (3, 5))
    comp = run_and_compare(g.graph([g.identity(x)]), SMALL_CONFIG)
    assert [b.layout for b in comp.program.inputs + comp.program.outputs] == ["rows", "rows"]
    # Row-major bricks (C == lanes, or one pixel) are fine: bound as flat.
    g = GraphBuilder(np.random.default_rng(17))
    x = g.input("x", (3, 4))
    comp = run_and_compare(g.graph([g.reshape(g.conv(g.reshape(x, (1, 3, 1, 4)), spec(4, kernel=(1, 1),
                                                                                      pad=(0,) * 4)), (12,))]),
                           SMALL_CONFIG)
    assert [b.layout for b in comp.program.inputs + comp.program.outputs] == ["flat", "flat"]


# -- random graphs ----------------------------------------------------------------------
def random_graph(rng: np.random.Generator, lanes: int, steps: int):
    """A graph of conv layers and data-movement operators with random parameters: mostly a
    chain, sometimes branching from an earlier tensor, with a few side outputs; every
    operator in a form the compiler must support."""
    g = GraphBuilder(rng, draft=bool(rng.integers(0, 4) == 0))
    if rng.integers(0, 2):
        x = g.transpose(g.input("x", (1, int(rng.integers(1, 2 * lanes)), int(rng.integers(5, 12)),
                                      int(rng.integers(5, 12)))), (0, 2, 3, 1))
    else:
        x = g.input("x", (int(rng.integers(1, 3)), int(rng.integers(5, 12)), int(rng.integers(5, 12)),
                          int(rng.integers(1, 2 * lanes))))
    cur, seen, outputs = x, [x], []

    def conv(t, **kw):
        return g.conv(t, ConvSpec(oc=int(rng.integers(1, 2 * lanes + 2)), kernel=(3, 3), pad=(1, 1, 1, 1), **kw))

    for _ in range(steps):
        if rng.integers(0, 4) == 0:
            cur = seen[int(rng.integers(0, len(seen)))]        # a branch
        n, h, w, c = g.shape(cur)
        kind = rng.choice(["conv", "slice", "pad", "reshape", "transpose", "concat", "identity"])
        if kind == "conv" or min(h, w) < 3:
            cur = conv(cur)
        elif kind == "slice":
            hs, ws = int(rng.integers(2, h + 1)), int(rng.integers(2, w + 1))
            cb = int(rng.integers(0, -(-c // lanes)))
            start = (int(rng.integers(0, n)), int(rng.integers(0, h - hs + 1)), int(rng.integers(0, w - ws + 1)),
                     cb * lanes)
            size = (1 if n > 1 and rng.integers(0, 2) else n - start[0], hs, ws,
                    int(rng.integers(1, c - cb * lanes + 1)))
            cur = g.slice(cur, start, size)
        elif kind == "pad":
            zp = int(rng.integers(-128, 128))
            padding = [(0, 0), tuple(int(v) for v in rng.integers(0, 3, 2)),
                       tuple(int(v) for v in rng.integers(0, 3, 2)), (0, 0)]
            if rng.integers(0, 2):                     # folds into the conv
                cur = conv(g.pad(cur, padding, zp), input_zp=zp)
            else:                                      # a copy, maybe padding N and channels too
                if rng.integers(0, 2):
                    padding[0] = tuple(int(v) for v in rng.integers(0, 2, 2))
                    padding[3] = (lanes * int(rng.integers(0, 2)), int(rng.integers(0, 3)) if c % lanes == 0 else 0)
                cur = g.pad(cur, padding, int(rng.integers(-128, 128)))
        elif kind == "reshape":
            options = [(n * h, 1, w, c), (n, w, h, c), (1, n * h * w, 1, c), (n, h * w, 1, c)]
            cur = g.reshape(cur, options[int(rng.integers(0, len(options)))])
        elif kind == "transpose":
            perm = [(0, 2, 1, 3), (1, 0, 2, 3), (2, 1, 0, 3)][int(rng.integers(0, 3))]
            cur = g.transpose(cur, perm)
        elif kind == "concat":
            axis = int(rng.integers(0, 4))
            if axis == 3:     # every input but the last a whole number of bricks
                parts = [g.conv(cur, ConvSpec(oc=lanes * int(rng.integers(1, 3)), kernel=(1, 1), pad=(0,) * 4))]
                if rng.integers(0, 2):
                    parts.append(g.conv(cur, ConvSpec(oc=lanes, kernel=(3, 3), pad=(1, 1, 1, 1))))
                parts.append(conv(cur))
            else:
                same = ConvSpec(oc=c, kernel=(3, 3), pad=(1, 1, 1, 1))
                parts = [g.conv(cur, same), g.conv(cur, ConvSpec(oc=c, kernel=(1, 1), pad=(0,) * 4))]
                if rng.integers(0, 2):
                    parts.insert(int(rng.integers(0, 3)), cur)
            cur = g.concat(parts, axis)
        else:
            cur = g.identity(cur)
        seen.append(cur)
        if rng.integers(0, 5) == 0:
            outputs.append(cur)
    if rng.integers(0, 2):
        cur = g.transpose(cur, (0, 3, 1, 2))
    outputs.append(cur)
    return g.graph(list(dict.fromkeys(outputs)))


@pytest.mark.parametrize("config_name,seed", [(c, s) for c in CONFIGS for s in range(10)])
def test_random_graphs(config_name, seed):
    config = CONFIGS[config_name]
    rng = np.random.default_rng(4000 + 31 * len(config_name) + seed)
    graph = random_graph(rng, config.bus_bytes, int(rng.integers(3, 7)))
    run_and_compare(graph, config, seed)


# -- values moving between lanes: through the rows layout (compiler/kinds/movement/brick_rows.py) ------
def _lane_moving_cases():
    def channel_slice(g, x):
        return g.conv(g.slice(x, (0, 0, 0, 1), (1, 4, 4, 3)), spec(2))

    def channel_concat(g, x):
        return g.concat([g.conv(x, spec(3)), g.conv(x, spec(2))], 3)

    def channel_transpose(g, x):
        return g.conv(g.transpose(g.conv(x, spec(4)), (0, 3, 1, 2)), spec(2))

    def channel_reshape(g, x):
        return g.reshape(g.conv(x, spec(4)), (1, 4, 8, 2))

    def channel_reshape_wide(g, x):
        # 20 channels: 5 bricks of the 4x4 NPU, regrouped into 8 (two whole bricks)
        return g.conv(g.reshape(g.conv(x, spec(20)), (1, 8, 5, 8)), spec(3))

    def channel_pad(g, x):
        return g.pad(g.conv(x, spec(4)), ((0, 0), (0, 0), (0, 0), (1, 0)), 0)

    def channel_pad_after(g, x):
        return g.conv(g.pad(g.conv(x, spec(3)), ((0, 0), (1, 0), (0, 0), (0, 2)), 5), spec(2))

    return {"channel_slice": channel_slice, "channel_concat": channel_concat,
            "channel_transpose": channel_transpose, "channel_reshape": channel_reshape,
            "channel_reshape_wide": channel_reshape_wide, "channel_pad": channel_pad,
            "channel_pad_after": channel_pad_after}


@pytest.mark.parametrize("case", list(_lane_moving_cases()))
def test_lane_moving_movement(case):
    """Movement that puts values in other lanes of brick tensors: copies through the rows
    layout, bit-exact, conv readers getting bricks back."""
    g = GraphBuilder(np.random.default_rng(11), name="m")
    y = _lane_moving_cases()[case](g, g.input("x", (1, 4, 4, 5)))
    run_and_compare(g.graph([y]), SMALL_CONFIG)


def test_unsupported_operators_are_named_and_counted():
    from tosa_ir import Operator, Tensor

    g = GraphBuilder(np.random.default_rng(12), name="m")
    y = g.conv(g.input("x", (1, 8, 8, 3)), spec(4))
    for k in range(2):
        out = f"erf{k}"     # a floating-point operator: never lowered for this integer NPU
        g.block.add_tensor(Tensor(out, (1, 8, 8, 4), "int8"))
        g.block.operators.append(Operator("ERF", [y], [out], {}, f"m:erf{k}"))
        y = out
    with pytest.raises(Unsupported, match=r"^ERF at m:erf0: operator not supported by the NPU compiler yet "
                                          r"\(also not supported yet: ERF x1\)$"):
        run_pipeline(g.graph([y]), SMALL_CONFIG)


def test_programs_longer_than_the_instruction_memory_compile():
    g = GraphBuilder(np.random.default_rng(13), name="m")
    y = g.conv(g.input("x", (1, 24, 24, 16)), spec(16))
    assert len(run_pipeline(g.graph([y]), SMALL_CONFIG).program.instructions) > SMALL_CONFIG.imem_rows
