"""MATMUL's type modes in the ISA simulator: int8 x int8 -> int32, int16 x int8 -> int48,
int8 x int4 -> int32 (and int16 x int4 -> int48), against values computed independently.

Oracles: a transcription of the MATMUL doc in numpy int64 written here (its own unpacking
of int16 lanes and int4 nibbles, its own int48 wrapping on Python integers); the reference
interpreter (sim.reference, checked against the official TOSA reference model) for
FULLY_CONNECTED in each TOSA mode; TOSA's apply_scale_16 for VRESCALE reading int48
accumulators; hand-computed cycle counts for the timing rules.
"""
from __future__ import annotations

import numpy as np
import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG, ErrorCode, make
from isa.asm import assemble
from isa.instructions import MatmulAType, MatmulWType
from isa.program import Program, Segment
from sim.isa.sim import IsaSim
from sim.isa.units import NpuState, exec_matmul
from sim.npu_timing import TimingModel
from sim.reference.interpreter import run_graph
from sim.tosa_helpers import apply_scale_16
from tosa_ir import Block, Graph, Operator, Tensor

DATA, WDATA, PDATA = 0x1000, 0x8000, 0xC000
MODES = [(a, w) for a in MatmulAType for w in MatmulWType]


def wrap(x: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((x + half) % (1 << bits)) - half


# -- the doc, transcribed -------------------------------------------------------------------
def doc_weights(wsram: np.ndarray, f: dict, cfg) -> np.ndarray:
    rows, cols = cfg.array_rows, cfg.array_cols
    if f.get("w_type", 0) == MatmulWType.INT8:
        return wsram[f["w_addr"]:f["w_addr"] + rows].view(np.int8).astype(np.int64)
    tile = wsram[f["w_addr"]:f["w_addr"] + rows // 2].reshape(-1).astype(np.int64)
    index = np.arange(rows * cols)                       # nibble k*COLS + n
    nib = (tile[index // 2] >> (4 * (index % 2))) & 0xF
    return np.where(nib >= 8, nib - 16, nib).reshape(rows, cols)


def doc_vector(asram: np.ndarray, row: int, a_type: int, rows: int) -> np.ndarray:
    if a_type == MatmulAType.INT8:
        return asram[row].view(np.int8).astype(np.int64)
    b = np.concatenate([asram[row], asram[row + 1]]).astype(np.int64)
    u = b[0::2] | (b[1::2] << 8)                          # little-endian lanes
    return np.where(u >= 1 << 15, u - (1 << 16), u)


def doc_matmul(asram, wsram, acc: np.ndarray, f: dict, cfg) -> np.ndarray:
    """The MATMUL doc: the new ACC (int32 rows) after the instruction ``f``."""
    acc = acc.copy()
    a_type = f.get("a_type", 0)
    p = 2 if a_type == MatmulAType.INT16 else 1
    W = doc_weights(wsram, f, cfg) - f.get("w_zp", 0)
    for i1 in range(f["n1"]):
        for i0 in range(f["n0"]):
            row = f["a_addr"] + i1 * f["a_stride1"] + i0 * f["a_stride0"]
            a = doc_vector(asram, row, a_type, cfg.array_rows) - f.get("a_zp", 0)
            total = a @ W
            r = f["acc_addr"] + p * (i1 * f["n0"] + i0)
            for n in range(cfg.array_cols):
                if p == 1:
                    old = int(acc[r][n]) if f.get("accumulate") else 0
                    acc[r][n] = wrap(old + int(total[n]), 32)
                else:
                    old = (wrap(int(acc[r + 1][n]), 16) << 32) + (int(acc[r][n]) & 0xFFFFFFFF) \
                        if f.get("accumulate") else 0
                    y = wrap(old + int(total[n]), 48)
                    acc[r][n] = wrap(y & 0xFFFFFFFF, 32)
                    acc[r + 1][n] = y >> 32
    return acc


def read_int48(acc: np.ndarray, first: int, count: int) -> np.ndarray:
    """``count`` int48 results (two rows each) from ACC row ``first``, as int64."""
    pair = acc[first:first + 2 * count].reshape(count, 2, -1)
    return (pair[:, 1].astype(np.int16).astype(np.int64) << 32) | pair[:, 0].view(np.uint32)


def fields(f: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in f.items())


def run(cfg, lines, segments):
    segs = [Segment(f"s{i}", addr, bytes(data)) for i, (addr, data) in enumerate(segments)]
    program = Program(cfg, assemble("\n".join(lines)), segments=segs)
    res = IsaSim(cfg).run(program)
    assert res.ok, (res.error_code, res.error_pc)
    return res


def load_lines(a_rows: int, w_rows: int) -> list[str]:
    return [f"DMA_LOAD sram=ASRAM ext_addr={DATA} len0={a_rows} len1=1 len2=1",
            f"DMA_LOAD sram=WSRAM ext_addr={WDATA} len0={w_rows} len1=1 len2=1"]


def random_matmul(rng, cfg, a_type, w_type, a_rows, w_rows, acc_rows) -> dict:
    p = 2 if a_type == MatmulAType.INT16 else 1
    tile = cfg.array_rows // 2 if w_type == MatmulWType.INT4 else cfg.array_rows
    n0, n1 = int(rng.choice([1, 2, 3, 5])), int(rng.choice([1, 2, 3]))
    s0 = int(rng.choice([0, 1, p, 3]))
    s1 = int(rng.choice([0, n0 * s0, 7]))
    last = (n1 - 1) * s1 + (n0 - 1) * s0 + p - 1
    zp = [0, -32768, 32767, int(rng.integers(-32768, 32768))]
    return dict(a_addr=int(rng.integers(0, a_rows - last)), a_stride0=s0, a_stride1=s1, n0=n0, n1=n1,
                w_addr=int(rng.integers(0, w_rows - tile + 1)),
                acc_addr=int(rng.integers(0, acc_rows - p * n0 * n1 + 1)),
                accumulate=int(rng.random() < 0.6), a_zp=int(rng.choice(zp)),
                w_zp=int(rng.choice([0, -128, 127, int(rng.integers(-128, 128))])),
                a_type=int(a_type), w_type=int(w_type))


# -- every mode against the doc ------------------------------------------------------------
@pytest.mark.parametrize("cfg", [SMALL_CONFIG, DEFAULT_CONFIG], ids=["4x4", "16x16"])
@pytest.mark.parametrize("a_type,w_type", MODES, ids=[f"{a.name}x{w.name}" for a, w in MODES])
def test_modes_match_doc(cfg, a_type, w_type):
    rng = np.random.default_rng(10 * int(a_type) + int(w_type) + cfg.array_rows)
    a_rows, w_rows, acc_rows = 64, 4 * cfg.array_rows, 48
    acts = rng.integers(0, 256, a_rows * cfg.bus_bytes, dtype=np.uint8)
    weights = rng.integers(0, 256, w_rows * cfg.bus_bytes, dtype=np.uint8)
    mm = [random_matmul(rng, cfg, a_type, w_type, a_rows, w_rows, acc_rows) for _ in range(12)]
    # Accumulate chains onto the previous instruction's rows, and all zero points at their limits.
    for i in range(1, len(mm), 3):
        mm[i].update(acc_addr=mm[i - 1]["acc_addr"], accumulate=1)
    mm[0].update(a_zp=-32768, w_zp=-128, accumulate=0)
    lines = load_lines(a_rows, w_rows) + [f"MATMUL wait=DMA {fields(mm[0])}"]
    lines += [f"MATMUL {fields(f)}" for f in mm[1:]] + ["HALT"]
    res = run(cfg, lines, [(DATA, acts), (WDATA, weights)])
    st = res.state
    acc = np.zeros_like(st.acc)
    for f in mm:
        acc = doc_matmul(st.asram, st.wsram, acc, f, cfg)
    assert np.array_equal(st.acc, acc)
    assert st.acc.any()


def test_default_fields_are_int8():
    """An instruction built without a_type/w_type is the int8 x int8 -> int32 MATMUL."""
    v = make("MATMUL", n0=1, n1=1).values
    assert v["a_type"] == MatmulAType.INT8 and v["w_type"] == MatmulWType.INT8


# -- int48 wrapping and extremes -----------------------------------------------------------
@pytest.mark.parametrize("w_type", list(MatmulWType), ids=lambda w: w.name)
def test_int48_extremes_wrap(w_type):
    """-32768 x -128 (int4: -8) in every lane, accumulated 300 times in a LOOP onto ACC
    preloaded (VALU COPY of two int32 rows) just below 2**47: the sum wraps at 48 bits;
    and the most negative product, 65535 x (w - 127), onto an accumulator preloaded just
    above -2**47 wraps the other way."""
    cfg = DEFAULT_CONFIG
    rows, cols = cfg.array_rows, cfg.array_cols
    w_val = -128 if w_type == MatmulWType.INT8 else -8
    acts = np.concatenate([np.full(rows, -32768), np.full(rows, 32767)]).astype("<i2").tobytes()
    tile = (np.full(rows * cols, 0x80, np.uint8) if w_type == MatmulWType.INT8
            else np.full(rows * cols // 2, 0x88, np.uint8))
    step = rows * 32768 * -w_val                         # one product row, every lane
    count = 300
    start_hi = [(1 << 47) - 1 - (count // 2) * step, -(1 << 47) + 5]
    params = np.zeros((4, cols), "<i8")
    # ACC rows 0/1: preload start_hi[0] (then +step); rows 2/3: start_hi[1] (then -step with a_zp).
    pre = np.array(start_hi, dtype=np.int64)
    params[0], params[1] = pre[0] & 0xFFFFFFFF, pre[0] >> 32
    params[2], params[3] = pre[1] & 0xFFFFFFFF, pre[1] >> 32
    psram = params.astype(np.uint64).astype(np.uint32).tobytes()
    wpr = cfg.words_per_wide_row
    lines = [
        f"DMA_LOAD sram=ASRAM ext_addr={DATA} len0=4 len1=1 len2=1",
        f"DMA_LOAD sram=WSRAM ext_addr={WDATA} len0={len(tile) // cfg.bus_bytes} len1=1 len2=1",
        f"DMA_LOAD sram=PSRAM ext_addr={PDATA} len0={4 * wpr} len1=1 len2=1",
        "VALU wait=DMA op=COPY dtype=INT32 n0=4 n1=1 a_mem=PSRAM a_addr=0 a_stride0=1 d_mem=ACC d_addr=0 d_stride0=1",
        f"LOOP wait=VPU count={count} body=2",
        f"MATMUL n0=1 n1=1 accumulate=1 a_type=INT16 w_type={w_type.name}",
        # (32767 + 32768) x (w - 127): the extreme negative product, so this one decreases.
        f"MATMUL n0=1 n1=1 accumulate=1 a_addr=2 acc_addr=2 a_zp=-32768 w_zp=127 a_type=INT16 "
        f"w_type={w_type.name}",
        "HALT",
    ]
    res = run(cfg, lines, [(DATA, acts), (WDATA, tile), (PDATA, psram)])
    got = read_int48(res.state.acc, 0, 2)
    want0 = wrap(start_hi[0] + count * step, 48)
    down = count * rows * 65535 * (w_val - 127)
    want1 = wrap(start_hi[1] + down, 48)
    assert start_hi[0] + count * step >= 1 << 47 and want0 < 0            # really wrapped
    assert start_hi[1] + down < -(1 << 47) and want1 > 0
    assert (got[0] == want0).all() and (got[1] == want1).all()
    # The high row holds int32(y >> 32): sign-extended, so it reads as an INT32 vector too.
    assert (res.state.acc[1] == want0 >> 32).all()


def test_int32_mode_wraps_at_32():
    """The int8 modes keep int32 wrapping (int4 weights included)."""
    cfg = SMALL_CONFIG
    acts = np.full(cfg.bus_bytes, 0x80, np.uint8)                         # -128
    tile = np.full(cfg.array_rows * cfg.array_cols // 2, 0x88, np.uint8)  # -8 everywhere
    f = dict(n0=1, n1=1, a_zp=32767, w_zp=127, w_type=1)                  # (-32895) x (-135)
    lines = load_lines(1, 2) + [f"MATMUL wait=DMA accumulate=0 {fields(f)}"]
    lines += ["LOOP count=400 body=1", f"MATMUL accumulate=1 {fields(f)}", "HALT"]
    res = run(cfg, lines, [(DATA, acts), (WDATA, tile)])
    total = 401 * cfg.array_rows * 32895 * 135
    assert total > 1 << 32
    assert (res.state.acc[0] == wrap(total, 32)).all()


# -- int48 accumulators feed VRESCALE directly ---------------------------------------------
def test_vrescale_reads_matmul_int48():
    cfg = SMALL_CONFIG
    rng = np.random.default_rng(3)
    n = 6
    acts = rng.integers(-32768, 32768, (n, cfg.array_rows)).astype("<i2")
    w = rng.integers(-128, 128, (cfg.array_rows, cfg.array_cols)).astype(np.int8)
    mul, shift = 20000, 20
    params = np.array([[mul] * cfg.array_cols, [shift] * cfg.array_cols], "<i4")
    lines = load_lines(2 * n, cfg.array_rows) + [
        f"DMA_LOAD sram=PSRAM ext_addr={PDATA} len0={2 * cfg.words_per_wide_row} len1=1 len2=1",
        f"MATMUL wait=DMA a_stride0=2 n0={n} n1=1 acc_addr=4 a_type=INT16",
        f"VRESCALE wait=MXU n0={n} n1=1 a_mem=ACC a_addr=4 a_stride0=2 d_mem=ACC d_addr=40 d_stride0=1 "
        "in_type=INT48 out_type=INT32 param_addr=0 per_channel=0 scale32=0",
        "HALT"]
    res = run(cfg, lines, [(DATA, acts.tobytes()), (WDATA, w.tobytes()), (PDATA, params.tobytes())])
    exact = acts.astype(np.int64) @ w.astype(np.int64)
    assert np.array_equal(read_int48(res.state.acc, 4, n), exact)
    want = apply_scale_16(exact, np.full(exact.shape, mul), np.full(exact.shape, shift))
    assert np.array_equal(res.state.acc[40:40 + n], want)


# -- against the reference interpreter -----------------------------------------------------
def fully_connected_graph(n: int, ic: int, oc: int, in_t: str, w_t: str, out_t: str, w: np.ndarray,
                          bias: np.ndarray, izp: int, wzp: int) -> Graph:
    """Draft-form FULLY_CONNECTED (zero points as attributes)."""
    block = Block("main")
    block.add_tensor(Tensor("x", (n, ic), in_t))
    block.add_tensor(Tensor("w", (oc, ic), w_t, w))
    block.add_tensor(Tensor("b", (oc,), out_t, bias))
    block.add_tensor(Tensor("y", (n, oc), out_t))
    block.operators.append(Operator("FULLY_CONNECTED", ["x", "w", "b"], ["y"],
                                    {"input_zp": izp, "weight_zp": wzp}, "fc"))
    block.inputs, block.outputs = ["x"], ["y"]
    return Graph.single_block(block, version=(0, 80, 0, True))


@pytest.mark.parametrize("mode", [("int8", "int8", "int32"), ("int8", "int4", "int32"),
                                  ("int16", "int8", "int48")])
def test_fully_connected_matches_reference(mode):
    """FULLY_CONNECTED (IC = ROWS, OC = COLS) as a bias preload (VALU COPY into ACC: one
    row, or the two int48 rows) then one accumulating MATMUL in the TOSA mode."""
    in_t, w_t, out_t = mode
    cfg = DEFAULT_CONFIG
    rows, cols = cfg.array_rows, cfg.array_cols
    rng = np.random.default_rng(len(in_t) + len(w_t))
    n = 9
    lo, hi = {"int8": (-128, 127), "int16": (-32768, 32767), "int4": (-7, 7)}[in_t], \
        {"int8": (-128, 127), "int4": (-7, 7)}[w_t]
    x = rng.integers(lo[0], lo[1] + 1, (n, rows))
    x[0] = lo[0]
    wt = rng.integers(hi[0], hi[1] + 1, (cols, rows))               # [OC, IC]
    wt[:, 0] = hi[0]
    izp, wzp = (int(rng.integers(-128, 128)), int(rng.integers(-128, 128))) if mode[1] == "int8" \
        and in_t == "int8" else (0, 0)
    bias = rng.integers(-(1 << 40), 1 << 40, cols) if out_t == "int48" else rng.integers(-(1 << 20), 1 << 20, cols)
    graph = fully_connected_graph(n, rows, cols, in_t, w_t, out_t, wt.astype(np.int8), bias, izp, wzp)
    want = run_graph(graph, {"x": x.astype(np.int8 if in_t == "int8" else np.int16)})["y"]

    a_type = MatmulAType.INT16 if in_t == "int16" else MatmulAType.INT8
    w_type = MatmulWType.INT4 if w_t == "int4" else MatmulWType.INT8
    p = 2 if a_type == MatmulAType.INT16 else 1
    tile = wt.T.astype(np.int64)                                    # [IC = k][OC = n]
    if w_type == MatmulWType.INT4:
        flat = (tile.ravel() & 0xF).astype(np.uint8)
        wbytes = (flat[0::2] | (flat[1::2] << 4)).tobytes()
    else:
        wbytes = tile.astype(np.int8).tobytes()
    abytes = x.astype(np.int8 if p == 1 else "<i2").tobytes()
    bias_rows = np.stack([bias & 0xFFFFFFFF, bias >> 32]).astype(np.int64).astype(np.uint64).astype(np.uint32)
    wpr = cfg.words_per_wide_row
    lines = [
        f"DMA_LOAD sram=ASRAM ext_addr={DATA} len0={p * n} len1=1 len2=1",
        f"DMA_LOAD sram=WSRAM ext_addr={WDATA} len0={len(wbytes) // cfg.bus_bytes} len1=1 len2=1",
        f"DMA_LOAD sram=PSRAM ext_addr={PDATA} len0={2 * wpr} len1=1 len2=1",
        f"VALU wait=DMA op=COPY dtype=INT32 n0={n} n1=1 a_mem=PSRAM a_addr=0 a_stride0=0 "
        f"d_mem=ACC d_addr=0 d_stride0={p}"]
    if p == 2:
        lines.append(f"VALU op=COPY dtype=INT32 n0={n} n1=1 a_mem=PSRAM a_addr=1 a_stride0=0 "
                     f"d_mem=ACC d_addr=1 d_stride0=2")
    lines += [f"MATMUL wait=VPU a_stride0={p} n0={n} n1=1 accumulate=1 a_zp={izp} w_zp={wzp} "
              f"a_type={a_type.name} w_type={w_type.name}", "HALT"]
    res = run(cfg, lines, [(DATA, abytes), (WDATA, wbytes), (PDATA, bias_rows.tobytes())])
    got = read_int48(res.state.acc, 0, n) if p == 2 else res.state.acc[:n].astype(np.int64)
    assert np.array_equal(got, np.asarray(want, np.int64))


# -- errors, footprint, timing -------------------------------------------------------------
CFG = SMALL_CONFIG
A, W, C = CFG.asram_rows, CFG.wsram_rows, CFG.acc_rows


@pytest.mark.parametrize("text,code", [
    (f"MATMUL n0=1 n1=1 a_addr={A - 1} a_type=INT16", ErrorCode.SRAM_OVERFLOW),    # second row past the end
    (f"MATMUL n0=1 n1=1 a_addr={A - 2} a_type=INT16", ErrorCode.NONE),
    (f"MATMUL n0=2 n1=1 acc_addr={C - 3} a_type=INT16", ErrorCode.SRAM_OVERFLOW),  # 4 ACC rows
    (f"MATMUL n0=2 n1=1 acc_addr={C - 4} a_type=INT16", ErrorCode.NONE),
    (f"MATMUL n0=0 n1=1 a_addr={A - 1} acc_addr={C} a_type=INT16", ErrorCode.NONE),  # touches nothing
    (f"MATMUL n0=1 n1=1 w_addr={W - 2} w_type=INT4", ErrorCode.NONE),              # tile = 2 rows
    (f"MATMUL n0=1 n1=1 w_addr={W - 1} w_type=INT4", ErrorCode.SRAM_OVERFLOW),
    (f"MATMUL n0=0 n1=0 w_addr={W - 1} w_type=INT4", ErrorCode.SRAM_OVERFLOW),     # tile always checked
    (f"MATMUL n0=1 n1=1 w_addr={W - 2} w_type=INT8", ErrorCode.SRAM_OVERFLOW),
])
def test_errors(text, code):
    program = Program(CFG, assemble(text + "\nHALT"))
    res = IsaSim(CFG).run(program)
    assert res.error_code == code


def test_footprint_int16_reads_two_rows():
    state = NpuState(CFG, b"")
    v = make("MATMUL", a_addr=3, a_stride0=5, n0=2, n1=1, acc_addr=8, accumulate=1, a_type=1, w_type=1,
             w_addr=6).values
    fp = exec_matmul(state, v)
    reads = {mem: rows for mem, rows in fp.reads if mem != "ACC"}
    assert sorted(np.asarray(reads["ASRAM"]).tolist()) == [3, 4, 8, 9]
    assert reads["WSRAM"] == (6, 8)
    assert fp.writes == [("ACC", (8, 12))] and ("ACC", (8, 12)) in fp.reads


def test_timing_int16_half_rate():
    """int16 inputs: 2 cycles per vector in the front end; an int4 tile changes nothing."""
    model = TimingModel(CFG)
    R = CFG.array_rows
    # a long MATMUL and a SYNC first, so that the instruction fetch has run ahead
    prog = [make("MATMUL", n0=60, n1=1), make("SYNC", wait=2),
            make("MATMUL", n0=3, n1=1, a_type=1), make("MATMUL", n0=3, n1=1, w_type=1),
            make("MATMUL", n0=1, n1=1, a_type=1, w_type=1), make("HALT")]
    t = model.run(prog)
    per = t.per_instruction[2:]
    first = t.per_instruction[1].issue + 1          # issue of the first int16 MATMUL
    s = first + 1
    assert per[0] == (first, s, s + 2 * 3 + R + 1)
    ready = s + max(6, R) - 1          # the second MATMUL issues in the first's last front-end cycle
    assert per[1] == (ready, ready + 1, ready + 1 + 3 + R + 1)
    ready2 = ready + 1 + max(3, R) - 1
    assert per[2] == (ready2, ready2 + 1, ready2 + 1 + 2 + R + 1)
