/* Fuzz harness for the metadata reader and typed views.
 *
 * Built two ways: with -fsanitize=fuzzer (clang) LLVMFuzzerTestOneInput is
 * the libFuzzer entry point; otherwise main() is a self-contained driver:
 *   fuzz_jmeta SEED_DIR ITERATIONS [RANDOM_SEED]
 * mutates SEED_DIR/jvm/meta.jpt (bit flips, byte sets, truncation, splices,
 * size-field edits) and runs every mutant through the reader, the parser
 * and every iterator. Any crash or sanitizer report fails the run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jmeta.h"
#include "common/jmrec.h"
#include "decoder/classfile.h"

static const uint8_t code_bytes[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    jm_reader *r = jm_reader_open_mem(data, size, code_bytes, sizeof code_bytes, "fuzz", err,
                                      sizeof err);
    if (!r)
        return 0;
    jm_record rec;
    jm_rec m;
    while (jm_reader_next(r, &rec) == 1) {
        if (jm_parse(&rec, &m, err, sizeof err) < 0)
            continue;
        switch (m.type) {
        case JM_NMETHOD_LOAD: {
            uint64_t pc;
            uint32_t depth;
            jm_frame fr[8];
            (void)jm_reader_code(r, m.u.nmethod_load.code.code_offset, m.u.nmethod_load.code.size,
                                 err, sizeof err);
            while (jm_pcs_next(&m.u.nmethod_load.pcs, &pc, &depth, fr, 8) == 1)
                ;
            break;
        }
        case JM_CODE_CACHE: {
            jm_heap h;
            uint32_t left = m.u.code_cache.nheaps;
            while (jm_heaps_next(&m.u.code_cache.heaps, &left, &h) == 1)
                ;
            break;
        }
        case JM_CLASS_PREPARE: {
            uint64_t id;
            uint32_t left = m.u.class_prepare.nmethods;
            while (jm_methods_next(&m.u.class_prepare.methods, &left, &id) == 1)
                ;
            break;
        }
        case JM_CLASSES_INITIALIZED: {
            jm_cur c = m.u.classes_initialized.ids;
            for (uint32_t k = 0; k < m.u.classes_initialized.n && jm_cur_ok(&c); k++)
                (void)jm_get_u64(&c);
            break;
        }
        case JM_STATS: {
            jm_slice n;
            uint64_t v;
            uint32_t left = m.u.stats.n;
            while (jm_stats_next(&m.u.stats.items, &left, &n, &v) == 1)
                ;
            break;
        }
        case JM_CLASS_FILE: {
            cf_header h;
            (void)cf_parse_header(m.u.class_file.bytes.p, m.u.class_file.bytes.len, &h, err,
                                  sizeof err);
            break;
        }
        default:
            break;
        }
    }
    jm_reader_close(r);
    return 0;
}

#ifndef JPT_LIBFUZZER
static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: reproducible from the seed printed at start. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static void mutate(uint8_t *p, size_t *len, size_t cap, const uint8_t *orig, size_t orig_len)
{
    int edits = 1 + (int)(rng() % 4);
    for (int e = 0; e < edits && *len; e++) {
        size_t at = rng() % *len;
        switch (rng() % 6) {
        case 0: p[at] ^= (uint8_t)(1u << (rng() % 8)); break;
        case 1: p[at] = (uint8_t)rng(); break;
        case 2: *len = at; break;
        case 3: /* an interesting value in what may be a size or count field */
            if (*len - at >= 4) {
                static const uint32_t v[] = { 0, 1, 0x7fffffff, 0xffffffff, 0x10000000, 255 };
                uint32_t x = v[rng() % 6];
                memcpy(p + at, &x, 4);
            }
            break;
        case 4: { /* splice a chunk of the original somewhere else */
            size_t from = rng() % orig_len, n = 1 + rng() % 64;
            if (from + n > orig_len)
                n = orig_len - from;
            if (at + n > cap)
                n = cap - at;
            memcpy(p + at, orig + from, n);
            if (at + n > *len)
                *len = at + n;
            break;
        }
        default: /* duplicate a tail */
            if (*len < cap) {
                size_t n = (cap - *len) < 128 ? cap - *len : 128;
                if (n > *len - at)
                    n = *len - at;
                memmove(p + at + n, p + at, *len - at);
                *len += n;
            }
            break;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: fuzz_jmeta SEED_DIR ITERATIONS [RANDOM_SEED]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/jvm/%s", argv[1], JM_META_FILE);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_jmeta: %s: cannot open\n", path);
        return 2;
    }
    uint8_t *orig = malloc(1 << 20);
    size_t orig_len = fread(orig, 1, 1 << 20, f);
    fclose(f);
    long iters = strtol(argv[2], NULL, 10);
    rng_state = argc > 3 ? strtoull(argv[3], NULL, 0) : 0x6a70742d66757a7aull;
    if (!rng_state)
        rng_state = 1;
    printf("fuzz_jmeta: %ld mutants of %zu bytes, seed 0x%llx\n", iters, orig_len,
           (unsigned long long)rng_state);
    size_t cap = orig_len * 2 + 256;
    uint8_t *buf = malloc(cap);
    LLVMFuzzerTestOneInput(orig, orig_len);
    for (long i = 0; i < iters; i++) {
        size_t len = orig_len;
        memcpy(buf, orig, orig_len);
        mutate(buf, &len, cap, orig, orig_len);
        /* An exact-size copy so the sanitizer sees any overread. */
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    printf("fuzz_jmeta: done, no crash\n");
    free(buf);
    free(orig);
    return 0;
}
#endif
