"""The tiling plan of a convolution layer: output tiles, reduction groups, ring slots.

compiler/kinds/conv/tiling.py searches for plans, compiler/kinds/conv/fully_connected.py makes
its streaming one (an ``FcPlan`` is a ``ConvPlan``), and the lowering
(compiler/kinds/conv/lower.py) emits one's instructions; the types live here so the search can
call the fully-connected planner without either importing the other.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from compiler.core.ir import ConvLayer
from compiler.core.views import ceil_div

__all__ = ["PARAM_ROWS", "ConvPlan", "ReductionGroup", "Tile"]

PARAM_ROWS = 3                          # PSRAM rows per output-channel block


@dataclass(frozen=True)
class Tile:
    """One output tile: image ``n``, rows ``oy..oy+th-1``, columns ``ox..ox+tw-1``."""

    n: int
    oy: int
    th: int
    ox: int
    tw: int


@dataclass(frozen=True)
class ReductionGroup:
    """Input-channel blocks ``cb0..cb0+ncb-1`` x kernel taps ``tap0..tap0+ntap-1``."""

    cb0: int
    ncb: int
    tap0: int
    ntap: int


@dataclass
class ConvPlan:
    """How one ConvLayer is tiled and where its buffers sit in the scratchpads (in rows)."""

    layer: ConvLayer
    lanes: int
    cbi: int                  # input-channel blocks
    cbo: int                  # output-channel blocks
    row_step: int
    th: int
    tw: int
    cg: int                   # input-channel blocks per reduction group
    tg: int                   # kernel taps per reduction group
    og: int                   # output-channel blocks per weight group
    in_slots: int
    out_slots: int
    acc_slots: int
    w_slots: int
    order: str = "weights_outer"   # or "tiles_outer"
    in_slot_rows: int = 0
    w_slot_rows: int = 0
    asram_out_base: int = 0
    estimate: dict = field(default_factory=dict)
    share: object = None      # the vector unit's blocks of a depthwise layer (vector_share.Share)

    @property
    def taps(self) -> int:
        kh, kw = self.layer.kernel
        return kh * kw

    @property
    def depthwise(self) -> bool:
        return self.layer.depth_multiplier > 0

    @property
    def wcb(self) -> int:
        """Input-channel blocks each output-channel block reduces over (weight tiles per tap):
        all of them for a convolution, its own one for a depthwise layer."""
        return 1 if self.depthwise else self.cbi

    def reduction_groups(self, ob: int = 0) -> list[ReductionGroup]:
        """The reduction groups of output-channel block ``ob`` (the same for every block of a
        convolution).  A depthwise layer's block ``ob`` reads input block ``ob // M`` only
        (channels ``ob*C .. ob*C + C-1`` read ``(ob*C) // M ..``, which lie in one block as
        array_rows == array_cols): its weight tiles are diagonal, the others would add zero."""
        if self.depthwise:
            cb = ob // self.layer.depth_multiplier
            return [ReductionGroup(cb, 1, tap0, min(self.tg, self.taps - tap0))
                    for tap0 in range(0, self.taps, self.tg)]
        return [ReductionGroup(cb0, min(self.cg, self.cbi - cb0), tap0, min(self.tg, self.taps - tap0))
                for cb0 in range(0, self.cbi, self.cg) for tap0 in range(0, self.taps, self.tg)]

    @property
    def groups(self) -> int:
        return ceil_div(self.wcb, self.cg) * ceil_div(self.taps, self.tg)

    @property
    def ogroups(self) -> int:
        return ceil_div(self.cbo, self.og)

    def in_rows(self, th: int) -> int:
        """ASRAM rows per input-channel block of the window of ``th`` output rows."""
        (sy, _), (dy, _) = self.layer.stride, self.layer.dilation
        kh, _ = self.layer.kernel
        return ((th - 1) * sy + (kh - 1) * dy) // self.row_step + 1

    def in_cols(self, tw: int) -> int:
        (_, sx), (_, dx) = self.layer.stride, self.layer.dilation
        _, kw = self.layer.kernel
        return (tw - 1) * sx + (kw - 1) * dx + 1

    def tiles(self) -> list[Tile]:
        n, oh, ow, _ = self.layer.out_shape
        return [Tile(b, oy, min(self.th, oh - oy), ox, min(self.tw, ow - ox))
                for b in range(n) for oy in range(0, oh, self.th) for ox in range(0, ow, self.tw)]

    def tile_shapes(self) -> Counter:
        """How many tiles of each (th, tw), without listing them."""
        n, oh, ow, _ = self.layer.out_shape
        shapes: Counter = Counter()
        for h, nh in ((self.th, oh // self.th), (oh % self.th, 1)):
            for w, nw in ((self.tw, ow // self.tw), (ow % self.tw, 1)):
                if h and w and nh and nw:
                    shapes[(h, w)] += n * nh * nw
        return shapes

    def describe(self) -> str:
        tiles = sum(self.tile_shapes().values())
        kind = f"depthwise x{self.layer.depth_multiplier}, " if self.depthwise else ""
        return (f"{kind}tile {self.th}x{self.tw} ({tiles} tiles), reduction groups {self.groups} "
                f"({self.cg} cin blocks x {self.tg} taps), cout groups {self.ogroups}x{self.og}, "
                f"slots in/out/acc/w {self.in_slots}/{self.out_slots}/{self.acc_slots}/{self.w_slots}, "
                f"row step {self.row_step}, {self.order}"
                + (f"; {self.share.describe()}" if self.share is not None else ""))
