/* Partial results' data: pieces and their levels, class sets, the methods
 * and threads a partial result names, and what it gives once complete. */
#include "profile/part.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

GHashTable *pf_class_set_new(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

void pf_class_set_add(GHashTable *set, const char *klass)
{
    if (!g_hash_table_contains(set, klass))
        g_hash_table_add(set, g_strdup(klass));
}

GHashTable *pf_class_set_copy(GHashTable *set)
{
    if (!set)
        return NULL;
    GHashTable *c = pf_class_set_new();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, set);
    while (g_hash_table_iter_next(&it, &key, NULL))
        pf_class_set_add(c, key);
    return c;
}

void pf_piece_free(pf_piece *p)
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

pf_piece *pf_piece_new(const pf_cct_opts *opts, uint32_t tid, uint64_t from, uint64_t to)
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
int32_t pf_level_root(pf_piece *p, uint32_t j)
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
int64_t pf_level_of(const pf_cct *t, int32_t n)
{
    const pf_node *x = &t->nodes[n];
    return x->parent == 0 && x->method == PF_LEVEL_ROOT ? x->site : -1;
}

static void part_method_free(gpointer p)
{
    part_method *m = p;
    g_free(m->klass);
    g_free(m->name);
    g_free(m->sig);
    g_free(m);
}

pf_part *pf_part_new(void)
{
    pf_part *p = g_new0(pf_part, 1);
    p->pieces = g_ptr_array_new_with_free_func((GDestroyNotify)pf_piece_free);
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

void pf_part_add_method(pf_part *p, uint64_t id, uint32_t modifiers, const char *klass,
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

bool pf_part_has_shard(const pf_part *p, uint32_t k)
{
    return p->have[k / 8] & (1u << (k % 8));
}

bool pf_part_complete(const pf_part *p, char *missing, size_t len)
{
    GString *s = g_string_new(NULL);
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->shards; k++) {
        if (pf_part_has_shard(p, k))
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
        n += pf_part_has_shard(p, k);
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
