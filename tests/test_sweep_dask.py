"""``npu estimate --sweep`` (compiler/estimate/sweep.py, npu/sweep.py) and the Dask path
(npu/dask_runner.py) of the sweep and of ``npu conformance``.

A local multi-process Dask cluster (2 workers) must give results identical to the serial run,
point by point and test by test; asking for Dask without dask.distributed installed is one
line on stderr and exit 3.  The sweep's figures are the static estimate of every point
(compiler/estimate/layers.py), checked here against a direct call for the 16x16 point.
"""
from __future__ import annotations

import csv
import io
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from compiler.estimate import estimate_graph
from compiler.estimate.sweep import SweepPoint, estimate_point, result_dict, sweep_points
from isa.config import DEFAULT_CONFIG, array_config
from npu.cli import main
from tosa_ir.tosa_fb import read_tosa

sys.path.insert(0, str(Path(__file__).parent))
from tool_modules import conformance_corpus, small_network

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """ResNet-50 at 1/16 width and 32x32 input: every kind of layer, quick to compile."""
    path, _ = small_network("resnet50", tmp_path_factory.mktemp("resnet_sweep"), 16, size=32)
    return path


def test_points_and_configurations():
    points = sweep_points((8, 64), (1, 0.5))
    assert [(p.array, p.sram) for p in points] == [(8, 1.0), (64, 1.0), (8, 0.5), (64, 0.5)]
    assert points[0].config() == array_config(8)
    half = points[3].config()
    assert half.array_rows == half.bus_bytes == 64
    assert half.asram_rows == DEFAULT_CONFIG.asram_rows // 2
    with pytest.raises(ValueError):
        sweep_points((12,))


def test_point_is_the_estimate(model):
    graph = read_tosa(model.read_bytes())
    got = estimate_point(graph, SweepPoint(16))
    est = estimate_graph(graph, DEFAULT_CONFIG)
    assert got.mode == "whole graph"
    assert got.cycles == est.total_cycles
    assert got.macs == sum(layer.macs for layer in est.layers) > 0
    assert got.bound == sum(layer.bound for layer in est.layers)
    small = estimate_point(graph, SweepPoint(16, 0.25))
    assert small.sram_kib["asram"] * 4 == got.sram_kib["asram"]


def _run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_sweep_serial_equals_dask(model, tmp_path, capsys):
    base = ["estimate", str(model), "--sweep", "--arrays", "8,16,32", "--sram", "1,2"]
    code, serial, _ = _run(base + ["--csv", str(tmp_path / "a.csv"), "--plot", str(tmp_path / "a.svg")],
                           capsys)
    assert code == 0
    code, parallel, err = _run(base + ["--dask", "--jobs", "2", "--csv", str(tmp_path / "b.csv")],
                               capsys)
    assert code == 0
    assert "local Dask cluster of 2 workers" in err
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()
    table = [line for line in serial.splitlines() if not line.startswith("wrote")]
    assert table == [line for line in parallel.splitlines() if not line.startswith("wrote")]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "a.csv").read_text())))
    assert [r["point"] for r in rows] == ["8x8", "16x16", "32x32", "8x8 sram x2", "16x16 sram x2",
                                          "32x32 sram x2"]
    assert [float(r["speedup_vs_16x16"]) for r in rows][1::3] == [1.0, 1.0]
    svg = (tmp_path / "a.svg").read_text()
    assert svg.count('class="cycles"') == 6 and svg.count('class="speedup"') == 6


def test_sweep_on_an_existing_scheduler(model):
    """--scheduler ADDRESS: the points run on that cluster; same results as here."""
    from distributed import LocalCluster

    from npu.dask_runner import map_tasks
    from npu.sweep import sweep_task

    items = [(str(model), None, a, 1.0, False) for a in (8, 16)]
    serial = [result_dict(r) for r in map_tasks(sweep_task, items)]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        remote = [result_dict(r) for r in map_tasks(sweep_task, items, scheduler=cluster.scheduler_address)]
    assert remote == serial


def test_conformance_serial_equals_dask(capsys):
    corpus = conformance_corpus(ops="^(add|negate)$", max_per_op=2)
    from npu.conformance import find_tests, run_tests

    tests = find_tests([str(corpus)])
    serial = run_tests(tests, "isa", config=DEFAULT_CONFIG, progress=False)
    dask = run_tests(tests, "isa", config=DEFAULT_CONFIG, progress=False, dask=True, jobs=2)

    def strip(results):
        return [replace(r, seconds=0.0) for r in results]
    assert strip(dask) == strip(serial)
    assert any(r.verdict == "passed" for r in serial)
    code, out, _ = _run(["conformance", str(corpus), "--backend", "isa", "--dask", "--jobs", "2"], capsys)
    assert code == 0 and out.splitlines()[-1].startswith(f"{sum(r.verdict == 'passed' for r in serial)} passed")


@pytest.mark.parametrize("args", [["--dask"], ["--jobs", "2"], ["--scheduler", "tcp://127.0.0.1:1"]])
def test_missing_dask_is_exit_3(model, monkeypatch, capsys, args):
    monkeypatch.setitem(sys.modules, "distributed", None)     # import fails as if not installed
    code, _, err = _run(["estimate", str(model), "--sweep", "--arrays", "16", *args], capsys)
    assert code == 3
    line = [e for e in err.splitlines() if e.startswith("npu estimate: error")]
    assert len(line) == 1 and "pip install" in line[0] and "Traceback" not in err


def test_bad_sweep_options(model, capsys):
    for args in (["--arrays", "12"], ["--arrays", "x"], ["--sram", "0"], ["--jobs", "0"],
                 ["--config", "small"]):
        code, _, err = _run(["estimate", str(model), "--sweep", *args], capsys)
        assert code == 2, args
        assert err.count("\n") == 1 and err.startswith("npu estimate: error")
