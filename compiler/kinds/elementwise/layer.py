"""Elementwise operators as :class:`EltLayer` s: small programs of vector-unit steps
(VALU, VRESCALE) over tiles of the output, lowered by compiler/kinds/elementwise/lower.py.

Every TOSA elementwise operator of the integer profile maps to one or two steps:

=========================================  ====================================================
ADD SUB MUL(shift) shifts BITWISE_* MIN/MAX  one VALU of the input type (MUL: int32 result,
LOGICAL_* EQUAL GREATER GREATER_EQUAL        shift in ``imm0``; ARITHMETIC_RIGHT_SHIFT: round
ABS CLZ BITWISE_NOT LOGICAL_NOT SELECT       in ``imm0``); bool is int8 0/1
NEGATE                                       VALU NEGATE (zero points in ``imm0``/``imm1``)
CLAMP                                        VALU CLAMP (bounds in ``imm0``/``imm1``)
RESCALE                                      VRESCALE (every mode; per-channel parameters in
                                             PSRAM, one row pair per vector column)
CAST to bool                                 VALU LOGICAL_OR(x, x)
CAST widening (bool/int8/int16 -> wider)     VRESCALE by 1 (exact)
CAST narrowing                               VALU COPY into ACC (sign-extended), VALU COPY
                                             of the narrow type out of ACC (low bits: the
                                             spec's truncation)
=========================================  ====================================================

Operands broadcast as the spec says (shapes right-aligned, size-1 axes repeat); the
lowering turns broadcasting into zero strides, and an innermost axis of size 1 into VALU's
lane-0 broadcast.  Parameters that must be known when compiling (MUL's shift, zero points,
RESCALE's multipliers and shifts, CLAMP's bounds) must be constant tensors (TOSA 1.0) or
attributes (draft); otherwise Unsupported says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa.instructions import TableMode, ValuOp, VecType
from isa.vector import table_image
from tosa_ir import Block, Operator
from tosa_ir.errors import Unsupported

from compiler.core.ir import MultiInputLayer
from compiler.core.views import shape4
from compiler.core.errors import invalid, unsupported

BINARY = {
    "ADD": ValuOp.ADD, "SUB": ValuOp.SUB, "MUL": ValuOp.MUL,
    "ARITHMETIC_RIGHT_SHIFT": ValuOp.ARITHMETIC_RIGHT_SHIFT,
    "LOGICAL_LEFT_SHIFT": ValuOp.LOGICAL_LEFT_SHIFT, "LOGICAL_RIGHT_SHIFT": ValuOp.LOGICAL_RIGHT_SHIFT,
    "BITWISE_AND": ValuOp.BITWISE_AND, "BITWISE_OR": ValuOp.BITWISE_OR, "BITWISE_XOR": ValuOp.BITWISE_XOR,
    "MINIMUM": ValuOp.MINIMUM, "MAXIMUM": ValuOp.MAXIMUM,
    "EQUAL": ValuOp.EQUAL, "GREATER": ValuOp.GREATER, "GREATER_EQUAL": ValuOp.GREATER_EQUAL,
    "LOGICAL_AND": ValuOp.LOGICAL_AND, "LOGICAL_OR": ValuOp.LOGICAL_OR, "LOGICAL_XOR": ValuOp.LOGICAL_XOR,
}
UNARY = {"BITWISE_NOT": ValuOp.BITWISE_NOT, "LOGICAL_NOT": ValuOp.LOGICAL_NOT, "ABS": ValuOp.ABS,
         "CLZ": ValuOp.CLZ}
ELEMENTWISE_OPS = tuple(BINARY) + tuple(UNARY) + ("SELECT", "NEGATE", "CLAMP", "RESCALE", "CAST", "TABLE", "INTDIV")

ARITY = {"SELECT": (3,), "NEGATE": (1, 3), "RESCALE": (1, 5), "TABLE": (1, 2)}     # inputs (others: BINARY 2, else 1)

# TOSA element type -> vector element type (unsigned RESCALE types are chosen per operator).
VEC_TYPES = {"bool": VecType.INT8, "int8": VecType.INT8, "int16": VecType.INT16, "int32": VecType.INT32}
ELEMENT_BYTES = {"bool": 1, "int8": 1, "int16": 2, "int32": 4}
IMM_RANGE = (-(1 << 15), (1 << 15) - 1)     # VALU imm0/imm1


@dataclass
class Step:
    """One vector instruction per tile.

    ``name``: "VALU" or "VRESCALE"; ``fields``: its fields other than loops, memories,
    addresses and strides (op, dtype, immediates; VRESCALE types, zero points, flags);
    ``srcs``: operands read, each ``"in<k>"`` (layer input ``k``) or a temporary;
    ``dst``: ``"out"`` or a temporary.  A VRESCALE reads its parameter row pair from
    PSRAM row ``2 * column`` (per-channel: the vector column along the innermost axis), or,
    with ``param`` = k, the per-tensor pair ``k`` of the layer's ``scalar_params`` (a merged
    chain's other rescales: compiler/kinds/elementwise/fusion.py).
    """

    name: str
    fields: dict
    srcs: tuple[str, ...]
    dst: str
    param: int | None = None


@dataclass
class EltLayer(MultiInputLayer):
    """An elementwise layer: ``output = steps(inputs)`` with broadcasting.

    Attributes
    ----------
    name : str
        ``elt0``, ...
    inputs : list of str
        Tensors read (graph names; constants included).
    output : str
    out_shape : tuple of int
        The graph's output shape (rank 0 as ``()``).
    types : dict
        Vector element type of every operand name (``in<k>``, temporaries, ``out``).
    temps : dict
        Temporary -> memory (``"ASRAM"`` or ``"ACC"``).
    steps : list of Step
    windows : dict
        Input index -> (offset, step, shape): the input is read as the strided window of
        ``shape`` starting at element ``offset`` and stepping ``step`` along each axis
        (DEPTHWISE_CONV2D's kernel taps); the innermost axis is never offset nor stepped.
    table : bytes or None
        TABLE's table as TSRAM holds it, installed once before the tiles.
    params : ndarray of int64, shape (2 * columns, lanes) or None
        VRESCALE parameter rows (multiplier, shift per vector column).
    per_channel : bool
        The VRESCALE parameters differ per vector column.
    scalar_params : list of (multiplier, shift)
        Per-tensor parameter pairs of steps with ``param`` set, in PSRAM after ``params``.
    """

    name: str
    inputs: list[str]
    output: str
    out_shape: tuple[int, ...]
    types: dict[str, VecType]
    temps: dict[str, str]
    steps: list[Step]
    params: np.ndarray | None = None
    per_channel: bool = False
    table: bytes | None = None        # TABLE: the TSRAM image (isa.vector.table_image)
    windows: dict = field(default_factory=dict)
    consts: list = field(default_factory=list)     # (name, array): constants the layer made
    scalar_params: list = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    location: str = ""

    macs = 0


# -- parameters ------------------------------------------------------------------------------
def _param(op: Operator, block: Block, index: int, names: tuple[str, ...], default=None) -> np.ndarray:
    """A compile-time parameter: constant input tensor ``index`` (TOSA 1.0) or attribute."""
    if len(op.inputs) > index and op.inputs[index]:
        tensor = block.tensors.get(op.inputs[index])
        if tensor is None:
            raise invalid(op, f"input {op.inputs[index]!r} is not declared")
        if not tensor.is_const:
            raise unsupported(op, f"{names[0]} ({op.inputs[index]!r}) must be a constant tensor: the "
                                  f"NPU program takes it as an instruction field or a parameter row")
        return np.asarray(tensor.data).astype(np.int64)
    for name in names:
        if name in op.attrs and op.attrs[name] is not None:
            return np.asarray(op.attrs[name]).astype(np.int64)
    if default is None:
        raise invalid(op, f"missing {names[0]}")
    return np.asarray(default, np.int64)


def _scalar(op, block, index, names, default=None) -> int:
    return int(_param(op, block, index, names, default).reshape(-1)[0])


def _imm(op: Operator, what: str, value: int) -> int:
    if not IMM_RANGE[0] <= value <= IMM_RANGE[1]:
        raise unsupported(op, f"{what} {value} does not fit VALU's 16-bit immediate")
    return value


def _enum_name(value) -> str:
    return str(value).rsplit(".", 1)[-1].upper()


def _vtype(op: Operator, dtype: str, what: str) -> VecType:
    if dtype not in VEC_TYPES:
        raise unsupported(op, f"{what} is {dtype}; the vector unit computes on bool, int8, int16 and "
                              f"int32 (int48 tensors are not supported yet)")
    return VEC_TYPES[dtype]


# -- the operators ---------------------------------------------------------------------------
def elementwise_layer(op: Operator, block: Block, name: str) -> EltLayer:
    """The :class:`EltLayer` of ``op`` (one of ELEMENTWISE_OPS); inputs named as in the graph.
    Constant parameter inputs (shift, zero points, multipliers) are not layer inputs."""
    kind = op.op
    arity = ARITY.get(kind, (1,)) if kind not in BINARY else ((2, 3) if kind == "MUL" else (2,))
    if kind == "INTDIV":
        arity = (2,)
    if len(op.inputs) not in arity or len(op.outputs) != 1:
        raise invalid(op, f"{len(op.inputs)} inputs and {len(op.outputs)} outputs; {kind} takes "
                          f"{' or '.join(map(str, arity))} inputs and 1 output")
    out = block.tensor(op.outputs[0])
    out_t = _vtype(op, out.dtype, "the output")

    def layer(inputs, steps, types, temps=None, params=None, per_channel=False) -> EltLayer:
        types = dict(types)
        types.setdefault("out", out_t)
        return EltLayer(name, list(inputs), op.outputs[0], tuple(out.shape), types, temps or {}, steps,
                        params, per_channel, ops=[op.describe()], location=op.location)

    def in_type(k):
        return _vtype(op, block.tensor(op.inputs[k]).dtype, f"input {k}")

    if kind in BINARY:
        t = in_type(0)
        fields = {"op": BINARY[kind], "dtype": t}
        if kind == "MUL":
            shift = _scalar(op, block, 2, ("shift",), 0)
            if not 0 <= shift <= 63:
                raise invalid(op, f"shift {shift} is outside 0..63")
            fields["imm0"] = shift
        if kind == "ARITHMETIC_RIGHT_SHIFT":
            fields["imm0"] = int(bool(op.attrs.get("round", False)))
        return layer(op.inputs[:2], [Step("VALU", fields, ("in0", "in1"), "out")],
                     {"in0": t, "in1": in_type(1)})
    if kind in UNARY:
        t = in_type(0)
        return layer(op.inputs[:1], [Step("VALU", {"op": UNARY[kind], "dtype": t}, ("in0",), "out")], {"in0": t})
    if kind == "SELECT":
        t = in_type(1)
        return layer(op.inputs[:3], [Step("VALU", {"op": ValuOp.SELECT, "dtype": t}, ("in0", "in1", "in2"), "out")],
                     {"in0": VecType.INT8, "in1": t, "in2": in_type(2)})
    if kind == "NEGATE":
        t = in_type(0)
        izp = _scalar(op, block, 1, ("input1_zp", "input_zp"), 0)
        ozp = _scalar(op, block, 2, ("output_zp",), 0)
        fields = {"op": ValuOp.NEGATE, "dtype": t, "imm0": _imm(op, "input1_zp", izp),
                  "imm1": _imm(op, "output_zp", ozp)}
        return layer(op.inputs[:1], [Step("VALU", fields, ("in0",), "out")], {"in0": t})
    if kind == "CLAMP":
        t = in_type(0)
        lo = _clamp_bound(op, ("min_val", "min_int"), block.tensor(op.inputs[0]).dtype)
        hi = _clamp_bound(op, ("max_val", "max_int"), block.tensor(op.inputs[0]).dtype)
        fields = {"op": ValuOp.CLAMP, "dtype": t, "imm0": _imm(op, "min_val", lo), "imm1": _imm(op, "max_val", hi)}
        return layer(op.inputs[:1], [Step("VALU", fields, ("in0",), "out")], {"in0": t})
    if kind == "CAST":
        src = block.tensor(op.inputs[0]).dtype
        t = in_type(0)
        if out.dtype == "bool":
            step = Step("VALU", {"op": ValuOp.LOGICAL_OR, "dtype": t}, ("in0", "in0"), "out")
            return layer(op.inputs[:1], [step], {"in0": t})
        if ELEMENT_BYTES[out.dtype] >= ELEMENT_BYTES[src]:
            # Widening (or bool -> int8: the same bytes): a VRESCALE by 1 is exact.
            step = Step("VRESCALE", dict(in_type=t, out_type=out_t, per_channel=0, scale32=1, double_round=0,
                                         in_zp=0, out_zp=0, clamp=0), ("in0",), "out")
            return layer(op.inputs[:1], [step], {"in0": t}, params=_unit_params())
        steps = [Step("VALU", {"op": ValuOp.COPY, "dtype": t}, ("in0",), "wide"),
                 Step("VALU", {"op": ValuOp.COPY, "dtype": out_t}, ("wide",), "out")]
        return layer(op.inputs[:1], steps, {"in0": t, "wide": out_t}, temps={"wide": "ACC"})
    if kind == "RESCALE":
        return _rescale(op, block, layer)
    if kind == "INTDIV":
        return _intdiv(op, block, name, layer)
    if kind == "TABLE":
        t = in_type(0)
        mode = {VecType.INT8: TableMode.INT8, VecType.INT16: TableMode.INT16}.get(t)
        if mode is None:
            raise unsupported(op, f"TABLE of {block.tensor(op.inputs[0]).dtype}; the table unit looks up "
                                  f"int8 and int16")
        values = _param(op, block, 1, ("table",)).reshape(-1)
        try:
            image = table_image(mode, values)
        except ValueError as e:
            raise invalid(op, str(e)) from None
        step = Step("TABLE", {"mode": mode, "t_addr": 0}, ("in0",), "out")
        result = layer(op.inputs[:1], [step], {"in0": t})
        result.table = image
        return result
    raise unsupported(op, "not an elementwise operator")


def _clamp_bound(op: Operator, names: tuple[str, ...], dtype: str) -> int:
    """CLAMP's bound: a number (draft) or the bytes of a value of the input type (TOSA 1.0)."""
    value = next((op.attrs[n] for n in names if op.attrs.get(n) is not None), None)
    if value is None:
        raise invalid(op, f"missing {names[0]}")
    if isinstance(value, (bytes, bytearray)) or (isinstance(value, np.ndarray) and value.dtype == np.uint8
                                                 and value.ndim == 1):
        raw = bytes(bytearray(value) if isinstance(value, (bytes, bytearray)) else value.tobytes())
        size = ELEMENT_BYTES[dtype]
        if len(raw) < size:
            raise invalid(op, f"{names[0]} holds {len(raw)} bytes, not a {dtype}")
        return int(np.frombuffer(raw[:size], dtype=f"<i{size}")[0])
    return int(np.asarray(value).reshape(-1)[0])


def _unit_params() -> np.ndarray:
    return np.array([[1], [0]], np.int64)


def _rescale(op: Operator, block: Block, layer) -> EltLayer:
    x = block.tensor(op.inputs[0])
    y = block.tensor(op.outputs[0])
    if y.dtype == "int48" or any(t.dtype.startswith(("fp", "bf")) for t in (x, y)):
        raise unsupported(op, f"{x.dtype} -> {y.dtype}: the vector unit writes no int48 vectors")
    in_u = bool(op.attrs.get("input_unsigned", False)) or x.dtype.startswith("uint")
    out_u = bool(op.attrs.get("output_unsigned", False)) or y.dtype.startswith("uint")
    base_in, base_out = x.dtype.replace("uint", "int"), y.dtype.replace("uint", "int")
    unsigned = {"int8": VecType.UINT8, "int16": VecType.UINT16}
    if (in_u and base_in not in unsigned) or (out_u and base_out not in unsigned):
        raise invalid(op, f"unsigned {base_in if in_u else base_out} is not a RESCALE type")
    # int48 (held as int64 in memory): the lowering brings it into ACC as VRESCALE reads it.
    t_in = unsigned[base_in] if in_u else VecType.INT48 if base_in == "int48" else _vtype(op, base_in, "the input")
    t_out = unsigned[base_out] if out_u else _vtype(op, base_out, "the output")
    scale32 = bool(op.attrs.get("scale32", True))
    if op.attrs.get("rounding_mode") is not None:
        double = _enum_name(op.attrs["rounding_mode"]) == "DOUBLE_ROUND"
    else:
        double = bool(op.attrs.get("double_round", False))
    per_channel = bool(op.attrs.get("per_channel", False))
    mul = _param(op, block, 1, ("multiplier",)).reshape(-1)
    shift = _param(op, block, 2, ("shift",)).reshape(-1)
    izp = _scalar(op, block, 3, ("input_zp",), 0)
    ozp = _scalar(op, block, 4, ("output_zp",), 0)
    # Zero points are values of the (signless) data type: unsigned ones read zero-extended.
    if in_u:
        izp &= (1 << (8 if base_in == "int8" else 16)) - 1
    if out_u:
        ozp &= (1 << (8 if base_out == "int8" else 16)) - 1
    fields = dict(in_type=t_in, out_type=t_out, per_channel=int(per_channel), scale32=int(scale32),
                  double_round=int(double and scale32), in_zp=izp, out_zp=ozp, clamp=0)
    step = Step("VRESCALE", fields, ("in0",), "out")
    params = np.stack([mul, shift]) if per_channel else np.stack([mul[:1], shift[:1]])
    return layer(op.inputs[:1], [step], {"in0": t_in, "out": t_out}, params=params, per_channel=per_channel)


def check_broadcast(op: Operator, shapes: list[tuple[int, ...]], out_shape: tuple[int, ...]) -> None:
    """InvalidInput unless every input broadcasts to ``out_shape`` (the spec's rules: equal
    ranks, each axis equal to the output's or 1)."""
    for k, s in enumerate(shapes):
        if len(s) != len(out_shape):
            raise invalid(op, f"input {k} has rank {len(s)}, the output {len(out_shape)}")
        for a, b in zip(s, out_shape):
            if a != b and a != 1:
                raise invalid(op, f"input {k} of shape {list(s)} does not broadcast to {list(out_shape)}")
    if any(d < 0 for d in out_shape) or any(d < 0 for s in shapes for d in s):
        raise Unsupported(f"{op.op} at {op.location}: unknown dimensions")


def _intdiv(op: Operator, block: Block, name: str, layer) -> EltLayer:
    """INTDIV (int32, truncating) by restoring long division of the magnitudes, one quotient
    bit per round of VALU operations (the vector unit has no divider):

        ua, ub = |a|, |b| (as 32-bit unsigned patterns: |INT_MIN| is 0x80000000)
        32 times: top = ua >>> 31; ua <<= 1; r = (r << 1) | top
                  ge = r >=u ub  (signed compare of both XOR INT_MIN)
                  r = ge ? r - ub : r;  q = ge ? (q << 1) + 1 : q << 1
        result = (a ^ b) < 0 ? 0 - q : q    (wrapping)

    The 32 rounds are the same instructions, so the loop pass folds them into a LOOP."""
    if block.tensor(op.inputs[0]).dtype != "int32" or block.tensor(op.inputs[1]).dtype != "int32":
        raise unsupported(op, "INTDIV is int32 only")
    rank = len(block.tensor(op.outputs[0]).shape)
    consts = {"one": 1, "c31": 31, "msb": -(1 << 31), "zero": 0}
    names = [op.inputs[0], op.inputs[1]]
    src = {}
    made = []
    for key, value in consts.items():
        src[key] = f"in{len(names)}"
        names.append(f"{name}.{key}")
        made.append((names[-1], np.full((1,) * rank, value, np.int32)))
    i32 = VecType.INT32

    def v(op_, a, b=None, c=None, dst="r", dtype=i32):
        return Step("VALU", {"op": op_, "dtype": dtype}, tuple(x for x in (a, b, c) if x is not None), dst)

    steps = [v(ValuOp.ABS, "in0", dst="ua"), v(ValuOp.ABS, "in1", dst="ub"),
             v(ValuOp.BITWISE_XOR, "ub", src["msb"], dst="ubm"),
             v(ValuOp.BITWISE_XOR, "ua", "ua", dst="r"), v(ValuOp.BITWISE_XOR, "ua", "ua", dst="q")]
    for _ in range(32):
        steps += [v(ValuOp.LOGICAL_RIGHT_SHIFT, "ua", src["c31"], dst="t"),
                  v(ValuOp.LOGICAL_LEFT_SHIFT, "ua", src["one"], dst="ua"),
                  v(ValuOp.LOGICAL_LEFT_SHIFT, "r", src["one"], dst="r"),
                  v(ValuOp.BITWISE_OR, "r", "t", dst="r"),
                  v(ValuOp.BITWISE_XOR, "r", src["msb"], dst="t"),
                  v(ValuOp.GREATER_EQUAL, "t", "ubm", dst="ge"),
                  v(ValuOp.SUB, "r", "ub", dst="t"),
                  v(ValuOp.SELECT, "ge", "t", "r", dst="r"),
                  v(ValuOp.LOGICAL_LEFT_SHIFT, "q", src["one"], dst="q"),
                  v(ValuOp.ADD, "q", src["one"], dst="t"),
                  v(ValuOp.SELECT, "ge", "t", "q", dst="q")]
    steps += [v(ValuOp.BITWISE_XOR, "in0", "in1", dst="t"),
              v(ValuOp.GREATER, src["zero"], "t", dst="ge"),
              v(ValuOp.SUB, src["zero"], "q", dst="t"),          # wrapping: |INT_MIN| negates back
              v(ValuOp.SELECT, "ge", "t", "q", dst="out")]
    types = {f"in{k}": i32 for k in range(len(names))}
    types.update({t: i32 for t in ("ua", "ub", "ubm", "r", "q", "t")}, ge=VecType.INT8)
    temps = {t: "ASRAM" for t in ("ua", "ub", "ubm", "r", "q", "t", "ge")}
    result = layer(names, steps, types, temps=temps)
    result.consts = made
    return result


def select_elementwise(walk, op: Operator) -> None:
    """Add the layer of elementwise ``op`` to the dataflow walk (compiler/core/dataflow.py
    ``Walk``): inputs as vector operands, the result in rows or, when a reader needs them, bricks."""
    layer = elementwise_layer(op, walk.block, walk.new_name("elt"))
    out = walk.block.tensor(op.outputs[0])
    made = {name for name, _ in layer.consts}
    check_broadcast(op, [tuple(walk.block.tensor(n).shape) for n in layer.inputs if n not in made],
                    tuple(out.shape))
    for name, data in layer.consts:
        walk.new_root(name, data.shape, "const", layout="rows", dtype=str(data.dtype), data=data)
    layer.inputs = [walk.require_vec(op, n) for n in layer.inputs]
    if walk.wants_rows(op.outputs[0]):
        walk.new_root(op.outputs[0], tuple(out.shape), "computed", layout="rows", dtype=out.dtype)
    else:
        walk.new_root(op.outputs[0], shape4(out.shape), "computed")
    walk.flow.layers.append(layer)
