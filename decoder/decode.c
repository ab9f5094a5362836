/* The stream (chunk.h): segments between the collector's losses, cut into
 * chunks at PSBs, decoded on a thread pool and replayed in stream order;
 * the public calls of decode.h. */
#include "decoder/decode.h"
#include "decoder/chunk.h"
#include "decoder/percpu.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "common/auxidx.h"
#include "common/fileio.h"
#include "common/jerr.h"
#include "decoder/jitpath.h"

/* qsort, which must not be given a NULL array even when it is empty. */
static void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

static const char *const kind_names[DC_KIND_COUNT] = {
    [DC_BYTECODE] = "bytecode", [DC_METHOD_ENTRY] = "method-entry",
    [DC_INTERP_RETURN] = "interp-return", [DC_EARLYRET] = "earlyret", [DC_DEOPT] = "deopt",
    [DC_EXCEPTION] = "exception", [DC_THROW] = "throw", [DC_SAFEPOINT] = "safepoint",
    [DC_NATIVE] = "native", [DC_INTERP_OTHER] = "interp-other", [DC_JIT_ENTER] = "jit-enter",
    [DC_JIT] = "jit", [DC_INLINE_CALL] = "inline-call", [DC_INLINE_RETURN] = "inline-return",
    [DC_STUB] = "stub", [DC_CODE_OTHER] = "code", [DC_GAP] = "gap",
    [DC_JIT_BYTECODE] = "jit-bytecode", [DC_UNWOUND] = "unwound",
};

const char *dc_kind_name(dc_kind k)
{
    return (unsigned)k < DC_KIND_COUNT && kind_names[k] ? kind_names[k] : "?";
}

const char *dc_gap_reason_name(dc_gap_reason r)
{
    switch (r) {
    case DC_GAP_NONE: return "none";
    case DC_GAP_LOST: return "lost";
    case DC_GAP_OVERFLOW: return "overflow";
    case DC_GAP_DECODE: return "decode-error";
    case DC_GAP_NOCODE: return "no-code";
    }
    return "?";
}


/* ---- the stream ----------------------------------------------------------- */

/* The stream's segments between the collector's losses, for a file of
 * file_size bytes; *size is set to the bytes to decode: those the index
 * delivered (docs/FORMAT.md, "Damage and loss"). Index bytes past the
 * file's end are a loss at its end; file bytes past the index are counted,
 * not decoded. */
static GArray *segments(uint64_t file_size, const char *idx_path, dc_stats *st, uint64_t *size)
{
    GArray *segs = g_array_new(FALSE, FALSE, sizeof(segment));
    auxidx idx = { 0 };
    char err[512];
    bool have = false;
    *size = file_size;
    if (idx_path && access(idx_path, F_OK) == 0) {
        int rc = auxidx_load(idx_path, &idx, err, sizeof err);
        if (rc < 0)
            dc_problem(st, "%s (losses unknown: decoding the stream as one piece)", err);
        else
            have = true;
    }
    auxidx_extent ext = { .decode = file_size };
    if (have) {
        ext = auxidx_extent_of(&idx, file_size);
        *size = ext.decode;
        st->missing_bytes = ext.missing;
        st->unindexed_bytes = ext.unindexed;
        st->lost_bytes += ext.missing;
    }
    uint64_t end = *size;
    segment cur = { .begin = 0 };
    for (size_t i = 0; have && i < idx.n; i++) {
        const auxidx_rec *r = &idx.recs[i];
        if (!(r->flags & AUXIDX_TRUNCATED))
            continue;
        uint64_t cut = r->offset + r->size;
        if (cut > end)
            cut = end;
        st->lost_bytes += r->lost_bytes;
        if (cut <= cur.begin) {
            cur.lost_before += r->lost_bytes;
            cur.loss_before = true;
            continue;
        }
        cur.end = cut;
        g_array_append_val(segs, cur);
        cur = (segment){ .begin = cut, .lost_before = r->lost_bytes, .loss_before = true };
    }
    cur.end = end;
    if (ext.missing) {
        /* The file was cut: what the index says followed is lost at its end. */
        if (cur.end > cur.begin) {
            g_array_append_val(segs, cur);
            cur = (segment){ .begin = end, .end = end };
        }
        cur.loss_before = true;
        cur.lost_before += ext.missing;
    }
    if (cur.end > cur.begin || cur.loss_before)
        g_array_append_val(segs, cur);
    if (have)
        auxidx_free(&idx);
    return segs;
}

static const uint8_t psb_pattern[16] = { 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                         0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82 };

/* The end of the PSB+ header of the PSB at off in [begin, end), or 0 if no
 * well-formed one is there. */
uint64_t dc_psb_header_end(const uint8_t *buf, uint64_t begin, uint64_t end, uint64_t off)
{
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf + begin;
    cfg.end = (uint8_t *)buf + end;
    struct pt_packet_decoder *pd = pt_pkt_alloc_decoder(&cfg);
    if (!pd)
        return 0;
    uint64_t res = 0;
    if (pt_pkt_sync_set(pd, off - begin) >= 0) {
        struct pt_packet p;
        for (int i = 0; i < 64; i++) {
            if (pt_pkt_next(pd, &p, sizeof p) < 0)
                break;
            if (i == 0 && p.type != ppt_psb)
                break;
            if (p.type == ppt_psbend) {
                uint64_t o = 0;
                if (pt_pkt_get_offset(pd, &o) >= 0)
                    res = begin + o;
                break;
            }
            if (i > 0 && p.type == ppt_psb)
                break;
        }
    }
    pt_pkt_free_decoder(pd);
    return res;
}

/* Cuts segment s into chunks of at least chunk_bytes at PSBs. A chunk's
 * decoder is given the bytes up to the end of the PSB+ after the next
 * chunk's start: libipt reads ahead (after an OVF, to the next FUP), and
 * reads what a decoder of the whole segment would read. */
static void add_chunks(GPtrArray *chunks, const uint8_t *buf, const segment *s,
                       uint64_t chunk_bytes)
{
    guint first_index = chunks->len;
    uint64_t begin = s->begin;
    bool first = true;
    for (;;) {
        uint64_t stop = s->end, hend = s->end;
        uint64_t from = begin + chunk_bytes;
        while (from + sizeof psb_pattern <= s->end && from > begin) {
            const uint8_t *p = memmem(buf + from, s->end - from, psb_pattern, sizeof psb_pattern);
            if (!p)
                break;
            uint64_t off = (uint64_t)(p - buf);
            uint64_t he = dc_psb_header_end(buf, s->begin, s->end, off);
            if (he) {
                stop = off;
                hend = he;
                break;
            }
            from = off + 2;
        }
        chunk *k = g_new0(chunk, 1);
        k->seg = s;
        k->first = first;
        k->begin = begin;
        k->stop = stop;
        k->end = hend;
        k->last = stop >= s->end;
        g_ptr_array_add(chunks, k);
        if (k->last)
            break;
        begin = stop;
        first = false;
    }
    for (guint i = first_index; i < chunks->len; i++) {
        chunk *k = g_ptr_array_index(chunks, i);
        k->end = i + 1 < chunks->len ? ((chunk *)g_ptr_array_index(chunks, i + 1))->end : s->end;
    }
}

/* A chunk's buffers, kept for the next chunk (no fresh pages each time). */
typedef struct bufs {
    GArray *ops, *runs, *blocks;
} bufs;

static void bufs_free(gpointer p)
{
    bufs *b = p;
    g_array_free(b->ops, TRUE);
    g_array_free(b->runs, TRUE);
    if (b->blocks)
        g_array_free(b->blocks, TRUE);
    g_free(b);
}

/* Gives the chunk's buffers back (for the next chunk). */
static void chunk_release(chunk *k, GAsyncQueue *spare)
{
    if (k->ops) {
        bufs *b = g_new(bufs, 1);
        *b = (bufs){ k->ops, k->runs, k->blocks };
        g_array_set_size(b->ops, 0);
        g_array_set_size(b->runs, 0);
        if (b->blocks)
            g_array_set_size(b->blocks, 0);
        if (spare)
            g_async_queue_push(spare, b);
        else
            bufs_free(b);
    }
    k->ops = k->runs = k->blocks = NULL;
}

static void chunk_clear(chunk *k, GAsyncQueue *spare)
{
    chunk_release(k, spare);
    memset(&k->st, 0, sizeof k->st);
}

typedef struct job {
    const dm_model *m;
    di_cache *cache;
    const dc_trace_info *info;
    GAsyncQueue *workers;      /* idle wctx */
    GAsyncQueue *spare;        /* bufs */
    GMutex lock;
    GCond cond;
} job;

static wctx *wctx_new(job *j)
{
    wctx *w = g_new0(wctx, 1);
    w->m = j->m;
    w->cache = j->cache;
    w->info = j->info;
    w->jp = jp_new(j->m);
    return w;
}

static void wctx_free(wctx *w)
{
    if (!w)
        return;
    jp_free(w->jp);
    if (w->failed)
        g_hash_table_destroy(w->failed);
    g_free(w);
}

/* libipt's block decoder follows its block cache recursively: one stack
 * frame (about 200 bytes in libipt 2.0) per cached decision point until the
 * block ends, and a block ends at the latest after 65535 instructions
 * (pt_block.ninsn). A hot loop of compiled code decoded with a warm cache
 * makes such blocks: a 958 MB trace of a JavaScript benchmark had one that
 * went more than 40000 frames deep, past the 8 MiB stack a thread gets by
 * default, and the decoder died of it. Block decoding therefore runs on a
 * thread of its own whose stack holds the deepest possible block several
 * times over (address space only: the pages a decode touches are all that
 * become memory, and they go with the thread). */
#define DECODE_STACK ((size_t)64 << 20)

typedef struct deep_call {
    void (*fn)(void *);
    void *arg;
} deep_call;

static void *deep_call_main(void *p)
{
    deep_call *c = p;
    c->fn(c->arg);
    return NULL;
}

#define STUCK_BLOCKS 4      /* full blocks in a row without trace: decoding is stuck */

bool dc_cycle_stuck(dc_cycle_guard *g, struct pt_block_decoder *dec, const struct pt_block *b)
{
    if (b->ninsn != UINT16_MAX) {
        g->full = 0;
        return false;
    }
    uint64_t off = 0;
    pt_blk_get_offset(dec, &off);
    g->full = g->full && off == g->off ? g->full + 1 : 1;
    g->off = off;
    return g->full >= STUCK_BLOCKS;
}

void dc_call_on_deep_stack(void (*fn)(void *), void *arg)
{
    deep_call c = { fn, arg };
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) == 0) {
        bool ok = pthread_attr_setstacksize(&attr, DECODE_STACK) == 0 &&
                  pthread_create(&t, &attr, deep_call_main, &c) == 0;
        pthread_attr_destroy(&attr);
        if (ok) {
            pthread_join(t, NULL);
            return;
        }
    }
    /* No thread to be had (the system is out of them): the caller's stack,
     * enough for all but the longest blocks. */
    fn(arg);
}

typedef struct chunk_call {
    wctx *w;
    chunk *k;
} chunk_call;

static void decode_chunk_call(void *p)
{
    chunk_call *c = p;
    dc_decode_chunk(c->w, c->k);
}

static void run_chunk(job *j, wctx *w, chunk *k)
{
    bufs *b = g_async_queue_try_pop(j->spare);
    if (b) {
        k->ops = b->ops;
        k->runs = b->runs;
        k->blocks = b->blocks;
        g_free(b);
    } else {
        k->ops = g_array_sized_new(FALSE, FALSE, sizeof(op), 1024);
        k->runs = g_array_new(FALSE, FALSE, sizeof(run));
    }
    if (k->want_blocks && !k->blocks)
        k->blocks = g_array_new(FALSE, FALSE, sizeof(struct pt_block));
    else if (!k->want_blocks && k->blocks) {
        g_array_free(k->blocks, TRUE);
        k->blocks = NULL;
    }
    chunk_call c = { w, k };
    dc_call_on_deep_stack(decode_chunk_call, &c);
}

static void pool_func(gpointer data, gpointer user)
{
    job *j = user;
    chunk *k = data;
    wctx *w = g_async_queue_try_pop(j->workers);
    if (!w)
        w = wctx_new(j);
    run_chunk(j, w, k);
    g_mutex_lock(&j->lock);
    k->done = true;
    g_cond_broadcast(&j->cond);
    g_mutex_unlock(&j->lock);
    g_async_queue_push(j->workers, w);
}

static void merge_stats(dc_stats *st, const dc_stats *c)
{
    st->blocks += c->blocks;
    st->insns += c->insns;
    st->enables += c->enables;
    st->disables += c->disables;
    st->image_rebuilds += c->image_rebuilds;
    st->image_sections += c->image_sections;
    st->patches_resolved += c->patches_resolved;
    st->states_made_up += c->states_made_up;
    st->retries += c->retries;
    st->retries_kept += c->retries_kept;
    st->fixup_calls += c->fixup_calls;
    st->resumes += c->resumes;
    st->jit_blocks_ends_only += c->jit_blocks_ends_only;
    if (c->first_tsc && (!st->first_tsc || c->first_tsc < st->first_tsc))
        st->first_tsc = c->first_tsc;
    if (c->problems) {
        if (!st->problems)
            memcpy(st->problem, c->problem, sizeof st->problem);
        st->problems += c->problems;
    }
}

/* One stream of a dc_decode_streams call. */
typedef struct strm {
    dc_stream *s;
    const uint8_t *buf;
    uint64_t size;
    GArray *segs;
    guint next_seg;            /* segments whose loss gap is out */
    uint64_t from, to;         /* dc_options.from / to (to: UINT64_MAX for the end) */
    ctx *x;
    atomic_bool cancel;
    bool open, started;
    uint64_t dropped;          /* the map's pages before it were given back */
    /* From a PSB inside the stream (dc_options.from): the stretch from the
     * PSB before, replayed first with its events dropped (warm_up) */
    chunk *warm;
    /* To a PSB inside the stream (dc_options.to): the start of the chunk
     * after the range, which finishes the instruction in flight at the cut
     * (finish_tail) */
    chunk *tail;
} strm;

/* The stream's pages before chunk k's end are given back once k is replayed
 * (a stream of many GB would otherwise stay in memory as it is read). Later
 * chunks read from their own start on; a read further back (a retry's scan)
 * finds the pages in the file again: the mapping is private and unwritten. */
static void strm_drop_before(strm *t, const chunk *k)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t upto = k->stop & ~(page - 1);
    if (!t->buf || upto <= t->dropped + (16u << 20))
        return;
    madvise((void *)(t->buf + t->dropped), (size_t)(upto - t->dropped), MADV_DONTNEED);
    t->dropped = upto;
}

static int strm_open(strm *t, dc_stream *s, uint64_t chunk_bytes, GPtrArray *chunks)
{
    t->s = s;
    dc_stats *st = s->st;
    memset(st, 0, sizeof *st);
    s->err[0] = 0;
    atomic_init(&t->cancel, false);
    uint64_t file_size;
    int fd = jpt_open_regular(s->pt_path, &file_size);
    if (fd < 0) {
        snprintf(s->err, sizeof s->err, "%s: cannot read: %s", s->pt_path, jpt_open_error(fd));
        return -1;
    }
    t->segs = segments(file_size, s->idx_path, st, &t->size);
    st->pt_bytes = t->size;
    if (t->size) {
        void *p = mmap(NULL, t->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            snprintf(s->err, sizeof s->err, "%s: cannot map %" PRIu64 " bytes: %s", s->pt_path,
                     t->size, strerror(errno));
            close(fd);
            g_array_free(t->segs, TRUE);
            t->segs = NULL;
            return -1;
        }
        t->buf = p;
    }
    close(fd);
    t->open = true;
    st->segments = t->segs->len;
    guint first = chunks->len;
    for (guint i = 0; i < t->segs->len; i++) {
        const segment *g = &g_array_index(t->segs, segment, i);
        if (g->end > g->begin)
            add_chunks(chunks, t->buf, g, chunk_bytes);
    }
    st->chunks = chunks->len - first;
    for (guint i = first; i < chunks->len; i++) {
        chunk *k = g_ptr_array_index(chunks, i);
        k->buf = t->buf;
        k->cancel = &t->cancel;
        k->want_blocks = s->out.block != NULL;
        k->strm = t;
    }
    return 0;
}

/* Enters the stream's segments up to seg (and seg itself if inclusive;
 * NULL: all that are left): the loss gap before each. */
static void strm_segments_to(strm *t, const segment *seg, bool inclusive)
{
    ctx *x = t->x;
    while (t->next_seg < t->segs->len && !x->stop) {
        const segment *g = &g_array_index(t->segs, segment, t->next_seg);
        if (g == seg && !inclusive)
            break;
        t->next_seg++;
        if (g->loss_before && g->begin >= t->from && g->begin < t->to) {
            /* One gap per loss, as the collector recorded them: a gap
             * still open from the segment before ends here. */
            if (x->gap.on)
                dc_gap_close(x, g->begin, 0);
            dc_gap_open(x, DC_GAP_LOST, 0, g->begin, g->lost_before);
            x->gap.ev.end_offset = g->begin;
        }
        if (g == seg)
            break;
    }
}

static void strm_start(strm *t)
{
    if (t->started)
        return;
    t->started = true;
    ctx *x = t->x = g_new0(ctx, 1);
    x->sink = t->s->out.sink;
    x->sink_ctx = t->s->out.ctx;
    x->st = t->s->st;
    dc_forget_flow(x);
    if (t->s->out.started)
        t->s->out.started(t->s->out.ctx);
}

static void strm_finish(strm *t)
{
    dc_stream *s = t->s;
    if (t->open) {
        strm_start(t);
        ctx *x = t->x;
        if (!x->stop)
            strm_segments_to(t, NULL, false);
        if (x->gap.on && !x->stop) {
            uint64_t end = x->gap.ev.end_offset > x->gap.ev.offset ? x->gap.ev.end_offset
                                                                  : t->size;
            dc_gap_close(x, end, 0);
        }
        dc_flush_pending(x);
        s->st->last_tsc = x->tsc;
        if (s->out.progress)
            s->out.progress(t->size, t->size, s->out.ctx);
        s->rc = x->stop ? 1 : 0;
    } else {
        s->rc = -1;
    }
    if (s->out.finished)
        s->out.finished(s->st, s->rc, s->err, s->out.ctx);
}

/* Where a range starts at chunk k inside its segment, the stream's flow
 * state there (the codelet the interpreter is in, the last transfer,
 * compiled code's position) comes from the bytes before k, which the range
 * does not decode: an instruction that k's first block finishes would be
 * lost, or seen as a resumption. The stretch from the last PSB before k
 * (at most WARM_MAX bytes back) gives that state. */
#define WARM_MAX (64u << 10)

static chunk *warm_chunk(const chunk *k)
{
    const segment *g = k->seg;
    uint64_t lo = k->begin - g->begin > WARM_MAX ? k->begin - WARM_MAX : g->begin;
    for (uint64_t off = k->begin; off-- > lo;) {
        if (k->buf[off] != psb_pattern[0] || off + sizeof psb_pattern > k->begin ||
            memcmp(k->buf + off, psb_pattern, sizeof psb_pattern) ||
            !dc_psb_header_end(k->buf, g->begin, g->end, off))
            continue;
        chunk *w = g_new0(chunk, 1);
        *w = (chunk){ .strm = k->strm, .seg = g, .buf = k->buf, .cancel = k->cancel,
                      .first = off == g->begin, .begin = off, .stop = k->begin,
                      .end = k->end };
        return w;
    }
    return NULL;
}

static int drop_event(const dc_event *ev, void *unused)
{
    (void)ev;
    (void)unused;
    return 0;
}

/* The first TAIL_BYTES of chunk k (to the first PSB after them), as a chunk
 * of its own: decoded as k is up to there, with the same bytes. */
#define TAIL_BYTES (4u << 10)

static chunk *tail_chunk(const chunk *k)
{
    chunk *c = g_new0(chunk, 1);
    *c = *k;
    c->ops = c->runs = c->blocks = NULL;
    c->want_blocks = false;
    c->pooled = c->done = false;
    if (k->stop - k->begin > TAIL_BYTES) {
        c->stop = k->begin + TAIL_BYTES;
        c->last = false;
    }
    return c;
}

/* Replays t's tail (the stretch after its range) until the instruction in
 * flight at the cut is delivered, what the single decode's next chunk
 * would have finished it with; nothing else of it. */
static void finish_tail(job *j, wctx **self, strm *t)
{
    chunk *c = t->tail;
    t->tail = NULL;
    ctx *x = t->x;
    if (x->npending && !x->stop) {
        if (!*self)
            *self = wctx_new(j);
        run_chunk(j, *self, c);
        dc_stats scratch = { 0 };
        dc_stats *st = x->st;
        x->st = &scratch;
        x->tail = TAIL_ON;
        dc_output none = { 0 };
        dc_apply_chunk(x, c, &none);
        if (x->tail == TAIL_DONE) {
            x->npending = 0;        /* the next range's */
            x->pending_in = NULL;
        }
        x->tail = TAIL_OFF;
        x->st = st;
        memset(&x->gap, 0, sizeof x->gap);
        chunk_release(c, j->spare);
    }
    g_free(c);
}

/* Replays t's warm-up stretch for its state only: its events, counts and
 * gaps are the range before's, and so is the instruction it leaves in
 * flight (the range before finishes it: finish_tail). */
static void warm_up(job *j, wctx **self, strm *t)
{
    chunk *w = t->warm;
    t->warm = NULL;
    ctx *x = t->x;
    if (!*self)
        *self = wctx_new(j);
    run_chunk(j, *self, w);
    dc_stats scratch = { 0 };
    dc_stats *st = x->st;
    dc_sink sink = x->sink;
    x->sink = drop_event;
    x->st = &scratch;
    dc_output none = { 0 };
    dc_apply_chunk(x, w, &none);
    x->sink = sink;
    x->st = st;
    memset(&x->gap, 0, sizeof x->gap);
    x->stop = false;
    x->drop_pending = x->npending > 0;
    chunk_release(w, j->spare);
    g_free(w);
}

static void strm_close(strm *t)
{
    g_free(t->warm);            /* never replayed: no buffers */
    g_free(t->tail);
    if (t->segs)
        g_array_free(t->segs, TRUE);
    g_free(t->x);
    if (t->buf)
        munmap((void *)t->buf, t->size);
}

int dc_decode_streams(const dc_trace *tr, dc_stream *streams, size_t n, const dc_options *opt)
{
    unsigned threads = !opt ? 1 : opt->threads ? opt->threads : g_get_num_processors();
    uint64_t chunk_bytes = opt && opt->chunk_bytes ? opt->chunk_bytes : DC_CHUNK_BYTES;
    strm *ts = g_new0(strm, n ? n : 1);
    GPtrArray *chunks = g_ptr_array_new();
    for (size_t i = 0; i < n; i++) {
        ts[i].from = opt ? opt->from : 0;
        ts[i].to = opt && opt->to ? opt->to : UINT64_MAX;
        if (strm_open(&ts[i], &streams[i], chunk_bytes, chunks) < 0)
            ts[i].open = false;
    }
    if (opt && (opt->from || opt->to)) {
        guint kept = 0;
        const strm *before = NULL;  /* of the chunk before, which may be freed */
        bool before_in = false;
        for (guint i = 0; i < chunks->len; i++) {
            chunk *k = g_ptr_array_index(chunks, i);
            bool in = k->begin >= k->strm->from && k->begin < k->strm->to;
            if (before == k->strm && before_in && !in && !k->first && !k->strm->tail)
                k->strm->tail = tail_chunk(k);
            before = k->strm;
            before_in = in;
            if (in) {
                chunks->pdata[kept++] = k;
            } else {
                k->strm->s->st->chunks--;
                chunk_clear(k, NULL);
                g_free(k);
            }
        }
        g_ptr_array_set_size(chunks, kept);
        for (guint i = 0; i < chunks->len; i++) {
            chunk *k = g_ptr_array_index(chunks, i);
            const chunk *prev = i ? g_ptr_array_index(chunks, i - 1) : NULL;
            const chunk *next = i + 1 < chunks->len ? g_ptr_array_index(chunks, i + 1) : NULL;
            if (!k->first && k->strm->from && (!prev || prev->strm != k->strm))
                k->strm->warm = warm_chunk(k);
            if (next && next->strm == k->strm)
                continue;
            if (k->strm->tail && k->strm->tail->begin != k->stop) {
                g_free(k->strm->tail);  /* not the stretch right after k */
                k->strm->tail = NULL;
            }
        }
    }

    job j = { .m = tr->m, .cache = tr->cache, .info = tr->info };
    j.workers = g_async_queue_new();
    j.spare = g_async_queue_new_full(bufs_free);
    g_mutex_init(&j.lock);
    g_cond_init(&j.cond);
    if (threads > chunks->len)
        threads = chunks->len ? chunks->len : 1;
    GThreadPool *pool = NULL;
    if (threads > 1)
        pool = g_thread_pool_new(pool_func, &j, (gint)threads, FALSE, NULL);
    wctx *self = NULL;         /* this thread's first layer */
    size_t inflight = (size_t)threads + 1, submitted = 0;

    size_t si = 0;             /* streams before si are finished */
    for (guint ci = 0; ci < chunks->len; ci++) {
        chunk *k = g_ptr_array_index(chunks, ci);
        strm *t = k->strm;
        while (&ts[si] != t)
            strm_finish(&ts[si++]);
        strm_start(t);
        ctx *x = t->x;
        if (x->stop) {
            /* The sink stopped this stream: its chunks are not needed. */
            atomic_store(&t->cancel, true);
            if (k->pooled) {
                g_mutex_lock(&j.lock);
                while (!k->done)
                    g_cond_wait(&j.cond, &j.lock);
                g_mutex_unlock(&j.lock);
            } else if (submitted <= ci) {
                submitted = ci + 1;     /* never submitted */
            }
            chunk_release(k, j.spare);
            continue;
        }
        if (pool)
            while (submitted < chunks->len && submitted < ci + inflight) {
                chunk *c = g_ptr_array_index(chunks, submitted++);
                c->pooled = true;
                g_thread_pool_push(pool, c, NULL);
            }
        const bool pooled = k->pooled;
        if (pooled) {
            g_mutex_lock(&j.lock);
            while (!k->done)
                g_cond_wait(&j.cond, &j.lock);
            g_mutex_unlock(&j.lock);
        }
        if (k->first)
            strm_segments_to(t, k->seg, true);
        if (t->warm)
            warm_up(&j, &self, t);
        if (!pooled) {
            if (!self)
                self = wctx_new(&j);
            run_chunk(&j, self, k);
        }
        merge_stats(t->s->st, &k->st);
        dc_apply_chunk(x, k, &t->s->out);
        if (t->tail && t->tail->begin == k->stop)
            finish_tail(&j, &self, t);
        chunk_release(k, j.spare);
        strm_drop_before(t, k);
        if (t->s->out.progress && !x->stop)
            t->s->out.progress(k->stop, t->size, t->s->out.ctx);
    }
    while (si < n)
        strm_finish(&ts[si++]);
    if (pool)
        g_thread_pool_free(pool, FALSE, TRUE);
    for (guint i = 0; i < chunks->len; i++) {
        chunk *k = g_ptr_array_index(chunks, i);
        chunk_clear(k, NULL);
        g_free(k);
    }
    g_ptr_array_free(chunks, TRUE);
    wctx *w;
    while ((w = g_async_queue_try_pop(j.workers)))
        wctx_free(w);
    g_async_queue_unref(j.workers);
    g_async_queue_unref(j.spare);
    wctx_free(self);
    g_mutex_clear(&j.lock);
    g_cond_clear(&j.cond);
    int worst = 0;
    for (size_t i = 0; i < n; i++) {
        strm_close(&ts[i]);
        if (streams[i].rc < 0)
            worst = -1;
    }
    g_free(ts);
    return worst;
}

int dc_decode_stream_opts(const dc_trace *tr, const char *pt_path, const char *idx_path,
                          const dc_output *out, const dc_options *opt, dc_stats *st, char *err,
                          size_t errlen)
{
    dc_stream s = { .pt_path = pt_path, .idx_path = idx_path, .out = *out, .st = st };
    dc_decode_streams(tr, &s, 1, opt);
    if (s.rc < 0)
        snprintf(err, errlen, "%s", s.err);
    return s.rc;
}

int dc_decode_stream(const dc_trace *tr, const char *pt_path, const char *idx_path,
                     const dc_output *out, dc_stats *st, char *err, size_t errlen)
{
    return dc_decode_stream_opts(tr, pt_path, idx_path, out, NULL, st, err, errlen);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

size_t dc_list_thread_streams(const char *dir, uint32_t **tids, size_t *ncpu)
{
    char *ptdir = g_build_filename(dir, "pt", NULL);
    GDir *d = g_dir_open(ptdir, 0, NULL);
    GArray *out = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    size_t cpus = 0;
    const char *ent;
    while (d && (ent = g_dir_read_name(d))) {
        size_t n = strlen(ent);
        if (n < 4 || strcmp(ent + n - 3, ".pt"))
            continue;
        unsigned long v;
        char *end;
        if (!strncmp(ent, "tid-", 4)) {
            errno = 0;
            v = strtoul(ent + 4, &end, 10);
            if (!errno && end == ent + n - 3 && end > ent + 4 && v <= UINT32_MAX) {
                uint32_t t = (uint32_t)v;
                g_array_append_val(out, t);
            }
        } else if (!strncmp(ent, "cpu-", 4)) {
            cpus++;
        }
    }
    if (d)
        g_dir_close(d);
    g_free(ptdir);
    sort_n(out->data, out->len, sizeof(uint32_t), cmp_u32);
    if (ncpu)
        *ncpu = cpus;
    size_t n = out->len;
    *tids = (uint32_t *)(void *)g_array_free(out, FALSE);
    if (n == 0 && cpus > 0) {
        /* A per-CPU trace: its threads are those of the split (percpu.h). */
        char err[512];
        const char *sd = dc_thread_stream_dir(dir, err, sizeof err);
        if (sd && strcmp(sd, dir) != 0) {
            g_free(*tids);
            n = dc_list_thread_streams(sd, tids, NULL);
        } else if (!sd) {
            jerr_warn("%s", err);
        }
    }
    return n;
}

