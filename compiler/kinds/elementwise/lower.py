"""Lowering of elementwise layers (compiler/kinds/elementwise/layer.py ``EltLayer``).

Every operand is seen as a strided array of *vectors* (``L`` lanes of its element type)
along the tensor's axes, the innermost axis counted in vectors (:class:`VecArray`): a
``rows`` tensor (isa/layout.py) is row-major, a brick tensor (or a view of one) has its
channel blocks as the vector axis.  Broadcasting is a zero stride; an innermost axis of
size 1 broadcast against a longer one is VALU's lane-0 broadcast (``a_bcast``/...), since
in both layouts such a tensor keeps each value in lane 0 of its own vector.

The output's axes in memory order, with each operand's strides, are merged where every
operand runs on contiguously (as the copy lowering does) into a loop *nest*.  A tile is a
piece of the innermost axis, or a piece of the next axis times the whole innermost one
(the VALU's two loop levels: ``n1`` x ``n0`` vectors); outer axes are Python loops, left to
the loop pass (compiler/program/loops.py) to fold into LOOPs.  Per tile:

1. one DMA_LOAD per input into its ASRAM buffer, *compact*: an axis on which the operand
   does not move (stride 0) is loaded once and read again with a zero VALU stride (SELECT's
   two value operands share the VALU's b strides, so they are loaded expanded, the DMA
   repeating words with zero strides, when their patterns differ);
2. the layer's steps (VALU, VRESCALE, TABLE), temporaries in ASRAM or ACC;
3. one DMA_STORE of the output buffer.

Inputs that move along at most one axis, contiguously (weights, biases, per-channel
constants), are *resident*: loaded once before the tiles and read in place.  An int48 input
(int64 in memory) arrives as two element-mode loads (low and high words) copied into ACC
row pairs, where VRESCALE reads INT48.  TABLE's table is installed in TSRAM once.

Buffers come in two slot sets when they fit, so the DMA loads the next tile while the VPU
works.  RESCALE parameters sit in PSRAM, one (multiplier, shift) row pair per vector
column of the innermost axis; per-channel rescales issue one VRESCALE per column.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from isa.config import NpuConfig
from isa.instructions import Sram, TableMode, ValuOp, VecDst, VecMem, VecType
from isa.vector import DTYPE_BITS, VALU_SIGS
from tosa_ir.errors import Unsupported
from tosa_ir.graph import numpy_dtype

from compiler.core.ops import Op, new_op
from compiler.core.plan import Plan
from compiler.kinds.elementwise.layer import EltLayer
from compiler.program.memplan import ExtPlan
from compiler.core.ops import MAX_LEN
from compiler.core.views import ceil_div

VEC_ROWS = 1 << 16     # vector operands address the first 2**16 rows


@dataclass(frozen=True)
class VecArray:
    """A tensor in external memory as vectors: ``strides[k]`` bytes per step along axis
    ``k`` of ``shape``; along the last axis a step is one vector (``L`` elements)."""

    addr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    vbytes: int


def tensor_array(flow, ext: ExtPlan, name: str, lanes: int) -> VecArray:
    """The :class:`VecArray` of tensor ``name`` (a brick view or a ``rows`` tensor)."""
    root = flow.root_of(name)
    if root.layout == "brick":
        v = ext.view(name)
        return VecArray(v.addr, tuple(v.shape), (v.strides[0], v.strides[2], lanes, v.strides[1]), lanes)
    if root.layout != "rows":
        raise AssertionError(f"compiler bug: {name!r} has layout {root.layout}")
    ref = flow.refs[name]
    if ref.window:
        # A window of a rows tensor (a strip of RESIZE's output rows): the parent's strides
        # from the window's first element; whole vectors only along the innermost axis.
        parent = tensor_array(flow, ext, ref.parent, lanes)
        shape = tuple(flow.shapes[name])
        offset = ref.offset[4 - len(shape):] if len(shape) <= 4 else None
        if offset is None or offset[-1] or len(parent.shape) != len(shape):
            raise AssertionError(f"compiler bug: rows window {name!r} at {ref.offset}")
        addr = parent.addr + sum(o * st for o, st in zip(offset, parent.strides[:-1]))
        return VecArray(addr, shape, parent.strides, parent.vbytes)
    shape = tuple(flow.shapes[name]) or (1,)
    vbytes = lanes * numpy_dtype(root.dtype).itemsize
    vectors = ceil_div(shape[-1], lanes)
    strides = [vbytes]
    step = vectors * vbytes
    for d in reversed(shape[:-1]):
        strides.append(step)
        step *= d
    return VecArray(ext.roots[root.name], shape, tuple(reversed(strides)), vbytes)


@dataclass
class Axis:
    count: int
    strides: list[int]      # bytes: output first, then each input
    vector: bool = False    # the innermost tensor axis (vector columns)


@dataclass
class EltPlan(Plan):
    """A lowered vector-unit layer (elementwise, reduction, rows movement): tiles of ``tile``
    vectors."""

    layer: EltLayer
    tile: int

    def describe(self) -> str:
        return f"elementwise: tiles of up to {self.tile} vectors ({len(self.ops)} instructions)"


def params_name(layer: EltLayer) -> str:
    return f"{layer.name}.params"


def param_rows(layer: EltLayer, lanes: int) -> np.ndarray | None:
    """PSRAM rows of ``layer``, or None: its own parameters (multiplier, shift per vector
    column), then a row pair per entry of ``scalar_params`` (:func:`scalar_param_row`)."""
    rows = _main_rows(layer, lanes)
    extra = [np.repeat(np.array([[m], [s]], np.int64), lanes, 1) for m, s in layer.scalar_params]
    if rows is None and not extra:
        return None
    return np.concatenate(([] if rows is None else [rows]) + extra)


def scalar_param_row(layer: EltLayer, lanes: int, k: int) -> int:
    """PSRAM row of ``layer``'s per-tensor parameter pair ``k``."""
    rows = _main_rows(layer, lanes)
    return (0 if rows is None else rows.shape[0]) + 2 * k


def _main_rows(layer: EltLayer, lanes: int) -> np.ndarray | None:
    if layer.params is None:
        return None
    mul, shift = layer.params
    if not layer.per_channel:
        return np.repeat(np.array([[mul[0]], [shift[0]]], np.int64), lanes, 1)
    cols = ceil_div(len(mul), lanes)
    rows = np.zeros((2 * cols, lanes), np.int64)
    m = np.zeros(cols * lanes, np.int64)
    s = np.zeros(cols * lanes, np.int64)
    m[:len(mul)], s[:len(shift)] = mul, shift
    rows[0::2] = m.reshape(cols, lanes)
    rows[1::2] = s.reshape(cols, lanes)
    return rows


def table_name(layer: EltLayer) -> str:
    return f"{layer.name}.table"


def elt_constants(layer: EltLayer, config: NpuConfig) -> dict[str, bytes]:
    out = {}
    rows = param_rows(layer, config.array_cols)
    if rows is not None:
        out[params_name(layer)] = rows.astype("<i4").tobytes()
    if layer.table is not None:
        out[table_name(layer)] = layer.table
    return out


def _rows_of(dtype: VecType, mem: str) -> int:
    if dtype == VecType.INT48:          # as loaded: two int32 vectors (low, high words)
        return 8 if mem == "ASRAM" else 2
    return DTYPE_BITS[dtype] // 8 if mem == "ASRAM" else 1


def loop_nest(out: VecArray, ins: list[VecArray], lanes: int, keep_vector: bool) -> tuple[list[Axis], list[bool]]:
    """The merged loop nest over the output (outermost first) and each input's lane
    broadcast flag."""
    rank = len(out.shape)
    axes: list[Axis] = []
    bcast = []
    for k in range(rank):
        strides = [out.strides[k]]
        for a in ins:
            j = k + len(a.shape) - rank
            if j < 0 or (a.shape[j] == 1 and out.shape[k] != 1):
                strides.append(0)
            else:
                strides.append(a.strides[j])
        count = out.shape[k] if k < rank - 1 else ceil_div(out.shape[k], lanes)
        axes.append(Axis(count, strides, vector=k == rank - 1))
    for a in ins:
        bcast.append(a.shape[-1] == 1 and out.shape[-1] > 1)
    order = sorted(range(rank), key=lambda k: -axes[k].strides[0])
    axes = [axes[k] for k in order if axes[k].count > 1]
    merged: list[Axis] = []
    for ax in axes:
        if merged and not (keep_vector and (ax.vector or merged[-1].vector)) and all(
                so == ax.count * si for so, si in zip(merged[-1].strides, ax.strides)):
            merged[-1] = Axis(merged[-1].count * ax.count, list(ax.strides), ax.vector or merged[-1].vector)
        else:
            merged.append(ax)
    return merged or [Axis(1, [0] * (len(ins) + 1))], bcast


def lower_elementwise(layer: EltLayer, flow, ext: ExtPlan, config: NpuConfig, index: int) -> EltPlan:
    """The instructions of ``layer`` (natural order, no waits)."""
    lanes = config.array_cols
    out = tensor_array(flow, ext, layer.output, lanes)
    ins = [tensor_array(flow, ext, name, lanes) for name in layer.inputs]
    for k, (offset, step, shape) in layer.windows.items():
        a = ins[k]
        assert offset[-1] == 0 and step[-1] == 1 and len(a.shape) == len(shape), "compiler bug: bad window"
        ins[k] = VecArray(a.addr + sum(o * s for o, s in zip(offset, a.strides)), tuple(shape),
                          tuple(s * t for s, t in zip(a.strides, step)), a.vbytes)
    axes, bcast = loop_nest(out, ins, lanes, layer.per_channel)
    names = ["out"] + [f"in{k}" for k in range(len(ins))]
    arrays = [out] + ins
    types = layer.types

    # SELECT reads c with b's strides: b and c must be laid out alike in ASRAM (temporaries
    # are whole tiles; inputs are compact unless loaded expanded).
    full = set()
    for select in (s for s in layer.steps if s.name == "VALU" and s.fields.get("op") == ValuOp.SELECT):
        b, c = select.srcs[1], select.srcs[2]
        if b in names and c in names:
            kb, kc = names.index(b), names.index(c)
            if [ax.strides[kb] == 0 for ax in axes] != [ax.strides[kc] == 0 for ax in axes]:
                full |= {b, c}
        else:
            full |= {x for x in (b, c) if x in names}

    # Resident inputs: moving along at most one axis, contiguously (weights, biases, per-channel
    # constants): loaded once before the tiles, read in place.
    asram = min(config.asram_rows, VEC_ROWS)
    resident: dict[str, tuple[int, int | None, int]] = {}     # name -> (ASRAM row, axis, count)
    res_end = 0
    for o, name in enumerate(names[1:], 1):
        moving = [k for k, ax in enumerate(axes) if ax.strides[o]]
        if name in full or len(moving) > 1 or (moving and axes[moving[0]].strides[o] != arrays[o].vbytes):
            continue
        if types[name] == VecType.INT48:
            # int48 is int64 in memory but 6-byte lanes in an ASRAM vector: it reaches
            # VRESCALE only through the per-tile split into ACC row pairs below.
            continue
        count = axes[moving[0]].count if moving else 1
        rows = count * _rows_of(types[name], "ASRAM")
        if res_end + rows > asram // 4:
            continue
        resident[name] = (res_end, moving[0] if moving else None, count)
        res_end += rows

    # Rows per tile vector: every other buffer (compact ones at most a full tile).
    asram_per = sum(_rows_of(types[n], "ASRAM") for n in names if n not in resident)
    asram_per += sum(_rows_of(types[t], "ASRAM") for t, mem in layer.temps.items() if mem == "ASRAM")
    acc_per = sum(1 for mem in layer.temps.values() if mem == "ACC")
    # An int48 input (int64 in memory) is loaded as two int32 halves (8 rows per vector, in
    # asram_per through _rows_of) and copied into ACC row pairs, where VRESCALE reads INT48.
    acc_per += sum(2 for n in names[1:] if types[n] == VecType.INT48)
    wpr = config.words_per_wide_row
    prow = param_rows(layer, lanes)
    if prow is not None and prow.shape[0] > config.psram_rows:
        raise Unsupported(f"{layer.where()}: {prow.shape[0] // 2} vector columns of per-channel RESCALE "
                          f"parameters need more PSRAM rows than the {config.psram_rows} the NPU has")
    acc = min(config.acc_rows, VEC_ROWS)
    total = int(np.prod([ax.count for ax in axes]))
    cap = (asram - res_end) // asram_per
    if acc_per:
        cap = min(cap, acc // acc_per)
    if cap < 1:
        raise Unsupported(f"{layer.where()}: one vector of every operand does not fit ASRAM")
    slots = 2 if cap >= 2 and total > 1 else 1
    tile = min(cap // slots, MAX_LEN)

    ops: list[Op] = []

    def op(name, **fields) -> Op:
        return new_op(config, index, name, **fields)

    if prow is not None:
        ops.append(op("DMA_LOAD", sram=Sram.PSRAM, sram_addr=0, ext_addr=ext.constants[params_name(layer)],
                      len0=prow.shape[0] * wpr, len1=1, len2=1))
    if layer.table is not None:
        # Install the table: into ASRAM (the first tile's rows), then into TSRAM.
        rows = ceil_div(len(layer.table), config.bus_bytes)
        ops.append(op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=0, ext_addr=ext.constants[table_name(layer)],
                      len0=rows, len1=1, len2=1))
        ops.append(op("TABLE", mode=TableMode.LOAD, n0=rows, n1=1, a_mem=VecMem.ASRAM, a_addr=0, a_stride0=1,
                      a_stride1=0, t_addr=0))

    for name, (row, _, count) in resident.items():
        o = names.index(name)
        ops.append(op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=row, ext_addr=arrays[o].addr,
                      len0=count * arrays[o].vbytes // config.bus_bytes, len1=1, len2=1))

    inner = axes[-1]
    if inner.count >= tile or len(axes) == 1:
        outer, mid = axes[:-1], None
        piece0, piece1 = min(tile, inner.count), 1
    else:
        outer, mid = axes[:-2], axes[-2]
        piece0, piece1 = inner.count, min(mid.count, tile // inner.count)
    vec_axis = next((k for k, ax in enumerate(axes) if ax.vector), None)

    step = 0
    for idx in itertools.product(*(range(ax.count) for ax in outer)):
        base = [sum(i * ax.strides[o] for i, ax in zip(idx, outer)) for o in range(len(arrays))]
        ranges1 = [(0, 1)] if mid is None else [(s, min(piece1, mid.count - s))
                                                for s in range(0, mid.count, piece1)]
        for s1, n1 in ranges1:
            for s0 in range(0, inner.count, piece0):
                n0 = min(piece0, inner.count - s0)
                slot = step % slots
                step += 1
                ops += _tile(layer, config, index, arrays, names, types, bcast, full, axes, outer, idx,
                             base, mid, s1, n1, s0, n0, res_end + slot * tile * asram_per, slot * tile * acc_per,
                             tile, vec_axis, resident)
    return EltPlan(layer, ops, tile)


def _tile(layer, config, index, arrays, names, types, bcast, full, axes, outer, idx, base, mid,
          s1, n1, s0, n0, asram_base, acc_base, tile, vec_axis, resident) -> list[Op]:
    lanes = config.array_cols
    inner = axes[-1]
    ops: list[Op] = []

    def op(name, **fields) -> Op:
        return new_op(config, index, name, **fields)

    # Each operand's strides along the tile's two axes and its first byte.
    bufs: dict[str, dict] = {}
    at = asram_base
    for name, (row, axis, _) in resident.items():
        # In place: the tile's first vector along the operand's axis, its strides along it.
        rows = _rows_of(types[name], "ASRAM")
        if axis is None:
            first = 0
        elif axis == len(axes) - 1:
            first = s0
        elif mid is not None and axis == len(axes) - 2:
            first = s1
        else:
            first = idx[axis]          # an outer axis (outer = axes[:len(outer)])
        bufs[name] = dict(addr=row + first * rows, rows=rows, bcast=bcast[names.index(name) - 1],
                          s0=rows if axis == len(axes) - 1 and n0 > 1 else 0,
                          s1=rows if mid is not None and axis == len(axes) - 2 and n1 > 1 else 0)
    for o, (name, arr) in enumerate(zip(names, arrays)):
        if name in resident:
            continue
        st0 = inner.strides[o]
        st1 = mid.strides[o] if mid is not None else 0
        ext_addr = arr.addr + base[o] + s0 * st0 + s1 * st1
        rows = _rows_of(types[name], "ASRAM")
        expand = name in full or name == "out"
        c0 = n0 if (st0 or expand) else 1
        c1 = n1 if (st1 or expand) else 1
        bufs[name] = dict(addr=at, ext=ext_addr, st0=st0, st1=st1, c0=c0, c1=c1, rows=rows,
                          s0=rows if c0 > 1 else 0, s1=c0 * rows if c1 > 1 else 0,
                          bcast=bcast[o - 1] if o else False, w=arr.vbytes // lanes, vb=arr.vbytes)
        at += tile * rows
    acc_at = acc_base
    for t, mem in layer.temps.items():
        rows = _rows_of(types[t], mem)
        addr = at if mem == "ASRAM" else acc_at
        # Strides as a full-tile input's (zero along a loop of one): SELECT reads b and c alike.
        bufs[t] = dict(addr=addr, mem=mem, c0=n0, c1=n1, rows=rows, s0=rows if n0 > 1 else 0,
                       s1=n0 * rows if n1 > 1 else 0, bcast=False)
        if mem == "ASRAM":
            at += tile * rows
        else:
            acc_at += tile

    for name in names[1:]:
        if name in resident:
            continue
        if types[name] != VecType.INT48:
            ops.append(move_buffer(config, index, "DMA_LOAD", bufs[name]))
            continue
        # int48: low and high 32-bit words of each int64 element (element-mode DMA, a vector
        # per line), then VALU COPYs into ACC row pairs (low row, high row).
        b = bufs[name]
        half = b["c0"] * b["c1"] * 4
        for k in range(2):
            ops.append(op("DMA_LOAD", sram=Sram.ASRAM, sram_addr=b["addr"] + k * half, ext_addr=b["ext"] + 4 * k,
                          elem=4, stride0=8, len0=lanes, len1=b["c0"], stride1=b["st0"] if b["c0"] > 1 else 0,
                          len2=b["c1"], stride2=b["st1"] if b["c1"] > 1 else 0))
            ops.append(op("VALU", op=ValuOp.COPY, dtype=VecType.INT32, n0=b["c0"], n1=b["c1"], a_mem=VecMem.ASRAM,
                          a_addr=b["addr"] + k * half, a_stride0=4, a_stride1=4 * b["c0"], d_mem=VecDst.ACC,
                          d_addr=acc_at + k, d_stride0=2, d_stride1=2 * b["c0"]))
        bufs[name] = dict(addr=acc_at, mem="ACC", rows=2, s0=2 if b["c0"] > 1 else 0,
                          s1=2 * b["c0"] if b["c1"] > 1 else 0, bcast=False)
        acc_at += 2 * tile

    def src(prefix: str, name: str, arity_b: bool = False) -> dict:
        b = bufs[name]
        mem = VecMem.ACC if b.get("mem") == "ACC" else VecMem.ASRAM
        f = {f"{prefix}_mem": mem, f"{prefix}_addr": b["addr"]}
        if prefix != "c":
            f.update({f"{prefix}_stride0": b["s0"], f"{prefix}_stride1": b["s1"]})
        f[f"{prefix}_bcast"] = int(b["bcast"])
        return f

    def dst(name: str) -> dict:
        b = bufs[name]
        mem = VecDst.ACC if b.get("mem") == "ACC" else VecDst.ASRAM
        return {"d_mem": mem, "d_addr": b["addr"], "d_stride0": b["s0"], "d_stride1": b["s1"]}

    for s in layer.steps:
        if s.name == "VALU":
            fields = dict(s.fields, n0=n0, n1=n1, **src("a", s.srcs[0]), **dst(s.dst))
            arity = VALU_SIGS[ValuOp(s.fields["op"])].arity
            if arity >= 2:
                fields.update(src("b", s.srcs[1]))
            if arity == 3:
                fields.update(src("c", s.srcs[2]))
                c_fixed = bufs[s.srcs[2]]["s0"] == 0 and bufs[s.srcs[2]]["s1"] == 0
                if not c_fixed and (bufs[s.srcs[2]]["s0"], bufs[s.srcs[2]]["s1"]) != \
                        (bufs[s.srcs[1]]["s0"], bufs[s.srcs[1]]["s1"]):
                    raise AssertionError("compiler bug: SELECT operands b and c laid out differently")
                fields["c_fixed"] = int(c_fixed)
            ops.append(op("VALU", **fields))
            continue
        a, d = bufs[s.srcs[0]], bufs[s.dst]
        amem = VecMem.ACC if a.get("mem") == "ACC" else VecMem.ASRAM
        dmem = VecDst.ACC if d.get("mem") == "ACC" else VecDst.ASRAM
        if s.name == "TABLE":
            ops.append(op("TABLE", **s.fields, n0=n0, n1=n1, a_mem=amem, a_addr=a["addr"], a_stride0=a["s0"],
                          a_stride1=a["s1"], d_mem=dmem, d_addr=d["addr"], d_stride0=d["s0"], d_stride1=d["s1"]))
            continue
        # VRESCALE: per-channel parameters differ per vector column.
        parts = [(0, n1, 0, n0, 0)]
        if s.param is not None:         # a per-tensor pair of a merged chain
            ops.append(op("VRESCALE", **s.fields, n0=n0, n1=n1, a_mem=amem, a_addr=a["addr"], a_stride0=a["s0"],
                          a_stride1=a["s1"], d_mem=dmem, d_addr=d["addr"], d_stride0=d["s0"],
                          d_stride1=d["s1"], param_addr=scalar_param_row(layer, lanes, s.param)))
            continue
        if layer.per_channel and vec_axis is not None:
            if vec_axis == len(axes) - 1:
                parts = [(0, n1, j, 1, s0 + j) for j in range(n0)]
            elif mid is not None and vec_axis == len(axes) - 2:
                parts = [(i, 1, 0, n0, s1 + i) for i in range(n1)]
            else:
                parts = [(0, n1, 0, n0, idx[vec_axis])]
        for i0, m1, j0, m0, col in parts:
            ops.append(op("VRESCALE", **s.fields, n0=m0, n1=m1, a_mem=amem,
                          a_addr=a["addr"] + i0 * a["s1"] + j0 * a["s0"], a_stride0=a["s0"], a_stride1=a["s1"],
                          d_mem=dmem, d_addr=d["addr"] + i0 * d["s1"] + j0 * d["s0"], d_stride0=d["s0"],
                          d_stride1=d["s1"], param_addr=2 * col if layer.per_channel else 0))
    ops.append(move_buffer(config, index, "DMA_STORE", bufs["out"]))
    return ops


def move_buffer(config: NpuConfig, index: int, name: str, b: dict) -> Op:
    """Move buffer ``b`` (c1 x c0 vectors of w words) to or from its external strides."""
    w, c0, c1 = b["w"], b["c0"], b["c1"]
    st0, st1 = b["st0"], b["st1"]
    if c0 > 1 and st0 == b["vb"]:
        fields = dict(len0=c0 * w, len1=c1, len2=1, stride1=st1 if c1 > 1 else 0, stride2=0)
    else:
        fields = dict(len0=w, len1=c0, len2=c1, stride1=st0 if c0 > 1 else 0, stride2=st1 if c1 > 1 else 0)
    return new_op(config, index, name, sram=Sram.ASRAM, sram_addr=b["addr"], ext_addr=b["ext"], **fields)
