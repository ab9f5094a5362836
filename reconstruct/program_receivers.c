/* Receivers (program.h): what a call's receiver class is known to be,
 * calls on `this`, and the constructor a constructor calls on its own
 * object. */
#include "reconstruct/program_int.h"

static const rc_method no_this_call;

/* By name: a class loaded by two loaders is one class to these checks, so
 * that a bound never rules out a target for being another loader's copy. */
static bool is_subclass(const rc_class *a, const rc_class *b)
{
    for (const rc_class *k = a; k; k = k->super)
        if (k->first_same_name == b->first_same_name)
            return true;
    return false;
}

/* Whether c's superclass chain is captured up to java/lang/Object. */
static bool chain_complete(const rc_program *p, const rc_class *c)
{
    const rc_class *k = c;
    while (k->super)
        k = k->super;
    return k == p->object && p->object;
}

const rc_class *rc_receiver_bound(rc_program *p, const rc_method *t)
{
    rc_mx *x = prog_mx_of(p, t);
    if (!x || (t->access & CF_ACC_STATIC) || !x->cls || !x->cls->from_file ||
        prog_is_interface(x->cls))
        return NULL;
    return x->cls;
}

bool rc_receiver_may_run(rc_program *p, const rc_class *bound, int op, const rc_method *t,
                         const rc_class **narrowed)
{
    *narrowed = bound;
    const rc_class *c = rc_receiver_bound(p, t);
    if (!c)
        return true;
    if (!bound || is_subclass(c, bound)) {
        *narrowed = c;              /* declared in the bound's class or below */
        return true;
    }
    /* a super call or a private method (never overridden): t itself */
    if (op == JVM_INVOKESPECIAL || (t->access & CF_ACC_PRIVATE))
        return true;
    if (is_subclass(bound, c)) {
        const rc_mx *sel = prog_select_chain(p, bound, prog_mx_of(p, t));
        return !sel || strcmp(sel->m.klass, t->klass) == 0;
    }
    return !(chain_complete(p, c) && chain_complete(p, bound));
}

/* Values (not slots) an instruction takes from the operand stack and puts
 * on it; false for those whose effect depends on value categories (dup,
 * pop2, swap ...), control transfers and wide. */
static bool value_effect(const rc_mx *x, uint32_t bci, int *pop, int *push)
{
    const uint8_t *code = x->m.code;
    uint8_t op = code[bci];
    *pop = 0;
    *push = 0;
    if (op == JVM_NOP || op == JVM_IINC)
        return true;
    if (op <= JVM_ALOAD_3) {                            /* constants, ldc, loads */
        *push = 1;
        return true;
    }
    if (op <= JVM_SALOAD) {                             /* array loads */
        *pop = 2;
        *push = 1;
        return true;
    }
    if (op <= JVM_ASTORE_3) {                           /* stores */
        *pop = 1;
        return true;
    }
    if (op <= JVM_SASTORE) {                            /* array stores */
        *pop = 3;
        return true;
    }
    if (op == JVM_POP) {
        *pop = 1;
        return true;
    }
    if (op <= JVM_SWAP)                                 /* pop2, dup*, swap */
        return false;
    if (op <= JVM_DCMPG) {                              /* arithmetic, conversions, compares */
        bool unary = (op >= JVM_INEG && op <= JVM_DNEG) || (op >= JVM_I2L && op <= JVM_I2S);
        *pop = unary ? 1 : 2;
        *push = 1;
        return true;
    }
    switch (op) {
    case JVM_GETSTATIC: *push = 1; return true;
    case JVM_PUTSTATIC: *pop = 1; return true;
    case JVM_GETFIELD: *pop = 1; *push = 1; return true;
    case JVM_PUTFIELD: *pop = 2; return true;
    case JVM_NEW: *push = 1; return true;
    case JVM_NEWARRAY: case JVM_ANEWARRAY: case JVM_ARRAYLENGTH: case JVM_CHECKCAST:
    case JVM_INSTANCEOF:
        *pop = 1; *push = 1; return true;
    case JVM_MONITORENTER: case JVM_MONITOREXIT: *pop = 1; return true;
    case JVM_MULTIANEWARRAY: *pop = code[bci + 3]; *push = 1; return true;
    default: break;
    }
    if (op < JVM_INVOKEVIRTUAL || op > JVM_INVOKEDYNAMIC)
        return false;
    uint16_t idx = (uint16_t)(code[bci + 1] << 8 | code[bci + 2]);
    const char *k, *n, *s;
    uint8_t tag;
    uint16_t bsm;
    if (op == JVM_INVOKEDYNAMIC ? cf_dynamic(&x->cls->cf, idx, &bsm, &n, &s) < 0
                               : cf_member_ref(&x->cls->cf, idx, &tag, &k, &n, &s) < 0)
        return false;
    if (s[0] != '(')
        return false;
    int args = 0;
    const char *q = s + 1;
    while (*q && *q != ')') {
        while (*q == '[')
            q++;
        if (*q == 'L') {
            q = strchr(q, ';');
            if (!q)
                return false;
        } else if (!*q) {
            return false;
        }
        q++;
        args++;
    }
    if (*q != ')')
        return false;
    *pop = args + (op == JVM_INVOKESTATIC || op == JVM_INVOKEDYNAMIC ? 0 : 1);
    *push = q[1] != 'V';
    return true;
}

/* Whether the invoke at insn receives this (see rc_receiver_is_this);
 * entered marks the instructions some edge other than a fall-through enters. */
static bool invoke_on_this(const rc_mx *x, const rc_cfg *g, const uint8_t *entered,
                           uint32_t insn)
{
    uint8_t op = g->op[insn];
    if (op != JVM_INVOKEVIRTUAL && op != JVM_INVOKESPECIAL && op != JVM_INVOKEINTERFACE)
        return false;
    int pop, push;
    if (!value_effect(x, g->bci[insn], &pop, &push) || pop < 1)
        return false;
    int above = pop - 1;                /* values above the receiver */
    for (uint32_t j = insn; j-- > 0;) {
        if (entered[j + 1] || !value_effect(x, g->bci[j], &pop, &push))
            return false;               /* a merge point, or an effect not counted */
        if (above < push) {
            uint8_t o = g->op[j];
            return push == 1 &&
                   (o == JVM_ALOAD_0 || (o == JVM_ALOAD && x->m.code[g->bci[j] + 1] == 0));
        }
        above += pop - push;
    }
    return false;
}

static uint8_t *on_this_table(const rc_mx *x, const rc_cfg *g)
{
    uint8_t *t = g_new0(uint8_t, g->ninsn + 1);
    const rc_method *m = &x->m;
    if ((m->access & CF_ACC_STATIC) || !x->cls->from_file)
        return t;
    /* local 0 stays `this` only if nothing stores into it */
    for (uint32_t i = 0; i < g->ninsn; i++) {
        const uint8_t *c = m->code + g->bci[i];
        if (g->op[i] == JVM_ASTORE_0 || (g->op[i] == JVM_ASTORE && c[1] == 0) ||
            (g->op[i] == JVM_WIDE && c[1] == JVM_ASTORE && c[2] == 0 && c[3] == 0))
            return t;
    }
    uint8_t *entered = g_new0(uint8_t, g->ninsn + 1);
    for (uint32_t i = 0; i < g->ninsn; i++)
        for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++)
            if (g->edge[e].kind != RC_EDGE_NEXT && g->edge[e].to < g->ninsn)
                entered[g->edge[e].to] = 1;
    for (uint32_t i = 0; i < g->ninsn; i++)
        t[i] = invoke_on_this(x, g, entered, i);
    g_free(entered);
    return t;
}

bool rc_receiver_is_this(rc_program *p, const rc_method *m, uint32_t insn)
{
    rc_mx *x = prog_mx_of(p, m);
    const rc_cfg *g = rc_cfg_get(p, m);
    if (!x || !g || insn >= g->ninsn)
        return false;
    /* Made once per method (the projection asks at every call): threads
     * racing each make one, the first stored wins. */
    uint8_t *t = g_atomic_pointer_get(&x->on_this);
    if (!t) {
        uint8_t *mine = on_this_table(x, g);
        if (!g_atomic_pointer_compare_and_exchange(&x->on_this, NULL, mine))
            g_free(mine);
        t = g_atomic_pointer_get(&x->on_this);
    }
    return t[insn];
}

/* ------------------------------------------------------------------------ */
/* The constructor a constructor calls on its own object */

static const rc_method *find_this_call(rc_program *p, const rc_method *m, uint32_t *insn)
{
    const rc_cfg *g = rc_cfg_get(p, m);
    if (!g || strcmp(m->name, "<init>") || !strcmp(m->klass, "java/lang/Object"))
        return NULL;
    const rc_method *found = NULL;
    for (uint32_t i = 0; i < g->ninsn; i++) {
        if (g->op[i] != JVM_INVOKESPECIAL || !rc_receiver_is_this(p, m, i))
            continue;
        const rc_method *const *t;
        bool open = false;
        if (rc_call_targets_at(p, m, i, &t, &open) != 1 || open)
            return NULL;       /* unknown: it may be the one */
        if (strcmp(t[0]->name, "<init>"))
            continue;          /* a private or super method called on this */
        if (found)
            return NULL;       /* two: which one runs depends on the path */
        found = t[0];
        *insn = i;
    }
    return found;
}

const rc_method *rc_this_call(rc_program *p, const rc_method *m, uint32_t *insn)
{
    rc_mx *x = prog_mx_of(p, m);
    if (!x)
        return NULL;
    const rc_method *t = g_atomic_pointer_get(&x->this_call);
    if (!t) {
        uint32_t i = 0;
        t = find_this_call(p, m, &i);
        g_atomic_int_set(&x->this_call_insn, (gint)i);  /* the same from every thread */
        if (!g_atomic_pointer_compare_and_exchange(&x->this_call, NULL, t ? t : &no_this_call))
            t = g_atomic_pointer_get(&x->this_call);
    }
    if (t == &no_this_call)
        return NULL;
    if (insn)
        *insn = (uint32_t)g_atomic_int_get(&x->this_call_insn);
    return t;
}
