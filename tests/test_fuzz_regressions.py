"""The fuzzers in `make test`: every committed reproducer in fuzz/corpus/ must now satisfy the
contract (exit 0, or one line and exit 2/3; no traceback, hang or memory blow-up; ref and
isa agreeing), and a short fixed-seed run of every fuzz target finds nothing.  Long
campaigns: `make fuzz` (fuzz/__main__.py), which adds what it finds to the corpus."""
from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.__main__ import CORPUS, campaign, run_one
from fuzz.targets import TARGETS, preload

REPRODUCERS = sorted(p for p in CORPUS.glob("*/*.bin") if p.parent.name in TARGETS)
# Inputs per kind in the short run: a few seconds per kind on a quiet machine.
SHORT_RUN = 12


@pytest.fixture(scope="module", autouse=True)
def _preloaded():
    preload()


def test_the_corpus_is_not_empty():
    assert len(REPRODUCERS) >= 10


@pytest.mark.parametrize("path", REPRODUCERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_reproducer(path: Path):
    verdict = run_one(TARGETS[path.parent.name], path.read_bytes())
    assert verdict.ok, f"{verdict.why}: {verdict.stderr[-2000:]}"


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_short_fixed_seed_run(kind):
    result = campaign(kind, SHORT_RUN, seed=2026, corpus=None, log=lambda *_: None)
    assert not result["findings"], result["findings"]


def test_a_campaign_reports_its_progress():
    """A long campaign says how far it got while it runs (one line per ``progress`` seconds),
    not only at the end: a 10,000-input OpenVINO campaign takes hours on two cores."""
    lines = []
    result = campaign("config", 3, seed=1, corpus=None, log=lines.append, progress=0)
    assert [line.split(" inputs")[0].strip() for line in lines] == ["config: 1 of 3", "config: 2 of 3"]
    assert result["inputs"] == 3


def _spin() -> int:
    while True:
        pass


def _block() -> int:
    import time

    time.sleep(3600)
    return 0


def test_the_contract_stops_a_busy_loop_by_cpu_time_and_a_blocked_input_by_the_clock(monkeypatch):
    from fuzz import contract

    with monkeypatch.context() as m:
        m.setattr(contract, "WALL_FACTOR", 600)     # however loaded the machine: the CPU limit trips
        busy = contract.check(_spin, timeout=1)
    assert not busy.ok and "CPU time" in busy.why
    blocked = contract.check(_block, timeout=0.5)
    assert not blocked.ok and "no answer within 2 s" in blocked.why
    assert contract.check(lambda: 0, timeout=1).ok
