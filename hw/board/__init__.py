"""The NPU on FPGA boards (docs/fpga.md): the host bridge's wire protocol (protocol.py), the
UART (uart.py), the bridge (bridge.py), the board memory (extmem.py), the pinless cores that
simulate (core.py), the board top levels with their PLLs (top.py) and the bitstream flow
(build.py, ``python -m hw.board build``)."""
