#include "common/auxidx.h"

#include <errno.h>
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

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int auxidx_write_header(int fd)
{
    uint8_t h[AUXIDX_HEADER_SIZE] = { 0 };
    memcpy(h, AUXIDX_MAGIC, 8);
    h[8] = AUXIDX_VERSION;
    h[12] = AUXIDX_RECORD_SIZE;
    return write_all(fd, h, sizeof h);
}

int auxidx_append(int fd, const auxidx_rec *r)
{
    uint8_t b[AUXIDX_RECORD_SIZE];
    put64(b, r->offset);
    put64(b + 8, r->size);
    put64(b + 16, r->flags);
    put64(b + 24, r->tsc);
    put64(b + 32, r->lost_bytes);
    return write_all(fd, b, sizeof b);
}

int auxidx_load(const char *path, auxidx *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    uint8_t h[AUXIDX_HEADER_SIZE];
    size_t got = fread(h, 1, sizeof h, f);
    if (got < sizeof h || memcmp(h, AUXIDX_MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: offset 0: not a jpt AUX index (%s)", path,
                 got < sizeof h ? "too short" : "bad magic");
        fclose(f);
        return -1;
    }
    uint32_t version = (uint32_t)(h[8] | h[9] << 8 | h[10] << 16 | (uint32_t)h[11] << 24);
    uint32_t rsize = (uint32_t)(h[12] | h[13] << 8 | h[14] << 16 | (uint32_t)h[15] << 24);
    if (version != AUXIDX_VERSION) {
        snprintf(err, errlen, "%s: offset 8: AUX index version %u, this reader reads %u", path,
                 version, AUXIDX_VERSION);
        fclose(f);
        return -1;
    }
    if (rsize < AUXIDX_RECORD_SIZE || rsize > 4096) {
        snprintf(err, errlen, "%s: offset 12: record size %u is invalid", path, rsize);
        fclose(f);
        return -1;
    }
    uint8_t *rec = malloc(rsize);
    size_t cap = 0;
    int rc = 0;
    uint64_t off = AUXIDX_HEADER_SIZE;
    for (;;) {
        got = fread(rec, 1, rsize, f);
        if (got == 0)
            break;
        if (got < rsize) {
            snprintf(err, errlen, "%s: offset %llu: partial record (%zu of %u bytes) ignored",
                     path, (unsigned long long)off, got, rsize);
            rc = 1;
            break;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 64;
            auxidx_rec *n = realloc(out->recs, cap * sizeof *n);
            if (!n) {
                snprintf(err, errlen, "%s: out of memory", path);
                rc = -1;
                break;
            }
            out->recs = n;
        }
        auxidx_rec *r = &out->recs[out->n++];
        r->offset = get64(rec);
        r->size = get64(rec + 8);
        r->flags = get64(rec + 16);
        r->tsc = get64(rec + 24);
        r->lost_bytes = get64(rec + 32);
        out->lost_bytes += r->lost_bytes;
        if (r->flags & AUXIDX_TRUNCATED)
            out->truncations++;
        off += rsize;
    }
    free(rec);
    fclose(f);
    if (rc < 0)
        auxidx_free(out);
    return rc;
}

void auxidx_free(auxidx *idx)
{
    free(idx->recs);
    memset(idx, 0, sizeof *idx);
}
