/* Units of reconstruct/: the class-file parser, bytecode decoding, CFGs
 * (checked against javap -c of javac-compiled classes), and the program
 * loader with call targets over a synthetic jvm/meta.jpt made from the same
 * classes (with a hidden class, a damaged class file and one class loaded
 * twice). RECON_CLASSES names the directory of the compiled classes. */
#include <criterion/criterion.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "common/jmeta.h"
#include "reconstruct/cfg.h"
#include "decoder/classfile.h"
#include "reconstruct/program.h"
#include "reconstruct/project.h"

static uint8_t *slurp(const char *name, size_t *len)
{
    const char *dir = getenv("RECON_CLASSES");
    cr_assert(dir, "RECON_CLASSES is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.class", dir, name);
    gchar *data = NULL;
    gsize n = 0;
    cr_assert(g_file_get_contents(path, &data, &n, NULL), "cannot read %s", path);
    *len = n;
    return (uint8_t *)data;
}

static const cf_method *method(const cf_class *c, const char *name)
{
    for (uint32_t i = 0; i < c->nmethods; i++)
        if (strcmp(c->methods[i].name, name) == 0)
            return &c->methods[i];
    cr_assert_fail("no method %s in %s", name, c->name);
    return NULL;
}

/* The successors of the instruction at bci as "kind:bci" words. */
static char *succ(const rc_cfg *g, uint32_t bci)
{
    int64_t i = rc_cfg_index(g, bci);
    cr_assert_geq(i, 0, "bci %u is not an instruction", bci);
    GString *s = g_string_new("");
    static const char *const kn[] = { "?", "N", "T", "S", "X" };
    for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++)
        g_string_append_printf(s, "%s%s:%u", s->len ? " " : "", kn[g->edge[e].kind],
                               g->bci[g->edge[e].to]);
    return g_string_free(s, FALSE);
}

static rc_cfg *cfg_of(const cf_method *m)
{
    char err[256] = "";
    rc_cfg *g = rc_cfg_build(m->code, m->code_len, m->handlers, m->nhandlers, err, sizeof err);
    cr_assert(g, "%s: %s", m->name, err);
    return g;
}

#define EXPECT_SUCC(g, bci, want)                                                           \
    do {                                                                                    \
        char *s_ = succ(g, bci);                                                            \
        cr_expect_str_eq(s_, want, "bci %u", (unsigned)(bci));                              \
        g_free(s_);                                                                         \
    } while (0)

Test(classfile, parse_flow)
{
    size_t len;
    uint8_t *b = slurp("Flow", &len);
    cf_class c;
    char err[256];
    cr_assert_eq(cf_parse(b, len, &c, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(c.name, "Flow");
    cr_expect_str_eq(c.super_name, "java/lang/Object");
    cr_expect_str_eq(c.source, "Flow.java");
    cr_expect_eq(c.major, 61);
    const cf_method *g = method(&c, "guarded");
    cr_expect_str_eq(g->sig, "(Ljava/lang/String;)I");
    cr_assert_eq(g->nhandlers, 3);
    cr_expect_eq(g->handlers[0].start_pc, 0);
    cr_expect_eq(g->handlers[0].end_pc, 5);
    cr_expect_eq(g->handlers[0].handler_pc, 15);
    cr_expect_str_eq(g->handlers[0].catch_type, "java/lang/NumberFormatException");
    cr_expect_null(g->handlers[1].catch_type);
    cr_expect_eq(g->handlers[1].handler_pc, 28);
    cr_expect_gt(g->nlines, 3);
    /* cf_parse_header agrees */
    cf_header h;
    cr_assert_eq(cf_parse_header(b, len, &h, err, sizeof err), 0);
    cr_expect_str_eq(h.this_class, "Flow");
    cf_free(&c);
    g_free(b);
}

Test(cfg, switches)
{
    size_t len;
    uint8_t *b = slurp("Flow", &len);
    cf_class c;
    char err[256];
    cr_assert_eq(cf_parse(b, len, &c, err, sizeof err), 0, "%s", err);
    rc_cfg *g = cfg_of(method(&c, "table"));
    /* javap: 1: tableswitch 0:28 1:31 2:34 default:37 */
    EXPECT_SUCC(g, 0, "N:1");
    EXPECT_SUCC(g, 1, "S:37 S:28 S:31 S:34");
    EXPECT_SUCC(g, 28, "N:30");
    EXPECT_SUCC(g, 30, "");
    cr_expect_eq(g->op[rc_cfg_index(g, 1)], 170);
    cr_expect_eq(g->ninsn, 10);
    rc_cfg_free(g);
    /* javap: 1: lookupswitch -5:36 1:36 1000:38 default:40 -- 36 once */
    g = cfg_of(method(&c, "lookup"));
    EXPECT_SUCC(g, 1, "S:40 S:36 S:38");
    rc_cfg_free(g);
    cf_free(&c);
    g_free(b);
}

Test(cfg, loop_and_handlers)
{
    size_t len;
    uint8_t *b = slurp("Flow", &len);
    cf_class c;
    char err[256];
    cr_assert_eq(cf_parse(b, len, &c, err, sizeof err), 0, "%s", err);
    rc_cfg *g = cfg_of(method(&c, "loop"));
    EXPECT_SUCC(g, 6, "N:9 T:19");  /* if_icmpge 19 */
    EXPECT_SUCC(g, 16, "T:4");      /* goto 4: the back edge */
    EXPECT_SUCC(g, 13, "N:16");     /* iinc */
    /* the loop's instructions, and only they, are on a cycle */
    for (uint32_t i = 0; i < g->ninsn; i++)
        cr_expect_eq(g->cyclic[i], g->bci[i] >= 4 && g->bci[i] <= 16, "bci %u", g->bci[i]);
    rc_cfg_free(g);
    /* handlers: [0,5)->15 NumberFormatException, [0,5)->28 any, [15,18)->28 any */
    g = cfg_of(method(&c, "guarded"));
    EXPECT_SUCC(g, 0, "N:1 X:15 X:28");
    EXPECT_SUCC(g, 1, "N:4 X:15 X:28");
    EXPECT_SUCC(g, 5, "N:8");
    EXPECT_SUCC(g, 14, "");
    EXPECT_SUCC(g, 15, "N:16 X:28");
    EXPECT_SUCC(g, 17, "N:18 X:28");
    EXPECT_SUCC(g, 38, "");
    rc_cfg_free(g);
    cf_free(&c);
    g_free(b);
}

Test(cfg, jsr_ret_wide)
{
    /* 0: jsr 8 | 3: jsr 8 | 6: iconst_0 | 7: ireturn | 8: astore_1 | 9: wide ret 1 */
    static const uint8_t code[] = { 0xa8, 0x00, 0x08, 0xa8, 0x00, 0x05, 0x03, 0xac,
                                    0x4c, 0xc4, 0xa9, 0x00, 0x01 };
    char err[256];
    rc_cfg *g = rc_cfg_build(code, sizeof code, NULL, 0, err, sizeof err);
    cr_assert(g, "%s", err);
    EXPECT_SUCC(g, 0, "T:8");
    EXPECT_SUCC(g, 3, "T:8");
    EXPECT_SUCC(g, 9, "T:3 T:6");
    cr_expect_eq(cf_insn_len(code, sizeof code, 9, err, sizeof err), 4);
    /* ret's edges close a cycle 3 -> 8 -> 9 -> 3; 0 and 6 run once */
    static const uint32_t once[] = { 0, 6 }, again[] = { 3, 8, 9 };
    for (size_t i = 0; i < 2; i++)
        cr_expect_eq(g->cyclic[rc_cfg_index(g, once[i])], 0, "bci %u", once[i]);
    for (size_t i = 0; i < 3; i++)
        cr_expect_eq(g->cyclic[rc_cfg_index(g, again[i])], 1, "bci %u", again[i]);
    rc_cfg_free(g);
    /* an instruction that jumps to itself is a cycle of one */
    static const uint8_t self[] = { 0x00, 0xa7, 0x00, 0x00 };
    g = rc_cfg_build(self, sizeof self, NULL, 0, err, sizeof err);
    cr_assert(g, "%s", err);
    cr_expect_eq(g->cyclic[0], 0);
    cr_expect_eq(g->cyclic[1], 1);
    rc_cfg_free(g);
    /* wide iinc is 6 bytes; wide of a non-local opcode is invalid */
    static const uint8_t w[] = { 0xc4, 0x84, 0x01, 0x00, 0x00, 0x05, 0xc4, 0x60 };
    cr_expect_eq(cf_insn_len(w, sizeof w, 0, err, sizeof err), 6);
    cr_expect_eq(cf_insn_len(w, sizeof w, 6, err, sizeof err), -1);
    cr_expect(strstr(err, "bci 6"), "%s", err);
    /* invalid opcode, named with its bci */
    static const uint8_t bad[] = { 0x00, 0x00, 0xcb };
    cr_expect_null(rc_cfg_build(bad, sizeof bad, NULL, 0, err, sizeof err));
    cr_expect(strstr(err, "bci 2") && strstr(err, "invalid opcode 203"), "%s", err);
    /* a branch into the middle of an instruction */
    static const uint8_t mid[] = { 0xa7, 0x00, 0x04, 0x11, 0x00, 0x01, 0xb1 };
    cr_expect_null(rc_cfg_build(mid, sizeof mid, NULL, 0, err, sizeof err));
    cr_expect(strstr(err, "bci 0"), "%s", err);
    cr_expect_eq(rc_code_check(mid, sizeof mid, NULL, 0, err, sizeof err), -1);
}

Test(cfg, switch_padding)
{
    /* tableswitch at bci 2: pad 1; at bci 3: pad 0 */
    uint8_t a[] = { 0x00, 0x00, 0xaa, 0x00, 0, 0, 0, 18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 18,
                    0xb1 };
    char err[256];
    cr_expect_eq(cf_insn_len(a, sizeof a, 2, err, sizeof err), 18, "%s", err);
    rc_cfg *g = rc_cfg_build(a, sizeof a, NULL, 0, err, sizeof err);
    cr_assert(g, "%s", err);
    EXPECT_SUCC(g, 2, "S:20");
    rc_cfg_free(g);
    uint8_t b[] = { 0x00, 0x00, 0x00, 0xab, 0, 0, 0, 12, 0, 0, 0, 0, 0xb1 };
    cr_expect_eq(cf_insn_len(b, sizeof b, 3, err, sizeof err), 9, "%s", err);
    /* npairs < 0 and low > high are refused */
    b[7] = 12;
    b[8] = 0xff;
    cr_expect_eq(cf_insn_len(b, sizeof b, 3, err, sizeof err), -1);
}

Test(classfile, hostile_headers)
{
    size_t len;
    uint8_t *b = slurp("Cha", &len);
    cf_class c;
    char err[256];
    for (size_t n = 0; n < len; n++) {
        err[0] = 0;
        cr_assert_eq(cf_parse(b, n, &c, err, sizeof err), -1, "truncated at %zu parsed", n);
        cr_assert(strncmp(err, "offset ", 7) == 0, "n %zu: '%s'", n, err);
    }
    cr_assert_eq(cf_parse(b, len, &c, err, sizeof err), 0, "%s", err);
    cr_expect_eq(c.nbsm, 2);
    cf_free(&c);
    g_free(b);
}

/* ---- the program over a synthetic trace ------------------------------- */

static const char *const classes[] = { "Flow", "Shape", "Base", "Circle", "Square", "Ring",
                                       "Cha", "Sample", "Link", "Counter", "Marker", "Sized",
                                       "Tag", "Other", "Count0", "Count1", "Tagged", "Count2",
                                       "Count2b", "Counting", "Made", "Copier", "Returns", "Skip",
                                       "Op", "Twice", "Less", "Pattern0", "Pattern1" };
#define NCLASSES (sizeof classes / sizeof classes[0])

static void put_at(jm_writer *w, uint16_t type, uint64_t tsc, jm_buf *b)
{
    cr_assert_eq(jm_write(w, type, tsc, b->data, (uint32_t)b->len, NULL, 0), 0);
    b->len = 0;
}

static void put(jm_writer *w, uint16_t type, jm_buf *b)
{
    put_at(w, type, 1, b);
}

static uint64_t id_of(uint64_t cid, uint32_t k)
{
    return cid << 16 | (k + 1);
}

/* class ids 1..29 in the order above; Square again as 50; Init0 and Init1
 * as 60 and 61 (Init0 initialized when the agent started); Oval, loaded but
 * never prepared, 51; a hidden class 30; a damaged class 40; Launch, loaded
 * at LAUNCH_LOADED and recorded first (so its methods come first), 70.
 * Method ids: class id << 16 | method number + 1. */
#define LAUNCH_LOADED (1ull << 40)
static const struct { const char *name; uint64_t cid; } late_classes[] = {
    { "Square", 50 }, { "Init0", 60 }, { "Init1", 61 } };
#define NLATE (sizeof late_classes / sizeof late_classes[0])
static char *make_trace(void)
{
    char *dir = g_dir_make_tmp("recon-XXXXXX", NULL);
    cr_assert(dir);
    char jvm[4096], err[256];
    snprintf(jvm, sizeof jvm, "%s/jvm", dir);
    mkdir(jvm, 0755);
    jm_writer *w = jm_writer_open(jvm, 1, 1, err, sizeof err);
    cr_assert(w, "%s", err);
    jm_buf b;
    jm_buf_init(&b);
    for (uint32_t i = 0; i <= NCLASSES + NLATE; i++) {
        const char *name = !i ? "Launch"
                           : i <= NCLASSES ? classes[i - 1] : late_classes[i - 1 - NCLASSES].name;
        uint64_t cid = !i ? 70 : i <= NCLASSES ? i : late_classes[i - 1 - NCLASSES].cid;
        uint64_t tsc = !i ? LAUNCH_LOADED : 1;
        size_t len;
        uint8_t *data = slurp(name, &len);
        char sig[256];
        snprintf(sig, sizeof sig, "L%s;", name);
        jm_put_u64(&b, cid);
        jm_put_str(&b, sig);
        jm_put_u32(&b, 1);
        jm_put_bytes(&b, data, (uint32_t)len);
        put_at(w, JM_CLASS_FILE, tsc, &b);
        cf_class c;
        cr_assert_eq(cf_parse(data, len, &c, err, sizeof err), 0);
        for (uint32_t k = 0; k < c.nmethods; k++) {
            jm_put_u64(&b, id_of(cid, k));
            jm_put_u64(&b, cid);
            jm_put_str(&b, sig);
            jm_put_str(&b, c.methods[k].name);
            jm_put_str(&b, c.methods[k].sig);
            jm_put_u32(&b, c.methods[k].access);
            put(w, JM_METHOD, &b);
        }
        jm_put_u64(&b, cid);
        jm_put_str(&b, sig);
        jm_put_u32(&b, 0);
        jm_put_u32(&b, c.nmethods);
        for (uint32_t k = 0; k < c.nmethods; k++)
            jm_put_u64(&b, id_of(cid, k));
        put_at(w, JM_CLASS_PREPARE, tsc, &b);
        cf_free(&c);
        g_free(data);
    }
    /* Found initialized when the agent started */
    jm_put_u32(&b, 1);
    jm_put_u64(&b, 60);
    put(w, JM_CLASSES_INITIALIZED, &b);
    /* Loaded, never prepared: a class file and nothing else */
    {
        size_t len;
        uint8_t *data = slurp("Oval", &len);
        jm_put_u64(&b, 51);
        jm_put_str(&b, "LOval;");
        jm_put_u32(&b, 1);
        jm_put_bytes(&b, data, (uint32_t)len);
        put(w, JM_CLASS_FILE, &b);
        g_free(data);
    }
    /* Hidden: Cha$$Lambda.0x1 { Cha$$Lambda.0x1() { super(); }
     *                           public Object get() { return Cha.make(); } } */
    static const uint8_t pool[] = {
        7, 0, 2,                                         /* #1 Class #2 */
        1, 0, 3, 'C', 'h', 'a',                          /* #2 */
        12, 0, 4, 0, 5,                                  /* #3 NameAndType #4 #5 */
        1, 0, 4, 'm', 'a', 'k', 'e',                     /* #4 */
        1, 0, 10, '(', ')', 'L', 'C', 'i', 'r', 'c', 'l', 'e', ';', /* #5 */
        10, 0, 1, 0, 3,                                  /* #6 Methodref #1.#3 */
        7, 0, 8,                                         /* #7 Class #8 */
        1, 0, 16, 'j', 'a', 'v', 'a', '/', 'l', 'a', 'n', 'g', '/', 'O', 'b', 'j', 'e', 'c',
        't',                                             /* #8 */
        12, 0, 10, 0, 11,                                /* #9 NameAndType #10 #11 */
        1, 0, 6, '<', 'i', 'n', 'i', 't', '>',           /* #10 */
        1, 0, 3, '(', ')', 'V',                          /* #11 */
        10, 0, 7, 0, 9,                                  /* #12 Methodref #7.#9 */
    };
    static const struct { uint64_t id; const char *name, *sig; uint8_t code[5]; uint32_t len; }
        hidden[] = { { 0x776, "<init>", "()V", { 0x2a, 0xb7, 0x00, 0x0c, 0xb1 }, 5 },
                     { 0x777, "get", "()Ljava/lang/Object;", { 0xb8, 0x00, 0x06, 0xb0 }, 4 } };
    const char *hsig = "LCha$$Lambda.0x0000000800c01000;";
    jm_put_u64(&b, 30);
    jm_put_str(&b, hsig);
    jm_put_u32(&b, JM_CLASS_HIDDEN);
    jm_put_u32(&b, 2);
    jm_put_u64(&b, 0x776);
    jm_put_u64(&b, 0x777);
    put(w, JM_CLASS_PREPARE, &b);
    for (size_t i = 0; i < 2; i++) {
        jm_put_u64(&b, hidden[i].id);
        jm_put_u64(&b, 30);
        jm_put_str(&b, hsig);
        jm_put_str(&b, hidden[i].name);
        jm_put_str(&b, hidden[i].sig);
        jm_put_u32(&b, 1);
        put(w, JM_METHOD, &b);
        jm_put_u64(&b, hidden[i].id);
        jm_put_i32(&b, -1);
        jm_put_i32(&b, 1);
        jm_put_bytes(&b, hidden[i].code, hidden[i].len);
        put(w, JM_METHOD_BYTECODE, &b);
    }
    jm_put_u64(&b, 30);
    jm_put_u32(&b, 13);
    jm_put_bytes(&b, pool, sizeof pool);
    put(w, JM_CONSTANT_POOL, &b);
    /* A method the JVM added after the load hook (as JFR does to event
     * classes): named by a METHOD record, absent from the class file. */
    jm_put_u64(&b, 0x888);
    jm_put_u64(&b, 1);
    jm_put_str(&b, "LFlow;");
    jm_put_str(&b, "phantom");
    jm_put_str(&b, "()V");
    jm_put_u32(&b, 1);
    put(w, JM_METHOD, &b);
    /* Damaged: a class file cut short. */
    size_t len;
    uint8_t *data = slurp("Circle", &len);
    jm_put_u64(&b, 40);
    jm_put_str(&b, "LBroken;");
    jm_put_u32(&b, 1);
    jm_put_bytes(&b, data, (uint32_t)(len / 2));
    put(w, JM_CLASS_FILE, &b);
    g_free(data);
    jm_buf_free(&b);
    cr_assert_eq(jm_writer_close(w), 0);
    return dir;
}

static rc_program *prog;
static char *trace_dir;

static void setup_prog(void)
{
    trace_dir = make_trace();
    char err[256];
    prog = rc_program_load(trace_dir, err, sizeof err);
    cr_assert(prog, "%s", err);
}

static void teardown_prog(void)
{
    rc_program_free(prog);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", trace_dir);
    cr_expect_eq(system(cmd), 0);
    g_free(trace_dir);
}

static const rc_method *find(const char *k, const char *n, const char *s)
{
    const rc_method *m = rc_method_find(prog, k, n, s);
    cr_assert(m, "no %s.%s%s", k, n, s);
    return m;
}

static gint cmp_word(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The call targets at the first invoke in m with opcode op, as sorted "C.n" words. */
static char *targets(const rc_method *m, uint8_t op, bool *open)
{
    const rc_cfg *g = rc_cfg_get(prog, m);
    cr_assert(g);
    for (uint32_t i = 0; i < g->ninsn; i++) {
        if (g->op[i] != op)
            continue;
        const rc_method *const *t;
        size_t n = rc_call_targets(prog, m, g->bci[i], &t, open);
        GPtrArray *words = g_ptr_array_new_with_free_func(g_free);
        for (size_t k = 0; k < n; k++)
            g_ptr_array_add(words, g_strdup_printf("%s.%s", t[k]->klass, t[k]->name));
        g_ptr_array_sort(words, cmp_word);
        g_ptr_array_add(words, NULL);
        char *s = g_strjoinv(" ", (char **)words->pdata);
        g_ptr_array_free(words, TRUE);
        return s;
    }
    cr_assert_fail("no opcode %u in %s", op, m->name);
    return NULL;
}

#define EXPECT_TARGETS(m, op, want, want_open)                                              \
    do {                                                                                    \
        bool o_;                                                                            \
        char *s_ = targets(m, op, &o_);                                                     \
        cr_expect_str_eq(s_, want, "%s.%s", (m)->klass, (m)->name);                         \
        cr_expect_eq(o_, want_open, "%s.%s: open %d", (m)->klass, (m)->name, o_);           \
        g_free(s_);                                                                         \
    } while (0)

TestSuite(program, .init = setup_prog, .fini = teardown_prog);

Test(program, loads_and_maps_ids)
{
    const char *const *w;
    size_t nw = rc_program_warnings(prog, &w);
    bool broken = false;
    for (size_t i = 0; i < nw; i++)
        broken |= strstr(w[i], "Broken") != NULL && strstr(w[i], "offset ") != NULL;
    cr_expect(broken, "no warning for the damaged class file (%zu warnings)", nw);
    const rc_method *m = find("Flow", "guarded", "(Ljava/lang/String;)I");
    cr_expect_eq(m->id >> 16, 1);
    cr_expect_eq(rc_method_by_id(prog, m->id), m);
    cr_expect_str_eq(m->source, "Flow.java");
    cr_expect_eq(m->nhandlers, 3);
    cr_expect_eq(rc_line_of(m, 0), 30);
    cr_expect_eq(rc_line_of(m, 15), 31);
    /* every id maps, with code unless abstract or native */
    size_t n = rc_program_nmethods(prog), with_id = 0;
    for (uint32_t i = 0; i < n; i++) {
        const rc_method *x = rc_method_at(prog, i);
        cr_assert_eq(x->index, i);
        if (x->id) {
            with_id++;
            cr_expect_eq(rc_method_by_id(prog, x->id), x);
        } else {
            cr_expect_str_eq(x->klass, "Oval", "%s.%s has no id", x->klass, x->name);
        }
        if (strcmp(x->name, "phantom") != 0)
            cr_expect_eq(x->code == NULL, (x->access & (0x0400 | 0x0100)) != 0, "%s.%s",
                         x->klass, x->name);
    }
    cr_expect_eq(with_id, n - 2);   /* Oval's constructor and area */
    /* Square twice (two loaders): distinct methods, both ids resolve */
    const rc_method *s1 = rc_method_by_id(prog, id_of(5, 1));
    const rc_method *s2 = rc_method_by_id(prog, id_of(50, 1));
    cr_assert(s1 && s2);
    cr_expect_neq(s1, s2);
    cr_expect_str_eq(s1->name, s2->name);
    cr_expect_null(rc_method_by_id(prog, 12345));
    /* the added method: found, in its class, without code, reported */
    const rc_method *ph = rc_method_by_id(prog, 0x888);
    cr_assert(ph);
    cr_expect_str_eq(ph->klass, "Flow");
    cr_expect_null(ph->code);
    cr_expect_eq(rc_method_find(prog, "Flow", "phantom", "()V"), ph);
    bool reported = false;
    for (size_t i = 0; i < nw; i++)
        reported |= strstr(w[i], "0x888") && strstr(w[i], "not in the class file");
    cr_expect(reported);
    cr_expect_null(rc_method_find(prog, "Broken", "x", "()V"));
}

Test(program, hidden_class)
{
    const rc_method *h = rc_method_by_id(prog, 0x777);
    cr_assert(h);
    cr_expect_str_eq(h->klass, "Cha$$Lambda.0x0000000800c01000");
    cr_expect_str_eq(h->name, "get");
    cr_assert_eq(h->code_len, 4);
    cr_expect_eq(h->max_locals, 1);
    EXPECT_TARGETS(h, 184, "Cha.make", false);
}

Test(program, cha)
{
    /* Shape.area through the interface: the three concrete overrides; open
     * because hidden classes (unknown supertypes) are loaded */
    EXPECT_TARGETS(find("Cha", "total", "([LShape;)D"), 185,
                   "Circle.area Ring.area Square.area Square.area", true);
    /* the default method for Square, Circle's override for Circle and Ring */
    EXPECT_TARGETS(find("Cha", "names", "(LShape;)Ljava/lang/String;"), 185,
                   "Circle.name Shape.name", true);
    /* through the abstract class: its concrete subclasses only; open since a
     * damaged class file (which might extend Base) was skipped */
    EXPECT_TARGETS(find("Cha", "viaBase", "(LBase;)D"), 182, "Circle.area Ring.area", true);
    /* super.area() and constructors: exact */
    EXPECT_TARGETS(find("Ring", "area", "()D"), 183, "Circle.area", false);
    EXPECT_TARGETS(find("Cha", "make", "()LCircle;"), 183, "Circle.<init>", false);
    /* a JDK class that was not captured */
    EXPECT_TARGETS(find("Flow", "guarded", "(Ljava/lang/String;)I"), 184, "", true);
}

Test(program, a_class_never_prepared_ran_nothing)
{
    /* Oval extends Base, but without a preparation record no object of it
     * exists: Base.area's targets are Circle's and Ring's (Test cha) */
    const rc_method *oval = find("Oval", "area", "()D");
    cr_assert(oval && oval->code);
    cr_expect_not(rc_method_may_have_run(prog, oval));
    cr_expect(rc_method_may_have_run(prog, find("Circle", "area", "()D")));
    cr_expect(rc_method_may_have_run(prog, rc_method_by_id(prog, 0x777)));   /* hidden */
    EXPECT_TARGETS(find("Cha", "viaBase", "(LBase;)D"), 182, "Circle.area Ring.area", true);
}

Test(program, itable_positions)
{
    const rc_method *count = find("Counting", "count", "(LCounter;)I");
    const rc_method *n0 = find("Count0", "next", "()I"), *n1 = find("Count1", "next", "()I");
    const rc_method *n2 = find("Count2", "next", "()I");
    EXPECT_TARGETS(count, 185, "Count0.next Count1.next Count2.next", true);
    const rc_cfg *g = rc_cfg_get(prog, count);
    cr_assert(g);
    uint32_t site = 0;
    while (site < g->ninsn && g->op[site] != 185)
        site++;
    cr_assert_lt(site, g->ninsn);
    /* Count0: Counter first */
    cr_expect(rc_itable_may_run(prog, count, site, 0, n0));
    cr_expect(!rc_itable_may_run(prog, count, site, 0, n1));
    cr_expect(!rc_itable_may_run(prog, count, site, 0, n2));
    /* Count1: Marker has no entry, Other comes first */
    cr_expect(rc_itable_may_run(prog, count, site, 1, n1));
    cr_expect(!rc_itable_may_run(prog, count, site, 1, n0));
    cr_expect(!rc_itable_may_run(prog, count, site, 1, n2));
    /* Count2 and Count2b: the superclass's Other and Tag (which has an entry
     * for its superinterface), then Sized's Counter, then Sized */
    cr_expect(rc_itable_may_run(prog, count, site, 2, n2));
    cr_expect(!rc_itable_may_run(prog, count, site, 2, n0));
    cr_expect(!rc_itable_may_run(prog, count, site, 2, n1));
    cr_expect(!rc_itable_may_run(prog, count, site, 3, n2));
    /* a method the analysis did not give, and a site that is no interface
     * call: nothing known */
    cr_expect(rc_itable_may_run(prog, count, site, 0, find("Count2", "size", "()I")));
    cr_expect(rc_itable_may_run(prog, find("Cha", "viaBase", "(LBase;)D"), 1, 5,
                                find("Circle", "area", "()D")));
}

/* Whether the receiver of the n-th invoke (opcode op) in m is m's this. */
static bool nth_on_this(const rc_method *m, uint8_t op, int n)
{
    const rc_cfg *g = rc_cfg_get(prog, m);
    cr_assert(g);
    for (uint32_t i = 0; i < g->ninsn; i++)
        if (g->op[i] == op && n-- == 0)
            return rc_receiver_is_this(prog, m, i);
    cr_assert_fail("no invoke %u #%d in %s", op, n, m->name);
    return false;
}

Test(program, receivers)
{
    const rc_method *ring_area = find("Ring", "area", "()D");
    const rc_method *circle_area = find("Circle", "area", "()D");
    const rc_method *square_area = find("Square", "area", "()D");
    const rc_method *ring_sum = find("Ring", "sum", "(LCircle;)D");
    /* calls on this: super.area(), a constructor's super(), area() */
    cr_expect(nth_on_this(ring_area, 183, 0));
    cr_expect(nth_on_this(find("Circle", "<init>", "(D)V"), 183, 0));
    cr_expect(nth_on_this(ring_sum, 182, 1));
    /* on another object, in a static method, on a new object (dup) */
    cr_expect(!nth_on_this(ring_sum, 182, 0));
    cr_expect(!nth_on_this(find("Cha", "viaBase", "(LBase;)D"), 182, 0));
    cr_expect(!nth_on_this(find("Cha", "make", "()LCircle;"), 183, 0));

    const rc_class *circle = rc_receiver_bound(prog, circle_area);
    const rc_class *ring = rc_receiver_bound(prog, ring_area);
    const rc_class *square = rc_receiver_bound(prog, square_area);
    cr_assert(circle && ring && square && circle != ring);
    cr_expect_null(rc_receiver_bound(prog, find("Cha", "make", "()LCircle;")));
    cr_expect_null(rc_receiver_bound(prog, find("Shape", "name", "()Ljava/lang/String;")));
    const rc_class *nb;
    /* unknown: anything, bound by the target's class */
    cr_expect(rc_receiver_may_run(prog, NULL, 182, ring_area, &nb));
    cr_expect_eq(nb, ring);
    /* a Circle may be a Ring: Ring.area narrows the bound */
    cr_expect(rc_receiver_may_run(prog, circle, 182, ring_area, &nb));
    cr_expect_eq(nb, ring);
    /* a Ring selects its own area(), never Circle's ... */
    cr_expect(!rc_receiver_may_run(prog, ring, 182, circle_area, &nb));
    cr_expect(rc_receiver_may_run(prog, ring, 182, ring_area, &nb));
    cr_expect_eq(nb, ring);
    /* ... except through super.area() (invokespecial), which keeps the bound */
    cr_expect(rc_receiver_may_run(prog, ring, 183, circle_area, &nb));
    cr_expect_eq(nb, ring);
    /* Square and Circle are unrelated, but java/lang/Object is not captured
     * here: their chains are incomplete, so nothing is ruled out */
    cr_expect(rc_receiver_may_run(prog, square, 182, circle_area, &nb));
    cr_expect_eq(nb, square);
}

Test(program, lambda)
{
    /* the implementation method of the LambdaMetafactory bootstrap */
    EXPECT_TARGETS(find("Cha", "lambda", "(I)Ljava/lang/Runnable;"), 186,
                   "Cha.lambda$lambda$0", true);
    /* String::length: java/lang/String is not in this program */
    EXPECT_TARGETS(find("Cha", "ref", "()Ljava/util/function/ToIntFunction;"), 186, "", true);
    /* not an invoke: nothing */
    const rc_method *m = find("Flow", "loop", "(I)I");
    const rc_method *const *t;
    bool open = true;
    cr_expect_eq(rc_call_targets(prog, m, 0, &t, &open), 0);
    cr_expect_not(open);
}

/* Several threads build CFGs and call targets of every method at once. */
static gpointer hammer(gpointer data)
{
    (void)data;
    size_t n = rc_program_nmethods(prog), sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        const rc_method *m = rc_method_at(prog, i);
        const rc_cfg *g = rc_cfg_get(prog, m);
        if (!g)
            continue;
        for (uint32_t k = 0; k < g->ninsn; k++) {
            const rc_method *const *t;
            bool open;
            sum += rc_call_targets(prog, m, g->bci[k], &t, &open);
        }
    }
    return GSIZE_TO_POINTER(sum);
}

Test(program, threads)
{
    GThread *th[4];
    for (int i = 0; i < 4; i++)
        th[i] = g_thread_new("hammer", hammer, NULL);
    gpointer first = g_thread_join(th[0]);
    for (int i = 1; i < 4; i++)
        cr_expect_eq(g_thread_join(th[i]), first);
    cr_expect_gt(GPOINTER_TO_SIZE(first), 10);
}

/* Damaged traces: the synthetic meta.jpt with bytes changed, cut or grown;
 * loading must not crash, and every method's CFG and call sites must work. */
Test(program, damaged_traces)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/jvm/meta.jpt", trace_dir);
    gchar *orig = NULL;
    gsize len = 0;
    cr_assert(g_file_get_contents(path, &orig, &len, NULL));
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int it = 0; it < 300; it++) {
        guint8 *b = g_memdup2(orig, len);
        gsize n = len;
        for (int e = 0; e < 1 + it % 4; e++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            size_t at = 32 + st % (len - 32);
            switch (st >> 60) {
            case 0: n = at; break;
            case 1: b[at] = 0xff; break;
            default: b[at] ^= (guint8)(1u << (st >> 56 & 7)); break;
            }
        }
        cr_assert(g_file_set_contents(path, (const gchar *)b, (gssize)n, NULL));
        g_free(b);
        char err[256];
        rc_program *p = rc_program_load(trace_dir, err, sizeof err);
        if (!p) {
            cr_expect(err[0], "load failed without a message");
            continue;
        }
        const char *const *w;
        size_t nw = rc_program_warnings(p, &w);
        for (size_t i = 0; i < nw; i++)
            cr_expect(w[i] && w[i][0]);
        for (uint32_t i = 0; i < rc_program_nmethods(p); i++) {
            const rc_method *m = rc_method_at(p, i);
            const rc_cfg *g = rc_cfg_get(p, m);
            (void)rc_line_of(m, 0);
            if (m->id)
                cr_expect_eq(rc_method_by_id(p, m->id), m);
            for (uint32_t k = 0; g && k < g->ninsn; k++) {
                const rc_method *const *t;
                bool open;
                (void)rc_call_targets(p, m, g->bci[k], &t, &open);
            }
        }
        rc_program_free(p);
    }
    cr_assert(g_file_set_contents(path, orig, (gssize)len, NULL));
    g_free(orig);
}

Test(program_load, missing_trace)
{
    char err[256] = "";
    cr_expect_null(rc_program_load("/nonexistent/trace.dir", err, sizeof err));
    cr_expect(err[0], "no message");
}

/* ---- projection: segments linked across an unresolved end --------------- */

enum {
    OP_ICONST_0 = 0x03, OP_ICONST_1 = 0x04, OP_ICONST_3 = 0x06, OP_BIPUSH = 0x10,
    OP_ILOAD_0 = 0x1a, OP_ILOAD_1 = 0x1b, OP_ILOAD_2 = 0x1c, OP_ISTORE_1 = 0x3c,
    OP_ISTORE_2 = 0x3d, OP_IADD = 0x60, OP_ISUB = 0x64, OP_IMUL = 0x68, OP_IXOR = 0x82,
    OP_IINC = 0x84, OP_IF_ICMPGE = 0xa2, OP_GOTO = 0xa7, OP_IRETURN = 0xac, OP_RETURN = 0xb1,
    OP_INVOKESTATIC = 0xb8, OP_MONITORENTER = 0xc2, OP_ICONST_M1 = 0x02, OP_IF_ICMPNE = 0xa0,
    OP_PUTSTATIC = 0xb3, OP_ICONST_2 = 0x05, OP_SIPUSH = 0x11, OP_ILOAD_3 = 0x1d,
    OP_ALOAD_0 = 0x2a, OP_ISTORE_0 = 0x3b, OP_ISTORE_3 = 0x3e, OP_INVOKEVIRTUAL = 0xb6,
    OP_INVOKESPECIAL = 0xb7, OP_INVOKEDYNAMIC = 0xba, OP_ARETURN = 0xb0,
    /* not opcodes: the interpreter's method entry and return into a caller,
     * code the model does not name (where the projector's lookahead stops) */
    EV_ENTRY = 0x1000, EV_BACK, EV_OTHER, EV_TAKEN, EV_NOT_TAKEN,
    /* compiled Link.mid: entered by a call, at its call of leaf (bci 1),
     * returned into */
    EV_MID_CALLED, EV_MID_AT_1, EV_MID_RETURNED_TO,
    /* compiled Link.other, returned into; a call from compiled code into
     * the c2i adapter */
    EV_OTHER_RETURNED_TO, EV_C2I_CALLED,
    /* gaps: the decoder could not follow code; the collector lost trace */
    EV_DECODE_GAP, EV_LOST_GAP,
};

/* Link.outer's loop head, Link.mid's call of Link.leaf, Link.leaf up to its
 * return, and what follows its return into mid and mid's into outer. */
static const int outer_head[] = { EV_ENTRY, OP_ICONST_0, OP_ISTORE_1, OP_ICONST_0, OP_ISTORE_2 };
static const int loop_again[] = { OP_ILOAD_2, OP_ILOAD_0, OP_IF_ICMPGE, EV_NOT_TAKEN };
static const int call_leaf[] = { OP_ILOAD_1, OP_ILOAD_2, OP_INVOKESTATIC, EV_ENTRY, OP_ILOAD_0,
                                 OP_INVOKESTATIC, EV_ENTRY, OP_ILOAD_0, OP_BIPUSH, OP_IXOR };
static const int back_in_outer[] = { OP_IRETURN, EV_BACK, OP_ICONST_3, OP_IMUL, OP_ICONST_1,
                                     OP_IADD, OP_IRETURN, EV_BACK, OP_IADD, OP_ISTORE_1,
                                     OP_IINC, OP_GOTO };
static const int outer_exit[] = { OP_ILOAD_2, OP_ILOAD_0, OP_IF_ICMPGE, EV_TAKEN, OP_ILOAD_1,
                                  OP_IRETURN };
/* Link.leaf returning into Link.other instead */
static const int back_in_other[] = { OP_IRETURN, EV_BACK, OP_BIPUSH, OP_ISUB, OP_IRETURN };
/* an opcode no method of the program has: the segment ends unresolved (the
 * lookahead stops before it, as at code nobody recorded, so that the
 * bytecodes before it are explained) */
static const int cut[] = { EV_OTHER, OP_MONITORENTER };

static uint64_t feed_tick;
static const char mid_code[1];  /* stands for a compiled version of Link.mid */
static const char other_code[1];  /* ... and of Link.other */

static uint64_t link_id(const char *name)
{
    const rc_method *m = rc_method_find(prog, "Link", name, "(I)I");
    cr_assert(m, "Link.%s", name);
    return m->id;
}

/* Feeds a sequence (EV_TAKEN / EV_NOT_TAKEN mark the bytecode before). */
static void feed(rp_projector *r, const int *seq, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dc_event e = { .tsc = ++feed_tick };
        if (seq[i] == EV_ENTRY) {
            e.kind = DC_METHOD_ENTRY;
            e.desc = "method entry point (kind = zerolocals)";
        } else if (seq[i] == EV_BACK) {
            e.kind = DC_INTERP_RETURN;
            e.desc = "invoke return entry points";
        } else if (seq[i] == EV_OTHER) {
            e.kind = DC_CODE_OTHER;
        } else if (seq[i] == EV_DECODE_GAP || seq[i] == EV_LOST_GAP) {
            e.kind = DC_GAP;
            e.reason = seq[i] == EV_DECODE_GAP ? DC_GAP_DECODE : DC_GAP_LOST;
        } else if (seq[i] == EV_MID_CALLED || seq[i] == EV_MID_RETURNED_TO) {
            e.kind = DC_JIT_ENTER;
            e.flags = seq[i] == EV_MID_CALLED ? DC_F_BY_CALL : DC_F_BY_RETURN;
            e.code = mid_code;
            e.method_id = link_id("mid");
            e.bci = -1;
            e.depth = 1;
        } else if (seq[i] == EV_C2I_CALLED) {
            e.kind = DC_STUB;
            e.flags = DC_F_BY_CALL;
            e.desc = "I2C/C2I adapters";
        } else if (seq[i] == EV_OTHER_RETURNED_TO) {
            e.kind = DC_JIT_ENTER;
            e.flags = DC_F_BY_RETURN | DC_F_AFTER_CALL;
            e.code = other_code;
            e.method_id = link_id("other");
            e.bci = -1;
            e.depth = 1;
        } else if (seq[i] == EV_MID_AT_1) {
            e.kind = DC_JIT;
            e.code = mid_code;
            e.method_id = link_id("mid");
            e.bci = 1;
            e.depth = 1;
        } else if (seq[i] == EV_TAKEN || seq[i] == EV_NOT_TAKEN) {
            continue;
        } else {
            e.kind = DC_BYTECODE;
            e.opcode = e.raw = seq[i];
            if (i + 1 < n && seq[i + 1] == EV_TAKEN)
                e.flags |= DC_F_TAKEN;
            if (i + 1 < n && seq[i + 1] == EV_NOT_TAKEN)
                e.flags |= DC_F_NOT_TAKEN;
        }
        cr_assert_eq(rp_event(&e, r), 0);
    }
}
#define FEED(r, seq) feed(r, seq, sizeof seq / sizeof seq[0])

static int log_flow(const fl_event *ev, void *ctx)
{
    g_array_append_val((GArray *)ctx, *ev);
    return 0;
}

/* "Link.name" of a flow event's method. */
static const char *flow_method(const fl_event *ev)
{
    const rc_method *m = rc_method_by_id(prog, ev->method_id);
    static char buf[128];
    snprintf(buf, sizeof buf, "%s.%s", m ? m->klass : "?", m ? m->name : "?");
    return buf;
}

/* The calls of segment seq, as "Link.outer*" (* marks FL_F_CONTEXT), joined. */
static char *segment_calls(GArray *flow, uint64_t seq)
{
    GString *s = g_string_new(NULL);
    bool in = false;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        if (ev->kind == FL_SEGMENT)
            in = ev->seq == seq;
        else if (in && ev->kind == FL_CALL)
            g_string_append_printf(s, "%s%s%s", s->len ? " " : "", flow_method(ev),
                                   (ev->flags & FL_F_CONTEXT) ? "*" : "");
    }
    return g_string_free(s, FALSE);
}

static GArray *project_link(void (*run)(rp_projector *), rp_stats *st)
{
    GArray *flow = g_array_new(FALSE, FALSE, sizeof(fl_event));
    rp_index *idx = rp_index_new(prog);
    rp_projector *r = rp_new(prog, NULL, idx, 1, log_flow, flow);
    run(r);
    cr_assert_eq(rp_finish(r, st), 0);
    rp_free(r);
    rp_index_free(idx);
    return flow;
}

/* outer calls a compiled mid, which calls leaf in the interpreter; after
 * the cut, a method the cut segment did not have returns into mid's code */
static const int call_leaf_from_compiled_mid[] = { OP_ILOAD_1, OP_ILOAD_2, OP_INVOKESTATIC,
                                                   EV_MID_CALLED, EV_MID_AT_1, EV_ENTRY,
                                                   OP_ILOAD_0, OP_BIPUSH, OP_IXOR };
static const int other_back_in_compiled_mid[] = { OP_BIPUSH, OP_ISUB, OP_IRETURN,
                                                  EV_MID_RETURNED_TO, EV_BACK, OP_IADD,
                                                  OP_ISTORE_1, OP_IINC, OP_GOTO };

static void cut_then_back_in_compiled_mid(rp_projector *r)
{
    FEED(r, outer_head);
    FEED(r, loop_again);
    FEED(r, call_leaf_from_compiled_mid);
    FEED(r, cut);
    FEED(r, other_back_in_compiled_mid);
    FEED(r, outer_exit);
}

/* How every run starts: outer's loop calls mid, which calls leaf. */
static void leaf_running(rp_projector *r)
{
    FEED(r, outer_head);
    FEED(r, loop_again);
    FEED(r, call_leaf);
}

static void cut_then_back_in_outer(rp_projector *r)
{
    leaf_running(r);
    FEED(r, cut);
    FEED(r, back_in_outer);
    FEED(r, loop_again);
    FEED(r, call_leaf);
    FEED(r, back_in_outer);
    FEED(r, outer_exit);
}

static void cut_then_back_in_other(rp_projector *r)
{
    leaf_running(r);
    FEED(r, cut);
    FEED(r, back_in_other);
}

/* Projects a run: `unresolved` segments must end unresolved, and segment k
 * must have the calls want[k] (NULL: not checked; segment_calls), for k
 * below n. */
static void expect_segment_calls(void (*run)(rp_projector *), size_t unresolved,
                                 const char *const *want, size_t n)
{
    rp_stats st;
    GArray *flow = project_link(run, &st);
    cr_expect_eq(st.segments_unresolved, unresolved);
    cr_expect_eq(st.segments, n);
    for (size_t k = 0; k < n; k++) {
        char *got = segment_calls(flow, k);
        if (want[k])
            cr_expect_str_eq(got, want[k], "segment %zu: %s", k, got);
        g_free(got);
    }
    g_array_free(flow, TRUE);
}

/* A run with one cut: the first segment must have the calls `first` (NULL:
 * not checked), the second `second`. */
static void expect_segments(void (*run)(rp_projector *), const char *first, const char *second)
{
    const char *want[] = { first, second };
    expect_segment_calls(run, 1, want, 2);
}

Test(program, segments_link_to_the_stack_an_unresolved_one_ended_with)
{
    /* leaf's return goes on in the mid and outer the cut segment had: they
     * are its callers, announced as frames found running */
    expect_segments(cut_then_back_in_outer, "Link.outer Link.mid Link.leaf",
                    "Link.outer* Link.mid* Link.leaf* Link.mid Link.leaf");
}

/* Skip.check, its branch (to the next instruction) taken, then not */
static void skip_both_ways(rp_projector *r)
{
    static const int taken[] = { EV_ENTRY, OP_ILOAD_0, OP_ICONST_M1, OP_IF_ICMPNE, EV_TAKEN,
                                 OP_ILOAD_0, OP_PUTSTATIC, OP_RETURN };
    static const int not_taken[] = { EV_ENTRY, OP_ILOAD_0, OP_ICONST_M1, OP_IF_ICMPNE,
                                     EV_NOT_TAKEN, OP_ILOAD_0, OP_PUTSTATIC, OP_RETURN };
    FEED(r, taken);
    FEED(r, not_taken);
}

Test(program, a_branch_to_the_next_instruction_goes_there_either_way)
{
    /* both outcomes reach bci 5: the taken one must not be dropped as the
     * same target as the fall-through edge the outcome rules out */
    rp_stats st;
    GArray *flow = project_link(skip_both_ways, &st);
    cr_expect_eq(st.segments_unresolved, 0);
    cr_expect_eq(st.segments, 1);
    cr_expect_eq(st.placed, 12);
    char *got = segment_calls(flow, 0);
    cr_expect_str_eq(got, "Skip.check Skip.check", "%s", got);
    g_free(got);
    g_array_free(flow, TRUE);
}

static void enter_main(rp_projector *r)
{
    static const int main_run[] = { EV_ENTRY, OP_ICONST_1, OP_PUTSTATIC, OP_RETURN };
    FEED(r, main_run);
}

Test(program, the_launcher_s_main_goes_first_among_methods_the_trace_cannot_tell_apart)
{
    /* Skip.early has main's bytecodes and comes first in the class; the
     * choice among them at the end keeps the first */
    rp_stats st;
    GArray *flow = project_link(enter_main, &st);
    cr_expect_eq(st.segments, 1);
    char *got = segment_calls(flow, 0);
    cr_expect_str_eq(got, "Skip.main", "%s", got);
    g_free(got);
    g_array_free(flow, TRUE);
}

typedef struct seq {
    const int *v;
    size_t n;
} seq;
#define SEQ(a) ((seq){ a, sizeof a / sizeof a[0] })

/* Feeds head, then `calls` times: call, 300 spins of a loop, back; then done. */
static void feed_spins(rp_projector *r, seq head, seq call, seq spin, seq back, seq done,
                       int calls)
{
    GArray *v = g_array_new(FALSE, FALSE, sizeof(int));
    g_array_append_vals(v, head.v, head.n);
    for (int i = 0; i < calls; i++) {
        g_array_append_vals(v, call.v, call.n);
        for (int k = 0; k < 300; k++)
            g_array_append_vals(v, spin.v, spin.n);
        g_array_append_vals(v, back.v, back.n);
    }
    g_array_append_vals(v, done.v, done.n);
    feed(r, (const int *)(const void *)v->data, v->len);
    g_array_free(v, TRUE);
}

/* Op.run (or Op.runAgain: the same bytecodes) from an unknown caller:
 * APPLY_CALLS calls of an apply (each spins 300 times: ~3,000 events) that
 * ends with apply_op (isub: Less's; imul: Twice's), then its return. */
#define APPLY_CALLS 800
static int apply_op;

static void run_apply(rp_projector *r)
{
    static const int head[] = { EV_ENTRY, OP_ICONST_0, OP_ISTORE_2, OP_ICONST_0, OP_ISTORE_3 };
    static const int call[] = { OP_ILOAD_3, OP_ILOAD_1, OP_IF_ICMPGE, EV_NOT_TAKEN, OP_ILOAD_2,
                                OP_ALOAD_0, OP_ILOAD_3, OP_INVOKEVIRTUAL, EV_ENTRY, OP_ILOAD_1,
                                OP_INVOKESTATIC, EV_ENTRY, OP_ICONST_0, OP_ISTORE_1 };
    static const int spin[] = { OP_ILOAD_1, OP_SIPUSH, OP_IF_ICMPGE, EV_NOT_TAKEN, OP_ILOAD_0,
                                OP_ILOAD_1, OP_IXOR, OP_ISTORE_0, OP_IINC, OP_GOTO };
    const int back[] = { OP_ILOAD_1, OP_SIPUSH, OP_IF_ICMPGE, EV_TAKEN, OP_ILOAD_0, OP_IRETURN,
                         EV_BACK, OP_ICONST_2, apply_op, OP_IRETURN, EV_BACK, OP_IADD,
                         OP_ISTORE_2, OP_IINC, OP_GOTO };
    static const int done[] = { OP_ILOAD_3, OP_ILOAD_1, OP_IF_ICMPGE, EV_TAKEN, OP_ILOAD_2,
                                OP_IRETURN };
    feed_spins(r, SEQ(head), SEQ(call), SEQ(spin), SEQ(back), SEQ(done), APPLY_CALLS);
}

Test(program, a_forced_choice_keeps_the_paths_that_parted_lately)
{
    /* run and runAgain stay apart for the whole run, so the paths outgrow
     * MAX_PENDING (2,000,000 events) and one is chosen inside some apply:
     * keeping only the first path there, whichever override it is in, would
     * have the other override's calls end their segment */
    static const struct { int op; const char *method; } truth[] = {
        { OP_ISUB, "Less.apply" }, { OP_IMUL, "Twice.apply" } };
    for (size_t t = 0; t < 2; t++) {
        apply_op = truth[t].op;
        rp_stats st;
        GArray *flow = project_link(run_apply, &st);
        cr_expect_eq(st.segments, 1, "%s", truth[t].method);
        cr_expect_eq(st.segments_unresolved, 0, "%s", truth[t].method);
        unsigned right = 0, wrong = 0;
        for (guint i = 0; i < flow->len; i++) {
            const fl_event *ev = &g_array_index(flow, fl_event, i);
            if (ev->kind == FL_CALL && strstr(flow_method(ev), ".apply"))
                (strcmp(flow_method(ev), truth[t].method) ? &wrong : &right)[0]++;
        }
        cr_expect_eq(right, APPLY_CALLS, "%s: %u", truth[t].method, right);
        cr_expect_eq(wrong, 0, "%s: %u others", truth[t].method, wrong);
        g_array_free(flow, TRUE);
    }
}

/* Op.total (or Op.totalLess) from an unknown caller: TOTAL_CALLS calls of
 * spin (~2,700 events each), then its last bytecodes, with total_op (iadd:
 * total's; isub: totalLess's). */
#define TOTAL_CALLS 440
static int total_op;

static void run_total(rp_projector *r)
{
    static const int head[] = { EV_ENTRY, OP_BIPUSH, OP_ISTORE_1, OP_ICONST_0, OP_ISTORE_2 };
    static const int call[] = { OP_ILOAD_2, OP_ILOAD_0, OP_IF_ICMPGE, EV_NOT_TAKEN, OP_ILOAD_1,
                                OP_ILOAD_2, OP_INVOKESTATIC, EV_ENTRY, OP_ICONST_0, OP_ISTORE_1 };
    static const int spin[] = { OP_ILOAD_1, OP_SIPUSH, OP_IF_ICMPGE, EV_NOT_TAKEN, OP_ILOAD_0,
                                OP_ILOAD_1, OP_IXOR, OP_ISTORE_0, OP_IINC, OP_GOTO };
    static const int back[] = { OP_ILOAD_1, OP_SIPUSH, OP_IF_ICMPGE, EV_TAKEN, OP_ILOAD_0,
                                OP_IRETURN, EV_BACK, OP_IXOR, OP_ISTORE_1, OP_IINC, OP_GOTO };
    const int done[] = { OP_ILOAD_2, OP_ILOAD_0, OP_IF_ICMPGE, EV_TAKEN, OP_ILOAD_1,
                         OP_ICONST_3, total_op, OP_IRETURN };
    feed_spins(r, SEQ(head), SEQ(call), SEQ(spin), SEQ(back), SEQ(done), TOTAL_CALLS);
}

Test(program, a_long_ambiguity_is_bounded_by_the_memory_its_paths_still_hold)
{
    /* about 1.2 million events for two paths: their stack frames, a fresh
     * one per bytecode, outgrow the projector's memory bound long before the
     * end, while the records the paths still hold take under half of it;
     * choosing then would keep total whatever ran */
    static const struct { int op; const char *method; } truth[] = {
        { OP_ISUB, "Op.totalLess" }, { OP_IADD, "Op.total" } };
    for (size_t t = 0; t < 2; t++) {
        total_op = truth[t].op;
        rp_stats st;
        GArray *flow = project_link(run_total, &st);
        cr_expect_eq(st.segments, 1, "%s", truth[t].method);
        cr_expect_eq(st.segments_unresolved, 0, "%s", truth[t].method);
        const char *first = NULL;
        for (guint i = 0; i < flow->len && !first; i++) {
            const fl_event *ev = &g_array_index(flow, fl_event, i);
            if (ev->kind == FL_CALL)
                first = flow_method(ev);
        }
        cr_expect(first && !strcmp(first, truth[t].method), "%s: %s", truth[t].method,
                  first ? first : "no call");
        g_array_free(flow, TRUE);
    }
}

/* The VM runs a class initializer: sipush, putstatic, return. */
static void run_initializer(rp_projector *r)
{
    static const int run[] = { EV_ENTRY, OP_SIPUSH, OP_PUTSTATIC, OP_RETURN };
    FEED(r, run);
}

Test(program, an_initialized_class_s_initializer_does_not_run_again)
{
    const rc_method *i0 = rc_method_find(prog, "Init0", "<clinit>", "()V"),
                    *i1 = rc_method_find(prog, "Init1", "<clinit>", "()V");
    cr_assert(i0 && i1);
    cr_expect_not(rc_method_may_run(prog, i0, 1));
    cr_expect(rc_method_may_run(prog, i0, 0));     /* before the record */
    cr_expect(rc_method_may_run(prog, i1, 1));
    rp_stats st;
    GArray *flow = project_link(run_initializer, &st);
    char *got = segment_calls(flow, 0);
    cr_expect_str_eq(got, "Init1.<clinit>", "%s", got);
    g_free(got);
    g_array_free(flow, TRUE);
}

Test(program, a_class_runs_no_earlier_than_its_load)
{
    /* Launch.main has Skip.main's bytecodes and comes first, but Launch was
     * loaded long after the events: the launcher's main is Skip's
     * (program/the_launcher_s_main_goes_first_...) */
    const rc_method *l = rc_method_find(prog, "Launch", "main", "([Ljava/lang/String;)V");
    cr_assert(l);
    cr_expect_not(rc_method_may_run(prog, l, 1));
    cr_expect_not(rc_method_may_run(prog, l, LAUNCH_LOADED - RC_SINCE_SLACK - 1));
    cr_expect(rc_method_may_run(prog, l, LAUNCH_LOADED - RC_SINCE_SLACK));
    cr_expect(rc_method_may_run(prog, l, LAUNCH_LOADED + 1));
    const rc_method *s = rc_method_find(prog, "Skip", "main", "([Ljava/lang/String;)V");
    cr_expect(rc_method_may_run(prog, s, 0), "a class loaded at time 1 may run from the start");
    rp_stats st;
    GArray *flow = project_link(enter_main, &st);
    char *got = segment_calls(flow, 0);
    cr_expect_str_eq(got, "Skip.main", "%s", got);
    g_free(got);
    g_array_free(flow, TRUE);
}

/* Cha.lambda(k) from an unknown caller: its invokedynamic has a ()V
 * constructor run (aload_0, invokespecial Object.<init>, return), then
 * returns the lambda. */
static void make_lambda(rp_projector *r)
{
    static const int run[] = { EV_ENTRY, OP_ILOAD_0, OP_INVOKEDYNAMIC, EV_ENTRY, OP_ALOAD_0,
                               OP_INVOKESPECIAL, EV_ENTRY, OP_RETURN, EV_BACK, OP_RETURN,
                               EV_BACK, OP_ARETURN };
    FEED(r, run);
}

Test(program, an_invokedynamic_constructs_a_lambda_proxy_of_its_own_class)
{
    /* every default constructor has those bytecodes; Cha's lambda proxy
     * comes first */
    rp_stats st;
    GArray *flow = project_link(make_lambda, &st);
    char *got = segment_calls(flow, 0);
    cr_expect(g_str_has_prefix(got, "Cha.lambda Cha$$Lambda.0x0000000800c01000.<init> "), "%s",
              got);
    g_free(got);
    g_array_free(flow, TRUE);
}

/* Pattern0.match from an unknown caller: p.score(y) on a Pattern1, whose
 * test(x) runs x * 3 */
static void match_pattern1(rp_projector *r)
{
    static const int run[] = { EV_ENTRY, OP_ILOAD_1, OP_BIPUSH, OP_IMUL, OP_ISTORE_2, OP_ALOAD_0,
                               OP_ILOAD_2, OP_INVOKEVIRTUAL, EV_ENTRY, OP_ALOAD_0, OP_ILOAD_1,
                               OP_INVOKEVIRTUAL, EV_ENTRY, OP_ILOAD_1, OP_ICONST_3, OP_IMUL,
                               OP_IRETURN, EV_BACK, OP_IRETURN, EV_BACK, OP_IRETURN };
    FEED(r, run);
}

Test(program, a_receiver_s_class_picks_the_override_that_called_on_it)
{
    /* Pattern0.score, first, has Pattern1.score's bytecodes; its call of
     * test on this may reach Pattern1.test (a subclass), but a Pattern1
     * receiver would not have run Pattern0.score */
    rp_stats st;
    GArray *flow = project_link(match_pattern1, &st);
    char *got = segment_calls(flow, 0);
    cr_expect_str_eq(got, "Pattern0.match Pattern1.score Pattern1.test", "%s", got);
    g_free(got);
    g_array_free(flow, TRUE);
}

Test(program, a_wrong_link_dies_at_its_first_return)
{
    /* linked, leaf would return into mid, which goes on with iconst_3 */
    expect_segments(cut_then_back_in_other, NULL, "Link.leaf* Link.other*");
}

Test(program, a_compiled_frame_links_by_its_code)
{
    /* returning into mid's code finds the compiled frame the cut segment had,
     * and outer below it */
    expect_segments(cut_then_back_in_compiled_mid, "Link.outer Link.mid Link.leaf",
                    "Link.other* Link.outer* Link.mid*");
}

/* outer calls a compiled mid, and leaf, entered in the interpreter, returns
 * into compiled code of other, which no frame runs, then other into mid and
 * mid into outer: other ran unseen between mid and leaf. */
static void leaf_back_in_unseen_other(rp_projector *r)
{
    static const int call[] = { OP_ILOAD_1, OP_ILOAD_2, OP_INVOKESTATIC, EV_MID_CALLED,
                                EV_MID_AT_1, EV_C2I_CALLED, EV_ENTRY, OP_ILOAD_0, OP_BIPUSH,
                                OP_IXOR };
    static const int back[] = { OP_IRETURN, EV_OTHER_RETURNED_TO, EV_MID_RETURNED_TO, EV_BACK,
                                OP_IADD, OP_ISTORE_1, OP_IINC, OP_GOTO };
    FEED(r, outer_head);
    FEED(r, loop_again);
    FEED(r, call);
    FEED(r, back);
    FEED(r, outer_exit);
}

Test(program, a_return_into_code_no_frame_runs_finds_it_called_by_the_frame_waiting_below)
{
    /* other's frame goes between mid and leaf as an inferred call, so that
     * outer and mid stay on the stack: one segment, every frame returned */
    rp_stats st;
    GArray *flow = project_link(leaf_back_in_unseen_other, &st);
    cr_expect_eq(st.segments, 1);
    cr_expect_eq(st.segments_unresolved, 0);
    char *got = segment_calls(flow, 0);
    cr_expect_str_eq(got, "Link.outer Link.mid Link.leaf Link.other", "%s", got);
    g_free(got);
    int depth = 0;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        if (ev->kind == FL_CALL && !strcmp(flow_method(ev), "Link.other"))
            cr_expect(ev->flags & FL_F_INFERRED, "other's call is inferred");
        depth += ev->kind == FL_CALL ? 1 : ev->kind == FL_RETURN ? -1 : 0;
        cr_expect_geq(depth, 0, "a return past the frames the flow called, at %u", i);
    }
    cr_expect_eq(depth, 0, "outer returned last");
    g_array_free(flow, TRUE);
}

/* After the cut leaf returns into the mid the cut segment had, and mid
 * returns into compiled code of mid that no frame of either segment runs:
 * the linked frames returned, and the compiled frame was running before. */
static void cut_then_mid_back_in_compiled_code(rp_projector *r)
{
    static const int mid_returns[] = { OP_IRETURN, EV_BACK, OP_ICONST_3, OP_IMUL, OP_ICONST_1,
                                       OP_IADD, OP_IRETURN, EV_MID_RETURNED_TO };
    leaf_running(r);
    FEED(r, cut);
    FEED(r, mid_returns);
}

Test(program, frames_that_returned_into_code_found_running_leave_the_flow)
{
    /* the second segment: outer* mid* leaf* found running, leaf and mid
     * return, then outer's frame goes too (its return is in the flow: a
     * profile would otherwise keep it on its stack), and mid's compiled
     * frame is found running */
    rp_stats st;
    GArray *flow = project_link(cut_then_mid_back_in_compiled_code, &st);
    int depth = 0;
    bool in = false;
    const fl_event *last = NULL;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        if (ev->kind == FL_SEGMENT)
            in = ev->seq == 1;
        else if (in && (ev->kind == FL_CALL || ev->kind == FL_RETURN)) {
            depth += ev->kind == FL_CALL ? 1 : -1;
            last = ev;
        }
    }
    cr_assert_not_null(last);
    cr_expect(last->kind == FL_CALL && (last->flags & FL_F_CONTEXT) &&
              !strcmp(flow_method(last), "Link.mid"), "%s", flow_method(last));
    cr_expect_eq(depth, 1, "the flow's stack is the projector's: mid's compiled frame only");
    g_array_free(flow, TRUE);
}

/* A gap (EV_DECODE_GAP or EV_LOST_GAP) where leaf runs, then its return. */
static void gap_then_back_in_outer(rp_projector *r, int gap)
{
    leaf_running(r);
    feed(r, &gap, 1);
    FEED(r, back_in_outer);
    FEED(r, outer_exit);
}

static void decode_gap_then_back_in_outer(rp_projector *r)
{
    gap_then_back_in_outer(r, EV_DECODE_GAP);
}

static void lost_trace_then_back_in_outer(rp_projector *r)
{
    gap_then_back_in_outer(r, EV_LOST_GAP);
}

Test(program, segments_link_across_a_gap_in_decoding)
{
    /* the decoder resumed a few instructions later: the frames the segment
     * before ended with are still running */
    const char *want[] = { "Link.outer Link.mid Link.leaf",
                           "Link.outer* Link.mid* Link.leaf*" };
    expect_segment_calls(decode_gap_then_back_in_outer, 0, want, 2);
}

Test(program, lost_trace_forgets_the_stack)
{
    /* after a loss anything may have run: the frames are found again by
     * their returns only */
    const char *want[] = { "Link.outer Link.mid Link.leaf", "Link.leaf* Link.mid* Link.outer*" };
    expect_segment_calls(lost_trace_then_back_in_outer, 0, want, 2);
}

/* Two gaps in a row where leaf runs: the trace lost 700 bytes at stream
 * offset 1000 (counted when `counted`), then the decoder skipped to 1300. */
static bool gaps_counted;

static void two_gaps_then_back_in_outer(rp_projector *r)
{
    leaf_running(r);
    dc_event lost = { .kind = DC_GAP, .tsc = ++feed_tick, .reason = DC_GAP_LOST,
                      .offset = 1000, .end_offset = 1000, .lost_bytes = gaps_counted ? 700 : 0 };
    dc_event skip = { .kind = DC_GAP, .tsc = ++feed_tick, .reason = DC_GAP_DECODE,
                      .offset = 1100, .end_offset = 1300 };
    cr_assert_eq(rp_event(&lost, r), 0);
    cr_assert_eq(rp_event(&skip, r), 0);
    FEED(r, back_in_outer);
}

Test(program, a_segment_after_gaps_says_where_they_were_and_what_they_lost)
{
    for (int counted = 0; counted < 2; counted++) {
        gaps_counted = counted;
        rp_stats st;
        GArray *flow = project_link(two_gaps_then_back_in_outer, &st);
        guint segs = 0;
        for (guint i = 0; i < flow->len; i++) {
            const fl_event *e = &g_array_index(flow, fl_event, i);
            if (e->kind != FL_SEGMENT)
                continue;
            if (segs++ == 0) {
                cr_expect_eq(e->flags & (FL_F_AFTER_GAP | FL_F_LOST_COUNTED), 0);
                continue;
            }
            cr_expect(e->flags & FL_F_AFTER_GAP);
            cr_expect_eq(e->gap_offset, 1000);
            cr_expect_eq(e->resume_offset, 1300);
            /* a TRUNCATED record without a size (hardware) leaves it unknown */
            cr_expect_eq(!!(e->flags & FL_F_LOST_COUNTED), counted);
            cr_expect_eq(e->lost_bytes, counted ? 700 : 0);
        }
        cr_expect_eq(segs, 2);
        g_array_free(flow, TRUE);
    }
}

/* A trace that starts with a return: in an unknown context it fits every
 * method with a return (Returns has 72 that only return), and returns in a
 * row would multiply the hypotheses by them. Past RETURN_FANOUT candidates
 * the returning frame stays unidentified: its bytecode has no method. */
static void two_returns(rp_projector *r)
{
    static const int returns[] = { OP_RETURN, EV_BACK, OP_RETURN, EV_BACK };
    FEED(r, returns);
}

Test(program, returns_in_an_unknown_context_stay_unidentified_past_a_bound)
{
    rp_stats st = { 0 };
    GArray *flow = project_link(two_returns, &st);
    size_t unidentified = 0, returns = 0;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        if (ev->kind == FL_BYTECODE && ev->opcode == OP_RETURN) {
            returns++;
            unidentified += ev->method_id == 0;
        }
    }
    cr_expect_eq(returns, 2);
    /* the first fits 72 methods and more; the second one, after a call, the
     * few constructors that only call their superclass's */
    cr_expect_eq(unidentified, 1);
    cr_expect_lt(st.max_hypotheses, 64, "at most %llu hypotheses at once",
                 (unsigned long long)st.max_hypotheses);
    g_array_free(flow, TRUE);
}

/* Cut in leaf; the next segment runs other (not in the kept stack) and is
 * cut too; the last one returns from leaf into other and from other. */
static void unlinked_segment_then_back_in_other(rp_projector *r)
{
    static const int into_other[] = { OP_IRETURN, EV_BACK, OP_BIPUSH, OP_ISUB };
    leaf_running(r);
    FEED(r, cut);
    FEED(r, into_other);
    FEED(r, cut);
    FEED(r, back_in_other);
}

Test(program, an_unlinked_segment_keeps_the_frames_below_it)
{
    /* The middle segment found no kept frame (other is none of them): its
     * frames are kept on top of the kept ones, none of which calls other.
     * The last segment starts in a leaf it cannot link (the kept leaf's
     * caller, mid, would go on with iconst_3), and once leaf returns into
     * other, other links, with outer and mid still below it. The leaf that returned where nothing linked
     * stays in between. */
    const char *want[] = { "Link.outer Link.mid Link.leaf", "Link.leaf* Link.other*",
                           "Link.leaf* Link.outer* Link.mid* Link.leaf* Link.other*" };
    expect_segment_calls(unlinked_segment_then_back_in_other, 2, want, 3);
}

/* Link.leaf entered from an unknown caller, up to its return */
static const int leaf_entered[] = { EV_ENTRY, OP_ILOAD_0, OP_BIPUSH, OP_IXOR };

/* Cut in leaf; the next segment enters leaf from an unknown caller and is
 * cut too; the last one returns from leaf into mid and from mid. */
static void entered_leaf_then_back_in_outer(rp_projector *r)
{
    leaf_running(r);
    FEED(r, cut);
    FEED(r, leaf_entered);
    FEED(r, cut);
    FEED(r, back_in_outer);
    FEED(r, outer_exit);
}

Test(program, an_unlinked_segment_goes_on_a_kept_frame_that_may_call_it)
{
    /* The middle segment's leaf goes on mid, the innermost kept frame with
     * a call of leaf: the kept leaf above returned unseen. The last segment
     * links to it, with mid, which goes on with iconst_3, as its caller. On
     * top of the kept leaf instead, the link would die (leaf calls nothing)
     * and mid would be found only by leaf's return. */
    const char *want[] = { "Link.outer Link.mid Link.leaf", "Link.leaf",
                           "Link.outer* Link.mid* Link.leaf*" };
    expect_segment_calls(entered_leaf_then_back_in_outer, 2, want, 3);
}

/* Cut in leaf; the next segment returns out of every kept frame (outer
 * too), enters leaf from an unknown caller and is cut; the last one returns
 * from leaf into mid and from mid. */
static void out_of_all_then_back_in_outer(rp_projector *r)
{
    leaf_running(r);
    FEED(r, cut);
    FEED(r, back_in_outer);
    FEED(r, outer_exit);
    FEED(r, leaf_entered);
    FEED(r, cut);
    FEED(r, back_in_outer);
    FEED(r, outer_exit);
}

Test(program, a_segment_that_left_every_kept_frame_did_not_link)
{
    /* The middle segment linked, then returned out of outer: no kept frame
     * is left under its leaf, which goes on mid as an unlinked one
     * would. Kept as a link instead, the stack would be leaf alone, and the
     * last segment would find mid and outer only by their returns. */
    const char *want[] = { "Link.outer Link.mid Link.leaf", NULL,
                           "Link.outer* Link.mid* Link.leaf*" };
    expect_segment_calls(out_of_all_then_back_in_outer, 2, want, 3);
}

/* ---- compiled code at the bytecode level (reconstruct/compiled.h) ------- */

/* A compiled version of one method at CV_AT, with PC records given as
 * "pc method@bci<method@bci..." (innermost first; methods of Link, or
 * "Cls.name(sig)"), and code bytes that are nops but for a call instruction
 * ending at each pc listed in calls. */
#define CV_AT 0x10000ull
#define CV_SIZE 0x1000ull

typedef struct cversion {
    dm_model m;
    dm_code code;
    GArray *pcs, *frames;
    char *dir;
} cversion;

static uint64_t method_named(const char *s, size_t n)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s", (int)n, s);
    const char *dot = strchr(buf, '.');
    if (!dot)
        return link_id(buf);
    char *paren = strchr(buf, '(');
    cr_assert(paren, "%s", buf);
    char klass[64], name[64];
    snprintf(klass, sizeof klass, "%.*s", (int)(dot - buf), buf);
    snprintf(name, sizeof name, "%.*s", (int)(paren - dot - 1), dot + 1);
    return find(klass, name, paren)->id;
}

static void cversion_init(cversion *v, const char *method, const char *const *recs, size_t n,
                          const uint64_t *calls, size_t ncalls)
{
    memset(v, 0, sizeof *v);
    v->pcs = g_array_new(FALSE, FALSE, sizeof(dm_pcrec));
    v->frames = g_array_new(FALSE, FALSE, sizeof(dm_frame));
    for (size_t i = 0; i < n; i++) {
        char *end;
        dm_pcrec r = { .pc = CV_AT + strtoull(recs[i], &end, 16), .first = v->frames->len };
        for (const char *p = end + 1; *p;) {
            const char *at = strchr(p, '@');
            cr_assert(at, "%s", recs[i]);
            dm_frame fr = { .method_id = method_named(p, (size_t)(at - p)),
                            .bci = (int32_t)strtol(at + 1, &end, 10) };
            g_array_append_val(v->frames, fr);
            r.depth++;
            p = *end == '<' ? end + 1 : end;
        }
        g_array_append_val(v->pcs, r);
    }
    v->dir = g_dir_make_tmp("jpt-cv-XXXXXX", NULL);
    cr_assert(v->dir);
    uint8_t *code = g_malloc(CV_SIZE);
    memset(code, 0x90, CV_SIZE);
    for (size_t i = 0; i < ncalls; i++)
        code[calls[i] - 5] = 0xe8;
    char *path = g_build_filename(v->dir, "code.bin", NULL);
    cr_assert(g_file_set_contents(path, (const char *)code, CV_SIZE, NULL));
    g_free(code);
    v->m.code_path = path;
    v->m.code_size = CV_SIZE;
    v->m.pcs = (dm_pcrec *)(void *)v->pcs->data;
    v->m.npcs = v->pcs->len;
    v->m.frames = (dm_frame *)(void *)v->frames->data;
    v->m.nframes = v->frames->len;
    v->code = (dm_code){ .kind = DM_CODE_NMETHOD, .vaddr = CV_AT, .size = CV_SIZE,
                         .method_id = method_named(method, strlen(method)), .level = 4,
                         .npcs = v->pcs->len };
    v->m.codes = &v->code;
    v->m.ncodes = 1;
}

static void cversion_free(cversion *v)
{
    remove(v->m.code_path);
    rmdir(v->dir);
    g_free(v->dir);
    g_free(v->m.code_path);
    g_array_free(v->pcs, TRUE);
    g_array_free(v->frames, TRUE);
}

/* An event of the version at offset off. */
static void cv_event(rp_projector *r, cversion *v, dc_kind kind, uint32_t flags, uint64_t off)
{
    dc_event e = { .tsc = ++feed_tick, .kind = kind, .flags = flags, .code = &v->code,
                   .ip = CV_AT + off, .method_id = v->code.method_id, .bci = -1, .depth = 1,
                   .opcode = -1, .raw = -1, .call_bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
}

static void cv_interp_return(rp_projector *r)
{
    dc_event e = { .tsc = ++feed_tick, .kind = DC_INTERP_RETURN, .flags = DC_F_BY_RETURN,
                   .desc = "invoke return entry points", .opcode = -1, .raw = -1, .bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
}

/* The projected flow of events fed by run into a projector that has the
 * version's model: its calls and returns (calls_and_returns), and bytecode
 * counts per method in *bytecodes ("Link.leaf=4 ..."). */
static char *calls_and_returns(GArray *flow);

static GArray *project_version(cversion *v, void (*run)(rp_projector *, cversion *),
                               rp_stats *st)
{
    GArray *flow = g_array_new(FALSE, FALSE, sizeof(fl_event));
    rp_index *idx = rp_index_new(prog);
    rp_projector *r = rp_new(prog, &v->m, idx, 1, log_flow, flow);
    run(r, v);
    cr_assert_eq(rp_finish(r, st), 0);
    rp_free(r);
    rp_index_free(idx);
    return flow;
}

static uint64_t compiled_bytecodes_of(GArray *flow, uint64_t id)
{
    uint64_t n = 0;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        n += ev->kind == FL_BYTECODE && (ev->flags & FL_F_COMPILED) && ev->method_id == id;
    }
    return n;
}

static uint64_t compiled_bytecodes(GArray *flow, const char *method)
{
    return compiled_bytecodes_of(flow, link_id(method));
}

/* Link.outer compiled with mid inlined at its bci 11 and leaf at mid's bci
 * 1, as C1 records it: outer's loop test and increment have records, the
 * inlined frames only one each, in a slow path that never runs. */
static const char *const outer_records[] = {
    "10 outer@6", "20 outer@16", "30 mid@-1<outer@11", "40 leaf@-1<mid@1<outer@11",
    "50 outer@14",
};

/* outer called, two iterations of its loop (a jump back before each loop
 * test after the first), then its return */
static void outer_two_iterations(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);
    cv_event(r, v, DC_JIT, 0, 0x10);
    cv_event(r, v, DC_JIT, DC_F_BACKWARD, 0);
    cv_event(r, v, DC_JIT, 0, 0x10);
    cv_event(r, v, DC_JIT, DC_F_BACKWARD, 0);
    cv_interp_return(r);
}

Test(program, compiled_code_calls_the_inlined_callees_its_bytecode_path_crosses)
{
    cversion v;
    cversion_init(&v, "outer", outer_records, 5, NULL, 0);
    rp_stats st;
    GArray *flow = project_version(&v, outer_two_iterations, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, "Link Link Link)) Link Link)))");
    /* outer: 0..6, then twice 9..16 and 19, 4..6; then 22, 23 */
    cr_expect_eq(compiled_bytecodes(flow, "outer"), 7 + 2 * (6 + 4) + 2);
    cr_expect_eq(compiled_bytecodes(flow, "mid"), 2 * 7);
    cr_expect_eq(compiled_bytecodes(flow, "leaf"), 2 * 4);
    cr_expect_eq(st.jit.inlined_calls, 4);
    cr_expect_eq(st.jit.pins_skipped, 0);
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* Machine code bytes at offset off of the version (nops elsewhere). */
static void cv_code(cversion *v, uint64_t off, const uint8_t *bytes, size_t n)
{
    gchar *code;
    gsize len;
    cr_assert(g_file_get_contents(v->m.code_path, &code, &len, NULL));
    cr_assert(off + n <= len);
    memcpy(code + off, bytes, n);
    cr_assert(g_file_set_contents(v->m.code_path, code, (gssize)len, NULL));
    g_free(code);
}

/* outer's loop unrolled four times (C2's main loop): each pass shows the
 * records of its first copy only (the iadd at 0x40, the iinc at 0x10) and
 * jumps back to 0x40, where the machine code adds 4 to the counter its jump
 * back compares; the third pass falls out of the loop. */
static void outer_unrolled(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);
    for (int pass = 0; pass < 3; pass++) {
        cv_event(r, v, DC_JIT, pass ? DC_F_BACKWARD : 0, 0x40);
        cv_event(r, v, DC_JIT, 0, 0x10);
    }
    cv_interp_return(r);
}

Test(program, a_pass_of_an_unrolled_loop_runs_the_iterations_its_step_says)
{
    /* +0x40: add r11d,4; nops; +0x48: cmp r11d,ebx; jl +0x40 */
    static const uint8_t add4[] = { 0x41, 0x83, 0xc3, 0x04 };
    static const uint8_t back[] = { 0x41, 0x39, 0xdb, 0x7c, 0xf3 };
    for (int stepped = 0; stepped < 2; stepped++) {
        cversion v;
        cversion_init(&v, "outer", outer_records, 5, NULL, 0);
        if (stepped)
            cv_code(&v, 0x40, add4, sizeof add4);
        cv_code(&v, 0x48, back, sizeof back);
        rp_stats st;
        GArray *flow = project_version(&v, outer_unrolled, &st);
        /* mid's call on the way in, then four iterations a pass (each calls
         * mid), where the pins show one */
        uint64_t mid = compiled_bytecodes(flow, "mid");
        cr_expect_eq(mid, (stepped ? 1 + 3 * 4 : 1 + 2) * 7, "stepped %d: %lu", stepped,
                     (unsigned long)mid / 7);
        cr_expect_eq(st.jit.unrolled_iterations, stepped ? 3 + 3 + 4 : 0);
        cr_expect_eq(st.jit.unrolled_passes, stepped ? 3 : 0);
        g_array_free(flow, TRUE);
        cversion_free(&v);
    }
}

/* The increment's record, then the call's result's (bci 14, before it in
 * the loop) with no jump back between: not a second iteration (an
 * instruction scheduled out of bytecode order), so the walk does not go
 * round the loop. */
static void outer_test_again(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);
    cv_event(r, v, DC_JIT, 0, 0x10);
    cv_event(r, v, DC_JIT, 0, 0x40);
    cv_interp_return(r);
}

Test(program, a_loop_in_compiled_code_needs_a_jump_back)
{
    cversion v;
    cversion_init(&v, "outer", outer_records, 5, NULL, 0);
    rp_stats st;
    GArray *flow = project_version(&v, outer_test_again, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, "Link Link Link)))");
    cr_expect_eq(st.jit.pins_skipped, 1);
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* Link.both compiled with leaf inlined at bci 1 and other's call at bci 5
 * a real call (its record at 0x30 follows a call instruction); a record of
 * leaf's scheduled after that call, in bytecode order before it, cannot be
 * reached without making the call. */
static const char *const both_records[] = {
    "10 leaf@3<both@1", "20 both@4", "30 both@5", "40 both@8",
};
static const uint64_t both_calls[] = { 0x30 };

static void both_called(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0x10);      /* both@4 */
    cv_event(r, v, DC_JIT, 0, 0);         /* leaf@3 again: out of order */
    cv_event(r, v, DC_JIT, 0, 0x20);      /* the call of other: its static stub */
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL | DC_F_NO_SCOPE, 0x80);
    dc_event e = { .tsc = ++feed_tick, .kind = DC_STUB, .flags = DC_F_BY_JUMP,
                   .desc = "I2C/C2I adapters", .opcode = -1, .raw = -1, .bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
    e.kind = DC_METHOD_ENTRY;
    e.desc = "method entry point (kind = zerolocals)";
    cr_assert_eq(rp_event(&e, r), 0);
    static const int other_body[] = { OP_ILOAD_0, OP_INVOKESTATIC, EV_ENTRY, OP_ILOAD_0,
                                      OP_BIPUSH, OP_IXOR, OP_IRETURN, EV_BACK, OP_BIPUSH,
                                      OP_ISUB, OP_IRETURN };
    FEED(r, other_body);
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_RETURN | DC_F_AFTER_CALL, 0x30);
    cv_event(r, v, DC_JIT, 0, 0x30);
    cv_interp_return(r);
}

Test(program, compiled_code_crosses_a_call_it_makes_for_real_only_by_that_call)
{
    cversion v;
    /* leaf is not inlined at both's bci 1 here: its only record is out of
     * order, so the walk enters it once (other's record is its call) */
    cversion_init(&v, "both", both_records, 4, both_calls, 1);
    rp_stats st;
    GArray *flow = project_version(&v, both_called, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, "Link Link) Link Link)))");
    cr_expect_eq(compiled_bytecodes(flow, "both"), 6);
    cr_expect_eq(compiled_bytecodes(flow, "leaf"), 4);
    cr_expect_eq(st.jit.pins_skipped, 1);
    cr_expect_eq(st.jit.resyncs, 0);
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* Link.leaf compiled with no records at all, called and returning: its
 * path from its first bytecode to its return. */
static void leaf_called(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_interp_return(r);
}

/* Link.mid compiled with no record of leaf: the invoke at bci 1 calls it
 * (FL_F_INFERRED). */
static const char *const mid_records[] = { "10 mid@4" };

static void mid_called(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);
    cv_interp_return(r);
}

Test(program, an_invoke_crossed_whose_callee_left_no_scope_is_its_call)
{
    cversion v;
    rp_stats st;
    cversion_init(&v, "leaf", NULL, 0, NULL, 0);
    GArray *flow = project_version(&v, leaf_called, &st);
    cr_expect_eq(compiled_bytecodes(flow, "leaf"), 4);
    g_array_free(flow, TRUE);
    cversion_free(&v);

    cversion_init(&v, "mid", mid_records, 1, NULL, 0);
    flow = project_version(&v, mid_called, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, "Link Link~))");
    cr_expect_eq(st.jit.calls_inferred, 1);
    cr_expect_eq(compiled_bytecodes(flow, "mid"), 7);
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* A compiled Link.leaf calls itself (its record at 0x10 is a call): the
 * return goes back into the caller's frame, which returns too. */
static const char *const leaf_records[] = { "10 leaf@1" };
static const uint64_t leaf_calls[] = { 0x10 };

static void leaf_recursive(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);             /* at the call */
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0x20);          /* no scope: on to its return */
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_RETURN | DC_F_AFTER_CALL, 0x10);
    cv_event(r, v, DC_JIT, 0, 0x10);
    cv_interp_return(r);
}

Test(program, a_compiled_recursive_call_returns_into_its_callers_frame)
{
    cversion v;
    cversion_init(&v, "leaf", leaf_records, 1, leaf_calls, 1);
    rp_stats st;
    GArray *flow = project_version(&v, leaf_recursive, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, "Link Link))");
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* Flow.guarded compiled: its call of parseInt at bci 1 (a real call, its
 * record ends at 0x10) throws, and the exception comes back by a jump past
 * the version's entries, to its handler: the path goes on from the call
 * through the handler at bci 15, not past the call. */
static const char *const guarded_records[] = {
    "10 Flow.guarded(Ljava/lang/String;)I@1", "20 Flow.guarded(Ljava/lang/String;)I@23",
};
static const uint64_t guarded_calls[] = { 0x10 };

static void guarded_throws(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);            /* at the call */
    dc_event e = { .tsc = ++feed_tick, .kind = DC_STUB, .flags = DC_F_BY_CALL,
                   .desc = "resolve_static_call", .opcode = -1, .raw = -1, .bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
    e.flags = DC_F_BY_JUMP;
    e.desc = "unwind_exception Runtime1 stub";
    cr_assert_eq(rp_event(&e, r), 0);
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_JUMP, 0x80);   /* its handler */
    cv_event(r, v, DC_JIT, 0, 0x10);          /* bci 23, in the handler's block */
    cv_interp_return(r);
}

/* A call into mid's compiled code whose inline-cache check fails at once:
 * the miss handler sends it on to leaf in the interpreter. */
static void ic_miss_then_leaf(rp_projector *r, cversion *v)
{
    static const dm_code miss = { .kind = DM_CODE_STUB, .name = "ic_miss_stub", .ic_miss = true };
    static const int leaf[] = { EV_ENTRY, OP_ILOAD_0, OP_BIPUSH, OP_IXOR, OP_IRETURN };
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);
    dc_event e = { .tsc = ++feed_tick, .kind = DC_STUB, .flags = DC_F_BY_JUMP, .code = &miss,
                   .desc = miss.name, .opcode = -1, .raw = -1, .bci = -1, .call_bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
    FEED(r, leaf);
}

/* pick compiled with one record, at its branch's operand (bci 4), then its
 * return: the walk goes on by the shorter arm (bci 11-13) where the other
 * (16-21) reaches the return too, and only the arm's bytecodes are
 * estimated. */
static const char *const pick_records[] = { "10 pick@4" };

static void pick_once(rp_projector *r, cversion *v)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);
    cv_event(r, v, DC_JIT, 0, 0x10);
    cv_interp_return(r);
}

Test(program, a_path_the_trace_does_not_settle_is_estimated_where_paths_part)
{
    cversion v;
    cversion_init(&v, "pick", pick_records, 1, NULL, 0);
    rp_stats st;
    GArray *flow = project_version(&v, pick_once, &st);
    uint64_t id = link_id("pick");
    GString *est = g_string_new(NULL);
    uint64_t n = 0;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        if (ev->kind != FL_BYTECODE || ev->method_id != id || !(ev->flags & FL_F_COMPILED))
            continue;
        n++;
        if (ev->flags & FL_F_ESTIMATED)
            g_string_append_printf(est, "%d ", ev->bci);
    }
    /* 0-4 to the pin, 5-8 and 22-23 on both paths, 11-13 on the shorter */
    cr_expect_eq(n, 13);
    cr_expect_str_eq(est->str, "11 12 13 ");
    cr_expect_eq(st.jit.estimated_bytecodes, 3);
    g_string_free(est, TRUE);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* choose compiled with one record, at bipush 20 (bci 18), reached by the
 * if at bci 10 when the flag is 1: iconst_1 (bci 5) ran, not iconst_0
 * (bci 9) on the shorter way, and the path is settled. */
static const char *const choose_records[] = { "10 choose@18" };

Test(program, a_constant_an_arm_pushes_decides_the_if_that_tests_it)
{
    cversion v;
    cversion_init(&v, "choose", choose_records, 1, NULL, 0);
    rp_stats st;
    GArray *flow = project_version(&v, pick_once, &st);
    uint64_t id = link_id("choose");
    GString *bcis = g_string_new(NULL);
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        if (ev->kind == FL_BYTECODE && ev->method_id == id && (ev->flags & FL_F_COMPILED))
            g_string_append_printf(bcis, "%d%s ", ev->bci,
                                   ev->flags & FL_F_ESTIMATED ? "?" : "");
    }
    cr_expect_str_eq(bcis->str, "0 1 2 5 6 10 18 20 ");
    cr_expect_eq(st.jit.estimated_bytecodes, 0);
    g_string_free(bcis, TRUE);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

Test(program, a_version_whose_inline_cache_check_fails_never_ran)
{
    static const char *const recs[] = { "10 mid@1" };
    cversion v;
    cversion_init(&v, "mid", recs, 1, NULL, 0);
    rp_stats st;
    GArray *flow = project_version(&v, ic_miss_then_leaf, &st);
    uint64_t mid = link_id("mid"), calls = 0;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        cr_expect(ev->method_id != mid, "mid's code never ran: event %u", i);
        calls += ev->kind == FL_CALL;
    }
    cr_expect_eq(calls, 1, "leaf's call only");
    cr_expect_eq(st.jit.ic_misses, 1);
    cr_expect_eq(st.jit.activations, 0);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

Test(program, an_exception_in_compiled_code_goes_on_at_the_handler)
{
    cversion v;
    cversion_init(&v, "Flow.guarded(Ljava/lang/String;)I", guarded_records, 2, guarded_calls,
                  1);
    rp_stats st;
    GArray *flow = project_version(&v, guarded_throws, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, "Flow)");
    /* 0, 1, then the handler: 15 16 17 18 21 23, and 26 27 */
    cr_expect_eq(compiled_bytecodes_of(flow, v.code.method_id), 10);
    cr_expect_eq(st.jit.exceptions, 1);
    cr_expect_eq(st.jit.resyncs, 0);
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* Flow.rethrow compiled, recursing once: the inner activation throws at bci
 * 16, where no handler covers it, and the exception comes back by a jump past
 * the version's entries to the handler at bci 12 of the outer one, which was
 * at its call at bci 8: the inner activation is unwound. */
#define RETHROW "Flow.rethrow(ILjava/lang/RuntimeException;)I"
static const char *const rethrow_records[] = {
    "10 " RETHROW "@8", "30 " RETHROW "@16", "50 " RETHROW "@13",
};
static const uint64_t rethrow_calls[] = { 0x10 };

/* C1's stub that takes an exception out of a compiled frame with no handler */
static dm_code unwind_stub = { .kind = DM_CODE_STUB, .name = "unwind_exception Runtime1 stub",
                               .dispatches_exceptions = true };


static void rethrow_once_and_return(rp_projector *r, cversion *v, bool pin_in_handler)
{
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0);             /* at the call */
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_CALL, 0);
    cv_event(r, v, DC_JIT, 0, 0x20);          /* at the athrow */
    dc_event e = { .tsc = ++feed_tick, .kind = DC_STUB, .flags = DC_F_BY_JUMP,
                   .desc = unwind_stub.name, .code = &unwind_stub, .opcode = -1, .raw = -1,
                   .bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_JUMP, 0x80);   /* the handler */
    if (pin_in_handler)
        cv_event(r, v, DC_JIT, 0, 0x40);      /* bci 13 */
    cv_interp_return(r);
}

static void rethrow_once(rp_projector *r, cversion *v) { rethrow_once_and_return(r, v, true); }

/* The same where the handler returns with no scope recorded on its way (C1
 * records none at a return): the way out of the outer activation still goes
 * through the handler. */
static void rethrow_once_unpinned(rp_projector *r, cversion *v)
{
    rethrow_once_and_return(r, v, false);
}

static void check_rethrow_once(void (*events)(rp_projector *, cversion *))
{
    cversion v;
    cversion_init(&v, RETHROW, rethrow_records, 3, rethrow_calls, 1);
    rp_stats st;
    GArray *flow = project_version(&v, events, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, "Flow Flow))");
    /* outer 0 1 4 5 6 7 8, inner 0 1 15 16, outer's handler 12 13 14 */
    cr_expect_eq(compiled_bytecodes_of(flow, v.code.method_id), 14);
    cr_expect_eq(st.jit.unwound, 1);
    cr_expect_eq(st.jit.exceptions, 1);
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

Test(program, an_exception_unwinds_the_recursive_activations_no_handler_covers)
{
    check_rethrow_once(rethrow_once);
}

Test(program, a_handler_that_returns_with_no_scope_on_its_way_is_still_walked)
{
    check_rethrow_once(rethrow_once_unpinned);
}

/* The interpreter runs outer's loop and jumps into an on-stack-replacement
 * version at its test: the interpreted frame goes on compiled, no call. */
static void outer_osr(rp_projector *r, cversion *v)
{
    FEED(r, outer_head);
    static const int jump[] = { OP_GOTO };
    FEED(r, jump);
    cv_event(r, v, DC_JIT_ENTER, DC_F_BY_JUMP, 0x8);
    cv_event(r, v, DC_JIT, 0, 0);
    cv_event(r, v, DC_JIT, 0, 0x10);
    cv_event(r, v, DC_JIT, DC_F_BACKWARD, 0);
    cv_interp_return(r);
}

Test(program, an_on_stack_replacement_continues_the_interpreted_frame)
{
    cversion v;
    cversion_init(&v, "outer", outer_records, 5, NULL, 0);
    rp_stats st;
    GArray *flow = project_version(&v, outer_osr, &st);
    char *got = calls_and_returns(flow);
    /* the entry names the interpreted frame's method: outer, not another
     * method that starts with the same bytecodes */
    cr_expect_str_eq(got, "Link Link Link)))");
    cr_expect_eq(st.jit.osr_entries, 1);
    size_t outer_calls = 0;
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        outer_calls += ev->kind == FL_CALL && ev->method_id == link_id("outer") &&
                       !(ev->flags & FL_F_CONTEXT);
    }
    cr_expect_leq(outer_calls, 1, "the OSR entry is no call of outer: %s", got);
    g_free(got);
    g_array_free(flow, TRUE);
    cversion_free(&v);
}

/* ---- constructors: the call each makes on its own object ---------------- */

Test(program, this_calls)
{
    uint32_t insn = 0;
    const rc_method *circle = find("Circle", "<init>", "(D)V");
    /* Ring(double r) { super(r); }: aload_0 dload_1 invokespecial at bci 2 */
    const rc_method *t = rc_this_call(prog, find("Ring", "<init>", "(D)V"), &insn);
    cr_expect_eq(t, circle);
    cr_expect_eq(rc_cfg_get(prog, find("Ring", "<init>", "(D)V"))->bci[insn], 2);
    /* the superclass's, not the constructor of the object the body makes */
    cr_expect_eq(rc_this_call(prog, find("Made", "<init>", "(LCircle;)V"), NULL), circle);
    /* this(new Circle(1)): the receiver count gives up at the dup of the
     * new object, so the call on this is not certain: none */
    cr_expect_null(rc_this_call(prog, find("Made", "<init>", "()V"), NULL));
    /* Circle's is Base's; java/lang/Object has no class file here, so
     * Base's call is unresolved: none */
    cr_expect_eq(rc_this_call(prog, circle, NULL), find("Base", "<init>", "()V"));
    cr_expect_null(rc_this_call(prog, find("Base", "<init>", "()V"), NULL));
    cr_expect_null(rc_this_call(prog, find("Cha", "total", "([LShape;)D"), NULL));
}


/* Calls and returns of a flow: "Cls" for a call, "~" after an inferred
 * one, ")" for a return. */
static char *calls_and_returns(GArray *flow)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < flow->len; i++) {
        const fl_event *ev = &g_array_index(flow, fl_event, i);
        const rc_method *m = rc_method_by_id(prog, ev->method_id);
        if (ev->kind == FL_CALL)
            g_string_append_printf(s, "%s%s%s", s->len ? " " : "", m ? m->klass : "?",
                                   (ev->flags & FL_F_INFERRED) ? "~" : "");
        else if (ev->kind == FL_RETURN)
            g_string_append(s, ")");
    }
    return g_string_free(s, FALSE);
}

/* Projects a run: its calls and returns (calls_and_returns) must be `want`
 * and st.calls_inferred `inferred`. */
static void expect_inferred(void (*run)(rp_projector *), const char *want, uint64_t inferred)
{
    rp_stats st;
    GArray *flow = project_link(run, &st);
    char *got = calls_and_returns(flow);
    cr_expect_str_eq(got, want);
    cr_expect_eq(st.calls_inferred, inferred, "%s", want);
    g_free(got);
    g_array_free(flow, TRUE);
}

static const char copier_code[1];

/* A compiled Copier.run calls an arraycopy stub at `bci`, and that stub
 * jumps on into another. */
static void copier_at(rp_projector *r, int32_t bci)
{
    uint64_t run = find("Copier", "run", "([B[B)V")->id;
    dc_event e = { .tsc = ++feed_tick, .kind = DC_JIT_ENTER, .flags = DC_F_BY_CALL,
                   .code = copier_code, .method_id = run, .bci = -1, .depth = 1,
                   .call_bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
    e = (dc_event){ .tsc = ++feed_tick, .kind = DC_JIT, .code = copier_code, .method_id = run,
                    .bci = bci, .depth = 1, .call_bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
    e = (dc_event){ .tsc = ++feed_tick, .kind = DC_STUB, .flags = DC_F_BY_CALL,
                    .desc = "jbyte_arraycopy", .bci = -1 };
    cr_assert_eq(rp_event(&e, r), 0);
    e.flags = DC_F_BY_JUMP;
    e.desc = "jbyte_disjoint_arraycopy";
    cr_assert_eq(rp_event(&e, r), 0);
}

static void copier_at_the_call(rp_projector *r) { copier_at(r, 5); }
static void copier_elsewhere(rp_projector *r) { copier_at(r, 1); }

Test(program, an_arraycopy_stub_called_at_a_native_call_is_its_call)
{
    /* run: aload_0 iconst_0 aload_1 iconst_0 iconst_4, invokestatic copy at bci 5 */
    expect_inferred(copier_at_the_call, "Copier Copier~)", 1);
    /* a stub called where the scope is at no call of a native: nothing */
    expect_inferred(copier_elsewhere, "Copier", 0);
}
