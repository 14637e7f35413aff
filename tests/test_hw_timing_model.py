"""sim/npu_timing.py on small programs whose cycles were worked out by hand from the rules
in its docstring (the cocotb tests compare the same model with the RTL at length)."""
from __future__ import annotations

from isa import SMALL_CONFIG, make
from sim.npu_timing import InstrTiming, TimingModel

# SMALL_CONFIG: bus 4 bytes (8 words per instruction), mem_latency 4, 4 array rows.
MODEL = TimingModel(SMALL_CONFIG)


def test_dependent_chain():
    # Fetch: 8 words per instruction from cycle 0, instruction i readable at 13 + 8i while
    # the DMA is idle (the last word of i requested at 7 + 8i, its response 4 later, then
    # FETCH_ARRIVAL = 2).  Instruction 0 is read at 13 and enters IR once instruction 1 is
    # readable (21), so it is in IR at 22.
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1),
            make("ACT", count=2, wait=2), make("HALT")]
    t = MODEL.run(prog)
    assert t.run_start == 0
    assert t.per_instruction == [
        InstrTiming(22, 23, 29),      # DMA_LOAD: 3 slots + latency 4 (bus busy 23..29)
        InstrTiming(37, 38, 45),      # MATMUL: in IR once instruction 2 is readable: its
                                      # words at 16..22 and 30 (after the DMA): 36
        InstrTiming(46, 47, 58),      # ACT waits for the MXU; 2 rows + 10
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
    assert [x.issue for x in t.per_instruction] == [22, 62, 68, 74, 78, 86]
    assert t.total_cycles == 87
    assert t.busy["MXU"] == 85 - 23 + 1        # one merged busy interval


def test_stops():
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1)]
    # the MATMUL fails: the NPU stops once the DMA is idle, nothing more runs
    # (it enters IR at 37, once instruction 2 is readable: its last words wait for the DMA)
    t = MODEL.run(prog, stop_at=1, prog_len=4)
    assert (t.total_cycles, t.stop_index, t.busy["MXU"]) == (38, 1, 0)
    # running off the end behaves the same at index len(instructions)
    assert MODEL.run(prog[:1], prog_len=4).total_cycles == 38
    # empty work never makes a unit busy
    t = MODEL.run([make("DMA_STORE"), make("ACT"), make("MATMUL"), make("HALT")])
    assert t.busy == {"DMA": 0, "MXU": 0, "VPU": 0}
    assert MODEL.run([make("HALT")], boot_error=True).total_cycles == 0


def test_act_mxu_lag():
    # The MATMULs as in test_matmuls_stream_back_to_back: the first (40 vectors) issues at
    # 22 and writes ACC last at 23 + 40 + 4 + 1 = 68; the second issues at 62 (ready after
    # max(N, ROWS) cycles) and finishes at 63 + 6 + 5 = 74.  The ACT is in IR at 63.
    def act_issue(lag: int) -> int:
        prog = [make("MATMUL", n0=40, n1=1), make("MATMUL", n0=6, n1=1),
                make("ACT", count=2, wait=2, mxu_lag=lag), make("HALT")]
        t = MODEL.run(prog)
        assert [x.issue for x in t.per_instruction[:2]] == [22, 62]
        return t.per_instruction[2].issue

    assert act_issue(0) == 75          # the MXU idle: after the second MATMUL's last write
    assert act_issue(1) == 69          # one unfinished allowed: after the first's
    assert act_issue(2) == 63          # two allowed, two issued: no wait at all
    assert act_issue(3) == 63
    # Without MXU in the wait mask the lag means nothing.
    prog = [make("MATMUL", n0=40, n1=1), make("ACT", count=2, wait=0, mxu_lag=0), make("HALT")]
    lagged = [make("MATMUL", n0=40, n1=1), make("ACT", count=2, wait=0, mxu_lag=3), make("HALT")]
    assert MODEL.run(prog).per_instruction == MODEL.run(lagged).per_instruction


def test_empty_matmuls_are_never_unfinished():
    # An empty MATMUL (n0*n1 == 0) never makes the MXU busy, so a lag does not count it.  The
    # 40-vector MATMUL finishes at 68; the empty one issues at 62 (ready again at 63), the
    # 6-vector one at 63.  Two unfinished MATMULs (not three) when the ACT is in IR at 64:
    # lag 2 lets it issue at once; lag 1 waits for the first (69).
    def act_issue(lag: int) -> int:
        prog = [make("MATMUL", n0=40, n1=1), make("MATMUL", n0=0, n1=1), make("MATMUL", n0=6, n1=1),
                make("ACT", count=2, wait=2, mxu_lag=lag), make("HALT")]
        t = MODEL.run(prog)
        assert [x.issue for x in t.per_instruction[:3]] == [22, 62, 63]
        return t.per_instruction[3].issue

    assert act_issue(2) == 64
    assert act_issue(1) == 69
