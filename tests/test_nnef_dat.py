"""NNEF tensor data files (.dat): every encoding round-trips, the Khronos tools read what we
write and we read what they write, and malformed files are InvalidInput naming the file."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import nnef

from compiler.frontends.nnef import dat
from tosa_ir.errors import InvalidInput, Unsupported

RNG = np.random.default_rng(1234)


@pytest.mark.parametrize("bits", [16, 32, 64])
def test_float_round_trip(bits):
    x = RNG.standard_normal((2, 3, 4)).astype(f"f{bits // 8}")
    t = dat.read_dat(dat.write_float(x, bits), "x.dat")
    assert t.kind == "float" and t.bits == bits and t.shape == (2, 3, 4)
    assert t.values.dtype == x.dtype and np.array_equal(t.values, x)


@pytest.mark.parametrize("bits,signed", [(8, True), (8, False), (16, True), (16, False),
                                         (32, True), (32, False), (64, True), (4, True),
                                         (4, False), (12, True), (3, False), (1, False)])
@pytest.mark.parametrize("scheme", ["spec", "khronos"])
def test_int_round_trip(bits, signed, scheme):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    x = RNG.integers(lo, hi, size=(3, 5), endpoint=True, dtype=np.int64)
    raw = dat.write_int(x, bits, signed, scheme)
    assert len(raw) == 128 + (x.size * bits + 7) // 8
    t = dat.read_dat(raw, "x.dat")
    assert t.kind == "int" and t.signed == signed
    assert np.array_equal(t.values, x)


def test_sub_byte_items_are_an_msb_first_stream():
    # Items 0x1, 0x2, 0x3 at 4 bits -> bytes 0x12 0x30 (last byte zero-padded).
    raw = dat.write_int(np.array([1, 2, 3]), 4, False)
    assert raw[128:] == bytes([0x12, 0x30])


@pytest.mark.parametrize("bits", [1, 8])
def test_bool_round_trip(bits):
    x = RNG.random((4, 7)) > 0.5
    t = dat.read_dat(dat.write_bool(x, bits), "b.dat")
    assert t.kind == "bool" and np.array_equal(t.values, x)


def test_quantized_codes_round_trip():
    codes = RNG.integers(-128, 127, size=(6, 2), endpoint=True)
    t = dat.read_dat(dat.write_qint(codes, 8, True), "q.dat")
    assert t.kind == "qint" and np.array_equal(t.codes, codes)
    u = dat.read_dat(dat.write_qint(codes + 128, 8, False), "q.dat")
    assert u.kind == "qint" and not u.signed and np.array_equal(u.codes, codes + 128)


@pytest.mark.parametrize("bits", [8, 4, 5])
def test_linear_quantized(bits):
    lo, hi = -1.5, 2.5
    x = RNG.uniform(-2.0, 3.0, size=(3, 4)).astype(np.float32)
    t = dat.read_dat(dat.write_linear(x, lo, hi, bits), "l.dat")
    r = (1 << bits) - 1
    # Spec 5.2: q = round(clamp((x - min) / (max - min), 0, 1) * r); x' = q / r * (max - min) + min
    q = np.floor(np.clip((x.astype(np.float64) - lo) / (hi - lo), 0, 1) * r + 0.5)
    assert t.kind == "linear" and (t.qmin, t.qmax) == (lo, hi)
    assert np.array_equal(t.codes, q.astype(np.int64))
    np.testing.assert_allclose(t.values, q / r * (hi - lo) + lo, rtol=1e-6, atol=1e-6)
    assert np.all(np.abs(t.values - np.clip(x, lo, hi)) <= (hi - lo) / r / 2 + 1e-5)


@pytest.mark.parametrize("signed", [True, False])
def test_logarithmic_quantized(signed):
    x = np.array([[4.0, 1.0, 0.5, 0.25], [3.1, 0.7, 1e-9, 2.0]], np.float32)
    if signed:
        x[0, 1], x[1, 0] = -1.0, -3.1
    t = dat.read_dat(dat.write_logarithmic(x, 4.0, 5, signed), "g.dat")
    assert t.kind == "logarithmic" and t.signed == signed
    # m = ceil(log2(4)) = 2; magnitude bits b' = 5 (4 when signed); r = 2**b' - 1;
    # |x'| = 2 ** round(clamp(log2|x|, m - r, m)).
    r = (1 << (4 if signed else 5)) - 1
    expect = np.sign(x) * np.exp2(np.floor(np.clip(np.log2(np.abs(x)), 2 - r, 2) + 0.5))
    np.testing.assert_array_equal(t.values, expect.astype(np.float32))


@pytest.mark.parametrize("array", [
    np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7,
    np.arange(-60, 60, dtype=np.int8).reshape(4, 30),
    np.arange(200, dtype=np.uint8).reshape(10, 20),
    np.arange(-5000, 5000, 7, dtype=np.int32),
    np.array([[True, False, True], [False, False, True]]),
])
def test_khronos_tools_agree(array, tmp_path):
    """nnef.write_tensor / nnef.read_tensor (the Khronos Python tools) as the oracle."""
    path = tmp_path / "k.dat"
    with open(path, "wb") as f:
        nnef.write_tensor(f, array)
    ours = dat.read_dat(path.read_bytes(), "k.dat")
    np.testing.assert_array_equal(ours.values.astype(array.dtype), array)
    if array.dtype == np.bool_:
        raw = dat.write_bool(array)
    elif array.dtype.kind == "f":
        raw = dat.write_float(array)
    else:
        raw = dat.write_int(array, array.dtype.itemsize * 8, array.dtype.kind == "i",
                            "khronos")
    path.write_bytes(raw)
    with open(path, "rb") as f:
        theirs = nnef.read_tensor(f)
    np.testing.assert_array_equal(theirs, array)


def _header_with(**fields) -> bytes:
    raw = bytearray(dat.write_float(np.ones((2, 2), np.float32)))
    for offset, fmt, value in fields.values():
        struct.pack_into(fmt, raw, offset, value)
    return bytes(raw)


@pytest.mark.parametrize("raw,message", [
    (b"", "truncated"),
    (b"N\xef\x01\x00" + bytes(20), "truncated"),
    (b"XY" + dat.write_float(np.ones(3, np.float32))[2:], "not an NNEF tensor file"),
    (_header_with(v=(2, "<B", 2)), "version"),
    (_header_with(r=(8, "<I", 9)), "rank 9"),
    (_header_with(n=(4, "<I", 99)), "data bytes"),
    (dat.write_float(np.ones((2, 2), np.float32))[:-3], "truncated"),
    (dat.write_float(np.ones((2, 2), np.float32)) + b"\0", "after the tensor data"),
    (_header_with(c=(48, "<I", 0x7F)), "unknown item type"),
    (_header_with(b=(44, "<I", 24), n=(4, "<I", 12))[:128 + 12], "float items"),
    (_header_with(e=(20, "<I", 5)), "beyond rank"),
])
def test_malformed_files(raw, message):
    with pytest.raises(InvalidInput, match=message) as err:
        dat.read_dat(raw, "weights/conv1.dat")
    assert "weights/conv1.dat" in str(err.value)


def test_vendor_codes_are_unsupported():
    with pytest.raises(Unsupported, match="vendor"):
        dat.read_dat(_header_with(c=(48, "<I", 0x00010000)), "v.dat")
