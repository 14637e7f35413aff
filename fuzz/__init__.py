"""Mutation fuzzers for every kind of untrusted input, and the contract they check.

``python -m fuzz`` (``make fuzz``) runs campaigns; tests/test_fuzz_regressions.py replays the
committed reproducers in ``fuzz/corpus/`` and a short fixed-seed run as part of ``make test``.
See fuzz/README.md and SECURITY.md.
"""
