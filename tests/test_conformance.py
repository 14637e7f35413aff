"""TOSA conformance: the official generator's tests run on our reference interpreter, and
tests of the `npu conformance` runner itself.

The corpus is generated on first use by tools/make_conformance_corpus.py (official
generator, expected results from the official reference model) into
build/conformance/<key>/, where the key hashes the options, the tosa-tools version and the
script, so later runs reuse it.  Generating this selection takes a few minutes on 2 cores;
the full listing (``--full``, ``make conformance-full``; docs/conformance.md) is not run here.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from npu import conformance
from npu.cli import main as cli_main
from tosa_ir.errors import Unsupported

sys.path.insert(0, str(Path(__file__).parent))
from tool_modules import conformance_corpus  # noqa: E402

if importlib.util.find_spec("tosa_reference_model") is None:  # pragma: no cover
    pytest.skip("tosa-tools (the official TOSA tools, a test extra) is not installed",
                allow_module_level=True)

# Every TOSA 1.0 operator of PRO-INT with EXT-INT16, EXT-DOUBLEROUND and EXT-CONTROLFLOW that
# the official generator makes tests for (lower-case, as the corpus folders name them).
# The corpus must cover exactly these: test_corpus_covers_pro_int checks it.
PRO_INT_OPERATORS = [
    "abs", "add", "argmax", "arithmetic_right_shift", "avg_pool2d", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "cast", "clamp", "clz", "concat", "cond_if",
    "const", "conv2d", "conv3d", "depthwise_conv2d", "equal", "gather", "greater",
    "greater_equal", "identity", "intdiv", "logical_and", "logical_left_shift", "logical_not",
    "logical_or", "logical_right_shift", "logical_xor", "matmul", "max_pool2d", "maximum",
    "minimum", "mul", "negate", "pad", "reduce_all", "reduce_any", "reduce_max", "reduce_min",
    "reduce_sum", "rescale", "reshape", "resize", "reverse", "scatter", "select", "slice",
    "sub", "table", "tile", "transpose", "transpose_conv2d", "while_loop",
]
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) unsupported)?(?:, (\d+) skipped)?$")


@pytest.fixture(scope="session")
def corpus() -> Path:
    return conformance_corpus()


@pytest.fixture(scope="session")
def small_corpus() -> Path:
    """A few ADD and NEGATE tests, for the runner's own tests."""
    return conformance_corpus(ops="^(add|negate)$", max_per_op=2)


def _by_operator(corpus: Path, backend: str) -> dict[str, list]:
    """Every corpus test run on ``backend``, by lower-case operator folder."""
    from isa.config import DEFAULT_CONFIG

    results = conformance.run_tests(conformance.find_tests([str(corpus)]), backend, config=DEFAULT_CONFIG,
                                    jobs=2, progress=False)
    by_op = defaultdict(list)
    for r in results:
        by_op[r.name.split("/")[0]].append(r)
    return by_op


@pytest.fixture(scope="session")
def ref_results(corpus) -> dict[str, list]:
    return _by_operator(corpus, "ref")


@pytest.fixture(scope="session")
def isa_results(corpus) -> dict[str, list]:
    """The whole corpus compiled for the default 16x16 NPU and run on the ISA simulator."""
    return _by_operator(corpus, "isa")


# -- the corpus ------------------------------------------------------------------------------
def test_corpus_covers_pro_int(corpus):
    manifest = json.loads((corpus / "corpus.json").read_text())
    assert sorted(manifest["counts"]) == PRO_INT_OPERATORS
    for op, counts in manifest["counts"].items():
        assert counts["positive"] >= 2, op
    # Negative tests: one per ERROR_IF condition the generator has (CONST/IDENTITY have none).
    assert sum(c["negative"] for c in manifest["counts"].values()) > 250
    # Expected results come with every positive test, in the conformance form.
    for desc_path in corpus.rglob("desc.json"):
        desc = json.loads(desc_path.read_text())
        if desc["expected_failure"]:
            assert "expected_result_file" not in desc
        else:
            assert desc["expected_result_file"] == [
                f"Conformance-{n}.npy" for n in desc["ofm_name"]], desc_path
            assert all((desc_path.parent / f).is_file() for f in desc["expected_result_file"])


# What the NPU compiler may refuse (Unsupported, exit 3) in the corpus, each a stated limit
# of the hardware or of a lowering: programs beyond the external memory (instructions are
# fetched from there too), and int16 BILINEAR weights beyond the two byte planes.  Anything
# else unsupported is a failure.  (Each text is what the compiler's message says:
# compiler/program/memplan.py, compiler/program/builder.py, compiler/kinds/mxu_conv/resize_wide.py.)
NPU_LIMITS = ("bytes of external memory; the NPU configuration has", "byte planes hold products up to")


def _judge(results: list, operator: str, limits: tuple[str, ...] = ()) -> None:
    """Every positive test bit-exact, every negative test rejected; nothing skipped (rank
    7 > MAX_RANK at level 8K, unpredictable in the spec, is rejected as the official suite
    expects) and nothing unsupported but for the stated ``limits``."""
    assert results, f"no {operator} tests in the corpus"
    bad = [f"{r.name}: {r.verdict}: {r.reason}" for r in results if r.verdict != conformance.PASSED
           and not (r.verdict == conformance.UNSUPPORTED and any(text in r.reason for text in limits))]
    assert not bad, f"{len(bad)} of {len(results)} {operator} tests:\n" + "\n".join(bad)


@pytest.mark.parametrize("operator", PRO_INT_OPERATORS)
def test_reference_interpreter(ref_results, operator):
    _judge(ref_results[operator], operator)


@pytest.mark.parametrize("operator", PRO_INT_OPERATORS)
def test_npu_isa_simulator(isa_results, operator):
    """The same corpus compiled for the NPU and run on the ISA simulator (issue: the NPU
    passes what the reference interpreter passes), judged the same way but for the NPU's
    stated limits (:data:`NPU_LIMITS`)."""
    _judge(isa_results[operator], operator, NPU_LIMITS)


# -- the runner ------------------------------------------------------------------------------
def _copy_test(small_corpus: Path, tmp_path: Path, pattern: str) -> Path:
    """Copy the first small-corpus test whose folder name matches ``pattern``."""
    for desc in sorted(small_corpus.rglob("desc.json")):
        if re.search(pattern, desc.parent.name):
            return Path(shutil.copytree(desc.parent, tmp_path / desc.parent.name))
    raise AssertionError(f"no test matching {pattern!r} in {small_corpus}")


def _edit_desc(folder: Path, **changes) -> None:
    desc = json.loads((folder / "desc.json").read_text())
    for key, value in changes.items():
        if value is None:
            desc.pop(key, None)
        else:
            desc[key] = value
    (folder / "desc.json").write_text(json.dumps(desc))


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli_main(["conformance", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_runner_passes_small_corpus(small_corpus, capsys):
    code, out, _ = _cli(capsys, small_corpus, "--backend", "ref")
    lines = out.rstrip("\n").splitlines()
    m = SUMMARY.match(lines[-1])
    assert m, lines[-1]
    total = len(list(small_corpus.rglob("desc.json")))
    passed, failed = int(m[1]), int(m[2])
    assert passed + failed + int(m[3] or 0) + int(m[4] or 0) == total
    # The per-operator table names both operators with their counts.
    rows = {line.split()[0]: line.split()[1:] for line in lines if line[:1].isupper()}
    assert {"ADD", "NEGATE"} <= set(rows)
    assert code == (1 if failed else 0)


def test_summary_line_exact(small_corpus, tmp_path, capsys):
    test = _copy_test(small_corpus, tmp_path, r"^add_\d")
    code, out, _ = _cli(capsys, test)
    assert out.rstrip("\n").splitlines()[-1] == "1 passed, 0 failed"
    assert code == 0


def test_corrupted_expected_result_fails(small_corpus, tmp_path, capsys):
    test = _copy_test(small_corpus, tmp_path, r"^add_\d+x")
    path = test / "Conformance-result-0.npy"
    want = np.load(path)
    bad = want.copy()
    bad.flat[bad.size // 2] ^= 1            # one bit of one value
    np.save(path, bad)
    code, out, _ = _cli(capsys, tmp_path, "--verbose")
    assert code == 1
    assert out.rstrip("\n").splitlines()[-1] == "0 passed, 1 failed"
    assert "1 of" in out and "values differ" in out and test.name in out


def test_missing_folder_exit_2(tmp_path, capsys):
    code, out, err = _cli(capsys, tmp_path / "nowhere")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "no such folder" in err and "Traceback" not in err


def test_folder_without_tests_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = _cli(capsys, tmp_path / "empty")
    assert code == 2 and "no desc.json" in err and err.count("\n") == 1


def test_negative_test_that_runs_fails(small_corpus, tmp_path, capsys):
    test = _copy_test(small_corpus, tmp_path, r"^add_\d")
    _edit_desc(test, expected_failure=True, expected_failure_desc="made up")
    code, out, _ = _cli(capsys, test, "-v")
    assert code == 1 and "illegal graph accepted" in out and "made up" in out


def test_negative_test_rejected_passes(small_corpus, tmp_path, capsys):
    test = _copy_test(small_corpus, tmp_path, r"_ERRORIF_RankMismatch_")
    code, out, _ = _cli(capsys, test)
    assert code == 0 and out.rstrip("\n").splitlines()[-1] == "1 passed, 0 failed"


def test_valid_graph_rejected_fails(small_corpus, tmp_path, capsys):
    test = _copy_test(small_corpus, tmp_path, r"_ERRORIF_RankMismatch_")
    _edit_desc(test, expected_failure=False)
    code, out, _ = _cli(capsys, test, "-v")
    assert code == 1 and "valid graph rejected" in out


def test_no_expected_result_is_skipped(small_corpus, tmp_path, capsys):
    """Raw tosa_verif_build_tests output has no expected results: not judged, but run."""
    test = _copy_test(small_corpus, tmp_path, r"^negate_\d")
    _edit_desc(test, expected_result_file=None, ofm_file=["ref-result-0.npy"])
    code, out, _ = _cli(capsys, test, "-v")
    assert code == 0
    assert out.rstrip("\n").splitlines()[-1] == "0 passed, 0 failed, 1 skipped"
    assert "no expected result" in out


def test_missing_input_file_fails(small_corpus, tmp_path, capsys):
    test = _copy_test(small_corpus, tmp_path, r"^add_\d")
    (test / "input-1.npy").unlink()
    code, out, _ = _cli(capsys, test, "-v")
    assert code == 1 and "bad test" in out and "input-1.npy" in out


def test_unsupported_is_not_a_failure(small_corpus, tmp_path, capsys, monkeypatch):
    test = _copy_test(small_corpus, tmp_path, r"^add_\d")

    def unsupported(*args, **kwargs):
        raise Unsupported("ADD at somewhere: operator not supported by this backend")

    monkeypatch.setattr(conformance, "_run_backend", unsupported)
    code, out, _ = _cli(capsys, test)
    assert code == 0, out
    assert out.rstrip("\n").splitlines()[-1] == "0 passed, 0 failed, 1 unsupported"
    assert "ADD (1): ADD at somewhere: operator not supported by this backend" in out
    row = next(line for line in out.splitlines() if line.startswith("ADD "))
    assert row.split()[1:] == ["0", "0", "1", "0"]   # passed failed unsupported skipped


def test_isa_backend_runs(small_corpus, capsys):
    """Through the NPU compiler and ISA simulator: each test passes or is unsupported (the
    compiler maps few operators yet); none fails or crashes."""
    code, out, _ = _cli(capsys, small_corpus, "--backend", "isa", "--config", "small", "-v")
    assert code == 0, out
    assert "failed:" not in out


def test_jobs_give_the_same_results(small_corpus):
    tests = conformance.find_tests([str(small_corpus)])
    one = conformance.run_tests(tests, "ref", jobs=1, progress=False)
    two = conformance.run_tests(tests, "ref", jobs=2, progress=False)
    assert [(r.name, r.verdict, r.reason) for r in one] == \
           [(r.name, r.verdict, r.reason) for r in two]


def test_bad_jobs_exit_2(small_corpus, capsys):
    code, _, err = _cli(capsys, small_corpus, "--jobs", "0")
    assert code == 2 and "--jobs" in err


def test_compare_output():
    want = np.array([[1, -2], [3, (1 << 47) - 1]], dtype=np.int64)   # int48 as stored
    assert conformance.compare_output("r", want.copy(), want) is None
    off = want.copy()
    off[1, 1] -= 1
    assert "1 of 4 values differ (first at [1, 1]" in conformance.compare_output("r", off, want)
    assert "shape" in conformance.compare_output("r", want[:1], want)
    assert "not produced" in conformance.compare_output("r", None, want)
    # int8 results against int8 files compare by value whatever the numpy integer type.
    assert conformance.compare_output("r", np.array([-1], np.int32), np.array([-1], np.int8)) is None
    # Floats are compared by encoding: -0.0 is not 0.0.
    assert conformance.compare_output("r", np.array([-0.0], np.float32),
                                      np.array([0.0], np.float32)) is not None


def test_json_report(small_corpus, tmp_path, capsys):
    """--json: the same verdicts as the table, one entry per test."""
    report_path = tmp_path / "report.json"
    code, out, _ = _cli(capsys, small_corpus, "--json", report_path)
    report = json.loads(report_path.read_text())
    m = SUMMARY.match(out.rstrip("\n").splitlines()[-1])
    assert report["summary"] == m[0] and report["backend"] == "ref"
    assert report["totals"]["passed"] == int(m[1]) and report["totals"]["failed"] == int(m[2])
    assert len(report["tests"]) == len(list(small_corpus.rglob("desc.json")))
    assert {t["operator"] for t in report["tests"]} == set(report["operators"]) == {"ADD", "NEGATE"}
    assert sum(report["operators"]["ADD"].values()) == sum(t["operator"] == "ADD" for t in report["tests"])
    assert code == (1 if int(m[2]) else 0)


def test_json_report_unwritable_exit_2(small_corpus, tmp_path, capsys):
    code, out, err = _cli(capsys, small_corpus, "--json", tmp_path / "no" / "such" / "report.json")
    assert code == 2 and "cannot write the JSON report" in err


def test_test_past_its_memory_budget_fails_alone(small_corpus, tmp_path, capsys, monkeypatch):
    big = _copy_test(small_corpus, tmp_path, r"^add_\d")
    real = conformance._run_backend

    def blow_up(graph, inputs, backend, config, source):
        np.ones(3 << 30, dtype=np.uint8)          # 3 GiB against a 0.5 GiB budget
        return real(graph, inputs, backend, config, source)

    monkeypatch.setattr(conformance, "_run_backend", blow_up)
    code, out, err = _cli(capsys, big, "--memory-limit", "0.5", "-v")
    assert code == 1 and "Traceback" not in out + err
    assert "crash: out of memory" in out and "--memory-limit" in out


def test_killed_worker_fails_only_its_test(small_corpus, monkeypatch):
    """A test whose worker process dies (here SIGKILL, as the kernel's OOM killer sends) is
    that test's failure; the run goes on and every other test keeps its verdict."""
    import os
    import signal

    tests = conformance.find_tests([str(small_corpus)])[:6]
    victim = tests[2][0]
    real = conformance._run_backend

    def die_on_victim(graph, inputs, backend, config, source):
        if victim in source:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(graph, inputs, backend, config, source)

    monkeypatch.setattr(conformance, "_run_backend", die_on_victim)
    got = conformance.run_tests(tests, "ref", jobs=2, progress=False)
    monkeypatch.setattr(conformance, "_run_backend", real)
    want = conformance.run_tests(tests, "ref", jobs=1, progress=False)
    assert [r.name for r in got] == [name for name, _ in tests]
    assert got[2].verdict == conformance.FAILED and "killed (SIGKILL" in got[2].reason
    assert [(r.verdict, r.reason) for i, r in enumerate(got) if i != 2] == \
           [(r.verdict, r.reason) for i, r in enumerate(want) if i != 2]


def test_bad_memory_limit_exit_2(small_corpus, capsys):
    code, _, err = _cli(capsys, small_corpus, "--memory-limit", "-1")
    assert code == 2 and "--memory-limit" in err


def test_inputs_past_the_memory_budget_fail_alone(small_corpus, tmp_path, capsys):
    """An input file larger than the test's budget is that test's failure, not a traceback."""
    big = _copy_test(small_corpus, tmp_path, r"^add_\d")
    desc = json.loads((big / "desc.json").read_text())
    np.lib.format.open_memmap(big / desc["ifm_file"][0], mode="w+", dtype=np.int32, shape=(1 << 28,))   # 1 GiB: under the reader's own 2 GiB cap
    code, out, err = _cli(capsys, big, "--memory-limit", "0.5", "-v")
    assert code == 1 and "Traceback" not in out + err
    assert "out of memory reading the test's files" in out
