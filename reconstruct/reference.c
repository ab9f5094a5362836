/* Reference-mode records -> reconstructed flow (see reference.h). */
#include "reconstruct/reference.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/jmrec.h"

typedef struct ref_frame {
    uint64_t method_id;
    int32_t last_bci;          /* last single-stepped bci in this frame: the call site of a callee */
} ref_frame;

typedef struct ref_thread {
    uint32_t tid;
    ref_frame *stack;
    uint32_t depth, cap;
} ref_thread;

/* tid -> thread, open addressing (threads are never removed: a native tid
 * reused by a later Java thread continues the same flow). */
typedef struct ref_threads {
    ref_thread *slots;
    bool *used;
    size_t cap, count;
} ref_threads;

char *ref_meta_dir(const char *dir)
{
    return jm_meta_dir(dir);
}

static jm_reader *open_reader(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a trace directory", dir);
        return NULL;
    }
    char *meta = ref_meta_dir(dir);
    if (!meta) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    jm_reader *r = jm_reader_open(meta, err, errlen);
    free(meta);
    return r;
}

int ref_trace_mode(const char *dir, char *err, size_t errlen)
{
    jm_reader *r = open_reader(dir, err, errlen);
    if (!r)
        return -1;
    jm_record rec;
    jm_rec parsed;
    int mode = -1, rc;
    while ((rc = jm_reader_next(r, &rec)) == 1) {
        if (rec.type != JM_JVM_INFO)
            continue;
        if (jm_parse(&rec, &parsed, err, errlen) < 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "%s: %s", jm_reader_path(r), why);
            break;
        }
        mode = (int)parsed.u.jvm_info.mode;
        break;
    }
    if (mode < 0 && rc == -1)
        snprintf(err, errlen, "%s", jm_reader_error(r));
    else if (mode < 0 && rc == 0)
        snprintf(err, errlen, "%s: no JVM_INFO record", jm_reader_path(r));
    jm_reader_close(r);
    return mode;
}

static size_t tid_hash(uint32_t tid, size_t cap)
{
    return (size_t)((tid * 2654435761u) & (uint32_t)(cap - 1));
}

static ref_thread *threads_find(ref_threads *t, uint32_t tid, bool *created)
{
    *created = false;
    if ((t->count + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        ref_thread *ns = calloc(ncap, sizeof *ns);
        bool *nu = calloc(ncap, sizeof *nu);
        if (!ns || !nu) {
            free(ns);
            free(nu);
            return NULL;
        }
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->used[i])
                continue;
            size_t j = tid_hash(t->slots[i].tid, ncap);
            while (nu[j])
                j = (j + 1) & (ncap - 1);
            nu[j] = true;
            ns[j] = t->slots[i];
        }
        free(t->slots);
        free(t->used);
        t->slots = ns;
        t->used = nu;
        t->cap = ncap;
    }
    size_t j = tid_hash(tid, t->cap);
    while (t->used[j]) {
        if (t->slots[j].tid == tid)
            return &t->slots[j];
        j = (j + 1) & (t->cap - 1);
    }
    t->used[j] = true;
    t->slots[j] = (ref_thread){ .tid = tid };
    t->count++;
    *created = true;
    return &t->slots[j];
}

static void threads_free(ref_threads *t)
{
    for (size_t i = 0; i < t->cap; i++)
        if (t->used[i])
            free(t->slots[i].stack);
    free(t->slots);
    free(t->used);
}

static bool push_frame(ref_thread *th, uint64_t method_id)
{
    if (th->depth == th->cap) {
        uint32_t ncap = th->cap ? th->cap * 2 : 64;
        ref_frame *ns = realloc(th->stack, ncap * sizeof *ns);
        if (!ns)
            return false;
        th->stack = ns;
        th->cap = ncap;
    }
    th->stack[th->depth++] = (ref_frame){ .method_id = method_id, .last_bci = -1 };
    return true;
}

typedef struct ref_run {
    fl_sink sink;
    void *ctx;
    ref_stats *stats;
    bool stopped;
} ref_run;

static void deliver(ref_run *run, const fl_event *ev)
{
    if (run->stopped)
        return;
    run->stats->events++;
    if (run->sink(ev, run->ctx))
        run->stopped = true;
}

int ref_flow_read(const char *dir, fl_sink sink, void *ctx, ref_stats *stats,
                  char *err, size_t errlen)
{
    ref_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    jm_reader *r = open_reader(dir, err, errlen);
    if (!r)
        return -1;
    ref_threads threads = { 0 };
    ref_run run = { .sink = sink, .ctx = ctx, .stats = stats };
    jm_record rec;
    jm_rec p;
    int rc = 0, result = 0;
    while (!run.stopped && (rc = jm_reader_next(r, &rec)) == 1) {
        if (rec.type != JM_METHOD_ENTRY && rec.type != JM_METHOD_EXIT &&
            rec.type != JM_SINGLE_STEP)
            continue;
        if (jm_parse(&rec, &p, err, errlen) < 0) {
            result = -1;
            break;
        }
        bool created;
        ref_thread *th = threads_find(&threads, p.u.ref.native_tid, &created);
        if (!th) {
            snprintf(err, errlen, "out of memory");
            result = -1;
            break;
        }
        fl_event ev = { .origin = FL_DECODED, .tid = th->tid, .tsc = rec.tsc, .bci = -1,
                        .opcode = -1 };
        if (created) {
            stats->threads++;
            ev.kind = FL_SEGMENT;
            deliver(&run, &ev);
        }
        ev.method_id = p.u.ref.method_id;
        switch (rec.type) {
        case JM_METHOD_ENTRY:
            stats->entries++;
            ev.kind = FL_CALL;
            ev.bci = th->depth ? th->stack[th->depth - 1].last_bci : -1;
            if (!push_frame(th, ev.method_id)) {
                snprintf(err, errlen, "out of memory");
                result = -1;
                break;
            }
            deliver(&run, &ev);
            break;
        case JM_METHOD_EXIT: {
            stats->exits++;
            uint32_t at = th->depth;
            while (at > 0 && th->stack[at - 1].method_id != ev.method_id)
                at--;
            if (at == 0) {
                stats->dropped_exits++;
                break;
            }
            /* Frames above the exited one left without an exit of their own. */
            while (th->depth > at) {
                fl_event unwind = ev;
                unwind.kind = FL_RETURN;
                unwind.flags = FL_F_EXCEPTION;
                unwind.method_id = th->stack[--th->depth].method_id;
                stats->unwound_frames++;
                deliver(&run, &unwind);
            }
            th->depth--;
            ev.kind = FL_RETURN;
            ev.flags = p.u.ref.by_exception ? FL_F_EXCEPTION : 0;
            deliver(&run, &ev);
            break;
        }
        case JM_SINGLE_STEP:
            stats->steps++;
            ev.kind = FL_BYTECODE;
            ev.bci = p.u.ref.bci;
            ev.count = 1;
            if (th->depth && th->stack[th->depth - 1].method_id == ev.method_id)
                th->stack[th->depth - 1].last_bci = ev.bci;
            deliver(&run, &ev);
            break;
        }
        if (result < 0)
            break;
    }
    if (result == 0 && !run.stopped && rc == -1) {
        snprintf(err, errlen, "%s", jm_reader_error(r));
        result = -1;
    }
    if (result == 0 && run.stopped)
        result = 1;
    threads_free(&threads);
    jm_reader_close(r);
    return result;
}
