#include "common/auxidx.h"

#include "common/fileio.h"

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
    for (size_t i = 0; i < count; i++, off += rsize) {
        auxidx_rec *r = &out->recs[out->n];
        r->offset = get64(p + off);
        r->size = get64(p + off + 8);
        r->flags = get64(p + off + 16);
        r->tsc = get64(p + off + 24);
        r->lost_bytes = get64(p + off + 32);
        if (r->size > UINT64_MAX - r->offset) {
            snprintf(err, errlen, "%s: offset %zu: AUX range overflows; %zu records kept", name,
                     off, out->n);
            return 1;
        }
        out->n++;
        out->lost_bytes += r->lost_bytes;
        if (r->flags & AUXIDX_TRUNCATED)
            out->truncations++;
        if (r->offset + r->size > out->covered_end)
            out->covered_end = r->offset + r->size;
    }
    if (off != len) {
        snprintf(err, errlen, "%s: offset %zu: partial record (%zu of %u bytes) ignored", name,
                 off, len - off, rsize);
        return 1;
    }
    return 0;
}

int auxidx_load(const char *path, auxidx *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    /* 40 bytes per AUX record: a file beyond 4 GiB is not an index. */
    if (fseeko(f, 0, SEEK_END) < 0 || ftello(f) < 0 || ftello(f) > (off_t)1 << 32) {
        snprintf(err, errlen, "%s: offset 0: implausible size for an AUX index", path);
        fclose(f);
        return -1;
    }
    size_t len = (size_t)ftello(f);
    rewind(f);
    uint8_t *p = malloc(len ? len : 1);
    if (!p || fread(p, 1, len, f) != len) {
        snprintf(err, errlen, "%s: cannot read: %s", path, p ? "short read" : "out of memory");
        free(p);
        fclose(f);
        return -1;
    }
    fclose(f);
    int rc = auxidx_parse(p, len, path, out, err, errlen);
    free(p);
    return rc;
}

void auxidx_free(auxidx *idx)
{
    free(idx->recs);
    memset(idx, 0, sizeof *idx);
}
