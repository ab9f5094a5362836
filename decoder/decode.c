#include "decoder/decode.h"
#include "decoder/percpu.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
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
#include "decoder/bytecodes.h"
#include "decoder/jitpath.h"
#include "decoder/x86.h"

/* qsort, which must not be given a NULL array even when it is empty. */
static void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

#define SHADOW_MAX 1024     /* call depth tracked; deeper calls drop the oldest */
#define SHADOW_SEARCH 16    /* frames a return may skip (unwinding, lost returns) */
#define MAX_INSN_LEN 15
#define PENDING_MAX 8

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

/* ---- where an address is -------------------------------------------------- */

typedef enum ukind { U_NONE = 0, U_CODELET, U_CODE, U_BLOB, U_UNKNOWN } ukind;

typedef struct unit {
    ukind kind;
    const void *p;
} unit;

static bool same_unit(unit a, unit b)
{
    return a.kind == b.kind && a.p == b.p;
}

static unit resolve(const dm_model *m, uint64_t ip, uint64_t tsc)
{
    dm_where w = dm_lookup(m, ip, tsc);
    switch (w.kind) {
    case DM_AT_CODELET: return (unit){ U_CODELET, w.codelet };
    case DM_AT_CODE: return (unit){ U_CODE, w.code };
    case DM_AT_BLOB: return (unit){ U_BLOB, w.blob };
    default: return (unit){ U_UNKNOWN, NULL };
    }
}

/* ---- what a chunk's decoder hands on ---------------------------------------
 *
 * A stream is decoded in two layers. The first (libipt, code lookups, the
 * instructions of compiled blocks and their inline-stack records, how each
 * block ends) depends only on the trace bytes and the time, and runs on any
 * thread for one chunk of the stream at a time. It records what it found as
 * a list of ops. The second (the flow state between blocks: shadow stack,
 * pending bytecodes, inline stack position, gaps) is a small state machine
 * that replays the ops of every chunk in stream order on the calling thread
 * and makes the events. */

enum {
    OP_BLOCK = 1,     /* a block; its runs are nruns from run0 in the chunk's run array */
    OP_FORGET,        /* control flow unknown from here (resync) */
    OP_GAP_OPEN,      /* a = reason, b = error, ip = offset */
    OP_SYNC,          /* synchronized at offset ip: an open gap ends */
    OP_SEG_END,       /* end of segment reached while not synchronized */
    OP_OVERFLOW,      /* ip = offset */
    OP_ENABLE,        /* tracing (re)enabled */
    OP_EXIT,          /* follows a block that left its codelet: the unit at its end */
};

typedef struct op {
    uint64_t ip, end_ip;       /* OP_GAP_OPEN: end_ip is the libipt error */
    uint64_t tsc;              /* the decoder's time here (0: none yet) */
    uint64_t off;              /* OP_BLOCK: the stream offset the decoder stood at after it */
    const void *u;             /* the unit at ip (OP_EXIT: where control left from) */
    uint32_t ninsn;            /* OP_GAP_OPEN: the reason */
    uint32_t run0;
    uint16_t nruns;
    uint8_t type;
    uint8_t ukind;
    uint8_t xfer;
} op;

/* One stretch of a compiled block's instructions with the same inline-stack
 * record: the first instruction's address and the record's answer (its
 * address range as offsets in the version). */
typedef struct run {
    uint64_t pc;
    const dm_frame *f;
    uint32_t lo, hi;
    uint32_t d;
    bool back;                 /* entered by a jump back inside the block (libipt
                                * follows direct jumps within a block) */
} run;

typedef struct segment {
    uint64_t begin, end;
    uint64_t lost_before;      /* bytes the collector lost before this segment */
    bool loss_before;
} segment;

/* A call-site resolution under way (decoder/image.h): call, the site whose
 * call the last block ended with (the next block tells whether it went
 * into that site's resolver); site and resolver, a resolution that waits
 * for where the resolver goes on to (its made-up states); in_resolver,
 * whether the last block was the resolver's own, with no trace-off since
 * (the next block elsewhere is where it went: the VM's calls of other
 * stubs while it resolves come after a trace-on). A c2i fixup under way:
 * stub_exit, 1 + the patch that re-points a site whose static call stub's
 * jump the last block ended with (the state a made-up state stands for,
 * or the site's next recorded change), with exit_to where that jump goes
 * (0: the stub's own jump, wherever it goes); fixup, 1 + that patch while
 * the thread runs the c2i adapter there (at adapter), or the resolver a
 * fixup that cleaned the site left it at (dm_patch.at_resolver): if it
 * leaves for the VM by a call (at_call), it re-points the site. last_end:
 * the end of the last block. */
typedef struct resolution {
    uint64_t call;
    uint64_t site, resolver;
    bool in_resolver;
    uint32_t stub_exit, fixup;
    bool at_call;
    uint64_t exit_to, adapter, last_end;
    uint64_t last_site;          /* the last call site the thread went through */
} resolution;

struct strm;

typedef struct chunk {
    struct strm *strm;
    const segment *seg;
    const uint8_t *buf;        /* the stream */
    const atomic_bool *cancel; /* the stream's sink stopped */
    bool want_blocks;
    bool first, last;          /* in its segment */
    uint64_t begin;            /* where decoding starts (a PSB unless first) */
    uint64_t stop;             /* the next chunk's PSB (seg->end if last) */
    uint64_t end;              /* bytes given to libipt: the next chunk's PSB+ too */
    bool pooled;               /* handed to the pool (else decoded by the replay) */
    GArray *ops, *runs, *blocks;
    dc_stats st;               /* the first layer's counters */
    bool done;
} chunk;

/* The first layer's state: one per thread. */
#define XCACHE_SIZE 4096u
typedef struct xcache_ent {
    uint64_t ip;
    int isid;
    uint8_t x;
} xcache_ent;

/* The inline-record runs of a compiled block depend only on the version and
 * the block (jp_path and dm_inline_range are pure). A chunk's run array
 * holds them once per block the cache below remembers, and every op of
 * that block in the chunk points there: a hot loop's blocks are looked up
 * once, and their runs are neither copied again nor written to memory
 * for each pass (they were more than half of a chunk's bytes). The array
 * only grows while a chunk is decoded, so the indices stay valid across
 * retries that drop ops. */
#define RCACHE_SIZE 2048u
typedef struct rcache_ent {
    const dm_code *c;
    uint64_t ip, end_ip;
    uint32_t ninsn;
    uint32_t gen;              /* the wctx's chunk whose run array holds them */
    uint32_t run0;
    uint16_t nruns;
    bool ends_only;
} rcache_ent;

/* Where an address is at a time (dm_lookup is pure in both): the same
 * blocks come back many times between two time updates. */
#define UCACHE_SIZE 4096u
typedef struct ucache_ent {
    uint64_t ip, tsc;
    unit u;
} ucache_ent;

typedef struct wctx {
    const dm_model *m;
    di_cache *cache;
    const dc_trace_info *info;
    struct pt_image_section_cache *iscache;
    di_image *im;              /* the running pass's (for blocks of isid 0) */
    jp_cache *jp;
    const atomic_bool *cancel;
    uint64_t tsc;
    uint64_t off;              /* the stream offset after the newest block */
    resolution res;
    uint64_t retries, retries_kept;   /* this chunk's (see retry) */
    uint64_t fixup_calls;             /* ... of the kept, a call's c2i fixup */
    GHashTable *failed;               /* this chunk's retries that did not help */
    xcache_ent xc[XCACHE_SIZE];
    rcache_ent rc[RCACHE_SIZE];
    uint32_t gen;              /* chunks decoded (rcache_ent.gen) */
    ucache_ent uc[UCACHE_SIZE];
} wctx;

static unit wresolve(wctx *w, uint64_t ip)
{
    ucache_ent *e = &w->uc[((ip * 0x9E3779B97F4A7C15ull) >> 40) & (UCACHE_SIZE - 1)];
    if (e->ip == ip && e->tsc == w->tsc && e->u.kind != U_NONE)
        return e->u;
    e->ip = ip;
    e->tsc = w->tsc;
    e->u = resolve(w->m, ip, w->tsc);
    return e->u;
}

static void problem(dc_stats *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(dc_stats *st, const char *fmt, ...)
{
    if (!st->problems++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->problem, sizeof st->problem, fmt, ap);
        va_end(ap);
    }
}

/* ---- how a block ends ----------------------------------------------------------- */

/* The transfer at the end of a block. libipt reports the last instruction's
 * class only when it decoded it (blocks replayed from its block cache say
 * ptic_error) and does not tell direct from indirect jumps, which matters
 * here: HotSpot's dispatch is an indirect jump, possibly to the template
 * that just ran. So the last instruction is classified from its bytes
 * (remembered per section and address: sections never change). */
static xfer block_end(wctx *w, const struct pt_block *b)
{
    switch (b->iclass) {
    case ptic_call: return X_CALL;
    case ptic_return: return X_RET;
    case ptic_cond_jump: return X_COND;
    case ptic_far_call:
    case ptic_far_return:
    case ptic_far_jump: return X_FAR;
    case ptic_other: return X_OTHER;
    default: break;   /* ptic_jump (direct or not), ptic_error (not provided) */
    }
    uint8_t buf[MAX_INSN_LEN];
    int n;
    if (b->truncated) {
        n = b->size < sizeof buf ? b->size : (int)sizeof buf;
        memcpy(buf, b->raw, (size_t)n);
    } else {
        uint64_t h = (b->end_ip ^ (b->end_ip >> 13) ^ ((uint64_t)b->isid * 0x9E3779B1u));
        xcache_ent *e = &w->xc[h & (XCACHE_SIZE - 1)];
        if (e->isid == b->isid && e->ip == b->end_ip && e->isid > 0)
            return (xfer)e->x;
        n = b->isid > 0 ? pt_iscache_read(w->iscache, buf, sizeof buf, b->isid, b->end_ip)
            : w->im     ? di_image_read(w->im, buf, sizeof buf, b->end_ip)
                        : -pte_nomap;
        xfer x = n <= 0 ? (b->iclass == ptic_jump ? X_JMP_INDIRECT : X_OTHER)
                        : x86_classify(buf, (size_t)n, NULL, NULL);
        if (b->isid > 0) {
            e->ip = b->end_ip;
            e->isid = b->isid;
            e->x = (uint8_t)x;
        }
        return x;
    }
    if (n <= 0)
        return b->iclass == ptic_jump ? X_JMP_INDIRECT : X_OTHER;
    return x86_classify(buf, (size_t)n, NULL, NULL);
}

/* ---- the first layer: a block's context-free facts --------------------------- */

static op *push_op(chunk *k, uint8_t type, uint64_t tsc)
{
    guint n = k->ops->len;
    g_array_set_size(k->ops, n + 1);   /* amortized: the array doubles */
    op *o = &g_array_index(k->ops, op, n);
    memset(o, 0, sizeof *o);
    o->type = type;
    o->tsc = tsc;
    return o;
}

/* An address as an offset in version c (records outside it, from damaged
 * metadata, are clamped). */
static uint32_t version_offset(const dm_code *c, uint64_t a)
{
    if (a <= c->vaddr)
        return 0;
    return a - c->vaddr > UINT32_MAX ? UINT32_MAX : (uint32_t)(a - c->vaddr);
}

static void add_positions(wctx *w, chunk *k, op *o, const dm_code *c, const uint64_t *pcs,
                          size_t n)
{
    uint64_t lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        bool back = i && pcs[i] <= pcs[i - 1];
        if (i && !back && pcs[i] >= lo && pcs[i] < hi)
            continue;          /* same record as the run before */
        run r = { .pc = pcs[i], .back = back };
        r.d = dm_inline_range(w->m, c, pcs[i], &r.f, &lo, &hi);
        r.lo = version_offset(c, lo);
        r.hi = version_offset(c, hi);
        g_array_append_val(k->runs, r);
        o->nruns++;
    }
}

static void analyze_block(wctx *w, chunk *k, const struct pt_block *b)
{
    k->st.blocks++;
    k->st.insns += b->ninsn;
    unit u = wresolve(w, b->ip);
    unit exitu = u;
    if (u.kind == U_CODELET && (b->end_ip < ((const dm_codelet *)u.p)->begin ||
                                b->end_ip >= ((const dm_codelet *)u.p)->end))
        exitu = wresolve(w, b->end_ip);
    xfer end = block_end(w, b);
    op *o = push_op(k, OP_BLOCK, w->tsc);
    o->off = w->off;
    o->ip = b->ip;
    o->end_ip = b->end_ip;
    o->ninsn = b->ninsn;
    o->u = u.p;
    o->ukind = (uint8_t)u.kind;
    o->xfer = (uint8_t)end;
    if (exitu.p != u.p || exitu.kind != u.kind) {
        op *eo = push_op(k, OP_EXIT, w->tsc);
        eo->u = exitu.p;
        eo->ukind = (uint8_t)exitu.kind;
        o = &g_array_index(k->ops, op, k->ops->len - 2);   /* (the array may have moved) */
    }
    if (u.kind == U_CODE && ((const dm_code *)u.p)->kind != DM_CODE_STUB) {
        const dm_code *c = u.p;
        uint64_t h = (b->ip * 0x9E3779B97F4A7C15ull) ^ (b->end_ip >> 1) ^ b->ninsn;
        rcache_ent *e = &w->rc[(h >> 20) & (RCACHE_SIZE - 1)];
        if (e->gen == w->gen && e->c == c && e->ip == b->ip && e->end_ip == b->end_ip &&
            e->ninsn == b->ninsn) {
            o->run0 = e->run0;
            o->nruns = e->nruns;
            if (e->ends_only)
                k->st.jit_blocks_ends_only++;
        } else {
            o->run0 = k->runs->len;
            const uint64_t *path;
            bool ends_only = false;
            size_t n = b->ninsn > 2 ? jp_path(w->jp, c, b->ip, b->end_ip, b->ninsn, &path) : 0;
            if (n) {
                add_positions(w, k, o, c, path, n);
            } else {
                if (b->ninsn > 2) {
                    k->st.jit_blocks_ends_only++;
                    ends_only = true;
                }
                uint64_t ends[2] = { b->ip, b->end_ip };
                size_t ne = b->end_ip != b->ip && b->end_ip >= c->vaddr &&
                                    b->end_ip - c->vaddr < c->size ? 2 : 1;
                add_positions(w, k, o, c, ends, ne);
            }
            *e = (rcache_ent){ .c = c, .ip = b->ip, .end_ip = b->end_ip, .ninsn = b->ninsn,
                               .gen = w->gen, .run0 = o->run0, .nruns = o->nruns,
                               .ends_only = ends_only };
        }
    }
    if (k->blocks)
        g_array_append_val(k->blocks, *b);
}

static void op_gap(wctx *w, chunk *k, dc_gap_reason reason, int error, uint64_t offset)
{
    op *o = push_op(k, OP_GAP_OPEN, w->tsc);
    o->ninsn = (uint32_t)reason;
    o->end_ip = (uint64_t)(int64_t)error;
    o->ip = offset;
}

static void op_forget(wctx *w, chunk *k)
{
    push_op(k, OP_FORGET, w->tsc);
    w->res = (resolution){ 0 };
}

static uint64_t cur_time(struct pt_block_decoder *d, uint64_t fallback)
{
    uint64_t t = 0;
    uint32_t lm, lc;
    if (pt_blk_time(d, &t, &lm, &lc) < 0 || !t)
        return fallback;
    return t;
}

/* ---- decoding again with the code recorded next ---------------------------
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
 * it decodes further than the first attempt; the patches it applied stay in
 * the image ahead of their record time until the chunk ends, like call-site
 * resolutions. */

#define RETRY_BUDGET 256      /* decoding attempts per chunk */
#define SPEC_MAX 64           /* patches (pieces of records, model.h) one attempt applies */
#define RETRY_GROUPS 6        /* attempts per error (next_versions) */
#define MADE_UP_TRIES 4       /* more attempts per error: made-up states (with_made_up_states) */
#define FIXUP_TRIES 2         /* attempts per error first: a call's c2i fixup (with_fixup_states) */
#define RETRY_STAGES 8        /* kept retries from one checkpoint whose patches add up */
#define ENTRY_SPAN DM_ENTRY_SPAN
#define RETRY_SCAN_BACK 256   /* bytes before a PSB+ event's offset to find its PSB */

/* A point a fresh decoder synchronized at the PSB at `psb` continues from
 * exactly as the running one does (a chunk boundary could be here). */
typedef struct ckpt {
    uint64_t psb;             /* offset in the decoder's bytes */
    uint64_t sync_off;        /* in the segment's: where a retry from it synchronizes */
    uint64_t tsc;
    guint nops, nblocks;
    guint ndis;               /* trace-offs seen before it (pass.dis) */
    size_t nearly;            /* image's early log length */
    resolution res;
    dc_stats st;
} ckpt;

/* Patches an attempt applies once `after` trace-offs have been decoded. */
typedef struct spec {
    uint32_t idx[SPEC_MAX];
    size_t n;
    uint64_t after;
    bool done;
    int family;               /* nonzero: alternatives of one another (with_made_up_states) */
    bool fixup;               /* a call's state before its c2i fixup (with_fixup_states) */
} spec;

/* One decoder's run over a chunk. A decoder reads the segment's bytes, or
 * a resumption's (see resume_at_branch): a made-up PSB+ followed by a
 * stretch of the segment, whose offsets are the segment's minus `shift`. */
typedef struct pass {
    struct pt_block_decoder *dec;
    di_image *im;
    const uint8_t *base, *base_end; /* the bytes the decoder reads */
    int64_t shift;            /* segment offset = decoder offset + shift */
    int status;
    bool boundary;            /* the next chunk's PSB+ has been read */
    uint64_t err_off;         /* where it failed (offset in the segment) */
    uint64_t disables;        /* trace-offs decoded in this run */
    GArray *dis;              /* guint: ops->len at each trace-off */
    ckpt ck[2];               /* the last two checkpoints, newest last */
    int nck;
    /* A retry's patches (retry): each stage applies once its trace-offs
     * have been decoded. A pass that is a kept retry holds them, with the
     * checkpoint it started from, so that a retry from the same checkpoint
     * for a later error keeps them and adds its own. */
    spec stages[RETRY_STAGES];
    int nstages;
    uint64_t stages_psb;
} pass;

static void pass_free(pass *ps)
{
    if (ps->dec)
        pt_blk_free_decoder(ps->dec);
    di_image_free(ps->im);
    if (ps->dis)
        g_array_free(ps->dis, TRUE);
    memset(ps, 0, sizeof *ps);
}

static bool is_psb_at(const uint8_t *p, const uint8_t *end)
{
    if (end - p < 16)
        return false;
    for (int i = 0; i < 16; i += 2)
        if (p[i] != 0x02 || p[i + 1] != 0x82)
            return false;
    return true;
}

static void checkpoint(wctx *w, chunk *k, pass *ps, uint64_t psb)
{
    if (ps->nck && ps->ck[ps->nck - 1].psb >= psb)
        return;
    if (ps->nck == 2) {
        ps->ck[0] = ps->ck[1];
        ps->nck = 1;
    }
    ckpt *c = &ps->ck[ps->nck++];
    c->psb = psb;
    c->sync_off = (uint64_t)((int64_t)psb + ps->shift);
    c->tsc = w->tsc;
    c->nops = k->ops->len;
    c->nblocks = k->blocks ? k->blocks->len : 0;
    c->ndis = ps->dis->len;
    di_image_early_log(ps->im, &c->nearly);
    c->res = w->res;
    c->st = k->st;
}

/* Call-site resolutions (model.h) as block blk is decoded: if the thread
 * went through a site's call to the stub its pending patch replaced, the
 * runtime patches the site now; where that depends on where the resolver
 * goes on to, the site's new state is chosen once the thread gets there.
 * 0, or -1 on a libipt error. */
static int follow_resolution(wctx *w, di_image *im, const struct pt_block *blk)
{
    resolution *r = &w->res;
    int rc = 0;
    unit u = wresolve(w, blk->ip);
    uint32_t at_resolver;
    if (r->stub_exit && (!r->exit_to || r->exit_to == blk->ip)) {
        r->fixup = r->stub_exit;
        r->adapter = blk->ip;
    } else if ((at_resolver = di_image_resolver_state(im, r->last_end, blk->ip)) != UINT32_MAX) {
        /* the site a fixup cleaned, at its resolver: the record applies
         * when the resolver leaves for the VM */
        r->fixup = w->m->patches[at_resolver].state_of + 1;
        r->adapter = blk->ip;
    } else if (r->fixup && !same_unit(u, wresolve(w, r->adapter))) {
        r->fixup = 0;            /* past the adapter */
    }
    /* The adapter's fixup is a call into the VM. A trace-off elsewhere
     * (at a branch: the decoder's path had left the thread's) is none. */
    r->at_call = r->fixup && block_end(w, blk) == X_CALL;
    if (r->site) {
        if (same_unit(u, wresolve(w, r->resolver))) {
            r->in_resolver = true;
        } else if (r->in_resolver) {
            rc = di_image_resolve_to(im, r->site, r->resolver, blk->ip);
            r->site = r->resolver = 0;
            r->in_resolver = false;
        }
    }
    if (r->last_site && u.kind == U_CODE && ((const dm_code *)u.p)->ic_miss) {
        if (di_image_ic_miss(im, r->last_site) < 0)
            rc = -1;
        r->last_site = 0;
    }
    if (r->call) {
        int got = di_image_resolve_call(im, r->call, blk->ip);
        if (got != 0 && r->site && r->site != r->call) {
            /* a resolution whose resolver's jump went unseen: its record */
            if (di_image_resolve_to(im, r->site, r->resolver, 0) < 0)
                got = -1;
            r->site = r->resolver = 0;
            r->in_resolver = false;
        }
        if (got == 2)
            *r = (resolution){ .site = r->call, .resolver = blk->ip, .in_resolver = true };
        rc = got < 0 ? got : rc;
    }
    uint32_t exit = di_image_stub_exit(im, blk->end_ip);
    r->stub_exit = 0;
    if (exit != UINT32_MAX) {
        const dm_patch *st = &w->m->patches[exit];
        r->stub_exit = st->then_state ? st->then_state : st->state_of + 1;
        r->exit_to = st->stub_to;
    } else if ((exit = di_image_stub_fixup(im, r->last_end, blk->ip, blk->end_ip)) != UINT32_MAX) {
        r->stub_exit = exit + 1;
        r->exit_to = 0;
    }
    r->call = di_cache_call_site(w->cache, blk->end_ip) ? blk->end_ip : 0;
    if (r->call)
        r->last_site = r->call;
    r->last_end = blk->end_ip;
    return rc < 0 ? -1 : 0;
}

/* The thread leaves the traced code for the VM. From the c2i adapter a
 * site's static call stub went to, that is HotSpot's fixup of the calling
 * site (the callee has compiled code now): the site's recorded state
 * applies. 0, or -1 on a libipt error. */
static int leave_for_vm(wctx *w, di_image *im)
{
    uint32_t fx = w->res.at_call ? w->res.fixup : 0;
    w->res.fixup = 0;
    return fx && di_image_apply_early(im, fx - 1) < 0 ? -1 : 0;
}

/* Decodes from where ps->dec stands until an error, the end of the trace or
 * the next chunk's PSB+ (ps->boundary). */
static void decode_run(wctx *w, chunk *k, pass *ps, uint64_t stop)
{
    const uint8_t *seg = ps->base, *seg_end = ps->base_end;
    struct pt_block_decoder *dec = ps->dec;
    di_image *im = ps->im;
    w->im = im;
    int status = ps->status;
    dc_cycle_guard cycle = { 0 };
    char err[512];
    for (;;) {
        uint64_t psb = UINT64_MAX;
        while (status & pts_event_pending) {
            struct pt_event ev;
            status = pt_blk_event(dec, &ev, sizeof ev);
            if (status < 0)
                break;
            if (ev.has_tsc && ev.tsc)
                w->tsc = ev.tsc;
            if (ev.status_update && !ps->boundary) {
                uint64_t off = 0;
                pt_blk_get_offset(dec, &off);
                ps->boundary = (uint64_t)((int64_t)off + ps->shift) > stop;
                /* the PSB whose header this is */
                for (uint64_t back = 0; back <= RETRY_SCAN_BACK && back <= off; back++)
                    if (is_psb_at(seg + off - back, seg_end)) {
                        psb = off - back;
                        break;
                    }
            }
            switch (ev.type) {
            case ptev_enabled:
                w->res.in_resolver = false;
                if (!ev.status_update) {
                    k->st.enables++;
                    push_op(k, OP_ENABLE, w->tsc);
                }
                break;
            case ptev_disabled:
            case ptev_async_disabled:
                k->st.disables++;
                if (!ev.status_update && leave_for_vm(w, im) < 0)
                    problem(&k->st, "%s: cannot update the code image at tsc %" PRIu64,
                            w->m->code_path, w->tsc);
                if (!ev.status_update) {
                    ps->disables++;
                    guint at = k->ops->len;
                    g_array_append_val(ps->dis, at);
                }
                break;
            case ptev_overflow: {
                uint64_t off = 0;
                pt_blk_get_offset(dec, &off);
                op *o = push_op(k, OP_OVERFLOW, w->tsc);
                o->ip = k->seg->begin + (uint64_t)((int64_t)off + ps->shift);
                w->res = (resolution){ 0 };
                break;
            }
            default:
                break;
            }
        }
        if (ps->boundary || status < 0 || atomic_load_explicit(w->cancel, memory_order_relaxed))
            break;
        if (psb != UINT64_MAX)
            checkpoint(w, k, ps, psb);
        uint64_t t = cur_time(dec, w->tsc);
        if (t > w->tsc)
            w->tsc = t;
        if (w->tsc >= di_image_next_change(im)) {
            int rc = di_image_advance(im, w->tsc);
            if (rc == 1)
                pt_blk_set_image(dec, di_image_get(im));
            else if (rc < 0)
                problem(&k->st, "%s: cannot update the code image at tsc %" PRIu64,
                        w->m->code_path, w->tsc);
        }
        for (int si = 0; si < ps->nstages; si++) {
            spec *sp = &ps->stages[si];
            if (sp->done || ps->disables < sp->after)
                continue;
            sp->done = true;
            for (size_t i = 0; i < sp->n; i++)
                if (di_image_apply_early(im, sp->idx[i]) < 0) {
                    snprintf(err, sizeof err, "%s: cannot update the code image at tsc %" PRIu64,
                             w->m->code_path, w->tsc);
                    problem(&k->st, "%s", err);
                }
        }
        struct pt_block blk;
        memset(&blk, 0, sizeof blk);
        status = pt_blk_next(dec, &blk, sizeof blk);
        t = cur_time(dec, w->tsc);
        if (t > w->tsc)
            w->tsc = t;
        if (blk.ninsn) {
            uint64_t off = 0;
            pt_blk_get_offset(dec, &off);
            w->off = k->seg->begin + (uint64_t)((int64_t)off + ps->shift);
            if (!blk.speculative && follow_resolution(w, im, &blk) < 0)
                problem(&k->st, "%s: cannot update the code image at tsc %" PRIu64,
                        w->m->code_path, w->tsc);
            analyze_block(w, k, &blk);
        }
        if (status >= 0 && dc_cycle_stuck(&cycle, dec, &blk))
            status = -pte_bad_image;
        if (status < 0)
            break;
    }
    ps->status = status;
    ps->err_off = 0;
    if (status < 0) {
        uint64_t off = 0;
        pt_blk_get_offset(dec, &off);
        ps->err_off = (uint64_t)((int64_t)off + ps->shift);
    }
    w->im = NULL;              /* the pass may be freed next */
}

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
 * of ops[from, to) was decoded, over that block's bytes, that a retry of ps
 * from ck would not start with (retry_starts_with), appended to
 * cand[*nc..max). */
static void version_candidates(wctx *w, chunk *k, const pass *ps, const ckpt *ck, guint from,
                               guint to, bool entries, uint32_t *cand, size_t *nc, size_t max)
{
    const op *ops = (const op *)(void *)k->ops->data;
    for (guint i = from; i < to && *nc < max; i++) {
        const op *o = &ops[i];
        if (o->type != OP_BLOCK)
            continue;
        if (entries) {
            const dm_code *c = dm_code_at(w->m, o->ip, o->tsc);
            if (!c || c->kind != DM_CODE_NMETHOD || o->ip - c->vaddr >= ENTRY_SPAN)
                continue;
        }
        uint32_t got[4];
        size_t n = di_cache_patches_in(w->cache, o->ip, o->end_ip + MAX_INSN_LEN, o->tsc, got, 4);
        for (size_t j = 0; j < n && *nc < max; j++) {
            if (retry_starts_with(ps, ck, got[j]))
                continue;
            bool dup = false;
            for (size_t q = 0; q < *nc && !dup; q++)
                dup = cand[q] == got[j];
            if (!dup)
                cand[(*nc)++] = got[j];
        }
    }
}

/* Adds to sp the patches over [lo, hi) (of code version owner, unless
 * INT64_MIN) recorded within span ticks of time t. A watcher scan's records
 * follow each other closely (SCAN_SPAN), scans are tens of milliseconds
 * apart. */
#define SCAN_SPAN 5000000ull       /* TSC ticks */
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
 * comes more than LOAD_LAG after now. The agent hears of a method's code
 * when HotSpot posts its load, which on JDK 17 may be tens of millions of
 * ticks after the code first ran (38M on a luindex recording). A retry that
 * points the call at code loaded much later sends it into whatever the
 * address held before. On luindex JDK 25 the re-pointing of a C1
 * `BlockTreeTermsWriter$TermsWriter.pushTerm` site to C1
 * `BytesRefBuilder.append`, dated back to the site's resolution to its
 * static call stub, went into a retry with it 104M ticks before that code's
 * load (the attempt got one byte further), and the decoder lost the thread
 * at each call of the site until then. */
#define LOAD_LAG 50000000ull     /* TSC ticks */
static bool callee_loaded_long_after(const dm_model *m, const dm_patch *p, uint64_t now)
{
    if (!p->call_to)
        return false;
    const dm_code *callee = dm_code_at(m, p->call_to, p->tsc);
    return callee && callee->kind == DM_CODE_NMETHOD && callee->load_tsc > now + LOAD_LAG;
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
        if ((!p->after_new_version || p->start_tsc <= now + SCAN_SPAN) &&
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

/* Up to want groups of cand[0..nc) into g[0..), by record time (a watcher
 * scan), earliest first, skipping the times of g[0..ng) already made;
 * each group also gets the other patches of its code versions with the
 * same record time (a call re-pointed at a stub of its own method comes
 * with the stub's fill) and the same scan's patches of the stub a call it
 * re-points now reaches (an inline-cache transition stub filled for it;
 * now: the time the retry starts from), less the patches not true yet at
 * now (drop_not_yet_caused). The number of groups in g afterwards. */
static int version_groups(wctx *w, const uint32_t *cand, size_t nc, spec *g, int ng, int want,
                          uint64_t now)
{
    const dm_model *m = w->m;
    uint64_t last = 0;
    for (int made = 0; made < want;) {
        uint64_t t = UINT64_MAX;
        for (size_t q = 0; q < nc; q++) {
            uint64_t st = m->patches[cand[q]].start_tsc;
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
        for (size_t q = 0; q < nc && sp->n < SPEC_MAX; q++)
            if (m->patches[cand[q]].start_tsc == t)
                sp->idx[sp->n++] = cand[q];
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
             * gained, "Not done yet" in README.md). */
            uint64_t to = p->site ? p->new_target : p->call_to;
            const dm_code *callee = to ? dm_code_at(m, to, now) : NULL;
            uint32_t first;
            if (!to || (callee && callee->kind == DM_CODE_NMETHOD &&
                        (int64_t)callee->index != p->owner) ||
                !di_cache_patches_in(w->cache, to, to + CALLEE_STUB_SPAN, now, &first, 1))
                continue;
            if (m->patches[first].start_tsc + SCAN_SPAN >= t &&
                m->patches[first].start_tsc <= t + SCAN_SPAN)
                same_scan(w, sp, t, SCAN_SPAN, to, to + CALLEE_STUB_SPAN, INT64_MIN);
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
static void nomap_target_fill(wctx *w, chunk *k, const pass *ps, const ckpt *ck, guint from,
                              guint to, uint32_t *cand, size_t *nc, size_t max)
{
    if (ps->status != -pte_nomap || *nc >= max)
        return;
    uint64_t end = last_block_end(k, from, to), target;
    uint8_t buf[MAX_INSN_LEN];
    size_t n = 0;           /* the image's sections may split the instruction */
    for (int got; end && n < sizeof buf; n += (size_t)got)
        if ((got = di_image_read(ps->im, buf + n, sizeof buf - n, end + n)) <= 0)
            break;
    uint32_t first;
    if (n && x86_direct_target(buf, n, end, &target) &&
        di_cache_patches_in(w->cache, target, target + CALLEE_STUB_SPAN, ck->tsc, &first, 1) &&
        !retry_starts_with(ps, ck, first))
        cand[(*nc)++] = first;
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
static int next_versions(wctx *w, chunk *k, const pass *ps, const ckpt *ck, guint from,
                         guint to, spec g[RETRY_GROUPS])
{
    const uint64_t now = ck->tsc;
    uint32_t cand[64];
    size_t nc = 0;
    version_candidates(w, k, ps, ck, from, to, false, cand, &nc, 64);
    int ng = version_groups(w, cand, nc, g, 0, 2, now);
    const op *ops = (const op *)(void *)k->ops->data;
    guint near = to, nb = 0;
    while (near > from && nb < NEAR_BLOCKS)
        nb += ops[--near].type == OP_BLOCK;
    nc = 0;
    version_candidates(w, k, ps, ck, near, to, false, cand, &nc, 64);
    nomap_target_fill(w, k, ps, ck, near, to, cand, &nc, 64);
    ng = version_groups(w, cand, nc, g, ng, 2, now);
    nc = 0;
    version_candidates(w, k, ps, ck, from, to, true, cand, &nc, 64);
    return version_groups(w, cand, nc, g, ng, RETRY_GROUPS - ng, now);
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
static int with_made_up_states(wctx *w, const chunk *k, guint from, guint to, spec *g, int ng,
                               int max, uint64_t now)
{
    const dm_model *m = w->m;
    for (int gi = 0; gi < ng && ng < max; gi++) {
        int made = 0, family = gi + 1;
        const spec base = g[gi];
        for (size_t q = 0; q < base.n && ng < max; q++) {
            const dm_patch *p = &m->patches[base.idx[q]];
            if (p->nstates && !calls_at(k, from, to, p->site ? p->site : p->call_at))
                continue;
            for (uint32_t s = p->first_state; s < p->first_state + p->nstates && ng < max; s++) {
                spec alt = base;
                alt.idx[q] = s;
                uint64_t stub = m->patches[s].new_target;
                uint32_t first;
                if (!m->patches[s].direct &&
                    di_cache_patches_in(w->cache, stub, stub + CALLEE_STUB_SPAN, now, &first, 1) &&
                    m->patches[first].start_tsc <= p->tsc + SCAN_SPAN)
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
                if (m->patches[s].direct && same_entry_states(m, &alt, q) && ng < max) {
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
static int with_fixup_states(wctx *w, const chunk *k, const pass *ps, guint from, guint to,
                             spec *g, int ng, int max, uint64_t now)
{
    const dm_model *m = w->m;
    const op *ops = (const op *)(void *)k->ops->data;
    guint seen = 0;
    for (guint i = to; i-- > from && seen < FIXUP_LOOKBACK && ng < max;) {
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

/* One attempt of retry: decodes from checkpoint ck again with the patches
 * of the retries kept from it, then sp's (applied once `after` trace-offs
 * have been decoded), into np (its ops after k's). false if no decoder
 * could be made (np is freed). Each attempt takes one of the budget's. */
static bool attempt(wctx *w, chunk *k, const pass *ps, const ckpt *ck, uint64_t stop,
                    const struct pt_config *cfg, di_store *store, const uint32_t *early,
                    spec *sp, guint after, int *budget, pass *np)
{
    char err[512];
    (*budget)--;
    w->retries++;
    sp->after = after;
    *np = (pass){ .dis = g_array_new(FALSE, FALSE, sizeof(guint)), .base = ps->base,
                  .base_end = ps->base_end, .shift = ps->shift };
    k->st = ck->st;
    w->tsc = ck->tsc;
    w->res = ck->res;
    np->dec = pt_blk_alloc_decoder(cfg);
    np->im = np->dec ? di_image_new_in(w->cache, store, ck->tsc, early, ck->nearly, err,
                                       sizeof err)
                     : NULL;
    if (!np->im || (np->status = pt_blk_sync_set(np->dec, ck->psb)) < 0) {
        pass_free(np);
        return false;
    }
    pt_blk_set_image(np->dec, di_image_get(np->im));
    op *so = push_op(k, OP_SYNC, w->tsc);
    so->ip = k->seg->begin + ck->sync_off;
    checkpoint(w, k, np, ck->psb);
    if (ps->stages_psb == ck->psb && ps->nstages) {
        np->nstages = ps->nstages < RETRY_STAGES ? ps->nstages : RETRY_STAGES - 1;
        memcpy(np->stages, ps->stages, (size_t)np->nstages * sizeof *np->stages);
    }
    np->stages[np->nstages++] = *sp;
    np->stages_psb = ck->psb;
    for (int si = 0; si < np->nstages; si++)
        np->stages[si].done = false;
    decode_run(w, k, np, stop);
    return true;
}

/* Drops attempt np: k's ops and blocks back to their lengths before (the
 * runs stay: rcache_ent). */
static void drop_attempt(chunk *k, pass *np, guint nops, guint nblocks)
{
    g_array_set_size(k->ops, nops);
    if (k->blocks)
        g_array_set_size(k->blocks, nblocks);
    pass_free(np);
}

/* Attempt np replaces run ps: its ops replace the old ones after checkpoint
 * ck (k's ops and blocks had orig_* before the attempt); its checkpoints
 * and trace-off positions move down with them. */
static void keep_attempt(chunk *k, pass *ps, pass *np, const ckpt *ck, guint orig_ops,
                         guint orig_blocks)
{
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
    pass_free(ps);
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
static bool with_next_site(wctx *w, chunk *k, pass *ps, const ckpt *ck, uint64_t stop,
                           const struct pt_config *cfg, di_store *store, const uint32_t *early,
                           spec *sp, guint ndis, int *budget, guint orig_ops,
                           guint orig_blocks, uint64_t beat)
{
    pass np;
    if (*budget <= 0 || !attempt(w, k, ps, ck, stop, cfg, store, early, sp, ndis, budget, &np))
        return false;
    guint from = orig_ops;
    for (guint q = np.dis->len; q-- > 0;)
        if (g_array_index(np.dis, guint, q) >= orig_ops) {
            from = g_array_index(np.dis, guint, q);
            break;
        }
    spec next[RETRY_GROUPS];
    int nn = next_versions(w, k, &np, ck, from, k->ops->len, next);
    drop_attempt(k, &np, orig_ops, orig_blocks);
    for (int j = 0; j < nn && j < NEXT_SITE_GROUPS && *budget > 0; j++) {
        spec both = *sp;
        both.family = 0;
        for (size_t q = 0; q < next[j].n && both.n < SPEC_MAX; q++) {
            size_t r = 0;
            while (r < both.n && both.idx[r] != next[j].idx[q])
                r++;
            if (r == both.n)
                both.idx[both.n++] = next[j].idx[q];
        }
        if (!attempt(w, k, ps, ck, stop, cfg, store, early, &both, ndis, budget, &np))
            continue;
        if (progress(&np) > beat) {
            keep_attempt(k, ps, &np, ck, orig_ops, orig_blocks);
            return true;
        }
        drop_attempt(k, &np, orig_ops, orig_blocks);
    }
    return false;
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
    const ckpt ck = ps->ck[ps->nck - 1];
    guint ndis = ps->dis->len - ck.ndis;
    guint from = ndis ? g_array_index(ps->dis, guint, ps->dis->len - 1) : ck.nops;
    spec g[FIXUP_TRIES + RETRY_GROUPS + MADE_UP_TRIES];
    int ng = with_fixup_states(w, k, ps, from, orig_ops, g, 0, FIXUP_TRIES, w->tsc);
    ng += next_versions(w, k, ps, &ck, from, orig_ops, g + ng);
    ng = with_made_up_states(w, k, from, orig_ops, g, ng,
                             FIXUP_TRIES + RETRY_GROUPS + MADE_UP_TRIES, ck.tsc);
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
     * site's call (moved_on), for with_next_site if no group gets further */
    int moved = -1;
    for (int gi = 0; gi < ng && !kept && *budget > 0; gi++) {
        int pick = gi;
        pass np;
        bool decoded = false;
        if (g[gi].family) {
            /* a family: each member is tried, and the one that gets
             * furthest is decoded again below (of equals the last: the
             * record, where the trace does not tell them apart); the first
             * that decodes to its end is kept as it is */
            int end = gi;
            while (end < ng && g[end].family == g[gi].family)
                end++;
            uint64_t best = 0;
            bool best_moved = false;
            int first_moved = -1;
            pick = -1;
            for (int fi = gi; fi < end && *budget > 0 && !decoded; fi++) {
                if (!attempt(w, k, ps, &ck, stop, cfg, store, early, &g[fi], ndis, budget, &np))
                    continue;
                uint64_t got = progress(&np);
                if (got == UINT64_MAX) {
                    decoded = true;
                    pick = fi;
                    break;
                }
                bool mv = moved_on(got, last_site_call(w, k, orig_ops, k->ops->len),
                                   ps->err_off, site_call);
                drop_attempt(k, &np, orig_ops, orig_blocks);
                if (mv && first_moved < 0)
                    first_moved = fi;
                /* of equals the last (the record, where the trace does not
                 * tell them apart), but a fixup's first (it re-points the
                 * site; cleaning it needs a call through the resolver) */
                if (pick < 0 || got > best || (got == best && !g[fi].fixup)) {
                    best = got;
                    best_moved = mv;
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
                with_next_site(w, k, ps, &ck, stop, cfg, store, early, &g[first_moved], ndis,
                               budget, orig_ops, orig_blocks, best)) {
                kept = true;
                break;
            }
            if (!decoded && (pick < 0 || best <= ps->err_off))
                continue;
        }
        if (!decoded &&
            !attempt(w, k, ps, &ck, stop, cfg, store, early, &g[pick], ndis, budget, &np))
            continue;
        if (progress(&np) > ps->err_off) {
            keep_attempt(k, ps, &np, &ck, orig_ops, orig_blocks);
            kept = true;
            w->fixup_calls += g[pick].fixup;
        } else {
            if (moved < 0 && moved_on(progress(&np), last_site_call(w, k, orig_ops, k->ops->len),
                                      ps->err_off, site_call))
                moved = pick;
            drop_attempt(k, &np, orig_ops, orig_blocks);
        }
    }
    if (!kept && moved >= 0)
        kept = with_next_site(w, k, ps, &ck, stop, cfg, store, early, &g[moved], ndis, budget,
                              orig_ops, orig_blocks, ps->err_off);
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
static void retry_while_it_helps(wctx *w, chunk *k, pass *ps, uint64_t stop,
                                 const struct pt_config *cfg, di_store *store, int *budget)
{
    while (ps->status < 0 && ps->status != -pte_eos && !ps->boundary && ps->err_off < stop &&
           !atomic_load_explicit(w->cancel, memory_order_relaxed) &&
           retry(w, k, ps, stop, cfg, store, budget))
        ;
}

/* ---- resuming at the next branch target ------------------------------------
 *
 * Where decoding fails for good (code the metadata does not have, or a code
 * version the trace contradicts), the next PSB may be kilobytes away. The
 * packets before it still say where the thread went: the first TIP or
 * TIP.PGE after the failure holds the target of an indirect branch or the
 * address where tracing resumed, and the packets after it describe the flow
 * from there on. Its full address follows from the IP packets since the last
 * PSB (an IP packet is compressed against the one before). libipt
 * synchronizes only at a PSB, so it is given a PSB+ of our own (TSC,
 * MODE.Exec, FUP at that address) followed by the stream's bytes after that
 * packet, up to the end of the next PSB+: there the segment's decoder takes
 * over, as at a chunk boundary. The flow before that target stays unknown
 * (a gap, its state forgotten); what follows is decoded as the stream has it. */

enum { RESUME_NONE, RESUME_AT_PSB, RESUME_EOS, RESUME_END };

static uint64_t psb_header_end(const uint8_t *buf, uint64_t begin, uint64_t end, uint64_t off);

typedef struct resume_point {
    bool found;
    uint64_t tip_end;         /* segment offset after the TIP packet */
    uint64_t ip;              /* its target */
    uint64_t next_psb;        /* the next PSB's offset, UINT64_MAX if none */
} resume_point;

static uint64_t ip_update(uint64_t last, const struct pt_packet_ip *p)
{
    switch (p->ipc) {
    case pt_ipc_update_16:
        return (last & ~0xffffull) | (p->ip & 0xffffull);
    case pt_ipc_update_32:
        return (last & ~0xffffffffull) | (p->ip & 0xffffffffull);
    case pt_ipc_update_48:
        return (last & ~0xffffffffffffull) | (p->ip & 0xffffffffffffull);
    case pt_ipc_sext_48: {
        uint64_t v = p->ip & 0xffffffffffffull;
        return v & (1ull << 47) ? v | 0xffff000000000000ull : v;
    }
    case pt_ipc_full:
        return p->ip;
    default:
        return last;
    }
}

/* Scans the segment's packets from the PSB at psb: the first TIP or TIP.PGE
 * with an address at or after offset `from` that is no FUP's pair, and the
 * next PSB. Returns false where the packets cannot be read. */
static bool find_resume(const uint8_t *seg, uint64_t len, uint64_t psb, uint64_t from,
                        resume_point *rp)
{
    memset(rp, 0, sizeof *rp);
    rp->next_psb = UINT64_MAX;
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)seg;
    cfg.end = (uint8_t *)seg + len;
    struct pt_packet_decoder *pd = pt_pkt_alloc_decoder(&cfg);
    if (!pd)
        return false;
    bool ok = pt_pkt_sync_set(pd, psb) >= 0;
    uint64_t last = 0;
    bool after_fup = false;
    for (bool first = true; ok; first = false) {
        uint64_t off = 0;
        struct pt_packet p;
        if (pt_pkt_get_offset(pd, &off) < 0 || pt_pkt_next(pd, &p, sizeof p) < 0)
            break;
        if (p.type == ppt_psb) {
            if (!first) {
                rp->next_psb = off;
                break;
            }
            last = 0;
        }
        if (p.type == ppt_ovf && !rp->found)
            break;            /* the packets after an overflow need the next PSB */
        if (p.type == ppt_tip || p.type == ppt_tip_pge || p.type == ppt_tip_pgd ||
            p.type == ppt_fup) {
            last = ip_update(last, &p.payload.ip);
            if (!rp->found && off >= from && !after_fup && p.payload.ip.ipc != pt_ipc_suppressed &&
                (p.type == ppt_tip || p.type == ppt_tip_pge)) {
                rp->found = true;
                rp->ip = last;
                pt_pkt_get_offset(pd, &rp->tip_end);
            }
        }
        if (p.type != ppt_pad)
            after_fup = p.type == ppt_fup;
    }
    pt_pkt_free_decoder(pd);
    return ok;
}

/* A PSB+ that starts the flow at ip at time tsc; its length (0: no room). */
static size_t resume_header(uint8_t *buf, size_t cap, uint64_t tsc, uint64_t ip)
{
    struct pt_config c;
    pt_config_init(&c);
    c.begin = buf;
    c.end = buf + cap;
    struct pt_encoder *e = pt_alloc_encoder(&c);
    if (!e)
        return 0;
    struct pt_packet p[5];
    int n = 0;
    memset(p, 0, sizeof p);
    p[n++].type = ppt_psb;
    if (tsc) {
        p[n].type = ppt_tsc;
        p[n++].payload.tsc.tsc = tsc;
    }
    p[n].type = ppt_mode;
    p[n].payload.mode.leaf = pt_mol_exec;
    p[n++].payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    p[n].type = ppt_fup;
    p[n].payload.ip.ipc = pt_ipc_full;
    p[n++].payload.ip.ip = ip;
    p[n++].type = ppt_psbend;
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = pt_enc_next(e, &p[i]) > 0;
    uint64_t len = 0;
    ok = ok && pt_enc_get_offset(e, &len) >= 0;
    pt_free_encoder(e);
    return ok ? (size_t)len : 0;
}

/* After the segment's decoder ps failed at ps->err_off (the gap is open and
 * the flow forgotten): decodes from each branch target after a failure up
 * to the next PSB. RESUME_AT_PSB: the segment's decoder goes on at *psb;
 * RESUME_EOS: the decoding reached the end of the stream; RESUME_END: that
 * of the chunk; RESUME_NONE: no branch target before the next PSB (the
 * caller synchronizes forward). */
static int resume_at_branch(wctx *w, chunk *k, pass *ps, const struct pt_config *cfg,
                            uint64_t stop, di_store *store, int *budget, uint64_t *psb)
{
    const segment *s = k->seg;
    const uint8_t *seg = k->buf + s->begin;
    const uint64_t len = k->end - s->begin;
    if (!ps->nck || ps->ck[ps->nck - 1].psb > ps->err_off)
        return RESUME_NONE;
    const uint64_t from_psb = ps->ck[ps->nck - 1].psb;
    uint64_t from = ps->err_off;
    for (;;) {
        resume_point rp;
        if (!find_resume(seg, len, from_psb, from, &rp) || !rp.found)
            return RESUME_NONE;
        uint64_t tail_end = len;
        if (rp.next_psb != UINT64_MAX) {
            uint64_t he = psb_header_end(k->buf, s->begin, k->end, s->begin + rp.next_psb);
            tail_end = he ? he - s->begin : rp.next_psb;
        }
        uint8_t hdr[64];
        size_t hl = resume_header(hdr, sizeof hdr, w->tsc, rp.ip);
        if (!hl || tail_end < rp.tip_end)
            return RESUME_NONE;
        size_t n = hl + (size_t)(tail_end - rp.tip_end);
        uint8_t *b = g_malloc(n);
        memcpy(b, hdr, hl);
        memcpy(b + hl, seg + rp.tip_end, (size_t)(tail_end - rp.tip_end));
        struct pt_config c = *cfg;
        c.begin = b;
        c.end = b + n;
        pass tp = { .dec = pt_blk_alloc_decoder(&c), .im = ps->im, .base = b, .base_end = b + n,
                    .shift = (int64_t)rp.tip_end - (int64_t)hl,
                    .dis = g_array_new(FALSE, FALSE, sizeof(guint)) };
        tp.status = tp.dec ? pt_blk_sync_set(tp.dec, 0) : -pte_nomem;
        if (tp.status < 0) {
            if (tp.dec)
                pt_blk_free_decoder(tp.dec);
            g_array_free(tp.dis, TRUE);
            g_free(b);
            return RESUME_NONE;
        }
        pt_blk_set_image(tp.dec, di_image_get(ps->im));
        /* the made-up PSB+ is where a retry starts (retry) */
        checkpoint(w, k, &tp, 0);
        tp.ck[0].sync_off = rp.tip_end;   /* not the made-up header's */
        op *so = push_op(k, OP_SYNC, w->tsc);
        so->ip = s->begin + rp.tip_end;
        k->st.resumes++;
        /* as far as the next PSB, or the chunk's stop */
        uint64_t tstop = rp.next_psb != UINT64_MAX && rp.next_psb < stop ? rp.next_psb - 1 : stop;
        decode_run(w, k, &tp, tstop);
        /* Where it fails, the code may be older than the thread's, as after
         * a PSB: decoded again with later code. A kept retry replaces the
         * image (freeing the one tp shared with ps). */
        retry_while_it_helps(w, k, &tp, tstop, &c, store, budget);
        ps->im = tp.im;
        /* the image may have been rebuilt for a later time */
        pt_blk_set_image(ps->dec, di_image_get(ps->im));
        pt_blk_free_decoder(tp.dec);
        g_array_free(tp.dis, TRUE);
        g_free(b);
        if (atomic_load_explicit(w->cancel, memory_order_relaxed))
            return RESUME_END;
        if (tp.boundary) {
            if (rp.next_psb == UINT64_MAX || rp.next_psb >= stop)
                return RESUME_END;
            *psb = rp.next_psb;
            return RESUME_AT_PSB;
        }
        if (tp.status == -pte_eos)
            return rp.next_psb == UINT64_MAX ? RESUME_EOS : RESUME_NONE;
        if (tp.err_off >= stop)
            return RESUME_END;
        op_gap(w, k, tp.status == -pte_nomap ? DC_GAP_NOCODE : DC_GAP_DECODE, tp.status,
               s->begin + tp.err_off);
        op_forget(w, k);
        from = tp.err_off > rp.tip_end ? tp.err_off : rp.tip_end;
    }
}

/* Decodes chunk k: from k->begin until the decoder reaches k->stop, the
 * PSB where the next chunk starts. The bytes given to libipt run on to the
 * end of that PSB's header, so the block in flight there ends where a
 * decoder reading on would end it (PSB+ status events split blocks at the
 * FUP's address), and the chunk stops at the first block at or after it. */
static void decode_chunk(wctx *w, chunk *k)
{
    const segment *s = k->seg;
    const uint8_t *buf = k->buf;
    w->cancel = k->cancel;
    w->tsc = 0;
    w->res = (resolution){ 0 };
    w->retries = w->retries_kept = w->fixup_calls = 0;
    if (w->failed)
        g_hash_table_remove_all(w->failed);
    memset(w->xc, 0, sizeof w->xc);    /* isids are the chunk's store's own */
    w->gen++;                           /* runs are the chunk's own */
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf + s->begin;
    cfg.end = (uint8_t *)buf + k->end;
    if (w->info && w->info->cpu.vendor == pcv_intel) {
        cfg.cpu = w->info->cpu;
        pt_cpu_errata(&cfg.errata, &cfg.cpu);
    }
    /* Calls end blocks so every call is seen (shadow stack, call_VM). */
    cfg.flags.variant.block.end_on_call = 1;
    pass ps = { .dis = g_array_new(FALSE, FALSE, sizeof(guint)), .base = cfg.begin,
                .base_end = cfg.end };
    di_store *store = di_store_new(w->cache);
    ps.dec = store ? pt_blk_alloc_decoder(&cfg) : NULL;
    if (!ps.dec) {
        op_gap(w, k, DC_GAP_DECODE, -pte_nomem, k->begin);
        pass_free(&ps);
        di_store_free(store);
        return;
    }
    const uint64_t stop = k->last ? UINT64_MAX : k->stop - s->begin;
    int budget = RETRY_BUDGET;
    char err[512];
    bool first_sync = k->first;
    if (k->first) {
        ps.status = pt_blk_sync_forward(ps.dec);
        op_forget(w, k);
        /* Bytes before a segment's first PSB cannot be decoded: a gap, so
         * that a stream whose only PSB is damaged is not silently empty. */
        uint64_t at = 0;
        if (ps.status == -pte_eos ||
            (ps.status >= 0 && pt_blk_get_sync_offset(ps.dec, &at) >= 0 && at > 0))
            op_gap(w, k, DC_GAP_DECODE, -pte_nosync, s->begin);
    } else {
        ps.status = pt_blk_sync_set(ps.dec, k->begin - s->begin);
    }
    while (!atomic_load_explicit(w->cancel, memory_order_relaxed)) {
        if (ps.status < 0) {
            if (ps.status == -pte_eos) {
                if (k->last)
                    push_op(k, OP_SEG_END, w->tsc);
                break;
            }
            /* Not synchronized: nothing before the next PSB can be used. */
            uint64_t off = 0;
            if (pt_blk_get_offset(ps.dec, &off) < 0)
                off = 0;
            if (off >= stop)
                break;
            op_gap(w, k, DC_GAP_DECODE, ps.status, s->begin + off);
            ps.status = pt_blk_sync_forward(ps.dec);
            op_forget(w, k);
            continue;
        }
        /* Synchronized here. */
        uint64_t sync_off = 0;
        pt_blk_get_sync_offset(ps.dec, &sync_off);
        if (sync_off >= stop)
            break;             /* the next chunk's start */
        uint64_t now = cur_time(ps.dec, w->tsc);
        w->tsc = now;
        if (!ps.im) {
            ps.im = di_image_new_in(w->cache, store, now, NULL, 0, err, sizeof err);
            if (!ps.im) {
                problem(&k->st, "%s", err);
                op_gap(w, k, DC_GAP_DECODE, -pte_nomem, s->begin);
                break;
            }
            pt_blk_set_image(ps.dec, di_image_get(ps.im));
            w->iscache = di_image_iscache(ps.im);
        }
        if (first_sync && sync_off > 0)   /* bytes before the first PSB */
            op_gap(w, k, DC_GAP_DECODE, -pte_nosync, s->begin);
        first_sync = false;
        ps.nck = 0;
        checkpoint(w, k, &ps, sync_off);
        op *so = push_op(k, OP_SYNC, now);
        so->ip = s->begin + sync_off;
        if (!k->st.first_tsc || (now && now < k->st.first_tsc))
            k->st.first_tsc = now;

        /* Decode until the next error; where it fails, decode the stretch
         * again with the code recorded next, as long as that gets further. */
        decode_run(w, k, &ps, stop);
        retry_while_it_helps(w, k, &ps, stop, &cfg, store, &budget);
        if (ps.boundary || atomic_load_explicit(w->cancel, memory_order_relaxed))
            break;
        if (ps.status == -pte_eos)
            break;
        if (ps.status < 0) {
            uint64_t off = ps.err_off;
            if (off >= stop)
                break;
            op_gap(w, k, ps.status == -pte_nomap ? DC_GAP_NOCODE : DC_GAP_DECODE, ps.status,
                   s->begin + off);
            op_forget(w, k);
            uint64_t at = 0;
            int how = resume_at_branch(w, k, &ps, &cfg, stop, store, &budget, &at);
            if (how == RESUME_END)
                break;
            if (how == RESUME_EOS)
                ps.status = -pte_eos;
            else if (how == RESUME_AT_PSB)
                ps.status = pt_blk_sync_set(ps.dec, at);
            else
                ps.status = pt_blk_sync_forward(ps.dec);
        }
    }
    if (ps.im) {
        const di_stats *ds = di_image_stats(ps.im);
        k->st.image_rebuilds += ds->rebuilds;
        k->st.image_sections += ds->sections_added;
        k->st.patches_resolved += ds->patches_resolved;
        k->st.states_made_up += ds->states_made_up;
    }
    k->st.retries += w->retries;
    k->st.retries_kept += w->retries_kept;
    k->st.fixup_calls += w->fixup_calls;
    pass_free(&ps);
    di_store_free(store);
}

/* ---- the second layer: flow state and events ---------------------------------- */

typedef struct shadow_ent {
    uint64_t call_ip;
    /* The inline stack compiled code called from (NULL: not from compiled
     * code): a return to it compares the stack at the return address with
     * this one, so the inlined frames the call ended in and those the code
     * after it belongs to become inline returns and calls. */
    const dm_code *jit_code;
    const dm_frame *jit_frames;
    uint32_t jit_depth;
} shadow_ent;

typedef struct pending_gap {
    bool on;
    dc_event ev;
} pending_gap;

typedef struct ctx {
    dc_sink sink;
    void *sink_ctx;
    dc_stats *st;
    bool stop;
    /* A range's end inside a stream (strm.tail): the instruction in flight
     * there is delivered once the stretch after the cut finishes it, and
     * nothing after it (TAIL_ON, then TAIL_DONE). The range after it drops
     * that instruction from what its warm-up left pending (drop_pending). */
    uint8_t tail;
    bool drop_pending;
    uint64_t tsc;
    uint64_t off;          /* the stream offset after the block being replayed */

    /* control-flow state between blocks */
    unit prev;
    xfer prev_xfer;
    uint64_t prev_end_ip;  /* the last instruction of the block before */
    bool resumed;          /* tracing was re-enabled since the last block */
    bool unknown_origin;   /* first block after a (re)synchronization */
    shadow_ent shadow[SHADOW_MAX];
    size_t nshadow;

    /* bytecode events held until their template is left (exit_ip), with the
     * events of code the template called meanwhile */
    dc_event pending[PENDING_MAX];
    unsigned npending;
    const dm_codelet *pending_in;
    bool hold;             /* the next event comes from a call by that template */

    /* compiled-code position */
    uint64_t jit_lo, jit_hi;   /* addresses with the current position's answer */
    const dm_code *jit_code;
    const dm_frame *jit_frames;
    uint32_t jit_depth;
    dm_frame noscope[2];   /* stand for "method, no bci" where a pc has no record */
    unsigned noscope_slot;

    pending_gap gap;
} ctx;

enum { TAIL_OFF, TAIL_ON, TAIL_DONE };

static void deliver(ctx *x, dc_event *ev)
{
    if (x->stop || x->tail == TAIL_DONE)
        return;
    if ((unsigned)ev->kind < DC_KIND_COUNT)
        x->st->events[ev->kind]++;
    if (ev->kind != DC_GAP)
        ev->offset = x->off;
    if (x->sink(ev, x->sink_ctx))
        x->stop = true;
}

static void flush_pending(ctx *x)
{
    /* A conditional branch's template left by its dispatch (an indirect
     * jump): the dispatch's place says which way it went. */
    const dm_codelet *c = x->pending_in;
    if (c && c->not_taken && x->prev_xfer == X_JMP_INDIRECT)
        for (unsigned i = 0; i < x->npending; i++)
            if (x->pending[i].kind == DC_BYTECODE && x->pending[i].exit_ip >= c->begin &&
                x->pending[i].exit_ip < c->end)
                x->pending[i].flags |= x->pending[i].exit_ip >= c->not_taken ? DC_F_NOT_TAKEN
                                                                              : DC_F_TAKEN;
    for (unsigned i = 0; i < x->npending && !x->drop_pending; i++)
        deliver(x, &x->pending[i]);
    x->drop_pending = false;
    if (x->tail == TAIL_ON)
        x->tail = TAIL_DONE;
    x->npending = 0;
    x->pending_in = NULL;
    x->hold = false;
}

static void emit(ctx *x, dc_event *ev)
{
    if (!ev->tsc)
        ev->tsc = x->tsc;
    /* A stub the pending template calls (and returns from) is part of it:
     * queue the event behind the template's so the exit can still come. */
    if (x->hold && x->pending_in && x->npending < PENDING_MAX) {
        x->pending[x->npending++] = *ev;
        return;
    }
    flush_pending(x);
    deliver(x, ev);
}

/* A return (or a jump, as HotSpot's interpreter returns) to target matches a
 * tracked call if it lands just after that call instruction. Pops it and
 * everything above it; the call's entry goes to *ent (may be NULL). */
static bool shadow_pop(ctx *x, uint64_t target, shadow_ent *ent)
{
    size_t lowest = x->nshadow > SHADOW_SEARCH ? x->nshadow - SHADOW_SEARCH : 0;
    for (size_t i = x->nshadow; i-- > lowest;) {
        uint64_t c = x->shadow[i].call_ip;
        if (target > c && target - c <= MAX_INSN_LEN) {
            if (ent)
                *ent = x->shadow[i];
            x->nshadow = i;
            return true;
        }
    }
    return false;
}

/* A call at call_ip; from compiled code, its inline stack is kept with it
 * (unless it is a no-scope stand-in, whose slot is reused). */
static void shadow_push(ctx *x, uint64_t call_ip)
{
    if (x->nshadow == SHADOW_MAX) {
        memmove(x->shadow, x->shadow + SHADOW_MAX / 2, (SHADOW_MAX / 2) * sizeof x->shadow[0]);
        x->nshadow = SHADOW_MAX / 2;
    }
    shadow_ent e = { .call_ip = call_ip };
    if (x->jit_frames && (x->jit_frames < x->noscope || x->jit_frames >= x->noscope + 2)) {
        e.jit_code = x->jit_code;
        e.jit_frames = x->jit_frames;
        e.jit_depth = x->jit_depth;
    }
    x->shadow[x->nshadow++] = e;
}

/* ---- events for one location ---------------------------------------------- */

static void codelet_event(ctx *x, const dm_codelet *c, uint64_t ip, uint32_t flags)
{
    dc_event ev = { .ip = ip, .flags = flags, .raw = c->bytecode, .opcode = -1, .bci = -1,
                    .desc = c->desc };
    if (c->kind == DM_CL_BYTECODE) {
        /* Entered by the wide template's dispatch: the wide entry of the
         * modified bytecode's template runs the rest of the same
         * instruction, so its exit is the instruction's (no event of its
         * own: the class file has one instruction there). */
        const dm_codelet *held = x->pending_in;
        if (held && held->nops == 1 && held->ops[0] == BC_WIDE && x->npending == 1 &&
            x->pending[0].kind == DC_BYTECODE && !x->hold && x->prev_xfer == X_JMP_INDIRECT) {
            x->pending_in = c;
            return;
        }
        flush_pending(x);
        ev.kind = DC_BYTECODE;
        ev.tsc = x->tsc;
        for (unsigned i = 0; i < c->nops && i < 2; i++) {
            ev.opcode = c->ops[i];
            ev.flags = flags | (i ? DC_F_FUSED : 0);
            x->pending[x->npending++] = ev;
        }
        if (c->nops) {
            x->pending_in = c;
            return;
        }
        ev.kind = DC_INTERP_OTHER;  /* breakpoint and the like: still visible */
        emit(x, &ev);
        return;
    }
    static const dc_kind map[DM_CL_KIND_COUNT] = {
        [DM_CL_METHOD_ENTRY] = DC_METHOD_ENTRY, [DM_CL_RETURN] = DC_INTERP_RETURN,
        [DM_CL_EARLYRET] = DC_EARLYRET, [DM_CL_DEOPT] = DC_DEOPT,
        [DM_CL_EXCEPTION] = DC_EXCEPTION, [DM_CL_THROW] = DC_THROW,
        [DM_CL_SAFEPOINT] = DC_SAFEPOINT, [DM_CL_NATIVE] = DC_NATIVE,
        [DM_CL_OTHER] = DC_INTERP_OTHER,
    };
    ev.kind = map[c->kind] ? map[c->kind] : DC_INTERP_OTHER;
    emit(x, &ev);
}

/* Number of outer frames two inline stacks share (frames are innermost
 * first). A frame is shared while the method at that depth is the same and
 * every frame outside it stood at the same bci; a shared frame whose bci
 * moved is the last one shared (its inlined callees differ). */
static uint32_t common_outer(const dm_frame *a, uint32_t da, const dm_frame *b, uint32_t db)
{
    uint32_t k = 0;
    while (k < da && k < db) {
        const dm_frame *fa = &a[da - 1 - k], *fb = &b[db - 1 - k];
        if (fa->method_id != fb->method_id)
            break;
        k++;
        if (fa->bci != fb->bci)
            break;
    }
    return k;
}

/* The position moves to r->pc in version c (r: its inline-stack record,
 * looked up by the first layer). */
/* again: DC_F_BACKWARD (a jump back within the version) and DC_F_RESUMED
 * (the trace resumed in it, not after a call it made), which give an event
 * even where the record stays the same. */
static void jit_position(ctx *x, const dm_code *c, const run *r, bool fresh, uint32_t again)
{
    uint64_t pc = r->pc;
    bool same_record = !fresh && x->jit_code == c && x->jit_frames && pc >= x->jit_lo &&
                       pc < x->jit_hi;
    if (same_record && !again)
        return;                /* same record as before: nothing changes */
    if (same_record) {
        /* the record runs again after a jump back (a loop inside it), or
         * the trace resumed in it */
        dc_event ev = { .kind = DC_JIT, .ip = pc, .code = c, .opcode = -1, .raw = -1,
                        .call_bci = -1, .flags = again,
                        .method_id = x->jit_frames[0].method_id, .bci = x->jit_frames[0].bci,
                        .depth = x->jit_depth };
        emit(x, &ev);
        return;
    }
    const dm_frame *f = r->f;
    uint32_t d = r->d;
    x->jit_lo = c->vaddr + r->lo;
    x->jit_hi = c->vaddr + r->hi;
    if (!d) {
        /* Alternate slots: the previous position may be the other one. */
        x->noscope_slot ^= 1;
        dm_frame *ns = &x->noscope[x->noscope_slot];
        ns->method_id = c->method_id;
        ns->bci = -1;
        f = ns;
        d = 1;
    }
    dc_event ev = { .ip = pc, .code = c, .opcode = -1, .raw = -1, .call_bci = -1 };
    const dm_frame *o = x->jit_frames;
    uint32_t od = x->jit_depth;
    if (!fresh && x->jit_code == c && o) {
        uint32_t k = common_outer(o, od, f, d);
        for (uint32_t i = 0; i + k < od; i++) {     /* frames left, innermost first */
            ev.kind = DC_INLINE_RETURN;
            ev.method_id = o[i].method_id;
            ev.bci = o[i].bci;
            ev.depth = od - i - 1;
            emit(x, &ev);
        }
        for (uint32_t j = k; j < d; j++) {          /* frames entered, outermost first */
            ev.kind = DC_INLINE_CALL;
            ev.method_id = f[d - 1 - j].method_id;
            ev.bci = f[d - 1 - j].bci;
            ev.depth = j + 1;
            ev.call_bci = j ? f[d - j].bci : -1;
            emit(x, &ev);
        }
        ev.call_bci = -1;
        if (o[0].method_id == f[0].method_id && o[0].bci == f[0].bci && od == d && !again) {
            x->jit_frames = f;
            return;
        }
    }
    ev.kind = DC_JIT;
    ev.flags = again;
    ev.method_id = f[0].method_id;
    ev.bci = f[0].bci;
    ev.depth = d;
    emit(x, &ev);
    x->jit_code = c;
    x->jit_frames = f;
    x->jit_depth = d;
}

static uint32_t how_flags(xfer t)
{
    switch (t) {
    case X_CALL: return DC_F_BY_CALL;
    case X_RET: return DC_F_BY_RETURN;
    case X_JMP_DIRECT:
    case X_JMP_INDIRECT: return DC_F_BY_JUMP;
    default: return 0;
    }
}

static void on_block(ctx *x, const op *o, unit exitu, const run *runs)
{
    unit u = { (ukind)o->ukind, o->u };
    bool entered;
    uint32_t flags = 0;
    bool is_bc = u.kind == U_CODELET && ((const dm_codelet *)u.p)->kind == DM_CL_BYTECODE;
    bool is_nm = u.kind == U_CODE && ((const dm_code *)u.p)->kind == DM_CODE_NMETHOD;
    bool same = same_unit(u, x->prev);
    shadow_ent back = { 0 };   /* the call a return went back to */

    if (x->unknown_origin) {
        entered = false;
    } else if (x->resumed) {
        /* Back from untraced code (the VM): at the return address of a call
         * a codelet made, the codelet continues (getstatic resuming after the
         * VM ran a class initializer); anywhere else it is entered. */
        bool matched = shadow_pop(x, o->ip, NULL);
        /* A stub resumed elsewhere than after a call it made is entered
         * again, even if the thread left from it: the VM returns from the
         * call stub and calls Java through it again. */
        bool stub = u.kind == U_CODE && ((const dm_code *)u.p)->kind == DM_CODE_STUB;
        entered = (!same || (stub && !matched)) && !(matched && u.kind == U_CODELET);
        flags |= DC_F_RESUMED;
    } else {
        flags |= how_flags(x->prev_xfer);
        switch (x->prev_xfer) {
        case X_CALL:
            /* A call within a codelet is HotSpot's call_VM pattern (a local
             * subroutine); a compiled method calling itself is recursion. */
            entered = !same || is_nm;
            break;
        case X_RET: {
            bool matched = shadow_pop(x, o->ip, &back);
            /* a compiled method's recursive call returning to its caller
             * leaves one frame for another of the same version */
            entered = (!same || (is_nm && matched)) && !(matched && u.kind == U_CODELET);
            if (!matched)
                back.jit_frames = NULL;
            else
                flags |= DC_F_AFTER_CALL;
            break;
        }
        case X_JMP_INDIRECT: {
            /* The interpreter returns by jumping to the return address; its
             * dispatch may jump to the template that just ran. Into compiled
             * code, to the address after a call it made, that is the call's
             * return (an interpreted callee the c2i adapter entered). */
            bool matched = shadow_pop(x, o->ip, &back);
            entered = !same || is_bc;
            if (matched && is_nm && !same) {
                flags = (flags & ~DC_F_BY_JUMP) | DC_F_BY_RETURN | DC_F_AFTER_CALL;
            } else {
                back.jit_frames = NULL;
            }
            break;
        }
        default:
            entered = !same;
            break;
        }
    }

    switch (u.kind) {
    case U_CODELET: {
        const dm_codelet *c = u.p;
        if (entered)
            codelet_event(x, c, o->ip, flags);
        if (o->end_ip < c->begin || o->end_ip >= c->end) {
            /* Followed a direct jump into another codelet. */
            if (exitu.kind == U_CODELET) {
                const dm_codelet *d = exitu.p;
                codelet_event(x, d, d->begin, DC_F_BY_JUMP);
            }
        }
        x->jit_frames = NULL;
        break;
    }
    case U_CODE: {
        const dm_code *c = u.p;
        if (c->kind == DM_CODE_STUB) {
            if (entered) {
                dc_event ev = { .kind = DC_STUB, .ip = o->ip, .flags = flags, .code = c,
                                .desc = c->name, .opcode = -1, .raw = -1, .bci = -1 };
                emit(x, &ev);
            }
            break;
        }
        if (entered) {
            dc_event ev = { .kind = DC_JIT_ENTER, .ip = o->ip, .code = c,
                            .flags = flags | (o->nruns && !runs[0].d ? DC_F_NO_SCOPE : 0),
                            .method_id = c->method_id, .opcode = -1, .raw = -1, .bci = -1 };
            emit(x, &ev);
        }
        /* Back from a call this version made: the position continues from
         * the inline stack the call left (an inlined callee's code may
         * follow the call: Character.charCount(codePointAt(...))). */
        bool from_call = entered && back.jit_frames && back.jit_code == c && o->nruns;
        if (from_call) {
            x->jit_code = back.jit_code;
            x->jit_frames = back.jit_frames;
            x->jit_depth = back.jit_depth;
            x->jit_lo = x->jit_hi = 0;
        }
        /* a jump back within the version: the code may run a loop again */
        bool backward = !entered && !x->unknown_origin && same && o->ip <= x->prev_end_ip &&
                        (x->prev_xfer == X_COND || x->prev_xfer == X_JMP_DIRECT ||
                         x->prev_xfer == X_JMP_INDIRECT);
        uint32_t again = (backward ? DC_F_BACKWARD : 0) |
                         (x->resumed && !entered ? DC_F_RESUMED : 0);
        for (uint32_t i = 0; i < o->nruns; i++)
            jit_position(x, c, &runs[i],
                         i == 0 && ((entered && !from_call) || x->unknown_origin),
                         (i == 0 ? again : 0) | (runs[i].back ? DC_F_BACKWARD : 0));
        break;
    }
    case U_BLOB:
        if (entered) {
            dc_event ev = { .kind = DC_CODE_OTHER, .ip = o->ip, .flags = flags,
                            .desc = ((const dm_blob *)u.p)->name, .opcode = -1, .raw = -1,
                            .bci = -1 };
            emit(x, &ev);
        }
        break;
    default:
        break;
    }
    /* The template's exit so far: where control left its codelet last. */
    bool in_pending = x->pending_in && o->end_ip >= x->pending_in->begin &&
                      o->end_ip < x->pending_in->end;
    if (in_pending) {
        /* the itable scan: entered at its peeled test, one more entry per
         * block at its loop head */
        const dm_codelet *c = x->pending_in;
        bool scan_start = c->itable_first && o->end_ip == c->itable_first;
        bool scan_step = c->itable_loop && o->ip == c->itable_loop;
        for (unsigned i = 0; i < x->npending; i++)
            if (x->pending[i].kind == DC_BYTECODE) {
                x->pending[i].exit_ip = o->end_ip;
                if (scan_start && !x->pending[i].itable_pos)
                    x->pending[i].itable_pos = 1;
                else if (scan_step && x->pending[i].itable_pos)
                    x->pending[i].itable_pos++;
            }
    }
    xfer end = (xfer)o->xfer;
    x->hold = in_pending && end == X_CALL;
    if (end == X_CALL)
        shadow_push(x, o->end_ip);
    /* Where control leaves from decides the next transfer. */
    x->prev = exitu;
    x->prev_xfer = end;
    x->prev_end_ip = o->end_ip;
    x->resumed = false;
    x->unknown_origin = false;
}

static void forget_flow(ctx *x)
{
    flush_pending(x);
    x->prev.kind = U_NONE;
    x->prev.p = NULL;
    x->prev_xfer = X_OTHER;
    x->nshadow = 0;
    x->jit_frames = NULL;
    x->jit_code = NULL;
    x->unknown_origin = true;
    x->resumed = false;
}

static void gap_open(ctx *x, dc_gap_reason reason, int error, uint64_t offset, uint64_t lost)
{
    pending_gap *g = &x->gap;
    if (g->on) {               /* merge: the first cause stays */
        g->ev.lost_bytes += lost;
        return;
    }
    memset(&g->ev, 0, sizeof g->ev);
    g->on = true;
    g->ev.kind = DC_GAP;
    g->ev.reason = reason;
    g->ev.error = error;
    g->ev.tsc = x->tsc;
    g->ev.offset = offset;
    g->ev.lost_bytes = lost;
    g->ev.opcode = -1;
    g->ev.raw = -1;
    g->ev.bci = -1;
    x->st->gaps[reason]++;
}

static void gap_close(ctx *x, uint64_t resume_offset, uint64_t resume_tsc)
{
    pending_gap *g = &x->gap;
    if (!g->on)
        return;
    g->on = false;
    g->ev.end_offset = resume_offset;
    g->ev.end_tsc = resume_tsc;
    if (resume_offset > g->ev.offset && g->ev.reason != DC_GAP_LOST)
        x->st->skipped_bytes += resume_offset - g->ev.offset;
    dc_event ev = g->ev;
    if (!ev.tsc)
        ev.tsc = resume_tsc ? resume_tsc : 1;  /* emit() must not replace it */
    emit(x, &ev);
}

/* Replays chunk k's ops. */
static void apply_chunk(ctx *x, const chunk *k, const dc_output *out)
{
    const op *ops = (const op *)(void *)k->ops->data;
    const run *runs = (const run *)(void *)k->runs->data;
    size_t nb = 0;
    for (guint i = 0; i < k->ops->len && !x->stop; i++) {
        const op *o = &ops[i];
        if (o->tsc)
            x->tsc = o->tsc;
        switch (o->type) {
        case OP_BLOCK:
            x->off = o->off;
            if (out->block && k->blocks && nb < k->blocks->len)
                out->block(&g_array_index(k->blocks, struct pt_block, nb), x->tsc, out->ctx);
            nb++;
            unit exitu = { (ukind)o->ukind, o->u };
            if (i + 1 < k->ops->len && ops[i + 1].type == OP_EXIT) {
                exitu = (unit){ (ukind)ops[i + 1].ukind, ops[i + 1].u };
                i++;
            }
            on_block(x, o, exitu, runs + o->run0);
            break;
        case OP_FORGET:
            forget_flow(x);
            break;
        case OP_GAP_OPEN:
            gap_open(x, (dc_gap_reason)o->ninsn, (int)(int64_t)o->end_ip, o->ip, 0);
            break;
        case OP_SYNC:
            gap_close(x, o->ip, x->tsc);
            break;
        case OP_SEG_END:
            if (x->gap.on)
                x->gap.ev.end_offset = k->seg->end;
            break;
        case OP_OVERFLOW:
            gap_open(x, DC_GAP_OVERFLOW, 0, o->ip, 0);
            gap_close(x, o->ip, x->tsc);
            forget_flow(x);
            break;
        case OP_ENABLE:
            x->resumed = true;
            x->unknown_origin = false;
            break;
        default:
            break;
        }
    }
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
            problem(st, "%s (losses unknown: decoding the stream as one piece)", err);
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
static uint64_t psb_header_end(const uint8_t *buf, uint64_t begin, uint64_t end, uint64_t off)
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
            uint64_t he = psb_header_end(buf, s->begin, s->end, off);
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
    decode_chunk(c->w, c->k);
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
                gap_close(x, g->begin, 0);
            gap_open(x, DC_GAP_LOST, 0, g->begin, g->lost_before);
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
    forget_flow(x);
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
            gap_close(x, end, 0);
        }
        flush_pending(x);
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
            !psb_header_end(k->buf, g->begin, g->end, off))
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
        apply_chunk(x, c, &none);
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
    apply_chunk(x, w, &none);
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

int dc_decode_streams(const dm_model *m, di_cache *cache, const dc_trace_info *info,
                      dc_stream *streams, size_t n, const dc_options *opt)
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

    job j = { .m = m, .cache = cache, .info = info };
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
        apply_chunk(x, k, &t->s->out);
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

int dc_decode_stream_opts(const dm_model *m, di_cache *cache, const dc_trace_info *info,
                          const char *pt_path, const char *idx_path, const dc_output *out,
                          const dc_options *opt, dc_stats *st, char *err, size_t errlen)
{
    dc_stream s = { .pt_path = pt_path, .idx_path = idx_path, .out = *out, .st = st };
    dc_decode_streams(m, cache, info, &s, 1, opt);
    if (s.rc < 0)
        snprintf(err, errlen, "%s", s.err);
    return s.rc;
}

int dc_decode_stream(const dm_model *m, di_cache *cache, const dc_trace_info *info,
                     const char *pt_path, const char *idx_path, const dc_output *out,
                     dc_stats *st, char *err, size_t errlen)
{
    return dc_decode_stream_opts(m, cache, info, pt_path, idx_path, out, NULL, st, err, errlen);
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
