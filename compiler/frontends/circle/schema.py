"""The TFLite / Circle flatbuffer schema, as data: just what the Circle frontend reads.

``.tflite`` (file identifier ``TFL3``) and ``.circle`` (``CIR0``) files share one layout:
the seed ``circle_schema.fbs`` (Circle 0, from TFLite 1.13) is a prefix of today's TFLite
schema, whose later fields (``OperatorCode.builtin_code``, ``quantized_dimension``,
``Buffer.offset``/``size``, ...) are appended at the end of their tables, so one field
table serves both.  A field's vtable slot is its index in declaration order; a union takes
two slots (type byte, then the table offset), as flatc lays it out.

Types are spelled as in the ``.fbs`` files (``byte``, ``int``, ``[float]``, ``string``, a
table name, ``[Table]``; ``union:Name`` for a union whose tables are named by
:data:`BUILTIN_OPTIONS`).  ``=value`` gives a non-zero default.  Tests check the slots and
the enum values against the generated bindings of the ``circle-schema`` package.
"""
from __future__ import annotations

from dataclasses import dataclass

from tosa_ir._fb import schema

FILE_IDENTIFIERS = {b"TFL3": "tflite", b"CIR0": "circle"}

# TensorType: value -> name.
TENSOR_TYPES = {
    0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
    7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64",
    13: "RESOURCE", 14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4", 18: "BFLOAT16",
}

# BuiltinOperator codes of the operators this frontend knows by name (the others are
# reported by number).
BUILTIN_OPERATORS = {
    0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D",
    6: "DEQUANTIZE", 8: "FLOOR", 9: "FULLY_CONNECTED", 14: "LOGISTIC", 17: "MAX_POOL_2D",
    18: "MUL", 19: "RELU", 20: "RELU_N1_TO_1", 21: "RELU6", 22: "RESHAPE",
    23: "RESIZE_BILINEAR", 25: "SOFTMAX", 28: "TANH", 32: "CUSTOM", 34: "PAD",
    39: "TRANSPOSE", 40: "MEAN", 41: "SUB", 42: "DIV", 43: "SQUEEZE", 45: "STRIDED_SLICE",
    47: "EXP", 49: "SPLIT", 53: "CAST", 55: "MAXIMUM", 57: "MINIMUM", 60: "PADV2",
    65: "SLICE", 67: "TRANSPOSE_CONV", 70: "EXPAND_DIMS", 74: "SUM", 82: "REDUCE_MAX",
    83: "PACK", 97: "RESIZE_NEAREST_NEIGHBOR", 98: "LEAKY_RELU", 114: "QUANTIZE",
    117: "HARD_SWISH", 126: "BATCH_MATMUL", 152: "RELU_0_TO_1",
}

# ActivationFunctionType.
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
PADDINGS = {0: "SAME", 1: "VALID"}

_TABLES = {
    "Model": "version:uint operator_codes:[OperatorCode] subgraphs:[SubGraph] "
             "description:string buffers:[Buffer] metadata_buffer:[int]",
    "OperatorCode": "deprecated_builtin_code:byte custom_code:string version:int=1 "
                    "builtin_code:int",
    "SubGraph": "tensors:[Tensor] inputs:[int] outputs:[int] operators:[Operator] name:string",
    "Buffer": "data:[ubyte] offset:ulong size:ulong",
    "Tensor": "shape:[int] type:byte buffer:uint name:string "
              "quantization:QuantizationParameters is_variable:bool sparsity:SparsityParameters "
              "shape_signature:[int] has_rank:bool",
    # `details` is a union (QuantizationDetails): two slots; only its type byte is read.
    "QuantizationParameters": "min:[float] max:[float] scale:[float] zero_point:[long] "
                              "details:union:QuantizationDetails quantized_dimension:int",
    # Only presence matters: sparse tensors are unsupported.
    "SparsityParameters": "traversal_order:[int]",
    "Operator": "opcode_index:uint inputs:[int] outputs:[int] "
                "builtin_options:union:BuiltinOptions custom_options:[ubyte] "
                "custom_options_format:byte mutating_variable_inputs:[bool] "
                "intermediates:[int] large_custom_options_offset:ulong "
                "large_custom_options_size:ulong builtin_options_2:union:BuiltinOptions2",
    # Builtin options of the supported operators.
    "Conv2DOptions": "padding:byte stride_w:int stride_h:int fused_activation_function:byte "
                     "dilation_w_factor:int=1 dilation_h_factor:int=1 quantized_bias_type:byte",
    "DepthwiseConv2DOptions": "padding:byte stride_w:int stride_h:int depth_multiplier:int "
                              "fused_activation_function:byte dilation_w_factor:int=1 "
                              "dilation_h_factor:int=1",
    "Pool2DOptions": "padding:byte stride_w:int stride_h:int filter_width:int "
                     "filter_height:int fused_activation_function:byte",
    "FullyConnectedOptions": "fused_activation_function:byte weights_format:byte "
                             "keep_num_dims:bool asymmetric_quantize_inputs:bool "
                             "quantized_bias_type:byte",
    "SoftmaxOptions": "beta:float",
    "ConcatenationOptions": "axis:int fused_activation_function:byte",
    "AddOptions": "fused_activation_function:byte pot_scale_int16:bool=1",
    "SubOptions": "fused_activation_function:byte pot_scale_int16:bool=1",
    "MulOptions": "fused_activation_function:byte",
    "ReshapeOptions": "new_shape:[int]",
    "ReducerOptions": "keep_dims:bool",
    "SqueezeOptions": "squeeze_dims:[int]",
    "PadOptions": "",
    "PadV2Options": "",
    "TransposeOptions": "",
    "DequantizeOptions": "",
    "QuantizeOptions": "",
    "TransposeConvOptions": "padding:byte stride_w:int stride_h:int fused_activation_function:byte "
                            "quantized_bias_type:byte",
    "BatchMatMulOptions": "adjoint_lhs:bool adjoint_rhs:bool asymmetric_quantize_inputs:bool",
}

# BuiltinOptions union: type value -> options table (only the ones read).
BUILTIN_OPTIONS = {
    1: "Conv2DOptions", 2: "DepthwiseConv2DOptions", 5: "Pool2DOptions",
    8: "FullyConnectedOptions", 9: "SoftmaxOptions", 10: "ConcatenationOptions",
    11: "AddOptions", 17: "ReshapeOptions", 21: "MulOptions", 22: "PadOptions",
    26: "TransposeOptions", 27: "ReducerOptions", 28: "SubOptions", 30: "SqueezeOptions",
    38: "DequantizeOptions", 43: "PadV2Options", 49: "TransposeConvOptions", 89: "QuantizeOptions",
    101: "BatchMatMulOptions",
}

# Scalar field types: struct format and size.
SCALARS = {
    "bool": ("<B", 1), "byte": ("<b", 1), "ubyte": ("<B", 1), "short": ("<h", 2),
    "ushort": ("<H", 2), "int": ("<i", 4), "uint": ("<I", 4), "long": ("<q", 8),
    "ulong": ("<Q", 8), "float": ("<f", 4), "double": ("<d", 8),
}

# Vector element types read as numpy arrays: numpy dtype.
NUMPY_VECTORS = {
    "[int]": "<i4", "[long]": "<i8", "[float]": "<f4", "[bool]": "u1", "[ubyte]": "u1",
}


@dataclass(frozen=True)
class Field(schema.Field):
    """One table field: name, schema type, first vtable slot, default (the TOSA schema's
    field, which a union type ``union:Name`` can also be here)."""

    @property
    def is_union(self) -> bool:
        return self.type.startswith("union:")


def _parse(spec: str) -> tuple[Field, ...]:
    fields, slot = [], 0
    for item in spec.split():
        name, _, ftype = item.partition(":")
        ftype, _, default = ftype.partition("=")
        if ftype.startswith("union:"):
            fields.append(Field(name, ftype, slot, (0, None)))
            slot += 2
            continue
        if ftype in SCALARS:
            value = float(default or 0) if ftype in ("float", "double") else int(default or 0)
            value = bool(value) if ftype == "bool" else value
        else:
            value = None
        fields.append(Field(name, ftype, slot, value))
        slot += 1
    return tuple(fields)


TABLES: dict[str, tuple[Field, ...]] = {name: _parse(spec) for name, spec in _TABLES.items()}
