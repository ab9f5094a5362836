/* Call targets (program.h): invokes resolved and selected over the class
 * hierarchy, itable positions, and the calls the VM makes itself. */
#include "reconstruct/program_int.h"


static bool same_package(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t na = sa ? (size_t)(sa - a) : 0, nb = sb ? (size_t)(sb - b) : 0;
    return na == nb && memcmp(a, b, na) == 0;
}

bool prog_is_interface(const rc_class *c)
{
    return c->from_file && (c->access & CF_ACC_INTERFACE);
}

/* A method of the superinterfaces of c (and of its superclasses): a default
 * (non-abstract instance) method when there is one, else any match. */
static rc_mx *iface_lookup(const rc_program *p, const rc_class *c, const char *name,
                           const char *sig)
{
    rc_mx *any = NULL, *hit = NULL;
    /* Breadth first; the sets are small, so duplicates are found by a scan. */
    rc_class *local[64];
    rc_class **queue = local;
    size_t n = 0, cap = 64;
#define ENQUEUE(k)                                                                          \
    do {                                                                                    \
        rc_class *k_ = (k);                                                                 \
        bool dup_ = false;                                                                  \
        for (size_t j_ = 0; j_ < n && !dup_; j_++)                                          \
            dup_ = queue[j_] == k_;                                                         \
        if (!dup_) {                                                                        \
            if (n == cap) {                                                                 \
                rc_class **q_ = g_new(rc_class *, cap * 2);                                 \
                memcpy(q_, queue, n * sizeof *q_);                                          \
                if (queue != local)                                                         \
                    g_free(queue);                                                          \
                queue = q_;                                                                 \
                cap *= 2;                                                                   \
            }                                                                               \
            queue[n++] = k_;                                                                \
        }                                                                                   \
    } while (0)
    for (const rc_class *k = c; k; k = k->super)
        for (uint16_t i = 0; i < k->nifaces; i++)
            ENQUEUE(k->ifaces[i]);
    for (size_t q = 0; q < n && !hit; q++) {
        rc_class *s = queue[q];
        rc_mx *x = prog_declared(p, s, name, sig);
        if (x && !(x->m.access & (CF_ACC_STATIC | CF_ACC_PRIVATE))) {
            if (!(x->m.access & CF_ACC_ABSTRACT))
                hit = x;
            else if (!any)
                any = x;
        }
        for (uint16_t i = 0; i < s->nifaces; i++)
            ENQUEUE(s->ifaces[i]);
    }
#undef ENQUEUE
    if (queue != local)
        g_free(queue);
    return hit ? hit : any;
}

/* Method resolution (JVMS 5.4.3.3 / 5.4.3.4): c and its superclasses, then
 * (interfaces: java/lang/Object's) superinterfaces. */
static rc_mx *resolve(const rc_program *p, const rc_class *c, const char *name, const char *sig)
{
    if (prog_is_interface(c)) {
        rc_mx *x = prog_declared(p, c, name, sig);
        if (x)
            return x;
        const rc_class *o = p->object;
        if (o && (x = prog_declared(p, o, name, sig)) && (x->m.access & CF_ACC_PUBLIC) &&
                 !(x->m.access & CF_ACC_STATIC))
            return x;
        return iface_lookup(p, c, name, sig);
    }
    for (const rc_class *k = c; k; k = k->super) {
        rc_mx *x = prog_declared(p, k, name, sig);
        if (x)
            return x;
    }
    return iface_lookup(p, c, name, sig);
}

/* Whether x, declared in class k, can override r (JVMS 5.4.5, without the
 * transitive case): public/protected r, or package-private r of k's package. */
static bool overrides(const rc_class *k, const rc_mx *x, const rc_mx *r)
{
    if (x->m.access & (CF_ACC_STATIC | CF_ACC_PRIVATE))
        return false;
    if (x == r || (r->m.access & (CF_ACC_PUBLIC | CF_ACC_PROTECTED)))
        return true;
    return same_package(k->name, r->m.klass);
}

/* Selection in the superclass chain of d alone (JVMS 5.4.6 steps 1-2). */
rc_mx *prog_select_chain(const rc_program *p, const rc_class *d, const rc_mx *r)
{
    for (const rc_class *k = d; k; k = k->super) {
        rc_mx *x = prog_declared(p, k, r->m.name, r->m.sig);
        if (x && overrides(k, x, r))
            return x;
    }
    return NULL;
}

typedef struct tset {
    GPtrArray *t;
    GHashTable *in;
} tset;

static void tset_add(tset *s, const rc_mx *x)
{
    if (x && g_hash_table_add(s->in, (gpointer)x))
        g_ptr_array_add(s->t, (gpointer)&x->m);
}

/* ---- itables ----------------------------------------------------------------
 *
 * HotSpot's invokeinterface template finds the interface a call names in
 * the receiver class's itable by a linear scan, which the trace shows
 * (dc_event.itable_pos). The itable lists the class's transitive interfaces
 * in the order the class file parser computed them, leaving out those with
 * no itable method and no superinterface (klassItable's
 * visit_all_interfaces). */

static void append_missing(GPtrArray *a, GHashTable *in, rc_class *c)
{
    if (g_hash_table_add(in, c))
        g_ptr_array_add(a, c);
}

#define TRANS_MAX_DEPTH 256

/* The transitive interfaces of c: the superclass's, then each direct
 * superinterface's own, then the direct superinterfaces, each at its first
 * place (ClassFileParser's compute_transitive_interfaces). false when a
 * supertype has no class file or the hierarchy is circular or too deep
 * (damaged input). Under p->itable_lock. */
static bool transitive_ifaces(rc_class *c, unsigned depth)
{
    if (c->trans_state == TRANS_KNOWN)
        return true;
    /* (java/lang/Object has no interfaces: it need not be captured) */
    bool super_unknown = c->cf.super_name && !c->super &&
                         strcmp(c->cf.super_name, "java/lang/Object") != 0;
    if (c->trans_state != TRANS_NOT_YET || depth > TRANS_MAX_DEPTH || !c->from_file ||
        c->nifaces != c->cf.ninterfaces || super_unknown) {
        if (c->trans_state == TRANS_NOT_YET)
            c->trans_state = TRANS_UNKNOWN;
        return false;
    }
    c->trans_state = TRANS_BUSY;
    GPtrArray *a = g_ptr_array_new();
    GHashTable *in = g_hash_table_new(g_direct_hash, g_direct_equal);
    bool ok = true;
    if (c->super) {
        ok = transitive_ifaces(c->super, depth + 1);
        for (uint16_t i = 0; ok && i < c->super->ntrans; i++)
            append_missing(a, in, c->super->trans[i]);
    }
    for (uint16_t i = 0; ok && i < c->nifaces; i++) {
        rc_class *s = c->ifaces[i];
        ok = transitive_ifaces(s, depth + 1);
        for (uint16_t j = 0; ok && j < s->ntrans; j++)
            append_missing(a, in, s->trans[j]);
    }
    for (uint16_t i = 0; ok && i < c->nifaces; i++)
        append_missing(a, in, c->ifaces[i]);
    g_hash_table_destroy(in);
    if (ok && a->len <= UINT16_MAX) {
        c->ntrans = (uint16_t)a->len;
        c->trans = (rc_class **)g_ptr_array_free(a, FALSE);
        c->trans_state = TRANS_KNOWN;
        return true;
    }
    g_ptr_array_free(a, TRUE);
    c->trans_state = TRANS_UNKNOWN;
    return false;
}

/* Whether interface i has an itable entry in the classes implementing it:
 * an instance method other than a private one or an initializer
 * (interface_method_needs_itable_index), or a superinterface. */
static bool in_itables(const rc_program *p, const rc_class *i)
{
    if (i->ntrans)
        return true;
    for (uint32_t k = 0; k < i->nmethods; k++) {
        const rc_method *m = &p->mx[i->first_method + k].m;
        if (!(m->access & (CF_ACC_STATIC | CF_ACC_PRIVATE)) && m->name[0] != '<')
            return true;
    }
    return false;
}

/* The position of interface iface (by name: a loader's copy is the one the
 * class links to) in the itable of class c, or -1 when unknown. */
static int32_t itable_position(const rc_program *p, rc_class *c, const char *iface)
{
    int32_t pos = -1;
    g_mutex_lock((GMutex *)&p->itable_lock);
    if (transitive_ifaces(c, 0)) {
        int32_t k = 0;
        for (uint16_t i = 0; i < c->ntrans && pos < 0; i++) {
            rc_class *s = c->trans[i];
            if (!transitive_ifaces(s, 0))
                break;         /* its place depends on what is unknown */
            if (!in_itables(p, s))
                continue;
            if (strcmp(s->name, iface) == 0)
                pos = k;
            k++;
        }
    }
    g_mutex_unlock((GMutex *)&p->itable_lock);
    return pos;
}

static int cmp_itab(const void *a, const void *b)
{
    const itab_ent *x = a, *y = b;
    if (x->t != y->t)
        return (uintptr_t)x->t < (uintptr_t)y->t ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Every selected non-abstract method over the captured subtypes of c. The
 * walk is top-down: a class reached from its own superclass inherits that
 * class's chain selection unless it declares an override itself. */
typedef struct walk {
    rc_class *c;
    rc_mx *chain;              /* selection in the superclass chain; valid if known */
    bool known;
} walk;

static void cha(const rc_program *p, rc_class *c, const rc_mx *r, tset *out, bool *open,
                GArray *itab)
{
    if ((r->m.access & (CF_ACC_PRIVATE | CF_ACC_FINAL)) && !(r->m.access & CF_ACC_ABSTRACT)) {
        tset_add(out, r);
        return;
    }
    if (!prog_is_interface(c))
        itab = NULL;
    guint8 *seen = g_new0(guint8, p->classes->len);
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(walk));
    for (rc_class *s = c; s; s = s->next_same_name)
        if (s->from_file) {
            walk w = { s, NULL, false };
            g_array_append_val(stack, w);
            seen[s->index] = 1;
        }
    while (stack->len) {
        walk w = g_array_index(stack, walk, stack->len - 1);
        g_array_set_size(stack, stack->len - 1);
        rc_class *d = w.c;
        rc_mx *chain;
        if (w.known) {
            rc_mx *x = prog_declared(p, d, r->m.name, r->m.sig);
            chain = x && overrides(d, x, r) ? x : w.chain;
        } else {
            chain = prog_is_interface(d) ? NULL : prog_select_chain(p, d, r);
        }
        if (!prog_is_interface(d) && !(d->access & CF_ACC_ABSTRACT) && prog_class_may_have_run(p, d)) {
            rc_mx *x = chain ? chain : iface_lookup(p, d, r->m.name, r->m.sig);
            if (x && !(x->m.access & CF_ACC_ABSTRACT)) {
                tset_add(out, x);
                if (itab) {
                    itab_ent e = { &x->m, itable_position(p, d, c->name) };
                    g_array_append_val(itab, e);
                }
            }
        }
        if (d->children)
            for (guint i = 0; i < d->children->len; i++) {
                rc_class *k = g_ptr_array_index(d->children, i);
                if (!seen[k->index]) {
                    seen[k->index] = 1;
                    walk kw = { k, chain, !prog_is_interface(d) && k->super == d };
                    g_array_append_val(stack, kw);
                }
            }
    }
    g_array_free(stack, TRUE);
    g_free(seen);
    /* Bare classes (hidden ones: lambda proxies and the like) have no known
     * supertypes: through an interface or Object they may be the receiver. */
    if (prog_is_interface(c) || strcmp(c->name, "java/lang/Object") == 0) {
        for (guint i = 0; i < p->bare_virtual->len; i++) {
            const rc_mx *x = g_ptr_array_index(p->bare_virtual, i);
            if (x->m.name == r->m.name && x->m.sig == r->m.sig &&
                !(x->m.access & CF_ACC_ABSTRACT)) {
                tset_add(out, x);
                if (itab) {
                    itab_ent e = { &x->m, -1 };
                    g_array_append_val(itab, e);
                }
                *open = true;
            }
        }
        /* Classes prepared without a class file and not hidden may be
         * ordinary classes with any supertypes. */
        if (p->nbare_plain)
            *open = true;
    }
    if (p->ndamaged)
        *open = true;
}

/* An invocation: the method (klass, name, sig) an invoke names, called
 * with the semantics of op. */
typedef struct invocation {
    int op;
    const char *klass, *name, *sig;
} invocation;

/* Targets of an invocation from caller; through an interface, *itab gets
 * the targets' itable positions (owned by the program; may be NULL). */
static void invoke_targets(const rc_program *p, const rc_mx *caller, invocation iv, tset *out,
                           bool *open, const site **itab)
{
    int op = iv.op;
    rc_class *c = prog_class_find(p, iv.klass);
    const char *name = prog_interned(p, iv.name);
    const char *sig = prog_interned(p, iv.sig);
    if (!c || !name || !sig) {
        *open = true; /* the class (or any method of that name) was never captured */
        return;
    }
    if (op == JVM_INVOKESPECIAL) {
        /* A call of a superclass's method (not <init>) starts at the
         * caller's direct superclass (ACC_SUPER semantics). */
        const rc_class *cur = caller->cls;
        if (strcmp(name, "<init>") != 0 && !prog_is_interface(c) && cur->from_file && c != cur) {
            bool is_super = false;
            for (const rc_class *k = cur->super; k && !is_super; k = k->super)
                is_super = strcmp(k->name, c->name) == 0;
            if (is_super && cur->super)
                c = cur->super;
        }
    }
    rc_mx *r = resolve(p, c, name, sig);
    if (!r) {
        *open = true; /* signature-polymorphic, or a class that was not captured */
        return;
    }
    if (op == JVM_INVOKESTATIC || op == JVM_INVOKESPECIAL) {
        if (op == JVM_INVOKESPECIAL && (r->m.access & CF_ACC_ABSTRACT)) {
            *open = true;
            return;
        }
        tset_add(out, r);
        return;
    }
    /* Many sites share a resolved method: the analysis is kept per (class, method). */
    gpointer key = GSIZE_TO_POINTER((uint64_t)c->index << 32 | r->m.index);
    g_mutex_lock((GMutex *)&p->lock);
    site *st = g_hash_table_lookup(p->cha, key);
    g_mutex_unlock((GMutex *)&p->lock);
    if (!st) {
        tset one = { g_ptr_array_new(), g_hash_table_new(g_direct_hash, g_direct_equal) };
        bool o = false;
        GArray *pos = g_array_new(FALSE, FALSE, sizeof(itab_ent));
        cha(p, c, r, &one, &o, pos);
        st = g_malloc0(sizeof *st + one.t->len * sizeof st->t[0]);
        st->n = one.t->len;
        st->open = o;
        if (pos->len) {
            /* one entry per (target, position) */
            qsort(pos->data, pos->len, sizeof(itab_ent), cmp_itab);
            guint k = 0;
            for (guint i = 0; i < pos->len; i++)
                if (!k || cmp_itab(&g_array_index(pos, itab_ent, i),
                                   &g_array_index(pos, itab_ent, k - 1)))
                    g_array_index(pos, itab_ent, k++) = g_array_index(pos, itab_ent, i);
            st->nitab = k;
            st->itab = g_memdup2(pos->data, k * sizeof(itab_ent));
        }
        g_array_free(pos, TRUE);
        if (one.t->len)
            memcpy(st->t, one.t->pdata, one.t->len * sizeof st->t[0]);
        g_ptr_array_free(one.t, TRUE);
        g_hash_table_destroy(one.in);
        g_mutex_lock((GMutex *)&p->lock);
        site *have = g_hash_table_lookup(p->cha, key);
        if (have) {
            prog_cha_site_free(st);      /* another thread analysed it first */
            st = have;
        } else {
            g_hash_table_insert(p->cha, key, st);
        }
        g_mutex_unlock((GMutex *)&p->lock);
    }
    for (uint32_t i = 0; i < st->n; i++)
        tset_add(out, (const rc_mx *)st->t[i]);
    if (st->open)
        *open = true;
    if (itab)
        *itab = st;
}

static bool lambda_bootstrap(const cf_class *cf, uint16_t bsm_idx, const cf_bsm **b)
{
    if (!cf->has_bsm || bsm_idx >= cf->nbsm)
        return false;
    *b = &cf->bsm[bsm_idx];
    uint8_t kind, tag;
    uint16_t ref;
    const char *k, *n, *s;
    if (cf_method_handle(cf, (*b)->method_handle, &kind, &ref) < 0 ||
        cf_member_ref(cf, ref, &tag, &k, &n, &s) < 0)
        return false;
    return kind == CF_REF_INVOKE_STATIC && strcmp(k, "java/lang/invoke/LambdaMetafactory") == 0 &&
           (strcmp(n, "metafactory") == 0 || strcmp(n, "altMetafactory") == 0);
}

static site *compute_site(const rc_program *p, const rc_mx *x, uint32_t bci)
{
    tset out = { g_ptr_array_new(), g_hash_table_new(g_direct_hash, g_direct_equal) };
    bool open = false;
    const site *itab = NULL;
    const rc_method *m = &x->m;
    const cf_class *cf = &x->cls->cf;
    uint8_t op = m->code[bci];
    uint16_t idx = (uint16_t)(m->code[bci + 1] << 8 | m->code[bci + 2]);
    uint8_t tag;
    const char *k, *n, *s;
    if (op >= JVM_INVOKEVIRTUAL && op <= JVM_INVOKEINTERFACE) {
        if (cf_member_ref(cf, idx, &tag, &k, &n, &s) < 0 || tag == CF_FIELDREF)
            open = true;
        else if (k[0] == '[')
            /* a method of an array type: java/lang/Object's (clone is the array's own) */
            invoke_targets(p, x, (invocation){ op, "java/lang/Object", n, s }, &out, &open,
                           NULL);
        else
            invoke_targets(p, x, (invocation){ op, k, n, s }, &out, &open,
                           op == JVM_INVOKEINTERFACE ? &itab : NULL);
    } else if (op == JVM_INVOKEDYNAMIC) {
        /* The site links once (bootstrap), then runs the call site's target;
         * for LambdaMetafactory that makes the lambda object, whose interface
         * method later calls the implementation method reported here. */
        open = true;
        uint16_t bsm;
        const cf_bsm *b;
        uint8_t kind;
        uint16_t ref;
        if (cf_dynamic(cf, idx, &bsm, &n, &s) == 0 && lambda_bootstrap(cf, bsm, &b) &&
            cf_method_handle(cf, cf_bsm_arg(cf, b, 1), &kind, &ref) == 0 &&
            cf_member_ref(cf, ref, &tag, &k, &n, &s) == 0) {
            bool ignored = false;
            int iop = kind == CF_REF_INVOKE_STATIC      ? JVM_INVOKESTATIC
                      : kind == CF_REF_INVOKE_INTERFACE ? JVM_INVOKEINTERFACE
                      : kind == CF_REF_INVOKE_VIRTUAL   ? JVM_INVOKEVIRTUAL
                                                        : JVM_INVOKESPECIAL;
            /* REF_invokeSpecial here names the method itself (private). */
            if (kind == CF_REF_INVOKE_SPECIAL || kind == CF_REF_NEW_INVOKE_SPECIAL) {
                rc_class *c = prog_class_find(p, k);
                n = prog_interned(p, n);
                s = prog_interned(p, s);
                rc_mx *r = c && n && s ? resolve(p, c, n, s) : NULL;
                tset_add(&out, r);
            } else {
                invoke_targets(p, x, (invocation){ iop, k, n, s }, &out, &ignored, NULL);
            }
        }
    }
    /* An empty set is never final: the site may run with a receiver (or
     * call a method) that the captured classes do not show. */
    if (!out.t->len)
        open = true;
    site *st = g_malloc0(sizeof *st + out.t->len * sizeof st->t[0]);
    st->n = out.t->len;
    st->open = open;
    if (itab) {
        st->nitab = itab->nitab;
        st->itab = itab->itab;
    }
    if (out.t->len)
        memcpy(st->t, out.t->pdata, out.t->len * sizeof st->t[0]);
    g_ptr_array_free(out.t, TRUE);
    g_hash_table_destroy(out.in);
    return st;
}

/* The call site at instruction insn of x's CFG g; NULL where there is no
 * CFG, no such instruction or no invoke. */
static const site *site_at(rc_program *p, rc_mx *x, const rc_cfg *g, int64_t insn)
{
    if (!g || insn < 0 || insn >= g->ninsn)
        return NULL;
    uint8_t op = g->op[insn];
    if (op < JVM_INVOKEVIRTUAL || op > JVM_INVOKEDYNAMIC)
        return NULL;
    /* Lock-free after the first query of a site: a table per method,
     * published with compare-and-exchange like the CFG (a losing builder
     * frees its copy). The projection asks about the same sites millions of
     * times. */
    site **slots = g_atomic_pointer_get(&x->sites);
    if (!slots) {
        site **mine = g_new0(site *, g->ninsn);
        if (!g_atomic_pointer_compare_and_exchange(&x->sites, NULL, mine))
            g_free(mine);
        slots = g_atomic_pointer_get(&x->sites);
    }
    site *st = g_atomic_pointer_get(&slots[insn]);
    if (!st) {
        site *mine = compute_site(p, x, g->bci[insn]);
        if (!g_atomic_pointer_compare_and_exchange(&slots[insn], NULL, mine))
            g_free(mine);
        st = g_atomic_pointer_get(&slots[insn]);
    }
    return st;
}

/* The call targets of instruction insn of x's CFG g (see rc_call_targets). */
static size_t site_targets(rc_program *p, rc_mx *x, const rc_cfg *g, int64_t insn,
                           const rc_method *const **targets, bool *open)
{
    static const rc_method *const none[1];
    const site *st = site_at(p, x, g, insn);
    *targets = st ? st->t : none;
    *open = st && st->open;
    return st ? st->n : 0;
}

size_t rc_call_targets(rc_program *p, const rc_method *m, uint32_t bci,
                       const rc_method *const **targets, bool *open)
{
    rc_mx *x = prog_mx_of(p, m);
    const rc_cfg *g = x ? rc_cfg_get(p, m) : NULL;
    return site_targets(p, x, g, rc_cfg_index(g, bci), targets, open);
}

size_t rc_call_targets_at(rc_program *p, const rc_method *m, uint32_t insn,
                          const rc_method *const **targets, bool *open)
{
    rc_mx *x = prog_mx_of(p, m);
    const rc_cfg *g = x ? rc_cfg_get(p, m) : NULL;
    return site_targets(p, x, g, insn, targets, open);
}

bool rc_itable_may_run(rc_program *p, const rc_method *m, uint32_t insn, uint32_t pos,
                       const rc_method *t)
{
    rc_mx *x = prog_mx_of(p, m);
    const site *st = x ? site_at(p, x, rc_cfg_get(p, m), insn) : NULL;
    if (!st || !st->nitab)
        return true;
    /* t's entries: a range of the sorted table */
    size_t lo = 0, hi = st->nitab;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)st->itab[mid].t < (uintptr_t)t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == st->nitab || st->itab[lo].t != t)
        return true;           /* not from the analysis: nothing known */
    for (size_t i = lo; i < st->nitab && st->itab[i].t == t; i++)
        if (st->itab[i].pos < 0 || (uint32_t)st->itab[i].pos == pos)
            return true;
    return false;
}

/* ------------------------------------------------------------------------ */
/* Calls the VM makes itself */

/* c's class initializer, then those of its superclasses and superinterfaces
 * (initializing c starts with them). Each class is visited once: interfaces
 * shared along the hierarchy (or a damaged, cyclic one) would otherwise make
 * the walk exponential. */
static void add_initializers(const rc_program *p, const rc_class *c, tset *out, GHashTable *seen,
                             int depth)
{
    const char *clinit = prog_interned(p, "<clinit>"), *v = prog_interned(p, "()V");
    for (; c && depth < 64; c = c->super, depth++) {
        if (!g_hash_table_add(seen, (gpointer)c))
            return;
        rc_mx *x = clinit && v ? prog_declared(p, c, clinit, v) : NULL;
        if (x)
            tset_add(out, x);
        for (uint16_t i = 0; i < c->nifaces; i++)
            add_initializers(p, c->ifaces[i], out, seen, depth + 1);
    }
}

static void add_named(const rc_program *p, const char *klass, const char *const *names,
                      const char *sig, tset *out)
{
    for (rc_class *c = prog_class_find(p, klass); c; c = c->next_same_name)
        for (uint32_t j = 0; j < c->nmethods; j++) {
            rc_mx *x = &p->mx[c->first_method + j];
            for (const char *const *n = names; *n; n++)
                if (!strcmp(x->m.name, *n) && (!sig || !strcmp(x->m.sig, sig)))
                    tset_add(out, x);
        }
}

/* The loadClass(String) that each class loader class declares (the VM calls
 * it virtually on the loader that resolves a class). */
static GPtrArray *class_loader_entries(const rc_program *p)
{
    GPtrArray *v = g_ptr_array_new();
    const char *name = prog_interned(p, "loadClass");
    const char *sig = prog_interned(p, "(Ljava/lang/String;)Ljava/lang/Class;");
    if (!name || !sig)
        return v;
    for (guint i = 0; i < p->classes->len; i++) {
        const rc_class *c = g_ptr_array_index(p->classes, i);
        bool loader = false;
        int depth = 0;     /* a damaged hierarchy may loop */
        for (const rc_class *s = c; s && !loader && depth < 64; s = s->super, depth++)
            loader = !strcmp(s->name, "java/lang/ClassLoader");
        rc_mx *x = loader ? prog_declared(p, c, name, sig) : NULL;
        if (x)
            g_ptr_array_add(v, x);
    }
    return v;
}

static site *compute_vm_site(rc_program *p, const rc_mx *x, uint32_t bci)
{
    tset out = { g_ptr_array_new(), g_hash_table_new(g_direct_hash, g_direct_equal) };
    const rc_method *m = &x->m;
    const cf_class *cf = &x->cls->cf;
    uint8_t op = m->code[bci];
    uint16_t idx = bci + 2 < m->code_len ? (uint16_t)(m->code[bci + 1] << 8 | m->code[bci + 2]) : 0;
    const char *k = NULL, *n, *s;
    uint8_t tag;
    bool loads = false;     /* may load a class through a Java class loader */
    switch (op) {
    case JVM_NEW:
        k = cf_class_name(cf, idx);
        loads = true;
        break;
    case JVM_GETSTATIC:
    case JVM_PUTSTATIC:
    case JVM_INVOKESTATIC:
        if (cf_member_ref(cf, idx, &tag, &k, &n, &s) < 0)
            k = NULL;
        loads = true;
        break;
    case JVM_GETFIELD:
    case JVM_PUTFIELD:
    case JVM_INVOKEVIRTUAL:
    case JVM_INVOKESPECIAL:
    case JVM_INVOKEINTERFACE:
    case JVM_ANEWARRAY:
    case JVM_CHECKCAST:
    case JVM_INSTANCEOF:
    case JVM_MULTIANEWARRAY:
    case JVM_LDC:
    case JVM_LDC_W:
        loads = true;
        break;
    default:
        break;
    }
    /* 1. Class initialization (new, getstatic, putstatic, invokestatic of a
     *    class not initialized yet). */
    if (k && k[0] != '[') {
        GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
        for (rc_class *c = prog_class_find(p, k); c; c = c->next_same_name)
            add_initializers(p, c, &out, seen, 0);
        g_hash_table_destroy(seen);
    }
    /* 2. Resolving a class that a Java class loader defines: the VM calls
     *    the loader's loadClass(String). */
    if (loads)
        for (guint i = 0; i < p->load_class->len; i++)
            tset_add(&out, g_ptr_array_index(p->load_class, i));
    /* 3. Linking invokedynamic, method handle invocations and constants:
     *    MethodHandleNatives' up-calls. */
    if (op == JVM_INVOKEDYNAMIC || op == JVM_INVOKEVIRTUAL || op == JVM_LDC || op == JVM_LDC_W ||
        op == JVM_LDC2_W) {
        static const char *const link[] = { "linkCallSite", "linkMethod",
                                            "linkMethodHandleConstant", "findMethodHandleType",
                                            "linkDynamicConstant", NULL };
        add_named(p, "java/lang/invoke/MethodHandleNatives", link, NULL, &out);
    }
    site *st = g_malloc0(sizeof *st + out.t->len * sizeof st->t[0]);
    st->n = out.t->len;
    st->open = true;      /* the VM calls other methods too (and JNI code anything) */
    if (out.t->len)
        memcpy(st->t, out.t->pdata, out.t->len * sizeof st->t[0]);
    g_ptr_array_free(out.t, TRUE);
    g_hash_table_destroy(out.in);
    return st;
}

size_t rc_vm_call_targets(rc_program *p, const rc_method *m, uint32_t bci,
                          const rc_method *const **targets)
{
    static const rc_method *const none[1];
    *targets = none;
    rc_mx *x = prog_mx_of(p, m);
    const rc_cfg *g = x ? rc_cfg_get(p, m) : NULL;
    if (!g || rc_cfg_index(g, bci) < 0)
        return 0;
    gpointer key = GSIZE_TO_POINTER((uint64_t)m->index << 32 | bci);
    g_mutex_lock(&p->lock);
    site *st = g_hash_table_lookup(p->vm_sites, key);
    g_mutex_unlock(&p->lock);
    if (!st) {
        g_mutex_lock(&p->lock);
        if (!p->load_class)
            p->load_class = class_loader_entries(p);
        g_mutex_unlock(&p->lock);
        site *mine = compute_vm_site(p, x, bci);
        g_mutex_lock(&p->lock);
        st = g_hash_table_lookup(p->vm_sites, key);
        if (!st) {
            g_hash_table_insert(p->vm_sites, key, mine);
            st = mine;
        } else {
            g_free(mine);
        }
        g_mutex_unlock(&p->lock);
    }
    *targets = st->t;
    return st->n;
}
