"""SUPPORTED_OPS.md is generated from the frontends' code (tools/make_supported_ops.py,
`make docs`): it must be what the generator writes today."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from tool_modules import load_tool  # noqa: E402


def test_supported_ops_md_is_current():
    tool = load_tool("make_supported_ops")
    assert tool.OUT.read_text() == tool.render(), \
        "SUPPORTED_OPS.md is stale: run python tools/make_supported_ops.py (make docs)"


def test_every_frontend_operator_has_a_row():
    from compiler.frontends.circle import load as circle
    from compiler.frontends.nnef import ops as nnef_ops
    from compiler.frontends.openvino import ops as openvino_ops

    text = load_tool("make_supported_ops").OUT.read_text()
    for table in (circle.HANDLERS, nnef_ops.HANDLERS, openvino_ops.HANDLERS):
        for name in table:
            assert f"| `{name}` |" in text, name
