/* Per-CPU traces on small synthetic streams made with libipt's encoder:
 * the emulated per-CPU writer (collector/percpu.h) and the decoder's split
 * by context switches (decoder/percpu.h). */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <intel-pt.h>
#include <linux/perf_event.h>

#include "collector/percpu.h"
#include "common/auxidx.h"
#include "common/jmeta.h"
#include "decoder/decode.h"
#include "decoder/percpu.h"

#define INTERP 0x10000ull
#define OUTSIDE 0x99999ull
#define PID 77u

/* ---- building streams ----------------------------------------------------- */

typedef struct penc {
    uint8_t buf[1 << 14];
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

static void ipp(penc *e, enum pt_packet_type t, enum pt_ip_compression ipc, uint64_t ip)
{
    struct pt_packet p = { .type = t };
    p.payload.ip.ipc = ipc;
    p.payload.ip.ip = ip;
    pkt(e, p);
}

static void tsc(penc *e, uint64_t t)
{
    struct pt_packet p = { .type = ppt_tsc };
    p.payload.tsc.tsc = t;
    pkt(e, p);
}

static void mode(penc *e)
{
    struct pt_packet m = { .type = ppt_mode };
    m.payload.mode.leaf = pt_mol_exec;
    m.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    pkt(e, m);
}

/* PSB+; fup_ip 0: tracing is off (outside the filter). */
static void psb(penc *e, uint64_t t, uint64_t fup_ip)
{
    pkt(e, (struct pt_packet){ .type = ppt_psb });
    tsc(e, t);
    mode(e);
    if (fup_ip) ipp(e, ppt_fup, pt_ipc_sext_48, fup_ip);
    pkt(e, (struct pt_packet){ .type = ppt_psbend });
}

/* Entering the filter as the emulator writes it: TSC, MODE.Exec, TIP.PGE. */
static void enter(penc *e, uint64_t t, enum pt_ip_compression ipc, uint64_t ip)
{
    tsc(e, t);
    mode(e);
    ipp(e, ppt_tip_pge, ipc, ip);
}

static size_t penc_end(penc *e)
{
    uint64_t off = 0;
    pt_enc_get_offset(e->enc, &off);
    pt_free_encoder(e->enc);
    return (size_t)off;
}

/* Plain stdio: g_file_set_contents syncs to disk, slow on a busy machine. */
static void put_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char *path = g_build_filename(dir, name, NULL);
    put_file(path, p, n);
    g_free(path);
}

/* One perf record with the sample_id ptrec asks for. */
static void rec(GByteArray *a, uint32_t type, uint16_t misc, const void *body, size_t blen,
                uint32_t tid, uint64_t time, uint32_t cpu)
{
    struct perf_event_header h = { .type = type, .misc = misc,
                                   .size = (uint16_t)(8 + blen + 40) };
    g_byte_array_append(a, (const guint8 *)&h, 8);
    if (blen) g_byte_array_append(a, body, (guint)blen);
    uint32_t ids[2] = { PID, tid }, c[2] = { cpu, 0 };
    uint64_t id = tid;
    g_byte_array_append(a, (const guint8 *)ids, 8);
    g_byte_array_append(a, (const guint8 *)&time, 8);
    g_byte_array_append(a, (const guint8 *)&id, 8);
    g_byte_array_append(a, (const guint8 *)c, 8);
    g_byte_array_append(a, (const guint8 *)&id, 8);
}

static void write_idx(const char *dir, const char *name, const auxidx_rec *r, size_t n)
{
    char *path = g_build_filename(dir, name, NULL);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint32_t v[2] = { AUXIDX_VERSION, AUXIDX_RECORD_SIZE };
    fwrite(AUXIDX_MAGIC, 1, 8, f);
    fwrite(v, 4, 2, f);
    for (size_t i = 0; i < n; i++) fwrite(&r[i], sizeof r[i], 1, f);
    fclose(f);
    g_free(path);
}

/* A per-thread stream as the emulated backend writes it: .pt, .idx (one
 * chunk, or a loss at `cut`), .sb (ITRACE_START, EXIT). */
static void thread_stream(const char *dir, uint32_t tid, const uint8_t *p, size_t n,
                          uint64_t cut, uint64_t lost)
{
    char name[64];
    snprintf(name, sizeof name, "pt/tid-%u.pt", tid);
    write_file(dir, name, p, n);
    auxidx_rec r[2] = { { .offset = 0, .size = cut ? cut : n, .flags = 0 } };
    size_t nr = 1;
    if (cut) {
        r[0].flags = AUXIDX_TRUNCATED;
        r[0].lost_bytes = lost;
        r[1] = (auxidx_rec){ .offset = cut, .size = n - cut };
        nr = 2;
    }
    snprintf(name, sizeof name, "pt/tid-%u.idx", tid);
    write_idx(dir, name, r, nr);
    GByteArray *a = g_byte_array_new();
    uint32_t is[2] = { PID, tid };
    rec(a, PERF_RECORD_ITRACE_START, 0, is, 8, tid, 1, 0);
    uint32_t ex[6] = { PID, 1, tid, 1, 0, 0 };
    rec(a, PERF_RECORD_EXIT, 0, ex, 24, tid, 100000, 0);
    snprintf(name, sizeof name, "sideband/tid-%u.sb", tid);
    write_file(dir, name, a->data, a->len);
    g_byte_array_free(a, TRUE);
}

static void emit_meta(jm_writer *w, uint16_t type, uint64_t t, jm_buf *b, const void *code,
                      uint64_t n)
{
    cr_assert(!b->failed);
    cr_assert_eq(jm_write(w, type, t, b->data, (uint32_t)b->len, code, n), 0);
    b->len = 0;
}

static void codelet(jm_writer *w, jm_buf *b, uint64_t lo, uint64_t hi, int32_t bc, const char *d)
{
    jm_put_u64(b, lo);
    jm_put_u64(b, hi);
    jm_put_i32(b, bc);
    jm_put_str(b, d);
    emit_meta(w, JM_CODELET, 10, b, NULL, 0);
}

/* A trace directory with an interpreter: iload_0 at INTERP (nop; nop;
 * jmp *%rax) and imul at INTERP+0x60 (nop; call OUTSIDE; jmp *%rax). */
static char *make_dir(void)
{
    char *dir = g_dir_make_tmp("jpt-percpu-test-XXXXXX", NULL);
    cr_assert_not_null(dir);
    for (const char *const *s = (const char *const[]){ "jvm", "pt", "sideband", NULL }; *s; s++) {
        char *p = g_build_filename(dir, *s, NULL);
        g_mkdir(p, 0755);
        g_free(p);
    }
    char *jvm = g_build_filename(dir, "jvm", NULL);
    char err[512];
    jm_writer *w = jm_writer_open(jvm, 1, PID, err, sizeof err);
    cr_assert_not_null(w, "%s", err);
    jm_buf b;
    jm_buf_init(&b);
    uint8_t interp[0x100];
    memset(interp, 0xcc, sizeof interp);
    memcpy(interp, "\x90\x90\xff\xe0", 4);
    interp[0x60] = 0x90;
    interp[0x61] = 0xe8;
    int32_t rel = (int32_t)(OUTSIDE - (INTERP + 0x61 + 5));
    memcpy(interp + 0x62, &rel, 4);
    memcpy(interp + 0x66, "\xff\xe0", 2);
    jm_put_u64(&b, INTERP); jm_put_u64(&b, sizeof interp); jm_put_u64(&b, 0);
    jm_put_u32(&b, JM_BLOB_INTERPRETER); jm_put_str(&b, "Interpreter");
    emit_meta(w, JM_CODE_BLOB, 5, &b, interp, sizeof interp);
    codelet(w, &b, INTERP, INTERP + 0x20, 26, "iload_0");
    codelet(w, &b, INTERP + 0x60, INTERP + 0x80, 104, "imul");
    cr_assert_eq(jm_writer_close(w), 0);
    jm_buf_free(&b);
    g_free(jvm);
    return dir;
}

static void remove_tree(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    if (d) {
        const char *e;
        while ((e = g_dir_read_name(d))) {
            char *p = g_build_filename(path, e, NULL);
            if (g_file_test(p, G_FILE_TEST_IS_DIR)) remove_tree(p);
            else g_unlink(p);
            g_free(p);
        }
        g_dir_close(d);
    }
    g_rmdir(path);
}

/* A thread that runs iload_0 a few times between t0 and t1 (a PSB+ at t1)
 * and leaves the filter by its dispatch jump. */
static size_t busy_thread(penc *e, uint64_t t0, uint64_t t1)
{
    penc_init(e);
    psb(e, t0, 0);
    enter(e, t0, pt_ipc_sext_48, INTERP);
    ipp(e, ppt_tip, pt_ipc_update_16, INTERP);
    psb(e, t1, INTERP);
    ipp(e, ppt_tip, pt_ipc_update_16, INTERP);
    ipp(e, ppt_tip_pgd, pt_ipc_sext_48, OUTSIDE);
    return penc_end(e);
}

/* Thread A: iload_0, imul calls out of the filter (TIP.PGD at the call's
 * target, IP compressed), comes back at t2 into imul (TIP.PGE compressed
 * against the call target), dispatches to iload_0 and leaves. Returning
 * into imul continues it only if the flow state (the shadow stack) has
 * survived the pause. */
static size_t thread_a(penc *e, uint64_t t1, uint64_t t2)
{
    penc_init(e);
    psb(e, t1, 0);
    enter(e, t1, pt_ipc_sext_48, INTERP);
    ipp(e, ppt_tip, pt_ipc_update_16, INTERP + 0x60);
    ipp(e, ppt_tip_pgd, pt_ipc_update_32, OUTSIDE);
    enter(e, t2, pt_ipc_update_32, INTERP + 0x66);
    ipp(e, ppt_tip, pt_ipc_update_16, INTERP);
    ipp(e, ppt_tip_pgd, pt_ipc_sext_48, OUTSIDE);
    return penc_end(e);
}

/* ---- events of a stream ----------------------------------------------------------- */

static int collect(const dc_event *ev, void *vp)
{
    GString *s = vp;
    g_string_append_printf(s, "%s/%d/%" PRIx64 "/%" PRIx64 "/%x;", dc_kind_name(ev->kind),
                           ev->opcode, ev->ip, ev->exit_ip, ev->flags);
    return 0;
}

/* The events of DIR/pt/tid-TID.pt, decoded with DIR's metadata from MDIR. */
static char *events_of(const char *mdir, const char *dir, uint32_t tid, dc_stats *st)
{
    char err[512];
    dm_model *m = dm_load(mdir, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    cr_assert_not_null(cache, "%s", err);
    char *pt = g_strdup_printf("%s/pt/tid-%u.pt", dir, tid);
    char *idx = g_strdup_printf("%s/pt/tid-%u.idx", dir, tid);
    GString *s = g_string_new("");
    dc_output out = { .sink = collect, .ctx = s };
    cr_assert_geq(dc_decode_stream(&(dc_trace){ m, cache, NULL }, pt, idx, &out, st, err,
                                   sizeof err), 0, "%s",
                  err);
    g_free(pt);
    g_free(idx);
    di_cache_free(cache);
    dm_free(m);
    return g_string_free(s, FALSE);
}

/* The TSC packets of a stream never go back. */
static void expect_monotonic(const char *path)
{
    gchar *buf;
    gsize len;
    cr_assert(g_file_get_contents(path, &buf, &len, NULL), "%s", path);
    if (len) {
        struct pt_config cfg;
        pt_config_init(&cfg);
        cfg.begin = (uint8_t *)buf;
        cfg.end = (uint8_t *)buf + len;
        struct pt_packet_decoder *d = pt_pkt_alloc_decoder(&cfg);
        cr_assert_eq(pt_pkt_sync_set(d, 0), 0);
        uint64_t last = 0, n = 0;
        struct pt_packet p;
        int r;
        while ((r = pt_pkt_next(d, &p, sizeof p)) >= 0) {
            if (p.type != ppt_tsc) continue;
            cr_expect_geq(p.payload.tsc.tsc, last, "%s: TSC %" PRIu64 " after %" PRIu64, path,
                          p.payload.tsc.tsc, last);
            last = p.payload.tsc.tsc;
            n++;
        }
        cr_expect_eq(r, -pte_eos, "%s: %s", path, pt_errstr(pt_errcode(r)));
        pt_pkt_free_decoder(d);
    }
    g_free(buf);
}

static const perf_time_conv test_time = { .valid = true, .time_zero = 12345,
                                          .time_mult = 715827883, .time_shift = 31 };

static void split(const char *dir, const char *out, dc_percpu_stats *st)
{
    dc_time_conv tc = { .valid = test_time.valid, .time_zero = test_time.time_zero,
                        .time_mult = test_time.time_mult, .time_shift = test_time.time_shift };
    char err[512];
    cr_assert_eq(dc_percpu_split(dir, out, &tc, st, err, sizeof err), 0, "%s", err);
}

/* ---- the writer, then the split ------------------------------------------------------ */

/* A (101) runs at 1000 and again at 6000; B (102) from 1050 to 1500 takes
 * CPU 1; C (103) from 5000 to 9000 takes CPU 0, so A comes back on CPU 1. */
static char *three_threads(uint64_t c_cut)
{
    char *dir = make_dir();
    penc e;
    size_t n = thread_a(&e, 1000, 6000);
    thread_stream(dir, 101, e.buf, n, 0, 0);
    n = busy_thread(&e, 1050, 1500);
    thread_stream(dir, 102, e.buf, n, 0, 0);
    n = busy_thread(&e, 5000, 9000);
    thread_stream(dir, 103, e.buf, n, c_cut, c_cut ? 777 : 0);
    return dir;
}

Test(writer, migrating_thread_keeps_its_flow_state)
{
    char *dir = three_threads(0);
    /* What the per-thread streams decode to. */
    char *before[3];
    dc_stats st;
    for (uint32_t i = 0; i < 3; i++) before[i] = events_of(dir, dir, 101 + i, &st);
    cr_expect(strstr(before[0], "bytecode/104") != NULL, "%s", before[0]);

    pc_params p = { .ncpus = 2, .keep_threads = true, .time = test_time };
    pc_result r;
    char err[512];
    cr_assert_eq(pc_convert(dir, &p, &r, err, sizeof err), 0, "%s", err);
    cr_expect_eq(r.threads, 3);
    cr_expect_eq(r.stretches, 4);
    cr_expect_eq(r.migrations, 1, "A moves to CPU 1");
    cr_expect_eq(r.delayed, 0);
    cr_expect_geq(r.reencoded_ips, 1, "A's TIP.PGE on CPU 1 was compressed");
    char *gone = g_build_filename(dir, "pt", "tid-101.pt", NULL);
    char *kept = g_build_filename(dir, "eval", "per-thread", "pt", "tid-101.pt", NULL);
    cr_expect(!g_file_test(gone, G_FILE_TEST_EXISTS));
    cr_expect(g_file_test(kept, G_FILE_TEST_EXISTS));
    for (int k = 0; k < 2; k++) {
        char *cp = g_strdup_printf("%s/pt/cpu-%d.pt", dir, k);
        expect_monotonic(cp);
        g_free(cp);
    }

    char *out = g_strdup_printf("%s-split", dir);
    dc_percpu_stats ps;
    split(dir, out, &ps);
    cr_expect_eq(ps.cpus, 2);
    cr_expect_eq(ps.threads, 3);
    cr_expect_eq(ps.unattached, 0, "%s", ps.nmsgs ? ps.msgs[0] : "");
    cr_expect_eq(ps.inconsistent, 0, "%s", ps.nmsgs ? ps.msgs[0] : "");
    cr_expect_eq(ps.attached, ps.switches);
    cr_expect_eq(ps.switches, r.switches);
    cr_expect_eq(ps.orphan_stretches, 0);
    for (uint32_t i = 0; i < 3; i++) {
        char *after = events_of(dir, out, 101 + i, &st);
        cr_expect_str_eq(after, before[i], "thread %u", 101 + i);
        g_free(after);
        g_free(before[i]);
    }
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(gone);
    g_free(kept);
    g_free(dir);
}

Test(writer, one_cpu_delays_threads_and_keeps_time_monotonic)
{
    char *dir = three_threads(0);
    char *before[3];
    dc_stats st;
    for (uint32_t i = 0; i < 3; i++) before[i] = events_of(dir, dir, 101 + i, &st);
    pc_params p = { .ncpus = 1, .time = test_time };
    pc_result r;
    char err[512];
    cr_assert_eq(pc_convert(dir, &p, &r, err, sizeof err), 0, "%s", err);
    cr_expect_geq(r.delayed, 1, "B overlaps A");
    cr_expect_gt(r.max_delay, 0);
    char *cp = g_build_filename(dir, "pt", "cpu-0.pt", NULL);
    expect_monotonic(cp);
    char *kept = g_build_filename(dir, "eval", "per-thread", "pt", "tid-101.pt", NULL);
    cr_expect(!g_file_test(kept, G_FILE_TEST_EXISTS), "kept without being asked");
    char *out = g_strdup_printf("%s-split", dir);
    dc_percpu_stats ps;
    split(dir, out, &ps);
    cr_expect_eq(ps.unattached, 0, "%s", ps.nmsgs ? ps.msgs[0] : "");
    cr_expect_eq(ps.inconsistent, 0);
    /* The same events; a waiting thread's times are shifted. */
    for (uint32_t i = 0; i < 3; i++) {
        char *after = events_of(dir, out, 101 + i, &st);
        cr_expect_str_eq(after, before[i], "thread %u", 101 + i);
        g_free(after);
        g_free(before[i]);
    }
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(cp);
    g_free(kept);
    g_free(dir);
}

Test(writer, loss_is_accounted_on_the_cpu_and_the_thread)
{
    /* C's stream is cut before its second PSB, where the emulator resumes
     * after a loss. */
    penc e;
    size_t n = busy_thread(&e, 5000, 9000);
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = e.buf;
    cfg.end = e.buf + n;
    struct pt_packet_decoder *d = pt_pkt_alloc_decoder(&cfg);
    cr_assert_eq(pt_pkt_sync_set(d, 1), 0);
    cr_assert_eq(pt_pkt_sync_forward(d), 0);
    uint64_t second = 0;
    pt_pkt_get_sync_offset(d, &second);
    pt_pkt_free_decoder(d);
    cr_assert_gt(second, 0);

    char *dir = three_threads(second);
    pc_params p = { .ncpus = 2, .time = test_time };
    pc_result r;
    char err[512];
    cr_assert_eq(pc_convert(dir, &p, &r, err, sizeof err), 0, "%s", err);
    cr_expect_eq(r.truncated, 1);
    cr_expect_eq(r.lost_bytes, 777);
    uint64_t lost = 0, trunc = 0;
    for (int k = 0; k < 2; k++) {
        char *ip = g_strdup_printf("%s/pt/cpu-%d.idx", dir, k);
        auxidx idx;
        cr_assert_eq(auxidx_load(ip, &idx, err, sizeof err), 0, "%s", err);
        lost += idx.lost_bytes;
        trunc += idx.truncations;
        auxidx_free(&idx);
        g_free(ip);
    }
    cr_expect_eq(lost, 777, "the loss is on the CPU that ran C");
    cr_expect_eq(trunc, 1);
    char *out = g_strdup_printf("%s-split", dir);
    dc_percpu_stats ps;
    split(dir, out, &ps);
    cr_expect_eq(ps.losses, 1);
    dc_stats st;
    char *ev = events_of(dir, out, 103, &st);
    cr_expect_eq(st.gaps[DC_GAP_LOST], 1, "%s", ev);
    cr_expect_eq(st.lost_bytes, 777);
    g_free(ev);
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(dir);
}

/* ---- the split on hand-made per-CPU streams -------------------------------------------- */

static void sw(GByteArray *a, uint32_t tid, uint64_t tsc, bool out)
{
    rec(a, PERF_RECORD_SWITCH, out ? PERF_RECORD_MISC_SWITCH_OUT : 0, NULL, 0, tid,
        pc_tsc_to_perf_time(&test_time, tsc), 0);
}

/* cpu-0: a stretch traced from 1000 to 1500 (a PSB+ inside), a gap, one
 * from 5000. */
static char *one_cpu(GByteArray *sb)
{
    char *dir = make_dir();
    penc e;
    penc_init(&e);
    psb(&e, 900, 0);
    enter(&e, 1000, pt_ipc_sext_48, INTERP);
    ipp(&e, ppt_tip, pt_ipc_update_16, INTERP);
    psb(&e, 1500, INTERP);
    ipp(&e, ppt_tip_pgd, pt_ipc_sext_48, OUTSIDE);
    enter(&e, 5000, pt_ipc_update_32, INTERP);
    ipp(&e, ppt_tip_pgd, pt_ipc_sext_48, OUTSIDE);
    size_t n = penc_end(&e);
    write_file(dir, "pt/cpu-0.pt", e.buf, n);
    auxidx_rec r = { .offset = 0, .size = n };
    write_idx(dir, "pt/cpu-0.idx", &r, 1);
    write_file(dir, "sideband/cpu-0.sb", sb->data, sb->len);
    return dir;
}

Test(split, switches_attach_to_the_gaps_around_them)
{
    GByteArray *sb = g_byte_array_new();
    sw(sb, 101, 800, false);
    sw(sb, 101, 2000, true);
    sw(sb, 102, 3000, false);
    sw(sb, 102, 6000, true);
    char *dir = one_cpu(sb);
    char *out = g_strdup_printf("%s-split", dir);
    dc_percpu_stats ps;
    split(dir, out, &ps);
    cr_expect_eq(ps.switches, 4);
    cr_expect_eq(ps.attached, 4);
    cr_expect_eq(ps.unattached + ps.inconsistent + ps.orphan_stretches, 0);
    cr_expect_eq(ps.threads, 2);
    dc_stats st;
    char *a = events_of(dir, out, 101, &st);
    char *b = events_of(dir, out, 102, &st);
    cr_expect_eq(st.enables, 1, "B has the second stretch alone: %s", b);
    cr_expect(strstr(a, "bytecode/26") != NULL, "%s", a);
    cr_expect(strstr(b, "bytecode/26") != NULL, "%s", b);
    g_free(a);
    g_free(b);
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(dir);
    g_byte_array_free(sb, TRUE);
}

Test(split, switch_inside_a_stretch_is_reported_not_guessed)
{
    GByteArray *sb = g_byte_array_new();
    sw(sb, 101, 800, false);
    sw(sb, 103, 1200, false);     /* while 1000..1500 is being traced */
    sw(sb, 101, 2000, true);
    sw(sb, 102, 3000, false);
    sw(sb, 102, 6000, true);
    char *dir = one_cpu(sb);
    char *out = g_strdup_printf("%s-split", dir);
    dc_percpu_stats ps;
    split(dir, out, &ps);
    cr_expect_eq(ps.switches, 5);
    cr_expect_eq(ps.unattached, 1);
    cr_expect_eq(ps.attached, 4);
    cr_assert_geq(ps.nmsgs, 1);
    cr_expect(strstr(ps.msgs[0], "cpu-0.sb: offset 48: switch-in of thread 103") != NULL, "%s",
              ps.msgs[0]);
    char *c = g_strdup_printf("%s/pt/tid-103.pt", out);
    cr_expect(!g_file_test(c, G_FILE_TEST_EXISTS));
    g_free(c);
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(dir);
    g_byte_array_free(sb, TRUE);
}

Test(split, trace_before_any_switch_is_left_out_and_bad_records_named)
{
    GByteArray *sb = g_byte_array_new();
    sw(sb, 102, 3000, false);
    sw(sb, 101, 6000, true);      /* not the one switched in */
    uint8_t junk[8] = { 1, 0, 0, 0, 0, 0, 12, 0 };   /* size 12: not a multiple of 8 */
    g_byte_array_append(sb, junk, 8);
    char *dir = one_cpu(sb);
    char *out = g_strdup_printf("%s-split", dir);
    dc_percpu_stats ps;
    split(dir, out, &ps);
    cr_expect_eq(ps.orphan_stretches, 1);
    cr_expect_gt(ps.orphan_bytes, 0);
    cr_expect_eq(ps.inconsistent, 1);
    bool named = false, junk_named = false;
    for (size_t i = 0; i < ps.nmsgs; i++) {
        named |= strstr(ps.msgs[i], "cpu-0.pt: offset 0:") != NULL;
        junk_named |= strstr(ps.msgs[i], "cpu-0.sb: offset 96:") != NULL;
    }
    cr_expect(named);
    cr_expect(junk_named);
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(dir);
    g_byte_array_free(sb, TRUE);
}

/* Switch times whose TSC would pass 64 bits are clamped and reported,
 * never wrapped around; a time just below time_zero is a modular
 * difference like any other, as in the kernel. */
Test(split, switch_times_out_of_range_are_clamped_and_named)
{
    GByteArray *sb = g_byte_array_new();
    sw(sb, 101, 800, false);
    rec(sb, PERF_RECORD_SWITCH, PERF_RECORD_MISC_SWITCH_OUT, NULL, 0, 101,
        test_time.time_zero - 1, 0);
    rec(sb, PERF_RECORD_SWITCH, 0, NULL, 0, 102, UINT64_MAX, 0);

    char *dir = one_cpu(sb);
    char *out = g_strdup_printf("%s-split", dir);
    dc_percpu_stats ps;
    split(dir, out, &ps);
    cr_expect_eq(ps.switches, 3);
    bool named = false;
    for (size_t i = 0; i < ps.nmsgs; i++)
        named |= strstr(ps.msgs[i], "cpu-0.sb: offset 48: 2 context switch time(s)") != NULL;
    cr_expect(named, "%s", ps.nmsgs ? ps.msgs[0] : "no message");
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(dir);

    /* A conversion whose time_zero wraps (as the host's may): perf times
     * below time_zero are normal and map back exactly. */
    perf_time_conv neg = test_time;
    neg.time_zero = UINT64_MAX - 100;
    g_byte_array_set_size(sb, 0);
    const uint64_t at[4] = { 800, 2000, 3000, 6000 };
    for (int i = 0; i < 4; i++)
        rec(sb, PERF_RECORD_SWITCH, i % 2 ? PERF_RECORD_MISC_SWITCH_OUT : 0, NULL, 0,
            i < 2 ? 101 : 102, pc_tsc_to_perf_time(&neg, at[i]), 0);
    cr_expect_lt(pc_tsc_to_perf_time(&neg, 800), neg.time_zero);
    dir = one_cpu(sb);
    out = g_strdup_printf("%s-split", dir);
    dc_time_conv ntc = { .valid = true, .time_zero = neg.time_zero,
                         .time_mult = neg.time_mult, .time_shift = neg.time_shift };
    char err[512];
    cr_assert_eq(dc_percpu_split(dir, out, &ntc, &ps, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ps.switches, 4);
    cr_expect_eq(ps.attached, 4);
    cr_expect_eq(ps.problems, 0, "%s", ps.nmsgs ? ps.msgs[0] : "");
    remove_tree(out);
    remove_tree(dir);
    g_free(out);
    g_free(dir);
    g_byte_array_free(sb, TRUE);
}

/* One split per trace however its directory is spelled; a failed split
 * keeps its reason for every later caller. */
Test(split, stream_dir_is_keyed_by_real_path_and_remembers_failure)
{
    GByteArray *sb = g_byte_array_new();
    sw(sb, 101, 800, false);
    sw(sb, 101, 2000, true);
    char *dir = one_cpu(sb);
    char *slash = g_strdup_printf("%s/", dir);
    char err[512] = "";
    const char *s1 = dc_thread_stream_dir(dir, err, sizeof err);
    cr_assert_not_null(s1, "%s", err);
    const char *s2 = dc_thread_stream_dir(slash, err, sizeof err);
    cr_expect_eq(s1, s2, "%s and %s split twice", dir, slash);
    cr_expect_not_null(dc_percpu_stats_of(slash));

    char *bad = one_cpu(sb);
    const char *big = "{\"time\": {\"valid\": true, \"time_zero\": 5, \"time_mult\": 3, "
                      "\"time_shift\": 40}}";
    write_file(bad, "info.json", big, strlen(big));
    cr_expect_null(dc_thread_stream_dir(bad, err, sizeof err));
    cr_expect(strstr(err, "time_shift 40") != NULL, "%s", err);
    err[0] = 0;
    cr_expect_null(dc_thread_stream_dir(bad, err, sizeof err));
    cr_expect(strstr(err, "time_shift 40") != NULL, "again: %s", err);
    cr_expect_null(dc_percpu_stats_of(bad));
    remove_tree(bad);
    remove_tree(dir);
    g_free(bad);
    g_free(slash);
    g_free(dir);
    g_byte_array_free(sb, TRUE);
}

Test(split, time_conversion_round_trips)
{
    perf_time_conv host;
    pc_host_time_conv(&host);
    cr_expect(host.valid);
    for (uint64_t t = 1; t < (1ull << 56); t = t * 3 + 17) {
        uint64_t back = perf_time_to_tsc(&host, pc_tsc_to_perf_time(&host, t));
        uint64_t diff = back > t ? back - t : t - back;
        cr_expect_leq(diff, 16, "tsc %" PRIu64 " -> %" PRIu64, t, back);
    }
}

/* Damaged CPU streams and sidebands: the split never crashes, reports with
 * offsets, and what it writes decodes. */
Test(split, damaged_streams_and_sidebands)
{
    GByteArray *sb = g_byte_array_new();
    sw(sb, 101, 800, false);
    sw(sb, 101, 2000, true);
    sw(sb, 102, 3000, false);
    sw(sb, 102, 6000, true);
    char *dir = one_cpu(sb);
    char *ptp = g_build_filename(dir, "pt", "cpu-0.pt", NULL);
    char *sbp = g_build_filename(dir, "sideband", "cpu-0.sb", NULL);
    gchar *pt0, *sb0;
    gsize ptn, sbn;
    cr_assert(g_file_get_contents(ptp, &pt0, &ptn, NULL));
    cr_assert(g_file_get_contents(sbp, &sb0, &sbn, NULL));
    GRand *rnd = g_rand_new_with_seed(4242);
    for (int round = 0; round < 100; round++) {
        gchar *pt = g_memdup2(pt0, ptn), *s = g_memdup2(sb0, sbn);
        gsize pn = ptn, sn = sbn;
        for (int k = g_rand_int_range(rnd, 1, 6); k > 0; k--) {
            if (g_rand_boolean(rnd)) pt[g_rand_int_range(rnd, 0, (gint32)pn)] = (gchar)g_rand_int(rnd);
            else s[g_rand_int_range(rnd, 0, (gint32)sn)] = (gchar)g_rand_int(rnd);
        }
        if (round % 7 == 0) pn = (gsize)g_rand_int_range(rnd, 0, (gint32)pn);
        if (round % 11 == 0) sn = (gsize)g_rand_int_range(rnd, 0, (gint32)sn);
        put_file(ptp, pt, pn);
        put_file(sbp, s, sn);
        char *out = g_strdup_printf("%s-split", dir);
        dc_percpu_stats ps;
        split(dir, out, &ps);
        for (size_t i = 0; i < ps.nmsgs; i++)
            cr_expect(strstr(ps.msgs[i], "offset ") != NULL || strstr(ps.msgs[i], "cannot") != NULL,
                      "round %d: %s", round, ps.msgs[i]);
        uint32_t *tids = NULL;
        size_t n = dc_list_thread_streams(out, &tids, NULL);
        for (size_t i = 0; i < n; i++) {
            dc_stats st;
            g_free(events_of(dir, out, tids[i], &st));
        }
        g_free(tids);
        remove_tree(out);
        g_free(out);
        g_free(pt);
        g_free(s);
    }
    g_rand_free(rnd);
    g_free(pt0);
    g_free(sb0);
    g_free(ptp);
    g_free(sbp);
    remove_tree(dir);
    g_free(dir);
    g_byte_array_free(sb, TRUE);
}

Test(split, time_conversion_read_from_info_json)
{
    char *dir = g_dir_make_tmp("jpt-percpu-test-XXXXXX", NULL);
    cr_assert_not_null(dir);
    dc_time_conv tc;
    char err[512] = "";
    cr_expect_eq(dc_read_time_conv(dir, &tc, err, sizeof err), 0);
    cr_expect(!tc.valid, "no info.json: identity");
    /* "time" as a word of the command comes before the key. */
    const char *j = "{\"command\": [\"time\", \"java\"], \"start_time\": \"x\",\n"
                    "  \"time\" : {\"valid\": true, \"time_zero\": 18446744073630314647, "
                    "\"time_mult\": 827181684, \"time_shift\": 31}, \"cpus\": 2}";
    write_file(dir, "info.json", j, strlen(j));
    cr_expect_eq(dc_read_time_conv(dir, &tc, err, sizeof err), 0, "%s", err);
    cr_expect(tc.valid);
    cr_expect_eq(tc.time_zero, 18446744073630314647ull);
    cr_expect_eq(tc.time_mult, 827181684u);
    cr_expect_eq(tc.time_shift, 31);
    const char *off = "{\"time\": {\"valid\": false, \"time_zero\": 0, \"time_mult\": 0, "
                      "\"time_shift\": 0}}";
    write_file(dir, "info.json", off, strlen(off));
    cr_expect_eq(dc_read_time_conv(dir, &tc, err, sizeof err), 0, "%s", err);
    cr_expect(!tc.valid, "the kernel offered no conversion");
    /* A shift past the kernel's 32 would overflow the conversion. */
    const char *big = "{\"time\": {\"valid\": true, \"time_zero\": 5, \"time_mult\": 3, "
                      "\"time_shift\": 40}}";
    write_file(dir, "info.json", big, strlen(big));
    cr_expect_eq(dc_read_time_conv(dir, &tc, err, sizeof err), -1);
    cr_expect(strstr(err, "info.json") && strstr(err, "time_shift 40"), "%s", err);
    remove_tree(dir);
    g_free(dir);
}
