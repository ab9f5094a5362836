/* ptcheck: verify a trace directory written by libptemu.so with testlog=on.
 *
 * For every stream that has a test log (eval/tid-<TID>.log), decode pt/tid-<TID>.pt (or the
 * uncut eval/tid-<TID>.pt with --lossless) with libipt's instruction-flow decoder and
 * compare it, instruction by instruction, with the instructions the plugin saw execute.
 * Memory for the decoder comes from eval/code.bin, using for each instruction the bytes it
 * ran with (the JIT reuses addresses, so no single image is right for a whole run).
 *
 * Where trace is legitimately missing (TRUNCATED chunks of the loss model, OVF), the log
 * carries markers with the stream offsets of each PSB and OVF, and the comparison resumes
 * at the marker the decoder resynchronised at. Exit status 0 only if every decoded
 * instruction agrees, every logged instruction outside lost trace was decoded, and at least
 * one instruction was compared. */
#include <intel-pt.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct code_rec {
    uint64_t ip;
    const uint8_t *bytes;
    uint8_t len;
};

static struct code_rec *g_code; /* index = id - 1 */
static size_t g_ncode;
static bool g_verbose;
static bool g_lossless;
static FILE *g_events; /* --events FILE: where tracing was disabled asynchronously */

static void *map_file(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return NULL;
    }
    *size = (size_t)st.st_size;
    void *p = *size ? mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    return *size ? p : (void *)"";
}

static bool load_code(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/eval/code.bin", dir);
    size_t n;
    const uint8_t *p = map_file(path, &n);
    if (!p || n < 8 || memcmp(p, "JPTCODE1", 8)) {
        fprintf(stderr, "ptcheck: %s: missing or not a code store\n", path);
        return false;
    }
    size_t cap = 1024;
    g_code = malloc(cap * sizeof *g_code);
    for (size_t off = 8; off + 9 <= n;) {
        uint64_t ip;
        memcpy(&ip, p + off, 8);
        uint8_t len = p[off + 8];
        if (off + 9 + len > n) {
            fprintf(stderr, "ptcheck: %s: truncated record at offset %zu (ignored)\n", path,
                    off);
            break;
        }
        if (g_ncode == cap)
            g_code = realloc(g_code, (cap *= 2) * sizeof *g_code);
        g_code[g_ncode++] = (struct code_rec){ip, p + off + 9, len};
        off += 9u + len;
    }
    return true;
}

/* ---- the test log ---- */

enum { LOGM_PSB = 1, LOGM_OVF = 2, LOGM_CUT = 3 };

struct logit {
    const uint32_t *w;
    size_t nw;
    size_t pos;   /* word index of the current record */
    uint32_t k;   /* instructions of the current run already consumed */
};

/* Next logged instruction id without consuming it; 0 at the end and at a CUT marker (the
 * loss model stopped the stream there: what the decoder makes of the trace's tail beyond
 * it cannot be known). PSB and OVF markers are skipped. */
static uint32_t log_peek(struct logit *it)
{
    while (it->pos + 2 <= it->nw) {
        if (it->w[it->pos] == 0xffffffffu) {
            if (it->pos + 6 > it->nw || (!g_lossless && it->w[it->pos + 1] == LOGM_CUT))
                return 0;
            it->pos += 6;
            it->k = 0;
            continue;
        }
        if (it->k < it->w[it->pos + 1])
            return it->w[it->pos] + it->k;
        it->pos += 2;
        it->k = 0;
    }
    return 0;
}

static void log_next(struct logit *it)
{
    if (log_peek(it))
        it->k++;
}

/* Position right after the next marker of `type` whose stream offset (lossless or real)
 * equals off; the instructions skipped are returned through skipped. */
static bool log_seek(struct logit *it, uint32_t type, uint64_t off, bool any_off,
                     uint64_t *skipped)
{
    size_t pos = it->pos;
    uint64_t n = 0;
    uint32_t k = it->k;
    while (pos + 2 <= it->nw) {
        if (it->w[pos] == 0xffffffffu) {
            if (pos + 6 > it->nw)
                break;
            uint64_t o[2];
            memcpy(o, &it->w[pos + 2], 16);
            pos += 6;
            if (it->w[pos - 5] == type && (any_off || o[g_lossless ? 0 : 1] == off)) {
                it->pos = pos;
                it->k = 0;
                if (skipped)
                    *skipped = n;
                return true;
            }
            k = 0;
            continue;
        }
        n += it->w[pos + 1] - k;
        k = 0;
        pos += 2;
    }
    return false;
}

/* Logged instructions left before the next CUT marker (after one, trace was lost). */
static uint64_t log_remaining(struct logit *it)
{
    uint64_t n = 0;
    size_t pos = it->pos;
    uint32_t k = it->k;
    while (pos + 2 <= it->nw) {
        if (it->w[pos] == 0xffffffffu) {
            if (pos + 6 > it->nw || (!g_lossless && it->w[pos + 1] == LOGM_CUT))
                break;
            pos += 6;
        } else {
            n += it->w[pos + 1] - k;
            pos += 2;
        }
        k = 0;
    }
    return n;
}

/* ---- memory for the decoder ---- */

struct checker {
    struct logit log;
    uint64_t *latest; /* open addressing ip -> id, for reads away from the expected IP */
    size_t latest_cap;
};

static size_t hslot(uint64_t ip, size_t cap)
{
    ip ^= ip >> 29;
    ip *= 0xbf58476d1ce4e5b9ull;
    ip ^= ip >> 32;
    return (size_t)ip & (cap - 1);
}

static int read_mem(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip,
                    void *ctx)
{
    (void)asid;
    struct checker *c = ctx;
    uint32_t id = log_peek(&c->log);
    const struct code_rec *r = NULL;
    if (id && id <= g_ncode && g_code[id - 1].ip == ip) {
        r = &g_code[id - 1];
    } else {
        /* The decoder went somewhere the log does not: serve the latest bytes known for
         * that address so the mismatch is reported with a meaningful instruction. */
        for (size_t h = hslot(ip, c->latest_cap);; h = (h + 1) & (c->latest_cap - 1)) {
            uint64_t v = c->latest[h];
            if (!v)
                break;
            if (g_code[v - 1].ip == ip) {
                r = &g_code[v - 1];
                break;
            }
        }
    }
    if (!r)
        return -pte_nomap;
    size_t n = r->len < size ? r->len : size;
    memcpy(buf, r->bytes, n);
    return (int)n;
}

static void build_latest(struct checker *c)
{
    c->latest_cap = 1;
    while (c->latest_cap < g_ncode * 2 + 2)
        c->latest_cap <<= 1;
    c->latest = calloc(c->latest_cap, sizeof *c->latest);
    for (size_t i = 0; i < g_ncode; i++) {
        for (size_t h = hslot(g_code[i].ip, c->latest_cap);; h = (h + 1) & (c->latest_cap - 1)) {
            if (!c->latest[h] || g_code[c->latest[h] - 1].ip == g_code[i].ip) {
                c->latest[h] = i + 1;
                break;
            }
        }
    }
}

/* ---- one stream ---- */

struct result {
    uint64_t compared, mismatches, skipped_lost, errors, resyncs, overflows;
};

static void context(struct checker *c, const char *what, uint64_t ip)
{
    fprintf(stderr, "    %s at ip 0x%" PRIx64 "; log here:", what, ip);
    struct logit it = c->log;
    for (int i = 0; i < 6; i++) {
        uint32_t id = log_peek(&it);
        if (!id)
            break;
        fprintf(stderr, " 0x%" PRIx64, g_code[id - 1].ip);
        log_next(&it);
    }
    fprintf(stderr, "\n");
}

/* Decode [begin, end) of buf (a segment starting at stream offset base). */
static void check_segment(struct checker *c, const uint8_t *buf, size_t begin, size_t end,
                          bool last, bool after_cut, struct result *res, const char *name)
{
    bool synced_once = false;
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf + begin;
    cfg.end = (uint8_t *)buf + end;
    struct pt_insn_decoder *dec = pt_insn_alloc_decoder(&cfg);
    if (!dec) {
        res->errors++;
        return;
    }
    struct pt_image *img = pt_insn_get_image(dec);
    pt_image_set_callback(img, read_mem, c);
    unsigned reported = 0;
    struct pt_insn insn;
    memset(&insn, 0, sizeof insn);
    int status = pt_insn_sync_forward(dec);
    bool synced = false;
    for (;;) {
        if (status < 0) {
            if (status == -pte_eos)
                break;
            fprintf(stderr, "%s: sync: %s\n", name, pt_errstr(pt_errcode(status)));
            res->errors++;
            break;
        }
        if (!synced) {
            uint64_t off = 0;
            pt_insn_get_sync_offset(dec, &off);
            uint64_t skipped = 0;
            if (!log_seek(&c->log, LOGM_PSB, begin + off, false, &skipped)) {
                fprintf(stderr, "%s: no PSB marker for stream offset %" PRIu64 "\n", name,
                        (uint64_t)(begin + off));
                res->errors++;
                break;
            }
            res->skipped_lost += skipped;
            synced = true;
            synced_once = true;
        }
        while (status & pts_event_pending) {
            struct pt_event ev;
            status = pt_insn_event(dec, &ev, sizeof ev);
            if (status < 0)
                break;
            if (g_events && ev.type == ptev_async_disabled)
                fprintf(g_events, "%s async_disabled 0x%" PRIx64 "\n", name,
                        ev.variant.async_disabled.at);
            if (ev.type == ptev_overflow) {
                uint64_t skipped = 0;
                res->overflows++;
                if (!log_seek(&c->log, LOGM_OVF, 0, true, &skipped)) {
                    fprintf(stderr, "%s: overflow without a log marker\n", name);
                    res->errors++;
                } else {
                    res->skipped_lost += skipped;
                }
            }
        }
        if (status < 0) {
            if (status == -pte_eos)
                break;
            goto error;
        }
        if (status & pts_eos)
            break;
        memset(&insn, 0, sizeof insn);
        status = pt_insn_next(dec, &insn, sizeof insn);
        if (status < 0) {
            if (status == -pte_eos)
                break;
            goto error;
        }
        uint32_t id = log_peek(&c->log);
        if (!id && c->log.pos + 2 <= c->log.nw)
            break; /* at a CUT marker: the rest of this segment's trace was cut */
        if (!id || g_code[id - 1].ip != insn.ip || g_code[id - 1].len != insn.size) {
            res->mismatches++;
            if (reported++ < 5 || g_verbose) {
                fprintf(stderr, "%s: mismatch after %" PRIu64 " instructions: decoded 0x%" PRIx64
                                " (size %u), logged %s0x%" PRIx64 "\n",
                        name, res->compared, insn.ip, insn.size, id ? "" : "(end) ",
                        id ? g_code[id - 1].ip : 0);
                context(c, "mismatch", insn.ip);
            }
            goto resync;
        }
        log_next(&c->log);
        res->compared++;
        continue;
    error: {
        uint64_t off = 0;
        pt_insn_get_offset(dec, &off);
        res->errors++;
        if (reported++ < 5 || g_verbose) {
            fprintf(stderr, "%s: decode error at stream offset %" PRIu64 " after %" PRIu64
                            " instructions: %s\n",
                    name, (uint64_t)(begin + off), res->compared, pt_errstr(pt_errcode(status)));
            context(c, "error", insn.ip);
        }
    }
    resync:
        res->resyncs++;
        status = pt_insn_sync_forward(dec);
        synced = false;
    }
    if (last && !synced_once && !after_cut) {
        fprintf(stderr, "%s: no PSB in the trace\n", name);
        res->errors++;
    }
    /* Without a PSB in a segment that follows a cut, the stream never resumed: the rest of
     * the log is lost trace. */
    if (last && synced_once) {
        uint64_t left = log_remaining(&c->log);
        if (left) {
            fprintf(stderr, "%s: %" PRIu64 " logged instructions were not decoded\n", name,
                    left);
            context(c, "end of trace", 0);
            res->mismatches += left;
        }
    }
    pt_insn_free_decoder(dec);
}

static bool check_stream(const char *dir, const char *tidname, struct result *total)
{
    char path[4200];
    struct checker c;
    memset(&c, 0, sizeof c);
    build_latest(&c);

    snprintf(path, sizeof path, "%s/eval/%s.log", dir, tidname);
    size_t lsz;
    const uint32_t *lw = map_file(path, &lsz);
    if (!lw) {
        fprintf(stderr, "ptcheck: cannot read %s\n", path);
        return false;
    }
    c.log.w = lw;
    c.log.nw = lsz / 4;

    snprintf(path, sizeof path, "%s/%s/%s.pt", dir, g_lossless ? "eval" : "pt", tidname);
    size_t psz;
    const uint8_t *pt = map_file(path, &psz);
    if (!pt) {
        fprintf(stderr, "ptcheck: cannot read %s\n", path);
        return false;
    }
    struct result res;
    memset(&res, 0, sizeof res);

    /* Segments: the stream restarts with PSB+ after each TRUNCATED chunk. */
    size_t cuts[4096];
    size_t ncuts = 0;
    if (!g_lossless) {
        snprintf(path, sizeof path, "%s/pt/%s.idx", dir, tidname);
        size_t isz;
        const uint8_t *idx = map_file(path, &isz);
        if (!idx || isz < 16 || memcmp(idx, "JPTAUX\0\0", 8)) {
            fprintf(stderr, "ptcheck: %s: missing or bad index\n", path);
            return false;
        }
        for (size_t off = 16; off + 40 <= isz; off += 40) {
            uint64_t r[5];
            memcpy(r, idx + off, 40);
            if ((r[2] & 1) && ncuts < sizeof cuts / sizeof cuts[0])
                cuts[ncuts++] = (size_t)(r[0] + r[1]);
        }
    }
    size_t begin = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : psz;
        if (end > psz)
            end = psz;
        if (end > begin || i == ncuts)
            check_segment(&c, pt, begin, end, i == ncuts, i > 0, &res, tidname);
        begin = end;
    }
    printf("%s: %" PRIu64 " instructions compared, %" PRIu64 " mismatches, %" PRIu64
           " decode errors, %" PRIu64 " lost (not compared), %" PRIu64 " overflows, %zu cuts\n",
           tidname, res.compared, res.mismatches, res.errors, res.skipped_lost, res.overflows,
           ncuts);
    total->compared += res.compared;
    total->mismatches += res.mismatches;
    total->errors += res.errors;
    total->skipped_lost += res.skipped_lost;
    free(c.latest);
    return res.mismatches == 0 && res.errors == 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: ptcheck [--lossless] [--verbose] [--events FILE] TRACEDIR\n"
                    "  decodes every stream of TRACEDIR that has an eval/ test log and compares\n"
                    "  it with the log; --lossless checks the uncut eval/ copies instead;\n"
                    "  --events lists where the trace says tracing was interrupted (FUP).\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lossless"))
            g_lossless = true;
        else if (!strcmp(argv[i], "--verbose"))
            g_verbose = true;
        else if (!strcmp(argv[i], "--events") && i + 1 < argc) {
            g_events = fopen(argv[++i], "w");
            if (!g_events) {
                perror(argv[i]);
                return 2;
            }
        }
        else if (argv[i][0] == '-' || dir)
            return usage();
        else
            dir = argv[i];
    }
    if (!dir)
        return usage();
    if (!load_code(dir))
        return 1;
    char path[4200];
    snprintf(path, sizeof path, "%s/eval", dir);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "ptcheck: cannot open %s\n", path);
        return 1;
    }
    struct result total;
    memset(&total, 0, sizeof total);
    int nstreams = 0;
    bool ok = true;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "tid-", 4) || l < 5 || strcmp(e->d_name + l - 4, ".log"))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(l - 4), e->d_name);
        nstreams++;
        if (!check_stream(dir, name, &total))
            ok = false;
    }
    closedir(d);
    if (g_events)
        fclose(g_events);
    printf("total: %d streams, %" PRIu64 " instructions compared, %" PRIu64
           " mismatches, %" PRIu64 " decode errors, %" PRIu64 " lost\n",
           nstreams, total.compared, total.mismatches, total.errors, total.skipped_lost);
    if (!nstreams || !total.compared) {
        fprintf(stderr, "ptcheck: nothing was compared\n");
        return 1;
    }
    return ok ? 0 : 1;
}
