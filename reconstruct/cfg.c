#include "reconstruct/cfg.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jvm.h"
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

/* What rc_cfg_build works on and with, step by step. */
typedef struct builder {
    const uint8_t *code;
    uint32_t code_len;
    const rc_handler *h;
    uint32_t nh;
    char *err;
    size_t errlen;
    int32_t *idx_of;       /* bci -> instruction index, -1 inside one */
    uint32_t *bci;         /* instruction index -> bci */
    uint32_t n, njsr, nret;
    uint32_t *stamp;       /* per target: the instruction that last added an edge to it */
    uint64_t xtotal;       /* (instruction, handler) pairs */
    uint32_t *xcount;      /* instruction i's handlers: xlist[xcount[i], xcount[i + 1]) */
    uint64_t *xlist;
    uint32_t *jsr_next;    /* the instructions after a jsr: where a ret may go */
    uint32_t nj;
    ebuf eb;
    uint32_t *first;       /* instruction i's edges: eb.e[first[i], first[i + 1]) */
} builder;

static bool is_jsr(uint8_t op) { return op == JVM_JSR || op == JVM_JSR_W; }

static int out_of_memory(builder *b, uint32_t pc)
{
    return cf_fail(b->err, b->errlen, "bci", pc, "out of memory");
}

/* 1. Instruction boundaries. */
static int find_instructions(builder *b)
{
    const uint8_t *code = b->code;
    for (uint32_t i = 0; i < b->code_len; i++)
        b->idx_of[i] = -1;
    for (uint32_t pc = 0; pc < b->code_len;) {
        int32_t len = cf_insn_len(code, b->code_len, pc, b->err, b->errlen);
        if (len < 0)
            return -1;
        b->idx_of[pc] = (int32_t)b->n;
        b->bci[b->n++] = pc;
        uint8_t op = code[pc];
        if (is_jsr(op))
            b->njsr++;
        else if (op == JVM_RET || (op == JVM_WIDE && code[pc + 1] == JVM_RET))
            b->nret++;
        pc += (uint32_t)len;
    }
    return 0;
}

/* The instructions [*s, *e) handler k covers. */
static void handler_range(const builder *b, uint32_t k, uint32_t *s, uint32_t *e)
{
    *s = (uint32_t)b->idx_of[b->h[k].start_pc];
    *e = b->h[k].end_pc < b->code_len ? (uint32_t)b->idx_of[b->h[k].end_pc] : b->n;
}

/* 2. Handlers: start and handler at instruction starts, end at one or at
 * the end; exception and ret edges within bounds. */
static int check_handlers(builder *b)
{
    uint32_t code_len = b->code_len;
    for (uint32_t k = 0; k < b->nh; k++) {
        const rc_handler *x = &b->h[k];
        if (x->start_pc >= x->end_pc || x->end_pc > code_len || x->handler_pc >= code_len ||
            b->idx_of[x->start_pc] < 0 || b->idx_of[x->handler_pc] < 0 ||
            (x->end_pc < code_len && b->idx_of[x->end_pc] < 0))
            return cf_fail(b->err, b->errlen, "bci", x->start_pc,
                  "exception handler %u [%u, %u) -> %u does not fall on instruction boundaries",
                  k, x->start_pc, x->end_pc, x->handler_pc);
        uint32_t s, e;
        handler_range(b, k, &s, &e);
        b->xtotal += e - s;
    }
    if (b->xtotal > MAX_EXC_EDGES)
        return cf_fail(b->err, b->errlen, "bci", 0,
                       "exception table covers %llu instruction slots: too many",
                       (unsigned long long)b->xtotal);
    if ((uint64_t)b->njsr * b->nret > MAX_RET_EDGES)
        return cf_fail(b->err, b->errlen, "bci", 0, "%u jsr x %u ret: too many edges", b->njsr,
                       b->nret);
    return 0;
}

/* (instruction, handler instruction) pairs in table order, bucketed by
 * instruction with a counting sort (stable: handler order is kept); and
 * the instructions after each jsr. */
static int list_handlers(builder *b)
{
    uint32_t n = b->n;
    b->xcount = calloc((size_t)n + 1, sizeof *b->xcount);
    b->xlist = malloc((b->xtotal ? b->xtotal : 1) * sizeof *b->xlist);
    b->jsr_next = malloc((b->njsr ? b->njsr : 1) * sizeof *b->jsr_next);
    if (!b->xcount || !b->xlist || !b->jsr_next)
        return out_of_memory(b, 0);
    uint32_t s, e;
    for (uint32_t k = 0; k < b->nh; k++) {
        handler_range(b, k, &s, &e);
        for (uint32_t i = s; i < e; i++)
            b->xcount[i + 1]++;
    }
    for (uint32_t i = 0; i < n; i++)
        b->xcount[i + 1] += b->xcount[i];
    uint32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!fill)
        return out_of_memory(b, 0);
    memcpy(fill, b->xcount, ((size_t)n + 1) * sizeof *fill);
    for (uint32_t k = 0; k < b->nh; k++) {
        handler_range(b, k, &s, &e);
        uint32_t t = (uint32_t)b->idx_of[b->h[k].handler_pc];
        for (uint32_t i = s; i < e; i++)
            b->xlist[fill[i]++] = t;
    }
    free(fill);
    for (uint32_t i = 0; i < n; i++)
        if (is_jsr(b->code[b->bci[i]]) && i + 1 < n)
            b->jsr_next[b->nj++] = i + 1;
    return 0;
}

static int push_ret_edges(builder *b)
{
    int rc = 0;
    for (uint32_t k = 0; k < b->nj; k++)
        rc |= push(&b->eb, b->jsr_next[k], RC_EDGE_TAKEN);
    return rc;
}

/* A switch's edges: default first, then the cases; each target once. 0,
 * -1 when out of memory, 1 for a target that is not an instruction. */
static int push_switch_edges(builder *b, uint32_t i)
{
    uint32_t pc = b->bci[i];
    const uint8_t *s = b->code + pc + 1 + (4 - (pc + 1) % 4) % 4;
    uint32_t ncase;
    const uint8_t *tab;
    size_t step;
    if (b->code[pc] == JVM_TABLESWITCH) {
        ncase = (uint32_t)((int64_t)(int32_t)rbe32(s + 8) - (int32_t)rbe32(s + 4) + 1);
        tab = s + 12;
        step = 4;
    } else {
        ncase = rbe32(s + 4);
        tab = s + 8 + 4;
        step = 8;
    }
    int rc = 0;
    for (uint64_t k = 0; k <= ncase; k++) {
        int32_t off = (int32_t)rbe32(k == 0 ? s : tab + (k - 1) * step);
        int64_t t = target(b->idx_of, b->code_len, pc, off);
        if (t < 0)
            return 1;
        if (b->stamp[t] != i + 1) {
            b->stamp[t] = i + 1;
            rc |= push(&b->eb, (uint32_t)t, RC_EDGE_SWITCH);
        }
    }
    return rc;
}

/* The edges of instruction i by its opcode, then to its handlers: 0, -1
 * when out of memory, 1 for a branch target that is not an instruction. */
static int push_edges(builder *b, uint32_t i)
{
    uint32_t pc = b->bci[i], n = b->n;
    const uint8_t *c = b->code + pc;
    uint8_t op = c[0];
    int rc = 0;
    int64_t t;
    switch (op) {
    case JVM_IFEQ ... JVM_IF_ACMPNE: case JVM_IFNULL: case JVM_IFNONNULL:
        t = target(b->idx_of, b->code_len, pc, (int16_t)(c[1] << 8 | c[2]));
        if (t < 0)
            return 1;
        if (i + 1 < n)
            rc |= push(&b->eb, i + 1, RC_EDGE_NEXT);
        rc |= push(&b->eb, (uint32_t)t, RC_EDGE_TAKEN);
        break;
    case JVM_GOTO: case JVM_JSR:
        t = target(b->idx_of, b->code_len, pc, (int16_t)(c[1] << 8 | c[2]));
        if (t < 0)
            return 1;
        rc |= push(&b->eb, (uint32_t)t, RC_EDGE_TAKEN);
        break;
    case JVM_GOTO_W: case JVM_JSR_W:
        t = target(b->idx_of, b->code_len, pc, (int32_t)rbe32(c + 1));
        if (t < 0)
            return 1;
        rc |= push(&b->eb, (uint32_t)t, RC_EDGE_TAKEN);
        break;
    case JVM_RET:
        rc |= push_ret_edges(b);
        break;
    case JVM_WIDE:
        if (c[1] == JVM_RET)
            rc |= push_ret_edges(b);
        else if (i + 1 < n)
            rc |= push(&b->eb, i + 1, RC_EDGE_NEXT);
        break;
    case JVM_TABLESWITCH: case JVM_LOOKUPSWITCH: {
        int sw = push_switch_edges(b, i);
        if (sw > 0)
            return 1;
        rc |= sw;
        break;
    }
    case JVM_IRETURN ... JVM_RETURN: case JVM_ATHROW:
        break;
    default:
        if (i + 1 < n)
            rc |= push(&b->eb, i + 1, RC_EDGE_NEXT);
        break;
    }
    /* Exception edges, each handler once (stamps of the other half). */
    for (uint32_t k = b->xcount[i]; k < b->xcount[i + 1]; k++) {
        uint32_t x = (uint32_t)b->xlist[k];
        if (b->stamp[x] != i + 1 + 0x80000000u) {
            b->stamp[x] = i + 1 + 0x80000000u;
            rc |= push(&b->eb, x, RC_EDGE_EXCEPTION);
        }
    }
    return rc ? -1 : 0;
}

/* 3. Edges. */
static int add_edges(builder *b)
{
    b->first = malloc(((size_t)b->n + 1) * sizeof *b->first);
    if (!b->first)
        return out_of_memory(b, 0);
    for (uint32_t i = 0; i < b->n; i++) {
        b->first[i] = (uint32_t)b->eb.n;
        uint32_t pc = b->bci[i];
        int rc = push_edges(b, i);
        if (rc < 0)
            return out_of_memory(b, pc);
        if (rc > 0)
            return cf_fail(b->err, b->errlen, "bci", pc,
                           "%s: branch target is not an instruction of the method",
                           cf_op_name(b->code[pc]));
    }
    b->first[b->n] = (uint32_t)b->eb.n;
    return 0;
}

/* 4. One block: header, bci, first, edges, op, cyclic. */
static rc_cfg *assemble(builder *b)
{
    uint32_t n = b->n;
    size_t nedge = b->eb.n;
    size_t sz = sizeof(rc_cfg) + (size_t)n * 4 + ((size_t)n + 1) * 4 + nedge * sizeof(rc_edge) +
                2 * (size_t)n;
    rc_cfg *g = malloc(sz);
    if (!g) {
        out_of_memory(b, 0);
        return NULL;
    }
    char *m = (char *)(g + 1);
    uint32_t *gbci = (uint32_t *)m;
    memcpy(gbci, b->bci, (size_t)n * 4);
    uint32_t *gfirst = gbci + n;
    memcpy(gfirst, b->first, ((size_t)n + 1) * 4);
    rc_edge *gedge = (rc_edge *)(gfirst + n + 1);
    if (nedge)
        memcpy(gedge, b->eb.e, nedge * sizeof *gedge);
    uint8_t *gop = (uint8_t *)(gedge + nedge);
    for (uint32_t i = 0; i < n; i++)
        gop[i] = b->code[b->bci[i]];
    g->ninsn = n;
    g->bci = gbci;
    g->first = gfirst;
    g->edge = gedge;
    g->op = gop;
    uint8_t *gcyc = gop + n;
    g->cyclic = gcyc;
    if (mark_cycles(n, gfirst, gedge, gcyc) < 0) {
        free(g);
        out_of_memory(b, 0);
        return NULL;
    }
    return g;
}

rc_cfg *rc_cfg_build(const uint8_t *code, uint32_t code_len, const rc_handler *h, uint32_t nh,
                     char *err, size_t errlen)
{
    builder b = { .code = code, .code_len = code_len, .h = h, .nh = nh, .err = err,
                  .errlen = errlen };
    rc_cfg *g = NULL;
    b.idx_of = malloc((size_t)code_len * sizeof *b.idx_of);
    b.bci = malloc((size_t)code_len * sizeof *b.bci);
    b.stamp = calloc((size_t)code_len + 1, sizeof *b.stamp);
    if (!b.idx_of || !b.bci || !b.stamp)
        out_of_memory(&b, 0);
    else if (find_instructions(&b) == 0 && check_handlers(&b) == 0 && list_handlers(&b) == 0 &&
             add_edges(&b) == 0)
        g = assemble(&b);
    free(b.idx_of);
    free(b.bci);
    free(b.stamp);
    free(b.jsr_next);
    free(b.xcount);
    free(b.xlist);
    free(b.eb.e);
    free(b.first);
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
        if ((op >= JVM_IFEQ && op <= JVM_JSR) || op == JVM_IFNULL || op == JVM_IFNONNULL) {
            t = (int64_t)pc + (int16_t)(b[1] << 8 | b[2]);
            bad = t < 0 || !IS_START((uint64_t)t);
        } else if (op == JVM_GOTO_W || op == JVM_JSR_W) {
            t = (int64_t)pc + (int32_t)rbe32(b + 1);
            bad = t < 0 || !IS_START((uint64_t)t);
        } else if (op == JVM_TABLESWITCH || op == JVM_LOOKUPSWITCH) {
            const uint8_t *s = b + 1 + (4 - (pc + 1) % 4) % 4;
            uint64_t ncase = op == JVM_TABLESWITCH
                                 ? (uint64_t)((int64_t)(int32_t)rbe32(s + 8) -
                                              (int32_t)rbe32(s + 4) + 1)
                                 : rbe32(s + 4);
            const uint8_t *tab = op == JVM_TABLESWITCH ? s + 12 : s + 12;
            size_t step = op == JVM_TABLESWITCH ? 4 : 8;
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
