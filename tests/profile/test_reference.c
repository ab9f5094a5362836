/* The reference flow producer over a hand-written meta.jpt, and names. */
#include <criterion/criterion.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "common/jmeta.h"
#include "profile/names.h"
#include "reconstruct/reference.h"

static void put_ref(jm_writer *w, uint16_t type, uint64_t tsc, uint32_t tid, uint64_t m, int32_t x)
{
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u32(&b, tid);
    jm_put_u64(&b, m);
    if (type == JM_METHOD_EXIT)
        jm_put_u8(&b, (uint8_t)x);
    else if (type == JM_SINGLE_STEP)
        jm_put_i32(&b, x);
    cr_assert_eq(jm_write(w, type, tsc, b.data, (uint32_t)b.len, NULL, 0), 0);
    jm_buf_free(&b);
}

typedef struct collected {
    GArray *ev;
} collected;

static int collect(const fl_event *ev, void *ctx)
{
    collected *c = ctx;
    g_array_append_val(c->ev, *ev);
    return 0;
}

Test(reference, replays_records)
{
    char *dir = g_dir_make_tmp("jpt-ref-XXXXXX", NULL);
    cr_assert_not_null(dir);
    char err[256];
    jm_writer *w = jm_writer_open(dir, 1, 1, err, sizeof err);
    cr_assert_not_null(w, "%s", err);
    jm_buf b;
    jm_buf_init(&b);
    jm_put_str(&b, "vm");
    jm_put_str(&b, "17");
    jm_put_str(&b, "x");
    jm_put_str(&b, "/jdk");
    jm_put_u32(&b, JM_MODE_REFERENCE);
    jm_put_str(&b, "mode=reference");
    jm_write(w, JM_JVM_INFO, 2, b.data, (uint32_t)b.len, NULL, 0);
    jm_buf_free(&b);
    jm_buf_init(&b);
    jm_put_u64(&b, 0x10);
    jm_put_u64(&b, 1);
    jm_put_str(&b, "Ljava/lang/String;");
    jm_put_str(&b, "indexOf");
    jm_put_str(&b, "(Ljava/lang/String;I)I");
    jm_put_u32(&b, 1);
    jm_write(w, JM_METHOD, 3, b.data, (uint32_t)b.len, NULL, 0);
    jm_buf_free(&b);
    put_ref(w, JM_METHOD_EXIT, 9, 5, 0x77, 0);      /* entered before recording: dropped */
    put_ref(w, JM_METHOD_ENTRY, 10, 5, 0x10, 0);
    put_ref(w, JM_SINGLE_STEP, 11, 5, 0x10, 3);
    put_ref(w, JM_METHOD_ENTRY, 12, 5, 0x20, 0);
    put_ref(w, JM_METHOD_ENTRY, 13, 6, 0x30, 0);    /* another thread */
    put_ref(w, JM_METHOD_ENTRY, 14, 5, 0x21, 0);
    put_ref(w, JM_METHOD_EXIT, 15, 5, 0x20, 1);     /* unwinds 0x21 first */
    put_ref(w, JM_METHOD_EXIT, 16, 5, 0x10, 0);
    cr_assert_eq(jm_writer_close(w), 0);

    cr_assert_eq(ref_trace_mode(dir, err, sizeof err), JM_MODE_REFERENCE);
    collected c = { g_array_new(FALSE, TRUE, sizeof(fl_event)) };
    ref_stats st;
    cr_assert_eq(ref_flow_read(dir, collect, &c, &st, err, sizeof err), 0, "%s", err);
    cr_assert_eq(st.entries, 4);
    cr_assert_eq(st.exits, 3);
    cr_assert_eq(st.steps, 1);
    cr_assert_eq(st.dropped_exits, 1);
    cr_assert_eq(st.unwound_frames, 1);
    cr_assert_eq(st.threads, 2);
    static const struct { fl_kind k; uint32_t tid; uint64_t m; int32_t bci; } want[] = {
        { FL_SEGMENT, 5, 0, -1 },   { FL_CALL, 5, 0x10, -1 }, { FL_BYTECODE, 5, 0x10, 3 },
        { FL_CALL, 5, 0x20, 3 },    { FL_SEGMENT, 6, 0, -1 }, { FL_CALL, 6, 0x30, -1 },
        { FL_CALL, 5, 0x21, -1 },   { FL_RETURN, 5, 0x21, -1 }, { FL_RETURN, 5, 0x20, -1 },
        { FL_RETURN, 5, 0x10, -1 },
    };
    cr_assert_eq(c.ev->len, sizeof want / sizeof want[0]);
    for (guint i = 0; i < c.ev->len; i++) {
        fl_event *e = &g_array_index(c.ev, fl_event, i);
        cr_assert_eq(e->kind, want[i].k, "event %u", i);
        cr_assert_eq(e->tid, want[i].tid, "event %u", i);
        if (e->kind != FL_SEGMENT)
            cr_assert_eq(e->method_id, want[i].m, "event %u", i);
        if (e->kind != FL_RETURN)
            cr_assert_eq(e->bci, want[i].bci, "event %u", i);
    }
    cr_assert(g_array_index(c.ev, fl_event, 7).flags & FL_F_EXCEPTION);
    cr_assert_eq(g_array_index(c.ev, fl_event, 2).count, 1);

    pf_names *n = pf_names_load(dir, err, sizeof err);
    cr_assert_not_null(n);
    char buf[32];
    cr_assert_str_eq(pf_names_readable(n, 0x10, buf, sizeof buf),
                     "java.lang.String.indexOf(java.lang.String, int)");
    cr_assert_str_eq(pf_names_method(n, 0x10)->class_name, "java/lang/String");
    cr_assert_str_eq(pf_names_readable(n, 0x99, buf, sizeof buf), "0x99");
    pf_names_free(n);
    g_array_free(c.ev, TRUE);

    /* Hostile input: a truncated stream gives a one-line error. */
    char *meta = g_build_filename(dir, "meta.jpt", NULL);
    gchar *data;
    gsize len;
    cr_assert(g_file_get_contents(meta, &data, &len, NULL));
    cr_assert(g_file_set_contents(meta, data, (gssize)len - 3, NULL));
    collected d = { g_array_new(FALSE, TRUE, sizeof(fl_event)) };
    cr_assert_eq(ref_flow_read(dir, collect, &d, NULL, err, sizeof err), -1);
    cr_assert_null(strchr(err, '\n'));
    cr_assert_gt(strlen(err), 0);
    g_array_free(d.ev, TRUE);
    g_free(data);
    g_free(meta);
    cr_assert_eq(ref_flow_read("/nonexistent", collect, &d, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "not a trace directory"));
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    g_free(dir);
}

Test(names, readable_params)
{
    char *s = pf_readable_params("([[ILjava/util/List;JZ)V");
    cr_assert_str_eq(s, "(int[][], java.util.List, long, boolean)");
    g_free(s);
    s = pf_readable_params("(L");
    g_free(s);   /* malformed: no crash */
}

Test(names, patterns_in_both_styles)
{
    static const struct { const char *glob; bool hit; } cases[] = {
        { "java.lang.String.indexOf(java.lang.String, int)", true },
        { "java/lang/String.indexOf(Ljava/lang/String;I)I", true },
        { "java.lang.String.indexOf", true },
        { "java.lang.String.index*", true },
        { "java/lang/String.index*", true },
        { "*.indexOf(*int)", true },
        { "java.lang.String.indexOf(int)", false },
        { "java/lang/String.indexOf", false },     /* a JVM name has its descriptor */
        { "java.lang.Strin", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pf_method_pattern *p = pf_method_pattern_new(cases[i].glob);
        cr_assert_eq(pf_method_pattern_match(p, "java/lang/String", "indexOf",
                                             "(Ljava/lang/String;I)I"), cases[i].hit, "%s",
                     cases[i].glob);
        cr_assert_eq(pf_method_pattern_matched(p), cases[i].hit);
        /* the flow names methods in JVM style */
        cr_assert_eq(pf_method_pattern_match_jvm(p, "java/lang/String.indexOf("
                                                    "Ljava/lang/String;I)I"), cases[i].hit,
                     "%s (JVM name)", cases[i].glob);
        pf_method_pattern_free(p);
    }
    pf_method_pattern *p = pf_method_pattern_new("?");
    cr_assert(pf_method_pattern_match_jvm(p, "?"));   /* a frame the trace could not name */
    pf_method_pattern_free(p);
    cr_assert(pf_class_pattern_match("com.example.?*", "com/example/Foo"));
    cr_assert(pf_class_pattern_match("com/example/?*", "com/example/Foo"));
    cr_assert(!pf_class_pattern_match("com.example.?*", "com/examples/Foo"));
}

Test(names, simple_names)
{
    pf_names *n = pf_names_new();
    pf_names_add_method(n, 7, "Ljava/util/List;", "add", "(Ljava/lang/Object;)Z", 0x401);
    char buf[32];
    cr_assert_str_eq(pf_names_readable(n, 7, buf, sizeof buf), "java.util.List.add(java.lang.Object)");
    pf_names_set_simple(n, true);
    cr_assert_str_eq(pf_names_readable(n, 7, buf, sizeof buf), "java.util.List.add");
    cr_assert_eq(pf_names_method(n, 7)->modifiers, 0x401);
    cr_assert_str_eq(pf_names_readable(n, 0, buf, sizeof buf), "?");
    pf_names_free(n);
}
