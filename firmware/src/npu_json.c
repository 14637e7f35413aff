/* Minimal in-place JSON scanner: see npu_json.h. */
#include "npu_json.h"

static int fail(nj_t *j, const char *why)
{
    j->err = why;
    return NJ_SYNTAX;
}

static void skip_ws(nj_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* Next significant character, or -1 at the end of the text. */
static int peek(nj_t *j)
{
    skip_ws(j);
    return j->p < j->end ? (unsigned char)*j->p : -1;
}

void nj_init(nj_t *j, const void *text, size_t len)
{
    j->begin = j->p = (const char *)text;
    j->end = j->begin + len;
    j->err = 0;
}

int nj_expect(nj_t *j, char c)
{
    if (peek(j) != (unsigned char)c) {
        switch (c) {
        case '{': return fail(j, "expected an object");
        case '[': return fail(j, "expected an array");
        case ':': return fail(j, "expected ':'");
        default: return fail(j, "unexpected character");
        }
    }
    j->p++;
    return 0;
}

int nj_end(nj_t *j)
{
    return peek(j) == -1 ? 0 : fail(j, "trailing characters after the header object");
}

static int hex4(nj_t *j, uint32_t *out)
{
    uint32_t v = 0;
    int i;
    if (j->end - j->p < 4)
        return fail(j, "truncated \\u escape");
    for (i = 0; i < 4; i++) {
        char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return fail(j, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

/* Append `n` bytes to buf (if buf is NULL the string is only validated). */
static int put(nj_t *j, char *buf, size_t cap, size_t *len, const char *bytes, size_t n)
{
    size_t i;
    if (buf) {
        if (*len + n + 1 > cap) {
            j->err = "string too long";
            return NJ_TOO_LONG;
        }
        for (i = 0; i < n; i++)
            buf[*len + i] = bytes[i];
    }
    *len += n;
    return 0;
}

static int put_utf8(nj_t *j, char *buf, size_t cap, size_t *len, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return put(j, buf, cap, len, u, n);
}

/* A string at j->p; decoded into buf when buf is not NULL. */
static int string_at(nj_t *j, char *buf, size_t cap)
{
    size_t len = 0;
    int r;
    if (peek(j) != '"')
        return fail(j, "expected a string");
    j->p++;
    for (;;) {
        char c, e;
        if (j->p >= j->end)
            return fail(j, "unterminated string");
        c = *j->p;
        if (c == '"') {
            j->p++;
            break;
        }
        if ((unsigned char)c < 0x20)
            return fail(j, "control character in a string");
        if (c != '\\') {
            if ((r = put(j, buf, cap, &len, &c, 1)) != 0)
                return r;
            j->p++;
            continue;
        }
        if (j->end - j->p < 2)
            return fail(j, "unterminated string");
        e = j->p[1];
        j->p += 2;
        switch (e) {
        case '"': case '\\': case '/': c = e; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if ((r = hex4(j, &cp)) != 0)
                return r;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(j, "lone low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
                    return fail(j, "lone high surrogate in \\u escape");
                j->p += 2;
                if ((r = hex4(j, &lo)) != 0)
                    return r;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(j, "bad surrogate pair in \\u escape");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0)
                return fail(j, "NUL character in a string");
            if ((r = put_utf8(j, buf, cap, &len, cp)) != 0)
                return r;
            continue;
        }
        default:
            j->p -= 1;
            return fail(j, "bad escape in a string");
        }
        if ((r = put(j, buf, cap, &len, &c, 1)) != 0)
            return r;
    }
    if (buf)
        buf[len] = 0;
    return 0;
}

int nj_string(nj_t *j, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return fail(j, "no string buffer");
    return string_at(j, buf, cap);
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Any JSON number (validated, not converted). */
static int skip_number(nj_t *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p >= j->end || !is_digit(*j->p))
        return fail(j, "bad number");
    if (*j->p == '0')
        j->p++;
    else
        while (j->p < j->end && is_digit(*j->p))
            j->p++;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (j->p >= j->end || !is_digit(*j->p))
            return fail(j, "bad number");
        while (j->p < j->end && is_digit(*j->p))
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (j->p >= j->end || !is_digit(*j->p))
            return fail(j, "bad number");
        while (j->p < j->end && is_digit(*j->p))
            j->p++;
    }
    return 0;
}

int nj_uint(nj_t *j, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    const char *start;
    if (!is_digit(peek(j)))
        return fail(j, "expected a non-negative integer");
    start = j->p;
    if (*j->p == '0' && j->end - j->p > 1 && is_digit(j->p[1]))
        return fail(j, "leading zero in a number");
    while (j->p < j->end && is_digit(*j->p)) {
        uint64_t d = (uint64_t)(*j->p - '0');
        if (v > (max - d) / 10) {
            j->p = start;
            return fail(j, "integer too large");
        }
        v = v * 10 + d;
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')) {
        j->p = start;
        return fail(j, "expected an integer, not a fraction");
    }
    *out = v;
    return 0;
}

static int literal(nj_t *j, const char *word)
{
    while (*word) {
        if (j->p >= j->end || *j->p != *word)
            return fail(j, "bad literal");
        j->p++;
        word++;
    }
    return 0;
}

int nj_null(nj_t *j)
{
    int r;
    if (peek(j) != 'n')
        return 0;
    r = literal(j, "null");
    return r < 0 ? r : 1;
}

static int skip_depth(nj_t *j, int depth)
{
    int c = peek(j), first = 1, r;
    if (depth > NJ_MAX_DEPTH)
        return fail(j, "nesting too deep");
    switch (c) {
    case '{':
        j->p++;
        while ((r = nj_member(j, &first, 0, 0)) == 1)
            if ((r = skip_depth(j, depth + 1)) != 0)
                return r;
        return r;
    case '[':
        j->p++;
        while ((r = nj_element(j, &first)) == 1)
            if ((r = skip_depth(j, depth + 1)) != 0)
                return r;
        return r;
    case '"':
        return string_at(j, 0, 0);
    case 't':
        return literal(j, "true");
    case 'f':
        return literal(j, "false");
    case 'n':
        return literal(j, "null");
    case -1:
        return fail(j, "unexpected end of the header");
    default:
        if (c == '-' || is_digit(c))
            return skip_number(j);
        return fail(j, "unexpected character");
    }
}

int nj_skip(nj_t *j)
{
    return skip_depth(j, 0);
}

int nj_member(nj_t *j, int *first, char *key, size_t cap)
{
    int c = peek(j), r;
    const char *start;
    if (c == '}' && *first) {
        j->p++;
        return 0;
    }
    if (!*first) {
        if (c == '}') {
            j->p++;
            return 0;
        }
        if (c != ',')
            return fail(j, c == -1 ? "unexpected end of the header" : "expected ',' or '}'");
        j->p++;
    }
    *first = 0;
    skip_ws(j);
    start = j->p;
    r = key ? string_at(j, key, cap) : string_at(j, 0, 0);
    if (r == NJ_TOO_LONG) {
        key[0] = 0;
        j->p = start;
        r = string_at(j, 0, 0);     /* validate it, then treat it as an unknown key */
    }
    if (r != 0)
        return r;
    if ((r = nj_expect(j, ':')) != 0)
        return r;
    return 1;
}

int nj_element(nj_t *j, int *first)
{
    int c = peek(j);
    if (c == ']') {
        j->p++;
        return 0;
    }
    if (!*first) {
        if (c != ',')
            return fail(j, c == -1 ? "unexpected end of the header" : "expected ',' or ']'");
        j->p++;
        if (peek(j) == ']')
            return fail(j, "trailing comma");
    }
    *first = 0;
    return 1;
}
