/* Mutation fuzzer for the decoder's trace inputs:
 *   - PT streams (pt/tid-N.pt): a synthetic stream over the seed trace's
 *     code (PSB+, TIPs, TNTs, overflows, tracing off and on), with bytes
 *     flipped, set, inserted, removed, truncated and PSBs spliced in. Each
 *     mutant is decoded with one thread and with several threads on small
 *     chunks: no crash, bounded time, and the same events either way.
 *   - loss indexes (pt/tid-N.idx): a valid index mutated the same way, read
 *     by auxidx_parse and by the decoder: failures must carry a message
 *     naming the file and an offset, and decoding must go on.
 *   - sideband (the .sb files: perf records): valid records of every type
 *     ptrec writes, mutated, walked with perf_rec_parse (the collector's
 *     reader): malformed records must be reported with their offset.
 *
 *   fuzz_inputs SEED_DIR [ROUNDS] [RANDOM_SEED]
 *
 * SEED_DIR is a trace directory with jvm/ (tests/common's mkmeta output);
 * the mutants are written to a temporary copy. Any crash or sanitizer
 * report fails the run, as does a broken expectation (exit status 1). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "common/auxidx.h"
#include "decoder/decode.h"

#define DECODE_LIMIT_S 20.0     /* per decode of a few KiB, even under sanitizers */

static uint64_t rng_state;
static int failures;

static uint64_t rng(void)
{
    /* xorshift64*: reproducible from the seed printed at start. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_inputs: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Mutates p (len bytes of cap) in place; orig is the unmutated input. */
static void mutate(uint8_t *p, size_t *len, size_t cap, const uint8_t *orig, size_t orig_len)
{
    static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
                                     2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
    int edits = 1 + (int)(rng() % 4);
    for (int e = 0; e < edits && *len; e++) {
        size_t at = rng() % *len;
        switch (rng() % 8) {
        case 0: p[at] ^= (uint8_t)(1u << (rng() % 8)); break;
        case 1: p[at] = (uint8_t)rng(); break;
        case 2: *len = at; break;                       /* truncate */
        case 3:                                         /* a size-like value */
            if (*len - at >= 8) {
                static const uint64_t v[] = { 0, 1, 0x7fffffff, UINT64_MAX, 1ull << 40, 255 };
                uint64_t x = v[rng() % 6];
                memcpy(p + at, &x, 8);
            }
            break;
        case 4: {                                       /* splice from the original */
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
        case 5: {                                       /* remove a stretch */
            size_t n = 1 + rng() % 32;
            if (n > *len - at)
                n = *len - at;
            memmove(p + at, p + at + n, *len - at - n);
            *len -= n;
            break;
        }
        case 6:                                         /* a PSB pattern */
            if (*len + sizeof psb <= cap) {
                memmove(p + at + sizeof psb, p + at, *len - at);
                memcpy(p + at, psb, sizeof psb);
                *len += sizeof psb;
            }
            break;
        default:                                        /* insert random bytes */
            if (*len < cap) {
                size_t n = 1 + rng() % 16;
                if (n > cap - *len)
                    n = cap - *len;
                memmove(p + at + n, p + at, *len - at);
                for (size_t k = 0; k < n; k++)
                    p[at + k] = (uint8_t)rng();
                *len += n;
            }
            break;
        }
    }
}

/* ---- PT ----------------------------------------------------------------------- */

typedef struct enc {
    uint8_t buf[8192];
    struct pt_encoder *e;
} enc;

static void put(enc *x, struct pt_packet p)
{
    (void)pt_enc_next(x->e, &p);
}

static void put_ip(enc *x, enum pt_packet_type t, uint64_t ip)
{
    struct pt_packet p = { .type = t };
    p.payload.ip.ipc = pt_ipc_sext_48;
    p.payload.ip.ip = ip;
    put(x, p);
}

static void put_psb(enc *x, uint64_t tsc, uint64_t ip)
{
    put(x, (struct pt_packet){ .type = ppt_psb });
    struct pt_packet t = { .type = ppt_tsc };
    t.payload.tsc.tsc = tsc;
    put(x, t);
    struct pt_packet m = { .type = ppt_mode };
    m.payload.mode.leaf = pt_mol_exec;
    m.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    put(x, m);
    put_ip(x, ppt_fup, ip);
    put(x, (struct pt_packet){ .type = ppt_psbend });
}

/* A stream that goes around the seed's code. */
static size_t make_stream(const dm_model *m, uint8_t *out, size_t cap)
{
    uint64_t addrs[64];
    size_t n = 0;
    for (size_t i = 0; i < m->ncodelets && n < 16; i++)
        addrs[n++] = m->codelets[i].begin;
    for (size_t i = 0; i < m->ncodes && n < 40; i++) {
        addrs[n++] = m->codes[i].vaddr;
        addrs[n++] = m->codes[i].vaddr + m->codes[i].size / 2;
    }
    for (size_t i = 0; i < m->nblobs && n < 48; i++)
        addrs[n++] = m->blobs[i].vaddr;
    if (!n)
        addrs[n++] = 0x1000;
    enc x;
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = x.buf;
    cfg.end = x.buf + sizeof x.buf;
    x.e = pt_alloc_encoder(&cfg);
    uint64_t tsc = m->start_tsc + 100;
    uint64_t at = addrs[0];
    put_psb(&x, tsc, at);
    for (int i = 0; i < 400; i++) {
        uint64_t r = rng() % 100;
        if (r < 60) {
            at = addrs[rng() % n];
            put_ip(&x, ppt_tip, at);
        } else if (r < 75) {
            struct pt_packet t = { .type = ppt_tnt_8 };
            t.payload.tnt.bit_size = (uint8_t)(1 + rng() % 6);
            t.payload.tnt.payload = rng() & 0x3f;
            put(&x, t);
        } else if (r < 88) {
            tsc += 1 + rng() % 1000;
            put_psb(&x, tsc, at);
        } else if (r < 92) {
            put_ip(&x, ppt_tip_pgd, 0);
            put_ip(&x, ppt_tip_pge, at);
        } else if (r < 94) {
            put(&x, (struct pt_packet){ .type = ppt_ovf });
            put_ip(&x, ppt_fup, at);
        } else {
            struct pt_packet t = { .type = ppt_tsc };
            tsc += 1 + rng() % 100;
            t.payload.tsc.tsc = tsc;
            put(&x, t);
        }
    }
    uint64_t off = 0;
    pt_enc_get_offset(x.e, &off);
    pt_free_encoder(x.e);
    if (off > cap)
        off = cap;
    memcpy(out, x.buf, off);
    return (size_t)off;
}

typedef struct digest {
    uint64_t n, h;
} digest;

static int digest_event(const dc_event *ev, void *ctx)
{
    digest *d = ctx;
    uint64_t v[] = { (uint64_t)ev->kind, ev->flags, ev->tsc, ev->ip, (uint64_t)ev->opcode,
                     ev->exit_ip, ev->method_id, (uint64_t)ev->bci, ev->depth,
                     (uint64_t)(uintptr_t)ev->code, (uint64_t)ev->reason,
                     (uint64_t)ev->error, ev->offset, ev->end_offset, ev->lost_bytes };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        d->h = (d->h ^ v[i]) * 0x100000001b3ull;
    d->n++;
    if (ev->kind == DC_GAP && (ev->reason == DC_GAP_DECODE || ev->reason == DC_GAP_NOCODE) &&
        ev->error >= 0)
        fail("a decode gap at offset %" PRIu64 " without a libipt error code", ev->offset);
    return 0;
}

static bool write_file(const char *path, const uint8_t *p, size_t n)
{
    GError *ge = NULL;
    if (!g_file_set_contents(path, (const char *)p, (gssize)n, &ge)) {
        fprintf(stderr, "fuzz_inputs: %s: %s\n", path, ge->message);
        g_error_free(ge);
        return false;
    }
    return true;
}

static void decode_checked(const dm_model *m, di_cache *cache, const char *pt, const char *idx,
                           const char *what, long round)
{
    static const uint64_t chunks[] = { 1, 64, 700, 1 << 20 };
    dc_options o1 = { .threads = 1, .chunk_bytes = chunks[rng() % 4] };
    dc_options on = { .threads = 2 + (unsigned)(rng() % 3), .chunk_bytes = o1.chunk_bytes };
    digest d1 = { 0, 0xcbf29ce484222325ull }, dn = d1;
    dc_output out1 = { .sink = digest_event, .ctx = &d1 };
    dc_output outn = { .sink = digest_event, .ctx = &dn };
    dc_stats s1, sn;
    char err[512] = "";
    double t0 = now();
    int r1 = dc_decode_stream_opts(&(dc_trace){ m, cache, NULL }, pt, idx, &out1, &o1, &s1, err,
                                   sizeof err);
    double t1 = now();
    int rn = dc_decode_stream_opts(&(dc_trace){ m, cache, NULL }, pt, idx, &outn, &on, &sn, err,
                                   sizeof err);
    double t2 = now();
    if (r1 < 0 || rn < 0) {
        if (!err[0] || !strstr(err, pt))
            fail("%s round %ld: a stream that cannot be read has no message naming it: '%s'",
                 what, round, err);
        return;
    }
    if (t1 - t0 > DECODE_LIMIT_S || t2 - t1 > DECODE_LIMIT_S)
        fail("%s round %ld: decoding took %.1f s / %.1f s", what, round, t1 - t0, t2 - t1);
    if (d1.n != dn.n || d1.h != dn.h)
        fail("%s round %ld: 1 thread and %u threads (chunks of %" PRIu64 " bytes) differ: %"
             PRIu64 " and %" PRIu64 " events", what, round, on.threads, o1.chunk_bytes, d1.n,
             dn.n);
    if (s1.problems && !s1.problem[0])
        fail("%s round %ld: a problem without a message", what, round);
    if (s1.insns != sn.insns || s1.skipped_bytes != sn.skipped_bytes)
        fail("%s round %ld: counts differ between thread counts", what, round);
}

/* ---- the loss index ------------------------------------------------------------ */

static size_t make_index(uint8_t *out, size_t cap, size_t stream_len)
{
    size_t n = 0;
    memcpy(out, AUXIDX_MAGIC, 8);
    uint32_t v = AUXIDX_VERSION, rs = AUXIDX_RECORD_SIZE;
    memcpy(out + 8, &v, 4);
    memcpy(out + 12, &rs, 4);
    n = AUXIDX_HEADER_SIZE;
    uint64_t off = 0;
    for (int i = 0; i < 6 && n + AUXIDX_RECORD_SIZE <= cap; i++) {
        uint64_t size = stream_len / 6;
        uint64_t rec[5] = { off, size, (i % 2) ? AUXIDX_TRUNCATED : 0, 1000 + (uint64_t)i,
                            (i % 2) ? 4096 : 0 };
        memcpy(out + n, rec, sizeof rec);
        n += AUXIDX_RECORD_SIZE;
        off += size;
    }
    return n;
}

static void check_index_bytes(const uint8_t *p, size_t n, long round)
{
    auxidx idx;
    char err[512] = "";
    int rc = auxidx_parse(p, n, "tid-1.idx", &idx, err, sizeof err);
    if (rc != 0 && (!err[0] || strncmp(err, "tid-1.idx", 9)))
        fail("idx round %ld: auxidx_parse %d without a message naming the file: '%s'", round,
             rc, err);
    if (rc == 1 && !strstr(err, "offset"))
        fail("idx round %ld: no offset in '%s'", round, err);
    if (rc >= 0)
        auxidx_free(&idx);
}

/* ---- sideband ------------------------------------------------------------------- */

#ifdef JPT_FUZZ_SIDEBAND
#include <linux/perf_event.h>

#include "collector/perf_records.h"

static size_t put_rec(uint8_t *p, size_t cap, uint32_t type, const void *body, size_t blen)
{
    size_t sid = perf_sample_id_size(PERF_JPT_SAMPLE_TYPE);
    size_t size = 8 + ((blen + 7) & ~(size_t)7) + sid;
    if (size > cap || size > UINT16_MAX)
        return 0;
    memset(p, 0, size);
    uint16_t misc = 0, sz = (uint16_t)size;
    memcpy(p, &type, 4);
    memcpy(p + 4, &misc, 2);
    memcpy(p + 6, &sz, 2);
    if (blen)
        memcpy(p + 8, body, blen);
    uint8_t *s = p + size - sid;
    uint32_t pid = 7, tid = 8;
    uint64_t t = 123456789;
    memcpy(s, &pid, 4);
    memcpy(s + 4, &tid, 4);
    memcpy(s + 8, &t, 8);
    return size;
}

static size_t make_sideband(uint8_t *p, size_t cap)
{
    size_t n = 0;
    uint32_t two[2] = { 7, 8 };
    uint64_t aux[3] = { 0, 4096, 1 }, lost[2] = { 1, 5 };
    uint32_t exitb[4] = { 7, 1, 8, 1 };
    uint64_t exitt = 99;
    uint8_t exitbody[24];
    memcpy(exitbody, exitb, 16);
    memcpy(exitbody + 16, &exitt, 8);
    uint8_t comm[16] = { 7, 0, 0, 0, 8, 0, 0, 0, 'j', 'a', 'v', 'a', 0 };
    uint8_t mmap2[64] = { 0 };
    memcpy(mmap2, two, 8);
    memcpy(mmap2 + 56, "/lib.so", 8);
    for (int rep = 0; rep < 4; rep++) {
        n += put_rec(p + n, cap - n, PERF_RECORD_ITRACE_START, two, 8);
        n += put_rec(p + n, cap - n, PERF_RECORD_AUX, aux, sizeof aux);
        n += put_rec(p + n, cap - n, PERF_RECORD_COMM, comm, sizeof comm);
        n += put_rec(p + n, cap - n, PERF_RECORD_SWITCH_CPU_WIDE, two, 8);
        n += put_rec(p + n, cap - n, PERF_RECORD_LOST, lost, sizeof lost);
        n += put_rec(p + n, cap - n, PERF_RECORD_MMAP2, mmap2, sizeof mmap2);
        n += put_rec(p + n, cap - n, PERF_RECORD_EXIT, exitbody, sizeof exitbody);
        n += put_rec(p + n, cap - n, PERF_RECORD_SWITCH, NULL, 0);
    }
    return n;
}

static void walk_sideband(const uint8_t *p, size_t n, long round)
{
    size_t off = 0;
    while (off < n) {
        perf_rec r;
        char err[512] = "";
        long k = perf_rec_parse(p + off, n - off, PERF_JPT_SAMPLE_TYPE, off, &r, err, sizeof err);
        if (k == 0)
            break;
        if (k < 0) {
            char want[64];
            snprintf(want, sizeof want, "offset %zu:", off);
            if (strncmp(err, want, strlen(want)))
                fail("sb round %ld: malformed record at %zu reported as '%s'", round, off, err);
            off += 8;       /* as a reader resynchronizing would */
            continue;
        }
        if ((size_t)k > n - off || k % 8)
            fail("sb round %ld: record at %zu claims %ld bytes", round, off, k);
        if (r.type == PERF_RECORD_COMM && r.u.comm.comm) {
            const char *c = r.u.comm.comm;
            if (c < (const char *)p + off || c >= (const char *)p + off + (size_t)k)
                fail("sb round %ld: comm outside its record", round);
            else
                (void)strnlen(c, (size_t)((const char *)p + off + (size_t)k - c));
        }
        off += (size_t)k;
    }
}

static long fuzz_sideband(long rounds)
{
    enum { SCAP = 16384 };
    static uint8_t sorig[SCAP], sbuf[SCAP];
    size_t slen = make_sideband(sorig, SCAP / 2);
    walk_sideband(sorig, slen, -1);
    for (long r = 0; r < rounds && failures < 10; r++) {
        size_t len = slen;
        memcpy(sbuf, sorig, slen);
        mutate(sbuf, &len, SCAP, sorig, slen);
        uint8_t *exact = g_malloc(len ? len : 1);  /* so the sanitizer sees overreads */
        memcpy(exact, sbuf, len);
        walk_sideband(exact, len, r);
        g_free(exact);
    }
    return rounds;
}
#else
static long fuzz_sideband(long rounds)
{
    (void)rounds;
    return 0;
}
#endif

/* ---- driver -------------------------------------------------------------------- */

static bool copy_file(const char *from, const char *to)
{
    gchar *data;
    gsize n;
    if (!g_file_get_contents(from, &data, &n, NULL))
        return false;
    bool ok = write_file(to, (const uint8_t *)data, n);
    g_free(data);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_inputs SEED_DIR [ROUNDS] [RANDOM_SEED]\n");
        return 2;
    }
    long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 200;
    rng_state = argc > 3 ? strtoull(argv[3], NULL, 0) : 0x6a70742d70747a7aull;
    if (!rng_state)
        rng_state = 1;
    char *dir = g_dir_make_tmp("jpt-fuzz-XXXXXX", NULL);
    char *jvm = g_build_filename(dir, "jvm", NULL);
    char *ptdir = g_build_filename(dir, "pt", NULL);
    g_mkdir(jvm, 0755);
    g_mkdir(ptdir, 0755);
    const char *files[] = { "meta.jpt", "code.bin" };
    for (size_t i = 0; i < 2; i++) {
        char *from = g_build_filename(argv[1], "jvm", files[i], NULL);
        char *to = g_build_filename(jvm, files[i], NULL);
        if (!copy_file(from, to)) {
            fprintf(stderr, "fuzz_inputs: cannot copy %s\n", from);
            return 2;
        }
        g_free(from);
        g_free(to);
    }
    char err[1024];
    dm_model *m = dm_load(dir, err, sizeof err);
    if (!m) {
        fprintf(stderr, "fuzz_inputs: %s\n", err);
        return 2;
    }
    di_cache *cache = di_cache_new(m, err, sizeof err);
    if (!cache) {
        fprintf(stderr, "fuzz_inputs: %s\n", err);
        return 2;
    }
    char *pt = g_build_filename(ptdir, "tid-1.pt", NULL);
    char *idxp = g_build_filename(ptdir, "tid-1.idx", NULL);
    printf("fuzz_inputs: %ld rounds per input, seed 0x%llx\n", rounds,
           (unsigned long long)rng_state);

    enum { CAP = 16384 };
    static uint8_t orig[CAP], buf[CAP], iorig[1024], ibuf[1024];
    size_t olen = make_stream(m, orig, CAP / 2);
    size_t ilen = make_index(iorig, sizeof iorig / 2, olen);
    double t0 = now();

    /* (a) PT */
    for (long r = 0; r < rounds && failures < 10; r++) {
        size_t len = olen;
        memcpy(buf, orig, olen);
        mutate(buf, &len, CAP, orig, olen);
        if (!write_file(pt, buf, len))
            return 2;
        decode_checked(m, cache, pt, NULL, "pt", r);
    }
    double t1 = now();
    /* (b) the loss index, alone and with the stream */
    if (!write_file(pt, orig, olen))
        return 2;
    for (long r = 0; r < rounds * 4 && failures < 10; r++) {
        size_t len = ilen;
        memcpy(ibuf, iorig, ilen);
        mutate(ibuf, &len, sizeof ibuf, iorig, ilen);
        check_index_bytes(ibuf, len, r);
        if (r % 4 == 0) {
            if (!write_file(idxp, ibuf, len))
                return 2;
            decode_checked(m, cache, pt, idxp, "idx", r);
        }
    }
    /* a stream that is not there, a directory in its place */
    decode_checked(m, cache, ptdir, NULL, "pt-dir", 0);
    double t2 = now();
    /* (c) sideband */
    long sb = fuzz_sideband(rounds * 50);
    double t3 = now();
    printf("fuzz_inputs: PT %ld mutants of %zu bytes (%.1f s), index %ld (%.1f s), sideband "
           "%ld (%.1f s): %s\n", rounds, olen, t1 - t0, rounds * 4, t2 - t1, sb, t3 - t2,
           failures ? "FAILED" : "no crash, all checks hold");
    di_cache_free(cache);
    dm_free(m);
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_inputs: could not remove %s\n", dir);
    g_free(cmd);
    g_free(pt);
    g_free(idxp);
    g_free(jvm);
    g_free(ptdir);
    g_free(dir);
    return failures ? 1 : 0;
}
