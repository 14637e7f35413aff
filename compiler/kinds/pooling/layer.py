"""MAX_POOL2D and AVG_POOL2D as :class:`PoolLayer` s (lowered by
compiler/kinds/pooling/lower.py).

Parameters are checked here (int8 only, the spec's ERROR_IFs on kernel, stride, pad and the
output shape, the VPOOL window limits) and put in canonical form: TOSA 1.0 zero points are
input tensors, draft ones attributes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from isa.instructions import BY_NAME
from tosa_ir import Block, Operator

from compiler.core.ir import SingleTensorLayer
from compiler.core.errors import invalid, unsupported
from compiler.core.operands import expect_tensor, int_attrs, scalar_input

POOL_OPS = ("MAX_POOL2D", "AVG_POOL2D")
KERNEL_MAX = next(f for f in BY_NAME["VPOOL"].fields if f.name == "k0").max


@dataclass
class PoolLayer(SingleTensorLayer):
    """One int8 pooling layer over a rank-4 NHWC brick tensor.

    Attributes
    ----------
    name : str
        ``pool0``, ...
    mode : str
        ``"max"`` or ``"avg"``.
    input, output : str
        Graph tensor names (views resolved by the dataflow pass).
    in_shape, out_shape : tuple of int
        ``(N, IH, IW, C)`` and ``(N, OH, OW, C)``.
    kernel, stride : tuple of int
        ``(y, x)``.
    pad : tuple of int
        ``(top, bottom, left, right)``.
    input_zp, output_zp : int
        AVG_POOL2D zero points (0 for MAX_POOL2D).
    ops, location
        As :class:`compiler.core.ir.ConvLayer`.
    """

    name: str
    mode: str
    input: str
    output: str
    in_shape: tuple[int, int, int, int]
    out_shape: tuple[int, int, int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]
    input_zp: int = 0
    output_zp: int = 0
    ops: list[str] = field(default_factory=list)
    location: str = ""

    macs = 0

    @property
    def pad_value(self) -> int:
        """What the DMA pads with: the int8 minimum never wins a max; the input zero point
        adds nothing to a sum (the count then excludes padding, as the spec's does)."""
        return -128 if self.mode == "max" else self.input_zp



def pool_layer(op: Operator, block: Block, name: str) -> PoolLayer:
    """The checked :class:`PoolLayer` of ``op``."""
    x = expect_tensor(op, block, op.inputs[0], "int8", "input", 4)
    y = expect_tensor(op, block, op.outputs[0], "int8", "output", 4)
    kernel, stride, pad = int_attrs(op, "kernel", 2), int_attrs(op, "stride", 2), int_attrs(op, "pad", 4)
    if min(kernel) < 1 or min(stride) < 1 or min(pad) < 0:
        raise invalid(op, f"kernel {kernel}, stride {stride} must be >= 1 and pad {pad} >= 0")
    if max(pad[0], pad[1]) >= kernel[0] or max(pad[2], pad[3]) >= kernel[1]:
        raise invalid(op, f"pad {pad} must be smaller than the kernel {kernel}")
    n, ih, iw, c = x.shape
    span_h, span_w = ih + pad[0] + pad[1] - kernel[0], iw + pad[2] + pad[3] - kernel[1]
    if span_h < 0 or span_w < 0 or span_h % stride[0] or span_w % stride[1]:
        raise invalid(op, f"input {x.shape} with kernel {kernel}, stride {stride}, pad {pad} does not "
                          f"tile exactly (idiv_check)")
    out = (n, span_h // stride[0] + 1, span_w // stride[1] + 1, c)
    if tuple(y.shape) != out:
        raise invalid(op, f"output shape {tuple(y.shape)} != {out}")
    if max(kernel) > KERNEL_MAX:
        raise unsupported(op, f"kernel {kernel} exceeds the VPOOL window of {KERNEL_MAX} x {KERNEL_MAX}")
    izp = ozp = 0
    if op.op == "AVG_POOL2D":
        acc_type = op.attrs.get("acc_type")
        if acc_type not in (None, "INT32", "int32"):
            raise unsupported(op, f"acc_type {acc_type}; the NPU accumulates int8 pooling in int32")
        izp = scalar_input(op, block, 1, "input_zp")
        ozp = scalar_input(op, block, 2, "output_zp")
        for what, zp in (("input_zp", izp), ("output_zp", ozp)):
            if not -128 <= zp <= 127:
                raise invalid(op, f"{what} {zp} is outside int8")
    return PoolLayer(name, "max" if op.op == "MAX_POOL2D" else "avg", op.inputs[0], op.outputs[0],
                     tuple(x.shape), out, tuple(kernel), tuple(stride), tuple(pad), izp, ozp,
                     ops=[op.describe()], location=op.location)
