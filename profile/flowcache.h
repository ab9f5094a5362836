/* The decoded-flow cache: a traced run's reconstructed flow (every thread's
 * fl_events after recovery, with each thread's counts) stored in
 * TRACE.DIR/cache/flow.jfc, so that the profile commands after the first
 * read it instead of decoding the trace again (docs/FORMAT.md, "cache/").
 *
 * A cache file names what it was made from: the program's sources (a change
 * to decoding or reconstruction makes every cache stale) and a hash of the
 * trace's inputs (info.json, jvm/meta.jpt, jvm/code.bin, pt/, sideband/).
 * It is written to a temporary file and renamed into place when whole, so
 * readers never see a partial one and concurrent writers leave one of
 * theirs. Its records carry checksums, and a reader checks the whole file
 * (every record, every event decoded) before it delivers the first event:
 * a damaged or foreign file is reported with its offset, never used. */
#ifndef JPT_PROFILE_FLOWCACHE_H
#define JPT_PROFILE_FLOWCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/decode.h"
#include "reconstruct/flow.h"
#include "reconstruct/project.h"
#include "recover/recover.h"

#define FC_VERSION 1

/* What a cache was made from. */
typedef struct fc_key {
    uint64_t producer;         /* the sources that decode and reconstruct (fc_producer) */
    uint64_t inputs;           /* the trace's inputs (fc_trace_inputs) */
    uint64_t options;          /* how the flow was made: 0, the profiles' pipeline */
    uint64_t trace;            /* which recording: its info.json (fc_trace_inputs) */
} fc_key;

/* The identity of this build's decoding and reconstruction sources. */
uint64_t fc_producer(void);
/* key->inputs: a hash over the names, sizes and contents of dir's inputs;
 * key->trace: of its info.json alone. Returns 0, or -1 with a message when
 * one cannot be read. */
int fc_trace_inputs(const char *dir, fc_key *key, char *err, size_t errlen);
/* dir's cache file (g_free it). */
char *fc_path(const char *dir);

/* One thread's flow ended: how, and its counts. */
typedef struct fc_thread {
    uint32_t tid;
    int32_t rc;                /* rt_thread_flow's: 0 whole, -1 unreadable (err) */
    uint64_t cpu_ns;           /* CPU time decoding it took when the cache was made */
    dc_stats dc;
    rp_stats rp;
    rv_stats rv;
    char err[1024];
} fc_thread;

/* ---- writing ------------------------------------------------------------- */

typedef struct fc_writer fc_writer;

/* A new cache for key, written next to path and renamed to it by
 * fc_writer_commit. NULL with a message when the file cannot be created. */
fc_writer *fc_writer_new(const char *path, const fc_key *key, char *err, size_t errlen);
/* A warning that opening the trace printed (jerr_warn), to print again. */
void fc_write_warning(fc_writer *w, const char *msg);
/* A line of rt_warnings(), which readers print as they choose. */
void fc_write_trace_warning(fc_writer *w, const char *line);
void fc_write_thread_begin(fc_writer *w, uint32_t tid);
/* Signature of an fl_sink; always 0 (a write error is reported at commit). */
int fc_write_event(const fl_event *ev, void *writer);
void fc_write_thread_end(fc_writer *w, const fc_thread *t);
/* Completes the file and renames it into place. Returns 0, or -1 with a
 * message (nothing is left behind). Frees w. */
int fc_writer_commit(fc_writer *w, char *err, size_t errlen);
/* Drops the file. Frees w (NULL is fine). */
void fc_writer_abort(fc_writer *w);

/* ---- reading ------------------------------------------------------------- */

typedef struct fc_reader fc_reader;

/* Opens the cache at path for key and checks all of it. Returns 1 with
 * *r set when it can be used; 0 when there is none, another build or
 * version made it, or the trace's files changed since (stale); -1 when it
 * is damaged, not a cache or another recording's (its info.json differs:
 * copied from another trace), with "PATH: offset N: what" in why. */
int fc_open(const char *path, const fc_key *key, fc_reader **r, char *why, size_t whylen);
void fc_close(fc_reader *r);

/* The warnings stored (fc_write_warning, fc_write_trace_warning). */
size_t fc_warnings(const fc_reader *r, const char *const **lines);
size_t fc_trace_warnings(const fc_reader *r, const char *const **lines);
/* The threads, in the order they were written. */
size_t fc_threads(const fc_reader *r, const fc_thread **threads);

typedef struct fc_replay {
    /* Each thread's events go to sink, between begin and end (either may be
     * NULL); want (NULL: every thread) picks the threads. */
    bool (*want)(uint32_t tid, void *ctx);
    void (*begin)(uint32_t tid, void *ctx);
    fl_sink sink;
    void (*end)(const fc_thread *t, void *ctx);
    bool decoded_only;         /* leave out recovery's events (FL_RECOVERED, FL_GUESSED) */
    void *ctx;
} fc_replay;

/* Delivers the flow. Returns 0, 1 when the sink stopped it, -1 with a
 * message when the file can no longer be read. */
int fc_replay_flow(fc_reader *r, const fc_replay *how, char *err, size_t errlen);

#endif
