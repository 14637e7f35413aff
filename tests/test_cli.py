"""The `npu` command line as a user runs it: outputs, exit codes, one-line errors."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import ROOT, assert_user_error, npu  # noqa: E402

SLICE = ROOT / "models" / "slice"
MODEL = SLICE / "conv_rescale_clamp.tosa"


def test_help():
    for args in ([], ["--help"], ["run", "--help"], ["compile", "--help"]):
        rc, out, err = npu(*args)
        assert "usage: npu" in out
        assert rc == (2 if not args else 0)


@pytest.mark.parametrize("backend", ["ref", "isa"])
def test_run_slice_matches_official_reference(tmp_path, backend):
    out = tmp_path / "out.npz"
    rc, stdout, err = npu("run", MODEL, "--backend", backend, "--inputs", SLICE / "input.npz", "--output", out)
    assert rc == 0, err
    assert f"backend: {backend}" in stdout and "(1, 12, 11, 20)" in stdout
    assert ("cycles:" in stdout) == (backend != "ref")
    expected = np.load(SLICE / "expected.npz")      # from the official TOSA reference model
    got = np.load(out)
    assert sorted(got.files) == sorted(expected.files)
    for k in expected.files:
        assert np.array_equal(got[k], expected[k])


def test_single_input_under_any_key(tmp_path):
    x = np.load(SLICE / "input.npz")
    np.savez(tmp_path / "in.npz", whatever=x[x.files[0]])
    rc, _, err = npu("run", MODEL, "--inputs", tmp_path / "in.npz", "--output", tmp_path / "o.npz")
    assert rc == 0, err


def test_compile_then_run_program(tmp_path):
    prog, asm = tmp_path / "slice.npuprog", tmp_path / "slice.s"
    rc, out, err = npu("compile", MODEL, "-o", prog, "--asm", asm)
    assert rc == 0, err
    assert "instructions" in out and "HALT" in asm.read_text()
    rc, _, err = npu("run", prog, "--backend", "isa", "--inputs", SLICE / "input.npz", "--output", tmp_path / "o.npz")
    assert rc == 0, err
    expected = np.load(SLICE / "expected.npz")
    assert np.array_equal(np.load(tmp_path / "o.npz")["output"], expected["output"])
    assert_user_error(npu("run", prog, "--backend", "ref", "--inputs", SLICE / "input.npz",
                          "--output", tmp_path / "o.npz"), 2, "ref backend")


def test_bad_inputs_give_exit_2(tmp_path):
    out = tmp_path / "o.npz"
    inp = SLICE / "input.npz"
    assert_user_error(npu("run", tmp_path / "missing.tosa", "--inputs", inp, "--output", out), 2, "missing.tosa")
    bad = tmp_path / "bad.tosa"
    bad.write_bytes(MODEL.read_bytes()[:200])
    assert_user_error(npu("run", bad, "--inputs", inp, "--output", out), 2, "bad.tosa")
    assert_user_error(npu("compile", bad, "-o", tmp_path / "p.npuprog"), 2, "bad.tosa")
    notnpz = tmp_path / "in.npz"
    notnpz.write_bytes(b"not a zip file")
    assert_user_error(npu("run", MODEL, "--inputs", notnpz, "--output", out), 2, "in.npz")
    np.savez(tmp_path / "shape.npz", input=np.zeros((1, 3, 3, 5), np.int8))
    for backend in ("ref", "isa"):
        assert_user_error(npu("run", MODEL, "--backend", backend, "--inputs", tmp_path / "shape.npz",
                              "--output", out), 2, "input")
    np.savez(tmp_path / "two.npz", a=np.zeros(1), b=np.zeros(1))
    assert_user_error(npu("run", MODEL, "--inputs", tmp_path / "two.npz", "--output", out), 2, "missing input")
    prog = tmp_path / "p.npuprog"
    prog.write_bytes(b"NPUPROG\0" + bytes(20))
    assert_user_error(npu("run", prog, "--backend", "isa", "--inputs", inp, "--output", out), 2, "p.npuprog")


def test_unsupported_operator_gives_exit_3(tmp_path):
    from tosa_ir.tosa_fb import write_tosa

    from vector_graphs import while_loop_graph

    from tosa_ir import Operator

    # A WHILE_LOOP whose body has an operator the NPU does not run (ERF).
    graph = while_loop_graph()
    graph.block("B").operators[1] = Operator("ERF", ["x"], ["y"], {}, "m:B1")
    path = tmp_path / "loop.tosa"
    path.write_bytes(write_tosa(graph))
    np.savez(tmp_path / "in.npz", i=np.array([3], np.int32), x=np.array([1, 2], np.int32))
    assert_user_error(npu("compile", path, "-o", tmp_path / "p.npuprog"), 3, "WHILE_LOOP")
    # The plain loop (trip count from a graph input) runs on the NPU: BRANCH.
    path.write_bytes(write_tosa(while_loop_graph()))
    rc, _, err = npu("run", path, "--backend", "isa", "--inputs", tmp_path / "in.npz", "--output", tmp_path / "o.npz")
    assert rc == 0, err
    assert np.array_equal(np.load(tmp_path / "o.npz")["x2"], [8, 16])


def test_float_model_needs_and_uses_calibration(tmp_path):
    from nnef_helpers import TINY_CNN, random_weights, write_model

    folder = write_model(tmp_path / "tiny", TINY_CNN, random_weights(TINY_CNN))
    from compiler.frontends.nnef.load import load_nnef

    shape = load_nnef(folder).main.tensors["input"].shape
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "calib.npz", input=rng.standard_normal((6, *shape[1:])).astype(np.float32))
    np.savez(tmp_path / "in.npz", input=rng.standard_normal(shape).astype(np.float32))
    out = tmp_path / "o.npz"
    assert_user_error(npu("run", folder, "--inputs", tmp_path / "in.npz", "--output", out), 3, "--calibrate")
    rc, stdout, err = npu("run", folder, "--calibrate", tmp_path / "calib.npz", "--inputs", tmp_path / "in.npz",
                          "--output", out)
    assert rc == 0, err
    assert "SNR dB" in stdout and "6 calibration sample" in stdout
    saved = np.load(out)
    assert saved["c2"].dtype == np.int8 and saved["c2.float"].dtype == np.float32
    calib_dir = tmp_path / "calib"
    calib_dir.mkdir()
    for i in range(3):
        np.save(calib_dir / f"{i}.npy", rng.standard_normal(shape).astype(np.float32))
    rc, stdout, err = npu("run", folder, "--calibrate", calib_dir, "--inputs", tmp_path / "in.npz", "--output", out)
    assert rc == 0 and "3 calibration sample" in stdout, err
    assert_user_error(npu("run", folder, "--calibrate", tmp_path / "nope", "--inputs", tmp_path / "in.npz",
                          "--output", out), 2, "calibration")
