"""NNEF frontend errors: every bad input is one InvalidInput/Unsupported naming the file
(and the line:column where the parser gives one), never another exception."""
from __future__ import annotations

import os
import sys
import tarfile

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from nnef_helpers import TINY_CNN, random_weights, write_model  # noqa: E402

from compiler.frontends.nnef.load import load_nnef  # noqa: E402
from compiler.frontends.nnef.dat import write_float  # noqa: E402
from tosa_ir.errors import InvalidInput, Unsupported  # noqa: E402

GOOD_WEIGHTS = random_weights(TINY_CNN)


def _model(tmp_path, text=TINY_CNN, weights=None, **kw):
    return write_model(tmp_path / "m", text, GOOD_WEIGHTS if weights is None else weights,
                       **kw)


def _graph(body: str, header: str = "version 1.0;\n") -> str:
    return header + "graph G( input ) -> ( output )\n{\n" + body + "}\n"


@pytest.mark.parametrize("body,where,message", [
    ("    input = external(shape = [1, 3])\n    output = relu(input);\n",
     "graph.nnef:5:5", "expected token ';'"),
    ("    input = external(shape = [1, 3]);\n    output = frobnicate(input);\n",
     "graph.nnef:5:14", "undefined operation 'frobnicate'"),
    ("    input = external(shape = [1, 3]);\n    output = relu(missing);\n",
     "graph.nnef:5:19", "missing"),
])
def test_syntax_and_semantic_errors_name_file_and_line(tmp_path, body, where, message):
    folder = write_model(tmp_path / "m", _graph(body))
    with pytest.raises(InvalidInput) as err:
        load_nnef(folder)
    assert where in str(err.value) and message in str(err.value)


def test_bad_shapes(tmp_path):
    body = ("    input = external(shape = [1, 3, 8, 8]);\n"
            "    k = variable(shape = [4, 5, 3, 3], label = 'k');\n"
            "    output = conv(input, k);\n")
    folder = write_model(tmp_path / "m", _graph(body), {"k": np.ones((4, 5, 3, 3), np.float32)})
    with pytest.raises(InvalidInput, match="graph.nnef.*conv"):
        load_nnef(folder)


def test_custom_operation_without_body_is_unsupported(tmp_path):
    text = ("version 1.0;\nextension KHR_enable_fragment_definitions;\n"
            "fragment mystery( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
            "graph G( input ) -> ( output )\n{\n"
            "    input = external(shape = [1, 3]);\n    output = mystery(input);\n}\n")
    with pytest.raises(Unsupported, match="custom operation 'mystery'"):
        load_nnef(write_model(tmp_path / "m", text))


def test_operation_without_mapping_is_unsupported(tmp_path):
    body = ("    input = external(shape = [1, 3, 4, 4]);\n"
            "    output = argmax_reduce(input, axes = [1]);\n")
    with pytest.raises(Unsupported, match="argmax_reduce"):
        load_nnef(write_model(tmp_path / "m", _graph(body)))


def test_missing_data_file(tmp_path):
    weights = dict(GOOD_WEIGHTS)
    del weights["fc/k"]
    with pytest.raises(InvalidInput, match="no data file 'fc/k.dat'"):
        load_nnef(_model(tmp_path, weights=weights))


def test_data_shape_mismatch(tmp_path):
    weights = dict(GOOD_WEIGHTS)
    weights["c1/b"] = np.zeros((1, 9), np.float32)
    with pytest.raises(InvalidInput, match=r"c1/b\.dat.*\[1, 9\].*\[1, 8\]"):
        load_nnef(_model(tmp_path, weights=weights))


def test_truncated_data_file(tmp_path):
    raw = {"c1/k": write_float(GOOD_WEIGHTS["c1/k"])[:-10]}
    with pytest.raises(InvalidInput, match=r"c1/k\.dat: truncated"):
        load_nnef(_model(tmp_path, raw=raw))


def test_corrupted_data_file_header(tmp_path):
    raw = {"fc/b": b"garbage" * 30}
    with pytest.raises(InvalidInput, match=r"fc/b\.dat: not an NNEF tensor file"):
        load_nnef(_model(tmp_path, raw=raw))


def test_truncated_tar_container(tmp_path):
    folder = _model(tmp_path)
    path = tmp_path / "m.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for f in sorted(folder.rglob("*")):
            tar.add(f, arcname=str(f.relative_to(folder)), recursive=False)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InvalidInput, match="m.tgz"):
        load_nnef(path)


def test_not_a_container(tmp_path):
    path = tmp_path / "model.tgz"
    path.write_bytes(b"\x1f\x8b" + os.urandom(200))
    with pytest.raises(InvalidInput, match="model.tgz"):
        load_nnef(path)


def test_missing_graph_file(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInput, match="no graph.nnef"):
        load_nnef(tmp_path / "empty")
    with pytest.raises(InvalidInput, match="no such file"):
        load_nnef(tmp_path / "nowhere")


def test_binary_graph_file(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "graph.nnef").write_bytes(b"version 1.0;\n\xff\xfe\x00graph")
    with pytest.raises(InvalidInput, match="graph.nnef: not a text file"):
        load_nnef(folder)


def test_graph_quant_errors_name_graph_quant(tmp_path):
    quant = '"input": zero_point_linear_quantize(zero_point = 0, scale = 0.1 bits = 8);\n'
    with pytest.raises(InvalidInput, match=r"graph\.quant:1:"):
        load_nnef(_model(tmp_path, quant=quant))


def test_logarithmic_activation_quantization_is_unsupported(tmp_path):
    quant = ('"input": zero_point_linear_quantize(zero_point = 0, scale = 0.1, bits = 8, '
             'signed = true, symmetric = false);\n'
             '"r1": logarithmic_quantize(max = 4.0, bits = 8);\n')
    with pytest.raises(Unsupported, match="graph.quant.*'r1'.*logarithmic"):
        load_nnef(_model(tmp_path, quant=quant))


def test_document_that_crashes_the_khronos_parser(tmp_path):
    """The C++ parser segfaults on a stray '-' before an assignment: it runs in a child
    process, so that is one InvalidInput, not the end of the caller."""
    body = " -   input = external(shape = [1, 3]);\n    output = relu(input);\n"
    with pytest.raises(InvalidInput, match="graph.nnef: malformed NNEF document"):
        load_nnef(write_model(tmp_path / "m", _graph(body)))
