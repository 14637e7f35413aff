"""Build the headline model: AlexNet (NNEF spec Appendix B) as an int8 TOSA graph.

Steps (all seeded, so every run gives the same bytes):

1. NNEF model in ``OUT/nnef/``: ``graph.nnef`` is ``models/alexnet/graph.nnef`` (the
   Appendix B text, verbatim) and one float32 ``.dat`` per variable with He-like random
   weights (``normal * sqrt(2 / fan_in)``) and small random biases.  These are 201 MB at
   full size, so they live in the build folder, never in git; they are reused when the
   stamp file says they match the requested seed and size.
2. Load it with the NNEF frontend (float TOSA graph), quantize it with a seeded
   calibration set of smooth random images (``compiler.graph.quantize``), and write
   ``OUT/alexnet_int8.tosa`` (TOSA 1.0 flatbuffer), ``OUT/input.npz`` (an int8 input,
   NCHW as the NNEF graph declares it), ``OUT/expected.npz`` (the reference interpreter's
   output for it) and ``OUT/quant.json`` (input/output scale and zero point).
3. Print the per-layer SNR of the int8 graph against the float graph, and the arithmetic
   cost of every layer of the int8 graph (output shape, MACs, parameters).

``--width-div N`` divides every channel count by N (same topology and spatial sizes): the
reduced model the tests use.  The network's float softmax tail is lowered to the int8 softmax
of TFLite's reference kernel (compiler/graph/quantize/softmax.py, the Circle frontend's): the
graph ends at class probabilities, scale 1/256, zero point -128.  ``--logits`` leaves the
softmax out instead and stops at the logits (conv8); see ``models/alexnet/README.md``.  (The
softmax used to cost conv0 and conv1 their fastest plans while the whole program had to fit
the instruction memory; instructions are fetched from external memory now, so it costs only
its own cycles: PERFORMANCE.md.)

Usage: ``python tools/make_alexnet.py [--out build/alexnet] [--width-div 1] [--calib 8]``
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compiler.frontends.nnef.load import load_nnef_model  # noqa: E402
from compiler.frontends.nnef.dat import write_float  # noqa: E402
from compiler.frontends.common.softmax_tail import append_integer_softmax  # noqa: E402
from compiler.graph.quantize import format_table, layer_errors, quantize_graph  # noqa: E402

GRAPH_FILE = ROOT / "models" / "alexnet" / "graph.nnef"
SEED = 20240607
CHANNELS = (64, 192, 384, 384, 256, 4096, 4096, 1000)
# Layer: (name, kernel, padding, stride, pool after).
LAYERS = (("conv1", 11, 0, 4, True), ("conv2", 5, 2, 1, True), ("conv3", 3, 1, 1, False),
          ("conv4", 3, 1, 1, False), ("conv5", 3, 1, 1, True), ("fc6", 5, 0, 1, False),
          ("fc7", 1, 0, 1, False), ("fc8", 1, 0, 1, False))


def alexnet_text(width_div: int = 1) -> str:
    """The Appendix B AlexNet graph, with every channel count divided by ``width_div``.

    ``alexnet_text(1)`` is exactly ``models/alexnet/graph.nnef`` (a test checks it).
    """
    chans = [max(1, c // width_div) for c in CHANNELS]
    lines = ["version 1.0;", "", "graph AlexNet( input ) -> ( output )", "{",
             "    input = external(shape = [1, 3, 224, 224]);"]
    prev, prev_c, pool = "input", 3, 0
    for i, ((name, k, p, s, pooled), c) in enumerate(zip(LAYERS, chans), start=1):
        lines.append(f"    kernel{i} = variable(shape = [{c}, {prev_c}, {k}, {k}], "
                     f"label = 'alexnet_v2/{name}/kernel');")
        lines.append(f"    bias{i} = variable(shape = [1, {c}], "
                     f"label = 'alexnet_v2/{name}/bias');")
        lines.append(f"    conv{i} = conv({prev}, kernel{i}, bias{i}, "
                     f"padding = [({p},{p}), ({p},{p})],")
        lines.append(f"                 border = 'constant', stride = [{s}, {s}], "
                     f"dilation = [1, 1]);")
        if i == len(LAYERS):
            lines.append(f"    output = softmax(conv{i});")
            break
        lines.append(f"    relu{i} = relu(conv{i});")
        prev, prev_c = f"relu{i}", c
        if pooled:
            pool += 1
            lines.append(f"    pool{pool} = max_pool(relu{i}, size = [1, 1, 3, 3], "
                         f"stride = [1, 1, 2, 2],")
            lines.append("                     border = 'ignore', padding = [(0,0), (0,0), "
                         "(0,0), (0,0)]);")
            prev = f"pool{pool}"
    lines.append("}")
    return "\n".join(lines) + "\n"


def variables(text: str):
    """(label, shape) of every variable of a flat graph text, in order."""
    import re
    pattern = re.compile(r"variable\(shape = \[([\d, ]+)\], label = '([^']+)'\)")
    return [(m.group(2), tuple(int(v) for v in m.group(1).split(",")))
            for m in pattern.finditer(text)]


def write_nnef(folder: Path, width_div: int, seed: int) -> Path:
    """Write graph.nnef and seeded float32 .dat files (skipped when the stamp matches)."""
    text = GRAPH_FILE.read_text() if width_div == 1 else alexnet_text(width_div)
    return write_weights(folder, text, seed, stamp={"width_div": width_div})


def write_weights(folder: Path, text: str, seed: int, gains: dict[str, float] | None = None,
                  stamp: dict | None = None) -> Path:
    """``text`` as graph.nnef and one seeded float32 .dat per variable in ``folder``: kernels
    He-like (``normal * sqrt(2 / fan_in)``, times ``gains[label]`` where given), biases small
    normals.  Skipped when the stamp file (seed, text, gains and ``stamp``) matches."""
    gains = gains or {}
    stamp_file = folder / "stamp.json"
    want = {"seed": seed, "graph": text, **({"gains": gains} if gains else {}), **(stamp or {})}
    if stamp_file.is_file() and json.loads(stamp_file.read_text()) == want:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(text)
    for index, (label, shape) in enumerate(variables(text)):
        rng = np.random.default_rng([seed, index])
        if label.endswith("/kernel"):
            fan_in = int(np.prod(shape[1:]))
            scale = np.sqrt(2.0 / fan_in) * gains.get(label, 1.0)
            data = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
        else:
            data = rng.normal(0.0, 0.05, size=shape).astype(np.float32)
        path = folder / (label + ".dat")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(write_float(data))
    stamp_file.write_text(json.dumps(want))
    return folder


def smooth_images(count: int, seed: int, shape=(1, 3, 224, 224)) -> list[np.ndarray]:
    """Seeded images with structure at several scales, normalised per channel (~N(0, 1))."""
    rng = np.random.default_rng(seed)
    n, c, h, w = shape
    images = []
    for _ in range(count):
        img = np.zeros(shape, np.float64)
        for cells, weight in ((4, 1.0), (8, 0.6), (28, 0.3)):
            coarse = rng.standard_normal((n, c, cells, cells))
            img += weight * np.kron(coarse, np.ones((1, 1, -(-h // cells), -(-w // cells))))[
                :, :, :h, :w]
        img += 0.1 * rng.standard_normal(shape)
        img = (img - img.mean(axis=(2, 3), keepdims=True)) / img.std(axis=(2, 3), keepdims=True)
        images.append(img.astype(np.float32))
    return images


_MAC_OPS = ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL")


def layer_costs(graph, names=None) -> list[tuple[str, tuple[int, ...], int, int]]:
    """``(layer, output shape, MACs, params)`` of every multiplying operator of ``graph``.

    MACs are the multiply-accumulates the operator performs as written (every kernel tap,
    padding included); params are the weight and bias elements.  ``names`` (in graph
    order) name the layers; by default an operator is named by the tensor it produces.
    """
    block = graph.main
    rows = []
    for op in block.operators:
        if op.op not in _MAC_OPS:
            continue
        out = block.tensors[op.outputs[0]].shape
        if op.op == "MATMUL":
            a = block.tensors[op.inputs[0]].shape
            macs = int(np.prod(out, dtype=np.int64)) * a[-1]
            params = sum(block.tensors[n].data.size for n in op.inputs[:2]
                         if block.tensors[n].is_const)
        else:
            w = block.tensors[op.inputs[1]].shape
            taps = int(np.prod(w, dtype=np.int64))          # OC*KH*KW*IC or KH*KW*C*M
            # A transposed convolution applies every tap to every input pixel, the others
            # to every output pixel.
            pixels = block.tensors[op.inputs[0]].shape[:3] if op.op == "TRANSPOSE_CONV2D" \
                else out[:3]
            macs = int(np.prod(pixels, dtype=np.int64)) * taps
            params = taps + int(np.prod(block.tensors[op.inputs[2]].shape, dtype=np.int64))
        rows.append((op.outputs[0], tuple(out), macs, params))
    if names is not None and len(names) == len(rows):
        rows = [(n,) + r[1:] for n, r in zip(names, rows)]
    return rows


def format_costs(rows) -> str:
    """The rows of :func:`layer_costs` as a plain-text table with a total."""
    head = f"{'layer':<8} {'output':>14} {'MACs':>14} {'params':>12}"
    lines = [head, "-" * len(head)]
    for name, shape, macs, params in rows:
        dims = "x".join(str(d) for d in (shape[1:] if len(shape) == 4 else shape))
        lines.append(f"{name:<8} {dims:>14} {macs:>14,} {params:>12,}")
    lines.append("-" * len(head))
    lines.append(f"{'total':<8} {'':>14} {sum(r[2] for r in rows):>14,} "
                 f"{sum(r[3] for r in rows):>12,}")
    return "\n".join(lines)


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """A .npz with fixed timestamps, so reruns give identical bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            data = io.BytesIO()
            np.save(data, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            zf.writestr(info, data.getvalue())
    return buf.getvalue()


def build(out: Path, width_div: int = 1, calib: int = 8, test: int = 2, seed: int = SEED,
          method: str = "minmax", rounding_mode: str = "DOUBLE_ROUND", report: bool = True,
          log=print, softmax: bool = True) -> dict:
    """Build everything into ``out``; returns timings, paths and the quantized model."""
    times = {}
    t0 = time.perf_counter()
    nnef_dir = write_nnef(out / "nnef", width_div, seed)
    times["weights"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    model = load_nnef_model(nnef_dir)
    times["load"] = time.perf_counter() - t0
    input_name = model.float_graph.main.inputs[0]

    t0 = time.perf_counter()
    calib_set = [{input_name: x} for x in smooth_images(calib, seed + 1)]
    qm = quantize_graph(model.float_graph, calib_set, method=method,
                        rounding_mode=rounding_mode,
                        integer_softmax=append_integer_softmax if softmax else None)
    times["quantize"] = time.perf_counter() - t0

    from tosa_ir.tosa_fb import write_tosa
    from sim.reference import run_graph

    test_set = [{input_name: x} for x in smooth_images(test, seed + 2)]
    tosa_path = out / "alexnet_int8.tosa"
    tosa_path.write_bytes(write_tosa(qm.graph))
    x_int = qm.quantize_inputs(test_set[0])
    (out / "input.npz").write_bytes(_npz_bytes(x_int))
    t0 = time.perf_counter()
    expected = run_graph(qm.graph, x_int)
    times["reference_run"] = time.perf_counter() - t0
    (out / "expected.npz").write_bytes(_npz_bytes(expected))
    q = {n: {"scale": qm.qparams[n].scalar_scale, "zero_point": qm.qparams[n].zp,
             "shape": list(qm.graph.main.tensors[n].shape)} for n in qm.inputs + qm.outputs}
    (out / "quant.json").write_text(json.dumps({"tensors": q, "notes": model.notes + qm.notes},
                                               indent=1))
    costs = layer_costs(qm.graph, [layer[0] for layer in LAYERS])
    result = {"times": times, "tosa": tosa_path, "qmodel": qm, "model": model, "costs": costs}
    if report:
        t0 = time.perf_counter()
        errors = layer_errors(qm, test_set)
        times["report"] = time.perf_counter() - t0
        result["errors"] = errors
        log(format_table(errors))
        log()
    log(format_costs(costs))
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "alexnet")
    ap.add_argument("--width-div", type=int, default=1)
    ap.add_argument("--calib", type=int, default=8, help="calibration images")
    ap.add_argument("--test", type=int, default=2, help="images for the SNR report")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--method", choices=("minmax", "percentile"), default="minmax")
    ap.add_argument("--rounding", choices=("DOUBLE_ROUND", "SINGLE_ROUND"),
                    default="DOUBLE_ROUND")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--logits", action="store_true",
                    help="stop at the logits instead of the class probabilities (int8 softmax)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    res = build(args.out, args.width_div, args.calib, args.test, args.seed, args.method,
                args.rounding, not args.no_report, softmax=not args.logits)
    total = time.perf_counter() - t0
    qm = res["qmodel"]
    print()
    for note in res["model"].notes + qm.notes:
        print("note:", note)
    ops = {}
    for op in qm.graph.main.operators:
        ops[op.op] = ops.get(op.op, 0) + 1
    print("operators:", ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())))
    print("times (s):", ", ".join(f"{k} {v:.1f}" for k, v in res["times"].items()),
          f"| total {total:.1f}")
    print(f"wrote {res['tosa']} ({res['tosa'].stat().st_size / 1e6:.1f} MB), "
          f"{args.out / 'input.npz'}, {args.out / 'expected.npz'}, {args.out / 'quant.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
