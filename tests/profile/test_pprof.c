/* The pprof writer on a small tree: read back (gunzip, then the protobuf's
 * top-level fields), its samples hold the tree's values with stacks
 * innermost first, and every string is UTF-8 even when a name is not. */
#include <criterion/criterion.h>
#include <glib.h>
#include <string.h>
#include <zlib.h>

#include "profile/pprof.h"

static uint64_t varint(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    return v;
}

typedef struct field {
    uint32_t num;
    uint64_t value;              /* varint */
    const uint8_t *data;         /* length-delimited */
    size_t len;
} field;

/* The fields of one message, in order. */
static GArray *fields(const uint8_t *p, size_t n)
{
    GArray *out = g_array_new(FALSE, TRUE, sizeof(field));
    const uint8_t *end = p + n;
    while (p < end) {
        uint64_t tag = varint(&p, end);
        field f = { .num = (uint32_t)(tag >> 3) };
        if ((tag & 7) == 0) {
            f.value = varint(&p, end);
        } else {
            cr_assert_eq(tag & 7, 2, "wire type %u", (unsigned)(tag & 7));
            f.len = varint(&p, end);
            cr_assert_leq(f.len, (size_t)(end - p));
            f.data = p;
            p += f.len;
        }
        g_array_append_val(out, f);
    }
    return out;
}

static GArray *packed(const field *f)
{
    GArray *v = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    const uint8_t *p = f->data;
    while (p < f->data + f->len) {
        uint64_t x = varint(&p, f->data + f->len);
        g_array_append_val(v, x);
    }
    return v;
}

Test(pprof, round_trip)
{
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *t = pf_cct_new(&o);
    int32_t root = pf_cct_thread_root(t, 42);
    int32_t a = pf_cct_child(t, root, 1, -1), b = pf_cct_child(t, a, 2, -1);
    t->nodes[a].calls = 1;
    t->nodes[a].self_bytecodes = 10;
    t->nodes[b].calls = 3;
    t->nodes[b].self_bytecodes = 5;
    t->nodes[b].self_time = 2000;
    t->nodes[root].self_time = 777;      /* outside any frame: left out */
    pf_cct *fin = pf_cct_finalize(t);
    pf_names *n = pf_names_new();
    pf_names_add_method(n, 1, "LMain;", "run", "()V", 0);
    pf_names_add_method(n, 2, "Lbad/Na\xffme;", "m\xc0", "(I)V", 0);
    pf_names_add_thread(n, 42, "main");

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(pf_export_pprof(f, fin, n, NULL, 2e9), 0);
    fclose(f);
    cr_assert(len > 18 && (uint8_t)buf[0] == 0x1f && (uint8_t)buf[1] == 0x8b, "gzip");
    uLongf cap = 1 << 20;
    uint8_t *raw = g_malloc(cap);
    z_stream z = { .next_in = (Bytef *)buf, .avail_in = (uInt)len, .next_out = raw,
                   .avail_out = (uInt)cap };
    cr_assert_eq(inflateInit2(&z, 15 + 16), Z_OK);
    cr_assert_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
    size_t rawlen = z.total_out;
    inflateEnd(&z);

    GArray *top = fields(raw, rawlen);
    GPtrArray *strings = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *samples = g_ptr_array_new();
    for (guint i = 0; i < top->len; i++) {
        field *x = &g_array_index(top, field, i);
        if (x->num == 6)
            g_ptr_array_add(strings, g_strndup((const char *)x->data, x->len));
        if (x->num == 2)
            g_ptr_array_add(samples, x);
    }
    cr_assert_str_eq(strings->pdata[0], "");
    for (guint i = 0; i < strings->len; i++)
        cr_assert(g_utf8_validate(strings->pdata[i], -1, NULL), "string %u", i);
    bool named = false;
    for (guint i = 0; i < strings->len; i++)
        named |= !strcmp(strings->pdata[i], "Main.run()");
    cr_assert(named);
    /* two samples: run (stack [run]) and its callee (stack [callee, run]);
     * values calls, time (ns at 2 GHz), bytecodes */
    cr_assert_eq(samples->len, 2);
    uint64_t want[2][3] = { { 1, 0, 10 }, { 3, 1000, 5 } };
    for (guint s = 0; s < 2; s++) {
        GArray *sf = fields(((field *)samples->pdata[s])->data, ((field *)samples->pdata[s])->len);
        GArray *locs = NULL, *vals = NULL;
        for (guint i = 0; i < sf->len; i++) {
            field *x = &g_array_index(sf, field, i);
            if (x->num == 1)
                locs = packed(x);
            if (x->num == 2)
                vals = packed(x);
        }
        cr_assert_not_null(locs);
        cr_assert_not_null(vals);
        cr_assert_eq(locs->len, s + 1);
        cr_assert_eq(vals->len, 3);
        for (int k = 0; k < 3; k++)
            cr_assert_eq(g_array_index(vals, uint64_t, k), want[s][k], "sample %u value %d", s, k);
        if (s == 1)   /* innermost first: the callee's location, then run's */
            cr_assert_neq(g_array_index(locs, uint64_t, 0), g_array_index(locs, uint64_t, 1));
        g_array_free(locs, TRUE);
        g_array_free(vals, TRUE);
        g_array_free(sf, TRUE);
    }
    g_ptr_array_free(samples, TRUE);
    g_ptr_array_free(strings, TRUE);
    g_array_free(top, TRUE);
    g_free(raw);
    free(buf);
    pf_names_free(n);
    pf_cct_free(fin);
    pf_cct_free(t);
}
