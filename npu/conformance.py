"""`npu conformance DIR... --backend {ref,isa,rtl}`: run TOSA conformance test folders.

A test folder is the official layout: ``desc.json`` naming a ``.tosa`` graph (``tosa_file``),
its inputs (``ifm_name``/``ifm_file``, ``.npy``), its outputs (``ofm_name``) and, in the
conformance form, the expected outputs (``expected_result_file``, recorded from the official
reference model).  ``expected_failure`` marks a negative test: the graph breaks an ERROR_IF
condition and must be rejected.  Each DIR is a test folder or a folder searched recursively
for ``desc.json``.

Verdicts, one per test:

* **passed**: a positive test whose outputs equal the expected ones bit for bit, or a negative
  test that the backend rejected as an illegal graph (``InvalidInput``, which ``TosaError``
  is).  A test the backend finds *unpredictable* (a REQUIRE fails) passes too: in the spec
  that result overrides ERROR_IF and tosa_test_compliance() puts no requirement on it (the
  reason says so and what the suite expected).  A rank above MAX_RANK at level 8K (the
  suite's WrongRank tests) is rejected by every backend (``LevelRejected``): a pass.
* **failed**: anything else a backend does wrong: a wrong or missing output, a valid graph
  rejected, an illegal graph accepted, a crash.  A test that needs more memory than its budget
  (``--memory-limit``) fails with "out of memory", and one whose worker process dies fails on
  its own: the others in the run keep their verdicts (npu/guarded_workers.py).
* **unsupported**: the backend says it does not handle the graph (``Unsupported``), e.g. an
  operator the compiler cannot map to the NPU yet; listed with the reason, never a failure.
* **skipped**: the test cannot be judged: a positive test without expected
  results (raw ``tosa_verif_build_tests`` output: the graph still runs, and a rejection or a
  crash is a failure), an output whose ``meta.compliance`` mode is not ``EXACT`` (floating
  point modes need the official checker), or a test in JSON form.

The report is a table per operator, then the line ``N passed, N failed`` (followed by ``, N
unsupported`` and ``, N skipped`` when there are such tests: unsupported tests are counted on
their own, never as passes nor as skips).  ``--json FILE`` also writes every verdict (name,
operator, verdict, reason, seconds), the per-operator counts and the summary line as JSON.
Exit code 1 when a test failed, 2 when a DIR is unusable, else 0.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tosa_ir.errors import InvalidInput, NpuError, TosaUnpredictable, Unsupported

from npu.config import load_config
from npu.guarded_workers import WorkerDied, default_budget, map_guarded

BACKENDS = ("ref", "isa", "rtl")
PASSED, FAILED, UNSUPPORTED, SKIPPED = "passed", "failed", "unsupported", "skipped"
VERDICTS = (PASSED, FAILED, UNSUPPORTED, SKIPPED)
DESC = "desc.json"


@dataclass
class TestResult:
    """The verdict on one test folder."""

    name: str          # folder path relative to the DIR it was found under
    operator: str      # operator under test (desc.json test_details, else from the graph)
    verdict: str       # one of VERDICTS
    reason: str = ""   # why, for everything but a plain pass
    seconds: float = 0.0


# -- finding tests ---------------------------------------------------------------------------
def find_tests(dirs: list[str]) -> list[tuple[str, Path]]:
    """(display name, folder) of every test under ``dirs``, sorted, without duplicates.

    Raises InvalidInput for a DIR that does not exist, is not a folder or holds no test.
    """
    found: dict[Path, str] = {}
    for spec in dirs:
        root = Path(spec)
        if not root.exists():
            raise InvalidInput(f"{spec}: no such folder")
        if not root.is_dir():
            raise InvalidInput(f"{spec}: not a folder (give a test folder or a folder of tests)")
        if (root / DESC).is_file():
            folders = [root]
        else:
            folders = sorted(p.parent for p in root.rglob(DESC) if p.is_file())
        if not folders:
            raise InvalidInput(f"{spec}: no {DESC} found (not a conformance test folder)")
        for folder in folders:
            rel = folder.relative_to(root).as_posix()
            name = root.name if rel == "." else rel
            found.setdefault(folder.resolve(), name)
    return sorted(((name, path) for path, name in found.items()), key=lambda t: (t[0], str(t[1])))


# -- running one test (in a worker process) --------------------------------------------------
class _BadTest(Exception):
    """The test folder itself is broken (missing file, bad desc.json): a failure."""


def _read_desc(folder: Path) -> dict:
    """desc.json, every field the runner uses checked for its JSON type; file names must
    stay inside the test folder (no absolute paths, no ``..``)."""
    from tosa_ir.safe_io import load_json

    try:
        desc = load_json(folder / DESC, DESC)
    except InvalidInput as e:
        raise _BadTest(f"cannot read {DESC}: {e}") from None
    if not isinstance(desc, dict):
        raise _BadTest(f"{DESC} is not a JSON object")
    for key in ("tosa_file", "ifm_name", "ifm_file", "ofm_name"):
        if key not in desc:
            raise _BadTest(f"{DESC} has no {key!r}")
    files = {"tosa_file": [desc["tosa_file"]]}
    for key in ("ifm_name", "ifm_file", "ofm_name", "expected_result_file"):
        value = desc.get(key, [])
        if value is None and key == "expected_result_file":
            continue
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise _BadTest(f"{DESC}: {key!r} must be a list of strings")
        if key.endswith("_file"):
            files[key] = value
    for key, names in files.items():
        for f in names:
            if not isinstance(f, str) or not f or Path(f).is_absolute() or ".." in Path(f).parts:
                raise _BadTest(f"{DESC}: {key!r} names {f!r}, not a file inside the test folder")
    for key in ("meta", "test_details"):
        if key in desc and not isinstance(desc[key], dict):
            raise _BadTest(f"{DESC}: {key!r} must be a JSON object")
    compliance = desc.get("meta", {}).get("compliance", {})
    if not isinstance(compliance, dict) or not isinstance(compliance.get("tensors", {}), dict):
        raise _BadTest(f"{DESC}: meta.compliance must be a JSON object with a 'tensors' object")
    if not isinstance(desc.get("expected_failure", False), bool):
        raise _BadTest(f"{DESC}: 'expected_failure' must be true or false")
    if not isinstance(desc.get("expected_failure_desc", ""), (str, type(None))):
        raise _BadTest(f"{DESC}: 'expected_failure_desc' must be a string")
    if len(desc["ifm_name"]) != len(desc["ifm_file"]):
        raise _BadTest(f"{DESC}: ifm_name and ifm_file differ in length")
    expected = desc.get("expected_result_file")
    if expected is not None and len(expected) != len(desc["ofm_name"]):
        raise _BadTest(f"{DESC}: expected_result_file and ofm_name differ in length")
    return desc


def _load_npy(path: Path, what: str) -> np.ndarray:
    from tosa_ir.safe_io import load_npy

    try:
        return load_npy(path, what)
    except InvalidInput as e:
        raise _BadTest(f"cannot read {what} {path.name}: {e}") from None


def _json_form(desc: dict) -> str | None:
    """Why a test in the JSON form (tosa_verif_conformance_generator's default) is skipped."""
    files = [desc["tosa_file"], *desc["ifm_file"], *desc.get("expected_result_file", [])]
    json_files = [f for f in files if str(f).endswith(".json")]
    if json_files:
        return (f"JSON-form test ({json_files[0]}): regenerate it with --output-type binary "
                "or convert it with tosa_json2fbbin / tosa_json2numpy")
    return None


def _inexact_modes(desc: dict) -> dict[str, str]:
    """Outputs whose official compliance check is not an exact comparison."""
    tensors = desc.get("meta", {}).get("compliance", {}).get("tensors", {})
    return {name: info.get("mode") for name, info in tensors.items()
            if isinstance(info, dict) and info.get("mode", "EXACT") != "EXACT"}


def _operator_of(desc: dict, graph, folder: Path) -> str:
    details = desc.get("test_details")
    if isinstance(details, dict) and details.get("operator"):
        return str(details["operator"]).upper()
    if graph is not None:
        ops = [op.op for op in graph.main.operators if op.op not in ("CONST", "CONST_SHAPE")]
        if ops:
            return Counter(ops).most_common(1)[0][0]
    return folder.name.split("_")[0].upper()


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    return f" ({Path(f.filename).name}:{f.lineno})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _run_backend(graph, inputs: dict, backend: str, config, source: str) -> dict:
    if backend == "ref":
        from sim.reference import run_graph

        return run_graph(graph, inputs)
    from npu import backends

    outputs, _ = backends.run(backends.Model(source, graph=graph), inputs, backend, config=config)
    return outputs


def compare_output(name: str, got, want: np.ndarray) -> str | None:
    """None when ``got`` equals ``want`` bit for bit, else what differs (one line)."""
    if got is None:
        return f"output {name!r} was not produced"
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"output {name!r} has shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        a, b = got.astype(np.int64), want.astype(np.int64)
        diff = a != b
    elif want.dtype.kind == "f" and got.dtype.kind in "fiub":
        a = got.astype(want.dtype)
        b = want
        # Bit-exact: compare the encodings (so -0.0 != 0.0 and NaN payloads count).
        diff = a.view(f"u{a.itemsize}") != b.view(f"u{b.itemsize}")
    else:
        return f"output {name!r} has type {got.dtype}, expected {want.dtype}"
    if not diff.any():
        return None
    index = tuple(int(i) for i in np.argwhere(diff)[0])
    return (f"output {name!r}: {int(diff.sum())} of {diff.size} values differ "
            f"(first at {list(index)}: got {a[index]}, expected {b[index]})")


def run_test(name: str, folder: Path, backend: str, config=None) -> TestResult:
    """Run the conformance test in ``folder`` on ``backend``; never raises for test outcomes."""
    start = time.perf_counter()
    operator = folder.name.split("_")[0].upper()

    def result(verdict: str, reason: str = "") -> TestResult:
        return TestResult(name, operator, verdict, reason, round(time.perf_counter() - start, 3))

    try:
        desc = _read_desc(folder)
        operator = _operator_of(desc, None, folder)
        why = _json_form(desc)
        if why:
            return result(SKIPPED, why)
        negative = bool(desc.get("expected_failure", False))
        inputs = {n: _load_npy(folder / f, "input") for n, f in zip(desc["ifm_name"], desc["ifm_file"])}
        expected = None
        if not negative and desc.get("expected_result_file") is not None:
            expected = [_load_npy(folder / f, "expected result") for f in desc["expected_result_file"]]
        tosa_path = folder / desc["tosa_file"]
        if not tosa_path.is_file():
            raise _BadTest(f"missing graph file {desc['tosa_file']}")
    except _BadTest as e:
        return result(FAILED, f"bad test: {e}")
    except MemoryError:        # its inputs alone exceed the test's memory budget
        return result(FAILED, "crash: out of memory reading the test's files (--memory-limit)")

    from tosa_ir.tosa_fb import read_tosa

    try:
        graph = read_tosa(tosa_path, source=f"{name}/{desc['tosa_file']}")
        operator = _operator_of(desc, graph, folder)
        outputs = _run_backend(graph, inputs, backend, config, str(tosa_path))
    except Unsupported as e:
        return result(UNSUPPORTED, _first_line(e))
    except TosaUnpredictable as e:
        # A failed REQUIRE overrides ERROR_IF ("unpredictable overrides any previous
        # result") and tosa_test_compliance() puts no requirement on an unpredictable graph:
        # whatever the backend does is compliant, so the test passes, saying why.  (The
        # official generator makes such tests: e.g. a CONV2D whose bias near -2**31 makes
        # apply_add_s<int32>(acc, bias) leave int32; its reference model wraps.)
        want = ("rejection: " + (desc.get("expected_failure_desc") or "an ERROR_IF condition")) \
            if negative else "the reference model's recorded output"
        return result(PASSED, f"unpredictable in the spec, so any result is compliant (the suite "
                              f"expects {want}): {_first_line(e)}")
    except InvalidInput as e:
        if negative:
            return result(PASSED, f"rejected: {_first_line(e)}")
        return result(FAILED, f"valid graph rejected: {_first_line(e)}")
    except NpuError as e:
        return result(FAILED, f"{type(e).__name__}: {_first_line(e)}")
    except MemoryError as e:   # past the test's memory budget (npu/guarded_workers.py)
        return result(FAILED, f"crash: out of memory: the test needed more address space than "
                              f"its budget (--memory-limit){_where(e)}")
    except Exception as e:  # a bug in the backend: report it, keep running the others
        return result(FAILED, f"crash: {type(e).__name__}: {_first_line(e)}{_where(e)}")

    if negative:
        want = desc.get("expected_failure_desc") or "an ERROR_IF condition"
        return result(FAILED, f"illegal graph accepted (expected rejection: {want})")
    if expected is None:
        return result(SKIPPED, "no expected result in desc.json (raw generator output: "
                               "convert it to the conformance form); the graph ran")
    inexact = _inexact_modes(desc)
    problems = []
    for out_name, want in zip(desc["ofm_name"], expected):
        if out_name in inexact:
            continue
        problem = compare_output(out_name, outputs.get(out_name), want)
        if problem:
            problems.append(problem)
    if problems:
        return result(FAILED, "; ".join(problems))
    if inexact:
        modes = ", ".join(f"{n}: {m}" for n, m in inexact.items())
        return result(SKIPPED, f"compliance mode not exact ({modes}): needs the official checker")
    return result(PASSED)


def _run_test_args(args: tuple) -> TestResult:
    return run_test(*args)


def _died(item: tuple, died: WorkerDied) -> TestResult:
    """The verdict on a test whose process died (run alone, so it is this test's doing)."""
    name, folder = item[0], item[1]
    return TestResult(name, folder.name.split("_")[0].upper(), FAILED,
                      f"crash: {died.describe()}")


# -- running many ----------------------------------------------------------------------------
class _Progress:
    """A counter on stderr (only on a terminal), redrawn at most ten times a second."""

    def __init__(self, total: int):
        self.total = total
        self.enabled = total > 1 and sys.stderr.isatty()
        self.last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if self.enabled and (now - self.last > 0.1 or done == self.total):
            self.last = now
            print(f"\rconformance: {done}/{self.total}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


def run_tests(tests: list[tuple[str, Path]], backend: str, config=None, jobs: int = 1,
              progress: bool = True, scheduler: str | None = None,
              dask: bool = False, memory: int | None = None) -> list[TestResult]:
    """Run ``tests`` (from :func:`find_tests`) in ``jobs`` processes, or on Dask (``scheduler``
    address, or ``dask``: a local cluster of ``jobs`` workers; npu/dask_runner.py); results in
    test order.  Locally each test may add ``memory`` bytes of address space (None: 80% of
    physical memory shared by the jobs; 0: no limit): past that it fails with MemoryError, and
    a test whose worker process dies fails on its own (npu/guarded_workers.py)."""
    work = [(name, path, backend, config) for name, path in tests]
    bar = _Progress(len(work)) if progress else _Progress(0)
    results: dict[int, TestResult] = {}
    try:
        if scheduler or dask:
            from npu import dask_runner

            for done, (i, result) in enumerate(dask_runner.map_unordered(
                    _run_test_args, work, scheduler=scheduler, dask=True, jobs=max(jobs, 2)), 1):
                results[i] = result
                bar.update(done)
        else:
            budget = default_budget(jobs) if memory is None else memory
            for done, (i, result) in enumerate(map_guarded(_run_test_args, work, jobs, budget), 1):
                results[i] = _died(work[i], result) if isinstance(result, WorkerDied) else result
                bar.update(done)
    finally:
        bar.close()
    return [results[i] for i in range(len(work))]


# -- report ----------------------------------------------------------------------------------
def summary_line(results: list[TestResult]) -> str:
    counts = Counter(r.verdict for r in results)
    line = f"{counts[PASSED]} passed, {counts[FAILED]} failed"
    if counts[UNSUPPORTED]:
        line += f", {counts[UNSUPPORTED]} unsupported"
    if counts[SKIPPED]:
        line += f", {counts[SKIPPED]} skipped"
    return line


def format_report(results: list[TestResult], verbose: bool = False) -> str:
    """The per-operator table, the reasons, and the summary line last."""
    table: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        table[r.operator][r.verdict] += 1
    width = max([len("operator"), len("total")] + [len(op) for op in table])
    head = f"{'operator':<{width}}  " + "  ".join(f"{v:>11}" for v in VERDICTS)
    lines = [head, "-" * len(head)]
    total = Counter()
    for op in sorted(table):
        total.update(table[op])
        lines.append(f"{op:<{width}}  " + "  ".join(f"{table[op][v]:>11}" for v in VERDICTS))
    lines.append("-" * len(head))
    lines.append(f"{'total':<{width}}  " + "  ".join(f"{total[v]:>11}" for v in VERDICTS))

    def listing(verdict: str, title: str) -> None:
        chosen = [r for r in results if r.verdict == verdict]
        if not chosen:
            return
        lines.append("")
        if verbose:
            lines.append(f"{title}:")
            lines.extend(f"  {r.name}: {r.reason}" for r in chosen)
            return
        # Without --verbose: one example reason per operator.
        lines.append(f"{title} (one example per operator; --verbose lists all):")
        first: dict[str, TestResult] = {}
        for r in chosen:
            first.setdefault(r.operator, r)
        for op, r in sorted(first.items()):
            lines.append(f"  {op} ({table[op][verdict]}): {r.reason}")

    listing(UNSUPPORTED, "unsupported")
    listing(SKIPPED, "skipped")
    if verbose:
        listing(FAILED, "failed")
    elif total[FAILED]:
        lines.append("")
        lines.append("failures: --verbose lists them with the reason")
    lines.append(summary_line(results))
    return "\n".join(lines)


def json_report(results: list[TestResult], backend: str, seconds: float) -> dict:
    """Everything :func:`format_report` shows, as data: per-operator counts, every verdict
    and the summary line."""
    table: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        table[r.operator][r.verdict] += 1
    return {
        "backend": backend,
        "summary": summary_line(results),
        "totals": {v: sum(c[v] for c in table.values()) for v in VERDICTS},
        "operators": {op: {v: table[op][v] for v in VERDICTS} for op in sorted(table)},
        "seconds": round(seconds, 1),
        "tests": [asdict(r) for r in results],
    }


# -- command line ----------------------------------------------------------------------------
def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``npu conformance`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "conformance", help="run TOSA conformance test folders on a backend",
        description="Run TOSA conformance tests (folders with desc.json, .tosa and .npy files, "
                    "as tosa_verif_build_tests and the official conformance suite write them) on "
                    "a backend, compare outputs bit-exactly with the expected results and check "
                    "that negative tests are rejected. DIR is a test folder or a folder searched "
                    "recursively for desc.json. Prints a table per operator and, last, "
                    "'N passed, N failed' (then ', N unsupported' and ', N skipped' when some "
                    "were unsupported or not judged). Exit code 1 when a test failed, 2 for an unusable DIR.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="test folder(s) or folder(s) of tests")
    p.add_argument("--backend", choices=BACKENDS, default="ref", help="where to run (default: %(default)s)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="run tests in N processes (default: %(default)s)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="list every failed, unsupported and skipped test with the reason")
    p.add_argument("--config", default="default", metavar="NAME|FILE.json",
                   help="isa/rtl: hardware configuration: 'default' (16x16), 'small' (4x4) or a "
                        "JSON file of NpuConfig fields (default: %(default)s)")
    p.add_argument("--json", metavar="FILE",
                   help="also write every verdict, the per-operator counts and the summary as JSON")
    p.add_argument("--memory-limit", type=float, metavar="GIB",
                   help="address space each test may add, in GiB; a test past it fails with "
                        "MemoryError (default: 80%% of physical memory divided by --jobs; 0: no limit)")
    p.add_argument("--dask", action="store_true",
                   help="run the tests on a local Dask cluster of --jobs workers (at least 2)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the tests on the Dask scheduler at ADDRESS (tcp://host:port); "
                        "its workers must see the test folders at the same paths")
    return p


def run(args) -> int:
    """``npu conformance``: 0 all judged tests passed, 1 some failed (2: bad DIR, raised)."""
    if args.jobs < 1:
        raise InvalidInput(f"--jobs {args.jobs}: must be at least 1")
    tests = find_tests(args.dirs)
    config = None
    if args.backend != "ref":
        config = load_config(args.config)
    start = time.perf_counter()
    memory = None
    if args.memory_limit is not None:
        if args.memory_limit < 0:
            raise InvalidInput(f"--memory-limit {args.memory_limit}: must be 0 (no limit) or more")
        memory = int(args.memory_limit * (1 << 30))
    results = run_tests(tests, args.backend, config=config, jobs=min(args.jobs, len(tests)),
                        scheduler=args.scheduler, dask=args.dask, memory=memory)
    if args.json:
        import json

        from npu.output import write_text

        report = json_report(results, args.backend, time.perf_counter() - start)
        write_text(args.json, json.dumps(report, indent=1) + "\n", "the JSON report")
    print(format_report(results, verbose=args.verbose))
    return 1 if any(r.verdict == FAILED for r in results) else 0

