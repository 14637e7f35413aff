"""WHILE_LOOP conformance tests (trip counts from graph inputs) compiled with BRANCH
(compiler/passes/control_link.py) and run on the RTL (``npu conformance --backend rtl``):
each must pass bit-exactly against the official reference model's recorded results."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from isa import DEFAULT_CONFIG
from npu import conformance

if importlib.util.find_spec("tosa_reference_model") is None:  # pragma: no cover
    pytest.skip("tosa-tools (a test extra) is not installed", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from tool_modules import conformance_corpus  # noqa: E402

CHOSEN = ("while_loop/while_loop_0_i8_iter4", "while_loop/while_loop_60_i16_iter4",
          "while_loop/while_loop_7x26_i32_iter1")


def test_while_loops_on_the_rtl(default_rtl):
    corpus = conformance_corpus()
    tests = [(name, corpus / name) for name in CHOSEN if (corpus / name).is_dir()]
    assert len(tests) == len(CHOSEN)
    results = conformance.run_tests(tests, "rtl", config=DEFAULT_CONFIG, progress=False)
    bad = [f"{r.name}: {r.verdict}: {r.reason}" for r in results if r.verdict != conformance.PASSED]
    assert not bad, "\n".join(bad)
