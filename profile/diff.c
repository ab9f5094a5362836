/* The difference of two profiles (see diff.h). */
#include "profile/diff.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "common/json.h"

enum { M_CALLS, M_BYTECODES, M_TIME, M_COUNT };

typedef struct dmethod {
    char *cls, *name, *sig;  /* as cct-json names them ("?" and "0x..." when unknown) */
    char *display;           /* as the reports name them */
} dmethod;

struct pf_diff {
    GPtrArray *methods;      /* dmethod *, indexed by the trees' method field */
    GHashTable *index;       /* "class\1name\1sig" -> index + 1 */
    pf_cct *tree;            /* the union of both runs' contexts, finalized */
    uint64_t *self[2][M_COUNT];  /* [run][metric] per node of tree: calls, bytecodes, time */
    bool ns;
};

static void dmethod_free(gpointer p)
{
    dmethod *m = p;
    g_free(m->cls);
    g_free(m->name);
    g_free(m->sig);
    g_free(m->display);
    g_free(m);
}

/* s with every address in it ("0x" and 8 or more hex digits, as hidden
 * classes are named: LambdaForm$MH/0x00007fba58001000) replaced by "0x*":
 * each run puts them elsewhere. */
static char *without_addresses(const char *s)
{
    GString *out = g_string_new(NULL);
    for (const char *p = s; *p;) {
        size_t hex = 0;
        if (p[0] == '0' && p[1] == 'x')
            while (g_ascii_isxdigit(p[2 + hex]))
                hex++;
        if (hex >= 8) {
            g_string_append(out, "0x*");
            p += 2 + hex;
        } else {
            g_string_append_c(out, *p++);
        }
    }
    return g_string_free(out, FALSE);
}

/* The diff's method for a run's method id: one per class (addresses of
 * hidden classes left out), name and descriptor, whichever run it comes
 * from. */
static uint64_t intern(pf_diff *d, const pf_names *n, uint64_t id)
{
    const pf_method_name *mn = n ? pf_names_method(n, id) : NULL;
    char unknown[32], buf[32];
    snprintf(unknown, sizeof unknown, "0x%" PRIx64, id);
    char *cls = without_addresses(mn ? mn->class_name : "?");
    const char *name = mn ? mn->name : unknown, *sig = mn ? mn->sig : "";
    char *key = g_strdup_printf("%s\1%s\1%s", cls, name, sig);
    gpointer v = g_hash_table_lookup(d->index, key);
    if (v) {
        g_free(key);
        g_free(cls);
        return (uint64_t)(GPOINTER_TO_SIZE(v) - 1);
    }
    dmethod *m = g_new0(dmethod, 1);
    m->cls = cls;
    m->name = g_strdup(name);
    m->sig = g_strdup(sig);
    m->display = without_addresses(n ? pf_names_readable(n, id, buf, sizeof buf) : unknown);
    g_ptr_array_add(d->methods, m);
    g_hash_table_insert(d->index, key, GSIZE_TO_POINTER(d->methods->len));
    return d->methods->len - 1;
}

/* t's contexts with methods renamed to the diff's and threads merged; time
 * scaled by ns_per_tick when > 0. */
static pf_cct *renamed(pf_diff *d, const pf_cct *t, const pf_names *n, double ns_per_tick)
{
    pf_cct_opts o = t->opts;
    o.call_sites = false;
    pf_cct *r = pf_cct_new(&o);
    int32_t *map = g_new(int32_t, t->count);
    bool ok = r != NULL;
    if (ok)
        map[0] = 0;
    for (uint32_t i = 0; ok && i < t->count; i++) {
        const pf_node *s = &t->nodes[i];
        if (i > 0) {
            map[i] = s->method == PF_NO_METHOD ? 0   /* a thread root: merged into the root */
                     : pf_cct_child(r, map[s->parent], intern(d, n, s->method), -1);
            if (map[i] < 0) {
                ok = false;
                break;
            }
        }
        pf_node *x = &r->nodes[map[i]];
        x->calls += s->calls;
        x->self_bytecodes += s->self_bytecodes;
        x->self_time += ns_per_tick > 0 ? (uint64_t)((double)s->self_time * ns_per_tick + 0.5)
                                        : s->self_time;
        x->kinds |= s->kinds;
    }
    g_free(map);
    if (!ok) {
        pf_cct_free(r);
        return NULL;
    }
    return r;
}

pf_diff *pf_diff_new(const pf_cct *a, const pf_names *na, double ns_a, const pf_cct *b,
                     const pf_names *nb, double ns_b)
{
    pf_diff *d = g_new0(pf_diff, 1);
    d->methods = g_ptr_array_new_with_free_func(dmethod_free);
    d->index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    d->ns = ns_a > 0 && ns_b > 0;
    pf_cct *ra = renamed(d, a, na, d->ns ? ns_a : 0);
    pf_cct *rb = ra ? renamed(d, b, nb, d->ns ? ns_b : 0) : NULL;
    pf_cct *u = rb ? pf_cct_new(&ra->opts) : NULL;
    if (u && (pf_cct_merge(u, ra, false) < 0 || pf_cct_merge(u, rb, false) < 0)) {
        pf_cct_free(u);
        u = NULL;
    }
    d->tree = u ? pf_cct_finalize(u) : NULL;
    pf_cct_free(u);
    if (!d->tree) {
        pf_cct_free(ra);
        pf_cct_free(rb);
        pf_diff_free(d);
        return NULL;
    }
    /* Each node of the union found in each run's tree by its parent's. */
    const pf_cct *runs[2] = { ra, rb };
    uint32_t count = d->tree->count;
    int32_t *at = g_new(int32_t, count);
    for (int r = 0; r < 2; r++) {
        for (int m = 0; m < M_COUNT; m++)
            d->self[r][m] = g_new0(uint64_t, count);
        for (uint32_t i = 0; i < count; i++) {
            const pf_node *n = &d->tree->nodes[i];
            at[i] = i == 0 ? 0 : at[n->parent] < 0 ? -1
                    : pf_cct_find(runs[r], at[n->parent], n->method, -1);
            if (at[i] < 0)
                continue;
            const pf_node *x = &runs[r]->nodes[at[i]];
            d->self[r][M_CALLS][i] = x->calls;
            d->self[r][M_BYTECODES][i] = x->self_bytecodes;
            d->self[r][M_TIME][i] = x->self_time;
        }
    }
    g_free(at);
    pf_cct_free(ra);
    pf_cct_free(rb);
    return d;
}

void pf_diff_free(pf_diff *d)
{
    if (!d)
        return;
    for (int r = 0; r < 2; r++)
        for (int m = 0; m < M_COUNT; m++)
            g_free(d->self[r][m]);
    pf_cct_free(d->tree);
    g_hash_table_destroy(d->index);
    g_ptr_array_free(d->methods, TRUE);
    g_free(d);
}

bool pf_diff_time_ns(const pf_diff *d)
{
    return d->ns;
}

static int metric_index(pf_metric by)
{
    return by == PF_BY_CALLS ? M_CALLS : by == PF_BY_TIME ? M_TIME : M_BYTECODES;
}

void pf_diff_totals(const pf_diff *d, pf_metric by, uint64_t *a, uint64_t *b)
{
    int m = metric_index(by);
    *a = *b = 0;
    for (uint32_t i = 0; i < d->tree->count; i++) {
        *a += d->self[0][m][i];
        *b += d->self[1][m][i];
    }
}

static uint64_t absdiff(const pf_diff_row *r)
{
    return r->a > r->b ? r->a - r->b : r->b - r->a;
}

static int row_cmp(const void *x, const void *y)
{
    const pf_diff_row *p = x, *q = y;
    uint64_t dp = absdiff(p), dq = absdiff(q);
    if (dp != dq)
        return dp > dq ? -1 : 1;
    uint64_t mp = p->a > p->b ? p->a : p->b, mq = q->a > q->b ? q->a : q->b;
    if (mp != mq)
        return mp > mq ? -1 : 1;
    return p->key < q->key ? -1 : p->key > q->key;
}

size_t pf_diff_methods(const pf_diff *d, pf_metric by, pf_diff_row **out)
{
    int m = metric_index(by);
    size_t n = d->methods->len;
    pf_diff_row *rows = g_new0(pf_diff_row, n ? n : 1);
    for (size_t k = 0; k < n; k++)
        rows[k].key = (uint32_t)k;
    for (uint32_t i = 1; i < d->tree->count; i++) {
        uint64_t method = d->tree->nodes[i].method;
        if (method == PF_NO_METHOD)
            continue;
        rows[method].a += d->self[0][m][i];
        rows[method].b += d->self[1][m][i];
    }
    qsort(rows, n, sizeof *rows, row_cmp);
    *out = rows;
    return n;
}

size_t pf_diff_contexts(const pf_diff *d, pf_metric by, pf_diff_row **out)
{
    int m = metric_index(by);
    pf_diff_row *rows = g_new0(pf_diff_row, d->tree->count);
    size_t n = 0;
    for (uint32_t i = 1; i < d->tree->count; i++)
        rows[n++] = (pf_diff_row){ i, d->self[0][m][i], d->self[1][m][i] };
    qsort(rows, n, sizeof *rows, row_cmp);
    *out = rows;
    return n;
}

const char *pf_diff_method_name(const pf_diff *d, uint32_t method)
{
    return method < d->methods->len ? ((const dmethod *)d->methods->pdata[method])->display : "?";
}

uint32_t pf_diff_context(const pf_diff *d, uint32_t node, uint32_t *methods, uint32_t max)
{
    uint32_t depth = 0;
    for (int32_t i = (int32_t)node; i > 0; i = d->tree->nodes[i].parent)
        depth++;
    uint32_t k = depth;
    for (int32_t i = (int32_t)node; i > 0; i = d->tree->nodes[i].parent) {
        k--;
        if (k < max)
            methods[k] = (uint32_t)d->tree->nodes[i].method;
    }
    return depth;
}

/* One run's node arrays: calls, inclusive and exclusive bytecodes and time. */
static void put_run_nodes(json_w *j, const pf_diff *d, int r)
{
    uint32_t n = d->tree->count;
    uint64_t *incl = g_new(uint64_t, n);
    static const char *const keys[M_COUNT] = { "calls", "bytecodes", "time" };
    for (int m = 0; m < M_COUNT; m++) {
        if (m != M_CALLS) {
            memcpy(incl, d->self[r][m], n * sizeof *incl);
            for (uint32_t i = n - 1; i > 0; i--)
                incl[d->tree->nodes[i].parent] += incl[i];
            json_key(j, keys[m]);
            json_arr(j);
            for (uint32_t i = 0; i < n; i++)
                json_u64(j, incl[i]);
            json_end(j);
        }
        char self_key[32];
        snprintf(self_key, sizeof self_key, m == M_CALLS ? "%s" : "self_%s", keys[m]);
        json_key(j, self_key);
        json_arr(j);
        for (uint32_t i = 0; i < n; i++)
            json_u64(j, d->self[r][m][i]);
        json_end(j);
    }
    g_free(incl);
}

int pf_diff_export_json(FILE *out, const pf_diff *d, const char *title_a, const char *title_b)
{
    json_w j;
    json_init(&j, out, false);
    json_obj(&j);
    json_kstr(&j, "format", "jpt-cct");
    json_ku64(&j, "version", 1);
    char *title = g_strdup_printf("%s -> %s", title_a, title_b);
    json_kstr(&j, "title", title);
    g_free(title);
    if (d->ns)
        json_ku64(&j, "tsc_hz", 1000000000u);   /* times are nanoseconds */
    json_key(&j, "kinds");
    json_arr(&j);
    static const char *const kind_names[] = { "interpreted", "compiled", "inlined", "native",
                                              "truncated" };
    for (size_t k = 0; k < sizeof kind_names / sizeof kind_names[0]; k++)
        json_str(&j, kind_names[k]);
    json_end(&j);
    json_key(&j, "metrics");
    json_arr(&j);
    json_str(&j, "calls");
    json_str(&j, "bytecodes");
    json_str(&j, "time");
    json_end(&j);
    json_key(&j, "methods");
    json_arr(&j);
    for (guint m = 0; m < d->methods->len; m++) {
        const dmethod *dm = d->methods->pdata[m];
        json_obj(&j);
        json_kstr(&j, "class", dm->cls);
        json_kstr(&j, "name", dm->name);
        json_kstr(&j, "sig", dm->sig);
        json_end(&j);
    }
    json_end(&j);
    json_key(&j, "nodes");
    json_obj(&j);
    json_key(&j, "parent");
    json_arr(&j);
    for (uint32_t i = 0; i < d->tree->count; i++)
        json_i64(&j, d->tree->nodes[i].parent);
    json_end(&j);
    json_key(&j, "method");
    json_arr(&j);
    for (uint32_t i = 0; i < d->tree->count; i++)
        json_i64(&j, d->tree->nodes[i].method == PF_NO_METHOD ? -1
                                                               : (int64_t)d->tree->nodes[i].method);
    json_end(&j);
    put_run_nodes(&j, d, 1);
    json_key(&j, "kind");
    json_arr(&j);
    for (uint32_t i = 0; i < d->tree->count; i++)
        json_u64(&j, d->tree->nodes[i].kinds);
    json_end(&j);
    json_end(&j);
    json_key(&j, "labels");
    json_obj(&j);
    json_kstr(&j, "0", "all threads");
    json_end(&j);
    json_key(&j, "baseline");
    json_obj(&j);
    json_kstr(&j, "title", title_a);
    json_key(&j, "nodes");
    json_obj(&j);
    put_run_nodes(&j, d, 0);
    json_end(&j);
    json_end(&j);
    json_end(&j);
    json_finish(&j);
    return ferror(out) ? -1 : 0;
}
