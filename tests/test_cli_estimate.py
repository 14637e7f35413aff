"""`npu estimate`: the per-layer table, its CSV and SVG, against the compiler's estimate, the
ISA simulator's cycle count and figures recomputed from the model file; bad inputs."""
import csv
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import ROOT, assert_user_error, npu  # noqa: E402

SLICE = ROOT / "models" / "slice" / "conv_rescale_clamp.tosa"
TFLITE = ROOT / "tests" / "fixtures" / "tflite"
SVG = "{http://www.w3.org/2000/svg}"
COLUMNS = ["layer", "operators", "MACs", "cycles", "utilisation_pct", "read_bytes", "written_bytes", "bound_cycles",
           "limit", "ratio", "instructions"]


def assert_estimate_error(result, code, *words):
    assert_user_error(result, code, *words, prefix="npu estimate: error: ")


def read_csv(path: Path) -> tuple[list[dict], dict]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        rows = list(reader)
    assert rows[-1]["layer"] == "total"
    return rows[:-1], rows[-1]


def bars(svg: Path, kind: str) -> list[str]:
    root = ET.parse(svg).getroot()          # well-formed XML or this raises
    assert root.tag == f"{SVG}svg"
    return [r.get("data-layer") for r in root.iter(f"{SVG}rect") if r.get("class") == kind]


def estimate_and_check(tmp_path, model, *extra) -> tuple[str, list[dict], dict, list[str]]:
    """Run `npu estimate` with --csv and --plot; check what holds for every model."""
    out_csv, out_svg = tmp_path / "est.csv", tmp_path / "est.svg"
    rc, stdout, err = npu("estimate", model, "--csv", out_csv, "--plot", out_svg, *extra)
    assert rc == 0, err
    layers, total = read_csv(out_csv)
    for col in ("MACs", "cycles", "read_bytes", "written_bytes", "bound_cycles"):
        assert int(total[col]) == sum(int(r[col]) for r in layers), col
    for r in layers:
        cycles, bound = int(r["cycles"]), int(r["bound_cycles"])
        if bound:
            assert float(r["ratio"]) == pytest.approx(cycles / bound, rel=1e-3)
            assert r["limit"] in ("MACs", "bus")
        assert r["layer"] in stdout
    (head,) = [line.split() for line in stdout.splitlines() if line.startswith("layer ")]
    for col in ("layer", "operators", "MACs", "cycles", "util%", "read", "write", "bound", "limit", "ratio", "instr"):
        assert col in head, head
    assert any(line.startswith("total ") for line in stdout.splitlines())
    # One cycles bar per layer with an estimate, in table order; a bound bar where there is a bound.
    assert bars(out_svg, "cycles") == [r["layer"] for r in layers if int(r["cycles"])]
    assert bars(out_svg, "bound") == [r["layer"] for r in layers if int(r["bound_cycles"])]
    return stdout, layers, total, bars(out_svg, "cycles")


def test_slice_figures(tmp_path):
    from compiler.driver import run_pipeline
    from compiler.frontends import load_graph
    from isa.config import DEFAULT_CONFIG as C
    from sim.isa.sim import IsaSim

    _, layers, total, _ = estimate_and_check(tmp_path, SLICE)
    (row,) = layers
    # The convolution reads the graph input, which has fewer channels than the array has
    # rows: the host writes it as patches (compiler/kinds/conv/input_patches.py).
    assert row["operators"] == "CONV2D+RESCALE+CLAMP+input as host patches"
    # MACs and the roofline bound recomputed from the model file.
    graph = load_graph(SLICE)
    block = graph.main
    (conv,) = [op for op in block.operators if op.op == "CONV2D"]
    weights, bias = block.tensors[conv.inputs[1]], block.tensors[conv.inputs[2]]
    x, y = block.tensors[block.inputs[0]], block.tensors[block.outputs[0]]
    oc, kh, kw, ic = weights.shape
    macs = int(np.prod(y.shape)) * kh * kw * ic
    assert int(row["MACs"]) == macs
    least_bytes = sum(int(np.prod(t.shape)) for t in (x, y, weights)) + 4 * int(np.prod(bias.shape))
    assert int(row["bound_cycles"]) == max(-(-macs // C.macs_per_cycle), -(-least_bytes // C.bus_bytes))
    # Cycles: the program's total on the ISA simulator (a different model of the same timing).
    program = run_pipeline(graph, C).program
    with np.load(SLICE.parent / "input.npz") as data:
        inputs = {program.inputs[0].name: data[data.files[0]]}
    result = IsaSim(C).run(program, program.memory_image(inputs))
    assert result.ok, result.error_message
    assert int(total["cycles"]) == result.cycles
    assert int(total["instructions"]) == len(program.instructions)
    assert float(total["utilisation_pct"]) == pytest.approx(100 * macs / (result.cycles * C.macs_per_cycle), abs=0.01)


def test_tflite_matches_the_compiler_estimate(tmp_path):
    from compiler.estimate import estimate_graph
    from compiler.frontends import load_graph
    from isa.config import SMALL_CONFIG

    model = TFLITE / "layout.tflite"
    stdout, layers, total, _ = estimate_and_check(tmp_path, model, "--config", "small")
    assert "4x4 array" in stdout
    est = estimate_graph(load_graph(model), SMALL_CONFIG)
    assert [r["layer"] for r in layers] == [l.name for l in est.layers]
    for r, l in zip(layers, est.layers):
        assert (int(r["MACs"]), int(r["cycles"]), int(r["read_bytes"]), int(r["written_bytes"]),
                int(r["bound_cycles"])) == (l.macs, l.cycles, l.bytes_read, l.bytes_written, l.bound)
    assert int(total["cycles"]) == est.total_cycles
    assert any(int(r["MACs"]) for r in layers)


def test_per_layer_lists_every_layer(tmp_path):
    from compiler.frontends import load_graph
    from compiler.estimate.layer_split import split_layers

    model = TFLITE / "cnn_basic.tflite"
    stdout, layers, total, drawn = estimate_and_check(tmp_path, model, "--per-layer")
    assert stdout.splitlines()[0].startswith("each layer compiled alone")
    assert [r["layer"] for r in layers] == [u.name for u in split_layers(load_graph(model))]
    assert drawn and all(int(r["cycles"]) and int(r["instructions"]) for r in layers if r["layer"] in drawn)


def test_float_model_with_calibration(tmp_path):
    from nnef_helpers import TINY_CNN, random_weights, write_model

    folder = write_model(tmp_path / "tiny", TINY_CNN, random_weights(TINY_CNN))
    from compiler.frontends.nnef.load import load_nnef

    shape = load_nnef(folder).main.tensors["input"].shape
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "calib.npz", input=rng.standard_normal((4, *shape[1:])).astype(np.float32))
    assert_estimate_error(npu("estimate", folder), 3, "--calibrate")
    _, layers, _, _ = estimate_and_check(tmp_path, folder, "--calibrate", tmp_path / "calib.npz")
    assert any(int(r["MACs"]) for r in layers)


def test_bad_inputs(tmp_path):

    assert_estimate_error(npu("estimate", tmp_path / "missing.tosa"), 2, "missing.tosa")
    bad = tmp_path / "bad.tosa"
    bad.write_bytes(SLICE.read_bytes()[:200])
    assert_estimate_error(npu("estimate", bad), 2, "bad.tosa")
    config = tmp_path / "npu.json"
    config.write_text("{not json")
    assert_estimate_error(npu("estimate", SLICE, "--config", config), 2, "npu.json")
    assert_estimate_error(npu("estimate", SLICE, "--csv", tmp_path / "no" / "such" / "dir.csv"), 2, "dir.csv")
    prog = tmp_path / "slice.npuprog"
    assert npu("compile", SLICE, "-o", prog)[0] == 0
    assert_estimate_error(npu("estimate", prog), 2, "slice.npuprog", "model file")


def test_while_loop_rows_per_iteration(tmp_path):
    """A WHILE_LOOP graph (compiled as linked pieces): the loop's condition and body rows are
    labelled per iteration, the total is the data-free timing of the program `npu compile`
    writes (one pass through the loop), the CSV keeps its columns."""
    from compiler.driver import compile_graph
    from isa.config import SMALL_CONFIG
    from sim.npu_timing import TimingModel
    from tosa_ir.tosa_fb import write_tosa
    from vector_graphs import while_loop_graph

    loop = tmp_path / "loop.tosa"
    loop.write_bytes(write_tosa(while_loop_graph()))
    stdout, layers, total, _ = estimate_and_check(tmp_path, loop, "--config", "small")
    names = [r["layer"] for r in layers]
    assert "loop0.cond:elt0" in names and "loop0.body:elt0" in names and "loop0.body:elt1" in names
    assert [r["operators"] for r in layers if r["layer"].startswith("loop0.body:")] == ["SUB", "ADD"]
    assert len(set(names)) == len(names)
    body_lines = [line for line in stdout.splitlines() if line.startswith("loop0.")]
    assert len(body_lines) == 3 and all("per iteration" in line for line in body_lines)
    assert "ONE iteration" in stdout and "trip count depends on the data" in stdout
    program = compile_graph(while_loop_graph(), SMALL_CONFIG)
    assert int(total["instructions"]) == len(program.instructions)
    assert int(total["cycles"]) == TimingModel(SMALL_CONFIG).run(program.instructions).total_cycles
    # Every linked instruction but the HALT is counted in exactly one row.
    assert sum(int(r["instructions"]) for r in layers) == len(program.instructions) - 1


@pytest.mark.parametrize("trips", [0, 3])
def test_while_loop_constant_trip_count(trips):
    """A loop counter starting from a constant: the rows count every iteration and the
    total is the cycle count of the ISA simulator running the compiled program."""
    from compiler.driver import compile_graph
    from compiler.estimate import estimate_graph
    from isa.config import SMALL_CONFIG
    from sim.isa.sim import IsaSim
    from tosa_ir import Operator, Tensor
    from vector_graphs import while_loop_graph

    graph = while_loop_graph()
    main = graph.main
    main.tensors["i"] = Tensor("i", (1,), "int32", np.array([trips], np.int32))
    main.inputs = ["x"]
    main.operators.insert(0, Operator("CONST", [], ["i"], {}, "m:i"))
    est = estimate_graph(graph, SMALL_CONFIG)
    rows = {r.layer: r for r in est.rows()}
    program = compile_graph(graph, SMALL_CONFIG)
    result = IsaSim(SMALL_CONFIG).run(program, program.memory_image({"x": np.array([1, 2], np.int32)}))
    assert result.ok, result.error_message
    assert est.total_cycles == result.cycles == sum(l.cycles for l in est.layers)
    assert f"loop0 runs {trips} times" in est.table()
    assert bool(rows["loop0.body:elt0"].cycles) == bool(trips)
    # The condition's bound counts trips + 1 tests, the body's trips executions.
    one = estimate_graph(while_loop_graph(), SMALL_CONFIG)
    once = {r.layer: r for r in one.rows()}
    assert rows["loop0.cond:elt0"].bound == (trips + 1) * once["loop0.cond:elt0"].bound
    assert rows["loop0.body:elt1"].bound == trips * once["loop0.body:elt1"].bound


def test_big_cond_if_times_the_then_side():
    from compiler.estimate import estimate_graph
    from isa.config import SMALL_CONFIG
    from test_compiler_control_flow import big_cond_if_graph

    est = estimate_graph(big_cond_if_graph(), SMALL_CONFIG)
    rows = {r.layer: r for r in est.rows()}
    then = [r for name, r in rows.items() if name.startswith("if0.then:")]
    other = [r for name, r in rows.items() if name.startswith("if0.else:")]
    assert then and other and all(r.cycles for r in then)
    assert not any(r.cycles or r.bound for r in other)
    assert sum(l.cycles for l in est.layers) == est.total_cycles == rows["total"].cycles
    assert any("then side" in n for n in est.notes)


def test_bench_roofline_writes_the_plot(tmp_path):
    from bench import roofline
    from bench.report import BenchContext

    ctx = BenchContext(repeat=1, build_dir=tmp_path, quick=True, log=lambda text: None)
    (table,) = [t for t in roofline.run(ctx) if t.name == "roofline_slice"]
    layers = [row[0] for row in table.rows if row[0] != "total"]
    assert bars(tmp_path / "roofline_slice.svg", "cycles") == layers
    assert bars(tmp_path / "roofline_slice.svg", "bound") == [row[0] for row in table.rows[:-1] if row[8]]
