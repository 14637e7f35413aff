"""sim/npu_timing.py on small programs whose cycles were worked out by hand from the rules
in its docstring (the cocotb tests compare the same model with the RTL at length)."""
from __future__ import annotations

from isa import SMALL_CONFIG, make
from sim.npu_timing import InstrTiming, TimingModel

# SMALL_CONFIG: bus 4 bytes (8 words per instruction), mem_latency 4, 4 array rows.
MODEL = TimingModel(SMALL_CONFIG)


def test_dependent_chain():
    # Fetch: 8 words per instruction from cycle 0, instruction i readable at 14 + 8i while
    # the DMA is idle (the last word of i requested at 7 + 8i, its response 4 later, then
    # FETCH_ARRIVAL = 3).  Instruction 0 is read at 14 and enters IR once instruction 1 is
    # readable (22), so it is in IR at 23.
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1),
            make("ACT", count=2, wait=2), make("HALT")]
    t = MODEL.run(prog)
    assert t.run_start == 0
    assert t.per_instruction == [
        InstrTiming(23, 24, 30),      # DMA_LOAD: 3 slots + latency 4 (bus busy 24..30)
        InstrTiming(31, 32, 39),      # MATMUL: in IR once instruction 2 is readable (its
                                      # words at 16..23, before the DMA: 30), waits for
                                      # the DMA (wait=1): issues at 31
        InstrTiming(46, 47, 58),      # ACT: instruction 3's words wait for the DMA
                                      # (31..38: readable 45), in IR at 46; 2 rows + 10
        InstrTiming(59, 59, 59),      # HALT when all idle
    ]
    assert t.total_cycles == 60
    assert t.busy == {"DMA": 7, "MXU": 8, "VPU": 12}


def test_matmuls_stream_back_to_back():
    # The first MATMUL (40 vectors) gives the fetch time to run ahead (instruction i
    # readable at 13 + 8i); then the front end takes the next MATMUL in the last cycle
    # of the one before: after max(N, ROWS) cycles.
    prog = [make("MATMUL", n0=40, n1=1), make("MATMUL", n0=6, n1=1), make("MATMUL", n0=6, n1=1),
            make("MATMUL", n0=1, n1=1), make("MATMUL", n0=1, n1=1), make("HALT")]
    t = MODEL.run(prog)
    assert [x.issue for x in t.per_instruction] == [23, 63, 69, 75, 79, 87]
    assert t.total_cycles == 88
    assert t.busy["MXU"] == 86 - 24 + 1        # one merged busy interval


def test_stops():
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1)]
    # the MATMUL fails: the NPU stops once the DMA is idle, nothing more runs
    # (it enters IR at 31, once instruction 2 is readable and the DMA is idle)
    t = MODEL.run(prog, stop_at=1, prog_len=4)
    assert (t.total_cycles, t.stop_index, t.busy["MXU"]) == (32, 1, 0)
    # running off the end behaves the same at index len(instructions)
    assert MODEL.run(prog[:1], prog_len=4).total_cycles == 32
    # empty work never makes a unit busy
    t = MODEL.run([make("DMA_STORE"), make("ACT"), make("MATMUL"), make("HALT")])
    assert t.busy == {"DMA": 0, "MXU": 0, "VPU": 0}
    assert MODEL.run([make("HALT")], boot_error=True).total_cycles == 0


def test_act_mxu_lag():
    # The MATMULs as in test_matmuls_stream_back_to_back: the first (40 vectors) issues at
    # 23 and writes ACC last at 24 + 40 + 4 + 1 = 69; the second issues at 63 (ready after
    # max(N, ROWS) cycles) and finishes at 64 + 6 + 5 = 75.  The ACT is in IR at 64.
    def act_issue(lag: int) -> int:
        prog = [make("MATMUL", n0=40, n1=1), make("MATMUL", n0=6, n1=1),
                make("ACT", count=2, wait=2, mxu_lag=lag), make("HALT")]
        t = MODEL.run(prog)
        assert [x.issue for x in t.per_instruction[:2]] == [23, 63]
        return t.per_instruction[2].issue

    assert act_issue(0) == 76          # the MXU idle: after the second MATMUL's last write
    assert act_issue(1) == 70          # one unfinished allowed: after the first's
    assert act_issue(2) == 64          # two allowed, two issued: no wait at all
    assert act_issue(3) == 64
    # Without MXU in the wait mask the lag means nothing.
    prog = [make("MATMUL", n0=40, n1=1), make("ACT", count=2, wait=0, mxu_lag=0), make("HALT")]
    lagged = [make("MATMUL", n0=40, n1=1), make("ACT", count=2, wait=0, mxu_lag=3), make("HALT")]
    assert MODEL.run(prog).per_instruction == MODEL.run(lagged).per_instruction


def test_empty_matmuls_are_never_unfinished():
    # An empty MATMUL (n0*n1 == 0) never makes the MXU busy, so a lag does not count it.  The
    # 40-vector MATMUL finishes at 69; the empty one issues at 63 (ready again at 64), the
    # 6-vector one at 64.  Two unfinished MATMULs (not three) when the ACT is in IR at 65:
    # lag 2 lets it issue at once; lag 1 waits for the first (70).
    def act_issue(lag: int) -> int:
        prog = [make("MATMUL", n0=40, n1=1), make("MATMUL", n0=0, n1=1), make("MATMUL", n0=6, n1=1),
                make("ACT", count=2, wait=2, mxu_lag=lag), make("HALT")]
        t = MODEL.run(prog)
        assert [x.issue for x in t.per_instruction[:3]] == [23, 63, 64]
        return t.per_instruction[3].issue

    assert act_issue(2) == 65
    assert act_issue(1) == 70
