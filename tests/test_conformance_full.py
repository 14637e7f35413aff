"""The full mode of tools/make_conformance_corpus.py (``--full``, ``make conformance-full``):
every test the official generator lists, generated one operator and seed at a time so that a
stopped run resumes where it stopped.

The whole listing (~20,000 tests a seed) is far too big for the test suite; these tests run
the full mode on ADD (40 tests at the two default seeds) and compare it with the selected
corpus the conformance tests use, made by the same generator.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tool_modules import conformance_corpus, load_tool  # noqa: E402

if importlib.util.find_spec("tosa_reference_model") is None:  # pragma: no cover
    pytest.skip("tosa-tools (the official TOSA tools, a test extra) is not installed",
                allow_module_level=True)


def _tests(folder: Path) -> dict[str, bool]:
    """Test folder name -> whether it is a negative test."""
    return {d.parent.name: json.loads(d.read_text())["expected_failure"]
            for d in folder.rglob("desc.json")}


@pytest.fixture(scope="module")
def full_add(tmp_path_factory) -> tuple[Path, list[str]]:
    tool = load_tool("make_conformance_corpus")
    out = tmp_path_factory.mktemp("full") / "corpus"
    lines: list[str] = []
    tool.generate_full(tool.CorpusOptions(ops="^add$"), out, jobs=1, log=lines.append)
    return out, lines


def test_full_holds_the_selection_and_more(full_add):
    """Every test of the selected corpus (same generator, same seeds and names) is in the
    full one, which has more positive tests than the selection keeps."""
    out, _ = full_add
    selected = _tests(conformance_corpus(ops="^(add|negate)$", max_per_op=2) / "add")
    full = _tests(out / "add")
    assert selected and set(selected) <= set(full)
    assert any(name.endswith("_seed7") for name in full)
    assert sum(not neg for neg in full.values()) > sum(not neg for neg in selected.values())
    assert sum(full.values()) >= sum(selected.values())


def test_full_manifest_counts_the_folders(full_add):
    out, lines = full_add
    manifest = json.loads((out / "corpus.json").read_text())
    full = _tests(out / "add")
    assert manifest["counts"] == {"add": {"positive": sum(not n for n in full.values()),
                                          "negative": sum(full.values())}}
    assert manifest["tests"] == len(full)
    assert sum(c["add"]["positive"] + c["add"]["negative"]
               for c in manifest["counts_per_seed"].values()) == len(full)
    # The other operators are still to do, and the manifest says so.
    assert manifest["complete"] is False
    assert "negate seed 7" in manifest["missing"] and not any("add " in m for m in manifest["missing"])
    assert len(lines) == 2 and all(" s a test)" in line for line in lines)


def test_full_resumes(full_add, tmp_path):
    """A second run redoes nothing; a chunk stopped half-way (no marker, a partial folder
    left) is generated again, whole, and the partial folder goes."""
    tool = load_tool("make_conformance_corpus")
    src, _ = full_add
    out = tmp_path / "corpus"
    import shutil

    shutil.copytree(src, out)
    before = _tests(out / "add")
    lines: list[str] = []
    tool.generate_full(tool.CorpusOptions(ops="^add$"), out, jobs=1, log=lines.append)
    assert lines == ["[1/2] add seed 42: done before", "[2/2] add seed 7: done before"]

    (out / "chunks" / "add.seed7.json").unlink()
    seed7 = sorted(n for n in before if n.endswith("_seed7"))
    shutil.rmtree(out / "add" / seed7[0])            # stopped while moving the tests
    (out / "partial" / "add.seed7" / "add").mkdir(parents=True)
    lines.clear()
    tool.generate_full(tool.CorpusOptions(ops="^add$"), out, jobs=1, log=lines.append)
    assert lines[0] == "[1/2] add seed 42: done before" and lines[1].startswith("[2/2] add seed 7: ")
    assert _tests(out / "add") == before
    assert not (out / "partial").exists()


def test_listing_does_not_depend_on_earlier_listings(tmp_path):
    """The generator edits its class-level operator list while listing (it drops an
    operator's special-data tests once listed); two listings in one process must still
    agree (before: the second listing of ADD lacked its special tests, 19 tests not 21)."""
    tool = load_tool("make_conformance_corpus")
    options = tool.CorpusOptions(ops="^add$", full=True)
    listings = []
    for k in range(2):
        ttg, args = tool._make_generator(options, tmp_path / str(k), 7)
        tests, _, _ = tool.select_tests(ttg, args, options, 7)
        listings.append(sorted(map(str, tests)))
    assert listings[0] and listings[0] == listings[1]


def test_listing_repeats_are_generated_once_and_counted(tmp_path):
    """The generator lists some ERROR_IF tests twice under one name (random bad parameters
    drawn twice): the corpus has each name once and reports the repeats, which is why the
    listing's counts exceed the tests written (PAD at seed 7: 48 repeats)."""
    tool = load_tool("make_conformance_corpus")
    options = tool.CorpusOptions(ops="^pad$", full=True)
    ttg, args = tool._make_generator(options, tmp_path / "a", 7)
    tests, _, duplicates = tool.select_tests(ttg, args, options, 7)
    # The generator's listing, every entry kept (a fresh generator).
    ttg, args = tool._make_generator(options, tmp_path / "b", 7)
    listed = [str(test) for _, _, test in tool.listing(ttg, args, options)]
    names = sorted(map(str, tests))
    assert names == sorted(set(listed))
    assert duplicates == {"pad": len(listed) - len(set(listed))} and duplicates["pad"] > 0
