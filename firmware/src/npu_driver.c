/* Register-level control of the NPU: identification, start, status, interrupt, counters.
 *
 * Every register access goes through the device's transport (npu_transport.c), and every
 * failed access is returned to the caller: over a link (the UART bridge) a register read can
 * fail, and a value that was never read must not be acted on.
 */
#include "npu_driver.h"

#define TRY(expr) do { npu_status_t s_ = (expr); if (s_ != NPU_OK) return s_; } while (0)

static uint32_t mmio_read(void *ctx, uint32_t offset)
{
    return ((volatile uint32_t *)(uintptr_t)ctx)[offset / NPU_REG_BYTES];
}

static void mmio_write(void *ctx, uint32_t offset, uint32_t value)
{
    ((volatile uint32_t *)(uintptr_t)ctx)[offset / NPU_REG_BYTES] = value;
}

void npu_dev_init_mmio(npu_dev_t *dev, volatile void *regs, uint8_t *mem, size_t mem_size)
{
    dev->read32 = mmio_read;
    dev->write32 = mmio_write;
    dev->ctx = (void *)(uintptr_t)regs;
    dev->idle = 0;
    dev->cache_clean = 0;
    dev->cache_invalidate = 0;
    dev->mem = mem;
    dev->mem_size = mem_size;
    dev->transport = 0;
}

uint32_t npu_expected_hw_config(const npu_config_t *config)
{
    uint32_t value = 0;
#define NPU_HW_FIELD_(FIELD, member, lsb, width) { \
        uint64_t max_ = (1u << (width)) - 1u; \
        value |= (uint32_t)(config->member < max_ ? config->member : max_) << (lsb); \
    }
    NPU_FOR_EACH_HW_CONFIG_FIELD(NPU_HW_FIELD_)
#undef NPU_HW_FIELD_
    return value;
}

npu_status_t npu_check_hw(const npu_dev_t *dev, const npu_program_t *prog)
{
    uint32_t value;
    if (!dev || !prog)
        return NPU_E_ARG;
    TRY(npu_csr_read(dev, NPU_REG_HW_ID, &value));
    if (value != NPU_HW_ID_VALUE)
        return NPU_E_HW_ID;
    TRY(npu_csr_read(dev, NPU_REG_HW_CONFIG, &value));
    if (value != npu_expected_hw_config(&prog->config))
        return NPU_E_HW_CONFIG;
    return NPU_OK;
}

/* NPU_E_BUSY if STATUS reads BUSY, NPU_OK if not, or the transport's error. */
static npu_status_t check_idle(const npu_dev_t *dev)
{
    uint32_t status;
    TRY(npu_csr_read(dev, NPU_REG_STATUS, &status));
    return (status & NPU_STATUS_BUSY_MASK) ? NPU_E_BUSY : NPU_OK;
}

npu_status_t npu_set_watchdog(const npu_dev_t *dev, uint32_t max_cycles)
{
    if (!dev)
        return NPU_E_ARG;
    TRY(check_idle(dev));
    return npu_csr_write(dev, NPU_REG_MAX_CYCLES, max_cycles);
}

npu_status_t npu_start(const npu_dev_t *dev, const npu_program_t *prog, uint32_t flags)
{
    if (!dev || !prog)
        return NPU_E_ARG;
    TRY(check_idle(dev));
    TRY(npu_csr_write(dev, NPU_REG_IRQ_STATUS, NPU_IRQ_STATUS_PENDING_MASK));
    TRY(npu_csr_write(dev, NPU_REG_PROG_ADDR, prog->program_addr));
    TRY(npu_csr_write(dev, NPU_REG_PROG_LEN, prog->instructions));
    TRY(npu_csr_write(dev, NPU_REG_IRQ_ENABLE, (flags & NPU_START_IRQ) ? NPU_IRQ_ENABLE_STOP_MASK : 0u));
    /* The NPU reads the program, constants and inputs from memory: make them visible. */
    if (dev->cache_clean && dev->mem)
        dev->cache_clean(dev->ctx, dev->mem, (size_t)prog->extent);
    return npu_csr_write(dev, NPU_REG_CTRL, NPU_CTRL_START_MASK);
}

/* A 64-bit counter from LO/HI words, re-read if HI changed in between (counters only move
 * while the NPU runs, but the driver may be asked for them at any time). */
static npu_status_t read_counter(const npu_dev_t *dev, uint32_t lo_reg, uint32_t hi_reg, uint64_t *value)
{
    uint32_t hi, lo, hi2;
    TRY(npu_csr_read(dev, hi_reg, &hi));
    for (;;) {
        TRY(npu_csr_read(dev, lo_reg, &lo));
        TRY(npu_csr_read(dev, hi_reg, &hi2));
        if (hi2 == hi)
            break;
        hi = hi2;
    }
    *value = (uint64_t)hi << 32 | lo;
    return NPU_OK;
}

npu_status_t npu_read_result(const npu_dev_t *dev, npu_result_t *result)
{
    if (!dev || !result)
        return NPU_E_ARG;
    TRY(npu_csr_read(dev, NPU_REG_STATUS, &result->status));
    TRY(npu_csr_read(dev, NPU_REG_ERROR_CODE, &result->error_code));
    TRY(npu_csr_read(dev, NPU_REG_STOP_PC, &result->stop_pc));
    TRY(read_counter(dev, NPU_REG_CYCLES_LO, NPU_REG_CYCLES_HI, &result->cycles));
#define NPU_UNIT_READ_(i, name, lo, hi) TRY(read_counter(dev, lo, hi, &result->unit_busy[i]));
    NPU_FOR_EACH_UNIT_COUNTER(NPU_UNIT_READ_)
#undef NPU_UNIT_READ_
    return NPU_OK;
}

npu_status_t npu_poll(const npu_dev_t *dev, npu_result_t *result)
{
    uint32_t status;
    if (!dev || !result)
        return NPU_E_ARG;
    TRY(npu_csr_read(dev, NPU_REG_STATUS, &status));
    if (status & NPU_STATUS_BUSY_MASK)
        return NPU_RUNNING;
    if (!(status & (NPU_STATUS_DONE_MASK | NPU_STATUS_ERROR_MASK)))
        return NPU_E_STATE;
    TRY(npu_read_result(dev, result));
    return (result->status & NPU_STATUS_ERROR_MASK) ? NPU_E_NPU : NPU_OK;
}

npu_status_t npu_wait(const npu_dev_t *dev, uint32_t max_polls, npu_result_t *result)
{
    uint32_t polls = 0;
    for (;;) {
        npu_status_t s = npu_poll(dev, result);
        if (s != NPU_RUNNING)
            return s;
        if (max_polls && ++polls >= max_polls)
            return NPU_E_TIMEOUT;
        if (dev->idle)
            dev->idle(dev->ctx);
    }
}

int npu_irq_ack(const npu_dev_t *dev)
{
    uint32_t pending;
    npu_status_t s = npu_csr_read(dev, NPU_REG_IRQ_STATUS, &pending);
    if (s == NPU_OK && (pending & NPU_IRQ_STATUS_PENDING_MASK))
        s = npu_csr_write(dev, NPU_REG_IRQ_STATUS, NPU_IRQ_STATUS_PENDING_MASK);
    else if (s == NPU_OK)
        return 0;
    return s == NPU_OK ? 1 : (int)s;
}

npu_status_t npu_run(const npu_dev_t *dev, const npu_program_t *prog, uint32_t max_polls,
                     npu_result_t *result)
{
    npu_status_t s = npu_check_hw(dev, prog);
    if (s == NPU_OK)
        s = npu_start(dev, prog, 0);
    if (s == NPU_OK)
        s = npu_wait(dev, max_polls, result);
    return s;
}

const char *npu_status_name(npu_status_t status)
{
    switch (status) {
#define NPU_NAME_(s) case s: return #s;
    NPU_NAME_(NPU_OK) NPU_NAME_(NPU_RUNNING) NPU_NAME_(NPU_E_ARG) NPU_NAME_(NPU_E_MAGIC)
    NPU_NAME_(NPU_E_VERSION) NPU_NAME_(NPU_E_TRUNCATED) NPU_NAME_(NPU_E_HEADER)
    NPU_NAME_(NPU_E_LIMIT) NPU_NAME_(NPU_E_HW_ID) NPU_NAME_(NPU_E_HW_CONFIG)
    NPU_NAME_(NPU_E_MEMORY) NPU_NAME_(NPU_E_TENSOR) NPU_NAME_(NPU_E_BUSY)
    NPU_NAME_(NPU_E_TIMEOUT) NPU_NAME_(NPU_E_NPU) NPU_NAME_(NPU_E_STATE) NPU_NAME_(NPU_E_IO)
#undef NPU_NAME_
    }
    return "NPU_E_UNKNOWN";
}

const char *npu_hw_error_name(uint32_t error_code)
{
#define NPU_HW_ERROR_NAME_(code, name) if (error_code == (code)) return name;
    NPU_FOR_EACH_HW_ERROR(NPU_HW_ERROR_NAME_)
#undef NPU_HW_ERROR_NAME_
    return "UNKNOWN";
}

void npu_struct_sizes(size_t *program, size_t *dev, size_t *result)
{
    if (program) *program = sizeof(npu_program_t);
    if (dev) *dev = sizeof(npu_dev_t);
    if (result) *result = sizeof(npu_result_t);
}
