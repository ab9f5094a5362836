/* Calls (project_int.h): method entries and their targets, receivers, and
 * compiled code's frames. */
#include "reconstruct/project_int.h"

/* ------------------------------------------------------------------------ */
/* Method entries */

entry_kind_t pj_entry_kind_of(const char *desc)
{
    const char *k = desc ? strstr(desc, "entry point (kind = ") : NULL;
    if (!k)
        return EK_NONE;
    k += strlen("entry point (kind = ");
    size_t n = strcspn(k, ")");
    if (n == 10 && !strncmp(k, "zerolocals", n))
        return EK_JAVA;
    if (!strncmp(k, "zerolocals_synchronized", n) && n == 23)
        return EK_SYNC;
    if (n == 6 && !strncmp(k, "native", n))
        return EK_NATIVE;
    if (!strncmp(k, "native_synchronized", n) && n == 19)
        return EK_NATIVE_SYNC;
    if (n == 8 && !strncmp(k, "abstract", n))
        return EK_ABSTRACT;
    return EK_INTRINSIC;
}

bool pj_entry_fits(entry_kind_t k, const rc_method *m)
{
    bool sync = m->access & JVM_ACC_SYNCHRONIZED, native = m->access & JVM_ACC_NATIVE;
    switch (k) {
    case EK_JAVA: return m->code && !sync && !native;
    case EK_SYNC: return m->code && sync && !native;
    case EK_NATIVE: return native && !sync;
    case EK_NATIVE_SYNC: return native && sync;
    case EK_ABSTRACT: return (m->access & JVM_ACC_ABSTRACT) != 0;
    default: return true;
    }
}

/* A method entered: m (NULL: unknown), its id, its receiver within recv
 * (this_call: the caller's own receiver). */
typedef struct callee_info {
    const rc_method *m;
    uint64_t id;
    const rc_class *recv;
    bool this_call;
} callee_info;

/* Enters c from caller, with entry kind k from the call at call_bci. */
static void enter_on(rp_projector *r, const frame *caller, const hist *h, callee_info c,
                     entry_kind_t k, int32_t call_bci)
{
    const rc_method *m = c.m;
    uint64_t id = c.id;
    bool runs_bytecode = (k == EK_JAVA || k == EK_SYNC) && m && m->code;
    uint32_t flags = (k == EK_NATIVE || k == EK_NATIVE_SYNC) ? FL_F_NATIVE : 0;
    h = pj_record(r, h, FL_CALL, id, call_bci, -1, flags);
    frame f = runs_bytecode ? pj_interp_frame(m->index, 0, id)
                            : (frame){ .kind = FR_OPAQUE, .method = m ? m->index : NONE,
                                       .insn = NONE, .last = NONE, .returned = NONE,
                                       .method_id = id };
    if (runs_bytecode) {
        f.recv = c.recv;
        f.this_call = c.this_call;
    }
    pj_add(r, pj_push(r, caller, f), h);
}

static void enter(rp_projector *r, const frame *caller, const hist *h, const rc_method *m,
                  uint64_t id, entry_kind_t k, int32_t call_bci)
{
    callee_info c = { .m = m, .id = id, .recv = m ? rc_receiver_bound(r->p, m) : NULL };
    enter_on(r, caller, h, c, k, call_bci);
}

/* public static void main(String[]) */
static bool is_launcher_main(const rc_method *m)
{
    const uint16_t public_static = CF_ACC_PUBLIC | CF_ACC_STATIC;
    return m && (m->access & public_static) == public_static && !strcmp(m->name, "main") &&
           !strcmp(m->sig, "([Ljava/lang/String;)V");
}

/* The class of the nearest frame from f down that is in the middle of an
 * invokedynamic (linking it, or running the call site's target); NULL when
 * none is within INDY_DEPTH frames. */
#define INDY_DEPTH 32
static const char *indy_class_below(rp_projector *r, const frame *f)
{
    for (int d = 0; f && d < INDY_DEPTH; f = f->caller, d++) {
        if (f->kind != FR_INTERP || !f->calling || f->last == NONE || f->method == NONE)
            continue;
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_cfg *g = rc_cfg_get(r->p, m);
        if (g && f->last < g->ninsn && g->op[f->last] == JVM_INVOKEDYNAMIC)
            return m->klass;
    }
    return NULL;
}

/* Whether klass is a lambda proxy of class c: a hidden class that
 * LambdaMetafactory names c$$Lambda... */
static bool lambda_proxy_of(const char *klass, const char *c)
{
    size_t n = strlen(c);
    return !strncmp(klass, c, n) && !strncmp(klass + n, "$$Lambda", 8);
}

/* A callee that nothing names: every method that fits the entry kind and
 * the bytecodes that follow. */
static void enter_any(rp_projector *r, const frame *caller, const hist *h, entry_kind_t k,
                      int32_t call_bci, const rc_method *const *ruled_out, size_t nruled_out)
{
    if (k != EK_JAVA && k != EK_SYNC) {
        enter(r, caller, h, NULL, 0, k, call_bci);
        return;
    }
    uint16_t ops[LOOKAHEAD];
    uint8_t br[LOOKAHEAD];
    uint32_t jm[LOOKAHEAD];
    size_t n = pj_lookahead(r, r->ev_slot + 1, ops, br, jm, LOOKAHEAD);
    if (n == 0 || ops[0] >= 0x100) {
        enter(r, caller, h, NULL, 0, EK_INTRINSIC, call_bci);
        return;
    }
    /* the methods that best explain what follows: the same for every
     * hypothesis at this event (kept with expand's, keyed by the kind) */
    if (r->fit_event != r->st.events) {
        g_ptr_array_set_size(r->fit_memo, 0);
        r->fit_event = r->st.events;
    }
    const GArray *fit = NULL;
    for (guint j = 0; j < r->fit_memo->len && !fit; j++) {
        const fit_entry *f = g_ptr_array_index(r->fit_memo, j);
        if (f->cands == NULL && f->op == -1 - (int)k)
            fit = f->fit;
    }
    if (!fit) {
        pos_index *x = pj_index_get(r);
        GArray *narrowed = pj_pairs_narrow(&x->start2, ops, n);
        GArray *c = narrowed ? narrowed : x->start[ops[0]];
        GArray *v = g_array_new(FALSE, FALSE, sizeof(uint32_t));
        int top = W_MAYBE;
        for (guint j = 0; j < c->len; j++) {
            pos ps = g_array_index(c, pos, j);
            const rc_method *m = rc_method_at(r->p, ps.method);
            if (!pj_entry_fits(k, m) || !rc_method_may_run(r->p, m, r->ev->tsc))
                continue;
            int score = pj_accepts(r, ps.method, 0, ops, br, jm, n);
            if (score < top)
                continue;
            if (score > top) {
                g_array_set_size(v, 0);
                top = score;
            }
            g_array_append_val(v, ps.method);
        }
        if (narrowed)
            g_array_free(narrowed, TRUE);
        /* The launcher has the VM call the main class's `public static void
         * main(String[])`: of the methods the bytecodes cannot tell apart,
         * those go first (the first one is kept where a choice is made
         * before the trace decides it). On xalan with -Xint, main's first
         * `new` has the VM load classes for thousands of events; the paths
         * through the 1,165 methods that start with `new` outgrew their
         * memory (ARENA_CHOOSE) 1,537 events in, and the choice made then
         * put StringConcatFactory.argumentMismatch under main for the run. */
        guint front = 0;
        for (guint j = 0; j < v->len; j++) {
            uint32_t mi = g_array_index(v, uint32_t, j);
            if (!is_launcher_main(rc_method_at(r->p, mi)))
                continue;
            memmove(&g_array_index(v, uint32_t, front + 1), &g_array_index(v, uint32_t, front),
                    (j - front) * sizeof(uint32_t));
            g_array_index(v, uint32_t, front++) = mi;
        }
        fit_entry *memo = g_new0(fit_entry, 1);
        memo->op = -1 - (int)k;
        memo->fit = v;
        g_ptr_array_add(r->fit_memo, memo);
        fit = v;
    }
    /* While a frame below links or runs an invokedynamic of class C, the
     * VM or java.lang.invoke constructs C's lambda proxy (reflectively, or
     * through DirectMethodHandle's newInvokeSpecial): C's proxies go first.
     * Their constructors' bytecodes are those of any constructor storing the
     * same fields: on Dispatch, JDK 17's regex Pattern's proxy had been taken
     * for Dispatch$Rect.<init>(II)V, Dispatch's own for another ()V one. */
    const char *indy = fit->len > 1 ? indy_class_below(r, caller) : NULL;
    for (int pass = indy ? 0 : 1; pass < 2; pass++)
        for (guint j = 0; j < fit->len; j++) {
            if (r->next->len >= MAX_HYP) {
                r->st.capped++;
                return;
            }
            const rc_method *m = rc_method_at(r->p, g_array_index(fit, uint32_t, j));
            if (indy && lambda_proxy_of(m->klass, indy) != (pass == 0))
                continue;
            bool out = false;
            for (size_t i = 0; i < nruled_out && !out; i++)
                out = ruled_out[i] == m;
            if (!out)
                enter(r, caller, h, m, m->id, k, call_bci);
        }
}

/* How well callee t explains the bytecodes after this entry (once per
 * event and method: every hypothesis at this call asks the same). */
static int entry_score(rp_projector *r, const rc_method *t, entry_kind_t k)
{
    if (!pj_entry_fits(k, t) || !rc_method_may_run(r->p, t, r->ev->tsc))
        return W_NO;
    if (k != EK_JAVA && k != EK_SYNC)
        return W_YES;
    /* entries are stamped with the event they were computed for, so the memo
     * never needs clearing on the per-event path */
    gsize v = GPOINTER_TO_SIZE(g_hash_table_lookup(r->entry_memo, GUINT_TO_POINTER(t->index + 1)));
    if (v && (v >> 2) == r->st.events)
        return (int)(v & 3);
    uint16_t ops[LOOKAHEAD];
    uint8_t br[LOOKAHEAD];
    uint32_t jm[LOOKAHEAD];
    size_t n = pj_lookahead(r, r->ev_slot + 1, ops, br, jm, LOOKAHEAD);
    int score = n == 0 || ops[0] >= 0x100 ? W_MAYBE : pj_accepts(r, t->index, 0, ops, br, jm, n);
    g_hash_table_insert(r->entry_memo, GUINT_TO_POINTER(t->index + 1),
                        GSIZE_TO_POINTER(((gsize)r->st.events << 2) | (gsize)score));
    return score;
}

/* Whether m's class has objects (see rp_projector.instantiated). */
static bool may_have_receiver(const rp_projector *r, const rc_method *m)
{
    bool has = g_hash_table_contains(r->instantiated, m->klass);
    if (!has && r->assumed_absent)
        g_hash_table_add(r->assumed_absent, (gpointer)m->klass);
    return has;
}

/* The invoke frame f is in the middle of (an interpreted frame's last
 * instruction, a compiled frame's position): its opcode, method and
 * instruction; 0 when there is none. */
static int call_site(rp_projector *r, const frame *f, const rc_method **m, uint32_t *insn)
{
    if (!f || f->method == NONE)
        return 0;
    const rc_method *fm = rc_method_at(r->p, f->method);
    const rc_cfg *g = fm ? rc_cfg_get(r->p, fm) : NULL;
    if (!g)
        return 0;
    int64_t i = f->kind == FR_INTERP && f->last != NONE ? (int64_t)f->last
                : f->kind == FR_COMPILED && f->bci >= 0 ? rc_cfg_index(g, (uint32_t)f->bci)
                                                        : -1;
    if (i < 0 || (uint64_t)i >= g->ninsn || !jvm_is_invoke(g->op[i]))
        return 0;
    *m = fm;
    *insn = (uint32_t)i;
    return g->op[i];
}

typedef struct rebind_key {
    const frame *f;
    const rc_class *recv;
} rebind_key;

guint pj_rebind_hash(gconstpointer p)
{
    const rebind_key *k = p;
    uint64_t h = ((uint64_t)(uintptr_t)k->f ^ (uint64_t)(uintptr_t)k->recv * 0x9e3779b97f4a7c15ull) *
                 0xbf58476d1ce4e5b9ull;
    return (guint)(h ^ (h >> 31));
}

gboolean pj_rebind_equal(gconstpointer a, gconstpointer b)
{
    const rebind_key *x = a, *y = b;
    return x->f == y->f && x->recv == y->recv;
}

/* f and the frames below it that share its receiver, with bound recv (at
 * most `depth` of them: deeper ones keep their looser bound). Hypotheses
 * that narrow the same frames get the same copies: dedup compares callers
 * by address. */
static const frame *rebind(rp_projector *r, const frame *f, const rc_class *recv, int depth)
{
    rebind_key k = { f, recv };
    const frame *done = g_hash_table_lookup(r->rebound, &k);
    if (done)
        return done;
    frame c = *f;
    c.recv = recv;
    if (f->this_call && f->caller &&
        (f->caller->kind == FR_INTERP || f->caller->kind == FR_COMPILED) && depth > 1)
        c.caller = rebind(r, f->caller, recv, depth - 1);
    frame *n = pj_frame_copy(r, &c);
    rebind_key *key = pj_arena_alloc(r->a, sizeof *key);
    *key = k;
    g_hash_table_insert(r->rebound, key, n);
    return n;
}

#define TARGETS_LOCAL 64

/* Whether a receiver within bound still selects frame f's own method, where
 * f was entered by a virtual call (its caller's invoke is in progress): a
 * frame of NodeTest.execute(XPathContext) has no StepPattern receiver,
 * since StepPattern overrides that method. xalan's XPath.getMatchScore
 * calls execute(XPathContext) on a StepPattern; NodeTest's and
 * StepPattern's have the same bytecodes, a call of execute(XPathContext,
 * int) on this, which only StepPattern's class tells. True where the way
 * in is not known. */
static bool still_selected(rp_projector *r, const frame *f, const rc_class *bound)
{
    const frame *c = f->caller;
    if (!bound || !c || c->kind != FR_INTERP || !c->calling || c->last == NONE)
        return true;
    const rc_method *cm = rc_method_at(r->p, c->method);
    const rc_cfg *g = cm ? rc_cfg_get(r->p, cm) : NULL;
    if (!g || c->last >= g->ninsn)
        return true;
    int op = g->op[c->last];
    if (op != JVM_INVOKEVIRTUAL && op != JVM_INVOKEINTERFACE)
        return true;
    const rc_class *narrowed;
    return rc_receiver_may_run(r->p, bound, op, rc_method_at(r->p, f->method), &narrowed);
}

/* Enters the call targets that best explain what follows; with open
 * targets, and none that explains it fully, any method may be the callee.
 * A call on the caller's own receiver enters only targets its class can
 * select (unless that leaves none), and what a target tells of the class
 * goes to the caller and the frames sharing the receiver. */
typedef struct call_targets {
    const rc_method *const *v;
    size_t n;
    bool open;             /* methods the analysis does not know may be called */
    uint32_t open_doubt;   /* added to the doubt of a path entering those */
} call_targets;

static void enter_targets(rp_projector *r, const frame *f, const hist *h,
                          const call_targets *ct, entry_kind_t k, int32_t bci)
{
    const rc_method *const *t = ct->v;
    size_t nt = ct->n;
    bool open = ct->open;
    uint32_t open_doubt = ct->open_doubt;
    bool on_this = false;
    int op = 0;
    const rc_method *m = NULL;
    uint32_t insn = NONE;
    if (nt && (op = call_site(r, f, &m, &insn)))
        on_this = rc_receiver_is_this(r->p, m, insn);
    typedef struct fit {
        bool itable;               /* the itable scan allows it */
        bool may;                  /* the receiver's class can select it */
        bool ruled_out;            /* the caller's own method would not have
                                    * been selected (still_selected) */
        const rc_class *bound;     /* the receiver's bound once it ran */
    } fit;
    fit local[TARGETS_LOCAL];
    fit *rf = nt <= TARGETS_LOCAL ? local : g_new(fit, nt);
    /* The itable position the interface call's scan found: targets no
     * receiver class at that position selects are out (unless that leaves
     * none: trust the trace). */
    bool by_itable = op == JVM_INVOKEINTERFACE && r->call_itable_pos && nt > 1;
    size_t in_itable = 0;
    for (size_t j = 0; j < nt; j++) {
        rf[j].itable = !by_itable ||
                       rc_itable_may_run(r->p, m, insn, r->call_itable_pos - 1, t[j]);
        in_itable += rf[j].itable;
    }
    if (by_itable && in_itable == 0)
        for (size_t j = 0; j < nt; j++)
            rf[j].itable = true;
    else if (by_itable && in_itable < nt)
        r->st.itable_filtered++;
    size_t may = 0, nruled_out = 0;
    for (size_t j = 0; j < nt; j++) {
        rf[j].may = on_this && rf[j].itable &&
                    rc_receiver_may_run(r->p, f->recv, op, t[j], &rf[j].bound);
        rf[j].ruled_out = rf[j].may && rf[j].bound != f->recv &&
                          !still_selected(r, f, rf[j].bound);
        if (rf[j].ruled_out) {
            rf[j].may = false;
            rf[j].itable = false;
            nruled_out++;
        }
        may += rf[j].may;
    }
    /* no receiver information (or none that any target fits: trust the
     * trace) */
    bool filter = on_this && may > 0;
    if (filter && may < nt)
        r->st.receiver_filtered++;
    int top = W_NO;
    for (size_t j = 0; j < nt; j++)
        if (rf[j].itable && (!filter || rf[j].may))
            top = best(top, entry_score(r, t[j], k));
    /* an invokespecial of a constructor (the one target of `new C; ...;
     * invokespecial C.<init>`) makes an object of C on every path through
     * that site: C's virtual methods rank first from now on, also while the
     * paths have not narrowed to one */
    if (nt == 1 && op == JVM_INVOKESPECIAL && !strcmp(t[0]->name, "<init>"))
        g_hash_table_add(r->instantiated, (gpointer)t[0]->klass);
    /* with several targets, those whose class has objects go first
     * (hypotheses keep their order, and of two that the trace cannot tell
     * apart the first is kept) */
    for (int pass = nt > 1 ? 0 : 1; top > W_NO && pass < 2 && !r->doubtful_pass; pass++)
        for (size_t j = 0; j < nt; j++) {
            if (!rf[j].itable || (filter && !rf[j].may) || entry_score(r, t[j], k) != top ||
                (nt > 1 && may_have_receiver(r, t[j]) != !pass))
                continue;
            if (!filter) {
                callee_info c = { .m = t[j], .id = t[j]->id,
                             .recv = rc_receiver_bound(r->p, t[j]), .this_call = on_this };
                enter_on(r, f, h, c, k, bci);
                continue;
            }
            const frame *caller = rf[j].bound != f->recv ? rebind(r, f, rf[j].bound, 64) : f;
            callee_info c = { .m = t[j], .id = t[j]->id, .recv = rf[j].bound, .this_call = true };
            enter_on(r, caller, h, c, k, bci);
        }
    /* an open site may call methods the analysis does not know, not those
     * it ruled out */
    const rc_method *ruled_out_local[TARGETS_LOCAL];
    const rc_method **ruled_out = nruled_out <= TARGETS_LOCAL
                                      ? ruled_out_local
                                      : g_new(const rc_method *, nruled_out);
    for (size_t j = 0, n = 0; j < nt; j++)
        if (rf[j].ruled_out)
            ruled_out[n++] = t[j];
    if (rf != local)
        g_free(rf);
    if (open && top < W_YES) {
        if (open_doubt && r->defer_doubtful) {
            g_array_append_val(r->deferred, r->stepping);
        } else {
            r->doubt += open_doubt;
            enter_any(r, f, h, k, bci, ruled_out, nruled_out);
            r->doubt -= open_doubt;
        }
    }
    if (ruled_out != ruled_out_local)
        g_free(ruled_out);
}

void pj_step_entry(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    entry_kind_t k = pj_entry_kind_of(e->desc);
    if (!f)
        f = pj_push(r, NULL, pj_unknown_frame());
    if (f->kind == FR_INTERP && f->calling && f->last != NONE) {
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_cfg *g = rc_cfg_get(r->p, m);
        int32_t bci = (int32_t)g->bci[f->last];
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets(r->p, m, (uint32_t)bci, &t, &open);
        enter_targets(r, f, h, &(call_targets){ .v = t, .n = nt, .open = open }, k, bci);
        return;
    }
    if (f->kind == FR_COMPILED && f->bci >= 0 && f->method != NONE) {
        /* compiled code calling an interpreted method (c2i): the targets of
         * the invoke at the frame's bci rank first, but that bci is the last
         * one a PC record named before the call, not always the call's own
         * (records are sparse where DebugNonSafepoints was off, and code
         * HotSpot adds around calls has none): any method stays possible */
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_method *const *t = NULL;
        bool open = false;
        size_t nt = m && m->code ? rc_call_targets(r->p, m, (uint32_t)f->bci, &t, &open) : 0;
        enter_targets(r, f, h, &(call_targets){ .v = t, .n = nt, .open = true }, k, f->bci);
        return;
    }
    if (f->kind == FR_VMCALL && !f->calling) {
        frame v = *f;
        v.calling = true;
        f = pj_frame_copy(r, &v);
        /* The VM calls Java in the middle of an interpreted instruction:
         * mostly the class initializers, class loading and linking that
         * instruction needs. Those rank first; any other method can still
         * be the one (open). */
        const frame *c = f->caller;
        if (c && c->kind == FR_INTERP && c->last != NONE) {
            const rc_method *m = rc_method_at(r->p, c->method);
            const rc_cfg *g = rc_cfg_get(r->p, m);
            const rc_method *const *t;
            size_t nt = g ? rc_vm_call_targets(r->p, m, g->bci[c->last], &t) : 0;
            call_targets ct = { .v = t, .n = nt, .open = true, .open_doubt = 1 };
            enter_targets(r, f, h, &ct, k, -1);
            return;
        }
    }
    enter_any(r, f, h, k, -1, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Compiled code */

uint32_t pj_index_of_id(const rp_projector *r, uint64_t id)
{
    const rc_method *m = id ? rc_method_by_id(r->p, id) : NULL;
    return m ? m->index : NONE;
}

/* Compiled frame f's callee `callee` (program index) gets the receiver
 * bound of the call: where the call is on f's own receiver, the bound f has
 * as narrowed by the callee (the trace names it), and f and the frames
 * sharing that receiver learn the narrowing (in *caller). */
static void compiled_receiver(rp_projector *r, const frame **caller, frame *n)
{
    const frame *f = *caller;
    const rc_method *t = n->method == NONE ? NULL : rc_method_at(r->p, n->method);
    n->recv = t ? rc_receiver_bound(r->p, t) : NULL;
    n->this_call = false;
    const rc_method *m;
    uint32_t insn;
    int op = f && t ? call_site(r, f, &m, &insn) : 0;
    if (!op || !rc_receiver_is_this(r->p, m, insn))
        return;
    const rc_class *narrowed;
    if (!rc_receiver_may_run(r->p, f->recv, op, t, &narrowed))
        return;                /* the trace names the callee: it wins */
    n->recv = narrowed;
    n->this_call = true;
    if (narrowed != f->recv)
        *caller = rebind(r, f, narrowed, 64);
}

static frame compiled_frame(const rp_projector *r, const dc_event *e, uint64_t id, uint32_t depth)
{
    return (frame){ .kind = FR_COMPILED, .method = pj_index_of_id(r, id), .insn = NONE,
                    .last = NONE, .returned = NONE, .inline_depth = depth, .bci = -1,
                    .method_id = id, .code = e->code };
}

/* The bci of the call a frame waits on; -1 when not known. */
static int32_t calling_bci(const rp_projector *r, const frame *f)
{
    if (f->kind == FR_COMPILED)
        return f->bci;
    if (f->kind == FR_INTERP && f->last != NONE) {
        const rc_cfg *g = rc_cfg_get(r->p, rc_method_at(r->p, f->method));
        return g ? (int32_t)g->bci[f->last] : -1;
    }
    return -1;
}

/* A return into compiled version e->code that no frame waits for, where the
 * frame below the activation that returned waits on a call of its own: the
 * version ran unseen between the two (its entry was in code the decoder
 * could not follow, or recorded only later), called by that frame. Its
 * frame is put there as an inferred call, so the known callers stay (a
 * return past them all would leave the rest of the segment rooted at the
 * thread). False where the rule does not apply. */
static bool unseen_caller(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    if (f && f->kind == FR_COMPILED && !f->calling) {
        const void *code = f->code;
        while (f && f->kind == FR_COMPILED && f->code == code && !f->calling &&
               f->inline_depth > 1)
            f = pj_pop(r, f, &h, 0);
        if (f && f->kind == FR_COMPILED && f->code == code && !f->calling)
            f = pj_pop(r, f, &h, 0);
    }
    if (!f || !f->calling || (f->kind != FR_COMPILED && f->kind != FR_INTERP))
        return false;
    h = pj_record(r, h, FL_CALL, e->method_id, calling_bci(r, f), -1,
                  FL_F_COMPILED | FL_F_INFERRED);
    frame n = compiled_frame(r, e, e->method_id, 1);
    pj_add(r, pj_push(r, f, n), h);
    return true;
}

void pj_step_jit_enter(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    if (e->flags & DC_F_OSR) {
        /* on-stack replacement: the interpreted frame goes on compiled, so
         * it runs the version's method (other hypotheses end here) */
        if (f && f->kind == FR_INTERP) {
            if (f->method_id == e->method_id) {
                frame n = compiled_frame(r, e, e->method_id, 1);
                n.recv = f->recv;
                n.this_call = f->this_call;
                pj_add(r, pj_push(r, f->caller, n), h);
            }
            return;
        }
        if (!f || f->kind == FR_UNKNOWN) {
            h = pj_record(r, h, FL_CALL, e->method_id, -1, -1, FL_F_CONTEXT | FL_F_COMPILED);
            pj_add(r, pj_push(r, f, compiled_frame(r, e, e->method_id, 1)), h);
            return;
        }
    }
    bool by_return = e->flags & (DC_F_BY_RETURN | DC_F_THROWN);
    if (by_return) {
        /* back in a compiled caller: pop to its frame, the one of that
         * version waiting for a call (a recursive call's callee is another
         * frame of the same version) */
        const frame *g = f;
        const hist *hh = h;
        bool fresh = true;     /* no frame of the kept stack (before_save) */
        bool any_calling = false;
        bool thrown = e->flags & DC_F_THROWN;   /* to a handler: frames above unwound */
        for (const frame *k = f; k && k->kind != FR_UNKNOWN && !any_calling && !thrown;
             k = k->caller)
            any_calling = k->kind == FR_COMPILED && k->code == e->code && k->calling;
        while (g && !(g->kind == FR_COMPILED && g->code == e->code &&
                      (g->calling || !any_calling))) {
            fresh = fresh && !g->from_before;
            if (g->kind == FR_UNKNOWN) {
                g = NULL;
                break;
            }
            g = pj_pop(r, g, &hh, thrown ? FL_F_EXCEPTION : 0);
        }
        if (g) {
            if (g->calling) {
                frame c = *g;
                c.calling = false;
                g = pj_frame_copy(r, &c);
            }
            pj_add(r, g, hh);
            return;
        }
        if (!thrown && unseen_caller(r, f, h, e))
            return;
        /* a compiled frame the segment before left running (see
         * expand), tried first */
        int j = fresh ? pj_before_find(r, NONE, e->code) : -1;
        if (j >= 0)
            pj_add(r, pj_before_frame(r, (guint)j), pj_record_before(r, hh, (guint)j));
        /* its frame was never seen: it was running before the segment (the
         * frames above it returned) */
        hh = pj_record(r, hh, FL_CALL, e->method_id, -1, -1, FL_F_CONTEXT | FL_F_COMPILED);
        pj_add(r, pj_push(r, NULL, compiled_frame(r, e, e->method_id, 1)), hh);
        return;
    }
    /* A jump inside it; a call is recursion, unless it lands where the
     * version has no scope: its static call stub, on the way to an
     * interpreted callee (the c2i adapter and method entry follow) */
    if (f && f->kind == FR_COMPILED && f->code == e->code &&
        ((e->flags & DC_F_NO_SCOPE) || (!f->calling && !(e->flags & DC_F_BY_CALL))))
        return pj_add(r, f, h);
    int32_t call_bci = -1;
    if (f && f->kind == FR_INTERP && f->calling && f->last != NONE) {
        /* i2c: the compiled callee must be a target of the invoke */
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_cfg *g = rc_cfg_get(r->p, m);
        call_bci = (int32_t)g->bci[f->last];
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets(r->p, m, (uint32_t)call_bci, &t, &open);
        uint32_t callee = pj_index_of_id(r, e->method_id);
        bool found = open || callee == NONE;
        for (size_t j = 0; j < nt && !found; j++)
            found = t[j]->index == callee;
        if (!found)
            return;
    } else if (f && f->kind == FR_COMPILED) {
        call_bci = f->bci;
    } else if (f && f->kind == FR_VMCALL && !f->calling) {
        frame v = *f;
        v.calling = true;
        f = pj_frame_copy(r, &v);
    }
    h = pj_record(r, h, FL_CALL, e->method_id, call_bci, -1, FL_F_COMPILED);
    frame n = compiled_frame(r, e, e->method_id, 1);
    compiled_receiver(r, &f, &n);
    pj_add(r, pj_push(r, f, n), h);
}

/* Compiled code as reconstruct/compiled.h gives it: inlined calls and
 * returns along the bytecode path, the path's bytecodes, the position. */
void pj_step_jit(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    if (!f || f->kind != FR_COMPILED || f->code != e->code)
        return pj_add(r, f, h);
    /* frames of the version deeper than the event's place left unseen
     * (taken from the stack an earlier segment ended with, say) */
    uint32_t depth = e->kind == DC_INLINE_CALL ? e->depth - 1
                     : e->kind == DC_INLINE_RETURN ? e->depth + 1 : e->depth;
    while (depth >= 1 && f->inline_depth > depth && f->caller &&
           f->caller->kind == FR_COMPILED && f->caller->code == e->code)
        f = pj_pop(r, f, &h, 0);
    switch (e->kind) {
    case DC_INLINE_CALL: {
        bool context = e->flags & DC_F_CONTEXT;
        uint32_t fl = FL_F_COMPILED | FL_F_INLINED |
                      (e->flags & DC_F_INFERRED ? FL_F_INFERRED : 0) |
                      (e->flags & DC_F_ESTIMATED ? FL_F_ESTIMATED : 0) |
                      (context ? FL_F_CONTEXT : 0);
        h = pj_record(r, h, FL_CALL, e->method_id, context ? -1 : e->call_bci, -1, fl);
        frame n = compiled_frame(r, e, e->method_id, e->depth);
        n.bci = e->bci;
        if (!context)
            compiled_receiver(r, &f, &n);
        pj_add(r, pj_push(r, f, n), h);
        return;
    }
    case DC_INLINE_RETURN:
        if (f->inline_depth > 1)
            f = pj_pop(r, f, &h,
                       (e->flags & DC_F_INFERRED ? FL_F_INFERRED : 0) |
                           (e->flags & DC_F_ESTIMATED ? FL_F_ESTIMATED : 0) |
                           (e->flags & DC_F_THROWN ? FL_F_EXCEPTION : 0));
        pj_add(r, f, h);
        return;
    case DC_JIT_BYTECODE: {
        h = pj_record(r, h, FL_BYTECODE, e->method_id, e->bci, e->opcode,
                      FL_F_COMPILED | (e->flags & DC_F_ESTIMATED ? FL_F_ESTIMATED : 0));
        if (f->bci != e->bci) {
            frame n = *f;
            n.bci = e->bci;
            f = pj_frame_copy(r, &n);
        }
        pj_add(r, f, h);
        return;
    }
    default:
        /* code with no scope (bci -1: stubs HotSpot adds around calls, a
         * return address) keeps the last bci a PC record named: the site of
         * the call made from there (see step_entry) */
        if (e->bci >= 0 && f->bci != e->bci && f->method_id == e->method_id) {
            frame n = *f;
            n.bci = e->bci;
            f = pj_frame_copy(r, &n);
        }
        pj_add(r, f, h);
        return;
    }
}

/* A compiled frame (with its inlined frames) continues in the interpreter. */
void pj_step_deopt(rp_projector *r, const frame *f, const hist *h)
{
    if (!f || f->kind != FR_COMPILED)
        return pj_add(r, f, h);
    const void *code = f->code;
    const frame *chain[64];
    size_t n = 0;
    while (f && f->kind == FR_COMPILED && f->code == code && n < 64) {
        chain[n++] = f;
        f = f->caller;
    }
    for (size_t k = n; k-- > 0;) {
        uint32_t mi = chain[k]->method;
        const rc_method *m = mi == NONE ? NULL : rc_method_at(r->p, mi);
        frame x = m && m->code ? pj_interp_frame(mi, ANY, m->id) : pj_unknown_frame();
        if (k > 0)
            x.calling = true;   /* outer frames are mid-call to the inner ones */
        f = pj_push(r, f, x);
    }
    pj_add(r, f, h);
}
