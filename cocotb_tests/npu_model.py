"""Test-only numpy model of the ISA (isa/instructions.py docs), executed sequentially.

Written from the instruction docs independently of the RTL and of sim/isa/sim.py, so the
RTL tests compare two implementations.  Only the non-failing behaviour is modelled; the
error tests state their expected error codes directly.  ACT's scaling uses TOSA's
apply_scale_32/16 from sim/tosa_helpers.py wherever the spec defines the result, and the
doc's formula elsewhere (checked equal to the spec helpers where both apply).
"""
from __future__ import annotations

import numpy as np

from isa.config import NpuConfig
from isa.instructions import Sram
from sim import tosa_helpers


class Model:
    """External memory and scratchpads of one NPU (all zero at reset)."""

    def __init__(self, config: NpuConfig, memory: bytes):
        self.cfg = config
        self.bus = config.bus_bytes
        self.ext = np.frombuffer(bytes(memory) + bytes(-len(memory) % self.bus), dtype=np.uint8).copy()
        self.nbytes = len(memory)
        c = config
        self.srams = {
            "asram": np.zeros((c.asram_rows, c.asram_row_bytes), np.uint8),
            "wsram": np.zeros((c.wsram_rows, c.wsram_row_bytes), np.uint8),
            "acc": np.zeros((c.acc_rows, c.acc_row_bytes), np.uint8),
            "psram": np.zeros((c.psram_rows, c.psram_row_bytes), np.uint8),
        }

    @property
    def memory(self) -> bytes:
        return self.ext[:self.nbytes].tobytes()

    def words(self, sram: int) -> np.ndarray:
        """A scratchpad as bus words (PSRAM: several words per row)."""
        name = Sram(sram).name.lower()
        return self.srams[name].reshape(-1, self.bus)

    def run(self, instructions) -> "Model":
        for instr in instructions:
            if instr.name == "HALT":
                break
            getattr(self, instr.name.lower(), lambda v: None)(instr.values)
        return self

    # -- instructions ----------------------------------------------------------------------
    # DMA: the doc's pseudocode, byte by byte (word mode is E = BUS, stride0 = BUS).
    def _dma_unit(self, v: dict) -> tuple[int, int]:
        return (v["elem"], v["stride0"]) if v["elem"] else (self.bus, self.bus)

    def _ext_bytes(self, addr: int, n: int) -> bytes:
        """External bytes (memory past the image reads as zero)."""
        data = self.ext[addr:addr + n].tobytes()
        return data + bytes(n - len(data))

    def dma_load(self, v: dict) -> None:
        bus = self.bus
        e, s0 = self._dma_unit(v)
        per_line = (v["pad_b0"] + v["len0"] + v["pad_a0"]) * e
        k = -(-per_line // bus)
        out = []
        for p in range(v["len2"]):
            plane = bytearray()
            for line_no in range(-v["pad_b1"], v["len1"] + v["pad_a1"]):
                # Packed lines: the line's bytes exactly; otherwise K whole words.
                line = bytearray([v["pad_value"]] * (per_line if v.get("pack") else k * bus))
                if 0 <= line_no < v["len1"]:
                    for w in range(v["len0"]):
                        a = v["ext_addr"] + p * v["stride2"] + line_no * v["stride1"] + w * s0
                        line[(v["pad_b0"] + w) * e:(v["pad_b0"] + w + 1) * e] = self._ext_bytes(a, e)
                plane += line
            plane += bytes([v["pad_value"]]) * (-len(plane) % bus)
            out += [plane[j:j + bus] for j in range(0, len(plane), bus)]
        if out:
            words = np.frombuffer(b"".join(out), np.uint8).reshape(-1, bus)
            self.words(v["sram"])[v["sram_addr"]:v["sram_addr"] + len(out)] = words

    def dma_store(self, v: dict) -> None:
        bus = self.bus
        e, s0 = self._dma_unit(v)
        k = -(-v["len0"] * e // bus)
        src = v["sram_addr"]
        words = self.words(Sram.ASRAM)
        for p in range(v["len2"]):
            for line_no in range(v["len1"]):
                line = words[src:src + k].tobytes()
                src += k
                for w in range(v["len0"]):
                    a = v["ext_addr"] + p * v["stride2"] + line_no * v["stride1"] + w * s0
                    if a + e > self.ext.size:
                        self.ext = np.concatenate([self.ext, np.zeros(a + e - self.ext.size, np.uint8)])
                    self.ext[a:a + e] = np.frombuffer(line[w * e:(w + 1) * e], np.uint8)

    def matmul(self, v: dict) -> None:
        rows, cols = self.cfg.array_rows, self.cfg.array_cols
        n0, n1 = v["n0"], v["n1"]
        if n0 * n1 == 0:
            return
        wide = v["a_type"] == 1                           # INT16 inputs, INT48 accumulators
        p = 2 if wide else 1
        wsram = self.srams["wsram"]
        if v["w_type"] == 1:                              # INT4: nibble k*COLS + n, low nibble first
            packed = wsram[v["w_addr"]:v["w_addr"] + rows // 2].reshape(-1)
            nib = np.empty(rows * cols, np.int64)
            nib[0::2], nib[1::2] = packed & 0xF, packed >> 4
            w = (np.where(nib > 7, nib - 16, nib)).reshape(rows, cols) - v["w_zp"]
        else:
            w = wsram[v["w_addr"]:v["w_addr"] + rows].view(np.int8).astype(np.int64) - v["w_zp"]
        idx = (v["a_addr"] + np.arange(n1)[:, None] * v["a_stride1"] + np.arange(n0)[None, :] * v["a_stride0"]).ravel()
        vec = np.concatenate([self.srams["asram"][idx + j] for j in range(p)], axis=1)
        a = vec.view("<i2" if wide else np.int8).astype(np.int64) - v["a_zp"]
        acc = self.srams["acc"].view("<i4")
        total = a @ w
        r = np.arange(n0 * n1) * p + v["acc_addr"]
        if not wide:
            if v["accumulate"]:
                total = total + acc[r]
            acc[r] = total.astype(np.int64).astype(np.int32)      # int32 wrapping
            return
        if v["accumulate"]:
            total = total + acc[r].astype(np.int64) % (1 << 32) + (acc[r + 1].astype(np.int64) % (1 << 16) << 32)
        total %= 1 << 48                                          # int48 wrapping
        acc[r] = (total % (1 << 32)).astype(np.uint32).view(np.int32)
        high = total >> 32
        acc[r + 1] = np.where(high >= 1 << 15, high - (1 << 16), high).astype(np.int32)

    def act(self, v: dict) -> None:
        count = v["count"]
        if count == 0:
            return
        p = self.srams["psram"].view("<i4")[v["param_addr"]:v["param_addr"] + 3].astype(np.int64)
        bias, mul, shift = p
        acc = self.srams["acc"].view("<i4")[v["acc_addr"]:v["acc_addr"] + count].astype(np.int64)
        value = (acc + bias).astype(np.int32).astype(np.int64)                # wrapping int32
        scale32 = bool(v["scale32"])
        m = mul.astype(np.int32) if scale32 else mul.astype(np.int16)
        s = rescale(value, np.broadcast_to(m.astype(np.int64), value.shape),
                    np.broadcast_to(shift & 63, value.shape), scale32, bool(v["double_round"]))
        y = np.minimum(np.maximum(s + v["out_zp"], v["clamp_min"]), v["clamp_max"])
        self.srams["asram"][v["dst_addr"]:v["dst_addr"] + count] = y.astype(np.int8).view(np.uint8)


def rescale(v, m, sh, scale32: bool, double_round: bool) -> np.ndarray:
    """``s`` of the ACT doc (int64 arrays in, int64 values of int32 range out)."""
    double_round = double_round and scale32
    rnd = np.where(sh > 0, np.left_shift(np.int64(1), np.maximum(sh, 1) - 1), 0)
    if double_round:
        rnd = rnd + np.where(sh > 31, np.where(v >= 0, 1 << 30, -(1 << 30)), 0)
    with np.errstate(over="ignore"):
        s = np.right_shift(v * m + rnd, sh).astype(np.int32).astype(np.int64)
    # Where TOSA defines the result, it must be the spec's apply_scale.
    spec = (m >= 0) & (sh >= 2) & (sh <= 62)
    half = np.left_shift(np.int64(1), np.clip(sh, 2, 62) - 1)
    if scale32:
        spec &= (v >= -half) & (v < half)
        if spec.any():
            ref = tosa_helpers.apply_scale_32(v[spec], m[spec], sh[spec], double_round)
            assert np.array_equal(ref, s[spec]), "ACT doc formula disagrees with apply_scale_32"
    else:
        with np.errstate(over="ignore"):
            exact = (v * m + half) >> np.clip(sh, 2, 62)
        spec &= (exact >= -(1 << 31)) & (exact < (1 << 31))
        if spec.any():
            ref = tosa_helpers.apply_scale_16(v[spec], m[spec], sh[spec])
            assert np.array_equal(ref, s[spec]), "ACT doc formula disagrees with apply_scale_16"
    return s
