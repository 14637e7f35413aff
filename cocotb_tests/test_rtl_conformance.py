"""A handful of TOSA conformance tests (the corpus tools/make_conformance_corpus.py builds)
compiled by the NPU compiler and run on the RTL (``npu conformance --backend rtl``): vector
unit operators (VALU, VRESCALE, VPOOL) with broadcasting, tiling and word-mode DMA.  Each
must pass bit-exactly against the official reference model's recorded results."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from isa import DEFAULT_CONFIG
from npu import conformance

REPO = Path(__file__).resolve().parent.parent

if importlib.util.find_spec("tosa_reference_model") is None:  # pragma: no cover
    pytest.skip("tosa-tools (a test extra) is not installed", allow_module_level=True)

CHOSEN = ("add/add_61x30_i32_is", "select/select_0_b", "rescale/rescale_0_i16_outi8_sc0_rmS_pc0_iu1_ou0",
          "clamp/clamp_0_i16", "mul/mul_0_i16_perm0_shift0", "negate/negate_0_i32")


def _corpus() -> Path:
    name = "make_conformance_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tools" / "make_conformance_corpus.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    tool = sys.modules[name]
    return tool.ensure_corpus(REPO / "build" / "conformance", tool.CorpusOptions(), jobs=2)


def test_conformance_sample_on_the_rtl(default_rtl):
    corpus = _corpus()
    tests = [(name, corpus / name) for name in CHOSEN if (corpus / name).is_dir()]
    assert len(tests) >= 4
    results = conformance.run_tests(tests, "rtl", config=DEFAULT_CONFIG, progress=False)
    bad = [f"{r.name}: {r.verdict}: {r.reason}" for r in results if r.verdict != conformance.PASSED]
    assert not bad, "\n".join(bad)
