"""LOOP in the ISA simulator (sim/isa/sim.py) and the cycle model (sim/npu_timing.py).

Oracles, all independent of the simulator's loop code:

* the straight-line program the LOOP doc describes, built by a plain recursive unroller
  (cocotb_tests/loop_programs.py) with every LOOP replaced by a SYNC: it must leave memory
  and every scratchpad identical, and run in the same cycles apart from its longer boot;
* a convolution written with three nested loops against a direct numpy convolution;
* hand-worked expectations for errors (which iteration fails, what ran before) and cycles.
"""
import os
import sys
from dataclasses import replace

import numpy as np
import pytest

from isa import SMALL_CONFIG, ErrorCode, encode_program, make
from isa.asm import assemble
from isa.program import Program, Segment, TensorBinding
from sim.isa.sim import IsaSim, run_program
from sim.npu_timing import TimingModel

sys.path.insert(0, os.path.dirname(__file__))
from conv_oracle import direct_conv, random_conv_case  # noqa: E402
from cocotb_tests.loop_programs import LoopProgramGenerator, Region, setup_program, unroll, without_hazards

CFG = SMALL_CONFIG
BIG = replace(SMALL_CONFIG, imem_rows=4096)     # room for the unrolled programs
BUS = CFG.bus_bytes
WPR = CFG.words_per_wide_row
DATA, OUT = 0x1000, 0x3000


def run(text: str, segments=(), cfg=CFG, **kw):
    segs = [Segment(f"seg{i}", addr, bytes(data)) for i, (addr, data) in enumerate(segments)]
    prog = Program(cfg, assemble(text), segments=segs)
    return prog, IsaSim(cfg).run(prog, **kw)


def assert_same_machine(a, b):
    assert bytes(a.memory) == bytes(b.memory)
    for name in ("asram", "wsram", "acc", "psram"):
        assert np.array_equal(getattr(a.state, name), getattr(b.state, name)), name


# -- against the unrolled program ------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_random_loops_equal_their_unrolling(seed):
    rng = np.random.default_rng(500 + seed)
    mem, setup = setup_program(rng, BIG)
    gen = LoopProgramGenerator(rng, BIG, max_depth=4 if seed % 2 else 3)
    looped = without_hazards(gen.program(setup), bytes(mem), BIG)
    flat = unroll(looped, BIG)
    assert any(i.name == "LOOP" for i in looped) and len(flat) > len(looped)

    def execute(instrs, program_addr):
        prog = Program(BIG, instrs, program_addr=program_addr)
        image = bytearray(mem) + bytearray(max(0, program_addr + 32 * len(instrs) - len(mem)))
        image[program_addr:program_addr + 32 * len(instrs)] = encode_program(instrs)
        return IsaSim(BIG, check_hazards=True).run(prog, bytes(image))

    # the looped program sits below the data, the unrolled one (longer) after everything
    a, b = execute(looped, 0), execute(flat, Region.BYTES)
    assert a.ok and b.ok, (a.error_message, b.error_message)
    assert a.hazards == [] and b.hazards == []
    assert a.instructions_executed == b.instructions_executed == len(flat)
    assert len(a.memory) == Region.BYTES
    a.memory[:Region.DATA] = b.memory[:Region.DATA] = bytes(Region.DATA)
    b.memory[Region.BYTES:] = b""
    assert_same_machine(a, b)
    # LOOP issues like SYNC: every instruction keeps its duration (the cycles, and so how
    # busy intervals merge, differ by the instruction fetch, which has more to fetch for the
    # unrolled program; test_loop_of_matmuls_streams_like_straight_line compares cycles)
    ta, tb = a.timing, b.timing
    assert [t.end - t.start for t in ta.per_instruction] == [t.end - t.start for t in tb.per_instruction]


def test_count_zero_and_shared_ends():
    """A count-0 loop as the last instruction of an outer body: the outer loop still loops
    back; inner loops ending with their outer loop; the unroller agrees."""
    text = "\n".join([
        f"DMA_LOAD sram=ASRAM ext_addr={DATA} len0=16 len1=1 len2=1",
        "LOOP count=3 body=6 inc_ext=64 wait=DMA",
        f"  DMA_STORE sram=ASRAM sram_addr=0 ext_addr={OUT} len0=1 len1=1 len2=1",
        "  LOOP count=2 body=4 inc_asram=1 inc_ext=4",
        "    LOOP count=2 body=1 inc_asram=2 inc_ext=8",
        f"      DMA_STORE sram=ASRAM sram_addr=4 ext_addr={OUT + 16} len0=1 len1=1 len2=1",
        "    LOOP count=0 body=1",
        f"      DMA_STORE sram=ASRAM sram_addr=8 ext_addr={OUT + 32} len0=1 len1=1 len2=1",
        "HALT"])
    src = bytes(range(64))
    prog, res = run(text, [(DATA, src)])
    assert res.ok and res.stop_pc == 8
    assert res.instructions_executed == 1 + 1 + 3 * (1 + 1 + 2 * (1 + 2 + 1)) + 1
    got = bytes(res.memory)
    for i in range(3):
        base = OUT + 64 * i
        assert got[base:base + 4] == src[0:4]                                   # row 0
        for j in range(2):
            for k in range(2):
                row = 4 + j + 2 * k
                at = base + 16 + 4 * j + 8 * k
                assert got[at:at + 4] == src[4 * row:4 * row + 4]
        assert got[base + 32:base + 36] == bytes(4 if i < 2 else 0)             # never runs
    assert len(got) == OUT + 2 * 64 + 32
    flat = unroll(prog.instructions, CFG)
    _, res2 = run("\n".join(disasm(flat)), [(DATA, src)], BIG)
    assert bytes(res2.memory)[OUT:] == got[OUT:]


def disasm(instrs):
    from isa.asm import disassemble_one
    return [disassemble_one(i) for i in instrs]


# -- a convolution with three nested loops ---------------------------------------------------
def conv_loops(cfg, h, w, k, stride, pad, in_zp, w_zp, weights, bias, mul, shift, out_zp):
    """CONV2D (Cin = Cout = lanes): for each output row (loop oy), zero its accumulators, then
    one MATMUL per kernel offset (loops ky, kx: a 1-instruction body), ACT, store."""
    lanes = cfg.bus_bytes
    hp, wp = h + 2 * pad, w + 2 * pad
    oh, ow = (hp - k) // stride + 1, (wp - k) // stride + 1
    wts = DATA + 0x1000
    params = wts + k * k * lanes * lanes
    out = params + 3 * cfg.psram_row_bytes
    act_dst = hp * wp
    text = f"""
        DMA_LOAD sram=ASRAM ext_addr={DATA} len0={w} len1={h} len2=1 stride1={w * lanes} pad_b0={pad} pad_a0={pad} pad_b1={pad} pad_a1={pad} pad_value={in_zp & 0xFF}
        DMA_LOAD sram=WSRAM sram_addr={lanes} ext_addr={wts} len0={k * k * lanes} len1=1 len2=1
        DMA_LOAD sram=WSRAM sram_addr=0 len0=0 len1=1 len2=1 pad_a0={lanes}   # a zero tile
        DMA_LOAD sram=PSRAM ext_addr={params} len0={3 * cfg.words_per_wide_row} len1=1 len2=1
        LOOP count={oh} body=6 inc_asram={stride * wp} inc_acc={ow} inc_ext={ow * lanes} wait=DMA
          MATMUL a_addr=0 a_stride0={stride} n0={ow} n1=1 w_addr=0 acc_addr=0 accumulate=0 wait=VPU
          LOOP count={k} body=2 inc_asram={wp} inc_wsram={k * lanes}
            LOOP count={k} body=1 inc_asram=1 inc_wsram={lanes}
              MATMUL a_addr=0 a_stride0={stride} n0={ow} n1=1 w_addr={lanes} acc_addr=0 accumulate=1 a_zp={in_zp} w_zp={w_zp}
          ACT acc_addr=0 count={ow} dst_addr={act_dst} param_addr=0 out_zp={out_zp} clamp_min=-128 clamp_max=127 scale32=1 double_round=1 wait=MXU
          DMA_STORE sram=ASRAM sram_addr={act_dst} ext_addr={out} len0={ow} len1=1 len2=1 wait=VPU
        HALT"""
    tiles = weights.transpose(0, 1, 3, 2)              # [ky][kx][cin][cout]: WSRAM row = cin
    segs = [Segment("weights", wts, tiles.astype(np.int8).tobytes()),
            Segment("params", params, np.array([bias, mul, shift]).astype("<i4").tobytes())]
    return Program(cfg, assemble(text), segments=segs,
                   inputs=[TensorBinding("x", (1, h, w, lanes), "int8", DATA, "brick")],
                   outputs=[TensorBinding("y", (1, oh, ow, lanes), "int8", out, "brick")])


@pytest.mark.parametrize("h,w,k,stride,pad", [(6, 5, 3, 1, 1), (7, 8, 3, 2, 0), (5, 5, 2, 1, 0)])
def test_conv_with_nested_loops_equals_numpy(h, w, k, stride, pad):
    cfg = CFG
    c = random_conv_case(np.random.default_rng(21), h, w, k, cfg.bus_bytes)
    prog = conv_loops(cfg, h, w, k, stride, pad, c["in_zp"], c["w_zp"], c["weights"], c["bias"], c["mul"],
                      c["shift"], c["out_zp"])
    outputs, res = run_program(prog, {"x": c["x"]}, check_hazards=True)
    assert res.hazards == []
    expected = direct_conv(c, k, stride, pad)
    assert (outputs["y"][0] == expected).all()
    oh = expected.shape[0]
    assert len(prog.instructions) == 12
    assert res.instructions_executed == 5 + oh * (1 + 1 + k * (1 + k) + 2) + 1


# -- PSRAM units -----------------------------------------------------------------------------
def test_psram_increment_moves_dma_words_and_act_rows():
    """inc_psram counts rows: a DMA into PSRAM moves by words_per_wide_row words per row."""
    lanes = CFG.array_cols
    sets = [np.array([[b] * lanes, [1 << 30] * lanes, [31 + s] * lanes]) for s, b in enumerate((5, -9))]
    raw = b"".join(p.astype("<i4").tobytes() for p in sets)
    acc_rows = np.arange(lanes * 2, dtype=np.int64).reshape(2, lanes) * 1000
    text = "\n".join([
        f"LOOP count=2 body=3 inc_psram=3 inc_ext={3 * CFG.psram_row_bytes} inc_asram=1 inc_acc=1",
        f"  DMA_LOAD sram=PSRAM sram_addr={2 * WPR} ext_addr={DATA} len0={3 * WPR} len1=1 len2=1",
        "  MATMUL n0=0 n1=0",
        "  ACT acc_addr=0 count=1 dst_addr=100 param_addr=2 clamp_min=-128 clamp_max=127 scale32=1 wait=DMA",
        "HALT"])
    prog = Program(CFG, assemble(text), segments=[Segment("p", DATA, raw)])
    sim = IsaSim(CFG)
    state_res = sim.run(prog)        # ACC starts at zero: check the parameter rows moved
    assert state_res.ok
    assert (state_res.state.psram[2:5] == sets[0]).all() and (state_res.state.psram[5:8] == sets[1]).all()
    assert not state_res.state.psram[:2].any() and not state_res.state.psram[8:].any()
    del acc_rows
    # ACC rows 0 and 1 are 0, so the output is round(bias * 2**30 >> (31 + s)) = bias / 2, bias / 4
    got = state_res.state.asram[100:102].view(np.int8)
    assert (got[0] == round(5 / 2 + 1e-9)).all() and (got[1] == int(np.floor(-9 / 4 + 0.5))).all()


# -- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,pc,executed", [
    ("LOOP count=2 body=0\nHALT", 0, 0),                                   # empty body
    ("SYNC\nLOOP count=2 body=3\nSYNC\nHALT", 1, 1),                       # past the program
    ("LOOP count=0 body=5\nHALT", 0, 0),                                   # even when skipped
    ("LOOP count=2 body=3\n LOOP count=2 body=3\n  SYNC\nSYNC\nHALT", 1, 1),  # inner past outer
    ("\n".join(["LOOP count=1 body=%d" % (9 - i) for i in range(5)] + ["SYNC"] * 5 + ["HALT"]), 4, 4),
])
def test_illegal_loops(text, pc, executed):
    _, res = run(text)
    assert (res.error_code, res.error_pc, res.stop_pc, res.instructions_executed) == \
        (ErrorCode.ILLEGAL_INSTRUCTION, pc, pc, executed)
    assert "LOOP" in res.error_message


@pytest.mark.parametrize("space,size", [
    ("ext", CFG.ext_mem_bytes), ("asram", CFG.asram_rows), ("wsram", CFG.wsram_rows),
    ("acc", CFG.acc_rows), ("psram", CFG.psram_rows)])
@pytest.mark.parametrize("sign", [1, -1])
def test_increments_sweeping_a_memory_are_illegal(space, size, sign):
    """(count - 1) * |inc| at least the space's size is ILLEGAL_INSTRUCTION at the LOOP, before
    any iteration, used or not; one less is legal, and so is any increment of a LOOP that
    never loops back (count 1)."""
    steps = 3
    inc = -(-size // steps)                        # steps * inc >= size
    for count, value, ok in ((steps + 1, inc, False), (steps + 1, (size - 1) // steps, True),
                             (1, inc * 2, True), (0, inc * 2, True)):
        _, res = run(f"SYNC\nLOOP count={count} body=1 inc_{space}={sign * value}\n SYNC\nHALT")
        if ok:
            assert res.ok, (count, value, res.error_message)
        else:
            assert (res.error_code, res.error_pc, res.instructions_executed) == \
                (ErrorCode.ILLEGAL_INSTRUCTION, 1, 1), (count, value)
            assert space.upper() in res.error_message and str(size) in res.error_message


def test_four_nested_loops_are_legal():
    text = "\n".join(["LOOP count=2 body=%d" % (4 - i) for i in range(4)] + ["SYNC", "HALT"])
    _, res = run(text)
    assert res.ok and res.instructions_executed == 1 + 2 * (1 + 2 * (1 + 2 * (1 + 2))) + 1


def test_error_in_a_later_iteration():
    """The store of iteration 3 leaves memory: iterations 0..2 happened, nothing after.
    (Four iterations: three steps stay below the memory's size, LOOP's sweep rule.)"""
    end = CFG.ext_mem_bytes
    step = 0x10000
    assert 3 * step < end
    start = end - 2 * step - 64
    text = "\n".join([
        f"DMA_LOAD sram=ASRAM ext_addr={DATA} len0=16 len1=1 len2=1",
        f"LOOP count=4 body=2 inc_ext={step} wait=DMA",
        "  SYNC",
        f"  DMA_STORE sram=ASRAM ext_addr={start} len0=16 len1=1 len2=1 wait=DMA",
        f"DMA_STORE sram=ASRAM ext_addr={OUT} len0=16 len1=1 len2=1",
        "HALT"])
    src = bytes(range(64))
    _, res = run(text, [(DATA, src)])
    assert (res.error_code, res.error_pc, res.stop_pc) == (ErrorCode.DMA_OUT_OF_RANGE, 3, 3)
    assert res.instructions_executed == 2 + 3 * 2 + 1          # the failing store not counted
    mem = bytes(res.memory)
    for i in range(3):
        assert mem[start + i * step:start + i * step + 64] == src
    assert len(mem) == start + 2 * step + 64 and mem[OUT:OUT + 64] == bytes(64)
    t = res.timing
    assert t.stop_index == 2 + 3 * 2 + 1 and t.per_instruction[-1].issue == res.cycles - 1


@pytest.mark.parametrize("incs,line,code,fails_at", [
    ("inc_asram=-3", "ACT count=2 dst_addr=6", ErrorCode.SRAM_OVERFLOW, 3),      # dst 6, 3, 0, -3
    ("inc_acc=-3", "ACT count=2 acc_addr=6", ErrorCode.SRAM_OVERFLOW, 3),
    ("inc_psram=-1", "ACT count=0 param_addr=2", ErrorCode.SRAM_OVERFLOW, 3),    # params always read
    ("inc_asram=-3 inc_acc=-3", "ACT count=0 dst_addr=6 acc_addr=6", ErrorCode.NONE, None),  # touches nothing
    ("inc_asram=-3", "MATMUL n0=1 n1=1 a_addr=7", ErrorCode.SRAM_OVERFLOW, 3),
    ("inc_acc=-3", "MATMUL n0=1 n1=1 acc_addr=7", ErrorCode.SRAM_OVERFLOW, 3),
    ("inc_wsram=-3", "MATMUL n0=0 n1=1 w_addr=7", ErrorCode.SRAM_OVERFLOW, 3),   # the tile always
    (f"inc_ext={-BUS}", f"DMA_LOAD ext_addr={2 * BUS} len0=1 len1=1 len2=1", ErrorCode.DMA_OUT_OF_RANGE, 3),
    ("inc_asram=-3", "DMA_LOAD sram_addr=7 len0=1 len1=1 len2=1", ErrorCode.SRAM_OVERFLOW, 3),
    ("inc_psram=-1", f"DMA_LOAD sram=PSRAM sram_addr={2 * WPR} len0=1 len1=1 len2=1", ErrorCode.SRAM_OVERFLOW, 3),
    (f"inc_ext={-BUS} inc_asram=-3", f"DMA_STORE sram_addr=7 ext_addr={2 * BUS} len0=0 len1=1 len2=1",
     ErrorCode.NONE, None),
])
def test_negative_effective_addresses(incs, line, code, fails_at):
    """Decrementing addresses go below 0 at iteration 3 (of 0..4): out of range there, and
    not at all for an instruction that touches no row."""
    text = "\n".join([f"LOOP count=5 body=1 {incs}", "  " + line, "HALT"])
    _, res = run(text)
    assert res.error_code == code
    if fails_at is None:
        assert res.ok and res.instructions_executed == 7
    else:
        assert res.error_pc == 1 and res.instructions_executed == 1 + fails_at


def test_halt_and_pc_overflow_inside_loops():
    _, res = run("LOOP count=3 body=2\nSYNC\nHALT\nSYNC")
    assert res.ok and (res.stop_pc, res.instructions_executed) == (2, 3)
    _, res = run("LOOP count=3 body=1\nSYNC")
    assert (res.error_code, res.error_pc, res.instructions_executed) == (ErrorCode.PC_OVERFLOW, 2, 4)


def test_hazard_between_iterations():
    """The next iteration's load overwrites rows the previous MATMUL may still read."""
    text = "\n".join([
        "LOOP count=2 body=2 inc_wsram=0",
        f"  DMA_LOAD sram=ASRAM ext_addr={DATA} len0=8 len1=1 len2=1",
        "  MATMUL n0=8 n1=1 a_stride0=1 wait=DMA",
        "HALT"])
    prog = Program(CFG, assemble(text))
    res = IsaSim(CFG, check_hazards=True).run(prog)
    assert [(h.kind, h.memory, h.earlier_pc, h.later_pc) for h in res.hazards] == [("WAR", "ASRAM", 2, 1)]
    assert "iteration 1" in str(res.hazards[0])
    prog.instructions[1].values["wait"] = 2        # the load waits for the MXU: sound
    assert IsaSim(CFG, check_hazards=True).run(prog).hazards == []


# -- cycle model -----------------------------------------------------------------------------
MODEL = TimingModel(CFG)


def test_loop_of_matmuls_streams_like_straight_line():
    # Fetch: 8 words per instruction, instruction i readable at 14 + 8i.  The 60-vector
    # MATMUL (issue 23, front end ready again at 24 + 60 - 1 = 83) lets the fetch run ahead.
    # The LOOP is read at 22 and enters IR once instruction 2 is readable (30): issue 31.
    looped = MODEL.run([make("MATMUL", n0=60, n1=1), make("LOOP", count=4, body=1),
                        make("MATMUL", n0=6, n1=1), make("HALT")])
    assert [t.issue for t in looped.per_instruction] == [23, 31, 83, 89, 95, 101, 114]
    assert looped.pcs == [0, 1, 2, 2, 2, 2, 3]
    assert (looped.total_cycles, looped.busy["MXU"]) == (115, 113 - 24 + 1)
    flat = MODEL.run([make("MATMUL", n0=60, n1=1), make("SYNC")] + [make("MATMUL", n0=6, n1=1)] * 4
                     + [make("HALT")])
    assert flat.per_instruction == looped.per_instruction


def test_loop_timing_rules():
    # count 0: LOOP takes its slot, the HALT (instruction 2, readable at 30) enters IR next
    t = MODEL.run([make("LOOP", count=0, body=1), make("MATMUL", n0=6, n1=1), make("HALT")])
    assert [x.issue for x in t.per_instruction] == [31, 32] and t.total_cycles == 33
    # count 0 with the buffer ahead: the MATMUL (issue 23, small array) is idle from 90, so
    # the SYNC waiting for it issues at 90 and the next SYNC, which left the read port at 90,
    # at 91; the LOOP, read at 90, waits in the read port one cycle (ZERO_LOOP_WAIT: its skip
    # is registered) and leaves at 92 instead of 91, issuing at 93; the HALT past the
    # skipped body is read at 92 and enters IR at 94, the cycle after the LOOP issues.
    body = [make("MATMUL", n0=60, n1=1), make("SYNC", wait=2), make("SYNC")]
    t = MODEL.run(body + [make("LOOP", count=0, body=1), make("MATMUL", n0=6, n1=1), make("HALT")])
    assert [x.issue for x in t.per_instruction] == [23, 90, 91, 93, 94] and t.total_cycles == 95
    assert t.pcs == [0, 1, 2, 3, 5]
    t = MODEL.run(body + [make("LOOP", count=1, body=1), make("MATMUL", n0=6, n1=1), make("HALT")])
    assert [x.issue for x in t.per_instruction][:4] == [23, 90, 91, 92]      # no wait with count 1
    # the LOOP waits once (for the DMA), the body's SYNCs do not
    t = MODEL.run([make("DMA_LOAD", len0=5, len1=1, len2=1), make("LOOP", count=3, body=1, wait=1),
                   make("SYNC"), make("HALT")])
    # DMA issues 23 (busy 24 .. 23+5+4 = 32: instruction 2's words were all requested by
    # 23, readable at 30; instruction 3's wait, readable at 47); the LOOP waits for the DMA
    # (wait=1): issue 33; the last SYNC leaves the read port once the HALT is readable
    assert [x.issue for x in t.per_instruction] == [23, 33, 34, 35, 48, 49]
    # an illegal LOOP stops the model by itself
    t = MODEL.run([make("SYNC"), make("LOOP", count=1, body=0), make("HALT")])
    assert (t.stop_index, t.pcs[-1]) == (1, 1)
