"""The NPU on FPGA boards: the host bridge's protocol, and (in later modules) the UART
bridge, the board's external memory and the board top levels."""
