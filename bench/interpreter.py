"""Benchmark: our reference interpreter against the official TOSA reference model.

Both run the same .tosa file, an int8 alexnet_v2 with seeded random weights
(bench/alexnet.py, generated into build/bench on first use), on the same image.  Figures:

* best-of-N wall-clock time (after one untimed run each, so first-use costs such as page
  faults on fresh allocations are left out on both sides) of ``sim.reference.run_graph`` on the graph in memory, of our
  whole path from the file's bytes (``tosa_ir.tosa_fb.read_tosa`` + ``run_graph``), and of
  ``tosa_reference_model.run`` (which also starts from the bytes); the speed-up compares
  the two from-bytes figures (target: ours at least 2x faster);
* per layer: our time (profiled runs, best of N for each operator), the work, how many activations are 0 or 127
  (the synthetic quantisation should saturate few), and whether our output of that layer
  is bit-exact with the official model's (a second, untimed run of both in which every
  layer's output is a graph output).

The official model is a bench-only dependency: without it the table says "not installed".
"""
from __future__ import annotations

import os
import time
from collections import defaultdict

import numpy as np

from bench import official_model
from bench.alexnet import (INPUT_NAME, OUTPUT_NAME, ModelSpec, activation_stats, cached_model,
                           layer_of_tensor, layers_of)
from bench.report import BenchContext, Column, Table
from bench.timing import best_of
from sim.reference import Interpreter, run_graph
from tosa_ir.tosa_fb import read_tosa, write_tosa

DESCRIPTION = ("reference interpreter vs the official TOSA reference model, int8 alexnet_v2 "
               "(target: ours >= 2x faster)")
TARGET_SPEEDUP = 2.0


class _ProfilingInterpreter(Interpreter):
    """Adds up the time spent in each operator, by (layer, operator type)."""

    def __init__(self, *args, layers=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.layers = list(layers)
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)

    def execute(self, op, block, env):
        start = time.perf_counter()
        super().execute(op, block, env)
        layer = layer_of_tensor(op.outputs[0], self.layers) if op.outputs else "other"
        self.seconds[(layer, op.op)] += time.perf_counter() - start


def _compare(ours: np.ndarray, theirs: np.ndarray | None) -> str:
    if theirs is None:
        return "-"
    theirs = np.asarray(theirs)
    if theirs.size != ours.size:
        return f"shape {list(theirs.shape)} != {list(ours.shape)}"
    differ = int(np.count_nonzero(ours.reshape(-1).astype(np.int64)
                                  != theirs.reshape(-1).astype(np.int64)))
    return "bit-exact" if differ == 0 else f"{differ} of {ours.size} differ"


def _shape_text(shape) -> str:
    return "x".join(str(d) for d in shape[1:])


def run(ctx: BenchContext) -> list[Table]:
    spec = ModelSpec(width=4 if ctx.quick else 1)
    path, image = cached_model(ctx.build_dir, spec, ctx.log)
    data = path.read_bytes()
    graph = read_tosa(data, source=str(path))
    layers = layers_of(graph)
    inputs = {INPUT_NAME: image}
    total_macs = sum(layer.macs for layer in layers)
    n = ctx.repeat

    ctx.log(f"[interpreter] ours: best of {n}")
    t_run = best_of(n, lambda: run_graph(graph, inputs), warmup=1)
    t_file = best_of(n, lambda: run_graph(read_tosa(data, source=str(path)), inputs))
    ours_out = t_run.result[OUTPUT_NAME]

    model = official_model.load()
    t_ref = None
    ref_status = official_model.NOT_INSTALLED
    if model is not None:
        ctx.log(f"[interpreter] official reference model: best of {n}")
        t_ref = best_of(n, lambda: official_model.run(model, data, [image]), warmup=1)
        ref_status, ref_outs, ref_log = t_ref.result
        if ref_status != "VALID":
            last = ref_log.strip().splitlines()[-1:] or [""]
            ref_status = f"status {ref_status} {last[0]}".strip()

    # Every layer's output as a graph output: profiled on our side (best of N per
    # operator and layer, after one untimed run, like the totals) and compared.
    ctx.log("[interpreter] per-layer profile and bit-exactness check")
    every = read_tosa(data, source=str(path))
    every.main.outputs = [layer.output for layer in layers]
    profiles = []
    for _ in range(n + 1):
        prof = _ProfilingInterpreter(every, layers=layers)
        ours_layers = prof.run(inputs)
        profiles.append(prof.seconds)
    seconds_of = {key: min(p[key] for p in profiles[1:]) for key in profiles[-1]}
    ref_layers: dict[str, np.ndarray] = {}
    if model is not None and ref_status == "VALID":
        status, outs, log = official_model.run(model, write_tosa(every), [image])
        if status == "VALID":
            ref_layers = dict(zip(every.main.outputs, outs))

    summary = Table(
        "interpreter", f"Reference interpreter vs official TOSA reference model: "
                       f"int8 alexnet_v2 ({spec.size}x{spec.size}x3, batch 1)",
        [Column("implementation"), Column("timed"), Column("best", "s", ".3f"),
         Column("median", "s", ".3f"), Column("CPU of best", "s", ".3f"), Column("runs"),
         Column("GMAC/s", fmt=".2f"), Column("output")])
    summary.add("ours: sim.reference.run_graph", "graph in memory -> outputs", t_run.best,
                t_run.median, t_run.best_cpu, n, total_macs / t_run.best / 1e9, "-")
    summary.add("ours: read_tosa + run_graph", "file bytes -> outputs", t_file.best,
                t_file.median, t_file.best_cpu, n, total_macs / t_file.best / 1e9, "-")
    if t_ref is not None:
        out_check = (_compare(ours_out, ref_outs[0]) if ref_status == "VALID" else ref_status)
        summary.add("official: tosa_reference_model.run", "file bytes -> outputs", t_ref.best,
                    t_ref.median, t_ref.best_cpu, n, total_macs / t_ref.best / 1e9, out_check)
        speedup = t_ref.best / t_file.best
        verdict = "met" if speedup >= TARGET_SPEEDUP else "NOT met"
        summary.notes.append(f"speed-up, official / ours (file bytes -> outputs, best of {n}): "
                             f"{speedup:.2f}x (target >= {TARGET_SPEEDUP:g}x: {verdict})")
    else:
        summary.add("official: tosa_reference_model.run", "file bytes -> outputs", None, None,
                    None, 0, None, ref_status)
        summary.notes.append(f"official reference model {ref_status}: no speed-up figure")
    summary.notes.append(f"graph: {path} ({len(data) / 1e6:.1f} MB, "
                         f"{total_macs / 1e6:.1f}M MACs, seed {spec.seed}"
                         f"{', width 1/%d (--quick)' % spec.width if spec.width > 1 else ''})")
    summary.notes.append(f"machine: {os.cpu_count()} CPUs; CPU time above the wall time means "
                         f"several cores were used (numpy's BLAS may thread)")

    per_layer = Table(
        "interpreter_layers", f"Per layer: our interpreter (profiled, best of {n}) and "
                              f"bit-exactness",
        [Column("layer"), Column("output"), Column("MACs", "M", ".1f"),
         Column("ours", "ms", ".1f"), Column("GMAC/s", fmt=".2f"), Column("zeros", "%", ".1f"),
         Column("at 127", "%", ".1f"), Column("vs official")])
    by_layer: dict[str, float] = defaultdict(float)
    for (layer, _), seconds in seconds_of.items():
        by_layer[layer] += seconds
    for layer in layers:
        out = ours_layers[layer.output]
        zeros, top = activation_stats(out)
        seconds = by_layer[layer.name]
        per_layer.add(layer.name, _shape_text(layer.shape), layer.macs / 1e6, seconds * 1e3,
                      layer.macs / seconds / 1e9 if seconds else None, 100 * zeros, 100 * top,
                      _compare(out, ref_layers.get(layer.output)) if ref_layers else
                      ("-" if model is not None else official_model.NOT_INSTALLED))
    total = sum(seconds_of.values())
    per_layer.add("total", "", total_macs / 1e6, total * 1e3, total_macs / total / 1e9,
                  None, None, "")
    by_op: dict[str, float] = defaultdict(float)
    for (_, op), seconds in seconds_of.items():
        by_op[op] += seconds
    per_layer.notes.append("time by operator: " + ", ".join(
        f"{op} {100 * s / total:.0f}%" for op, s in sorted(by_op.items(), key=lambda kv: -kv[1])
        if s / total >= 0.005))
    return [summary, per_layer]
