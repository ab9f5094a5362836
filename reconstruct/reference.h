/* The reference flow: the agent's reference mode (METHOD_ENTRY / METHOD_EXIT
 * per native thread, SINGLE_STEP under -Xint) replayed as the reconstructed
 * flow of reconstruct/flow.h, so that profiles of a traced run and of its
 * instrumentation reference come out of one code path.
 *
 * Each native thread gets one FL_SEGMENT (depth 0, seq 0) at its first
 * event, then FL_CALL / FL_RETURN / FL_BYTECODE (count 1) in record order,
 * each with the record's tsc. The call site of a FL_CALL is the caller's
 * last single-stepped bci (the invoke), -1 without single steps.
 *
 * JVMTI reports the exit of frames entered before the agent started (the
 * first records of a thread may be exits of frames never entered): such
 * exits are dropped. An exit that names a frame deeper than the top closes
 * the frames above it first (marked FL_F_EXCEPTION). Memory: one shadow
 * stack per live thread. */
#ifndef JPT_RECONSTRUCT_REFERENCE_H
#define JPT_RECONSTRUCT_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "reconstruct/flow.h"

typedef struct ref_stats {
    uint64_t entries;          /* METHOD_ENTRY records */
    uint64_t exits;            /* METHOD_EXIT records */
    uint64_t steps;            /* SINGLE_STEP records */
    uint64_t dropped_exits;    /* exits of frames entered before recording began */
    uint64_t unwound_frames;   /* frames closed by an exit naming a deeper frame */
    uint64_t threads;          /* native threads seen */
    uint64_t events;           /* fl_events delivered */
} ref_stats;

/* The agent mode of the trace in dir (a trace directory or its jvm/
 * folder): 0 trace, 1 reference (enum jm_mode); -1 with a one-line message
 * in err when the metadata cannot be read or has no JVM_INFO. */
int ref_trace_mode(const char *dir, char *err, size_t errlen);

/* Replays dir's reference records into sink. Returns 0 when the whole
 * stream was delivered, 1 when sink asked to stop, -1 on unreadable or bad
 * input (err says what and where; events before it were delivered). stats
 * may be NULL. */
int ref_flow_read(const char *dir, fl_sink sink, void *ctx, ref_stats *stats,
                  char *err, size_t errlen);

/* The directory holding meta.jpt for a trace directory: jm_meta_dir.
 * Returns a malloc'd string. */
char *ref_meta_dir(const char *dir);

#endif
