"""Whole TABLE programs and their oracles, for the ISA simulator tests (tests/test_isa_table.py)
and the RTL tests (cocotb_tests/test_rtl_table.py).  A program DMAs the table image into
ASRAM, installs it with TABLE LOAD, then for every chunk of input vectors DMAs the inputs
in, looks them up and DMAs the results out (a LOOP over the chunks).  Oracles: our
reference interpreter's TABLE, or apply_lookup_s with its slope REQUIRE waived.

External memory: the program at 0, the table image (isa.vector.table_image) at ``T_EXT``,
then one slot per chunk from ``X_EXT``: the chunk's inputs, which its outputs overwrite
(a slot is as large as the outputs, so one LOOP increment moves both).
"""
from __future__ import annotations

import numpy as np

from isa import make
from isa.instructions import INSTR_BYTES, TableMode, VecMem
from isa.vector import TABLE_TYPES, table_image, vector_rows
from sim import tosa_helpers as th

DMA, VPU = 1, 4
T_EXT = 8192


def reference_table(x: np.ndarray, table: np.ndarray, in_t: str) -> np.ndarray:
    """TOSA 1.0 TABLE (table as a constant input) in sim/reference."""
    from sim.reference import run_graph
    from tosa_ir import Block, Graph, Operator, Region, Tensor

    out_t = "int8" if in_t == "int8" else "int32"
    block = Block("main")
    block.add_tensor(Tensor("x", x.shape, in_t))
    block.inputs.append("x")
    block.add_tensor(Tensor("table", table.shape, in_t, table))
    block.operators.append(Operator("CONST", [], ["table"]))
    block.add_tensor(Tensor("out", x.shape, out_t))
    block.outputs.append("out")
    block.operators.append(Operator("TABLE", ["x", "table"], ["out"], {}))
    return np.asarray(run_graph(Graph(regions=[Region("main", [block])]), {"x": x})["out"])


def lookup_waived(table, x) -> np.ndarray:
    """apply_lookup_s without its slope REQUIRE."""
    return th.apply_lookup_s(table, x, require=lambda cond, text: None)


def random_walk_table(rng, step: int = 16000) -> np.ndarray:
    """513 int16 entries whose neighbours differ by < 2**15 (the slope REQUIRE holds)."""
    steps = rng.integers(-step, step + 1, size=512)
    return np.clip(np.concatenate([[rng.integers(-32768, 32768)], steps]).cumsum(), -32768, 32767)


def extreme_table(rng) -> np.ndarray:
    """Entries at -32768/32767 (slopes of +-65535: the interpolation's extremes), with
    table[511], table[512] extreme too."""
    t = rng.choice([-32768, 32767], size=513)
    t[510:513] = [-32768, 32767, -32768]
    return t


def table_program(cfg, mode: int, table, x: np.ndarray, chunk: int, a_mem: int = VecMem.ASRAM,
                  t_addr: int = 0):
    """(instructions, memory image, read_outputs(memory) -> array like ``x``) of a program
    that looks up every element of ``x`` (int8 or int16) in ``table`` (256 or 513 entries),
    ``chunk`` vectors of COLS lanes per loop iteration.  ``a_mem`` ACC: the inputs are copied
    from ASRAM to ACC with a VALU COPY first (so TABLE reads ACC)."""
    bus, lanes = cfg.bus_bytes, cfg.array_cols
    in_t, out_t = TABLE_TYPES[TableMode(mode)]
    R = vector_rows(VecMem.ASRAM, in_t)
    W = vector_rows(VecMem.ASRAM, out_t)
    flat = np.asarray(x).ravel()
    n_vec = -(-flat.size // lanes)
    chunks = -(-n_vec // chunk)
    padded = np.zeros(chunks * chunk * lanes, dtype=np.int64)
    padded[:flat.size] = flat
    image = table_image(mode, table)
    t_rows = len(image) // bus
    slot = chunk * W * bus
    x_ext = T_EXT + -(-len(image) // bus) * bus
    end = x_ext + chunks * slot
    if end > cfg.ext_mem_bytes:
        raise ValueError("inputs do not fit in external memory")
    memory = bytearray(end)
    memory[T_EXT:T_EXT + len(image)] = image
    dt = np.int8 if mode == TableMode.INT8 else "<i2"
    data = padded.reshape(chunks, chunk * lanes).astype(dt)
    for k in range(chunks):
        memory[x_ext + k * slot:x_ext + k * slot + data[k].nbytes] = data[k].tobytes()

    x_row, y_row = 0, chunk * R           # ASRAM: inputs, then outputs (the table staging is reused)
    if x_row + chunk * R + chunk * W > cfg.asram_rows or t_rows > cfg.asram_rows:
        raise ValueError("chunk too large for ASRAM")
    src = {"a_mem": VecMem.ASRAM, "a_addr": x_row}
    body = [make("DMA_LOAD", wait=VPU, sram=0, sram_addr=x_row, ext_addr=x_ext, len0=chunk * R, len1=1, len2=1)]
    if a_mem == VecMem.ACC:
        if chunk > cfg.acc_rows:
            raise ValueError("chunk too large for ACC")
        body.append(make("VALU", wait=DMA, op=24, dtype=int(in_t), n0=chunk, n1=1, a_mem=VecMem.ASRAM,
                         a_addr=x_row, a_stride0=R, d_mem=VecMem.ACC, d_addr=0, d_stride0=1))
        src = {"a_mem": VecMem.ACC, "a_addr": 0}
    body += [
        make("TABLE", wait=DMA, mode=int(mode), n0=chunk, n1=1, a_stride0=vector_rows(src["a_mem"], in_t),
             d_mem=VecMem.ASRAM, d_addr=y_row, d_stride0=W, t_addr=t_addr, **src),
        make("DMA_STORE", wait=VPU, sram=0, sram_addr=y_row, ext_addr=x_ext, len0=chunk * W, len1=1, len2=1),
    ]
    instrs = [
        make("DMA_LOAD", sram=0, sram_addr=0, ext_addr=T_EXT, len0=t_rows, len1=1, len2=1),
        make("TABLE", wait=DMA, mode=int(TableMode.LOAD), n0=t_rows, n1=1, a_mem=VecMem.ASRAM, a_addr=0,
             a_stride0=1, t_addr=t_addr),
        make("LOOP", count=chunks, body=len(body), inc_ext=slot),
        *body,
        make("HALT", wait=DMA | 2 | VPU),
    ]
    if len(instrs) * INSTR_BYTES > T_EXT:
        raise AssertionError("program overlaps the table")

    def read_outputs(mem) -> np.ndarray:
        odt = np.int8 if mode == TableMode.INT8 else "<i4"
        out = np.frombuffer(bytes(mem[x_ext:end]), dtype=odt).reshape(chunks, -1)[:, :chunk * lanes]
        return out.ravel()[:flat.size].astype(np.int64).reshape(np.shape(x))

    return instrs, memory, read_outputs
