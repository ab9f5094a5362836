/* Units of the in-order sequence agreement (common/seqalign.h). */
#include <criterion/criterion.h>

#include <glib.h>

#include "common/seqalign.h"

/* Length of a longest common subsequence, by dynamic programming. */
static uint64_t lcs(const uint64_t *a, size_t n, const uint64_t *b, size_t m)
{
    uint32_t *row = g_new0(uint32_t, m + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t diag = 0;
        for (size_t j = 0; j < m; j++) {
            uint32_t up = row[j + 1];
            row[j + 1] = a[i] == b[j] ? diag + 1 : MAX(up, row[j]);
            diag = up;
        }
    }
    uint64_t r = row[m];
    g_free(row);
    return r;
}

static size_t loop(uint64_t *out, size_t at, int iterations)
{
    for (int k = 0; k < iterations; k++)
        for (uint64_t s = 10; s < 20; s++)
            out[at++] = s;
    return at;
}

Test(seqalign, identical_sequences_match_whole)
{
    uint64_t a[100];
    for (int i = 0; i < 100; i++)
        a[i] = (uint64_t)(i * 7 % 13);
    uint8_t ok[100];
    cr_assert_eq(seq_aligned(a, 100, a, 100, ok), 100);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(ok[i], 1);
}

/* The same code with a loop that ran 3 times in one and 5 times in the other:
 * the code after the loop is found again (the old within-16 matching lost
 * it for good). */
Test(seqalign, resynchronizes_after_a_different_loop_count)
{
    uint64_t a[200], b[200];
    size_t n = 0, m = 0;
    for (uint64_t s = 1; s <= 9; s++)
        a[n++] = b[m++] = s;
    n = loop(a, n, 3);
    m = loop(b, m, 5);
    for (uint64_t s = 30; s < 60; s++)
        a[n++] = b[m++] = s;
    uint8_t ok[200];
    uint64_t same = seq_aligned(a, n, b, m, ok);
    cr_assert_eq(same, n, "%llu of %zu matched", (unsigned long long)same, n);
    cr_assert_eq(same, lcs(a, n, b, m));
}

/* A loop that ran 5000 symbols longer in one sequence than in the other,
 * more than the window either side may skip at once: the code after it is
 * still found again (the side that ran the loop skips it all). */
Test(seqalign, resynchronizes_past_a_difference_longer_than_the_window)
{
    enum { EXTRA = 5000 };
    cr_assert_gt(EXTRA, SEQ_RESYNC_WINDOW);
    uint64_t *a = g_new(uint64_t, 200), *b = g_new(uint64_t, 200 + EXTRA);
    size_t n = 0, m = 0;
    for (uint64_t s = 1000; s < 1100; s++)
        a[n++] = b[m++] = s;
    m = loop(b, m, EXTRA / 10);
    for (uint64_t s = 2000; s < 2100; s++)
        a[n++] = b[m++] = s;
    for (int swap = 0; swap < 2; swap++) {
        uint64_t same = swap ? seq_aligned(b, m, a, n, NULL) : seq_aligned(a, n, b, m, NULL);
        cr_assert_eq(same, n, "%s: %llu of %zu matched", swap ? "b against a" : "a against b",
                     (unsigned long long)same, n);
    }
    cr_assert_eq(lcs(a, n, b, m), n);
    g_free(a);
    g_free(b);
}

/* Whatever the inputs, what is counted is a common subsequence: never more
 * than an LCS, and the symbols marked matched are that many. */
Test(seqalign, never_more_than_lcs)
{
    GRand *rng = g_rand_new_with_seed(7);
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)g_rand_int_range(rng, 0, 120);
        size_t m = (size_t)g_rand_int_range(rng, 0, 120);
        int alphabet = g_rand_int_range(rng, 1, 5);
        uint64_t a[120], b[120];
        for (size_t i = 0; i < n; i++)
            a[i] = (uint64_t)g_rand_int_range(rng, 0, alphabet);
        for (size_t j = 0; j < m; j++)
            b[j] = (uint64_t)g_rand_int_range(rng, 0, alphabet);
        uint8_t ok[120];
        uint64_t same = seq_aligned(a, n, b, m, ok);
        uint64_t marked = 0;
        for (size_t i = 0; i < n; i++)
            marked += ok[i];
        cr_assert_eq(marked, same);
        cr_assert_leq(same, lcs(a, n, b, m), "round %d: %llu > LCS", round,
                      (unsigned long long)same);
    }
    g_rand_free(rng);
}

Test(seqalign, empty_and_disjoint)
{
    uint64_t a[20], b[20];
    for (int i = 0; i < 20; i++) {
        a[i] = (uint64_t)i;
        b[i] = (uint64_t)(100 + i);
    }
    cr_assert_eq(seq_aligned(a, 0, b, 20, NULL), 0);
    cr_assert_eq(seq_aligned(a, 20, b, 0, NULL), 0);
    cr_assert_eq(seq_aligned(a, 20, b, 20, NULL), 0);
}

/* The exact LCS equals the dynamic program's on random sequences, small
 * alphabets (many equal symbols) and large ones, ends equal or not, b
 * longer than one strip of the bit-parallel rows; what each stretch of a
 * gains adds up to the LCS of a's prefixes. */
Test(seqalign, lcs_is_exact)
{
    GRand *rng = g_rand_new_with_seed(11);
    for (int round = 0; round < 120; round++) {
        size_t n = (size_t)g_rand_int_range(rng, 0, 160);
        size_t m = round % 10 == 0 ? (size_t)g_rand_int_range(rng, 16000, 50000)
                                   : (size_t)g_rand_int_range(rng, 0, 300);
        int alphabet = round % 3 == 0 ? 400 : g_rand_int_range(rng, 1, 6);
        uint64_t *a = g_new(uint64_t, n + 1), *b = g_new(uint64_t, m + 1);
        for (size_t i = 0; i < n; i++)
            a[i] = (uint64_t)g_rand_int_range(rng, 0, alphabet) * 0x9e3779b97f4a7c15ull;
        for (size_t j = 0; j < m; j++)
            b[j] = (uint64_t)g_rand_int_range(rng, 0, alphabet) * 0x9e3779b97f4a7c15ull;
        if (round % 4 == 1 && n && m)       /* equal ends */
            a[0] = b[0], a[n - 1] = b[m - 1];
        uint8_t *gained = g_new(uint8_t, n + 1);
        uint64_t want = lcs(a, n, b, m);
        cr_assert_eq(seq_lcs(a, n, b, m, gained), want, "round %d (%zu x %zu)", round, n, m);
        cr_assert_eq(seq_lcs(b, m, a, n, NULL), want, "round %d, swapped", round);
        uint64_t upto = 0;
        for (size_t i = 0; i < n; i++) {
            upto += gained[i];
            if (i % 37 == 0 || i == n - 1)
                cr_assert_eq(upto, lcs(a, i + 1, b, m), "round %d: prefix %zu", round, i + 1);
        }
        g_free(gained);
        g_free(a);
        g_free(b);
    }
    g_rand_free(rng);
}

/* A fill that ran a loop's two iteration kinds in another order than its
 * hole: the greedy alignment resynchronizes at the nearest agreement and
 * skips iterations it could have matched; the LCS matches them. */
Test(seqalign, lcs_counts_what_the_greedy_resynchronization_skips)
{
    enum { ITER = 400 };
    uint64_t *a = g_new(uint64_t, ITER * 30), *b = g_new(uint64_t, ITER * 30);
    size_t n = 0, m = 0;
    GRand *rng = g_rand_new_with_seed(3);
    for (int k = 0; k < ITER; k++) {
        /* the loop head, then one of two bodies the data picks */
        for (int pass = 0; pass < 2; pass++) {
            uint64_t *s = pass ? b : a;
            size_t *len = pass ? &m : &n;
            int kind = g_rand_int_range(rng, 0, 3) == 0;
            for (uint64_t h = 1; h <= 10; h++)
                s[(*len)++] = h;
            for (uint64_t t = 0; t < (kind ? 12u : 4u); t++)
                s[(*len)++] = (kind ? 100 : 200) + t;
        }
    }
    uint64_t exact = seq_lcs(a, n, b, m, NULL), greedy = seq_aligned(a, n, b, m, NULL);
    cr_assert_eq(exact, lcs(a, n, b, m));
    cr_assert_gt(exact, greedy, "LCS %llu, greedy %llu", (unsigned long long)exact,
                 (unsigned long long)greedy);
    g_rand_free(rng);
    g_free(a);
    g_free(b);
}

Test(seqalign, lcs_of_empty_and_disjoint)
{
    uint64_t a[20], b[20];
    for (int i = 0; i < 20; i++) {
        a[i] = (uint64_t)i;
        b[i] = (uint64_t)(100 + i);
    }
    uint8_t gained[20];
    cr_assert_eq(seq_lcs(a, 0, b, 20, NULL), 0);
    cr_assert_eq(seq_lcs(a, 20, b, 0, gained), 0);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(gained[i], 0);
    cr_assert_eq(seq_lcs(a, 20, b, 20, NULL), 0);
    cr_assert_eq(seq_lcs(a, 20, a, 20, gained), 20);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(gained[i], 1);
}
