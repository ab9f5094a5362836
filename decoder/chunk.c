/* The first layer of a stream's decoding (chunk.h): one chunk's blocks as
 * ops, with the call-site resolutions and stub exits followed as the thread
 * passes them, and resumption at the next branch target after a failure. */
#include "decoder/chunk.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#define RETRY_SCAN_BACK 256   /* bytes before a PSB+ event's offset to find its PSB */

/* ---- where an address is -------------------------------------------------- */

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

void dc_problem(dc_stats *st, const char *fmt, ...)
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


void dc_pass_free(pass *ps)
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

void dc_checkpoint(wctx *w, chunk *k, pass *ps, uint64_t psb)
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
void dc_decode_run(wctx *w, chunk *k, pass *ps, uint64_t stop)
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
                    dc_problem(&k->st, "%s: cannot update the code image at tsc %" PRIu64,
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
            dc_checkpoint(w, k, ps, psb);
        uint64_t t = cur_time(dec, w->tsc);
        if (t > w->tsc)
            w->tsc = t;
        if (w->tsc >= di_image_next_change(im)) {
            int rc = di_image_advance(im, w->tsc);
            if (rc == 1)
                pt_blk_set_image(dec, di_image_get(im));
            else if (rc < 0)
                dc_problem(&k->st, "%s: cannot update the code image at tsc %" PRIu64,
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
                    dc_problem(&k->st, "%s", err);
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
                dc_problem(&k->st, "%s: cannot update the code image at tsc %" PRIu64,
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

uint64_t dc_psb_header_end(const uint8_t *buf, uint64_t begin, uint64_t end, uint64_t off);

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
            uint64_t he = dc_psb_header_end(k->buf, s->begin, k->end, s->begin + rp.next_psb);
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
        dc_checkpoint(w, k, &tp, 0);
        tp.ck[0].sync_off = rp.tip_end;   /* not the made-up header's */
        op *so = push_op(k, OP_SYNC, w->tsc);
        so->ip = s->begin + rp.tip_end;
        k->st.resumes++;
        /* as far as the next PSB, or the chunk's stop */
        uint64_t tstop = rp.next_psb != UINT64_MAX && rp.next_psb < stop ? rp.next_psb - 1 : stop;
        dc_decode_run(w, k, &tp, tstop);
        /* Where it fails, the code may be older than the thread's, as after
         * a PSB: decoded again with later code. A kept retry replaces the
         * image (freeing the one tp shared with ps). */
        dc_retry_while_it_helps(w, k, &tp, tstop, &c, store, budget);
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
void dc_decode_chunk(wctx *w, chunk *k)
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
        dc_pass_free(&ps);
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
                dc_problem(&k->st, "%s", err);
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
        dc_checkpoint(w, k, &ps, sync_off);
        op *so = push_op(k, OP_SYNC, now);
        so->ip = s->begin + sync_off;
        if (!k->st.first_tsc || (now && now < k->st.first_tsc))
            k->st.first_tsc = now;

        /* Decode until the next error; where it fails, decode the stretch
         * again with the code recorded next, as long as that gets further. */
        dc_decode_run(w, k, &ps, stop);
        dc_retry_while_it_helps(w, k, &ps, stop, &cfg, store, &budget);
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
    dc_pass_free(&ps);
    di_store_free(store);
}
