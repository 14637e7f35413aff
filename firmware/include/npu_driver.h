/* Portable host driver for the NPU: program images, external memory, registers, runs.
 *
 * C99, no operating system: the only dependencies are <stdint.h>, <stddef.h> and <string.h>,
 * no dynamic allocation.  Every register and external-memory access goes through a
 * transport (npu_transport_t): the memory-mapped one (register hooks or the
 * NPU_REG_READ/NPU_REG_WRITE macros, and the CPU's view of the NPU's external memory) is
 * built in; the UART bridge transport is npu_uart.h.  See firmware/README.md for the run
 * sequence.
 *
 * Program images (.npuprog, isa/program.py) are parsed in place: the driver reads the JSON
 * header with a purpose-built scanner and keeps pointers into the image, which must stay
 * valid while the npu_program_t is used.
 */
#ifndef NPU_DRIVER_H
#define NPU_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "npu_image.h"
#include "npu_regs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compile-time limits (no allocation): override with -D.  Images beyond them are refused
 * with NPU_E_LIMIT, never truncated. */
#ifndef NPU_MAX_SEGMENTS
#define NPU_MAX_SEGMENTS 64     /* segments, the instruction stream included */
#endif
#ifndef NPU_MAX_TENSORS
#define NPU_MAX_TENSORS 16      /* inputs, and separately outputs */
#endif
#ifndef NPU_MAX_RANK
#define NPU_MAX_RANK 8
#endif
#ifndef NPU_NAME_MAX
#define NPU_NAME_MAX 128        /* bytes of a UTF-8 name, terminating NUL included */
#endif

/* Results of driver calls.  Negative values are errors. */
typedef enum npu_status {
    NPU_OK = 0,
    NPU_RUNNING = 1,        /* npu_poll: the NPU has not stopped yet */
    NPU_E_ARG = -1,         /* bad argument (NULL pointer, index out of range) */
    NPU_E_MAGIC = -2,       /* not a program image */
    NPU_E_VERSION = -3,     /* image format version this driver does not read */
    NPU_E_TRUNCATED = -4,   /* the image ends before its header or a segment does */
    NPU_E_HEADER = -5,      /* malformed JSON header (see npu_program_t.error) */
    NPU_E_LIMIT = -6,       /* more segments/tensors/dimensions or a longer name than compiled in */
    NPU_E_HW_ID = -7,       /* HW_ID is not the register map this driver was built for */
    NPU_E_HW_CONFIG = -8,   /* the NPU's HW_CONFIG differs from the program's configuration */
    NPU_E_MEMORY = -9,      /* the host memory region is smaller than the program needs */
    NPU_E_TENSOR = -10,     /* tensor buffer size does not match the tensor */
    NPU_E_BUSY = -11,       /* npu_start while the NPU runs */
    NPU_E_TIMEOUT = -12,    /* npu_wait gave up */
    NPU_E_NPU = -13,        /* the NPU stopped with an error: see npu_result_t */
    NPU_E_STATE = -14,      /* STATUS is neither busy nor stopped: the NPU was not started */
    NPU_E_IO = -15          /* the transport failed: no reply, malformed replies, an error reply
                             * or an OS error (the transport's own state says which) */
} npu_status_t;

/* The configuration a program was compiled for (isa.config.NpuConfig). */
typedef struct npu_config {
#define NPU_CONFIG_MEMBER_(name, dflt) uint64_t name;
    NPU_FOR_EACH_CONFIG_FIELD(NPU_CONFIG_MEMBER_)
#undef NPU_CONFIG_MEMBER_
} npu_config_t;

typedef struct npu_segment {
    char name[NPU_NAME_MAX];
    uint32_t addr;          /* external byte address */
    uint32_t size;          /* bytes */
    const uint8_t *data;    /* inside the image */
} npu_segment_t;

/* A binding's "patches" (isa/patches.py; inputs only): the host writes the rank-4 NHWC
 * tensor X (after perm) as a convolution's input patches, the tensor P of shape
 * (N, rows, cols, height*width*C) with
 *     P[n, i, j, (dy*width + dx)*C + c] = X[n, step_y*i + dy - top, step_x*j + dx - left, c]
 * (`fill` where that position lies outside the image), which is then laid out in the
 * binding's layout. */
typedef struct npu_patches {
    uint32_t height, width;     /* pixels per patch, down and across: 1..65536 */
    uint32_t step_y, step_x;    /* image pixels between neighbouring patches: 1..65536 */
    uint32_t top, left;         /* padding rows above and columns left of the image: 0..65536 */
    uint32_t rows, cols;        /* patches down and across: 1..65536 */
    int32_t fill;               /* value outside the image; representable in the dtype */
} npu_patches_t;

typedef struct npu_tensor {
    char name[NPU_NAME_MAX];
    uint32_t rank;
    uint32_t shape[NPU_MAX_RANK];   /* the graph's shape: the host array's */
    /* External memory holds the host array transposed: stored axis i is graph axis perm[i]
     * (numpy array.transpose(perm)), then laid out in `layout`.  The identity when the
     * image has no "perm". */
    uint32_t perm[NPU_MAX_RANK];
    /* Nonzero if the binding has "patches" (inputs only, rank 4, an integer or bool dtype):
     * the transposed array is written as `patches` of it, and the layout applies to those. */
    int has_patches;
    npu_patches_t patches;
    int dtype;              /* NPU_DTYPE_* */
    uint32_t itemsize;      /* bytes per element */
    int layout;             /* NPU_LAYOUT_* */
    uint32_t addr;          /* external byte address */
    uint64_t count;         /* elements of the host array */
    uint64_t nbytes;        /* bytes in external memory (layout padding included) */
} npu_tensor_t;

typedef struct npu_program {
    npu_config_t config;
    uint32_t program_addr;  /* external address of the instruction stream */
    uint32_t instructions;  /* its length in NPU_INSTR_BYTES instructions */
    uint32_t n_segments;
    npu_segment_t segments[NPU_MAX_SEGMENTS];   /* in file order, the instruction stream included */
    uint32_t n_inputs;
    npu_tensor_t inputs[NPU_MAX_TENSORS];
    uint32_t n_outputs;
    npu_tensor_t outputs[NPU_MAX_TENSORS];
    uint64_t extent;        /* external bytes from address 0 the program touches, bus-word rounded */
    const char *error;      /* after a failed parse: what is wrong (static text), else NULL */
    size_t error_offset;    /* ... and the image byte where it was found */
} npu_program_t;

struct npu_dev;

/* A transport: how the driver reaches the NPU's registers (32-bit, at byte offsets
 * NPU_REG_*) and its external memory (byte addresses).  Every device access of the driver
 * goes through these four functions; each returns NPU_OK or an error (NPU_E_IO when the
 * link failed, NPU_E_MEMORY for an access outside the memory, NPU_E_ARG), and a failed
 * access has no effect the driver relies on.  A transport keeps its state in dev->ctx. */
typedef struct npu_transport {
    const char *name;
    npu_status_t (*csr_read)(const struct npu_dev *dev, uint32_t offset, uint32_t *value);
    npu_status_t (*csr_write)(const struct npu_dev *dev, uint32_t offset, uint32_t value);
    npu_status_t (*mem_read)(const struct npu_dev *dev, uint32_t addr, void *data, size_t bytes);
    npu_status_t (*mem_write)(const struct npu_dev *dev, uint32_t addr, const void *data,
                              size_t bytes);
} npu_transport_t;

/* The memory-mapped transport: registers through read32/write32 (or the NPU_REG_READ and
 * NPU_REG_WRITE macros), memory as dev->mem[0, mem_size).  A device whose `transport` is
 * NULL uses it, with direct calls (no function pointer) so that the macros inline. */
extern const npu_transport_t npu_mmio_transport;

/* One NPU instance.  The caller fills every field before use (the hooks marked optional may
 * be NULL, and `transport` NULL selects the memory-mapped transport); the driver keeps no
 * other state. */
typedef struct npu_dev {
    /* Register access at byte offsets NPU_REG_*.  Both must be ordered device accesses: a
     * write32 that starts the NPU must not overtake earlier writes to external memory (use
     * the platform's MMIO accessors with barriers, or cache_clean below). */
    uint32_t (*read32)(void *ctx, uint32_t offset);
    void (*write32)(void *ctx, uint32_t offset, uint32_t value);
    void *ctx;
    /* Optional: called between STATUS polls (wait for interrupt, sleep, yield). */
    void (*idle)(void *ctx);
    /* Optional cache maintenance for non-coherent DMA: clean (write back) before START,
     * invalidate before the CPU reads what the NPU wrote. */
    void (*cache_clean)(void *ctx, const void *addr, size_t bytes);
    void (*cache_invalidate)(void *ctx, const void *addr, size_t bytes);
    /* The CPU's view of the NPU's external memory: mem[a] is external byte address a, for
     * a < mem_size.  Programs must fit below mem_size. */
    uint8_t *mem;
    size_t mem_size;
    /* How the driver reaches the NPU: NULL (or &npu_mmio_transport) for the fields above;
     * another transport (npu_uart_transport) keeps its state in ctx and needs only
     * mem_size (the board's external memory) and, optionally, idle. */
    const npu_transport_t *transport;
} npu_dev_t;

/* What the NPU reported when it stopped. */
typedef struct npu_result {
    uint32_t status;        /* STATUS register */
    uint32_t error_code;    /* ERROR_CODE: NPU_ERR_* (NPU_ERR_NONE after HALT) */
    uint32_t stop_pc;       /* STOP_PC: the HALT or the failing instruction (0 for boot errors) */
    uint64_t cycles;        /* CYCLES: from START to the stop */
    uint64_t unit_busy[NPU_UNIT_COUNT];   /* busy cycles, NPU_FOR_EACH_UNIT_COUNTER order */
} npu_result_t;

/* -- raw device access through the device's transport ------------------------------------ */

npu_status_t npu_csr_read(const npu_dev_t *dev, uint32_t offset, uint32_t *value);
npu_status_t npu_csr_write(const npu_dev_t *dev, uint32_t offset, uint32_t value);
npu_status_t npu_mem_read(const npu_dev_t *dev, uint32_t addr, void *data, size_t bytes);
npu_status_t npu_mem_write(const npu_dev_t *dev, uint32_t addr, const void *data, size_t bytes);

/* -- program images (no device access) -------------------------------------------------- */

/* Parse and validate an image of `size` bytes.  On NPU_E_HEADER (and other image errors)
 * prog->error and prog->error_offset say what and where. */
npu_status_t npu_program_parse(npu_program_t *prog, const void *image, size_t size);

/* Index of the input/output called `name`, or -1. */
int npu_find_input(const npu_program_t *prog, const char *name);
int npu_find_output(const npu_program_t *prog, const char *name);

/* -- external memory ---------------------------------------------------------------------- */

/* Zero external memory [0, prog->extent) and copy every segment to its address: the
 * initial memory of isa.program.Program.memory_image, before inputs. */
npu_status_t npu_load(const npu_dev_t *dev, const npu_program_t *prog);

/* Write input `index` from `data`: a dense row-major array of the tensor's `shape` (the
 * graph's axis order, NHWC for the usual activations), `bytes` bytes of native-endian
 * elements, transposed by `perm`, written as its `patches` if it has them, and converted to
 * the tensor's layout in external memory. */
npu_status_t npu_set_input(const npu_dev_t *dev, const npu_program_t *prog, uint32_t index,
                           const void *data, size_t bytes);

/* Read output `index` into `data` (dense row-major in the graph's axis order, native-endian,
 * `bytes` bytes): the inverse of npu_set_input's conversion (outputs never have patches). */
npu_status_t npu_get_output(const npu_dev_t *dev, const npu_program_t *prog, uint32_t index,
                            void *data, size_t bytes);

/* -- the device ----------------------------------------------------------------------------- */

/* Fill `dev` with memory-mapped register access at `regs` (volatile 32-bit loads/stores)
 * and the external memory window; the optional hooks and the transport are cleared. */
void npu_dev_init_mmio(npu_dev_t *dev, volatile void *regs, uint8_t *mem, size_t mem_size);

/* The HW_CONFIG value an NPU built for `config` reads. */
uint32_t npu_expected_hw_config(const npu_config_t *config);

/* Check HW_ID and HW_CONFIG against the program's configuration. */
npu_status_t npu_check_hw(const npu_dev_t *dev, const npu_program_t *prog);

#define NPU_START_IRQ 1u    /* npu_start flag: raise the interrupt when the NPU stops */

/* Watchdog: the NPU stops itself with NPU_ERR_WATCHDOG once it has run `max_cycles`
 * cycles (0: never).  Call before npu_start; set it from the program's cycle estimate plus
 * a margin (`npu run` uses 4 x estimate + 10^6) so a program that loops forever ends with
 * an error and the interrupt instead of hanging.  NPU_E_BUSY if the NPU is running. */
npu_status_t npu_set_watchdog(const npu_dev_t *dev, uint32_t max_cycles);

/* Boot and run the loaded program: write PROG_ADDR, PROG_LEN, IRQ_ENABLE, then CTRL.START.
 * NPU_E_BUSY if the NPU is running. */
npu_status_t npu_start(const npu_dev_t *dev, const npu_program_t *prog, uint32_t flags);

/* One look at STATUS: NPU_RUNNING, or (stopped) fill `result` and return NPU_OK after HALT
 * or NPU_E_NPU after an error.  NPU_E_STATE if the NPU was never started. */
npu_status_t npu_poll(const npu_dev_t *dev, npu_result_t *result);

/* Poll until the NPU stops, calling dev->idle between polls; at most `max_polls` polls
 * (0: no limit), then NPU_E_TIMEOUT. */
npu_status_t npu_wait(const npu_dev_t *dev, uint32_t max_polls, npu_result_t *result);

/* For the interrupt handler: 1 if IRQ_STATUS.PENDING was set (and is now cleared), else 0;
 * a negative npu_status_t if the transport failed. */
int npu_irq_ack(const npu_dev_t *dev);

/* Read the stop registers (STATUS, ERROR_CODE, STOP_PC, counters) into `result`. */
npu_status_t npu_read_result(const npu_dev_t *dev, npu_result_t *result);

/* npu_check_hw, npu_start (no interrupt), npu_wait. */
npu_status_t npu_run(const npu_dev_t *dev, const npu_program_t *prog, uint32_t max_polls,
                     npu_result_t *result);

/* Names, for messages: "NPU_E_MAGIC", "DMA_OUT_OF_RANGE", ...  Never NULL. */
const char *npu_status_name(npu_status_t status);
const char *npu_hw_error_name(uint32_t error_code);

/* sizeof of the public structs, for language bindings that mirror them. */
void npu_struct_sizes(size_t *program, size_t *dev, size_t *result);

#ifdef __cplusplus
}
#endif

#endif /* NPU_DRIVER_H */
