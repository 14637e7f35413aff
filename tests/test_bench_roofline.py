"""The roofline benchmark (bench/roofline.py): per-layer rows from the ISA simulator's timing
that add up to the run's cycles, bounds from the layers' MACs and least traffic."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from bench import roofline
from bench.report import BenchContext
from compiler.driver import run_pipeline
from isa.config import DEFAULT_CONFIG
from sim.isa_sim import IsaSim

sys.path.insert(0, str(Path(__file__).parent))
import tool_modules  # noqa: E402


@pytest.fixture(scope="module")
def small_alexnet(tmp_path_factory):
    return tool_modules.small_alexnet(tmp_path_factory.mktemp("alexnet16"))


def test_rows_add_up_to_the_simulated_cycles(small_alexnet):
    from compiler.frontends import load_graph

    graph = load_graph(small_alexnet[0])
    comp = run_pipeline(graph, DEFAULT_CONFIG)
    rows, total = roofline.layer_rows(comp, DEFAULT_CONFIG)
    result = IsaSim(DEFAULT_CONFIG).run(comp.program)
    assert total == result.cycles
    assert sum(r.cycles for r in rows) == total
    assert [r.name for r in rows] == [layer.name for layer in comp.layers]
    fc = rows[-1]                       # fc8: weight-bandwidth bound
    layer = comp.layers[-1]
    least = layer.weights.size + 4 * layer.bias.size + int(np.prod(layer.in_shape)) + int(np.prod(layer.out_shape))
    assert fc.bound == max(-(-layer.macs // 256), -(-least // 16))
    assert fc.read >= layer.weights.size      # every weight read at least once


def test_table_of_a_model(small_alexnet, tmp_path):
    ctx = BenchContext(repeat=1, build_dir=tmp_path, quick=True, log=lambda text: None)
    table = roofline.run_model("alexnet16", *small_alexnet, DEFAULT_CONFIG, ctx)
    assert table.rows[-1][0] == "total"
    assert table.rows[-1][3] == sum(row[3] for row in table.rows[:-1])
    assert any("bit-exact vs the reference interpreter: yes" in note for note in table.notes)
    path = table.write_csv(tmp_path)
    assert path.read_text().splitlines()[0].startswith("layer,output,kind,cycles,MACs")


def test_quick_run_covers_the_bundled_models(tmp_path):
    ctx = BenchContext(repeat=1, build_dir=tmp_path, quick=True, log=lambda text: None)
    names = [t.name for t in roofline.run(ctx)]
    assert "roofline_slice" in names and "roofline_alexnet" not in names
