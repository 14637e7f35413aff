"""What the NNEF and OpenVINO frontends share: the clean-up passes
(compiler/frontends/common/graph_passes.py) and the graph builder (graph_builder.py).

Expected values are numpy on the test's own input (``np.clip`` twice) or the Khronos NNEF
runtime's; our graphs run on the official TOSA reference model.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from nnef_helpers import khronos_run, official_run, random_weights, write_model  # noqa: E402

from compiler.frontends.common.graph_passes import dead_code, merge_clamps  # noqa: E402
from compiler.frontends.nnef.load import load_nnef_model  # noqa: E402
from compiler.graph.quantize.prepare import add_const_ops  # noqa: E402
from tosa_ir import Block, Graph, Operator, Tensor  # noqa: E402


def _two_clamps(first, second) -> Graph:
    block = Block("main")
    for name in ("x", "y", "z"):
        block.add_tensor(Tensor(name, (1, 4, 4, 2), "fp32"))
    block.operators = [
        Operator("CLAMP", ["x"], ["y"], {"min_val": first[0], "max_val": first[1],
                                         "nan_mode": "PROPAGATE"}),
        Operator("CLAMP", ["y"], ["z"], {"min_val": second[0], "max_val": second[1],
                                         "nan_mode": "PROPAGATE"})]
    block.inputs, block.outputs = ["x"], ["z"]
    return Graph.single_block(block, version=(1, 0, 0, False), profiles=["PRO-FP"])


@pytest.mark.parametrize("first,second", [
    ((0.0, 6.0), (-1.0, 1.0)),      # overlapping: the intersection
    ((-1.0, 1.0), (0.0, 6.0)),
    ((0.0, 1.0), (2.0, 3.0)),       # disjoint, second above: everything becomes 2
    ((2.0, 3.0), (0.0, 1.0)),       # disjoint, second below: everything becomes 1
    ((-0.5, 0.5), (-3.0, 3.0)),     # nested
])
def test_merged_clamp_pair_is_the_composition(first, second):
    graph = _two_clamps(first, second)
    merge_clamps(graph.main)
    assert [op.op for op in graph.main.operators] == ["CLAMP"]
    dead_code(graph.main)
    add_const_ops(graph.main)
    x = np.random.default_rng(3).uniform(-5, 8, (1, 4, 4, 2)).astype(np.float32)
    want = np.clip(np.clip(x, *first), *second)
    status, out = official_run(graph, {"x": x})
    assert status == "VALID"
    np.testing.assert_array_equal(out["z"], want)


def test_a_kept_tensor_between_clamps_stays():
    """A tensor in ``keep`` (FakeQuantize parameters in OpenVINO) is not merged away."""
    graph = _two_clamps((0.0, 6.0), (-1.0, 1.0))
    merge_clamps(graph.main, keep={"y"})
    assert [op.outputs for op in graph.main.operators] == [["y"], ["z"]]


def test_two_outputs_of_one_transposed_value(tmp_path):
    """Renaming a graph output follows into the builder's caches: a second output of the
    same (transposed) value gets its own IDENTITY instead of a stale tensor name."""
    text = """version 1.0;
graph G( input ) -> ( a, b )
{
    input = external(shape = [1, 3, 8, 8]);
    k = variable(shape = [4, 3, 3, 3], label = 'k');
    c = conv(input, k, padding = [(1,1), (1,1)]);
    a = copy(c);
    b = copy(c);
}
"""
    folder = write_model(tmp_path / "m", text, random_weights(text))
    graph = load_nnef_model(folder).float_graph
    assert graph.main.outputs == ["a", "b"]
    x = np.random.default_rng(7).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want_a, want_b = khronos_run(folder, [x])
    status, out = official_run(graph, {"input": x})
    assert status == "VALID"
    np.testing.assert_allclose(out["a"], want_a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["b"], want_b, rtol=1e-5, atol=1e-5)
