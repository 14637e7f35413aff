/* The UART bridge transport (npu_uart.h): frames of hw/board/protocol.py over a POSIX
 * serial port.
 *
 * Timing: a request is written whole, then its reply is read against one deadline, the
 * wire time of both frames at the baud rate plus timeout_ms; poll() waits for each chunk of
 * bytes, so nothing blocks past the deadline.  After a failed attempt the input is drained
 * until it has been quiet for two FRAME_TIMEOUTs (the bridge drops a partial frame after
 * one, with a TIMEOUT reply), so that a late or garbled reply cannot be taken for the reply
 * to the next attempt.
 */
#define _POSIX_C_SOURCE 200809L
/* CRTSCTS (hardware flow control, to be cleared) is not POSIX: glibc, musl and macOS show it
 * with these. */
#define _DEFAULT_SOURCE
#define _DARWIN_C_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "npu_uart.h"

enum { GOT_REPLY = 0, NO_REPLY = 1, BAD_REPLY = 2, PORT_ERROR = 3 };

uint8_t npu_bridge_crc8(const uint8_t *data, size_t n, uint8_t crc)
{
    size_t i;
    int bit;
    for (i = 0; i < n; i++) {
        crc ^= data[i];
        for (bit = 0; bit < 8; bit++)
            crc = (uint8_t)((crc & 0x80u) ? ((unsigned)crc << 1) ^ NPU_BRIDGE_CRC8_POLY : (unsigned)crc << 1);
    }
    return crc;
}

size_t npu_uart_size(void)
{
    return sizeof(npu_uart_t);
}

const char *npu_uart_error(const npu_uart_t *uart)
{
    return uart ? uart->error : "no UART";
}

static const char *command_name(uint8_t cmd)
{
#define NPU_CMD_NAME_(value, name) if (cmd == (value)) return name;
    NPU_BRIDGE_FOR_EACH_COMMAND(NPU_CMD_NAME_)
#undef NPU_CMD_NAME_
    return "UNKNOWN";
}

static const char *bridge_status_name(uint8_t status)
{
#define NPU_STATUS_NAME_(value, name) if (status == (value)) return name;
    NPU_BRIDGE_FOR_EACH_STATUS(NPU_STATUS_NAME_)
#undef NPU_STATUS_NAME_
    return "UNKNOWN";
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds `bytes` take on the wire (8N1: 10 bit times each), rounded up. */
static int64_t wire_ms(const npu_uart_t *u, size_t bytes)
{
    uint64_t baud = u->baud ? u->baud : NPU_UART_DEFAULT_BAUD;
    return (int64_t)(((uint64_t)bytes * 10u * 1000u + baud - 1u) / baud);
}

static npu_status_t os_fail(npu_uart_t *u, const char *what)
{
    u->os_error = errno;
    snprintf(u->error, sizeof u->error, "%s: %s", what, strerror(errno));
    return NPU_E_IO;
}

/* Wait until the port is readable (or writable) before `deadline`: 1 ready, 0 timed out,
 * -1 hang-up or error (errno set). */
static int wait_port(npu_uart_t *u, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p;
        int64_t left = deadline - now_ms();
        int r;
        if (left < 0)
            left = 0;
        p.fd = u->fd;
        p.events = events;
        p.revents = 0;
        r = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            if (now_ms() >= deadline)
                return 0;
            continue;
        }
        if (p.revents & events)
            return 1;
        errno = (p.revents & POLLNVAL) ? EBADF : EIO;   /* POLLHUP / POLLERR: the port is gone */
        return -1;
    }
}

/* Read exactly `n` bytes before `deadline`: GOT_REPLY, NO_REPLY or PORT_ERROR. */
static int read_exact(npu_uart_t *u, uint8_t *buf, size_t n, int64_t deadline)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r;
        int w = wait_port(u, POLLIN, deadline);
        if (w == 0)
            return NO_REPLY;
        if (w < 0) {
            os_fail(u, "reading the serial port");
            return PORT_ERROR;
        }
        r = read(u->fd, buf + got, n - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
            if (r == 0)
                errno = EIO;
            os_fail(u, "reading the serial port");
            return PORT_ERROR;
        }
    }
    return GOT_REPLY;
}

static npu_status_t write_all(npu_uart_t *u, const uint8_t *buf, size_t n, int64_t deadline)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = write(u->fd, buf + done, n - done);
        if (r > 0) {
            done += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno != EAGAIN)
            return os_fail(u, "writing the serial port");
        r = wait_port(u, POLLOUT, deadline);
        if (r == 0) {
            snprintf(u->error, sizeof u->error, "writing the serial port: timed out (flow control?)");
            return NPU_E_IO;
        }
        if (r < 0)
            return os_fail(u, "writing the serial port");
    }
    return NPU_OK;
}

/* Discard input until none has arrived for two FRAME_TIMEOUTs (at least 20 ms), for at
 * most timeout_ms. */
static void drain(npu_uart_t *u)
{
    int64_t quiet = 2 * wire_ms(u, NPU_BRIDGE_FRAME_TIMEOUT), stop = now_ms() + u->timeout_ms;
    uint8_t junk[64];
    if (quiet < 20)
        quiet = 20;
    while (now_ms() < stop) {
        int64_t until = now_ms() + quiet;
        if (wait_port(u, POLLIN, until < stop ? until : stop) != 1)
            return;
        if (read(u->fd, junk, sizeof junk) <= 0 && errno != EAGAIN && errno != EINTR)
            return;
    }
}

/* Receive one reply before `deadline`: its status in *status and, for a reply with a
 * payload, `expect` bytes into `payload`.  BAD_REPLY (with the reason in u->error) for
 * anything that is not a well-formed reply of 0 or `expect` payload bytes. */
static int read_reply(npu_uart_t *u, int64_t deadline, uint8_t *status, uint8_t *payload,
                      uint16_t expect, uint16_t *length)
{
    uint8_t head[NPU_BRIDGE_REP_HEADER - 1], crc_byte, crc;
    int r;
    do {                                /* bytes before the sync byte are skipped */
        r = read_exact(u, head, 1, deadline);
        if (r != GOT_REPLY)
            return r;
    } while (head[0] != NPU_BRIDGE_SYNC_REP);
    r = read_exact(u, head, sizeof head, deadline);
    if (r != GOT_REPLY)
        return r;
    *status = head[0];
    *length = (uint16_t)(head[1] | head[2] << 8);
    if (*length != 0 && *length != expect) {
        snprintf(u->error, sizeof u->error, "reply declares a %u-byte payload, expected %u",
                 (unsigned)*length, (unsigned)expect);
        return BAD_REPLY;
    }
    r = read_exact(u, payload, *length, deadline);
    if (r == GOT_REPLY)
        r = read_exact(u, &crc_byte, 1, deadline);
    if (r != GOT_REPLY)
        return r;
    crc = npu_bridge_crc8(head, sizeof head, 0);
    crc = npu_bridge_crc8(payload, *length, crc);
    if (crc != crc_byte) {
        snprintf(u->error, sizeof u->error, "reply CRC mismatch (0x%02x, computed 0x%02x)",
                 (unsigned)crc_byte, (unsigned)crc);
        return BAD_REPLY;
    }
    if (*status > NPU_BRIDGE_STATUS_TIMEOUT || (*status != NPU_BRIDGE_STATUS_OK && *length)) {
        snprintf(u->error, sizeof u->error, "malformed reply (status 0x%02x, %u payload bytes)",
                 (unsigned)*status, (unsigned)*length);
        return BAD_REPLY;
    }
    return GOT_REPLY;
}

npu_status_t npu_uart_request(npu_uart_t *uart, uint8_t cmd, uint32_t addr, uint16_t length,
                              const void *payload, void *reply, uint16_t reply_bytes)
{
    size_t n = NPU_BRIDGE_REQ_HEADER, sent_payload = payload ? length : 0u;
    uint8_t *f, dummy[4];
    uint32_t attempt;
    int retriable = !(cmd == NPU_BRIDGE_CSR_WRITE && addr == NPU_REG_CTRL);
    char last[NPU_UART_ERROR_MAX / 2];
    if (!uart || uart->fd < 0 || sent_payload > NPU_BRIDGE_MAX_PAYLOAD || reply_bytes > NPU_BRIDGE_MAX_PAYLOAD
            || (reply_bytes && !reply))
        return NPU_E_ARG;
    if (!reply)
        reply = dummy;
    f = uart->frame;
    f[0] = NPU_BRIDGE_SYNC_REQ;
    f[1] = cmd;
    f[2] = (uint8_t)addr;
    f[3] = (uint8_t)(addr >> 8);
    f[4] = (uint8_t)(addr >> 16);
    f[5] = (uint8_t)(addr >> 24);
    f[6] = (uint8_t)length;
    f[7] = (uint8_t)(length >> 8);
    if (sent_payload)
        memcpy(f + n, payload, sent_payload);
    n += sent_payload;
    f[n] = npu_bridge_crc8(f + 1, n - 1, 0);
    n++;
    uart->error[0] = '\0';
    uart->bridge_status = 0;
    uart->os_error = 0;
    for (attempt = 0;; attempt++) {
        int64_t deadline;
        uint8_t status = 0;
        uint16_t got = 0;
        int r;
        npu_status_t s;
        if (attempt) {
            uart->retries++;
            drain(uart);
        }
        uart->requests++;
        deadline = now_ms() + wire_ms(uart, n + NPU_BRIDGE_REP_HEADER + 1u + reply_bytes) + uart->timeout_ms;
        s = write_all(uart, f, n, deadline);
        if (s != NPU_OK)
            return s;
        r = read_reply(uart, deadline, &status, (uint8_t *)reply, reply_bytes, &got);
        if (r == PORT_ERROR)
            return NPU_E_IO;
        if (r == GOT_REPLY && status == NPU_BRIDGE_STATUS_OK) {
            if (got == reply_bytes)
                return NPU_OK;
            snprintf(uart->error, sizeof uart->error, "reply carries %u bytes, expected %u",
                     (unsigned)got, (unsigned)reply_bytes);
            r = BAD_REPLY;
        }
        if (r == GOT_REPLY) {
            uart->bridge_status = status;
            snprintf(uart->error, sizeof uart->error, "bridge replied %s", bridge_status_name(status));
            if (status != NPU_BRIDGE_STATUS_BAD_CRC && status != NPU_BRIDGE_STATUS_TIMEOUT)
                break;                  /* BAD_COMMAND, BAD_ADDRESS: sending again cannot help */
        } else if (r == NO_REPLY) {
            snprintf(uart->error, sizeof uart->error, "no reply within %ld ms",
                     (long)(wire_ms(uart, n + NPU_BRIDGE_REP_HEADER + 1u + reply_bytes) + uart->timeout_ms));
        }
        if (!retriable || attempt >= uart->max_retries)
            break;
    }
    memcpy(last, uart->error, sizeof last - 1);
    last[sizeof last - 1] = '\0';
    snprintf(uart->error, sizeof uart->error, "%s at 0x%08lx (%u bytes): %s%s", command_name(cmd),
             (unsigned long)addr, (unsigned)length, last,
             !retriable ? " (a write to CTRL is never sent twice)"
             : attempt ? " (after retries)" : "");
    return NPU_E_IO;
}

/* -- the transport ------------------------------------------------------------------------- */

static npu_status_t uart_csr_read(const npu_dev_t *dev, uint32_t offset, uint32_t *value)
{
    uint8_t b[4];
    npu_status_t s = npu_uart_request((npu_uart_t *)dev->ctx, NPU_BRIDGE_CSR_READ, offset, 4, NULL, b, 4);
    if (s == NPU_OK)
        *value = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return s;
}

static npu_status_t uart_csr_write(const npu_dev_t *dev, uint32_t offset, uint32_t value)
{
    uint8_t b[4];
    b[0] = (uint8_t)value;
    b[1] = (uint8_t)(value >> 8);
    b[2] = (uint8_t)(value >> 16);
    b[3] = (uint8_t)(value >> 24);
    return npu_uart_request((npu_uart_t *)dev->ctx, NPU_BRIDGE_CSR_WRITE, offset, 4, b, NULL, 0);
}

static npu_status_t uart_window(const npu_dev_t *dev, uint32_t addr, size_t bytes)
{
    if (!dev->ctx)
        return NPU_E_ARG;
    if (addr > dev->mem_size || bytes > dev->mem_size - addr)
        return NPU_E_MEMORY;
    return NPU_OK;
}

static npu_status_t uart_mem_read(const npu_dev_t *dev, uint32_t addr, void *data, size_t bytes)
{
    uint8_t *p = (uint8_t *)data;
    npu_status_t s = uart_window(dev, addr, bytes);
    while (s == NPU_OK && bytes) {
        uint16_t k = (uint16_t)(bytes < NPU_BRIDGE_MAX_PAYLOAD ? bytes : NPU_BRIDGE_MAX_PAYLOAD);
        s = npu_uart_request((npu_uart_t *)dev->ctx, NPU_BRIDGE_MEM_READ, addr, k, NULL, p, k);
        addr += k;
        p += k;
        bytes -= k;
    }
    return s;
}

static npu_status_t uart_mem_write(const npu_dev_t *dev, uint32_t addr, const void *data, size_t bytes)
{
    const uint8_t *p = (const uint8_t *)data;
    npu_status_t s = uart_window(dev, addr, bytes);
    while (s == NPU_OK && bytes) {
        uint16_t k = (uint16_t)(bytes < NPU_BRIDGE_MAX_PAYLOAD ? bytes : NPU_BRIDGE_MAX_PAYLOAD);
        s = npu_uart_request((npu_uart_t *)dev->ctx, NPU_BRIDGE_MEM_WRITE, addr, k, p, NULL, 0);
        addr += k;
        p += k;
        bytes -= k;
    }
    return s;
}

const npu_transport_t npu_uart_transport = {
    "uart-bridge", uart_csr_read, uart_csr_write, uart_mem_read, uart_mem_write
};

void npu_dev_init_uart(npu_dev_t *dev, npu_uart_t *uart, size_t mem_size)
{
    memset(dev, 0, sizeof *dev);
    dev->ctx = uart;
    dev->mem_size = mem_size;
    dev->transport = &npu_uart_transport;
}

npu_status_t npu_uart_ping(npu_uart_t *uart, uint32_t *board_id)
{
    uint8_t b[4];
    npu_status_t s = npu_uart_request(uart, NPU_BRIDGE_PING, 0, 0, NULL, b, 4);
    if (s == NPU_OK && board_id)
        *board_id = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return s;
}

/* -- the port -------------------------------------------------------------------------------- */

static int speed_of(uint32_t baud, speed_t *speed)
{
    static const struct { uint32_t baud; speed_t speed; } table[] = {
        {1200, B1200}, {2400, B2400}, {4800, B4800}, {9600, B9600}, {19200, B19200},
        {38400, B38400},
#ifdef B57600
        {57600, B57600},
#endif
#ifdef B115200
        {115200, B115200},
#endif
#ifdef B230400
        {230400, B230400},
#endif
#ifdef B460800
        {460800, B460800},
#endif
#ifdef B921600
        {921600, B921600},
#endif
#ifdef B1000000
        {1000000, B1000000},
#endif
#ifdef B2000000
        {2000000, B2000000},
#endif
#ifdef B3000000
        {3000000, B3000000},
#endif
    };
    size_t i;
    for (i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].baud == baud) {
            *speed = table[i].speed;
            return 1;
        }
    return 0;
}

static void set_defaults(npu_uart_t *u, int fd, uint32_t baud, uint32_t timeout_ms)
{
    memset(u, 0, sizeof *u);
    u->fd = fd;
    u->baud = baud ? baud : NPU_UART_DEFAULT_BAUD;
    u->timeout_ms = timeout_ms ? timeout_ms : NPU_UART_DEFAULT_TIMEOUT_MS;
    u->max_retries = NPU_UART_DEFAULT_RETRIES;
}

npu_status_t npu_uart_attach(npu_uart_t *uart, int fd, uint32_t baud, uint32_t timeout_ms)
{
    struct termios tio;
    speed_t speed;
    int flags;
    if (!uart)
        return NPU_E_ARG;
    set_defaults(uart, fd, baud, timeout_ms);
    if (!speed_of(uart->baud, &speed)) {
        snprintf(uart->error, sizeof uart->error, "baud rate %lu is not one this system supports",
                 (unsigned long)uart->baud);
        uart->fd = -1;
        return NPU_E_ARG;
    }
    if (tcgetattr(fd, &tio) != 0) {
        uart->fd = -1;
        return os_fail(uart, "not a serial port");
    }
    /* Raw: no line editing, echo, signals, CR/LF translation, software flow control or
     * output processing; 8 data bits, no parity, one stop bit; reads never block (poll()
     * waits). */
    tio.c_iflag &= (tcflag_t)~(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON | IXOFF | IXANY);
    tio.c_oflag &= (tcflag_t)~OPOST;
    tio.c_lflag &= (tcflag_t)~(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
    tio.c_cflag &= (tcflag_t)~(CSIZE | PARENB | CSTOPB);
#ifdef CRTSCTS
    tio.c_cflag &= (tcflag_t)~CRTSCTS;
#endif
    tio.c_cflag |= CS8 | CREAD | CLOCAL;
    tio.c_cc[VMIN] = 0;
    tio.c_cc[VTIME] = 0;
    if (cfsetispeed(&tio, speed) != 0 || cfsetospeed(&tio, speed) != 0 || tcsetattr(fd, TCSANOW, &tio) != 0) {
        uart->fd = -1;
        return os_fail(uart, "configuring the serial port");
    }
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        uart->fd = -1;
        return os_fail(uart, "configuring the serial port");
    }
    tcflush(fd, TCIOFLUSH);
    return NPU_OK;
}

npu_status_t npu_uart_open(npu_uart_t *uart, const char *path, uint32_t baud, uint32_t timeout_ms)
{
    int fd;
    npu_status_t s;
    if (!uart || !path)
        return NPU_E_ARG;
    set_defaults(uart, -1, baud, timeout_ms);
    fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        os_fail(uart, path);
        return NPU_E_IO;
    }
    s = npu_uart_attach(uart, fd, baud, timeout_ms);
    if (s != NPU_OK) {
        char why[NPU_UART_ERROR_MAX / 2];
        int err = uart->os_error;
        memcpy(why, uart->error, sizeof why - 1);
        why[sizeof why - 1] = '\0';
        close(fd);
        snprintf(uart->error, sizeof uart->error, "%s: %s", path, why);
        uart->os_error = err;
        return s;
    }
    uart->owns_fd = 1;
    return NPU_OK;
}

void npu_uart_close(npu_uart_t *uart)
{
    if (!uart)
        return;
    if (uart->owns_fd && uart->fd >= 0)
        close(uart->fd);
    uart->fd = -1;
    uart->owns_fd = 0;
}
