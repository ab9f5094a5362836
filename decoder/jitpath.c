#include "decoder/jitpath.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <capstone/capstone.h>
#include <glib.h>

#include "decoder/x86.h"

#define MAX_WIDTH 64               /* candidate addresses per step */
#define CACHE_MAX_INSNS (8u << 20) /* addresses kept in the path cache */

/* Lazily decoded instructions of one version, by offset: 5 bytes per code
 * byte of the versions that run, dropped wholesale above TABS_MAX_BYTES. */
typedef struct vtab {
    uint64_t vaddr, size;
    const uint8_t *bytes;
    uint8_t *info;            /* 0: not decoded yet; BAD: undecodable; else len | kind << 4 */
    int32_t *target;          /* direct branch target offset, or NO_TARGET */
} vtab;

#define BAD 0x80
#define NO_TARGET INT32_MIN
#define TABS_MAX_BYTES (256u << 20)

static unsigned info_len(uint8_t i) { return i & 0x0f; }
static xfer info_kind(uint8_t i) { return (xfer)((i >> 4) & 0x07); }

typedef struct node {
    uint32_t off, pred;
    uint8_t count;            /* paths reaching it, saturated at 2 */
} node;

typedef struct pkey {
    uint32_t version, n;
    uint64_t ip, end;
} pkey;

struct jp_cache {
    const dm_model *m;
    const uint8_t *code;
    uint64_t code_size;
    csh cs;
    cs_insn *insn;
    GHashTable *tabs;         /* version index -> vtab */
    uint64_t tab_bytes;
    GHashTable *paths;        /* pkey -> uint64_t[n] (n == 0: no unique path) */
    size_t cached_insns;
    GArray *nodes;
    GArray *steps;            /* first node of each step */
    uint64_t *out;
    csh csd;                  /* with operand details, for loop steps (0: not opened) */
    cs_insn *insnd;
    GHashTable *loop_steps;   /* (version index + 1) << 40 ^ head offset -> step */
};

static void vtab_free(gpointer p)
{
    vtab *t = p;
    g_free(t->info);
    g_free(t->target);
    g_free(t);
}

static guint pkey_hash(gconstpointer p)
{
    const pkey *k = p;
    uint64_t h = k->ip * 0x9e3779b97f4a7c15ull ^ k->end ^ ((uint64_t)k->n << 32) ^ k->version;
    return (guint)(h ^ (h >> 32));
}

static gboolean pkey_equal(gconstpointer a, gconstpointer b)
{
    return !memcmp(a, b, sizeof(pkey));
}

jp_cache *jp_new(const dm_model *m)
{
    if (!m->code_size)
        return NULL;
    int fd = open(m->code_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *map = mmap(NULL, m->code_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return NULL;
    jp_cache *jc = g_new0(jp_cache, 1);
    jc->m = m;
    jc->code = map;
    jc->code_size = m->code_size;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &jc->cs) != CS_ERR_OK) {
        munmap(map, m->code_size);
        g_free(jc);
        return NULL;
    }
    jc->insn = cs_malloc(jc->cs);
    jc->tabs = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, vtab_free);
    jc->paths = g_hash_table_new_full(pkey_hash, pkey_equal, g_free, g_free);
    jc->nodes = g_array_new(FALSE, FALSE, sizeof(node));
    jc->steps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    jc->out = g_new(uint64_t, JP_MAX_INSNS);
    jc->loop_steps = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    return jc;
}

void jp_free(jp_cache *jc)
{
    if (!jc)
        return;
    cs_free(jc->insn, 1);
    cs_close(&jc->cs);
    if (jc->insnd) {
        cs_free(jc->insnd, 1);
        cs_close(&jc->csd);
    }
    g_hash_table_destroy(jc->loop_steps);
    munmap((void *)jc->code, jc->code_size);
    g_hash_table_destroy(jc->tabs);
    g_hash_table_destroy(jc->paths);
    g_array_free(jc->nodes, TRUE);
    g_array_free(jc->steps, TRUE);
    g_free(jc->out);
    g_free(jc);
}

static vtab *tab_for(jp_cache *jc, const dm_code *v)
{
    vtab *t = g_hash_table_lookup(jc->tabs, GUINT_TO_POINTER(v->index + 1));
    if (t)
        return t;
    if (v->code_offset > jc->code_size || v->size > jc->code_size - v->code_offset ||
        v->size > (1u << 30) || v->size * 5 > TABS_MAX_BYTES)
        return NULL;
    if (jc->tab_bytes + v->size * 5 > TABS_MAX_BYTES) {
        g_hash_table_remove_all(jc->tabs);
        jc->tab_bytes = 0;
    }
    jc->tab_bytes += v->size * 5;
    t = g_new0(vtab, 1);
    t->vaddr = v->vaddr;
    t->size = v->size;
    t->bytes = jc->code + v->code_offset;
    t->info = g_new0(uint8_t, v->size);
    t->target = g_new0(int32_t, v->size);
    g_hash_table_insert(jc->tabs, GUINT_TO_POINTER(v->index + 1), t);
    return t;
}

/* Decodes the instruction at offset o once. False if it cannot be. */
static bool decode_at(jp_cache *jc, vtab *t, uint64_t o)
{
    if (t->info[o])
        return t->info[o] != BAD;
    const uint8_t *p = t->bytes + o;
    size_t avail = t->size - o < 15 ? (size_t)(t->size - o) : 15;
    uint64_t addr = t->vaddr + o;
    if (!cs_disasm_iter(jc->cs, &p, &avail, &addr, jc->insn) || !jc->insn->size ||
        jc->insn->size > 15) {
        t->info[o] = BAD;
        return false;
    }
    unsigned len = jc->insn->size;
    int64_t disp = 0;
    int direct = 0;
    xfer k = x86_classify(t->bytes + o, len, &disp, &direct);
    int64_t target = (int64_t)o + len + disp;
    t->info[o] = (uint8_t)(len | (unsigned)k << 4);
    t->target[o] = direct && target >= 0 && (uint64_t)target < t->size ? (int32_t)target
                                                                         : NO_TARGET;
    return true;
}

/* Appends successor s (an offset) of node `from` to the step being built
 * (nodes from `first` on). False when the step grows too wide. */
static bool add_succ(jp_cache *jc, uint32_t first, int64_t s, uint32_t from, uint8_t count,
                     uint64_t size)
{
    if (s < 0 || (uint64_t)s >= size)
        return true;              /* leaves the version: not inside this block */
    node *nodes = (node *)(void *)jc->nodes->data;
    for (uint32_t i = first; i < jc->nodes->len; i++) {
        if (nodes[i].off == (uint32_t)s) {
            nodes[i].count = nodes[i].count + count >= 2 ? 2 : 1;
            return true;
        }
    }
    if (jc->nodes->len - first >= MAX_WIDTH)
        return false;
    node n = { (uint32_t)s, from, count };
    g_array_append_val(jc->nodes, n);
    return true;
}

static size_t search(jp_cache *jc, vtab *t, uint64_t ip, uint64_t end_ip, uint32_t ninsn)
{
    g_array_set_size(jc->nodes, 0);
    g_array_set_size(jc->steps, 0);
    node start = { (uint32_t)(ip - t->vaddr), UINT32_MAX, 1 };
    g_array_append_val(jc->nodes, start);
    uint32_t first = 0;
    g_array_append_val(jc->steps, first);
    for (uint32_t k = 0; k + 1 < ninsn; k++) {
        uint32_t lo = g_array_index(jc->steps, uint32_t, k), hi = jc->nodes->len;
        g_array_append_val(jc->steps, hi);
        for (uint32_t j = lo; j < hi; j++) {
            node cur = g_array_index(jc->nodes, node, j);
            if (!decode_at(jc, t, cur.off))
                continue;
            uint8_t info = t->info[cur.off];
            int64_t next = (int64_t)cur.off + info_len(info);
            int64_t target = t->target[cur.off] == NO_TARGET ? -1 : t->target[cur.off];
            bool ok = true;
            switch (info_kind(info)) {
            case X_OTHER:
                ok = add_succ(jc, hi, next, j, cur.count, t->size);
                break;
            case X_COND:
                ok = add_succ(jc, hi, next, j, cur.count, t->size) &&
                     add_succ(jc, hi, target, j, cur.count, t->size);
                break;
            case X_JMP_DIRECT:
                ok = add_succ(jc, hi, target, j, cur.count, t->size);
                break;
            default:
                break;            /* calls, returns, indirect: only last in a block */
            }
            if (!ok)
                return 0;
        }
        if (jc->nodes->len == hi)
            return 0;
    }
    uint32_t lo = g_array_index(jc->steps, uint32_t, ninsn - 1);
    uint32_t end_off = (uint32_t)(end_ip - t->vaddr);
    const node *nodes = (const node *)(void *)jc->nodes->data;
    for (uint32_t j = lo; j < jc->nodes->len; j++) {
        if (nodes[j].off != end_off)
            continue;
        if (nodes[j].count != 1)
            return 0;
        /* unique: walk back */
        uint32_t at = j;
        for (uint32_t k = ninsn; k-- > 0;) {
            jc->out[k] = t->vaddr + nodes[at].off;
            at = nodes[at].pred;
        }
        return ninsn;
    }
    return 0;
}

size_t jp_path(jp_cache *jc, const dm_code *v, uint64_t ip, uint64_t end_ip, uint32_t ninsn,
               const uint64_t **path)
{
    *path = NULL;
    if (!jc || !ninsn || ninsn > JP_MAX_INSNS || ip < v->vaddr || ip - v->vaddr >= v->size ||
        end_ip < v->vaddr || end_ip - v->vaddr >= v->size)
        return 0;
    pkey key = { v->index, ninsn, ip, end_ip };
    uint64_t *hit;
    if (g_hash_table_lookup_extended(jc->paths, &key, NULL, (gpointer *)&hit)) {
        *path = hit;
        return hit ? ninsn : 0;
    }
    vtab *t = tab_for(jc, v);
    size_t n = t ? search(jc, t, ip, end_ip, ninsn) : 0;
    if (jc->cached_insns + n > CACHE_MAX_INSNS) {
        g_hash_table_remove_all(jc->paths);
        jc->cached_insns = 0;
    }
    uint64_t *copy = n ? g_memdup2(jc->out, n * sizeof(uint64_t)) : NULL;
    jc->cached_insns += n + 1;
    g_hash_table_insert(jc->paths, g_memdup2(&key, sizeof key), copy);
    *path = copy;
    return n;
}

/* ---- loop steps ---------------------------------------------------------------- */

#define STEP_MAX_INSNS 4096      /* a pass longer than this is not swept */

/* The general-purpose register (0-15) that capstone's reg names, any width;
 * -1 for others. */
static int gpr_of(csh cs, unsigned reg)
{
    static const char *const legacy[8][5] = {
        { "rax", "eax", "ax", "al", "ah" }, { "rcx", "ecx", "cx", "cl", "ch" },
        { "rdx", "edx", "dx", "dl", "dh" }, { "rbx", "ebx", "bx", "bl", "bh" },
        { "rsp", "esp", "sp", "spl", "" },  { "rbp", "ebp", "bp", "bpl", "" },
        { "rsi", "esi", "si", "sil", "" },  { "rdi", "edi", "di", "dil", "" },
    };
    const char *n = cs_reg_name(cs, reg);
    if (!n)
        return -1;
    if (n[0] == 'r' && n[1] >= '0' && n[1] <= '9') {
        int k = n[1] - '0';
        if (n[2] >= '0' && n[2] <= '9')
            k = k * 10 + n[2] - '0';
        return k >= 8 && k <= 15 ? k : -1;
    }
    for (int g = 0; g < 8; g++)
        for (int w = 0; w < 5; w++)
            if (legacy[g][w][0] && !strcmp(n, legacy[g][w]))
                return g;
    return -1;
}

/* The sweep follows, from the loop head, what each register and each stack
 * slot holds as the value some location held at the head plus a constant:
 * moves copy it, a constant added moves it on, anything else makes it
 * unknown. C2 keeps a spilled induction variable in a slot (`mov
 * 0x58(%rsp),%r11d; add $16,%r11d; mov %r11d,0x58(%rsp); ... mov
 * 0x58(%rsp),%r9d; cmp 0x64(%rsp),%r9d; jl head`). */
#define SLOTS 64
#define UNKNOWN (-1)

typedef struct lval {
    int32_t of;               /* the location whose head value it is (UNKNOWN: none) */
    int64_t plus;
} lval;

typedef struct sweep {
    lval reg[16];
    int64_t slot_disp[SLOTS];
    lval slot[SLOTS];
    uint32_t nslots;
} sweep;

/* Locations: GPRs 0-15, stack slots 16 + their index. */
static lval *slot_at(sweep *w, int64_t disp)
{
    for (uint32_t i = 0; i < w->nslots; i++)
        if (w->slot_disp[i] == disp)
            return &w->slot[i];
    if (w->nslots == SLOTS)
        return NULL;
    w->slot_disp[w->nslots] = disp;
    w->slot[w->nslots] = (lval){ .of = (int32_t)(16 + w->nslots) };
    return &w->slot[w->nslots++];
}

/* A [rsp + disp] operand's slot, or NULL. */
static lval *stack_operand(jp_cache *jc, sweep *w, const cs_x86_op *o)
{
    if (o->type != X86_OP_MEM || o->mem.index != X86_REG_INVALID ||
        gpr_of(jc->csd, o->mem.base) != 4 || o->mem.segment != X86_REG_INVALID)
        return NULL;
    return slot_at(w, o->mem.disp);
}

/* What operand o holds, for a compare. */
static lval value_of(jp_cache *jc, sweep *w, const cs_x86_op *o)
{
    if (o->type == X86_OP_REG) {
        int g = gpr_of(jc->csd, o->reg);
        if (g >= 0)
            return w->reg[g];
    } else {
        lval *sl = stack_operand(jc, w, o);
        if (sl)
            return *sl;
    }
    return (lval){ .of = UNKNOWN };
}

/* The instruction's effect on the locations followed. */
static void follow(jp_cache *jc, sweep *w, const cs_insn *in)
{
    const cs_x86 *x = &in->detail->x86;
    const cs_x86_op *o = x->operands;
    lval *dst = NULL;
    int g0 = -1;
    if (x->op_count > 0) {
        if (o[0].type == X86_OP_REG && (g0 = gpr_of(jc->csd, o[0].reg)) >= 0)
            dst = &w->reg[g0];
        else if (o[0].type == X86_OP_MEM)
            dst = stack_operand(jc, w, &o[0]);
    }
    lval result = { .of = UNKNOWN };
    bool handled = false;
    switch (in->id) {
    case X86_INS_MOV:
        if (dst && x->op_count == 2 && o[1].type != X86_OP_IMM) {
            result = value_of(jc, w, &o[1]);
            handled = true;
        }
        break;
    case X86_INS_ADD:
    case X86_INS_SUB:
        if (dst && x->op_count == 2 && o[1].type == X86_OP_IMM && dst->of != UNKNOWN) {
            result = *dst;
            result.plus += in->id == X86_INS_ADD ? o[1].imm : -o[1].imm;
            handled = true;
        }
        break;
    case X86_INS_INC:
    case X86_INS_DEC:
        if (dst && dst->of != UNKNOWN) {
            result = *dst;
            result.plus += in->id == X86_INS_INC ? 1 : -1;
            handled = true;
        }
        break;
    case X86_INS_LEA:
        if (g0 >= 0 && x->op_count == 2 && o[1].mem.index == X86_REG_INVALID) {
            int b = gpr_of(jc->csd, o[1].mem.base);
            if (b >= 0 && w->reg[b].of != UNKNOWN) {
                result = w->reg[b];
                result.plus += o[1].mem.disp;
                handled = true;
            }
        }
        break;
    default:
        break;
    }
    if (handled) {
        *dst = result;
        return;
    }
    /* anything else written is not followed */
    cs_regs rr, rw;
    uint8_t nr = 0, nw = 0;
    if (cs_regs_access(jc->csd, in, rr, &nr, rw, &nw) == CS_ERR_OK)
        for (uint8_t i = 0; i < nw; i++) {
            int g = gpr_of(jc->csd, rw[i]);
            if (g >= 0)
                w->reg[g].of = UNKNOWN;
        }
    for (uint8_t i = 0; i < x->op_count; i++)
        if (o[i].type == X86_OP_MEM && (o[i].access & CS_AC_WRITE)) {
            lval *sl = stack_operand(jc, w, &o[i]);
            if (sl)
                sl->of = UNKNOWN;
        }
}

/* The step a compare's operands show: one of them its head value plus a
 * constant, the other not moving. */
static int64_t compare_step(jp_cache *jc, sweep *w, const cs_insn *in)
{
    const cs_x86 *x = &in->detail->x86;
    if (in->id != X86_INS_CMP || x->op_count != 2)
        return 0;
    lval a = value_of(jc, w, &x->operands[0]), b = value_of(jc, w, &x->operands[1]);
    int64_t sa = a.of != UNKNOWN ? a.plus : 0, sb = b.of != UNKNOWN ? b.plus : 0;
    return sa && sb ? 0 : sa ? sa : sb;
}

static int64_t sweep_step(jp_cache *jc, const dm_code *v, uint64_t head)
{
    if (!jc->insnd) {
        if (cs_open(CS_ARCH_X86, CS_MODE_64, &jc->csd) != CS_ERR_OK)
            return 0;
        cs_option(jc->csd, CS_OPT_DETAIL, CS_OPT_ON);
        jc->insnd = cs_malloc(jc->csd);
    }
    if (v->code_offset > jc->code_size || v->size > jc->code_size - v->code_offset ||
        head < v->vaddr || head >= v->vaddr + v->size)
        return 0;
    const uint8_t *p = jc->code + v->code_offset + (head - v->vaddr);
    size_t avail = v->size - (head - v->vaddr);
    uint64_t addr = head;
    sweep *w = g_new0(sweep, 1);
    for (int g = 0; g < 16; g++)
        w->reg[g] = (lval){ .of = g };
    int64_t step = 0, pending = 0;
    for (size_t n = 0; n < STEP_MAX_INSNS && avail &&
                       cs_disasm_iter(jc->csd, &p, &avail, &addr, jc->insnd); n++) {
        const cs_insn *in = jc->insnd;
        uint64_t target;
        if (x86_direct_target(in->bytes, in->size, in->address, &target) && target == head) {
            /* the jump back: a conditional one right after the compare */
            if (x86_classify(in->bytes, in->size, NULL, NULL) == X_COND)
                step = pending;
            break;
        }
        pending = compare_step(jc, w, in);
        follow(jc, w, in);
    }
    g_free(w);
    return step;
}

int64_t jp_loop_step(jp_cache *jc, const dm_code *v, uint64_t head)
{
    if (!jc || !v)
        return 0;
    int64_t key = (int64_t)((uint64_t)(v->index + 1) << 40 ^ (head - v->vaddr));
    int64_t *hit = g_hash_table_lookup(jc->loop_steps, &key);
    if (hit)
        return *hit;
    int64_t step = sweep_step(jc, v, head);
    if (g_hash_table_size(jc->loop_steps) < (1u << 20))
        g_hash_table_insert(jc->loop_steps, g_memdup2(&key, sizeof key),
                            g_memdup2(&step, sizeof step));
    return step;
}
