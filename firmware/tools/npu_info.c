/* npu_info: print what the driver reads from program images (a host tool, hosted C99).
 *
 *   npu_info FILE...              one summary per image
 *   npu_info --prefixes FILE...   parser robustness check: parse every proper prefix of each
 *                                 image, and every prefix of its JSON header as an image with
 *                                 no payload, each from a buffer of exactly its size (so that
 *                                 a memory checker sees any read past the end); all must be
 *                                 refused.  Prints the counts.
 *
 * Exit status 0 if every image parsed (and, with --prefixes, every prefix was refused).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_driver.h"

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    size_t cap = 0, n = 0;
    if (!f)
        return NULL;
    for (;;) {
        size_t got;
        if (n == cap) {
            uint8_t *bigger = realloc(data, cap = cap ? 2 * cap : 65536);
            if (!bigger) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = bigger;
        }
        got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *size = n;
    return data;
}

static const char *layout_name(int layout)
{
#define NPU_LAYOUT_NAME_(id, text) if (layout == id) return text;
    NPU_FOR_EACH_LAYOUT(NPU_LAYOUT_NAME_)
#undef NPU_LAYOUT_NAME_
    return "?";
}

static const char *dtype_name(int dtype)
{
#define NPU_DTYPE_NAME_(id, text, bytes) if (dtype == id) return text;
    NPU_FOR_EACH_DTYPE(NPU_DTYPE_NAME_)
#undef NPU_DTYPE_NAME_
    return "?";
}

static void print_tensor(const char *kind, const npu_tensor_t *t)
{
    uint32_t d;
    printf("  %s %s %s %s addr=%lu shape=", kind, t->name, dtype_name(t->dtype), layout_name(t->layout),
           (unsigned long)t->addr);
    for (d = 0; d < t->rank; d++)
        printf(d ? "x%lu" : "%lu", (unsigned long)t->shape[d]);
    for (d = 0; d < t->rank && t->perm[d] == d; d++)
        ;
    if (d < t->rank)                /* stored transposed: print the perm */
        for (d = 0; d < t->rank; d++)
            printf(d ? ",%lu" : " perm=%lu", (unsigned long)t->perm[d]);
    if (t->has_patches)             /* written as a convolution's patches (isa/patches.py) */
        printf(" patches=%lux%lu/%lu,%lu+%lu,%lu:%lux%lu fill=%ld", (unsigned long)t->patches.height,
               (unsigned long)t->patches.width, (unsigned long)t->patches.step_y,
               (unsigned long)t->patches.step_x, (unsigned long)t->patches.top,
               (unsigned long)t->patches.left, (unsigned long)t->patches.rows,
               (unsigned long)t->patches.cols, (long)t->patches.fill);
    printf(" bytes=%llu\n", (unsigned long long)t->nbytes);
}

static int summary(const char *path, const uint8_t *data, size_t size)
{
    static npu_program_t prog;      /* large: keep it off the stack */
    uint32_t i;
    npu_status_t s = npu_program_parse(&prog, data, size);
    if (s != NPU_OK) {
        printf("%s: %s: %s at byte %lu\n", path, npu_status_name(s), prog.error ? prog.error : "",
               (unsigned long)prog.error_offset);
        return 1;
    }
    printf("%s: ok hw_config=0x%08lx instructions=%lu program_addr=%lu extent=%llu\n", path,
           (unsigned long)npu_expected_hw_config(&prog.config), (unsigned long)prog.instructions,
           (unsigned long)prog.program_addr, (unsigned long long)prog.extent);
#define NPU_CONFIG_PRINT_(name, dflt) printf("  config %s=%llu\n", #name, (unsigned long long)prog.config.name);
    NPU_FOR_EACH_CONFIG_FIELD(NPU_CONFIG_PRINT_)
#undef NPU_CONFIG_PRINT_
    for (i = 0; i < prog.n_segments; i++)
        printf("  segment %s addr=%lu size=%lu\n", prog.segments[i].name,
               (unsigned long)prog.segments[i].addr, (unsigned long)prog.segments[i].size);
    for (i = 0; i < prog.n_inputs; i++)
        print_tensor("input", &prog.inputs[i]);
    for (i = 0; i < prog.n_outputs; i++)
        print_tensor("output", &prog.outputs[i]);
    return 0;
}

/* Parse `n` bytes (`head` then `rest`) from a buffer of exactly that size; 1 if accepted. */
static int parse_exact(const uint8_t *head, size_t head_size, const uint8_t *rest, size_t n)
{
    static npu_program_t prog;      /* large: keep it off the stack */
    int ok;
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memcpy(copy, head, head_size < n ? head_size : n);
    if (n > head_size)
        memcpy(copy + head_size, rest, n - head_size);
    ok = npu_program_parse(&prog, copy, n) == NPU_OK;
    free(copy);
    return ok;
}

static int prefixes(const char *path, const uint8_t *data, size_t size)
{
    size_t n, jlen = 0, accepted = 0, json_accepted = 0;
    uint8_t head[NPU_IMAGE_HEADER_BYTES];
    for (n = 0; n < size; n++)
        accepted += (size_t)parse_exact(data, size, NULL, n);
    if (size >= NPU_IMAGE_HEADER_BYTES) {
        const uint8_t *len = data + NPU_IMAGE_JSON_LEN_OFFSET;
        jlen = (size_t)len[0] | (size_t)len[1] << 8 | (size_t)len[2] << 16 | (size_t)len[3] << 24;
        jlen = jlen < size - NPU_IMAGE_HEADER_BYTES ? jlen : size - NPU_IMAGE_HEADER_BYTES;
        memcpy(head, data, NPU_IMAGE_HEADER_BYTES);
        for (n = 0; n <= jlen; n++) {
            head[NPU_IMAGE_JSON_LEN_OFFSET] = (uint8_t)n;
            head[NPU_IMAGE_JSON_LEN_OFFSET + 1] = (uint8_t)(n >> 8);
            head[NPU_IMAGE_JSON_LEN_OFFSET + 2] = (uint8_t)(n >> 16);
            head[NPU_IMAGE_JSON_LEN_OFFSET + 3] = (uint8_t)(n >> 24);
            json_accepted += (size_t)parse_exact(head, sizeof head, data + NPU_IMAGE_HEADER_BYTES,
                                                 NPU_IMAGE_HEADER_BYTES + n);
        }
    }
    printf("%s: %lu prefixes, %lu accepted; %lu header prefixes, %lu accepted\n", path,
           (unsigned long)size, (unsigned long)accepted, (unsigned long)(jlen + 1),
           (unsigned long)json_accepted);
    return accepted != 0 || json_accepted != 0;
}

int main(int argc, char **argv)
{
    int i, status = 0, prefix_mode = 0;
    for (i = 1; i < argc; i++) {
        uint8_t *data;
        size_t size = 0;
        if (strcmp(argv[i], "--prefixes") == 0) {
            prefix_mode = 1;
            continue;
        }
        data = read_file(argv[i], &size);
        if (!data) {
            fprintf(stderr, "%s: cannot read\n", argv[i]);
            status = 1;
            continue;
        }
        status |= prefix_mode ? prefixes(argv[i], data, size) : summary(argv[i], data, size);
        free(data);
    }
    return status;
}
