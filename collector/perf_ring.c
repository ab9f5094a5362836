/* perf ring buffers as plain memory (perf_ring.h). */
#include "collector/perf_ring.h"

#include <inttypes.h>
#include <stdio.h>

int perf_ring_drain(const uint8_t *base, uint64_t size, uint64_t tail, uint64_t head,
                    perf_ring_sink sink, void *ctx, char *err, size_t errlen)
{
    if (size == 0 || (size & (size - 1)) != 0) {
        snprintf(err, errlen, "ring size %" PRIu64 " is not a power of two", size);
        return -2;
    }
    if (head < tail) {
        snprintf(err, errlen, "ring head %" PRIu64 " is behind its tail %" PRIu64, head, tail);
        return -2;
    }
    if (head - tail > size) {
        snprintf(err, errlen, "ring head %" PRIu64 " is %" PRIu64 " bytes ahead of its tail "
                 "%" PRIu64 ", more than the ring's %" PRIu64, head, head - tail, tail, size);
        return -2;
    }
    uint64_t left = head - tail;
    uint64_t pos = tail & (size - 1);
    while (left) {
        uint64_t piece = size - pos < left ? size - pos : left;
        if (sink(ctx, base + pos, (size_t)piece) != 0) return -1;
        left -= piece;
        pos = (pos + piece) & (size - 1);
    }
    return 0;
}

void perf_read_time_conv(const volatile struct perf_event_mmap_page *pg, perf_time_conv *out)
{
    uint32_t seq;
    /* Bounded: a page whose count stays odd is not being updated, it is broken. */
    int tries = 100000;
    do {
        seq = __atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE);
        out->valid = pg->cap_user_time_zero;
        out->time_zero = pg->time_zero;
        out->time_mult = pg->time_mult;
        out->time_shift = pg->time_shift;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        /* an odd count or a change: the kernel was writing, read again */
    } while (((seq & 1) || __atomic_load_n(&pg->lock, __ATOMIC_RELAXED) != seq) && --tries > 0);
    if (tries == 0) out->valid = false;
}

uint64_t perf_load_head(const volatile __u64 *head)
{
    return __atomic_load_n(head, __ATOMIC_ACQUIRE);
}

void perf_store_tail(volatile __u64 *tail, uint64_t value)
{
    __atomic_store_n(tail, value, __ATOMIC_RELEASE);
}
