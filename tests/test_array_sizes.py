"""The named array-size configurations (isa/config.py: ``array8``, ``default`` = 16x16,
``array32``, ``array64``; bus and memories scaled with the array) compile and run a small
program set bit-exactly on the ISA simulator, hazard checker on, against the reference
interpreter: a seeded chain of convolutions of assorted shapes, and ResNet-50 and MobileNetV2
(tools/make_*.py) at reduced width and 64x64 input (1x1 and strided convolutions, residual
ADD, depthwise, pools).

The RTL of the larger arrays is not built here (see PERFORMANCE.md for its build time); the
ISA simulator is kept exact against the RTL by the lockstep tests of the default and small
configurations.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from compiler.driver import InstructionMemoryFull, run_pipeline
from isa.config import DEFAULT_CONFIG, NAMED_CONFIGS, array_config
from tosa_ir.tosa_fb import read_tosa

sys.path.insert(0, str(Path(__file__).parent))
from compiler_graphs import ConvSpec, build_chain
from npu_check import compare_on_isa, int8_inputs
from tool_modules import small_network

SIZES = ("array8", "default", "array32", "array64")


def test_configurations_scale_bus_and_memories():
    for name, size in (("array8", 8), ("array32", 32), ("array64", 64)):
        config = NAMED_CONFIGS[name]
        assert (config.array_rows, config.array_cols, config.bus_bytes) == (size, size, size)
        for memory, nbytes in config.sram_bytes.items():
            if memory != "imem":
                assert nbytes * 16 == DEFAULT_CONFIG.sram_bytes[memory] * size, memory
        assert config == array_config(size)
    assert NAMED_CONFIGS["array16"] == NAMED_CONFIGS["default"] == DEFAULT_CONFIG == array_config(16)
    with pytest.raises(ValueError):
        array_config(24)


def _compile(graph, config):
    """The program for ``config``; programs longer than the instruction memory (until it is
    fetched from external memory) get a deeper one, which changes no data-path cycle."""
    try:
        return run_pipeline(graph, config).program, config
    except InstructionMemoryFull:
        config = replace(config, imem_rows=1 << 15)
        return run_pipeline(graph, config).program, config


@pytest.mark.parametrize("name", SIZES)
def test_conv_chain(name):
    rng = np.random.default_rng(15)
    specs = [ConvSpec(oc=40), ConvSpec(oc=72, kernel=(1, 1), pad=(0, 0, 0, 0)),
             ConvSpec(oc=130, stride=(2, 2)), ConvSpec(oc=9, kernel=(5, 3), pad=(2, 2, 1, 1))]
    graph = build_chain(rng, (1, 19, 23, 21), specs)
    program, config = _compile(graph, NAMED_CONFIGS[name])
    compare_on_isa(program, graph, int8_inputs(graph, rng), config)


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    built = {}
    for net, div in (("resnet50", 16), ("mobilenetv2", 8)):
        model, inputs = small_network(net, tmp_path_factory.mktemp(net), div, size=64)
        with np.load(inputs) as data:
            built[net] = read_tosa(model.read_bytes(), source=model.name), dict(data)
    return built


@pytest.mark.parametrize("name", SIZES)
@pytest.mark.parametrize("net", ("resnet50", "mobilenetv2"))
def test_network(networks, net, name):
    graph, x = networks[net]
    program, config = _compile(graph, NAMED_CONFIGS[name])
    compare_on_isa(program, graph, x, config)
