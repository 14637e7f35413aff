"""Compiler end to end against the official TOSA reference model.

Graphs are built with the official serializer (tests/oracle.py), run by the official
reference model for the expected values, read back by our .tosa frontend, compiled and run
on the ISA simulator.  This ties the frontend, the fusion of the 1.0 operator forms and
the whole pipeline to the spec's own implementation.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
oracle = pytest.importorskip("oracle")

from isa.config import DEFAULT_CONFIG, SMALL_CONFIG  # noqa: E402
from compiler.driver import compile_file  # noqa: E402
from sim.isa.sim import run_program  # noqa: E402


def conv_chain_builder(rng, in_shape, layers):
    """CONV2D -> RESCALE [-> CLAMP] per layer, as the official serializer writes them."""
    b = oracle.GraphBuilder()
    x = b.input(in_shape, "int8")
    cur, shape = x, tuple(in_shape)
    for i, (oc, (kh, kw), stride, dilation, pad, rounding, clamp) in enumerate(layers):
        n, ih, iw, ic = shape
        oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
        ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
        w = b.const(rng.integers(-128, 128, (oc, kh, kw, ic)), "int8")
        bias = b.const(rng.integers(-30000, 30000, (oc,)), "int32")
        izp = b.const([int(rng.integers(-128, 128))], "int8")
        wzp = b.const([int(rng.integers(-128, 128))], "int8")
        acc = b.intermediate((n, oh, ow, oc), "int32")
        b.op("CONV2D", [cur, w, bias, izp, wzp], [acc], pad=list(pad), stride=list(stride),
             dilation=list(dilation), acc_type="int32")
        mul = b.const(rng.integers(1 << 30, 1 << 31, (oc,)), "int32")
        shift = b.const(rng.integers(38, 42, (oc,)), "int8")
        rizp = b.const([0], "int32")
        rozp = b.const([int(rng.integers(-128, 128))], "int8")
        last = i == len(layers) - 1
        mk = b.output if last and clamp is None else b.intermediate
        res = mk((n, oh, ow, oc), "int8")
        b.op("RESCALE", [acc, mul, shift, rizp, rozp], [res], scale32=True, rounding_mode=rounding,
             per_channel=True, input_unsigned=False, output_unsigned=False)
        cur = res
        if clamp is not None:
            out = (b.output if last else b.intermediate)((n, oh, ow, oc), "int8")
            b.op("CLAMP", [res], [out], min_val=oracle.clamp_bytes(clamp[0], "int8"),
                 max_val=oracle.clamp_bytes(clamp[1], "int8"))
            cur = out
        shape = (n, oh, ow, oc)
    return b, x


CASES = {
    "single layer, small": (SMALL_CONFIG, (1, 9, 7, 5),
                            [(6, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "SINGLE_ROUND", (-100, 100))]),
    "strided dilated, default": (DEFAULT_CONFIG, (2, 20, 17, 19),
                                 [(21, (3, 2), (2, 1), (1, 2), (1, 0, 0, 2), "DOUBLE_ROUND", None)]),
    "two layers, small": (SMALL_CONFIG, (1, 8, 8, 3),
                          [(5, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "DOUBLE_ROUND", (0, 127)),
                           (4, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), "SINGLE_ROUND", None)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_official_reference_model(case, tmp_path):
    config, in_shape, layers = CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    builder, x_name = conv_chain_builder(rng, in_shape, layers)
    x = rng.integers(-128, 128, in_shape, dtype=np.int8)
    ref = oracle.run_reference(builder, {x_name: x})
    assert ref.status == "VALID", ref.log
    path = tmp_path / "model.tosa"
    path.write_bytes(ref.tosa)
    program = compile_file(path, config)
    outputs, result = run_program(program, {x_name: x})
    for name in builder.outputs:
        np.testing.assert_array_equal(outputs[name], ref.outputs[name])
