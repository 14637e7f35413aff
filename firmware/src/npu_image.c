/* Program images (.npuprog, isa/program.py): parsing, placement in external memory, and
 * tensor conversion between dense host arrays and the layouts of isa/layout.py (transposed
 * by a binding's "perm" on the way, and for an input with "patches" written as the patches
 * of isa/patches.py). */
#include <string.h>

#include "npu_driver.h"
#include "npu_json.h"

/* convert and convert_patches below both dispatch on exactly these layouts. */
#if NPU_LAYOUT_COUNT != 3 || NPU_LAYOUT_BRICK != 0 || NPU_LAYOUT_FLAT != 1 || NPU_LAYOUT_ROWS != 2
#error "npu_image.c converts the layouts brick, flat and rows of isa/layout.py: teach it the new ones"
#endif

#define SMALL_STRING 24     /* dtype and layout names */
#define MAX_BUS_BYTES 4096u
#define MAX_PATCH 65536u    /* bound on a "patches" field (isa/patches.py's MAX_PATCH) */

/* -- parsing -------------------------------------------------------------------------------- */

typedef struct parser {
    npu_program_t *prog;
    nj_t j;
    size_t json_offset;     /* image offset of the JSON text, for error offsets */
    const uint8_t *payload;
    uint64_t payload_size;
} parser_t;

static npu_status_t image_fail(npu_program_t *prog, npu_status_t status, const char *why, size_t offset)
{
    prog->error = why;
    prog->error_offset = offset;
    return status;
}

/* An error at the scanner's position. */
static npu_status_t fail_here(parser_t *ps, npu_status_t status, const char *why)
{
    return image_fail(ps->prog, status, why, ps->json_offset + (size_t)(ps->j.p - ps->j.begin));
}

static npu_status_t json_fail(parser_t *ps, int r)
{
    return fail_here(ps, r == NJ_TOO_LONG ? NPU_E_LIMIT : NPU_E_HEADER, ps->j.err);
}

#define TRY_JSON(expr) do { int r_ = (expr); if (r_ < 0) return json_fail(ps, r_); } while (0)
#define TRY(expr) do { npu_status_t s_ = (expr); if (s_ != NPU_OK) return s_; } while (0)

static npu_status_t read_u32(parser_t *ps, uint32_t *out)
{
    uint64_t v;
    TRY_JSON(nj_uint(&ps->j, UINT32_MAX, &v));
    *out = (uint32_t)v;
    return NPU_OK;
}

/* A string into buf; a longer one than cap is NPU_E_LIMIT with `too_long` as the message. */
static npu_status_t read_name(parser_t *ps, char *buf, size_t cap, const char *too_long)
{
    const char *at = ps->j.p;
    int r = nj_string(&ps->j, buf, cap);
    if (r == NJ_TOO_LONG) {
        ps->j.p = at;
        return fail_here(ps, NPU_E_LIMIT, too_long);
    }
    TRY_JSON(r);
    return NPU_OK;
}

static npu_status_t parse_config(parser_t *ps, npu_config_t *cfg)
{
    char key[32];
    int first = 1, r;
    TRY_JSON(nj_expect(&ps->j, '{'));
    while ((r = nj_member(&ps->j, &first, key, sizeof key)) == 1) {
#define NPU_CONFIG_KEY_(name, dflt) \
        if (strcmp(key, #name) == 0) { \
            TRY_JSON(nj_uint(&ps->j, UINT64_MAX, &cfg->name)); \
            if (cfg->name == 0) return fail_here(ps, NPU_E_HEADER, "configuration field " #name " must be positive"); \
            continue; \
        }
        NPU_FOR_EACH_CONFIG_FIELD(NPU_CONFIG_KEY_)
#undef NPU_CONFIG_KEY_
        return fail_here(ps, NPU_E_HEADER, "unknown configuration field");
    }
    TRY_JSON(r);
    if (cfg->bus_bytes & (cfg->bus_bytes - 1))
        return fail_here(ps, NPU_E_HEADER, "configuration: bus_bytes must be a power of two");
    /* Bounds the layout arithmetic below (HW_CONFIG holds 8 bits of it anyway). */
    if (cfg->bus_bytes > MAX_BUS_BYTES)
        return fail_here(ps, NPU_E_HEADER, "configuration: bus_bytes too large");
    return NPU_OK;
}

static npu_status_t parse_segments(parser_t *ps)
{
    npu_program_t *prog = ps->prog;
    int first = 1, r;
    TRY_JSON(nj_expect(&ps->j, '['));
    while ((r = nj_element(&ps->j, &first)) == 1) {
        npu_segment_t *seg;
        char key[16];
        int mfirst = 1, m;
        unsigned seen = 0;
        uint64_t offset = 0;
        if (prog->n_segments == NPU_MAX_SEGMENTS)
            return fail_here(ps, NPU_E_LIMIT, "more segments than NPU_MAX_SEGMENTS");
        seg = &prog->segments[prog->n_segments++];
        TRY_JSON(nj_expect(&ps->j, '{'));
        while ((m = nj_member(&ps->j, &mfirst, key, sizeof key)) == 1) {
            if (strcmp(key, "name") == 0) {
                TRY(read_name(ps, seg->name, sizeof seg->name, "segment name longer than NPU_NAME_MAX"));
                seen |= 1;
            } else if (strcmp(key, "addr") == 0) {
                TRY(read_u32(ps, &seg->addr));
                seen |= 2;
            } else if (strcmp(key, "offset") == 0) {
                TRY_JSON(nj_uint(&ps->j, UINT64_MAX, &offset));
                seen |= 4;
            } else if (strcmp(key, "size") == 0) {
                TRY(read_u32(ps, &seg->size));
                seen |= 8;
            } else {
                /* A field this driver does not know may change what the segment means. */
                return fail_here(ps, NPU_E_HEADER, "unknown segment field");
            }
        }
        TRY_JSON(m);
        if (seen != 15)
            return fail_here(ps, NPU_E_HEADER, "a segment lacks one of name, addr, offset, size");
        if (offset > ps->payload_size || seg->size > ps->payload_size - offset)
            return fail_here(ps, NPU_E_TRUNCATED, "a segment extends past the end of the image");
        seg->data = ps->payload + offset;
    }
    TRY_JSON(r);
    return NPU_OK;
}

static int lookup_dtype(const char *name, uint32_t *itemsize)
{
#define NPU_DTYPE_MATCH_(id, text, bytes) \
    if (strcmp(name, text) == 0) { *itemsize = bytes; return id; }
    NPU_FOR_EACH_DTYPE(NPU_DTYPE_MATCH_)
#undef NPU_DTYPE_MATCH_
    return -1;
}

static int lookup_layout(const char *name)
{
#define NPU_LAYOUT_MATCH_(id, text) if (strcmp(name, text) == 0) return id;
    NPU_FOR_EACH_LAYOUT(NPU_LAYOUT_MATCH_)
#undef NPU_LAYOUT_MATCH_
    return -1;
}

/* A string enum value (dtype, layout): names longer than the buffer are unknown values. */
static npu_status_t read_word(parser_t *ps, char *buf, size_t cap)
{
    const char *at = ps->j.p;
    int r = nj_string(&ps->j, buf, cap);
    if (r == NJ_TOO_LONG) {
        ps->j.p = at;
        buf[0] = 0;
        TRY_JSON(nj_skip(&ps->j));
        return NPU_OK;
    }
    TRY_JSON(r);
    return NPU_OK;
}

/* "perm": an array of axis indices, checked against the shape once the object is read. */
static npu_status_t read_perm(parser_t *ps, npu_tensor_t *t, uint32_t *len)
{
    int first = 1, r;
    *len = 0;
    TRY_JSON(nj_expect(&ps->j, '['));
    while ((r = nj_element(&ps->j, &first)) == 1) {
        if (*len == NPU_MAX_RANK)
            return fail_here(ps, NPU_E_LIMIT, "tensor perm longer than NPU_MAX_RANK");
        TRY(read_u32(ps, &t->perm[(*len)++]));
    }
    TRY_JSON(r);
    return NPU_OK;
}

/* 1 if perm[0..rank) holds every axis 0..rank-1 once (isa/program.py's check). */
static int is_permutation(const uint32_t *perm, uint32_t rank)
{
    uint32_t i, k;
    for (i = 0; i < rank; i++) {
        if (perm[i] >= rank)
            return 0;
        for (k = 0; k < i; k++)
            if (perm[k] == perm[i])
                return 0;
    }
    return 1;
}

/* A JSON integer in [-2^31, 2^31 - 1] (the scanner reads non-negative integers only). */
static npu_status_t read_i32(parser_t *ps, int32_t *out)
{
    nj_t *j = &ps->j;
    uint64_t v;
    int negative = 0;
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
    if (j->p < j->end && *j->p == '-') {
        if (j->end - j->p < 2 || j->p[1] < '0' || j->p[1] > '9')
            return fail_here(ps, NPU_E_HEADER, "expected an integer");
        negative = 1;
        j->p++;
    } else if (j->p >= j->end || *j->p < '0' || *j->p > '9') {
        return fail_here(ps, NPU_E_HEADER, "expected an integer");
    }
    TRY_JSON(nj_uint(j, negative ? 0x80000000u : 0x7FFFFFFFu, &v));
    *out = negative ? (int32_t)-(int64_t)v : (int32_t)v;
    return NPU_OK;
}

/* The unsigned fields of "patches" (Patches of isa/patches.py), in npu_patches_t order. */
static const struct patches_field {
    const char *key;
    uint32_t low;               /* high: MAX_PATCH */
    const char *range;          /* the error when outside [low, high] */
} PATCHES_FIELDS[8] = {
    {"height", 1, "patches height must be in [1, 65536]"},
    {"width", 1, "patches width must be in [1, 65536]"},
    {"step_y", 1, "patches step_y must be in [1, 65536]"},
    {"step_x", 1, "patches step_x must be in [1, 65536]"},
    {"top", 0, "patches top must be in [0, 65536]"},
    {"left", 0, "patches left must be in [0, 65536]"},
    {"rows", 1, "patches rows must be in [1, 65536]"},
    {"cols", 1, "patches cols must be in [1, 65536]"},
};

/* "patches": an object of exactly the eight fields above and "fill" (Patches.from_dict). */
static npu_status_t read_patches(parser_t *ps, npu_patches_t *p)
{
    char key[16];
    uint32_t value[8];
    unsigned seen = 0, k;
    int first = 1, r;
    TRY_JSON(nj_expect(&ps->j, '{'));
    while ((r = nj_member(&ps->j, &first, key, sizeof key)) == 1) {
        const char *at = ps->j.p;
        uint64_t v;
        if (strcmp(key, "fill") == 0) {
            TRY(read_i32(ps, &p->fill));
            seen |= 1u << 8;
            continue;
        }
        for (k = 0; k < 8 && strcmp(key, PATCHES_FIELDS[k].key) != 0; k++)
            ;
        if (k == 8)
            return fail_here(ps, NPU_E_HEADER, "unknown patches field");
        TRY_JSON(nj_uint(&ps->j, UINT64_MAX, &v));
        if (v < PATCHES_FIELDS[k].low || v > MAX_PATCH) {
            ps->j.p = at;
            return fail_here(ps, NPU_E_HEADER, PATCHES_FIELDS[k].range);
        }
        value[k] = (uint32_t)v;
        seen |= 1u << k;
    }
    TRY_JSON(r);
    if (seen != 0x1FFu)
        return fail_here(ps, NPU_E_HEADER,
                         "patches lack one of height, width, step_y, step_x, top, left, rows, cols, fill");
    p->height = value[0];
    p->width = value[1];
    p->step_y = value[2];
    p->step_x = value[3];
    p->top = value[4];
    p->left = value[5];
    p->rows = value[6];
    p->cols = value[7];
    return NPU_OK;
}

/* The values of an integer dtype, [low, high], for the patches' fill (numpy refuses to
 * convert an integer outside it); bool takes any (nonzero is true).  0 for other dtypes. */
static int dtype_range(int dtype, int64_t *low, int64_t *high)
{
    *low = INT64_MIN;
    *high = INT64_MAX;
    switch (dtype) {
    case NPU_DTYPE_BOOL: case NPU_DTYPE_INT64: return 1;
    case NPU_DTYPE_INT8: *low = INT8_MIN; *high = INT8_MAX; return 1;
    case NPU_DTYPE_UINT8: *low = 0; *high = UINT8_MAX; return 1;
    case NPU_DTYPE_INT16: *low = INT16_MIN; *high = INT16_MAX; return 1;
    case NPU_DTYPE_UINT16: *low = 0; *high = UINT16_MAX; return 1;
    case NPU_DTYPE_INT32: *low = INT32_MIN; *high = INT32_MAX; return 1;
    case NPU_DTYPE_UINT32: case NPU_DTYPE_UINT64: *low = 0; return 1;
    default: return 0;          /* floating point (and any dtype added later) */
    }
}

/* The checks of a binding's "patches" once the whole binding is read: NULL if it is fine. */
static const char *patches_error(const npu_tensor_t *t, int is_output)
{
    int64_t low, high;
    if (is_output)
        return "patches on an output: only inputs are written as patches";
    if (t->rank != 4)
        return "tensor patches need a rank-4 NHWC shape";
    if (!dtype_range(t->dtype, &low, &high))
        return "tensor patches need an integer or bool dtype";
    if (t->patches.fill < low || t->patches.fill > high)
        return "patches fill is outside the range of the tensor's dtype";
    return 0;
}

static npu_status_t parse_tensor(parser_t *ps, npu_tensor_t *t, int is_output)
{
    char key[16], word[SMALL_STRING];
    int first = 1, r;
    unsigned seen = 0;
    uint32_t perm_len = 0, i;
    const char *perm_at = 0, *patches_at = 0, *why;
    t->has_patches = 0;         /* the slot may hold an earlier "inputs" list's tensor */
    memset(&t->patches, 0, sizeof t->patches);
    TRY_JSON(nj_expect(&ps->j, '{'));
    while ((r = nj_member(&ps->j, &first, key, sizeof key)) == 1) {
        if (strcmp(key, "name") == 0) {
            TRY(read_name(ps, t->name, sizeof t->name, "tensor name longer than NPU_NAME_MAX"));
            seen |= 1;
        } else if (strcmp(key, "shape") == 0) {
            int efirst = 1, e;
            t->rank = 0;
            TRY_JSON(nj_expect(&ps->j, '['));
            while ((e = nj_element(&ps->j, &efirst)) == 1) {
                if (t->rank == NPU_MAX_RANK)
                    return fail_here(ps, NPU_E_LIMIT, "tensor rank above NPU_MAX_RANK");
                TRY(read_u32(ps, &t->shape[t->rank++]));
            }
            TRY_JSON(e);
            seen |= 2;
        } else if (strcmp(key, "dtype") == 0) {
            const char *at = ps->j.p;
            TRY(read_word(ps, word, sizeof word));
            t->dtype = lookup_dtype(word, &t->itemsize);
            if (t->dtype < 0) {
                ps->j.p = at;
                return fail_here(ps, NPU_E_HEADER, "unknown tensor dtype");
            }
            seen |= 4;
        } else if (strcmp(key, "addr") == 0) {
            TRY(read_u32(ps, &t->addr));
            seen |= 8;
        } else if (strcmp(key, "layout") == 0) {
            const char *at = ps->j.p;
            TRY(read_word(ps, word, sizeof word));
            t->layout = lookup_layout(word);
            if (t->layout < 0) {
                ps->j.p = at;
                return fail_here(ps, NPU_E_HEADER, "unknown tensor layout");
            }
            seen |= 16;
        } else if (strcmp(key, "perm") == 0) {
            int is_null;
            perm_at = ps->j.p;
            TRY_JSON(is_null = nj_null(&ps->j));
            if (is_null) {
                seen &= ~32u;           /* null: no perm, as in isa/program.py */
            } else {
                TRY(read_perm(ps, t, &perm_len));
                seen |= 32;
            }
        } else if (strcmp(key, "patches") == 0) {
            int is_null;
            patches_at = ps->j.p;
            TRY_JSON(is_null = nj_null(&ps->j));
            if (is_null) {
                t->has_patches = 0;     /* null: no patches, as in isa/program.py */
            } else {
                TRY(read_patches(ps, &t->patches));
                t->has_patches = 1;
            }
        } else {
            /* Never skipped: a binding field this driver does not know (like "perm" once)
             * changes where or how the data lies, and ignoring it gives wrong results. */
            return fail_here(ps, NPU_E_HEADER, "unknown tensor field");
        }
    }
    TRY_JSON(r);
    if ((seen & 31) != 31)
        return fail_here(ps, NPU_E_HEADER, "a tensor lacks one of name, shape, dtype, addr, layout");
    if (t->layout == NPU_LAYOUT_BRICK && t->rank != 4)
        return fail_here(ps, NPU_E_HEADER, "brick layout needs a rank-4 NHWC tensor");
    if (seen & 32) {
        if (perm_len != t->rank || !is_permutation(t->perm, t->rank)) {
            ps->j.p = perm_at;
            return fail_here(ps, NPU_E_HEADER, "tensor perm is not a permutation of its axes");
        }
    } else {
        for (i = 0; i < t->rank; i++)
            t->perm[i] = i;
    }
    if (t->has_patches && (why = patches_error(t, is_output)) != 0) {
        ps->j.p = patches_at;
        return fail_here(ps, NPU_E_HEADER, why);
    }
    return NPU_OK;
}

static npu_status_t parse_tensors(parser_t *ps, npu_tensor_t *list, uint32_t *n, int is_output)
{
    int first = 1, r;
    TRY_JSON(nj_expect(&ps->j, '['));
    while ((r = nj_element(&ps->j, &first)) == 1) {
        if (*n == NPU_MAX_TENSORS)
            return fail_here(ps, NPU_E_LIMIT, "more inputs or outputs than NPU_MAX_TENSORS");
        TRY(parse_tensor(ps, &list[(*n)++], is_output));
    }
    TRY_JSON(r);
    return NPU_OK;
}

static npu_status_t parse_header(parser_t *ps)
{
    npu_program_t *prog = ps->prog;
    char key[16];
    int first = 1, r;
    unsigned seen = 0;
    TRY_JSON(nj_expect(&ps->j, '{'));
    while ((r = nj_member(&ps->j, &first, key, sizeof key)) == 1) {
        if (strcmp(key, "config") == 0) {
            TRY(parse_config(ps, &prog->config));
            seen |= 1;
        } else if (strcmp(key, "instructions") == 0) {
            TRY(read_u32(ps, &prog->instructions));
            seen |= 2;
        } else if (strcmp(key, "segments") == 0) {
            prog->n_segments = 0;
            TRY(parse_segments(ps));
            seen |= 4;
        } else if (strcmp(key, "inputs") == 0) {
            prog->n_inputs = 0;
            TRY(parse_tensors(ps, prog->inputs, &prog->n_inputs, 0));
            seen |= 8;
        } else if (strcmp(key, "outputs") == 0) {
            prog->n_outputs = 0;
            TRY(parse_tensors(ps, prog->outputs, &prog->n_outputs, 1));
            seen |= 16;
        } else if (strcmp(key, "info") == 0 || strcmp(key, "program_addr") == 0) {
            /* "info" is free-form and informative only; "program_addr" repeats the program
             * segment's address, which is authoritative (as in isa/program.py). */
            TRY_JSON(nj_skip(&ps->j));
        } else {
            /* Any other field may be a format addition this driver would misread by
             * ignoring it. */
            return fail_here(ps, NPU_E_HEADER, "unknown header field");
        }
    }
    TRY_JSON(r);
    TRY_JSON(nj_end(&ps->j));
    if (seen != 31)
        return fail_here(ps, NPU_E_HEADER,
                         "the header lacks one of config, instructions, segments, inputs, outputs");
    return NPU_OK;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* Size of axis i of the graph's shape permuted by perm: the host array transposed. */
static uint64_t permuted_dim(const npu_tensor_t *t, uint32_t i)
{
    return t->shape[t->perm[i]];
}

/* Size of stored axis i (TensorBinding.stored_shape): the permuted shape, or with patches
 * (N, rows, cols, height * width * C) of the permuted NHWC shape (below 2^64: the last is
 * at most 2^16 * 2^16 * (2^32 - 1)). */
static uint64_t stored_dim(const npu_tensor_t *t, uint32_t i)
{
    const npu_patches_t *p = &t->patches;
    if (!t->has_patches || i == 0)
        return permuted_dim(t, i);
    if (i == 1)
        return p->rows;
    if (i == 2)
        return p->cols;
    return (uint64_t)p->height * p->width * permuted_dim(t, 3);
}

/* Elements of the host array, and external bytes of a tensor (isa.layout.layout_bytes of
 * the stored shape); 0 on overflow. */
static int tensor_size(npu_tensor_t *t, uint64_t lanes)
{
    uint64_t count = 1, stored = 1, bytes;
    uint32_t i;
    for (i = 0; i < t->rank; i++) {
        if (t->shape[i] && count > UINT64_MAX / 2 / 8 / t->shape[i])
            return 0;
        count *= t->shape[i];
    }
    t->count = count;
    /* Elements of the stored array: `count` unless the tensor is written as patches. */
    for (i = 0; i < t->rank; i++) {
        uint64_t d = stored_dim(t, i);
        if (d && stored > UINT64_MAX / 2 / 8 / d)
            return 0;
        stored *= d;
    }
    if (t->layout == NPU_LAYOUT_BRICK) {
        /* N * ceil(C/L) * H * W bricks of L lanes; fits: C <= ceil(C/L) * L < C + L. */
        uint64_t c = stored_dim(t, 3), cb = ceil_div(c, lanes);
        if (c == 0) {
            bytes = 0;
        } else {
            uint64_t per_c = stored / c;    /* N * H * W */
            if (per_c && cb * lanes * t->itemsize > UINT64_MAX / 2 / per_c)
                return 0;
            bytes = per_c * cb * lanes * t->itemsize;
        }
    } else if (t->layout == NPU_LAYOUT_ROWS) {
        /* Rows of the last stored axis padded to whole L-element vectors; at least one word. */
        uint64_t d = t->rank ? stored_dim(t, t->rank - 1) : 1;
        uint64_t outer = 1, width = ceil_div(d, lanes) * lanes * t->itemsize;
        for (i = 0; i + 1 < t->rank; i++)
            outer *= stored_dim(t, i);      /* <= stored when d > 0; bounded above otherwise */
        if (outer && width > UINT64_MAX / 2 / outer)
            return 0;
        bytes = outer * width;
        if (bytes < lanes)
            bytes = lanes;
    } else {
        bytes = stored * t->itemsize;
        bytes = ceil_div(bytes ? bytes : 1, lanes) * lanes;
    }
    t->nbytes = bytes;
    return 1;
}

static npu_status_t finish(parser_t *ps)
{
    npu_program_t *prog = ps->prog;
    uint64_t lanes = prog->config.bus_bytes, end = 0;
    const npu_segment_t *code = 0;
    uint32_t i, k;
    for (i = 0; i < prog->n_segments; i++) {
        const npu_segment_t *s = &prog->segments[i];
        if (!code && strcmp(s->name, NPU_IMAGE_PROGRAM_SEGMENT) == 0)
            code = s;
        if ((uint64_t)s->addr + s->size > end)
            end = (uint64_t)s->addr + s->size;
    }
    if (!code)
        return image_fail(prog, NPU_E_HEADER, "no \"program\" segment", ps->json_offset);
    if ((uint64_t)prog->instructions * NPU_INSTR_BYTES != code->size)
        return image_fail(prog, NPU_E_HEADER, "instruction count does not match the program segment",
                          ps->json_offset);
    prog->program_addr = code->addr;
    for (k = 0; k < 2; k++) {
        npu_tensor_t *list = k ? prog->outputs : prog->inputs;
        uint32_t n = k ? prog->n_outputs : prog->n_inputs;
        for (i = 0; i < n; i++) {
            if (!tensor_size(&list[i], lanes))
                return image_fail(prog, NPU_E_HEADER, "tensor too large", ps->json_offset);
            if (list[i].addr + list[i].nbytes > end)
                end = list[i].addr + list[i].nbytes;
        }
    }
    prog->extent = ceil_div(end, lanes) * lanes;
    if (prog->extent > prog->config.ext_mem_bytes)
        return image_fail(prog, NPU_E_HEADER, "the program reaches past ext_mem_bytes", ps->json_offset);
    return NPU_OK;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

npu_status_t npu_program_parse(npu_program_t *prog, const void *image, size_t size)
{
    const uint8_t *img = (const uint8_t *)image;
    parser_t ps;
    uint32_t jlen;
    npu_status_t s;
    if (!prog)
        return NPU_E_ARG;
    memset(prog, 0, sizeof *prog);
#define NPU_CONFIG_DEFAULT_(name, dflt) prog->config.name = dflt;
    NPU_FOR_EACH_CONFIG_FIELD(NPU_CONFIG_DEFAULT_)
#undef NPU_CONFIG_DEFAULT_
    if (!img)
        return image_fail(prog, NPU_E_ARG, "no image", 0);
    if (memcmp(img, NPU_IMAGE_MAGIC, size < NPU_IMAGE_MAGIC_BYTES ? size : NPU_IMAGE_MAGIC_BYTES) != 0)
        return image_fail(prog, NPU_E_MAGIC, "not an NPU program image (bad magic)", 0);
    if (size < NPU_IMAGE_HEADER_BYTES)
        return image_fail(prog, NPU_E_TRUNCATED, "truncated header", size);
    if (le32(img + NPU_IMAGE_VERSION_OFFSET) != NPU_IMAGE_VERSION)
        return image_fail(prog, NPU_E_VERSION, "unsupported program format version", NPU_IMAGE_VERSION_OFFSET);
    jlen = le32(img + NPU_IMAGE_JSON_LEN_OFFSET);
    if (jlen > size - NPU_IMAGE_HEADER_BYTES)
        return image_fail(prog, NPU_E_TRUNCATED, "truncated header", size);
    ps.prog = prog;
    ps.json_offset = NPU_IMAGE_HEADER_BYTES;
    ps.payload = img + NPU_IMAGE_HEADER_BYTES + jlen;
    ps.payload_size = size - NPU_IMAGE_HEADER_BYTES - jlen;
    nj_init(&ps.j, img + NPU_IMAGE_HEADER_BYTES, jlen);
    s = parse_header(&ps);
    if (s == NPU_OK)
        s = finish(&ps);
    return s;
}

static int find(const npu_tensor_t *list, uint32_t n, const char *name)
{
    uint32_t i;
    if (!name)
        return -1;
    for (i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return (int)i;
    return -1;
}

int npu_find_input(const npu_program_t *prog, const char *name)
{
    return prog ? find(prog->inputs, prog->n_inputs, name) : -1;
}

int npu_find_output(const npu_program_t *prog, const char *name)
{
    return prog ? find(prog->outputs, prog->n_outputs, name) : -1;
}

/* -- external memory -------------------------------------------------------------------- */

/* Staging buffer of the memory transfers, on the stack of npu_load, npu_set_input and
 * npu_get_output: external memory is reached only through the transport, in blocks of up
 * to this many bytes (one frame of the UART bridge carries at most 1024).  At least 8 (the
 * largest element). */
#ifndef NPU_XFER_BYTES
#define NPU_XFER_BYTES 256
#endif
#if NPU_XFER_BYTES < 8
#error "NPU_XFER_BYTES must hold the largest element (8 bytes)"
#endif

/* A sequential stream over external memory through the transport.  The layout converters
 * below visit external memory strictly in address order, so a write stream coalesces their
 * element runs into whole-buffer mem_write calls and a read stream serves them from
 * whole-buffer mem_read calls.  The first transport error sticks in `status`; later calls
 * then do nothing but keep pointers valid, and the caller returns that error. */
typedef struct ext_stream {
    const npu_dev_t *dev;
    uint32_t base;          /* external address of buf[0] */
    size_t fill;            /* write: bytes buffered; read: bytes valid in buf */
    size_t pos;             /* read: next byte of buf */
    uint64_t end;           /* read: end of the region, never read past */
    npu_status_t status;
    uint8_t buf[NPU_XFER_BYTES];
} ext_stream_t;

static void stream_init(ext_stream_t *s, const npu_dev_t *dev, uint32_t addr, uint64_t end)
{
    s->dev = dev;
    s->base = addr;
    s->fill = s->pos = 0;
    s->end = end;
    s->status = NPU_OK;
}

static void stream_flush(ext_stream_t *s)
{
    if (s->fill && s->status == NPU_OK)
        s->status = npu_mem_write(s->dev, s->base, s->buf, s->fill);
    s->base += (uint32_t)s->fill;
    s->fill = 0;
}

/* Write: room for `size` bytes at the write position. */
static uint8_t *stream_put_slot(ext_stream_t *s, size_t size)
{
    uint8_t *p;
    if (s->fill + size > NPU_XFER_BYTES)
        stream_flush(s);
    p = s->buf + s->fill;
    s->fill += size;
    return p;
}

/* Write `n` bytes of `src` (NULL: zeros). */
static void stream_put(ext_stream_t *s, const uint8_t *src, uint64_t n)
{
    while (n) {
        size_t room = NPU_XFER_BYTES - s->fill, k = n < room ? (size_t)n : room;
        if (!room) {
            stream_flush(s);
            continue;
        }
        if (src) {
            memcpy(s->buf + s->fill, src, k);
            src += k;
        } else {
            memset(s->buf + s->fill, 0, k);
        }
        s->fill += k;
        n -= k;
    }
}

/* Read: make at least `size` bytes available at buf + pos (refilling from the position). */
static void stream_refill(ext_stream_t *s, size_t size)
{
    uint64_t left;
    if (s->pos + size <= s->fill)
        return;
    s->base += (uint32_t)s->pos;
    s->pos = 0;
    left = s->end > s->base ? s->end - s->base : 0;
    s->fill = left < NPU_XFER_BYTES ? (size_t)left : NPU_XFER_BYTES;
    if (s->fill < size) {               /* a converter bug: never read past the tensor */
        memset(s->buf, 0, NPU_XFER_BYTES);
        s->fill = NPU_XFER_BYTES;
        if (s->status == NPU_OK)
            s->status = NPU_E_ARG;
    } else if (s->status == NPU_OK) {
        s->status = npu_mem_read(s->dev, s->base, s->buf, s->fill);
    }
}

static const uint8_t *stream_get_slot(ext_stream_t *s, size_t size)
{
    const uint8_t *p;
    stream_refill(s, size);
    p = s->buf + s->pos;
    s->pos += size;
    return p;
}

/* Read `n` bytes into `dst` (NULL: skip them). */
static void stream_get(ext_stream_t *s, uint8_t *dst, uint64_t n)
{
    while (n) {
        size_t k;
        stream_refill(s, 1);
        k = s->fill - s->pos;
        if (k > n)
            k = (size_t)n;
        if (dst) {
            memcpy(dst, s->buf + s->pos, k);
            dst += k;
        }
        s->pos += k;
        n -= k;
    }
}

/* Zero external memory [0, prog->extent) where no segment lies, then write the segments:
 * over a link, the bytes a segment will cover are sent once. */
npu_status_t npu_load(const npu_dev_t *dev, const npu_program_t *prog)
{
    ext_stream_t st;
    uint64_t cursor = 0;
    uint32_t i;
    if (!dev || !prog || (!dev->transport && !dev->mem))
        return NPU_E_ARG;
    if (prog->extent > dev->mem_size)
        return NPU_E_MEMORY;
    while (cursor < prog->extent) {
        uint64_t next = prog->extent;
        int covered = 0;
        for (i = 0; i < prog->n_segments; i++) {
            const npu_segment_t *seg = &prog->segments[i];
            if (seg->addr <= cursor && cursor < (uint64_t)seg->addr + seg->size) {
                cursor = (uint64_t)seg->addr + seg->size;
                covered = 1;
            } else if (seg->addr > cursor && seg->addr < next) {
                next = seg->addr;
            }
        }
        if (covered)
            continue;
        stream_init(&st, dev, (uint32_t)cursor, next);
        stream_put(&st, NULL, next - cursor);
        stream_flush(&st);
        TRY(st.status);
        cursor = next;
    }
    for (i = 0; i < prog->n_segments; i++) {
        const npu_segment_t *seg = &prog->segments[i];
        stream_init(&st, dev, seg->addr, (uint64_t)seg->addr + seg->size);
        stream_put(&st, seg->data, seg->size);
        stream_flush(&st);
        TRY(st.status);
    }
    return NPU_OK;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Copy one element of `size` bytes between native and little-endian order (the same
 * operation both ways). */
static void copy_element(uint8_t *dst, const uint8_t *src, uint32_t size)
{
    uint32_t b;
    if (size == 1 || host_is_little_endian()) {
        memcpy(dst, src, size);
        return;
    }
    for (b = 0; b < size; b++)
        dst[b] = src[size - 1 - b];
}

/* Checks shared by npu_set_input and npu_get_output. */
static npu_status_t tensor_access(const npu_dev_t *dev, const npu_tensor_t *t, const void *data, size_t bytes)
{
    if ((!dev->transport && !dev->mem) || (!data && bytes))
        return NPU_E_ARG;
    if (t->count > SIZE_MAX / t->itemsize || bytes != (size_t)(t->count * t->itemsize))
        return NPU_E_TENSOR;
    if ((uint64_t)t->addr + t->nbytes > dev->mem_size)
        return NPU_E_MEMORY;
    return NPU_OK;
}

/* Byte strides of the host array along the stored axes.  The host array is dense row-major
 * in the graph's axis order; stored axis i is graph axis perm[i]. */
static void host_strides(const npu_tensor_t *t, uint64_t stride[NPU_MAX_RANK])
{
    uint64_t graph[NPU_MAX_RANK], step = t->itemsize;
    uint32_t i;
    for (i = t->rank; i-- > 0;) {
        graph[i] = step;
        step *= t->shape[i];
    }
    for (i = 0; i < t->rank; i++)
        stride[i] = graph[t->perm[i]];
}

static int is_identity(const npu_tensor_t *t)
{
    uint32_t i;
    for (i = 0; i < t->rank; i++)
        if (t->perm[i] != i)
            return 0;
    return 1;
}

/* `count` elements between the stream (a contiguous run in external memory) and host
 * elements `stride` bytes apart. */
static void copy_run(ext_stream_t *s, uint8_t *host, uint64_t count, uint64_t stride, uint32_t size, int to_ext)
{
    uint64_t i;
    if (stride == size && (size == 1 || host_is_little_endian())) {
        if (to_ext)
            stream_put(s, host, count * size);
        else
            stream_get(s, host, count * size);
        return;
    }
    for (i = 0; i < count; i++, host += stride) {
        if (to_ext)
            copy_element(stream_put_slot(s, size), host, size);
        else
            copy_element(host, stream_get_slot(s, size), size);
    }
}

/* Padding of `n` bytes: zeros when writing, skipped when reading. */
static void pad(ext_stream_t *s, uint64_t n, int to_ext)
{
    if (to_ext)
        stream_put(s, NULL, n);
    else
        stream_get(s, NULL, n);
}

/* Between the host array and bricks [N][ceil(C/L)][H][W][L] of the stored NHWC array
 * (isa/layout.py): one run of up to L channels per brick. */
static void convert_brick(const npu_tensor_t *t, uint64_t lanes, ext_stream_t *s, uint8_t *host, int to_ext)
{
    uint64_t n, cb, h, w, st[NPU_MAX_RANK];
    uint64_t N = stored_dim(t, 0), H = stored_dim(t, 1), W = stored_dim(t, 2), C = stored_dim(t, 3);
    host_strides(t, st);
    for (n = 0; n < N; n++)
        for (cb = 0; cb * lanes < C; cb++)
            for (h = 0; h < H; h++)
                for (w = 0; w < W; w++) {
                    uint64_t c0 = cb * lanes, used = C - c0 < lanes ? C - c0 : lanes;
                    uint8_t *dense = host + n * st[0] + h * st[1] + w * st[2] + c0 * st[3];
                    copy_run(s, dense, used, st[3], t->itemsize, to_ext);
                    pad(s, (lanes - used) * t->itemsize, to_ext);
                }
}

/* Between the host array and the "rows" layout: the stored array row-major, each run along
 * its last axis padded with zeros to whole L-element vectors (rank 0 reads as [1]). */
static void convert_rows(const npu_tensor_t *t, uint64_t lanes, ext_stream_t *s, uint8_t *host, int to_ext)
{
    uint64_t st[NPU_MAX_RANK], idx[NPU_MAX_RANK], run, runs, r, offset = 0, padded;
    uint32_t last, k;
    if (t->count == 0)
        return;
    if (t->rank == 0) {
        copy_run(s, host, 1, t->itemsize, t->itemsize, to_ext);
        pad(s, (lanes - 1) * t->itemsize, to_ext);
        return;
    }
    host_strides(t, st);
    last = t->rank - 1;
    run = stored_dim(t, last);
    padded = ceil_div(run, lanes) * lanes * t->itemsize;
    runs = t->count / run;
    for (k = 0; k < last; k++)
        idx[k] = 0;
    for (r = 0; r < runs; r++) {
        copy_run(s, host + offset, run, st[last], t->itemsize, to_ext);
        pad(s, padded - run * t->itemsize, to_ext);
        for (k = last; k-- > 0;) {      /* next stored index, last axes fastest */
            offset += st[k];
            if (++idx[k] < stored_dim(t, k))
                break;
            offset -= idx[k] * st[k];
            idx[k] = 0;
        }
    }
}

/* Between the host array and the stored array row-major ("flat"): the "rows" layout with
 * one-element vectors, so no padding (runs along the last stored axis, the other stored
 * indices counted like an odometer). */
static void convert_flat(const npu_tensor_t *t, ext_stream_t *s, uint8_t *host, int to_ext)
{
    if (is_identity(t)) {           /* the host array is the stored array */
        copy_run(s, host, t->count, t->itemsize, t->itemsize, to_ext);
        return;
    }
    convert_rows(t, 1, s, host, to_ext);
}

/* The patches' fill as one stored element: its little-endian bytes in the dtype (in range,
 * by the parse; bool: nonzero is true), as numpy converts it. */
static void fill_element(const npu_tensor_t *t, uint8_t out[8])
{
    uint64_t v = (uint64_t)(int64_t)t->patches.fill;
    uint32_t b;
    if (t->dtype == NPU_DTYPE_BOOL)
        v = t->patches.fill != 0;
    for (b = 0; b < t->itemsize; b++)
        out[b] = (uint8_t)(v >> (8 * b));
}

/* Elements [k, k + count) of patch (n, i, j) of an input written as patches, P[n, i, j, k..]
 * of npu_patches_t, to the stream: runs of up to C channels of one image pixel read from the
 * host array (`st`: its strides along the permuted axes), or of `fill` outside the image. */
static void put_patches_run(ext_stream_t *s, const npu_tensor_t *t, uint8_t *host, const uint64_t st[],
                            const uint8_t *fill, uint64_t n, uint64_t i, uint64_t j, uint64_t k, uint64_t count)
{
    const npu_patches_t *p = &t->patches;
    uint64_t H = permuted_dim(t, 1), W = permuted_dim(t, 2), C = permuted_dim(t, 3), e;
    while (count) {                     /* count > 0: C > 0 */
        uint64_t tap = k / C, c = k % C, dy = tap / p->width, dx = tap % p->width;
        /* Image pixel (y - top, x - left); y, x < 2^33. */
        uint64_t y = p->step_y * i + dy, x = p->step_x * j + dx;
        uint64_t run = C - c < count ? C - c : count;
        if (y >= p->top && y - p->top < H && x >= p->left && x - p->left < W) {
            uint8_t *pixel = host + n * st[0] + (y - p->top) * st[1] + (x - p->left) * st[2] + c * st[3];
            copy_run(s, pixel, run, st[3], t->itemsize, 1);
        } else {
            for (e = 0; e < run; e++)
                memcpy(stream_put_slot(s, t->itemsize), fill, t->itemsize);
        }
        k += run;
        count -= run;
    }
}

/* An input written as patches (to external memory only): P of npu_patches_t, computed
 * element by element from the host array while streaming it out (never held whole), in
 * the binding's layout: for "brick" one run of up to L elements of P's last axis per brick
 * (as convert_brick), for "rows" and "flat" all of it per (n, i, j), padded with zeros to
 * whole L-element vectors for "rows" (as convert_rows; "flat" is rows of 1-element vectors). */
static void convert_patches(const npu_tensor_t *t, uint64_t lanes, ext_stream_t *s, uint8_t *host)
{
    uint64_t st[NPU_MAX_RANK], N = stored_dim(t, 0), R = stored_dim(t, 1), Q = stored_dim(t, 2);
    uint64_t K = stored_dim(t, 3), n, cb, i, j;
    uint8_t fill[8];
    host_strides(t, st);
    fill_element(t, fill);
    if (t->layout == NPU_LAYOUT_BRICK) {
        for (n = 0; n < N; n++)
            for (cb = 0; cb * lanes < K; cb++)
                for (i = 0; i < R; i++)
                    for (j = 0; j < Q; j++) {
                        uint64_t c0 = cb * lanes, used = K - c0 < lanes ? K - c0 : lanes;
                        put_patches_run(s, t, host, st, fill, n, i, j, c0, used);
                        pad(s, (lanes - used) * t->itemsize, 1);
                    }
    } else {
        uint64_t vector = t->layout == NPU_LAYOUT_ROWS ? lanes : 1;
        uint64_t padding = (ceil_div(K, vector) * vector - K) * t->itemsize;
        for (n = 0; n < N; n++)
            for (i = 0; i < R; i++)
                for (j = 0; j < Q; j++) {
                    put_patches_run(s, t, host, st, fill, n, i, j, 0, K);
                    pad(s, padding, 1);
                }
    }
}

/* The tensor's conversion in either direction; the stream covers [addr, addr + nbytes),
 * every byte of it written (padding as zeros) or read past.  Patches only to external
 * memory (the parse refuses them on outputs; npu_get_output checks). */
static void convert(const npu_program_t *prog, const npu_tensor_t *t, ext_stream_t *s, uint8_t *host, int to_ext)
{
    uint64_t lanes = prog->config.bus_bytes;
    uint64_t done;
    if (t->has_patches)
        convert_patches(t, lanes, s, host);
    else if (t->layout == NPU_LAYOUT_BRICK)
        convert_brick(t, lanes, s, host, to_ext);
    else if (t->layout == NPU_LAYOUT_ROWS)
        convert_rows(t, lanes, s, host, to_ext);
    else
        convert_flat(t, s, host, to_ext);
    /* What the layout leaves after the data (an empty tensor's word, a flat tensor's
     * padding to whole bus words): zero it on the way in. */
    done = (uint64_t)s->base + (to_ext ? s->fill : s->pos) - t->addr;
    if (to_ext && done < t->nbytes)
        stream_put(s, NULL, t->nbytes - done);
}

npu_status_t npu_set_input(const npu_dev_t *dev, const npu_program_t *prog, uint32_t index,
                           const void *data, size_t bytes)
{
    const npu_tensor_t *t;
    ext_stream_t st;
    if (!dev || !prog || index >= prog->n_inputs)
        return NPU_E_ARG;
    t = &prog->inputs[index];
    TRY(tensor_access(dev, t, data, bytes));
    stream_init(&st, dev, t->addr, (uint64_t)t->addr + t->nbytes);
    /* The host array is only read; the converters share code with the read direction. */
    convert(prog, t, &st, (uint8_t *)(uintptr_t)data, 1);
    stream_flush(&st);
    return st.status;
}

npu_status_t npu_get_output(const npu_dev_t *dev, const npu_program_t *prog, uint32_t index,
                            void *data, size_t bytes)
{
    const npu_tensor_t *t;
    ext_stream_t st;
    if (!dev || !prog || index >= prog->n_outputs)
        return NPU_E_ARG;
    t = &prog->outputs[index];
    if (t->has_patches)             /* patches cannot be read back (never parsed on an output) */
        return NPU_E_ARG;
    TRY(tensor_access(dev, t, data, bytes));
    if (dev->cache_invalidate && dev->mem)
        dev->cache_invalidate(dev->ctx, dev->mem + t->addr, (size_t)t->nbytes);
    stream_init(&st, dev, t->addr, (uint64_t)t->addr + t->nbytes);
    convert(prog, t, &st, (uint8_t *)data, 0);
    return st.status;
}
