/* Per-CPU traces split into per-thread streams (percpu.h). */
#include "decoder/percpu.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <intel-pt.h>

#include "common/auxidx.h"
#include "common/fileio.h"
#include "common/jerr.h"

/* perf_event.h values (the decoder does not need the kernel headers). */
#define REC_SWITCH 14u
#define MISC_SWITCH_OUT 0x2000u
#define SAMPLE_ID_SIZE 40u      /* TID, TIME, ID, CPU, IDENTIFIER (docs/FORMAT.md) */

static void problem(dc_percpu_stats *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(dc_percpu_stats *st, const char *fmt, ...)
{
    st->problems++;
    if (st->nmsgs >= G_N_ELEMENTS(st->msgs)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msgs[st->nmsgs++], sizeof st->msgs[0], fmt, ap);
    va_end(ap);
}

/* ---- time ---------------------------------------------------------------------- */

static bool json_u64_in(const char *obj, const char *end, const char *key, uint64_t *v)
{
    size_t kl = strlen(key);
    for (const char *p = obj; p && p < end; p++) {
        p = memchr(p, '"', (size_t)(end - p));
        if (!p || (size_t)(end - p) < kl + 2) return false;
        if (strncmp(p + 1, key, kl) == 0 && p[kl + 1] == '"') {
            const char *q = p + kl + 2;
            while (q < end && (*q == ' ' || *q == ':' || *q == '\n' || *q == '\t')) q++;
            if (q >= end) return false;
            if (strncmp(q, "true", 4) == 0) { *v = 1; return true; }
            if (strncmp(q, "false", 5) == 0) { *v = 0; return true; }
            char *e;
            errno = 0;
            unsigned long long x = strtoull(q, &e, 10);
            if (e == q || errno || e > end) return false;
            *v = x;
            return true;
        }
    }
    return false;
}

int dc_read_time_conv(const char *dir, dc_time_conv *tc, char *err, size_t errlen)
{
    memset(tc, 0, sizeof *tc);
    char *path = g_build_filename(dir, "info.json", NULL);
    char *text = NULL;
    size_t len = 0;
    int rc = 0;
    char rerr[16];
    if (jpt_read_small_file(path, 16u << 20, &text, &len, rerr, sizeof rerr) == 0) {
        /* The "time" object (a key: followed by ':'; the same word may be
         * a string in "command"); flat, so its end is the first '}'. */
        const char *t = text, *end = text + len, *e = NULL;
        while ((t = g_strstr_len(t, end - t, "\"time\""))) {
            const char *q = t + 6;
            while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')) q++;
            if (q < end && *q == ':') break;
            t += 6;
        }
        if (t) e = memchr(t, '}', (size_t)(end - t));
        uint64_t zero, mult, shift, valid = 1;
        if (t && e && json_u64_in(t + 6, e, "time_zero", &zero) &&
            json_u64_in(t + 6, e, "time_mult", &mult) &&
            json_u64_in(t + 6, e, "time_shift", &shift)) {
            json_u64_in(t + 6, e, "valid", &valid);
            /* The kernel's mult is 32 bits and its shift at most 32
             * (calc_mult_shift); larger ones would overflow to_tsc. */
            if (valid && (mult > UINT32_MAX || shift > 32)) {
                snprintf(err, errlen, "%s: offset %td: time_mult %" PRIu64 " / time_shift %"
                         PRIu64 " out of range (at most %u / 32)", path, t - text, mult, shift,
                         UINT32_MAX);
                rc = -1;
            } else {
                tc->valid = valid != 0;
                tc->time_zero = zero;
                tc->time_mult = (uint32_t)mult;
                tc->time_shift = (uint16_t)shift;
            }
        }
    }
    free(text);
    g_free(path);
    return rc;
}

/* As collector/perf_records.c: the inverse of the kernel's TSC -> time.
 * time - time_zero is modular on purpose: the kernel adds time_zero with
 * u64 wraparound and time_zero is often "negative" (pc_host_time_conv's
 * too), so time < time_zero is normal. False when the TSC would not fit
 * in 64 bits (a hostile time or conversion): UINT64_MAX then. */
static bool to_tsc(const dc_time_conv *tc, uint64_t time, uint64_t *tsc)
{
    if (!tc->valid || tc->time_mult == 0 || tc->time_shift > 32) {
        *tsc = time;
        return true;
    }
    uint64_t t = time - tc->time_zero;
    uint64_t quot = t / tc->time_mult, rem = t % tc->time_mult;
    /* rem < 2^32 and shift <= 32: rem << shift fits. */
    uint64_t lo = (rem << tc->time_shift) / tc->time_mult;
    if (quot > (UINT64_MAX >> tc->time_shift) || (quot << tc->time_shift) > UINT64_MAX - lo) {
        *tsc = UINT64_MAX;
        return false;
    }
    *tsc = (quot << tc->time_shift) + lo;
    return true;
}

/* ---- CPU streams --------------------------------------------------------------- */

typedef struct sw {
    uint64_t tsc, off;
    uint32_t pid, tid;
    bool out;
} sw;

typedef struct cut {
    uint64_t off, lost;
} cut;

typedef struct stretch {
    uint64_t begin, end;
    uint64_t first_tsc, last_tsc, pge_tsc;
    uint64_t ip_begin;
    bool has_pge, psb_first, cut;
    uint64_t lost;
} stretch;

typedef struct cpu {
    unsigned num;
    char *pt_path, *sb_path, *name;
    uint8_t *buf;
    size_t size;
    struct pt_packet_decoder *dec;
    cut *cuts;
    size_t ncuts, cuti;
    uint64_t pos, last_ip, last_tsc;
    sw *sws;
    size_t nsw, swi;
    stretch next;
    bool has_next, started, prev_cut;
    uint64_t prev_first, prev_last_tsc;     /* the stretch before: its times */
    int64_t owner;              /* thread switched in (-1: none) */
    uint32_t owner_pid;
} cpu;

static bool has_ip(enum pt_packet_type t)
{
    return t == ppt_fup || t == ppt_tip || t == ppt_tip_pge || t == ppt_tip_pgd;
}

static void update_ip(uint64_t *last, const struct pt_packet_ip *ip)
{
    switch (ip->ipc) {
    case pt_ipc_suppressed: break;
    case pt_ipc_update_16: *last = (*last & ~0xffffull) | (ip->ip & 0xffffull); break;
    case pt_ipc_update_32: *last = (*last & ~0xffffffffull) | (ip->ip & 0xffffffffull); break;
    case pt_ipc_update_48:
        *last = (*last & ~0xffffffffffffull) | (ip->ip & 0xffffffffffffull);
        break;
    case pt_ipc_sext_48: {
        uint64_t v = ip->ip & 0xffffffffffffull;
        *last = (v & (1ull << 47)) ? v | 0xffff000000000000ull : v;
        break;
    }
    case pt_ipc_full: *last = ip->ip; break;
    }
}

/* The next stretch of c (see percpu.h); false at the end. */
static bool next_stretch(cpu *c, dc_percpu_stats *st)
{
    stretch *s = &c->next;
    c->has_next = false;
    while (c->dec && c->pos < c->size) {
        memset(s, 0, sizeof *s);
        s->begin = c->pos;
        s->first_tsc = s->last_tsc = c->last_tsc;
        s->ip_begin = c->last_ip;
        /* Losses before anything of this stretch (damaged input) count here. */
        while (c->cuti < c->ncuts && c->cuts[c->cuti].off <= s->begin) {
            s->cut = true;
            s->lost += c->cuts[c->cuti++].lost;
        }
        bool tsc_seen = false, first = true;
        if (pt_pkt_sync_set(c->dec, c->pos) < 0) { c->pos = c->size; break; }
        for (;;) {
            uint64_t off = c->pos;
            if (c->cuti < c->ncuts && c->cuts[c->cuti].off <= off && off > s->begin) {
                s->end = off;
                s->cut = true;
                s->lost += c->cuts[c->cuti++].lost;
                break;
            }
            struct pt_packet pkt;
            int r = pt_pkt_next(c->dec, &pkt, sizeof pkt);
            if (r < 0) {
                s->end = off;
                if (r == -pte_eos) {
                    c->pos = c->size;
                } else {
                    uint64_t nx = c->size;
                    if (pt_pkt_sync_forward(c->dec) >= 0) pt_pkt_get_sync_offset(c->dec, &nx);
                    if (nx <= off) nx = c->size;
                    problem(st, "%s: offset %" PRIu64 ": %s; %" PRIu64 " bytes skipped to the "
                            "next PSB", c->pt_path, off, pt_errstr(pt_errcode(r)), nx - off);
                    st->skipped_bytes += nx - off;
                    c->pos = nx;
                    c->last_ip = 0;
                    /* Whatever ran there is unknown: treat it as a loss. */
                    s->cut = true;
                }
                break;
            }
            pt_pkt_get_offset(c->dec, &c->pos);
            if (first) s->psb_first = pkt.type == ppt_psb;
            first = false;
            if (pkt.type == ppt_psb) c->last_ip = 0;
            if (pkt.type == ppt_tsc) {
                c->last_tsc = pkt.payload.tsc.tsc;
                if (!tsc_seen) s->first_tsc = c->last_tsc;
                tsc_seen = true;
                s->last_tsc = c->last_tsc;
            }
            if (pkt.type == ppt_tip_pge && !s->has_pge) {
                s->has_pge = true;
                s->pge_tsc = c->last_tsc;
            }
            if (has_ip(pkt.type)) update_ip(&c->last_ip, &pkt.payload.ip);
            if (pkt.type == ppt_tip_pgd) {
                s->end = c->pos;
                break;
            }
        }
        while (c->cuti < c->ncuts && c->cuts[c->cuti].off <= c->pos &&
               (c->cuts[c->cuti].off == s->end || c->pos >= c->size)) {
            s->cut = true;
            s->lost += c->cuts[c->cuti++].lost;
        }
        if (c->pos >= c->size)
            for (; c->cuti < c->ncuts; c->cuti++) {
                s->cut = true;
                s->lost += c->cuts[c->cuti].lost;
            }
        if (s->end > s->begin) {
            c->has_next = true;
            return true;
        }
    }
    return false;
}

static int cut_cmp(const void *a, const void *b)
{
    const cut *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int sw_cmp(const void *a, const void *b)
{
    const sw *x = a, *y = b;
    if (x->tsc != y->tsc) return x->tsc < y->tsc ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;   /* stable: file order */
}

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* The SWITCH records of a CPU's sideband, by time. */
static void load_switches(cpu *c, const dc_time_conv *tc, dc_percpu_stats *st)
{
    char *sb = NULL;
    size_t len = 0;
    char rerr[512];
    if (jpt_read_small_file(c->sb_path, (size_t)1 << 36, &sb, &len, rerr, sizeof rerr) < 0) {
        problem(st, "%s: no context switches for %s", rerr, c->pt_path);
        return;
    }
    GArray *a = g_array_new(FALSE, FALSE, sizeof(sw));
    size_t off = 0, bad_off = 0;
    uint64_t bad_times = 0;
    while (off + 8 <= len) {
        const uint8_t *p = (const uint8_t *)sb + off;
        uint32_t type = rd32(p);
        uint16_t misc, size;
        memcpy(&misc, p + 4, 2);
        memcpy(&size, p + 6, 2);
        if (size < 8 || size % 8) {
            problem(st, "%s: offset %zu: perf record of size %u; the rest of the file is "
                    "ignored", c->sb_path, off, size);
            break;
        }
        if (off + size > len) {
            problem(st, "%s: offset %zu: incomplete record at the end", c->sb_path, off);
            break;
        }
        if (type == REC_SWITCH) {
            if (size < 8 + SAMPLE_ID_SIZE) {
                problem(st, "%s: offset %zu: PERF_RECORD_SWITCH of %u bytes has no sample_id",
                        c->sb_path, off, size);
            } else {
                const uint8_t *sid = p + size - SAMPLE_ID_SIZE;
                sw s = { .pid = rd32(sid), .tid = rd32(sid + 4), .off = off,
                         .out = (misc & MISC_SWITCH_OUT) != 0 };
                if (!to_tsc(tc, rd64(sid + 8), &s.tsc) && bad_times++ == 0)
                    bad_off = off;
                g_array_append_val(a, s);
                st->switches++;
            }
        }
        off += size;
    }
    free(sb);
    if (bad_times)
        problem(st, "%s: offset %zu: %" PRIu64 " context switch time(s) outside the range of "
                "the perf clock conversion (the TSC would pass 64 bits); clamped",
                c->sb_path, bad_off, bad_times);
    if (a->len) qsort(a->data, a->len, sizeof(sw), sw_cmp);
    c->nsw = a->len;
    c->sws = (sw *)(void *)g_array_free(a, FALSE);
}

static int cpu_open(cpu *c, const char *dir, unsigned num, const dc_time_conv *tc,
                    dc_percpu_stats *st, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->num = num;
    c->owner = -1;
    c->name = g_strdup_printf("cpu-%u", num);
    c->pt_path = g_strdup_printf("%s/pt/cpu-%u.pt", dir, num);
    c->sb_path = g_strdup_printf("%s/sideband/cpu-%u.sb", dir, num);
    uint64_t file_size;
    int fd = jpt_open_regular(c->pt_path, &file_size);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", c->pt_path, jpt_open_error(fd));
        return -1;
    }
    /* Only what the index delivered is decoded (docs/FORMAT.md, "Damage
     * and loss"); the trace check counts the rest. */
    char *idxp = g_strdup_printf("%s/pt/cpu-%u.idx", dir, num);
    auxidx idx;
    char ierr[512];
    int rc = auxidx_load(idxp, &idx, ierr, sizeof ierr);
    c->size = (size_t)file_size;
    if (rc >= 0) {
        c->size = (size_t)auxidx_extent_of(&idx, file_size).decode;
        c->cuts = g_new0(cut, idx.n + 1);
        for (size_t i = 0; i < idx.n; i++) {
            if (!(idx.recs[i].flags & AUXIDX_TRUNCATED)) continue;
            c->cuts[c->ncuts].off = idx.recs[i].offset + idx.recs[i].size;
            c->cuts[c->ncuts++].lost = idx.recs[i].lost_bytes;
            st->losses++;
        }
        if (c->ncuts > 1) qsort(c->cuts, c->ncuts, sizeof *c->cuts, cut_cmp);
        auxidx_free(&idx);
    } else if (access(idxp, F_OK) == 0) {
        problem(st, "%s", ierr);
    }
    g_free(idxp);
    if (c->size) {
        void *m = mmap(NULL, c->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "%s: cannot map %zu bytes: %s", c->pt_path, c->size,
                     strerror(errno));
            close(fd);
            c->size = 0;
            return -1;
        }
        c->buf = m;
        madvise(m, c->size, MADV_SEQUENTIAL);   /* read once, front to back */
    }
    close(fd);
    load_switches(c, tc, st);
    if (c->size) {
        struct pt_config cfg;
        pt_config_init(&cfg);
        cfg.begin = c->buf;
        cfg.end = c->buf + c->size;
        c->dec = pt_pkt_alloc_decoder(&cfg);
        if (!c->dec) {
            snprintf(err, errlen, "%s: cannot allocate a packet decoder", c->pt_path);
            return -1;
        }
        next_stretch(c, st);
    }
    return 0;
}

static void cpu_free(cpu *c)
{
    if (c->dec) pt_pkt_free_decoder(c->dec);
    if (c->buf && c->size) munmap(c->buf, c->size);
    g_free(c->cuts);
    g_free(c->sws);
    g_free(c->pt_path);
    g_free(c->sb_path);
    g_free(c->name);
}

/* ---- per-thread output -------------------------------------------------------------- */

typedef struct tout {
    uint32_t tid;
    char *pt_path;
    FILE *pt;
    int idx_fd;
    uint64_t off, aux_begin;
    bool need_psb;              /* trace of it may have been lost: PSB+ before more */
    bool lost_pending;
    uint64_t lost;
    bool created;               /* files made (they may be closed for now) */
    uint64_t last_use;
} tout;

/* Files open at once: a trace may have thousands of threads. */
#define MAX_OPEN_THREADS 128

typedef struct split {
    const char *outdir;
    GHashTable *threads;        /* tid -> tout */
    struct pt_encoder *enc;
    uint8_t encbuf[64];
    dc_percpu_stats *st;
    bool failed;
    char *err;
    size_t errlen;
    size_t nopen;
    uint64_t clock;             /* for last_use */
} split;

static void sfail(split *x, const char *what, const char *path)
{
    if (!x->failed) snprintf(x->err, x->errlen, "cannot %s %s: %s", what, path, strerror(errno));
    x->failed = true;
}

static void tout_free(gpointer p)
{
    tout *t = p;
    if (t->pt) fclose(t->pt);
    if (t->idx_fd >= 0) close(t->idx_fd);
    g_free(t->pt_path);
    g_free(t);
}

static void tout_close(split *x, tout *t)
{
    if (t->pt && fclose(t->pt) != 0) sfail(x, "write", t->pt_path);
    if (t->idx_fd >= 0) close(t->idx_fd);
    t->pt = NULL;
    t->idx_fd = -1;
    x->nopen--;
}

/* Opens t's files (creating them the first time), closing the least
 * recently used thread's when too many are open. */
static bool tout_open(split *x, tout *t)
{
    t->last_use = ++x->clock;
    if (t->pt) return true;
    if (x->failed) return false;
    if (x->nopen >= MAX_OPEN_THREADS) {
        tout *lru = NULL;
        GHashTableIter it;
        gpointer v;
        g_hash_table_iter_init(&it, x->threads);
        while (g_hash_table_iter_next(&it, NULL, &v)) {
            tout *o = v;
            if (o->pt && (!lru || o->last_use < lru->last_use)) lru = o;
        }
        if (lru) tout_close(x, lru);
    }
    char *idx = g_strdup_printf("%s/pt/tid-%u.idx", x->outdir, t->tid);
    t->pt = fopen(t->pt_path, t->created ? "ae" : "we");
    if (!t->pt) sfail(x, "create", t->pt_path);
    t->idx_fd = open(idx, t->created ? O_WRONLY | O_APPEND | O_CLOEXEC
                                     : O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->idx_fd < 0 || (!t->created && auxidx_write_header(t->idx_fd) != 0))
        sfail(x, "create", idx);
    g_free(idx);
    if (t->pt) x->nopen++;
    if (!t->created) x->st->threads++;
    t->created = true;
    return !x->failed;
}

static tout *thread_out(split *x, uint32_t tid)
{
    tout *t = g_hash_table_lookup(x->threads, GUINT_TO_POINTER(tid));
    if (t) return t;
    t = g_new0(tout, 1);
    t->tid = tid;
    t->idx_fd = -1;
    /* The decoder synchronizes at a PSB: a thread first seen in the middle
     * of a CPU's stream gets one. */
    t->need_psb = true;
    t->pt_path = g_strdup_printf("%s/pt/tid-%u.pt", x->outdir, tid);
    g_hash_table_insert(x->threads, GUINT_TO_POINTER(tid), t);
    return t;
}

static void put(split *x, tout *t, const void *p, size_t n)
{
    if (!tout_open(x, t)) return;
    if (n && fwrite(p, 1, n, t->pt) != n) sfail(x, "write", t->pt_path);
    t->off += n;
}

static void put_pkt(split *x, tout *t, const struct pt_packet *pkt)
{
    pt_enc_sync_set(x->enc, 0);
    int n = pt_enc_next(x->enc, pkt);
    if (n > 0) put(x, t, x->encbuf, (size_t)n);
}

static void aux_record(split *x, tout *t, bool truncated, uint64_t lost)
{
    if (t->off == t->aux_begin && !truncated) return;
    if (!tout_open(x, t)) return;
    auxidx_rec r = { .offset = t->aux_begin, .size = t->off - t->aux_begin,
                     .flags = truncated ? AUXIDX_TRUNCATED : 0, .lost_bytes = lost };
    if (t->idx_fd >= 0 && auxidx_append(t->idx_fd, &r) != 0) sfail(x, "write the index of",
                                                                 t->pt_path);
    t->aux_begin = t->off;
}

/* Appends stretch s of CPU c to thread t's stream. */
static void emit(split *x, cpu *c, tout *t, const stretch *s)
{
    if (t->lost_pending) {
        aux_record(x, t, true, t->lost);
        t->lost_pending = false;
        t->lost = 0;
        t->need_psb = true;
    }
    if (t->need_psb && !s->psb_first) {
        struct pt_packet pk;
        memset(&pk, 0, sizeof pk);
        pk.type = ppt_psb;
        put_pkt(x, t, &pk);
        pk.type = ppt_tsc;
        pk.payload.tsc.tsc = s->first_tsc;
        put_pkt(x, t, &pk);
        memset(&pk, 0, sizeof pk);
        pk.type = ppt_mode;
        pk.payload.mode.leaf = pt_mol_exec;
        pk.payload.mode.bits.exec.csl = 1;
        put_pkt(x, t, &pk);
        memset(&pk, 0, sizeof pk);
        pk.type = ppt_psbend;
        put_pkt(x, t, &pk);
    }
    t->need_psb = false;
    if (pt_pkt_sync_set(c->dec, s->begin) < 0) return;
    uint64_t last = s->ip_begin, off = s->begin, run = s->begin;   /* run: bytes to copy */
    bool synced = false;
    while (off < s->end && !x->failed) {
        struct pt_packet pkt;
        if (pt_pkt_next(c->dec, &pkt, sizeof pkt) < 0) break;
        uint64_t nx;
        pt_pkt_get_offset(c->dec, &nx);
        bool raw = true;
        if (pkt.type == ppt_psb) {
            synced = true;
            last = 0;
        } else if (has_ip(pkt.type) && pkt.payload.ip.ipc != pt_ipc_suppressed) {
            update_ip(&last, &pkt.payload.ip);
            if (!synced && pkt.payload.ip.ipc != pt_ipc_sext_48 &&
                pkt.payload.ip.ipc != pt_ipc_full) {
                uint64_t hi = last >> 47;
                pkt.payload.ip.ipc = (hi == 0 || hi == 0x1ffff) ? pt_ipc_sext_48 : pt_ipc_full;
                pkt.payload.ip.ip = last;
                raw = false;
            }
            synced = true;
        }
        if (!raw) {
            put(x, t, c->buf + run, (size_t)(off - run));
            put_pkt(x, t, &pkt);
            run = nx;
        }
        off = nx;
    }
    put(x, t, c->buf + run, (size_t)(off - run));
}

static void apply_switch(split *x, cpu *c, const sw *s, bool after_loss)
{
    dc_percpu_stats *st = x->st;
    st->attached++;
    if (s->out) {
        if (c->owner != (int64_t)s->tid) {
            st->inconsistent++;
            if (c->owner < 0)
                problem(st, "%s: offset %" PRIu64 ": switch-out of thread %u, which was not "
                        "switched in", c->sb_path, s->off, s->tid);
            else
                problem(st, "%s: offset %" PRIu64 ": switch-out of thread %u while thread %"
                        PRId64 " was switched in", c->sb_path, s->off, s->tid, c->owner);
        }
        c->owner = -1;
    } else {
        if (c->owner >= 0 && c->owner != (int64_t)s->tid) {
            st->inconsistent++;
            problem(st, "%s: offset %" PRIu64 ": switch-in of thread %u while thread %" PRId64
                    " had not been switched out", c->sb_path, s->off, s->tid, c->owner);
        }
        c->owner = s->tid;
        c->owner_pid = s->pid;
        if (after_loss) {
            /* It may have run in the lost part. */
            tout *t = thread_out(x, s->tid);
            t->lost_pending = true;
        }
    }
}

static void report_unattached(split *x, cpu *c, const sw *s, uint64_t lo, uint64_t hi)
{
    x->st->unattached++;
    problem(x->st, "%s: offset %" PRIu64 ": switch-%s of thread %u at TSC %" PRIu64 " is not "
            "between a TIP.PGD and the next TIP.PGE of %s (traced from TSC %" PRIu64 " to %"
            PRIu64 " there); ignored", c->sb_path, s->off, s->out ? "out" : "in", s->tid,
            s->tsc, c->pt_path, lo, hi);
}

static int tid_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int dc_percpu_split(const char *dir, const char *outdir, const dc_time_conv *tc,
                    dc_percpu_stats *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    char *ptdir = g_build_filename(dir, "pt", NULL);
    GDir *d = g_dir_open(ptdir, 0, NULL);
    GArray *nums = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    const char *ent;
    while (d && (ent = g_dir_read_name(d))) {
        size_t l = strlen(ent);
        if (strncmp(ent, "cpu-", 4) != 0 || l < 8 || strcmp(ent + l - 3, ".pt") != 0) continue;
        char *end;
        errno = 0;
        unsigned long v = strtoul(ent + 4, &end, 10);
        if (errno || end != ent + l - 3 || v > 65535) continue;
        uint32_t n = (uint32_t)v;
        g_array_append_val(nums, n);
    }
    if (d) g_dir_close(d);
    g_free(ptdir);
    g_array_sort(nums, tid_cmp);
    size_t ncpu = nums->len;
    st->cpus = ncpu;
    cpu *cs = g_new0(cpu, ncpu ? ncpu : 1);
    int rc = 0;
    for (size_t i = 0; i < ncpu && rc == 0; i++)
        rc = cpu_open(&cs[i], dir, g_array_index(nums, uint32_t, i), tc, st, err, errlen);
    char *outpt = g_build_filename(outdir, "pt", NULL);
    if (rc == 0 && g_mkdir_with_parents(outpt, 0755) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", outpt, strerror(errno));
        rc = -1;
    }
    g_free(outpt);
    split x = { .outdir = outdir, .st = st, .err = err, .errlen = errlen,
                .threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                                 tout_free) };
    if (rc == 0) {
        struct pt_config cfg;
        pt_config_init(&cfg);
        cfg.begin = x.encbuf;
        cfg.end = x.encbuf + sizeof x.encbuf;
        x.enc = pt_alloc_encoder(&cfg);
        if (!x.enc) {
            snprintf(err, errlen, "cannot allocate a PT encoder");
            rc = -1;
        }
    }
    /* The stretches of all CPUs in time order (ties: the lower CPU). */
    while (rc == 0 && !x.failed) {
        cpu *c = NULL;
        uint64_t ck = 0;
        for (size_t i = 0; i < ncpu; i++) {
            if (!cs[i].has_next) continue;
            const stretch *s = &cs[i].next;
            uint64_t k = s->has_pge ? s->pge_tsc : s->first_tsc;
            if (!c || k < ck) { c = &cs[i]; ck = k; }
        }
        if (!c) break;
        const stretch *s = &c->next;
        /* The gap before s: from the last TSC of the stretch before (the
         * stream start) to the TSC of s's TIP.PGE (or its first). */
        uint64_t lo = c->started ? c->prev_last_tsc : 0, hi = ck;
        while (c->swi < c->nsw && c->sws[c->swi].tsc <= hi) {
            const sw *w = &c->sws[c->swi++];
            if (w->tsc >= lo) apply_switch(&x, c, w, c->prev_cut);
            else report_unattached(&x, c, w, c->prev_first, lo);
        }
        st->stretches++;
        if (c->owner < 0) {
            st->orphan_stretches++;
            st->orphan_bytes += s->end - s->begin;
            if (st->orphan_stretches == 1 || c->started == false)
                problem(st, "%s: offset %" PRIu64 ": %" PRIu64 " bytes of trace with no thread "
                        "switched in; left out", c->pt_path, s->begin, s->end - s->begin);
        } else {
            tout *t = thread_out(&x, (uint32_t)c->owner);
            emit(&x, c, t, s);
            if (s->cut) {
                t->lost_pending = true;
                t->lost += s->lost;
            }
        }
        c->prev_cut = s->cut;
        c->prev_first = s->has_pge ? s->pge_tsc : s->first_tsc;
        c->prev_last_tsc = s->last_tsc;
        c->started = true;
        next_stretch(c, st);
    }
    /* Switches after each CPU's last stretch. */
    for (size_t i = 0; i < ncpu && rc == 0; i++) {
        cpu *c = &cs[i];
        uint64_t lo = c->started ? c->prev_last_tsc : 0;
        while (c->swi < c->nsw) {
            const sw *w = &c->sws[c->swi++];
            if (w->tsc >= lo) apply_switch(&x, c, w, c->prev_cut);
            else report_unattached(&x, c, w, c->prev_first, lo);
        }
    }
    if (rc == 0) {
        GHashTableIter it;
        gpointer v;
        g_hash_table_iter_init(&it, x.threads);
        while (g_hash_table_iter_next(&it, NULL, &v)) {
            tout *t = v;
            aux_record(&x, t, t->lost_pending, t->lost);
            if (t->pt) tout_close(&x, t);
        }
    }
    if (x.failed) rc = -1;
    g_hash_table_destroy(x.threads);
    if (x.enc) pt_free_encoder(x.enc);
    for (size_t i = 0; i < ncpu; i++) cpu_free(&cs[i]);
    g_free(cs);
    g_array_free(nums, TRUE);
    return rc;
}

/* ---- transparent use ------------------------------------------------------------------ */

typedef struct cached {
    char *outdir;               /* NULL: the split failed */
    char *error;                /* ... why */
    dc_percpu_stats st;
} cached;

static GHashTable *g_splits;    /* trace dir -> cached */
static GMutex g_splits_lock;

static int rm_tree(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    if (d) {
        const char *e;
        while ((e = g_dir_read_name(d))) {
            char *p = g_build_filename(path, e, NULL);
            if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
                rm_tree(p);
            else
                g_unlink(p);
            g_free(p);
        }
        g_dir_close(d);
    }
    return g_rmdir(path);
}

static void remove_splits(void)
{
    g_mutex_lock(&g_splits_lock);
    if (g_splits) {
        GHashTableIter it;
        gpointer v;
        g_hash_table_iter_init(&it, g_splits);
        while (g_hash_table_iter_next(&it, NULL, &v))
            if (((cached *)v)->outdir) rm_tree(((cached *)v)->outdir);
    }
    g_mutex_unlock(&g_splits_lock);
}

static bool has_streams(const char *dir, const char *prefix)
{
    char *ptdir = g_build_filename(dir, "pt", NULL);
    GDir *d = g_dir_open(ptdir, 0, NULL);
    bool found = false;
    const char *e;
    while (d && !found && (e = g_dir_read_name(d))) {
        size_t l = strlen(e);
        found = strncmp(e, prefix, strlen(prefix)) == 0 && l > 3 && strcmp(e + l - 3, ".pt") == 0;
    }
    if (d) g_dir_close(d);
    g_free(ptdir);
    return found;
}

/* A split untouched this long is no longer being written. */
#define STALE_SPLIT_SECS 3600

/* Splits left behind by processes that died of a signal (atexit never
 * ran): the directory names carry the pid. A shared temp directory may be
 * used from other PID namespaces, where that pid means nothing here, so a
 * split is removed only when it is also ours and old. */
static void remove_stale_splits(void)
{
    const char *tmp = g_get_tmp_dir();
    GDir *d = g_dir_open(tmp, 0, NULL);
    const char *e;
    time_t now = time(NULL);
    while (d && (e = g_dir_read_name(d))) {
        if (strncmp(e, "jpt-percpu-", 11) != 0) continue;
        char *end;
        errno = 0;
        long pid = strtol(e + 11, &end, 10);
        if (errno || end == e + 11 || *end != '-' || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *p = g_build_filename(tmp, e, NULL);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == getuid() &&
            now - sb.st_mtime > STALE_SPLIT_SECS)
            rm_tree(p);
        g_free(p);
    }
    if (d) g_dir_close(d);
}

/* The key of DIR in g_splits: its canonical path, so "t" and "t/" (or a
 * symlink to it) share one split. */
static char *split_key(const char *dir)
{
    char *rp = realpath(dir, NULL);
    if (!rp) return g_strdup(dir);
    char *k = g_strdup(rp);
    free(rp);
    return k;
}

static void split_warnings(const char *dir, const dc_percpu_stats *st, GPtrArray *out)
{
    for (size_t i = 0; i < st->nmsgs; i++)
        g_ptr_array_add(out, g_strdup(st->msgs[i]));
    if (st->problems > st->nmsgs)
        g_ptr_array_add(out, g_strdup_printf("%s: %" PRIu64 " more problems with the per-CPU "
                                             "streams not shown", dir,
                                             st->problems - st->nmsgs));
    if (st->unattached)
        g_ptr_array_add(out, g_strdup_printf("%s: %" PRIu64 " of %" PRIu64 " context switches "
                                             "could not be attached to a gap in the trace", dir,
                                             st->unattached, st->switches));
}

/* A split is tried once per trace: a failure is remembered with its text,
 * so a caller that finds no threads can tell why without splitting again. */
static cached *try_split(const char *dir)
{
    cached *c = g_new0(cached, 1);
    char err[1024];
    remove_stale_splits();
    GError *ge = NULL;
    char *tmpl = g_strdup_printf("jpt-percpu-%ld-XXXXXX", (long)getpid());
    char *out = g_dir_make_tmp(tmpl, &ge);
    g_free(tmpl);
    if (!out) {
        c->error = g_strdup_printf("%s: cannot make a directory to split the per-CPU streams "
                                   "into: %s", dir, ge->message);
        g_error_free(ge);
        return c;
    }
    dc_time_conv tc;
    if (dc_read_time_conv(dir, &tc, err, sizeof err) != 0 ||
        dc_percpu_split(dir, out, &tc, &c->st, err, sizeof err) != 0) {
        rm_tree(out);
        g_free(out);
        c->error = g_strdup(err);
        return c;
    }
    c->outdir = out;
    GPtrArray *w = g_ptr_array_new_with_free_func(g_free);
    split_warnings(dir, &c->st, w);
    for (guint i = 0; i < w->len; i++)
        jerr_warn("%s", (const char *)w->pdata[i]);
    g_ptr_array_free(w, TRUE);
    return c;
}

const char *dc_thread_stream_dir(const char *dir, char *err, size_t errlen)
{
    if (has_streams(dir, "tid-") || !has_streams(dir, "cpu-")) return dir;
    g_mutex_lock(&g_splits_lock);
    if (!g_splits) {
        g_splits = g_hash_table_new(g_str_hash, g_str_equal);
        atexit(remove_splits);
    }
    char *key = split_key(dir);
    cached *c = g_hash_table_lookup(g_splits, key);
    if (!c) {
        c = try_split(dir);
        g_hash_table_insert(g_splits, key, c);
    } else {
        g_free(key);
    }
    const char *r = c->outdir;
    if (!r) snprintf(err, errlen, "%s", c->error);
    g_mutex_unlock(&g_splits_lock);
    return r;
}

const dc_percpu_stats *dc_percpu_stats_of(const char *dir)
{
    char *key = split_key(dir);
    g_mutex_lock(&g_splits_lock);
    cached *c = g_splits ? g_hash_table_lookup(g_splits, key) : NULL;
    g_mutex_unlock(&g_splits_lock);
    g_free(key);
    return c && c->outdir ? &c->st : NULL;
}

void dc_percpu_warnings(const char *dir, GPtrArray *out)
{
    const dc_percpu_stats *st = dc_percpu_stats_of(dir);
    if (st)
        split_warnings(dir, st, out);
}
