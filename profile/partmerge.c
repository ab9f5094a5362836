/* Merging partial results: adjacent pieces of a thread joined, left to
 * right from its start, whatever the grouping of the merges. */
#include "profile/part.h"

#include <string.h>

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
            pf_class_set_add(a->made, key);
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
    c->made = pf_class_set_copy(s->made);
    c->assumed = pf_class_set_copy(s->assumed);
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
        if (pf_part_has_shard(dst, k) && pf_part_has_shard(src, k)) {
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
                pf_piece_free(c);
                for (guint j = i + 1; j < dst->pieces->len; j++) {
                    dst->pieces->pdata[kept++] = dst->pieces->pdata[j];
                    dst->pieces->pdata[j] = NULL;
                }
                g_ptr_array_set_size(dst->pieces, kept);
                return -1;
            }
            pf_piece_free(c);
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
        pf_part_add_method(dst, *(uint64_t *)key, m->modifiers, m->klass, m->name, m->sig);
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
