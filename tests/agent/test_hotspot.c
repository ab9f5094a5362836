/* Units for the agent's HotSpot table reader (jvm-agent/hotspot.c) without a
 * JVM. This binary plays libjvm.so: it exports the four Serviceability-Agent
 * tables and their stride/offset symbols (linked with -rdynamic, so
 * dlsym(RTLD_DEFAULT) finds them), and builds a small fake JVM in memory: an
 * interpreter StubQueue of InterpreterCodelets, three code heaps with a
 * segment map and one nmethod, and a JVMFlag table holding
 * CodeEntryAlignment. Each test bends one part of that (tables, strides,
 * offsets, sizes, pointers, lengths) and checks the records and warnings
 * hotspot.c produces, which the test doubles of jq_emit/jq_emit_buf/jq_warn
 * below capture instead of the real queue.
 *
 * Criterion runs every test in a process of its own, so hotspot.c's one-shot
 * hs_init state and the fake tables start fresh each time.
 *
 * The same source is also built with FAKE_OMIT=1 (no gHotSpotVMLongConstants
 * exported) and FAKE_OMIT=2 (no gHotSpotVMTypeEntrySizeOffset exported): a
 * symbol cannot be un-exported at run time, so those cases get binaries of
 * their own. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/jmeta.h"
#include "jvm-agent/hotspot.h"
#include "jvm-agent/queue.h"

#ifndef FAKE_OMIT
#define FAKE_OMIT 0
#endif
#if FAKE_OMIT
/* Those builds run one test and leave most helpers unused. */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

/* ---- test doubles of the queue: capture what hotspot.c emits ----------- */

struct rec {
    uint16_t type;
    uint8_t *payload;
    size_t len;
    uint8_t *code;
    uint64_t code_len;
};

#define MAX_CAPTURE 512
static struct rec recs[MAX_CAPTURE];
static int nrecs;
static char *warns[MAX_CAPTURE];
static int nwarns;

void jq_emit(uint16_t type, uint64_t tsc, const void *payload, uint32_t len,
             const void *code, uint64_t code_len)
{
    (void)tsc;
    cr_assert_lt(nrecs, MAX_CAPTURE, "more records than a test expects");
    struct rec *r = &recs[nrecs++];
    r->type = type;
    r->len = len;
    r->payload = malloc(len ? len : 1);
    cr_assert_not_null(r->payload);
    memcpy(r->payload, payload, len);
    r->code_len = code_len;
    r->code = NULL;
    if (code_len) {
        r->code = malloc((size_t)code_len);
        cr_assert_not_null(r->code);
        memcpy(r->code, code, (size_t)code_len);
    }
}

void jq_emit_buf(uint16_t type, uint64_t tsc, const jm_buf *b, const void *code,
                 uint64_t code_len)
{
    jq_emit(type, tsc, b->data, (uint32_t)b->len, code, code_len);
}

void jq_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cr_assert_lt(nwarns, MAX_CAPTURE, "more warnings than a test expects");
    cr_assert_geq(vasprintf(&warns[nwarns], fmt, ap), 0);
    nwarns++;
    va_end(ap);
}

/* Memory a test allocates lives until the test ends (hotspot.c may read it
 * at any call); teardown frees it, so LeakSanitizer sees no leak. */
#define MAX_OWNED 256
static void *owned[MAX_OWNED];
static int nowned;

static void *own(void *p)
{
    cr_assert_not_null(p);
    cr_assert_lt(nowned, MAX_OWNED);
    owned[nowned++] = p;
    return p;
}

static void teardown(void)
{
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    for (int i = 0; i < nrecs; i++) {
        free(recs[i].payload);
        free(recs[i].code);
    }
    for (int i = 0; i < nwarns; i++)
        free(warns[i]);
    nowned = nrecs = nwarns = 0;
}

/* Warnings containing `needle`. */
static int warned(const char *needle)
{
    int n = 0;
    for (int i = 0; i < nwarns; i++)
        n += strstr(warns[i], needle) != NULL;
    return n;
}

static void dump_warnings(void)
{
    for (int i = 0; i < nwarns; i++)
        cr_log_info("warning %d: %s", i, warns[i]);
}

static int count_type(uint16_t type)
{
    int n = 0;
    for (int i = 0; i < nrecs; i++)
        n += recs[i].type == type;
    return n;
}

/* The k-th record of a type, or NULL. */
static const struct rec *nth(uint16_t type, int k)
{
    for (int i = 0; i < nrecs; i++)
        if (recs[i].type == type && k-- == 0)
            return &recs[i];
    return NULL;
}

struct codelet { uint64_t begin, end; int32_t bc; char *desc; };

static struct codelet get_codelet(int k)
{
    const struct rec *r = nth(JM_CODELET, k);
    cr_assert_not_null(r, "no codelet record %d", k);
    jm_cur c;
    jm_cur_init(&c, r->payload, r->len);
    struct codelet cl;
    cl.begin = jm_get_u64(&c);
    cl.end = jm_get_u64(&c);
    cl.bc = jm_get_i32(&c);
    cl.desc = own(jm_get_strdup(&c));
    cr_assert(jm_cur_ok(&c) && c.pos == c.len, "codelet record %d malformed", k);
    return cl;
}

struct blob { uint64_t vaddr, size, off; uint32_t kind; char *name; const uint8_t *code; uint64_t code_len; };

static struct blob get_blob(int k)
{
    const struct rec *r = nth(JM_CODE_BLOB, k);
    cr_assert_not_null(r, "no code blob record %d", k);
    jm_cur c;
    jm_cur_init(&c, r->payload, r->len);
    struct blob b;
    b.vaddr = jm_get_u64(&c);
    b.size = jm_get_u64(&c);
    b.off = jm_get_u64(&c);
    b.kind = jm_get_u32(&c);
    b.name = own(jm_get_strdup(&c));
    b.code = r->code;
    b.code_len = r->code_len;
    cr_assert(jm_cur_ok(&c) && c.pos == c.len, "code blob record %d malformed", k);
    return b;
}

struct cache_heap { uint64_t lo, hi; char *name; };
struct cache { uint64_t lo, hi; uint32_t n; struct cache_heap h[16]; };

static struct cache get_cache(void)
{
    cr_assert_eq(count_type(JM_CODE_CACHE), 1);
    const struct rec *r = nth(JM_CODE_CACHE, 0);
    jm_cur c;
    jm_cur_init(&c, r->payload, r->len);
    struct cache cc;
    cc.lo = jm_get_u64(&c);
    cc.hi = jm_get_u64(&c);
    cc.n = jm_get_u32(&c);
    cr_assert_leq(cc.n, 16);
    for (uint32_t i = 0; i < cc.n; i++) {
        cc.h[i].lo = jm_get_u64(&c);
        cc.h[i].hi = jm_get_u64(&c);
        cc.h[i].name = own(jm_get_strdup(&c));
    }
    cr_assert(jm_cur_ok(&c) && c.pos == c.len, "code cache record malformed");
    return cc;
}

/* ---- the fake JVM's objects (layouts of our own; the tables describe them) */

struct fake_codelet {               /* InterpreterCodelet */
    void *vtbl;
    int32_t size;
    const char *description;
    int32_t bytecode;
};
#define CODELET_SIZE sizeof(struct fake_codelet)

struct fake_stub_queue {            /* StubQueue */
    void *vtbl;
    uint8_t *stub_buffer;
    int32_t buffer_size, buffer_limit, queue_begin, queue_end, number_of_stubs;
};

struct fake_vspace {                /* VirtualSpace */
    uint8_t *low_boundary, *high_boundary, *low, *high;
};

struct fake_code_heap {             /* CodeHeap */
    void *vtbl;
    struct fake_vspace memory, segmap;
    int32_t log2_segment_size;
    const char *name;
};

struct fake_ga {                    /* GrowableArray<CodeHeap*> */
    int32_t len, max;
    struct fake_code_heap **data;
};

struct fake_flag {                  /* JVMFlag */
    void *addr;
    const char *name;
    int32_t flags, type;
};

struct fake_heap_block {            /* HeapBlock */
    uint64_t length;
    bool used;
};

struct fake_nmethod {               /* CodeBlob/nmethod, fields of JDK 17 and 25 */
    void *vtbl;
    uint8_t kind;                   /* JDK 25: CodeBlobKind, one byte */
    int32_t code_offset;            /* JDK 25 */
    uint8_t *code_begin;            /* JDK 17 */
    int32_t comp_level;             /* JDK 17: CompLevel is an int */
    int8_t comp_level_u1;           /* JDK 25: one byte */
};

/* ---- the exported tables --------------------------------------------------- */

struct fake_struct_entry {
    const char *type_name, *field_name, *type_string;
    int32_t is_static;
    uint64_t offset;
    void *address;
};
struct fake_type_entry {
    const char *type_name, *superclass_name;
    int32_t is_oop, is_integer, is_unsigned;
    uint64_t size;
};
struct fake_int_entry { const char *name; int32_t value; };
struct fake_long_entry { const char *name; uint64_t value; };

/* Zero-filled, so the entry after the last one added is the end marker. */
static struct fake_struct_entry fake_structs[96];
static struct fake_type_entry fake_types[32];
static struct fake_int_entry fake_ints[8];
static struct fake_long_entry fake_longs[8];
static int nstructs, ntypes, nints, nlongs;

/* What HotSpot exports (names and types as in vmStructs.cpp). */
struct fake_struct_entry *gHotSpotVMStructs = fake_structs;
struct fake_type_entry *gHotSpotVMTypes = fake_types;
struct fake_int_entry *gHotSpotVMIntConstants = fake_ints;
#if FAKE_OMIT != 1
struct fake_long_entry *gHotSpotVMLongConstants = fake_longs;
#endif
uint64_t gHotSpotVMStructEntryArrayStride = sizeof(struct fake_struct_entry);
uint64_t gHotSpotVMStructEntryTypeNameOffset = offsetof(struct fake_struct_entry, type_name);
uint64_t gHotSpotVMStructEntryFieldNameOffset = offsetof(struct fake_struct_entry, field_name);
uint64_t gHotSpotVMStructEntryTypeStringOffset = offsetof(struct fake_struct_entry, type_string);
uint64_t gHotSpotVMStructEntryIsStaticOffset = offsetof(struct fake_struct_entry, is_static);
uint64_t gHotSpotVMStructEntryOffsetOffset = offsetof(struct fake_struct_entry, offset);
uint64_t gHotSpotVMStructEntryAddressOffset = offsetof(struct fake_struct_entry, address);
uint64_t gHotSpotVMTypeEntryArrayStride = sizeof(struct fake_type_entry);
uint64_t gHotSpotVMTypeEntryTypeNameOffset = offsetof(struct fake_type_entry, type_name);
uint64_t gHotSpotVMTypeEntrySuperclassNameOffset = offsetof(struct fake_type_entry, superclass_name);
#if FAKE_OMIT != 2
uint64_t gHotSpotVMTypeEntrySizeOffset = offsetof(struct fake_type_entry, size);
#endif
uint64_t gHotSpotVMIntConstantEntryArrayStride = sizeof(struct fake_int_entry);
uint64_t gHotSpotVMIntConstantEntryNameOffset = offsetof(struct fake_int_entry, name);
uint64_t gHotSpotVMIntConstantEntryValueOffset = offsetof(struct fake_int_entry, value);
uint64_t gHotSpotVMLongConstantEntryArrayStride = sizeof(struct fake_long_entry);
uint64_t gHotSpotVMLongConstantEntryNameOffset = offsetof(struct fake_long_entry, name);
uint64_t gHotSpotVMLongConstantEntryValueOffset = offsetof(struct fake_long_entry, value);

static void add_field(const char *type, const char *field, const char *tstr, uint64_t off)
{
    cr_assert_lt(nstructs, (int)(sizeof fake_structs / sizeof fake_structs[0]) - 1);
    fake_structs[nstructs++] = (struct fake_struct_entry){ type, field, tstr, 0, off, NULL };
}

static void add_static(const char *type, const char *field, const char *tstr, void *addr)
{
    cr_assert_lt(nstructs, (int)(sizeof fake_structs / sizeof fake_structs[0]) - 1);
    fake_structs[nstructs++] = (struct fake_struct_entry){ type, field, tstr, 1, 0, addr };
}

static void add_type(const char *type, uint64_t size)
{
    cr_assert_lt(ntypes, (int)(sizeof fake_types / sizeof fake_types[0]) - 1);
    fake_types[ntypes++] = (struct fake_type_entry){ type, NULL, 0, 0, 0, size };
}

static void add_int(const char *name, int32_t v)
{
    cr_assert_lt(nints, (int)(sizeof fake_ints / sizeof fake_ints[0]) - 1);
    fake_ints[nints++] = (struct fake_int_entry){ name, v };
}

static void add_long(const char *name, uint64_t v)
{
    cr_assert_lt(nlongs, (int)(sizeof fake_longs / sizeof fake_longs[0]) - 1);
    fake_longs[nlongs++] = (struct fake_long_entry){ name, v };
}

static struct fake_struct_entry *struct_entry(const char *type, const char *field)
{
    for (int i = 0; i < nstructs; i++)
        if (strcmp(fake_structs[i].type_name, type) == 0 &&
            strcmp(fake_structs[i].field_name, field) == 0)
            return &fake_structs[i];
    cr_assert_fail("no fake entry %s::%s", type, field);
    return NULL;
}

/* Takes type::field out of the table. The entry stays (a NULL name would end
 * the table early); it just names a field nobody asks for. */
static void drop_field(const char *type, const char *field)
{
    struct_entry(type, field)->field_name = "_not_this_field";
}

static void set_offset(const char *type, const char *field, uint64_t off)
{
    struct_entry(type, field)->offset = off;
}

static void set_address(const char *type, const char *field, void *addr)
{
    struct_entry(type, field)->address = addr;
}

static struct fake_type_entry *type_entry(const char *type)
{
    for (int i = 0; i < ntypes; i++)
        if (strcmp(fake_types[i].type_name, type) == 0)
            return &fake_types[i];
    cr_assert_fail("no fake type %s", type);
    return NULL;
}

/* ---- the fake JVM ------------------------------------------------------------ */

#define ALIGN 64                     /* CodeEntryAlignment */
#define INTERP_LIMIT 512
#define HEAP_BYTES (64u << 10)       /* reserved per code heap */
#define NONNM_COMMITTED (16u << 10)
#define NM_COMMITTED (32u << 10)
#define LOG2_SEG 6
#define NM_SEG 4                     /* the nmethod's block starts at this segment */
#define NM_CODE_OFF 64               /* its code, from the start of the nmethod */

static const char DESC0[] = "slow signature handler";
static const char DESC2[] = "invokevirtual  182 invokevirtual";
static char *desc1;                  /* on the heap: read through hs_safe_read */

static struct {
    struct fake_stub_queue queue, *interp_code;
    uint8_t *interp;
    uint8_t *cache;                  /* 3 heaps, HEAP_BYTES each */
    uint8_t *cc_low, *cc_high;
    struct fake_code_heap heap[3], *heap_ptrs[3];
    struct fake_ga heaps, *heaps_ptr;
    uint8_t *segmap;
    struct fake_nmethod *nm;
    int64_t code_entry_alignment, use_compressed_oops;
    struct fake_flag flags[3], *flags_ptr;
    uint64_t num_flags;
} J;

static void put_codelet(uint8_t *buf, uint32_t at, int32_t size, const char *desc, int32_t bc)
{
    struct fake_codelet c = { NULL, size, desc, bc };
    memcpy(buf + at, &c, sizeof c);
}

/* A page that is certainly not mapped: mapped, then unmapped. */
static void *hole(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    cr_assert_eq(munmap(p, (size_t)pg), 0);
    return p;
}

static void build_tables(void)
{
    add_field("StubQueue", "_stub_buffer", "address", offsetof(struct fake_stub_queue, stub_buffer));
    add_field("StubQueue", "_buffer_limit", "int", offsetof(struct fake_stub_queue, buffer_limit));
    add_field("StubQueue", "_queue_begin", "int", offsetof(struct fake_stub_queue, queue_begin));
    add_field("StubQueue", "_queue_end", "int", offsetof(struct fake_stub_queue, queue_end));
    add_field("InterpreterCodelet", "_size", "int", offsetof(struct fake_codelet, size));
    add_field("InterpreterCodelet", "_description", "const char*",
              offsetof(struct fake_codelet, description));
    add_field("InterpreterCodelet", "_bytecode", "Bytecodes::Code",
              offsetof(struct fake_codelet, bytecode));
    add_field("VirtualSpace", "_low_boundary", "char*", offsetof(struct fake_vspace, low_boundary));
    add_field("VirtualSpace", "_high_boundary", "char*", offsetof(struct fake_vspace, high_boundary));
    add_field("VirtualSpace", "_low", "char*", offsetof(struct fake_vspace, low));
    add_field("VirtualSpace", "_high", "char*", offsetof(struct fake_vspace, high));
    add_field("CodeHeap", "_memory", "VirtualSpace", offsetof(struct fake_code_heap, memory));
    add_field("CodeHeap", "_segmap", "VirtualSpace", offsetof(struct fake_code_heap, segmap));
    add_field("CodeHeap", "_log2_segment_size", "int",
              offsetof(struct fake_code_heap, log2_segment_size));
    add_field("GrowableArrayBase", "_len", "int", offsetof(struct fake_ga, len));
    add_field("GrowableArray<int>", "_data", "int*", offsetof(struct fake_ga, data));
    add_field("JVMFlag", "_name", "const char*", offsetof(struct fake_flag, name));
    add_field("JVMFlag", "_addr", "void*", offsetof(struct fake_flag, addr));
    add_field("HeapBlock::Header", "_used", "bool", offsetof(struct fake_heap_block, used));
    add_field("CodeBlob", "_code_begin", "address", offsetof(struct fake_nmethod, code_begin));
    add_field("nmethod", "_comp_level", "CompLevel", offsetof(struct fake_nmethod, comp_level));
    add_static("AbstractInterpreter", "_code", "StubQueue*", &J.interp_code);
    add_static("CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", &J.heaps_ptr);
    add_static("CodeCache", "_low_bound", "address", &J.cc_low);
    add_static("CodeCache", "_high_bound", "address", &J.cc_high);
    add_static("JVMFlag", "flags", "JVMFlag*", &J.flags_ptr);
    add_static("JVMFlag", "numFlags", "size_t", &J.num_flags);

    add_type("InterpreterCodelet", CODELET_SIZE);
    add_type("JVMFlag", sizeof(struct fake_flag));
    add_type("CodeHeap", sizeof(struct fake_code_heap));
    add_type("intx", 8);
    add_type("Bytecodes::Code", 4);
    add_type("HeapBlock", sizeof(struct fake_heap_block));
    add_type("CompLevel", 4);
    add_type("int", 4);

    add_int("CompLevel_full_optimization", 4);
    add_long("markWord::hash_mask", 0x7fffffffu);
}

static void build_heap(int i, const char *name, uint64_t committed)
{
    struct fake_code_heap *h = &J.heap[i];
    uint8_t *lo = J.cache + (uint64_t)i * HEAP_BYTES;
    h->memory = (struct fake_vspace){ lo, lo + HEAP_BYTES, lo, lo + committed };
    h->log2_segment_size = LOG2_SEG;
    h->name = name;
    J.heap_ptrs[i] = h;
}

static void build_world(void)
{
    /* Interpreter: three codelets in [0, 384) of a 512-byte buffer. */
    J.interp = own(aligned_alloc(ALIGN, INTERP_LIMIT));
    for (int i = 0; i < INTERP_LIMIT; i++)
        J.interp[i] = (uint8_t)(0xA0 ^ i);
    desc1 = own(strdup("return entry points"));
    put_codelet(J.interp, 0, 96, DESC0, -1);
    put_codelet(J.interp, 96, 160, desc1, -1);
    put_codelet(J.interp, 256, 128, DESC2, 182);
    J.queue = (struct fake_stub_queue){ NULL, J.interp, INTERP_LIMIT, INTERP_LIMIT, 0, 384, 3 };
    J.interp_code = &J.queue;

    /* Code cache: three adjacent heaps; the non-nmethod one gets a pattern. */
    J.cache = mmap(NULL, 3 * HEAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    cr_assert_neq(J.cache, MAP_FAILED);
    for (uint32_t i = 0; i < NONNM_COMMITTED; i++)
        J.cache[i] = (uint8_t)(i * 7);
    build_heap(0, "CodeHeap 'non-nmethods'", NONNM_COMMITTED);
    build_heap(1, "CodeHeap 'profiled nmethods'", NM_COMMITTED);
    build_heap(2, "CodeHeap 'non-profiled nmethods'", NM_COMMITTED);
    J.heaps = (struct fake_ga){ 3, 3, J.heap_ptrs };
    J.heaps_ptr = &J.heaps;
    J.cc_low = J.cache;
    J.cc_high = J.cache + 3 * HEAP_BYTES;

    /* One nmethod in the non-profiled heap: a block of three segments. */
    uint32_t nseg = HEAP_BYTES >> LOG2_SEG;
    J.segmap = own(malloc(nseg));
    memset(J.segmap, 0xFF, nseg);
    J.segmap[NM_SEG] = 0;
    J.segmap[NM_SEG + 1] = 1;
    J.segmap[NM_SEG + 2] = 2;
    J.heap[2].segmap = (struct fake_vspace){ J.segmap, J.segmap + nseg, J.segmap, J.segmap + nseg };
    uint8_t *block = J.cache + 2 * HEAP_BYTES + (NM_SEG << LOG2_SEG);
    struct fake_heap_block hb = { 3, true };
    memcpy(block, &hb, sizeof hb);
    J.nm = (struct fake_nmethod *)(block + sizeof(struct fake_heap_block));
    *J.nm = (struct fake_nmethod){ NULL, 1, NM_CODE_OFF, (uint8_t *)J.nm + NM_CODE_OFF, 3, 3 };

    /* Flags. */
    J.code_entry_alignment = ALIGN;
    J.use_compressed_oops = 1;
    J.flags[0] = (struct fake_flag){ &J.use_compressed_oops, "UseCompressedOops", 0, 0 };
    J.flags[1] = (struct fake_flag){ &J.code_entry_alignment, "CodeEntryAlignment", 0, 0 };
    J.flags[2] = (struct fake_flag){ NULL, NULL, 0, 0 };  /* HotSpot ends the array so */
    J.flags_ptr = J.flags;
    J.num_flags = 3;
}

static void setup(void)
{
    build_tables();
    build_world();
}

static uint64_t A(const void *p) { return (uint64_t)(uintptr_t)p; }
static uint64_t nm_code(void) { return A(J.nm) + NM_CODE_OFF; }

static void init_ok(void)
{
    char why[256] = "";
    cr_assert(hs_init(why, sizeof why), "hs_init: %s", why);
}

static void init_fails(const char *reason)
{
    char why[256] = "";
    cr_assert_not(hs_init(why, sizeof why));
    cr_assert(strstr(why, reason), "reason \"%s\" lacks \"%s\"", why, reason);
    /* A refused JVM makes every entry point a harmless no-op. */
    uint64_t lo = 1, hi = 2, ranges[4][2], v;
    int32_t i32;
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_not(hs_code_cache_bounds(&lo, &hi));
    cr_assert_eq(hs_stub_ranges(ranges, 4), 0);
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
    cr_assert_not(hs_field_offset("StubQueue", "_stub_buffer", &v));
    cr_assert_eq(hs_static_address("CodeCache", "_heaps"), 0);
    cr_assert_not(hs_type_size("InterpreterCodelet", &v));
    cr_assert_not(hs_int_constant("CompLevel_full_optimization", &i32));
    cr_assert_not(hs_long_constant("markWord::hash_mask", &v));
    cr_assert_eq(hs_flag_address("CodeEntryAlignment"), 0);
    cr_assert_eq(nrecs, 0);
    cr_assert_eq(nwarns, 0);
    /* The answer is kept. */
    cr_assert_not(hs_init(NULL, 0));
}

/* The codelets of the well-formed interpreter, k = 0..2. */
static void expect_codelet(int k, int at)
{
    static const struct { uint32_t off, size; int32_t bc; } c[] = {
        { 0, 96, -1 }, { 96, 160, -1 }, { 256, 128, 182 }, { 384, 128, -1 }
    };
    const char *desc[] = { DESC0, desc1, DESC2, "" };
    struct codelet cl = get_codelet(at);
    uint64_t addr = A(J.interp) + c[k].off;
    /* The code starts after the 32-byte header, aligned to CodeEntryAlignment. */
    uint64_t begin = (addr + CODELET_SIZE + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
    cr_assert_eq(cl.begin, begin, "codelet %d begin", k);
    cr_assert_eq(cl.end, addr + c[k].size, "codelet %d end", k);
    cr_assert_eq(cl.bc, c[k].bc, "codelet %d bytecode", k);
    cr_assert_str_eq(cl.desc, desc[k], "codelet %d description", k);
}

static void expect_interp_blob(int k)
{
    struct blob b = get_blob(k);
    cr_assert_eq(b.vaddr, A(J.interp));
    cr_assert_eq(b.size, INTERP_LIMIT);
    cr_assert_eq(b.off, 0);
    cr_assert_eq(b.kind, JM_BLOB_INTERPRETER);
    cr_assert_str_eq(b.name, "Interpreter");
    cr_assert_eq(b.code_len, INTERP_LIMIT);
    cr_assert_arr_eq(b.code, J.interp, INTERP_LIMIT);
}

static void expect_heap_blob(int k)
{
    struct blob b = get_blob(k);
    cr_assert_eq(b.vaddr, A(J.cache));
    cr_assert_eq(b.size, NONNM_COMMITTED);
    cr_assert_eq(b.kind, JM_BLOB_CODE_HEAP);
    cr_assert_str_eq(b.name, "CodeHeap 'non-nmethods'");
    cr_assert_eq(b.code_len, NONNM_COMMITTED);
    cr_assert_arr_eq(b.code, J.cache, NONNM_COMMITTED);
}

static void expect_full_cache(void)
{
    static const char *names[] = { "CodeHeap 'non-nmethods'", "CodeHeap 'profiled nmethods'",
                                   "CodeHeap 'non-profiled nmethods'" };
    struct cache cc = get_cache();
    cr_assert_eq(cc.lo, A(J.cache));
    cr_assert_eq(cc.hi, A(J.cache) + 3 * HEAP_BYTES);
    cr_assert_eq(cc.n, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(cc.h[i].lo, A(J.cache) + (uint64_t)i * HEAP_BYTES);
        cr_assert_eq(cc.h[i].hi, A(J.cache) + (uint64_t)(i + 1) * HEAP_BYTES);
        cr_assert_str_eq(cc.h[i].name, names[i]);
    }
}

/* The interpreter part failed after `codelets` good ones: they, the
 * interpreter blob and everything else are still there. */
static void expect_partial_interp(int ret, int codelets)
{
    dump_warnings();
    cr_assert_eq(ret, codelets);
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(count_type(JM_CODELET), codelets);
    for (int k = 0; k < codelets; k++)
        expect_codelet(k, k);
    expect_full_cache();
    cr_assert_eq(count_type(JM_CODE_BLOB), 2);
    expect_interp_blob(0);
    expect_heap_blob(1);
}

/* No codelets and no interpreter blob, everything else recorded. */
static void expect_no_interp(void)
{
    dump_warnings();
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(count_type(JM_CODELET), 0);
    expect_full_cache();
    cr_assert_eq(count_type(JM_CODE_BLOB), 1);
    expect_heap_blob(0);
}

#if FAKE_OMIT == 1

Test(hotspot_absent, no_long_constant_table, .fini = teardown)
{
    setup();
    init_fails("libjvm.so exports no gHotSpotVMLongConstants");
}

#elif FAKE_OMIT == 2

Test(hotspot_absent, no_type_size_offset, .fini = teardown)
{
    setup();
    init_fails("libjvm.so exports no gHotSpotVMTypeEntrySizeOffset");
}

#else

/* ---- hs_init and the tables themselves ---------------------------------- */

TestSuite(init, .init = setup, .fini = teardown);

Test(init, lookups_on_well_formed_tables)
{
    init_ok();
    uint64_t v = 0;
    int32_t i32 = 0;
    cr_assert(hs_field_offset("StubQueue", "_queue_end", &v));
    cr_assert_eq(v, offsetof(struct fake_stub_queue, queue_end));
    cr_assert_not(hs_field_offset("CodeCache", "_heaps", &v), "a static is no field offset");
    cr_assert_not(hs_field_offset("StubQueue", "_no_such_field", &v));
    cr_assert_eq(hs_static_address("CodeCache", "_low_bound"), A(&J.cc_low));
    cr_assert_eq(hs_static_address("StubQueue", "_stub_buffer"), 0, "a field is no static");
    cr_assert(hs_type_size("CodeHeap", &v));
    cr_assert_eq(v, sizeof(struct fake_code_heap));
    cr_assert_not(hs_type_size("NoSuchType", &v));
    cr_assert(hs_int_constant("CompLevel_full_optimization", &i32));
    cr_assert_eq(i32, 4);
    cr_assert(hs_long_constant("markWord::hash_mask", &v));
    cr_assert_eq(v, 0x7fffffffu);
    cr_assert_not(hs_long_constant("CompLevel_full_optimization", &v));
    cr_assert_eq(hs_flag_address("CodeEntryAlignment"), A(&J.code_entry_alignment));
    cr_assert_eq(hs_flag_address("UseCompressedOops"), A(&J.use_compressed_oops));
    cr_assert_eq(hs_flag_address("NoSuchFlag"), 0);
    cr_assert(hs_init(NULL, 0), "later calls give the first answer");
    cr_assert_eq(nwarns, 0);
}

Test(init, zero_stride)
{
    /* No field fits in an entry of no bytes. */
    gHotSpotVMStructEntryArrayStride = 0;
    init_fails("SA table entry offsets exceed their strides");
}

Test(init, huge_stride)
{
    gHotSpotVMTypeEntryArrayStride = 1u << 20;
    init_fails("gHotSpotVMTypes: implausible entry stride 1048576");
}

Test(init, name_offset_past_stride)
{
    gHotSpotVMIntConstantEntryNameOffset = sizeof(struct fake_int_entry);
    init_fails("gHotSpotVMIntConstants: implausible entry stride");
}

Test(init, field_offset_past_stride)
{
    gHotSpotVMStructEntryAddressOffset = sizeof(struct fake_struct_entry);
    init_fails("SA table entry offsets exceed their strides");
}

/* An offset that wraps around when the field's width is added must not pass
 * for one inside the entry (it would read before the table). */
Test(init, wrapping_field_offset)
{
    gHotSpotVMStructEntryFieldNameOffset = (uint64_t)-8;
    init_fails("SA table entry offsets exceed their strides");
}

Test(init, wrapping_name_offset)
{
    gHotSpotVMLongConstantEntryNameOffset = (uint64_t)-8;
    init_fails("gHotSpotVMLongConstants: implausible entry stride");
}

Test(init, table_outside_the_image)
{
    /* Entries must lie in the object that exports the tables. */
    gHotSpotVMTypes = own(calloc(4, sizeof(struct fake_type_entry)));
    init_fails("gHotSpotVMTypes: entry 0 outside libjvm.so");
}

Test(init, null_table)
{
    gHotSpotVMStructs = NULL;
    init_fails("gHotSpotVMStructs: entry 0 outside libjvm.so");
}

/* More entries than any JVM has, none of them the end marker. hotspot.c
 * stops at 200000; this table is longer so the scan cannot run off it. */
static const char *many_names[200001];

Test(init, no_end_marker)
{
    for (size_t i = 0; i < sizeof many_names / sizeof many_names[0]; i++)
        many_names[i] = "SomeConstant";
    gHotSpotVMIntConstants = (struct fake_int_entry *)(void *)many_names;
    gHotSpotVMIntConstantEntryArrayStride = sizeof(const char *);
    gHotSpotVMIntConstantEntryNameOffset = 0;
    gHotSpotVMIntConstantEntryValueOffset = 0;
    init_fails("gHotSpotVMIntConstants: no end marker");
}

Test(init, names_outside_the_image_or_unterminated)
{
    /* Names must be strings in libjvm: one on the heap and one that runs on
     * without a NUL (longer than any name) do not match, so the well-formed
     * entries after them are the ones found. */
    static char no_nul[600];
    memset(no_nul, 'S', sizeof no_nul);
    memcpy(no_nul, "StubQueue", 9);
    char *heap_name = own(strdup("StubQueue"));
    struct fake_struct_entry first = fake_structs[0];
    memmove(&fake_structs[2], &fake_structs[0], (size_t)nstructs * sizeof fake_structs[0]);
    nstructs += 2;
    fake_structs[0] = first;
    fake_structs[0].type_name = heap_name;
    fake_structs[0].offset = 1000;
    fake_structs[1] = first;
    fake_structs[1].type_name = no_nul;
    fake_structs[1].offset = 2000;
    init_ok();
    uint64_t v = 0;
    cr_assert(hs_field_offset("StubQueue", "_stub_buffer", &v));
    cr_assert_eq(v, offsetof(struct fake_stub_queue, stub_buffer));
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 0);
}

Test(init, empty_tables)
{
    /* Only end markers: hs_init succeeds, and recording says what is missing
     * instead of recording anything. */
    memset(fake_structs, 0, sizeof fake_structs);
    memset(fake_types, 0, sizeof fake_types);
    memset(fake_ints, 0, sizeof fake_ints);
    memset(fake_longs, 0, sizeof fake_longs);
    init_ok();
    uint64_t lo, hi, ranges[4][2];
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(nrecs, 0);
    /* code heaps: 7 fields + 1 static; bounds: 2; interpreter: 9 fields,
     * 3 statics, 2 sizes. */
    dump_warnings();
    cr_assert_eq(nwarns, 24);
    cr_assert_eq(warned("vmStructs has no static CodeCache::_low_bound; code-cache bounds "
                        "taken from the heaps"), 1);
    cr_assert_eq(warned("code-cache bounds unknown; CODE_CACHE not recorded"), 1);
    cr_assert_eq(warned("vmTypes has no size of InterpreterCodelet; interpreter codelets "
                        "not recorded"), 1);
    cr_assert_not(hs_code_cache_bounds(&lo, &hi));
    cr_assert_eq(hs_stub_ranges(ranges, 4), 0);
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
    cr_assert_eq(nwarns, 24, "the polled calls never warn");
}

/* ---- hs_record_layout on a well-formed JVM --------------------------------- */

TestSuite(layout, .init = setup, .fini = teardown);

Test(layout, well_formed)
{
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    dump_warnings();
    cr_assert_eq(nwarns, 0);
    cr_assert_eq(nrecs, 6);
    /* Order: code cache, codelets, interpreter, stub heaps. */
    cr_assert_eq(recs[0].type, JM_CODE_CACHE);
    cr_assert_eq(recs[1].type, JM_CODELET);
    cr_assert_eq(recs[4].type, JM_CODE_BLOB);
    expect_full_cache();
    for (int k = 0; k < 3; k++)
        expect_codelet(k, k);
    expect_interp_blob(0);
    expect_heap_blob(1);
    cr_assert_null(recs[0].code);
}

Test(layout, jdk11_names)
{
    /* JDK 11 spelled JVMFlag "Flag" and GrowableArrayBase
     * "GenericGrowableArray"; the same layout is read. */
    for (int i = 0; i < nstructs; i++) {
        if (strcmp(fake_structs[i].type_name, "JVMFlag") == 0)
            fake_structs[i].type_name = "Flag";
        if (strcmp(fake_structs[i].type_name, "GrowableArrayBase") == 0)
            fake_structs[i].type_name = "GenericGrowableArray";
    }
    type_entry("JVMFlag")->type_name = "Flag";
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 0);
    expect_full_cache();
    for (int k = 0; k < 3; k++)
        expect_codelet(k, k);
}

Test(layout, wrapped_queue)
{
    /* A fourth codelet fills [384, 512); the queue runs from 256 around the
     * limit to 96: codelets 2, 3, then 0. */
    put_codelet(J.interp, 384, 128, NULL, -1);
    J.queue.queue_begin = 256;
    J.queue.queue_end = 96;
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 0);
    expect_codelet(2, 0);
    expect_codelet(3, 1);
    expect_codelet(0, 2);
}

Test(layout, byte_wide_bytecode_and_4_byte_intx)
{
    /* Bytecodes::Code one byte wide (sign-extended: 182 reads as -74, so
     * recorded as none) and intx 4 bytes wide. */
    type_entry("Bytecodes::Code")->size = 1;
    type_entry("intx")->size = 4;
    J.code_entry_alignment = 0x7fffffff00000000 | ALIGN; /* high half ignored */
    put_codelet(J.interp, 0, 96, DESC0, 0x1234500 | 42);
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 0);
    cr_assert_eq(get_codelet(0).bc, 42);
    cr_assert_eq(get_codelet(2).bc, -1);
    expect_codelet(1, 1);
}

Test(layout, descriptions_from_odd_places)
{
    /* An unmapped description reads as ""; one without a NUL that runs into
     * a hole ends there; one without a NUL at all is cut at 255 chars, also
     * when it lies in the image. */
    long pg = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(two, MAP_FAILED);
    cr_assert_eq(munmap(two + pg, (size_t)pg), 0);
    memcpy(two + pg - 5, "abcde", 5);
    char *longd = own(malloc(1000));
    memset(longd, 'x', 1000);
    static char image_long[600];
    memset(image_long, 'D', sizeof image_long);
    put_codelet(J.interp, 0, 96, hole(), 7);
    put_codelet(J.interp, 96, 160, two + pg - 5, -5);
    put_codelet(J.interp, 256, 64, longd, 1);
    put_codelet(J.interp, 320, 64, image_long, 2);
    init_ok();
    cr_assert_eq(hs_record_layout(), 4);
    cr_assert_eq(nwarns, 0);
    struct codelet c0 = get_codelet(0), c1 = get_codelet(1), c2 = get_codelet(2),
                   c3 = get_codelet(3);
    cr_assert_str_eq(c0.desc, "");
    cr_assert_eq(c0.bc, 7);
    cr_assert_str_eq(c1.desc, "abcde");
    cr_assert_eq(c1.bc, -1, "negative bytecodes are recorded as none");
    cr_assert_eq(strlen(c2.desc), 255);
    cr_assert_eq(strspn(c2.desc, "x"), 255);
    cr_assert_eq(strlen(c3.desc), 255);
    cr_assert_eq(strspn(c3.desc, "D"), 255);
    cr_assert_eq(c3.end, A(J.interp) + 384);
}

/* ---- missing table entries --------------------------------------------------- */

TestSuite(missing, .init = setup, .fini = teardown);

Test(missing, codelet_description_field)
{
    drop_field("InterpreterCodelet", "_description");
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("hotspot: vmStructs has no InterpreterCodelet::_description; "
                        "interpreter codelets not recorded"), 1);
    expect_no_interp();
}

Test(missing, interpreter_static)
{
    drop_field("AbstractInterpreter", "_code");
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("vmStructs has no static AbstractInterpreter::_code; "
                        "interpreter codelets not recorded"), 1);
    expect_no_interp();
}

Test(missing, codelet_type_size)
{
    type_entry("InterpreterCodelet")->type_name = "NotInterpreterCodelet";
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("vmTypes has no size of InterpreterCodelet"), 1);
    expect_no_interp();
}

Test(missing, implausible_codelet_type_size)
{
    /* A size nobody has is as good as none. */
    type_entry("InterpreterCodelet")->size = 1u << 30;
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("vmTypes has no size of InterpreterCodelet"), 1);
    expect_no_interp();
}

Test(missing, offset_too_large_is_missing)
{
    set_offset("StubQueue", "_queue_end", 70000);
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("vmStructs has no StubQueue::_queue_end"), 1);
    expect_no_interp();
}

Test(missing, codelet_fields_outside_its_size)
{
    type_entry("InterpreterCodelet")->size = 16;
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("InterpreterCodelet fields lie outside its size 16"), 1);
    expect_partial_interp(0, 0);
}

Test(missing, flag_table_field)
{
    drop_field("JVMFlag", "_name");
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("vmStructs has no JVMFlag::_name; interpreter codelets not recorded"), 1);
    expect_no_interp();
}

Test(missing, code_entry_alignment_flag)
{
    J.flags[1].name = "CodeEntryAlignmentX";
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("cannot read flag CodeEntryAlignment from the JVMFlag table (got 0)"), 1);
    expect_no_interp();
}

Test(missing, code_entry_alignment_not_a_power_of_two)
{
    J.code_entry_alignment = 24;
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("cannot read flag CodeEntryAlignment from the JVMFlag table (got 24)"), 1);
    expect_no_interp();
}

Test(missing, flag_table_implausible)
{
    /* Too many flags, then an unreadable array, then an unreadable name
     * (skipped) before the real entry. */
    J.num_flags = 1u << 30;
    init_ok();
    cr_assert_eq(hs_flag_address("CodeEntryAlignment"), 0);
    J.num_flags = 3;
    J.flags_ptr = hole();
    cr_assert_eq(hs_flag_address("CodeEntryAlignment"), 0);
    J.flags_ptr = J.flags;
    J.flags[0].name = hole();
    cr_assert_eq(hs_flag_address("CodeEntryAlignment"), A(&J.code_entry_alignment));
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 0);
}

Test(missing, code_cache_low_bound)
{
    drop_field("CodeCache", "_low_bound");
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(warned("vmStructs has no static CodeCache::_low_bound; code-cache bounds "
                        "taken from the heaps"), 1);
    /* The heaps span the same range here. */
    expect_full_cache();
    expect_interp_blob(0);
    expect_heap_blob(1);
    uint64_t lo, hi;
    cr_assert(hs_code_cache_bounds(&lo, &hi));
    cr_assert_eq(lo, A(J.cache));
    cr_assert_eq(hi, A(J.cache) + 3 * HEAP_BYTES);
}

Test(missing, virtual_space_high)
{
    drop_field("VirtualSpace", "_high");
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    dump_warnings();
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(warned("vmStructs has no VirtualSpace::_high; code heaps not recorded"), 1);
    struct cache cc = get_cache();
    cr_assert_eq(cc.lo, A(J.cache));
    cr_assert_eq(cc.hi, A(J.cache) + 3 * HEAP_BYTES);
    cr_assert_eq(cc.n, 0);
    cr_assert_eq(count_type(JM_CODELET), 3);
    cr_assert_eq(count_type(JM_CODE_BLOB), 1);
    expect_interp_blob(0);
}

Test(missing, no_bounds_and_no_heaps)
{
    drop_field("CodeCache", "_high_bound");
    drop_field("CodeCache", "_heaps");
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    dump_warnings();
    cr_assert_eq(nwarns, 3);
    cr_assert_eq(warned("no static CodeCache::_heaps; code heaps not recorded"), 1);
    cr_assert_eq(warned("no static CodeCache::_high_bound; code-cache bounds taken from "
                        "the heaps"), 1);
    cr_assert_eq(warned("code-cache bounds unknown; CODE_CACHE not recorded"), 1);
    cr_assert_eq(count_type(JM_CODE_CACHE), 0);
    cr_assert_eq(count_type(JM_CODELET), 3);
    cr_assert_eq(count_type(JM_CODE_BLOB), 1);
    uint64_t lo, hi, ranges[4][2];
    cr_assert_not(hs_code_cache_bounds(&lo, &hi));
    /* No heaps: the interpreter is the one stub range left. */
    cr_assert_eq(hs_stub_ranges(ranges, 4), 1);
    cr_assert_eq(ranges[0][0], A(J.interp));
    cr_assert_eq(ranges[0][1], A(J.interp) + INTERP_LIMIT);
}

/* ---- hostile memory ------------------------------------------------------------ */

TestSuite(hostile, .init = setup, .fini = teardown);

Test(hostile, huge_codelet_size)
{
    put_codelet(J.interp, 96, 0x7fffffff, desc1, -1);
    init_ok();
    int n = hs_record_layout();
    cr_assert_eq(warned("has bad size 2147483647; 1 codelets recorded"), 1);
    expect_partial_interp(n, 1);
}

Test(hostile, negative_codelet_size)
{
    put_codelet(J.interp, 0, -64, DESC0, -1);
    init_ok();
    int n = hs_record_layout();
    cr_assert_eq(warned("has bad size -64; 0 codelets recorded"), 1);
    expect_partial_interp(n, 0);
}

Test(hostile, codelet_smaller_than_its_header)
{
    put_codelet(J.interp, 256, (int32_t)CODELET_SIZE - 8, DESC2, 182);
    init_ok();
    int n = hs_record_layout();
    cr_assert_eq(warned("has bad size 24; 2 codelets recorded"), 1);
    expect_partial_interp(n, 2);
}

Test(hostile, codelet_code_before_its_end)
{
    /* Header fits, but the aligned code start lies past the codelet's end. */
    put_codelet(J.interp, 256, (int32_t)CODELET_SIZE + 8, DESC2, 182);
    init_ok();
    int n = hs_record_layout();
    cr_assert_eq(warned("has bad size 40; 2 codelets recorded"), 1);
    expect_partial_interp(n, 2);
}

Test(hostile, queue_end_inside_a_header)
{
    J.queue.queue_end = 256 + 16;
    init_ok();
    int n = hs_record_layout();
    cr_assert_eq(warned("interpreter StubQueue malformed at +256; 2 codelets recorded"), 1);
    expect_partial_interp(n, 2);
}

Test(hostile, queue_end_inside_a_codelet)
{
    J.queue.queue_end = 256 + 64;
    init_ok();
    int n = hs_record_layout();
    cr_assert_eq(warned("has bad size 128; 2 codelets recorded"), 1);
    expect_partial_interp(n, 2);
}

Test(hostile, queue_end_past_the_limit)
{
    J.queue.queue_end = INTERP_LIMIT + 64;
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("AbstractInterpreter::_code is unreadable or implausible"), 1);
    expect_no_interp();
}

Test(hostile, negative_queue_begin)
{
    J.queue.queue_begin = -32;
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("AbstractInterpreter::_code is unreadable or implausible"), 1);
    expect_no_interp();
}

Test(hostile, huge_buffer_limit)
{
    J.queue.buffer_limit = 0x7fffffff;
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("AbstractInterpreter::_code is unreadable or implausible"), 1);
    expect_no_interp();
    uint64_t ranges[4][2];
    cr_assert_eq(hs_stub_ranges(ranges, 4), 1, "the heap, not the implausible interpreter");
    cr_assert_eq(ranges[0][0], A(J.cache));
}

Test(hostile, unmapped_stub_queue)
{
    J.interp_code = hole();
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("AbstractInterpreter::_code is unreadable or implausible"), 1);
    expect_no_interp();
}

Test(hostile, unmapped_stub_buffer)
{
    J.queue.stub_buffer = hole();
    init_ok();
    cr_assert_eq(hs_record_layout(), 0);
    cr_assert_eq(warned("cannot copy the 512-byte interpreter buffer"), 1);
    expect_no_interp();
}

Test(hostile, unmapped_code_heap)
{
    J.heap_ptrs[1] = hole();
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    dump_warnings();
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(warned("code heap 1 of 3 is unreadable or implausible; not recorded"), 1);
    struct cache cc = get_cache();
    cr_assert_eq(cc.n, 2);
    cr_assert_str_eq(cc.h[0].name, "CodeHeap 'non-nmethods'");
    cr_assert_str_eq(cc.h[1].name, "CodeHeap 'non-profiled nmethods'");
    cr_assert_eq(count_type(JM_CODELET), 3);
    expect_interp_blob(0);
    expect_heap_blob(1);
    /* The nmethod's heap is still searched. */
    cr_assert_eq(hs_nmethod_level(nm_code()), 3);
}

Test(hostile, committed_beyond_reserved)
{
    J.heap[2].memory.high = J.heap[2].memory.high_boundary + 4096;
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(warned("code heap 2 of 3 is unreadable or implausible"), 1);
    cr_assert_eq(get_cache().n, 2);
}

Test(hostile, heap_count_implausible)
{
    J.heaps.len = 1000;
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(warned("CodeCache::_heaps is unreadable or implausible; code heaps not "
                        "recorded"), 1);
    struct cache cc = get_cache();
    cr_assert_eq(cc.n, 0);
    cr_assert_eq(cc.lo, A(J.cache));
    cr_assert_eq(count_type(JM_CODE_BLOB), 1);
    J.heaps.len = -1;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
}

Test(hostile, heap_array_unmapped)
{
    J.heaps.data = hole();
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    dump_warnings();
    cr_assert_eq(nwarns, 3);
    cr_assert_eq(warned("is unreadable or implausible; not recorded"), 3);
    cr_assert_eq(get_cache().n, 0);
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
}

Test(hostile, code_cache_bounds_unreadable)
{
    set_address("CodeCache", "_low_bound", hole());
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(warned("CodeCache bounds unreadable; taken from the heaps"), 1);
    expect_full_cache();
}

Test(hostile, code_cache_bounds_inverted)
{
    /* Bounds the wrong way round are not used; the heaps are. */
    J.cc_low = J.cache + 3 * HEAP_BYTES;
    J.cc_high = J.cache;
    init_ok();
    uint64_t lo, hi;
    cr_assert(hs_code_cache_bounds(&lo, &hi));
    cr_assert_eq(lo, A(J.cache));
    cr_assert_eq(hi, A(J.cache) + 3 * HEAP_BYTES);
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(warned("CodeCache bounds unreadable; taken from the heaps"), 1);
}

Test(hostile, heap_partly_unreadable)
{
    /* The top page of the committed non-nmethod part is gone: the snapshot
     * keeps what is readable and says so. */
    long pg = sysconf(_SC_PAGESIZE);
    cr_assert_eq(munmap(J.cache + NONNM_COMMITTED - pg, (size_t)pg), 0);
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    cr_assert_eq(nwarns, 1);
    char want[160];
    snprintf(want, sizeof want, "only %ld of %u bytes of CodeHeap 'non-nmethods'",
             NONNM_COMMITTED - pg, NONNM_COMMITTED);
    cr_assert_eq(warned(want), 1);
    struct blob b = get_blob(1);
    cr_assert_eq(b.size, (uint64_t)(NONNM_COMMITTED - pg));
    cr_assert_eq(b.code_len, b.size);
    cr_assert_arr_eq(b.code, J.cache, (size_t)b.size);
}

Test(hostile, huge_committed_heap_is_cut)
{
    /* A single (non-segmented) heap committing more than 64 MiB: the bottom
     * 64 MiB is recorded. */
    size_t big = (size_t)80 << 20;
    uint8_t *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
                      MAP_NORESERVE, -1, 0);
    cr_assert_neq(m, MAP_FAILED);
    m[0] = 0x5A;
    J.heap[0].memory = (struct fake_vspace){ m, m + big, m, m + big };
    J.heap[0].name = "CodeCache";
    J.heaps.len = 1;
    J.cc_low = m;
    J.cc_high = m + big;
    init_ok();
    cr_assert_eq(hs_record_layout(), 3);
    dump_warnings();
    cr_assert_eq(nwarns, 1);
    cr_assert_eq(warned("CodeCache has 83886080 committed bytes; snapshot cut to the "
                        "bottom 67108864"), 1);
    struct blob b = get_blob(1);
    cr_assert_eq(b.vaddr, A(m));
    cr_assert_eq(b.size, (uint64_t)64 << 20);
    cr_assert_str_eq(b.name, "CodeCache");
    cr_assert_eq(b.code[0], 0x5A);
    uint64_t ranges[4][2];
    cr_assert_eq(hs_stub_ranges(ranges, 4), 1);
    cr_assert_eq(ranges[0][0], A(m));
    cr_assert_eq(ranges[0][1], A(m) + ((uint64_t)64 << 20));
}

/* ---- hs_stub_ranges and hs_code_cache_bounds ----------------------------------- */

TestSuite(ranges, .init = setup, .fini = teardown);

Test(ranges, named_heaps)
{
    init_ok();
    uint64_t r[4][2], lo, hi;
    cr_assert_eq(hs_stub_ranges(r, 4), 1);
    cr_assert_eq(r[0][0], A(J.cache));
    cr_assert_eq(r[0][1], A(J.cache) + NONNM_COMMITTED);
    cr_assert_eq(hs_stub_ranges(r, 0), 0);
    cr_assert(hs_code_cache_bounds(&lo, &hi));
    cr_assert_eq(lo, A(J.cache));
    cr_assert_eq(hi, A(J.cache) + 3 * HEAP_BYTES);
    cr_assert_eq(nwarns, 0);
}

Test(ranges, unnamed_heaps)
{
    /* Names outside the image are not trusted: the stub heap is then the one
     * holding the interpreter, here the profiled heap. */
    for (int i = 0; i < 3; i++)
        J.heap[i].name = own(strdup("CodeHeap 'non-nmethods'"));
    uint8_t *in_heap1 = J.cache + HEAP_BYTES + 1024;
    memcpy(in_heap1, J.interp, INTERP_LIMIT);
    J.queue.stub_buffer = in_heap1;
    init_ok();
    uint64_t r[4][2];
    cr_assert_eq(hs_stub_ranges(r, 4), 1);
    cr_assert_eq(r[0][0], A(J.cache) + HEAP_BYTES);
    cr_assert_eq(r[0][1], A(J.cache) + HEAP_BYTES + NM_COMMITTED);
    cr_assert_eq(hs_record_layout(), 3);
    struct cache cc = get_cache();
    char want[64];
    snprintf(want, sizeof want, "CodeHeap@0x%" PRIx64, A(&J.heap[1]));
    cr_assert_str_eq(cc.h[1].name, want);
    struct blob b = get_blob(1);
    cr_assert_eq(b.vaddr, A(J.cache) + HEAP_BYTES);
    cr_assert_str_eq(b.name, want);
}

Test(ranges, nothing_readable)
{
    J.heaps_ptr = NULL;
    J.interp_code = hole();
    init_ok();
    uint64_t r[4][2];
    cr_assert_eq(hs_stub_ranges(r, 4), 0);
    cr_assert_eq(nwarns, 0);
}

/* ---- hs_nmethod_level ------------------------------------------------------------ */

TestSuite(level, .init = setup, .fini = teardown);

Test(level, jdk17_layout)
{
    init_ok();
    cr_assert_eq(hs_nmethod_level(nm_code()), 3);
    J.nm->comp_level = 4;
    cr_assert_eq(hs_nmethod_level(nm_code()), 4);
    J.nm->comp_level = 5;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1, "beyond CompLevel_full_optimization");
    J.nm->comp_level = -1;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
    J.nm->comp_level = 1;
    /* Not where the nmethod's code starts, though inside its block. */
    cr_assert_eq(hs_nmethod_level(nm_code() + 8), -1);
    /* A free segment, a profiled-heap address, an address outside the cache. */
    cr_assert_eq(hs_nmethod_level(A(J.cache) + 2 * HEAP_BYTES + 4096), -1);
    cr_assert_eq(hs_nmethod_level(A(J.cache) + HEAP_BYTES + 4096), -1);
    cr_assert_eq(hs_nmethod_level(A(J.interp)), -1);
    cr_assert_eq(hs_nmethod_level(0), -1);
    cr_assert_eq(hs_nmethod_level(nm_code()), 1);
    cr_assert_eq(nwarns, 0);
}

Test(level, jdk25_layout)
{
    /* Code as an offset, a one-byte kind checked against
     * CodeBlobKind::Nmethod, and a one-byte CompLevel. */
    drop_field("CodeBlob", "_code_begin");
    add_field("CodeBlob", "_code_offset", "int", offsetof(struct fake_nmethod, code_offset));
    add_field("CodeBlob", "_kind", "CodeBlobKind", offsetof(struct fake_nmethod, kind));
    add_type("CodeBlobKind", 1);
    add_int("CodeBlobKind::Nmethod", 1);
    set_offset("nmethod", "_comp_level", offsetof(struct fake_nmethod, comp_level_u1));
    type_entry("CompLevel")->size = 1;
    J.nm->comp_level = 99;
    J.nm->comp_level_u1 = 2;
    init_ok();
    cr_assert_eq(hs_nmethod_level(nm_code()), 2);
    J.nm->kind = 3;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1, "not an nmethod");
    J.nm->kind = 1;
    J.nm->code_offset = -NM_CODE_OFF;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
    J.nm->code_offset = NM_CODE_OFF;
    cr_assert_eq(hs_nmethod_level(nm_code()), 2);
}

Test(level, unchecked_blob_is_not_trusted)
{
    /* Without a code pointer/offset the blob cannot be matched to the
     * address, so no level is guessed. */
    drop_field("CodeBlob", "_code_begin");
    init_ok();
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
}

Test(level, bad_segment_maps)
{
    init_ok();
    uint8_t *map = J.segmap;
    map[NM_SEG] = 0xFF;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1, "free block");
    map[NM_SEG] = 0;
    /* A hop backwards past the start of the map. */
    map[NM_SEG + 1] = NM_SEG + 5;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
    /* A hop of zero on a middle segment is a block start; HeapBlock unused. */
    map[NM_SEG + 1] = 0;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
    map[NM_SEG + 1] = 1;
    cr_assert_eq(hs_nmethod_level(nm_code()), 3);
    ((struct fake_heap_block *)(void *)(J.cache + 2 * HEAP_BYTES + (NM_SEG << LOG2_SEG)))->used = false;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1, "block not in use");
    ((struct fake_heap_block *)(void *)(J.cache + 2 * HEAP_BYTES + (NM_SEG << LOG2_SEG)))->used = true;
    J.heap[2].segmap.low = hole();
    cr_assert_eq(hs_nmethod_level(nm_code()), -1, "unmapped segment map");
    J.heap[2].segmap.low = J.segmap;
    J.heap[2].log2_segment_size = 40;
    cr_assert_eq(hs_nmethod_level(nm_code()), -1, "implausible segment size");
    J.heap[2].log2_segment_size = LOG2_SEG;
    J.heap_ptrs[2] = hole();
    cr_assert_eq(hs_nmethod_level(nm_code()), -1, "unmapped heap");
    J.heap_ptrs[2] = &J.heap[2];
    cr_assert_eq(hs_nmethod_level(nm_code()), 3);
    cr_assert_eq(nwarns, 0);
}

Test(level, virtual_space_offsets_past_the_heap_object)
{
    /* Offsets the tables allow (< 64 KiB) but that lie outside a CodeHeap:
     * the heap object is copied into a bounded buffer, so every field read
     * from the copy must be checked against the CodeHeap's size. */
    set_offset("VirtualSpace", "_low_boundary", 5000);
    init_ok();
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
}

Test(level, segmap_offset_past_the_heap_object)
{
    set_offset("CodeHeap", "_segmap", 5000);
    init_ok();
    cr_assert_eq(hs_nmethod_level(nm_code()), -1);
}

#endif
