"""Bounded readers for untrusted files: regular files only, sizes checked before allocating.

Every reader of a user's file goes through here (model files, .npz/.npy inputs, JSON
headers), so the rules hold everywhere at once (SECURITY.md):

* only regular files are read (a FIFO would block forever, ``/dev/zero`` never ends), and a
  file larger than the memory budget is refused before it is read;
* a ``.npy`` array's declared shape and dtype are checked against the TOSA level, the memory
  budget (tosa_ir/limits.py) and the bytes actually present before the array is allocated;
  object arrays are refused;
* ``.npz`` archives are read member by member through the same check; a corrupt zip, a bad
  CRC or a truncated member is a one-line InvalidInput;
* JSON is size- and depth-bounded before parsing.

Every failure is :class:`tosa_ir.errors.InvalidInput` with a message naming the file.
"""
from __future__ import annotations

import json
import os
import stat
import zipfile
import zlib

import numpy as np

from tosa_ir.errors import InvalidInput
from tosa_ir.limits import MAX_JSON_BYTES, MAX_JSON_DEPTH, check_elements, memory_budget

__all__ = ["check_regular_file", "read_file", "load_json", "parse_json", "load_npz", "load_npy",
           "read_npy_bytes"]


def check_regular_file(path, what: str = "file") -> int:
    """Size of ``path`` in bytes; InvalidInput unless it is a regular file (symlinks followed)
    no larger than the memory budget."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read {what}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput(f"{path}: not a regular file (a {_kind(st.st_mode)}); cannot read {what}")
    if st.st_size > memory_budget():
        raise InvalidInput(f"{path}: {st.st_size} bytes, more than the memory budget of "
                           f"{memory_budget()} bytes (NPU_MEMORY_BUDGET)")
    return st.st_size


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def read_file(path, what: str = "file", max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (default: the budget).

    Opened non-blocking, so a FIFO swapped in after the check cannot block us either.
    """
    size = check_regular_file(path, what)
    limit = memory_budget() if max_bytes is None else max_bytes
    if size > limit:
        raise InvalidInput(f"{path}: {size} bytes, more than the {limit} a {what} may have")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise InvalidInput(f"{path}: not a regular file; cannot read {what}")
            # read(n) allocates n bytes up front: ask for what is there (plus one, to see growth).
            data = f.read(min(st.st_size, limit) + 1)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read {what}: {e.strerror}") from None
    if len(data) > limit:
        raise InvalidInput(f"{path}: more than the {limit} bytes a {what} may have")
    return data


# -- JSON ---------------------------------------------------------------------------------
def _depth(text: str) -> int:
    """Deepest bracket nesting of JSON ``text`` (strings skipped), without recursion."""
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]}... out of range")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(data: bytes | str, where: str):
    """Parse untrusted JSON: size and depth bounded, no NaN/Infinity, numbers of sane length."""
    if len(data) > MAX_JSON_BYTES:
        raise InvalidInput(f"{where}: JSON of {len(data)} bytes, more than {MAX_JSON_BYTES}")
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if _depth(text) > MAX_JSON_DEPTH:
        raise InvalidInput(f"{where}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text, parse_float=_finite_float, parse_constant=_no_constant,
                          parse_int=_bounded_int)
    except (ValueError, RecursionError) as e:
        raise InvalidInput(f"{where}: not valid JSON: {str(e).splitlines()[0] if str(e) else type(e).__name__}") \
            from None


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:
        raise ValueError(f"integer {text[:20]}... out of range")
    return int(text)


def load_json(path, what: str = "JSON file"):
    """Read and parse the JSON file ``path`` (see :func:`parse_json`)."""
    return parse_json(read_file(path, what, MAX_JSON_BYTES), str(path))


# -- .npy / .npz --------------------------------------------------------------------------
def _npy_header(f, where: str, available: int):
    """Read a .npy header from ``f``; returns (shape, dtype, fortran, data_bytes)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        start = f.tell() if hasattr(f, "tell") else None
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f, max_header_size=10000)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=10000)
        else:
            raise ValueError(f"unknown .npy version {version}")
        header_bytes = (f.tell() if start is not None else 0)
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as e:
        raise InvalidInput(f"{where}: not a valid .npy array: {_one_line(e)}") from None
    if dtype.hasobject:
        raise InvalidInput(f"{where}: holds Python objects; only numeric arrays are read")
    try:
        count = check_elements(shape, dtype.itemsize, where)
    except ValueError as e:
        raise InvalidInput(str(e)) from None
    need = count * dtype.itemsize
    if available >= 0 and header_bytes + need > available:
        raise InvalidInput(f"{where}: declares shape {list(shape)} {dtype} ({need} bytes) but holds only "
                           f"{max(available - header_bytes, 0)} bytes of data")
    return shape, dtype, fortran, need


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def read_npy_bytes(f, where: str, available: int) -> np.ndarray:
    """One array from the open binary stream ``f`` holding ``available`` bytes in all."""
    shape, dtype, fortran, need = _npy_header(f, where, available)
    try:
        data = f.read(need)
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise InvalidInput(f"{where}: cannot read: {_one_line(e)}") from None
    if len(data) != need:
        raise InvalidInput(f"{where}: truncated ({len(data)} of {need} data bytes)")
    array = np.frombuffer(data, dtype=dtype)
    if fortran:
        return array.reshape(shape[::-1]).transpose().copy()
    return array.reshape(shape).copy()


def load_npy(path, what: str = "array") -> np.ndarray:
    """A ``.npy`` file, bounded (see the module docstring)."""
    size = check_regular_file(path, what)
    try:
        with open(path, "rb") as f:
            return read_npy_bytes(f, str(path), size)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read {what}: {e.strerror}") from None


def load_npz(path, what: str = "inputs") -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive ``path``, keyed by name (``.npy`` suffix dropped).

    A single ``.npy`` file is accepted too, keyed ``"arr_0"`` as numpy does.
    """
    check_regular_file(path, what)
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read {what}: {e.strerror}") from None
    if head == b"\x93NUMPY":
        return {"arr_0": load_npy(path, what)}
    arrays: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename:          # (zipfile's is_dir() indexes the name)
                    raise InvalidInput(f"{path}: not a valid .npz file: a member without a name")
                if info.is_dir():
                    continue
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                where = f"{path}!{info.filename}"
                if info.file_size > memory_budget():
                    raise InvalidInput(f"{where}: {info.file_size} bytes, more than the memory budget")
                with z.open(info) as member:
                    arrays[name] = read_npy_bytes(member, where, info.file_size)
    except InvalidInput:
        raise
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError,
            RuntimeError) as e:
        raise InvalidInput(f"{path}: not a valid .npz file: {_one_line(e)}") from None
    return arrays
