// Simulator main loop of the NPU's Verilator model under cocotb (built in place of cocotb's
// share/lib/verilator/verilator.cpp by hw/harness/simulation.py).
//
// Adapted from cocotb's verilator.cpp (Copyright cocotb contributors, BSD-3-Clause): the same
// scheduling of VPI callbacks around each time step, plus a fast-forward loop.
//
// Why: cocotb's loop services VPI at every time step (value-change callbacks three or four
// times, the ReadWrite/ReadOnly/NextSimTime callback lists, the next deadline), about 15% of
// a 16x16 NPU's run time (PERFORMANCE.md, "RTL simulation speed"), although while a program
// runs the testbench awaits nothing but tb_top's `stopped` or `dumped` (and its own timeout
// and progress timers).  The testbench says so by setting tb_top's `fast_forward` input;
// while it is set, this loop evaluates time step after time step with no VPI work at all,
// and returns to the full loop as soon as `stopped` or `dumped` changes, the next cocotb
// timer is due, or the model has no more events.  The full loop then evaluates the same time
// step again (nothing is pending, so nothing changes) and runs the value-change callbacks,
// which see the new value: cocotb observes exactly the edges and times it would have
// without the fast path.
//
// The contract: set `fast_forward` only while awaiting `stopped`, `dumped` and timers.  An
// await on any other signal's edge, or ReadWrite/ReadOnly, would be served late (at the next
// return to the full loop), so clear it first.

#include <stdio.h>

#include <memory>
#include <string>

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"

#ifndef VM_TRACE_FST
#define VM_TRACE_FST 0
#endif

#if VM_TRACE
#if VM_TRACE_FST
#include <verilated_fst_c.h>
using verilated_trace_t = VerilatedFstC;
#else
#include <verilated_vcd_c.h>
using verilated_trace_t = VerilatedVcdC;
#endif
static verilated_trace_t *tfp;
#endif

static vluint64_t main_time = 0;

double sc_time_stamp() { return main_time; }

extern "C" {
void vlog_startup_routines_bootstrap(void);
}

static const vluint64_t NO_EVENTS = static_cast<vluint64_t>(~0ULL);

static inline void settle_value_callbacks() {
    while (VerilatedVpi::callValueCbs()) {
    }
}

static void wrap_up() {
    VerilatedVpi::callCbs(cbEndOfSimulation);
#if VM_TRACE
    if (tfp) tfp->close();
#endif
}

// Time steps without VPI, while the testbench asked for it (see the file's comment); returns
// whether it evaluated any.
static bool fast_forward(Vtop *top) {
    const auto dumped = top->dumped;
    const auto stopped = top->stopped;
    const vluint64_t deadline = VerilatedVpi::cbNextDeadline();
    bool stepped = false;
    while (top->fast_forward && top->dumped == dumped && top->stopped == stopped
           && !Verilated::gotFinish()) {
        if (!top->eventsPending()) break;
        const vluint64_t next = top->nextTimeSlot();
        if (next >= deadline) break;
        stepped = true;
        main_time = next;
        top->eval_step();
        top->eval_end_step();
#if VM_TRACE
        if (tfp) tfp->dump(main_time);
#endif
    }
    return stepped;
}

int main(int argc, char **argv) {
    bool trace_on = false;
    for (int i = 1; i < argc; i++)
        if (std::string(argv[i]) == "--trace") trace_on = true;
    (void)trace_on;

    Verilated::commandArgs(argc, argv);
    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);

#if VM_TRACE
    Verilated::traceEverOn(true);
    if (trace_on) {
        tfp = new verilated_trace_t;
        top->trace(tfp, 99);
#if VM_TRACE_FST
        tfp->open("dump.fst");
#else
        tfp->open("dump.vcd");
#endif
    }
#endif

    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void *) { wrap_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle_value_callbacks();

    while (!Verilated::gotFinish()) {
        do {
            do {
                top->eval_step();
                VerilatedVpi::clearEvalNeeded();
                VerilatedVpi::doInertialPuts();
                settle_value_callbacks();
            } while (VerilatedVpi::evalNeeded());
            VerilatedVpi::callCbs(cbReadWriteSynch);
            VerilatedVpi::doInertialPuts();
            settle_value_callbacks();
        } while (VerilatedVpi::evalNeeded());

        top->eval_end_step();
        VerilatedVpi::callCbs(cbReadOnlySynch);
#if VM_TRACE
        if (tfp) tfp->dump(main_time);
#endif

        if (top->fast_forward && fast_forward(top.get())) {
            if (Verilated::gotFinish()) break;
            // back to the full loop at the time step fast_forward evaluated last: evaluate it
            // again (no event is pending there) and let the callbacks see what changed
            continue;
        }

        const vluint64_t next_cocotb = VerilatedVpi::cbNextDeadline();
        const vluint64_t next_timing = top->eventsPending() ? top->nextTimeSlot() : NO_EVENTS;
        const vluint64_t next = std::min(next_cocotb, next_timing);
        if (next == NO_EVENTS) break;
        main_time = next;

        VerilatedVpi::callCbs(cbNextSimTime);
        settle_value_callbacks();
        VerilatedVpi::callTimedCbs();
        settle_value_callbacks();
    }

    top->final();
    wrap_up();
#if VM_TRACE
    if (tfp) {
        delete tfp;
        tfp = nullptr;
    }
#endif
    return Verilated::threadContextp()->errorCount() > 0 ? 1 : 0;
}
