"""Benchmarks: ``python -m bench [NAME...]`` (``make bench``).

Each benchmark measures something and prints it as tables; none asserts a speed (targets
are stated in the tables' notes, and tests never time anything).  Tables are also written
as CSV files to ``build/bench/``.

Adding a benchmark: write a module ``bench/<name>.py`` with a one-line ``DESCRIPTION`` and
``run(ctx: bench.report.BenchContext) -> list[bench.report.Table]``, and list it in
:data:`bench.registry.BENCHMARKS`.  See :mod:`bench.registry`.
"""
