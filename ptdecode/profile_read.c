/* The profile commands' reading of a trace's flow (pf_flow_source): a
 * progress line on a terminal, --thread and --from / --to applied, and the
 * calling context tree built from it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "common/jerr.h"
#include "profile/ccenc.h"
#include "profile/source.h"
#include "ptdecode/commands.h"
#include "ptdecode/profile_read.h"

/* The progress line is looked at every PROGRESS_CHECK events, redrawn at
 * most every PROGRESS_US and first shown after PROGRESS_FIRST_US. */
#define PROGRESS_CHECK (1u << 16)
#define PROGRESS_US 500000
#define PROGRESS_FIRST_US 1000000

/* Forwards events to the real sink, with a progress line on a terminal;
 * with --thread, only the chosen threads' events. */
typedef struct progress_sink {
    fl_sink sink;
    void *ctx;
    uint64_t events;
    bool tty;
    const prof_opts *o;
    GHashTable *chosen;      /* tid -> 1 chosen, 2 not */
    uint32_t nchosen;
    bool windowed;           /* --from / --to: events outside [lo, hi) only move the stack */
    uint64_t lo, hi;
    /* How far through the trace: a traced run's threads are read one after
     * the other, each event carrying its offset in the thread's PT stream. */
    const char *dir;
    uint64_t total_bytes;    /* pt/tid-*.pt sizes; 0: unknown (reference mode, per-CPU) */
    uint64_t done_bytes;     /* of the threads read before the current one */
    uint32_t tid;
    uint64_t tid_bytes, tid_offset;
    gint64 start_us, shown_us;
    bool shown;
} progress_sink;

/* Size of the thread's PT stream in dir/pt, 0 when there is none. */
static uint64_t stream_size(const char *dir, uint32_t tid)
{
    char name[32];
    snprintf(name, sizeof name, "tid-%" PRIu32 ".pt", tid);
    char *path = g_build_filename(dir, "pt", name, NULL);
    struct stat st;
    uint64_t size = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    g_free(path);
    return size;
}

static uint64_t streams_size(const char *dir)
{
    char *pt = g_build_filename(dir, "pt", NULL);
    GDir *d = g_dir_open(pt, 0, NULL);
    uint64_t total = 0;
    for (const char *e; d && (e = g_dir_read_name(d));) {
        unsigned long tid;
        char tail[8];
        if (sscanf(e, "tid-%lu%7s", &tid, tail) == 2 && !strcmp(tail, ".pt") && tid <= UINT32_MAX)
            total += stream_size(dir, (uint32_t)tid);
    }
    if (d)
        g_dir_close(d);
    g_free(pt);
    return total;
}

/* "ptdecode: 40% of the trace, 12M events, 30 s left" when the share is
 * known, else the events. It ends at the line's start, so that a warning
 * printed meanwhile takes the line over instead of running on from it. */
static void progress_show(progress_sink *p, gint64 now)
{
    double done = 0;
    if (p->total_bytes) {
        uint64_t here = p->tid_offset < p->tid_bytes ? p->tid_offset : p->tid_bytes;
        done = (double)(p->done_bytes + here) / (double)p->total_bytes;
    }
    if (done > 0.01 && done <= 1) {
        double left = (double)(now - p->start_us) / 1e6 * (1 - done) / done;
        fprintf(stderr, "\r\033[K%s: %.0f%% of the trace, %.1fM events, %.0f s left\r",
                jerr_prog(), 100 * done, (double)p->events / 1e6, left);
    } else {
        fprintf(stderr, "\r\033[K%s: %.1fM events\r", jerr_prog(), (double)p->events / 1e6);
    }
    p->shown = true;
    p->shown_us = now;
}

static void progress_note(progress_sink *p, const fl_event *ev)
{
    if (ev->tid != p->tid || !p->events) {
        p->done_bytes += p->tid_bytes;
        p->tid = ev->tid;
        p->tid_bytes = p->total_bytes ? stream_size(p->dir, ev->tid) : 0;
        p->tid_offset = 0;
    }
    if (ev->offset > p->tid_offset)
        p->tid_offset = ev->offset;
    if ((p->events & (PROGRESS_CHECK - 1)) == 0) {
        gint64 now = g_get_monotonic_time();
        if (now - p->start_us >= PROGRESS_FIRST_US && now - p->shown_us >= PROGRESS_US)
            progress_show(p, now);
    }
}

/* Whether --thread chose the thread: by its id or a glob over its name. */
static bool thread_chosen(progress_sink *p, uint32_t tid)
{
    gpointer known = g_hash_table_lookup(p->chosen, GUINT_TO_POINTER(tid));
    if (known)
        return GPOINTER_TO_UINT(known) == 1;
    const char *name = p->o->names ? pf_names_thread(p->o->names, tid) : NULL;
    char id[16];
    snprintf(id, sizeof id, "%" PRIu32, tid);
    bool yes = false;
    for (guint i = 0; i < p->o->thread_sel->len && !yes; i++) {
        const char *want = p->o->thread_sel->pdata[i];
        yes = !strcmp(want, id) || (name && g_pattern_match_simple(want, name));
    }
    g_hash_table_insert(p->chosen, GUINT_TO_POINTER(tid), GUINT_TO_POINTER(yes ? 1 : 2));
    p->nchosen += yes;
    return yes;
}

static int progress_forward(const fl_event *ev, void *ctx)
{
    progress_sink *p = ctx;
    if (p->tty)
        progress_note(p, ev);
    p->events++;
    if (p->chosen && !thread_chosen(p, ev->tid))
        return 0;
    if (p->windowed && ev->kind != FL_SEGMENT && (ev->tsc < p->lo || ev->tsc >= p->hi)) {
        /* an origin no profile counts: the stack follows, nothing is added */
        fl_event outside = *ev;
        outside.origin = FL_ORIGIN_COUNT;
        return p->sink(&outside, p->ctx);
    }
    return p->sink(ev, p->ctx);
}

typedef struct tsc_span {
    uint64_t min, max;
    bool any;
} tsc_span;

static int tsc_span_sink(const fl_event *ev, void *ctx)
{
    tsc_span *m = ctx;
    if (!m->any || ev->tsc < m->min)
        m->min = ev->tsc;
    if (!m->any || ev->tsc > m->max)
        m->max = ev->tsc;
    m->any = true;
    return 0;
}

/* The TSC bounds of --from / --to for the trace in dir: a pass of its own
 * finds the run's first and last events. Returns 0, -1 after printing why. */
static int window_bounds(const char *dir, const prof_opts *o, uint64_t *lo, uint64_t *hi)
{
    tsc_span span = { 0 };
    char err[1024];
    if (pf_flow_source(dir, tsc_span_sink, &span, err, sizeof err) < 0) {
        jerr_error("%s", err);
        return -1;
    }
    pf_timebase tb;
    if (pf_timebase_read(dir, o->tsc_hz, &tb, err, sizeof err) < 0)
        tb.hz = o->tsc_hz;
    const char kinds[2] = { o->from_kind, o->to_kind };
    const double values[2] = { o->from, o->to };
    uint64_t *bound[2] = { lo, hi };
    *lo = span.min;
    *hi = span.max + 1;      /* [lo, hi): two windows meeting at a bound share no event */
    for (int i = 0; i < 2; i++) {
        double ticks;
        if (kinds[i] == 'n')
            continue;
        if (kinds[i] == '%') {
            ticks = (double)(span.max - span.min) * values[i] / 100.0;
        } else if (tb.hz > 0) {
            ticks = values[i] * tb.hz / 1e9;
        } else {
            jerr_error("%s: --from / --to in time need the TSC frequency, which the trace does "
                       "not record (give --tsc-hz HZ, or a share: 25%%)", dir);
            return -1;
        }
        *bound[i] = span.min + (ticks < (double)(span.max - span.min) ? (uint64_t)ticks
                                                                      : span.max - span.min + 1);
    }
    if (*lo > *hi)
        jerr_warn("%s: --from is after --to: nothing is counted", dir);
    return 0;
}

int prof_read_flow_counted(const char *dir, const prof_opts *o, fl_sink sink, void *ctx,
                           uint64_t *events, pf_flow_stats *fs)
{
    progress_sink p = { .sink = sink, .ctx = ctx, .tty = isatty(STDERR_FILENO), .o = o,
                        .dir = dir };
    if (p.tty) {
        p.start_us = g_get_monotonic_time();
        p.total_bytes = streams_size(dir);
    }
    if (o && (o->from_kind != 'n' || o->to_kind != 'n')) {
        if (window_bounds(dir, o, &p.lo, &p.hi) < 0)
            return -1;
        p.windowed = true;
    }
    if (o && o->thread_sel)
        p.chosen = g_hash_table_new(g_direct_hash, g_direct_equal);
    char err[1024];
    int rc = pf_flow_source_stats(dir, progress_forward, &p, fs, err, sizeof err);
    if (p.chosen) {
        if (rc >= 0 && p.nchosen == 0) {
            GString *ids = g_string_new(NULL);
            for (guint i = 0; i < o->thread_sel->len; i++)
                g_string_append_printf(ids, "%s'%s'", i ? ", " : "",
                                       (const char *)o->thread_sel->pdata[i]);
            jerr_warn("%s: no thread matches --thread %s (a tid, or a glob over thread names; "
                      "'ptdecode DIR' lists them)", dir, ids->str);
            g_string_free(ids, TRUE);
        }
        g_hash_table_destroy(p.chosen);
    }
    if (p.shown)
        fprintf(stderr, "\r\033[K");
    if (events)
        *events = p.events;
    if (rc < 0) {
        jerr_error("%s", err);
        return -1;
    }
    return 0;
}

int prof_read_flow(const char *dir, const prof_opts *o, fl_sink sink, void *ctx)
{
    return prof_read_flow_counted(dir, o, sink, ctx, NULL, NULL);
}

/* Sees every event before the tree builder does (the summary's counts). */
typedef struct tap_sink {
    fl_sink tap, sink;
    void *tap_ctx, *ctx;
} tap_sink;

static int tap_forward(const fl_event *ev, void *vt)
{
    tap_sink *t = vt;
    t->tap(ev, t->tap_ctx);
    return t->sink(ev, t->ctx);
}

void prof_cct_build_init(prof_cct_build *b, const prof_opts *o)
{
    b->par = o->threads > 1 ? pf_par_new(&o->cct, o->threads, 1u << 16) : NULL;
    b->seq = b->par ? NULL : pf_seq_new(&o->cct);
}

int prof_cct_build_sink(const fl_event *ev, void *vb)
{
    prof_cct_build *b = vb;
    return b->par ? pf_par_sink(ev, b->par) : pf_seq_sink(ev, b->seq);
}

pf_cct *prof_cct_build_finish(prof_cct_build *b, const char *dir, const prof_opts *o,
                              bool none)
{
    pf_cct *t = b->par ? pf_par_finish(b->par) : pf_seq_finish(b->seq);
    b->par = NULL;
    b->seq = NULL;
    if (none) {
        pf_cct_free(t);
        return NULL;
    }
    if (!t) {
        jerr_error("out of memory building the calling context tree");
        return NULL;
    }
    /* The parallel builder finalizes already. */
    pf_cct *fin = t->finalized ? t : pf_cct_finalize(t);
    if (fin != t)
        pf_cct_free(t);
    if (fin && !pf_focus_empty(o->focus)) {
        pf_cct *part = pf_focus_apply(o->focus, fin, o->names);
        pf_cct_free(fin);
        fin = part;
        for (size_t i = 0; fin && pf_focus_unmatched(o->focus, i); i++)
            jerr_warn("%s: no method matches '%s' (--include / --exclude: %s)", dir,
                      pf_focus_unmatched(o->focus, i), PF_PATTERN_STYLES);
    }
    if (!fin)
        jerr_error("out of memory building the calling context tree");
    return fin;
}

pf_cct *prof_build_cct_tapped(const char *dir, const prof_opts *o, bool *partial, fl_sink tap,
                              void *tap_ctx, pf_flow_stats *fs)
{
    uint64_t events = 0;
    prof_cct_build b;
    prof_cct_build_init(&b, o);
    tap_sink ts = { .tap = tap, .tap_ctx = tap_ctx, .sink = prof_cct_build_sink, .ctx = &b };
    int rc = prof_read_flow_counted(dir, o, tap ? tap_forward : prof_cct_build_sink,
                               tap ? (void *)&ts : &b, &events, fs);
    *partial = rc < 0;
    return prof_cct_build_finish(&b, dir, o, rc < 0 && events == 0);
}

pf_cct *prof_build_cct(const char *dir, const prof_opts *o, bool *partial)
{
    return prof_build_cct_tapped(dir, o, partial, NULL, NULL, NULL);
}

pf_cct *ptd_context_tree(const char *dir)
{
    prof_opts o = { .cct = pf_cct_default_opts(), .threads = 1, .from_kind = 'n', .to_kind = 'n' };
    bool partial;
    pf_cct *t = prof_build_cct(dir, &o, &partial);
    pf_cct *e = t ? pf_ccenc_tree(t) : NULL;
    if (t && !e)
        jerr_error("out of memory building the calling context tree");
    pf_cct_free(t);
    return e;
}

pf_names *prof_load_names(const char *dir, prof_opts *o)
{
    char err[1024];
    pf_names *n = pf_names_load(dir, err, sizeof err);
    if (!n)
        jerr_error("%s", err);
    else
        pf_names_set_simple(n, o->simple);
    o->names = n;
    return n;
}

pf_timebase prof_load_timebase(const char *dir, const prof_opts *o)
{
    pf_timebase tb;
    char err[1024];
    if (pf_timebase_read(dir, o->tsc_hz, &tb, err, sizeof err) < 0)
        jerr_warn("%s; %s", err, tb.hz > 0 ? "using --tsc-hz" : "times stay in TSC ticks");
    return tb;
}

