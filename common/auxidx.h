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
} auxidx;

/* Loads path. A bad header is an error (-1, message "PATH: offset N: ..." in
 * err); a partial last record is dropped with a warning in err and 1 is
 * returned; 0 when the file is complete. */
int auxidx_load(const char *path, auxidx *out, char *err, size_t errlen);
void auxidx_free(auxidx *idx);

#endif
