#include "common/seqalign.h"

#include <stdlib.h>
#include <string.h>

static uint32_t gram_hash(const uint64_t *p)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < SEQ_RESYNC_GRAM; i++)
        h = (h ^ (uint32_t)(p[i] ^ p[i] >> 32)) * 16777619u;
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* First position >= from of a gram with hash h (idx: sorted hash << 32 |
 * position), or UINT64_MAX. */
static uint64_t next_gram(const uint64_t *idx, size_t n, uint32_t h, uint64_t from)
{
    uint64_t want = (uint64_t)h << 32 | from;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idx[mid] < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && idx[lo] >> 32 == h)
        return (uint32_t)idx[lo];
    return UINT64_MAX;
}

uint64_t seq_aligned(const uint64_t *a, size_t n, const uint64_t *b, size_t m, uint8_t *matched)
{
    if (matched)
        memset(matched, 0, n);
    /* positions are kept in 32 bits of the index */
    if (m > UINT32_MAX)
        m = UINT32_MAX;
    size_t grams = m >= SEQ_RESYNC_GRAM ? m - SEQ_RESYNC_GRAM + 1 : 0;
    uint64_t *idx = malloc((grams ? grams : 1) * sizeof *idx);
    if (!idx)
        abort();
    for (size_t j = 0; j < grams; j++)
        idx[j] = (uint64_t)gram_hash(b + j) << 32 | j;
    qsort(idx, grams, sizeof *idx, cmp_u64);
    uint64_t same = 0;
    size_t i = 0, j = 0;
    while (i < n && j < m) {
        if (a[i] == b[j]) {
            if (matched)
                matched[i] = 1;
            same++, i++, j++;
            continue;
        }
        size_t best_i = 0, best_j = 0, best = SIZE_MAX;
        for (size_t di = 0; di < SEQ_RESYNC_WINDOW && i + di + SEQ_RESYNC_GRAM <= n && di < best;
             di++) {
            uint32_t h = gram_hash(a + i + di);
            uint64_t from = j;
            for (;;) {      /* hash collisions: try the next place with that hash */
                uint64_t pj = next_gram(idx, grams, h, from);
                if (pj == UINT64_MAX || pj - j >= SEQ_RESYNC_WINDOW || di + (pj - j) >= best)
                    break;
                if (!memcmp(a + i + di, b + pj, SEQ_RESYNC_GRAM * sizeof *a)) {
                    best = di + (size_t)(pj - j), best_i = i + di, best_j = (size_t)pj;
                    break;
                }
                from = pj + 1;
            }
        }
        if (best == SIZE_MAX) {   /* nothing in reach: skip the window on both sides */
            i += SEQ_RESYNC_WINDOW;
            j += SEQ_RESYNC_WINDOW;
        } else if (best_i == i && best_j == j) {
            i++, j++;             /* cannot happen (a[i] != b[j]); keeps the loop finite */
        } else {
            i = best_i;
            j = best_j;
        }
    }
    free(idx);
    return same;
}
