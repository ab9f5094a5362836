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

static int cmp_u64_key(const void *k, const void *e)
{
    uint64_t x = *(const uint64_t *)k, y = *(const uint64_t *)e;
    return x < y ? -1 : x > y;
}

/* Positions of b per strip: 256 words, 16384 symbols. A strip's masks take
 * 2 KiB per distinct symbol in it (32 MiB at most), its row 2 KiB. */
enum { STRIP_WORDS = 256, STRIP = STRIP_WORDS * 64 };

uint64_t seq_lcs(const uint64_t *a, size_t n, const uint64_t *b, size_t m, uint8_t *gained)
{
    if (gained)
        memset(gained, 0, n);
    /* an equal start is matched as it is: an LCS of the rest plus it (an
     * equal end too, but it would change what a's prefixes gain) */
    size_t pre = 0;
    while (pre < n && pre < m && a[pre] == b[pre])
        pre++;
    if (gained)
        memset(gained, 1, pre);
    const uint64_t *x = a + pre, *y = b + pre;
    size_t nx = n - pre, ny = m - pre;
    uint64_t length = pre;
    if (!nx || !ny)
        return length;

    /* dense ids: the rank of each symbol among b's distinct ones, SIZE_MAX
     * for one of a that b does not have */
    uint64_t *distinct = malloc(ny * sizeof *distinct);
    size_t *xid = malloc(nx * sizeof *xid), *yid = malloc(ny * sizeof *yid);
    uint8_t *carry = calloc(nx, 1);
    if (!distinct || !xid || !yid || !carry)
        abort();
    memcpy(distinct, y, ny * sizeof *y);
    qsort(distinct, ny, sizeof *distinct, cmp_u64);
    size_t nd = 0;
    for (size_t j = 0; j < ny; j++)
        if (!nd || distinct[nd - 1] != distinct[j])
            distinct[nd++] = distinct[j];
    for (size_t j = 0; j < ny; j++)
        yid[j] = (size_t)((uint64_t *)bsearch(&y[j], distinct, nd, sizeof *distinct,
                                               cmp_u64_key) - distinct);
    for (size_t i = 0; i < nx; i++) {
        const uint64_t *at = bsearch(&x[i], distinct, nd, sizeof *distinct, cmp_u64_key);
        xid[i] = at ? (size_t)(at - distinct) : SIZE_MAX;
    }
    free(distinct);

    /* After x[i], bit j of a strip's row is 0 where the LCS of x[0..i] with
     * y[0..j] is one longer than with y[0..j-1]. The rows of one x[i] in
     * all strips form one long addition: carry[i] takes its carry from a
     * strip to the next, and out of the last one it is 1 where x[i]
     * lengthened the LCS with all of y. */
    uint32_t *slot = calloc(nd, sizeof *slot);  /* id -> its mask in the strip */
    uint64_t *masks = NULL, row[STRIP_WORDS];
    size_t masks_cap = 0;
    if (!slot)
        abort();
    for (size_t lo = 0; lo < ny; lo += STRIP) {
        size_t hi = lo + STRIP < ny ? lo + STRIP : ny;
        size_t words = (hi - lo + 63) / 64;
        uint32_t used = 1;                  /* mask 0 stays empty */
        for (size_t j = lo; j < hi; j++)
            if (!slot[yid[j]])
                slot[yid[j]] = used++;
        if (used * words > masks_cap) {
            masks_cap = used * words;
            free(masks);
            masks = malloc(masks_cap * sizeof *masks);
            if (!masks)
                abort();
        }
        memset(masks, 0, used * words * sizeof *masks);
        for (size_t j = lo; j < hi; j++)
            masks[slot[yid[j]] * words + (j - lo) / 64] |= 1ull << ((j - lo) % 64);
        memset(row, 0xff, sizeof row);      /* past hi: ones, which pass a carry on */
        for (size_t i = 0; i < nx; i++) {
            uint32_t s = xid[i] == SIZE_MAX ? 0 : slot[xid[i]];
            unsigned c = carry[i];
            if (!s && !c)
                continue;                   /* the row stays as it was */
            const uint64_t *mk = masks + (size_t)s * words;
            for (size_t w = 0; w < words; w++) {
                uint64_t v = row[w], u = v & mk[w];
                uint64_t sum = v + u;
                unsigned out = sum < v;
                sum += c;
                out |= sum < c;
                row[w] = sum | (v - u);
                c = out;
            }
            carry[i] = (uint8_t)c;
        }
        for (size_t j = lo; j < hi; j++)
            slot[yid[j]] = 0;
    }
    for (size_t i = 0; i < nx; i++) {
        length += carry[i];
        if (gained)
            gained[pre + i] = carry[i];
    }
    free(slot);
    free(masks);
    free(xid);
    free(yid);
    free(carry);
    return length;
}
