"""BRANCH test programs, shared by the ISA-simulator tests (tests/test_isa_branch.py) and the
RTL lockstep tests (cocotb_tests/test_rtl_branch.py).

Each builder returns ``(instructions, memory image, expected)`` where ``expected`` is what
the program computes, worked out by hand from the ISA's BRANCH/VALU pseudocode (closed
forms, never the simulator): the values stored at ``OUT`` and the number of loop
iterations.  The program sits at address 0; data at ``DATA``, results at ``OUT``.
"""
from __future__ import annotations

import numpy as np

from isa.asm import assemble
from isa.encoding import encode_program

DATA, OUT = 0x2000, 0x3000
MEM_BYTES = 0x4000


def image(instrs, data: bytes) -> bytes:
    """Memory: the program at 0, ``data`` at DATA, zeros up to MEM_BYTES."""
    mem = bytearray(MEM_BYTES)
    code = encode_program(instrs)
    assert len(code) <= DATA
    mem[:len(code)] = code
    mem[DATA:DATA + len(data)] = data
    return bytes(mem)


def countdown_int8(n: int, limit: int = 1000):
    """``while x != 0: x -= 1; y = 2*(y+1)`` with x = n in ASRAM lane 0 (int8), the test at
    the top (BRANCH ZERO forward to the exit), an ALWAYS branch back at the bottom (one taken
    backward branch per iteration).  y = 2**(n+1) - 2 (mod 256 per int8 lane)."""
    text = f"""
        DMA_LOAD sram=ASRAM sram_addr=0 ext_addr={DATA} len0=3 len1=1 len2=1
        BRANCH wait=DMA|VPU target=6 test=ZERO mem=ASRAM row=0
        VALU op=SUB dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=0 b_mem=ASRAM b_addr=1 d_mem=ASRAM d_addr=0
        VALU wait=VPU op=ADD dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=2 b_mem=ASRAM b_addr=1 d_mem=ASRAM d_addr=2
        VALU wait=VPU op=ADD dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=2 b_mem=ASRAM b_addr=2 d_mem=ASRAM d_addr=2
        BRANCH target=1 test=ALWAYS limit={limit}
        DMA_STORE wait=VPU sram=ASRAM sram_addr=0 ext_addr={OUT} len0=3 len1=1 len2=1
        HALT wait=DMA
    """
    instrs = assemble(text)
    data = bytes([n & 255, 0, 0, 0]) + bytes([1, 1, 1, 1]) + bytes(4)
    y = (2 ** (n + 1) - 2) % 256
    want = bytes([0] + [-n % 256] * 3) + bytes([1, 1, 1, 1]) + bytes([y] * 4)   # SUB: every lane
    return instrs, image(instrs, data), {"out": want, "iterations": n}


def countdown_acc(n: int, dtype: str = "INT32", limit: int = 100000, step: int = 1, cfg=None):
    """A do-while loop on an int32 counter in ACC lane 0 (copied from PSRAM): ``do
    {x -= step; k += 1} while x != 0`` with the test at the bottom (BRANCH NONZERO backward),
    ``dtype`` the condition's type (INT8 tests only the low 8 bits of x).  The counter k (all
    lanes) and x are moved to ASRAM as int32 and stored at OUT."""
    from isa import SMALL_CONFIG
    cfg = cfg or SMALL_CONFIG
    wpr = cfg.words_per_wide_row
    cols = cfg.array_cols
    # ASRAM rows per int32 vector (read/write of VECTOR_DOC)
    rows32 = 4 * cols // cfg.asram_row_bytes
    text = f"""
        DMA_LOAD sram=PSRAM sram_addr=0 ext_addr={DATA} len0={2 * wpr} len1=1 len2=1
        VALU wait=DMA op=COPY dtype=INT32 n0=2 n1=1 a_mem=PSRAM a_addr=0 a_stride0=1 d_mem=ACC d_addr=0 d_stride0=1
        VALU wait=VPU op=SUB dtype=INT32 n0=1 n1=1 a_mem=ACC a_addr=0 b_mem=ACC b_addr=1 d_mem=ACC d_addr=0
        VALU wait=VPU op=ADD dtype=INT32 n0=1 n1=1 a_mem=ACC a_addr=2 b_mem=ACC b_addr=1 d_mem=ACC d_addr=2
        BRANCH wait=VPU target=2 test=NONZERO mem=ACC row=0 dtype={dtype} limit={limit}
        VALU op=COPY dtype=INT32 n0=2 n1=1 a_mem=ACC a_addr=0 a_stride0=2 d_mem=ASRAM d_addr=0 d_stride0={rows32}
        DMA_STORE wait=VPU sram=ASRAM sram_addr=0 ext_addr={OUT} len0={2 * rows32} len1=1 len2=1
        HALT wait=DMA
    """
    instrs = assemble(text)
    x0 = np.full(cols, n, np.int32)
    x0[1:] = 7                       # only lane 0 is the condition
    data = x0.astype("<i4").tobytes() + np.full(cols, step, "<i4").tobytes()
    # iterations: first k >= 1 with (n - k*step) == 0 in the tested bits
    mask = 0xFF if dtype == "INT8" else 0xFFFFFFFF
    k = 1
    while (n - k * step) & mask:
        k += 1
    x = np.int32(n - k * step)
    want_x = np.full(cols, x, np.int32)
    want_x[1:] = 7 - k * step
    want = want_x.astype("<i4").tobytes() + np.full(cols, k * step, "<i4").tobytes()
    return instrs, image(instrs, data), {"out": want, "iterations": k}


def with_loops(flag: int):
    """BRANCH next to LOOPs: a LOOP before the branch (must have ended), a branch on ``flag``
    (ASRAM row 0, int8) over a LOOP that doubles row 2 three times, and a branch into the
    middle of a LOOP body from outside (that body then runs once, straight-line)."""
    text = f"""
        DMA_LOAD sram=ASRAM sram_addr=0 ext_addr={DATA} len0=3 len1=1 len2=1
        LOOP count=2 body=1 wait=DMA
        VALU wait=VPU op=ADD dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=2 b_mem=ASRAM b_addr=1 d_mem=ASRAM d_addr=2
        BRANCH wait=VPU target=6 test=ZERO mem=ASRAM row=0
        LOOP count=3 body=1
        VALU wait=VPU op=ADD dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=2 b_mem=ASRAM b_addr=2 d_mem=ASRAM d_addr=2
        BRANCH target=8 test=ALWAYS
        LOOP count=5 body=2
        SYNC
        VALU wait=VPU op=ADD dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=2 b_mem=ASRAM b_addr=1 d_mem=ASRAM d_addr=2
        DMA_STORE wait=VPU sram=ASRAM sram_addr=2 ext_addr={OUT} len0=1 len1=1 len2=1
        HALT wait=DMA
    """
    instrs = assemble(text)
    data = bytes([flag, 0, 0, 0]) + bytes([1, 1, 1, 1]) + bytes(4)
    y = 2                              # the first LOOP: 0 + 1 + 1
    if flag:
        y *= 8                         # the LOOP of three doublings
    y += 1                             # the body entered in the middle: once
    return instrs, image(instrs, data), {"out": bytes([y] * 4)}


def forward_chain(rng: np.random.Generator, length: int = 6):
    """Random forward branches: ``length`` blocks, each ``BRANCH (test) -> skip next block``
    on a random flag row of either memory and type, then a block adding a distinct constant
    row to an accumulator; flags come from DATA (ASRAM int8/int32 lane 0 bytes, or ACC rows
    copied from PSRAM).  Expected: the sum of the blocks not skipped."""
    from isa import SMALL_CONFIG
    cfg = SMALL_CONFIG
    wpr = cfg.words_per_wide_row
    cols = cfg.array_cols
    flags_asram = rng.choice([0, 0, 1, -1, 256, 2 ** 31 - 2 ** 24], size=length)   # int32 values
    flags_acc = rng.choice([0, 0, 3, 512, -256], size=length)
    lines = [
        f"DMA_LOAD sram=ASRAM sram_addr=0 ext_addr={DATA} len0={length + 1} len1=1 len2=1",
        f"DMA_LOAD sram=PSRAM sram_addr=0 ext_addr={DATA + 0x400} len0={length * wpr} len1=1 len2=1",
        f"VALU wait=DMA op=COPY dtype=INT32 n0={length} n1=1 a_mem=PSRAM a_addr=0 a_stride0=1 "
        f"d_mem=ACC d_addr=0 d_stride0=1",
    ]
    # the constants: ASRAM row 100 + j holds j+1 in every int8 lane
    const = bytes(b for j in range(length) for b in [j + 1] * cfg.bus_bytes)
    lines.append(f"DMA_LOAD wait=VPU sram=ASRAM sram_addr=100 ext_addr={DATA + 0x800} len0={length} len1=1 len2=1")
    total = 0
    for j in range(length):
        mem = rng.choice(["ASRAM", "ACC"])
        dtype = rng.choice(["INT8", "INT32"])
        test = rng.choice(["ZERO", "NONZERO", "ALWAYS"], p=[0.45, 0.45, 0.1])
        value = int(flags_asram[j] if mem == "ASRAM" else flags_acc[j])
        tested = value & 0xFF if dtype == "INT8" else value
        taken = test == "ALWAYS" or ((tested == 0) == (test == "ZERO"))
        here = len(lines)
        lines.append(f"BRANCH wait=DMA|VPU target={here + 2} test={test} mem={mem} row={j} dtype={dtype}")
        lines.append(f"VALU wait=VPU op=ADD dtype=INT8 n0=1 n1=1 a_mem=ASRAM a_addr=200 b_mem=ASRAM "
                     f"b_addr={100 + j} d_mem=ASRAM d_addr=200")
        if not taken:
            total += j + 1
    lines.append(f"DMA_STORE wait=VPU sram=ASRAM sram_addr=200 ext_addr={OUT} len0=1 len1=1 len2=1")
    lines.append("HALT wait=DMA")
    instrs = assemble("\n".join(lines))
    # ASRAM row j: lane bytes 0..3 = flags_asram[j] as int32 (lane 0 of an int32 vector)
    asram_rows = b"".join(np.int32(v).astype("<i4").tobytes().ljust(cfg.bus_bytes, b"\0")
                          for v in flags_asram) + bytes(cfg.bus_bytes)
    psram_rows = b"".join(np.full(cols, v, "<i4").tobytes() for v in flags_acc)
    mem = bytearray(image(instrs, b""))
    mem[DATA:DATA + len(asram_rows)] = asram_rows
    mem[DATA + 0x400:DATA + 0x400 + len(psram_rows)] = psram_rows
    mem[DATA + 0x800:DATA + 0x800 + len(const)] = const
    return instrs, bytes(mem), {"out": bytes([total % 256] * cfg.bus_bytes)}


# Error cases: (program text, data, expected error, expected STOP_PC).  A MATMUL runs before
# the failing instruction: it must complete (and the stop wait for it).
PRELUDE = f"DMA_LOAD sram=ASRAM ext_addr={DATA} len0=16 len1=1 len2=1\nMATMUL n0=40 n1=1 wait=DMA\n"
ERROR_CASES = {
    "limit_exceeded": (PRELUDE + "SYNC\nBRANCH target=2 test=ALWAYS limit=3\nHALT", "BRANCH_LIMIT", 3),
    "limit_zero_self_loop": (PRELUDE + "BRANCH wait=MXU target=2 test=NONZERO mem=ASRAM row=0 limit=0\nHALT",
                             "BRANCH_LIMIT", 2),
    "self_loop_limit": (PRELUDE + "BRANCH target=2 test=ALWAYS limit=3\nHALT", "BRANCH_LIMIT", 2),
    "target_past_program": (PRELUDE + "BRANCH target=9 test=ZERO row=1\nHALT", "ILLEGAL_INSTRUCTION", 2),
    "inside_loop": (PRELUDE + "LOOP count=2 body=1\nBRANCH target=0 test=NONZERO row=1\nHALT",
                    "ILLEGAL_INSTRUCTION", 3),
    "test_three": (PRELUDE + "BRANCH target=0 test=3\nHALT", "ILLEGAL_INSTRUCTION", 2),
    "row_past_acc": (PRELUDE + "BRANCH target=3 test=ZERO mem=ACC row={acc_rows}\nHALT", "SRAM_OVERFLOW", 2),
}


def error_case(name: str, cfg):
    text, code, stop_pc = ERROR_CASES[name]
    instrs = assemble(text.format(acc_rows=cfg.acc_rows))
    data = bytes(range(1, 65))            # row 0 is non-zero
    return instrs, image(instrs, data), code, stop_pc
