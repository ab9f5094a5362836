/* Hot calling context tree with Space Saving (see hcct.h). */
#include "profile/hcct.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "common/json.h"
#include "profile/ccenc.h"

typedef struct hnode {
    int32_t parent;
    uint64_t method;
    uint64_t count;           /* Space Saving counter while monitored */
    uint32_t refs;            /* children + stack frames + callers' holds */
    bool monitored, live;
} hnode;

typedef struct hkey {
    int32_t parent;
    uint64_t method;
} hkey;

typedef struct heap_entry {
    uint64_t key;             /* the counter when pushed: a lower bound */
    int32_t node;
} heap_entry;

struct pf_hcct {
    double phi, epsilon;
    bool include[FL_ORIGIN_COUNT];
    uint32_t capacity, monitored;
    uint64_t n;               /* stream length */
    GArray *nodes;            /* hnode */
    GArray *free_slots;       /* int32 */
    uint32_t live, peak;
    GHashTable *children;     /* hkey * -> node + 1 */
    heap_entry *heap;
    uint32_t heap_len;
    GHashTable *threads;      /* tid -> GArray of int32 (the thread's stack) */
};

#define NODE(h, i) (&g_array_index((h)->nodes, hnode, (i)))

static guint hkey_hash(gconstpointer p)
{
    const hkey *k = p;
    uint64_t x = k->method * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)k->parent;
    return (guint)(x ^ (x >> 31));
}

static gboolean hkey_equal(gconstpointer a, gconstpointer b)
{
    const hkey *x = a, *y = b;
    return x->parent == y->parent && x->method == y->method;
}

static void stack_free(gpointer p)
{
    g_array_free(p, TRUE);
}

pf_hcct *pf_hcct_new(double phi, double epsilon, const bool *include)
{
    if (!(epsilon > 0 && epsilon < phi && phi < 1) || 1.0 / epsilon > 1e7)
        return NULL;
    pf_hcct *h = g_new0(pf_hcct, 1);
    h->phi = phi;
    h->epsilon = epsilon;
    for (int i = 0; i < FL_ORIGIN_COUNT; i++)
        h->include[i] = include ? include[i] : true;
    h->capacity = (uint32_t)ceil(1.0 / epsilon);
    h->nodes = g_array_new(FALSE, TRUE, sizeof(hnode));
    h->free_slots = g_array_new(FALSE, FALSE, sizeof(int32_t));
    h->children = g_hash_table_new_full(hkey_hash, hkey_equal, g_free, NULL);
    h->heap = g_new(heap_entry, h->capacity);
    h->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, stack_free);
    hnode root = { .parent = -1, .method = PF_NO_METHOD, .refs = 1, .live = true };
    g_array_append_val(h->nodes, root);
    h->live = h->peak = 1;
    return h;
}

void pf_hcct_free(pf_hcct *h)
{
    if (!h)
        return;
    g_array_free(h->nodes, TRUE);
    g_array_free(h->free_slots, TRUE);
    g_hash_table_destroy(h->children);
    g_hash_table_destroy(h->threads);
    g_free(h->heap);
    g_free(h);
}

uint64_t pf_hcct_stream_length(const pf_hcct *h) { return h->n; }
uint32_t pf_hcct_capacity(const pf_hcct *h) { return h->capacity; }
uint32_t pf_hcct_peak_nodes(const pf_hcct *h) { return h->peak; }

static int32_t child_of(pf_hcct *h, int32_t parent, uint64_t method)
{
    hkey k = { parent, method };
    gpointer v = g_hash_table_lookup(h->children, &k);
    if (v)
        return GPOINTER_TO_INT(v) - 1;
    int32_t i;
    hnode n = { .parent = parent, .method = method, .live = true };
    if (h->free_slots->len) {
        i = g_array_index(h->free_slots, int32_t, h->free_slots->len - 1);
        g_array_set_size(h->free_slots, h->free_slots->len - 1);
        *NODE(h, i) = n;
    } else {
        i = (int32_t)h->nodes->len;
        g_array_append_val(h->nodes, n);
    }
    NODE(h, parent)->refs++;
    g_hash_table_insert(h->children, g_memdup2(&k, sizeof k), GINT_TO_POINTER(i + 1));
    if (++h->live > h->peak)
        h->peak = h->live;
    return i;
}

/* Frees n and then each ancestor that no longer has a reason to be kept. */
static void prune(pf_hcct *h, int32_t n)
{
    while (n > 0) {
        hnode *x = NODE(h, n);
        if (x->refs || x->monitored)
            return;
        hkey k = { x->parent, x->method };
        g_hash_table_remove(h->children, &k);
        x->live = false;
        g_array_append_val(h->free_slots, n);
        h->live--;
        n = x->parent;
        NODE(h, n)->refs--;
    }
}

static void heap_sift_down(pf_hcct *h, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->heap_len && h->heap[l].key < h->heap[m].key)
            m = l;
        if (r < h->heap_len && h->heap[r].key < h->heap[m].key)
            m = r;
        if (m == i)
            return;
        heap_entry t = h->heap[i];
        h->heap[i] = h->heap[m];
        h->heap[m] = t;
        i = m;
    }
}

static void heap_push(pf_hcct *h, uint64_t key, int32_t node)
{
    uint32_t i = h->heap_len++;
    h->heap[i] = (heap_entry){ key, node };
    while (i && h->heap[(i - 1) / 2].key > h->heap[i].key) {
        heap_entry t = h->heap[i];
        h->heap[i] = h->heap[(i - 1) / 2];
        h->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* Space Saving: count one occurrence of context n. */
static void count_context(pf_hcct *h, int32_t n)
{
    hnode *x = NODE(h, n);
    h->n++;
    if (x->monitored) {
        x->count++;           /* its heap key goes stale: fixed when it surfaces */
        return;
    }
    if (h->monitored < h->capacity) {
        x->monitored = true;
        x->count = 1;
        h->monitored++;
        heap_push(h, 1, n);
        return;
    }
    /* Lazy min-priority queue: refresh stale keys until the top is exact. */
    while (h->heap[0].key != NODE(h, h->heap[0].node)->count) {
        h->heap[0].key = NODE(h, h->heap[0].node)->count;
        heap_sift_down(h, 0);
    }
    int32_t victim = h->heap[0].node;
    uint64_t min = h->heap[0].key;
    x = NODE(h, n);
    x->monitored = true;
    x->count = min + 1;
    h->heap[0] = (heap_entry){ min + 1, n };
    heap_sift_down(h, 0);
    hnode *v = NODE(h, victim);
    v->monitored = false;
    v->count = 0;
    prune(h, victim);
}

int32_t pf_hcct_enter(pf_hcct *h, int32_t parent, uint64_t method)
{
    int32_t n = child_of(h, parent, method);
    NODE(h, n)->refs++;
    count_context(h, n);
    return n;
}

void pf_hcct_release(pf_hcct *h, int32_t node)
{
    if (node <= 0)
        return;
    NODE(h, node)->refs--;
    prune(h, node);
}

static void stack_clear(pf_hcct *h, GArray *st)
{
    while (st->len) {
        int32_t n = g_array_index(st, int32_t, st->len - 1);
        g_array_set_size(st, st->len - 1);
        pf_hcct_release(h, n);
    }
}

int pf_hcct_sink(const fl_event *ev, void *ctx)
{
    pf_hcct *h = ctx;
    GArray *st = g_hash_table_lookup(h->threads, GUINT_TO_POINTER(ev->tid));
    if (!st) {
        st = g_array_new(FALSE, FALSE, sizeof(int32_t));
        g_hash_table_insert(h->threads, GUINT_TO_POINTER(ev->tid), st);
    }
    int32_t top = st->len ? g_array_index(st, int32_t, st->len - 1) : 0;
    switch (ev->kind) {
    case FL_SEGMENT:
        stack_clear(h, st);
        top = 0;
        for (uint32_t i = 0; i < ev->depth; i++) {
            int32_t n = child_of(h, top, ev->stack[i]);
            NODE(h, n)->refs++;
            g_array_append_val(st, n);
            top = n;
        }
        break;
    case FL_CALL: {
        bool counted = (unsigned)ev->origin < FL_ORIGIN_COUNT && h->include[ev->origin] &&
                       !(ev->flags & FL_F_CONTEXT);
        int32_t n;
        if (counted) {
            n = pf_hcct_enter(h, top, ev->method_id);
        } else {
            n = child_of(h, top, ev->method_id);
            NODE(h, n)->refs++;
        }
        g_array_append_val(st, n);
        break;
    }
    case FL_RETURN:
        if (st->len) {
            g_array_set_size(st, st->len - 1);
            pf_hcct_release(h, top);
        }
        break;
    default:
        break;
    }
    return 0;
}

static bool is_hot(const pf_hcct *h, const hnode *x)
{
    return x->live && x->monitored && (double)x->count >= h->phi * (double)h->n;
}

pf_cct *pf_hcct_tree(const pf_hcct *h, bool **hot)
{
    pf_cct_opts opts = pf_cct_default_opts();
    pf_cct *t = pf_cct_new(&opts);
    if (!t)
        return NULL;
    uint32_t count = h->nodes->len;
    int32_t *map = g_new(int32_t, count);
    for (uint32_t i = 0; i < count; i++)
        map[i] = -1;
    map[0] = 0;
    GArray *path = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (uint32_t i = 1; i < count; i++) {
        const hnode *x = &g_array_index(h->nodes, hnode, i);
        if (!is_hot(h, x))
            continue;
        g_array_set_size(path, 0);
        for (int32_t a = (int32_t)i; map[a] < 0; a = g_array_index(h->nodes, hnode, a).parent)
            g_array_append_val(path, a);
        for (guint k = path->len; k-- > 0;) {
            int32_t a = g_array_index(path, int32_t, k);
            const hnode *y = &g_array_index(h->nodes, hnode, a);
            map[a] = pf_cct_child(t, map[y->parent], y->method, -1);
            t->nodes[map[a]].calls = y->monitored ? y->count : 0;
            /* self_bc_events carries the hot mark through pf_cct_finalize. */
            t->nodes[map[a]].self_bc_events = is_hot(h, y) ? 1 : 0;
        }
    }
    g_array_free(path, TRUE);
    g_free(map);
    pf_cct *fin = pf_cct_finalize(t);
    pf_cct_free(t);
    if (fin && hot) {
        *hot = g_new0(bool, fin->count);
        for (uint32_t i = 0; i < fin->count; i++) {
            (*hot)[i] = fin->nodes[i].self_bc_events == 1;
        }
    }
    if (fin) {
        for (uint32_t i = 0; i < fin->count; i++)
            fin->nodes[i].self_bc_events = fin->nodes[i].bc_events = 0;
    }
    return fin;
}

int pf_hcct_accuracy_of(const pf_hcct *h, const pf_cct *exact, pf_hcct_accuracy *acc)
{
    memset(acc, 0, sizeof *acc);
    pf_cct *e = pf_ccenc_tree(exact);
    bool *hot = NULL;
    pf_cct *t = pf_hcct_tree(h, &hot);
    if (!e || !t) {
        pf_cct_free(e);
        pf_cct_free(t);
        g_free(hot);
        return -1;
    }
    double threshold = h->phi * (double)h->n;
    bool *exact_hot_reported = g_new0(bool, e->count);
    int32_t *map = g_new(int32_t, t->count);
    map[0] = 0;
    uint64_t overlap = 0;
    double err_sum = 0;
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        map[i] = map[n->parent] < 0 ? -1 : pf_cct_find(e, map[n->parent], n->method, -1);
        uint64_t truth = map[i] >= 0 ? e->nodes[map[i]].calls : 0;
        overlap += truth;
        if (!hot[i])
            continue;
        acc->reported_hot++;
        if ((double)truth < threshold)
            acc->false_positives++;
        else
            exact_hot_reported[map[i]] = true;
        double err = truth ? ((double)n->calls - (double)truth) / (double)truth : INFINITY;
        if (err < 0)
            err = -err;
        if (err > acc->max_counter_error)
            acc->max_counter_error = err;
        err_sum += err;
    }
    for (uint32_t i = 1; i < e->count; i++) {
        if ((double)e->nodes[i].calls >= threshold && e->nodes[i].calls > 0) {
            acc->exact_hot++;
            if (!exact_hot_reported[i])
                acc->false_negatives++;
        }
    }
    acc->degree_of_overlap = h->n ? (double)overlap / (double)h->n : 1.0;
    acc->hot_edge_coverage = acc->exact_hot
        ? (double)(acc->exact_hot - acc->false_negatives) / acc->exact_hot : 1.0;
    acc->avg_counter_error = acc->reported_hot ? err_sum / acc->reported_hot : 0;
    acc->hcct_nodes = t->count;
    acc->cct_nodes = e->count;
    g_free(map);
    g_free(exact_hot_reported);
    g_free(hot);
    pf_cct_free(e);
    pf_cct_free(t);
    return 0;
}

int pf_hcct_export_json(FILE *out, const pf_hcct *h, const pf_names *names,
                        const pf_hcct_accuracy *acc)
{
    bool *hot = NULL;
    pf_cct *t = pf_hcct_tree(h, &hot);
    if (!t)
        return -1;
    json_w j;
    json_init(&j, out, false);
    json_obj(&j);
    json_kstr(&j, "format", "jpt-hcct");
    json_ku64(&j, "version", 1);
    json_kdbl(&j, "phi", h->phi);
    json_kdbl(&j, "epsilon", h->epsilon);
    json_ku64(&j, "stream_length", h->n);
    json_ku64(&j, "counters", h->capacity);
    json_ku64(&j, "peak_nodes", h->peak);
    json_key(&j, "nodes");
    json_obj(&j);
    json_key(&j, "parent");
    json_arr(&j);
    for (uint32_t i = 0; i < t->count; i++)
        json_i64(&j, t->nodes[i].parent);
    json_end(&j);
    json_key(&j, "method");
    json_arr(&j);
    char buf[32];
    for (uint32_t i = 0; i < t->count; i++) {
        if (t->nodes[i].method == PF_NO_METHOD)
            json_null(&j);
        else
            json_str(&j, pf_names_readable(names, t->nodes[i].method, buf, sizeof buf));
    }
    json_end(&j);
    json_key(&j, "count");
    json_arr(&j);
    for (uint32_t i = 0; i < t->count; i++)
        json_u64(&j, t->nodes[i].calls);
    json_end(&j);
    json_key(&j, "hot");
    json_arr(&j);
    for (uint32_t i = 0; i < t->count; i++)
        json_bool(&j, hot[i]);
    json_end(&j);
    json_end(&j);
    if (acc) {
        json_key(&j, "accuracy");
        json_obj(&j);
        json_ku64(&j, "exact_hot", acc->exact_hot);
        json_ku64(&j, "reported_hot", acc->reported_hot);
        json_ku64(&j, "false_positives", acc->false_positives);
        json_ku64(&j, "false_negatives", acc->false_negatives);
        json_kdbl(&j, "degree_of_overlap", acc->degree_of_overlap);
        json_kdbl(&j, "hot_edge_coverage", acc->hot_edge_coverage);
        json_kdbl(&j, "max_counter_error", acc->max_counter_error);
        json_kdbl(&j, "avg_counter_error", acc->avg_counter_error);
        json_ku64(&j, "hcct_nodes", acc->hcct_nodes);
        json_ku64(&j, "cct_nodes", acc->cct_nodes);
        json_end(&j);
    }
    json_end(&j);
    json_finish(&j);
    g_free(hot);
    pf_cct_free(t);
    return ferror(out) ? -1 : 0;
}
