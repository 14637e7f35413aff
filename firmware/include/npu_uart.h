/* The UART bridge transport: the NPU of an FPGA board reached over a serial port.
 *
 * Requests and replies are the frames of hw/board/protocol.py (constants in the generated
 * npu_bridge.h): one request, one reply, CRC-8 on both.  The port is set to raw 8N1 at the
 * given baud rate with POSIX termios; every reply is awaited with poll() against a deadline,
 * so a board that does not answer is an error (NPU_E_IO), never a hang.  A request is sent
 * again, up to `max_retries` times, after the bridge replies BAD_CRC or TIMEOUT, after a
 * reply that is not a well-formed frame and after no reply at all; never a write to CTRL
 * (it starts the NPU: a START whose reply was lost may have run).  Memory transfers are
 * split into frames of at most NPU_BRIDGE_MAX_PAYLOAD bytes.
 *
 * POSIX only (termios, poll, clock_gettime); the driver core does not depend on it.  No
 * allocation: the caller provides the npu_uart_t (npu_uart_size() bytes, for bindings).
 */
#ifndef NPU_UART_H
#define NPU_UART_H

#include <stddef.h>
#include <stdint.h>

#include "npu_bridge.h"
#include "npu_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPU_UART_DEFAULT_BAUD 115200u
#define NPU_UART_DEFAULT_TIMEOUT_MS 1000u   /* reply timeout beyond the frames' wire time */
#define NPU_UART_DEFAULT_RETRIES 3u
#define NPU_UART_ERROR_MAX 256

typedef struct npu_uart {
    int fd;                     /* the serial port, -1 when closed */
    int owns_fd;                /* npu_uart_close closes it (npu_uart_open) */
    uint32_t baud;              /* bits per second: wire time of frames in timeouts */
    uint32_t timeout_ms;        /* a reply must be complete this long after its wire time */
    uint32_t max_retries;       /* sends of a request after the first */
    /* Counters and the last error, for messages and tests. */
    uint32_t requests;          /* requests sent, retries included */
    uint32_t retries;           /* of which retries */
    uint8_t bridge_status;      /* status of the last error reply (NPU_BRIDGE_STATUS_*), else 0 */
    int os_error;               /* errno of the last failed system call, else 0 */
    char error[NPU_UART_ERROR_MAX];   /* the last failure in one line, "" if none */
    uint8_t frame[NPU_BRIDGE_REQ_HEADER + NPU_BRIDGE_MAX_PAYLOAD + 1];
} npu_uart_t;

/* The transport: dev->ctx is the npu_uart_t. */
extern const npu_transport_t npu_uart_transport;

/* Open the serial port `path` (O_NOCTTY) and configure it (npu_uart_attach).  NPU_E_IO with
 * the reason in uart->error if it cannot be opened; NPU_E_ARG for a baud rate the system has
 * no constant for. */
npu_status_t npu_uart_open(npu_uart_t *uart, const char *path, uint32_t baud, uint32_t timeout_ms);

/* Use the already open descriptor `fd` (not closed by npu_uart_close): raw 8N1 at `baud`,
 * no flow control, non-blocking reads; stale input is discarded. */
npu_status_t npu_uart_attach(npu_uart_t *uart, int fd, uint32_t baud, uint32_t timeout_ms);

void npu_uart_close(npu_uart_t *uart);

/* A device on the bridge: `mem_size` bytes of external memory on the board. */
void npu_dev_init_uart(npu_dev_t *dev, npu_uart_t *uart, size_t mem_size);

/* PING: the bridge's BOARD_ID (NPU_BRIDGE_BOARD_ID for this protocol). */
npu_status_t npu_uart_ping(npu_uart_t *uart, uint32_t *board_id);

/* One request with its retries: send `cmd` with `length` and `payload` (writes), receive
 * the reply's payload into `reply` (`reply_bytes` bytes expected; 0 for writes). */
npu_status_t npu_uart_request(npu_uart_t *uart, uint8_t cmd, uint32_t addr, uint16_t length,
                              const void *payload, void *reply, uint16_t reply_bytes);

/* The last failure in one line ("" if none): never NULL. */
const char *npu_uart_error(const npu_uart_t *uart);

/* sizeof(npu_uart_t), for bindings that allocate it. */
size_t npu_uart_size(void);

/* CRC-8/SMBUS of `n` bytes continuing from `crc` (the bridge's frame check). */
uint8_t npu_bridge_crc8(const uint8_t *data, size_t n, uint8_t crc);

#ifdef __cplusplus
}
#endif

#endif /* NPU_UART_H */
