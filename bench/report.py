"""Result tables of the benchmarks: plain-text rendering for people, CSV for tools.

A :class:`Table` holds named columns, rows of raw values and free-text notes.  Values stay
raw (floats in seconds, ints, strings, ``None`` for "not measured") so the CSV keeps full
precision; each column's ``fmt`` decides only how the text table shows them.
"""
from __future__ import annotations

import csv
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

MISSING = "-"


@dataclass
class Column:
    """One column: header ``name``, optional ``unit`` (shown in the header and the CSV
    header) and ``fmt``, a format spec (``".3f"``) or a function value -> text."""

    name: str
    unit: str = ""
    fmt: str | Callable[[Any], str] = ""

    @property
    def header(self) -> str:
        return f"{self.name} [{self.unit}]" if self.unit else self.name

    def text(self, value: Any) -> str:
        if value is None:
            return MISSING
        if callable(self.fmt):
            return self.fmt(value)
        if self.fmt:
            return format(value, self.fmt)
        return str(value)


@dataclass
class Table:
    """A titled table.  ``name`` (a slug) names its CSV file ``<name>.csv``."""

    name: str
    title: str
    columns: list[Column]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *values: Any) -> None:
        if len(values) != len(self.columns):
            raise ValueError(f"table {self.name}: row of {len(values)} values for "
                             f"{len(self.columns)} columns")
        self.rows.append(list(values))

    def render(self) -> str:
        """The table as aligned text: title, header, rule, rows, then the notes."""
        headers = [c.header for c in self.columns]
        cells = [[c.text(v) for c, v in zip(self.columns, row)] for row in self.rows]
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
        # Numbers read best right-aligned; text left-aligned.
        numeric = [all(_is_number(row[i]) for row in self.rows if row[i] is not None)
                   and any(row[i] is not None for row in self.rows)
                   for i in range(len(self.columns))]

        def line(values: list[str]) -> str:
            parts = [v.rjust(w) if num else v.ljust(w)
                     for v, w, num in zip(values, widths, numeric)]
            return "  ".join(parts).rstrip()

        out = [self.title, "=" * len(self.title), line(headers),
               "  ".join("-" * w for w in widths)]
        out += [line(r) for r in cells]
        out += [f"  {n}" for n in self.notes]
        return "\n".join(out)

    def write_csv(self, folder: Path) -> Path:
        """Write ``<folder>/<name>.csv`` (header row of column headers, raw values)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_slug(self.name)}.csv"
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([c.header for c in self.columns])
            for row in self.rows:
                writer.writerow(["" if v is None else v for v in row])
        return path


@dataclass
class BenchContext:
    """What ``run(ctx)`` of a benchmark gets.

    Attributes
    ----------
    repeat : int
        N of best-of-N timings.
    build_dir : Path
        Where generated inputs are cached and CSV files go (``build/bench``).
    quick : bool
        Smaller workloads, for a fast look (figures are then not comparable).
    """

    repeat: int = 3
    build_dir: Path = Path("build/bench")
    quick: bool = False
    log: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr,
                                                                  flush=True))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "table"
