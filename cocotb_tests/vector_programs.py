"""Random vector-unit programs for the RTL tests (and the timing soup).

Every generated program is legal and well ordered: setup (DMA loads, ACC filled from ASRAM
with a VALU COPY) waits where it must; each vector instruction reads the "source" half of
every memory and writes the other half (halves swap at random between instructions, so
results feed later instructions), so no row written for one output vector is read for a
later one of the same instruction (the doc's rule); stores wait for the VPU and the next
vector instruction waits for the store.  Operands cover every memory, type, stride pattern
(0 repeats a vector), lane broadcast, window and destination the ISA allows.
"""
from __future__ import annotations

import numpy as np

from isa import make
from isa.instructions import BY_NAME, VecType, PoolMode, Sram, ValuOp, VecMem
from isa.vector import VALU_SIGS, vector_rows

ASRAM, ACC, PSRAM = int(VecMem.ASRAM), int(VecMem.ACC), int(VecMem.PSRAM)
VALU_TYPES = (VecType.INT8, VecType.INT16, VecType.INT32)
EXT_ASRAM = 0x4000          # external image of ASRAM (bus words = rows)


def regions(cfg) -> dict:
    """(memory, half) -> (first row, end row) of the rows vector operands may use."""
    a, c = cfg.asram_rows // 2, cfg.acc_rows // 2
    return {(ASRAM, 0): (0, a), (ASRAM, 1): (a, 2 * a), (ACC, 0): (0, c), (ACC, 1): (c, 2 * c),
            (PSRAM, 0): (0, cfg.psram_rows), (PSRAM, 1): (0, cfg.psram_rows)}


def memory_image(rng, cfg) -> bytearray:
    """ASRAM contents (random bytes, a quarter of them 0x00/0x7F/0x80/0xFF so every type sees
    its edge values) and PSRAM contents (pairs of plausible scaling rows, then anything)."""
    L = cfg.array_cols
    asram = rng.integers(0, 256, cfg.asram_rows * cfg.asram_row_bytes, dtype=np.uint8)
    edge = rng.random(asram.size) < 0.25
    asram[edge] = rng.choice([0x00, 0x7F, 0x80, 0xFF], int(edge.sum()))
    psram = rng.integers(-2**31, 2**31, (cfg.psram_rows, L), dtype=np.int64)
    for row in range(0, cfg.psram_rows * 3 // 4, 2):
        kind = (row // 2) % 4
        if kind == 0:                                  # scale32-like, shifts around 31/32
            psram[row] = rng.integers(1 << 30, 1 << 31, L)
            psram[row + 1] = rng.choice([29, 30, 31, 32, 33, 34, 36, 40, 47], L)
        elif kind == 1:                                # scale16-like (junk high half)
            psram[row] = rng.integers(1 << 14, 1 << 15, L) | (rng.integers(0, 1 << 16, L) << 16)
            psram[row + 1] = rng.choice([2, 10, 14, 15, 16, 20, 31, 32, 33], L)
        elif kind == 2:                                # outside the spec: any multiplier and shift
            psram[row + 1] = rng.choice([0, 1, 2, 31, 32, 33, 62, 63, 64 + 32, -1], L)
        else:                                          # small scale32 multipliers just past shift 31:
            psram[row] = rng.integers(1 << 17, 1 << 21, L)     # sums of thousands land in int8
            psram[row + 1] = rng.choice([32, 33, 34, 35], L)   # and double rounding matters
    ext_psram = EXT_ASRAM + asram.size
    mem = bytearray(ext_psram + psram.size * 4)
    mem[EXT_ASRAM:EXT_ASRAM + asram.size] = asram.tobytes()
    mem[ext_psram:] = psram.astype("<i4").tobytes()
    return mem


def setup(cfg) -> list:
    """Load ASRAM and PSRAM, then fill ACC with int32 vectors copied from ASRAM."""
    wpr = cfg.words_per_wide_row
    ext_psram = EXT_ASRAM + cfg.asram_rows * cfg.asram_row_bytes
    n = min(cfg.acc_rows, cfg.asram_rows // 4)
    return [
        make("DMA_LOAD", sram=int(Sram.ASRAM), sram_addr=0, ext_addr=EXT_ASRAM, len0=cfg.asram_rows, len1=1, len2=1),
        make("DMA_LOAD", sram=int(Sram.PSRAM), sram_addr=0, ext_addr=ext_psram, len0=cfg.psram_rows * wpr,
             len1=1, len2=1),
        make("VALU", op=int(ValuOp.COPY), dtype=int(VecType.INT32), n0=n, n1=1, a_mem=ASRAM, a_stride0=4,
             d_mem=ACC, d_stride0=1, wait=1),
    ]


def _place(rng, cfg, mem: int, half: int, rows: int, n0: int, n1: int, window: int = 0,
           strides=None) -> tuple[int, int, int]:
    """(addr, stride0, stride1) of an operand of ``rows`` rows per vector inside its region;
    ``window``: extra extent of a pooling window; ``strides`` forces the strides."""
    lo, hi = regions(cfg)[(mem, half)]
    for _ in range(30):
        if strides is not None:
            s0, s1 = strides
        else:
            s0 = int(rng.choice([rows, rows, 0, rows + 1, 2 * rows]))
            s1 = int(rng.choice([n0 * s0, n0 * s0 + int(rng.integers(1, 4)), 0, rows]))
        extent = (n1 - 1) * s1 + (n0 - 1) * s0 + window + rows
        if extent <= hi - lo:
            return int(rng.integers(lo, hi - extent + 1)), s0, s1
        if strides is not None:
            break
    return -1, 0, 0


def _dest(rng, cfg, mem: int, half: int, rows: int, n0: int, n1: int) -> tuple[int, int, int]:
    lo, hi = regions(cfg)[(mem, half)]
    s0 = rows if rng.random() < 0.8 else int(rng.choice([0, 2 * rows]))      # 0: later overwrites earlier
    s1 = n0 * s0 + int(rng.integers(0, 3)) if rng.random() < 0.9 else 0
    extent = (n1 - 1) * s1 + (n0 - 1) * s0 + rows
    return int(rng.integers(lo, hi - extent + 1)), s0, s1


def random_valu(rng, cfg, half: int):
    op = ValuOp(int(rng.integers(0, len(ValuOp))))
    sig = VALU_SIGS[op]
    t = VALU_TYPES[int(rng.integers(0, 3))]
    n0, n1 = int(rng.integers(1, 7)), int(rng.integers(1, 4))
    f = dict(op=int(op), dtype=int(t), n0=n0, n1=n1, imm0=int(rng.integers(-40, 80)), imm1=int(rng.integers(-40, 80)))
    if op in (ValuOp.CLAMP, ValuOp.NEGATE):
        f["imm0"], f["imm1"] = (int(x) for x in rng.integers(-300, 300, 2))
    if op is ValuOp.ARITHMETIC_RIGHT_SHIFT:
        f["imm0"] = int(rng.integers(0, 4))
    a_type = sig.a_type if sig.a_type is not None else t
    for p, typ in (("a", a_type), ("b", t), ("c", t)):
        mem = int(rng.integers(0, 3))
        rows = vector_rows(mem, typ)
        if p == "c":
            fixed = int(rng.random() < 0.4)
            strides = (0, 0) if fixed else (f["b_stride0"], f["b_stride1"])
            addr, _, _ = _place(rng, cfg, mem, half, rows, n0, n1, strides=strides)
            if addr < 0:
                fixed, strides = 1, (0, 0)
                addr, _, _ = _place(rng, cfg, mem, half, rows, n0, n1, strides=strides)
            f.update(c_mem=mem, c_addr=addr, c_fixed=fixed, c_bcast=int(rng.random() < 0.15))
            continue
        addr, s0, s1 = _place(rng, cfg, mem, half, rows, n0, n1)
        if addr < 0:
            addr, s0, s1 = _place(rng, cfg, mem, half, rows, n0, n1, strides=(0, 0))
        f.update({f"{p}_mem": mem, f"{p}_addr": addr, f"{p}_stride0": s0, f"{p}_stride1": s1,
                  f"{p}_bcast": int(rng.random() < 0.15)})
    out = sig.out if sig.out is not None else t
    d_mem = int(rng.integers(0, 2))
    f["d_mem"] = d_mem
    f["d_addr"], f["d_stride0"], f["d_stride1"] = _dest(rng, cfg, d_mem, 1 - half, vector_rows(d_mem, out), n0, n1)
    return make("VALU", **f)


def random_vrescale(rng, cfg, half: int):
    in_t = VecType(int(rng.integers(0, 6)))
    out_t = VecType(int(rng.choice([0, 1, 2, 4, 5])))
    n0, n1 = int(rng.integers(1, 7)), int(rng.integers(1, 3))
    a_mem = int(rng.integers(0, 3))
    f = dict(in_type=int(in_t), out_type=int(out_t), n0=n0, n1=n1, a_mem=a_mem,
             scale32=int(rng.random() < 0.6 and in_t is not VecType.INT48 or rng.random() < 0.1),
             double_round=int(rng.random() < 0.5), per_channel=int(rng.random() < 0.7),
             param_addr=int(rng.integers(0, cfg.psram_rows - 1)),
             in_zp=int(rng.choice([0, rng.integers(-128, 256), 32768, rng.integers(-65536, 65536)])),
             out_zp=int(rng.choice([0, rng.integers(-128, 256), 32768, rng.integers(-65536, 65536)])),
             clamp=int(rng.random() < 0.3))
    f["clamp_min"], f["clamp_max"] = (int(x) for x in np.sort(rng.integers(-65536, 65536, 2)))
    rows = vector_rows(a_mem, in_t)
    addr, s0, s1 = _place(rng, cfg, a_mem, half, rows, n0, n1)
    if addr < 0:
        addr, s0, s1 = _place(rng, cfg, a_mem, half, rows, n0, n1, strides=(0, 0))
    f.update(a_addr=addr, a_stride0=s0, a_stride1=s1)
    d_mem = int(rng.integers(0, 2))
    f["d_mem"] = d_mem
    f["d_addr"], f["d_stride0"], f["d_stride1"] = _dest(rng, cfg, d_mem, 1 - half, vector_rows(d_mem, out_t), n0, n1)
    return make("VRESCALE", **f)


def random_vpool(rng, cfg, half: int):
    t = VALU_TYPES[int(rng.integers(0, 3))]
    mode = PoolMode(int(rng.integers(0, 2)))
    n0, n1 = int(rng.integers(1, 5)), int(rng.integers(1, 3))
    k0, k1 = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    a_mem = int(rng.integers(0, 3))
    rows = vector_rows(a_mem, t)
    ws0 = int(rng.choice([rows, 0, 2 * rows]))
    ws1 = int(rng.choice([k0 * ws0 + rows, 3 * rows, 0]))
    window = (k1 - 1) * ws1 + (k0 - 1) * ws0
    addr, s0, s1 = _place(rng, cfg, a_mem, half, rows, n0, n1, window=window)
    if addr < 0:
        k0 = k1 = 1
        window = 0
        addr, s0, s1 = _place(rng, cfg, a_mem, half, rows, n0, n1, strides=(0, 0))
    out = t if mode is PoolMode.MAX else VecType.INT32
    d_mem = int(rng.integers(0, 2))
    d_addr, d0, d1 = _dest(rng, cfg, d_mem, 1 - half, vector_rows(d_mem, out), n0, n1)
    return make("VPOOL", mode=int(mode), dtype=int(t), n0=n0, n1=n1, k0=k0, k1=k1, w_stride0=ws0,
                w_stride1=ws1, a_mem=a_mem, a_addr=addr, a_stride0=s0, a_stride1=s1, d_mem=d_mem,
                d_addr=d_addr, d_stride0=d0, d_stride1=d1, in_zp=int(rng.integers(-300, 300)))


def _dw_params(rng, cfg) -> int:
    """VDWCONV's parameter rows (bias, multiplier, shift): mostly a bias row before one of
    memory_image's scale32-like (multiplier, shift) pairs, so that sums scale into int8 and
    rounding matters, else anywhere."""
    pairs = [r for r in range(2, cfg.psram_rows * 3 // 4, 2) if (r // 2) % 4 in (0, 3)]
    if pairs and rng.random() < 0.7:
        return int(rng.choice(pairs)) - 1
    return int(rng.integers(0, cfg.psram_rows - 2))


def random_vdwconv(rng, cfg, half: int):
    """VDWCONV: INT8 windows from any memory (strides as VPOOL's), weight rows from any
    memory's source half, parameter rows anywhere in PSRAM (random rows, so every scaling),
    zero points and clamps over the whole int8 range (empty clamp ranges too)."""
    n0, n1 = int(rng.integers(1, 5)), int(rng.integers(1, 3))
    k0, k1 = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    a_mem = int(rng.integers(0, 3))
    ws0 = int(rng.choice([1, 0, 2]))
    ws1 = int(rng.choice([k0 * ws0 + 1, 3, 0]))
    window = (k1 - 1) * ws1 + (k0 - 1) * ws0
    addr, s0, s1 = _place(rng, cfg, a_mem, half, 1, n0, n1, window=window)
    if addr < 0:
        k0 = k1 = 1
        addr, s0, s1 = _place(rng, cfg, a_mem, half, 1, n0, n1, strides=(0, 0))
    b_mem = int(rng.integers(0, 3))
    b_addr, _, _ = _place(rng, cfg, b_mem, half, 1, k0 * k1, 1, strides=(1, 0))
    d_mem = int(rng.integers(0, 2))
    d_addr, d0, d1 = _dest(rng, cfg, d_mem, 1 - half, vector_rows(d_mem, VecType.INT8), n0, n1)
    lo, hi = (int(x) for x in rng.integers(-128, 128, 2))
    return make("VDWCONV", n0=n0, n1=n1, k0=k0, k1=k1, w_stride0=ws0, w_stride1=ws1, a_mem=a_mem, a_addr=addr,
                a_stride0=s0, a_stride1=s1, b_mem=b_mem, b_addr=b_addr, d_mem=d_mem, d_addr=d_addr,
                d_stride0=d0, d_stride1=d1, param_addr=_dw_params(rng, cfg),
                in_zp=int(rng.integers(-128, 128)), out_zp=int(rng.integers(-128, 128)),
                clamp_min=min(lo, hi) if rng.random() < 0.9 else max(lo, hi), clamp_max=max(lo, hi),
                scale32=int(rng.random() < 0.6), double_round=int(rng.random() < 0.5))


def random_act(rng, cfg, half: int):
    count = int(rng.integers(1, 10))
    lo, hi = regions(cfg)[(ACC, half)]
    dlo, dhi = regions(cfg)[(ASRAM, 1 - half)]
    cmin, cmax = (int(x) for x in np.sort(rng.integers(-32768, 32768, 2)))
    return make("ACT", acc_addr=int(rng.integers(lo, hi - count + 1)), count=count,
                dst_addr=int(rng.integers(dlo, dhi - count + 1)), param_addr=int(rng.integers(0, cfg.psram_rows - 2)),
                out_zp=int(rng.integers(-200, 200)), clamp_min=int(rng.choice([-128, cmin])),
                clamp_max=int(rng.choice([127, cmax])), scale32=int(rng.random() < 0.6),
                double_round=int(rng.random() < 0.5))


def random_table(rng, cfg, half: int):
    """TABLE: now and then a LOAD of source-half ASRAM rows into TSRAM (anywhere), else an
    INT8 lookup (a table anywhere in TSRAM) or an INT16 one (t_addr 0) from ASRAM or ACC."""
    from isa.instructions import TSRAM_BYTES, TableMode
    from isa.vector import TABLE_TYPES, table_rows

    tsram_rows = TSRAM_BYTES // cfg.bus_bytes
    n0, n1 = int(rng.integers(1, 7)), int(rng.integers(1, 3))
    if rng.random() < 0.2:
        addr, s0, s1 = _place(rng, cfg, ASRAM, half, 1, n0, n1)
        if addr < 0:
            addr, s0, s1 = _place(rng, cfg, ASRAM, half, 1, n0, n1, strides=(0, 0))
        return make("TABLE", mode=int(TableMode.LOAD), n0=n0, n1=n1, a_mem=ASRAM, a_addr=addr, a_stride0=s0,
                    a_stride1=s1, t_addr=int(rng.integers(0, tsram_rows - n0 * n1 + 1)))
    mode = TableMode(int(rng.choice([TableMode.INT8, TableMode.INT16])))
    in_t, out_t = TABLE_TYPES[mode]
    a_mem = int(rng.integers(0, 2))
    addr, s0, s1 = _place(rng, cfg, a_mem, half, vector_rows(a_mem, in_t), n0, n1)
    if addr < 0:
        addr, s0, s1 = _place(rng, cfg, a_mem, half, vector_rows(a_mem, in_t), n0, n1, strides=(0, 0))
    d_mem = int(rng.integers(0, 2))
    d_addr, d_s0, d_s1 = _dest(rng, cfg, d_mem, 1 - half, vector_rows(d_mem, out_t), n0, n1)
    return make("TABLE", mode=int(mode), n0=n0, n1=n1, a_mem=a_mem, a_addr=addr, a_stride0=s0, a_stride1=s1,
                d_mem=d_mem, d_addr=d_addr, d_stride0=d_s0, d_stride1=d_s1,
                t_addr=int(rng.integers(0, tsram_rows - table_rows(mode, cfg.bus_bytes) + 1)))


GENERATORS = {"VALU": random_valu, "VRESCALE": random_vrescale, "VPOOL": random_vpool, "ACT": random_act,
              "TABLE": random_table, "VDWCONV": random_vdwconv}


def random_vector_instruction(rng, cfg, half: int, kinds=None, p=None):
    kinds = kinds or ("VALU", "VRESCALE", "VPOOL", "ACT", "TABLE", "VDWCONV")
    name = str(rng.choice(kinds, p=p))
    instr = GENERATORS[name](rng, cfg, half)
    instr.values["wait"] = int(rng.integers(0, 8)) if rng.random() < 0.3 else 0
    return instr


def vector_program(rng, cfg, count: int, kinds=None, p=None, stores: bool = True) -> tuple[list, bytearray]:
    """Setup, ``count`` random vector instructions (now and then an ASRAM store), HALT."""
    mem = memory_image(rng, cfg)
    instrs = setup(cfg)
    out = len(mem)
    mem += bytearray(16 * cfg.bus_bytes * 8)
    half = 0
    wait_dma = True
    for k in range(count):
        if rng.random() < 0.5:
            half = 1 - half
        instr = random_vector_instruction(rng, cfg, half, kinds, p)
        if wait_dma:
            instr.values["wait"] |= 1 | 4                  # after the setup / a store
            wait_dma = False
        instrs.append(instr)
        if stores and rng.random() < 0.1:
            row = int(rng.integers(0, cfg.asram_rows - 16))
            instrs.append(make("DMA_STORE", sram=int(Sram.ASRAM), sram_addr=row, ext_addr=out + 16 * cfg.bus_bytes
                               * int(rng.integers(0, 8)), len0=16, len1=1, len2=1, wait=4))
            wait_dma = True
    instrs.append(make("HALT"))
    return instrs, mem


assert set(GENERATORS) == {d.name for d in BY_NAME.values() if d.unit.name == "VPU"}
