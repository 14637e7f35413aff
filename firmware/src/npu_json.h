/* A minimal JSON scanner for the program image header (internal to the driver).
 *
 * It walks the text in place, without allocation or recursion beyond NJ_MAX_DEPTH, and
 * reads only what the driver needs: object members by key, array elements, non-negative
 * integers and strings (escapes decoded to UTF-8).  Any other value can be validated and
 * skipped (nj_skip): the driver does so for the free-form "info" only.
 *
 * Every function returns 0 on success and a negative NJ_* code on failure, with j->err set
 * to a static message and j->p at the offending byte.
 */
#ifndef NPU_JSON_H
#define NPU_JSON_H

#include <stddef.h>
#include <stdint.h>

#define NJ_MAX_DEPTH 32

enum {
    NJ_SYNTAX = -1,     /* malformed JSON or an unexpected value type */
    NJ_TOO_LONG = -2    /* a string longer than the caller's buffer */
};

typedef struct nj {
    const char *begin;
    const char *p;
    const char *end;
    const char *err;
} nj_t;

void nj_init(nj_t *j, const void *text, size_t len);

/* Consume `c` (after whitespace). */
int nj_expect(nj_t *j, char c);

/* Consume whitespace; 0 if the text ends here, else NJ_SYNTAX ("trailing characters"). */
int nj_end(nj_t *j);

/* Skip one value of any type. */
int nj_skip(nj_t *j);

/* 1 if the next value is null (consumed), 0 if it is something else (not consumed). */
int nj_null(nj_t *j);

/* Read a string into buf (NUL-terminated, at most cap bytes with the NUL). */
int nj_string(nj_t *j, char *buf, size_t cap);

/* Read a non-negative integer (no sign, fraction or exponent) no larger than `max`. */
int nj_uint(nj_t *j, uint64_t max, uint64_t *out);

/* Object iteration: after nj_expect(j, '{') and with *first = 1, returns 1 with the next
 * member's key in key[] (and its ':' consumed; the caller must consume the value), 0 at the
 * closing '}', or a negative code.  Keys longer than cap read as "" (no known key is empty). */
int nj_member(nj_t *j, int *first, char *key, size_t cap);

/* Array iteration: after nj_expect(j, '['), 1 if an element follows, 0 at ']'. */
int nj_element(nj_t *j, int *first);

#endif /* NPU_JSON_H */
