"""One fuzz target per kind of untrusted input: its seeds (the committed fixtures), how a
mutant becomes files, and what runs on them in the limited child (fuzz/contract.py).

Graph formats (tosa, circle, nnef, openvino) run the reference interpreter on zero inputs
and, when it accepts, compile and run the ISA simulator (watchdog on) and compare: both
accepting and disagreeing is a finding.  The other kinds go through the `npu` command line
(npz inputs, program images, configurations) or the conformance runner (desc.json).
"""
from __future__ import annotations

import io
import random
import shutil
import tarfile
from pathlib import Path

import numpy as np

from fuzz.contract import DISAGREE
from fuzz.mutate import mutate

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
SLICE = ROOT / "models" / "slice" / "conv_rescale_clamp.tosa"
SLICE_INPUTS = ROOT / "models" / "slice" / "input.npz"

# The ISA side of a graph check: watchdog and instruction-count bounds for fuzzing.
FUZZ_MAX_CYCLES = 100_000


def guarded(fn, *args) -> int:
    """``fn(*args)`` with the command line's error handling: an NpuError is one line and its
    exit code; anything else propagates (a traceback: a finding)."""
    from npu.cli import _quiet
    from tosa_ir.errors import NpuError

    try:
        with _quiet():
            return fn(*args) or 0
    except NpuError as e:
        import sys

        print("error: " + " ".join(str(e).split("\n")), file=sys.stderr)
        return e.exit_code


def cli(*args) -> int:
    from npu.cli import main

    return main([str(a) for a in args])


# -- graph formats ------------------------------------------------------------------------
def _zero_inputs(graph) -> dict:
    from tosa_ir.graph import numpy_dtype

    inputs = {}
    for name in graph.main.inputs:
        t = graph.main.tensor(name)
        shape = tuple(max(d, 1) for d in t.shape)
        if int(np.prod(shape, dtype=np.int64)) > 1 << 22:
            from tosa_ir.errors import Unsupported

            raise Unsupported(f"input {name!r} of shape {list(shape)} is larger than fuzzing runs")
        inputs[name] = np.zeros(shape, numpy_dtype(t.dtype))
    return inputs


def graph_check(path: str) -> int:
    """Load, run on the reference; if it runs, compile and run on the ISA simulator, compare."""
    from compiler.frontends import load_graph
    from npu import backends
    from npu.calibration import is_float_graph
    from sim.reference import run_graph
    from tosa_ir.errors import NpuError

    graph = load_graph(path)
    if is_float_graph(graph):
        # Quantized as `--calibrate` would, with two fixed random samples.
        from compiler.graph.quantize import quantize_graph
        from tosa_ir.errors import InvalidInput

        rng = np.random.default_rng(0)
        samples = [{n: rng.standard_normal(a.shape).astype(np.float32) for n, a in _zero_inputs(graph).items()}
                   for _ in range(2)]
        try:
            graph = quantize_graph(graph, samples).graph
        except ValueError as e:
            raise InvalidInput(f"{path}: cannot quantize: {e}") from None
    inputs = _zero_inputs(graph)
    ref = run_graph(graph, inputs)
    try:
        from isa import SMALL_CONFIG

        isa, _ = backends.run(backends.Model(path, graph=graph), inputs, "isa", SMALL_CONFIG,
                              max_cycles=FUZZ_MAX_CYCLES)
    except NpuError:
        return 0                        # the compiler or the NPU refused: fine, if said in one line
    for name, want in ref.items():
        got = isa.get(name)
        if got is None or np.asarray(got).shape != want.shape or not np.array_equal(
                np.asarray(got).astype(np.int64), want.astype(np.int64)):
            import sys

            print(f"ref and isa disagree on {name!r}", file=sys.stderr)
            return DISAGREE
    return 0


class Target:
    """``seeds()``: list of seed bytes; ``write(data, dir)``: files for a mutant, returns the
    argument of ``run``; ``run(arg)``: exit code (runs in the child)."""

    kind = ""
    text = False

    def seeds(self) -> list[bytes]:
        raise NotImplementedError

    def mutant(self, seed: bytes, rng: random.Random) -> bytes:
        return mutate(seed, rng, self.text)

    def write(self, data: bytes, folder: Path) -> str:
        raise NotImplementedError

    def run(self, arg: str) -> int:
        raise NotImplementedError


class TosaTarget(Target):
    kind = "tosa"

    def seeds(self):
        return [SLICE.read_bytes(), (FIX / "tosa" / "digits_cnn.tosa").read_bytes()]

    def write(self, data, folder):
        path = folder / "model.tosa"
        path.write_bytes(data)
        return str(path)

    def run(self, arg):
        return guarded(graph_check, arg)


class CircleTarget(TosaTarget):
    kind = "circle"

    def seeds(self):
        names = ("avgpool_rounding", "fc_stack", "tables", "cnn_basic", "per_tensor")
        return [(FIX / "tflite" / f"{n}.tflite").read_bytes() for n in names] + \
            [(FIX / "tflite" / "fc_stack.circle").read_bytes()]

    def write(self, data, folder):
        path = folder / ("model.circle" if data[4:8] == b"CIR0" else "model.tflite")
        path.write_bytes(data)
        return str(path)


def _tar_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f.name)
    return buf.getvalue()


class NnefTarget(TosaTarget):
    """Seeds are tar archives of the NNEF fixtures; a mutant is either the archive mutated
    as bytes (headers, sizes) or, half the time, its graph.nnef mutated as text."""

    kind = "nnef"

    def seeds(self):
        return [_tar_of(FIX / "nnef" / "digits_cnn")]

    def mutant(self, seed, rng):
        if rng.random() < 0.5:
            return b"B" + mutate(seed, rng)
        with tarfile.open(fileobj=io.BytesIO(seed)) as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
        files["graph.nnef"] = mutate(files["graph.nnef"], rng, text=True)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return b"T" + buf.getvalue()

    def write(self, data, folder):
        if data[:1] == b"B":
            path = folder / "model.tar"
            path.write_bytes(data[1:])
            return str(path)
        model = folder / "model"
        model.mkdir()
        with tarfile.open(fileobj=io.BytesIO(data[1:])) as tar:
            for m in tar:
                (model / Path(m.name).name).write_bytes(tar.extractfile(m).read())
        return str(model)


class OpenVinoTarget(TosaTarget):
    """A mutant is ``xml`` and ``bin`` joined by a marker; the XML is mutated as text three
    times in four, the weights otherwise."""

    kind = "openvino"
    SEP = b"\n<!--FUZZ-BIN-->\n"

    def seeds(self):
        names = ("tflite_cnn_basic", "cnn_fq")
        return [(FIX / "openvino" / f"{n}.xml").read_bytes() + self.SEP + (FIX / "openvino" / f"{n}.bin").read_bytes()
                for n in names]

    def mutant(self, seed, rng):
        xml, _, weights = seed.partition(self.SEP)
        if rng.random() < 0.75:
            xml = mutate(xml, rng, text=True)
        else:
            weights = mutate(weights, rng)
        return xml + self.SEP + weights

    def write(self, data, folder):
        xml, _, weights = data.partition(self.SEP)
        (folder / "model.xml").write_bytes(xml)
        (folder / "model.bin").write_bytes(weights)
        return str(folder / "model.xml")


# -- command-line inputs ------------------------------------------------------------------
class NpzTarget(Target):
    kind = "npz"

    def seeds(self):
        buf = io.BytesIO()
        np.savez_compressed(buf, input=np.load(SLICE_INPUTS)["input"])
        return [SLICE_INPUTS.read_bytes(), buf.getvalue()]

    def write(self, data, folder):
        path = folder / "in.npz"
        path.write_bytes(data)
        return str(path)

    def run(self, arg):
        return cli("run", SLICE, "--backend", "ref", "--inputs", arg, "--output", Path(arg).parent / "out.npz")


def _slice_image() -> bytes:
    from compiler.driver import compile_graph
    from isa import SMALL_CONFIG
    from tosa_ir.tosa_fb import read_tosa

    return compile_graph(read_tosa(SLICE), SMALL_CONFIG).to_bytes()


class ProgramTarget(Target):
    kind = "npuprog"

    def seeds(self):
        return [_slice_image()]

    def mutant(self, seed, rng):
        # Two times in three, mutate the JSON header as text (fields, numbers), else bytes.
        import struct

        if rng.random() < 2 / 3:
            jlen = struct.unpack_from("<I", seed, 12)[0]
            header = mutate(seed[16:16 + jlen], rng, text=True)
            return seed[:12] + struct.pack("<I", len(header)) + header + seed[16 + jlen:]
        return mutate(seed, rng)

    def write(self, data, folder):
        path = folder / "p.npuprog"
        path.write_bytes(data)
        return str(path)

    def run(self, arg):
        return cli("run", arg, "--backend", "isa", "--inputs", SLICE_INPUTS, "--output",
                   Path(arg).parent / "out.npz", "--max-cycles", FUZZ_MAX_CYCLES)


class ConfigTarget(Target):
    kind = "config"
    text = True

    def seeds(self):
        from isa import DEFAULT_CONFIG, SMALL_CONFIG

        return [SMALL_CONFIG.to_json().encode(), DEFAULT_CONFIG.to_json().encode()]

    def write(self, data, folder):
        path = folder / "c.json"
        path.write_bytes(data)
        return str(path)

    def run(self, arg):
        return cli("compile", SLICE, "-o", Path(arg).parent / "p.npuprog", "--config", arg)


class DescTarget(Target):
    """A conformance test folder built from the slice model; desc.json is mutated as text.
    The runner must turn every problem into a verdict, never raise."""

    kind = "desc"
    text = True

    def seeds(self):
        import json

        return [json.dumps({"tosa_file": "g.tosa", "ifm_name": ["input"], "ifm_file": ["in0.npy"],
                            "ofm_name": ["output"], "expected_result_file": ["out0.npy"],
                            "expected_failure": False, "meta": {"compliance": {"tensors": {}}}},
                           indent=1).encode()]

    def write(self, data, folder):
        from sim.reference import run_graph
        from tosa_ir.tosa_fb import read_tosa

        test = folder / "conv2d_1"
        test.mkdir()
        shutil.copyfile(SLICE, test / "g.tosa")
        x = np.load(SLICE_INPUTS)["input"]
        np.save(test / "in0.npy", x)
        np.save(test / "out0.npy", run_graph(read_tosa(SLICE), {"input": x})["output"])
        (test / "desc.json").write_bytes(data)
        return str(test)

    def run(self, arg):
        from npu import conformance

        conformance.run_test("conv2d_1", Path(arg), "ref")
        return 0


class IsaTarget(Target):
    """Random instruction streams (valid encodings with random fields, and raw random words)
    on the ISA simulator with the watchdog on: it must end with a result, never raise."""

    kind = "isa"

    def seeds(self):
        return [bytes(32)]

    def mutant(self, seed, rng):
        return rng.getrandbits(64).to_bytes(8, "little")

    def write(self, data, folder):
        return data.hex()

    def run(self, arg):
        return guarded(run_random_program, int(arg, 16))


def random_program(seed: int, length: int = 12, wide: bool = True, wait: int | None = None):
    """``length`` instructions with random fields (each in its field's range, small values
    three times in four so addresses often land inside the scratchpads; only small ones
    unless ``wide``) then HALT.  ``wait``: force every wait mask (7: fully serialised, so
    the result cannot depend on how units overlap)."""
    from isa.encoding import HEADER_FIELDS, Instruction
    from isa.instructions import BY_NAME

    rng = np.random.default_rng(seed)
    names = sorted(BY_NAME)
    instrs = []
    for _ in range(length):
        d = BY_NAME[names[int(rng.integers(len(names)))]]
        values = {}
        for f in tuple(HEADER_FIELDS) + tuple(d.fields):
            if f.name == "opcode":
                continue
            if f.name == "wait" and wait is not None:
                values[f.name] = wait
            elif int(rng.integers(4)) < 3 or not wide:
                values[f.name] = int(rng.integers(max(f.min, -4), min(f.max, 40), endpoint=True))
            else:
                values[f.name] = int(rng.integers(f.min, f.max, endpoint=True))
        instrs.append(Instruction(d.name, values))
    instrs.append(Instruction("HALT", {}))
    return instrs


def run_random_program(seed: int) -> int:
    from isa import SMALL_CONFIG
    from isa.encoding import EncodingError, encode_program
    from isa.program import Program
    from sim.isa.sim import IsaSim

    try:
        instrs = random_program(seed)
    except (EncodingError, ValueError):
        return 2
    mem = bytearray(encode_program(instrs))
    mem += bytes(np.random.default_rng(seed).integers(0, 256, 16384, dtype=np.uint8))
    IsaSim(SMALL_CONFIG).run(Program(SMALL_CONFIG, instrs), bytes(mem), max_cycles=50_000)
    return 0


def preload() -> None:
    """Import everything a child may need once, in the parent: children are forked, so each
    input then costs milliseconds instead of a second of imports."""
    import importlib

    for name in ("npu.cli", "npu.backends", "npu.conformance", "npu.calibration", "compiler.driver",
                 "compiler.frontends", "compiler.frontends.tosa.load", "compiler.frontends.nnef.load",
                 "compiler.frontends.circle.load", "compiler.frontends.openvino.load", "compiler.estimate.layers",
                 "sim.reference", "sim.isa.sim", "sim.npu_timing", "tosa_ir.tosa_fb", "tosa_ir.safe_io"):
        importlib.import_module(name)


TARGETS = {t.kind: t for t in (TosaTarget(), CircleTarget(), NnefTarget(), OpenVinoTarget(), NpzTarget(),
                               ProgramTarget(), ConfigTarget(), DescTarget(), IsaTarget())}
