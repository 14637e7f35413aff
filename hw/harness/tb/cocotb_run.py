"""cocotb test module that runs one program on tb_top (used by hw/simulation.run_program).

The testbench only drives reset, writes the CSRs that start the program, and then sleeps
until the memory model has dumped memory after the NPU stopped: no per-cycle Python, and no
per-cycle VPI either, since tb_top generates its own clock (hw/harness/tb/tb_top.sv), and
while the program runs the testbench sets tb_top's `fast_forward` so that the simulator's main
loop steps time without servicing VPI at all (hw/harness/tb/verilator_main.cpp).
Settings come from the environment (set by run_program):

NPU_PROG_ADDR, NPU_PROG_LEN   program location
NPU_RESULT                    JSON file to write the CSR values into
NPU_MAX_CYCLES                give up after this many cycles (the test fails)
NPU_WATCHDOG                  value for the MAX_CYCLES register (0: watchdog off)
NPU_PROGRESS                  log the cycle count every this many cycles (0: never)
"""
from __future__ import annotations

import json
import os
import time

import cocotb
from cocotb.triggers import First, FallingEdge, ReadOnly, RisingEdge, Timer

from hw.csr import REGISTERS, bit, word_index

PERIOD = 2   # simulator steps per clock cycle (tb_top's clock)


async def csr_write(dut, name: str, value: int) -> None:
    await FallingEdge(dut.clk)
    dut.csr_addr.value = word_index(name)
    dut.csr_w_data.value = value
    dut.csr_w_stb.value = 1
    await FallingEdge(dut.clk)
    dut.csr_w_stb.value = 0


async def csr_read(dut, name: str) -> int:
    await FallingEdge(dut.clk)
    dut.csr_addr.value = word_index(name)
    await RisingEdge(dut.clk)
    await ReadOnly()
    return int(dut.csr_r_data.value)


async def _progress(dut, every: int) -> None:
    cycles = 0
    while True:
        await Timer(every * PERIOD, unit="step")
        cycles += every
        dut._log.info("%d cycles", cycles)


@cocotb.test()
async def run_program(dut):
    prog_addr = int(os.environ["NPU_PROG_ADDR"])
    prog_len = int(os.environ["NPU_PROG_LEN"])
    max_cycles = int(os.environ.get("NPU_MAX_CYCLES", "0")) or 1 << 40
    progress = int(os.environ.get("NPU_PROGRESS", "0"))

    dut.csr_w_stb.value = 0
    dut.csr_addr.value = 0
    dut.csr_w_data.value = 0
    dut.fast_forward.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0

    await csr_write(dut, "PROG_ADDR", prog_addr)
    await csr_write(dut, "PROG_LEN", prog_len)
    await csr_write(dut, "IRQ_ENABLE", bit("IRQ_ENABLE", "STOP"))
    await csr_write(dut, "MAX_CYCLES", int(os.environ.get("NPU_WATCHDOG", "0")))
    wall = time.perf_counter()
    await csr_write(dut, "CTRL", bit("CTRL", "START"))
    if progress:
        cocotb.start_soon(_progress(dut, progress))
    timeout = Timer(max_cycles * PERIOD, unit="step")
    # nothing but `stopped`, `dumped` and timers awaited from here: the simulator may step
    # time without VPI (hw/harness/tb/verilator_main.cpp); cleared before any other await
    dut.fast_forward.value = 1
    if not int(dut.stopped.value) and not int(dut.dumped.value):
        fired = await First(RisingEdge(dut.stopped), timeout)
        assert fired is not timeout, f"the NPU did not stop within {max_cycles} cycles"
    # the simulation's time: the memory dump that follows (the cycle after the stop; for a
    # large model tens of megabytes of hex) is the harness's I/O, like the load before it
    wall = time.perf_counter() - wall
    if not int(dut.dumped.value):
        await RisingEdge(dut.dumped)
    dut.fast_forward.value = 0

    await ReadOnly()
    irq = int(dut.irq.value)
    values = {}
    for reg in REGISTERS:
        if "r" in reg.access:
            values[reg.name] = await csr_read(dut, reg.name)
    result = {"registers": values, "irq": irq, "wall_seconds": wall,
              "written_words": int(dut.written_words.value)}
    with open(os.environ["NPU_RESULT"], "w") as f:
        json.dump(result, f)
