"""Kernel taps grouped into packed pixels: the geometry shared by tap packing (the array
regroups pixels, tap_packing.py) and input patches (the host does, input_patches.py).

Along one axis with stride ``s``, ``g`` consecutive input pixels share one packed pixel and
packed pixels are ``s`` input pixels apart (``g >= s``), or, unpacked, ``s = g = 1`` over the
input's own pixels.  Packed tap ``j`` then covers kernel positions ``s*j .. s*j+g-1``; taps
overlap when ``g > s``, and each kernel position belongs to the first tap covering it (the
later ones hold the weight zero point there, which adds exactly 0).
"""
from __future__ import annotations

from compiler.core.views import ceil_div

__all__ = ["taps_per_row", "tap_of"]


def taps_per_row(k: int, s: int, g: int) -> int:
    """Taps covering a kernel of ``k`` positions: tap ``j`` covers ``s*j .. s*j+g-1``."""
    return 1 + max(0, ceil_div(k - g, s))


def tap_of(kx: int, s: int, g: int) -> tuple[int, int]:
    """(tap, position in the packed pixel) that multiplies kernel position ``kx``."""
    j = max(0, ceil_div(kx - g + 1, s))
    return j, kx - s * j
