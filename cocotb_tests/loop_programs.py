"""Test-only helpers for LOOP: an independent unroller (the oracle) and a generator of random
nested-loop programs whose addresses stay in range.

The unroller is written from the LOOP doc in isa/instructions.py as a plain recursion, with
the address fields of each instruction listed here by hand: it shares no code with the
simulator's loop stack (sim/isa/loops.py), the table's ``space`` tags, or the RTL.
"""
from __future__ import annotations

import numpy as np

from isa import make
from isa.encoding import Instruction, encode_program
from isa.instructions import Sram

# Address fields and their spaces, from the instruction docs.  "sram": the space the DMA's
# `sram` field names; a DMA into PSRAM counts bus words, words_per_wide_row per row.
ADDRESS = {
    "DMA_LOAD": {"sram_addr": "sram", "ext_addr": "ext"},
    "DMA_STORE": {"sram_addr": "sram", "ext_addr": "ext"},
    "MATMUL": {"a_addr": "asram", "w_addr": "wsram", "acc_addr": "acc"},
    "ACT": {"acc_addr": "acc", "dst_addr": "asram", "param_addr": "psram"},
}
SPACES = ("ext", "asram", "wsram", "acc", "psram")
SRAM_SPACE = {Sram.ASRAM: "asram", Sram.WSRAM: "wsram", Sram.PSRAM: "psram"}


class _Halt(Exception):
    pass


def shifted(instr: Instruction, offsets: dict, config) -> Instruction:
    """``instr`` with its address fields moved by ``offsets`` (space -> rows or bytes)."""
    values = {k: v for k, v in instr.values.items() if k != "opcode"}
    for name, space in ADDRESS.get(instr.name, {}).items():
        unit = 1
        if space == "sram":
            space = SRAM_SPACE[Sram(values["sram"])]
            unit = config.words_per_wide_row if space == "psram" else 1
        values[name] += unit * offsets[space]
    return make(instr.name, **values)


def unroll(instrs: list[Instruction], config) -> list[Instruction]:
    """The straight-line program equivalent to ``instrs`` (legal LOOPs only): bodies repeated
    with their addresses offset, each executed LOOP replaced by a SYNC with its wait mask
    (LOOP issues like SYNC), everything after a HALT dropped.  The unrolled program does
    what the looped one does, in the same cycles apart from the longer boot."""
    out: list[Instruction] = []

    def run(lo: int, hi: int, offsets: dict) -> None:
        pc = lo
        while pc < hi:
            instr = instrs[pc]
            if instr.name == "LOOP":
                v = instr.values
                out.append(make("SYNC", wait=v["wait"]))
                incs = {s: v[f"inc_{s}"] for s in SPACES}
                for i in range(v["count"]):
                    run(pc + 1, pc + 1 + v["body"], {s: offsets[s] + i * incs[s] for s in SPACES})
                pc += 1 + v["body"]
                continue
            out.append(shifted(instr, offsets, config))
            if instr.name == "HALT":
                raise _Halt
            pc += 1

    try:
        run(0, len(instrs), {s: 0 for s in SPACES})
    except _Halt:
        pass
    return out


# -- random programs -------------------------------------------------------------------------
class Region:
    """External memory of the random programs: instructions below DATA, random source data,
    a store area."""

    DATA = 0x2000
    SRC = (0x2000, 0x6000)
    OUT = (0x6000, 0xC000)
    BYTES = 0xC000


class LoopProgramGenerator:
    """Random programs of DMA/MATMUL/ACT/SYNC inside nested LOOPs (some bodies ending
    together, some counts 0), every effective address in range in every iteration.

    ``ranges[space]`` tracks, for the loops around the point being generated, the lowest and
    highest offset any iteration adds; each instruction's base address is chosen so that its
    whole footprint stays in memory at both extremes.
    """

    def __init__(self, rng, config, max_depth: int = 3, max_dynamic: int = 400):
        self.rng = rng
        self.cfg = config
        self.max_depth = max_depth
        self.max_dynamic = max_dynamic
        bus = config.bus_bytes
        self.size = {"ext": Region.SRC, "asram": config.asram_rows, "wsram": config.wsram_rows,
                     "acc": config.acc_rows, "psram": config.psram_rows}
        self.bus = bus

    # -- helpers
    def _int(self, lo, hi):
        return int(self.rng.integers(lo, hi + 1))

    def _base(self, space: str, extent: int, ranges: dict, limit: tuple[int, int] | None = None):
        """A base address whose [base + lo, base + hi + extent) lies in the space, or None."""
        lo_off, hi_off = ranges[space]
        first, end = limit if limit is not None else (0, self.size[space])
        low, high = first - lo_off, end - extent - hi_off
        if high < low:
            return None
        return self._int(low, high)

    def instruction(self, ranges: dict) -> Instruction | None:
        rng, cfg, bus = self.rng, self.cfg, self.bus
        kind = rng.choice(["DMA_LOAD", "DMA_STORE", "MATMUL", "ACT", "SYNC"], p=[0.3, 0.2, 0.25, 0.2, 0.05])
        wait = self._int(0, 7) if rng.random() < 0.4 else 0
        if kind == "SYNC":
            return make("SYNC", wait=wait)
        if kind in ("DMA_LOAD", "DMA_STORE"):
            sram = Sram.ASRAM if kind == "DMA_STORE" else Sram(self._int(0, 2))
            len0, len1, len2 = self._int(1, 4), self._int(1, 3), self._int(1, 2)
            pads = [self._int(0, 1) if kind == "DMA_LOAD" and rng.random() < 0.3 else 0 for _ in range(4)]
            stride1 = bus * self._int(len0, len0 + 3)
            stride2 = bus * self._int(len1 * (stride1 // bus), len1 * (stride1 // bus) + 4)
            span = (len2 - 1) * stride2 + (len1 - 1) * stride1 + len0 * bus
            area = Region.OUT if kind == "DMA_STORE" else Region.SRC
            ext = self._base("ext", span, ranges, area)
            words = len2 * (len1 + pads[2] + pads[3]) * (len0 + pads[0] + pads[1])
            space = SRAM_SPACE[sram]
            wpr = cfg.words_per_wide_row if space == "psram" else 1
            rows = -(-words // wpr)
            row = self._base(space, rows, ranges)
            if ext is None or row is None:
                return None
            ext -= ext % bus        # offsets are whole words: every iteration stays aligned
            extra = {} if kind == "DMA_STORE" else dict(pad_b0=pads[0], pad_a0=pads[1], pad_b1=pads[2],
                                                         pad_a1=pads[3], pad_value=self._int(0, 255))
            return make(kind, sram=int(sram), sram_addr=row * wpr, ext_addr=ext, len0=len0, len1=len1,
                        len2=len2, stride1=stride1, stride2=stride2, wait=wait, **extra)
        if kind == "MATMUL":
            n0, n1 = self._int(1, 6), self._int(1, 2)
            s0, s1 = self._int(0, 2), self._int(0, 8)
            a = self._base("asram", (n1 - 1) * s1 + (n0 - 1) * s0 + 1, ranges)
            w = self._base("wsram", cfg.array_rows, ranges)
            acc = self._base("acc", n0 * n1, ranges)
            if None in (a, w, acc):
                return None
            return make("MATMUL", a_addr=a, a_stride0=s0, a_stride1=s1, n0=n0, n1=n1, w_addr=w, acc_addr=acc,
                        accumulate=self._int(0, 1), a_zp=self._int(-128, 127), w_zp=self._int(-20, 20),
                        wait=wait)
        count = self._int(1, 6)
        acc, dst = self._base("acc", count, ranges), self._base("asram", count, ranges)
        param = self._base("psram", 3, ranges)
        if None in (acc, dst, param):
            return None
        return make("ACT", acc_addr=acc, count=count, dst_addr=dst, param_addr=param,
                    out_zp=self._int(-10, 10), clamp_min=-128, clamp_max=127, scale32=1,
                    double_round=self._int(0, 1), wait=wait)

    def increments(self) -> dict:
        bus = self.bus
        pick = lambda options: int(options[int(self.rng.integers(len(options)))])
        return {"ext": bus * pick([0, 0, 1, -1, 4, 16, -16, 64]),
                "asram": pick([0, 0, 1, -1, 3, 8, -8, 40]),
                "wsram": pick([0, 0, 1, self.cfg.array_rows, -self.cfg.array_rows]),
                "acc": pick([0, 0, 1, -1, 4, 6]),
                "psram": pick([0, 0, 1, 3, -3])}

    def block(self, ranges: dict, depth: int, items: int) -> tuple[list, int]:
        """A body of about ``items`` items; returns (instructions, dynamic size)."""
        out, dynamic = [], 0
        for _ in range(items):
            if depth < self.max_depth and self.rng.random() < 0.35:
                count = int(self.rng.choice([0, 1, 2, 3, 4], p=[0.1, 0.15, 0.35, 0.25, 0.15]))
                incs = self.increments()
                span = max(count - 1, 0)
                inner = {s: (ranges[s][0] + min(0, span * incs[s]), ranges[s][1] + max(0, span * incs[s]))
                         for s in SPACES}
                body, size = self.block(inner, depth + 1, self._int(1, 3))
                if not body:
                    continue
                out.append(make("LOOP", count=count, body=len(body), wait=self._int(0, 7) if self.rng.random() < 0.3
                                else 0, **{f"inc_{s}": incs[s] for s in SPACES}))
                out += body
                dynamic += 1 + count * size
            else:
                instr = self.instruction(ranges)
                if instr is not None:
                    out.append(instr)
                    dynamic += 1
        return out, dynamic

    def program(self, setup: list[Instruction], items: int = 8) -> list[Instruction]:
        while True:
            body, dynamic = self.block({s: (0, 0) for s in SPACES}, 0, items)
            if 4 * len(body) <= dynamic <= self.max_dynamic:      # loops that really repeat
                return setup + body + [make("HALT")]


def setup_program(rng, config) -> tuple[bytearray, list[Instruction]]:
    """Memory with random data and the loads that fill every scratchpad from it (ACT
    parameters: moderate multipliers and shifts so outputs do not all saturate)."""
    mem = bytearray(Region.BYTES)
    bus = config.bus_bytes
    src0, src1 = Region.SRC
    mem[src0:src1] = rng.integers(0, 256, src1 - src0, dtype=np.uint8).tobytes()
    params = np.zeros((config.psram_rows, config.array_cols), np.int64)
    params[0::3] = rng.integers(-2000, 2000, params[0::3].shape)
    params[1::3] = rng.integers(1 << 29, 1 << 31, params[1::3].shape)
    params[2::3] = rng.integers(33, 40, params[2::3].shape)
    praw = params.astype("<i4").tobytes()
    p_at = src1 - len(praw)
    mem[p_at:src1] = praw
    a_rows, w_rows = 256, 128
    instrs = [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=src0, len0=a_rows, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.WSRAM), sram_addr=0, ext_addr=src0 + a_rows * bus, len0=w_rows,
             len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=0, ext_addr=p_at, len0=len(praw) // bus, len1=1,
             len2=1, wait=1),
        make("SYNC", wait=1),
    ]
    return mem, instrs


def with_program(mem: bytes, instrs: list[Instruction]) -> bytes:
    """``mem`` with the encoded program at address 0 (where the random programs live)."""
    code = encode_program(instrs)
    assert len(code) <= Region.DATA, "the program overlaps the data"
    return code + bytes(mem[len(code):])


def without_hazards(instrs: list[Instruction], mem: bytes, config, rounds: int = 50) -> list[Instruction]:
    """Add wait bits until the ISA simulator's hazard checker finds no unordered conflict
    (random waits make overlapping, racy programs; the data comparisons need defined ones)."""
    from isa.program import Program
    from sim.isa.sim import IsaSim

    instrs = list(instrs)
    for _ in range(rounds):
        result = IsaSim(config, check_hazards=True).run(Program(config, instrs), with_program(mem, instrs))
        if not result.hazards:
            return instrs
        for h in result.hazards:
            later = instrs[h.later_pc]
            unit = {"DMA_LOAD": 0, "DMA_STORE": 0, "MATMUL": 1, "ACT": 2}[instrs[h.earlier_pc].name]
            values = {k: v for k, v in later.values.items() if k != "opcode"}
            values["wait"] |= 1 << unit
            instrs[h.later_pc] = make(later.name, **values)
    raise AssertionError("could not remove the hazards")
