/* Call sites in the patch records (model.h, "Patches"): patches cut into one
 * piece per resolved or re-pointed site, and dated back to what HotSpot ties
 * them to (a stub's fill, a new version's load, the callee's code). */
#include "decoder/callsites.h"

#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "decoder/model.h"

/* Whether a call to addr at time tsc went to one of HotSpot's call
 * resolution stubs: their runtime call always patches the calling site
 * before it returns. Other stubs a call may reach do not say when the site
 * changes: inline-cache stubs are retired at a safepoint, and a c2i adapter
 * fixes its caller only once the callee has compiled code. JDK 17 names
 * them "resolve_static_call" and so on, JDK 25 "Shared Runtime
 * resolve_static_call_blob". */
static bool is_resolve_stub_at(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    static const char *const names[] = {
        "resolve_static_call", "resolve_virtual_call", "resolve_opt_virtual_call",
    };
    const dm_code *c = dm_code_at(m, addr, tsc);
    if (!c || c->kind != DM_CODE_STUB || !c->name)
        return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strstr(c->name, names[i]))
            return true;
    return false;
}

/* The same for the resolvers of calls that have a static call stub (static
 * and opt-virtual calls; a virtual call's site holds an inline cache). */
bool dm_is_stub_call_resolver_at(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    const dm_code *c = dm_code_at(m, addr, tsc);
    return c && c->kind == DM_CODE_STUB && c->name &&
           (strstr(c->name, "resolve_static_call") || strstr(c->name, "resolve_opt_virtual_call"));
}

/* The resolver of inline-cache (virtual) call sites. */
bool dm_is_virtual_call_resolver_at(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    const dm_code *c = dm_code_at(m, addr, tsc);
    return c && c->kind == DM_CODE_STUB && c->name && strstr(c->name, "resolve_virtual_call");
}

/* See model.h: patches that resolve call sites. The bytes a patch replaced
 * are its owner's snapshot with the earlier patches of the same owner laid
 * over it (a site may be patched more than once: resolve stub, then c2i
 * adapter, then the compiled callee). An inline-cache site is `movabs rax,
 * imm64; call`: its resolution rewrites the cached value and the call
 * together, so the changed bytes may also cover the immediate.
 *
 * The watcher records, per scan, one patch per run of nearby changed bytes,
 * so a patch may hold several sites resolved between two scans, or a site
 * and some other change. Such a patch is cut into pieces: one per resolved
 * site (its call's rel32, with the immediate before it for an inline-cache
 * site), each applied when the thread goes through that site's resolver,
 * and the other runs of changed bytes, applied at the record time (or
 * ahead of it like any patch: a static call stub's fill with the call
 * resolved to it, a retry, image.c and retry.c). A call re-pointed from
 * one callee to another is a piece of its own too where the patch holds
 * another call: two neighbouring sites re-pointed at a new version of their
 * callees are re-pointed when each callee's version comes, which may be far
 * apart, and one scan records both (measured: a site of a C1 caller applied
 * 4.8M ticks early with its neighbour's re-pointing, luindex on JDK 25). */
#define SITE_BEFORE 10       /* a movabs whose immediate a patch starts in */
#define SITE_AFTER 4         /* a call whose rel32 a patch ends in */
#define MAX_SITES 64         /* resolved sites looked for in one patch (more: left in the rest) */

typedef struct site_change {
    uint64_t call, from, to;     /* the call instruction, its old and new target */
    uint64_t lo, hi;             /* the bytes that resolve it: [lo, hi) */
    bool resolves;               /* from a resolve stub; else re-pointed (call_to) */
} site_change;

typedef struct owned_patch {
    int64_t owner;
    uint32_t idx;
} owned_patch;

static int cmp_owned_patch(const void *a, const void *b)
{
    const owned_patch *x = a, *y = b;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

owner_order dm_order_by_owner(const dm_model *m)
{
    owner_order o = { g_new(uint32_t, m->npatches + 1), g_new(uint32_t, m->npatches + 1),
                      g_new(uint32_t, m->npatches + 1) };
    owned_patch *op = g_new(owned_patch, m->npatches + 1);
    for (size_t i = 0; i < m->npatches; i++)
        op[i] = (owned_patch){ m->patches[i].owner, (uint32_t)i };
    sort_n(op, m->npatches, sizeof *op, cmp_owned_patch);
    for (size_t k = 0, start = 0; k < m->npatches; k++) {
        if (k && op[k].owner != op[k - 1].owner)
            start = k;
        o.seq[k] = op[k].idx;
        o.first[op[k].idx] = (uint32_t)start;
        o.pos[op[k].idx] = (uint32_t)k;
    }
    g_free(op);
    return o;
}

/* The bytes [lo, lo + n) of patch i's owner before patch i (see above). */
void dm_bytes_before(const dm_model *m, const owner_order *o, const uint8_t *code, size_t i,
                     uint64_t lo, uint64_t n, uint8_t *out)
{
    const dm_patch *p = &m->patches[i];
    const dm_code *c = &m->codes[p->owner];
    memcpy(out, code + c->code_offset + (lo - c->vaddr), n);
    for (uint32_t k = o->first[i]; k < o->pos[i]; k++) {
        const dm_patch *q = &m->patches[o->seq[k]];
        if (q->vaddr >= lo + n || lo >= q->vaddr + q->size)
            continue;
        uint64_t a = q->vaddr > lo ? q->vaddr : lo;
        uint64_t b = q->vaddr + q->size < lo + n ? q->vaddr + q->size : lo + n;
        memcpy(out + (a - lo), code + q->code_offset + (a - q->vaddr), b - a);
    }
}

/* The calls patch i changes, in address order, into out[0..max): the sites
 * it resolves and the calls it re-points; *other: whether it changes bytes
 * outside them. */
static size_t patch_sites(const dm_model *m, const owner_order *o, const uint8_t *code, size_t i,
                          site_change *out, size_t max, bool *other)
{
    const dm_patch *p = &m->patches[i];
    const dm_code *c = &m->codes[p->owner];
    uint64_t lo = p->vaddr - c->vaddr >= SITE_BEFORE ? p->vaddr - SITE_BEFORE : c->vaddr;
    uint64_t pend = p->vaddr + p->size, cend = c->vaddr + c->size;
    uint64_t hi = cend - pend > SITE_AFTER ? pend + SITE_AFTER : cend;
    uint64_t n = hi - lo;
    uint8_t *old = g_malloc(2 * n), *now = old + n;
    dm_bytes_before(m, o, code, i, lo, n, old);
    memcpy(now, old, n);
    memcpy(now + (p->vaddr - lo), code + p->code_offset, p->size);
    size_t k = 0;
    for (uint64_t a = lo; a + 5 <= hi && k < max; a++) {
        uint64_t at = a - lo;
        if (old[at] != 0xe8 || now[at] != 0xe8)
            continue;
        int32_t rel_old, rel_new;
        memcpy(&rel_old, old + at + 1, 4);
        memcpy(&rel_new, now + at + 1, 4);
        if (rel_old == rel_new)
            continue;
        uint64_t from = a + 5 + (uint64_t)(int64_t)rel_old;
        site_change *s = &out[k++];
        *s = (site_change){ .call = a, .from = from, .to = a + 5 + (uint64_t)(int64_t)rel_new,
                            .lo = a + 1, .hi = a + 5,
                            .resolves = is_resolve_stub_at(m, from, p->tsc) };
        /* An inline-cache site's cached value, if it changed too. */
        if (at >= 10 && old[at - 10] == 0x48 && old[at - 9] == 0xb8 &&
            memcmp(old + at - 8, now + at - 8, 8) != 0)
            s->lo = a - 8;
        a += 4;
    }
    *other = false;
    size_t s = 0;
    for (uint64_t a = p->vaddr; a < p->vaddr + p->size && !*other; a++) {
        while (s < k && out[s].hi <= a)
            s++;
        bool in_site = s < k && out[s].lo <= a;
        *other = !in_site && old[a - lo] != now[a - lo];
    }
    g_free(old);
    return k;
}

/* Appends the part [lo, hi) of patch p to out as one piece. */
static void append_piece(GArray *out, const dm_patch *p, uint64_t lo, uint64_t hi)
{
    if (lo == hi)
        return;
    dm_patch q = *p;
    q.vaddr = lo;
    q.size = hi - lo;
    q.code_offset = p->code_offset + (lo - p->vaddr);
    g_array_append_val(out, q);
}

/* Appends the bytes of [lo, hi) that patch p changes (old: the bytes before
 * p, from p->vaddr on), a piece per run of changes; runs closer than a
 * static call stub's size stay together (the resolution of a site pulls in
 * the piece over its stub, image.c, and nothing else). */
#define PIECE_JOIN 16
static void append_changes(GArray *out, const dm_patch *p, const uint8_t *old,
                           const uint8_t *now, uint64_t lo, uint64_t hi)
{
    uint64_t run = 0, last = 0;      /* the open piece [run, last + 1) */
    bool open = false;
    for (uint64_t a = lo; a < hi; a++) {
        if (old[a - p->vaddr] == now[a - p->vaddr])
            continue;
        if (open && a - last > PIECE_JOIN) {
            append_piece(out, p, run, last + 1);
            open = false;
        }
        if (!open)
            run = a;
        open = true;
        last = a;
    }
    if (open)
        append_piece(out, p, run, last + 1);
}

/* Patch p (or a piece of it) changes the call s. */
static void set_call_change(dm_patch *p, const site_change *s)
{
    if (s->resolves) {
        p->site = s->call;
        p->old_target = s->from;
        p->new_target = s->to;
    } else {
        p->call_at = s->call;
        p->call_from = s->from;
        p->call_to = s->to;
    }
}

void dm_find_call_sites(dm_model *m, const uint8_t *code)
{
    GArray *out = NULL;          /* the patches with pieces, once one is cut */
    site_change sites[MAX_SITES];
    owner_order ord = dm_order_by_owner(m);
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        size_t k = 0;
        bool other = false;
        const dm_code *c = p->owner >= 0 ? &m->codes[p->owner] : NULL;
        if (c && p->vaddr >= c->vaddr && p->vaddr + p->size <= c->vaddr + c->size &&
            p->size <= MAX_SITE_PATCH)
            k = patch_sites(m, &ord, code, i, sites, MAX_SITES, &other);
        /* One call re-pointed (with whatever else changed) stays whole, as
         * does one site resolved alone. */
        if (k == 1 && (!sites[0].resolves || !other)) {
            set_call_change(p, &sites[0]);
            k = 0;
        }
        if (k == 0) {
            if (out)
                g_array_append_val(out, *p);
            continue;
        }
        if (!out) {
            out = g_array_sized_new(FALSE, FALSE, sizeof(dm_patch), m->npatches + 2 * k);
            g_array_append_vals(out, m->patches, i);
        }
        uint8_t *old = g_malloc(p->size);
        dm_bytes_before(m, &ord, code, i, p->vaddr, p->size, old);
        const uint8_t *now = code + p->code_offset;
        uint64_t at = p->vaddr, end = p->vaddr + p->size;
        for (size_t s = 0; s < k; s++) {
            uint64_t lo = sites[s].lo > at ? sites[s].lo : at;
            uint64_t hi = sites[s].hi < end ? sites[s].hi : end;
            append_changes(out, p, old, now, at, lo);
            size_t before = out->len;
            append_piece(out, p, lo, hi);
            if (out->len > before)
                set_call_change(&g_array_index(out, dm_patch, out->len - 1), &sites[s]);
            at = hi > at ? hi : at;
        }
        append_changes(out, p, old, now, at, end);
        g_free(old);
        m->patches_cut++;
    }
    g_free(ord.seq);
    g_free(ord.first);
    g_free(ord.pos);
    if (out) {
        g_free(m->patches);
        m->npatches = out->len;
        m->patches = (dm_patch *)(void *)g_array_free(out, FALSE);
    }
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].site)
            m->call_site_patches++;
}

/* A site re-pointed at an inline-cache transition stub: HotSpot fills the
 * stub and re-points the site in one moment, so the re-pointing applies from
 * the stub's last recorded fill before its own record (no earlier than the
 * site's previous change). Only where the agent's close scans timed the fills
 * (to within about 10 ms): fills timed by full scans are too stale to date a
 * site by (measured: fewer instructions in place on such a recording). */

/* The record time of the last change to patch p's site recorded before p (its
 * call, or the cached value before it), or since if that is later. Record
 * times, not start times: the rules here move start times, and a site's
 * floor must not depend on the order they visit its records in. */
static uint64_t site_changed_last(const dm_model *m, const dm_patch *p, uint64_t since)
{
    uint64_t site_lo = p->vaddr > SITE_BEFORE + 1 ? p->vaddr - SITE_BEFORE - 1 : 0;
    for (size_t j = 0; j < m->npatches; j++) {
        const dm_patch *q = &m->patches[j];
        if (q->tsc < p->tsc && q->tsc > since && q->vaddr < p->vaddr + p->size &&
            site_lo < q->vaddr + q->size)
            since = q->tsc;
    }
    return since;
}

void dm_start_at_stub_fill(dm_model *m)
{
    bool moved = false;
    if (!m->close_scans)
        return;
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!p->call_to || p->site || p->made_up)
            continue;
        const dm_code *c = dm_code_at(m, p->call_to, p->tsc);
        if (!c || c->kind != DM_CODE_STUB || !c->name || strcmp(c->name, "InlineCacheBuffer"))
            continue;
        uint64_t fill = 0;
        uint64_t floor =
            site_changed_last(m, p, p->tsc > DM_IC_FILL_SPAN ? p->tsc - DM_IC_FILL_SPAN : 0);
        for (size_t j = 0; j < m->npatches; j++) {
            const dm_patch *q = &m->patches[j];
            if (q->tsc < p->tsc && q->tsc >= floor && q->vaddr <= p->call_to &&
                p->call_to < q->vaddr + q->size && q->tsc > fill)
                fill = q->tsc;
        }
        if (fill && fill >= floor && fill < p->start_tsc) {
            p->start_tsc = fill;
            moved = true;
            m->patches_from_fill++;
        }
    }
    if (moved)
        sort_n(m->patches, m->npatches, sizeof(dm_patch), dm_cmp_patch);
}

/* A compiled method's new version replaces the one before (HotSpot's
 * register_method): the old version is made not entrant, a jump to
 * wrong_method_stub over its entry, before the new one is installed, and
 * every call site still calling the old version is re-pointed at the new
 * one the next time it runs (the wrong-method stub cleans the site, its
 * resolver then points it at the new version). The new version's load
 * record comes within milliseconds of its install, the watcher's records
 * of those patches up to a scan later. So the not-entrant patch applies
 * from the new version's load record, and so does a site's re-pointing from
 * the old version to the new one (no earlier than the site's previous
 * change): by then a site is at most two calls (through the wrong-method
 * stub, then its resolver) from it. Only where the old version's
 * not-entrant patch was recorded (a version still entrant keeps its
 * callers) and the new version is of a higher tier: a lower one follows a
 * deoptimization, which made the old version not entrant long before (on
 * xalan, dating such sites by the recompiled version let a retry send
 * them to a version recorded 5 s later). */
#define ENTRY_JMP_SEARCH 8              /* where in a patch a not-entrant jump may start */

/* Whether patch p writes a jump to wrong_method_stub (HotSpot's not-entrant
 * mark; JDK 25 names it "Shared Runtime wrong_method_blob"). */
bool dm_writes_not_entrant(const dm_model *m, const dm_patch *p, const uint8_t *code)
{
    if (p->owner < 0 || m->codes[p->owner].kind != DM_CODE_NMETHOD || p->made_up ||
        p->own_bytes || p->size < 5)
        return false;
    const uint8_t *b = code + p->code_offset;
    for (uint64_t at = 0; at + 5 <= p->size && at < ENTRY_JMP_SEARCH; at++) {
        if (b[at] != 0xe9)
            continue;
        int32_t rel;
        memcpy(&rel, b + at + 1, 4);
        const dm_code *t = dm_code_at(m, p->vaddr + at + 5 + (uint64_t)(int64_t)rel, p->tsc);
        if (t && t->kind == DM_CODE_STUB && t->name && strstr(t->name, "wrong_method_") &&
            !strstr(t->name, "abstract"))
            return true;
    }
    return false;
}

/* The last version of old's method of a higher tier loaded after old, at
 * or before t (or just after it, DM_NEW_VERSION_LAG) and within
 * DM_NEW_VERSION_SPAN of it; NULL if none. The last, not the first: an OSR
 * version (compiled for a loop and entered from the interpreter at its back
 * edge) is loaded too but replaces nothing, and the records do not tell it
 * apart (luindex JDK 17: `StringCoding.hasNegatives` got a C2 OSR version
 * 302M ticks and its C2 version 13M ticks before its C1 version's
 * not-entrant record; the thread entered the C1 version all that time, and
 * dated to the first, 256,837 instructions were not in place). Just after:
 * HotSpot marks the old version while it installs the new one, whose load
 * event the agent may get after the watcher's scan saw the mark; then the
 * replacement is that version, and the mark is not moved back to an OSR
 * version before it (another luindex JDK 17 recording: the C2 version's load
 * record 0.19M ticks after the mark's, the OSR version's 305M before; moved
 * there, 342,833 instructions in 45 runs were not in place). */
static const dm_code *replacing_version(const dm_model *m, const dm_code *old, uint64_t t)
{
    const dm_code *best = NULL;
    uint64_t floor = t > DM_NEW_VERSION_SPAN ? t - DM_NEW_VERSION_SPAN : 0;
    for (size_t i = 0; i < m->ncodes; i++) {
        const dm_code *c = &m->codes[i];
        if (c->kind != DM_CODE_NMETHOD || c == old || c->method_id != old->method_id ||
            c->level <= old->level ||
            c->load_tsc <= old->load_tsc || c->load_tsc > t + DM_NEW_VERSION_LAG ||
            c->load_tsc < floor)
            continue;
        if (!best || c->load_tsc > best->load_tsc)
            best = c;
    }
    return best;
}

void dm_start_at_new_version(dm_model *m, const uint8_t *code)
{
    /* replaced_by[i]: 1 + the version that replaced codes[i], if its
     * not-entrant patch was found */
    uint32_t *replaced_by = NULL;
    bool moved = false;
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!dm_writes_not_entrant(m, p, code))
            continue;
        const dm_code *old = &m->codes[p->owner];
        const dm_code *nv = replacing_version(m, old, p->tsc);
        if (!nv)
            continue;
        if (!replaced_by)
            replaced_by = g_new0(uint32_t, m->ncodes);
        replaced_by[old->index] = nv->index + 1;
        if (nv->load_tsc < p->start_tsc && nv->load_tsc >= old->start_tsc) {
            p->start_tsc = nv->load_tsc;
            p->after_new_version = true;
            moved = true;
            m->patches_at_new_version++;
        }
    }
    for (size_t i = 0; replaced_by && i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!p->call_to || p->site || p->made_up)
            continue;
        const dm_code *from = dm_code_at(m, p->call_from, p->tsc);
        const dm_code *to = dm_code_at(m, p->call_to, p->tsc);
        if (!from || !to || replaced_by[from->index] != to->index + 1 ||
            to->load_tsc >= p->start_tsc || p->tsc - to->load_tsc > DM_NEW_VERSION_SPAN)
            continue;
        uint64_t floor = site_changed_last(m, p, to->load_tsc);
        if (floor < p->start_tsc) {
            p->start_tsc = floor;
            p->after_new_version = true;
            moved = true;
            m->patches_at_new_version++;
        }
    }
    g_free(replaced_by);
    if (moved)
        sort_n(m->patches, m->npatches, sizeof(dm_patch), dm_cmp_patch);
}

/* A site resolved to an interpreted callee calls its static call stub,
 * whose fill goes on to the callee's c2i adapter. Once the callee has
 * compiled code, the adapter re-points the site at it the next time the
 * site is called (HotSpot's fixup_callers_callsite), and the watcher
 * records that up to a scan later, often much later. So a re-pointing from
 * the site's own stub (the only code of its own method a call goes to) to
 * the entry of a compiled version applies from that version's load record
 * (no earlier than the site's previous change): a site called in a loop is
 * re-pointed at its first call after the install. Within a chunk that
 * holds the load, the decoder saw the fixup itself (di_image_stub_fixup)
 * and loses the one call that made it; a chunk that starts later began
 * with the stub and followed it into the adapter, which the trace need not
 * contradict (its branches took the compiled callee's packets): on a xalan
 * JDK 17 recording, `NormalizerBase.next` calling
 * `AbstractStringBuilder.codePointAt` (113K instructions not in place) and
 * `scanStartElement` calling `scanAttribute` (100K). However late the
 * record: the site can run no other state after the install, since its
 * first call through the stub re-points it. (A bound of DM_NEW_VERSION_SPAN
 * left a xalan JDK 25 site of `XStringForFSB.toDouble`, recorded 2.36
 * billion ticks after `FloatingDecimal.readJavaFormatString` was loaded,
 * calling the stub all that time: 167K instructions.) */
void dm_start_at_callee_code(dm_model *m)
{
    bool moved = false;
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!p->call_to || p->site || p->made_up || p->owner < 0)
            continue;
        const dm_code *owner = &m->codes[p->owner];
        if (owner->kind != DM_CODE_NMETHOD || p->call_from < owner->vaddr ||
            p->call_from >= owner->vaddr + owner->size)
            continue;
        const dm_code *to = dm_code_at(m, p->call_to, p->tsc);
        if (!to || to->kind != DM_CODE_NMETHOD || p->call_to - to->vaddr >= DM_ENTRY_SPAN ||
            to->load_tsc >= p->start_tsc)
            continue;
        uint64_t floor = site_changed_last(m, p, to->load_tsc);
        if (floor < p->start_tsc) {
            p->start_tsc = floor;
            p->at_callee_code = true;
            moved = true;
            m->patches_at_callee_code++;
        }
    }
    if (moved)
        sort_n(m->patches, m->npatches, sizeof(dm_patch), dm_cmp_patch);
}
