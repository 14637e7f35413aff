"""The Circle/TFLite reader: schema layout, bad files, error messages.

Malformed input must give a one-line InvalidInput (or, for a corrupted byte that happens
to make a well-formed but unsupported model, Unsupported) and never another exception.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.frontends.circle import schema as circle_schema
from compiler.frontends.circle.load import HANDLERS, load_circle, read_circle_model
from compiler.frontends.circle.lower import lower_subgraph
from tosa_ir.errors import InvalidInput, NpuError, Unsupported

FIXTURES = Path(__file__).parent / "fixtures" / "tflite"
MODEL = (FIXTURES / "residual.tflite").read_bytes()
SMALL = (FIXTURES / "fc_stack.circle").read_bytes()


def _outcome(buf: bytes, source: str = "bad.tflite"):
    try:
        load_circle(buf, source=source)
    except NpuError as err:
        message = str(err)
        assert "\n" not in message and source in message, message
        return type(err)
    return None


def test_truncated_files_are_invalid_input():
    cuts = sorted(set(np.linspace(0, len(MODEL) - 1, 150).astype(int).tolist()
                      + list(range(0, 64))))
    for cut in cuts:
        assert _outcome(MODEL[:cut]) is InvalidInput, f"cut at {cut}"


def test_corrupted_bytes_never_crash():
    rng = np.random.default_rng(20240611)
    outcomes = {}
    for trial in range(400):
        buf = bytearray(SMALL)
        for pos in rng.integers(0, len(buf), size=int(rng.integers(1, 4))):
            buf[pos] = int(rng.integers(0, 256))
        result = _outcome(bytes(buf), "flipped.circle")
        assert result in (None, InvalidInput, Unsupported)
        outcomes[result] = outcomes.get(result, 0) + 1
    assert outcomes.get(InvalidInput, 0) > 0  # the corruption does reach the checks


def test_structural_corruption_is_invalid_input():
    # Root offset pointing past the end, identifier of another format, empty file.
    bad_root = (0xFFFFFF00).to_bytes(4, "little") + MODEL[4:]
    assert _outcome(bad_root) is InvalidInput
    assert _outcome(MODEL[:4] + b"TOSA" + MODEL[8:]) is InvalidInput
    assert _outcome(b"") is InvalidInput
    with pytest.raises(InvalidInput, match="cannot read"):
        load_circle(FIXTURES / "does_not_exist.tflite")


def test_tflite_and_circle_decode_alike():
    a = read_circle_model((FIXTURES / "layout.tflite").read_bytes())
    b = read_circle_model((FIXTURES / "layout.circle").read_bytes())
    assert (a.kind, b.kind) == ("tflite", "circle")
    assert [op.op for op in a.subgraphs[0].operators] == \
        [op.op for op in b.subgraphs[0].operators]


def test_unsupported_operator_names_op_and_index():
    model = read_circle_model(FIXTURES / "cnn_basic.tflite")
    handlers = {k: v for k, v in HANDLERS.items() if k != "SOFTMAX"}
    with pytest.raises(Unsupported, match=r"subgraph 0 operator 8 \(SOFTMAX\)"):
        lower_subgraph(model.subgraphs[0], model.source, handlers)


def test_schema_slots_match_circle_schema_bindings():
    """Field slots and enum values against the generated bindings of circle-schema."""
    pytest.importorskip("circle_schema")
    import importlib
    import inspect
    import re

    pkg = "circle_schema.v0_10.circle"
    for table, fields in circle_schema.TABLES.items():
        try:
            module = importlib.import_module(f"{pkg}.{table}")
        except ImportError:
            continue  # frontend-only helper table
        source = inspect.getsource(module)
        for field in fields:
            camel = "".join(p[:1].upper() + p[1:] for p in field.name.split("_"))
            if field.is_union:
                camel += "Type"
            match = re.search(rf"def (?:{table})?Add{camel}\(builder, \w+\):\s*\n\s*builder\."
                              rf"Prepend\w+Slot\((\d+)", source)
            assert match, f"{table}.{field.name} not in circle-schema"
            assert int(match.group(1)) == field.slot, f"{table}.{field.name}"
    ops = importlib.import_module(f"{pkg}.BuiltinOperator").BuiltinOperator
    for code, name in circle_schema.BUILTIN_OPERATORS.items():
        assert getattr(ops, name) == code, name
    opts = importlib.import_module(f"{pkg}.BuiltinOptions").BuiltinOptions
    for code, name in circle_schema.BUILTIN_OPTIONS.items():
        assert getattr(opts, name) == code, name
    types = importlib.import_module(f"{pkg}.TensorType").TensorType
    for code, name in circle_schema.TENSOR_TYPES.items():
        assert getattr(types, name) == code, name
