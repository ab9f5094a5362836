/* Decoding throughput of one trace, for bench/decode-speed.
 *
 *   decbench TRACE.DIR [--raw] [--jobs N] [--chunk KIB] [--runs R]
 *
 * Decodes every per-thread stream of the trace R times (default 3) and
 * prints one line per run: "<mode> <bytes> <seconds> <MB/s>", the time being
 * decoding only (the metadata is loaded and the section cache made once,
 * before).
 *   --raw   libipt alone: a block decoder per stream over the same code
 *           image (advanced through the code timeline as decoding passes
 *           its times, resynchronizing at the next PSB after errors and
 *           after cycles that read no trace, as jpt's decoder does), no
 *           event mapping: the ceiling for the decoder.
 *   else    jpt's decoder (dc_decode_stream_opts with N threads) into a sink
 *           that only counts events. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "decoder/decode.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_event(const dc_event *ev, void *ctx)
{
    (void)ev;
    (*(uint64_t *)ctx)++;
    return 0;
}

typedef struct raw_counts {
    uint64_t blocks, insns, errors;
    uint64_t stuck;            /* cycles that read no trace (dc_cycle_stuck) */
} raw_counts;

/* libipt's block decoder over the stream at path, nothing else. */
static int raw_stream(di_cache *cache, const char *path, raw_counts *rc, uint64_t *bytes)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "decbench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || sb.st_size <= 0) {
        close(fd);
        return 0;
    }
    size_t size = (size_t)sb.st_size;
    uint8_t *buf = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (buf == MAP_FAILED) {
        fprintf(stderr, "decbench: %s: cannot map: %s\n", path, strerror(errno));
        return -1;
    }
    *bytes += size;
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = buf;
    cfg.end = buf + size;
    cfg.flags.variant.block.end_on_call = 1;
    struct pt_block_decoder *dec = pt_blk_alloc_decoder(&cfg);
    di_image *im = NULL;
    char err[512];
    int status = pt_blk_sync_forward(dec);
    uint64_t tsc = 0;
    while (status != -pte_eos) {
        if (status < 0) {
            rc->errors++;
            status = pt_blk_sync_forward(dec);
            continue;
        }
        uint32_t lm, lc;
        uint64_t t = 0;
        if (pt_blk_time(dec, &t, &lm, &lc) >= 0 && t > tsc)
            tsc = t;
        if (!im) {
            im = di_image_new_resolved(cache, tsc, NULL, 0, true, err, sizeof err);
            if (!im) {
                fprintf(stderr, "decbench: %s\n", err);
                break;
            }
            pt_blk_set_image(dec, di_image_get(im));
        }
        dc_cycle_guard cycle = { 0 };
        for (;;) {
            while (status & pts_event_pending) {
                struct pt_event ev;
                status = pt_blk_event(dec, &ev, sizeof ev);
                if (status < 0)
                    break;
                if (ev.has_tsc && ev.tsc > tsc)
                    tsc = ev.tsc;
            }
            if (status < 0)
                break;
            if (pt_blk_time(dec, &t, &lm, &lc) >= 0 && t > tsc)
                tsc = t;
            if (tsc >= di_image_next_change(im) && di_image_advance(im, tsc) == 1)
                pt_blk_set_image(dec, di_image_get(im));
            struct pt_block b;
            status = pt_blk_next(dec, &b, sizeof b);
            rc->blocks++;
            rc->insns += b.ninsn;
            /* a cycle through stale code (this image does not apply
             * HotSpot's call-site patches): an error, as in jpt's decoder */
            if (status >= 0 && dc_cycle_stuck(&cycle, dec, &b)) {
                rc->stuck++;
                status = -pte_bad_image;
            }
            if (status < 0)
                break;
        }
        if (status < 0 && status != -pte_eos) {
            rc->errors++;
            status = pt_blk_sync_forward(dec);
        }
    }
    pt_blk_free_decoder(dec);
    di_image_free(im);
    munmap(buf, size);
    return 0;
}

typedef struct raw_call {
    di_cache *cache;
    const char *path;
    raw_counts *rc;
    uint64_t *bytes;
    int status;
} raw_call;

static void raw_stream_call(void *p)
{
    raw_call *c = p;
    c->status = raw_stream(c->cache, c->path, c->rc, c->bytes);
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    bool raw = false;
    dc_options opt = { .threads = 1 };
    int runs = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--raw"))
            raw = true;
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            opt.threads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            opt.chunk_bytes = strtoull(argv[++i], NULL, 10) << 10;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!dir && argv[i][0] != '-')
            dir = argv[i];
        else {
            fprintf(stderr, "usage: decbench TRACE.DIR [--raw] [--jobs N] [--chunk KIB] "
                    "[--runs R]\n");
            return 2;
        }
    }
    if (!dir || runs < 1 || opt.threads < 1) {
        fprintf(stderr, "usage: decbench TRACE.DIR [--raw] [--jobs N] [--chunk KIB] [--runs R]\n");
        return 2;
    }
    char err[1024];
    dm_model *m = dm_load(dir, err, sizeof err);
    if (!m) {
        fprintf(stderr, "decbench: %s\n", err);
        return 1;
    }
    di_cache *cache = di_cache_new(m, err, sizeof err);
    if (!cache) {
        fprintf(stderr, "decbench: %s\n", err);
        return 1;
    }
    dc_trace_info info;
    if (dc_read_info(dir, &info, err, sizeof err) < 0)
        memset(&info, 0, sizeof info);
    uint32_t *tids = NULL;
    size_t ncpu = 0, n = dc_list_thread_streams(dir, &tids, &ncpu);
    if (!n) {
        fprintf(stderr, "decbench: %s/pt: no per-thread streams\n", dir);
        return 1;
    }
    int status = 0;
    for (int r = 0; r < runs && !status; r++) {
        uint64_t bytes = 0, events = 0;
        raw_counts rc = { 0 };
        double t0 = now();
        for (size_t i = 0; i < n && !status; i++) {
            char *pt = g_strdup_printf("%s/pt/tid-%u.pt", dir, tids[i]);
            char *idx = g_strdup_printf("%s/pt/tid-%u.idx", dir, tids[i]);
            if (raw) {
                /* on a deep stack, as the decoder runs libipt */
                raw_call c = { cache, pt, &rc, &bytes, 0 };
                dc_call_on_deep_stack(raw_stream_call, &c);
                if (c.status < 0)
                    status = 1;
            } else {
                dc_output out = { .sink = count_event, .ctx = &events };
                dc_stats st;
                if (dc_decode_stream_opts(&(dc_trace){ m, cache, &info }, pt, idx, &out, &opt,
                                          &st, err, sizeof err) < 0) {
                    fprintf(stderr, "decbench: %s\n", err);
                    status = 1;
                }
                bytes += st.pt_bytes;
            }
            g_free(pt);
            g_free(idx);
        }
        double dt = now() - t0;
        if (raw)
            printf("raw %" PRIu64 " %.3f %.2f blocks %" PRIu64 " insns %" PRIu64 " errors %"
                   PRIu64 " stuck %" PRIu64 "\n", bytes, dt, (double)bytes / 1e6 / dt, rc.blocks,
                   rc.insns, rc.errors, rc.stuck);
        else
            printf("jpt-%u %" PRIu64 " %.3f %.2f events %" PRIu64 "\n", opt.threads, bytes, dt,
                   (double)bytes / 1e6 / dt, events);
        fflush(stdout);
    }
    g_free(tids);
    di_cache_free(cache);
    dm_free(m);
    return status;
}
