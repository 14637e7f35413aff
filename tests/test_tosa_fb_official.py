"""write_tosa output on the official TOSA reference model: the lowered Circle fixtures.

Every model in tests/fixtures/tflite/ (.tflite and .circle) is lowered by the Circle
frontend (whose graphs keep constants as tensors with data, without CONST operators),
written with :func:`tosa_ir.tosa_fb.write_tosa` and run by the official reference model
(out of process, tests/oracle.py: a bad file can abort it).  Its outputs, and the intermediate
tensors that keep their TFLite names (made graph outputs), must equal our interpreter's
on the same graph and TFLite's reference kernels recorded in the fixture.  So the file
is loadable and runnable, and the Circle lowering is checked by the spec's own
implementation as well as by ours.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tosa_reference_model", reason="tosa-tools (official reference model) is not installed")
sys.path.insert(0, os.path.dirname(__file__))
import oracle  # noqa: E402

from compiler.frontends.circle.load import load_circle  # noqa: E402
from compiler.graph.quantize.prepare import add_const_ops, copy_graph  # noqa: E402
from sim.reference import run_graph  # noqa: E402
from tosa_ir.tosa_fb import read_tosa, write_tosa  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "tflite"
MODELS = sorted(json.loads((FIXTURES / "manifest.json").read_text()))
SAMPLES = 3  # per model (the fixtures hold 3; digits_cnn holds 360)


def _feeds(graph, data, sample: int) -> list[np.ndarray]:
    """Inputs in block order; uint8 graph inputs are passed as int8 bit patterns."""
    feeds = []
    for i, _ in enumerate(graph.main.inputs):
        x = data[f"input_{i}"][sample]
        feeds.append(x.view(np.int8) if x.dtype == np.uint8 else x)
    return feeds


def _as_ref(value: np.ndarray, ref: np.ndarray, is_graph_output: bool) -> np.ndarray:
    """A graph value in the fixture's representation (as tests/test_circle_fixtures.py):
    uint8 tensors are int8 inside the graph, moved by 128; uint8 graph outputs are int8
    bit patterns."""
    value = np.asarray(value).reshape(ref.shape)
    if ref.dtype == np.uint8:
        return value.view(np.uint8) if is_graph_output else value.astype(np.int64) + 128
    return value


@pytest.mark.parametrize("ext", ["tflite", "circle"])
@pytest.mark.parametrize("name", MODELS)
def test_circle_fixture_runs_on_official_model(name, ext):
    graph = load_circle(FIXTURES / f"{name}.{ext}")
    main = graph.main
    produced = {o for op in main.operators for o in op.outputs}
    assert any(t.is_const and n not in produced for n, t in main.tensors.items()), \
        "the frontend now adds CONST operators itself: this test no longer tests their insertion"
    data = np.load(FIXTURES / f"{name}.npz")
    outputs = list(main.outputs)
    mids = [k[4:] for k in data.files if k.startswith("mid:")]
    mids = [m for m in mids if m in main.tensors and m not in outputs and m not in main.inputs]
    main.outputs = outputs + mids
    tosa = write_tosa(graph)
    for s in range(SAMPLES):
        feeds = _feeds(graph, data, s)
        status, official, log = oracle._run_binding(tosa, feeds, "EIGHTK")
        assert status == "VALID", f"{name}: official model said {status}\n{log}"
        assert "WARNING: TOSA file created with version of SerLib" not in log
        ours = run_graph(graph, dict(zip(main.inputs, feeds)))
        assert len(official) == len(main.outputs)
        for out, got in zip(main.outputs, official):
            want = ours[out]
            assert (got.shape, got.dtype) == (want.shape, want.dtype), (name, out)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}: {out!r} sample {s}")
        for j in range(len(outputs)):
            np.testing.assert_array_equal(_as_ref(official[j], data[f"ref_{j}"][s], True),
                                          data[f"ref_{j}"][s], err_msg=f"{name}: output {j}")
        if s < (data[f"mid:{mids[0]}"].shape[0] if mids else 0):
            for m, got in zip(mids, official[len(outputs):]):
                ref = data[f"mid:{m}"][s]
                np.testing.assert_array_equal(_as_ref(got, ref, False), ref, err_msg=f"{name}: {m!r}")


@pytest.mark.parametrize("name", MODELS)
def test_added_const_ops_match_add_const_ops(name):
    """The CONST operators write_tosa adds are those compiler.graph.quantize.prepare.add_const_ops
    gives the graph (the NNEF and quantizer graphs' convention): same bytes.  Reading back
    shows them; writing that again changes nothing."""
    graph = load_circle(FIXTURES / f"{name}.tflite")
    with_ops = copy_graph(graph)
    add_const_ops(with_ops.main)
    data = write_tosa(graph)
    assert data == write_tosa(with_ops)
    again = read_tosa(data, source=graph.source)
    assert [op.op for op in again.main.operators] == [op.op for op in with_ops.main.operators]
    assert write_tosa(again) == data
