"""The compiler's layer IR: what the fusion pass makes of a TOSA graph.

A :class:`ConvLayer` is one fused CONV2D -> RESCALE [-> CLAMP] with every parameter in
canonical form (the TOSA 1.0 and draft encodings of zero points and RESCALE parameters are
resolved by the fusion pass), so no later pass needs to know how the graph spelled them.
A :class:`CopyLayer` is data movement that cannot be folded into a view or a binding
(compiler/dataflow.py): a DMA copy between two brick views.  Later operators
(pooling, elementwise, ...) will be further layer kinds here.

Layers name the tensors they read and write; where those live (a whole root buffer or a
window of one) is the dataflow pass's business, resolved by the memory plan.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class Layer:
    """What every layer kind shares: a ``name`` and the ``location`` of its first operator
    for messages, and (unless a kind says otherwise) one output tensor ``output``.

    Kinds are dataclasses deriving from this plain class, so it adds no fields; each kind
    says which tensors it ``reads``.
    """

    name: str
    output: str
    location: str

    @property
    def writes(self) -> list[str]:
        return [self.output]

    def where(self) -> str:
        return f"{self.name} ({self.location})" if self.location else self.name


class SingleTensorLayer(Layer):
    """A layer that reads tensor ``input`` and writes tensor ``output`` (conv, pool, ...)."""

    input: str

    @property
    def reads(self) -> list[str]:
        return [self.input]


class MultiInputLayer(Layer):
    """A layer that reads the tensors ``inputs`` and writes tensor ``output`` (elementwise, ...)."""

    inputs: list[str]

    @property
    def reads(self) -> list[str]:
        return list(self.inputs)


@dataclass
class ConvLayer(SingleTensorLayer):
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
    depth_multiplier : int
        0 for a CONV2D.  ``M >= 1`` for a DEPTHWISE_CONV2D with channel multiplier ``M``:
        output channel ``o`` reads input channel ``o // M`` only, ``weights`` is then
        ``(OC, KH, KW, 1)`` (one kernel per output channel) and the tiling reduces each
        output-channel block over its one input-channel block (compiler/kinds/conv/plan.py).
    vector_blocks : float
        For a depthwise layer (multiplier 1): how many of its last output-channel blocks the
        vector unit computes (VDWCONV) while the array computes the others
        (compiler/kinds/conv/vector_share.py); a fraction is the last rows of one more
        block; 0: all on the array.
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
    depth_multiplier: int = 0
    vector_blocks: float = 0

    @property
    def kernel(self) -> tuple[int, int]:
        return int(self.weights.shape[1]), int(self.weights.shape[2])

    @property
    def macs(self) -> int:
        """Multiply-accumulates the layer needs (padding taps included, as the spec counts)."""
        n, oh, ow, oc = self.out_shape
        kh, kw = self.kernel
        return n * oh * ow * oc * kh * kw * int(self.weights.shape[3])   # depthwise: 1 input channel



@dataclass
class CopyLayer(Layer):
    """A DMA copy from one brick view to another (compiler/kinds/movement/copy.py).

    One of three kinds, by its fields:

    * ``relayout``: a RESHAPE keeping the channel count: pixel ``p`` (row-major over
      N, H, W) of ``dst`` is pixel ``p`` of ``src``;
    * ``pad`` not all zero: ``dst`` is ``src`` surrounded by ``pad_value`` (a PAD): per axis
      N, H, W, C elements before and after; channel padding comes in whole bricks;
    * otherwise a strided copy: ``dst[n, h, w, c] = src`` at ``(n, h, w)`` permuted by
      ``perm`` (dst axis ``i`` of N, H, W is src axis ``perm[i]``), channels unchanged.

    Attributes
    ----------
    name : str
        ``copy0``, ...
    src, dst : str
        Tensors read and written (names known to the dataflow pass).
    reason : str
        Why the data moves, for reports (``"TRANSPOSE of H and W"``, ...).
    ops, location
        As :class:`ConvLayer`.
    """

    name: str
    src: str
    dst: str
    reason: str
    perm: tuple[int, int, int] = (0, 1, 2)
    pad: tuple[int, ...] = (0,) * 8
    pad_value: int = 0
    relayout: bool = False
    ops: list[str] = field(default_factory=list)
    location: str = ""

    macs = 0

    @property
    def reads(self) -> list[str]:
        return [self.src]

    @property
    def writes(self) -> list[str]:
        return [self.dst]
