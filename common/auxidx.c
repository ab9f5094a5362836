#include "common/auxidx.h"

#include "common/fileio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}


int auxidx_write_header(int fd)
{
    uint8_t h[AUXIDX_HEADER_SIZE] = { 0 };
    memcpy(h, AUXIDX_MAGIC, 8);
    h[8] = AUXIDX_VERSION;
    h[12] = AUXIDX_RECORD_SIZE;
    return jpt_write_all(fd, h, sizeof h);
}

int auxidx_append(int fd, const auxidx_rec *r)
{
    uint8_t b[AUXIDX_RECORD_SIZE];
    put64(b, r->offset);
    put64(b + 8, r->size);
    put64(b + 16, r->flags);
    put64(b + 24, r->tsc);
    put64(b + 32, r->lost_bytes);
    return jpt_write_all(fd, b, sizeof b);
}

int auxidx_parse(const uint8_t *p, size_t len, const char *name, auxidx *out, char *err,
                 size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len < AUXIDX_HEADER_SIZE || memcmp(p, AUXIDX_MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: offset 0: not a jpt AUX index (%s)", name,
                 len < AUXIDX_HEADER_SIZE ? "too short" : "bad magic");
        return -1;
    }
    uint32_t version = (uint32_t)get64(p + 8);
    uint32_t rsize = (uint32_t)(get64(p + 8) >> 32);
    if (version != AUXIDX_VERSION) {
        snprintf(err, errlen, "%s: offset 8: AUX index version %u, this reader reads %u", name,
                 version, AUXIDX_VERSION);
        return -1;
    }
    if (rsize < AUXIDX_RECORD_SIZE || rsize > 4096) {
        snprintf(err, errlen, "%s: offset 12: record size %u is invalid", name, rsize);
        return -1;
    }
    size_t count = (len - AUXIDX_HEADER_SIZE) / rsize;
    out->recs = count ? malloc(count * sizeof *out->recs) : NULL;
    if (count && !out->recs) {
        snprintf(err, errlen, "%s: out of memory for %zu records", name, count);
        return -1;
    }
    size_t off = AUXIDX_HEADER_SIZE;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < count; i++, off += rsize) {
        auxidx_rec *r = &out->recs[out->n];
        r->offset = get64(p + off);
        r->size = get64(p + off + 8);
        r->flags = get64(p + off + 16);
        r->tsc = get64(p + off + 24);
        r->lost_bytes = get64(p + off + 32);
        const char *bad = NULL;
        if (r->offset > AUXIDX_MAX_OFFSET || r->size > AUXIDX_MAX_OFFSET - r->offset)
            bad = "range past 2^48";
        else if (r->offset < prev_end)
            bad = "range starts before the end of the record before it";
        else if (r->flags > 0xffff)
            bad = "flags are not the kernel's AUX flags";
        else if (r->lost_bytes && !(r->flags & AUXIDX_TRUNCATED))
            bad = "lost bytes without TRUNCATED";
        else if (r->lost_bytes > AUXIDX_MAX_OFFSET)
            bad = "lost bytes past 2^48";
        if (bad) {
            snprintf(err, errlen, "%s: offset %zu: bad record %zu (offset %" PRIu64 ", size %"
                     PRIu64 ", flags 0x%" PRIx64 ", lost %" PRIu64 "): %s", name, off, i,
                     r->offset, r->size, r->flags, r->lost_bytes, bad);
            auxidx_free(out);
            return -1;
        }
        prev_end = r->offset + r->size;
        out->n++;
        out->lost_bytes += r->lost_bytes;
        if (r->flags & AUXIDX_TRUNCATED)
            out->truncations++;
        if (prev_end > out->covered_end)
            out->covered_end = prev_end;
    }
    if (off != len) {
        snprintf(err, errlen, "%s: offset %zu: partial record (%zu of %u bytes): the index "
                 "was cut", name, off, len - off, rsize);
        return 1;
    }
    return 0;
}

int auxidx_load(const char *path, auxidx *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *p;
    size_t len;
    /* 40 bytes per AUX record: a file beyond 4 GiB is not an index. */
    if (jpt_read_small_file(path, (size_t)1 << 32, &p, &len, err, errlen) < 0)
        return -1;
    int rc = auxidx_parse((const uint8_t *)p, len, path, out, err, errlen);
    free(p);
    return rc;
}

void auxidx_free(auxidx *idx)
{
    free(idx->recs);
    memset(idx, 0, sizeof *idx);
}

auxidx_extent auxidx_extent_of(const auxidx *idx, uint64_t file_size)
{
    auxidx_extent e = { 0 };
    uint64_t end = idx->covered_end;
    e.decode = file_size < end ? file_size : end;
    e.missing = end > file_size ? end - file_size : 0;
    e.unindexed = file_size > end ? file_size - end : 0;
    return e;
}
