"""The hardware configuration: the one object that sizes the NPU.

The hardware generator (hw/), the ISA simulator (sim/) and the compiler (compiler/) all take
an :class:`NpuConfig`; a compiled program records the configuration it was compiled for, and
running it on a differently configured machine is refused.

Memories are measured in *rows*; every scratchpad row is one or more external-bus words:

* ASRAM (activations): rows of ``array_rows`` int8 lanes (one bus word).
* WSRAM (weights): rows of ``array_cols`` int8 lanes; a weight tile is ``array_rows`` rows.
* ACC (accumulators): rows of ``array_cols`` int32 lanes.
* PSRAM (per-channel parameters: bias, multiplier, shift): rows of ``array_cols`` int32 lanes.
* IMEM (instructions): rows of one instruction; a circular buffer of the program, which
  stays in external memory and is fetched while it runs (hw/sequencer.py), so programs of
  any length run.  ``imem_rows`` is a power of two (instruction i lives in row i mod
  imem_rows); a LOOP body must be shorter than ``imem_rows`` (it stays resident).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

KIB = 1024

# Upper bounds of the fields, so that a configuration read from a file (a program image's
# header, ``--config FILE.json``) cannot make a simulator allocate terabytes: far above any
# NPU this generation describes (SRAMs of at most 512 KiB, a 4 GiB external address space).
MAX_ARRAY = 128             # array_rows, array_cols, bus_bytes
MAX_ROWS = 1 << 20          # every on-chip memory's depth
MAX_EXT_ADDR_BITS = 32
MAX_MEM_LATENCY = 4096


@dataclass(frozen=True)
class NpuConfig:
    """Sizes of one NPU instance.  The default is the reference 16x16 design.

    Parameters
    ----------
    array_rows : int
        Rows of the systolic array: the reduction (input-channel) dimension of one tile.
    array_cols : int
        Columns of the systolic array: output channels computed at once; also the number of
        vector-unit lanes.
    bus_bytes : int
        Width of the external memory bus in bytes (one DMA word per cycle).
    asram_rows, wsram_rows, acc_rows, psram_rows, imem_rows : int
        Depth of each on-chip memory in rows (see the module docstring for row widths).
    ext_addr_bits : int
        Width of external byte addresses.
    ext_mem_bytes : int
        Size of the external memory that DMA may touch; an access outside ``[0, ext_mem_bytes)``
        is an error.
    mem_latency : int
        Cycles from a read request on the external bus to its data (the simulation memory model
        is fully pipelined with this fixed latency).
    """

    array_rows: int = 16
    array_cols: int = 16
    bus_bytes: int = 16
    asram_rows: int = 12288   # 192 KiB
    wsram_rows: int = 8192    # 128 KiB
    acc_rows: int = 1024      # 64 KiB
    psram_rows: int = 256     # 16 KiB
    imem_rows: int = 2048     # 64 KiB of 256-bit instructions: the instruction buffer
    ext_addr_bits: int = 32
    ext_mem_bytes: int = 64 * 1024 * KIB
    mem_latency: int = 4

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"NpuConfig.{f.name} must be a positive integer, not {value!r}")
        limits = {"array_rows": MAX_ARRAY, "array_cols": MAX_ARRAY, "bus_bytes": MAX_ARRAY,
                  "ext_addr_bits": MAX_EXT_ADDR_BITS, "mem_latency": MAX_MEM_LATENCY,
                  "ext_mem_bytes": 1 << MAX_EXT_ADDR_BITS}
        for f in fields(self):
            limit = limits.get(f.name, MAX_ROWS)
            if getattr(self, f.name) > limit:
                raise ValueError(f"NpuConfig.{f.name} = {getattr(self, f.name)} exceeds its limit of {limit}")
        if self.array_rows != self.bus_bytes or self.array_cols != self.bus_bytes:
            # One ASRAM/WSRAM row is one bus word: DMA moves rows at full bandwidth.
            raise ValueError("this NPU generation needs array_rows == array_cols == bus_bytes")
        if self.bus_bytes & (self.bus_bytes - 1):
            raise ValueError("bus_bytes must be a power of two")
        if self.ext_mem_bytes > (1 << self.ext_addr_bits):
            raise ValueError("ext_mem_bytes exceeds the external address space")
        if self.ext_mem_bytes % self.bus_bytes:
            raise ValueError("ext_mem_bytes must be a whole number of bus words")
        if self.imem_rows & (self.imem_rows - 1):
            raise ValueError("imem_rows must be a power of two (the instruction buffer is circular)")

    # Row widths in bytes.
    @property
    def asram_row_bytes(self) -> int:
        return self.array_rows

    @property
    def wsram_row_bytes(self) -> int:
        return self.array_cols

    @property
    def acc_row_bytes(self) -> int:
        return 4 * self.array_cols

    @property
    def psram_row_bytes(self) -> int:
        return 4 * self.array_cols

    @property
    def words_per_wide_row(self) -> int:
        """Bus words in one ACC or PSRAM row."""
        return self.acc_row_bytes // self.bus_bytes

    @property
    def macs_per_cycle(self) -> int:
        return self.array_rows * self.array_cols

    @property
    def sram_bytes(self) -> dict[str, int]:
        """On-chip memory sizes in bytes, by memory (instruction memory included).

        ``tsram`` counts the TABLE unit's physical storage: one copy of the table memory per
        vector lane, so every lane looks up in the same cycle (hw/table.py).
        """
        from isa.instructions import INSTR_BYTES, TSRAM_BYTES

        return {
            "asram": self.asram_rows * self.asram_row_bytes,
            "wsram": self.wsram_rows * self.wsram_row_bytes,
            "acc": self.acc_rows * self.acc_row_bytes,
            "psram": self.psram_rows * self.psram_row_bytes,
            "imem": self.imem_rows * INSTR_BYTES,
            "tsram": TSRAM_BYTES * self.array_cols,
        }

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> NpuConfig:
        if not isinstance(data, dict):
            raise ValueError(f"a configuration is a JSON object of NpuConfig fields, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown NpuConfig fields: {sorted(unknown)}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


DEFAULT_CONFIG = NpuConfig()

# A small configuration for fast RTL tests: same architecture, small memories.
SMALL_CONFIG = NpuConfig(
    array_rows=4, array_cols=4, bus_bytes=4,
    asram_rows=1024, wsram_rows=512, acc_rows=256, psram_rows=32, imem_rows=256,
    ext_mem_bytes=256 * KIB,
)

# Configurations for FPGA boards (hw/synth builds them; docs/hardware.md has their reports).
# Lattice ECP5-85F (ULX3S, OrangeCrab 85F): 156 MULT18X18D and 208 DP16KD (3.7 Mbit).  An 8x8
# array (64 DSPs; a 16x16 array's 256 multipliers do not fit, 12x12 breaks the power-of-two bus)
# with memories sized to a third of the block RAM each way.
ECP5_85F_CONFIG = NpuConfig(
    array_rows=8, array_cols=8, bus_bytes=8,
    asram_rows=4096, wsram_rows=4096, acc_rows=512, psram_rows=64, imem_rows=512,
    ext_mem_bytes=32 * 1024 * KIB,
)
# Lattice iCE40 UP5K (iCEBreaker): 8 SB_MAC16, 30 SB_RAM40_4K (120 Kbit), 4 SB_SPRAM256KA
# (1 Mbit, single-ported).  The smallest array the TABLE unit allows (4x4: bus words of two
# int16 pairs); its 16 multipliers are twice the device's DSPs, and the TABLE unit's four
# lane copies alone take 16 block RAMs: a size to measure against, not yet a fit.
UP5K_CONFIG = NpuConfig(
    array_rows=4, array_cols=4, bus_bytes=4,
    asram_rows=1024, wsram_rows=256, acc_rows=128, psram_rows=16, imem_rows=128,
    ext_mem_bytes=128 * KIB,
)


def array_config(size: int) -> NpuConfig:
    """The reference design with a ``size`` x ``size`` array, the bus and memories scaled with it.

    One ASRAM/WSRAM row is one bus word of ``size`` bytes, so the bus is ``size`` bytes wide and
    every memory keeps the default's depth in rows: its bytes grow with the array's width
    (``size / 16`` times the default's).  The weight memory then holds the same number of
    weight tiles (8192 rows / ``size`` rows per tile) and the accumulators the same number of
    output rows, so a layer splits into the same kind of tiles at every size; what changes is
    how much of each layer fills a tile (utilisation) and how fast the bus feeds it.
    """
    if size < 4 or size & (size - 1):
        raise ValueError(f"array size must be a power of two >= 4, not {size}")
    return NpuConfig(array_rows=size, array_cols=size, bus_bytes=size)


# Named configurations (``npu ... --config NAME``): the array sizes the sweep covers and the
# FPGA boards' configurations.  ``default`` is the 16x16 reference design; ``small`` is the 4x4
# test configuration.
NAMED_CONFIGS: dict[str, NpuConfig] = {
    "default": DEFAULT_CONFIG,
    "small": SMALL_CONFIG,
    "array8": array_config(8),
    "array16": DEFAULT_CONFIG,
    "array32": array_config(32),
    "array64": array_config(64),
    "ecp5_85f": ECP5_85F_CONFIG,
    "up5k": UP5K_CONFIG,
}
