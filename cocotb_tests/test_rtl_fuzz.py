"""Random instruction streams (fuzz/targets.random_program: every opcode, random fields,
serialised by full wait masks) on the RTL in lockstep with the ISA simulator, the watchdog
on: whatever a stream does (illegal fields, out-of-range DMA, loops, branches), the RTL and
the simulator stop with the same code at the same instruction and cycle, with the same
memory and scratchpads (rtl_harness.lockstep).  The long campaigns run on the simulator
alone (`make fuzz`); this is the RTL's share."""
from __future__ import annotations

import numpy as np
import pytest

from isa import SMALL_CONFIG

from cocotb_tests import rtl_harness
from fuzz.targets import random_program


@pytest.mark.parametrize("seed", range(8))
def test_random_stream_lockstep(small_rtl, seed):
    instrs = random_program(1000 + seed, length=10, wide=False, wait=7)
    mem = bytearray(np.random.default_rng(seed).integers(0, 256, 16384, dtype=np.uint8).tobytes())
    rtl_harness.lockstep(small_rtl, SMALL_CONFIG, instrs, bytes(mem), expect=None, hazard_free=False,
                         max_cycles=5_000)
