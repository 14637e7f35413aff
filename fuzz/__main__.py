"""Fuzz campaigns: ``python -m fuzz [--kinds tosa,npz,...] [--count N] [--seed S]``.

For each kind (fuzz/targets.py) it mutates the seeds ``--count`` times with a
``random.Random(seed)`` stream, runs every mutant in a limited child (fuzz/contract.py) and
prints one summary line per kind: inputs, seconds, how many succeeded / were refused with
exit 2 / 3, and findings.  Every finding is written to the regression corpus
(``fuzz/corpus/<kind>/<hash>.bin``, with the reason beside it in ``.txt``), which
tests/test_fuzz_regressions.py replays in ``make test``.  Exit code 1 if anything was found.
"""
from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fuzz import contract
from fuzz.targets import TARGETS, preload

CORPUS = Path(__file__).resolve().parent / "corpus"


def run_one(target, data: bytes, timeout: float = contract.TIME_LIMIT) -> contract.Verdict:
    """The verdict on one input (files written to a fresh temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="npu-fuzz-") as tmp:
        arg = target.write(data, Path(tmp))
        return contract.check(target.run, arg, timeout=timeout)


def save(kind: str, data: bytes, why: str, corpus: Path = CORPUS) -> Path:
    folder = corpus / kind
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    path.with_suffix(".txt").write_text(why + "\n")
    return path


PROGRESS_SECONDS = 60      # a campaign of 10,000 slow inputs runs for hours: say how far it got


def _say(line: str) -> None:
    print(line, flush=True)     # seen as it happens, also when stdout is a file


def campaign(kind: str, count: int, seed: int, corpus: Path | None = CORPUS, log=_say,
             progress: float = PROGRESS_SECONDS) -> dict:
    """Run ``count`` mutants of ``kind``; returns the counts (and saves findings to ``corpus``).
    Every ``progress`` seconds ``log`` gets a line with the inputs run so far and their outcomes."""
    target = TARGETS[kind]
    preload()
    rng = random.Random(f"{kind}:{seed}")
    seeds = target.seeds()
    outcomes: Counter = Counter()
    findings = []
    start = time.perf_counter()
    shown = start
    for i in range(count):
        now = time.perf_counter()
        if i and now - shown >= progress:
            shown = now
            log(f"  {kind}: {i} of {count} inputs in {now - start:.0f} s, outcomes {dict(outcomes)}, "
                f"{len(findings)} findings")
        data = target.mutant(rng.choice(seeds), rng)
        verdict = run_one(target, data)
        outcomes["exit %s" % verdict.code if verdict.ok else "finding"] += 1
        if not verdict.ok:
            tail = verdict.stderr.strip().splitlines()[-1:] or [""]
            why = f"{verdict.why}: {tail[0][:300]}"
            findings.append(why)
            if corpus is not None:
                path = save(kind, data, why, corpus)
                log(f"  {kind} #{i}: {why} -> {path}")
    return {"kind": kind, "inputs": count, "seconds": time.perf_counter() - start,
            "outcomes": dict(outcomes), "findings": findings}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--kinds", default=",".join(TARGETS), help="comma-separated (default: all)")
    p.add_argument("--count", type=int, default=1000, help="inputs per kind (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-save", action="store_true", help="do not write findings to the corpus")
    args = p.parse_args(argv)
    found = 0
    for kind in args.kinds.split(","):
        r = campaign(kind, args.count, args.seed, None if args.no_save else CORPUS)
        found += len(r["findings"])
        print(f"{kind}: {r['inputs']} inputs in {r['seconds']:.0f} s, outcomes {r['outcomes']}, "
              f"{len(r['findings'])} findings", flush=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
