"""Compiler: what it refuses, and how (one-line errors naming the operator and place)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, build_chain  # noqa: E402

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig  # noqa: E402
from compiler.driver import compile_file, compile_graph  # noqa: E402
from tosa_ir import Block, Graph, Operator, Tensor  # noqa: E402
from tosa_ir.errors import InvalidInput, TosaError, Unsupported  # noqa: E402


def chain(**spec):
    rng = np.random.default_rng(0)
    return build_chain(rng, (1, 6, 6, 3), [ConvSpec(**{"oc": 4, "clamp": None, **spec})], name="m")


def op_named(graph, name):
    return next(o for o in graph.main.operators if o.op == name)


def test_other_operator_is_unsupported():
    b = Block("main")
    for name in ("a", "b", "c"):
        b.add_tensor(Tensor(name, (1, 4), "int8"))
    b.operators.append(Operator("ADD", ["a", "b"], ["c"], {}, "net.tosa:main/main#0"))
    b.inputs, b.outputs = ["a", "b"], ["c"]
    with pytest.raises(Unsupported, match=r"^ADD at net\.tosa:main/main#0: operator not supported"):
        compile_graph(Graph.single_block(b))


def test_conv_without_rescale_is_unsupported():
    graph = chain()
    block = graph.main
    conv = op_named(graph, "CONV2D")
    block.operators = [conv]
    block.outputs = conv.outputs
    with pytest.raises(Unsupported, match=r"^CONV2D at m:conv0: .*followed by exactly one RESCALE"):
        compile_graph(graph)


def test_rescale_alone_is_unsupported():
    graph = chain()
    conv, rescale = graph.main.operators
    graph.main.operators = [rescale]
    graph.main.inputs = [conv.outputs[0]]
    with pytest.raises(Unsupported, match=r"^RESCALE at m:rescale0: only supported fused after a CONV2D"):
        compile_graph(graph)


@pytest.mark.parametrize("mutate,pattern", [
    (lambda g: g.main.tensors["y"].__setattr__("dtype", "int16"), r"RESCALE at m:rescale0: output 'y' is int16"),
    (lambda g: op_named(g, "RESCALE").attrs.__setitem__("rounding_mode", "INEXACT_ROUND"),
     r"RESCALE at m:rescale0: rounding_mode INEXACT_ROUND"),
    (lambda g: op_named(g, "RESCALE").attrs.__setitem__("output_unsigned", True), r"RESCALE at m:rescale0: unsigned"),
    (lambda g: g.main.tensors["x"].__setattr__("dtype", "int16"), r"CONV2D at m:conv0: input 'x' is int16"),
    (lambda g: g.main.tensors["l0_w"].__setattr__("data", None), r"CONV2D at m:conv0: weight must be a constant"),
    (lambda g: g.main.tensors["x"].__setattr__("shape", (1, -1, 6, 3)), r"CONV2D at m:conv0: .*unknown dimensions"),
])
def test_unsupported_forms(mutate, pattern):
    graph = chain()
    mutate(graph)
    with pytest.raises(Unsupported, match=pattern):
        compile_graph(graph)


def test_illegal_graphs_are_tosa_errors():
    graph = chain()
    graph.main.tensors["l0_acc"].shape = (1, 5, 6, 4)
    with pytest.raises(TosaError, match=r"CONV2D at m:conv0: ERROR_IF\(OY != idiv_check"):
        compile_graph(graph)
    graph = chain()
    graph.main.tensors["l0_rizp"].data = np.array([3], np.int32)
    with pytest.raises(TosaError, match=r"RESCALE at m:rescale0: ERROR_IF\(in_t != i8_t && input_zp != 0\)"):
        compile_graph(graph)
    graph = chain(clamp=(5, 10))
    op_named(graph, "CLAMP").attrs.update(min_val=10, max_val=5)
    with pytest.raises(TosaError, match=r"CLAMP at m:clamp0: ERROR_IF\(max_val < min_val\)"):
        compile_graph(graph)


def test_program_larger_than_instruction_memory():
    rng = np.random.default_rng(1)
    graph = build_chain(rng, (1, 24, 24, 16), [ConvSpec(oc=16, kernel=(3, 3))])
    with pytest.raises(Unsupported, match=r"needs (about )?\d+ instructions; the NPU's instruction memory holds 256"):
        compile_graph(graph, SMALL_CONFIG)


def test_layer_that_cannot_fit():
    config = NpuConfig(**{**SMALL_CONFIG.to_dict(), "asram_rows": 32})
    graph = chain(kernel=(1, 3), dilation=(1, 20), pad=(0, 0, 20, 20))
    with pytest.raises(Unsupported, match=r"CONV2D at m:conv0: does not fit the NPU even as 1x1 output tiles"):
        compile_graph(graph, config)


def test_external_memory_too_small():
    config = NpuConfig(**{**SMALL_CONFIG.to_dict(), "ext_mem_bytes": 1024})
    with pytest.raises(Unsupported, match=r"needs \d+ bytes of external memory"):
        compile_graph(chain(), config)


def test_compile_file_and_cli(tmp_path):
    from tosa_ir.tosa_fb import write_tosa

    from npu.cli import main

    good, bad = tmp_path / "good.tosa", tmp_path / "bad.tosa"
    good.write_bytes(write_tosa(chain()))
    program = compile_file(good, DEFAULT_CONFIG)
    assert program.instructions == compile_graph(chain(), DEFAULT_CONFIG).instructions
    assert main(["compile", str(good), "-o", str(tmp_path / "good.npuprog")]) == 0
    graph = chain()
    op_named(graph, "RESCALE").attrs["rounding_mode"] = "INEXACT_ROUND"
    bad.write_bytes(write_tosa(graph))
    assert main(["compile", str(bad), "-o", str(tmp_path / "bad.npuprog")]) == 3
    with pytest.raises(InvalidInput, match="no such file"):
        compile_file(tmp_path / "missing.tosa")
