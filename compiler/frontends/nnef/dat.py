"""NNEF tensor data files (``.dat``): read and write every encoding.

The layout is the NNEF 1.0 "Tensor File Format" (spec section 5.2): a 128-byte header
(magic ``N\\xEF``, version, data length, rank, 8 extents, bits per item, a 4-byte item-type
code and 32 bytes of code parameters) followed by the items as a bit stream.

Item-type codes: the low 16 bits of the little-endian code word are the algorithm, the high
16 bits the vendor (0 = Khronos), as the Khronos parser (``nnef`` package) reads them.  Two
numbering schemes exist and both are read:

=======  ===========================================  =====================================
code     spec 1.0 text                                 Khronos tools (``nnef.binary``)
=======  ===========================================  =====================================
0x00     float (16/32/64 bits)                        float
0x01     integer; parameter word 0 != 0 -> signed     unsigned int (signed if param != 0)
0x02     -                                            quantized unsigned int (graph.quant)
0x03     -                                            quantized signed int (graph.quant)
0x04     -                                            signed int
0x05     -                                            bool (1 or 8 bits)
0x10     linear quantized: params min, max (float32)  -
0x11     logarithmic quantized: params min, max       -
=======  ===========================================  =====================================

Items whose width is a multiple of 8 are little-endian; other widths (1-bit bools, 4-bit
codes, ...) are a continuous MSB-first bit stream, the order the Khronos parser packs bools
in, with the last byte zero-padded.

The reader returns a :class:`DatTensor`: the values as numpy (float data as float32/64/16,
integers as int64, bools as bool) plus, for quantized encodings, the raw codes and how to
read them.  Every problem is :class:`InvalidInput` naming the file; a vendor-specific code
is :class:`Unsupported`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from tosa_ir.errors import InvalidInput, Unsupported

HEADER_SIZE = 128
MAX_RANK = 8
MAGIC = b"N\xef"

# Algorithm codes (low 16 bits of the item-type word).
FLOAT = 0x00
UINT = 0x01          # spec: "uncompressed integer", signedness in parameter word 0
QUINT = 0x02
QINT = 0x03
INT = 0x04
BOOL = 0x05
LINEAR = 0x10
LOGARITHMIC = 0x11

KIND_NAMES = {FLOAT: "float", UINT: "integer", QUINT: "quantized unsigned",
              QINT: "quantized signed", INT: "signed integer", BOOL: "bool",
              LINEAR: "linear quantized", LOGARITHMIC: "logarithmic quantized"}


@dataclass
class DatTensor:
    """One decoded tensor file.

    Attributes
    ----------
    values
        The tensor's values: float (decoded for the quantized codes 0x10/0x11), int64 for
        integer codes, bool for bools.  For 0x02/0x03 (quantized ints whose meaning is in
        graph.quant) these are the integer codes.
    kind
        "float", "int", "bool", "qint" (codes 0x02/0x03, meaning given by graph.quant),
        "linear" or "logarithmic".
    bits
        Bits per item in the file.
    signed
        Whether integer codes are signed.
    codes
        The raw integer codes for quantized kinds, else None.
    qmin, qmax
        Parameters of the 0x10/0x11 codes (value of the all-zero / all-one code).
    """

    values: np.ndarray
    kind: str
    bits: int
    signed: bool = False
    codes: np.ndarray | None = None
    qmin: float = 0.0
    qmax: float = 0.0

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


# ---------------------------------------------------------------------------------------
# Bit streams
# ---------------------------------------------------------------------------------------
def _unpack_bits(raw: bytes, count: int, bits: int) -> np.ndarray:
    """``count`` unsigned ``bits``-wide items from an MSB-first bit stream, as uint64."""
    stream = np.unpackbits(np.frombuffer(raw, dtype=np.uint8))[: count * bits]
    items = stream.reshape(count, bits).astype(np.uint64)
    weights = (np.uint64(1) << np.arange(bits - 1, -1, -1, dtype=np.uint64))
    return (items * weights).sum(axis=1, dtype=np.uint64) if count else np.zeros(0, np.uint64)


def _pack_bits(values: np.ndarray, bits: int) -> bytes:
    """Unsigned items (< 2**bits) as an MSB-first bit stream, zero-padded to whole bytes."""
    v = np.asarray(values, dtype=np.uint64).reshape(-1, 1)
    shifts = np.arange(bits - 1, -1, -1, dtype=np.uint64)
    stream = ((v >> shifts) & np.uint64(1)).astype(np.uint8).reshape(-1)
    return np.packbits(stream).tobytes()


def _read_uints(raw: bytes, count: int, bits: int) -> np.ndarray:
    """Unsigned integer items of any width 1..64 as uint64."""
    if bits in (8, 16, 32, 64):
        return np.frombuffer(raw, dtype=f"<u{bits // 8}", count=count).astype(np.uint64)
    return _unpack_bits(raw, count, bits)


def _sign_extend(u: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement reinterpretation of ``bits``-wide unsigned items, as int64."""
    if bits == 64:
        return u.view(np.int64).copy()
    v = u.astype(np.int64)
    return np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------
def read_dat(data: bytes, where: str = "<tensor>") -> DatTensor:
    """Decode the bytes of one ``.dat`` file.

    Parameters
    ----------
    data
        The whole file.
    where
        File name for messages.

    Raises
    ------
    InvalidInput
        Truncated or corrupted file, inconsistent header.
    Unsupported
        Vendor-specific item type.
    """
    if len(data) < HEADER_SIZE:
        raise InvalidInput(f"{where}: truncated tensor file ({len(data)} bytes, the header "
                           f"alone is {HEADER_SIZE})")
    if data[:2] != MAGIC:
        raise InvalidInput(f"{where}: not an NNEF tensor file (magic {data[:2]!r}, "
                           f"expected {MAGIC!r})")
    major, minor = data[2], data[3]
    if major != 1:
        raise InvalidInput(f"{where}: unsupported tensor file version {major}.{minor}")
    data_length, rank = struct.unpack_from("<II", data, 4)
    if rank > MAX_RANK:
        raise InvalidInput(f"{where}: rank {rank} exceeds the maximum of {MAX_RANK}")
    extents = struct.unpack_from(f"<{MAX_RANK}I", data, 12)
    shape = tuple(extents[:rank])
    if any(e != 0 for e in extents[rank:]):
        raise InvalidInput(f"{where}: extents beyond rank {rank} must be zero")
    bits, code = struct.unpack_from("<II", data, 44)
    params = data[52:84]
    vendor, algo = code >> 16, code & 0xFFFF
    if vendor != 0:
        raise Unsupported(f"{where}: vendor-specific item type 0x{code:08x}")
    if algo not in KIND_NAMES:
        raise InvalidInput(f"{where}: unknown item type code 0x{algo:02x}")
    if not 1 <= bits <= 64:
        raise InvalidInput(f"{where}: {bits} bits per item (must be 1..64)")
    count = 1
    for e in shape:                 # Python ints: np.prod wraps around (and may give 0)
        count *= e
    expected = (count * bits + 7) // 8
    if data_length != expected:
        raise InvalidInput(f"{where}: header says {data_length} data bytes but shape "
                           f"{list(shape)} at {bits} bits per item needs {expected}")
    body = data[HEADER_SIZE:]
    if len(body) < expected:
        raise InvalidInput(f"{where}: truncated tensor file: {len(body)} of {expected} "
                           f"data bytes present")
    if len(body) > expected:
        raise InvalidInput(f"{where}: {len(body) - expected} bytes after the tensor data")
    return _decode(body, shape, count, bits, algo, params, where)


def _decode(raw: bytes, shape, count: int, bits: int, algo: int, params: bytes,
            where: str) -> DatTensor:
    kind_name = KIND_NAMES[algo]
    if algo == FLOAT:
        if bits not in (16, 32, 64):
            raise InvalidInput(f"{where}: float items must be 16, 32 or 64 bits, not {bits}")
        values = np.frombuffer(raw, dtype=f"<f{bits // 8}", count=count)
        return DatTensor(values.astype(f"f{bits // 8}").reshape(shape), "float", bits)
    if algo == BOOL:
        if bits not in (1, 8):
            raise InvalidInput(f"{where}: bool items must be 1 or 8 bits, not {bits}")
        values = _read_uints(raw, count, bits) != 0
        return DatTensor(values.reshape(shape), "bool", bits)
    u = _read_uints(raw, count, bits)
    if algo in (UINT, INT, QUINT, QINT):
        (flag,) = struct.unpack_from("<I", params, 0)
        signed = algo in (INT, QINT) or (algo == UINT and flag != 0)
        if bits == 64 and not signed and u.size and int(u.max()) >= 1 << 63:
            raise InvalidInput(f"{where}: unsigned 64-bit values beyond the int64 range")
        values = (_sign_extend(u, bits) if signed else u.astype(np.int64)).reshape(shape)
        kind = "qint" if algo in (QUINT, QINT) else "int"
        return DatTensor(values, kind, bits, signed, values if kind == "qint" else None)
    qmin, qmax = struct.unpack_from("<ff", params, 0)
    if not (np.isfinite(qmin) and np.isfinite(qmax)):
        raise InvalidInput(f"{where}: {kind_name} parameters min={qmin}, max={qmax} "
                           f"are not finite")
    if algo == LINEAR:
        r = float((1 << bits) - 1)
        codes = u.astype(np.int64).reshape(shape)
        values = (codes / r * (float(qmax) - float(qmin)) + float(qmin)).astype(np.float32)
        return DatTensor(values, "linear", bits, False, codes, qmin, qmax)
    # Logarithmic: min is 0 (unsigned codes) or -max (signed: the MSB is the sign bit).
    if qmax <= 0:
        raise InvalidInput(f"{where}: logarithmic quantization needs max > 0, got {qmax}")
    if qmin == 0:
        signed, mag_bits = False, bits
    elif qmin == -qmax:
        if bits < 2:
            raise InvalidInput(f"{where}: signed logarithmic codes need at least 2 bits")
        signed, mag_bits = True, bits - 1
    else:
        raise InvalidInput(f"{where}: logarithmic quantization needs min = 0 or -max, "
                           f"got min={qmin}, max={qmax}")
    m = int(np.ceil(np.log2(float(qmax))))
    r = (1 << mag_bits) - 1
    mag = (u & np.uint64(r)).astype(np.int64)
    values = np.exp2((mag + (m - r)).astype(np.float64))
    if signed:
        negative = (u >> np.uint64(mag_bits)) & np.uint64(1)
        values = np.where(negative.astype(bool), -values, values)
    codes = u.astype(np.int64).reshape(shape)
    return DatTensor(values.astype(np.float32).reshape(shape), "logarithmic", bits, signed,
                     codes, qmin, qmax)


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------
def _header(shape, bits: int, code: int, params: bytes = b"", version=(1, 0)) -> bytes:
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_RANK:
        raise ValueError(f"rank {len(shape)} exceeds {MAX_RANK}")
    count = int(np.prod(shape, dtype=np.int64))
    head = MAGIC + bytes(version)
    head += struct.pack("<II", (count * bits + 7) // 8, len(shape))
    head += struct.pack(f"<{MAX_RANK}I", *(list(shape) + [0] * (MAX_RANK - len(shape))))
    head += struct.pack("<II", bits, code)
    head += params.ljust(32, b"\0")
    return head.ljust(HEADER_SIZE, b"\0")


def _int_items(values: np.ndarray, bits: int, signed: bool) -> bytes:
    v = np.asarray(values).astype(np.int64).reshape(-1)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if v.size and (v.min() < lo or v.max() > hi):
        raise ValueError(f"values outside the {bits}-bit {'signed' if signed else 'unsigned'} "
                         f"range")
    if bits in (8, 16, 32, 64):
        return v.astype(f"<{'i' if signed else 'u'}{bits // 8}").tobytes()
    return _pack_bits(v.astype(np.uint64) & np.uint64((1 << bits) - 1), bits)


def write_float(values: np.ndarray, bits: int = 32) -> bytes:
    """Float tensor (code 0x00) of 16, 32 or 64 bits per item."""
    arr = np.ascontiguousarray(np.asarray(values), dtype=f"<f{bits // 8}")
    return _header(arr.shape, bits, FLOAT) + arr.tobytes()


def write_int(values: np.ndarray, bits: int, signed: bool, scheme: str = "spec") -> bytes:
    """Integer tensor.

    ``scheme="spec"`` writes code 0x01 with the signedness flag (spec text); ``"khronos"``
    writes 0x04 for signed, 0x01 for unsigned (the Khronos tools' numbering).
    """
    arr = np.asarray(values)
    if scheme == "khronos" and signed:
        return _header(arr.shape, bits, INT) + _int_items(arr, bits, True)
    params = struct.pack("<I", 1 if signed else 0)
    return _header(arr.shape, bits, UINT, params) + _int_items(arr, bits, signed)


def write_qint(codes: np.ndarray, bits: int, signed: bool) -> bytes:
    """Quantized integer codes (0x03 signed / 0x02 unsigned) read through graph.quant."""
    arr = np.asarray(codes)
    return _header(arr.shape, bits, QINT if signed else QUINT) + _int_items(arr, bits, signed)


def write_bool(values: np.ndarray, bits: int = 1) -> bytes:
    """Bool tensor (code 0x05), 1 bit (packed MSB first) or 8 bits per item."""
    arr = np.asarray(values).astype(bool)
    return _header(arr.shape, bits, BOOL) + _int_items(arr.astype(np.int64), bits, False)


def linear_codes(values: np.ndarray, qmin: float, qmax: float, bits: int) -> np.ndarray:
    """Spec encoding of linear quantization: round(clamp((x-min)/(max-min), 0, 1) * r)."""
    r = (1 << bits) - 1
    x = np.asarray(values, dtype=np.float64)
    t = np.clip((x - qmin) / (qmax - qmin), 0.0, 1.0)
    return np.floor(t * r + 0.5).astype(np.int64)   # round() as the spec defines it


def log_codes(values: np.ndarray, qmax: float, bits: int, signed: bool) -> np.ndarray:
    """Spec encoding of logarithmic quantization; signed codes carry the sign in the MSB."""
    mag_bits = bits - 1 if signed else bits
    r = (1 << mag_bits) - 1
    m = int(np.ceil(np.log2(qmax)))
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore"):
        lg = np.log2(np.abs(x))
    q = np.floor(np.clip(lg, m - r, m) + 0.5).astype(np.int64) - (m - r)
    if signed:
        q = q | ((x < 0).astype(np.int64) << mag_bits)
    return q


def write_linear(values: np.ndarray, qmin: float, qmax: float, bits: int = 8) -> bytes:
    """Linear-quantized tensor (code 0x10) encoding ``values`` with the spec's formula."""
    arr = np.asarray(values)
    codes = linear_codes(arr, qmin, qmax, bits)
    params = struct.pack("<ff", qmin, qmax)
    return _header(arr.shape, bits, LINEAR, params) + _int_items(codes, bits, False)


def write_logarithmic(values: np.ndarray, qmax: float, bits: int = 8,
                      signed: bool = True) -> bytes:
    """Logarithmic-quantized tensor (code 0x11); min = -max when signed, else 0."""
    arr = np.asarray(values)
    codes = log_codes(arr, qmax, bits, signed)
    params = struct.pack("<ff", -qmax if signed else 0.0, qmax)
    return _header(arr.shape, bits, LOGARITHMIC, params) + _int_items(codes, bits, False)
