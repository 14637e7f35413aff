"""The TOSA graph IR shared by the frontends, the reference interpreter and the compiler.

One IR carries both forms of TOSA graph:

* TOSA 1.0 (what the official tools serialise): zero points, RESCALE multiplier/shift and
  TABLE tables are *input tensors* (usually constants); RESCALE has ``rounding_mode``.
* The seed draft spec (../shared/seeds/tosa-spec.txt): zero points and RESCALE parameters
  are *attributes*; FULLY_CONNECTED exists.

Operators are kept as the file or frontend wrote them (no canonicalisation here), so a graph
round-trips through the .tosa serialiser.  ``Graph.version`` records which form it is.

Structure follows the TOSA 1.0 flatbuffer: a graph holds regions, a region holds blocks,
and control-flow operators name the regions of their sub-graphs in their attributes.  The
first block of the first region (``Graph.main``) is the entry point.

This module imports nothing from the project: it is data, not behaviour.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tosa_ir.errors import InvalidInput
from tosa_ir.limits import MAX_TENSOR_ELEMENTS

# TOSA element types, by their spec names.  "int4" and "int48" are held in int8 and
# int64 numpy arrays; "bool" in numpy bool.  Unsigned 8/16-bit types appear only at
# RESCALE boundaries (TOSA 1.0 marks them with input_unsigned/output_unsigned, the draft
# with uint8/uint16 types), so they are listed too.
DTYPES = {
    "bool": np.bool_,
    "int4": np.int8,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "int48": np.int64,
    "int64": np.int64,
    "shape": np.int64,
    "fp16": np.float16,
    "bf16": np.float32,
    "fp32": np.float32,
    "fp8e4m3": np.float32,
    "fp8e5m2": np.float32,
}

# Value range of each integer type, inclusive.
INT_RANGES = {
    "bool": (0, 1),
    "int4": (-8, 7),
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int48": (-(1 << 47), (1 << 47) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that holds values of TOSA element type ``dtype``."""
    try:
        return np.dtype(DTYPES[dtype])
    except KeyError:
        raise ValueError(f"unknown TOSA element type {dtype!r}") from None


@dataclass
class Tensor:
    """A named tensor: shape, element type, and data if it is a constant.

    ``shape`` may contain -1 for dimensions unknown until run time (shape inference fills
    them).  ``data``, when present, is a numpy array of ``numpy_dtype(dtype)`` and of
    exactly ``shape``.  ``variable`` marks TOSA variable tensors (VARIABLE op / 1.0
    ``variable`` flag); ``variable_name`` is the .tosa file's name for the variable.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None = None
    variable: bool = False
    variable_name: str = ""

    def __post_init__(self):
        self.shape = tuple(int(d) for d in self.shape)
        numpy_dtype(self.dtype)  # validates the type name
        count = 1
        for d in self.shape:
            count *= max(d, 1)
        if count > MAX_TENSOR_ELEMENTS:
            # Refused where every frontend builds its tensors, before anything is allocated.
            raise InvalidInput(f"tensor {self.name!r}: shape {list(self.shape)} has {count} elements, "
                               f"more than the {MAX_TENSOR_ELEMENTS} of TOSA level 8K")

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Operator:
    """One TOSA operator: spec name (``"CONV2D"``), tensor names in and out, attributes.

    Attribute names are the spec's argument names in snake case (``pad``, ``stride``,
    ``dilation``, ``acc_type``, ``input_zp``, ``scale32``, ``rounding_mode``, ...).
    Values are Python ints, bools, strings, lists of ints, or numpy arrays.
    ``location`` says where the operator came from (file and position) for error messages.
    """

    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    location: str = ""

    def describe(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.op}({', '.join(self.inputs)}) -> {', '.join(self.outputs)}{where}"


@dataclass
class Block:
    """A basic block: its tensors, operators in execution order, inputs and outputs."""

    name: str
    tensors: dict[str, Tensor] = field(default_factory=dict)
    operators: list[Operator] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def add_tensor(self, tensor: Tensor) -> Tensor:
        self.tensors[tensor.name] = tensor
        return tensor

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"block {self.name!r} has no tensor {name!r}") from None

    def producers(self) -> dict[str, Operator]:
        """Map from tensor name to the operator that writes it."""
        return {out: op for op in self.operators for out in op.outputs}

    def consumers(self) -> dict[str, list[Operator]]:
        """Map from tensor name to the operators that read it, in order."""
        users: dict[str, list[Operator]] = {}
        for op in self.operators:
            for name in op.inputs:
                users.setdefault(name, []).append(op)
        return users


@dataclass
class Region:
    """A region: a named list of blocks (TOSA 1.0).  Control flow names regions."""

    name: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Graph:
    """A whole TOSA graph.

    ``version`` is ``(major, minor, patch, draft)`` of the TOSA specification the graph
    follows: ``(1, 0, 0, False)`` for TOSA 1.0 graphs, ``(0, 80, 0, True)`` style values for
    the draft form.  ``profiles``/``extensions`` list what the graph declares it needs
    (e.g. ``["PRO-INT"]``, ``["EXT-INT16"]``).
    """

    regions: list[Region] = field(default_factory=list)
    version: tuple[int, int, int, bool] = (1, 0, 0, False)
    profiles: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    source: str = ""  # file the graph was read from, for messages

    @property
    def main(self) -> Block:
        if not self.regions or not self.regions[0].blocks:
            raise ValueError("graph has no main block")
        return self.regions[0].blocks[0]

    @property
    def is_tosa_1(self) -> bool:
        return self.version[0] >= 1

    def region(self, name: str) -> Region:
        for region in self.regions:
            if region.name == name:
                return region
        raise KeyError(f"graph has no region {name!r}")

    def block(self, name: str) -> Block:
        """The block named ``name``, or the first block of the region named ``name``.

        TOSA 1.0 control-flow attributes name regions; the draft names blocks.  Both resolve.
        """
        for region in self.regions:
            for block in region.blocks:
                if block.name == name:
                    return block
        for region in self.regions:
            if region.name == name and region.blocks:
                return region.blocks[0]
        raise KeyError(f"graph has no block or region {name!r}")

    def check_structure(self) -> None:
        """InvalidInput unless every block writes each tensor once (block inputs and operator
        outputs are distinct: a second writer would make the result depend on which one a
        consumer reads) and control flow does not recurse (:meth:`check_calls`)."""
        for region in self.regions:
            for block in region.blocks:
                written = set(block.inputs)
                if len(written) != len(block.inputs):
                    raise InvalidInput(f"block {block.name!r}: an input is listed twice")
                for op in block.operators:
                    for name in op.outputs:
                        if name in written:
                            where = f" at {op.location}" if op.location else ""
                            raise InvalidInput(f"{op.op}{where}: writes tensor {name!r}, which is "
                                               f"already written in block {block.name!r}")
                        written.add(name)
        self.check_calls()

    def check_calls(self) -> None:
        """InvalidInput if control flow recurses: a COND_IF or WHILE_LOOP that names the main
        block (or any block it is itself inside).  The spec's graphs call downward only; a
        cycle would make the interpreter recurse without end and the compiler inline forever.
        Iterative: a hostile graph's call chain may be deeper than Python's stack."""
        main = self.main
        names = ("then_graph", "else_graph", "cond_graph", "body_graph")
        # Depth-first walk with an explicit stack of (block, callers on the path).
        stack = [(main, (id(main),))]
        seen: set[tuple] = set()
        while stack:
            block, path = stack.pop()
            for op in block.operators:
                for attr in names:
                    target = op.attrs.get(attr)
                    if not isinstance(target, str):
                        continue
                    try:
                        callee = self.block(target)
                    except KeyError:
                        continue        # reported by the operator's own checks
                    if id(callee) in path:
                        where = f" at {op.location}" if op.location else ""
                        raise InvalidInput(f"{op.op}{where}: {attr} {target!r} calls block "
                                           f"{callee.name!r}, which is running already (recursive "
                                           f"control flow is an illegal graph)")
                    key = (id(callee), path)
                    if key not in seen and len(path) < 256:
                        seen.add(key)
                        stack.append((callee, path + (id(callee),)))

    @classmethod
    def single_block(cls, block: Block, **kwargs) -> "Graph":
        return cls(regions=[Region("main", [block])], **kwargs)
