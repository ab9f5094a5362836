/* Made-up call-site states (model.h, "Patches"): the states a site may have
 * had between two of the agent's scans, which the decoder tries where the
 * trace contradicts the recorded one. */
#include "decoder/callsites.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <capstone/capstone.h>
#include <glib.h>

#include "common/jmrec.h"
#include "decoder/classfile.h"
#include "decoder/model.h"

/* ---- call sites through their static call stub (model.h) ------------------- */

#define STUB_LEN 15              /* mov rbx, imm64; jmp rel32 */
#define MAX_STUB_EXITS 16        /* made-up states of one resolution (one per stub exit,
                                    older version or named callee's version) */

typedef struct stub_fill {
    int64_t owner;
    uint64_t at, to, tsc;        /* the stub, where its jump goes, the fill's record time */
} stub_fill;

static int cmp_stub_fill(const void *a, const void *b)
{
    const stub_fill *x = a, *y = b;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

/* Whether patch p lies within its owner, small enough to be searched. */
static bool searchable(const dm_model *m, const dm_patch *p)
{
    const dm_code *c = p->owner >= 0 ? &m->codes[p->owner] : NULL;
    return c && p->vaddr >= c->vaddr && p->vaddr + p->size <= c->vaddr + c->size &&
           p->size <= MAX_SITE_PATCH;
}

/* Whether the STUB_LEN bytes s, at address a, are a static call stub, and
 * where its jump goes (*to). */
static bool static_stub_at(const uint8_t *s, uint64_t a, uint64_t *to)
{
    if (s[0] != 0x48 || s[1] != 0xbb || s[10] != 0xe9)
        return false;
    int32_t rel;
    memcpy(&rel, s + 11, 4);
    *to = a + STUB_LEN + (uint64_t)(int64_t)rel;
    return true;
}

/* Appends to out the static call stubs patch i fills: `mov rbx, imm64; jmp
 * rel32` in its owner after it, overlapping it, whose jump it re-points out
 * of the owner (HotSpot emits the stub jumping to itself). */
static void find_stub_fills(const dm_model *m, const owner_order *o, const uint8_t *code, size_t i,
                            GArray *out)
{
    const dm_patch *p = &m->patches[i];
    const dm_code *c = &m->codes[p->owner];
    uint64_t cend = c->vaddr + c->size, pend = p->vaddr + p->size;
    uint64_t lo = p->vaddr - c->vaddr >= STUB_LEN ? p->vaddr - (STUB_LEN - 1) : c->vaddr;
    uint64_t hi = cend - pend >= STUB_LEN ? pend + (STUB_LEN - 1) : cend;
    uint64_t n = hi - lo;
    if (n < STUB_LEN)
        return;
    uint8_t *old = g_malloc(2 * n), *now = old + n;
    dm_bytes_before(m, o, code, i, lo, n, old);
    memcpy(now, old, n);
    memcpy(now + (p->vaddr - lo), code + p->code_offset, p->size);
    for (uint64_t a = lo; a + STUB_LEN <= hi; a++) {
        uint64_t to;
        if (a + STUB_LEN <= p->vaddr || a >= pend || !static_stub_at(now + (a - lo), a, &to) ||
            !memcmp(old + (a - lo) + 11, now + (a - lo) + 11, 4) ||
            (to >= c->vaddr && to < cend))
            continue;
        stub_fill f = { p->owner, a, to, p->tsc };
        g_array_append_val(out, f);
        a += STUB_LEN - 1;
    }
    g_free(old);
}

/* Appends to out the static call stubs code version c was recorded with
 * already filled (HotSpot resolved a call through one before the version's
 * load record was written). */
static void find_filled_stubs(const dm_model *m, const uint8_t *code, const dm_code *c, GArray *out)
{
    if (c->code_offset > m->code_size || m->code_size - c->code_offset < c->size)
        return;
    const uint8_t *b = code + c->code_offset;
    uint64_t cend = c->vaddr + c->size;
    for (uint64_t at = 0; at + STUB_LEN <= c->size; at++) {
        uint64_t a = c->vaddr + at, to;
        if (!static_stub_at(b + at, a, &to) || (to >= c->vaddr && to < cend))
            continue;
        stub_fill f = { c->index, a, to, 0 };
        g_array_append_val(out, f);
        at += STUB_LEN - 1;
    }
}

/* A state a resolved call site may have had that no record holds: the site
 * calls `call`, from where the thread goes on to `then` (a static call
 * stub and the place its jump goes; or, direct, an entry of compiled code,
 * both the same). */
typedef struct site_state {
    uint64_t call, then;
    bool direct;
} site_state;

static bool state_known(const site_state *out, size_t n, uint64_t then)
{
    for (size_t j = 0; j < n; j++)
        if (out[j].then == then)
            return true;
    return false;
}

/* Whether p resolves one static or opt-virtual call site (its bytes lie in
 * the call's rel32), and whether to code within the site's own method (its
 * static call stub). */
static bool resolves_stub_call(const dm_model *m, const dm_patch *p)
{
    return p->site && p->vaddr >= p->site + 1 && p->vaddr + p->size <= p->site + 5 &&
           searchable(m, p) && dm_is_stub_call_resolver_at(m, p->old_target, p->tsc);
}

/* The same for an inline-cache site: its resolver points it at the
 * callee's unverified entry (the receiver's class check) but jumps on to
 * the verified one, the check being done. Its record may hold the cached
 * value too (the 8-byte immediate of the `movabs rax` before the call). */
#define IC_VALUE_LEN 8
static bool resolves_virtual_call(const dm_model *m, const dm_patch *p)
{
    return p->site && p->vaddr + IC_VALUE_LEN >= p->site && p->vaddr + p->size <= p->site + 5 &&
           searchable(m, p) && dm_is_virtual_call_resolver_at(m, p->old_target, p->tsc);
}

static bool resolves_to_own_code(const dm_model *m, const dm_patch *p)
{
    const dm_code *c = &m->codes[p->owner];
    return p->new_target >= c->vaddr && p->new_target < c->vaddr + c->size;
}

/* Whether p resolves a site that may have gone through other states (made
 * up below) since its last record: a static or opt-virtual call whose
 * resolver patched it to code outside its own method. */
static bool may_have_states(const dm_model *m, const dm_patch *p)
{
    return resolves_stub_call(m, p) && !resolves_to_own_code(m, p);
}

/* The made-up states resolution p may have gone through: the fills of its
 * owner's static call stubs recorded up to p's watcher scan (a fill comes
 * before the site is pointed at its stub), one per place they go on to
 * other than p's own target, appended to out[*n..MAX_STUB_EXITS). */
static void stub_states(const dm_patch *p, const stub_fill *fills,
                        size_t nfills, site_state *out, size_t *n)
{
    size_t lo = 0, hi = nfills;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (fills[mid].owner < p->owner)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t f = lo; f < nfills && fills[f].owner == p->owner &&
                        fills[f].tsc <= p->tsc + DM_SCAN_SPREAD &&
                        *n < MAX_STUB_EXITS; f++)
        if (fills[f].to != p->new_target && !state_known(out, *n, fills[f].to))
            out[(*n)++] = (site_state){ fills[f].at, fills[f].to, false };
}

/* ---- call sites resolved to a version replaced before the next scan ------
 *
 * A static or opt-virtual resolver points the site at the callee's
 * verified entry and jumps there. When a newer version of the callee
 * replaced that one before the watcher's next scan, the
 * record shows the site calling the newer version only, and a decoder
 * that takes the record sends every call of the meantime into code that
 * never ran (luindex JDK 25: comparePivot's C1 code called setBytesRef's
 * C1 version for 64M ticks, and the record names the C2 one). So each
 * other version of the callee's method that was there before the record
 * gives a made-up state: the site calling that version's verified entry,
 * applied only where the thread's resolver went on to exactly that
 * address. The agent records no entry points: a version's verified entry
 * is at the offset the records show for its tier (C1, C2). */
#define TIER_C1 0
#define TIER_C2 1
#define ENTRY_GUESSES 2          /* verified-entry offsets tried per tier, most seen first */

typedef struct entry_offsets {
    uint64_t off[2][ENTRY_GUESSES];
    size_t n[2];
} entry_offsets;

/* A compiled version, in the array of them ordered by method. */
typedef struct method_version {
    uint64_t method_id;
    uint32_t code;               /* index in the model's codes */
} method_version;

static int cmp_method_version(const void *a, const void *b)
{
    const method_version *x = a, *y = b;
    if (x->method_id != y->method_id)
        return x->method_id < y->method_id ? -1 : 1;
    return x->code < y->code ? -1 : x->code > y->code;
}

/* The compiled versions, ordered by method (v is g_free'd by the caller). */
typedef struct method_versions {
    method_version *v;
    size_t n;
} method_versions;

static method_versions versions_by_method(const dm_model *m)
{
    method_versions vs = { g_new(method_version, m->ncodes ? m->ncodes : 1), 0 };
    for (size_t i = 0; i < m->ncodes; i++)
        if (m->codes[i].kind == DM_CODE_NMETHOD)
            vs.v[vs.n++] = (method_version){ m->codes[i].method_id, (uint32_t)i };
    sort_n(vs.v, vs.n, sizeof *vs.v, cmp_method_version);
    return vs;
}

static int tier_of(const dm_code *c)
{
    return c->level >= 1 && c->level <= 3 ? TIER_C1 : c->level == 4 ? TIER_C2 : -1;
}

/* The entries of compiled code c read from its code (0: not found): the
 * unverified one, the first instruction after the alignment nops, checks
 * the receiver's class and jumps to the inline-cache miss stub, outside c,
 * if it differs; the verified one is the first instruction after that
 * jump and its nops. A static method's code has no such check. */
static bool entries_in_code(csh cs, cs_insn *insn, const dm_model *m, const uint8_t *code,
                            const dm_code *c, uint64_t *unverified, uint64_t *verified)
{
    if (c->code_offset > m->code_size || m->code_size - c->code_offset < c->size)
        return false;
    const uint8_t *p = code + c->code_offset;
    size_t avail = c->size < DM_ENTRY_SPAN ? c->size : DM_ENTRY_SPAN;
    uint64_t addr = c->vaddr;
    *unverified = *verified = 0;
    bool miss = false;
    while (avail && cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
        const uint64_t at = insn->address;
        if (insn->id == X86_INS_NOP)
            continue;
        if (miss) {
            *verified = at;
            return true;
        }
        if (!*unverified)
            *unverified = at;
        const cs_x86 *x = &insn->detail->x86;
        if (cs_insn_group(cs, insn, CS_GRP_JUMP) && x->op_count == 1 &&
            x->operands[0].type == X86_OP_IMM) {
            const uint64_t to = (uint64_t)x->operands[0].imm;
            if (insn->id == X86_INS_JMP || (to >= c->vaddr && to < c->vaddr + c->size))
                return false;      /* not a class check */
            miss = true;
        }
    }
    return false;
}

typedef enum entry_kind { ENTRY_VERIFIED, ENTRY_UNVERIFIED } entry_kind;

/* The entry offsets of each tier, from the targets of the resolutions
 * `of` accepts: the verified entries (static and opt-virtual calls,
 * may_have_states), or the unverified ones (resolves_virtual_call); where
 * none shows a tier's, the `kind` entries its code has (entries_in_code). */
static entry_offsets entries_from(const dm_model *m, const uint8_t *code,
                                  bool (*of)(const dm_model *, const dm_patch *), entry_kind kind)
{
    uint32_t seen[2][DM_ENTRY_SPAN] = { { 0 } };
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (!of(m, p))
            continue;
        const dm_code *c = dm_code_at(m, p->new_target, p->tsc);
        int t = c && c->kind == DM_CODE_NMETHOD ? tier_of(c) : -1;
        if (t >= 0 && p->new_target - c->vaddr < DM_ENTRY_SPAN)
            seen[t][p->new_target - c->vaddr]++;
    }
    /* where no resolution shows a tier's entries, its code does */
    bool none[2];
    for (int t = 0; t < 2; t++) {
        none[t] = true;
        for (uint64_t o = 0; o < DM_ENTRY_SPAN && none[t]; o++)
            none[t] = !seen[t][o];
    }
    csh cs;
    if (code && (none[0] || none[1]) && cs_open(CS_ARCH_X86, CS_MODE_64, &cs) == CS_ERR_OK) {
        cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
        cs_insn *insn = cs_malloc(cs);
        for (size_t i = 0; i < m->ncodes; i++) {
            const dm_code *c = &m->codes[i];
            const int t = c->kind == DM_CODE_NMETHOD ? tier_of(c) : -1;
            uint64_t u, v;
            if (t >= 0 && none[t] && entries_in_code(cs, insn, m, code, c, &u, &v))
                seen[t][(kind == ENTRY_VERIFIED ? v : u) - c->vaddr]++;
        }
        cs_free(insn, 1);
        cs_close(&cs);
    }
    /* a tier no resolution went to takes the other's */
    for (int t = 0; t < 2; t++) {
        bool any = false;
        for (uint64_t o = 0; o < DM_ENTRY_SPAN && !any; o++)
            any = seen[t][o];
        for (uint64_t o = 0; o < DM_ENTRY_SPAN && !any; o++)
            seen[t][o] = seen[1 - t][o];
    }
    entry_offsets e = { 0 };
    for (int t = 0; t < 2; t++)
        while (e.n[t] < ENTRY_GUESSES) {
            uint64_t best = DM_ENTRY_SPAN;
            for (uint64_t o = 0; o < DM_ENTRY_SPAN; o++)
                if (seen[t][o] && (best == DM_ENTRY_SPAN || seen[t][o] > seen[t][best]))
                    best = o;
            if (best == DM_ENTRY_SPAN)
                break;
            e.off[t][e.n[t]++] = best;
            seen[t][best] = 0;
        }
    return e;
}

/* The made-up states of compiled version c for resolution p of a site in
 * code version owner, if c was there between owner's start and p's record:
 * the site calling c at its entry of offsets `call` (the j-th guess of c's
 * tier), its resolver going on to the one of offsets `then`; appended to
 * out[*n..MAX_STUB_EXITS). */
static void version_states(const dm_code *c, const dm_code *owner, const dm_patch *p,
                           const entry_offsets *call, const entry_offsets *then,
                           site_state *out, size_t *n)
{
    int t = tier_of(c);
    if (t < 0 || c->load_tsc > p->tsc || c->end_tsc <= owner->start_tsc)
        return;
    for (size_t j = 0; j < call->n[t] && j < then->n[t] && *n < MAX_STUB_EXITS; j++) {
        uint64_t entry = c->vaddr + call->off[t][j], goes = c->vaddr + then->off[t][j];
        if (entry < c->vaddr + c->size && goes < c->vaddr + c->size &&
            !state_known(out, *n, goes))
            out[(*n)++] = (site_state){ entry, goes, true };
    }
}

/* The made-up states resolution p may have gone through: the versions of
 * its callee's method other than `to` (the compiled code it calls) that
 * were there before p's record, after its owner's load, appended to
 * out[*n..MAX_STUB_EXITS). The site calls a version at its entry of
 * offsets `call` (the j-th guess), its resolver went on to the one of
 * offsets `then`: the same entry but for inline-cache sites. */
static void older_version_states(const dm_model *m, const dm_patch *p, const dm_code *to,
                                 const entry_offsets *call, const entry_offsets *then,
                                 const method_versions *vs, site_state *out, size_t *n)
{
    const method_version *v = vs->v;
    const size_t nv = vs->n;
    size_t lo = 0, hi = nv;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].method_id < to->method_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < nv && v[i].method_id == to->method_id; i++)
        if (&m->codes[v[i].code] != to)
            version_states(&m->codes[v[i].code], &m->codes[p->owner], p, call, then, out, n);
}

/* A patch that only re-points a call (its rel32, not from a resolver) away
 * from an entry of compiled code that was made not entrant before the
 * patch's watcher scan (not_entrant: per code version, the first record
 * that made it so, UINT64_MAX if none): that code. A site calling one
 * version of a method may then have called others before the scan (the
 * site re-resolved to a newer version, then gone megamorphic): they give
 * made-up states as for resolutions, tried only by retries (retry.c,
 * with_made_up_states). Other re-pointings (an inline cache going
 * megamorphic, a transition stub) got none: on JDK 17 they cost retries
 * and gained nothing. */
static const dm_code *repointed_from_version(const dm_model *m, const dm_patch *p,
                                             const uint64_t *not_entrant)
{
    if (!p->call_to || p->site || p->made_up || p->vaddr < p->call_at + 1 ||
        p->vaddr + p->size > p->call_at + 5)
        return NULL;
    const dm_code *c = dm_code_at(m, p->call_from, p->tsc);
    return c && c->kind == DM_CODE_NMETHOD && p->call_from - c->vaddr < DM_ENTRY_SPAN &&
                   not_entrant[c->index] <= p->tsc + DM_SCAN_SPREAD
               ? c
               : NULL;
}

/* Whether addr is at one of the entry offsets e of code c's tier. */
static bool at_entry(const entry_offsets *e, const dm_code *c, uint64_t addr)
{
    int t = tier_of(c);
    for (size_t j = 0; t >= 0 && j < e->n[t]; j++)
        if (addr == c->vaddr + e->off[t][j])
            return true;
    return false;
}

/* The compiled code resolution p calls, if it calls an entry of some. */
static const dm_code *entry_called(const dm_model *m, const dm_patch *p)
{
    const dm_code *to = dm_code_at(m, p->new_target, p->tsc);
    return to && to->kind == DM_CODE_NMETHOD && p->new_target - to->vaddr < DM_ENTRY_SPAN ? to
                                                                                       : NULL;
}

/* ---- sites resolved to compiled code that was gone by the next scan --------
 *
 * The reverse of the above: the resolver pointed the site at the callee's
 * compiled code, which was made not entrant before the watcher's next
 * scan; HotSpot re-resolved the site to its static call stub (the callee
 * interpreted), and that is the first record (xalan JDK 25: a site of
 * Normalizer2WithImpl.getDecomposition called NormalizerImpl's C1 code
 * 1,036 times, and the decoder went through the stub into the interpreter
 * instead). The stub names no method the model knows, but the site's next
 * record re-points it from the stub to the callee's newer version: the
 * versions of that method give the made-up states, as above. */

/* A patch that re-points a call from one place to another (call_to), by
 * where it went before. */
typedef struct repoint {
    int64_t owner;
    uint64_t from, tsc;
    uint32_t idx;
} repoint;

static int cmp_repoint(const void *a, const void *b)
{
    const repoint *x = a, *y = b;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    if (x->from != y->from)
        return x->from < y->from ? -1 : 1;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

static repoint *repoints_by_origin(const dm_model *m, size_t *n)
{
    repoint *r = g_new(repoint, m->npatches ? m->npatches : 1);
    *n = 0;
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (p->call_to && !p->site && !p->made_up)
            r[(*n)++] = (repoint){ p->owner, p->call_from, p->tsc, (uint32_t)i };
    }
    sort_n(r, *n, sizeof *r, cmp_repoint);
    return r;
}

/* The first patch of r (repoints_by_origin) recorded after time `after`
 * that re-points a call of code version owner away from `from`; NULL if
 * none. */
static const dm_patch *next_repoint_from(const dm_model *m, const repoint *r, size_t nr,
                                         int64_t owner, uint64_t from, uint64_t after)
{
    size_t lo = 0, hi = nr;
    repoint key = { owner, from, after, 0 };
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_repoint(&r[mid], &key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nr && r[lo].owner == owner && r[lo].from == from ? &m->patches[r[lo].idx]
                                                                : NULL;
}

/* The compiled code that resolution p's site calls next, where p resolved
 * it to its own static call stub and a later record re-points it from
 * there to an entry of compiled code. */
static const dm_code *callee_after_own_stub(const dm_model *m, const dm_patch *p,
                                            const repoint *r, size_t nr)
{
    if (!resolves_stub_call(m, p) || !resolves_to_own_code(m, p))
        return NULL;
    const dm_patch *q = next_repoint_from(m, r, nr, p->owner, p->new_target, p->tsc);
    if (!q)
        return NULL;
    const dm_code *to = dm_code_at(m, q->call_to, q->tsc);
    return to && to->kind == DM_CODE_NMETHOD && q->call_to - to->vaddr < DM_ENTRY_SPAN ? to : NULL;
}

/* ---- inline-cache sites resolved to an interpreted callee ---------------
 *
 * resolve_virtual_call points an inline-cache site whose callee has no
 * compiled code at the callee's c2i adapter: at its unverified entry (the
 * receiver's class check), jumping on to its c2i entry itself. Once the
 * callee has compiled code the site is pointed at that, and when both
 * happened between two watcher scans only the second was recorded (luindex
 * JDK 25: `AttributeSource.clearAttributes` calling an interpreted `clear`
 * through an adapter 132 times, each call decoded through a later state of
 * the site). HotSpot shares one adapter among the methods of one calling
 * convention (its AdapterFingerPrint: the receiver and the parameters as
 * basic types, boolean, byte, char and short as int, references as long),
 * and the model learns which adapter serves a convention from the records:
 * a static call stub's fill jumps to the c2i entry of the adapter of the
 * method its site is re-pointed to later, and a site re-pointed from an
 * adapter's unverified entry to compiled code had called that method's
 * adapter. A resolution to compiled code then gets a made-up state for its
 * callee's adapter: the site calling the unverified entry, applied only
 * where its resolver went on to the c2i entry. The two entries are a fixed
 * distance apart in every adapter (the same class check code): measured
 * where one adapter shows both, and from the code before a c2i entry (the
 * unverified entry follows the i2c part's last instruction). */

static bool is_adapter(const dm_code *c)
{
    return c && c->kind == DM_CODE_STUB && c->name && strstr(c->name, "adapters");
}

/* A method's calling convention as a key (see above), NULL if its
 * signature does not parse. */
static char *convention_of(const dm_method *mt)
{
    const char *s = mt ? mt->sig : NULL;
    if (!s || *s != '(')
        return NULL;
    GString *k = g_string_new(mt->is_static ? "" : "J");
    for (s++; *s && *s != ')'; s++) {
        bool reference = *s == '[';
        while (*s == '[')
            s++;
        if (*s == 'L') {
            s = strchr(s, ';');
            reference = true;
        } else if (!*s || !strchr("ZBCSIJFD", *s)) {
            s = NULL;
        }
        if (!s)
            break;
        if (reference)
            g_string_append_c(k, 'J');
        else if (*s == 'J' || *s == 'D')
            g_string_append(k, *s == 'J' ? "JV" : "DV");
        else
            g_string_append_c(k, *s == 'F' ? 'F' : 'I');
    }
    if (!s || *s != ')') {
        g_string_free(k, TRUE);
        return NULL;
    }
    return g_string_free(k, FALSE);
}

/* What the records show of one adapter's entries (0: not seen). */
typedef struct adapter_seen {
    uint32_t code;
    uint64_t unverified, c2i;
    struct adapter_seen *also;   /* another adapter read from code with the same key */
} adapter_seen;

static void adapter_seen_free(gpointer v)
{
    for (adapter_seen *e = v, *next; e; e = next) {
        next = e->also;
        g_free(e);
    }
}

/* Notes in by (convention key -> adapter_seen) that the method of the
 * compiled code at `to` (at time t) uses the adapter holding `at`, at its
 * c2i entry or its unverified one. */
static void note_adapter(const dm_model *m, GHashTable *by, uint64_t to, uint64_t t, uint64_t at,
                         bool c2i)
{
    const dm_code *callee = dm_code_at(m, to, t), *a = dm_code_at(m, at, t);
    if (!callee || callee->kind != DM_CODE_NMETHOD || to - callee->vaddr >= DM_ENTRY_SPAN ||
        !is_adapter(a))
        return;
    char *key = convention_of(dm_method_get(m, callee->method_id));
    if (!key)
        return;
    adapter_seen *e = g_hash_table_lookup(by, key);
    if (!e) {
        e = g_new0(adapter_seen, 1);
        e->code = a->index;
        g_hash_table_insert(by, key, e);
    } else {
        g_free(key);
        if (e->code != a->index)
            return;              /* another adapter: the key is coarser than HotSpot's */
    }
    if (c2i)
        e->c2i = at;
    else
        e->unverified = at;
}

#define I2C_SPAN 512              /* bytes from an adapter's start to its `jmp *%r11` */

/* One load of an i2c part: "REG, SIZE ptr [rax + OFF]" (capstone's Intel
 * syntax) into an argument register (j_rarg0-5: rsi, rdx, rcx, r8, r9,
 * rdi; j_farg0-7: xmm0-7). false for anything else. */
static bool i2c_load(const cs_insn *insn, bool *xmm, bool *wide, uint64_t *off)
{
    static const char *const gpr[] = { "rsi", "rdx", "rcx", "r8", "r9", "rdi",
                                       "esi", "edx", "ecx", "r8d", "r9d", "edi" };
    const char *mn = insn->mnemonic, *ops = insn->op_str;
    bool mov = !strcmp(mn, "mov"), fmov = !strcmp(mn, "movss") || !strcmp(mn, "movsd") ||
                                          !strcmp(mn, "vmovss") || !strcmp(mn, "vmovsd");
    const char *comma = strchr(ops, ',');
    if ((!mov && !fmov) || !comma)
        return false;
    size_t rl = (size_t)(comma - ops);
    bool known = false;
    if (fmov)
        known = rl == 4 && !strncmp(ops, "xmm", 3) && ops[3] >= '0' && ops[3] <= '7';
    for (size_t i = 0; mov && i < sizeof gpr / sizeof gpr[0] && !known; i++)
        known = strlen(gpr[i]) == rl && !strncmp(ops, gpr[i], rl);
    char size[8];
    long long o;
    int used = 0;
    if (!known || sscanf(comma, ", %7s ptr [rax + %lli]%n", size, &o, &used) != 2 || !used ||
        comma[used] || o <= 0)
        return false;
    *xmm = fmov;
    *wide = !strcmp(size, "qword");
    *off = (uint64_t)o;
    return *wide || !strcmp(size, "dword");
}

/* The calling convention (convention_of's key) of the adapter a, read from
 * its i2c part (HotSpot's gen_i2c_adapter), which loads the arguments from
 * the interpreter's stack in order into their registers: of `slots` stack
 * slots, argument slot i from (slots - i) * 8, a long or double (two slots,
 * the second void) from the slot below, with a 64-bit move for references
 * and longs, a 32-bit one for ints, into an xmm register for floats and
 * doubles. The part ends with `jmp *%r11`, and the unverified entry
 * follows it (*unverified). The first argument is taken as one slot (a
 * receiver, for every inline-cache call), which a static method whose first
 * argument is a long misreads (adapters_from_code keeps each adapter of a
 * key as a candidate). NULL where the part is not found or loads something
 * else (an argument passed on the stack). */
static char *key_from_i2c(csh cs, cs_insn *insn, const dm_model *m, const uint8_t *code,
                          const dm_code *a, uint64_t *unverified)
{
    if (a->code_offset > m->code_size || m->code_size - a->code_offset < a->size)
        return NULL;
    const uint8_t *p = code + a->code_offset;
    size_t avail = a->size < I2C_SPAN ? a->size : I2C_SPAN;
    uint64_t addr = a->vaddr, slots = 0, i = 0;
    GString *k = g_string_new(NULL);
    bool ok = false, bad = false;
    while (!ok && !bad && avail && cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
        bool xmm, wide;
        uint64_t off;
        if (!strcmp(insn->mnemonic, "jmp") && !strcmp(insn->op_str, "r11")) {
            ok = slots == i;
            *unverified = addr;        /* after the instruction */
            break;
        }
        if (!i2c_load(insn, &xmm, &wide, &off))
            continue;
        if (!slots)                  /* the first argument, one slot (above) */
            slots = off / 8 + (xmm && wide);
        if (off % 8 || i >= slots)
            bad = true;
        else if (off == (slots - i) * 8 && !(xmm && wide)) {
            g_string_append_c(k, xmm ? 'F' : wide ? 'J' : 'I');
            i++;
        } else if (off == (slots - i - 1) * 8 && wide && i + 1 < slots) {
            g_string_append(k, xmm ? "DV" : "JV");
            i += 2;
        } else {
            bad = true;
        }
    }
    if (!ok) {
        g_string_free(k, TRUE);
        return NULL;
    }
    return g_string_free(k, FALSE);
}

/* The c2i entry of adapter a, read from its code where records show none:
 * HotSpot's c2i unverified entry (gen_c2i_adapter's caller) checks the
 * receiver's class and then whether the callee has compiled code since,
 * jumping to the inline-cache miss stub on either, and the c2i entry
 * follows its second jump there (JDK 17: `je ok; jmp miss; ok: ...; je
 * skip; jmp miss`; JDK 25: `jne miss; ...; je skip; jmp miss`). 0 where
 * the part does not read so. */
static uint64_t c2i_from_code(csh cs, cs_insn *insn, const dm_model *m, const uint8_t *code,
                              const dm_code *a, uint64_t unverified)
{
    if (unverified <= a->vaddr || unverified - a->vaddr >= a->size ||
        a->code_offset > m->code_size || m->code_size - a->code_offset < a->size)
        return 0;
    const uint8_t *p = code + a->code_offset + (unverified - a->vaddr);
    size_t avail = a->size - (unverified - a->vaddr);
    if (avail > DM_ENTRY_SPAN)
        avail = DM_ENTRY_SPAN;
    uint64_t addr = unverified, miss = 0;
    int misses = 0;
    while (avail && cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
        const cs_x86 *x = &insn->detail->x86;
        if (!cs_insn_group(cs, insn, CS_GRP_JUMP) || x->op_count != 1 ||
            x->operands[0].type != X86_OP_IMM)
            continue;
        uint64_t to = (uint64_t)x->operands[0].imm;
        if (to >= a->vaddr && to < a->vaddr + a->size)
            continue;                /* within the adapter: past a check */
        if (!miss)
            miss = to;
        if (to != miss)
            return 0;
        if (++misses == 2)
            return insn->id == X86_INS_JMP ? addr : 0;
    }
    return 0;
}

/* The distance from the unverified entry to the c2i one where no record
 * shows it: the most common of the adapters' (c2i_from_code), 0 if none
 * reads. */
static uint64_t c2i_gap_from_code(csh cs, cs_insn *insn, const dm_model *m, const uint8_t *code)
{
    uint32_t seen[DM_ENTRY_SPAN] = { 0 };
    for (size_t c = 0; c < m->ncodes; c++) {
        uint64_t unverified = 0, c2i;
        char *key = is_adapter(&m->codes[c])
                        ? key_from_i2c(cs, insn, m, code, &m->codes[c], &unverified)
                        : NULL;
        const bool read = key != NULL;
        g_free(key);
        if (read && (c2i = c2i_from_code(cs, insn, m, code, &m->codes[c], unverified)) &&
            c2i - unverified < DM_ENTRY_SPAN)
            seen[c2i - unverified]++;
    }
    uint64_t gap = 0;
    for (uint64_t g = 1; g < DM_ENTRY_SPAN; g++)
        if (seen[g] > seen[gap])
            gap = g;
    return gap;
}

#define ADAPTERS_PER_KEY 4       /* adapters read from code with one key, kept as candidates */

/* Adds to by (learn_adapters) the conventions of the adapters no record
 * named, read from their i2c parts (key_from_i2c), with the c2i entry gap
 * bytes after the unverified one. Where several adapters give one key (a
 * static method whose first argument is a long, misread; HotSpot's own
 * duplicates), each is a candidate (adapter_seen.also), up to
 * ADAPTERS_PER_KEY: a made-up state applies only where the resolver went on
 * to its c2i entry, so a wrong candidate is never taken. */
static void adapters_from_code(dm_model *m, const uint8_t *code, GHashTable *by, uint64_t gap)
{
    csh cs;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
        return;
    cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *insn = cs_malloc(cs);
    if (!gap)
        gap = c2i_gap_from_code(cs, insn, m, code);
    if (!gap) {
        cs_free(insn, 1);
        cs_close(&cs);
        return;
    }
    GHashTable *read = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, adapter_seen_free);
    for (size_t c = 0; c < m->ncodes; c++) {
        uint64_t unverified = 0;
        char *key = is_adapter(&m->codes[c])
                        ? key_from_i2c(cs, insn, m, code, &m->codes[c], &unverified)
                        : NULL;
        if (!key)
            continue;
        if (g_hash_table_contains(by, key)) {
            g_free(key);
            continue;
        }
        adapter_seen *first = g_hash_table_lookup(read, key), **end = &first;
        size_t n = 0;
        bool known = false;
        for (; *end; end = &(*end)->also, n++)
            known = known || (*end)->unverified == unverified;
        if (!known && n < ADAPTERS_PER_KEY) {
            *end = g_new0(adapter_seen, 1);
            **end = (adapter_seen){ (uint32_t)c, unverified, unverified + gap, NULL };
            m->adapters_from_code++;
        }
        if (n)
            g_free(key);
        else
            g_hash_table_insert(read, key, first);
    }
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, read);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        g_hash_table_iter_steal(&it);
        g_hash_table_insert(by, k, v);
    }
    g_hash_table_destroy(read);
    cs_free(insn, 1);
    cs_close(&cs);
}

/* The adapters of calling conventions, from the records (see above) and
 * then from the adapters' code: a key -> adapter_seen table, each entry
 * with both entries filled in. */
static GHashTable *learn_adapters(dm_model *m, const uint8_t *code, const stub_fill *fills,
                                  size_t nfills, const repoint *r, size_t nr)
{
    GHashTable *by = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, adapter_seen_free);
    for (size_t f = 0; f < nfills; f++) {
        /* the stub's site re-pointed from the stub after the fill */
        const dm_patch *q =
            next_repoint_from(m, r, nr, fills[f].owner, fills[f].at, fills[f].tsc);
        if (q)
            note_adapter(m, by, q->call_to, q->tsc, fills[f].to, true);
    }
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *q = &m->patches[i];
        if (q->call_to && !q->site && !q->made_up)
            note_adapter(m, by, q->call_to, q->tsc, q->call_from, false);
    }
    /* the distance from the unverified entry to the c2i one, the most
     * common of: where an adapter shows both; where the c2i entry is
     * known, from the end of the i2c part's last instruction (`jmp *%r11`)
     * before it, where the unverified entry begins */
    GHashTableIter it;
    gpointer k, v;
    uint32_t seen[DM_ENTRY_SPAN] = { 0 };
    g_hash_table_iter_init(&it, by);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const adapter_seen *e = v;
        const dm_code *a = &m->codes[e->code];
        if (e->unverified && e->c2i > e->unverified && e->c2i - e->unverified < DM_ENTRY_SPAN)
            seen[e->c2i - e->unverified]++;
        if (!e->c2i || e->c2i - a->vaddr < 3 || a->code_offset > m->code_size ||
            m->code_size - a->code_offset < e->c2i - a->vaddr)
            continue;
        const uint8_t *c2i = code + a->code_offset + (e->c2i - a->vaddr);
        for (uint64_t back = 3; back < DM_ENTRY_SPAN + 3 && back <= e->c2i - a->vaddr; back++)
            if (!memcmp(c2i - back, "\x41\xff\xe3", 3)) {
                seen[back - 3] += back > 3;
                break;
            }
    }
    uint64_t gap = 0;
    for (uint64_t g = 1; g < DM_ENTRY_SPAN; g++)
        if (seen[g] > seen[gap])
            gap = g;
    g_hash_table_iter_init(&it, by);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        adapter_seen *e = v;
        if (!e->c2i && e->unverified && gap)
            e->c2i = e->unverified + gap;
        else if (!e->unverified && e->c2i && gap)
            e->unverified = e->c2i - gap;
        if (!e->c2i || !e->unverified)
            g_hash_table_iter_remove(&it);
    }
    m->adapters_from_records = g_hash_table_size(by);
    adapters_from_code(m, code, by, gap);
    return by;
}

/* The made-up state of inline-cache resolution p to the compiled code
 * `to` where its callee was still interpreted: its adapter's (above),
 * appended to out[*n..MAX_STUB_EXITS). */
static void adapter_state(const dm_model *m, const dm_patch *p, const dm_method *callee,
                          GHashTable *adapters, site_state *out, size_t *n)
{
    char *key = convention_of(callee);
    const adapter_seen *e = key ? g_hash_table_lookup(adapters, key) : NULL;
    g_free(key);
    for (; e && *n < MAX_STUB_EXITS; e = e->also)
        if (m->codes[e->code].load_tsc <= p->tsc && !state_known(out, *n, e->c2i))
            out[(*n)++] = (site_state){ e->unverified, e->c2i, true };
}

/* ---- inline-cache sites resolved to a callee no record shows --------------
 *
 * An inline-cache site that went megamorphic (a vtable or itable stub, or
 * an InlineCacheBuffer transition stub on the way there) before the
 * watcher's next scan shows only that state in its record: the callee it
 * was resolved to first, and called directly until then, is named nowhere
 * in the records (luindex JDK 17: a site of BytesRefHash$1.compare(II)
 * called UTF8SortedAsUnicodeComparator.compare(Object,Object) for 104M
 * ticks, and each call was decoded through the transition stub: 728K
 * instructions not in place). The caller's bytecode names it: the invoke
 * at the site's bci (in its PC record, at the return address) gives the
 * callee's name and descriptor, and each compiled version of a method with
 * both that was there gives made-up states (version_states), applied only
 * where the thread's resolver went on to its verified entry; so does the
 * adapter of the callee's calling convention (adapter_state), where it was
 * still interpreted.
 * Which classes' methods can be the receiver's is not known here (no class
 * hierarchy): a name shared by many classes fills the states with the
 * first versions found. */

typedef struct callee_names {
    GHashTable *class_files;     /* class id -> jm_slice * (the loader's) */
    GHashTable *classes;         /* class id -> cf_class *, NULL where it does not parse */
    GHashTable *versions;        /* "name sig" -> GArray of code indices, non-static nmethods */
} callee_names;

static void free_class(gpointer v)
{
    if (v)
        cf_free(v);
    g_free(v);
}

static void free_versions(gpointer v) { g_array_free(v, TRUE); }

static gint by_load_time(gconstpointer a, gconstpointer b, gpointer codes)
{
    const dm_code *c = codes;
    uint64_t x = c[*(const uint32_t *)a].load_tsc, y = c[*(const uint32_t *)b].load_tsc;
    return x < y ? -1 : x > y;
}

static void sort_by_load_time(gpointer key, gpointer versions, gpointer codes)
{
    (void)key;
    g_array_sort_with_data(versions, by_load_time, codes);
}

/* The versions of each name and descriptor, oldest first. */
static callee_names callee_names_new(const dm_model *m, GHashTable *class_files)
{
    callee_names cn = {
        .class_files = class_files,
        .classes = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, free_class),
        .versions = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, free_versions),
    };
    for (size_t i = 0; i < m->ncodes; i++) {
        const dm_code *c = &m->codes[i];
        const dm_method *mt = c->kind == DM_CODE_NMETHOD ? dm_method_get(m, c->method_id) : NULL;
        if (!mt || mt->is_static)
            continue;
        char *key = g_strconcat(mt->name, " ", mt->sig, NULL);
        GArray *v = g_hash_table_lookup(cn.versions, key);
        if (!v) {
            v = g_array_new(FALSE, FALSE, sizeof(uint32_t));
            g_hash_table_insert(cn.versions, key, v);
        } else {
            g_free(key);
        }
        uint32_t idx = (uint32_t)i;
        g_array_append_val(v, idx);
    }
    g_hash_table_foreach(cn.versions, sort_by_load_time, m->codes);
    return cn;
}

static void callee_names_free(callee_names *cn)
{
    g_hash_table_destroy(cn->classes);
    g_hash_table_destroy(cn->versions);
}

/* The parsed class file of class_id, or NULL (none recorded, or it does not
 * parse: then the site is simply not named). */
static const cf_class *class_of(callee_names *cn, uint64_t class_id)
{
    gpointer v;
    if (g_hash_table_lookup_extended(cn->classes, &class_id, NULL, &v))
        return v;
    const jm_slice *b = g_hash_table_lookup(cn->class_files, &class_id);
    cf_class *c = NULL;
    if (b) {
        char err[256];
        c = g_new0(cf_class, 1);
        if (cf_parse((const uint8_t *)b->p, b->len, c, err, sizeof err) < 0) {
            cf_free(c);
            g_free(c);
            c = NULL;
        }
    }
    g_hash_table_insert(cn->classes, g_memdup2(&class_id, sizeof class_id), c);
    return c;
}

#define OP_INVOKEVIRTUAL 182
#define OP_INVOKEINTERFACE 185

/* The method the invoke at site names (owner: the site's code version), as
 * the caller sees it: its name and descriptor, with a receiver. false if
 * there is no scope at the site or no class file, or the bytecode there is
 * no invokevirtual or invokeinterface. */
static bool named_callee(const dm_model *m, callee_names *cn, const dm_code *owner,
                         uint64_t site, dm_method *out)
{
    const dm_frame *f;   /* the call's record: at its return address, the first past site */
    if (!dm_inline_at(m, owner, site, &f) || f[0].bci < 0)
        return false;
    const dm_method *caller = dm_method_get(m, f[0].method_id);
    const cf_class *k = caller ? class_of(cn, caller->class_id) : NULL;
    const cf_method *cm = NULL;
    for (uint16_t i = 0; k && i < k->nmethods && !cm; i++)
        if (k->methods[i].code && !strcmp(k->methods[i].name, caller->name) &&
            !strcmp(k->methods[i].sig, caller->sig))
            cm = &k->methods[i];
    uint32_t bci = (uint32_t)f[0].bci;
    if (!cm || cm->code_len < 3 || bci > cm->code_len - 3 ||
        (cm->code[bci] != OP_INVOKEVIRTUAL && cm->code[bci] != OP_INVOKEINTERFACE))
        return false;
    uint8_t tag;
    const char *klass, *name, *sig;
    if (cf_member_ref(k, (uint32_t)cm->code[bci + 1] << 8 | cm->code[bci + 2], &tag, &klass,
                      &name, &sig) < 0)
        return false;
    *out = (dm_method){ .name = (char *)name, .sig = (char *)sig, .is_static = false };
    return true;
}

/* The compiled versions of methods with mt's name and descriptor, or NULL. */
static const GArray *versions_named(callee_names *cn, const dm_method *mt)
{
    char *key = g_strconcat(mt->name, " ", mt->sig, NULL);
    const GArray *v = g_hash_table_lookup(cn->versions, key);
    g_free(key);
    return v;
}

/* The made-up states of inline-cache resolution p to no compiled code: the
 * versions in `named` there between its owner's start and p's record,
 * called at their unverified entry, the resolver going on to the verified
 * one; appended to out[*n..MAX_STUB_EXITS). A common name (hashCode,
 * equals) has more versions than there are states: the newest come first,
 * and none that was marked not entrant before its owner's load record (a
 * resolution no longer goes there). */
static void named_callee_states(const dm_model *m, const dm_patch *p, const GArray *named,
                                const uint64_t *not_entrant, const entry_offsets *unverified,
                                const entry_offsets *verified, site_state *out, size_t *n)
{
    const dm_code *owner = &m->codes[p->owner];
    for (guint i = named->len; i-- > 0;) {
        uint32_t v = g_array_index(named, uint32_t, i);
        if (not_entrant[v] > owner->load_tsc)
            version_states(&m->codes[v], owner, p, unverified, verified, out, n);
    }
}

/* The made-up bytes into a memory file of the model's own: libipt reads
 * code from files. false if it cannot be made. */
static bool write_made_up(dm_model *m, const GByteArray *bytes)
{
    int fd = memfd_create("jpt-made-up-code", MFD_CLOEXEC);
    if (fd < 0)
        return false;
    size_t done = 0;
    while (done < bytes->len) {
        ssize_t n = write(fd, bytes->data + done, bytes->len - done);
        if (n <= 0) {
            int e = n < 0 ? errno : ENOSPC;
            close(fd);
            errno = e;
            return false;
        }
        done += (size_t)n;
    }
    m->made_up_fd = fd;
    m->made_up_path = g_strdup_printf("/proc/self/fd/%d", fd);
    m->made_up_size = bytes->len;
    m->made_up_bytes = g_memdup2(bytes->data, bytes->len);
    return true;
}

/* Of the stub states st[0..n) of static or opt-virtual resolution p
 * (stub_states), those through a stub that jumps to the c2i entry of the
 * adapter of p's callee's calling convention, where at least one does: each
 * site has a stub of its own, and a caller's stubs for callees of other
 * conventions jump to other adapters. Two stubs whose adapters branch
 * alike decode alike, and a retry keeps the first one tried (xalan JDK 25:
 * two sites of NormalizerBase.next's C1 code each went through its own
 * stub into the interpreter; each call decoded through the other stub's
 * adapter lost 3,000 instructions). The count kept is returned. */
static size_t stubs_to_callee_adapter(const dm_model *m, const dm_patch *p,
                                      GHashTable *adapters, site_state *st, size_t n)
{
    const dm_code *callee = entry_called(m, p);
    char *key = callee ? convention_of(dm_method_get(m, callee->method_id)) : NULL;
    const adapter_seen *e = key ? g_hash_table_lookup(adapters, key) : NULL;
    g_free(key);
    bool to_callee[MAX_STUB_EXITS] = { false }, any = false;
    for (size_t j = 0; j < n; j++) {
        for (const adapter_seen *a = e; a && !to_callee[j]; a = a->also)
            to_callee[j] = !st[j].direct && st[j].then == a->c2i;
        any = any || to_callee[j];
    }
    if (!any)
        return n;    /* no stub goes to the callee's adapter, or it is not known */
    size_t kept = 0;
    for (size_t j = 0; j < n; j++)
        if (to_callee[j] || st[j].direct)
            st[kept++] = st[j];
    return kept;
}

/* A made-up state of the call of patch i (p): the call at `call` going to
 * `to`, appended to made with its rel32 in bytes. */
static dm_patch *made_up_call(const dm_patch *p, uint32_t i, uint64_t call, uint64_t to,
                              GArray *made, GByteArray *bytes)
{
    int32_t rel = (int32_t)(int64_t)(to - (call + 5));
    dm_patch q = *p;
    q.vaddr = call + 1;
    q.size = 4;
    q.code_offset = bytes->len;
    q.own_bytes = true;
    g_byte_array_append(bytes, (const guint8 *)&rel, 4);
    q.start_tsc = q.tsc;         /* held only until the record applies */
    q.new_target = to;
    q.call_to = 0;
    q.made_up = true;
    q.direct = false;
    q.stub_to = 0;               /* the stub's own jump, wherever it goes */
    q.site = 0;
    q.first_state = q.nstates = 0;
    q.state_of = i;
    q.at_callee_code = false;
    q.before_fixup = true;
    q.fixup_states = q.then_state = 0;
    q.at_resolver = false;
    g_array_append_val(made, q);
    return &g_array_index(made, dm_patch, made->len - 1);
}

/* The made-up states of a call that re-pointed its site from its static
 * stub after the callee's install (model.h, fixup_states), appended to made
 * from patch index `first`: the site at its stub (the fixup applies p), the
 * site at its stub again (the fixup leaves it at the resolver its code was
 * installed with) and the site at that resolver. How many were made. */
static size_t fixup_states(dm_model *m, const uint8_t *code, dm_patch *p, uint32_t i,
                           uint32_t first, GArray *made, GByteArray *bytes)
{
    if (!p->at_callee_code || p->owner < 0 || !p->call_at || !p->call_from)
        return 0;
    const dm_code *owner = &m->codes[p->owner];
    const uint64_t call = p->call_at;
    made_up_call(p, i, call, p->call_from, made, bytes);
    size_t n = 1;
    /* the site's bytes as installed: a call of a resolver stub */
    uint64_t off = owner->code_offset + (call - owner->vaddr);
    if (code && call >= owner->vaddr && call + 5 <= owner->vaddr + owner->size &&
        off + 5 <= m->code_size && code[off] == 0xe8) {
        int32_t rel;
        memcpy(&rel, code + off + 1, 4);
        uint64_t resolver = call + 5 + (uint64_t)(int64_t)rel;
        const dm_code *r = dm_code_at(m, resolver, p->tsc);
        if (r && r->kind == DM_CODE_STUB && r->name && strstr(r->name, "resolve") &&
            resolver != p->call_from) {
            dm_patch *cleaning = made_up_call(p, i, call, p->call_from, made, bytes);
            cleaning->then_state = first + 2 + 1;
            made_up_call(p, i, call, resolver, made, bytes)->at_resolver = true;
            n += 2;
        }
    }
    p->fixup_states = first + 1;
    return n;
}

/* See model.h: the made-up states of call sites resolved to compiled code,
 * appended to the patches. */
void dm_make_up_site_states(dm_model *m, const uint8_t *code, GHashTable *class_files)
{
    owner_order ord = dm_order_by_owner(m);
    GArray *fills = g_array_new(FALSE, FALSE, sizeof(stub_fill));
    uint8_t *seen = g_new0(uint8_t, m->ncodes + 1);
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (!p->site && searchable(m, p))
            find_stub_fills(m, &ord, code, i, fills);
        if (p->site && searchable(m, p) && !seen[p->owner]) {
            seen[p->owner] = 1;
            find_filled_stubs(m, code, &m->codes[p->owner], fills);
        }
    }
    g_free(seen);
    g_free(ord.seq);
    g_free(ord.first);
    g_free(ord.pos);
    sort_n(fills->data, fills->len, sizeof(stub_fill), cmp_stub_fill);
    const stub_fill *all = (const stub_fill *)(void *)fills->data;
    const entry_offsets entries = entries_from(m, code, may_have_states, ENTRY_VERIFIED);
    const entry_offsets unverified = entries_from(m, code, resolves_virtual_call,
                                                  ENTRY_UNVERIFIED);
    uint64_t *not_entrant = g_new(uint64_t, m->ncodes + 1);
    for (size_t i = 0; i <= m->ncodes; i++)
        not_entrant[i] = UINT64_MAX;
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (dm_writes_not_entrant(m, p, code) && p->tsc < not_entrant[p->owner])
            not_entrant[p->owner] = p->tsc;
    }
    method_versions versions = versions_by_method(m);
    size_t nrepoints;
    repoint *repoints = repoints_by_origin(m, &nrepoints);
    GHashTable *adapters = learn_adapters(m, code, all, fills->len, repoints, nrepoints);
    callee_names names = callee_names_new(m, class_files);
    site_state st[MAX_STUB_EXITS];
    GArray *made = g_array_new(FALSE, FALSE, sizeof(dm_patch));
    GByteArray *bytes = g_byte_array_new();
    dm_patch *before = g_memdup2(m->patches, m->npatches * sizeof(dm_patch));
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        size_t n = 0;
        const dm_code *callee;
        const entry_offsets *call_at = &entries;
        if (may_have_states(m, p)) {
            stub_states(p, all, fills->len, st, &n);
            n = stubs_to_callee_adapter(m, p, adapters, st, n);
            callee = entry_called(m, p);
        } else if (resolves_virtual_call(m, p)) {
            callee = entry_called(m, p);
            call_at = &unverified;
            dm_method named;
            if (callee) {
                adapter_state(m, p, dm_method_get(m, callee->method_id), adapters, st, &n);
            } else if (named_callee(m, &names, &m->codes[p->owner], p->site, &named)) {
                adapter_state(m, p, &named, adapters, st, &n);
                const GArray *v = versions_named(&names, &named);
                if (v)
                    named_callee_states(m, p, v, not_entrant, &unverified, &entries, st, &n);
                m->callees_named += n > 0;
            }
        } else if ((callee = repointed_from_version(m, p, not_entrant))) {
            if (at_entry(&unverified, callee, p->call_from))
                call_at = &unverified;
        } else {
            callee = callee_after_own_stub(m, p, repoints, nrepoints);
        }
        if (callee)
            older_version_states(m, p, callee, call_at, &entries, &versions, st, &n);
        const uint64_t call = p->site ? p->site : p->call_at;
        for (size_t j = 0; j < n; j++) {
            int32_t rel = (int32_t)(int64_t)(st[j].call - (call + 5));
            dm_patch q = *p;
            q.vaddr = call + 1;      /* the whole rel32 (a record holds the bytes that changed) */
            q.size = 4;
            q.code_offset = bytes->len;
            q.own_bytes = true;
            g_byte_array_append(bytes, (const guint8 *)&rel, 4);
            q.new_target = st[j].call;
            q.call_to = 0;
            q.made_up = true;
            q.direct = st[j].direct;
            q.stub_to = st[j].then;
            q.site = 0;          /* not a resolution of its own (image.c's site table) */
            q.first_state = q.nstates = 0;
            q.state_of = (uint32_t)i;
            if (!p->nstates)
                p->first_state = (uint32_t)(m->npatches + made->len);
            p->nstates++;
            g_array_append_val(made, q);
        }
        size_t nfix = fixup_states(m, code, p, (uint32_t)i, (uint32_t)(m->npatches + made->len),
                                   made, bytes);
        m->fixup_states_made_up += nfix;
        if ((n || nfix) && (p->vaddr != call + 1 || p->size != 4)) {
            /* over a made-up state, the recorded one must set all of the rel32 */
            uint64_t to = p->site ? p->new_target : p->call_to;
            int32_t rel = (int32_t)(int64_t)(to - (call + 5));
            p->vaddr = call + 1;
            p->size = 4;
            p->code_offset = bytes->len;
            p->own_bytes = true;
            g_byte_array_append(bytes, (const guint8 *)&rel, 4);
        }
    }
    if (made->len && !write_made_up(m, bytes)) {
        memcpy(m->patches, before, m->npatches * sizeof(dm_patch));
        g_array_set_size(made, 0);
        m->fixup_states_made_up = 0;
        dm_warn(m, "cannot make a memory file for made-up call-site states: %s", g_strerror(errno));
    }
    g_free(before);
    g_free(not_entrant);
    g_free(versions.v);
    g_free(repoints);
    g_hash_table_destroy(adapters);
    callee_names_free(&names);
    g_byte_array_free(bytes, TRUE);
    g_array_free(fills, TRUE);
    if (made->len) {
        m->patches = g_renew(dm_patch, m->patches, m->npatches + made->len);
        memcpy(m->patches + m->npatches, made->data, made->len * sizeof(dm_patch));
        m->npatches += made->len;
        m->states_made_up = made->len;
    }
    g_array_free(made, TRUE);
}
