"""The C firmware driver (firmware/), compiled with the system C compiler and run against a
register-level model of the NPU.

The driver is built as a shared library and loaded with ctypes; its register hooks are
Python callbacks into :class:`RegisterModel`, which implements the register semantics of
hw/csr.py and, on CTRL.START, boots and runs whatever the driver put in the shared memory
buffer on the ISA simulator (it sees only the registers and that memory, never the
Program object).  Expected values: the official reference model's output
(models/slice/expected.npz), the reference interpreter's (sim.reference.run_graph) for a
compiled graph with transposed inputs and outputs, isa/program.py's own image reader, memory
image and output reader, and the ISA simulator's counters for an independent run.

A second build (the npu_info tool) runs under AddressSanitizer/UBSan on every proper prefix
and on mutated headers of an image.
"""
from __future__ import annotations

import copy
import ctypes as C
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from compiler.driver import compile_file, run_pipeline
from hw.harness import csr_header
from hw.csr import BY_NAME, HW_ID, REGISTERS, UNITS, bit, hw_config_value
from isa.asm import assemble
from isa.config import DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig
from isa.instructions import ErrorCode
from isa.patches import Patches
from isa.program import Program, ProgramFormatError, Segment, TensorBinding
from sim.isa.sim import IsaSim
from sim.reference import run_graph

sys.path.insert(0, os.path.dirname(__file__))
from compiler_graphs import ConvSpec, GraphBuilder  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FW = ROOT / "firmware"
SOURCES = sorted((FW / "src").glob("*.c"))
SLICE = ROOT / "models" / "slice"
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Wconversion", "-Wsign-conversion",
            "-Wshadow", "-Werror"]
# Small limits so that the limit checks are cheap to reach.
LIMITS = {"NPU_MAX_SEGMENTS": 8, "NPU_MAX_TENSORS": 6, "NPU_MAX_RANK": 6, "NPU_NAME_MAX": 32}


def test_generated_files_are_current():
    assert csr_header.main(["--check"]) == 0, "run `python -m hw.harness.csr_header`"


# -- building ---------------------------------------------------------------------------------
def _compiler() -> str:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc/clang) on PATH: the firmware driver cannot be built")
    return cc


def _compile(args: list[str]) -> None:
    run = subprocess.run(args, capture_output=True, text=True)
    assert run.returncode == 0, f"compiling the firmware failed:\n{' '.join(args)}\n{run.stderr}"


def _links(cc: str, flags: list[str], tmp: Path) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    return subprocess.run([cc, *flags, str(src), "-o", str(tmp / "probe")], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cc = _compiler()
    tmp = tmp_path_factory.mktemp("firmware")
    # UBSan where available: undefined behaviour aborts the test run instead of passing silently.
    ubsan = ["-fsanitize=undefined", "-fno-sanitize-recover=undefined"]
    sanitize = ubsan if _links(cc, ubsan, tmp) else []
    out = tmp / "libnpu.so"
    _compile([cc, *WARNINGS, "-O1", "-g", "-fPIC", "-shared", *sanitize, f"-I{FW / 'include'}",
              *[f"-D{k}={v}" for k, v in LIMITS.items()], *map(str, SOURCES), "-o", str(out)])
    return _bind(C.CDLL(str(out)))


# -- ctypes mirror of npu_driver.h --------------------------------------------------------------
def _status_codes() -> dict[str, int]:
    text = (FW / "include" / "npu_driver.h").read_text()
    body = text[text.index("typedef enum npu_status"):text.index("} npu_status_t;")]
    return {name: int(value) for name, value in re.findall(r"\b(NPU_\w+) = (-?\d+)", body)}


S = type("Status", (), _status_codes())

READ32 = C.CFUNCTYPE(C.c_uint32, C.c_void_p, C.c_uint32)
WRITE32 = C.CFUNCTYPE(None, C.c_void_p, C.c_uint32, C.c_uint32)
IDLE = C.CFUNCTYPE(None, C.c_void_p)
CACHE = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p, C.c_size_t)
NAME = C.c_char * LIMITS["NPU_NAME_MAX"]


class Config(C.Structure):
    _fields_ = [(f.name, C.c_uint64) for f in fields(NpuConfig)]


class SegmentC(C.Structure):
    _fields_ = [("name", NAME), ("addr", C.c_uint32), ("size", C.c_uint32), ("data", C.c_void_p)]


class PatchesC(C.Structure):
    _fields_ = [(f.name, C.c_int32 if f.name == "fill" else C.c_uint32) for f in fields(Patches)]


class TensorC(C.Structure):
    _fields_ = [("name", NAME), ("rank", C.c_uint32), ("shape", C.c_uint32 * LIMITS["NPU_MAX_RANK"]),
                ("perm", C.c_uint32 * LIMITS["NPU_MAX_RANK"]), ("has_patches", C.c_int), ("patches", PatchesC),
                ("dtype", C.c_int), ("itemsize", C.c_uint32), ("layout", C.c_int), ("addr", C.c_uint32),
                ("count", C.c_uint64), ("nbytes", C.c_uint64)]


class ProgramC(C.Structure):
    _fields_ = [("config", Config), ("program_addr", C.c_uint32), ("instructions", C.c_uint32),
                ("n_segments", C.c_uint32), ("segments", SegmentC * LIMITS["NPU_MAX_SEGMENTS"]),
                ("n_inputs", C.c_uint32), ("inputs", TensorC * LIMITS["NPU_MAX_TENSORS"]),
                ("n_outputs", C.c_uint32), ("outputs", TensorC * LIMITS["NPU_MAX_TENSORS"]),
                ("extent", C.c_uint64), ("error", C.c_char_p), ("error_offset", C.c_size_t)]


class DevC(C.Structure):
    _fields_ = [("read32", READ32), ("write32", WRITE32), ("ctx", C.c_void_p), ("idle", IDLE),
                ("cache_clean", CACHE), ("cache_invalidate", CACHE), ("mem", C.c_void_p),
                ("mem_size", C.c_size_t), ("transport", C.c_void_p)]


class ResultC(C.Structure):
    _fields_ = [("status", C.c_uint32), ("error_code", C.c_uint32), ("stop_pc", C.c_uint32),
                ("cycles", C.c_uint64), ("unit_busy", C.c_uint64 * len(UNITS))]


def _bind(dll):
    P, D, R = C.POINTER(ProgramC), C.POINTER(DevC), C.POINTER(ResultC)
    sigs = {
        "npu_program_parse": (C.c_int, [P, C.c_char_p, C.c_size_t]),
        "npu_find_input": (C.c_int, [P, C.c_char_p]),
        "npu_find_output": (C.c_int, [P, C.c_char_p]),
        "npu_load": (C.c_int, [D, P]),
        "npu_set_input": (C.c_int, [D, P, C.c_uint32, C.c_void_p, C.c_size_t]),
        "npu_get_output": (C.c_int, [D, P, C.c_uint32, C.c_void_p, C.c_size_t]),
        "npu_dev_init_mmio": (None, [D, C.c_void_p, C.c_void_p, C.c_size_t]),
        "npu_expected_hw_config": (C.c_uint32, [C.POINTER(Config)]),
        "npu_check_hw": (C.c_int, [D, P]),
        "npu_start": (C.c_int, [D, P, C.c_uint32]),
        "npu_poll": (C.c_int, [D, R]),
        "npu_wait": (C.c_int, [D, C.c_uint32, R]),
        "npu_irq_ack": (C.c_int, [D]),
        "npu_read_result": (C.c_int, [D, R]),
        "npu_run": (C.c_int, [D, P, C.c_uint32, R]),
        "npu_status_name": (C.c_char_p, [C.c_int]),
        "npu_hw_error_name": (C.c_char_p, [C.c_uint32]),
        "npu_struct_sizes": (None, [C.POINTER(C.c_size_t)] * 3),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(dll, name)
        fn.restype, fn.argtypes = res, args
    return dll


def test_struct_mirror_matches_the_header(lib):
    sizes = [C.c_size_t() for _ in range(3)]
    lib.npu_struct_sizes(*[C.byref(s) for s in sizes])
    assert [s.value for s in sizes] == [C.sizeof(ProgramC), C.sizeof(DevC), C.sizeof(ResultC)]
    for name, value in vars(S).items():
        if name.startswith("NPU_"):
            assert lib.npu_status_name(value).decode() == name


# -- the register model ---------------------------------------------------------------------------
class RegisterModel:
    """The NPU as the driver sees it: hw/csr.py's registers over a shared memory buffer.

    CTRL.START (while idle) boots the program PROG_ADDR/PROG_LEN from a snapshot of
    ``mem`` on the ISA simulator; STATUS then reads BUSY for ``polls`` reads (``None``:
    forever), after which the final memory appears in ``mem`` and the stop registers, the
    counters and IRQ_STATUS.PENDING are set, as in CsrBlock.
    """

    def __init__(self, config: NpuConfig, mem: np.ndarray, polls: int | None = 3,
                 hw_id: int = HW_ID, hw_config: int | None = None):
        self.config, self.mem, self.polls = config, mem, polls
        self.fixed = {"HW_ID": hw_id, "HW_CONFIG": hw_config_value(config) if hw_config is None else hw_config}
        self.state = {"PROG_ADDR": 0, "PROG_LEN": 0, "IRQ_ENABLE": 0, "IRQ_STATUS": 0, "ERROR_CODE": 0,
                      "STOP_PC": 0}
        self.status = 0
        self.counters = {"CYCLES": 0, **{f"{u}_BUSY": 0 for u in UNITS}}
        self.by_offset = {r.offset: r for r in REGISTERS}
        self.log: list[tuple] = []
        self.errors: list[BaseException] = []
        self.starts = 0
        self._pending = None
        self._polls_left = 0
        # ctypes callbacks; exceptions inside them would only be printed, so keep them
        self.c_read, self.c_write = READ32(self._guard(self.read)), WRITE32(self._guard(self.write))

    def _guard(self, fn):
        def call(*args):
            try:
                return fn(*args[1:])
            except BaseException as e:      # noqa: BLE001 - reported by check()
                self.errors.append(e)
                return 0
        return call

    def check(self):
        if self.errors:
            raise AssertionError("the register model failed") from self.errors[0]

    @property
    def irq(self) -> bool:
        return bool(self.state["IRQ_STATUS"] & self.state["IRQ_ENABLE"])

    def _reg(self, offset: int):
        assert offset % 4 == 0 and offset in self.by_offset, f"access to unmapped offset {offset:#x}"
        return self.by_offset[offset]

    def read(self, offset: int) -> int:
        reg = self._reg(offset)
        if reg.name == "STATUS" and self.status & bit("STATUS", "BUSY") and self.polls is not None:
            self._polls_left -= 1
            if self._polls_left <= 0:
                self._stop()
        if "r" not in reg.access:
            value = 0
        elif reg.name == "STATUS":
            value = self.status
        elif reg.name in self.fixed:
            value = self.fixed[reg.name]
        elif reg.name[:-3] in self.counters:
            value = self.counters[reg.name[:-3]] >> (32 if reg.name.endswith("_HI") else 0) & 0xFFFFFFFF
        else:
            value = self.state[reg.name]
        self.log.append(("r", reg.name, value))
        return value

    def write(self, offset: int, value: int) -> None:
        reg = self._reg(offset)
        self.log.append(("w", reg.name, value))
        busy = self.status & bit("STATUS", "BUSY")
        if reg.name == "CTRL" and value & bit("CTRL", "START") and not busy:
            self._start()
        elif reg.name in ("PROG_ADDR", "PROG_LEN"):
            self.state[reg.name] = value
        elif reg.name == "IRQ_ENABLE":
            self.state[reg.name] = value & bit("IRQ_ENABLE", "STOP")
        elif reg.name == "IRQ_STATUS" and value & bit("IRQ_STATUS", "PENDING"):
            self.state[reg.name] = 0

    def _start(self):
        self.starts += 1
        self.status = bit("STATUS", "BUSY")
        self.state.update(ERROR_CODE=0, STOP_PC=0, IRQ_STATUS=0)
        self.counters = dict.fromkeys(self.counters, 0)
        # The hardware knows the program only through PROG_ADDR/PROG_LEN and memory; the ISA
        # simulator reads a Program for those two numbers and fetches the instructions itself.
        boot = Program(self.config, [None] * self.state["PROG_LEN"], program_addr=self.state["PROG_ADDR"])
        self._pending = IsaSim(self.config).run(boot, bytes(self.mem))
        self._polls_left = self.polls or 0

    def _stop(self):
        r = self._pending
        n = min(len(r.memory), self.mem.size)
        self.mem[:n] = np.frombuffer(bytes(r.memory[:n]), dtype=np.uint8)
        self.status = bit("STATUS", "DONE") if r.ok else bit("STATUS", "ERROR")
        self.state.update(ERROR_CODE=int(r.error_code), STOP_PC=r.stop_pc,
                          IRQ_STATUS=bit("IRQ_STATUS", "PENDING"))
        self.counters = {"CYCLES": r.cycles, **{f"{u}_BUSY": r.busy.get(u, 0) for u in UNITS}}


class Device:
    """An npu_dev_t wired to a RegisterModel, with a host memory buffer of ``mem_size`` bytes."""

    def __init__(self, config: NpuConfig, mem_size: int, **model_args):
        self.mem = np.zeros(mem_size, dtype=np.uint8)
        self.model = RegisterModel(config, self.mem, **model_args)
        self.idles = 0
        self.cache_ops: list[tuple[str, int, int]] = []
        self._idle = IDLE(self._on_idle)
        self._clean = CACHE(lambda ctx, addr, n: self._on_cache("clean", addr, n))
        self._invalidate = CACHE(lambda ctx, addr, n: self._on_cache("invalidate", addr, n))
        self.c = DevC(self.model.c_read, self.model.c_write, None, self._idle, self._clean,
                      self._invalidate, self.mem.ctypes.data, mem_size)

    def _on_idle(self, ctx):
        self.idles += 1

    def _on_cache(self, kind, addr, n):
        offset = addr - self.mem.ctypes.data
        self.cache_ops.append((kind, offset, n))
        self.model.log.append(("cache", kind, offset, n))

    @property
    def ref(self):
        return C.byref(self.c)

    def call(self, fn, *args):
        """``fn(dev, *args)``, failing on an exception inside the register model."""
        status = fn(self.ref, *args)
        self.model.check()
        return status


# -- programs --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slice_programs():
    return {cfg: compile_file(SLICE / "conv_rescale_clamp.tosa", cfg) for cfg in (DEFAULT_CONFIG, SMALL_CONFIG)}


def _parse(lib, image: bytes):
    prog = ProgramC()
    status = lib.npu_program_parse(C.byref(prog), image, len(image))
    prog.image = image      # the driver points into the image: keep it alive with the parse
    return status, prog


def _parsed(lib, image: bytes) -> ProgramC:
    status, prog = _parse(lib, image)
    assert status == S.NPU_OK, (lib.npu_status_name(status), prog.error, prog.error_offset)
    return prog


def _header(image: bytes) -> dict:
    jlen = struct.unpack_from("<I", image, 12)[0]
    return json.loads(image[16:16 + jlen])


def _with_header(image: bytes, header: dict | str) -> bytes:
    """``image`` with its JSON header replaced (payload unchanged)."""
    jlen = struct.unpack_from("<I", image, 12)[0]
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    return image[:12] + struct.pack("<I", len(text)) + text + image[16 + jlen:]


def _tensor(t: TensorC) -> tuple:
    patches = {f.name: getattr(t.patches, f.name) for f in fields(Patches)} if t.has_patches else None
    return (t.name.decode(), tuple(t.shape[:t.rank]), tuple(t.perm[:t.rank]), patches, t.addr, t.nbytes)


def _binding(b: TensorBinding, lanes: int) -> tuple:
    """What the C parse of ``b`` must hold: no perm reads as the identity."""
    perm = tuple(range(len(b.shape))) if b.perm is None else b.perm
    patches = None if b.patches is None else b.patches.to_dict()
    return (b.name, tuple(b.shape), perm, patches, b.addr, b.nbytes(lanes))


def _assert_same_program(prog: ProgramC, program: Program):
    """The C parse agrees with isa/program.py's reader."""
    assert {f.name: getattr(prog.config, f.name) for f in fields(NpuConfig)} == program.config.to_dict()
    assert (prog.program_addr, prog.instructions) == (program.program_addr, len(program.instructions))
    segs = [(s.name.decode(), s.addr, C.string_at(s.data, s.size)) for s in prog.segments[:prog.n_segments]]
    assert segs == [(s.name, s.addr, s.data) for s in program.all_segments()]
    lanes = program.config.bus_bytes
    for c_list, n, py_list in ((prog.inputs, prog.n_inputs, program.inputs),
                               (prog.outputs, prog.n_outputs, program.outputs)):
        assert [_tensor(t) for t in c_list[:n]] == [_binding(b, lanes) for b in py_list]
    assert prog.extent == program.memory_extent()


# -- image parsing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [DEFAULT_CONFIG, SMALL_CONFIG], ids=["16x16", "4x4"])
def test_parse_agrees_with_program_reader(lib, slice_programs, config):
    image = slice_programs[config].to_bytes()
    _assert_same_program(_parsed(lib, image), Program.from_bytes(image))


def test_parse_any_json_formatting(lib, slice_programs):
    """Whitespace, key order, escapes, an explicit identity perm and a null one, and every
    JSON value type in "info" (the one place where any field is skipped)."""
    program = copy.deepcopy(slice_programs[SMALL_CONFIG])
    program.inputs[0].name = "in/\u00e9t\u00e9 \"q\" \\ \U0001F600"
    program.inputs[0].perm = (0, 1, 2, 3)
    program.info = {"f": [1.5e-3, -2, 0, True, False, None, {"a": [[], {}]}], "s": "x\ty\u2028"}
    image = program.to_bytes()
    header = _header(image)
    header["info"]["future_field"] = {"nested": [1, 2.0, "three"]}
    header["outputs"][0]["perm"] = None
    text = json.dumps(dict(reversed(list(header.items()))), indent=3, ensure_ascii=True)
    reformatted = _with_header(image, text.replace(": ", " :\r\n\t "))
    prog = _parsed(lib, reformatted)
    _assert_same_program(prog, Program.from_bytes(reformatted))
    assert lib.npu_find_input(C.byref(prog), program.inputs[0].name.encode()) == 0
    assert lib.npu_find_output(C.byref(prog), b"output") == 0
    assert lib.npu_find_input(C.byref(prog), b"output") == -1


def test_bad_magic_version_and_every_truncation(lib, slice_programs):
    image = slice_programs[SMALL_CONFIG].to_bytes()
    status, prog = _parse(lib, b"NOTAPROG" + image[8:])
    assert status == S.NPU_E_MAGIC and b"magic" in prog.error
    assert _parse(lib, image[:8] + struct.pack("<I", 2) + image[12:])[0] == S.NPU_E_VERSION
    # Every proper prefix (inside the magic, the header, the JSON, the payload) is truncated.
    statuses = {n: _parse(lib, image[:n])[0] for n in range(len(image))}
    assert set(statuses.values()) == {S.NPU_E_TRUNCATED}, {n: s for n, s in statuses.items() if s != S.NPU_E_TRUNCATED}


def _edit(image: bytes, change) -> bytes:
    header = _header(image)
    change(header)
    return _with_header(image, header)


HEADER_ERRORS = {
    "missing segments": (lambda h: h.pop("segments"), "NPU_E_HEADER", "lacks one of config"),
    "unknown dtype": (lambda h: h["inputs"][0].update(dtype="int7"), "NPU_E_HEADER", "unknown tensor dtype"),
    "unknown layout": (lambda h: h["outputs"][0].update(layout="tiled"), "NPU_E_HEADER", "unknown tensor layout"),
    "brick rank": (lambda h: h["inputs"][0].update(shape=[12, 11, 5]), "NPU_E_HEADER", "rank-4"),
    "tensor field": (lambda h: h["outputs"][0].pop("addr"), "NPU_E_HEADER", "tensor lacks"),
    # Unknown fields are refused, never skipped (but inside "info"): a future binding or
    # segment field could change where or how the data lies.
    "unknown tensor field": (lambda h: h["inputs"][0].update(stride=[1, 2]), "NPU_E_HEADER", "unknown tensor field"),
    "unknown output field": (lambda h: h["outputs"][0].update(zero_point=0), "NPU_E_HEADER", "unknown tensor field"),
    "long tensor field": (lambda h: h["inputs"][0].update(a_very_long_field_name=0), "NPU_E_HEADER",
                          "unknown tensor field"),
    "unknown segment field": (lambda h: h["segments"][1].update(compressed=True), "NPU_E_HEADER",
                              "unknown segment field"),
    "unknown header field": (lambda h: h.update(future_field={}), "NPU_E_HEADER", "unknown header field"),
    "perm rank": (lambda h: h["inputs"][0].update(perm=[0, 2, 1]), "NPU_E_HEADER", "not a permutation"),
    "perm repeats": (lambda h: h["inputs"][0].update(perm=[0, 1, 1, 3]), "NPU_E_HEADER", "not a permutation"),
    "perm range": (lambda h: h["outputs"][0].update(perm=[0, 1, 2, 4]), "NPU_E_HEADER", "not a permutation"),
    "perm type": (lambda h: h["inputs"][0].update(perm="0231"), "NPU_E_HEADER", "expected an array"),
    "perm element": (lambda h: h["inputs"][0].update(perm=[0, 2, 3, -1]), "NPU_E_HEADER", "non-negative integer"),
    "perm limit": (lambda h: h["inputs"][0].update(perm=list(range(LIMITS["NPU_MAX_RANK"] + 1))), "NPU_E_LIMIT",
                   "perm longer than NPU_MAX_RANK"),
    "segment field": (lambda h: h["segments"][1].pop("size"), "NPU_E_HEADER", "segment lacks"),
    "config field": (lambda h: h["config"].update(warp_drive=1), "NPU_E_HEADER", "unknown configuration field"),
    "config value": (lambda h: h["config"].update(bus_bytes=0), "NPU_E_HEADER", "must be positive"),
    "bus power of two": (lambda h: h["config"].update(bus_bytes=12), "NPU_E_HEADER", "power of two"),
    "huge bus": (lambda h: h["config"].update(bus_bytes=1 << 62), "NPU_E_HEADER", "bus_bytes too large"),
    "fraction": (lambda h: h["inputs"][0].update(addr=1.5), "NPU_E_HEADER", "not a fraction"),
    "negative": (lambda h: h["inputs"][0].update(addr=-16), "NPU_E_HEADER", "non-negative integer"),
    "32-bit": (lambda h: h["inputs"][0].update(addr=1 << 32), "NPU_E_HEADER", "too large"),
    "string addr": (lambda h: h["inputs"][0].update(addr="16"), "NPU_E_HEADER", "non-negative integer"),
    "instruction count": (lambda h: h.update(instructions=h["instructions"] + 1), "NPU_E_HEADER", "instruction count"),
    "no program": (lambda h: h["segments"][0].update(name="code"), "NPU_E_HEADER", "no \"program\" segment"),
    "past ext memory": (lambda h: h["outputs"][0].update(addr=h["config"]["ext_mem_bytes"]), "NPU_E_HEADER",
                        "past ext_mem_bytes"),
    "segment past payload": (lambda h: h["segments"][1].update(offset=1 << 40), "NPU_E_TRUNCATED",
                             "past the end of the image"),
    "deep info": (lambda h: h.update(info=json.loads("[" * 40 + "]" * 40)), "NPU_E_HEADER", "nesting too deep"),
    "long name": (lambda h: h["inputs"][0].update(name="n" * LIMITS["NPU_NAME_MAX"]), "NPU_E_LIMIT", "NPU_NAME_MAX"),
    "rank": (lambda h: h["outputs"][0].update(shape=[1] * (LIMITS["NPU_MAX_RANK"] + 1), layout="flat"),
             "NPU_E_LIMIT", "NPU_MAX_RANK"),
    "segments": (lambda h: h["segments"].extend([h["segments"][-1]] * LIMITS["NPU_MAX_SEGMENTS"]), "NPU_E_LIMIT",
                 "NPU_MAX_SEGMENTS"),
    "tensors": (lambda h: h["inputs"].extend([h["inputs"][0]] * LIMITS["NPU_MAX_TENSORS"]), "NPU_E_LIMIT",
                "NPU_MAX_TENSORS"),
}


@pytest.mark.parametrize("case", HEADER_ERRORS)
def test_header_errors(lib, slice_programs, case):
    change, status_name, message = HEADER_ERRORS[case]
    status, prog = _parse(lib, _edit(slice_programs[SMALL_CONFIG].to_bytes(), change))
    assert lib.npu_status_name(status).decode() == status_name
    assert message in prog.error.decode()
    assert 16 <= prog.error_offset


# A valid "patches" for the slice's input (1, 12, 11, 5) int8, and edits of it.
SLICE_PATCHES = {"height": 3, "width": 3, "step_y": 2, "step_x": 2, "top": 1, "left": 1, "rows": 6, "cols": 6,
                 "fill": -3}


def _set_patches(where: str, **change):
    """A header edit: the slice's input (or output) gets SLICE_PATCHES updated by ``change``
    (a value None drops the field)."""
    def edit(h):
        patches = dict(SLICE_PATCHES, **change)
        h[where][0]["patches"] = {k: v for k, v in patches.items() if v is not None}
    return edit


# (change, status, message): each also refused by Program.from_bytes
PATCHES_HEADER_ERRORS = {
    "on an output": (_set_patches("outputs"), "NPU_E_HEADER", "patches on an output"),
    "missing field": (_set_patches("inputs", fill=None), "NPU_E_HEADER", "patches lack one of"),
    "missing rows": (_set_patches("inputs", rows=None), "NPU_E_HEADER", "patches lack one of"),
    "extra field": (_set_patches("inputs", dilation=1), "NPU_E_HEADER", "unknown patches field"),
    "long extra field": (_set_patches("inputs", a_very_long_patches_field=1), "NPU_E_HEADER",
                         "unknown patches field"),
    "fraction": (_set_patches("inputs", height=1.5), "NPU_E_HEADER", "not a fraction"),
    "integral float": (_set_patches("inputs", step_x=2.0), "NPU_E_HEADER", "not a fraction"),
    "string": (_set_patches("inputs", width="3"), "NPU_E_HEADER", "non-negative integer"),
    "bool": (_set_patches("inputs", cols=True), "NPU_E_HEADER", "non-negative integer"),
    "array field": (_set_patches("inputs", top=[]), "NPU_E_HEADER", "non-negative integer"),
    "null field": (lambda h: (_set_patches("inputs")(h), h["inputs"][0]["patches"].update(top=None)),
                   "NPU_E_HEADER", "non-negative integer"),
    "fill fraction": (_set_patches("inputs", fill=-0.5), "NPU_E_HEADER", "not a fraction"),
    "fill string": (_set_patches("inputs", fill="-3"), "NPU_E_HEADER", "expected an integer"),
    "fill bool": (_set_patches("inputs", fill=False), "NPU_E_HEADER", "expected an integer"),
    "string patches": (lambda h: h["inputs"][0].update(patches="3x3"), "NPU_E_HEADER", "expected an object"),
    "zero height": (_set_patches("inputs", height=0), "NPU_E_HEADER", "height must be in [1, 65536]"),
    "zero step": (_set_patches("inputs", step_y=0), "NPU_E_HEADER", "step_y must be in [1, 65536]"),
    "many rows": (_set_patches("inputs", rows=65537), "NPU_E_HEADER", "rows must be in [1, 65536]"),
    "negative top": (_set_patches("inputs", top=-1), "NPU_E_HEADER", "non-negative integer"),
    "huge left": (_set_patches("inputs", left=1 << 64), "NPU_E_HEADER", "too large"),
    "fill above int32": (_set_patches("inputs", fill=1 << 31), "NPU_E_HEADER", "too large"),
    "fill below int32": (_set_patches("inputs", fill=-(1 << 31) - 1), "NPU_E_HEADER", "too large"),
    "not an object": (lambda h: h["inputs"][0].update(patches=[3, 3]), "NPU_E_HEADER", "expected an object"),
    "rank 3": (lambda h: (_set_patches("inputs")(h), h["inputs"][0].update(shape=[12, 11, 5], layout="flat")),
               "NPU_E_HEADER", "rank-4"),
    "fill outside int8": (_set_patches("inputs", fill=128), "NPU_E_HEADER",
                          "outside the range of the tensor's dtype"),
    "too large": (_set_patches("inputs", height=65536, width=65536, rows=65536, cols=65536), "NPU_E_HEADER",
                  "tensor too large"),
}


@pytest.mark.parametrize("case", PATCHES_HEADER_ERRORS)
def test_patches_header_errors(lib, slice_programs, case):
    """A bad "patches" is refused with a header error naming it, as Program.from_bytes
    refuses it (Patches.from_dict, _binding, validate_header)."""
    change, status_name, message = PATCHES_HEADER_ERRORS[case]
    image = _edit(slice_programs[SMALL_CONFIG].to_bytes(), change)
    status, prog = _parse(lib, image)
    assert lib.npu_status_name(status).decode() == status_name, prog.error
    assert message in prog.error.decode()
    assert 16 <= prog.error_offset < 16 + struct.unpack_from("<I", image, 12)[0]
    with pytest.raises(ProgramFormatError):
        Program.from_bytes(image)


@pytest.mark.parametrize("fill", ["- 3", "-x", "-", "--3", "+3", "-03"])
def test_patches_fill_syntax(lib, slice_programs, fill):
    """A fill that is not a JSON integer (the driver reads the sign itself) is refused, as
    json.loads refuses it."""
    image = _edit(slice_programs[SMALL_CONFIG].to_bytes(), _set_patches("inputs"))
    text = json.dumps(_header(image))
    assert text.count('"fill": -3') == 1
    bad = _with_header(image, text.replace('"fill": -3', '"fill": ' + fill))
    status, prog = _parse(lib, bad)
    assert status == S.NPU_E_HEADER, (fill, prog.error)
    with pytest.raises(ProgramFormatError):
        Program.from_bytes(bad)


@pytest.mark.parametrize("fill", [-(1 << 31), (1 << 31) - 1, 0])
def test_patches_fill_limits(lib, slice_programs, fill):
    """The int32 limits of fill are read exactly (an int32 input)."""
    def change(h):
        _set_patches("inputs", fill=fill)(h)
        h["inputs"][0]["dtype"] = "int32"
    image = _edit(slice_programs[SMALL_CONFIG].to_bytes(), change)
    prog = _parsed(lib, image)
    _assert_same_program(prog, Program.from_bytes(image))
    assert prog.inputs[0].patches.fill == fill


def test_valid_patches_edit_parses(lib, slice_programs):
    """The edit the error cases start from is itself accepted, like Program.from_bytes does."""
    image = _edit(slice_programs[SMALL_CONFIG].to_bytes(), _set_patches("inputs"))
    prog = _parsed(lib, image)
    _assert_same_program(prog, Program.from_bytes(image))
    assert prog.inputs[0].has_patches and prog.inputs[0].patches.fill == -3


@pytest.mark.parametrize("text, message", [
    ('{"config": {}, }', "expected a string"),
    ('{"config": {}} x', "trailing characters"),
    ('{"info": [1, 2,]}', "trailing comma"),
    ('{"info": "\\x"}', "bad escape"),
    ('{"info": "\\ud800"}', "lone high surrogate"),
    ('{"info": 01}', "expected ',' or '}'"),
    ('{"info": @}', "unexpected character"),
    ('{"info": [1', "unexpected end of the header"),
    ('{"info": tru}', "bad literal"),
    ('{"info": "unterminated}', "unterminated string"),
    ('[]', "expected an object"),
    ('{"info" 1}', "expected ':'"),
])
def test_malformed_json(lib, slice_programs, text, message):
    """Syntax errors anywhere, "info" included (its value is validated while skipped)."""
    status, prog = _parse(lib, _with_header(slice_programs[SMALL_CONFIG].to_bytes(), text))
    assert status == S.NPU_E_HEADER
    assert message in prog.error.decode()


# -- running ----------------------------------------------------------------------------------------
def _mem_size(program: Program) -> int:
    return -(-program.memory_extent() // 4096) * 4096


@pytest.mark.parametrize("config", [DEFAULT_CONFIG, SMALL_CONFIG], ids=["16x16", "4x4"])
def test_slice_runs_through_the_driver(lib, slice_programs, config):
    program = slice_programs[config]
    image = program.to_bytes()
    inputs = dict(np.load(SLICE / "input.npz"))
    expected = np.load(SLICE / "expected.npz")["output"]
    dev = Device(config, _mem_size(program))
    prog = _parsed(lib, image)
    p, result = C.byref(prog), ResultC()

    assert lib.npu_check_hw(dev.ref, p) == S.NPU_OK
    assert lib.npu_load(dev.ref, p) == S.NPU_OK
    x = np.ascontiguousarray(inputs["input"])
    index = lib.npu_find_input(p, b"input")
    assert lib.npu_set_input(dev.ref, p, index, x.ctypes.data, x.nbytes) == S.NPU_OK
    extent = program.memory_extent()
    assert bytes(dev.mem[:extent]) == bytes(program.memory_image(inputs))   # placement is exact

    dev.model.log.clear()
    assert lib.npu_start(dev.ref, p, 1) == S.NPU_OK              # NPU_START_IRQ
    assert dev.call(lib.npu_wait, 100, C.byref(result)) == S.NPU_OK
    writes = [(e[1], e[2]) for e in dev.model.log if e[0] == "w"]
    assert writes == [("IRQ_STATUS", 1), ("PROG_ADDR", program.program_addr),
                      ("PROG_LEN", len(program.instructions)), ("IRQ_ENABLE", 1), ("CTRL", 1)]
    ctrl = next(i for i, e in enumerate(dev.model.log) if e[:2] == ("w", "CTRL"))
    assert ("cache", "clean", 0, extent) in dev.model.log[:ctrl]
    assert dev.idles == 2 and dev.model.starts == 1               # 3 polls: two saw BUSY

    reference = IsaSim(config).run(program, program.memory_image(inputs))
    assert result.status == bit("STATUS", "DONE")
    assert (result.error_code, result.stop_pc) == (0, reference.stop_pc)
    assert result.cycles == reference.cycles
    assert list(result.unit_busy) == [reference.busy[u] for u in UNITS]

    assert dev.model.irq
    assert lib.npu_irq_ack(dev.ref) == 1 and not dev.model.irq
    assert lib.npu_irq_ack(dev.ref) == 0

    out = np.zeros(expected.shape, dtype=expected.dtype)
    o = lib.npu_find_output(p, b"output")
    assert lib.npu_get_output(dev.ref, p, o, out.ctypes.data, out.nbytes) == S.NPU_OK
    np.testing.assert_array_equal(out, expected)
    t = prog.outputs[o]
    assert dev.cache_ops[-1] == ("invalidate", t.addr, t.nbytes)


# -- transports ------------------------------------------------------------------------------------------
CSR_READ = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint32, C.POINTER(C.c_uint32))
CSR_WRITE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint32, C.c_uint32)
MEM_READ = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint32, C.c_void_p, C.c_size_t)
MEM_WRITE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint32, C.c_void_p, C.c_size_t)


class TransportC(C.Structure):
    _fields_ = [("name", C.c_char_p), ("csr_read", CSR_READ), ("csr_write", CSR_WRITE),
                ("mem_read", MEM_READ), ("mem_write", MEM_WRITE)]


class PyTransport:
    """A transport written in Python over a RegisterModel and a memory array, as a link would
    be: it logs every access and fails the ``fail_at``-th one (counting from 0) with NPU_E_IO."""

    def __init__(self, config: NpuConfig, mem_size: int, fail_at: int | None = None):
        self.mem = np.zeros(mem_size, dtype=np.uint8)
        self.model = RegisterModel(config, self.mem)
        self.fail_at, self.count, self.log = fail_at, 0, []
        self.c = TransportC(b"python", CSR_READ(self._csr_read), CSR_WRITE(self._csr_write),
                            MEM_READ(self._mem_read), MEM_WRITE(self._mem_write))
        self.dev = DevC()
        self.dev.mem_size, self.dev.transport = mem_size, C.addressof(self.c)

    @property
    def ref(self):
        return C.byref(self.dev)

    def _access(self, entry) -> bool:
        self.log.append(entry)
        self.count += 1
        return self.count - 1 == self.fail_at

    def _csr_read(self, dev, offset, value):
        if self._access(("csr_read", offset)):
            return S.NPU_E_IO
        value[0] = self.model.read(offset)
        return S.NPU_OK

    def _csr_write(self, dev, offset, value):
        if self._access(("csr_write", offset)):
            return S.NPU_E_IO
        self.model.write(offset, value)
        return S.NPU_OK

    def _mem_read(self, dev, addr, data, n):
        if self._access(("mem_read", addr, n)):
            return S.NPU_E_IO
        C.memmove(data, self.mem[addr:addr + n].ctypes.data, n)
        return S.NPU_OK

    def _mem_write(self, dev, addr, data, n):
        if self._access(("mem_write", addr, n)):
            return S.NPU_E_IO
        self.mem[addr:addr + n] = np.frombuffer(C.string_at(data, n), dtype=np.uint8)
        return S.NPU_OK


def _run_over(lib, t: PyTransport, prog, program: Program, x: np.ndarray, out: np.ndarray):
    """The whole run sequence through ``t``: the first failing status, or NPU_OK."""
    p, result = C.byref(prog), ResultC()
    for step in (lambda: lib.npu_check_hw(t.ref, p), lambda: lib.npu_load(t.ref, p),
                 lambda: lib.npu_set_input(t.ref, p, 0, x.ctypes.data, x.nbytes),
                 lambda: lib.npu_run(t.ref, p, 100, C.byref(result)),
                 lambda: min(lib.npu_irq_ack(t.ref), 0),          # 1: it was pending
                 lambda: lib.npu_get_output(t.ref, p, 0, out.ctypes.data, out.nbytes)):
        status = step()
        t.model.check()
        if status != S.NPU_OK:
            return status, result
    return S.NPU_OK, result


def test_custom_transport_runs_the_slice(lib, slice_programs):
    """Every access goes through the transport: the memory image is exact, memory moves in
    address order in blocks of at most NPU_XFER_BYTES (256), the counters are the simulator's."""
    config = SMALL_CONFIG
    program = slice_programs[config]
    inputs = dict(np.load(SLICE / "input.npz"))
    expected = np.load(SLICE / "expected.npz")["output"]
    t = PyTransport(config, _mem_size(program))
    prog = _parsed(lib, program.to_bytes())
    x, out = np.ascontiguousarray(inputs["input"]), np.zeros(expected.shape, dtype=expected.dtype)
    status, result = _run_over(lib, t, prog, program, x, out)
    assert status == S.NPU_OK
    np.testing.assert_array_equal(out, expected)
    assert result.cycles == IsaSim(config).run(program, program.memory_image(inputs)).cycles
    writes = [e for e in t.log if e[0] == "mem_write"]
    assert all(0 < n <= 256 for _, _, n in writes)
    # npu_load writes each byte of [0, extent) once, npu_set_input the input's bytes again...
    times = np.zeros(program.memory_extent(), dtype=np.int64)
    for _, addr, n in writes:
        times[addr:addr + n] += 1
    expect = np.ones_like(times)
    expect[prog.inputs[0].addr:prog.inputs[0].addr + prog.inputs[0].nbytes] = 2
    np.testing.assert_array_equal(times, expect)
    reads = [e for e in t.log if e[0] == "mem_read"]    # ... and the output is read in order
    assert [a for _, a, _ in reads] == sorted(a for _, a, _ in reads)
    assert sum(n for _, _, n in reads) == prog.outputs[0].nbytes


def test_every_transport_failure_is_returned(lib, slice_programs):
    """Failing any one access makes the run sequence return NPU_E_IO at that step: no value
    that was not read is acted on, and nothing after the failure is done."""
    config = SMALL_CONFIG
    program = slice_programs[config]
    x = np.ascontiguousarray(np.load(SLICE / "input.npz")["input"])
    out = np.zeros((1, 12, 11, 20), dtype=np.int8)
    prog = _parsed(lib, program.to_bytes())
    total = PyTransport(config, _mem_size(program))
    assert _run_over(lib, total, prog, program, x, out)[0] == S.NPU_OK
    for k in range(total.count):
        t = PyTransport(config, _mem_size(program), fail_at=k)
        status, _ = _run_over(lib, t, prog, program, x, out)
        assert status == S.NPU_E_IO, (k, total.log[k], lib.npu_status_name(status))
        assert t.count == k + 1, (k, total.log[k])      # the failed access was the last one


def test_mmio_transport_by_name_is_the_default(lib, slice_programs):
    """transport = &npu_mmio_transport behaves as NULL (the hooks and the memory window)."""
    program = slice_programs[SMALL_CONFIG]
    dev = Device(SMALL_CONFIG, _mem_size(program))
    dev.c.transport = C.addressof(TransportC.in_dll(lib, "npu_mmio_transport"))
    prog = _parsed(lib, program.to_bytes())
    assert dev.call(lib.npu_check_hw, C.byref(prog)) == S.NPU_OK
    assert lib.npu_load(dev.ref, C.byref(prog)) == S.NPU_OK
    assert bytes(dev.mem[:program.memory_extent()]) == bytes(program.memory_image({"input": np.zeros((1, 12, 11, 5), np.int8)}))


def _asm_program(config: NpuConfig, text: str, program_addr: int = 0) -> Program:
    return Program(config, assemble(text), program_addr=program_addr)


def test_npu_error_reports_code_and_stop_pc(lib):
    config = SMALL_CONFIG
    program = _asm_program(config, f"""
        SYNC
        DMA_LOAD sram=ASRAM sram_addr=0 ext_addr=0 len0=1 len1=1 len2=1
        DMA_LOAD sram=ASRAM sram_addr=0 ext_addr={config.ext_mem_bytes} len0=1 len1=1 len2=1 wait=DMA
        HALT wait=DMA
    """)
    dev = Device(config, 4096)
    prog = _parsed(lib, program.to_bytes())
    result = ResultC()
    assert lib.npu_load(dev.ref, C.byref(prog)) == S.NPU_OK
    assert dev.call(lib.npu_run, C.byref(prog), 100, C.byref(result)) == S.NPU_E_NPU
    assert result.status == bit("STATUS", "ERROR")
    assert result.error_code == ErrorCode.DMA_OUT_OF_RANGE and result.stop_pc == 2
    assert lib.npu_hw_error_name(result.error_code) == b"DMA_OUT_OF_RANGE"
    assert lib.npu_hw_error_name(99) == b"UNKNOWN"


def test_boot_error_is_reported(lib):
    """The instruction stream at an address that is not a bus word: the NPU refuses to boot."""
    config = SMALL_CONFIG
    program = _asm_program(config, "HALT", program_addr=config.bus_bytes + 2)
    dev = Device(config, 4096)
    prog = _parsed(lib, program.to_bytes())
    result = ResultC()
    assert lib.npu_load(dev.ref, C.byref(prog)) == S.NPU_OK
    assert dev.call(lib.npu_run, C.byref(prog), 100, C.byref(result)) == S.NPU_E_NPU
    assert (result.error_code, result.stop_pc) == (ErrorCode.DMA_MISALIGNED, 0)


def test_hw_identity_and_configuration(lib, slice_programs):
    prog = _parsed(lib, slice_programs[DEFAULT_CONFIG].to_bytes())
    for config in (DEFAULT_CONFIG, SMALL_CONFIG, NpuConfig(mem_latency=300)):
        c = Config(**config.to_dict())
        assert lib.npu_expected_hw_config(C.byref(c)) == hw_config_value(config)
    assert lib.npu_check_hw(Device(DEFAULT_CONFIG, 64).ref, C.byref(prog)) == S.NPU_OK
    assert lib.npu_check_hw(Device(SMALL_CONFIG, 64).ref, C.byref(prog)) == S.NPU_E_HW_CONFIG
    assert lib.npu_check_hw(Device(DEFAULT_CONFIG, 64, hw_id=HW_ID + 1).ref, C.byref(prog)) == S.NPU_E_HW_ID
    slower = NpuConfig(mem_latency=5)
    assert lib.npu_check_hw(Device(slower, 64).ref, C.byref(prog)) == S.NPU_E_HW_CONFIG


def test_poll_states_timeout_and_busy(lib):
    config = SMALL_CONFIG
    program = _asm_program(config, "HALT")
    prog = _parsed(lib, program.to_bytes())
    p, result = C.byref(prog), ResultC()
    dev = Device(config, 4096, polls=None)                  # never stops
    assert lib.npu_poll(dev.ref, C.byref(result)) == S.NPU_E_STATE    # not started
    assert lib.npu_load(dev.ref, p) == S.NPU_OK
    assert lib.npu_start(dev.ref, p, 0) == S.NPU_OK
    assert lib.npu_wait(dev.ref, 5, C.byref(result)) == S.NPU_E_TIMEOUT
    assert dev.idles == 4
    assert lib.npu_start(dev.ref, p, 0) == S.NPU_E_BUSY
    assert dev.model.starts == 1
    dev.model.check()


def test_memory_and_tensor_errors(lib, slice_programs):
    program = slice_programs[SMALL_CONFIG]
    prog = _parsed(lib, program.to_bytes())
    p = C.byref(prog)
    small = Device(SMALL_CONFIG, program.memory_extent() - SMALL_CONFIG.bus_bytes)
    assert lib.npu_load(small.ref, p) == S.NPU_E_MEMORY
    dev = Device(SMALL_CONFIG, program.memory_extent())
    x = np.zeros((1, 12, 11, 5), dtype=np.int8)
    assert lib.npu_set_input(dev.ref, p, 0, x.ctypes.data, x.nbytes - 1) == S.NPU_E_TENSOR
    assert lib.npu_set_input(dev.ref, p, 1, x.ctypes.data, x.nbytes) == S.NPU_E_ARG
    assert lib.npu_get_output(dev.ref, p, 0, x.ctypes.data, x.nbytes) == S.NPU_E_TENSOR


LAYOUT_CASES = {
    "plain": [("a", (1, 3, 2, 7), "int16", "brick", None), ("b", (5, 3), "int32", "flat", None),
              ("c", (2, 2, 3, 4), "uint8", "brick", None), ("d", (7,), "int8", "flat", None),
              ("e", (0, 3), "int16", "flat", None)],
    "transposed brick": [("nchw", (2, 6, 3, 5), "int8", "brick", (0, 2, 3, 1)),   # stored NHWC, 2 bricks
                         ("mixed", (3, 2, 1, 5), "int16", "brick", (3, 1, 0, 2)),
                         ("wide", (1, 2, 3, 9), "int32", "brick", (0, 3, 1, 2)),
                         ("same", (1, 2, 2, 3), "uint8", "brick", (0, 1, 2, 3))],   # explicit identity
    "transposed flat": [("swap", (5, 3), "int32", "flat", (1, 0)),
                        ("r3", (2, 3, 4), "int16", "flat", (2, 0, 1)),
                        ("r6", (2, 1, 3, 2, 2, 3), "int32", "flat", (5, 3, 1, 0, 4, 2)),   # NPU_MAX_RANK
                        ("empty", (0, 3, 2), "int8", "flat", (2, 1, 0)),
                        ("same", (2, 3, 4), "int8", "flat", (0, 1, 2))],
    "rows": [("r2", (5, 3), "int32", "rows", None), ("r0", (), "int16", "rows", None),
             ("r1", (9,), "int8", "rows", None), ("rt", (2, 3, 6), "int16", "rows", (2, 0, 1)),
             ("re", (0, 3), "int8", "rows", None), ("rb", (4, 1), "bool", "rows", None)],
}


@pytest.mark.parametrize("case", LAYOUT_CASES)
def test_layouts_and_element_sizes(lib, case):
    """Flat and brick tensors of 1-, 2- and 4-byte elements, stored as they are or transposed
    by a perm, placed and read back like isa/program.py does."""
    config = SMALL_CONFIG
    rng = np.random.default_rng(7)
    bindings, addr = [], 64
    for name, shape, dtype, layout, perm in LAYOUT_CASES[case]:
        b = TensorBinding(name, shape, dtype, addr, layout, perm)
        bindings.append(b)
        addr += b.nbytes(config.bus_bytes) + config.bus_bytes
    program = Program(config, assemble("HALT"), program_addr=0, segments=[Segment("k", 32, b"\x01\x02\x03")],
                      inputs=bindings, outputs=bindings)
    arrays = {b.name: rng.integers(-300, 300, b.shape).astype(b.dtype) for b in bindings}
    prog = _parsed(lib, program.to_bytes())
    _assert_same_program(prog, program)
    dev = Device(config, program.memory_extent())
    dev.mem[:] = 0xAB                                       # npu_load must clear it
    assert lib.npu_load(dev.ref, C.byref(prog)) == S.NPU_OK
    for i, b in enumerate(bindings):
        a = arrays[b.name]
        assert lib.npu_set_input(dev.ref, C.byref(prog), i, a.ctypes.data, a.nbytes) == S.NPU_OK
    assert bytes(dev.mem) == bytes(program.memory_image(arrays))
    dev.mem[:] = rng.integers(0, 256, dev.mem.size, dtype=np.uint8)
    expected = program.read_outputs(bytes(dev.mem))
    for i, b in enumerate(bindings):
        out = np.zeros(b.shape, dtype=b.dtype)
        assert lib.npu_get_output(dev.ref, C.byref(prog), i, out.ctypes.data, out.nbytes) == S.NPU_OK
        np.testing.assert_array_equal(out, expected[b.name])


# Inputs written as patches (isa/patches.py): config, [(name, graph shape, dtype, layout, perm,
# Patches(height, width, step_y, step_x, top, left, rows, cols, fill))].
PATCHES_CASES = {
    # A 7x7/2 stem: overlapping patches, padding 3 filled with a zero point, 147 channels of P
    # over 16 lanes (10 channel blocks, the last partial), with patches past the bottom/right.
    "stem 16 lanes": (DEFAULT_CONFIG, [
        ("stem", (1, 9, 10, 3), "int8", "brick", None, Patches(7, 7, 2, 2, 3, 3, 5, 6, -5))]),
    # Space-to-depth 2x2 of a 3-channel image: 12 channels of P, one brick; two images and a
    # patch row below the image (fill).
    "one brick": (DEFAULT_CONFIG, [
        ("s2d", (2, 6, 6, 3), "int8", "brick", None, Patches(2, 2, 2, 2, 0, 0, 4, 3, 7))]),
    # NCHW inputs transposed to NHWC, then 3x3/1 "same" patches (27 int16 channels: 2 blocks)
    # and 2x1/(1,2) ones.
    "perm": (DEFAULT_CONFIG, [
        ("nchw", (1, 3, 8, 7), "int16", "brick", (0, 2, 3, 1), Patches(3, 3, 1, 1, 1, 1, 8, 7, -300)),
        ("nchw2", (2, 4, 3, 5), "uint8", "brick", (0, 2, 3, 1), Patches(2, 1, 1, 2, 0, 1, 3, 3, 200))]),
    # Wider elements, steps larger than the patch (gaps), a fill beyond int16.
    "wide": (DEFAULT_CONFIG, [
        ("i32", (1, 5, 4, 2), "int32", "brick", None, Patches(2, 3, 3, 1, 2, 0, 3, 3, -70000)),
        ("i64", (1, 2, 3, 1), "int64", "brick", None, Patches(2, 2, 1, 1, 1, 1, 2, 3, -1)),
        ("u16", (1, 3, 3, 6), "uint16", "brick", None, Patches(2, 2, 1, 1, 0, 0, 2, 2, 65535))]),
    # 4 lanes: 27 channels of P over 7 blocks; a bool input (fill 2 converts to true).
    "4 lanes": (SMALL_CONFIG, [
        ("small", (1, 5, 5, 3), "int8", "brick", None, Patches(3, 3, 2, 2, 1, 1, 3, 3, -128)),
        ("mask", (1, 3, 3, 2), "bool", "brick", None, Patches(2, 2, 1, 1, 1, 1, 3, 3, 2))]),
    # The other layouts apply to P too; an image with no rows reads as all fill.
    "flat and rows": (DEFAULT_CONFIG, [
        ("flat", (1, 4, 5, 2), "int16", "flat", None, Patches(2, 2, 1, 1, 1, 0, 4, 4, 3)),
        ("rows", (1, 3, 4, 3), "int8", "rows", (0, 2, 1, 3), Patches(2, 3, 1, 2, 0, 1, 4, 2, -9)),
        ("empty", (1, 0, 3, 2), "int8", "brick", None, Patches(2, 2, 1, 1, 0, 0, 2, 2, 9))]),
}


@pytest.mark.parametrize("case", PATCHES_CASES)
def test_inputs_written_as_patches(lib, case):
    """npu_set_input writes an input with "patches" as exactly the bytes of Python's
    TensorBinding.pack (isa/patches.py's extraction, then the layout), through the memory
    window and through a transport (in address order, in blocks of at most NPU_XFER_BYTES)."""
    config, specs = PATCHES_CASES[case]
    lanes = config.bus_bytes
    rng = np.random.default_rng(11)
    bindings, addr = [], 64
    for name, shape, dtype, layout, perm, patches in specs:
        b = TensorBinding(name, shape, dtype, addr, layout, perm, patches)
        bindings.append(b)
        addr += b.nbytes(lanes) + lanes
    out = TensorBinding("out", (1, 2, 2, 3), "int8", addr, "brick")
    program = Program(config, assemble("HALT"), program_addr=0, inputs=bindings, outputs=[out])
    image = program.to_bytes()
    prog = _parsed(lib, image)
    _assert_same_program(prog, Program.from_bytes(image))      # sizes, extent, the patches fields
    arrays = {}
    for b in bindings:
        if b.dtype == "bool":
            arrays[b.name] = rng.integers(0, 2, b.shape).astype(bool)
        else:
            lim = np.iinfo(b.dtype)
            arrays[b.name] = rng.integers(max(lim.min, -1 << 40), min(lim.max, 1 << 40), b.shape, dtype=b.dtype,
                                          endpoint=True)
    dev = Device(config, program.memory_extent())
    t = PyTransport(config, program.memory_extent())
    dev.mem[:] = 0xAB                                           # npu_load must clear it
    for d in (dev, t):
        assert lib.npu_load(d.ref, C.byref(prog)) == S.NPU_OK
    t.log.clear()
    for i, b in enumerate(bindings):
        a = np.ascontiguousarray(arrays[b.name])
        for d in (dev, t):
            assert lib.npu_set_input(d.ref, C.byref(prog), i, a.ctypes.data, a.nbytes) == S.NPU_OK, b.name
        packed = b.pack(a, lanes)                               # expected: isa/patches.py + isa/layout.py
        assert len(packed) == b.nbytes(lanes) == prog.inputs[i].nbytes
        assert bytes(dev.mem[b.addr:b.addr + len(packed)]) == packed, b.name
        assert bytes(t.mem[b.addr:b.addr + len(packed)]) == packed, b.name
    assert bytes(dev.mem) == bytes(t.mem) == bytes(program.memory_image(arrays))
    writes = [(a, n) for kind, a, n in t.log if kind == "mem_write"]
    assert all(0 < n <= 256 for _, n in writes)
    assert sum(n for _, n in writes) == sum(b.nbytes(lanes) for b in bindings)
    # The host passes the graph's array, not P.
    a = arrays[bindings[0].name]
    assert lib.npu_set_input(dev.ref, C.byref(prog), 0, a.ctypes.data, a.nbytes + 1) == S.NPU_E_TENSOR


def test_patches_null_and_repeated_lists(lib, slice_programs):
    """"patches": null is no patches (as in isa/program.py), also on an output; a later
    "inputs" list replaces an earlier one whole, its patches included (as json.loads does)."""
    image = slice_programs[SMALL_CONFIG].to_bytes()
    header = _header(image)
    header["inputs"][0]["patches"] = None
    header["outputs"][0]["patches"] = None
    edited = _with_header(image, header)
    prog = _parsed(lib, edited)
    _assert_same_program(prog, Program.from_bytes(edited))
    assert not prog.inputs[0].has_patches and not prog.outputs[0].has_patches
    with_patches = dict(header["inputs"][0], patches=Patches(2, 2, 2, 2, 0, 0, 6, 6, 0).to_dict())
    text = json.dumps(header)
    text = text.replace('"inputs": ', '"inputs": ' + json.dumps([with_patches]) + ', "inputs": ', 1)
    edited = _with_header(image, text)
    assert json.loads(text)["inputs"] == header["inputs"]
    prog = _parsed(lib, edited)
    _assert_same_program(prog, Program.from_bytes(edited))
    assert not prog.inputs[0].has_patches


def test_transposed_graph_io_runs_through_the_driver(lib):
    """An NCHW graph input TRANSPOSEd to NHWC and an NHWC result TRANSPOSEd back: the
    compiler folds both transposes into the bindings' perm, so the driver must transpose
    while placing the input and reading the outputs.  Expected: the reference interpreter."""
    config = SMALL_CONFIG                               # 4 lanes: 6 channels span 2 bricks
    g = GraphBuilder(np.random.default_rng(21))
    x = g.input("x", (2, 6, 5, 7))                      # NCHW
    y = g.conv(g.transpose(x, (0, 2, 3, 1)), ConvSpec(oc=5, kernel=(3, 2), pad=(1, 1, 0, 1)))
    out = g.transpose(y, (0, 3, 1, 2))                  # NHWC -> NCHW for the host
    graph = g.graph([out, y])
    program = run_pipeline(graph, config).program
    # Otherwise the test would not test the perm: the compiler must have folded both.
    assert [b.perm for b in program.inputs] == [(0, 2, 3, 1)]
    assert [b.perm for b in program.outputs] == [(0, 2, 3, 1), None]
    inputs = {"x": np.random.default_rng(22).integers(-128, 128, (2, 6, 5, 7), dtype=np.int8)}
    expected = run_graph(graph, inputs)

    prog = _parsed(lib, program.to_bytes())
    _assert_same_program(prog, program)
    p, result = C.byref(prog), ResultC()
    dev = Device(config, _mem_size(program))
    assert lib.npu_load(dev.ref, p) == S.NPU_OK
    x_host = np.ascontiguousarray(inputs["x"])
    assert lib.npu_set_input(dev.ref, p, lib.npu_find_input(p, b"x"), x_host.ctypes.data, x_host.nbytes) == S.NPU_OK
    extent = program.memory_extent()
    assert bytes(dev.mem[:extent]) == bytes(program.memory_image(inputs))   # placed as NHWC bricks
    assert dev.call(lib.npu_run, p, 100, C.byref(result)) == S.NPU_OK, lib.npu_hw_error_name(result.error_code)
    for name in (out, y):
        want = expected[name]
        got = np.full(want.shape, 99, dtype=want.dtype)
        index = lib.npu_find_output(p, name.encode())
        assert lib.npu_get_output(dev.ref, p, index, got.ctypes.data, got.nbytes) == S.NPU_OK
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_mmio_register_access(lib, slice_programs):
    """npu_dev_init_mmio: volatile loads and stores at the register offsets."""
    program = slice_programs[DEFAULT_CONFIG]
    prog = _parsed(lib, program.to_bytes())
    regs = (C.c_uint32 * (max(r.offset for r in REGISTERS) // 4 + 1))()
    regs[BY_NAME["HW_ID"].offset // 4] = HW_ID
    regs[BY_NAME["HW_CONFIG"].offset // 4] = hw_config_value(DEFAULT_CONFIG)
    mem = np.zeros(16, dtype=np.uint8)
    dev = DevC()
    lib.npu_dev_init_mmio(C.byref(dev), C.addressof(regs), mem.ctypes.data, mem.size)
    assert lib.npu_check_hw(C.byref(dev), C.byref(prog)) == S.NPU_OK
    assert lib.npu_start(C.byref(dev), C.byref(prog), 1) == S.NPU_OK
    word = {r.name: regs[r.offset // 4] for r in REGISTERS}
    assert (word["PROG_ADDR"], word["PROG_LEN"]) == (program.program_addr, len(program.instructions))
    assert (word["IRQ_ENABLE"], word["CTRL"]) == (1, 1)


# -- the npu_info tool under AddressSanitizer -------------------------------------------------------
def test_npu_info_under_sanitizers(slice_programs, tmp_path):
    cc = _compiler()
    sanitize = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    if not _links(cc, sanitize, tmp_path):
        sanitize = []                                   # still a useful end-to-end check
    tool = tmp_path / "npu_info"
    _compile([cc, *WARNINGS, "-O1", "-g", *sanitize, f"-I{FW / 'include'}", *map(str, SOURCES),
              str(FW / "tools" / "npu_info.c"), "-o", str(tool)])
    program = slice_programs[SMALL_CONFIG]
    image = program.to_bytes()
    good = tmp_path / "slice.npuprog"
    good.write_bytes(image)

    run = subprocess.run([str(tool), str(good)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert f"instructions={len(program.instructions)} program_addr={program.program_addr} " \
           f"extent={program.memory_extent()}" in run.stdout
    assert f"hw_config=0x{hw_config_value(SMALL_CONFIG):08x}" in run.stdout

    # On 16x16 the slice's input (5 channels) is written as patches: the tool shows them.
    patched = slice_programs[DEFAULT_CONFIG]
    p = patched.inputs[0].patches
    assert p is not None
    (tmp_path / "patched.npuprog").write_bytes(patched.to_bytes())
    run = subprocess.run([str(tool), str(tmp_path / "patched.npuprog")], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert (f" patches={p.height}x{p.width}/{p.step_y},{p.step_x}+{p.top},{p.left}:{p.rows}x{p.cols} "
            f"fill={p.fill} bytes={patched.inputs[0].nbytes(DEFAULT_CONFIG.bus_bytes)}") in run.stdout

    run = subprocess.run([str(tool), "--prefixes", str(good)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    jlen = struct.unpack_from("<I", image, 12)[0]
    assert f"{len(image)} prefixes, 0 accepted; {jlen + 1} header prefixes, 0 accepted" in run.stdout

    # Mutated headers: any verdict, but no memory error or undefined behaviour.
    rng = np.random.default_rng(1234)
    alphabet = np.frombuffer(b'{}[]":,-.0123456789eEtfnu\\ \x00\xff', dtype=np.uint8)
    paths = []
    for i in range(150):
        data = bytearray(image)
        for pos in rng.integers(16, 16 + jlen, rng.integers(1, 4)):
            data[pos] = rng.choice(alphabet)
        if i % 10 == 0:                                 # a wrong JSON length
            data[12:16] = struct.pack("<I", int(rng.integers(0, len(image))))
        paths.append(tmp_path / f"m{i}.npuprog")
        paths[-1].write_bytes(bytes(data))
    run = subprocess.run([str(tool), *map(str, paths)], capture_output=True, text=True, timeout=120)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr[-3000:]
    assert len(run.stdout.splitlines()) >= len(paths)
