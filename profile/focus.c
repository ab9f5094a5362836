/* Focus on part of a profile (see focus.h). */
#include "profile/focus.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

typedef struct focus_pattern {
    char *glob;
    pf_method_pattern *p;
    bool include;
    bool matched;
} focus_pattern;

struct pf_focus {
    GArray *patterns;        /* focus_pattern */
    GPtrArray *unmatched;    /* globs that matched no method (after apply) */
};

pf_focus *pf_focus_new(void)
{
    pf_focus *f = g_new0(pf_focus, 1);
    f->patterns = g_array_new(FALSE, TRUE, sizeof(focus_pattern));
    f->unmatched = g_ptr_array_new();
    return f;
}

void pf_focus_free(pf_focus *f)
{
    if (!f)
        return;
    for (guint i = 0; i < f->patterns->len; i++) {
        focus_pattern *p = &g_array_index(f->patterns, focus_pattern, i);
        g_free(p->glob);
        pf_method_pattern_free(p->p);
    }
    g_array_free(f->patterns, TRUE);
    g_ptr_array_free(f->unmatched, TRUE);
    g_free(f);
}

void pf_focus_add(pf_focus *f, const char *glob, bool include)
{
    focus_pattern p = { g_strdup(glob), pf_method_pattern_new(glob), include, false };
    g_array_append_val(f->patterns, p);
}

bool pf_focus_empty(const pf_focus *f)
{
    return !f || f->patterns->len == 0;
}

bool pf_frame_pattern_match(pf_method_pattern *p, const char *glob, const pf_method_name *m)
{
    return pf_class_pattern_match(glob, m->class_name) ||
           pf_method_pattern_match(p, m->class_name, m->name, m->sig);
}

/* Bit 1: the method matches an include pattern, bit 2 an exclude one; per
 * method, once. */
static unsigned method_bits(pf_focus *f, GHashTable *cache, const pf_names *names,
                            uint64_t method)
{
    gpointer known = g_hash_table_lookup(cache, &method);
    if (known)
        return GPOINTER_TO_UINT(known) & 3;
    unsigned bits = 0;
    const pf_method_name *m = names ? pf_names_method(names, method) : NULL;
    for (guint i = 0; m && i < f->patterns->len; i++) {
        focus_pattern *p = &g_array_index(f->patterns, focus_pattern, i);
        if (pf_frame_pattern_match(p->p, p->glob, m)) {
            p->matched = true;
            bits |= p->include ? 1 : 2;
        }
    }
    uint64_t *key = g_new(uint64_t, 1);
    *key = method;
    g_hash_table_insert(cache, key, GUINT_TO_POINTER(bits | 4));
    return bits;
}

pf_cct *pf_focus_apply(pf_focus *f, const pf_cct *t, const pf_names *names)
{
    bool any_include = false;
    for (guint i = 0; i < f->patterns->len; i++)
        any_include |= g_array_index(f->patterns, focus_pattern, i).include;
    GHashTable *cache = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    /* path[i]: what the stack down to node i holds (bits as method_bits). */
    uint8_t *path = g_new0(uint8_t, t->count);
    bool *keep = g_new0(bool, t->count);
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        path[i] = path[n->parent];
        if (n->method != PF_NO_METHOD)
            path[i] |= (uint8_t)method_bits(f, cache, names, n->method);
    }
    /* A node's values count when its stack passes; it stays when anything
     * in its subtree counts (children come after their parent). */
    for (uint32_t i = t->count; i-- > 1;) {
        const pf_node *n = &t->nodes[i];
        bool counts = (!any_include || (path[i] & 1)) && !(path[i] & 2);
        if (counts && (n->calls || n->self_bytecodes || n->self_time))
            keep[i] = true;
        if (keep[i])
            keep[n->parent] = true;
    }
    pf_cct *out = pf_cct_new(&t->opts);
    int32_t *map = g_new(int32_t, t->count);
    bool ok = out != NULL;
    if (ok)
        map[0] = 0;
    for (uint32_t i = 1; ok && i < t->count; i++) {
        if (!keep[i])
            continue;
        const pf_node *n = &t->nodes[i];
        map[i] = pf_cct_child(out, map[n->parent], n->method, n->site);
        if (map[i] < 0) {
            ok = false;
            break;
        }
        pf_node *d = &out->nodes[map[i]];
        d->kinds = n->kinds;
        if ((!any_include || (path[i] & 1)) && !(path[i] & 2)) {
            d->calls = n->calls;
            d->self_bytecodes = n->self_bytecodes;
            d->self_bc_events = n->self_bc_events;
            d->self_time = n->self_time;
        }
    }
    g_free(map);
    g_free(path);
    g_free(keep);
    g_hash_table_destroy(cache);
    g_ptr_array_set_size(f->unmatched, 0);
    for (guint i = 0; i < f->patterns->len; i++) {
        focus_pattern *p = &g_array_index(f->patterns, focus_pattern, i);
        if (!p->matched)
            g_ptr_array_add(f->unmatched, p->glob);
    }
    pf_cct *fin = ok ? pf_cct_finalize(out) : NULL;
    pf_cct_free(out);
    return fin;
}

const char *pf_focus_unmatched(const pf_focus *f, size_t i)
{
    return i < f->unmatched->len ? f->unmatched->pdata[i] : NULL;
}
