"""Build a small TOSA conformance corpus with the official tools (tosa-tools).

The corpus is what ``npu conformance`` runs: one folder per test in the official layout
(``desc.json`` + ``.tosa`` + ``.npy``), with the expected results computed by the official
reference model and recorded as the conformance suite records them
(``"expected_result_file": ["Conformance-<ofm_name>.npy", ...]``, ``ofm_file`` without the
``ref-`` prefix).

How it is made:

1. The official test generator (``tosa_verif_build_tests``'s engine, the ``generator``
   package of tosa-tools) lists every PRO-INT test it can make for TOSA 1.0 and the chosen
   extensions, for the element types the official conformance configuration
   (``cts-config_v1.0.json``) tests each operator with in that version, profile and those
   extensions.  Operators and types that configuration marks as newer than TOSA 1.0
   (``from_version``) are left out.
2. A deterministic selection (seeded) keeps, per operator, at most ``--max-per-op`` positive
   tests spread over element types and ranks (including the generator's "special" full-range
   tests), and ``--negatives-per-condition`` tests for every ERROR_IF condition the generator
   has for the operator.  Selecting before generating keeps the time small: generating all
   ~21000 tests takes tens of minutes.
3. The selected tests are generated (same code as ``tosa_verif_build_tests``), then each is
   run on the official reference model CLI (``tosa_reference_model --test_desc``, level 8K,
   ``TOSA_MODEL_NO_BACKTRACE=1``), and converted with tosa-tools' own
   ``convert2conformance.update_desc_json`` (binary output: ``.tosa`` and ``.npy`` kept).
   A test whose reference-model outcome contradicts its ``expected_failure`` flag (a positive
   test the model rejects, a negative test it runs) is left out and listed in the manifest.

Tests land in ``OUT/<operator>/<test name>/``.  ``OUT/corpus.json`` (options, tosa-tools
version, per-operator counts and element types, left-out tests with reasons, timings, size)
is written last: its presence means the corpus is whole.  With the defaults (PRO-INT with
EXT-INT16, EXT-DOUBLEROUND, EXT-CONTROLFLOW and EXT-INT4; seeds 42 and 7, the second seed's
tests named ``<test>_seed7``; 8 positive tests per operator and seed, one negative test per
ERROR_IF condition) that is 1410 tests of 55 operators, ~260 MB, made in about twice the time
of one seed (most of it the generator and the reference model).

Full mode (``--full``, ``make conformance-full``): no selection, every positive and negative
test the generator lists for the same version, profile, extensions and element types
(~20,000 a seed: 8,615 positive and 11,731 negative at seed 42, 8,385 and 11,892 at seed 7;
most of them ERROR_IF tests and the convolutions' and pools' parameter grids).  That takes
hours on one core, so it is made one operator and seed at a time: each chunk is generated
apart, moved into ``OUT/<operator>/`` and recorded in ``OUT/chunks/<operator>.seed<S>.json``;
a stopped run resumes at the first chunk without a record, and ``--ops`` runs add to one
folder.  ``OUT/corpus.json`` then lists the chunks done and those still missing.  The
generator draws every test's shapes, arguments and data from hashes of the seed and the
test's identity, so a chunk holds exactly the tests the whole listing has for its operator.

This is a fixture builder (tosa-tools is a test extra), never imported by product code.

Usage::

    python tools/make_conformance_corpus.py --out build/conformance/mine [--ops REGEX]
        [--max-per-op N] [--seeds S [S ...]] [--jobs J]
    python tools/make_conformance_corpus.py --full --out build/conformance/full [--ops REGEX]

:func:`ensure_corpus` gives tests a cached corpus under ``build/conformance/<key>/``, where
the key hashes the options, the tosa-tools version and this file.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

# The reference model attaches gdb to itself on every rejected graph unless told not to.
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")

TOSA_VERSION = "1.0"
DEFAULT_DTYPES = ("int4", "int8", "int16", "int32", "int48", "bool")
# Integer extensions of PRO-INT that are exactly specified (INEXACT_ROUND is not: its
# results are checked with a tolerance, so it has no place in a bit-exact corpus; VARIABLE
# and the shape/int64 extensions are 1.1).  INT4: int4 weights of the convolutions (CONST
# and IDENTITY of int4 too).
DEFAULT_EXTENSIONS = ("tosa-ext-int16", "tosa-ext-doubleround", "tosa-ext-controlflow", "tosa-ext-int4")
DEFAULT_MAX_PER_OP = 8
# Two seeds: the second draws other tests (parameters, shapes) and other data for the same
# selection rules, so the corpus is not tuned to one seed's draws.
DEFAULT_SEEDS = (42, 7)
# Reference model exit codes (runner/tosa_refmodel_sut_run.py: TosaRefReturnCode).
REF_STATUS = {0: "VALID", 1: "UNPREDICTABLE", 2: "ERROR"}
REF_TIMEOUT_S = 120


@dataclass(frozen=True)
class CorpusOptions:
    """What goes into the corpus; every field is part of the cache key."""

    ops: str = ""                       # regular expression on lower-case operator names
    full: bool = False                  # every test the generator lists (no selection)
    max_per_op: int = DEFAULT_MAX_PER_OP
    negatives_per_condition: int = 1
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    tosa_version: str = TOSA_VERSION


@dataclass
class Report:
    """What was generated: written as corpus.json in the corpus folder."""

    options: dict
    tosa_tools: str
    counts: dict = field(default_factory=dict)      # operator -> {"positive": n, "negative": n}
    dtypes: dict = field(default_factory=dict)      # operator -> element types drawn from
    left_out: list = field(default_factory=list)    # [{"test", "reason"}]
    duplicates: dict = field(default_factory=dict)  # operator -> listed tests repeating a name
    seconds: dict = field(default_factory=dict)
    bytes: int = 0


# -- locating the official tools -------------------------------------------------------------
def tosa_tools_version() -> str:
    return importlib.metadata.version("tosa-tools")


def generate_lib_path() -> Path:
    """``libtosa_reference_generate_lib.so`` of the installed tosa-tools."""
    spec = importlib.util.find_spec("tosa_reference_model")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("make_conformance_corpus: tosa-tools is not installed "
                         "(pip install tosa-tools)")
    for folder in spec.submodule_search_locations:
        lib = Path(folder) / "libtosa_reference_generate_lib.so"
        if lib.is_file():
            return lib
    raise SystemExit("make_conformance_corpus: libtosa_reference_generate_lib.so not found "
                     f"in {list(spec.submodule_search_locations)}")


def reference_model_path() -> Path:
    here = Path(sys.executable).parent / "tosa_reference_model"
    if here.is_file():
        return here
    found = shutil.which("tosa_reference_model")
    if not found:
        raise SystemExit("make_conformance_corpus: tosa_reference_model not found")
    return Path(found)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("-")[0].split(".")[:3])


def _target_dtypes(generator_args: list[list[str]]) -> set[str] | None:
    """Element types a CTS generation group asks for (None: the group does not restrict)."""
    found: set[str] = set()
    for argv in generator_args:
        if "--target-dtype" not in argv:
            return None
        i = argv.index("--target-dtype") + 1
        while i < len(argv) and not argv[i].startswith("--"):
            found.add(argv[i])
            i += 1
    return found


def _cts_config() -> dict:
    """The official conformance test suite configuration shipped with tosa-tools."""
    spec = importlib.util.find_spec("conformance")
    config = Path(spec.submodule_search_locations[0]) / "cts-config_v1.0.json"
    return json.loads(config.read_text())


def official_dtypes(options: CorpusOptions) -> dict[str, set[str]]:
    """Operator -> element types the official CTS config tests for the chosen version,
    profile (PRO-INT) and extensions; operators it has no such group for are absent.

    The config (conformance/cts-config_v1.0.json) is the official statement of which
    operator/type pairs exist in which TOSA version: the generator alone would also make
    newer ones (e.g. bool GATHER, a TOSA 1.1 addition).
    """
    data = _cts_config()
    chosen = {"tosa-pro-int", *options.extensions}
    target = _version(options.tosa_version + ".0" * (2 - options.tosa_version.count(".")))
    out: dict[str, set[str]] = {}
    for name, entry in data.items():
        if name.startswith("$") or _version(entry.get("from_version", "0.0.0")) > target:
            continue
        if "to_version" in entry and _version(entry["to_version"]) < target:
            continue
        for group in entry["generation"].values():
            if _version(group.get("from_version", "0.0.0")) > target:
                continue
            if not set(group.get("supports_all") or []) <= chosen:
                continue
            if group.get("supports_any") and not chosen & set(group["supports_any"]):
                continue
            dtypes = _target_dtypes(group["generator_args"])
            wanted = set(options.dtypes) if dtypes is None else dtypes & set(options.dtypes)
            if wanted:
                out.setdefault(name, set()).update(wanted)
    return out


# -- selection -------------------------------------------------------------------------------
def _generator_args(options: CorpusOptions, raw_dir: Path, seed: int):
    from generator.tosa_verif_build_tests import parseArgs

    return parseArgs([
        "-o", str(raw_dir), "--seed", str(seed),
        "--profile", "tosa-pro-int", "--extension", *options.extensions,
        "--tosa-version", options.tosa_version,
        "--target-dtype", *options.dtypes,
        "--generate-lib-path", str(generate_lib_path()),
    ])


_DATA_GEN: dict | None = None


def _make_generator(options: CorpusOptions, raw_dir: Path, seed: int):
    """A generator whose operators list every test a fresh process lists.

    While listing, the generator replaces an operator's ``data_gen`` entry in
    ``TOSA_OP_LIST`` (a class attribute) by one without the special-data generator once it
    has listed that operator's special (full-range) tests, to list them once per generator;
    the change outlives the generator, so a second listing in the same process lacked them
    (seed 7 of ADD: 4 positive tests instead of the 6 a fresh process lists).  The entries
    as the first generator saw them are put back in every later one.
    """
    from generator.tosa_test_gen import TosaTestGen
    from generator.tosa_verif_build_tests import _get_tosa_version

    global _DATA_GEN
    args = _generator_args(options, raw_dir, seed)
    ttg = TosaTestGen(args, _get_tosa_version(args.tosa_version_str))
    if _DATA_GEN is None:
        _DATA_GEN = {op: entry["data_gen"] for op, entry in ttg.TOSA_OP_LIST.items()
                     if isinstance(entry, dict) and "data_gen" in entry}
    else:
        for op, data_gen in _DATA_GEN.items():
            if op in ttg.TOSA_OP_LIST:
                ttg.TOSA_OP_LIST[op]["data_gen"] = data_gen
    return ttg, args


def _spread(groups: dict, limit: int, rng: random.Random | None) -> list:
    """Up to ``limit`` items taken round-robin over ``groups``.

    With ``rng`` the groups and the items in each are shuffled first (after sorting, so the
    result depends only on the seed); without, key order and the items' order are kept.
    """
    queues = []
    for key in sorted(groups, key=str):
        items = list(groups[key])
        if rng is not None:
            items.sort(key=str)
            rng.shuffle(items)
        queues.append(items)
    if rng is not None:
        rng.shuffle(queues)
    picked = []
    while len(picked) < limit and any(queues):
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return picked


def official_permutes(operator: str) -> list[str]:
    """Test parameters the official CTS selection varies for ``operator`` (PRO-INT criteria
    if it has them, else its default)."""
    criteria = _cts_config().get(operator, {}).get("selection", {})
    chosen = criteria.get("tosa-pro-int") or criteria.get("default") or {}
    return list(chosen.get("permutes", ["rank", "type"]))


def _arg(test, param: str):
    try:
        return test.getArg(param)
    except (AssertionError, KeyError, IndexError):
        return None


def listing(ttg, args, options: CorpusOptions):
    """Every (operator, "positive"|"negative", TosaTestSelect) the generator lists for the
    operators and element types of ``options``, in its order, repeats included."""
    from generator.tosa_test_select import TosaTestSelect
    from generator.tosa_verif_build_tests import dtype_str_type

    allowed = official_dtypes(options)
    pattern = re.compile(options.ops) if options.ops else None
    for entry in ttg.TOSA_OP_LIST:
        operator = ttg.getOperatorNameStr(entry)
        if operator not in allowed:
            continue  # not in this TOSA version/profile, or unknown to the official suite
        if pattern is not None and not pattern.search(operator):
            continue
        dtypes = [dtype_str_type(d) for d in sorted(allowed[operator])]
        for kind in ("positive", "negative"):
            for test_args in ttg.genOpTestList(entry, shapeFilter=args.target_shapes,
                                               rankFilter=args.target_ranks,
                                               dtypeFilter=dtypes, testType=kind):
                test = TosaTestSelect(test_args)
                if test.isSupported(args.profile, args.extension):
                    yield operator, kind, test


def select_tests(ttg, args, options: CorpusOptions, seed: int) -> tuple[list, dict[str, list[str]], dict[str, int]]:
    """The tests to generate (generator TosaTestSelect objects), per operator covered the
    element types they were drawn from, and per operator how many listed tests repeat the
    name of an earlier one.

    The generator's listing repeats names: its ERROR_IF tests draw their bad parameters at
    random, and two draws can give the same test (avg_pool2d at seed 7 lists 2,084
    negative tests under 1,892 names).  A test is a folder named after it, so the
    official tool writes such a test once, over itself; here it is generated once and the
    repeats are counted (``duplicates`` in the corpus report)."""
    allowed = official_dtypes(options)
    by_op: dict[str, dict[str, list]] = defaultdict(lambda: {"positive": [], "negative": []})
    for operator, kind, test in listing(ttg, args, options):
        by_op[operator][kind].append(test)

    chosen = []
    for operator in sorted(by_op):
        if options.full:
            chosen += by_op[operator]["positive"] + by_op[operator]["negative"]
            continue
        rng = random.Random(f"{seed}:{operator}")
        # Every element type first, then within a type the parameters the official
        # selection permutes (rank, rounding mode, kernel, ...) and special-data tests.
        permutes = [p for p in official_permutes(operator) if p != "type"]
        by_dtype: dict = defaultdict(lambda: defaultdict(list))
        for test in by_op[operator]["positive"]:
            key = tuple(_arg(test, p) for p in permutes) + (test.isSpecialTest(),)
            by_dtype[str(test.dtype)][key].append(test)
        ordered = {dtype: _spread(sub, sum(map(len, sub.values())), rng)
                   for dtype, sub in by_dtype.items()}
        chosen += _spread(ordered, options.max_per_op, None)
        negatives: dict = defaultdict(list)
        for test in by_op[operator]["negative"]:
            negatives[test.error].append(test)
        for error in sorted(negatives):
            chosen += _spread({error: negatives[error]}, options.negatives_per_condition, rng)
    unique = {str(t): t for t in chosen}
    duplicates: dict[str, int] = defaultdict(int)
    seen: set[str] = set()
    for t in chosen:
        if str(t) in seen:
            duplicates[ttg.getOperatorNameStr(t.opName)] += 1
        seen.add(str(t))
    return ([unique[k] for k in sorted(unique)], {op: sorted(allowed[op]) for op in sorted(by_op)},
            dict(sorted(duplicates.items())))


# -- generation (forked workers share the generator built in the parent) ----------------------
_WORK: dict = {}


def _serialize_chunk(indices: list[int]) -> list[tuple[str, str, bool]]:
    """(name, generator entry, written) of each test.  The generator declines to write an
    ERROR_IF test whose drawn shapes do not break the condition after all (it logs
    "Invalid ERROR_IF test created" and returns False), as tosa_verif_build_tests does."""
    ttg, tests = _WORK["ttg"], _WORK["tests"]
    out = []
    for i in indices:
        test = tests[i]
        with contextlib.redirect_stdout(sys.stderr):
            written = ttg.serializeTest(test) is not False
        out.append((str(test), test.opName, written))
    return out


def _run_reference(model: Path, test_dir: Path) -> tuple[str, str]:
    """Run the official reference model on one raw test; (status, message tail)."""
    try:
        proc = subprocess.run([str(model), "--tosa_level", "EIGHTK", "--test_desc",
                               str(test_dir / "desc.json")],
                              capture_output=True, text=True, timeout=REF_TIMEOUT_S,
                              env={**os.environ, "TOSA_MODEL_NO_BACKTRACE": "1"})
    except subprocess.TimeoutExpired:
        return "TIMEOUT", f"reference model took more than {REF_TIMEOUT_S} s"
    status = REF_STATUS.get(proc.returncode, f"exit code {proc.returncode}")
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines()
             if ln.strip() and not ln.startswith("WARNING: Different TOSA spec")]
    return status, " | ".join(lines[-3:])


def _convert(raw_test: Path, out_test: Path) -> None:
    """Official conversion (binary output) of one test that ran on the reference model."""
    from convert2conformance.convert2conformance import OUTPUT_TYPE_BINARY, update_desc_json

    desc = json.loads((raw_test / "desc.json").read_text())
    out_test.mkdir(parents=True)
    shutil.copy(raw_test / desc["tosa_file"], out_test / desc["tosa_file"])
    for name in desc["ifm_file"]:
        shutil.copy(raw_test / name, out_test / Path(name).name)
    desc["ifm_file"] = [Path(n).name for n in desc["ifm_file"]]
    desc = update_desc_json(OUTPUT_TYPE_BINARY, raw_test, desc, output_dir=out_test,
                            record_result=True)
    if desc is None:
        raise RuntimeError(f"{raw_test.name}: conversion failed (reference output missing)")
    with open(out_test / "desc.json", "w", newline="\n") as fd:
        json.dump(desc, fd, indent=2)


def generate(options: CorpusOptions, out: Path, jobs: int = 2, log=print) -> Report:
    """Generate the corpus into ``out`` (which must not exist)."""
    import logging

    out = Path(out)
    if out.exists():
        raise SystemExit(f"make_conformance_corpus: {out} already exists")
    report = Report(options=asdict(options), tosa_tools=tosa_tools_version())
    model = reference_model_path()
    logging.getLogger("tosa_verif_build_tests").setLevel(logging.ERROR)
    out_tmp = out.with_name(out.name + f".partial-{os.getpid()}")
    shutil.rmtree(out_tmp, ignore_errors=True)
    counts: dict = defaultdict(lambda: {"positive": 0, "negative": 0})
    for k, seed in enumerate(options.seeds):
        suffix = "" if k == 0 else f"_seed{seed}"
        _generate_seed(options, seed, suffix, out_tmp, counts, report, model, jobs, log)
    report.counts = {op: counts[op] for op in sorted(counts)}
    report.bytes = sum(p.stat().st_size for p in out_tmp.rglob("*") if p.is_file())
    (out_tmp / "corpus.json").write_text(json.dumps(asdict(report), indent=1) + "\n")
    out_tmp.rename(out)
    kept = sum(c["positive"] + c["negative"] for c in report.counts.values())
    log(f"wrote {kept} tests to {out} ({report.bytes / 1e6:.1f} MB); "
        f"{len(report.left_out)} left out (see corpus.json), "
        f"{sum(report.duplicates.values())} listed twice under one name")
    return report


def _generate_seed(options: CorpusOptions, seed: int, suffix: str, out_tmp: Path, counts: dict,
                   report: Report, model: Path, jobs: int, log) -> None:
    """Select, generate, run and convert the tests of one seed into ``out_tmp`` (folder names
    ``<test><suffix>``), adding to ``counts`` and ``report``."""
    seconds: dict = {}
    with tempfile.TemporaryDirectory(prefix="tosa-corpus-raw-") as tmp:
        raw = Path(tmp)
        start = time.perf_counter()
        ttg, args = _make_generator(options, raw, seed)
        tests, dtypes, duplicates = select_tests(ttg, args, options, seed)
        for op, types in dtypes.items():
            report.dtypes[op] = sorted(set(report.dtypes.get(op, [])) | set(types))
        for op, n in duplicates.items():
            report.duplicates[op] = report.duplicates.get(op, 0) + n
        seconds["select"] = round(time.perf_counter() - start, 2)
        log(f"seed {seed}: selected {len(tests)} tests of {len(dtypes)} operators "
            f"({seconds['select']} s)")

        start = time.perf_counter()
        _WORK.update(ttg=ttg, tests=tests)
        chunks = [list(range(i, len(tests), jobs)) for i in range(jobs)]
        import multiprocessing

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            made = [item for part in pool.map(_serialize_chunk, chunks) for item in part]
        _WORK.clear()
        seconds["generate"] = round(time.perf_counter() - start, 2)
        log(f"seed {seed}: generated {sum(w for _, _, w in made)} of {len(made)} tests "
            f"({seconds['generate']} s)")

        start = time.perf_counter()
        folders = {name: raw / entry / name for name, entry, written in made if written}
        for name, _, written in made:
            if not written:
                report.left_out.append({
                    "test": name + suffix,
                    "reason": "the generator did not write it (Invalid ERROR_IF test created: "
                              "the drawn shapes do not break the condition)"})
        with ThreadPoolExecutor(jobs) as pool:
            statuses = dict(zip(folders, pool.map(lambda d: _run_reference(model, d),
                                                  folders.values())))
        seconds["reference_model"] = round(time.perf_counter() - start, 2)

        start = time.perf_counter()
        meta = {str(t): t for t in tests}
        for name, folder in folders.items():
            desc = json.loads((folder / "desc.json").read_text())
            negative = bool(desc.get("expected_failure", False))
            status, message = statuses[name]
            wanted = "ERROR" if negative else "VALID"
            if status != wanted:
                report.left_out.append({
                    "test": name + suffix,
                    "reason": f"reference model result {status}, the test expects {wanted}"
                              + (f": {message}" if message else "")})
                continue
            operator = ttg.getOperatorNameStr(meta[name].opName)
            _convert(folder, out_tmp / operator / (name + suffix))
            counts[operator]["negative" if negative else "positive"] += 1
        seconds["convert"] = round(time.perf_counter() - start, 2)
    for key, value in seconds.items():
        report.seconds[key] = round(report.seconds.get(key, 0) + value, 2)


# -- full mode: every listed test, in resumable chunks of one operator and seed ---------------
def full_operators(options: CorpusOptions) -> list[str]:
    """Operators the full corpus has (the generator's, in the official selection), matching
    ``options.ops``."""
    allowed = official_dtypes(options)
    pattern = re.compile(options.ops) if options.ops else None
    with tempfile.TemporaryDirectory(prefix="tosa-corpus-ops-") as tmp:
        ttg, _ = _make_generator(options, Path(tmp), options.seeds[0])
        names = {ttg.getOperatorNameStr(entry) for entry in ttg.TOSA_OP_LIST}
    return sorted(op for op in names & set(allowed) if pattern is None or pattern.search(op))


def _chunk_marker(out: Path, operator: str, seed: int) -> Path:
    return out / "chunks" / f"{operator}.seed{seed}.json"


def generate_full(options: CorpusOptions, out: Path, jobs: int = 1, log=print) -> dict:
    """Generate every test the generator lists (``options.full``) into ``out``, one operator
    and seed at a time.

    A chunk's tests are generated into ``out/partial/`` and moved to ``out/<operator>/``;
    ``out/chunks/<operator>.seed<S>.json`` (its counts, left-out tests and timings) is written
    last, so a stopped run resumes at the first chunk without one and never leaves half a
    chunk behind.  ``out`` may already hold chunks of other operators (``--ops`` runs add to
    one folder).  ``out/corpus.json`` is rewritten at the end of every run: the chunks done,
    the ones still missing (``complete`` false while any is), counts and timings.
    """
    out = Path(out)
    (out / "chunks").mkdir(parents=True, exist_ok=True)
    wanted = replace(options, full=True)
    operators = full_operators(wanted)
    todo = [(op, k, seed) for op in operators for k, seed in enumerate(wanted.seeds)]
    for n, (operator, k, seed) in enumerate(todo, 1):
        marker = _chunk_marker(out, operator, seed)
        if marker.is_file():
            log(f"[{n}/{len(todo)}] {operator} seed {seed}: done before")
            continue
        suffix = "" if k == 0 else f"_seed{seed}"
        partial = out / "partial" / f"{operator}.seed{seed}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(exist_ok=True)
        start = time.perf_counter()
        chunk = replace(wanted, ops=f"^{re.escape(operator)}$", seeds=(seed,))
        report = generate(chunk, partial, jobs=jobs, log=lambda *a: None)
        target = out / operator
        target.mkdir(exist_ok=True)
        for test in sorted((partial / operator).iterdir()) if (partial / operator).is_dir() else []:
            dest = target / (test.name + suffix)
            shutil.rmtree(dest, ignore_errors=True)   # from a chunk stopped while moving
            test.rename(dest)
        shutil.rmtree(partial)
        seconds = round(time.perf_counter() - start, 1)
        counts = report.counts.get(operator, {"positive": 0, "negative": 0})
        made = counts["positive"] + counts["negative"]
        record = {"operator": operator, "seed": seed, "suffix": suffix, "counts": counts,
                  "dtypes": report.dtypes.get(operator, []),
                  "left_out": [{**e, "test": e["test"] + suffix} for e in report.left_out],
                  "duplicates": report.duplicates.get(operator, 0),
                  "seconds": {**report.seconds, "total": seconds}, "bytes": report.bytes,
                  "tosa_tools": report.tosa_tools}
        tmp_marker = marker.with_suffix(".tmp")
        tmp_marker.write_text(json.dumps(record, indent=1) + "\n")
        tmp_marker.rename(marker)
        per_test = f", {seconds / made:.2f} s a test" if made else ""
        log(f"[{n}/{len(todo)}] {operator} seed {seed}: {counts['positive']} positive, "
            f"{counts['negative']} negative, {len(record['left_out'])} left out, "
            f"{record['duplicates']} listed twice under one name ({seconds} s{per_test})")
    shutil.rmtree(out / "partial", ignore_errors=True)
    return write_full_manifest(out, replace(wanted, ops=""))


def write_full_manifest(out: Path, options: CorpusOptions) -> dict:
    """``out/corpus.json`` from the chunk markers: what the full corpus holds so far."""
    chunks = [json.loads(p.read_text()) for p in sorted((out / "chunks").glob("*.json"))]
    have = {(c["operator"], c["seed"]) for c in chunks}
    missing = [f"{op} seed {seed}" for op in full_operators(options) for seed in options.seeds
               if (op, seed) not in have]
    counts: dict = defaultdict(lambda: {"positive": 0, "negative": 0})
    per_seed: dict = defaultdict(dict)
    seconds: dict = defaultdict(float)
    for c in chunks:
        for kind in ("positive", "negative"):
            counts[c["operator"]][kind] += c["counts"][kind]
        per_seed[str(c["seed"])][c["operator"]] = c["counts"]
        for key, value in c["seconds"].items():
            seconds[key] += value
    manifest = {
        "options": asdict(options), "tosa_tools": tosa_tools_version(),
        "complete": not missing, "missing": missing,
        "counts": {op: counts[op] for op in sorted(counts)},
        "counts_per_seed": {s: dict(sorted(v.items())) for s, v in sorted(per_seed.items())},
        "tests": sum(c["positive"] + c["negative"] for c in counts.values()),
        "left_out": [e for c in chunks for e in c["left_out"]],
        "duplicates": sum(c.get("duplicates", 0) for c in chunks),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "bytes": sum(c["bytes"] for c in chunks),
    }
    (out / "corpus.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


# -- cache for the test suite ---------------------------------------------------------------
def corpus_key(options: CorpusOptions) -> str:
    """Hash of the options, the tosa-tools version and this script."""
    h = hashlib.sha256()
    h.update(json.dumps(asdict(options), sort_keys=True).encode())
    h.update(tosa_tools_version().encode())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:16]


def ensure_corpus(root: Path, options: CorpusOptions = CorpusOptions(), jobs: int = 2,
                  log=print) -> Path:
    """The corpus for ``options`` under ``root/<key>/``, generated once (file-locked)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    target = root / corpus_key(options)
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # another pytest worker may be generating it
        if not (target / "corpus.json").is_file():
            shutil.rmtree(target, ignore_errors=True)
            generate(options, target, jobs=jobs, log=log)
    return target


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="make_conformance_corpus",
        description="Generate a TOSA 1.0 PRO-INT conformance corpus with expected results "
                    "from the official reference model.")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output folder (must not exist; with --full it may: chunks done are kept)")
    p.add_argument("--full", action="store_true",
                   help="every positive and negative test the generator lists (no selection), "
                        "generated one operator and seed at a time; a stopped run resumes")
    p.add_argument("--ops", default="", metavar="REGEX",
                   help="only operators whose lower-case name matches (re.search)")
    p.add_argument("--max-per-op", type=int, default=DEFAULT_MAX_PER_OP, metavar="N",
                   help="positive tests per operator (default: %(default)s)")
    p.add_argument("--negatives-per-condition", type=int, default=1, metavar="N",
                   help="negative tests per ERROR_IF condition of each operator "
                        "(default: %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS),
                   help="generator and selection seeds: the corpus is the union, tests of "
                        "every seed after the first named <test>_seed<S> (default: %(default)s)")
    p.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES),
                   help="element types, narrowed per operator to those the official CTS config tests "
                        "(default: %(default)s)")
    p.add_argument("--extensions", nargs="+", default=list(DEFAULT_EXTENSIONS),
                   help="PRO-INT extensions (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=2, help="parallel workers (default: 2)")
    a = p.parse_args(argv)
    options = CorpusOptions(ops=a.ops, full=a.full, max_per_op=a.max_per_op,
                            negatives_per_condition=a.negatives_per_condition, seeds=tuple(a.seeds),
                            dtypes=tuple(a.dtypes), extensions=tuple(a.extensions))
    start = time.perf_counter()
    if a.full:
        manifest = generate_full(options, Path(a.out), jobs=max(1, a.jobs),
                                 log=lambda text: print(text, flush=True))
        print(f"{a.out}: {manifest['tests']} tests, {len(manifest['missing'])} operator/seed "
              f"chunks still to generate")
    else:
        generate(options, Path(a.out), jobs=max(1, a.jobs))
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
