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

/* A sequence with its grams indexed: each as hash << 32 | position, sorted. */
typedef struct indexed {
    const uint64_t *s;
    size_t len, grams;
    uint64_t *idx;
} indexed;

static void index_grams(indexed *x, const uint64_t *s, size_t len)
{
    x->s = s;
    x->len = len;
    x->grams = len >= SEQ_RESYNC_GRAM ? len - SEQ_RESYNC_GRAM + 1 : 0;
    x->idx = malloc((x->grams ? x->grams : 1) * sizeof *x->idx);
    if (!x->idx)
        abort();
    for (size_t j = 0; j < x->grams; j++)
        x->idx[j] = (uint64_t)gram_hash(s + j) << 32 | j;
    if (x->grams > 1)
        qsort(x->idx, x->grams, sizeof *x->idx, cmp_u64);
}

/* The first position of x in [from, to) where the gram g occurs, or
 * UINT64_MAX. */
static uint64_t next_gram(const indexed *x, const uint64_t *g, uint64_t from, uint64_t to)
{
    uint32_t h = gram_hash(g);
    for (;;) {
        uint64_t want = (uint64_t)h << 32 | from;
        size_t lo = 0, hi = x->grams;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (x->idx[mid] < want)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == x->grams || x->idx[lo] >> 32 != h)
            return UINT64_MAX;
        uint64_t at = (uint32_t)x->idx[lo];
        if (at >= to)
            return UINT64_MAX;
        if (!memcmp(x->s + at, g, SEQ_RESYNC_GRAM * sizeof *g))
            return at;
        from = at + 1;      /* a hash collision: the next place with that hash */
    }
}

/* The resynchronization after a difference at (i, j) that skips fewest
 * symbols in all: the next SEQ_RESYNC_GRAM symbols agree there. One side
 * skips fewer than SEQ_RESYNC_WINDOW; the other as many (near) or any
 * number (far). 0 when there is none. */
static int resync(const indexed *a, size_t i, const indexed *b, size_t j, int far,
                  size_t *to_i, size_t *to_j)
{
    size_t best = SIZE_MAX;
    for (size_t d = 0; d < SEQ_RESYNC_WINDOW && d < best; d++) {
        if (i + d + SEQ_RESYNC_GRAM <= a->len) {
            uint64_t to = far ? b->len : j + SEQ_RESYNC_WINDOW;
            uint64_t pj = next_gram(b, a->s + i + d, j, to);
            if (pj != UINT64_MAX && d + (pj - j) < best)
                best = d + (size_t)(pj - j), *to_i = i + d, *to_j = (size_t)pj;
        }
        if (far && j + d + SEQ_RESYNC_GRAM <= b->len) {
            uint64_t pi = next_gram(a, b->s + j + d, i, a->len);
            if (pi != UINT64_MAX && d + (pi - i) < best)
                best = d + (size_t)(pi - i), *to_i = (size_t)pi, *to_j = j + d;
        }
    }
    return best != SIZE_MAX;
}

uint64_t seq_aligned(const uint64_t *a, size_t n, const uint64_t *b, size_t m, uint8_t *matched)
{
    if (matched)
        memset(matched, 0, n);
    /* positions are kept in 32 bits of the index */
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    if (m > UINT32_MAX)
        m = UINT32_MAX;
    indexed ia, ib;
    index_grams(&ia, a, n);
    index_grams(&ib, b, m);
    uint64_t same = 0;
    size_t i = 0, j = 0;
    while (i < n && j < m) {
        if (a[i] == b[j]) {
            if (matched)
                matched[i] = 1;
            same++, i++, j++;
            continue;
        }
        size_t to_i, to_j;
        if (resync(&ia, i, &ib, j, 0, &to_i, &to_j) || resync(&ia, i, &ib, j, 1, &to_i, &to_j)) {
            if (to_i == i && to_j == j)
                to_i++, to_j++;   /* cannot happen (a[i] != b[j]); keeps the loop finite */
            i = to_i;
            j = to_j;
        } else {                  /* no gram in reach recurs: skip the window on both sides */
            i += SEQ_RESYNC_WINDOW;
            j += SEQ_RESYNC_WINDOW;
        }
    }
    free(ia.idx);
    free(ib.idx);
    return same;
}
