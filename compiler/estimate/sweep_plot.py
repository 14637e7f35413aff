"""The design-space sweep (compiler/estimate/sweep.py) as a standalone SVG chart.

Like compiler/estimate/plot.py: no plotting library, a few rectangles and text elements.  Three
panels side by side, one row per sweep point: estimated cycles (with the roofline bound drawn
over the bar as a thin black bar), MAC utilisation (whole model, and the convolutions alone as
a thin bar), and the speed-up over the 16x16 point (a dashed line at 1x).  Every bar has a
``class`` (``cycles``, ``bound``, ``util``, ``conv-util``, ``speedup``) and a ``data-point``
attribute, so tests and tools can find them.
"""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

__all__ = ["sweep_svg"]

ROW, BAR = 24, 16
LABEL_W, PANEL_W, GAP = 130, 230, 40
TOP, BOTTOM = 64, 30
COLOURS = {"cycles": "#4a7ab7", "util": "#3c9a5f", "speedup": "#b5533c"}


def _text(x, y, s, size=11, anchor="start", weight="normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}">{escape(s)}</text>')


def sweep_svg(title: str, results, subtitle: str = "") -> str:
    """The chart of ``results`` (:class:`compiler.estimate.sweep.SweepResult`, speed-ups filled in)."""
    n = len(results)
    width = LABEL_W + 3 * PANEL_W + 2 * GAP + 20
    height = TOP + n * ROW + BOTTOM
    max_cycles = max([max(r.cycles, r.bound) for r in results] + [1])
    max_speed = max([r.speedup for r in results] + [1.0])
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif">'),
           f'<rect width="{width}" height="{height}" fill="white"/>',
           _text(10, 20, title, 14, weight="bold"), _text(10, 38, subtitle, 11)]
    panels = (("cycles (bound: black)", "cycles"), ("MAC utilisation % (convs: thin)", "util"),
              ("speed-up over 16x16", "speedup"))
    for p, (head, _) in enumerate(panels):
        out.append(_text(LABEL_W + p * (PANEL_W + GAP), TOP - 8, head, 11, weight="bold"))
    for i, r in enumerate(results):
        y = TOP + i * ROW
        name = quoteattr(r.point.label)
        out.append(_text(LABEL_W - 8, y + BAR - 3, r.point.label, 11, "end"))
        x0 = LABEL_W
        w = PANEL_W * r.cycles / max_cycles
        out.append(f'<rect class="cycles" data-point={name} x="{x0}" y="{y}" width="{w:.1f}" '
                   f'height="{BAR}" fill="{COLOURS["cycles"]}"><title>{r.cycles:,} cycles'
                   f'</title></rect>')
        if r.bound:
            bw = PANEL_W * r.bound / max_cycles
            out.append(f'<rect class="bound" data-point={name} x="{x0}" y="{y + BAR / 2 - 2}" '
                       f'width="{bw:.1f}" height="4" fill="#222"><title>bound {r.bound:,}'
                       f'</title></rect>')
        out.append(_text(x0 + w + 3, y + BAR - 3, f"{r.cycles / 1e6:.2f}M", 10))
        x0 = LABEL_W + PANEL_W + GAP
        w = PANEL_W * 0.8 * r.utilisation
        out.append(f'<rect class="util" data-point={name} x="{x0}" y="{y}" width="{w:.1f}" '
                   f'height="{BAR}" fill="{COLOURS["util"]}"/>')
        cw = PANEL_W * 0.8 * r.conv_utilisation
        out.append(f'<rect class="conv-util" data-point={name} x="{x0}" y="{y + BAR / 2 - 2}" '
                   f'width="{cw:.1f}" height="4" fill="#222"/>')
        out.append(_text(x0 + max(w, cw) + 3, y + BAR - 3,
                         f"{100 * r.utilisation:.0f}% / {100 * r.conv_utilisation:.0f}%", 10))
        x0 = LABEL_W + 2 * (PANEL_W + GAP)
        w = PANEL_W * 0.85 * r.speedup / max_speed
        out.append(f'<rect class="speedup" data-point={name} x="{x0}" y="{y}" width="{w:.1f}" '
                   f'height="{BAR}" fill="{COLOURS["speedup"]}"/>')
        out.append(_text(x0 + w + 3, y + BAR - 3, f"{r.speedup:.2f}x", 10))
    one = LABEL_W + 2 * (PANEL_W + GAP) + PANEL_W * 0.85 / max_speed
    out.append(f'<line x1="{one:.1f}" y1="{TOP - 4}" x2="{one:.1f}" y2="{TOP + n * ROW}" '
               f'stroke="#555" stroke-dasharray="3,3"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
