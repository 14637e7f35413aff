"""The digits CNN (tests/fixtures/tflite/digits_cnn.tflite) on the NPU: the whole model
(convolutions, pools, the depthwise average pool, fully connected layers and the integer
softmax: RESCALE, REDUCE_MAX, SUB, shifts, TABLE, REDUCE_SUM, CLZ, MUL, SELECT chains)
compiled by the NPU compiler and run on the ISA simulator, bit-exact with the reference
interpreter (sim.reference), with its accuracy on the digits test set printed.

To keep CI time small the test runs every 4th sample of the 360-sample test set (90
samples, about 8 s): one compiled program, one ISA simulation per sample.  Over the whole
set (same program, ``DIGITS_ALL=1``) the NPU classifies 349 of 360 correctly (0.9694), the
int8 TFLite reference's accuracy recorded in digits_cnn.json.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from compiler.driver import run_pipeline
from compiler.frontends import load_graph
from isa.config import DEFAULT_CONFIG
from sim.isa_sim import IsaSim
from sim.reference import run_graph

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tflite"


def test_digits_cnn_accuracy_on_the_npu(capsys):
    graph = load_graph(FIXTURES / "digits_cnn.tflite")
    data = np.load(FIXTURES / "digits_cnn.npz")
    figures = json.loads((FIXTURES / "digits_cnn.json").read_text())
    comp = run_pipeline(graph, DEFAULT_CONFIG)
    program = comp.program
    ops = {op.op for op in graph.main.operators}
    assert {"DEPTHWISE_CONV2D", "TABLE", "REDUCE_MAX", "REDUCE_SUM", "CLZ", "SELECT"} <= ops
    (name,), (out,) = graph.main.inputs, graph.main.outputs
    step = 1 if os.environ.get("DIGITS_ALL") else 4
    chosen = range(0, len(data["labels"]), step)
    sim = IsaSim(DEFAULT_CONFIG)
    correct = 0
    for i in chosen:
        x = data["input_0"][i]
        result = sim.run(program, program.memory_image({name: x}))
        assert result.ok, result.error_message
        got = program.read_outputs(result.memory)[out]
        want = run_graph(graph, {name: x})[out]
        assert np.array_equal(got, want), f"sample {i}: NPU {got.tolist()} != reference {want.tolist()}"
        correct += int(np.argmax(got) == data["labels"][i])
    accuracy = correct / len(chosen)
    with capsys.disabled():
        print(f"\ndigits CNN on the NPU (ISA simulator, {len(program.instructions)} instructions): "
              f"{correct}/{len(chosen)} correct = {accuracy:.4f} on {len(chosen)} of the {len(data['labels'])} "
              f"test samples "
              f"(int8 TFLite reference on all 360: {figures['int8_tflite_reference_accuracy']:.4f})")
    assert accuracy >= figures["int8_tflite_reference_accuracy"] - 0.05
