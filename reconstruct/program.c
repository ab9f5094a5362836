/* The program of a trace (program.h): class files and metadata records of
 * jvm/meta.jpt turned into classes, methods, CFGs and call targets. */
#include "reconstruct/program.h"

#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jmeta.h"
#include "common/jmrec.h"
#include "common/jvm.h"
#include "reconstruct/cfg.h"
#include "decoder/classfile.h"

_Static_assert(sizeof(void *) == 8, "method ids are kept in pointer-sized hash keys");

typedef struct rc_class rc_class;

struct site;

typedef struct rc_mx {
    rc_method m;               /* first: rc_method pointers convert back */
    rc_class *cls;
    rc_cfg *cfg;               /* atomic; &failed_cfg when the build failed */
    uint8_t *on_this;          /* atomic, made on first use: per instruction, 1
                                * for an invoke on this (rc_receiver_is_this) */
    struct site **sites;       /* atomic, made on first use: call targets by
                                * instruction index (each slot atomic) */
    uint64_t initialized_by;   /* a class initializer: the time by which the agent
                                * found its class initialized (0: not known) */
    const rc_method *this_call; /* atomic, made on first use (rc_this_call);
                                 * &no_this_call: none */
    gint this_call_insn;       /* atomic: its instruction */
} rc_mx;

struct rc_class {
    uint32_t index;
    uint64_t class_id;
    const char *name;
    cf_class cf;               /* whole class file, or a bare pool (or nothing) */
    bool from_file;            /* false: bare (hidden, or no class file captured) */
    bool hidden;               /* CLASS_PREPARE flag 1 */
    bool prepared;             /* a CLASS_PREPARE record names it */
    uint64_t since;            /* the earliest time its code can run: when the load hook
                                * (or, for a hidden class, preparation) recorded it;
                                * 0 for classes loaded before the agent's hook */
    uint16_t access;
    rc_class *super;
    rc_class **ifaces;
    uint16_t nifaces;
    GPtrArray *children;       /* direct subclasses, implementors, subinterfaces */
    uint32_t first_method, nmethods; /* in p->mx */
    rc_class *next_same_name;
    rc_class *first_same_name; /* the first class loaded with this name (itself) */
    /* HotSpot's transitive interfaces (see transitive_ifaces), under
     * p->itable_lock */
    uint8_t trans_state;       /* TRANS_* */
    uint16_t ntrans;
    rc_class **trans;
};

enum { TRANS_NOT_YET = 0, TRANS_BUSY, TRANS_KNOWN, TRANS_UNKNOWN };

static rc_mx *declared(const rc_program *p, const rc_class *c, const char *name,
                       const char *sig);

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

/* A target of an interface call and the position, in the itable of a
 * receiver class that selects it, of the interface the call names (-1:
 * unknown). */
typedef struct itab_ent {
    const rc_method *t;
    int32_t pos;
} itab_ent;

typedef struct site {
    uint32_t n;
    bool open;
    uint32_t nitab;            /* through an interface: see rc_itable_may_run */
    itab_ent *itab;            /* sorted by target; owned by the site in p->cha */
    const rc_method *t[];
} site;

struct rc_program {
    jm_reader *r;
    GPtrArray *classes;        /* rc_class * */
    GHashTable *by_name;       /* name -> first rc_class of that name */
    GHashTable *by_cid;        /* class id -> rc_class */
    rc_mx *mx;
    uint32_t nmethods;
    GHashTable *by_id;         /* method id -> rc_mx */
    GPtrArray *warnings;       /* char * */
    GStringChunk *strs;
    uint32_t ndamaged, nbare, nbare_plain;
    bool any_prepared;         /* the metadata has CLASS_PREPARE records */
    rc_class *object;          /* java/lang/Object, if captured */
    GHashTable *names;         /* interned method names and descriptors */
    GPtrArray *bare_virtual;   /* rc_mx * of bare classes that may be interface targets */
    GMutex lock;
    GHashTable *vm_sites;      /* the same for rc_vm_call_targets */
    GPtrArray *load_class;     /* loadClass(String) of every class loader; NULL: not yet */
    GHashTable *cha;           /* (class index << 32 | resolved method index) -> site */
    GMutex itable_lock;        /* rc_class.trans* */
};

static const rc_cfg failed_cfg;
static const rc_method no_this_call;

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
static const char *interned(const rc_program *p, const char *s)
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

static void cha_site_free(gpointer data)
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
static bool class_may_have_run(const rc_program *p, const rc_class *c)
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
    return class_may_have_run(p, p->mx[m->index].cls);
}

static rc_class *class_find(const rc_program *p, const char *name)
{
    return name ? g_hash_table_lookup(p->by_name, name) : NULL;
}

static void link_child(rc_program *p, const char *parent, rc_class *child)
{
    for (rc_class *s = class_find(p, parent); s; s = s->next_same_name) {
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
    p->cha = g_hash_table_new_full(hash64, g_direct_equal, NULL, cha_site_free);
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
            c->super = class_find(p, c->cf.super_name);
            link_child(p, c->cf.super_name, c);
        }
        if (c->cf.ninterfaces) {
            c->ifaces = g_new0(rc_class *, c->cf.ninterfaces);
            for (uint16_t j = 0; j < c->cf.ninterfaces; j++) {
                rc_class *s = class_find(p, c->cf.interfaces[j]);
                if (s)
                    c->ifaces[c->nifaces++] = s;
                link_child(p, c->cf.interfaces[j], c);
            }
        }
    }
    p->object = class_find(p, "java/lang/Object");
}

/* 8. Class initializers that cannot run any more. */
static void mark_initialized(rc_program *p, const records *rs)
{
    const char *clinit = interned(p, "<clinit>"), *v = interned(p, "()V");
    for (guint i = 0; i < rs->inited->len && clinit && v; i++) {
        const class_time *x = &g_array_index(rs->inited, class_time, i);
        rc_class *c = g_hash_table_lookup(p->by_cid, GSIZE_TO_POINTER(x->class_id));
        rc_mx *m = c ? declared(p, c, clinit, v) : NULL;
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
static rc_mx *declared(const rc_program *p, const rc_class *c, const char *name, const char *sig)
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
    name = interned(p, name);
    sig = interned(p, sig);
    if (!name || !sig)
        return NULL;
    for (rc_class *c = class_find(p, klass); c; c = c->next_same_name) {
        rc_mx *x = declared(p, c, name, sig);
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

static rc_mx *mx_of(rc_program *p, const rc_method *m)
{
    if (!m || m->index >= p->nmethods || &p->mx[m->index].m != m)
        return NULL;
    return &p->mx[m->index];
}

const rc_cfg *rc_cfg_get(rc_program *p, const rc_method *m)
{
    rc_mx *x = mx_of(p, m);
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

/* ---- call targets -------------------------------------------------------- */

static bool same_package(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t na = sa ? (size_t)(sa - a) : 0, nb = sb ? (size_t)(sb - b) : 0;
    return na == nb && memcmp(a, b, na) == 0;
}

static bool is_interface(const rc_class *c)
{
    return c->from_file && (c->access & CF_ACC_INTERFACE);
}

/* A method of the superinterfaces of c (and of its superclasses): a default
 * (non-abstract instance) method when there is one, else any match. */
static rc_mx *iface_lookup(const rc_program *p, const rc_class *c, const char *name,
                           const char *sig)
{
    rc_mx *any = NULL, *hit = NULL;
    /* Breadth first; the sets are small, so duplicates are found by a scan. */
    rc_class *local[64];
    rc_class **queue = local;
    size_t n = 0, cap = 64;
#define ENQUEUE(k)                                                                          \
    do {                                                                                    \
        rc_class *k_ = (k);                                                                 \
        bool dup_ = false;                                                                  \
        for (size_t j_ = 0; j_ < n && !dup_; j_++)                                          \
            dup_ = queue[j_] == k_;                                                         \
        if (!dup_) {                                                                        \
            if (n == cap) {                                                                 \
                rc_class **q_ = g_new(rc_class *, cap * 2);                                 \
                memcpy(q_, queue, n * sizeof *q_);                                          \
                if (queue != local)                                                         \
                    g_free(queue);                                                          \
                queue = q_;                                                                 \
                cap *= 2;                                                                   \
            }                                                                               \
            queue[n++] = k_;                                                                \
        }                                                                                   \
    } while (0)
    for (const rc_class *k = c; k; k = k->super)
        for (uint16_t i = 0; i < k->nifaces; i++)
            ENQUEUE(k->ifaces[i]);
    for (size_t q = 0; q < n && !hit; q++) {
        rc_class *s = queue[q];
        rc_mx *x = declared(p, s, name, sig);
        if (x && !(x->m.access & (CF_ACC_STATIC | CF_ACC_PRIVATE))) {
            if (!(x->m.access & CF_ACC_ABSTRACT))
                hit = x;
            else if (!any)
                any = x;
        }
        for (uint16_t i = 0; i < s->nifaces; i++)
            ENQUEUE(s->ifaces[i]);
    }
#undef ENQUEUE
    if (queue != local)
        g_free(queue);
    return hit ? hit : any;
}

/* Method resolution (JVMS 5.4.3.3 / 5.4.3.4): c and its superclasses, then
 * (interfaces: java/lang/Object's) superinterfaces. */
static rc_mx *resolve(const rc_program *p, const rc_class *c, const char *name, const char *sig)
{
    if (is_interface(c)) {
        rc_mx *x = declared(p, c, name, sig);
        if (x)
            return x;
        const rc_class *o = p->object;
        if (o && (x = declared(p, o, name, sig)) && (x->m.access & CF_ACC_PUBLIC) &&
            !(x->m.access & CF_ACC_STATIC))
            return x;
        return iface_lookup(p, c, name, sig);
    }
    for (const rc_class *k = c; k; k = k->super) {
        rc_mx *x = declared(p, k, name, sig);
        if (x)
            return x;
    }
    return iface_lookup(p, c, name, sig);
}

/* Whether x, declared in class k, can override r (JVMS 5.4.5, without the
 * transitive case): public/protected r, or package-private r of k's package. */
static bool overrides(const rc_class *k, const rc_mx *x, const rc_mx *r)
{
    if (x->m.access & (CF_ACC_STATIC | CF_ACC_PRIVATE))
        return false;
    if (x == r || (r->m.access & (CF_ACC_PUBLIC | CF_ACC_PROTECTED)))
        return true;
    return same_package(k->name, r->m.klass);
}

/* Selection in the superclass chain of d alone (JVMS 5.4.6 steps 1-2). */
static rc_mx *select_chain(const rc_program *p, const rc_class *d, const rc_mx *r)
{
    for (const rc_class *k = d; k; k = k->super) {
        rc_mx *x = declared(p, k, r->m.name, r->m.sig);
        if (x && overrides(k, x, r))
            return x;
    }
    return NULL;
}

typedef struct tset {
    GPtrArray *t;
    GHashTable *in;
} tset;

static void tset_add(tset *s, const rc_mx *x)
{
    if (x && g_hash_table_add(s->in, (gpointer)x))
        g_ptr_array_add(s->t, (gpointer)&x->m);
}

/* ---- itables ----------------------------------------------------------------
 *
 * HotSpot's invokeinterface template finds the interface a call names in
 * the receiver class's itable by a linear scan, which the trace shows
 * (dc_event.itable_pos). The itable lists the class's transitive interfaces
 * in the order the class file parser computed them, leaving out those with
 * no itable method and no superinterface (klassItable's
 * visit_all_interfaces). */

static void append_missing(GPtrArray *a, GHashTable *in, rc_class *c)
{
    if (g_hash_table_add(in, c))
        g_ptr_array_add(a, c);
}

#define TRANS_MAX_DEPTH 256

/* The transitive interfaces of c: the superclass's, then each direct
 * superinterface's own, then the direct superinterfaces, each at its first
 * place (ClassFileParser's compute_transitive_interfaces). false when a
 * supertype has no class file or the hierarchy is circular or too deep
 * (damaged input). Under p->itable_lock. */
static bool transitive_ifaces(rc_class *c, unsigned depth)
{
    if (c->trans_state == TRANS_KNOWN)
        return true;
    /* (java/lang/Object has no interfaces: it need not be captured) */
    bool super_unknown = c->cf.super_name && !c->super &&
                         strcmp(c->cf.super_name, "java/lang/Object") != 0;
    if (c->trans_state != TRANS_NOT_YET || depth > TRANS_MAX_DEPTH || !c->from_file ||
        c->nifaces != c->cf.ninterfaces || super_unknown) {
        if (c->trans_state == TRANS_NOT_YET)
            c->trans_state = TRANS_UNKNOWN;
        return false;
    }
    c->trans_state = TRANS_BUSY;
    GPtrArray *a = g_ptr_array_new();
    GHashTable *in = g_hash_table_new(g_direct_hash, g_direct_equal);
    bool ok = true;
    if (c->super) {
        ok = transitive_ifaces(c->super, depth + 1);
        for (uint16_t i = 0; ok && i < c->super->ntrans; i++)
            append_missing(a, in, c->super->trans[i]);
    }
    for (uint16_t i = 0; ok && i < c->nifaces; i++) {
        rc_class *s = c->ifaces[i];
        ok = transitive_ifaces(s, depth + 1);
        for (uint16_t j = 0; ok && j < s->ntrans; j++)
            append_missing(a, in, s->trans[j]);
    }
    for (uint16_t i = 0; ok && i < c->nifaces; i++)
        append_missing(a, in, c->ifaces[i]);
    g_hash_table_destroy(in);
    if (ok && a->len <= UINT16_MAX) {
        c->ntrans = (uint16_t)a->len;
        c->trans = (rc_class **)g_ptr_array_free(a, FALSE);
        c->trans_state = TRANS_KNOWN;
        return true;
    }
    g_ptr_array_free(a, TRUE);
    c->trans_state = TRANS_UNKNOWN;
    return false;
}

/* Whether interface i has an itable entry in the classes implementing it:
 * an instance method other than a private one or an initializer
 * (interface_method_needs_itable_index), or a superinterface. */
static bool in_itables(const rc_program *p, const rc_class *i)
{
    if (i->ntrans)
        return true;
    for (uint32_t k = 0; k < i->nmethods; k++) {
        const rc_method *m = &p->mx[i->first_method + k].m;
        if (!(m->access & (CF_ACC_STATIC | CF_ACC_PRIVATE)) && m->name[0] != '<')
            return true;
    }
    return false;
}

/* The position of interface iface (by name: a loader's copy is the one the
 * class links to) in the itable of class c, or -1 when unknown. */
static int32_t itable_position(const rc_program *p, rc_class *c, const char *iface)
{
    int32_t pos = -1;
    g_mutex_lock((GMutex *)&p->itable_lock);
    if (transitive_ifaces(c, 0)) {
        int32_t k = 0;
        for (uint16_t i = 0; i < c->ntrans && pos < 0; i++) {
            rc_class *s = c->trans[i];
            if (!transitive_ifaces(s, 0))
                break;         /* its place depends on what is unknown */
            if (!in_itables(p, s))
                continue;
            if (strcmp(s->name, iface) == 0)
                pos = k;
            k++;
        }
    }
    g_mutex_unlock((GMutex *)&p->itable_lock);
    return pos;
}

static int cmp_itab(const void *a, const void *b)
{
    const itab_ent *x = a, *y = b;
    if (x->t != y->t)
        return (uintptr_t)x->t < (uintptr_t)y->t ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Every selected non-abstract method over the captured subtypes of c. The
 * walk is top-down: a class reached from its own superclass inherits that
 * class's chain selection unless it declares an override itself. */
typedef struct walk {
    rc_class *c;
    rc_mx *chain;              /* selection in the superclass chain; valid if known */
    bool known;
} walk;

static void cha(const rc_program *p, rc_class *c, const rc_mx *r, tset *out, bool *open,
                GArray *itab)
{
    if ((r->m.access & (CF_ACC_PRIVATE | CF_ACC_FINAL)) && !(r->m.access & CF_ACC_ABSTRACT)) {
        tset_add(out, r);
        return;
    }
    if (!is_interface(c))
        itab = NULL;
    guint8 *seen = g_new0(guint8, p->classes->len);
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(walk));
    for (rc_class *s = c; s; s = s->next_same_name)
        if (s->from_file) {
            walk w = { s, NULL, false };
            g_array_append_val(stack, w);
            seen[s->index] = 1;
        }
    while (stack->len) {
        walk w = g_array_index(stack, walk, stack->len - 1);
        g_array_set_size(stack, stack->len - 1);
        rc_class *d = w.c;
        rc_mx *chain;
        if (w.known) {
            rc_mx *x = declared(p, d, r->m.name, r->m.sig);
            chain = x && overrides(d, x, r) ? x : w.chain;
        } else {
            chain = is_interface(d) ? NULL : select_chain(p, d, r);
        }
        if (!is_interface(d) && !(d->access & CF_ACC_ABSTRACT) && class_may_have_run(p, d)) {
            rc_mx *x = chain ? chain : iface_lookup(p, d, r->m.name, r->m.sig);
            if (x && !(x->m.access & CF_ACC_ABSTRACT)) {
                tset_add(out, x);
                if (itab) {
                    itab_ent e = { &x->m, itable_position(p, d, c->name) };
                    g_array_append_val(itab, e);
                }
            }
        }
        if (d->children)
            for (guint i = 0; i < d->children->len; i++) {
                rc_class *k = g_ptr_array_index(d->children, i);
                if (!seen[k->index]) {
                    seen[k->index] = 1;
                    walk kw = { k, chain, !is_interface(d) && k->super == d };
                    g_array_append_val(stack, kw);
                }
            }
    }
    g_array_free(stack, TRUE);
    g_free(seen);
    /* Bare classes (hidden ones: lambda proxies and the like) have no known
     * supertypes: through an interface or Object they may be the receiver. */
    if (is_interface(c) || strcmp(c->name, "java/lang/Object") == 0) {
        for (guint i = 0; i < p->bare_virtual->len; i++) {
            const rc_mx *x = g_ptr_array_index(p->bare_virtual, i);
            if (x->m.name == r->m.name && x->m.sig == r->m.sig &&
                !(x->m.access & CF_ACC_ABSTRACT)) {
                tset_add(out, x);
                if (itab) {
                    itab_ent e = { &x->m, -1 };
                    g_array_append_val(itab, e);
                }
                *open = true;
            }
        }
        /* Classes prepared without a class file and not hidden may be
         * ordinary classes with any supertypes. */
        if (p->nbare_plain)
            *open = true;
    }
    if (p->ndamaged)
        *open = true;
}

/* An invocation: the method (klass, name, sig) an invoke names, called
 * with the semantics of op. */
typedef struct invocation {
    int op;
    const char *klass, *name, *sig;
} invocation;

/* Targets of an invocation from caller; through an interface, *itab gets
 * the targets' itable positions (owned by the program; may be NULL). */
static void invoke_targets(const rc_program *p, const rc_mx *caller, invocation iv, tset *out,
                           bool *open, const site **itab)
{
    int op = iv.op;
    rc_class *c = class_find(p, iv.klass);
    const char *name = interned(p, iv.name);
    const char *sig = interned(p, iv.sig);
    if (!c || !name || !sig) {
        *open = true; /* the class (or any method of that name) was never captured */
        return;
    }
    if (op == JVM_INVOKESPECIAL) {
        /* A call of a superclass's method (not <init>) starts at the
         * caller's direct superclass (ACC_SUPER semantics). */
        const rc_class *cur = caller->cls;
        if (strcmp(name, "<init>") != 0 && !is_interface(c) && cur->from_file && c != cur) {
            bool is_super = false;
            for (const rc_class *k = cur->super; k && !is_super; k = k->super)
                is_super = strcmp(k->name, c->name) == 0;
            if (is_super && cur->super)
                c = cur->super;
        }
    }
    rc_mx *r = resolve(p, c, name, sig);
    if (!r) {
        *open = true; /* signature-polymorphic, or a class that was not captured */
        return;
    }
    if (op == JVM_INVOKESTATIC || op == JVM_INVOKESPECIAL) {
        if (op == JVM_INVOKESPECIAL && (r->m.access & CF_ACC_ABSTRACT)) {
            *open = true;
            return;
        }
        tset_add(out, r);
        return;
    }
    /* Many sites share a resolved method: the analysis is kept per (class, method). */
    gpointer key = GSIZE_TO_POINTER((uint64_t)c->index << 32 | r->m.index);
    g_mutex_lock((GMutex *)&p->lock);
    site *st = g_hash_table_lookup(p->cha, key);
    g_mutex_unlock((GMutex *)&p->lock);
    if (!st) {
        tset one = { g_ptr_array_new(), g_hash_table_new(g_direct_hash, g_direct_equal) };
        bool o = false;
        GArray *pos = g_array_new(FALSE, FALSE, sizeof(itab_ent));
        cha(p, c, r, &one, &o, pos);
        st = g_malloc0(sizeof *st + one.t->len * sizeof st->t[0]);
        st->n = one.t->len;
        st->open = o;
        if (pos->len) {
            /* one entry per (target, position) */
            qsort(pos->data, pos->len, sizeof(itab_ent), cmp_itab);
            guint k = 0;
            for (guint i = 0; i < pos->len; i++)
                if (!k || cmp_itab(&g_array_index(pos, itab_ent, i),
                                   &g_array_index(pos, itab_ent, k - 1)))
                    g_array_index(pos, itab_ent, k++) = g_array_index(pos, itab_ent, i);
            st->nitab = k;
            st->itab = g_memdup2(pos->data, k * sizeof(itab_ent));
        }
        g_array_free(pos, TRUE);
        if (one.t->len)
            memcpy(st->t, one.t->pdata, one.t->len * sizeof st->t[0]);
        g_ptr_array_free(one.t, TRUE);
        g_hash_table_destroy(one.in);
        g_mutex_lock((GMutex *)&p->lock);
        site *have = g_hash_table_lookup(p->cha, key);
        if (have) {
            cha_site_free(st);      /* another thread analysed it first */
            st = have;
        } else {
            g_hash_table_insert(p->cha, key, st);
        }
        g_mutex_unlock((GMutex *)&p->lock);
    }
    for (uint32_t i = 0; i < st->n; i++)
        tset_add(out, (const rc_mx *)st->t[i]);
    if (st->open)
        *open = true;
    if (itab)
        *itab = st;
}

static bool lambda_bootstrap(const cf_class *cf, uint16_t bsm_idx, const cf_bsm **b)
{
    if (!cf->has_bsm || bsm_idx >= cf->nbsm)
        return false;
    *b = &cf->bsm[bsm_idx];
    uint8_t kind, tag;
    uint16_t ref;
    const char *k, *n, *s;
    if (cf_method_handle(cf, (*b)->method_handle, &kind, &ref) < 0 ||
        cf_member_ref(cf, ref, &tag, &k, &n, &s) < 0)
        return false;
    return kind == CF_REF_INVOKE_STATIC && strcmp(k, "java/lang/invoke/LambdaMetafactory") == 0 &&
           (strcmp(n, "metafactory") == 0 || strcmp(n, "altMetafactory") == 0);
}

static site *compute_site(const rc_program *p, const rc_mx *x, uint32_t bci)
{
    tset out = { g_ptr_array_new(), g_hash_table_new(g_direct_hash, g_direct_equal) };
    bool open = false;
    const site *itab = NULL;
    const rc_method *m = &x->m;
    const cf_class *cf = &x->cls->cf;
    uint8_t op = m->code[bci];
    uint16_t idx = (uint16_t)(m->code[bci + 1] << 8 | m->code[bci + 2]);
    uint8_t tag;
    const char *k, *n, *s;
    if (op >= JVM_INVOKEVIRTUAL && op <= JVM_INVOKEINTERFACE) {
        if (cf_member_ref(cf, idx, &tag, &k, &n, &s) < 0 || tag == CF_FIELDREF)
            open = true;
        else if (k[0] == '[')
            /* a method of an array type: java/lang/Object's (clone is the array's own) */
            invoke_targets(p, x, (invocation){ op, "java/lang/Object", n, s }, &out, &open,
                           NULL);
        else
            invoke_targets(p, x, (invocation){ op, k, n, s }, &out, &open,
                           op == JVM_INVOKEINTERFACE ? &itab : NULL);
    } else if (op == JVM_INVOKEDYNAMIC) {
        /* The site links once (bootstrap), then runs the call site's target;
         * for LambdaMetafactory that makes the lambda object, whose interface
         * method later calls the implementation method reported here. */
        open = true;
        uint16_t bsm;
        const cf_bsm *b;
        uint8_t kind;
        uint16_t ref;
        if (cf_dynamic(cf, idx, &bsm, &n, &s) == 0 && lambda_bootstrap(cf, bsm, &b) &&
            cf_method_handle(cf, cf_bsm_arg(cf, b, 1), &kind, &ref) == 0 &&
            cf_member_ref(cf, ref, &tag, &k, &n, &s) == 0) {
            bool ignored = false;
            int iop = kind == CF_REF_INVOKE_STATIC      ? JVM_INVOKESTATIC
                      : kind == CF_REF_INVOKE_INTERFACE ? JVM_INVOKEINTERFACE
                      : kind == CF_REF_INVOKE_VIRTUAL   ? JVM_INVOKEVIRTUAL
                                                        : JVM_INVOKESPECIAL;
            /* REF_invokeSpecial here names the method itself (private). */
            if (kind == CF_REF_INVOKE_SPECIAL || kind == CF_REF_NEW_INVOKE_SPECIAL) {
                rc_class *c = class_find(p, k);
                n = interned(p, n);
                s = interned(p, s);
                rc_mx *r = c && n && s ? resolve(p, c, n, s) : NULL;
                tset_add(&out, r);
            } else {
                invoke_targets(p, x, (invocation){ iop, k, n, s }, &out, &ignored, NULL);
            }
        }
    }
    /* An empty set is never final: the site may run with a receiver (or
     * call a method) that the captured classes do not show. */
    if (!out.t->len)
        open = true;
    site *st = g_malloc0(sizeof *st + out.t->len * sizeof st->t[0]);
    st->n = out.t->len;
    st->open = open;
    if (itab) {
        st->nitab = itab->nitab;
        st->itab = itab->itab;
    }
    if (out.t->len)
        memcpy(st->t, out.t->pdata, out.t->len * sizeof st->t[0]);
    g_ptr_array_free(out.t, TRUE);
    g_hash_table_destroy(out.in);
    return st;
}

/* The call site at instruction insn of x's CFG g; NULL where there is no
 * CFG, no such instruction or no invoke. */
static const site *site_at(rc_program *p, rc_mx *x, const rc_cfg *g, int64_t insn)
{
    if (!g || insn < 0 || insn >= g->ninsn)
        return NULL;
    uint8_t op = g->op[insn];
    if (op < JVM_INVOKEVIRTUAL || op > JVM_INVOKEDYNAMIC)
        return NULL;
    /* Lock-free after the first query of a site: a table per method,
     * published with compare-and-exchange like the CFG (a losing builder
     * frees its copy). The projection asks about the same sites millions of
     * times. */
    site **slots = g_atomic_pointer_get(&x->sites);
    if (!slots) {
        site **mine = g_new0(site *, g->ninsn);
        if (!g_atomic_pointer_compare_and_exchange(&x->sites, NULL, mine))
            g_free(mine);
        slots = g_atomic_pointer_get(&x->sites);
    }
    site *st = g_atomic_pointer_get(&slots[insn]);
    if (!st) {
        site *mine = compute_site(p, x, g->bci[insn]);
        if (!g_atomic_pointer_compare_and_exchange(&slots[insn], NULL, mine))
            g_free(mine);
        st = g_atomic_pointer_get(&slots[insn]);
    }
    return st;
}

/* The call targets of instruction insn of x's CFG g (see rc_call_targets). */
static size_t site_targets(rc_program *p, rc_mx *x, const rc_cfg *g, int64_t insn,
                           const rc_method *const **targets, bool *open)
{
    static const rc_method *const none[1];
    const site *st = site_at(p, x, g, insn);
    *targets = st ? st->t : none;
    *open = st && st->open;
    return st ? st->n : 0;
}

size_t rc_call_targets(rc_program *p, const rc_method *m, uint32_t bci,
                       const rc_method *const **targets, bool *open)
{
    rc_mx *x = mx_of(p, m);
    const rc_cfg *g = x ? rc_cfg_get(p, m) : NULL;
    return site_targets(p, x, g, rc_cfg_index(g, bci), targets, open);
}

size_t rc_call_targets_at(rc_program *p, const rc_method *m, uint32_t insn,
                          const rc_method *const **targets, bool *open)
{
    rc_mx *x = mx_of(p, m);
    const rc_cfg *g = x ? rc_cfg_get(p, m) : NULL;
    return site_targets(p, x, g, insn, targets, open);
}

bool rc_itable_may_run(rc_program *p, const rc_method *m, uint32_t insn, uint32_t pos,
                       const rc_method *t)
{
    rc_mx *x = mx_of(p, m);
    const site *st = x ? site_at(p, x, rc_cfg_get(p, m), insn) : NULL;
    if (!st || !st->nitab)
        return true;
    /* t's entries: a range of the sorted table */
    size_t lo = 0, hi = st->nitab;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)st->itab[mid].t < (uintptr_t)t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == st->nitab || st->itab[lo].t != t)
        return true;           /* not from the analysis: nothing known */
    for (size_t i = lo; i < st->nitab && st->itab[i].t == t; i++)
        if (st->itab[i].pos < 0 || (uint32_t)st->itab[i].pos == pos)
            return true;
    return false;
}

/* ------------------------------------------------------------------------ */
/* Calls the VM makes itself */

/* c's class initializer, then those of its superclasses and superinterfaces
 * (initializing c starts with them). Each class is visited once: interfaces
 * shared along the hierarchy (or a damaged, cyclic one) would otherwise make
 * the walk exponential. */
static void add_initializers(const rc_program *p, const rc_class *c, tset *out, GHashTable *seen,
                             int depth)
{
    const char *clinit = interned(p, "<clinit>"), *v = interned(p, "()V");
    for (; c && depth < 64; c = c->super, depth++) {
        if (!g_hash_table_add(seen, (gpointer)c))
            return;
        rc_mx *x = clinit && v ? declared(p, c, clinit, v) : NULL;
        if (x)
            tset_add(out, x);
        for (uint16_t i = 0; i < c->nifaces; i++)
            add_initializers(p, c->ifaces[i], out, seen, depth + 1);
    }
}

static void add_named(const rc_program *p, const char *klass, const char *const *names,
                      const char *sig, tset *out)
{
    for (rc_class *c = class_find(p, klass); c; c = c->next_same_name)
        for (uint32_t j = 0; j < c->nmethods; j++) {
            rc_mx *x = &p->mx[c->first_method + j];
            for (const char *const *n = names; *n; n++)
                if (!strcmp(x->m.name, *n) && (!sig || !strcmp(x->m.sig, sig)))
                    tset_add(out, x);
        }
}

/* The loadClass(String) that each class loader class declares (the VM calls
 * it virtually on the loader that resolves a class). */
static GPtrArray *class_loader_entries(const rc_program *p)
{
    GPtrArray *v = g_ptr_array_new();
    const char *name = interned(p, "loadClass");
    const char *sig = interned(p, "(Ljava/lang/String;)Ljava/lang/Class;");
    if (!name || !sig)
        return v;
    for (guint i = 0; i < p->classes->len; i++) {
        const rc_class *c = g_ptr_array_index(p->classes, i);
        bool loader = false;
        int depth = 0;     /* a damaged hierarchy may loop */
        for (const rc_class *s = c; s && !loader && depth < 64; s = s->super, depth++)
            loader = !strcmp(s->name, "java/lang/ClassLoader");
        rc_mx *x = loader ? declared(p, c, name, sig) : NULL;
        if (x)
            g_ptr_array_add(v, x);
    }
    return v;
}

static site *compute_vm_site(rc_program *p, const rc_mx *x, uint32_t bci)
{
    tset out = { g_ptr_array_new(), g_hash_table_new(g_direct_hash, g_direct_equal) };
    const rc_method *m = &x->m;
    const cf_class *cf = &x->cls->cf;
    uint8_t op = m->code[bci];
    uint16_t idx = bci + 2 < m->code_len ? (uint16_t)(m->code[bci + 1] << 8 | m->code[bci + 2]) : 0;
    const char *k = NULL, *n, *s;
    uint8_t tag;
    bool loads = false;     /* may load a class through a Java class loader */
    switch (op) {
    case JVM_NEW:
        k = cf_class_name(cf, idx);
        loads = true;
        break;
    case JVM_GETSTATIC:
    case JVM_PUTSTATIC:
    case JVM_INVOKESTATIC:
        if (cf_member_ref(cf, idx, &tag, &k, &n, &s) < 0)
            k = NULL;
        loads = true;
        break;
    case JVM_GETFIELD:
    case JVM_PUTFIELD:
    case JVM_INVOKEVIRTUAL:
    case JVM_INVOKESPECIAL:
    case JVM_INVOKEINTERFACE:
    case JVM_ANEWARRAY:
    case JVM_CHECKCAST:
    case JVM_INSTANCEOF:
    case JVM_MULTIANEWARRAY:
    case JVM_LDC:
    case JVM_LDC_W:
        loads = true;
        break;
    default:
        break;
    }
    /* 1. Class initialization (new, getstatic, putstatic, invokestatic of a
     *    class not initialized yet). */
    if (k && k[0] != '[') {
        GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
        for (rc_class *c = class_find(p, k); c; c = c->next_same_name)
            add_initializers(p, c, &out, seen, 0);
        g_hash_table_destroy(seen);
    }
    /* 2. Resolving a class that a Java class loader defines: the VM calls
     *    the loader's loadClass(String). */
    if (loads)
        for (guint i = 0; i < p->load_class->len; i++)
            tset_add(&out, g_ptr_array_index(p->load_class, i));
    /* 3. Linking invokedynamic, method handle invocations and constants:
     *    MethodHandleNatives' up-calls. */
    if (op == JVM_INVOKEDYNAMIC || op == JVM_INVOKEVIRTUAL || op == JVM_LDC || op == JVM_LDC_W ||
        op == JVM_LDC2_W) {
        static const char *const link[] = { "linkCallSite", "linkMethod",
                                            "linkMethodHandleConstant", "findMethodHandleType",
                                            "linkDynamicConstant", NULL };
        add_named(p, "java/lang/invoke/MethodHandleNatives", link, NULL, &out);
    }
    site *st = g_malloc0(sizeof *st + out.t->len * sizeof st->t[0]);
    st->n = out.t->len;
    st->open = true;      /* the VM calls other methods too (and JNI code anything) */
    if (out.t->len)
        memcpy(st->t, out.t->pdata, out.t->len * sizeof st->t[0]);
    g_ptr_array_free(out.t, TRUE);
    g_hash_table_destroy(out.in);
    return st;
}

size_t rc_vm_call_targets(rc_program *p, const rc_method *m, uint32_t bci,
                          const rc_method *const **targets)
{
    static const rc_method *const none[1];
    *targets = none;
    rc_mx *x = mx_of(p, m);
    const rc_cfg *g = x ? rc_cfg_get(p, m) : NULL;
    if (!g || rc_cfg_index(g, bci) < 0)
        return 0;
    gpointer key = GSIZE_TO_POINTER((uint64_t)m->index << 32 | bci);
    g_mutex_lock(&p->lock);
    site *st = g_hash_table_lookup(p->vm_sites, key);
    g_mutex_unlock(&p->lock);
    if (!st) {
        g_mutex_lock(&p->lock);
        if (!p->load_class)
            p->load_class = class_loader_entries(p);
        g_mutex_unlock(&p->lock);
        site *mine = compute_vm_site(p, x, bci);
        g_mutex_lock(&p->lock);
        st = g_hash_table_lookup(p->vm_sites, key);
        if (!st) {
            g_hash_table_insert(p->vm_sites, key, mine);
            st = mine;
        } else {
            g_free(mine);
        }
        g_mutex_unlock(&p->lock);
    }
    *targets = st->t;
    return st->n;
}

/* ---- receivers ------------------------------------------------------------ */

/* By name: a class loaded by two loaders is one class to these checks, so
 * that a bound never rules out a target for being another loader's copy. */
static bool is_subclass(const rc_class *a, const rc_class *b)
{
    for (const rc_class *k = a; k; k = k->super)
        if (k->first_same_name == b->first_same_name)
            return true;
    return false;
}

/* Whether c's superclass chain is captured up to java/lang/Object. */
static bool chain_complete(const rc_program *p, const rc_class *c)
{
    const rc_class *k = c;
    while (k->super)
        k = k->super;
    return k == p->object && p->object;
}

const rc_class *rc_receiver_bound(rc_program *p, const rc_method *t)
{
    rc_mx *x = mx_of(p, t);
    if (!x || (t->access & CF_ACC_STATIC) || !x->cls || !x->cls->from_file ||
        is_interface(x->cls))
        return NULL;
    return x->cls;
}

bool rc_receiver_may_run(rc_program *p, const rc_class *bound, int op, const rc_method *t,
                         const rc_class **narrowed)
{
    *narrowed = bound;
    const rc_class *c = rc_receiver_bound(p, t);
    if (!c)
        return true;
    if (!bound || is_subclass(c, bound)) {
        *narrowed = c;              /* declared in the bound's class or below */
        return true;
    }
    /* a super call or a private method (never overridden): t itself */
    if (op == JVM_INVOKESPECIAL || (t->access & CF_ACC_PRIVATE))
        return true;
    if (is_subclass(bound, c)) {
        const rc_mx *sel = select_chain(p, bound, mx_of(p, t));
        return !sel || strcmp(sel->m.klass, t->klass) == 0;
    }
    return !(chain_complete(p, c) && chain_complete(p, bound));
}

/* Values (not slots) an instruction takes from the operand stack and puts
 * on it; false for those whose effect depends on value categories (dup,
 * pop2, swap ...), control transfers and wide. */
static bool value_effect(const rc_mx *x, uint32_t bci, int *pop, int *push)
{
    const uint8_t *code = x->m.code;
    uint8_t op = code[bci];
    *pop = 0;
    *push = 0;
    if (op == JVM_NOP || op == JVM_IINC)
        return true;
    if (op <= JVM_ALOAD_3) {                            /* constants, ldc, loads */
        *push = 1;
        return true;
    }
    if (op <= JVM_SALOAD) {                             /* array loads */
        *pop = 2;
        *push = 1;
        return true;
    }
    if (op <= JVM_ASTORE_3) {                           /* stores */
        *pop = 1;
        return true;
    }
    if (op <= JVM_SASTORE) {                            /* array stores */
        *pop = 3;
        return true;
    }
    if (op == JVM_POP) {
        *pop = 1;
        return true;
    }
    if (op <= JVM_SWAP)                                 /* pop2, dup*, swap */
        return false;
    if (op <= JVM_DCMPG) {                              /* arithmetic, conversions, compares */
        bool unary = (op >= JVM_INEG && op <= JVM_DNEG) || (op >= JVM_I2L && op <= JVM_I2S);
        *pop = unary ? 1 : 2;
        *push = 1;
        return true;
    }
    switch (op) {
    case JVM_GETSTATIC: *push = 1; return true;
    case JVM_PUTSTATIC: *pop = 1; return true;
    case JVM_GETFIELD: *pop = 1; *push = 1; return true;
    case JVM_PUTFIELD: *pop = 2; return true;
    case JVM_NEW: *push = 1; return true;
    case JVM_NEWARRAY: case JVM_ANEWARRAY: case JVM_ARRAYLENGTH: case JVM_CHECKCAST:
    case JVM_INSTANCEOF:
        *pop = 1; *push = 1; return true;
    case JVM_MONITORENTER: case JVM_MONITOREXIT: *pop = 1; return true;
    case JVM_MULTIANEWARRAY: *pop = code[bci + 3]; *push = 1; return true;
    default: break;
    }
    if (op < JVM_INVOKEVIRTUAL || op > JVM_INVOKEDYNAMIC)
        return false;
    uint16_t idx = (uint16_t)(code[bci + 1] << 8 | code[bci + 2]);
    const char *k, *n, *s;
    uint8_t tag;
    uint16_t bsm;
    if (op == JVM_INVOKEDYNAMIC ? cf_dynamic(&x->cls->cf, idx, &bsm, &n, &s) < 0
                               : cf_member_ref(&x->cls->cf, idx, &tag, &k, &n, &s) < 0)
        return false;
    if (s[0] != '(')
        return false;
    int args = 0;
    const char *q = s + 1;
    while (*q && *q != ')') {
        while (*q == '[')
            q++;
        if (*q == 'L') {
            q = strchr(q, ';');
            if (!q)
                return false;
        } else if (!*q) {
            return false;
        }
        q++;
        args++;
    }
    if (*q != ')')
        return false;
    *pop = args + (op == JVM_INVOKESTATIC || op == JVM_INVOKEDYNAMIC ? 0 : 1);
    *push = q[1] != 'V';
    return true;
}

/* Whether the invoke at insn receives this (see rc_receiver_is_this);
 * entered marks the instructions some edge other than a fall-through enters. */
static bool invoke_on_this(const rc_mx *x, const rc_cfg *g, const uint8_t *entered,
                           uint32_t insn)
{
    uint8_t op = g->op[insn];
    if (op != JVM_INVOKEVIRTUAL && op != JVM_INVOKESPECIAL && op != JVM_INVOKEINTERFACE)
        return false;
    int pop, push;
    if (!value_effect(x, g->bci[insn], &pop, &push) || pop < 1)
        return false;
    int above = pop - 1;                /* values above the receiver */
    for (uint32_t j = insn; j-- > 0;) {
        if (entered[j + 1] || !value_effect(x, g->bci[j], &pop, &push))
            return false;               /* a merge point, or an effect not counted */
        if (above < push) {
            uint8_t o = g->op[j];
            return push == 1 &&
                   (o == JVM_ALOAD_0 || (o == JVM_ALOAD && x->m.code[g->bci[j] + 1] == 0));
        }
        above += pop - push;
    }
    return false;
}

static uint8_t *on_this_table(const rc_mx *x, const rc_cfg *g)
{
    uint8_t *t = g_new0(uint8_t, g->ninsn + 1);
    const rc_method *m = &x->m;
    if ((m->access & CF_ACC_STATIC) || !x->cls->from_file)
        return t;
    /* local 0 stays `this` only if nothing stores into it */
    for (uint32_t i = 0; i < g->ninsn; i++) {
        const uint8_t *c = m->code + g->bci[i];
        if (g->op[i] == JVM_ASTORE_0 || (g->op[i] == JVM_ASTORE && c[1] == 0) ||
            (g->op[i] == JVM_WIDE && c[1] == JVM_ASTORE && c[2] == 0 && c[3] == 0))
            return t;
    }
    uint8_t *entered = g_new0(uint8_t, g->ninsn + 1);
    for (uint32_t i = 0; i < g->ninsn; i++)
        for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++)
            if (g->edge[e].kind != RC_EDGE_NEXT && g->edge[e].to < g->ninsn)
                entered[g->edge[e].to] = 1;
    for (uint32_t i = 0; i < g->ninsn; i++)
        t[i] = invoke_on_this(x, g, entered, i);
    g_free(entered);
    return t;
}

bool rc_receiver_is_this(rc_program *p, const rc_method *m, uint32_t insn)
{
    rc_mx *x = mx_of(p, m);
    const rc_cfg *g = rc_cfg_get(p, m);
    if (!x || !g || insn >= g->ninsn)
        return false;
    /* Made once per method (the projection asks at every call): threads
     * racing each make one, the first stored wins. */
    uint8_t *t = g_atomic_pointer_get(&x->on_this);
    if (!t) {
        uint8_t *mine = on_this_table(x, g);
        if (!g_atomic_pointer_compare_and_exchange(&x->on_this, NULL, mine))
            g_free(mine);
        t = g_atomic_pointer_get(&x->on_this);
    }
    return t[insn];
}

/* ------------------------------------------------------------------------ */
/* The constructor a constructor calls on its own object */

static const rc_method *find_this_call(rc_program *p, const rc_method *m, uint32_t *insn)
{
    const rc_cfg *g = rc_cfg_get(p, m);
    if (!g || strcmp(m->name, "<init>") || !strcmp(m->klass, "java/lang/Object"))
        return NULL;
    const rc_method *found = NULL;
    for (uint32_t i = 0; i < g->ninsn; i++) {
        if (g->op[i] != JVM_INVOKESPECIAL || !rc_receiver_is_this(p, m, i))
            continue;
        const rc_method *const *t;
        bool open = false;
        if (rc_call_targets_at(p, m, i, &t, &open) != 1 || open)
            return NULL;       /* unknown: it may be the one */
        if (strcmp(t[0]->name, "<init>"))
            continue;          /* a private or super method called on this */
        if (found)
            return NULL;       /* two: which one runs depends on the path */
        found = t[0];
        *insn = i;
    }
    return found;
}

const rc_method *rc_this_call(rc_program *p, const rc_method *m, uint32_t *insn)
{
    rc_mx *x = mx_of(p, m);
    if (!x)
        return NULL;
    const rc_method *t = g_atomic_pointer_get(&x->this_call);
    if (!t) {
        uint32_t i = 0;
        t = find_this_call(p, m, &i);
        g_atomic_int_set(&x->this_call_insn, (gint)i);  /* the same from every thread */
        if (!g_atomic_pointer_compare_and_exchange(&x->this_call, NULL, t ? t : &no_this_call))
            t = g_atomic_pointer_get(&x->this_call);
    }
    if (t == &no_this_call)
        return NULL;
    if (insn)
        *insn = (uint32_t)g_atomic_int_get(&x->this_call_insn);
    return t;
}
