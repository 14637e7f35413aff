"""Byte and text mutations for the fuzzers: deterministic for a given ``random.Random``.

Binary formats get bit flips, interesting integers written over aligned words (0, -1, 2^31-1,
2^32-1, 2^40, sizes just past a boundary: what declared sizes, counts and offsets are made
of), chunk deletion, duplication and splicing.  Text formats (NNEF, OpenVINO XML, JSON) get
their numbers replaced by interesting ones and their lines duplicated, deleted or swapped,
which reaches shapes, attributes and nesting the byte mutations rarely keep parseable.
"""
from __future__ import annotations

import random
import re
import struct

INTERESTING = [0, 1, -1, 2, 7, 8, 16, 255, 256, 65535, 65536, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1,
               2 ** 32, 2 ** 40, 10 ** 6, 10 ** 9, 10 ** 12, -2 ** 31, -16]


def mutate_bytes(data: bytes, rng: random.Random, rounds: int | None = None) -> bytes:
    buf = bytearray(data) or bytearray(b"\0")
    for _ in range(rounds or rng.randint(1, 4)):
        # Mostly in-place changes (structure kept, declared values hit), rarely length changes.
        kind = rng.choices(range(6), weights=(30, 35, 20, 5, 5, 5))[0]
        at = rng.randrange(len(buf))
        if kind == 0:                                   # bit flip
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == 1:                                 # interesting integer, 1/2/4/8 bytes
            width = rng.choice((1, 2, 4, 8))
            value = rng.choice(INTERESTING) & ((1 << 8 * width) - 1)
            at -= at % width
            buf[at:at + width] = value.to_bytes(width, "little")[:len(buf) - at]
        elif kind == 2:                                 # random byte
            buf[at] = rng.randrange(256)
        elif kind == 3 and len(buf) > 1:                # delete a chunk
            del buf[at:at + rng.randint(1, min(64, len(buf) - at))]
        elif kind == 4:                                 # duplicate a chunk
            chunk = buf[at:at + rng.randint(1, 64)]
            to = rng.randrange(len(buf))
            buf[to:to] = chunk
        else:                                           # truncate
            del buf[max(1, at):]
        if not buf:
            buf = bytearray(b"\0")
    return bytes(buf)


_NUMBER = re.compile(rb"-?\d+(\.\d+)?")


def mutate_text(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:                                       # a number -> an interesting one
        numbers = list(_NUMBER.finditer(data))
        if numbers:
            m = rng.choice(numbers)
            new = str(rng.choice(INTERESTING + [rng.randint(-3, 3)])).encode()
            return data[:m.start()] + new + data[m.end():]
    lines = data.split(b"\n")
    if kind == 1 and len(lines) > 1:                    # delete a line
        del lines[rng.randrange(len(lines))]
    elif kind == 2:                                     # duplicate a line
        k = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[k])
    elif kind == 3 and len(lines) > 1:                  # swap two lines
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
    else:
        return mutate_bytes(data, rng)
    return b"\n".join(lines)


def mutate(data: bytes, rng: random.Random, text: bool = False) -> bytes:
    """One mutant of ``data`` (text formats: text mutations two times in three)."""
    if text and rng.random() < 2 / 3:
        return mutate_text(data, rng)
    return mutate_bytes(data, rng)


def le32(value: int) -> bytes:
    return struct.pack("<I", value & 0xFFFFFFFF)
