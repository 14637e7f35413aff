"""OpenVINO IR frontend: bad input gives InvalidInput/Unsupported naming file and layer.

Hand-built IRs (tests/ov_ir_helpers.py) break one thing at a time: the XML (malformed,
DTDs, entity expansion, external entities), the graph (ids, edges, ports, cycles), the
.bin (truncated, offsets and sizes out of range), types, shapes, attributes, layers and
FakeQuantize forms without a mapping.  A seeded mutation test checks that damaged files
never escape as anything but the project's error classes.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from compiler.frontends.openvino.load import load_openvino_model  # noqa: E402
from ov_ir_helpers import IrBuilder, conv_attrs  # noqa: E402
from tosa_ir.errors import InvalidInput, NpuError, Unsupported  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "openvino"


def conv_model(weights_shape=(3, 2, 3, 3), out_shape=(1, 3, 4, 4), **attrs):
    """x[1,2,4,4] -> Convolution(3x3, pad 1) -> ReLU -> Result."""
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 4, 4])
    w = b.const(np.ones(weights_shape, np.float32), name="w")
    y = b.one("Convolution", [x, w], out_shape, name="conv", **(attrs or conv_attrs(pad=1)))
    r = b.one("ReLU", [y], out_shape, name="relu")
    b.result(r, name="out")
    return b


def load_error(path, kind=NpuError) -> str:
    with pytest.raises(kind) as info:
        load_openvino_model(path, layout="nhwc").graph
    msg = str(info.value)
    assert "\n" not in msg
    assert str(path) in msg or str(Path(path).with_suffix(".bin")) in msg, msg
    return msg


def test_valid_base_model_loads(tmp_path):
    graph = load_openvino_model(conv_model().write(tmp_path), layout="nhwc").graph
    assert [op.op for op in graph.main.operators if op.op not in ("CONST", "CONST_SHAPE")] \
        == ["CONV2D", "CLAMP"]


# ---------------------------------------------------------------------------------------
# XML
# ---------------------------------------------------------------------------------------
BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE net [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<net name="&lol9;" version="11"><layers/></net>
"""
EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE net [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<net name="&xxe;" version="11"><layers/></net>
"""
EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE net SYSTEM "http://example.com/net.dtd">
<net version="11"><layers/></net>
"""
PARAMETER_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE net [<!ENTITY % p SYSTEM "http://example.com/x.dtd"> %p;]>
<net version="11"><layers/></net>
"""


@pytest.mark.parametrize("text,needle", [
    (BILLION_LAUGHS, "DTD"), (EXTERNAL_ENTITY, "DTD"), (EXTERNAL_DTD, "DTD"),
    (PARAMETER_ENTITY, "DTD"),
    ("<net version='11'><layers>", "malformed XML"),
    ("", "malformed XML"),
    ("\x00\x01garbage", "malformed XML"),
    ("<?xml version='1.0'?><model version='11'/>", "not an OpenVINO IR"),
    ("<net><layers/></net>", "no version"),
    ("<net version='eleven'><layers/></net>", "IR version must be an integer"),
    ("<net version='11'/>", "no <layers>"),
    ("<net version='11'><layers/></net>", "no layers"),
])
def test_bad_xml_is_invalid_input(tmp_path, text, needle):
    path = tmp_path / "m.xml"
    path.write_text(text, encoding="latin-1")
    msg = load_error(path, InvalidInput)
    assert needle in msg


def test_entities_are_never_expanded(tmp_path):
    """The billion-laughs file is rejected before any expansion (fast, no memory)."""
    path = tmp_path / "m.xml"
    path.write_text(BILLION_LAUGHS.replace("lol3;&lol3;", "lol3;" * 1000))
    with pytest.raises(InvalidInput, match="DTD"):
        load_openvino_model(path, layout="nhwc").graph


def test_old_ir_version_is_unsupported(tmp_path):
    b = conv_model()
    b.version = 7
    msg = load_error(b.write(tmp_path), Unsupported)
    assert "IR version 7" in msg


def test_missing_file(tmp_path):
    msg = load_error(tmp_path / "nothing.xml", InvalidInput)
    assert "cannot read" in msg


# ---------------------------------------------------------------------------------------
# Graph structure
# ---------------------------------------------------------------------------------------
def edit_xml(b: IrBuilder, tmp_path, old: str, new: str, count: int = 1) -> Path:
    text = b.xml()
    assert old in text, old
    return b.write(tmp_path, xml=text.replace(old, new, count))


def test_duplicate_layer_id(tmp_path):
    path = edit_xml(conv_model(), tmp_path, '<layer id="3"', '<layer id="2"')
    msg = load_error(path, InvalidInput)
    assert "layer 2 'relu'" in msg and "duplicate layer id" in msg


def test_non_integer_ids_and_dims(tmp_path):
    msg = load_error(edit_xml(conv_model(), tmp_path, '<layer id="2"', '<layer id="two"'),
                     InvalidInput)
    assert "'conv'" in msg and "layer id must be an integer" in msg
    b = conv_model()
    msg = load_error(edit_xml(b, tmp_path, 'port id="1"', 'port id="x"'), InvalidInput)
    assert "port id" in msg


def test_edge_to_missing_layer_or_port(tmp_path):
    b = conv_model()
    b.extra_edges.append((1, 0, 9, 0))
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "layer 9" in msg and "does not exist" in msg
    b = conv_model()
    b.extra_edges.append((1, 0, 2, 7))
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "layer 2 'conv' (Convolution)" in msg and "no input port 7" in msg
    b = conv_model()
    b.extra_edges.append((1, 5, 2, 0))
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "layer 1 'w' (Const)" in msg and "no output port 5" in msg


def test_two_edges_into_one_port(tmp_path):
    b = conv_model()
    b.extra_edges.append((0, 0, 2, 1))
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "layer 2 'conv'" in msg and "more than one incoming edge" in msg


def test_unconnected_input(tmp_path):
    b = conv_model()
    text = b.xml().replace('<edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>', "")
    msg = load_error(b.write(tmp_path, xml=text), InvalidInput)
    assert "layer 2 'conv' (Convolution)" in msg and "not connected" in msg


def test_cycle(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 4])
    a = b.one("Add", [x, x], [1, 4], name="a")
    c = b.one("Add", [a, x], [1, 4], name="c")
    b.result(c)
    # Rewire a's second input to come from c: a -> c -> a.
    text = b.xml().replace('<edge from-layer="0" from-port="0" to-layer="1" to-port="1"/>',
                           f'<edge from-layer="2" from-port="{c.port}" to-layer="1" '
                           f'to-port="1"/>')
    msg = load_error(b.write(tmp_path, xml=text), InvalidInput)
    assert "cycle" in msg and ("'a'" in msg or "'c'" in msg)


def test_no_result(tmp_path):
    b = IrBuilder()
    b.parameter("x", [1, 4])
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "no Result" in msg


def test_port_dims_disagree_with_producer(tmp_path):
    b = conv_model()
    # The ReLU's input port claims a different shape than the convolution produces.
    text = b.xml()
    relu = text.index("name=\"relu\"")
    head, tail = text[:relu], text[relu:]
    tail = tail.replace("<dim>3</dim>", "<dim>5</dim>", 1)
    msg = load_error(b.write(tmp_path, xml=head + tail), InvalidInput)
    assert "layer 3 'relu' (ReLU)" in msg and "declares [1, 5, 4, 4]" in msg


def test_wrong_declared_output_shape(tmp_path):
    msg = load_error(conv_model(out_shape=(1, 3, 5, 5)).write(tmp_path), InvalidInput)
    assert "layer 2 'conv' (Convolution)" in msg and "[1, 3, 4, 4]" in msg


# ---------------------------------------------------------------------------------------
# .bin and constants
# ---------------------------------------------------------------------------------------
def test_truncated_bin(tmp_path):
    b = conv_model()
    path = b.write(tmp_path, bin_bytes=bytes(b.bin[:50]))
    msg = load_error(path, InvalidInput)
    assert "layer 1 'w' (Const)" in msg and "outside the weights file" in msg
    assert "50 bytes" in msg


def test_empty_and_missing_bin(tmp_path):
    b = conv_model()
    path = b.write(tmp_path, bin_bytes=b"")
    assert "outside the weights file" in load_error(path, InvalidInput)
    path.with_suffix(".bin").unlink()
    msg = load_error(path, InvalidInput)
    assert "does not exist" in msg


@pytest.mark.parametrize("offset,size,needle", [
    (1 << 40, None, "outside the weights file"),
    (4, None, "outside the weights file"),
    (-8, None, "negative"),
    ("abc", None, "must be an integer"),
    (None, 100, "does not match"),
    (None, -1, "negative"),
])
def test_const_offsets_and_sizes(tmp_path, offset, size, needle):
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 4, 4])
    w = b.raw_const(np.ones((3, 2, 3, 3), np.float32).tobytes(), "f32", (3, 2, 3, 3),
                    name="weights", offset=offset, size=size)
    y = b.one("Convolution", [x, w], [1, 3, 4, 4], name="conv", **conv_attrs(pad=1))
    b.result(y)
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "layer 1 'weights' (Const)" in msg and needle in msg


@pytest.mark.parametrize("et,kind,needle", [
    ("q7", InvalidInput, "unknown element type 'q7'"),
    ("nf4", Unsupported, "element type 'nf4' is not supported"),
    ("string", Unsupported, "element type 'string' is not supported"),
])
def test_const_element_types(tmp_path, et, kind, needle):
    b = IrBuilder()
    x = b.parameter("x", [4])
    c = b.raw_const(b"\0" * 16, et, (4,), name="c")
    b.result(b.one("Add", [x, c], [4], name="add"))
    msg = load_error(b.write(tmp_path), kind)
    assert "layer 1 'c' (Const)" in msg and needle in msg


def test_const_shape_disagrees_with_port(tmp_path):
    b = conv_model()
    text = b.xml().replace('shape="3, 2, 3, 3"', 'shape="3, 2, 9"')
    msg = load_error(b.write(tmp_path, xml=text), InvalidInput)
    assert "layer 1 'w' (Const)" in msg and "does not match the output port" in msg


# ---------------------------------------------------------------------------------------
# Layers, types, attributes
# ---------------------------------------------------------------------------------------
def test_unknown_layer_type(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 4])
    b.result(b.one("FancyOp", [x], [1, 4], name="fancy", version="custom_opset"))
    msg = load_error(b.write(tmp_path), Unsupported)
    assert "layer 1 'fancy' (FancyOp)" in msg and "no TOSA mapping" in msg


@pytest.mark.parametrize("type_", ["Interpolate", "TopK", "LSTMCell", "Loop"])
def test_known_but_unsupported_layer(tmp_path, type_):
    b = IrBuilder()
    x = b.parameter("x", [1, 4])
    b.result(b.one(type_, [x], [1, 4], name="op"))
    msg = load_error(b.write(tmp_path), Unsupported)
    assert f"layer 1 'op' ({type_})" in msg


def test_dynamic_and_non_float_inputs(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 4])
    b.result(b.one("ReLU", [x], [1, 4]))
    text = b.xml().replace('shape="1,4"', 'shape="?,4"')
    msg = load_error(b.write(tmp_path, xml=text), Unsupported)
    assert "layer 0 'x' (Parameter)" in msg and "dynamic" in msg
    text = b.xml().replace("<dim>1</dim>", "<dim>-1</dim>")
    msg = load_error(b.write(tmp_path, xml=text), NpuError)
    assert "dynamic" in msg or "declares" in msg
    b2 = IrBuilder()
    x = b2.parameter("x", [1, 4], et="i32")
    b2.result(x)
    msg = load_error(b2.write(tmp_path), Unsupported)
    assert "layer 0 'x' (Parameter)" in msg and "'i32'" in msg


@pytest.mark.parametrize("change,kind,needle", [
    ({"strides": "a,b"}, InvalidInput, "list of integers"),
    ({"strides": "1,1,1"}, Unsupported, "only 2-D"),
    ({"auto_pad": "sideways"}, InvalidInput, "unknown auto_pad"),
    ({"pads_begin": "-1,-1"}, Unsupported, "negative padding"),
    ({"strides": "0,1"}, InvalidInput, "must be positive"),
])
def test_bad_convolution_attributes(tmp_path, change, kind, needle):
    attrs = conv_attrs(pad=1)
    attrs.update(change)
    msg = load_error(conv_model(**attrs).write(tmp_path), kind)
    assert "layer 2 'conv' (Convolution)" in msg and needle in msg


def test_missing_attribute(tmp_path):
    attrs = conv_attrs(pad=1)
    del attrs["strides"]
    msg = load_error(conv_model(**attrs).write(tmp_path), InvalidInput)
    assert "layer 2 'conv'" in msg and "missing attribute 'strides'" in msg


def test_convolution_weight_problems(tmp_path):
    msg = load_error(conv_model(weights_shape=(3, 5, 3, 3)).write(tmp_path), InvalidInput)
    assert "layer 2 'conv'" in msg and "do not fit 2 input channels" in msg
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 4, 4])
    w = b.parameter("w", [3, 2, 3, 3])
    b.result(b.one("Convolution", [x, w], [1, 3, 4, 4], name="conv", **conv_attrs(pad=1)))
    msg = load_error(b.write(tmp_path), Unsupported)
    assert "layer 2 'conv'" in msg and "must be constant" in msg
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 4])
    w = b.const(np.ones((3, 2, 3), np.float32))
    b.result(b.one("Convolution", [x, w], [1, 3, 4], name="conv1d", strides="1",
                   dilations="1", pads_begin="1", pads_end="1"))
    msg = load_error(b.write(tmp_path), Unsupported)
    assert "'conv1d'" in msg and "rank-3" in msg


def test_reshape_and_pad_problems(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 6])
    s = b.const(np.asarray([4, -1], np.int64))
    b.result(b.one("Reshape", [x, s], [4, 2], name="reshape", special_zero="false"))
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "layer 2 'reshape'" in msg and "cannot reshape" in msg
    b = IrBuilder()
    x = b.parameter("x", [1, 2])
    p0, p1 = b.const(np.asarray([0, 1], np.int64)), b.const(np.asarray([0, 1], np.int64))
    b.result(b.one("Pad", [x, p0, p1], [1, 4], name="pad", pad_mode="reflect",
                   version="opset12"))
    msg = load_error(b.write(tmp_path), Unsupported)
    assert "layer 3 'pad' (Pad)" in msg and "reflect" in msg


def test_maxpool_indices_in_use(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 1, 4, 4])
    vals, idx = b.layer("MaxPool", [x], [[1, 1, 2, 2], [1, 1, 2, 2]], name="pool",
                        version="opset8", strides="2,2", dilations="1,1", pads_begin="0,0",
                        pads_end="0,0", kernel="2,2", rounding_type="floor",
                        auto_pad="explicit")
    b.result(vals)
    idx.et = "i64"
    b.result(b.one("Convert", [idx], [1, 1, 2, 2], name="cvt", destination_type="f32"))
    msg = load_error(b.write(tmp_path), Unsupported)
    assert "layer 1 'pool' (MaxPool)" in msg and "indices" in msg


# ---------------------------------------------------------------------------------------
# FakeQuantize forms without an int8 mapping
# ---------------------------------------------------------------------------------------
def fq_model(levels=256, lo=-1.0, hi=1.0, out_lo=None, out_hi=None, shape=()):
    b = IrBuilder()
    x = b.parameter("x", [1, 2, 4, 4])
    ranges = [b.const(np.full(shape, v, np.float32)) for v in
              (lo, hi, lo if out_lo is None else out_lo, hi if out_hi is None else out_hi)]
    q = b.one("FakeQuantize", [x] + ranges, [1, 2, 4, 4], name="fq", levels=levels,
              auto_broadcast="numpy")
    b.result(b.one("ReLU", [q], [1, 2, 4, 4], name="relu"))
    return b


@pytest.mark.parametrize("kw,kind,needle", [
    ({"levels": 16}, Unsupported, "levels=16"),
    ({"shape": (1, 2, 1, 1)}, NpuError, "FakeQuantize"),
    ({"lo": 1.0, "hi": -1.0}, InvalidInput, "range is empty"),
    ({"out_lo": -2.0, "out_hi": 2.0}, Unsupported, "different input"),
    ({"lo": 0.5, "hi": 2.0}, Unsupported, "does not contain zero"),
])
def test_fakequantize_without_int8_form(tmp_path, kw, kind, needle):
    b = fq_model(**kw)
    if "shape" in kw:
        # Per-channel ranges need different values per channel to be per-channel.
        b.bin[4:8] = np.float32(-2.0).tobytes()       # second channel of input_low
    path = b.write(tmp_path)
    msg = load_error(path, kind)
    assert "layer 5 'fq' (FakeQuantize)" in msg and needle in msg


def test_conflicting_fakequantize_on_one_tensor(tmp_path):
    b = IrBuilder()
    x = b.parameter("x", [1, 4])
    outs = []
    for k, hi in enumerate((1.0, 2.0)):
        rng = [b.const(np.float32(v)) for v in (-hi, hi, -hi, hi)]
        outs.append(b.one("FakeQuantize", [x] + rng, [1, 4], name=f"fq{k}", levels=256))
    b.result(b.one("Add", outs, [1, 4], name="add"))
    msg = load_error(b.write(tmp_path), Unsupported)
    assert "'fq1' (FakeQuantize)" in msg and "already quantized differently" in msg
    assert "'fq0'" in msg


# ---------------------------------------------------------------------------------------
# Damaged files never escape as anything but the project's errors
# ---------------------------------------------------------------------------------------
def test_mutated_files_raise_only_project_errors(tmp_path):
    src = FIXTURES / "cnn_float.xml"
    text = src.read_text()
    raw = (FIXTURES / "cnn_float.bin").read_bytes()
    rng = np.random.default_rng(1234)
    numbers = [m.start() for m in re.finditer(r"\d+", text)]
    outcomes = {"ok": 0, "error": 0}
    for i in range(120):
        kind = i % 4
        mutated, data = text, raw
        if kind == 0:            # change a number
            pos = numbers[rng.integers(len(numbers))]
            mutated = text[:pos] + str(rng.integers(0, 70)) + text[pos + 1:]
        elif kind == 1:          # delete a line
            lines = text.split("\n")
            del lines[rng.integers(len(lines))]
            mutated = "\n".join(lines)
        elif kind == 2:          # cut the XML short
            mutated = text[:rng.integers(len(text))]
        else:                    # cut the .bin short
            data = raw[:rng.integers(len(raw))]
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / "m.xml").write_text(mutated)
        (folder / "m.bin").write_bytes(data)
        try:
            load_openvino_model(folder / "m.xml", layout="nhwc")
            outcomes["ok"] += 1
        except NpuError as e:
            assert "\n" not in str(e)
            outcomes["error"] += 1
        shutil.rmtree(folder)
    assert outcomes["error"] > 60, outcomes


def test_absurd_const_shape(tmp_path):
    """2**64 elements: the size check must not overflow (nor allocate)."""
    b = IrBuilder()
    x = b.parameter("x", [4])
    c = b.raw_const(b"\0" * 16, "f32", (1 << 32, 1 << 32), name="c")
    b.result(b.one("Add", [x, c], [1 << 32, 1 << 32], name="add"))
    msg = load_error(b.write(tmp_path), InvalidInput)
    assert "layer 1 'c' (Const)" in msg and "does not match" in msg
