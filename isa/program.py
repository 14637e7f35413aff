"""The program image: what the compiler writes and every backend (ISA simulator, RTL, the
firmware driver) runs.

A program holds the configuration it was compiled for, the instruction stream, constant
segments (weights, parameters) with their external addresses, and where each graph input and
output lives in external memory.  File format (``.npuprog``), all integers little-endian::

    offset 0   magic  b"NPUPROG\\0"
    offset 8   u32    format version (FORMAT_VERSION)
    offset 12  u32    length J of the JSON header
    offset 16  J bytes of UTF-8 JSON: {"config", "program_addr", "instructions",
                "segments": [{"name", "addr", "offset", "size"}], "inputs"/"outputs":
                [{"name", "shape", "dtype", "addr", "layout"[, "perm"]}], "info"}
    then       the payload; segment offsets are relative to its start.  The instruction
               stream is the segment named "program" at program_addr.

``memory_image`` builds the initial external memory for given inputs, ``read_outputs`` reads
the outputs back from a final memory: the same code serves every backend.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import numpy as np

from isa.config import NpuConfig
from isa.encoding import EncodingError, Instruction, decode_program, encode_program
from isa.layout import layout_bytes, pack, unpack

MAGIC = b"NPUPROG\0"
FORMAT_VERSION = 1


class ProgramFormatError(ValueError):
    """A program file that cannot be read; the message names the problem."""


@dataclass
class TensorBinding:
    """Where a graph input or output lives in external memory.

    ``perm`` (optional) says the memory holds the tensor transposed: ``array.transpose(perm)``
    in ``layout`` (e.g. an NCHW graph input stored as NHWC bricks, perm ``(0, 2, 3, 1)``).
    ``shape`` is always the graph's shape, the one the host passes and gets back.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str          # numpy dtype name: "int8", "int16", "int32", ...
    addr: int
    layout: str         # see isa/layout.py
    perm: tuple[int, ...] | None = None

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """Shape of the array as laid out in memory (``shape`` permuted by ``perm``)."""
        if self.perm is None:
            return tuple(self.shape)
        return tuple(self.shape[p] for p in self.perm)

    def nbytes(self, lanes: int) -> int:
        return layout_bytes(self.stored_shape, np.dtype(self.dtype), self.layout, lanes)

    def pack(self, array: np.ndarray, lanes: int) -> bytes:
        """The bytes of ``array`` (of ``shape``) as stored."""
        array = np.asarray(array).astype(self.dtype)
        if self.perm is not None:
            array = array.transpose(self.perm)
        return pack(array, self.layout, lanes)

    def unpack(self, data: bytes, lanes: int) -> np.ndarray:
        """Inverse of :meth:`pack`: the array of ``shape``."""
        array = unpack(data, self.stored_shape, np.dtype(self.dtype), self.layout, lanes)
        if self.perm is not None:
            array = np.ascontiguousarray(array.transpose(np.argsort(self.perm)))
        return array


@dataclass
class Segment:
    name: str
    addr: int
    data: bytes


@dataclass
class Program:
    config: NpuConfig
    instructions: list[Instruction]
    program_addr: int = 0
    segments: list[Segment] = field(default_factory=list)
    inputs: list[TensorBinding] = field(default_factory=list)
    outputs: list[TensorBinding] = field(default_factory=list)
    info: dict = field(default_factory=dict)   # free-form: source model, compiler version, ...

    # -- memory images ---------------------------------------------------------------
    def all_segments(self) -> list[Segment]:
        return [Segment("program", self.program_addr, encode_program(self.instructions))] + self.segments

    def memory_extent(self) -> int:
        """Bytes of external memory the program touches (segments and I/O), word-rounded."""
        lanes = self.config.bus_bytes
        ends = [s.addr + len(s.data) for s in self.all_segments()]
        ends += [b.addr + b.nbytes(lanes) for b in self.inputs + self.outputs]
        end = max(ends, default=0)
        return -(-end // lanes) * lanes

    def memory_image(self, inputs: dict[str, np.ndarray]) -> bytearray:
        """Initial external memory (``memory_extent()`` bytes) with ``inputs`` placed."""
        mem = bytearray(self.memory_extent())
        for seg in self.all_segments():
            mem[seg.addr:seg.addr + len(seg.data)] = seg.data
        for b in self.inputs:
            if b.name not in inputs:
                raise KeyError(f"missing input {b.name!r}")
            array = np.asarray(inputs[b.name])
            if tuple(array.shape) != tuple(b.shape):
                raise ValueError(f"input {b.name!r} has shape {array.shape}, program expects {b.shape}")
            data = b.pack(array, self.config.bus_bytes)
            mem[b.addr:b.addr + len(data)] = data
        return mem

    def read_outputs(self, mem: bytes) -> dict[str, np.ndarray]:
        lanes = self.config.bus_bytes
        return {b.name: b.unpack(bytes(mem[b.addr:b.addr + b.nbytes(lanes)]), lanes) for b in self.outputs}

    # -- serialisation -----------------------------------------------------------------
    def to_bytes(self) -> bytes:
        payload, segs = bytearray(), []
        for seg in self.all_segments():
            payload += bytes(-len(payload) % 16)
            segs.append({"name": seg.name, "addr": seg.addr, "offset": len(payload), "size": len(seg.data)})
            payload += seg.data
        header = {
            "config": self.config.to_dict(),
            "program_addr": self.program_addr,
            "instructions": len(self.instructions),
            "segments": segs,
            "inputs": [_binding_dict(b) for b in self.inputs],
            "outputs": [_binding_dict(b) for b in self.outputs],
            "info": self.info,
        }
        text = json.dumps(header, sort_keys=True).encode()
        return MAGIC + struct.pack("<II", FORMAT_VERSION, len(text)) + text + bytes(payload)

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<program>") -> "Program":
        def fail(msg):
            raise ProgramFormatError(f"{source}: {msg}")

        if len(data) < 16 or data[:8] != MAGIC:
            fail("not an NPU program image (bad magic)")
        version, jlen = struct.unpack_from("<II", data, 8)
        if version != FORMAT_VERSION:
            fail(f"program format version {version}, this tool reads {FORMAT_VERSION}")
        if 16 + jlen > len(data):
            fail("truncated header")
        try:
            header = json.loads(data[16:16 + jlen])
            config = NpuConfig.from_dict(header["config"])
            payload = data[16 + jlen:]
            segments = []
            for s in header["segments"]:
                if s["offset"] + s["size"] > len(payload):
                    fail(f"segment {s['name']!r} is truncated")
                segments.append(Segment(s["name"], int(s["addr"]), bytes(payload[s["offset"]:s["offset"] + s["size"]])))
            prog_seg = next((s for s in segments if s.name == "program"), None)
            if prog_seg is None:
                fail("no program segment")
            instructions = decode_program(prog_seg.data)
            if len(instructions) != header["instructions"]:
                fail("instruction count does not match the header")
            return cls(
                config=config, instructions=instructions, program_addr=prog_seg.addr,
                segments=[s for s in segments if s.name != "program"],
                inputs=[_binding(b) for b in header["inputs"]],
                outputs=[_binding(b) for b in header["outputs"]],
                info=header.get("info", {}),
            )
        except ProgramFormatError:
            raise
        except EncodingError as e:
            fail(f"bad instruction stream: {e}")
        except (KeyError, TypeError, ValueError) as e:
            fail(f"malformed header: {e}")

    def save(self, path) -> None:
        with open(path, "wb") as f:
            f.write(self.to_bytes())

    @classmethod
    def load(cls, path) -> "Program":
        with open(path, "rb") as f:
            return cls.from_bytes(f.read(), source=str(path))


def _binding_dict(b: TensorBinding) -> dict:
    d = {"name": b.name, "shape": list(b.shape), "dtype": b.dtype, "addr": b.addr, "layout": b.layout}
    if b.perm is not None:      # written only when used: older images stay byte-identical
        d["perm"] = list(b.perm)
    return d


def _binding(d: dict) -> TensorBinding:
    perm = d.get("perm")
    if perm is not None:
        perm = tuple(int(p) for p in perm)
        if sorted(perm) != list(range(len(d["shape"]))):
            raise ValueError(f"tensor {d['name']!r}: perm {list(perm)} is not a permutation of its axes")
    return TensorBinding(d["name"], tuple(d["shape"]), d["dtype"], int(d["addr"]), d["layout"], perm)


def is_program_file(data: bytes) -> bool:
    return data[:8] == MAGIC
