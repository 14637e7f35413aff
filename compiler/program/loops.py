"""Loop compression: a scheduled straight-line program -> the same instruction stream with
LOOPs (isa/instructions.py, LOOP), so that large convolutions fit the instruction memory.

The pass looks for *tandem repeats*: ``n`` consecutive copies of a run of ``p`` items
(instructions, or loops made earlier) in which copy ``k`` equals the first copy except
that every address field is moved by ``k * inc[space]`` (one increment per address space,
the same for every field of the body, nested loop bodies included).  Such a run becomes
``LOOP count=n`` followed by the first copy.  Because LOOP replays exactly the instructions
it replaces (same fields, same wait masks, in the same issue order), the program computes
the same values and keeps the scheduler's wait masks valid by construction; it only gains
one issue slot per LOOP executed.

Search: per level, the cheapest cover of the sequence by single items and loops (dynamic
programming over positions; bodies of up to ``MAX_PERIOD`` items); the body of a loop found is compressed in turn (nested loops), and
the whole sequence is searched again until nothing changes, so repeated loops nest too
(kernel taps inside input-channel blocks inside tiles).  Runs that do not repeat with
constant address steps (warm-up of the double buffering, edge tiles, ...) stay straight
line.  Limits: ``LOOP_DEPTH`` nesting, the LOOP ``count``/``body`` field widths and the
signed range of every increment field.
"""
from __future__ import annotations

from dataclasses import dataclass

from isa.config import NpuConfig
from isa.encoding import make
from isa.instructions import (BY_NAME, LOOP_DEPTH, Space, address_fields, field_space, loop_increments, offset_unit,
                              loop_sweep_error)

from compiler.core.ops import FixedOp, Op
from compiler.program.schedule import BARRIERS, _runs, run_starts

MAX_PERIOD = 48          # items per candidate body (longer bodies rarely repeat exactly)
MAX_SHORT = 16           # loop counts tried below the largest possible one
CHUNK = 2048             # longest sequence searched as one
_LOOP = BY_NAME["LOOP"]
_INC = loop_increments()
_COUNT_MAX = next(f for f in _LOOP.fields if f.name == "count").max
_BODY_MAX = next(f for f in _LOOP.fields if f.name == "body").max
_SPACES = tuple(Space)


@dataclass
class _Item:
    """An instruction, or a loop (``ops[0]`` its LOOP); ``ops`` flattened in program order."""

    ops: list            # Ops
    key: int             # interned: names, non-address fields, address spaces
    addrs: tuple         # address field values, in ops order
    specs: tuple         # (space index, unit) per address
    depth: int           # loop nesting inside this item


class _Interner:
    def __init__(self):
        self.ids: dict = {}

    def __call__(self, key) -> int:
        return self.ids.setdefault(key, len(self.ids))


def compress_loops(ops: list[Op], config: NpuConfig, max_depth: int = LOOP_DEPTH) -> list[Op]:
    """``ops`` (a scheduled program, waits set) with repeated runs turned into LOOPs.  Runs
    of fixed ops (compiler/kinds/conv/fully_connected.py: LOOPs already in) stay."""

    if any(op.instr.name == "BRANCH" for op in ops):
        return _compress_between_branches(ops, config, max_depth)
    if any(isinstance(op, FixedOp) for op in ops):
        return [op for fixed, run in _runs(ops, FixedOp)
                for op in (run if fixed else compress_loops(run, config, max_depth))]
    if len(ops) > CHUNK:
        # The search is superlinear in the sequence length: compress long programs in
        # independent chunks (a loop never spans two chunks; the result stays exact).
        return [op for start in range(0, len(ops), CHUNK)
                for op in compress_loops(ops[start:start + CHUNK], config, max_depth)]
    intern = _Interner()
    items = [_leaf(op, config, intern) for op in ops]
    items = _compress(items, max_depth, intern, config)
    return [op for item in items for op in item.ops]


def _compress_between_branches(ops: list[Op], config: NpuConfig, max_depth: int) -> list[Op]:
    """Compress the runs between BRANCHes apart (a LOOP never contains or spans a branch: the
    ISA forbids branching with a loop active) and move the branch targets, which must start
    a run (compiler/program/schedule.py ``run_starts``), to where their runs now start."""

    out: list[Op] = []
    moved: dict[int, int] = {}
    start = 0
    for i, op in enumerate(ops + [None]):
        if op is not None and op.instr.name not in BARRIERS:
            continue
        moved[start] = len(out)
        out += compress_loops(ops[start:i], config, max_depth) if i > start else []
        moved[i] = len(out)
        if op is not None:
            out.append(op)
            start = i + 1
    moved[len(ops)] = len(out)
    starts = run_starts(ops)
    for k, op in enumerate(out):
        if op.instr.name == "BRANCH":
            target = op.instr.values["target"]
            if target not in starts:
                raise AssertionError(f"BRANCH target {target} is inside a compressed run")
            values = {**op.instr.values, "target": moved[target]}
            values.pop("opcode")
            out[k] = Op(make("BRANCH", **values), op.layer, op.reads, op.writes, op.occupancy, op.busy)
    return out


def _leaf(op: Op, config: NpuConfig, intern: _Interner) -> _Item:
    instr = op.instr
    v = instr.values
    addrs, specs, fixed = [], [], []
    addr_names = set()
    for f in address_fields(instr.defn):
        space = field_space(instr.defn, f, v)
        if space is not None:
            addr_names.add(f.name)
            addrs.append(v[f.name])
            specs.append((_SPACES.index(space), offset_unit(f, space, config)))
    fixed = tuple((name, val) for name, val in v.items() if name not in addr_names)
    key = intern((instr.name, fixed, tuple(specs)))
    return _Item([op], key, tuple(addrs), tuple(specs), 0)


def _delta(a: _Item, b: _Item, incs: list | None) -> list | None:
    """Per-space increments taking ``a``'s addresses to ``b``'s, merged with ``incs`` (None
    where not yet known); None if they are inconsistent."""
    incs = list(incs) if incs is not None else [None] * len(_SPACES)
    for x, y, (s, unit) in zip(a.addrs, b.addrs, a.specs):
        diff = y - x
        if diff % unit:
            return None
        d = diff // unit
        if incs[s] is None:
            incs[s] = d
        elif incs[s] != d:
            return None
    return incs


def _matches(a: _Item, b: _Item, incs: list, k: int) -> bool:
    """``b`` is ``a`` moved by ``k * incs``."""
    if a.key != b.key:
        return False
    for x, y, (s, unit) in zip(a.addrs, b.addrs, a.specs):
        if y - x != k * (incs[s] or 0) * unit:
            return False
    return True


def _incs_ok(incs: list) -> bool:
    for s, d in enumerate(incs):
        f = _INC[_SPACES[s]]
        if d is not None and not f.min <= d <= f.max:
            return False
    return True


def _candidates(items: list[_Item], i: int, limit: int, memo: dict | None = None) -> list[tuple]:
    """(period, largest count, incs, body length) of every loop that may start at ``items[i]``.

    ``memo`` (filled here; callers go from the last position to the first) holds the
    (incs, count) found at each (position, period): when the copy after the first one starts
    a run of the same period and increments, the run here is one copy longer, which saves
    matching long runs again at every position (quadratic in the run's length otherwise)."""
    found = []
    length = 0
    depth = 0
    for p in range(1, MAX_PERIOD + 1):
        if i + 2 * p > len(items):
            break
        length += len(items[i + p - 1].ops)
        depth = max(depth, items[i + p - 1].depth)
        if length > _BODY_MAX:
            break
        if depth + 1 > limit or items[i + p].key != items[i].key:
            continue
        incs = None
        later = memo.get((i + 1, p)) if memo is not None else None
        if later is not None:
            # The body one item later repeats with increments ``later``: its pairs but the
            # last are this body's pairs but the first, and that last pair touches the
            # spaces of this first one (same key), so if the first pair agrees with
            # ``later``, the increments here are ``later``.
            incs = _delta(items[i], items[i + p], list(later[0]))
            if incs is not None and tuple(incs) != later[0]:
                incs = None
        if incs is None:
            for j in range(p):
                a, b = items[i + j], items[i + p + j]
                if a.key != b.key:
                    incs = None
                    break
                incs = _delta(a, b, incs)
                if incs is None:
                    break
        if incs is None or not _incs_ok(incs):
            continue
        key = tuple(incs)
        after = memo.get((i + p, p)) if memo is not None else None
        if after is not None and after[0] == key:
            n = min(after[1] + 1, _COUNT_MAX)
        else:
            n = 2
            while n < _COUNT_MAX and i + (n + 1) * p <= len(items):
                base = i + n * p
                if not all(_matches(items[i + j], items[base + j], incs, n) for j in range(p)):
                    break
                n += 1
        if memo is not None:
            memo[(i, p)] = (key, n)
        found.append((p, n, incs, length))
    return found


def _segment(items: list[_Item], limit: int) -> list[tuple]:
    """The cheapest cover of ``items`` by single items and loops (dynamic programming over
    positions; a body counts at its uncompressed length): list of (start, period, count,
    incs), period 0 for a single item."""
    size = len(items)
    cost = [0] * (size + 1)
    choice: list = [None] * size
    memo: dict = {}
    for i in range(size - 1, -1, -1):
        best, pick = cost[i + 1] + len(items[i].ops), None
        for p, nmax, incs, length in _candidates(items, i, limit, memo):
            for n in set(range(2, min(nmax, MAX_SHORT) + 1)) | {nmax}:
                c = 1 + length + cost[i + n * p]
                if c < best:
                    best, pick = c, (p, n, incs)
        cost[i], choice[i] = best, pick
    out, i = [], 0
    while i < size:
        if choice[i] is None:
            out.append((i, 0, 1, None))
            i += 1
        else:
            p, n, incs = choice[i]
            out.append((i, p, n, incs))
            i += n * p
    return out


def _increments(incs: list) -> dict:
    """A LOOP's increment fields (name -> value) of per-space increments in ``_SPACES`` order."""
    return {_INC[_SPACES[s]].name: d or 0 for s, d in enumerate(incs)}


def _loop_item(body: list[_Item], count: int, incs: list, intern: _Interner) -> _Item:
    first = body[0].ops[0]
    values = {"count": count, "body": sum(len(it.ops) for it in body), **_increments(incs)}
    loop = Op(make("LOOP", **values), first.layer)
    key = intern(("LOOP", tuple(sorted(values.items())), tuple(it.key for it in body)))
    return _Item([loop] + [op for it in body for op in it.ops], key,
                 tuple(a for it in body for a in it.addrs), tuple(s for it in body for s in it.specs),
                 1 + max(it.depth for it in body))


def _compress(items: list[_Item], limit: int, intern: _Interner, config: NpuConfig) -> list[_Item]:
    if limit < 1:
        return items
    while True:
        out, changed = [], False
        for i, p, n, incs in _segment(items, limit):
            if p == 0:
                out.append(items[i])
                continue
            if loop_sweep_error({"count": n, **_increments(incs)}, config) is not None:
                # LOOP's sweep rule (an increment moving an address by the memory's size):
                # a legal program's addresses never do, so this is a safeguard; unrolled.
                out += items[i:i + n * p]
                continue
            body = _compress(items[i:i + p], limit - 1, intern, config)
            out.append(_loop_item(body, n, incs, intern))
            changed = True
        items = out
        if not changed:
            return items
