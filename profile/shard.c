/* Sharded decoding: the plan, and each shard's pieces built from their
 * flow into a partial result (see shard.h; merging is in partmerge.c, the
 * file in partfile.c, its format in docs/FORMAT.md, "Partial results"). */
#include "profile/shard.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "common/fileio.h"
#include "common/jerr.h"
#include "common/jmeta.h"
#include "decoder/percpu.h"
#include "profile/part.h"
#include "profile/timebase.h"
#include "reconstruct/reference.h"
#include "reconstruct/trace.h"
#include "recover/recover.h"

/* ---- the plan -------------------------------------------------------------- */

static int cmp_piece(const void *a, const void *b)
{
    const pf_shard_piece *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->from < y->from ? -1 : x->from > y->from;
}

static void sha_u64(GChecksum *c, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    g_checksum_update(c, b, sizeof b);
}

static void sha_digest(GChecksum *c, uint8_t out[32])
{
    gsize len = 32;
    g_checksum_get_digest(c, out, &len);
}

static gint cmp_name(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names and sizes of the regular files of dir/sub, sorted, into c. */
static void sha_listing(GChecksum *c, const char *dir, const char *sub)
{
    char *path = g_build_filename(dir, sub, NULL);
    GDir *d = g_dir_open(path, 0, NULL);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (const char *e; d && (e = g_dir_read_name(d));)
        g_ptr_array_add(names, g_strdup(e));
    if (d)
        g_dir_close(d);
    g_ptr_array_sort(names, cmp_name);
    for (guint i = 0; i < names->len; i++) {
        char *f = g_build_filename(path, names->pdata[i], NULL);
        struct stat st;
        if (stat(f, &st) == 0 && S_ISREG(st.st_mode)) {
            g_checksum_update(c, (const guchar *)names->pdata[i],
                              (gssize)strlen(names->pdata[i]) + 1);
            sha_u64(c, (uint64_t)st.st_size);
        }
        g_free(f);
    }
    g_ptr_array_free(names, TRUE);
    g_free(path);
}

/* What tells one trace from another: info.json and the names and sizes of
 * its PT, sideband and JVM files. */
static void trace_identity(const char *dir, uint8_t out[32])
{
    GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(c, (const guchar *)"jpt-trace", 10);
    char *info = g_build_filename(dir, "info.json", NULL);
    char *text = NULL, err[256];
    size_t len = 0;
    if (jpt_read_small_file(info, 16u << 20, &text, &len, err, sizeof err) == 0) {
        sha_u64(c, len);
        g_checksum_update(c, (const guchar *)text, (gssize)len);
    } else {
        sha_u64(c, UINT64_MAX);
    }
    free(text);
    g_free(info);
    sha_listing(c, dir, "pt");
    sha_listing(c, dir, "sideband");
    sha_listing(c, dir, "jvm");
    sha_digest(c, out);
    g_checksum_free(c);
}

void pf_plan_identity(pf_shard_plan *p)
{
    GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(c, (const guchar *)"jpt-plan", 9);
    g_checksum_update(c, p->trace_id, sizeof p->trace_id);
    sha_u64(c, PF_PART_VERSION);
    sha_u64(c, p->shards);
    sha_u64(c, p->whole_threads);
    for (size_t i = 0; i < p->npieces; i++) {
        sha_u64(c, p->pieces[i].shard);
        sha_u64(c, p->pieces[i].tid);
        sha_u64(c, p->pieces[i].from);
        sha_u64(c, p->pieces[i].to);
    }
    sha_digest(c, p->plan_id);
    g_checksum_free(c);
}

typedef struct stream {
    uint32_t tid;
    uint64_t size;
} stream;

static int cmp_stream_size(const void *a, const void *b)
{
    const stream *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* floor(x * n / total): the shard of byte x of the line. */
static uint32_t shard_of(uint64_t x, uint64_t total, uint32_t n)
{
    if (!total)
        return 0;
    unsigned __int128 k = (unsigned __int128)x * n / total;
    return k >= n ? n - 1 : (uint32_t)k;
}

/* ceil(k * total / n): where shard k's part of the line starts. */
static uint64_t shard_start(uint32_t k, uint64_t total, uint32_t n)
{
    unsigned __int128 v = (unsigned __int128)k * total + n - 1;
    return (uint64_t)(v / n);
}

int pf_shard_plan_make(const char *dir, uint32_t shards, bool whole_threads,
                       pf_shard_plan *plan, char *err, size_t errlen)
{
    memset(plan, 0, sizeof *plan);
    if (shards < 1 || shards > PF_SHARD_MAX) {
        snprintf(err, errlen, "shards: expected 1..%u, got %u", PF_SHARD_MAX, shards);
        return -1;
    }
    int mode = ref_trace_mode(dir, err, errlen);
    if (mode < 0)
        return -1;
    if (mode == JM_MODE_REFERENCE) {
        snprintf(err, errlen, "%s: a reference-mode trace has no PT to share out "
                 "(ptdecode export reads it whole)", dir);
        return -1;
    }
    const char *sdir = dc_thread_stream_dir(dir, err, errlen);
    if (!sdir)
        return -1;
    uint32_t *tids = NULL;
    size_t ncpu = 0;
    size_t n = dc_list_thread_streams(dir, &tids, &ncpu);
    if (!n) {
        snprintf(err, errlen, "%s/pt: no per-thread PT streams (tid-<TID>.pt)%s", dir,
                 ncpu ? "; the per-CPU streams hold no thread's trace" : "");
        g_free(tids);
        return -1;
    }
    stream *s = g_new0(stream, n);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "tid-%" PRIu32 ".pt", tids[i]);
        char *path = g_build_filename(sdir, "pt", name, NULL);
        uint64_t size = 0;
        int fd = jpt_open_regular(path, &size);
        if (fd < 0) {
            snprintf(err, errlen, "%s: cannot read: %s", path, jpt_open_error(fd));
            g_free(path);
            g_free(tids);
            g_free(s);
            return -1;
        }
        close(fd);
        g_free(path);
        s[i] = (stream){ tids[i], size };
        total += size;
    }
    g_free(tids);
    GArray *pieces = g_array_new(FALSE, FALSE, sizeof(pf_shard_piece));
    if (whole_threads) {
        /* Largest first onto the least loaded shard (the lowest on ties). */
        qsort(s, n, sizeof *s, cmp_stream_size);
        uint64_t *load = g_new0(uint64_t, shards);
        for (size_t i = 0; i < n; i++) {
            uint32_t best = 0;
            for (uint32_t k = 1; k < shards; k++)
                if (load[k] < load[best])
                    best = k;
            load[best] += s[i].size;
            pf_shard_piece p = { best, s[i].tid, 0, s[i].size };
            g_array_append_val(pieces, p);
        }
        g_free(load);
    } else {
        /* The line through all streams in tid order, cut in N equal parts. */
        uint64_t at = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t z = s[i].size;
            if (z < PF_SHARD_SPLIT_MIN) {
                pf_shard_piece p = { shard_of(at + z / 2, total, shards), s[i].tid, 0, z };
                g_array_append_val(pieces, p);
            } else {
                uint32_t k0 = shard_of(at, total, shards), k1 = shard_of(at + z - 1, total, shards);
                for (uint32_t k = k0; k <= k1; k++) {
                    uint64_t lo = MAX(at, shard_start(k, total, shards));
                    uint64_t hi = k + 1 < shards ? MIN(at + z, shard_start(k + 1, total, shards))
                                                 : at + z;
                    if (hi <= lo)
                        continue;
                    pf_shard_piece p = { k, s[i].tid, lo - at, hi - at };
                    g_array_append_val(pieces, p);
                }
            }
            at += z;
        }
    }
    g_free(s);
    plan->shards = shards;
    plan->whole_threads = whole_threads;
    plan->npieces = pieces->len;
    plan->pieces = (pf_shard_piece *)(void *)g_array_free(pieces, FALSE);
    qsort(plan->pieces, plan->npieces, sizeof *plan->pieces, cmp_piece);
    trace_identity(dir, plan->trace_id);
    pf_plan_identity(plan);
    return 0;
}

void pf_shard_plan_free(pf_shard_plan *plan)
{
    g_free(plan->pieces);
    memset(plan, 0, sizeof *plan);
}

uint64_t pf_shard_plan_bytes(const pf_shard_plan *plan, uint32_t k)
{
    uint64_t b = 0;
    for (size_t i = 0; i < plan->npieces; i++)
        if (plan->pieces[i].shard == k)
            b += plan->pieces[i].to - plan->pieces[i].from;
    return b;
}

/* ---- pieces ---------------------------------------------------------------- */

/* ---- building a piece from its flow --------------------------------------- */

typedef struct found_call {
    uint64_t method;
    uint32_t flags;
    int32_t bci;
} found_call;

typedef struct piece_builder {
    pf_piece *p;
    pf_cursor c;
    pf_part_stats *st;
    GArray *run;             /* found_call: FL_F_CONTEXT calls at a level not yet known */
    uint32_t run_level;
    bool failed;
} piece_builder;

static bool counted(const pf_cct *t, const fl_event *ev)
{
    return (unsigned)ev->origin < FL_ORIGIN_COUNT && t->opts.include[ev->origin];
}

/* The time part of pf_cct_apply, for events that do not go through it. */
static void advance_time(pf_cct *t, pf_cursor *c, const fl_event *ev)
{
    if (c->timed && ev->tsc > c->last_tsc) {
        if (counted(t, ev))
            t->nodes[c->node].self_time += ev->tsc - c->last_tsc;
        c->last_tsc = ev->tsc;
    } else if (!c->timed) {
        c->last_tsc = ev->tsc;
        c->timed = true;
    }
}

/* A run of found frames X1 (outermost) .. Xm at level j says that Xm runs
 * at level j, X(m-1) at j + 1, and so on: the frames below the piece's
 * start, named as the flow went on. */
static void flush_run(piece_builder *b)
{
    guint m = b->run->len;
    if (!m)
        return;
    pf_piece *p = b->p;
    for (guint i = 0; i < m; i++) {
        const found_call *f = &g_array_index(b->run, found_call, i);
        uint32_t j = b->run_level + (m - 1 - i);
        if (pf_level_root(p, j) < 0) {
            b->failed = true;
            break;
        }
        p->levels[j] = (pf_level){ .claim = f->method, .claim_flags = f->flags,
                                   .claim_bci = f->bci, .run_outer = i == 0 };
    }
    g_array_set_size(b->run, 0);
}

static int builder_sink(const fl_event *ev, void *ctx)
{
    piece_builder *b = ctx;
    pf_piece *p = b->p;
    pf_cct *t = p->tree;
    if (b->failed)
        return 1;
    if (ev->kind == FL_SEGMENT) {
        flush_run(b);
        if (p->relative && !p->started && !(ev->flags & FL_F_AFTER_GAP) && ev->depth == 0) {
            /* The reconstruction starting here, not a segment of the
             * thread's flow. */
            p->has_start_tsc = true;
            p->start_tsc = ev->tsc;
            return 0;
        }
        b->c = pf_cct_begin(t, p->tid, ev->tsc, ev->stack, NULL, ev->depth);
        if (!p->started)
            p->join = false;
        p->started = true;
        b->failed = b->c.node < 0;
        return b->failed;
    }
    if (ev->kind != FL_CALL && ev->kind != FL_RETURN && ev->kind != FL_BYTECODE)
        return 0;
    if (!p->started) {
        p->started = true;
        if (p->relative) {
            b->c = (pf_cursor){ .node = pf_level_root(p, 0) };
            p->join = true;
            p->join_tsc = ev->tsc;
            p->join_counted = counted(t, ev);
        } else {
            b->c = pf_cct_begin(t, p->tid, ev->tsc, NULL, NULL, 0);
        }
        if (b->c.node < 0) {
            b->failed = true;
            return 1;
        }
    }
    if ((unsigned)ev->origin < FL_ORIGIN_COUNT) {
        b->st->events[ev->origin]++;
        if (ev->kind == FL_CALL && !(ev->flags & FL_F_CONTEXT) && counted(t, ev))
            b->st->calls[ev->origin]++;
    }
    int64_t lv = pf_level_of(t, b->c.node);
    if (ev->kind == FL_CALL && (ev->flags & FL_F_CONTEXT) &&
        (b->run->len || (lv >= 0 && p->levels[lv].claim == PF_NO_METHOD))) {
        if (!b->run->len)
            b->run_level = (uint32_t)lv;
        found_call f = { ev->method_id, ev->flags, ev->bci };
        g_array_append_val(b->run, f);
        advance_time(t, &b->c, ev);
        return 0;
    }
    flush_run(b);
    if (ev->kind == FL_RETURN && lv >= 0) {
        /* Out of the frame of level lv into the one below it. */
        advance_time(t, &b->c, ev);
        b->c.node = pf_level_root(p, (uint32_t)lv + 1);
        b->failed = b->c.node < 0;
        return b->failed;
    }
    if (pf_cct_apply(t, &b->c, ev) < 0 || b->c.node < 0)
        b->failed = true;
    return b->failed;
}

static void builder_finish(piece_builder *b)
{
    flush_run(b);
    if (b->p->started) {
        b->p->final = b->c.node;
        b->p->timed = b->c.timed;
        b->p->last_tsc = b->c.last_tsc;
    }
}

/* The names of the methods and threads p's pieces refer to, from the trace. */
static void collect_names(pf_part *p, const pf_names *names)
{
    for (guint i = 0; i < p->pieces->len; i++) {
        const pf_piece *pc = p->pieces->pdata[i];
        const char *tn = pf_names_thread(names, pc->tid);
        if (tn && !g_hash_table_contains(p->threads, GUINT_TO_POINTER(pc->tid)))
            g_hash_table_insert(p->threads, GUINT_TO_POINTER(pc->tid), g_strdup(tn));
        for (uint32_t n = 1; n < pc->tree->count; n++) {
            uint64_t id = pc->tree->nodes[n].method;
            const pf_method_name *mn = id < PF_LEVEL_ROOT ? pf_names_method(names, id) : NULL;
            if (mn)
                pf_part_add_method(p, id, mn->modifiers, mn->class_name, mn->name, mn->sig);
        }
        for (uint32_t l = 0; l < pc->nlevels; l++) {
            const pf_method_name *mn = pc->levels[l].claim != PF_NO_METHOD
                                       ? pf_names_method(names, pc->levels[l].claim) : NULL;
            if (mn)
                pf_part_add_method(p, pc->levels[l].claim, mn->modifiers, mn->class_name, mn->name,
                           mn->sig);
        }
    }
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether the plan cuts tid's stream into more than one piece. */
static bool thread_split(const pf_shard_plan *plan, uint32_t tid)
{
    size_t n = 0;
    for (size_t i = 0; i < plan->npieces; i++)
        n += plan->pieces[i].tid == tid;
    return n > 1;
}

static void class_set_cb(const char *klass, void *ctx)
{
    pf_class_set_add(ctx, klass);
}

pf_part *pf_shard_run(const char *dir, const pf_shard_plan *plan, uint32_t k,
                      const pf_cct_opts *opts, unsigned jobs, const char *title,
                      char *err, size_t errlen)
{
    uint64_t cpu0 = cpu_ns();
    if (k >= plan->shards) {
        snprintf(err, errlen, "shard index %u is not below the shard count %u", k,
                 plan->shards);
        return NULL;
    }
    rt_trace *t = rt_open(dir, err, errlen);
    if (!t)
        return NULL;
    const char *const *warn;
    size_t nw = rt_warnings(t, &warn);
    for (size_t i = 0; i < nw; i++)
        jerr_warn_grouped(warn[i]);
    pf_names *names = pf_names_load(dir, err, errlen);
    if (!names) {
        rt_close(t);
        return NULL;
    }
    pf_part *p = pf_part_new();
    p->shards = plan->shards;
    p->whole_threads = plan->whole_threads;
    memcpy(p->trace_id, plan->trace_id, sizeof p->trace_id);
    memcpy(p->plan_id, plan->plan_id, sizeof p->plan_id);
    p->opts = opts ? *opts : pf_cct_default_opts();
    p->title = g_strdup(title ? title : dir);
    p->have = g_new0(uint8_t, (plan->shards + 7) / 8);
    p->have[k / 8] |= (uint8_t)(1u << (k % 8));
    p->nplan = plan->npieces;
    p->plan = g_memdup2(plan->pieces, sizeof *plan->pieces * plan->npieces);
    pf_timebase tb;
    char terr[512];
    if (pf_timebase_read(dir, 0, &tb, terr, sizeof terr) < 0)
        jerr_warn("%s; times stay in TSC ticks", terr);
    p->tb = tb;
    rv_icfg ic = rv_program_icfg(rt_program(t));
    rv_options ro = { .icfg = &ic };
    GArray *run = g_array_new(FALSE, FALSE, sizeof(found_call));
    bool ok = true;
    for (size_t i = 0; i < plan->npieces && ok; i++) {
        const pf_shard_piece *sp = &plan->pieces[i];
        if (sp->shard != k)
            continue;
        pf_piece *pc = pf_piece_new(&p->opts, sp->tid, sp->from, sp->to);
        if (!pc) {
            snprintf(err, errlen, "out of memory");
            ok = false;
            break;
        }
        piece_builder b = { .p = pc, .st = &p->st, .run = run };
        rv_filter *rv = rv_new(&ro, builder_sink, &b);
        rp_projector *rp = rt_projector(t, sp->tid, rv_event, rv);
        bool split = thread_split(plan, sp->tid);
        if (split && pc->relative)
            rp_track_assumptions(rp);
        dc_output out = { .sink = rp_event, .ctx = rp };
        dc_options dopt = { .threads = jobs ? jobs : 1, .from = sp->from, .to = sp->to };
        dc_stats dc = { 0 };
        char msg[1024];
        int r = rt_decode(t, sp->tid, &out, &dopt, &dc, msg, sizeof msg);
        rp_stats rs = { 0 };
        rp_finish(rp, &rs);
        if (split) {
            pc->made = pf_class_set_new();
            rp_classes(rp, false, class_set_cb, pc->made);
            if (pc->relative) {
                pc->assumed = pf_class_set_new();
                rp_classes(rp, true, class_set_cb, pc->assumed);
            }
        }
        rp_free(rp);
        rv_finish(rv, NULL);
        rv_free(rv);
        builder_finish(&b);
        g_array_set_size(run, 0);
        if (r < 0) {
            snprintf(err, errlen, "%s", msg);
            ok = false;
        } else if (b.failed) {
            snprintf(err, errlen, "out of memory building the calling context tree");
            ok = false;
        }
        if (dc.problems)
            jerr_warn_kind("decode problem", "%s", dc.problem);
        p->st.pt_bytes += sp->to - sp->from;
        p->st.bytecodes += rs.bytecodes;
        p->st.placed += rs.placed;
        p->st.skipped_bytes += dc.skipped_bytes;
        if (sp->from == 0)      /* the decoder counts a stream's losses whole */
            p->st.lost_bytes += dc.lost_bytes;
        g_ptr_array_add(p->pieces, pc);
    }
    g_array_free(run, TRUE);
    if (ok)
        collect_names(p, names);
    pf_names_free(names);
    rt_close(t);
    if (!ok) {
        pf_part_free(p);
        return NULL;
    }
    p->st.cpu_ns = cpu_ns() - cpu0;
    return p;
}
