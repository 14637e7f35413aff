"""Tests the full conformance listing (docs/conformance.md) found failing, kept as fixtures
from the generated corpus: each is an ERROR_IF test that the official reference model
rejected when the corpus was made (its ``expected_failure``), so rejection is the oracle.

* ``tests/fixtures/conformance/<test>/``: whole test folders, run with ``npu conformance``.
* ``tests/fixtures/conformance/graphs/<test>/``: ``desc.json`` and the graph only (their
  inputs are tens of MB); legality is a property of the graph, checked with the compiler's
  ERROR_IF pass, which the isa and rtl backends run before lowering.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.graph.validate import check_graph
from isa.config import DEFAULT_CONFIG
from npu import conformance
from tosa_ir.address_space import address_space_cap
from tosa_ir.errors import InvalidInput
from tosa_ir.tosa_fb import read_tosa

FIXTURES = Path(__file__).parent / "fixtures" / "conformance"
FOLDERS = sorted(p.parent.name for p in FIXTURES.glob("*/desc.json"))
GRAPHS = sorted(p.parent.name for p in (FIXTURES / "graphs").glob("*/desc.json"))


@pytest.mark.parametrize("backend", ["ref", "isa"])
@pytest.mark.parametrize("name", FOLDERS)
def test_fixture_folder(name, backend):
    """Before: COND_IF took an else graph declaring a (-1, -1) input as matching a (2, 1)
    input list (the sub-graph shape check let -1 match any size): ref and isa accepted it.
    A RESHAPE of int8 (32,) to shape [4, 1, 8] declaring a (6, 9, 16) output: isa accepted
    it (no dry run for a graph of movement operators; compiler check_reshapes now).
    A COND_IF whose condition is an FP8E4M3 constant: ref and isa refused it as unsupported
    (tosa_ir read no fp8 tensors) instead of rejecting it (tests/test_tosa_fp8.py).
    A RESIZE declaring a 1x2259x5415x1 output for a 5x6 result (int16 weights past 65,536):
    isa lowered it at the declared size until a worker died at 18 GB (the compiler now dry-runs
    graphs with RESIZE first); run within a 1 GiB memory budget here."""
    with address_space_cap(1 << 30):
        result = conformance.run_test(name, FIXTURES / name, backend, config=DEFAULT_CONFIG)
    assert result.verdict == conformance.PASSED, result.reason
    assert result.reason.startswith("rejected: ")


@pytest.mark.parametrize("name", GRAPHS)
def test_large_illegal_graph_rejected(name):
    """Before: graphs whose inputs held more than 4M elements skipped the ERROR_IF dry run,
    so these CONCATs (10M-40M input elements) were accepted, or refused as unsupported,
    by the compiler instead of rejected."""
    desc = json.loads((FIXTURES / "graphs" / name / "desc.json").read_text())
    assert desc["expected_failure"] is True
    graph = read_tosa(FIXTURES / "graphs" / name / "test.tosa")
    with pytest.raises(InvalidInput):
        check_graph(graph)


POSITIVE = sorted(p.parent.name for p in (FIXTURES / "positive").glob("*/desc.json"))


@pytest.mark.parametrize("name", POSITIVE)
def test_positive_fixture_on_isa(name):
    """Positive tests of the full listing that the NPU refused before (the official reference
    model's recorded output is the oracle): an int16 BILINEAR RESIZE with scale numerators
    1660 and 1922, weights up to 3,190,520, which needs three weight byte planes and strips
    of columns (compiler/kinds/mxu_conv/resize_wide.py); it was unsupported.  The RTL runs it
    too (cocotb_tests/test_rtl_conformance.py)."""
    result = conformance.run_test(name, FIXTURES / "positive" / name, "isa", config=DEFAULT_CONFIG)
    assert result.verdict == conformance.PASSED, result.reason
