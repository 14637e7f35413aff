"""fp8 tensors in .tosa files (tosa_ir/_fb/tensor_data.py): read and written so that graphs
using them can be checked, e.g. a COND_IF whose condition is an fp8 constant, which the
official reference model rejects (ERROR_IF: the condition is not bool) and which the
reader used to refuse as unsupported.

Oracle for the encodings: ml_dtypes (float8_e4m3fn, float8_e5m2; the OCP formats), which
the official TOSA tools depend on.
"""
from __future__ import annotations

import numpy as np
import pytest

from tosa_ir._fb import tensor_data

ml_dtypes = pytest.importorskip("ml_dtypes")

FORMATS = {"fp8e4m3": ml_dtypes.float8_e4m3fn, "fp8e5m2": ml_dtypes.float8_e5m2}


@pytest.mark.parametrize("dtype", sorted(FORMATS))
def test_every_code_decodes_as_ml_dtypes(dtype):
    codes = np.arange(256, dtype=np.uint8)
    ours = tensor_data.decode(dtype, codes.tobytes(), 256)
    theirs = codes.view(FORMATS[dtype]).astype(np.float32)
    assert ours.dtype == np.float32
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    finite = ~np.isnan(theirs)
    assert np.array_equal(ours[finite], theirs[finite])
    assert np.array_equal(np.signbit(ours[finite]), np.signbit(theirs[finite]))      # -0.0 kept


@pytest.mark.parametrize("dtype", sorted(FORMATS))
def test_encode_round_trips_every_value(dtype):
    codes = np.arange(256, dtype=np.uint8)
    values = codes.view(FORMATS[dtype]).astype(np.float32)
    finite = ~np.isnan(values)
    assert tensor_data.encode(dtype, values[finite]) == codes[finite].tobytes()
    assert tensor_data.nbytes(dtype, 7) == 7
    with pytest.raises(ValueError, match="not exactly representable"):
        tensor_data.encode(dtype, np.array([0.1], dtype=np.float32))
    nans = tensor_data.encode(dtype, np.array([np.nan, -np.nan], dtype=np.float32))
    assert np.isnan(np.frombuffer(nans, np.uint8).view(FORMATS[dtype]).astype(np.float32)).all()


def test_malformed_fp8_constant_is_one_line_invalid_input():
    """Bad input: an fp8 constant whose data is shorter than its shape needs (one byte a
    value) is malformed, reported in one line naming the file, like any other type's."""
    from test_tosa_fb import _expect_invalid, _raw_bytes, _raw_graph

    _expect_invalid(_raw_bytes(_raw_graph(type=11, data=bytes(3))), "3 bytes of data, but shape")


def test_cond_if_with_fp8_condition_is_rejected_not_unsupported(tmp_path):
    """A COND_IF test from the generated corpus (tests/fixtures/conformance) with its bool
    condition turned into an fp8e4m3 constant: before, reading it raised Unsupported
    ("element type FP8E4M3 is not supported"); now the reference interpreter and the
    compiler's ERROR_IF check reject it for its condition type, as the official model does."""
    import shutil
    from pathlib import Path

    from isa.config import DEFAULT_CONFIG
    from npu import conformance
    from tosa_ir.tosa_fb import read_tosa, write_tosa

    source = (Path(__file__).parent / "fixtures" / "conformance"
              / "cond_if_binary_ERRORIF_CondIfInputListElseGraphMismatch_2x1_i16_cond0_seed7")
    folder = tmp_path / "cond_if_fp8_condition"
    shutil.copytree(source, folder)
    graph = read_tosa(folder / "test.tosa")
    main = graph.regions[0].blocks[0]
    cond_if = next(op for op in main.operators if op.op == "COND_IF")
    cond = main.tensors[cond_if.inputs[0]]
    # the else graph's mismatch stays; the condition check comes first in the spec's
    # COND_IF pseudocode, so the condition type is what is reported
    cond.dtype = "fp8e4m3"
    if cond.data is not None:
        cond.data = np.ones(cond.data.shape, dtype=np.float32)
    (folder / "test.tosa").write_bytes(write_tosa(graph))
    assert read_tosa(folder / "test.tosa").regions[0].blocks[0].tensors[cond.name].dtype == "fp8e4m3"
    for backend in ("ref", "isa"):
        result = conformance.run_test(folder.name, folder, backend, config=DEFAULT_CONFIG)
        assert result.verdict == conformance.PASSED, (backend, result.reason)
        assert result.reason.startswith("rejected: ") and "condition type != bool_t" in result.reason
