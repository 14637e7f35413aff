/* The transport layer: the memory-mapped transport, and the four calls through which the
 * rest of the driver reaches a device (npu_csr_read, npu_csr_write, npu_mem_read,
 * npu_mem_write).
 *
 * The memory-mapped transport reaches registers through NPU_REG_READ/NPU_REG_WRITE.  By
 * default they call the hooks of npu_dev_t; a bare-metal build can define them for direct
 * MMIO instead, e.g.
 *   -D'NPU_REG_READ(dev,off)=(*(volatile uint32_t *)(0x40000000u + (off)))'
 *   -D'NPU_REG_WRITE(dev,off,v)=(*(volatile uint32_t *)(0x40000000u + (off)) = (v))'
 * A device whose transport is NULL calls the memory-mapped functions directly, so with
 * those macros a register access compiles to one load or store.
 */
#include <string.h>

#include "npu_driver.h"

#ifndef NPU_REG_READ
#define NPU_REG_READ(dev, off) ((dev)->read32((dev)->ctx, (off)))
#endif
#ifndef NPU_REG_WRITE
#define NPU_REG_WRITE(dev, off, v) ((dev)->write32((dev)->ctx, (off), (v)))
#endif

static npu_status_t mmio_csr_read(const npu_dev_t *dev, uint32_t offset, uint32_t *value)
{
    *value = NPU_REG_READ(dev, offset);
    return NPU_OK;
}

static npu_status_t mmio_csr_write(const npu_dev_t *dev, uint32_t offset, uint32_t value)
{
    NPU_REG_WRITE(dev, offset, value);
    return NPU_OK;
}

/* [addr, addr + bytes) inside the window dev->mem[0, mem_size)? */
static npu_status_t mmio_window(const npu_dev_t *dev, uint32_t addr, size_t bytes)
{
    if (!dev->mem)
        return NPU_E_ARG;
    if (addr > dev->mem_size || bytes > dev->mem_size - addr)
        return NPU_E_MEMORY;
    return NPU_OK;
}

static npu_status_t mmio_mem_read(const npu_dev_t *dev, uint32_t addr, void *data, size_t bytes)
{
    npu_status_t s = mmio_window(dev, addr, bytes);
    if (s == NPU_OK && bytes)
        memcpy(data, dev->mem + addr, bytes);
    return s;
}

static npu_status_t mmio_mem_write(const npu_dev_t *dev, uint32_t addr, const void *data, size_t bytes)
{
    npu_status_t s = mmio_window(dev, addr, bytes);
    if (s == NPU_OK && bytes)
        memcpy(dev->mem + addr, data, bytes);
    return s;
}

const npu_transport_t npu_mmio_transport = {
    "memory-mapped", mmio_csr_read, mmio_csr_write, mmio_mem_read, mmio_mem_write
};

/* The transport of `dev`, NULL for the memory-mapped one (called directly below). */
#define CUSTOM_TRANSPORT(dev) ((dev)->transport && (dev)->transport != &npu_mmio_transport)

npu_status_t npu_csr_read(const npu_dev_t *dev, uint32_t offset, uint32_t *value)
{
    if (!dev || !value)
        return NPU_E_ARG;
    if (CUSTOM_TRANSPORT(dev))
        return dev->transport->csr_read(dev, offset, value);
    return mmio_csr_read(dev, offset, value);
}

npu_status_t npu_csr_write(const npu_dev_t *dev, uint32_t offset, uint32_t value)
{
    if (!dev)
        return NPU_E_ARG;
    if (CUSTOM_TRANSPORT(dev))
        return dev->transport->csr_write(dev, offset, value);
    return mmio_csr_write(dev, offset, value);
}

npu_status_t npu_mem_read(const npu_dev_t *dev, uint32_t addr, void *data, size_t bytes)
{
    if (!dev || (!data && bytes))
        return NPU_E_ARG;
    if (CUSTOM_TRANSPORT(dev))
        return dev->transport->mem_read(dev, addr, data, bytes);
    return mmio_mem_read(dev, addr, data, bytes);
}

npu_status_t npu_mem_write(const npu_dev_t *dev, uint32_t addr, const void *data, size_t bytes)
{
    if (!dev || (!data && bytes))
        return NPU_E_ARG;
    if (CUSTOM_TRANSPORT(dev))
        return dev->transport->mem_write(dev, addr, data, bytes);
    return mmio_mem_write(dev, addr, data, bytes);
}
