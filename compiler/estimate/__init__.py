"""Estimates: per-layer cycles, MACs, utilisation, traffic and roofline bounds of compiled graphs.

layers.py estimates one straight-line program (``estimate_compilation``) and formats the rows;
linked.py estimates graphs compiled as linked pieces (WHILE_LOOP, big COND_IF); layer_split.py
cuts a graph into one subgraph per compute layer (``npu estimate --per-layer``); plot.py draws
the rows as an SVG.  The command line is ``npu estimate`` (npu/cli.py).
"""
from __future__ import annotations

from isa.config import DEFAULT_CONFIG, NpuConfig
from tosa_ir import Graph

from compiler.driver import run_pipeline
from compiler.estimate.layers import Estimate, estimate_compilation
from compiler.estimate.linked import estimate_linked
from compiler.link.control import needs_linking

__all__ = ["estimate_graph"]


def estimate_graph(graph: Graph, config: NpuConfig = DEFAULT_CONFIG) -> Estimate:
    """The per-layer estimate of ``graph`` compiled for ``config``."""
    if needs_linking(graph):          # WHILE_LOOP, big COND_IF: compiled as linked pieces
        return estimate_linked(graph, config)
    return estimate_compilation(run_pipeline(graph, config))
