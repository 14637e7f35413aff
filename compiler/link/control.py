"""Data-dependent control flow with the sequencer's BRANCH: WHILE_LOOP, and COND_IF whose
branches are worth skipping, linked from separately compiled pieces.

The main block is cut at its control operators into *pieces*; every straight-line piece,
every loop condition, loop body and COND_IF branch is compiled on its own (the ordinary
pipeline, compiler/driver.py ``run_pipeline``; a block with control flow of its own
recursively, here) and the programs are linked into one:

* each piece keeps its own external memory, placed one after the other (its DMA
  ``ext_addr`` fields moved by its base; its BRANCH targets by its first instruction);
  its final HALT becomes ``SYNC wait=DMA|MXU|VPU``, a barrier: nothing of one piece
  overlaps another, or a branch;
* every value lives in a *slot*: a graph input's or constant's buffer, a piece's output
  binding, or a loop variable's buffer.  A piece's input binding is filled by a DMA copy
  from the value's slot (the layouts must agree: both pieces lay the tensor out the same
  way, else Unsupported).  Values carried across loop iterations stay in fixed buffers,
  the body's input bindings: after the body its results are copied back there;
* WHILE_LOOP::

      copy initial values -> body inputs (loop variables)
    top:
      copy loop variables -> condition inputs; condition piece (the VPU computes the bool)
      DMA_LOAD the bool's byte -> ASRAM row 0 (lane 0)
      BRANCH test=ZERO row=0 -> exit        (waits for the DMA: it reads the bool)
      body piece; copy its results -> loop variables
      BRANCH ALWAYS -> top, limit = the reference interpreter's loop budget
    exit:                                   (the loop's results are the loop variables)

  ``limit`` is DEFAULT_MAX_LOOP_ITERATIONS of sim/reference/interpreter.py, which counts
  body executions over the whole run, as the NPU counts taken backward branches (one per
  iteration).  The reference stops *before* the body execution past the budget, the NPU
  after it (at the backward branch), both with an error: BRANCH_LIMIT on the NPU.
* COND_IF (condition not constant; branches computing more than IF_CONVERSION_MAX_ELEMENTS
  elements together)::

      DMA_LOAD the condition's byte -> ASRAM row 0; BRANCH test=ZERO -> else
      then piece; copy its results -> result slots; BRANCH ALWAYS -> end
    else:
      else piece; copy its results -> result slots
    end:

  Smaller COND_IFs keep if-conversion (compiler/graph/control.py): computing both sides
  and a SELECT costs less than the copies and barriers of separate pieces.

The condition byte goes through external memory (the piece that computes it stores it as
its output; a DMA brings lane 0 back into ASRAM) because pieces are compiled apart and
their scratchpad rows are not known here.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from isa.config import NpuConfig
from isa.encoding import make
from isa.instructions import BranchTest, Sram, VecDst
from isa.layout import pack
from isa.patches import Patches
from isa.program import Program, Segment, TensorBinding
from sim.reference.interpreter import DEFAULT_MAX_LOOP_ITERATIONS
from tosa_ir import Block, Graph, Operator
from tosa_ir.errors import Unsupported
from tosa_ir.graph import numpy_dtype

from compiler.graph.validate import check_graph
from compiler.core.errors import invalid

ALIGN = 64
ALL_UNITS = 0b111                      # wait mask: DMA | MXU | VPU
COND_ROW = 0                           # ASRAM row the condition byte is loaded into
# Taken backward branches a run may make (BRANCH ``limit``): the reference's loop budget.
LOOP_BUDGET = DEFAULT_MAX_LOOP_ITERATIONS
# COND_IFs whose branches compute at most this many elements together stay if-converted.
IF_CONVERSION_MAX_ELEMENTS = 4096


# -- which graphs take this path ---------------------------------------------------------------
def _elements(block: Block) -> int:
    return sum(int(np.prod(block.tensor(o).shape, dtype=np.int64)) for op in block.operators
               for o in op.outputs if op.op != "CONST")


def branch_cond_if(graph: Graph, block: Block, op: Operator) -> bool:
    """Whether the COND_IF ``op`` of ``block`` is lowered with branches."""
    if op.op != "COND_IF":
        return False
    cond = block.tensors.get(op.inputs[0])
    if cond is None or cond.is_const:
        return False
    try:
        sides = graph.block(op.attrs["then_graph"]), graph.block(op.attrs["else_graph"])
    except (KeyError, TypeError):
        return False
    return sum(_elements(b) for b in sides) > IF_CONVERSION_MAX_ELEMENTS


def needs_linking(graph: Graph) -> bool:
    """True for a graph whose main block has a WHILE_LOOP or a COND_IF worth branching."""
    main = graph.main
    return any(op.op == "WHILE_LOOP" or branch_cond_if(graph, main, op) for op in main.operators)


# -- slots and the linker ------------------------------------------------------------------------
@dataclass(frozen=True)
class Slot:
    """Where a value lives: address and layout (a TensorBinding without its name)."""

    addr: int
    shape: tuple
    dtype: str
    layout: str
    perm: tuple | None = None
    patches: Patches | None = None

    @staticmethod
    def of(b: TensorBinding) -> "Slot":
        return Slot(b.addr, tuple(b.shape), b.dtype, b.layout, b.perm, b.patches)

    def binding(self, name: str) -> TensorBinding:
        return TensorBinding(name, self.shape, self.dtype, self.addr, self.layout, self.perm, self.patches)

    def same_layout(self, other: "Slot") -> bool:
        return (self.shape, self.dtype, self.layout, self.perm, self.patches) == \
            (other.shape, other.dtype, other.layout, other.perm, other.patches)


@dataclass(frozen=True)
class LoopTrace:
    """A WHILE_LOOP in a linked program: ``top..end-1`` is one iteration (condition inputs,
    condition, the exit BRANCH at ``exit``, body, copies back, the backward BRANCH at
    ``end-1``)."""

    where: str
    op: Operator
    top: int
    exit: int
    end: int


@dataclass
class LinkTrace:
    """Where things went in a linked program, for reports (compiler/estimate/layers.py).

    ``pieces``: (where, program, first, end) per placed piece: its instructions are
    ``first..end-1`` of the linked program, the last one the SYNC that replaced its HALT.
    ``loops``: a :class:`LoopTrace` per WHILE_LOOP of the main block.
    ``branches``: (where, then_start, else_start, end) per COND_IF lowered with branches.
    """

    pieces: list = field(default_factory=list)
    loops: list = field(default_factory=list)
    branches: list = field(default_factory=list)


class _Linker:
    """Builds the linked program: external memory, instructions, segments, I/O bindings."""

    def __init__(self, graph: Graph, config: NpuConfig, loops: bool, compile_fn):
        self.graph, self.config, self.loops = graph, config, loops
        self.compile_fn = compile_fn          # compiler.driver.compile_graph, or a report's wrapper
        self.cursor = 0
        self.instrs: list = []
        self.segments: list[Segment] = []
        self.inputs: list[TensorBinding] = []
        self.pieces = 0
        self.trace = LinkTrace()
        self.where: dict[int, str] = {}       # id(program) -> what it compiles

    # memory
    def alloc(self, nbytes: int) -> int:
        addr = self.cursor
        self.cursor = -(-(addr + max(nbytes, 1)) // ALIGN) * ALIGN
        return addr

    def nbytes(self, slot: Slot) -> int:
        return slot.binding("").nbytes(self.config.bus_bytes)

    # code
    def emit(self, name: str, **fields) -> int:
        self.instrs.append(make(name, **fields))
        return len(self.instrs) - 1

    def copy(self, src: Slot, dst: Slot, what: str) -> None:
        """DMA copy of a value between two slots of the same layout."""
        if src.addr == dst.addr:
            return
        if not src.same_layout(dst):
            raise Unsupported(f"{what}: the pieces lay the tensor out differently ({src.layout} "
                              f"{src.shape} vs {dst.layout} {dst.shape}); the linker copies bytes only")
        bus = self.config.bus_bytes
        if src.addr % bus or dst.addr % bus:     # buffers start ALIGN-aligned: never expected
            raise Unsupported(f"{what}: a buffer is not bus-word aligned; the linker copies whole words")
        # Whole words: the tail of the last one lies in the buffer's alignment padding.
        words = -(-self.nbytes(src) // bus)
        chunk = min(self.config.asram_rows, (1 << 16) - 1)
        for start in range(0, words, chunk):
            n = min(chunk, words - start)
            self.emit("DMA_LOAD", wait=ALL_UNITS, sram=Sram.ASRAM, sram_addr=0, ext_addr=src.addr + start * bus,
                      len0=n, len1=1, len2=1)
            self.emit("DMA_STORE", sram=Sram.ASRAM, sram_addr=0, ext_addr=dst.addr + start * bus,
                      len0=n, len1=1, len2=1)

    def load_condition(self, slot: Slot) -> None:
        """Bring element 0 of a bool (or integer) tensor into lane 0 of ASRAM row COND_ROW."""
        # Where the layout puts element 0: pack a tensor whose only non-zero element it is.
        probe = np.zeros(slot.binding("").stored_shape, np.dtype(slot.dtype))
        probe.reshape(-1)[0] = 1
        offset = pack(probe, slot.layout, self.config.bus_bytes).index(1)
        self.emit("DMA_LOAD", wait=ALL_UNITS, sram=Sram.ASRAM, sram_addr=COND_ROW,
                  ext_addr=slot.addr + offset, len0=1, len1=1, len2=1, elem=1, stride0=1)

    def branch(self, test: BranchTest, target: int = 0, limit: int = 0) -> int:
        return self.emit("BRANCH", wait=ALL_UNITS, target=target, test=test, mem=VecDst.ASRAM, row=COND_ROW,
                         limit=limit)

    def reserve(self, program: Program) -> tuple[int, dict, dict]:
        """External memory for a compiled piece, placed after everything so far.  Returns
        its base and its input and output bindings as slots, by tensor name."""
        base = self.alloc(program.info.get("ext_bytes", 0) or _extent(program))
        self.segments += [Segment(f"p{self.pieces}/{s.name}", s.addr + base, s.data) for s in program.segments]
        self.pieces += 1
        ins = {b.name: replace(Slot.of(b), addr=b.addr + base) for b in program.inputs}
        outs = {b.name: replace(Slot.of(b), addr=b.addr + base) for b in program.outputs}
        return base, ins, outs

    def place(self, program: Program, base: int) -> None:
        """Append a piece's instructions (ext addresses and branch targets moved, its HALT
        turned into a barrier)."""
        first = len(self.instrs)
        instrs = program.instructions
        self.trace.pieces.append((self.where.get(id(program), ""), program, first, first + len(instrs)))
        assert instrs and instrs[-1].name == "HALT", "a compiled piece ends with HALT"
        for instr in instrs[:-1]:
            values = dict(instr.values)
            values.pop("opcode")
            if instr.name in ("DMA_LOAD", "DMA_STORE"):
                values["ext_addr"] += base
            elif instr.name == "BRANCH":
                values["target"] += first
            elif instr.name == "HALT":
                raise AssertionError("HALT inside a compiled piece")
            self.instrs.append(make(instr.name, **values))
        self.emit("SYNC", wait=ALL_UNITS)

    def compile_block(self, block: Block, where: str) -> Program:
        """Compile ``block`` (with the graph's other blocks, for nested control flow) alone."""
        sub = _subgraph(self.graph, block)
        try:
            program = self.compile_fn(sub, self.config, self.loops)
        except Unsupported as e:
            raise Unsupported(f"{where}: {e}") from None
        self.where[id(program)] = where
        return program


def _extent(program: Program) -> int:
    lanes = program.config.bus_bytes
    ends = [s.addr + len(s.data) for s in program.segments]
    ends += [b.addr + b.nbytes(lanes) for b in program.inputs + program.outputs]
    return max(ends, default=0)


def _subgraph(graph: Graph, block: Block) -> Graph:
    region = graph.regions[0]
    others = [b for b in region.blocks if b is not graph.main and b.name != block.name]
    return replace(graph, regions=[replace(region, blocks=[block] + others)] + list(graph.regions[1:]))


# -- the main walk ----------------------------------------------------------------------------------
def compile_linked(graph: Graph, config: NpuConfig, loops: bool, compile_fn) -> Program:
    """Compile ``graph`` (see the module docstring), each piece with ``compile_fn(graph, config,
    loops) -> Program`` (compiler.driver.compile_graph passes itself: this module sits below the
    driver).  Raises Unsupported / InvalidInput / TosaError like compiler.driver.compile_graph."""
    return link_traced(graph, config, loops, compile_fn)[0]


def link_traced(graph: Graph, config: NpuConfig, loops: bool, compile_fn) -> tuple[Program, LinkTrace]:
    """:func:`compile_linked`, also returning where the pieces went (reports pass a
    ``compile_fn`` that keeps each piece's Compilation)."""
    check_graph(graph)                         # ERROR_IFs of the control operators first
    link = _Linker(graph, config, loops, compile_fn)
    main = graph.main
    env: dict[str, Slot] = {}                  # value -> its slot

    def slot_for(name: str, want: Slot, where: str) -> Slot:
        """The slot of ``name``; a graph input or a constant gets one on first use, laid out
        like its first consumer's binding ``want``."""
        if name in env:
            return env[name]
        t = main.tensors.get(name)
        if t is None:
            raise Unsupported(f"{where}: tensor {name!r} is not declared in the main block")
        slot = replace(want, addr=link.alloc(link.nbytes(want)))
        if t.is_const:
            data = np.asarray(t.data).astype(numpy_dtype(t.dtype) if t.dtype != "bool" else bool)
            if slot.perm is not None:
                data = data.transpose(slot.perm)
            if slot.patches is not None:
                data = slot.patches.extract(data)
            link.segments.append(Segment(f"const/{name}", slot.addr, pack(data, slot.layout, config.bus_bytes)))
        elif name in main.inputs:
            link.inputs.append(slot.binding(name))
        else:
            raise Unsupported(f"{where}: tensor {name!r} is used before it is computed")
        env[name] = slot
        return slot

    def run_piece(block: Block, values: list[str], where: str) -> list[Slot]:
        """Compile ``block``, copy ``values`` (names in main) into its inputs, place it;
        returns the slots of its outputs, by position."""
        program = link.compile_block(block, where)
        base, ins, outs = link.reserve(program)
        for local, value in zip(block.inputs, values):
            if local in ins and _reads(block, local):
                link.copy(slot_for(value, ins[local], where), ins[local], f"{where}: input {local!r}")
        link.place(program, base)
        slots = []
        for name in block.outputs:
            if name not in outs:
                raise Unsupported(f"{where}: the compiled piece has no binding for its output {name!r}")
            slots.append(outs[name])
        return slots

    ops = [op for op in main.operators if op.op != "CONST"]
    pieces = _split(graph, main, ops)
    later_uses = _later_uses(main, pieces)
    for k, piece in enumerate(pieces):
        if isinstance(piece, list):
            block = _straight_block(main, piece, later_uses[k])
            if not block.outputs:
                continue
            slots = run_piece(block, block.inputs, f"{piece[0].location or piece[0].op}")
            env.update(zip(block.outputs, slots))
        elif piece.op == "WHILE_LOOP":
            _while_loop(link, graph, piece, env, slot_for, run_piece)
        else:
            _cond_if(link, graph, piece, env, slot_for, run_piece)

    outputs = []
    for name in main.outputs:
        if name not in env:                    # a graph input or a constant, returned as is
            t = main.tensor(name)
            slot_for(name, Slot(0, tuple(t.shape), t.dtype, "flat"), "graph output")
        outputs.append(env[name].binding(name))
    link.emit("HALT", wait=ALL_UNITS)
    program_addr = link.alloc(0)
    info = {"source": graph.source, "linked_pieces": link.pieces, "ext_bytes": program_addr}
    return Program(config=config, instructions=link.instrs, program_addr=program_addr,
                   segments=link.segments, inputs=link.inputs, outputs=outputs, info=info), link.trace


# -- pieces ------------------------------------------------------------------------------------------
def _split(graph: Graph, main: Block, ops: list[Operator]) -> list:
    """Runs of straight-line operators (lists) and the control operators between them."""
    pieces: list = []
    for op in ops:
        if op.op == "WHILE_LOOP" or branch_cond_if(graph, main, op):
            pieces.append(op)
        elif pieces and isinstance(pieces[-1], list):
            pieces[-1].append(op)
        else:
            pieces.append([op])
    return pieces


def _later_uses(main: Block, pieces: list) -> list[set]:
    """Per piece, the values read after it (by later pieces, or as graph outputs)."""
    out, seen = [], set(main.outputs)
    for piece in reversed(pieces):
        out.append(set(seen))
        for op in (piece if isinstance(piece, list) else [piece]):
            seen.update(op.inputs)
    return out[::-1]


def _straight_block(main: Block, ops: list[Operator], needed: set) -> Block:
    """A block of ``ops``: inputs the values they read from before, outputs the ones read
    later; the constants they use come with their CONST operators."""
    produced = {o for op in ops for o in op.outputs}
    used: list[str] = []
    for op in ops:
        for name in op.inputs:
            if name and name not in produced and name not in used:
                used.append(name)
    consts = [n for n in used if main.tensors.get(n) is not None and main.tensors[n].is_const]
    const_ops = [Operator("CONST", [], [n], {}, "") for n in consts]
    inputs = [n for n in used if n not in consts]
    outputs = [o for op in ops for o in op.outputs if o in needed]
    names = set(used) | produced
    tensors = {n: t for n, t in main.tensors.items() if n in names}
    return Block(main.name, tensors, const_ops + list(ops), inputs, outputs)


def _reads(block: Block, name: str) -> bool:
    """Whether the compiled ``block`` reads its input ``name`` (an unread input's binding,
    if any, is never looked at, whatever its layout)."""
    return name in block.outputs or any(name in op.inputs for op in block.operators)


def _patch(link: _Linker, at: int, target: int) -> None:
    values = dict(link.instrs[at].values)
    values.pop("opcode")
    values["target"] = target
    link.instrs[at] = make("BRANCH", **values)


def _while_loop(link: _Linker, graph: Graph, op: Operator, env: dict, slot_for, run_piece) -> None:
    where = f"WHILE_LOOP at {op.location}" if op.location else "WHILE_LOOP"
    try:
        cond_b, body_b = graph.block(op.attrs["cond_graph"]), graph.block(op.attrs["body_graph"])
    except KeyError as e:
        raise invalid(op, f"block missing: {e}") from None
    # A body result that is its own input (an unchanged loop variable) is not computed: its
    # value stays in the variable's buffer.
    body_b = replace(body_b, outputs=[o for k, o in enumerate(body_b.outputs) if o != body_b.inputs[k]])
    unchanged = [graph.block(op.attrs["body_graph"]).outputs[k] == body_b.inputs[k] for k in range(len(op.inputs))]
    cond_p = link.compile_block(cond_b, f"{where}, condition")
    body_p = link.compile_block(body_b, f"{where}, body")
    cond_base, cond_ins, cond_outs = link.reserve(cond_p)
    body_base, body_ins, body_outs = link.reserve(body_p)

    # Loop variables: the body's input buffers (else a buffer laid out like another user's).
    variables = []
    for i, init in enumerate(op.inputs):
        local_b, local_c = body_b.inputs[i], cond_b.inputs[i]
        if local_b in body_ins and _reads(body_b, local_b):
            slot = body_ins[local_b]
        else:
            t = body_b.tensor(local_b)
            result = graph.block(op.attrs["body_graph"]).outputs[i]
            want = (cond_ins.get(local_c) if _reads(cond_b, local_c) else None) or body_outs.get(result) or \
                Slot(0, tuple(t.shape), t.dtype if t.dtype != "bool" else "bool", "flat")
            slot = replace(want, addr=link.alloc(link.nbytes(want)))
        link.copy(slot_for(init, slot, where), slot, f"{where}: initial value {init!r}")
        variables.append(slot)

    top = len(link.instrs)
    for i, local in enumerate(cond_b.inputs):
        if local in cond_ins and _reads(cond_b, local):
            link.copy(variables[i], cond_ins[local], f"{where}: condition input {local!r}")
    link.place(cond_p, cond_base)
    link.load_condition(cond_outs[cond_b.outputs[0]])
    exit_branch = link.branch(BranchTest.ZERO)
    link.place(body_p, body_base)
    results = iter(body_b.outputs)
    for i, same in enumerate(unchanged):
        if not same:
            name = next(results)
            link.copy(body_outs[name], variables[i], f"{where}: body result {name!r}")
    link.branch(BranchTest.ALWAYS, target=top, limit=LOOP_BUDGET)
    _patch(link, exit_branch, len(link.instrs))
    link.trace.loops.append(LoopTrace(where, op, top, exit_branch, len(link.instrs)))
    env.update(zip(op.outputs, variables))


def _cond_if(link: _Linker, graph: Graph, op: Operator, env: dict, slot_for, run_piece) -> None:
    where = f"COND_IF at {op.location}" if op.location else "COND_IF"
    then_b, else_b = graph.block(op.attrs["then_graph"]), graph.block(op.attrs["else_graph"])
    cond = graph.main.tensor(op.inputs[0])
    link.load_condition(slot_for(op.inputs[0], Slot(0, tuple(cond.shape), "bool", "flat"), where))
    else_branch = link.branch(BranchTest.ZERO)
    then_start = len(link.instrs)
    results = run_piece(then_b, op.inputs[1:], f"{where}, then")
    end_branch = link.branch(BranchTest.ALWAYS)
    _patch(link, else_branch, len(link.instrs))
    for k, slot in enumerate(run_piece(else_b, op.inputs[1:], f"{where}, else")):
        link.copy(slot, results[k], f"{where}: result {op.outputs[k]!r}")
    _patch(link, end_branch, len(link.instrs))
    link.trace.branches.append((where, then_start, end_branch + 1, len(link.instrs)))
    env.update(zip(op.outputs, results))
