/* `ptdecode info` and `ptdecode dump`: views of the JVM metadata stream. */
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <glib.h>

#include "common/jerr.h"
#include "common/jmrec.h"
#include "common/json.h"
#include "ptdecode/commands.h"
#include "decoder/classfile.h"

#define MAX_INLINE_FRAMES 64

/* ---- shared: opening, method names -------------------------------------- */

/* The metadata lives in DIR/jvm; a jvm/ folder itself is accepted too. */
static jm_reader *open_meta(const char *dir)
{
    char err[1024];
    struct stat dst;
    if (stat(dir, &dst) != 0 || !S_ISDIR(dst.st_mode)) {
        jerr_error("%s: not a trace directory", dir);
        return NULL;
    }
    char *use = jm_meta_dir(dir);
    jm_reader *r = use ? jm_reader_open(use, err, sizeof err) : NULL;
    if (!r)
        jerr_error("%s", use ? err : "out of memory");
    free(use);
    return r;
}

/* "Ljava/lang/String;" -> "java/lang/String"; other forms are kept. */
static char *class_name(jm_slice sig)
{
    if (sig.len >= 2 && sig.p[0] == 'L' && sig.p[sig.len - 1] == ';')
        return g_strndup((const char *)sig.p + 1, sig.len - 2);
    return g_strndup((const char *)sig.p, sig.len);
}

/* method id -> "pkg/Cls.name(sig)ret", from a first pass over the stream. */
static GHashTable *method_names(const char *dir)
{
    GHashTable *t = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    jm_reader *r = open_meta(dir);
    if (!r)
        return t;
    jm_record rec;
    jm_rec m;
    while (jm_reader_next(r, &rec) == 1) {
        if (rec.type != JM_METHOD || jm_parse(&rec, &m, NULL, 0) < 0)
            continue;
        char *cls = class_name(m.u.method.class_sig);
        char *name = g_strdup_printf("%s.%.*s%.*s", cls, (int)m.u.method.name.len,
                                     (const char *)m.u.method.name.p, (int)m.u.method.sig.len,
                                     (const char *)m.u.method.sig.p);
        g_free(cls);
        gint64 *key = g_new(gint64, 1);
        *key = (gint64)m.u.method.method_id;
        g_hash_table_replace(t, key, name);
    }
    jm_reader_close(r);
    return t;
}

static const char *method_name(GHashTable *names, uint64_t id, char *buf, size_t len)
{
    gint64 key = (gint64)id;
    const char *n = g_hash_table_lookup(names, &key);
    if (n)
        return n;
    snprintf(buf, len, "method@0x%" PRIx64, id);
    return buf;
}

/* Distinct methods inlined anywhere in an NMETHOD_LOAD (the root excluded),
 * in the order they first appear, appended to ids (of uint64_t). */
static void inlined_methods(const jm_rec *m, GArray *ids)
{
    GHashTable *seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    jm_pcs it = m->u.nmethod_load.pcs;
    uint64_t pc;
    uint32_t depth;
    jm_frame fr[MAX_INLINE_FRAMES];
    while (jm_pcs_next(&it, &pc, &depth, fr, MAX_INLINE_FRAMES) == 1) {
        uint32_t d = depth < MAX_INLINE_FRAMES ? depth : MAX_INLINE_FRAMES;
        for (uint32_t i = 0; i + 1 < d; i++) {
            gint64 id = (gint64)fr[i].method_id;
            if (id == (gint64)m->u.nmethod_load.method_id || g_hash_table_contains(seen, &id))
                continue;
            g_hash_table_add(seen, g_memdup2(&id, sizeof id));
            uint64_t v = (uint64_t)id;
            g_array_append_val(ids, v);
        }
    }
    g_hash_table_destroy(seen);
}

/* Strings from the JVM may hold anything: print them on one line. */
static void print_slice(FILE *f, jm_slice s)
{
    for (uint32_t i = 0; i < s.len; i++) {
        unsigned char c = s.p[i];
        if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

/* ---- info --------------------------------------------------------------- */

typedef struct info {
    uint64_t records, by_type[JM_TYPE_LIMIT], unknown_types;
    uint64_t first_tsc, last_tsc;
    jm_rec jvm;
    bool have_jvm;
    uint64_t cc_low, cc_high;
    GArray *heap_vals;     /* jm_heap; names copied into heap_names */
    GPtrArray *heap_names;
    uint64_t codelets, codelets_with_bytecode, interp_begin, interp_end;
    uint64_t blob_bytes, dyn_code, dyn_code_bytes;
    uint64_t nm_loads, nm_unloads, nm_bytes, pcs, inlined_pcs, max_depth;
    GArray *nmethods;       /* jm_rec of every NMETHOD_LOAD, for the JSON list */
    uint64_t by_level[6];
    uint64_t patches, patch_bytes;
    uint64_t class_hook, class_retransform, class_image, class_bad, hidden, prepared;
    GHashTable *captured;   /* class name -> 1 */
    GHashTable *named;      /* class names named by METHOD records */
    GHashTable *hidden_set; /* hidden class names */
    uint64_t methods;
    uint64_t threads_started, threads_ended;
    GPtrArray *thread_names;
    GPtrArray *warnings;
    GPtrArray *stat_names;
    GArray *stat_values;
    uint64_t ref_entries, ref_exits, ref_steps;
    bool clean_end;
    uint64_t errors;
    uint64_t parse_errors;     /* of them, records whose payload cannot be read */
    char first_error[1024];
} info;

static void info_error(info *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void info_error(info *in, const char *fmt, ...)
{
    if (in->errors++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(in->first_error, sizeof in->first_error, fmt, ap);
        va_end(ap);
    }
}

static void set_add(GHashTable *set, jm_slice sig)
{
    g_hash_table_add(set, class_name(sig));
}

static void collect(info *in, jm_reader *r, const jm_record *rec, const jm_rec *m)
{
    in->records++;
    if (rec->type < JM_TYPE_LIMIT)
        in->by_type[rec->type]++;
    else
        in->unknown_types++;
    if (rec->tsc) {
        if (!in->first_tsc || rec->tsc < in->first_tsc)
            in->first_tsc = rec->tsc;
        if (rec->tsc > in->last_tsc)
            in->last_tsc = rec->tsc;
    }
    switch (rec->type) {
    case JM_JVM_INFO:
        in->jvm = *m;
        in->have_jvm = true;
        break;
    case JM_CODE_CACHE: {
        in->cc_low = m->u.code_cache.low;
        in->cc_high = m->u.code_cache.high;
        jm_cur c = m->u.code_cache.heaps;
        uint32_t left = m->u.code_cache.nheaps;
        jm_heap h;
        int rc;
        g_array_set_size(in->heap_vals, 0);
        g_ptr_array_set_size(in->heap_names, 0);
        while ((rc = jm_heaps_next(&c, &left, &h)) == 1) {
            g_array_append_val(in->heap_vals, h);
            g_ptr_array_add(in->heap_names, g_strndup((const char *)h.name.p, h.name.len));
        }
        if (rc < 0)
            info_error(in, "%s: offset %" PRIu64 ": CODE_CACHE record: bad heap list",
                       jm_reader_path(r), rec->offset);
        break;
    }
    case JM_CODELET:
        in->codelets++;
        if (m->u.codelet.bytecode >= 0)
            in->codelets_with_bytecode++;
        if (!in->interp_begin || m->u.codelet.begin < in->interp_begin)
            in->interp_begin = m->u.codelet.begin;
        if (m->u.codelet.end > in->interp_end)
            in->interp_end = m->u.codelet.end;
        break;
    case JM_CODE_BLOB:
        in->blob_bytes += m->u.blob.code.size;
        break;
    case JM_DYNAMIC_CODE:
        in->dyn_code++;
        in->dyn_code_bytes += m->u.dynamic_code.code.size;
        break;
    case JM_NMETHOD_LOAD: {
        in->nm_loads++;
        g_array_append_val(in->nmethods, *m);
        in->nm_bytes += m->u.nmethod_load.code.size;
        int level = m->u.nmethod_load.level;
        in->by_level[level >= 0 && level <= 4 ? level : 5]++;
        jm_pcs it = m->u.nmethod_load.pcs;
        uint64_t pc;
        uint32_t depth;
        jm_frame fr[1];
        int rc;
        while ((rc = jm_pcs_next(&it, &pc, &depth, fr, 1)) == 1) {
            in->pcs++;
            if (depth > 1)
                in->inlined_pcs++;
            if (depth > in->max_depth)
                in->max_depth = depth;
        }
        if (rc < 0)
            info_error(in, "%s: offset %" PRIu64 ": NMETHOD_LOAD record: bad pc records",
                       jm_reader_path(r), rec->offset);
        break;
    }
    case JM_NMETHOD_UNLOAD:
        in->nm_unloads++;
        break;
    case JM_CODE_PATCH:
        in->patches++;
        in->patch_bytes += m->u.patch.code.size;
        break;
    case JM_CLASS_FILE: {
        if (m->u.class_file.origin == JM_CLASS_RETRANSFORM)
            in->class_retransform++;
        else if (m->u.class_file.origin == JM_CLASS_IMAGE)
            in->class_image++;
        else
            in->class_hook++;
        set_add(in->captured, m->u.class_file.class_sig);
        cf_header h;
        char err[600];
        if (cf_parse_header(m->u.class_file.bytes.p, m->u.class_file.bytes.len, &h, err,
                            sizeof err) < 0) {
            in->class_bad++;
            char *cn = class_name(m->u.class_file.class_sig);
            info_error(in, "%s: offset %" PRIu64 ": class file of %s: %s", jm_reader_path(r),
                       rec->offset, cn, err);
            g_free(cn);
        }
        break;
    }
    case JM_CLASS_PREPARE:
        in->prepared++;
        if (m->u.class_prepare.flags & JM_CLASS_HIDDEN) {
            in->hidden++;
            set_add(in->hidden_set, m->u.class_prepare.class_sig);
        }
        break;
    case JM_METHOD:
        in->methods++;
        set_add(in->named, m->u.method.class_sig);
        break;
    case JM_THREAD_START:
        in->threads_started++;
        g_ptr_array_add(in->thread_names,
                        g_strdup_printf("%u %.*s", m->u.thread.native_tid,
                                        (int)m->u.thread.name.len, m->u.thread.name.p));
        break;
    case JM_THREAD_END:
        in->threads_ended++;
        break;
    case JM_METHOD_ENTRY: in->ref_entries++; break;
    case JM_METHOD_EXIT: in->ref_exits++; break;
    case JM_SINGLE_STEP: in->ref_steps++; break;
    case JM_WARNING:
        g_ptr_array_add(in->warnings,
                        g_strndup((const char *)m->u.warning.text.p, m->u.warning.text.len));
        break;
    case JM_STATS: {
        jm_cur c = m->u.stats.items;
        uint32_t left = m->u.stats.n;
        jm_slice name;
        uint64_t v;
        while (jm_stats_next(&c, &left, &name, &v) == 1) {
            g_ptr_array_add(in->stat_names, g_strndup((const char *)name.p, name.len));
            g_array_append_val(in->stat_values, v);
        }
        break;
    }
    case JM_END:
        in->clean_end = true;
        break;
    default:
        break;
    }
}

/* Classes named by methods but neither captured nor hidden. */
static uint64_t count_missing(info *in, GPtrArray *examples)
{
    uint64_t n = 0;
    GHashTableIter it;
    gpointer k;
    g_hash_table_iter_init(&it, in->named);
    while (g_hash_table_iter_next(&it, &k, NULL)) {
        const char *cn = k;
        if (cn[0] == '[' || g_hash_table_contains(in->captured, cn) ||
            g_hash_table_contains(in->hidden_set, cn))
            continue;
        n++;
        if (examples && examples->len < 5)
            g_ptr_array_add(examples, (gpointer)cn);
    }
    return n;
}

static double density(const info *in)
{
    return in->nm_bytes ? (double)in->pcs * 1024.0 / (double)in->nm_bytes : 0.0;
}

static void jslice(json_w *j, const char *k, jm_slice s)
{
    json_key(j, k);
    json_strn(j, (const char *)s.p, s.len);
}

/* The JVM's code outside compiled methods: code cache, interpreter, blobs,
 * stubs. */
static void json_code(json_w *j, const info *in)
{
    json_key(j, "code_cache");
    json_obj(j);
    json_khex(j, "low", in->cc_low);
    json_khex(j, "high", in->cc_high);
    json_key(j, "heaps");
    json_arr(j);
    for (guint i = 0; i < in->heap_vals->len; i++) {
        jm_heap *hp = &g_array_index(in->heap_vals, jm_heap, i);
        json_obj(j);
        json_kstr(j, "name", g_ptr_array_index(in->heap_names, i));
        json_khex(j, "low", hp->low);
        json_khex(j, "high", hp->high);
        json_end(j);
    }
    json_end(j);
    json_end(j);
    json_key(j, "interpreter");
    json_obj(j);
    json_ku64(j, "codelets", in->codelets);
    json_ku64(j, "bytecode_codelets", in->codelets_with_bytecode);
    json_khex(j, "begin", in->interp_begin);
    json_khex(j, "end", in->interp_end);
    json_end(j);
    json_key(j, "code_blobs");
    json_obj(j);
    json_ku64(j, "count", in->by_type[JM_CODE_BLOB]);
    json_ku64(j, "bytes", in->blob_bytes);
    json_end(j);
    json_key(j, "stubs");
    json_obj(j);
    json_ku64(j, "count", in->dyn_code);
    json_ku64(j, "bytes", in->dyn_code_bytes);
    json_end(j);
}

/* The compiled methods, each with the methods it inlined. */
static void json_compiled(json_w *j, const info *in, GHashTable *names)
{
    json_key(j, "compiled");
    json_obj(j);
    json_ku64(j, "loads", in->nm_loads);
    json_ku64(j, "unloads", in->nm_unloads);
    json_ku64(j, "code_bytes", in->nm_bytes);
    json_ku64(j, "pc_records", in->pcs);
    json_ku64(j, "inlined_pc_records", in->inlined_pcs);
    json_ku64(j, "max_inline_depth", in->max_depth);
    json_kdbl(j, "pc_records_per_kb", density(in));
    json_key(j, "methods");
    json_arr(j);
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    char nb[64];
    for (guint i = 0; i < in->nmethods->len; i++) {
        const jm_rec *m = &g_array_index(in->nmethods, jm_rec, i);
        json_obj(j);
        json_kstr(j, "method", method_name(names, m->u.nmethod_load.method_id, nb, sizeof nb));
        json_ki64(j, "level", m->u.nmethod_load.level);
        json_khex(j, "vaddr", m->u.nmethod_load.code.vaddr);
        json_ku64(j, "size", m->u.nmethod_load.code.size);
        json_ku64(j, "tsc", m->tsc);
        json_ku64(j, "pc_records", m->u.nmethod_load.npcs);
        json_key(j, "inlined");
        json_arr(j);
        g_array_set_size(ids, 0);
        inlined_methods(m, ids);
        for (guint k = 0; k < ids->len; k++)
            json_str(j, method_name(names, g_array_index(ids, uint64_t, k), nb, sizeof nb));
        json_end(j);
        json_end(j);
    }
    g_array_free(ids, TRUE);
    json_end(j);
    json_key(j, "by_level");
    json_obj(j);
    static const char *const levels[6] = { "0", "1", "2", "3", "4", "unknown" };
    for (int i = 0; i < 6; i++)
        json_ku64(j, levels[i], in->by_level[i]);
    json_end(j);
    json_end(j);
}

/* Patches, classes (missing: those without a class file, some examples),
 * methods, threads, the reference records. */
static void json_classes(json_w *j, const info *in, uint64_t missing,
                         const GPtrArray *missing_ex)
{
    json_key(j, "patches");
    json_obj(j);
    json_ku64(j, "count", in->patches);
    json_ku64(j, "bytes", in->patch_bytes);
    json_end(j);
    json_key(j, "classes");
    json_obj(j);
    json_ku64(j, "captured", in->class_hook + in->class_retransform + in->class_image);
    json_ku64(j, "from_load_hook", in->class_hook);
    json_ku64(j, "from_retransform", in->class_retransform);
    json_ku64(j, "from_image", in->class_image);
    json_ku64(j, "unparsable", in->class_bad);
    json_ku64(j, "prepared", in->prepared);
    json_ku64(j, "hidden", in->hidden);
    json_ku64(j, "missing", missing);
    json_key(j, "missing_examples");
    json_arr(j);
    for (guint i = 0; i < missing_ex->len; i++)
        json_str(j, g_ptr_array_index(missing_ex, i));
    json_end(j);
    json_end(j);
    json_ku64(j, "methods", in->methods);
    json_key(j, "threads");
    json_obj(j);
    json_ku64(j, "started", in->threads_started);
    json_ku64(j, "ended", in->threads_ended);
    json_key(j, "list");
    json_arr(j);
    for (guint i = 0; i < in->thread_names->len; i++)
        json_str(j, g_ptr_array_index(in->thread_names, i));
    json_end(j);
    json_end(j);
    json_key(j, "reference");
    json_obj(j);
    json_ku64(j, "method_entries", in->ref_entries);
    json_ku64(j, "method_exits", in->ref_exits);
    json_ku64(j, "single_steps", in->ref_steps);
    json_end(j);
}

static void print_json(info *in, jm_reader *r, const char *dir, const char *read_error,
                       GHashTable *names)
{
    const jm_header *h = jm_reader_header(r);
    GPtrArray *missing_ex = g_ptr_array_new();
    uint64_t missing = count_missing(in, missing_ex);
    json_w j;
    json_init(&j, stdout, true);
    json_obj(&j);
    json_kstr(&j, "trace", dir);
    json_key(&j, "format");
    json_obj(&j);
    json_ku64(&j, "major", h->major);
    json_ku64(&j, "minor", h->minor);
    json_end(&j);
    json_ku64(&j, "pid", h->pid);
    json_key(&j, "jvm");
    if (in->have_jvm) {
        json_obj(&j);
        jslice(&j, "name", in->jvm.u.jvm_info.vm_name);
        jslice(&j, "version", in->jvm.u.jvm_info.vm_version);
        jslice(&j, "vendor", in->jvm.u.jvm_info.vm_vendor);
        jslice(&j, "java_home", in->jvm.u.jvm_info.java_home);
        json_kstr(&j, "mode", in->jvm.u.jvm_info.mode == JM_MODE_REFERENCE ? "reference" : "trace");
        jslice(&j, "options", in->jvm.u.jvm_info.options);
        json_end(&j);
    } else {
        json_null(&j);
    }
    json_code(&j, in);
    json_compiled(&j, in, names);
    json_classes(&j, in, missing, missing_ex);
    json_key(&j, "records");
    json_obj(&j);
    json_ku64(&j, "total", in->records);
    for (int t = 1; t < JM_TYPE_LIMIT; t++)
        if (in->by_type[t])
            json_ku64(&j, jm_type_name((uint16_t)t), in->by_type[t]);
    if (in->unknown_types)
        json_ku64(&j, "UNKNOWN", in->unknown_types);
    json_end(&j);
    json_key(&j, "bytes");
    json_obj(&j);
    struct stat st;
    json_ku64(&j, "meta", stat(jm_reader_path(r), &st) == 0 ? (uint64_t)st.st_size : 0);
    json_ku64(&j, "code", jm_reader_code_size(r));
    json_end(&j);
    json_ku64(&j, "first_tsc", in->first_tsc);
    json_ku64(&j, "last_tsc", in->last_tsc);
    json_key(&j, "agent_stats");
    json_obj(&j);
    for (guint i = 0; i < in->stat_names->len; i++)
        json_ku64(&j, g_ptr_array_index(in->stat_names, i),
                  g_array_index(in->stat_values, uint64_t, i));
    json_end(&j);
    json_key(&j, "warnings");
    json_arr(&j);
    for (guint i = 0; i < in->warnings->len; i++)
        json_str(&j, g_ptr_array_index(in->warnings, i));
    json_end(&j);
    json_kbool(&j, "clean_end", in->clean_end);
    json_key(&j, "errors");
    json_arr(&j);
    if (read_error)
        json_str(&j, read_error);
    if (in->errors)
        json_str(&j, in->first_error);
    json_end(&j);
    json_end(&j);
    json_finish(&j);
    g_ptr_array_free(missing_ex, TRUE);
}

static void print_text(info *in, jm_reader *r, const char *dir)
{
    const jm_header *h = jm_reader_header(r);
    GPtrArray *missing_ex = g_ptr_array_new();
    uint64_t missing = count_missing(in, missing_ex);
    printf("trace            %s (metadata format %u.%u, pid %u)\n", dir, h->major, h->minor,
           h->pid);
    if (in->have_jvm) {
        printf("jvm              ");
        print_slice(stdout, in->jvm.u.jvm_info.vm_name);
        printf(" ");
        print_slice(stdout, in->jvm.u.jvm_info.vm_version);
        printf("%s\n", in->jvm.u.jvm_info.mode == JM_MODE_REFERENCE ? " (reference mode)" : "");
    } else {
        printf("jvm              unknown (no JVM_INFO record)\n");
    }
    printf("code cache       [0x%" PRIx64 ", 0x%" PRIx64 ") %.1f MiB\n", in->cc_low, in->cc_high,
           (double)(in->cc_high - in->cc_low) / 1048576.0);
    for (guint i = 0; i < in->heap_vals->len; i++) {
        jm_heap *hp = &g_array_index(in->heap_vals, jm_heap, i);
        printf("  heap           [0x%" PRIx64 ", 0x%" PRIx64 ") %s\n", hp->low, hp->high,
               (const char *)g_ptr_array_index(in->heap_names, i));
    }
    printf("interpreter      %" PRIu64 " codelets (%" PRIu64 " for bytecodes) in [0x%" PRIx64
           ", 0x%" PRIx64 ")\n",
           in->codelets, in->codelets_with_bytecode, in->interp_begin, in->interp_end);
    printf("code snapshots   %" PRIu64 " blobs, %" PRIu64 " bytes\n", in->by_type[JM_CODE_BLOB],
           in->blob_bytes);
    printf("stubs            %" PRIu64 " (%" PRIu64 " bytes)\n", in->dyn_code, in->dyn_code_bytes);
    printf("compiled         %" PRIu64 " loads, %" PRIu64 " unloads, %" PRIu64 " bytes of code\n",
           in->nm_loads, in->nm_unloads, in->nm_bytes);
    printf("  by level       0:%" PRIu64 " 1:%" PRIu64 " 2:%" PRIu64 " 3:%" PRIu64 " 4:%" PRIu64
           " unknown:%" PRIu64 "\n",
           in->by_level[0], in->by_level[1], in->by_level[2], in->by_level[3], in->by_level[4],
           in->by_level[5]);
    printf("  pc records     %" PRIu64 " (%.1f per KiB of code), %" PRIu64
           " inside inlined code, max inline depth %" PRIu64 "\n",
           in->pcs, density(in), in->inlined_pcs, in->max_depth);
    printf("patches          %" PRIu64 " (%" PRIu64 " bytes)\n", in->patches, in->patch_bytes);
    printf("classes          %" PRIu64 " captured (%" PRIu64 " at load, %" PRIu64
           " from the runtime image, %" PRIu64 " retransformed), %" PRIu64 " hidden, %" PRIu64
           " missing",
           in->class_hook + in->class_retransform + in->class_image, in->class_hook,
           in->class_image, in->class_retransform, in->hidden, missing);
    for (guint i = 0; i < missing_ex->len; i++)
        printf("%s%s", i ? ", " : " (e.g. ", (const char *)g_ptr_array_index(missing_ex, i));
    printf("%s\n", missing_ex->len ? ")" : "");
    if (in->class_bad)
        printf("  unparsable     %" PRIu64 "\n", in->class_bad);
    printf("methods          %" PRIu64 "\n", in->methods);
    printf("threads          %" PRIu64 " started, %" PRIu64 " ended\n", in->threads_started,
           in->threads_ended);
    if (in->ref_entries || in->ref_exits || in->ref_steps)
        printf("reference        %" PRIu64 " entries, %" PRIu64 " exits, %" PRIu64
               " single steps\n",
               in->ref_entries, in->ref_exits, in->ref_steps);
    struct stat st;
    printf("bytes            %" PRIu64 " metadata, %" PRIu64 " code\n",
           stat(jm_reader_path(r), &st) == 0 ? (uint64_t)st.st_size : 0, jm_reader_code_size(r));
    printf("records          %" PRIu64 "\n", in->records);
    printf("tsc              %" PRIu64 " .. %" PRIu64 "\n", in->first_tsc, in->last_tsc);
    for (guint i = 0; i < in->warnings->len; i++)
        printf("agent warning    %s\n", (const char *)g_ptr_array_index(in->warnings, i));
    if (!in->clean_end)
        printf("note             no END record: the JVM did not shut down cleanly (or is still "
               "running)\n");
    g_ptr_array_free(missing_ex, TRUE);
}

static void info_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode info TRACE.DIR [--json]\n"
            "\n"
            "Validates the JVM metadata of a trace (TRACE.DIR/jvm/meta.jpt and code.bin)\n"
            "and summarizes it: JVM, code-cache bounds, interpreter codelets, stubs,\n"
            "compiled methods with their inline pc records and density, code patches,\n"
            "classes (captured, hidden, missing), methods, threads, sizes and TSC range.\n"
            "\n"
            "  --json   machine-readable output; keys are documented in docs/INFO.md\n"
            "\n"
            "Exit status: 0, also for metadata cut short or with records that cannot be\n"
            "read (ignored, with a warning; the summary covers what was read); 1 when the\n"
            "metadata cannot be read (one line: file, offset, reason); 2 usage error.\n");
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    bool as_json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
        switch (c) {
        case 'j': as_json = true; break;
        case 'h': info_usage(stdout); return 0;
        default: info_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        info_usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    dc_check_free(&chk);
    jm_reader *r = open_meta(dir);
    if (!r)
        return 1;
    info in;
    memset(&in, 0, sizeof in);
    in.heap_vals = g_array_new(FALSE, FALSE, sizeof(jm_heap));
    in.nmethods = g_array_new(FALSE, FALSE, sizeof(jm_rec));
    in.heap_names = g_ptr_array_new_with_free_func(g_free);
    in.captured = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    in.named = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    in.hidden_set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    in.thread_names = g_ptr_array_new_with_free_func(g_free);
    in.warnings = g_ptr_array_new_with_free_func(g_free);
    in.stat_names = g_ptr_array_new_with_free_func(g_free);
    in.stat_values = g_array_new(FALSE, FALSE, sizeof(uint64_t));

    jm_record rec;
    jm_rec m;
    int rc;
    char err[1024];
    while ((rc = jm_reader_next(r, &rec)) == 1) {
        /* The trace check warned about records that cannot be read; --json
         * lists them too. */
        if (jm_parse(&rec, &m, err, sizeof err) < 0) {
            info_error(&in, "%s: %s", jm_reader_path(r), err);
            in.parse_errors++;
            continue;
        }
        collect(&in, r, &rec, &m);
    }
    const char *read_error = rc < 0 ? jm_reader_error(r) : NULL;
    if (as_json) {
        GHashTable *names = method_names(dir);
        print_json(&in, r, dir, read_error, names);
        g_hash_table_destroy(names);
    }
    else
        print_text(&in, r, dir);
    /* A cut file was reported by the trace check; records that cannot be
     * read are ignored, as every command ignores them. */
    int status = 0;
    if (in.errors > in.parse_errors) {
        if (in.errors > 1)
            jerr_warn("%s (and %" PRIu64 " more problems)", in.first_error, in.errors - 1);
        else
            jerr_warn("%s", in.first_error);
    }
    g_array_free(in.heap_vals, TRUE);
    g_array_free(in.nmethods, TRUE);
    g_ptr_array_free(in.heap_names, TRUE);
    g_hash_table_destroy(in.captured);
    g_hash_table_destroy(in.named);
    g_hash_table_destroy(in.hidden_set);
    g_ptr_array_free(in.thread_names, TRUE);
    g_ptr_array_free(in.warnings, TRUE);
    g_ptr_array_free(in.stat_names, TRUE);
    g_array_free(in.stat_values, TRUE);
    jm_reader_close(r);
    return status;
}

/* ---- dump --------------------------------------------------------------- */

static void print_code(const jm_code *c)
{
    printf(" vaddr=0x%" PRIx64 " size=%" PRIu64 " code_offset=%" PRIu64, c->vaddr, c->size,
           c->code_offset);
}

/* A class file record: its header as parsed, or why it does not parse. */
static void dump_class_file(const jm_rec *m)
{
    cf_header h;
    char err[300];
    int ok = cf_parse_header(m->u.class_file.bytes.p, m->u.class_file.bytes.len, &h, err,
                             sizeof err);
    printf(" id=%" PRIu64 " origin=%s bytes=%u", m->u.class_file.class_id,
           m->u.class_file.origin == JM_CLASS_RETRANSFORM ? "retransform"
           : m->u.class_file.origin == JM_CLASS_IMAGE     ? "image"
                                                          : "hook",
           m->u.class_file.bytes.len);
    if (ok == 0)
        printf(" magic=0xcafebabe version=%u.%u cp_count=%u this=%s", h.major, h.minor,
               h.cp_count, h.this_class);
    else
        printf(" parse_error=\"%s\"", err);
    char *cn = class_name(m->u.class_file.class_sig);
    printf(" class=%s", cn);
    g_free(cn);
}

/* A compiled method: its code, the methods it inlined and (pcs) its
 * pc -> inline stack map. */
static void dump_nmethod_load(GHashTable *names, const jm_rec *m, bool pcs)
{
    char nb[64];
    print_code(&m->u.nmethod_load.code);
    printf(" level=%d npcs=%u", m->u.nmethod_load.level, m->u.nmethod_load.npcs);
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    inlined_methods(m, ids);
    printf(" inlined=");
    for (guint i = 0; i < ids->len; i++)
        printf("%s%s", i ? "," : "",
               method_name(names, g_array_index(ids, uint64_t, i), nb, sizeof nb));
    g_array_free(ids, TRUE);
    printf(" method=%s", method_name(names, m->u.nmethod_load.method_id, nb, sizeof nb));
    if (pcs) {
        jm_pcs it = m->u.nmethod_load.pcs;
        uint64_t pc;
        uint32_t depth;
        jm_frame fr[MAX_INLINE_FRAMES];
        while (jm_pcs_next(&it, &pc, &depth, fr, MAX_INLINE_FRAMES) == 1) {
            printf("\n  pc=0x%" PRIx64 " depth=%u stack=", pc, depth);
            uint32_t d = depth < MAX_INLINE_FRAMES ? depth : MAX_INLINE_FRAMES;
            for (uint32_t i = 0; i < d; i++)
                printf("%s%s@%d", i ? "<" : "",
                       method_name(names, fr[i].method_id, nb, sizeof nb), fr[i].bci);
        }
    }
}

static void dump_record(GHashTable *names, const jm_record *rec, const jm_rec *m, bool pcs)
{
    char nb[64];
    printf("%s tsc=%" PRIu64, jm_type_name(rec->type), rec->tsc);
    switch (rec->type) {
    case JM_JVM_INFO:
        printf(" mode=%s name=", m->u.jvm_info.mode == JM_MODE_REFERENCE ? "reference" : "trace");
        print_slice(stdout, m->u.jvm_info.vm_name);
        printf(" version=");
        print_slice(stdout, m->u.jvm_info.vm_version);
        break;
    case JM_CODE_CACHE: {
        printf(" low=0x%" PRIx64 " high=0x%" PRIx64 " heaps=%u", m->u.code_cache.low,
               m->u.code_cache.high, m->u.code_cache.nheaps);
        jm_cur c = m->u.code_cache.heaps;
        uint32_t left = m->u.code_cache.nheaps;
        jm_heap h;
        while (jm_heaps_next(&c, &left, &h) == 1) {
            printf(" [0x%" PRIx64 ",0x%" PRIx64 ")=", h.low, h.high);
            print_slice(stdout, h.name);
        }
        break;
    }
    case JM_CODELET:
        printf(" begin=0x%" PRIx64 " end=0x%" PRIx64 " bytecode=%d desc=", m->u.codelet.begin,
               m->u.codelet.end, m->u.codelet.bytecode);
        print_slice(stdout, m->u.codelet.description);
        break;
    case JM_CODE_BLOB:
        print_code(&m->u.blob.code);
        printf(" kind=%u name=", m->u.blob.kind);
        print_slice(stdout, m->u.blob.name);
        break;
    case JM_METHOD:
        printf(" id=0x%" PRIx64 " class_id=%" PRIu64 " modifiers=0x%x method=%s",
               m->u.method.method_id, m->u.method.class_id, m->u.method.modifiers,
               method_name(names, m->u.method.method_id, nb, sizeof nb));
        break;
    case JM_CLASS_FILE:
        dump_class_file(m);
        break;
    case JM_CLASS_PREPARE: {
        char *cn = class_name(m->u.class_prepare.class_sig);
        printf(" id=%" PRIu64 " hidden=%d methods=%u class=%s", m->u.class_prepare.class_id,
               (m->u.class_prepare.flags & JM_CLASS_HIDDEN) ? 1 : 0, m->u.class_prepare.nmethods,
               cn);
        g_free(cn);
        break;
    }
    case JM_METHOD_BYTECODE:
        printf(" max_stack=%d max_locals=%d bytes=%u method=%s", m->u.method_bytecode.max_stack,
               m->u.method_bytecode.max_locals, m->u.method_bytecode.bytecode.len,
               method_name(names, m->u.method_bytecode.method_id, nb, sizeof nb));
        break;
    case JM_CONSTANT_POOL:
        printf(" class_id=%" PRIu64 " cp_count=%u bytes=%u", m->u.constant_pool.class_id,
               m->u.constant_pool.cp_count, m->u.constant_pool.bytes.len);
        break;
    case JM_NMETHOD_LOAD:
        dump_nmethod_load(names, m, pcs);
        break;
    case JM_NMETHOD_UNLOAD:
        printf(" vaddr=0x%" PRIx64 " method=%s", m->u.nmethod_unload.vaddr,
               method_name(names, m->u.nmethod_unload.method_id, nb, sizeof nb));
        break;
    case JM_DYNAMIC_CODE:
        print_code(&m->u.dynamic_code.code);
        printf(" name=");
        print_slice(stdout, m->u.dynamic_code.name);
        break;
    case JM_CODE_PATCH:
        print_code(&m->u.patch.code);
        break;
    case JM_THREAD_START:
        printf(" java_tid=%" PRIu64 " tid=%u name=", m->u.thread.java_tid, m->u.thread.native_tid);
        print_slice(stdout, m->u.thread.name);
        break;
    case JM_THREAD_END:
        printf(" java_tid=%" PRIu64 " tid=%u", m->u.thread.java_tid, m->u.thread.native_tid);
        break;
    case JM_METHOD_ENTRY:
    case JM_METHOD_EXIT:
    case JM_SINGLE_STEP:
        printf(" tid=%u", m->u.ref.native_tid);
        if (rec->type == JM_SINGLE_STEP)
            printf(" bci=%d", m->u.ref.bci);
        if (rec->type == JM_METHOD_EXIT)
            printf(" exception=%u", m->u.ref.by_exception);
        printf(" method=%s", method_name(names, m->u.ref.method_id, nb, sizeof nb));
        break;
    case JM_WARNING:
        printf(" text=");
        print_slice(stdout, m->u.warning.text);
        break;
    case JM_STATS: {
        jm_cur c = m->u.stats.items;
        uint32_t left = m->u.stats.n;
        jm_slice name;
        uint64_t v;
        while (jm_stats_next(&c, &left, &name, &v) == 1) {
            putchar(' ');
            print_slice(stdout, name);
            printf("=%" PRIu64, v);
        }
        break;
    }
    case JM_CLASSES_INITIALIZED:
        printf(" classes=%u", m->u.classes_initialized.n);
        break;
    case JM_END:
        break;
    default:
        printf(" type=%u size=%u", rec->type, rec->size);
        break;
    }
    putchar('\n');
}

static void dump_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode dump TRACE.DIR [--type TYPE[,TYPE...]] [--pcs]\n"
            "\n"
            "Prints every JVM metadata record as one line: the type, tsc=N, then key=value\n"
            "fields; the last field (desc=, name=, method=, class=, text=) runs to the end\n"
            "of the line. Types: JVM_INFO CODE_CACHE CODELET CODE_BLOB METHOD CLASS_FILE\n"
            "CLASS_PREPARE METHOD_BYTECODE CONSTANT_POOL NMETHOD_LOAD NMETHOD_UNLOAD\n"
            "DYNAMIC_CODE CODE_PATCH THREAD_START THREAD_END METHOD_ENTRY METHOD_EXIT\n"
            "SINGLE_STEP WARNING STATS END.\n"
            "\n"
            "  --type LIST   only these record types\n"
            "  --pcs         after NMETHOD_LOAD, one indented line per pc record with its\n"
            "                inline stack, innermost first: method@bci<caller@bci...\n");
}

int cmd_dump(int argc, char **argv)
{
    static const struct option opts[] = {
        { "type", required_argument, NULL, 't' },
        { "pcs", no_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    bool want[JM_TYPE_LIMIT];
    bool filter = false, pcs = false;
    memset(want, 0, sizeof want);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:ph", opts, NULL)) != -1) {
        switch (c) {
        case 't': {
            char **parts = g_strsplit(optarg, ",", -1);
            for (char **p = parts; *p; p++) {
                int t;
                for (t = 1; t < JM_TYPE_LIMIT; t++)
                    if (!g_ascii_strcasecmp(*p, jm_type_name((uint16_t)t)))
                        break;
                if (t == JM_TYPE_LIMIT) {
                    jerr_error("unknown record type '%s' (see 'ptdecode dump --help')", *p);
                    g_strfreev(parts);
                    return 2;
                }
                want[t] = true;
            }
            g_strfreev(parts);
            filter = true;
            break;
        }
        case 'p': pcs = true; break;
        case 'h': dump_usage(stdout); return 0;
        default: dump_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        dump_usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    dc_check_free(&chk);
    jm_reader *r = open_meta(dir);
    if (!r)
        return 1;
    GHashTable *names = method_names(dir);
    jm_record rec;
    jm_rec m;
    char err[1024];
    while (jm_reader_next(r, &rec) == 1) {
        if (filter && (rec.type >= JM_TYPE_LIMIT || !want[rec.type]))
            continue;
        /* Unreadable records and a cut end: the trace check warned. */
        if (jm_parse(&rec, &m, err, sizeof err) < 0)
            continue;
        dump_record(names, &rec, &m, pcs);
    }
    g_hash_table_destroy(names);
    jm_reader_close(r);
    return 0;
}
