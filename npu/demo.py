"""`make sim MODEL=name`: run a bundled model end to end and check the backends agree.

    python -m npu.demo slice --backend rtl

Runs the model on the reference interpreter (the golden answer), compiles it, runs the program
on the ISA simulator and, with ``--backend rtl``, on the RTL; then reports a bit-exact comparison,
cycles and MAC-array utilisation.  Bundled models live in models/<name>/ with a model file and
input.npz.

The ISA simulator and the RTL run at the same time: the RTL simulation is a process of its own
(Verilator), so on two cores the wall time is the slower of the two instead of their sum
(ResNet-50: the ISA simulator ~90 s beside the RTL's ~140 s).
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tosa_ir.errors import NpuError, Unsupported

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "models"
MODEL_SUFFIXES = (".tosa", ".nnef", ".tgz", ".circle", ".tflite", ".xml")

# Models whose weights are generated rather than committed: name -> (builder script, output
# folder).  The builder writes <folder>/<name>_int8.tosa and <folder>/input.npz once; later runs
# reuse them.
GENERATED = {name: (ROOT / "tools" / f"make_{name}.py", ROOT / "build" / name)
             for name in ("alexnet", "resnet50", "mobilenetv2")}


def _generate(name: str) -> tuple[Path, Path]:
    script, out = GENERATED[name]
    model, inputs = out / f"{name}_int8.tosa", out / "input.npz"
    # Rebuilt when missing or older than its builder (a changed builder changes the model).
    builders = [script, script.parent / "nnef_synth.py", script.parent / "make_alexnet.py"]
    newest = max(p.stat().st_mtime for p in builders if p.is_file())
    if not (model.is_file() and inputs.is_file()) or model.stat().st_mtime < newest:
        import runpy

        print(f"building {name} with {script.relative_to(ROOT)} (once; cached in {out.relative_to(ROOT)})")
        runpy.run_path(str(script), run_name="builder")["main"](["--out", str(out), "--no-report"])
    return model, inputs


def find_model(name: str) -> tuple[Path, Path]:
    if name in GENERATED:
        return _generate(name)
    folder = MODELS_DIR / name
    if not folder.is_dir():
        known = sorted(p.name for p in MODELS_DIR.iterdir() if p.is_dir()) if MODELS_DIR.is_dir() else []
        raise Unsupported(f"no bundled model {name!r}; bundled models: {', '.join(known)}")
    files = [p for p in sorted(folder.iterdir()) if p.suffix in MODEL_SUFFIXES or p.name == "graph.nnef"]
    if not files:
        raise Unsupported(f"{folder}: no model file")
    return files[0], folder / "input.npz"


def _compare(name: str, got: dict, want: dict) -> bool:
    ok = True
    for key, ref in want.items():
        out = got[key]
        same = out.shape == ref.shape and np.array_equal(out, ref)
        diff = "" if same else f" ({int(np.count_nonzero(out != ref))} of {ref.size} elements differ)"
        print(f"  {name:4s} {key}: {'bit-exact' if same else 'MISMATCH'}{diff}")
        ok &= same
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="bundled model name (a folder of models/)")
    parser.add_argument("--backend", choices=("isa", "rtl"), default="rtl",
                        help="the furthest backend to run (default: %(default)s)")
    args = parser.parse_args(argv)
    from npu import backends
    from isa.config import DEFAULT_CONFIG

    try:
        model_path, input_path = find_model(args.model)
        model = backends.load_model(str(model_path))
        inputs = backends.load_inputs(input_path, model)
        print(f"model {args.model}: {model_path.relative_to(ROOT)}", flush=True)
        t = time.perf_counter()
        golden, _ = backends.run(model, inputs, "ref", DEFAULT_CONFIG)
        print(f"reference interpreter: {time.perf_counter() - t:.2f} s", flush=True)
        t = time.perf_counter()
        program = backends.compile_model(model, DEFAULT_CONFIG)
        print(f"compiled: {len(program.instructions)} instructions in {time.perf_counter() - t:.2f} s",
              flush=True)
        compiled = backends.Model(model.source, program=program)

        def run(backend: str):
            t = time.perf_counter()
            outputs, stats = backends.run(compiled, inputs, backend, DEFAULT_CONFIG)
            return outputs, stats, time.perf_counter() - t

        ok = True
        with ThreadPoolExecutor(max_workers=1) as pool:
            # The RTL's thread mostly waits for its simulator process; this one runs the ISA
            # simulator meanwhile.  Results are reported in backend order either way.
            rtl = pool.submit(run, "rtl") if args.backend == "rtl" else None
            for backend, result in (("isa", run("isa")), ("rtl", rtl)):
                if result is None:
                    continue
                outputs, stats, seconds = result if backend == "isa" else result.result()
                macs = program.info.get("macs", 0)
                cycles = stats["cycles"]
                util = 100.0 * macs / (cycles * program.config.macs_per_cycle) if cycles and macs else 0.0
                print(f"{backend}: {cycles} cycles, MAC utilisation {util:.1f}% ({macs} MACs), {seconds:.2f} s",
                      flush=True)
                ok &= _compare(backend, outputs, golden)
        print("RESULT: " + ("bit-exact match on every backend" if ok else "MISMATCH"))
        return 0 if ok else 1
    except NpuError as e:
        print(f"make sim: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
