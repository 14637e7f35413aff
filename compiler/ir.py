"""The compiler's layer IR: what the fusion pass makes of a TOSA graph.

A :class:`ConvLayer` is one fused CONV2D -> RESCALE [-> CLAMP] with every parameter in
canonical form (the TOSA 1.0 and draft encodings of zero points and RESCALE parameters are
resolved by the fusion pass), so no later pass needs to know how the graph spelled them.
Later operators (pooling, elementwise, ...) will be further layer kinds here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ConvLayer:
    """An int8 convolution with its output stage, ready for tiling.

    Tensor names refer to the graph's main block; ``input`` and ``output`` are rank-4
    NHWC int8 tensors.  Arrays are per output channel (length ``cout``), already broadcast
    from per-tensor values.

    Attributes
    ----------
    name : str
        Short layer name for reports (``conv0``, ...).
    input, output : str
        Graph tensor names of the int8 input and the int8 output.
    in_shape, out_shape : tuple of int
        ``(N, IH, IW, IC)`` and ``(N, OH, OW, OC)``.
    weights : ndarray of int8, shape (OC, KH, KW, IC)
    bias : ndarray of int32, shape (OC,)
    input_zp, weight_zp : int
        Zero points subtracted from input values and weights.
    stride, dilation : tuple of int
        ``(y, x)``.
    pad : tuple of int
        ``(top, bottom, left, right)``.
    multiplier, shift : ndarray of int64, shape (OC,)
        RESCALE parameters (16-bit multipliers when ``scale32`` is false).
    scale32, double_round : bool
    output_zp : int
    clamp : tuple of int
        Inclusive output range: the int8 range intersected with a fused CLAMP.
    ops : list of str
        ``Operator.describe()`` of the TOSA operators this layer implements.
    location : str
        Location of the CONV2D, for messages.
    """

    name: str
    input: str
    output: str
    in_shape: tuple[int, int, int, int]
    out_shape: tuple[int, int, int, int]
    weights: np.ndarray
    bias: np.ndarray
    input_zp: int
    weight_zp: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]
    multiplier: np.ndarray
    shift: np.ndarray
    scale32: bool
    double_round: bool
    output_zp: int
    clamp: tuple[int, int]
    ops: list[str] = field(default_factory=list)
    location: str = ""

    @property
    def kernel(self) -> tuple[int, int]:
        return int(self.weights.shape[1]), int(self.weights.shape[2])

    @property
    def macs(self) -> int:
        """Multiply-accumulates the layer needs (padding taps included, as the spec counts)."""
        n, oh, ow, oc = self.out_shape
        kh, kw = self.kernel
        return n * oh * ow * oc * kh * kw * self.in_shape[3]

    def where(self) -> str:
        return f"{self.name} ({self.location})" if self.location else self.name
