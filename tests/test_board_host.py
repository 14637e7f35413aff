"""The host side of the FPGA boards: ``npu board`` and the C driver's UART transport, against a
simulated board (npu/board_emulator.py: the bridge protocol of hw/board/protocol.py on a
pseudo-terminal, the ISA simulator as the NPU).

Expected values come from elsewhere: outputs from the reference interpreter
(sim.reference.run_graph) and the official reference model's models/slice/expected.npz,
cycle counts from an independent ISA-simulator run of the same program, frame contents from
protocol.py's own encoder and CRC.  ``npu`` runs in a subprocess, as a user runs it; the
emulator serves the pty from a thread of the test process.
"""
from __future__ import annotations

import ctypes as C
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from compiler.driver import compile_file
from compiler.frontends import load_graph
from hw.board import protocol
from hw.csr import BY_NAME, hw_config_value
from isa.config import DEFAULT_CONFIG, SMALL_CONFIG
from npu import board
from npu.board_emulator import BoardEmulator
from sim.isa.sim import IsaSim
from sim.reference import run_graph

ROOT = Path(__file__).resolve().parent.parent
SLICE = ROOT / "models" / "slice"
MODEL = SLICE / "conv_rescale_clamp.tosa"
CONFIG = SMALL_CONFIG


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("build")
    try:
        board.load_driver(path)              # built once for the module; the CLI runs reuse it
    except board.Unsupported as e:
        pytest.skip(str(e))
    return path


@pytest.fixture(scope="module")
def driver(build_dir):
    return board.load_driver(build_dir)


@pytest.fixture(scope="module")
def program_file(tmp_path_factory):
    program = compile_file(MODEL, CONFIG)
    path = tmp_path_factory.mktemp("prog") / "slice.npuprog"
    program.save(path)
    return program, path


@pytest.fixture
def emulator():
    boards = []

    def make(**kwargs):
        try:
            b = BoardEmulator(CONFIG, **kwargs).start()
        except OSError as e:                    # no /dev/ptmx in this environment
            pytest.skip(f"no pseudo-terminal for the board emulator: {e}")
        boards.append(b)
        return b
    yield make
    for b in boards:
        b.close()
        assert b.error is None, f"the board emulator failed: {b.error!r}"


def npu(build_dir, *args, timeout=120):
    env = dict(os.environ, NPU_BUILD_ROOT=str(build_dir))
    proc = subprocess.run([sys.executable, "-m", "npu", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def one_line_error(result, code, *words):
    rc, out, err = result
    assert rc == code, (rc, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def board_run(build_dir, model, port, out, *extra):
    return npu(build_dir, "board", "run", model, "--port", port, "--inputs", SLICE / "input.npz",
               "--output", out, *extra)


# -- the generated header and the C framing -----------------------------------------------------------
def test_bridge_header_is_protocol_py():
    text = (ROOT / "firmware" / "include" / "npu_bridge.h").read_text()
    defines = {k: int(v, 0) for k, v in re.findall(r"#define NPU_BRIDGE_(\w+) (0x[0-9A-F]+|\d+)u", text)}
    assert defines["SYNC_REQ"] == protocol.SYNC_REQ and defines["SYNC_REP"] == protocol.SYNC_REP
    assert defines["MAX_PAYLOAD"] == protocol.MAX_PAYLOAD and defines["FRAME_TIMEOUT"] == protocol.FRAME_TIMEOUT
    assert defines["BOARD_ID"] == protocol.BOARD_ID
    assert defines["REQ_HEADER"] == protocol.REQ_HEADER and defines["REP_HEADER"] == protocol.REP_HEADER
    assert {c.name: c.value for c in protocol.Command} == {c.name: defines[c.name] for c in protocol.Command}
    assert {s.name: s.value for s in protocol.Status} == {s.name: defines[f"STATUS_{s.name}"] for s in protocol.Status}


def test_c_crc_is_protocol_crc(driver):
    fn = driver.dll.npu_bridge_crc8
    fn.restype, fn.argtypes = C.c_uint8, [C.c_char_p, C.c_size_t, C.c_uint8]
    rng = np.random.default_rng(7)
    for n in (0, 1, 7, 64, 1033):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert fn(data, n, 0) == protocol.crc8(data)


class Raw:
    """The UART transport driven directly: npu_uart_t + an npu_dev_t on a board."""

    def __init__(self, driver, port, mem_size, timeout_ms=300):
        self.drv, self.uart = driver, board.UartC()
        assert driver.npu_uart_open(C.byref(self.uart), port.encode(), 115200, timeout_ms) == 0, self.error
        self.dev = C.create_string_buffer(driver.dev_size)
        driver.npu_dev_init_uart(self.dev, C.byref(self.uart), mem_size)
        for name, args in (("npu_mem_write", [C.c_void_p, C.c_uint32, C.c_char_p, C.c_size_t]),
                           ("npu_mem_read", [C.c_void_p, C.c_uint32, C.c_void_p, C.c_size_t]),
                           ("npu_csr_write", [C.c_void_p, C.c_uint32, C.c_uint32])):
            getattr(driver.dll, name).restype, getattr(driver.dll, name).argtypes = C.c_int, args

    @property
    def error(self):
        return self.uart.error.decode()

    def close(self):
        self.drv.npu_uart_close(C.byref(self.uart))


def test_memory_moves_in_max_payload_frames(driver, emulator):
    b = emulator(mem_size=8192)
    raw = Raw(driver, b.port, 8192)
    data = bytes(np.random.default_rng(1).integers(0, 256, 2500, dtype=np.uint8))
    assert driver.dll.npu_mem_write(raw.dev, 100, data, len(data)) == 0
    assert bytes(b.memory[100:2600]) == data
    out = C.create_string_buffer(len(data))
    assert driver.dll.npu_mem_read(raw.dev, 100, out, len(data)) == 0 and out.raw == data
    assert b.log == [("MEM_WRITE", 100, 1024, "OK"), ("MEM_WRITE", 1124, 1024, "OK"), ("MEM_WRITE", 2148, 452, "OK"),
                     ("MEM_READ", 100, 1024, "OK"), ("MEM_READ", 1124, 1024, "OK"), ("MEM_READ", 2148, 452, "OK")]
    assert (raw.uart.requests, raw.uart.retries) == (6, 0)
    raw.close()


def test_error_reply_is_not_retried(driver, emulator):
    """BAD_ADDRESS: the bridge did nothing and sending again cannot help."""
    b = emulator(mem_size=4096)
    raw = Raw(driver, b.port, 1 << 20)          # the host believes in more memory than the board has
    out = C.create_string_buffer(16)
    assert driver.dll.npu_mem_read(raw.dev, 4090, out, 16) == board.CODE["NPU_E_IO"]
    assert "MEM_READ at 0x00000ffa (16 bytes): bridge replied BAD_ADDRESS" in raw.error
    assert b.log == [("MEM_READ", 4090, 16, "BAD_ADDRESS")] and raw.uart.retries == 0
    raw.close()


def test_ctrl_write_is_never_sent_twice(driver, emulator):
    b = emulator(corrupt_replies={0})
    raw = Raw(driver, b.port, 4096)
    assert driver.dll.npu_csr_write(raw.dev, BY_NAME["CTRL"].offset, 0) == board.CODE["NPU_E_IO"]
    assert "CSR_WRITE at 0x00000000" in raw.error and "CRC" in raw.error and "never sent twice" in raw.error
    assert [e[0] for e in b.log] == ["CSR_WRITE"] and raw.uart.retries == 0
    # Any other register is retried.
    assert driver.dll.npu_csr_write(raw.dev, BY_NAME["PROG_LEN"].offset, 5) == 0
    raw.close()


def test_partial_frame_gets_a_timeout_reply(emulator):
    """The emulator drops a frame that stops arriving, as the bridge does after FRAME_TIMEOUT."""
    b = emulator()
    fd = os.open(b.port, os.O_RDWR | os.O_NOCTTY)
    try:
        os.write(fd, b"\x00\x13" + protocol.encode_request(protocol.Command.PING)[:5])
        time.sleep(0.3)
        reply = os.read(fd, 64)
        assert protocol.decode_reply(reply) == (protocol.Status.TIMEOUT, b"")
        os.write(fd, b"\xA5\x09" + bytes(6) + b"\x00")        # an unknown command, with a bad CRC
        time.sleep(0.2)
        assert protocol.decode_reply(os.read(fd, 64))[0] == protocol.Status.BAD_CRC
    finally:
        os.close(fd)


# -- npu board ----------------------------------------------------------------------------------------
def test_ping(build_dir, emulator):
    b = emulator()
    rc, out, err = npu(build_dir, "board", "ping", "--port", b.port)
    assert rc == 0, err
    assert f"bridge 0x{protocol.BOARD_ID:08X}" in out
    assert f"HW_CONFIG 0x{hw_config_value(CONFIG):08X} (4x4 array, 4-byte bus, memory latency 4)" in out
    assert [e[0] for e in b.log] == ["PING", "CSR_READ", "CSR_READ"]


@pytest.mark.parametrize("which", ["program", "model"])
def test_run_matches_reference_and_isa_cycles(build_dir, emulator, program_file, tmp_path, which):
    program, path = program_file
    b = emulator()
    out = tmp_path / "out.npz"
    model = path if which == "program" else MODEL
    extra = [] if which == "program" else ["--config", "small"]
    rc, stdout, err = board_run(build_dir, model, b.port, out, "--timeout", "5", *extra)
    assert rc == 0, err
    inputs = dict(np.load(SLICE / "input.npz"))
    expected = run_graph(load_graph(MODEL), inputs)
    got = np.load(out)
    assert sorted(got.files) == sorted(expected)
    for k in expected:
        assert got[k].dtype == expected[k].dtype and np.array_equal(got[k], expected[k])
    assert np.array_equal(got["output"], np.load(SLICE / "expected.npz")["output"])
    isa = IsaSim(CONFIG).run(program, program.memory_image(inputs))
    assert f"cycles:  {isa.cycles}\n" in stdout
    assert b.last_run.cycles == isa.cycles and b.starts == 1
    assert f"DONE at instruction {isa.stop_pc}" in stdout and "0 retried" in stdout


def test_corrupted_replies_are_retried(build_dir, emulator, program_file, tmp_path):
    program, path = program_file
    b = emulator(corrupt_replies={1, 7, 30})
    rc, stdout, err = board_run(build_dir, path, b.port, tmp_path / "out.npz")
    assert rc == 0, err
    assert "3 retried" in stdout
    assert np.array_equal(np.load(tmp_path / "out.npz")["output"], np.load(SLICE / "expected.npz")["output"])
    assert b.starts == 1


def test_silent_board_is_a_clean_timeout(build_dir, emulator, program_file, tmp_path):
    program, path = program_file
    b = emulator(mute_after=4)                 # PING and three register reads, then nothing
    start = time.monotonic()
    result = board_run(build_dir, path, b.port, tmp_path / "out.npz", "--timeout", "0.2")
    line = one_line_error(result, 2, b.port, "no reply within", "after retries")
    assert time.monotonic() - start < 20, line
    assert len(b.log) == 4 + 4                 # the unanswered request, sent 4 times
    assert not (tmp_path / "out.npz").exists()


def test_no_such_port(build_dir, program_file, tmp_path):
    _, path = program_file
    one_line_error(board_run(build_dir, path, tmp_path / "ttyUSB9", tmp_path / "out.npz"), 2,
                   "ttyUSB9", "No such file")
    one_line_error(npu(build_dir, "board", "ping", "--port", os.devnull), 2, "not a serial port")


def test_unsupported_baud_rate(build_dir, emulator):
    b = emulator()
    one_line_error(npu(build_dir, "board", "ping", "--port", b.port, "--baud", "12345"), 3, "baud rate 12345")


def test_wrong_hw_config(build_dir, emulator, program_file, tmp_path):
    _, path = program_file
    b = emulator(hw_config=hw_config_value(DEFAULT_CONFIG))
    one_line_error(board_run(build_dir, path, b.port, tmp_path / "out.npz"), 2,
                   "16x16 array, 16-byte bus", "compiled for a 4x4 array, 4-byte bus")
    assert b.starts == 0 and not any(e[0] == "MEM_WRITE" for e in b.log)


def test_npu_error_stop(build_dir, emulator, program_file, tmp_path):
    """The watchdog stops the NPU: an error stop with its code and instruction, exit 2."""
    program, path = program_file
    b = emulator()
    line = one_line_error(board_run(build_dir, path, b.port, tmp_path / "out.npz", "--max-cycles", "100"), 2,
                          "the NPU stopped with error WATCHDOG at instruction")
    assert f"instruction {b.last_run.stop_pc} " in line
