/* CCT units: hand-made flows with known trees, and the ParCCT property:
 * random flows cut into random segments, built into partial trees merged in
 * random order on several threads (and by the pool builder) give the tree
 * the sequential builder gives. */
#include <criterion/criterion.h>
#include <glib.h>
#include <string.h>

#include "profile/cct.h"
#include "profile/hot.h"

/* ---- flow building helpers ----------------------------------------------- */

typedef struct flow {
    GArray *events;          /* fl_event; FL_SEGMENT stacks point into stacks */
    GPtrArray *stacks;       /* uint64_t arrays owned here */
} flow;

static flow *flow_new(void)
{
    flow *f = g_new0(flow, 1);
    f->events = g_array_new(FALSE, TRUE, sizeof(fl_event));
    f->stacks = g_ptr_array_new_with_free_func(g_free);
    return f;
}

static void flow_free(flow *f)
{
    g_array_free(f->events, TRUE);
    g_ptr_array_free(f->stacks, TRUE);
    g_free(f);
}

static void ev_add(flow *f, fl_kind kind, uint32_t tid, uint64_t tsc, uint64_t method,
                   int32_t bci, uint64_t count, fl_origin origin)
{
    fl_event e = { .kind = kind, .tid = tid, .tsc = tsc, .method_id = method, .bci = bci,
                   .count = count, .origin = origin, .opcode = -1 };
    g_array_append_val(f->events, e);
}

static void seg_add(flow *f, uint32_t tid, uint64_t tsc, uint64_t seq, const uint64_t *stack,
                    uint32_t depth)
{
    uint64_t *copy = g_new0(uint64_t, depth + 1);   /* never NULL, even for depth 0 */
    if (depth)
        memcpy(copy, stack, depth * sizeof *stack);
    g_ptr_array_add(f->stacks, copy);
    fl_event e = { .kind = FL_SEGMENT, .tid = tid, .tsc = tsc, .seq = seq, .depth = depth,
                   .stack = copy };
    g_array_append_val(f->events, e);
}

static void feed(const flow *f, fl_sink sink, void *ctx)
{
    for (guint i = 0; i < f->events->len; i++)
        if (sink(&g_array_index(f->events, fl_event, i), ctx))
            break;
}

static pf_cct *build_seq(const flow *f, const pf_cct_opts *o)
{
    pf_seq *s = pf_seq_new(o);
    feed(f, pf_seq_sink, s);
    pf_cct *t = pf_seq_finish(s);
    cr_assert_not_null(t);
    pf_cct *fin = pf_cct_finalize(t);
    pf_cct_free(t);
    return fin;
}

static pf_cct *build_par(const flow *f, const pf_cct_opts *o, unsigned threads, uint32_t chunk)
{
    pf_par *p = pf_par_new(o, threads, chunk);
    feed(f, pf_par_sink, p);
    pf_cct *t = pf_par_finish(p);
    cr_assert_not_null(t);
    pf_cct *fin = pf_cct_finalize(t);
    pf_cct_free(t);
    return fin;
}

static int32_t path(const pf_cct *t, uint32_t tid, const uint64_t *methods, int n)
{
    int32_t node = pf_cct_find(t, 0, PF_NO_METHOD, tid);
    for (int i = 0; i < n && node >= 0; i++)
        node = pf_cct_find(t, node, methods[i], -1);
    return node;
}

/* ---- hand-made flows ----------------------------------------------------- */

Test(cct, known_tree)
{
    /* main(1) calls a(2) twice and b(3) once; a runs 5 bytecodes each time. */
    flow *f = flow_new();
    seg_add(f, 7, 100, 0, NULL, 0);
    ev_add(f, FL_CALL, 7, 100, 1, -1, 0, FL_DECODED);
    for (int k = 0; k < 2; k++) {
        ev_add(f, FL_CALL, 7, 110 + 100 * k, 2, 4, 0, FL_DECODED);
        ev_add(f, FL_BYTECODE, 7, 120 + 100 * k, 2, 0, 5, FL_DECODED);
        ev_add(f, FL_RETURN, 7, 150 + 100 * k, 2, -1, 0, FL_DECODED);
    }
    ev_add(f, FL_CALL, 7, 400, 3, 9, 0, FL_DECODED);
    ev_add(f, FL_BYTECODE, 7, 410, 3, 0, 1, FL_RECOVERED);
    ev_add(f, FL_RETURN, 7, 420, 3, -1, 0, FL_DECODED);
    ev_add(f, FL_RETURN, 7, 500, 1, -1, 0, FL_DECODED);
    ev_add(f, FL_RETURN, 7, 510, 99, -1, 0, FL_DECODED);   /* past the root: ignored */
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *t = build_seq(f, &o);
    cr_assert_eq(t->count, 5);  /* root, thread, main, a, b */
    int32_t a = path(t, 7, (uint64_t[]){ 1, 2 }, 2), b = path(t, 7, (uint64_t[]){ 1, 3 }, 2);
    int32_t m = path(t, 7, (uint64_t[]){ 1 }, 1);
    cr_assert(a > 0 && b > 0 && m > 0);
    cr_assert_eq(t->nodes[a].calls, 2);
    cr_assert_eq(t->nodes[a].self_bytecodes, 10);
    cr_assert_eq(t->nodes[a].self_time, 2 * 40);
    cr_assert_eq(t->nodes[b].self_bytecodes, 1);
    cr_assert_eq(t->nodes[m].bytecodes, 11);
    cr_assert_eq(t->nodes[m].time, 400);
    cr_assert_eq(t->nodes[0].time, 410);        /* + the 10 ticks after main returned */
    cr_assert_eq(t->nodes[0].subtree, t->count);
    for (uint32_t i = 1; i < t->count; i++)
        cr_assert_lt(t->nodes[i].parent, (int32_t)i);

    /* Excluding recovered events drops b's bytecode and the time ending at it. */
    o.include[FL_RECOVERED] = false;
    pf_cct *x = build_seq(f, &o);
    b = path(x, 7, (uint64_t[]){ 1, 3 }, 2);
    cr_assert_eq(x->nodes[b].self_bytecodes, 0);
    cr_assert_eq(x->nodes[b].self_time, 10);
    cr_assert_eq(x->nodes[b].calls, 1);

    /* Call sites distinguished: a keyed by bci 4. */
    o = pf_cct_default_opts();
    o.call_sites = true;
    pf_cct *s = build_seq(f, &o);
    m = path(s, 7, (uint64_t[]){ 1 }, 1);
    cr_assert_gt(pf_cct_find(s, m, 2, 4), 0);
    cr_assert_lt(pf_cct_find(s, m, 2, -1), 0);

    /* Hot methods */
    pf_hot_method *hot;
    size_t n = pf_hot_methods(t, PF_BY_BYTECODES, &hot);
    cr_assert_eq(n, 3);
    cr_assert_eq(hot[0].method, 2);
    cr_assert_eq(hot[0].self_bytecodes, 10);
    cr_assert_eq(hot[2].method, 1);
    cr_assert_eq(hot[2].bytecodes, 11);
    g_free(hot);
    pf_cct_free(t);
    pf_cct_free(x);
    pf_cct_free(s);
    flow_free(f);
}

Test(cct, segment_starts_in_its_context_and_returns_pop_it)
{
    flow *f = flow_new();
    uint64_t stack[] = { 1, 2 };
    seg_add(f, 3, 0, 0, stack, 2);
    ev_add(f, FL_CALL, 3, 10, 5, -1, 0, FL_DECODED);
    ev_add(f, FL_RETURN, 3, 20, 5, -1, 0, FL_DECODED);
    ev_add(f, FL_RETURN, 3, 30, 2, -1, 0, FL_DECODED);   /* leaves the starting frame 2 */
    ev_add(f, FL_CALL, 3, 40, 6, -1, 0, FL_DECODED);     /* now below 1 */
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *t = build_seq(f, &o);
    cr_assert_gt(path(t, 3, (uint64_t[]){ 1, 2, 5 }, 3), 0);
    int32_t six = path(t, 3, (uint64_t[]){ 1, 6 }, 2);
    cr_assert_gt(six, 0);
    cr_assert_eq(t->nodes[six].calls, 1);
    cr_assert_eq(t->nodes[path(t, 3, (uint64_t[]){ 1, 2 }, 2)].calls, 0);
    cr_assert_eq(t->nodes[path(t, 3, (uint64_t[]){ 1, 2 }, 2)].self_time, 20);
    pf_cct_free(t);
    flow_free(f);
}

Test(cct, recursion_counts_inclusive_once_per_method)
{
    flow *f = flow_new();
    for (int d = 0; d < 3; d++)
        ev_add(f, FL_CALL, 1, 10 * d, 8, -1, 0, FL_DECODED);
    ev_add(f, FL_BYTECODE, 1, 30, 8, 0, 7, FL_DECODED);
    for (int d = 0; d < 3; d++)
        ev_add(f, FL_RETURN, 1, 40 + d, 8, -1, 0, FL_DECODED);
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *t = build_seq(f, &o);
    pf_hot_method *hot;
    cr_assert_eq(pf_hot_methods(t, PF_BY_CALLS, &hot), 1);
    cr_assert_eq(hot[0].calls, 3);
    cr_assert_eq(hot[0].bytecodes, 7);
    cr_assert_eq(hot[0].time, 42);
    g_free(hot);
    pf_cct_free(t);
    flow_free(f);
}

/* ---- property: ParCCT == sequential -------------------------------------- */

typedef struct gen_thread {
    uint64_t stack[64];
    uint32_t depth;
    uint64_t tsc, seq;
} gen_thread;

/* A random flow of nthreads interleaved threads; with segments, FL_SEGMENT
 * events are inserted at random points with the true stack (or, rarely, an
 * unknown one: depth 0). The same flow without segments is `plain`. */
/* How frames ran: from the calls' flags and the bytecodes', and a frame found
 * already running right at the thread root is marked truncated. */
Test(cct, frame_kinds)
{
    flow *f = flow_new();
    seg_add(f, 7, 10, 0, NULL, 0);
    fl_event ev[] = {
        { .kind = FL_CALL, .tid = 7, .tsc = 11, .method_id = 1, .flags = FL_F_CONTEXT },
        { .kind = FL_CALL, .tid = 7, .tsc = 12, .method_id = 2 },
        { .kind = FL_BYTECODE, .tid = 7, .tsc = 13, .method_id = 2, .count = 1 },
        { .kind = FL_BYTECODE, .tid = 7, .tsc = 14, .method_id = 2, .count = 1,
          .flags = FL_F_COMPILED },
        { .kind = FL_CALL, .tid = 7, .tsc = 15, .method_id = 3, .flags = FL_F_COMPILED },
        { .kind = FL_CALL, .tid = 7, .tsc = 16, .method_id = 4,
          .flags = FL_F_COMPILED | FL_F_INLINED },
        { .kind = FL_RETURN, .tid = 7, .tsc = 17, .method_id = 4 },
        { .kind = FL_CALL, .tid = 7, .tsc = 18, .method_id = 5, .flags = FL_F_NATIVE },
        { .kind = FL_CALL, .tid = 7, .tsc = 19, .method_id = 6, .flags = FL_F_CONTEXT },
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        g_array_append_val(f->events, ev[i]);
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *t = build_seq(f, &o);
    int32_t root = pf_cct_find(t, 0, PF_NO_METHOD, 7);
    int32_t n1 = pf_cct_find(t, root, 1, -1), n2 = pf_cct_find(t, n1, 2, -1);
    int32_t n3 = pf_cct_find(t, n2, 3, -1), n4 = pf_cct_find(t, n3, 4, -1);
    int32_t n5 = pf_cct_find(t, n3, 5, -1), n6 = pf_cct_find(t, n5, 6, -1);
    cr_assert(n1 > 0 && n2 > 0 && n3 > 0 && n4 > 0 && n5 > 0 && n6 > 0);
    cr_assert_eq(t->nodes[n1].kinds, PF_KIND_INTERPRETED | PF_KIND_TRUNCATED);
    cr_assert_eq(t->nodes[n2].kinds, PF_KIND_INTERPRETED | PF_KIND_COMPILED);
    cr_assert_eq(t->nodes[n3].kinds, PF_KIND_COMPILED);
    cr_assert_eq(t->nodes[n4].kinds, PF_KIND_INLINED);
    cr_assert_eq(t->nodes[n5].kinds, PF_KIND_NATIVE);
    /* already running, but below a known frame: its callers are known */
    cr_assert_eq(t->nodes[n6].kinds, PF_KIND_INTERPRETED);
    pf_cct *p = build_par(f, &o, 2, 3);
    char why[128];
    cr_assert(pf_cct_equal(t, p, why, sizeof why), "%s", why);
    pf_cct_free(p);
    pf_cct_free(t);
    flow_free(f);
}

static void random_flows(GRand *r, flow *plain, flow *segmented, uint32_t nthreads,
                         uint32_t nevents, bool unknown_contexts)
{
    gen_thread th[8] = { 0 };
    for (uint32_t i = 0; i < nevents; i++) {
        uint32_t t = (uint32_t)g_rand_int_range(r, 0, (gint32)nthreads);
        gen_thread *g = &th[t];
        uint32_t tid = 100 + t;
        /* A segment starts at the time of its thread's last event, so that
         * no interval is lost; a thread's first event is at its start. */
        bool first = g->tsc == 0;
        if (first)
            g->tsc = 1 + (uint64_t)g_rand_int_range(r, 0, 1000);
        if (first || g_rand_int_range(r, 0, 40) == 0) {
            bool unknown = unknown_contexts && g_rand_int_range(r, 0, 4) == 0;
            seg_add(segmented, tid, g->tsc, g->seq++, g->stack, unknown ? 0 : g->depth);
            if (unknown)
                g->depth = 0;
        }
        if (!first)
            g->tsc += (uint64_t)g_rand_int_range(r, 0, 50);
        int k = g_rand_int_range(r, 0, 10);
        fl_origin origin = (fl_origin)g_rand_int_range(r, 0, FL_ORIGIN_COUNT);
        uint64_t m = (uint64_t)g_rand_int_range(r, 1, 12);
        int32_t bci = g_rand_int_range(r, -1, 3);
        fl_event e = { .tid = tid, .tsc = g->tsc, .origin = origin, .bci = bci, .opcode = -1 };
        /* how frames ran: the trees must agree on their kinds too */
        static const uint32_t call_flags[] = { 0, FL_F_COMPILED, FL_F_COMPILED | FL_F_INLINED,
                                               FL_F_NATIVE, FL_F_CONTEXT };
        if (k < 4 && g->depth < 64) {
            e.kind = FL_CALL;
            e.flags = call_flags[g_rand_int_range(r, 0, 5)];
            e.method_id = m;
            g->stack[g->depth++] = m;
        } else if (k < 7) {
            e.kind = FL_RETURN;
            e.method_id = g->depth ? g->stack[g->depth - 1] : m;
            if (g->depth)
                g->depth--;
        } else {
            e.kind = FL_BYTECODE;
            e.flags = g_rand_int_range(r, 0, 3) == 0 ? FL_F_COMPILED : 0;
            e.method_id = g->depth ? g->stack[g->depth - 1] : 0;
            e.count = (uint64_t)g_rand_int_range(r, 1, 4);
        }
        g_array_append_val(plain->events, e);
        g_array_append_val(segmented->events, e);
    }
}

typedef struct merge_job {
    GPtrArray *trees;        /* shared stack of partial trees */
    GMutex *lock;
    GRand *rand;
    bool finalized;          /* trees are finalized: pf_cct_merge_finalized */
} merge_job;

/* Each worker repeatedly takes two trees in random positions, merges them,
 * and puts the result back, until one tree remains. */
static gpointer merge_worker(gpointer data)
{
    merge_job *j = data;
    for (;;) {
        g_mutex_lock(j->lock);
        if (j->trees->len < 2) {
            g_mutex_unlock(j->lock);
            return NULL;
        }
        guint a = (guint)g_rand_int_range(j->rand, 0, (gint32)j->trees->len);
        pf_cct *x = g_ptr_array_steal_index_fast(j->trees, a);
        guint b = (guint)g_rand_int_range(j->rand, 0, (gint32)j->trees->len);
        pf_cct *y = g_ptr_array_steal_index_fast(j->trees, b);
        g_mutex_unlock(j->lock);
        if (j->finalized) {
            pf_cct *m = pf_cct_merge_finalized(x, y);
            cr_assert_not_null(m);
            pf_cct_free(x);
            x = m;
        } else {
            cr_assert_eq(pf_cct_merge(x, y, false), 0);
        }
        pf_cct_free(y);
        g_mutex_lock(j->lock);
        g_ptr_array_add(j->trees, x);
        g_mutex_unlock(j->lock);
    }
}

/* Builds every segment of f into its own tree (segments located by
 * following FL_SEGMENT events per thread), then merges them on `threads`
 * threads in random order: as they are, or finalized first. */
static pf_cct *build_partials_merged(const flow *f, const pf_cct_opts *o, GRand *r,
                                     unsigned threads, bool finalized)
{
    GPtrArray *trees = g_ptr_array_new();
    GHashTable *current = g_hash_table_new(g_direct_hash, g_direct_equal); /* tid -> tree */
    GHashTable *cursors = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    for (guint i = 0; i < f->events->len; i++) {
        const fl_event *e = &g_array_index(f->events, fl_event, i);
        pf_cct *t = g_hash_table_lookup(current, GUINT_TO_POINTER(e->tid));
        pf_cursor *c = g_hash_table_lookup(cursors, GUINT_TO_POINTER(e->tid));
        if (e->kind == FL_SEGMENT || !t) {
            t = pf_cct_new(o);
            g_ptr_array_add(trees, t);
            g_hash_table_insert(current, GUINT_TO_POINTER(e->tid), t);
            c = g_new(pf_cursor, 1);
            *c = e->kind == FL_SEGMENT ? pf_cct_begin(t, e->tid, e->tsc, e->stack, NULL, e->depth)
                                       : pf_cct_begin(t, e->tid, e->tsc, NULL, NULL, 0);
            g_hash_table_insert(cursors, GUINT_TO_POINTER(e->tid), c);
            if (e->kind == FL_SEGMENT)
                continue;
        }
        cr_assert_eq(pf_cct_apply(t, c, e), 0);
    }
    g_hash_table_destroy(current);
    g_hash_table_destroy(cursors);
    for (guint k = 0; finalized && k < trees->len; k++) {
        pf_cct *fin = pf_cct_finalize(trees->pdata[k]);
        cr_assert_not_null(fin);
        pf_cct_free(trees->pdata[k]);
        trees->pdata[k] = fin;
    }
    GMutex lock;
    g_mutex_init(&lock);
    merge_job job = { trees, &lock, r, finalized };
    GThread *workers[8];
    for (unsigned k = 0; k < threads; k++)
        workers[k] = g_thread_new("merge", merge_worker, &job);
    for (unsigned k = 0; k < threads; k++)
        g_thread_join(workers[k]);
    g_mutex_clear(&lock);
    cr_assert_eq(trees->len, 1);
    pf_cct *fin = pf_cct_finalize(trees->pdata[0]);
    pf_cct_free(trees->pdata[0]);
    g_ptr_array_free(trees, TRUE);
    return fin;
}

static void check_equal(const pf_cct *a, const pf_cct *b, const char *what, uint32_t round)
{
    char why[256];
    cr_assert(pf_cct_equal(a, b, why, sizeof why), "round %u, %s: %s", round, what, why);
}

Test(cct, parallel_equals_sequential_property, .timeout = 120)
{
    GRand *r = g_rand_new_with_seed(20261122);
    for (uint32_t round = 0; round < 60; round++) {
        flow *plain = flow_new(), *seg = flow_new();
        uint32_t nthreads = (uint32_t)g_rand_int_range(r, 1, 5);
        uint32_t nevents = (uint32_t)g_rand_int_range(r, 1, 3000);
        bool unknown = round % 3 == 2;
        random_flows(r, plain, seg, nthreads, nevents, unknown);
        pf_cct_opts o = pf_cct_default_opts();
        o.include[FL_GUESSED] = round % 2 == 0;
        o.call_sites = round % 5 == 4;
        pf_cct *expect = build_seq(seg, &o);
        if (!unknown && !o.call_sites) {
            /* Segments with their true stacks change nothing. */
            pf_cct *whole = build_seq(plain, &o);
            check_equal(expect, whole, "segmented vs whole flow", round);
            pf_cct_free(whole);
        }
        pf_cct *merged = build_partials_merged(seg, &o, r, (unsigned)g_rand_int_range(r, 1, 5),
                                               false);
        check_equal(expect, merged, "partials merged in random order", round);
        pf_cct *sorted = build_partials_merged(seg, &o, r, (unsigned)g_rand_int_range(r, 1, 5),
                                               true);
        check_equal(expect, sorted, "finalized partials merged in random order", round);
        pf_cct_free(sorted);
        uint32_t chunk = (uint32_t)g_rand_int_range(r, 1, 200);
        pf_cct *pool = build_par(seg, &o, (unsigned)g_rand_int_range(r, 1, 5), chunk);
        check_equal(expect, pool, "thread pool builder", round);
        pf_cct_free(expect);
        pf_cct_free(merged);
        pf_cct_free(pool);
        flow_free(plain);
        flow_free(seg);
    }
    g_rand_free(r);
}

Test(cct, merge_is_commutative_and_associative)
{
    GRand *r = g_rand_new_with_seed(7);
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *parts[3];
    for (int k = 0; k < 3; k++) {
        flow *plain = flow_new(), *seg = flow_new();
        random_flows(r, plain, seg, 2, 500, false);
        pf_seq *s = pf_seq_new(&o);
        feed(seg, pf_seq_sink, s);
        parts[k] = pf_seq_finish(s);
        flow_free(plain);
        flow_free(seg);
    }
    /* (a + b) + c vs a + (c + b) */
    pf_cct *left = pf_cct_new(&o), *right = pf_cct_new(&o), *cb = pf_cct_new(&o);
    pf_cct_merge(left, parts[0], false);
    pf_cct_merge(left, parts[1], false);
    pf_cct_merge(left, parts[2], false);
    pf_cct_merge(cb, parts[2], false);
    pf_cct_merge(cb, parts[1], false);
    pf_cct_merge(right, parts[0], false);
    pf_cct_merge(right, cb, false);
    pf_cct *l = pf_cct_finalize(left), *rr = pf_cct_finalize(right);
    check_equal(l, rr, "associativity", 0);
    pf_cct_free(l);
    pf_cct_free(rr);
    pf_cct_free(left);
    pf_cct_free(right);
    pf_cct_free(cb);
    for (int k = 0; k < 3; k++)
        pf_cct_free(parts[k]);
    g_rand_free(r);
}
