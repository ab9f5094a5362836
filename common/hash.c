#include "common/hash.h"

#include <string.h>

/* Four independent lanes take one 8-byte word each per 32-byte stripe, so
 * the multiplies overlap; the final mix folds them with the length. */
#define MUL_A 0x9E3779B97F4A7C15ull
#define MUL_B 0xD6E8FEB86659FD93ull

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);          /* little-endian hosts only: x86-64 */
    return v;
}

static inline uint64_t step(uint64_t lane, uint64_t w)
{
    lane ^= w * MUL_B;
    lane = rotl(lane, 27) * MUL_A;
    return lane;
}

static inline void stripe(jhash *h, const uint8_t *p)
{
    h->lane[0] = step(h->lane[0], load64(p));
    h->lane[1] = step(h->lane[1], load64(p + 8));
    h->lane[2] = step(h->lane[2], load64(p + 16));
    h->lane[3] = step(h->lane[3], load64(p + 24));
}

void jhash_init(jhash *h, uint64_t seed)
{
    memset(h, 0, sizeof *h);
    for (int i = 0; i < 4; i++)
        h->lane[i] = seed + (uint64_t)(i + 1) * MUL_A;
}

void jhash_update(jhash *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    h->total += n;
    if (h->nbuf) {
        size_t take = sizeof h->buf - h->nbuf < n ? sizeof h->buf - h->nbuf : n;
        memcpy(h->buf + h->nbuf, p, take);
        h->nbuf += take;
        p += take;
        n -= take;
        if (h->nbuf < sizeof h->buf)
            return;
        stripe(h, h->buf);
        h->nbuf = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        stripe(h, p);
    memcpy(h->buf, p, n);
    h->nbuf = n;
}

static uint64_t avalanche(uint64_t x)
{
    x ^= x >> 31;
    x *= MUL_B;
    x ^= x >> 29;
    x *= MUL_A;
    x ^= x >> 32;
    return x;
}

uint64_t jhash_final(const jhash *h)
{
    uint64_t acc = h->total * MUL_A;
    for (int i = 0; i < 4; i++)
        acc = (acc ^ avalanche(h->lane[i])) * MUL_B + (uint64_t)i;
    size_t i = 0;
    for (; i + 8 <= h->nbuf; i += 8)
        acc = step(acc, load64(h->buf + i));
    uint64_t tail = 0;
    for (size_t k = 0; i + k < h->nbuf; k++)
        tail |= (uint64_t)h->buf[i + k] << (8 * k);
    acc = step(acc, tail ^ ((uint64_t)(h->nbuf - i) << 56));
    return avalanche(acc);
}

uint64_t jhash_bytes(const void *p, size_t n, uint64_t seed)
{
    jhash h;
    jhash_init(&h, seed);
    jhash_update(&h, p, n);
    return jhash_final(&h);
}
