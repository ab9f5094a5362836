#include "decoder/decode.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "common/auxidx.h"
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
#define PROGRESS_MASK 0xffffu  /* report progress every 64 Ki blocks */
#define PENDING_MAX 8

static const char *const kind_names[DC_KIND_COUNT] = {
    [DC_BYTECODE] = "bytecode", [DC_METHOD_ENTRY] = "method-entry",
    [DC_INTERP_RETURN] = "interp-return", [DC_EARLYRET] = "earlyret", [DC_DEOPT] = "deopt",
    [DC_EXCEPTION] = "exception", [DC_THROW] = "throw", [DC_SAFEPOINT] = "safepoint",
    [DC_NATIVE] = "native", [DC_INTERP_OTHER] = "interp-other", [DC_JIT_ENTER] = "jit-enter",
    [DC_JIT] = "jit", [DC_INLINE_CALL] = "inline-call", [DC_INLINE_RETURN] = "inline-return",
    [DC_STUB] = "stub", [DC_CODE_OTHER] = "code", [DC_GAP] = "gap",
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


typedef struct shadow_ent {
    uint64_t call_ip;
} shadow_ent;

typedef struct ctx {
    const dm_model *m;
    dc_sink sink;
    void (*block)(const struct pt_block *b, uint64_t tsc, void *ctx);
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    uint64_t total_bytes;
    void *sink_ctx;
    dc_stats *st;
    bool stop;
    uint64_t tsc;

    struct pt_image_section_cache *iscache;

    /* control-flow state between blocks */
    unit prev;
    xfer prev_xfer;
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
    jp_cache *jp;
    uint64_t jit_lo, jit_hi;   /* addresses with the current position's answer */
    const dm_code *jit_code;
    const dm_frame *jit_frames;
    uint32_t jit_depth;
    dm_frame noscope[2];   /* stand for "method, no bci" where a pc has no record */
    unsigned noscope_slot;

    /* the last block ended with the call of a call-site resolution patch */
    uint64_t resolve_site;
} ctx;

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

static void deliver(ctx *x, dc_event *ev)
{
    if (x->stop)
        return;
    if ((unsigned)ev->kind < DC_KIND_COUNT)
        x->st->events[ev->kind]++;
    if (x->sink(ev, x->sink_ctx))
        x->stop = true;
}

static void flush_pending(ctx *x)
{
    for (unsigned i = 0; i < x->npending; i++)
        deliver(x, &x->pending[i]);
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

static unit resolve(const ctx *x, uint64_t ip)
{
    dm_where w = dm_lookup(x->m, ip, x->tsc);
    switch (w.kind) {
    case DM_AT_CODELET: return (unit){ U_CODELET, w.codelet };
    case DM_AT_CODE: return (unit){ U_CODE, w.code };
    case DM_AT_BLOB: return (unit){ U_BLOB, w.blob };
    default: return (unit){ U_UNKNOWN, NULL };
    }
}

/* A return (or a jump, as HotSpot's interpreter returns) to target matches a
 * tracked call if it lands just after that call instruction. Pops it and
 * everything above it. */
static bool shadow_pop(ctx *x, uint64_t target)
{
    size_t lowest = x->nshadow > SHADOW_SEARCH ? x->nshadow - SHADOW_SEARCH : 0;
    for (size_t i = x->nshadow; i-- > lowest;) {
        uint64_t c = x->shadow[i].call_ip;
        if (target > c && target - c <= MAX_INSN_LEN) {
            x->nshadow = i;
            return true;
        }
    }
    return false;
}

static void shadow_push(ctx *x, uint64_t call_ip)
{
    if (x->nshadow == SHADOW_MAX) {
        memmove(x->shadow, x->shadow + SHADOW_MAX / 2, (SHADOW_MAX / 2) * sizeof x->shadow[0]);
        x->nshadow = SHADOW_MAX / 2;
    }
    x->shadow[x->nshadow++].call_ip = call_ip;
}

/* ---- how a block ends ----------------------------------------------------------- */

/* The transfer at the end of a block. libipt reports the last instruction's
 * class only when it decoded it (blocks replayed from its block cache say
 * ptic_error) and does not tell direct from indirect jumps, which matters
 * here: HotSpot's dispatch is an indirect jump, possibly to the template
 * that just ran. So the last instruction is classified from its bytes. */
static xfer block_end(ctx *x, const struct pt_block *b)
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
        n = pt_iscache_read(x->iscache, buf, sizeof buf, b->isid, b->end_ip);
    }
    if (n <= 0)
        return b->iclass == ptic_jump ? X_JMP_INDIRECT : X_OTHER;
    return x86_classify(buf, (size_t)n, NULL, NULL);
}

/* ---- events for one location ---------------------------------------------- */

static void codelet_event(ctx *x, const dm_codelet *c, uint64_t ip, uint32_t flags)
{
    dc_event ev = { .ip = ip, .flags = flags, .raw = c->bytecode, .opcode = -1, .bci = -1,
                    .desc = c->desc };
    if (c->kind == DM_CL_BYTECODE) {
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

static void jit_position(ctx *x, const dm_code *c, uint64_t pc, bool fresh)
{
    if (!fresh && x->jit_code == c && x->jit_frames && pc >= x->jit_lo && pc < x->jit_hi)
        return;                /* same record as before: nothing changes */
    const dm_frame *f;
    uint64_t lo, hi;
    uint32_t d = dm_inline_range(x->m, c, pc, &f, &lo, &hi);
    x->jit_lo = lo;
    x->jit_hi = hi;
    if (!d) {
        /* Alternate slots: the previous position may be the other one. */
        x->noscope_slot ^= 1;
        dm_frame *ns = &x->noscope[x->noscope_slot];
        ns->method_id = c->method_id;
        ns->bci = -1;
        f = ns;
        d = 1;
    }
    dc_event ev = { .ip = pc, .code = c, .opcode = -1, .raw = -1 };
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
            emit(x, &ev);
        }
        if (o[0].method_id == f[0].method_id && o[0].bci == f[0].bci && od == d) {
            x->jit_frames = f;
            return;
        }
    }
    ev.kind = DC_JIT;
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

static void on_block(ctx *x, const struct pt_block *b)
{
    x->st->blocks++;
    x->st->insns += b->ninsn;
    unit u = resolve(x, b->ip);
    bool entered;
    uint32_t flags = 0;
    bool is_bc = u.kind == U_CODELET && ((const dm_codelet *)u.p)->kind == DM_CL_BYTECODE;
    bool is_nm = u.kind == U_CODE && ((const dm_code *)u.p)->kind == DM_CODE_NMETHOD;
    bool same = same_unit(u, x->prev);

    if (x->unknown_origin) {
        entered = false;
    } else if (x->resumed) {
        shadow_pop(x, b->ip);
        entered = !same;
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
            bool matched = shadow_pop(x, b->ip);
            entered = !same && !(matched && u.kind == U_CODELET);
            break;
        }
        case X_JMP_INDIRECT:
            /* The interpreter returns by jumping to the return address; its
             * dispatch may jump to the template that just ran. */
            shadow_pop(x, b->ip);
            entered = !same || is_bc;
            break;
        default:
            entered = !same;
            break;
        }
    }

    switch (u.kind) {
    case U_CODELET: {
        const dm_codelet *c = u.p;
        if (entered)
            codelet_event(x, c, b->ip, flags);
        if (b->end_ip < c->begin || b->end_ip >= c->end) {
            /* Followed a direct jump into another codelet. */
            const dm_codelet *d = dm_codelet_at(x->m, b->end_ip);
            if (d)
                codelet_event(x, d, d->begin, DC_F_BY_JUMP);
        }
        x->jit_frames = NULL;
        break;
    }
    case U_CODE: {
        const dm_code *c = u.p;
        if (c->kind == DM_CODE_STUB) {
            if (entered) {
                dc_event ev = { .kind = DC_STUB, .ip = b->ip, .flags = flags, .code = c,
                                .desc = c->name, .opcode = -1, .raw = -1, .bci = -1 };
                emit(x, &ev);
            }
            break;
        }
        if (entered) {
            dc_event ev = { .kind = DC_JIT_ENTER, .ip = b->ip, .flags = flags, .code = c,
                            .method_id = c->method_id, .opcode = -1, .raw = -1, .bci = -1 };
            emit(x, &ev);
        }
        const uint64_t *path;
        size_t n = b->ninsn > 2 ? jp_path(x->jp, c, b->ip, b->end_ip, b->ninsn, &path) : 0;
        if (n) {
            jit_position(x, c, path[0], entered || x->unknown_origin);
            for (size_t i = 1; i < n; i++)
                jit_position(x, c, path[i], false);
        } else {
            if (b->ninsn > 2)
                x->st->jit_blocks_ends_only++;
            jit_position(x, c, b->ip, entered || x->unknown_origin);
            if (b->end_ip != b->ip && b->end_ip >= c->vaddr && b->end_ip - c->vaddr < c->size)
                jit_position(x, c, b->end_ip, false);
        }
        break;
    }
    case U_BLOB:
        if (entered) {
            dc_event ev = { .kind = DC_CODE_OTHER, .ip = b->ip, .flags = flags,
                            .desc = ((const dm_blob *)u.p)->name, .opcode = -1, .raw = -1,
                            .bci = -1 };
            emit(x, &ev);
        }
        break;
    default:
        break;
    }
    /* The template's exit so far: where control left its codelet last. */
    bool in_pending = x->pending_in && b->end_ip >= x->pending_in->begin &&
                      b->end_ip < x->pending_in->end;
    if (in_pending)
        for (unsigned i = 0; i < x->npending; i++)
            if (x->pending[i].kind == DC_BYTECODE)
                x->pending[i].exit_ip = b->end_ip;
    xfer end = block_end(x, b);
    x->hold = in_pending && end == X_CALL;
    if (end == X_CALL)
        shadow_push(x, b->end_ip);
    /* Where control leaves from decides the next transfer. */
    x->prev = (u.kind == U_CODELET && (b->end_ip < ((const dm_codelet *)u.p)->begin ||
                                       b->end_ip >= ((const dm_codelet *)u.p)->end))
                  ? resolve(x, b->end_ip)
                  : u;
    x->prev_xfer = end;
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
    x->resolve_site = 0;
}

/* ---- the stream ----------------------------------------------------------- */

typedef struct segment {
    uint64_t begin, end;
    uint64_t lost_before;      /* bytes the collector lost before this segment */
    bool loss_before;
} segment;

static GArray *segments(uint64_t size, const char *idx_path, dc_stats *st)
{
    GArray *segs = g_array_new(FALSE, FALSE, sizeof(segment));
    auxidx idx = { 0 };
    char err[512];
    bool have = false;
    if (idx_path && access(idx_path, F_OK) == 0) {
        int rc = auxidx_load(idx_path, &idx, err, sizeof err);
        if (rc < 0)
            problem(st, "%s (losses unknown: decoding the stream as one piece)", err);
        else
            have = true;
        if (rc == 1)
            problem(st, "%s", err);
    }
    segment cur = { .begin = 0 };
    for (size_t i = 0; have && i < idx.n; i++) {
        const auxidx_rec *r = &idx.recs[i];
        if (!(r->flags & AUXIDX_TRUNCATED))
            continue;
        uint64_t cut = r->offset + r->size;
        if (r->offset > size || r->size > size - r->offset)
            cut = size;
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
    cur.end = size;
    if (cur.end > cur.begin || cur.loss_before)
        g_array_append_val(segs, cur);
    if (have)
        auxidx_free(&idx);
    return segs;
}

typedef struct pending_gap {
    bool on;
    dc_event ev;
} pending_gap;

static void gap_open(ctx *x, pending_gap *g, dc_gap_reason reason, int error, uint64_t offset,
                     uint64_t lost)
{
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

static void gap_close(ctx *x, pending_gap *g, uint64_t resume_offset, uint64_t resume_tsc)
{
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

static uint64_t cur_time(struct pt_block_decoder *d, uint64_t fallback)
{
    uint64_t t = 0;
    uint32_t lm, lc;
    if (pt_blk_time(d, &t, &lm, &lc) < 0 || !t)
        return fallback;
    return t;
}

/* Decodes [s->begin, s->end) of buf. */
static void decode_segment(ctx *x, di_cache *cache, const dc_trace_info *info,
                           const uint8_t *buf, const segment *s, pending_gap *gap)
{
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf + s->begin;
    cfg.end = (uint8_t *)buf + s->end;
    if (info && info->cpu.vendor == pcv_intel) {
        cfg.cpu = info->cpu;
        pt_cpu_errata(&cfg.errata, &cfg.cpu);
    }
    /* Calls end blocks so every call is seen (shadow stack, call_VM). */
    cfg.flags.variant.block.end_on_call = 1;
    struct pt_block_decoder *dec = pt_blk_alloc_decoder(&cfg);
    if (!dec) {
        gap_open(x, gap, DC_GAP_DECODE, -pte_nomem, s->begin, 0);
        return;
    }
    di_image *im = NULL;
    char err[512];
    int status = pt_blk_sync_forward(dec);
    bool first_sync = true;
    forget_flow(x);
    while (!x->stop) {
        if (status < 0) {
            if (status == -pte_eos) {
                if (gap->on)
                    gap->ev.end_offset = s->end;
                break;
            }
            /* Not synchronized: nothing before the next PSB can be used. */
            uint64_t off = 0;
            if (pt_blk_get_offset(dec, &off) < 0)
                off = 0;
            gap_open(x, gap, DC_GAP_DECODE, status, s->begin + off, 0);
            status = pt_blk_sync_forward(dec);
            forget_flow(x);
            continue;
        }
        /* Synchronized here. */
        uint64_t now = cur_time(dec, x->tsc);
        x->tsc = now;
        if (!im) {
            im = di_image_new(cache, now, err, sizeof err);
            if (!im) {
                problem(x->st, "%s", err);
                gap_open(x, gap, DC_GAP_DECODE, -pte_nomem, s->begin, 0);
                break;
            }
            pt_blk_set_image(dec, di_image_get(im));
        }
        uint64_t sync_off = 0;
        pt_blk_get_sync_offset(dec, &sync_off);
        if (first_sync && sync_off > 0 && !gap->on)   /* bytes before the first PSB */
            gap_open(x, gap, DC_GAP_DECODE, -pte_nosync, s->begin, 0);
        first_sync = false;
        if (gap->on)
            gap_close(x, gap, s->begin + sync_off, now);
        if (!x->st->first_tsc || (now && now < x->st->first_tsc))
            x->st->first_tsc = now;

        /* Decode until the next error. */
        for (;;) {
            while (status & pts_event_pending) {
                struct pt_event ev;
                status = pt_blk_event(dec, &ev, sizeof ev);
                if (status < 0)
                    break;
                if (ev.has_tsc && ev.tsc)
                    x->tsc = ev.tsc;
                switch (ev.type) {
                case ptev_enabled:
                    if (!ev.status_update) {
                        x->st->enables++;
                        x->resumed = true;
                        x->unknown_origin = false;
                    }
                    break;
                case ptev_disabled:
                case ptev_async_disabled:
                    x->st->disables++;
                    break;
                case ptev_overflow: {
                    uint64_t off = 0;
                    pt_blk_get_offset(dec, &off);
                    gap_open(x, gap, DC_GAP_OVERFLOW, 0, s->begin + off, 0);
                    gap_close(x, gap, s->begin + off, x->tsc);
                    forget_flow(x);
                    break;
                }
                default:
                    break;
                }
            }
            if (status < 0 || x->stop)
                break;
            uint64_t t = cur_time(dec, x->tsc);
            if (t > x->tsc)
                x->tsc = t;
            if (x->tsc >= di_image_next_change(im)) {
                int rc = di_image_advance(im, x->tsc);
                if (rc == 1)
                    pt_blk_set_image(dec, di_image_get(im));
                else if (rc < 0)
                    problem(x->st, "%s: cannot update the code image at tsc %" PRIu64,
                            x->m->code_path, x->tsc);
            }
            struct pt_block blk;
            memset(&blk, 0, sizeof blk);
            status = pt_blk_next(dec, &blk, sizeof blk);
            t = cur_time(dec, x->tsc);
            if (t > x->tsc)
                x->tsc = t;
            if (blk.ninsn) {
                /* The thread went through the call of a site HotSpot resolves
                 * (model.h): if it went to the stub the site's pending patch
                 * replaced, the runtime patches the site now. */
                if (x->resolve_site && !blk.speculative &&
                    di_image_resolve_call(im, x->resolve_site, blk.ip) < 0)
                    problem(x->st, "%s: cannot update the code image at tsc %" PRIu64,
                            x->m->code_path, x->tsc);
                x->resolve_site = di_cache_call_site(cache, blk.end_ip) ? blk.end_ip : 0;
                if (x->block)
                    x->block(&blk, x->tsc, x->sink_ctx);
                on_block(x, &blk);
                if (x->progress && !(x->st->blocks & PROGRESS_MASK)) {
                    uint64_t off = 0;
                    pt_blk_get_offset(dec, &off);
                    x->progress(s->begin + off, x->total_bytes, x->sink_ctx);
                }
            }
            if (status < 0)
                break;
        }
        if (x->stop)
            break;
        if (status == -pte_eos)
            break;
        if (status < 0) {
            uint64_t off = 0;
            pt_blk_get_offset(dec, &off);
            gap_open(x, gap, status == -pte_nomap ? DC_GAP_NOCODE : DC_GAP_DECODE, status,
                     s->begin + off, 0);
            status = pt_blk_sync_forward(dec);
            forget_flow(x);
        }
    }
    if (im) {
        const di_stats *ds = di_image_stats(im);
        x->st->image_rebuilds += ds->rebuilds;
        x->st->image_sections += ds->sections_added;
        x->st->patches_resolved += ds->patches_resolved;
    }
    pt_blk_free_decoder(dec);
    di_image_free(im);
}

int dc_decode_stream(const dm_model *m, di_cache *cache, const dc_trace_info *info,
                     const char *pt_path, const char *idx_path, const dc_output *out,
                     dc_stats *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    int fd = open(pt_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", pt_path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", pt_path);
        close(fd);
        return -1;
    }
    uint64_t size = (uint64_t)sb.st_size;
    st->pt_bytes = size;
    const uint8_t *buf = NULL;
    if (size) {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            snprintf(err, errlen, "%s: cannot map %" PRIu64 " bytes: %s", pt_path, size,
                     strerror(errno));
            close(fd);
            return -1;
        }
        buf = p;
    }
    close(fd);

    ctx *x = g_new0(ctx, 1);
    x->m = m;
    x->sink = out->sink;
    x->block = out->block;
    x->progress = out->progress;
    x->total_bytes = size;
    x->sink_ctx = out->ctx;
    x->st = st;
    x->iscache = di_cache_iscache(cache);
    x->jp = jp_new(m);
    forget_flow(x);
    GArray *segs = segments(size, idx_path, st);
    st->segments = segs->len;
    pending_gap gap = { 0 };
    for (guint i = 0; i < segs->len && !x->stop; i++) {
        const segment *s = &g_array_index(segs, segment, i);
        if (s->loss_before) {
            /* One gap per loss, as the collector recorded them: a gap
             * still open from the segment before ends here. */
            if (gap.on)
                gap_close(x, &gap, s->begin, 0);
            gap_open(x, &gap, DC_GAP_LOST, 0, s->begin, s->lost_before);
            gap.ev.end_offset = s->begin;
        }
        if (s->end > s->begin)
            decode_segment(x, cache, info, buf, s, &gap);
    }
    if (gap.on && !x->stop) {
        uint64_t end = gap.ev.end_offset > gap.ev.offset ? gap.ev.end_offset : size;
        gap_close(x, &gap, end, 0);
    }
    flush_pending(x);
    st->last_tsc = x->tsc;
    if (x->progress)
        x->progress(size, size, x->sink_ctx);
    int rc = x->stop ? 1 : 0;
    g_array_free(segs, TRUE);
    jp_free(x->jp);
    g_free(x);
    if (buf)
        munmap((void *)buf, size);
    return rc;
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
    return n;
}
