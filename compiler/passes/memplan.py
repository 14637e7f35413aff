"""External memory planning: an address for every constant, graph input, output and
intermediate tensor.

Layout, from address 0 (every region aligned to ``ALIGN`` bytes):

* constant segments (each layer's weights and parameters, zero-point fill words);
* graph inputs, then graph outputs, each in its own region for the whole run;
* intermediate tensors (a layer's output read only by later layers), first-fit in a pool
  where a region is reused once every reader of its previous tensor has run;
* the instruction stream, placed last by compiler/program_builder.py (so no address
  depends on the final instruction count).

Activation tensors use the ``brick`` layout (isa/layout.py), so a brick is one bus word and
one ASRAM row.  Rank-4 int8 tensors only: graph inputs no layer reads keep ``flat``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from isa.config import NpuConfig
from isa.layout import layout_bytes
from isa.program import Segment
from tosa_ir import Block
from tosa_ir.errors import Unsupported
from tosa_ir.graph import numpy_dtype

from compiler.ir import ConvLayer

ALIGN = 64


def align(value: int, to: int = ALIGN) -> int:
    return -(-value // to) * to


@dataclass
class TensorPlace:
    name: str
    addr: int
    nbytes: int
    layout: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class ExtPlan:
    """Where everything lives in external memory."""

    tensors: dict[str, TensorPlace] = field(default_factory=dict)
    constants: dict[str, int] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    end: int = 0

    def addr(self, tensor: str) -> int:
        return self.tensors[tensor].addr


def plan_memory(block: Block, layers: list[ConvLayer], constants: dict[str, bytes],
                config: NpuConfig) -> ExtPlan:
    """Place ``constants`` (segment name -> bytes) and every activation tensor."""
    lanes = config.bus_bytes
    plan = ExtPlan()
    cursor = 0
    for name, data in constants.items():
        plan.constants[name] = cursor
        plan.segments.append(Segment(name, cursor, bytes(data)))
        cursor = align(cursor + len(data))

    read_by = {layer.input for layer in layers}

    def place(name: str, at: int) -> TensorPlace:
        tensor = block.tensor(name)
        layout = "brick" if len(tensor.shape) == 4 and (tensor.dtype == "int8") else "flat"
        if name in read_by and layout != "brick":
            raise Unsupported(f"tensor {name!r}: the NPU reads rank-4 int8 activations, "
                              f"not {tensor.dtype} {tensor.shape}")
        nbytes = layout_bytes(tensor.shape, numpy_dtype(tensor.dtype), layout, lanes)
        plan.tensors[name] = TensorPlace(name, at, nbytes, layout, tuple(tensor.shape), tensor.dtype)
        return plan.tensors[name]

    for name in list(block.inputs) + [o for o in block.outputs if o not in block.inputs]:
        cursor = align(cursor + place(name, cursor).nbytes)

    # Intermediates: lifetime [producing layer, last reading layer], first-fit reuse.
    pinned = set(block.inputs) | set(block.outputs)
    last_use = {}
    for i, layer in enumerate(layers):
        last_use[layer.input] = i
    live: list[tuple[int, int, int]] = []     # (last use, addr, size)
    pool_end = cursor
    for i, layer in enumerate(layers):
        live = [entry for entry in live if entry[0] >= i]
        name = layer.output
        if name in pinned:
            continue
        size = align(place(name, 0).nbytes)
        addr = _first_fit(live, cursor, size)
        plan.tensors[name].addr = addr
        live.append((last_use.get(name, i), addr, size))
        pool_end = max(pool_end, addr + size)
    plan.end = align(pool_end)
    if plan.end > config.ext_mem_bytes:
        raise Unsupported(f"the program needs {plan.end} bytes of external memory; the NPU "
                          f"configuration has {config.ext_mem_bytes}")
    return plan


def _first_fit(live: list[tuple[int, int, int]], base: int, size: int) -> int:
    addr = base
    for _, start, length in sorted(live, key=lambda e: e[1]):
        if addr + size <= start:
            break
        addr = max(addr, start + length)
    return addr
