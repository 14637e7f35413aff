"""The benchmark package (bench/): tables, CLI, registry, and the workloads it builds.

No test here times anything: speed figures belong to ``python -m bench``.  What is tested
is that the benchmarks run, report what they claim (the alexnet_v2 generator's shapes and
activation statistics, bit-exactness against the official reference model, programs the
ISA simulator runs without hazards), and that their checks can fail.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest


from bench import alexnet, official_model  # noqa: E402
from bench import interpreter as bench_interpreter  # noqa: E402
from bench import isa_sim as bench_isa_sim  # noqa: E402
from bench.__main__ import main  # noqa: E402
from bench.registry import BENCHMARKS, UnknownBenchmark, load  # noqa: E402
from bench.report import BenchContext, Column, Table  # noqa: E402
from bench.timing import best_of  # noqa: E402
from sim.isa.sim import IsaSim  # noqa: E402
from sim.reference import run_graph  # noqa: E402
from tosa_ir.tosa_fb import write_tosa  # noqa: E402


def quiet_ctx(tmp_path: Path) -> BenchContext:
    return BenchContext(repeat=1, build_dir=tmp_path, quick=True, log=lambda text: None)


# -- report / timing ---------------------------------------------------------------------------
def test_table_renders_aligned_and_writes_raw_csv(tmp_path):
    t = Table("demo/1", "Demo", [Column("name"), Column("time", "s", ".3f"), Column("n")])
    t.add("short", 1.23456, 7)
    t.add("a longer name", None, 12345)
    t.notes.append("a note")
    lines = t.render().splitlines()
    assert lines[0] == "Demo" and set(lines[1]) == {"="}
    assert lines[2].split() == ["name", "time", "[s]", "n"]
    # Numbers right-aligned in their column, missing values shown as "-".
    assert lines[4].endswith("1.235      7")
    assert lines[5].endswith("-  12345")
    assert lines[-1] == "  a note"
    path = t.write_csv(tmp_path)
    assert path.name == "demo_1.csv"
    rows = list(csv.reader(path.open()))
    assert rows == [["name", "time [s]", "n"], ["short", "1.23456", "7"],
                    ["a longer name", "", "12345"]]
    with pytest.raises(ValueError, match="2 values for 3 columns"):
        t.add("x", 1)


def test_best_of_counts_runs():
    calls = []
    timing = best_of(3, lambda: calls.append(1) or len(calls), warmup=2)
    assert len(calls) == 5 and timing.result == 5
    assert len(timing.seconds) == len(timing.cpu_seconds) == 3
    assert timing.best == min(timing.seconds) <= timing.median
    with pytest.raises(ValueError):
        best_of(0, lambda: None)


# -- registry and command line ---------------------------------------------------------------
def test_registry_modules_have_the_interface():
    for name in BENCHMARKS:
        module = load(name)
        assert isinstance(module.DESCRIPTION, str) and callable(module.run)
    with pytest.raises(UnknownBenchmark, match="unknown benchmark 'nope'; known: interpreter"):
        load("nope")


def test_cli_list_and_bad_arguments(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == list(BENCHMARKS)
    assert main(["nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown benchmark 'nope'" in err
    assert main(["--repeat", "0", "isa_sim"]) == 2


# -- alexnet_v2 generator -------------------------------------------------------------------
def test_alexnet_shapes_follow_alexnet_v2():
    # width 16 keeps every spatial size of the full network, with 1/16 of the channels.
    graph = alexnet.build_graph(alexnet.ModelSpec(width=16))
    layers = alexnet.layers_of(graph)
    expected = {"conv1": (54, 64), "conv2": (26, 192), "conv3": (12, 384), "conv4": (12, 384),
                "conv5": (12, 256), "fc6": (1, 4096), "fc7": (1, 4096), "fc8": (1, 1000)}
    assert [l.name for l in layers] == list(expected)
    for layer in layers:
        hw, channels = expected[layer.name]
        assert layer.shape == (1, hw, hw, channels // 16), layer
    assert layers[-1].output == alexnet.OUTPUT_NAME
    # The MACs of the full network (shared/ANCHORS.md: 736.6M), from the layer shapes.
    full = [(54 * 54 * 64, 11 * 11 * 3), (26 * 26 * 192, 25 * 64), (144 * 384, 9 * 192),
            (144 * 384, 9 * 384), (144 * 256, 9 * 384), (4096, 25 * 256), (4096, 4096),
            (1000, 4096)]
    assert round(sum(o * k for o, k in full) / 1e5) == 7366
    ops = [op.op for op in graph.main.operators if op.op not in ("CONST", "CONST_SHAPE")]
    assert ops.count("CONV2D") == ops.count("RESCALE") == ops.count("CLAMP") == 8
    assert ops.count("MAX_POOL2D") == 3
    assert ops.count("SLICE") == 4  # VALID windows that leave trailing rows unread


def test_alexnet_cache_reuses_and_keys_the_file(tmp_path):
    spec = alexnet.ModelSpec(width=32)
    path, image = alexnet.cached_model(tmp_path, spec)
    stamp = path.stat().st_mtime_ns
    again, image2 = alexnet.cached_model(tmp_path, spec)
    assert again == path and again.stat().st_mtime_ns == stamp
    assert np.array_equal(image, image2) and image.shape == (1, 224, 224, 3)
    assert path.read_bytes() == write_tosa(alexnet.build_graph(spec))  # deterministic
    other, _ = alexnet.cached_model(tmp_path, alexnet.ModelSpec(width=32, seed=5))
    assert other != path
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, other.name])


def test_alexnet_is_bit_exact_and_not_saturated():
    # The official model gives the expected values; our interpreter must match on every
    # layer, and the synthetic quantisation must keep activations alive.
    model = official_model.load()
    if model is None:
        pytest.skip(official_model.NOT_INSTALLED)
    spec = alexnet.ModelSpec(width=16)
    graph = alexnet.build_graph(spec)
    layers = alexnet.layers_of(graph)
    graph.main.outputs = [layer.output for layer in layers]
    image = alexnet.make_input(spec)
    status, theirs, log = official_model.run(model, write_tosa(graph), [image])
    assert status == "VALID", log
    ours = run_graph(graph, {alexnet.INPUT_NAME: image})
    for layer, expected in zip(layers, theirs):
        got = ours[layer.output]
        assert np.array_equal(got.reshape(-1), np.asarray(expected).reshape(-1)), layer.name
        zeros, top = alexnet.activation_stats(got)
        assert 0.25 < zeros < 0.75 and top < 0.1, (layer.name, zeros, top)


def test_official_model_reports_illegal_graphs():
    model = official_model.load()
    if model is None:
        pytest.skip(official_model.NOT_INSTALLED)
    graph = alexnet.build_graph(alexnet.ModelSpec(width=64))
    conv = next(op for op in graph.main.operators if op.op == "CONV2D")
    conv.attrs["stride"] = [3, 3]   # idiv_check fails: ERROR_IF
    status, outputs, _ = official_model.run(model, write_tosa(graph),
                                            [alexnet.make_input(alexnet.ModelSpec(width=64))])
    assert status == "ERROR" and outputs == []


# -- the benchmarks themselves, on quick workloads ---------------------------------------------
def test_interpreter_benchmark_reports_bit_exact(tmp_path):
    if official_model.load() is None:
        pytest.skip(official_model.NOT_INSTALLED)
    summary, per_layer = bench_interpreter.run(quiet_ctx(tmp_path))
    assert [row[-1] for row in summary.rows] == ["-", "-", "bit-exact"]
    assert all(row[2] > 0 for row in summary.rows)  # best times
    assert any("speed-up, official / ours" in note for note in summary.notes)
    assert [row[0] for row in per_layer.rows][-1] == "total"
    assert [row[-1] for row in per_layer.rows[:-1]] == ["bit-exact"] * 8


def test_interpreter_benchmark_without_the_official_model(tmp_path, monkeypatch):
    monkeypatch.setattr(official_model, "load", lambda: None)
    summary, per_layer = bench_interpreter.run(quiet_ctx(tmp_path))
    assert summary.rows[-1][-1] == official_model.NOT_INSTALLED
    assert summary.rows[-1][2] is None
    assert all(row[-1] == official_model.NOT_INSTALLED for row in per_layer.rows[:-1])


def test_mismatch_is_reported():
    ours = np.arange(10, dtype=np.int8)
    theirs = ours.copy()
    assert bench_interpreter._compare(ours, theirs) == "bit-exact"
    theirs[3] += 1
    assert bench_interpreter._compare(ours, theirs) == "1 of 10 differ"
    assert bench_interpreter._compare(ours, theirs[:5]).startswith("shape")


def test_hand_built_program_runs_without_hazards():
    program = bench_isa_sim.hand_built_program(tiles=20)
    assert len(program.instructions) == 3 + 3 * 20 + 1
    result = IsaSim(program.config, check_hazards=True).run(program)
    assert result.ok and result.instructions_executed == len(program.instructions)
    assert result.hazards == []
    # The default fills the instruction memory.
    full = bench_isa_sim.hand_built_program()
    assert program.config.imem_rows - 3 <= len(full.instructions) <= program.config.imem_rows


def test_isa_sim_benchmark_table(tmp_path):
    (table,) = bench_isa_sim.run(quiet_ctx(tmp_path))
    assert table.rows, table.notes
    assert table.rows[0][0].startswith("hand-built")
    for row in table.rows:
        assert row[1] > 0 and row[-1] == 0, row   # instructions executed, no hazards


def test_fpga_bench_reads_nextpnr_reports(tmp_path):
    """bench/fpga.py lists build directories from nextpnr's report.json: used of available
    per resource, the clock's achieved Fmax against its constraint, the bitstream's presence;
    a build that stopped before the report is listed without figures."""
    from bench import fpga
    done = tmp_path / "ulx3s" / "npu-small"
    done.mkdir(parents=True)
    (done / "report.json").write_text(
        '{"utilization": {"TRELLIS_COMB": {"used": 41820, "available": 83640}, '
        '"MULT18X18D": {"used": 62, "available": 156}}, '
        '"fmax": {"$glbnet$clk": {"achieved": 27.5, "constraint": 25.0}}}')
    (done / "top.bit").write_bytes(b"\0")
    (tmp_path / "ulx3s" / "npu-ecp5_85f").mkdir()
    (tmp_path / "nosuchboard" / "x-y").mkdir(parents=True)
    rows = fpga.builds(tmp_path)
    assert [(r["design"], r["config"]) for r in rows] == [("npu", "ecp5_85f"), ("npu", "small")]
    stopped, small = rows
    assert stopped["report"] is None and not stopped["bitstream"]
    assert small["report"]["LUT"] == "41820 / 83640 (50%)" and small["report"]["DSP"] == "62 / 156 (40%)"
    assert small["report"]["BRAM"] is None
    assert (small["fmax"], small["target"], small["bitstream"]) == (27.5, 25.0, True)
