"""Wide convolutions (compiler/kinds/mxu_conv/lower.py) whose straight-line program is
longer than the instruction memory: emitted with their own LOOPs and wait masks, as
:class:`FixedOp` s between two full barriers (the scheduler and the loop search leave them
alone, like the fully-connected lowering's).

Why not one LOOP per output plane or tile: a LOOP moves every EXT address of its body by
the same increment, but the input region loads and the output stores step by different
amounts (input and output strides).  What repeats with one increment per space:

* the MATMULs of one output block over (tap, input-channel block): ASRAM and WSRAM steps
  only; compressed by the loop search (compiler/program/loops.py) on that run alone, with
  the run's wait mask on its first instruction;
* the output blocks of one tile, when every block has its own ACC region and staging area
  (``regions = oblocks``): bias rows (PSRAM), weights (WSRAM), ACC, ASRAM and the output
  channel block (EXT) all step linearly: one LOOP over the blocks.

Wait masks come from the straight-line program in its natural order (the lowering's order
is kept): an instruction waits for every other unit that may still run an earlier
instruction it conflicts with (compiler/program/schedule.py ``dependences``), minus what is
known complete (a wait makes every earlier instruction of that unit complete, and all that
those knew at their issue).  A loop body takes, per position, the union of its
iterations' masks; a MATMUL run takes the union of its instructions' masks on its first
instruction (between them only MATMULs issue, so nothing else becomes pending).  Extra
wait bits cost time, never correctness.
"""
from __future__ import annotations

from isa.config import NpuConfig
from isa.encoding import Instruction, make
from isa.instructions import LOOP_DEPTH, address_fields, field_space, loop_increments, loop_sweep_error, offset_unit
from isa.vector import operands
from tosa_ir.errors import Unsupported

from compiler.core.ops import Op, new_op
from compiler.program.loops import compress_loops
from compiler.core.ops import ALL_UNITS, FixedOp
from compiler.program.schedule import UNITS, dependences

_INC = loop_increments()


def looped(layer, config: NpuConfig, straight: list[Op], emit) -> list[Op]:
    """The shortest looped form of the layer: ``emit(regions, stages, marks)`` re-emits its
    straight line with ``regions`` ACC regions and ``stages`` output staging areas and records
    the output blocks' op ranges in ``marks``: two of each (the blocks alternate), or one ACC
    region per block and one staging area (the blocks repeat with constant steps)."""
    oblocks = -(-layer.out_shape[-1] // config.array_cols)
    best = None
    for regions, stages in ((2, 2), (max(2, oblocks), 1)):
        marks: list = []
        try:
            ops = emit(regions, stages, marks)
        except Unsupported:         # tiles of one pixel no longer fit: keep the other choice
            continue
        out = _fixed(ops, marks, config, straight[0].layer)
        if best is None or len(out) < len(best):
            best = out
    return best


def _with_wait(op: Op, wait: int) -> Op:
    return Op(Instruction(op.instr.name, {**op.instr.values, "wait": wait}), op.layer, op.reads, op.writes,
              op.occupancy, op.busy)


def waits(ops: list[Op]) -> list[int]:
    """Wait mask per op of a straight-line run in issue order (see the module docstring)."""
    preds = dependences(ops)
    last = {u: -1 for u in UNITS}           # the latest op of each unit so far
    known = {u: -1 for u in UNITS}          # ops of unit u up to this index are complete
    known_at: list[dict] = []
    masks = []
    for j, op in enumerate(ops):
        need = {ops[p].unit for p in preds[j]
                if ops[p].unit != op.unit and ops[p].unit in known and p > known[ops[p].unit]}
        for u in need:
            k = last[u]
            known[u] = max(known[u], k)
            for v, x in known_at[k].items():
                known[v] = max(known[v], x)
        known_at.append(dict(known))
        if op.unit in last:
            last[op.unit] = j
        masks.append(sum(1 << int(u) for u in need))
    return masks


def _unused_operands(op: Op) -> set[str]:
    """Address fields of vector operands the instruction does not read (VALU COPY's b, c)."""
    if op.instr.name not in ("VALU", "VRESCALE", "VPOOL"):
        return set()
    sources, dst = operands(op.instr.name, op.instr.values)
    used = {o.prefix for o in sources} | {dst.prefix}
    return {f"{p}_addr" for p in "abc" if p not in used}


def _signature(ops: list[Op], config: NpuConfig) -> tuple[tuple, list[list[tuple]]]:
    """(names and non-address fields, [(space, unit, value)] per op)."""
    names, addrs = [], []
    for o in ops:
        defn, v = o.instr.defn, o.instr.values
        fields, own = [], set()
        unused = _unused_operands(o)
        for f in address_fields(defn):
            space = field_space(defn, f, v)
            if space is not None:
                own.add(f.name)
                if f.name not in unused:    # an operand not read: any offset is harmless
                    fields.append((space, offset_unit(f, space, config), v[f.name]))
        names.append((o.instr.name, tuple((k, x) for k, x in v.items() if k not in own)))
        addrs.append(fields)
    return tuple(names), addrs


def _loop(bodies: list[list[Op]], config: NpuConfig, layer: int) -> list[Op] | None:
    """``LOOP len(bodies)`` over ``bodies[0]`` when every body is the first one moved by a
    constant step per address space (waits: the union per position); else None."""
    if len(bodies) < 2 or any(len(b) != len(bodies[0]) for b in bodies):
        return None
    masks = [0] * len(bodies[0])
    for b in bodies:
        masks = [m | o.instr.values.get("wait", 0) for m, o in zip(masks, b)]
    bodies = [[_with_wait(o, m) for o, m in zip(b, masks)] for b in bodies]
    sigs = [_signature(b, config) for b in bodies]
    if any(s[0] != sigs[0][0] for s in sigs):
        return None
    incs: dict = {}
    first = sigs[0][1]
    for k, (_, addrs) in enumerate(sigs[1:], 1):
        for a, b in zip(first, addrs):
            for (space, unit, x), (_, _, y) in zip(a, b):
                step, rem = divmod(y - x, unit * k)
                if rem or (y - x) % unit or incs.setdefault(space, step) != step:
                    return None
    try:
        head = make("LOOP", count=len(bodies), body=len(bodies[0]), **{_INC[s].name: d for s, d in incs.items()})
    except (ValueError, KeyError, OverflowError):
        return None
    if loop_sweep_error(head.values, config) is not None:
        return None               # a safeguard: legal addresses never sweep a whole memory
    return [Op(head, layer)] + bodies[0]


def _matmuls(ops: list[Op], config: NpuConfig) -> list[Op]:
    """A run of MATMULs compressed into loops, its waits on the first instruction."""
    if len(ops) < 2:
        return ops
    mask = 0
    for o in ops:
        mask |= o.instr.values.get("wait", 0)
    out = compress_loops([_with_wait(o, 0) for o in ops], config, LOOP_DEPTH - 1)
    return [_with_wait(out[0], mask)] + out[1:]


def _fixed(ops: list[Op], marks: list, config: NpuConfig, layer: int) -> list[Op]:
    ops = [_with_wait(o, m) for o, m in zip(ops, waits(ops))]
    tiles = {t[0][0]: t for t in marks if t}
    out: list[Op] = [new_op(config, layer, "SYNC", wait=ALL_UNITS)]
    i = 0
    while i < len(ops):
        if i not in tiles:
            out.append(ops[i])
            i += 1
            continue
        bodies = [ops[s:m0] + _matmuls(ops[m0:m1], config) + ops[m1:e] for s, m0, m1, e in tiles[i]]
        looped_blocks = _loop(bodies, config, layer)
        out += looped_blocks if looped_blocks is not None else [o for b in bodies for o in b]
        i = tiles[i][-1][3]
    out.append(new_op(config, layer, "SYNC", wait=ALL_UNITS))
    return [FixedOp(o.instr, o.layer, o.reads, o.writes, o.occupancy, o.busy) for o in out]
