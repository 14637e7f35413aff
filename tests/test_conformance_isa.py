"""A CI-sized sample of the TOSA conformance corpus on the NPU (compiler + ISA simulator):
for each operator the compiler lowers, its first two positive tests and first negative test
(sorted by name) must pass: outputs bit-exact with the official reference model's, illegal
graphs rejected.  The whole corpus: ``npu conformance build/conformance/<key> --backend isa``
(compiler/README.md lists the figures).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from isa.config import DEFAULT_CONFIG
from npu import conformance

sys.path.insert(0, str(Path(__file__).parent))
from tool_modules import conformance_corpus  # noqa: E402

if importlib.util.find_spec("tosa_reference_model") is None:  # pragma: no cover
    pytest.skip("tosa-tools (the official TOSA tools, a test extra) is not installed",
                allow_module_level=True)

OPERATORS = [
    "abs", "add", "argmax", "arithmetic_right_shift", "avg_pool2d", "bitwise_and", "bitwise_not",
    "bitwise_or", "bitwise_xor", "cast", "clamp", "clz", "concat", "cond_if", "const", "depthwise_conv2d",
    "equal", "gather", "greater", "greater_equal", "identity", "intdiv", "logical_and",
    "logical_left_shift", "logical_not", "logical_or", "logical_right_shift", "logical_xor", "matmul",
    "max_pool2d", "maximum", "minimum", "mul", "negate", "pad", "reduce_all", "reduce_any", "reduce_max",
    "reduce_min", "reduce_sum", "rescale", "reshape", "resize", "reverse", "scatter", "select", "slice",
    "sub", "table", "tile", "transpose", "while_loop",
]
# Positive tests the NPU does not run yet (compiler/README.md says why).
NOT_YET = ("i16xi8_acci48", "modeB_outi48", "depthwise_conv2d_5x5_1x41x49x46")


@pytest.fixture(scope="module")
def sample() -> list[tuple[str, Path]]:
    corpus = conformance_corpus()
    chosen = []
    for op in OPERATORS:
        tests = conformance.find_tests([str(corpus / op)])
        positive = [t for t in tests if "_ERRORIF_" not in t[0] and not any(k in t[0] for k in NOT_YET)]
        negative = [t for t in tests if "_ERRORIF_" in t[0] and "WrongRank" not in t[0]]
        chosen += [(f"{op}/{name}", path) for name, path in positive[:2] + negative[:1]]
    return chosen


def test_conformance_sample_on_the_isa_simulator(sample):
    results = conformance.run_tests(sample, "isa", config=DEFAULT_CONFIG, jobs=2, progress=False)
    bad = [f"{r.name}: {r.verdict}: {r.reason}" for r in results if r.verdict != conformance.PASSED]
    assert len(results) >= 100
    assert not bad, "\n".join(bad)
