/* In-order agreement of two symbol sequences, for accuracy measures.
 *
 * seq_aligned walks both sequences together; at a difference it
 * resynchronizes at the nearest place (fewest symbols skipped on both sides)
 * where the next SEQ_RESYNC_GRAM symbols agree: first with each side at most
 * SEQ_RESYNC_WINDOW ahead, else with one side that far and the other any
 * distance (a loop that ran thousands of bytecodes longer in one sequence
 * than in the other), and when nothing recurs at all it skips that window on
 * both sides. The symbols it counts form a common subsequence, so it never
 * counts more than a longest common subsequence would; it is linear in the
 * length for sequences that mostly agree (a full LCS is quadratic, which
 * millions of bytecodes do not allow). */
#ifndef JPT_COMMON_SEQALIGN_H
#define JPT_COMMON_SEQALIGN_H

#include <stddef.h>
#include <stdint.h>

#define SEQ_RESYNC_GRAM 8
#define SEQ_RESYNC_WINDOW 4096

/* Symbols of a matched to b; when matched is not NULL, matched[i] is set to
 * 1 for each symbol of a that is (and 0 for the others). */
uint64_t seq_aligned(const uint64_t *a, size_t n, const uint64_t *b, size_t m, uint8_t *matched);

#endif
