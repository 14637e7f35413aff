"""compiler/graph/constant_fold.py: weights that reach a CONV2D through constant-foldable
operators, as tosa-converter-for-tflite + tosa-opt write them (HWIO weights as int16
constants -> RESCALE -> SLICE -> TRANSPOSE to OHWI; the bias through CAST, ADD and RESHAPE),
compile for the NPU and run bit-exactly.  The unfolded .tosa file runs on the official
reference model too, with the same results as the folded graph on our interpreter and the
program on the ISA simulator (before the folder: "CONV2D ...: weights and bias must be
constant tensors")."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, GraphBuilder  # noqa: E402
from npu_check import compare_on_isa  # noqa: E402

from compiler.driver import compile_graph  # noqa: E402
from compiler.graph.constant_fold import fold_constants  # noqa: E402
from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from sim.reference import run_graph  # noqa: E402
from tosa_ir import Operator, Tensor  # noqa: E402
from tosa_ir.tosa_fb import read_tosa, write_tosa  # noqa: E402


def _converter_style_graph(seed: int):
    """A conv chain whose first layer's weights and bias are computed from constants."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder(rng)
    x = g.input("x", (1, 9, 7, 5))
    y = g.conv(x, ConvSpec(oc=6, clamp=None))
    y = g.conv(y, ConvSpec(oc=4, kernel=(1, 1), pad=(0, 0, 0, 0), clamp=None))
    b = g.block
    w = b.tensors.pop("l0_w").data                     # OHWI, as the CONV2D reads it
    bias = b.tensors.pop("l0_b").data
    ops = []

    def add(name, shape, dtype, data=None):
        b.add_tensor(Tensor(name, tuple(shape), dtype, data))
        if data is not None:
            ops.append(Operator("CONST_SHAPE" if dtype == "shape" else "CONST", [], [name], {}, f"c:{name}"))
        return name

    oc, kh, kw, ic = w.shape
    hwio = np.transpose(w, (1, 2, 3, 0))
    wide = np.concatenate([hwio, rng.integers(-128, 128, (kh, kw, 2, oc))], axis=2).astype(np.int16) * 4
    add("w16", wide.shape, "int16", wide)
    add("w_m", (1,), "int16", np.array([1 << 14], np.int16))
    add("w_s", (1,), "int8", np.array([16], np.int8))
    add("w_izp", (1,), "int16", np.array([0], np.int16))
    add("w_ozp", (1,), "int8", np.array([0], np.int8))
    add("w8", wide.shape, "int8")
    ops.append(Operator("RESCALE", ["w16", "w_m", "w_s", "w_izp", "w_ozp"], ["w8"],
                        {"scale32": False, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                         "input_unsigned": False, "output_unsigned": False}, "c:rescale"))
    add("start", (4,), "shape", np.array([0, 0, 0, 0], np.int64))
    add("size", (4,), "shape", np.array([kh, kw, ic, oc], np.int64))
    add("w_hwio", (kh, kw, ic, oc), "int8")
    ops.append(Operator("SLICE", ["w8", "start", "size"], ["w_hwio"], {}, "c:slice"))
    add("l0_w", (oc, kh, kw, ic), "int8")
    ops.append(Operator("TRANSPOSE", ["w_hwio"], ["l0_w"], {"perms": [3, 0, 1, 2]}, "c:transpose"))
    half = (bias // 2).astype(np.int16)
    add("b16", (1, oc), "int16", half.reshape(1, oc))
    add("b32", (1, oc), "int32")
    ops.append(Operator("CAST", ["b16"], ["b32"], {}, "c:cast"))
    add("b_rest", (1, oc), "int32", (bias - half).astype(np.int32).reshape(1, oc))
    add("b_sum", (1, oc), "int32")
    ops.append(Operator("ADD", ["b32", "b_rest"], ["b_sum"], {}, "c:add"))
    add("b_shape", (1,), "shape", np.array([oc], np.int64))
    add("l0_b", (oc,), "int32")
    ops.append(Operator("RESHAPE", ["b_sum", "b_shape"], ["l0_b"], {}, "c:reshape"))
    b.operators[:0] = ops
    graph = g.graph([y])
    inputs = {"x": rng.integers(-128, 128, (1, 9, 7, 5)).astype(np.int8)}
    return graph, inputs, w, bias


@pytest.mark.parametrize("seed", [1, 2])
def test_weights_behind_foldable_operators_compile_and_run(seed):
    graph, inputs, w, bias = _converter_style_graph(seed)
    graph = read_tosa(write_tosa(graph))            # a real .tosa file with CONST operators
    folded = fold_constants(graph)
    main = folded.main
    assert {op.op for op in main.operators} == {"CONST", "CONV2D", "RESCALE"}
    np.testing.assert_array_equal(main.tensor("l0_w").data, w)
    np.testing.assert_array_equal(main.tensor("l0_b").data, bias)
    assert "w16" not in main.tensors and "b16" not in main.tensors   # dead constants dropped
    assert graph.main.tensor("l0_w").data is None                   # the caller's graph untouched
    want = run_graph(graph, inputs)
    got = run_graph(folded, inputs)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    for config in (SMALL_CONFIG, DEFAULT_CONFIG):
        compare_on_isa(compile_graph(graph, config), folded, inputs, config)


def test_unfolded_file_on_the_official_reference_model():
    pytest.importorskip("tosa_reference_model", reason="tosa-tools is not installed")
    import oracle

    graph, inputs, _, _ = _converter_style_graph(3)
    tosa = write_tosa(graph)
    status, official, log = oracle._run_binding(tosa, [inputs["x"]], "EIGHTK")
    assert status == "VALID", log
    ours = run_graph(fold_constants(read_tosa(tosa)), inputs)
    np.testing.assert_array_equal(official[0], ours[graph.main.outputs[0]])


def test_failing_evaluations_are_left_in_place():
    """An operator whose evaluation breaks an ERROR_IF stays, so validation reports it."""
    graph, inputs, _, _ = _converter_style_graph(4)
    main = graph.main
    cast = next(op for op in main.operators if op.op == "CAST")
    main.tensors["b32"] = Tensor("b32", (1, 6), "int48")          # CAST int16 -> int48: illegal
    folded = fold_constants(graph)
    assert any(op.op == "CAST" for op in folded.main.operators)
    assert cast in folded.main.operators
    with pytest.raises(Exception, match="CAST"):
        compile_graph(graph, SMALL_CONFIG)


def test_nothing_to_fold_returns_the_graph():
    rng = np.random.default_rng(0)
    g = GraphBuilder(rng)
    y = g.conv(g.input("x", (1, 4, 4, 3)), ConvSpec(oc=3))
    graph = g.graph([y])
    assert fold_constants(graph) is graph
