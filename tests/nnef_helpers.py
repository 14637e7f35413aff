"""Helpers for the NNEF frontend and quantizer tests (not a test module).

* :func:`write_model`: an NNEF model folder from graph text and weights.
* :func:`khronos_run`: the Khronos NNEF runtime (``nnef.Session``, C++), an oracle for
  the float semantics of NNEF graphs, independent of our frontend.
* :func:`official_run`: the official TOSA reference model on one of our graphs (through
  tests/oracle.py's out-of-process worker), an oracle for TOSA semantics.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np

import nnef

sys.path.insert(0, os.path.dirname(__file__))
import oracle  # noqa: E402

from compiler.frontends.nnef.dat import write_float  # noqa: E402
from tosa_ir.tosa_fb import write_tosa  # noqa: E402

TINY_CNN = """version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [1, 3, 16, 16]);
    k1 = variable(shape = [8, 3, 3, 3], label = 'c1/k');
    b1 = variable(shape = [1, 8], label = 'c1/b');
    c1 = conv(input, k1, b1, padding = [(1,1),(1,1)]);
    r1 = relu(c1);
    p1 = max_pool(r1, size = [1,1,3,3], stride = [1,1,2,2], border = 'ignore',
                  padding = [(0,0),(0,0),(0,0),(0,0)]);
    k2 = variable(shape = [10, 8, 7, 7], label = 'fc/k');
    b2 = variable(shape = [1, 10], label = 'fc/b');
    c2 = conv(p1, k2, b2, padding = [(0,0),(0,0)]);
    output = softmax(c2);
}
"""


def random_weights(text: str, seed: int = 0, scale: float = 0.3) -> dict[str, np.ndarray]:
    """Seeded float32 data for every ``variable`` of a graph text (parsed by nnef)."""
    graph = nnef.parse_string(text, lowered=[])
    rng = np.random.default_rng(seed)
    out = {}
    for op in graph.operations:
        if op.name == "variable":
            shape = op.attribs["shape"]
            out[op.attribs["label"]] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return out


def write_model(folder: Path, text: str, weights: dict[str, np.ndarray] | None = None,
                quant: str | None = None, raw: dict[str, bytes] | None = None) -> Path:
    """An NNEF model folder: graph.nnef, float32 .dat files (or ``raw`` bytes), graph.quant."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(text)
    files = {label: write_float(arr) for label, arr in (weights or {}).items()}
    files.update(raw or {})
    for label, data in files.items():
        path = folder / (label + ".dat")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if quant is not None:
        (folder / "graph.quant").write_text(quant)
    return folder


# Compound operations the Khronos runtime does not execute whole: it runs their bodies.
_RUNTIME_LOWERED = [
    "batch_normalization", "separable_conv", "separable_deconv", "add_n", "copy_n", "moments",
    "rms_pool", "l1_normalization", "l2_normalization", "local_response_normalization",
    "local_mean_normalization", "local_variance_normalization",
    "local_contrast_normalization", "nearest_downsample", "area_downsample",
    "nearest_upsample", "clamp", "prelu", "softabs", "max_pool_with_index", "log2",
]


def khronos_run(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Outputs of the Khronos NNEF runtime for a model folder (graph output order)."""
    text = (Path(folder) / "graph.nnef").read_text()
    lowered = _RUNTIME_LOWERED + re.findall(r"\bfragment\s+(\w+)", text)
    with nnef.Session(str(folder), lowered=lowered) as session:
        outs = session(*[np.ascontiguousarray(x, np.float32) for x in inputs])
    return [np.asarray(o) for o in outs]


def official_run(graph, inputs: dict[str, np.ndarray]) -> tuple[str, dict[str, np.ndarray]]:
    """Status and outputs of the official TOSA reference model on our graph."""
    block = graph.main
    arrays = [np.ascontiguousarray(np.asarray(inputs[n]).astype(
        oracle.NP_DTYPES[block.tensors[n].dtype])) for n in block.inputs]
    status, outs, log = oracle._run_binding(write_tosa(graph), arrays, "EIGHTK")
    result = {}
    if status == "VALID":
        for name, arr in zip(block.outputs, outs):
            result[name] = np.asarray(arr).reshape(block.tensors[name].shape)
    return status, result


def snr_db(reference: np.ndarray, value: np.ndarray) -> float:
    ref = np.asarray(reference, np.float64)
    err = ref - np.asarray(value, np.float64)
    noise = float(np.sum(err * err))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref * ref)) / noise)
