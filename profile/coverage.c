/* Line and branch coverage (see coverage.h). */
#include "profile/coverage.h"
#include "profile/names.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

/* What ran of one method: per instruction and per CFG edge. */
typedef struct mcov {
    const rc_method *m;
    const rc_cfg *g;
    uint64_t *insn;            /* executions per instruction index */
    uint64_t *edge;            /* branch outcomes per edge index */
    uint64_t calls;
    bool ran;
} mcov;

/* A thread's last bytecode when it was a branch whose outcome is pending. */
typedef struct tstate {
    mcov *mc;                  /* NULL: nothing pending */
    uint32_t insn;
} tstate;

struct pf_cov {
    rc_program *prog;
    bool include[FL_ORIGIN_COUNT];
    mcov **by_index;           /* by rc_method index, created on first use */
    size_t nmethods;
    GHashTable *threads;       /* tid -> tstate */
    uint32_t last_tid;
    tstate *last;
    uint64_t last_id;          /* memo of the last method looked up */
    mcov *last_mc;
    uint64_t unknown;
};

static bool is_branch(uint8_t op)
{
    return (op >= 0x99 && op <= 0xa6)    /* ifeq .. if_acmpne */
           || op == 0xc6 || op == 0xc7   /* ifnull, ifnonnull */
           || op == 0xaa || op == 0xab;  /* tableswitch, lookupswitch */
}

static bool is_switch(uint8_t op)
{
    return op == 0xaa || op == 0xab;
}

pf_cov *pf_cov_new(rc_program *prog, const bool *include)
{
    pf_cov *c = g_new0(pf_cov, 1);
    c->prog = prog;
    for (int o = 0; o < FL_ORIGIN_COUNT; o++)
        c->include[o] = include ? include[o] : true;
    c->nmethods = rc_program_nmethods(prog);
    c->by_index = g_new0(mcov *, c->nmethods ? c->nmethods : 1);
    c->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    return c;
}

static void mcov_free(mcov *mc)
{
    if (!mc)
        return;
    g_free(mc->insn);
    g_free(mc->edge);
    g_free(mc);
}

void pf_cov_free(pf_cov *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nmethods; i++)
        mcov_free(c->by_index[i]);
    g_free(c->by_index);
    g_hash_table_destroy(c->threads);
    g_free(c);
}

/* The counters of a method with code, created when first needed; NULL for
 * methods without code or a usable CFG. */
static mcov *mcov_of(pf_cov *c, const rc_method *m)
{
    if (!m || !m->code || m->index >= c->nmethods)
        return NULL;
    mcov *mc = c->by_index[m->index];
    if (mc)
        return mc->g ? mc : NULL;
    mc = g_new0(mcov, 1);
    mc->m = m;
    mc->g = rc_cfg_get(c->prog, m);
    if (mc->g) {
        mc->insn = g_new0(uint64_t, mc->g->ninsn ? mc->g->ninsn : 1);
        uint32_t nedges = mc->g->first[mc->g->ninsn];
        mc->edge = g_new0(uint64_t, nedges ? nedges : 1);
    }
    c->by_index[m->index] = mc;
    return mc->g ? mc : NULL;
}

static mcov *lookup(pf_cov *c, uint64_t id)
{
    if (id && id == c->last_id)
        return c->last_mc;
    mcov *mc = id ? mcov_of(c, rc_method_by_id(c->prog, id)) : NULL;
    c->last_id = id;
    c->last_mc = mc;
    return mc;
}

int pf_cov_sink(const fl_event *ev, void *vc)
{
    pf_cov *c = vc;
    tstate *st = c->last && c->last_tid == ev->tid ? c->last
                 : g_hash_table_lookup(c->threads, GUINT_TO_POINTER(ev->tid));
    if (!st) {
        st = g_new0(tstate, 1);
        g_hash_table_insert(c->threads, GUINT_TO_POINTER(ev->tid), st);
    }
    c->last = st;
    c->last_tid = ev->tid;
    bool counted = (unsigned)ev->origin < FL_ORIGIN_COUNT && c->include[ev->origin];
    if (ev->kind != FL_BYTECODE) {
        /* a call, return or new segment between a branch and the next
         * bytecode: where the branch went is not known */
        st->mc = NULL;
        if (ev->kind == FL_CALL && counted) {
            mcov *mc = lookup(c, ev->method_id);
            if (mc) {
                mc->ran = true;
                if (!(ev->flags & FL_F_CONTEXT))
                    mc->calls++;
            }
        }
        return 0;
    }
    mcov *mc = lookup(c, ev->method_id);
    int64_t idx = mc && ev->bci >= 0 ? rc_cfg_index(mc->g, (uint32_t)ev->bci) : -1;
    if (idx < 0) {
        c->unknown++;
        st->mc = NULL;
        return 0;
    }
    const rc_cfg *g = mc->g;
    if (counted) {
        mc->insn[idx] += ev->count;
        mc->ran = true;
    }
    if (st->mc == mc && counted) {
        /* the first non-exception edge of the pending branch leading here */
        for (uint32_t e = g->first[st->insn]; e < g->first[st->insn + 1]; e++)
            if (g->edge[e].kind != RC_EDGE_EXCEPTION && g->edge[e].to == (uint32_t)idx) {
                mc->edge[e]++;
                break;
            }
    }
    /* a summarized run (count > 1) has no single successor */
    if (is_branch(g->op[idx]) && ev->count == 1) {
        st->mc = mc;
        st->insn = (uint32_t)idx;
    } else {
        st->mc = NULL;
    }
    return 0;
}

/* ---- writing ------------------------------------------------------------- */

/* "java/lang/String" + "String.java" -> "java/lang/String.java"; without a
 * SourceFile attribute, the outer class's name + ".java". */
/* Names come from class files, which may be hostile: a control character
 * would start a new lcov record, and a ".." component would send genhtml
 * outside the source directory. */
static void sanitize_path(char *s)
{
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == ',')
            *p = '_';
    /* every "." or ".." component (also at the start or end) becomes "_" */
    for (char *c = s; *c;) {
        size_t len = strcspn(c, "/");
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            memset(c, '_', len);
        c += len;
        if (*c == '/')
            c++;
    }
    if (s[0] == '/')
        s[0] = '_';
}

bool pf_cov_jdk_class(const char *klass)
{
    /* the packages of the JDK's own modules */
    static const char *const jdk[] = { "java/", "javax/", "jdk/", "sun/", "com/sun/",
                                       "org/ietf/jgss/", "org/w3c/dom/", "org/xml/sax/",
                                       "org/jcp/xml/" };
    for (size_t i = 0; i < sizeof jdk / sizeof jdk[0]; i++)
        if (!strncmp(klass, jdk[i], strlen(jdk[i])))
            return true;
    return false;
}

char *pf_cov_source_path(const rc_method *m)
{
    const char *slash = strrchr(m->klass, '/');
    size_t pkg = slash ? (size_t)(slash - m->klass) + 1 : 0;
    char *path;
    if (m->source && *m->source && !strchr(m->source, '/')) {
        path = g_strdup_printf("%.*s%s", (int)pkg, m->klass, m->source);
    } else {
        const char *simple = m->klass + pkg;
        size_t outer = strcspn(simple, "$");
        path = g_strdup_printf("%.*s%.*s.java", (int)pkg, m->klass, (int)outer, simple);
    }
    sanitize_path(path);
    return path;
}

/* lcov separates fields with commas and records with line ends: a method's
 * name in JVM form ("pkg.Cls.name(I)V") has neither unless the class file
 * is hostile. */
static char *function_name(const rc_method *m)
{
    char *s = g_strdup_printf("%s.%s%s", m->klass, m->name, m->sig);
    for (char *p = s; *p && *p != '('; p++)
        if (*p == '/')
            *p = '.';
    for (char *p = s; *p; p++)
        if (*p == ',' || (unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '_';
    return s;
}

static uint32_t first_line(const rc_method *m)
{
    uint32_t best = 0;
    for (uint32_t i = 0; i < m->nlines; i++)
        if (m->lines[i].line && (!best || m->lines[i].line < best))
            best = m->lines[i].line;
    return best;
}

typedef struct file_methods {
    char *path;
    GArray *methods;           /* const rc_method * */
} file_methods;

static int file_cmp(const void *a, const void *b)
{
    return strcmp((*(file_methods *const *)a)->path, (*(file_methods *const *)b)->path);
}

static int method_cmp(const void *a, const void *b)
{
    const rc_method *x = *(const rc_method *const *)a, *y = *(const rc_method *const *)b;
    uint32_t lx = first_line(x), ly = first_line(y);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    int r = strcmp(x->name, y->name);
    return r ? r : strcmp(x->sig, y->sig);
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void file_free(gpointer p)
{
    file_methods *f = p;
    g_free(f->path);
    g_array_free(f->methods, TRUE);
    g_free(f);
}

/* One SF record. */
static void write_file(FILE *out, pf_cov *c, const file_methods *f, pf_cov_totals *t)
{
    fprintf(out, "SF:%s\n", f->path);
    const rc_method **ms = (const rc_method **)f->methods->data;
    guint n = f->methods->len;
    uint64_t fnf = 0, fnh = 0;
    for (guint i = 0; i < n; i++) {
        char *name = function_name(ms[i]);
        fprintf(out, "FN:%" PRIu32 ",%s\n", first_line(ms[i]), name);
        g_free(name);
    }
    for (guint i = 0; i < n; i++) {
        mcov *mc = mcov_of(c, ms[i]);
        uint64_t hits = mc ? (mc->calls ? mc->calls : mc->ran ? 1 : 0) : 0;
        char *name = function_name(ms[i]);
        fprintf(out, "FNDA:%" PRIu64 ",%s\n", hits, name);
        g_free(name);
        fnf++;
        fnh += hits > 0;
    }
    fprintf(out, "FNF:%" PRIu64 "\nFNH:%" PRIu64 "\n", fnf, fnh);

    /* branches, in method then instruction order; block numbers count the
     * branch instructions of the file so that (line, block) is unique */
    uint64_t brf = 0, brh = 0, block = 0;
    GHashTable *lines = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    for (guint i = 0; i < n; i++) {
        mcov *mc = mcov_of(c, ms[i]);
        if (!mc)
            continue;
        const rc_cfg *g = mc->g;
        for (uint32_t k = 0; k < g->ninsn; k++) {
            uint32_t line = rc_line_of(ms[i], g->bci[k]);
            if (!line)
                continue;
            uint64_t *h = g_hash_table_lookup(lines, GUINT_TO_POINTER(line));
            if (!h) {
                h = g_new0(uint64_t, 1);
                g_hash_table_insert(lines, GUINT_TO_POINTER(line), h);
            }
            if (mc->insn[k] > *h)
                *h = mc->insn[k];
            if (!is_branch(g->op[k]))
                continue;
            /* distinct successors: for an if the jump, then the fall-through */
            /* (a switch with more distinct targets reports its first 1024) */
            uint32_t targets[1024];
            uint64_t counts[1024];
            uint32_t nt = 0;
            for (int pass = 0; pass < 2; pass++) {
                for (uint32_t e = g->first[k]; e < g->first[k + 1]; e++) {
                    uint8_t kind = g->edge[e].kind;
                    bool want = is_switch(g->op[k]) ? kind == RC_EDGE_SWITCH && pass == 0
                                : pass == 0 ? kind == RC_EDGE_TAKEN : kind == RC_EDGE_NEXT;
                    if (!want)
                        continue;
                    uint32_t j = 0;
                    while (j < nt && targets[j] != g->edge[e].to)
                        j++;
                    if (j == nt) {
                        if (nt == sizeof targets / sizeof targets[0])
                            continue;
                        targets[nt] = g->edge[e].to;
                        counts[nt++] = 0;
                    }
                    counts[j] += mc->edge[e];
                }
            }
            for (uint32_t j = 0; j < nt; j++) {
                if (mc->insn[k])
                    fprintf(out, "BRDA:%" PRIu32 ",%" PRIu64 ",%" PRIu32 ",%" PRIu64 "\n", line,
                            block, j, counts[j]);
                else
                    fprintf(out, "BRDA:%" PRIu32 ",%" PRIu64 ",%" PRIu32 ",-\n", line, block, j);
                brf++;
                brh += counts[j] > 0;
            }
            block++;
        }
    }
    fprintf(out, "BRF:%" PRIu64 "\nBRH:%" PRIu64 "\n", brf, brh);

    guint nl = 0;
    uint32_t *keys = g_new(uint32_t, g_hash_table_size(lines) + 1);
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, lines);
    while (g_hash_table_iter_next(&it, &key, &val))
        keys[nl++] = GPOINTER_TO_UINT(key);
    qsort(keys, nl, sizeof *keys, u32_cmp);
    uint64_t lh = 0;
    for (guint i = 0; i < nl; i++) {
        uint64_t h = *(uint64_t *)g_hash_table_lookup(lines, GUINT_TO_POINTER(keys[i]));
        fprintf(out, "DA:%" PRIu32 ",%" PRIu64 "\n", keys[i], h);
        lh += h > 0;
    }
    fprintf(out, "LF:%u\nLH:%" PRIu64 "\nend_of_record\n", nl, lh);
    g_free(keys);
    g_hash_table_destroy(lines);
    t->files++;
    t->functions += fnf;
    t->functions_hit += fnh;
    t->lines += nl;
    t->lines_hit += lh;
    t->branches += brf;
    t->branches_hit += brh;
}

int pf_cov_write_lcov(FILE *out, pf_cov *c, const char *test_name, const char *class_glob,
                      pf_cov_totals *totals)
{
    pf_cov_totals t = { .unknown_events = c->unknown };
    /* the classes that ran (or that the glob selects) */
    GHashTable *classes = g_hash_table_new(g_str_hash, g_str_equal);
    for (size_t i = 0; i < c->nmethods; i++) {
        const rc_method *m = rc_method_at(c->prog, (uint32_t)i);
        if (!m || !m->klass)
            continue;
        bool take = class_glob ? pf_class_pattern_match(class_glob, m->klass)
                               : c->by_index[i] && c->by_index[i]->ran &&
                                 !pf_cov_jdk_class(m->klass);
        if (take)
            g_hash_table_add(classes, (gpointer)m->klass);
    }
    GHashTable *files = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, file_free);
    GPtrArray *list = g_ptr_array_new();
    for (size_t i = 0; i < c->nmethods; i++) {
        const rc_method *m = rc_method_at(c->prog, (uint32_t)i);
        if (!m || !m->klass || !m->code || !m->nlines ||
            !g_hash_table_contains(classes, m->klass))
            continue;
        char *path = pf_cov_source_path(m);
        file_methods *f = g_hash_table_lookup(files, path);
        if (!f) {
            f = g_new0(file_methods, 1);
            f->path = path;
            f->methods = g_array_new(FALSE, FALSE, sizeof(const rc_method *));
            g_hash_table_insert(files, f->path, f);
            g_ptr_array_add(list, f);
        } else {
            g_free(path);
        }
        g_array_append_val(f->methods, m);
    }
    if (list->len > 1)
        qsort(list->pdata, list->len, sizeof(gpointer), file_cmp);
    char *tn = g_strdup(test_name && *test_name ? test_name : "jpt");
    for (char *p = tn; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '_')
            *p = '_';
    fprintf(out, "TN:%s\n", tn);
    g_free(tn);
    for (guint i = 0; i < list->len; i++) {
        file_methods *f = g_ptr_array_index(list, i);
        g_array_sort(f->methods, method_cmp);
        write_file(out, c, f, &t);
    }
    g_ptr_array_free(list, TRUE);
    g_hash_table_destroy(files);
    g_hash_table_destroy(classes);
    if (totals)
        *totals = t;
    return ferror(out) ? -1 : 0;
}
