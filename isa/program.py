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
                [{"name", "shape", "dtype", "addr", "layout"[, "perm"][, "patches"]}], "info"}
    then       the payload; segment offsets are relative to its start.  The instruction
               stream is the segment named "program" at program_addr.

``memory_image`` builds the initial external memory for given inputs, ``read_outputs`` reads
the outputs back from a final memory: the same code serves every backend.
"""
from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass, field

import numpy as np

from isa.config import NpuConfig
from isa.encoding import EncodingError, Instruction, decode_program, encode_program
from isa.layout import LAYOUTS, layout_bytes, pack, unpack
from isa.patches import Patches

MAGIC = b"NPUPROG\0"
FORMAT_VERSION = 1

# Bounds on what an image may declare (its header is untrusted: SECURITY.md).  isa/ imports
# nothing of ours, so these mirror tosa_ir/limits.py rather than importing it.
MAX_HEADER_BYTES = 16 << 20
MAX_IMAGE_BYTES = 1 << 32
MAX_RANK = 6
MAX_DIM = (1 << 31) - 1
BINDING_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "int64", "bool")


class ProgramFormatError(ValueError):
    """A program file that cannot be read; the message names the problem."""


@dataclass
class TensorBinding:
    """Where a graph input or output lives in external memory.

    ``perm`` (optional) says the memory holds the tensor transposed: ``array.transpose(perm)``
    in ``layout`` (e.g. an NCHW graph input stored as NHWC bricks, perm ``(0, 2, 3, 1)``).
    ``patches`` (optional, inputs only) says the host writes the tensor (after ``perm``) as a
    convolution's input patches (isa/patches.py), stored in ``layout``.
    ``shape`` is always the graph's shape, the one the host passes and gets back.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str          # numpy dtype name: "int8", "int16", "int32", ...
    addr: int
    layout: str         # see isa/layout.py
    perm: tuple[int, ...] | None = None
    patches: Patches | None = None

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """Shape of the array as laid out in memory (``shape`` permuted by ``perm``, then
        written as ``patches``)."""
        shape = tuple(self.shape) if self.perm is None else tuple(self.shape[p] for p in self.perm)
        return shape if self.patches is None else self.patches.shape(shape)

    def nbytes(self, lanes: int) -> int:
        return layout_bytes(self.stored_shape, np.dtype(self.dtype), self.layout, lanes)

    def pack(self, array: np.ndarray, lanes: int) -> bytes:
        """The bytes of ``array`` (of ``shape``) as stored."""
        array = np.asarray(array).astype(self.dtype)
        if self.perm is not None:
            array = array.transpose(self.perm)
        if self.patches is not None:
            array = self.patches.extract(array)
        return pack(array, self.layout, lanes)

    def unpack(self, data: bytes, lanes: int) -> np.ndarray:
        """Inverse of :meth:`pack`: the array of ``shape``."""
        if self.patches is not None:
            raise ValueError(f"tensor {self.name!r} is written as patches: it cannot be read back")
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
        """Read and validate an image (see :func:`validate_header`); ProgramFormatError if bad."""
        def fail(msg):
            raise ProgramFormatError(f"{source}: {msg}")

        if len(data) < 16 or data[:8] != MAGIC:
            fail("not an NPU program image (bad magic)")
        version, jlen = struct.unpack_from("<II", data, 8)
        if version != FORMAT_VERSION:
            fail(f"program format version {version}, this tool reads {FORMAT_VERSION}")
        if jlen > MAX_HEADER_BYTES:
            fail(f"header of {jlen} bytes, more than {MAX_HEADER_BYTES}")
        if 16 + jlen > len(data):
            fail("truncated header")
        try:
            header = json.loads(data[16:16 + jlen])
        except RecursionError:
            fail("malformed header: JSON nested too deeply")
        except ValueError as e:
            fail(f"malformed header: {str(e).splitlines()[0]}")
        try:
            config, segs, inputs, outputs = validate_header(header, len(data) - 16 - jlen)
            payload = data[16 + jlen:]
            segments = [Segment(s["name"], s["addr"], bytes(payload[s["offset"]:s["offset"] + s["size"]]))
                        for s in segs]
            prog_seg = next(s for s in segments if s.name == "program")
            instructions = decode_program(prog_seg.data)
            if len(instructions) != header["instructions"]:
                fail("instruction count does not match the header")
            info = header.get("info", {})
            return cls(
                config=config, instructions=instructions, program_addr=prog_seg.addr,
                segments=[s for s in segments if s.name != "program"],
                inputs=inputs, outputs=outputs, info=info if isinstance(info, dict) else {},
            )
        except ProgramFormatError:
            raise
        except EncodingError as e:
            fail(f"bad instruction stream: {e}")
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as e:
            fail(f"malformed header: {str(e).splitlines()[0] if str(e) else type(e).__name__}")

    def save(self, path) -> None:
        with open(path, "wb") as f:
            f.write(self.to_bytes())

    @classmethod
    def load(cls, path) -> "Program":
        """Read the image at ``path``: a regular file of at most MAX_IMAGE_BYTES."""
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                raise ProgramFormatError(f"{path}: not a regular file")
            if st.st_size > MAX_IMAGE_BYTES:
                raise ProgramFormatError(f"{path}: {st.st_size} bytes, more than an image may have "
                                         f"({MAX_IMAGE_BYTES})")
            with open(path, "rb") as f:
                data = f.read(st.st_size + 1)      # read(n) allocates n bytes up front
        except OSError as e:
            raise ProgramFormatError(f"{path}: cannot read: {e.strerror}") from None
        return cls.from_bytes(data, source=str(path))

    def check_runs_on(self, config: NpuConfig, source: str = "<program>") -> None:
        """ProgramFormatError unless this program was compiled for ``config`` (the running
        machine): a program for another configuration computes garbage there."""
        if self.config != config:
            mine, theirs = self.config.to_dict(), config.to_dict()
            diff = ", ".join(f"{k} {mine[k]} (machine: {theirs[k]})" for k in mine if mine[k] != theirs[k])
            raise ProgramFormatError(f"{source}: compiled for another NPU configuration: {diff}")


def _binding_dict(b: TensorBinding) -> dict:
    d = {"name": b.name, "shape": list(b.shape), "dtype": b.dtype, "addr": b.addr, "layout": b.layout}
    if b.perm is not None:      # written only when used: older images stay byte-identical
        d["perm"] = list(b.perm)
    if b.patches is not None:
        d["patches"] = b.patches.to_dict()
    return d


def _int(value, what: str, low: int = 0, high: int | None = None) -> int:
    """A JSON integer within [low, high]; ValueError naming ``what`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{what} = {value} is outside [{low}, {high}]")
    return value


def _binding(d: dict, config: NpuConfig | None = None) -> TensorBinding:
    """A binding from the header, every field checked: type, range, and (given ``config``)
    that the tensor lies inside external memory."""
    if not isinstance(d, dict):
        raise ValueError("a tensor binding must be a JSON object")
    name = d["name"]
    if not isinstance(name, str):
        raise ValueError("tensor name must be a string")
    shape = d["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_RANK:
        raise ValueError(f"tensor {name!r}: shape must be a list of at most {MAX_RANK} dimensions")
    shape = tuple(_int(x, f"tensor {name!r} dimension", 0, MAX_DIM) for x in shape)
    if d["dtype"] not in BINDING_DTYPES:
        raise ValueError(f"tensor {name!r}: dtype {d['dtype']!r} is not one of {', '.join(BINDING_DTYPES)}")
    if d["layout"] not in LAYOUTS:
        raise ValueError(f"tensor {name!r}: layout {d['layout']!r} is not one of {', '.join(LAYOUTS)}")
    if d["layout"] == "brick" and len(shape) != 4:
        raise ValueError(f"tensor {name!r}: brick layout needs a rank-4 shape, not {list(shape)}")
    addr = _int(d["addr"], f"tensor {name!r} addr", 0, config.ext_mem_bytes if config else None)
    perm = d.get("perm")
    if perm is not None:
        if not isinstance(perm, list):
            raise ValueError(f"tensor {name!r}: perm must be a list")
        perm = tuple(_int(p, f"tensor {name!r} perm", 0, MAX_RANK) for p in perm)
        if sorted(perm) != list(range(len(shape))):
            raise ValueError(f"tensor {name!r}: perm {list(perm)} is not a permutation of its axes")
    patches = d.get("patches")
    if patches is not None:
        patches = Patches.from_dict(patches)
        if len(shape) != 4:
            raise ValueError(f"tensor {name!r}: patches need a rank-4 shape, not {list(shape)}")
        if d["dtype"] != "bool":
            info = np.iinfo(np.dtype(d["dtype"]))
            if not info.min <= patches.fill <= info.max:
                raise ValueError(f"tensor {name!r}: patches fill {patches.fill} does not fit {d['dtype']}")
    b = TensorBinding(name, shape, d["dtype"], addr, d["layout"], perm, patches)
    if config is not None:
        count = 1
        for x in b.stored_shape:
            count *= x
        if count * np.dtype(b.dtype).itemsize > config.ext_mem_bytes:
            raise ValueError(f"tensor {name!r} of shape {list(shape)} is larger than external memory")
        end = addr + b.nbytes(config.bus_bytes)
        if end > config.ext_mem_bytes:
            raise ValueError(f"tensor {name!r} at {addr:#x} reaches {end:#x}, past the end of external "
                             f"memory ({config.ext_mem_bytes:#x})")
    return b


def validate_header(header, payload_bytes: int):
    """Check a decoded image header against itself and the configuration it names.

    Returns ``(config, segments, inputs, outputs)``: segments as dicts with integer fields
    known to lie inside the payload and inside external memory, exactly one named "program".
    Raises ValueError/KeyError/TypeError naming the field at fault.
    """
    if not isinstance(header, dict):
        raise ValueError("the header must be a JSON object")
    config = NpuConfig.from_dict(header["config"])
    _int(header["instructions"], "instructions", 0, config.imem_rows)
    _int(header.get("program_addr", 0), "program_addr", 0, config.ext_mem_bytes)
    if not isinstance(header["segments"], list):
        raise ValueError("segments must be a list")
    segments, names = [], set()
    for s in header["segments"]:
        if not isinstance(s, dict) or not isinstance(s.get("name"), str):
            raise ValueError("a segment must be a JSON object with a string name")
        name = s["name"]
        if name in names:
            raise ValueError(f"segment {name!r} appears twice")
        names.add(name)
        offset = _int(s["offset"], f"segment {name!r} offset", 0, payload_bytes)
        size = _int(s["size"], f"segment {name!r} size", 0, payload_bytes)
        addr = _int(s["addr"], f"segment {name!r} addr", 0, config.ext_mem_bytes)
        if offset + size > payload_bytes:
            raise ValueError(f"segment {name!r} is truncated (offset {offset} + size {size} > "
                             f"{payload_bytes} payload bytes)")
        if addr + size > config.ext_mem_bytes:
            raise ValueError(f"segment {name!r} at {addr:#x} + {size} bytes is past the end of external "
                             f"memory ({config.ext_mem_bytes:#x})")
        segments.append({"name": name, "addr": addr, "offset": offset, "size": size})
    if "program" not in names:
        raise ValueError("no program segment")
    for key in ("inputs", "outputs"):
        if not isinstance(header[key], list):
            raise ValueError(f"{key} must be a list")
    inputs = [_binding(b, config) for b in header["inputs"]]
    outputs = [_binding(b, config) for b in header["outputs"]]
    for b in outputs:
        if b.patches is not None:
            raise ValueError(f"output {b.name!r} has patches: only inputs are written as patches")
    seen = [b.name for b in inputs]
    if len(set(seen)) != len(seen) or len({b.name for b in outputs}) != len(outputs):
        raise ValueError("two tensor bindings share a name")
    return config, segments, inputs, outputs


def is_program_file(data: bytes) -> bool:
    return data[:8] == MAGIC
