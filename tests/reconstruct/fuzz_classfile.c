/* Mutation fuzzer of the class-file parser, bytecode decoding and CFG
 * builder: fuzz_classfile ITERATIONS CLASS... [--seed N]
 * Each mutant of one of the class files (bit flips, byte sets, truncation,
 * grown length and count fields, splices, duplicated tails) is parsed; every
 * method with code is checked and its CFG built; every constant-pool view is
 * queried. A crash or sanitizer report fails the run, as does a failure
 * without a message. Built with -fsanitize=fuzzer (JPT_LIBFUZZER) the entry
 * point is LLVMFuzzerTestOneInput. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reconstruct/cfg.h"
#include "decoder/classfile.h"

static long failures_without_message;
static long parsed_ok, cfgs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    cf_class c;
    err[0] = 0;
    if (cf_parse(data, size, &c, err, sizeof err) < 0) {
        if (!err[0])
            failures_without_message++;
        cf_free(&c);
        return 0;
    }
    parsed_ok++;
    for (uint32_t i = 0; i < c.cp_count; i++) {
        uint8_t tag, kind;
        uint16_t ref, bsm;
        const char *k, *n, *s;
        (void)cf_utf8(&c, i);
        (void)cf_class_name(&c, i);
        (void)cf_member_ref(&c, i, &tag, &k, &n, &s);
        (void)cf_method_handle(&c, i, &kind, &ref);
        (void)cf_dynamic(&c, i, &bsm, &n, &s);
    }
    for (uint32_t i = 0; i < c.nbsm; i++)
        for (uint32_t a = 0; a <= c.bsm[i].nargs; a++)
            (void)cf_bsm_arg(&c, &c.bsm[i], a);
    for (uint32_t i = 0; i < c.nmethods; i++) {
        const cf_method *m = &c.methods[i];
        if (!m->code)
            continue;
        err[0] = 0;
        int ok = rc_code_check(m->code, m->code_len, m->handlers, m->nhandlers, err, sizeof err);
        if (ok < 0 && !err[0])
            failures_without_message++;
        err[0] = 0;
        rc_cfg *g = rc_cfg_build(m->code, m->code_len, m->handlers, m->nhandlers, err,
                                 sizeof err);
        if (!g && !err[0])
            failures_without_message++;
        if ((g != NULL) != (ok == 0))
            failures_without_message++; /* the check and the build must agree */
        if (g) {
            cfgs++;
            for (uint32_t k = 0; k < g->ninsn; k++) {
                if (rc_cfg_index(g, g->bci[k]) != k)
                    abort();
                for (uint32_t e = g->first[k]; e < g->first[k + 1]; e++)
                    if (g->edge[e].to >= g->ninsn)
                        abort();
            }
            rc_cfg_free(g);
        }
    }
    cf_free(&c);
    return 0;
}

#ifndef JPT_LIBFUZZER
static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Where the methods' code lies in each original: half the mutants edit
 * code bytes only, so that most of them reach the decoder and CFG builder. */
typedef struct span {
    size_t off, len;
} span;
static span spans[64][256];
static int nspans[64];

static void mutate(uint8_t *p, size_t *len, size_t cap, const uint8_t *orig, size_t orig_len,
                   int which)
{
    if (nspans[which] && rng() % 2) {
        const span *sp = &spans[which][rng() % (uint64_t)nspans[which]];
        int edits = 1 + (int)(rng() % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = sp->off + rng() % sp->len;
            static const uint8_t ops[] = { 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xc4, 0xc8, 0xc9,
                                           0x99, 0xb6, 0xba, 0xcb, 0xff, 0x00, 0x80, 0x7f };
            switch (rng() % 3) {
            case 0: p[at] = ops[rng() % sizeof ops]; break;
            case 1: p[at] ^= (uint8_t)(1u << (rng() % 8)); break;
            default: p[at] = (uint8_t)rng(); break;
            }
        }
        return;
    }
    int edits = 1 + (int)(rng() % 3);
    for (int e = 0; e < edits && *len; e++) {
        size_t at = rng() % *len;
        switch (rng() % 7) {
        case 0: p[at] ^= (uint8_t)(1u << (rng() % 8)); break;
        case 1: p[at] = (uint8_t)rng(); break;
        case 2: *len = at; break;
        case 3: /* grow a big-endian u16 length or count */
            if (*len - at >= 2) {
                unsigned v = (unsigned)(p[at] << 8 | p[at + 1]);
                static const unsigned d[] = { 1, 2, 4, 255, 0x8000, 0xffff };
                v = (v + d[rng() % 6]) & 0xffff;
                p[at] = (uint8_t)(v >> 8);
                p[at + 1] = (uint8_t)v;
            }
            break;
        case 4: /* a big-endian u32 of an interesting value */
            if (*len - at >= 4) {
                static const uint32_t v[] = { 0, 1, 0x7fffffff, 0xffffffff, 0x10000, 0xffff };
                uint32_t x = v[rng() % 6];
                p[at] = (uint8_t)(x >> 24);
                p[at + 1] = (uint8_t)(x >> 16);
                p[at + 2] = (uint8_t)(x >> 8);
                p[at + 3] = (uint8_t)x;
            }
            break;
        case 5: { /* splice a chunk of the original somewhere else */
            size_t from = rng() % orig_len, n = 1 + rng() % 32;
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
                size_t n = (cap - *len) < 64 ? cap - *len : 64;
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
        fprintf(stderr, "usage: fuzz_classfile ITERATIONS CLASS... [--seed N]\n");
        return 2;
    }
    long iters = strtol(argv[1], NULL, 10);
    rng_state = 0x6a70742d636c6173ull;
    uint8_t *orig[64];
    size_t olen[64];
    int n = 0;
    for (int i = 2; i < argc && n < 64; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            rng_state = strtoull(argv[++i], NULL, 0);
            continue;
        }
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "fuzz_classfile: %s: cannot open\n", argv[i]);
            return 2;
        }
        orig[n] = malloc(1 << 16);
        olen[n] = fread(orig[n], 1, 1 << 16, f);
        fclose(f);
        n++;
    }
    if (!n || !rng_state)
        return 2;
    printf("fuzz_classfile: %ld mutants of %d class files, seed 0x%llx\n", iters, n,
           (unsigned long long)rng_state);
    for (int i = 0; i < n; i++) {
        long before = parsed_ok;
        LLVMFuzzerTestOneInput(orig[i], olen[i]);
        cf_class c;
        char err[256];
        if (parsed_ok == before || cf_parse(orig[i], olen[i], &c, err, sizeof err) < 0) {
            fprintf(stderr, "fuzz_classfile: class file %d does not parse\n", i);
            return 1;
        }
        for (uint32_t k = 0; k < c.nmethods && nspans[i] < 256; k++)
            if (c.methods[k].code)
                spans[i][nspans[i]++] =
                    (span){ (size_t)(c.methods[k].code - orig[i]), c.methods[k].code_len };
        cf_free(&c);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint8_t *buf = malloc((1 << 17) + 256);
    for (long it = 0; it < iters; it++) {
        int which = (int)(rng() % (uint64_t)n);
        size_t len = olen[which];
        memcpy(buf, orig[which], len);
        mutate(buf, &len, olen[which] * 2 + 64, orig[which], olen[which], which);
        uint8_t *exact = malloc(len ? len : 1); /* exact size: overreads are seen */
        memcpy(exact, buf, len);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("fuzz_classfile: done in %.2f s, %ld parsed, %ld CFGs, %ld failures without a "
           "message\n", s, parsed_ok, cfgs, failures_without_message);
    free(buf);
    for (int i = 0; i < n; i++)
        free(orig[i]);
    return failures_without_message ? 1 : 0;
}
#endif
