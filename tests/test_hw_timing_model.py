"""sim/npu_timing.py on small programs whose cycles were worked out by hand from the rules
in its docstring (the cocotb tests compare the same model with the RTL at length)."""
from __future__ import annotations

from isa import SMALL_CONFIG, make
from sim.npu_timing import InstrTiming, TimingModel

# SMALL_CONFIG: bus 4 bytes (8 words per instruction), mem_latency 4, 4 array rows.
MODEL = TimingModel(SMALL_CONFIG)


def test_dependent_chain():
    # 4 instructions: boot 32 words, RUN at 36, instruction 0 in IR at 38.
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1),
            make("ACT", count=2, wait=2), make("HALT")]
    t = MODEL.run(prog)
    assert t.run_start == 36
    assert t.per_instruction == [
        InstrTiming(38, 39, 45),      # DMA_LOAD: 3 slots + latency 4
        InstrTiming(46, 47, 54),      # MATMUL waits for the DMA; 2 vectors + 4 rows + 2
        InstrTiming(55, 56, 62),      # ACT waits for the MXU; 2 rows + 5
        InstrTiming(63, 63, 63),      # HALT when all idle
    ]
    assert t.total_cycles == 64
    assert t.busy == {"DMA": 7, "MXU": 8, "VPU": 7}


def test_matmuls_stream_back_to_back():
    prog = [make("MATMUL", n0=6, n1=1), make("MATMUL", n0=6, n1=1), make("MATMUL", n0=1, n1=1),
            make("MATMUL", n0=1, n1=1), make("HALT")]
    t = MODEL.run(prog)
    # the front end takes the next MATMUL in its last cycle: after max(N, ROWS) cycles
    assert [x.issue for x in t.per_instruction] == [46, 52, 58, 62, 70]
    assert t.total_cycles == 71
    assert t.busy["MXU"] == 69 - 47 + 1        # one merged busy interval


def test_stops():
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1)]
    # the MATMUL fails: the NPU stops once the DMA is idle, nothing more runs
    t = MODEL.run(prog, stop_at=1, prog_len=4)
    assert (t.total_cycles, t.stop_index, t.busy["MXU"]) == (47, 1, 0)
    # running off the end behaves the same at index len(instructions)
    assert MODEL.run(prog[:1], prog_len=4).total_cycles == 47
    # empty work never makes a unit busy
    t = MODEL.run([make("DMA_STORE"), make("ACT"), make("MATMUL"), make("HALT")])
    assert t.busy == {"DMA": 0, "MXU": 0, "VPU": 0}
    assert MODEL.run([make("HALT")], boot_error=True).total_cycles == 0
