"""Network families as .tflite and .circle (tools/make_tflite_family_fixtures.py: seeded
int8 / int16x8 models quantized like TensorFlow's converter, written from the frontend's
schema tables; expected outputs from TFLite's reference kernels, ``BUILTIN_REF``).

Each family, from both files, is lowered by the Circle frontend and must equal TFLite's
reference kernels bit for bit on the reference interpreter and on the NPU (ISA simulator,
default configuration); the smallest family also on the RTL.  TFLite's reference kernels are
the oracle here: where the TOSA lowering cannot express a kernel exactly (FULLY_CONNECTED's
double-precision requantization, see compiler/frontends/circle/ops_nn.py), it is the TFLite
result that is matched, and the fixtures happen to have no accumulator within the
stated 2**-31 relative distance of a rounding midpoint (tests/test_circle_ops.py bounds how
rare that is).  The int16x8 family's 16x8 FULLY_CONNECTED is the case that needed it: with
``MultiplyByQuantizedMultiplier(int64)``'s 16-bit multiplier the lowering was 1 off TFLite
on 2 of its 20 outputs; TFLite's reference kernel rounds with the full-precision scale, and
the lowering now does too (the accumulator provably fits int32).  A fixture that fails for
such a reason is a failure of this test, not a skipped case.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from npu_check import compare_on_isa  # noqa: E402

from compiler.driver import compile_graph  # noqa: E402
from compiler.frontends.circle.load import load_circle  # noqa: E402
from isa.config import DEFAULT_CONFIG  # noqa: E402
from sim.reference import run_graph  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "tflite" / "families"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
FAMILIES = sorted(MANIFEST)
# The family run on the RTL: the fewest MACs (its Verilator run takes seconds).
RTL_FAMILY = min(FAMILIES, key=lambda n: MANIFEST[n]["macs"])


def _samples(graph, data) -> list[dict]:
    main = graph.main
    count = data["input_0"].shape[0]
    return [{n: data[f"input_{i}"][s] for i, n in enumerate(main.inputs)} for s in range(count)]


def _check(name: str, outputs: dict, graph, data, s: int, where: str) -> None:
    for i, out in enumerate(graph.main.outputs):
        ref = data[f"ref_{i}"][s]
        ours = np.asarray(outputs[out]).reshape(ref.shape)
        bad = np.argwhere(ours.astype(np.int64) != ref.astype(np.int64))
        assert bad.size == 0, (f"{name} ({where}) output {i} sample {s}: {len(bad)} of {ref.size} differ "
                               f"from TFLite's reference kernels, first at {bad[0].tolist()}: "
                               f"{ours[tuple(bad[0])]} vs {ref[tuple(bad[0])]}")


def _load(name: str, ext: str):
    return load_circle(FIXTURES / f"{name}.{ext}"), np.load(FIXTURES / f"{name}.npz")


@pytest.mark.parametrize("ext", ["tflite", "circle"])
@pytest.mark.parametrize("name", FAMILIES)
def test_reference_interpreter_matches_tflite(name, ext):
    graph, data = _load(name, ext)
    for s, inputs in enumerate(_samples(graph, data)):
        _check(name, run_graph(graph, inputs), graph, data, s, f"{ext}, reference interpreter")


@pytest.mark.parametrize("ext", ["tflite", "circle"])
@pytest.mark.parametrize("name", FAMILIES)
def test_isa_matches_tflite(name, ext):
    """The compiled program on the ISA simulator: equal to the reference interpreter (and
    so, by the test above, to TFLite) on every sample, hazard-free."""
    graph, data = _load(name, ext)
    program = compile_graph(graph, DEFAULT_CONFIG)
    for s, inputs in enumerate(_samples(graph, data)):
        result = compare_on_isa(program, graph, inputs, DEFAULT_CONFIG)
        _check(name, program.read_outputs(result.memory), graph, data, s, f"{ext}, ISA simulator")


def test_manifest_lists_what_the_files_hold():
    """Operators and versions in manifest.json are the ones in the .tflite files, and the
    .circle file is the .tflite one with identifier CIR0."""
    from compiler.frontends.circle.load import read_circle_model

    for name in FAMILIES:
        model = read_circle_model(FIXTURES / f"{name}.tflite")
        ops = [{"op": o.op, "version": o.version} for o in model.subgraphs[0].operators]
        assert ops == MANIFEST[name]["operators"], name
        tfl, cir = (FIXTURES / f"{name}.tflite").read_bytes(), (FIXTURES / f"{name}.circle").read_bytes()
        assert tfl[4:8] == b"TFL3" and cir[4:8] == b"CIR0"
        assert tfl[:4] + tfl[8:] == cir[:4] + cir[8:], name


def test_fixture_writer_is_reproducible():
    """The committed files are what the script writes today (the oracle's outputs were
    recorded for exactly these bytes)."""
    from tool_modules import load_tool

    tool = load_tool("make_tflite_family_fixtures")
    for name in FAMILIES:
        net = tool.build(name)
        assert (FIXTURES / f"{name}.tflite").read_bytes() == net.bytes(name), name
        assert (FIXTURES / f"{name}.circle").read_bytes() == net.bytes(name, b"CIR0"), name


@pytest.mark.rtl
def test_rtl_matches_tflite():
    """The smallest family on the RTL (Verilator): TFLite's outputs and the ISA simulator's
    cycle count."""
    from npu import backends
    from sim.isa.sim import IsaSim

    graph, data = _load(RTL_FAMILY, "tflite")
    program = compile_graph(graph, DEFAULT_CONFIG)
    model = backends.Model(RTL_FAMILY, program=program)
    inputs = _samples(graph, data)[0]
    got, stats = backends.run(model, inputs, "rtl", DEFAULT_CONFIG)
    _check(RTL_FAMILY, got, graph, data, 0, "RTL")
    assert stats["cycles"] == IsaSim(DEFAULT_CONFIG).run(program, program.memory_image(inputs)).cycles


def test_families_benchmark_row():
    """``python -m bench families``: the row of the smallest family is the ISA simulator's
    cycle count, equal to the static estimate, no faster than its roofline bound, and its
    utilisation is MACs over cycles times the array's MACs per cycle."""
    from bench.families import family_row
    from sim.isa.sim import IsaSim

    row = family_row(FIXTURES / f"{RTL_FAMILY}.tflite", DEFAULT_CONFIG)
    name, cycles, estimate, macs, util, bound, ratio = row[:7]
    graph, data = _load(RTL_FAMILY, "tflite")
    program = compile_graph(graph, DEFAULT_CONFIG)
    inputs = _samples(graph, data)[0]
    assert cycles == estimate == IsaSim(DEFAULT_CONFIG).run(program, program.memory_image(inputs)).cycles
    assert macs == MANIFEST[RTL_FAMILY]["macs"]
    assert 0 < bound <= cycles and ratio == cycles / bound
    assert util == 100.0 * macs / (cycles * DEFAULT_CONFIG.macs_per_cycle)


def test_16x8_fully_connected_requantization_path():
    """16x8 FULLY_CONNECTED: the int32 requantization (full-precision multiplier) only when
    every accumulator provably fits int32; a layer whose int16 inputs and weights could
    overflow int32 keeps the int48 RESCALE with the 16-bit multiplier."""
    from tool_modules import load_tool

    tool = load_tool("make_tflite_family_fixtures")

    def rescale_inputs(data: bytes) -> list[str]:
        graph = load_circle(data, "fc16x8")
        main = graph.main
        return [main.tensor(op.inputs[0]).dtype + "->" + main.tensor(op.outputs[0]).dtype
                for op in main.operators if op.op == "RESCALE"]

    small = tool.build("int16x8").bytes("int16x8")
    assert "int48->int32" in rescale_inputs(small)
    net = tool.Net(np.random.default_rng(0), "int16")
    x = net.input("x", (1, 4096), 0.0005)       # 32768 * 127 * 4096 > 2**31
    net.output(net.fc("fc", x, 4))
    wide = rescale_inputs(net.bytes("wide"))
    assert "int48->int32" not in wide and "int48->int16" in wide
