"""The hardware decoder and instruction checker (hw/decode.py, hw/checker.py) in Amaranth's
own simulator: no Verilator needed, runs in seconds.

The expected error codes come from a direct Python transcription of the error rules in the
isa/instructions.py docs, on constrained-random instructions whose fields cluster around
the limits (so every rule is hit on both sides), inside random loop contexts: address
offsets (the effective address of each address field, listed here by hand) and the LOOP
nesting inputs."""
from __future__ import annotations

import os
import sys

import numpy as np
from amaranth.sim import Simulator

from isa import SMALL_CONFIG, make
from isa.encoding import encode_int
from isa.instructions import BY_NAME, INSTR_BITS, INSTRUCTIONS, LOOP_DEPTH, OPCODE_BITS, ErrorCode, Sram
from hw.checker import InstrChecker
from hw.decode import instr_layout

sys.path.insert(0, os.path.dirname(__file__))
import vpu_doc_rules  # noqa: E402

CFG = SMALL_CONFIG


# Address fields and their LOOP spaces, written out from the ISA docs (not from the table's
# tags, which the hardware derives its offsetting from).
ADDRESS = {
    "DMA_LOAD": {"sram_addr": "sram", "ext_addr": "ext"},
    "DMA_STORE": {"sram_addr": "sram", "ext_addr": "ext"},
    "MATMUL": {"a_addr": "asram", "w_addr": "wsram", "acc_addr": "acc"},
    "ACT": {"acc_addr": "acc", "dst_addr": "asram", "param_addr": "psram"},
    # vector operands: the space their *_mem field names (0 ASRAM, 1 ACC, 2 PSRAM)
    "VRESCALE": {"a_addr": "a_mem", "d_addr": "d_mem", "param_addr": "psram"},
    "VALU": {"a_addr": "a_mem", "b_addr": "b_mem", "c_addr": "c_mem", "d_addr": "d_mem"},
    "VPOOL": {"a_addr": "a_mem", "d_addr": "d_mem"},
    "VDWCONV": {"a_addr": "a_mem", "b_addr": "b_mem", "d_addr": "d_mem", "param_addr": "psram"},
    "TABLE": {"a_addr": "a_mem", "d_addr": "d_mem"},
}
NO_LOOP = dict(offsets={}, full=False, loop_end=None)


def effective(cfg, name: str, v: dict, offsets: dict) -> dict:
    """Fields with the loop offsets added (a DMA into PSRAM moves words_per_wide_row words per row)."""
    out = dict(v)
    for fname, space in ADDRESS.get(name, {}).items():
        if space == "sram":
            if v["sram"] > 2:
                continue
            space, unit = ["asram", "wsram", "psram"][v["sram"]], (cfg.words_per_wide_row if v["sram"] == 2 else 1)
        elif space.endswith("_mem"):
            if v[space] > 2:
                continue
            space, unit = ["asram", "acc", "psram"][v[space]], 1
        else:
            unit = 1
        out[fname] = v[fname] + unit * offsets.get(space, 0)
    return out


def expected_code(cfg, name: str, v: dict, pc=0, prog_len=1, offsets=None, full=False, loop_end=None,
                  active=False) -> ErrorCode:
    bus = cfg.bus_bytes
    E = ErrorCode
    v = effective(cfg, name, v, offsets or {})
    if name == "BRANCH":          # isa/instructions.py BRANCH: Errors
        if v["test"] == 3 or v["target"] >= prog_len or active:
            return E.ILLEGAL_INSTRUCTION
        rows = cfg.acc_rows if v["mem"] == 1 else cfg.asram_rows
        if v["test"] != 0 and v["row"] >= rows:
            return E.SRAM_OVERFLOW
        return E.NONE
    if name == "LOOP":
        last = pc + v["body"]
        end = prog_len if loop_end is None else loop_end
        if v["body"] == 0 or last >= prog_len or full or last >= end:
            return E.ILLEGAL_INSTRUCTION
        # an increment that sweeps at least its memory over the iterations
        sizes = {"inc_ext": cfg.ext_mem_bytes, "inc_asram": cfg.asram_rows, "inc_wsram": cfg.wsram_rows,
                 "inc_acc": cfg.acc_rows, "inc_psram": cfg.psram_rows}
        if v["count"] >= 2 and any((v["count"] - 1) * abs(v[k]) >= size for k, size in sizes.items()):
            return E.ILLEGAL_INSTRUCTION
        return E.NONE
    if name in ("VRESCALE", "VALU", "VPOOL", "VDWCONV"):
        return vpu_doc_rules.expected_code(cfg, name, v)
    if name == "TABLE":
        return table_expected_code(cfg, v)
    if name in ("DMA_LOAD", "DMA_STORE"):
        if (name == "DMA_LOAD" and v["sram"] > max(Sram)) or (name == "DMA_STORE" and v["sram"] != Sram.ASRAM):
            return E.ILLEGAL_INSTRUCTION
        if v["elem"] not in (0, 1, 2, 4, 8) or (v["elem"] == 0 and v["stride0"] != 0):
            return E.ILLEGAL_INSTRUCTION
        # word mode: E = BUS, stride0 = BUS; element mode: E = elem
        e, s0 = (v["elem"], v["stride0"]) if v["elem"] else (bus, bus)
        if v["ext_addr"] % e or v["stride0"] % e or v["stride1"] % e or v["stride2"] % e:
            return E.DMA_MISALIGNED
        if v["len0"] and v["len1"] and v["len2"]:
            inner = (v["len0"] - 1) * s0
            lowest = v["ext_addr"] + min(0, inner)
            last = v["ext_addr"] + (v["len2"] - 1) * v["stride2"] + (v["len1"] - 1) * v["stride1"] + max(0, inner) + e
            if lowest < 0 or last > cfg.ext_mem_bytes:
                return E.DMA_OUT_OF_RANGE
        if name == "DMA_LOAD":
            per_line = -(-(v["len0"] + v["pad_b0"] + v["pad_a0"]) * e // bus)
            words = v["len2"] * (v["len1"] + v["pad_b1"] + v["pad_a1"]) * per_line
        else:
            words = v["len1"] * v["len2"] * -(-v["len0"] * e // bus)
        depth = {0: cfg.asram_rows, 1: cfg.wsram_rows, 2: cfg.psram_rows * cfg.words_per_wide_row}[v["sram"]]
        if words and not 0 <= v["sram_addr"] <= depth - words:
            return E.SRAM_OVERFLOW
    elif name == "MATMUL":
        n = v["n0"] * v["n1"]
        p = 2 if v["a_type"] == 1 else 1                     # INT16: 2 ASRAM rows in, 2 ACC rows out
        tile = cfg.array_rows // 2 if v["w_type"] == 1 else cfg.array_rows    # INT4: packed
        if not 0 <= v["w_addr"] <= cfg.wsram_rows - tile:
            return E.SRAM_OVERFLOW
        a_last = v["a_addr"] + (v["n1"] - 1) * v["a_stride1"] + (v["n0"] - 1) * v["a_stride0"] + p - 1
        if n and (v["a_addr"] < 0 or a_last >= cfg.asram_rows or not 0 <= v["acc_addr"] <= cfg.acc_rows - p * n):
            return E.SRAM_OVERFLOW
    elif name == "ACT":
        if not 0 <= v["param_addr"] <= cfg.psram_rows - 3:
            return E.SRAM_OVERFLOW
        c = v["count"]
        if c and not (0 <= v["acc_addr"] <= cfg.acc_rows - c and 0 <= v["dst_addr"] <= cfg.asram_rows - c):
            return E.SRAM_OVERFLOW
    return E.NONE


def table_expected_code(cfg, v: dict) -> ErrorCode:
    """The TABLE doc's error rules (mode 0 LOAD, 1 INT8, 2 INT16; TSRAM is 2048 bytes)."""
    E = ErrorCode
    mode, a_mem, d_mem = v["mode"], v["a_mem"], v["d_mem"]
    n0, n1 = v["n0"], v["n1"]
    if mode == 3 or a_mem not in (0, 1) or (mode == 0 and a_mem != 0) or n0 * n1 > 1 << 24:
        return E.ILLEGAL_INSTRUCTION
    if n0 * n1 == 0:
        return E.NONE
    depth = {0: cfg.asram_rows, 1: cfg.acc_rows}
    R = 2 if (mode == 2 and a_mem == 0) else 1
    W = 4 if (mode == 2 and d_mem == 0) else 1
    spans = [(v["a_addr"], v["a_stride0"], v["a_stride1"], R, depth[a_mem])]
    if mode != 0:
        spans.append((v["d_addr"], v["d_stride0"], v["d_stride1"], W, depth[d_mem]))
    for addr, s0, s1, rows, size in spans:
        if addr < 0 or addr + (n1 - 1) * s1 + (n0 - 1) * s0 + rows - 1 >= size:
            return E.SRAM_OVERFLOW
    t_rows = n0 * n1 if mode == 0 else (256 if mode == 1 else 2048) // cfg.bus_bytes
    if v["t_addr"] + t_rows > 2048 // cfg.bus_bytes:
        return E.SRAM_OVERFLOW
    return E.NONE


def edge_value(rng, f, limit: int) -> int:
    """A field value near ``limit`` (a memory size) or near the field's own range ends."""
    choices = [0, 1, f.max, f.min, limit - 1, limit, limit + 1, limit // 2, int(rng.integers(f.min, f.max + 1))]
    choices += [limit // k for k in (3, 4, 7, 16) if limit // k]
    value = int(choices[int(rng.integers(len(choices)))])
    return min(max(value, f.min), f.max)


def random_instruction(rng, cfg, names=None):
    defn = BY_NAME[str(rng.choice(names))] if names else INSTRUCTIONS[int(rng.integers(len(INSTRUCTIONS)))]
    limits = {"ext_addr": cfg.ext_mem_bytes, "stride1": cfg.ext_mem_bytes // 8, "stride2": cfg.ext_mem_bytes // 4,
              "sram_addr": cfg.asram_rows, "len0": 64, "len1": 16, "len2": 8, "a_addr": cfg.asram_rows,
              "a_stride0": 64, "a_stride1": 128, "n0": 32, "n1": 8, "w_addr": cfg.wsram_rows,
              "acc_addr": cfg.acc_rows, "count": cfg.acc_rows, "dst_addr": cfg.asram_rows,
              "param_addr": cfg.psram_rows, "body": 8, "t_addr": 2048 // cfg.bus_bytes}
    values = {}
    for f in defn.fields:
        if f.name == "sram":
            values[f.name] = int(rng.integers(0, 4))
        elif f.name == "elem":       # word mode, the element sizes, a few illegal values
            values[f.name] = int(rng.choice([0, 0, 0, 0, 1, 2, 4, 8, 3]))
        elif f.name == "pack":           # both values, drawn without advancing the stream
            values[f.name] = values["len0"] & 1
        elif f.name == "stride0":        # after elem; word mode wants 0
            zero = rng.random() < (0.9 if values["elem"] == 0 else 0.2)
            values[f.name] = 0 if zero else edge_value(rng, f, int(rng.choice([-1, 1])) * 64) // 8 * 8
        elif f.name in ("ext_addr", "stride1", "stride2") and rng.random() < 0.7:
            values[f.name] = edge_value(rng, f, limits[f.name]) // cfg.bus_bytes * cfg.bus_bytes
            if rng.random() < 0.2:        # aligned to an element only
                values[f.name] = min(values[f.name] + int(rng.choice([1, 2, 4])), f.max)
        else:
            values[f.name] = edge_value(rng, f, limits.get(f.name, 8))
    if defn.name == "LOOP" and rng.random() < 0.7:
        # Increments whose sweep over the iterations, (count - 1) * |inc|, is 0 or just
        # below or at the space's size (LOOP's errors), either sign.
        sizes = {"inc_ext": cfg.ext_mem_bytes, "inc_asram": cfg.asram_rows, "inc_wsram": cfg.wsram_rows,
                 "inc_acc": cfg.acc_rows, "inc_psram": cfg.psram_rows}
        values["count"] = int(rng.choice([0, 1, 2, 3, 7, 100, 65535]))
        steps = max(values["count"] - 1, 1)
        for name, size in sizes.items():
            below = (size - 1) // steps
            pick = [0, 0, 0, 1, below, below + 1][int(rng.integers(6))] if rng.random() < 0.5 else 0
            f = next(g for g in BY_NAME["LOOP"].fields if g.name == name)
            values[name] = min(max(pick * int(rng.choice([-1, 1])), f.min), f.max)
    values["wait"] = int(rng.integers(0, 8))
    return make(defn.name, **values)


def random_context(rng, cfg):
    """Loop offsets (none half the time, else around the memory sizes, either sign, up to
    the LOOP_DEPTH sizes less one that legal LOOPs can sum to), and the LOOP nesting inputs:
    (pc, prog_len, context) with context as for expected_code."""
    prog_len = int(rng.integers(1, 30))
    pc = int(rng.integers(0, prog_len))
    if rng.random() < 0.5:
        return pc, prog_len, NO_LOOP
    sizes = {"ext": cfg.ext_mem_bytes, "asram": cfg.asram_rows, "wsram": cfg.wsram_rows,
             "acc": cfg.acc_rows, "psram": cfg.psram_rows}
    offsets = {}
    for space, size in sizes.items():
        pick = int(rng.integers(0, 5))
        value = [0, int(rng.integers(1, 9)), size // 2, size, LOOP_DEPTH * (size - 1)][pick]
        offsets[space] = value * int(rng.choice([-1, 1]))
    offsets["ext"] -= offsets["ext"] % cfg.bus_bytes if rng.random() < 0.8 else 0
    return pc, prog_len, dict(offsets=offsets, full=bool(rng.random() < 0.2),
                              loop_end=int(rng.integers(0, prog_len + 1)))


def simulate(cases):
    """Run the checker on (word, pc, prog_len[, context]) cases; returns the codes (and the
    effective words, when contexts are given)."""
    dut = InstrChecker(CFG)
    out, words, oks = [], [], []

    async def bench(ctx):
        for word, pc, prog_len, *context in cases:
            c = context[0] if context else NO_LOOP
            ctx.set(dut.word, word)
            ctx.set(dut.pc, pc)
            ctx.set(dut.prog_len, prog_len)
            for space in ("ext", "asram", "wsram", "acc", "psram"):
                ctx.set(dut.offsets[space], c["offsets"].get(space, 0))
            ctx.set(dut.loop_full, c["full"])
            ctx.set(dut.loop_end, prog_len if c["loop_end"] is None else c["loop_end"])
            ctx.set(dut.loop_active, c.get("active", False))
            out.append(ErrorCode(ctx.get(dut.code)))
            words.append(ctx.get(dut.word_eff))
            oks.append(ctx.get(dut.loop_ok))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return (out, words, oks) if cases and len(cases[0]) > 3 else out


def test_checker_random_instructions():
    rng = np.random.default_rng(0)
    instrs = [random_instruction(rng, CFG) for _ in range(1500)]
    codes = simulate([(encode_int(i), 0, 1) for i in instrs])
    expected = [expected_code(CFG, i.name, i.values) for i in instrs]
    bad = [(i, c, e) for i, c, e in zip(instrs, codes, expected) if c != e]
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    hits = {e for e in expected}
    assert {ErrorCode.NONE, ErrorCode.ILLEGAL_INSTRUCTION, ErrorCode.DMA_MISALIGNED,
            ErrorCode.DMA_OUT_OF_RANGE, ErrorCode.SRAM_OVERFLOW} <= hits


def test_checker_dma_modes():
    """DMA_LOAD and DMA_STORE only, in word and element mode: every error of both modes."""
    rng = np.random.default_rng(4)
    instrs = [random_instruction(rng, CFG, names=["DMA_LOAD", "DMA_STORE"]) for _ in range(1500)]
    codes = simulate([(encode_int(i), 0, 1) for i in instrs])
    expected = [expected_code(CFG, i.name, i.values) for i in instrs]
    bad = [(i, c, e) for i, c, e in zip(instrs, codes, expected) if c != e]
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    hits = {(i.values["elem"] != 0, e) for i, e in zip(instrs, expected)}
    assert {(mode, code) for mode in (False, True) for code in ErrorCode if code <= ErrorCode.SRAM_OVERFLOW} <= hits


def test_checker_dma_range_edges():
    """Transfers whose lowest or highest byte is exactly at the ends of memory, or one
    element past them, in both modes, with positive, zero and negative stride0."""
    instrs = []
    for name in ("DMA_LOAD", "DMA_STORE"):
        for elem in (0, 1, 2, 4, 8):
            e = elem or CFG.bus_bytes
            for s0 in ({e, 0, -e, 3 * e} if elem else {0}):
                for len0, len1, s1 in ((1, 1, 0), (3, 2, 5 * e), (5, 3, 0)):
                    inner = (len0 - 1) * (s0 if elem else e)
                    span_hi = (len1 - 1) * s1 + max(0, inner) + e
                    base = dict(sram=0, sram_addr=0, elem=elem, stride0=s0, len0=len0, len1=len1, len2=1, stride1=s1)
                    for ext in (CFG.ext_mem_bytes - span_hi, CFG.ext_mem_bytes - span_hi + e,
                                -min(0, inner), -min(0, inner) - e):
                        if 0 <= ext < 1 << 32:
                            instrs.append(make(name, ext_addr=ext, **base))
    codes = simulate([(encode_int(i), 0, 1) for i in instrs])
    expected = [expected_code(CFG, i.name, i.values) for i in instrs]
    bad = [(i, c, e) for i, c, e in zip(instrs, codes, expected) if c != e]
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    assert {ErrorCode.NONE, ErrorCode.DMA_OUT_OF_RANGE} <= set(expected)


def test_checker_inside_loops():
    """Effective addresses (either sign, past the field widths) and LOOP legality; the
    effective word of every passing instruction carries the effective addresses."""
    rng = np.random.default_rng(2)
    cases, instrs = [], []
    for _ in range(1500):
        instr = random_instruction(rng, CFG)
        pc, prog_len, context = random_context(rng, CFG)
        cases.append((encode_int(instr), pc, prog_len, context))
        instrs.append(instr)
    codes, words, oks = simulate(cases)
    bad, hits = [], set()
    for instr, (_, pc, prog_len, context), code, word, ok in zip(instrs, cases, codes, words, oks):
        want = expected_code(CFG, instr.name, instr.values, pc, prog_len, **context)
        assert ok == (instr.name == "LOOP" and want == ErrorCode.NONE), (instr, context)
        hits.add((instr.name, want))
        if code != want:
            bad.append((instr, pc, prog_len, context, code, want))
        elif want == ErrorCode.NONE:
            eff = effective(CFG, instr.name, instr.values, context["offsets"])
            view = instr_layout(instr.name).from_bits(word)
            got = {f.name: int(view[f.name]) for f, _ in instr.defn.layout()}
            # an address no word is moved to or from may lie outside its field: it is cut
            want = {f.name: eff[f.name] % (1 << f.width) if f.name in ADDRESS.get(instr.name, {})
                    else eff[f.name] for f, _ in instr.defn.layout()}
            assert got == want, (instr, context)
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    for name in ("DMA_LOAD", "DMA_STORE", "MATMUL", "ACT", "LOOP"):
        assert (name, ErrorCode.NONE) in hits
    for name, code in (("LOOP", ErrorCode.ILLEGAL_INSTRUCTION), ("DMA_LOAD", ErrorCode.DMA_OUT_OF_RANGE),
                       ("MATMUL", ErrorCode.SRAM_OVERFLOW), ("ACT", ErrorCode.SRAM_OVERFLOW)):
        assert (name, code) in hits


def test_checker_decode_errors_and_pc():
    halt = encode_int(make("HALT"))
    known = {d.opcode for d in INSTRUCTIONS}
    unknown = [op for op in range(1 << OPCODE_BITS) if op not in known]
    cases = [(op, 0, 1) for op in unknown]
    # a reserved bit set just above each instruction's last field, and at the very top
    for d in INSTRUCTIONS:
        cases += [(d.opcode | 1 << d.used_bits, 0, 1), (d.opcode | 1 << (INSTR_BITS - 1), 0, 1)]
    cases += [(halt, 5, 5), (halt, 6, 5), (0, 7, 5), (halt, 4, 5)]
    codes = simulate(cases)
    n = len(unknown) + 2 * len(INSTRUCTIONS)
    assert all(c == ErrorCode.ILLEGAL_INSTRUCTION for c in codes[:n])
    assert codes[n:] == [ErrorCode.PC_OVERFLOW] * 3 + [ErrorCode.NONE]


def test_layouts_decode_like_isa_encoding():
    """Every field seen through hw/decode's layouts equals isa.encoding's value."""
    rng = np.random.default_rng(1)
    for defn in INSTRUCTIONS:
        layout = instr_layout(defn.name)
        for _ in range(20):
            values = {f.name: int(rng.integers(f.min, f.max + 1)) for f in defn.fields}
            instr = make(defn.name, wait=int(rng.integers(0, 8)), **values)
            view = layout.from_bits(encode_int(instr))
            for f, _ in defn.layout():
                assert int(view[f.name]) == instr.values[f.name], (defn.name, f.name)
    assert BY_NAME["HALT"].opcode == instr_layout("HALT").from_bits(encode_int(make("HALT")))["opcode"]


def test_checker_branch_rules():
    """BRANCH: test 3, a target past the program and an active loop are illegal; the
    condition row is range-checked except for ALWAYS (random fields, both loop states)."""
    rng = np.random.default_rng(7)
    cases, expected = [], []
    for k in range(300):
        v = {"target": int(rng.integers(0, 12)), "test": int(rng.integers(0, 4)), "mem": int(rng.integers(0, 2)),
             "row": int(rng.choice([0, CFG.acc_rows - 1, CFG.acc_rows, CFG.asram_rows - 1, CFG.asram_rows])),
             "dtype": int(rng.integers(0, 2)), "limit": int(rng.integers(0, 5)), "wait": int(rng.integers(0, 8))}
        prog_len, active = int(rng.integers(1, 12)), bool(k % 3 == 0)
        instr = make("BRANCH", **v)
        cases.append((encode_int(instr), 0, prog_len, {**NO_LOOP, "active": active}))
        expected.append(expected_code(CFG, "BRANCH", instr.values, prog_len=prog_len, active=active))
    codes, _, _ = simulate(cases)
    assert codes == expected
    assert {ErrorCode.NONE, ErrorCode.ILLEGAL_INSTRUCTION, ErrorCode.SRAM_OVERFLOW} <= set(codes)


def test_staged_precheck_equals_one_piece():
    """The sequencer's precheck (hw/precheck.py: operands registered from the word two cycles
    ahead of the rest, products one cycle ahead) gives, two cycles later, the same bits as
    the one-piece precheck the tests above check against the ISA rules."""
    from amaranth import Module, Signal
    from hw.precheck import PreCheck, pre_bits

    rng = np.random.default_rng(7)
    words = [encode_int(random_instruction(rng, CFG)) for _ in range(600)]
    m = Module()
    m.submodules.staged = staged = PreCheck(CFG, staged=True)
    m.submodules.ref = ref = PreCheck(CFG)
    got, want = Signal(pre_bits(CFG)), Signal(pre_bits(CFG))
    m.d.comb += [ref.word.eq(staged.word), got.eq(staged.pre.as_value()), want.eq(ref.pre.as_value())]
    bad = []

    async def bench(ctx):
        for word in words:
            ctx.set(staged.word_early, word)
            await ctx.tick()
            ctx.set(staged.word_early, 0)           # what follows must not matter
            ctx.set(staged.word_mid, word)
            await ctx.tick()
            ctx.set(staged.word_mid, 0)
            ctx.set(staged.word, word)
            if ctx.get(got) != ctx.get(want):
                bad.append(word)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"{len(bad)} of {len(words)} words differ, first opcode {bad[0] & 0xff}"


def test_checker_dma_word_counts_past_the_cap():
    """The precheck caps a DMA's word count just above the deepest memory
    (hw/vpu_check.py capped_product); counts far past it, packed planes, and large address
    fields brought back into range by negative loop offsets must still give the ISA's code
    (isa/dma.py sram_words is the oracle for the count)."""
    from isa.dma import sram_words

    rng = np.random.default_rng(11)
    limit = max(CFG.asram_rows, CFG.wsram_rows, CFG.psram_rows * CFG.words_per_wide_row)
    cap = 1 << (limit + 1).bit_length()
    cases, expected, counts = [], [], []
    for _ in range(600):
        store = bool(rng.random() < 0.4)
        elem = int(rng.choice([0, 1, 2, 4, 8]))
        sram = 0 if store else int(rng.integers(0, 3))
        # up to the LOOP_DEPTH memory sizes that legal LOOPs can move an address back by
        rows = [CFG.asram_rows, CFG.wsram_rows, CFG.psram_rows][sram]
        unit = CFG.words_per_wide_row if sram == 2 else 1
        v = dict(elem=elem, stride0=elem, stride1=0, stride2=0, ext_addr=0,
                 len0=int(rng.integers(1, 40)), len1=int(rng.integers(1, 90)), len2=int(rng.integers(1, 90)),
                 sram=sram, sram_addr=int(rng.integers(0, LOOP_DEPTH * (rows - 1) * unit)))
        if rng.random() < 0.4:          # past the precheck's cap on its own
            v["sram_addr"] = LOOP_DEPTH * (rows - 1) * unit - int(rng.integers(0, 64))
        if not store:
            v.update(pack=int(rng.integers(0, 2)), **{p: int(rng.integers(0, 4)) for p in ("pad_b0", "pad_a0", "pad_b1", "pad_a1")})
        words = sram_words(v, CFG.bus_bytes, store)
        depth = [CFG.asram_rows, CFG.wsram_rows, CFG.psram_rows * CFG.words_per_wide_row][v["sram"]]
        target = int(rng.choice([0, 1, max(0, depth - words), max(0, depth - words + 1), depth // 2]))
        off = (target - v["sram_addr"]) // unit
        eff = v["sram_addr"] + off * unit
        space = ["asram", "wsram", "psram"][v["sram"]]
        instr = make("DMA_STORE" if store else "DMA_LOAD", **v)
        cases.append((encode_int(instr), 0, 1, dict(offsets={space: off}, full=False, loop_end=None)))
        expected.append(ErrorCode.SRAM_OVERFLOW if words and not 0 <= eff <= depth - words else ErrorCode.NONE)
        counts.append((words, v["sram_addr"] + words))
    codes, _, _ = simulate(cases)
    bad = [(c, e, k) for c, e, k in zip(codes, expected, counts) if c != e]
    assert not bad, f"{len(bad)} of {len(codes)} differ, first (got, want, (words, addr + words)): {bad[0]}"
    # the capped cases are there, on both sides of the rule
    assert sum(w >= cap for w, _ in counts) > 100
    assert {(e, w >= cap) for e, (w, _) in zip(expected, counts)} >= {(ErrorCode.SRAM_OVERFLOW, True)}
    assert sum(e == ErrorCode.NONE and last >= cap for e, (_, last) in zip(expected, counts)) > 10
