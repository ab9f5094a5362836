/* End-to-end check of the program loader on a trace recorded from a real
 * JVM: recon_check TRACE_DIR
 * Every METHOD record whose class has a CLASS_FILE must map to a loaded
 * method (with code unless abstract or native); CFGs of every method with
 * code and call targets of every invoke are built; a few known call sites of
 * tests/reconstruct/java/Sample are checked. Prints counts and timings. */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jmeta.h"
#include "common/jmrec.h"
#include "reconstruct/program.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int failures;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "recon_check: FAIL: " __VA_ARGS__);                             \
            fputc('\n', stderr);                                                            \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

/* Whether the call site of m at its first invoke with opcode op targets want. */
#include <stdbool.h>

static bool site_has(rc_program *p, const rc_method *m, uint8_t op, const char *want_klass,
                     const char *want_name)
{
    const rc_cfg *g = rc_cfg_get(p, m);
    if (!g)
        return false;
    for (uint32_t i = 0; i < g->ninsn; i++) {
        if (g->op[i] != op)
            continue;
        const rc_method *const *t;
        bool open;
        size_t n = rc_call_targets(p, m, g->bci[i], &t, &open);
        for (size_t k = 0; k < n; k++)
            if (strcmp(t[k]->klass, want_klass) == 0 && strcmp(t[k]->name, want_name) == 0)
                return true;
    }
    return false;
}

int main(int argc, char **argv)
{
    bool sample = argc == 3 && strcmp(argv[2], "--sample") == 0;
    if (argc != 2 && !sample) {
        fprintf(stderr, "usage: recon_check TRACE_DIR [--sample]\n");
        return 2;
    }
    char err[512];
    double t0 = now();
    rc_program *p = rc_program_load(argv[1], err, sizeof err);
    double t_load = now() - t0;
    if (!p) {
        fprintf(stderr, "recon_check: %s\n", err);
        return 1;
    }
    const char *const *w;
    size_t nw = rc_program_warnings(p, &w);
    for (size_t i = 0; i < nw && i < 20; i++)
        printf("warning: %s\n", w[i]);

    /* Independent reading of the records. */
    char jdir[4096];
    snprintf(jdir, sizeof jdir, "%s/jvm", argv[1]);
    jm_reader *r = jm_reader_open(jdir, err, sizeof err);
    if (!r) {
        fprintf(stderr, "recon_check: %s\n", err);
        return 1;
    }
    GHashTable *with_file = g_hash_table_new(g_direct_hash, g_direct_equal);
    GArray *meths = g_array_new(FALSE, FALSE, sizeof(jm_rec));
    jm_record rec;
    size_t nfiles = 0;
    while (jm_reader_next(r, &rec) == 1) {
        jm_rec m;
        if (jm_parse(&rec, &m, err, sizeof err) < 0)
            continue;
        if (m.type == JM_CLASS_FILE) {
            g_hash_table_add(with_file, GSIZE_TO_POINTER(m.u.class_file.class_id));
            nfiles++;
        } else if (m.type == JM_METHOD) {
            g_array_append_val(meths, m);
        }
    }
    /* Methods the loader reported missing from their class file (added by
     * the JVM after the load hook) are found but have no code. */
    GHashTable *reported = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (size_t i = 0; i < nw; i++) {
        unsigned long long id;
        if (sscanf(w[i], "method id %llx", &id) == 1 && strstr(w[i], "not in the class file"))
            g_hash_table_add(reported, GSIZE_TO_POINTER(id));
    }
    size_t checked = 0, missing = 0, nocode = 0, not_in_file = 0;
    for (guint i = 0; i < meths->len; i++) {
        jm_rec *m = &g_array_index(meths, jm_rec, i);
        if (!g_hash_table_contains(with_file, GSIZE_TO_POINTER(m->u.method.class_id)))
            continue;
        checked++;
        const rc_method *x = rc_method_by_id(p, m->u.method.method_id);
        if (!x) {
            if (missing++ < 10)
                fprintf(stderr, "recon_check: method id %#llx %.*s %.*s%.*s not found\n",
                        (unsigned long long)m->u.method.method_id,
                        (int)m->u.method.class_sig.len, (const char *)m->u.method.class_sig.p,
                        (int)m->u.method.name.len, (const char *)m->u.method.name.p,
                        (int)m->u.method.sig.len, (const char *)m->u.method.sig.p);
            continue;
        }
        bool needs_code = !(m->u.method.modifiers & (0x0400 | 0x0100));
        if (g_hash_table_contains(reported, GSIZE_TO_POINTER(m->u.method.method_id))) {
            not_in_file++;
            continue;
        }
        if (needs_code && !x->code && nocode++ < 10)
            fprintf(stderr, "recon_check: %s.%s%s has no code\n", x->klass, x->name, x->sig);
    }
    CHECK(missing == 0, "%zu of %zu method ids of classes with a class file not found", missing,
          checked);
    CHECK(nocode == 0, "%zu methods without code", nocode);
    if (not_in_file)
        printf("recon_check: %zu method ids found but not in their class file (reported)\n",
               not_in_file);

    /* Every CFG and every call site. */
    size_t n = rc_program_nmethods(p), ncode = 0, ninsn = 0, nedges = 0, nhidden = 0;
    t0 = now();
    for (uint32_t i = 0; i < n; i++) {
        const rc_method *m = rc_method_at(p, i);
        const rc_cfg *g = rc_cfg_get(p, m);
        if (!m->code)
            continue;
        CHECK(g, "%s.%s%s: no CFG", m->klass, m->name, m->sig);
        if (!g)
            continue;
        ncode++;
        if (strstr(m->klass, ".0x") || strstr(m->klass, "/0x"))
            nhidden++;
        ninsn += g->ninsn;
        nedges += g->first[g->ninsn];
    }
    double t_cfg = now() - t0;
    size_t nsites = 0, nopen = 0, ntargets = 0, nempty_closed = 0;
    size_t by_op[5] = { 0 }, open_by_op[5] = { 0 };
    t0 = now();
    for (uint32_t i = 0; i < n; i++) {
        const rc_method *m = rc_method_at(p, i);
        const rc_cfg *g = rc_cfg_get(p, m);
        if (!g)
            continue;
        for (uint32_t k = 0; k < g->ninsn; k++) {
            if (g->op[k] < 182 || g->op[k] > 186)
                continue;
            const rc_method *const *t;
            bool open;
            size_t nt = rc_call_targets(p, m, g->bci[k], &t, &open);
            nsites++;
            by_op[g->op[k] - 182]++;
            ntargets += nt;
            if (open) {
                nopen++;
                open_by_op[g->op[k] - 182]++;
            } else if (!nt) {
                if (nempty_closed++ < 10)
                    fprintf(stderr, "recon_check: %s.%s%s bci %u (%u): closed, no targets\n",
                            m->klass, m->name, m->sig, g->bci[k], g->op[k]);
            }
        }
    }
    double t_calls = now() - t0;
    CHECK(nempty_closed == 0, "%zu closed call sites without targets", nempty_closed);

    const rc_method *total = sample ? rc_method_find(p, "Cha", "total", "([LShape;)D") : NULL;
    CHECK(!sample || (total && total->id), "Cha.total not found or without id");
    if (total) {
        CHECK(site_has(p, total, 185, "Circle", "area"), "Cha.total does not call Circle.area");
        CHECK(site_has(p, total, 185, "Square", "area"), "Cha.total does not call Square.area");
        CHECK(site_has(p, total, 185, "Ring", "area"), "Cha.total does not call Ring.area");
    }
    const rc_method *lam = rc_method_find(p, "Cha", "lambda", "(I)Ljava/lang/Runnable;");
    CHECK(!sample || (lam && site_has(p, lam, 186, "Cha", "lambda$lambda$0")), "Cha.lambda's lambda");
    const rc_method *mainm = rc_method_find(p, "Sample", "main", "([Ljava/lang/String;)V");
    CHECK(!sample || (mainm && site_has(p, mainm, 184, "Flow", "table")),
          "Sample.main calls Flow.table");
    const rc_method *tostr = rc_method_find(p, "java/lang/Object", "toString",
                                            "()Ljava/lang/String;");
    CHECK(tostr && tostr->code && rc_line_of(tostr, 0) > 0, "java/lang/Object.toString lines");
    CHECK(n > 5000, "only %zu methods", n);
    CHECK(!sample || nhidden > 0, "no method of a hidden class has code");
    /* The lambda proxy of Cha.lambda (a hidden class captured through
     * METHOD_BYTECODE + CONSTANT_POOL) calls the implementation method. */
    bool proxy = false;
    for (uint32_t i = 0; sample && i < n && !proxy; i++) {
        const rc_method *m = rc_method_at(p, i);
        proxy = strncmp(m->klass, "Cha$$Lambda", 11) == 0 && strcmp(m->name, "run") == 0 &&
                site_has(p, m, 184, "Cha", "lambda$lambda$0");
    }
    CHECK(!sample || proxy, "no hidden lambda proxy calling Cha.lambda$lambda$0");

    printf("recon_check: %zu class files, %zu methods (%zu with code, %zu of them in hidden "
           "classes; %zu method ids checked), %zu warnings\n", nfiles, n, ncode, nhidden, checked,
           nw);
    printf("recon_check: load %.1f ms; CFGs %.1f ms (%zu instructions, %zu edges); "
           "call sites %.1f ms (%zu sites, %zu targets, %zu open)\n",
           t_load * 1e3, t_cfg * 1e3, ninsn, nedges, t_calls * 1e3, nsites, ntargets, nopen);
    static const char *const opn[] = { "invokevirtual", "invokespecial", "invokestatic",
                                       "invokeinterface", "invokedynamic" };
    for (int k = 0; k < 5; k++)
        printf("recon_check:   %-15s %7zu sites, %6zu open\n", opn[k], by_op[k], open_by_op[k]);
    g_array_free(meths, TRUE);
    g_hash_table_destroy(with_file);
    g_hash_table_destroy(reported);
    jm_reader_close(r);
    rc_program_free(p);
    if (failures) {
        fprintf(stderr, "recon_check: %d failures\n", failures);
        return 1;
    }
    printf("recon_check: ok\n");
    return 0;
}
