/* What the JVMTI side of the agent shares between its files: agent.c (events of
 * compiled code, threads, the reference mode, the VM's life, Agent_OnLoad), classes.c
 * (classes and methods) and options.c (options and setup). All hidden: libjpt.so
 * exports only Agent_OnLoad and Agent_OnUnload. */
#ifndef JPT_AGENT_AGENT_JVMTI_H
#define JPT_AGENT_AGENT_JVMTI_H

#include <jvmti.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#pragma GCC visibility push(hidden)

/* ---- state (agent.c) ---------------------------------------------------------- */

typedef struct agent_state {
    JavaVM *vm;
    jvmtiEnv *jvmti;
    int mode;
    char options[1024];
    char dir[PATH_MAX];
    unsigned patch_ms, close_ms;
    bool retransform;
    uint64_t budget;
    bool tracing;              /* the stream is open and events are on */
    bool hs_ok;
    _Atomic bool live;         /* VMInit has run */
    _Atomic bool retransform_done;
    _Atomic bool dead;         /* VMDeath or unload began */
    int handshake_result;      /* 0 none, 1 ok, 2 refused, 3 timeout/error */
    int dns_flag;              /* DebugNonSafepoints: 1 on, 0 explicitly off, 2 default */
    bool xint;
    jvmtiCapabilities caps;
    jfieldID thread_tid_field; /* java.lang.Thread.tid */
    jmethodID thread_getid;    /* fallback: Thread.getId() */
    _Atomic bool thread_ids_resolved;
    pthread_mutex_t thread_ids_lock;
} agent_state;
extern agent_state ag;

/* The counters of the agent's STATS record. */
typedef struct agent_stats {
    _Atomic uint64_t nmethods, nmethod_dups, nmethod_code_bytes, nmethod_pcs, nmethod_frames,
        nmethods_without_map, nmethod_unloads, dynamic_code, dynamic_code_bytes, methods,
        method_errors, classes_hook, classes_retransformed, classes_image, retransform_failed,
        retransform_ms, classes_prepared, classes_hidden, hidden_methods_bytecode,
        class_errors, threads_started, threads_ended, threads_at_init, method_entries,
        method_exits, single_steps;
} agent_stats;
extern agent_stats ag_stats;

/* ---- JVMTI helpers (agent.c) -------------------------------------------------- */

/* The calling thread's kernel tid. */
uint32_t my_tid(void);
/* Frees what JVMTI allocated (NULL: nothing). */
void dealloc(void *p);
/* The name of a JVMTI error, for messages. */
const char *errname(jvmtiError e);
void del_ref(JNIEnv *jni, jobject o);
/* A system property of the JVM, JVMTI-allocated (dealloc it); NULL if unset. */
char *sysprop(const char *name);

/* ---- classes and methods (classes.c) ------------------------------------------ */

/* Records JM_METHOD for m the first time any record names it. */
void ensure_method(JNIEnv *jni, jmethodID m);
/* The ClassFileLoadHook and ClassPrepare events. */
void JNICALL on_class_file_load(jvmtiEnv *jvmti, JNIEnv *jni, jclass redefined,
                                jobject loader, const char *name, jobject pd, jint len,
                                const unsigned char *data, jint *new_len,
                                unsigned char **new_data);
void JNICALL on_class_prepare(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jclass klass);
/* At VMInit: the classes loaded before the load hook was active. */
void record_loaded_classes(JNIEnv *jni);

/* ---- options and setup (options.c) -------------------------------------------- */

/* The options' help text. */
void print_usage(FILE *f);
/* Returns 0, 1 for "help", -1 on a bad option (message printed). */
int parse_options(const char *opts);
/* ag.dir from out=, else $JPT_TRACE_DIR, else ./jpt-<pid>.trace. */
void default_dir(void);
int mkdir_p(const char *path);
/* Takes an exclusive lock on dir/agent.lock for the life of the process.
 * False only if another live process holds it. */
bool lock_dir(const char *dir);
/* DebugNonSafepoints as the VM options set it: 1 on, 0 explicitly off, 2 default. */
int debug_non_safepoints(void);
/* Whether classes of the runtime image may have been replaced (--patch-module). */
bool image_may_be_patched(void);
/* Requests each wanted capability that the JVM can give into ag.caps. */
void add_capabilities(void);

#pragma GCC visibility pop

#endif
