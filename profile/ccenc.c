/* Calling-context encoding (see ccenc.h). */
#include "profile/ccenc.h"

#include <stdlib.h>

pf_cct *pf_ccenc_tree(const pf_cct *t)
{
    pf_cct_opts opts = t->opts;
    opts.call_sites = false;
    pf_cct *all = pf_cct_new(&opts);
    if (!all)
        return NULL;
    /* Dropping the sites: merge node by node with site -1. */
    int32_t *map = malloc((size_t)t->count * sizeof *map);
    if (!map) {
        pf_cct_free(all);
        return NULL;
    }
    map[0] = 0;
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        int32_t d = n->parent == 0 ? 0 : pf_cct_child(all, map[n->parent], n->method, -1);
        if (d < 0) {
            free(map);
            pf_cct_free(all);
            return NULL;
        }
        map[i] = d;
        all->nodes[d].calls += n->calls;
        all->nodes[d].self_bytecodes += n->self_bytecodes;
        all->nodes[d].self_bc_events += n->self_bc_events;
        all->nodes[d].self_time += n->self_time;
    }
    free(map);
    pf_cct *fin = pf_cct_finalize(all);
    pf_cct_free(all);
    return fin;
}

int64_t pf_ccenc_edge(const pf_cct *e, int32_t child)
{
    return (int64_t)child - e->nodes[child].parent;
}

int64_t pf_ccenc_encode(const pf_cct *e, const uint64_t *stack, uint32_t depth)
{
    int64_t id = 0;
    int32_t node = 0;
    for (uint32_t i = 0; i < depth; i++) {
        int32_t c = pf_cct_find(e, node, stack[i], -1);
        if (c < 0)
            return -1;
        id += pf_ccenc_edge(e, c);
        node = c;
    }
    return id;
}

int64_t pf_ccenc_decode(const pf_cct *e, int64_t id, uint64_t *stack, uint32_t max)
{
    if (id < 0 || id >= (int64_t)e->count)
        return -1;
    int64_t node = 0, depth = 0;
    while (node != id) {
        int32_t c = e->nodes[node].first_child;
        while (c >= 0 && !(id >= c && id < (int64_t)c + e->nodes[c].subtree))
            c = e->nodes[c].next_sibling;
        if (c < 0)
            return -1;
        if (depth < max)
            stack[depth] = e->nodes[c].method;
        depth++;
        node = c;
    }
    return depth;
}
