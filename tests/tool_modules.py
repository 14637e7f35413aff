"""The scripts under tools/ as modules, for tests (not a test module; tools/ is not a package).

* :func:`load_tool`: ``tools/<name>.py`` imported once per process.
* :func:`conformance_corpus`: the TOSA conformance corpus (tools/make_conformance_corpus.py),
  generated on first use into build/conformance/<key>/ and reused after.
* :func:`small_alexnet`: AlexNet (tools/make_alexnet.py) at 1/16 width, the test-sized model,
  ending at the logits (the tests of its convolutions and pools count layers; the softmax
  tail the tool adds by default is tested in tests/test_full_networks.py).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFORMANCE_CACHE = REPO / "build" / "conformance"


def load_tool(name: str):
    """``tools/<name>.py`` as the module ``name``."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module   # dataclasses and pickling look modules up by name
        spec.loader.exec_module(module)
    return sys.modules[name]


def conformance_corpus(**options) -> Path:
    """The corpus folder for ``CorpusOptions(**options)`` (default: the whole corpus)."""
    tool = load_tool("make_conformance_corpus")
    return tool.ensure_corpus(CONFORMANCE_CACHE, tool.CorpusOptions(**options), jobs=2)


def small_alexnet(out: Path) -> tuple[Path, Path]:
    """Build AlexNet at 1/16 width (same operators, shapes and spatial sizes as the full
    model) into folder ``out``: (the int8 .tosa model, its input .npz)."""
    load_tool("make_alexnet").build(out, width_div=16, calib=2, test=1, report=False, log=lambda *a: None,
                                    softmax=False)
    return out / "alexnet_int8.tosa", out / "input.npz"


def small_network(name: str, out: Path, width_div: int, size: int = 224) -> tuple[Path, Path]:
    """Build ``tools/make_<name>.py``'s network (resnet50, mobilenetv2) at 1/``width_div``
    width into folder ``out``: (the int8 .tosa model, its input .npz)."""
    load_tool(f"make_{name}").build(out, width_div=width_div, size=size, calib=2, test=1,
                                    report=False, log=lambda *a: None)
    return out / f"{name}_int8.tosa", out / "input.npz"
