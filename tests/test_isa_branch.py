"""BRANCH in the ISA simulator (sim/isa/sim.py) and the cycle model (sim/npu_timing.py).

Oracles: the values the programs of cocotb_tests/branch_programs.py compute, worked out by
hand (closed forms); hand-counted cycles from the timing rules; the ISA doc's error rules.
The RTL agrees with all of this cycle for cycle (cocotb_tests/test_rtl_branch.py).
"""
import numpy as np
import pytest

from isa import SMALL_CONFIG, ErrorCode
from isa.asm import assemble
from isa.instructions import FETCH_ARRIVAL, INSTR_BYTES
from isa.program import Program
from sim.isa.sim import IsaSim
from sim.npu_timing import TimingModel

from cocotb_tests import branch_programs as bp

CFG = SMALL_CONFIG


def run(instrs, mem, cfg=CFG):
    return IsaSim(cfg, check_hazards=True).run(Program(cfg, instrs), mem)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 9])
def test_while_countdown_int8(n):
    instrs, mem, want = bp.countdown_int8(n)
    r = run(instrs, mem)
    assert r.ok, r.error_message
    assert bytes(r.memory[bp.OUT:bp.OUT + 12]) == want["out"]
    assert r.hazards == []
    # per iteration: BRANCH, 3 VALU, BRANCH; plus DMA, the final test, store, HALT
    assert r.instructions_executed == 5 * n + 4


@pytest.mark.parametrize("n,dtype,step,iterations", [
    (300, "INT32", 1, 300), (300, "INT8", 1, 44), (-12, "INT32", -3, 4), (1, "INT32", 1, 1)])
def test_do_while_acc(n, dtype, step, iterations):
    instrs, mem, want = bp.countdown_acc(n, dtype, step=step)
    assert want["iterations"] == iterations
    r = run(instrs, mem)
    assert r.ok, r.error_message
    assert bytes(r.memory[bp.OUT:bp.OUT + len(want["out"])]) == want["out"]
    assert r.hazards == []


@pytest.mark.parametrize("flag", [0, 1, 255])
def test_branches_next_to_loops(flag):
    instrs, mem, want = bp.with_loops(flag)
    r = run(instrs, mem)
    assert r.ok, r.error_message
    assert bytes(r.memory[bp.OUT:bp.OUT + 4]) == want["out"]


@pytest.mark.parametrize("seed", range(6))
def test_random_forward_branches(seed):
    instrs, mem, want = bp.forward_chain(np.random.default_rng(40 + seed))
    r = run(instrs, mem)
    assert r.ok, r.error_message
    assert bytes(r.memory[bp.OUT:bp.OUT + CFG.bus_bytes]) == want["out"]
    assert r.hazards == []


@pytest.mark.parametrize("name", sorted(bp.ERROR_CASES))
def test_errors(name):
    instrs, mem, code, stop_pc = bp.error_case(name, CFG)
    r = run(instrs, mem)
    assert (r.error_code.name, r.stop_pc) == (code, stop_pc), r.error_message
    # the MATMUL before the failure completed: the stop waits for it
    matmul_end = r.timing.per_instruction[1].end
    assert r.cycles > matmul_end


def test_limit_counts_all_backward_branches():
    """``limit`` bounds the run's total of taken backward branches (as the reference
    interpreter's budget counts every WHILE_LOOP): 3 + 3 pass a limit of 6, not of 5."""
    for limit, code in ((6, ErrorCode.NONE), (5, ErrorCode.BRANCH_LIMIT)):
        text = f"""
            DMA_LOAD sram=ASRAM ext_addr={bp.DATA} len0=2 len1=1 len2=1
            VALU wait=DMA op=COPY dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=0 d_mem=ASRAM d_addr=5
            VALU wait=VPU op=SUB dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=5 b_mem=ASRAM b_addr=1 d_mem=ASRAM d_addr=5
            BRANCH wait=VPU target=2 test=NONZERO row=5 limit={limit}
            VALU op=COPY dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=0 d_mem=ASRAM d_addr=5
            VALU wait=VPU op=SUB dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=5 b_mem=ASRAM b_addr=1 d_mem=ASRAM d_addr=5
            BRANCH wait=VPU target=5 test=NONZERO row=5 limit={limit}
            HALT
        """
        instrs = assemble(text)
        r = run(instrs, bp.image(instrs, bytes([4, 0, 0, 0, 1, 1, 1, 1])))
        assert r.error_code == code
        if code != ErrorCode.NONE:
            assert r.stop_pc == 6


W = INSTR_BYTES // CFG.bus_bytes       # bus words per instruction
L = CFG.mem_latency


def _arrives(i, delay=0):
    """Cycle from which instruction i (fetched from cycle 0, ``delay`` cycles of DMA
    traffic before its last word) can be read: its last word is requested at W*(i+1)-1."""
    return W * (i + 1) - 1 + delay + L + FETCH_ARRIVAL


def test_cycles_taken_and_not_taken():
    """Hand-counted from the rules of sim/npu_timing.py: instruction 0 is read when it has
    arrived and enters IR once instruction 1 has (at A(1) + 1); a BRANCH reads at that
    cycle c, issues at d = c+2; taken: fetching restarts at the target from d+1, which is
    read when it arrives and in IR one cycle later (the instruction after it being past the
    program, or arrived); not taken: the next instruction enters IR the cycle after d, once
    the one after it has arrived.  HALT stops when it is in IR (all idle); CYCLES = stop + 1."""
    c = _arrives(1) + 1
    d = c + 2
    taken = assemble("BRANCH target=2 test=ALWAYS\nHALT\nHALT")
    r = run(taken, bp.image(taken, b""))
    target_read = d + 1 + W - 1 + L + FETCH_ARRIVAL
    assert (r.ok, r.stop_pc, r.cycles) == (True, 2, target_read + 2 + 1)
    not_taken = assemble("BRANCH target=2 test=NONZERO row=3\nHALT\nHALT")      # row 3 is 0
    r = run(not_taken, bp.image(not_taken, b""))
    assert (r.ok, r.stop_pc, r.cycles) == (True, 1, max(_arrives(2), d) + 1 + 1)
    # a branch waiting for a DMA: DMA_LOAD of 1 word issues at c, busy c+1 .. c+1+L, which
    # delays the words of instruction 2 still to be requested then, if any (the BRANCH
    # enters IR at A(2) + 1), and the BRANCH reads its condition then (the DMA is idle),
    # issues and jumps two later.
    waiting = assemble(f"DMA_LOAD ext_addr={bp.DATA} len0=1 len1=1 len2=1\n"
                       "BRANCH wait=DMA target=3 test=ZERO row=0\nHALT\nHALT")
    r = run(waiting, bp.image(waiting, bytes(4)))
    assert (r.ok, r.stop_pc) == (True, 3)
    dma_busy = 1 + L if c + 1 <= 3 * W - 1 else 0
    branch_read = _arrives(2, dma_busy) + 1
    assert r.cycles == branch_read + 3 + W - 1 + L + FETCH_ARRIVAL + 2 + 1


def test_limit_stop_cycles():
    """BRANCH_LIMIT stops at the decision: two cycles after the condition read."""
    instrs = assemble("BRANCH target=0 test=ALWAYS limit=0\nHALT")
    r = run(instrs, bp.image(instrs, b""))
    assert (r.error_code, r.stop_pc) == (ErrorCode.BRANCH_LIMIT, 0)
    assert r.cycles == _arrives(1) + 1 + 2 + 1


def test_static_timing_takes_forward_always_branches_only():
    """TimingModel.run (no data: estimates) takes forward ALWAYS branches; conditional and
    backward ones fall through (a data-dependent loop's body counts once).  Where that is
    what happens, its cycles are the ISA simulator's."""
    instrs = assemble("SYNC\nBRANCH target=3 test=ALWAYS\nSYNC\nHALT")
    t = TimingModel(CFG).run(instrs)
    assert t.pcs == [0, 1, 3]
    assert run(instrs, bp.image(instrs, b"")).cycles == t.total_cycles
    back = assemble("SYNC\nBRANCH target=0 test=ALWAYS limit=1000000\nHALT")
    assert TimingModel(CFG).run(back).pcs == [0, 1, 2]
    cond = assemble("BRANCH target=2 test=NONZERO row=0\nHALT\nHALT")
    assert TimingModel(CFG).run(cond).pcs == [0, 1]


def test_hazard_checker_sees_the_condition_read():
    """A BRANCH whose wait mask omits the DMA_LOAD producing its condition is a RAW hazard.
    (The long MATMUL gives the instruction fetch time to run ahead, so the BRANCH follows
    the load at once.)  A vector producer cannot make one: a BRANCH borrows the vector
    unit's read port and so always waits for it (isa/ports.py)."""
    instrs = assemble(f"""
        MATMUL n0=60 n1=1
        SYNC wait=MXU
        DMA_LOAD sram=ASRAM sram_addr=1 ext_addr={bp.DATA} len0=1 len1=1 len2=1
        BRANCH target=5 test=ZERO row=1
        HALT
        HALT""")
    r = run(instrs, bp.image(instrs, b""))
    assert [(h.kind, h.memory) for h in r.hazards] == [("RAW", "ASRAM")]
    vector = assemble("""
        MATMUL n0=60 n1=1
        SYNC wait=MXU
        VALU op=COPY dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=0 d_mem=ASRAM d_addr=1
        BRANCH target=5 test=ZERO row=1
        HALT
        HALT""")
    timing = TimingModel(CFG).run(vector).per_instruction
    assert timing[2].issue + 1 < timing[2].end       # the VALU runs a few cycles...
    assert timing[3].start == timing[2].end + 1      # ...and the BRANCH waited, unasked
    assert run(vector, bp.image(vector, b"")).hazards == []
