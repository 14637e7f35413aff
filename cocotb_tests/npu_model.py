"""Test-only numpy model of the ISA (isa/instructions.py docs), executed sequentially.

Written from the instruction docs independently of the RTL and of sim/isa_sim.py, so the
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
    def _ext_word(self, addr: int) -> np.ndarray:
        return self.ext[addr:addr + self.bus]

    def dma_load(self, v: dict) -> None:
        bus = self.bus
        pad = np.full(bus, v["pad_value"], np.uint8)
        out = []
        for p in range(v["len2"]):
            for line in range(-v["pad_b1"], v["len1"] + v["pad_a1"]):
                for w in range(-v["pad_b0"], v["len0"] + v["pad_a0"]):
                    if 0 <= line < v["len1"] and 0 <= w < v["len0"]:
                        out.append(self._ext_word(v["ext_addr"] + p * v["stride2"] + line * v["stride1"] + w * bus))
                    else:
                        out.append(pad)
        if out:
            self.words(v["sram"])[v["sram_addr"]:v["sram_addr"] + len(out)] = np.array(out)

    def dma_store(self, v: dict) -> None:
        bus = self.bus
        src = v["sram_addr"]
        words = self.words(Sram.ASRAM)
        for p in range(v["len2"]):
            for line in range(v["len1"]):
                for w in range(v["len0"]):
                    addr = v["ext_addr"] + p * v["stride2"] + line * v["stride1"] + w * bus
                    self.ext[addr:addr + bus] = words[src]
                    src += 1

    def matmul(self, v: dict) -> None:
        rows = self.cfg.array_rows
        n0, n1 = v["n0"], v["n1"]
        if n0 * n1 == 0:
            return
        w = self.srams["wsram"][v["w_addr"]:v["w_addr"] + rows].view(np.int8).astype(np.int64) - v["w_zp"]
        idx = (v["a_addr"] + np.arange(n1)[:, None] * v["a_stride1"] + np.arange(n0)[None, :] * v["a_stride0"]).ravel()
        a = self.srams["asram"][idx].view(np.int8).astype(np.int64) - v["a_zp"]
        acc = self.srams["acc"].view("<i4")
        r = slice(v["acc_addr"], v["acc_addr"] + n0 * n1)
        total = a @ w
        if v["accumulate"]:
            total = total + acc[r]
        acc[r] = total.astype(np.int64).astype(np.int32)      # int32 wrapping

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
