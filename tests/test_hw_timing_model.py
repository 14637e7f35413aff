"""sim/npu_timing.py on small programs whose cycles were worked out by hand from the rules
in its docstring (the cocotb tests compare the same model with the RTL at length)."""
from __future__ import annotations

from isa import SMALL_CONFIG, make
from sim.npu_timing import InstrTiming, TimingModel

# SMALL_CONFIG: bus 4 bytes (8 words per instruction), mem_latency 4, 4 array rows.
MODEL = TimingModel(SMALL_CONFIG)


def test_dependent_chain():
    # Fetch: 8 words per instruction from cycle 0, instruction i readable at 12 + 8i while
    # the DMA is idle.  Instruction 0 is read at 12 and enters IR once instruction 1 is
    # readable (20), so it is in IR at 21.
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1),
            make("ACT", count=2, wait=2), make("HALT")]
    t = MODEL.run(prog)
    assert t.run_start == 0
    assert t.per_instruction == [
        InstrTiming(21, 22, 28),      # DMA_LOAD: 3 slots + latency 4 (bus busy 22..28)
        InstrTiming(36, 37, 44),      # MATMUL: in IR once instruction 2 is readable: its
                                      # words at 16..21 and 29, 30 (after the DMA): 35
        InstrTiming(45, 46, 54),      # ACT waits for the MXU; 2 rows + 7
        InstrTiming(55, 55, 55),      # HALT when all idle
    ]
    assert t.total_cycles == 56
    assert t.busy == {"DMA": 7, "MXU": 8, "VPU": 9}


def test_matmuls_stream_back_to_back():
    # The first MATMUL (40 vectors) gives the fetch time to run ahead (instruction i
    # readable at 12 + 8i); then the front end takes the next MATMUL in the last cycle
    # of the one before: after max(N, ROWS) cycles.
    prog = [make("MATMUL", n0=40, n1=1), make("MATMUL", n0=6, n1=1), make("MATMUL", n0=6, n1=1),
            make("MATMUL", n0=1, n1=1), make("MATMUL", n0=1, n1=1), make("HALT")]
    t = MODEL.run(prog)
    assert [x.issue for x in t.per_instruction] == [21, 61, 67, 73, 77, 85]
    assert t.total_cycles == 86
    assert t.busy["MXU"] == 84 - 22 + 1        # one merged busy interval


def test_stops():
    prog = [make("DMA_LOAD", len0=3, len1=1, len2=1), make("MATMUL", n0=2, n1=1, wait=1)]
    # the MATMUL fails: the NPU stops once the DMA is idle, nothing more runs
    # (it enters IR at 36, once instruction 2 is readable: its last words wait for the DMA)
    t = MODEL.run(prog, stop_at=1, prog_len=4)
    assert (t.total_cycles, t.stop_index, t.busy["MXU"]) == (37, 1, 0)
    # running off the end behaves the same at index len(instructions)
    assert MODEL.run(prog[:1], prog_len=4).total_cycles == 37
    # empty work never makes a unit busy
    t = MODEL.run([make("DMA_STORE"), make("ACT"), make("MATMUL"), make("HALT")])
    assert t.busy == {"DMA": 0, "MXU": 0, "VPU": 0}
    assert MODEL.run([make("HALT")], boot_error=True).total_cycles == 0
