#include "reconstruct/cfg.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/classfile.h"

/* Limits that no real method reaches (code is at most 65535 bytes); they keep
 * hostile input from building quadratic graphs. */
#define MAX_EXC_EDGES (1u << 22)
#define MAX_RET_EDGES (1u << 22)


static uint32_t rbe32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

typedef struct ebuf {
    rc_edge *e;
    size_t n, cap;
} ebuf;

static int push(ebuf *b, uint32_t to, uint8_t kind)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        rc_edge *e = realloc(b->e, cap * sizeof *e);
        if (!e)
            return -1;
        b->e = e;
        b->cap = cap;
    }
    b->e[b->n].to = to;
    b->e[b->n].kind = kind;
    b->n++;
    return 0;
}

void rc_cfg_free(rc_cfg *g)
{
    free(g);
}

/* A branch target bci+off as an instruction index, or -1. */
static int64_t target(const int32_t *idx_of, uint32_t code_len, uint32_t bci, int64_t off)
{
    int64_t t = (int64_t)bci + off;
    if (t < 0 || t >= code_len || idx_of[t] < 0)
        return -1;
    return idx_of[t];
}

/* Sets cyc[i] = 1 for each instruction on a cycle: a strongly connected
 * component of more than one instruction, or one with an edge to itself.
 * Tarjan's algorithm with an explicit stack (methods can be 64 KiB of
 * straight code). 0, or -1 when out of memory. */
static int mark_cycles(uint32_t n, const uint32_t *first, const rc_edge *edge, uint8_t *cyc)
{
    memset(cyc, 0, n);
    if (!n)
        return 0;
    uint32_t *index = malloc((size_t)n * sizeof *index);   /* 0: not visited */
    uint32_t *low = malloc((size_t)n * sizeof *low);
    uint32_t *scc = malloc((size_t)n * sizeof *scc);       /* Tarjan's stack */
    uint32_t *path = malloc((size_t)n * sizeof *path);     /* DFS: node */
    uint32_t *next = malloc((size_t)n * sizeof *next);     /* DFS: its next edge */
    uint8_t *on = calloc(n, 1);
    int rc = -1;
    if (!index || !low || !scc || !path || !next || !on)
        goto out;
    memset(index, 0, (size_t)n * sizeof *index);
    uint32_t counter = 0, nscc = 0;
    for (uint32_t root = 0; root < n; root++) {
        if (index[root])
            continue;
        uint32_t depth = 0;
        path[depth] = root;
        next[depth++] = first[root];
        index[root] = low[root] = ++counter;
        scc[nscc++] = root;
        on[root] = 1;
        while (depth) {
            uint32_t v = path[depth - 1];
            if (next[depth - 1] < first[v + 1]) {
                uint32_t w = edge[next[depth - 1]++].to;
                if (w == v)
                    cyc[v] = 1;
                if (!index[w]) {
                    index[w] = low[w] = ++counter;
                    scc[nscc++] = w;
                    on[w] = 1;
                    path[depth] = w;
                    next[depth++] = first[w];
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            depth--;
            if (depth && low[v] < low[path[depth - 1]])
                low[path[depth - 1]] = low[v];
            if (low[v] == index[v]) {
                uint32_t k = nscc;
                while (scc[k - 1] != v)
                    k--;
                k--;                     /* scc[k .. nscc) is v's component */
                bool many = nscc - k > 1;
                for (uint32_t j = k; j < nscc; j++) {
                    on[scc[j]] = 0;
                    if (many)
                        cyc[scc[j]] = 1;
                }
                nscc = k;
            }
        }
    }
    rc = 0;
out:
    free(index);
    free(low);
    free(scc);
    free(path);
    free(next);
    free(on);
    return rc;
}

rc_cfg *rc_cfg_build(const uint8_t *code, uint32_t code_len, const rc_handler *h, uint32_t nh,
                     char *err, size_t errlen)
{
    rc_cfg *g = NULL;
    int32_t *idx_of = malloc((size_t)code_len * sizeof *idx_of);
    uint32_t *bci = malloc((size_t)code_len * sizeof *bci);
    uint32_t *stamp = calloc((size_t)code_len + 1, sizeof *stamp);
    uint32_t *jsr_next = NULL, *xcount = NULL;
    uint64_t *xlist = NULL;
    ebuf eb = { 0 };
    if (!idx_of || !bci || !stamp) {
        cf_fail(err, errlen, "bci", 0, "out of memory");
        goto out;
    }
    /* 1. Instruction boundaries. */
    uint32_t n = 0, njsr = 0, nret = 0;
    for (uint32_t i = 0; i < code_len; i++)
        idx_of[i] = -1;
    for (uint32_t pc = 0; pc < code_len;) {
        int32_t len = cf_insn_len(code, code_len, pc, err, errlen);
        if (len < 0)
            goto out;
        idx_of[pc] = (int32_t)n;
        bci[n++] = pc;
        uint8_t op = code[pc];
        if (op == 168 || op == 201)
            njsr++;
        else if (op == 169 || (op == CF_OP_WIDE && code[pc + 1] == 169))
            nret++;
        pc += (uint32_t)len;
    }
    /* 2. Handlers: start and handler at instruction starts, end at one or at the end. */
    uint64_t xtotal = 0;
    for (uint32_t k = 0; k < nh; k++) {
        const rc_handler *x = &h[k];
        if (x->start_pc >= x->end_pc || x->end_pc > code_len || x->handler_pc >= code_len ||
            idx_of[x->start_pc] < 0 || idx_of[x->handler_pc] < 0 ||
            (x->end_pc < code_len && idx_of[x->end_pc] < 0)) {
            cf_fail(err, errlen, "bci", x->start_pc,
                  "exception handler %u [%u, %u) -> %u does not fall on instruction boundaries",
                  k, x->start_pc, x->end_pc, x->handler_pc);
            goto out;
        }
        uint32_t e = x->end_pc < code_len ? (uint32_t)idx_of[x->end_pc] : n;
        xtotal += e - (uint32_t)idx_of[x->start_pc];
    }
    if (xtotal > MAX_EXC_EDGES) {
        cf_fail(err, errlen, "bci", 0, "exception table covers %llu instruction slots: too many",
              (unsigned long long)xtotal);
        goto out;
    }
    if ((uint64_t)njsr * nret > MAX_RET_EDGES) {
        cf_fail(err, errlen, "bci", 0, "%u jsr x %u ret: too many edges", njsr, nret);
        goto out;
    }
    /* (instruction, handler instruction) pairs in table order, bucketed by
     * instruction with a counting sort (stable: handler order is kept). */
    xcount = calloc((size_t)n + 1, sizeof *xcount);
    xlist = malloc((xtotal ? xtotal : 1) * sizeof *xlist);
    jsr_next = malloc((njsr ? njsr : 1) * sizeof *jsr_next);
    if (!xcount || !xlist || !jsr_next) {
        cf_fail(err, errlen, "bci", 0, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < nh; k++) {
        uint32_t s = (uint32_t)idx_of[h[k].start_pc];
        uint32_t e = h[k].end_pc < code_len ? (uint32_t)idx_of[h[k].end_pc] : n;
        for (uint32_t i = s; i < e; i++)
            xcount[i + 1]++;
    }
    for (uint32_t i = 0; i < n; i++)
        xcount[i + 1] += xcount[i];
    {
        uint32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
        if (!fill) {
            cf_fail(err, errlen, "bci", 0, "out of memory");
            goto out;
        }
        memcpy(fill, xcount, ((size_t)n + 1) * sizeof *fill);
        for (uint32_t k = 0; k < nh; k++) {
            uint32_t s = (uint32_t)idx_of[h[k].start_pc];
            uint32_t e = h[k].end_pc < code_len ? (uint32_t)idx_of[h[k].end_pc] : n;
            uint32_t t = (uint32_t)idx_of[h[k].handler_pc];
            for (uint32_t i = s; i < e; i++)
                xlist[fill[i]++] = t;
        }
        free(fill);
    }
    uint32_t nj = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t op = code[bci[i]];
        if ((op == 168 || op == 201) && i + 1 < n)
            jsr_next[nj++] = i + 1;
    }
    /* 3. Edges. */
    uint32_t *first = malloc(((size_t)n + 1) * sizeof *first);
    if (!first) {
        cf_fail(err, errlen, "bci", 0, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        first[i] = (uint32_t)eb.n;
        uint32_t pc = bci[i];
        uint8_t op = code[pc];
        const uint8_t *b = code + pc;
        int rc = 0;
        int64_t t;
        switch (op) {
        case 153 ... 166: case 198: case 199: /* if<cond>, if_icmp, if_acmp, ifnull, ifnonnull */
            t = target(idx_of, code_len, pc, (int16_t)(b[1] << 8 | b[2]));
            if (t < 0)
                goto bad_target;
            if (i + 1 < n)
                rc |= push(&eb, i + 1, RC_EDGE_NEXT);
            rc |= push(&eb, (uint32_t)t, RC_EDGE_TAKEN);
            break;
        case 167: case 168: /* goto, jsr */
            t = target(idx_of, code_len, pc, (int16_t)(b[1] << 8 | b[2]));
            if (t < 0)
                goto bad_target;
            rc |= push(&eb, (uint32_t)t, RC_EDGE_TAKEN);
            break;
        case 200: case 201: /* goto_w, jsr_w */
            t = target(idx_of, code_len, pc, (int32_t)rbe32(b + 1));
            if (t < 0)
                goto bad_target;
            rc |= push(&eb, (uint32_t)t, RC_EDGE_TAKEN);
            break;
        case 169: /* ret */
            for (uint32_t k = 0; k < nj; k++)
                rc |= push(&eb, jsr_next[k], RC_EDGE_TAKEN);
            break;
        case CF_OP_WIDE:
            if (b[1] == 169) {
                for (uint32_t k = 0; k < nj; k++)
                    rc |= push(&eb, jsr_next[k], RC_EDGE_TAKEN);
            } else if (i + 1 < n) {
                rc |= push(&eb, i + 1, RC_EDGE_NEXT);
            }
            break;
        case CF_OP_TABLESWITCH: case CF_OP_LOOKUPSWITCH: {
            const uint8_t *s = b + 1 + (4 - (pc + 1) % 4) % 4;
            uint32_t ncase;
            const uint8_t *tab;
            size_t step;
            if (op == CF_OP_TABLESWITCH) {
                ncase = (uint32_t)((int64_t)(int32_t)rbe32(s + 8) - (int32_t)rbe32(s + 4) + 1);
                tab = s + 12;
                step = 4;
            } else {
                ncase = rbe32(s + 4);
                tab = s + 8 + 4;
                step = 8;
            }
            /* default first, then the cases; each target once. */
            for (uint64_t k = 0; k <= ncase; k++) {
                int32_t off = (int32_t)rbe32(k == 0 ? s : tab + (k - 1) * step);
                t = target(idx_of, code_len, pc, off);
                if (t < 0)
                    goto bad_target;
                if (stamp[t] != i + 1) {
                    stamp[t] = i + 1;
                    rc |= push(&eb, (uint32_t)t, RC_EDGE_SWITCH);
                }
            }
            break;
        }
        case 172 ... 177: case 191: /* returns, athrow */
            break;
        default:
            if (i + 1 < n)
                rc |= push(&eb, i + 1, RC_EDGE_NEXT);
            break;
        }
        /* Exception edges, each handler once (stamps of the other half). */
        for (uint32_t k = xcount[i]; k < xcount[i + 1]; k++) {
            uint32_t x = xlist[k];
            if (stamp[x] != i + 1 + 0x80000000u) {
                stamp[x] = i + 1 + 0x80000000u;
                rc |= push(&eb, x, RC_EDGE_EXCEPTION);
            }
        }
        if (rc) {
            free(first);
            cf_fail(err, errlen, "bci", pc, "out of memory");
            goto out;
        }
        continue;
    bad_target:
        free(first);
        cf_fail(err, errlen, "bci", pc, "%s: branch target is not an instruction of the method",
              cf_op_name(op));
        goto out;
    }
    first[n] = (uint32_t)eb.n;
    /* 4. One block: header, bci, first, edges, op, cyclic. */
    size_t sz = sizeof *g + (size_t)n * 4 + ((size_t)n + 1) * 4 + eb.n * sizeof(rc_edge) + 2 * (size_t)n;
    g = malloc(sz);
    if (!g) {
        free(first);
        cf_fail(err, errlen, "bci", 0, "out of memory");
        goto out;
    }
    char *m = (char *)(g + 1);
    uint32_t *gbci = (uint32_t *)m;
    memcpy(gbci, bci, (size_t)n * 4);
    uint32_t *gfirst = gbci + n;
    memcpy(gfirst, first, ((size_t)n + 1) * 4);
    rc_edge *gedge = (rc_edge *)(gfirst + n + 1);
    if (eb.n)
        memcpy(gedge, eb.e, eb.n * sizeof *gedge);
    uint8_t *gop = (uint8_t *)(gedge + eb.n);
    for (uint32_t i = 0; i < n; i++)
        gop[i] = code[bci[i]];
    free(first);
    g->ninsn = n;
    g->bci = gbci;
    g->first = gfirst;
    g->edge = gedge;
    g->op = gop;
    uint8_t *gcyc = gop + n;
    g->cyclic = gcyc;
    if (mark_cycles(n, gfirst, gedge, gcyc) < 0) {
        free(g);
        g = NULL;
        cf_fail(err, errlen, "bci", 0, "out of memory");
    }
out:
    free(idx_of);
    free(bci);
    free(stamp);
    free(jsr_next);
    free(xcount);
    free(xlist);
    free(eb.e);
    return g;
}

int64_t rc_cfg_index(const rc_cfg *g, uint32_t bci)
{
    if (!g)
        return -1;
    uint32_t lo = 0, hi = g->ninsn;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (g->bci[mid] < bci)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->ninsn && g->bci[lo] == bci ? (int64_t)lo : -1;
}

int rc_code_check(const uint8_t *code, uint32_t code_len, const rc_handler *h, uint32_t nh,
                  char *err, size_t errlen)
{
    uint8_t start[65536 / 8];
    if (code_len == 0 || code_len > 65535)
        return cf_fail(err, errlen, "bci", 0, "code length %u is out of range", code_len);
    memset(start, 0, (code_len + 7) / 8);
#define IS_START(x) ((x) < code_len && (start[(x) >> 3] >> ((x) & 7) & 1))
    for (uint32_t pc = 0; pc < code_len;) {
        int32_t len = cf_insn_len(code, code_len, pc, err, errlen);
        if (len < 0)
            return -1;
        start[pc >> 3] |= (uint8_t)(1u << (pc & 7));
        pc += (uint32_t)len;
    }
    for (uint32_t k = 0; k < nh; k++) {
        const rc_handler *x = &h[k];
        if (x->start_pc >= x->end_pc || !IS_START(x->start_pc) || !IS_START(x->handler_pc) ||
            (x->end_pc != code_len && !IS_START(x->end_pc)))
            return cf_fail(err, errlen, "bci", x->start_pc,
                         "exception handler %u [%u, %u) -> %u does not fall on instruction "
                         "boundaries", k, x->start_pc, x->end_pc, x->handler_pc);
    }
    for (uint32_t pc = 0; pc < code_len;) {
        int32_t len = cf_insn_len(code, code_len, pc, NULL, 0);
        const uint8_t *b = code + pc;
        uint8_t op = b[0];
        int64_t t = 0;
        bool bad = false;
        if ((op >= 153 && op <= 168) || op == 198 || op == 199) {
            t = (int64_t)pc + (int16_t)(b[1] << 8 | b[2]);
            bad = t < 0 || !IS_START((uint64_t)t);
        } else if (op == 200 || op == 201) {
            t = (int64_t)pc + (int32_t)rbe32(b + 1);
            bad = t < 0 || !IS_START((uint64_t)t);
        } else if (op == CF_OP_TABLESWITCH || op == CF_OP_LOOKUPSWITCH) {
            const uint8_t *s = b + 1 + (4 - (pc + 1) % 4) % 4;
            uint64_t ncase = op == CF_OP_TABLESWITCH
                                 ? (uint64_t)((int64_t)(int32_t)rbe32(s + 8) -
                                              (int32_t)rbe32(s + 4) + 1)
                                 : rbe32(s + 4);
            const uint8_t *tab = op == CF_OP_TABLESWITCH ? s + 12 : s + 12;
            size_t step = op == CF_OP_TABLESWITCH ? 4 : 8;
            for (uint64_t k = 0; k <= ncase && !bad; k++) {
                int32_t off = (int32_t)rbe32(k == 0 ? s : tab + (k - 1) * step);
                t = (int64_t)pc + off;
                bad = t < 0 || !IS_START((uint64_t)t);
            }
        }
        if (bad)
            return cf_fail(err, errlen, "bci", pc, "%s: branch target %lld is not an instruction of the "
                         "method", cf_op_name(op), (long long)t);
        pc += (uint32_t)len;
    }
#undef IS_START
    return 0;
}
