#!/usr/bin/env python3
"""Convert the network-family .tflite fixtures with OpenVINO's and nnef-tools' converters.

The families are tests/fixtures/tflite/families/<name>.tflite (tools/make_tflite_family_fixtures.py).
This script runs the converters as a user would, and keeps their output unchanged:

* OpenVINO: ``openvino.convert_model("<name>.tflite")`` then ``openvino.save_model(...,
  compress_to_fp16=False)`` -> tests/fixtures/openvino/families/<name>.xml/.bin, and
  ``<name>.npz`` with ``in:<input name>`` (the family's input codes, leading axis = sample)
  and ``out:<output name>`` (what OpenVINO's CPU plugin computes from the saved IR, with
  ``INFERENCE_PRECISION_HINT=f32``).
* nnef-tools: ``python -m nnef_tools.convert --input-format tflite --output-format nnef
  --keep-io-names`` -> tests/fixtures/nnef/families/<name>/ (graph.nnef, graph.quant,
  .dat files).

A family a converter refuses gets no files; ``conversions.json`` in each output folder
records, per family, "converted" or the converter's own last error line, so the tests can
tell "the converter failed" from "the fixture is missing".

The converters are fixture-building extras, never runtime dependencies::

    python3 -m venv /work/venv-fx
    /work/venv-fx/bin/pip install openvino nnef-tools numpy ai-edge-litert
    /work/venv-fx/bin/python tools/make_family_conversions.py [NAME...]

Everything is deterministic: the inputs are the family npz's, the npz files have fixed
timestamps, and both converters write the same bytes for the same model.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "tests" / "fixtures" / "tflite" / "families"
OV_OUT = ROOT / "tests" / "fixtures" / "openvino" / "families"
NNEF_OUT = ROOT / "tests" / "fixtures" / "nnef" / "families"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_openvino_fixtures import save_npz  # noqa: E402  (reproducible .npz bytes: one writer)


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def openvino_family(name: str) -> str:
    import openvino as ov

    try:
        model = ov.convert_model(str(FAMILIES / f"{name}.tflite"))
    except Exception as e:          # the converter's own refusal is the record
        return last_line(str(e))
    xml = OV_OUT / f"{name}.xml"
    ov.save_model(model, xml, compress_to_fp16=False)
    # Expected outputs come from the saved IR as OpenVINO reads it back.
    reread = ov.Core().read_model(xml)
    compiled = ov.Core().compile_model(reread, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    data = np.load(FAMILIES / f"{name}.npz")
    count = data["input_0"].shape[0]
    arrays = {f"in:{p.get_any_name()}": data[f"input_{i}"] for i, p in enumerate(reread.inputs)}
    outs: dict[str, list[np.ndarray]] = {}
    for s in range(count):
        res = compiled({i: data[f"input_{i}"][s] for i in range(len(reread.inputs))})
        for port in compiled.outputs:
            outs.setdefault(port.get_any_name(), []).append(np.asarray(res[port]))
    arrays.update({f"out:{k}": np.stack(v) for k, v in outs.items()})
    save_npz(OV_OUT / f"{name}.npz", arrays)
    return "converted"


def nnef_family(name: str) -> str:
    out = NNEF_OUT / name
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "nnef_tools.convert", "--input-format", "tflite",
           "--output-format", "nnef", "--keep-io-names",
           "--input-model", str(FAMILIES / f"{name}.tflite"), "--output-model", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not (out / "graph.nnef").exists():
        shutil.rmtree(out, ignore_errors=True)
        return last_line(proc.stderr or proc.stdout)
    return "converted"


def update_record(folder: Path, results: dict[str, str]) -> None:
    path = folder / "conversions.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    record.update(results)
    path.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")


def main(argv: list[str]) -> int:
    manifest = json.loads((FAMILIES / "manifest.json").read_text())
    names = argv[1:] or sorted(manifest)
    unknown = [n for n in names if n not in manifest]
    if unknown:
        print(f"unknown family: {', '.join(unknown)} (known: {', '.join(sorted(manifest))})",
              file=sys.stderr)
        return 2
    OV_OUT.mkdir(parents=True, exist_ok=True)
    NNEF_OUT.mkdir(parents=True, exist_ok=True)
    ov_results = {n: openvino_family(n) for n in names}
    nnef_results = {n: nnef_family(n) for n in names}
    update_record(OV_OUT, ov_results)
    update_record(NNEF_OUT, nnef_results)
    for n in names:
        print(f"{n}: openvino {ov_results[n]}; nnef {nnef_results[n]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
