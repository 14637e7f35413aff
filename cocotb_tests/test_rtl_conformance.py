"""A handful of TOSA conformance tests (the corpus tools/make_conformance_corpus.py builds)
compiled by the NPU compiler and run on the RTL (``npu conformance --backend rtl``): one test
of every operator family, so every unit and mode the compiler uses runs on the hardware in
CI.  Each must pass bit-exactly against the official reference model's recorded results
(the whole corpus runs on the ISA simulator: tests/test_conformance.py)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from isa import DEFAULT_CONFIG
from npu import conformance

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from tool_modules import conformance_corpus  # noqa: E402

if importlib.util.find_spec("tosa_reference_model") is None:  # pragma: no cover
    pytest.skip("tosa-tools (a test extra) is not installed", allow_module_level=True)

# One positive test per operator family (the smallest of its folder): vector unit, table
# unit, MAC array in every mode (int4 weights too), pools, element and word DMA, reductions,
# control flow; int48 RESCALE input (split into ACC row pairs).
CHOSEN = (
    "add/add_61x30_i32_is", "select/select_0_b", "rescale/rescale_0_i16_outi8_sc0_rmS_pc0_iu1_ou0",
    "rescale/rescale_59x43_i48_outi32_sc0_rmS_pc0_iu0_ou0_seed7",
    "clamp/clamp_0_i16", "mul/mul_0_i16_perm0_shift0", "negate/negate_0_i32", "intdiv/intdiv_1_i32_si",
    "cast/cast_0_i8_outi16", "table/table_25_i8",
    "conv2d/conv2d_5x5_1x37x17x4_i8xi8_acci32_st11_pad0100_dilat21_lclbnd0",
    "conv2d/conv2d_5x5_1x11x51x38_i8xi4_acci32_st11_pad1101_dilat11_lclbnd0_seed7",
    "depthwise_conv2d/depthwise_conv2d_2x2_1x3x18x59_i8xi4_acci32_st12_pad0110_dilat12_lclbnd0_seed7",
    "conv3d/conv3d_2x1x1_1x10x15x14x47_i8xi4_acci32_st111_pad000000_dilat111_lclbnd0_is_s1",
    "transpose_conv2d/transpose_conv2d_1x3_1x1x16x28_i8xi8_acci32_st22_pad0111_os1x2x35x12_lclbnd0",
    "matmul/matmul_14x63x3_i16xi16_outi48",
    "max_pool2d/max_pool2d_1x7x10x34_i16_st21_kern33_pad1111",
    "avg_pool2d/avg_pool2d_1x46x35x1_i16_acci32_st21_kern22_pad1100",
    "resize/resize_1x1x31x55_i8_modeN_outi8_sc16x1x9x1_off0x0_bor0x7",
    "reduce_sum/reduce_sum_10_i32_axis0", "argmax/argmax_57_i8_outi32_axis0",
    "transpose/transpose_14_i8_perm0", "concat/concat_41_i16_axis0", "tile/tile_43_i8_perm0_is",
    "reverse/reverse_18_i8_axis0", "pad/pad_1_i8_pad01",
    "gather/gather_1x10x51_i8_idxi32", "scatter/scatter_1x59x56_i8_idxi32",
    "cond_if/cond_if_const_0_i16_cond1", "while_loop/while_loop_0_i8_iter4",
)


def test_conformance_sample_on_the_rtl(default_rtl):
    corpus = conformance_corpus()
    tests = [(name, corpus / name) for name in CHOSEN if (corpus / name).is_dir()]
    missing = [name for name in CHOSEN if not (corpus / name).is_dir()]
    assert not missing, f"not in the corpus: {missing}"
    results = conformance.run_tests(tests, "rtl", config=DEFAULT_CONFIG, progress=False)
    bad = [f"{r.name}: {r.verdict}: {r.reason}" for r in results if r.verdict != conformance.PASSED]
    assert not bad, "\n".join(bad)


FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "conformance" / "positive"


def test_full_listing_fixtures_on_the_rtl(default_rtl):
    """Positive tests kept from the full listing (tests/fixtures/conformance/positive/): an
    int16 BILINEAR RESIZE on three weight byte planes, in strips of columns."""
    tests = [(p.parent.name, p.parent) for p in sorted(FIXTURES.glob("*/desc.json"))]
    assert tests
    results = conformance.run_tests(tests, "rtl", config=DEFAULT_CONFIG, progress=False)
    bad = [f"{r.name}: {r.verdict}: {r.reason}" for r in results if r.verdict != conformance.PASSED]
    assert not bad, "\n".join(bad)
