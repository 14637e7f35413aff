"""Per-layer cycles against the roofline bound as a standalone SVG bar chart.

No plotting library: the chart is a few rectangles and text elements written as SVG text,
so reports need nothing beyond the standard library and open in any browser.  One
horizontal row per layer: a bar of the layer's estimated cycles, a thin bar of its
roofline bound drawn over it (the least cycles it could take: black when the MAC array
bounds the layer, orange when the external bus does), and the utilisation and the
cycles/bound ratio written after the bar.  Layers without a bound (pure data movement)
have no bound bar; layers that do not compile (``npu estimate --per-layer``) have no bars
and say why.

When the layers span more than two decades of cycles the axis is logarithmic, else small
layers would be invisible next to big ones; the axis label says which.

Every cycles bar has ``class="cycles"`` and every bound bar ``class="bound"``, each with a
``data-layer`` attribute, so tests and tools can find them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

ROW = 22            # pixels per layer row
BAR = 14            # height of a cycles bar
NAME_CHARS = 28     # longer layer names are shortened in the middle (the tooltip has them whole)
PLOT_W = 560        # the bars
NOTE_W = 210        # right column: utilisation and ratio
TOP, BOTTOM = 58, 46


@dataclass
class PlotRow:
    """One layer of the chart: ``bound`` 0 when the layer has none; ``utilisation`` a
    fraction (0.5 for 50 %)."""

    name: str
    cycles: int
    bound: int
    utilisation: float
    detail: str = ""        # tooltip text (operators, ...)
    limit: str = ""         # what bounds the layer: "MACs", "bus" or ""
    missing: str = ""       # why the layer has no estimate ("" when it has one)


LIMIT_COLOURS = {"MACs": "#222", "bus": "#e07b00"}


def _short(name: str) -> str:
    if len(name) <= NAME_CHARS:
        return name
    half = (NAME_CHARS - 1) // 2
    return name[:half] + "\u2026" + name[-(NAME_CHARS - 1 - half):]


def _scale(rows: list[PlotRow]) -> tuple[bool, float, float]:
    """(logarithmic, low, high) of the axis in cycles."""
    values = [v for r in rows for v in (r.cycles, r.bound) if v > 0]
    if not values:
        return False, 0.0, 1.0
    high, low = max(values), min(values)
    if high / low > 100:
        return True, 10.0 ** math.floor(math.log10(low)), _nice_ceiling(high)
    return False, 0.0, _nice_ceiling(high)


def _nice_ceiling(v: float) -> float:
    """The smallest of 1, 2, 5 x 10^k not below ``v``."""
    exp = 10.0 ** math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if m * exp >= v:
            return m * exp
    return 10 * exp


def _ticks(log: bool, low: float, high: float) -> list[float]:
    if log:
        return [10.0 ** k for k in range(round(math.log10(low)), math.floor(math.log10(high) + 1e-9) + 1)]
    step = high / 5
    return [step * k for k in range(6)]


def _fmt(v: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def roofline_svg(title: str, rows: list[PlotRow], subtitle: str = "") -> str:
    """The chart of ``rows`` (in layer order) as an SVG document."""
    log, low, high = _scale(rows)
    label_w = int(12 + 6.5 * max([len(_short(r.name)) for r in rows] + [8]))    # ~6.5 px a character

    def x(v: float) -> float:
        if log:
            v = max(v, low)
            frac = (math.log10(v) - math.log10(low)) / (math.log10(high) - math.log10(low))
        else:
            frac = v / high
        return label_w + PLOT_W * frac

    width = label_w + PLOT_W + NOTE_W
    height = TOP + ROW * max(len(rows), 1) + BOTTOM
    bottom = TOP + ROW * len(rows)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<title>{escape(title)}</title>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="8" y="18" font-size="14" font-weight="bold">{escape(title)}</text>']
    if subtitle:
        out.append(f'<text x="8" y="34" fill="#444">{escape(subtitle)}</text>')
    legend_y = 48
    out += [f'<rect x="{label_w}" y="{legend_y - 9}" width="12" height="10" fill="#7aa6d6"/>',
            f'<text x="{label_w + 16}" y="{legend_y}">estimated cycles</text>',
            f'<rect x="{label_w + 130}" y="{legend_y - 6}" width="12" height="4" fill="{LIMIT_COLOURS["MACs"]}"/>',
            f'<text x="{label_w + 146}" y="{legend_y}">bound: MAC array</text>',
            f'<rect x="{label_w + 260}" y="{legend_y - 6}" width="12" height="4" fill="{LIMIT_COLOURS["bus"]}"/>',
            f'<text x="{label_w + 276}" y="{legend_y}">bound: external bus</text>',
            f'<text x="{label_w + PLOT_W + 6}" y="{legend_y}">util %, cycles / bound</text>']
    for t in _ticks(log, low, high):
        tx = x(t)
        out += [f'<line x1="{tx:.1f}" y1="{TOP - 4}" x2="{tx:.1f}" y2="{bottom}" stroke="#ddd"/>',
                f'<text x="{tx:.1f}" y="{bottom + 14}" text-anchor="middle">{_fmt(t)}</text>']
    axis = "cycles (logarithmic axis)" if log else "cycles"
    out.append(f'<text x="{label_w + PLOT_W / 2}" y="{bottom + 32}" text-anchor="middle">{axis}</text>')
    for i, r in enumerate(rows):
        y = TOP + ROW * i
        name = quoteattr(r.name)
        ratio = f", {r.cycles / r.bound:.2f}x bound" if r.bound else ""
        tip = escape(f"{r.name}: {r.cycles:,} cycles, bound {r.bound:,}, utilisation "
                     f"{100 * r.utilisation:.1f}%{ratio}" + (f"; {r.detail}" if r.detail else ""))
        out.append(f'<text x="{label_w - 6}" y="{y + BAR - 3}" text-anchor="end">{escape(_short(r.name))}'
                   f'<title>{escape(r.name)}</title></text>')
        if r.missing:
            out.append(f'<text x="{label_w + 4}" y="{y + BAR - 3}" fill="#b00">no estimate: '
                       f'{escape(r.missing[:110])}<title>{escape(r.missing)}</title></text>')
            continue
        left = x(low) if log else label_w
        out.append(f'<rect class="cycles" data-layer={name} x="{left:.1f}" y="{y}" '
                   f'width="{max(x(r.cycles) - left, 0):.1f}" height="{BAR}" fill="#7aa6d6">'
                   f'<title>{tip}</title></rect>')
        if r.bound:
            colour = LIMIT_COLOURS.get(r.limit, LIMIT_COLOURS["MACs"])
            out.append(f'<rect class="bound" data-layer={name} x="{left:.1f}" y="{y + BAR / 2 - 2}" '
                       f'width="{max(x(r.bound) - left, 0):.1f}" height="4" fill="{colour}">'
                       f'<title>{tip}</title></rect>')
        out.append(f'<text x="{label_w + PLOT_W + 6}" y="{y + BAR - 3}">{100 * r.utilisation:.1f}%{ratio}</text>')
    out.append(f'<line x1="{label_w}" y1="{TOP - 4}" x2="{label_w}" y2="{bottom}" stroke="#888"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
