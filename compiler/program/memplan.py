"""External memory planning: an address for every constant and every root buffer of the
dataflow (compiler/dataflow.py), and so for every tensor view and I/O binding.

Layout, from address 0 (every region aligned to ``ALIGN`` bytes):

* constant segments (each layer's weights and parameters, pad fill words, constant
  activations as bricks), one copy of each distinct content (equal weights of several layers,
  e.g. a RESIZE cut into strips, are stored once), except the values of variables, which
  layers write;
* graph inputs, then the buffers graph outputs are bound to, each for the whole run;
* intermediate buffers, first-fit in a pool where a region is reused once every layer
  touching its previous buffer has run (the scheduler orders the reuse by footprints);
* the instruction stream, placed last by compiler/program/builder.py (so no address
  depends on the final instruction count).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from isa.config import NpuConfig
from isa.layout import layout_bytes, pack
from isa.program import Segment, TensorBinding
from tosa_ir.errors import Unsupported
from tosa_ir.graph import numpy_dtype

from compiler.core.dataflow import Binding, Dataflow, Root
from compiler.core.views import BrickView

ALIGN = 64


def align(value: int, to: int = ALIGN) -> int:
    return -(-value // to) * to


@dataclass
class ExtPlan:
    """Where everything lives in external memory."""

    roots: dict[str, int] = field(default_factory=dict)           # root -> address
    views: dict[str, BrickView] = field(default_factory=dict)     # tensor -> absolute view
    constants: dict[str, int] = field(default_factory=dict)       # segment -> address
    segments: list[Segment] = field(default_factory=list)
    inputs: list[TensorBinding] = field(default_factory=list)
    outputs: list[TensorBinding] = field(default_factory=list)
    end: int = 0

    def view(self, tensor: str) -> BrickView:
        return self.views[tensor]


def root_bytes(root: Root, lanes: int) -> int:
    return layout_bytes(root.shape, numpy_dtype(root.dtype), root.layout, lanes)


def plan_memory(flow: Dataflow, constants: dict[str, bytes], config: NpuConfig) -> ExtPlan:
    """Place ``constants`` (segment name -> bytes) and every root buffer of ``flow``."""
    lanes = config.bus_bytes
    plan = ExtPlan()
    cursor = 0

    placed: dict[bytes, int] = {}       # read-only bytes -> address: equal constants share one copy

    def segment(name: str, data: bytes, shared: bool = True) -> int:
        nonlocal cursor
        data = bytes(data)
        if shared and data in placed:
            return placed[data]
        at = cursor
        if shared:
            placed[data] = at
        plan.segments.append(Segment(name, at, data))
        cursor = align(cursor + len(data))
        return at

    # A constant root that a layer writes (a VARIABLE's value: its initial bytes, then
    # VARIABLE_WRITE) is state, not a constant: it gets bytes of its own.
    written = {flow.root_of(t).name for layer in flow.layers for t in layer.writes}
    for name, data in constants.items():
        plan.constants[name] = segment(name, data)
    for root in flow.roots.values():
        if root.kind == "const":
            data = np.asarray(root.data).astype(numpy_dtype(root.dtype))
            plan.roots[root.name] = segment(f"const.{root.name}", pack(data, root.layout, lanes),
                                            shared=root.name not in written)

    def pin(root: Root) -> None:
        nonlocal cursor
        if root.name not in plan.roots:
            plan.roots[root.name] = cursor
            cursor = align(cursor + root_bytes(root, lanes))

    for b in flow.inputs + flow.outputs:
        pin(flow.root_of(b.tensor))

    # Intermediates: lifetime [first layer touching, last layer touching], first-fit reuse.
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, layer in enumerate(flow.layers):
        for tensor in layer.reads + layer.writes:
            root = flow.root_of(tensor).name
            first.setdefault(root, i)
            last[root] = i
    live: list[tuple[int, int, int]] = []     # (last use, addr, size)
    pool_end = cursor
    for root in sorted((r for r in first if r not in plan.roots), key=lambda r: first[r]):
        i = first[root]
        live = [entry for entry in live if entry[0] >= i]
        size = align(root_bytes(flow.roots[root], lanes))
        addr = _first_fit(live, cursor, size)
        plan.roots[root] = addr
        live.append((last[root], addr, size))
        pool_end = max(pool_end, addr + size)
    plan.end = align(pool_end)
    if plan.end > config.ext_mem_bytes:
        raise Unsupported(f"the program needs {plan.end} bytes of external memory; the NPU "
                          f"configuration has {config.ext_mem_bytes}")

    for tensor in flow.refs:
        root = flow.root_of(tensor)
        if root.layout == "brick" and root.name in plan.roots:
            view = flow.view(tensor)
            plan.views[tensor] = replace(view, addr=plan.roots[root.name] + view.addr)
    plan.inputs = [_binding(b, flow, plan) for b in flow.inputs]
    plan.outputs = [_binding(b, flow, plan) for b in flow.outputs]
    return plan


def _binding(b: Binding, flow: Dataflow, plan: ExtPlan) -> TensorBinding:
    root = flow.root_of(b.tensor)
    addr = plan.views[b.tensor].addr if b.tensor in plan.views else plan.roots[root.name]
    return TensorBinding(b.name, tuple(b.shape), numpy_dtype(b.dtype).name, addr, b.layout, b.perm,
                         b.patches)


def _first_fit(live: list[tuple[int, int, int]], base: int, size: int) -> int:
    addr = base
    for _, start, length in sorted(live, key=lambda e: e[1]):
        if addr + size <= start:
            break
        addr = max(addr, start + length)
    return addr
