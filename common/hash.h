/* A fast 64-bit hash of byte strings, streamed. Not cryptographic: it tells
 * an input that changed from the one a derived file was made from, and a
 * damaged block from a whole one. */
#ifndef JPT_COMMON_HASH_H
#define JPT_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct jhash {
    uint64_t lane[4];
    uint64_t total;            /* bytes hashed */
    uint8_t buf[32];           /* a partial stripe */
    size_t nbuf;
} jhash;

void jhash_init(jhash *h, uint64_t seed);
void jhash_update(jhash *h, const void *p, size_t n);
/* The hash of everything given so far (h can go on). */
uint64_t jhash_final(const jhash *h);
/* All of p at once. */
uint64_t jhash_bytes(const void *p, size_t n, uint64_t seed);

#endif
