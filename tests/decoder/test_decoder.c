/* Units of the decoder: bytecode mapping, info.json, the code timeline, and
 * decoding of small PT streams made with libipt's encoder over a synthetic
 * trace directory whose code and metadata are written with the jmeta
 * writer. */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "common/auxidx.h"
#include "common/jmeta.h"
#include "decoder/bytecodes.h"
#include "decoder/decode.h"
#include "decoder/jitpath.h"

/* ---- bytecodes ------------------------------------------------------------ */

Test(bytecodes, standard_names)
{
    cr_expect_str_eq(bc_name(0), "nop");
    cr_expect_str_eq(bc_name(26), "iload_0");
    cr_expect_str_eq(bc_name(104), "imul");
    cr_expect_str_eq(bc_name(172), "ireturn");
    cr_expect_str_eq(bc_name(201), "jsr_w");
    cr_expect_null(bc_name(202));
    cr_expect_null(bc_name(-1));
    cr_expect_eq(bc_lookup("invokedynamic"), 186);
    cr_expect_eq(bc_lookup("fast_agetfield"), -1);
}

Test(bytecodes, rewritten_forms_map_back)
{
    uint8_t ops[2];
    cr_expect_eq(bc_std_ops("iload_0", 26, ops), 1);
    cr_expect_eq(ops[0], 26);
    cr_expect_eq(bc_std_ops("fast_agetfield", 203, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("getfield"));
    cr_expect_eq(bc_std_ops("fast_zputfield", 213, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("putfield"));
    cr_expect_eq(bc_std_ops("fast_invokevfinal", 227, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("invokevirtual"));
    cr_expect_eq(bc_std_ops("fast_binaryswitch", 229, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("lookupswitch"));
    cr_expect_eq(bc_std_ops("fast_aldc_w", 231, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("ldc_w"));
    cr_expect_eq(bc_std_ops("return_register_finalizer", 232, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("return"));
    cr_expect_eq(bc_std_ops("invokehandle", 233, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("invokevirtual"));
    cr_expect_eq(bc_std_ops("nofast_iload", 237, ops), 1);
    cr_expect_eq(ops[0], bc_lookup("iload"));
}

Test(bytecodes, fused_forms_expand_to_two)
{
    uint8_t ops[2];
    cr_assert_eq(bc_std_ops("fast_iaccess_0", 221, ops), 2);
    cr_expect_eq(ops[0], bc_lookup("aload_0"));
    cr_expect_eq(ops[1], bc_lookup("getfield"));
    cr_assert_eq(bc_std_ops("fast_faccess_0", 223, ops), 2);
    cr_expect_eq(ops[1], bc_lookup("getfield"));
    cr_assert_eq(bc_std_ops("fast_iload2", 225, ops), 2);
    cr_expect_eq(ops[0], bc_lookup("iload"));
    cr_expect_eq(ops[1], bc_lookup("iload"));
    cr_assert_eq(bc_std_ops("fast_icaload", 226, ops), 2);
    cr_expect_eq(ops[1], bc_lookup("caload"));
}

Test(bytecodes, non_bytecode_codelets)
{
    uint8_t ops[2];
    cr_expect_eq(bc_std_ops("breakpoint", 202, ops), 0);
    cr_expect_eq(bc_std_ops("_shouldnotreachhere", 238, ops), 0);
    cr_expect_eq(bc_std_ops("fast_something_new", 240, ops), 0);
    cr_expect_eq(bc_std_ops("method entry point (kind = zerolocals)", -1, ops), 0);
    /* no name: the number decides, standard range only */
    cr_expect_eq(bc_std_ops("", 96, ops), 1);
    cr_expect_eq(ops[0], 96);
    cr_expect_eq(bc_std_ops(NULL, 221, ops), 0);
}

/* ---- info.json ------------------------------------------------------------ */

Test(trinfo, reads_cpu_and_backend)
{
    const char *j = "{\"version\": 1, \"backend\": \"emulated\", \"command\": [\"java\", \"-x\"],"
                    " \"cpu\": {\"vendor\": \"GenuineIntel\", \"family\": 6, \"model\": 85,"
                    " \"stepping\": 4}, \"pt\": {\"filter\": {\"ranges\": [[1, 2]]}}}";
    dc_trace_info info;
    char err[256];
    cr_assert_eq(dc_parse_info(j, strlen(j), "info.json", &info, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(info.backend, "emulated");
    cr_expect_eq(info.cpu.vendor, pcv_intel);
    cr_expect_eq(info.cpu.family, 6);
    cr_expect_eq(info.cpu.model, 85);
    cr_expect_eq(info.cpu.stepping, 4);
}

Test(trinfo, other_vendor_means_no_errata)
{
    const char *j = "{\"cpu\": {\"vendor\": \"AuthenticAMD\", \"family\": 25, \"model\": 1}}";
    dc_trace_info info;
    char err[256];
    cr_assert_eq(dc_parse_info(j, strlen(j), "info.json", &info, err, sizeof err), 0);
    cr_expect_eq(info.cpu.vendor, pcv_unknown);
    cr_expect_eq(info.cpu.family, 0);
}

Test(trinfo, malformed_json_names_file_and_offset)
{
    const char *bad[] = { "{\"cpu\": {\"family\": 6,}", "{\"a\" 1}", "[1, 2", "{\"x\": \"abc",
                          "", "{} trailing", "{\"k\": @}" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dc_trace_info info;
        char err[256] = "";
        cr_expect_eq(dc_parse_info(bad[i], strlen(bad[i]), "t/info.json", &info, err, sizeof err),
                     -1, "accepted: %s", bad[i]);
        cr_expect(strstr(err, "t/info.json: offset ") == err, "message: %s", err);
    }
    /* deep nesting is refused, not a stack overflow */
    char deep[4096];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    dc_trace_info info;
    char err[256];
    cr_expect_eq(dc_parse_info(deep, strlen(deep), "d", &info, err, sizeof err), -1);
}

/* ---- a synthetic trace directory ------------------------------------------ */

#define INTERP 0x10000ull
#define STUB 0x20000ull
#define NM 0x30000ull
#define HANDLERS 0x40000ull
#define NM3 0x70000ull
#define NM4 0x80000ull
#define NM5 0x90000ull
#define M1 0x1111ull
#define M2 0x2222ull
#define M3 0x3333ull

static void emit(jm_writer *w, uint16_t type, uint64_t tsc, jm_buf *b, const void *code,
                 uint64_t n)
{
    cr_assert(!b->failed);
    cr_assert_eq(jm_write(w, type, tsc, b->data, (uint32_t)b->len, code, n), 0);
    b->len = 0;
}

static void codelet(jm_writer *w, jm_buf *b, uint64_t lo, uint64_t hi, int32_t bc, const char *d)
{
    jm_put_u64(b, lo);
    jm_put_u64(b, hi);
    jm_put_i32(b, bc);
    jm_put_str(b, d);
    emit(w, JM_CODELET, 10, b, NULL, 0);
}

static void method_sig(jm_writer *w, jm_buf *b, uint64_t id, const char *name, const char *sig,
                       uint32_t modifiers)
{
    jm_put_u64(b, id);
    jm_put_u64(b, 1);
    jm_put_str(b, "LT;");
    jm_put_str(b, name);
    jm_put_str(b, sig);
    jm_put_u32(b, modifiers);
    emit(w, JM_METHOD, 11, b, NULL, 0);
}

static void method(jm_writer *w, jm_buf *b, uint64_t id, const char *name)
{
    method_sig(w, b, id, name, "()V", 9);     /* public static */
}

/* A fresh trace directory with jvm/ and pt/, and a metadata writer on jvm/. */
static jm_writer *open_trace_dir(char **dir)
{
    *dir = g_dir_make_tmp("jpt-dec-XXXXXX", NULL);
    cr_assert_not_null(*dir);
    char *jvm = g_build_filename(*dir, "jvm", NULL);
    char *pt = g_build_filename(*dir, "pt", NULL);
    g_mkdir(jvm, 0755);
    g_mkdir(pt, 0755);
    char err[512];
    jm_writer *w = jm_writer_open(jvm, 1, 42, err, sizeof err);
    cr_assert_not_null(w, "%s", err);
    g_free(jvm);
    g_free(pt);
    return w;
}

/* Ends a trace's metadata with the main thread's start record (tid 4242,
 * at t 20), and frees b. */
static void close_with_main_thread(jm_writer *w, jm_buf *b)
{
    jm_put_u64(b, 1); jm_put_u32(b, 4242); jm_put_str(b, "main");
    emit(w, JM_THREAD_START, 20, b, NULL, 0);
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(b);
}

/* Interpreter: iload_0 [0x00,0x20), fast_iaccess_0 [0x20,0x40), method entry
 * [0x40,0x60), imul [0x60,0x80) which calls the stub and returns, ifeq
 * [0x80,0xa0), invokeinterface [0xc0,0xe0), wide [0xe0,0x100) (nothing at
 * 0xa0). Each ends
 * in HotSpot's dispatch, an indirect jmp *%rax (ff e0). The stub is a ret.
 * Compiled method M1 at NM (t 100..5000): 4 nops, jmp *%rax at NM+4, with
 * inline records {NM+2: M1@0} {NM+6: M2@5 in M1@9}; patched at t 3000 so
 * NM+4 holds a ret. M3 reuses NM from t 6000 (nop, jmp *%rax). */
static char *make_trace(void)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);

    uint8_t interp[0x100];
    memset(interp, 0xcc, sizeof interp);
    memcpy(interp + 0x00, "\x90\x90\xff\xe0", 4);
    memcpy(interp + 0x20, "\x90\xff\xe0", 3);
    memcpy(interp + 0x40, "\x90\xff\xe0", 3);
    /* imul: nop; call STUB; jmp *%rax */
    uint64_t call_at = INTERP + 0x61;
    int32_t rel = (int32_t)(STUB - (call_at + 5));
    interp[0x60] = 0x90;
    interp[0x61] = 0xe8;
    memcpy(interp + 0x62, &rel, 4);
    memcpy(interp + 0x66, "\xff\xe0", 2);
    /* ifeq: je to its not-taken path (+4) past the taken path's dispatch */
    memcpy(interp + 0x80, "\x74\x02\xff\xe0\xff\xe0", 6);
    /* invokeinterface: the itable scan, peeled once (je to the dispatch),
     * then a loop (head +0xc2, jne back to it) */
    memcpy(interp + 0xc0, "\x74\x06\x90\x90\x75\xfc\x90\x90\xff\xe0", 10);
    memcpy(interp + 0xe0, "\x90\xff\xe0", 3);

    jm_put_u64(&b, INTERP); jm_put_u64(&b, sizeof interp); jm_put_u64(&b, 0);
    jm_put_u32(&b, JM_BLOB_INTERPRETER); jm_put_str(&b, "Interpreter");
    emit(w, JM_CODE_BLOB, 5, &b, interp, sizeof interp);
    codelet(w, &b, INTERP + 0x00, INTERP + 0x20, 26, "iload_0");
    codelet(w, &b, INTERP + 0x20, INTERP + 0x40, 221, "fast_iaccess_0");
    codelet(w, &b, INTERP + 0x40, INTERP + 0x60, -1, "method entry point (kind = zerolocals)");
    codelet(w, &b, INTERP + 0x60, INTERP + 0x80, 104, "imul");
    codelet(w, &b, INTERP + 0x80, INTERP + 0xa0, 153, "ifeq");
    codelet(w, &b, INTERP + 0xc0, INTERP + 0xe0, 185, "invokeinterface");
    codelet(w, &b, INTERP + 0xe0, INTERP + 0x100, 196, "wide");
    method(w, &b, M1, "one");
    method(w, &b, M2, "two");
    method(w, &b, M3, "three");

    /* Reported late (t 900), valid from the start: nothing was there before. */
    jm_put_u64(&b, STUB); jm_put_u64(&b, 1); jm_put_u64(&b, 0); jm_put_str(&b, "stubby");
    emit(w, JM_DYNAMIC_CODE, 900, &b, "\xc3", 1);

    uint8_t nm1[16] = { 0x90, 0x90, 0x90, 0x90, 0xff, 0xe0 };
    memset(nm1 + 6, 0xcc, 10);
    jm_put_u64(&b, NM); jm_put_u64(&b, sizeof nm1); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 4); jm_put_u32(&b, 2);
    jm_put_u64(&b, NM + 6); jm_put_u32(&b, 2);           /* stored out of order */
    jm_put_u64(&b, M2); jm_put_i32(&b, 5); jm_put_u64(&b, M1); jm_put_i32(&b, 9);
    jm_put_u64(&b, NM + 2); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 0);
    emit(w, JM_NMETHOD_LOAD, 100, &b, nm1, sizeof nm1);

    jm_put_u64(&b, NM + 4); jm_put_u64(&b, 2); jm_put_u64(&b, 0);
    emit(w, JM_CODE_PATCH, 3000, &b, "\xc3\x90", 2);

    /* A buffer reported while mostly empty and filled later (HotSpot's
     * signature handlers): the patch over its zeros is recorded at t 5000,
     * after the code first ran. */
    uint8_t handlers[64] = { 0xc3 };
    jm_put_u64(&b, HANDLERS); jm_put_u64(&b, sizeof handlers); jm_put_u64(&b, 0);
    jm_put_str(&b, "native signature handlers");
    emit(w, JM_DYNAMIC_CODE, 800, &b, handlers, sizeof handlers);
    jm_put_u64(&b, HANDLERS + 0x10); jm_put_u64(&b, 2); jm_put_u64(&b, 0);
    emit(w, JM_CODE_PATCH, 5000, &b, "\x90\xc3", 2);

    /* A compiled method whose blocks run through inlined code: nop; je +2;
     * nop; nop; nop; jmp *%rax with scopes {+1: M1@1} {+3: M2@4 in M1@2}
     * {+5: M1@3} {+8: M3@7 in M1@5}. */
    uint8_t nm3[16] = { 0x90, 0x74, 0x02, 0x90, 0x90, 0x90, 0xff, 0xe0 };
    memset(nm3 + 8, 0xcc, 8);
    jm_put_u64(&b, NM3); jm_put_u64(&b, sizeof nm3); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 4); jm_put_u32(&b, 4);
    jm_put_u64(&b, NM3 + 1); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 1);
    jm_put_u64(&b, NM3 + 3); jm_put_u32(&b, 2);
    jm_put_u64(&b, M2); jm_put_i32(&b, 4); jm_put_u64(&b, M1); jm_put_i32(&b, 2);
    jm_put_u64(&b, NM3 + 5); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 3);
    jm_put_u64(&b, NM3 + 8); jm_put_u32(&b, 2);
    jm_put_u64(&b, M3); jm_put_i32(&b, 7); jm_put_u64(&b, M1); jm_put_i32(&b, 5);
    emit(w, JM_NMETHOD_LOAD, 10, &b, nm3, sizeof nm3);

    /* A compiled method that calls the stub from an inlined scope, and whose
     * code after the call belongs to another: nop; call STUB; nop; jmp *%rax
     * with scopes {+1: M1@1} {+6: M2@4 in M1@2} (the call, recorded at its
     * return address as HotSpot does) {+9: M3@7 in M1@5}. */
    uint8_t nm4[16] = { 0x90, 0xe8, 0, 0, 0, 0, 0x90, 0xff, 0xe0 };
    int32_t rel4 = (int32_t)(STUB - (NM4 + 6));
    memcpy(nm4 + 2, &rel4, 4);
    memset(nm4 + 9, 0xcc, 7);
    jm_put_u64(&b, NM4); jm_put_u64(&b, sizeof nm4); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 4); jm_put_u32(&b, 3);
    jm_put_u64(&b, NM4 + 1); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 1);
    jm_put_u64(&b, NM4 + 6); jm_put_u32(&b, 2);
    jm_put_u64(&b, M2); jm_put_i32(&b, 4); jm_put_u64(&b, M1); jm_put_i32(&b, 2);
    jm_put_u64(&b, NM4 + 9); jm_put_u32(&b, 2);
    jm_put_u64(&b, M3); jm_put_i32(&b, 7); jm_put_u64(&b, M1); jm_put_i32(&b, 5);
    emit(w, JM_NMETHOD_LOAD, 10, &b, nm4, sizeof nm4);

    /* NM4's shape calling the interpreter's method entry instead of the
     * stub (as a call through the c2i adapter does): an interpreted callee,
     * whose return template jumps back to the return address. */
    uint8_t nm5[16];
    memcpy(nm5, nm4, sizeof nm5);
    int32_t rel5 = (int32_t)(INTERP + 0x40 - (NM5 + 6));
    memcpy(nm5 + 2, &rel5, 4);
    jm_put_u64(&b, NM5); jm_put_u64(&b, sizeof nm5); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 4); jm_put_u32(&b, 3);
    jm_put_u64(&b, NM5 + 1); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 1);
    jm_put_u64(&b, NM5 + 6); jm_put_u32(&b, 2);
    jm_put_u64(&b, M2); jm_put_i32(&b, 4); jm_put_u64(&b, M1); jm_put_i32(&b, 2);
    jm_put_u64(&b, NM5 + 9); jm_put_u32(&b, 2);
    jm_put_u64(&b, M3); jm_put_i32(&b, 7); jm_put_u64(&b, M1); jm_put_i32(&b, 5);
    emit(w, JM_NMETHOD_LOAD, 10, &b, nm5, sizeof nm5);

    /* records out of time order, as different threads write them */
    uint8_t nm2[16] = { 0x90, 0xff, 0xe0 };
    memset(nm2 + 3, 0xcc, 13);
    jm_put_u64(&b, NM); jm_put_u64(&b, sizeof nm2); jm_put_u64(&b, 0);
    jm_put_u64(&b, M3); jm_put_i32(&b, 1); jm_put_u32(&b, 0);
    emit(w, JM_NMETHOD_LOAD, 6000, &b, nm2, sizeof nm2);
    jm_put_u64(&b, M1); jm_put_u64(&b, NM);
    emit(w, JM_NMETHOD_UNLOAD, 5000, &b, NULL, 0);

    /* hostile: an unload of nothing */
    jm_put_u64(&b, 0x7777); jm_put_u64(&b, 0x60000);
    emit(w, JM_NMETHOD_UNLOAD, 70, &b, NULL, 0);

    jm_put_u64(&b, 1); jm_put_u32(&b, 4242); jm_put_str(&b, "main");
    emit(w, JM_THREAD_START, 20, &b, NULL, 0);
    cr_assert_eq(jm_writer_close(w), 0);

    /* hostile: a stub whose bytes lie beyond code.bin (the writer would not
     * produce it: appended by hand) */
    jm_put_u16(&b, JM_DYNAMIC_CODE); jm_put_u16(&b, 0); jm_put_u32(&b, 24 + 4 + 4);
    jm_put_u64(&b, 50);
    jm_put_u64(&b, 0x50000); jm_put_u64(&b, 16); jm_put_u64(&b, 1u << 30);
    jm_put_str(&b, "liar");
    char *meta = g_build_filename(dir, "jvm", JM_META_FILE, NULL);
    FILE *f = fopen(meta, "ab");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b.data, 1, b.len, f), b.len);
    fclose(f);
    g_free(meta);
    jm_buf_free(&b);
    return dir;
}

static void remove_tree(const char *dir)
{
    if (getenv("JPT_TEST_KEEP")) {      /* for looking at a failing case */
        fprintf(stderr, "kept %s\n", dir);
        return;
    }
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
    g_free(cmd);
}

Test(model, timeline_versions_and_inline_tables)
{
    char *dir = make_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_expect_eq(m->ncodelets, 7);
    cr_expect_eq(m->ncodes, 7, "five nmethod versions and two stubs (the liar is dropped)");
    cr_expect_eq(m->nwarnings, 2, "bad code offset and unknown unload reported");
    bool beyond = false, unknown = false;
    for (size_t i = 0; i < m->nwarnings; i++) {
        beyond |= strstr(m->warnings[i], "beyond the end of code.bin") != NULL &&
                  strstr(m->warnings[i], "meta.jpt: offset ") != NULL;
        unknown |= strstr(m->warnings[i], "names no loaded code") != NULL;
    }
    cr_expect(beyond && unknown);

    const dm_codelet *c = dm_codelet_at(m, INTERP + 0x25);
    cr_assert_not_null(c);
    cr_expect_str_eq(c->desc, "fast_iaccess_0");
    cr_expect_eq(c->kind, DM_CL_BYTECODE);
    cr_expect_eq(c->nops, 2);
    c = dm_codelet_at(m, INTERP + 0x40);
    cr_assert_not_null(c);
    cr_expect_eq(c->kind, DM_CL_METHOD_ENTRY);
    cr_expect_null(dm_codelet_at(m, INTERP + 0xa0));

    /* version 1 from the start (nothing there before) to its unload */
    const dm_code *v = dm_code_at(m, NM + 1, 50);
    cr_assert_not_null(v);
    cr_expect_eq(v->method_id, M1);
    cr_expect_eq(v->start_tsc, 0);
    cr_expect_eq(v->end_tsc, 5000);
    cr_expect_eq(dm_code_at(m, NM + 1, 4999)->method_id, M1);
    /* version 2 from version 1's unload, before its own record (t 6000) */
    v = dm_code_at(m, NM + 1, 5500);
    cr_assert_not_null(v);
    cr_expect_eq(v->method_id, M3);
    cr_expect_eq(v->start_tsc, 5000);
    cr_expect_null(dm_code_at(m, NM + 16, 5500));
    dm_where w = dm_lookup(m, INTERP + 0x61, 1);
    cr_expect_eq(w.kind, DM_AT_CODELET);
    cr_expect_str_eq(w.codelet->desc, "imul");
    w = dm_lookup(m, INTERP + 0xb0, 1);
    cr_expect_eq(w.kind, DM_AT_BLOB, "interpreter buffer outside any codelet");
    cr_expect_eq(dm_lookup(m, NM + 3, 5200).code->method_id, M3);
    cr_expect_eq(dm_lookup(m, 0x99999, 1).kind, DM_AT_NOTHING);
    const dm_code *stub = dm_code_at(m, STUB, 1);
    cr_assert_not_null(stub);
    cr_expect_str_eq(stub->name, "stubby");

    /* inline stacks: first record with pc > address */
    const dm_code *v1 = dm_code_at(m, NM, 200);
    const dm_frame *f;
    cr_expect_eq(dm_inline_at(m, v1, NM + 0, &f), 1);
    cr_expect_eq(f[0].method_id, M1);
    cr_expect_eq(f[0].bci, 0);
    cr_expect_eq(dm_inline_at(m, v1, NM + 1, &f), 1);
    cr_assert_eq(dm_inline_at(m, v1, NM + 2, &f), 2);
    cr_expect_eq(f[0].method_id, M2);
    cr_expect_eq(f[0].bci, 5);
    cr_expect_eq(f[1].method_id, M1);
    cr_expect_eq(f[1].bci, 9);
    cr_expect_eq(dm_inline_at(m, v1, NM + 5, &f), 2);
    cr_expect_eq(dm_inline_at(m, v1, NM + 6, &f), 0, "past the last record: no scope");

    cr_assert_eq(m->npatches, 2);
    /* sorted by when they apply: the handler fill is back-dated to the
     * start of its stub (0), the nmethod patch keeps its time */
    cr_expect_eq(m->patches[0].vaddr, HANDLERS + 0x10);
    cr_expect_eq(m->patches[0].tsc, 5000);
    cr_expect_eq(m->patches[0].start_tsc, 0);
    cr_expect_eq(m->patches[1].owner, (int64_t)v1->index);
    cr_expect_eq(m->patches[1].start_tsc, 3000);
    char buf[128];
    cr_expect_str_eq(dm_method_str(m, M2, buf, sizeof buf), "T.two()V");
    cr_expect_str_eq(dm_method_str(m, 0x9999, buf, sizeof buf), "0x9999");
    cr_expect_str_eq(dm_thread_get(m, 4242)->name, "main");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

Test(model, truncated_metadata_keeps_what_came_before)
{
    char *dir = make_trace();
    char *meta = g_build_filename(dir, "jvm", "meta.jpt", NULL);
    struct stat st;
    cr_assert_eq(stat(meta, &st), 0);
    cr_assert_eq(truncate(meta, st.st_size - 7), 0);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m);
    cr_expect(m->truncated);
    cr_expect_eq(m->ncodelets, 7);
    bool named = false;
    for (size_t i = 0; i < m->nwarnings; i++)
        named |= strstr(m->warnings[i], "meta.jpt") != NULL;
    cr_expect(named);
    dm_free(m);
    /* not a trace at all */
    cr_expect_null(dm_load("/nonexistent/trace", err, sizeof err));
    cr_expect(strstr(err, "/nonexistent/trace") != NULL, "%s", err);
    remove_tree(dir);
    g_free(meta);
    g_free(dir);
}

/* ---- decoding --------------------------------------------------------------- */

typedef struct penc {
    uint8_t buf[1 << 18];
    struct pt_encoder *enc;
} penc;

static void penc_init(penc *e)
{
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = e->buf;
    cfg.end = e->buf + sizeof e->buf;
    e->enc = pt_alloc_encoder(&cfg);
    cr_assert_not_null(e->enc);
}

static void pkt(penc *e, struct pt_packet p)
{
    cr_assert_geq(pt_enc_next(e->enc, &p), 0, "encoding packet type %d", p.type);
}

static void tip(penc *e, enum pt_packet_type t, uint64_t ip)
{
    struct pt_packet p = { .type = t };
    p.payload.ip.ipc = pt_ipc_sext_48;
    p.payload.ip.ip = ip;
    pkt(e, p);
}

static void tsc(penc *e, uint64_t t)
{
    struct pt_packet p = { .type = ppt_tsc };
    p.payload.tsc.tsc = t;
    pkt(e, p);
}

/* PSB+ with tracing on at ip. */
static void psb(penc *e, uint64_t t, uint64_t ip)
{
    pkt(e, (struct pt_packet){ .type = ppt_psb });
    tsc(e, t);
    struct pt_packet mode = { .type = ppt_mode };
    mode.payload.mode.leaf = pt_mol_exec;
    mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    pkt(e, mode);
    tip(e, ppt_fup, ip);
    pkt(e, (struct pt_packet){ .type = ppt_psbend });
}

static size_t penc_end(penc *e)
{
    uint64_t off = 0;
    pt_enc_get_offset(e->enc, &off);
    pt_free_encoder(e->enc);
    return (size_t)off;
}

typedef struct evlog {
    dc_event ev[256];
    char desc[256][64];      /* copies: desc points into the model */
    size_t n;
} evlog;

static int collect(const dc_event *ev, void *vp)
{
    evlog *l = vp;
    if (l->n < 256) {
        l->ev[l->n] = *ev;
        snprintf(l->desc[l->n], sizeof l->desc[0], "%s", ev->desc ? ev->desc : "");
        l->ev[l->n].desc = l->desc[l->n];
        l->n++;
    }
    return 0;
}

static void write_stream(const char *dir, const uint8_t *data, size_t n)
{
    char *path = g_build_filename(dir, "pt", "tid-4242.pt", NULL);
    cr_assert(g_file_set_contents(path, (const char *)data, (gssize)n, NULL));
    g_free(path);
}

/* Decodes DIR's stream with options o (NULL: one thread, as
 * dc_decode_stream) into sink. */
static void decode_to(const char *dir, const dc_options *o, dc_sink sink, void *ctx,
                      dc_stats *st)
{
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    char *pt = g_build_filename(dir, "pt", "tid-4242.pt", NULL);
    char *idx = g_build_filename(dir, "pt", "tid-4242.idx", NULL);
    dc_trace_info info = { 0 };
    dc_output out = { .sink = sink, .ctx = ctx };
    cr_assert_eq(dc_decode_stream_opts(&(dc_trace){ m, cache, &info }, pt, idx, &out, o, st, err,
                                       sizeof err),
                 0, "%s", err);
    g_free(pt);
    g_free(idx);
    di_cache_free(cache);
    dm_free(m);
}

static void decode(const char *dir, evlog *log, dc_stats *st)
{
    decode_to(dir, NULL, collect, log, st);
}

/* Ends the packets in e, writes them as the thread's stream and decodes it. */
static void decode_encoded(const char *dir, penc *e, evlog *log, dc_stats *st)
{
    size_t n = penc_end(e);
    write_stream(dir, e->buf, n);
    decode(dir, log, st);
}

static const char *opname(const dc_event *e)
{
    return e->kind == DC_BYTECODE ? bc_name(e->opcode) : dc_kind_name(e->kind);
}

static void expect_kinds(const evlog *l, const char *const *want, size_t n)
{
    GString *got = g_string_new("");
    for (size_t i = 0; i < l->n; i++)
        g_string_append_printf(got, "%s ", opname(&l->ev[i]));
    cr_expect_eq(l->n, n, "events: %s", got->str);
    for (size_t i = 0; i < n && i < l->n; i++)
        cr_expect_str_eq(opname(&l->ev[i]), want[i], "event %zu of: %s", i, got->str);
    g_string_free(got, TRUE);
}

Test(decode, interpreter_jit_patches_and_reuse)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);              /* mid-template: no event for it */
    tip(&e, ppt_tip, INTERP);           /* dispatch to the same template */
    tip(&e, ppt_tip, INTERP + 0x20);    /* fused template */
    tip(&e, ppt_tip, INTERP + 0x40);    /* method entry */
    tip(&e, ppt_tip, INTERP + 0x60);    /* imul: calls the stub */
    tip(&e, ppt_tip, INTERP + 0x66);    /* the stub returns */
    tip(&e, ppt_tip, NM);               /* into compiled M1 */
    tip(&e, ppt_tip, INTERP);           /* back: iload_0 */
    tsc(&e, 4000);                      /* the patch (t 3000) is in force */
    tip(&e, ppt_tip, NM);               /* M1 again, NM+4 is now a ret */
    tip(&e, ppt_tip, INTERP + 0x20);    /* returned into fast_iaccess_0 */
    tsc(&e, 7000);                      /* M1 unloaded, M3 there */
    tip(&e, ppt_tip, NM);
    tip(&e, ppt_tip, INTERP + 0x40);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);

    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    static const char *const want[] = {
        "iload_0", "aload_0", "getfield", "method-entry", "imul", "stub",
        "jit-enter", "jit", "inline-call", "jit", "iload_0",
        "jit-enter", "jit", "inline-call", "jit", "aload_0", "getfield",
        "jit-enter", "jit", "method-entry",
    };
    expect_kinds(&log, want, sizeof want / sizeof want[0]);
    if (log.n == sizeof want / sizeof want[0]) {
        cr_expect(log.ev[2].flags & DC_F_FUSED);
        /* exits: each template's dispatch jump; imul's after its stub call */
        cr_expect_eq(log.ev[0].exit_ip, INTERP + 2);
        cr_expect_eq(log.ev[1].exit_ip, INTERP + 0x21);
        cr_expect_eq(log.ev[2].exit_ip, INTERP + 0x21);
        cr_expect_eq(log.ev[4].exit_ip, INTERP + 0x66);
        cr_expect_eq(log.ev[6].method_id, M1);
        cr_expect(log.ev[6].flags & DC_F_BY_JUMP);
        cr_expect_eq(log.ev[7].method_id, M1);
        cr_expect_eq(log.ev[7].bci, 0);
        cr_expect_eq(log.ev[8].method_id, M2);
        cr_expect_eq(log.ev[8].depth, 2);
        cr_expect_eq(log.ev[9].method_id, M2);
        cr_expect_eq(log.ev[9].bci, 5);
        /* patched: M1 left by a return, not by its original jump */
        cr_expect(log.ev[15].flags & DC_F_BY_RETURN, "flags 0x%x", log.ev[15].flags);
        cr_expect(log.ev[10].flags & DC_F_BY_JUMP);
        /* address reused by M3 */
        cr_expect_eq(log.ev[17].method_id, M3);
        cr_expect_eq(log.ev[18].bci, -1, "M3 has no inline records");
        cr_expect_eq(log.ev[17].tsc, 7000);
    }
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* An image hands libipt no section until the decoder reads in its tile, and
 * shows every address as the eager layering would: a later section over an
 * earlier one, a patch over its version, a reused address its new owner. */
Test(image, lazy_tiles_show_the_layered_code)
{
    char *dir = make_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    uint8_t buf[16];

    di_image *im = di_image_new(cache, 1000, err, sizeof err);
    cr_assert_not_null(im, "%s", err);
    cr_expect_eq(di_image_stats(im)->sections_added, 0, "sections went in before any read");
    cr_expect_eq(di_image_read(im, buf, sizeof buf, NM), 16);
    cr_expect_eq(memcmp(buf, "\x90\x90\x90\x90\xff\xe0", 6), 0);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, NM + 16), -pte_nomap);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, 0xa0000), -pte_nomap);
    /* the handlers buffer: code up to its first run of zeros, then the fill
     * over the zeros (valid from before its record) */
    cr_expect_eq(di_image_read(im, buf, sizeof buf, HANDLERS), 1);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, HANDLERS + 1), -pte_nomap);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, HANDLERS + 0x10), 2);

    /* the patch at NM+4 (t 3000): a read from NM stops where it begins */
    cr_assert_eq(di_image_advance(im, 4000), 0);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, NM), 4);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, NM + 4), 2);
    cr_expect_eq(memcmp(buf, "\xc3\x90", 2), 0);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, NM + 6), 10);
    cr_expect_eq(buf[0], 0xcc);

    /* M1 unloaded (t 5000), M3 at the same address (t 6000): a new pt_image */
    cr_assert_eq(di_image_advance(im, 7000), 1);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, NM), 16);
    cr_expect_eq(memcmp(buf, "\x90\xff\xe0\xcc", 4), 0);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, HANDLERS + 0x10), 2);
    cr_expect_eq(memcmp(buf, "\x90\xc3", 2), 0);
    di_image_free(im);

    di_cache_free(cache);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

Test(decode, conditional_branches_say_which_way_they_went)
{
    char *dir = make_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_codelet *c = dm_codelet_at(m, INTERP + 0x80);
    cr_assert_not_null(c);
    cr_expect_eq(c->not_taken, INTERP + 0x84);
    cr_expect_eq(dm_codelet_at(m, INTERP)->not_taken, 0, "iload_0 is no branch");
    dm_free(m);

    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0x80);    /* ifeq: je not taken, the branch is */
    pkt(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 0 } });
    tip(&e, ppt_tip, INTERP + 0x80);    /* ifeq again: this time not */
    pkt(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 1 } });
    tip(&e, ppt_tip, INTERP);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    static const char *const want[] = { "ifeq", "ifeq", "iload_0" };
    expect_kinds(&log, want, 3);
    if (log.n == 3) {
        cr_expect_eq(log.ev[0].flags & (DC_F_TAKEN | DC_F_NOT_TAKEN), DC_F_TAKEN);
        cr_expect_eq(log.ev[1].flags & (DC_F_TAKEN | DC_F_NOT_TAKEN), DC_F_NOT_TAKEN);
        cr_expect_eq(log.ev[2].flags & (DC_F_TAKEN | DC_F_NOT_TAKEN), 0);
    }
    remove_tree(dir);
    g_free(dir);
}

Test(decode, a_wide_instruction_is_one_event)
{
    /* HotSpot's wide template jumps to the wide entry of the modified
     * bytecode's template (here iload_0's codelet stands for iload's):
     * the rest of the same instruction, whose exit is there */
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0xe0);    /* wide */
    tip(&e, ppt_tip, INTERP);           /* its wide iload */
    tip(&e, ppt_tip, INTERP);           /* the next instruction, an iload_0 */
    tip(&e, ppt_tip, INTERP + 0xe0);    /* wide again */
    tip(&e, ppt_tip, INTERP + 0x20);    /* ... into another template (made up) */
    tip(&e, ppt_tip, INTERP);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    static const char *const want[] = { "wide", "iload_0", "wide", "iload_0" };
    expect_kinds(&log, want, 4);
    if (log.n == 4) {
        cr_expect_eq(log.ev[0].exit_ip, INTERP + 0x02, "the wide'd template's dispatch");
        cr_expect_eq(log.ev[1].exit_ip, INTERP + 0x02);
        cr_expect_eq(log.ev[2].exit_ip, INTERP + 0x21);
    }
    remove_tree(dir);
    g_free(dir);
}

Test(decode, interface_calls_say_where_the_itable_scan_found_the_interface)
{
    char *dir = make_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_codelet *c = dm_codelet_at(m, INTERP + 0xc0);
    cr_assert_not_null(c);
    cr_expect_eq(c->itable_first, INTERP + 0xc0);
    cr_expect_eq(c->itable_loop, INTERP + 0xc2);
    cr_expect_eq(dm_codelet_at(m, INTERP + 0x80)->itable_loop, 0, "ifeq has no scan");
    dm_free(m);

    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0xc0);    /* found at the fourth entry: je not */
    pkt(&e, (struct pt_packet){ .type = ppt_tnt_8,   /* taken, jne taken twice, then not */
                                .payload.tnt = { .bit_size = 4, .payload = 0x6 } });
    tip(&e, ppt_tip, INTERP + 0xc0);    /* at the first: je taken */
    pkt(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 1 } });
    tip(&e, ppt_tip, INTERP);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    static const char *const want[] = { "invokeinterface", "invokeinterface", "iload_0" };
    expect_kinds(&log, want, 3);
    if (log.n == 3) {
        cr_expect_eq(log.ev[0].itable_pos, 4);
        cr_expect_eq(log.ev[1].itable_pos, 1);
        cr_expect_eq(log.ev[2].itable_pos, 0);
    }
    remove_tree(dir);
    g_free(dir);
}

Test(decode, code_filled_into_zeros_is_known_before_its_record)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP + 0x40);
    tip(&e, ppt_tip, HANDLERS + 0x10);  /* runs at t 1000, recorded at t 5000 */
    tip(&e, ppt_tip, INTERP);
    tip(&e, ppt_tip, HANDLERS + 0x20);  /* never filled: no code */
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    static const char *const want[] = { "stub", "iload_0", "gap" };
    expect_kinds(&log, want, 3);
    if (log.n == 3) {
        cr_expect_str_eq(log.ev[0].desc, "native signature handlers");
        cr_expect_eq(log.ev[2].reason, DC_GAP_NOCODE);
    }
    remove_tree(dir);
    g_free(dir);
}

static void tnt(penc *e, uint64_t bits, uint8_t n)
{
    struct pt_packet p = { .type = ppt_tnt_8 };
    p.payload.tnt.bit_size = n;
    p.payload.tnt.payload = bits;
    pkt(e, p);
}

/* The inline stack inside one block: M2's scope lies between the block's
 * ends and is only seen through the recovered path. */
Test(decode, inline_frames_inside_a_block)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP + 0x40);
    tip(&e, ppt_tip, NM3);
    tnt(&e, 0, 1);                      /* je not taken: +0 +1 +3 +4 +5 +6 */
    tip(&e, ppt_tip, NM3);
    tnt(&e, 1, 1);                      /* taken: +0 +1 +5 +6 */
    tip(&e, ppt_tip, INTERP);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    static const char *const want[] = {
        "jit-enter", "jit", "inline-call", "jit", "inline-return", "jit", "inline-call", "jit",
        /* a jump within the method is no entry: M3's frame is left */
        "inline-return", "jit", "inline-call", "jit", "inline-return", "inline-call", "jit",
        "iload_0",
    };
    expect_kinds(&log, want, sizeof want / sizeof want[0]);
    if (log.n == sizeof want / sizeof want[0]) {
        cr_expect_eq(log.ev[1].method_id, M1);
        cr_expect_eq(log.ev[1].bci, 1);
        cr_expect_eq(log.ev[2].method_id, M2);
        cr_expect_eq(log.ev[2].ip, NM3 + 1);
        cr_expect_eq(log.ev[4].method_id, M2);
        cr_expect_eq(log.ev[4].ip, NM3 + 3);
        cr_expect_eq(log.ev[5].bci, 3);
        cr_expect_eq(log.ev[6].method_id, M3);
        cr_expect_eq(log.ev[6].ip, NM3 + 5);
        cr_expect_eq(log.ev[12].ip, NM3 + 5, "taken: straight from the je to +5");
    }
    cr_expect_eq(st.jit_blocks_ends_only, 0);
    remove_tree(dir);
    g_free(dir);
}

/* A call made from an inlined scope returns to code of another scope: the
 * inline stack goes on from the one the call left (M2 returns, M3 is
 * entered), not from nothing (Character.charCount(codePointAt(...)) in
 * compiled code: charCount's code follows the call codePointAt made). */
Test(decode, return_continues_the_inline_stack_the_call_left)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP + 0x40);
    tip(&e, ppt_tip, NM4);              /* jump into NM4, which calls the stub */
    tip(&e, ppt_tip, NM4 + 6);          /* the stub returns */
    tip(&e, ppt_tip, INTERP);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    static const char *const want[] = {
        "jit-enter", "jit", "inline-call", "jit", "stub",
        "jit-enter", "inline-return", "inline-call", "jit", "iload_0",
    };
    expect_kinds(&log, want, sizeof want / sizeof want[0]);
    if (log.n == sizeof want / sizeof want[0]) {
        cr_expect_eq(log.ev[2].method_id, M2);
        cr_expect(log.ev[5].flags & DC_F_BY_RETURN);
        cr_expect_eq(log.ev[6].method_id, M2);
        cr_expect_eq(log.ev[6].depth, 1);
        cr_expect_eq(log.ev[7].method_id, M3);
        cr_expect_eq(log.ev[7].depth, 2);
        cr_expect_eq(log.ev[8].method_id, M3);
        cr_expect_eq(log.ev[8].bci, 7);
    }
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* An interpreted callee of compiled code returns by the interpreter's jump
 * to the return address: that is the call's return, which goes on from the
 * inline stack the call left, as after a ret (a jump would start the
 * version's position afresh, and read as entering it again). */
Test(decode, an_interpreted_callee_returns_into_its_compiled_caller)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP + 0x40);
    tip(&e, ppt_tip, NM5);              /* jump into NM5, which calls the method entry */
    tip(&e, ppt_tip, INTERP);           /* the entry dispatches iload_0 */
    tip(&e, ppt_tip, NM5 + 6);          /* which jumps back to the return address */
    tip(&e, ppt_tip, INTERP);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    static const char *const want[] = {
        "jit-enter", "jit", "inline-call", "jit", "method-entry", "iload_0",
        "jit-enter", "inline-return", "inline-call", "jit", "iload_0",
    };
    expect_kinds(&log, want, sizeof want / sizeof want[0]);
    if (log.n == sizeof want / sizeof want[0]) {
        cr_expect_eq(log.ev[6].flags & (DC_F_BY_RETURN | DC_F_AFTER_CALL | DC_F_BY_JUMP),
                     DC_F_BY_RETURN | DC_F_AFTER_CALL);
        cr_expect_eq(log.ev[7].method_id, M2);
        cr_expect_eq(log.ev[8].method_id, M3);
        cr_expect_eq(log.ev[9].bci, 7);
    }
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

Test(decode, gaps_for_unknown_code_and_collector_loss)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0x20);    /* aload_0 getfield */
    uint64_t seg1 = 0;
    pt_enc_get_offset(e.enc, &seg1);
    psb(&e, 2000, INTERP + 0x20);       /* after the collector's loss */
    tip(&e, ppt_tip, 0x99990);          /* no code known there */
    tip(&e, ppt_tip, INTERP);           /* decoding resumes here (iload_0, origin unknown) */
    uint64_t resumed = 0;
    pt_enc_get_offset(e.enc, &resumed);
    for (int i = 0; i < 40; i++)        /* filler so the next PSB is elsewhere */
        pkt(&e, (struct pt_packet){ .type = ppt_pad });
    uint64_t psb2 = 0;
    pt_enc_get_offset(e.enc, &psb2);
    psb(&e, 3000, INTERP + 0x40);
    tip(&e, ppt_tip, INTERP);           /* iload_0 */
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);

    char *idxp = g_build_filename(dir, "pt", "tid-4242.idx", NULL);
    FILE *f = fopen(idxp, "w");
    cr_assert_not_null(f);
    cr_assert_eq(auxidx_write_header(fileno(f)), 0);
    auxidx_rec r1 = { 0, seg1, AUXIDX_TRUNCATED, 1500, 777 };
    auxidx_rec r2 = { seg1, n - seg1, 0, 3500, 0 };
    cr_assert_eq(auxidx_append(fileno(f), &r1), 0);
    cr_assert_eq(auxidx_append(fileno(f), &r2), 0);
    fclose(f);
    g_free(idxp);

    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    static const char *const want[] = { "aload_0", "getfield", "gap", "gap", "iload_0" };
    expect_kinds(&log, want, sizeof want / sizeof want[0]);
    if (log.n == 5) {
        cr_expect_eq(log.ev[2].reason, DC_GAP_LOST);
        cr_expect_eq(log.ev[2].lost_bytes, 777);
        cr_expect_eq(log.ev[2].offset, seg1);
        cr_expect_eq(log.ev[2].end_tsc, 2000);
        cr_expect_eq(log.ev[3].reason, DC_GAP_NOCODE);
        cr_expect_eq(log.ev[3].end_offset, resumed, "the gap ends at the next branch target");
        cr_expect_eq(log.ev[3].end_tsc, 2000);
        cr_expect_eq(log.ev[4].tsc, 3000, "after the next PSB (at %" PRIu64 ")", psb2);
    }
    cr_expect_eq(st.segments, 2);
    cr_expect_eq(st.lost_bytes, 777);
    cr_expect_eq(st.gaps[DC_GAP_LOST], 1);
    cr_expect_eq(st.gaps[DC_GAP_NOCODE], 1);
    cr_expect_eq(st.resumes, 1);
    remove_tree(dir);
    g_free(dir);
}

static void write_index(const char *dir, const auxidx_rec *recs, size_t n)
{
    char *idxp = g_build_filename(dir, "pt", "tid-4242.idx", NULL);
    FILE *f = fopen(idxp, "w");
    cr_assert_not_null(f);
    cr_assert_eq(auxidx_write_header(fileno(f)), 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(auxidx_append(fileno(f), &recs[i]), 0);
    fclose(f);
    g_free(idxp);
}

/* The index says which bytes the recorder delivered (docs/FORMAT.md,
 * "Damage and loss"): a file cut short loses the rest at its end, a gap
 * with that many bytes; bytes past the index are not decoded. */
Test(decode, the_index_bounds_the_stream)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0x20);    /* aload_0 getfield */
    uint64_t cut = 0;
    pt_enc_get_offset(e.enc, &cut);
    psb(&e, 2000, INTERP + 0x20);
    tip(&e, ppt_tip, INTERP);           /* iload_0 */
    size_t n = penc_end(&e);
    auxidx_rec whole = { 0, n, 0, 1500, 0 };
    write_index(dir, &whole, 1);

    write_stream(dir, e.buf, cut);
    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    static const char *const want_cut[] = { "aload_0", "getfield", "gap" };
    expect_kinds(&log, want_cut, sizeof want_cut / sizeof want_cut[0]);
    if (log.n == 3) {
        cr_expect_eq(log.ev[2].reason, DC_GAP_LOST);
        cr_expect_eq(log.ev[2].offset, cut);
        cr_expect_eq(log.ev[2].lost_bytes, n - cut);
    }
    cr_expect_eq(st.pt_bytes, cut);
    cr_expect_eq(st.missing_bytes, n - cut);
    cr_expect_eq(st.lost_bytes, n - cut);
    cr_expect_eq(st.unindexed_bytes, 0);

    /* The whole stream, then padded with a PSB+ and a branch to code the
     * decoder would report: the same events as unpadded. */
    write_stream(dir, e.buf, n);
    evlog plain = { .n = 0 };
    decode(dir, &plain, &st);
    cr_expect_eq(st.missing_bytes, 0);
    cr_expect_eq(st.unindexed_bytes, 0);
    uint8_t *padded = g_malloc(2 * n);
    memcpy(padded, e.buf, n);
    memcpy(padded + n, e.buf, n);
    write_stream(dir, padded, 2 * n);
    log.n = 0;
    decode(dir, &log, &st);
    cr_expect_eq(log.n, plain.n);
    cr_expect_eq(st.pt_bytes, n);
    cr_expect_eq(st.unindexed_bytes, n);
    cr_expect_eq(st.lost_bytes, 0);
    g_free(padded);
    remove_tree(dir);
    g_free(dir);
}

/* A stream whose only PSB is damaged decodes to nothing: that is a gap over
 * all of it, not an empty thread. */
Test(decode, a_stream_without_a_psb_is_one_gap)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0x20);
    size_t n = penc_end(&e);
    e.buf[3] ^= 0xff;
    write_stream(dir, e.buf, n);
    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    static const char *const want[] = { "gap" };
    expect_kinds(&log, want, 1);
    if (log.n == 1) {
        cr_expect_eq(log.ev[0].reason, DC_GAP_DECODE);
        cr_expect_eq(log.ev[0].offset, 0);
    }
    cr_expect_eq(st.skipped_bytes, n);
    cr_expect_eq(st.gaps[DC_GAP_DECODE], 1);
    remove_tree(dir);
    g_free(dir);
}

/* After a failure, decoding resumes at the next TIP even where its address is
 * compressed against the IP packets before it; a TIP that pairs with a FUP
 * (an asynchronous event) is no place to resume. As after a PSB, the first
 * block's codelet may have been entered before the failure: it makes no
 * event. */
Test(decode, resumes_at_a_compressed_branch_target)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0x20);    /* aload_0 getfield */
    tip(&e, ppt_tip, INTERP + 0xf000);  /* no code known there */
    tip(&e, ppt_fup, INTERP + 0xf100);  /* an asynchronous event's pair: skipped */
    struct pt_packet t = { .type = ppt_tip };
    t.payload.ip.ipc = pt_ipc_update_16;
    t.payload.ip.ip = 0x0000;           /* INTERP, from the upper bits of the FUP's */
    pkt(&e, t);
    t.payload.ip.ip = 0x0020;           /* INTERP + 0x20: resumed here */
    pkt(&e, t);
    uint64_t resumed = 0;
    pt_enc_get_offset(e.enc, &resumed);
    t.payload.ip.ip = 0x0000;           /* INTERP: iload_0 */
    pkt(&e, t);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);

    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    static const char *const want[] = { "aload_0", "getfield", "gap", "iload_0" };
    expect_kinds(&log, want, sizeof want / sizeof want[0]);
    if (log.n == 4) {
        cr_expect_eq(log.ev[2].reason, DC_GAP_NOCODE);
        cr_expect_eq(log.ev[2].end_offset, resumed);
        cr_expect_eq(log.ev[3].ip, INTERP);
    }
    cr_expect_eq(st.resumes, 1);
    cr_expect_eq(st.gaps[DC_GAP_NOCODE], 1);
    remove_tree(dir);
    g_free(dir);
}

Test(decode, garbage_and_empty_streams_do_not_crash)
{
    char *dir = make_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache);
    GRand *rnd = g_rand_new_with_seed(5);
    uint8_t junk[3000];
    for (int round = 0; round < 200; round++) {
        size_t n = (size_t)g_rand_int_range(rnd, 0, sizeof junk);
        for (size_t i = 0; i < n; i++)
            junk[i] = (uint8_t)g_rand_int(rnd);
        /* sometimes a valid start, so decoding gets somewhere before the junk */
        if (round % 3 == 0 && n > 64) {
            penc e;
            penc_init(&e);
            psb(&e, 1000, INTERP);
            tip(&e, ppt_tip, INTERP + 0x20);
            size_t k = penc_end(&e);
            memcpy(junk, e.buf, k < n ? k : n);
        }
        write_stream(dir, junk, n);
        char *pt = g_build_filename(dir, "pt", "tid-4242.pt", NULL);
        evlog log = { .n = 0 };
        dc_output out = { .sink = collect, .ctx = &log };
        dc_stats st;
        dc_trace_info info = { 0 };
        cr_expect_geq(dc_decode_stream(&(dc_trace){ m, cache, &info }, pt, NULL, &out, &st, err,
                                       sizeof err), 0);
        g_free(pt);
    }
    g_rand_free(rnd);
    char *missing = g_build_filename(dir, "pt", "tid-1.pt", NULL);
    evlog log = { .n = 0 };
    dc_output out = { .sink = collect, .ctx = &log };
    dc_stats st;
    cr_expect_eq(dc_decode_stream(&(dc_trace){ m, cache, NULL }, missing, NULL, &out, &st, err,
                                  sizeof err), -1);
    cr_expect(strstr(err, "tid-1.pt") != NULL, "%s", err);
    g_free(missing);
    uint32_t *tids;
    size_t ncpu;
    cr_expect_eq(dc_list_thread_streams(dir, &tids, &ncpu), 1);
    cr_expect_eq(tids[0], 4242);
    g_free(tids);
    di_cache_free(cache);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Random damage to the metadata must give warnings, never a crash, and the
 * model, image and decoder must cope with whatever survives. */
Test(model, damaged_metadata_is_survivable)
{
    char *dir = make_trace();
    char *meta = g_build_filename(dir, "jvm", "meta.jpt", NULL);
    gchar *orig;
    gsize len;
    cr_assert(g_file_get_contents(meta, &orig, &len, NULL));
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    tip(&e, ppt_tip, INTERP + 0x20);
    tip(&e, ppt_tip, NM);
    tip(&e, ppt_tip, STUB);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);
    char *pt = g_build_filename(dir, "pt", "tid-4242.pt", NULL);
    char *code = g_build_filename(dir, "jvm", "code.bin", NULL);
    int loaded = 0;
    GRand *rnd = g_rand_new_with_seed(11);
    for (int round = 0; round < 300; round++) {
        gchar *copy = g_memdup2(orig, len);
        int flips = g_rand_int_range(rnd, 1, 8);
        for (int k = 0; k < flips; k++) {
            size_t at = JM_HEADER_SIZE + (size_t)g_rand_int_range(rnd, 0, (gint32)(len - JM_HEADER_SIZE));
            copy[at] = (char)g_rand_int(rnd);
        }
        char err[512];
        dm_model *m = dm_load_mem(copy, len, code, err, sizeof err);
        if (!m) {
            g_free(copy);
            continue;
        }
        loaded++;
        di_cache *cache = di_cache_new(m, err, sizeof err);
        if (cache) {
            evlog log = { .n = 0 };
            dc_output out = { .sink = collect, .ctx = &log };
            dc_stats ds;
            cr_expect_geq(dc_decode_stream(&(dc_trace){ m, cache, NULL }, pt, NULL, &out, &ds,
                                           err, sizeof err), 0);
            di_cache_free(cache);
        }
        dm_free(m);
        g_free(copy);
    }
    g_rand_free(rnd);
    cr_expect_gt(loaded, 250, "damage after the header still loads");
    g_free(code);
    g_free(pt);
    g_free(orig);
    g_free(meta);
    remove_tree(dir);
    g_free(dir);
}

Test(decode, bytes_before_the_first_psb_are_a_gap)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP + 0x40);
    tip(&e, ppt_tip, INTERP);
    size_t n = penc_end(&e);
    uint8_t buf[4096 + 37];
    memset(buf, 0x5a, 37);
    memcpy(buf + 37, e.buf, n);
    write_stream(dir, buf, n + 37);
    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    static const char *const want[] = { "gap", "iload_0" };
    expect_kinds(&log, want, 2);
    if (log.n == 2) {
        cr_expect_eq(log.ev[0].reason, DC_GAP_DECODE);
        cr_expect_eq(log.ev[0].offset, 0);
        cr_expect_eq(log.ev[0].end_offset, 37);
    }
    cr_expect_eq(st.skipped_bytes, 37);
    remove_tree(dir);
    g_free(dir);
}

/* ---- call sites resolved before their patch is recorded -------------------- */

#define RS_STATIC 0x80000ull
#define RS_OPT 0x80100ull
#define CALLEE 0x90000ull
#define NMR 0xa0000ull

static void stub(jm_writer *w, jm_buf *b, uint64_t at, const char *name, const void *code,
                 uint64_t n)
{
    jm_put_u64(b, at); jm_put_u64(b, n); jm_put_u64(b, 0); jm_put_str(b, name);
    emit(w, JM_DYNAMIC_CODE, 50, b, code, n);
}

static void patch(jm_writer *w, jm_buf *b, uint64_t tsc, uint64_t at, const void *code,
                  uint64_t n)
{
    jm_put_u64(b, at); jm_put_u64(b, n); jm_put_u64(b, 0);
    emit(w, JM_CODE_PATCH, tsc, b, code, n);
}

/* M1 at NMR calls through two unresolved sites, A (NMR) to resolve_static_call
 * and B (NMR+5) to resolve_opt_virtual_call, then jmp *%rax at NMR+10. Its
 * static call stub at NMR+0x20 (mov rbx, imm64; jmp) still jumps to itself,
 * as HotSpot emits it. The resolvers jump on through %rax; the callee is a
 * ret. The patch watcher records the resolutions only at t 9000, long after
 * the thread resolved both sites (t 1000): A now calls the callee, B the
 * static stub, which was filled to jump to the callee. */
static char *make_resolve_trace_as(bool one_record)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    stub(w, &b, RS_STATIC, "resolve_static_call", "\xff\xe0", 2);
    stub(w, &b, RS_OPT, "resolve_opt_virtual_call", "\xff\xe0", 2);
    stub(w, &b, CALLEE, "callee", "\xc3", 1);

    uint8_t nm[0x40];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(RS_STATIC - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    rel = (int32_t)(RS_OPT - (NMR + 10));
    nm[5] = 0xe8;
    memcpy(nm + 6, &rel, 4);
    memcpy(nm + 10, "\xff\xe0", 2);
    memcpy(nm + 0x20, "\x48\xbb\0\0\0\0\0\0\0\0\xe9\xfb\xff\xff\xff", 15);
    jm_put_u64(&b, NMR); jm_put_u64(&b, sizeof nm); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 3); jm_put_u32(&b, 0);
    emit(w, JM_NMETHOD_LOAD, 100, &b, nm, sizeof nm);

    if (one_record) {
        /* Both sites resolved between two scans of the watcher, and a byte
         * after them changed too: one record, NMR+1 .. NMR+0x10. */
        uint8_t both[16];
        memcpy(both, nm + 1, sizeof both);
        rel = (int32_t)(CALLEE - (NMR + 5));
        memcpy(both, &rel, 4);
        rel = (int32_t)(NMR + 0x20 - (NMR + 10));
        memcpy(both + 5, &rel, 4);
        both[15] = 0x90;
        patch(w, &b, 9000, NMR + 1, both, sizeof both);
    } else {
        rel = (int32_t)(CALLEE - (NMR + 5));
        patch(w, &b, 9000, NMR + 1, &rel, 4);
        rel = (int32_t)(NMR + 0x20 - (NMR + 10));
        patch(w, &b, 9001, NMR + 6, &rel, 4);
    }
    uint8_t filled[13] = { 0x34, 0x12 };
    rel = (int32_t)(CALLEE - (NMR + 0x2f));
    filled[8] = 0xe9;
    memcpy(filled + 9, &rel, 4);
    patch(w, &b, 9002, NMR + 0x22, filled, sizeof filled);

    close_with_main_thread(w, &b);
    return dir;
}

static char *make_resolve_trace(void) { return make_resolve_trace_as(false); }

static size_t count_stub(const evlog *l, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += l->ev[i].kind == DC_STUB && !strcmp(l->ev[i].desc, name);
    return n;
}

/* Compiled-code events at an ip in [lo, hi), and at ip. */
static size_t count_jit_in(const evlog *l, uint64_t lo, uint64_t hi)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += l->ev[i].kind == DC_JIT && l->ev[i].ip >= lo && l->ev[i].ip < hi;
    return n;
}

static size_t count_jit_at(const evlog *l, uint64_t ip) { return count_jit_in(l, ip, ip + 1); }

Test(model, call_site_resolutions_are_recognized)
{
    char *dir = make_resolve_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_assert_eq(m->npatches, 3);
    cr_expect_eq(m->call_site_patches, 2);
    cr_expect_eq(m->patches[0].site, NMR);
    cr_expect_eq(m->patches[0].old_target, RS_STATIC);
    cr_expect_eq(m->patches[0].new_target, CALLEE);
    cr_expect_eq(m->patches[1].site, NMR + 5);
    cr_expect_eq(m->patches[1].old_target, RS_OPT);
    cr_expect_eq(m->patches[1].new_target, NMR + 0x20);
    cr_expect_eq(m->patches[2].site, 0, "a stub fill is no call site");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* An inline-cache site, `movabs rax, -1; call resolve_virtual_call`, is
 * resolved by one patch over the cached value and the call's rel32 (HotSpot
 * sets both). Bytes changed before a call that are not a movabs rax's
 * immediate are no part of its site: a record holding both is cut. */
#define RS_VIRT 0x80200ull

/* M1's method record, resolve_virtual_call and the callee, and in nm (n
 * bytes of nops, to be loaded at NMR) an inline-cache site at NMR+10 after
 * a movabs rax at NMR. */
static void ic_site(jm_writer *w, jm_buf *b, uint8_t *nm, size_t n)
{
    method(w, b, M1, "one");
    stub(w, b, RS_VIRT, "resolve_virtual_call", "\xff\xe0", 2);
    stub(w, b, CALLEE, "callee", "\xc3", 1);
    memset(nm, 0x90, n);
    memcpy(nm, "\x48\xb8\xff\xff\xff\xff\xff\xff\xff\xff", 10);
    int32_t rel = (int32_t)(RS_VIRT - (NMR + 15));
    nm[10] = 0xe8;
    memcpy(nm + 11, &rel, 4);
}

/* The load record of method id's compiled version at `at`, its code n bytes. */
static void load_version(jm_writer *w, jm_buf *b, uint64_t tsc, uint64_t at, uint64_t id,
                         int32_t level, const uint8_t *code, size_t n)
{
    jm_put_u64(b, at); jm_put_u64(b, n); jm_put_u64(b, 0);
    jm_put_u64(b, id); jm_put_i32(b, level); jm_put_u32(b, 0);
    emit(w, JM_NMETHOD_LOAD, tsc, b, code, n);
}

static void load_at_nmr(jm_writer *w, jm_buf *b, const uint8_t *nm, size_t n)
{
    load_version(w, b, 100, NMR, M1, 2, nm, n);
}

/* A version of method id whose code is nops and a ret (16 bytes). */
static void load_ret_version(jm_writer *w, jm_buf *b, uint64_t tsc, uint64_t at, uint64_t id,
                             int32_t level)
{
    uint8_t code[16];
    memset(code, 0x90, sizeof code);
    code[15] = 0xc3;
    load_version(w, b, tsc, at, id, level, code, sizeof code);
}

Test(model, inline_cache_resolutions_are_recognized)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    uint8_t nm[0x40];
    ic_site(w, &b, nm, sizeof nm);
    /* site 2 at NMR+0x25 after a 5-byte `mov ecx, imm32` at NMR+0x20 */
    memcpy(nm + 0x20, "\xb9\x01\x00\x00\x00", 5);
    int32_t rel = (int32_t)(RS_VIRT - (NMR + 0x2a));
    nm[0x25] = 0xe8;
    memcpy(nm + 0x26, &rel, 4);
    load_at_nmr(w, &b, nm, sizeof nm);
    /* site 1: the klass (its low bytes as before) and the call, 11 bytes */
    uint8_t ic[11] = { 0x40, 0x10, 0, 0, 0, 0, 0xe8 };
    rel = (int32_t)(CALLEE - (NMR + 15));
    memcpy(ic + 7, &rel, 4);
    patch(w, &b, 9000, NMR + 4, ic, sizeof ic);
    /* site 2: the mov's immediate and the call */
    uint8_t other[9] = { 0x02, 0, 0, 0, 0xe8 };
    rel = (int32_t)(CALLEE - (NMR + 0x2a));
    memcpy(other + 5, &rel, 4);
    patch(w, &b, 9001, NMR + 0x21, other, sizeof other);
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);

    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    /* the second record is cut: the mov's immediate, then the call */
    cr_assert_eq(m->npatches, 3);
    cr_expect_eq(m->call_site_patches, 2);
    cr_expect_eq(m->patches_cut, 1);
    cr_expect_eq(m->patches[0].site, NMR + 10);
    cr_expect_eq(m->patches[0].old_target, RS_VIRT);
    cr_expect_eq(m->patches[0].new_target, CALLEE);
    cr_expect_eq(m->patches[0].vaddr, NMR + 4);
    cr_expect_eq(m->patches[0].size, 11, "the cached value goes with its call");
    cr_expect_eq(m->patches[1].site, 0, "a changed mov imm32 is no inline-cache value");
    cr_expect_eq(m->patches[1].vaddr, NMR + 0x21);
    cr_expect_eq(m->patches[1].size, 1, "trimmed to the changed byte");
    cr_expect_eq(m->patches[2].site, NMR + 0x25);
    cr_expect_eq(m->patches[2].vaddr, NMR + 0x26);
    cr_expect_eq(m->patches[2].size, 4);
    cr_expect_eq(m->patches[2].code_offset, m->patches[1].code_offset + 5);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* A site re-pointed at an inline-cache transition stub applies from the
 * stub's last recorded fill before its record (HotSpot does both in one
 * moment), but never before the site's previous change, and only where the
 * agent's close scans timed the fills. */
#define ICB 0x81000ull

static void ic_transition_trace(char **dir, uint64_t previous_change, bool close_scans)
{
    jm_writer *w = open_trace_dir(dir);
    jm_buf b;
    jm_buf_init(&b);
    uint8_t nm[0x40];
    ic_site(w, &b, nm, sizeof nm);
    int32_t rel = (int32_t)(CALLEE - (NMR + 15));
    memcpy(nm + 11, &rel, 4); /* resolved to the callee when loaded */
    uint8_t blob[64];
    memset(blob, 0x90, sizeof blob);
    stub(w, &b, ICB, "InlineCacheBuffer", blob, sizeof blob);
    load_at_nmr(w, &b, nm, sizeof nm);
    /* the stub's fill: movabs rax, imm64; jmp callee */
    uint8_t fill[15] = { 0x48, 0xb8, 0x40, 0x10, 0, 0, 0, 0, 0, 0, 0xe9 };
    rel = (int32_t)(CALLEE - (ICB + 0x20 + 15));
    memcpy(fill + 11, &rel, 4);
    patch(w, &b, 20000, ICB + 0x20, fill, sizeof fill);
    if (previous_change) { /* the site's cached value changed after the fill */
        uint8_t klass = 0x77;
        patch(w, &b, previous_change, NMR + 2, &klass, 1);
    }
    rel = (int32_t)(ICB + 0x20 - (NMR + 15));
    patch(w, &b, 30000, NMR + 11, &rel, 4);
    if (close_scans) {
        jm_put_u32(&b, 1);
        jm_put_str(&b, "patch_close_scans");
        jm_put_u64(&b, 12);
        emit(w, JM_STATS, 40000, &b, NULL, 0);
    }
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);
}

static const dm_patch *patch_at(const dm_model *m, uint64_t vaddr)
{
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].vaddr == vaddr)
            return &m->patches[i];
    return NULL;
}

Test(model, a_site_re_pointed_at_a_transition_stub_starts_at_its_fill)
{
    char *dir;
    ic_transition_trace(&dir, 0, true);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *p = patch_at(m, NMR + 11);
    cr_assert_not_null(p);
    cr_expect_eq(p->call_to, ICB + 0x20);
    cr_expect_eq(p->tsc, 30000);
    cr_expect_eq(p->start_tsc, 20000, "from the stub's fill");
    cr_expect_eq(m->patches_from_fill, 1);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);

    ic_transition_trace(&dir, 25000, true);
    m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    p = patch_at(m, NMR + 11);
    cr_assert_not_null(p);
    cr_expect_eq(p->start_tsc, 30000, "the site changed after the fill: not moved");
    cr_expect_eq(m->patches_from_fill, 0);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);

    ic_transition_trace(&dir, 0, false);
    m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    p = patch_at(m, NMR + 11);
    cr_assert_not_null(p);
    cr_expect_eq(p->start_tsc, 30000, "no close scans: fills are not timed well enough");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* A compiled method's new version replaces the old one: HotSpot marks the
 * old one not entrant (a jump to wrong_method_stub over its entry) before
 * installing the new one, and re-points each site calling the old one at the
 * next call. M1's call at NMR+10 calls M2's old version (OLDV); M2's new version
 * (NEWV) is loaded at t 20000; the watcher records the mark and the site's
 * re-pointing at t 30000. */
#define OLDV 0xb0000ull
#define NEWV 0xb1000ull
#define OSRV 0xb2000ull
#define WMS 0x82000ull

static void new_version_trace(char **dir, bool not_entrant, uint64_t new_load,
                              uint64_t site_change, int32_t new_level, uint64_t osr_load)
{
    jm_writer *w = open_trace_dir(dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    method(w, &b, M2, "two");
    stub(w, &b, WMS, "wrong_method_stub", "\xff\xe0", 2);
    load_ret_version(w, &b, 100, OLDV, M2, 3);
    uint8_t nm[0x20];
    memset(nm, 0x90, sizeof nm);
    int32_t rel = (int32_t)(OLDV - (NMR + 15));
    nm[10] = 0xe8;
    memcpy(nm + 11, &rel, 4);
    load_at_nmr(w, &b, nm, sizeof nm);
    if (osr_load)        /* a C2 version for a loop (OSR): it replaces nothing */
        load_ret_version(w, &b, osr_load, OSRV, M2, 4);
    load_ret_version(w, &b, new_load, NEWV, M2, new_level);
    if (site_change) {   /* a change just before the call: the site's too */
        uint8_t mov = 0x91;
        patch(w, &b, site_change, NMR + 2, &mov, 1);
    }
    if (not_entrant) {
        uint8_t jmp[5] = { 0xe9 };
        rel = (int32_t)(WMS - (OLDV + 5));
        memcpy(jmp + 1, &rel, 4);
        patch(w, &b, 30000, OLDV, jmp, sizeof jmp);
    }
    rel = (int32_t)(NEWV - (NMR + 15));
    patch(w, &b, 30001, NMR + 11, &rel, 4);
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);
}

Test(model, a_replaced_version_and_its_callers_change_at_the_new_versions_load)
{
    struct {
        bool not_entrant;
        uint64_t new_load, site_change;
        int32_t new_level;
        uint64_t mark_start, site_start;
        size_t moved;
        const char *why;
        uint64_t osr_load;
    } cases[] = {
        { true, 20000, 0, 4, 20000, 20000, 2, "both from the new version's load", 0 },
        { false, 20000, 0, 4, 0, 30001, 0, "the old version still entrant: its callers stay", 0 },
        { true, 20000, 25000, 4, 20000, 25000, 2, "no earlier than the site's previous change", 0 },
        { true, 31000, 0, 4, 30000, 30001, 0, "a version loaded after the records moves nothing",
          0 },
        { true, 20000, 0, 2, 30000, 30001, 0, "a lower tier: recompiled after a deoptimization",
          0 },
        { true, 20000, 0, 4, 20000, 20000, 2, "the last higher version, not an OSR one before it",
          12000 },
        { true, 30100, 0, 4, 30000, 30001, 0,
          "a version whose load record came just after the mark's, not an OSR one before", 12000 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir;
        new_version_trace(&dir, cases[i].not_entrant, cases[i].new_load, cases[i].site_change,
                          cases[i].new_level, cases[i].osr_load);
        char err[512];
        dm_model *m = dm_load(dir, err, sizeof err);
        cr_assert_not_null(m, "%s", err);
        const dm_patch *site = NULL;
        for (size_t k = 0; k < m->npatches; k++)
            if (m->patches[k].vaddr == NMR + 11 && m->patches[k].tsc == 30001)
                site = &m->patches[k];
        cr_assert_not_null(site);
        cr_expect_eq(site->call_from, OLDV);
        cr_expect_eq(site->call_to, NEWV);
        cr_expect_eq(site->start_tsc, cases[i].site_start, "%s", cases[i].why);
        if (cases[i].not_entrant) {
            const dm_patch *mark = patch_at(m, OLDV);
            cr_assert_not_null(mark);
            cr_expect_eq(mark->start_tsc, cases[i].mark_start, "%s", cases[i].why);
        }
        cr_expect_eq(m->patches_at_new_version, cases[i].moved, "%s", cases[i].why);
        dm_free(m);
        remove_tree(dir);
        g_free(dir);
    }
}

/* A trace directory with methods M1 "one", M2 "two" and M3 "three". */
static jm_writer *trace_with_three_methods(char **dir, jm_buf *b)
{
    jm_writer *w = open_trace_dir(dir);
    jm_buf_init(b);
    method(w, b, M1, "one");
    method(w, b, M2, "two");
    method(w, b, M3, "three");
    return w;
}

/* Two sites of M1 call M2's and M3's old versions; their new versions come
 * at t 20000 and 25000, and one record of the watcher's (t 30001) holds both
 * re-pointings: each is a piece of its own, dated to its own callee's load. */
#define OLDV3 0xb4000ull
#define NEWV3 0xb5000ull

Test(model, two_sites_re_pointed_in_one_record_change_at_their_own_callees_load)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    stub(w, &b, WMS, "wrong_method_stub", "\xff\xe0", 2);
    load_ret_version(w, &b, 100, OLDV, M2, 3);
    load_ret_version(w, &b, 100, OLDV3, M3, 3);
    uint8_t nm[0x30];
    memset(nm, 0x90, sizeof nm);
    const uint64_t call[2] = { NMR + 10, NMR + 0x20 }, old[2] = { OLDV, OLDV3 },
                   now[2] = { NEWV, NEWV3 }, load[2] = { 20000, 25000 };
    for (int i = 0; i < 2; i++) {
        int32_t rel = (int32_t)(old[i] - (call[i] + 5));
        nm[call[i] - NMR] = 0xe8;
        memcpy(nm + (call[i] - NMR) + 1, &rel, 4);
    }
    load_at_nmr(w, &b, nm, sizeof nm);
    load_ret_version(w, &b, load[0], NEWV, M2, 4);
    load_ret_version(w, &b, load[1], NEWV3, M3, 4);
    for (int i = 0; i < 2; i++) {
        uint8_t jmp[5] = { 0xe9 };
        int32_t rel = (int32_t)(WMS - (old[i] + 5));
        memcpy(jmp + 1, &rel, 4);
        patch(w, &b, 30000, old[i], jmp, sizeof jmp);
    }
    uint8_t rec[0x25 - 11];            /* NMR+11 .. NMR+0x25: both rel32s */
    memcpy(rec, nm + 11, sizeof rec);
    for (int i = 0; i < 2; i++) {
        int32_t rel = (int32_t)(now[i] - (call[i] + 5));
        memcpy(rec + (call[i] + 1 - (NMR + 11)), &rel, 4);
    }
    patch(w, &b, 30001, NMR + 11, rec, sizeof rec);
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);

    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_expect_eq(m->patches_cut, 1);
    for (int i = 0; i < 2; i++) {
        const dm_patch *site = NULL;
        for (size_t k = 0; k < m->npatches; k++)
            if (m->patches[k].tsc == 30001 && m->patches[k].call_at == call[i])
                site = &m->patches[k];
        cr_assert_not_null(site, "site %d has a piece", i);
        cr_expect_eq(site->vaddr, call[i] + 1);
        cr_expect_eq(site->size, 4);
        cr_expect_eq(site->call_from, old[i]);
        cr_expect_eq(site->call_to, now[i]);
        cr_expect_eq(site->start_tsc, load[i], "site %d: from its own callee's load", i);
    }
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* A site resolved to an interpreted callee calls its own static call stub;
 * the c2i adapter re-points it at the callee's compiled code on the first
 * call after the callee's load. M1's call at NMR+10 calls its stub at
 * NMR+0x20 (mov rbx, imm64; jmp ADAPTER); M2's first compiled version (NEWV)
 * is loaded at new_load; the watcher records the site's re-pointing from
 * the stub to NEWV at t 30001 (from_stub false: from OLDV, a version the
 * new one did not replace). */
#define ADAPTER 0x83000ull

static void callee_code_trace(char **dir, uint64_t new_load, uint64_t site_change,
                              bool from_stub, uint64_t record)
{
    jm_writer *w = open_trace_dir(dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    method(w, &b, M2, "two");
    method(w, &b, M3, "three");
    stub(w, &b, ADAPTER, "I2C/C2I adapters", "\xff\xe0", 2);
    load_ret_version(w, &b, 100, OLDV, M3, 3);
    uint8_t nm[0x30];
    memset(nm, 0x90, sizeof nm);
    uint64_t first = from_stub ? NMR + 0x20 : OLDV;
    int32_t rel = (int32_t)(first - (NMR + 15));
    nm[10] = 0xe8;
    memcpy(nm + 11, &rel, 4);
    nm[0x20] = 0x48;                    /* mov rbx, imm64; jmp ADAPTER */
    nm[0x21] = 0xbb;
    nm[0x2a] = 0xe9;
    rel = (int32_t)(ADAPTER - (NMR + 0x2f));
    memcpy(nm + 0x2b, &rel, 4);
    load_at_nmr(w, &b, nm, sizeof nm);
    load_ret_version(w, &b, new_load, NEWV, M2, 3);
    if (site_change) {   /* a change just before the call: the site's too */
        uint8_t mov = 0x91;
        patch(w, &b, site_change, NMR + 2, &mov, 1);
    }
    rel = (int32_t)(NEWV - (NMR + 15));
    patch(w, &b, record, NMR + 11, &rel, 4);
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);
}

Test(model, a_site_repointed_from_its_stub_changes_at_the_callees_load)
{
    struct {
        uint64_t new_load, site_change;
        bool from_stub;
        uint64_t record, site_start;
        size_t moved;
        const char *why;
    } cases[] = {
        { 20000, 0, true, 30001, 20000, 1, "from the compiled callee's load" },
        { 20000, 25000, true, 30001, 25000, 1, "no earlier than the site's previous change" },
        { 31000, 0, true, 30001, 30001, 0, "code loaded after the record was not the target then" },
        { 20000, 0, false, 30001, 30001, 0, "not from the site's own stub" },
        { 20000, 0, true, 3000000000ull, 20000, 1, "however long after the load it was recorded" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir;
        callee_code_trace(&dir, cases[i].new_load, cases[i].site_change, cases[i].from_stub,
                          cases[i].record);
        char err[512];
        dm_model *m = dm_load(dir, err, sizeof err);
        cr_assert_not_null(m, "%s", err);
        const dm_patch *site = NULL;
        for (size_t k = 0; k < m->npatches; k++)
            if (m->patches[k].vaddr == NMR + 11 && m->patches[k].tsc == cases[i].record &&
                !m->patches[k].made_up)
                site = &m->patches[k];
        cr_assert_not_null(site);
        /* the call that made the change may still have gone through the stub */
        cr_expect_eq(site->fixup_states != 0, cases[i].moved == 1, "%s", cases[i].why);
        if (site->fixup_states) {
            const dm_patch *st = &m->patches[site->fixup_states - 1];
            cr_expect(st->made_up && st->before_fixup && st->new_target == NMR + 0x20);
        }
        cr_expect_eq(site->call_from, cases[i].from_stub ? NMR + 0x20 : OLDV);
        cr_expect_eq(site->call_to, NEWV);
        cr_expect_eq(site->start_tsc, cases[i].site_start, "%s", cases[i].why);
        cr_expect_eq(m->patches_at_callee_code, cases[i].moved, "%s", cases[i].why);
        dm_free(m);
        remove_tree(dir);
        g_free(dir);
    }
}

/* Both sites resolved on the first pass, straight to their targets on the
 * second, with the resolutions recorded as two records or as one. */
static void expect_sites_resolved_on_first_pass(bool one_record)
{
    char *dir = make_resolve_trace_as(one_record);
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    /* first pass: both sites through their resolvers */
    tip(&e, ppt_tip, CALLEE);           /* resolve_static_call jumps on */
    tip(&e, ppt_tip, NMR + 5);          /* the callee returns */
    tip(&e, ppt_tip, CALLEE);           /* resolve_opt_virtual_call jumps on */
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);              /* jmp *%rax: again, t still 1000 */
    /* second pass: A calls the callee, B the filled static stub */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);

    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    /* Without the resolutions the second pass would call the resolvers
     * again, against the packets. */
    cr_expect_eq(count_stub(&log, "resolve_static_call"), 1);
    cr_expect_eq(count_stub(&log, "resolve_opt_virtual_call"), 1);
    /* twice per pass, and once more where the stream ends (the callee's
     * return has no packet left) */
    cr_expect_eq(count_stub(&log, "callee"), 5);
    cr_expect_eq(count_jit_at(&log, NMR + 0x20), 1,
                 "B reaches the callee through the filled static stub");
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(st.patches_resolved, 3, "both sites and the static stub");
    remove_tree(dir);
    g_free(dir);
}

Test(decode, call_sites_resolve_when_the_thread_goes_through_the_resolver)
{
    expect_sites_resolved_on_first_pass(false);
}

/* A site resolved to the interpreter and re-pointed at compiled code within
 * one watcher scan: M1's site A (NMR) calls resolve_static_call; the only
 * record of the site (t 9000) has it calling the compiled callee, and the
 * same scan's record fills the static stub (NMR+0x20) to jump to the c2i
 * adapter (C2I: C2I_CODE, `jz` over a `call *%rax` into the VM that fixes
 * the caller once the callee has compiled code, then `ret`). NMR+5 is
 * `jmp *%rax` back to NMR. */
#define C2I 0x85000ull
#define C2I_CODE "\x74\x02\xff\xd0\xc3"

static char *make_interpreted_first_trace_with(const void *resolver, size_t resolver_len)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    stub(w, &b, RS_STATIC, "resolve_static_call", resolver, resolver_len);
    stub(w, &b, C2I, "I2C/C2I adapters", C2I_CODE, 5);
    stub(w, &b, CALLEE, "callee", "\x74\x00\xc3", 3);   /* jz; ret: as C2I without its call */
    uint8_t nm[0x40];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(RS_STATIC - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    memcpy(nm + 0x20, "\x48\xbb\0\0\0\0\0\0\0\0\xe9\xfb\xff\xff\xff", 15);
    load_at_nmr(w, &b, nm, sizeof nm);
    /* the site's last two bytes changed: the record holds only those */
    rel = (int32_t)(CALLEE - (NMR + 5));
    patch(w, &b, 9000, NMR + 3, (const uint8_t *)&rel + 2, 2);
    uint8_t filled[13] = { 0x34, 0x12 };
    rel = (int32_t)(C2I - (NMR + 0x2f));
    filled[8] = 0xe9;
    memcpy(filled + 9, &rel, 4);
    patch(w, &b, 9002, NMR + 0x22, filled, sizeof filled);
    close_with_main_thread(w, &b);
    return dir;
}

static char *make_interpreted_first_trace(void)
{
    return make_interpreted_first_trace_with("\xff\xe0", 2);
}

/* Where made-up state st's call goes: its rel32, in the model's own bytes,
 * from the end of the call. */
static uint64_t made_up_call_target(const dm_model *m, const dm_patch *st)
{
    int32_t rel;
    cr_assert(st->own_bytes && st->size == 4);
    cr_assert_leq(st->code_offset + 4, m->made_up_size);
    memcpy(&rel, m->made_up_bytes + st->code_offset, 4);
    return st->vaddr + 4 + (uint64_t)(int64_t)rel;
}

Test(model, a_site_resolved_to_compiled_code_gets_its_static_stub_state)
{
    char *dir = make_interpreted_first_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_assert_eq(m->states_made_up, 1);
    const dm_patch *res = NULL, *st = NULL;
    for (size_t i = 0; i < m->npatches; i++) {
        if (m->patches[i].site == NMR)
            res = &m->patches[i];
        if (m->patches[i].made_up)
            st = &m->patches[i];
    }
    cr_assert_not_null(res);
    cr_assert_not_null(st);
    cr_expect_eq(res->new_target, CALLEE);
    cr_expect_eq(res->nstates, 1);
    cr_expect(res->vaddr == NMR + 1 && res->size == 4 && res->own_bytes,
              "the record, applied over the made-up state, sets the whole rel32");
    cr_expect_eq(&m->patches[res->first_state], st);
    cr_expect_eq(&m->patches[st->state_of], res);
    cr_expect_eq(st->vaddr, NMR + 1, "the whole rel32, though the record holds two bytes");
    cr_expect_eq(st->size, 4);
    cr_expect_eq(st->new_target, NMR + 0x20);
    cr_expect_eq(st->stub_to, C2I);
    cr_expect_eq(st->start_tsc, res->start_tsc);
    cr_expect_eq(made_up_call_target(m, st), NMR + 0x20);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Whether every call of the callee comes after the last run of the c2i
 * adapter. */
static bool callee_after_c2i(const evlog *log)
{
    size_t first_callee = log->n, last_c2i = 0;
    for (size_t i = 0; i < log->n; i++) {
        if (log->ev[i].kind != DC_STUB)
            continue;
        if (!strcmp(log->ev[i].desc, "callee") && first_callee == log->n)
            first_callee = i;
        if (!strcmp(log->ev[i].desc, "I2C/C2I adapters"))
            last_c2i = i;
    }
    return first_callee > last_c2i;
}

/* Pass 1 resolves A to the interpreter (the resolver goes on to C2I); pass
 * 2 runs A through the static stub and C2I; in pass 3 C2I calls into the VM
 * (it fixes the caller: the callee has compiled code now); pass 4 runs A
 * straight into the callee. No packet tells passes 2 and 4 apart: only the
 * site's state does. */
Test(decode, a_site_resolved_to_the_interpreter_runs_its_static_stub_until_fixed)
{
    char *dir = make_interpreted_first_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tip(&e, ppt_tip, C2I);              /* 1: the resolver goes on to the c2i adapter */
    tnt(&e, 1, 1);                      /*    jz: no fixup */
    tip(&e, ppt_tip, NMR + 5);          /*    ret */
    tip(&e, ppt_tip, NMR);
    tnt(&e, 1, 1);                      /* 2: A, stub, C2I */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 0, 1);                      /* 3: A, stub, C2I calls into the VM: the fixup */
    tip(&e, ppt_tip_pgd, 0);
    tip(&e, ppt_tip_pge, C2I + 4);
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 1, 1);                      /* 4: A calls the callee, which returns */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);

    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    cr_expect_eq(count_stub(&log, "resolve_static_call"), 1);
    cr_expect_gt(count_stub(&log, "callee"), 0, "pass 4 calls the callee");
    cr_expect(callee_after_c2i(&log), "no call of the callee before the fixup");
    cr_expect_eq(st.states_made_up, 1);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* As above, but the stream (a chunk of a longer one) begins after the
 * resolver's pass: it starts from the code as recorded then, where A still
 * calls the resolver. Here the resolver calls into the VM first (a direct
 * call out of the traced code, which would end in a trace-off), so the
 * packets contradict it at once. A retry tries the made-up state (with the
 * stub's fill) next to the record: both decode to the end here (the callee
 * is C2I without its call), and the made-up state, the earlier one, comes
 * first; the fixup in pass 3 then applies the record. */
Test(decode, a_chunk_after_the_resolvers_pass_retries_the_made_up_state)
{
    uint8_t resolver[7] = { 0xe8, 0, 0, 0, 0, 0xff, 0xe0 };   /* call the VM; jmp *%rax */
    int32_t to_vm = (int32_t)(0x1000 - (int64_t)(RS_STATIC + 5));
    memcpy(resolver + 1, &to_vm, 4);
    char *dir = make_interpreted_first_trace_with(resolver, sizeof resolver);
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tnt(&e, 1, 1);                      /* 1: A, stub, C2I: no fixup */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 1, 1);                      /* 2: the same */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 0, 1);                      /* 3: A, stub, C2I calls into the VM */
    tip(&e, ppt_tip_pgd, 0);
    tip(&e, ppt_tip_pge, C2I + 4);
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 1, 1);                      /* 4: A calls the callee */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(count_stub(&log, "resolve_static_call"), 0);
    cr_expect_eq(count_stub(&log, "I2C/C2I adapters"), 3, "passes 1 to 3 run the adapter");
    cr_expect_gt(count_stub(&log, "callee"), 0, "pass 4 calls the callee");
    cr_expect(callee_after_c2i(&log), "no call of the callee before the fixup");
    cr_expect_eq(st.retries_kept, 1, "kept %" PRIu64 " of %" PRIu64, st.retries_kept, st.retries);
    remove_tree(dir);
    g_free(dir);
}

/* A site whose first record is its static call stub: the agent copied M1
 * after HotSpot had resolved site A (NMR) to the interpreter (the stub at
 * NMR+0x20 filled, jumping to C2I). The site's next record (t 9000) has it
 * calling the compiled callee: C2I's call into the VM made that change, and
 * from then on A calls the callee straight. */
static char *make_stub_first_trace(void)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    stub(w, &b, C2I, "I2C/C2I adapters", C2I_CODE, 5);
    stub(w, &b, CALLEE, "callee", "\x74\x00\xc3", 3);   /* jz; ret: as C2I without its call */
    uint8_t nm[0x40];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(NMR + 0x20 - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    memcpy(nm + 0x20, "\x48\xbb\x34\x12\0\0\0\0\0\0\xe9", 11);
    rel = (int32_t)(C2I - (NMR + 0x2f));
    memcpy(nm + 0x2b, &rel, 4);
    load_at_nmr(w, &b, nm, sizeof nm);
    rel = (int32_t)(CALLEE - (NMR + 5));
    patch(w, &b, 9000, NMR + 1, &rel, 4);
    close_with_main_thread(w, &b);
    return dir;
}

Test(decode, a_site_first_recorded_at_its_static_stub_is_fixed_by_its_adapters_call)
{
    char *dir = make_stub_first_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tnt(&e, 1, 1);                      /* 1: A, stub, C2I: jz, no fixup */
    tip(&e, ppt_tip, NMR + 5);          /*    ret */
    tip(&e, ppt_tip, NMR);              /*    jmp *%rax */
    tnt(&e, 0, 1);                      /* 2: A, stub, C2I calls into the VM */
    tip(&e, ppt_tip_pgd, 0);
    tip(&e, ppt_tip_pge, C2I + 4);
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 1, 1);                      /* 3: A calls the callee, which returns: */
    tip(&e, ppt_tip, NMR + 5);          /*    the packets of pass 1, which only */
    tip(&e, ppt_tip, NMR);              /*    the site's state tells apart */
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(count_stub(&log, "I2C/C2I adapters"), 2, "passes 1 and 2 run the adapter");
    cr_expect_gt(count_stub(&log, "callee"), 0, "pass 3 calls the callee");
    cr_expect(callee_after_c2i(&log), "no call of the callee before the fixup");
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* A site at its static call stub (M1 at NMR: site A calls the stub at
 * NMR+0x20, filled to jump to C2I) whose callee M2 gets compiled code at t
 * 500 (FIXED_CALLEE, nops and a ret); the next record of the site (t 9000) has
 * it calling that code, and the model applies it from the load. The first
 * call after the load still went through the stub: C2I called into the VM
 * to fix the site (JDK 17 re-points it there and then). */
#define FIXED_CALLEE 0xb4000ull

/* M1 at NMR: site A calls `site_to`, then `jmp *%rax`; its static stub at
 * NMR+0x20 is filled to jump to C2I. */
static void load_m1_with_stub_to_c2i(jm_writer *w, jm_buf *b, uint64_t site_to)
{
    uint8_t nm[0x40];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(site_to - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    memcpy(nm + 0x20, "\x48\xbb\x34\x12\0\0\0\0\0\0\xe9", 11);
    rel = (int32_t)(C2I - (NMR + 0x2f));
    memcpy(nm + 0x2b, &rel, 4);
    load_at_nmr(w, b, nm, sizeof nm);
}

/* The callee M2 compiled at t 500, and the site's record at t 9000 calling it. */
static void callee_compiled_then_recorded(jm_writer *w, jm_buf *b)
{
    load_ret_version(w, b, 500, FIXED_CALLEE, M2, 3);
    int32_t rel = (int32_t)(FIXED_CALLEE - (NMR + 5));
    patch(w, b, 9000, NMR + 1, &rel, 4);
}

static char *make_fixup_first_call_trace(void)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    method(w, &b, M2, "two");
    stub(w, &b, C2I, "I2C/C2I adapters", C2I_CODE, 5);
    load_m1_with_stub_to_c2i(w, &b, NMR + 0x20);
    callee_compiled_then_recorded(w, &b);
    close_with_main_thread(w, &b);
    return dir;
}

/* From a PSB at t 1000 at NMR, pass 1 of the fixup traces: site A goes
 * through its stub into C2I, which calls into the VM (the fixup). */
static void fixup_pass(penc *e)
{
    penc_init(e);
    psb(e, 1000, NMR);
    tnt(e, 0, 1);
    tip(e, ppt_tip_pgd, 0);
    tip(e, ppt_tip_pge, C2I + 4);
    tip(e, ppt_tip, NMR + 5);           /* ret */
    tip(e, ppt_tip, NMR);               /* jmp *%rax */
}

/* The model of trace dir (the test fails if it cannot be loaded). */
static dm_model *load_model(const char *dir)
{
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    return m;
}

Test(decode, the_first_call_after_the_callees_install_goes_through_the_adapters_fixup)
{
    char *dir = make_fixup_first_call_trace();
    dm_model *m = load_model(dir);
    cr_expect_eq(m->patches_at_callee_code, 1, "the record applies from the callee's load");
    cr_expect_eq(m->fixup_states_made_up, 1, "the site at its stub, for a retry");
    dm_free(m);
    penc e;
    fixup_pass(&e);                     /* 1: the fixup */
    for (int pass = 2; pass <= 3; pass++) {
        tip(&e, ppt_tip, NMR + 5);      /* 2, 3: A calls the compiled callee, which returns */
        tip(&e, ppt_tip, NMR);
    }
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(count_stub(&log, "I2C/C2I adapters"), 1, "pass 1 runs the adapter");
    cr_expect_eq(st.fixup_calls, 1, "kept %" PRIu64 " of %" PRIu64, st.retries_kept, st.retries);
    size_t callee = 0, first = log.n, c2i = 0;
    for (size_t i = 0; i < log.n; i++) {
        if (log.ev[i].kind == DC_JIT_ENTER && log.ev[i].ip == FIXED_CALLEE && !callee++)
            first = i;
        if (log.ev[i].kind == DC_STUB && !strcmp(log.ev[i].desc, "I2C/C2I adapters"))
            c2i = i;
    }
    cr_expect_geq(callee, 2, "passes 2 and 3 call the callee");
    cr_expect_gt(first, c2i, "not before the fixup");
    remove_tree(dir);
    g_free(dir);
}

/* The same on JDK 25, where the fixup only cleans the site: M1's site A
 * calls resolve_static_call as loaded (a call into the VM, then `jmp
 * *%rax`) and its stub from t 200; in the first call after the callee's
 * install C2I calls into the VM, and the next call goes through the
 * resolver, which re-points the site at the callee and goes on to it. */
static void vm_resolver_stub(jm_writer *w, jm_buf *b, uint64_t at, const char *name);

static char *make_cleaning_fixup_trace(void)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    method(w, &b, M2, "two");
    vm_resolver_stub(w, &b, RS_STATIC, "resolve_static_call");
    stub(w, &b, C2I, "I2C/C2I adapters", C2I_CODE, 5);
    load_m1_with_stub_to_c2i(w, &b, RS_STATIC);
    int32_t rel = (int32_t)(NMR + 0x20 - (NMR + 5));
    patch(w, &b, 200, NMR + 1, &rel, 4);
    callee_compiled_then_recorded(w, &b);
    close_with_main_thread(w, &b);
    return dir;
}

Test(decode, a_fixup_that_cleans_the_site_sends_the_next_call_through_the_resolver)
{
    char *dir = make_cleaning_fixup_trace();
    dm_model *m = load_model(dir);
    cr_expect_eq(m->fixup_states_made_up, 3, "at the stub twice, at the resolver");
    dm_free(m);
    penc e;
    fixup_pass(&e);                     /* 1: the fixup */
    tip(&e, ppt_tip_pgd, 0x1000);       /* 2: A, the resolver calls into the VM */
    tip(&e, ppt_tip_pge, RS_STATIC + 5);
    tip(&e, ppt_tip, FIXED_CALLEE);     /*    and goes on to the callee */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tip(&e, ppt_tip, NMR + 5);          /* 3: A calls the callee straight */
    tip(&e, ppt_tip, NMR);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(count_stub(&log, "I2C/C2I adapters"), 1, "pass 1 runs the adapter");
    cr_expect_eq(count_stub(&log, "resolve_static_call"), 1, "pass 2 the resolver");
    cr_expect_eq(st.fixup_calls, 1, "kept %" PRIu64 " of %" PRIu64, st.retries_kept, st.retries);
    remove_tree(dir);
    g_free(dir);
}

/* A site resolved to a version its callee replaced before the next watcher
 * scan. M1 at NMR: site A (NMR) and site B (NMR+5) call
 * resolve_opt_virtual_call (jmp *%rax), then jmp *%rax at NMR+10. M2 has a
 * C1 version (OLD_C1) and, from t 5000, a C2 one (NEW_C2); M3 a C1 version
 * (M3_C1). The only records (t 9000) have A calling NEW_C2+0x10 and B
 * calling M3_C1+0x20: these give the tiers' verified-entry offsets. Every
 * entry is a ret. */
#define OLD_C1 0xc0000ull
#define NEW_C2 0xc1000ull
#define M3_C1 0xc2000ull

/* A compiled version of method id at `at`: nops, with entry (at 0x10 and
 * 0x20) each the bytes of `entry`. */
static void compiled_with(jm_writer *w, jm_buf *b, uint64_t tsc, uint64_t at, uint64_t id,
                          int32_t level, const char *entry, size_t n)
{
    uint8_t code[0x40];
    memset(code, 0x90, sizeof code);
    memcpy(code + 0x10, entry, n);
    memcpy(code + 0x20, entry, n);
    load_version(w, b, tsc, at, id, level, code, sizeof code);
}

static void compiled(jm_writer *w, jm_buf *b, uint64_t tsc, uint64_t at, uint64_t id,
                     int32_t level)
{
    compiled_with(w, b, tsc, at, id, level, "\xc3", 1);
}

/* M1's code: site A (NMR) and site B (NMR+5) call resolve_opt_virtual_call,
 * then jmp *%rax at NMR+10; int3 after. */
static void two_resolver_sites(uint8_t *nm, size_t n)
{
    memset(nm, 0xcc, n);
    for (int s = 0; s < 2; s++) {
        int32_t rel = (int32_t)(RS_OPT - (NMR + 5 * s + 5));
        nm[5 * s] = 0xe8;
        memcpy(nm + 5 * s + 1, &rel, 4);
    }
    memcpy(nm + 10, "\xff\xe0", 2);
}

/* Decodes two passes over M1's sites: in pass 1 the resolver goes on to
 * OLD_C1 + 0x20 for A and to M3_C1 + 0x20 for B (each a ret); in pass 2
 * both sites call straight. */
static void decode_two_passes(const char *dir, evlog *log, dc_stats *st)
{
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tip(&e, ppt_tip, OLD_C1 + 0x20);    /* 1: the resolver goes on to OLD_C1 */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, M3_C1 + 0x20);
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);              /* jmp *%rax */
    tip(&e, ppt_tip, NMR + 5);          /* 2: A's callee returns */
    tip(&e, ppt_tip, NMR + 10);         /*    B's */
    tip(&e, ppt_tip, NMR);
    decode_encoded(dir, &e, log, st);
}

/* Decodes the thread taking one branch (`jz`, in the callee) and then the
 * n TIPs of tips, twice, from a PSB at t 1000 at NMR. */
static void decode_passes(const char *dir, const uint64_t *tips, size_t n, evlog *log,
                          dc_stats *st)
{
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    for (int pass = 0; pass < 2; pass++) {
        tnt(&e, 1, 1);
        for (size_t i = 0; i < n; i++)
            tip(&e, ppt_tip, tips[i]);
    }
    decode_encoded(dir, &e, log, st);
}

/* The thread runs M1's call at NMR into a callee that takes one branch and
 * returns, then M1's jmp *%rax back to the call, twice. */
static void decode_call_and_back(const char *dir, evlog *log, dc_stats *st)
{
    static const uint64_t tips[] = { NMR + 5, NMR };   /* the callee's ret, jmp *%rax */
    decode_passes(dir, tips, 2, log, st);
}

/* What the traces of the tests below vary: where site A goes in M1's load
 * record, in A's record (t 9000) and in A's next record (t 9100, if any),
 * OLD_C1's entries, and when OLD_C1's being made not entrant (a jump to
 * wrong_method_stub over its entry at +0x10) is recorded, if it is. All
 * have B resolved to M3_C1+0x20 at t 9000 and NEW_C2 loaded at t 5000. */
#define VTABLE 0x80300ull
#define WRONG_METHOD 0x80400ull

typedef struct replaced_trace {
    uint64_t a_calls, a_record;
    const char *old_entry;
    size_t old_entry_len;
    uint64_t not_entrant_at;     /* 0: never */
    uint64_t a_then;             /* 0: none */
    uint64_t later;              /* added to every time from NEW_C2's load on */
    /* A's callee named only by M1's bytecode: M2 has a receiver, M1's class
     * file has `invokevirtual T.two()V` at bci 1 and M1's version a pc
     * record there, and another inline-cache site (M3's C2 version at
     * OTHER_IC) records the unverified entry offset. */
    bool named;
    size_t class_cut;            /* named: only the class file's first bytes (0: all of it) */
    size_t extra_versions;       /* more C1 versions of M2, loaded at t 200, 300, ... */
    uint64_t owner_load;         /* M1's load record (0: t 100) */
} replaced_trace;

#define EXTRA_V 0xd0000ull       /* the extra versions, 0x100 apart */

#define OTHER_IC 0xc3000ull
#define IC_MISS 0x80500ull

/* Class T: `void one() { two(); }` (aload_0, invokevirtual T.two()V,
 * return), the bytes javac would write less its other attributes. */
static void class_t(jm_writer *w, jm_buf *b, size_t cut)
{
    static const uint8_t cls[] = {
        0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52, 0, 11,
        1, 0, 1, 'T',                                   /* #1 */
        7, 0, 1,                                        /* #2 class T */
        1, 0, 16, 'j', 'a', 'v', 'a', '/', 'l', 'a', 'n', 'g', '/',
        'O', 'b', 'j', 'e', 'c', 't',                   /* #3 */
        7, 0, 3,                                        /* #4 class Object */
        1, 0, 3, 't', 'w', 'o',                         /* #5 */
        1, 0, 3, '(', ')', 'V',                         /* #6 */
        12, 0, 5, 0, 6,                                 /* #7 two:()V */
        10, 0, 2, 0, 7,                                 /* #8 T.two:()V */
        1, 0, 3, 'o', 'n', 'e',                         /* #9 */
        1, 0, 4, 'C', 'o', 'd', 'e',                    /* #10 */
        0, 0x21, 0, 2, 0, 4, 0, 0, 0, 0,                /* public super T extends Object */
        0, 1,                                           /* one method */
        0, 1, 0, 9, 0, 6, 0, 1,                         /* public one()V, one attribute */
        0, 10, 0, 0, 0, 17, 0, 1, 0, 1, 0, 0, 0, 5,     /* Code: stack 1, locals 1, 5 bytes */
        0x2a, 0xb6, 0, 8, 0xb1, 0, 0, 0, 0,
        0, 0,                                           /* no class attributes */
    };
    jm_put_u64(b, 1);
    jm_put_str(b, "LT;");
    jm_put_u32(b, 0);
    jm_put_bytes(b, cls, cut && cut < sizeof cls ? (uint32_t)cut : sizeof cls);
    emit(w, JM_CLASS_FILE, 11, b, NULL, 0);
}

static char *make_replaced_trace(const replaced_trace *t)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    if (t->named) {
        method_sig(w, &b, M2, "two", "()V", 1);  /* public */
        class_t(w, &b, t->class_cut);
        uint8_t miss[0x20];
        for (size_t i = 0; i < sizeof miss; i += 2)
            memcpy(miss + i, "\xff\xe0", 2);
        stub(w, &b, IC_MISS, "ic_miss_stub", miss, sizeof miss);
    } else {
        method(w, &b, M2, "two");
    }
    method(w, &b, M3, "three");
    stub(w, &b, RS_OPT, "resolve_opt_virtual_call", "\xff\xe0", 2);
    stub(w, &b, RS_VIRT, "resolve_virtual_call", "\xff\xe0", 2);
    stub(w, &b, VTABLE, "vtable stub", "\xff\xe0", 2);
    stub(w, &b, WRONG_METHOD, "wrong_method_stub", "\xff\xe0", 2);
    compiled_with(w, &b, 100, OLD_C1, M2, 3, t->old_entry, t->old_entry_len);
    compiled(w, &b, 100, M3_C1, M3, 3);
    uint8_t nm[0x20];
    two_resolver_sites(nm, sizeof nm);
    int32_t rel = (int32_t)(t->a_calls - (NMR + 5));
    memcpy(nm + 1, &rel, 4);
    if (t->named) {             /* a pc record at A's return address: M1, bci 1 */
        jm_put_u64(&b, NMR); jm_put_u64(&b, sizeof nm); jm_put_u64(&b, 0);
        jm_put_u64(&b, M1); jm_put_i32(&b, 2); jm_put_u32(&b, 1);
        jm_put_u64(&b, NMR + 5); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 1);
        emit(w, JM_NMETHOD_LOAD, t->owner_load ? t->owner_load : 100, &b, nm, sizeof nm);
        uint8_t other[0x10];
        memset(other, 0xcc, sizeof other);
        other[0] = 0xe8;
        rel = (int32_t)(RS_VIRT - (OTHER_IC + 5));
        memcpy(other + 1, &rel, 4);
        load_version(w, &b, 100, OTHER_IC, M3, 4, other, sizeof other);
    } else {
        load_at_nmr(w, &b, nm, sizeof nm);
    }
    for (size_t i = 0; i < t->extra_versions; i++)
        compiled(w, &b, 200 + 100 * i, EXTRA_V + 0x100 * i, M2, 3);
    compiled(w, &b, t->later + 5000, NEW_C2, M2, 4);
    if (t->not_entrant_at) {
        uint8_t jmp[5] = { 0xe9 };
        rel = (int32_t)(WRONG_METHOD - (OLD_C1 + 0x15));
        memcpy(jmp + 1, &rel, 4);
        patch(w, &b, t->later + t->not_entrant_at, OLD_C1 + 0x10, jmp, sizeof jmp);
    }
    rel = (int32_t)(t->a_record - (NMR + 5));
    patch(w, &b, t->later + 9000, NMR + 1, &rel, 4);
    rel = (int32_t)(M3_C1 + 0x20 - (NMR + 10));
    patch(w, &b, t->later + 9000, NMR + 6, &rel, 4);
    if (t->a_then) {
        rel = (int32_t)(t->a_then - (NMR + 5));
        patch(w, &b, t->later + 9100, NMR + 1, &rel, 4);
    }
    if (t->named) {
        rel = (int32_t)(NEW_C2 + 0x10 - (OTHER_IC + 5));
        patch(w, &b, t->later + 9000, OTHER_IC + 1, &rel, 4);
    }
    close_with_main_thread(w, &b);
    return dir;
}

/* Site A calls resolve_opt_virtual_call, or with inline_cache
 * resolve_virtual_call, and its record NEW_C2+0x10 (for an inline-cache
 * site, the C2 version's unverified entry). */
static char *make_replaced_callee_trace_at(bool inline_cache)
{
    replaced_trace t = { inline_cache ? RS_VIRT : RS_OPT, NEW_C2 + 0x10, "\xc3", 1, 0, 0, 0,
                         false, 0, 0, 0 };
    return make_replaced_trace(&t);
}

static char *make_replaced_callee_trace(void)
{
    return make_replaced_callee_trace_at(false);
}

/* The patch that changes the call at `site` (a resolution or a
 * re-pointing: *res, NULL if none) and the model's made-up states: how
 * many, the last in *st (NULL if none). */
static size_t site_and_states(const dm_model *m, uint64_t site, const dm_patch **res,
                              const dm_patch **st)
{
    size_t states = 0;
    *res = *st = NULL;
    for (size_t i = 0; i < m->npatches; i++) {
        if (m->patches[i].site == site ||
            (m->patches[i].call_to && m->patches[i].call_at == site && !m->patches[i].made_up))
            *res = &m->patches[i];
        if (m->patches[i].made_up && !m->patches[i].before_fixup) {
            *st = &m->patches[i];
            states++;
        }
    }
    return states;
}

Test(model, a_site_resolved_to_a_replaced_version_gets_that_versions_state)
{
    char *dir = make_replaced_callee_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a, *st;
    size_t states = site_and_states(m, NMR, &a, &st);
    cr_assert_not_null(a);
    cr_assert_eq(states, 1, "A's callee had another version; B's had not");
    cr_expect_eq(a->nstates, 1);
    cr_expect_eq(&m->patches[a->first_state], st);
    cr_expect(st->direct);
    cr_expect_eq(st->new_target, OLD_C1 + 0x20, "the C1 entry offset of B's record");
    cr_expect_eq(st->stub_to, OLD_C1 + 0x20);
    cr_expect_eq(made_up_call_target(m, st), OLD_C1 + 0x20);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Pass 1 resolves A to OLD_C1 (the resolver goes on there) and B to M3_C1;
 * pass 2 calls both straight. A ret in NEW_C2 would fit the packets of
 * pass 2 as well: only A's state says which version ran. */
/* A resolver stub at `at` as HotSpot's are in the trace: its call into the
 * VM (here 0x1000, no code) has no packets, then `jmp *%rax`. */
static void vm_resolver_stub(jm_writer *w, jm_buf *b, uint64_t at, const char *name)
{
    uint8_t resolver[7] = { 0xe8, 0, 0, 0, 0, 0xff, 0xe0 };   /* call the VM; jmp *%rax */
    int32_t to_vm = (int32_t)(0x1000 - (int64_t)(at + 5));
    memcpy(resolver + 1, &to_vm, 4);
    stub(w, b, at, name, resolver, sizeof resolver);
}

/* Sites A and B of M1 (calling resolve_opt_virtual_call as loaded, whose
 * call into the VM has no trace) were resolved before the chunk (PSB at
 * t 1000) to OLD_C1 and M3_C1, whose entries (+0x10) are `jz; ret` and `ret`; their
 * records come at t 9000, and OLD_C1's not-entrant mark (a jump to the
 * wrong-method stub over its entry) at t 8999, in the same scan. The retry
 * that applies A's record is no reason to apply the mark: the thread still
 * ran OLD_C1. */
Test(decode, a_retry_applying_a_resolution_leaves_the_callees_not_entrant_mark_to_its_time)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    vm_resolver_stub(w, &b, RS_OPT, "resolve_opt_virtual_call");
    stub(w, &b, WRONG_METHOD, "wrong_method_stub", "\xff\xe0", 2);
    compiled_with(w, &b, 100, OLD_C1, M2, 3, "\x74\x00\xc3", 3);
    compiled(w, &b, 100, M3_C1, M3, 3);
    uint8_t nm[0x20];
    two_resolver_sites(nm, sizeof nm);
    load_at_nmr(w, &b, nm, sizeof nm);
    uint8_t jmp[5] = { 0xe9 };
    int32_t rel = (int32_t)(WRONG_METHOD - (OLD_C1 + 0x15));
    memcpy(jmp + 1, &rel, 4);
    patch(w, &b, 8999, OLD_C1 + 0x10, jmp, sizeof jmp);
    rel = (int32_t)(OLD_C1 + 0x10 - (NMR + 5));
    patch(w, &b, 9000, NMR + 1, &rel, 4);
    rel = (int32_t)(M3_C1 + 0x10 - (NMR + 10));
    patch(w, &b, 9000, NMR + 6, &rel, 4);
    close_with_main_thread(w, &b);

    /* OLD_C1's jz and ret, M3_C1's ret, jmp *%rax */
    static const uint64_t tips[] = { NMR + 5, NMR + 10, NMR };
    evlog log = { .n = 0 };
    dc_stats st;
    decode_passes(dir, tips, 3, &log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(count_stub(&log, "wrong_method_stub"), 0);
    cr_expect_geq(count_jit_at(&log, OLD_C1 + 0x10), 2, "both passes run OLD_C1");
    remove_tree(dir);
    g_free(dir);
}

/* A compiled method that calls itself: M1's version at NMR is `je +5; call
 * resolve_static_call; ret` under one scope, its site A at NMR+2. The
 * thread resolves A to NMR itself (the resolver goes on there), and A's
 * record comes at t 9000; NMR is marked not entrant (a jump to the
 * wrong-method stub over its entry) at t 9500, after a newer version of M1
 * (t 8000). Applying A's state early is no reason to apply the mark: the
 * target has a scope, so it is the method's entry, not a static call stub
 * whose fill HotSpot made first. Each return from the recursive call goes
 * back into the caller's frame of the same version. */
Test(decode, a_site_resolved_to_its_own_version_leaves_its_not_entrant_mark_to_its_time)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    vm_resolver_stub(w, &b, RS_STATIC, "resolve_static_call");
    stub(w, &b, WRONG_METHOD, "wrong_method_stub", "\xff\xe0", 2);
    uint8_t nm[0x20];
    memset(nm, 0xcc, sizeof nm);
    memcpy(nm, "\x74\x05\xe8", 3);
    int32_t rel = (int32_t)(RS_STATIC - (NMR + 7));
    memcpy(nm + 3, &rel, 4);
    nm[7] = 0xc3;
    jm_put_u64(&b, NMR); jm_put_u64(&b, sizeof nm); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 3); jm_put_u32(&b, 1);
    jm_put_u64(&b, NMR + 8); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 0);
    emit(w, JM_NMETHOD_LOAD, 100, &b, nm, sizeof nm);
    compiled(w, &b, 8000, NMR + 0x1000, M1, 4);
    rel = (int32_t)(NMR - (NMR + 7));
    patch(w, &b, 9000, NMR + 3, &rel, 4);
    uint8_t jmp[5] = { 0xe9 };
    rel = (int32_t)(WRONG_METHOD - (NMR + 5));
    memcpy(jmp + 1, &rel, 4);
    patch(w, &b, 9500, NMR, jmp, sizeof jmp);
    close_with_main_thread(w, &b);

    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tnt(&e, 0, 1);                      /* pass 1: A through the resolver */
    tip(&e, ppt_tip_pgd, 0x1000);
    tip(&e, ppt_tip_pge, RS_STATIC + 5);
    tip(&e, ppt_tip, NMR);              /* the resolver goes on to NMR */
    tnt(&e, 1, 1);
    tip(&e, ppt_tip, NMR + 7);          /* the callee returns into its caller */
    tip(&e, ppt_tip, NMR);              /* and the caller to NMR again */
    tnt(&e, 0, 1);                      /* pass 2: A calls NMR straight */
    tnt(&e, 1, 1);
    tip(&e, ppt_tip, NMR + 7);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(count_stub(&log, "wrong_method_stub"), 0);
    cr_expect_eq(count_stub(&log, "resolve_static_call"), 1);
    size_t calls = 0, returns = 0;
    for (size_t i = 0; i < log.n; i++)
        if (log.ev[i].kind == DC_JIT_ENTER && log.ev[i].ip == NMR + 7)
            returns += (log.ev[i].flags & DC_F_BY_RETURN) != 0;
        else if (log.ev[i].kind == DC_JIT_ENTER && log.ev[i].ip == NMR)
            calls += (log.ev[i].flags & DC_F_BY_CALL) != 0;
    cr_expect_eq(calls, 1, "pass 2's call of NMR");
    cr_expect_eq(returns, 2, "a return into the caller's frame in each pass");
    remove_tree(dir);
    g_free(dir);
}

/* Sites A and B of M1 (resolve_opt_virtual_call as loaded, its call into
 * the VM without trace) were both resolved before the chunk (PSB at t 1000)
 * to OLD_C1, whose entry +0x20 is `jz; jz; ret`. Their one record (t 9000)
 * has both at NEW_C2, which replaced OLD_C1 and M2's other C1 version at
 * OLD_C1 - 0x1000 (the C1 entry offset comes from another site's record,
 * OTHER_IC's to M3_C1+0x20). Each site gets a state per C1 version, the
 * other one's first; neither NEW_C2's entry nor the other version's fits
 * the packets. Each site's right state alone runs into the other's stale
 * call, and a retry starts from the last checkpoint (the PSB), before
 * both: only the two states together, one version at one entry, decode
 * it. */
Test(decode, two_sites_resolved_to_one_replaced_version_take_its_states_together)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    vm_resolver_stub(w, &b, RS_OPT, "resolve_opt_virtual_call");
    compiled_with(w, &b, 100, OLD_C1, M2, 3, "\x74\x00\x74\x00\xc3", 5);
    compiled_with(w, &b, 200, OLD_C1 - 0x1000, M2, 3, "\xff\xe0", 2);   /* jmp *%rax */
    compiled(w, &b, 100, M3_C1, M3, 3);
    uint8_t nm[0x20];
    two_resolver_sites(nm, sizeof nm);
    load_at_nmr(w, &b, nm, sizeof nm);
    uint8_t other[0x10];
    memset(other, 0xcc, sizeof other);
    other[0] = 0xe8;
    int32_t rel = (int32_t)(RS_OPT - (OTHER_IC + 5));
    memcpy(other + 1, &rel, 4);
    load_version(w, &b, 100, OTHER_IC, M3, 4, other, sizeof other);
    compiled_with(w, &b, 5000, NEW_C2, M2, 4, "\xff\xe0", 2);
    rel = (int32_t)(NEW_C2 + 0x10 - (NMR + 5));
    memcpy(nm + 1, &rel, 4);
    rel = (int32_t)(NEW_C2 + 0x10 - (NMR + 10));
    memcpy(nm + 6, &rel, 4);
    patch(w, &b, 9000, NMR + 1, nm + 1, 9);
    rel = (int32_t)(M3_C1 + 0x20 - (OTHER_IC + 5));
    patch(w, &b, 9000, OTHER_IC + 1, &rel, 4);
    close_with_main_thread(w, &b);

    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    for (int pass = 0; pass < 2; pass++) {
        tnt(&e, 3, 2);                  /* A: OLD_C1's two jz */
        tip(&e, ppt_tip, NMR + 5);      /*    its ret */
        tnt(&e, 3, 2);                  /* B: OLD_C1's two jz */
        tip(&e, ppt_tip, NMR + 10);     /*    its ret */
        tip(&e, ppt_tip, NMR);          /* jmp *%rax */
    }
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(count_stub(&log, "resolve_opt_virtual_call"), 0);
    cr_expect_geq(count_jit_at(&log, OLD_C1 + 0x20), 4, "A and B call OLD_C1 in both passes");
    cr_expect_eq(count_jit_in(&log, NEW_C2, NEW_C2 + 0x40), 0);
    remove_tree(dir);
    g_free(dir);
}

/* Site A of M1 (resolve_static_call as loaded, its call into the VM without
 * trace) was resolved before the chunk (PSB at t 1000) to M1's static call
 * stub, filled to go on to the c2i adapter (`jz; ret`). Its records: the
 * resolution at t 60,000,100, and the re-pointing to M2's compiled code at
 * CALLEE_NM, loaded at t 60,000,000, at t 60,000,200, dated back to the
 * resolution (start_at_callee_code). Until t 50,000,000 CALLEE_NM held
 * another method's code, `jz; ret` too, which fits the packets: a retry
 * that took the re-pointing with the resolution would decode the calls
 * there, into code whose successor's load record is 60M ticks away. */
#define CALLEE_NM 0xc4000ull
Test(decode, a_retry_leaves_out_a_call_to_code_loaded_long_after_it)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    vm_resolver_stub(w, &b, RS_STATIC, "resolve_static_call");
    stub(w, &b, C2I, "I2C/C2I adapters", "\x74\x00\xc3", 3);
    uint8_t nm[0x40];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(RS_STATIC - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    memcpy(nm + 0x20, "\x48\xbb\x22\x22\0\0\0\0\0\0\xe9", 11);   /* mov rbx, M2; jmp C2I */
    rel = (int32_t)(C2I - (NMR + 0x2f));
    memcpy(nm + 0x2b, &rel, 4);
    load_at_nmr(w, &b, nm, sizeof nm);
    compiled_with(w, &b, 100, CALLEE_NM, M3, 3, "\x74\x00\xc3", 3);
    jm_put_u64(&b, M3);
    jm_put_u64(&b, CALLEE_NM);
    emit(w, JM_NMETHOD_UNLOAD, 50000000, &b, NULL, 0);
    compiled_with(w, &b, 60000000, CALLEE_NM, M2, 3, "\xff\xe0", 2);
    rel = (int32_t)(NMR + 0x20 - (NMR + 5));
    patch(w, &b, 60000100, NMR + 1, &rel, 4);
    rel = (int32_t)(CALLEE_NM + 0x20 - (NMR + 5));
    patch(w, &b, 60000200, NMR + 1, &rel, 4);
    close_with_main_thread(w, &b);

    evlog log = { .n = 0 };
    dc_stats st;
    decode_call_and_back(dir, &log, &st);   /* the adapter's jz and ret */
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(count_jit_in(&log, CALLEE_NM, CALLEE_NM + 0x40), 0);
    cr_expect_geq(count_stub(&log, "I2C/C2I adapters"), 2);
    remove_tree(dir);
    g_free(dir);
}

/* A record of one byte of a call's rel32 whose byte before was zero (the
 * high byte of a near target, `e8 e4 00 00 00` -> `e8 e4 00 00 09`): the
 * call ran all along, so the bytes apply from the record's time, not from
 * the start of the caller as a fill of zeroed space would. */
Test(model, a_patch_over_a_live_calls_zero_bytes_applies_from_its_time)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    uint8_t nm[0x200];
    memset(nm, 0xcc, sizeof nm);
    nm[0] = 0xe8;
    nm[1] = 0xe4;
    nm[2] = nm[3] = nm[4] = 0;                       /* call NMR + 0xe9 */
    nm[0xe9] = 0xc3;
    load_at_nmr(w, &b, nm, sizeof nm);
    compiled(w, &b, 100, NMR + 0x09000000, M2, 3);   /* where the new high byte points */
    const uint8_t high = 0x09;
    patch(w, &b, 9000, NMR + 4, &high, 1);
    close_with_main_thread(w, &b);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *p = NULL;
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].vaddr == NMR + 4 && !m->patches[i].made_up)
            p = &m->patches[i];
    cr_assert_not_null(p);
    cr_expect_eq(p->start_tsc, 9000, "not dated back to the caller's start");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Two later versions of M1's code (NMR), each over a jump the stretch ran:
 * at t 9000 the first jump goes to stub ST1 (three jz and a ret), at t 9500
 * the second, which the first no longer reaches, to stub ST2 (two jz and a
 * ret). The packets (two taken jz, then the ret) contradict the code as
 * loaded at once; the earlier version gets two packets further and fails
 * there, with no later version left on its path; the later one decodes to
 * the end. */
#define ST1 0x8c000ull
#define ST2 0x8c100ull
Test(decode, a_retry_keeps_the_version_that_decodes_furthest)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    stub(w, &b, ST1, "three jz", "\x74\x00\x74\x00\x74\x00\xc3", 7);
    stub(w, &b, ST2, "two jz", "\x74\x00\x74\x00\xc3", 5);
    uint8_t nm[0x20];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(NMR + 0x10 - (NMR + 5));
    nm[0] = 0xe9;                                   /* jmp T0 */
    memcpy(nm + 1, &rel, 4);
    rel = (int32_t)(NMR + 0x18 - (NMR + 0x15));
    nm[0x10] = 0xe9;                                /* T0: jmp U0 */
    memcpy(nm + 0x11, &rel, 4);
    nm[0x18] = 0xc3;                                /* U0: ret */
    load_at_nmr(w, &b, nm, sizeof nm);
    rel = (int32_t)(ST1 - (NMR + 5));
    patch(w, &b, 9000, NMR + 1, &rel, 4);
    rel = (int32_t)(ST2 - (NMR + 0x15));
    patch(w, &b, 9500, NMR + 0x11, &rel, 4);
    close_with_main_thread(w, &b);

    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tnt(&e, 1, 1);                  /* ST2's jz */
    tnt(&e, 1, 1);                  /* and its second */
    tip(&e, ppt_tip, NMR);          /* its ret */
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_geq(count_stub(&log, "two jz"), 1);
    cr_expect_eq(count_stub(&log, "three jz"), 0);
    remove_tree(dir);
    g_free(dir);
}

Test(decode, a_site_resolved_to_a_replaced_version_calls_it_until_its_record)
{
    char *dir = make_replaced_callee_trace();
    evlog log = { .n = 0 };
    dc_stats st;
    decode_two_passes(dir, &log, &st);
    size_t old = count_jit_at(&log, OLD_C1 + 0x20);
    size_t new = count_jit_in(&log, NEW_C2, NEW_C2 + 0x40);
    /* once per pass, and once more where the stream ends */
    cr_expect_eq(old, 3, "every pass runs the version A was resolved to");
    cr_expect_eq(new, 0, "nothing ran the version of A's record");
    cr_expect_eq(count_stub(&log, "resolve_opt_virtual_call"), 2);
    cr_expect_eq(st.states_made_up, 1);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* As above with A an inline-cache site: its resolver goes on to OLD_C1's
 * verified entry (+0x20, the offset of B's record), the site calls its
 * unverified one (+0x10, the offset of A's own record in the C2 version:
 * C1 has no inline-cache record of its own and takes C2's). */
Test(model, an_inline_cache_site_resolved_to_a_replaced_version_calls_its_unverified_entry)
{
    char *dir = make_replaced_callee_trace_at(true);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a, *st;
    size_t states = site_and_states(m, NMR, &a, &st);
    cr_assert_not_null(a);
    cr_assert_eq(states, 1);
    cr_expect_eq(a->nstates, 1);
    cr_expect(st->direct);
    cr_expect_eq(st->new_target, OLD_C1 + 0x10, "the site calls the unverified entry");
    cr_expect_eq(st->stub_to, OLD_C1 + 0x20, "its resolver goes on to the verified one");
    cr_expect_eq(made_up_call_target(m, st), OLD_C1 + 0x10);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Pass 1: A's resolver goes on to OLD_C1+0x20; pass 2 calls OLD_C1+0x10. */
Test(decode, an_inline_cache_site_resolved_to_a_replaced_version_calls_it_until_its_record)
{
    char *dir = make_replaced_callee_trace_at(true);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_two_passes(dir, &log, &st);
    size_t verified = count_jit_at(&log, OLD_C1 + 0x20);
    size_t unverified = count_jit_at(&log, OLD_C1 + 0x10);
    size_t new = count_jit_in(&log, NEW_C2, NEW_C2 + 0x40);
    cr_expect_eq(verified, 1, "the resolver's jump");
    cr_expect_eq(unverified, 2, "pass 2, and once more where the stream ends");
    cr_expect_eq(new, 0, "nothing ran the version of A's record");
    cr_expect_eq(count_stub(&log, "resolve_virtual_call"), 1);
    cr_expect_eq(st.states_made_up, 1);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* An inline-cache site A that went megamorphic before the watcher's next
 * scan: its only record (t 9000) shows the vtable stub. M1's bytecode at
 * A's bci names T.two()V, and M2 (two) has two versions by then: each
 * gives a made-up state. */
static char *make_named_callee_trace(void)
{
    replaced_trace t = { RS_VIRT, VTABLE, "\xc3", 1, 0, 0, 0, true, 0, 0, 0 };
    return make_replaced_trace(&t);
}

Test(model, an_inline_cache_site_gone_megamorphic_gets_the_states_of_the_callee_its_invoke_names)
{
    char *dir = make_named_callee_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a = NULL;
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].site == NMR)
            a = &m->patches[i];
    cr_assert_not_null(a);
    cr_expect_eq(a->new_target, VTABLE);
    cr_assert_eq(a->nstates, 2, "OLD_C1 and NEW_C2");
    bool old_seen = false, new_seen = false;
    for (uint32_t k = a->first_state; k < a->first_state + a->nstates; k++) {
        const dm_patch *st = &m->patches[k];
        cr_expect(st->direct);
        old_seen |= st->new_target == OLD_C1 + 0x10 && st->stub_to == OLD_C1 + 0x20 &&
                    made_up_call_target(m, st) == OLD_C1 + 0x10;
        new_seen |= st->new_target == NEW_C2 + 0x10 && st->stub_to == NEW_C2 + 0x20;
    }
    cr_expect(old_seen, "the site calls OLD_C1's unverified entry; its resolver went to the "
                        "verified one");
    cr_expect(new_seen);
    cr_expect_eq(m->callees_named, 1);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* States of the named callee's versions (one per version here), in a
 * case where A's record came as before and M2 has more versions: 16 more
 * (more than there are states: the newest come first), or OLD_C1 made not
 * entrant before M1's load record (no resolution goes there any more). */
static const dm_patch *named_site_states(dm_model *m)
{
    const dm_patch *a = NULL;
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].site == NMR)
            a = &m->patches[i];
    cr_assert_not_null(a);
    return a;
}

static bool has_state(const dm_model *m, const dm_patch *a, uint64_t to)
{
    for (uint32_t k = a->first_state; k < a->first_state + a->nstates; k++)
        if (m->patches[k].new_target == to)
            return true;
    return false;
}

Test(model, a_callee_name_with_many_versions_gets_states_for_the_newest_entrant_ones)
{
    replaced_trace many = { RS_VIRT, VTABLE, "\xc3", 1, 0, 0, 0, true, 0, 16, 0 };
    char *dir = make_replaced_trace(&many);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a = named_site_states(m);
    cr_expect_eq(a->nstates, 16);
    cr_expect(has_state(m, a, NEW_C2 + 0x10), "the newest version is among them");
    cr_expect(has_state(m, a, EXTRA_V + 0xf00 + 0x10));
    cr_expect(!has_state(m, a, EXTRA_V + 0x10), "the two oldest are left out");
    cr_expect(!has_state(m, a, OLD_C1 + 0x10));
    dm_free(m);
    remove_tree(dir);
    g_free(dir);

    replaced_trace marked = { RS_VIRT, VTABLE, "\xc3", 1, 3000, 0, 0, true, 0, 0, 4000 };
    dir = make_replaced_trace(&marked);
    m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    a = named_site_states(m);
    cr_expect_eq(a->nstates, 1, "OLD_C1 was not entrant before M1's load record");
    cr_expect(has_state(m, a, NEW_C2 + 0x10));
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* A class file cut anywhere names nothing, and costs nothing else. */
Test(model, a_damaged_class_file_names_no_callee)
{
    for (size_t cut = 1; cut < 119; cut++) {   /* the whole file has 119 bytes */
        replaced_trace t = { RS_VIRT, VTABLE, "\xc3", 1, 0, 0, 0, true, cut, 0, 0 };
        char *dir = make_replaced_trace(&t);
        char err[512];
        dm_model *m = dm_load(dir, err, sizeof err);
        cr_assert_not_null(m, "%s", err);
        cr_expect_eq(m->callees_named, 0, "cut at %zu", cut);
        for (size_t i = 0; i < m->npatches; i++)
            if (m->patches[i].site == NMR)
                cr_expect_eq(m->patches[i].nstates, 0, "cut at %zu", cut);
        dm_free(m);
        remove_tree(dir);
        g_free(dir);
    }
}

/* Without the class file (or with a callee of another name) nothing is
 * made up, and the thread that called OLD_C1 straight is decoded into the
 * vtable stub instead. */
Test(decode, an_inline_cache_site_gone_megamorphic_calls_the_named_callee_until_its_record)
{
    char *dir = make_named_callee_trace();
    evlog log = { .n = 0 };
    dc_stats st;
    decode_two_passes(dir, &log, &st);
    cr_expect_eq(count_jit_at(&log, OLD_C1 + 0x20), 1, "the resolver's jump");
    cr_expect_eq(count_jit_at(&log, OLD_C1 + 0x10), 2,
                 "pass 2, and once more where the stream ends");
    cr_expect_eq(count_stub(&log, "vtable stub"), 0, "A's record is not in the image yet");
    cr_expect_eq(st.states_made_up, 1);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* The same site, where OLD_C1's entries check the receiver (`jne
 * ic_miss_stub; ret`). Pass 1 goes through the resolver to OLD_C1's
 * verified entry; in pass 2 the site calls OLD_C1's unverified entry (the
 * made-up state), the check fails and the thread enters the miss handler,
 * which re-points the site; in pass 3 the site calls the vtable stub of
 * its record, which goes on to OLD_C1's verified entry. */
Test(decode, an_inline_cache_miss_ends_the_made_up_state)
{
    static uint8_t entry[7] = { 0x0f, 0x85, 0, 0, 0, 0, 0xc3 };   /* jne rel32; ret */
    int32_t rel = (int32_t)(IC_MISS - (OLD_C1 + 0x16));
    memcpy(entry + 2, &rel, 4);  /* at +0x10; the copy at +0x20 jumps to IC_MISS + 0x10 */
    replaced_trace t = { RS_VIRT, VTABLE, (const char *)entry, sizeof entry, 0, 0, 0, true,
                         0, 0, 0 };
    char *dir = make_replaced_trace(&t);
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tip(&e, ppt_tip, OLD_C1 + 0x20);    /* 1: A's resolver goes on to OLD_C1 */
    tnt(&e, 0, 1);                      /*    the receiver's class is the one */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, M3_C1 + 0x20);     /*    B's resolver */
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);              /*    jmp *%rax */
    tnt(&e, 1, 1);                      /* 2: A calls OLD_C1+0x10; another class */
    tip(&e, ppt_tip, NMR);              /*    the miss handler's jmp *%rax */
    tip(&e, ppt_tip, OLD_C1 + 0x20);    /* 3: A calls the vtable stub */
    tnt(&e, 0, 1);
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR + 10);         /*    B calls M3_C1+0x20 */
    tip(&e, ppt_tip, NMR);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(count_jit_at(&log, OLD_C1 + 0x10), 1, "pass 2 only");
    cr_expect_eq(count_stub(&log, "ic_miss_stub"), 1);
    cr_expect_eq(count_stub(&log, "vtable stub"), 2,
                 "pass 3 calls the site's record, and once more where the stream ends");
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* A site re-pointed away from a version its callee replaced. M1 at NMR:
 * site A (NMR) calls OLD_C1+0x20 (resolved before M1's load record), site
 * B (NMR+5) calls resolve_opt_virtual_call, then jmp *%rax at NMR+10.
 * NEW_C2 (t 5000) replaces OLD_C1; the site went on to NEW_C2+0x20, which
 * no record holds: its only record (t 9000) re-points it from OLD_C1+0x20
 * to a vtable stub (VTABLE: jmp *%rax) once the site went megamorphic.
 * OLD_C1 made not entrant at t 5000 is what let the site move on. B's
 * record gives the entry offset. OLD_C1's entries are `jz; ret`, NEW_C2's
 * a ret: the packets tell them apart. */
static char *make_repointed_from_replaced_trace_if(bool made_not_entrant)
{
    replaced_trace t = { OLD_C1 + 0x20, VTABLE, "\x74\x00\xc3", 3, made_not_entrant ? 5000 : 0,
                         0, 0, false, 0, 0, 0 };
    return make_replaced_trace(&t);
}

static char *make_repointed_from_replaced_trace(void)
{
    return make_repointed_from_replaced_trace_if(true);
}

Test(model, a_site_repointed_away_from_a_replaced_version_gets_the_other_versions_states)
{
    char *dir = make_repointed_from_replaced_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a, *st;
    size_t states = site_and_states(m, NMR, &a, &st);
    cr_assert_not_null(a);
    cr_expect_eq(a->call_to, VTABLE);
    cr_expect_eq(a->call_from, OLD_C1 + 0x20);
    cr_assert_eq(states, 1);
    cr_expect_eq(a->nstates, 1);
    cr_expect_eq(&m->patches[st->state_of], a);
    cr_expect_eq(made_up_call_target(m, st), NEW_C2 + 0x20);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* The same re-pointing from a version never made not entrant (an inline
 * cache going megamorphic): no made-up states. */
Test(model, a_site_repointed_away_from_a_live_version_gets_no_states)
{
    char *dir = make_repointed_from_replaced_trace_if(false);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a, *st;
    cr_expect_eq(site_and_states(m, NMR, &a, &st), 0);
    cr_assert_not_null(a);
    cr_expect_eq(a->nstates, 0);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* After t 5000, A calls NEW_C2 (a ret) where the recorded code has OLD_C1
 * (`jz; ret`): the jz meets a TIP, and a retry tries the made-up state
 * next to the record. Both decode to the end (the vtable stub's jump takes
 * the same TIPs); the made-up state, the earlier one, is kept. */
Test(decode, a_site_repointed_away_from_a_replaced_version_calls_the_newer_one_until_its_record)
{
    char *dir = make_repointed_from_replaced_trace();
    penc e;
    penc_init(&e);
    psb(&e, 6000, NMR);
    tip(&e, ppt_tip, NMR + 5);          /* 1: NEW_C2 returns */
    tip(&e, ppt_tip, M3_C1 + 0x20);     /*    B's resolver goes on to M3_C1 */
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);
    tip(&e, ppt_tip, NMR + 5);          /* 2: the same, B straight */
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(count_jit_at(&log, NEW_C2 + 0x20), 3,
                 "both passes, and once more where the stream ends");
    cr_expect_eq(count_stub(&log, "vtable stub"), 0);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* An inline-cache site resolved while its callee was interpreted: the
 * resolver points it at the callee's c2i adapter (its unverified entry) and
 * jumps on to the c2i entry; the callee's compiled code came before the
 * next scan, whose record is all there is. M1 at NMR: site A (NMR) calls
 * resolve_virtual_call, then jmp *%rax at NMR+5; site B (NMR+0x10), never
 * run, calls its static call stub (NMR+0x20, jumping to itself). The
 * records: B's stub filled to jump to AD_C2I (t 3000) and B re-pointed
 * from the stub to M3_C1+0x20 (t 4000): M3 uses that adapter, and M2 has
 * the same convention (every test method is static with no parameters); A
 * resolved to NEW_C2+0x10, M2's compiled code (t 9000). The adapter: an
 * i2c part ending in `jmp *%r11`, the unverified entry (AD_UNVERIFIED: a
 * jz) and the c2i entry (AD_C2I: jmp *%rax). */
#define ADAPTERS 0x84000ull
#define AD_UNVERIFIED (ADAPTERS + 0x10)
#define AD_C2I (ADAPTERS + 0x14)

#define ADAPTERS2 0x86000ull
#define AD2_UNVERIFIED (ADAPTERS2 + 0x0a)

/* With adapters_in_code, M2 is an instance method taking an int (convention
 * "JI"), which no record ties to an adapter: the adapters at ADAPTERS2 are
 * read from their i2c parts. The first loads the receiver into rsi and the
 * int into edx from the interpreter's stack, then `jmp *%r11`: its
 * unverified entry follows (AD2_UNVERIFIED), its c2i entry 4 bytes on (the
 * gap ADAPTERS shows). The second loads one reference: "J". */
static void interpreted_callee_records(jm_writer *w, jm_buf *b, bool adapters_in_code)
{
    method(w, b, M1, "one");
    if (adapters_in_code)
        method_sig(w, b, M2, "two", "(I)V", 1);
    else
        method(w, b, M2, "two");
    method(w, b, M3, "three");
    stub(w, b, RS_VIRT, "resolve_virtual_call", "\xff\xe0", 2);
    uint8_t ad[0x20];
    memset(ad, 0x90, sizeof ad);
    memcpy(ad + 0x0d, "\x41\xff\xe3", 3);
    memcpy(ad + 0x10, "\x74\x00", 2);
    memcpy(ad + 0x14, "\xff\xe0", 2);
    stub(w, b, ADAPTERS, "I2C/C2I adapters", ad, sizeof ad);
    if (adapters_in_code) {
        static const uint8_t ji[] = { 0x48, 0x8b, 0x70, 0x10,     /* mov rsi, [rax+0x10] */
                                      0x8b, 0x50, 0x08,           /* mov edx, [rax+8] */
                                      0x41, 0xff, 0xe3,           /* jmp *%r11 */
                                      0x74, 0x00, 0x90, 0x90,     /* unverified: jz */
                                      0xff, 0xe0 };               /* c2i: jmp *%rax */
        stub(w, b, ADAPTERS2, "I2C/C2I adapters", ji, sizeof ji);
        static const uint8_t j[] = { 0x48, 0x8b, 0x70, 0x08, 0x41, 0xff, 0xe3, 0xff, 0xe0 };
        stub(w, b, ADAPTERS2 + 0x40, "I2C/C2I adapters", j, sizeof j);
    }
    compiled(w, b, 100, M3_C1, M3, 3);
    uint8_t nm[0x30];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(RS_VIRT - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    rel = (int32_t)(NMR + 0x20 - (NMR + 0x15));
    nm[0x10] = 0xe8;
    memcpy(nm + 0x11, &rel, 4);
    uint8_t stub_code[15] = { 0x48, 0xbb, [10] = 0xe9 };
    rel = -15;                          /* jumping to itself, as HotSpot emits it */
    memcpy(stub_code + 11, &rel, 4);
    memcpy(nm + 0x20, stub_code, sizeof stub_code);
    load_at_nmr(w, b, nm, sizeof nm);
    compiled(w, b, 2000, NEW_C2, M2, 4);
    rel = (int32_t)(AD_C2I - (NMR + 0x2f));
    patch(w, b, 3000, NMR + 0x2b, &rel, 4);
    rel = (int32_t)(M3_C1 + 0x20 - (NMR + 0x15));
    patch(w, b, 4000, NMR + 0x11, &rel, 4);
    rel = (int32_t)(NEW_C2 + 0x10 - (NMR + 5));
    patch(w, b, 9000, NMR + 1, &rel, 4);
}

static char *interpreted_callee_trace(bool adapters_in_code)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    interpreted_callee_records(w, &b, adapters_in_code);
    close_with_main_thread(w, &b);
    return dir;
}

static char *make_interpreted_callee_trace(void)
{
    return interpreted_callee_trace(false);
}

Test(model, an_adapter_no_record_names_is_read_from_its_i2c_part)
{
    char *dir = interpreted_callee_trace(true);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_expect_eq(m->adapters_from_records, 1, "M3's convention, from the stub fill");
    cr_expect_eq(m->adapters_from_code, 2, "\"JI\" and \"J\"");
    const dm_patch *a, *st;
    size_t states = site_and_states(m, NMR, &a, &st);
    cr_assert_not_null(a);
    cr_assert_eq(states, 1, "the adapter of M2's convention only");
    cr_expect(st->direct);
    cr_expect_eq(st->new_target, AD2_UNVERIFIED, "the unverified entry after `jmp *%%r11`");
    cr_expect_eq(st->stub_to, AD2_UNVERIFIED + 4, "the c2i entry, ADAPTERS' gap on");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* The records both tests below share: M1 at NMR, whose site A calls
 * resolve_virtual_call (jmp *%rax after it), M2 an instance method of
 * signature m2_sig, the miss stub AD3_MISS; and (resolve_site_a) A
 * resolved to NEW_C2+0x10 at t 9000. */
#define AD3_MISS 0x8a000ull

static void virtual_site_records(jm_writer *w, jm_buf *b, const char *m2_sig)
{
    method(w, b, M1, "one");
    method_sig(w, b, M2, "two", m2_sig, 1);
    stub(w, b, RS_VIRT, "resolve_virtual_call", "\xff\xe0", 2);
    stub(w, b, AD3_MISS, "ic_miss_stub", "\xff\xe0", 2);
    uint8_t nm[0x10];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(RS_VIRT - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    load_at_nmr(w, b, nm, sizeof nm);
}

static void resolve_site_a(jm_writer *w, jm_buf *b)
{
    int32_t rel = (int32_t)(NEW_C2 + 0x10 - (NMR + 5));
    patch(w, b, 9000, NMR + 1, &rel, 4);
}

/* A run whose records tie no adapter to a callee (no static call stub was
 * filled before a scan saw its site re-pointed): the c2i entry is read from
 * the adapters' code alone. M1 at NMR: site A calls resolve_virtual_call,
 * resolved to NEW_C2+0x10, M2's compiled code (an instance method taking an
 * int: "JI"), at t 9000. The adapter at ADAPTERS3 as JDK 25 emits it: i2c
 * loads and `jmp *%r11`; the unverified entry checks the receiver's class
 * (`jne MISS`) and whether the callee has compiled code since (`je` on to
 * the c2i entry, else `jmp MISS`); the c2i entry follows the second jump
 * to MISS. */
#define ADAPTERS3 0x88000ull
#define AD3_UNVERIFIED (ADAPTERS3 + 10)
#define AD3_C2I (ADAPTERS3 + 40)
Test(model, an_adapters_c2i_entry_no_record_shows_is_read_from_its_code)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    virtual_site_records(w, &b, "(I)V");
    uint8_t ad[42] = { 0x48, 0x8b, 0x70, 0x10,              /* mov rsi, [rax+0x10] */
                       0x8b, 0x50, 0x08,                    /* mov edx, [rax+8] */
                       0x41, 0xff, 0xe3,                    /* jmp *%r11 */
                       0x44, 0x8b, 0x56, 0x08,              /* unverified: mov r10d, [rsi+8] */
                       0x44, 0x3b, 0x50, 0x08,              /* cmp r10d, [rax+8] */
                       0x0f, 0x85, 0, 0, 0, 0,              /* +18: jne MISS */
                       0x48, 0x83, 0x7b, 0x48, 0x00,        /* cmp qword [rbx+0x48], 0 */
                       0x0f, 0x84, 0, 0, 0, 0,              /* +29: je c2i */
                       0xe9, 0, 0, 0, 0,                    /* +35: jmp MISS */
                       0xff, 0xe0 };                        /* +40, c2i: jmp *%rax */
    int32_t rel = (int32_t)(AD3_MISS - (ADAPTERS3 + 24));
    memcpy(ad + 20, &rel, 4);
    rel = (int32_t)(AD3_C2I - (ADAPTERS3 + 35));
    memcpy(ad + 31, &rel, 4);
    rel = (int32_t)(AD3_MISS - (ADAPTERS3 + 40));
    memcpy(ad + 36, &rel, 4);
    stub(w, &b, ADAPTERS3, "I2C/C2I adapters", ad, sizeof ad);
    compiled(w, &b, 2000, NEW_C2, M2, 4);
    resolve_site_a(w, &b);
    close_with_main_thread(w, &b);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_expect_eq(m->adapters_from_records, 0);
    cr_expect_eq(m->adapters_from_code, 1);
    const dm_patch *a, *st;
    size_t states = site_and_states(m, NMR, &a, &st);
    cr_assert_not_null(a);
    cr_assert_eq(states, 1, "the adapter of M2's convention");
    cr_expect(st->direct);
    cr_expect_eq(st->new_target, AD3_UNVERIFIED);
    cr_expect_eq(st->stub_to, AD3_C2I, "after the second jump to the miss stub");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* The entries of compiled code read from the code where no resolution
 * shows them: site A of M1 (NMR) resolved by resolve_virtual_call to
 * NEW_C2+0x10, M2's C2 version, at t 9000; M2's C1 version OLD_C1 came
 * first. No resolution shows a verified entry, nor C1's unverified one;
 * each version's code does: nops, the unverified entry checking the
 * receiver's class (`jne` to the miss stub), a 2-byte nop, the verified
 * entry. OLD_C1's at +0x08 and +0x18, NEW_C2's at +0x10 and +0x20. */
static void version_with_entries(jm_writer *w, jm_buf *b, uint64_t tsc, uint64_t at,
                                 int32_t level, size_t unverified)
{
    uint8_t code[0x40];
    memset(code, 0x90, sizeof code);
    static const uint8_t check[] = { 0x44, 0x8b, 0x56, 0x08,     /* mov r10d, [rsi+8] */
                                     0x44, 0x3b, 0x50, 0x08,     /* cmp r10d, [rax+8] */
                                     0x0f, 0x85, 0, 0, 0, 0,     /* jne AD3_MISS */
                                     0x66, 0x90 };               /* 2-byte nop */
    memcpy(code + unverified, check, sizeof check);
    int32_t rel = (int32_t)(AD3_MISS - (at + unverified + 14));
    memcpy(code + unverified + 10, &rel, 4);
    code[unverified + sizeof check] = 0xc3;
    load_version(w, b, tsc, at, M2, level, code, sizeof code);
}

Test(model, compiled_codes_entries_no_resolution_shows_are_read_from_its_code)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    virtual_site_records(w, &b, "()V");
    version_with_entries(w, &b, 200, OLD_C1, 3, 0x08);
    version_with_entries(w, &b, 5000, NEW_C2, 4, 0x10);
    resolve_site_a(w, &b);
    close_with_main_thread(w, &b);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a, *st;
    size_t states = site_and_states(m, NMR, &a, &st);
    cr_assert_not_null(a);
    cr_assert_eq(states, 1, "OLD_C1's");
    cr_expect(st->direct);
    cr_expect_eq(st->new_target, OLD_C1 + 0x08, "the unverified entry, from C1's code");
    cr_expect_eq(st->stub_to, OLD_C1 + 0x18, "the verified entry, from the code");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Two static call sites of one caller, each resolved to the interpreter
 * through a stub of its own before the watcher's scan, which shows both
 * stubs filled and both sites calling compiled code (xalan JDK 25,
 * NormalizerBase.next). The records of interpreted_callee_records(true),
 * and M4 at NM_TWO: site A (NM_TWO) and site B (NM_TWO+0x10) call
 * resolve_static_call; its stubs at NM_TWO+0x20 and NM_TWO+0x2f jump to
 * themselves. At t 9100 and 9101 the first stub is filled to jump to the
 * c2i entry of the adapter of convention "J" (ADAPTERS2+0x40, read from its
 * code), the second to that of "JI" (ADAPTERS2); at 9102 and 9103 A is
 * resolved to M2's C2 code (an instance method taking an int: "JI"), B to
 * M5's (an instance method without parameters: "J"). */
#define NM_TWO 0xa4000ull
#define M4 0x4444ull
#define M5 0x5555ull
#define M5_C2 0xc3000ull
#define AD_JI_C2I (AD2_UNVERIFIED + 4)
#define AD_J_C2I (ADAPTERS2 + 0x40 + 7 + 4)

static char *two_stub_sites_trace(void)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    interpreted_callee_records(w, &b, true);
    method(w, &b, M4, "four");
    method_sig(w, &b, M5, "five", "()V", 1);
    stub(w, &b, RS_STATIC, "resolve_static_call", "\xff\xe0", 2);
    compiled(w, &b, 2000, M5_C2, M5, 4);
    uint8_t nm[0x40];
    memset(nm, 0xcc, sizeof nm);
    for (int s = 0; s < 2; s++) {
        int32_t rel = (int32_t)(RS_STATIC - (NM_TWO + 0x10 * s + 5));
        nm[0x10 * s] = 0xe8;
        memcpy(nm + 0x10 * s + 1, &rel, 4);
    }
    for (int s = 0; s < 2; s++) {
        uint8_t stub_code[15] = { 0x48, 0xbb, [10] = 0xe9 };
        int32_t rel = -15;              /* jumping to itself, as HotSpot emits it */
        memcpy(stub_code + 11, &rel, 4);
        memcpy(nm + 0x20 + 15 * s, stub_code, sizeof stub_code);
    }
    load_version(w, &b, 100, NM_TWO, M4, 3, nm, sizeof nm);
    int32_t rel = (int32_t)(AD_J_C2I - (NM_TWO + 0x2f));
    patch(w, &b, 9100, NM_TWO + 0x2b, &rel, 4);
    rel = (int32_t)(AD_JI_C2I - (NM_TWO + 0x3e));
    patch(w, &b, 9101, NM_TWO + 0x3a, &rel, 4);
    rel = (int32_t)(NEW_C2 + 0x10 - (NM_TWO + 5));
    patch(w, &b, 9102, NM_TWO + 1, &rel, 4);
    rel = (int32_t)(M5_C2 + 0x10 - (NM_TWO + 0x15));
    patch(w, &b, 9103, NM_TWO + 0x11, &rel, 4);
    close_with_main_thread(w, &b);
    return dir;
}

/* The made-up states through a static call stub of the resolution of
 * `site`: how many, the stub of the last in *stub. */
static size_t stub_states_of(const dm_model *m, uint64_t site, uint64_t *stub)
{
    size_t n = 0;
    *stub = 0;
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (p->site != site)
            continue;
        for (uint32_t s = p->first_state; s < p->first_state + p->nstates; s++)
            if (!m->patches[s].direct) {
                *stub = m->patches[s].new_target;
                n++;
            }
    }
    return n;
}

Test(model, each_site_gets_the_stub_state_whose_adapter_fits_its_callee)
{
    char *dir = two_stub_sites_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    uint64_t stub;
    cr_expect_eq(stub_states_of(m, NM_TWO, &stub), 1, "A: one of the two stubs");
    cr_expect_eq(stub, NM_TWO + 0x2f, "A calls M2 (\"JI\"): the stub to that adapter");
    cr_expect_eq(stub_states_of(m, NM_TWO + 0x10, &stub), 1, "B: one of the two stubs");
    cr_expect_eq(stub, NM_TWO + 0x20, "B calls M5 (\"J\"): the stub to that adapter");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

Test(model, an_inline_cache_site_resolved_to_compiled_code_gets_its_callees_adapter_state)
{
    char *dir = make_interpreted_callee_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a, *st;
    size_t states = site_and_states(m, NMR, &a, &st);
    cr_assert_not_null(a);
    cr_expect_eq(a->new_target, NEW_C2 + 0x10);
    cr_assert_eq(states, 1, "the adapter's, and no other version of M2");
    cr_expect_eq(&m->patches[st->state_of], a);
    cr_expect(st->direct);
    cr_expect_eq(st->new_target, AD_UNVERIFIED, "the site calls the unverified entry");
    cr_expect_eq(st->stub_to, AD_C2I, "its resolver goes on to the c2i entry");
    cr_expect_eq(made_up_call_target(m, st), AD_UNVERIFIED);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Pass 1: A's resolver goes on to AD_C2I, whose jmp *%rax returns to
 * NMR+5; pass 2: A calls the unverified entry, whose jz (not taken) then
 * falls through to the c2i entry. NEW_C2's ret would meet that bit. */
Test(decode, an_inline_cache_site_calls_its_interpreted_callees_adapter_until_its_record)
{
    char *dir = make_interpreted_callee_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tip(&e, ppt_tip, AD_C2I);           /* 1: the resolver goes on to the c2i entry */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 0, 1);                      /* 2: the unverified entry's jz */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    size_t unverified = 0, new = count_jit_in(&log, NEW_C2, NEW_C2 + 0x40);
    for (size_t i = 0; i < log.n; i++)
        unverified += log.ev[i].kind == DC_STUB && log.ev[i].ip == AD_UNVERIFIED;
    cr_expect_eq(unverified, 2, "pass 2 enters the adapter at its unverified entry, and so "
                 "does the stream's end");
    cr_expect_eq(new, 0, "nothing ran the compiled code of A's record");
    cr_expect_eq(st.states_made_up, 1);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* A site resolved to a version that a newer one replaced much later, the
 * scan after that seeing it all at once: A was resolved to OLD_C1+0x20
 * before M1's load record had it (A still calls resolve_opt_virtual_call
 * there); NEW_C2 is loaded at MUCH_LATER + 5000; the records 4000 ticks
 * after show OLD_C1 made not entrant and A resolved to OLD_C1, and 100
 * after those A re-pointed to NEW_C2+0x20. The model dates the mark back
 * to NEW_C2's load and the re-pointing to A's previous change (the
 * resolution's record). OLD_C1's entries are `jz; ret`, NEW_C2's a ret:
 * the packets tell them apart. */
#define MUCH_LATER 10000000ull      /* TSC ticks: more than a watcher scan lasts */

static char *make_resolved_before_replaced_trace(void)
{
    replaced_trace t = { RS_OPT, OLD_C1 + 0x20, "\x74\x00\xc3", 3, 9000, NEW_C2 + 0x20,
                         MUCH_LATER, false, 0, 0, 0 };
    return make_replaced_trace(&t);
}

Test(model, changes_that_follow_a_new_version_are_dated_to_it)
{
    char *dir = make_resolved_before_replaced_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *mark = NULL, *res = NULL, *repoint = NULL;
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (p->made_up)
            continue;
        if (p->vaddr == OLD_C1 + 0x10)
            mark = p;
        else if (p->site == NMR)
            res = p;
        else if (p->call_at == NMR)
            repoint = p;
    }
    cr_assert(mark && res && repoint);
    cr_expect(mark->after_new_version);
    cr_expect_eq(mark->start_tsc, MUCH_LATER + 5000, "the mark applies from NEW_C2's load");
    cr_expect(!res->after_new_version);
    cr_expect_eq(res->start_tsc, MUCH_LATER + 9000);
    cr_expect(repoint->after_new_version);
    cr_expect_eq(repoint->start_tsc, MUCH_LATER + 9000, "no earlier than A's previous change");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* The thread calls A straight into OLD_C1 from t 1000, where the recorded
 * code has A calling the resolver: its jmp *%rax takes the ret's TIP, and
 * the jz's bit (not taken) then meets M3_C1's ret, which is no compressed
 * return. A retry takes A's records: both date from the resolution's, but
 * the re-pointing to NEW_C2 is not true before NEW_C2's load; taken with
 * the resolution, it would send every call of A to NEW_C2, whose ret
 * meets the jz's bit at once. */
Test(decode, a_retry_leaves_out_what_a_new_version_caused_before_its_load)
{
    char *dir = make_resolved_before_replaced_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tnt(&e, 0, 1);                      /* 1: OLD_C1's jz, not taken */
    tip(&e, ppt_tip, NMR + 5);          /*    its ret */
    tip(&e, ppt_tip, M3_C1 + 0x20);     /*    B's resolver goes on to M3_C1 */
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);
    tnt(&e, 0, 1);                      /* 2: the same, B straight */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    size_t old = count_jit_at(&log, OLD_C1 + 0x20);
    size_t new = count_jit_in(&log, NEW_C2, NEW_C2 + 0x40);
    cr_expect_eq(old, 3, "both passes run OLD_C1, and once more where the stream ends");
    cr_expect_eq(new, 0, "nothing ran NEW_C2");
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* The reverse: a site resolved to its callee's compiled code, which was
 * made not entrant before the watcher's next scan. M1 at NMR: site A (NMR)
 * and site B (NMR+5) call resolve_opt_virtual_call, then jmp *%rax at
 * NMR+10; A's static call stub is at NMR+0x20. M2 has a C1 version
 * (OLD_C1), and from t 6000 a new one (NEW_C2, level 3 too). The records:
 * A resolved to its static stub (t 5000: M2 interpreted), B to M3_C1+0x20
 * (t 9000: the C1 entry offset), A re-pointed from its stub to the new
 * version (t 9500). Only that last record names A's callee. */
static char *make_gone_before_scan_trace(void)
{
    char *dir;
    jm_buf b;
    jm_writer *w = trace_with_three_methods(&dir, &b);
    stub(w, &b, RS_OPT, "resolve_opt_virtual_call", "\xff\xe0", 2);
    stub(w, &b, C2I, "I2C/C2I adapters", "\xc3", 1);
    compiled(w, &b, 100, OLD_C1, M2, 3);
    compiled(w, &b, 100, M3_C1, M3, 3);
    uint8_t nm[0x40];
    two_resolver_sites(nm, sizeof nm);
    memcpy(nm + 0x20, "\x48\xbb\0\0\0\0\0\0\0\0\xe9\xfb\xff\xff\xff", 15);
    load_at_nmr(w, &b, nm, sizeof nm);
    int32_t rel = (int32_t)(NMR + 0x20 - (NMR + 5));
    patch(w, &b, 5000, NMR + 1, &rel, 4);
    uint8_t filled[13] = { 0x34, 0x12 };
    rel = (int32_t)(C2I - (NMR + 0x2f));
    filled[8] = 0xe9;
    memcpy(filled + 9, &rel, 4);
    patch(w, &b, 5000, NMR + 0x22, filled, sizeof filled);
    compiled(w, &b, 6000, NEW_C2, M2, 3);
    rel = (int32_t)(M3_C1 + 0x20 - (NMR + 10));
    patch(w, &b, 9000, NMR + 6, &rel, 4);
    rel = (int32_t)(NEW_C2 + 0x20 - (NMR + 5));
    patch(w, &b, 9500, NMR + 1, &rel, 4);
    close_with_main_thread(w, &b);
    return dir;
}

/* Two sites the thread resolved before the chunk, one in the other's
 * callee: M1's site A (NMR) calls resolve_static_call as loaded, M2's site
 * B (NM2, the compiled code A's record points at) resolve_opt_virtual_call.
 * Both records come after the chunk's PSB (t 1000): A's at 1500, B's 30M
 * ticks later, in another watcher scan. The thread runs A, NM2, B, then the
 * callee, whose `jz` gives the first packet; with neither record or either
 * one alone, a resolver is decoded, whose call into the VM leaves the code
 * the trace has before any packet: both fail at one offset. */
#define NM2 0xb0000ull

/* with_stub: A also has a static call stub (NMR+0x20), filled in M1's load
 * record, to a c2i adapter whose code (two jz) takes the callee's jz and then
 * fails at the next TIP: a made-up state of A's resolution, and a retry
 * candidate that gets further than A's record alone. */
static char *make_two_stale_sites_trace_with(bool with_stub)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    method(w, &b, M2, "two");
    if (with_stub)
        stub(w, &b, C2I, "I2C/C2I adapters", "\x74\x00\x74\x00\xc3", 5);
    vm_resolver_stub(w, &b, RS_STATIC, "resolve_static_call");
    vm_resolver_stub(w, &b, RS_OPT, "resolve_opt_virtual_call");
    stub(w, &b, CALLEE, "callee", "\x74\x00\xc3", 3);
    uint8_t nm[0x40];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(RS_STATIC - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    if (with_stub) {         /* mov rbx, imm64; jmp C2I */
        memcpy(nm + 0x20, "\x48\xbb\x11\x11\0\0\0\0\0\0\xe9", 11);
        rel = (int32_t)(C2I - (NMR + 0x2f));
        memcpy(nm + 0x2b, &rel, 4);
    }
    load_at_nmr(w, &b, nm, sizeof nm);
    memset(nm + 0x20, 0xcc, 0x20);
    rel = (int32_t)(RS_OPT - (NM2 + 5));
    memcpy(nm + 1, &rel, 4);
    nm[5] = 0xc3;
    load_version(w, &b, 200, NM2, M2, 2, nm, sizeof nm);
    rel = (int32_t)(NM2 - (NMR + 5));
    patch(w, &b, 1500, NMR + 1, &rel, 4);
    rel = (int32_t)(CALLEE - (NM2 + 5));
    patch(w, &b, 30000000, NM2 + 1, &rel, 4);
    close_with_main_thread(w, &b);
    return dir;
}

/* The thread runs A, NM2, B, then the callee, twice, from a PSB at t 1000
 * (before both records). */
static void decode_two_stale_sites(const char *dir, evlog *log, dc_stats *st)
{
    /* the callee's ret, NM2's ret, jmp *%rax */
    static const uint64_t tips[] = { NM2 + 5, NMR + 5, NMR };
    decode_passes(dir, tips, 3, log, st);
}

/* Neither resolver is decoded: both records apply from the PSB. */
static void expect_both_sites_fixed(bool with_stub)
{
    char *dir = make_two_stale_sites_trace_with(with_stub);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_two_stale_sites(dir, &log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_eq(count_stub(&log, "resolve_static_call"), 0);
    cr_expect_eq(count_stub(&log, "resolve_opt_virtual_call"), 0);
    cr_expect_geq(count_stub(&log, "callee"), 2);
    cr_expect_eq(count_stub(&log, "I2C/C2I adapters"), 0, "A's made-up state is not kept");
    remove_tree(dir);
    g_free(dir);
}

Test(decode, a_retry_that_moves_the_error_to_another_resolved_site_takes_both)
{
    expect_both_sites_fixed(false);
}

/* A's resolution has a made-up state too (its stub), which gets further
 * than A's record alone: the record, which runs on into B's stale call at
 * once, is tried with B's record before the state is kept. */
Test(decode, a_retry_weighs_a_candidate_that_ran_into_another_stale_site_with_that_site_fixed)
{
    expect_both_sites_fixed(true);
}

Test(model, a_site_resolved_to_a_version_gone_by_the_next_scan_gets_that_versions_state)
{
    char *dir = make_gone_before_scan_trace();
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_patch *a = NULL;
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].site == NMR)
            a = &m->patches[i];
    cr_assert_not_null(a);
    cr_expect_eq(a->new_target, NMR + 0x20, "A's record: its own static stub");
    cr_assert_eq(a->nstates, 1, "the old version of A's callee (not the new one)");
    const dm_patch *st = &m->patches[a->first_state];
    cr_expect(st->made_up && st->direct);
    cr_expect_eq(st->stub_to, OLD_C1 + 0x20);
    cr_expect_eq(made_up_call_target(m, st), OLD_C1 + 0x20);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Pass 1 resolves A to OLD_C1 (the resolver goes on there) and B to M3_C1;
 * pass 2 calls both straight. The packets of pass 2 fit A's static stub and
 * the c2i adapter's ret as well: only A's state says which ran. */
Test(decode, a_site_resolved_to_a_version_gone_by_the_next_scan_calls_it)
{
    char *dir = make_gone_before_scan_trace();
    evlog log = { .n = 0 };
    dc_stats st;
    decode_two_passes(dir, &log, &st);
    /* once per pass, and once more where the stream ends */
    cr_expect_eq(count_jit_at(&log, OLD_C1 + 0x20), 3,
                 "every pass runs the version A was resolved to");
    cr_expect_eq(count_stub(&log, "I2C/C2I adapters"), 0, "A's static stub never ran");
    cr_expect_eq(count_stub(&log, "resolve_opt_virtual_call"), 2);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* M1's call at NMR goes to CALLEE in its load record; a record at t 3000
 * points it at first_to with the first first_bytes bytes of its
 * displacement, and one at t 9000 at later_to with later_bytes bytes (the
 * watcher records the bytes that changed). The image at t 1000 applies the
 * later record ahead of its time (a resolution: the thread went through the
 * resolver to it; a re-pointing: a kept retry), then passes t 3000. Where
 * the call goes after that. */
static uint64_t call_after_early_record(uint64_t first_to, size_t first_bytes,
                                        uint64_t later_to, size_t later_bytes)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    stub(w, &b, RS_OPT, "resolve_opt_virtual_call", "\xff\xe0", 2);
    stub(w, &b, CALLEE, "callee", "\xc3", 1);
    stub(w, &b, CALLEE + 0x100, "callee2", "\xc3", 1);
    uint8_t nm[0x10];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(CALLEE - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    load_at_nmr(w, &b, nm, sizeof nm);
    rel = (int32_t)(first_to - (NMR + 5));
    patch(w, &b, 3000, NMR + 1, &rel, first_bytes);
    rel = (int32_t)(later_to - (NMR + 5));
    patch(w, &b, 9000, NMR + 1, &rel, later_bytes);
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);

    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    uint32_t later = UINT32_MAX;
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].tsc == 9000)
            later = (uint32_t)i;
    cr_assert_neq(later, UINT32_MAX);
    cr_assert(m->patches[later].site == NMR || m->patches[later].call_at == NMR);
    di_image *im = di_image_new(cache, 1000, err, sizeof err);
    cr_assert_not_null(im, "%s", err);
    cr_assert_eq(di_image_apply_early(im, later), 1);
    cr_assert_geq(di_image_advance(im, 4000), 0);
    uint8_t buf[4];
    size_t n = 0;
    for (int got; n < sizeof buf; n += (size_t)got)
        cr_assert_gt(got = di_image_read(im, buf + n, sizeof buf - n, NMR + 1 + n), 0);
    memcpy(&rel, buf, 4);
    di_image_free(im);
    di_cache_free(cache);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
    return NMR + 5 + (uint64_t)(int64_t)rel;
}

/* A resolution applied ahead of its time stays over the records of earlier
 * states that come due after it: the site is cleaned (calling
 * resolve_opt_virtual_call, t 3000, as HotSpot does when the callee is
 * made not entrant), then resolved to CALLEE + 0x100 (t 9000). */
Test(image, a_resolution_applied_early_stays_over_an_earlier_record)
{
    uint64_t to = call_after_early_record(RS_OPT, 4, CALLEE + 0x100, 4);
    cr_expect_eq(to, CALLEE + 0x100, "the site calls %#llx", (unsigned long long)to);
}

/* An earlier record of a call's re-pointing applied over a later one
 * applied early may leave some of the later one's bytes: a displacement of
 * neither, calling nowhere. The later state stays then; where the earlier
 * record covers all of the later one's bytes, the earlier state is whole
 * and applies. */
Test(image, a_call_re_pointed_early_is_never_a_mix_of_two_states)
{
    cr_expect_eq(call_after_early_record(CALLEE + 0x100, 3, 0x190000, 4), 0x190000);
    cr_expect_eq(call_after_early_record(CALLEE + 0x100, 3, 0x190000, 3), CALLEE + 0x100);
}

/* ---- a patch over zeros that ends before its last instruction does -------- */

/* the zeros kept after a patch (image.c: the longest instruction but one) */
#define MAX_INSN_BYTES_TEST 14
#define ICBUF 0xc0000ull
#define ICBUF_CALLEE 0xd0000ull

/* HotSpot fills an inline-cache transition stub (movabs rax, imm64; jmp
 * rel32) into the emptied InlineCacheBuffer, which the agent's snapshot holds as
 * zeros. The watcher records the bytes that changed: the jump's rel32 ends
 * in two zero bytes that were already there. */
Test(image, a_patch_over_zeros_keeps_the_zeros_that_end_its_instruction)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    uint8_t zeros[0x80] = { 0 };
    stub(w, &b, ICBUF, "InlineCacheBuffer", zeros, sizeof zeros);
    stub(w, &b, ICBUF_CALLEE, "callee", "\xc3", 1);
    uint8_t fill[15] = { 0x48, 0xb8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0xe9 };
    int32_t rel = (int32_t)(ICBUF_CALLEE - (ICBUF + 0x20 + sizeof fill));
    memcpy(fill + 11, &rel, 4);
    cr_assert_eq(fill[13], 0, "the test wants a rel32 that ends in zeros");
    patch(w, &b, 500, ICBUF + 0x20, fill, 13);
    close_with_main_thread(w, &b);

    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    di_image *im = di_image_new(cache, 1000, err, sizeof err);
    cr_assert_not_null(im, "%s", err);
    uint8_t buf[16];
    cr_expect_eq(di_image_read(im, buf, sizeof buf, ICBUF + 0x20 + 13), MAX_INSN_BYTES_TEST);
    cr_expect_eq(buf[0] | buf[1], 0);
    cr_expect_eq(di_image_read(im, buf, sizeof buf, ICBUF + 0x20 + 13 + MAX_INSN_BYTES_TEST),
                 -pte_nomap, "zeros beyond an instruction stay out");
    cr_expect_eq(di_image_read(im, buf, sizeof buf, ICBUF), -pte_nomap);
    di_image_free(im);
    di_cache_free(cache);
    dm_free(m);

    /* the thread runs the stub into the callee, whose ret goes back to it */
    penc e;
    penc_init(&e);
    psb(&e, 1000, ICBUF + 0x20);
    tip(&e, ppt_tip, ICBUF + 0x20);
    evlog log = { .n = 0 };
    dc_stats st;
    decode_encoded(dir, &e, &log, &st);
    cr_expect_eq(count_stub(&log, "callee"), 2, "the stub's jump reached the callee");
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    remove_tree(dir);
    g_free(dir);
}

/* M1 at NMR: call `calls`, then jmp *%rax. The InlineCacheBuffer at
 * ICBUF is empty (zeros) as the agent took it; the callee at ICBUF_CALLEE
 * is `jz; ret`. The test adds its records and closes the trace. */
static jm_writer *icbuf_site_trace(char **dir, jm_buf *b, uint64_t calls)
{
    jm_writer *w = open_trace_dir(dir);
    jm_buf_init(b);
    method(w, b, M1, "one");
    uint8_t zeros[0x80] = { 0 };
    stub(w, b, ICBUF, "InlineCacheBuffer", zeros, sizeof zeros);
    stub(w, b, ICBUF_CALLEE, "callee", "\x74\x00\xc3", 3);
    uint8_t nm[0x10];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(calls - (NMR + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    load_at_nmr(w, b, nm, sizeof nm);
    return w;
}

/* Closes the trace of icbuf_site_trace (freeing dir) and decodes the thread
 * running the call into the callee and back twice: all of it decodes, the
 * callee included. */
static void decode_icbuf_site(jm_writer *w, jm_buf *b, char *dir, evlog *log)
{
    close_with_main_thread(w, b);
    dc_stats st;
    decode_call_and_back(dir, log, &st);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_geq(count_stub(log, "callee"), 2);
    remove_tree(dir);
    g_free(dir);
}

/* M1 at NMR calls a transition stub at ICBUF+0x20 (then jmp *%rax), and
 * the InlineCacheBuffer was empty when the agent took it. The stub's fill
 * (movabs rax; jmp to the callee, `jz; ret`) is recorded at t 9000, after
 * the thread ran it, in one record with a refill of the stub before it
 * (ICBUF, first filled at t 500): not a fill into zeros alone, which
 * would apply from the buffer's start. The call goes into no code, and the
 * retry tries the first record over its target. */
Test(decode, a_call_into_no_code_is_retried_with_the_first_fill_of_its_target)
{
    char *dir;
    jm_buf b;
    jm_writer *w = icbuf_site_trace(&dir, &b, ICBUF + 0x20);
    int32_t rel;
    uint8_t fill[0x30] = { 0x48, 0xb8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0xe9, 1, 2, 3, 4 };
    patch(w, &b, 500, ICBUF, fill, 15);                 /* another site's stub */
    fill[2] = 0x55;                                     /* ... refilled */
    memcpy(fill + 0x20, fill, 11);
    rel = (int32_t)(ICBUF_CALLEE - (ICBUF + 0x2f));
    memcpy(fill + 0x2b, &rel, 4);
    patch(w, &b, 9000, ICBUF, fill, 0x2f);
    evlog log = { .n = 0 };
    decode_icbuf_site(w, &b, dir, &log);
    cr_expect_geq(count_stub(&log, "InlineCacheBuffer"), 2);
}

/* Site A of M1 at NMR (then jmp *%rax) called CALLEE at load, and was
 * re-pointed at t 200 to the transition stub at ICBUF+0x40, filled at t 150
 * for it. Before the chunk (PSB at t 1000) HotSpot refilled the stub at
 * ICBUF+0x20, last filled at t 100 for another site (to ICBUF_CALLEE+0x10,
 * `jmp *%rax`, which fits no packet here), to go on to A's callee
 * (ICBUF_CALLEE, `jz; ret`), and pointed A at it. The watcher recorded
 * A's re-pointing at t 9000 and the stub's fill only by a later scan, at
 * t 20,000,000. */
Test(decode, a_site_re_pointed_at_a_stub_takes_its_later_scans_fill_over_another_sites)
{
    char *dir;
    jm_buf b;
    jm_writer *w = icbuf_site_trace(&dir, &b, CALLEE);
    stub(w, &b, ICBUF_CALLEE + 0x10, "other callee", "\xff\xe0", 2);
    stub(w, &b, CALLEE, "first callee", "\xff\xe0", 2);
    int32_t rel;
    /* movabs rax, imm64; jmp rel32: a transition stub at ICBUF + at to dest */
    uint8_t fill[15] = { 0x48, 0xb8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0xe9 };
    const struct { uint64_t tsc, at, dest; } fills[] = {
        { 100, 0x20, ICBUF_CALLEE + 0x10 }, { 150, 0x40, ICBUF_CALLEE + 0x10 },
        { 20000000, 0x20, ICBUF_CALLEE },
    };
    for (size_t i = 0; i < 3; i++) {
        if (i == 2) {       /* A's re-pointings, between the fills */
            rel = (int32_t)(ICBUF + 0x40 - (NMR + 5));
            patch(w, &b, 200, NMR + 1, &rel, 4);
            rel = (int32_t)(ICBUF + 0x20 - (NMR + 5));
            patch(w, &b, 9000, NMR + 1, &rel, 4);
        }
        rel = (int32_t)(fills[i].dest - (ICBUF + fills[i].at + sizeof fill));
        memcpy(fill + 11, &rel, 4);
        patch(w, &b, fills[i].tsc, ICBUF + fills[i].at, fill, sizeof fill);
    }
    evlog log = { .n = 0 };
    decode_icbuf_site(w, &b, dir, &log);
    cr_expect_eq(count_stub(&log, "other callee"), 0);
}

/* ---- code re-pointed long before its patch is recorded --------------------- */

#define NMC 0xb0000ull
#define STUB_A 0xb1000ull
#define STUB_B 0xb2000ull

/* M1 at NMC: call STUB_A; jmp *%rax. STUB_A is je +0; ret (a TNT bit, then a
 * return), STUB_B a plain ret. While the thread is out of the traced code
 * (after its jmp *%rax leaves it), HotSpot re-points the call at STUB_B; the
 * patch watcher records that only at t 9000. */
static char *make_repoint_trace(void)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    stub(w, &b, STUB_A, "a", "\x74\x00\xc3", 3);
    stub(w, &b, STUB_B, "b", "\xc3", 1);
    uint8_t nm[16];
    memset(nm, 0xcc, sizeof nm);
    int32_t rel = (int32_t)(STUB_A - (NMC + 5));
    nm[0] = 0xe8;
    memcpy(nm + 1, &rel, 4);
    memcpy(nm + 5, "\xff\xe0", 2);
    jm_put_u64(&b, NMC); jm_put_u64(&b, sizeof nm); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 3); jm_put_u32(&b, 0);
    emit(w, JM_NMETHOD_LOAD, 100, &b, nm, sizeof nm);
    rel = (int32_t)(STUB_B - (NMC + 5));
    patch(w, &b, 9000, NMC + 1, &rel, 4);
    close_with_main_thread(w, &b);
    return dir;
}

/* The watcher recorded both resolutions, and a change after them, in one
 * record: it is cut into the two sites and the rest, and each site is
 * resolved when the thread goes through its resolver. */
Test(model, a_record_resolving_several_sites_is_cut)
{
    char *dir = make_resolve_trace_as(true);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_assert_eq(m->npatches, 4);
    cr_expect_eq(m->patches_cut, 1);
    cr_expect_eq(m->call_site_patches, 2);
    cr_expect_eq(m->patches[0].site, NMR);
    cr_expect_eq(m->patches[0].vaddr, NMR + 1);
    cr_expect_eq(m->patches[0].new_target, CALLEE);
    cr_expect_eq(m->patches[1].site, NMR + 5);
    cr_expect_eq(m->patches[1].vaddr, NMR + 6);
    cr_expect_eq(m->patches[1].new_target, NMR + 0x20);
    cr_expect_eq(m->patches[2].site, 0);
    cr_expect_eq(m->patches[2].vaddr, NMR + 0x10, "only the changed byte");
    cr_expect_eq(m->patches[2].size, 1);
    cr_expect_eq(m->patches[3].site, 0, "a stub fill is no call site");
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* An inline-cache site resolved in a record that also changes two bytes
 * 0x20 apart: the site's piece holds the cached value and the rel32, and
 * each other change is a piece of its own (runs further apart than a static
 * call stub are not joined), every piece with the bytes the record wrote. */
Test(model, a_cut_record_keeps_its_bytes_piece_by_piece)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    uint8_t nm[0x60];
    ic_site(w, &b, nm, sizeof nm);
    load_at_nmr(w, &b, nm, sizeof nm);
    uint8_t rec[0x50];                 /* NMR+2 .. NMR+0x52 */
    memcpy(rec, nm + 2, sizeof rec);
    memcpy(rec, "\x40\x10\0\0\0\0\0\0", 8);       /* the cached klass */
    int32_t rel = (int32_t)(CALLEE - (NMR + 15));
    memcpy(rec + 9, &rel, 4);
    rec[0x30 - 2] = 0xcc;
    rec[0x50 - 2] = 0xcc;
    patch(w, &b, 9000, NMR + 2, rec, sizeof rec);
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);

    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    cr_assert_eq(m->npatches, 3);
    cr_expect_eq(m->patches_cut, 1);
    cr_expect_eq(m->call_site_patches, 1);
    const uint64_t vaddr[3] = { NMR + 2, NMR + 0x30, NMR + 0x50 }, size[3] = { 13, 1, 1 };
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(m->patches[i].vaddr, vaddr[i], "piece %d", i);
        cr_expect_eq(m->patches[i].size, size[i], "piece %d", i);
        cr_expect_eq(m->patches[i].code_offset - m->patches[0].code_offset,
                     m->patches[i].vaddr - (NMR + 2), "piece %d: the record's bytes", i);
        cr_expect_eq(m->patches[i].tsc, 9000);
    }
    cr_expect_eq(m->patches[0].site, NMR + 10);
    cr_expect_eq(m->patches[0].old_target, RS_VIRT);
    cr_expect_eq(m->patches[0].new_target, CALLEE);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

Test(decode, sites_resolved_in_one_record_resolve_one_by_one)
{
    expect_sites_resolved_on_first_pass(true);
}

Test(decode, code_re_pointed_before_its_record_is_decoded_again_with_it)
{
    char *dir = make_repoint_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMC);
    /* first pass through STUB_A: its je, its return */
    pkt(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 1 } });
    tip(&e, ppt_tip, NMC + 5);
    tip(&e, ppt_tip_pgd, 0x100000);     /* jmp *%rax into the VM */
    tip(&e, ppt_tip_pge, NMC);          /* back: the site now calls STUB_B */
    tip(&e, ppt_tip, NMC + 5);          /* STUB_B returns */
    tip(&e, ppt_tip_pgd, 0x100000);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);

    evlog log = { .n = 0 };
    dc_stats st;
    decode(dir, &log, &st);
    /* With the recorded bytes only, the second pass would take STUB_A's je
     * against a TIP and lose the rest of the stream. */
    cr_expect_eq(count_stub(&log, "a"), 1);
    cr_expect_eq(count_stub(&log, "b"), 1);
    cr_expect_eq(st.gaps[DC_GAP_DECODE] + st.gaps[DC_GAP_NOCODE], 0);
    cr_expect_geq(st.retries, 1);
    cr_expect_eq(st.retries_kept, 1, "kept %" PRIu64 " of %" PRIu64, st.retries_kept, st.retries);
    remove_tree(dir);
    g_free(dir);
}

/* ---- parallel decoding gives the same events ------------------------------- */

typedef struct evvec {
    GArray *ev;               /* dc_event */
} evvec;

static int collect_all(const dc_event *ev, void *vp)
{
    g_array_append_val(((evvec *)vp)->ev, *ev);
    return 0;
}

/* The same event; times too if with_time. */
static bool same_event(const dc_event *a, const dc_event *b, bool with_time)
{
    if (with_time && (a->tsc != b->tsc || a->end_tsc != b->end_tsc || a->offset != b->offset))
        return false;
    return a->kind == b->kind && a->flags == b->flags && a->ip == b->ip &&
           a->opcode == b->opcode && a->raw == b->raw && a->exit_ip == b->exit_ip &&
           a->method_id == b->method_id && a->bci == b->bci && a->depth == b->depth &&
           a->code == b->code && a->desc == b->desc && a->reason == b->reason &&
           a->error == b->error && (a->kind != DC_GAP || a->offset == b->offset) &&
           a->end_offset == b->end_offset && a->lost_bytes == b->lost_bytes;
}

/* Decodes DIR's stream once per option set and checks that every decode
 * gives the first one's events and counts. Returns the first one's stats.
 * Times are compared between decodes cut into the same chunks: at the PSB
 * that starts a chunk, its decoder has that PSB's time where one that read
 * on from the chunk before still reports the time before it (libipt gives
 * a packet's time only once a later query consumed it), so the first events
 * after a chunk boundary may carry the (later) PSB time instead. So are the
 * stream offsets of events other than gaps (the decoder's position after a
 * block): there the two decoders have read ahead by other packets. */
static dc_stats decode_same(const char *dir, const dc_options *opts, size_t nopts,
                            uint64_t *chunks)
{
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    char *pt = g_build_filename(dir, "pt", "tid-4242.pt", NULL);
    char *idx = g_build_filename(dir, "pt", "tid-4242.idx", NULL);
    dc_trace_info info = { 0 };
    evvec ref = { g_array_new(FALSE, FALSE, sizeof(dc_event)) };
    dc_stats rst = { 0 };
    *chunks = 0;
    for (size_t i = 0; i < nopts; i++) {
        evvec got = { g_array_new(FALSE, FALSE, sizeof(dc_event)) };
        dc_output out = { .sink = collect_all, .ctx = i ? &got : &ref };
        dc_stats st;
        cr_assert_eq(dc_decode_stream_opts(&(dc_trace){ m, cache, &info }, pt, idx, &out,
                                           &opts[i], &st, err, sizeof err), 0, "%s", err);
        if (!i) {
            rst = st;
        } else {
            cr_expect_eq(got.ev->len, ref.ev->len, "options %zu: %u events, not %u", i,
                         got.ev->len, ref.ev->len);
            for (guint k = 0; k < got.ev->len && k < ref.ev->len; k++) {
                const dc_event *a = &g_array_index(ref.ev, dc_event, k);
                const dc_event *b = &g_array_index(got.ev, dc_event, k);
                if (!same_event(a, b, opts[i].chunk_bytes == opts[0].chunk_bytes)) {
                    cr_expect_fail("options %zu: event %u differs: %s at 0x%" PRIx64
                                   " tsc %" PRIu64 " flags %x bci %d depth %u off %" PRIu64
                                   " vs %s at 0x%" PRIx64 " tsc %" PRIu64 " flags %x bci %d"
                                   " depth %u off %" PRIu64, i, k, dc_kind_name(a->kind),
                                   a->ip, a->tsc, a->flags, a->bci, a->depth, a->offset,
                                   dc_kind_name(b->kind), b->ip, b->tsc, b->flags, b->bci,
                                   b->depth, b->offset);
                    break;
                }
            }
            /* Not st.blocks: libipt's block cache, shared through the
             * section cache, may cut the same instructions into blocks
             * differently once warm. */
            cr_expect_eq(st.insns, rst.insns, "options %zu", i);
            cr_expect_eq(st.skipped_bytes, rst.skipped_bytes, "options %zu", i);
            cr_expect_eq(st.enables, rst.enables, "options %zu", i);
            cr_expect_eq(st.patches_resolved, rst.patches_resolved, "options %zu", i);
            for (int g = 0; g < 5; g++)
                cr_expect_eq(st.gaps[g], rst.gaps[g], "options %zu: gaps of reason %d", i, g);
            if (st.chunks > *chunks)
                *chunks = st.chunks;
        }
        g_array_free(got.ev, TRUE);
    }
    g_array_free(ref.ev, TRUE);
    g_free(pt);
    g_free(idx);
    di_cache_free(cache);
    dm_free(m);
    return rst;
}

/* Decodes DIR's stream whole and in the ranges cut at cuts[0 .. ncuts)
 * (byte offsets, ascending), chunk_bytes each time: the ranges' events, one
 * range after the other, must be the whole decode's, times and offsets too
 * (the chunks are the same). Returns how many ranges held a chunk. */
static int decode_ranges(const char *dir, uint64_t chunk_bytes, const uint64_t *cuts,
                         size_t ncuts)
{
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    char *pt = g_build_filename(dir, "pt", "tid-4242.pt", NULL);
    char *idx = g_build_filename(dir, "pt", "tid-4242.idx", NULL);
    dc_trace_info info = { 0 };
    evvec whole = { g_array_new(FALSE, FALSE, sizeof(dc_event)) };
    evvec parts = { g_array_new(FALSE, FALSE, sizeof(dc_event)) };
    dc_stats st;
    dc_options o = { .threads = 1, .chunk_bytes = chunk_bytes };
    dc_output out = { .sink = collect_all, .ctx = &whole };
    cr_assert_eq(dc_decode_stream_opts(&(dc_trace){ m, cache, &info }, pt, idx, &out, &o, &st,
                                       err, sizeof err),
                 0, "%s", err);
    int held = 0;
    out.ctx = &parts;
    for (size_t i = 0; i <= ncuts; i++) {
        o.from = i ? cuts[i - 1] : 0;
        o.to = i < ncuts ? cuts[i] : 0;
        cr_assert_eq(dc_decode_stream_opts(&(dc_trace){ m, cache, &info }, pt, idx, &out, &o, &st,
                                           err, sizeof err), 0, "%s", err);
        held += st.chunks > 0;
    }
    cr_expect_eq(parts.ev->len, whole.ev->len, "ranges: %u events, whole: %u", parts.ev->len,
                 whole.ev->len);
    for (guint k = 0; k < parts.ev->len && k < whole.ev->len; k++) {
        const dc_event *a = &g_array_index(whole.ev, dc_event, k);
        const dc_event *b = &g_array_index(parts.ev, dc_event, k);
        if (!same_event(a, b, true)) {
            cr_expect_fail("event %u differs: %s at 0x%" PRIx64 " tsc %" PRIu64 " flags %x"
                           " exit 0x%" PRIx64 " off %" PRIu64 " vs %s at 0x%" PRIx64 " tsc %"
                           PRIu64 " flags %x exit 0x%" PRIx64 " off %" PRIu64, k,
                           dc_kind_name(a->kind), a->ip, a->tsc, a->flags, a->exit_ip,
                           a->offset, dc_kind_name(b->kind), b->ip, b->tsc, b->flags,
                           b->exit_ip, b->offset);
            break;
        }
    }
    g_array_free(whole.ev, TRUE);
    g_array_free(parts.ev, TRUE);
    g_free(pt);
    g_free(idx);
    di_cache_free(cache);
    dm_free(m);
    return held;
}

/* A long random walk through make_trace's code (interpreter templates, the
 * compiled method across its patch, unload and reuse, tracing off and on),
 * with PSBs: the events must not depend on how the stream is cut into
 * chunks or on the number of threads. With damage (overflows, junk) a chunk
 * boundary may change what libipt makes of the damage next to it (an OVF
 * just before a PSB, a decoder that is already off track at the PSB), so
 * there only the thread count must not matter. */
Test(decode, parallel_chunks_give_the_sequential_events)
{
    char *dir = make_trace();
    GRand *rnd = g_rand_new_with_seed(2024);
    static const dc_options exact[] = {
        { .threads = 1, .chunk_bytes = 1ull << 40 },   /* one piece: the plain decoder */
        { .threads = 1, .chunk_bytes = 64 },
        { .threads = 4, .chunk_bytes = 64 },
        { .threads = 2, .chunk_bytes = 300 },
        { .threads = 3, .chunk_bytes = 1 },
    };
    static const dc_options same_chunks[] = {
        { .threads = 1, .chunk_bytes = 64 },
        { .threads = 2, .chunk_bytes = 64 },
        { .threads = 4, .chunk_bytes = 64 },
    };
    for (int round = 0; round < 8; round++) {
        bool damage = round >= 4;
        penc e;
        penc_init(&e);
        uint64_t t = 1000;
        uint64_t at = INTERP;
        psb(&e, t, at);
        for (int i = 0; i < 2500; i++) {
            uint32_t r = g_rand_int_range(rnd, 0, 100);
            if (r < 70) {
                static const uint64_t targets[] = { INTERP, INTERP + 0x20, INTERP + 0x40,
                                                    INTERP + 0x60, NM, NM + 1 };
                at = targets[g_rand_int_range(rnd, 0, 6)];
                tip(&e, ppt_tip, at);
                if (at == INTERP + 0x60) {     /* imul calls the stub, which returns */
                    at = INTERP + 0x66;
                    tip(&e, ppt_tip, at);
                }
            } else if (r < 85) {
                /* Time moves on before the PSB (hardware's MTCs would say
                 * so): a PSB that starts a chunk then tells that chunk's
                 * decoder no other time than a decoder reading on has. */
                t += (uint64_t)g_rand_int_range(rnd, 1, 40);
                tsc(&e, t);
                psb(&e, t, at);
            } else if (r < 88 && damage) {
                pkt(&e, (struct pt_packet){ .type = ppt_ovf });
                t += 5;
                psb(&e, t, at);
            } else if (r < 91 && damage) {
                /* junk: decoding fails and resumes at the next PSB */
                uint8_t junk[8];
                for (size_t k = 0; k < sizeof junk; k++)
                    junk[k] = (uint8_t)g_rand_int(rnd);
                uint64_t off = 0;
                pt_enc_get_offset(e.enc, &off);
                memcpy(e.buf + off, junk, sizeof junk);
                pt_enc_sync_set(e.enc, off + sizeof junk);
            } else if (r < 94) {
                tip(&e, ppt_tip_pgd, 0);
                tip(&e, ppt_tip_pge, at);
            } else {
                t += 3;
                tsc(&e, t);
            }
            if (i == 1250)
                t = 5500;      /* past M1's unload: the image is rebuilt */
        }
        size_t n = penc_end(&e);
        write_stream(dir, e.buf, n);
        uint64_t chunks;
        dc_stats st = damage ? decode_same(dir, same_chunks, 3, &chunks)
                             : decode_same(dir, exact, 5, &chunks);
        cr_expect_gt(st.blocks, 1000, "round %d: the walk decodes", round);
        cr_expect_gt(chunks, 50, "round %d: cut into many chunks", round);
        if (!damage) {
            /* ranges of the stream (sharded decoding) give its events */
            uint64_t cuts[6];
            for (int c = 0; c < 6; c++)
                cuts[c] = (uint64_t)(c + 1) * n / 7 + (uint64_t)g_rand_int_range(rnd, 0, 64);
            cr_expect_gt(decode_ranges(dir, 300, cuts, 6), 5, "round %d: ranges hold chunks",
                         round);
        }
    }
    g_rand_free(rnd);
    remove_tree(dir);
    g_free(dir);
}

/* A chunk decodes as the stream would from its PSB on: what the chunk
 * before applied ahead of its record time (here a call-site resolution whose
 * patch is recorded much later) is not handed on, so no chunk waits for the
 * one before it. Where the trace contradicts the recorded code, a retry
 * finds the resolution again (retry.c); here the fixture's resolver is a
 * bare indirect jump that nothing contradicts, so the second chunk goes
 * through it, with any number of threads. */
Test(decode, a_chunk_decodes_as_the_stream_would_from_its_psb)
{
    char *dir = make_resolve_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, NMR);
    tip(&e, ppt_tip, CALLEE);
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, CALLEE);
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);
    uint64_t boundary = 0;
    pt_enc_get_offset(e.enc, &boundary);
    psb(&e, 1000, NMR);                 /* a chunk boundary */
    tip(&e, ppt_tip, NMR + 5);
    tip(&e, ppt_tip, NMR + 10);
    tip(&e, ppt_tip, NMR);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);
    static const dc_options opts[] = {
        { .threads = 1, .chunk_bytes = 16 },
        { .threads = 2, .chunk_bytes = 16 },
        { .threads = 3, .chunk_bytes = 16 },
    };
    uint64_t chunks;
    dc_stats st = decode_same(dir, opts, 3, &chunks);
    cr_expect_eq(st.chunks, 2);
    evvec cut = { g_array_new(FALSE, FALSE, sizeof(dc_event)) };
    decode_to(dir, &opts[0], collect_all, &cut, &st);

    /* the second chunk's bytes alone */
    write_stream(dir, e.buf + boundary, n - boundary);
    evvec alone = { g_array_new(FALSE, FALSE, sizeof(dc_event)) };
    static const dc_options whole = { .threads = 1, .chunk_bytes = 1ull << 40 };
    decode_to(dir, &whole, collect_all, &alone, &st);
    cr_assert_gt(alone.ev->len, 2);
    cr_assert_gt(cut.ev->len, alone.ev->len);
    size_t skip = cut.ev->len - alone.ev->len;
    size_t resolver = 0;
    /* (From the second event on: the first one's position is told from the
     * flow before it, which the stream alone does not have.) */
    for (guint k = 1; k < alone.ev->len; k++) {
        const dc_event *a = &g_array_index(alone.ev, dc_event, k);
        const dc_event *b = &g_array_index(cut.ev, dc_event, skip + k);
        cr_expect(a->kind == b->kind && a->ip == b->ip && a->bci == b->bci,
                  "event %u of the second chunk: %s at 0x%" PRIx64 ", alone %s at 0x%" PRIx64, k,
                  dc_kind_name(b->kind), b->ip, dc_kind_name(a->kind), a->ip);
        resolver += a->kind == DC_STUB && a->ip == RS_STATIC;
    }
    cr_expect_eq(resolver, 1, "the second chunk starts from the recorded code");
    g_array_free(cut.ev, TRUE);
    g_array_free(alone.ev, TRUE);
    remove_tree(dir);
    g_free(dir);
}

/* Several streams in one call: each gets the events it gets alone, all of
 * a stream's callbacks come before the next stream's, and a stream that
 * cannot be read fails alone. */
typedef struct multi_log {
    GString *order;
    evvec ev;
} multi_log;

static int multi_event(const dc_event *ev, void *vp)
{
    multi_log *l = vp;
    g_array_append_val(l->ev.ev, *ev);
    g_string_append_c(l->order, 'e');
    return 0;
}

static void multi_started(void *vp)
{
    g_string_append_c(((multi_log *)vp)->order, '<');
}

static void multi_finished(const dc_stats *st, int rc, const char *err, void *vp)
{
    (void)st;
    (void)err;
    g_string_append_printf(((multi_log *)vp)->order, ">%d|", rc);
}

Test(decode, several_streams_in_one_call)
{
    char *dir = make_trace();
    penc e;
    penc_init(&e);
    psb(&e, 1000, INTERP);
    for (int i = 0; i < 400; i++) {
        tip(&e, ppt_tip, (i % 3) ? INTERP + 0x20 : NM);
        if (i % 10 == 0) {
            tsc(&e, 1000 + (uint64_t)i);
            psb(&e, 1000 + (uint64_t)i, (i % 3) ? INTERP + 0x20 : NM);
        }
    }
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    char *pt = g_build_filename(dir, "pt", "tid-4242.pt", NULL);
    char *missing = g_build_filename(dir, "pt", "tid-1.pt", NULL);
    /* alone */
    evvec alone = { g_array_new(FALSE, FALSE, sizeof(dc_event)) };
    dc_output out = { .sink = collect_all, .ctx = &alone };
    dc_stats st;
    cr_assert_eq(dc_decode_stream(&(dc_trace){ m, cache, NULL }, pt, NULL, &out, &st, err,
                                  sizeof err), 0);
    cr_assert_gt(alone.ev->len, 100);
    /* together: the stream, a missing one, the stream again */
    const char *paths[3] = { pt, missing, pt };
    multi_log logs[3];
    dc_stream ss[3];
    dc_stats sts[3];
    GString *order = g_string_new("");
    for (int i = 0; i < 3; i++) {
        logs[i] = (multi_log){ order, { g_array_new(FALSE, FALSE, sizeof(dc_event)) } };
        ss[i] = (dc_stream){ .pt_path = paths[i], .st = &sts[i],
                             .out = { .sink = multi_event, .started = multi_started,
                                      .finished = multi_finished, .ctx = &logs[i] } };
    }
    dc_options opt = { .threads = 3, .chunk_bytes = 100 };
    cr_expect_eq(dc_decode_streams(&(dc_trace){ m, cache, NULL }, ss, 3, &opt), -1);
    cr_expect_eq(ss[0].rc, 0);
    cr_expect_eq(ss[1].rc, -1);
    cr_expect(strstr(ss[1].err, "tid-1.pt") != NULL, "%s", ss[1].err);
    cr_expect_eq(ss[2].rc, 0);
    cr_expect_gt(sts[0].chunks, 5);
    for (int i = 0; i < 3; i += 2) {
        cr_expect_eq(logs[i].ev.ev->len, alone.ev->len, "stream %d", i);
        for (guint k = 0; k < alone.ev->len && k < logs[i].ev.ev->len; k++)
            if (!same_event(&g_array_index(alone.ev, dc_event, k),
                            &g_array_index(logs[i].ev.ev, dc_event, k), false)) {
                cr_expect_fail("stream %d: event %u differs", i, k);
                break;
            }
    }
    /* <e...e>0| >-1| <e...e>0| */
    GString *want = g_string_new("<");
    for (guint k = 0; k < alone.ev->len; k++)
        g_string_append_c(want, 'e');
    g_string_append(want, ">0|>-1|<");
    for (guint k = 0; k < alone.ev->len; k++)
        g_string_append_c(want, 'e');
    g_string_append(want, ">0|");
    cr_expect_str_eq(order->str, want->str);
    g_string_free(want, TRUE);
    g_string_free(order, TRUE);
    for (int i = 0; i < 3; i++)
        g_array_free(logs[i].ev.ev, TRUE);
    g_array_free(alone.ev, TRUE);
    g_free(pt);
    g_free(missing);
    di_cache_free(cache);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}

/* Code the thread cannot have run: a compiled method patched into a jump
 * to itself (as HotSpot's static call stub jumps to itself until the
 * resolution that fills it), entered by the trace and followed by more
 * trace. libipt follows such a cycle without reading trace, block after
 * full block of 65535 instructions, forever. Decoding must end it with a
 * decode-error gap and go on after the next PSB, also when called on a
 * thread with a small stack (chunks are decoded on a thread with a stack
 * of their own: libipt's block cache recursion, one frame per cache entry,
 * went deeper than 8 MiB on a stub like this one in a 958 MB trace). */
#define SPIN 0x90000ull
#define SMALL_STACK ((size_t)192 << 10)

typedef struct spin_run {
    const char *dir;
    evlog log;
    dc_stats st;
    int rc;
    char err[512];
} spin_run;

static void *spin_decode(void *p)
{
    spin_run *r = p;
    r->rc = -2;
    dm_model *m = dm_load(r->dir, r->err, sizeof r->err);
    di_cache *cache = m ? di_cache_new(m, r->err, sizeof r->err) : NULL;
    if (cache) {
        char *pt = g_build_filename(r->dir, "pt", "tid-4242.pt", NULL);
        dc_trace_info info = { 0 };
        dc_output out = { .sink = collect, .ctx = &r->log };
        r->rc = dc_decode_stream(&(dc_trace){ m, cache, &info }, pt, NULL, &out, &r->st, r->err,
                                 sizeof r->err);
        g_free(pt);
    }
    di_cache_free(cache);
    dm_free(m);
    return NULL;
}

Test(decode, a_trace_free_loop_is_a_gap_not_a_crash_or_a_hang, .timeout = 60)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    /* SPIN+0x10: nop; jmp *%rax. SPIN: nops, patched at t 500 into a jump
     * to itself (a patch is a small section over the method's). */
    uint8_t code[32];
    memset(code, 0x90, sizeof code);
    memcpy(code + 0x11, "\xff\xe0", 2);
    jm_put_u64(&b, SPIN); jm_put_u64(&b, sizeof code); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 4); jm_put_u32(&b, 0);
    emit(w, JM_NMETHOD_LOAD, 10, &b, code, sizeof code);
    jm_put_u64(&b, SPIN); jm_put_u64(&b, 5); jm_put_u64(&b, 0);
    emit(w, JM_CODE_PATCH, 500, &b, "\xe9\xfb\xff\xff\xff", 5);
    close_with_main_thread(w, &b);

    penc e;
    penc_init(&e);
    psb(&e, 1000, SPIN);
    psb(&e, 2000, SPIN + 0x10);         /* read ahead by the stuck decoder */
    tip(&e, ppt_tip, SPIN + 0x10);
    psb(&e, 3000, SPIN + 0x10);         /* where decoding resumes */
    tip(&e, ppt_tip, SPIN + 0x10);
    size_t n = penc_end(&e);
    write_stream(dir, e.buf, n);

    /* on a thread whose stack is smaller than libipt's recursion here */
    spin_run *r = g_new0(spin_run, 1);
    r->dir = dir;
    pthread_attr_t attr;
    pthread_t t;
    cr_assert_eq(pthread_attr_init(&attr), 0);
    cr_assert_eq(pthread_attr_setstacksize(&attr, SMALL_STACK), 0);
    cr_assert_eq(pthread_create(&t, &attr, spin_decode, r), 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    cr_assert_eq(r->rc, 0, "%s", r->err);
    const evlog *log = &r->log;
    size_t gap = log->n, after = 0;
    for (size_t i = 0; i < log->n; i++) {
        if (log->ev[i].kind == DC_GAP && gap == log->n)
            gap = i;
        else if (gap < log->n && log->ev[i].code && log->ev[i].ip >= SPIN + 0x10)
            after++;        /* (after a resync the position, not an entry) */
    }
    cr_assert_lt(gap, log->n, "no gap in %zu events", log->n);
    cr_expect_eq(log->ev[gap].reason, DC_GAP_DECODE);
    cr_expect_eq(log->ev[gap].error, -pte_bad_image);
    cr_expect_eq(r->st.gaps[DC_GAP_DECODE], 1);
    cr_expect_geq(after, 1, "decoding goes on after the next PSB");
    /* a few full blocks at most before it gives up */
    cr_expect_leq(r->st.insns, 8 * 65535ull, "%" PRIu64 " instructions", r->st.insns);
    g_free(r);
    remove_tree(dir);
    g_free(dir);
}

/* C2's unrolled main loop advances its induction variable once per pass, by
 * the copies: the step is the constant added to what the jump back
 * compares, also through a stack slot. A loop whose compared register was
 * reloaded from elsewhere after the add has none. */
Test(jitpath, an_unrolled_loop_steps_by_the_copies_of_its_body)
{
    char *dir;
    jm_writer *w = open_trace_dir(&dir);
    jm_buf b;
    jm_buf_init(&b);
    method(w, &b, M1, "one");
    static const uint8_t code[] = {
        /* +0: mov r11d,[rsp+0x68]; add r11d,16; mov [rsp+0x68],r11d; nop;
         * cmp r11d,[rsp+0x7c]; jl +0 */
        0x44, 0x8b, 0x5c, 0x24, 0x68, 0x41, 0x83, 0xc3, 0x10, 0x44, 0x89, 0x5c, 0x24, 0x68,
        0x90, 0x44, 0x3b, 0x5c, 0x24, 0x7c, 0x0f, 0x8c, 0xe6, 0xff, 0xff, 0xff,
        /* +26: inc r10d; cmp ebx,r10d; jg +26 (the limit first) */
        0x41, 0xff, 0xc2, 0x44, 0x39, 0xd3, 0x7f, 0xf8,
        /* +34: add r10d,8; mov r10d,[rsp]; cmp r10d,ebx; jl +34 */
        0x41, 0x83, 0xc2, 0x08, 0x44, 0x8b, 0x14, 0x24, 0x41, 0x39, 0xda, 0x7c, 0xf3,
        /* +47: lea r9d,[r9-4]; cmp r9d,ebx; jge +47 */
        0x45, 0x8d, 0x49, 0xfc, 0x41, 0x39, 0xd9, 0x7d, 0xf7,
        /* +56: the counter spilled: mov r11d,[rsp+0x58]; add r11d,16;
         * mov [rsp+0x58],r11d; mov r9d,[rsp+0x58]; cmp r9d,[rsp+0x64]; jl +56 */
        0x44, 0x8b, 0x5c, 0x24, 0x58, 0x41, 0x83, 0xc3, 0x10, 0x44, 0x89, 0x5c, 0x24, 0x58,
        0x44, 0x8b, 0x4c, 0x24, 0x58, 0x44, 0x3b, 0x4c, 0x24, 0x64, 0x7c, 0xe6,
        0xc3,
    };
    jm_put_u64(&b, NM); jm_put_u64(&b, sizeof code); jm_put_u64(&b, 0);
    jm_put_u64(&b, M1); jm_put_i32(&b, 4); jm_put_u32(&b, 1);
    jm_put_u64(&b, NM); jm_put_u32(&b, 1); jm_put_u64(&b, M1); jm_put_i32(&b, 0);
    emit(w, JM_NMETHOD_LOAD, 10, &b, code, sizeof code);
    close_with_main_thread(w, &b);
    char err[512];
    dm_model *m = dm_load(dir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    const dm_code *v = dm_code_at(m, NM, 100);
    cr_assert_not_null(v);
    jp_cache *jc = jp_new(m);
    cr_assert_not_null(jc);
    cr_expect_eq(jp_loop_step(jc, v, NM), 16);
    cr_expect_eq(jp_loop_step(jc, v, NM), 16, "cached");
    cr_expect_eq(jp_loop_step(jc, v, NM + 26), 1);
    cr_expect_eq(jp_loop_step(jc, v, NM + 34), 0, "reloaded after the add");
    cr_expect_eq(jp_loop_step(jc, v, NM + 47), -4);
    cr_expect_eq(jp_loop_step(jc, v, NM + 56), 16, "through its stack slot");
    cr_expect_eq(jp_loop_step(jc, v, NM + 1), 0, "no jump back to it");
    cr_expect_eq(jp_loop_step(jc, v, NM + 0x1000), 0, "outside the version");
    jp_free(jc);
    dm_free(m);
    remove_tree(dir);
    g_free(dir);
}
