/* Register-level control of the NPU: identification, start, status, interrupt, counters.
 *
 * Register access goes through NPU_REG_READ/NPU_REG_WRITE.  By default they call the hooks
 * of npu_dev_t; a bare-metal build can define them for direct MMIO instead, e.g.
 *   -D'NPU_REG_READ(dev,off)=(*(volatile uint32_t *)(0x40000000u + (off)))'
 *   -D'NPU_REG_WRITE(dev,off,v)=(*(volatile uint32_t *)(0x40000000u + (off)) = (v))'
 */
#include "npu_driver.h"

#ifndef NPU_REG_READ
#define NPU_REG_READ(dev, off) ((dev)->read32((dev)->ctx, (off)))
#endif
#ifndef NPU_REG_WRITE
#define NPU_REG_WRITE(dev, off, v) ((dev)->write32((dev)->ctx, (off), (v)))
#endif

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
    if (!dev || !prog)
        return NPU_E_ARG;
    if (NPU_REG_READ(dev, NPU_REG_HW_ID) != NPU_HW_ID_VALUE)
        return NPU_E_HW_ID;
    if (NPU_REG_READ(dev, NPU_REG_HW_CONFIG) != npu_expected_hw_config(&prog->config))
        return NPU_E_HW_CONFIG;
    return NPU_OK;
}

npu_status_t npu_set_watchdog(const npu_dev_t *dev, uint32_t max_cycles)
{
    if (!dev)
        return NPU_E_ARG;
    if (NPU_REG_READ(dev, NPU_REG_STATUS) & NPU_STATUS_BUSY_MASK)
        return NPU_E_BUSY;
    NPU_REG_WRITE(dev, NPU_REG_MAX_CYCLES, max_cycles);
    return NPU_OK;
}

npu_status_t npu_start(const npu_dev_t *dev, const npu_program_t *prog, uint32_t flags)
{
    if (!dev || !prog)
        return NPU_E_ARG;
    if (NPU_REG_READ(dev, NPU_REG_STATUS) & NPU_STATUS_BUSY_MASK)
        return NPU_E_BUSY;
    NPU_REG_WRITE(dev, NPU_REG_IRQ_STATUS, NPU_IRQ_STATUS_PENDING_MASK);
    NPU_REG_WRITE(dev, NPU_REG_PROG_ADDR, prog->program_addr);
    NPU_REG_WRITE(dev, NPU_REG_PROG_LEN, prog->instructions);
    NPU_REG_WRITE(dev, NPU_REG_IRQ_ENABLE, (flags & NPU_START_IRQ) ? NPU_IRQ_ENABLE_STOP_MASK : 0u);
    /* The NPU reads the program, constants and inputs from memory: make them visible. */
    if (dev->cache_clean && dev->mem)
        dev->cache_clean(dev->ctx, dev->mem, (size_t)prog->extent);
    NPU_REG_WRITE(dev, NPU_REG_CTRL, NPU_CTRL_START_MASK);
    return NPU_OK;
}

/* A 64-bit counter from LO/HI words, re-read if HI changed in between (counters only move
 * while the NPU runs, but the driver may be asked for them at any time). */
static uint64_t read_counter(const npu_dev_t *dev, uint32_t lo_reg, uint32_t hi_reg)
{
    uint32_t hi, lo, hi2;
    hi = NPU_REG_READ(dev, hi_reg);
    for (;;) {
        lo = NPU_REG_READ(dev, lo_reg);
        hi2 = NPU_REG_READ(dev, hi_reg);
        if (hi2 == hi)
            break;
        hi = hi2;
    }
    return (uint64_t)hi << 32 | lo;
}

void npu_read_result(const npu_dev_t *dev, npu_result_t *result)
{
    result->status = NPU_REG_READ(dev, NPU_REG_STATUS);
    result->error_code = NPU_REG_READ(dev, NPU_REG_ERROR_CODE);
    result->stop_pc = NPU_REG_READ(dev, NPU_REG_STOP_PC);
    result->cycles = read_counter(dev, NPU_REG_CYCLES_LO, NPU_REG_CYCLES_HI);
#define NPU_UNIT_READ_(i, name, lo, hi) result->unit_busy[i] = read_counter(dev, lo, hi);
    NPU_FOR_EACH_UNIT_COUNTER(NPU_UNIT_READ_)
#undef NPU_UNIT_READ_
}

npu_status_t npu_poll(const npu_dev_t *dev, npu_result_t *result)
{
    uint32_t status;
    if (!dev || !result)
        return NPU_E_ARG;
    status = NPU_REG_READ(dev, NPU_REG_STATUS);
    if (status & NPU_STATUS_BUSY_MASK)
        return NPU_RUNNING;
    if (!(status & (NPU_STATUS_DONE_MASK | NPU_STATUS_ERROR_MASK)))
        return NPU_E_STATE;
    npu_read_result(dev, result);
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
    if (!(NPU_REG_READ(dev, NPU_REG_IRQ_STATUS) & NPU_IRQ_STATUS_PENDING_MASK))
        return 0;
    NPU_REG_WRITE(dev, NPU_REG_IRQ_STATUS, NPU_IRQ_STATUS_PENDING_MASK);
    return 1;
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
    NPU_NAME_(NPU_E_TIMEOUT) NPU_NAME_(NPU_E_NPU) NPU_NAME_(NPU_E_STATE)
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
