"""The TOSA flatbuffer schema (``tosa.fbs`` of tosa-tools 2026.8, TOSA 1.0/1.1), as data.

Only what reading and writing need: enum value names, and per table its fields in
declaration order.  A field's vtable slot is its index in that order, except that a
union field takes two slots (its type byte, then the table offset), as flatc lays it out.
Field types are spelled as in ``tosa.fbs`` (``int32``, ``bool``, ``[int32]``, ``string``,
an enum or table name, ...) so the description can be checked against the schema file
(tests/test_tosa_fb.py does).  ``/8`` after a type marks ``force_align: 8`` vectors.
"""
from __future__ import annotations

from dataclasses import dataclass

FILE_IDENTIFIER = b"TOSA"

# The serialisation-library release whose tosa.fbs this module describes.  Files record
# the writer's release in ``TosaGraph.software_version`` and the oldest release that may
# read them in ``compatibility.min_reader_version``; the official loader warns about
# files without them.  We write what that release's own serializer writes.
SOFTWARE_VERSION = (2026, 8, 0, "")

# Enums: value -> name.  All are uint32 in the schema.
DTYPE = dict(enumerate(
    "UNKNOWN BOOL INT4 INT8 INT16 INT32 INT48 FP32 FP16 BF16 SHAPE FP8E4M3 FP8E5M2 "
    "FP6E2M3 FP6E3M2 FP4E2M1 FP8UE8M0 INT64 MXINT8".split()))
RESIZE_MODE = dict(enumerate("UNKNOWN NEAREST BILINEAR".split()))
NAN_PROPAGATION_MODE = dict(enumerate("UNKNOWN PROPAGATE IGNORE".split()))
ROUNDING_MODE = dict(enumerate("UNKNOWN SINGLE_ROUND INEXACT_ROUND DOUBLE_ROUND".split()))
BLOCK_SIZE = {0: "UNKNOWN", 1: "BLOCK_SIZE_1", 32: "BLOCK_SIZE_32"}
BLOCK_SHAPE = {0: "UNKNOWN", 32: "BLOCK_SHAPE_32"}

ENUMS = {
    "DType": DTYPE,
    "ResizeMode": RESIZE_MODE,
    "NanPropagationMode": NAN_PROPAGATION_MODE,
    "RoundingMode": ROUNDING_MODE,
    "BlockSize": BLOCK_SIZE,
    "BlockShape": BLOCK_SHAPE,
}

# Operators in Op enum order (Op value = line number, from 1), each with the fields of
# its attribute table.  The Attribute union lists the tables in the same order, so the
# union type of an operator's attribute equals its Op value.  The table is named
# <Name>Attribute.
_OPS = """
ARGMAX                  ArgMax                  axis:int32 nan_mode:NanPropagationMode
AVG_POOL2D              AvgPool2d               kernel:[int32] stride:[int32] pad:[int32] acc_type:DType
CONV2D                  Conv2d                  pad:[int32] stride:[int32] dilation:[int32] local_bound:bool acc_type:DType
CONV3D                  Conv3d                  pad:[int32] stride:[int32] dilation:[int32] local_bound:bool acc_type:DType
DEPTHWISE_CONV2D        DepthwiseConv2d         pad:[int32] stride:[int32] dilation:[int32] local_bound:bool acc_type:DType
FFT2D                   FFT2d                   inverse:bool local_bound:bool
MATMUL                  MatMul
MAX_POOL2D              MaxPool2d               kernel:[int32] stride:[int32] pad:[int32] nan_mode:NanPropagationMode
RFFT2D                  RFFT2d                  local_bound:bool
TRANSPOSE_CONV2D        TransposeConv2d         out_pad:[int32] stride:[int32] local_bound:bool acc_type:DType
CLAMP                   Clamp                   min_val:[ubyte]/8 max_val:[ubyte]/8 nan_mode:NanPropagationMode
ERF                     Erf
SIGMOID                 Sigmoid
TANH                    Tanh
ADD                     Add
ARITHMETIC_RIGHT_SHIFT  ArithmeticRightShift    round:bool
BITWISE_AND             BitwiseAnd
BITWISE_OR              BitwiseOr
BITWISE_XOR             BitwiseXor
INTDIV                  IntDiv
LOGICAL_AND             LogicalAnd
LOGICAL_LEFT_SHIFT      LogicalLeftShift
LOGICAL_RIGHT_SHIFT     LogicalRightShift
LOGICAL_OR              LogicalOr
LOGICAL_XOR             LogicalXor
MAXIMUM                 Maximum                 nan_mode:NanPropagationMode
MINIMUM                 Minimum                 nan_mode:NanPropagationMode
MUL                     Mul
POW                     Pow
SUB                     Sub
TABLE                   Table
ABS                     Abs
BITWISE_NOT             BitwiseNot
CEIL                    Ceil
CLZ                     Clz
COS                     Cos
EXP                     Exp
FLOOR                   Floor
LOG                     Log
LOGICAL_NOT             LogicalNot
NEGATE                  Negate
RECIPROCAL              Reciprocal
RSQRT                   Rsqrt
SIN                     Sin
SELECT                  Select
EQUAL                   Equal
GREATER                 Greater
GREATER_EQUAL           GreaterEqual
REDUCE_ALL              ReduceAll               axis:int32
REDUCE_ANY              ReduceAny               axis:int32
REDUCE_MAX              ReduceMax               axis:int32 nan_mode:NanPropagationMode
REDUCE_MIN              ReduceMin               axis:int32 nan_mode:NanPropagationMode
REDUCE_PRODUCT          ReduceProduct           axis:int32
REDUCE_SUM              ReduceSum               axis:int32
CONCAT                  Concat                  axis:int32
PAD                     Pad
RESHAPE                 Reshape
REVERSE                 Reverse                 axis:int32
SLICE                   Slice
TILE                    Tile
TRANSPOSE               Transpose               perms:[int32]
GATHER                  Gather
SCATTER                 Scatter
RESIZE                  Resize                  mode:ResizeMode
CAST                    Cast
RESCALE                 Rescale                 scale32:bool rounding_mode:RoundingMode per_channel:bool input_unsigned:bool output_unsigned:bool
CONST                   Const
IDENTITY                Identity
CUSTOM                  Custom                  operator_name:string domain_name:string implementation_attrs:[ubyte]
COND_IF                 CondIf                  then_graph:string else_graph:string
WHILE_LOOP              WhileLoop               cond_graph:string body_graph:string
VARIABLE                Variable
VARIABLE_WRITE          VariableWrite
VARIABLE_READ           VariableRead
CONST_SHAPE             ConstShape
MATMUL_T_BLOCK_SCALED   MatMulTBlockScaled      block_size:BlockSize
CAST_FROM_BLOCK_SCALED  CastFromBlockScaled     block_size:BlockSize
CAST_TO_BLOCK_SCALED    CastToBlockScaled       block_size:BlockSize
DIM                     Dim                     axis:int32
CONCAT_SHAPE            ConcatShape
ADD_SHAPE               AddShape
SUB_SHAPE               SubShape
MUL_SHAPE               MulShape
SLICE_SHAPE             SliceShape
EXP2_SHAPE              Exp2Shape
LOG2_CEIL_SHAPE         Log2CeilShape
LOG2_FLOOR_SHAPE        Log2FloorShape
MAX_SHAPE               MaxShape
MIN_SHAPE               MinShape
MOD_SHAPE               ModShape
DIV_CEIL_SHAPE          DivCeilShape
DIV_FLOOR_SHAPE         DivFloorShape
ASSERT_EQUAL_SHAPE      AssertEqualShape        allow_broadcast:bool
CONV2D_BLOCK_SCALED     Conv2dBlockScaled       block_size:BlockSize
MAX_POOL2D_ADAPTIVE     MaxPool2dAdaptive       nan_mode:NanPropagationMode
AVG_POOL2D_ADAPTIVE     AvgPool2dAdaptive       acc_type:DType
RESHAPE_BLOCK_SCALED    ReshapeBlockScaled      block_size:BlockSize
ROW_GATHER_BLOCK_SCALED RowGatherBlockScaled    block_size:BlockSize
ROW_GATHER              RowGather
MATMUL_T                MatMulT
"""

# The tables that hold the graph itself.  ``Attribute`` is the operator attribute union.
_TABLES = {
    "Version": "_major:int32=-1 _minor:int32=-1 _patch:int32=-1 _draft:bool=true",
    "SoftwareVersion": "_major:int32=-1 _minor:int32=-1 _micro:int32=-1 _modifier:string",
    "SerializationCompatibility": "min_reader_version:SoftwareVersion features:uint64",
    "TosaTensor": (
        "name:string shape:[int32] type:DType data:[ubyte]/8 variable:bool is_unranked:bool "
        "variable_name:string offset:ulong size:ulong scale_type:DType scale_data:[ubyte]/8 "
        "block_shape:BlockShape scale_offset:ulong scale_size:ulong"),
    "TosaShape": "name:string rank:uint32 data:[ubyte]/8",
    "OpLocation": "text:string",
    "TosaOperator": "op:Op attribute:Attribute inputs:[string] outputs:[string] location:OpLocation",
    "TosaBasicBlock": (
        "name:string operators:[TosaOperator] tensors:[TosaTensor] inputs:[string] "
        "outputs:[string] shapes:[TosaShape]"),
    "TosaRegion": "name:string blocks:[TosaBasicBlock]",
    "TosaGraph": (
        "version:Version regions:[TosaRegion] software_version:SoftwareVersion "
        "compatibility:SerializationCompatibility"),
}

# Scalar types: struct format and size.
SCALARS = {
    "bool": ("<B", 1), "ubyte": ("<B", 1), "uint8": ("<B", 1), "int32": ("<i", 4),
    "uint32": ("<I", 4), "ulong": ("<Q", 8), "uint64": ("<Q", 8),
}


@dataclass(frozen=True)
class Field:
    """One table field: name, schema type, vtable slot, default, and vector alignment."""

    name: str
    type: str
    slot: int
    default: object = None
    align: int = 0  # force_align of a vector; 0 = natural

    @property
    def is_vector(self) -> bool:
        return self.type.startswith("[")

    @property
    def element(self) -> str:
        return self.type[1:-1] if self.is_vector else self.type


def _parse_fields(spec: str) -> tuple[Field, ...]:
    fields, slot = [], 0
    for item in spec.split():
        name, _, ftype = item.partition(":")
        ftype, _, default = ftype.partition("=")
        ftype, _, align = ftype.partition("/")
        if default == "true":
            value: object = True
        elif default:
            value = int(default)
        elif ftype == "bool":
            value = False
        elif ftype in SCALARS or ftype in ENUMS or ftype == "Op":
            value = 0
        else:
            value = None
        fields.append(Field(name, ftype, slot, value, int(align or 0)))
        slot += 2 if ftype == "Attribute" else 1
    return tuple(fields)


TABLES: dict[str, tuple[Field, ...]] = {name: _parse_fields(s) for name, s in _TABLES.items()}

OP_NAMES: dict[int, str] = {0: "UNKNOWN"}
OP_CODES: dict[str, int] = {}
# Operator name -> (attribute table name, its fields).
OP_ATTRIBUTES: dict[str, tuple[str, tuple[Field, ...]]] = {}
for _code, _line in enumerate(_OPS.strip().splitlines(), start=1):
    _op, _table, *_fields = _line.split()
    OP_NAMES[_code] = _op
    OP_CODES[_op] = _code
    OP_ATTRIBUTES[_op] = (_table + "Attribute", _parse_fields(" ".join(_fields)))
    TABLES[_table + "Attribute"] = OP_ATTRIBUTES[_op][1]
ENUMS["Op"] = OP_NAMES
del _code, _line, _op, _table, _fields

ATTRIBUTE_TABLE_BY_UNION = {code: OP_ATTRIBUTES[op][0] for op, code in OP_CODES.items()}
