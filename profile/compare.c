/* Agreement of a traced run with the reference (compare.h). */
#include "profile/compare.h"

#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/seqalign.h"
#include "profile/cct.h"
#include "profile/names.h"
#include "profile/source.h"

#define NOT_SELECTED G_MAXUINT32

/* Counts of one measure per key, for both runs. */
typedef struct tally_ent {
    uint64_t key;
    uint64_t n[2];
} tally_ent;

typedef struct tally {
    GHashTable *index;           /* key -> entry + 1 */
    GArray *ents;                /* tally_ent */
} tally;

typedef struct side {
    pf_names *names;
    GHashTable *sym_of;          /* method id -> symbol + 1, or NOT_SELECTED + 1 */
    pf_cct *tree;                /* finalized */
    GHashTable *seq;             /* tid -> GArray of uint64_t (pair index) */
    uint64_t bytecodes;          /* selected */
    bool traced;
    bool read;
} side;

struct pf_compare {
    char **classes;              /* prefixes in internal form, or NULL */
    bool all;
    GHashTable *sym_index;       /* normalized name -> symbol + 1 */
    GPtrArray *sym_name;         /* symbol -> normalized name */
    tally pairs;                 /* (symbol << 16 | bci) */
    side s[2];
    pf_seq *building;
    int run;
    bool keep_seq;
    uint64_t interpreted, compiled;
    /* filled by the comparison */
    bool compared;
    GHashTable *ctx_index;       /* parent << 32 | symbol -> context + 1 */
    GArray *ctx_parent, *ctx_sym; /* uint32_t per context; context 0 is the root */
    GPtrArray *thread_name;      /* thread key -> "name" or "name #k" */
    tally contexts, methods, thread_contexts;   /* thread_contexts: thread << 32 | context */
};

static void tally_init(tally *t)
{
    t->index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    t->ents = g_array_new(FALSE, FALSE, sizeof(tally_ent));
}

static void tally_free(tally *t)
{
    if (t->index)
        g_hash_table_destroy(t->index);
    if (t->ents)
        g_array_free(t->ents, TRUE);
}

static uint32_t tally_slot(tally *t, uint64_t key)
{
    gpointer v = g_hash_table_lookup(t->index, &key);
    if (v)
        return GPOINTER_TO_UINT(v) - 1;
    tally_ent e = { .key = key };
    g_array_append_val(t->ents, e);
    uint64_t *k = g_new(uint64_t, 1);
    *k = key;
    g_hash_table_insert(t->index, k, GUINT_TO_POINTER(t->ents->len));
    return t->ents->len - 1;
}

static void tally_add(tally *t, uint64_t key, int run, uint64_t n)
{
    if (n) {
        uint32_t i = tally_slot(t, key);   /* first: it may move the array */
        g_array_index(t->ents, tally_ent, i).n[run] += n;
    }
}

static pf_agreement tally_agreement(const tally *t)
{
    pf_agreement a = { 0 };
    for (guint i = 0; i < t->ents->len; i++) {
        const tally_ent *e = &g_array_index(t->ents, tally_ent, i);
        a.min_sum += MIN(e->n[0], e->n[1]);
        a.max_sum += MAX(e->n[0], e->n[1]);
        for (int r = 0; r < 2; r++) {
            a.total[r] += e->n[r];
            a.keys[r] += e->n[r] != 0;
        }
    }
    return a;
}

double pf_agreement_pct(const pf_agreement *a)
{
    return a->max_sum ? 100.0 * (double)a->min_sum / (double)a->max_sum : 100.0;
}

static const char *const jdk_prefixes[] = {
    "java/", "javax/", "jdk/", "sun/", "com/sun/", "org/w3c/", "org/xml/", "org/ietf/",
    "org/jcp/", NULL,
};

static bool selected(const pf_compare *c, const char *cls)
{
    if (c->all)
        return true;
    if (c->classes) {
        for (char **k = c->classes; *k; k++) {
            size_t n = strlen(*k);
            /* a package prefix ends with '/'; a class takes its nested ones */
            if (!strncmp(cls, *k, n) && ((*k)[n - 1] == '/' || cls[n] == '\0' || cls[n] == '$'))
                return true;
        }
        return false;
    }
    for (const char *const *p = jdk_prefixes; *p; p++)
        if (g_str_has_prefix(cls, *p))
            return false;
    return true;
}

/* A class name with what differs between runs of the same program taken
 * out: the address of a hidden class ("Foo$$Lambda/0x0000000800c01234",
 * "LambdaForm$MH/0x...") and the number of a lambda proxy ("$$Lambda$12"). */
static void put_normalized_class(GString *s, const char *cls)
{
    for (const char *p = cls; *p;) {
        if (p[0] == '0' && p[1] == 'x' && g_ascii_isxdigit(p[2])) {
            g_string_append_c(s, '#');
            for (p += 2; g_ascii_isxdigit(*p); p++)
                ;
        } else if (!strncmp(p, "$Lambda$", 8) && g_ascii_isdigit(p[8])) {
            g_string_append(s, "$Lambda");
            for (p += 8; g_ascii_isdigit(*p); p++)
                ;
        } else {
            g_string_append_c(s, *p++);
        }
    }
}

static uint32_t symbol_of(pf_compare *c, side *s, uint64_t method_id)
{
    gpointer v = g_hash_table_lookup(s->sym_of, &method_id);
    if (v)
        return GPOINTER_TO_UINT(v) - 1;
    uint32_t sym = NOT_SELECTED;
    const pf_method_name *m = pf_names_method(s->names, method_id);
    if (m && selected(c, m->class_name)) {
        GString *k = g_string_new(NULL);
        put_normalized_class(k, m->class_name);
        g_string_append_printf(k, ".%s%s", m->name, m->sig);
        gpointer have = g_hash_table_lookup(c->sym_index, k->str);
        if (have) {
            sym = GPOINTER_TO_UINT(have) - 1;
            g_string_free(k, TRUE);
        } else {
            sym = c->sym_name->len;
            char *name = g_string_free(k, FALSE);
            g_ptr_array_add(c->sym_name, name);
            g_hash_table_insert(c->sym_index, name, GUINT_TO_POINTER(sym + 1));
        }
    }
    uint64_t *k = g_new(uint64_t, 1);
    *k = method_id;
    g_hash_table_insert(s->sym_of, k, GUINT_TO_POINTER(sym + 1));
    return sym;
}

pf_compare *pf_compare_new(const char *const *classes, bool all)
{
    pf_compare *c = g_new0(pf_compare, 1);
    if (classes && classes[0]) {
        size_t n = 0;
        while (classes[n])
            n++;
        c->classes = g_new0(char *, n + 1);
        for (size_t i = 0; i < n; i++)
            c->classes[i] = g_strdelimit(g_strdup(classes[i]), ".", '/');
    }
    c->all = all;
    c->sym_index = g_hash_table_new(g_str_hash, g_str_equal);
    c->sym_name = g_ptr_array_new_with_free_func(g_free);
    tally_init(&c->pairs);
    return c;
}

static void side_free(side *s)
{
    if (s->names)
        pf_names_free(s->names);
    if (s->sym_of)
        g_hash_table_destroy(s->sym_of);
    pf_cct_free(s->tree);
    if (s->seq)
        g_hash_table_destroy(s->seq);
}

void pf_compare_free(pf_compare *c)
{
    if (!c)
        return;
    for (int r = 0; r < 2; r++)
        side_free(&c->s[r]);
    if (c->classes)
        g_strfreev(c->classes);
    g_hash_table_destroy(c->sym_index);
    g_ptr_array_free(c->sym_name, TRUE);
    tally_free(&c->pairs);
    if (c->compared) {
        g_hash_table_destroy(c->ctx_index);
        g_array_free(c->ctx_parent, TRUE);
        g_array_free(c->ctx_sym, TRUE);
        g_ptr_array_free(c->thread_name, TRUE);
        tally_free(&c->contexts);
        tally_free(&c->methods);
        tally_free(&c->thread_contexts);
    }
    g_free(c);
}

static int on_event(const fl_event *e, void *ctx)
{
    pf_compare *c = ctx;
    if (pf_seq_sink(e, c->building) < 0)
        return -1;
    if (e->kind != FL_BYTECODE || !e->count)
        return 0;
    side *s = &c->s[c->run];
    uint32_t sym = symbol_of(c, s, e->method_id);
    if (sym == NOT_SELECTED || e->bci < 0 || e->bci > 0xffff)
        return 0;
    uint64_t key = (uint64_t)sym << 16 | (uint32_t)e->bci;
    uint32_t pair = tally_slot(&c->pairs, key);
    g_array_index(c->pairs.ents, tally_ent, pair).n[c->run] += e->count;
    s->bytecodes += e->count;
    if (c->run == 0)
        *(e->flags & FL_F_COMPILED ? &c->compiled : &c->interpreted) += e->count;
    if (c->keep_seq) {
        GArray *q = g_hash_table_lookup(s->seq, GUINT_TO_POINTER(e->tid));
        if (!q) {
            q = g_array_new(FALSE, FALSE, sizeof(uint64_t));
            g_hash_table_insert(s->seq, GUINT_TO_POINTER(e->tid), q);
        }
        uint64_t p = pair;
        for (uint64_t i = 0; i < e->count; i++)
            g_array_append_val(q, p);
    }
    return 0;
}

int pf_compare_read(pf_compare *c, int run, const char *dir, char *err, size_t errlen)
{
    side *s = &c->s[run];
    side_free(s);
    memset(s, 0, sizeof *s);
    s->names = pf_names_load(dir, err, errlen);
    if (!s->names)
        return -1;
    s->sym_of = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->seq = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                   (GDestroyNotify)g_array_unref);
    pf_cct_opts o = pf_cct_default_opts();
    c->building = pf_seq_new(&o);
    c->run = run;
    /* sequences are aligned only against reference bytecodes */
    c->keep_seq = run == 1 || (c->s[1].read && c->s[1].bytecodes);
    if (run == 0)
        c->interpreted = c->compiled = 0;
    pf_flow_stats st;
    int rc = c->building ? pf_flow_source_stats(dir, on_event, c, &st, err, errlen) : -1;
    if (!c->building)
        snprintf(err, errlen, "out of memory");
    pf_cct *t = c->building ? pf_seq_finish(c->building) : NULL;
    c->building = NULL;
    s->tree = t ? pf_cct_finalize(t) : NULL;
    pf_cct_free(t);
    if (!s->tree) {
        if (rc >= 0)
            snprintf(err, errlen, "%s: out of memory building the calling context tree", dir);
        return -1;
    }
    s->traced = st.traced;
    s->read = true;
    return rc < 0 ? 1 : 0;
}

/* ---- the comparison ------------------------------------------------------ */

static uint32_t context_of(pf_compare *c, uint32_t parent, uint32_t sym)
{
    uint64_t key = (uint64_t)parent << 32 | sym;
    gpointer v = g_hash_table_lookup(c->ctx_index, &key);
    if (v)
        return GPOINTER_TO_UINT(v) - 1;
    uint32_t id = c->ctx_parent->len;
    g_array_append_val(c->ctx_parent, parent);
    g_array_append_val(c->ctx_sym, sym);
    uint64_t *k = g_new(uint64_t, 1);
    *k = key;
    g_hash_table_insert(c->ctx_index, k, GUINT_TO_POINTER(id + 1));
    return id;
}

typedef struct troot {
    uint32_t tid;
    int32_t node;
    const char *name;
} troot;

static int by_name_then_tid(const void *a, const void *b)
{
    const troot *x = a, *y = b;
    int d = strcmp(x->name, y->name);
    return d ? d : (x->tid > y->tid) - (x->tid < y->tid);
}

/* Thread key of each thread root of side s: threads of one name are told
 * apart by the order of their ids. */
static void thread_keys(pf_compare *c, const side *s, uint32_t *key_of_node)
{
    const pf_cct *t = s->tree;
    GArray *roots = g_array_new(FALSE, FALSE, sizeof(troot));
    for (int32_t k = t->count ? t->nodes[0].first_child : -1; k >= 0;
         k = t->nodes[k].next_sibling) {
        const char *n = pf_names_thread(s->names, (uint32_t)t->nodes[k].site);
        troot r = { .tid = (uint32_t)t->nodes[k].site, .node = k, .name = n ? n : "?" };
        g_array_append_val(roots, r);
    }
    g_array_sort(roots, by_name_then_tid);
    for (guint i = 0, same = 0; i < roots->len; i++) {
        const troot *r = &g_array_index(roots, troot, i);
        same = i && !strcmp(r->name, g_array_index(roots, troot, i - 1).name) ? same + 1 : 0;
        char *label = same ? g_strdup_printf("%s #%u", r->name, same + 1) : g_strdup(r->name);
        guint id = 0;
        while (id < c->thread_name->len && strcmp(g_ptr_array_index(c->thread_name, id), label))
            id++;
        if (id == c->thread_name->len)
            g_ptr_array_add(c->thread_name, label);
        else
            g_free(label);
        key_of_node[r->node] = id;
    }
    g_array_free(roots, TRUE);
}

static void compare_side(pf_compare *c, int run)
{
    side *s = &c->s[run];
    const pf_cct *t = s->tree;
    uint32_t *ctx = g_new0(uint32_t, t->count + 1);
    uint32_t *thread = g_new0(uint32_t, t->count + 1);
    thread_keys(c, s, thread);
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        if (n->method == PF_NO_METHOD) {   /* a thread root */
            ctx[i] = 0;
            continue;
        }
        thread[i] = thread[n->parent];
        uint32_t sym = symbol_of(c, s, n->method);
        if (sym == NOT_SELECTED) {
            ctx[i] = ctx[n->parent];
            continue;
        }
        ctx[i] = context_of(c, ctx[n->parent], sym);
        tally_add(&c->contexts, ctx[i], run, n->calls);
        tally_add(&c->methods, sym, run, n->calls);
        tally_add(&c->thread_contexts, (uint64_t)thread[i] << 32 | ctx[i], run, n->calls);
    }
    g_free(ctx);
    g_free(thread);
}

static void compare(pf_compare *c)
{
    if (c->compared)
        return;
    c->compared = true;
    c->ctx_index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    c->ctx_parent = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    c->ctx_sym = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    uint32_t none = NOT_SELECTED;
    g_array_append_val(c->ctx_parent, none);
    g_array_append_val(c->ctx_sym, none);
    c->thread_name = g_ptr_array_new_with_free_func(g_free);
    tally_init(&c->contexts);
    tally_init(&c->methods);
    tally_init(&c->thread_contexts);
    for (int r = 0; r < 2; r++)
        if (c->s[r].read)
            compare_side(c, r);
}

static GArray *longest(const side *s)
{
    GHashTableIter it;
    gpointer k, v;
    GArray *best = NULL;
    guint best_tid = 0;
    g_hash_table_iter_init(&it, s->seq);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        GArray *a = v;
        guint tid = GPOINTER_TO_UINT(k);
        if (!best || a->len > best->len || (a->len == best->len && tid < best_tid)) {
            best = a;
            best_tid = tid;
        }
    }
    return best;
}

void pf_compare_result_get(pf_compare *c, pf_compare_result *r)
{
    compare(c);
    memset(r, 0, sizeof *r);
    r->contexts = tally_agreement(&c->contexts);
    r->methods = tally_agreement(&c->methods);
    r->bytecodes = tally_agreement(&c->pairs);
    r->have_bytecodes = c->s[1].bytecodes > 0;
    r->interpreted = c->interpreted;
    r->compiled = c->compiled;
    r->traced_is_reference = c->s[0].read && !c->s[0].traced;
    r->reference_is_traced = c->s[1].read && c->s[1].traced;
    if (r->have_bytecodes) {
        GArray *a = longest(&c->s[0]), *b = longest(&c->s[1]);
        r->seq_len[0] = a ? a->len : 0;
        r->seq_len[1] = b ? b->len : 0;
        if (a && b)
            r->seq_matched = seq_aligned((const uint64_t *)(void *)a->data, a->len,
                                         (const uint64_t *)(void *)b->data, b->len, NULL);
    }
}

/* ---- the report ---------------------------------------------------------- */

typedef struct diff_ent {
    uint32_t i;
    uint64_t d;
} diff_ent;

static int by_diff(const void *a, const void *b)
{
    const diff_ent *x = a, *y = b;
    return x->d < y->d ? 1 : x->d > y->d ? -1 : (x->i > y->i) - (x->i < y->i);
}

/* The entries of t that differ, largest difference first (at most n). */
static GArray *worst_of(const tally *t, int n)
{
    GArray *w = g_array_new(FALSE, FALSE, sizeof(diff_ent));
    for (guint i = 0; i < t->ents->len; i++) {
        const tally_ent *e = &g_array_index(t->ents, tally_ent, i);
        if (e->n[0] != e->n[1]) {
            diff_ent d = { i, e->n[0] > e->n[1] ? e->n[0] - e->n[1] : e->n[1] - e->n[0] };
            g_array_append_val(w, d);
        }
    }
    g_array_sort(w, by_diff);
    if (n >= 0 && w->len > (guint)n)
        g_array_set_size(w, (guint)n);
    return w;
}

/* "pkg/Cls.name(sig)" -> "Cls.name" */
static void put_short(GString *s, const char *sym)
{
    const char *paren = strchr(sym, '(');
    size_t end = paren ? (size_t)(paren - sym) : strlen(sym);
    size_t start = 0;
    for (size_t i = 0; i < end; i++)
        if (sym[i] == '/')
            start = i + 1;
    g_string_append_len(s, sym + start, (gssize)(end - start));
}

#define PATH_HEAD 2              /* runs of one method a long path prints first */
#define PATH_TAIL 6              /* ... and last */

/* The context's path from the root, repeated frames as "m^k"; unless full,
 * a long one's first PATH_HEAD and last PATH_TAIL runs. */
static char *path_str(const pf_compare *c, uint32_t ctx, bool full)
{
    GArray *syms = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    for (uint32_t k = ctx; k && k != NOT_SELECTED; k = g_array_index(c->ctx_parent, uint32_t, k))
        g_array_prepend_val(syms, g_array_index(c->ctx_sym, uint32_t, k));
    GArray *runs = g_array_new(FALSE, FALSE, sizeof(uint64_t));   /* sym << 32 | count */
    for (guint i = 0; i < syms->len; i++) {
        uint32_t sym = g_array_index(syms, uint32_t, i);
        uint64_t *last = runs->len ? &g_array_index(runs, uint64_t, runs->len - 1) : NULL;
        if (last && *last >> 32 == sym) {
            (*last)++;
        } else {
            uint64_t r = (uint64_t)sym << 32 | 1;
            g_array_append_val(runs, r);
        }
    }
    GString *s = g_string_new(NULL);
    bool cut = !full && runs->len > PATH_HEAD + PATH_TAIL;
    for (guint i = 0; i < runs->len; i++) {
        if (cut && i >= PATH_HEAD && i < runs->len - PATH_TAIL) {
            if (i == PATH_HEAD)
                g_string_append(s, " > ...");
            continue;
        }
        uint64_t r = g_array_index(runs, uint64_t, i);
        if (i)
            g_string_append(s, " > ");
        put_short(s, g_ptr_array_index(c->sym_name, r >> 32));
        if ((uint32_t)r > 1)
            g_string_append_printf(s, "^%u", (uint32_t)r);
    }
    g_array_free(syms, TRUE);
    g_array_free(runs, TRUE);
    return g_string_free(s, FALSE);
}

static char *pair_str(const pf_compare *c, uint64_t key)
{
    return g_strdup_printf("%s bci %u", (const char *)g_ptr_array_index(c->sym_name, key >> 16),
                           (unsigned)(key & 0xffff));
}

static char *key_str(const pf_compare *c, int measure, uint64_t key, bool full)
{
    switch (measure) {
    case 0: return path_str(c, (uint32_t)key, full);
    case 1: return g_strdup(g_ptr_array_index(c->sym_name, key));
    default: return pair_str(c, key);
    }
}

static void print_agreement_json(json_w *j, const char *k, const pf_agreement *a)
{
    json_key(j, k);
    json_obj(j);
    json_kdbl(j, "agreement_pct", pf_agreement_pct(a));
    json_ku64(j, "traced", a->total[0]);
    json_ku64(j, "reference", a->total[1]);
    json_ku64(j, "keys_traced", a->keys[0]);
    json_ku64(j, "keys_reference", a->keys[1]);
    json_end(j);
}

static void print_worst_json(json_w *j, const pf_compare *c, const char *k, const tally *t,
                             int measure, int n)
{
    GArray *w = worst_of(t, n);
    json_key(j, k);
    json_arr(j);
    for (guint i = 0; i < w->len; i++) {
        const tally_ent *e = &g_array_index(t->ents, tally_ent, g_array_index(w, diff_ent, i).i);
        char *name = key_str(c, measure, e->key, true);
        json_obj(j);
        json_kstr(j, "key", name);
        json_ku64(j, "traced", e->n[0]);
        json_ku64(j, "reference", e->n[1]);
        json_end(j);
        g_free(name);
    }
    json_end(j);
    g_array_free(w, TRUE);
}

static void print_worst_text(FILE *out, const pf_compare *c, const tally *t, int measure, int n)
{
    GArray *w = worst_of(t, n);
    for (guint i = 0; i < w->len; i++) {
        const tally_ent *e = &g_array_index(t->ents, tally_ent, g_array_index(w, diff_ent, i).i);
        char *name = key_str(c, measure, e->key, false);
        fprintf(out, "  %12" PRIu64 " %12" PRIu64 "  %s\n", e->n[0], e->n[1], name);
        g_free(name);
    }
    g_array_free(w, TRUE);
}

/* Per thread: the calls per context of that thread alone. */
static GArray *per_thread(const pf_compare *c)
{
    GArray *v = g_array_new(FALSE, TRUE, sizeof(pf_agreement));
    g_array_set_size(v, c->thread_name->len);
    for (guint i = 0; i < c->thread_contexts.ents->len; i++) {
        const tally_ent *e = &g_array_index(c->thread_contexts.ents, tally_ent, i);
        pf_agreement *a = &g_array_index(v, pf_agreement, e->key >> 32);
        a->min_sum += MIN(e->n[0], e->n[1]);
        a->max_sum += MAX(e->n[0], e->n[1]);
        for (int r = 0; r < 2; r++) {
            a->total[r] += e->n[r];
            a->keys[r] += e->n[r] != 0;
        }
    }
    return v;
}

static double compiled_pct(const pf_compare_result *r, const pf_compare *c)
{
    if (r->have_bytecodes) {
        uint64_t ref = c->s[1].bytecodes;
        return r->interpreted >= ref ? 0.0 : 100.0 * (double)(ref - r->interpreted) / (double)ref;
    }
    uint64_t all = r->interpreted + r->compiled;
    return all ? 100.0 * (double)r->compiled / (double)all : 0.0;
}

void pf_compare_print(pf_compare *c, FILE *out, bool json, int worst)
{
    pf_compare_result r;
    pf_compare_result_get(c, &r);
    GArray *threads = per_thread(c);
    uint64_t longer = MAX(r.seq_len[0], r.seq_len[1]);
    double seq_pct = longer ? 100.0 * (double)r.seq_matched / (double)longer : 100.0;
    if (json) {
        json_w j;
        json_init(&j, out, false);
        json_obj(&j);
        print_agreement_json(&j, "contexts", &r.contexts);
        print_agreement_json(&j, "methods", &r.methods);
        if (r.have_bytecodes) {
            print_agreement_json(&j, "bytecodes", &r.bytecodes);
            json_key(&j, "sequence");
            json_obj(&j);
            json_kdbl(&j, "agreement_pct", seq_pct);
            json_ku64(&j, "matched", r.seq_matched);
            json_ku64(&j, "traced", r.seq_len[0]);
            json_ku64(&j, "reference", r.seq_len[1]);
            json_end(&j);
        } else {
            json_key(&j, "bytecodes");
            json_null(&j);
        }
        json_key(&j, "compiled");
        json_obj(&j);
        json_kdbl(&j, "share_pct", compiled_pct(&r, c));
        json_kstr(&j, "by", r.have_bytecodes ? "reference" : "trace");
        json_ku64(&j, "interpreted", r.interpreted);
        json_ku64(&j, "compiled", r.compiled);
        json_end(&j);
        json_key(&j, "threads");
        json_arr(&j);
        for (guint i = 0; i < threads->len; i++) {
            const pf_agreement *a = &g_array_index(threads, pf_agreement, i);
            if (!a->max_sum)
                continue;
            json_obj(&j);
            json_kstr(&j, "thread", g_ptr_array_index(c->thread_name, i));
            json_kdbl(&j, "agreement_pct", pf_agreement_pct(a));
            json_ku64(&j, "traced", a->total[0]);
            json_ku64(&j, "reference", a->total[1]);
            json_end(&j);
        }
        json_end(&j);
        print_worst_json(&j, c, "worst_contexts", &c->contexts, 0, worst);
        print_worst_json(&j, c, "worst_methods", &c->methods, 1, worst);
        if (r.have_bytecodes)
            print_worst_json(&j, c, "worst_bytecodes", &c->pairs, 2, worst);
        json_end(&j);
        json_finish(&j);
    } else {
        fprintf(out, "calls per context   %7.3f%%  (%" PRIu64 " traced, %" PRIu64
                     " reference; %u and %u contexts)\n",
                pf_agreement_pct(&r.contexts), r.contexts.total[0], r.contexts.total[1],
                r.contexts.keys[0], r.contexts.keys[1]);
        fprintf(out, "calls per method    %7.3f%%  (%u and %u methods)\n",
                pf_agreement_pct(&r.methods), r.methods.keys[0], r.methods.keys[1]);
        if (r.have_bytecodes) {
            fprintf(out, "bytecodes per bci   %7.3f%%  (%" PRIu64 " traced, %" PRIu64
                         " reference)\n",
                    pf_agreement_pct(&r.bytecodes), r.bytecodes.total[0], r.bytecodes.total[1]);
            fprintf(out, "aligned sequence    %7.3f%%  (%" PRIu64 " of %" PRIu64
                         " bytecodes of the busiest thread)\n",
                    seq_pct, r.seq_matched, longer);
            fprintf(out, "ran compiled        %7.3f%%  of the reference's bytecodes (%" PRIu64
                         " interpreted in the trace)\n",
                    compiled_pct(&r, c), r.interpreted);
        } else {
            fprintf(out, "bytecodes           (the reference has none: record it with -Xint "
                         "to compare them)\n");
            fprintf(out, "ran compiled        %7.3f%%  of the traced bytecodes (%" PRIu64
                         " interpreted, %" PRIu64 " compiled)\n",
                    compiled_pct(&r, c), r.interpreted, r.compiled);
        }
        fprintf(out, "per thread:\n");
        for (guint i = 0; i < threads->len; i++) {
            const pf_agreement *a = &g_array_index(threads, pf_agreement, i);
            if (a->max_sum)
                fprintf(out, "  %7.3f%%  %" PRIu64 " traced, %" PRIu64 " reference calls  %s\n",
                        pf_agreement_pct(a), a->total[0], a->total[1],
                        (const char *)g_ptr_array_index(c->thread_name, i));
        }
        if (worst > 0) {
            fprintf(out, "worst contexts:          traced    reference\n");
            print_worst_text(out, c, &c->contexts, 0, worst);
            fprintf(out, "worst methods:           traced    reference\n");
            print_worst_text(out, c, &c->methods, 1, worst);
            if (r.have_bytecodes) {
                fprintf(out, "worst bytecodes:         traced    reference\n");
                print_worst_text(out, c, &c->pairs, 2, worst);
            }
        }
    }
    g_array_free(threads, TRUE);
}
