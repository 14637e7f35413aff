"""The NPU hardware in Amaranth 0.5, and its Verilator simulation harness.

top.Npu (the NPU) = sequencer.Sequencer (instruction fetch into a circular IMEM, loop.LoopStack for LOOP,
precheck.PreCheck as instructions enter IMEM and checker.InstrChecker as they leave it, in-order issue)
+ dma.Dma + mxu.Mxu (systolic array) + vpu.Vpu (ACT) + csr.CsrBlock (register map), around
the scratchpad memories; interfaces.py holds the bus signatures, decode.py the instruction
layouts derived from isa/instructions.py.  harness/ is the tooling around the RTL:
harness/simulation.py builds the Verilator model (cached under build/rtl/) and runs programs on
it (run_program); harness/tb/ holds the simulation top level (NPU + external memory model) and
its cocotb driver; harness/csr_header.py writes the firmware's generated headers.  The RTL
simulation-speed benchmark is bench/rtl_programs.py (it checks cycles against sim/, which
hw/ must not import).
The cycle-exact timing model of this RTL is sim/npu_timing.py.

hw/ imports isa only.
"""
