/* Profile exports (see export.h). */
#include "profile/export.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include <glib.h>

#include "common/json.h"

char *pf_thread_label(const pf_names *names, const pf_node *n)
{
    uint32_t tid = (uint32_t)n->site;
    const char *name = names ? pf_names_thread(names, tid) : NULL;
    return g_strdup_printf("%s (tid %" PRIu32 ")", name ? name : "thread", tid);
}

/* ---- cct-json ------------------------------------------------------------ */

typedef void (*node_field)(json_w *j, const pf_node *n, const int32_t *method_index);

static void field_parent(json_w *j, const pf_node *n, const int32_t *mi)
{
    (void)mi;
    json_i64(j, n->parent);
}

static void field_calls(json_w *j, const pf_node *n, const int32_t *mi)
{
    (void)mi;
    json_u64(j, n->calls);
}

static void field_bytecodes(json_w *j, const pf_node *n, const int32_t *mi)
{
    (void)mi;
    json_u64(j, n->bytecodes);
}

static void field_self_bytecodes(json_w *j, const pf_node *n, const int32_t *mi)
{
    (void)mi;
    json_u64(j, n->self_bytecodes);
}

static void field_time(json_w *j, const pf_node *n, const int32_t *mi)
{
    (void)mi;
    json_u64(j, n->time);
}

static void field_self_time(json_w *j, const pf_node *n, const int32_t *mi)
{
    (void)mi;
    json_u64(j, n->self_time);
}

/* A node's PF_KIND_* with what the method's modifiers add: a native
 * method's frame runs no bytecodes, whatever its call looked like. */
static uint32_t node_kinds(const pf_node *n, const pf_names *names)
{
    const pf_method_name *mn = names && n->method != PF_NO_METHOD
                               ? pf_names_method(names, n->method) : NULL;
    if (mn && (mn->modifiers & PF_ACC_NATIVE))
        return (n->kinds & ~(uint32_t)(PF_KIND_INTERPRETED | PF_KIND_COMPILED)) | PF_KIND_NATIVE;
    return n->kinds;
}

int pf_export_cct_json(FILE *out, const pf_cct *t, const pf_names *names, const char *title)
{
    return pf_export_cct_json_hz(out, t, names, title, 0);
}

int pf_export_cct_json_hz(FILE *out, const pf_cct *t, const pf_names *names, const char *title,
                          double tsc_hz)
{
    /* Methods numbered in order of first appearance in preorder. */
    GHashTable *index = g_hash_table_new(g_int64_hash, g_int64_equal);
    int32_t *method_index = g_new(int32_t, t->count);
    GArray *methods = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    for (uint32_t i = 0; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        if (n->method == PF_NO_METHOD) {
            method_index[i] = -1;
            continue;
        }
        gpointer v = g_hash_table_lookup(index, &n->method);
        if (!v) {
            g_array_append_val(methods, n->method);
            v = GINT_TO_POINTER((gint)methods->len);
            g_hash_table_insert(index, (gpointer)&t->nodes[i].method, v);
        }
        method_index[i] = GPOINTER_TO_INT(v) - 1;
    }
    json_w j;
    json_init(&j, out, false);
    json_obj(&j);
    json_kstr(&j, "format", "jpt-cct");
    json_ku64(&j, "version", 1);
    json_kstr(&j, "title", title ? title : "");
    if (tsc_hz > 0)
        json_ku64(&j, "tsc_hz", (uint64_t)(tsc_hz + 0.5));
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
    for (guint m = 0; m < methods->len; m++) {
        uint64_t id = g_array_index(methods, uint64_t, m);
        const pf_method_name *mn = names ? pf_names_method(names, id) : NULL;
        char unknown[32];
        snprintf(unknown, sizeof unknown, "0x%" PRIx64, id);
        json_obj(&j);
        json_kstr(&j, "class", mn ? mn->class_name : "?");
        json_kstr(&j, "name", mn ? mn->name : unknown);
        json_kstr(&j, "sig", mn ? mn->sig : "");
        json_end(&j);
    }
    json_end(&j);
    json_key(&j, "nodes");
    json_obj(&j);
    static const struct { const char *key; node_field put; } fields[] = {
        { "parent", field_parent }, { "method", NULL }, { "calls", field_calls },
        { "bytecodes", field_bytecodes }, { "self_bytecodes", field_self_bytecodes },
        { "time", field_time }, { "self_time", field_self_time },
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        json_key(&j, fields[f].key);
        json_arr(&j);
        for (uint32_t i = 0; i < t->count; i++) {
            if (fields[f].put)
                fields[f].put(&j, &t->nodes[i], method_index);
            else
                json_i64(&j, method_index[i]);
        }
        json_end(&j);
    }
    json_key(&j, "kind");
    json_arr(&j);
    for (uint32_t i = 0; i < t->count; i++)
        json_u64(&j, node_kinds(&t->nodes[i], names));
    json_end(&j);
    json_end(&j);
    json_key(&j, "labels");
    json_obj(&j);
    json_kstr(&j, "0", "all threads");
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        if (n->parent != 0 || n->method != PF_NO_METHOD)
            continue;
        char key[16];
        snprintf(key, sizeof key, "%" PRIu32, i);
        char *label = pf_thread_label(names, n);
        json_kstr(&j, key, label);
        g_free(label);
    }
    json_end(&j);
    json_end(&j);
    json_finish(&j);
    g_array_free(methods, TRUE);
    g_free(method_index);
    g_hash_table_destroy(index);
    return ferror(out) ? -1 : 0;
}

/* ---- folded stacks ------------------------------------------------------- */

/* A frame name safe for the folded format: ';' separates frames and the
 * last space separates the value. */
static void append_frame(GString *s, const char *name)
{
    for (const char *c = name; *c; c++)
        g_string_append_c(s, *c == ';' ? ':' : (*c == '\n' || *c == '\r') ? ' ' : *c);
}

static int folded_tree(FILE *out, const pf_cct *t, const pf_names *names, pf_metric by)
{
    GString *path = g_string_new(NULL);
    size_t *len_after = g_new(size_t, t->count); /* path length after node i's frame */
    len_after[0] = 0;
    char buf[32];
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        g_string_truncate(path, len_after[n->parent]);
        if (path->len)
            g_string_append_c(path, ';');
        if (n->method == PF_NO_METHOD) {
            char *label = pf_thread_label(names, n);
            append_frame(path, label);
            g_free(label);
        } else {
            append_frame(path, pf_names_readable(names, n->method, buf, sizeof buf));
        }
        len_after[i] = path->len;
        uint64_t v = pf_node_self(n, by);
        if (v)
            fprintf(out, "%s %" PRIu64 "\n", path->str, v);
    }
    g_free(len_after);
    g_string_free(path, TRUE);
    return ferror(out) ? -1 : 0;
}

int pf_export_folded(FILE *out, const pf_cct *t, const pf_names *names, pf_metric by,
                     bool per_thread)
{
    if (per_thread)
        return folded_tree(out, t, names, by);
    pf_cct *merged = pf_cct_new(&t->opts);
    if (!merged || pf_cct_merge(merged, t, true) < 0) {
        pf_cct_free(merged);
        return -1;
    }
    pf_cct *fin = pf_cct_finalize(merged);
    pf_cct_free(merged);
    if (!fin)
        return -1;
    int rc = folded_tree(out, fin, names, by);
    pf_cct_free(fin);
    return rc;
}

/* ---- Chrome trace events ------------------------------------------------- */

/* Duration events, "B" at a call and "E" at its return, written as the flow
 * goes: per thread in begin order and nested by construction. Every event of
 * a thread gets its own nanosecond, one after the thread's previous event
 * when the flow gives the same time (compiled code's frames often share a
 * TSC): viewers that order events by time alone (speedscope pairs a frame's
 * end with the stack's top by time) then nest them as the flow did, and no
 * span is empty. */

typedef struct chrome_thread {
    uint32_t tid;
    uint64_t *frames;        /* methods of the open frames, outermost first */
    uint32_t depth, cap;
    uint64_t last_tsc;
    int64_t first_ns, last_ns;   /* times of the thread's first and last events; -1: none */
    FILE *events;            /* speedscope: the thread's events, written out at the end */
} chrome_thread;

struct pf_chrome {
    FILE *out;
    const pf_names *names;
    uint64_t t0;
    double ns_per_tick;
    GHashTable *threads;
    long long spans;
    bool first;              /* no trace event written yet */
    /* speedscope's evented format: a profile per thread, frames shared */
    bool speedscope;
    char *title;
    GHashTable *frame_index; /* method id -> index + 1 */
    GArray *frame_methods;   /* uint64 method ids by index */
    bool tmp_failed;
};

static void chrome_thread_free(gpointer p)
{
    chrome_thread *th = p;
    if (th->events)
        fclose(th->events);
    g_free(th->frames);
    g_free(th);
}

/* A JSON string with the shared writer's escaping. */
static void put_json_string(FILE *out, const char *s)
{
    json_w one;
    json_init(&one, out, false);
    json_str(&one, s);
}

pf_chrome *pf_chrome_new(FILE *out, const pf_names *names, uint64_t t0_tsc, double tsc_hz)
{
    pf_chrome *c = g_new0(pf_chrome, 1);
    c->out = out;
    c->names = names;
    c->t0 = t0_tsc;
    c->ns_per_tick = 1e9 / tsc_hz;
    c->first = true;
    c->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, chrome_thread_free);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
    return c;
}

pf_chrome *pf_speedscope_new(FILE *out, const pf_names *names, uint64_t t0_tsc, double tsc_hz,
                             const char *title)
{
    pf_chrome *c = g_new0(pf_chrome, 1);
    c->out = out;
    c->names = names;
    c->t0 = t0_tsc;
    c->ns_per_tick = 1e9 / tsc_hz;
    c->speedscope = true;
    c->title = g_strdup(title);
    c->frame_index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    c->frame_methods = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    c->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, chrome_thread_free);
    return c;
}

/* Whole nanoseconds since t0. */
static int64_t chrome_ns(const pf_chrome *c, uint64_t tsc)
{
    return (int64_t)((double)((int64_t)(tsc - c->t0)) * c->ns_per_tick + 0.5);
}

static void chrome_sep(pf_chrome *c)
{
    fputs(c->first ? "\n" : ",\n", c->out);
    c->first = false;
}

/* Microseconds with nanosecond digits, written exactly (no rounding to a
 * few significant digits). */
static void put_us(FILE *out, int64_t ns)
{
    if (ns < 0) {
        fputc('-', out);
        ns = -ns;
    }
    fprintf(out, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

/* speedscope: the index of the method's frame. */
static uint32_t speedscope_frame(pf_chrome *c, uint64_t method)
{
    gpointer v = g_hash_table_lookup(c->frame_index, &method);
    if (v)
        return GPOINTER_TO_UINT(v) - 1;
    g_array_append_val(c->frame_methods, method);
    uint64_t *key = g_new(uint64_t, 1);
    *key = method;
    g_hash_table_insert(c->frame_index, key, GUINT_TO_POINTER(c->frame_methods->len));
    return c->frame_methods->len - 1;
}

/* One "B" or "E" event of the thread at tsc, at least 1 ns after its last
 * (speedscope: "O" or "C" into the thread's own list). */
static void chrome_event(pf_chrome *c, chrome_thread *th, char ph, uint64_t method, uint64_t tsc)
{
    int64_t ns = chrome_ns(c, tsc);
    if (th->last_ns >= 0 && ns <= th->last_ns)
        ns = th->last_ns + 1;
    if (th->first_ns < 0)
        th->first_ns = ns;
    th->last_ns = ns;
    if (c->speedscope) {
        if (!th->events) {
            if (c->tmp_failed || !(th->events = tmpfile())) {
                c->tmp_failed = true;
                return;
            }
        } else {
            fputc(',', th->events);
        }
        fprintf(th->events, "\n{\"type\":\"%c\",\"frame\":%" PRIu32 ",\"at\":%" PRId64 "}",
                ph == 'B' ? 'O' : 'C', speedscope_frame(c, method), ns);
        return;
    }
    char buf[32];
    chrome_sep(c);
    /* The end carries the name too: a viewer checks it against the frame it closes. */
    fputs("{\"name\":", c->out);
    put_json_string(c->out, pf_names_readable(c->names, method, buf, sizeof buf));
    fprintf(c->out, ",\"cat\":\"java\",\"ph\":\"%c\",\"pid\":1,\"tid\":%" PRIu32 ",\"ts\":", ph,
            th->tid);
    put_us(c->out, ns);
    fputc('}', c->out);
}

static void chrome_push(pf_chrome *c, chrome_thread *th, uint64_t method, uint64_t tsc)
{
    if (th->depth == th->cap) {
        th->cap = th->cap ? th->cap * 2 : 64;
        th->frames = g_renew(uint64_t, th->frames, th->cap);
    }
    th->frames[th->depth++] = method;
    chrome_event(c, th, 'B', method, tsc);
    c->spans++;
}

static void chrome_pop(pf_chrome *c, chrome_thread *th, uint64_t tsc)
{
    chrome_event(c, th, 'E', th->frames[--th->depth], tsc);
}

int pf_chrome_sink(const fl_event *ev, void *ctx)
{
    pf_chrome *c = ctx;
    chrome_thread *th = g_hash_table_lookup(c->threads, GUINT_TO_POINTER(ev->tid));
    if (!th) {
        th = g_new0(chrome_thread, 1);
        th->tid = ev->tid;
        th->last_tsc = ev->tsc;
        th->first_ns = th->last_ns = -1;
        g_hash_table_insert(c->threads, GUINT_TO_POINTER(ev->tid), th);
        const char *name = c->names ? pf_names_thread(c->names, ev->tid) : NULL;
        if (c->speedscope)
            name = NULL;         /* named in its profile */
        else {
        chrome_sep(c);
        fprintf(c->out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%" PRIu32
                ",\"args\":{\"name\":", ev->tid);
        put_json_string(c->out, name ? name : "thread");
        fputs("}}", c->out);
        }
    }
    /* Times never go backwards within a thread. */
    uint64_t tsc = ev->tsc > th->last_tsc ? ev->tsc : th->last_tsc;
    th->last_tsc = tsc;
    switch (ev->kind) {
    case FL_SEGMENT:
        while (th->depth)
            chrome_pop(c, th, tsc);
        for (uint32_t i = 0; i < ev->depth; i++)
            chrome_push(c, th, ev->stack[i], tsc);
        break;
    case FL_CALL:
        chrome_push(c, th, ev->method_id, tsc);
        break;
    case FL_RETURN:
        if (th->depth)
            chrome_pop(c, th, tsc);
        break;
    default:
        break;
    }
    return 0;
}

static int tid_order(const void *a, const void *b)
{
    const chrome_thread *x = *(const chrome_thread *const *)a, *y = *(const chrome_thread *const *)b;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* speedscope's document: the frames, then a profile per thread (by tid)
 * with the events kept for it. */
static bool speedscope_finish(pf_chrome *c)
{
    FILE *out = c->out;
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
          "\"exporter\":\"jpt\",\"name\":", out);
    put_json_string(out, c->title ? c->title : "");
    fputs(",\"activeProfileIndex\":0,\"shared\":{\"frames\":[", out);
    char buf[32];
    for (guint i = 0; i < c->frame_methods->len; i++) {
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
        put_json_string(out, pf_names_readable(c->names, g_array_index(c->frame_methods, uint64_t,
                                                                       i), buf, sizeof buf));
        fputc('}', out);
    }
    fputs("]},\"profiles\":[", out);
    guint n = 0;
    gpointer *threads = g_new(gpointer, g_hash_table_size(c->threads) + 1);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, c->threads);
    while (g_hash_table_iter_next(&it, &key, &value))
        threads[n++] = value;
    qsort(threads, n, sizeof *threads, tid_order);
    bool ok = !c->tmp_failed, first = true;
    for (guint i = 0; i < n && ok; i++) {
        chrome_thread *th = threads[i];
        if (!th->events)
            continue;
        const char *name = c->names ? pf_names_thread(c->names, th->tid) : NULL;
        char *label = g_strdup_printf("%s (tid %" PRIu32 ")", name ? name : "thread", th->tid);
        fputs(first ? "\n{\"type\":\"evented\",\"name\":" : ",\n{\"type\":\"evented\",\"name\":",
              out);
        first = false;
        put_json_string(out, label);
        g_free(label);
        fprintf(out, ",\"unit\":\"nanoseconds\",\"startValue\":%" PRId64 ",\"endValue\":%" PRId64
                ",\"events\":[", th->first_ns, th->last_ns);
        rewind(th->events);
        char chunk[1 << 16];
        size_t got;
        while ((got = fread(chunk, 1, sizeof chunk, th->events)) > 0)
            ok &= fwrite(chunk, 1, got, out) == got;
        ok &= !ferror(th->events);
        fputs("]}", out);
    }
    g_free(threads);
    fputs("\n]}\n", out);
    return ok;
}

long long pf_chrome_finish(pf_chrome *c)
{
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, c->threads);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        chrome_thread *th = value;
        while (th->depth)
            chrome_pop(c, th, th->last_tsc);
    }
    bool ok = true;
    if (c->speedscope)
        ok = speedscope_finish(c);
    else
        fputs("\n]}\n", c->out);
    long long spans = !ok || ferror(c->out) || fflush(c->out) ? -1 : c->spans;
    g_hash_table_destroy(c->threads);
    if (c->frame_index)
        g_hash_table_destroy(c->frame_index);
    if (c->frame_methods)
        g_array_free(c->frame_methods, TRUE);
    g_free(c->title);
    g_free(c);
    return spans;
}

double pf_tsc_hz_measure(void)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t t0 = __rdtsc();
    struct timespec pause = { 0, 20 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t t1 = __rdtsc();
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    return secs > 0 ? (double)(t1 - t0) / secs : 1e9;
}
