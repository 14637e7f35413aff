"""An int8 alexnet_v2 as a TOSA 1.0 graph with seeded random weights, cached on disk.

Shapes follow TF-slim's ``alexnet_v2`` at 224x224x3, batch 1 (the table in
shared/ANCHORS.md; the same network as models/alexnet/graph.nnef)::

    conv1 11x11/4 VALID -> 54x54x64    pool 3x3/2 -> 26x26x64
    conv2 5x5 SAME      -> 26x26x192   pool 3x3/2 -> 12x12x192
    conv3 3x3 SAME      -> 12x12x384
    conv4 3x3 SAME      -> 12x12x384
    conv5 3x3 SAME      -> 12x12x256   pool 3x3/2 -> 5x5x256
    fc6   5x5 VALID     -> 1x1x4096    (a convolution, as alexnet_v2 writes it)
    fc7   1x1           -> 1x1x4096
    fc8   1x1           -> 1x1x1000

Every convolution is CONV2D (int8 x int8 -> int32, bias) -> RESCALE (per-channel,
scale32, DOUBLE_ROUND as TFLite requantises) -> CLAMP [0, 127] (ReLU).  TensorFlow's
VALID windows round the output size down, which TOSA forbids (``idiv_check``); where
that drops trailing rows/columns a SLICE removes them first, as a converter does.

Quantisation is synthetic but realistic: activations are int8 with zero point 0 after the
ReLUs (the image: zero point -128), weights are per-channel symmetric int8, and each
channel's multiplier/shift maps its accumulator's expected spread onto about a third of
the int8 range, with a bias that centres it, so activations are neither all zero nor all
saturated (:func:`activation_stats` measures that).

The weights are ~50 MB, so the file is generated on first use into ``build/bench`` (never
committed) and reused while the generator's parameters are unchanged
(:func:`cached_model`).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tosa_ir import Block, Graph, Operator, Region, Tensor
from tosa_ir.tosa_fb import write_tosa

# Bump when the generated graph changes for the same parameters: invalidates caches.
GENERATOR_VERSION = 2

INPUT_NAME, OUTPUT_NAME = "input", "output"
# Spread (standard deviation) aimed at for each rescaled activation, in int8 steps.
TARGET_STD = 40.0
IMAGE_ZP = -128
# Spread of the per-channel bias offsets, relative to TARGET_STD.
BIAS_SPREAD = 0.2


@dataclass(frozen=True)
class ConvLayer:
    name: str
    kernel: int
    stride: int
    pad: int            # SAME-style padding on every side (0: VALID)
    out_channels: int
    pool_after: bool = False


ALEXNET_V2 = (
    ConvLayer("conv1", 11, 4, 0, 64, pool_after=True),
    ConvLayer("conv2", 5, 1, 2, 192, pool_after=True),
    ConvLayer("conv3", 3, 1, 1, 384),
    ConvLayer("conv4", 3, 1, 1, 384),
    ConvLayer("conv5", 3, 1, 1, 256, pool_after=True),
    ConvLayer("fc6", 5, 1, 0, 4096),
    ConvLayer("fc7", 1, 1, 0, 4096),
    ConvLayer("fc8", 1, 1, 0, 1000),
)


@dataclass(frozen=True)
class ModelSpec:
    """What the generated graph depends on (also the cache key).

    ``width`` divides every layer's channel count (tests build small copies); ``size`` is
    the input's height and width.
    """

    size: int = 224
    width: int = 1
    seed: int = 2024
    version: int = GENERATOR_VERSION

    def layers(self) -> list[ConvLayer]:
        return [ConvLayer(l.name, l.kernel, l.stride, l.pad, max(1, l.out_channels // self.width),
                          l.pool_after) for l in ALEXNET_V2]

    def key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def _valid_extent(size: int, kernel: int, stride: int, pad: int) -> tuple[int, int]:
    """(output size, input rows used) of a window op, output size rounded down as TF does."""
    out = (size + 2 * pad - kernel) // stride + 1
    if out < 1:
        raise ValueError(f"a {kernel}x{kernel} window does not fit {size} rows")
    return out, (out - 1) * stride + kernel - 2 * pad


def _multiplier_shift(scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (int32 multiplier in [2**30, 2**31), shift) with m * 2**-shift ~= scale."""
    mant, exp = np.frexp(scale)                       # scale = mant * 2**exp, 0.5 <= mant < 1
    mult = np.round(mant * (1 << 31)).astype(np.int64)
    carry = mult == (1 << 31)                         # mant rounded up to 1.0
    mult = np.where(carry, mult >> 1, mult)
    shift = 31 - exp - carry.astype(np.int64)
    if shift.min() < 2 or shift.max() > 62:
        raise ValueError(f"scales out of RESCALE's range: shifts {shift.min()}..{shift.max()}")
    return mult.astype(np.int32), shift.astype(np.int8)


def _relu_moments(pooled: bool) -> tuple[float, float]:
    """(mean, mean square) of a layer's output as the next layer sees it.

    Each output channel is about N(b, TARGET_STD**2) with a bias offset b of spread
    BIAS_SPREAD * TARGET_STD, then ReLU'd and clipped to 127; a 3x3 maximum pool takes the
    largest of 9 such values.  Estimated by sampling (a fixed seed: deterministic).
    """
    rng = np.random.default_rng(0)
    samples = 20000
    offset = rng.normal(0, BIAS_SPREAD * TARGET_STD, (samples, 1))
    v = np.clip(rng.normal(0, TARGET_STD, (samples, 9 if pooled else 1)) + offset, 0, 127)
    v = v.max(axis=1)
    return float(v.mean()), float((v ** 2).mean())


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.block = Block("main")
        self.count = 0

    def tensor(self, name, shape, dtype, data=None) -> str:
        self.block.add_tensor(Tensor(name, tuple(shape), dtype,
                                     None if data is None else np.asarray(data)))
        return name

    def const(self, name, data, dtype) -> str:
        self.tensor(name, np.shape(data), dtype, data)
        self.block.operators.append(Operator("CONST", [], [name]))
        return name

    def const_shape(self, name, values) -> str:
        self.tensor(name, (len(values),), "shape", np.asarray(values, np.int64))
        self.block.operators.append(Operator("CONST_SHAPE", [], [name]))
        return name

    def op(self, op, inputs, out_name, out_shape, dtype, **attrs) -> str:
        self.tensor(out_name, out_shape, dtype)
        self.block.operators.append(Operator(op, list(inputs), [out_name], attrs))
        return out_name

    # -- layers -------------------------------------------------------------------------
    def crop(self, x: str, shape, rows: int, name: str) -> tuple[str, tuple]:
        """SLICE away trailing rows/columns a rounded-down window never reads."""
        n, h, w, c = shape
        if rows == h:
            return x, shape
        if rows > h:
            raise ValueError(f"{name}: a window reads {rows} rows of {h}")
        out = (n, rows, rows, c)
        start = self.const_shape(f"{name}_start", [0, 0, 0, 0])
        size = self.const_shape(f"{name}_size", list(out))
        return self.op("SLICE", [x, start, size], name, out, "int8"), out

    def conv(self, x: str, shape, layer: ConvLayer, in_zp: int, in_sq: float,
             in_mean: float, last: bool) -> tuple[str, tuple]:
        n, h, _, ic = shape
        out_hw, used = _valid_extent(h, layer.kernel, layer.stride, layer.pad)
        if layer.pad and used != h:
            raise ValueError(f"{layer.name}: padded windows that leave rows unread")
        x, shape = self.crop(x, shape, used, f"{layer.name}_crop")
        oc, k = layer.out_channels, layer.kernel
        # Per-channel symmetric weights: each channel gets its own spread, as trained
        # weights do, and is scaled so that its largest |value| is 127.
        w = self.rng.standard_normal((oc, k, k, ic)) * self.rng.uniform(0.5, 1.0, (oc, 1, 1, 1))
        w = np.round(w * (127.0 / np.abs(w).max(axis=(1, 2, 3), keepdims=True)))
        w = w.astype(np.int8)
        w64 = w.reshape(oc, -1).astype(np.float64)
        # Accumulator statistics over positions for inputs with mean in_mean and mean
        # square in_sq (independent taps): the bias cancels the mean, the scale maps the
        # spread onto TARGET_STD int8 steps.
        acc_mean = in_mean * w64.sum(axis=1)
        acc_std = np.sqrt((in_sq - in_mean ** 2) * (w64 ** 2).sum(axis=1)) + 1.0
        bias = np.round(-acc_mean + self.rng.normal(0, BIAS_SPREAD, oc) * acc_std).astype(np.int32)
        mult, shift = _multiplier_shift(TARGET_STD / acc_std)

        name = layer.name
        acc = self.op("CONV2D", [x, self.const(f"{name}_weights", w, "int8"),
                                 self.const(f"{name}_bias", bias, "int32"),
                                 self.const(f"{name}_input_zp", np.array([in_zp], np.int8), "int8"),
                                 self.const(f"{name}_weight_zp", np.array([0], np.int8), "int8")],
                      f"{name}_acc", (n, out_hw, out_hw, oc), "int32",
                      pad=[layer.pad] * 4, stride=[layer.stride] * 2, dilation=[1, 1],
                      local_bound=False, acc_type="INT32")
        scaled = self.op("RESCALE", [acc, self.const(f"{name}_multiplier", mult, "int32"),
                                     self.const(f"{name}_shift", shift, "int8"),
                                     self.const(f"{name}_rescale_input_zp", np.array([0], np.int32), "int32"),
                                     self.const(f"{name}_output_zp", np.array([0], np.int8), "int8")],
                         f"{name}_scaled", (n, out_hw, out_hw, oc), "int8",
                         scale32=True, rounding_mode="DOUBLE_ROUND", per_channel=True,
                         input_unsigned=False, output_unsigned=False)
        out_name = OUTPUT_NAME if last else f"{name}_relu"
        y = self.op("CLAMP", [scaled], out_name, (n, out_hw, out_hw, oc), "int8",
                    min_val=0, max_val=127, nan_mode="PROPAGATE")
        return y, (n, out_hw, out_hw, oc)

    def pool(self, x: str, shape, name: str) -> tuple[str, tuple]:
        n, h, _, c = shape
        out_hw, used = _valid_extent(h, 3, 2, 0)
        x, shape = self.crop(x, shape, used, f"{name}_crop")
        y = self.op("MAX_POOL2D", [x], name, (n, out_hw, out_hw, c), "int8",
                    kernel=[3, 3], stride=[2, 2], pad=[0, 0, 0, 0], nan_mode="PROPAGATE")
        return y, (n, out_hw, out_hw, c)

    def chain(self, in_shape: tuple[int, ...], layers: list[ConvLayer], image: bool,
              source: str) -> Graph:
        """A graph applying ``layers`` to an int8 input of ``in_shape``.

        ``image``: the input is an image (zero point IMAGE_ZP, uniform values); otherwise
        it looks like a ReLU output (zero point 0).
        """
        shape = tuple(in_shape)
        x = self.tensor(INPUT_NAME, shape, "int8")
        self.block.inputs = [x]
        # Input statistics of each layer, in the units of its zero-point-centred input:
        # the image is uniform over 0..255 after removing its zero point; later inputs
        # are ReLU outputs, maximum-pooled or not (see _relu_moments).
        if image:
            in_zp, in_mean, in_sq = IMAGE_ZP, 127.5, (255 * 511) / 6
        else:
            in_zp, (in_mean, in_sq) = 0, _relu_moments(pooled=False)
        for i, layer in enumerate(layers):
            x, shape = self.conv(x, shape, layer, in_zp, in_sq, in_mean, i == len(layers) - 1)
            in_zp = 0
            in_mean, in_sq = _relu_moments(pooled=False)
            if layer.pool_after:
                x, shape = self.pool(x, shape, f"{layer.name}_pool")
                in_mean, in_sq = _relu_moments(pooled=True)
        self.block.outputs = [x]
        return Graph(regions=[Region("main", [self.block])], version=(1, 0, 0, False),
                     profiles=["PRO-INT"], source=source)


def build_graph(spec: ModelSpec = ModelSpec()) -> Graph:
    """The alexnet_v2 graph of ``spec`` (deterministic for a given spec)."""
    return _Builder(spec.seed).chain((1, spec.size, spec.size, 3), spec.layers(), image=True,
                                     source="alexnet_v2_int8")


def conv_chain(in_shape: tuple[int, int, int, int], layers: list[ConvLayer],
               seed: int = 2024) -> Graph:
    """CONV2D -> RESCALE -> CLAMP layers (quantised like alexnet_v2's) on a ReLU-like input.

    For workloads of other benchmarks, e.g. parts of alexnet_v2 a compiler handles.
    """
    return _Builder(seed).chain(in_shape, list(layers), image=False, source="conv_chain")


def make_input(spec: ModelSpec = ModelSpec()) -> np.ndarray:
    """A seeded random int8 image, NHWC ``(1, size, size, 3)``."""
    rng = np.random.default_rng(spec.seed + 1)
    return rng.integers(-128, 128, (1, spec.size, spec.size, 3), dtype=np.int8)


def cached_model(folder: Path, spec: ModelSpec = ModelSpec(),
                 log=lambda text: None) -> tuple[Path, np.ndarray]:
    """Path of the .tosa file of ``spec`` in ``folder`` (written if absent) and its input.

    The file name carries a hash of the spec, so a changed generator writes a new file;
    it is written to a temporary name and renamed, so an interrupted run leaves no
    half-written file behind.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"alexnet_v2_int8_{spec.key()}.tosa"
    if not path.exists():
        log(f"generating {path} (size {spec.size}, width 1/{spec.width}, seed {spec.seed})")
        data = write_tosa(build_graph(spec))
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path, make_input(spec)


@dataclass
class LayerInfo:
    """One convolution layer of a generated graph: its ReLU output tensor and its work."""

    name: str
    output: str             # the CLAMP's output (graph output for the last layer)
    shape: tuple[int, ...]  # of that output
    macs: int


def layers_of(graph: Graph) -> list[LayerInfo]:
    """The layers of a graph made by :func:`build_graph`, in order.

    Each CONV2D starts a layer (named by its tensors' prefix); the layer's output is the
    CLAMP that follows it.
    """
    block = graph.main
    out: list[LayerInfo] = []
    for op in block.operators:
        if op.op == "CONV2D":
            acc = block.tensor(op.outputs[0])
            _, kh, kw, ic = block.tensor(op.inputs[1]).shape
            out.append(LayerInfo(op.outputs[0].rsplit("_acc", 1)[0], "", acc.shape,
                                 acc.size * kh * kw * ic))
        elif op.op == "CLAMP" and out and not out[-1].output:
            out[-1].output = op.outputs[0]
    return out


def layer_of_tensor(name: str, layers: list[LayerInfo]) -> str:
    """The layer a tensor belongs to (by name prefix; the graph output is the last layer's)."""
    for layer in layers:
        if name == layer.output or name.startswith(layer.name + "_"):
            return layer.name
    return "other"


def activation_stats(values: np.ndarray) -> tuple[float, float]:
    """(fraction at 0, fraction at 127) of a ReLU output: the 'not all saturated' check."""
    v = np.asarray(values)
    return float(np.mean(v == 0)), float(np.mean(v == 127))
