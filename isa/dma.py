"""Geometry of DMA_LOAD and DMA_STORE (isa/instructions.py docs), shared by the ISA
simulator, the cycle model, the RTL harness and the compiler.

Both modes are one rule: word mode (``elem == 0``) is element mode with ``E = BUS`` and
``stride0 = BUS``.  All functions take the instruction's field values (a dict, effective
addresses inside LOOPs) and the bus width in bytes; illegal ``elem`` values are the
caller's to reject first (:func:`illegal`).
"""
from __future__ import annotations

from isa.instructions import DMA_ELEM_SIZES


def illegal(v: dict) -> str | None:
    """Why the element-mode fields are illegal (ILLEGAL_INSTRUCTION), or None."""
    if v["elem"] not in (0,) + DMA_ELEM_SIZES:
        return f"elem={v['elem']} is not 0, 1, 2, 4 or 8"
    if v["elem"] == 0 and v["stride0"] != 0:
        return f"stride0={v['stride0']} in word mode (elem=0) must be 0"
    return None


def elem_bytes(v: dict, bus: int) -> int:
    """E: bytes per element (word mode: a bus word)."""
    return v["elem"] or bus


def stride0(v: dict, bus: int) -> int:
    """External bytes between the elements of a line (word mode: BUS)."""
    return v["stride0"] if v["elem"] else bus


def chunks(v: dict, bus: int) -> int:
    """Cycles per element: bus words an element spans (1 unless E > BUS)."""
    return max(1, elem_bytes(v, bus) // bus)


def line_elements(v: dict, store: bool) -> int:
    """Elements of one line, padding included."""
    return v["len0"] if store else v["pad_b0"] + v["len0"] + v["pad_a0"]


def line_words(v: dict, bus: int, store: bool) -> int:
    """K: scratchpad words per line."""
    return -(-line_elements(v, store) * elem_bytes(v, bus) // bus)


def lines(v: dict, store: bool) -> int:
    """Lines per plane, pad lines included."""
    return v["len1"] if store else v["pad_b1"] + v["len1"] + v["pad_a1"]


def packed(v: dict, store: bool) -> bool:
    """A DMA_LOAD with packed lines (``pack = 1``): a plane, not a line, starts a fresh word."""
    return not store and bool(v.get("pack", 0))


def plane_words(v: dict, bus: int, store: bool) -> int:
    """Scratchpad words per plane: K per line, or with packed lines the plane's bytes
    rounded up to a word once."""
    if packed(v, store):
        return -(-lines(v, store) * line_elements(v, store) * elem_bytes(v, bus) // bus)
    return lines(v, store) * line_words(v, bus, store)


def sram_words(v: dict, bus: int, store: bool) -> int:
    """Scratchpad words written (LOAD) or read (STORE)."""
    return v["len2"] * plane_words(v, bus, store)


def slots(v: dict, bus: int, store: bool) -> int:
    """Cycles of the DMA's address generator: one per element (E > BUS: per bus word of
    it), pad elements included."""
    return v["len2"] * lines(v, store) * line_elements(v, store) * chunks(v, bus)


def ext_span(v: dict, bus: int) -> tuple[int, int] | None:
    """Half-open external byte range ``[lo, hi)`` that bounds every byte transferred (the
    exact lowest and highest byte), or None when no element is transferred."""
    if not (v["len0"] and v["len1"] and v["len2"]):
        return None
    inner = (v["len0"] - 1) * stride0(v, bus)
    lo = v["ext_addr"] + min(0, inner)
    hi = (v["ext_addr"] + (v["len2"] - 1) * v["stride2"] + (v["len1"] - 1) * v["stride1"]
          + max(0, inner) + elem_bytes(v, bus))
    return lo, hi


def misaligned(v: dict, bus: int) -> bool:
    """ext_addr or a stride is not a multiple of E."""
    e = elem_bytes(v, bus)
    return any(x % e for x in (v["ext_addr"], v["stride0"], v["stride1"], v["stride2"]))
