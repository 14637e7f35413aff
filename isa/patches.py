"""Patches: a graph input that the host writes as a convolution's input patches.

A convolution with few input channels (an image's 3) fills few of the array's rows per
MATMUL, and its input, one pixel per brick, fills few of each bus word's lanes: ResNet-50's
224x224x3 input is 3 of 64 bytes per word on a 64x64 array.  When such a convolution is the
only reader of a graph input, the compiler may bind that input as *patches*: the host, which
writes the input anyway, writes for every patch position ``(i, j)`` the ``height x width``
pixels below and right of image position ``(step_y*i - top, step_x*j - left)``, channels
innermost, as the channels of one NHWC tensor::

    P[n, i, j, (dy*width + dx)*C + c] = X[n, step_y*i + dy - top, step_x*j + dx - left, c]

(``fill`` where that position lies outside the image: the input zero point, what the
convolution's padding holds), which is then stored in the binding's layout (bricks).  The
convolution on ``P`` reads ``height*width*C`` lanes per tap instead of ``C``: kernel taps
move into the reduction dimension with no work on the NPU (compiler/kinds/conv/patches.py).

This is the host-side input transform of Google's TPU ResNet-50 (space-to-depth of the
image before the 7x7/2 stem), generalised to overlapping patches; the bytes the host writes
are usually fewer than the one-pixel bricks they replace (ResNet-50 at 64x64: 802,816
against 3,211,264).  Applied after the binding's ``perm``; inputs only (it cannot be read
back).  The same transform is in the firmware driver (firmware/src/npu_image.c).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["Patches"]

MAX_PATCH = 1 << 16        # bounds on a header's fields (the header is untrusted: SECURITY.md)


@dataclass(frozen=True)
class Patches:
    """Patch extraction of a rank-4 NHWC tensor (see the module docstring).

    Parameters
    ----------
    height, width : int
        Pixels per patch, down and across.
    step_y, step_x : int
        Image pixels between the first pixels of neighbouring patches.
    top, left : int
        Padding rows above and columns left of the image (patch ``(0, 0)`` starts at
        ``(-top, -left)``).
    rows, cols : int
        Patches down and across.
    fill : int
        Value of patch pixels outside the image.
    """

    height: int
    width: int
    step_y: int
    step_x: int
    top: int
    left: int
    rows: int
    cols: int
    fill: int

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"patches {f.name} must be an integer, not {value!r}")
            low = -(1 << 31) if f.name == "fill" else (0 if f.name in ("top", "left") else 1)
            high = (1 << 31) - 1 if f.name == "fill" else MAX_PATCH
            if not low <= value <= high:
                raise ValueError(f"patches {f.name} = {value} is outside [{low}, {high}]")

    def shape(self, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
        """The stored NHWC shape of a tensor of ``shape`` (rank 4) written as patches."""
        if len(shape) != 4:
            raise ValueError(f"patches need a rank-4 NHWC tensor, not shape {tuple(shape)}")
        n, _, _, c = shape
        return (n, self.rows, self.cols, self.height * self.width * c)

    def extract(self, array: np.ndarray) -> np.ndarray:
        """``P`` of the module docstring, for an NHWC ``array``."""
        array = np.asarray(array)
        self.shape(array.shape)                 # rank 4, else ValueError
        n, h, w, c = array.shape
        # Image rows (columns) every patch row (column) reads, -1 where outside the image.
        ys = self.step_y * np.arange(self.rows)[:, None] + np.arange(self.height)[None, :] - self.top
        xs = self.step_x * np.arange(self.cols)[:, None] + np.arange(self.width)[None, :] - self.left
        ys = np.where((ys >= 0) & (ys < h), ys, -1)
        xs = np.where((xs >= 0) & (xs < w), xs, -1)
        # One extra row and column of ``fill`` that index -1 reaches.
        padded = np.full((n, h + 1, w + 1, c), self.fill, dtype=array.dtype)
        padded[:, :h, :w, :] = array
        p = padded[:, ys[:, None, :, None], xs[None, :, None, :], :]     # n, rows, cols, height, width, c
        return np.ascontiguousarray(p.reshape(self.shape(array.shape)))

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d) -> "Patches":
        """From an image header's object: exactly the fields, each checked."""
        if not isinstance(d, dict):
            raise ValueError("patches must be a JSON object")
        names = [f.name for f in fields(cls)]
        if sorted(d) != sorted(names):
            raise ValueError(f"patches must have exactly the fields {', '.join(names)}")
        return cls(**{k: d[k] for k in names})
