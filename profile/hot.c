/* Hot methods (see hot.h). */
#include "profile/hot.h"

#include <stdlib.h>
#include <string.h>

#include <glib.h>

int pf_metric_parse(const char *s)
{
    if (!strcmp(s, "bytecodes"))
        return PF_BY_BYTECODES;
    if (!strcmp(s, "time"))
        return PF_BY_TIME;
    if (!strcmp(s, "calls"))
        return PF_BY_CALLS;
    return -1;
}

const char *pf_metric_name(pf_metric m)
{
    return m == PF_BY_TIME ? "time" : m == PF_BY_CALLS ? "calls" : "bytecodes";
}

uint64_t pf_hot_value(const pf_hot_method *h, pf_metric by)
{
    return by == PF_BY_TIME ? h->self_time : by == PF_BY_CALLS ? h->calls : h->self_bytecodes;
}

uint64_t pf_node_self(const pf_node *n, pf_metric by)
{
    return by == PF_BY_TIME ? n->self_time : by == PF_BY_CALLS ? n->calls : n->self_bytecodes;
}

static int hot_cmp(const void *a, const void *b, void *metric)
{
    const pf_hot_method *x = a, *y = b;
    pf_metric by = *(const pf_metric *)metric;
    uint64_t vx = pf_hot_value(x, by), vy = pf_hot_value(y, by);
    if (vx != vy)
        return vx > vy ? -1 : 1;
    return x->method < y->method ? -1 : x->method > y->method;
}

size_t pf_hot_methods(const pf_cct *t, pf_metric by, pf_hot_method **out)
{
    GHashTable *index = g_hash_table_new(g_int64_hash, g_int64_equal); /* method -> slot + 1 */
    GArray *rows = g_array_new(FALSE, TRUE, sizeof(pf_hot_method));
    /* open[d] is the node at depth d on the current path; active counts the
     * activations of each method on it (recursion). */
    int32_t *open = g_new(int32_t, t->count + 1);
    uint32_t *active = NULL;
    uint32_t depth = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        while (depth && (uint32_t)open[depth - 1] + t->nodes[open[depth - 1]].subtree <= i) {
            const pf_node *closed = &t->nodes[open[--depth]];
            if (closed->method != PF_NO_METHOD) {
                gpointer slot = g_hash_table_lookup(index, &closed->method);
                active[GPOINTER_TO_SIZE(slot) - 1]--;
            }
        }
        open[depth++] = (int32_t)i;
        if (n->method == PF_NO_METHOD)
            continue;
        gpointer slot = g_hash_table_lookup(index, &n->method);
        size_t s;
        if (!slot) {
            pf_hot_method h = { .method = n->method };
            g_array_append_val(rows, h);
            s = rows->len - 1;
            active = g_renew(uint32_t, active, rows->len);
            active[s] = 0;
            g_hash_table_insert(index, (gpointer)&n->method, GSIZE_TO_POINTER(s + 1));
        } else {
            s = GPOINTER_TO_SIZE(slot) - 1;
        }
        pf_hot_method *h = &g_array_index(rows, pf_hot_method, s);
        h->calls += n->calls;
        h->self_bytecodes += n->self_bytecodes;
        h->self_time += n->self_time;
        if (active[s]++ == 0) {
            h->bytecodes += n->bytecodes;
            h->time += n->time;
        }
    }
    qsort_r(rows->data, rows->len, sizeof(pf_hot_method), hot_cmp, &by);
    size_t count = rows->len;
    *out = (pf_hot_method *)g_array_free(rows, FALSE);
    g_free(open);
    g_free(active);
    g_hash_table_destroy(index);
    return count;
}
