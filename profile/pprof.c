/* pprof export (see pprof.h): profile.proto written by hand (varints and
 * length-delimited fields), then gzipped. */
#include "profile/pprof.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <glib.h>
#include <zlib.h>

#include "profile/coverage.h"
#include "profile/export.h"

/* profile.proto field numbers */
enum {
    PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6, PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
    LABEL_KEY = 1, LABEL_STR = 2,
    MAPPING_ID = 1, MAPPING_FILENAME = 5, MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
    MAPPING_HAS_LINE_NUMBERS = 9,
    LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1, LINE_LINE = 2,
    FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
    FUNCTION_START_LINE = 5,
};

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

static void pb_varint(GByteArray *b, uint64_t v)
{
    uint8_t buf[10];
    size_t n = 0;
    do {
        buf[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    g_byte_array_append(b, buf, (guint)n);
}

static void pb_tag(GByteArray *b, uint32_t field, int wire)
{
    pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}

/* A varint field; zero is the default and left out. */
static void pb_uint(GByteArray *b, uint32_t field, uint64_t v)
{
    if (!v)
        return;
    pb_tag(b, field, WIRE_VARINT);
    pb_varint(b, v);
}

static void pb_bytes(GByteArray *b, uint32_t field, const void *p, size_t n)
{
    pb_tag(b, field, WIRE_LEN);
    pb_varint(b, n);
    g_byte_array_append(b, p, (guint)n);
}

/* A sub-message: its bytes, then emptied for the next one. */
static void pb_msg(GByteArray *b, uint32_t field, GByteArray *sub)
{
    pb_bytes(b, field, sub->data, sub->len);
    g_byte_array_set_size(sub, 0);
}

typedef struct strtab {
    GHashTable *index;       /* string -> index + 1 */
    GPtrArray *strings;      /* owned */
} strtab;

/* The index of s in the string table; proto3 strings are UTF-8, and names
 * from class files may not be (modified UTF-8): invalid bytes become U+FFFD. */
static uint64_t str_id(strtab *t, const char *s)
{
    gpointer v = g_hash_table_lookup(t->index, s);
    if (v)
        return GPOINTER_TO_SIZE(v) - 1;
    char *copy = g_utf8_validate(s, -1, NULL) ? g_strdup(s) : g_utf8_make_valid(s, -1);
    gpointer again = g_hash_table_lookup(t->index, copy);
    if (again) {
        g_free(copy);
        return GPOINTER_TO_SIZE(again) - 1;
    }
    g_ptr_array_add(t->strings, copy);
    g_hash_table_insert(t->index, copy, GSIZE_TO_POINTER(t->strings->len));
    return t->strings->len - 1;
}

/* Gzips data to out (deflate level 6). */
static int gzip_out(FILE *out, const uint8_t *data, size_t len)
{
    z_stream z = { 0 };
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    uint8_t buf[1 << 16];
    z.next_in = (Bytef *)data;
    int rc = Z_OK;
    size_t left = len;
    do {
        uInt chunk = left > (1u << 30) ? 1u << 30 : (uInt)left;
        z.avail_in = chunk;
        left -= chunk;
        int flush = left ? Z_NO_FLUSH : Z_FINISH;
        do {
            z.next_out = buf;
            z.avail_out = sizeof buf;
            rc = deflate(&z, flush);
            size_t have = sizeof buf - z.avail_out;
            if (rc == Z_STREAM_ERROR || fwrite(buf, 1, have, out) != have) {
                deflateEnd(&z);
                return -1;
            }
        } while (z.avail_out == 0);
    } while (left);
    deflateEnd(&z);
    return rc == Z_STREAM_END && !ferror(out) ? 0 : -1;
}

/* The first line of m's code in its LineNumberTable, 0 when none. */
static int64_t first_line(const rc_method *m)
{
    int64_t best = 0;
    for (uint32_t i = 0; i < m->nlines; i++)
        if (m->lines[i].line && (!best || m->lines[i].line < best))
            best = m->lines[i].line;
    return best;
}

int pf_export_pprof(FILE *out, const pf_cct *t, const pf_names *names, const rc_program *prog,
                    double tsc_hz)
{
    strtab st = { g_hash_table_new(g_str_hash, g_str_equal), g_ptr_array_new_with_free_func(g_free) };
    str_id(&st, "");
    GByteArray *pb = g_byte_array_new(), *sub = g_byte_array_new(), *inner = g_byte_array_new();

    bool any_bytecodes = t->nodes[0].bytecodes > 0;
    /* The value shown by default goes last: readers that ignore
     * default_sample_type take the last one. */
    const char *time_unit = tsc_hz > 0 ? "nanoseconds" : "ticks";
    const char *types[3][2] = { { "calls", "count" }, { "time", time_unit },
                                { "bytecodes", "count" } };
    int order[3] = { 0, 1, 2 };     /* calls, time, bytecodes */
    if (!any_bytecodes) {
        order[1] = 2;
        order[2] = 1;               /* calls, bytecodes, time */
    }
    for (int k = 0; k < 3; k++) {
        pb_uint(sub, VALUE_TYPE_TYPE, str_id(&st, types[order[k]][0]));
        pb_uint(sub, VALUE_TYPE_UNIT, str_id(&st, types[order[k]][1]));
        pb_msg(pb, PROFILE_SAMPLE_TYPE, sub);
    }
    pb_uint(pb, PROFILE_DEFAULT_SAMPLE_TYPE, str_id(&st, types[order[2]][0]));
    pb_uint(pb, PROFILE_COMMENT, str_id(&st, "jpt: one sample per calling context"));

    /* One mapping, already symbolized: readers need look up no binary. */
    pb_uint(sub, MAPPING_ID, 1);
    pb_uint(sub, MAPPING_FILENAME, str_id(&st, "java"));
    pb_uint(sub, MAPPING_HAS_FUNCTIONS, 1);
    pb_uint(sub, MAPPING_HAS_FILENAMES, prog != NULL);
    pb_uint(sub, MAPPING_HAS_LINE_NUMBERS, prog != NULL);
    pb_msg(pb, PROFILE_MAPPING, sub);

    /* Functions (one location each), numbered from 1 in order of appearance. */
    GHashTable *fid = g_hash_table_new(g_int64_hash, g_int64_equal);
    uint32_t *node_fn = g_new0(uint32_t, t->count);
    uint32_t nfn = 0;
    char buf[32];
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        if (n->method == PF_NO_METHOD)
            continue;
        gpointer v = g_hash_table_lookup(fid, &n->method);
        if (v) {
            node_fn[i] = GPOINTER_TO_UINT(v);
            continue;
        }
        node_fn[i] = ++nfn;
        g_hash_table_insert(fid, (gpointer)&t->nodes[i].method, GUINT_TO_POINTER(nfn));
        const pf_method_name *mn = names ? pf_names_method(names, n->method) : NULL;
        const rc_method *rm = prog ? rc_method_by_id(prog, n->method) : NULL;
        pb_uint(sub, FUNCTION_ID, nfn);
        pb_uint(sub, FUNCTION_NAME, str_id(&st, pf_names_readable(names, n->method, buf,
                                                                  sizeof buf)));
        if (mn) {
            char *jvm = g_strdup_printf("%s.%s%s", mn->class_name, mn->name, mn->sig);
            pb_uint(sub, FUNCTION_SYSTEM_NAME, str_id(&st, jvm));
            g_free(jvm);
        }
        int64_t line = rm ? first_line(rm) : 0;
        if (rm) {
            char *file = pf_cov_source_path(rm);
            pb_uint(sub, FUNCTION_FILENAME, str_id(&st, file));
            g_free(file);
            pb_uint(sub, FUNCTION_START_LINE, (uint64_t)line);
        }
        pb_msg(pb, PROFILE_FUNCTION, sub);
        pb_uint(inner, LINE_FUNCTION_ID, nfn);
        pb_uint(inner, LINE_LINE, (uint64_t)line);
        pb_uint(sub, LOCATION_ID, nfn);
        pb_uint(sub, LOCATION_MAPPING_ID, 1);
        pb_msg(sub, LOCATION_LINE, inner);
        pb_msg(pb, PROFILE_LOCATION, sub);
    }

    /* Samples: every method node with a value; the stack innermost first.
     * The thread roots' own values (events outside any frame the trace
     * shows) have no stack and are left out, as hot leaves them out. */
    uint64_t key_thread = str_id(&st, "thread");
    uint64_t *label = g_new0(uint64_t, t->count);     /* thread label's string per node */
    double ns_per_tick = tsc_hz > 0 ? 1e9 / tsc_hz : 1;
    for (uint32_t i = 1; i < t->count; i++) {
        const pf_node *n = &t->nodes[i];
        if (n->method == PF_NO_METHOD) {
            char *l = pf_thread_label(names, n);
            label[i] = str_id(&st, l);
            g_free(l);
            continue;
        }
        label[i] = label[n->parent];
        uint64_t time = (uint64_t)((double)n->self_time * ns_per_tick + 0.5);
        if (!n->calls && !n->self_bytecodes && !time)
            continue;
        for (int32_t a = (int32_t)i; a > 0 && t->nodes[a].method != PF_NO_METHOD;
             a = t->nodes[a].parent)
            pb_varint(inner, node_fn[a]);
        pb_msg(sub, SAMPLE_LOCATION_ID, inner);
        uint64_t values[3] = { n->calls, time, n->self_bytecodes };
        for (int k = 0; k < 3; k++)
            pb_varint(inner, values[order[k]]);
        pb_msg(sub, SAMPLE_VALUE, inner);
        if (label[i]) {
            pb_uint(inner, LABEL_KEY, key_thread);
            pb_uint(inner, LABEL_STR, label[i]);
            pb_msg(sub, SAMPLE_LABEL, inner);
        }
        pb_msg(pb, PROFILE_SAMPLE, sub);
    }
    for (guint s = 0; s < st.strings->len; s++) {
        const char *str = st.strings->pdata[s];
        pb_bytes(pb, PROFILE_STRING_TABLE, str, strlen(str));
    }
    int rc = gzip_out(out, pb->data, pb->len);
    g_free(label);
    g_free(node_fn);
    g_hash_table_destroy(fid);
    g_byte_array_free(pb, TRUE);
    g_byte_array_free(sub, TRUE);
    g_byte_array_free(inner, TRUE);
    g_hash_table_destroy(st.index);
    g_ptr_array_free(st.strings, TRUE);
    return rc;
}
