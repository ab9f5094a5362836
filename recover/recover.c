/* Flow recovery, first version (see recover.h). */
#include "recover/recover.h"

#include <string.h>

#include <glib.h>

/* One event of the history window (FL_SEGMENT markers are not stored: the
 * segment number says where a segment changes). */
typedef struct hev {
    fl_kind kind;
    uint32_t flags;
    uint64_t tsc;
    uint64_t method_id;
    int32_t bci, opcode;
    uint64_t count;
    uint64_t segno;
    int64_t sym;              /* absolute index in syms, -1: not a placed bytecode */
} hev;

/* One placed bytecode of the history. */
typedef struct hsym {
    uint64_t s;               /* hash of (method, bci) */
    uint64_t ev;              /* absolute index of its event */
    uint64_t prev;            /* earlier symbol ending the same K-gram, absolute + 1; 0 none */
    uint32_t run;             /* placed bytecodes in a row ending here, same segment */
} hsym;

/* A held-back event (the segment after a boundary, until its first K
 * symbols are known). */
typedef struct pev {
    fl_event ev;
    uint64_t *stack;
} pev;

typedef struct cand {
    uint64_t j;               /* absolute symbol index of the candidate's anchor end */
    uint32_t suffix;
} cand;

struct rv_filter {
    rv_options o;
    fl_sink sink;
    void *ctx;
    int stopped;
    GArray *h;                /* hev */
    uint64_t hbase;           /* absolute index of h[0] */
    GArray *syms;             /* hsym */
    uint64_t sbase;
    GHashTable *head;         /* K-gram hash (| 1) -> absolute symbol index + 1 */
    uint64_t segno;
    uint32_t run;
    uint32_t tid;
    int seen_segment;
    int holding;
    uint64_t seg_first_tsc, seg_last_tsc, seg_bytecodes;
    uint64_t rate_ticks, rate_bytecodes;   /* decoded segments' time and bytecodes */
    GArray *pending;          /* pev */
    unsigned pending_syms;
    rv_stats st;
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint64_t sym_of(uint64_t method_id, int32_t bci)
{
    return mix64(method_id * 0x9e3779b97f4a7c15ull + (uint64_t)(uint32_t)bci);
}

static hsym *sym_at(rv_filter *f, uint64_t abs)
{
    return &g_array_index(f->syms, hsym, abs - f->sbase);
}

static hev *ev_at(rv_filter *f, uint64_t abs)
{
    return &g_array_index(f->h, hev, abs - f->hbase);
}

static uint64_t sym_end(const rv_filter *f) { return f->sbase + f->syms->len; }
static uint64_t ev_end(const rv_filter *f) { return f->hbase + f->h->len; }

/* The K-gram ending at symbol abs (its run must be >= K). */
static gpointer kgram_key(rv_filter *f, uint64_t abs)
{
    uint64_t x = 0x84222325cbf29ce4ull;
    for (unsigned i = 0; i < f->o.k; i++)
        x = mix64(x ^ sym_at(f, abs - i)->s) + i;
    return (gpointer)(uintptr_t)(x | 1);
}

static void index_sym(rv_filter *f, uint64_t abs)
{
    hsym *s = sym_at(f, abs);
    s->prev = 0;
    if (s->run < f->o.k)
        return;
    gpointer key = kgram_key(f, abs);
    gpointer old = g_hash_table_lookup(f->head, key);
    if (old)
        s->prev = (uint64_t)(uintptr_t)old;
    g_hash_table_insert(f->head, key, (gpointer)(uintptr_t)(abs + 1));
}

/* Keeps the history within its window: drops the oldest half and rebuilds
 * the index over what remains (amortized O(1) per event). */
static void compact(rv_filter *f)
{
    if (f->h->len <= 2 * f->o.window)
        return;
    size_t drop = f->h->len - f->o.window;
    g_array_remove_range(f->h, 0, (guint)drop);
    f->hbase += drop;
    size_t sdrop = 0;
    while (sdrop < f->syms->len && g_array_index(f->syms, hsym, sdrop).ev < f->hbase)
        sdrop++;
    g_array_remove_range(f->syms, 0, (guint)sdrop);
    f->sbase += sdrop;
    g_hash_table_remove_all(f->head);
    for (uint64_t a = f->sbase; a < sym_end(f); a++) {
        hsym *s = sym_at(f, a);
        /* runs that began before the window are cut at its start */
        if (s->run > a - f->sbase + 1)
            s->run = (uint32_t)(a - f->sbase + 1);
        index_sym(f, a);
    }
    if (f->run > f->syms->len)
        f->run = f->syms->len;
}

/* A segment of the history ends: its time and bytecodes give the thread's
 * rate of bytecodes per tick, which bounds a fill by the gap's time span. */
static void segment_done(rv_filter *f)
{
    if (f->seg_bytecodes && f->seg_last_tsc > f->seg_first_tsc) {
        f->rate_ticks += f->seg_last_tsc - f->seg_first_tsc;
        f->rate_bytecodes += f->seg_bytecodes;
    }
    f->seg_bytecodes = 0;
}

static void history_add(rv_filter *f, const fl_event *ev)
{
    if (ev->kind == FL_BYTECODE) {
        if (!f->seg_bytecodes++)
            f->seg_first_tsc = ev->tsc;
        f->seg_last_tsc = ev->tsc;
    }
    hev e = { .kind = ev->kind, .flags = ev->flags, .tsc = ev->tsc,
              .method_id = ev->method_id, .bci = ev->bci, .opcode = ev->opcode,
              .count = ev->count, .segno = f->segno, .sym = -1 };
    if (ev->kind == FL_BYTECODE) {
        if (ev->method_id && ev->bci >= 0) {
            if (f->run < UINT32_MAX)
                f->run++;
            hsym s = { .s = sym_of(ev->method_id, ev->bci), .ev = ev_end(f), .run = f->run };
            e.sym = (int64_t)sym_end(f);
            g_array_append_val(f->syms, s);
            g_array_append_val(f->h, e);
            index_sym(f, (uint64_t)e.sym);
            compact(f);
            return;
        }
        f->run = 0;      /* an unplaced bytecode breaks the symbols' run */
    }
    g_array_append_val(f->h, e);
    compact(f);
}

static int deliver(rv_filter *f, const fl_event *ev)
{
    if (f->stopped)
        return 1;
    if (f->sink(ev, f->ctx))
        f->stopped = 1;
    return f->stopped;
}

/* The rejoin target: the first (up to K) symbols of the held-back segment. */
static unsigned rejoin_syms(rv_filter *f, uint64_t *out)
{
    unsigned n = 0;
    for (guint i = 0; i < f->pending->len && n < f->o.k; i++) {
        const fl_event *ev = &g_array_index(f->pending, pev, i).ev;
        if (ev->kind != FL_BYTECODE)
            continue;
        if (!ev->method_id || ev->bci < 0)
            break;
        out[n++] = sym_of(ev->method_id, ev->bci);
    }
    return n;
}

/* Does the history's symbol run starting at event e begin with want[0..n)? */
static int rejoins_at(rv_filter *f, uint64_t e, const uint64_t *want, unsigned n)
{
    hev *x = ev_at(f, e);
    if (x->sym < 0 || !n)
        return 0;
    uint64_t a = (uint64_t)x->sym;
    for (unsigned i = 0; i < n; i++) {
        if (a + i >= sym_end(f))
            return 0;
        hsym *s = sym_at(f, a + i);
        if (s->s != want[i] || (i > 0 && s->run < sym_at(f, a)->run + i))
            return 0;
    }
    return 1;
}

/* The continuation of candidate j: events [*start, *start + len) of the
 * history; returns whether it ends at the rejoin point. */
static int continuation(rv_filter *f, uint64_t j, uint64_t tail_from, uint64_t tail_end,
                        const uint64_t *want, unsigned nwant, uint64_t span, int have_span,
                        uint64_t max_bc, uint64_t *start, uint64_t *len)
{
    uint64_t e0 = sym_at(f, j)->ev;
    uint64_t seg = ev_at(f, e0)->segno;
    uint64_t ref_tsc = ev_at(f, e0)->tsc;
    uint64_t e = e0 + 1;
    /* the ending segment's own events after its last symbol (calls,
     * returns) must be the candidate's too: they are not filled again */
    for (uint64_t t = tail_from; t < tail_end; t++, e++) {
        if (e >= ev_end(f))
            return -1;
        hev *a = ev_at(f, t), *b = ev_at(f, e);
        if (b->segno != seg || a->kind != b->kind || a->method_id != b->method_id ||
            a->bci != b->bci)
            return -1;
    }
    *start = e;
    uint64_t limit = ev_end(f);
    if (limit > tail_from)
        limit = tail_from;   /* never replay the anchor's own segment end */
    uint64_t nbc = 0;
    for (uint64_t n = 0;; n++, e++) {
        if (e >= limit || ev_at(f, e)->segno != seg || n >= f->o.max_fill || nbc >= max_bc) {
            *len = n;
            return 0;
        }
        if (rejoins_at(f, e, want, nwant)) {
            *len = n;
            return 1;
        }
        hev *x = ev_at(f, e);
        if (x->kind == FL_BYTECODE)
            nbc++;
        if (have_span && x->tsc > ref_tsc && x->tsc - ref_tsc > span) {
            *len = n;
            return 0;
        }
    }
}

static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->suffix != b->suffix)
        return a->suffix > b->suffix ? -1 : 1;
    return a->j > b->j ? -1 : a->j < b->j ? 1 : 0;
}

/* Fills the gap between the history's last segment and the held-back one. */
static void fill_gap(rv_filter *f)
{
    f->st.boundaries++;
    uint64_t nsyms = sym_end(f);
    if (nsyms == f->sbase) {
        f->st.no_anchor++;
        return;
    }
    uint64_t last = nsyms - 1;
    hsym *ls = sym_at(f, last);
    if (ls->run < f->o.k || ev_at(f, ls->ev)->segno != f->segno) {
        f->st.no_anchor++;
        return;
    }
    /* events of the ending segment after its last symbol */
    uint64_t tail_from = ls->ev + 1, tail_end = ev_end(f);
    for (uint64_t t = tail_from; t < tail_end; t++)
        if (ev_at(f, t)->kind == FL_BYTECODE) {   /* an unplaced bytecode last */
            f->st.no_anchor++;
            return;
        }
    uint64_t want[64];
    unsigned nwant = rejoin_syms(f, want);
    uint64_t gap_start = ev_at(f, tail_end - 1)->tsc, gap_end = gap_start;
    if (f->pending->len)
        gap_end = g_array_index(f->pending, pev, 0).ev.tsc;
    int have_span = !f->o.no_time && gap_end >= gap_start;
    uint64_t span = gap_end >= gap_start ? gap_end - gap_start : 0;
    /* the bytecodes the gap's time allows at the thread's own rate, twice
     * over (the trace's times are coarse) */
    uint64_t max_bc = UINT64_MAX;
    if (have_span && f->rate_ticks && f->rate_bytecodes) {
        double b = 2.0 * (double)span * (double)f->rate_bytecodes / (double)f->rate_ticks +
                   f->o.k;
        if (b < 1e18)
            max_bc = (uint64_t)b;
    }

    /* candidates: earlier ends of the same K-gram, through the index */
    GArray *cands = g_array_new(FALSE, FALSE, sizeof(cand));
    gpointer key = kgram_key(f, last);
    unsigned walked = 0;
    for (uint64_t c = ls->prev; c && c - 1 >= f->sbase && walked < 4096; walked++) {
        uint64_t j = c - 1;
        hsym *cs = sym_at(f, j);
        c = cs->prev;
        if (cs->run < f->o.k || kgram_key(f, j) != key)
            continue;
        uint32_t suf = 0;
        uint32_t maxs = cs->run < ls->run ? cs->run : ls->run;
        if (maxs > f->o.suffix_cap)
            maxs = f->o.suffix_cap;
        while (suf < maxs && sym_at(f, j - suf)->s == sym_at(f, last - suf)->s)
            suf++;
        if (suf < f->o.k)
            continue;   /* a hash collision */
        cand cd = { .j = j, .suffix = suf };
        g_array_append_val(cands, cd);
    }
    if (!cands->len) {
        f->st.no_candidate++;
        g_array_free(cands, TRUE);
        return;
    }
    qsort(cands->data, cands->len, sizeof(cand), cand_cmp);
    if (cands->len > f->o.candidates)
        g_array_set_size(cands, f->o.candidates);

    /* the best ranked candidate that rejoins, else the best one */
    uint64_t best_start = 0, best_len = 0;
    int have = 0, best_rejoins = 0;
    for (guint i = 0; i < cands->len; i++) {
        uint64_t s, n;
        int r = continuation(f, g_array_index(cands, cand, i).j, tail_from, tail_end, want,
                             nwant, span, have_span, max_bc, &s, &n);
        if (r < 0)
            continue;
        if (!have || (r && !best_rejoins)) {
            best_start = s;
            best_len = n;
            best_rejoins = r;
            have = 1;
        }
        if (r)
            break;
    }
    g_array_free(cands, TRUE);
    if (!have) {
        f->st.no_candidate++;
        return;
    }
    if (best_rejoins)
        f->st.rejoined++;
    if (!best_len) {
        if (best_rejoins)
            f->st.empty_rejoin++;
        return;
    }
    f->st.filled++;
    uint64_t ref = ev_at(f, best_start)->tsc;
    for (uint64_t e = best_start; e < best_start + best_len; e++) {
        hev *x = ev_at(f, e);
        uint64_t dt = x->tsc > ref ? x->tsc - ref : 0;
        uint64_t tsc = gap_start + dt;
        if (gap_end > gap_start && tsc > gap_end)
            tsc = gap_end;
        fl_event ev = { .kind = x->kind, .origin = FL_RECOVERED, .flags = x->flags,
                        .tid = f->tid, .tsc = tsc, .method_id = x->method_id, .bci = x->bci,
                        .opcode = x->opcode, .count = x->count };
        f->st.events++;
        if (x->kind == FL_BYTECODE)
            f->st.bytecodes++;
        if (deliver(f, &ev))
            return;
    }
}

/* Resolves the gap before the held-back segment, then passes it on. */
static int release(rv_filter *f)
{
    if (!f->holding)
        return f->stopped;
    f->holding = 0;
    if (!f->stopped)
        fill_gap(f);
    for (guint i = 0; i < f->pending->len; i++) {
        pev *p = &g_array_index(f->pending, pev, i);
        if (p->ev.kind == FL_SEGMENT) {
            segment_done(f);
            f->segno++;
            f->run = 0;
        } else {
            history_add(f, &p->ev);
        }
        deliver(f, &p->ev);
        g_free(p->stack);
    }
    g_array_set_size(f->pending, 0);
    f->pending_syms = 0;
    return f->stopped;
}

static void hold(rv_filter *f, const fl_event *ev)
{
    pev p = { .ev = *ev, .stack = NULL };
    if (ev->kind == FL_SEGMENT && ev->depth && ev->stack) {
        p.stack = g_memdup2(ev->stack, ev->depth * sizeof *ev->stack);
        p.ev.stack = p.stack;
    }
    g_array_append_val(f->pending, p);
    if (ev->kind == FL_BYTECODE)
        f->pending_syms++;
}

rv_filter *rv_new(const rv_options *opt, fl_sink sink, void *ctx)
{
    rv_filter *f = g_new0(rv_filter, 1);
    if (opt)
        f->o = *opt;
    if (!f->o.k)
        f->o.k = 8;
    if (f->o.k > 64)
        f->o.k = 64;
    if (!f->o.window)
        f->o.window = 1u << 20;
    if (!f->o.max_fill)
        f->o.max_fill = 1u << 16;
    if (!f->o.candidates)
        f->o.candidates = 16;
    if (!f->o.suffix_cap)
        f->o.suffix_cap = 4096;
    f->sink = sink;
    f->ctx = ctx;
    f->h = g_array_new(FALSE, FALSE, sizeof(hev));
    f->syms = g_array_new(FALSE, FALSE, sizeof(hsym));
    f->head = g_hash_table_new(g_direct_hash, g_direct_equal);
    f->pending = g_array_new(FALSE, FALSE, sizeof(pev));
    return f;
}

int rv_event(const fl_event *ev, void *vf)
{
    rv_filter *f = vf;
    if (f->stopped)
        return 1;
    f->tid = ev->tid;
    if (ev->kind == FL_SEGMENT) {
        if (release(f))
            return 1;
        if (!f->seen_segment || !(ev->flags & FL_F_AFTER_GAP)) {
            /* nothing is missing before it: no hole to fill */
            if (f->seen_segment)
                segment_done(f);
            f->seen_segment = 1;
            f->segno++;
            f->run = 0;
            return deliver(f, ev);
        }
        f->holding = 1;
        hold(f, ev);
        return 0;
    }
    if (f->holding) {
        hold(f, ev);
        if (f->pending_syms >= f->o.k)
            return release(f);
        return 0;
    }
    f->seen_segment = 1;
    history_add(f, ev);
    return deliver(f, ev);
}

int rv_finish(rv_filter *f, rv_stats *st)
{
    release(f);
    if (st)
        *st = f->st;
    return f->stopped;
}

void rv_free(rv_filter *f)
{
    if (!f)
        return;
    for (guint i = 0; i < f->pending->len; i++)
        g_free(g_array_index(f->pending, pev, i).stack);
    g_array_free(f->pending, TRUE);
    g_array_free(f->h, TRUE);
    g_array_free(f->syms, TRUE);
    g_hash_table_destroy(f->head);
    g_free(f);
}

void rv_stats_add(rv_stats *sum, const rv_stats *s)
{
    sum->boundaries += s->boundaries;
    sum->no_anchor += s->no_anchor;
    sum->no_candidate += s->no_candidate;
    sum->filled += s->filled;
    sum->rejoined += s->rejoined;
    sum->empty_rejoin += s->empty_rejoin;
    sum->events += s->events;
    sum->bytecodes += s->bytecodes;
}
