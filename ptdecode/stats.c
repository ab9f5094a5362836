/* `ptdecode stats`: how much of a trace was lost, captured, decoded and
 * recovered, per thread and in total, and -- when the recording kept a
 * lossless copy of each stream (eval/, the emulated backend's
 * keep_lossless) -- how accurate the decoded and the recovered flow are
 * (the quantities of JPortal's Table 3: PMD, PDC, PD, DA, PR, RA). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "common/jerr.h"
#include "common/json.h"
#include "common/seqalign.h"
#include "profile/source.h"
#include "ptdecode/commands.h"
#include "reconstruct/trace.h"
#include "recover/recover.h"

#define ALIGN_K 8            /* symbols of an alignment anchor */
#define LARGE_HOLE 100000u   /* bytecodes: a large hole holds this many or more */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode stats TRACE.DIR [--json] [--thread TID] [--no-recover] [--no-guess]\n"
            "                      [--cut-disputed] [--time-only] [--no-eval] [--holes N]\n"
            "                      [--jobs N] [--no-cache]\n"
            "\n"
            "How much of each thread's trace was lost, captured, decoded and recovered, and\n"
            "how accurate the result is when the recording kept a lossless copy of every\n"
            "stream (ptrec --emulate --keep-lossless writes it to eval/tid-<TID>.pt).\n"
            "Percentages:\n"
            "  PMD  data missing: bytes the collector lost (per pt/<stream>.idx) over bytes\n"
            "       recorded plus lost\n"
            "  PDC  data captured: 100 - PMD\n"
            "  PD   decoded: of the captured data, the share decoded into the flow: bytecode\n"
            "       events given a (method, bci), over all bytecode events decoded, times the\n"
            "       share of recorded bytes the decoder did not have to skip\n"
            "  DA   decoding accuracy (lossless copy needed): the lossless stream is decoded\n"
            "       and projected by the same pipeline into a reference sequence of\n"
            "       (method, bci); each decoded segment is aligned to it in order: among the\n"
            "       reference positions not before the previous match's end whose\n"
            "       time (TSC) is the bytecode's own (the streams share their timing\n"
            "       packets), the first place where the segment's next 8 (method, bci)\n"
            "       occur (fewer than 8 left: the next one), then compared bytecode by\n"
            "       bytecode, re-anchoring the same way after a mismatch. DA = decoded\n"
            "       bytecodes equal to the reference at their aligned position over all\n"
            "       decoded bytecodes with a (method, bci) (unaligned ones count as wrong)\n"
            "  PR   recovered (lossless copy needed): bytecodes recovery filled in, over the\n"
            "       bytecodes missing (the reference's bytecodes minus the decoded ones)\n"
            "  RA   recovery accuracy (lossless copy needed): a fill that follows a segment\n"
            "       is compared, in order, with the reference between that segment's aligned\n"
            "       end and the next segment's aligned start (the hole): RA = the length of\n"
            "       a longest common subsequence of fill and hole (the most fill bytecodes\n"
            "       that match the hole's in order) over recovered bytecodes. It takes\n"
            "       time in proportion to the fill's bytecodes times the hole's (a hole\n"
            "       and a fill of a million bytecodes each: some 20 s)\n"
            "  GA   the same for the bytecodes guessed along an ICFG path where no recovered\n"
            "       fill reached the next segment (what they add to the recovered ones'\n"
            "       common subsequence with the hole)\n"
            "  overall (lossless copy needed): decoded bytecodes right at their place plus\n"
            "       recovered and guessed ones right in their hole, over the reference's\n"
            "       bytecodes\n"
            "Also printed: the shares of the flow's placed bytecodes that were decoded,\n"
            "recovered and guessed, the CPU time recovery took (matching and filling)\n"
            "next to that of the whole flow (decoding, projection and recovery), and\n"
            "(lossless copy needed) the holes, the reference's stretches between two\n"
            "aligned segments: how many, the bytecodes in them, the largest, and those of\n"
            "%u bytecodes or more (a few holes of a million bytecodes, as a large\n"
            "buffer that filled leaves, are much harder to recover than many short ones),\n"
            "and how many of the holes' bytecodes are at a (method, bci) that no decoded\n"
            "segment before the hole ran: recovery copies the thread's own history, so\n"
            "those it cannot fill right (code that runs once, as start-up does).\n"
            "\n"
            "  --json         one JSON object: \"threads\" (one object each) and \"total\";\n"
            "                 percentages not available are null\n"
            "  --thread TID   only this thread\n"
            "  --no-recover   do not run recovery (no PR, RA)\n"
            "  --no-guess     recover, but without the ICFG paths (no GA)\n"
            "  --cut-disputed  cut fills that never rejoin where the top candidates stop\n"
            "                 agreeing (less recovered; on xalan at 35%% loss no more\n"
            "                 accurate: recover/README.md)\n"
            "  --time-only    size each hole by its time span alone, as on hardware,\n"
            "                 where the collector cannot count the bytes it lost (the\n"
            "                 emulated backend counts them, and recovery then sizes a\n"
            "                 hole by its bytes: recover/README.md)\n"
            "  --no-eval      do not decode the lossless copies (no DA, PR, RA)\n"
            "  --jobs N       decode and reconstruct with N threads (default: the number of\n"
            "                 processors; the flow is the same)\n"
            "  --no-cache     neither read nor write the decoded-flow cache (TRACE.DIR/cache/)\n"
            "  --holes N      list each thread's N largest holes (lossless copy needed):\n"
            "                 where each starts (TSC), its bytecodes, how many of them never\n"
            "                 ran before it, the method that runs most of it; then its fill:\n"
            "                 bytecodes, those right in order (as RA counts), those at a\n"
            "                 (method, bci) the hole runs too in any order, and its most\n"
            "                 run method. Few of the hole's code: the fill ran other code;\n"
            "                 much more of it than right in order: the hole's code, in\n"
            "                 another order (a loop that ran a different count)\n"
            "\n"
            "example:\n"
            "  ptrec --emulate --aux-size 16K --drain-rate 2 --keep-lossless -o b.trace -- \\\n"
            "      java -Xint -cp samples/classes Branchy 60\n"
            "  ptdecode stats b.trace\n",
            LARGE_HOLE);
}

/* A bytecode of a flow. */
typedef struct fsym {
    uint64_t method_id;
    uint64_t tsc;
    int32_t bci;
    uint32_t seg;
    uint8_t origin;
} fsym;

typedef struct collector {
    GArray *syms;      /* fsym, NULL: count only */
    uint32_t seg;
    uint64_t decoded_placed, recovered, guessed;
} collector;

static int collect(const fl_event *ev, void *vc)
{
    collector *c = vc;
    if (ev->kind == FL_SEGMENT) {
        c->seg++;
        return 0;
    }
    if (ev->kind != FL_BYTECODE)
        return 0;
    if (ev->origin == FL_RECOVERED)
        c->recovered++;
    else if (ev->origin == FL_GUESSED)
        c->guessed++;
    else if (ev->origin == FL_DECODED && ev->method_id && ev->bci >= 0)
        c->decoded_placed++;
    if (c->syms) {
        fsym s = { .method_id = ev->method_id, .tsc = ev->tsc, .bci = ev->bci, .seg = c->seg,
                   .origin = (uint8_t)ev->origin };
        g_array_append_val(c->syms, s);
    }
    return 0;
}

/* One hole, for the list of the largest (--holes): what it held, and what
 * recovery put in it. */
typedef struct hole_info {
    uint64_t tsc;                    /* of its first reference bytecode */
    uint64_t bytecodes, unseen;      /* as the totals below count them */
    uint64_t filled, right;          /* recovered and guessed bytecodes, those in order */
    uint64_t same_code;              /* fill bytecodes the hole runs too, order aside */
    uint64_t hole_method, fill_method;   /* the method that runs most bytecodes, 0 none */
    char *hole_name, *fill_name;
    uint32_t seg;                    /* the decoded segment it follows */
} hole_info;

typedef struct tstats {
    uint32_t tid;
    dc_stats dc;
    rp_stats rp;
    rv_stats rv;
    bool eval, recover;
    uint64_t decoded_placed, recovered, guessed;
    uint64_t ref_bytecodes;          /* the lossless flow's bytecodes */
    uint64_t da_match, ra_match, ga_match;
    /* Holes: the reference's stretches between two aligned segments. How
     * the missing bytecodes are spread says how hard recovery is: a few
     * holes of a million bytecodes (a large buffer that filled) are not
     * many of a thousand. */
    uint64_t holes, hole_bytecodes, largest_hole, large_holes, large_hole_bytecodes;
    /* Bytecodes of the holes at a (method, bci) that no decoded segment
     * before the hole ran: recovery copies the thread's history, so it
     * cannot fill those with the right bytecode. */
    uint64_t hole_unseen;
    GArray *largest;                 /* hole_info, largest first (--holes), NULL: none */
    uint64_t flow_ns;                /* decoding, projection and recovery of the thread */
} tstats;

/* --holes N: list each thread's N largest holes */
static unsigned list_holes;

static void hole_add(tstats *ts, uint64_t n)
{
    ts->holes++;
    ts->hole_bytecodes += n;
    if (n > ts->largest_hole)
        ts->largest_hole = n;
    if (n >= LARGE_HOLE) {
        ts->large_holes++;
        ts->large_hole_bytecodes += n;
    }
}

static bool same(const fsym *a, const fsym *b)
{
    return a->method_id && a->method_id == b->method_id && a->bci == b->bci;
}

/* A symbol for seq_lcs that is equal where same() is: a bytecode without
 * a method gets `unplaced`, which the other sequence never uses. */
static uint64_t fsym_key(const fsym *a, uint64_t unplaced)
{
    if (!a->method_id)
        return unplaced;
    uint64_t k = (a->method_id * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uint32_t)a->bci;
    k ^= k >> 31;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 29;
    return k < 3 ? k + 3 : k;
}

/* The reference's K-grams, sorted by (hash, position). */
typedef struct kpos {
    uint64_t h;
    uint64_t pos;
} kpos;

static uint64_t kgram(const fsym *s)
{
    uint64_t x = 0xcbf29ce484222325ull;
    for (unsigned i = 0; i < ALIGN_K; i++) {
        if (!s[i].method_id)
            return 0;
        x = (x ^ s[i].method_id) * 0x100000001b3ull;
        x = (x ^ (uint64_t)(uint32_t)s[i].bci) * 0x100000001b3ull;
    }
    return x | 1;
}

static int kpos_cmp(const void *pa, const void *pb)
{
    const kpos *a = pa, *b = pb;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* The first reference position >= from where the K-gram h starts, or -1. */
static int64_t find_from(const kpos *ix, size_t n, uint64_t h, uint64_t from)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix[mid].h < h || (ix[mid].h == h && ix[mid].pos < from))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ix[lo].h == h ? (int64_t)ix[lo].pos : -1;
}

/* The first reference position whose time is >= tsc (> tsc if after). */
static uint64_t tsc_bound(const fsym *r, size_t nr, uint64_t tsc, bool after)
{
    size_t lo = 0, hi = nr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].tsc < tsc || (after && r[mid].tsc == tsc))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Holes largest first (the earlier first among equals). */
static int by_size(const void *pa, const void *pb)
{
    const hole_info *a = pa, *b = pb;
    if (a->bytecodes != b->bytecodes)
        return a->bytecodes > b->bytecodes ? -1 : 1;
    if (a->tsc != b->tsc)
        return a->tsc < b->tsc ? -1 : 1;
    return a->seg < b->seg ? -1 : a->seg > b->seg;
}

/* A count per 64-bit key: keys and counts are one allocation, the table
 * owns them. */
typedef struct keyed_count {
    uint64_t key, n;
} keyed_count;

static keyed_count *count_of(GHashTable *h, uint64_t key)
{
    keyed_count *c = g_hash_table_lookup(h, &key);
    if (!c) {
        c = g_new0(keyed_count, 1);
        c->key = key;
        g_hash_table_add(h, c);    /* key and value: c, hashed on its first field */
    }
    return c;
}

/* The method that runs the most of n bytecodes (0: none placed). */
static uint64_t most_run(const fsym *a, size_t n)
{
    GHashTable *count = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    uint64_t best = 0, best_n = 0;
    for (size_t i = 0; i < n; i++) {
        if (!a[i].method_id)
            continue;
        keyed_count *c = count_of(count, a[i].method_id);
        if (++c->n > best_n) {
            best_n = c->n;
            best = a[i].method_id;
        }
    }
    g_hash_table_destroy(count);
    return best;
}

/* Fill bytecodes whose (method, bci) the hole also runs, each of the hole's
 * used once: an upper bound on what any order of the fill could match. A
 * fill with much more of it than it got right ran the hole's code in
 * another order (a loop's count, a branch); one with little ran other code. */
static uint64_t same_code(const fsym *hole, size_t nh, const fsym *fill, size_t nf)
{
    GHashTable *left = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (size_t j = 0; j < nh; j++)
        count_of(left, fsym_key(&hole[j], 1))->n++;
    uint64_t n = 0;
    for (size_t i = 0; i < nf; i++) {
        uint64_t k = fsym_key(&fill[i], 2);
        keyed_count *c = g_hash_table_lookup(left, &k);
        if (c && c->n) {
            c->n--;
            n++;
        }
    }
    g_hash_table_destroy(left);
    return n;
}

/* A segment of the decoded flow: its decoded placed bytecodes, the fill
 * after them, and where they aligned with the reference. */
typedef struct dseg {
    GArray *dec;          /* fsym */
    GArray *fill;         /* fsym */
    int64_t start, end;   /* aligned reference positions, -1 unknown */
} dseg;

/* The reference's k-grams, sorted for find_from; their count in *n. */
static kpos *index_kgrams(const fsym *r, size_t nr, size_t *n)
{
    size_t nk = nr >= ALIGN_K ? nr - ALIGN_K + 1 : 0;
    kpos *ix = g_new(kpos, nk ? nk : 1);
    *n = 0;
    for (size_t p = 0; p < nk; p++) {
        uint64_t h = kgram(r + p);
        if (h)
            ix[(*n)++] = (kpos){ h, p };
    }
    qsort(ix, *n, sizeof *ix, kpos_cmp);
    return ix;
}

/* The decoded flow's segments (dseg), not yet aligned. */
static GArray *split_segments(GArray *dflow)
{
    GArray *segs = g_array_new(FALSE, TRUE, sizeof(dseg));
    const fsym *d = (const fsym *)dflow->data;
    uint32_t cur = UINT32_MAX;
    for (size_t i = 0; i < dflow->len; i++) {
        if (d[i].seg != cur || !segs->len) {
            dseg s = { g_array_new(FALSE, FALSE, sizeof(fsym)),
                       g_array_new(FALSE, FALSE, sizeof(fsym)), -1, -1 };
            g_array_append_val(segs, s);
            cur = d[i].seg;
        }
        dseg *s = &g_array_index(segs, dseg, segs->len - 1);
        if (d[i].origin == FL_RECOVERED || d[i].origin == FL_GUESSED)
            g_array_append_val(s->fill, d[i]);
        else if (d[i].origin == FL_DECODED && d[i].method_id && d[i].bci >= 0)
            g_array_append_val(s->dec, d[i]);
    }
    return segs;
}

/* Aligns each segment's decoded bytecodes with the reference r (its k-gram
 * index ix of n), in order: DA's matches, and each segment's start and end. */
static void align_segments(tstats *ts, GArray *segs, const fsym *r, size_t nr, const kpos *ix,
                           size_t n)
{
    uint64_t cursor = 0;
    for (guint si = 0; si < segs->len; si++) {
        dseg *s = &g_array_index(segs, dseg, si);
        const fsym *x = (const fsym *)s->dec->data;
        size_t nx = s->dec->len;
        if (!nx)
            continue;
        size_t i = 0;
        while (i < nx) {
            /* the reference's bytecodes of the same time (the streams share
             * their timing packets), not before the previous match */
            uint64_t lo = tsc_bound(r, nr, x[i].tsc, false);
            uint64_t hi = tsc_bound(r, nr, x[i].tsc, true);
            if (lo < cursor)
                lo = cursor;
            int64_t p = -1;
            if (i + ALIGN_K <= nx) {
                uint64_t h = kgram(x + i);
                p = h && lo < hi ? find_from(ix, n, h, lo) : -1;
                if (p >= 0 && (uint64_t)p >= hi)
                    p = -1;
            } else {
                /* fewer than K left: the first equal bytecode of that time */
                for (uint64_t j = lo; j < hi && j < lo + 4096; j++)
                    if (same(&x[i], &r[j])) {
                        p = (int64_t)j;
                        break;
                    }
            }
            if (p < 0) {
                i++;
                continue;
            }
            uint64_t q = (uint64_t)p;
            if (s->start < 0)
                s->start = p;
            while (i < nx && q < nr && same(&x[i], &r[q])) {
                ts->da_match++;
                i++;
                q++;
            }
            cursor = q;
            s->end = (int64_t)q;
            if (i < nx)
                i++;   /* the mismatch */
        }
    }
}

/* The fill x of nx against the hole of the reference at r of nh, in
 * order: a longest common subsequence of the two, each fill bytecode
 * counted right where it lengthens that of the fill up to it (so a guessed
 * path after the recovered pieces gets what it adds to theirs). */
static void score_fill(tstats *ts, hole_info *hi, const fsym *x, size_t nx, const fsym *r,
                       size_t nh)
{
    uint64_t *fa = g_new(uint64_t, nx), *ha = g_new(uint64_t, nh ? nh : 1);
    for (size_t i = 0; i < nx; i++)
        fa[i] = fsym_key(&x[i], 2);
    for (size_t j = 0; j < nh; j++)
        ha[j] = fsym_key(&r[j], 1);
    uint8_t *ok = g_new0(uint8_t, nx);
    seq_lcs(fa, nx, ha, nh, ok);
    g_free(fa);
    g_free(ha);
    for (size_t i = 0; i < nx; i++) {
        if (x[i].origin == FL_GUESSED)
            ts->ga_match += ok[i];
        else
            ts->ra_match += ok[i];
        if (hi)
            hi->right += ok[i];
    }
    g_free(ok);
}

/* The holes, between a segment's end and the next one's start, and the
 * fills in them: RA's and GA's matches. */
static void score_holes(tstats *ts, GArray *segs, const fsym *r, size_t nr)
{
    /* seen: the symbols (fsym_key) of the decoded segments so far */
    GHashTable *seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (guint si = 0; si < segs->len; si++) {
        dseg *s = &g_array_index(segs, dseg, si);
        for (guint i = 0; i < s->dec->len; i++) {
            uint64_t k = fsym_key(&g_array_index(s->dec, fsym, i), 1);
            if (!g_hash_table_contains(seen, &k))
                g_hash_table_add(seen, g_memdup2(&k, sizeof k));
        }
        if (s->end < 0)
            continue;
        uint64_t q = (uint64_t)s->end, qend = nr;
        for (guint sj = si + 1; sj < segs->len; sj++) {
            dseg *t = &g_array_index(segs, dseg, sj);
            if (t->start >= 0) {
                qend = (uint64_t)t->start;
                break;
            }
        }
        if (qend > q)
            hole_add(ts, qend - q);
        const uint64_t unseen0 = ts->hole_unseen;
        for (uint64_t j = q; j < qend; j++) {
            uint64_t k = fsym_key(&r[j], 1);
            ts->hole_unseen += !g_hash_table_contains(seen, &k);
        }
        hole_info *hi = NULL;
        if (ts->largest && qend > q) {
            hole_info h = { .tsc = r[q].tsc, .bytecodes = qend - q,
                            .unseen = ts->hole_unseen - unseen0, .filled = s->fill->len,
                            .seg = si };
            g_array_append_val(ts->largest, h);
            hi = &g_array_index(ts->largest, hole_info, ts->largest->len - 1);
        }
        if (s->fill->len)
            score_fill(ts, hi, (const fsym *)s->fill->data, s->fill->len, r + q,
                       (size_t)(qend - q));
    }
    g_hash_table_destroy(seen);
}

/* The largest holes (--holes), with what the fill ran against what the
 * hole did. */
static void describe_largest(tstats *ts, GArray *segs, const fsym *r)
{
    g_array_sort(ts->largest, by_size);
    if (ts->largest->len > list_holes)
        g_array_set_size(ts->largest, list_holes);
    for (guint i = 0; i < ts->largest->len; i++) {
        hole_info *h = &g_array_index(ts->largest, hole_info, i);
        const dseg *s = &g_array_index(segs, dseg, h->seg);
        const fsym *hole = r + s->end;
        const fsym *fill = (const fsym *)s->fill->data;
        h->hole_method = most_run(hole, h->bytecodes);
        h->fill_method = most_run(fill, s->fill->len);
        h->same_code = same_code(hole, h->bytecodes, fill, s->fill->len);
    }
}

/* DA and RA of one thread: the decoded flow d against the reference r. */
static void compare(tstats *ts, GArray *dflow, GArray *rflow)
{
    const fsym *r = (const fsym *)rflow->data;
    size_t nr = rflow->len;
    size_t n;
    kpos *ix = index_kgrams(r, nr, &n);
    GArray *segs = split_segments(dflow);
    align_segments(ts, segs, r, nr, ix, n);
    score_holes(ts, segs, r, nr);
    if (ts->largest)
        describe_largest(ts, segs, r);
    for (guint si = 0; si < segs->len; si++) {
        dseg *s = &g_array_index(segs, dseg, si);
        g_array_free(s->dec, TRUE);
        g_array_free(s->fill, TRUE);
    }
    g_array_free(segs, TRUE);
    g_free(ix);
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 100.0; }

typedef struct pcts {
    double pmd, pdc, pd, da, pr, ra, ga, overall;
    double sh_rec, sh_guess;         /* shares of the flow's placed bytecodes */
    bool has_da, has_r;
} pcts;

static pcts percentages(const tstats *t)
{
    pcts p = { 0 };
    /* shared with the summary (profile/source.h) */
    p.pmd = pf_share_missing(&t->dc);
    p.pdc = 100.0 - p.pmd;
    p.pd = pf_share_decoded(&t->dc, &t->rp);
    p.has_da = t->eval;
    p.da = pct(t->da_match, t->decoded_placed);
    p.has_r = t->eval && t->recover;
    uint64_t missing = t->ref_bytecodes > t->rp.bytecodes ? t->ref_bytecodes - t->rp.bytecodes : 0;
    p.pr = missing ? pct(t->recovered, missing) : 0;
    if (p.pr > 100)
        p.pr = 100;
    p.ra = t->recovered ? pct(t->ra_match, t->recovered) : 0;
    p.ga = t->guessed ? pct(t->ga_match, t->guessed) : 0;
    uint64_t right = t->da_match + t->ra_match + t->ga_match;
    p.overall = t->ref_bytecodes ? pct(right, t->ref_bytecodes) : 0;
    if (p.overall > 100)
        p.overall = 100;
    uint64_t all = t->decoded_placed + t->recovered + t->guessed;
    p.sh_rec = all ? pct(t->recovered, all) : 0;
    p.sh_guess = all ? pct(t->guessed, all) : 0;
    return p;
}

static void sum(tstats *a, const tstats *b)
{
    a->dc.pt_bytes += b->dc.pt_bytes;
    a->dc.lost_bytes += b->dc.lost_bytes;
    a->dc.missing_bytes += b->dc.missing_bytes;
    a->dc.unindexed_bytes += b->dc.unindexed_bytes;
    a->dc.skipped_bytes += b->dc.skipped_bytes;
    a->dc.insns += b->dc.insns;
    for (int i = 0; i < 5; i++)
        a->dc.gaps[i] += b->dc.gaps[i];
    rp_stats_add(&a->rp, &b->rp);
    rv_stats_add(&a->rv, &b->rv);
    a->eval = a->eval && b->eval;
    a->recover = b->recover;
    a->decoded_placed += b->decoded_placed;
    a->recovered += b->recovered;
    a->guessed += b->guessed;
    a->ref_bytecodes += b->ref_bytecodes;
    a->da_match += b->da_match;
    a->ra_match += b->ra_match;
    a->ga_match += b->ga_match;
    a->holes += b->holes;
    a->hole_bytecodes += b->hole_bytecodes;
    if (b->largest_hole > a->largest_hole)
        a->largest_hole = b->largest_hole;
    a->large_holes += b->large_holes;
    a->large_hole_bytecodes += b->large_hole_bytecodes;
    a->hole_unseen += b->hole_unseen;
    a->flow_ns += b->flow_ns;
}

static uint64_t gaps(const dc_stats *s)
{
    return pf_dc_gaps(s);
}

static void json_pct(FILE *f, const char *name, bool have, double v)
{
    if (have)
        fprintf(f, ",\"%s\":%.3f", name, v);
    else
        fprintf(f, ",\"%s\":null", name);
}

static void print_json(FILE *f, const tstats *t, bool total)
{
    pcts p = percentages(t);
    if (total)
        fprintf(f, "{");
    else
        fprintf(f, "{\"tid\":%u,", t->tid);
    fprintf(f, "\"pt_bytes\":%" PRIu64 ",\"lost_bytes\":%" PRIu64 ",\"skipped_bytes\":%" PRIu64
            ",\"insns\":%" PRIu64 ",\"gaps\":%" PRIu64 ",\"bytecodes\":%" PRIu64
            ",\"placed\":%" PRIu64 ",\"segments\":%" PRIu64 ",\"eval\":%s",
            t->dc.pt_bytes, t->dc.lost_bytes, t->dc.skipped_bytes, t->dc.insns, gaps(&t->dc),
            t->rp.bytecodes, t->rp.placed, t->rp.segments, t->eval ? "true" : "false");
    if (t->eval)
        fprintf(f, ",\"reference_bytecodes\":%" PRIu64 ",\"da_matched\":%" PRIu64
                ",\"holes\":{\"count\":%" PRIu64 ",\"bytecodes\":%" PRIu64
                ",\"largest\":%" PRIu64 ",\"large_min\":%u,\"large\":%" PRIu64
                ",\"large_bytecodes\":%" PRIu64 ",\"unseen\":%" PRIu64 "}",
                t->ref_bytecodes, t->da_match, t->holes, t->hole_bytecodes, t->largest_hole,
                LARGE_HOLE, t->large_holes, t->large_hole_bytecodes, t->hole_unseen);
    if (t->recover)
        fprintf(f, ",\"recovery\":{\"boundaries\":%" PRIu64 ",\"filled\":%" PRIu64
                ",\"rejoined\":%" PRIu64 ",\"empty_rejoin\":%" PRIu64 ",\"spliced\":%" PRIu64
                ",\"no_anchor\":%" PRIu64
                ",\"call_anchored\":%" PRIu64 ",\"rejoin_on_calls\":%" PRIu64
                ",\"cut_at_stack\":%" PRIu64
                ",\"no_candidate\":%" PRIu64
                ",\"events\":%" PRIu64 ",\"bytecodes\":%" PRIu64 ",\"guessed_gaps\":%" PRIu64
                ",\"guessed_events\":%" PRIu64 ",\"guessed_bytecodes\":%" PRIu64
                ",\"links\":%" PRIu64 ",\"candidates\":%" PRIu64 ",\"pruned_tier1\":%" PRIu64
                ",\"pruned_tier2\":%" PRIu64 ",\"ranked_tier3\":%" PRIu64
                ",\"inconsistent\":%" PRIu64 ",\"seconds\":%.3f%s",
                t->rv.boundaries, t->rv.filled, t->rv.rejoined, t->rv.empty_rejoin, t->rv.spliced,
                t->rv.no_anchor,
                t->rv.call_anchored, t->rv.rejoin_on_calls, t->rv.cut_at_stack,
                t->rv.no_candidate, t->rv.events, t->rv.bytecodes, t->rv.guessed_gaps,
                t->rv.guessed_events, t->rv.guessed_bytecodes, t->rv.links, t->rv.candidates,
                t->rv.pruned_t1, t->rv.pruned_t2, t->rv.ranked_t3, t->rv.inconsistent,
                (double)t->rv.ns / 1e9, t->eval ? "" : "}");
    if (t->recover && t->eval)
        fprintf(f, ",\"ra_matched\":%" PRIu64 ",\"ga_matched\":%" PRIu64 "}", t->ra_match,
                t->ga_match);
    fprintf(f, ",\"compiled\":{\"bytecodes\":%" PRIu64 ",\"estimated_bytecodes\":%" PRIu64
            ",\"inlined_calls\":%" PRIu64 ",\"calls_inferred\":%" PRIu64
            ",\"estimated_calls\":%" PRIu64 ",\"pins\":%" PRIu64 ",\"pins_skipped\":%" PRIu64
            ",\"resyncs\":%" PRIu64 ",\"unrolled_passes\":%" PRIu64
            ",\"unrolled_iterations\":%" PRIu64 "}",
            t->rp.jit.bytecodes, t->rp.jit.estimated_bytecodes, t->rp.jit.inlined_calls,
            t->rp.jit.calls_inferred, t->rp.jit.estimated_calls, t->rp.jit.pins,
            t->rp.jit.pins_skipped, t->rp.jit.resyncs, t->rp.jit.unrolled_passes,
            t->rp.jit.unrolled_iterations);
    fprintf(f, ",\"flow_seconds\":%.3f", (double)t->flow_ns / 1e9);
    json_pct(f, "recovered_share", t->recover, p.sh_rec);
    json_pct(f, "guessed_share", t->recover, p.sh_guess);
    json_pct(f, "pmd", true, p.pmd);
    json_pct(f, "pdc", true, p.pdc);
    json_pct(f, "pd", true, p.pd);
    json_pct(f, "da", p.has_da, p.da);
    json_pct(f, "pr", p.has_r, p.pr);
    json_pct(f, "ra", p.has_r, p.ra);
    json_pct(f, "ga", p.has_r && t->guessed, p.ga);
    json_pct(f, "overall", p.has_da, p.overall);
    if (t->largest) {
        fprintf(f, ",\"largest_holes\":[");
        for (guint i = 0; i < t->largest->len; i++) {
            const hole_info *h = &g_array_index(t->largest, hole_info, i);
            fprintf(f, "%s{\"tsc\":%" PRIu64 ",\"bytecodes\":%" PRIu64 ",\"unseen\":%" PRIu64
                    ",\"method\":", i ? "," : "", h->tsc, h->bytecodes, h->unseen);
            json_put_str(f, h->hole_name);
            fprintf(f, ",\"filled\":%" PRIu64 ",\"right\":%" PRIu64 ",\"same_code\":%" PRIu64
                    ",\"fill_method\":", h->filled, h->right, h->same_code);
            json_put_str(f, h->fill_name);
            fprintf(f, "}");
        }
        fprintf(f, "]");
    }
    fprintf(f, "}");
}

static void text_pct(FILE *f, const char *name, bool have, double v)
{
    if (have)
        fprintf(f, "  %s %6.2f%%", name, v);
    else
        fprintf(f, "  %s      -", name);
}

static void print_text(FILE *f, const tstats *t, const char *label)
{
    pcts p = percentages(t);
    fprintf(f, "%-14s", label);
    text_pct(f, "PMD", true, p.pmd);
    text_pct(f, "PDC", true, p.pdc);
    text_pct(f, "PD", true, p.pd);
    text_pct(f, "DA", p.has_da, p.da);
    text_pct(f, "PR", p.has_r, p.pr);
    text_pct(f, "RA", p.has_r, p.ra);
    text_pct(f, "GA", p.has_r && t->guessed, p.ga);
    text_pct(f, "overall", p.has_da, p.overall);
    fputc('\n', f);
    fprintf(f, "%14s %" PRIu64 " bytes recorded, %" PRIu64 " lost, %" PRIu64 " gaps; %" PRIu64
            " bytecodes, %" PRIu64 " placed, %" PRIu64 " segments", "", t->dc.pt_bytes,
            t->dc.lost_bytes, gaps(&t->dc), t->rp.bytecodes, t->rp.placed, t->rp.segments);
    if (t->dc.missing_bytes || t->dc.unindexed_bytes)
        fprintf(f, "; of the files, %" PRIu64 " bytes missing (cut, counted lost), %" PRIu64
                " past their index not decoded", t->dc.missing_bytes, t->dc.unindexed_bytes);
    if (t->eval)
        fprintf(f, "; reference %" PRIu64 " bytecodes, %" PRIu64 " of them in %" PRIu64
                " holes (largest %" PRIu64 "; %" PRIu64 " of %u or more hold %" PRIu64
                "; %" PRIu64 " never run before their hole)",
                t->ref_bytecodes, t->hole_bytecodes, t->holes, t->largest_hole, t->large_holes,
                LARGE_HOLE, t->large_hole_bytecodes, t->hole_unseen);
    if (t->recover)
        fprintf(f, "; recovery filled %" PRIu64 " of %" PRIu64 " boundaries (%" PRIu64
                " rejoined, %" PRIu64 " of them by a tail) with %" PRIu64 " bytecodes",
                t->rv.filled, t->rv.boundaries, t->rv.rejoined, t->rv.spliced, t->rv.bytecodes);
    fputc('\n', f);
    const rj_stats *j = &t->rp.jit;
    if (j->bytecodes)
        fprintf(f, "%14s compiled code: %" PRIu64 " bytecodes, %.2f%% estimated (paths the trace "
                "does not settle); %" PRIu64 " inlined calls, %" PRIu64 " inferred, %" PRIu64
                " estimated; %" PRIu64 " of %" PRIu64 " scopes left out, %" PRIu64 " resyncs; %"
                PRIu64 " iterations of unrolled loops no scope showed\n",
                "", j->bytecodes, 100.0 * (double)j->estimated_bytecodes / (double)j->bytecodes,
                j->inlined_calls, j->calls_inferred, j->estimated_calls, j->pins_skipped, j->pins,
                j->resyncs, j->unrolled_iterations);
    if (t->recover)
        fprintf(f, "%14s of the flow's bytecodes %.2f%% recovered, %.2f%% guessed (ICFG paths in "
                "%" PRIu64 " gaps); recovery %.2f s of %.2f s CPU for the flow\n", "", p.sh_rec,
                p.sh_guess, t->rv.guessed_gaps, (double)t->rv.ns / 1e9, (double)t->flow_ns / 1e9);
    if (t->largest && t->largest->len) {
        fprintf(f, "%14s the %u largest of %" PRIu64 " holes:\n", "", t->largest->len, t->holes);
        for (guint i = 0; i < t->largest->len; i++) {
            const hole_info *h = &g_array_index(t->largest, hole_info, i);
            fprintf(f, "%14s   at TSC %" PRIu64 ": %" PRIu64 " bytecodes (%" PRIu64
                    " never run before), most in %s\n", "", h->tsc, h->bytecodes, h->unseen,
                    h->hole_name);
            if (h->filled)
                fprintf(f, "%14s     filled with %" PRIu64 ": %" PRIu64 " right in order, %" PRIu64
                        " of the hole's code in any order, most in %s\n", "", h->filled,
                        h->right, h->same_code, h->fill_name);
            else
                fprintf(f, "%14s     not filled\n", "");
        }
    }
}

static void largest_free(tstats *t)
{
    if (!t->largest)
        return;
    for (guint i = 0; i < t->largest->len; i++) {
        hole_info *h = &g_array_index(t->largest, hole_info, i);
        g_free(h->hole_name);
        g_free(h->fill_name);
    }
    g_array_free(t->largest, TRUE);
    t->largest = NULL;
}

static bool cut_disputed, time_only;

/* Every thread's flow in turn (profile/source.h): the counts, then the
 * comparison with the lossless copy. */
typedef struct stats_run {
    rt_trace *t;
    bool recover, guess, eval, json;
    bool own_recovery;         /* recovery with other than its defaults: run here */
    rv_icfg ic;
    rv_filter *rv;
    collector c;
    tstats ts;
    tstats total;
    bool found, first;
    int status;
} stats_run;

static void stats_begin(uint32_t tid, void *vr)
{
    stats_run *r = vr;
    tstats *ts = &r->ts;
    memset(ts, 0, sizeof *ts);
    ts->tid = tid;
    ts->recover = r->recover;
    char *lossless = g_strdup_printf("%s/eval/tid-%u.pt", rt_dir(r->t), tid);
    ts->eval = r->eval && access(lossless, R_OK) == 0;
    g_free(lossless);
    r->c = (collector){ .syms = ts->eval ? g_array_new(FALSE, FALSE, sizeof(fsym)) : NULL };
    if (ts->eval && list_holes)
        ts->largest = g_array_new(FALSE, FALSE, sizeof(hole_info));
    if (r->own_recovery) {
        rv_options ro = { .icfg = r->guess ? &r->ic : NULL, .cut_disputed = cut_disputed,
                          .no_lost_bytes = time_only };
        r->rv = rv_new(&ro, collect, &r->c);
    }
}

static int stats_event(const fl_event *ev, void *vr)
{
    stats_run *r = vr;
    return r->rv ? rv_event(ev, r->rv) : collect(ev, &r->c);
}

static void stats_end(const fc_thread *th, void *vr)
{
    stats_run *r = vr;
    tstats *ts = &r->ts;
    collector *c = &r->c;
    char err[1024];
    ts->rp = th->rp;
    ts->dc = th->dc;
    ts->rv = th->rv;
    ts->flow_ns = th->cpu_ns;
    if (r->rv) {
        rv_finish(r->rv, &ts->rv);
        rv_free(r->rv);
        r->rv = NULL;
        ts->flow_ns += ts->rv.ns;
    }
    ts->decoded_placed = c->decoded_placed;
    ts->recovered = c->recovered;
    ts->guessed = c->guessed;
    if (th->rc < 0) {
        jerr_error("%s", th->err);
        ts->eval = false;
        largest_free(ts);
        r->status = 1;
    }
    if (ts->eval) {
        uint32_t tid = th->tid;
        char *lossless = g_strdup_printf("%s/eval/tid-%u.pt", rt_dir(r->t), tid);
        collector rc2 = { .syms = g_array_new(FALSE, FALSE, sizeof(fsym)) };
        rp_stats rst = { 0 };
        dc_stats rdc;
        rt_flow_out out = { .sink = collect, .ctx = &rc2, .st = &rst, .dst = &rdc };
        int rr = rt_thread_flow_path(r->t, tid, lossless, NULL, &out, err, sizeof err);
        if (rr < 0) {
            jerr_error("%s (lossless copy)", err);
            ts->eval = false;
            largest_free(ts);
        } else {
            ts->ref_bytecodes = rst.bytecodes;
            compare(ts, c->syms, rc2.syms);
            for (guint i = 0; ts->largest && i < ts->largest->len; i++) {
                hole_info *h = &g_array_index(ts->largest, hole_info, i);
                char name[512];
                h->hole_name = g_strdup(h->hole_method ? rt_method_name(r->t, h->hole_method,
                                                                        name, sizeof name)
                                                       : "-");
                h->fill_name = g_strdup(h->fill_method ? rt_method_name(r->t, h->fill_method,
                                                                        name, sizeof name)
                                                       : "-");
            }
        }
        g_array_free(rc2.syms, TRUE);
        g_free(lossless);
    }
    if (c->syms)
        g_array_free(c->syms, TRUE);
    c->syms = NULL;
    r->found = true;
    sum(&r->total, ts);
    if (r->json) {
        if (!r->first)
            putchar(',');
        print_json(stdout, ts, false);
    } else {
        char label[32];
        snprintf(label, sizeof label, "thread %u", th->tid);
        print_text(stdout, ts, label);
    }
    largest_free(ts);
    r->first = false;
    fflush(stdout);
}

/* The command line of `ptdecode stats` (--cut-disputed, --time-only and
 * --holes set the file's switches above). */
typedef struct stats_args {
    const char *dir;
    long long tid;              /* --thread; -1: every thread */
    bool json, recover, eval, guess;
} stats_args;

/* Returns -1 to go on, else the exit status (--help, a usage error). */
static int parse_args(int argc, char **argv, stats_args *a)
{
    static const struct option opts[] = {
        { "thread", required_argument, NULL, 't' },
        { "json", no_argument, NULL, 'j' },
        { "no-recover", no_argument, NULL, 'R' },
        { "no-eval", no_argument, NULL, 'E' },
        { "no-guess", no_argument, NULL, 'G' },
        { "cut-disputed", no_argument, NULL, 'C' },
        { "time-only", no_argument, NULL, 'T' },
        { "holes", required_argument, NULL, 'H' },
        { "jobs", required_argument, NULL, 'J' },
        { "no-cache", no_argument, NULL, 'N' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *a = (stats_args){ .tid = -1, .recover = true, .eval = true, .guess = true };
    pf_source_opts so = *pf_source_options();
    int c;
    optind = 1;
    cut_disputed = false;
    time_only = false;
    list_holes = 0;
    while ((c = getopt_long(argc, argv, "t:jh", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 't':
            if (!ptd_parse_tid("stats", optarg, &a->tid))
                return 2;
            break;
        case 'j':
            a->json = true;
            break;
        case 'R':
            a->recover = false;
            break;
        case 'E':
            a->eval = false;
            break;
        case 'G':
            a->guess = false;
            break;
        case 'C':
            cut_disputed = true;
            break;
        case 'T':
            time_only = true;
            break;
        case 'H': {
            errno = 0;
            long long nh = strtoll(optarg, &end, 10);
            if (errno || *end || end == optarg || nh < 0 || nh > 1000000) {
                jerr_error("stats: --holes wants a count from 0 to 1000000, not '%s'", optarg);
                return 2;
            }
            list_holes = (unsigned)nh;
            break;
        }
        case 'J':
            if (!ptd_parse_jobs(optarg, &so.jobs))
                return 2;
            break;
        case 'N':
            so.no_cache = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    pf_source_set_options(&so);
    a->dir = argv[optind];
    return -1;
}

/* The totals of all threads and what the trace check found, after the
 * threads' own lines. */
static void print_total(const stats_args *a, const tstats *total, const dc_check *chk)
{
    char rec[512], more[512];
    dc_check_recording(chk, rec, sizeof rec);
    dc_check_losses(chk, more, sizeof more);
    if (a->json) {
        printf("],\"total\":");
        print_json(stdout, total, true);
        printf(",\"recording\":");
        json_put_str(stdout, rec);
        printf(",\"trace_losses\":{\"streams_absent\":%" PRIu64 ",\"missing_bytes\":%" PRIu64
               ",\"unindexed_bytes\":%" PRIu64 ",\"lost_outside_streams\":%" PRIu64
               ",\"main_untraced\":%s,\"metadata_records_ignored\":%" PRIu64
               ",\"code_records_cut\":%" PRIu64 "}}\n", chk->streams_absent, chk->missing_bytes,
               chk->unindexed_bytes, chk->lost_outside, chk->main_untraced ? "true" : "false",
               chk->meta_ignored, chk->code_cut);
    } else {
        print_text(stdout, total, "all threads");
        printf("recording      %s\n", rec);
        if (more[0])
            printf("trace losses   %s\n", more + 2);
    }
}

/* Every chosen thread's counts, then the totals. Returns the exit status. */
static int report(const stats_args *a, rt_trace *t, const dc_check *chk)
{
    const char *dir = a->dir;
    char err[1024];
    stats_run run = { .t = t, .recover = a->recover, .guess = a->guess, .eval = a->eval,
                      .json = a->json,
                      .own_recovery = a->recover && (!a->guess || cut_disputed || time_only),
                      .ic = rv_program_icfg(rt_program(t)), .first = true,
                      .total = { .eval = a->eval, .recover = a->recover } };
    if (a->json) {
        printf("{\"trace\":");
        json_put_str(stdout, dir);
        printf(",\"threads\":[");
    }
    /* The cache holds the flow recovered with the defaults; other recovery
     * runs here on the projector's flow. */
    pf_flow_request rq = { .sink = stats_event, .ctx = &run, .tid = a->tid,
                           .decoded_only = !a->recover || run.own_recovery,
                           .begin = stats_begin, .end = stats_end, .keep_going = true,
                           .trace = t };
    bool none = false;
    if (pf_flow_read(dir, &rq, NULL, err, sizeof err) < 0 && !run.found) {
        if (!a->json)
            jerr_error("%s", err);
        none = true;
    }
    int status = run.status;
    tstats total = run.total;
    if (!run.found) {
        total.eval = false;
        status = 1;
    }
    /* Bytes lost where no thread's stream shows them (absent streams, ...)
     * count in the total only. */
    if (a->tid < 0)
        total.dc.lost_bytes += chk->lost_outside;
    print_total(a, &total, chk);
    if (a->json && none)
        jerr_error("%s", err);
    return status;
}

int cmd_stats(int argc, char **argv)
{
    stats_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *dir = a.dir;
    char err[1024];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    rt_trace *t = rt_open(dir, err, sizeof err);
    if (!t) {
        jerr_error("%s", err);
        dc_check_free(&chk);
        return 1;
    }
    const char *const *warn;
    size_t nw = rt_warnings(t, &warn);
    for (size_t i = 0; i < nw; i++)
        jerr_warn_grouped(warn[i]);
    const uint32_t *tids;
    size_t ncpu;
    if (!rt_threads(t, &tids, &ncpu)) {
        jerr_error("%s/pt: no per-thread PT streams (tid-<TID>.pt)%s", dir,
                   ncpu ? "; the per-CPU streams hold no thread's trace" : "");
        rt_close(t);
        dc_check_free(&chk);
        return 1;
    }
    int status = report(&a, t, &chk);
    rt_close(t);
    dc_check_free(&chk);
    return status;
}
