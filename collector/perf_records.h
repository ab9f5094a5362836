/* perf sideband records and the per-CPU stream files they go to. Pure over
 * memory and file descriptors, so the unit tests feed synthetic records. */
#ifndef JPT_COLLECTOR_PERF_RECORDS_H
#define JPT_COLLECTOR_PERF_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The sample_id every ptrec event asks for (docs/FORMAT.md, sideband). */
#define PERF_JPT_SAMPLE_TYPE \
    (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_CPU | \
     PERF_SAMPLE_IDENTIFIER)

typedef struct perf_sample_id {
    uint32_t pid, tid;
    uint64_t time, id, stream_id;
    uint32_t cpu;
    uint64_t identifier;
} perf_sample_id;

typedef struct perf_rec {
    uint32_t type;
    uint16_t misc, size;
    bool has_sample_id;
    perf_sample_id sid;
    union {
        struct { uint32_t pid, tid; } itrace_start;
        struct { uint64_t offset, size, flags; } aux;
        struct { uint64_t id, lost; } lost;
        struct { uint32_t pid, tid; const char *comm; } comm;       /* comm points into the record */
        struct { uint32_t next_prev_pid, next_prev_tid; } switch_cpu_wide;
        struct { uint32_t pid, ppid, tid, ptid; uint64_t time; } task;   /* EXIT, FORK */
        struct {
            uint32_t pid, tid;
            uint64_t addr, len, pgoff;
            uint32_t prot, flags;
            const char *filename;                                    /* into the record */
        } mmap2;
    } u;
} perf_rec;

/* Size of the sample_id trailer for a sample_type. */
size_t perf_sample_id_size(uint64_t sample_type);

/* Parses the record at p (len bytes available). Returns its size (> 0), 0
 * when len does not hold a whole record yet, -1 on a malformed record with
 * "offset N: problem" in err (N = base_offset, the record's position in its
 * stream). Unknown record types parse with only the header and sample_id. */
long perf_rec_parse(const uint8_t *p, size_t len, uint64_t sample_type, uint64_t base_offset,
                    perf_rec *rec, char *err, size_t errlen);

/* perf time -> TSC as perf_event_mmap_page documents it (cap_user_time_zero). */
typedef struct perf_time_conv {
    bool valid;           /* cap_user_time_zero was set */
    uint64_t time_zero;
    uint32_t time_mult;
    uint16_t time_shift;
} perf_time_conv;

uint64_t perf_time_to_tsc(const perf_time_conv *tc, uint64_t time);

/* What one stream (cpu-N) has seen; the end-of-run summary prints it. */
typedef struct perf_stream_stats {
    uint64_t pt_bytes, sb_bytes, records;
    uint64_t aux_records, truncated, partial, collision, aux_lost_bytes;
    uint64_t lost_records, lost_events;   /* PERF_RECORD_LOST: records, events lost */
    uint64_t switches, itrace_starts, comms, mmaps, exits;
} perf_stream_stats;

/* The files of one stream, already open (pt_fd/idx_fd -1 without PT). */
typedef struct perf_stream {
    int pt_fd, idx_fd, sb_fd;
    uint64_t sample_type;
    perf_time_conv time;
    perf_stream_stats st;
    bool reenable;        /* an AUX record said TRUNCATED: the event is off */
} perf_stream;

/* Appends whole records of [p, p+len) to the .sb file, and an .idx record
 * for each PERF_RECORD_AUX. *used is the bytes consumed (a partial record at
 * the end is left for the next call). Returns 0, or -1 with err set (a
 * malformed record: the rest of the buffer is skipped and *used = len;
 * a write error). */
int perf_stream_sideband(perf_stream *s, const uint8_t *p, size_t len, size_t *used,
                         char *err, size_t errlen);

/* Appends PT bytes to the .pt file. 0 or -1 with err set. */
int perf_stream_pt(perf_stream *s, const uint8_t *p, size_t len, char *err, size_t errlen);

#endif
