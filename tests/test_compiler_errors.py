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
from tosa_ir import Operator  # noqa: E402
from tosa_ir.errors import InvalidInput, TosaError, Unsupported  # noqa: E402


def chain(**spec):
    rng = np.random.default_rng(0)
    return build_chain(rng, (1, 6, 6, 3), [ConvSpec(**{"oc": 4, "clamp": None, **spec})], name="m")


def op_named(graph, name):
    return next(o for o in graph.main.operators if o.op == name)


def test_other_operator_is_unsupported():
    from vector_graphs import while_loop_graph

    graph = while_loop_graph()      # a loop body with an operator the NPU does not run
    graph.block("B").operators[1] = Operator("ERF", ["x"], ["y"], {}, "m:B1")
    with pytest.raises(Unsupported, match=r"^WHILE_LOOP at m:while0, body: ERF at m:B1: operator not supported"):
        compile_graph(graph)
    graph = while_loop_graph()
    # An illegal graph is reported as illegal even when the compiler could not lower it.
    graph.main.tensors["x2"].shape = (3,)
    with pytest.raises(TosaError, match=r"^WHILE_LOOP"):
        compile_graph(graph)


def test_conv_without_rescale_outputs_int32():
    # Not fused (no RESCALE after it): the int32 accumulators are the output
    # (compiler/kinds/mxu_conv/layer.py), no longer refused.
    from vector_graphs import run_and_compare

    graph = chain()
    block = graph.main
    conv = op_named(graph, "CONV2D")
    block.operators = [conv]
    block.outputs = conv.outputs
    x = block.tensors[block.inputs[0]]
    inputs = {x.name: np.random.default_rng(1).integers(-128, 128, x.shape).astype(np.int8)}
    run_and_compare(graph, inputs, SMALL_CONFIG)


def test_rescale_alone_runs_on_the_vector_unit():
    from sim.isa.sim import IsaSim
    from sim.reference import run_graph

    graph = chain()
    conv, rescale = graph.main.operators
    graph.main.operators = [rescale]
    graph.main.inputs = [conv.outputs[0]]
    program = compile_graph(graph, SMALL_CONFIG)
    assert "VRESCALE" in {i.name for i in program.instructions}
    x = np.random.default_rng(5).integers(-(1 << 20), 1 << 20, graph.main.tensors[conv.outputs[0]].shape,
                                          dtype=np.int32)
    result = IsaSim(SMALL_CONFIG).run(program, program.memory_image({conv.outputs[0]: x}))
    got = program.read_outputs(result.memory)
    want = run_graph(graph, {conv.outputs[0]: x})
    assert all(np.array_equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("mutate,error,pattern", [
    # Illegal graphs (an ERROR_IF holds, or a tensor is read before it exists).
    (lambda g: g.main.tensors["y"].__setattr__("dtype", "int16"), TosaError,
     r"RESCALE at m:rescale0: ERROR_IF\(type of output_zp"),
    (lambda g: op_named(g, "RESCALE").attrs.__setitem__("output_unsigned", True), TosaError,
     r"RESCALE at m:rescale0: ERROR_IF\(in_t == i32_t && output_unsigned\)"),
    (lambda g: g.main.tensors["x"].__setattr__("dtype", "int16"), TosaError, r"CONV2D at m:conv0: ERROR_IF"),
    (lambda g: g.main.tensors["l0_w"].__setattr__("data", None), InvalidInput, r"l0_w' is read before"),
    # Legal graphs the NPU compiler does not handle.
    (lambda g: g.main.tensors["x"].__setattr__("shape", (1, -1, 6, 3)), Unsupported,
     r"CONV2D at m:conv0: .*unknown dimensions"),
])
def test_unsupported_forms(mutate, error, pattern):
    graph = chain()
    mutate(graph)
    with pytest.raises(error, match=pattern):
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


def test_program_larger_than_instruction_memory_compiles():
    """No limit on the program's length (instructions are fetched from external memory)."""
    rng = np.random.default_rng(1)
    graph = build_chain(rng, (1, 24, 24, 16), [ConvSpec(oc=16, kernel=(3, 3))])
    assert len(compile_graph(graph, SMALL_CONFIG).instructions) > SMALL_CONFIG.imem_rows


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
    from vector_graphs import while_loop_graph

    graph = while_loop_graph()          # legal, not lowered: ERF in the loop body (exit 3)
    graph.block("B").operators[1] = Operator("ERF", ["x"], ["y"], {}, "m:B1")
    bad.write_bytes(write_tosa(graph))
    assert main(["compile", str(bad), "-o", str(tmp_path / "bad.npuprog")]) == 3
    with pytest.raises(InvalidInput, match="no such file"):
        compile_file(tmp_path / "missing.tosa")
