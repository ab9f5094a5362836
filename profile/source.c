/* The flow source of the profile commands (see source.h). */
#include "profile/source.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <glib.h>
#include <inttypes.h>

#include "common/jerr.h"
#include "common/jmeta.h"
#include "decoder/percpu.h"
#include "reconstruct/reference.h"
#include "reconstruct/trace.h"
#include "recover/recover.h"

static pf_source_opts options;

void pf_source_set_options(const pf_source_opts *o)
{
    options = *o;
}

const pf_source_opts *pf_source_options(void)
{
    return &options;
}

static unsigned jobs(void)
{
    return options.jobs ? options.jobs : g_get_num_processors();
}

/* The process's CPU time: decoding runs on several threads. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The decoder's counts the summary reports, summed over streams. */
static void dc_sum(dc_stats *a, const dc_stats *b)
{
    a->pt_bytes += b->pt_bytes;
    a->lost_bytes += b->lost_bytes;
    a->missing_bytes += b->missing_bytes;
    a->unindexed_bytes += b->unindexed_bytes;
    a->problems += b->problems;
    if (!a->problem[0])
        memcpy(a->problem, b->problem, sizeof a->problem);
    a->skipped_bytes += b->skipped_bytes;
    a->insns += b->insns;
    for (int i = 0; i < 5; i++)
        a->gaps[i] += b->gaps[i];
}

/* ---- the flow's consumer: recovery, the cache, the request ---------------
 *
 * It runs on the calling thread; decoding and projection feed it there
 * (one job) or from a thread of their own through a pipe. */

typedef struct consumer {
    const pf_flow_request *rq;
    const char *dir;
    fc_writer *cache;          /* NULL: none is made */
    bool recover;
    rv_icfg ic;
    rv_filter *rv;
    bool stopped;              /* the request's sink stopped */
    bool thread_stopped;       /* ... this thread's flow (stop_thread_only) */
    unsigned thread;           /* threads begun */
    atomic_bool *stop;         /* tells the producer so */
    atomic_uint *stop_thread;  /* ... the thread's, 1 + its number */
    pf_flow_stats *fs;
    rp_stats total;
} consumer;

/* After recovery: into the cache, and to the request's sink. */
static int tee(const fl_event *ev, void *vc)
{
    consumer *c = vc;
    if (c->stopped)
        return 1;
    if (c->cache)
        fc_write_event(ev, c->cache);
    if (c->rq->decoded_only && ev->origin != FL_DECODED)
        return 0;
    if (c->rq->sink && c->rq->sink(ev, c->rq->ctx)) {
        /* a flow the sink did not take whole is not cached */
        fc_writer_abort(c->cache);
        c->cache = NULL;
        if (c->rq->stop_thread_only) {
            c->thread_stopped = true;
            if (c->stop_thread)
                atomic_store(c->stop_thread, c->thread);
        } else {
            c->stopped = true;
            if (c->stop)
                atomic_store(c->stop, true);
        }
        return 1;
    }
    return 0;
}

static void cons_begin(consumer *c, uint32_t tid)
{
    c->thread++;
    c->thread_stopped = false;
    if (c->recover) {
        rv_options ro = { .icfg = &c->ic };
        c->rv = rv_new(&ro, tee, c);
    }
    if (c->cache)
        fc_write_thread_begin(c->cache, tid);
    if (c->rq->begin)
        c->rq->begin(tid, c->rq->ctx);
}

static int cons_event(consumer *c, const fl_event *ev)
{
    if (c->stopped || c->thread_stopped)
        return 1;
    return c->rv ? rv_event(ev, c->rv) : tee(ev, c);
}

/* A thread's counts into the totals, and what they warn about. */
static void account(consumer *c, const fc_thread *th)
{
    if (c->rq->warn_counts) {
        if (th->dc.problems)
            jerr_warn_kind("decode problem", "%s", th->dc.problem);
        if (th->rc == 0 && th->dc.pt_bytes && !th->dc.blocks)
            jerr_warn_kind("stream undecodable", "%s: thread %u: none of its %" PRIu64 " bytes "
                           "of PT could be decoded into instructions", c->dir, th->tid,
                           th->dc.pt_bytes);
    }
    rp_stats_add(&c->total, &th->rp);
    if (c->fs) {
        c->fs->streams++;
        dc_sum(&c->fs->dc, &th->dc);
        rv_stats_add(&c->fs->rv, &th->rv);
    }
}

static void cons_end(consumer *c, fc_thread *th)
{
    if (c->rv) {
        rv_finish(c->rv, &th->rv);
        rv_free(c->rv);
        c->rv = NULL;
    }
    if (c->cache)
        fc_write_thread_end(c->cache, th);
    account(c, th);
    if (c->rq->end)
        c->rq->end(th, c->rq->ctx);
}

static void total_warnings(consumer *c)
{
    const rp_stats *t = &c->total;
    if (!c->rq->warn_counts)
        return;
    if (t->bytecodes && t->placed < t->bytecodes)
        jerr_warn("%s: %" PRIu64 " of %" PRIu64 " interpreted bytecodes could not be placed "
                  "in a method", c->dir, t->bytecodes - t->placed, t->bytecodes);
    if (t->segments_unresolved)
        jerr_warn("%s: %" PRIu64 " of %" PRIu64 " flow segments end unresolved (their calling "
                  "context had to be found again)", c->dir, t->segments_unresolved,
                  t->segments);
}

/* ---- the pipe from the producer's thread ---------------------------------- */

#define PIPE_EVENTS 4096u
#define PIPE_BATCHES 8u

enum { B_EVENTS, B_BEGIN, B_END, B_DONE };

typedef struct batch {
    int type;
    uint32_t n;
    fl_event ev[PIPE_EVENTS];
    size_t at[PIPE_EVENTS];    /* where a segment's stack starts in stack */
    uint64_t *stack;
    size_t nstack, capstack;
    fc_thread th;              /* B_BEGIN: tid; B_END: the thread's result */
} batch;

typedef struct flow_pipe {
    GAsyncQueue *full, *empty;
    batch *cur;                /* the producer's, filling */
} flow_pipe;

static void pipe_send(flow_pipe *pp)
{
    g_async_queue_push(pp->full, pp->cur);
    pp->cur = NULL;
}

static batch *pipe_batch(flow_pipe *pp)
{
    if (!pp->cur)
        pp->cur = g_async_queue_pop(pp->empty);
    return pp->cur;
}

static void pipe_event(flow_pipe *pp, const fl_event *ev)
{
    batch *b = pipe_batch(pp);
    b->ev[b->n] = *ev;
    if (ev->depth && ev->stack) {
        if (b->nstack + ev->depth > b->capstack) {
            b->capstack = 2 * (b->nstack + ev->depth);
            b->stack = g_realloc_n(b->stack, b->capstack, sizeof *b->stack);
        }
        memcpy(b->stack + b->nstack, ev->stack, ev->depth * sizeof *ev->stack);
        b->at[b->n] = b->nstack;
        b->nstack += ev->depth;
    }
    if (++b->n == PIPE_EVENTS)
        pipe_send(pp);
}

/* A marker after the events before it. */
static void pipe_mark(flow_pipe *pp, int type, const fc_thread *th)
{
    if (pp->cur && pp->cur->n)
        pipe_send(pp);
    batch *b = pipe_batch(pp);
    b->type = type;
    b->th = *th;
    pipe_send(pp);
}

/* ---- the producer: decoding and projection, thread by thread ------------- */

typedef struct producer {
    rt_trace *t;
    const uint32_t *tids;
    size_t n;
    int64_t want;              /* -1 every thread */
    consumer *c;               /* one job: fed directly */
    flow_pipe *pp;             /* else through this */
    atomic_bool stop;
    atomic_uint stop_thread;   /* 1 + the number of a thread to stop */
    unsigned thread;           /* 1 + the number of the thread being decoded */
    int rc;                    /* 0, 1 stopped, -1 a stream could not be read (err) */
    char err[1024];
} producer;

static int produce_event(const fl_event *ev, void *vp)
{
    producer *p = vp;
    if (!p->pp)
        return cons_event(p->c, ev);
    if (atomic_load_explicit(&p->stop, memory_order_relaxed) ||
        atomic_load_explicit(&p->stop_thread, memory_order_relaxed) == p->thread)
        return 1;
    pipe_event(p->pp, ev);
    return 0;
}

static void produce(producer *p)
{
    for (size_t i = 0; i < p->n; i++) {
        uint32_t tid = p->tids[i];
        if (p->want >= 0 && tid != (uint32_t)p->want)
            continue;
        fc_thread th;
        memset(&th, 0, sizeof th);
        th.tid = tid;
        p->thread++;
        if (p->pp)
            pipe_mark(p->pp, B_BEGIN, &th);
        else
            cons_begin(p->c, tid);
        uint64_t t0 = cpu_ns();
        rt_flow_out out = { .sink = produce_event, .ctx = p, .st = &th.rp, .dst = &th.dc };
        int r = rt_thread_flow(p->t, tid, &out, th.err, sizeof th.err);
        th.cpu_ns = cpu_ns() - t0;
        th.rc = r < 0 ? -1 : 0;
        if (p->pp)
            pipe_mark(p->pp, B_END, &th);
        else
            cons_end(p->c, &th);
        if (r < 0) {
            if (p->rc >= 0)
                snprintf(p->err, sizeof p->err, "%s", th.err);
            p->rc = -1;
            if (!p->c->rq->keep_going)
                break;
        }
        bool stopped = p->pp ? atomic_load(&p->stop) : p->c->stopped;
        if (stopped || (r > 0 && !p->c->rq->stop_thread_only)) {
            p->rc = p->rc < 0 ? p->rc : 1;
            break;
        }
    }
    if (p->pp) {
        fc_thread none = { 0 };
        pipe_mark(p->pp, B_DONE, &none);
    }
}

static gpointer producer_main(gpointer vp)
{
    produce(vp);
    return NULL;
}

/* Decodes on a thread of its own and consumes here. */
static void run_piped(producer *p, consumer *c)
{
    flow_pipe pp = { .full = g_async_queue_new(), .empty = g_async_queue_new() };
    batch *all[PIPE_BATCHES];
    for (unsigned i = 0; i < PIPE_BATCHES; i++) {
        all[i] = g_new0(batch, 1);
        g_async_queue_push(pp.empty, all[i]);
    }
    p->pp = &pp;
    c->stop = &p->stop;
    c->stop_thread = &p->stop_thread;
    GThread *th = g_thread_new("jpt-decode", producer_main, p);
    for (bool done = false; !done;) {
        batch *b = g_async_queue_pop(pp.full);
        switch (b->type) {
        case B_BEGIN:
            cons_begin(c, b->th.tid);
            break;
        case B_END:
            cons_end(c, &b->th);
            break;
        case B_DONE:
            done = true;
            break;
        default:
            for (uint32_t i = 0; i < b->n && !c->stopped; i++) {
                fl_event *ev = &b->ev[i];
                if (ev->depth && ev->stack)
                    ev->stack = b->stack + b->at[i];
                cons_event(c, ev);
            }
            break;
        }
        b->type = B_EVENTS;
        b->n = 0;
        b->nstack = 0;
        g_async_queue_push(pp.empty, b);
    }
    g_thread_join(th);
    for (unsigned i = 0; i < PIPE_BATCHES; i++) {
        g_free(all[i]->stack);
        g_free(all[i]);
    }
    g_async_queue_unref(pp.full);
    g_async_queue_unref(pp.empty);
    c->stop = NULL;
    c->stop_thread = NULL;
}

/* ---- the cache ----------------------------------------------------------- */

/* What the cache of dir must have been made from; false when the trace's
 * inputs cannot be read (no cache then). */
static bool cache_key(const char *dir, fc_key *key)
{
    char err[1024];
    key->producer = fc_producer();
    key->options = 0;
    if (fc_trace_inputs(dir, key, err, sizeof err) < 0)
        return false;
    return true;
}

/* The stat of every input file, to tell whether the trace changed while it
 * was decoded (a recording still being written). */
static uint64_t inputs_stamp(const char *dir)
{
    static const char *const subs[] = { "pt", "sideband", "jvm" };
    uint64_t h = 0;
    char *info = g_build_filename(dir, "info.json", NULL);
    struct stat st;
    if (stat(info, &st) == 0)
        h ^= (uint64_t)st.st_size * 31 + (uint64_t)st.st_mtim.tv_nsec + (uint64_t)st.st_mtime;
    g_free(info);
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        char *d = g_build_filename(dir, subs[i], NULL);
        GDir *gd = g_dir_open(d, 0, NULL);
        for (const char *e; gd && (e = g_dir_read_name(gd));) {
            char *p = g_build_filename(d, e, NULL);
            if (stat(p, &st) == 0)
                h += g_str_hash(e) * ((uint64_t)st.st_size + 1) +
                     ((uint64_t)st.st_mtime * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec);
            g_free(p);
        }
        if (gd)
            g_dir_close(gd);
        g_free(d);
    }
    return h;
}

typedef struct replay_ctx {
    consumer *c;
    const pf_flow_request *rq;
    bool thread_stopped;
} replay_ctx;

static bool replay_want(uint32_t tid, void *vr)
{
    replay_ctx *r = vr;
    return r->rq->tid < 0 || tid == (uint32_t)r->rq->tid;
}

static void replay_begin(uint32_t tid, void *vr)
{
    replay_ctx *r = vr;
    r->thread_stopped = false;
    if (r->rq->begin)
        r->rq->begin(tid, r->rq->ctx);
}

static int replay_event(const fl_event *ev, void *vr)
{
    replay_ctx *r = vr;
    if (r->thread_stopped || !r->rq->sink || !r->rq->sink(ev, r->rq->ctx))
        return 0;
    if (!r->rq->stop_thread_only)
        return 1;
    r->thread_stopped = true;
    return 0;
}

static void replay_end(const fc_thread *t, void *vr)
{
    replay_ctx *r = vr;
    fc_thread th = *t;
    if (r->rq->decoded_only)
        memset(&th.rv, 0, sizeof th.rv);
    account(r->c, &th);
    if (r->rq->end)
        r->rq->end(&th, r->rq->ctx);
}

/* The flow from the cache: as decoding would deliver it. */
static int replay(fc_reader *fr, const char *dir, const pf_flow_request *rq, pf_flow_stats *fs,
                  char *err, size_t errlen)
{
    if (!rq->trace) {
        const char *const *lines;
        size_t n = fc_warnings(fr, &lines);
        for (size_t i = 0; i < n; i++)
            jerr_warn("%s", lines[i]);
        n = fc_trace_warnings(fr, &lines);
        for (size_t i = 0; i < n; i++)
            jerr_warn_grouped(lines[i]);
    }
    const fc_thread *th;
    size_t nth = fc_threads(fr, &th);
    bool found = rq->tid < 0;
    for (size_t i = 0; i < nth && !found; i++)
        found = th[i].tid == (uint64_t)rq->tid;
    if (!found) {
        snprintf(err, errlen, "%s/pt: no stream for thread %" PRId64, dir, rq->tid);
        return -1;
    }
    consumer c = { .rq = rq, .dir = dir, .fs = fs };
    replay_ctx r = { .c = &c, .rq = rq };
    fc_replay how = { .want = replay_want, .begin = replay_begin, .sink = replay_event,
                      .end = replay_end, .decoded_only = rq->decoded_only, .ctx = &r };
    fs->cached = true;
    int rc = fc_replay_flow(fr, &how, err, errlen);
    if (rc == 0)
        total_warnings(&c);
    fs->rp = c.total;
    return rc;
}

/* ---- a traced run -------------------------------------------------------- */

static int no_threads(const char *dir, size_t ncpu, char *err, size_t errlen)
{
    /* No threads from per-CPU streams: the split failed (its reason), or it
     * worked and found no thread's trace. */
    char serr[768];
    if (ncpu && !dc_thread_stream_dir(dir, serr, sizeof serr))
        snprintf(err, errlen, "%s/pt: splitting the per-CPU streams into threads failed: %s",
                 dir, serr);
    else
        snprintf(err, errlen, "%s/pt: no per-thread PT streams (tid-<TID>.pt)%s", dir,
                 ncpu ? "; the per-CPU streams hold no thread's trace" : "");
    return -1;
}

static bool has_thread(const uint32_t *tids, size_t n, uint32_t tid)
{
    for (size_t i = 0; i < n; i++)
        if (tids[i] == tid)
            return true;
    return false;
}

static int traced_flow(const char *dir, const pf_flow_request *rq, pf_flow_stats *fs,
                       char *err, size_t errlen)
{
    bool use_cache = !options.no_cache;
    fc_key key;
    char *path = fc_path(dir);
    if (use_cache && !cache_key(dir, &key))
        use_cache = false;
    if (use_cache) {
        fc_reader *fr;
        char why[1024];
        int ok = fc_open(path, &key, &fr, why, sizeof why);
        if (ok == 1) {
            int rc = replay(fr, dir, rq, fs, err, errlen);
            fc_close(fr);
            g_free(path);
            return rc;
        }
        if (ok < 0)
            jerr_warn("%s (the decoded-flow cache is made again)", why);
    }

    rt_trace *t = rq->trace;
    if (!t) {
        t = rt_open(dir, err, errlen);
        if (!t) {
            g_free(path);
            return -1;
        }
        const char *const *warn;
        size_t nw = rt_warnings(t, &warn);
        for (size_t i = 0; i < nw; i++)
            jerr_warn_grouped(warn[i]);
    }
    const uint32_t *tids;
    size_t ncpu;
    size_t n = rt_threads(t, &tids, &ncpu);
    if (!n) {
        if (t != rq->trace)
            rt_close(t);
        g_free(path);
        return no_threads(dir, ncpu, err, errlen);
    }
    if (rq->tid >= 0 && !has_thread(tids, n, (uint32_t)rq->tid)) {
        if (t != rq->trace)
            rt_close(t);
        g_free(path);
        snprintf(err, errlen, "%s/pt: no stream for thread %" PRId64, dir, rq->tid);
        return -1;
    }
    unsigned nj = jobs();
    dc_options dopt = { .threads = nj };
    rt_set_decode_options(t, &dopt);

    /* The cache is made when the whole flow is read. */
    consumer c = { .rq = rq, .dir = dir, .fs = fs, .ic = rv_program_icfg(rt_program(t)) };
    uint64_t stamp = 0;
    if (use_cache && rq->tid < 0) {
        char werr[1024];
        c.cache = fc_writer_new(path, &key, werr, sizeof werr);
        if (!c.cache) {
            jerr_warn("%s (the flow is not cached)", werr);
        } else {
            GPtrArray *split = g_ptr_array_new_with_free_func(g_free);
            dc_percpu_warnings(dir, split);
            for (guint i = 0; i < split->len; i++)
                fc_write_warning(c.cache, split->pdata[i]);
            g_ptr_array_free(split, TRUE);
            const char *const *warn;
            size_t nw = rt_warnings(t, &warn);
            for (size_t i = 0; i < nw; i++)
                fc_write_trace_warning(c.cache, warn[i]);
            stamp = inputs_stamp(dir);
        }
    }
    c.recover = !rq->decoded_only || c.cache;
    producer p = { .t = t, .tids = tids, .n = n, .want = rq->tid, .c = &c };
    atomic_init(&p.stop, false);
    atomic_init(&p.stop_thread, 0);
    if (nj > 1)
        run_piped(&p, &c);
    else
        produce(&p);
    int rc = p.rc;
    if (rc == 0 && c.stopped)
        rc = 1;
    if (rc < 0)
        snprintf(err, errlen, "%s", p.err);
    if (rc == 0)
        total_warnings(&c);
    if (c.cache) {
        char werr[1024];
        if (rc != 0 || c.stopped || inputs_stamp(dir) != stamp)
            fc_writer_abort(c.cache);
        else if (fc_writer_commit(c.cache, werr, sizeof werr) < 0)
            jerr_warn("%s (the flow is not cached)", werr);
        else
            fs->cache_written = true;
    }
    if (fs)
        fs->rp = c.total;
    if (t != rq->trace)
        rt_close(t);
    g_free(path);
    return rc;
}

int pf_flow_read(const char *dir, const pf_flow_request *rq, pf_flow_stats *st, char *err,
                 size_t errlen)
{
    pf_flow_stats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    int mode = ref_trace_mode(dir, err, errlen);
    if (mode < 0)
        return -1;
    if (mode == JM_MODE_REFERENCE)
        return ref_flow_read(dir, rq->sink, rq->ctx, NULL, err, errlen);
    st->traced = true;
    return traced_flow(dir, rq, st, err, errlen);
}

int pf_flow_source_stats(const char *dir, fl_sink sink, void *ctx, pf_flow_stats *st,
                         char *err, size_t errlen)
{
    pf_flow_request rq = { .sink = sink, .ctx = ctx, .tid = -1, .warn_counts = true };
    return pf_flow_read(dir, &rq, st, err, errlen);
}

int pf_flow_source(const char *dir, fl_sink sink, void *ctx, char *err, size_t errlen)
{
    return pf_flow_source_stats(dir, sink, ctx, NULL, err, errlen);
}

uint64_t pf_dc_gaps(const dc_stats *dc)
{
    /* gaps[0] is no gap (DC_GAP_NONE) */
    return dc->gaps[1] + dc->gaps[2] + dc->gaps[3] + dc->gaps[4];
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 100.0;
}

double pf_share_missing(const dc_stats *dc)
{
    if (!dc->pt_bytes && !dc->lost_bytes)
        return 0;
    return pct(dc->lost_bytes, dc->pt_bytes + dc->lost_bytes);
}

double pf_share_decoded(const dc_stats *dc, const rp_stats *rp)
{
    uint64_t skipped = dc->skipped_bytes < dc->pt_bytes ? dc->skipped_bytes : dc->pt_bytes;
    return pct(rp->placed, rp->bytecodes) * pct(dc->pt_bytes - skipped, dc->pt_bytes) / 100.0;
}
