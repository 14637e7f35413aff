// Simulation top level: the Amaranth-generated NPU (module `npu`) plus a model of external
// memory, so that whole programs run with the cocotb testbench idle.
//
// Clock and reset, and why (simulation speed, see hw/harness/simulation.py):
//   `clk` is generated here (one cycle = 2 time steps; the model is built with --timing), not
//   by cocotb: a clock driven through VPI costs a callback and a value write per edge, about
//   a quarter of the run time of a 16x16 NPU.  The testbench follows it with edge triggers.
//   `rst` reaches the NPU through one register (rst_q): Amaranth's reset term is in every
//   register's next-state logic, and a top-level input in that logic makes Verilator evaluate
//   all of it again ("ico" region) at every time step.  The NPU is thus in reset from the
//   rising edge after `rst` rises until the rising edge after it falls; the testbench writes
//   no CSR before then.
//
// External memory: MEM_WORDS words of BUS_BYTES bytes, always ready, one request per cycle,
// posted writes of the bytes enabled in req_be, read data exactly LATENCY cycles after the request (the contract of
// hw/interfaces.ExtBusSignature).  Plusargs:
//   +MEM_WORDS=<n>    words loaded at time 0 and dumped at the end (default 0: none)
//   +MEM_IN=<file>    $readmemh image of words 0 .. n-1 (one word per line, hex, MSB first)
//   +MEM_OUT=<file>   $writememh of words 0 .. n-1 when the NPU stops; then `dumped` rises
//   +SRAM_DUMP=<pfx>  also dump the scratchpads to <pfx>{asram,wsram,acc,psram}.hex (tests);
//                     this names the memories of hw/top.py (Amaranth keeps their names)
// `written_words` is one past the highest word the NPU wrote (0: none), so the harness
// returns memory up to the last byte written, like the ISA simulator.
// `fast_forward` drives no logic: the testbench sets it while it only awaits `dumped`, and
// the simulator's main loop then steps time without VPI (hw/harness/tb/verilator_main.cpp).
module tb_top #(
    parameter int BUS_BYTES = 16,
    parameter int ADDR_BITS = 32,
    parameter int MEM_WORDS = 1024,
    parameter int LATENCY = 4,
    parameter int CSR_ADDR_BITS = 6
) (
    output logic                     clk        /*verilator public_flat_rw*/,
    input  logic                     rst        /*verilator public_flat_rw*/,
    input  logic [CSR_ADDR_BITS-1:0] csr_addr   /*verilator public_flat_rw*/,
    input  logic                     csr_w_stb  /*verilator public_flat_rw*/,
    input  logic [31:0]              csr_w_data /*verilator public_flat_rw*/,
    output logic [31:0]              csr_r_data /*verilator public_flat_rw*/,
    output logic                     irq        /*verilator public_flat_rw*/,
    output logic                     stopped    /*verilator public_flat_rw*/,
    output logic                     dumped     /*verilator public_flat_rw*/,
    output logic [ADDR_BITS-1:0]     written_words /*verilator public_flat_rw*/,
    // read by the simulator's main loop only (hw/harness/tb/verilator_main.cpp): 1 while
    // the testbench awaits nothing but `dumped` and timers
    /* verilator lint_off UNUSEDSIGNAL */
    input  logic                     fast_forward /*verilator public_flat_rw*/
    /* verilator lint_on UNUSEDSIGNAL */
);
    localparam int BW = 8 * BUS_BYTES;
    localparam int SH = $clog2(BUS_BYTES);

    initial clk = 1'b0;
    always #1 clk = ~clk;

    logic rst_q = 1'b1;
    always_ff @(posedge clk) rst_q <= rst;

    logic                 req_valid, req_ready, req_we, resp_valid;
    logic [ADDR_BITS-1:0] req_addr;
    logic [BW-1:0]        req_wdata, resp_rdata;
    logic [BUS_BYTES-1:0] req_be;

    npu dut (
        .clk(clk), .rst(rst_q),
        .csr__addr(csr_addr), .csr__w_stb(csr_w_stb), .csr__w_data(csr_w_data),
        .csr__r_data(csr_r_data),
        .bus__req_valid(req_valid), .bus__req_ready(req_ready), .bus__req_addr(req_addr),
        .bus__req_we(req_we), .bus__req_wdata(req_wdata), .bus__req_be(req_be),
        .bus__resp_valid(resp_valid), .bus__resp_rdata(resp_rdata),
        .irq(irq), .stopped(stopped)
    );

    logic [BW-1:0] mem [0:MEM_WORDS-1];
    logic [BW-1:0] rdata_pipe [0:LATENCY-1];
    logic          valid_pipe [0:LATENCY-1];
    int unsigned   nwords;
    string         mem_in, mem_out, sram_dump;

    initial begin
        dumped = 1'b0;
        written_words = '0;
        for (int i = 0; i < LATENCY; i++) valid_pipe[i] = 1'b0;
        if (!$value$plusargs("MEM_WORDS=%d", nwords)) nwords = 0;
        if (!$value$plusargs("MEM_OUT=%s", mem_out)) mem_out = "";
        if (!$value$plusargs("SRAM_DUMP=%s", sram_dump)) sram_dump = "";
        if ($value$plusargs("MEM_IN=%s", mem_in) && nwords > 0) $readmemh(mem_in, mem, 0, nwords - 1);
    end

    assign req_ready = 1'b1;
    wire [ADDR_BITS-SH-1:0] word = req_addr[ADDR_BITS-1:SH];

    always_ff @(posedge clk) begin
        if (req_valid && req_we) begin
            for (int b = 0; b < BUS_BYTES; b++)
                if (req_be[b]) mem[word][8*b +: 8] <= req_wdata[8*b +: 8];
            if ({{SH{1'b0}}, word} >= written_words) written_words <= {{SH{1'b0}}, word} + 1'b1;
        end
        valid_pipe[0] <= req_valid && !req_we;
        rdata_pipe[0] <= mem[word];
        for (int i = 1; i < LATENCY; i++) begin
            valid_pipe[i] <= valid_pipe[i - 1];
            rdata_pipe[i] <= rdata_pipe[i - 1];
        end
    end
    assign resp_valid = valid_pipe[LATENCY - 1];
    assign resp_rdata = rdata_pipe[LATENCY - 1];

    always_ff @(posedge clk) begin
        if (stopped && !dumped) begin
            if (mem_out != "" && nwords > 0) $writememh(mem_out, mem, 0, nwords - 1);
            if (sram_dump != "") begin
                $writememh({sram_dump, "asram.hex"}, dut.asram);
                $writememh({sram_dump, "wsram.hex"}, dut.wsram);
                $writememh({sram_dump, "acc.hex"}, dut.acc);
                $writememh({sram_dump, "psram.hex"}, dut.psram);
            end
            dumped <= 1'b1;
        end
    end
endmodule
