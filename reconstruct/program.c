/* The program of a trace (program.h): class files and metadata records of
 * jvm/meta.jpt turned into classes and methods, looked up by name or id,
 * with their CFGs. */
#include "reconstruct/program_int.h"

#include <stdarg.h>
#include <stdio.h>

static const rc_cfg failed_cfg;

/* Hash of a 64-bit key kept in a pointer (g_direct_hash keeps only the low
 * 32 bits: call-site keys differ in the high half). */
static guint hash64(gconstpointer k)
{
    uint64_t x = (uint64_t)GPOINTER_TO_SIZE(k);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (guint)x;
}

static void warn(rc_program *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(rc_program *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_ptr_array_add(p->warnings, g_strdup_vprintf(fmt, ap));
    va_end(ap);
}

static bool slice_eq(jm_slice s, const char *z)
{
    size_t n = strlen(z);
    return n == s.len && memcmp(s.p, z, n) == 0;
}

/* "Ljava/lang/String;" -> "java/lang/String" (interned). */
static const char *sig_to_name(rc_program *p, jm_slice s)
{
    if (s.len >= 2 && s.p[0] == 'L' && s.p[s.len - 1] == ';')
        return g_string_chunk_insert_len(p->strs, (const char *)s.p + 1, (gssize)s.len - 2);
    return g_string_chunk_insert_len(p->strs, (const char *)s.p, (gssize)s.len);
}

/* Method names and descriptors are interned so that lookups compare
 * pointers; s must stay valid for the program's life. */
static const char *intern(rc_program *p, const char *s)
{
    const char *have = g_hash_table_lookup(p->names, s);
    if (have)
        return have;
    g_hash_table_add(p->names, (gpointer)s);
    return s;
}

/* The interned copy of s, or NULL when no method has that name or descriptor. */
const char *prog_interned(const rc_program *p, const char *s)
{
    return s ? g_hash_table_lookup(p->names, s) : NULL;
}

static void class_free(gpointer data)
{
    rc_class *c = data;
    cf_free(&c->cf);
    if (c->children)
        g_ptr_array_free(c->children, TRUE);
    g_free(c->ifaces);
    g_free(c->trans);
    g_free(c);
}

void prog_cha_site_free(gpointer data)
{
    site *st = data;
    g_free(st->itab);
    g_free(st);
}

void rc_program_free(rc_program *p)
{
    if (!p)
        return;
    for (uint32_t i = 0; i < p->nmethods; i++) {
        rc_cfg *g = p->mx[i].cfg;
        g_free(p->mx[i].on_this);
        if (p->mx[i].sites && g && g != &failed_cfg)
            for (uint32_t k = 0; k < g->ninsn; k++)
                g_free(p->mx[i].sites[k]);
        g_free(p->mx[i].sites);
        if (g && g != &failed_cfg)
            rc_cfg_free(g);
    }
    g_free(p->mx);
    if (p->vm_sites)
        g_hash_table_destroy(p->vm_sites);
    if (p->load_class)
        g_ptr_array_free(p->load_class, TRUE);
    if (p->cha)
        g_hash_table_destroy(p->cha);
    if (p->by_id)
        g_hash_table_destroy(p->by_id);
    if (p->by_name)
        g_hash_table_destroy(p->by_name);
    if (p->by_cid)
        g_hash_table_destroy(p->by_cid);
    if (p->classes)
        g_ptr_array_free(p->classes, TRUE);
    if (p->bare_virtual)
        g_ptr_array_free(p->bare_virtual, TRUE);
    if (p->warnings)
        g_ptr_array_free(p->warnings, TRUE);
    if (p->strs)
        g_string_chunk_free(p->strs);
    if (p->names)
        g_hash_table_destroy(p->names);
    g_mutex_clear(&p->lock);
    g_mutex_clear(&p->itable_lock);
    if (p->r)
        jm_reader_close(p->r);
    g_free(p);
}

static rc_class *class_new(rc_program *p, uint64_t cid, const char *name)
{
    rc_class *c = g_new0(rc_class, 1);
    c->index = p->classes->len;
    c->class_id = cid;
    c->name = name;
    g_ptr_array_add(p->classes, c);
    g_hash_table_insert(p->by_cid, GSIZE_TO_POINTER(cid), c);
    rc_class *first = g_hash_table_lookup(p->by_name, name);
    c->first_same_name = first ? first : c;
    if (!first) {
        g_hash_table_insert(p->by_name, (gpointer)name, c);
    } else {
        while (first->next_same_name)
            first = first->next_same_name;
        first->next_same_name = c;
    }
    return c;
}

/* Whether code of class c may have run: the JVM links (prepares) a class
 * before any of its methods runs or any object of it exists, and the agent
 * records every preparation (those before it started too). A class whose
 * file the load hook captured but that no CLASS_PREPARE names was loaded
 * (for verification, or by a resolution that failed) and never used:
 * xalan loads the classes of every XPath function and operator it may
 * compile, and those it never compiles have the same first bytecodes as
 * those it runs. Metadata without any preparation record says nothing. */
bool prog_class_may_have_run(const rc_program *p, const rc_class *c)
{
    return c->prepared || !c->from_file || !p->any_prepared;
}

bool rc_method_may_run(const rc_program *p, const rc_method *m, uint64_t tsc)
{
    if (!m || m->index >= p->nmethods || &p->mx[m->index].m != m)
        return true;
    const rc_mx *x = &p->mx[m->index];
    if (x->initialized_by && tsc >= x->initialized_by)
        return false;
    return !x->cls || !x->cls->since || tsc + RC_SINCE_SLACK >= x->cls->since;
}

bool rc_method_may_have_run(const rc_program *p, const rc_method *m)
{
    if (!m || m->index >= p->nmethods || &p->mx[m->index].m != m)
        return true;
    return prog_class_may_have_run(p, p->mx[m->index].cls);
}

rc_class *prog_class_find(const rc_program *p, const char *name)
{
    return name ? g_hash_table_lookup(p->by_name, name) : NULL;
}

static void link_child(rc_program *p, const char *parent, rc_class *child)
{
    for (rc_class *s = prog_class_find(p, parent); s; s = s->next_same_name) {
        if (s == child)
            continue;
        if (!s->children)
            s->children = g_ptr_array_new();
        g_ptr_array_add(s->children, child);
    }
}

static gint cmp_u64(gconstpointer a, gconstpointer b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void mx_init(rc_mx *x, uint32_t index, rc_class *c)
{
    x->m.index = index;
    x->m.klass = c->name;
    x->m.source = c->cf.source;
    x->cls = c;
}

typedef struct class_time {
    uint64_t class_id, tsc;
} class_time;

typedef struct meth_rec {
    uint64_t id, class_id;
    jm_slice class_sig, name, sig;
    uint32_t modifiers;
} meth_rec;

typedef struct code_rec {
    int32_t max_stack, max_locals;
    jm_slice code;
} code_rec;

/* The metadata records rc_program_load works from, collected in one pass,
 * and what matching method records to class files found. */
typedef struct records {
    GArray *files, *file_tsc;          /* jm_rec, uint64_t: CLASS_FILE */
    GArray *prepares, *prepare_tsc;    /* jm_rec, uint64_t: CLASS_PREPARE */
    GArray *meths;                     /* meth_rec */
    GArray *inited;                    /* class_time */
    GHashTable *codes;                 /* method id -> code_rec */
    GArray *pool_recs;                 /* jm_rec: CONSTANT_POOL */
    GHashTable *pools;                 /* class id -> jm_rec * in pool_recs */
    gint32 *match;                     /* meths[i]'s method in its class file, or -1 */
    GArray *extra;                     /* class index << 32 | meths index */
} records;

static rc_program *program_new(jm_reader *r)
{
    rc_program *p = g_new0(rc_program, 1);
    p->r = r;
    g_mutex_init(&p->lock);
    g_mutex_init(&p->itable_lock);
    p->classes = g_ptr_array_new_with_free_func(class_free);
    p->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    p->by_cid = g_hash_table_new(hash64, g_direct_equal);
    p->by_id = g_hash_table_new(hash64, g_direct_equal);
    p->warnings = g_ptr_array_new_with_free_func(g_free);
    p->strs = g_string_chunk_new(1 << 16);
    p->bare_virtual = g_ptr_array_new();
    p->names = g_hash_table_new(g_str_hash, g_str_equal);
    p->vm_sites = g_hash_table_new_full(hash64, g_direct_equal, NULL, g_free);
    p->cha = g_hash_table_new_full(hash64, g_direct_equal, NULL, prog_cha_site_free);
    return p;
}

static void records_init(records *rs)
{
    rs->files = g_array_new(FALSE, FALSE, sizeof(jm_rec));
    rs->prepares = g_array_new(FALSE, FALSE, sizeof(jm_rec));
    rs->file_tsc = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    rs->prepare_tsc = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    rs->meths = g_array_new(FALSE, FALSE, sizeof(meth_rec));
    rs->inited = g_array_new(FALSE, FALSE, sizeof(class_time));
    rs->codes = g_hash_table_new_full(hash64, g_direct_equal, NULL, g_free);
    rs->pools = g_hash_table_new(hash64, g_direct_equal);
    rs->pool_recs = g_array_new(FALSE, FALSE, sizeof(jm_rec));
    rs->match = NULL;
    rs->extra = g_array_new(FALSE, FALSE, sizeof(uint64_t));
}

static void records_free(records *rs)
{
    g_free(rs->match);
    g_array_free(rs->extra, TRUE);
    g_array_free(rs->files, TRUE);
    g_array_free(rs->prepares, TRUE);
    g_array_free(rs->file_tsc, TRUE);
    g_array_free(rs->prepare_tsc, TRUE);
    g_array_free(rs->meths, TRUE);
    g_array_free(rs->inited, TRUE);
    g_array_free(rs->pool_recs, TRUE);
    g_hash_table_destroy(rs->codes);
    g_hash_table_destroy(rs->pools);
}

/* Files record m (read at tsc) where rc_program_load wants it. */
static void keep_record(records *rs, const jm_rec *m, uint64_t tsc)
{
    switch (m->type) {
    case JM_METHOD: {
        meth_rec x = { m->u.method.method_id, m->u.method.class_id, m->u.method.class_sig,
                       m->u.method.name, m->u.method.sig, m->u.method.modifiers };
        g_array_append_val(rs->meths, x);
        break;
    }
    case JM_CLASS_FILE:
        g_array_append_val(rs->files, *m);
        g_array_append_val(rs->file_tsc, tsc);
        break;
    case JM_CLASS_PREPARE:
        g_array_append_val(rs->prepares, *m);
        g_array_append_val(rs->prepare_tsc, tsc);
        break;
    case JM_METHOD_BYTECODE: {
        code_rec *c = g_new(code_rec, 1);
        c->max_stack = m->u.method_bytecode.max_stack;
        c->max_locals = m->u.method_bytecode.max_locals;
        c->code = m->u.method_bytecode.bytecode;
        g_hash_table_insert(rs->codes, GSIZE_TO_POINTER(m->u.method_bytecode.method_id), c);
        break;
    }
    case JM_CONSTANT_POOL:
        g_array_append_val(rs->pool_recs, *m);
        break;
    case JM_CLASSES_INITIALIZED: {
        jm_cur c = m->u.classes_initialized.ids;
        for (uint32_t k = 0; k < m->u.classes_initialized.n; k++) {
            class_time x = { jm_get_u64(&c), tsc };
            g_array_append_val(rs->inited, x);
        }
        break;
    }
    default:
        break;
    }
}

/* 1. Collect the records. */
static void collect_records(rc_program *p, records *rs)
{
    char e[512];
    jm_record rec;
    int rc;
    while ((rc = jm_reader_next(p->r, &rec)) == 1) {
        jm_rec m;
        if ((rec.type < JM_METHOD || rec.type > JM_CONSTANT_POOL) &&
            rec.type != JM_CLASSES_INITIALIZED)
            continue;
        if (jm_parse(&rec, &m, e, sizeof e) < 0) {
            warn(p, "%s record: %s", jm_type_name(rec.type), e);
            continue;
        }
        keep_record(rs, &m, rec.tsc);
    }
    if (rc < 0)
        warn(p, "%s", jm_reader_error(p->r));
    for (guint i = 0; i < rs->pool_recs->len; i++) {
        jm_rec *m = &g_array_index(rs->pool_recs, jm_rec, i);
        g_hash_table_insert(rs->pools, GSIZE_TO_POINTER(m->u.constant_pool.class_id), m);
    }
}

/* 2. Class files: the first that parses for each class id. */
static void add_class_files(rc_program *p, const records *rs)
{
    char e[512];
    for (guint i = 0; i < rs->files->len; i++) {
        jm_rec *m = &g_array_index(rs->files, jm_rec, i);
        uint64_t cid = m->u.class_file.class_id;
        if (g_hash_table_contains(p->by_cid, GSIZE_TO_POINTER(cid)))
            continue;
        cf_class cf;
        if (cf_parse(m->u.class_file.bytes.p, m->u.class_file.bytes.len, &cf, e, sizeof e) < 0) {
            warn(p, "class %.*s (class id %llu): %s", (int)m->u.class_file.class_sig.len,
                 (const char *)m->u.class_file.class_sig.p, (unsigned long long)cid, e);
            p->ndamaged++;
            continue;
        }
        rc_class *c = class_new(p, cid, g_string_chunk_insert_const(p->strs, cf.name));
        c->cf = cf;
        c->from_file = true;
        c->access = cf.access;
        if (m->u.class_file.origin == JM_CLASS_LOAD_HOOK)
            c->since = g_array_index(rs->file_tsc, uint64_t, i);
    }
}

/* 3. Bare classes: prepared without a class file (hidden ones with their
 * constant pool). */
static void add_bare_classes(rc_program *p, const records *rs)
{
    char e[512];
    p->any_prepared = rs->prepares->len > 0;
    for (guint i = 0; i < rs->prepares->len; i++) {
        jm_rec *m = &g_array_index(rs->prepares, jm_rec, i);
        uint64_t cid = m->u.class_prepare.class_id;
        rc_class *c = g_hash_table_lookup(p->by_cid, GSIZE_TO_POINTER(cid));
        if (c) {
            if (m->u.class_prepare.flags & JM_CLASS_HIDDEN)
                c->hidden = true;
            c->prepared = true;
            continue;
        }
        c = class_new(p, cid, sig_to_name(p, m->u.class_prepare.class_sig));
        c->prepared = true;
        c->hidden = (m->u.class_prepare.flags & JM_CLASS_HIDDEN) != 0;
        if (c->hidden)
            c->since = g_array_index(rs->prepare_tsc, uint64_t, i);
        p->nbare++;
        if (!c->hidden)
            p->nbare_plain++;
        if (!c->hidden)
            warn(p, "class %s (class id %llu): prepared without a class file", c->name,
                 (unsigned long long)cid);
        jm_rec *pool = g_hash_table_lookup(rs->pools, GSIZE_TO_POINTER(cid));
        if (pool && cf_parse_pool(pool->u.constant_pool.bytes.p, pool->u.constant_pool.bytes.len,
                                  pool->u.constant_pool.cp_count, &c->cf, e, sizeof e) < 0)
            warn(p, "constant pool of %s (class id %llu): %s", c->name,
                 (unsigned long long)cid, e);
    }
}

/* 4. Method records. A class-file method is found by name and
 * descriptor; bare classes, and methods missing from their class file
 * (added by the JVM after the load hook, e.g. JFR's event methods),
 * become extra methods of their class (in record order). */
static void match_methods(rc_program *p, records *rs)
{
    GArray *meths = rs->meths;
    gint32 *match = rs->match = g_new(gint32, meths->len ? meths->len : 1);
    GHashTable *seen = g_hash_table_new(hash64, g_direct_equal);
    uint32_t unmatched = 0;
    for (guint i = 0; i < meths->len; i++) {
        meth_rec *x = &g_array_index(meths, meth_rec, i);
        match[i] = -1;
        if (!g_hash_table_add(seen, GSIZE_TO_POINTER(x->id)))
            continue; /* the same id twice */
        rc_class *c = g_hash_table_lookup(p->by_cid, GSIZE_TO_POINTER(x->class_id));
        if (!c) {
            /* Only METHOD records name this class (damaged class file). */
            c = class_new(p, x->class_id, sig_to_name(p, x->class_sig));
            p->nbare++;
            p->nbare_plain++;
        }
        if (c->from_file) {
            for (uint32_t j = 0; j < c->cf.nmethods && match[i] < 0; j++)
                if (slice_eq(x->name, c->cf.methods[j].name) &&
                    slice_eq(x->sig, c->cf.methods[j].sig))
                    match[i] = (gint32)j;
            if (match[i] >= 0)
                continue;
            if (unmatched++ < 100)
                warn(p, "method id %#llx %s.%.*s%.*s: not in the class file", (unsigned long long)x->id,
                     c->name, (int)x->name.len, (const char *)x->name.p, (int)x->sig.len,
                     (const char *)x->sig.p);
        }
        uint64_t key = (uint64_t)c->index << 32 | i;
        g_array_append_val(rs->extra, key);
    }
    if (unmatched > 100)
        warn(p, "%u more method ids not in their class files", unmatched - 100);
    g_array_sort(rs->extra, cmp_u64);
    g_hash_table_destroy(seen);
}

/* Method x of class c from its class file's method fm. */
static void file_method(rc_program *p, rc_mx *x, const rc_class *c, const cf_method *fm)
{
    char e[512];
    x->m.name = intern(p, fm->name);
    x->m.sig = intern(p, fm->sig);
    x->m.access = fm->access;
    if (fm->code && rc_code_check(fm->code, fm->code_len, fm->handlers, fm->nhandlers, e,
                                  sizeof e) < 0) {
        warn(p, "%s.%s%s: %s (code dropped)", c->name, fm->name, fm->sig, e);
        return;
    }
    x->m.code = fm->code;
    x->m.code_len = fm->code_len;
    x->m.max_stack = fm->max_stack;
    x->m.max_locals = fm->max_locals;
    x->m.nhandlers = fm->nhandlers;
    x->m.handlers = fm->handlers;
    x->m.nlines = fm->nlines;
    x->m.lines = fm->lines;
}

/* Method x of class c from method record y alone (and its bytecode record). */
static void extra_method(rc_program *p, const records *rs, rc_mx *x, const rc_class *c,
                         const meth_rec *y)
{
    char e[512];
    x->m.id = y->id;
    x->m.name = intern(p, g_string_chunk_insert_len(p->strs, (const char *)y->name.p,
                                                    y->name.len));
    x->m.sig = intern(p, g_string_chunk_insert_len(p->strs, (const char *)y->sig.p,
                                                   y->sig.len));
    x->m.access = (uint16_t)y->modifiers;
    code_rec *cr = g_hash_table_lookup(rs->codes, GSIZE_TO_POINTER(y->id));
    if (cr && rc_code_check(cr->code.p, cr->code.len, NULL, 0, e, sizeof e) < 0) {
        warn(p, "%s.%s%s (bytecode record): %s (code dropped)", c->name, x->m.name,
             x->m.sig, e);
    } else if (cr) {
        x->m.code = cr->code.p;
        x->m.code_len = cr->code.len;
        x->m.max_stack = cr->max_stack < 0 ? 0 : (uint16_t)cr->max_stack;
        x->m.max_locals = cr->max_locals < 0 ? 0 : (uint16_t)cr->max_locals;
    }
    g_hash_table_insert(p->by_id, GSIZE_TO_POINTER(y->id), x);
    if (!c->from_file && !(x->m.access & (CF_ACC_STATIC | CF_ACC_PRIVATE)) &&
        x->m.name[0] != '<')
        g_ptr_array_add(p->bare_virtual, x);
}

/* 5. Methods, dense: per class, the class file's methods in file order,
 * then the extra ones. */
static void lay_out_methods(rc_program *p, const records *rs)
{
    GArray *extra = rs->extra;
    uint32_t total = extra->len;
    for (guint i = 0; i < p->classes->len; i++) {
        rc_class *c = g_ptr_array_index(p->classes, i);
        if (c->from_file)
            total += c->cf.nmethods;
    }
    p->mx = g_new0(rc_mx, total ? total : 1);
    uint32_t k = 0;
    guint next_extra = 0;
    for (guint i = 0; i < p->classes->len; i++) {
        rc_class *c = g_ptr_array_index(p->classes, i);
        c->first_method = k;
        for (uint32_t j = 0; c->from_file && j < c->cf.nmethods; j++, k++) {
            mx_init(&p->mx[k], k, c);
            file_method(p, &p->mx[k], c, &c->cf.methods[j]);
        }
        for (; next_extra < extra->len; next_extra++, k++) {
            uint64_t key = g_array_index(extra, uint64_t, next_extra);
            if ((key >> 32) != c->index)
                break;
            mx_init(&p->mx[k], k, c);
            extra_method(p, rs, &p->mx[k], c, &g_array_index(rs->meths, meth_rec, (guint)key));
        }
        c->nmethods = k - c->first_method;
    }
    p->nmethods = k;
}

/* 6. Ids of class-file methods. */
static void assign_ids(rc_program *p, const records *rs)
{
    for (guint i = 0; i < rs->meths->len; i++) {
        if (rs->match[i] < 0)
            continue;
        meth_rec *y = &g_array_index(rs->meths, meth_rec, i);
        rc_class *c = g_hash_table_lookup(p->by_cid, GSIZE_TO_POINTER(y->class_id));
        rc_mx *x = &p->mx[c->first_method + (uint32_t)rs->match[i]];
        if (!x->m.id)
            x->m.id = y->id;
        g_hash_table_insert(p->by_id, GSIZE_TO_POINTER(y->id), x);
    }
}

/* 7. The hierarchy. */
static void link_hierarchy(rc_program *p)
{
    for (guint i = 0; i < p->classes->len; i++) {
        rc_class *c = g_ptr_array_index(p->classes, i);
        if (!c->from_file)
            continue;
        if (c->cf.super_name) {
            c->super = prog_class_find(p, c->cf.super_name);
            link_child(p, c->cf.super_name, c);
        }
        if (c->cf.ninterfaces) {
            c->ifaces = g_new0(rc_class *, c->cf.ninterfaces);
            for (uint16_t j = 0; j < c->cf.ninterfaces; j++) {
                rc_class *s = prog_class_find(p, c->cf.interfaces[j]);
                if (s)
                    c->ifaces[c->nifaces++] = s;
                link_child(p, c->cf.interfaces[j], c);
            }
        }
    }
    p->object = prog_class_find(p, "java/lang/Object");
}

/* 8. Class initializers that cannot run any more. */
static void mark_initialized(rc_program *p, const records *rs)
{
    const char *clinit = prog_interned(p, "<clinit>"), *v = prog_interned(p, "()V");
    for (guint i = 0; i < rs->inited->len && clinit && v; i++) {
        const class_time *x = &g_array_index(rs->inited, class_time, i);
        rc_class *c = g_hash_table_lookup(p->by_cid, GSIZE_TO_POINTER(x->class_id));
        rc_mx *m = c ? prog_declared(p, c, clinit, v) : NULL;
        if (m && (!m->initialized_by || x->tsc < m->initialized_by))
            m->initialized_by = x->tsc;
    }
}

rc_program *rc_program_load(const char *trace_dir, char *err, size_t errlen)
{
    char jdir[4096];
    snprintf(jdir, sizeof jdir, "%s/jvm", trace_dir);
    jm_reader *r = jm_reader_open(jdir, err, errlen);
    if (!r)
        return NULL;
    rc_program *p = program_new(r);
    records rs;
    records_init(&rs);
    collect_records(p, &rs);
    add_class_files(p, &rs);
    add_bare_classes(p, &rs);
    match_methods(p, &rs);
    lay_out_methods(p, &rs);
    assign_ids(p, &rs);
    link_hierarchy(p);
    mark_initialized(p, &rs);
    records_free(&rs);
    return p;
}

size_t rc_program_nmethods(const rc_program *p)
{
    return p->nmethods;
}

const rc_method *rc_method_at(const rc_program *p, uint32_t index)
{
    return index < p->nmethods ? &p->mx[index].m : NULL;
}

const rc_method *rc_method_by_id(const rc_program *p, uint64_t id)
{
    rc_mx *x = g_hash_table_lookup(p->by_id, GSIZE_TO_POINTER(id));
    return x ? &x->m : NULL;
}

/* The method (name, sig) declared by c; name and sig are interned. */
rc_mx *prog_declared(const rc_program *p, const rc_class *c, const char *name, const char *sig)
{
    for (uint32_t j = 0; j < c->nmethods; j++) {
        rc_mx *x = &p->mx[c->first_method + j];
        if (x->m.name == name && x->m.sig == sig)
            return x;
    }
    return NULL;
}

const rc_method *rc_method_find(const rc_program *p, const char *klass, const char *name,
                                const char *sig)
{
    name = prog_interned(p, name);
    sig = prog_interned(p, sig);
    if (!name || !sig)
        return NULL;
    for (rc_class *c = prog_class_find(p, klass); c; c = c->next_same_name) {
        rc_mx *x = prog_declared(p, c, name, sig);
        if (x)
            return &x->m;
    }
    return NULL;
}

size_t rc_program_warnings(const rc_program *p, const char *const **lines)
{
    *lines = (const char *const *)p->warnings->pdata;
    return p->warnings->len;
}

rc_mx *prog_mx_of(rc_program *p, const rc_method *m)
{
    if (!m || m->index >= p->nmethods || &p->mx[m->index].m != m)
        return NULL;
    return &p->mx[m->index];
}

const rc_cfg *rc_cfg_get(rc_program *p, const rc_method *m)
{
    rc_mx *x = prog_mx_of(p, m);
    if (!x || !m->code)
        return NULL;
    rc_cfg *g = g_atomic_pointer_get(&x->cfg);
    if (!g) {
        char e[256];
        g = rc_cfg_build(m->code, m->code_len, m->handlers, m->nhandlers, e, sizeof e);
        if (!g)
            g = (rc_cfg *)&failed_cfg;
        if (!g_atomic_pointer_compare_and_exchange(&x->cfg, NULL, g)) {
            if (g != &failed_cfg)
                rc_cfg_free(g);
            g = g_atomic_pointer_get(&x->cfg);
        }
    }
    return g == &failed_cfg ? NULL : g;
}

uint32_t rc_line_of(const rc_method *m, uint32_t bci)
{
    if (!m || !m->nlines)
        return 0;
    uint32_t lo = 0, hi = m->nlines; /* first entry with start_pc > bci */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->lines[mid].start_pc <= bci)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? m->lines[lo - 1].line : 0;
}
