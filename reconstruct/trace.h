/* A trace opened for reconstruction: the decoder's code model and image
 * cache, the program (classes, CFGs, call targets) and the projection index,
 * loaded once and shared by every thread's stream. One call decodes a
 * thread's PT stream and projects its events into the reconstructed flow. */
#ifndef JPT_RECONSTRUCT_TRACE_H
#define JPT_RECONSTRUCT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/decode.h"
#include "reconstruct/flow.h"
#include "reconstruct/program.h"
#include "reconstruct/project.h"

typedef struct rt_trace rt_trace;

/* Opens trace.dir. Returns NULL with a one-line message when the JVM
 * metadata cannot be read at all; lesser problems are warnings. */
rt_trace *rt_open(const char *dir, char *err, size_t errlen);
void rt_close(rt_trace *t);

/* Warnings met while opening (metadata, program, info.json), one line each. */
size_t rt_warnings(const rt_trace *t, const char *const **lines);

const dm_model *rt_model(const rt_trace *t);
rc_program *rt_program(const rt_trace *t);

/* The per-thread streams, sorted by tid; *ncpu counts per-CPU streams. */
size_t rt_threads(const rt_trace *t, const uint32_t **tids, size_t *ncpu);

/* How streams are decoded from now on (decoder/decode.h; default: one
 * thread). */
void rt_set_decode_options(rt_trace *t, const dc_options *o);

/* Where a thread's reconstructed flow goes (sink with ctx) and where the
 * projector's and the decoder's counts go (each may be NULL). */
typedef struct rt_flow_out {
    fl_sink sink;
    void *ctx;
    rp_stats *st;
    dc_stats *dst;
} rt_flow_out;

/* Decodes thread tid's stream and delivers its reconstructed flow to out.
 * Returns 0, 1 if the sink stopped it, -1 if the stream cannot be read
 * (message in err). Safe to call for different threads concurrently. */
int rt_thread_flow(rt_trace *t, uint32_t tid, const rt_flow_out *out, char *err, size_t errlen);

/* The two halves of rt_thread_flow, for callers that decode a thread's
 * stream in ranges (dc_options.from / to) into one projection: thread
 * tid's projector onto this trace's program (rp_event / rp_finish /
 * rp_free), and its stream decoded with this trace's model and code image
 * into any decoder output. rt_decode returns as dc_decode_stream_opts. */
rp_projector *rt_projector(rt_trace *t, uint32_t tid, fl_sink sink, void *ctx);
int rt_decode(rt_trace *t, uint32_t tid, const dc_output *out, const dc_options *opt,
              dc_stats *st, char *err, size_t errlen);

/* The same for a stream stored elsewhere (e.g. the emulated backend's
 * lossless copy eval/tid-<TID>.pt), decoded with this trace's metadata and
 * program: pt_path is the stream, idx_path its AUX index (NULL: no losses
 * known). */
int rt_thread_flow_path(rt_trace *t, uint32_t tid, const char *pt_path, const char *idx_path,
                        const rt_flow_out *out, char *err, size_t errlen);

/* The trace directory rt_open was given. */
const char *rt_dir(const rt_trace *t);

/* "pkg/Cls.name(sig)" of a method id (from the program, else the
 * metadata), into buf. */
const char *rt_method_name(const rt_trace *t, uint64_t method_id, char *buf, size_t len);

#endif
