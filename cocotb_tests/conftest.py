"""RTL test fixtures: each Verilator model is built once per session (and cached on disk
under build/rtl/, see hw/harness/simulation.py), then many programs run on it."""
from __future__ import annotations

import pytest

from isa import DEFAULT_CONFIG, SMALL_CONFIG


def pytest_collection_modifyitems(items):
    for item in items:
        if "cocotb_tests" in str(item.fspath):
            item.add_marker(pytest.mark.rtl)


@pytest.fixture(scope="session")
def small_rtl():
    """Build directory of the 4x4 NPU (SMALL_CONFIG)."""
    from hw.harness.simulation import build

    return build(SMALL_CONFIG)


@pytest.fixture(scope="session")
def default_rtl():
    """Build directory of the 16x16 NPU (DEFAULT_CONFIG)."""
    from hw.harness.simulation import build

    return build(DEFAULT_CONFIG)
