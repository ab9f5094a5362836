/* The tail of a long hole: the history that led up to an earlier run of
 * the next segment's first symbols, spliced onto the fill. */
#include "recover/filter.h"

#include <stdlib.h>

/* A continuation is surest near the place it was anchored: on luindex at
 * ~25% loss, a fill's first tenth matched the hole at 84%, its last at 14%
 * (README.md). The end of a hole is anchored too: the next segment starts
 * with known symbols, and the history before an earlier run of the same
 * symbols is a continuation backwards from there. A long fill that never
 * rejoined is spliced: it keeps its first half and ends with the history
 * that led up to the next segment's first symbols. The seam is where both
 * run the same K symbols, the nearer to halfway the better (the same caller
 * preferred); where they share none, at halfway. The tail's frames are
 * taken there as found running (seam_stack). A hole of any size that no
 * candidate continues from its start (the segment before it ran code the
 * history never ran, or every candidate contradicts the stack) is filled
 * with the tail alone. */
#define SPLICE_MIN 4096u          /* bytecodes a hole must hold */
#define SPLICE_TAILS 4u           /* earlier runs of the rejoin symbols tried */
#define SPLICE_NEAR 8u            /* joints tried per place of a tail */

/* A bytecode of the fill where a tail may join it. */
typedef struct joint {
    uint64_t key;             /* the K-gram ending there */
    uint64_t nbc;             /* the fill's bytecodes up to and with it */
    uint64_t caller;          /* the frame below its own on the stack, 0 unknown */
} joint;

static int by_key_nbc(const void *pa, const void *pb)
{
    const joint *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->nbc < b->nbc ? -1 : a->nbc > b->nbc;
}

/* The frame below the top one, 0 when unknown. */
static uint64_t caller_of(const GArray *stk)
{
    return stk->len >= 2 ? g_array_index(stk, frame, stk->len - 2).method_id : 0;
}

/* A way for the fill to end: after its fwd-th bytecode, the history's
 * events (x, r), run in the frames stk (bottom first, as far as known). */
typedef struct seam {
    uint64_t fwd, x, r, score;
    GArray *stk;
} seam;

static void seam_take(seam *sm, uint64_t fwd, uint64_t x, uint64_t r, uint64_t score,
                      const GArray *stk)
{
    *sm = (seam){ fwd, x, r, score, sm->stk };
    g_array_set_size(sm->stk, 0);
    g_array_append_vals(sm->stk, stk->data, stk->len);
}

/* One splice: the hole's size, where on the fill a tail may join it, and
 * the best ways found so far for the fill to end. */
typedef struct splice {
    uint64_t expect;          /* bytecodes the hole holds */
    /* the seam goes where the fill and the tail share K symbols, the nearer
     * to mid (halfway, or the fill's end when shorter) the better, tol at
     * most off; else at that place, with a tail of tail_want bytecodes */
    uint64_t mid, tol, tail_want;
    int alone;                /* no fill: the tail is all of it */
    GArray *joints;           /* joint, by key then nbc */
    GHashTable *first;        /* K-gram -> index + 1 of its first joint */
    GArray *back;             /* frame: the frames a tail's event ran in */
    seam joined;              /* the best seam where fill and tail share K symbols */
    seam cut;                 /* else at mid */
    seam part;                /* else, without a fill, the longest tail */
    uint64_t part_tb;         /* the bytecodes of part's tail */
} splice;

/* The fill's bytecodes where a tail may join it (those that end K symbols
 * in a row), by K-gram. */
static void find_joints(rv_filter *f, splice *sp, const GArray *pieces)
{
    sp->joints = g_array_new(FALSE, FALSE, sizeof(joint));
    GArray *sim = g_array_new(FALSE, FALSE, sizeof(frame));
    g_array_append_vals(sim, f->stk->data, f->stk->len);
    uint64_t nbc = 0;
    for (guint k = 0; k < pieces->len && nbc < sp->expect; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        for (uint64_t i = 0; i < pc->len && nbc < sp->expect; i++) {
            const hev *x = ev_at(f, pc->start + i);
            if (!context_known(sim, x))
                stack_step(sim, x);
            if (x->kind != FL_BYTECODE)
                continue;
            nbc++;
            if (x->sym < 0 || sym_at(f, (uint64_t)x->sym)->run < f->o.k)
                continue;
            joint j = { rv_kgram_key(f, (uint64_t)x->sym), nbc, caller_of(sim) };
            g_array_append_val(sp->joints, j);
        }
    }
    g_array_free(sim, TRUE);
    GArray *joints = sp->joints;
    if (joints->len > 1)
        qsort(joints->data, joints->len, sizeof(joint), by_key_nbc);
    sp->first = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = joints->len; i-- > 0;)
        g_hash_table_insert(sp->first, (gpointer)(uintptr_t)g_array_index(joints, joint, i).key,
                            GUINT_TO_POINTER(i + 1));
}

/* Steps the tail's frames (back) back over history event x; 0 where x
 * contradicts them (the tail cannot read further back). */
static int back_step(GArray *back, const hev *x)
{
    if (x->kind == FL_BYTECODE && x->sym >= 0) {
        frame *top = back->len ? &g_array_index(back, frame, back->len - 1) : NULL;
        if (top && top->method_id && top->method_id != x->method_id)
            return 0;
        if (!top) {
            frame fr = { x->method_id, -1 };
            g_array_append_val(back, fr);
        } else {
            top->method_id = x->method_id;
        }
    } else if (x->kind == FL_RETURN) {
        frame fr = { x->method_id, -1 };
        g_array_append_val(back, fr);
    } else if (x->kind == FL_CALL && back->len) {
        uint64_t top = g_array_index(back, frame, back->len - 1).method_id;
        if (top && top != x->method_id)
            return 0;
    }
    return 1;
}

/* A tail from history event e (bytecode x) to r, tb bytecodes long after
 * x: the joints of the fill with x's K-gram where fill and tail together
 * hold about what the hole holds, scored by their distance to mid and to
 * the hole's size (another caller below costs tol), the best into joined. */
static void join_at(rv_filter *f, splice *sp, const hev *x, uint64_t e, uint64_t r, uint64_t tb)
{
    const uint64_t expect = sp->expect, tol = sp->tol;
    const GArray *joints = sp->joints;
    uint64_t key = rv_kgram_key(f, (uint64_t)x->sym), goal = expect - tb;
    gpointer fj = g_hash_table_lookup(sp->first, (gpointer)(uintptr_t)key);
    guint lo = fj ? GPOINTER_TO_UINT(fj) - 1 : joints->len, l = lo, h = joints->len;
    while (l < h) {      /* the first joint of key with nbc >= goal */
        guint m = l + (h - l) / 2;
        const joint *j = &g_array_index(joints, joint, m);
        if (j->key == key && j->nbc < goal)
            l = m + 1;
        else
            h = m;
    }
    uint64_t below = caller_of(sp->back);
    for (guint q = l > lo + SPLICE_NEAR ? l - SPLICE_NEAR : lo;
         q < joints->len && q < l + SPLICE_NEAR; q++) {
        const joint *j = &g_array_index(joints, joint, q);
        if (j->key != key || dist(j->nbc + tb, expect) > tol)
            continue;
        uint64_t score = dist(j->nbc, sp->mid) + dist(j->nbc + tb, expect) +
                         (below && j->caller && below != j->caller ? tol : 0);
        if (score < sp->joined.score)
            seam_take(&sp->joined, j->nbc, e, r, score, sp->back);
    }
}

/* Reads the history back from r (an earlier run of the next segment's
 * first symbols) for the seams a tail ending there offers. */
static void read_tail(rv_filter *f, splice *sp, const target *t, uint64_t r)
{
    const uint64_t expect = sp->expect;
    GArray *back = sp->back;
    /* back from r: the frames each event ran in, from those the next
     * segment starts with (method 0: unknown) */
    g_array_set_size(back, 0);
    g_array_append_vals(back, t->stk->data, t->stk->len);
    uint32_t seg = ev_at(f, r)->segno;
    uint64_t tb = 0;     /* bytecodes after e, before r */
    uint64_t e = r;
    for (; e > f->hbase && tb < expect;) {
        const hev *x = ev_at(f, e - 1);
        if (x->segno != seg) {
            if (x->segno + 1 != seg || !rv_seg_crossable(f, seg))
                break;
            seg = x->segno;
        }
        if (!back_step(back, x))
            break;
        e--;
        /* back: the frames x ran in, also after it (a call's callee is
         * popped below, once x is passed) */
        if (x->kind == FL_BYTECODE && x->sym >= 0 && tb + 1 < expect &&
            sym_at(f, (uint64_t)x->sym)->run >= f->o.k)
            join_at(f, sp, x, e, r, tb);
        if (x->kind == FL_CALL && back->len)
            g_array_set_size(back, back->len - 1);
        if (x->kind == FL_BYTECODE && ++tb == sp->tail_want && sp->cut.score == UINT64_MAX &&
            e > f->hbase)
            seam_take(&sp->cut, expect - tb, e - 1, r, 0, back);
    }
    /* a tail shorter than half the hole: the fill's part makes up the
     * rest; without a fill, the longest tail is more than nothing */
    if (sp->cut.score == UINT64_MAX && tb >= SPLICE_MIN / 2 && e > f->hbase)
        seam_take(&sp->cut, expect - tb, e - 1, r, 0, back);
    else if (sp->alone && tb > sp->part_tb && e > f->hbase) {
        seam_take(&sp->part, 0, e - 1, r, 0, back);
        sp->part_tb = tb;
    }
}

/* The fill ends at seam sm: its first sm->fwd bytecodes, then the tail. */
static void end_at_seam(rv_filter *f, GArray *pieces, const target *t, const seam *sm,
                        uint64_t span)
{
    rv_keep_bytecodes(f, pieces, sm->fwd);
    uint64_t t0 = ev_at(f, sm->x)->tsc, t1 = ev_at(f, sm->r - 1)->tsc;
    uint64_t took = t1 > t0 ? t1 - t0 : 0;
    uint64_t len = sm->r - (sm->x + 1) - rv_lead_before(f, sm->x, sm->r, t);
    piece tail = { sm->x + 1, len, span > took ? span - took : 0, 0, NULL };
    tail.agreed = tail.len;
    tail.seam = g_array_new(FALSE, FALSE, sizeof(frame));
    g_array_append_vals(tail.seam, sm->stk->data, sm->stk->len);
    g_array_append_val(pieces, tail);
}

/* Replaces the part of the fill beyond about half of what the hole holds
 * (expect bytecodes) by the history that led to an earlier run of the next
 * segment's first symbols, so that the fill holds about expect bytecodes;
 * an empty fill becomes that history alone, as much of it as reads back.
 * The tail reads back across breaks of the history where nothing or only a
 * decode error's skip is missing (seg_crossable), as long as the frames it
 * runs in agree. 1 when done (the fill then ends at the rejoin point). */
int rv_splice_tail(rv_filter *f, GArray *pieces, const target *t, uint64_t expect,
                   uint64_t span)
{
    const int alone = !pieces->len;
    if (expect < (alone ? f->o.k : SPLICE_MIN) || t->nwant < f->o.k || t->idx != &f->bc)
        return 0;
    /* the earlier runs of the rejoin symbols, newest first */
    uint64_t want[64];
    for (unsigned i = 0; i < f->o.k; i++)
        want[i] = t->want[f->o.k - 1 - i];
    rv_si_ready(&f->bc, f->o.k);
    gpointer hit =
        g_hash_table_lookup(f->bc.head, (gpointer)(uintptr_t)rv_kgram_of(want, f->o.k));
    if (!hit)
        return 0;
    uint64_t a = (uint64_t)(uintptr_t)hit;   /* absolute symbol + 1 */
    const uint64_t fwd = rv_bytecodes_in(f, pieces, pieces->len);
    splice sp = { .expect = expect, .mid = fwd < expect / 2 ? fwd : expect / 2,
                  .tol = expect / 8, .alone = alone };
    sp.tail_want = expect - sp.mid;
    find_joints(f, &sp, pieces);
    sp.joined = (seam){ .score = UINT64_MAX, .stk = g_array_new(FALSE, FALSE, sizeof(frame)) };
    sp.cut = (seam){ .score = UINT64_MAX, .stk = g_array_new(FALSE, FALSE, sizeof(frame)) };
    sp.part = (seam){ .score = UINT64_MAX, .stk = g_array_new(FALSE, FALSE, sizeof(frame)) };
    sp.back = g_array_new(FALSE, FALSE, sizeof(frame));
    for (unsigned tried = 0; a && tried < SPLICE_TAILS;) {
        uint64_t s = a - 1;
        a = sym_at(f, s)->prev;
        if (s + 1 < f->bc.sbase + f->o.k)
            break;
        uint64_t r = sym_at(f, s + 1 - f->o.k)->ev;   /* the run's first event */
        if (r < f->hbase || !rv_rejoins_at(f, r, t))
            continue;
        tried++;
        read_tail(f, &sp, t, r);
    }
    const seam *sm = sp.joined.score != UINT64_MAX ? &sp.joined
                     : sp.cut.score != UINT64_MAX  ? &sp.cut
                     : sp.part.score != UINT64_MAX ? &sp.part
                                                   : NULL;
    if (sm)
        end_at_seam(f, pieces, t, sm, span);
    g_array_free(sp.joined.stk, TRUE);
    g_array_free(sp.cut.stk, TRUE);
    g_array_free(sp.part.stk, TRUE);
    g_array_free(sp.back, TRUE);
    g_array_free(sp.joints, TRUE);
    g_hash_table_destroy(sp.first);
    return sm != NULL;
}
