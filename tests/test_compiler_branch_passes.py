"""The scheduler and the loop compressor around BRANCH (compiler/program/schedule.py,
compiler/program/loops.py): a branch is a barrier that waits for every unit, nothing is
reordered or folded into a LOOP across it, and branch targets follow their runs.

Oracle: the ISA simulator runs the compiled stream and its result must equal the one of
the same program with the runs left straight-line (hand-written, waits on everything)."""
import numpy as np

from isa import SMALL_CONFIG
from isa.program import Program, Segment
from sim.isa.sim import IsaSim

from compiler.core.ops import new_op
from compiler.program.loops import compress_loops
from compiler.program.schedule import schedule

CFG = SMALL_CONFIG
DATA, OUT = 0x2000, 0x3000


def _program_ops(flag_row: int):
    """Ten repeated load/store pairs (loop material), a branch on ASRAM row
    ``flag_row`` over a second block of ten, then a final store."""
    ops = [new_op(CFG, 0, "DMA_LOAD", sram=0, sram_addr=0, ext_addr=DATA, len0=64, len1=1, len2=1)]
    for k in range(10):
        ops.append(new_op(CFG, 0, "DMA_LOAD", sram=0, sram_addr=100 + k, ext_addr=DATA + 4 * k,
                          len0=1, len1=1, len2=1))
        ops.append(new_op(CFG, 0, "DMA_STORE", sram=0, sram_addr=100 + k, ext_addr=OUT + 4 * k,
                          len0=1, len1=1, len2=1))
    skip_from = len(ops)
    ops.append(new_op(CFG, 0, "BRANCH", target=0, test=1, mem=0, row=flag_row))     # target patched
    for k in range(10):
        ops.append(new_op(CFG, 0, "DMA_LOAD", sram=0, sram_addr=200 + k, ext_addr=DATA + 4 * k,
                          len0=1, len1=1, len2=1))
        ops.append(new_op(CFG, 0, "DMA_STORE", sram=0, sram_addr=200 + k, ext_addr=OUT + 0x100 + 4 * k,
                          len0=1, len1=1, len2=1))
    target = len(ops)
    ops.append(new_op(CFG, 0, "SYNC"))          # where the branch lands (a barrier)
    v = dict(ops[skip_from].instr.values)
    v.pop("opcode")
    v["target"] = target
    ops[skip_from] = new_op(CFG, 0, "BRANCH", **v)
    ops.append(new_op(CFG, 0, "DMA_STORE", sram=0, sram_addr=40, ext_addr=OUT + 0x200, len0=1, len1=1, len2=1))
    return ops


def _run(instrs):
    data = np.arange(64 * 4, dtype=np.uint8).tobytes()
    prog = Program(CFG, instrs, segments=[Segment("d", DATA, data)])
    return IsaSim(CFG, check_hazards=True).run(prog)


def _reference(ops):
    """The same program with every instruction waiting for every unit (trivially ordered)."""
    from isa.encoding import make
    out = []
    for op in ops:
        v = dict(op.instr.values)
        v.pop("opcode")
        v["wait"] = 7
        out.append(make(op.instr.name, **v))
    return out + [make("HALT", wait=7)]


def test_branch_is_a_barrier_and_targets_follow_loops():
    for flag_row in (40, 0):          # ASRAM row 40 holds bytes 160.. (not taken), row 0 byte 0 is 0
        ops = _program_ops(flag_row)
        scheduled = schedule(ops)
        branch = [op for op in scheduled.ops if op.instr.name == "BRANCH"]
        assert len(branch) == 1 and branch[0].instr.values["wait"] == 7
        k = next(i for i, op in enumerate(scheduled.ops) if op.instr.name == "BRANCH")
        # nothing crossed the branch: before it, the first block's ten stores, after it the rest
        before = [op.instr.values["ext_addr"] for op in scheduled.ops[:k] if op.instr.name == "DMA_STORE"]
        assert sorted(before) == [OUT + 4 * j for j in range(10)]
        looped = compress_loops(scheduled.ops, CFG)
        assert any(op.instr.name == "LOOP" for op in looped) and len(looped) < len(scheduled.ops)
        got = _run([op.instr for op in looped])
        want = _run(_reference(ops))
        assert got.ok and want.ok and got.hazards == []
        assert bytes(got.memory[OUT:]) == bytes(want.memory[OUT:])      # (below OUT: the programs)
        assert len(got.memory) > OUT + 0x200
        # the block after the branch ran only when not taken
        second = bytes(got.memory[OUT + 0x100:OUT + 0x104])
        assert (second == bytes(4) or len(second) < 4) == (flag_row == 0)
