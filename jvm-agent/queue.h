/* The agent's record queue: application threads enqueue, one writer thread
 * serializes to trace.dir/jvm through common/jmeta. */
#ifndef JPT_AGENT_QUEUE_H
#define JPT_AGENT_QUEUE_H

#include <stdarg.h>
#include <stdint.h>

#include "common/jmeta.h"

/* The same clock as PT TSC packets. */
static inline uint64_t jq_rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/* Enqueues one record (payload and code are copied). Safe from any thread,
 * lock-free; when the queue is over its byte budget it waits briefly and
 * then counts the record as dropped (reported at shutdown), never silently.
 * For code-carrying types the payload starts with the code triple and `code`
 * holds code_len bytes (see common/jmeta.h). */
void jq_emit(uint16_t type, uint64_t tsc, const void *payload, uint32_t len,
             const void *code, uint64_t code_len);
/* Same with a jm_buf payload; frees nothing. */
void jq_emit_buf(uint16_t type, uint64_t tsc, const jm_buf *b,
                 const void *code, uint64_t code_len);

/* One warning line: to stderr as "jpt: ...", to jvm/agent.log, and as a
 * JM_WARNING record. */
void jq_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- lifecycle (called by the agent, not by event callbacks) ------------- */

/* Opens the stream in jvm_dir (which must exist: meta.jpt, code.bin and
 * agent.log) and starts the writer thread. budget_bytes bounds the bytes
 * waiting in the queue (0: the default, 256 MiB). Returns 0, or -1 with a
 * one-line reason in err; then every jq_* call is a harmless no-op. */
int jq_start(const char *jvm_dir, uint64_t start_tsc, uint64_t budget_bytes,
             char *err, size_t errlen);

/* True between a successful jq_start and jq_shutdown. */
int jq_running(void);

/* Stops accepting records, drains everything queued, appends one JM_STATS
 * record (the caller's n counters followed by the queue's own) and JM_END,
 * and closes the stream. Waits at most timeout_ms for the drain; if the
 * writer cannot finish in time the stream is left without JM_END (readers
 * then see an unclean end) and a warning says so. Idempotent. */
void jq_shutdown(const char *const *names, const uint64_t *values, size_t n,
                 unsigned timeout_ms);

/* A line for jvm/agent.log only (progress notes that are not warnings). */
void jq_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Warnings issued so far (also reported in the stats). */
uint64_t jq_warnings(void);

#endif
