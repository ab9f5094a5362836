/* flowcmp: compares the bytecodes of a traced run's reconstructed flow with
 * the agent's reference-mode account of the same deterministic program.
 *
 *   flowcmp TRACED.DIR REFERENCE.DIR [--class NAME]... [--worst N]
 *           [--traced-cct FILE] [--reference-cct FILE]
 *
 * Both flows come from pf_flow_source (profile/source.h), so the traced one is
 * exactly what the profiles see. Compared are the bytecodes of the selected
 * methods: with --class, the classes named (internal form, "Dispatch") and
 * their nested classes; without, every class outside the JDK (the
 * application and its libraries). Methods are matched by name, since the
 * agent's method ids differ between runs; lambda proxy classes, named after
 * their address, are matched without it.
 *
 * Printed (key=value lines, for scripts and people):
 *   - per-(method, bci) execution counts over all threads: the sum of
 *     absolute differences over the reference total;
 *   - the aligned sequence agreement of the thread that ran most of the
 *     selected bytecodes in each run: bytecodes matched by seq_aligned
 *     (common/seqalign.h: a greedy alignment that resynchronizes where the
 *     next 8 bytecodes agree, never counting more than an LCS would), over
 *     the longer sequence;
 *   - the methods and bcis whose counts differ most (--worst N, default 10).
 * With --traced-cct / --reference-cct, that run's calling context tree is
 * also written, as `ptdecode export --format cct-json` writes it, built from
 * the same pass over the flow (a workload's flow is read once, not twice).
 * Exit status 0, or 2 when a flow cannot be read. */
#include <glib.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/seqalign.h"
#include "profile/cct.h"
#include "profile/export.h"
#include "profile/names.h"
#include "profile/source.h"


typedef struct side {
    GHashTable *seq;           /* tid -> GArray of uint64_t (pair index) */
    uint64_t total;            /* selected bytecodes */
    uint64_t all;              /* all bytecodes */
} side;

typedef struct cmp {
    char **classes;            /* --class, NULL-terminated, or NULL: not the JDK */
    GHashTable *method_sym;    /* normalized name -> symbol + 1 */
    GPtrArray *sym_name;       /* symbol -> name */
    GHashTable *pair_of;       /* (symbol << 16 | bci) -> pair + 1 */
    GArray *pair_key;          /* pair -> key */
    GArray *count[2];          /* pair -> count, per run */
    /* per run: method id -> symbol + 1 (0 unknown, G_MAXUINT32 not selected) */
    GHashTable *id_sym;
    pf_names *names;
    pf_seq *tree;              /* the calling context tree being built, or NULL */
    side *cur;
    int run;
} cmp;

static const char *const jdk_prefixes[] = {
    "java/", "javax/", "jdk/", "sun/", "com/sun/", "org/w3c/", "org/xml/", "org/ietf/",
    "org/jcp/", NULL,
};

static bool selected(const cmp *c, const char *cls)
{
    if (c->classes) {
        for (char **k = c->classes; *k; k++) {
            size_t n = strlen(*k);
            if (!strncmp(cls, *k, n) && (cls[n] == '\0' || cls[n] == '$'))
                return true;
        }
        return false;
    }
    for (const char *const *p = jdk_prefixes; *p; p++)
        if (g_str_has_prefix(cls, *p))
            return false;
    return true;
}

/* "Foo$$Lambda$12/0x0000000800c01234" and "Foo$$Lambda/0x..." -> "Foo$$Lambda" */
static char *normalized(const char *cls, const char *name, const char *sig)
{
    GString *s = g_string_new(NULL);
    const char *l = strstr(cls, "$$Lambda");
    if (l) {
        const char *e = l + 8;
        if (*e == '$')
            for (e++; g_ascii_isdigit(*e); e++)
                ;
        if ((*e == '/' || *e == '.') && e[1] == '0' && e[2] == 'x') {
            g_string_append_len(s, cls, l + 8 - cls);
            for (e += 3; g_ascii_isxdigit(*e); e++)
                ;
            g_string_append(s, e);
        } else {
            g_string_append(s, cls);
        }
    } else {
        g_string_append(s, cls);
    }
    g_string_append_printf(s, ".%s%s", name, sig);
    return g_string_free(s, FALSE);
}

static uint32_t symbol_of(cmp *c, uint64_t method_id)
{
    gpointer v = g_hash_table_lookup(c->id_sym, &method_id);
    if (v)
        return GPOINTER_TO_UINT(v);
    uint32_t sym = G_MAXUINT32;
    const pf_method_name *m = pf_names_method(c->names, method_id);
    if (m && selected(c, m->class_name)) {
        char *key = normalized(m->class_name, m->name, m->sig);
        gpointer s = g_hash_table_lookup(c->method_sym, key);
        if (s) {
            g_free(key);
            sym = GPOINTER_TO_UINT(s);
        } else {
            g_ptr_array_add(c->sym_name, key);
            sym = c->sym_name->len;
            g_hash_table_insert(c->method_sym, key, GUINT_TO_POINTER(sym));
        }
    }
    uint64_t *k = g_new(uint64_t, 1);
    *k = method_id;
    g_hash_table_insert(c->id_sym, k, GUINT_TO_POINTER(sym));
    return sym;
}

static uint32_t pair_of(cmp *c, uint32_t sym, int32_t bci)
{
    uint64_t key = (uint64_t)sym << 16 | (uint16_t)bci;
    gpointer v = g_hash_table_lookup(c->pair_of, &key);
    if (v)
        return GPOINTER_TO_UINT(v) - 1;
    uint32_t p = c->pair_key->len;
    g_array_append_val(c->pair_key, key);
    uint64_t zero = 0;
    g_array_append_val(c->count[0], zero);
    g_array_append_val(c->count[1], zero);
    uint64_t *k = g_new(uint64_t, 1);
    *k = key;
    g_hash_table_insert(c->pair_of, k, GUINT_TO_POINTER(p + 1));
    return p;
}

static int on_event(const fl_event *e, void *ctx)
{
    cmp *c = ctx;
    if (c->tree && pf_seq_sink(e, c->tree) < 0)
        return -1;
    if (e->kind != FL_BYTECODE)
        return 0;
    c->cur->all += e->count;
    uint32_t sym = symbol_of(c, e->method_id);
    if (sym == G_MAXUINT32 || e->bci < 0 || e->bci > 0xffff)
        return 0;
    uint32_t p = pair_of(c, sym - 1, e->bci);
    g_array_index(c->count[c->run], uint64_t, p) += e->count;
    c->cur->total += e->count;
    GArray *seq = g_hash_table_lookup(c->cur->seq, GUINT_TO_POINTER(e->tid));
    if (!seq) {
        seq = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        g_hash_table_insert(c->cur->seq, GUINT_TO_POINTER(e->tid), seq);
    }
    uint64_t sp = p;
    for (uint64_t i = 0; i < e->count && i < 1000000; i++)
        g_array_append_val(seq, sp);
    return 0;
}

/* The finalized tree of c->tree (freed) into path; 0 or -1 (reported). */
static int write_tree(cmp *c, const char *dir, const char *path)
{
    pf_cct *t = pf_seq_finish(c->tree);
    c->tree = NULL;
    pf_cct *fin = t && !t->finalized ? pf_cct_finalize(t) : t;
    if (fin != t)
        pf_cct_free(t);
    if (!fin) {
        fprintf(stderr, "flowcmp: out of memory building the calling context tree of %s\n", dir);
        return -1;
    }
    FILE *out = fopen(path, "w");
    int rc = out ? pf_export_cct_json(out, fin, c->names, dir) : -1;
    if (out && fclose(out) != 0)
        rc = -1;
    if (rc < 0)
        fprintf(stderr, "flowcmp: %s: cannot write the calling context tree\n", path);
    pf_cct_free(fin);
    return rc;
}

static int load(cmp *c, int run, const char *dir, side *s, const char *tree_path)
{
    char err[1024] = "";
    c->names = pf_names_load(dir, err, sizeof err);
    if (!c->names) {
        fprintf(stderr, "flowcmp: %s\n", err);
        return -1;
    }
    if (tree_path) {
        pf_cct_opts opts = pf_cct_default_opts();
        c->tree = pf_seq_new(&opts);
        if (!c->tree) {
            fprintf(stderr, "flowcmp: out of memory\n");
            pf_names_free(c->names);
            return -1;
        }
    }
    c->id_sym = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->seq = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                   (GDestroyNotify)g_array_unref);
    c->cur = s;
    c->run = run;
    int rc = pf_flow_source(dir, on_event, c, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "flowcmp: %s\n", err[0] ? err : "out of memory");
    else if (tree_path)
        rc = write_tree(c, dir, tree_path);
    if (c->tree)
        pf_cct_free(pf_seq_finish(c->tree));
    c->tree = NULL;
    g_hash_table_destroy(c->id_sym);
    pf_names_free(c->names);
    return rc < 0 ? -1 : 0;
}

static GArray *longest(const side *s, uint32_t *tid)
{
    GHashTableIter it;
    gpointer k, v;
    GArray *best = NULL;
    g_hash_table_iter_init(&it, s->seq);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        GArray *a = v;
        if (!best || a->len > best->len || (a->len == best->len && GPOINTER_TO_UINT(k) < *tid)) {
            best = a;
            *tid = GPOINTER_TO_UINT(k);
        }
    }
    return best;
}

typedef struct worst {
    uint32_t pair;
    uint64_t d;
} worst;

static int by_diff(const void *a, const void *b)
{
    const worst *x = a, *y = b;
    return x->d < y->d ? 1 : x->d > y->d ? -1 : (x->pair > y->pair) - (x->pair < y->pair);
}

int main(int argc, char **argv)
{
    cmp c = { 0 };
    GPtrArray *classes = g_ptr_array_new();
    const char *dirs[2] = { NULL, NULL }, *trees[2] = { NULL, NULL };
    int nd = 0, nworst = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--class") && i + 1 < argc) {
            g_ptr_array_add(classes, argv[++i]);
        } else if (!strcmp(argv[i], "--worst") && i + 1 < argc) {
            nworst = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--traced-cct") && i + 1 < argc) {
            trees[0] = argv[++i];
        } else if (!strcmp(argv[i], "--reference-cct") && i + 1 < argc) {
            trees[1] = argv[++i];
        } else if (argv[i][0] != '-' && nd < 2) {
            dirs[nd++] = argv[i];
        } else {
            nd = -1;
            break;
        }
    }
    if (nd != 2) {
        fprintf(stderr, "usage: flowcmp TRACED.DIR REFERENCE.DIR [--class NAME]... [--worst N]\n"
                        "               [--traced-cct FILE] [--reference-cct FILE]\n");
        return 2;
    }
    if (classes->len) {
        g_ptr_array_add(classes, NULL);
        c.classes = (char **)classes->pdata;
    }
    c.method_sym = g_hash_table_new(g_str_hash, g_str_equal);
    c.sym_name = g_ptr_array_new_with_free_func(g_free);
    c.pair_of = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    c.pair_key = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    c.count[0] = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    c.count[1] = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    side s[2] = { 0 };
    if (load(&c, 0, dirs[0], &s[0], trees[0]) || load(&c, 1, dirs[1], &s[1], trees[1]))
        return 2;

    uint64_t diff = 0;
    worst *w = g_new(worst, c.pair_key->len + 1);
    for (uint32_t p = 0; p < c.pair_key->len; p++) {
        uint64_t x = g_array_index(c.count[0], uint64_t, p);
        uint64_t y = g_array_index(c.count[1], uint64_t, p);
        w[p] = (worst){ p, x > y ? x - y : y - x };
        diff += w[p].d;
    }
    printf("bytecodes_traced=%" PRIu64 " selected_traced=%" PRIu64 "\n", s[0].all, s[0].total);
    printf("bytecodes_reference=%" PRIu64 " selected_reference=%" PRIu64 "\n", s[1].all,
           s[1].total);
    printf("methods=%u pairs=%u\n", c.sym_name->len, c.pair_key->len);
    printf("count_difference=%" PRIu64 " count_difference_pct=%.4f\n", diff,
           s[1].total ? 100.0 * diff / s[1].total : 0.0);
    uint32_t ta = 0, tb = 0;
    GArray *a = longest(&s[0], &ta), *b = longest(&s[1], &tb);
    if (a && b) {
        uint64_t same = seq_aligned((const uint64_t *)a->data, a->len,
                                    (const uint64_t *)b->data, b->len, NULL);
        size_t len = MAX(a->len, b->len);
        printf("sequence_tid_traced=%u sequence_tid_reference=%u sequence_traced=%u "
               "sequence_reference=%u\n", ta, tb, a->len, b->len);
        printf("sequence_matched=%" PRIu64 " sequence_agreement_pct=%.4f\n", same,
               len ? 100.0 * same / len : 100.0);
    } else {
        printf("sequence_agreement_pct=nan\n");
    }
    qsort(w, c.pair_key->len, sizeof *w, by_diff);
    for (int k = 0; k < nworst && (uint32_t)k < c.pair_key->len && w[k].d; k++) {
        uint64_t key = g_array_index(c.pair_key, uint64_t, w[k].pair);
        printf("worst %s bci=%u traced=%" PRIu64 " reference=%" PRIu64 "\n",
               (const char *)g_ptr_array_index(c.sym_name, key >> 16), (unsigned)(key & 0xffff),
               g_array_index(c.count[0], uint64_t, w[k].pair),
               g_array_index(c.count[1], uint64_t, w[k].pair));
    }
    g_free(w);
    for (int r = 0; r < 2; r++)
        g_hash_table_destroy(s[r].seq);
    g_array_free(c.pair_key, TRUE);
    g_array_free(c.count[0], TRUE);
    g_array_free(c.count[1], TRUE);
    g_hash_table_destroy(c.pair_of);
    g_hash_table_destroy(c.method_sym);
    g_ptr_array_free(c.sym_name, TRUE);
    g_ptr_array_free(classes, TRUE);
    return 0;
}
