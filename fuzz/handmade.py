"""Hand-made reproducers of the hostile-input classes SECURITY.md lists, written into the
regression corpus (``python -m fuzz.handmade``): each is a few hundred bytes that once hung
a tool, made it allocate gigabytes, printed a traceback or gave a wrong answer.  The fuzz
targets (fuzz/targets.py) replay them like any fuzzer finding.
"""
from __future__ import annotations

import copy
import io
import json
import struct
import tarfile
import zipfile

import numpy as np

from fuzz.__main__ import CORPUS, save
from fuzz.targets import SLICE_INPUTS, OpenVinoTarget, _slice_image


def _npy_header(shape, descr="<i1") -> bytes:
    buf = io.BytesIO()
    buf.write(np.lib.format.magic(1, 0))
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def npz_cases():
    big = io.BytesIO()
    with zipfile.ZipFile(big, "w") as z:
        z.writestr("input.npy", _npy_header((10 ** 6, 10 ** 6)))
    yield big.getvalue(), "an .npz whose header declares 10^12 elements"
    good = bytearray(SLICE_INPUTS.read_bytes())
    good[good.index(b"\x93NUMPY") + 200] ^= 0xFF
    yield bytes(good), "an .npz member with a bad CRC"
    yield b"PK\x03\x04 not a zip", "an .npz that is not a zip"


def _image(header, payload) -> bytes:
    from isa.program import FORMAT_VERSION, MAGIC

    text = json.dumps(header).encode()
    return MAGIC + struct.pack("<II", FORMAT_VERSION, len(text)) + text + payload


def program_cases():
    data = _slice_image()
    jlen = struct.unpack_from("<I", data, 12)[0]
    header, payload = json.loads(data[16:16 + jlen]), data[16 + jlen:]

    def edit(why, *path_value):
        h = copy.deepcopy(header)
        *path, value = path_value
        node = h
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return _image(h, payload), why

    yield edit("config asram_rows = 2^40", "config", "asram_rows", 1 << 40)
    yield edit("a segment at address 2^40", "segments", 1, "addr", 1 << 40)
    yield edit("a negative segment offset", "segments", 1, "offset", -16)
    yield edit("a negative segment size", "segments", 1, "size", -16)
    yield edit("a segment past external memory", "segments", 1, "addr", 256 * 1024 - 16)
    yield edit("a binding of dtype object", "inputs", 0, "dtype", "object")
    yield edit("a binding at a negative address", "inputs", 0, "addr", -32)
    yield edit("a header nested 10^5 deep", "info", json.loads("[" * 60 + "]" * 60))
    yield _runaway(header), "a BRANCH loop with the largest budget (the watchdog stops it)"


def _runaway(header) -> bytes:
    from isa import SMALL_CONFIG
    from isa.asm import assemble
    from isa.program import Program, _binding

    prog = Program(SMALL_CONFIG, assemble("BRANCH target=0 test=ALWAYS limit=16777215\nHALT"),
                   inputs=[_binding(b) for b in header["inputs"]],
                   outputs=[_binding(b) for b in header["outputs"]])
    return prog.to_bytes()


def config_cases():
    yield b'{"asram_rows": 1' + b"0" * 5000 + b"}", "a 5000-digit number"
    yield b"[" * 100000 + b"]" * 100000, "JSON nested 10^5 deep"
    yield b'{"asram_rows": 1e999}', "a number that overflows to infinity"
    yield b'{"asram_rows": 1099511627776}', "asram_rows = 2^40"


def _graph_bytes(graph) -> bytes:
    from tosa_ir.tosa_fb import write_tosa

    return write_tosa(graph)


def tosa_cases():
    from tosa_ir import Block, Graph, Operator, Region, Tensor
    from tosa_ir.tosa_fb import read_tosa

    from fuzz.targets import SLICE

    for op_name in ("COND_IF", "WHILE_LOOP"):
        main = Block("main")
        main.add_tensor(Tensor("c", (1,), "bool"))
        main.add_tensor(Tensor("x", (1,), "int32"))
        main.add_tensor(Tensor("y", (1,), "int32"))
        if op_name == "COND_IF":
            main.inputs = ["c", "x"]
            op = Operator("COND_IF", ["c", "x"], ["y"], {"then_graph": "main", "else_graph": "main"})
        else:
            main.inputs = ["x"]
            op = Operator("WHILE_LOOP", ["x"], ["y"], {"cond_graph": "main", "body_graph": "main"})
        main.outputs, main.operators = ["y"], [op]
        yield _graph_bytes(Graph(regions=[Region("main", [main])])), f"{op_name} into the main graph"
    g = read_tosa(SLICE)
    g.main.operators.insert(0, copy.deepcopy(g.main.operators[0]))
    yield _graph_bytes(g), "a tensor written twice"


def nnef_cases():
    from fuzz.targets import FIX

    graph = (FIX / "nnef" / "digits_cnn" / "graph.nnef").read_bytes()
    raw = io.BytesIO()
    info = tarfile.TarInfo("graph.nnef")
    info.size = len(graph)
    raw.write(info.tobuf(format=tarfile.GNU_FORMAT) + graph + bytes(-len(graph) % 512))
    big = tarfile.TarInfo("junk.dat")
    big.size = 7 << 30
    raw.write(big.tobuf(format=tarfile.GNU_FORMAT) + bytes(1024))
    yield b"B" + raw.getvalue(), "a tar declaring an unreferenced 7 GiB member"


def desc_cases():
    base = {"tosa_file": "g.tosa", "ifm_name": ["input"], "ifm_file": ["in0.npy"], "ofm_name": ["output"],
            "expected_result_file": ["out0.npy"]}
    for key, value in (("ifm_name", "input"), ("ifm_file", [3]), ("meta", 5), ("expected_failure", "no"),
                       ("ifm_file", ["../../../etc/passwd"])):
        yield json.dumps({**base, key: value}).encode(), f"desc.json {key} = {value!r}"


def openvino_cases():
    from fuzz.targets import FIX

    xml = (FIX / "openvino" / "tflite_cnn_basic.xml").read_bytes()
    weights = (FIX / "openvino" / "tflite_cnn_basic.bin").read_bytes()
    bomb = b'<?xml version="1.0"?><!DOCTYPE n [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">' \
           b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]><net>&c;</net>'
    yield bomb + OpenVinoTarget.SEP + weights, "entity expansion"
    yield xml.replace(b'<layers>', b'<layers>' + b'<!--' * 1, 1) + OpenVinoTarget.SEP + weights, "broken XML"


CASES = {"npz": npz_cases, "npuprog": program_cases, "config": config_cases, "tosa": tosa_cases,
         "nnef": nnef_cases, "desc": desc_cases, "openvino": openvino_cases}


def main() -> None:
    for kind, cases in CASES.items():
        for data, why in cases():
            print(save(kind, data, f"hand-made: {why}", CORPUS))


if __name__ == "__main__":
    main()
