// Simulation top level of the board core (hw/board/core.BoardCore, module `board_core`):
// only the pins a board has (clock, reset, the UART lines, the LEDs), made visible to cocotb.
// The host talks to it over the serial line, bit by bit, as a real host would.
module tb_board (
    input  logic clk      /*verilator public_flat_rw*/,
    input  logic rst      /*verilator public_flat_rw*/,
    input  logic uart_rx  /*verilator public_flat_rw*/,
    output logic uart_tx  /*verilator public_flat_rw*/,
    output logic stopped  /*verilator public_flat_rw*/,
    output logic irq      /*verilator public_flat_rw*/
);
    board_core dut (
        .clk(clk), .rst(rst), .uart_rx(uart_rx), .uart_tx(uart_tx), .stopped(stopped), .irq(irq)
    );
endmodule
