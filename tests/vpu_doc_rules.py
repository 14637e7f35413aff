"""Test-only transcription of the vector instructions' storage and error rules, written from
the VRESCALE / VALU / VPOOL / VDWCONV docs in isa/instructions.py (independently of isa/vector.py,
sim/isa/vpu.py and hw/vpu_check.py, which the tests check against it)."""
from __future__ import annotations

from isa.instructions import ErrorCode

# VecType values: INT8 0, INT16 1, INT32 2, INT48 3, UINT8 4, UINT16 5.
BYTES = {0: 1, 1: 2, 2: 4, 3: 6, 4: 1, 5: 2}
NAMES = {0: "int8", 1: "int16", 2: "int32", 3: "int48", 4: "uint8", 5: "uint16"}
ASRAM, ACC, PSRAM = 0, 1, 2

# VALU op values (the doc's table order).
OPS = ["ADD", "SUB", "MUL", "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT",
       "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "BITWISE_NOT", "MINIMUM", "MAXIMUM", "CLAMP",
       "EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT",
       "SELECT", "ABS", "NEGATE", "CLZ", "COPY"]
UNARY = {"BITWISE_NOT", "CLAMP", "LOGICAL_NOT", "ABS", "NEGATE", "CLZ", "COPY"}
BOOL_OUT = {"EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT"}


def rows(mem: int, dtype: int) -> int:
    """Rows one vector occupies: ASRAM bytes per lane; ACC/PSRAM one (INT48 two)."""
    if mem == ASRAM:
        return BYTES[dtype]
    return 2 if dtype == 3 else 1


def depth(cfg, mem: int) -> int:
    return (cfg.asram_rows, cfg.acc_rows, cfg.psram_rows)[mem]


def valu_types(op_name: str, dtype: int) -> tuple[int, int]:
    """(type of a, type of the result) of a VALU op."""
    a_type = 0 if op_name == "SELECT" else dtype
    out = 2 if op_name == "MUL" else 0 if op_name in BOOL_OUT else dtype
    return a_type, out


def accesses(name: str, v: dict) -> list[tuple[int, int, int, int, int, int]]:
    """(mem, addr, stride0, stride1, rows, window_extent) of every operand touched, the
    destination last; window_extent is VPOOL's (k1-1)*w_stride1 + (k0-1)*w_stride0."""
    out = []
    if name == "VRESCALE":
        out.append((v["a_mem"], v["a_addr"], v["a_stride0"], v["a_stride1"], rows(v["a_mem"], v["in_type"]), 0))
        dst_type = v["out_type"]
    elif name == "VPOOL":
        ext = (v["k1"] - 1) * v["w_stride1"] + (v["k0"] - 1) * v["w_stride0"]
        out.append((v["a_mem"], v["a_addr"], v["a_stride0"], v["a_stride1"], rows(v["a_mem"], v["dtype"]), ext))
        dst_type = v["dtype"] if v["mode"] == 0 else 2
    elif name == "VDWCONV":     # INT8 in, weights at b_addr + w1*k0 + w0 for every vector, INT8 out
        ext = (v["k1"] - 1) * v["w_stride1"] + (v["k0"] - 1) * v["w_stride0"]
        out.append((v["a_mem"], v["a_addr"], v["a_stride0"], v["a_stride1"], 1, ext))
        out.append((v["b_mem"], v["b_addr"], 0, 0, 1, v["k1"] * v["k0"] - 1))
        dst_type = 0
    else:
        op = OPS[v["op"]]
        a_type, dst_type = valu_types(op, v["dtype"])
        out.append((v["a_mem"], v["a_addr"], v["a_stride0"], v["a_stride1"], rows(v["a_mem"], a_type), 0))
        if op not in UNARY:
            out.append((v["b_mem"], v["b_addr"], v["b_stride0"], v["b_stride1"], rows(v["b_mem"], v["dtype"]), 0))
        if op == "SELECT":
            s0, s1 = (0, 0) if v["c_fixed"] else (v["b_stride0"], v["b_stride1"])
            out.append((v["c_mem"], v["c_addr"], s0, s1, rows(v["c_mem"], v["dtype"]), 0))
    out.append((v["d_mem"], v["d_addr"], v["d_stride0"], v["d_stride1"], rows(v["d_mem"], dst_type), 0))
    return out


def expected_code(cfg, name: str, v: dict) -> ErrorCode:
    """The error a VRESCALE, VALU, VPOOL or VDWCONV with field values ``v`` stops with."""
    if any(v.get(f"{p}_mem", 0) == 3 for p in "abc"):
        return ErrorCode.ILLEGAL_INSTRUCTION
    if name == "VRESCALE" and (v["in_type"] > 5 or v["out_type"] in (3, 6, 7)):
        return ErrorCode.ILLEGAL_INSTRUCTION
    if name == "VALU" and (v["op"] >= len(OPS) or v["dtype"] == 3):
        return ErrorCode.ILLEGAL_INSTRUCTION
    if name == "VPOOL" and v["dtype"] == 3:
        return ErrorCode.ILLEGAL_INSTRUCTION
    windowed = name in ("VPOOL", "VDWCONV")
    if v["n0"] * v["n1"] * (v["k0"] * v["k1"] if windowed else 1) > 1 << 24:   # 2**24 steps
        return ErrorCode.ILLEGAL_INSTRUCTION
    params = {"VRESCALE": 2, "VDWCONV": 3}.get(name)
    if params and (v["param_addr"] < 0 or v["param_addr"] + params > cfg.psram_rows):
        return ErrorCode.SRAM_OVERFLOW
    count = v["n0"] * v["n1"] * (v["k0"] * v["k1"] if windowed else 1)
    if count:
        for mem, addr, s0, s1, nrows, ext in accesses(name, v):
            last = addr + (v["n1"] - 1) * s1 + (v["n0"] - 1) * s0 + ext + nrows - 1
            if addr < 0 or last >= depth(cfg, mem):
                return ErrorCode.SRAM_OVERFLOW
    return ErrorCode.NONE
