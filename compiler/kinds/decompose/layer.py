"""Operators the vector unit runs as a few simpler layers (built here for the dataflow walk,
compiler/dataflow.py): data-dependent selection becomes compare, select and reduce.

* ARGMAX(x, axis): ``m = REDUCE_MAX(x)``; ``REDUCE_MIN(SELECT(x == m, iota, D))`` (the first
  index of the maximum), reshaped without the axis.
* GATHER(values[N,K,C], indices[N,W]): ``out[n,w,c] = MAX_k SELECT(indices[n,w] == k,
  values[n,k,c], lowest)``: a one-hot over K, broadcast as [N,W,K,C].
* SCATTER(values_in[N,K,C], indices[N,W], input[N,W,C]): ``hit[n,k] = ANY_w(indices[n,w] ==
  k)``, ``out = SELECT(hit, MAX_w SELECT(indices == k, input, lowest), values_in)`` (the spec
  requires the indices of one batch to be distinct).

* MATMUL(A[N,H,C], B[N,C,W]) (int8): ``REDUCE_SUM_c((A - A_zp)[N,H,C,1] * (B - B_zp)[N,1,C,W])``,
  the zero points taken off exactly by VRESCALE (int8 -> int32), products by VALU MUL.
  (The MXU would do it faster; int16 x int16 accumulates in int48, not supported yet.)

* RESIZE: the row and column index maps are known when compiling, so NEAREST is two
  gathers (element-DMA copies, one per arithmetic run of the map); BILINEAR (int8 -> int32)
  gathers the four neighbour tensors and sums them times their weights ``wy * wx``
  (VRESCALE to int32, VALU MUL by an int32 constant broadcast over channels, ADD); int16
  BILINEAR (int48) runs on the MAC array (compiler/kinds/mxu_conv/resize_wide.py).

Every intermediate is a rows tensor of its own; a reduction longer than one VPOOL window
(255 elements: K of GATHER, W of SCATTER, a long ARGMAX axis) is split in two
(compiler/kinds/decompose/reduce_split.py).
"""
from __future__ import annotations

import numpy as np

from isa.instructions import ValuOp, VecType
from tosa_ir import Operator
from tosa_ir.graph import numpy_dtype

from compiler.kinds.elementwise.layer import EltLayer, Step, VEC_TYPES, _scalar
from compiler.core.errors import invalid, unsupported
from compiler.kinds.movement.layer import MoveLayer, _reshape_parts, gather_axis_layer, row_strides
from compiler.kinds.reduce.layer import REDUCE_OPS, WINDOW_MAX, ReduceLayer
from compiler.kinds.movement.brick_rows import brick_rows_layer, rows_copy
from compiler.core.views import BrickView, dense_strides, shape4
from compiler.kinds.decompose.reduce_split import split_reduce
from compiler.core.dataflow import Ref
from compiler.kinds.matmul.layer import matmul
from compiler.kinds.movement.params import ints, operand
from compiler.kinds.mxu_conv.resize_wide import STRIP_SHARE, bilinear_int16

DECOMPOSED_OPS = ("ARGMAX", "GATHER", "SCATTER", "MATMUL", "RESIZE")
LOWEST = {"int8": -128, "int16": -32768, "int32": -(1 << 31)}
# GATHER/SCATTER also move bool (int8 0/1 in the rows layout: MAX picks like LOGICAL_OR).
INDEXED_LOWEST = {**LOWEST, "bool": 0}


class _Builder:
    """Intermediate tensors and layers for one operator."""

    def __init__(self, walk, op: Operator):
        self.walk, self.op = walk, op
        self.base = walk.new_name(op.op.lower())
        self.count = 0

    def tmp(self, shape, dtype: str) -> str:
        name = f"{self.base}.t{self.count}"
        self.count += 1
        return self.walk.new_root(name, tuple(shape), "computed", layout="rows", dtype=dtype)

    def const(self, data: np.ndarray, dtype: str) -> str:
        name = f"{self.base}.c{self.count}"
        self.count += 1
        data = np.asarray(data).astype(numpy_dtype(dtype))
        return self.walk.new_root(name, data.shape, "const", layout="rows", dtype=dtype, data=data)

    def shape(self, t: str) -> tuple[int, ...]:
        return tuple(self.walk.flow.shapes[t])

    def layer(self, layer) -> None:
        layer.ops, layer.location = [self.op.describe()], self.op.location
        self.walk.flow.layers.append(layer)

    def valu(self, op: ValuOp, dtype: VecType, inputs: list[str], types: list[VecType], out_shape, out_dtype: str,
             out_type: VecType) -> str:
        out = self.tmp(out_shape, out_dtype)
        srcs = tuple(f"in{k}" for k in range(len(inputs)))
        tmap = {f"in{k}": t for k, t in enumerate(types)}
        tmap["out"] = out_type
        self.layer(EltLayer(f"{self.base}.l{self.count}", list(inputs), out, tuple(out_shape), tmap, {},
                            [Step("VALU", {"op": op, "dtype": dtype}, srcs, "out")]))
        return out

    def reduce(self, x: str, axis: int, mode: str, dtype: VecType, out_dtype: str) -> str:
        shape = self.shape(x)
        if shape[axis] > WINDOW_MAX:
            return split_reduce(self, x, axis, mode, dtype, out_dtype)
        out = self.tmp(tuple(1 if i == axis else d for i, d in enumerate(shape)), out_dtype)
        self.layer(ReduceLayer(f"{self.base}.l{self.count}", x, out, shape, axis, mode, dtype))
        return out

    def reshape(self, x: str, shape, dtype: str, name: str | None = None) -> str:
        """``x`` as ``shape``: a view when the rows bytes coincide, else an element copy."""
        before, after = self.shape(x) or (1,), tuple(shape) or (1,)
        lanes = self.walk.lanes
        if self.walk.flow.root_of(x).layout == "brick" and shape4(before) != shape4(after):
            # A brick view regrouped into other pixels (a batch of 6 from [2, 3, ...]) keeps
            # its root's strides if aliased: copy it to rows first (whole bricks).
            rows = self.tmp(before, dtype)
            self.layer(brick_rows_layer(f"{self.base}.l{self.count}", x, rows, self.walk.flow.view(x), True,
                                        [], ""))
            x = rows
        target = name or f"{self.base}.t{self.count}"
        self.count += 1
        if before[-1] == after[-1] or (before[-1] % lanes == 0 and after[-1] % lanes == 0):
            self.walk.alias(target, Ref(x), tuple(shape))
            return target
        self.walk.new_root(target, tuple(shape), "computed", layout="rows", dtype=dtype)
        size = numpy_dtype(dtype).itemsize
        parts = _reshape_parts(before, after, row_strides(before, size, lanes), row_strides(after, size, lanes),
                               size)
        self.layer(MoveLayer(f"{self.base}.l{self.count}", [x], target, size, parts))
        return target


def decompose(walk, op: Operator) -> None:
    """Add the layers of ``op`` (one of DECOMPOSED_OPS) to the walk's dataflow."""
    block = walk.block
    b = _Builder(walk, op)
    out = block.tensor(op.outputs[0])
    if any(d < 0 for d in out.shape):
        raise unsupported(op, "unknown dimensions")
    if op.op == "ARGMAX":
        x = walk.require_vec(op, op.inputs[0])
        xt = block.tensor(op.inputs[0])
        axis = int(op.attrs.get("axis", 0))
        if xt.dtype not in LOWEST:
            raise unsupported(op, f"ARGMAX of {xt.dtype}")
        shape = tuple(xt.shape)
        if not 0 <= axis < len(shape):
            raise invalid(op, f"axis {axis} outside rank {len(shape)}")
        t = VEC_TYPES[xt.dtype]
        m = b.reduce(x, axis, "max", t, xt.dtype)
        eq = b.valu(ValuOp.EQUAL, t, [x, m], [t, t], shape, "bool", VecType.INT8)
        iota_shape = [1] * len(shape)
        iota_shape[axis] = shape[axis]
        iota = b.const(np.arange(shape[axis]).reshape(iota_shape), "int32")
        big = b.const(np.full([1] * len(shape), shape[axis]), "int32")
        sel = b.valu(ValuOp.SELECT, VecType.INT32, [eq, iota, big], [VecType.INT8, VecType.INT32, VecType.INT32],
                     shape, "int32", VecType.INT32)
        idx = b.reduce(sel, axis, "min", VecType.INT32, "int32")
        b.reshape(idx, tuple(out.shape), "int32", name=op.outputs[0])
        return
    if op.op == "MATMUL":
        if not matmul(b, op):       # on the MAC array (kinds/matmul/layer.py) unless an operand is bricks
            _matmul(b, op)
        return
    if op.op == "RESIZE":
        _resize(b, op)
        return
    if op.op == "GATHER":
        values, indices = (walk.require_vec(op, t) for t in op.inputs[:2])
        vt, n, k, c, w = _index_shapes(op, block)
        t = VEC_TYPES[vt.dtype]
        _, sel = _select_at_index(b, indices, values, (n, 1, k, c), vt.dtype, (n, w, k, c))
        red = b.reduce(sel, 2, "max", t, vt.dtype)
        b.reshape(red, (n, w, c), vt.dtype, name=op.outputs[0])
        return
    # SCATTER
    values_in, indices, source = (walk.require_vec(op, t) for t in op.inputs[:3])
    vt, n, k, c, w = _index_shapes(op, block)
    t = VEC_TYPES[vt.dtype]
    eq, sel = _select_at_index(b, indices, source, (n, w, 1, c), vt.dtype, (n, w, k, c))
    red = b.reduce(sel, 1, "max", t, vt.dtype)                      # [n, 1, k, c]
    hit = b.reduce(eq, 1, "max", VecType.INT8, "bool")              # [n, 1, k, 1]
    vin4 = b.reshape(values_in, (n, 1, k, c), vt.dtype)
    res = b.valu(ValuOp.SELECT, t, [hit, red, vin4], [VecType.INT8, t, t], (n, 1, k, c), vt.dtype, t)
    b.reshape(res, (n, k, c), vt.dtype, name=op.outputs[0])


def _index_shapes(op: Operator, block) -> tuple:
    """GATHER / SCATTER's checked operands: (values tensor, N, K, C, W)."""
    vt, it = block.tensor(op.inputs[0]), block.tensor(op.inputs[1])
    if vt.dtype not in INDEXED_LOWEST or it.dtype != "int32":
        raise unsupported(op, f"{op.op} of {vt.dtype} by {it.dtype}")
    n, k, c = vt.shape
    return vt, n, k, c, it.shape[1]


def _select_at_index(b: _Builder, indices: str, data: str, data_shape: tuple, dtype: str,
                     shape: tuple[int, int, int, int]) -> tuple[str, str]:
    """GATHER / SCATTER's one-hot choice over ``shape`` ``(N, W, K, C)``: ``eq[n, w, k]`` is
    ``indices[n, w] == k``; ``sel`` is ``data`` (reshaped to ``data_shape``, broadcast) where
    ``eq``, else ``dtype``'s lowest value, so a MAX over W or K picks the chosen element.
    Returns (eq, sel)."""
    n, w, k, c = shape
    t = VEC_TYPES[dtype]
    idx4 = b.reshape(indices, (n, w, 1, 1), "int32")
    iota = b.const(np.arange(k).reshape(1, 1, k, 1), "int32")
    eq = b.valu(ValuOp.EQUAL, VecType.INT32, [idx4, iota], [VecType.INT32] * 2, (n, w, k, 1), "bool", VecType.INT8)
    data4 = b.reshape(data, data_shape, dtype)
    low = b.const(np.full((1, 1, 1, 1), INDEXED_LOWEST[dtype]), dtype)
    sel = b.valu(ValuOp.SELECT, t, [eq, data4, low], [VecType.INT8, t, t], shape, dtype, t)
    return eq, sel


def _matmul(b: _Builder, op: Operator) -> None:
    block = b.walk.block
    at, bt = block.tensor(op.inputs[0]), block.tensor(op.inputs[1])
    if at.dtype != "int8" or bt.dtype != "int8":
        raise unsupported(op, f"{at.dtype} x {bt.dtype}: int16 matrices accumulate in int48, not supported yet")
    n, h, c = at.shape
    w = bt.shape[2]
    if c > WINDOW_MAX:
        raise unsupported(op, f"C = {c}: one VPOOL window sums at most {WINDOW_MAX} products")
    azp = _scalar(op, block, 2, ("A_zp", "a_zp"), 0)
    bzp = _scalar(op, block, 3, ("B_zp", "b_zp"), 0)
    x, y = (b.walk.require_vec(op, t) for t in op.inputs[:2])
    a4 = b.reshape(x, (n, h, c, 1), "int8")
    b4 = b.reshape(y, (n, 1, c, w), "int8")
    wide = []
    for t, zp, shape in ((a4, azp, (n, h, c, 1)), (b4, bzp, (n, 1, c, w))):
        out = b.tmp(shape, "int32")
        fields = dict(in_type=VecType.INT8, out_type=VecType.INT32, per_channel=0, scale32=1, double_round=0,
                      in_zp=zp, out_zp=0, clamp=0)
        b.layer(EltLayer(f"{b.base}.l{b.count}", [t], out, shape, {"in0": VecType.INT8, "out": VecType.INT32}, {},
                         [Step("VRESCALE", fields, ("in0",), "out")], params=np.array([[1], [0]], np.int64)))
        wide.append(out)
    prod = b.valu(ValuOp.MUL, VecType.INT32, wide, [VecType.INT32] * 2, (n, h, c, w), "int32", VecType.INT32)
    total = b.reduce(prod, 2, "sum", VecType.INT32, "int32")
    b.reshape(total, (n, h, w), "int32", name=op.outputs[0])


def _resize(b: _Builder, op: Operator) -> None:
    block = b.walk.block
    xt, yt = block.tensor(op.inputs[0]), block.tensor(op.outputs[0])
    mode = op.attrs.get("mode")
    if isinstance(mode, str):
        name = mode.upper().rsplit(".", 1)[-1]
    else:
        table = {1: "NEAREST", 2: "BILINEAR"} if b.walk.graph.is_tosa_1 else {0: "NEAREST", 1: "BILINEAR"}
        name = table.get(int(mode), str(mode))
    bilinear = name == "BILINEAR"
    if xt.dtype not in ("int8", "int16"):
        raise unsupported(op, f"{name} of {xt.dtype} -> {yt.dtype}")
    sy_n, sy_d, sx_n, sx_d = ints(operand(op, block, 1, ("scale",)))
    off_y, off_x = ints(operand(op, block, 2, ("offset",)))
    n, ih, iw, c = xt.shape
    _, oh, ow, _ = yt.shape

    def axis(o_size, s_n, s_d, offset, i_size):
        pos = np.arange(o_size, dtype=np.int64) * s_d + offset
        idx = np.floor_divide(pos, s_n)
        rem = pos - idx * s_n
        return np.maximum(idx, 0), np.minimum(idx + 1, i_size - 1), rem

    iy0, iy1, dy = axis(oh, sy_n, sy_d, off_y, ih)
    ix0, ix1, dx = axis(ow, sx_n, sx_d, off_x, iw)
    x = b.walk.require_vec(op, op.inputs[0])

    def gather(src, shape, ax, index, dst=None):
        out_shape = tuple(len(index) if k == ax else d for k, d in enumerate(shape))
        if dst is None:
            dst = b.tmp(out_shape, xt.dtype)
        else:
            b.walk.new_root(dst, out_shape, "computed", layout="rows", dtype=xt.dtype)
        b.layer(gather_axis_layer(f"{b.base}.l{b.count}", src, dst, shape, ax, index, xt.dtype, b.walk.lanes,
                                  [], ""))
        b.count += 1
        return dst

    if not bilinear:
        iy = np.where(2 * dy >= sy_n, iy1, iy0)
        ix = np.where(2 * dx >= sx_n, ix1, ix0)
        rows = gather(x, (n, ih, iw, c), 1, iy)
        gather(rows, (n, oh, iw, c), 2, ix, dst=op.outputs[0])
        return
    if xt.dtype == "int16":
        bilinear_int16(b, op, gather, x, (n, ih, iw, c), (oh, ow), (iy0, iy1, dy, sy_n, sy_d),
                       (ix0, ix1, dx, sx_n, sx_d))
        return
    _bilinear_int8(b, gather, x, (n, ih, iw, c), (oh, ow), (iy0, iy1, sy_n - dy, dy), (ix0, ix1, sx_n - dx, dx),
                   op.outputs[0])


def _bilinear_int8(b: _Builder, gather, x: str, in_shape, out_hw, ymap, xmap, out: str) -> None:
    """int8 BILINEAR (int32 output) on the vector unit, in strips of output rows (see
    ``_int8_strip_rows``): per strip the four neighbour tensors are gathered and summed
    times ``wy * wx``, each factor an int32 constant broadcast over the other axes (``wy``
    per row, ``wx`` per column: a few bytes, not one weight per output pixel)."""
    n, ih, iw, c = in_shape
    oh, ow = out_hw
    iy0, iy1, wy0, wy1 = ymap
    ix0, ix1, wx0, wx1 = xmap
    b.walk.new_root(out, (n, oh, ow, c), "computed", layout="rows", dtype="int32")
    wx = [b.const(w.reshape(1, 1, ow, 1), "int32") for w in (wx0, wx1)]
    rescale = dict(in_type=VecType.INT8, out_type=VecType.INT32, per_channel=0, scale32=1, double_round=0,
                   in_zp=0, out_zp=0, clamp=0)
    strip = _int8_strip_rows(b.walk.config, n, iw, ow, c, oh)
    for r0 in range(0, oh, strip):
        r1 = min(oh, r0 + strip)
        sh = r1 - r0
        inputs, steps, types = [], [], {"out": VecType.INT32, "w": VecType.INT32, "p": VecType.INT32}
        for ry, wy in ((iy0, wy0), (iy1, wy1)):
            rows = gather(x, (n, ih, iw, c), 1, ry[r0:r1])
            wy_c = b.const(wy[r0:r1].reshape(1, sh, 1, 1), "int32")
            for rx, wx_c in zip((ix0, ix1), wx):
                term = gather(rows, (n, sh, iw, c), 2, rx)
                k = len(inputs)
                inputs += [term, wy_c, wx_c]
                types.update({f"in{k}": VecType.INT8, f"in{k + 1}": VecType.INT32, f"in{k + 2}": VecType.INT32})
                steps += [Step("VRESCALE", rescale, (f"in{k}",), "w"),
                          Step("VALU", {"op": ValuOp.MUL, "dtype": VecType.INT32, "imm0": 0}, ("w", f"in{k + 1}"),
                               "p"),
                          Step("VALU", {"op": ValuOp.MUL, "dtype": VecType.INT32, "imm0": 0}, ("p", f"in{k + 2}"),
                               "p"),
                          Step("VALU", {"op": ValuOp.ADD if k else ValuOp.COPY, "dtype": VecType.INT32},
                               ("out", "p") if k else ("p",), "out")]
        dst = out
        if sh < oh:      # the strip's rows of the output buffer
            dst = f"{out}[{r0}:{r1}]"
            b.walk.alias(dst, Ref(out, offset=(0, r0, 0, 0), window=True), (n, sh, ow, c))
        b.layer(EltLayer(f"{b.base}.l{b.count}", inputs, dst, (n, sh, ow, c), types,
                         {"w": "ASRAM", "p": "ASRAM"}, steps, params=np.array([[1], [0]], np.int64)))
        b.count += 1


def _int8_strip_rows(config, n: int, iw: int, ow: int, c: int, oh: int) -> int:
    """Output rows per strip of int8 BILINEAR: its gathers (two row gathers, four neighbour
    tensors: int8, channels padded to whole vectors) within ``ext_mem_bytes / STRIP_SHARE``,
    so a large upscale needs little more external memory than its int32 output."""
    c_bytes = -(-c // config.bus_bytes) * config.bus_bytes
    per_row = n * (2 * iw + 4 * ow) * c_bytes
    return max(1, min(oh, config.ext_mem_bytes // STRIP_SHARE // per_row))


def reduce_long(walk, op: Operator) -> bool:
    """Lower the REDUCE_* ``op`` by splitting when its axis is longer than one window; False
    (nothing done) otherwise, leaving checks and errors to compiler/kinds/reduce/layer.py."""
    xt = walk.block.tensor(op.inputs[0])
    axis = op.attrs.get("axis")
    if xt.dtype not in VEC_TYPES or axis is None or not 0 <= int(axis) < len(xt.shape) or \
            any(d < 0 for d in xt.shape) or xt.shape[int(axis)] <= WINDOW_MAX:
        return False
    b = _Builder(walk, op)
    # The split views the input in the rows layout: a brick input is copied there first.
    x = walk.require_vec(op, op.inputs[0]) if walk.is_rows(op.inputs[0]) else rows_copy(walk, op, op.inputs[0])
    r = split_reduce(b, x, int(axis), REDUCE_OPS[op.op], VEC_TYPES[xt.dtype], xt.dtype)
    y = op.outputs[0]
    shape = tuple(walk.block.tensor(y).shape)
    s4 = shape4(shape)
    if xt.dtype == "int8" and s4 is not None and walk.needs_brick(y):
        # A brick reader (convolution, pool): the result copied into bricks.
        walk.new_root(y, s4, "computed")
        b.layer(brick_rows_layer(f"{b.base}.l{b.count}", y, r, BrickView(y, 0, s4, dense_strides(s4, walk.lanes),
                                                                        walk.lanes), False, [], ""))
        return True
    walk.alias(y, Ref(r), shape)
    return True
