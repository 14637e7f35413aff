"""Long MATMUL-, VPU- and TABLE-bound programs for the RTL: the simulation-speed benchmark's
workloads (bench/rtl_programs.py, bench/rtl.py) and the training runs of the model's
profile-guided build (hw/harness/simulation.py), so the profile covers what is measured."""
from __future__ import annotations

import numpy as np

from isa import make
from isa.instructions import Sram


def long_program(cfg, reps: int):
    rows = cfg.array_rows
    vectors = min(1024, cfg.acc_rows, cfg.asram_rows // 4)
    instrs = [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=0x10000, len0=vectors, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.WSRAM), sram_addr=0, ext_addr=0x20000, len0=4 * rows, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=0, ext_addr=0x30000, len0=12, len1=1, len2=1),
    ]
    for i in range(reps):
        instrs.append(make("MATMUL", a_addr=0, a_stride0=1, n0=vectors, n1=1, w_addr=rows * (i % 4),
                           acc_addr=0, accumulate=int(i > 0), wait=1 if i == 0 else 0))
        # the next input block streams in while the MXU works
        instrs.append(make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=2 * vectors, ext_addr=0x10000,
                           len0=vectors - 24, len1=1, len2=1, wait=1))
    instrs += [
        make("ACT", acc_addr=0, count=vectors, dst_addr=3 * vectors, param_addr=0, clamp_min=-128,
             clamp_max=127, scale32=1, wait=2),
        make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=3 * vectors, ext_addr=0x38000, len0=vectors,
             len1=1, len2=1, wait=4),
        make("HALT"),
    ]
    return instrs


def vector_program(cfg, reps: int):
    """A VPU-bound program: per repetition, a VALU MUL of int8 vectors into ACC, a
    VRESCALE back to int8, a 3x3 max-pooling window per vector and an int16 SELECT."""
    from isa.instructions import VecType, ValuOp, VecMem

    n = min(1024, cfg.acc_rows, cfg.asram_rows // 8)
    ASRAM, ACC = int(VecMem.ASRAM), int(VecMem.ACC)
    instrs = [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=0x10000, len0=4 * n, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=0, ext_addr=0x30000, len0=12, len1=1, len2=1),
    ]
    for i in range(reps):
        instrs += [
            make("VALU", op=int(ValuOp.MUL), dtype=int(VecType.INT8), n0=n, n1=1, a_mem=ASRAM, a_addr=0, a_stride0=1,
                 b_mem=ASRAM, b_addr=n, b_stride0=1, d_mem=ACC, d_addr=0, d_stride0=1, wait=1 if i == 0 else 0),
            make("VRESCALE", in_type=int(VecType.INT32), out_type=int(VecType.INT8), n0=n, n1=1, a_mem=ACC, a_stride0=1,
                 d_mem=ASRAM, d_addr=4 * n, d_stride0=1, param_addr=0, per_channel=1, scale32=1),
            make("VPOOL", mode=0, dtype=int(VecType.INT8), n0=n - 64, n1=1, k0=3, k1=3, w_stride0=1, w_stride1=32,
                 a_mem=ASRAM, a_addr=4 * n, a_stride0=1, d_mem=ASRAM, d_addr=5 * n, d_stride0=1),
            make("VALU", op=int(ValuOp.SELECT), dtype=int(VecType.INT16), n0=n // 2, n1=1, a_mem=ASRAM, a_addr=5 * n,
                 a_stride0=1, b_mem=ASRAM, b_addr=0, b_stride0=2, c_mem=ASRAM, c_addr=2 * n, d_mem=ASRAM,
                 d_addr=6 * n, d_stride0=2),
        ]
    instrs += [
        make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=6 * n, ext_addr=0x38000, len0=n, len1=1, len2=1, wait=4),
        make("HALT"),
    ]
    return instrs


def table_program(cfg, reps: int):
    """A TABLE-bound program: install a (random) int16 table, then per repetition an int16
    interpolated lookup of n vectors from ASRAM into ASRAM (4 result rows each) and one from
    ACC into ACC."""
    from isa.instructions import TSRAM_BYTES, TableMode, VecMem

    n = min(1024, cfg.acc_rows, cfg.asram_rows // 8)
    t_rows = TSRAM_BYTES // cfg.bus_bytes
    ASRAM, ACC, INT16 = int(VecMem.ASRAM), int(VecMem.ACC), int(TableMode.INT16)
    instrs = [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=0x10000, len0=t_rows, len1=1, len2=1),
        make("TABLE", mode=int(TableMode.LOAD), n0=t_rows, n1=1, a_mem=ASRAM, a_stride0=1, wait=1),
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=0x14000, len0=2 * n, len1=1, len2=1, wait=4),
    ]
    for i in range(reps):
        instrs += [
            make("TABLE", mode=INT16, n0=n, n1=1, a_mem=ASRAM, a_stride0=2, d_mem=ASRAM, d_addr=2 * n, d_stride0=4,
                 wait=1 if i == 0 else 0),
            make("TABLE", mode=INT16, n0=n, n1=1, a_mem=ACC, a_stride0=1, d_mem=ACC, d_stride0=1),
        ]
    instrs += [
        make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=2 * n, ext_addr=0x38000, len0=n, len1=1, len2=1, wait=4),
        make("HALT"),
    ]
    return instrs


PROGRAMS = {"matmul": long_program, "vector": vector_program, "table": table_program}


def workload_memory(program) -> bytes:
    """External memory for these programs: the program image, then random inputs at 0x10000."""
    mem = bytearray(0x3C000)
    image = program.memory_image({})
    mem[:len(image)] = image
    mem[0x10000:0x30000] = np.random.default_rng(0).integers(0, 256, 0x20000, dtype=np.uint8).tobytes()
    return bytes(mem)
