/* Calling context tree: storage, merge, canonical form, sequential and
 * parallel construction (see cct.h). */
#include "profile/cct.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

pf_cct_opts pf_cct_default_opts(void)
{
    pf_cct_opts o = { .call_sites = false };
    for (int i = 0; i < FL_ORIGIN_COUNT; i++)
        o.include[i] = true;
    return o;
}

/* ---- storage ------------------------------------------------------------- */

static uint64_t key_hash(int32_t parent, uint64_t method, int64_t site)
{
    uint64_t h = (uint64_t)(uint32_t)parent * 0x9E3779B97F4A7C15ull;
    h ^= method + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)site * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

static bool slots_grow(pf_cct *t)
{
    uint32_t ncap = t->slot_cap ? t->slot_cap * 2 : 1024;
    while ((uint64_t)ncap < (uint64_t)t->count * 2)
        ncap *= 2;
    int32_t *ns = malloc((size_t)ncap * sizeof *ns);
    if (!ns)
        return false;
    memset(ns, 0xff, (size_t)ncap * sizeof *ns);
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        uint32_t j = (uint32_t)key_hash(n->parent, n->method, n->site) & (ncap - 1);
        while (ns[j] >= 0)
            j = (j + 1) & (ncap - 1);
        ns[j] = (int32_t)i;
    }
    free(t->slots);
    t->slots = ns;
    t->slot_cap = ncap;
    return true;
}

static int32_t add_node(pf_cct *t, int32_t parent, uint64_t method, int64_t site)
{
    if (t->count == t->cap) {
        if (t->cap >= INT32_MAX / 2)
            return -1;
        uint32_t ncap = t->cap ? t->cap * 2 : 1024;
        pf_node *nn = realloc(t->nodes, (size_t)ncap * sizeof *nn);
        if (!nn)
            return -1;
        t->nodes = nn;
        t->cap = ncap;
    }
    int32_t i = (int32_t)t->count++;
    t->nodes[i] = (pf_node){ .parent = parent, .first_child = -1, .next_sibling = -1,
                             .method = method, .site = site };
    if (parent >= 0) {
        t->nodes[i].next_sibling = t->nodes[parent].first_child;
        t->nodes[parent].first_child = i;
    }
    return i;
}

pf_cct *pf_cct_new(const pf_cct_opts *opts)
{
    pf_cct *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->opts = opts ? *opts : pf_cct_default_opts();
    if (add_node(t, -1, PF_NO_METHOD, -1) < 0 || !slots_grow(t)) {
        pf_cct_free(t);
        return NULL;
    }
    return t;
}

void pf_cct_free(pf_cct *t)
{
    if (!t)
        return;
    free(t->nodes);
    free(t->slots);
    free(t);
}

int32_t pf_cct_find(const pf_cct *t, int32_t parent, uint64_t method, int64_t site)
{
    uint32_t mask = t->slot_cap - 1;
    uint32_t j = (uint32_t)key_hash(parent, method, site) & mask;
    for (int32_t i; (i = t->slots[j]) >= 0; j = (j + 1) & mask) {
        const pf_node *n = &t->nodes[i];
        if (n->parent == parent && n->method == method && n->site == site)
            return i;
    }
    return -1;
}

int32_t pf_cct_child(pf_cct *t, int32_t parent, uint64_t method, int64_t site)
{
    uint32_t mask = t->slot_cap - 1;
    uint32_t j = (uint32_t)key_hash(parent, method, site) & mask;
    for (int32_t i; (i = t->slots[j]) >= 0; j = (j + 1) & mask) {
        const pf_node *n = &t->nodes[i];
        if (n->parent == parent && n->method == method && n->site == site)
            return i;
    }
    int32_t i = add_node(t, parent, method, site);
    if (i < 0)
        return -1;
    t->slots[j] = i;
    t->finalized = false;
    if ((uint64_t)t->count * 2 > t->slot_cap && !slots_grow(t))
        return -1;
    return i;
}

int32_t pf_cct_thread_root(pf_cct *t, uint32_t tid)
{
    return pf_cct_child(t, 0, PF_NO_METHOD, (int64_t)tid);
}

static void add_self(pf_node *d, const pf_node *s)
{
    d->calls += s->calls;
    d->self_bytecodes += s->self_bytecodes;
    d->self_bc_events += s->self_bc_events;
    d->self_time += s->self_time;
    d->kinds |= s->kinds;
}

int pf_cct_merge(pf_cct *dst, const pf_cct *src, bool collapse_threads)
{
    /* Parents precede children in every tree (a node is created below an
     * existing one, and finalized trees are in preorder), so one pass in
     * index order maps every src node into dst. */
    int32_t *map = malloc((size_t)src->count * sizeof *map);
    if (!map)
        return -1;
    map[0] = 0;
    add_self(&dst->nodes[0], &src->nodes[0]);
    for (uint32_t i = 1; i < src->count; i++) {
        const pf_node *s = &src->nodes[i];
        int32_t d;
        if (collapse_threads && s->parent == 0)
            d = 0;
        else
            d = pf_cct_child(dst, map[s->parent], s->method, s->site);
        if (d < 0) {
            free(map);
            return -1;
        }
        map[i] = d;
        add_self(&dst->nodes[d], s);
    }
    free(map);
    dst->finalized = false;
    return 0;
}

/* ---- canonical form ------------------------------------------------------ */

/* Fills the links, the inclusive metrics from the self ones and the
 * subtree sizes of a tree whose nodes are in canonical order, and its
 * index. */
static bool canonical_links(pf_cct *out)
{
    for (uint32_t i = 0; i < out->count; i++) {
        pf_node *n = &out->nodes[i];
        n->first_child = n->next_sibling = -1;
    }
    for (int32_t i = (int32_t)out->count - 1; i > 0; i--) {
        pf_node *n = &out->nodes[i];
        n->next_sibling = out->nodes[n->parent].first_child;
        out->nodes[n->parent].first_child = i;
    }
    for (uint32_t i = 0; i < out->count; i++) {
        pf_node *n = &out->nodes[i];
        n->bytecodes = n->self_bytecodes;
        n->bc_events = n->self_bc_events;
        n->time = n->self_time;
        n->subtree = 1;
    }
    for (int32_t i = (int32_t)out->count - 1; i > 0; i--) {
        pf_node *n = &out->nodes[i], *p = &out->nodes[n->parent];
        p->bytecodes += n->bytecodes;
        p->bc_events += n->bc_events;
        p->time += n->time;
        p->subtree += n->subtree;
    }
    if (!slots_grow(out))
        return false;
    out->finalized = true;
    return true;
}

static pf_cct *finalized_copy(const pf_cct *t)
{
    pf_cct *out = calloc(1, sizeof *out);
    if (!out)
        return NULL;
    out->opts = t->opts;
    out->cap = out->count = t->count;
    out->nodes = malloc((size_t)t->count * sizeof *out->nodes);
    if (!out->nodes) {
        pf_cct_free(out);
        return NULL;
    }
    memcpy(out->nodes, t->nodes, (size_t)t->count * sizeof *out->nodes);
    /* The order is canonical already; the inclusive values are summed
     * again in case metrics were changed since. */
    if (!canonical_links(out)) {
        pf_cct_free(out);
        return NULL;
    }
    return out;
}

typedef struct child_key {
    uint64_t method;
    int64_t site;
    int32_t index;
} child_key;

/* The order of siblings in a finalized tree. */
static int key_cmp(uint64_t method_a, int64_t site_a, uint64_t method_b, int64_t site_b)
{
    if (method_a != method_b)
        return method_a < method_b ? -1 : 1;
    if (site_a != site_b)
        return site_a < site_b ? -1 : 1;
    return 0;
}

static int child_key_cmp(const void *a, const void *b)
{
    const child_key *x = a, *y = b;
    return key_cmp(x->method, x->site, y->method, y->site);
}

/* t's nodes in canonical order with their subtree sizes: what merging
 * needs, without the links, inclusive values and index of a finalized
 * tree. */
static pf_cct *ordered_copy(const pf_cct *t)
{
    pf_cct *out = calloc(1, sizeof *out);
    int32_t *stack = malloc((size_t)t->count * sizeof *stack);
    int32_t *newidx = malloc((size_t)t->count * sizeof *newidx);
    child_key *keys = malloc((size_t)t->count * sizeof *keys);
    if (!out || !stack || !newidx || !keys)
        goto oom;
    out->opts = t->opts;
    out->cap = t->count;
    out->nodes = malloc((size_t)out->cap * sizeof *out->nodes);
    if (!out->nodes)
        goto oom;
    uint32_t sp = 0;
    stack[sp++] = 0;
    while (sp) {
        int32_t i = stack[--sp];
        const pf_node *s = &t->nodes[i];
        int32_t ni = (int32_t)out->count++;
        newidx[i] = ni;
        pf_node *d = &out->nodes[ni];
        *d = *s;
        d->parent = s->parent >= 0 ? newidx[s->parent] : -1;
        d->first_child = d->next_sibling = -1;
        uint32_t nk = 0;
        for (int32_t c = s->first_child; c >= 0; c = t->nodes[c].next_sibling)
            keys[nk++] = (child_key){ t->nodes[c].method, t->nodes[c].site, c };
        qsort(keys, nk, sizeof *keys, child_key_cmp);
        while (nk)
            stack[sp++] = keys[--nk].index;
    }
    for (uint32_t i = 0; i < out->count; i++)
        out->nodes[i].subtree = 1;
    for (uint32_t i = out->count - 1; i > 0; i--)
        out->nodes[out->nodes[i].parent].subtree += out->nodes[i].subtree;
    free(stack);
    free(newidx);
    free(keys);
    return out;
oom:
    free(stack);
    free(newidx);
    free(keys);
    pf_cct_free(out);
    return NULL;
}

pf_cct *pf_cct_finalize(const pf_cct *t)
{
    if (t->finalized)
        return finalized_copy(t);
    pf_cct *out = ordered_copy(t);
    if (out && !canonical_links(out)) {
        pf_cct_free(out);
        return NULL;
    }
    return out;
}

/* Appends src's subtree rooted at i (a contiguous preorder range) below
 * parent. */
static void copy_subtree(pf_cct *out, const pf_cct *src, uint32_t i, int32_t parent)
{
    uint32_t base = out->count, n = src->nodes[i].subtree;
    memcpy(&out->nodes[base], &src->nodes[i], (size_t)n * sizeof *out->nodes);
    out->nodes[base].parent = parent;
    for (uint32_t k = 1; k < n; k++)
        out->nodes[base + k].parent = (int32_t)(base + ((uint32_t)src->nodes[i + k].parent - i));
    out->count += n;
}

typedef struct merge_frame {
    uint32_t a_next, a_end, b_next, b_end;   /* children still to visit */
    int32_t out;
} merge_frame;

/* The union of two trees in canonical order with subtree sizes, in the
 * same form. The nodes are written into storage's node array when storage
 * is given (a tree no longer needed, left empty): memory already in use
 * costs no page faults, which on some machines cost more than the merge. */
static pf_cct *merge_ordered(const pf_cct *a, const pf_cct *b, pf_cct *storage)
{
    pf_cct *out = calloc(1, sizeof *out);
    /* Depth is bounded by the shallower input's height, and so by its size. */
    merge_frame *st = malloc(((size_t)(a->count < b->count ? a->count : b->count) + 1) *
                             sizeof *st);
    /* node indices are int32_t, as add_node keeps them */
    if (!out || !st || (uint64_t)a->count + b->count > INT32_MAX)
        goto oom;
    out->opts = a->opts;
    out->cap = a->count + b->count;
    if (storage) {
        out->nodes = storage->nodes;
        storage->nodes = NULL;
        storage->count = storage->cap = 0;
    }
    pf_node *grown = realloc(out->nodes, (size_t)out->cap * sizeof *out->nodes);
    if (!grown)
        goto oom;
    out->nodes = grown;
    /* Both are in preorder with children in key order: a simultaneous
     * walk merges sibling lists like sorted runs and copies a subtree
     * present on one side only as one block. Reads and writes are
     * sequential; no index lookups. */
    out->nodes[0] = a->nodes[0];
    add_self(&out->nodes[0], &b->nodes[0]);
    out->nodes[0].parent = -1;
    out->count = 1;
    uint32_t sp = 0;
    st[sp++] = (merge_frame){ 1, a->nodes[0].subtree, 1, b->nodes[0].subtree, 0 };
    while (sp) {
        merge_frame *f = &st[sp - 1];
        bool has_a = f->a_next < f->a_end, has_b = f->b_next < f->b_end;
        if (!has_a && !has_b) {
            out->nodes[f->out].subtree = out->count - (uint32_t)f->out;
            sp--;
            continue;
        }
        int c = !has_a ? 1 : !has_b ? -1
                : key_cmp(a->nodes[f->a_next].method, a->nodes[f->a_next].site,
                          b->nodes[f->b_next].method, b->nodes[f->b_next].site);
        if (c < 0) {
            copy_subtree(out, a, f->a_next, f->out);
            f->a_next += a->nodes[f->a_next].subtree;
        } else if (c > 0) {
            copy_subtree(out, b, f->b_next, f->out);
            f->b_next += b->nodes[f->b_next].subtree;
        } else {
            uint32_t ia = f->a_next, ib = f->b_next;
            f->a_next += a->nodes[ia].subtree;
            f->b_next += b->nodes[ib].subtree;
            int32_t o = (int32_t)out->count++;
            out->nodes[o] = a->nodes[ia];
            add_self(&out->nodes[o], &b->nodes[ib]);
            out->nodes[o].parent = f->out;
            st[sp++] = (merge_frame){ ia + 1, ia + a->nodes[ia].subtree,
                                      ib + 1, ib + b->nodes[ib].subtree, o };
        }
    }
    free(st);
    pf_node *fit = realloc(out->nodes, (size_t)out->count * sizeof *fit);
    if (fit) {
        out->nodes = fit;
        out->cap = out->count;
    }
    return out;
oom:
    free(st);
    pf_cct_free(out);
    return NULL;
}

pf_cct *pf_cct_merge_finalized(const pf_cct *a, const pf_cct *b)
{
    if (!a->finalized || !b->finalized)
        return NULL;
    pf_cct *out = merge_ordered(a, b, NULL);
    if (out && !canonical_links(out)) {
        pf_cct_free(out);
        return NULL;
    }
    return out;
}

bool pf_cct_equal(const pf_cct *a, const pf_cct *b, char *why, size_t whylen)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        whylen = sizeof dummy;
    }
    if (a->count != b->count) {
        snprintf(why, whylen, "node counts differ: %u vs %u", a->count, b->count);
        return false;
    }
    for (uint32_t i = 0; i < a->count; i++) {
        const pf_node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->parent != y->parent || x->method != y->method || x->site != y->site ||
            x->first_child != y->first_child || x->next_sibling != y->next_sibling ||
            x->subtree != y->subtree || x->kinds != y->kinds) {
            snprintf(why, whylen, "node %u: shape differs", i);
            return false;
        }
        if (x->calls != y->calls || x->self_bytecodes != y->self_bytecodes ||
            x->self_bc_events != y->self_bc_events || x->self_time != y->self_time) {
            snprintf(why, whylen,
                     "node %u: calls %" PRIu64 "/%" PRIu64 " bytecodes %" PRIu64 "/%" PRIu64
                     " time %" PRIu64 "/%" PRIu64, i, x->calls, y->calls, x->self_bytecodes,
                     y->self_bytecodes, x->self_time, y->self_time);
            return false;
        }
        if (x->bytecodes != y->bytecodes || x->bc_events != y->bc_events || x->time != y->time) {
            snprintf(why, whylen, "node %u: inclusive bytecodes %" PRIu64 "/%" PRIu64
                     " time %" PRIu64 "/%" PRIu64, i, x->bytecodes, y->bytecodes, x->time,
                     y->time);
            return false;
        }
    }
    return true;
}

/* ---- applying events ----------------------------------------------------- */

pf_cursor pf_cct_begin(pf_cct *t, uint32_t tid, uint64_t tsc, const uint64_t *methods,
                       const int64_t *sites, uint32_t depth)
{
    pf_cursor c = { .node = pf_cct_thread_root(t, tid), .last_tsc = tsc, .timed = true };
    for (uint32_t i = 0; i < depth && c.node >= 0; i++)
        c.node = pf_cct_child(t, c.node, methods[i],
                              t->opts.call_sites && sites ? sites[i] : -1);
    return c;
}

/* The PF_KIND_* of a frame entered by an FL_CALL with these flags. */
uint32_t pf_call_kind(uint32_t flags, bool at_thread_root)
{
    uint32_t k = flags & FL_F_NATIVE ? PF_KIND_NATIVE
                 : flags & FL_F_INLINED ? PF_KIND_INLINED
                 : flags & FL_F_COMPILED ? PF_KIND_COMPILED : PF_KIND_INTERPRETED;
    if ((flags & FL_F_CONTEXT) && at_thread_root)
        k |= PF_KIND_TRUNCATED;
    return k;
}

int pf_cct_apply(pf_cct *t, pf_cursor *c, const fl_event *ev)
{
    if (c->node < 0)
        return -1;
    bool counted = (unsigned)ev->origin < FL_ORIGIN_COUNT && t->opts.include[ev->origin];
    if (c->timed && ev->tsc > c->last_tsc) {
        if (counted)
            t->nodes[c->node].self_time += ev->tsc - c->last_tsc;
        c->last_tsc = ev->tsc;
    } else if (!c->timed) {
        c->last_tsc = ev->tsc;
        c->timed = true;
    }
    switch (ev->kind) {
    case FL_CALL: {
        int32_t n = pf_cct_child(t, c->node, ev->method_id,
                                 t->opts.call_sites ? ev->bci : -1);
        if (n < 0)
            return -1;
        t->nodes[n].kinds |= pf_call_kind(ev->flags, t->nodes[c->node].method == PF_NO_METHOD);
        c->node = n;
        /* FL_F_CONTEXT: a frame found already active, not a call seen. */
        if (counted && !(ev->flags & FL_F_CONTEXT))
            t->nodes[n].calls++;
        break;
    }
    case FL_RETURN:
        /* At the thread root the frame left was never seen entered. */
        if (t->nodes[c->node].method != PF_NO_METHOD)
            c->node = t->nodes[c->node].parent;
        break;
    case FL_BYTECODE:
        t->nodes[c->node].kinds |= ev->flags & FL_F_COMPILED ? PF_KIND_COMPILED
                                                             : PF_KIND_INTERPRETED;
        if (counted) {
            t->nodes[c->node].self_bytecodes += ev->count;
            t->nodes[c->node].self_bc_events++;
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---- sequential builder -------------------------------------------------- */

struct pf_seq {
    pf_cct *tree;
    GHashTable *threads;     /* tid -> pf_cursor */
    uint32_t last_tid;
    pf_cursor *last;
    bool failed;
};

pf_seq *pf_seq_new(const pf_cct_opts *opts)
{
    pf_seq *s = g_new0(pf_seq, 1);
    s->tree = pf_cct_new(opts);
    s->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    s->failed = s->tree == NULL;
    return s;
}

int pf_seq_sink(const fl_event *ev, void *ctx)
{
    pf_seq *s = ctx;
    if (s->failed)
        return 1;
    pf_cursor *c = s->last && s->last_tid == ev->tid ? s->last
                   : g_hash_table_lookup(s->threads, GUINT_TO_POINTER(ev->tid));
    if (ev->kind == FL_SEGMENT || !c) {
        if (!c) {
            c = g_new0(pf_cursor, 1);
            g_hash_table_insert(s->threads, GUINT_TO_POINTER(ev->tid), c);
        }
        if (ev->kind == FL_SEGMENT)
            *c = pf_cct_begin(s->tree, ev->tid, ev->tsc, ev->stack, NULL, ev->depth);
        else
            *c = pf_cct_begin(s->tree, ev->tid, ev->tsc, NULL, NULL, 0);
    }
    s->last = c;
    s->last_tid = ev->tid;
    if (ev->kind != FL_SEGMENT && pf_cct_apply(s->tree, c, ev) < 0)
        s->failed = true;
    if (c->node < 0)
        s->failed = true;
    return s->failed;
}

pf_cct *pf_seq_finish(pf_seq *s)
{
    pf_cct *t = s->failed ? NULL : s->tree;
    if (s->failed)
        pf_cct_free(s->tree);
    g_hash_table_destroy(s->threads);
    g_free(s);
    return t;
}

/* ---- parallel builder (ParCCT) ------------------------------------------- */

/* The flags pf_cct_apply reads (all below 0x100). */
#define PAR_FLAGS (FL_F_CONTEXT | FL_F_COMPILED | FL_F_INLINED | FL_F_NATIVE)

/* A buffered event: what pf_cct_apply needs of an fl_event, in 24 bytes
 * (the pool's input is copied event by event on one thread: its size is
 * the feeding's cost). */
typedef struct par_event {
    uint64_t tsc;
    /* FL_CALL: method_id; FL_BYTECODE: count; FL_SEGMENT: where its
     * starting stack begins in the chunk's segment_stacks */
    uint64_t value;
    int32_t bci;             /* FL_SEGMENT: the starting stack's depth */
    uint8_t kind, origin;
    uint8_t flags;           /* the flags PAR_FLAGS keeps */
} par_event;

/* A run of one thread's events, started from the stack the thread was at.
 * Segments that begin inside it stay in it (an FL_SEGMENT event whose
 * stack is kept in segment_stacks): a chunk goes to the pool only when
 * full or at the end, since real flows have segments of a few hundred
 * events and handing each to the pool would cost more than building it. */
typedef struct par_chunk {
    uint32_t tid;
    uint64_t tsc;
    uint32_t depth;
    uint64_t *methods;
    int64_t *sites;
    par_event *events;
    uint32_t n, cap;
    uint64_t *segment_stacks;
    size_t stacks_len, stacks_cap;
} par_chunk;

typedef struct par_thread {
    uint64_t *methods;       /* shadow stack: where the thread is now */
    int64_t *sites;
    uint32_t depth, cap;
    uint64_t last_tsc;
    par_chunk *chunk;        /* being filled */
} par_thread;

struct pf_par {
    pf_cct_opts opts;
    uint32_t chunk_events;
    GThreadPool *pool;
    GMutex lock;
    GCond done;
    unsigned in_flight, max_in_flight;
    GHashTable *partials;    /* worker GThread * -> pf_cct * */
    GHashTable *threads;     /* tid -> par_thread */
    /* Event buffers of finished chunks (chunk_events each), reused: a
     * fresh buffer costs the feeding thread page faults on every chunk,
     * which serialize it (under lock). Never more than were in use at
     * once: the threads' open chunks and those in flight. */
    GPtrArray *spare;
    par_thread *last;        /* the thread of the previous event */
    uint32_t last_tid;
    gint failed;             /* set by any thread: g_atomic_int_* */
};

static void chunk_free(par_chunk *c)
{
    if (!c)
        return;
    g_free(c->methods);
    g_free(c->sites);
    g_free(c->events);
    g_free(c->segment_stacks);
    g_free(c);
}

static void par_work(gpointer data, gpointer user)
{
    par_chunk *ch = data;
    pf_par *p = user;
    g_mutex_lock(&p->lock);
    pf_cct *t = g_hash_table_lookup(p->partials, g_thread_self());
    if (!t) {
        t = pf_cct_new(&p->opts);
        if (t)
            g_hash_table_insert(p->partials, g_thread_self(), t);
    }
    g_mutex_unlock(&p->lock);
    bool ok = t != NULL;
    if (ok) {
        pf_cursor c = pf_cct_begin(t, ch->tid, ch->tsc, ch->methods, ch->sites, ch->depth);
        fl_event ev = { .tid = ch->tid };
        for (uint32_t i = 0; i < ch->n && ok; i++) {
            const par_event *e = &ch->events[i];
            if (e->kind == FL_SEGMENT) {
                const uint64_t *stack = e->bci ? ch->segment_stacks + e->value : NULL;
                c = pf_cct_begin(t, ch->tid, e->tsc, stack, NULL, (uint32_t)e->bci);
                ok = c.node >= 0;
                continue;
            }
            ev.kind = e->kind;
            ev.origin = e->origin;
            ev.tsc = e->tsc;
            ev.method_id = e->value;
            ev.count = e->value;
            ev.bci = e->bci;
            ev.flags = e->flags;
            ok = pf_cct_apply(t, &c, &ev) == 0;
        }
        ok = ok && c.node >= 0;
    }
    g_mutex_lock(&p->lock);
    if (ch->cap == p->chunk_events) {
        g_ptr_array_add(p->spare, ch->events);
        ch->events = NULL;
    }
    g_mutex_unlock(&p->lock);
    chunk_free(ch);
    g_mutex_lock(&p->lock);
    if (!ok)
        g_atomic_int_set(&p->failed, 1);
    p->in_flight--;
    g_cond_signal(&p->done);
    g_mutex_unlock(&p->lock);
}

static void thread_free(gpointer data)
{
    par_thread *th = data;
    chunk_free(th->chunk);
    g_free(th->methods);
    g_free(th->sites);
    g_free(th);
}

pf_par *pf_par_new(const pf_cct_opts *opts, unsigned nthreads, uint32_t chunk_events)
{
    pf_par *p = g_new0(pf_par, 1);
    p->opts = opts ? *opts : pf_cct_default_opts();
    p->chunk_events = chunk_events ? chunk_events : 1;
    if (nthreads == 0)
        nthreads = 1;
    p->max_in_flight = 2 * nthreads + 2;
    g_mutex_init(&p->lock);
    g_cond_init(&p->done);
    p->partials = g_hash_table_new(g_direct_hash, g_direct_equal);
    p->spare = g_ptr_array_new_with_free_func(g_free);
    p->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, thread_free);
    p->pool = g_thread_pool_new(par_work, p, (gint)nthreads, TRUE, NULL);
    if (!p->pool)
        g_atomic_int_set(&p->failed, 1);
    return p;
}

static void dispatch(pf_par *p, par_thread *th)
{
    par_chunk *ch = th->chunk;
    th->chunk = NULL;
    if (!ch)
        return;
    g_mutex_lock(&p->lock);
    while (p->in_flight >= p->max_in_flight)
        g_cond_wait(&p->done, &p->lock);
    p->in_flight++;
    g_mutex_unlock(&p->lock);
    g_thread_pool_push(p->pool, ch, NULL);
}

/* A chunk starting where the thread is now. */
static par_chunk *start_chunk(pf_par *p, par_thread *th, uint32_t tid, uint64_t tsc)
{
    par_chunk *ch = g_new0(par_chunk, 1);
    g_mutex_lock(&p->lock);
    if (p->spare->len) {
        ch->events = g_ptr_array_steal_index_fast(p->spare, p->spare->len - 1);
        ch->cap = p->chunk_events;
    }
    g_mutex_unlock(&p->lock);
    ch->tid = tid;
    ch->tsc = tsc;
    ch->depth = th->depth;
    ch->methods = g_memdup2(th->methods, (gsize)th->depth * sizeof *th->methods);
    ch->sites = g_memdup2(th->sites, (gsize)th->depth * sizeof *th->sites);
    th->chunk = ch;
    return ch;
}

static void shadow_push(par_thread *th, uint64_t method, int64_t site)
{
    if (th->depth == th->cap) {
        th->cap = th->cap ? th->cap * 2 : 64;
        th->methods = g_renew(uint64_t, th->methods, th->cap);
        th->sites = g_renew(int64_t, th->sites, th->cap);
    }
    th->methods[th->depth] = method;
    th->sites[th->depth] = site;
    th->depth++;
}

int pf_par_sink(const fl_event *ev, void *ctx)
{
    pf_par *p = ctx;
    if (g_atomic_int_get(&p->failed))
        return 1;
    par_thread *th = p->last && p->last_tid == ev->tid
                     ? p->last : g_hash_table_lookup(p->threads, GUINT_TO_POINTER(ev->tid));
    if (!th) {
        th = g_new0(par_thread, 1);
        g_hash_table_insert(p->threads, GUINT_TO_POINTER(ev->tid), th);
    }
    p->last = th;
    p->last_tid = ev->tid;
    if (ev->kind == FL_SEGMENT) {
        if (ev->depth > INT32_MAX) {
            g_atomic_int_set(&p->failed, 1);
            return 1;
        }
        th->depth = 0;
        for (uint32_t i = 0; i < ev->depth; i++)
            shadow_push(th, ev->stack[i], -1);
        th->last_tsc = ev->tsc;
        if (!th->chunk) {
            start_chunk(p, th, ev->tid, ev->tsc);   /* starts from the segment's stack */
            return 0;
        }
    } else if (!th->chunk) {
        if (th->depth == 0 && th->last_tsc == 0)
            th->last_tsc = ev->tsc;     /* first event of a thread without a segment */
        start_chunk(p, th, ev->tid, th->last_tsc);
    }
    par_chunk *ch = th->chunk;
    if (ch->n == ch->cap) {
        ch->cap = ch->cap ? ch->cap * 2 : 256;
        if (ch->cap > p->chunk_events)
            ch->cap = p->chunk_events;
        ch->events = g_renew(par_event, ch->events, ch->cap);
    }
    if (ev->kind == FL_SEGMENT) {
        if (ch->stacks_len + ev->depth > ch->stacks_cap) {
            ch->stacks_cap = MAX(ch->stacks_cap * 2, ch->stacks_len + ev->depth);
            ch->segment_stacks = g_renew(uint64_t, ch->segment_stacks, ch->stacks_cap);
        }
        if (ev->depth)
            memcpy(ch->segment_stacks + ch->stacks_len, ev->stack,
                   ev->depth * sizeof *ch->segment_stacks);
        ch->events[ch->n++] = (par_event){ .tsc = ev->tsc, .value = ch->stacks_len,
                                           .bci = (int32_t)ev->depth, .kind = FL_SEGMENT };
        ch->stacks_len += ev->depth;
        if (ch->n >= p->chunk_events)
            dispatch(p, th);
        return 0;
    }
    ch->events[ch->n++] = (par_event){
        .tsc = ev->tsc, .value = ev->kind == FL_BYTECODE ? ev->count : ev->method_id,
        .bci = ev->bci, .flags = (uint8_t)(ev->flags & PAR_FLAGS),
        .kind = (uint8_t)ev->kind, .origin = (uint8_t)ev->origin };
    if (ev->tsc > th->last_tsc)
        th->last_tsc = ev->tsc;
    if (ev->kind == FL_CALL)
        shadow_push(th, ev->method_id, ev->bci);
    else if (ev->kind == FL_RETURN && th->depth)
        th->depth--;
    if (ch->n >= p->chunk_events)
        dispatch(p, th);    /* the next event starts a chunk from the shadow stack */
    return 0;
}

static pf_cct *empty_finalized(const pf_cct_opts *opts)
{
    pf_cct *t = pf_cct_new(opts), *fin = t ? pf_cct_finalize(t) : NULL;
    pf_cct_free(t);
    return fin;
}

/* Ordering a partial tree (b NULL) or merging two ordered ones. */
typedef struct finish_job {
    pf_cct *a, *b, *storage, *out;
} finish_job;

static gpointer finish_one(gpointer data)
{
    finish_job *j = data;
    j->out = j->b ? merge_ordered(j->a, j->b, j->storage) : ordered_copy(j->a);
    return NULL;
}

/* Runs the jobs at once, one per thread (the calling thread takes the
 * last one); a job whose thread cannot start runs on the calling thread. */
static void run_jobs(finish_job *jobs, unsigned n)
{
    GThread **th = g_new0(GThread *, n);
    for (unsigned i = 0; i + 1 < n; i++)
        th[i] = g_thread_try_new("cct-finish", finish_one, &jobs[i], NULL);
    for (unsigned i = 0; i < n; i++)
        if (!th[i])
            finish_one(&jobs[i]);
    for (unsigned i = 0; i + 1 < n; i++)
        if (th[i])
            g_thread_join(th[i]);
    g_free(th);
}

pf_cct *pf_par_finish(pf_par *p)
{
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, p->threads);
    while (g_hash_table_iter_next(&it, &key, &value))
        dispatch(p, value);
    if (p->pool)
        g_thread_pool_free(p->pool, FALSE, TRUE);
    /* The partial trees are put in canonical order in parallel, then
     * merged in pairs, the pairs of a round in parallel: merging ordered
     * trees is a sequential walk of both (as pf_cct_merge_finalized does),
     * far cheaper than inserting one tree's nodes into the other's index.
     * The result is finalized once, at the end. */
    unsigned n = g_hash_table_size(p->partials);
    finish_job *jobs = g_new0(finish_job, n ? n : 1);
    pf_cct **trees = g_new0(pf_cct *, n ? n : 1);
    pf_cct **partials = g_new0(pf_cct *, n ? n : 1);
    unsigned k = 0;
    g_hash_table_iter_init(&it, p->partials);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        jobs[k].a = value;
        partials[k++] = value;
    }
    if (!p->failed && n) {
        run_jobs(jobs, n);
        for (unsigned i = 0; i < n; i++) {
            free(partials[i]->slots);      /* only the node arrays are reused */
            partials[i]->slots = NULL;
            partials[i]->slot_cap = 0;
            trees[i] = jobs[i].out;
            if (!trees[i])
                p->failed = true;
        }
    }
    /* n - 1 merges; each writes into the node array of a partial tree. */
    unsigned spare = 0;
    while (!p->failed && n > 1) {
        unsigned pairs = n / 2;
        for (unsigned i = 0; i < pairs; i++)
            jobs[i] = (finish_job){ .a = trees[i], .b = trees[n - 1 - i],
                                    .storage = partials[spare++] };
        run_jobs(jobs, pairs);
        for (unsigned i = 0; i < pairs; i++) {
            pf_cct_free(jobs[i].a);
            pf_cct_free(jobs[i].b);
            trees[i] = jobs[i].out;
            trees[n - 1 - i] = NULL;
            if (!trees[i])
                p->failed = true;
        }
        n -= pairs;
    }
    for (unsigned i = 0; i < k; i++)
        pf_cct_free(partials[i]);
    g_free(partials);
    pf_cct *result = NULL;
    if (!p->failed && n && canonical_links(trees[0]))
        result = trees[0];
    else if (!p->failed && !n)
        result = empty_finalized(&p->opts);
    if (!result)
        p->failed = true;
    if (p->failed) {
        for (unsigned i = 0; i < n; i++)
            pf_cct_free(trees[i]);
        result = NULL;
    }
    g_free(jobs);
    g_free(trees);
    g_hash_table_destroy(p->partials);
    g_hash_table_destroy(p->threads);
    g_ptr_array_free(p->spare, TRUE);
    g_mutex_clear(&p->lock);
    g_cond_clear(&p->done);
    g_free(p);
    return result;
}
