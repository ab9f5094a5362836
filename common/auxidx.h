/* pt/<stream>.idx: the AUX record index of one PT stream (docs/FORMAT.md).
 * libc only: the emulated backend's plugin links it. */
#ifndef JPT_COMMON_AUXIDX_H
#define JPT_COMMON_AUXIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUXIDX_MAGIC "JPTAUX\0\0"
#define AUXIDX_VERSION 1u
#define AUXIDX_HEADER_SIZE 16u
#define AUXIDX_RECORD_SIZE 40u

/* Flags as the kernel reports them in PERF_RECORD_AUX. */
#define AUXIDX_TRUNCATED 0x1u
#define AUXIDX_OVERWRITE 0x2u
#define AUXIDX_PARTIAL 0x4u
#define AUXIDX_COLLISION 0x8u

typedef struct auxidx_rec {
    uint64_t offset, size, flags, tsc, lost_bytes;
} auxidx_rec;

/* Writer: appends whole records to an open descriptor. */
int auxidx_write_header(int fd);               /* 0 or -errno */
int auxidx_append(int fd, const auxidx_rec *r); /* 0 or -errno */

/* Reader: the whole index of one stream. */
typedef struct auxidx {
    auxidx_rec *recs;
    size_t n;
    uint64_t lost_bytes;   /* sum of lost_bytes */
    uint64_t truncations;  /* records with TRUNCATED */
    uint64_t covered_end;  /* highest offset + size: the .pt file is at least this long */
} auxidx;

/* No stream offset or loss reaches this: a record that says so is damage. */
#define AUXIDX_MAX_OFFSET (1ull << 48)

/* Parses an index held in memory; `name` starts every message. Returns 0
 * when the index is whole; 1 when it ends in a partial record (a writer cut
 * off), the records before kept and "NAME: offset N: ..." in err; -1 with
 * such a message, and nothing kept, on a bad header, a record no writer
 * makes (flags beyond the kernel's 16 bits, lost bytes without TRUNCATED, a
 * range before the end of the record before it or past AUXIDX_MAX_OFFSET),
 * or no memory. Records longer than this version's (a later minor version)
 * are accepted. */
int auxidx_parse(const uint8_t *p, size_t len, const char *name, auxidx *out, char *err,
                 size_t errlen);
/* The same on a file, which must be a regular one. */
int auxidx_load(const char *path, auxidx *out, char *err, size_t errlen);

/* A stream file of file_size bytes against its index: [0, decode) is what
 * the records delivered and the file holds; `missing` bytes the records
 * cover lie past the file's end (the file was cut); `unindexed` bytes of the
 * file lie past the last record (no record delivered them). */
typedef struct auxidx_extent {
    uint64_t decode, missing, unindexed;
} auxidx_extent;
auxidx_extent auxidx_extent_of(const auxidx *idx, uint64_t file_size);
void auxidx_free(auxidx *idx);

#endif
