"""The hardware decoder and instruction checker (hw/decode.py, hw/checker.py) in Amaranth's
own simulator: no Verilator needed, runs in seconds.

The expected error codes come from a direct Python transcription of the error rules in the
isa/instructions.py docs, on constrained-random instructions whose fields cluster around
the limits (so every rule is hit on both sides)."""
from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from isa import SMALL_CONFIG, make
from isa.encoding import encode_int
from isa.instructions import BY_NAME, INSTR_BITS, INSTRUCTIONS, OPCODE_BITS, ErrorCode, Sram
from hw.checker import InstrChecker
from hw.decode import instr_layout

CFG = SMALL_CONFIG


def expected_code(cfg, name: str, v: dict) -> ErrorCode:
    bus = cfg.bus_bytes
    E = ErrorCode
    if name in ("DMA_LOAD", "DMA_STORE"):
        if (name == "DMA_LOAD" and v["sram"] > max(Sram)) or (name == "DMA_STORE" and v["sram"] != Sram.ASRAM):
            return E.ILLEGAL_INSTRUCTION
        if v["ext_addr"] % bus or v["stride1"] % bus or v["stride2"] % bus:
            return E.DMA_MISALIGNED
        if v["len0"] and v["len1"] and v["len2"]:
            last = v["ext_addr"] + (v["len2"] - 1) * v["stride2"] + (v["len1"] - 1) * v["stride1"] + v["len0"] * bus
            if last > cfg.ext_mem_bytes:
                return E.DMA_OUT_OF_RANGE
        if name == "DMA_LOAD":
            words = (v["len2"] * (v["len1"] + v["pad_b1"] + v["pad_a1"]) * (v["len0"] + v["pad_b0"] + v["pad_a0"]))
        else:
            words = v["len0"] * v["len1"] * v["len2"]
        depth = {0: cfg.asram_rows, 1: cfg.wsram_rows, 2: cfg.psram_rows * cfg.words_per_wide_row}[v["sram"]]
        if words and v["sram_addr"] + words > depth:
            return E.SRAM_OVERFLOW
    elif name == "MATMUL":
        n = v["n0"] * v["n1"]
        if v["w_addr"] + cfg.array_rows > cfg.wsram_rows:
            return E.SRAM_OVERFLOW
        if n and (v["a_addr"] + (v["n1"] - 1) * v["a_stride1"] + (v["n0"] - 1) * v["a_stride0"] >= cfg.asram_rows
                  or v["acc_addr"] + n > cfg.acc_rows):
            return E.SRAM_OVERFLOW
    elif name == "ACT":
        if v["param_addr"] + 3 > cfg.psram_rows:
            return E.SRAM_OVERFLOW
        if v["count"] and (v["acc_addr"] + v["count"] > cfg.acc_rows or v["dst_addr"] + v["count"] > cfg.asram_rows):
            return E.SRAM_OVERFLOW
    return E.NONE


def edge_value(rng, f, limit: int) -> int:
    """A field value near ``limit`` (a memory size) or near the field's own range ends."""
    choices = [0, 1, f.max, f.min, limit - 1, limit, limit + 1, limit // 2, int(rng.integers(f.min, f.max + 1))]
    choices += [limit // k for k in (3, 4, 7, 16) if limit // k]
    value = int(choices[int(rng.integers(len(choices)))])
    return min(max(value, f.min), f.max)


def random_instruction(rng, cfg):
    defn = INSTRUCTIONS[int(rng.integers(len(INSTRUCTIONS)))]
    limits = {"ext_addr": cfg.ext_mem_bytes, "stride1": cfg.ext_mem_bytes // 8, "stride2": cfg.ext_mem_bytes // 4,
              "sram_addr": cfg.asram_rows, "len0": 64, "len1": 16, "len2": 8, "a_addr": cfg.asram_rows,
              "a_stride0": 64, "a_stride1": 128, "n0": 32, "n1": 8, "w_addr": cfg.wsram_rows,
              "acc_addr": cfg.acc_rows, "count": cfg.acc_rows, "dst_addr": cfg.asram_rows,
              "param_addr": cfg.psram_rows}
    values = {}
    for f in defn.fields:
        if f.name == "sram":
            values[f.name] = int(rng.integers(0, 4))
        elif f.name in ("ext_addr", "stride1", "stride2") and rng.random() < 0.7:
            values[f.name] = edge_value(rng, f, limits[f.name]) // cfg.bus_bytes * cfg.bus_bytes
        else:
            values[f.name] = edge_value(rng, f, limits.get(f.name, 8))
    values["wait"] = int(rng.integers(0, 8))
    return make(defn.name, **values)


def simulate(cases):
    """Run the checker on (word, pc, prog_len) cases; returns the codes."""
    dut = InstrChecker(CFG)
    out = []

    async def bench(ctx):
        for word, pc, prog_len in cases:
            ctx.set(dut.word, word)
            ctx.set(dut.pc, pc)
            ctx.set(dut.prog_len, prog_len)
            out.append(ErrorCode(ctx.get(dut.code)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return out


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
