"""Rewrite code written against the tree before the restructure (compiler/passes/, flat
frontends/, sim/isa_*.py, hw/simulation.py, ...) to the new module paths.

    python tools/update_imports.py [FILE ...]     # default: every tracked .py and .md file

Moves modules (``MODULES``: old dotted name -> new), names that left their module
(``NAMES``), ``from pkg import module`` forms, paths in text (``compiler/passes/tiling.py``), and
the dataflow walk's methods that became public (``walk._root(`` -> ``walk.new_root(``).  For
branches started before the move; run it, then ``python -m pytest tests/test_architecture.py``.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

MODULES = {
    "compiler.costmodel": "compiler.core.costmodel",
    "compiler.estimate": "compiler.estimate.layers",
    "compiler.estimate_linked": "compiler.estimate.linked",
    "compiler.frontends.circle": "compiler.frontends.circle.load",
    "compiler.frontends.circle_build": "compiler.frontends.common.tosa_builder",
    "compiler.frontends.circle_fb": "compiler.frontends.circle.fb",
    "compiler.frontends.circle_lower": "compiler.frontends.circle.lower",
    "compiler.frontends.circle_model": "compiler.frontends.circle.model",
    "compiler.frontends.circle_ops_misc": "compiler.frontends.circle.ops_misc",
    "compiler.frontends.circle_ops_nn": "compiler.frontends.circle.ops_nn",
    "compiler.frontends.circle_ops_softmax": "compiler.frontends.common.int_softmax",
    "compiler.frontends.circle_quant": "compiler.frontends.circle.quant",
    "compiler.frontends.circle_schema": "compiler.frontends.circle.schema",
    "compiler.frontends.common": "compiler.frontends.common.registry",
    "compiler.frontends.graph_builder": "compiler.frontends.common.graph_builder",
    "compiler.frontends.graph_passes": "compiler.frontends.common.graph_passes",
    "compiler.frontends.nnef": "compiler.frontends.nnef.load",
    "compiler.frontends.nnef_container": "compiler.frontends.nnef.container",
    "compiler.frontends.nnef_convert": "compiler.frontends.nnef.convert",
    "compiler.frontends.nnef_dat": "compiler.frontends.nnef.dat",
    "compiler.frontends.nnef_ops": "compiler.frontends.nnef.ops",
    "compiler.frontends.nnef_parse": "compiler.frontends.nnef.parse",
    "compiler.frontends.nnef_post": "compiler.frontends.nnef.post",
    "compiler.frontends.nnef_quant": "compiler.frontends.nnef.quant",
    "compiler.frontends.openvino": "compiler.frontends.openvino.load",
    "compiler.frontends.openvino_bin": "compiler.frontends.openvino.bin",
    "compiler.frontends.openvino_convert": "compiler.frontends.openvino.convert",
    "compiler.frontends.openvino_fold": "compiler.frontends.openvino.fold",
    "compiler.frontends.openvino_ops": "compiler.frontends.openvino.ops",
    "compiler.frontends.openvino_post": "compiler.frontends.openvino.post",
    "compiler.frontends.openvino_quant": "compiler.frontends.openvino.quant",
    "compiler.frontends.openvino_xml": "compiler.frontends.openvino.xml",
    "compiler.frontends.tosa": "compiler.frontends.tosa.load",
    "compiler.frontends.windows": "compiler.frontends.common.windows",
    "compiler.ir": "compiler.core.ir",
    "compiler.kinds.reduce.split": "compiler.kinds.decompose.reduce_split",
    "compiler.layer_split": "compiler.estimate.layer_split",
    "compiler.ops": "compiler.core.ops",
    "compiler.passes.brick_rows": "compiler.kinds.movement.brick_rows",
    "compiler.passes.control": "compiler.graph.control",
    "compiler.passes.control_link": "compiler.link.control",
    "compiler.passes.dataflow": "compiler.dataflow",
    "compiler.passes.decompose": "compiler.kinds.decompose.layer",
    "compiler.passes.depthwise": "compiler.kinds.elementwise.depthwise",
    "compiler.passes.elementwise": "compiler.kinds.elementwise.layer",
    "compiler.passes.fusion": "compiler.kinds.conv.fusion",
    "compiler.passes.loops": "compiler.program.loops",
    "compiler.passes.lowering.conv2d": "compiler.kinds.conv.lower",
    "compiler.passes.lowering.copy": "compiler.kinds.movement.copy",
    "compiler.passes.lowering.dma": "compiler.core.dma",
    "compiler.passes.lowering.elementwise": "compiler.kinds.elementwise.lower",
    "compiler.passes.lowering.fully_connected": "compiler.kinds.conv.fully_connected",
    "compiler.passes.lowering.matmul": "compiler.kinds.matmul.lower",
    "compiler.passes.lowering.moves": "compiler.kinds.movement.lower",
    "compiler.passes.lowering.mxu_conv": "compiler.kinds.mxu_conv.lower",
    "compiler.passes.lowering.mxu_conv_loops": "compiler.kinds.mxu_conv.lower_loops",
    "compiler.passes.lowering.pool": "compiler.kinds.pooling.lower",
    "compiler.passes.lowering.reduce": "compiler.kinds.reduce.lower",
    "compiler.passes.matmul": "compiler.kinds.matmul.layer",
    "compiler.passes.memplan": "compiler.program.memplan",
    "compiler.passes.movement": "compiler.kinds.movement.params",
    "compiler.passes.moves": "compiler.kinds.movement.layer",
    "compiler.passes.mxu_conv": "compiler.kinds.mxu_conv.layer",
    "compiler.passes.pooling": "compiler.kinds.pooling.layer",
    "compiler.passes.pooling_rows": "compiler.kinds.pooling.rows",
    "compiler.passes.reduce": "compiler.kinds.reduce.layer",
    "compiler.passes.reduce_split": "compiler.kinds.decompose.reduce_split",
    "compiler.passes.resize_wide": "compiler.kinds.mxu_conv.resize_wide",
    "compiler.passes.schedule": "compiler.program.schedule",
    "compiler.passes.tap_packing": "compiler.kinds.conv.tap_packing",
    "compiler.passes.tiling": "compiler.kinds.conv.tiling",
    "compiler.passes.validate": "compiler.graph.validate",
    "compiler.passes.variables": "compiler.kinds.variables.layer",
    "compiler.passes.weights": "compiler.kinds.conv.weights",
    "compiler.program_builder": "compiler.program.builder",
    "compiler.quantize": "compiler.graph.quantize",
    "compiler.quantize.calibrate": "compiler.graph.quantize.calibrate",
    "compiler.quantize.float_eval": "compiler.graph.quantize.float_eval",
    "compiler.quantize.lower": "compiler.graph.quantize.lower",
    "compiler.quantize.prepare": "compiler.graph.quantize.prepare",
    "compiler.quantize.qparams": "compiler.graph.quantize.qparams",
    "compiler.quantize.report": "compiler.graph.quantize.report",
    "compiler.report_plot": "compiler.estimate.plot",
    "compiler.trip_count": "compiler.graph.trip_count",
    "compiler.views": "compiler.core.views",
    "hw.bench": "bench.rtl_programs",
    "hw.csr_header": "hw.harness.csr_header",
    "hw.simulation": "hw.harness.simulation",
    "hw.verilator_env": "hw.harness.verilator_env",
    "sim.isa_branch": "sim.isa.branch",
    "sim.isa_dma": "sim.isa.dma",
    "sim.isa_hazards": "sim.isa.hazards",
    "sim.isa_loops": "sim.isa.loops",
    "sim.isa_rescale": "sim.isa.rescale",
    "sim.isa_sim": "sim.isa.sim",
    "sim.isa_table": "sim.isa.table",
    "sim.isa_units": "sim.isa.units",
    "sim.isa_vpu": "sim.isa.vpu"
,
}

# (old module, name) -> (new module, new name): names that moved out of a module that stayed or moved.
NAMES = {
    **{("compiler.passes.fusion", n): ("compiler.core.errors", n) for n in ("invalid", "unsupported")},
    **{("compiler.passes.fusion", n): ("compiler.core.operands", n)
       for n in ("CONST_OPS", "const_input", "input_tensor", "scalar_input")},
    ("compiler.passes.fusion", "_ints"): ("compiler.core.operands", "int_attrs"),
    ("compiler.passes.fusion", "_expect"): ("compiler.core.operands", "expect_tensor"),
    ("compiler.passes.fusion", "fuse_graph"): ("compiler.dataflow", "fuse_graph"),
    **{("compiler.passes.dataflow", n): ("compiler.core.dataflow", n) for n in ("Root", "Ref", "Binding", "Dataflow")},
    ("compiler.passes.tiling", "MAX_LEN"): ("compiler.core.ops", "MAX_LEN"),
    ("compiler.passes.tiling", "ceil_div"): ("compiler.core.views", "ceil_div"),
    **{("compiler.passes.tiling", n): ("compiler.kinds.conv.plan", n)
       for n in ("ConvPlan", "Tile", "ReductionGroup", "PARAM_ROWS")},
    **{("compiler.passes.lowering.fully_connected", n): ("compiler.core.ops", n) for n in ("FixedOp", "ALL_UNITS")},
    ("compiler.passes.reduce_split", "reduce_long"): ("compiler.kinds.decompose.layer", "reduce_long"),
    ("compiler.driver", "CopyPlan"): ("compiler.kinds.movement.copy", "CopyPlan"),
    ("compiler.estimate", "estimate_graph"): ("compiler.estimate", "estimate_graph"),
    ("sim.isa_units", "EXECUTORS"): ("sim.isa.executors", "EXECUTORS"),
    ("hw.sequencer", "mxu_cmd_layout"): ("hw.mxu", "mxu_cmd_layout"),
}
NAMES = {(old, name): new for (old, name), new in NAMES.items()}

WALK_METHODS = {"_root": "new_root", "_name": "new_name", "_alias": "alias", "_require_vec": "require_vec",
                "_require": "require", "_is_rows": "is_rows", "_needs_brick": "needs_brick",
                "_wants_rows": "wants_rows", "_data_inputs": "data_inputs", "_vector_output": "vector_output"}
DIRS = {"hw/tb/": "hw/harness/tb/", "compiler/quantize/": "compiler/graph/quantize/"}

_MOD_RE = re.compile(r"(?<![\w.])(" + "|".join(re.escape(m) for m in sorted(MODULES, key=len, reverse=True))
                     + r")(?![\w])")
_FROM_RE = re.compile(r"^(\s*)from ([\w.]+) import ([\w ,]+?)(\s*(#.*)?)$")


def _path_map() -> dict[str, str]:
    paths = dict(DIRS)
    for old, new in MODULES.items():
        if old != "compiler.quantize":
            paths[old.replace(".", "/") + ".py"] = new.replace(".", "/") + ".py"
    short = {}
    for old, new in paths.items():
        if old.startswith("compiler/"):
            short[old[len("compiler/"):]] = new[len("compiler/"):]
            if old.startswith("compiler/passes/lowering/"):
                short[old[len("compiler/passes/"):]] = new[len("compiler/"):]
    return {**short, **paths}


_PATHS = _path_map()
_PATH_RE = re.compile(r"(?<![\w/.])(" + "|".join(re.escape(p) for p in sorted(_PATHS, key=len, reverse=True)) + r")")


def _from_line(indent: str, module: str, names: str, tail: str) -> str | None:
    """A ``from module import names`` line rewritten, or None when nothing in it moved."""
    items = [n.strip() for n in names.split(",") if n.strip()]
    groups: dict[str, list[str]] = {}
    moved = module in MODULES
    for item in items:
        name, _, alias = item.partition(" as ")
        name, alias = name.strip(), alias.strip()
        if (module, name) in NAMES:
            target, new_name = NAMES[(module, name)]
            moved = True
            as_name = alias or (name if new_name != name else "")
            groups.setdefault(target, []).append(new_name + (f" as {as_name}" if as_name and as_name != new_name else ""))
        elif f"{module}.{name}" in MODULES:
            parent, _, leaf = MODULES[f"{module}.{name}"].rpartition(".")
            moved = True
            groups.setdefault(parent, []).append(leaf + (f" as {alias or name}" if (alias or name) != leaf else ""))
        else:
            groups.setdefault(MODULES.get(module, module), []).append(item)
    if not moved:
        return None
    lines = [f"{indent}from {target} import {', '.join(names)}" for target, names in groups.items()]
    return "\n".join(lines) + tail


def rewrite(text: str, python: bool) -> str:
    out = []
    for line in text.split("\n"):
        m = _FROM_RE.match(line) if python else None
        new = _from_line(m.group(1), m.group(2), m.group(3), m.group(4)) if m else None
        if new is None:
            new = _MOD_RE.sub(lambda mo: MODULES[mo.group(1)], line)
        out.append(_PATH_RE.sub(lambda mo: _PATHS[mo.group(1)], new))
    text = "\n".join(out)
    if python:
        text = re.sub(r"\b(self|walk)\.(" + "|".join(sorted(WALK_METHODS, key=len, reverse=True)) + r")\(",
                      lambda mo: f"{mo.group(1)}.{WALK_METHODS[mo.group(2)]}(", text)
    return text


def main(argv: list[str] | None = None) -> int:
    files = (argv if argv is not None else sys.argv[1:]) or subprocess.run(
        ["git", "ls-files", "*.py", "*.md"], capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        path = Path(name)
        if not path.is_file():
            continue
        text = path.read_text()
        new = rewrite(text, path.suffix == ".py")
        if new != text:
            path.write_text(new)
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
