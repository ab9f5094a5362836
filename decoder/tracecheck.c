/* The trace check (tracecheck.h). */
#include "decoder/tracecheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/auxidx.h"
#include "common/fileio.h"
#include "common/jmeta.h"
#include "common/jmrec.h"
#include "decoder/trinfo.h"

#define MAX_INFO_BYTES (16u << 20)

static void warn(dc_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(dc_check *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_ptr_array_add(c->warnings, g_strdup_vprintf(fmt, ap));
    g_ptr_array_add(c->kinds, (gpointer)fmt);
    va_end(ap);
}

static int fatal(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fatal(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- info.json ------------------------------------------------------------ */

typedef struct info_stream {
    char *name;
    uint64_t pt_bytes;
    bool have_bytes;
} info_stream;

typedef struct info_scan {
    dc_check *c;
    GArray *streams;           /* info_stream, by index in "streams" */
} info_scan;

static void on_info(const char *path, const char *v, size_t len, bool is_str, void *ctx)
{
    info_scan *s = ctx;
    long long x;
    if (!is_str && !strcmp(path, "complete")) {
        s->c->complete = len == 4 && !memcmp(v, "true", 4);
    } else if (!is_str && !strcmp(path, "exit.signal") && dc_json_int(v, len, &x)) {
        s->c->exit_signal = x;
    } else if (!strncmp(path, "streams.", 8)) {
        char *end;
        errno = 0;
        unsigned long i = strtoul(path + 8, &end, 10);
        if (errno || *end != '.' || i >= 1u << 20)
            return;
        if (s->streams->len <= i)
            g_array_set_size(s->streams, (guint)i + 1);
        info_stream *st = &g_array_index(s->streams, info_stream, i);
        if (is_str && !strcmp(end, ".name")) {
            g_free(st->name);
            st->name = g_strndup(v, len);
        } else if (!is_str && !strcmp(end, ".pt_bytes") && dc_json_int(v, len, &x) && x >= 0) {
            st->pt_bytes = (uint64_t)x;
            st->have_bytes = true;
        }
    }
}

/* info.json's "streams", by name (NULL: none); -1 on a fatal error. */
static int read_info(const char *dir, dc_check *c, GHashTable **by_name, GArray **streams,
                     char *err, size_t errlen)
{
    *by_name = NULL;
    *streams = NULL;
    char *path = g_build_filename(dir, "info.json", NULL);
    struct stat st;
    if (lstat(path, &st) != 0) {
        g_free(path);
        return 0;
    }
    char *text;
    size_t len;
    int rc = jpt_read_small_file(path, MAX_INFO_BYTES, &text, &len, err, errlen);
    if (rc == 0) {
        info_scan s = { .c = c, .streams = g_array_new(FALSE, TRUE, sizeof(info_stream)) };
        rc = dc_json_scan(text, len, path, on_info, &s, err, errlen);
        c->have_info = rc == 0;
        *streams = s.streams;
        *by_name = g_hash_table_new(g_str_hash, g_str_equal);
        for (guint i = 0; i < s.streams->len; i++) {
            info_stream *is = &g_array_index(s.streams, info_stream, i);
            if (is->name && is->have_bytes)
                g_hash_table_insert(*by_name, is->name, is);
        }
        free(text);
    }
    g_free(path);
    return rc;
}

static void free_info(GHashTable *by_name, GArray *streams)
{
    if (by_name)
        g_hash_table_destroy(by_name);
    for (guint i = 0; streams && i < streams->len; i++)
        g_free(g_array_index(streams, info_stream, i).name);
    if (streams)
        g_array_free(streams, TRUE);
}

/* ---- jvm/meta.jpt and code.bin ------------------------------------------------- */

static int check_meta(const char *dir, dc_check *c, char *err, size_t errlen)
{
    char *mdir = jm_meta_dir(dir);
    if (!mdir)
        return fatal(err, errlen, "out of memory");
    jm_reader *r = jm_reader_open(mdir, err, errlen);
    free(mdir);
    if (!r)
        return -1;
    char cerr[1024];
    if (!jm_reader_code(r, 0, 0, cerr, sizeof cerr)) {
        jm_reader_close(r);
        return fatal(err, errlen, "%s", cerr);
    }
    uint64_t code_size = jm_reader_code_size(r);
    const char *meta = jm_reader_path(r);
    jm_record rec;
    jm_rec m;
    int rc;
    bool main_seen = false;
    while ((rc = jm_reader_next(r, &rec)) == 1) {
        if (rec.type == JM_END)
            c->meta_end = true;
        if (jm_parse(&rec, &m, cerr, sizeof cerr) < 0) {
            if (!c->meta_ignored++)
                warn(c, "%s: %s (record ignored)", meta, cerr);
            continue;
        }
        if (rec.type == JM_JVM_INFO)
            c->reference = m.u.jvm_info.mode == JM_MODE_REFERENCE;
        else if (rec.type == JM_THREAD_START && !main_seen && m.u.thread.name.len == 4 &&
                 !memcmp(m.u.thread.name.p, "main", 4)) {
            main_seen = true;
            c->main_tid = m.u.thread.native_tid;
        }
        const jm_code *code = rec.type == JM_CODE_BLOB ? &m.u.blob.code
                              : rec.type == JM_NMETHOD_LOAD ? &m.u.nmethod_load.code
                              : rec.type == JM_DYNAMIC_CODE ? &m.u.dynamic_code.code
                              : rec.type == JM_CODE_PATCH ? &m.u.patch.code : NULL;
        if (code && (code->code_offset > code_size || code->size > code_size - code->code_offset)
            && !c->code_cut++)
            warn(c, "%s: offset %" PRIu64 ": %s record's code bytes [%" PRIu64 ", +%" PRIu64
                 ") lie past the end of %s (%" PRIu64 " bytes): it was cut; that code is "
                 "unknown", meta, rec.offset, jm_type_name(rec.type), code->code_offset,
                 code->size, jm_reader_code_path(r), code_size);
    }
    if (rc < 0 && !jm_reader_cut(r)) {
        fatal(err, errlen, "%s", jm_reader_error(r));
        jm_reader_close(r);
        return -1;
    }
    if (rc < 0) {
        c->meta_cut = true;
        c->meta_cut_offset = jm_reader_offset(r);
        warn(c, "%s", jm_reader_error(r));   /* the same words as every reader's */
    } else if (!c->meta_end) {
        warn(c, "%s: no END record: the JVM did not shut down cleanly, its last records may "
             "be missing", meta);
    }
    if (c->meta_ignored > 1)
        warn(c, "%s: %" PRIu64 " records ignored in all (their payload cannot be read)", meta,
             c->meta_ignored);
    if (c->code_cut > 1)
        warn(c, "%s: %" PRIu64 " code records in all lie past the end of %s", meta, c->code_cut,
             jm_reader_code_path(r));
    jm_reader_close(r);
    return 0;
}

/* ---- pt/ ------------------------------------------------------------------------ */

static bool is_regular(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fatal(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        fatal(err, errlen, "%s: cannot read: not a regular file", path);
        return false;
    }
    return true;
}

/* One stream: NAME.pt and NAME.idx in ptdir, either may be absent. */
static int check_stream(dc_check *c, const char *ptdir, const char *name, GHashTable *info,
                        bool *present, uint64_t *decoded, char *err, size_t errlen)
{
    char *pt = g_strdup_printf("%s/%s.pt", ptdir, name);
    char *idxp = g_strdup_printf("%s/%s.idx", ptdir, name);
    struct stat st;
    bool have_pt = lstat(pt, &st) == 0, have_idx = lstat(idxp, &st) == 0;
    bool percpu = !strncmp(name, "cpu-", 4);
    *present = have_pt;
    int rc = -1;
    auxidx idx = { 0 };
    uint64_t size = 0;
    if (have_pt && !is_regular(pt, err, errlen))
        goto out;
    if (have_pt && stat(pt, &st) == 0)
        size = (uint64_t)st.st_size;
    if (!have_idx) {
        fatal(err, errlen, "%s: cannot read: %s (the losses of %s cannot be known)", idxp,
              strerror(ENOENT), pt);
        goto out;
    }
    int ir = auxidx_load(idxp, &idx, err, errlen);
    if (ir < 0)
        goto out;
    if (ir > 0) {
        c->indexes_cut++;
        warn(c, "%s", err);
        err[0] = '\0';
    }
    const info_stream *is = info ? g_hash_table_lookup(info, name) : NULL;
    if (is && idx.covered_end > is->pt_bytes) {
        fatal(err, errlen, "%s: its records end at stream offset %" PRIu64 ", past the %" PRIu64
              " bytes info.json lists for %s.pt", idxp, idx.covered_end, is->pt_bytes, name);
        goto out;
    }
    auxidx_extent e = auxidx_extent_of(&idx, size);
    *decoded = e.decode;
    uint64_t held = size > idx.covered_end ? size : idx.covered_end;
    uint64_t beyond = is && is->pt_bytes > held ? is->pt_bytes - held : 0;
    if (have_pt)
        c->streams++;
    if (!have_pt && (e.missing || beyond)) {
        c->streams_absent++;
        c->missing_bytes += e.missing + beyond;
        c->lost_outside += e.missing + beyond;
        warn(c, "%s: missing; %s lists %" PRIu64 " bytes of it: lost", pt,
             beyond ? "info.json" : "its index", e.missing + beyond);
    } else if (e.missing || beyond) {
        c->missing_bytes += e.missing + beyond;
        c->lost_outside += beyond + (percpu ? e.missing : 0);
        warn(c, "%s: offset %" PRIu64 ": the file ends %" PRIu64 " bytes before %s says it "
             "does (it was cut): they are lost", pt, size, e.missing + beyond,
             beyond ? "info.json" : "its index");
    }
    if (e.unindexed) {
        c->unindexed_bytes += e.unindexed;
        warn(c, "%s: offset %" PRIu64 ": %" PRIu64 " bytes past the end of its index, which no "
             "record delivered: not decoded", pt, e.decode, e.unindexed);
    }
    rc = 0;
out:
    auxidx_free(&idx);
    g_free(pt);
    g_free(idxp);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int check_streams(const char *dir, dc_check *c, GHashTable *info, char *err,
                         size_t errlen)
{
    char *ptdir = g_build_filename(dir, "pt", NULL);
    struct stat st;
    int rc = 0;
    if (lstat(ptdir, &st) != 0) {
        g_free(ptdir);
        return 0;
    }
    GDir *d = g_dir_open(ptdir, 0, NULL);
    if (!d) {
        g_free(ptdir);
        return fatal(err, errlen, "%s/pt: cannot read: not a directory or not readable", dir);
    }
    /* Every stream name once, whichever of its files is there. */
    GHashTable *names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    const char *e;
    while ((e = g_dir_read_name(d))) {
        size_t n = strlen(e);
        if (n > 3 && !strcmp(e + n - 3, ".pt"))
            g_hash_table_add(names, g_strndup(e, n - 3));
        else if (n > 4 && !strcmp(e + n - 4, ".idx"))
            g_hash_table_add(names, g_strndup(e, n - 4));
    }
    g_dir_close(d);
    /* Streams info.json lists that left no file. */
    GHashTableIter it;
    gpointer k;
    if (info) {
        g_hash_table_iter_init(&it, info);
        while (g_hash_table_iter_next(&it, &k, NULL))
            if (!g_hash_table_contains(names, k))
                g_hash_table_add(names, g_strdup(k));
    }
    guint n;
    char **sorted = (char **)g_hash_table_get_keys_as_array(names, &n);
    qsort(sorted, n, sizeof *sorted, cmp_str);
    char main_name[32];
    snprintf(main_name, sizeof main_name, "tid-%u", c->main_tid);
    bool per_thread = false, main_found = false;
    uint64_t main_decoded = 0;
    for (guint i = 0; i < n && rc == 0; i++) {
        uint64_t decoded = 0;
        bool present = false;
        rc = check_stream(c, ptdir, sorted[i], info, &present, &decoded, err, errlen);
        per_thread |= present && !strncmp(sorted[i], "tid-", 4);
        if (!strcmp(sorted[i], main_name)) {
            main_found = present;
            main_decoded = decoded;
        }
    }
    g_free(sorted);
    g_hash_table_destroy(names);
    /* A per-thread trace of a JVM whose main thread left no trace has lost
     * the thread that runs the program (per-CPU traces are split later). */
    if (rc == 0 && c->main_tid && !c->reference && per_thread && !main_decoded) {
        c->main_untraced = true;
        warn(c, "%s/%s.pt: thread main (tid %u) has no trace: %s", ptdir, main_name,
             c->main_tid, main_found ? "its stream holds no decodable bytes" : "no such file");
    }
    g_free(ptdir);
    return rc;
}

/* ---- the other JVMs of a process tree ------------------------------------------ */

/* "java-<n>": a later JVM of the recorded process tree, traced into a trace
 * directory of its own (collector/README.md, "Scripts"). */
static bool is_tree_jvm_dir(const char *dir, const char *name)
{
    if (strncmp(name, "java-", 5) != 0 || !name[5]) return false;
    for (const char *p = name + 5; *p; p++)
        if (*p < '0' || *p > '9') return false;
    char *path = g_build_filename(dir, name, NULL);
    struct stat st;
    bool is_dir = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
    g_free(path);
    return is_dir;
}

static gint natural_name_cmp(gconstpointer a, gconstpointer b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t lx = strlen(x), ly = strlen(y);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}

static void check_tree(const char *dir, dc_check *c)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d) return;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *e;
    while ((e = g_dir_read_name(d)))
        if (is_tree_jvm_dir(dir, e)) g_ptr_array_add(names, g_strdup(e));
    g_dir_close(d);
    if (names->len) {
        g_ptr_array_sort(names, natural_name_cmp);
        GString *list = g_string_new(NULL);
        for (guint i = 0; i < names->len && i < 4; i++)
            g_string_append_printf(list, "%s%s/%s", i ? ", " : "", dir,
                                   (const char *)g_ptr_array_index(names, i));
        if (names->len > 4) g_string_append(list, ", ...");
        warn(c, "%s: the recorded command ran %u more JVM%s, each traced into a directory of "
             "its own (%s): this decodes the first; give one of those directories to decode "
             "another", dir, names->len, names->len == 1 ? "" : "s", list->str);
        g_string_free(list, TRUE);
    }
    g_ptr_array_free(names, TRUE);
}

int dc_check_trace(const char *dir, dc_check *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fatal(err, errlen, "%s: not a trace directory", dir);
    c->warnings = g_ptr_array_new_with_free_func(g_free);
    c->kinds = g_ptr_array_new();
    GHashTable *info = NULL;
    GArray *streams = NULL;
    int rc = read_info(dir, c, &info, &streams, err, errlen);
    if (rc == 0)
        rc = check_meta(dir, c, err, errlen);
    if (rc == 0)
        rc = check_streams(dir, c, info, err, errlen);
    free_info(info, streams);
    if (rc < 0) {
        dc_check_free(c);
        return -1;
    }
    /* The state of the recording comes first. */
    static const char no_info[] = "info.json missing", not_complete[] = "not complete",
                      killed[] = "killed";
    if (!c->reference && c->streams && !c->have_info) {
        g_ptr_array_insert(c->warnings, 0, g_strdup_printf("%s/info.json: missing: whether the "
                                                           "recording finished is unknown", dir));
        g_ptr_array_insert(c->kinds, 0, (gpointer)no_info);
    } else if (c->have_info && !c->complete) {
        g_ptr_array_insert(c->warnings, 0, g_strdup_printf("%s/info.json: the recording did not "
                                                           "finish (\"complete\": false)", dir));
        g_ptr_array_insert(c->kinds, 0, (gpointer)not_complete);
    }
    check_tree(dir, c);
    if (c->exit_signal) {
        g_ptr_array_insert(c->warnings, 0, g_strdup_printf("%s/info.json: the command was "
                                                           "killed by signal %lld", dir,
                                                           c->exit_signal));
        g_ptr_array_insert(c->kinds, 0, (gpointer)killed);
    }
    return 0;
}

void dc_check_free(dc_check *c)
{
    if (c->warnings)
        g_ptr_array_free(c->warnings, TRUE);
    if (c->kinds)
        g_ptr_array_free(c->kinds, TRUE);
    memset(c, 0, sizeof *c);
}

bool dc_check_cut(const dc_check *c)
{
    return (!c->reference && c->streams && !c->have_info) || (c->have_info && !c->complete) ||
           c->exit_signal || c->meta_cut || !c->meta_end || c->indexes_cut;
}

static void add(GString *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(GString *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (s->len)
        g_string_append(s, "; ");
    g_string_append_vprintf(s, fmt, ap);
    va_end(ap);
}

const char *dc_check_recording(const dc_check *c, char *buf, size_t len)
{
    if (!dc_check_cut(c)) {
        snprintf(buf, len, "complete");
        return buf;
    }
    GString *s = g_string_new(NULL);
    if (!c->reference && c->streams && !c->have_info)
        add(s, "no info.json");
    else if (c->have_info && !c->complete)
        add(s, "info.json says it did not finish");
    if (c->exit_signal)
        add(s, "the command was killed by signal %lld", c->exit_signal);
    if (c->meta_cut)
        add(s, "jvm/meta.jpt cut at offset %" PRIu64, c->meta_cut_offset);
    else if (!c->meta_end)
        add(s, "jvm/meta.jpt has no END record");
    if (c->indexes_cut)
        add(s, "%" PRIu64 " stream index%s cut", c->indexes_cut, c->indexes_cut == 1 ? "" : "es");
    snprintf(buf, len, "cut: %s", s->str);
    g_string_free(s, TRUE);
    return buf;
}

const char *dc_check_losses(const dc_check *c, char *buf, size_t len)
{
    GString *s = g_string_new(NULL);
    if (c->streams_absent)
        g_string_append_printf(s, ", %" PRIu64 " stream%s absent", c->streams_absent,
                               c->streams_absent == 1 ? "" : "s");
    if (c->missing_bytes)
        g_string_append_printf(s, ", %" PRIu64 " bytes missing from cut streams", c->missing_bytes);
    if (c->unindexed_bytes)
        g_string_append_printf(s, ", %" PRIu64 " bytes past their index not decoded",
                               c->unindexed_bytes);
    if (c->main_untraced)
        g_string_append_printf(s, ", thread main (tid %u) untraced", c->main_tid);
    if (c->meta_ignored)
        g_string_append_printf(s, ", %" PRIu64 " metadata records ignored", c->meta_ignored);
    if (c->code_cut)
        g_string_append_printf(s, ", %" PRIu64 " code records past the end of code.bin",
                               c->code_cut);
    snprintf(buf, len, "%s", s->str);
    g_string_free(s, TRUE);
    return buf;
}
