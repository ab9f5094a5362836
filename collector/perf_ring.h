/* perf ring buffers (the data area and the AUX area) as plain memory: the
 * drain logic takes a buffer, its size and the head/tail positions, so the
 * unit tests run it on an ordinary array with any wrap-around. The backend
 * adds the memory barriers of the real mmap page around it. */
#ifndef JPT_COLLECTOR_PERF_RING_H
#define JPT_COLLECTOR_PERF_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/perf_event.h>

#include "collector/perf_records.h"

/* Receives ring bytes in order; returns 0 or -1 to stop. */
typedef int (*perf_ring_sink)(void *ctx, const uint8_t *p, size_t n);

/* Hands the bytes at positions [tail, head) of a ring of `size` bytes (a
 * power of two; positions grow without bound and wrap modulo size) to sink,
 * in at most two pieces. Returns 0, the sink's -1, or -2 with err set when
 * the positions are impossible (head behind tail, more than size bytes:
 * the producer overwrote what was not read). */
int perf_ring_drain(const uint8_t *base, uint64_t size, uint64_t tail, uint64_t head,
                    perf_ring_sink sink, void *ctx, char *err, size_t errlen);

/* Reads time_zero/time_mult/time_shift under the page's seqlock (`lock`
 * changes while the kernel updates them). valid is false without
 * cap_user_time_zero. */
void perf_read_time_conv(const volatile struct perf_event_mmap_page *pg, perf_time_conv *out);

/* The producer/consumer positions with the barriers the kernel's comment in
 * perf_event.h asks for: an acquire load of the head before reading data,
 * a release store of the tail after the data has been copied out. */
uint64_t perf_load_head(const volatile __u64 *head);
void perf_store_tail(volatile __u64 *tail, uint64_t value);

#endif
