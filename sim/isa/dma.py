"""DMA_LOAD and DMA_STORE in element mode (``elem != 0``; isa/instructions.py docs), for
sim/isa/units.py, which keeps the word-mode fast path.  Errors are checked there (shared
with word mode) before these functions touch any state.

External elements are gathered and scattered through a strided numpy view of external
memory (strides may be negative or zero); a line is packed into the bytes of its ``K``
scratchpad words with ``reshape`` and slicing (packed lines, ``pack = 1``: into the bytes of
its plane's words).
"""
from __future__ import annotations

import numpy as np

from isa import dma
from isa.instructions import Sram, Unit


def _ext_view(state, v: dict) -> np.ndarray:
    """The transferred elements as a (len2, len1, len0, E) view of external memory (the
    ndarray constructor checks the view stays inside the buffer)."""
    e = v["elem"]
    return np.ndarray((v["len2"], v["len1"], v["len0"], e), dtype=np.uint8, buffer=state.ext,
                      offset=v["ext_addr"], strides=(v["stride2"], v["stride1"], v["stride0"], 1))


def load(state, v: dict, sram: Sram, span, footprint, check_rows):
    """Element-mode DMA_LOAD; ``span`` from isa.dma.ext_span (already range-checked)."""
    bus, e = state.bus, v["elem"]
    k, nl = dma.line_words(v, bus, False), dma.lines(v, False)
    count = dma.sram_words(v, bus, False)
    dst = v["sram_addr"]
    words = state.dma_words[sram]
    check_rows(sram.name, dst, count, words.shape[0])
    fp = footprint(Unit.DMA, writes=[(sram.name, (dst, dst + count))])
    if count == 0:
        return fp
    # Packed lines: each line is its elements' bytes exactly (no word rounding) and the plane
    # is rounded up to whole words once, with pad_value after its end.
    packed = dma.packed(v, False)
    line_bytes = dma.line_elements(v, False) * e if packed else k * bus
    plane_bytes = dma.plane_words(v, bus, False) * bus
    out = np.full((v["len2"], plane_bytes), v["pad_value"], dtype=np.uint8)
    lines = out[:, :nl * line_bytes].reshape(v["len2"], nl, line_bytes)
    if span is not None:
        state.ensure_ext(span[1])
        pb1, pb0, len1, len0 = v["pad_b1"], v["pad_b0"], v["len1"], v["len0"]
        lines[:, pb1:pb1 + len1, pb0 * e:(pb0 + len0) * e] = _ext_view(state, v).reshape(v["len2"], len1, len0 * e)
    words[dst:dst + count] = out.reshape(count, bus)
    return fp


def _disjoint(v: dict) -> bool:
    """No two element bytes of the transfer share an address (a sufficient test)."""
    e, s0, s1, s2 = v["elem"], abs(v["stride0"]), v["stride1"], v["stride2"]
    line = (v["len0"] - 1) * s0 + e
    plane = (v["len1"] - 1) * s1 + line
    return ((v["len0"] == 1 or s0 >= e) and (v["len1"] == 1 or s1 >= line)
            and (v["len2"] == 1 or s2 >= plane))


def store(state, v: dict, span, footprint, check_rows):
    """Element-mode DMA_STORE from ASRAM; ``span`` already range-checked."""
    bus, e = state.bus, v["elem"]
    k = dma.line_words(v, bus, True)
    count = dma.sram_words(v, bus, True)
    src = v["sram_addr"]
    check_rows(Sram.ASRAM.name, src, count, state.asram.shape[0])
    fp = footprint(Unit.DMA, reads=[(Sram.ASRAM.name, (src, src + count))])
    if count == 0:
        return fp
    len2, len1, len0 = v["len2"], v["len1"], v["len0"]
    data = state.asram[src:src + count].reshape(len2, len1, k * bus)[:, :, :len0 * e].reshape(len2, len1, len0, e)
    end = -(-span[1] // bus) * bus          # memory grows by whole words, as the bus writes
    state.ensure_ext(end)
    state.written_end = max(state.written_end, end)
    view = _ext_view(state, v)
    if _disjoint(v):
        view[...] = data
    else:
        # Overlapping elements: the last writer in program order wins.  Numpy does not
        # define the order of repeated-index assignment, so keep each byte's last writer.
        idx = (v["ext_addr"] + np.arange(len2)[:, None, None, None] * v["stride2"]
               + np.arange(len1)[None, :, None, None] * v["stride1"]
               + np.arange(len0)[None, None, :, None] * v["stride0"] + np.arange(e)).ravel()
        uniq, first_rev = np.unique(idx[::-1], return_index=True)
        state.ext[uniq] = data.ravel()[idx.size - 1 - first_rev]
    return fp
