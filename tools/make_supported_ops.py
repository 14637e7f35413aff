"""Generate SUPPORTED_OPS.md from the frontends' code (as Arm's Vela generates its
SUPPORTED_OPS.md from its operator checks): never edited by hand.

For every frontend, every operator its handler table knows (``compiler.frontends.circle.load.
HANDLERS`` for .tflite/.circle, ``nnef_ops.HANDLERS``, ``openvino_ops.HANDLERS``) gets one
row, read from the handler's code:

* **lowers to**: the TOSA operators the handler emits: TOSA operator names among the
  handler's string constants, plus the value of any module-level table entry keyed by the
  operator (``_BINARY["Add"] == "ADD"``);
* **how**: the first sentence of the handler's docstring;
* **refused**: the message of every ``raise ...unsupported(...)`` / ``Unsupported(...)``
  in the handler (f-string fields shown as ``{...}``), so what the table says is refused is
  exactly what the code refuses.

Operator versions (TFLite/Circle): the handlers read each operator's options and check its
tensor types themselves, so every version is taken and the "refused" column says which
types are not.  The .tosa section lists the operators the reference interpreter and the
compiler take (every TOSA 1.0 PRO-INT operator; see compiler/README.md for how each maps
to the NPU).

Usage::

    python tools/make_supported_ops.py            # writes SUPPORTED_OPS.md
    python tools/make_supported_ops.py --check    # exit 1 when the file is stale

tests/test_supported_ops.py fails when SUPPORTED_OPS.md is stale; ``make docs`` rewrites it.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import inspect
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "SUPPORTED_OPS.md"


def _tosa_names() -> set[str]:
    from sim.reference.registry import OPS

    return set(OPS) | {"CONST", "CONST_SHAPE"}


def _fstring(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{...}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _fstring(node.left) + _fstring(node.right)
    return "{...}"


def _refusals(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
            continue
        func = node.exc.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if "unsupported" not in name.lower() or not node.exc.args:
            continue
        text = " ".join(_fstring(node.exc.args[0]).split())
        for prefix in ("{...}: ", "{...} "):
            while text.startswith(prefix):
                text = text[len(prefix):]
        if text and text not in out:
            out.append(text)
    return out


_INDEX: dict[str, dict[str, list[ast.AST]]] = {}
_BUILTINS = frozenset(dir(builtins))   # abs(), max(): Python's, not TOSA's ABS, MAXIMUM


def _function_index(prefix: str) -> dict[str, list[ast.AST]]:
    """Every function and method defined in the frontend's own modules
    (compiler/frontends/<prefix>/*.py and the shared common/graph_builder.py, common/windows.py;
    for the Circle frontend also the builder and int8 softmax it moved to common/), by name:
    a handler's helpers (``_conv_like``, ``b.rescale``) are followed through it."""
    if prefix not in _INDEX:
        index: dict[str, list[ast.AST]] = {}
        folder = ROOT / "compiler" / "frontends"
        own = sorted((folder / prefix).rglob("*.py"))
        if prefix == "circle":
            # Only the Circle lowering uses these (indexed for the others, their method
            # names, ``binary``, ``rescale``, would shadow the NNEF/OpenVINO builder's).
            # They keep the place their old names build.py / ops_softmax.py had: the first
            # definition of a name is the one followed.
            old_name = {"tosa_builder.py": "build.py", "int_softmax.py": "ops_softmax.py"}
            own = sorted(own + [folder / "common" / n for n in old_name],
                         key=lambda p: old_name.get(p.name, p.name))
        paths = own + [folder / "common" / "graph_builder.py", folder / "common" / "windows.py"]
        for path in paths:
            if not path.is_file():
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    index.setdefault(node.name, []).append(node)
        _INDEX[prefix] = index
    return _INDEX[prefix]


def _called(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name and name not in names:
                names.append(name)
    return names


def _parse(fn) -> ast.AST:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return ast.parse("")
    try:
        return ast.parse(source)
    except SyntaxError:
        # A lambda in a table line: the lambda's own expression.
        start = source.find("lambda")
        body = source[start:].rstrip().rstrip(",")
        for end in range(len(body), 0, -1):
            try:
                return ast.parse(body[:end])
            except SyntaxError:
                continue
        return ast.parse("")


def _handler_info(name: str, fn, module, prefix: str) -> tuple[str, str, list[str]]:
    """(lowers to, how, refused) of handler ``fn`` for operator ``name``: its own code and
    the helpers it calls (three calls deep; helper refusals included)."""
    tosa = _tosa_names()
    index = _function_index(prefix)
    tree = _parse(fn)
    emitted: list[str] = []
    refused: list[str] = []
    tables = [(attr, getattr(module, attr)) for attr in dir(module) if attr.startswith("_")
              and isinstance(getattr(module, attr), dict)]
    seen: set[int] = set()

    def visit(node: ast.AST, depth: int) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value in tosa \
                    and sub.value not in emitted:
                emitted.append(sub.value)
            if isinstance(sub, ast.Name):
                for attr, table in tables:
                    if sub.id == attr and isinstance(table.get(name), str) and table[name] in tosa \
                            and table[name] not in emitted:
                        emitted.append(table[name])
        refused.extend(r for r in _refusals(node) if r not in refused)
        for called in _called(node):
            if called in _BUILTINS:
                continue
            if called.upper() in tosa and called.upper() not in emitted:
                emitted.append(called.upper())
            if depth < 3:
                for target in index.get(called, [])[:3]:
                    visit(target, depth + 1)

    visit(tree, 0)
    doc = inspect.getdoc(fn) if not getattr(fn, "__name__", "") == "<lambda>" else ""
    how = " ".join((doc or "").split("\n\n")[0].split())
    if ". " in how:
        how = how[:how.index(". ") + 1]
    return ", ".join(emitted) or "(none: bookkeeping only)", how, refused


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(title: str, intro: str, handlers: dict, module_of, prefix: str) -> list[str]:
    rows = {name: _handler_info(name, handlers[name], module_of(handlers[name]), prefix)
            for name in sorted(handlers, key=str.lower)}
    # Refusals most operators share (tensor types, quantization) are said once.
    counts: dict[str, int] = {}
    for _, _, refused in rows.values():
        for r in refused:
            counts[r] = counts.get(r, 0) + 1
    common = [r for r, n in counts.items() if n * 2 >= len(rows) and len(rows) > 3]
    lines = [f"## {title}", "", intro, ""]
    if common:
        lines += ["Refused for every operator (from the shared helpers' code): " +
                  "; ".join(f"\"{_cell(r)}\"" for r in common) + ".", ""]
    lines += ["| operator | lowers to (TOSA) | how | refused (from the code) |",
              "|---|---|---|---|"]
    for name, (emitted, how, refused) in rows.items():
        own = "; ".join(r for r in refused if r not in common)
        lines.append(f"| `{name}` | {_cell(emitted)} | {_cell(how)} | {_cell(own)} |")
    lines.append("")
    return lines


def render() -> str:
    import importlib

    from compiler.frontends.circle import load as circle
    from compiler.frontends.nnef import ops as nnef_ops
    from compiler.frontends.openvino import ops as openvino_ops
    from sim.reference.registry import OPS

    def module_of(fn):
        return importlib.import_module(fn.__module__)

    lines = [
        "# Supported operators",
        "",
        "Generated by `python tools/make_supported_ops.py` (`make docs`) from the frontends' "
        "handler tables and code; tests/test_supported_ops.py fails when this file is stale. "
        "Do not edit.",
        "",
        "Every frontend produces a TOSA 1.0 graph; the compiler (compiler/README.md) maps TOSA "
        "operators to the NPU.  Operators not listed are refused with `Unsupported` (exit 3) "
        "naming the operator and where it is.  Float graphs (NNEF, OpenVINO without "
        "FakeQuantize) are quantized by compiler/graph/quantize before compiling.",
        "",
    ]
    lines += _table(
        "TFLite / Circle (.tflite, .circle)",
        "int8, uint8 (moved to int8 by a RESCALE at the boundary) and int16x8 tensors, per "
        "the tensor types each handler checks.  Operator versions: every version is read "
        "(the handlers take the options and check the tensor types themselves; a type a "
        "version adds that is not lowered is refused below).  Float inputs/outputs only "
        "through QUANTIZE/DEQUANTIZE at the boundary.",
        circle.HANDLERS, module_of, "circle")
    lines += _table(
        "NNEF (graph.nnef + .dat, .tgz)",
        "Float graphs (quantized by compiler/graph/quantize), or linearly quantized ones "
        "(graph.quant).  Layout as the file declares (NCHW); transposes kept as bookkeeping.",
        nnef_ops.HANDLERS, module_of, "nnef")
    lines += _table(
        "OpenVINO IR (.xml + .bin)",
        "Float IR (quantized by compiler/graph/quantize) or FakeQuantize IR (int8).  Inputs and "
        "outputs in the layout the IR declares.",
        openvino_ops.HANDLERS, module_of, "openvino")
    lines += ["## TOSA (.tosa)", "",
              "TOSA 1.0 flatbuffers (official serialiser, tosa-opt).  Operators with only "
              "constant inputs are folded at compile time (compiler/graph/constant_fold.py, "
              "with the reference interpreter's operator code).  Integer operators the "
              "reference interpreter implements, all compiled for the NPU "
              "(compiler/README.md):", "",
              ", ".join(f"`{n}`" for n in sorted(OPS)), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make_supported_ops", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if SUPPORTED_OPS.md is stale")
    a = p.parse_args(argv)
    text = render()
    if a.check:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT.name} is stale: run python tools/make_supported_ops.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
