/* Reading HotSpot's Serviceability-Agent tables from inside the JVM.
 *
 * libjvm.so exports four tables (structs, types, int and long constants)
 * together with the stride and field offsets of their entries, so the layout
 * of the tables themselves is also read, not assumed. From them come the
 * interpreter's StubQueue of InterpreterCodelets, the code-cache bounds and
 * the code heaps.
 *
 * The agent runs in production JVMs, so every read of JVM memory outside
 * libjvm's own image goes through hs_safe_read (process_vm_readv on our own
 * pid, or a pipe where that is refused: both report EFAULT instead of
 * faulting), every string is bounded,
 * and strings and table entries must lie inside libjvm's loaded segments. */
#include "jvm-agent/hotspot.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/jmeta.h"
#include "jvm-agent/queue.h"

/* Limits on what a sane JVM has; beyond them the data is treated as corrupt
 * rather than walked. */
#define HS_MAX_ENTRIES 200000u          /* entries per table */
#define HS_MAX_STRIDE 4096u
#define HS_MAX_NAME 512u                /* table names, flag names */
#define HS_MAX_DESC 256u                /* codelet descriptions */
#define HS_MAX_CODELETS 100000
#define HS_MAX_INTERP_BYTES (64u << 20)
#define HS_MAX_HEAPS 16
#define HS_MAX_FLAGS 100000u
#define HS_MAX_OBJ 4096u                /* sizeof of a JVM object we copy */
/* Largest code-heap snapshot. The non-nmethod heap is a few MiB; a
 * non-segmented cache (one heap for everything) commits its initial size at
 * startup, also a few MiB, with stubs, adapters and the interpreter at its
 * bottom. The cap only matters for an odd configuration with a huge initial
 * commit: then the bottom of the heap, where those live, is what we keep. */
#define HS_MAX_HEAP_SNAPSHOT (64u << 20)
#define HS_MAX_SEGS 16

#define NELEM(a) (int)(sizeof(a) / sizeof((a)[0]))

/* ---- libjvm's image: where table entries and their strings may point ---- */

struct seg { uint64_t lo, hi; };

static struct seg g_segs[HS_MAX_SEGS];
static int g_nsegs;

struct find_obj { uint64_t sym; int n; struct seg segs[HS_MAX_SEGS]; };

/* Collects the readable PT_LOAD segments of the object one of whose segments
 * holds f->sym. */
static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct find_obj *f = arg;
    bool mine = false;
    (void)size;
    f->n = 0;
    for (int i = 0; i < info->dlpi_phnum && f->n < HS_MAX_SEGS; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
            continue;
        uint64_t lo = (uint64_t)info->dlpi_addr + ph->p_vaddr;
        f->segs[f->n].lo = lo;
        f->segs[f->n].hi = lo + ph->p_memsz;
        f->n++;
        mine |= f->sym >= lo && f->sym < lo + ph->p_memsz;
    }
    return mine;
}

/* The loaded segments of the object holding `sym` (libjvm). */
static bool image_of(const void *sym)
{
    struct find_obj f = { .sym = (uint64_t)(uintptr_t)sym };
    if (!dl_iterate_phdr(phdr_cb, &f) || f.n == 0)
        return false;
    memcpy(g_segs, f.segs, sizeof g_segs);
    g_nsegs = f.n;
    return true;
}

static const struct seg *seg_of(uint64_t p)
{
    for (int i = 0; i < g_nsegs; i++)
        if (p >= g_segs[i].lo && p < g_segs[i].hi)
            return &g_segs[i];
    return NULL;
}

static bool in_image(uint64_t p, uint64_t n)
{
    const struct seg *s = seg_of(p);
    return s && n <= s->hi - p;
}

/* Copies a NUL-terminated string of at most max-1 chars that lies inside
 * libjvm into out; false (out = "") if p is elsewhere or the string is longer.
 * Probing a guessed pointer may touch bytes next to some unrelated object of
 * libjvm (always mapped, so safe), which AddressSanitizer would flag: the scan
 * is a plain loop exempt from its checks, and callers only see the copy. */
__attribute__((no_sanitize("address")))
static bool image_str(uint64_t p, char *out, size_t max)
{
    const struct seg *s = seg_of(p);
    out[0] = 0;
    if (!s || max == 0)
        return false;
    uint64_t room = s->hi - p;
    size_t lim = room < max ? (size_t)room : max;
    const volatile char *str = (const volatile char *)(uintptr_t)p;
    for (size_t i = 0; i < lim; i++) {
        out[i] = str[i];
        if (out[i] == 0)
            return true;
    }
    out[0] = 0;
    return false;
}

/* ---- safe reads of JVM memory ------------------------------------------- */

/* Last resort when neither process_vm_readv nor a pipe is available: how
 * many bytes from src are covered by readable mappings in /proc/self/maps. */
static size_t readable_prefix(uint64_t src, size_t n)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return 0;
    char line[512];
    uint64_t want = src, end = src + n;
    bool progress = true;
    /* Mappings are listed in address order, so one pass extends the covered
     * prefix across adjacent readable mappings. */
    while (want < end && progress && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
            continue;
        if (want >= lo && want < hi) {
            if (perms[0] != 'r')
                progress = false;
            else
                want = hi;
        } else if (lo > want) {
            progress = false;
        }
    }
    fclose(f);
    uint64_t got = (want < end ? want : end) - src;
    return (size_t)got;
}

/* Fallback when process_vm_readv is refused (seccomp; qemu-user does not
 * implement it): the bytes go through a pipe of our own. write() copies from
 * our memory inside the kernel, or inside qemu-user's syscall layer, which
 * checks the guest's page flags first, and fails with EFAULT instead of
 * faulting. Checking ranges against /proc/self/maps instead costs tens of
 * milliseconds per read under qemu-user (it synthesizes the file by walking
 * the guest's page flags across the JVM's large reservations); at a dozen
 * reads per compiled method (hs_nmethod_level) that held up HotSpot's
 * service thread, which posts CompiledMethodLoad, so the events fell ever
 * further behind the compiler, copied code HotSpot had since patched, and
 * mostly never came before the JVM exited. One pipe serves every thread,
 * under a lock: it holds nothing between calls. */
static pthread_mutex_t pipe_lock = PTHREAD_MUTEX_INITIALIZER;
static int pipe_fd[2] = { -1, -1 };
static size_t pipe_chunk;      /* bytes per write: never more than the pipe holds */
static bool pipe_failed;       /* cannot be used: /proc/self/maps then */

static bool pipe_open_locked(void)
{
    if (pipe_fd[0] >= 0)
        return true;
    if (pipe_failed)
        return false;
    /* Non-blocking: a write never waits (the pipe is empty between chunks
     * and a chunk fits), and a read never hangs on a short write. */
    if (pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
        pipe_fd[0] = pipe_fd[1] = -1;
        pipe_failed = true;
        return false;
    }
    int sz = fcntl(pipe_fd[1], F_SETPIPE_SZ, 1 << 20);
    if (sz <= 0)
        sz = fcntl(pipe_fd[1], F_GETPIPE_SZ);
    /* A pipe holds at least one page even under the per-user pipe limits. */
    pipe_chunk = sz >= 4096 ? (size_t)sz : 4096;
    return true;
}

static void pipe_close_locked(void)
{
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    pipe_fd[0] = pipe_fd[1] = -1;
}

/* Copies w bytes just written back out of the pipe; false if they could not
 * all be read (the pipe is then useless: its contents are unknown). */
static bool pipe_drain_locked(uint8_t *dst, size_t w)
{
    size_t got = 0;
    while (got < w) {
        ssize_t r = read(pipe_fd[0], dst + got, w - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

/* The readable prefix of [src, src+n) copied to dst through the pipe, or
 * (size_t)-1 if the pipe cannot be used. */
static size_t pipe_read(void *dst, uint64_t src, size_t n)
{
    static size_t page;
    if (!page) {
        long ps = sysconf(_SC_PAGESIZE);
        page = ps > 0 ? (size_t)ps : 4096;
    }
    pthread_mutex_lock(&pipe_lock);
    if (!pipe_open_locked()) {
        pthread_mutex_unlock(&pipe_lock);
        return (size_t)-1;
    }
    size_t done = 0;
    bool page_wise = false;  /* after a fault: find the last readable page */
    while (done < n) {
        uint64_t at = src + done;
        size_t to_page_end = page - (size_t)(at % page);
        size_t want = n - done;
        if (want > pipe_chunk)
            want = pipe_chunk;
        if (page_wise && want > to_page_end)
            want = to_page_end;
        ssize_t w = write(pipe_fd[1], (const void *)(uintptr_t)at, want);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EFAULT && !page_wise && want > to_page_end) {
            /* qemu-user refuses the whole write if any page is unreadable;
             * the kernel copies up to the fault. Page by page tells. */
            page_wise = true;
            continue;
        }
        if (w <= 0)
            break;
        if (!pipe_drain_locked((uint8_t *)dst + done, (size_t)w)) {
            pipe_close_locked();
            pipe_failed = true;
            pthread_mutex_unlock(&pipe_lock);
            return (size_t)-1;
        }
        done += (size_t)w;
    }
    pthread_mutex_unlock(&pipe_lock);
    return done;
}

size_t hs_safe_read(void *dst, uint64_t src, size_t n)
{
    static int use_fallback; /* set once process_vm_readv proved unavailable */
    if (n == 0 || src == 0 || src + n < src)
        return 0;
    if (!use_fallback) {
        struct iovec l = { dst, n }, r = { (void *)(uintptr_t)src, n };
        ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
        if (got >= 0)
            return (size_t)got;
        if (errno == EFAULT || errno == ESRCH)
            return 0;
        use_fallback = 1; /* ENOSYS, EPERM: not allowed here */
    }
    size_t got = pipe_read(dst, src, n);
    if (got != (size_t)-1)
        return got;
    size_t ok = readable_prefix(src, n);
    memcpy(dst, (const void *)(uintptr_t)src, ok);
    return ok;
}

static bool rd(void *dst, uint64_t src, size_t n)
{
    return hs_safe_read(dst, src, n) == n;
}

static bool rd_u64(uint64_t src, uint64_t *v) { return rd(v, src, 8); }

static bool rd_i32(uint64_t src, int32_t *v) { return rd(v, src, 4); }

/* A bounded copy of a NUL-terminated string anywhere in memory; "" when
 * unreadable. Long strings are cut at max-1 chars. */
static void rd_str(uint64_t src, char *out, size_t max)
{
    out[0] = 0;
    if (!src)
        return;
    size_t got = hs_safe_read(out, src, max - 1);
    out[got] = 0;
}

/* ---- the tables ---------------------------------------------------------- */

struct table {
    uint64_t base, stride, count;
};

static struct {
    bool done, ok;
    char why[200];
    struct table structs, types, ints, longs;
    uint64_t s_type, s_field, s_tstr, s_static, s_off, s_addr;
    uint64_t t_type, t_super, t_size;
    uint64_t i_name, i_value, l_name, l_value;
} T;

static void *jvm_handle(void)
{
    /* The launcher loads libjvm RTLD_GLOBAL, but an embedding program may
     * not: ask for it by soname first, then fall back to the global scope. */
    void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
    return h ? h : RTLD_DEFAULT;
}

static bool sym_u64(void *h, const char *name, uint64_t *v, char *why, size_t wl)
{
    const uint64_t *p = dlsym(h, name);
    if (!p) {
        snprintf(why, wl, "libjvm.so exports no %s (not a HotSpot JVM?)", name);
        return false;
    }
    *v = *p;
    return true;
}

static uint64_t entry(const struct table *t, uint64_t i) { return t->base + i * t->stride; }

static uint64_t ld_u64(uint64_t p) { uint64_t v; memcpy(&v, (const void *)(uintptr_t)p, 8); return v; }
static int32_t ld_i32(uint64_t p) { int32_t v; memcpy(&v, (const void *)(uintptr_t)p, 4); return v; }

/* Counts a table's entries up to the terminating one (name == NULL), checking
 * that every entry lies in libjvm. */
static bool count_table(struct table *t, uint64_t name_off, const char *what,
                        char *why, size_t wl)
{
    /* name_off is compared without adding to it: a huge one would wrap. */
    if (t->stride < 8 || t->stride > HS_MAX_STRIDE || name_off > t->stride - 8) {
        snprintf(why, wl, "%s: implausible entry stride %" PRIu64, what, t->stride);
        return false;
    }
    for (uint64_t i = 0; i < HS_MAX_ENTRIES; i++) {
        uint64_t e = entry(t, i);
        if (!in_image(e, t->stride)) {
            snprintf(why, wl, "%s: entry %" PRIu64 " outside libjvm.so", what, i);
            return false;
        }
        if (ld_u64(e + name_off) == 0) {
            t->count = i;
            return true;
        }
    }
    snprintf(why, wl, "%s: no end marker", what);
    return false;
}

/* Written so that a huge off cannot wrap around into a small sum. */
static bool fits(uint64_t off, uint64_t width, uint64_t stride)
{
    return off <= stride && width <= stride - off;
}

static bool init_tables(char *why, size_t wl)
{
    void *h = jvm_handle();
    const uint64_t *pstructs = dlsym(h, "gHotSpotVMStructs");
    const uint64_t *ptypes = dlsym(h, "gHotSpotVMTypes");
    const uint64_t *pints = dlsym(h, "gHotSpotVMIntConstants");
    const uint64_t *plongs = dlsym(h, "gHotSpotVMLongConstants");
    const char *missing = !pstructs ? "gHotSpotVMStructs" : !ptypes ? "gHotSpotVMTypes"
                        : !pints ? "gHotSpotVMIntConstants"
                        : !plongs ? "gHotSpotVMLongConstants" : NULL;
    if (missing) {
        snprintf(why, wl, "libjvm.so exports no %s (not a HotSpot JVM?)", missing);
        return false;
    }
    if (!image_of(pstructs)) {
        snprintf(why, wl, "cannot find the object that defines gHotSpotVMStructs");
        return false;
    }
    if (!sym_u64(h, "gHotSpotVMStructEntryArrayStride", &T.structs.stride, why, wl) ||
        !sym_u64(h, "gHotSpotVMStructEntryTypeNameOffset", &T.s_type, why, wl) ||
        !sym_u64(h, "gHotSpotVMStructEntryFieldNameOffset", &T.s_field, why, wl) ||
        !sym_u64(h, "gHotSpotVMStructEntryTypeStringOffset", &T.s_tstr, why, wl) ||
        !sym_u64(h, "gHotSpotVMStructEntryIsStaticOffset", &T.s_static, why, wl) ||
        !sym_u64(h, "gHotSpotVMStructEntryOffsetOffset", &T.s_off, why, wl) ||
        !sym_u64(h, "gHotSpotVMStructEntryAddressOffset", &T.s_addr, why, wl) ||
        !sym_u64(h, "gHotSpotVMTypeEntryArrayStride", &T.types.stride, why, wl) ||
        !sym_u64(h, "gHotSpotVMTypeEntryTypeNameOffset", &T.t_type, why, wl) ||
        !sym_u64(h, "gHotSpotVMTypeEntrySuperclassNameOffset", &T.t_super, why, wl) ||
        !sym_u64(h, "gHotSpotVMTypeEntrySizeOffset", &T.t_size, why, wl) ||
        !sym_u64(h, "gHotSpotVMIntConstantEntryArrayStride", &T.ints.stride, why, wl) ||
        !sym_u64(h, "gHotSpotVMIntConstantEntryNameOffset", &T.i_name, why, wl) ||
        !sym_u64(h, "gHotSpotVMIntConstantEntryValueOffset", &T.i_value, why, wl) ||
        !sym_u64(h, "gHotSpotVMLongConstantEntryArrayStride", &T.longs.stride, why, wl) ||
        !sym_u64(h, "gHotSpotVMLongConstantEntryNameOffset", &T.l_name, why, wl) ||
        !sym_u64(h, "gHotSpotVMLongConstantEntryValueOffset", &T.l_value, why, wl))
        return false;

    uint64_t ss = T.structs.stride, ts = T.types.stride;
    if (!fits(T.s_field, 8, ss) || !fits(T.s_tstr, 8, ss) || !fits(T.s_static, 4, ss) ||
        !fits(T.s_off, 8, ss) || !fits(T.s_addr, 8, ss) || !fits(T.t_super, 8, ts) ||
        !fits(T.t_size, 8, ts) || !fits(T.i_value, 4, T.ints.stride) ||
        !fits(T.l_value, 8, T.longs.stride)) {
        snprintf(why, wl, "SA table entry offsets exceed their strides");
        return false;
    }
    T.structs.base = *pstructs;
    T.types.base = *ptypes;
    T.ints.base = *pints;
    T.longs.base = *plongs;
    return count_table(&T.structs, T.s_type, "gHotSpotVMStructs", why, wl) &&
           count_table(&T.types, T.t_type, "gHotSpotVMTypes", why, wl) &&
           count_table(&T.ints, T.i_name, "gHotSpotVMIntConstants", why, wl) &&
           count_table(&T.longs, T.l_name, "gHotSpotVMLongConstants", why, wl);
}

/* True if the name pointer stored at p is a string in libjvm equal to s. */
static bool name_is(uint64_t p, const char *s)
{
    char n[HS_MAX_NAME];
    return image_str(ld_u64(p), n, sizeof n) && strcmp(n, s) == 0;
}

/* The struct entry for type::field, or 0. */
static uint64_t find_struct(const char *type, const char *field)
{
    if (!T.ok)
        return 0;
    for (uint64_t i = 0; i < T.structs.count; i++) {
        uint64_t e = entry(&T.structs, i);
        if (name_is(e + T.s_field, field) && name_is(e + T.s_type, type))
            return e;
    }
    return 0;
}

bool hs_field_offset(const char *type, const char *field, uint64_t *offset)
{
    uint64_t e = find_struct(type, field);
    if (!e || ld_i32(e + T.s_static) != 0)
        return false;
    *offset = ld_u64(e + T.s_off);
    return *offset < HS_MAX_OBJ * 16; /* an offset past this is garbage */
}

uint64_t hs_static_address(const char *type, const char *field)
{
    uint64_t e = find_struct(type, field);
    if (!e || ld_i32(e + T.s_static) == 0)
        return 0;
    return ld_u64(e + T.s_addr);
}

bool hs_type_size(const char *type, uint64_t *size)
{
    if (!T.ok)
        return false;
    for (uint64_t i = 0; i < T.types.count; i++) {
        uint64_t e = entry(&T.types, i);
        if (name_is(e + T.t_type, type)) {
            *size = ld_u64(e + T.t_size);
            return true;
        }
    }
    return false;
}

bool hs_int_constant(const char *name, int32_t *value)
{
    if (!T.ok)
        return false;
    for (uint64_t i = 0; i < T.ints.count; i++) {
        uint64_t e = entry(&T.ints, i);
        if (name_is(e + T.i_name, name)) {
            *value = ld_i32(e + T.i_value);
            return true;
        }
    }
    return false;
}

bool hs_long_constant(const char *name, uint64_t *value)
{
    if (!T.ok)
        return false;
    for (uint64_t i = 0; i < T.longs.count; i++) {
        uint64_t e = entry(&T.longs, i);
        if (name_is(e + T.l_name, name)) {
            *value = ld_u64(e + T.l_value);
            return true;
        }
    }
    return false;
}

/* ---- what the agent needs, resolved once ------------------------------- */

/* A field with the type names it has had across JDK versions (the first is
 * the current one and the one named in warnings). */
struct fdesc { const char *type, *alt_type, *field; };

enum {
    F_SQ_BUF, F_SQ_LIMIT, F_SQ_BEGIN, F_SQ_END,
    F_IC_SIZE, F_IC_DESC, F_IC_BC,
    F_VS_LOW_B, F_VS_HIGH_B, F_VS_LOW, F_VS_HIGH,
    F_CH_MEMORY, F_GA_LEN, F_GA_DATA,
    F_FLAG_NAME, F_FLAG_ADDR,
    F_CH_SEGMAP, F_CH_LOG2SEG, F_HB_USED,
    F_CB_CODE_BEGIN, F_CB_CODE_OFFSET, F_CB_KIND, F_NM_LEVEL,
    F_COUNT
};

static const struct fdesc fields[F_COUNT] = {
    [F_SQ_BUF] = { "StubQueue", NULL, "_stub_buffer" },
    [F_SQ_LIMIT] = { "StubQueue", NULL, "_buffer_limit" },
    [F_SQ_BEGIN] = { "StubQueue", NULL, "_queue_begin" },
    [F_SQ_END] = { "StubQueue", NULL, "_queue_end" },
    [F_IC_SIZE] = { "InterpreterCodelet", NULL, "_size" },
    [F_IC_DESC] = { "InterpreterCodelet", NULL, "_description" },
    [F_IC_BC] = { "InterpreterCodelet", NULL, "_bytecode" },
    [F_VS_LOW_B] = { "VirtualSpace", NULL, "_low_boundary" },
    [F_VS_HIGH_B] = { "VirtualSpace", NULL, "_high_boundary" },
    [F_VS_LOW] = { "VirtualSpace", NULL, "_low" },
    [F_VS_HIGH] = { "VirtualSpace", NULL, "_high" },
    [F_CH_MEMORY] = { "CodeHeap", NULL, "_memory" },
    /* JDK 11 called the growable array base GenericGrowableArray. */
    [F_GA_LEN] = { "GrowableArrayBase", "GenericGrowableArray", "_len" },
    [F_GA_DATA] = { "GrowableArray<int>", NULL, "_data" },
    /* JDK 11 and older called JVMFlag "Flag". */
    [F_FLAG_NAME] = { "JVMFlag", "Flag", "_name" },
    [F_FLAG_ADDR] = { "JVMFlag", "Flag", "_addr" },
    [F_CH_SEGMAP] = { "CodeHeap", NULL, "_segmap" },
    [F_CH_LOG2SEG] = { "CodeHeap", NULL, "_log2_segment_size" },
    [F_HB_USED] = { "HeapBlock::Header", NULL, "_used" },
    /* JDK 17 keeps absolute code pointers in a CodeBlob, JDK 25 offsets and
     * a kind byte: whichever exists is used. */
    [F_CB_CODE_BEGIN] = { "CodeBlob", NULL, "_code_begin" },
    [F_CB_CODE_OFFSET] = { "CodeBlob", NULL, "_code_offset" },
    [F_CB_KIND] = { "CodeBlob", NULL, "_kind" },
    [F_NM_LEVEL] = { "nmethod", NULL, "_comp_level" },
};

enum { S_INTERP_CODE, S_CC_HEAPS, S_CC_LOW, S_CC_HIGH, S_FLAGS, S_NUMFLAGS, S_COUNT };

static const struct fdesc statics[S_COUNT] = {
    [S_INTERP_CODE] = { "AbstractInterpreter", NULL, "_code" },
    [S_CC_HEAPS] = { "CodeCache", NULL, "_heaps" },
    [S_CC_LOW] = { "CodeCache", NULL, "_low_bound" },
    [S_CC_HIGH] = { "CodeCache", NULL, "_high_bound" },
    [S_FLAGS] = { "JVMFlag", "Flag", "flags" },
    [S_NUMFLAGS] = { "JVMFlag", "Flag", "numFlags" },
};

enum { Z_CODELET, Z_FLAG, Z_CODEHEAP, Z_INTX, Z_BYTECODE, Z_HEAPBLOCK, Z_COUNT };

static const struct fdesc sizes[Z_COUNT] = {
    [Z_CODELET] = { "InterpreterCodelet", NULL, NULL },
    [Z_FLAG] = { "JVMFlag", "Flag", NULL },
    [Z_CODEHEAP] = { "CodeHeap", NULL, NULL },
    [Z_INTX] = { "intx", NULL, NULL },
    [Z_BYTECODE] = { "Bytecodes::Code", NULL, NULL },
    [Z_HEAPBLOCK] = { "HeapBlock", NULL, NULL },
};

static struct {
    uint64_t off[F_COUNT];
    bool has_off[F_COUNT];
    uint64_t addr[S_COUNT];       /* 0: missing */
    uint64_t size[Z_COUNT];
    bool has_size[Z_COUNT];
    uint64_t level_width, kind_width; /* bytes of nmethod::_comp_level, CodeBlob::_kind */
    int32_t kind_nmethod;             /* CodeBlobKind::Nmethod, -1 if none */
    int32_t max_level;                /* CompLevel_full_optimization */
} R;

/* sizeof the declared type of type::field (e.g. CompLevel: an int in JDK 17,
 * one byte in JDK 25), or 0. */
static uint64_t field_type_size(const char *type, const char *field)
{
    uint64_t e = find_struct(type, field), sz = 0;
    char ts[HS_MAX_NAME];
    if (e && image_str(ld_u64(e + T.s_tstr), ts, sizeof ts) && hs_type_size(ts, &sz))
        return sz;
    return 0;
}

static void resolve(void)
{
    for (int i = 0; i < F_COUNT; i++) {
        R.has_off[i] = hs_field_offset(fields[i].type, fields[i].field, &R.off[i]) ||
                       (fields[i].alt_type &&
                        hs_field_offset(fields[i].alt_type, fields[i].field, &R.off[i]));
    }
    for (int i = 0; i < S_COUNT; i++) {
        R.addr[i] = hs_static_address(statics[i].type, statics[i].field);
        if (!R.addr[i] && statics[i].alt_type)
            R.addr[i] = hs_static_address(statics[i].alt_type, statics[i].field);
    }
    for (int i = 0; i < Z_COUNT; i++) {
        R.has_size[i] = (hs_type_size(sizes[i].type, &R.size[i]) ||
                         (sizes[i].alt_type && hs_type_size(sizes[i].alt_type, &R.size[i]))) &&
                        R.size[i] > 0 && R.size[i] <= HS_MAX_OBJ;
    }
    R.level_width = field_type_size("nmethod", "_comp_level");
    R.kind_width = field_type_size("CodeBlob", "_kind");
    if (!hs_int_constant("CodeBlobKind::Nmethod", &R.kind_nmethod))
        R.kind_nmethod = -1;
    if (!hs_int_constant("CompLevel_full_optimization", &R.max_level))
        R.max_level = 4;
}

/* Checks that every listed field/static/size was found; warns once per
 * missing one (naming what it was needed for) when `warn`. */
static bool need(bool warn, const char *purpose, const int *f, int nf, const int *s,
                 int ns, const int *z, int nz)
{
    bool ok = true;
    for (int i = 0; i < nf; i++)
        if (!R.has_off[f[i]]) {
            ok = false;
            if (warn)
                jq_warn("hotspot: vmStructs has no %s::%s; %s not recorded",
                        fields[f[i]].type, fields[f[i]].field, purpose);
        }
    for (int i = 0; i < ns; i++)
        if (!R.addr[s[i]]) {
            ok = false;
            if (warn)
                jq_warn("hotspot: vmStructs has no static %s::%s; %s not recorded",
                        statics[s[i]].type, statics[s[i]].field, purpose);
        }
    for (int i = 0; i < nz; i++)
        if (!R.has_size[z[i]]) {
            ok = false;
            if (warn)
                jq_warn("hotspot: vmTypes has no size of %s; %s not recorded",
                        sizes[z[i]].type, purpose);
        }
    return ok;
}

bool hs_init(char *why, size_t whylen)
{
    if (!T.done) {
        T.done = true;
        T.ok = init_tables(T.why, sizeof T.why);
        if (T.ok)
            resolve();
    }
    if (!T.ok && why && whylen)
        snprintf(why, whylen, "%s", T.why);
    return T.ok;
}

/* ---- flags ---------------------------------------------------------------- */

uint64_t hs_flag_address(const char *name)
{
    static const int f[] = { F_FLAG_NAME, F_FLAG_ADDR };
    static const int s[] = { S_FLAGS, S_NUMFLAGS };
    static const int z[] = { Z_FLAG };
    if (!T.ok || !need(false, "", f, NELEM(f), s, NELEM(s), z, NELEM(z)))
        return 0;
    uint64_t arr, n;
    if (!rd_u64(R.addr[S_FLAGS], &arr) || !rd_u64(R.addr[S_NUMFLAGS], &n) || !arr ||
        n > HS_MAX_FLAGS)
        return 0;
    uint64_t fsz = R.size[Z_FLAG];
    if (R.off[F_FLAG_NAME] + 8 > fsz || R.off[F_FLAG_ADDR] + 8 > fsz)
        return 0;
    /* One copy of the whole array instead of a read per flag. */
    uint8_t *copy = malloc(n * fsz);
    if (!copy)
        return 0;
    uint64_t found = 0;
    if (rd(copy, arr, n * fsz)) {
        for (uint64_t i = 0; i < n && !found; i++) {
            const uint8_t *fl = copy + i * fsz;
            uint64_t np, ap;
            memcpy(&np, fl + R.off[F_FLAG_NAME], 8);
            memcpy(&ap, fl + R.off[F_FLAG_ADDR], 8);
            if (!np) /* the array ends with an empty entry */
                continue;
            /* Flag names are literals in libjvm; others are read safely. */
            char buf[HS_MAX_NAME];
            if (!image_str(np, buf, sizeof buf))
                rd_str(np, buf, sizeof buf);
            if (strcmp(buf, name) == 0)
                found = ap;
        }
    }
    free(copy);
    return found;
}

/* CodeEntryAlignment (intx), or 0 with a warning. */
static uint64_t code_entry_alignment(bool warn)
{
    uint64_t a = hs_flag_address("CodeEntryAlignment");
    uint64_t v = 0;
    size_t w = R.has_size[Z_INTX] ? (size_t)R.size[Z_INTX] : 8;
    if (w != 4 && w != 8)
        w = 8;
    if (a) {
        if (w == 8) {
            if (!rd_u64(a, &v))
                v = 0;
        } else {
            int32_t v32;
            v = rd_i32(a, &v32) ? (uint64_t)(uint32_t)v32 : 0;
        }
    }
    if (v == 0 || v > 4096 || (v & (v - 1))) {
        if (warn)
            jq_warn("hotspot: cannot read flag CodeEntryAlignment from the JVMFlag "
                    "table (got %" PRIu64 "); interpreter codelets not recorded", v);
        return 0;
    }
    return v;
}

/* ---- code cache ----------------------------------------------------------- */

/* CodeCache::_low_bound/_high_bound: the whole reserved code cache. */
static bool static_bounds(uint64_t *low, uint64_t *high)
{
    uint64_t lo, hi;
    if (!T.ok || !R.addr[S_CC_LOW] || !R.addr[S_CC_HIGH] || !rd_u64(R.addr[S_CC_LOW], &lo) ||
        !rd_u64(R.addr[S_CC_HIGH], &hi) || !lo || hi <= lo)
        return false;
    *low = lo;
    *high = hi;
    return true;
}

struct heap {
    uint64_t obj;           /* CodeHeap* */
    uint64_t res_lo, res_hi; /* reserved */
    uint64_t com_lo, com_hi; /* committed */
    char name[64];
    bool named;
};

/* Code-heap names are not in the tables. A CodeHeap holds a pointer to its
 * name, a literal in libjvm ("CodeHeap 'non-nmethods'", ..., or "CodeCache"
 * when the cache is not segmented): look for a word of the object that
 * points into libjvm at such a string. Only libjvm's own segments are
 * dereferenced, so a wrong guess cannot fault. */
static void heap_name(struct heap *h)
{
    uint8_t obj[HS_MAX_OBJ];
    uint64_t sz = R.has_size[Z_CODEHEAP] ? R.size[Z_CODEHEAP] : 0;
    snprintf(h->name, sizeof h->name, "CodeHeap@0x%" PRIx64, h->obj);
    if (sz < 8 || !rd(obj, h->obj, (size_t)sz))
        return;
    for (uint64_t o = 0; o + 8 <= sz; o += 8) {
        uint64_t p;
        memcpy(&p, obj + o, 8);
        char s[sizeof h->name];
        if (image_str(p, s, sizeof s) &&
            (strncmp(s, "CodeHeap '", 10) == 0 || strcmp(s, "CodeCache") == 0)) {
            snprintf(h->name, sizeof h->name, "%s", s);
            h->named = true;
            return;
        }
    }
}

/* Reads CodeCache::_heaps. Returns the count (0 if unavailable). */
static int read_heaps(struct heap *heaps, bool warn, bool want_names)
{
    static const int f[] = { F_VS_LOW_B, F_VS_HIGH_B, F_VS_LOW, F_VS_HIGH, F_CH_MEMORY,
                             F_GA_LEN, F_GA_DATA };
    static const int s[] = { S_CC_HEAPS };
    if (!T.ok || !need(warn, "code heaps", f, NELEM(f), s, NELEM(s), NULL, 0))
        return 0;
    uint64_t ga, data;
    int32_t len;
    if (!rd_u64(R.addr[S_CC_HEAPS], &ga) || !ga || !rd_i32(ga + R.off[F_GA_LEN], &len) ||
        !rd_u64(ga + R.off[F_GA_DATA], &data) || len <= 0 || len > HS_MAX_HEAPS || !data) {
        if (warn)
            jq_warn("hotspot: CodeCache::_heaps is unreadable or implausible; "
                    "code heaps not recorded");
        return 0;
    }
    int n = 0;
    for (int i = 0; i < len; i++) {
        struct heap *h = &heaps[n];
        memset(h, 0, sizeof *h);
        uint64_t vs;
        bool readable = rd_u64(data + 8 * (uint64_t)i, &h->obj) && h->obj;
        if (readable) {
            vs = h->obj + R.off[F_CH_MEMORY];
            readable = rd_u64(vs + R.off[F_VS_LOW_B], &h->res_lo) &&
                       rd_u64(vs + R.off[F_VS_HIGH_B], &h->res_hi) &&
                       rd_u64(vs + R.off[F_VS_LOW], &h->com_lo) &&
                       rd_u64(vs + R.off[F_VS_HIGH], &h->com_hi);
        }
        if (!readable || h->res_hi <= h->res_lo || h->com_lo < h->res_lo ||
            h->com_hi > h->res_hi || h->com_hi < h->com_lo) {
            if (warn)
                jq_warn("hotspot: code heap %d of %d is unreadable or implausible; "
                        "not recorded", i, len);
            continue;
        }
        if (want_names)
            heap_name(h);
        n++;
    }
    return n;
}

/* The span of the heaps' reserved ranges. */
static bool heap_bounds(const struct heap *heaps, int n, uint64_t *low, uint64_t *high)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < n; i++) {
        if (heaps[i].res_lo < lo)
            lo = heaps[i].res_lo;
        if (heaps[i].res_hi > hi)
            hi = heaps[i].res_hi;
    }
    if (n == 0 || hi <= lo)
        return false;
    *low = lo;
    *high = hi;
    return true;
}

bool hs_code_cache_bounds(uint64_t *low, uint64_t *high)
{
    if (static_bounds(low, high))
        return true;
    /* Without the static bounds the heaps still tell where code lives. */
    struct heap heaps[HS_MAX_HEAPS];
    return heap_bounds(heaps, read_heaps(heaps, false, false), low, high);
}

/* The interpreter buffer [lo, hi), or false. */
static bool interp_range(uint64_t *lo, uint64_t *hi)
{
    uint64_t q, buf;
    int32_t limit;
    if (!T.ok || !R.addr[S_INTERP_CODE] || !R.has_off[F_SQ_BUF] || !R.has_off[F_SQ_LIMIT])
        return false;
    if (!rd_u64(R.addr[S_INTERP_CODE], &q) || !q || !rd_u64(q + R.off[F_SQ_BUF], &buf) ||
        !buf || !rd_i32(q + R.off[F_SQ_LIMIT], &limit) || limit <= 0 ||
        (uint32_t)limit > HS_MAX_INTERP_BYTES)
        return false;
    *lo = buf;
    *hi = buf + (uint64_t)limit;
    return true;
}

/* Which heaps hold stubs rather than compiled methods: those named
 * non-nmethods; the only heap of a non-segmented cache; failing names, the
 * heap that contains the interpreter (stubs and adapters share its heap). */
static bool is_stub_heap(const struct heap *heaps, int n, int i, uint64_t ilo)
{
    if (n == 1)
        return true;
    bool any_named = false;
    for (int k = 0; k < n; k++)
        any_named |= heaps[k].named;
    if (any_named)
        return strstr(heaps[i].name, "non-nmethods") != NULL;
    return ilo && ilo >= heaps[i].res_lo && ilo < heaps[i].res_hi;
}

/* The part of a stub heap we snapshot: committed, capped from the bottom. */
static void stub_span(const struct heap *h, uint64_t *lo, uint64_t *hi)
{
    *lo = h->com_lo;
    *hi = h->com_hi;
    if (*hi - *lo > HS_MAX_HEAP_SNAPSHOT)
        *hi = *lo + HS_MAX_HEAP_SNAPSHOT;
}

size_t hs_stub_ranges(uint64_t (*ranges)[2], size_t max)
{
    struct heap heaps[HS_MAX_HEAPS];
    uint64_t ilo = 0, ihi = 0;
    if (!T.ok || max == 0)
        return 0;
    bool have_interp = interp_range(&ilo, &ihi);
    int n = read_heaps(heaps, false, true);
    size_t k = 0;
    for (int i = 0; i < n && k < max; i++) {
        if (!is_stub_heap(heaps, n, i, ilo) || heaps[i].com_hi == heaps[i].com_lo)
            continue;
        stub_span(&heaps[i], &ranges[k][0], &ranges[k][1]);
        k++;
    }
    if (k == 0 && have_interp) {
        /* No heaps readable: at least the interpreter. */
        ranges[0][0] = ilo;
        ranges[0][1] = ihi;
        k = 1;
    }
    return k;
}

/* ---- compiled methods ------------------------------------------------------ */

/* Reads a small unsigned/signed integer field of width 1, 2, 4 or 8. */
static bool rd_int(uint64_t src, uint64_t width, int64_t *v)
{
    uint8_t b[8];
    if ((width != 1 && width != 2 && width != 4 && width != 8) || !rd(b, src, (size_t)width))
        return false;
    switch (width) {
    case 1: *v = (int8_t)b[0]; break;
    case 2: { int16_t x; memcpy(&x, b, 2); *v = x; break; }
    case 4: { int32_t x; memcpy(&x, b, 4); *v = x; break; }
    default: memcpy(v, b, 8); break;
    }
    return true;
}

/* The CodeBlob whose block in a code heap contains addr, or 0. The heap's
 * segment map has one byte per segment: 0xFF for a free segment, 0 for the
 * first segment of a block, otherwise how many segments to step back towards
 * it (HotSpot's CodeHeap::find_block_for). */
static uint64_t blob_containing(uint64_t addr)
{
    static const int f[] = { F_CH_MEMORY, F_CH_SEGMAP, F_CH_LOG2SEG, F_VS_LOW_B, F_VS_HIGH_B,
                             F_VS_LOW, F_GA_LEN, F_GA_DATA, F_HB_USED };
    static const int s[] = { S_CC_HEAPS };
    static const int z[] = { Z_CODEHEAP, Z_HEAPBLOCK };
    if (!T.ok || !need(false, "", f, NELEM(f), s, NELEM(s), z, NELEM(z)))
        return 0;
    uint64_t ga, data, hp[HS_MAX_HEAPS];
    int32_t len;
    if (!rd_u64(R.addr[S_CC_HEAPS], &ga) || !ga || !rd_i32(ga + R.off[F_GA_LEN], &len) ||
        !rd_u64(ga + R.off[F_GA_DATA], &data) || len <= 0 || len > HS_MAX_HEAPS ||
        !rd(hp, data, 8 * (size_t)len))
        return 0;
    uint64_t hsz = R.size[Z_CODEHEAP];
    uint64_t mem = R.off[F_CH_MEMORY], seg = R.off[F_CH_SEGMAP];
    /* Every field read from the copy below must lie inside it. */
    if (mem + R.off[F_VS_LOW_B] + 8 > hsz || mem + R.off[F_VS_HIGH_B] + 8 > hsz ||
        seg + R.off[F_VS_LOW] + 8 > hsz || R.off[F_CH_LOG2SEG] + 4 > hsz)
        return 0;
    for (int i = 0; i < len; i++) {
        uint8_t obj[HS_MAX_OBJ];
        uint64_t lo, hi, map;
        int32_t log2;
        if (!hp[i] || !rd(obj, hp[i], (size_t)hsz))
            continue;
        memcpy(&lo, obj + mem + R.off[F_VS_LOW_B], 8);
        memcpy(&hi, obj + mem + R.off[F_VS_HIGH_B], 8);
        if (addr < lo || addr >= hi)
            continue;
        memcpy(&map, obj + seg + R.off[F_VS_LOW], 8);
        memcpy(&log2, obj + R.off[F_CH_LOG2SEG], 4);
        if (log2 < 4 || log2 > 16 || !map)
            return 0;
        uint64_t idx = (addr - lo) >> log2;
        /* Hops are at most 254 segments; a block of the code cache spans at
         * most a few MiB, so a generous bound on steps ends any loop. */
        for (int steps = 0; steps < 1 << 16; steps++) {
            uint8_t b;
            if (!rd(&b, map + idx, 1) || b == 0xFF)
                return 0;
            if (b == 0) {
                uint64_t block = lo + (idx << log2);
                uint8_t used;
                if (!rd(&used, block + R.off[F_HB_USED], 1) || !used)
                    return 0;
                return block + R.size[Z_HEAPBLOCK];
            }
            if (b > idx)
                return 0;
            idx -= b;
        }
        return 0;
    }
    return 0;
}

int hs_nmethod_level(uint64_t code_addr)
{
    if (!T.ok || !R.has_off[F_NM_LEVEL] || !R.level_width)
        return -1;
    uint64_t blob = blob_containing(code_addr);
    if (!blob || blob > code_addr)
        return -1;
    /* Make sure the blob is the nmethod whose code starts at code_addr. */
    bool checked = false;
    if (R.has_off[F_CB_KIND] && R.kind_width && R.kind_nmethod >= 0) {
        int64_t kind;
        if (!rd_int(blob + R.off[F_CB_KIND], R.kind_width, &kind) || kind != R.kind_nmethod)
            return -1;
        checked = true;
    }
    if (R.has_off[F_CB_CODE_BEGIN]) {
        uint64_t cb;
        if (!rd_u64(blob + R.off[F_CB_CODE_BEGIN], &cb) || cb != code_addr)
            return -1;
        checked = true;
    } else if (R.has_off[F_CB_CODE_OFFSET]) {
        int32_t co;
        if (!rd_i32(blob + R.off[F_CB_CODE_OFFSET], &co) || co < 0 ||
            blob + (uint64_t)co != code_addr)
            return -1;
        checked = true;
    }
    int64_t level;
    if (!checked || !rd_int(blob + R.off[F_NM_LEVEL], R.level_width, &level))
        return -1;
    return level >= 0 && level <= R.max_level ? (int)level : -1;
}

/* ---- recording ------------------------------------------------------------ */

static void emit_code_cache(const struct heap *heaps, int n)
{
    uint64_t lo = 0, hi = 0;
    if (!static_bounds(&lo, &hi)) {
        if (!R.addr[S_CC_LOW] || !R.addr[S_CC_HIGH])
            jq_warn("hotspot: vmStructs has no static CodeCache::%s; code-cache bounds "
                    "taken from the heaps", R.addr[S_CC_LOW] ? "_high_bound" : "_low_bound");
        else
            jq_warn("hotspot: CodeCache bounds unreadable; taken from the heaps");
        if (!heap_bounds(heaps, n, &lo, &hi)) {
            jq_warn("hotspot: code-cache bounds unknown; CODE_CACHE not recorded");
            return;
        }
    }
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, lo);
    jm_put_u64(&b, hi);
    jm_put_u32(&b, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        jm_put_u64(&b, heaps[i].res_lo);
        jm_put_u64(&b, heaps[i].res_hi);
        jm_put_str(&b, heaps[i].name);
    }
    if (!b.failed)
        jq_emit_buf(JM_CODE_CACHE, jq_rdtsc(), &b, NULL, 0);
    jm_buf_free(&b);
}

/* A JM_CODE_BLOB with a copy of [lo, hi). */
static void emit_blob(uint64_t lo, uint64_t hi, uint32_t kind, const char *name)
{
    uint64_t tsc = jq_rdtsc();
    size_t n = (size_t)(hi - lo);
    uint8_t *code = malloc(n ? n : 1);
    if (!code) {
        jq_warn("hotspot: no memory for a %zu-byte copy of %s", n, name);
        return;
    }
    size_t got = hs_safe_read(code, lo, n);
    if (got != n)
        jq_warn("hotspot: only %zu of %zu bytes of %s at 0x%" PRIx64 " readable; "
                "recorded that much", got, n, name, lo);
    if (got) {
        jm_buf b;
        jm_buf_init(&b);
        jm_put_u64(&b, lo);
        jm_put_u64(&b, got);
        jm_put_u64(&b, 0); /* code_offset: the writer fills it in */
        jm_put_u32(&b, kind);
        jm_put_str(&b, name);
        if (!b.failed)
            jq_emit_buf(JM_CODE_BLOB, tsc, &b, code, got);
        jm_buf_free(&b);
    }
    free(code);
}

static void emit_codelet(uint64_t tsc, uint64_t begin, uint64_t end, int32_t bc,
                         const char *desc)
{
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, begin);
    jm_put_u64(&b, end);
    jm_put_i32(&b, bc);
    jm_put_str(&b, desc);
    if (!b.failed)
        jq_emit_buf(JM_CODELET, tsc, &b, NULL, 0);
    jm_buf_free(&b);
}

/* Walks one contiguous run [from, to) of the copied stub buffer, emitting
 * each codelet. Stops at a malformed one (after warning) and returns false;
 * the codelets before it stay recorded. *emitted counts them. */
static bool walk_codelets(const uint8_t *copy, uint64_t buf, uint64_t from, uint64_t to,
                          uint64_t align, int *emitted)
{
    uint64_t hsz = R.size[Z_CODELET];
    size_t bcw = R.has_size[Z_BYTECODE] ? (size_t)R.size[Z_BYTECODE] : 4;
    uint64_t tsc = jq_rdtsc();
    if (R.off[F_IC_SIZE] + 4 > hsz || R.off[F_IC_DESC] + 8 > hsz ||
        R.off[F_IC_BC] + bcw > hsz || (bcw != 1 && bcw != 2 && bcw != 4)) {
        jq_warn("hotspot: InterpreterCodelet fields lie outside its size %" PRIu64
                "; interpreter codelets not recorded", hsz);
        return false;
    }
    for (uint64_t i = from; i < to; (*emitted)++) {
        if (*emitted >= HS_MAX_CODELETS || to - i < hsz) {
            jq_warn("hotspot: interpreter StubQueue malformed at +%" PRIu64
                    "; %d codelets recorded", i, *emitted);
            return false;
        }
        const uint8_t *c = copy + i;
        int32_t size;
        uint64_t desc_p;
        int32_t bc = 0;
        memcpy(&size, c + R.off[F_IC_SIZE], 4);
        memcpy(&desc_p, c + R.off[F_IC_DESC], 8);
        if (bcw == 4) {
            memcpy(&bc, c + R.off[F_IC_BC], 4);
        } else if (bcw == 2) {
            int16_t v;
            memcpy(&v, c + R.off[F_IC_BC], 2);
            bc = v;
        } else {
            bc = (int8_t)c[R.off[F_IC_BC]];
        }
        uint64_t addr = buf + i;
        /* The code starts after the codelet header, aligned as HotSpot's
         * InterpreterCodelet::code_begin() does, and ends at its size. */
        uint64_t begin = (addr + hsz + align - 1) & ~(align - 1);
        uint64_t end = addr + (uint64_t)size;
        if (size < (int32_t)hsz || (uint64_t)size > to - i || begin > end) {
            jq_warn("hotspot: interpreter codelet at 0x%" PRIx64 " has bad size %d; "
                    "%d codelets recorded", addr, size, *emitted);
            return false;
        }
        char desc[HS_MAX_DESC];
        if (!image_str(desc_p, desc, sizeof desc))
            rd_str(desc_p, desc, sizeof desc);
        emit_codelet(tsc, begin, end, bc < 0 ? -1 : bc, desc);
        i += (uint64_t)size;
    }
    return true;
}

static int record_interpreter(void)
{
    static const int f[] = { F_SQ_BUF, F_SQ_LIMIT, F_SQ_BEGIN, F_SQ_END, F_IC_SIZE,
                             F_IC_DESC, F_IC_BC, F_FLAG_NAME, F_FLAG_ADDR };
    static const int s[] = { S_INTERP_CODE, S_FLAGS, S_NUMFLAGS };
    static const int z[] = { Z_CODELET, Z_FLAG };
    if (!need(true, "interpreter codelets", f, NELEM(f), s, NELEM(s), z, NELEM(z)))
        return 0;
    uint64_t align = code_entry_alignment(true);
    if (!align)
        return 0;
    uint64_t q, buf;
    int32_t limit, qb, qe;
    if (!rd_u64(R.addr[S_INTERP_CODE], &q) || !q || !rd_u64(q + R.off[F_SQ_BUF], &buf) ||
        !rd_i32(q + R.off[F_SQ_LIMIT], &limit) || !rd_i32(q + R.off[F_SQ_BEGIN], &qb) ||
        !rd_i32(q + R.off[F_SQ_END], &qe) || !buf || limit <= 0 ||
        (uint32_t)limit > HS_MAX_INTERP_BYTES || qb < 0 || qe < 0 || qb > limit ||
        qe > limit) {
        jq_warn("hotspot: AbstractInterpreter::_code is unreadable or implausible; "
                "interpreter codelets not recorded");
        return 0;
    }
    uint8_t *copy = malloc((size_t)limit);
    if (!copy || !rd(copy, buf, (size_t)limit)) {
        jq_warn("hotspot: cannot copy the %d-byte interpreter buffer at 0x%" PRIx64
                "; interpreter codelets not recorded", limit, buf);
        free(copy);
        return 0;
    }
    /* The queue is [begin, end), wrapping at the limit when end < begin (the
     * interpreter never wraps, but StubQueue allows it). */
    int n = 0;
    if (qb <= qe) {
        walk_codelets(copy, buf, (uint64_t)qb, (uint64_t)qe, align, &n);
    } else if (walk_codelets(copy, buf, (uint64_t)qb, (uint64_t)limit, align, &n)) {
        walk_codelets(copy, buf, 0, (uint64_t)qe, align, &n);
    }
    /* The bytes go out as they were copied, so the codelets and the blob
     * describe the same instant. */
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, buf);
    jm_put_u64(&b, (uint64_t)limit);
    jm_put_u64(&b, 0);
    jm_put_u32(&b, JM_BLOB_INTERPRETER);
    jm_put_str(&b, "Interpreter");
    if (!b.failed)
        jq_emit_buf(JM_CODE_BLOB, jq_rdtsc(), &b, copy, (uint64_t)limit);
    jm_buf_free(&b);
    free(copy);
    return n;
}

int hs_record_layout(void)
{
    if (!T.ok)
        return 0;
    struct heap heaps[HS_MAX_HEAPS];
    int nheaps = read_heaps(heaps, true, true);
    emit_code_cache(heaps, nheaps);

    int n = record_interpreter();

    uint64_t ilo = 0, ihi = 0;
    interp_range(&ilo, &ihi);
    for (int i = 0; i < nheaps; i++) {
        if (!is_stub_heap(heaps, nheaps, i, ilo))
            continue;
        uint64_t lo, hi;
        stub_span(&heaps[i], &lo, &hi);
        if (hi - lo < heaps[i].com_hi - heaps[i].com_lo)
            jq_warn("hotspot: %s has %" PRIu64 " committed bytes; snapshot cut to the "
                    "bottom %" PRIu64, heaps[i].name, heaps[i].com_hi - heaps[i].com_lo,
                    hi - lo);
        if (hi > lo)
            emit_blob(lo, hi, JM_BLOB_CODE_HEAP, heaps[i].name);
    }
    return n;
}
