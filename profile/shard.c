/* Sharded decoding: the plan, partial CCTs of pieces, their merge and the
 * partial-result file (see shard.h; the file format is in docs/FORMAT.md,
 * "Partial results"). */
#include "profile/shard.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <zlib.h>

#include "common/fileio.h"
#include "common/jerr.h"
#include "common/jmeta.h"
#include "decoder/percpu.h"
#include "profile/timebase.h"
#include "reconstruct/reference.h"
#include "reconstruct/trace.h"
#include "recover/recover.h"

/* The method of a level's root node (a child of node 0, site = level). */
#define PF_LEVEL_ROOT (UINT64_MAX - 1)
/* More levels than this in a piece is not a real stack. */
#define MAX_LEVELS (1u << 24)

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

static void plan_identity(pf_shard_plan *p)
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
    plan_identity(plan);
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

typedef struct pf_level {
    uint64_t claim;          /* the method found running there; PF_NO_METHOD: none */
    uint32_t claim_flags;    /* its FL_CALL's flags */
    int32_t claim_bci;
    bool run_outer;          /* the outermost frame of the run of found frames */
} pf_level;

typedef struct pf_piece {
    uint32_t tid;
    uint64_t from, to;
    bool relative;           /* starts inside the stream: in an unknown context */
    bool started;            /* an event was applied */
    /* The first event continues the stretch of the piece before (no
     * segment of its own came first): the time from the previous piece's
     * last event to join_tsc goes to where that piece ended. */
    bool join, join_counted;
    uint64_t join_tsc;
    /* The segment a relative piece's reconstruction started with (not one
     * of the single decode): where the thread's time starts when nothing
     * came before. */
    bool has_start_tsc;
    uint64_t start_tsc;
    bool timed;
    uint64_t last_tsc;       /* the largest time seen */
    pf_cct *tree;            /* thread root (site tid) and level roots under node 0 */
    pf_level *levels;
    uint32_t nlevels;
    int32_t final;           /* where it ended; valid when started */
    /* Of a thread whose stream is split: the classes its flow showed objects
     * of and, of a relative piece, those its choices between call targets
     * took to have none (rp_classes); class name -> itself. */
    GHashTable *made, *assumed;
} pf_piece;

static GHashTable *class_set_new(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

static void class_set_add(GHashTable *set, const char *klass)
{
    if (!g_hash_table_contains(set, klass))
        g_hash_table_add(set, g_strdup(klass));
}

static GHashTable *class_set_copy(GHashTable *set)
{
    if (!set)
        return NULL;
    GHashTable *c = class_set_new();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, set);
    while (g_hash_table_iter_next(&it, &key, NULL))
        class_set_add(c, key);
    return c;
}

static void piece_free(pf_piece *p)
{
    if (!p)
        return;
    pf_cct_free(p->tree);
    g_free(p->levels);
    if (p->made)
        g_hash_table_destroy(p->made);
    if (p->assumed)
        g_hash_table_destroy(p->assumed);
    g_free(p);
}

static pf_piece *piece_new(const pf_cct_opts *opts, uint32_t tid, uint64_t from, uint64_t to)
{
    pf_piece *p = g_new0(pf_piece, 1);
    p->tid = tid;
    p->from = from;
    p->to = to;
    p->relative = from > 0;
    p->tree = pf_cct_new(opts);
    if (!p->tree) {
        g_free(p);
        return NULL;
    }
    return p;
}

/* The root node of level j, made (with its level entry) when missing; -1
 * when memory ran out or the stack is implausibly deep. */
static int32_t level_root(pf_piece *p, uint32_t j)
{
    if (j >= MAX_LEVELS)
        return -1;
    if (j >= p->nlevels) {
        p->levels = g_renew(pf_level, p->levels, j + 1);
        for (uint32_t i = p->nlevels; i <= j; i++)
            p->levels[i] = (pf_level){ .claim = PF_NO_METHOD, .claim_bci = -1 };
        p->nlevels = j + 1;
    }
    return pf_cct_child(p->tree, 0, PF_LEVEL_ROOT, (int64_t)j);
}

/* The level whose root node is n, or -1. */
static int64_t level_of(const pf_cct *t, int32_t n)
{
    const pf_node *x = &t->nodes[n];
    return x->parent == 0 && x->method == PF_LEVEL_ROOT ? x->site : -1;
}

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
        if (level_root(p, j) < 0) {
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
            b->c = (pf_cursor){ .node = level_root(p, 0) };
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
    int64_t lv = level_of(t, b->c.node);
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
        b->c.node = level_root(p, (uint32_t)lv + 1);
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

/* ---- joining adjacent pieces ----------------------------------------------- */

static void add_self(pf_node *d, const pf_node *s)
{
    d->calls += s->calls;
    d->self_bytecodes += s->self_bytecodes;
    d->self_bc_events += s->self_bc_events;
    d->self_time += s->self_time;
    d->kinds |= s->kinds;
}

/* Past the thread root: a level a single decode would find at the root. */
#define BEYOND (-2)

/* Cells of the alignment below at most; past it, levels map by position. */
#define ALIGN_MAX_CELLS (1u << 22)

/* Where each of b's levels is among the frames f[0..q) (f[0] where a
 * ended, f[i + 1] the caller of f[i]), or BEYOND: an alignment of the
 * methods b found running at its levels with those frames. A piece that
 * starts without its stack may miss or add a return into a frame it never
 * saw entered (one it could not place), which would shift every later
 * level by one; the alignment keeps the frames whose methods agree
 * together instead. Costs: a frame skipped 1, two levels on one frame 1,
 * a found method that differs 2 (a missed return is likelier than a wrong
 * frame); on ties, by position. */
static void align_levels(const pf_piece *b, const uint64_t *f, uint32_t q, int32_t *at,
                         pf_part_stats *st)
{
    uint32_t n = b->nlevels, w = q + 1;       /* column q: BEYOND */
    if (!n)
        return;
    if ((uint64_t)n * w > ALIGN_MAX_CELLS) {
        for (uint32_t j = 0; j < n; j++)
            at[j] = j < q ? (int32_t)j : BEYOND;
        return;
    }
    int64_t *cost = g_new(int64_t, (size_t)n * w);
    uint32_t *from = g_new(uint32_t, (size_t)n * w);
#define MISMATCH(j, i) (2 * ((i) < q && b->levels[j].claim != PF_NO_METHOD && \
                             b->levels[j].claim != f[i]))
    for (uint32_t i = 0; i < w; i++) {
        cost[i] = (int64_t)i + MISMATCH(0, i);
        from[i] = i;
    }
    for (uint32_t j = 1; j < n; j++) {
        const int64_t *pc = cost + (size_t)(j - 1) * w;
        int64_t *cc = cost + (size_t)j * w;
        uint32_t *cf = from + (size_t)j * w;
        int64_t best = INT64_MAX;    /* min over i < i2 of pc[i] - i */
        uint32_t best_i = 0;
        for (uint32_t i2 = 0; i2 < w; i2++) {
            int64_t c = INT64_MAX;
            uint32_t src = i2;
            if (i2 > 0) {            /* the next frame: by position */
                c = pc[i2 - 1];
                src = i2 - 1;
            }
            if (best != INT64_MAX && best + i2 - 1 < c) {    /* frames skipped */
                c = best + i2 - 1;
                src = best_i;
            }
            /* one more level on the same frame; past the root that is free */
            int64_t same = pc[i2] + (i2 < q);
            if (same < c) {
                c = same;
                src = i2;
            }
            cc[i2] = c + MISMATCH(j, i2);
            cf[i2] = src;
            if (pc[i2] - (int64_t)i2 < best) {
                best = pc[i2] - (int64_t)i2;
                best_i = i2;
            }
        }
    }
#undef MISMATCH
    const int64_t *last = cost + (size_t)(n - 1) * w;
    uint32_t i = 0;
    for (uint32_t k = 1; k < w; k++)
        if (last[k] < last[i])
            i = k;
    for (uint32_t j = n; j-- > 0;) {
        at[j] = i < q ? (int32_t)i : BEYOND;
        i = from[(size_t)j * w + i];
    }
    g_free(cost);
    g_free(from);
    for (uint32_t j = 0; j < n; j++) {
        uint32_t want = j < q ? j : q;
        uint32_t got = at[j] == BEYOND ? q : (uint32_t)at[j];
        if (got != want) {
            st->realigned++;
            break;
        }
    }
}

/* Appends b, the piece right after a in the same thread, to a, which
 * starts at the thread's start (so its final node is a real stack).
 * Returns 0, -1 when memory ran out. */
static int piece_join(pf_piece *a, const pf_piece *b, pf_part_stats *st)
{
    st->joins++;
    if (!b->started) {
        a->to = b->to;
        return 0;
    }
    pf_cct *t = a->tree;
    if (!a->started) {
        /* The thread's first events are b's: its reconstruction's start is
         * the thread's. */
        a->started = true;
        a->final = pf_cct_thread_root(t, a->tid);
        if (a->final < 0)
            return -1;
        a->timed = b->has_start_tsc;
        a->last_tsc = b->start_tsc;
    }
    if (b->join && a->timed) {
        if (b->join_tsc > a->last_tsc) {
            if (b->join_counted)
                t->nodes[a->final].self_time += b->join_tsc - a->last_tsc;
        } else if (b->join_tsc < a->last_tsc) {
            st->time_dips++;
        }
    }
    int32_t thread_root = pf_cct_thread_root(t, a->tid);
    if (thread_root < 0)
        return -1;
    /* The frames a ended in, innermost first. */
    GArray *frames = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t n = a->final; n != thread_root && n > 0; n = t->nodes[n].parent)
        g_array_append_val(frames, n);
    uint32_t q = frames->len;
    uint64_t *methods = g_new(uint64_t, q ? q : 1);
    for (uint32_t i = 0; i < q; i++)
        methods[i] = t->nodes[g_array_index(frames, int32_t, i)].method;
    int32_t *target = g_new(int32_t, b->nlevels ? b->nlevels : 1);
    align_levels(b, methods, q, target, st);
    for (uint32_t j = 0; j < b->nlevels; j++) {
        if (target[j] == BEYOND)
            continue;
        uint32_t i = (uint32_t)target[j];
        if (b->levels[j].claim != PF_NO_METHOD) {
            st->found_checked++;
            if (b->levels[j].claim != methods[i])
                st->found_differ++;
        }
        target[j] = g_array_index(frames, int32_t, i);
    }
    g_free(methods);
    g_array_free(frames, TRUE);
    /* Past the thread root a single decode finds these frames running at
     * the root, outermost first: chains of found frames below it. */
    for (uint32_t j = b->nlevels; j-- > 0;) {
        if (target[j] != BEYOND)
            continue;
        const pf_level *l = &b->levels[j];
        if (l->claim == PF_NO_METHOD) {
            target[j] = thread_root;
            continue;
        }
        int32_t parent = !l->run_outer && j + 1 < b->nlevels && target[j + 1] >= 0
                         ? target[j + 1] : thread_root;
        int32_t n = pf_cct_child(t, parent, l->claim, t->opts.call_sites ? l->claim_bci : -1);
        if (n < 0) {
            g_free(target);
            return -1;
        }
        t->nodes[n].kinds |= pf_call_kind(l->claim_flags, parent == thread_root);
        target[j] = n;
    }
    int32_t *map = g_new(int32_t, b->tree->count);
    map[0] = 0;
    int rc = 0;
    for (uint32_t i = 1; i < b->tree->count; i++) {
        const pf_node *s = &b->tree->nodes[i];
        int32_t d;
        if (s->parent == 0 && s->method == PF_LEVEL_ROOT)
            d = target[s->site];
        else if (s->parent == 0)
            d = thread_root;
        else
            d = pf_cct_child(t, map[s->parent], s->method, s->site);
        if (d < 0) {
            rc = -1;
            break;
        }
        map[i] = d;
        add_self(&t->nodes[d], &b->tree->nodes[i]);
    }
    if (rc == 0 && a->made && b->assumed) {
        /* b's choices between call targets that took a class to have no
         * objects where the flow before it had shown some */
        uint64_t wrong = 0;
        GHashTableIter it;
        gpointer key;
        g_hash_table_iter_init(&it, b->assumed);
        while (g_hash_table_iter_next(&it, &key, NULL))
            wrong += g_hash_table_contains(a->made, key);
        st->assumed_wrong += wrong;
        st->assumed_joins += wrong > 0;
    }
    if (rc == 0 && a->made && b->made) {
        GHashTableIter it;
        gpointer key;
        g_hash_table_iter_init(&it, b->made);
        while (g_hash_table_iter_next(&it, &key, NULL))
            class_set_add(a->made, key);
    }
    if (rc == 0) {
        a->final = map[b->final];
        if (b->timed) {
            a->last_tsc = a->timed ? MAX(a->last_tsc, b->last_tsc) : b->last_tsc;
            a->timed = true;
        }
        a->to = b->to;
    }
    g_free(map);
    g_free(target);
    return rc;
}

/* ---- partial results ------------------------------------------------------- */

typedef struct part_method {
    uint32_t modifiers;
    char *klass, *name, *sig;
} part_method;

struct pf_part {
    uint32_t shards;
    bool whole_threads;
    uint8_t trace_id[32], plan_id[32];
    pf_cct_opts opts;
    pf_timebase tb;          /* the trace's TSC frequency */
    char *title;
    uint8_t *have;           /* bitmap of the shards held */
    pf_shard_piece *plan;
    size_t nplan;
    GPtrArray *pieces;       /* pf_piece *, by tid then from, adjacent ones joined */
    GHashTable *methods;     /* uint64_t * -> part_method * */
    GHashTable *threads;     /* tid -> char * */
    pf_part_stats st;
    pf_names *names;         /* made on demand */
};

static void part_method_free(gpointer p)
{
    part_method *m = p;
    g_free(m->klass);
    g_free(m->name);
    g_free(m->sig);
    g_free(m);
}

static pf_part *part_new(void)
{
    pf_part *p = g_new0(pf_part, 1);
    p->pieces = g_ptr_array_new_with_free_func((GDestroyNotify)piece_free);
    p->methods = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, part_method_free);
    p->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    p->opts = pf_cct_default_opts();
    return p;
}

void pf_part_free(pf_part *p)
{
    if (!p)
        return;
    g_free(p->title);
    g_free(p->have);
    g_free(p->plan);
    g_ptr_array_free(p->pieces, TRUE);
    g_hash_table_destroy(p->methods);
    g_hash_table_destroy(p->threads);
    pf_names_free(p->names);
    g_free(p);
}

static void add_method(pf_part *p, uint64_t id, uint32_t modifiers, const char *klass,
                       const char *name, const char *sig)
{
    if (g_hash_table_contains(p->methods, &id))
        return;
    part_method *m = g_new0(part_method, 1);
    m->modifiers = modifiers;
    m->klass = g_strdup(klass);
    m->name = g_strdup(name);
    m->sig = g_strdup(sig);
    g_hash_table_insert(p->methods, g_memdup2(&id, sizeof id), m);
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
                add_method(p, id, mn->modifiers, mn->class_name, mn->name, mn->sig);
        }
        for (uint32_t l = 0; l < pc->nlevels; l++) {
            const pf_method_name *mn = pc->levels[l].claim != PF_NO_METHOD
                                       ? pf_names_method(names, pc->levels[l].claim) : NULL;
            if (mn)
                add_method(p, pc->levels[l].claim, mn->modifiers, mn->class_name, mn->name,
                           mn->sig);
        }
    }
}

static bool has_shard(const pf_part *p, uint32_t k)
{
    return p->have[k / 8] & (1u << (k % 8));
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
    class_set_add(ctx, klass);
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
    pf_part *p = part_new();
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
        pf_piece *pc = piece_new(&p->opts, sp->tid, sp->from, sp->to);
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
            pc->made = class_set_new();
            rp_classes(rp, false, class_set_cb, pc->made);
            if (pc->relative) {
                pc->assumed = class_set_new();
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

/* ---- merging partial results ----------------------------------------------- */

static int cmp_piece_ptr(gconstpointer a, gconstpointer b)
{
    const pf_piece *x = *(pf_piece *const *)a, *y = *(pf_piece *const *)b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->from < y->from ? -1 : x->from > y->from;
}

static void stats_add(pf_part_stats *a, const pf_part_stats *b)
{
    uint64_t *x = (uint64_t *)a;
    const uint64_t *y = (const uint64_t *)b;
    for (size_t i = 0; i < sizeof *a / sizeof *x; i++)
        x[i] += y[i];
}

static bool same_opts(const pf_cct_opts *a, const pf_cct_opts *b)
{
    if (a->call_sites != b->call_sites)
        return false;
    for (int i = 0; i < FL_ORIGIN_COUNT; i++)
        if (a->include[i] != b->include[i])
            return false;
    return true;
}

/* A copy of piece s (a's tree rebuilt: pf_cct_merge keeps node order). */
static pf_piece *piece_copy(const pf_piece *s)
{
    pf_piece *c = g_new(pf_piece, 1);
    *c = *s;
    c->tree = pf_cct_new(&s->tree->opts);
    if (!c->tree || pf_cct_merge(c->tree, s->tree, false) < 0) {
        pf_cct_free(c->tree);
        g_free(c);
        return NULL;
    }
    c->levels = g_memdup2(s->levels, sizeof *s->levels * s->nlevels);
    c->made = class_set_copy(s->made);
    c->assumed = class_set_copy(s->assumed);
    return c;
}

int pf_part_merge(pf_part *dst, const pf_part *src, const char *dst_name, const char *src_name,
                  char *err, size_t errlen)
{
    if (memcmp(dst->trace_id, src->trace_id, sizeof dst->trace_id)) {
        snprintf(err, errlen, "%s: a partial result of another trace than %s", src_name,
                 dst_name);
        return -1;
    }
    if (dst->shards != src->shards || dst->whole_threads != src->whole_threads ||
        memcmp(dst->plan_id, src->plan_id, sizeof dst->plan_id)) {
        snprintf(err, errlen, "%s: a part of another plan than %s (%u shards%s against %u%s)",
                 src_name, dst_name, src->shards, src->whole_threads ? ", whole threads" : "",
                 dst->shards, dst->whole_threads ? ", whole threads" : "");
        return -1;
    }
    if (!same_opts(&dst->opts, &src->opts)) {
        snprintf(err, errlen, "%s: decoded with other profile options (--call-sites, "
                 "--include, --exclude) than %s", src_name, dst_name);
        return -1;
    }
    for (uint32_t k = 0; k < dst->shards; k++)
        if (has_shard(dst, k) && has_shard(src, k)) {
            snprintf(err, errlen, "%s: shard %u is given twice (%s holds it too)", src_name, k,
                     dst_name);
            return -1;
        }
    for (guint i = 0; i < src->pieces->len; i++) {
        pf_piece *c = piece_copy(src->pieces->pdata[i]);
        if (!c) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        g_ptr_array_add(dst->pieces, c);
    }
    g_ptr_array_sort(dst->pieces, cmp_piece_ptr);
    /* Join the pieces that meet. */
    guint kept = 0;
    for (guint i = 0; i < dst->pieces->len; i++) {
        pf_piece *c = dst->pieces->pdata[i];
        pf_piece *prev = kept ? dst->pieces->pdata[kept - 1] : NULL;
        /* Pieces join left to right from the thread's start, whatever
         * the grouping of the merges: the same tree in any order. */
        if (prev && prev->tid == c->tid && prev->to == c->from && !prev->relative) {
            if (piece_join(prev, c, &dst->st) < 0) {
                snprintf(err, errlen, "out of memory");
                dst->pieces->pdata[i] = NULL;
                piece_free(c);
                for (guint j = i + 1; j < dst->pieces->len; j++) {
                    dst->pieces->pdata[kept++] = dst->pieces->pdata[j];
                    dst->pieces->pdata[j] = NULL;
                }
                g_ptr_array_set_size(dst->pieces, kept);
                return -1;
            }
            piece_free(c);
        } else {
            dst->pieces->pdata[kept++] = c;
        }
        if (i >= kept)
            dst->pieces->pdata[i] = NULL;   /* moved or freed: not freed again */
    }
    g_ptr_array_set_size(dst->pieces, kept);
    for (uint32_t k = 0; k < (dst->shards + 7) / 8; k++)
        dst->have[k] |= src->have[k];
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, src->methods);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        const part_method *m = value;
        add_method(dst, *(uint64_t *)key, m->modifiers, m->klass, m->name, m->sig);
    }
    g_hash_table_iter_init(&it, src->threads);
    while (g_hash_table_iter_next(&it, &key, &value))
        if (!g_hash_table_contains(dst->threads, key))
            g_hash_table_insert(dst->threads, key, g_strdup(value));
    stats_add(&dst->st, &src->st);
    pf_names_free(dst->names);
    dst->names = NULL;
    return 0;
}

bool pf_part_complete(const pf_part *p, char *missing, size_t len)
{
    GString *s = g_string_new(NULL);
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->shards; k++) {
        if (has_shard(p, k))
            continue;
        if (n < 8)
            g_string_append_printf(s, "%s%u", n ? ", " : "", k);
        n++;
    }
    if (n > 8)
        g_string_append_printf(s, " and %u more", n - 8);
    if (missing && len)
        snprintf(missing, len, "%s", s->str);
    g_string_free(s, TRUE);
    return n == 0;
}

pf_cct *pf_part_cct(const pf_part *p, char *err, size_t errlen)
{
    char missing[256];
    if (!pf_part_complete(p, missing, sizeof missing)) {
        snprintf(err, errlen, "missing shards %s (of 0..%u): no partial result given holds "
                 "them", missing, p->shards - 1);
        return NULL;
    }
    pf_cct *all = pf_cct_new(&p->opts);
    if (!all) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (guint i = 0; i < p->pieces->len; i++) {
        const pf_piece *c = p->pieces->pdata[i];
        if (c->relative || c->nlevels) {
            /* every shard is there, so every thread's pieces joined from 0 */
            snprintf(err, errlen, "thread %u: its piece from byte %" PRIu64 " joins no piece "
                     "before it", c->tid, c->from);
            pf_cct_free(all);
            return NULL;
        }
        if (pf_cct_merge(all, c->tree, false) < 0) {
            snprintf(err, errlen, "out of memory");
            pf_cct_free(all);
            return NULL;
        }
    }
    pf_cct *fin = pf_cct_finalize(all);
    pf_cct_free(all);
    if (!fin)
        snprintf(err, errlen, "out of memory");
    return fin;
}

const pf_part_stats *pf_part_get_stats(const pf_part *p) { return &p->st; }
const char *pf_part_title(const pf_part *p) { return p->title; }
const pf_timebase *pf_part_timebase(const pf_part *p) { return &p->tb; }
uint32_t pf_part_shards(const pf_part *p) { return p->shards; }

uint32_t pf_part_shard_count(const pf_part *p)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->shards; k++)
        n += has_shard(p, k);
    return n;
}

const pf_names *pf_part_names(const pf_part *p)
{
    pf_part *q = (pf_part *)p;    /* made on demand, once */
    if (!q->names) {
        q->names = pf_names_new();
        GHashTableIter it;
        gpointer key, value;
        g_hash_table_iter_init(&it, p->methods);
        while (g_hash_table_iter_next(&it, &key, &value)) {
            const part_method *m = value;
            pf_names_add_method(q->names, *(uint64_t *)key, m->klass, m->name, m->sig,
                                m->modifiers);
        }
        g_hash_table_iter_init(&it, p->threads);
        while (g_hash_table_iter_next(&it, &key, &value))
            pf_names_add_thread(q->names, GPOINTER_TO_UINT(key), value);
    }
    return q->names;
}

/* ---- the file -------------------------------------------------------------- */

static const char part_magic[8] = { 'J', 'P', 'T', 'P', 'A', 'R', 'T', '\0' };

enum {
    SEC_SHARDS = 1, SEC_TITLE, SEC_PLAN, SEC_METHODS, SEC_THREADS, SEC_PIECE, SEC_STATS,
    SEC_TIMEBASE, SEC_END = 0xffff,
};

#define NODE_BYTES 56u          /* parent, method, site, 4 self metrics, kinds */
#define LEVEL_BYTES 17u         /* claim, flags, bci, run_outer */
#define PIECE_HEAD_BYTES 64u

static void put_u8(GByteArray *b, uint8_t v) { g_byte_array_append(b, &v, 1); }

static void put_u32(GByteArray *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    g_byte_array_append(b, x, 4);
}

static void put_u64(GByteArray *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(GByteArray *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_u32(b, (uint32_t)n);
    if (n)
        g_byte_array_append(b, (const guint8 *)s, (guint)n);
}

/* Starts a section; returns where its size goes. */
static guint sec_begin(GByteArray *b, uint32_t kind)
{
    put_u32(b, kind);
    put_u32(b, 0);
    guint at = b->len;
    put_u64(b, 0);
    return at;
}

static void sec_end(GByteArray *b, guint at)
{
    uint64_t size = b->len - at - 8;
    for (int i = 0; i < 8; i++)
        b->data[at + i] = (uint8_t)(size >> (8 * i));
}

static uint32_t include_mask(const pf_cct_opts *o)
{
    uint32_t m = 0;
    for (int i = 0; i < FL_ORIGIN_COUNT; i++)
        if (o->include[i])
            m |= 1u << i;
    return m;
}

static int cmp_u64p(const void *a, const void *b)
{
    uint64_t x = **(uint64_t *const *)a, y = **(uint64_t *const *)b;
    return x < y ? -1 : x > y;
}

static gint cmp_u32(gconstpointer a, gconstpointer b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A class set, names sorted: equal sets give equal bytes. */
static void put_class_set(GByteArray *b, GHashTable *set)
{
    guint n = 0;
    gpointer *names = g_hash_table_get_keys_as_array(set, &n);
    qsort(names, n, sizeof *names, cmp_str);
    put_u32(b, n);
    for (guint i = 0; i < n; i++)
        put_str(b, names[i]);
    g_free(names);
}

static void put_piece(GByteArray *b, const pf_piece *p)
{
    guint at = sec_begin(b, SEC_PIECE);
    put_u32(b, p->tid);
    put_u32(b, (p->relative ? 1u : 0) | (p->started ? 2u : 0) | (p->join ? 4u : 0) |
               (p->join_counted ? 8u : 0) | (p->has_start_tsc ? 16u : 0) |
               (p->timed ? 32u : 0) | (p->made ? 64u : 0) | (p->assumed ? 128u : 0));
    put_u64(b, p->from);
    put_u64(b, p->to);
    put_u64(b, p->join_tsc);
    put_u64(b, p->start_tsc);
    put_u64(b, p->last_tsc);
    put_u32(b, p->started ? (uint32_t)p->final : 0);
    put_u32(b, p->tree->count);
    put_u32(b, p->nlevels);
    put_u32(b, 0);
    for (uint32_t i = 1; i < p->tree->count; i++) {
        const pf_node *n = &p->tree->nodes[i];
        put_u32(b, (uint32_t)n->parent);
        put_u64(b, n->method);
        put_u64(b, (uint64_t)n->site);
        put_u64(b, n->calls);
        put_u64(b, n->self_bytecodes);
        put_u64(b, n->self_bc_events);
        put_u64(b, n->self_time);
        put_u32(b, n->kinds);
    }
    for (uint32_t i = 0; i < p->nlevels; i++) {
        const pf_level *l = &p->levels[i];
        put_u64(b, l->claim);
        put_u32(b, l->claim_flags);
        put_u32(b, (uint32_t)l->claim_bci);
        put_u8(b, l->run_outer);
    }
    if (p->made)
        put_class_set(b, p->made);
    if (p->assumed)
        put_class_set(b, p->assumed);
    sec_end(b, at);
}

int pf_part_write(const pf_part *p, FILE *out)
{
    GByteArray *b = g_byte_array_new();
    g_byte_array_append(b, (const guint8 *)part_magic, sizeof part_magic);
    put_u32(b, PF_PART_VERSION);
    put_u32(b, p->shards);
    put_u32(b, (p->whole_threads ? 1u : 0) | (p->opts.call_sites ? 2u : 0));
    put_u32(b, include_mask(&p->opts));
    uint64_t hz;
    memcpy(&hz, &p->tb.hz, sizeof hz);
    put_u64(b, hz);
    g_byte_array_append(b, p->trace_id, sizeof p->trace_id);
    g_byte_array_append(b, p->plan_id, sizeof p->plan_id);

    guint at = sec_begin(b, SEC_SHARDS);
    g_byte_array_append(b, p->have, (p->shards + 7) / 8);
    sec_end(b, at);
    at = sec_begin(b, SEC_TITLE);
    put_str(b, p->title);
    sec_end(b, at);
    at = sec_begin(b, SEC_TIMEBASE);
    put_u32(b, p->tb.emulated);
    put_str(b, p->tb.source);
    sec_end(b, at);
    at = sec_begin(b, SEC_PLAN);
    put_u32(b, (uint32_t)p->nplan);
    for (size_t i = 0; i < p->nplan; i++) {
        put_u32(b, p->plan[i].shard);
        put_u32(b, p->plan[i].tid);
        put_u64(b, p->plan[i].from);
        put_u64(b, p->plan[i].to);
    }
    sec_end(b, at);
    /* methods by id, threads by tid: equal results give equal files */
    at = sec_begin(b, SEC_METHODS);
    guint nids = 0;
    gpointer *ids = g_hash_table_get_keys_as_array(p->methods, &nids);
    qsort(ids, nids, sizeof *ids, cmp_u64p);
    put_u32(b, nids);
    for (guint i = 0; i < nids; i++) {
        const part_method *m = g_hash_table_lookup(p->methods, ids[i]);
        put_u64(b, *(uint64_t *)ids[i]);
        put_u32(b, m->modifiers);
        put_str(b, m->klass);
        put_str(b, m->name);
        put_str(b, m->sig);
    }
    g_free(ids);
    sec_end(b, at);
    at = sec_begin(b, SEC_THREADS);
    GArray *tv = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, p->threads);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        uint32_t tid = GPOINTER_TO_UINT(key);
        g_array_append_val(tv, tid);
    }
    g_array_sort(tv, cmp_u32);
    put_u32(b, tv->len);
    for (guint i = 0; i < tv->len; i++) {
        uint32_t tid = g_array_index(tv, uint32_t, i);
        put_u32(b, tid);
        put_str(b, g_hash_table_lookup(p->threads, GUINT_TO_POINTER(tid)));
    }
    g_array_free(tv, TRUE);
    sec_end(b, at);
    for (guint i = 0; i < p->pieces->len; i++)
        put_piece(b, p->pieces->pdata[i]);
    at = sec_begin(b, SEC_STATS);
    const uint64_t *sv = (const uint64_t *)&p->st;
    put_u32(b, (uint32_t)(sizeof p->st / sizeof *sv));
    for (size_t i = 0; i < sizeof p->st / sizeof *sv; i++)
        put_u64(b, sv[i]);
    sec_end(b, at);
    uint32_t crc = (uint32_t)crc32(0L, b->data, b->len);
    at = sec_begin(b, SEC_END);
    put_u32(b, crc);
    sec_end(b, at);

    int rc = fwrite(b->data, 1, b->len, out) == b->len ? 0 : -1;
    g_byte_array_free(b, TRUE);
    return rc;
}

/* ---- reading the file ------------------------------------------------------ */

typedef struct rd {
    const uint8_t *d;
    size_t len, pos;
    const char *path;
    char *err;
    size_t errlen;
    bool failed;
} rd;

static void rd_fail(rd *r, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rd_fail(rd *r, size_t at, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = true;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "%s: offset %zu: %s", r->path, at, what);
}

static bool rd_need(rd *r, size_t n, size_t end, const char *what)
{
    if (r->failed)
        return false;
    if (n > end - r->pos) {
        rd_fail(r, r->pos, "%s runs past the end of its record", what);
        return false;
    }
    return true;
}

static uint32_t rd_u32(rd *r, size_t end, const char *what)
{
    if (!rd_need(r, 4, end, what))
        return 0;
    const uint8_t *p = r->d + r->pos;
    r->pos += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd_u64(rd *r, size_t end, const char *what)
{
    uint64_t lo = rd_u32(r, end, what);
    return lo | (uint64_t)rd_u32(r, end, what) << 32;
}

/* A length-prefixed string (at most 64 KiB, no NUL); NULL on failure. */
static char *rd_str(rd *r, size_t end, const char *what)
{
    size_t at = r->pos;
    uint32_t n = rd_u32(r, end, what);
    if (r->failed)
        return NULL;
    if (n > 65536 || !rd_need(r, n, end, what)) {
        rd_fail(r, at, "%s: implausible length %u", what, n);
        return NULL;
    }
    if (memchr(r->d + r->pos, 0, n)) {
        rd_fail(r, at, "%s holds a NUL byte", what);
        return NULL;
    }
    char *s = g_strndup((const char *)r->d + r->pos, n);
    r->pos += n;
    return s;
}

/* Whether the plan's pieces are a plan: sorted, each thread's from 0 on
 * without holes, shards in range. */
static bool plan_valid(rd *r, size_t at, const pf_part *p)
{
    for (size_t i = 0; i < p->nplan; i++) {
        const pf_shard_piece *x = &p->plan[i];
        const pf_shard_piece *prev = i ? &p->plan[i - 1] : NULL;
        bool first = !prev || prev->tid != x->tid;
        if (x->shard >= p->shards || x->to < x->from || (prev && prev->tid > x->tid) ||
            (first ? x->from != 0 : x->from != prev->to) ||
            (!first && x->to == x->from)) {
            rd_fail(r, at, "plan piece %zu (thread %u, bytes %" PRIu64 "..%" PRIu64 ", shard %u) "
                    "does not fit the plan", i, x->tid, x->from, x->to, x->shard);
            return false;
        }
    }
    pf_shard_plan pl = { .shards = p->shards, .whole_threads = p->whole_threads,
                         .pieces = p->plan, .npieces = p->nplan };
    memcpy(pl.trace_id, p->trace_id, sizeof pl.trace_id);
    plan_identity(&pl);
    if (memcmp(pl.plan_id, p->plan_id, sizeof pl.plan_id)) {
        rd_fail(r, at, "the plan does not match its id");
        return false;
    }
    return true;
}

/* A class set: names strictly ascending (as written), none empty. */
static GHashTable *rd_class_set(rd *r, size_t end, uint32_t tid)
{
    size_t at = r->pos;
    uint32_t n = rd_u32(r, end, "class set");
    GHashTable *set = class_set_new();
    char *prev = NULL;
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        char *k = rd_str(r, end, "class name");
        if (!r->failed && (!*k || (prev && strcmp(prev, k) >= 0)))
            rd_fail(r, at, "piece of thread %u: its class set is not in order", tid);
        if (!r->failed)
            class_set_add(set, k);
        g_free(prev);
        prev = k;
    }
    g_free(prev);
    return set;
}

static pf_piece *rd_piece(rd *r, size_t end, const pf_part *part)
{
    size_t at = r->pos;
    uint32_t tid = rd_u32(r, end, "piece");
    uint32_t flags = rd_u32(r, end, "piece");
    uint64_t from = rd_u64(r, end, "piece"), to = rd_u64(r, end, "piece");
    uint64_t join_tsc = rd_u64(r, end, "piece"), start_tsc = rd_u64(r, end, "piece");
    uint64_t last_tsc = rd_u64(r, end, "piece");
    uint32_t final = rd_u32(r, end, "piece"), count = rd_u32(r, end, "piece");
    uint32_t nlevels = rd_u32(r, end, "piece");
    uint32_t reserved = rd_u32(r, end, "piece");
    if (r->failed)
        return NULL;
    if (flags & ~255u || reserved) {
        rd_fail(r, at, "piece of thread %u: unknown flags 0x%x", tid, flags);
        return NULL;
    }
    bool relative = flags & 1, started = flags & 2;
    if (relative != (from > 0) || to < from) {
        rd_fail(r, at, "piece of thread %u: bytes %" PRIu64 "..%" PRIu64 " and its start do "
                "not agree", tid, from, to);
        return NULL;
    }
    bool sets = flags & (64 | 128);
    uint64_t fixed = (uint64_t)(count - 1) * NODE_BYTES + (uint64_t)nlevels * LEVEL_BYTES;
    if (count < 1 || nlevels > MAX_LEVELS || (!relative && nlevels) ||
        ((flags & 128) && !relative) || ((flags & 128) && !(flags & 64)) ||
        (sets ? fixed > end - r->pos : fixed != end - r->pos)) {
        rd_fail(r, at, "piece of thread %u: %u nodes and %u levels do not fill its %zu bytes",
                tid, count, nlevels, end - r->pos);
        return NULL;
    }
    if (started ? final == 0 || final >= count : count != 1 || nlevels) {
        rd_fail(r, at, "piece of thread %u: it ends at node %u of %u", tid, final, count);
        return NULL;
    }
    pf_piece *p = piece_new(&part->opts, tid, from, to);
    if (!p) {
        rd_fail(r, at, "out of memory");
        return NULL;
    }
    p->started = started;
    p->join = flags & 4;
    p->join_counted = flags & 8;
    p->has_start_tsc = flags & 16;
    p->timed = flags & 32;
    p->join_tsc = join_tsc;
    p->start_tsc = start_tsc;
    p->last_tsc = last_tsc;
    p->final = (int32_t)final;
    if (nlevels) {
        p->levels = g_new0(pf_level, nlevels);
        p->nlevels = nlevels;
    }
    bool thread_root = false;
    for (uint32_t i = 1; i < count && !r->failed; i++) {
        size_t nat = r->pos;
        uint32_t parent = rd_u32(r, end, "node");
        uint64_t method = rd_u64(r, end, "node");
        int64_t site = (int64_t)rd_u64(r, end, "node");
        pf_node v = { .calls = rd_u64(r, end, "node"), .self_bytecodes = rd_u64(r, end, "node"),
                      .self_bc_events = rd_u64(r, end, "node"),
                      .self_time = rd_u64(r, end, "node") };
        v.kinds = rd_u32(r, end, "node");
        if (r->failed)
            break;
        bool ok = parent < i && v.kinds <= 0x1f;
        if (ok && parent == 0) {
            if (method == PF_NO_METHOD) {
                ok = !thread_root && site == (int64_t)tid;
                thread_root = true;
            } else {
                ok = method == PF_LEVEL_ROOT && site >= 0 && site < (int64_t)nlevels;
            }
        } else if (ok) {
            ok = method < PF_LEVEL_ROOT && site >= -1 && site <= INT32_MAX;
        }
        int32_t n = ok ? pf_cct_child(p->tree, (int32_t)parent, method, site) : -1;
        if (n != (int32_t)i) {
            rd_fail(r, nat, "piece of thread %u: node %u (parent %u, method 0x%" PRIx64
                    ", site %" PRId64 ") is not a node of a calling context tree", tid, i, parent,
                    method, site);
            break;
        }
        pf_node *d = &p->tree->nodes[n];
        d->calls = v.calls;
        d->self_bytecodes = v.self_bytecodes;
        d->self_bc_events = v.self_bc_events;
        d->self_time = v.self_time;
        d->kinds = v.kinds;
    }
    for (uint32_t l = 0; l < nlevels && !r->failed; l++) {
        size_t lat = r->pos;
        pf_level *lv = &p->levels[l];
        lv->claim = rd_u64(r, end, "level");
        lv->claim_flags = rd_u32(r, end, "level");
        lv->claim_bci = (int32_t)rd_u32(r, end, "level");
        if (!rd_need(r, 1, end, "level"))
            break;
        uint8_t outer = r->d[r->pos++];
        lv->run_outer = outer;
        if (outer > 1 || lv->claim == PF_LEVEL_ROOT) {
            rd_fail(r, lat, "piece of thread %u: level %u is malformed", tid, l);
            break;
        }
    }
    if (!r->failed && (flags & 64))
        p->made = rd_class_set(r, end, tid);
    if (!r->failed && (flags & 128))
        p->assumed = rd_class_set(r, end, tid);
    if (r->failed) {
        piece_free(p);
        return NULL;
    }
    return p;
}

/* Whether the pieces tile exactly the plan's pieces of the shards held,
 * each piece a run of whole plan pieces of one thread. */
static bool pieces_valid(rd *r, const pf_part *p)
{
    guint next = 0;
    for (size_t i = 0; i < p->nplan;) {
        const pf_shard_piece *x = &p->plan[i];
        if (!has_shard(p, x->shard)) {
            i++;
            continue;
        }
        size_t j = i;      /* the run of held plan pieces of this thread */
        while (j + 1 < p->nplan && p->plan[j + 1].tid == x->tid &&
               has_shard(p, p->plan[j + 1].shard))
            j++;
        uint64_t at = x->from;
        size_t k = i;      /* plan piece where the next part piece starts */
        while (at < p->plan[j].to || (at == x->from && k == i)) {
            const pf_piece *c = next < p->pieces->len ? p->pieces->pdata[next] : NULL;
            size_t e = k;
            while (c && e <= j && p->plan[e].to < c->to)
                e++;
            if (!c || c->tid != x->tid || c->from != at || e > j || p->plan[e].to != c->to) {
                rd_fail(r, r->pos, "the pieces do not match its shards: thread %u from byte %"
                        PRIu64 " %s", x->tid, at, c ? "is not where its next piece starts"
                                                      : "has no piece");
                return false;
            }
            next++;
            at = c->to;
            k = e + 1;
            if (k > j)
                break;
        }
        i = j + 1;
    }
    if (next != p->pieces->len) {
        rd_fail(r, r->pos, "it holds %u pieces, its shards %u", p->pieces->len, next);
        return false;
    }
    return true;
}

pf_part *pf_part_read(const char *path, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    if (jpt_read_small_file(path, (size_t)1 << 40, &buf, &len, err, errlen) < 0)
        return NULL;
    rd r = { (const uint8_t *)buf, len, 0, path, err, errlen, false };
    const size_t head = 8 + 4 * 4 + 8 + 64;
    if (len < 8 || memcmp(buf, part_magic, 8)) {
        rd_fail(&r, 0, "not a jpt partial result ('ptdecode shard' writes them)");
        free(buf);
        return NULL;
    }
    r.pos = 8;
    uint32_t version = rd_u32(&r, len, "header");
    if (!r.failed && version != PF_PART_VERSION) {
        rd_fail(&r, 8, "partial-result format version %u; this ptdecode reads version %u",
                version, PF_PART_VERSION);
        free(buf);
        return NULL;
    }
    if (len < head) {
        rd_fail(&r, len, "the header is cut short (%zu of %zu bytes)", len, head);
        free(buf);
        return NULL;
    }
    /* The sections up to the end record, and its checksum over all before. */
    size_t s = head, end_at = 0;
    while (!r.failed && !end_at) {
        if (len - s < 16) {
            rd_fail(&r, s, "cut short: no end record (the file is incomplete)");
            break;
        }
        r.pos = s;
        uint32_t kind = rd_u32(&r, len, "section");
        rd_u32(&r, len, "section");
        uint64_t size = rd_u64(&r, len, "section");
        if (size > len - r.pos) {
            rd_fail(&r, s, "section of %" PRIu64 " bytes runs past the end of the file "
                    "(%zu bytes): cut short", size, len);
            break;
        }
        if (kind == SEC_END) {
            if (size != 4 || r.pos + 4 != len) {
                rd_fail(&r, s, "malformed end record");
                break;
            }
            uint32_t want = rd_u32(&r, len, "end");
            if ((uint32_t)crc32(0L, (const Bytef *)buf, (uInt)s) != want) {
                rd_fail(&r, s, "checksum mismatch: the file is damaged");
                break;
            }
            end_at = s;
        }
        s = r.pos + (size_t)size;
    }
    if (r.failed) {
        free(buf);
        return NULL;
    }
    pf_part *p = part_new();
    r.pos = 12;
    p->shards = rd_u32(&r, head, "header");
    uint32_t flags = rd_u32(&r, head, "header"), inc = rd_u32(&r, head, "header");
    uint64_t hz = rd_u64(&r, head, "header");
    memcpy(&p->tb.hz, &hz, sizeof hz);
    memcpy(p->trace_id, buf + r.pos, 32);
    memcpy(p->plan_id, buf + r.pos + 32, 32);
    if (p->shards < 1 || p->shards > PF_SHARD_MAX || flags & ~3u || inc & ~7u ||
        !(p->tb.hz >= 0 && p->tb.hz < 1e12))
        rd_fail(&r, 12, "malformed header (shards %u, flags 0x%x, origins 0x%x)", p->shards,
                flags, inc);
    p->whole_threads = flags & 1;
    p->opts.call_sites = flags & 2;
    for (int i = 0; i < FL_ORIGIN_COUNT; i++)
        p->opts.include[i] = inc & (1u << i);
    unsigned seen = 0;
    for (s = head; !r.failed && s < end_at;) {
        r.pos = s;
        uint32_t kind = rd_u32(&r, end_at, "section");
        rd_u32(&r, end_at, "section");
        size_t size = (size_t)rd_u64(&r, end_at, "section");
        size_t body = r.pos, send = body + size;
        if (kind != SEC_PIECE && kind < 32 && (seen & (1u << kind))) {
            rd_fail(&r, s, "section %u appears twice", kind);
            break;
        }
        if (kind < 32)
            seen |= 1u << kind;
        if (kind != SEC_SHARDS && kind != SEC_TITLE && !(seen & (1u << SEC_SHARDS))) {
            rd_fail(&r, s, "section %u before the shards it holds", kind);
            break;
        }
        switch (kind) {
        case SEC_SHARDS: {
            size_t n = (p->shards + 7) / 8;
            if (size != n) {
                rd_fail(&r, s, "shard set of %zu bytes for %u shards", size, p->shards);
                break;
            }
            p->have = g_memdup2(buf + body, n);
            r.pos += n;
            if (p->shards % 8 && p->have[n - 1] >> (p->shards % 8))
                rd_fail(&r, body, "shard set names shards past %u", p->shards - 1);
            else if (!pf_part_shard_count(p))
                rd_fail(&r, body, "it holds no shard");
            break;
        }
        case SEC_TITLE:
            p->title = rd_str(&r, send, "title");
            break;
        case SEC_TIMEBASE: {
            uint32_t emulated = rd_u32(&r, send, "timebase");
            char *src = rd_str(&r, send, "timebase source");
            if (!r.failed && (emulated > 1 || strlen(src) >= sizeof p->tb.source))
                rd_fail(&r, body, "malformed timebase");
            else if (!r.failed)
                snprintf(p->tb.source, sizeof p->tb.source, "%s", src);
            p->tb.emulated = emulated;
            g_free(src);
            break;
        }
        case SEC_PLAN: {
            uint32_t n = rd_u32(&r, send, "plan");
            if (!r.failed && (uint64_t)n * 24 != send - r.pos) {
                rd_fail(&r, body, "plan of %u pieces in %zu bytes", n, size);
                break;
            }
            p->nplan = n;
            p->plan = g_new0(pf_shard_piece, n ? n : 1);
            for (uint32_t i = 0; i < n; i++) {
                p->plan[i].shard = rd_u32(&r, send, "plan");
                p->plan[i].tid = rd_u32(&r, send, "plan");
                p->plan[i].from = rd_u64(&r, send, "plan");
                p->plan[i].to = rd_u64(&r, send, "plan");
            }
            if (!r.failed)
                plan_valid(&r, body, p);
            break;
        }
        case SEC_METHODS: {
            uint32_t n = rd_u32(&r, send, "methods");
            for (uint32_t i = 0; i < n && !r.failed; i++) {
                size_t mat = r.pos;
                uint64_t id = rd_u64(&r, send, "method");
                uint32_t mod = rd_u32(&r, send, "method");
                char *k = rd_str(&r, send, "method class"), *nm = rd_str(&r, send, "method name");
                char *sig = rd_str(&r, send, "method signature");
                if (!r.failed && (id >= PF_LEVEL_ROOT || g_hash_table_contains(p->methods, &id)))
                    rd_fail(&r, mat, "method 0x%" PRIx64 " is named twice", id);
                if (!r.failed)
                    add_method(p, id, mod, k, nm, sig);
                g_free(k);
                g_free(nm);
                g_free(sig);
            }
            break;
        }
        case SEC_THREADS: {
            uint32_t n = rd_u32(&r, send, "threads");
            for (uint32_t i = 0; i < n && !r.failed; i++) {
                uint32_t tid = rd_u32(&r, send, "thread");
                char *name = rd_str(&r, send, "thread name");
                if (!r.failed)
                    g_hash_table_insert(p->threads, GUINT_TO_POINTER(tid), name);
                else
                    g_free(name);
            }
            break;
        }
        case SEC_PIECE: {
            pf_piece *c = rd_piece(&r, send, p);
            if (c) {
                const pf_piece *prev = p->pieces->len
                                       ? p->pieces->pdata[p->pieces->len - 1] : NULL;
                if (prev && (prev->tid > c->tid || (prev->tid == c->tid && prev->to > c->from)))
                    rd_fail(&r, s, "pieces out of order (thread %u at byte %" PRIu64 ")",
                            c->tid, c->from);
                g_ptr_array_add(p->pieces, c);
            }
            break;
        }
        case SEC_STATS: {
            uint32_t n = rd_u32(&r, send, "stats");
            uint64_t *sv = (uint64_t *)&p->st;
            if (!r.failed && n != sizeof p->st / sizeof *sv) {
                rd_fail(&r, body, "%u counts, version %u has %zu", n, PF_PART_VERSION,
                        sizeof p->st / sizeof *sv);
                break;
            }
            for (uint32_t i = 0; i < n; i++)
                sv[i] = rd_u64(&r, send, "stats");
            break;
        }
        default:
            rd_fail(&r, s, "unknown section kind %u", kind);
            break;
        }
        if (!r.failed && r.pos != send)
            rd_fail(&r, r.pos, "section %u has %zu bytes left over", kind, send - r.pos);
        s = send;
    }
    const unsigned need = 1u << SEC_SHARDS | 1u << SEC_TITLE | 1u << SEC_PLAN | 1u << SEC_TIMEBASE |
                          1u << SEC_METHODS | 1u << SEC_THREADS | 1u << SEC_STATS;
    if (!r.failed && (seen & need) != need)
        rd_fail(&r, end_at, "sections missing (it has 0x%x of 0x%x)", seen & need, need);
    if (!r.failed)
        pieces_valid(&r, p);
    free(buf);
    if (r.failed) {
        pf_part_free(p);
        return NULL;
    }
    return p;
}
