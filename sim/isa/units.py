"""Architectural state of the NPU and the semantics of its unit instructions (DMA, MXU, VPU).

Each ``exec_*`` function implements one instruction's ``doc`` in isa/instructions.py with a
handful of numpy calls.  Every function first checks everything that can fail and raises
:class:`Trap` *before* touching any state (the ISA requires errors to be detected before
any word is transferred), then returns the instruction's :class:`Footprint`: the scratchpad
words it read and wrote, which the hazard checker (sim/isa/hazards.py) compares between
instructions that overlap in time.

Conventions where the ISA text leaves room (the RTL must match; see sim/isa/sim.py):

* Address arithmetic is exact (unbounded integers), never modulo a field width; inside LOOPs
  the fields are effective addresses (sim/isa/sim.py), and a negative one is out of range.
* Error priority within one instruction: ILLEGAL_INSTRUCTION, DMA_MISALIGNED,
  DMA_OUT_OF_RANGE, SRAM_OVERFLOW.
* SRAM_OVERFLOW concerns rows actually touched: a transfer of zero words, a MATMUL with
  ``n0*n1 == 0`` or an ACT with ``count == 0`` touches no data rows.  The weight tile of a
  MATMUL and the three parameter rows of an ACT are read before their loops and are always
  checked.
* ``clamp(x, lo, hi)`` is ``min(max(x, lo), hi)`` (TOSA apply_clip order), computed on exact
  integers; ``s + out_zp`` does not wrap (the doc marks only ``v`` and ``s`` as wrapping).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import as_strided

from isa import dma, matmul
from isa.config import NpuConfig
from isa.instructions import TSRAM_BYTES, ErrorCode, MatmulWType, Sram, Unit

from sim.isa import dma as isa_dma
from sim.isa.rescale import act_output


class Trap(Exception):
    """An instruction stops the NPU with ``code``; nothing was changed by it."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


# Scratchpad names used in footprints and hazard reports.  PSRAM is counted in bus words
# (its DMA unit); the ACT unit's parameter rows are converted to words.
ASRAM, WSRAM, ACC, PSRAM = "ASRAM", "WSRAM", "ACC", "PSRAM"


@dataclass
class Footprint:
    """Scratchpad words one instruction read and wrote.

    Each access is ``(memory, rows)`` with ``rows`` either a half-open ``(lo, hi)`` range or
    a 1-D numpy array of row indices.
    """

    unit: Unit
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)


class NpuState:
    """External memory and scratchpads of one NPU, zeroed at reset.

    External memory is a numpy ``uint8`` buffer that starts as the given image and grows
    (zero-filled) when a DMA reaches past it; accesses are range-checked against
    ``config.ext_mem_bytes``, not against the buffer.
    """

    def __init__(self, config: NpuConfig, memory: bytes | bytearray | np.ndarray):
        self.config = config
        self.bus = bus = config.bus_bytes
        image = np.frombuffer(bytes(memory), dtype=np.uint8) if not isinstance(memory, np.ndarray) \
            else np.asarray(memory, dtype=np.uint8).ravel()
        if image.size > config.ext_mem_bytes:
            raise ValueError(f"memory image of {image.size} bytes exceeds ext_mem_bytes="
                             f"{config.ext_mem_bytes}")
        self.initial_bytes = image.size
        self.ext = np.zeros(-(-image.size // bus) * bus, dtype=np.uint8)
        self.ext[:image.size] = image
        self.written_end = 0          # one past the highest external byte a DMA wrote
        self.asram = np.zeros((config.asram_rows, config.asram_row_bytes), dtype=np.uint8)
        self.wsram = np.zeros((config.wsram_rows, config.wsram_row_bytes), dtype=np.uint8)
        self.acc = np.zeros((config.acc_rows, config.array_cols), dtype=np.int32)
        self.psram = np.zeros((config.psram_rows, config.array_cols), dtype="<i4")
        self.tsram = np.zeros(TSRAM_BYTES, dtype=np.uint8)     # TABLE's table memory (bytes)
        # Signed views (MATMUL operands) and DMA word views (one bus word per row).
        self.asram_i8 = self.asram.view(np.int8)
        self.wsram_i8 = self.wsram.view(np.int8)
        self.dma_words = {
            Sram.ASRAM: self.asram,
            Sram.WSRAM: self.wsram,
            Sram.PSRAM: self.psram.view(np.uint8).reshape(-1, bus),
        }

    # -- external memory -----------------------------------------------------------------
    def ensure_ext(self, end: int) -> None:
        """Grow the external buffer (zero-filled) to cover bytes ``[0, end)``."""
        if end > self.ext.size:
            size = min(max(end, 2 * self.ext.size), self.config.ext_mem_bytes)
            grown = np.zeros(size, dtype=np.uint8)
            grown[:self.ext.size] = self.ext
            self.ext = grown

    def final_memory(self) -> bytearray:
        """External memory as a bytearray: the initial image, extended to the last write."""
        return bytearray(self.ext[:max(self.initial_bytes, self.written_end)].tobytes())


# -- DMA -------------------------------------------------------------------------------------
def _check_dma(state: NpuState, v: dict) -> tuple[int, int, int, int]:
    """Legality, alignment and range checks shared by DMA_LOAD and DMA_STORE in both modes
    (isa/dma.py); returns (len0, len1, len2, last) where ``last`` is one past the last
    external byte touched (0 if none)."""
    why = dma.illegal(v)
    if why is not None:
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, why)
    unit = dma.elem_bytes(v, state.bus)
    if dma.misaligned(v, state.bus):
        raise Trap(ErrorCode.DMA_MISALIGNED,
                   f"ext_addr={v['ext_addr']:#x} stride0={v['stride0']:#x} stride1={v['stride1']:#x} "
                   f"stride2={v['stride2']:#x} not multiples of {unit}")
    span = dma.ext_span(v, state.bus)
    if span is not None and (span[0] < 0 or span[1] > state.config.ext_mem_bytes):
        raise Trap(ErrorCode.DMA_OUT_OF_RANGE,
                   f"external bytes {span[0]:#x} .. {span[1] - 1:#x} outside memory of "
                   f"{state.config.ext_mem_bytes:#x} bytes")
    return v["len0"], v["len1"], v["len2"], 0 if span is None else span[1]


def _ext_blocks(state: NpuState, v: dict, writeable: bool = False) -> np.ndarray:
    """The DMA's external words as a (len2, len1, len0, BUS) strided view of memory."""
    bus = state.bus
    base = state.ext[v["ext_addr"]:]
    return as_strided(base, shape=(v["len2"], v["len1"], v["len0"], bus),
                      strides=(v["stride2"], v["stride1"], bus, 1), writeable=writeable)


def _sram_or_illegal(v: dict) -> Sram:
    try:
        return Sram(v["sram"])
    except ValueError:
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, f"sram={v['sram']} is not a scratchpad") from None


def _check_rows(name: str, lo: int, count: int, rows: int) -> None:
    if count and (lo < 0 or lo + count > rows):
        raise Trap(ErrorCode.SRAM_OVERFLOW,
                   f"{name} rows {lo}..{lo + count - 1} outside 0..{rows - 1}")


def exec_dma_load(state: NpuState, v: dict) -> Footprint:
    sram = _sram_or_illegal(v)
    len0, len1, len2, last = _check_dma(state, v)
    if v["elem"]:
        return isa_dma.load(state, v, sram, dma.ext_span(v, state.bus), Footprint, _check_rows)
    pb0, pa0, pb1, pa1 = v["pad_b0"], v["pad_a0"], v["pad_b1"], v["pad_a1"]
    lines, per_line = pb1 + len1 + pa1, pb0 + len0 + pa0
    count = len2 * lines * per_line
    words = state.dma_words[sram]
    dst = v["sram_addr"]
    _check_rows(sram.name, dst, count, words.shape[0])
    fp = Footprint(Unit.DMA, writes=[(sram.name, (dst, dst + count))])
    if count == 0:
        return fp
    out = words[dst:dst + count].reshape(len2, lines, per_line, state.bus)
    if last:
        state.ensure_ext(last)
        out[:, pb1:pb1 + len1, pb0:pb0 + len0] = _ext_blocks(state, v)
    if pb1 or pa1 or pb0 or pa0:
        pad = v["pad_value"]
        out[:, :pb1] = pad
        out[:, pb1 + len1:] = pad
        out[:, pb1:pb1 + len1, :pb0] = pad
        out[:, pb1:pb1 + len1, pb0 + len0:] = pad
    if not last:   # some len is 0: every word in the block is padding
        out[...] = v["pad_value"]
    return fp


def exec_dma_store(state: NpuState, v: dict) -> Footprint:
    if v["sram"] != Sram.ASRAM:
        raise Trap(ErrorCode.ILLEGAL_INSTRUCTION, f"DMA_STORE from sram={v['sram']} (only ASRAM)")
    len0, len1, len2, last = _check_dma(state, v)
    if v["elem"]:
        return isa_dma.store(state, v, dma.ext_span(v, state.bus), Footprint, _check_rows)
    count = len0 * len1 * len2
    src = v["sram_addr"]
    _check_rows(ASRAM, src, count, state.asram.shape[0])
    fp = Footprint(Unit.DMA, reads=[(ASRAM, (src, src + count))])
    if count == 0:
        return fp
    bus = state.bus
    state.ensure_ext(last)
    state.written_end = max(state.written_end, last)
    data = state.asram[src:src + count]
    s1, s2 = v["stride1"], v["stride2"]
    disjoint = (len1 == 1 or s1 >= len0 * bus) and (len2 == 1 or s2 >= (len1 - 1) * s1 + len0 * bus)
    if disjoint:
        _ext_blocks(state, v, writeable=True)[...] = data.reshape(len2, len1, len0, bus)
    else:
        # Overlapping destination words: the program-order last write wins.  Numpy does not
        # define the order of repeated-index assignment, so keep only each word's last writer.
        idx = (v["ext_addr"] // bus + np.arange(len2)[:, None, None] * (s2 // bus)
               + np.arange(len1)[None, :, None] * (s1 // bus) + np.arange(len0)[None, None, :]).ravel()
        uniq, first_rev = np.unique(idx[::-1], return_index=True)
        state.ext.reshape(-1, bus)[uniq] = data[count - 1 - first_rev]
    return fp


# -- MXU -------------------------------------------------------------------------------------
def exec_matmul(state: NpuState, v: dict) -> Footprint:
    cfg = state.config
    rows = cfg.array_rows
    p = matmul.rows_per_vector(v["a_type"])             # ASRAM rows per input, ACC rows per result
    tile = matmul.tile_rows(rows, v["w_type"])
    w_addr, acc_addr = v["w_addr"], v["acc_addr"]
    n0, n1 = v["n0"], v["n1"]
    n = n0 * n1
    _check_rows(WSRAM, w_addr, tile, cfg.wsram_rows)
    a_addr, as0, as1 = v["a_addr"], v["a_stride0"], v["a_stride1"]
    if n:
        a_last = a_addr + (n1 - 1) * as1 + (n0 - 1) * as0 + p - 1
        if a_addr < 0 or a_last >= cfg.asram_rows:
            raise Trap(ErrorCode.SRAM_OVERFLOW, f"ASRAM rows {a_addr} .. {a_last} outside 0 .. {cfg.asram_rows - 1}")
    _check_rows(ACC, acc_addr, p * n, cfg.acc_rows)
    a_rows = (a_addr + np.arange(n1, dtype=np.int64)[:, None] * as1
              + np.arange(n0, dtype=np.int64)[None, :] * as0).ravel()
    touched = (a_rows[:, None] + np.arange(p)).ravel()
    acc_rows = (acc_addr, acc_addr + p * n)
    fp = Footprint(Unit.MXU, reads=[(WSRAM, (w_addr, w_addr + tile)), (ASRAM, touched)],
                   writes=[(ACC, acc_rows)])
    if v["accumulate"]:
        fp.reads.append((ACC, acc_rows))
    if n == 0:
        return fp
    w = _matmul_weights(state, w_addr, tile, v["w_type"]) - v["w_zp"]
    # One input vector is p consecutive rows; their bytes are its lanes (int8 or <i2).
    lanes = state.asram[touched].reshape(n, p * state.asram.shape[1])
    a = lanes.view(np.int16 if p == 2 else np.int8).astype(np.int64) - v["a_zp"]
    product = a @ w            # exact: |sum| < ROWS * 2**17 * 2**9 fits int64 easily
    acc = state.acc[acc_addr:acc_addr + p * n]
    if p == 1:
        if v["accumulate"]:
            product += acc
        acc[...] = product.astype(np.int32)                            # wraps modulo 2**32
        return fp
    # int48: low 32 bits in the first row, high 16 in the low half of the second (isa docs).
    pair = acc.reshape(n, 2, -1)
    if v["accumulate"]:
        old = (pair[:, 1].astype(np.int16).astype(np.int64) << 32) | pair[:, 0].view(np.uint32)
        product += old
    y = ((product + (1 << 47)) & ((1 << 48) - 1)) - (1 << 47)           # wraps modulo 2**48
    pair[:, 0] = (y & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    pair[:, 1] = (y >> 32).astype(np.int32)
    return fp


def _matmul_weights(state: NpuState, w_addr: int, tile: int, w_type: int) -> np.ndarray:
    """The ROWS x COLS weight tile (int64) of a MATMUL, before the zero point."""
    if w_type == MatmulWType.INT8:
        return state.wsram_i8[w_addr:w_addr + tile].astype(np.int64)
    packed = state.wsram[w_addr:w_addr + tile].ravel()
    nibbles = np.stack([packed & 15, packed >> 4], axis=1).ravel().astype(np.int64)   # low first
    return ((nibbles ^ 8) - 8).reshape(state.config.array_rows, state.config.array_cols)


# -- VPU -------------------------------------------------------------------------------------
def exec_act(state: NpuState, v: dict) -> Footprint:
    cfg = state.config
    acc_addr, count, dst, param = v["acc_addr"], v["count"], v["dst_addr"], v["param_addr"]
    _check_rows(ACC, acc_addr, count, cfg.acc_rows)
    _check_rows(ASRAM, dst, count, cfg.asram_rows)
    _check_rows(PSRAM, param, 3, cfg.psram_rows)
    wpr = cfg.words_per_wide_row
    fp = Footprint(Unit.VPU, reads=[(ACC, (acc_addr, acc_addr + count)), (PSRAM, (param * wpr, (param + 3) * wpr))],
                   writes=[(ASRAM, (dst, dst + count))])
    if count == 0:
        return fp
    bias, mul, shift = state.psram[param:param + 3].astype(np.int64)
    value = (state.acc[acc_addr:acc_addr + count] + bias).astype(np.int32)     # wrapping
    out = act_output(value, mul, shift, v)
    state.asram[dst:dst + count] = out.astype(np.int8).view(np.uint8)          # int8() wraps
    return fp


# The DMA and MXU instructions; sim/isa/executors.py adds the vector unit's (sim/isa/vpu.py,
# sim/isa/table.py), which build on this module.
EXECUTORS = {
    "DMA_LOAD": exec_dma_load,
    "DMA_STORE": exec_dma_store,
    "MATMUL": exec_matmul,
    "ACT": exec_act,
}

