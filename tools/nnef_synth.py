"""Shared part of the full-size model builders (tools/make_resnet50.py, make_mobilenetv2.py).

A network is written as a flat NNEF graph text (:class:`NnefText`), given seeded synthetic
float32 weights, loaded with the project's NNEF frontend, quantized with the project's own
calibration (``compiler.graph.quantize``) on seeded smooth images, and written out as the int8 TOSA
graph, an input and the reference interpreter's output for it, as tools/make_alexnet.py does
for AlexNet (whose helpers this reuses).  Nothing is downloaded.

Why synthetic weights: the figures the builders serve (cycles, utilisation, bit-exactness of
the backends) depend on the shapes and the integer arithmetic, not on trained values; batch
normalisation is taken as already folded into the convolutions (what any int8 deployment
does), so every convolution carries a bias.

Weights are He-like (``normal * sqrt(2 / fan_in)``); the last convolution of every residual
branch is scaled down (``residual_gain``) so the activations stay bounded through 16 or 17
additions without batch normalisation, as zero-initialised residual BN does in training.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent
for _p in (ROOT, TOOLS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import make_alexnet



class NnefText:
    """A flat NNEF graph (NCHW) built one layer at a time; tracks channels and sizes.

    Every convolution gets ``variable`` lines for its filter and bias with labels
    ``<name>/kernel`` and ``<name>/bias``; :meth:`gains` tells :func:`write_weights` which
    kernels to scale down.
    """

    def __init__(self, name: str, size: int = 224, channels: int = 3):
        self.name = name
        self.lines = [f"    input = external(shape = [1, {channels}, {size}, {size}]);"]
        self.shape = {"input": (channels, size, size)}
        self.conv_names: list[str] = []
        self.gain: dict[str, float] = {}

    def conv(self, x: str, name: str, out_c: int, k: int, stride: int = 1, groups: int = 1,
             gain: float = 1.0) -> str:
        c, h, w = self.shape[x]
        pad = k // 2
        in_per_group = 1 if groups == 0 else c // groups
        self.lines.append(f"    {name}_k = variable(shape = [{out_c}, {in_per_group}, {k}, {k}], "
                          f"label = '{name}/kernel');")
        self.lines.append(f"    {name}_b = variable(shape = [1, {out_c}], label = '{name}/bias');")
        self.lines.append(f"    {name} = conv({x}, {name}_k, {name}_b, padding = [({pad},{pad}), "
                          f"({pad},{pad})], border = 'constant', stride = [{stride}, {stride}], "
                          f"dilation = [1, 1], groups = {groups});")
        oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        self.shape[name] = (out_c, oh, ow)
        self.conv_names.append(name)
        if gain != 1.0:
            self.gain[f"{name}/kernel"] = gain
        return name

    def _same(self, out: str, x: str, expr: str) -> str:
        self.lines.append(f"    {out} = {expr};")
        self.shape[out] = self.shape[x]
        return out

    def relu(self, x: str) -> str:
        return self._same(f"{x}_relu", x, f"relu({x})")

    def relu6(self, x: str) -> str:
        return self._same(f"{x}_relu6", x, f"clamp({x}, 0.0, 6.0)")

    def add(self, a: str, b: str, out: str) -> str:
        return self._same(out, a, f"add({a}, {b})")

    def max_pool(self, x: str, out: str, k: int = 3, stride: int = 2, pad: int = 1) -> str:
        c, h, w = self.shape[x]
        self.lines.append(f"    {out} = max_pool({x}, size = [1, 1, {k}, {k}], stride = [1, 1, "
                          f"{stride}, {stride}], border = 'ignore', padding = [(0,0), (0,0), "
                          f"({pad},{pad}), ({pad},{pad})]);")
        self.shape[out] = (c, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1)
        return out

    def global_avg_pool(self, x: str, out: str) -> str:
        c, h, w = self.shape[x]
        self.lines.append(f"    {out} = avg_pool({x}, size = [1, 1, {h}, {w}], stride = [1, 1, 1, 1], "
                          f"border = 'ignore', padding = [(0,0), (0,0), (0,0), (0,0)]);")
        self.shape[out] = (c, 1, 1)
        return out

    def softmax(self, x: str) -> str:
        return self._same("output", x, f"softmax({x})")

    def text(self) -> str:
        return "\n".join(["version 1.0;", "", f"graph {self.name}( input ) -> ( output )", "{"]
                         + self.lines + ["}"]) + "\n"


def variables(text: str):
    """(label, shape) of every variable of the graph text, in order."""
    return make_alexnet.variables(text)


def write_weights(folder: Path, text: str, gains: dict[str, float], seed: int) -> Path:
    """graph.nnef and seeded float32 .dat files in ``folder`` (skipped when the stamp matches):
    tools/make_alexnet.py's weights, kernels scaled by ``gains``."""
    return make_alexnet.write_weights(folder, text, seed, gains=gains, stamp={"gains": gains})


def build(net: NnefText, model: str, out: Path, *, calib: int, test: int, seed: int,
          report: bool, log=print) -> dict:
    """Weights -> NNEF frontend -> calibration and int8 quantization -> files in ``out``.

    Writes ``<model>_int8.tosa``, ``input.npz``, ``expected.npz`` (reference interpreter)
    and ``quant.json``; returns timings, paths and the quantized model.  ``log`` gets the
    progress lines (each step and its time).
    """
    from compiler.frontends.nnef.load import load_nnef_model
    from compiler.frontends.common.softmax_tail import append_integer_softmax
    from compiler.graph.quantize import format_table, layer_errors, quantize_graph
    from sim.reference import run_graph
    from tosa_ir.tosa_fb import write_tosa

    out.mkdir(parents=True, exist_ok=True)
    times = {}

    def step(label, fn):
        log(f"  {label} ...")
        t0 = time.perf_counter()
        value = fn()
        times[label] = time.perf_counter() - t0
        log(f"  {label}: {times[label]:.1f} s")
        return value

    text = net.text()
    nnef_dir = step("weights", lambda: write_weights(out / "nnef", text, net.gain, seed))
    loaded = step("load", lambda: load_nnef_model(nnef_dir))
    input_name = loaded.float_graph.main.inputs[0]
    shape = (1,) + net.shape["input"]
    calib_set = [{input_name: x} for x in make_alexnet.smooth_images(calib, seed + 1, shape)]
    qm = step("quantize", lambda: quantize_graph(loaded.float_graph, calib_set,
                                                 integer_softmax=append_integer_softmax))
    test_set = [{input_name: x} for x in make_alexnet.smooth_images(test, seed + 2, shape)]
    tosa_path = out / f"{model}_int8.tosa"
    tosa_path.write_bytes(write_tosa(qm.graph))
    x_int = qm.quantize_inputs(test_set[0])
    (out / "input.npz").write_bytes(make_alexnet._npz_bytes(x_int))
    expected = step("reference_run", lambda: run_graph(qm.graph, x_int))
    (out / "expected.npz").write_bytes(make_alexnet._npz_bytes(expected))
    q = {n: {"scale": qm.qparams[n].scalar_scale, "zero_point": qm.qparams[n].zp,
             "shape": list(qm.graph.main.tensors[n].shape)} for n in qm.inputs + qm.outputs}
    (out / "quant.json").write_text(json.dumps({"tensors": q, "notes": loaded.notes + qm.notes},
                                               indent=1))
    costs = make_alexnet.layer_costs(qm.graph, net.conv_names)
    result = {"times": times, "tosa": tosa_path, "qmodel": qm, "model": loaded, "costs": costs}
    if report:
        errors = step("report", lambda: layer_errors(qm, test_set))
        result["errors"] = errors
        log(format_table(errors))
        log()
        log(make_alexnet.format_costs(costs))
    return result


def main(model: str, make_net, doc: str, seed: int, argv=None) -> int:
    """The command line both builders share: ``--out --width-div --calib --test --seed``."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / model)
    ap.add_argument("--width-div", type=int, default=1,
                    help="divide every channel count by N (the reduced model the tests use)")
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--calib", type=int, default=4, help="calibration images")
    ap.add_argument("--test", type=int, default=1, help="images for the SNR report")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(f"building {model} (width / {args.width_div}, {args.size}x{args.size}) in {args.out}",
          flush=True)
    res = build(make_net(args.width_div, args.size), model, args.out, calib=args.calib,
                test=args.test, seed=args.seed, report=not args.no_report,
                log=lambda *a: print(*a, flush=True))
    qm = res["qmodel"]
    for note in res["model"].notes + qm.notes:
        print("note:", note)
    ops: dict[str, int] = {}
    for op in qm.graph.main.operators:
        ops[op.op] = ops.get(op.op, 0) + 1
    print("operators:", ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())))
    macs = sum(r[2] for r in res["costs"])
    print(f"{len(res['costs'])} multiplying layers, {macs:,} MACs; "
          f"total {time.perf_counter() - t0:.1f} s")
    print(f"wrote {res['tosa']} ({res['tosa'].stat().st_size / 1e6:.1f} MB), input.npz, "
          f"expected.npz, quant.json")
    return 0
