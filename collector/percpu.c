/* Emulated per-CPU mode (percpu.h).
 *
 * Each per-thread stream is cut into stretches: a stretch runs from the end
 * of the previous one (the stream start, a TIP.PGD, a loss) up to and
 * including the next TIP.PGD, or up to a loss or the stream end. The IP
 * filter covers only the code cache, so threads leave it all the time, and
 * on hardware every context switch of a filtered thread falls between a
 * TIP.PGD and the next TIP.PGE: stretches are the units a scheduler can
 * move between CPUs without cutting a thread's trace where hardware could
 * not.
 *
 * Scheduling (deterministic): the stretch that could start earliest (its
 * first TSC plus its thread's accumulated delay; ties: the lower tid) is
 * placed next, on the CPU where it can start earliest (ties: the CPU the
 * thread last ran on, then the one idle longest, then the lowest number). A CPU is free for another
 * thread PC_SWITCH_TICKS after the last TSC of the stretch it ran, for the
 * thread it ran at once; a thread moving to another CPU also waits
 * PC_SWITCH_TICKS after its own last stretch. A stretch that cannot start
 * on time waits: its TSC packets, and those of every later stretch of its
 * thread, are shifted by the wait, so time stays monotonic in each CPU
 * stream and a thread's stretches keep their order.
 *
 * Memory is bounded by the thread count, not the trace: each thread's
 * stream is mapped and parsed one stretch ahead, and each CPU's output goes
 * straight to its files. */
#include "collector/percpu.h"

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
#include <intel-pt.h>
#include <linux/perf_event.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "common/auxidx.h"
#include "common/fileio.h"

/* An AUX record per this much of a CPU's stream, as a drained ring gives. */
#define AUX_CHUNK (256u << 10)

/* ---- time conversion ----------------------------------------------------- */

uint64_t pc_tsc_to_perf_time(const perf_time_conv *tc, uint64_t tsc)
{
    if (!tc->valid || tc->time_mult == 0 || tc->time_shift >= 64) return tsc;
    /* The kernel's (perf_event_mmap_page documentation): no overflow for
     * any 64-bit TSC. */
    uint64_t quot = tsc >> tc->time_shift;
    uint64_t rem = tsc & ((1ull << tc->time_shift) - 1);
    return tc->time_zero + quot * tc->time_mult + ((rem * tc->time_mult) >> tc->time_shift);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pc_host_time_conv(perf_time_conv *tc)
{
    memset(tc, 0, sizeof *tc);
#if defined(__x86_64__) || defined(__i386__)
    uint64_t n0 = mono_ns(), t0 = __rdtsc();
    struct timespec nap = { 0, 20 * 1000000 };
    nanosleep(&nap, NULL);
    uint64_t n1 = mono_ns(), t1 = __rdtsc();
    if (t1 <= t0 || n1 <= n0) goto identity;
    /* ns per tick as a 31-bit binary fraction, like the kernel's
     * cyc2ns (mult fits 32 bits for any TSC faster than 0.5 GHz). */
    double ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
    double m = ns_per_tick * (double)(1u << 31);
    if (!(m >= 1.0 && m < 4294967295.0)) goto identity;
    tc->valid = true;
    tc->time_shift = 31;
    tc->time_mult = (uint32_t)(m + 0.5);
    tc->time_zero = 0;
    tc->time_zero = n1 - pc_tsc_to_perf_time(tc, t1);   /* wraps like the kernel's */
    return;
identity:
#endif
    tc->valid = true;
    tc->time_mult = 1;
    tc->time_shift = 0;
    tc->time_zero = 0;
}

/* ---- reading the per-thread streams ---------------------------------------- */

typedef struct cut {
    uint64_t off, lost;         /* the stream resumes at off after `lost` bytes */
} cut;

typedef struct stretch {
    uint64_t begin, end;
    uint64_t first_tsc, last_tsc;
    uint64_t ip_begin;          /* the stream's last IP at begin (IP compression) */
    bool psb_first;             /* the first packet is a PSB */
    bool cut;                   /* a loss follows */
    uint64_t lost;
} stretch;

typedef struct thr {
    uint32_t tid, pid;
    char *pt_path, *idx_path, *sb_path;
    uint8_t *buf;
    size_t size;
    struct pt_packet_decoder *dec;
    cut *cuts;
    size_t ncuts, cuti;
    uint64_t pos, last_ip, last_tsc;
    stretch next;
    bool has_next;
    /* placement */
    uint64_t delay, end_t;
    int cpu;                    /* -1: not run yet */
    bool has_exit;
    uint32_t exit_ppid, exit_ptid;
    uint64_t nstretches, waits, migrations;     /* for eval/percpu.json */
} thr;

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

static bool has_ip(enum pt_packet_type t)
{
    return t == ppt_fup || t == ppt_tip || t == ppt_tip_pge || t == ppt_tip_pgd;
}

/* The next stretch of t into t->next; false at the end of the stream. */
static bool next_stretch(thr *t, pc_result *res)
{
    stretch *s = &t->next;
    t->has_next = false;
    while (t->pos < t->size) {
        memset(s, 0, sizeof *s);
        s->begin = t->pos;
        s->first_tsc = s->last_tsc = t->last_tsc;
        s->ip_begin = t->last_ip;
        /* A loss the index places before this stretch (inside bytes left
         * out as undecodable): accounted here, so totals stay truthful. */
        while (t->cuti < t->ncuts && t->cuts[t->cuti].off <= s->begin) {
            s->cut = true;
            s->lost += t->cuts[t->cuti++].lost;
        }
        bool tsc_seen = false, first = true, done = false;
        if (pt_pkt_sync_set(t->dec, t->pos) < 0) { t->pos = t->size; break; }
        while (!done) {
            uint64_t off = t->pos;
            if (t->cuti < t->ncuts && t->cuts[t->cuti].off <= off && off > s->begin) {
                /* A loss: the trace resumes (with PSB+) at the cut. */
                s->end = off;
                s->cut = true;
                s->lost += t->cuts[t->cuti++].lost;
                done = true;
                break;
            }
            struct pt_packet pkt;
            int r = pt_pkt_next(t->dec, &pkt, sizeof pkt);
            if (r < 0) {
                s->end = off;
                if (r == -pte_eos) {
                    t->pos = t->size;
                } else {
                    /* Undecodable: leave the bytes out up to the next PSB. */
                    uint64_t nx = t->size;
                    if (pt_pkt_sync_forward(t->dec) >= 0) pt_pkt_get_sync_offset(t->dec, &nx);
                    if (nx <= off) nx = t->size;
                    res->skipped_bytes += nx - off;
                    t->pos = nx;
                    t->last_ip = 0;
                }
                done = true;
                break;
            }
            pt_pkt_get_offset(t->dec, &t->pos);
            if (first) s->psb_first = pkt.type == ppt_psb;
            first = false;
            if (pkt.type == ppt_psb) t->last_ip = 0;
            if (pkt.type == ppt_tsc) {
                t->last_tsc = pkt.payload.tsc.tsc;
                if (!tsc_seen) s->first_tsc = t->last_tsc;
                tsc_seen = true;
                s->last_tsc = t->last_tsc;
            }
            if (has_ip(pkt.type)) update_ip(&t->last_ip, &pkt.payload.ip);
            if (pkt.type == ppt_tip_pgd) {
                s->end = t->pos;
                done = true;
            }
        }
        /* A loss right after the stretch's last packet (or at the stream's
         * end) belongs to it. */
        while (t->cuti < t->ncuts && t->cuts[t->cuti].off <= t->pos &&
               (t->cuts[t->cuti].off == s->end || t->pos >= t->size)) {
            s->cut = true;
            s->lost += t->cuts[t->cuti++].lost;
        }
        if (t->pos >= t->size) {
            /* Losses the index places beyond the data: still this one's. */
            for (; t->cuti < t->ncuts; t->cuti++) {
                s->cut = true;
                s->lost += t->cuts[t->cuti].lost;
            }
        }
        if (s->end > s->begin) {
            t->has_next = true;
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

static void thr_free(thr *t)
{
    if (t->dec) pt_pkt_free_decoder(t->dec);
    if (t->buf && t->size) munmap(t->buf, t->size);
    g_free(t->cuts);
    g_free(t->pt_path);
    g_free(t->idx_path);
    g_free(t->sb_path);
}

/* Opens one thread's stream, index and sideband. */
static int thr_open(thr *t, const char *dir, uint32_t tid, pc_result *res, char *err,
                    size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->tid = t->pid = tid;
    t->cpu = -1;
    t->pt_path = g_strdup_printf("%s/pt/tid-%u.pt", dir, tid);
    t->idx_path = g_strdup_printf("%s/pt/tid-%u.idx", dir, tid);
    t->sb_path = g_strdup_printf("%s/sideband/tid-%u.sb", dir, tid);
    int fd = open(t->pt_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", t->pt_path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    t->size = (size_t)st.st_size;
    if (t->size) {
        void *m = mmap(NULL, t->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "cannot map %s: %s", t->pt_path, strerror(errno));
            close(fd);
            t->size = 0;
            return -1;
        }
        t->buf = m;
        madvise(m, t->size, MADV_SEQUENTIAL);   /* read once, front to back */
    }
    close(fd);

    auxidx idx;
    char ierr[512];
    int rc = auxidx_load(t->idx_path, &idx, ierr, sizeof ierr);
    if (rc >= 0) {
        if (rc > 0) fprintf(stderr, "ptrec: warning: %s\n", ierr);
        t->cuts = g_new0(cut, idx.n + 1);
        for (size_t i = 0; i < idx.n; i++) {
            if (!(idx.recs[i].flags & AUXIDX_TRUNCATED)) continue;
            t->cuts[t->ncuts].off = idx.recs[i].offset + idx.recs[i].size;
            t->cuts[t->ncuts].lost = idx.recs[i].lost_bytes;
            res->lost_bytes += idx.recs[i].lost_bytes;
            res->truncated++;
            t->ncuts++;
        }
        if (t->ncuts > 1) qsort(t->cuts, t->ncuts, sizeof *t->cuts, cut_cmp);
        auxidx_free(&idx);
    } else if (access(t->idx_path, F_OK) == 0) {
        fprintf(stderr, "ptrec: warning: %s\n", ierr);
    }

    /* The sideband gives the process id and the thread's end. */
    gchar *sb = NULL;
    gsize sblen = 0;
    if (g_file_get_contents(t->sb_path, &sb, &sblen, NULL)) {
        size_t off = 0;
        while (off < sblen) {
            perf_rec r;
            char perr[256];
            long n = perf_rec_parse((const uint8_t *)sb + off, sblen - off, PERF_JPT_SAMPLE_TYPE,
                                    off, &r, perr, sizeof perr);
            if (n < 0) {
                fprintf(stderr, "ptrec: warning: %s: %s\n", t->sb_path, perr);
                break;
            }
            if (n == 0) break;
            if (r.type == PERF_RECORD_ITRACE_START) t->pid = r.u.itrace_start.pid;
            if (r.type == PERF_RECORD_EXIT) {
                t->has_exit = true;
                t->exit_ppid = r.u.task.ppid;
                t->exit_ptid = r.u.task.ptid;
            }
            off += (size_t)n;
        }
        g_free(sb);
    }

    if (t->size) {
        struct pt_config cfg;
        pt_config_init(&cfg);
        cfg.begin = t->buf;
        cfg.end = t->buf + t->size;
        t->dec = pt_pkt_alloc_decoder(&cfg);
        if (!t->dec) {
            snprintf(err, errlen, "%s: cannot allocate a packet decoder", t->pt_path);
            return -1;
        }
        next_stretch(t, res);
    }
    return 0;
}

/* ---- writing the per-CPU streams ------------------------------------------ */

typedef struct vcpu {
    unsigned num;
    char *pt_path, *sb_path;
    FILE *pt, *sb;
    int idx_fd;
    uint64_t pt_off, aux_begin;
    uint64_t aux_lost;
    bool ran, need_psb;
    int64_t last_tid;           /* -1: nobody switched in */
    uint32_t last_pid;
    uint64_t end_t;             /* last TSC written */
    uint64_t last_rec;          /* time of the last sideband record (TSC) */
    GHashTable *started;        /* tids with an ITRACE_START here */
} vcpu;

typedef struct wr {
    const pc_params *p;
    pc_result *res;
    struct pt_encoder *enc;
    uint8_t encbuf[64];
    char *err;
    size_t errlen;
    bool failed;
} wr;

static void wfail(wr *w, const char *what, const char *path)
{
    if (!w->failed) snprintf(w->err, w->errlen, "cannot %s %s: %s", what, path, strerror(errno));
    w->failed = true;
}

static void put_pt(wr *w, vcpu *c, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, c->pt) != n) wfail(w, "write", c->pt_path);
    c->pt_off += n;
}

static void put_pkt(wr *w, vcpu *c, const struct pt_packet *pkt)
{
    pt_enc_sync_set(w->enc, 0);
    int n = pt_enc_next(w->enc, pkt);
    if (n <= 0) {
        if (!w->failed)
            snprintf(w->err, w->errlen, "%s: cannot encode a packet (%s)", c->pt_path,
                     pt_errstr(pt_errcode(n)));
        w->failed = true;
        return;
    }
    put_pt(w, c, w->encbuf, (size_t)n);
}

/* One sideband record: header, body, sample_id (PERF_JPT_SAMPLE_TYPE). */
/* The sample_id of a record: whose it is, when, and of which event. */
typedef struct rec_sample {
    uint32_t pid, tid;
    uint64_t tsc, id;
} rec_sample;

static void put_rec(wr *w, vcpu *c, uint32_t type, uint16_t misc, const void *body,
                    size_t blen, rec_sample sm)
{
    uint32_t pid = sm.pid, tid = sm.tid;
    uint64_t tsc = sm.tsc, id = sm.id;
    if (tsc < c->last_rec) tsc = c->last_rec;   /* records of a CPU are in time order */
    c->last_rec = tsc;
    uint8_t rec[128];
    size_t size = 8 + blen + 40;
    struct perf_event_header h = { .type = type, .misc = misc, .size = (uint16_t)size };
    memcpy(rec, &h, 8);
    if (blen) memcpy(rec + 8, body, blen);
    uint8_t *sid = rec + 8 + blen;
    uint64_t time = pc_tsc_to_perf_time(&w->p->time, tsc);
    uint32_t cpu[2] = { c->num, 0 };
    memcpy(sid, &pid, 4);
    memcpy(sid + 4, &tid, 4);
    memcpy(sid + 8, &time, 8);
    memcpy(sid + 16, &id, 8);
    memcpy(sid + 24, cpu, 8);
    memcpy(sid + 32, &id, 8);
    if (fwrite(rec, 1, size, c->sb) != size) wfail(w, "write", c->sb_path);
}

/* Event ids as two perf events per CPU would have them: PT and the dummy. */
static uint64_t pt_id(const vcpu *c) { return 2u * c->num + 1; }
static uint64_t dummy_id(const vcpu *c) { return 2u * c->num + 2; }

static void put_switch(wr *w, vcpu *c, bool out, uint32_t pid, uint32_t tid, uint64_t tsc)
{
    put_rec(w, c, PERF_RECORD_SWITCH, out ? PERF_RECORD_MISC_SWITCH_OUT : 0, NULL, 0,
            (rec_sample){ pid, tid, tsc, dummy_id(c) });
    w->res->switches++;
}

/* An AUX record (and its index entry) for what the CPU wrote since the
 * last one; the index's tsc is what the hardware backend would compute
 * from the record's perf time. */
static void flush_aux(wr *w, vcpu *c, uint64_t tsc, bool truncated, uint64_t lost)
{
    if (c->pt_off == c->aux_begin && !truncated) return;
    if (tsc < c->last_rec) tsc = c->last_rec;
    uint64_t body[3] = { c->aux_begin, c->pt_off - c->aux_begin,
                         truncated ? PERF_AUX_FLAG_TRUNCATED : 0 };
    uint32_t pid = c->last_tid >= 0 ? c->last_pid : 0;
    uint32_t tid = c->last_tid >= 0 ? (uint32_t)c->last_tid : 0;
    put_rec(w, c, PERF_RECORD_AUX, 0, body, sizeof body,
            (rec_sample){ pid, tid, tsc, pt_id(c) });
    auxidx_rec x = {
        .offset = body[0], .size = body[1], .flags = body[2],
        .tsc = perf_time_to_tsc(&w->p->time, pc_tsc_to_perf_time(&w->p->time, tsc)),
        .lost_bytes = lost,
    };
    int rc = auxidx_append(c->idx_fd, &x);
    if (rc != 0 && !w->failed) {
        snprintf(w->err, w->errlen, "cannot write the index of %s: %s", c->pt_path,
                 strerror(-rc));
        w->failed = true;
    }
    c->aux_begin = c->pt_off;
}

/* Copies a stretch into c's stream, TSCs shifted by t->delay, its first IP
 * packet made uncompressed (the CPU stream's last IP is another's). */
static void emit_stretch(wr *w, vcpu *c, thr *t, const stretch *s)
{
    if (c->need_psb && !s->psb_first) {
        /* After a loss the decoder needs a PSB to synchronize. */
        struct pt_packet pk;
        memset(&pk, 0, sizeof pk);
        pk.type = ppt_psb;
        put_pkt(w, c, &pk);
        pk.type = ppt_tsc;
        pk.payload.tsc.tsc = s->first_tsc + t->delay;
        put_pkt(w, c, &pk);
        memset(&pk, 0, sizeof pk);
        pk.type = ppt_mode;
        pk.payload.mode.leaf = pt_mol_exec;
        pk.payload.mode.bits.exec.csl = 1;
        put_pkt(w, c, &pk);
        memset(&pk, 0, sizeof pk);
        pk.type = ppt_psbend;
        put_pkt(w, c, &pk);
        w->res->psbs_added++;
    }
    c->need_psb = false;
    if (pt_pkt_sync_set(t->dec, s->begin) < 0) return;
    uint64_t last = s->ip_begin, off = s->begin, run = s->begin;   /* run: bytes to copy */
    bool synced = false;   /* an uncompressed IP (or PSB) has been written */
    while (off < s->end && !w->failed) {
        struct pt_packet pkt;
        if (pt_pkt_next(t->dec, &pkt, sizeof pkt) < 0) break;
        uint64_t nx;
        pt_pkt_get_offset(t->dec, &nx);
        bool raw = true;
        if (pkt.type == ppt_psb) {
            synced = true;
            last = 0;
        } else if (pkt.type == ppt_tsc && t->delay) {
            pkt.payload.tsc.tsc += t->delay;
            raw = false;
        } else if (has_ip(pkt.type) && pkt.payload.ip.ipc != pt_ipc_suppressed) {
            update_ip(&last, &pkt.payload.ip);
            if (!synced && pkt.payload.ip.ipc != pt_ipc_sext_48 &&
                pkt.payload.ip.ipc != pt_ipc_full) {
                uint64_t hi = last >> 47;
                pkt.payload.ip.ipc = (hi == 0 || hi == 0x1ffff) ? pt_ipc_sext_48 : pt_ipc_full;
                pkt.payload.ip.ip = last;
                raw = false;
                w->res->reencoded_ips++;
            }
            synced = true;
        }
        if (!raw) {
            /* Unchanged packets go out in one piece up to a rewritten one. */
            put_pt(w, c, t->buf + run, (size_t)(off - run));
            put_pkt(w, c, &pkt);
            run = nx;
        }
        off = nx;
    }
    put_pt(w, c, t->buf + run, (size_t)(off - run));
}

static int vcpu_open(wr *w, vcpu *c, const char *dir, unsigned k)
{
    memset(c, 0, sizeof *c);
    c->num = k;
    c->last_tid = -1;
    c->idx_fd = -1;
    c->started = g_hash_table_new(g_direct_hash, g_direct_equal);
    c->pt_path = g_strdup_printf("%s/pt/cpu-%u.pt", dir, k);
    c->sb_path = g_strdup_printf("%s/sideband/cpu-%u.sb", dir, k);
    char *idx = g_strdup_printf("%s/pt/cpu-%u.idx", dir, k);
    c->pt = fopen(c->pt_path, "we");
    c->sb = fopen(c->sb_path, "we");
    c->idx_fd = open(idx, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = 0;
    if (!c->pt) wfail(w, "create", c->pt_path), rc = -1;
    else if (!c->sb) wfail(w, "create", c->sb_path), rc = -1;
    else if (c->idx_fd < 0 || auxidx_write_header(c->idx_fd) != 0) wfail(w, "create", idx), rc = -1;
    g_free(idx);
    return rc;
}

static void vcpu_close(wr *w, vcpu *c)
{
    if (c->pt && fclose(c->pt) != 0) wfail(w, "write", c->pt_path);
    if (c->sb && fclose(c->sb) != 0) wfail(w, "write", c->sb_path);
    if (c->idx_fd >= 0) close(c->idx_fd);
    if (c->started) g_hash_table_destroy(c->started);
    g_free(c->pt_path);
    g_free(c->sb_path);
}

/* Places t's next stretch. */
static void place(wr *w, vcpu *cpus, unsigned n, thr *t)
{
    const stretch *s = &t->next;
    uint64_t ready = s->first_tsc + t->delay;
    unsigned best = 0;
    uint64_t best_start = UINT64_MAX;
    for (unsigned k = 0; k < n; k++) {
        const vcpu *c = &cpus[k];
        uint64_t avail = !c->ran ? 0
                       : c->last_tid == (int64_t)t->tid ? c->end_t + 1
                       : c->end_t + PC_SWITCH_TICKS;
        if (t->cpu >= 0 && (unsigned)t->cpu != k && avail < t->end_t + PC_SWITCH_TICKS)
            avail = t->end_t + PC_SWITCH_TICKS;
        uint64_t start = ready > avail ? ready : avail;
        bool better = start < best_start;
        if (start == best_start && t->cpu != (int)best)
            better = t->cpu == (int)k || (!c->ran ? 0 : c->end_t) <
                                         (!cpus[best].ran ? 0 : cpus[best].end_t);
        if (better) {
            best = k;
            best_start = start;
        }
    }
    vcpu *c = &cpus[best];
    if (best_start > ready) {
        w->res->delayed++;
        t->waits++;
        t->delay = best_start - s->first_tsc;
        if (t->delay > w->res->max_delay) w->res->max_delay = t->delay;
    }
    uint64_t start = s->first_tsc + t->delay;
    const uint64_t quarter = PC_SWITCH_TICKS / 4;
    if (t->cpu >= 0 && (unsigned)t->cpu != best) {
        w->res->migrations++;
        t->migrations++;
        vcpu *o = &cpus[t->cpu];
        if (o->last_tid == (int64_t)t->tid) {
            put_switch(w, o, true, t->pid, t->tid, t->end_t + quarter);
            o->last_tid = -1;
        }
    }
    if (c->last_tid != (int64_t)t->tid) {
        if (c->last_tid >= 0) {
            put_switch(w, c, true, c->last_pid, (uint32_t)c->last_tid, c->end_t + quarter);
        }
        uint64_t in = start > quarter ? start - quarter : 0;
        put_switch(w, c, false, t->pid, t->tid, in);
        if (!g_hash_table_contains(c->started, GUINT_TO_POINTER(t->tid))) {
            g_hash_table_add(c->started, GUINT_TO_POINTER(t->tid));
            uint32_t body[2] = { t->pid, t->tid };
            put_rec(w, c, PERF_RECORD_ITRACE_START, 0, body, sizeof body,
                    (rec_sample){ t->pid, t->tid, in, pt_id(c) });
        }
        c->last_tid = t->tid;
        c->last_pid = t->pid;
    }
    emit_stretch(w, c, t, s);
    w->res->stretches++;
    t->nstretches++;
    c->ran = true;
    c->end_t = s->last_tsc + t->delay;
    t->end_t = c->end_t;
    t->cpu = (int)best;
    if (s->cut) {
        flush_aux(w, c, c->end_t + 2, true, s->lost);
        c->need_psb = true;
    } else if (c->pt_off - c->aux_begin >= AUX_CHUNK) {
        flush_aux(w, c, c->end_t + 2, false, 0);
    }
}

/* eval/percpu.json: what the scheduling did to each thread (tests compare
 * a waiting thread's events knowing its times were shifted). */
static void write_eval(const char *dir, const pc_params *p, const pc_result *r, const thr *ts,
                       size_t n)
{
    char *evd = g_build_filename(dir, "eval", NULL);
    g_mkdir_with_parents(evd, 0755);
    char *path = g_build_filename(evd, "percpu.json", NULL);
    FILE *f = fopen(path, "we");
    if (!f) {
        fprintf(stderr, "ptrec: warning: cannot write %s: %s\n", path, strerror(errno));
    } else {
        fprintf(f, "{\"cpus\": %u, \"switch_ticks\": %u, \"stretches\": %" PRIu64
                ", \"switches\": %" PRIu64 ", \"migrations\": %" PRIu64 ", \"waits\": %" PRIu64
                ", \"max_delay\": %" PRIu64 ", \"reencoded_ips\": %" PRIu64
                ", \"psbs_added\": %" PRIu64 ",\n \"threads\": [", p->ncpus, PC_SWITCH_TICKS,
                r->stretches, r->switches, r->migrations, r->delayed, r->max_delay,
                r->reencoded_ips, r->psbs_added);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s\n  {\"tid\": %u, \"stretches\": %" PRIu64 ", \"waits\": %" PRIu64
                    ", \"delay\": %" PRIu64 ", \"migrations\": %" PRIu64 "}", i ? "," : "",
                    ts[i].tid, ts[i].nstretches, ts[i].waits, ts[i].delay, ts[i].migrations);
        fprintf(f, "\n]}\n");
        if (fclose(f) != 0)
            fprintf(stderr, "ptrec: warning: cannot write %s: %s\n", path, strerror(errno));
    }
    g_free(path);
    g_free(evd);
}

static int tid_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void mkdirs(const char *dir, const char *sub)
{
    char *p = g_build_filename(dir, sub, NULL);
    g_mkdir_with_parents(p, 0755);
    g_free(p);
}

/* Moves (keep) or removes a per-thread file. */
static void retire(const char *dir, const char *sub, const char *name, bool keep)
{
    char *from = g_build_filename(dir, sub, name, NULL);
    if (keep) {
        char *to = g_build_filename(dir, "eval", "per-thread", sub, name, NULL);
        if (rename(from, to) != 0 && errno != ENOENT)
            fprintf(stderr, "ptrec: warning: cannot move %s: %s\n", from, strerror(errno));
        g_free(to);
    } else if (unlink(from) != 0 && errno != ENOENT) {
        fprintf(stderr, "ptrec: warning: cannot remove %s: %s\n", from, strerror(errno));
    }
    g_free(from);
}

int pc_convert(const char *dir, const pc_params *p, pc_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (p->ncpus < 1) {
        snprintf(err, errlen, "the number of CPUs must be at least 1");
        return -1;
    }
    /* The per-thread streams. */
    char *ptdir = g_build_filename(dir, "pt", NULL);
    GDir *d = g_dir_open(ptdir, 0, NULL);
    GArray *tids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    const char *ent;
    while (d && (ent = g_dir_read_name(d))) {
        size_t l = strlen(ent);
        if (strncmp(ent, "tid-", 4) != 0 || l < 8 || strcmp(ent + l - 3, ".pt") != 0) continue;
        char *end;
        unsigned long v = strtoul(ent + 4, &end, 10);
        if (end != ent + l - 3 || v > UINT32_MAX) continue;
        uint32_t tid = (uint32_t)v;
        g_array_append_val(tids, tid);
    }
    if (d) g_dir_close(d);
    g_free(ptdir);
    g_array_sort(tids, tid_cmp);
    size_t nthr = tids->len;
    thr *ts = g_new0(thr, nthr ? nthr : 1);
    int rc = 0;
    for (size_t i = 0; i < nthr && rc == 0; i++)
        rc = thr_open(&ts[i], dir, g_array_index(tids, uint32_t, i), res, err, errlen);
    res->threads = nthr;

    wr w = { .p = p, .res = res, .err = err, .errlen = errlen };
    vcpu *cpus = g_new0(vcpu, p->ncpus);
    for (unsigned k = 0; k < p->ncpus; k++) cpus[k].idx_fd = -1;
    if (rc == 0) {
        struct pt_config cfg;
        pt_config_init(&cfg);
        cfg.begin = w.encbuf;
        cfg.end = w.encbuf + sizeof w.encbuf;
        w.enc = pt_alloc_encoder(&cfg);
        if (!w.enc) {
            snprintf(err, errlen, "cannot allocate a PT encoder");
            rc = -1;
        }
    }
    mkdirs(dir, "sideband");
    for (unsigned k = 0; k < p->ncpus && rc == 0; k++) rc = vcpu_open(&w, &cpus[k], dir, k);

    uint64_t total = 0, done = 0, shown = 0;
    for (size_t i = 0; i < nthr; i++) total += ts[i].size;
    while (rc == 0 && !w.failed) {
        if (p->progress && done - shown >= (16u << 20)) {
            p->progress(done, total, p->ctx);
            shown = done;
        }
        thr *pick = NULL;
        for (size_t i = 0; i < nthr; i++) {
            thr *t = &ts[i];
            if (!t->has_next) continue;
            if (!pick || t->next.first_tsc + t->delay < pick->next.first_tsc + pick->delay)
                pick = t;
        }
        if (!pick) break;
        place(&w, cpus, p->ncpus, pick);
        done += pick->next.end - pick->next.begin;
        if (!next_stretch(pick, res) && pick->has_exit && pick->cpu >= 0) {
            vcpu *c = &cpus[pick->cpu];
            uint64_t body[3];
            uint32_t ids[4] = { pick->pid, pick->exit_ppid, pick->tid, pick->exit_ptid };
            memcpy(body, ids, 16);
            body[2] = pc_tsc_to_perf_time(&p->time, pick->end_t + 3);
            put_rec(&w, c, PERF_RECORD_EXIT, 0, body, sizeof body,
                    (rec_sample){ pick->pid, pick->tid, pick->end_t + 3, dummy_id(c) });
        }
    }
    if (p->progress && shown) p->progress(total, total, p->ctx);
    for (unsigned k = 0; k < p->ncpus && rc == 0; k++) {
        vcpu *c = &cpus[k];
        flush_aux(&w, c, c->end_t + 2, false, 0);
        if (c->last_tid >= 0)
            put_switch(&w, c, true, c->last_pid, (uint32_t)c->last_tid,
                       c->end_t + PC_SWITCH_TICKS / 4);
    }
    for (unsigned k = 0; k < p->ncpus; k++) vcpu_close(&w, &cpus[k]);
    if (w.failed) rc = -1;
    if (w.enc) pt_free_encoder(w.enc);

    if (rc == 0) {
        write_eval(dir, p, res, ts, nthr);
        if (p->keep_threads) {
            mkdirs(dir, "eval/per-thread/pt");
            mkdirs(dir, "eval/per-thread/sideband");
        }
        for (size_t i = 0; i < nthr; i++) {
            char name[64];
            snprintf(name, sizeof name, "tid-%u.pt", ts[i].tid);
            retire(dir, "pt", name, p->keep_threads);
            snprintf(name, sizeof name, "tid-%u.idx", ts[i].tid);
            retire(dir, "pt", name, p->keep_threads);
            snprintf(name, sizeof name, "tid-%u.sb", ts[i].tid);
            retire(dir, "sideband", name, p->keep_threads);
        }
    } else {
        /* Leave the per-thread trace as it was. */
        for (unsigned k = 0; k < p->ncpus; k++) {
            char *f[3] = { g_strdup_printf("%s/pt/cpu-%u.pt", dir, k),
                           g_strdup_printf("%s/pt/cpu-%u.idx", dir, k),
                           g_strdup_printf("%s/sideband/cpu-%u.sb", dir, k) };
            for (int i = 0; i < 3; i++) { unlink(f[i]); g_free(f[i]); }
        }
    }
    for (size_t i = 0; i < nthr; i++) thr_free(&ts[i]);
    g_free(ts);
    g_free(cpus);
    g_array_free(tids, TRUE);
    return rc;
}
