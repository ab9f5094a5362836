/* The agent's classes and methods: JM_METHOD for every method a record names,
 * class files from the load hook, the runtime image or a retransformation,
 * preparation records, and the bytecode and constant pool of classes no class
 * file comes for (hidden classes). */
#include <inttypes.h>
#include <jvmti.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jvm-agent/agent.h"
#include "jvm-agent/agent_jvmti.h"
#include "jvm-agent/queue.h"

#define RETRANSFORM_BATCH 128

static u64set methods_seen = U64SET_INIT;

/* The defining loader reduced to a number: its identity hash (0 for the boot
 * loader). Collisions between two loaders defining the same class name are
 * possible in theory and would merge two class ids; acceptable for a key that
 * only has to connect a load-hook record to a ClassPrepare record. */
static uint64_t loader_key(jobject loader)
{
    if (!loader)
        return 0;
    jint h = 0;
    if ((*ag.jvmti)->GetObjectHashCode(ag.jvmti, loader, &h) != JVMTI_ERROR_NONE)
        return 1;
    return ((uint64_t)(uint32_t)h << 1) | 1;
}

/* Class id of klass (creating it if new); *sig_out gets the JVMTI-allocated
 * signature if requested. Returns 0 on failure. */
static uint64_t class_id_of(JNIEnv *jni, jclass klass, unsigned set_flags, class_entry *before,
                            char **sig_out, uint64_t *loader_out)
{
    char *sig = NULL;
    if ((*ag.jvmti)->GetClassSignature(ag.jvmti, klass, &sig, NULL) != JVMTI_ERROR_NONE)
        return 0;
    jobject loader = NULL;
    uint64_t lk = 0;
    if ((*ag.jvmti)->GetClassLoader(ag.jvmti, klass, &loader) == JVMTI_ERROR_NONE) {
        lk = loader_key(loader);
        del_ref(jni, loader);
    }
    class_entry e = { 0, 0 };
    bool ok = class_get(sig, lk, set_flags, &e);
    if (loader_out)
        *loader_out = lk;
    if (before)
        *before = e;
    if (sig_out)
        *sig_out = sig;
    else
        dealloc(sig);
    return ok ? e.id : 0;
}

/* Records JM_METHOD for m the first time any record names it. The caller
 * that knows the declaring class passes its id and signature (cid nonzero):
 * preparing a class names every method it declares, and looking the class
 * up again for each of them was most of this function's cost. */
static void record_method(JNIEnv *jni, jmethodID m, uint64_t cid, const char *csig)
{
    if (!m)
        return;
    /* Reference mode calls this for every method entry: a small per-thread
     * cache of ids already recorded keeps those off the set's mutex. */
    static __thread uint64_t recent[256];
    uint64_t key = (uint64_t)(uintptr_t)m;
    uint64_t *slot = &recent[(key >> 3 ^ key >> 11) & 255];
    if (*slot == key)
        return;
    int added = u64set_add(&methods_seen, key);
    *slot = key;
    if (added <= 0)
        return;
    uint64_t tsc = jq_rdtsc();
    char *name = NULL, *msig = NULL, *looked_up = NULL;
    jint mods = 0;
    if ((*ag.jvmti)->GetMethodName(ag.jvmti, m, &name, &msig, NULL) != JVMTI_ERROR_NONE) {
        atomic_fetch_add(&ag_stats.method_errors, 1);
        return;
    }
    if (!cid) {
        jclass klass = NULL;
        if ((*ag.jvmti)->GetMethodDeclaringClass(ag.jvmti, m, &klass) != JVMTI_ERROR_NONE) {
            atomic_fetch_add(&ag_stats.method_errors, 1);
            dealloc(name);
            dealloc(msig);
            return;
        }
        cid = class_id_of(jni, klass, 0, NULL, &looked_up, NULL);
        csig = looked_up;
        del_ref(jni, klass);
    }
    (*ag.jvmti)->GetMethodModifiers(ag.jvmti, m, &mods);
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, (uint64_t)(uintptr_t)m);
    jm_put_u64(&b, cid);
    jm_put_str(&b, csig);
    jm_put_str(&b, name);
    jm_put_str(&b, msig);
    jm_put_u32(&b, (uint32_t)mods);
    jq_emit_buf(JM_METHOD, tsc, &b, NULL, 0);
    jm_buf_free(&b);
    atomic_fetch_add(&ag_stats.methods, 1);
    dealloc(name);
    dealloc(msig);
    dealloc(looked_up);
}

void ensure_method(JNIEnv *jni, jmethodID m)
{
    record_method(jni, m, 0, NULL);
}

/* Hidden classes are named "<binary name>/<suffix>" by the JVM; JVMTI turns
 * the '/' before the suffix into '.' in the signature (JDK 15+), e.g.
 * "LJit$$Lambda.0x0000000800c01000;" (JDK 17) or with "/0x" on some builds. */
static bool looks_hidden(const char *sig)
{
    const char *p = strrchr(sig, '/');
    const char *dot = strstr(sig, ".0x");
    if (dot && (!p || dot > p))
        return true;
    return p && strncmp(p, "/0x", 3) == 0;
}

/* Bytecode and constant pool of a class the load hook never saw (hidden
 * classes; classes whose bytes could not be rebuilt). */
static void capture_class_internals(jclass klass, uint64_t cid, jint nm, const jmethodID *ms)
{
    if (ag.caps.can_get_constant_pool) {
        jint cp_count = 0, cp_bytes = 0;
        unsigned char *cp = NULL;
        if ((*ag.jvmti)->GetConstantPool(ag.jvmti, klass, &cp_count, &cp_bytes, &cp) ==
            JVMTI_ERROR_NONE) {
            jm_buf b;
            jm_buf_init(&b);
            jm_put_u64(&b, cid);
            jm_put_u32(&b, (uint32_t)cp_count);
            jm_put_bytes(&b, cp, (uint32_t)cp_bytes);
            jq_emit_buf(JM_CONSTANT_POOL, jq_rdtsc(), &b, NULL, 0);
            jm_buf_free(&b);
            dealloc(cp);
        } else {
            atomic_fetch_add(&ag_stats.class_errors, 1);
        }
    }
    if (!ag.caps.can_get_bytecodes)
        return;
    for (jint i = 0; i < nm; i++) {
        jint n = 0, max_locals = -1;
        unsigned char *code = NULL;
        /* Abstract and native methods have no bytecode: nothing to record. */
        if ((*ag.jvmti)->GetBytecodes(ag.jvmti, ms[i], &n, &code) != JVMTI_ERROR_NONE)
            continue;
        if ((*ag.jvmti)->GetMaxLocals(ag.jvmti, ms[i], &max_locals) != JVMTI_ERROR_NONE)
            max_locals = -1;
        jm_buf b;
        jm_buf_init(&b);
        jm_put_u64(&b, (uint64_t)(uintptr_t)ms[i]);
        jm_put_i32(&b, -1); /* max_stack: JVMTI has no accessor */
        jm_put_i32(&b, max_locals);
        jm_put_bytes(&b, code, (uint32_t)n);
        jq_emit_buf(JM_METHOD_BYTECODE, jq_rdtsc(), &b, NULL, 0);
        jm_buf_free(&b);
        dealloc(code);
        atomic_fetch_add(&ag_stats.hidden_methods_bytecode, 1);
    }
}

/* JM_CLASS_PREPARE (+ JM_METHOD for each method, + internals if hidden). */
static void record_prepare(JNIEnv *jni, jclass klass, bool force_hidden)
{
    uint64_t tsc = jq_rdtsc();
    char *sig = NULL;
    class_entry before;
    uint64_t lk = 0;
    uint64_t cid = class_id_of(jni, klass, CE_PREPARED, &before, &sig, &lk);
    if (!cid || !sig) {
        atomic_fetch_add(&ag_stats.class_errors, 1);
        dealloc(sig);
        return;
    }
    /* Without a class file now and none to come (hidden, or after the
     * VMInit retransformation pass), the class's code is captured here. */
    bool hidden = force_hidden ||
                  (!(before.flags & CE_FILE) &&
                   (looks_hidden(sig) || atomic_load(&ag.retransform_done) || !ag.retransform ||
                    !ag.caps.can_retransform_classes));
    if (!hidden && !(before.flags & CE_FILE)) {
        /* Prepared before VMInit without passing the hook: the VMInit pass
         * rebuilds its class file, unless the class cannot be retransformed
         * (e.g. jdk.internal.vm.Continuation): then capture it now. */
        jboolean mod = JNI_FALSE;
        if ((*ag.jvmti)->IsModifiableClass(ag.jvmti, klass, &mod) != JVMTI_ERROR_NONE || !mod)
            hidden = true;
    }
    if (hidden)
        class_get(sig, lk, CE_HIDDEN, NULL);
    jint nm = 0;
    jmethodID *ms = NULL;
    if ((*ag.jvmti)->GetClassMethods(ag.jvmti, klass, &nm, &ms) != JVMTI_ERROR_NONE) {
        nm = 0;
        ms = NULL;
        atomic_fetch_add(&ag_stats.class_errors, 1);
    }
    for (jint i = 0; i < nm; i++)
        record_method(jni, ms[i], cid, sig);
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, cid);
    jm_put_str(&b, sig);
    jm_put_u32(&b, hidden ? JM_CLASS_HIDDEN : 0);
    jm_put_u32(&b, (uint32_t)nm);
    for (jint i = 0; i < nm; i++)
        jm_put_u64(&b, (uint64_t)(uintptr_t)ms[i]);
    jq_emit_buf(JM_CLASS_PREPARE, tsc, &b, NULL, 0);
    jm_buf_free(&b);
    atomic_fetch_add(&ag_stats.classes_prepared, 1);
    if (hidden) {
        atomic_fetch_add(&ag_stats.classes_hidden, 1);
        capture_class_internals(klass, cid, nm, ms);
    }
    dealloc(ms);
    dealloc(sig);
}

static void record_class_file(uint64_t tsc, uint64_t cid, const char *csig, uint32_t origin,
                              const unsigned char *data, uint32_t len)
{
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, cid);
    jm_put_str(&b, csig);
    jm_put_u32(&b, origin);
    jm_put_bytes(&b, data, len);
    jq_emit_buf(JM_CLASS_FILE, tsc, &b, NULL, 0);
    jm_buf_free(&b);
    atomic_fetch_add(origin == JM_CLASS_RETRANSFORM ? &ag_stats.classes_retransformed
                     : origin == JM_CLASS_IMAGE     ? &ag_stats.classes_image
                                                    : &ag_stats.classes_hook,
                     1);
}

/* Ten arguments: JVMTI fixes the ClassFileLoadHook callback's signature. */
void JNICALL on_class_file_load(jvmtiEnv *jvmti, JNIEnv *jni, jclass redefined, jobject loader,
                                const char *name, jobject pd, jint len,
                                const unsigned char *data, jint *new_len,
                                unsigned char **new_data)
{
    (void)jvmti;
    (void)pd;
    (void)new_len;
    (void)new_data;
    if (atomic_load(&ag.dead) || !data || len <= 0)
        return;
    uint64_t tsc = jq_rdtsc();
    uint64_t cid;
    char *sig = NULL;
    char local[512];
    char *heap = NULL;
    const char *csig;
    if (redefined && name) {
        /* HotSpot takes class_being_redefined from per-thread state, so a
         * class that gets loaded on this thread while another one is being
         * retransformed arrives with the other class here. The name always
         * belongs to the bytes: trust it. */
        char *rsig = NULL;
        if ((*ag.jvmti)->GetClassSignature(ag.jvmti, redefined, &rsig, NULL) == JVMTI_ERROR_NONE &&
            rsig) {
            size_t l = strlen(name), rl = strlen(rsig);
            if (!(rl == l + 2 && rsig[0] == 'L' && memcmp(rsig + 1, name, l) == 0))
                redefined = NULL;
            dealloc(rsig);
        }
    }
    if (redefined) {
        cid = class_id_of(jni, redefined, CE_FILE, NULL, &sig, NULL);
        csig = sig ? sig : "";
    } else {
        /* A new class: no class object yet, key by name and loader. An
         * unnamed class (name NULL) gets an id of its own. */
        if (name) {
            size_t l = strlen(name);
            char *s = local;
            if (l + 3 > sizeof local && !(s = heap = malloc(l + 3)))
                return;
            s[0] = 'L';
            memcpy(s + 1, name, l);
            s[l + 1] = ';';
            s[l + 2] = 0;
            csig = s;
        } else {
            csig = "";
        }
        class_entry e;
        cid = class_get(csig, loader_key(loader), name ? CE_FILE : 0, &e) ? e.id : 0;
    }
    record_class_file(tsc, cid, csig, redefined ? JM_CLASS_RETRANSFORM : JM_CLASS_LOAD_HOOK,
                      data, (uint32_t)len);
    free(heap);
    dealloc(sig);
}

void JNICALL on_class_prepare(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jclass klass)
{
    (void)jvmti;
    (void)thread;
    if (atomic_load(&ag.dead))
        return;
    record_prepare(jni, klass, false);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The JDK's runtime image, which the boot loader's classes came from, when
 * libjimage's interface is the one jimage.c calls (JDK 9 to 25: later ones
 * may change it) and no --patch-module replaced classes of the image (an
 * argument file, which may hold one, counts as one). */
static jimage *boot_image(void)
{
    char *spec = sysprop("java.vm.specification.version"), *home = sysprop("java.home");
    long feature = spec ? strtol(spec, NULL, 10) : 0;
    jimage *ji =
        feature >= 9 && feature <= 25 && !image_may_be_patched() ? ji_open(home) : NULL;
    dealloc(spec);
    dealloc(home);
    return ji;
}

/* JM_CLASS_FILE from the runtime image for a boot class ("Ljava/lang/String;")
 * loaded before the hook; false when the image does not have it. */
static bool record_image_class(jimage *image, uint64_t cid, const char *sig)
{
    size_t l = strlen(sig);
    if (!image || l < 3 || sig[0] != 'L' || sig[l - 1] != ';')
        return false;
    char *name = strndup(sig + 1, l - 2);
    size_t len = 0;
    uint8_t *bytes = name ? ji_class_bytes(image, name, &len) : NULL;
    free(name);
    if (!bytes || len > UINT32_MAX) {
        free(bytes);
        return false;
    }
    class_get(sig, 0, CE_FILE, NULL);
    record_class_file(jq_rdtsc(), cid, sig, JM_CLASS_IMAGE, bytes, (uint32_t)len);
    free(bytes);
    return true;
}

/* Classes loaded before the load hook was active (the primordial phase,
 * CDS-archived core classes): record their preparation, and their class
 * files: the boot loader's from the runtime image (origin JM_CLASS_IMAGE),
 * the others rebuilt with RetransformClasses, which the hook then sees with
 * origin JM_CLASS_RETRANSFORM. */
void record_loaded_classes(JNIEnv *jni)
{
    jint n = 0;
    jclass *cs = NULL;
    if ((*ag.jvmti)->GetLoadedClasses(ag.jvmti, &n, &cs) != JVMTI_ERROR_NONE) {
        jq_warn("GetLoadedClasses failed: classes loaded before the agent are not recorded");
        atomic_store(&ag.retransform_done, true);
        return;
    }
    jclass *todo = malloc((size_t)(n > 0 ? n : 1) * sizeof *todo);
    jint ntodo = 0;
    bool recover = ag.retransform && todo;
    bool can_rt = recover && ag.caps.can_retransform_classes;
    jimage *image = recover ? boot_image() : NULL;
    uint64_t from_image = 0;
    /* The classes already initialized: their static initializers ran before
     * this point and never run again (the projector must not explain a later
     * call by one of them). */
    jm_buf inited;
    jm_buf_init(&inited);
    uint32_t ninited = 0;
    for (jint i = 0; i < n; i++) {
        jint status = 0;
        if ((*ag.jvmti)->GetClassStatus(ag.jvmti, cs[i], &status) != JVMTI_ERROR_NONE ||
            (status & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE))) {
            del_ref(jni, cs[i]);
            cs[i] = NULL;
            continue;
        }
        char *sig = NULL;
        class_entry e;
        uint64_t lk = 0;
        if (!class_id_of(jni, cs[i], 0, &e, &sig, &lk)) {
            del_ref(jni, cs[i]);
            cs[i] = NULL;
            continue;
        }
        if (status & JVMTI_CLASS_STATUS_INITIALIZED) {
            jm_put_u64(&inited, e.id);
            ninited++;
        }
        jboolean mod = JNI_FALSE;
        if (recover && !(e.flags & CE_FILE) && !looks_hidden(sig) &&
            (*ag.jvmti)->IsModifiableClass(ag.jvmti, cs[i], &mod) == JVMTI_ERROR_NONE && mod) {
            if (lk == 0 && record_image_class(image, e.id, sig))
                from_image++;
            else if (can_rt)
                todo[ntodo++] = cs[i];
        }
        dealloc(sig);
    }
    ji_close(image);
    if (ninited && !inited.failed) {
        /* stamped after every status was read: each was initialized by then */
        jm_buf b;
        jm_buf_init(&b);
        jm_put_u32(&b, ninited);
        jm_put_raw(&b, inited.data, inited.len);
        jq_emit_buf(JM_CLASSES_INITIALIZED, jq_rdtsc(), &b, NULL, 0);
        jm_buf_free(&b);
    }
    jm_buf_free(&inited);
    if (from_image)
        jq_note("read %llu class files loaded before the hook from the runtime image",
                (unsigned long long)from_image);
    uint64_t t0 = mono_ms();
    uint64_t failed = 0;
    for (jint i = 0; i < ntodo; i += RETRANSFORM_BATCH) {
        jint k = ntodo - i < RETRANSFORM_BATCH ? ntodo - i : RETRANSFORM_BATCH;
        jvmtiError err = (*ag.jvmti)->RetransformClasses(ag.jvmti, k, todo + i);
        if (err != JVMTI_ERROR_NONE) {
            /* One bad class fails the batch: retry one by one. */
            for (jint j = 0; j < k; j++)
                if ((*ag.jvmti)->RetransformClasses(ag.jvmti, 1, todo + i + j) !=
                    JVMTI_ERROR_NONE)
                    failed++;
        }
    }
    uint64_t ms = mono_ms() - t0;
    atomic_store(&ag_stats.retransform_ms, ms);
    atomic_store(&ag_stats.retransform_failed, failed);
    atomic_store(&ag.retransform_done, true);
    jq_note("retransformed %d classes loaded before the hook in %llu ms (%llu failed)",
            (int)ntodo, (unsigned long long)ms, (unsigned long long)failed);
    if (failed)
        jq_warn("%llu classes loaded before the agent could not be rebuilt; their bytecode "
                "is recorded from the JVM instead", (unsigned long long)failed);
    if (ag.retransform && !ag.caps.can_retransform_classes)
        jq_warn("cannot retransform classes: class files of classes loaded before the agent "
                "(java.lang.*) are missing; their bytecode is recorded from the JVM instead");

    /* Preparation records for classes prepared before the hook, and bytecode
     * for those that still have no class file. */
    for (jint i = 0; i < n; i++) {
        if (!cs[i])
            continue;
        jint status = 0;
        (*ag.jvmti)->GetClassStatus(ag.jvmti, cs[i], &status);
        if (status & JVMTI_CLASS_STATUS_PREPARED) {
            class_entry e;
            char *sig = NULL;
            if (class_id_of(jni, cs[i], 0, &e, &sig, NULL)) {
                if (!(e.flags & CE_PREPARED))
                    record_prepare(jni, cs[i], false);
                else if (!(e.flags & CE_FILE) && !(e.flags & CE_HIDDEN))
                    record_prepare(jni, cs[i], true);
            }
            dealloc(sig);
        }
        del_ref(jni, cs[i]);
    }
    free(todo);
    dealloc(cs);
}
