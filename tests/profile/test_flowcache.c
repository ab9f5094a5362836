/* The decoded-flow cache file (profile/flowcache.h): random flows written and
 * read back field for field; stale keys; every kind of damage refused with
 * its offset before any event is delivered; writers that race; and the
 * streamed hash equal to the one-shot one at every split. */
#include <criterion/criterion.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/hash.h"
#include "profile/flowcache.h"

static char *workdir(void)
{
    char *d = g_dir_make_tmp("jpt-flowcache-XXXXXX", NULL);
    cr_assert_not_null(d);
    return d;
}

static void rm_rf(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    for (const char *e; d && (e = g_dir_read_name(d));) {
        char *p = g_build_filename(dir, e, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR))
            rm_rf(p);
        else
            g_unlink(p);
        g_free(p);
    }
    if (d)
        g_dir_close(d);
    g_rmdir(dir);
}

/* ---- a random flow --------------------------------------------------------- */

typedef struct thread_flow {
    uint32_t tid;
    GArray *ev;              /* fl_event; stacks point into stacks */
    GPtrArray *stacks;
    fc_thread end;
} thread_flow;

static uint64_t pick(GRand *r, int bits)
{
    uint64_t v = ((uint64_t)g_rand_int(r) << 32) | g_rand_int(r);
    return bits >= 64 ? v : v & ((1ull << bits) - 1);
}

/* Events as the pipeline makes them, and the extremes a field can take. */
static fl_event random_event(GRand *r, uint32_t tid, GPtrArray *stacks, uint64_t *tsc)
{
    fl_event e = { 0 };
    e.kind = (fl_kind)g_rand_int_range(r, FL_SEGMENT, FL_KIND_COUNT);
    e.origin = (fl_origin)g_rand_int_range(r, 0, FL_ORIGIN_COUNT);
    e.tid = g_rand_int_range(r, 0, 20) ? tid : (uint32_t)pick(r, 32);
    *tsc += pick(r, g_rand_int_range(r, 0, 3) ? 8 : 40);
    e.tsc = g_rand_int_range(r, 0, 50) ? *tsc : pick(r, 64);
    e.method_id = g_rand_int_range(r, 0, 3) ? 1000 + pick(r, 4) : pick(r, 64);
    e.bci = g_rand_int_range(r, 0, 10) ? g_rand_int_range(r, -1, 300)
                                       : (int32_t)(uint32_t)pick(r, 32);
    e.opcode = g_rand_int_range(r, 0, 10) ? g_rand_int_range(r, -1, 256)
                                          : (int32_t)(uint32_t)pick(r, 32);
    e.flags = g_rand_int_range(r, 0, 2) ? 0 : (uint32_t)pick(r, g_rand_int_range(r, 1, 33));
    e.count = e.kind == FL_BYTECODE && g_rand_int_range(r, 0, 4) ? 1 : pick(r, 40);
    e.offset = *tsc / 3 + (g_rand_int_range(r, 0, 30) ? 0 : pick(r, 64));
    if (e.kind == FL_SEGMENT || !g_rand_int_range(r, 0, 40)) {
        e.seq = pick(r, g_rand_int_range(r, 0, 65));
        e.gap_offset = g_rand_int_range(r, 0, 2) ? 0 : pick(r, 64);
        e.resume_offset = g_rand_int_range(r, 0, 2) ? 0 : pick(r, 48);
        e.lost_bytes = g_rand_int_range(r, 0, 2) ? 0 : pick(r, 20);
        e.depth = g_rand_int_range(r, 0, 50) ? g_rand_int_range(r, 0, 40)
                                             : g_rand_int_range(r, 0, 5000);
        if (e.depth) {
            uint64_t *s = g_new(uint64_t, e.depth);
            for (uint32_t i = 0; i < e.depth; i++)
                s[i] = g_rand_int_range(r, 0, 2) ? 1000 + pick(r, 6) : pick(r, 64);
            g_ptr_array_add(stacks, s);
            e.stack = s;
        }
    }
    return e;
}

static thread_flow *random_threads(GRand *r, unsigned nthreads, unsigned events)
{
    thread_flow *t = g_new0(thread_flow, nthreads);
    for (unsigned i = 0; i < nthreads; i++) {
        t[i].tid = 100 + i * 7;
        t[i].ev = g_array_new(FALSE, FALSE, sizeof(fl_event));
        t[i].stacks = g_ptr_array_new_with_free_func(g_free);
        uint64_t tsc = pick(r, 40);
        unsigned n = i == 1 ? 0 : events;    /* a thread with no events */
        for (unsigned k = 0; k < n; k++) {
            fl_event e = random_event(r, t[i].tid, t[i].stacks, &tsc);
            g_array_append_val(t[i].ev, e);
        }
        t[i].end.tid = t[i].tid;
        t[i].end.cpu_ns = pick(r, 40);
        t[i].end.dc.pt_bytes = pick(r, 30);
        t[i].end.dc.blocks = pick(r, 20);
        snprintf(t[i].end.dc.problem, sizeof t[i].end.dc.problem, "problem %u", i);
        t[i].end.rp.bytecodes = pick(r, 30);
        t[i].end.rp.jit.pins = pick(r, 30);
        t[i].end.rv.filled = pick(r, 10);
    }
    return t;
}

static void free_threads(thread_flow *t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        g_array_free(t[i].ev, TRUE);
        g_ptr_array_free(t[i].stacks, TRUE);
    }
    g_free(t);
}

static const fc_key key = { .producer = 0x1234, .inputs = 0x5678, .options = 0, .trace = 0x9abc };

static void write_cache(const char *path, const fc_key *k, thread_flow *t, unsigned n)
{
    char err[1024];
    fc_writer *w = fc_writer_new(path, k, err, sizeof err);
    cr_assert_not_null(w, "%s", err);
    fc_write_warning(w, "trace: a warning of the split");
    fc_write_trace_warning(w, "trace/jvm/meta.jpt: offset 12: a metadata warning");
    for (unsigned i = 0; i < n; i++) {
        fc_write_thread_begin(w, t[i].tid);
        for (guint k2 = 0; k2 < t[i].ev->len; k2++)
            fc_write_event(&g_array_index(t[i].ev, fl_event, k2), w);
        fc_write_thread_end(w, &t[i].end);
    }
    cr_assert_eq(fc_writer_commit(w, err, sizeof err), 0, "%s", err);
}

/* ---- reading back ---------------------------------------------------------- */

typedef struct check {
    thread_flow *t;
    unsigned n, thread;
    guint at;
    bool decoded_only;
    uint64_t events, stop_after;
    unsigned begun, ended;
} check;

static void check_begin(uint32_t tid, void *vc)
{
    check *c = vc;
    while (c->thread < c->n && c->t[c->thread].tid != tid)
        c->thread++;
    cr_assert_lt(c->thread, c->n, "thread %u out of order", tid);
    c->at = 0;
    c->begun++;
}

static void next_wanted(check *c)
{
    const GArray *ev = c->t[c->thread].ev;
    while (c->decoded_only && c->at < ev->len &&
           g_array_index(ev, fl_event, c->at).origin != FL_DECODED)
        c->at++;
}

static int check_event(const fl_event *got, void *vc)
{
    check *c = vc;
    next_wanted(c);
    const GArray *ev = c->t[c->thread].ev;
    cr_assert_lt(c->at, ev->len, "thread %u: more events than written", c->t[c->thread].tid);
    const fl_event *w = &g_array_index(ev, fl_event, c->at++);
    cr_assert_eq(got->kind, w->kind);
    cr_assert_eq(got->origin, w->origin);
    cr_assert_eq(got->flags, w->flags);
    cr_assert_eq(got->tid, w->tid);
    cr_assert_eq(got->tsc, w->tsc);
    cr_assert_eq(got->method_id, w->method_id);
    cr_assert_eq(got->bci, w->bci);
    cr_assert_eq(got->opcode, w->opcode);
    cr_assert_eq(got->count, w->count);
    cr_assert_eq(got->seq, w->seq);
    cr_assert_eq(got->depth, w->depth);
    for (uint32_t i = 0; i < w->depth; i++)
        cr_assert_eq(got->stack[i], w->stack[i], "stack[%u]", i);
    cr_assert_eq(got->gap_offset, w->gap_offset);
    cr_assert_eq(got->resume_offset, w->resume_offset);
    cr_assert_eq(got->lost_bytes, w->lost_bytes);
    cr_assert_eq(got->offset, w->offset);
    return ++c->events == c->stop_after;
}

static void check_end(const fc_thread *got, void *vc)
{
    check *c = vc;
    next_wanted(c);
    const thread_flow *t = &c->t[c->thread];
    cr_assert_eq(c->at, t->ev->len, "thread %u: fewer events than written", t->tid);
    cr_assert_eq(got->tid, t->tid);
    cr_assert_eq(got->cpu_ns, t->end.cpu_ns);
    cr_assert_eq(memcmp(&got->dc, &t->end.dc, sizeof got->dc), 0);
    cr_assert_eq(memcmp(&got->rp, &t->end.rp, sizeof got->rp), 0);
    cr_assert_eq(memcmp(&got->rv, &t->end.rv, sizeof got->rv), 0);
    c->ended++;
    c->thread++;
}

static int replay_all(fc_reader *r, check *c)
{
    fc_replay how = { .begin = check_begin, .sink = check_event, .end = check_end,
                      .decoded_only = c->decoded_only, .ctx = c };
    char err[1024];
    return fc_replay_flow(r, &how, err, sizeof err);
}

Test(flowcache, random_flows_read_back_field_for_field)
{
    GRand *rnd = g_rand_new_with_seed(60);
    char *dir = workdir();
    char *path = g_build_filename(dir, "cache", "flow.jfc", NULL);
    for (int round = 0; round < 6; round++) {
        unsigned n = 1 + (unsigned)round % 3;
        thread_flow *t = random_threads(rnd, n, 2000 + 3000 * (unsigned)round);
        write_cache(path, &key, t, n);
        fc_reader *r;
        char why[1024];
        cr_assert_eq(fc_open(path, &key, &r, why, sizeof why), 1, "%s", why);
        const char *const *lines;
        cr_assert_eq(fc_warnings(r, &lines), 1);
        cr_assert_str_eq(lines[0], "trace: a warning of the split");
        cr_assert_eq(fc_trace_warnings(r, &lines), 1);
        const fc_thread *th;
        cr_assert_eq(fc_threads(r, &th), n);
        for (int pass = 0; pass < 2; pass++) {
            check c = { .t = t, .n = n, .decoded_only = pass == 1 };
            cr_assert_eq(replay_all(r, &c), 0);
            cr_assert_eq(c.begun, n);
            cr_assert_eq(c.ended, n);
        }
        fc_close(r);
        free_threads(t, n);
    }
    g_free(path);
    rm_rf(dir);
    g_free(dir);
    g_rand_free(rnd);
}

Test(flowcache, a_sink_that_stops_stops_the_replay)
{
    GRand *rnd = g_rand_new_with_seed(7);
    char *dir = workdir();
    char *path = g_build_filename(dir, "flow.jfc", NULL);
    thread_flow *t = random_threads(rnd, 1, 5000);
    write_cache(path, &key, t, 1);
    fc_reader *r;
    char why[1024];
    cr_assert_eq(fc_open(path, &key, &r, why, sizeof why), 1, "%s", why);
    check c = { .t = t, .n = 1, .stop_after = 1234 };
    cr_assert_eq(replay_all(r, &c), 1);
    cr_assert_eq(c.events, 1234);
    fc_close(r);
    free_threads(t, 1);
    g_free(path);
    rm_rf(dir);
    g_free(dir);
    g_rand_free(rnd);
}

Test(flowcache, another_build_is_stale_another_trace_refused)
{
    GRand *rnd = g_rand_new_with_seed(8);
    char *dir = workdir();
    char *path = g_build_filename(dir, "flow.jfc", NULL);
    thread_flow *t = random_threads(rnd, 2, 100);
    write_cache(path, &key, t, 2);
    fc_key other[3] = { key, key, key };
    other[0].producer++;
    other[1].options = 1;
    other[2].inputs ^= 1;       /* the trace's files changed since */
    for (int i = 0; i < 3; i++) {
        fc_reader *r = (fc_reader *)1;
        char why[1024] = "";
        cr_assert_eq(fc_open(path, &other[i], &r, why, sizeof why), 0);
        cr_assert_null(r);
    }
    /* another recording's cache: refused, with why */
    fc_key foreign = key;
    foreign.trace ^= 1;
    fc_reader *fr = (fc_reader *)1;
    char fwhy[1024] = "";
    cr_assert_eq(fc_open(path, &foreign, &fr, fwhy, sizeof fwhy), -1);
    cr_assert_null(fr);
    cr_assert(strstr(fwhy, ": offset 40: the cache of another recording"), "%s", fwhy);
    char *missing = g_build_filename(dir, "none.jfc", NULL);
    fc_reader *r;
    char why[1024];
    cr_assert_eq(fc_open(missing, &key, &r, why, sizeof why), 0);
    g_free(missing);
    free_threads(t, 2);
    g_free(path);
    rm_rf(dir);
    g_free(dir);
    g_rand_free(rnd);
}

static GByteArray *slurp(const char *path)
{
    gchar *data;
    gsize len;
    cr_assert(g_file_get_contents(path, &data, &len, NULL));
    GByteArray *b = g_byte_array_new_take((guint8 *)data, len);
    return b;
}

static void spit(const char *path, const guint8 *data, gsize len)
{
    cr_assert(g_file_set_contents(path, (const gchar *)data, (gssize)len, NULL));
}

/* Refused (-1) with "PATH: offset N: ..." naming an offset <= at_most. */
static void expect_damage(const char *path, uint64_t at_most, const char *what)
{
    fc_reader *r = (fc_reader *)1;
    char why[1024] = "";
    cr_assert_eq(fc_open(path, &key, &r, why, sizeof why), -1, "%s: accepted", what);
    cr_assert_null(r);
    cr_assert(g_str_has_prefix(why, path), "%s: %s", what, why);
    const char *o = strstr(why, ": offset ");
    cr_assert_not_null(o, "%s: no offset in '%s'", what, why);
    unsigned long long off = strtoull(o + 9, NULL, 10);
    cr_assert_leq(off, at_most, "%s: offset %llu after the damage at %llu (%s)", what, off,
                  (unsigned long long)at_most, why);
}

Test(flowcache, damage_anywhere_is_refused_with_its_offset)
{
    GRand *rnd = g_rand_new_with_seed(9);
    char *dir = workdir();
    char *path = g_build_filename(dir, "flow.jfc", NULL);
    char *bad = g_build_filename(dir, "bad.jfc", NULL);
    thread_flow *t = random_threads(rnd, 3, 3000);
    write_cache(path, &key, t, 3);
    GByteArray *good = slurp(path);
    cr_assert_gt(good->len, 100000u);
    /* one flipped bit anywhere past the magic */
    for (int i = 0; i < 300; i++) {
        guint at = 8 + (guint)g_rand_int_range(rnd, 0, (gint32)good->len - 8);
        GByteArray *b = g_byte_array_sized_new(good->len);
        g_byte_array_append(b, good->data, good->len);
        b->data[at] ^= (guint8)(1u << g_rand_int_range(rnd, 0, 8));
        spit(bad, b->data, b->len);
        fc_reader *r = (fc_reader *)1;
        char why[1024] = "";
        int rc = fc_open(bad, &key, &r, why, sizeof why);
        /* a flip in the version or the key fields makes another cache's header */
        if (!(rc == 0 && at < 64))
            expect_damage(bad, at, "a flipped bit");
        g_byte_array_free(b, TRUE);
    }
    /* cut short anywhere */
    for (int i = 0; i < 100; i++) {
        guint len = (guint)g_rand_int_range(rnd, 0, (gint32)good->len);
        spit(bad, good->data, len);
        expect_damage(bad, len, "cut short");
    }
    /* more after the end */
    GByteArray *b = g_byte_array_sized_new(good->len + 16);
    g_byte_array_append(b, good->data, good->len);
    g_byte_array_append(b, (const guint8 *)"0123456789abcdef", 16);
    spit(bad, b->data, b->len);
    expect_damage(bad, good->len, "bytes after the end");
    g_byte_array_free(b, TRUE);
    /* not a cache at all */
    spit(bad, (const guint8 *)"{\"not\": \"a cache\"}", 18);
    expect_damage(bad, 0, "foreign");
    g_byte_array_free(good, TRUE);
    free_threads(t, 3);
    g_free(bad);
    g_free(path);
    rm_rf(dir);
    g_free(dir);
    g_rand_free(rnd);
}

/* A record whose checksum was made to fit: the events are checked too,
 * before any is delivered. */
Test(flowcache, forged_events_are_refused_before_delivery)
{
    char *dir = workdir();
    char *path = g_build_filename(dir, "flow.jfc", NULL);
    GRand *rnd = g_rand_new_with_seed(10);
    thread_flow *t = random_threads(rnd, 1, 50);
    write_cache(path, &key, t, 1);
    GByteArray *b = slurp(path);
    /* the EVENTS record follows the header, two warnings and the thread */
    guint at = 64;
    for (int rec = 0; rec < 3; rec++)
        at += 16 + (b->data[at + 4] | b->data[at + 5] << 8 | b->data[at + 6] << 16);
    cr_assert_eq(b->data[at], 4, "the events record's type");
    guint len = b->data[at + 4] | b->data[at + 5] << 8 | b->data[at + 6] << 16;
    /* claim one event more than the record holds, and fit the checksum */
    b->data[at + 16] += 1;
    uint64_t h = jhash_bytes(b->data + at + 16, len, 4 | (uint64_t)len << 32);
    for (int i = 0; i < 8; i++)
        b->data[at + 8 + i] = (guint8)(h >> (8 * i));
    spit(path, b->data, b->len);
    expect_damage(path, at, "forged events");
    g_byte_array_free(b, TRUE);
    free_threads(t, 1);
    g_free(path);
    rm_rf(dir);
    g_free(dir);
    g_rand_free(rnd);
}

typedef struct racer {
    const char *path;
    thread_flow *t;
} racer;

static gpointer race(gpointer vr)
{
    racer *r = vr;
    for (int i = 0; i < 5; i++)
        write_cache(r->path, &key, r->t, 2);
    return NULL;
}

Test(flowcache, concurrent_writers_leave_one_whole_file)
{
    GRand *rnd = g_rand_new_with_seed(11);
    char *dir = workdir();
    char *path = g_build_filename(dir, "cache", "flow.jfc", NULL);
    thread_flow *t = random_threads(rnd, 2, 10000);
    racer r = { path, t };
    GThread *a = g_thread_new("a", race, &r), *b = g_thread_new("b", race, &r);
    /* readers meanwhile see no file or a whole one */
    for (int i = 0; i < 20; i++) {
        fc_reader *rd;
        char why[1024];
        int rc = fc_open(path, &key, &rd, why, sizeof why);
        cr_assert_geq(rc, 0, "%s", why);
        fc_close(rd);
    }
    g_thread_join(a);
    g_thread_join(b);
    fc_reader *rd;
    char why[1024];
    cr_assert_eq(fc_open(path, &key, &rd, why, sizeof why), 1, "%s", why);
    check c = { .t = t, .n = 2 };
    cr_assert_eq(replay_all(rd, &c), 0);
    fc_close(rd);
    /* no temporary file is left */
    char *cdir = g_path_get_dirname(path);
    GDir *d = g_dir_open(cdir, 0, NULL);
    int files = 0;
    for (const char *e; (e = g_dir_read_name(d));)
        files++;
    g_dir_close(d);
    cr_assert_eq(files, 1);
    g_free(cdir);
    free_threads(t, 2);
    g_free(path);
    rm_rf(dir);
    g_free(dir);
    g_rand_free(rnd);
}

Test(hash, streamed_equals_one_shot_at_every_split)
{
    uint8_t data[300];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 37 + 11);
    for (size_t n = 0; n <= sizeof data; n += 13) {
        uint64_t whole = jhash_bytes(data, n, 5);
        for (size_t cut = 0; cut <= n; cut++) {
            jhash h;
            jhash_init(&h, 5);
            jhash_update(&h, data, cut);
            jhash_update(&h, data + cut, n - cut);
            cr_assert_eq(jhash_final(&h), whole, "n %zu cut %zu", n, cut);
        }
        /* every length and every single-bit change gives another hash */
        if (n) {
            data[n / 2] ^= 4;
            cr_assert_neq(jhash_bytes(data, n, 5), whole);
            data[n / 2] ^= 4;
        }
        cr_assert_neq(jhash_bytes(data, n, 6), whole);
    }
}
