/* libjpt.so: the JVMTI agent that records what a decoder of Intel PT needs
 * to make sense of a JVM's execution: compiled code with its inline maps,
 * stubs, class files, methods, threads, code patches (trace.dir/jvm/).
 *
 * Usage:  java -agentpath:/path/libjpt.so[=OPTIONS] ...
 * OPTIONS is a comma-separated list (see usage_text in options.c, or run
 * with "=help"). The output directory is, in order: out=DIR, else $JPT_TRACE_DIR
 * (set by ptrec), else ./jpt-<pid>.trace. The agent writes DIR/jvm/meta.jpt
 * and DIR/jvm/code.bin (docs/FORMAT.md) and DIR/jvm/agent.log; a second JVM
 * started while one is writing DIR/jvm (a child inheriting JPT_TRACE_DIR)
 * writes DIR/jvm-<pid>/ instead.
 *
 * What comes from where:
 *   compiled code   CompiledMethodLoad (on from Agent_OnLoad, so HotSpot keeps
 *                   non-safepoint debug info: dense pc -> inline-stack maps),
 *                   code bytes copied in the callback; tier from hotspot.c;
 *                   GenerateEvents at VMInit replays code compiled earlier,
 *                   and at VMDeath loads HotSpot had not posted yet
 *   stubs           DynamicCodeGenerated (+ GenerateEvents at VMInit)
 *   classes         ClassFileLoadHook; classes loaded before it are read from
 *                   the JDK's runtime image (jimage.c) or else rebuilt with
 *                   RetransformClasses at VMInit; hidden classes (never
 *                   hooked) give their bytecode and constant pool at
 *                   ClassPrepare
 *   methods         one JM_METHOD per jmethodID named by any record
 *   threads         ThreadStart/End on the thread itself (gettid), GetAllThreads
 *                   at VMInit for those already running
 *   patches         patch.c re-reads live code off the application threads
 *   interpreter     hotspot.c (HotSpot's VMStructs tables)
 *
 * The agent runs inside production JVMs, so every failure degrades: a
 * missing capability or JVM feature costs one warning and the rest keeps
 * working; an unusable output directory costs one error line and the JVM
 * runs on untraced. Event callbacks never do I/O: they build records and
 * hand them to the queue (queue.c), whose writer thread owns the files. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jvmti.h>
#include <jvmticmlr.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jvm-agent/agent.h"
#include "jvm-agent/agent_jvmti.h"
#include "jvm-agent/hotspot.h"
#include "jvm-agent/queue.h"

#define JPT_EXPORT __attribute__((visibility("default")))

#define HANDSHAKE_TIMEOUT_MS 5000
#define SHUTDOWN_DRAIN_MS 20000

/* ---- state ---------------------------------------------------------------- */

agent_state ag = {
    .mode = JM_MODE_TRACE,
    .patch_ms = 50,
    .close_ms = 10,
    .retransform = true,
    .thread_ids_lock = PTHREAD_MUTEX_INITIALIZER,
};

agent_stats ag_stats;

static u64set threads_seen = U64SET_INIT;

static __thread uint32_t tls_tid;

uint32_t my_tid(void)
{
    if (!tls_tid)
        tls_tid = (uint32_t)syscall(SYS_gettid);
    return tls_tid;
}

void dealloc(void *p)
{
    if (p)
        (*ag.jvmti)->Deallocate(ag.jvmti, (unsigned char *)p);
}

const char *errname(jvmtiError e)
{
    char *n = NULL;
    static _Thread_local char buf[64];
    if (ag.jvmti && (*ag.jvmti)->GetErrorName(ag.jvmti, e, &n) == JVMTI_ERROR_NONE && n) {
        snprintf(buf, sizeof buf, "%s", n);
        dealloc(n);
    } else {
        snprintf(buf, sizeof buf, "JVMTI error %d", (int)e);
    }
    return buf;
}

static JNIEnv *jni_env(void)
{
    JNIEnv *env = NULL;
    if (!ag.vm || (*ag.vm)->GetEnv(ag.vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK)
        return NULL;
    return env;
}

void del_ref(JNIEnv *jni, jobject o)
{
    if (jni && o)
        (*jni)->DeleteLocalRef(jni, o);
}

/* ---- compiled code --------------------------------------------------------- */

static void JNICALL on_compiled_method_load(jvmtiEnv *jvmti, jmethodID method, jint code_size,
                                            const void *code_addr, jint map_length,
                                            const jvmtiAddrLocationMap *map,
                                            const void *compile_info)
{
    (void)jvmti;
    (void)map_length;
    (void)map;
    if (atomic_load(&ag.dead) || !code_addr || code_size <= 0)
        return;
    uint64_t tsc = jq_rdtsc();
    uint64_t vaddr = (uint64_t)(uintptr_t)code_addr, size = (uint64_t)code_size;
    /* One copy, taken first, is both the record's bytes and the patch
     * watcher's shadow, so any later change, even one racing with this
     * event, shows up as a patch with its own time. Copying again when the
     * record is built (after the method lookups below) would let a patch
     * made meanwhile (HotSpot making the code not entrant) into the load
     * record, and so into the code's whole past. A second event for the
     * same code (GenerateEvents at VMInit replaying loads already seen) is
     * dropped here. */
    uint8_t *copy = malloc(size);
    if (!copy) {
        jm_buf none;
        jm_buf_init(&none);
        none.failed = true;
        jq_emit_buf(JM_NMETHOD_LOAD, tsc, &none, NULL, size);  /* counted as dropped */
        return;
    }
    memcpy(copy, code_addr, size);
    if (!pw_register(vaddr, size, copy)) {
        free(copy);
        atomic_fetch_add(&ag_stats.nmethod_dups, 1);
        return;
    }
    JNIEnv *jni = jni_env();
    ensure_method(jni, method);
    /* JVMTI does not say which tier compiled the code (compile_info holds
     * only inline and dummy records): hotspot.c reads it from the nmethod. */
    int level = ag.hs_ok ? hs_nmethod_level(vaddr) : -1;

    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, vaddr);
    jm_put_u64(&b, size);
    jm_put_u64(&b, 0); /* code_offset: filled in by the writer */
    jm_put_u64(&b, (uint64_t)(uintptr_t)method);
    jm_put_i32(&b, level);
    size_t npcs_at = b.len;
    jm_put_u32(&b, 0);
    uint32_t npcs = 0;
    uint64_t frames = 0;
    jmethodID last = NULL;
    for (const jvmtiCompiledMethodLoadRecordHeader *h = compile_info; h; h = h->next) {
        if (h->kind != JVMTI_CMLR_INLINE_INFO)
            continue;
        const jvmtiCompiledMethodLoadInlineRecord *r = (const void *)h;
        for (jint i = 0; i < r->numpcs; i++) {
            const PCStackInfo *pi = &r->pcinfo[i];
            jint depth = pi->numstackframes > 0 ? pi->numstackframes : 0;
            jm_put_u64(&b, (uint64_t)(uintptr_t)pi->pc);
            jm_put_u32(&b, (uint32_t)depth);
            for (jint d = 0; d < depth; d++) {
                jm_put_u64(&b, (uint64_t)(uintptr_t)pi->methods[d]);
                jm_put_i32(&b, pi->bcis[d]);
                if (pi->methods[d] != last) {
                    ensure_method(jni, pi->methods[d]);
                    last = pi->methods[d];
                }
            }
            npcs++;
            frames += (uint64_t)depth;
        }
    }
    if (!b.failed) {
        uint8_t *p = b.data + npcs_at;
        for (int k = 0; k < 4; k++)
            p[k] = (uint8_t)(npcs >> (8 * k));
    }
    jq_emit_buf(JM_NMETHOD_LOAD, tsc, &b, copy, size);
    jm_buf_free(&b);
    free(copy);
    atomic_fetch_add(&ag_stats.nmethods, 1);
    atomic_fetch_add(&ag_stats.nmethod_code_bytes, size);
    atomic_fetch_add(&ag_stats.nmethod_pcs, npcs);
    atomic_fetch_add(&ag_stats.nmethod_frames, frames);
    if (!npcs)
        atomic_fetch_add(&ag_stats.nmethods_without_map, 1);
}

static void JNICALL on_compiled_method_unload(jvmtiEnv *jvmti, jmethodID method,
                                              const void *code_addr)
{
    (void)jvmti;
    if (atomic_load(&ag.dead))
        return;
    uint64_t tsc = jq_rdtsc();
    pw_unregister((uint64_t)(uintptr_t)code_addr);
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, (uint64_t)(uintptr_t)method);
    jm_put_u64(&b, (uint64_t)(uintptr_t)code_addr);
    jq_emit_buf(JM_NMETHOD_UNLOAD, tsc, &b, NULL, 0);
    jm_buf_free(&b);
    atomic_fetch_add(&ag_stats.nmethod_unloads, 1);
}

/* Stubs and adapters. The JVM may hold internal locks here: no JVMTI or JNI
 * calls, only a copy of the bytes. */
static void JNICALL on_dynamic_code(jvmtiEnv *jvmti, const char *name, const void *address,
                                    jint length)
{
    (void)jvmti;
    if (atomic_load(&ag.dead) || !address || length <= 0)
        return;
    uint64_t tsc = jq_rdtsc();
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, (uint64_t)(uintptr_t)address);
    jm_put_u64(&b, (uint64_t)length);
    jm_put_u64(&b, 0);
    jm_put_str(&b, name);
    jq_emit_buf(JM_DYNAMIC_CODE, tsc, &b, address, (uint64_t)length);
    jm_buf_free(&b);
    /* Without the HotSpot tables the stub heaps are unknown to the watcher:
     * watch each blob instead. */
    if (!ag.hs_ok)
        pw_register((uint64_t)(uintptr_t)address, (uint64_t)length, address);
    /* HotSpot fills and frees inline cache transition stubs here all the
     * time, each fill with a call site re-pointed at it. */
    if (name && strcmp(name, "InlineCacheBuffer") == 0)
        pw_watch_closely((uint64_t)(uintptr_t)address, (uint64_t)length);
    atomic_fetch_add(&ag_stats.dynamic_code, 1);
    atomic_fetch_add(&ag_stats.dynamic_code_bytes, (uint64_t)length);
}

/* ---- threads ------------------------------------------------------------ */

static void resolve_thread_ids(JNIEnv *jni)
{
    if (atomic_load(&ag.thread_ids_resolved) || !jni)
        return;
    pthread_mutex_lock(&ag.thread_ids_lock);
    if (!atomic_load(&ag.thread_ids_resolved)) {
        jclass tc = (*jni)->FindClass(jni, "java/lang/Thread");
        if (tc) {
            /* The field read runs no Java code; getId() is the fallback. */
            ag.thread_tid_field = (*jni)->GetFieldID(jni, tc, "tid", "J");
            if (!ag.thread_tid_field) {
                (*jni)->ExceptionClear(jni);
                ag.thread_getid = (*jni)->GetMethodID(jni, tc, "getId", "()J");
                if (!ag.thread_getid)
                    (*jni)->ExceptionClear(jni);
            }
            del_ref(jni, tc);
        } else {
            (*jni)->ExceptionClear(jni);
        }
        if (!ag.thread_tid_field && !ag.thread_getid)
            jq_warn("java.lang.Thread has neither a tid field nor getId(): java thread ids "
                    "are recorded as 0");
        atomic_store(&ag.thread_ids_resolved, true);
    }
    pthread_mutex_unlock(&ag.thread_ids_lock);
}

static uint64_t java_tid(JNIEnv *jni, jthread t)
{
    if (!jni || !t)
        return 0;
    resolve_thread_ids(jni);
    jlong v = 0;
    if (ag.thread_tid_field) {
        v = (*jni)->GetLongField(jni, t, ag.thread_tid_field);
    } else if (ag.thread_getid) {
        v = (*jni)->CallLongMethod(jni, t, ag.thread_getid);
        if ((*jni)->ExceptionCheck(jni)) {
            (*jni)->ExceptionClear(jni);
            v = 0;
        }
    }
    return (uint64_t)v;
}

static bool record_thread_start(JNIEnv *jni, jthread t, uint32_t tid, uint64_t tsc)
{
    jvmtiThreadInfo info;
    memset(&info, 0, sizeof info);
    if ((*ag.jvmti)->GetThreadInfo(ag.jvmti, t, &info) != JVMTI_ERROR_NONE)
        memset(&info, 0, sizeof info);
    uint64_t jt = java_tid(jni, t);
    /* Java thread ids are never reused: a second report of the same thread
     * (HotSpot posts ThreadStart for the main thread after VMInit, which
     * already recorded it) is dropped. */
    if (jt && u64set_add(&threads_seen, jt + 1) == 0) {
        dealloc(info.name);
        del_ref(jni, info.thread_group);
        del_ref(jni, info.context_class_loader);
        return false;
    }
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, jt);
    jm_put_u32(&b, tid);
    jm_put_str(&b, info.name);
    jq_emit_buf(JM_THREAD_START, tsc, &b, NULL, 0);
    jm_buf_free(&b);
    dealloc(info.name);
    del_ref(jni, info.thread_group);
    del_ref(jni, info.context_class_loader);
    return true;
}

static void JNICALL on_thread_start(jvmtiEnv *jvmti, JNIEnv *jni, jthread t)
{
    (void)jvmti;
    if (atomic_load(&ag.dead))
        return;
    /* The callback runs on the new thread itself: gettid is its native id. */
    if (record_thread_start(jni, t, my_tid(), jq_rdtsc()))
        atomic_fetch_add(&ag_stats.threads_started, 1);
}

static void JNICALL on_thread_end(jvmtiEnv *jvmti, JNIEnv *jni, jthread t)
{
    (void)jvmti;
    if (atomic_load(&ag.dead))
        return;
    uint64_t tsc = jq_rdtsc();
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, java_tid(jni, t));
    jm_put_u32(&b, my_tid());
    jq_emit_buf(JM_THREAD_END, tsc, &b, NULL, 0);
    jm_buf_free(&b);
    atomic_fetch_add(&ag_stats.threads_ended, 1);
}

/* ---- reference mode ------------------------------------------------------ */

static void JNICALL on_method_entry(jvmtiEnv *jvmti, JNIEnv *jni, jthread t, jmethodID m)
{
    (void)jvmti;
    (void)t;
    uint64_t tsc = jq_rdtsc();
    ensure_method(jni, m);
    uint8_t p[12];
    uint32_t tid = my_tid();
    uint64_t mid = (uint64_t)(uintptr_t)m;
    memcpy(p, &tid, 4); /* x86-64 is little-endian, as the format */
    memcpy(p + 4, &mid, 8);
    jq_emit(JM_METHOD_ENTRY, tsc, p, sizeof p, NULL, 0);
    atomic_fetch_add_explicit(&ag_stats.method_entries, 1, memory_order_relaxed);
}

static void JNICALL on_method_exit(jvmtiEnv *jvmti, JNIEnv *jni, jthread t, jmethodID m,
                                   jboolean by_exception, jvalue rv)
{
    (void)jvmti;
    (void)jni;
    (void)t;
    (void)rv;
    uint64_t tsc = jq_rdtsc();
    uint8_t p[13];
    uint32_t tid = my_tid();
    uint64_t mid = (uint64_t)(uintptr_t)m;
    memcpy(p, &tid, 4);
    memcpy(p + 4, &mid, 8);
    p[12] = by_exception ? 1 : 0;
    jq_emit(JM_METHOD_EXIT, tsc, p, sizeof p, NULL, 0);
    atomic_fetch_add_explicit(&ag_stats.method_exits, 1, memory_order_relaxed);
}

static void JNICALL on_single_step(jvmtiEnv *jvmti, JNIEnv *jni, jthread t, jmethodID m,
                                   jlocation loc)
{
    (void)jvmti;
    (void)jni;
    (void)t;
    uint64_t tsc = jq_rdtsc();
    uint8_t p[16];
    uint32_t tid = my_tid();
    uint64_t mid = (uint64_t)(uintptr_t)m;
    int32_t bci = (int32_t)loc;
    memcpy(p, &tid, 4);
    memcpy(p + 4, &mid, 8);
    memcpy(p + 12, &bci, 4);
    jq_emit(JM_SINGLE_STEP, tsc, p, sizeof p, NULL, 0);
    atomic_fetch_add_explicit(&ag_stats.single_steps, 1, memory_order_relaxed);
}

/* ---- VM lifecycle ---------------------------------------------------------- */

/* Tells ptrec where the code cache is so it can set the PT address filter
 * before tracing starts (docs/FORMAT.md, "The handshake"). Never waits more
 * than HANDSHAKE_TIMEOUT_MS. */
static void handshake(void)
{
    const char *v = getenv("JPT_HANDSHAKE_FD");
    if (!v)
        return;
    char *end = NULL;
    long fd = strtol(v, &end, 10);
    /* Children (ProcessBuilder, Runtime.exec) must not see a descriptor they
     * do not have. */
    unsetenv("JPT_HANDSHAKE_FD");
    if (!*v || *end || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0) {
        jq_warn("JPT_HANDSHAKE_FD=%s is not an open descriptor: no handshake with the "
                "collector", v);
        ag.handshake_result = 3;
        return;
    }
    /* ptrec hands over one end of a Unix socket pair; anything else (the
     * program's stdout, a file of the user's) is not ours to write to. */
    struct stat fst;
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    if (fd <= 2 || fstat((int)fd, &fst) != 0 || !S_ISSOCK(fst.st_mode) ||
        getsockname((int)fd, (struct sockaddr *)&sa, &salen) != 0 || sa.ss_family != AF_UNIX) {
        jq_warn("JPT_HANDSHAKE_FD=%s is not the collector's socket: no handshake (the "
                "descriptor is left alone)", v);
        ag.handshake_result = 3;
        return;
    }
    uint64_t lo = 0, hi = 0;
    if (!ag.hs_ok || !hs_code_cache_bounds(&lo, &hi)) {
        jq_warn("code-cache bounds unknown: the handshake reports 0x0 0x0 (no IP filter)");
        lo = hi = 0;
    }
    char line[128];
    int n = snprintf(line, sizeof line, "jpt 1 codecache 0x%llx 0x%llx pid %d\n",
                     (unsigned long long)lo, (unsigned long long)hi, (int)getpid());
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (write((int)fd, line, (size_t)n) != n) {
        jq_warn("handshake: cannot write to descriptor %ld: %s", fd, strerror(errno));
        close((int)fd);
        ag.handshake_result = 3;
        return;
    }
    char reply[256];
    size_t got = 0;
    bool done = false;
    while (!done && got < sizeof reply - 1) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= HANDSHAKE_TIMEOUT_MS)
            break;
        struct pollfd pfd = { (int)fd, POLLIN, 0 };
        int pr = poll(&pfd, 1, (int)(HANDSHAKE_TIMEOUT_MS - ms));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        ssize_t r = read((int)fd, reply + got, sizeof reply - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        done = memchr(reply, '\n', got) != NULL;
    }
    close((int)fd);
    reply[got] = 0;
    char *nl = strchr(reply, '\n');
    if (nl)
        *nl = 0;
    if (done && strcmp(reply, "ok") == 0) {
        ag.handshake_result = 1;
        jq_note("handshake: collector traces code cache 0x%llx-0x%llx",
                (unsigned long long)lo, (unsigned long long)hi);
    } else if (done && strncmp(reply, "no", 2) == 0) {
        ag.handshake_result = 2;
        jq_warn("handshake: collector declined: %s", reply[2] ? reply + 3 : "(no reason)");
    } else {
        ag.handshake_result = 3;
        jq_warn("handshake: no answer from the collector within %d ms; going on",
                HANDSHAKE_TIMEOUT_MS);
    }
}

static void JNICALL on_vm_start(jvmtiEnv *jvmti, JNIEnv *jni)
{
    (void)jvmti;
    (void)jni;
    handshake();
}

char *sysprop(const char *name)
{
    char *v = NULL;
    if ((*ag.jvmti)->GetSystemProperty(ag.jvmti, name, &v) != JVMTI_ERROR_NONE)
        return NULL;
    return v;
}

static void record_jvm_info(void)
{
    char *name = sysprop("java.vm.name"), *version = sysprop("java.vm.version"),
         *vendor = sysprop("java.vm.vendor"), *home = sysprop("java.home"),
         *info = sysprop("java.vm.info");
    ag.xint = info && strstr(info, "interpreted mode");
    jm_buf b;
    jm_buf_init(&b);
    jm_put_str(&b, name);
    jm_put_str(&b, version);
    jm_put_str(&b, vendor);
    jm_put_str(&b, home);
    jm_put_u32(&b, (uint32_t)ag.mode);
    jm_put_str(&b, ag.options);
    jq_emit_buf(JM_JVM_INFO, jq_rdtsc(), &b, NULL, 0);
    jm_buf_free(&b);
    jq_note("jvm: %s %s (%s), %s", name ? name : "?", version ? version : "?",
            info ? info : "?", home ? home : "?");
    dealloc(name);
    dealloc(version);
    dealloc(vendor);
    dealloc(home);
    dealloc(info);
}

/* Native tid of a live thread other than the current one, through HotSpot's
 * tables: java.lang.Thread.eetop holds the JavaThread*, whose OSThread keeps
 * the kernel tid. Every read is fault-safe, and the result must name a task
 * of this process; anything else gives 0 (unknown). */
static uint32_t native_tid_of(JNIEnv *jni, jthread t)
{
    static uint64_t off_os, off_tid;
    static int ready; /* 0 untried, 1 usable, -1 not */
    static jfieldID eetop;
    if (!ag.hs_ok || !jni)
        return 0;
    if (!ready) {
        ready = -1;
        jclass tc = (*jni)->FindClass(jni, "java/lang/Thread");
        if (tc) {
            eetop = (*jni)->GetFieldID(jni, tc, "eetop", "J");
            del_ref(jni, tc);
        }
        if ((*jni)->ExceptionCheck(jni))
            (*jni)->ExceptionClear(jni);
        if (eetop &&
            (hs_field_offset("JavaThread", "_osthread", &off_os) ||
             hs_field_offset("Thread", "_osthread", &off_os)) &&
            hs_field_offset("OSThread", "_thread_id", &off_tid))
            ready = 1;
    }
    if (ready != 1)
        return 0;
    uint64_t jt = (uint64_t)(*jni)->GetLongField(jni, t, eetop), os = 0;
    int32_t tid = 0;
    if (!jt || hs_safe_read(&os, jt + off_os, 8) != 8 || !os ||
        hs_safe_read(&tid, os + off_tid, 4) != 4 || tid <= 0)
        return 0;
    char path[64];
    struct stat sb;
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
    return stat(path, &sb) == 0 ? (uint32_t)tid : 0;
}

static void record_live_threads(JNIEnv *jni)
{
    jint n = 0;
    jthread *ts = NULL;
    if ((*ag.jvmti)->GetAllThreads(ag.jvmti, &n, &ts) != JVMTI_ERROR_NONE) {
        jq_warn("GetAllThreads failed: threads started before the agent are not recorded");
        return;
    }
    jthread self = NULL;
    (*ag.jvmti)->GetCurrentThread(ag.jvmti, &self);
    uint64_t tsc = jq_rdtsc();
    for (jint i = 0; i < n; i++) {
        /* Already recorded by ThreadStart during the start phase? */
        uint64_t jt = java_tid(jni, ts[i]);
        if (!u64set_has(&threads_seen, jt + 1)) {
            /* The current thread's native id is gettid(); the others' come
             * from HotSpot's thread objects, or 0 if those cannot be read
             * (the decoder then matches them by name with the collector's
             * COMM records). */
            bool me = self && (*jni)->IsSameObject(jni, self, ts[i]);
            record_thread_start(jni, ts[i], me ? my_tid() : native_tid_of(jni, ts[i]), tsc);
            atomic_fetch_add(&ag_stats.threads_at_init, 1);
        }
        del_ref(jni, ts[i]);
    }
    del_ref(jni, self);
    dealloc(ts);
}

static void set_event(jvmtiEventMode mode, jvmtiEvent ev, const char *what)
{
    jvmtiError e = (*ag.jvmti)->SetEventNotificationMode(ag.jvmti, mode, ev, NULL);
    if (e != JVMTI_ERROR_NONE && mode == JVMTI_ENABLE)
        jq_warn("cannot enable %s events (%s): %s are not recorded", what, errname(e), what);
}

static void JNICALL on_vm_init(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
    (void)jvmti;
    (void)thread;
    record_jvm_info();
    if (ag.hs_ok) {
        int n = hs_record_layout();
        jq_note("recorded %d interpreter codelets", n);
    }
    /* The watcher's baseline of the stub heaps is taken right after their
     * CODE_BLOB snapshots, so every later change becomes a patch. */
    char err[256];
    if (pw_start(ag.patch_ms, ag.close_ms, ag.hs_ok, err, sizeof err) != 0)
        jq_warn("%s: code patches are recorded only at shutdown", err);
    record_live_threads(jni);
    /* Code that existed before the events were on. DynamicCodeGenerated is
     * switched on only now so GenerateEvents' replay is its first report. */
    if (ag.caps.can_generate_compiled_method_load_events) {
        set_event(JVMTI_ENABLE, JVMTI_EVENT_DYNAMIC_CODE_GENERATED, "dynamic code (stub)");
        jvmtiError e = (*ag.jvmti)->GenerateEvents(ag.jvmti, JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
        if (e != JVMTI_ERROR_NONE)
            jq_warn("GenerateEvents(DYNAMIC_CODE_GENERATED): %s: early stubs are missing",
                    errname(e));
        e = (*ag.jvmti)->GenerateEvents(ag.jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD);
        if (e != JVMTI_ERROR_NONE)
            jq_warn("GenerateEvents(COMPILED_METHOD_LOAD): %s: early compiled methods are "
                    "missing", errname(e));
    }
    record_loaded_classes(jni);
    if (ag.mode == JM_MODE_REFERENCE) {
        if (ag.xint && ag.caps.can_generate_single_step_events)
            set_event(JVMTI_ENABLE, JVMTI_EVENT_SINGLE_STEP, "single-step");
        else if (!ag.xint)
            jq_note("reference mode without -Xint: no single-step records");
    }
    atomic_store(&ag.live, true);
}

static void shutdown_agent(bool jvmti_usable)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&once))
        return;
    atomic_store(&ag.dead, true);
    if (jvmti_usable && ag.jvmti) {
        static const jvmtiEvent evs[] = {
            JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, JVMTI_EVENT_CLASS_PREPARE,
            JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
            JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_THREAD_START,
            JVMTI_EVENT_THREAD_END, JVMTI_EVENT_METHOD_ENTRY, JVMTI_EVENT_METHOD_EXIT,
            JVMTI_EVENT_SINGLE_STEP,
        };
        for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
            (*ag.jvmti)->SetEventNotificationMode(ag.jvmti, JVMTI_DISABLE, evs[i], NULL);
    }
    pw_stop();
    pw_stats ps;
    pw_get_stats(&ps);
    uint64_t code = atomic_load(&ag_stats.nmethod_code_bytes);
    uint64_t pcs = atomic_load(&ag_stats.nmethod_pcs);
    const char *names[] = {
        "nmethods", "nmethod_duplicates", "nmethod_code_bytes", "nmethod_pcs",
        "nmethod_pc_frames", "nmethod_pcs_per_kib", "nmethods_without_map",
        "nmethod_unloads", "debug_non_safepoints", "dynamic_code", "dynamic_code_bytes",
        "methods", "method_errors", "classes", "classes_hook", "classes_retransformed",
        "classes_image", "retransform_failed", "retransform_ms", "classes_prepared",
        "classes_hidden", "hidden_method_bytecodes", "class_errors", "threads_started", "threads_ended",
        "threads_at_init", "patch_ranges", "patch_scans", "patches", "patch_bytes",
        "patch_scan_cpu_us_max", "patch_scan_cpu_us_total", "patch_unreadable",
        "patch_close_scans", "patch_close_changes", "patch_close_cpu_us_total", "handshake",
        "method_entries", "method_exits", "single_steps",
    };
    uint64_t vals[] = {
        atomic_load(&ag_stats.nmethods), atomic_load(&ag_stats.nmethod_dups), code, pcs,
        atomic_load(&ag_stats.nmethod_frames), code ? (pcs * 1024 + code / 2) / code : 0,
        atomic_load(&ag_stats.nmethods_without_map), atomic_load(&ag_stats.nmethod_unloads),
        (uint64_t)ag.dns_flag, atomic_load(&ag_stats.dynamic_code),
        atomic_load(&ag_stats.dynamic_code_bytes), atomic_load(&ag_stats.methods),
        atomic_load(&ag_stats.method_errors), class_count(), atomic_load(&ag_stats.classes_hook),
        atomic_load(&ag_stats.classes_retransformed), atomic_load(&ag_stats.classes_image),
        atomic_load(&ag_stats.retransform_failed),
        atomic_load(&ag_stats.retransform_ms), atomic_load(&ag_stats.classes_prepared),
        atomic_load(&ag_stats.classes_hidden), atomic_load(&ag_stats.hidden_methods_bytecode),
        atomic_load(&ag_stats.class_errors), atomic_load(&ag_stats.threads_started),
        atomic_load(&ag_stats.threads_ended), atomic_load(&ag_stats.threads_at_init), ps.ranges,
        ps.scans, ps.patches, ps.patch_bytes, ps.scan_ns_max / 1000,
        ps.scan_ns_total / 1000, ps.unreadable, ps.close_scans, ps.close_changes,
        ps.close_scan_ns_total / 1000, (uint64_t)ag.handshake_result,
        atomic_load(&ag_stats.method_entries), atomic_load(&ag_stats.method_exits),
        atomic_load(&ag_stats.single_steps),
    };
    _Static_assert(sizeof names / sizeof names[0] == sizeof vals / sizeof vals[0],
                   "stats names and values");
    jq_note("nmethods %llu, %llu pc records (%llu per KiB of code), %llu patches",
            (unsigned long long)vals[0], (unsigned long long)pcs,
            (unsigned long long)vals[5], (unsigned long long)ps.patches);
    jq_shutdown(names, vals, sizeof vals / sizeof vals[0], SHUTDOWN_DRAIN_MS);
}

static void JNICALL on_vm_death(jvmtiEnv *jvmti, JNIEnv *jni)
{
    (void)jni;
    /* HotSpot posts CompiledMethodLoad from its service thread; on a busy
     * machine a short program can end with loads still queued there, and
     * the dead phase drops them. Replaying the live compiled methods now
     * records those (the ones already recorded are dropped as duplicates). */
    if (atomic_load(&ag.live) && !atomic_load(&ag.dead) &&
        ag.caps.can_generate_compiled_method_load_events) {
        jvmtiError e = (*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD);
        if (e != JVMTI_ERROR_NONE)
            jq_warn("GenerateEvents(COMPILED_METHOD_LOAD) at VMDeath: %s: compiled methods "
                    "whose load events were still queued are missing", errname(e));
    }
    shutdown_agent(true);
}

/* Runtime.halt() and some fatal exits skip VMDeath: whatever is queued is
 * still written, and the stream still ends with STATS and END. */
static void at_exit(void)
{
    if (ag.tracing)
        shutdown_agent(false);
}

JPT_EXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
    (void)reserved;
    uint64_t start_tsc = jq_rdtsc();
    ag.vm = vm;
    int prc = parse_options(options);
    if (prc != 0) {
        /* Help or a bad option: the JVM runs untraced, as for any failure. */
        print_usage(stderr);
        return JNI_OK;
    }
    default_dir();
    char jvm_dir[PATH_MAX + 8];
    snprintf(jvm_dir, sizeof jvm_dir, "%s/jvm", ag.dir);
    char err[PATH_MAX + 200];
    if (mkdir_p(jvm_dir) < 0) {
        fprintf(stderr, "jpt: error: cannot create trace directory %s: %s; the JVM runs "
                        "untraced\n", jvm_dir, strerror(errno));
        return JNI_OK;
    }
    /* A JVM started by the traced one inherits JPT_TRACE_DIR (and maybe the
     * agent through JAVA_TOOL_OPTIONS): it must not truncate the stream of
     * the JVM already writing there, so it writes jvm-<pid>/ beside it. */
    bool moved = false;
    if (!lock_dir(jvm_dir)) {
        snprintf(jvm_dir, sizeof jvm_dir, "%s/jvm-%d", ag.dir, (int)getpid());
        moved = true;
        if (mkdir_p(jvm_dir) < 0) {
            fprintf(stderr, "jpt: error: cannot create trace directory %s: %s; the JVM runs "
                            "untraced\n", jvm_dir, strerror(errno));
            return JNI_OK;
        }
        lock_dir(jvm_dir);
    }
    if (jq_start(jvm_dir, start_tsc, ag.budget, err, sizeof err) != 0) {
        fprintf(stderr, "jpt: error: %s; the JVM runs untraced\n", err);
        return JNI_OK;
    }
    jq_note("jpt agent: pid %d, options '%s', output %s", (int)getpid(), ag.options, jvm_dir);
    if (moved)
        jq_warn("another JVM is writing %s/jvm: this one writes %s", ag.dir, jvm_dir);

    if ((*vm)->GetEnv(vm, (void **)&ag.jvmti, JVMTI_VERSION_1_2) != JNI_OK || !ag.jvmti) {
        jq_warn("no JVMTI 1.2 environment: nothing is recorded");
        ag.jvmti = NULL;
        jq_shutdown(NULL, NULL, 0, 1000);
        return JNI_OK;
    }
    char why[256] = "";
    ag.hs_ok = hs_init(why, sizeof why);
    if (!ag.hs_ok)
        jq_warn("HotSpot tables unavailable (%s): no interpreter codelets, code-cache bounds "
                "or stub heaps; compiled code and classes are still recorded", why);

    add_capabilities();
    ag.dns_flag = debug_non_safepoints();
    if (ag.hs_ok && ag.dns_flag != 1) {
        /* The flag's current value from HotSpot's flag table settles "on"
         * even when it came from a flags file the scan above cannot see. */
        uint64_t fa = hs_flag_address("DebugNonSafepoints");
        uint8_t v = 0;
        if (fa && hs_safe_read(&v, fa, 1) == 1 && v)
            ag.dns_flag = 1;
    }
    if (ag.dns_flag == 0)
        jq_warn("-XX:-DebugNonSafepoints: inline maps hold safepoints only (sparse); use "
                "-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints");
    if (ag.mode == JM_MODE_REFERENCE)
        fprintf(stderr, "jpt: reference mode records every method entry and exit (and "
                        "bytecode with -Xint): the program runs much slower\n");

    jvmtiEventCallbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.VMStart = on_vm_start;
    cb.VMInit = on_vm_init;
    cb.VMDeath = on_vm_death;
    cb.ClassFileLoadHook = on_class_file_load;
    cb.ClassPrepare = on_class_prepare;
    cb.CompiledMethodLoad = on_compiled_method_load;
    cb.CompiledMethodUnload = on_compiled_method_unload;
    cb.DynamicCodeGenerated = on_dynamic_code;
    cb.ThreadStart = on_thread_start;
    cb.ThreadEnd = on_thread_end;
    cb.MethodEntry = on_method_entry;
    cb.MethodExit = on_method_exit;
    cb.SingleStep = on_single_step;
    jvmtiError e = (*ag.jvmti)->SetEventCallbacks(ag.jvmti, &cb, (jint)sizeof cb);
    if (e != JVMTI_ERROR_NONE) {
        jq_warn("SetEventCallbacks: %s: nothing is recorded", errname(e));
        jq_shutdown(NULL, NULL, 0, 1000);
        return JNI_OK;
    }
    set_event(JVMTI_ENABLE, JVMTI_EVENT_VM_START, "VM start (handshake)");
    set_event(JVMTI_ENABLE, JVMTI_EVENT_VM_INIT, "VM init");
    set_event(JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, "VM death");
    set_event(JVMTI_ENABLE, JVMTI_EVENT_THREAD_START, "thread start");
    set_event(JVMTI_ENABLE, JVMTI_EVENT_THREAD_END, "thread end");
    set_event(JVMTI_ENABLE, JVMTI_EVENT_CLASS_PREPARE, "class prepare");
    if (ag.caps.can_generate_all_class_hook_events)
        set_event(JVMTI_ENABLE, JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, "class file load hook");
    if (ag.caps.can_generate_compiled_method_load_events) {
        /* On from the start: HotSpot then records non-safepoint debug info
         * for every compilation (dense inline maps). */
        set_event(JVMTI_ENABLE, JVMTI_EVENT_COMPILED_METHOD_LOAD, "compiled method load");
        set_event(JVMTI_ENABLE, JVMTI_EVENT_COMPILED_METHOD_UNLOAD, "compiled method unload");
    }
    if (ag.mode == JM_MODE_REFERENCE) {
        if (ag.caps.can_generate_method_entry_events)
            set_event(JVMTI_ENABLE, JVMTI_EVENT_METHOD_ENTRY, "method entry");
        if (ag.caps.can_generate_method_exit_events)
            set_event(JVMTI_ENABLE, JVMTI_EVENT_METHOD_EXIT, "method exit");
    }
    ag.tracing = true;
    atexit(at_exit);
    return JNI_OK;
}

JPT_EXPORT void JNICALL Agent_OnUnload(JavaVM *vm)
{
    (void)vm;
    /* Normally VMDeath did all of this; this covers a JVM that skipped it.
     * JVMTI is no longer usable here. */
    if (ag.tracing)
        shutdown_agent(false);
}
