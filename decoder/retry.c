/* Decoding a stretch again with the code recorded next (chunk.h).
 *
 * The agent records a code patch at its watcher's next scan (every 50 ms by
 * default), often long after HotSpot re-pointed a call site (a resolution, a
 * c2i adapter fixing its caller once the callee has compiled code, an
 * inline-cache transition) or refilled a stub. A direct call or jump needs no
 * trace, so a decoder with the old bytes follows the old path silently until
 * a packet contradicts it, and everything up to the next PSB would be lost.
 * HotSpot changes code only while the thread that runs it is out of the
 * traced code (in the VM: resolving, fixing a caller, at a safepoint), that
 * is after a TIP.PGD. So when decoding fails, the stretch from the last PSB
 * (or the one before) is decoded again, with the next recorded version of
 * code that the stretch ran after its last trace-off applied at that
 * trace-off (then at the one before, then from the PSB). A retry is kept if
 * it decodes past the next PSB, else the one that decodes furthest, if any
 * gets further than the first attempt; the patches it applied stay in the
 * image ahead of their record time until the chunk ends, like call-site
 * resolutions. */
#include "decoder/chunk.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#define RETRY_GROUPS 6        /* attempts per error (next_versions) */
#define MADE_UP_TRIES 4       /* more attempts per error: made-up states (with_made_up_states) */
#define FIXUP_TRIES 2         /* attempts per error first: a call's c2i fixup (with_fixup_states) */
#define CAND_MAX 64           /* patches looked at per candidate search (next_versions) */

/* The stretch a retry decodes again: ops [from, to) of chunk k, which run ps
 * decoded after its checkpoint ck. */
typedef struct stretch {
    wctx *w;
    chunk *k;
    const pass *ps;
    const ckpt *ck;
    guint from, to;
} stretch;

/* Patches a retry might apply, in the order found. */
typedef struct candidates {
    uint32_t idx[CAND_MAX];
    size_t n;
} candidates;

/* Whether a retry of ps from checkpoint ck starts with patch idx: it was in
 * the image at the checkpoint (in it now and not applied early since), or
 * a retry kept from the same checkpoint applied it (ps->stages). A call site
 * the stretch resolved at its resolver after the checkpoint is not: when
 * the recorded code sends a thread into a resolver it had already gone
 * through in an earlier chunk (a chunk starts from the code as recorded at
 * its start, so the resolution is not there yet), the trace contradicts the
 * resolver's call into the VM, and the retry applies the site's patch from
 * its start. */
static bool retry_starts_with(const pass *ps, const ckpt *ck, uint32_t idx)
{
    if (ps->nstages && ps->stages_psb == ck->psb)
        for (int si = 0; si < ps->nstages; si++)
            for (size_t i = 0; i < ps->stages[si].n; i++)
                if (ps->stages[si].idx[i] == idx)
                    return true;
    if (!di_image_has_patch(ps->im, idx))
        return false;
    size_t nlog;
    const uint32_t *log = di_image_early_log(ps->im, &nlog);
    for (size_t i = ck->nearly; i < nlog; i++)
        if (log[i] == idx)
            return false;
    return true;
}

/* Candidates for next_versions: the patches recorded first after each block
 * of stretch s was decoded, over that block's bytes, that a retry of it would
 * not start with (retry_starts_with), appended to c (only the blocks at the
 * entry of a compiled method where `entries`). */
static void version_candidates(const stretch *s, bool entries, candidates *c)
{
    const wctx *w = s->w;
    const op *ops = (const op *)(void *)s->k->ops->data;
    for (guint i = s->from; i < s->to && c->n < CAND_MAX; i++) {
        const op *o = &ops[i];
        if (o->type != OP_BLOCK)
            continue;
        if (entries) {
            const dm_code *at = dm_code_at(w->m, o->ip, o->tsc);
            if (!at || at->kind != DM_CODE_NMETHOD || o->ip - at->vaddr >= DM_ENTRY_SPAN)
                continue;
        }
        uint32_t got[4];
        size_t n = di_cache_patches_in(w->cache, o->ip, o->end_ip + MAX_INSN_LEN, o->tsc, got, 4);
        for (size_t j = 0; j < n && c->n < CAND_MAX; j++) {
            if (retry_starts_with(s->ps, s->ck, got[j]))
                continue;
            bool dup = false;
            for (size_t q = 0; q < c->n && !dup; q++)
                dup = c->idx[q] == got[j];
            if (!dup)
                c->idx[c->n++] = got[j];
        }
    }
}

/* Adds to sp the patches over [lo, hi) (of code version owner, unless
 * INT64_MIN) recorded within span ticks of time t. A watcher scan's records
 * follow each other closely (DM_SCAN_SPREAD), scans are tens of milliseconds
 * apart. */
#define CALLEE_STUB_SPAN 16        /* mov rax, imm64; jmp rel32: an inline-cache stub */
static void same_scan(wctx *w, spec *sp, uint64_t t, uint64_t span, uint64_t lo, uint64_t hi,
                      int64_t owner)
{
    const dm_model *m = w->m;
    uint32_t more[SPEC_MAX];
    uint64_t after = t > span ? t - span - 1 : 0;
    size_t nm = di_cache_patches_in(w->cache, lo, hi, after, more, SPEC_MAX);
    for (size_t r = 0; r < nm && sp->n < SPEC_MAX; r++) {
        const dm_patch *p = &m->patches[more[r]];
        if (p->start_tsc > t + span || (owner != INT64_MIN && p->owner != owner))
            continue;
        bool dup = false;
        for (size_t z = 0; z < sp->n && !dup; z++)
            dup = sp->idx[z] == more[r];
        if (!dup)
            sp->idx[sp->n++] = more[r];
    }
}

/* Whether patch p re-points a call at a compiled method whose load record
 * comes more than DM_LOAD_LAG after now. The agent hears of a method's code
 * when HotSpot posts its load, which on JDK 17 may be tens of millions of
 * ticks after the code first ran (38M on a luindex recording). A retry that
 * points the call at code loaded much later sends it into whatever the
 * address held before. On luindex JDK 25 the re-pointing of a C1
 * `BlockTreeTermsWriter$TermsWriter.pushTerm` site to C1
 * `BytesRefBuilder.append`, dated back to the site's resolution to its
 * static call stub, went into a retry with it 104M ticks before that code's
 * load (the attempt got one byte further), and the decoder lost the thread
 * at each call of the site until then. */
static bool callee_loaded_long_after(const dm_model *m, const dm_patch *p, uint64_t now)
{
    if (!p->call_to)
        return false;
    const dm_code *callee = dm_code_at(m, p->call_to, p->tsc);
    return callee && callee->kind == DM_CODE_NMETHOD && callee->load_tsc > now + DM_LOAD_LAG;
}

/* Drops from sp the patches dated back to the load of a version that
 * replaced the code they change (dm_patch.after_new_version) where that
 * load is more than a scan after now: they are not true before it, and
 * applied now they would hide the states before them. On luindex JDK 25 a
 * site resolved to C1 code called it 4,907 times in the 46M ticks before
 * the C2 version's load; the first scan after that load saw the
 * resolution, the C1 code made not entrant and the site re-pointed to the
 * C2 code, the last two dated back to the load, and retries that took all
 * three together sent the calls through the wrong-method stub or into the
 * C2 code (716,023 instructions lost). They still apply by their time. */
static void drop_not_yet_caused(const dm_model *m, spec *sp, uint64_t now)
{
    size_t kept = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const dm_patch *p = &m->patches[sp->idx[i]];
        if ((!p->after_new_version || p->start_tsc <= now + DM_SCAN_SPREAD) &&
            !callee_loaded_long_after(m, p, now))
            sp->idx[kept++] = sp->idx[i];
    }
    sp->n = kept;
}

/* Whether the stub at `to` was last changed before now by a record older
 * than the last change of p's call before p: its bytes now are a fill for
 * another site, from before this site was last re-pointed. */
static bool stub_older_than_call(const dm_model *m, uint64_t to, uint64_t now, const dm_patch *p)
{
    uint64_t stub_last = 0, call_last = 0;
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *q = &m->patches[i];
        if (q->made_up)
            continue;
        if (q->start_tsc <= now && q->vaddr < to + CALLEE_STUB_SPAN && to < q->vaddr + q->size &&
            q->tsc > stub_last)
            stub_last = q->tsc;
        if (q->tsc < p->tsc && q->vaddr < p->call_at + 5 && p->call_at + 1 < q->vaddr + q->size &&
            q->tsc > call_last)
            call_last = q->tsc;
    }
    return call_last && stub_last < call_last;
}

/* Up to want groups of cand into g[0..), by record time (a watcher
 * scan), earliest first, skipping the times of g[0..ng) already made;
 * each group also gets the other patches of its code versions with the
 * same record time (a call re-pointed at a stub of its own method comes
 * with the stub's fill) and the same scan's patches of the stub a call it
 * re-points now reaches (an inline-cache transition stub filled for it;
 * now: the time the retry starts from), less the patches not true yet at
 * now (drop_not_yet_caused). The number of groups in g afterwards. */
static int version_groups(wctx *w, const candidates *cand, spec *g, int ng, int want, uint64_t now)
{
    const dm_model *m = w->m;
    uint64_t last = 0;
    for (int made = 0; made < want;) {
        uint64_t t = UINT64_MAX;
        for (size_t q = 0; q < cand->n; q++) {
            uint64_t st = m->patches[cand->idx[q]].start_tsc;
            bool used = false;
            for (int gi = 0; gi < ng && !used; gi++)
                used = g[gi].n && m->patches[g[gi].idx[0]].start_tsc == st;
            if (!used && st > last && st < t)
                t = st;
        }
        if (t == UINT64_MAX)
            break;
        last = t;
        spec *sp = &g[ng++];
        made++;
        memset(sp, 0, sizeof *sp);
        for (size_t q = 0; q < cand->n && sp->n < SPEC_MAX; q++)
            if (m->patches[cand->idx[q]].start_tsc == t)
                sp->idx[sp->n++] = cand->idx[q];
        size_t base = sp->n;
        for (size_t q = 0; q < base; q++) {
            const dm_patch *p = &m->patches[sp->idx[q]];
            /* Of its own code version, the patches of the same record time
             * only: taking the whole scan's made more blocks misplaced on
             * luindex (another site's state of that scan, not yet true). */
            if (p->owner >= 0) {
                const dm_code *c = &m->codes[p->owner];
                same_scan(w, sp, t, 0, c->vaddr, c->vaddr + c->size, p->owner);
            }
            /* The stub's fill is taken only if it is the stub's first
             * change after now: a transition stub is refilled for other
             * sites all the time, and a later fill applied now would stay
             * in the image until its record time. Another compiled
             * method's entry is no stub: a patch there in the same scan
             * is its not-entrant mark, which may come after the call
             * (luindex JDK 25: a C1 callee marked 26M ticks early, 84,762
             * instructions in 193 runs). A re-pointing's stub whose first
             * fill after now was recorded by a later scan is taken with
             * that fill where the stub's bytes now are older than the
             * call's last state: a fill for another site, and HotSpot
             * fills a stub for the site it then points there (luindex JDK
             * 17: a `Lucene41PostingsWriter.finishTerm` site through a stub
             * whose fill came 27M ticks after the site's record; taking
             * the later fill without that condition cost more than it
             * gained: README.md, "A stub's fill from a later scan"). */
            uint64_t to = p->site ? p->new_target : p->call_to;
            const dm_code *callee = to ? dm_code_at(m, to, now) : NULL;
            uint32_t first;
            if (!to || (callee && callee->kind == DM_CODE_NMETHOD &&
                        (int64_t)callee->index != p->owner) ||
                !di_cache_patches_in(w->cache, to, to + CALLEE_STUB_SPAN, now, &first, 1))
                continue;
            if (m->patches[first].start_tsc + DM_SCAN_SPREAD >= t &&
                m->patches[first].start_tsc <= t + DM_SCAN_SPREAD)
                same_scan(w, sp, t, DM_SCAN_SPREAD, to, to + CALLEE_STUB_SPAN, INT64_MIN);
            else if (m->patches[first].start_tsc > t && p->call_to &&
                     stub_older_than_call(m, to, now, p))
                same_scan(w, sp, m->patches[first].start_tsc, 0, to, to + CALLEE_STUB_SPAN,
                          INT64_MIN);
        }
        drop_not_yet_caused(m, sp, now);
        if (!sp->n) {
            ng--;
            made--;
        }
    }
    return ng;
}

/* The end of the last block among k's ops [from, to), 0 if none. */
static uint64_t last_block_end(const chunk *k, guint from, guint to)
{
    const op *ops = (const op *)(void *)k->ops->data;
    for (guint i = to; i-- > from;)
        if (ops[i].type == OP_BLOCK)
            return ops[i].end_ip;
    return 0;
}

/* Where the stretch ops[from, to) ended in a direct call or jump into no
 * code (ps failed there: -pte_nomap), the first patch over its target
 * after now, into cand. The image leaves zeros out (di_cache_new), and
 * HotSpot fills an inline-cache transition stub into the emptied
 * InlineCacheBuffer: a site re-pointed at the stub before the watcher's
 * scan saw the fill calls into nothing, and no code the stretch ran has a
 * later version to try (on a luindex JDK 17 recording 5,095 more
 * instructions in place). */
static void nomap_target_fill(const stretch *s, candidates *c)
{
    const pass *ps = s->ps;
    if (ps->status != -pte_nomap || c->n >= CAND_MAX)
        return;
    uint64_t end = last_block_end(s->k, s->from, s->to), target;
    uint8_t buf[MAX_INSN_LEN];
    size_t n = 0;           /* the image's sections may split the instruction */
    for (int got; end && n < sizeof buf; n += (size_t)got)
        if ((got = di_image_read(ps->im, buf + n, sizeof buf - n, end + n)) <= 0)
            break;
    uint32_t first;
    if (n && x86_direct_target(buf, n, end, &target) &&
        di_cache_patches_in(s->w->cache, target, target + CALLEE_STUB_SPAN, s->ck->tsc, &first,
                            1) &&
        !retry_starts_with(ps, s->ck, first))
        c->idx[c->n++] = first;
}

/* The next versions of the code the stretch ops[from, to) ran (see
 * version_candidates), as groups of patches to try (version_groups): the
 * two earliest scans over the whole stretch; the two earliest over its last
 * NEAR_BLOCKS blocks (the code the trace contradicted); the two earliest
 * over the blocks it ran at the entry of a compiled method (HotSpot makes a
 * method not entrant by patching a jump to its wrong-method stub over the
 * entry).
 * Where the stretch is long, other code's later versions take the first
 * two. */
#define NEAR_BLOCKS 8
static int next_versions(const stretch *s, spec g[RETRY_GROUPS])
{
    const uint64_t now = s->ck->tsc;
    candidates cand = { .n = 0 };
    version_candidates(s, false, &cand);
    int ng = version_groups(s->w, &cand, g, 0, 2, now);
    const op *ops = (const op *)(void *)s->k->ops->data;
    stretch near = *s;
    guint nb = 0;
    near.from = s->to;
    while (near.from > s->from && nb < NEAR_BLOCKS)
        nb += ops[--near.from].type == OP_BLOCK;
    cand.n = 0;
    version_candidates(&near, false, &cand);
    nomap_target_fill(&near, &cand);
    ng = version_groups(s->w, &cand, g, ng, 2, now);
    cand.n = 0;
    version_candidates(s, true, &cand);
    return version_groups(s->w, &cand, g, ng, RETRY_GROUPS - ng, now);
}

/* Whether a block of ops[from, to) ends at the call at `call`. */
static bool calls_at(const chunk *k, guint from, guint to, uint64_t call)
{
    const op *ops = (const op *)(void *)k->ops->data;
    for (guint i = from; i < to; i++)
        if (ops[i].type == OP_BLOCK && ops[i].end_ip == call)
            return true;
    return false;
}

/* Gives every patch of g but its q-th, where one of its made-up states
 * calls the same compiled entry as the q-th (a direct state), that state.
 * Whether any did. */
static bool same_entry_states(const dm_model *m, spec *g, size_t q)
{
    const uint64_t entry = m->patches[g->idx[q]].new_target;
    bool any = false;
    for (size_t r = 0; r < g->n; r++) {
        const dm_patch *p = &m->patches[g->idx[r]];
        for (uint32_t s = p->first_state; r != q && s < p->first_state + p->nstates; s++)
            if (m->patches[s].direct && m->patches[s].new_target == entry) {
                g->idx[r] = s;
                any = true;
                break;
            }
    }
    return any;
}

/* Where a group holds a call-site resolution with made-up states
 * (model.h) whose call the stretch ops[from, to) ran, each of those states
 * is an alternative to it: the group with
 * the state in the resolution's place, and the fill of the static call stub
 * the state calls if that stub's first change after now comes with the
 * resolution's scan; and for a state that calls compiled code, the group
 * with every other site that has a state calling the same entry in that
 * state too. A chunk starts from the code as recorded at its start,
 * so a site its thread resolved in an earlier chunk calls the resolver
 * again, and the trace contradicts that; the resolver is not passed again,
 * so only a retry can give the site the state the resolver gave it
 * (di_image_resolve_to). The alternatives go before the group, the earlier
 * states first, and all of them form a family (retry keeps the one that
 * decodes furthest). Up to max groups in g afterwards. */
static int with_made_up_states(const stretch *s, spec *g, int ng, int max)
{
    wctx *w = s->w;
    const dm_model *m = w->m;
    const uint64_t now = s->ck->tsc;
    for (int gi = 0; gi < ng && ng < max; gi++) {
        int made = 0, family = gi + 1;
        const spec base = g[gi];
        for (size_t q = 0; q < base.n && ng < max; q++) {
            const dm_patch *p = &m->patches[base.idx[q]];
            if (p->nstates && !calls_at(s->k, s->from, s->to, p->site ? p->site : p->call_at))
                continue;
            for (uint32_t state = p->first_state;
                 state < p->first_state + p->nstates && ng < max; state++) {
                spec alt = base;
                alt.idx[q] = state;
                uint64_t stub = m->patches[state].new_target;
                uint32_t first;
                if (!m->patches[state].direct &&
                    di_cache_patches_in(w->cache, stub, stub + CALLEE_STUB_SPAN, now, &first, 1) &&
                    m->patches[first].start_tsc <= p->tsc + DM_SCAN_SPREAD)
                    same_scan(w, &alt, m->patches[first].start_tsc, 0, stub,
                              stub + CALLEE_STUB_SPAN, INT64_MIN);
                alt.family = family;
                memmove(&g[gi + made + 1], &g[gi + made], (size_t)(ng - gi - made) * sizeof *g);
                g[gi + made++] = alt;
                ng++;
                /* and with the group's other sites at the same version's
                 * entry, where a state of theirs calls it: two calls of
                 * one method in one caller, both resolved to its C1
                 * version before a scan saw them at its C2 one. A retry
                 * starts from the last checkpoint, before both calls, so
                 * one site's state alone runs into the other's stale call
                 * again. */
                if (m->patches[state].direct && same_entry_states(m, &alt, q) && ng < max) {
                    memmove(&g[gi + made + 1], &g[gi + made],
                            (size_t)(ng - gi - made) * sizeof *g);
                    g[gi + made++] = alt;
                    ng++;
                }
            }
        }
        if (made)
            g[gi + made].family = family;
        gi += made;
    }
    return ng;
}

#define FIXUP_LOOKBACK 16        /* blocks: from a call to where its wrong callee fails */

/* A call that made a c2i fixup (model.h, fixup_states): among the last
 * FIXUP_LOOKBACK blocks of the stretch ops[from, to), a call whose site the
 * image has re-pointed from its static stub by a record moved back to the
 * callee's load, before the record's time and not followed through the
 * adapter yet, may be the first after the install, which went through the
 * stub. Its states form a family from g[ng] (each applies at the stretch's
 * last trace-off, like the other groups): the fixup re-pointing the site,
 * then the fixup cleaning it. The new count (at most max) is returned. */
static int with_fixup_states(const stretch *s, spec *g, int ng, int max, uint64_t now)
{
    const wctx *w = s->w;
    const pass *ps = s->ps;
    const dm_model *m = w->m;
    const op *ops = (const op *)(void *)s->k->ops->data;
    guint seen = 0;
    for (guint i = s->to; i-- > s->from && seen < FIXUP_LOOKBACK && ng < max;) {
        if (ops[i].type != OP_BLOCK)
            continue;
        seen++;
        uint64_t call = ops[i].end_ip;
        uint32_t idx[8];
        size_t n = di_cache_patches_in(w->cache, call + 1, call + 5, 0, idx, 8);
        for (size_t j = 0; j < n; j++) {
            const dm_patch *p = &m->patches[idx[j]];
            if (!p->fixup_states || p->call_at != call || p->tsc <= now ||
                !di_image_has_patch(ps->im, idx[j]) || di_image_applied_early(ps->im, idx[j]))
                continue;
            const uint32_t s1 = p->fixup_states - 1;
            const size_t ns = s1 + 1 < m->npatches && m->patches[s1 + 1].state_of == idx[j] &&
                                      m->patches[s1 + 1].then_state
                                  ? 2 : 1;
            int family = ng + 1;
            for (size_t q = 0; q < ns && ng < max; q++)
                g[ng++] = (spec){ .idx = { s1 + (uint32_t)q }, .n = 1,
                                  .family = family, .fixup = true };
            return ng;
        }
    }
    return ng;
}

/* How far a decoding run got: to its end (UINT64_MAX), or to its error. */
static uint64_t progress(const pass *ps)
{
    return ps->boundary || ps->status >= 0 || ps->status == -pte_eos ? UINT64_MAX : ps->err_off;
}

/* Whether attempt np got past a PSB after err_off, the error it retries:
 * it decoded the rest of that PSB's stretch, where a wrong state most often
 * fails at the next packet. */
static bool passed_psb(const pass *np, uint64_t err_off)
{
    return progress(np) == UINT64_MAX || (np->nck && np->ck[np->nck - 1].psb > err_off);
}

#define SITE_LOOKBACK 4          /* blocks: a resolver stub's, after its site's call */

/* The call of a resolved site (model.h) among the last SITE_LOOKBACK
 * blocks of k's ops [from, to), 0 if none. */
static uint64_t last_site_call(const wctx *w, const chunk *k, guint from, guint to)
{
    const op *ops = (const op *)(void *)k->ops->data;
    int blocks = 0;
    for (guint i = to; i-- > from && blocks < SITE_LOOKBACK;)
        if (ops[i].type == OP_BLOCK) {
            if (di_cache_call_site(w->cache, ops[i].end_ip))
                return ops[i].end_ip;
            blocks++;
        }
    return 0;
}

/* Whether an attempt whose error is at `got`, just after the call of
 * resolved site `at` (0: none), moved the error at err_off, just after the
 * call of site `was`, on to another site's call (with_next_site). Sites
 * their thread resolved in an earlier chunk take the resolver again; two of
 * them with no packet between (the first one's callee running straight-line
 * code into the second) fail at one offset, so a group that fixes either
 * alone gets no further. */
static bool moved_on(uint64_t got, uint64_t at, uint64_t err_off, uint64_t was)
{
    return got == err_off && was && at && at != was;
}

/* What every attempt of one retry starts from. Run ps failed; an attempt
 * decodes again from checkpoint ck (a copy: a kept attempt replaces ps's)
 * with the patches applied early in ps's image when the retry began, and
 * applies its own once the ndis trace-offs after ck have been decoded.
 * k's ops and blocks had nops and nblocks before the attempts. */
typedef struct retry_base {
    wctx *w;
    chunk *k;
    pass *ps;
    ckpt ck;
    uint64_t stop;
    const struct pt_config *cfg;
    di_store *store;
    const uint32_t *early;
    guint ndis;
    int *budget;               /* attempts left in the chunk */
    guint nops, nblocks;
} retry_base;

/* One attempt of retry b: decodes from b's checkpoint again with the
 * patches of the retries kept from it, then sp's, into np (its ops after
 * k's). false if no decoder could be made (np is freed). Each attempt takes
 * one of the budget's. */
static bool attempt(const retry_base *b, spec *sp, pass *np)
{
    wctx *w = b->w;
    chunk *k = b->k;
    const pass *ps = b->ps;
    const ckpt *ck = &b->ck;
    char err[512];
    (*b->budget)--;
    w->retries++;
    sp->after = b->ndis;
    *np = (pass){ .dis = g_array_new(FALSE, FALSE, sizeof(guint)), .base = ps->base,
                  .base_end = ps->base_end, .shift = ps->shift };
    k->st = ck->st;
    w->tsc = ck->tsc;
    w->res = ck->res;
    np->dec = pt_blk_alloc_decoder(b->cfg);
    np->im = np->dec ? di_image_new_in(w->cache, b->store, ck->tsc, b->early, ck->nearly, err,
                                       sizeof err)
                     : NULL;
    if (!np->im || (np->status = pt_blk_sync_set(np->dec, ck->psb)) < 0) {
        dc_pass_free(np);
        return false;
    }
    pt_blk_set_image(np->dec, di_image_get(np->im));
    op *so = push_op(k, OP_SYNC, w->tsc);
    so->ip = k->seg->begin + ck->sync_off;
    dc_checkpoint(w, k, np, ck->psb);
    if (ps->stages_psb == ck->psb && ps->nstages) {
        np->nstages = ps->nstages < RETRY_STAGES ? ps->nstages : RETRY_STAGES - 1;
        memcpy(np->stages, ps->stages, (size_t)np->nstages * sizeof *np->stages);
    }
    np->stages[np->nstages++] = *sp;
    np->stages_psb = ck->psb;
    for (int si = 0; si < np->nstages; si++)
        np->stages[si].done = false;
    dc_decode_run(w, k, np, b->stop);
    return true;
}

/* Drops attempt np: k's ops and blocks back to their lengths before (the
 * runs stay: rcache_ent). */
static void drop_attempt(const retry_base *b, pass *np)
{
    g_array_set_size(b->k->ops, b->nops);
    if (b->k->blocks)
        g_array_set_size(b->k->blocks, b->nblocks);
    dc_pass_free(np);
}

/* Attempt np replaces run ps: its ops replace the old ones after checkpoint
 * ck; its checkpoints and trace-off positions move down with them. */
static void keep_attempt(const retry_base *b, pass *np)
{
    chunk *k = b->k;
    pass *ps = b->ps;
    const ckpt *ck = &b->ck;
    const guint orig_ops = b->nops, orig_blocks = b->nblocks;
    guint shift = orig_ops - ck->nops;
    guint bshift = k->blocks ? orig_blocks - ck->nblocks : 0;
    g_array_remove_range(k->ops, ck->nops, shift);
    if (k->blocks)
        g_array_remove_range(k->blocks, ck->nblocks, bshift);
    for (int q = 0; q < np->nck; q++)
        if (np->ck[q].nops >= orig_ops) {
            np->ck[q].nops -= shift;
            np->ck[q].nblocks -= bshift;
        }
    for (guint q = 0; q < np->dis->len; q++)
        g_array_index(np->dis, guint, q) -= shift;
    dc_pass_free(ps);
    *ps = *np;
}

#define NEXT_SITE_GROUPS 4       /* attempts of with_next_site */

/* Group sp moved ps's error on to the call of another resolved site
 * (moved_on): sp is tried together with each group of candidates for that
 * error (next_versions on sp's attempt), and the first union that gets
 * further than `beat` (ps's error, or further) is kept. Keeping sp alone
 * instead, for the next retry to fix the second site, lost more than it
 * won: a group that sends the thread into code that never ran can also end
 * at some site's call (one xalan JDK 17 recording had 139K instructions
 * more not in place, where another had 43K fewer). On that other one,
 * `verifyLocation` calling `getLocationIndex`, which calls on at once: 40K
 * instructions in 45 runs. */
static bool with_next_site(const retry_base *b, spec *sp, uint64_t beat)
{
    pass np;
    if (*b->budget <= 0 || !attempt(b, sp, &np))
        return false;
    guint from = b->nops;
    for (guint q = np.dis->len; q-- > 0;)
        if (g_array_index(np.dis, guint, q) >= b->nops) {
            from = g_array_index(np.dis, guint, q);
            break;
        }
    spec next[RETRY_GROUPS];
    const stretch after = { b->w, b->k, &np, &b->ck, from, b->k->ops->len };
    int nn = next_versions(&after, next);
    drop_attempt(b, &np);
    for (int j = 0; j < nn && j < NEXT_SITE_GROUPS && *b->budget > 0; j++) {
        spec both = *sp;
        both.family = 0;
        for (size_t q = 0; q < next[j].n && both.n < SPEC_MAX; q++) {
            size_t r = 0;
            while (r < both.n && both.idx[r] != next[j].idx[q])
                r++;
            if (r == both.n)
                both.idx[both.n++] = next[j].idx[q];
        }
        if (!attempt(b, &both, &np))
            continue;
        if (progress(&np) > beat) {
            keep_attempt(b, &np);
            return true;
        }
        drop_attempt(b, &np);
    }
    return false;
}

/* Keeps group sp of retry b, decoded again: where no group got past a PSB
 * after the error (passed_psb, kept at once), the one that got furthest.
 * The first to get further at all is often a wrong state failing a packet
 * later (a c2i fixup's stub path one byte on, where the next group, the
 * callee's own resolved site, decodes on: 76 decode errors in one Branchy
 * run on JDK 25). The attempt is made even with the budget spent: the
 * group has earned it. */
static bool keep_furthest(const retry_base *b, spec *sp)
{
    pass np;
    if (!attempt(b, sp, &np))
        return false;
    if (progress(&np) <= b->ps->err_off) {
        drop_attempt(b, &np);
        return false;
    }
    keep_attempt(b, &np);
    b->w->fixup_calls += sp->fixup;
    return true;
}

/* Tries to decode the stretch before ps's error again with later code
 * (above). On success ps is the better run (its ops replace the old ones)
 * and true is returned; else everything is as it was. */
static bool retry(wctx *w, chunk *k, pass *ps, uint64_t stop, const struct pt_config *cfg,
                  di_store *store, int *budget)
{
    const guint orig_ops = k->ops->len;
    const guint orig_blocks = k->blocks ? k->blocks->len : 0;
    const dc_stats orig_st = k->st;
    const uint64_t orig_tsc = w->tsc;
    const resolution orig_res = w->res;
    size_t nlog;
    const uint32_t *log = di_image_early_log(ps->im, &nlog);
    uint32_t *early = g_memdup2(log, (nlog ? nlog : 1) * sizeof *log);
    bool kept = false;
    /* From the last checkpoint, with the patches applied after the last
     * trace-off (from the PSB if there was none): an earlier checkpoint or
     * trace-off rarely helps (measured on JIT-heavy workloads), and each
     * attempt costs a code image. */
    const ckpt *last = &ps->ck[ps->nck - 1];
    const retry_base b = { .w = w, .k = k, .ps = ps, .ck = *last, .stop = stop, .cfg = cfg,
                           .store = store, .early = early, .ndis = ps->dis->len - last->ndis,
                           .budget = budget, .nops = orig_ops, .nblocks = orig_blocks };
    guint from = b.ndis ? g_array_index(ps->dis, guint, ps->dis->len - 1) : b.ck.nops;
    const stretch before = { w, k, ps, &b.ck, from, orig_ops };
    spec g[FIXUP_TRIES + RETRY_GROUPS + MADE_UP_TRIES];
    int ng = with_fixup_states(&before, g, 0, FIXUP_TRIES, w->tsc);
    ng += next_versions(&before, g + ng);
    ng = with_made_up_states(&before, g, ng, FIXUP_TRIES + RETRY_GROUPS + MADE_UP_TRIES);
    /* the same error after the same code, with the same candidates, failed
     * before in this chunk: it would again */
    uint64_t key = 0;
    const uint64_t last_end = last_block_end(k, from, orig_ops);
    const uint64_t site_call = last_site_call(w, k, from, orig_ops);
    if (ng) {
        key = last_end * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)ps->status;
        for (int gi = 0; gi < ng; gi++)
            for (size_t q = 0; q < g[gi].n; q++)
                key = (key ^ g[gi].idx[q]) * 0x100000001B3ull;
        if (!key)
            key = 1;
        if (w->failed && g_hash_table_contains(w->failed, &key))
            ng = 0;
    }
    /* the first group whose best attempt moved the error on to another
     * site's call (moved_on), for with_next_site if no group gets further;
     * and the group that got furthest (keep_furthest) */
    int moved = -1, furthest = -1;
    uint64_t furthest_got = ps->err_off;
    for (int gi = 0; gi < ng && !kept && *budget > 0; gi++) {
        int pick = gi;
        pass np;
        bool decoded = false;
        if (g[gi].family) {
            /* a family: each member is tried, and the one that gets
             * furthest stands for it (of equals the last: the record,
             * where the trace does not tell them apart); the first that
             * decodes to its end is kept as it is */
            int end = gi;
            while (end < ng && g[end].family == g[gi].family)
                end++;
            uint64_t best = 0;
            bool best_moved = false, best_passed = false;
            int first_moved = -1;
            pick = -1;
            for (int fi = gi; fi < end && *budget > 0 && !decoded; fi++) {
                if (!attempt(&b, &g[fi], &np))
                    continue;
                uint64_t got = progress(&np);
                if (got == UINT64_MAX) {
                    decoded = true;
                    pick = fi;
                    break;
                }
                bool mv = moved_on(got, last_site_call(w, k, orig_ops, k->ops->len),
                                   ps->err_off, site_call);
                const bool passed = passed_psb(&np, ps->err_off);
                drop_attempt(&b, &np);
                if (mv && first_moved < 0)
                    first_moved = fi;
                /* of equals the last (the record, where the trace does not
                 * tell them apart), but a fixup's first (it re-points the
                 * site; cleaning it needs a call through the resolver) */
                if (pick < 0 || got > best || (got == best && !g[fi].fixup)) {
                    best = got;
                    best_moved = mv;
                    best_passed = passed;
                    pick = fi;
                }
            }
            gi = end - 1;
            if (!decoded && best_moved && moved < 0)
                moved = pick;
            /* A member that ran on into another resolved site's call is
             * judged with that site fixed too: the others may get a few
             * bytes further by going wrong elsewhere (a made-up stub state
             * into its adapter, where the record's compiled callee met its
             * own stale site at once). */
            if (!decoded && first_moved >= 0 && !best_moved &&
                with_next_site(&b, &g[first_moved], best)) {
                kept = true;
                break;
            }
            if (!decoded && !best_passed) {
                if (pick >= 0 && best > furthest_got) {
                    furthest_got = best;
                    furthest = pick;
                }
                continue;
            }
        }
        if (!decoded && !attempt(&b, &g[pick], &np))
            continue;
        const uint64_t got = progress(&np);
        if (got > ps->err_off && passed_psb(&np, ps->err_off)) {
            keep_attempt(&b, &np);
            kept = true;
            w->fixup_calls += g[pick].fixup;
            continue;
        }
        if (got > furthest_got) {
            furthest_got = got;
            furthest = pick;
        } else if (moved < 0 && moved_on(got, last_site_call(w, k, orig_ops, k->ops->len),
                                         ps->err_off, site_call)) {
            moved = pick;
        }
        drop_attempt(&b, &np);
    }
    if (!kept && furthest >= 0)
        kept = keep_furthest(&b, &g[furthest]);
    if (!kept && moved >= 0)
        kept = with_next_site(&b, &g[moved], ps->err_off);
    if (ng && !kept) {
        if (!w->failed)
            w->failed = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
        g_hash_table_add(w->failed, g_memdup2(&key, sizeof key));
    }
    g_free(early);
    if (!kept) {
        k->st = orig_st;
        w->tsc = orig_tsc;
        w->res = orig_res;
    }
    if (kept)
        w->retries_kept++;
    return kept;
}

/* Decodes the stretch before ps's error again (retry) for as long as that
 * gets further. A kept retry replaces ps's image. */
void dc_retry_while_it_helps(wctx *w, chunk *k, pass *ps, uint64_t stop,
                             const struct pt_config *cfg, di_store *store, int *budget)
{
    while (ps->status < 0 && ps->status != -pte_eos && !ps->boundary && ps->err_off < stop &&
           !atomic_load_explicit(w->cancel, memory_order_relaxed) &&
           retry(w, k, ps, stop, cfg, store, budget))
        ;
}
