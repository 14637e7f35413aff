"""Running programs on an FPGA board through its UART bridge, with the C driver.

The host side of ``npu board``: the firmware's C driver (firmware/src/) is built once as a
shared library, cached under ``build/firmware/`` (``NPU_BUILD_ROOT`` moves the build root)
and keyed by a hash of its sources and the compiler command, and loaded with ctypes.  Every
register and memory access then goes through the driver's UART transport
(firmware/src/npu_uart.c), which speaks hw/board/protocol.py on the serial port; this module
only sequences the driver's calls and turns its status codes into one-line errors.

A run (:func:`run_on_board`): open the port, PING the bridge (BOARD_ID), parse the image with
the driver, check HW_ID and HW_CONFIG against the program's configuration, load the image
and the inputs, set the watchdog (MAX_CYCLES: the cycle estimate x WATCHDOG_FACTOR +
WATCHDOG_MARGIN, as ``npu run``), START, poll STATUS until the NPU stops and read status,
error code, stop PC and counters, then the outputs.  The host gives up waiting once the
watchdog must have fired even on a board clocked at MIN_CLOCK_HZ: the NPU stops itself at
MAX_CYCLES, so a board that is still busy after that is broken or gone.

Errors are :class:`BoardError` (exit code 2, one line): a port that cannot be opened, a
board that does not answer or answers with bad frames (after the transport's retries), an
NPU that is not the one the program was compiled for, an NPU that stopped with an error.
"""
from __future__ import annotations

import ctypes as C
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hw.board.protocol import BOARD_ID, MAX_PAYLOAD, REQ_HEADER
from hw.csr import BY_NAME, HW_ID, UNITS
from isa.instructions import ErrorCode
from isa.program import Program
from tosa_ir.errors import InvalidInput, Unsupported

__all__ = ["BoardError", "BoardRun", "Driver", "load_driver", "ping", "run_on_board",
           "DEFAULT_BAUD", "DEFAULT_TIMEOUT", "MIN_CLOCK_HZ", "POLL_INTERVAL"]

FIRMWARE = Path(__file__).resolve().parent.parent / "firmware"
DEFAULT_BAUD = 115200
DEFAULT_TIMEOUT = 1.0       # seconds a reply may take beyond its wire time
MIN_CLOCK_HZ = 1_000_000    # the slowest NPU clock the host waits for (see the module text)
POLL_INTERVAL = 0.002       # seconds between STATUS polls
# NPU_XFER_BYTES: the driver stages memory transfers in blocks of one full bridge frame.
CFLAGS = ["-std=c99", "-O2", "-fPIC", "-shared", "-DNPU_XFER_BYTES=1024"]


class BoardError(InvalidInput):
    """The board or the link to it failed (exit code 2, like any unusable input)."""


# -- the driver library ---------------------------------------------------------------------------
def _status_codes() -> dict[int, str]:
    import re

    text = (FIRMWARE / "include" / "npu_driver.h").read_text()
    body = text[text.index("typedef enum npu_status"):text.index("} npu_status_t;")]
    return {int(v): n for n, v in re.findall(r"\b(NPU_\w+) = (-?\d+)", body)}


STATUS = _status_codes()
NPU_OK, NPU_RUNNING = 0, 1
CODE = {name: value for value, name in STATUS.items()}


class ResultC(C.Structure):
    """npu_result_t."""
    _fields_ = [("status", C.c_uint32), ("error_code", C.c_uint32), ("stop_pc", C.c_uint32),
                ("cycles", C.c_uint64), ("unit_busy", C.c_uint64 * len(UNITS))]


class UartC(C.Structure):
    """npu_uart_t (firmware/include/npu_uart.h); its size is checked against the library's."""
    _fields_ = [("fd", C.c_int), ("owns_fd", C.c_int), ("baud", C.c_uint32), ("timeout_ms", C.c_uint32),
                ("max_retries", C.c_uint32), ("requests", C.c_uint32), ("retries", C.c_uint32),
                ("bridge_status", C.c_uint8), ("os_error", C.c_int), ("error", C.c_char * 256),
                ("frame", C.c_uint8 * (REQ_HEADER + MAX_PAYLOAD + 1))]


def _sources() -> list[Path]:
    return sorted((FIRMWARE / "src").glob("*.[ch]")) + sorted((FIRMWARE / "include").glob("*.h"))


def _build_root() -> Path:
    return Path(os.environ.get("NPU_BUILD_ROOT", "build")).resolve()


def build_driver(build_dir: Path | None = None) -> Path:
    """The driver as a shared library, compiled on first use and cached by content hash."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise Unsupported("no C compiler (cc, gcc or clang) on PATH: the board driver is C and must be built")
    key = hashlib.sha256(" ".join([cc, *CFLAGS]).encode())
    for src in _sources():
        key.update(src.name.encode() + b"\0" + src.read_bytes())
    out_dir = (build_dir or _build_root()) / "firmware"
    lib = out_dir / f"libnpu-{key.hexdigest()[:16]}.so"
    if lib.exists():
        return lib
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".so")
        os.close(fd)
    except OSError as e:
        raise InvalidInput(f"{out_dir}: cannot build the board driver there: {e.strerror}") from None
    sources = [str(p) for p in sorted((FIRMWARE / "src").glob("*.c"))]
    run = subprocess.run([cc, *CFLAGS, f"-I{FIRMWARE / 'include'}", *sources, "-o", tmp],
                         capture_output=True, text=True)
    if run.returncode:
        os.unlink(tmp)
        first = (run.stderr.strip().splitlines() or ["(no message)"])[0]
        raise Unsupported(f"building the board driver with {cc} failed: {first}")
    os.replace(tmp, lib)            # atomic: concurrent builds never see a partial library
    return lib


class Driver:
    """The C driver loaded with ctypes, with the signatures the host side calls."""

    def __init__(self, path: Path):
        dll = C.CDLL(str(path))
        vp, sz, u32 = C.c_void_p, C.c_size_t, C.c_uint32
        sigs = {
            "npu_program_parse": (C.c_int, [vp, vp, sz]),
            "npu_find_input": (C.c_int, [vp, C.c_char_p]),
            "npu_find_output": (C.c_int, [vp, C.c_char_p]),
            "npu_load": (C.c_int, [vp, vp]),
            "npu_set_input": (C.c_int, [vp, vp, u32, vp, sz]),
            "npu_get_output": (C.c_int, [vp, vp, u32, vp, sz]),
            "npu_check_hw": (C.c_int, [vp, vp]),
            "npu_set_watchdog": (C.c_int, [vp, u32]),
            "npu_start": (C.c_int, [vp, vp, u32]),
            "npu_poll": (C.c_int, [vp, C.POINTER(ResultC)]),
            "npu_csr_read": (C.c_int, [vp, u32, C.POINTER(u32)]),
            "npu_status_name": (C.c_char_p, [C.c_int]),
            "npu_hw_error_name": (C.c_char_p, [u32]),
            "npu_struct_sizes": (None, [C.POINTER(sz)] * 3),
            "npu_uart_open": (C.c_int, [C.POINTER(UartC), C.c_char_p, u32, u32]),
            "npu_uart_close": (None, [C.POINTER(UartC)]),
            "npu_uart_ping": (C.c_int, [C.POINTER(UartC), C.POINTER(u32)]),
            "npu_uart_size": (sz, []),
            "npu_dev_init_uart": (None, [vp, C.POINTER(UartC), sz]),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(dll, name)
            fn.restype, fn.argtypes = res, args
        self.dll = dll
        sizes = [C.c_size_t() for _ in range(3)]
        dll.npu_struct_sizes(*[C.byref(s) for s in sizes])
        self.program_size, self.dev_size, result_size = (s.value for s in sizes)
        if result_size != C.sizeof(ResultC) or dll.npu_uart_size() != C.sizeof(UartC):
            raise RuntimeError(f"{path}: npu_result_t or npu_uart_t differ from their ctypes mirrors")

    def __getattr__(self, name):
        return getattr(self.dll, name)

    def status_name(self, status: int) -> str:
        return self.dll.npu_status_name(status).decode()


_DRIVERS: dict[Path, Driver] = {}


def load_driver(build_dir: Path | None = None) -> Driver:
    path = build_driver(build_dir)
    if path not in _DRIVERS:
        _DRIVERS[path] = Driver(path)
    return _DRIVERS[path]


# -- a connection ----------------------------------------------------------------------------------
class _Link:
    """An open npu_uart_t on ``port``; :meth:`fail` turns a driver status into BoardError."""

    def __init__(self, drv: Driver, port: str, baud: int, timeout: float):
        if baud <= 0:
            raise InvalidInput(f"--baud {baud}: must be a positive number of bits per second")
        if not timeout > 0:
            raise InvalidInput(f"--timeout {timeout}: must be a positive number of seconds")
        self.drv, self.port = drv, port
        self.uart = UartC()
        s = drv.npu_uart_open(C.byref(self.uart), port.encode(), baud, max(1, round(timeout * 1000)))
        if s == CODE["NPU_E_ARG"]:
            raise Unsupported(f"{port}: {self.error}")
        if s != NPU_OK:
            raise BoardError(self.error if self.error.startswith(port) else f"{port}: {self.error}")

    @property
    def error(self) -> str:
        return self.uart.error.decode(errors="replace")

    def close(self) -> None:
        self.drv.npu_uart_close(C.byref(self.uart))

    def fail(self, status: int, doing: str) -> BoardError:
        detail = self.error if status == CODE["NPU_E_IO"] else self.drv.status_name(status)
        return BoardError(f"{self.port}: {doing}: {detail}")

    def ping(self) -> int:
        board_id = C.c_uint32()
        s = self.drv.npu_uart_ping(C.byref(self.uart), C.byref(board_id))
        if s != NPU_OK:
            raise self.fail(s, "no answer to PING (is the board programmed with the bridge?)")
        if board_id.value != BOARD_ID:
            raise BoardError(f"{self.port}: PING answered with board id 0x{board_id.value:08X}, "
                             f"not the bridge's 0x{BOARD_ID:08X}")
        return board_id.value


def ping(port: str, baud: int = DEFAULT_BAUD, timeout: float = DEFAULT_TIMEOUT,
         build_dir: Path | None = None) -> dict:
    """PING the bridge and read HW_ID and HW_CONFIG: what answers on ``port``."""
    drv = load_driver(build_dir)
    link = _Link(drv, port, baud, timeout)
    try:
        start = time.perf_counter()
        board_id = link.ping()
        seconds = time.perf_counter() - start
        dev = C.create_string_buffer(drv.dev_size)
        drv.npu_dev_init_uart(dev, C.byref(link.uart), 0)
        regs = {}
        for name in ("HW_ID", "HW_CONFIG"):
            value = C.c_uint32()
            s = drv.npu_csr_read(dev, BY_NAME[name].offset, C.byref(value))
            if s != NPU_OK:
                raise link.fail(s, f"reading {name}")
            regs[name] = value.value
        return {"board_id": board_id, "round_trip": seconds, **regs, "retries": link.uart.retries}
    finally:
        link.close()


def describe_hw_config(value: int) -> str:
    """'4x4 array, 16-byte bus, memory latency 4' from a HW_CONFIG value."""
    f = {b.name: value >> b.lsb & ((1 << b.width) - 1) for b in BY_NAME["HW_CONFIG"].bits}
    return (f"{f['ARRAY_ROWS']}x{f['ARRAY_COLS']} array, {f['BUS_BYTES']}-byte bus, "
            f"memory latency {f['MEM_LATENCY']}")


@dataclass
class BoardRun:
    """What a run on the board reported."""
    outputs: dict[str, np.ndarray]
    cycles: int
    busy: dict[str, int]
    stop_pc: int
    seconds: float                      # START to the stop seen by the host
    requests: int                       # frames sent over the whole run, retries included
    retries: int
    polls: int = 0
    info: dict = field(default_factory=dict)


def run_on_board(program: Program, inputs: dict[str, np.ndarray], port: str, max_cycles: int,
                 baud: int = DEFAULT_BAUD, timeout: float = DEFAULT_TIMEOUT,
                 build_dir: Path | None = None, source: str = "") -> BoardRun:
    """Run ``program`` on the board at ``port`` with ``inputs`` (checked by the caller:
    names, shapes and dtypes of ``program.inputs``); the NPU's watchdog is ``max_cycles``."""
    drv = load_driver(build_dir)
    image = program.to_bytes()
    image_buf = C.create_string_buffer(image, len(image))       # the driver points into it
    prog = C.create_string_buffer(drv.program_size)
    s = drv.npu_program_parse(prog, image_buf, len(image))
    where = source or "the program"
    if s == CODE["NPU_E_LIMIT"]:
        raise Unsupported(f"{where}: more segments, tensors or dimensions than the driver is built for")
    if s != NPU_OK:
        raise InvalidInput(f"{where}: the driver refuses the image: {drv.status_name(s)}")
    if max_cycles >= 1 << 32:
        raise Unsupported(f"{where}: a watchdog of {max_cycles} cycles does not fit MAX_CYCLES (32 bits)")
    link = _Link(drv, port, baud, timeout)
    try:
        link.ping()
        dev = C.create_string_buffer(drv.dev_size)
        drv.npu_dev_init_uart(dev, C.byref(link.uart), program.config.ext_mem_bytes)
        _check_hw(drv, link, dev, prog, program)
        s = drv.npu_load(dev, prog)
        if s != NPU_OK:
            raise link.fail(s, "loading the program image")
        for b in program.inputs:
            array = np.ascontiguousarray(inputs[b.name], dtype=np.dtype(b.dtype))
            index = drv.npu_find_input(prog, b.name.encode())
            s = drv.npu_set_input(dev, prog, index, array.ctypes.data, array.nbytes)
            if s != NPU_OK:
                raise link.fail(s, f"writing input {b.name!r}")
        s = drv.npu_set_watchdog(dev, max_cycles)
        if s != NPU_OK:
            raise link.fail(s, "setting the watchdog")
        s = drv.npu_start(dev, prog, 0)
        if s != NPU_OK:
            raise link.fail(s, "starting the NPU")
        start = time.perf_counter()
        result, polls = _wait(drv, link, dev, max_cycles, timeout, start)
        seconds = time.perf_counter() - start
        if result.error_code:
            try:
                name = ErrorCode(result.error_code).name
            except ValueError:
                name = f"code {result.error_code}"
            raise BoardError(f"{where}: the NPU stopped with error {name} at instruction {result.stop_pc} "
                             f"after {result.cycles} cycles")
        outputs = {}
        for b in program.outputs:
            array = np.zeros(b.shape, dtype=np.dtype(b.dtype))
            index = drv.npu_find_output(prog, b.name.encode())
            s = drv.npu_get_output(dev, prog, index, array.ctypes.data, array.nbytes)
            if s != NPU_OK:
                raise link.fail(s, f"reading output {b.name!r}")
            outputs[b.name] = array
        return BoardRun(outputs, result.cycles, {u: result.unit_busy[i] for i, u in enumerate(UNITS)},
                        result.stop_pc, seconds, link.uart.requests, link.uart.retries, polls)
    finally:
        link.close()


def _check_hw(drv: Driver, link: _Link, dev, prog, program: Program) -> None:
    s = drv.npu_check_hw(dev, prog)
    if s == NPU_OK:
        return
    if s not in (CODE["NPU_E_HW_ID"], CODE["NPU_E_HW_CONFIG"]):
        raise link.fail(s, "reading HW_ID and HW_CONFIG")
    name = "HW_ID" if s == CODE["NPU_E_HW_ID"] else "HW_CONFIG"
    value = C.c_uint32()
    s2 = drv.npu_csr_read(dev, BY_NAME[name].offset, C.byref(value))
    if s2 != NPU_OK:
        raise link.fail(s2, f"reading {name}")
    if name == "HW_ID":
        raise BoardError(f"{link.port}: the NPU's HW_ID reads 0x{value.value:08X}, not 0x{HW_ID:08X}: "
                         "a register map this driver does not know")
    from hw.csr import hw_config_value

    raise BoardError(f"{link.port}: the board's NPU is a {describe_hw_config(value.value)}; the program "
                     f"was compiled for a {describe_hw_config(hw_config_value(program.config))}")


def _wait(drv: Driver, link: _Link, dev, max_cycles: int, timeout: float, start: float):
    """Poll until the NPU stops; give up once the watchdog must have fired at MIN_CLOCK_HZ."""
    deadline = start + max_cycles / MIN_CLOCK_HZ + timeout
    result, polls = ResultC(), 0
    while True:
        s = drv.npu_poll(dev, C.byref(result))
        polls += 1
        if s in (NPU_OK, CODE["NPU_E_NPU"]):
            return result, polls
        if s != NPU_RUNNING:
            raise link.fail(s, "polling STATUS")
        if time.perf_counter() > deadline:
            raise BoardError(f"{link.port}: the NPU is still busy {time.perf_counter() - start:.1f} s after "
                             f"START, past its watchdog of {max_cycles} cycles at {MIN_CLOCK_HZ / 1e6:g} MHz")
        time.sleep(POLL_INTERVAL)
