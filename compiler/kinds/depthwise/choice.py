"""Which unit runs a DEPTHWISE_CONV2D: the MAC array or the vector unit.

On the array a depthwise layer is the conv kind's grouped convolution (compiler/kinds/conv/:
one diagonal weight tile per output-channel block and tap, ``ConvLayer.depth_multiplier``):
one MATMUL vector per output pixel, channel block and tap, 1/L of its MACs useful, and the
RESCALE [-> CLAMP] after it fused into the ACT on the way out of the accumulators.  On the
vector unit (compiler/kinds/elementwise/depthwise.py) every tap costs a multiply and an
int32 add per vector (8 to 12 cycles), the int32 result goes out to memory and the RESCALE
and CLAMP run as layers of their own.  The array wins by about 8x wherever a tile keeps its
MATMULs longer than the array's depth; tiny layers (a few pixels, where every MATMUL still
costs ``array_rows`` cycles) may not.

So the choice compares the compiler's own figures: the array plan's analytic cycles (the
tiling search's estimate, compiler/kinds/conv/tiling.py, DMA and instruction fetch
included), cut to the array's share where the vector unit takes some of the blocks with
VDWCONV beside it (compiler/kinds/conv/vector_share.py, balanced to end with the array's),
against the vector path's: the padding copy (input and padded words, through the bus) and
the depthwise, RESCALE and CLAMP layers each loaded, computed and stored in turn
(compiler/kinds/elementwise/depthwise.py ``serial_cycles``).  Measured against the cycle
model (tests/test_compiler_depthwise_array.py), the vector path used to win layers of a
few output pixels with many taps, where every MATMUL still costs ``array_rows`` cycles;
with the VDWCONV share the array's side wins those too.

Forms the fused path does not take stay where they ran before: int16 inputs (int48
accumulators) and channel multipliers ``M > 1`` whose int32 result is read by something
other than one RESCALE go to compiler/kinds/mxu_conv/ (diagonal weight tiles, accumulators
out); other int8 layers without a fusable RESCALE to the vector unit.  ``M > 1`` with a
fusable RESCALE always runs fused on the array: the vector unit would have to copy every
input channel M times first.
"""
from __future__ import annotations

from dataclasses import dataclass

from tosa_ir import Operator
from tosa_ir.errors import Unsupported

from compiler.core.ir import ConvLayer
from compiler.core.views import ceil_div
from compiler.kinds.conv.fusion import conv_chain, conv_layer
from compiler.kinds.conv.tiling import plan_candidates
from compiler.kinds.conv.vector_share import vector_blocks
from compiler.kinds.elementwise.depthwise import depthwise_layer, serial_cycles
from compiler.kinds.elementwise.layer import elementwise_layer

__all__ = ["Choice", "choose"]

# ``walk.choices`` key prefix (the walk caches one Choice per operator).
_KEY = "depthwise"


@dataclass
class Choice:
    """``unit``: "array" (fused, ``chain`` and ``layer`` set), "vector" or "mxu_conv";
    ``array_cycles`` / ``vector_cycles``: the figures compared (None where not computed);
    ``layer.vector_blocks``: the array's blocks the vector unit takes (VDWCONV)."""

    unit: str
    chain: list | None = None
    layer: ConvLayer | None = None
    array_cycles: int | None = None
    vector_cycles: int | None = None


def choose(walk, op: Operator) -> Choice:
    """The unit for DEPTHWISE_CONV2D ``op`` (computed once per operator: the producer of its
    input asks first, to know whether to write bricks)."""
    key = (_KEY, id(op))
    if key not in walk.choices:
        walk.choices[key] = _choose(walk, op)
    return walk.choices[key]


def _choose(walk, op: Operator) -> Choice:
    block = walk.block
    x, w = block.tensor(op.inputs[0]), block.tensor(op.inputs[1])
    m = w.shape[3] if len(w.shape) == 4 else 1
    if x.dtype != "int8":
        return Choice("mxu_conv")
    fallback = "mxu_conv" if m > 1 else "vector"
    try:
        chain = conv_chain(op, block, walk.consumers)
        layer = conv_layer(chain, block, "probe")
        array = plan_candidates(layer, walk.config)[0].estimate["cycles"]
    except Unsupported:
        return Choice(fallback)
    if m > 1:
        return Choice("array", chain, layer, array)
    # The vector unit's share of the array's blocks (compiler/kinds/conv/vector_share.py) is
    # balanced to end with the array's part: the array's time falls with its blocks.
    blocks = ceil_div(layer.out_shape[3], walk.config.array_cols)
    layer.vector_blocks = vector_blocks(layer, walk.config, array)
    array = round(array * (blocks - layer.vector_blocks) / blocks)
    try:
        vector = vector_cycles(walk, op, chain)
    except Unsupported:
        return Choice("array", chain, layer, array)
    unit = "array" if array < vector else "vector"
    return Choice(unit, chain if unit == "array" else None, layer if unit == "array" else None, array, vector)


def vector_cycles(walk, op: Operator, chain: list[Operator]) -> int:
    """The vector path's estimate (module docstring): padding copy, then the depthwise
    layer and the layers of the RESCALE [CLAMP] after it, one after the other."""
    latency, lanes = walk.config.mem_latency, walk.lanes
    dw, _, pad, _ = depthwise_layer(op, walk.block, "probe")
    total = serial_cycles(dw, lanes, latency, tuple(k for k in range(len(dw.inputs)) if k not in dw.windows))
    if any(pad):
        n, h, w, c = walk.block.tensor(op.inputs[0]).shape
        columns = -(-c // lanes)
        total += 2 * latency + n * columns * (h * w + (h + pad[0] + pad[1]) * (w + pad[2] + pad[3]))
    return total + sum(serial_cycles(elementwise_layer(o, walk.block, "probe"), lanes, latency) for o in chain[1:])
