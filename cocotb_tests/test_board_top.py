"""The board core (NPU + board memory + host bridge + UART) under Verilator, driven only
through its serial line by a bit-level host UART (cocotb_tests/board_bench.py).

``test_board_link``: PING, HW_ID, memory round trip, BAD_CRC, BAD_COMMAND, BAD_ADDRESS,
TIMEOUT and junk before a frame.  ``test_board_runs_compiled_model``: a compiled CONV2D ->
RESCALE -> CLAMP graph is written over the link, started and polled by CSR writes and reads,
and its outputs read back; they must equal the reference interpreter's bit for bit, and
CYCLES the ISA simulator's (the board memory keeps the simulation memory's timing).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from isa.config import SMALL_CONFIG
from hw.board.core import board_config
from hw.csr import bit

DIV = 8                 # UART cycles per bit: a byte is 80 cycles
MEM_BYTES = 64 * 1024
BENCH = "cocotb_tests.board_bench"


@pytest.fixture(scope="module")
def board_rtl():
    from hw.harness.board import build_board_core

    return build_board_core(SMALL_CONFIG, MEM_BYTES, DIV)


def _env(**extra) -> dict[str, str]:
    return {"BOARD_DIV": str(DIV), "BOARD_MEM_BYTES": str(MEM_BYTES), "COCOTB_RESOLVE_X": "ZEROS", **extra}


def test_board_link(board_rtl, tmp_path):
    from hw.harness.board import run_board_test

    run_board_test(board_rtl, BENCH, _env(), tmp_path, testcase="link")


def test_board_runs_compiled_model(board_rtl, tmp_path):
    from compiler.driver import compile_graph
    from hw.harness.board import run_board_test
    from sim.isa.sim import IsaSim
    from sim.reference import run_graph
    from tests.compiler_graphs import ConvSpec, build_chain

    config = board_config(SMALL_CONFIG, MEM_BYTES)
    rng = np.random.default_rng(11)
    graph = build_chain(rng, (1, 6, 6, 8), [ConvSpec(oc=8)])
    program = compile_graph(graph, config)
    inputs = {"x": rng.integers(-128, 128, (1, 6, 6, 8), dtype=np.int8)}
    image = bytes(program.memory_image(inputs))
    assert len(image) <= MEM_BYTES
    isa = IsaSim(config).run(program, image)
    assert isa.error_code == 0

    (tmp_path / "image.bin").write_bytes(image)
    outputs = [(b.addr, b.nbytes(config.bus_bytes)) for b in program.outputs]
    plan = {"image": str(tmp_path / "image.bin"), "prog_addr": program.program_addr,
            "prog_len": len(program.instructions), "outputs": outputs,
            "watchdog": 4 * isa.cycles + 10_000, "max_polls": 4 * isa.cycles // 1000 + 100}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    run_board_test(board_rtl, BENCH, _env(BOARD_PLAN=str(tmp_path / "plan.json"),
                                          BOARD_RESULT=str(tmp_path / "result.json")),
                   tmp_path, testcase="run_model")
    result = json.loads((tmp_path / "result.json").read_text())

    regs = result["registers"]
    assert regs["STATUS"] & bit("STATUS", "DONE") and not regs["STATUS"] & bit("STATUS", "ERROR"), regs
    assert regs["ERROR_CODE"] == 0 and result["irq"] == 1 and result["stopped"] == 1
    assert regs["CYCLES_LO"] | regs["CYCLES_HI"] << 32 == isa.cycles
    memory = bytearray(max(a + n for a, n in outputs))
    for (addr, n), data in zip(outputs, result["outputs"]):
        memory[addr:addr + n] = bytes.fromhex(data)
    got = program.read_outputs(memory)
    for name, want in run_graph(graph, inputs).items():
        np.testing.assert_array_equal(got[name], want)
