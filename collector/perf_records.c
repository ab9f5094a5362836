/* perf sideband records (perf_records.h). The records come from the kernel,
 * but a bad one (a size that does not cover its fields, a string without its
 * terminator) must give a message with its offset, not a wild read. */
#include "collector/perf_records.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <linux/perf_event.h>

#include "common/auxidx.h"
#include "common/fileio.h"

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

size_t perf_sample_id_size(uint64_t sample_type)
{
    size_t n = 0;
    if (sample_type & PERF_SAMPLE_TID) n += 8;
    if (sample_type & PERF_SAMPLE_TIME) n += 8;
    if (sample_type & PERF_SAMPLE_ID) n += 8;
    if (sample_type & PERF_SAMPLE_STREAM_ID) n += 8;
    if (sample_type & PERF_SAMPLE_CPU) n += 8;
    if (sample_type & PERF_SAMPLE_IDENTIFIER) n += 8;
    return n;
}

/* The kernel's order (perf_event__output_id_sample). */
static void parse_sample_id(const uint8_t *p, uint64_t sample_type, perf_sample_id *sid)
{
    memset(sid, 0, sizeof *sid);
    if (sample_type & PERF_SAMPLE_TID) { sid->pid = rd32(p); sid->tid = rd32(p + 4); p += 8; }
    if (sample_type & PERF_SAMPLE_TIME) { sid->time = rd64(p); p += 8; }
    if (sample_type & PERF_SAMPLE_ID) { sid->id = rd64(p); p += 8; }
    if (sample_type & PERF_SAMPLE_STREAM_ID) { sid->stream_id = rd64(p); p += 8; }
    if (sample_type & PERF_SAMPLE_CPU) { sid->cpu = rd32(p); p += 8; }
    if (sample_type & PERF_SAMPLE_IDENTIFIER) sid->identifier = rd64(p);
}

/* The fixed part of each record type ptrec interprets (after the header). */
static size_t body_min(uint32_t type)
{
    switch (type) {
    case PERF_RECORD_ITRACE_START: return 8;
    case PERF_RECORD_AUX: return 24;
    case PERF_RECORD_LOST: return 16;
    case PERF_RECORD_COMM: return 8 + 1;              /* pid, tid, at least the NUL */
    case PERF_RECORD_SWITCH: return 0;
    case PERF_RECORD_SWITCH_CPU_WIDE: return 8;
    case PERF_RECORD_EXIT:
    case PERF_RECORD_FORK: return 24;
    case PERF_RECORD_MMAP2: return 64 + 1;            /* up to flags, then the filename */
    default: return 0;
    }
}

static const char *type_name(uint32_t type)
{
    switch (type) {
    case PERF_RECORD_ITRACE_START: return "ITRACE_START";
    case PERF_RECORD_AUX: return "AUX";
    case PERF_RECORD_LOST: return "LOST";
    case PERF_RECORD_COMM: return "COMM";
    case PERF_RECORD_SWITCH: return "SWITCH";
    case PERF_RECORD_SWITCH_CPU_WIDE: return "SWITCH_CPU_WIDE";
    case PERF_RECORD_EXIT: return "EXIT";
    case PERF_RECORD_FORK: return "FORK";
    case PERF_RECORD_MMAP2: return "MMAP2";
    default: return "record";
    }
}

/* A NUL-terminated string in [p, end): NULL when it has no terminator. */
static const char *string_in(const uint8_t *p, const uint8_t *end)
{
    return memchr(p, '\0', (size_t)(end - p)) ? (const char *)p : NULL;
}

long perf_rec_parse(const uint8_t *p, size_t len, uint64_t sample_type, uint64_t base_offset,
                    perf_rec *rec, char *err, size_t errlen)
{
    if (len < sizeof(struct perf_event_header)) return 0;
    memset(rec, 0, sizeof *rec);
    rec->type = rd32(p);
    uint16_t misc, size;
    memcpy(&misc, p + 4, 2);
    memcpy(&size, p + 6, 2);
    rec->misc = misc;
    rec->size = size;
    if (size < sizeof(struct perf_event_header) || size % 8 != 0) {
        snprintf(err, errlen, "offset %" PRIu64 ": perf record of type %" PRIu32 " has size %u "
                 "(not a multiple of 8 of at least 8)", base_offset, rec->type, size);
        return -1;
    }
    if (len < size) return 0;
    /* The kernel's own records (type < PERF_RECORD_USER_TYPE_START) carry a
     * sample_id with sample_id_all; ptrec sets it on every event. */
    size_t sid_size = rec->type < PERF_RECORD_MAX ? perf_sample_id_size(sample_type) : 0;
    size_t body = size - sizeof(struct perf_event_header);
    if (body < sid_size + body_min(rec->type)) {
        snprintf(err, errlen, "offset %" PRIu64 ": PERF_RECORD_%s of %u bytes is too short for "
                 "its fields", base_offset, type_name(rec->type), size);
        return -1;
    }
    const uint8_t *b = p + sizeof(struct perf_event_header);
    const uint8_t *body_end = p + size - sid_size;
    if (sid_size) {
        rec->has_sample_id = true;
        parse_sample_id(body_end, sample_type, &rec->sid);
    }
    switch (rec->type) {
    case PERF_RECORD_ITRACE_START:
        rec->u.itrace_start.pid = rd32(b);
        rec->u.itrace_start.tid = rd32(b + 4);
        break;
    case PERF_RECORD_AUX:
        rec->u.aux.offset = rd64(b);
        rec->u.aux.size = rd64(b + 8);
        rec->u.aux.flags = rd64(b + 16);
        if (rec->u.aux.size > UINT64_MAX - rec->u.aux.offset) {
            snprintf(err, errlen, "offset %" PRIu64 ": PERF_RECORD_AUX range overflows",
                     base_offset);
            return -1;
        }
        break;
    case PERF_RECORD_LOST:
        rec->u.lost.id = rd64(b);
        rec->u.lost.lost = rd64(b + 8);
        break;
    case PERF_RECORD_COMM:
        rec->u.comm.pid = rd32(b);
        rec->u.comm.tid = rd32(b + 4);
        rec->u.comm.comm = string_in(b + 8, body_end);
        if (!rec->u.comm.comm) {
            snprintf(err, errlen, "offset %" PRIu64 ": PERF_RECORD_COMM name is not terminated",
                     base_offset);
            return -1;
        }
        break;
    case PERF_RECORD_SWITCH_CPU_WIDE:
        rec->u.switch_cpu_wide.next_prev_pid = rd32(b);
        rec->u.switch_cpu_wide.next_prev_tid = rd32(b + 4);
        break;
    case PERF_RECORD_EXIT:
    case PERF_RECORD_FORK:
        rec->u.task.pid = rd32(b);
        rec->u.task.ppid = rd32(b + 4);
        rec->u.task.tid = rd32(b + 8);
        rec->u.task.ptid = rd32(b + 12);
        rec->u.task.time = rd64(b + 16);
        break;
    case PERF_RECORD_MMAP2:
        rec->u.mmap2.pid = rd32(b);
        rec->u.mmap2.tid = rd32(b + 4);
        rec->u.mmap2.addr = rd64(b + 8);
        rec->u.mmap2.len = rd64(b + 16);
        rec->u.mmap2.pgoff = rd64(b + 24);
        /* b + 32: maj, min, ino, ino_generation (or a build id): 24 bytes */
        rec->u.mmap2.prot = rd32(b + 56);
        rec->u.mmap2.flags = rd32(b + 60);
        rec->u.mmap2.filename = string_in(b + 64, body_end);
        if (!rec->u.mmap2.filename) {
            snprintf(err, errlen, "offset %" PRIu64 ": PERF_RECORD_MMAP2 file name is not "
                     "terminated", base_offset);
            return -1;
        }
        break;
    default:
        break;
    }
    return (long)size;
}

uint64_t perf_time_to_tsc(const perf_time_conv *tc, uint64_t time)
{
    if (!tc->valid || tc->time_mult == 0 || tc->time_shift >= 64) return time;
    /* The inverse of the kernel's tsc -> time, split to avoid overflow
     * (tools/perf/util/tsc.c does the same). */
    uint64_t t = time - tc->time_zero;
    uint64_t quot = t / tc->time_mult, rem = t % tc->time_mult;
    return (quot << tc->time_shift) + (rem << tc->time_shift) / tc->time_mult;
}

static int write_out(int fd, const void *p, size_t n, const char *what, char *err,
                     size_t errlen)
{
    int rc = jpt_write_all(fd, p, n);
    if (rc != 0) {
        snprintf(err, errlen, "cannot write the %s file: %s", what, strerror(-rc));
        return -1;
    }
    return 0;
}

static void account(perf_stream *s, const perf_rec *r)
{
    perf_stream_stats *st = &s->st;
    st->records++;
    switch (r->type) {
    case PERF_RECORD_AUX:
        st->aux_records++;
        if (r->u.aux.flags & PERF_AUX_FLAG_TRUNCATED) st->truncated++;
        if (r->u.aux.flags & PERF_AUX_FLAG_PARTIAL) st->partial++;
        if (r->u.aux.flags & PERF_AUX_FLAG_COLLISION) st->collision++;
        break;
    case PERF_RECORD_LOST:
        st->lost_records++;
        st->lost_events += r->u.lost.lost;
        break;
    case PERF_RECORD_SWITCH:
    case PERF_RECORD_SWITCH_CPU_WIDE: st->switches++; break;
    case PERF_RECORD_ITRACE_START: st->itrace_starts++; break;
    case PERF_RECORD_COMM: st->comms++; break;
    case PERF_RECORD_MMAP2: st->mmaps++; break;
    case PERF_RECORD_EXIT: st->exits++; break;
    default: break;
    }
}

int perf_stream_sideband(perf_stream *s, const uint8_t *p, size_t len, size_t *used,
                         char *err, size_t errlen)
{
    size_t off = 0;
    *used = 0;
    while (off < len) {
        perf_rec r;
        long n = perf_rec_parse(p + off, len - off, s->sample_type, s->st.sb_bytes, &r, err,
                                errlen);
        if (n == 0) break;
        if (n < 0) {
            /* Nothing after a bad size can be framed: drop the rest. */
            *used = len;
            return -1;
        }
        if (write_out(s->sb_fd, p + off, (size_t)n, "sideband", err, errlen) != 0) {
            *used = off;
            return -1;
        }
        s->st.sb_bytes += (uint64_t)n;
        account(s, &r);
        if (r.type == PERF_RECORD_AUX) {
            /* The AUX area is copied whole and in order, so its positions
             * are the .pt file's offsets. The kernel does not say how much a
             * truncation lost: 0 = unknown (docs/FORMAT.md). */
            if (r.u.aux.flags & PERF_AUX_FLAG_TRUNCATED) s->reenable = true;
            if (s->idx_fd >= 0) {
                auxidx_rec x = {
                    .offset = r.u.aux.offset, .size = r.u.aux.size, .flags = r.u.aux.flags,
                    .tsc = r.has_sample_id ? perf_time_to_tsc(&s->time, r.sid.time) : 0,
                    .lost_bytes = 0,
                };
                int rc = auxidx_append(s->idx_fd, &x);
                if (rc != 0) {
                    snprintf(err, errlen, "cannot write the AUX index: %s", strerror(-rc));
                    *used = off + (size_t)n;
                    return -1;
                }
            }
        }
        off += (size_t)n;
    }
    *used = off;
    return 0;
}

int perf_stream_pt(perf_stream *s, const uint8_t *p, size_t len, char *err, size_t errlen)
{
    if (s->pt_fd < 0 || len == 0) return 0;
    if (write_out(s->pt_fd, p, len, "PT", err, errlen) != 0) return -1;
    s->st.pt_bytes += len;
    return 0;
}
