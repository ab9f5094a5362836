/* Method and thread names (see names.h). */
#include "profile/names.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "common/jmrec.h"
#include "reconstruct/reference.h"

struct pf_names {
    GHashTable *methods;  /* uint64 id -> pf_method_name */
    GHashTable *threads;  /* uint32 tid -> char * */
    bool simple;          /* pf_names_readable without parameters */
};

static void method_free(gpointer p)
{
    pf_method_name *m = p;
    g_free(m->class_name);
    g_free(m->name);
    g_free(m->sig);
    g_free(m->readable);
    g_free(m->simple);
    g_free(m);
}

pf_names *pf_names_new(void)
{
    pf_names *n = g_new0(pf_names, 1);
    n->methods = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, method_free);
    n->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    return n;
}

void pf_names_free(pf_names *n)
{
    if (!n)
        return;
    g_hash_table_destroy(n->methods);
    g_hash_table_destroy(n->threads);
    g_free(n);
}

/* One field type of a method descriptor starting at *p, in source form;
 * advances *p. Malformed descriptors end with what was read. */
static void append_type(GString *out, const char **p)
{
    int dims = 0;
    while (**p == '[') {
        dims++;
        (*p)++;
    }
    char c = **p;
    if (!c)
        return;
    (*p)++;
    switch (c) {
    case 'B': g_string_append(out, "byte"); break;
    case 'C': g_string_append(out, "char"); break;
    case 'D': g_string_append(out, "double"); break;
    case 'F': g_string_append(out, "float"); break;
    case 'I': g_string_append(out, "int"); break;
    case 'J': g_string_append(out, "long"); break;
    case 'S': g_string_append(out, "short"); break;
    case 'Z': g_string_append(out, "boolean"); break;
    case 'V': g_string_append(out, "void"); break;
    case 'L': {
        const char *end = strchr(*p, ';');
        size_t len = end ? (size_t)(end - *p) : strlen(*p);
        for (size_t i = 0; i < len; i++)
            g_string_append_c(out, (*p)[i] == '/' ? '.' : (*p)[i]);
        *p += len + (end ? 1 : 0);
        break;
    }
    default:
        g_string_append_c(out, c);
    }
    while (dims--)
        g_string_append(out, "[]");
}

char *pf_readable_params(const char *sig)
{
    GString *out = g_string_new("(");
    const char *p = sig;
    if (*p == '(')
        p++;
    bool first = true;
    while (*p && *p != ')') {
        if (!first)
            g_string_append(out, ", ");
        first = false;
        const char *before = p;
        append_type(out, &p);
        if (p == before)
            break;
    }
    g_string_append_c(out, ')');
    return g_string_free(out, FALSE);
}

void pf_names_add_method(pf_names *n, uint64_t method_id, const char *class_sig,
                         const char *name, const char *sig, uint32_t modifiers)
{
    pf_method_name *m = g_new0(pf_method_name, 1);
    size_t len = strlen(class_sig);
    if (len >= 2 && class_sig[0] == 'L' && class_sig[len - 1] == ';')
        m->class_name = g_strndup(class_sig + 1, len - 2);
    else
        m->class_name = g_strdup(class_sig);
    m->name = g_strdup(name);
    m->sig = g_strdup(sig);
    char *dotted = g_strdup(m->class_name);
    for (char *c = dotted; *c; c++)
        if (*c == '/')
            *c = '.';
    char *params = pf_readable_params(sig);
    m->readable = g_strdup_printf("%s.%s%s", dotted, name, params);
    m->simple = g_strdup_printf("%s.%s", dotted, name);
    m->modifiers = modifiers;
    g_free(params);
    g_free(dotted);
    gint64 *key = g_new(gint64, 1);
    *key = (gint64)method_id;
    g_hash_table_replace(n->methods, key, m);
}

void pf_names_add_thread(pf_names *n, uint32_t tid, const char *name)
{
    if (!g_hash_table_contains(n->threads, GUINT_TO_POINTER(tid)))
        g_hash_table_insert(n->threads, GUINT_TO_POINTER(tid), g_strdup(name));
}

const pf_method_name *pf_names_method(const pf_names *n, uint64_t method_id)
{
    gint64 key = (gint64)method_id;
    return g_hash_table_lookup(n->methods, &key);
}

const char *pf_names_readable(const pf_names *n, uint64_t method_id, char *buf, size_t len)
{
    const pf_method_name *m = pf_names_method(n, method_id);
    if (m)
        return n->simple ? m->simple : m->readable;
    if (!method_id)
        return "?";     /* a frame whose method the trace could not name, as the flow prints it */
    snprintf(buf, len, "0x%" PRIx64, method_id);
    return buf;
}

void pf_names_set_simple(pf_names *n, bool simple)
{
    n->simple = simple;
}

const char *pf_names_thread(const pf_names *n, uint32_t tid)
{
    return g_hash_table_lookup(n->threads, GUINT_TO_POINTER(tid));
}

pf_names *pf_names_load(const char *dir, char *err, size_t errlen)
{
    char *meta = ref_meta_dir(dir);
    jm_reader *r = meta ? jm_reader_open(meta, err, errlen) : NULL;
    free(meta);
    if (!r)
        return NULL;
    pf_names *n = pf_names_new();
    jm_record rec;
    jm_rec p;
    int rc;
    while ((rc = jm_reader_next(r, &rec)) == 1) {
        if (rec.type != JM_METHOD && rec.type != JM_THREAD_START)
            continue;
        if (jm_parse(&rec, &p, NULL, 0) < 0)
            continue;   /* the flow reader reports bad records */
        if (rec.type == JM_METHOD) {
            char *cls = g_strndup((const char *)p.u.method.class_sig.p, p.u.method.class_sig.len);
            char *name = g_strndup((const char *)p.u.method.name.p, p.u.method.name.len);
            char *sig = g_strndup((const char *)p.u.method.sig.p, p.u.method.sig.len);
            pf_names_add_method(n, p.u.method.method_id, cls, name, sig, p.u.method.modifiers);
            g_free(cls);
            g_free(name);
            g_free(sig);
        } else {
            char *name = g_strndup((const char *)p.u.thread.name.p, p.u.thread.name.len);
            pf_names_add_thread(n, p.u.thread.native_tid, name);
            g_free(name);
        }
    }
    jm_reader_close(r);
    return n;
}

/* ---- patterns ------------------------------------------------------------ */

struct pf_method_pattern {
    GPatternSpec *spec;
    bool matched;
};

pf_method_pattern *pf_method_pattern_new(const char *glob)
{
    pf_method_pattern *p = g_new0(pf_method_pattern, 1);
    p->spec = g_pattern_spec_new(glob);
    return p;
}

void pf_method_pattern_free(pf_method_pattern *p)
{
    if (!p)
        return;
    g_pattern_spec_free(p->spec);
    g_free(p);
}

static bool spec_match(pf_method_pattern *p, const char *s)
{
    if (!g_pattern_spec_match_string(p->spec, s))
        return false;
    p->matched = true;
    return true;
}

bool pf_method_pattern_match(pf_method_pattern *p, const char *class_name, const char *name,
                             const char *sig)
{
    GString *s = g_string_new(class_name);
    g_string_append_c(s, '.');
    g_string_append(s, name);
    size_t head = s->len;
    g_string_append(s, sig);
    bool hit = spec_match(p, s->str);                 /* JVM style */
    if (!hit) {
        for (size_t i = 0; i < head; i++)
            if (s->str[i] == '/')
                s->str[i] = '.';
        g_string_truncate(s, head);
        hit = spec_match(p, s->str);                  /* Java style, no parameters */
        if (!hit) {
            char *params = pf_readable_params(sig);
            g_string_append(s, params);
            g_free(params);
            hit = spec_match(p, s->str);              /* Java style */
        }
    }
    g_string_free(s, TRUE);
    return hit;
}

bool pf_method_pattern_match_jvm(pf_method_pattern *p, const char *jvm_name)
{
    const char *paren = strchr(jvm_name, '(');
    if (!paren)
        return spec_match(p, jvm_name);
    /* the class ends at the last '.' before the parameters */
    const char *dot = NULL;
    for (const char *c = jvm_name; c < paren; c++)
        if (*c == '.')
            dot = c;
    if (!dot)
        return spec_match(p, jvm_name);
    char *cls = g_strndup(jvm_name, (size_t)(dot - jvm_name));
    char *name = g_strndup(dot + 1, (size_t)(paren - dot - 1));
    bool hit = pf_method_pattern_match(p, cls, name, paren);
    g_free(cls);
    g_free(name);
    return hit;
}

bool pf_method_pattern_matched(const pf_method_pattern *p)
{
    return p->matched;
}

bool pf_class_pattern_match(const char *glob, const char *internal_name)
{
    if (g_pattern_match_simple(glob, internal_name))
        return true;
    char *dotted = g_strdup(internal_name);
    for (char *c = dotted; *c; c++)
        if (*c == '/')
            *c = '.';
    bool hit = g_pattern_match_simple(glob, dotted);
    g_free(dotted);
    return hit;
}
